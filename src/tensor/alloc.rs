//! Fallible, huge-page-friendly allocation of element buffers: an error value instead of an
//! abort when memory is short, and on Linux large buffers advised for transparent huge pages
//! before their first touch (large strided walks are dominated by TLB misses otherwise).

use crate::error::{Error, Result};
use crate::tensor::Element;

/// Buffers at least this large are advised for huge pages.
const HUGE_MIN_BYTES: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// Buffers at least this large are taken from the allocator already zeroed
/// (`alloc_zeroed`): glibc maps them fresh (its largest mmap threshold is 32 MiB), so their
/// pages are zero without being written and are first touched, as huge pages, by whoever
/// writes them (a workspace's transposition, the result's GEMM), on all its threads.
/// Zeroing them here instead was a single-threaded pass over the whole buffer: a first
/// execution of tccg-8 (f64, a 604 MB packed A) spent 190-510 ms packing A against 43 ms
/// once the workspace was pooled.
#[cfg(not(miri))]
const ZERO_PAGES_MIN_BYTES: usize = 32 << 20;
/// Under Miri, small enough that the tests take the `alloc_zeroed` path.
#[cfg(miri)]
const ZERO_PAGES_MIN_BYTES: usize = 4 << 10;

/// Buffers at least this large are checked against the memory the system has available
/// before they are allocated ([`ensure_available`]): Linux hands out more than it has and
/// kills the process when the pages are touched, so without the check a call that cannot
/// fit ends in an OOM kill, not an error.
///
/// ```
/// assert_eq!(ttgt::tensor::CHECK_AVAILABLE_MIN_BYTES, 256 << 20);
/// ```
pub const CHECK_AVAILABLE_MIN_BYTES: usize = 256 << 20;

/// The memory the system can give without swapping (Linux: `MemAvailable` of
/// `/proc/meminfo`), or `None` where that is not known.
///
/// ```
/// if let Some(b) = ttgt::tensor::available_memory_bytes() {
///     assert!(b > 0);
/// }
/// ```
pub fn available_memory_bytes() -> Option<usize> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib.saturating_mul(1024))
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        None
    }
}

/// An [`Error::Allocation`] naming `what` when a buffer of `bytes` (at least
/// [`CHECK_AVAILABLE_MIN_BYTES`]) exceeds the memory the system has available; `Ok` for
/// smaller buffers and where that memory is not known.
///
/// ```
/// assert!(ttgt::tensor::ensure_available(1 << 20, "a small buffer").is_ok());
/// assert!(ttgt::tensor::ensure_available(usize::MAX / 2, "a huge buffer").is_err());
/// ```
pub fn ensure_available(bytes: usize, what: &str) -> Result<()> {
    let err = || Error::Allocation {
        bytes,
        what: what.to_string(),
    };
    if bytes >= isize::MAX as usize {
        return Err(err());
    }
    if bytes < CHECK_AVAILABLE_MIN_BYTES {
        return Ok(());
    }
    match available_memory_bytes() {
        Some(free) if bytes > free => Err(err()),
        _ => Ok(()),
    }
}

/// A zero-filled buffer of `n` elements, or [`Error::Allocation`] naming `what` (also when
/// it is larger than the memory the system has available, [`ensure_available`]).
pub(crate) fn zeroed<T: Element>(n: usize, what: &str) -> Result<Vec<T>> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    let err = || Error::Allocation {
        bytes,
        what: what.to_string(),
    };
    ensure_available(bytes, what)?;
    if bytes >= ZERO_PAGES_MIN_BYTES {
        let layout = std::alloc::Layout::array::<T>(n).map_err(|_| err())?;
        // SAFETY: `layout` is that of `[T; n]` with `n > 0` elements of a non-zero-sized
        // type (its size is at least ZERO_PAGES_MIN_BYTES), as `alloc_zeroed` requires.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
        if ptr.is_null() {
            return Err(err());
        }
        advise_huge(ptr as *mut u8, layout.size());
        // SAFETY: `ptr` comes from the global allocator with the layout of `[T; n]`, which
        // is what a `Vec<T>` of capacity `n` deallocates with; all `n` elements are
        // initialised, since every `Element` (sealed: f32, f64, Complex32, Complex64) is
        // plain data whose all-zero bytes are its zero.
        return Ok(unsafe { Vec::from_raw_parts(ptr, n, n) });
    }
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| err())?;
    advise_huge(v.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>());
    v.resize(n, T::zero());
    Ok(v)
}

/// A zero-filled buffer with room for `n` elements starting at a 64-byte boundary: returns
/// the buffer and the offset of that first aligned element (so that SIMD rows can use
/// aligned and non-temporal stores).
pub(crate) fn zeroed_aligned<T: Element>(n: usize, what: &str) -> Result<(Vec<T>, usize)> {
    let es = std::mem::size_of::<T>();
    let extra = 64 / es;
    let v = zeroed::<T>(
        n.checked_add(extra).ok_or_else(|| Error::Allocation {
            bytes: usize::MAX,
            what: what.to_string(),
        })?,
        what,
    )?;
    let off = (0..extra)
        .find(|k| (v.as_ptr() as usize + k * es).is_multiple_of(64))
        .unwrap_or(0);
    Ok((v, off))
}

/// Asks the kernel to back the 2 MiB-aligned interior of `[ptr, ptr + bytes)` with
/// transparent huge pages. Returns whether the advice was taken (always `false` off Linux or
/// for small buffers). Purely advisory: memory contents are unaffected.
pub fn advise_huge(ptr: *mut u8, bytes: usize) -> bool {
    if bytes < HUGE_MIN_BYTES {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let start = (ptr as usize).div_ceil(HUGE_PAGE) * HUGE_PAGE;
        let end = (ptr as usize + bytes) / HUGE_PAGE * HUGE_PAGE;
        if end <= start {
            return false;
        }
        // SAFETY: madvise only changes how the kernel backs pages of a range we own (inside
        // the allocation); MADV_HUGEPAGE never changes their contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ptr;
        false
    }
}

/// The system's transparent-huge-page mode (`always`, `madvise`, `never`), if known.
///
/// ```
/// let mode = ttgt::tensor::huge_page_mode();
/// assert!(mode.is_none() || ["always", "madvise", "never"].contains(&mode.unwrap().as_str()));
/// ```
pub fn huge_page_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let a = s.find('[')?;
    let b = s[a..].find(']')?;
    Some(s[a + 1..a + b].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::{Complex32, Complex64};

    /// Buffers on both sides of `ZERO_PAGES_MIN_BYTES`: every element zero, the length
    /// asked for, writable to the last element.
    fn zero_filled<T: Element>() {
        for n in [1000, ZERO_PAGES_MIN_BYTES / std::mem::size_of::<T>() + 3] {
            let mut v = zeroed::<T>(n, "test buffer").unwrap();
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&x| x == T::zero()));
            v[n - 1] = T::one();
            assert_eq!(v[n - 1], T::one());
        }
    }

    #[test]
    fn large_and_small_buffers_are_zero_filled() {
        zero_filled::<f32>();
        zero_filled::<f64>();
        zero_filled::<Complex32>();
        zero_filled::<Complex64>();
    }

    /// A buffer larger than the available memory (but not than the address space, so that
    /// the allocator itself would hand it out) is an error before anything is mapped.
    #[test]
    #[cfg_attr(miri, ignore)] // no /proc under Miri
    fn buffers_beyond_the_available_memory_are_errors() {
        let Some(free) = available_memory_bytes() else {
            return; // not known on this system: nothing to check against
        };
        let n = (free + (1 << 30)) / 8;
        let e = zeroed::<f64>(n, "a buffer beyond the free memory").unwrap_err();
        assert!(matches!(e, Error::Allocation { .. }), "{e}");
        assert!(zeroed::<f64>(1 << 20, "a small buffer").is_ok());
    }

    #[test]
    fn impossible_sizes_are_allocation_errors() {
        let e = zeroed::<f64>(usize::MAX / 4, "a huge buffer").unwrap_err();
        assert!(matches!(e, Error::Allocation { .. }), "{e}");
    }
}

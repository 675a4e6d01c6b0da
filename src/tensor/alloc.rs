//! Fallible, huge-page-friendly allocation of element buffers: an error value instead of an
//! abort when memory is short, and on Linux large buffers advised for transparent huge pages
//! before their first touch (large strided walks are dominated by TLB misses otherwise).

use crate::error::{Error, Result};
use crate::tensor::Element;

/// Buffers at least this large are advised for huge pages.
const HUGE_MIN_BYTES: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// A zero-filled buffer of `n` elements, or [`Error::Allocation`] naming `what`.
pub(crate) fn zeroed<T: Element>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::Allocation {
        bytes: n.saturating_mul(std::mem::size_of::<T>()),
        what: what.to_string(),
    })?;
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

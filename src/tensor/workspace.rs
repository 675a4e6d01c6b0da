//! Reused workspace buffers: contraction plans pack operands and hold GEMM results in
//! temporaries that can be hundreds of MiB. Allocating and zero-filling them on every
//! execution costs a full memory pass plus a page fault per page (more than the transposes
//! themselves on large cases), so finished buffers go back to a process-wide pool and the
//! next execution that needs as many elements of the same type takes one.
//!
//! Reuse never changes results: every consumer writes a buffer completely before reading it
//! (packs are transposes with `beta = 0`, GEMM temporaries start with `beta = 0`, which never
//! reads C). The pool keeps at most [`workspace_retention`] bytes (1/8 of physical memory
//! by default, at most 4 GiB); [`release_workspace`] frees everything it holds, and buffers of
//! plans made under a workspace limit are never kept.

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use super::alloc::zeroed;
use super::Element;
use crate::error::{Error, Result};

/// One pooled buffer: its element type, its size in bytes, and the `Vec<T>` itself.
struct Entry {
    ty: TypeId,
    bytes: usize,
    buf: Box<dyn Any + Send>,
}

#[derive(Default)]
struct Pool {
    /// Oldest first (evicted first).
    entries: VecDeque<Entry>,
    bytes: usize,
}

fn pool() -> &'static Mutex<Pool> {
    static P: OnceLock<Mutex<Pool>> = OnceLock::new();
    P.get_or_init(Default::default)
}

/// `usize::MAX` until set or first read (then the default is computed once).
static RETENTION: AtomicUsize = AtomicUsize::new(usize::MAX);

fn default_retention() -> usize {
    // Not under Miri, which does not implement `sysconf(_SC_PHYS_PAGES)` (`.ci/miri.sh`
    // runs the workspace users with the fallback below).
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        const CAP: usize = 4 << 30;
        // SAFETY: sysconf only reads system configuration values.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return ((pages as usize).saturating_mul(size as usize) / 8).min(CAP);
        }
    }
    1 << 30
}

/// Bytes of finished workspace buffers the process keeps for reuse.
///
/// ```
/// assert!(ttgt::tensor::workspace_retention() > 0);
/// ```
pub fn workspace_retention() -> usize {
    let r = RETENTION.load(Ordering::Relaxed);
    if r != usize::MAX {
        return r;
    }
    let d = default_retention();
    RETENTION.store(d, Ordering::Relaxed);
    d
}

/// Sets how many bytes of finished workspace buffers the process keeps for reuse (0 keeps
/// none); buffers beyond the new bound are freed now.
///
/// ```
/// let before = ttgt::tensor::workspace_retention();
/// ttgt::tensor::set_workspace_retention(1 << 20);
/// assert_eq!(ttgt::tensor::workspace_retention(), 1 << 20);
/// ttgt::tensor::set_workspace_retention(before);
/// ```
pub fn set_workspace_retention(bytes: usize) {
    RETENTION.store(bytes.min(usize::MAX - 1), Ordering::Relaxed);
    let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
    evict(&mut p, bytes);
}

/// Frees every workspace buffer the process keeps for reuse; returns the bytes freed.
///
/// ```
/// let a = ndarray::Array2::<f64>::ones((40, 50));
/// let b = ndarray::Array2::<f64>::ones((40, 60));
/// let c = ttgt::contract("ki,kj->ji", &a, &b).unwrap(); // may pack and keep buffers
/// assert_eq!(c[[0, 0]], 40.0);
/// ttgt::tensor::release_workspace();
/// assert_eq!(ttgt::tensor::retained_workspace_bytes(), 0);
/// ```
pub fn release_workspace() -> usize {
    let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
    let freed = p.bytes;
    p.entries.clear();
    p.bytes = 0;
    freed
}

/// Bytes of workspace buffers the pool holds now.
///
/// ```
/// ttgt::tensor::release_workspace();
/// assert_eq!(ttgt::tensor::retained_workspace_bytes(), 0);
/// ```
pub fn retained_workspace_bytes() -> usize {
    pool().lock().unwrap_or_else(|e| e.into_inner()).bytes
}

fn evict(p: &mut Pool, bound: usize) {
    while p.bytes > bound {
        match p.entries.pop_front() {
            Some(e) => p.bytes -= e.bytes,
            None => break,
        }
    }
}

/// A workspace buffer of at least the requested elements plus alignment slack. Dereferences
/// to its `Vec<T>`; on drop it returns to the pool (when `retain` and the pool has room).
pub(crate) struct Workspace<T: Element> {
    buf: Vec<T>,
    retain: bool,
}

impl<T: Element> Default for Workspace<T> {
    fn default() -> Self {
        Workspace {
            buf: Vec::new(),
            retain: false,
        }
    }
}

impl<T: Element> Deref for Workspace<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.buf
    }
}

impl<T: Element> DerefMut for Workspace<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.buf
    }
}

impl<T: Element> Drop for Workspace<T> {
    fn drop(&mut self) {
        let bytes = self.buf.len() * std::mem::size_of::<T>();
        if !self.retain || bytes == 0 {
            return;
        }
        let bound = workspace_retention();
        if bytes > bound {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
        p.entries.push_back(Entry {
            ty: TypeId::of::<Vec<T>>(),
            bytes,
            buf: Box::new(buf),
        });
        p.bytes += bytes;
        evict(&mut p, bound);
    }
}

/// A buffer with room for `n` elements from a 64-byte boundary: the smallest pooled buffer
/// of this type that is large enough, or a new zero-filled one. Returns it with the offset of
/// the aligned first element. Its contents are unspecified (zeros or a previous execution's
/// values): the caller writes before it reads. `retain` says whether the buffer goes back to
/// the pool when dropped.
pub(crate) fn take_aligned<T: Element>(
    n: usize,
    retain: bool,
    what: &str,
) -> Result<(Workspace<T>, usize)> {
    let es = std::mem::size_of::<T>();
    let extra = 64 / es;
    let need = n.checked_add(extra).ok_or_else(|| Error::Allocation {
        bytes: usize::MAX,
        what: what.to_string(),
    })?;
    let pooled = {
        let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
        let ty = TypeId::of::<Vec<T>>();
        let best = p
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.ty == ty && e.bytes >= need * es)
            .min_by_key(|(_, e)| e.bytes)
            .map(|(i, _)| i);
        match best.and_then(|i| p.entries.remove(i)) {
            Some(e) => {
                p.bytes -= e.bytes;
                e.buf.downcast::<Vec<T>>().ok().map(|b| *b)
            }
            None => None,
        }
    };
    let buf = match pooled {
        Some(b) => b,
        None => zeroed::<T>(need, what)?,
    };
    let off = (0..extra)
        .find(|k| (buf.as_ptr() as usize + k * es).is_multiple_of(64))
        .unwrap_or(0);
    Ok((Workspace { buf, retain }, off))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_aligned_and_bounded() {
        // other tests share the pool: use a type-specific, exact size to find our buffer
        let (mut w, off) = take_aligned::<f32>(123_457, true, "test").unwrap();
        assert_eq!((w.as_ptr() as usize + off * 4) % 64, 0);
        assert!(w.len() >= 123_457 + off);
        w[off] = 7.0;
        let ptr = w.as_ptr();
        drop(w);
        let (w2, off2) = take_aligned::<f32>(123_457, true, "test").unwrap();
        // taken back from the pool (unless a concurrent test took it first)
        if w2.as_ptr() == ptr {
            assert_eq!(w2[off2], 7.0);
        }
        drop(w2);
        let (w3, _) = take_aligned::<f32>(1000, false, "test").unwrap();
        let held = retained_workspace_bytes();
        drop(w3); // not retained
        assert!(retained_workspace_bytes() <= held.max(workspace_retention()));
    }
}

//! How many threads a call runs on when its options do not say: a per-thread override, else
//! a process-wide setting, else the size of the current rayon pool.
//!
//! Plans resolve the count once, when they are made, and the plan caches key on the resolved
//! count, so a plan made for two threads is never reused for a call that should run on one.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// The largest thread count a call accepts: far above any machine's cores (oversubscription
/// included), low enough that per-thread bookkeeping cannot overflow or exhaust memory.
///
/// ```
/// let e = ttgt::threads::resolve(Some(ttgt::threads::MAX_THREADS + 1)).unwrap_err();
/// assert!(e.to_string().contains("threads requested"));
/// ```
pub const MAX_THREADS: usize = 1024;

/// The thread count of a call: `requested`, else [`default_threads`]; at least 1, and an
/// [`Error::Threads`] above [`MAX_THREADS`].
///
/// ```
/// assert_eq!(ttgt::threads::resolve(Some(0)).unwrap(), 1);
/// assert_eq!(ttgt::threads::resolve(Some(3)).unwrap(), 3);
/// assert!(ttgt::threads::resolve(None).unwrap() >= 1);
/// assert!(ttgt::threads::resolve(Some(1 << 62)).is_err());
/// ```
pub fn resolve(requested: Option<usize>) -> Result<usize> {
    let n = requested.unwrap_or_else(default_threads).max(1);
    if n > MAX_THREADS {
        return Err(Error::Threads {
            requested: n,
            max: MAX_THREADS,
        });
    }
    Ok(n)
}

/// Process-wide default; 0: not set.
static GLOBAL: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Override for calls made from this thread; 0: not set.
    static LOCAL: Cell<usize> = const { Cell::new(0) };
}

/// Threads for a call whose options leave the count open: this thread's override
/// ([`with_threads`]), else the process-wide setting ([`set_num_threads`]), else the current
/// rayon pool's size (the cores, outside any pool).
///
/// ```
/// ttgt::threads::set_num_threads(Some(3));
/// assert_eq!(ttgt::threads::default_threads(), 3);
/// assert_eq!(ttgt::threads::with_threads(1, ttgt::threads::default_threads), 1);
/// ttgt::threads::set_num_threads(None);
/// assert_eq!(ttgt::threads::default_threads(), rayon::current_num_threads());
/// ```
pub fn default_threads() -> usize {
    match LOCAL.with(Cell::get) {
        0 => match GLOBAL.load(Ordering::Relaxed) {
            0 => rayon::current_num_threads(),
            n => n,
        },
        n => n,
    }
}

/// Sets the process-wide default (`None`: back to the rayon pool's size). A count of 0 is
/// taken as `None`.
///
/// ```
/// ttgt::threads::set_num_threads(Some(1));
/// assert_eq!(ttgt::threads::num_threads_setting(), Some(1));
/// ttgt::threads::set_num_threads(None);
/// assert_eq!(ttgt::threads::num_threads_setting(), None);
/// ```
pub fn set_num_threads(n: Option<usize>) {
    GLOBAL.store(n.unwrap_or(0), Ordering::Relaxed);
}

/// The process-wide setting, if one was made.
///
/// ```
/// assert!(ttgt::threads::num_threads_setting().is_none_or(|n| n > 0));
/// ```
pub fn num_threads_setting() -> Option<usize> {
    match GLOBAL.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// Runs `f` with calls from this thread defaulting to `n` threads (0: no override), and
/// restores the previous override afterwards, also when `f` unwinds.
///
/// ```
/// let inner = ttgt::threads::with_threads(2, || ttgt::threads::with_threads(1, ttgt::threads::default_threads));
/// assert_eq!(inner, 1);
/// assert_eq!(ttgt::threads::with_threads(2, ttgt::threads::default_threads), 2);
/// ```
pub fn with_threads<R>(n: usize, f: impl FnOnce() -> R) -> R {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            LOCAL.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(LOCAL.with(|c| c.replace(n)));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_is_per_thread() {
        with_threads(3, || {
            assert_eq!(default_threads(), 3);
            let other = std::thread::spawn(|| LOCAL.with(Cell::get)).join().unwrap();
            assert_eq!(other, 0);
        });
        assert_eq!(LOCAL.with(Cell::get), 0);
    }
}

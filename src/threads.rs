//! How many threads a call runs on when its options do not say: a per-thread override, else
//! a process-wide setting, else the size of the current rayon pool.
//!
//! Plans resolve the count once, when they are made, and the plan caches key on the resolved
//! count, so a plan made for two threads is never reused for a call that should run on one.
//! A call on a count other than its caller's pool runs in a kept pool of that size
//! (`on_threads`; at most [`MAX_POOLS`] kept, [`release_pools`] drops them).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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

/// Most rayon pools [`on_threads`] keeps for thread counts other than the caller's (the least
/// recently used beyond it is dropped, its threads end when its last user leaves).
pub const MAX_POOLS: usize = 4;

/// Kept pools with their thread counts, most recently used last.
type Pools = Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>>;

/// The pools of [`on_threads`].
fn pools() -> &'static Pools {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    POOLS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Drops the rayon pools kept for calls on a thread count other than their caller's pool
/// (their threads end once no call runs on them) and returns how many there were. The next
/// such call builds its pool again.
///
/// ```
/// let a = ndarray::Array2::<f64>::ones((64, 64));
/// let plan = ttgt::ContractionPlan::with_options(
///     "ij,jk->ik",
///     &[ttgt::Layout::of(&a), ttgt::Layout::of(&a)],
///     &ttgt::Layout::of(&a),
///     ttgt::DType::F64,
///     &ttgt::plan::PlanOptions { threads: Some(3), ..Default::default() },
/// )
/// .unwrap();
/// let mut c = ndarray::Array2::<f64>::zeros((64, 64));
/// let v = ttgt::tensor::StridedView::of(&a);
/// plan.execute(1.0, &[v.clone(), v], 0.0, &mut ttgt::tensor::StridedViewMut::of(&mut c).unwrap())
///     .unwrap();
/// assert!(ttgt::threads::kept_pools() <= ttgt::threads::MAX_POOLS);
/// ttgt::threads::release_pools();
/// assert_eq!(ttgt::threads::kept_pools(), 0);
/// ```
pub fn release_pools() -> usize {
    let mut pools = pools().lock().unwrap_or_else(|p| p.into_inner());
    let n = pools.len();
    pools.clear();
    n
}

/// How many pools [`on_threads`] keeps now (at most [`MAX_POOLS`]).
pub fn kept_pools() -> usize {
    pools().lock().unwrap_or_else(|p| p.into_inner()).len()
}

/// Whether a parallel region on `threads` threads entered from here has to wake sleeping
/// workers: the caller is not a worker of a rayon pool of that size (tens of microseconds a
/// region, against under one from inside such a pool; `docs/TUNING.md`). Small work then runs
/// on the calling thread ([`crate::transpose::PARALLEL_MIN_BYTES`], and the contraction's
/// parallel GEMM loops).
pub(crate) fn wakes_threads(threads: usize) -> bool {
    rayon::current_thread_index().is_none() || rayon::current_num_threads() != threads
}

/// Runs `f` on a rayon pool of `threads` threads: right here when this thread is a worker of
/// such a pool, else installed in one (a caller outside any pool pays one wake-up for the
/// whole of `f`, not one per parallel region inside it: a threaded GEMM opens one per block
/// of its depth). Pools are kept for reuse, at most [`MAX_POOLS`]; where the system refuses
/// a new pool's threads, `f` runs on the calling thread (the same result, on fewer threads).
pub(crate) fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    if !wakes_threads(threads) {
        return f();
    }
    let pool = {
        let mut pools = pools().lock().unwrap_or_else(|p| p.into_inner());
        match pools.iter().position(|(n, _)| *n == threads) {
            Some(k) => {
                let entry = pools.remove(k);
                let p = entry.1.clone();
                pools.push(entry);
                Some(p)
            }
            None => rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .ok()
                .map(|p| {
                    let p = Arc::new(p);
                    if pools.len() >= MAX_POOLS {
                        pools.remove(0);
                    }
                    pools.push((threads, p.clone()));
                    p
                }),
        }
    };
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_bounded_and_reused() {
        // thread counts no other test asks for: the tests beside this one make and reuse
        // pools of 1 and 2 threads in the same process-wide cache
        let first = 9;
        let last = first + MAX_POOLS + 1;
        let mut counts = Vec::new();
        for n in first..=last {
            counts.push(on_threads(n, rayon::current_num_threads));
        }
        assert_eq!(counts, (first..=last).collect::<Vec<_>>());
        assert!(kept_pools() <= MAX_POOLS);
        // The most recent count is kept (the same pool again), the oldest is gone.
        let kept = |n: usize| pools().lock().unwrap().iter().any(|(k, _)| *k == n);
        assert!(kept(last) && !kept(first));
        assert_eq!(on_threads(last, rayon::current_num_threads), last);
        assert!(release_pools() >= 1);
        assert!(!kept(last));
    }

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

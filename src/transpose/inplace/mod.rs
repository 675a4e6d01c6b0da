//! In-place transposition and storage-format conversion with O(small) workspace, after
//! Gustavson, Karlsson and Kågström, *Parallel and cache-efficient in-place matrix storage
//! format conversion* (GKK). For when there is no room for a second copy of a tensor.
//!
//! - [`transpose_chunks_in_place`] / [`transpose_batch_in_place`]: the chunked transposition
//!   (the paper's adjacent digit swap): chunk `(i, j)` of `chunk` elements moves from
//!   `(j*m + i)*chunk` to `(i*n + j)*chunk`, i.e. a row-major `[n][m][chunk]` array becomes
//!   `[m][n][chunk]`. Rectangular problems follow the cycles of the permutation from leaders
//!   known a priori ([`CycleLeaders`], the GKK leader set), with three levels of rayon
//!   parallelism; square ones swap chunk pairs tile by tile; small ones go through a buffer in
//!   cache ([`Method`]).
//! - [`permute_in_place`], [`permute_array_in_place`], [`InPlacePlan`]: any tensor
//!   permutation as a short sequence of such swaps of adjacent axis groups.
//! - [`convert_format`]: conversions between the standard and blocked matrix storage formats
//!   ([`StorageFormat`]) for any `m`, `n` and block sizes.
//!
//! Design notes: `docs/INPLACE.md`.

mod chunked;
mod formats;
mod leaders;
mod numtheory;
mod permute;
mod scratch;
mod small;
mod square;

pub use formats::{convert_format, format_offset, StorageFormat};
pub use leaders::{CycleLeaders, LeaderIter, Subproblem};
pub use permute::{permute_array_in_place, permute_in_place, InPlacePlan, SwapStep};
#[cfg(test)]
pub(crate) use scratch::fail_allocations_after;
pub use scratch::Scratch;

use crate::error::{Error, Result};
use crate::transpose::on_threads;

/// How one chunked transposition is carried out.
///
/// ```
/// use ttgt::transpose::inplace::Method;
/// assert_eq!(Method::choose(3, 5, 64, 8), Method::Buffered); // 7.5 KiB: in cache
/// assert_eq!(Method::choose(300, 500, 64, 8), Method::Cycles);
/// assert_eq!(Method::choose(300, 300, 64, 8), Method::Square);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Method {
    /// [`Method::choose`] decides.
    #[default]
    Auto,
    /// Cycle following from the GKK leaders (any `m`, `n`).
    Cycles,
    /// Pairwise swaps of chunks, tile by tile (`m == n` only; no workspace).
    Square,
    /// Copy each block to a buffer and gather it back (workspace: one block per thread).
    Buffered,
}

impl Method {
    /// The method [`Method::Auto`] stands for: a buffer when one block of `m*n*chunk`
    /// elements of `elem_bytes` bytes is at most 64 KiB, pairwise swaps when `m == n`,
    /// otherwise cycle following.
    ///
    /// ```
    /// assert_eq!(ttgt::transpose::inplace::Method::choose(1000, 999, 1, 4),
    ///            ttgt::transpose::inplace::Method::Cycles);
    /// ```
    pub fn choose(m: usize, n: usize, chunk: usize, elem_bytes: usize) -> Method {
        let bytes = (m as u128) * (n as u128) * (chunk as u128) * (elem_bytes as u128);
        if bytes <= small::SMALL_BYTES as u128 {
            Method::Buffered
        } else if m == n {
            Method::Square
        } else {
            Method::Cycles
        }
    }

    /// Short name (`cycles`, `square`, `buffered`, `auto`).
    ///
    /// ```
    /// assert_eq!(ttgt::transpose::inplace::Method::Square.name(), "square");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Cycles => "cycles",
            Method::Square => "square",
            Method::Buffered => "buffered",
        }
    }
}

/// Options of the in-place operations.
///
/// ```
/// use ttgt::transpose::inplace::{InPlaceOptions, Method};
/// let o = InPlaceOptions { threads: Some(2), method: Method::Cycles };
/// assert_eq!(o.threads, Some(2));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InPlaceOptions {
    /// Threads (default: the current rayon pool's size; 0 counts as 1).
    pub threads: Option<usize>,
    /// Method of every chunked transposition (default: chosen per problem).
    pub method: Method,
}

impl InPlaceOptions {
    pub(crate) fn thread_count(&self) -> Result<usize> {
        crate::threads::resolve(self.threads)
    }
}

/// How the cycle-following method spreads one `m × n` transposition over threads: see
/// [`cycle_schedule`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScheduleInfo {
    /// Cycles of length > 1.
    pub cycles: u64,
    /// Chunks those cycles move.
    pub moved_chunks: u64,
    /// Largest thread load over the mean load, in chunks (1.0 = perfect balance).
    pub imbalance: f64,
    /// Long cycles are cut into this many sequences in all (each needs a saved chunk).
    pub sequences: usize,
}

/// The load balance of cycle following for an `m × n` problem on `threads` threads (level 2:
/// runs of whole cycles, longest first to the least loaded thread; level 3: cycles longer
/// than a quarter of a thread's share cut into sequences).
///
/// ```
/// // 7 x 3: q = 20, n = 3 has order 4 mod 5 and mod 4 is -1: few, long cycles
/// let s = ttgt::transpose::inplace::cycle_schedule(7, 3, 4).unwrap();
/// assert_eq!(s.moved_chunks, 18); // all of 1..20 but the fixed point 10
/// assert!(s.imbalance < 1.5);
/// ```
pub fn cycle_schedule(m: usize, n: usize, threads: usize) -> Result<ScheduleInfo> {
    let threads = crate::threads::resolve(Some(threads))?;
    let leaders = CycleLeaders::new(m, n)?;
    let s = chunked::Schedule::new(&leaders, m, threads);
    Ok(ScheduleInfo {
        cycles: leaders.nontrivial_cycles(),
        moved_chunks: leaders.moved_chunks(),
        imbalance: s.imbalance(),
        sequences: s.sequences(),
    })
}

/// `a * b * ...` or a size-overflow error naming `what`.
pub(crate) fn checked_product(dims: &[usize], what: impl Fn() -> String) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::SizeOverflow { what: what() })
}

/// In-place chunked transposition: with `q = m*n`, chunk `(i, j)` (`chunk` contiguous
/// elements) moves from chunk position `j*m + i` to `i*n + j` — a column-major `m × n`
/// matrix of chunks becomes row-major, or in row-major terms `[n][m][chunk]` becomes
/// `[m][n][chunk]`. `threads: None` uses the current rayon pool. Errors when
/// `data.len() != m*n*chunk`.
///
/// ```
/// use ttgt::transpose::inplace::transpose_chunks_in_place;
/// // a row-major 2 x 3 matrix [[0,1,2],[3,4,5]] (n = 2 rows of m = 3) becomes its 3 x 2
/// // transpose [[0,3],[1,4],[2,5]]
/// let mut v = vec![0, 1, 2, 3, 4, 5];
/// transpose_chunks_in_place(&mut v, 3, 2, 1, None).unwrap();
/// assert_eq!(v, [0, 3, 1, 4, 2, 5]);
/// // chunks of two move together
/// let mut w = vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5];
/// transpose_chunks_in_place(&mut w, 3, 2, 2, Some(1)).unwrap();
/// assert_eq!(w, [0, 0, 3, 3, 1, 1, 4, 4, 2, 2, 5, 5]);
/// assert!(transpose_chunks_in_place(&mut w, 5, 3, 2, None).is_err());
/// ```
pub fn transpose_chunks_in_place<T: Copy + Send + Sync>(
    data: &mut [T],
    m: usize,
    n: usize,
    chunk: usize,
    threads: Option<usize>,
) -> Result<()> {
    transpose_batch_in_place(
        data,
        1,
        m,
        n,
        chunk,
        &InPlaceOptions {
            threads,
            method: Method::Auto,
        },
    )
}

/// `batch` independent chunked transpositions of consecutive blocks of `m*n*chunk`
/// elements (the paper's adjacent digit swap: a row-major `[batch][n][m][chunk]` array
/// becomes `[batch][m][n][chunk]`), with the method and threads of `opts`.
///
/// ```
/// use ttgt::transpose::inplace::{transpose_batch_in_place, InPlaceOptions, Method};
/// let mut v: Vec<u32> = (0..12).collect(); // [2][2][3] -> [2][3][2]
/// let o = InPlaceOptions { threads: Some(2), method: Method::Cycles };
/// transpose_batch_in_place(&mut v, 2, 3, 2, 1, &o).unwrap();
/// assert_eq!(v, [0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11]);
/// ```
pub fn transpose_batch_in_place<T: Copy + Send + Sync>(
    data: &mut [T],
    batch: usize,
    m: usize,
    n: usize,
    chunk: usize,
    opts: &InPlaceOptions,
) -> Result<()> {
    transpose_batch_with(data, (batch, m, n, chunk), opts, &mut Scratch::new())
}

/// [`transpose_batch_in_place`] with its buffers from `scratch` (allocated there when it has
/// less room than [`reserve_batch`] reserves).
pub(crate) fn transpose_batch_with<T: Copy + Send + Sync>(
    data: &mut [T],
    (batch, m, n, chunk): (usize, usize, usize, usize),
    opts: &InPlaceOptions,
    scratch: &mut Scratch<T>,
) -> Result<()> {
    let what = || format!("an in-place transposition of {batch} x {m} x {n} chunks of {chunk}");
    let len = checked_product(&[batch, m, n, chunk], what)?;
    if len != data.len() {
        return Err(Error::Layout(format!(
            "{} needs {len} elements but the slice has {}",
            what(),
            data.len()
        )));
    }
    let method = match opts.method {
        Method::Auto => Method::choose(m, n, chunk, std::mem::size_of::<T>()),
        Method::Square if m != n => {
            return Err(Error::Unsupported(format!(
                "the square in-place method needs m == n, got {m} x {n}"
            )))
        }
        other => other,
    };
    let threads = opts.thread_count()?;
    if m <= 1 || n <= 1 || len == 0 {
        return Ok(());
    }
    // a method named by the caller runs exactly as named (parallel even when small)
    let forced = opts.method != Method::Auto;
    on_threads(threads, move || match method {
        Method::Square => {
            square::transpose_square(data, batch, n, chunk, threads, forced);
            Ok(())
        }
        Method::Buffered => small::transpose_buffered(data, batch, m, n, chunk, threads, scratch),
        _ => chunked::transpose_cycles(data, (batch, m, n, chunk), threads, forced, scratch),
    })
}

/// Reserves in `scratch` every buffer [`transpose_batch_with`] takes for this problem (an
/// upper bound: the serial and parallel cycle movers' slots both), so that the transposition
/// itself allocates none.
pub(crate) fn reserve_batch<T>(
    scratch: &mut Scratch<T>,
    (batch, m, n, chunk): (usize, usize, usize, usize),
    opts: &InPlaceOptions,
) -> Result<()> {
    if m <= 1 || n <= 1 || batch == 0 || chunk == 0 {
        return Ok(());
    }
    let threads = opts.thread_count()?;
    let method = match opts.method {
        Method::Auto => Method::choose(m, n, chunk, std::mem::size_of::<T>()),
        other => other,
    };
    match method {
        Method::Square => Ok(()),
        Method::Buffered => {
            let block = checked_product(&[m, n, chunk], || "an in-place block".into())?;
            scratch.reserve(1, threads.min(batch).max(1), block)
        }
        _ => {
            let piece = chunked::piece_len::<T>(chunk);
            let saved = piece.saturating_mul(chunked::max_sequences(threads));
            scratch.reserve(0, 1, saved.max(piece))?;
            scratch.reserve(1, threads, piece)
        }
    }
}

/// Upper bound of the workspace bytes [`transpose_batch_in_place`] allocates for one
/// transposition with these options: nothing for square swaps; one block per thread for
/// the buffered method; for cycle following one chunk piece (at most 64 KiB) per thread plus
/// one per split cycle sequence (at most 8 per thread).
///
/// ```
/// use ttgt::transpose::inplace::{transpose_workspace_bytes, InPlaceOptions};
/// let one = InPlaceOptions { threads: Some(1), ..Default::default() };
/// assert_eq!(transpose_workspace_bytes(300, 500, 64, 8, &one), 64 * 8);
/// assert_eq!(transpose_workspace_bytes(300, 300, 64, 8, &one), 0);
/// ```
pub fn transpose_workspace_bytes(
    m: usize,
    n: usize,
    chunk: usize,
    elem_bytes: usize,
    opts: &InPlaceOptions,
) -> usize {
    if m <= 1 || n <= 1 || chunk == 0 {
        return 0;
    }
    // (an invalid count fails the call itself; the estimate takes one thread)
    let threads = opts.thread_count().unwrap_or(1);
    let method = match opts.method {
        Method::Auto => Method::choose(m, n, chunk, elem_bytes),
        other => other,
    };
    match method {
        Method::Square => 0,
        Method::Buffered => m
            .saturating_mul(n)
            .saturating_mul(chunk)
            .saturating_mul(elem_bytes)
            .saturating_mul(threads),
        _ => chunked::cycles_workspace_bytes(chunk, elem_bytes, threads),
    }
}

#[cfg(test)]
mod tests {
    //! The chunk movers (cycle following serial and on threads, with split cycles and chunks
    //! moved in pieces; square pair swaps; the buffered method) against an out-of-place
    //! loop, on problems small enough for Miri (`.ci/miri.sh`).

    use super::*;

    /// `[batch][n][m][chunk]` to `[batch][m][n][chunk]`, out of place.
    fn reference<T: Copy>(v: &[T], batch: usize, m: usize, n: usize, chunk: usize) -> Vec<T> {
        let mut out = v.to_vec();
        let block = m * n * chunk;
        for b in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let (to, from) = ((i * n + j) * chunk, (j * m + i) * chunk);
                    out[b * block + to..][..chunk].copy_from_slice(&v[b * block + from..][..chunk]);
                }
            }
        }
        out
    }

    /// Every method (with `all`; else cycle following only) on one to three threads (two
    /// under Miri, where `Auto` is left out too: it is one of the others).
    fn check<T: Copy + Send + Sync + PartialEq + std::fmt::Debug>(
        value: impl Fn(usize) -> T,
        (batch, m, n, chunk): (usize, usize, usize, usize),
        all: bool,
    ) {
        let orig: Vec<T> = (0..batch * m * n * chunk).map(value).collect();
        let want = reference(&orig, batch, m, n, chunk);
        let square = if m == n {
            Method::Square
        } else {
            Method::Cycles
        };
        let methods = [Method::Cycles, square, Method::Buffered, Method::Auto];
        let methods = match (all, cfg!(miri)) {
            (false, _) => &methods[..1],
            (true, true) => &methods[..3],
            (true, false) => &methods[..],
        };
        for &method in methods {
            for threads in 1..=if cfg!(miri) { 2 } else { 3 } {
                let mut v = orig.clone();
                let opts = InPlaceOptions {
                    threads: Some(threads),
                    method,
                };
                transpose_batch_in_place(&mut v, batch, m, n, chunk, &opts).unwrap();
                assert!(
                    v == want,
                    "{batch} x {m} x {n} x {chunk}, {method:?} on {threads} threads"
                );
            }
        }
    }

    #[test]
    fn inplace_chunk_movers_match_out_of_place() {
        let word = |x: usize| (x as u32).wrapping_mul(2654435761);
        assert!(cycle_schedule(2, 7, 2).unwrap().sequences > 0);
        for problem in [
            (1, 2, 7, 1), // one cycle of length 12: split into sequences on threads
            (1, 5, 7, 3),
            (1, 4, 9, 2),
            (2, 3, 5, 2), // whole blocks per thread
            (3, 2, 2, 1),
            (1, 6, 6, 2), // square: pair swaps on threads
            (4, 5, 5, 1),
            (1, 1, 7, 2), // nothing moves
        ] {
            check(word, problem, true);
        }
        // 2 KiB elements: chunks of 33 move in pieces of 32 (64 KiB) and 1.
        let big = |x: usize| {
            let mut e = [0u64; 256];
            e[0] = x as u64;
            e[255] = !(x as u64);
            e
        };
        assert_eq!(chunked::piece_len::<[u64; 256]>(33), 32);
        check(big, (1, 3, 2, 33), false);
    }

    /// A plan of several passes reserves every pass's buffers before the first: a failure of
    /// any of those allocations (injected, each in turn) leaves the data as it was, and the
    /// run after the last one permutes it.
    #[test]
    fn failed_plans_leave_the_data_as_it_was() {
        let (shape, perm) = ([5, 7, 3, 4], [3, 1, 0, 2]);
        let len: usize = shape.iter().product();
        let orig: Vec<u32> = (0..len as u32).collect();
        let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), orig.clone()).unwrap();
        let want: Vec<u32> = a
            .permuted_axes(ndarray::IxDyn(&perm))
            .iter()
            .copied()
            .collect();
        let mut injected = 0;
        for method in [Method::Cycles, Method::Buffered, Method::Auto] {
            for threads in [1, 2] {
                let opts = InPlaceOptions {
                    threads: Some(threads),
                    method,
                };
                let plan = InPlacePlan::new(&shape, &perm, 4, &opts).unwrap();
                assert!(plan.steps().len() > 1, "{}", plan.describe());
                for k in 0.. {
                    let mut v = orig.clone();
                    scratch::fail_allocations_after(Some(k));
                    let r = plan.execute(&mut v);
                    scratch::fail_allocations_after(None);
                    if r.is_err() {
                        assert_eq!(v, orig, "{method:?}, {threads} threads, failure {k}");
                        injected += 1;
                        continue;
                    }
                    assert_eq!(v, want, "{method:?}, {threads} threads");
                    break;
                }
            }
        }
        assert!(injected >= 6, "{injected} failures injected");
    }
}

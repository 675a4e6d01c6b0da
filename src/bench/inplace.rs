//! `ttgt bench inplace`: in-place chunked transpositions (GKK) on random `m × n` problems,
//! each beside two references measured in the same run on buffers of the same size and
//! thread count (the paper's Section 6): an out-of-place copy (`copy_from_slice`, the
//! platform's memcpy) and an in-place scale (`v *= alpha`); plus the time of finding the
//! cycle leaders alone (factorization, orders, roots and generating every leader), reported
//! as a share of the transposition time.

use std::hint::black_box;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::error::Result;
use crate::model::copy_seconds_on;
use crate::tensor::{zeroed, DType, Element};
use crate::transpose::inplace::{transpose_chunks_in_place, CycleLeaders, Method};
use crate::transpose::on_threads;

/// One problem: `m × n` chunks of `chunk` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InPlaceCase {
    /// Chunks per output row.
    pub m: usize,
    /// Output rows.
    pub n: usize,
    /// Elements per chunk.
    pub chunk: usize,
}

/// Options of an in-place bench run.
#[derive(Clone, Copy, Debug)]
pub struct InPlaceBenchOptions {
    /// Element type.
    pub dtype: DType,
    /// Threads (transposition and both references).
    pub threads: usize,
    /// Timed executions of each measurement; the best is reported.
    pub repeat: usize,
}

/// One case's measurements.
#[derive(Clone, Debug)]
pub struct InPlaceResult {
    /// The problem.
    pub case: InPlaceCase,
    /// Element type.
    pub dtype: DType,
    /// Threads.
    pub threads: usize,
    /// Method used (`cycles`, `square`, `buffered`).
    pub method: &'static str,
    /// Cycles of length > 1.
    pub cycles: u64,
    /// Best in-place transposition time.
    pub seconds: f64,
    /// Every timed in-place transposition (`samples.min == seconds`).
    pub samples: super::Samples,
    /// Best time of finding all cycle leaders alone.
    pub leader_seconds: f64,
    /// Best copy time of the same number of elements.
    pub copy_seconds: f64,
    /// Best in-place scale time of the same number of elements.
    pub scale_seconds: f64,
    /// Elements.
    pub elements: usize,
}

impl InPlaceResult {
    /// Nanoseconds per element of the transposition.
    pub fn ns_per_elem(&self) -> f64 {
        self.seconds * 1e9 / self.elements.max(1) as f64
    }
    /// Nanoseconds per element of the copy reference.
    pub fn copy_ns_per_elem(&self) -> f64 {
        self.copy_seconds * 1e9 / self.elements.max(1) as f64
    }
    /// Nanoseconds per element of the scale reference.
    pub fn scale_ns_per_elem(&self) -> f64 {
        self.scale_seconds * 1e9 / self.elements.max(1) as f64
    }
    /// Leader finding time over transposition time.
    pub fn leader_share(&self) -> f64 {
        self.leader_seconds / self.seconds
    }
    /// Bandwidth of the transposition in GB/s (every element read and written once).
    pub fn gbps(&self) -> f64 {
        (2 * self.elements * self.dtype.size_bytes()) as f64 / self.seconds / 1e9
    }
}

/// The paper's test set: `count` random `m, n` in 2..=500 with chunk 64, `count` with chunk
/// 128, and `count` large problems (`m, n` in 1000..=4000) with chunk 1, from `seed`.
///
/// ```
/// let c = ttgt::bench::inplace_cases(7, 2);
/// assert_eq!(c.len(), 6);
/// assert!(c[..4].iter().all(|c| (2..=500).contains(&c.m) && c.chunk >= 64));
/// assert_eq!(c, ttgt::bench::inplace_cases(7, 2));
/// ```
pub fn inplace_cases(seed: u64, count: usize) -> Vec<InPlaceCase> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for chunk in [64, 128] {
        for _ in 0..count {
            out.push(InPlaceCase {
                m: rng.random_range(2..=500),
                n: rng.random_range(2..=500),
                chunk,
            });
        }
    }
    for _ in 0..count {
        out.push(InPlaceCase {
            m: rng.random_range(1000..=4000),
            n: rng.random_range(1000..=4000),
            chunk: 1,
        });
    }
    out
}

/// Timed runs of a measurement go on past `repeat` until they add up to this much time
/// (at most [`MAX_RUNS`] runs): a sub-millisecond case timed only a few times measures the
/// wake-up of idle worker threads and the host's noise more than the work.
const MIN_TIMED_SECONDS: f64 = 0.05;
/// Upper bound of the timed runs of one measurement.
const MAX_RUNS: usize = 1000;

/// Best time of `f` over at least `repeat` runs (more for short runs, see
/// [`MIN_TIMED_SECONDS`]).
fn best(repeat: usize, f: impl FnMut() -> Result<()>) -> Result<f64> {
    Ok(sampled(repeat, f)?.min)
}

/// The runs behind [`best`].
fn sampled(repeat: usize, mut f: impl FnMut() -> Result<()>) -> Result<super::Samples> {
    let mut times = Vec::with_capacity(repeat.max(1));
    let mut total = 0.0;
    while times.len() < repeat.max(1) || (total < MIN_TIMED_SECONDS && times.len() < MAX_RUNS) {
        let s = Instant::now();
        f()?;
        let e = s.elapsed().as_secs_f64();
        times.push(e);
        total += e;
    }
    Ok(super::Samples::of(&times))
}

fn run<T: Element>(c: &InPlaceCase, o: &InPlaceBenchOptions) -> Result<InPlaceResult> {
    let elements =
        c.m.checked_mul(c.n)
            .and_then(|x| x.checked_mul(c.chunk))
            .ok_or_else(|| crate::Error::SizeOverflow {
                what: format!("a {} x {} x {} bench case", c.m, c.n, c.chunk),
            })?;
    let mut a = zeroed::<T>(elements, "bench data")?;
    a.par_iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = T::from_f64((i % 1013) as f64));
    let threads = o.threads.max(1);
    // one untimed run (page faults, pools), then the timed ones
    transpose_chunks_in_place(&mut a, c.m, c.n, c.chunk, Some(threads))?;
    let samples = sampled(o.repeat, || {
        transpose_chunks_in_place(&mut a, c.m, c.n, c.chunk, Some(threads))
    })?;
    let seconds = samples.min;
    let method = Method::choose(c.m, c.n, c.chunk, T::DTYPE.size_bytes());
    // square swaps and buffered blocks use no leaders
    let leader_seconds = if method != Method::Cycles {
        0.0
    } else {
        best(o.repeat, || {
            let l = CycleLeaders::new(c.m, c.n)?;
            let mut sum = 0u64;
            for s in l.subproblems().iter().filter(|s| s.cycle_len() > 1) {
                for x in s.leaders(0, s.count()) {
                    sum = sum.wrapping_add(x);
                }
            }
            black_box(sum);
            Ok(())
        })?
    };
    let alpha = T::from_f64(0.999);
    let chunk = elements.div_ceil(threads).max(1);
    let scale_seconds = best(o.repeat, || {
        on_threads(threads, || {
            a.par_chunks_mut(chunk)
                .for_each(|p| p.iter_mut().for_each(|x| *x *= alpha))
        });
        black_box(&mut a);
        Ok(())
    })?;
    let mut b = zeroed::<T>(elements, "bench copy destination")?;
    // the copy reference gets as many runs as the transposition (one timed copy per run)
    let mut copy_seconds = f64::INFINITY;
    best(o.repeat, || {
        copy_seconds = copy_seconds.min(copy_seconds_on(&a, &mut b, threads, 1));
        Ok(())
    })?;
    let leaders = CycleLeaders::new(c.m, c.n)?;
    Ok(InPlaceResult {
        case: *c,
        dtype: T::DTYPE,
        threads,
        method: method.name(),
        cycles: leaders.nontrivial_cycles(),
        seconds,
        samples,
        leader_seconds,
        copy_seconds,
        scale_seconds,
        elements,
    })
}

/// Runs one case.
pub fn bench_inplace(c: &InPlaceCase, o: &InPlaceBenchOptions) -> Result<InPlaceResult> {
    crate::with_dtype!(o.dtype, T => run::<T>(c, o))
}

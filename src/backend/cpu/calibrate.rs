//! Measured GEMM times: the same-run GEMM reference of the benchmarks and the calibration of
//! the GEMM cost model ([`GemmCoeffs`]).

use std::time::Instant;

use num_complex::{Complex32, Complex64};
use rayon::prelude::*;

use super::gemm::{gemm, Mat, MatMut};
use crate::error::Result;
use crate::model::{
    gemm_coeffs_in, gemm_training_shapes, ConcurrentGemm, GemmCoeffs, GemmLayout, GemmLibrary,
    OperandSource, Profile, ShapeFactor,
};
use crate::tensor::{zeroed_aligned, DType, Element};
use crate::transpose::on_threads;

/// An aligned buffer of `len` elements (from the returned offset on) filled with the
/// repeating values `(i % modulus) * step`.
fn filled<T: Element>(len: usize, modulus: usize, step: f64) -> Result<(Vec<T>, usize)> {
    let (mut v, off) = zeroed_aligned::<T>(len, "GEMM timing operand")?;
    for (i, x) in v[off..].iter_mut().enumerate() {
        *x = T::from_f64((i % modulus) as f64 * step);
    }
    Ok((v, off))
}

/// One `m×n×k` GEMM (`C = A·B`, A and B row- or column-major as a [`GemmLayout`] says, C
/// row-major) with its operands allocated once and timed call by call, so that a benchmark
/// can interleave it with the plans it is compared with: a slow spell of a shared host then
/// falls on both, not on whichever ran during it.
///
/// ```
/// use ttgt::{backend::cpu::GemmTimer, model::{GemmLayout, GemmLibrary}};
/// let mut g = GemmTimer::<f64>::new((64, 48, 80), GemmLayout::ROW).unwrap();
/// let t = g.time(GemmLibrary::Gemm, 1);
/// assert!(t > 0.0);
/// assert!(g.checksum() != 0.0); // C holds the product of the filled operands
/// ```
pub struct GemmTimer<T: Element> {
    shape: (usize, usize, usize),
    strides: ([isize; 2], [isize; 2]),
    a: (Vec<T>, usize),
    b: (Vec<T>, usize),
    c: (Vec<T>, usize),
}

impl<T: Element> GemmTimer<T> {
    /// Allocates and fills the operands of an `m×n×k` GEMM in `layout`'s class.
    pub fn new((m, n, k): (usize, usize, usize), layout: GemmLayout) -> Result<Self> {
        Ok(GemmTimer {
            shape: (m, n, k),
            strides: layout.strides(m, n, k),
            a: filled::<T>(m * k, 7, 0.25)?,
            b: filled::<T>(k * n, 5, 0.5)?,
            c: zeroed_aligned::<T>(m * n, "GEMM timing result")?,
        })
    }

    /// Seconds of one call by `library` on `threads` threads.
    pub fn time(&mut self, library: GemmLibrary, threads: usize) -> f64 {
        let (m, n, k) = self.shape;
        let ([a_rs, a_cs], [b_rs, b_cs]) = self.strides;
        let ((a, oa), (b, ob)) = (&self.a, &self.b);
        let (c, oc) = (&mut self.c.0, self.c.1);
        let t = Instant::now();
        // SAFETY: `new` allocated dense m×k and k×n buffers (row- or column-major as the
        // strides say) and a row-major m×n one, each from its aligned offset on; C is
        // private to `self` and borrowed mutably here.
        unsafe {
            gemm(
                library,
                threads,
                m,
                n,
                k,
                T::one(),
                Mat {
                    ptr: a.as_ptr().add(*oa),
                    rs: a_rs,
                    cs: a_cs,
                },
                Mat {
                    ptr: b.as_ptr().add(*ob),
                    rs: b_rs,
                    cs: b_cs,
                },
                T::zero(),
                MatMut {
                    ptr: c.as_mut_ptr().add(oc),
                    rs: n as isize,
                    cs: 1,
                },
            );
        }
        let s = t.elapsed().as_secs_f64();
        std::hint::black_box(&self.c);
        s
    }

    /// Sum of C's real parts (a result the optimizer cannot drop, and a check in tests).
    pub fn checksum(&self) -> f64 {
        self.c.0[self.c.1..].iter().map(|x| x.re()).sum()
    }
}

fn time_typed<T: Element>(
    library: GemmLibrary,
    shape: (usize, usize, usize),
    layout: GemmLayout,
    threads: usize,
    repeat: usize,
) -> Result<f64> {
    let mut run = GemmTimer::<T>::new(shape, layout)?;
    Ok((0..repeat.max(1) + 1)
        .map(|_| run.time(library, threads))
        .fold(f64::INFINITY, f64::min))
}

/// Best-of-`repeat` seconds of one row-major `m×n×k` GEMM (`C = A·B`) by `library` on
/// `threads` threads (after one warm-up call).
///
/// ```
/// use ttgt::{DType, model::GemmLibrary};
/// let t = ttgt::backend::cpu::time_gemm(GemmLibrary::Gemm, DType::F64, 64, 64, 64, 1, 2).unwrap();
/// assert!(t > 0.0);
/// ```
pub fn time_gemm(
    library: GemmLibrary,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
    threads: usize,
    repeat: usize,
) -> Result<f64> {
    time_gemm_in(library, dtype, (m, n, k), GemmLayout::ROW, threads, repeat)
}

/// Best-of-`repeat` seconds of one `m×n×k` GEMM whose A and B are row- or column-major as
/// `layout` says (C row-major), by `library` on `threads` threads (after one warm-up call).
///
/// ```
/// use ttgt::{DType, model::{GemmLayout, GemmLibrary}};
/// let l = GemmLayout { a_col: false, b_col: true };
/// let t = ttgt::backend::cpu::time_gemm_in(GemmLibrary::MatrixMultiply, DType::F32, (64, 48, 80), l, 1, 2).unwrap();
/// assert!(t > 0.0);
/// ```
pub fn time_gemm_in(
    library: GemmLibrary,
    dtype: DType,
    shape: (usize, usize, usize),
    layout: GemmLayout,
    threads: usize,
    repeat: usize,
) -> Result<f64> {
    let s = shape;
    match dtype {
        // The half types compute in f32: their GEMMs are f32 GEMMs.
        DType::F32 | DType::F16 | DType::BF16 => {
            time_typed::<f32>(library, s, layout, threads, repeat)
        }
        DType::F64 => time_typed::<f64>(library, s, layout, threads, repeat),
        DType::C32 => time_typed::<Complex32>(library, s, layout, threads, repeat),
        DType::C64 => time_typed::<Complex64>(library, s, layout, threads, repeat),
    }
}

/// Rounds of [`time_shapes_in`]: each round times every shape once, so a slow spell of a
/// shared host lasting less than a round falls on one sample of each shape, not on all of
/// one shape's samples (see `docs/TUNING.md`).
const CALIBRATION_ROUNDS: usize = 3;

/// Operands up to this many bytes get an untimed call before each timed one, so that every
/// timing starts with them in cache, as back-to-back repetitions did; larger ones stream
/// from memory either way.
const WARM_BYTES: usize = 4 << 20;

/// Best and worst seconds of one call for each of `shapes`, measured in
/// [`CALIBRATION_ROUNDS`] interleaved rounds after one untimed call of each (see
/// [`GemmTimer`]). Calls of more than 2 GFLOP are timed in the first two rounds only: they
/// vary little and dominate the calibration's time.
fn time_shapes_typed<T: Element>(
    library: GemmLibrary,
    shapes: &[(usize, usize, usize)],
    layout: GemmLayout,
    threads: usize,
) -> Result<Vec<(f64, f64)>> {
    let mut timers = shapes
        .iter()
        .map(|&s| GemmTimer::<T>::new(s, layout))
        .collect::<Result<Vec<_>>>()?;
    for t in &mut timers {
        t.time(library, threads);
    }
    let mut range = vec![(f64::INFINITY, 0.0f64); shapes.len()];
    for round in 0..CALIBRATION_ROUNDS {
        for ((&(m, n, k), timer), r) in shapes.iter().zip(&mut timers).zip(&mut range) {
            if round >= 2 && 2.0 * (m * n * k) as f64 > 2e9 {
                continue;
            }
            if (m * k + k * n + m * n) * std::mem::size_of::<T>() <= WARM_BYTES {
                timer.time(library, threads);
            }
            let t = timer.time(library, threads);
            *r = (r.0.min(t), r.1.max(t));
        }
    }
    Ok(range)
}

/// The median of `spreads` (0 when empty).
fn median(mut spreads: Vec<f64>) -> f64 {
    spreads.sort_by(f64::total_cmp);
    spreads.get(spreads.len() / 2).copied().unwrap_or(0.0)
}

/// [`time_shapes_typed`] for `dtype`.
fn time_shapes_in(
    library: GemmLibrary,
    dtype: DType,
    shapes: &[(usize, usize, usize)],
    layout: GemmLayout,
    threads: usize,
) -> Result<Vec<(f64, f64)>> {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            time_shapes_typed::<f32>(library, shapes, layout, threads)
        }
        DType::F64 => time_shapes_typed::<f64>(library, shapes, layout, threads),
        DType::C32 => time_shapes_typed::<Complex32>(library, shapes, layout, threads),
        DType::C64 => time_shapes_typed::<Complex64>(library, shapes, layout, threads),
    }
}

/// Measures every library and element type on the training shapes (at most `max_flops` real
/// flops each, a quarter of that for complex types) at `threads` threads and fits the GEMM
/// model, for each operand layout class ([`GemmLayout`]; our own library, which only the
/// GETT engine and forced plans use, for row-major operands only). Replaces the entries for
/// `threads` in `profile.gemm`. Returns how much the samples varied between rounds: the
/// median over shapes of 100 MFLOP or more of (slowest round / fastest round − 1). On a quiet
/// machine it is a few per cent; tens of per cent mean that other work shared the cores or
/// the memory, and the fit (which uses the fastest round) may price this machine's quiet
/// state only in part. Takes minutes at the CLI's default budget.
///
/// ```no_run
/// let mut p = ttgt::model::profile();
/// let spread = ttgt::backend::cpu::calibrate_gemm(&mut p, 1, 2e8).unwrap();
/// assert!(!p.gemm.is_empty() && spread >= 0.0);
/// ```
pub fn calibrate_gemm(profile: &mut Profile, threads: usize, max_flops: f64) -> Result<f64> {
    let mut fitted = Vec::new();
    let mut spreads = Vec::new();
    for dtype in [DType::F32, DType::F64, DType::C32, DType::C64] {
        for library in GemmLibrary::measured(dtype) {
            let budget = if matches!(dtype, DType::C32 | DType::C64) {
                max_flops / 4.0
            } else {
                max_flops
            };
            let layouts: &[GemmLayout] = if library == GemmLibrary::Native {
                &[GemmLayout::ROW]
            } else {
                &GemmLayout::ALL
            };
            // the row-major class's compute rate, shared by the others (`fit_with_flop`)
            let mut row_flop = None;
            for &layout in layouts {
                // The other layouts' compute-bound rates are fitted up to a quarter of the
                // budget (an eighth of the time per square size).
                let shapes = if layout == GemmLayout::ROW {
                    gemm_training_shapes(budget)
                } else {
                    gemm_training_shapes(budget / 4.0)
                };
                let times = time_shapes_in(library, dtype, &shapes, layout, threads)?;
                for (s, &(best, worst)) in shapes.iter().zip(&times) {
                    // calls long enough that the clock's resolution does not count
                    if 2.0 * (s.0 * s.1 * s.2) as f64 >= 1e8 && best > 0.0 {
                        spreads.push(worst / best - 1.0);
                    }
                }
                let samples: Vec<_> = shapes
                    .iter()
                    .zip(times)
                    .map(|(s, (best, _))| (s.0, s.1, s.2, best))
                    .collect();
                let fallback = GemmCoeffs {
                    layout,
                    ..GemmCoeffs::nominal(library, dtype, threads, profile)
                };
                let fit = match row_flop {
                    Some(flop) => GemmCoeffs::fit_with_flop(&samples, &fallback, flop),
                    None => GemmCoeffs::fit(&samples, &fallback),
                };
                if layout == GemmLayout::ROW {
                    row_flop = Some(fit.flop);
                }
                fitted.push(fit);
            }
        }
    }
    profile.gemm.retain(|g| g.threads != threads);
    profile.gemm.extend(fitted);
    Ok(median(spreads))
}

/// Seconds of calls per thread in each round of the concurrent-call probe by default
/// ([`calibrate_gemm_concurrency`]): long enough that waking the threads does not count.
pub const CONCURRENCY_ROUND_SECONDS: f64 = 5e-3;

/// An aligned buffer and the offset its aligned elements start at ([`zeroed_aligned`]).
type Aligned<T> = (Vec<T>, usize);

/// Bytes each thread's A, B and C blocks of the concurrent-call probe cycle through so that
/// they come from and go to memory: the last-level cache's size as the OS reports it, at
/// least 32 MiB and at most 1 GiB: a smaller cycle leaves C blocks in a large L3 and prices
/// loops that write C to memory too low (see `docs/TUNING.md`).
fn memory_cycle_bytes() -> usize {
    crate::model::last_level_cache_bytes()
        .unwrap_or(0)
        .clamp(32 << 20, 1 << 30)
}

/// The operands of the concurrent-call probe for one element type, allocated and filled
/// once and reused by every shape, layout class and operand source (allocating and filling
/// the regions for each of the probe's measurements took most of its time): per thread an
/// A, a B and a C region of [`memory_cycle_bytes`] at least (the cycle of
/// [`OperandSource::Memory`]; the others cycle through a prefix or use the first block).
/// Every page is written once up front, so that no round pays for first touches.
struct ProbeBuffers<T: Element> {
    /// Each thread's A, B and C.
    sets: Vec<ProbeSet<T>>,
    /// Elements of each thread's A, B and C region.
    a_len: usize,
    b_len: usize,
    c_len: usize,
    /// How many calls the threads have made so far, each: the next round goes on through
    /// the blocks from there, so that it does not find the previous round's in cache.
    calls_made: usize,
}

/// One thread's A, B and C regions of the concurrent-call probe.
struct ProbeSet<T> {
    a: Aligned<T>,
    b: Aligned<T>,
    c: Aligned<T>,
}

impl<T: Element> ProbeBuffers<T> {
    /// Buffers for `threads` threads, large enough for every one of `shapes`.
    fn new(shapes: &[(usize, usize, usize)], threads: usize) -> Result<Self> {
        let es = std::mem::size_of::<T>();
        let most = |f: fn(&(usize, usize, usize)) -> usize| shapes.iter().map(f).max().unwrap_or(1);
        let cycle = memory_cycle_bytes();
        let a_len = most(|s| s.0 * s.2).max(cycle / es);
        let b_len = most(|s| s.2 * s.1).max(cycle / es);
        let c_len = most(|s| s.0 * s.1).max(cycle / es);
        let sets = (0..threads)
            .map(|_| {
                Ok(ProbeSet {
                    a: filled::<T>(a_len, 7, 0.25)?,
                    b: filled::<T>(b_len, 5, 0.5)?,
                    c: filled::<T>(c_len, 3, 1.0)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ProbeBuffers {
            sets,
            a_len,
            b_len,
            c_len,
            calls_made: 0,
        })
    }
}

/// Seconds per call of `threads` threads (one per set of `buf`) each running `calls`
/// single-threaded calls of an `m×n×k` GEMM by `library` with A and B in `layout`'s class
/// and C row-major, back to back, as the tasks of a parallel loop do: each call writes its
/// own block of C, cycling through enough blocks ([`memory_cycle_bytes`] per thread, the
/// cycle going on from round to round) that they go to memory, as a loop's C blocks do, and
/// reads its own blocks of A and B, cycling through as many bytes per thread as well
/// ([`OperandSource::Memory`]: a loop's changing operand, whichever side of the product
/// the layout class puts it on, streams from memory) or, with [`OperandSource::Cache`],
/// A through 2 MiB (an operand small enough to stay in the last-level cache) and B the
/// same block every call; with [`OperandSource::Resident`], A cycles through 2 MiB, B is
/// one block and C cycles through 256 KiB per thread, as a tiled write-back's calls write
/// their block buffer again and again; with [`OperandSource::Streamed`], A and B stream
/// from memory as with [`OperandSource::Memory`] and C cycles through 256 KiB. Best of
/// `repeat` rounds after one warm-up round.
fn time_concurrent_typed<T: Element>(
    buf: &mut ProbeBuffers<T>,
    library: GemmLibrary,
    (m, n, k): (usize, usize, usize),
    layout: GemmLayout,
    operands: OperandSource,
    calls: usize,
    repeat: usize,
) -> Result<f64> {
    let ([a_rs, a_cs], [b_rs, b_cs]) = layout.strides(m, n, k);
    let es = std::mem::size_of::<T>();
    let (a_bytes, b_bytes, c_bytes): (usize, usize, usize) = match operands {
        OperandSource::Memory => (buf.a_len * es, buf.b_len * es, buf.c_len * es),
        OperandSource::Cache => (2 << 20, 0, buf.c_len * es),
        OperandSource::Resident => (2 << 20, 0, 256 << 10),
        OperandSource::Streamed => (buf.a_len * es, buf.b_len * es, 256 << 10),
    };
    let count = |bytes: usize, len: usize| (bytes / (len * es).max(1)).max(1);
    let a_blocks = count(a_bytes, m * k);
    let b_blocks = count(b_bytes, k * n);
    let c_blocks = count(c_bytes, m * n);
    // at least one block fits (`ProbeBuffers::new` sized them for the largest shape), and
    // the cycles' blocks fit in the regions they cycle through
    if a_blocks * m * k > buf.a_len || b_blocks * k * n > buf.b_len || c_blocks * m * n > buf.c_len
    {
        return Err(crate::error::Error::Unsupported(format!(
            "GEMM probe shape {m}x{n}x{k} exceeds the probe's buffers"
        )));
    }
    let sets = &mut buf.sets;
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) + 1 {
        let first = buf.calls_made;
        buf.calls_made += calls;
        let t = Instant::now();
        on_threads(sets.len(), || {
            sets.par_iter_mut().for_each(|set| {
                let ((a, oa), (b, ob)) = (&set.a, &set.b);
                let (c, oc) = &mut set.c;
                for call in first..first + calls {
                    let a = &a[*oa + (call % a_blocks) * m * k..][..m * k];
                    let b = &b[*ob + (call % b_blocks) * k * n..][..k * n];
                    let c = &mut c[*oc + (call % c_blocks) * m * n..][..m * n];
                    // SAFETY: dense m×k and k×n blocks (row- or column-major as `layout`
                    // says) and a row-major m×n one of exactly those sizes; each thread
                    // writes its own C blocks.
                    unsafe {
                        gemm(
                            library,
                            1,
                            m,
                            n,
                            k,
                            T::one(),
                            Mat {
                                ptr: a.as_ptr(),
                                rs: a_rs,
                                cs: a_cs,
                            },
                            Mat {
                                ptr: b.as_ptr(),
                                rs: b_rs,
                                cs: b_cs,
                            },
                            T::zero(),
                            MatMut {
                                ptr: c.as_mut_ptr(),
                                rs: n as isize,
                                cs: 1,
                            },
                        );
                    }
                }
            })
        });
        best = best.min(t.elapsed().as_secs_f64() / calls.max(1) as f64);
    }
    std::hint::black_box(&buf.sets);
    Ok(best)
}

/// The concurrent-call factors of one element type (see [`calibrate_gemm_concurrency`]),
/// appended to `measured`.
fn probe_concurrency_typed<T: Element>(
    profile: &Profile,
    library: GemmLibrary,
    threads: usize,
    round_seconds: f64,
    max_flops: f64,
    measured: &mut Vec<ConcurrentGemm>,
) -> Result<()> {
    let shapes = concurrency_shapes(max_flops);
    let mut buf = ProbeBuffers::<T>::new(&shapes, threads)?;
    // complex loops are rarer; their calls are priced from operands in memory
    let sources: &[OperandSource] = if T::DTYPE.is_complex() {
        &[OperandSource::Memory]
    } else {
        &[
            OperandSource::Memory,
            OperandSource::Cache,
            OperandSource::Resident,
            OperandSource::Streamed,
        ]
    };
    for &operands in sources {
        for layout in GemmLayout::ALL {
            let co = gemm_coeffs_in(profile, library, T::DTYPE, 1, layout);
            let mut log_sum = 0.0;
            let mut at = Vec::with_capacity(shapes.len());
            for &s in &shapes {
                let priced = co.seconds(s.0, s.1, s.2).max(1e-9);
                let calls = ((round_seconds / priced).ceil() as usize).clamp(1, 5000);
                // calls far longer than a round vary little: best of one after the warm-up
                let repeat = if priced > 4.0 * round_seconds { 1 } else { 3 };
                let t =
                    time_concurrent_typed(&mut buf, library, s, layout, operands, calls, repeat)?;
                let f = (t / priced).clamp(0.5, 4.0);
                log_sum += f.ln();
                at.push(ShapeFactor {
                    m: s.0,
                    n: s.1,
                    k: s.2,
                    factor: f,
                });
            }
            let factor = (log_sum / shapes.len() as f64).exp().clamp(0.5, 4.0);
            measured.push(ConcurrentGemm {
                library,
                dtype: T::DTYPE,
                threads,
                layout,
                operands,
                factor,
                at,
            });
        }
    }
    Ok(())
}

/// The shapes of the concurrent-call probe: the small and skinny calls that parallel loops
/// of a contraction make (every m and n in 24..2048, k in 24..2048, by factors of about 4),
/// those of at most `max_flops` (2·m·n·k; the smallest shape always). The deep calls
/// (k = 2048) stand for loops of a few calls with a large operand, which the shallower
/// probes price too low (see `docs/TUNING.md`).
fn concurrency_shapes(max_flops: f64) -> Vec<(usize, usize, usize)> {
    let mut v = Vec::new();
    for m in [24, 96, 384, 2048] {
        for n in [24, 96, 384, 2048] {
            for k in [24, 96, 384, 2048] {
                if v.is_empty() || 2.0 * (m * n * k) as f64 <= max_flops {
                    v.push((m, n, k));
                }
            }
        }
    }
    v
}

/// Measures how much slower single-threaded GEMM calls run when `threads` of them run at
/// once (a contraction's parallel loop of calls) than the one-thread model prices them, for
/// the `gemm` crate (the library parallel loops use), every element type and every operand
/// layout class (each against that class's one-thread fit), and stores the factor of each
/// of the [`concurrency_shapes`] of at most `max_flops` (2·m·n·k, for every element type; all
/// 64 from 2·2048³ ≈ 1.72e10) and their geometric mean in `profile.gemm_concurrent`: with
/// A's blocks read from memory and, for `f32` and `f64`, also from the last-level cache,
/// with C written to memory or into blocks that stay in cache ([`OperandSource`]). Needs the
/// one-thread GEMM coefficients ([`calibrate_gemm`] at 1 thread) first. Each shape runs
/// about `round_seconds` of calls per thread in each of four rounds (the CLI's default,
/// [`CONCURRENCY_ROUND_SECONDS`], is long enough that waking the threads does not count);
/// about 2 min on 2 cores at that default with every shape.
///
/// ```no_run
/// use ttgt::backend::cpu::{calibrate_gemm, calibrate_gemm_concurrency, CONCURRENCY_ROUND_SECONDS};
/// let mut p = ttgt::model::profile();
/// calibrate_gemm(&mut p, 1, 2e8).unwrap();
/// calibrate_gemm_concurrency(&mut p, 2, CONCURRENCY_ROUND_SECONDS, 2e10).unwrap();
/// assert!(p.gemm_concurrent.iter().all(|c| c.factor > 0.0));
/// ```
pub fn calibrate_gemm_concurrency(
    profile: &mut Profile,
    threads: usize,
    round_seconds: f64,
    max_flops: f64,
) -> Result<()> {
    if threads < 2 {
        return Ok(());
    }
    let library = GemmLibrary::Gemm;
    let mut measured = Vec::new();
    let (p, rs, mf, m) = (&*profile, round_seconds, max_flops, &mut measured);
    probe_concurrency_typed::<f32>(p, library, threads, rs, mf, m)?;
    probe_concurrency_typed::<f64>(p, library, threads, rs, mf, m)?;
    probe_concurrency_typed::<Complex32>(p, library, threads, rs, mf, m)?;
    probe_concurrency_typed::<Complex64>(p, library, threads, rs, mf, m)?;
    profile
        .gemm_concurrent
        .retain(|c| !(c.library == library && c.threads == threads));
    profile.gemm_concurrent.extend(measured);
    Ok(())
}

/// Which parts of the cost model [`calibrate_machine`] measures; the rest is kept from the
/// stored profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CalibrateParts {
    /// Copy bandwidth and transposition factors, GEMM coefficients (at the given threads and
    /// at one), concurrent single-threaded GEMMs.
    #[default]
    All,
    /// Copy bandwidth and transposition factors only.
    TransposeOnly,
    /// Copy bandwidth and transposition factors; the GEMM part is left as stored.
    NoGemm,
    /// GEMM coefficients and concurrent GEMMs only.
    GemmOnly,
    /// Concurrent single-threaded GEMMs only.
    GemmConcurrencyOnly,
}

/// Measures this machine for the cost models: what `ttgt calibrate` and Python's
/// `ttgt.calibrate()` run. `copy_bytes` is the copy probe's size, `threads` the thread count
/// of the transposition factors and the GEMM fit, `max_flops` the largest GEMM timed,
/// `round_seconds` one round of the concurrency probe. Returns the new profile (not yet
/// stored or in use) and the spread of the GEMM samples per thread count fitted.
///
/// ```no_run
/// use ttgt::backend::cpu::{calibrate_machine, CalibrateParts, CONCURRENCY_ROUND_SECONDS};
/// let (p, spreads) = calibrate_machine(CalibrateParts::All, 192 << 20, 2, 2e10, CONCURRENCY_ROUND_SECONDS).unwrap();
/// p.save().unwrap();
/// ttgt::model::set_profile(p);
/// # let _ = spreads;
/// ```
pub fn calibrate_machine(
    parts: CalibrateParts,
    copy_bytes: usize,
    threads: usize,
    max_flops: f64,
    round_seconds: f64,
) -> Result<(Profile, Vec<(usize, f64)>)> {
    let threads = threads.max(1);
    let max_flops = max_flops.max(1e6);
    let stored = crate::model::profile();
    let mut spreads = Vec::new();
    let mut p = match parts {
        CalibrateParts::GemmOnly | CalibrateParts::GemmConcurrencyOnly => stored,
        _ => {
            let mut p = crate::model::calibrate(copy_bytes.max(1 << 20), threads)?;
            p.gemm = stored.gemm;
            p.gemm_concurrent = stored.gemm_concurrent;
            p
        }
    };
    if matches!(parts, CalibrateParts::All | CalibrateParts::GemmOnly) {
        spreads.push((threads, calibrate_gemm(&mut p, threads, max_flops)?));
        if threads > 1 {
            // parallel loops run single-threaded GEMMs, several at once
            spreads.push((1, calibrate_gemm(&mut p, 1, max_flops)?));
        }
    }
    if matches!(
        parts,
        CalibrateParts::All | CalibrateParts::GemmOnly | CalibrateParts::GemmConcurrencyOnly
    ) {
        calibrate_gemm_concurrency(&mut p, threads, round_seconds, max_flops)?;
    }
    Ok((p, spreads))
}

//! A quick probe of the GEMM libraries on first use, so that a machine without a stored
//! calibration is priced at its own compute rate rather than a nominal one.
//!
//! The first plan that prices a GEMM of a real element type times the `gemm` crate and
//! `matrixmultiply` on one thread at a few shapes of the kinds contractions make (a 192³ cube
//! for the compute rate; long, flat, deep and tiny products for the per-element and per-call
//! costs), after a warm-up, in two to four rounds with the libraries alternating shape by shape, some tens of
//! milliseconds per precision, once per process, and fits the five coefficients of
//! [`GemmCoeffs`] to them (the compute rate from the largest product, the
//! other four by least squares on relative errors, none negative). It also times a few wide
//! products with B column-major beside the same products row-major and takes what a
//! column-major B adds per element of B ([`column_major_b_seconds`]: the `gemm` crate packs
//! such a B element by element, 1.3–3.3× the row-major call when C has few rows), so that
//! the layout classes are ranked apart without a calibration. Complex types use the
//! probe of their real precision (each complex product is priced by its real flops, and its
//! elements are twice as wide); the engine's own GEMM ([`GemmLibrary::Native`]) keeps its
//! nominal ratio to the `gemm` crate. The planner takes the compute rate and the per-call
//! cost from the probe ([`crate::model::gemm_coeffs_in`]), and its per-element costs as far as
//! a call's operands stay in cache ([`crate::model::gemm_coeffs_resident`]). A calibration (`ttgt
//! calibrate`) replaces all of it; `TTGT_GEMM_PROBE=0` turns the probe off (nominal rates, the
//! same on every machine).

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use super::calibrate::solve_ridge_to;
use super::gemm::{features, nominal_gflops, GemmCoeffs, GemmLayout, GemmLibrary};
use super::profile::provisional_profile;
use crate::tensor::DType;

/// Shapes `(m, n, k)` the probe times, row-major: tiny products fix the per-call cost, the
/// cube the compute rate, the skinny ones the costs per element of A, B and C.
pub const GEMM_PROBE_SHAPES: [(usize, usize, usize); 14] = [
    (8, 8, 8),
    (24, 24, 24),
    (64, 64, 64),
    (128, 128, 128),
    (192, 192, 192),
    (256, 256, 64),
    (1024, 8, 64),
    (8, 1024, 64),
    (1024, 64, 8),
    (2048, 5, 5),
    (5, 2048, 5),
    (2048, 24, 64),
    (48, 48, 1024),
    (96, 96, 12),
];

/// Shapes the probe also times with B column-major (`rc`), and row-major beside them: wide or
/// deep (`k·n` large beside `m·n`), where packing B is a large part of a call. Their extents
/// are not powers of two, whose strides share cache sets (`docs/TUNING.md`, "Column-major B
/// in the GEMM probe").
const B_COL_SHAPES: [(usize, usize, usize); 3] = [(8, 1000, 60), (48, 48, 1000), (5, 2000, 5)];

/// Fewest rounds of the probe (each shape's best over all rounds is kept).
const PROBE_ROUNDS: usize = 2;

/// Most rounds: rounds go on past [`PROBE_ROUNDS`] while the largest shape still gets faster
/// (by more than [`PROBE_STEADY`]) in the last one.
const PROBE_MAX_ROUNDS: usize = 4;

/// Relative gain of the largest shape's best time in a round above which another round runs;
/// also the spread within which the warm-up takes the libraries' calls as steady.
const PROBE_STEADY: f64 = 0.05;

/// Longest warm-up before the rounds (seconds): a core that has been idle runs the first
/// tens of milliseconds of a process's work up to twice as slow (`docs/TUNING.md`).
const PROBE_WARM_SECONDS: f64 = 0.06;

/// Consecutive calls of each library within [`PROBE_STEADY`] of its best that end the
/// warm-up.
const PROBE_WARM_STEADY_CALLS: usize = 3;

/// Seconds of calls each probe shape is timed for at least in each round (best of the calls;
/// at least [`PROBE_MIN_CALLS`] calls).
const PROBE_SECONDS_PER_SHAPE: f64 = 5e-5;

/// Fewest timed calls per probe shape.
const PROBE_MIN_CALLS: usize = 3;

/// Most timed calls per probe shape (tiny products).
const PROBE_MAX_CALLS: usize = 40;

/// Margin within which the probed compute rates of matrixmultiply and the `gemm` crate count
/// as a tie, which goes to the `gemm` crate: matrixmultiply's rate is then taken this much
/// below the `gemm` crate's. On a quiet core the `gemm` crate ran the cubes 10–20 % faster;
/// under load from elsewhere the two ran alike, and a probe timed then ranked them by chance
/// (`docs/TUNING.md`).
const LIBRARY_TIE: f64 = 0.05;

/// Largest median relative error of a fit to the probe's own samples for it to be used (a
/// machine too busy to time, or a library whose speed the five terms do not describe, keeps
/// the nominal rates).
const PROBE_MAX_FIT_ERROR: f64 = 0.35;

/// Whether the probe is on (`TTGT_GEMM_PROBE` unset, or anything but `0`/`off`/`false`; never
/// under Miri, which would interpret hundreds of millions of operations).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        !cfg!(miri)
            && !matches!(
                std::env::var("TTGT_GEMM_PROBE").as_deref(),
                Ok("0") | Ok("off") | Ok("false")
            )
    })
}

/// One-thread coefficients of `library` for `dtype` (row-major operands) from the quick
/// probe, probing on the first call for that library and precision; `None` when the probe is
/// off, the library is not probed, or its fit was too poor to use.
///
/// ```
/// use ttgt::{DType, model::{probed_gemm_coeffs, GemmLibrary}};
/// if let Some(c) = probed_gemm_coeffs(GemmLibrary::Gemm, DType::F64) {
///     assert_eq!(c.threads, 1);
///     assert!(c.flop > 0.0 && c.call >= 0.0);
///     // a 256³ product is priced between 1 and 1000 GFLOP/s
///     let s = c.seconds(256, 256, 256);
///     assert!(s > 2.0 * 256f64.powi(3) / 1e12 && s < 2.0 * 256f64.powi(3) / 1e9);
/// }
/// ```
pub fn probed_gemm_coeffs(library: GemmLibrary, dtype: DType) -> Option<GemmCoeffs> {
    let mut c = GemmCoeffs {
        dtype,
        library,
        ..probed_as(library, dtype)?.row.clone()
    };
    if library == GemmLibrary::Native {
        c.flop *= nominal_gflops(GemmLibrary::Gemm, dtype) / nominal_gflops(library, dtype);
    }
    if dtype.is_complex() {
        // a complex element is two reals: twice the bytes per element of A, B and C; the
        // compute rate is per (real) flop, which `features` counts for complex products.
        c.a *= 2.0;
        c.b *= 2.0;
        c.c *= 2.0;
    }
    Some(c)
}

/// Seconds a column-major B (its `k` index of unit stride) adds per element of B (`k·n`) to a
/// one-thread call of `library` on `dtype`, from the quick probe (twice the real precision's
/// for a complex type); 0 when the probe is off or has no fit for the library, and for the
/// engine's own GEMM, which the probe does not time.
pub(super) fn column_major_b_seconds(library: GemmLibrary, dtype: DType) -> f64 {
    if library == GemmLibrary::Native {
        return 0.0;
    }
    let per_real = probed_as(library, dtype).map_or(0.0, |p| p.b_col);
    if dtype.is_complex() {
        2.0 * per_real
    } else {
        per_real
    }
}

/// The probe of the real precision of `dtype` for `library` (the `gemm` crate's for our own
/// GEMM).
fn probed_as(library: GemmLibrary, dtype: DType) -> Option<&'static Probed> {
    if !enabled() {
        return None;
    }
    let double = matches!(dtype, DType::F64 | DType::C64);
    let real = if double { DType::F64 } else { DType::F32 };
    let measured_as = if library == GemmLibrary::Native {
        GemmLibrary::Gemm
    } else {
        library
    };
    probed_real(measured_as, real)
}

/// What the probe found of one library in one real precision.
#[derive(Clone, Debug)]
struct Probed {
    /// The fit to the row-major shapes.
    row: GemmCoeffs,
    /// Seconds a column-major B adds per element of B (`k·n`).
    b_col: f64,
}

/// The probe of `library` for a real `dtype`, made once per process (both libraries of a
/// precision at once); later lookups read a finished cell without locking.
fn probed_real(library: GemmLibrary, dtype: DType) -> Option<&'static Probed> {
    /// The fits of [`PROBED_LIBRARIES`] in f32 and in f64.
    type Fits = [Option<Probed>; 2];
    static CELLS: [OnceLock<Fits>; 2] = [OnceLock::new(), OnceLock::new()];
    // Held while probing: two precisions probed at once would time each other.
    static PROBING: Mutex<()> = Mutex::new(());
    let lib = PROBED_LIBRARIES.iter().position(|&l| l == library)?;
    let cell = match dtype {
        DType::F32 => &CELLS[0],
        DType::F64 => &CELLS[1],
        _ => return None,
    };
    cell.get_or_init(|| {
        let _probing = PROBING.lock().unwrap_or_else(|p| p.into_inner());
        if dtype == DType::F32 {
            probe_precision::<f32>([gemm_crate::<f32>, mm_f32], dtype)
        } else {
            probe_precision::<f64>([gemm_crate::<f64>, mm_f64], dtype)
        }
    })[lib]
        .as_ref()
}

/// The libraries the probe times, in the order of [`probe_precision`]'s calls.
const PROBED_LIBRARIES: [GemmLibrary; 2] = [GemmLibrary::Gemm, GemmLibrary::MatrixMultiply];

/// Times [`PROBED_LIBRARIES`] by these calls (in that order) and fits each.
fn probe_precision<T: Copy + From<u8>>(calls: [Call<T>; 2], dtype: DType) -> [Option<Probed>; 2] {
    let libs = [
        (PROBED_LIBRARIES[0], calls[0]),
        (PROBED_LIBRARIES[1], calls[1]),
    ];
    let jobs = probe_jobs();
    let mut fits = [None, None];
    for (fit, (lib, times)) in fits.iter_mut().zip(time_libraries::<T>(&libs, &jobs)) {
        let row: Vec<Sample> = jobs
            .iter()
            .zip(&times)
            .filter(|((_, l), t)| *l == GemmLayout::ROW && **t > 0.0 && t.is_finite())
            .map(|(&((m, n, k), _), &t)| (m, n, k, t))
            .collect();
        *fit = fit_probe(lib, dtype, &row).map(|row| Probed {
            row,
            b_col: column_major_b_extra(&jobs, &times),
        });
    }
    settle_tie(&mut fits);
    fits
}

/// Gives a tie of the compute rates (within [`LIBRARY_TIE`]) of the fits of
/// [`PROBED_LIBRARIES`] to the `gemm` crate: a matrixmultiply rate not more than that margin
/// above the `gemm` crate's is lowered to that margin below it (seconds per flop raised).
fn settle_tie(fits: &mut [Option<Probed>; 2]) {
    let at = |lib: GemmLibrary| PROBED_LIBRARIES.iter().position(|&l| l == lib);
    let (Some(g), Some(mm)) = (at(GemmLibrary::Gemm), at(GemmLibrary::MatrixMultiply)) else {
        return;
    };
    let Some(gemm_flop) = fits[g].as_ref().map(|p| p.row.flop) else {
        return;
    };
    if let Some(p) = fits[mm].as_mut() {
        let tied = gemm_flop * (1.0 + LIBRARY_TIE);
        if p.row.flop * (1.0 + LIBRARY_TIE) >= gemm_flop && p.row.flop < tied {
            p.row.flop = tied;
        }
    }
}

/// What timing the probe does: every shape of [`GEMM_PROBE_SHAPES`] row-major, then each of
/// [`B_COL_SHAPES`] row-major and with B column-major (`rc`).
fn probe_jobs() -> Vec<(Shape, GemmLayout)> {
    let rc = GemmLayout {
        a_col: false,
        b_col: true,
    };
    GEMM_PROBE_SHAPES
        .iter()
        .map(|&s| (s, GemmLayout::ROW))
        .chain(
            B_COL_SHAPES
                .iter()
                .flat_map(|&s| [(s, GemmLayout::ROW), (s, rc)]),
        )
        .collect()
}

/// Seconds a column-major B adds per element of B: the median over the shapes timed with B
/// column-major of the time above the same shape's row-major call, per element (none below
/// zero; 0 without samples). The row-major time of a shape is its first in `jobs`.
fn column_major_b_extra(jobs: &[(Shape, GemmLayout)], times: &[f64]) -> f64 {
    let row_time = |s: Shape| {
        jobs.iter()
            .zip(times)
            .find(|((js, l), _)| *js == s && *l == GemmLayout::ROW)
            .map(|(_, &t)| t)
    };
    let mut extra: Vec<f64> = jobs
        .iter()
        .zip(times)
        .filter(|((_, l), t)| l.b_col && !l.a_col && t.is_finite())
        .filter_map(|(&((m, n, k), _), &t)| {
            let row = row_time((m, n, k)).filter(|r| r.is_finite())?;
            Some(((t - row) / (k * n).max(1) as f64).max(0.0))
        })
        .collect();
    if extra.is_empty() {
        return 0.0;
    }
    extra.sort_by(f64::total_cmp);
    extra[extra.len() / 2]
}

/// Coefficients fitted to `(m, n, k, seconds)` samples with no coefficient negative (a term
/// the least-squares solution makes negative is dropped and the rest refitted); `None` when
/// there are too few samples or the fit misses them by more than [`PROBE_MAX_FIT_ERROR`]
/// (median relative error).
fn fit_probe(library: GemmLibrary, dtype: DType, samples: &[Sample]) -> Option<GemmCoeffs> {
    if samples.len() < GEMM_PROBE_SHAPES.len() / 2 {
        return None;
    }
    let nominal = GemmCoeffs::nominal(library, dtype, 1, &provisional_profile());
    let features = |&(m, n, k, _): &(usize, usize, usize, f64)| features(dtype, m, n, k);
    // The compute rate from the product with the most flops, as if it were all compute
    // (its other terms are a few per cent of it); fitted freely with the small products, the
    // rate came out 10-20 % fast, traded against the per-element terms.
    let big = samples
        .iter()
        .max_by(|x, y| features(x)[1].total_cmp(&features(y)[1]))?;
    let flop = big.3 / features(big)[1];
    let mut dropped = [false, true, false, false, false];
    let x = loop {
        let (rows, targets): (Vec<[f64; 5]>, Vec<f64>) = samples
            .iter()
            .map(|s| {
                let f = features(s);
                let row = std::array::from_fn(|i| if dropped[i] { 0.0 } else { f[i] / s.3 });
                (row, 1.0 - flop * f[1] / s.3)
            })
            .unzip();
        let x = solve_ridge_to(&rows, &targets);
        let worst = (0..5)
            .filter(|&i| !dropped[i])
            .filter(|&i| x[i].is_some_and(|v| v < 0.0))
            .min_by(|&i, &j| x[i].unwrap_or(0.0).total_cmp(&x[j].unwrap_or(0.0)));
        match worst {
            Some(i) => dropped[i] = true,
            None => break x,
        }
    };
    let v = |i: usize| x[i].filter(|v| v.is_finite() && *v >= 0.0).unwrap_or(0.0);
    if !(flop > 0.0 && flop.is_finite()) {
        return None;
    }
    let c = GemmCoeffs {
        call: v(0),
        flop,
        a: v(2),
        b: v(3),
        c: v(4),
        ..nominal
    };
    let mut errors: Vec<f64> = samples
        .iter()
        .map(|&(m, n, k, t)| (c.seconds(m, n, k) / t - 1.0).abs())
        .collect();
    errors.sort_by(f64::total_cmp);
    (errors[errors.len() / 2] <= PROBE_MAX_FIT_ERROR).then_some(c)
}

/// One timed shape: `(m, n, k, seconds)`.
type Sample = (usize, usize, usize, f64);

/// A library's `C = A·B` on the calling thread: C row-major, A and B dense in the layout
/// class given ([`GemmLayout::strides`]).
type Call<T> = fn(&[T], &[T], &mut [T], Shape, GemmLayout);

/// Times each library at each `(shape, layout)` job in rounds that each time every job in
/// turn, each job by every library one after the other, keeping each one's best (seconds per
/// call, in the order of `jobs`): the libraries' calls of one shape are then a millisecond
/// apart, so that a spell of load from elsewhere (another process starting, a neighbour on a
/// shared host) slows both alike and leaves their order as it is. In each round, a job is
/// timed by one untimed call, then the best of at least [`PROBE_MIN_CALLS`] calls filling
/// [`PROBE_SECONDS_PER_SHAPE`]. The rounds follow a warm-up on the largest job
/// ([`warm_up`]); there are [`PROBE_ROUNDS`] of them, and more (up to [`PROBE_MAX_ROUNDS`])
/// while the last one made some library's best time of the largest job faster by more than
/// [`PROBE_STEADY`]: the core was still speeding up.
fn time_libraries<T: Copy + From<u8>>(
    libs: &[(GemmLibrary, Call<T>)],
    jobs: &[(Shape, GemmLayout)],
) -> Vec<(GemmLibrary, Vec<f64>)> {
    let mut best = vec![vec![f64::INFINITY; jobs.len()]; libs.len()];
    let largest = (0..jobs.len()).max_by_key(|&s| {
        let (m, n, k) = jobs[s].0;
        m * n * k
    });
    if let Some(s) = largest {
        warm_up(libs, jobs[s].0, jobs[s].1);
    }
    for round in 1..=PROBE_MAX_ROUNDS {
        let before: Vec<f64> = largest.map_or(Vec::new(), |s| best.iter().map(|b| b[s]).collect());
        for (s, &((m, n, k), layout)) in jobs.iter().enumerate() {
            for (l, &(_, call)) in libs.iter().enumerate() {
                let a = vec![T::from(1); m * k];
                let b = vec![T::from(2); k * n];
                let mut c = vec![T::from(0); m * n];
                let t0 = Instant::now();
                call(&a, &b, &mut c, (m, n, k), layout);
                let first = t0.elapsed().as_secs_f64().max(1e-9);
                let calls = ((PROBE_SECONDS_PER_SHAPE / first).ceil() as usize)
                    .clamp(PROBE_MIN_CALLS, PROBE_MAX_CALLS);
                for _ in 0..calls {
                    let t = Instant::now();
                    call(&a, &b, &mut c, (m, n, k), layout);
                    best[l][s] = best[l][s].min(t.elapsed().as_secs_f64());
                }
                std::hint::black_box(&c);
            }
        }
        let sped_up = largest.is_some_and(|s| {
            best.iter()
                .zip(&before)
                .any(|(b, &was)| was.is_finite() && b[s] * (1.0 + PROBE_STEADY) < was)
        });
        if round >= PROBE_ROUNDS && !sped_up {
            break;
        }
    }
    libs.iter().map(|&(lib, _)| lib).zip(best).collect()
}

/// Runs `shape` in `layout` by each library in turn until each library's last
/// [`PROBE_WARM_STEADY_CALLS`] calls all ran within [`PROBE_STEADY`] of its best call, or for
/// [`PROBE_WARM_SECONDS`]: the rounds then time a core that is up to speed.
fn warm_up<T: Copy + From<u8>>(
    libs: &[(GemmLibrary, Call<T>)],
    (m, n, k): Shape,
    layout: GemmLayout,
) {
    let a = vec![T::from(1); m * k];
    let b = vec![T::from(2); k * n];
    let mut c = vec![T::from(0); m * n];
    let start = Instant::now();
    let mut best = vec![f64::INFINITY; libs.len()];
    let mut steady = vec![0usize; libs.len()];
    while start.elapsed().as_secs_f64() < PROBE_WARM_SECONDS
        && steady.iter().any(|&s| s < PROBE_WARM_STEADY_CALLS)
    {
        for (l, &(_, call)) in libs.iter().enumerate() {
            let t = Instant::now();
            call(&a, &b, &mut c, (m, n, k), layout);
            let seconds = t.elapsed().as_secs_f64();
            if seconds < best[l] {
                // a new best: the steady calls before it count only if it is within reach
                if seconds * (1.0 + PROBE_STEADY) < best[l] {
                    steady[l] = 0;
                }
                best[l] = seconds;
            }
            if seconds <= best[l] * (1.0 + PROBE_STEADY) {
                steady[l] += 1;
            } else {
                steady[l] = 0;
            }
        }
    }
    std::hint::black_box(&c);
}

/// `C = A·B` by the `gemm` crate on the calling thread, C row-major, A and B in `layout`.
fn gemm_crate<T: 'static + Copy + From<u8>>(
    a: &[T],
    b: &[T],
    c: &mut [T],
    (m, n, k): Shape,
    layout: GemmLayout,
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let ([a_rs, a_cs], [b_rs, b_cs]) = layout.strides(m, n, k);
    // SAFETY: A, B and C are dense m×k, k×n and m×n buffers (checked above) addressed by
    // strides of their layout class, so every index stays inside them; C is borrowed mutably
    // and overlaps neither; `read_dst` is false, so C's contents are not read.
    unsafe {
        gemm::gemm::<T>(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            T::from(0),
            T::from(1),
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

type Shape = (usize, usize, usize);

/// Defines `$name`: `C = A·B` by `matrixmultiply::$gemm` in `$t`, C row-major, A and B in
/// the layout class given.
macro_rules! matrixmultiply_call {
    ($name:ident, $gemm:ident, $t:ty) => {
        #[doc = concat!("`C = A·B` by `matrixmultiply` in ", stringify!($t), ", C row-major.")]
        fn $name(a: &[$t], b: &[$t], c: &mut [$t], (m, n, k): Shape, layout: GemmLayout) {
            assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
            let ([a_rs, a_cs], [b_rs, b_cs]) = layout.strides(m, n, k);
            let n_ = n as isize;
            // SAFETY: dense buffers of the sizes checked above, addressed by the strides of
            // their layout class; C overlaps neither operand.
            unsafe {
                matrixmultiply::$gemm(
                    m,
                    k,
                    n,
                    1.0,
                    a.as_ptr(),
                    a_rs,
                    a_cs,
                    b.as_ptr(),
                    b_rs,
                    b_cs,
                    0.0,
                    c.as_mut_ptr(),
                    n_,
                    1,
                );
            }
        }
    };
}

matrixmultiply_call!(mm_f32, sgemm, f32);
matrixmultiply_call!(mm_f64, dgemm, f64);

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// The calls the fake libraries below received: (library, m).
        static CALLS: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
    }

    fn fake_0(_: &[f64], _: &[f64], _: &mut [f64], (m, _, _): Shape, _: GemmLayout) {
        CALLS.with(|c| c.borrow_mut().push((0, m)));
    }

    fn fake_1(_: &[f64], _: &[f64], _: &mut [f64], (m, _, _): Shape, _: GemmLayout) {
        CALLS.with(|c| c.borrow_mut().push((1, m)));
    }

    #[test]
    fn the_libraries_alternate_shape_by_shape_in_every_round() {
        let jobs = [((3, 2, 2), GemmLayout::ROW), ((4, 2, 2), GemmLayout::ROW)];
        let libs: [(GemmLibrary, Call<f64>); 2] = [
            (GemmLibrary::Gemm, fake_0),
            (GemmLibrary::MatrixMultiply, fake_1),
        ];
        let times = time_libraries(&libs, &jobs);
        assert_eq!(times.len(), 2);
        assert!(times
            .iter()
            .all(|(_, t)| t.len() == 2 && t.iter().all(|x| x.is_finite())));
        // a warm-up on the largest job, the libraries call by call; then rounds in which
        // each library times a job in one untimed and several timed calls: the runs of
        // calls go library 0, library 1 on the first shape, then both on the second
        let calls = CALLS.with(|c| c.take());
        let warm = calls.iter().take_while(|c| c.1 == 4).count();
        assert!(warm >= 2 * PROBE_WARM_STEADY_CALLS, "{calls:?}");
        assert!(calls[..warm]
            .iter()
            .enumerate()
            .all(|(i, &c)| c == (i % 2, 4)));
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &c in &calls[warm..] {
            if runs.last() != Some(&c) {
                runs.push(c);
            }
        }
        let round = [(0, 3), (1, 3), (0, 4), (1, 4)];
        let rounds = runs.len() / round.len();
        assert!(
            (PROBE_ROUNDS..=PROBE_MAX_ROUNDS).contains(&rounds),
            "{rounds} rounds"
        );
        assert_eq!(runs, round.repeat(rounds));
    }

    thread_local! {
        /// Calls the slowly starting fake library below has received.
        static STARTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Busy for `micros` microseconds.
    fn spin(micros: u64) {
        let t = Instant::now();
        while t.elapsed() < std::time::Duration::from_micros(micros) {
            std::hint::spin_loop();
        }
    }

    /// A library speeding up: its first four calls take 400, 300, 200 and 100 µs, the later
    /// ones 100 µs.
    fn speeding_up(_: &[f64], _: &[f64], _: &mut [f64], _: Shape, _: GemmLayout) {
        let n = STARTED.with(|c| {
            let n = c.get();
            c.set(n + 1);
            n
        });
        spin(400 - 100 * n.min(3) as u64);
    }

    /// A library whose calls take 100 and 200 µs in turn: never steady.
    fn erratic(_: &[f64], _: &[f64], _: &mut [f64], _: Shape, _: GemmLayout) {
        let n = STARTED.with(|c| {
            let n = c.get();
            c.set(n + 1);
            n
        });
        spin(if n.is_multiple_of(2) { 100 } else { 200 });
    }

    #[test]
    fn the_warm_up_lasts_until_the_calls_are_steady_or_its_time_is_up() {
        let one = |f: Call<f64>| [(GemmLibrary::Gemm, f)];
        STARTED.with(|c| c.set(0));
        warm_up(&one(speeding_up), (2, 2, 2), GemmLayout::ROW);
        let calls = STARTED.with(|c| c.get());
        // past the slower calls, then the steady ones (a busy host may add a few)
        assert!(calls >= 3 + PROBE_WARM_STEADY_CALLS, "{calls}");
        STARTED.with(|c| c.set(0));
        let t = Instant::now();
        warm_up(&one(erratic), (2, 2, 2), GemmLayout::ROW);
        let took = t.elapsed().as_secs_f64();
        assert!(took >= PROBE_WARM_SECONDS, "{took}");
    }

    #[test]
    fn the_probed_libraries_compute_the_product_in_every_layout() {
        let (m, n, k) = (5, 7, 3);
        let a = |i: usize, l: usize| (i * k + l) as f64;
        let b = |l: usize, j: usize| ((l * n + j) % 5) as f64;
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k).map(|l| a(i, l) * b(l, j)).sum();
            }
        }
        for layout in GemmLayout::ALL {
            let ([a_rs, a_cs], [b_rs, b_cs]) = layout.strides(m, n, k);
            let mut da = vec![0.0; m * k];
            for i in 0..m {
                for l in 0..k {
                    da[i * a_rs as usize + l * a_cs as usize] = a(i, l);
                }
            }
            let mut db = vec![0.0; k * n];
            for l in 0..k {
                for j in 0..n {
                    db[l * b_rs as usize + j * b_cs as usize] = b(l, j);
                }
            }
            let mut c = vec![f64::NAN; m * n];
            gemm_crate(&da, &db, &mut c, (m, n, k), layout);
            assert_eq!(c, want, "gemm crate, {layout}");
            let mut c = vec![f64::NAN; m * n];
            mm_f64(&da, &db, &mut c, (m, n, k), layout);
            assert_eq!(c, want, "matrixmultiply f64, {layout}");
            let (a32, b32): (Vec<f32>, Vec<f32>) = (
                da.iter().map(|&x| x as f32).collect(),
                db.iter().map(|&x| x as f32).collect(),
            );
            let mut c = vec![f32::NAN; m * n];
            mm_f32(&a32, &b32, &mut c, (m, n, k), layout);
            assert_eq!(
                c,
                want.iter().map(|&x| x as f32).collect::<Vec<_>>(),
                "matrixmultiply f32, {layout}"
            );
        }
    }

    #[test]
    fn a_column_major_b_costs_the_median_extra_per_element() {
        let jobs = probe_jobs();
        // row-major calls at 1 µs; column-major B at 1 µs plus 0.1, 0.3 and 0.2 ns per
        // element of B
        let mut at = 0;
        let times: Vec<f64> = jobs
            .iter()
            .map(|&((_, n, k), l)| {
                if l.b_col {
                    at += 1;
                    1e-6 + [1e-10, 3e-10, 2e-10][at - 1] * (k * n) as f64
                } else {
                    1e-6
                }
            })
            .collect();
        assert_eq!(at, B_COL_SHAPES.len());
        let b = column_major_b_extra(&jobs, &times);
        assert!((b - 2e-10).abs() < 1e-15, "{b}");
        // never below zero: a column-major B that runs faster adds nothing
        let faster: Vec<f64> = jobs
            .iter()
            .map(|&(_, l)| if l.b_col { 0.5e-6 } else { 1e-6 })
            .collect();
        assert_eq!(column_major_b_extra(&jobs, &faster), 0.0);
        // every column-major shape is also timed row-major
        for &(s, l) in &jobs {
            assert!(
                l == GemmLayout::ROW || jobs.contains(&(s, GemmLayout::ROW)),
                "{s:?}"
            );
        }
    }

    #[test]
    fn a_tie_of_compute_rates_goes_to_the_gemm_crate() {
        let fit = |library, flop| {
            Some(Probed {
                row: GemmCoeffs {
                    flop,
                    ..GemmCoeffs::nominal(library, DType::F64, 1, &provisional_profile())
                },
                b_col: 0.0,
            })
        };
        let gemm_at = PROBED_LIBRARIES
            .iter()
            .position(|&l| l == GemmLibrary::Gemm)
            .unwrap();
        let settled = |gemm: f64, mm: f64| {
            let mut fits = [None, None];
            fits[gemm_at] = fit(GemmLibrary::Gemm, gemm);
            fits[1 - gemm_at] = fit(GemmLibrary::MatrixMultiply, mm);
            settle_tie(&mut fits);
            let flop = |i: usize| fits[i].as_ref().unwrap().row.flop;
            (flop(gemm_at), flop(1 - gemm_at))
        };
        let tied = 2e-11 * (1.0 + LIBRARY_TIE);
        // matrixmultiply a little faster or a little slower: a tie, priced that margin slower
        for mm in [1.97e-11, 2e-11, 2.05e-11] {
            let (g, m) = settled(2e-11, mm);
            assert_eq!(g, 2e-11);
            assert!((m - tied).abs() < 1e-20, "{mm}: {m}");
        }
        // clearly faster or clearly slower: as probed
        assert_eq!(settled(2e-11, 1.8e-11), (2e-11, 1.8e-11));
        assert_eq!(settled(2e-11, 2.6e-11), (2e-11, 2.6e-11));
        // one library without a fit: nothing to settle
        let mut fits = [None, None];
        fits[1 - gemm_at] = fit(GemmLibrary::MatrixMultiply, 2e-11);
        settle_tie(&mut fits);
        assert!(fits.iter().flatten().all(|p| p.row.flop == 2e-11));
    }

    #[test]
    fn the_fit_recovers_known_coefficients_and_drops_negative_terms() {
        let truth = GemmCoeffs {
            call: 2e-7,
            flop: 1e-11,
            a: 1e-10,
            b: 0.0,
            c: 5e-11,
            ..GemmCoeffs::nominal(GemmLibrary::Gemm, DType::F64, 1, &provisional_profile())
        };
        let samples: Vec<_> = GEMM_PROBE_SHAPES
            .iter()
            .map(|&(m, n, k)| (m, n, k, truth.seconds(m, n, k)))
            .collect();
        let fit = fit_probe(GemmLibrary::Gemm, DType::F64, &samples).unwrap();
        // the compute rate is the largest product's time as if all compute: its other terms
        // make it a few per cent slow
        assert!(
            fit.flop >= truth.flop && fit.flop < 1.05 * truth.flop,
            "{fit:?}"
        );
        assert!((fit.a / truth.a - 1.0).abs() < 0.2, "{fit:?}");
        assert!(fit.b >= 0.0 && fit.b < 1e-11, "{fit:?}");
        assert!(!fit.measured);
        // samples no five-term model describes are refused
        let wild: Vec<_> = samples
            .iter()
            .enumerate()
            .map(|(i, &(m, n, k, t))| (m, n, k, t * if i % 2 == 0 { 10.0 } else { 0.1 }))
            .collect();
        assert!(fit_probe(GemmLibrary::Gemm, DType::F64, &wild).is_none());
        assert!(fit_probe(GemmLibrary::Gemm, DType::F64, &samples[..3]).is_none());
    }
}

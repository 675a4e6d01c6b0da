//! Calibration: measures this machine's copy bandwidth per thread count and fits the
//! transposition efficiency factors on a training set of transpositions (least squares on
//! the log of the time ratio, i.e. a geometric mean per kernel class).

use std::time::Instant;

use super::profile::{machine_name, Profile, TransposeCoeffs};
use super::transpose::{unit_costs, Costs, CLASSES};
use crate::error::Result;
use crate::tensor::{zeroed, zeroed_aligned, DType, Element, Layout, StridedView, StridedViewMut};
use crate::transpose::{on_threads, Isa, TransposeOptions, TransposePlan};
use rayon::prelude::*;

/// `n` written values: a source whose pages are real memory. A source left zeroed reads the
/// kernel's shared zero page, which stays in cache and makes a copy look faster than memory.
fn copy_source(n: usize) -> Result<Vec<f64>> {
    let mut src = zeroed::<f64>(n, "copy source")?;
    src.iter_mut().enumerate().for_each(|(i, x)| *x = i as f64);
    Ok(src)
}

/// Best time of `repeat` copies of `bytes` bytes split across `threads` threads (fresh
/// buffers).
pub fn copy_seconds(bytes: usize, threads: usize, repeat: usize) -> Result<f64> {
    let n = bytes / 8;
    let src = copy_source(n)?;
    let mut dst = zeroed::<f64>(n, "copy destination")?;
    Ok(copy_seconds_on(&src, &mut dst, threads, repeat))
}

/// Best time of `repeat` copies of `src` into `dst` split into `threads` contiguous pieces
/// copied in parallel, each piece by `copy` (which returns false where it cannot copy: the
/// time is then infinite).
fn chunked_copy_seconds<T: Copy + Send + Sync>(
    src: &[T],
    dst: &mut [T],
    threads: usize,
    repeat: usize,
    copy: impl Fn(&[T], &mut [T]) -> bool + Sync,
) -> f64 {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    let chunk = n.div_ceil(threads.max(1)).max(1);
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let copied = if threads <= 1 {
            copy(src, dst)
        } else {
            on_threads(threads, || {
                dst.par_chunks_mut(chunk)
                    .zip(src.par_chunks(chunk))
                    .map(|(d, s)| copy(s, d))
                    .reduce(|| true, |a, b| a && b)
            })
        };
        if !copied {
            return f64::INFINITY;
        }
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&mut *dst);
    }
    best
}

/// Best time of `repeat` copies `dst.copy_from_slice(src)` (the platform's memcpy), split
/// into `threads` contiguous pieces copied in parallel. `src` and `dst` have equal lengths.
pub fn copy_seconds_on<T: Copy + Send + Sync>(
    src: &[T],
    dst: &mut [T],
    threads: usize,
    repeat: usize,
) -> f64 {
    chunked_copy_seconds(src, dst, threads, repeat, |s, d| {
        d.copy_from_slice(s);
        true
    })
}

/// Best time of `repeat` copies of `src` into `dst` (equal lengths) split into `threads`
/// contiguous pieces, each piece copied by non-temporal (streaming) stores; infinite where
/// the CPU has no streaming copy.
pub fn streaming_copy_seconds_on<T: Copy + Send + Sync>(
    src: &[T],
    dst: &mut [T],
    threads: usize,
    repeat: usize,
) -> f64 {
    chunked_copy_seconds(src, dst, threads, repeat, crate::transpose::streaming_copy)
}

/// The machine's best copy of `src` into `dst` on `threads` threads: the faster of the
/// platform's memcpy ([`copy_seconds_on`]) and a streaming-store copy
/// ([`streaming_copy_seconds_on`]), best of `repeat` rounds that each run both.
///
/// ```
/// let src = vec![1.0f64; 1 << 16];
/// let mut dst = vec![0.0f64; 1 << 16];
/// let s = ttgt::model::best_copy_seconds_on(&src, &mut dst, 1, 2);
/// assert!(s > 0.0 && s.is_finite());
/// assert_eq!(dst, src);
/// ```
pub fn best_copy_seconds_on<T: Copy + Send + Sync>(
    src: &[T],
    dst: &mut [T],
    threads: usize,
    repeat: usize,
) -> f64 {
    (0..repeat.max(1))
        .map(|_| {
            copy_seconds_on(src, dst, threads, 1)
                .min(streaming_copy_seconds_on(src, dst, threads, 1))
        })
        .fold(f64::INFINITY, f64::min)
}

/// The copy the cost models are scaled by: the faster of memcpy and a streaming-store copy
/// that reads the range as one stream, best of `repeat` rounds. The built-in transposition
/// factors and GEMM memory terms were fitted against it; [`best_copy_seconds_on`], which
/// may read a long range as several streams, is faster on some hosts (`docs/TUNING.md`,
/// `SPLIT_COPY_MIN_PART`) and is the benches' reference.
fn model_copy_seconds_on<T: Copy + Send + Sync>(
    src: &[T],
    dst: &mut [T],
    threads: usize,
    repeat: usize,
) -> f64 {
    (0..repeat.max(1))
        .map(|_| {
            copy_seconds_on(src, dst, threads, 1).min(chunked_copy_seconds(
                src,
                dst,
                threads,
                1,
                crate::transpose::streaming_copy_one_stream,
            ))
        })
        .fold(f64::INFINITY, f64::min)
}

/// [`best_copy_seconds_on`] for `bytes` bytes in fresh buffers (the source written first, so
/// that its pages are real memory, not the shared zero page).
pub fn best_copy_seconds(bytes: usize, threads: usize, repeat: usize) -> Result<f64> {
    let n = bytes / 8;
    let src = copy_source(n)?;
    let mut dst = zeroed::<f64>(n, "copy destination")?;
    Ok(best_copy_seconds_on(&src, &mut dst, threads, repeat))
}

/// Rounds of [`probe_copy`], each one memcpy and one streaming copy per thread count.
/// Rationale: single rounds of a shared host's copies spread by a factor of two.
const PROBE_COPY_ROUNDS: usize = 5;

/// Copy bandwidth (GB/s, bytes read + written) for 1..=`available_parallelism` threads,
/// copying `bytes` bytes by memcpy or streaming stores (the faster; the streaming copy reads
/// the range as one stream, as the built-in transposition factors were fitted against): the
/// best of [`PROBE_COPY_ROUNDS`] rounds that each time every thread count in turn on the
/// same buffers, so that a slow spell of a shared machine's memory does not decide one
/// thread count's figure alone (see `docs/TUNING.md`). No figure is below that of fewer
/// threads.
///
/// ```
/// let rates = ttgt::model::probe_copy(1 << 20);
/// assert!(!rates.is_empty() && rates.iter().all(|&r| r > 0.0));
/// assert!(rates.windows(2).all(|w| w[1] >= w[0]));
/// ```
pub fn probe_copy(bytes: usize) -> Vec<f64> {
    let max = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(64);
    let n = (bytes / 8).max(1);
    let (Ok(src), Ok(mut dst)) = (copy_source(n), zeroed::<f64>(n, "copy destination")) else {
        return vec![10.0; max];
    };
    let mut best = vec![f64::INFINITY; max];
    for _ in 0..PROBE_COPY_ROUNDS {
        for (t, b) in best.iter_mut().enumerate() {
            *b = b.min(model_copy_seconds_on(&src, &mut dst, t + 1, 1));
        }
    }
    let mut rates: Vec<f64> = best
        .iter()
        .map(|&s| {
            if s > 0.0 && s.is_finite() {
                2.0 * (n * 8) as f64 / s / 1e9
            } else {
                10.0
            }
        })
        .collect();
    // a copy split among more threads is not slower than among fewer: a lower figure is a
    // slow spell of a shared host's other cores
    for t in 1..rates.len() {
        rates[t] = rates[t].max(rates[t - 1]);
    }
    rates
}

/// `d` scaled by `f`, keeping what decides a transposition's speed besides its size: an
/// extent that is a multiple of 16 (a whole number of cache lines of f32 per row, whole
/// micro-tiles) stays one, and does not become a power of two of 256 or more (whose rows
/// alias in the caches, unlike the original's); others round to the nearest integer.
fn scaled_extent(d: usize, f: f64) -> usize {
    let x = d as f64 * f;
    if !d.is_multiple_of(16) {
        return (x.round() as usize).max(2);
    }
    let m = ((x / 16.0).round() as usize).max(1) * 16;
    if m >= 256 && m.is_power_of_two() {
        m + 16
    } else {
        m
    }
}

/// One training problem: permutation, row-major extents, element type, scalar kernels forced,
/// store kind forced (`None`: the plan's default).
type Training = (Vec<usize>, Vec<usize>, DType, bool, Option<bool>);

/// Training problems: every third case of the TTC table scaled down to about `elems`
/// elements (f32, and f64 at half the extents' volume), plus contiguous-row problems, rank-6
/// equal-extent tiles (with each store kind) and scalar-forced tiles.
fn training_set(elems: usize) -> Vec<Training> {
    let mut v = Vec::new();
    let ttc = crate::cases::parse_ttc(crate::cases::TTC_TSV).unwrap_or_default();
    for (k, c) in ttc.iter().enumerate().filter(|(k, _)| k % 3 == 0) {
        let dt = if k % 2 == 0 { DType::F32 } else { DType::F64 };
        let target = if dt == DType::F64 { elems / 2 } else { elems };
        let dims = scaled_dims(&c.sizes, target);
        // Tiles (B's last axis is not A's) also with extents off the line multiples (16 or
        // more reduced by 3, as benches/data/ttc_odd_extents.tsv does), for the odd-row tile
        // class.
        let rank = dims.len();
        if c.perm.last() != Some(&(rank - 1)) {
            let odd = dims
                .iter()
                .map(|&d| if d >= 16 { d - 3 } else { d })
                .collect();
            v.push((c.perm.clone(), odd, dt, false, None));
        }
        v.push((c.perm.clone(), dims, dt, false, None));
    }
    let side = |r: usize| (elems as f64).powf(1.0 / r as f64).round().max(2.0) as usize;
    let (s2, s3) = (side(2), side(3));
    for l in [16usize, 96, 1000] {
        let m = (elems / l).max(4);
        let a = (m as f64).sqrt() as usize;
        v.push((
            vec![1, 0, 2],
            vec![a, (m / a).max(2), l],
            DType::F32,
            false,
            None,
        ));
    }
    // Short rows gathered from 16 far-apart slices into contiguous runs: the write-back of a
    // contraction's temporary when one outer index moves inwards (f64 rows of 24, as in the
    // TCCG ccsd(t) cases).
    let m = (elems / 2 / (16 * 24)).max(2);
    v.push((vec![1, 0, 2], vec![16, m, 24], DType::F64, false, None));
    // Rank-6 tiles of equal extents (the 720-permutation set's shape, at most 16): with 16
    // f32 per A row these are one-line-run tiles, run with each store kind so that both the
    // `tile` and the `tile_stream` class get training rows whichever kind the host's rule
    // picks for them; the last (adjacent B rows, far A rows) always streams.
    let s6 = side(6).min(16);
    for perm in [
        [0, 1, 2, 5, 3, 4],
        [1, 2, 3, 5, 4, 0],
        [3, 0, 2, 5, 4, 1],
        [5, 4, 3, 2, 1, 0],
        [0, 2, 3, 4, 5, 1],
    ] {
        for stream in [false, true] {
            v.push((perm.to_vec(), vec![s6; 6], DType::F32, false, Some(stream)));
        }
    }
    // Streamed only: a tile that is one contiguous block of B (A's last axis second-last in
    // B, B's rows whole), and one whose one-line A rows are a page multiple apart (not
    // widened), with the B-side block loop outermost: the scattered-line class where the
    // host's rule regroups the others.
    for perm in [[3, 0, 4, 1, 5, 2], [2, 4, 3, 5, 0, 1]] {
        v.push((perm.to_vec(), vec![s6; 6], DType::F32, false, Some(true)));
    }
    v.push((vec![1, 0], vec![s2 + 1, s2 - 3], DType::F32, true, None));
    v.push((
        vec![2, 1, 0],
        vec![s3 + 1, s3 - 1, s3],
        DType::F64,
        true,
        None,
    ));
    v
}

/// One training case timed: the best of five executions, the copy bandwidth (GB/s) of the
/// same bytes measured between them, and the plan's coefficient-free costs at that
/// bandwidth.
struct Timed {
    seconds: f64,
    copy_gbps: f64,
    costs: Costs,
}

/// Times a training case beside a copy of the same bytes (from its A to its B on the same
/// threads, the models' copy: memcpy or one stream of streaming stores), alternated, so that
/// its factor compares it with the copy as fast as the machine's memory was at that moment: a
/// shared machine's copy rate drifts where the transpositions' does not (see
/// `docs/TUNING.md`).
fn time_typed<T: Element>(
    perm: &[usize],
    dims: &[usize],
    scalar: bool,
    streaming: Option<bool>,
    threads: usize,
) -> Result<Timed> {
    let la = Layout::row_major(dims)?;
    let bd: Vec<usize> = perm.iter().map(|&q| dims[q]).collect();
    let lb = Layout::row_major(&bd)?;
    let la_len = la.len();
    let (a, oa) = zeroed_aligned::<T>(la_len, "calibration input")?;
    let (mut b, ob) = zeroed_aligned::<T>(lb.len(), "calibration output")?;
    let opts = TransposeOptions {
        threads: Some(threads),
        isa: scalar.then_some(Isa::Scalar),
        streaming,
        ..Default::default()
    };
    let plan = TransposePlan::new(perm, &la, &lb, T::DTYPE, &opts)?;
    let (mut best, mut copy) = (f64::INFINITY, f64::INFINITY);
    // a first, untimed execution, then five of each
    for round in 0..6 {
        {
            let av = StridedView::from_slice(&a, la.clone(), oa)?;
            let mut bv = StridedViewMut::from_slice(&mut b, lb.clone(), ob)?;
            let t = Instant::now();
            plan.execute(T::one(), &av, T::zero(), &mut bv)?;
            if round > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        if round > 0 {
            let (src, dst) = (&a[oa..oa + la_len], &mut b[ob..ob + la_len]);
            copy = copy.min(model_copy_seconds_on(src, dst, threads, 1));
        }
    }
    let bytes = 2.0 * (la_len * std::mem::size_of::<T>()) as f64;
    let copy_gbps = if copy > 0.0 && copy.is_finite() {
        bytes / copy / 1e9
    } else {
        0.0
    };
    Ok(Timed {
        seconds: best,
        copy_gbps,
        costs: unit_costs(&plan, false, copy_gbps.max(1e-3) * 1e9),
    })
}

fn time_case((perm, dims, dt, scalar, streaming): &Training, threads: usize) -> Result<Timed> {
    match dt {
        DType::F64 => time_typed::<f64>(perm, dims, *scalar, *streaming, threads),
        _ => time_typed::<f32>(perm, dims, *scalar, *streaming, threads),
    }
}

/// The rank-6 permutations of 16^6 whose tiles read one cache line per A row, except those
/// that stream under every rule (B rows adjacent, A rows 256 KiB or more apart): every
/// `step`-th, in lexicographic order.
fn line_tile_perms(step: usize) -> Result<Vec<Vec<usize>>> {
    let dims = [16usize; 6];
    let la = Layout::row_major(&dims)?;
    let mut out = Vec::new();
    let mut k = 0;
    let mut perm: Vec<usize> = (0..6).collect();
    loop {
        let plan = TransposePlan::new(&perm, &la, &la, DType::F32, &TransposeOptions::default())?;
        let simd = matches!(
            plan.kernel(),
            crate::transpose::KernelKind::Tile { simd: true, .. }
        );
        if simd && plan.one_line_tile() == Some(false) {
            if k % step.max(1) == 0 {
                out.push(perm.clone());
            }
            k += 1;
        }
        // next permutation in lexicographic order
        let Some(p) = (0..5).rev().find(|&p| perm[p] < perm[p + 1]) else {
            break;
        };
        let q = (p + 1..6)
            .rev()
            .find(|&q| perm[q] > perm[p])
            .unwrap_or(p + 1);
        perm.swap(p, q);
        perm[p + 1..].reverse();
    }
    Ok(out)
}

/// `ln(t0 / t1)` of two plans of one f32 transposition (`B = A`), alternated on the same
/// buffers: four rounds, the first to warm both up, the best of the other three each.
fn log_time_ratio(
    plans: &[TransposePlan; 2],
    a: &StridedView<'_, f32>,
    b: &mut StridedViewMut<'_, f32>,
) -> Result<f64> {
    let mut best = [f64::INFINITY; 2];
    for round in 0..4 {
        for (k, pl) in plans.iter().enumerate() {
            let t = Instant::now();
            pl.execute(1.0, a, 0.0, b)?;
            if round > 0 {
                best[k] = best[k].min(t.elapsed().as_secs_f64());
            }
        }
    }
    Ok((best[0] / best[1]).ln())
}

/// Whether one-line-run tiles ([`crate::transpose::set_line_tile_streaming`]) run faster
/// streamed than with ordinary stores on this machine: the geometric mean of the time ratio
/// over 16 of the 16^6 f32 permutations of that kind (64 MiB each way), at every thread
/// count in `threads`, the two kinds alternated on the same buffers (best of three each).
/// About a second.
///
/// ```no_run
/// let stream = ttgt::model::probe_line_tile_stores(&[1, 2]).unwrap();
/// ttgt::transpose::set_line_tile_streaming(Some(stream));
/// ```
pub fn probe_line_tile_stores(threads: &[usize]) -> Result<bool> {
    let perms = line_tile_perms(30)?;
    let dims = [16usize; 6];
    let la = Layout::row_major(&dims)?;
    let (a, oa) = zeroed_aligned::<f32>(la.len(), "calibration input")?;
    let (mut b, ob) = zeroed_aligned::<f32>(la.len(), "calibration output")?;
    let av = StridedView::from_slice(&a, la.clone(), oa)?;
    let mut bv = StridedViewMut::from_slice(&mut b, la.clone(), ob)?;
    let mut log_sum = 0.0;
    for &n in threads {
        for perm in &perms {
            let plan = |stream| {
                let opts = TransposeOptions {
                    threads: Some(n),
                    streaming: Some(stream),
                    ..Default::default()
                };
                TransposePlan::new(perm, &la, &la, DType::F32, &opts)
            };
            let plans = [plan(false)?, plan(true)?];
            log_sum += log_time_ratio(&plans, &av, &mut bv)?;
        }
    }
    Ok(log_sum > 0.0)
}

/// Full reversals of the TTC set (row-major extents, f32) whose streamed tiles scatter single
/// lines over B: ttc-10, -25, -40 and -56.
const SCATTER_PROBES: [&[usize]; 4] = [
    &[384, 355, 384],
    &[96, 75, 75, 96],
    &[48, 28, 28, 28, 48],
    &[32, 15, 15, 15, 5, 112],
];

/// Whether streamed scattered-line tiles ([`crate::transpose::set_scatter_regroup`]) run
/// faster in the regrouped nest on this machine: the geometric mean of the time ratio over
/// four full reversals of the TTC set ([`SCATTER_PROBES`], f32, scaled to about `bytes` each
/// way), at every thread count in `threads`, the two nests alternated on the same buffers
/// (best of three each). Regroups only on a gain of more than 5 %, so that a host where the
/// two are even keeps the built-in nest. About a second at 192 MiB.
///
/// ```no_run
/// let regroup = ttgt::model::probe_scatter_regroup(32 << 20, &[1, 2]).unwrap();
/// ttgt::transpose::set_scatter_regroup(Some(regroup));
/// ```
pub fn probe_scatter_regroup(bytes: usize, threads: &[usize]) -> Result<bool> {
    let cases: Vec<(&[usize], Vec<usize>)> = SCATTER_PROBES
        .iter()
        .map(|&d| (d, (0..d.len()).rev().collect()))
        .collect();
    rule_gain(bytes, threads, &cases, |n, perm, la, lb| {
        let plan = |regroup| {
            let opts = TransposeOptions {
                threads: Some(n),
                regroup: Some(regroup),
                ..Default::default()
            };
            TransposePlan::new(perm, la, lb, DType::F32, &opts)
        };
        let plans = [plan(false)?, plan(true)?];
        Ok(plans[1].regroups_lines().then_some(plans))
    })
}

/// `d` scaled down (never up) to about `elems` elements ([`scaled_extent`] per dim).
fn scaled_dims(d: &[usize], elems: usize) -> Vec<usize> {
    let vol: usize = d.iter().product();
    let f = (elems as f64 / vol as f64)
        .powf(1.0 / d.len() as f64)
        .min(1.0);
    d.iter().map(|&x| scaled_extent(x, f)).collect()
}

/// Whether the second plan of each pair that `pair` builds (for a thread count, a permutation
/// and the A and B layouts of a case of `cases`, f32, scaled to about `bytes` each way; `None`:
/// the case does not apply) runs faster than the first: the geometric mean of the time ratio
/// over the cases and every thread count in `threads`, the two alternated on the same buffers
/// (best of three each), above 5 %, so that a host where the two are even keeps the built-in
/// choice.
fn rule_gain(
    bytes: usize,
    threads: &[usize],
    cases: &[(&[usize], Vec<usize>)],
    pair: impl Fn(usize, &[usize], &Layout, &Layout) -> Result<Option<[TransposePlan; 2]>>,
) -> Result<bool> {
    let elems = (bytes / 4).max(1 << 12);
    let shapes: Vec<Vec<usize>> = cases.iter().map(|(d, _)| scaled_dims(d, elems)).collect();
    let len = shapes
        .iter()
        .map(|d| d.iter().product::<usize>())
        .max()
        .unwrap_or(1);
    let (a, oa) = zeroed_aligned::<f32>(len, "calibration input")?;
    let (mut b, ob) = zeroed_aligned::<f32>(len, "calibration output")?;
    let mut log_sum = 0.0;
    let mut count = 0usize;
    for &n in threads {
        for (dims, (_, perm)) in shapes.iter().zip(cases) {
            let la = Layout::row_major(dims)?;
            let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
            let lb = Layout::row_major(&bd)?;
            let Some(plans) = pair(n, perm, &la, &lb)? else {
                continue;
            };
            let av = StridedView::from_slice(&a, la.clone(), oa)?;
            let mut bv = StridedViewMut::from_slice(&mut b, lb, ob)?;
            log_sum += log_time_ratio(&plans, &av, &mut bv)?;
            count += 1;
        }
    }
    Ok(count > 0 && log_sum / count as f64 > 1.05f64.ln())
}

/// TTC cases (row-major extents, f32, and their permutations) whose SIMD tiles continue A
/// rows a page or more apart, the plans the far-row prefetch rule decides: ttc-16, -20,
/// -21, -32, -46 and -48 (some lose a little to prefetching; see `docs/TUNING.md`).
const FAR_ROW_PROBES: [(&[usize], &[usize]); 6] = [
    (&[75, 96, 75, 96], &[3, 0, 2, 1]),
    (&[75, 96, 12, 608], &[2, 0, 3, 1]),
    (&[75, 608, 12, 96], &[2, 0, 3, 1]),
    (&[28, 48, 28, 4, 352], &[4, 0, 3, 2, 1]),
    (&[15, 15, 32, 15, 15, 32], &[1, 4, 0, 5, 3, 2]),
    (&[15, 15, 112, 15, 5, 32], &[1, 4, 0, 5, 3, 2]),
];

/// Whether SIMD tiles whose continued A rows are a page or more apart run faster with the
/// software prefetch on this machine ([`crate::transpose::set_far_row_prefetch`]): the
/// geometric mean of the time ratio over the TTC cases of [`FAR_ROW_PROBES`] (f32, scaled to
/// about `bytes` each way) whose plans fall under the rule, at every thread count in
/// `threads`, with and without the prefetch alternated on the same buffers (best of three
/// each). Prefetches only on a gain of more than 5 %, so that a host where the two are even
/// keeps the built-in choice. About a second at 192 MiB.
///
/// ```no_run
/// let far = ttgt::model::probe_far_row_prefetch(32 << 20, &[1, 2]).unwrap();
/// ttgt::transpose::set_far_row_prefetch(Some(far));
/// ```
pub fn probe_far_row_prefetch(bytes: usize, threads: &[usize]) -> Result<bool> {
    let cases: Vec<(&[usize], Vec<usize>)> = FAR_ROW_PROBES
        .iter()
        .map(|&(d, perm)| (d, perm.to_vec()))
        .collect();
    rule_gain(bytes, threads, &cases, |n, perm, la, lb| {
        let plan = |prefetch| {
            let opts = TransposeOptions {
                threads: Some(n),
                prefetch,
                ..Default::default()
            };
            TransposePlan::new(perm, la, lb, DType::F32, &opts)
        };
        if !plan(None)?.far_rows_continue() {
            return Ok(None);
        }
        Ok(Some([plan(Some(false))?, plan(Some(true))?]))
    })
}

/// Solves `min Σ_i (Σ_k a_ik x_k - 1)²` (a tiny ridge term keeps it well posed) for the
/// classes that occur in `rows`; `None` for a class no row uses.
pub(crate) fn solve_ridge<const N: usize>(rows: &[[f64; N]]) -> [Option<f64>; N] {
    solve_ridge_to(rows, &vec![1.0; rows.len()])
}

/// [`solve_ridge`] with a target per row: `min Σ_i (Σ_k a_ik x_k - b_i)²`.
pub(crate) fn solve_ridge_to<const N: usize>(rows: &[[f64; N]], b: &[f64]) -> [Option<f64>; N] {
    let used: Vec<usize> = (0..N)
        .filter(|&k| rows.iter().any(|r| r[k] > 0.0))
        .collect();
    let m = used.len();
    let mut ata = vec![vec![0.0f64; m]; m];
    let mut atb = vec![0.0f64; m];
    for (r, &bi) in rows.iter().zip(b) {
        for (p, &k) in used.iter().enumerate() {
            atb[p] += r[k] * bi;
            for (q, &l) in used.iter().enumerate() {
                ata[p][q] += r[k] * r[l];
            }
        }
    }
    for (p, row) in ata.iter_mut().enumerate() {
        row[p] += 1e-9 + 1e-6 * row[p];
    }
    // Gaussian elimination with partial pivoting on the m×m system.
    for c in 0..m {
        let piv = (c..m)
            .max_by(|&i, &j| ata[i][c].abs().total_cmp(&ata[j][c].abs()))
            .unwrap_or(c);
        ata.swap(c, piv);
        atb.swap(c, piv);
        let d = ata[c][c];
        if d.abs() < 1e-300 {
            continue;
        }
        let (pivot, bc) = (ata[c].clone(), atb[c]);
        for (r, (row, b)) in ata.iter_mut().zip(atb.iter_mut()).enumerate() {
            if r != c {
                let f = row[c] / d;
                for (x, y) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * y;
                }
                *b -= f * bc;
            }
        }
    }
    let mut out = [None; N];
    for (p, &k) in used.iter().enumerate() {
        if ata[p][p].abs() > 1e-300 {
            out[k] = Some(atb[p] / ata[p][p]);
        }
    }
    out
}

/// Fits the transposition factors at `threads` threads on the training set; also returns
/// the median of the copy bandwidths (GB/s) measured beside its cases, if any.
fn fit_transpose(bytes: usize, threads: usize) -> Result<(TransposeCoeffs, Option<f64>)> {
    // Every plan falls in one kernel class, so each class is fitted on its own cases: the
    // inverse efficiency is the geometric mean of (measured time) / (coefficient-free cost
    // at the copy bandwidth of that moment), which leaves no bias in the log of the time
    // ratio over the training set.
    let mut logs: [Vec<f64>; CLASSES] = Default::default();
    let mut copies = Vec::new();
    for case in training_set(bytes / 4) {
        let Timed {
            seconds: t,
            copy_gbps,
            costs,
        } = time_case(&case, threads)?;
        if copy_gbps > 0.0 {
            copies.push(copy_gbps);
        }
        let parts = costs.parts();
        let total: f64 = parts.iter().sum();
        if t <= 0.0 || total <= 0.0 {
            continue;
        }
        if let Some(k) = (0..CLASSES).find(|&k| parts[k] >= 0.99 * total) {
            logs[k].push((t / parts[k]).ln());
        }
    }
    let fit = |k: usize, default: f64| {
        let v = &logs[k];
        if v.is_empty() {
            return default;
        }
        let x = (v.iter().sum::<f64>() / v.len() as f64).exp();
        // Streamed kernels beat a copy that reads each line before writing it by about its
        // 1.5x fewer bytes, whole classes a little more; a fit far above that comes from a
        // copy probe taken in a slow spell (`docs/TUNING.md`).
        (1.0 / x).clamp(0.02, 1.8)
    };
    let d = TransposeCoeffs::default();
    copies.sort_by(f64::total_cmp);
    let median = copies.get(copies.len() / 2).copied();
    let coeffs = TransposeCoeffs {
        rows: fit(0, d.rows),
        tile: fit(1, d.tile),
        tile_stream: fit(2, d.tile_stream),
        tile_odd: fit(4, d.tile_odd),
        tile_scatter: fit(5, d.tile_scatter),
        tile_regroup: fit(6, d.tile_regroup),
        tile_contiguous_b: fit(7, d.tile_contiguous_b),
        scalar: fit(3, d.scalar),
        overhead: d.overhead,
    };
    Ok((coeffs, median))
}

/// Measures a full profile: copy bandwidth for every thread count, the store kind for
/// one-line-run tiles ([`probe_line_tile_stores`]), the nest of scattered-line tiles
/// ([`probe_scatter_regroup`]) and the prefetch of far-apart rows
/// ([`probe_far_row_prefetch`]), which this process then uses, and
/// transposition factors fitted at `threads` threads on tensors of about `bytes` bytes.
/// Takes a few seconds.
pub fn calibrate(bytes: usize, threads: usize) -> Result<Profile> {
    let copy = probe_copy(bytes);
    let mut counts = vec![1, threads.max(1)];
    counts.dedup();
    let line_tile_stream = probe_line_tile_stores(&counts)?;
    // the training set's plans follow the measured rule
    crate::transpose::set_line_tile_streaming(Some(line_tile_stream));
    let scatter_regroup = probe_scatter_regroup(bytes, &counts)?;
    crate::transpose::set_scatter_regroup(Some(scatter_regroup));
    let far_row_prefetch = probe_far_row_prefetch(bytes, &counts)?;
    crate::transpose::set_far_row_prefetch(Some(far_row_prefetch));
    let mut p = Profile {
        machine: machine_name(),
        created: 0,
        calibrated: true,
        copy,
        transpose: TransposeCoeffs::default(),
        transpose_at: Vec::new(),
        gemm: Vec::new(),
        gemm_concurrent: Vec::new(),
        line_tile_stream: Some(line_tile_stream),
        scatter_regroup: Some(scatter_regroup),
        far_row_prefetch: Some(far_row_prefetch),
    };
    // Factors at one thread and at `threads` (see `Profile::transpose_at`).
    for &n in &counts {
        let (c, copy_gbps) = fit_transpose(bytes, n)?;
        // The factors are relative to the copies measured beside their cases: the stored
        // copy rate at this thread count is theirs (the median), not the first probe's.
        if let Some(g) = copy_gbps {
            if let Some(slot) = p.copy.get_mut(n - 1) {
                *slot = g;
            }
        }
        if n == threads.max(1) {
            p.transpose = c.clone();
        }
        p.transpose_at.push((n, c));
    }
    p.created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |x| x.as_secs());
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_tile_probe_set_is_one_line_tiles_of_every_kind() {
        let perms = line_tile_perms(30).unwrap();
        assert!((14..=18).contains(&perms.len()), "{}", perms.len());
        let all = line_tile_perms(1).unwrap().len();
        // 720 permutations: the 120 that keep A's last axis last are row copies, the ones
        // that keep A's last two axes together have two-line runs
        assert!(all > 400 && all < 600, "{all}");
        // the full reversal is one of them; the identity is not
        assert!(line_tile_perms(1)
            .unwrap()
            .contains(&vec![5, 4, 3, 2, 1, 0]));
        assert!(!perms.contains(&vec![0, 1, 2, 3, 4, 5]));
    }

    /// The far-row probe compares plans the rule decides: at the calibration's default size
    /// most of its cases (scaled) still continue A rows a page or more apart, on every SIMD
    /// level; the scalar level has no prefetch and none.
    #[test]
    fn far_row_probe_cases_fall_under_the_rule() {
        let elems = (64usize << 20) / 4;
        for isa in Isa::available() {
            let mut under = 0;
            for &(d, perm) in &FAR_ROW_PROBES {
                let dims = scaled_dims(d, elems);
                let la = Layout::row_major(&dims).unwrap();
                let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
                let lb = Layout::row_major(&bd).unwrap();
                let opts = TransposeOptions {
                    threads: Some(1),
                    isa: Some(isa),
                    ..Default::default()
                };
                let p = TransposePlan::new(perm, &la, &lb, DType::F32, &opts).unwrap();
                under += usize::from(p.far_rows_continue());
            }
            if isa == Isa::Scalar {
                assert_eq!(under, 0);
            } else {
                assert!(under >= 4, "{}: {under} of 6", isa.name());
            }
        }
    }

    #[test]
    fn scaled_extents_keep_line_multiples() {
        assert_eq!(scaled_extent(7248, 0.565), 4112); // 4096 would alias
        assert_eq!(scaled_extent(384, 0.7), 272);
        assert_eq!(scaled_extent(48, 0.1), 16);
        assert_eq!(scaled_extent(355, 0.5), 178);
        assert_eq!(scaled_extent(15, 0.1), 2);
    }

    #[test]
    fn ridge_recovers_inverse_efficiencies() {
        // t_i = Σ_k c_ik x_k with x = (2, -, 1.5, 4): rows are c_i / t_i.
        let x = [2.0, 0.0, 1.5, 4.0];
        let cases = [
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 2.0, 0.5],
            [0.3, 0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 3.0],
            [1.0, 0.0, 1.0, 1.0],
        ];
        let rows: Vec<[f64; 4]> = cases
            .iter()
            .map(|c| {
                let t: f64 = c.iter().zip(&x).map(|(a, b)| a * b).sum();
                c.map(|v| v / t)
            })
            .collect();
        let got = solve_ridge(&rows);
        assert!(got[1].is_none(), "class 1 never occurs");
        for k in [0, 2, 3] {
            let v = got[k].unwrap();
            assert!((v - x[k]).abs() < 1e-3 * x[k], "class {k}: {v} vs {}", x[k]);
        }
    }
}

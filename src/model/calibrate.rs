//! Calibration: measures this machine's copy bandwidth per thread count and fits the
//! transposition efficiency factors on a training set of transpositions (least squares on
//! the log of the time ratio, i.e. a geometric mean per kernel class).

use std::time::Instant;

use super::profile::{machine_name, Profile, TransposeCoeffs};
use super::transpose::{features, Costs};
use crate::error::Result;
use crate::tensor::{zeroed, zeroed_aligned, DType, Element, Layout, StridedView, StridedViewMut};
use crate::transpose::{on_threads, Isa, TransposeOptions, TransposePlan};
use rayon::prelude::*;

/// Best time of `repeat` copies of `bytes` bytes split across `threads` threads.
pub fn copy_seconds(bytes: usize, threads: usize, repeat: usize) -> Result<f64> {
    let n = bytes / 8;
    let src = zeroed::<f64>(n, "copy source")?;
    let mut dst = zeroed::<f64>(n, "copy destination")?;
    let chunk = n.div_ceil(threads.max(1)).max(1);
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        if threads <= 1 {
            dst.copy_from_slice(&src);
        } else {
            on_threads(threads, || {
                dst.par_chunks_mut(chunk)
                    .zip(src.par_chunks(chunk))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            });
        }
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&mut dst);
    }
    Ok(best)
}

/// Copy bandwidth (GB/s, bytes read + written) for 1..=`available_parallelism` threads,
/// copying `bytes` bytes, best of three.
pub fn probe_copy(bytes: usize) -> Vec<f64> {
    let max = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(64);
    (1..=max)
        .map(|t| match copy_seconds(bytes, t, 3) {
            Ok(s) if s > 0.0 => 2.0 * bytes as f64 / s / 1e9,
            _ => 10.0,
        })
        .collect()
}

/// Training problems: `(perm, row-major extents, dtype, force scalar)`: every third case of the
/// TTC table scaled down to about `elems` elements (f32, and f64 at half the extents' volume),
/// plus contiguous-row problems and scalar-forced tiles.
fn training_set(elems: usize) -> Vec<(Vec<usize>, Vec<usize>, DType, bool)> {
    let mut v = Vec::new();
    let ttc = crate::bench::parse_ttc(crate::bench::TTC_TSV).unwrap_or_default();
    for (k, c) in ttc.iter().enumerate().filter(|(k, _)| k % 3 == 0) {
        let vol: usize = c.sizes.iter().product();
        let dt = if k % 2 == 0 { DType::F32 } else { DType::F64 };
        let target = if dt == DType::F64 { elems / 2 } else { elems };
        let f = (target as f64 / vol as f64)
            .powf(1.0 / c.sizes.len() as f64)
            .min(1.0);
        let dims: Vec<usize> = c
            .sizes
            .iter()
            .map(|&d| ((d as f64 * f).round() as usize).max(2))
            .collect();
        v.push((c.perm.clone(), dims, dt, false));
    }
    let side = |r: usize| (elems as f64).powf(1.0 / r as f64).round().max(2.0) as usize;
    let (s2, s3) = (side(2), side(3));
    for l in [16usize, 96, 1000] {
        let m = (elems / l).max(4);
        let a = (m as f64).sqrt() as usize;
        v.push((vec![1, 0, 2], vec![a, (m / a).max(2), l], DType::F32, false));
    }
    v.push((vec![1, 0], vec![s2 + 1, s2 - 3], DType::F32, true));
    v.push((vec![2, 1, 0], vec![s3 + 1, s3 - 1, s3], DType::F64, true));
    v
}

fn time_typed<T: Element>(
    perm: &[usize],
    dims: &[usize],
    scalar: bool,
    threads: usize,
    p: &Profile,
) -> Result<(f64, Costs)> {
    let la = Layout::row_major(dims)?;
    let bd: Vec<usize> = perm.iter().map(|&q| dims[q]).collect();
    let lb = Layout::row_major(&bd)?;
    let (a, oa) = zeroed_aligned::<T>(la.len(), "calibration input")?;
    let (mut b, ob) = zeroed_aligned::<T>(lb.len(), "calibration output")?;
    let opts = TransposeOptions {
        threads: Some(threads),
        isa: scalar.then_some(Isa::Scalar),
        ..Default::default()
    };
    let plan = TransposePlan::new(perm, &la, &lb, T::DTYPE, &opts)?;
    let av = StridedView::from_slice(&a, la, oa)?;
    let mut bv = StridedViewMut::from_slice(&mut b, lb, ob)?;
    plan.execute(T::one(), &av, T::zero(), &mut bv)?;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        plan.execute(T::one(), &av, T::zero(), &mut bv)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok((best, features(&plan, false, p)))
}

fn time_case(
    perm: &[usize],
    dims: &[usize],
    dt: DType,
    scalar: bool,
    threads: usize,
    p: &Profile,
) -> Result<(f64, Costs)> {
    match dt {
        DType::F64 => time_typed::<f64>(perm, dims, scalar, threads, p),
        _ => time_typed::<f32>(perm, dims, scalar, threads, p),
    }
}

/// Measures a full profile: copy bandwidth for every thread count and transposition factors
/// fitted at `threads` threads on tensors of about `bytes` bytes. Takes a few seconds.
pub fn calibrate(bytes: usize, threads: usize) -> Result<Profile> {
    let copy = probe_copy(bytes);
    let mut p = Profile {
        machine: machine_name(),
        created: 0,
        calibrated: true,
        copy,
        transpose: TransposeCoeffs::default(),
    };
    let (mut logs, mut n) = ([0.0f64; 4], [0usize; 4]);
    for (perm, dims, dt, scalar) in training_set(bytes / 4) {
        let (t, costs) = time_case(&perm, &dims, dt, scalar, threads, &p)?;
        // Attribute the case to its dominant class and take log(ideal / measured).
        let parts = costs.parts();
        let (k, &ideal) = parts
            .iter()
            .enumerate()
            .max_by(|x, y| x.1.total_cmp(y.1))
            .unwrap_or((0, &0.0));
        if ideal > 0.0 && t > 0.0 {
            // Other classes' share is charged at the current factors.
            let others: f64 = parts
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != k)
                .map(|(_, v)| v / 0.5)
                .sum();
            let own = (t - others).max(t * 0.1);
            logs[k] += (ideal / own).ln();
            n[k] += 1;
        }
    }
    let fit = |k: usize, default: f64| {
        if n[k] > 0 {
            (logs[k] / n[k] as f64).exp().clamp(0.02, 1.5)
        } else {
            default
        }
    };
    let d = TransposeCoeffs::default();
    p.transpose = TransposeCoeffs {
        rows: fit(0, d.rows),
        tile: fit(1, d.tile),
        tile_stream: fit(2, d.tile_stream),
        scalar: fit(3, d.scalar),
        overhead: d.overhead,
    };
    p.created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |x| x.as_secs());
    Ok(p)
}

//! `ttgt bench transpose`: one case's transposition time and bandwidth beside the machine's
//! best copy of the same bytes at the same thread count (the faster of the platform's memcpy
//! and a streaming-store copy, measured in the same run).

use std::time::Instant;

use rayon::prelude::*;

use crate::cases::TransposeCase;
use crate::error::Result;
use crate::model::{best_copy_seconds_on, predict_transpose, profile};
use crate::tensor::{zeroed_aligned, DType, Element, Layout, StridedView, StridedViewMut};
use crate::transpose::{TransposeOptions, TransposePlan, Tuning};

/// Options of a transposition bench run.
#[derive(Clone, Debug)]
pub struct TransposeBenchOptions {
    /// Element type.
    pub dtype: DType,
    /// Threads (both for the transposition and the copy reference).
    pub threads: usize,
    /// Timed executions per case (the best is reported).
    pub repeat: usize,
    /// `beta` (0: B overwritten, 2× size moved; else 3× size).
    pub beta: f64,
    /// Plan choice.
    pub tuning: Tuning,
    /// Force non-temporal stores on or off (`None`: the plan's rule).
    pub streaming: Option<bool>,
    /// Force the tiles' software prefetch on or off (`None`: the plan's rule).
    pub prefetch: Option<bool>,
    /// Bytes of A the tiles' prefetch runs ahead (`None`: the default,
    /// [`crate::transpose::PREFETCH_AHEAD_BYTES`]; 0: the next macro-tile).
    pub prefetch_distance: Option<usize>,
    /// Force the regrouped nest of scattered-line tiles on or off (`None`: the host's rule).
    pub regroup: Option<bool>,
    /// Force staged tiles off (`Some(false)`; `None` or `Some(true)`: where they apply).
    pub stage: Option<bool>,
    /// Bytes past a cache-line boundary where B starts (a multiple of the element size,
    /// below 64; 0: line-aligned).
    pub b_offset: usize,
}

/// One case's measurements.
#[derive(Clone, Debug)]
pub struct TransposeResult {
    /// Case name.
    pub case: String,
    /// Permutation (row-major meaning).
    pub perm: Vec<usize>,
    /// Extents of A.
    pub sizes: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Best execution time (repeated use: plan made beforehand).
    pub seconds: f64,
    /// Every timed execution (`samples.min == seconds`).
    pub samples: super::Samples,
    /// Time of plan creation plus one execution (single use).
    pub single_use_seconds: f64,
    /// Plan creation time.
    pub plan_seconds: f64,
    /// Bytes moved / `seconds`, in GB/s (1e9).
    pub gbps: f64,
    /// Bandwidth of the best copy of the same bytes (memcpy or streaming stores), same run,
    /// same threads.
    pub copy_gbps: f64,
    /// `gbps / copy_gbps`.
    pub ratio: f64,
    /// The cost model's prediction of `seconds`.
    pub predicted_seconds: f64,
    /// Threads used.
    pub threads: usize,
    /// The plan's description.
    pub plan: String,
    /// Rank after fusion.
    pub fused_rank: usize,
    /// Best time of HPTT on the same operands in the same run (its one-shot C API: plan and
    /// execute per call), when built with the `hptt` feature.
    pub hptt_seconds: Option<f64>,
}

fn run<T: Element>(case: &TransposeCase, o: &TransposeBenchOptions) -> Result<TransposeResult> {
    let la = Layout::row_major(&case.sizes)?;
    let bdims: Vec<usize> = case.perm.iter().map(|&p| case.sizes[p]).collect();
    let lb = Layout::row_major(&bdims)?;
    let n = la.len();
    let (mut a, oa) = zeroed_aligned::<T>(n, "bench input")?;
    a.par_iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = T::from_f64((i % 1013) as f64));
    let shift = o.b_offset / std::mem::size_of::<T>();
    let (mut b, ob) = zeroed_aligned::<T>(n + shift, "bench output")?;
    let ob = ob + shift;
    let opts = TransposeOptions {
        threads: Some(o.threads),
        tuning: o.tuning,
        streaming: o.streaming,
        prefetch: o.prefetch,
        prefetch_distance: o.prefetch_distance,
        regroup: o.regroup,
        stage: o.stage,
        ..Default::default()
    };
    let (alpha, beta) = (T::one(), T::from_f64(o.beta));
    let av = StridedView::from_slice(&a, la.clone(), oa)?;
    let mut bv = StridedViewMut::from_slice(&mut b, lb.clone(), ob)?;
    let t = Instant::now();
    let plan = match o.tuning {
        Tuning::Estimate => TransposePlan::new(&case.perm, &la, &lb, T::DTYPE, &opts)?,
        Tuning::Measure { .. } => {
            TransposePlan::measure(&case.perm, alpha, &av, beta, &mut bv, &opts)?
        }
    };
    let plan_seconds = t.elapsed().as_secs_f64();
    plan.execute(alpha, &av, beta, &mut bv)?;
    let single_use_seconds = t.elapsed().as_secs_f64();
    let bytes = plan.bytes_moved(o.beta != 0.0);
    drop(bv);
    // Repetitions interleave the transposition, the copy reference (A's elements copied onto
    // B's memory: same pages, same huge-page backing, same thread count; its bandwidth counts
    // the bytes it reads and writes) and the peer, so that the best of each comes from the
    // same spells of a shared machine's memory bandwidth.
    let (mut times, mut copy) = (Vec::with_capacity(o.repeat.max(1)), f64::INFINITY);
    #[cfg(feature = "hptt")]
    let mut peer = f64::INFINITY;
    for _ in 0..o.repeat.max(1) {
        let av = StridedView::from_slice(&a, la.clone(), oa)?;
        let mut bv = StridedViewMut::from_slice(&mut b, lb.clone(), ob)?;
        let t = Instant::now();
        plan.execute(alpha, &av, beta, &mut bv)?;
        times.push(t.elapsed().as_secs_f64());
        copy = copy.min(best_copy_seconds_on(
            &a[oa..oa + n],
            &mut b[ob..ob + n],
            o.threads,
            1,
        ));
        #[cfg(feature = "hptt")]
        if !T::DTYPE.is_half() {
            peer = peer.min(super::peer_hptt::hptt_seconds(
                &case.perm,
                &case.sizes,
                alpha,
                &a[oa..oa + n],
                beta,
                &mut b[ob..ob + n],
                o.threads,
            )?);
        }
    }
    // B now holds HPTT's last result.
    #[cfg(feature = "hptt")]
    if beta.is_exact_zero() && !T::DTYPE.is_half() {
        super::peer_hptt::check(
            &case.perm,
            &case.sizes,
            alpha,
            &a[oa..oa + n],
            &b[ob..ob + n],
        )?;
    }
    #[cfg(feature = "hptt")]
    let hptt_seconds = peer.is_finite().then_some(peer);
    #[cfg(not(feature = "hptt"))]
    let hptt_seconds = None;
    let samples = super::Samples::of(&times);
    let best = samples.min;
    let gbps = bytes as f64 / best / 1e9;
    let copy_gbps = (2 * n * T::DTYPE.size_bytes()) as f64 / copy / 1e9;
    Ok(TransposeResult {
        case: case.name.clone(),
        perm: case.perm.clone(),
        sizes: case.sizes.clone(),
        dtype: T::DTYPE,
        seconds: best,
        samples,
        single_use_seconds,
        plan_seconds,
        gbps,
        copy_gbps,
        ratio: gbps / copy_gbps,
        predicted_seconds: predict_transpose(&plan, o.beta != 0.0, &profile()),
        threads: plan.threads(),
        plan: plan.describe(),
        fused_rank: plan.normalized().dims().len(),
        hptt_seconds,
    })
}

/// Runs one transposition case.
pub fn bench_transpose(case: &TransposeCase, o: &TransposeBenchOptions) -> Result<TransposeResult> {
    // Plans follow this machine's host rules, which loading its profile sets: load it before
    // the first plan (the first case of a run planned under the built-in rules before).
    crate::model::profile::ensure_loaded();
    crate::with_dtype!(o.dtype, T => run::<T>(case, o))
}

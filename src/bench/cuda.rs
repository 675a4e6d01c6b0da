//! GPU benchmarks and calibration (feature `cuda`): each measurement beside a reference
//! measured in the same run (a device-to-device copy of the same bytes for transposes, a
//! cuBLAS GEMM of the same m, n, k for contractions), single-use (plan included) and
//! repeated-use times as TTLG reports them.

use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use num_complex::{Complex32, Complex64};

use crate::bench::{TransposeCase, TransposeResult};
use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Layout};

use crate::backend::cuda::contract::{shortlist, GpuContractionPlan};
use crate::backend::cuda::device::Device;
use crate::backend::cuda::ttlg::{Features, GpuModel, MicroBlocks, Schema, TtlgOptions, TtlgPlan};

fn timed(dev: &Device, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    dev.synchronize()?;
    let t = Instant::now();
    f()?;
    dev.synchronize()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Calls whose device time one pair of events measures (their mean is one sample): enough
/// for the host to queue the next call while the device runs the current one.
const CALLS_PER_SAMPLE: usize = 4;

/// Repeated-use time: after one untimed call, the best of `repeat` samples, each the mean
/// device time of [`CALLS_PER_SAMPLE`] back-to-back calls between two CUDA events.
fn best(dev: &Device, repeat: usize, f: impl FnMut() -> Result<()>) -> Result<f64> {
    Ok(sampled(dev, repeat, f)?.min)
}

/// The samples behind [`best`]: `repeat` of them, each the mean of its calls.
fn sampled(
    dev: &Device,
    repeat: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<crate::bench::Samples> {
    f()?;
    let mut times = Vec::with_capacity(repeat.max(1));
    for _ in 0..repeat.max(1) {
        let t = dev.time_on_stream(|| {
            for _ in 0..CALLS_PER_SAMPLE {
                f()?;
            }
            Ok(())
        })?;
        times.push(t / CALLS_PER_SAMPLE as f64);
    }
    Ok(crate::bench::Samples::of(&times))
}

/// Seconds of the best of `repeat` device-to-device copies of `bytes` bytes.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::{backend::cuda::device::Device, bench::cuda as bench};
/// let dev = Device::new(0).unwrap();
/// let t = bench::copy_seconds(&dev, 64 << 20, 3).unwrap();
/// println!("{:.1} GB/s", 2.0 * (64 << 20) as f64 / t / 1e9);
/// # }
/// ```
pub fn copy_seconds(dev: &Device, bytes: usize, repeat: usize) -> Result<f64> {
    let src = dev.zeros::<f32>(&[bytes.div_ceil(4)])?;
    let mut dst = dev.zeros::<f32>(&[bytes.div_ceil(4)])?;
    best(dev, repeat, || dev.copy_into(&src, &mut dst))
}

/// Runs GPU transposition cases one after another, keeping what cases of the same shape can
/// share: the uploaded input (the 720-permutation set uploads it once) and the copy
/// reference of each byte count.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::{backend::cuda::device::Device, bench::cuda::TransposeBench};
/// let dev = Device::new(0).unwrap();
/// let mut tb = TransposeBench::new(&dev);
/// for case in ttgt::bench::all_perms(4, 32).iter().take(3) {
///     let r = tb.run(case, ttgt::DType::F32, 3, 0.0, None).unwrap();
///     println!("{}: {:.2} of copy", r.case, r.ratio);
/// }
/// # }
/// ```
pub struct TransposeBench<'d> {
    dev: &'d Device,
    /// The last input uploaded: shape, type, tensor.
    input: Option<(Vec<usize>, DType, Box<dyn std::any::Any>)>,
    copies: Vec<(usize, f64)>,
}

impl<'d> TransposeBench<'d> {
    /// A bench on `dev` with nothing uploaded yet.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::{backend::cuda::device::Device, bench::cuda::TransposeBench};
    /// let dev = Device::new(0).unwrap();
    /// let _tb = TransposeBench::new(&dev);
    /// # }
    /// ```
    pub fn new(dev: &'d Device) -> Self {
        TransposeBench {
            dev,
            input: None,
            copies: Vec::new(),
        }
    }

    /// One case in `dtype`; `schema` forces a TTLG schema (an error where it does not apply).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::{backend::cuda::{device::Device, ttlg::Schema}, bench::cuda::TransposeBench};
    /// let dev = Device::new(0).unwrap();
    /// let case = &ttgt::bench::all_perms(3, 64)[3];
    /// let r = TransposeBench::new(&dev).run(case, ttgt::DType::F64, 3, 0.0, Some(Schema::OrthogonalArbitrary)).unwrap();
    /// assert!(r.plan.starts_with("orthogonal-arbitrary"));
    /// # }
    /// ```
    pub fn run(
        &mut self,
        case: &TransposeCase,
        dtype: DType,
        repeat: usize,
        beta: f64,
        schema: Option<Schema>,
    ) -> Result<TransposeResult> {
        match dtype {
            DType::F16 | DType::BF16 => Err(Error::Unsupported(format!("{dtype} on the GPU"))),
            DType::F32 => self.typed::<f32>(case, repeat, beta, schema),
            DType::F64 => self.typed::<f64>(case, repeat, beta, schema),
            DType::C32 => self.typed::<Complex32>(case, repeat, beta, schema),
            DType::C64 => self.typed::<Complex64>(case, repeat, beta, schema),
        }
    }

    fn copy(&mut self, bytes: usize, repeat: usize) -> Result<f64> {
        if let Some(&(_, t)) = self.copies.iter().find(|(b, _)| *b == bytes) {
            return Ok(t);
        }
        let t = copy_seconds(self.dev, bytes, repeat)?;
        self.copies.push((bytes, t));
        Ok(t)
    }

    fn typed<T: Element>(
        &mut self,
        case: &TransposeCase,
        repeat: usize,
        beta: f64,
        schema: Option<Schema>,
    ) -> Result<TransposeResult> {
        let dev = self.dev;
        let same = matches!(&self.input, Some((s, d, _)) if *s == case.sizes && *d == T::DTYPE);
        if !same {
            // Free the old input first. The new one holds 1, 2, ..., 7, 1, ... in row-major
            // order, filled flat (the tables' largest inputs hold 50 M elements, and every
            // second of set-up is device time).
            self.input = None;
            let n: usize = case.sizes.iter().product();
            let data: Vec<T> = (1..=n).map(|k| T::from_f64((k % 7) as f64 + 1.0)).collect();
            let a = ArrayD::from_shape_vec(IxDyn(&case.sizes), data)
                .map_err(|e| Error::Layout(e.to_string()))?;
            let da = dev.upload(&a)?;
            self.input = Some((case.sizes.clone(), T::DTYPE, Box::new(da)));
        }
        let da = self
            .input
            .as_ref()
            .and_then(|(_, _, t)| t.downcast_ref::<crate::backend::cuda::device::DeviceTensor<T>>())
            .ok_or_else(|| Error::Gpu("benchmark input of another type".into()))?;
        let bshape: Vec<usize> = case.perm.iter().map(|&p| case.sizes[p]).collect();
        let mut db = dev.zeros::<T>(&bshape)?;
        let beta = T::from_f64(beta);
        let plain = beta.is_exact_zero();
        dev.clear_plan_cache();
        let la = Layout::row_major(&case.sizes)?;
        let lb = Layout::row_major(&bshape)?;
        let t0 = Instant::now();
        let plan = match schema {
            None => dev.transpose_plan(&case.perm, &la, &lb, T::DTYPE, plain)?,
            Some(s) => {
                let opts = TtlgOptions {
                    schema: Some(s),
                    model: Some(dev.model().clone()),
                    micro_blocks: dev.micro_blocks(),
                    async_copies: dev.async_copies(),
                    ..TtlgOptions::default()
                };
                TtlgPlan::new(&case.perm, &la, &lb, T::DTYPE, plain, dev.props(), &opts)?
            }
        };
        let plan_seconds = t0.elapsed().as_secs_f64();
        let (single, samples) = if schema.is_none() {
            dev.clear_plan_cache();
            let single = timed(dev, || {
                dev.permute_into(&case.perm, T::one(), da, beta, &mut db)
            })?;
            let samples = sampled(dev, repeat, || {
                dev.permute_into(&case.perm, T::one(), da, beta, &mut db)
            })?;
            (single, samples)
        } else {
            let t0 = Instant::now();
            let p = dev.prepare(&plan)?;
            dev.run_prepared(&p, T::one(), da, beta, &mut db)?;
            dev.synchronize()?;
            let single = t0.elapsed().as_secs_f64() + plan_seconds;
            let samples = sampled(dev, repeat, || {
                dev.run_prepared(&p, T::one(), da, beta, &mut db)
            })?;
            (single, samples)
        };
        let seconds = samples.min;
        let bytes = da.len() * T::DTYPE.size_bytes();
        let moved = if plain { 2 * bytes } else { 3 * bytes };
        let copy = self.copy(bytes, repeat)?;
        let gbps = moved as f64 / seconds / 1e9;
        let copy_gbps = 2.0 * bytes as f64 / copy / 1e9;
        Ok(TransposeResult {
            case: case.name.clone(),
            perm: case.perm.clone(),
            sizes: case.sizes.clone(),
            dtype: T::DTYPE,
            seconds,
            samples,
            single_use_seconds: single,
            plan_seconds,
            gbps,
            copy_gbps,
            ratio: gbps / copy_gbps,
            predicted_seconds: plan.predicted_seconds,
            threads: dev.props().sm_count as usize,
            plan: plan.describe(),
            fused_rank: plan.problem.dims.len(),
            hptt_seconds: None,
        })
    }
}

/// One transposition case on the device (same result type and JSON keys as the CPU bench;
/// `threads` holds the SM count).
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::{backend::cuda::device::Device, bench::cuda as bench};
/// let dev = Device::new(0).unwrap();
/// let case = &ttgt::bench::all_perms(6, 16)[5];
/// let r = bench::bench_transpose(&dev, case, ttgt::DType::F32, 5, 0.0).unwrap();
/// println!("{} GB/s, {:.2} of copy", r.gbps, r.ratio);
/// # }
/// ```
pub fn bench_transpose(
    dev: &Device,
    case: &TransposeCase,
    dtype: DType,
    repeat: usize,
    beta: f64,
) -> Result<TransposeResult> {
    TransposeBench::new(dev).run(case, dtype, repeat, beta, None)
}

/// One contraction on the device beside a cuBLAS GEMM of the same shape.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::{backend::cuda::device::Device, bench::cuda as bench};
/// let dev = Device::new(0).unwrap();
/// let r = bench::bench_contract(&dev, "ij,jk->ik", &[2048, 2048], &[2048, 2048], ttgt::DType::F32, 3).unwrap();
/// println!("{:.0} GFLOP/s ({:.2} of cuBLAS)", r.gflops, r.ratio);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ContractResult {
    /// The spec.
    pub spec: String,
    /// Operand extents.
    pub shapes: [Vec<usize>; 2],
    /// Element type.
    pub dtype: DType,
    /// Best repeated-use time (plans cached).
    pub seconds: f64,
    /// First call with empty caches (planning included).
    pub single_use_seconds: f64,
    /// GFLOP/s of the contraction.
    pub gflops: f64,
    /// GFLOP/s of a plain cuBLAS GEMM of the same (batch, m, n, k) in the same run.
    pub gemm_gflops: f64,
    /// gflops / gemm_gflops.
    pub ratio: f64,
    /// The plan, described.
    pub plan: String,
    /// The plan's kind (`direct`, `partial` or `packed`, [`GpuContractionPlan::kind`]).
    pub kind: &'static str,
    /// The plan's predicted seconds.
    pub predicted_seconds: f64,
    /// Candidates timed one by one (empty unless asked for), the planner's choice first.
    pub candidates: Vec<CandidateTime>,
}

/// One timed candidate plan of a contraction ([`bench_contract_candidates`]).
#[derive(Clone, Debug)]
pub struct CandidateTime {
    /// Rank in the planner's order (0: the plan it picks).
    pub rank: usize,
    /// `direct`, `partial` or `packed`.
    pub kind: &'static str,
    /// Predicted seconds.
    pub predicted_seconds: f64,
    /// Best repeated-use seconds, timed like [`ContractResult::seconds`].
    pub seconds: f64,
    /// The plan, described.
    pub plan: String,
}

fn contract_typed<T: Element>(
    dev: &Device,
    spec: &str,
    sa: &[usize],
    sb: &[usize],
    repeat: usize,
    max_candidates: usize,
) -> Result<ContractResult> {
    let plan = GpuContractionPlan::new(spec, sa, sb, T::DTYPE, true, dev.props())?;
    let a = dev.upload(&ArrayD::<T>::from_elem(IxDyn(sa), T::one()))?;
    let b = dev.upload(&ArrayD::<T>::from_elem(IxDyn(sb), T::one()))?;
    let mut c = dev.zeros::<T>(&plan.shapes[2])?;
    dev.clear_plan_cache();
    let single = timed(dev, || {
        dev.contract_into(spec, T::one(), &a, &b, T::zero(), &mut c)
    })?;
    let seconds = best(dev, repeat, || {
        dev.contract_into(spec, T::one(), &a, &b, T::zero(), &mut c)
    })?;
    let mut candidates = Vec::new();
    if max_candidates > 0 {
        let plans = GpuContractionPlan::candidates(spec, sa, sb, T::DTYPE, true, dev.props())?;
        for i in shortlist(&plans, max_candidates) {
            let p = &plans[i];
            let t = best(dev, repeat, || {
                dev.contract_with_plan(p, T::one(), &a, &b, T::zero(), &mut c)
            })?;
            candidates.push(CandidateTime {
                rank: i,
                kind: p.kind(),
                predicted_seconds: p.predicted_seconds,
                seconds: t,
                plan: p.describe(),
            });
        }
    }
    let g = plan.gemm;
    let ga = dev.zeros::<T>(&[g.batch * g.m * g.k])?;
    let gb = dev.zeros::<T>(&[g.batch * g.k * g.n])?;
    let mut gc = dev.zeros::<T>(&[g.batch * g.m * g.n])?;
    let gemm = best(dev, repeat, || {
        dev.gemm_tensors(&g, T::one(), &ga, &gb, T::zero(), &mut gc)
    })?;
    let flops = g.flops() * if T::DTYPE.is_complex() { 4.0 } else { 1.0 };
    let (gflops, gemm_gflops) = (flops / seconds / 1e9, flops / gemm / 1e9);
    Ok(ContractResult {
        spec: spec.to_string(),
        shapes: [sa.to_vec(), sb.to_vec()],
        dtype: T::DTYPE,
        seconds,
        single_use_seconds: single,
        gflops,
        gemm_gflops,
        ratio: gflops / gemm_gflops,
        plan: plan.describe(),
        kind: plan.kind(),
        predicted_seconds: plan.predicted_seconds,
        candidates,
    })
}

/// One contraction on the device.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::{backend::cuda::device::Device, bench::cuda as bench};
/// let dev = Device::new(0).unwrap();
/// let r = bench::bench_contract(&dev, "abc,cd->abd", &[64, 64, 64], &[64, 64], ttgt::DType::F64, 3).unwrap();
/// println!("{}", r.plan);
/// # }
/// ```
pub fn bench_contract(
    dev: &Device,
    spec: &str,
    sa: &[usize],
    sb: &[usize],
    dtype: DType,
    repeat: usize,
) -> Result<ContractResult> {
    bench_contract_candidates(dev, spec, sa, sb, dtype, repeat, 0)
}

/// [`bench_contract`], and the planner's candidates ([`GpuContractionPlan::candidates`])
/// timed one by one on the same data: the first `max_candidates` in the planner's order and
/// the best-ranked of each kind beyond them (for the planner's regret).
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::{backend::cuda::device::Device, bench::cuda as bench};
/// let dev = Device::new(0).unwrap();
/// let r = bench::bench_contract_candidates(&dev, "abc,cd->dab", &[64, 64, 64], &[64, 64],
///                                          ttgt::DType::F64, 3, 8).unwrap();
/// let fastest = r.candidates.iter().map(|c| c.seconds).fold(f64::INFINITY, f64::min);
/// println!("regret {:.1} %", 100.0 * (r.candidates[0].seconds / fastest - 1.0));
/// # }
/// ```
pub fn bench_contract_candidates(
    dev: &Device,
    spec: &str,
    sa: &[usize],
    sb: &[usize],
    dtype: DType,
    repeat: usize,
    max_candidates: usize,
) -> Result<ContractResult> {
    let m = max_candidates;
    match dtype {
        DType::F16 | DType::BF16 => Err(Error::Unsupported(format!("{dtype} on the GPU"))),
        DType::F32 => contract_typed::<f32>(dev, spec, sa, sb, repeat, m),
        DType::F64 => contract_typed::<f64>(dev, spec, sa, sb, repeat, m),
        DType::C32 => contract_typed::<Complex32>(dev, spec, sa, sb, repeat, m),
        DType::C64 => contract_typed::<Complex64>(dev, spec, sa, sb, repeat, m),
    }
}

/// `ttgt calibrate --backend cuda`: measures the copy bandwidth, then a training set
/// (scaled TTC cases and permutations of a rank-5 tensor, every applicable schema forced
/// with every candidate slice the planner would rank), fits each kernel's regression by
/// least squares and returns the model (the caller stores it under the device's name).
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::{backend::cuda::device::Device, bench::cuda as bench};
/// let dev = Device::new(0).unwrap();
/// let model = bench::calibrate(&dev, 64).unwrap();
/// model.save().unwrap();
/// # }
/// ```
pub fn calibrate(dev: &Device, mib: usize) -> Result<GpuModel> {
    let bytes = mib.max(1) << 20;
    let copy = copy_seconds(dev, bytes, 5)?;
    let mut props = dev.props().clone();
    props.copy_bandwidth = 2.0 * bytes as f64 / copy;
    let mut model = GpuModel::default_for(&props);
    let mut cases = crate::bench::parse_ttc(crate::bench::TTC_TSV)?;
    cases.extend(crate::bench::all_perms(5, 15).into_iter().step_by(7));
    let mut samples: Vec<(Features, f64)> = Vec::new();
    for case in &cases {
        let n: f64 = case.sizes.iter().map(|&s| s as f64).product();
        let f = (n * 4.0 / bytes as f64)
            .powf(1.0 / case.sizes.len() as f64)
            .max(1.0);
        let sizes: Vec<usize> = case
            .sizes
            .iter()
            .map(|&s| ((s as f64 / f) as usize).max(1))
            .collect();
        let a = dev.upload(&ArrayD::<f32>::zeros(IxDyn(&sizes)))?;
        let bshape: Vec<usize> = case.perm.iter().map(|&p| sizes[p]).collect();
        let mut b = dev.zeros::<f32>(&bshape)?;
        // Every applicable schema, with 2x2 blocks of f32 where they apply and without (so
        // that both element sizes the kernels move are in the fit).
        for schema in Schema::ALL {
            for micro_blocks in [MicroBlocks::All, MicroBlocks::Off] {
                let opts = TtlgOptions {
                    schema: Some(schema),
                    model: Some(model.clone()),
                    micro_blocks,
                    ..TtlgOptions::default()
                };
                let la = Layout::row_major(&sizes)?;
                let lb = Layout::row_major(&bshape)?;
                let Ok(plan) =
                    TtlgPlan::new(&case.perm, &la, &lb, DType::F32, false, &props, &opts)
                else {
                    break;
                };
                let p = dev.prepare(&plan)?;
                let t = best(dev, 3, || dev.run_prepared(&p, 1.0f32, &a, 0.0, &mut b))?;
                samples.push((plan.features.clone(), t));
                if plan.problem.micro.is_none() {
                    break; // the same plan without
                }
            }
        }
    }
    for schema in Schema::ALL {
        if samples.iter().filter(|(f, _)| f.schema == schema).count()
            > GpuModel::feature_names(schema).len()
        {
            model.fit(schema, &samples)?;
        }
    }
    if !model.calibrated {
        return Err(Error::Gpu(
            "calibration measured too few launches to fit a model".into(),
        ));
    }
    Ok(model)
}

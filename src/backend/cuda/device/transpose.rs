//! Transpositions on the device: the kernels loaded from the embedded PTX, the TTLG plan
//! cache (estimated or measured plans), and the launches.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use super::memory::DeviceTensor;
use super::{gpu, lock, Device};
use crate::backend::cuda::kernels;
use crate::backend::cuda::ttlg::{GpuTuning, TtlgOptions, TtlgPlan, MEASURE_CANDIDATES};
use crate::bounded_cache::hash_of;
use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Layout};

/// Complex scalars as kernel arguments (`struct c32` / `c64` of the kernels).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(8))]
struct ArgC32([f32; 2]);
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
struct ArgC64([f64; 2]);
// SAFETY: plain old data with the size and alignment of the kernels' c32 / c64 structs.
unsafe impl DeviceRepr for ArgC32 {}
// SAFETY: as above.
unsafe impl DeviceRepr for ArgC64 {}

/// A scalar of the kernel's element type.
#[derive(Clone, Copy, Debug)]
enum ScalarArg {
    F32(f32),
    F64(f64),
    C32(ArgC32),
    C64(ArgC64),
}

impl ScalarArg {
    fn new<T: Element>(kernel: DType, v: T) -> Self {
        let same = kernel == T::DTYPE;
        let (re, im) = if same { (v.re(), v.im()) } else { (0.0, 0.0) };
        match kernel {
            // no f16/bf16 kernel runs (`gpu_element`); their scalars would be f32
            DType::F32 | DType::F16 | DType::BF16 => ScalarArg::F32(re as f32),
            DType::F64 => ScalarArg::F64(re),
            DType::C32 => ScalarArg::C32(ArgC32([re as f32, im as f32])),
            DType::C64 => ScalarArg::C64(ArgC64([re, im])),
        }
    }
}

pub(super) type PlanKey = (Vec<usize>, Layout, Layout, DType, bool);

pub(super) struct CachedPlan {
    pub(super) plan: TtlgPlan,
    pub(super) meta: CudaSlice<u8>,
}

/// A TTLG plan with its meta table already on the device (see [`Device::prepare`]): launches
/// of it copy nothing from the host, so they can be timed alone.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::backend::cuda::device::Device;
/// let dev = Device::new(0).unwrap();
/// let (la, lb) = (ttgt::Layout::row_major(&[40, 50]).unwrap(), ttgt::Layout::row_major(&[50, 40]).unwrap());
/// let plan = dev.transpose_plan(&[1, 0], &la, &lb, ttgt::DType::F32, true).unwrap();
/// let p = dev.prepare(&plan).unwrap();
/// assert_eq!(p.plan().kernel, plan.kernel);
/// # }
/// ```
#[derive(Clone)]
pub struct PreparedPlan(Arc<CachedPlan>);

impl PreparedPlan {
    /// The plan.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let (la, lb) = (ttgt::Layout::row_major(&[8, 9]).unwrap(), ttgt::Layout::row_major(&[9, 8]).unwrap());
    /// let plan = dev.transpose_plan(&[1, 0], &la, &lb, ttgt::DType::F64, false).unwrap();
    /// assert!(dev.prepare(&plan).unwrap().plan().predicted_seconds > 0.0);
    /// # }
    /// ```
    pub fn plan(&self) -> &TtlgPlan {
        &self.0.plan
    }
}

impl Device {
    pub(super) fn function(&self, name: &str) -> Result<CudaFunction> {
        if let Some(f) = lock(&self.functions, "kernel table")?.get(name) {
            return Ok(f.clone());
        }
        let file = kernels::KernelFile::of_kernel(name)
            .ok_or_else(|| Error::Gpu(format!("no kernel file defines {name}")))?;
        let module = {
            let mut mods = lock(&self.modules, "module table")?;
            match mods.get(&file) {
                Some(m) => m.clone(),
                None => {
                    let m = self
                        .ctx
                        .load_module(Ptx::from_src(kernels::ptx_source(file)?))
                        .map_err(gpu(&format!("loading the PTX of {}", file.source())))?;
                    mods.insert(file, m.clone());
                    m
                }
            }
        };
        let f = module
            .load_function(name)
            .map_err(gpu(&format!("finding kernel {name}")))?;
        lock(&self.functions, "kernel table")?.insert(name.to_string(), f.clone());
        Ok(f)
    }

    pub(super) fn plan(
        &self,
        perm: &[usize],
        a: &Layout,
        b: &Layout,
        dtype: DType,
        plain: bool,
    ) -> Result<Arc<CachedPlan>> {
        let key = (perm.to_vec(), a.clone(), b.clone(), dtype, plain);
        let hash = hash_of(&key);
        if let Some(p) = lock(&self.plans, "plan cache")?.get(hash, |k| *k == key) {
            return Ok(p.clone());
        }
        let opts = TtlgOptions {
            model: Some(self.model.clone()),
            micro_blocks: self.micro_blocks,
            async_copies: self.async_copies,
            ..TtlgOptions::default()
        };
        let cached = match self.tuning {
            GpuTuning::Estimate => {
                let plan = TtlgPlan::new(perm, a, b, dtype, plain, &self.props, &opts)?;
                self.upload_plan(plan)?
            }
            GpuTuning::Measure { budget } => {
                let ranked = TtlgPlan::ranked(
                    perm,
                    a,
                    b,
                    dtype,
                    plain,
                    &self.props,
                    &opts,
                    MEASURE_CANDIDATES,
                )?;
                self.fastest(ranked, a, b, budget)?
            }
        };
        lock(&self.plans, "plan cache")?.insert(hash, key, cached.clone());
        Ok(cached)
    }

    pub(super) fn upload_plan(&self, plan: TtlgPlan) -> Result<Arc<CachedPlan>> {
        let meta = self
            .stream
            .clone_htod(&plan.meta_bytes())
            .map_err(gpu("uploading a plan's offset arrays"))?;
        Ok(Arc::new(CachedPlan { plan, meta }))
    }

    /// Measured tuning: times the ranked candidates (model order) as plain copies on
    /// scratch buffers covering both layouts, until `budget` is spent (at least two), and
    /// returns the fastest. Without scratch memory (or with negative offsets) the first.
    pub(super) fn fastest(
        &self,
        ranked: Vec<TtlgPlan>,
        a: &Layout,
        b: &Layout,
        budget: std::time::Duration,
    ) -> Result<Arc<CachedPlan>> {
        let mut ranked = ranked.into_iter();
        let first = ranked
            .next()
            .ok_or_else(|| Error::Gpu("the GPU planner ranked no candidate".into()))?;
        let first = self.upload_plan(first)?;
        let ((a_lo, a_hi), (b_lo, b_hi)) = (a.offset_range(), b.offset_range());
        let es = first.plan.dtype.size_bytes();
        if first.plan.is_empty() || a_lo < 0 || b_lo < 0 || ranked.len() == 0 {
            return Ok(first);
        }
        let (a_bytes, b_bytes) = ((a_hi as usize + 1) * es, (b_hi as usize + 1) * es);
        let (Ok(wa), Ok(mut wb)) = (self.workspace(a_bytes), self.workspace(b_bytes)) else {
            return Ok(first);
        };
        let (sa, sb) = (wa.slice()?, wb.slice_mut()?);
        let start = std::time::Instant::now();
        let mut time = |p: &CachedPlan| -> Result<f64> {
            // Plain copies (mode 0): alpha and beta are not read.
            self.launch_transpose::<f32>(p, 1.0, sa, 0.0, sb)?;
            let t = self.time_on_stream(|| {
                for _ in 0..3 {
                    self.launch_transpose::<f32>(p, 1.0, sa, 0.0, sb)?;
                }
                Ok(())
            })?;
            Ok(t / 3.0)
        };
        let mut best_t = time(&first)?;
        let mut best = first;
        for (i, plan) in ranked.enumerate() {
            if i > 0 && start.elapsed() >= budget {
                break;
            }
            let p = self.upload_plan(plan)?;
            let t = time(&p)?;
            if t < best_t {
                best_t = t;
                best = p;
            }
        }
        Ok(best)
    }

    /// The TTLG plan this device uses for `B = perm(A)` (cached per device, layouts, dtype).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let (a, b) = (ttgt::Layout::row_major(&[64, 32]).unwrap(), ttgt::Layout::row_major(&[32, 64]).unwrap());
    /// let p = dev.transpose_plan(&[1, 0], &a, &b, ttgt::DType::F32, true).unwrap();
    /// println!("{}", p.describe());
    /// # }
    /// ```
    pub fn transpose_plan(
        &self,
        perm: &[usize],
        a: &Layout,
        b: &Layout,
        dtype: DType,
        plain: bool,
    ) -> Result<TtlgPlan> {
        Ok(self.plan(perm, a, b, dtype, plain)?.plan.clone())
    }

    /// Launches a planned transposition on raw buffers.
    pub(super) fn launch_transpose<T: Element>(
        &self,
        p: &CachedPlan,
        alpha: T,
        a: &CudaSlice<u8>,
        beta: T,
        b: &mut CudaSlice<u8>,
    ) -> Result<()> {
        let plan = &p.plan;
        if plan.is_empty() {
            return Ok(());
        }
        let mode = TtlgPlan::mode(alpha.is_exact_one(), beta.is_exact_zero());
        let f = self.function(&plan.kernel)?;
        let kd = plan.problem.kernel_dtype;
        let (sa, sb) = (ScalarArg::new(kd, alpha), ScalarArg::new(kd, beta));
        let cfg = LaunchConfig {
            grid_dim: (plan.grid[0], plan.grid[1], plan.grid[2]),
            block_dim: (plan.block[0], plan.block[1], plan.block[2]),
            shared_mem_bytes: plan.shared_bytes as u32,
        };
        let mut l = self.stream.launch_builder(&f);
        l.arg(a).arg(b).arg(&p.meta);
        match (&sa, &sb) {
            (ScalarArg::F32(x), ScalarArg::F32(y)) => l.arg(x).arg(y),
            (ScalarArg::F64(x), ScalarArg::F64(y)) => l.arg(x).arg(y),
            (ScalarArg::C32(x), ScalarArg::C32(y)) => l.arg(x).arg(y),
            (ScalarArg::C64(x), ScalarArg::C64(y)) => l.arg(x).arg(y),
            _ => return Err(Error::Gpu("scalar arguments of different types".into())),
        };
        l.arg(&mode);
        // SAFETY: the kernel's parameter list is (ptr, ptr, ptr, T, T, int) (checked against
        // the PTX by tests/cuda_ptx.rs); the plan was made for the layouts of these buffers,
        // so every offset it computes is inside them; the meta table belongs to the plan.
        unsafe { l.launch(cfg) }.map_err(gpu(&format!("launching {}", plan.kernel)))?;
        Ok(())
    }

    /// `B = alpha * perm(A) + beta * B` on device tensors (TTLG kernels).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let a = dev.upload(&ndarray::Array3::<f64>::ones((4, 5, 6))).unwrap();
    /// let mut b = dev.zeros::<f64>(&[6, 4, 5]).unwrap();
    /// dev.permute_into(&[2, 0, 1], 1.0, &a, 0.0, &mut b).unwrap();
    /// # }
    /// ```
    pub fn permute_into<T: Element>(
        &self,
        perm: &[usize],
        alpha: T,
        a: &DeviceTensor<T>,
        beta: T,
        b: &mut DeviceTensor<T>,
    ) -> Result<()> {
        let plain = alpha.is_exact_one() && beta.is_exact_zero();
        let p = self.plan(perm, &a.layout, &b.layout, T::DTYPE, plain)?;
        self.launch_transpose(&p, alpha, &a.buf, beta, &mut b.buf)
    }

    /// `perm(A)` into a new device tensor.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let a = dev.upload(&ndarray::Array2::<f32>::ones((3, 5))).unwrap();
    /// assert_eq!(dev.permute(&a, &[1, 0]).unwrap().shape(), &[5, 3]);
    /// # }
    /// ```
    pub fn permute<T: Element>(
        &self,
        a: &DeviceTensor<T>,
        perm: &[usize],
    ) -> Result<DeviceTensor<T>> {
        let shape = a.layout.permuted(perm)?.dims().to_vec();
        let mut b = self.zeros::<T>(&shape)?;
        self.permute_into(perm, T::one(), a, T::zero(), &mut b)?;
        Ok(b)
    }

    /// Runs a given TTLG plan (e.g. with a forced schema) on row-major device tensors.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{device::Device, ttlg::{Schema, TtlgOptions, TtlgPlan}};
    /// let dev = Device::new(0).unwrap();
    /// let (la, lb) = (ttgt::Layout::row_major(&[40, 50]).unwrap(), ttgt::Layout::row_major(&[50, 40]).unwrap());
    /// let o = TtlgOptions { schema: Some(Schema::OrthogonalArbitrary), ..TtlgOptions::default() };
    /// let p = TtlgPlan::new(&[1, 0], &la, &lb, ttgt::DType::F32, false, dev.props(), &o).unwrap();
    /// let a = dev.zeros::<f32>(&[40, 50]).unwrap();
    /// let mut b = dev.zeros::<f32>(&[50, 40]).unwrap();
    /// dev.run_plan(&p, 1.0, &a, 0.0, &mut b).unwrap();
    /// # }
    /// ```
    pub fn run_plan<T: Element>(
        &self,
        plan: &TtlgPlan,
        alpha: T,
        a: &DeviceTensor<T>,
        beta: T,
        b: &mut DeviceTensor<T>,
    ) -> Result<()> {
        let p = self.prepare(plan)?;
        self.run_prepared(&p, alpha, a, beta, b)
    }

    /// Uploads a plan's meta table once, for launches that copy nothing from the host.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{device::Device, ttlg::{Schema, TtlgOptions, TtlgPlan}};
    /// let dev = Device::new(0).unwrap();
    /// let (la, lb) = (ttgt::Layout::row_major(&[40, 50]).unwrap(), ttgt::Layout::row_major(&[50, 40]).unwrap());
    /// let o = TtlgOptions { schema: Some(Schema::OrthogonalDistinct), ..TtlgOptions::default() };
    /// let plan = TtlgPlan::new(&[1, 0], &la, &lb, ttgt::DType::F32, false, dev.props(), &o).unwrap();
    /// let p = dev.prepare(&plan).unwrap();
    /// let a = dev.zeros::<f32>(&[40, 50]).unwrap();
    /// let mut b = dev.zeros::<f32>(&[50, 40]).unwrap();
    /// dev.run_prepared(&p, 1.0, &a, 0.0, &mut b).unwrap();
    /// # }
    /// ```
    pub fn prepare(&self, plan: &TtlgPlan) -> Result<PreparedPlan> {
        let meta = self
            .stream
            .clone_htod(&plan.meta_bytes())
            .map_err(gpu("uploading a plan's offset arrays"))?;
        Ok(PreparedPlan(Arc::new(CachedPlan {
            plan: plan.clone(),
            meta,
        })))
    }

    /// Launches a prepared plan on row-major device tensors of the plan's layouts.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let (la, lb) = (ttgt::Layout::row_major(&[4, 5]).unwrap(), ttgt::Layout::row_major(&[5, 4]).unwrap());
    /// let p = dev.prepare(&dev.transpose_plan(&[1, 0], &la, &lb, ttgt::DType::F32, false).unwrap()).unwrap();
    /// let a = dev.zeros::<f32>(&[4, 5]).unwrap();
    /// let mut b = dev.zeros::<f32>(&[5, 4]).unwrap();
    /// dev.run_prepared(&p, 2.0, &a, 1.0, &mut b).unwrap();
    /// # }
    /// ```
    pub fn run_prepared<T: Element>(
        &self,
        p: &PreparedPlan,
        alpha: T,
        a: &DeviceTensor<T>,
        beta: T,
        b: &mut DeviceTensor<T>,
    ) -> Result<()> {
        let plan = &p.0.plan;
        // Device tensors are dense and row-major, so a plan made for a dense layout of the
        // same number of elements addresses only elements inside them.
        let n = plan.problem.tensor_elements();
        if plan.dtype != T::DTYPE || n != a.len() || n != b.len() {
            return Err(Error::Gpu(format!(
                "a plan for {n} elements of {} run on tensors of {} and {} elements of {}",
                plan.dtype,
                a.len(),
                b.len(),
                T::DTYPE
            )));
        }
        if plan.plain && !(alpha.is_exact_one() && beta.is_exact_zero()) {
            return Err(Error::Gpu(
                "a plan made for plain copies (widened elements) run with alpha != 1 or beta != 0"
                    .into(),
            ));
        }
        self.launch_transpose(&p.0, alpha, &a.buf, beta, &mut b.buf)
    }
}

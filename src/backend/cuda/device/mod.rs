//! The device layer (feature `cuda`): a CUDA device with its stream, the TTLG kernels loaded
//! from the embedded PTX, a caching workspace allocator, a plan cache, device tensors and
//! cuBLAS GEMMs. The driver and cuBLAS libraries are loaded at run time: without them every
//! entry point returns [`Error::Gpu`] (nothing panics).
//!
//! [`Device`] (this file) holds the context, the stream, the settings and the caches; its
//! methods are grouped by job: `memory` (allocator, device tensors, transfers), `transpose`
//! (kernel loading, TTLG plans and launches), `blas` (cuBLAS GEMMs) and `contract` (running a
//! GPU contraction plan).

mod blas;
mod contract;
mod memory;
mod transpose;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream};

use crate::bounded_cache::BoundedCache;
use crate::error::{Error, Result};

use super::contract::GpuContractionPlan;
use super::kernels;
use super::ttlg::{DeviceProps, GpuModel, GpuTuning, MicroBlocks};

use contract::ContractionKey;
pub use memory::{DeviceTensor, Workspace};
pub use transpose::PreparedPlan;
use transpose::{CachedPlan, PlanKey};

fn gpu<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> Error + '_ {
    move |e| Error::Gpu(format!("{what}: {e:?}"))
}

/// Transposition plans a device keeps (with their meta tables in device memory; the least
/// recently made is dropped first).
///
/// ```
/// assert!(ttgt::backend::cuda::device::TRANSPOSE_PLAN_CAPACITY >= 64);
/// ```
pub const TRANSPOSE_PLAN_CAPACITY: usize = 256;

/// Contraction plans a device keeps (the least recently made is dropped first).
///
/// ```
/// assert!(ttgt::backend::cuda::device::CONTRACTION_PLAN_CAPACITY >= 64);
/// ```
pub const CONTRACTION_PLAN_CAPACITY: usize = 128;

/// Whether the CUDA driver library can be loaded (checked before any cudarc call, which
/// would panic without it).
///
/// ```
/// // On a machine without CUDA this is simply false.
/// let _present: bool = ttgt::backend::cuda::device::driver_present();
/// ```
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library by its usual names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Number of CUDA devices; an error when there is no driver.
///
/// ```
/// match ttgt::backend::cuda::device::device_count() {
///     Ok(n) => println!("{n} device(s)"),
///     Err(e) => println!("{e}"),
/// }
/// ```
pub fn device_count() -> Result<usize> {
    if !driver_present() {
        return Err(Error::Gpu(
            "no CUDA driver (libcuda.so could not be loaded)".into(),
        ));
    }
    let n = CudaContext::device_count().map_err(gpu("counting CUDA devices"))?;
    Ok(n.max(0) as usize)
}

/// A CUDA device: context, stream, kernels, caches.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::backend::cuda::device::Device;
/// let dev = Device::new(0).unwrap();
/// println!("{} with {} SMs", dev.props().name, dev.props().sm_count);
/// # }
/// ```
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    props: DeviceProps,
    model: GpuModel,
    tuning: GpuTuning,
    micro_blocks: MicroBlocks,
    async_copies: bool,
    compute_major: i32,
    modules: Mutex<HashMap<kernels::KernelFile, Arc<CudaModule>>>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    pool: Mutex<HashMap<usize, Vec<CudaSlice<u8>>>>,
    plans: Mutex<BoundedCache<PlanKey, Arc<CachedPlan>>>,
    contractions: Mutex<BoundedCache<ContractionKey, Arc<GpuContractionPlan>>>,
    blas: Mutex<Option<Arc<CudaBlas>>>,
}

fn lock<'a, T>(m: &'a Mutex<T>, what: &str) -> Result<std::sync::MutexGuard<'a, T>> {
    m.lock()
        .map_err(|_| Error::Gpu(format!("{what} lock poisoned")))
}

impl Device {
    /// Opens device `ordinal`. Errors (never panics) when there is no driver, no such device,
    /// or the context cannot be created.
    ///
    /// ```
    /// # #[cfg(feature = "cuda")] {
    /// match ttgt::backend::cuda::device::Device::new(0) {
    ///     Ok(d) => println!("{}", d.props().name),
    ///     Err(e) => println!("no GPU: {e}"),
    /// }
    /// # }
    /// ```
    pub fn new(ordinal: usize) -> Result<Self> {
        let n = device_count()?;
        if ordinal >= n {
            return Err(Error::Gpu(format!(
                "no CUDA device {ordinal} ({n} device(s) present)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(gpu("creating the CUDA context"))?;
        let stream = ctx.default_stream();
        let name = ctx.name().map_err(gpu("reading the device name"))?;
        let attr = |a| ctx.attribute(a).map_err(gpu("reading a device attribute"));
        use cudarc::driver::sys::CUdevice_attribute as A;
        let sm = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
        let shared = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?.max(0) as usize;
        let compute_major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        // Uncalibrated copy bandwidth: 85% of the DRAM peak (2 transfers per memory clock
        // over the bus width), the usual reach of a device-to-device copy.
        let clock_khz = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
            .unwrap_or(0)
            .max(0) as f64;
        let bus_bits = attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
            .unwrap_or(0)
            .max(0) as f64;
        let peak = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
        let mut props = DeviceProps {
            name,
            sm_count: sm,
            max_shared_bytes: shared.min(48 * 1024),
            max_grid: sm * 32,
            copy_bandwidth: if peak > 0.0 {
                0.85 * peak
            } else {
                DeviceProps::nominal().copy_bandwidth
            },
        };
        let model = match GpuModel::load(&props.name) {
            Some(m) => {
                props.copy_bandwidth = m.copy_bandwidth;
                m
            }
            None => GpuModel::default_for(&props),
        };
        Ok(Device {
            ctx,
            stream,
            props,
            model,
            tuning: GpuTuning::Estimate,
            micro_blocks: MicroBlocks::default(),
            async_copies: false,
            compute_major,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            pool: Mutex::new(HashMap::new()),
            plans: Mutex::new(BoundedCache::new(TRANSPOSE_PLAN_CAPACITY)),
            contractions: Mutex::new(BoundedCache::new(CONTRACTION_PLAN_CAPACITY)),
            blas: Mutex::new(None),
        })
    }

    /// What the planner knows about this device.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// assert!(dev.props().sm_count > 0);
    /// # }
    /// ```
    pub fn props(&self) -> &DeviceProps {
        &self.props
    }

    /// The performance model in use (calibrated if stored for this device's name).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// println!("calibrated: {}", dev.model().calibrated);
    /// # }
    /// ```
    pub fn model(&self) -> &GpuModel {
        &self.model
    }

    /// How transposition plans are chosen (the model alone, or measured candidates).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{device::Device, ttlg::GpuTuning};
    /// assert_eq!(Device::new(0).unwrap().tuning(), GpuTuning::Estimate);
    /// # }
    /// ```
    pub fn tuning(&self) -> GpuTuning {
        self.tuning
    }

    /// Sets how transposition plans are chosen and drops cached plans.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{device::Device, ttlg::GpuTuning};
    /// let mut dev = Device::new(0).unwrap();
    /// dev.set_tuning(GpuTuning::Measure { budget: std::time::Duration::from_millis(10) });
    /// # }
    /// ```
    pub fn set_tuning(&mut self, tuning: GpuTuning) {
        self.tuning = tuning;
        self.clear_plan_cache();
    }

    /// Which types move in 2x2 blocks where the layouts allow
    /// ([`TtlgOptions::micro_blocks`]; f32 and f64 by default).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{device::Device, ttlg::MicroBlocks};
    /// assert_eq!(Device::new(0).unwrap().micro_blocks(), MicroBlocks::All);
    /// # }
    /// ```
    pub fn micro_blocks(&self) -> MicroBlocks {
        self.micro_blocks
    }

    /// Sets which types move in 2x2 blocks (for comparisons) and drops cached plans.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{device::Device, ttlg::MicroBlocks};
    /// let mut dev = Device::new(0).unwrap();
    /// dev.set_micro_blocks(MicroBlocks::Off);
    /// # }
    /// ```
    pub fn set_micro_blocks(&mut self, setting: MicroBlocks) {
        self.micro_blocks = setting;
        self.clear_plan_cache();
    }

    /// Whether Orthogonal-Distinct runs the asynchronous-copy kernels
    /// ([`TtlgOptions::async_copies`]; off by default).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// assert!(!ttgt::backend::cuda::device::Device::new(0).unwrap().async_copies());
    /// # }
    /// ```
    pub fn async_copies(&self) -> bool {
        self.async_copies
    }

    /// Turns the asynchronous-copy OD kernels on or off and drops cached plans; an error on
    /// a GPU older than compute capability 8.0 (no cp.async).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// let mut dev = ttgt::backend::cuda::device::Device::new(0).unwrap();
    /// if dev.set_async_copies(true).is_err() {
    ///     println!("no cp.async on this GPU");
    /// }
    /// # }
    /// ```
    pub fn set_async_copies(&mut self, on: bool) -> Result<()> {
        if on && self.compute_major < 8 {
            return Err(Error::Unsupported(format!(
                "asynchronous copies need compute capability 8.0 or later; {} is {}.x",
                self.props.name, self.compute_major
            )));
        }
        self.async_copies = on;
        self.clear_plan_cache();
        Ok(())
    }

    /// Replaces the model (after calibration) and drops cached plans.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{device::Device, ttlg::GpuModel};
    /// let mut dev = Device::new(0).unwrap();
    /// let m = GpuModel::default_for(dev.props());
    /// dev.set_model(m);
    /// # }
    /// ```
    pub fn set_model(&mut self, model: GpuModel) {
        self.props.copy_bandwidth = model.copy_bandwidth;
        self.model = model;
        self.clear_plan_cache();
    }

    /// A new stream of this device's context (for [`Device::set_stream`]).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let mut dev = Device::new(0).unwrap();
    /// let s = dev.new_stream().unwrap();
    /// dev.set_stream(s);
    /// # }
    /// ```
    pub fn new_stream(&self) -> Result<Arc<CudaStream>> {
        self.ctx.new_stream().map_err(gpu("creating a stream"))
    }

    /// Queues this device's later work (transposes, GEMMs, copies, allocations) on `stream`.
    /// Cached plans stay valid; the cuBLAS handle is recreated on the new stream.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let mut dev = Device::new(0).unwrap();
    /// let s = dev.new_stream().unwrap();
    /// dev.set_stream(s);
    /// # }
    /// ```
    pub fn set_stream(&mut self, stream: Arc<CudaStream>) {
        self.stream = stream;
        if let Ok(mut b) = self.blas.lock() {
            *b = None;
        }
    }

    /// The stream every operation of this device is queued on.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// dev.stream().synchronize().unwrap();
    /// # }
    /// ```
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Waits for all queued work; reports asynchronous kernel failures.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// dev.synchronize().unwrap();
    /// # }
    /// ```
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(gpu("synchronizing"))
    }

    /// Drops the cached transpose plans (the next calls plan again: single-use timings).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// dev.clear_plan_cache();
    /// # }
    /// ```
    pub fn clear_plan_cache(&self) {
        if let Ok(mut p) = self.plans.lock() {
            p.clear();
        }
        if let Ok(mut c) = self.contractions.lock() {
            c.clear();
        }
    }

    /// Seconds of the device work that `f` enqueues on this device's stream, between two
    /// CUDA events recorded before and after it (the host's time outside the stream is not
    /// counted, except where the stream waits for the host to enqueue the work).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let a = dev.zeros::<f32>(&[1 << 20]).unwrap();
    /// let mut b = dev.zeros::<f32>(&[1 << 20]).unwrap();
    /// let t = dev.time_on_stream(|| dev.copy_into(&a, &mut b)).unwrap();
    /// assert!(t > 0.0);
    /// # }
    /// ```
    pub fn time_on_stream(&self, f: impl FnOnce() -> Result<()>) -> Result<f64> {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .stream
            .record_event(flags)
            .map_err(gpu("recording a timing event"))?;
        f()?;
        let end = self
            .stream
            .record_event(flags)
            .map_err(gpu("recording a timing event"))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(gpu("reading a timing event"))?;
        Ok(f64::from(ms) * 1e-3)
    }
}

//! The device layer (feature `cuda`): a CUDA device with its stream, the TTLG kernels loaded
//! from the embedded PTX, a caching workspace allocator, a plan cache, device tensors and
//! cuBLAS GEMMs. The driver and cuBLAS libraries are loaded at run time: without them every
//! entry point returns [`Error::Gpu`] (nothing panics).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use cudarc::cublas::{sys as blas, CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut,
    DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Layout};

use super::contract::{BlasCall, GpuContractionPlan};
use super::kernels;
use super::ttlg::{
    DeviceProps, GpuModel, GpuTuning, MicroBlocks, TtlgOptions, TtlgPlan, MEASURE_CANDIDATES,
};

fn gpu<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> Error + '_ {
    move |e| Error::Gpu(format!("{what}: {e:?}"))
}

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

/// Refuses the element types the GPU kernels are not written for (`f16`, `bf16`): no device
/// tensor of them exists, so no kernel or cuBLAS call sees them.
fn gpu_element<T: Element>() -> Result<()> {
    if T::DTYPE.is_half() {
        return Err(Error::Unsupported(format!(
            "{} tensors on the GPU: the CUDA backend computes f32, f64, c32 and c64",
            T::DTYPE
        )));
    }
    Ok(())
}

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

/// A tensor in device memory: a row-major buffer of `T` and its layout.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::backend::cuda::device::Device;
/// let dev = Device::new(0).unwrap();
/// let a = ndarray::Array2::<f32>::ones((3, 4));
/// let da = dev.upload(&a).unwrap();
/// assert_eq!(da.shape(), &[3, 4]);
/// assert_eq!(dev.download(&da).unwrap(), a.into_dyn());
/// # }
/// ```
pub struct DeviceTensor<T: Element> {
    buf: CudaSlice<u8>,
    layout: Layout,
    _t: PhantomData<T>,
}

impl<T: Element> DeviceTensor<T> {
    /// Extents.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let t = dev.zeros::<f32>(&[2, 3]).unwrap();
    /// assert_eq!(t.shape(), &[2, 3]);
    /// # }
    /// ```
    pub fn shape(&self) -> &[usize] {
        self.layout.dims()
    }

    /// Layout (element strides).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let t = dev.zeros::<f32>(&[2, 3]).unwrap();
    /// assert_eq!(t.layout().strides(), &[3, 1]);
    /// # }
    /// ```
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Element type.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// assert_eq!(dev.zeros::<f64>(&[2]).unwrap().dtype(), ttgt::DType::F64);
    /// # }
    /// ```
    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// Number of elements.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// assert_eq!(dev.zeros::<f32>(&[2, 3]).unwrap().len(), 6);
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// Whether there are no elements.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// assert!(dev.zeros::<f32>(&[0, 3]).unwrap().is_empty());
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }
}

fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: the element types are plain old data without padding; the byte slice covers
    // exactly the same memory.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// A workspace from the caching allocator; returned to the cache when dropped.
///
/// ```no_run
/// # #[cfg(feature = "cuda")] {
/// use ttgt::backend::cuda::device::Device;
/// let dev = Device::new(0).unwrap();
/// let ws = dev.workspace(1 << 20).unwrap(); // from the cache after the first call
/// drop(ws); // back to the cache
/// # }
/// ```
pub struct Workspace<'d> {
    dev: &'d Device,
    class: usize,
    buf: Option<CudaSlice<u8>>,
}

impl Workspace<'_> {
    fn slice(&self) -> Result<&CudaSlice<u8>> {
        self.buf
            .as_ref()
            .ok_or_else(|| Error::Gpu("workspace already released".into()))
    }

    fn slice_mut(&mut self) -> Result<&mut CudaSlice<u8>> {
        self.buf
            .as_mut()
            .ok_or_else(|| Error::Gpu("workspace already released".into()))
    }
}

impl Drop for Workspace<'_> {
    fn drop(&mut self) {
        if let (Some(b), Ok(mut pool)) = (self.buf.take(), self.dev.pool.lock()) {
            pool.entry(self.class).or_default().push(b);
        }
    }
}

type PlanKey = (Vec<usize>, Layout, Layout, DType, bool);
type ContractionKey = (String, Vec<usize>, Vec<usize>, DType, bool);

struct CachedPlan {
    plan: TtlgPlan,
    meta: CudaSlice<u8>,
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
    plans: Mutex<HashMap<PlanKey, Arc<CachedPlan>>>,
    contractions: Mutex<HashMap<ContractionKey, Arc<GpuContractionPlan>>>,
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
            plans: Mutex::new(HashMap::new()),
            contractions: Mutex::new(HashMap::new()),
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

    fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        // SAFETY: the buffer is written before it is read by every user of `alloc`.
        unsafe { self.stream.alloc::<u8>(bytes.max(1)) }.map_err(|e| {
            Error::Gpu(format!(
                "out of device memory allocating {bytes} bytes: {e:?}"
            ))
        })
    }

    /// A workspace of at least `bytes` bytes from the caching allocator (size classes are
    /// powers of two; freed workspaces are kept for reuse, so repeated calls allocate nothing).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let ws = dev.workspace(4096).unwrap();
    /// drop(ws);
    /// # }
    /// ```
    pub fn workspace(&self, bytes: usize) -> Result<Workspace<'_>> {
        let class = bytes
            .max(256)
            .checked_next_power_of_two()
            .ok_or_else(|| Error::Gpu(format!("out of device memory allocating {bytes} bytes")))?;
        let cached = lock(&self.pool, "allocator")?
            .get_mut(&class)
            .and_then(|v| v.pop());
        let buf = match cached {
            Some(b) => b,
            None => self.alloc(class)?,
        };
        Ok(Workspace {
            dev: self,
            class,
            buf: Some(buf),
        })
    }

    /// Copies a host array (any layout) to a new row-major device tensor.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let t = dev.upload(&ndarray::Array2::<f64>::eye(3)).unwrap();
    /// assert_eq!(t.shape(), &[3, 3]);
    /// # }
    /// ```
    pub fn upload<T: Element, S: Data<Elem = T>, D: Dimension>(
        &self,
        a: &ArrayBase<S, D>,
    ) -> Result<DeviceTensor<T>> {
        gpu_element::<T>()?;
        let layout = Layout::row_major(a.shape())?;
        // A row-major contiguous array goes as it is; any other is gathered in logical order.
        let gathered: Vec<T>;
        let host: &[T] = match a.as_slice() {
            Some(s) => s,
            None => {
                gathered = a.iter().copied().collect();
                &gathered
            }
        };
        let buf = self
            .stream
            .clone_htod(as_bytes(host))
            .map_err(gpu("copying to the device"))?;
        Ok(DeviceTensor {
            buf,
            layout,
            _t: PhantomData,
        })
    }

    /// A new row-major device tensor of zeros.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let t = dev.zeros::<num_complex::Complex32>(&[4, 4]).unwrap();
    /// assert_eq!(t.len(), 16);
    /// # }
    /// ```
    pub fn zeros<T: Element>(&self, shape: &[usize]) -> Result<DeviceTensor<T>> {
        gpu_element::<T>()?;
        let layout = Layout::row_major(shape)?;
        let buf = self
            .stream
            .alloc_zeros::<u8>((layout.len() * T::DTYPE.size_bytes()).max(1))
            .map_err(|e| Error::Gpu(format!("out of device memory: {e:?}")))?;
        Ok(DeviceTensor {
            buf,
            layout,
            _t: PhantomData,
        })
    }

    /// Copies a device tensor back to the host.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let a = ndarray::Array1::<f32>::from(vec![1.0, 2.0]);
    /// let t = dev.upload(&a).unwrap();
    /// assert_eq!(dev.download(&t).unwrap(), a.into_dyn());
    /// # }
    /// ```
    pub fn download<T: Element>(&self, t: &DeviceTensor<T>) -> Result<ArrayD<T>> {
        let bytes: Vec<u8> = self
            .stream
            .clone_dtoh(&t.buf)
            .map_err(gpu("copying from the device"))?;
        let n = t.len();
        let mut out: Vec<T> = Vec::with_capacity(n);
        let need = n * std::mem::size_of::<T>();
        if bytes.len() < need {
            return Err(Error::Gpu("device buffer shorter than its tensor".into()));
        }
        // SAFETY: `bytes` holds at least n elements' worth of bytes written from values of T
        // (plain old data); `out` has capacity n and its length is set after the copy.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), need);
            out.set_len(n);
        }
        ArrayD::from_shape_vec(IxDyn(t.shape()), out).map_err(|e| Error::Layout(e.to_string()))
    }

    fn function(&self, name: &str) -> Result<CudaFunction> {
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

    fn plan(
        &self,
        perm: &[usize],
        a: &Layout,
        b: &Layout,
        dtype: DType,
        plain: bool,
    ) -> Result<Arc<CachedPlan>> {
        let key = (perm.to_vec(), a.clone(), b.clone(), dtype, plain);
        if let Some(p) = lock(&self.plans, "plan cache")?.get(&key) {
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
        lock(&self.plans, "plan cache")?.insert(key, cached.clone());
        Ok(cached)
    }

    fn upload_plan(&self, plan: TtlgPlan) -> Result<Arc<CachedPlan>> {
        let meta = self
            .stream
            .clone_htod(&plan.meta_bytes())
            .map_err(gpu("uploading a plan's offset arrays"))?;
        Ok(Arc::new(CachedPlan { plan, meta }))
    }

    /// Measured tuning: times the ranked candidates (model order) as plain copies on
    /// scratch buffers covering both layouts, until `budget` is spent (at least two), and
    /// returns the fastest. Without scratch memory (or with negative offsets) the first.
    fn fastest(
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
    fn launch_transpose<T: Element>(
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

    fn blas(&self) -> Result<Arc<CudaBlas>> {
        let mut g = lock(&self.blas, "cuBLAS handle")?;
        if let Some(b) = g.as_ref() {
            return Ok(b.clone());
        }
        // SAFETY: only tries to dlopen cuBLAS by its usual names.
        if !unsafe { blas::is_culib_present() } {
            return Err(Error::Gpu(
                "cuBLAS (libcublas.so) could not be loaded".into(),
            ));
        }
        let b =
            Arc::new(CudaBlas::new(self.stream.clone()).map_err(gpu("creating a cuBLAS handle"))?);
        *g = Some(b.clone());
        Ok(b)
    }

    /// Row-major strided-batched GEMM on packed buffers: for each of `g.batch` matrices,
    /// `C (m x n) = alpha * A (m x k) * B (k x n) + beta * C`, with leading dimensions k, n, n
    /// and batch strides m*k, k*n, m*n (elements). cuBLAS is column-major, so it computes
    /// C^T = B^T A^T (the operands swap). f32/f64 through cudarc's safe layer, complex
    /// through its raw bindings.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{contract::GemmShape, device::Device};
    /// let dev = Device::new(0).unwrap();
    /// let g = GemmShape { batch: 1, m: 2, n: 2, k: 2 };
    /// let (a, b) = (dev.zeros::<f32>(&[4]).unwrap(), dev.zeros::<f32>(&[4]).unwrap());
    /// let mut c = dev.zeros::<f32>(&[4]).unwrap();
    /// dev.gemm_tensors(&g, 1.0, &a, &b, 0.0, &mut c).unwrap();
    /// # }
    /// ```
    pub fn gemm_packed<T: Element>(
        &self,
        g: &super::contract::GemmShape,
        alpha: T,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        beta: T,
        c: &mut CudaSlice<u8>,
    ) -> Result<()> {
        self.gemm_call(&BlasCall::packed(g), alpha, a, b, beta, c)
    }

    /// One strided-batched cuBLAS GEMM as a [`BlasCall`] describes it (column-major terms;
    /// `a` and `b` are the contraction's A and B, the call says which comes first). Every
    /// buffer is checked to hold the elements the call addresses. f32/f64 through cudarc's
    /// safe layer, complex through its raw bindings.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// // A contraction whose plan is one direct call: C[:, b, :] = A[b]^T B for every b.
    /// let a = dev.upload(&ndarray::Array3::<f32>::ones((6, 5, 7))).unwrap();
    /// let b = dev.upload(&ndarray::Array2::<f32>::ones((5, 4))).unwrap();
    /// let mut c = dev.zeros::<f32>(&[7, 6, 4]).unwrap();
    /// dev.contract_into("bda,dc->abc", 1.0, &a, &b, 0.0, &mut c).unwrap();
    /// # }
    /// ```
    pub fn gemm_call<T: Element>(
        &self,
        call: &BlasCall,
        alpha: T,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        beta: T,
        c: &mut CudaSlice<u8>,
    ) -> Result<()> {
        if call.m == 0 || call.n == 0 || call.batch == 0 {
            return Ok(());
        }
        let int = |x: usize| -> Result<i32> {
            i32::try_from(x)
                .map_err(|_| Error::Gpu(format!("GEMM dimension {x} exceeds cuBLAS's int")))
        };
        let long = |x: usize| -> Result<i64> {
            i64::try_from(x).map_err(|_| Error::Gpu(format!("GEMM stride {x} exceeds i64")))
        };
        let (mi, ni, ki, bi) = (
            int(call.m)?,
            int(call.n)?,
            int(call.k.max(1))?,
            int(call.batch)?,
        );
        let (lx, ly, lc) = (int(call.ld_first)?, int(call.ld_second)?, int(call.ld_c)?);
        let (sx, sy, sc) = (
            long(call.stride_first)?,
            long(call.stride_second)?,
            long(call.stride_c)?,
        );
        let op = |t: bool| {
            if t {
                blas::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let (opx, opy) = (op(call.trans_first), op(call.trans_second));
        let h = self.blas()?;
        let es = T::DTYPE.size_bytes();
        let [nx, ny, nc] = call.extents();
        let (x, y) = if call.first_is_a { (a, b) } else { (b, a) };
        for (buf, elems) in [(x, nx), (y, ny)] {
            if buf.len() < elems * es {
                return Err(Error::Gpu("GEMM operand buffer too small".into()));
            }
        }
        if c.len() < nc * es {
            return Err(Error::Gpu("GEMM result buffer too small".into()));
        }
        match T::DTYPE {
            DType::F32 | DType::F64 => {
                macro_rules! real {
                    ($t:ty) => {{
                        let cfg = StridedBatchedConfig {
                            gemm: GemmConfig::<$t> {
                                transa: opx,
                                transb: opy,
                                m: mi,
                                n: ni,
                                k: ki,
                                alpha: alpha.re() as $t,
                                lda: lx,
                                ldb: ly,
                                beta: beta.re() as $t,
                                ldc: lc,
                            },
                            batch_size: bi,
                            stride_a: sx,
                            stride_b: sy,
                            stride_c: sc,
                        };
                        let len = |x: &CudaSlice<u8>| x.len() / std::mem::size_of::<$t>();
                        // SAFETY: the byte buffers hold at least the elements checked above;
                        // reinterpreting them as $t (plain old data) is sound.
                        let (vx, vy) =
                            unsafe { (x.transmute::<$t>(len(x)), y.transmute::<$t>(len(y))) };
                        let lcn = len(c);
                        // SAFETY: as above, for C.
                        let vc = unsafe { c.transmute_mut::<$t>(lcn) };
                        let (Some(vx), Some(vy), Some(mut vc)) = (vx, vy, vc) else {
                            return Err(Error::Gpu("GEMM operand reinterpretation failed".into()));
                        };
                        // SAFETY: `call.extents()` bounds every element the call addresses
                        // (checked above against the buffers' lengths).
                        unsafe { h.gemm_strided_batched(cfg, &vx, &vy, &mut vc) }
                            .map_err(gpu("cuBLAS gemm"))?;
                    }};
                }
                if T::DTYPE == DType::F32 {
                    real!(f32)
                } else {
                    real!(f64)
                }
            }
            DType::F16 | DType::BF16 => {
                return Err(Error::Unsupported(format!("{} GEMMs on the GPU", T::DTYPE)));
            }
            DType::C32 | DType::C64 => {
                let (px, _gx) = x.device_ptr(&self.stream);
                let (py, _gy) = y.device_ptr(&self.stream);
                let (pc, _gc) = c.device_ptr_mut(&self.stream);
                // One call of `$f` with scalars of the pair type `$s` (component type `$c`).
                macro_rules! complex {
                    ($f:ident, $s:ident, $c:ty) => {{
                        let al = blas::$s {
                            x: alpha.re() as $c,
                            y: alpha.im() as $c,
                        };
                        let be = blas::$s {
                            x: beta.re() as $c,
                            y: beta.im() as $c,
                        };
                        // SAFETY: as for the real case; pointers are device addresses of
                        // complex matrices the call's extents fit in, scalars are host values
                        // (default pointer mode).
                        unsafe {
                            blas::$f(
                                *h.handle(),
                                opx,
                                opy,
                                mi,
                                ni,
                                ki,
                                &al,
                                px as *const _,
                                lx,
                                sx,
                                py as *const _,
                                ly,
                                sy,
                                &be,
                                pc as *mut _,
                                lc,
                                sc,
                                bi,
                            )
                        }
                    }};
                }
                let st = if T::DTYPE == DType::C32 {
                    complex!(cublasCgemmStridedBatched, float2, f32)
                } else {
                    complex!(cublasZgemmStridedBatched, double2, f64)
                };
                if st != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    return Err(Error::Gpu(format!("cuBLAS complex gemm: {st:?}")));
                }
            }
        }
        Ok(())
    }

    /// `C = alpha * einsum(spec, A, B) + beta * C` on the device by TTGT: TTLG transposes of
    /// A and B into packed workspaces where needed, one strided-batched cuBLAS GEMM, a TTLG
    /// transpose of the packed result into C (with beta) where needed. Workspaces come from
    /// the caching allocator.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let a = dev.upload(&ndarray::Array3::<f32>::ones((4, 5, 6))).unwrap();
    /// let b = dev.upload(&ndarray::Array3::<f32>::ones((6, 5, 7))).unwrap();
    /// let mut c = dev.zeros::<f32>(&[4, 7]).unwrap();
    /// dev.contract_into("abc,cbd->ad", 1.0, &a, &b, 0.0, &mut c).unwrap();
    /// # }
    /// ```
    pub fn contract_into<T: Element>(
        &self,
        spec: &str,
        alpha: T,
        a: &DeviceTensor<T>,
        b: &DeviceTensor<T>,
        beta: T,
        c: &mut DeviceTensor<T>,
    ) -> Result<()> {
        let key = (
            spec.to_string(),
            a.shape().to_vec(),
            b.shape().to_vec(),
            T::DTYPE,
            beta.is_exact_zero(),
        );
        let cached = lock(&self.contractions, "contraction plan cache")?
            .get(&key)
            .cloned();
        let plan = match cached {
            Some(p) => p,
            None => {
                let p = Arc::new(match self.tuning {
                    GpuTuning::Estimate => GpuContractionPlan::new(
                        spec,
                        a.shape(),
                        b.shape(),
                        T::DTYPE,
                        beta.is_exact_zero(),
                        &self.props,
                    )?,
                    GpuTuning::Measure { budget } => {
                        self.fastest_contraction(spec, a, b, beta.is_exact_zero(), budget)?
                    }
                });
                lock(&self.contractions, "contraction plan cache")?.insert(key, p.clone());
                p
            }
        };
        self.contract_with_plan(&plan, alpha, a, b, beta, c)
    }

    /// Measured tuning of a contraction: times the planner's shortlist
    /// ([`contract::shortlist`](super::contract::shortlist) of
    /// [`MEASURE_CONTRACTIONS`](super::contract::MEASURE_CONTRACTIONS)) on A and B into a
    /// scratch C (one warm-up run, then the mean of two between CUDA events) until `budget`
    /// is spent (at least two), and returns the fastest. Without scratch memory, the
    /// planner's first choice.
    fn fastest_contraction<T: Element>(
        &self,
        spec: &str,
        a: &DeviceTensor<T>,
        b: &DeviceTensor<T>,
        beta_zero: bool,
        budget: std::time::Duration,
    ) -> Result<GpuContractionPlan> {
        let mut plans = GpuContractionPlan::candidates(
            spec,
            a.shape(),
            b.shape(),
            T::DTYPE,
            beta_zero,
            &self.props,
        )?;
        let short = super::contract::shortlist(&plans, super::contract::MEASURE_CONTRACTIONS);
        if short.len() < 2 {
            return Ok(plans.swap_remove(0));
        }
        let Ok(mut scratch) = self.zeros::<T>(&plans[0].shapes[2]) else {
            return Ok(plans.swap_remove(0));
        };
        let start = std::time::Instant::now();
        let (mut best, mut best_t) = (0, f64::INFINITY);
        for (n, &i) in short.iter().enumerate() {
            if n >= 2 && start.elapsed() >= budget {
                break;
            }
            let mut run =
                || self.contract_with_plan(&plans[i], T::one(), a, b, T::zero(), &mut scratch);
            run()?;
            let t = self.time_on_stream(|| {
                run()?;
                run()
            })?;
            if t < best_t {
                (best, best_t) = (i, t);
            }
        }
        Ok(plans.swap_remove(best))
    }

    /// Runs a given contraction plan (one of [`GpuContractionPlan::candidates`], say) on
    /// operands of its shapes: `C = alpha * einsum(A, B) + beta * C`. A plan made for
    /// `beta_zero` must run with beta = 0.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, device::Device};
    /// let dev = Device::new(0).unwrap();
    /// let a = dev.upload(&ndarray::Array2::<f32>::ones((4, 6))).unwrap();
    /// let b = dev.upload(&ndarray::Array2::<f32>::ones((6, 5))).unwrap();
    /// let mut c = dev.zeros::<f32>(&[5, 4]).unwrap();
    /// for p in GpuContractionPlan::candidates("ik,kj->ji", &[4, 6], &[6, 5], ttgt::DType::F32,
    ///                                         true, dev.props()).unwrap() {
    ///     dev.contract_with_plan(&p, 1.0, &a, &b, 0.0, &mut c).unwrap();
    /// }
    /// # }
    /// ```
    pub fn contract_with_plan<T: Element>(
        &self,
        plan: &GpuContractionPlan,
        alpha: T,
        a: &DeviceTensor<T>,
        b: &DeviceTensor<T>,
        beta: T,
        c: &mut DeviceTensor<T>,
    ) -> Result<()> {
        let spec = &plan.spec;
        if plan.dtype != T::DTYPE {
            return Err(Error::PlanMismatch(format!(
                "contraction plan for {spec:?} is for {}, the operands are {}",
                plan.dtype.name(),
                T::DTYPE.name()
            )));
        }
        for (i, t) in [a.shape(), b.shape()].into_iter().enumerate() {
            if t != plan.shapes[i].as_slice() {
                return Err(Error::PlanMismatch(format!(
                    "contraction plan for {spec:?}: operand {i} has shape {t:?}, the plan {:?}",
                    plan.shapes[i]
                )));
            }
        }
        if c.shape() != plan.shapes[2].as_slice() {
            return Err(Error::OutputShape {
                spec: spec.to_string(),
                expected: plan.shapes[2].clone(),
                given: c.shape().to_vec(),
            });
        }
        let es = T::DTYPE.size_bytes();
        let [wa, wb, wc] = plan.workspace_elements();
        let mut ws_a = if wa > 0 {
            Some(self.workspace(wa * es)?)
        } else {
            None
        };
        let mut ws_b = if wb > 0 {
            Some(self.workspace(wb * es)?)
        } else {
            None
        };
        let mut ws_c = if wc > 0 {
            Some(self.workspace(wc * es)?)
        } else {
            None
        };
        let one = T::one();
        let zero = T::zero();
        if let (Some(st), Some(ws)) = (&plan.pack_a, ws_a.as_mut()) {
            let p = self.plan(
                &st.perm,
                &a.layout,
                &Layout::row_major(&st.shape)?,
                T::DTYPE,
                true,
            )?;
            self.launch_transpose(&p, one, &a.buf, zero, ws.slice_mut()?)?;
        }
        if let (Some(st), Some(ws)) = (&plan.pack_b, ws_b.as_mut()) {
            let p = self.plan(
                &st.perm,
                &b.layout,
                &Layout::row_major(&st.shape)?,
                T::DTYPE,
                true,
            )?;
            self.launch_transpose(&p, one, &b.buf, zero, ws.slice_mut()?)?;
        }
        let ga = match &ws_a {
            Some(w) => w.slice()?,
            None => &a.buf,
        };
        let gb = match &ws_b {
            Some(w) => w.slice()?,
            None => &b.buf,
        };
        match (&plan.unpack_c, ws_c.as_mut()) {
            (Some(st), Some(ws)) => {
                self.gemm_call(&plan.blas, alpha, ga, gb, zero, ws.slice_mut()?)?;
                let mut src = vec![0; st.perm.len()];
                for (i, &p) in st.perm.iter().enumerate() {
                    src[p] = st.shape[i];
                }
                let p = self.plan(
                    &st.perm,
                    &Layout::row_major(&src)?,
                    &c.layout,
                    T::DTYPE,
                    beta.is_exact_zero(),
                )?;
                self.launch_transpose(&p, one, ws.slice()?, beta, &mut c.buf)?;
            }
            _ => self.gemm_call(&plan.blas, alpha, ga, gb, beta, &mut c.buf)?,
        }
        Ok(())
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

    /// Frees the workspace buffers the caching allocator keeps for reuse (packed operands,
    /// results, measured-tuning scratch) and returns how many bytes it gave back. Buffers in
    /// use are not affected; later calls allocate again.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// drop(dev.workspace(1 << 20).unwrap()); // back to the pool, still allocated
    /// assert_eq!(dev.release_workspaces(), 1 << 20);
    /// # }
    /// ```
    pub fn release_workspaces(&self) -> usize {
        let Ok(mut pool) = self.pool.lock() else {
            return 0;
        };
        pool.drain().map(|(class, v)| class * v.len()).sum()
    }

    /// Device-to-device copy of a whole tensor (the bandwidth reference of the benches).
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let a = dev.zeros::<f32>(&[8]).unwrap();
    /// let mut b = dev.zeros::<f32>(&[8]).unwrap();
    /// dev.copy_into(&a, &mut b).unwrap();
    /// # }
    /// ```
    pub fn copy_into<T: Element>(
        &self,
        src: &DeviceTensor<T>,
        dst: &mut DeviceTensor<T>,
    ) -> Result<()> {
        if src.buf.len() != dst.buf.len() {
            return Err(Error::Gpu("copy between tensors of different sizes".into()));
        }
        self.stream
            .memcpy_dtod(&src.buf, &mut dst.buf)
            .map_err(gpu("device-to-device copy"))
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

    /// The plain GEMM reference: [`Device::gemm_packed`] on whole device tensors.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::{contract::GemmShape, device::Device};
    /// let dev = Device::new(0).unwrap();
    /// let g = GemmShape { batch: 2, m: 3, n: 4, k: 5 };
    /// let a = dev.zeros::<f64>(&[2 * 3 * 5]).unwrap();
    /// let b = dev.zeros::<f64>(&[2 * 5 * 4]).unwrap();
    /// let mut c = dev.zeros::<f64>(&[2 * 3 * 4]).unwrap();
    /// dev.gemm_tensors(&g, 1.0, &a, &b, 0.0, &mut c).unwrap();
    /// # }
    /// ```
    pub fn gemm_tensors<T: Element>(
        &self,
        g: &super::contract::GemmShape,
        alpha: T,
        a: &DeviceTensor<T>,
        b: &DeviceTensor<T>,
        beta: T,
        c: &mut DeviceTensor<T>,
    ) -> Result<()> {
        self.gemm_packed(g, alpha, &a.buf, &b.buf, beta, &mut c.buf)
    }

    /// `einsum(spec, A, B)` into a new device tensor.
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")] {
    /// use ttgt::backend::cuda::device::Device;
    /// let dev = Device::new(0).unwrap();
    /// let a = dev.upload(&ndarray::Array2::<f32>::ones((3, 4))).unwrap();
    /// let b = dev.upload(&ndarray::Array2::<f32>::ones((4, 5))).unwrap();
    /// assert_eq!(dev.contract("ij,jk->ik", &a, &b).unwrap().shape(), &[3, 5]);
    /// # }
    /// ```
    pub fn contract<T: Element>(
        &self,
        spec: &str,
        a: &DeviceTensor<T>,
        b: &DeviceTensor<T>,
    ) -> Result<DeviceTensor<T>> {
        let shape = parse_output_shape(spec, a.shape(), b.shape())?;
        let mut c = self.zeros::<T>(&shape)?;
        self.contract_into(spec, T::one(), a, b, T::zero(), &mut c)?;
        Ok(c)
    }
}

fn parse_output_shape(spec: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    Ok(crate::einsum::parse(spec)?.bind(&[a, b])?.output_shape())
}

//! Device memory: the caching workspace allocator, device tensors and host transfers.

use std::marker::PhantomData;

use cudarc::driver::CudaSlice;
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use super::{gpu, lock, Device};
use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Layout};

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
    pub(super) buf: CudaSlice<u8>,
    pub(super) layout: Layout,
    pub(super) _t: PhantomData<T>,
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
    pub(super) fn slice(&self) -> Result<&CudaSlice<u8>> {
        self.buf
            .as_ref()
            .ok_or_else(|| Error::Gpu("workspace already released".into()))
    }

    pub(super) fn slice_mut(&mut self) -> Result<&mut CudaSlice<u8>> {
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

impl Device {
    pub(super) fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>> {
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
}

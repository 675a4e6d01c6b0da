//! GEMMs on the device through cuBLAS: the handle, strided-batched calls as a [`BlasCall`]
//! describes them.

use std::sync::Arc;

use cudarc::cublas::{sys as blas, CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::memory::DeviceTensor;
use super::{gpu, lock, Device};
use crate::backend::cuda::contract::BlasCall;
use crate::error::{Error, Result};
use crate::tensor::{DType, Element};

impl Device {
    pub(super) fn blas(&self) -> Result<Arc<CudaBlas>> {
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
        g: &crate::backend::cuda::contract::GemmShape,
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
        g: &crate::backend::cuda::contract::GemmShape,
        alpha: T,
        a: &DeviceTensor<T>,
        b: &DeviceTensor<T>,
        beta: T,
        c: &mut DeviceTensor<T>,
    ) -> Result<()> {
        self.gemm_packed(g, alpha, &a.buf, &b.buf, beta, &mut c.buf)
    }
}

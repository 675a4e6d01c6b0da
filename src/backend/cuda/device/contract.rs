//! Contractions on the device: the GPU contraction plan cache (estimated or measured), and a
//! plan's packs, strided-batched GEMM and write-back run on device tensors.

use std::sync::Arc;

use super::memory::DeviceTensor;
use super::{lock, Device};
use crate::backend::cuda::contract::GpuContractionPlan;
use crate::backend::cuda::ttlg::GpuTuning;
use crate::bounded_cache::hash_of;
use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Layout};

pub(super) type ContractionKey = (String, Vec<usize>, Vec<usize>, DType, bool);

impl Device {
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
        let hash = hash_of(&key);
        let cached = lock(&self.contractions, "contraction plan cache")?
            .get(hash, |k| *k == key)
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
                lock(&self.contractions, "contraction plan cache")?.insert(hash, key, p.clone());
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
    pub(super) fn fastest_contraction<T: Element>(
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
        let short = crate::backend::cuda::contract::shortlist(
            &plans,
            crate::backend::cuda::contract::MEASURE_CONTRACTIONS,
        );
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

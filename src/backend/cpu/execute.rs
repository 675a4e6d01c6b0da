//! Execution of a [`ContractionPlan`] on the CPU: diagonal views, one-sided sums, packing,
//! the batched GEMM loop and the write-back into C, each step timed.

use std::time::{Duration, Instant};

use super::gemm::{gemm, Mat, MatMut};
use crate::error::{Error, Result};
use crate::plan::{group, packed_layout, ContractionPlan, OperandPrep};
use crate::tensor::{
    spans_overlap, zeroed, zeroed_aligned, Element, Layout, StridedView, StridedViewMut,
};
use crate::transpose::{accumulate, transpose};

/// Wall time of each step of one execution of a plan.
///
/// ```
/// let t = ttgt::StepTimes::default();
/// assert_eq!(t.total(), std::time::Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepTimes {
    /// Diagonal views and one-sided sums.
    pub prepare: Duration,
    /// Copying A into its matricized layout.
    pub pack_a: Duration,
    /// Copying B into its matricized layout.
    pub pack_b: Duration,
    /// The GEMM calls.
    pub gemm: Duration,
    /// Writing the result into C (`alpha * T + beta * C`), or the whole unary operation.
    pub write_c: Duration,
}

impl StepTimes {
    /// Sum of all steps.
    pub fn total(&self) -> Duration {
        self.prepare + self.pack_a + self.pack_b + self.gemm + self.write_c
    }

    /// Time spent moving data (packing A and B, writing C).
    pub fn transpose(&self) -> Duration {
        self.pack_a + self.pack_b + self.write_c
    }
}

/// `[0, 1, ..., n-1]`.
fn identity(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// Applies the diagonal and the one-sided sum of `p` to `v`, reducing into `buf`.
fn prepare<'a, T: Element>(
    p: &OperandPrep,
    v: StridedView<'a, T>,
    ext: &dyn Fn(crate::einsum::Label) -> usize,
    buf: &'a mut Vec<T>,
) -> Result<StridedView<'a, T>> {
    let v = match &p.diagonal {
        Some(g) => v.diagonal(g)?,
        None => v,
    };
    if p.summed.is_empty() {
        return Ok(v);
    }
    *buf = zeroed(p.prepared.len(), "a reduced operand")?;
    let dst = packed_layout(&p.kept, &p.labels, ext)?;
    // `dst` addresses only `buf` (row-major over the kept labels, stride 0 on summed ones).
    accumulate(T::one(), &v, buf.as_mut_ptr(), &dst)?;
    let buf: &'a [T] = buf;
    StridedView::from_slice(buf, p.prepared.clone(), 0)
}

/// Copies `v` (axes labelled `labels`) into a row-major buffer ordered by `order`.
fn pack<'a, T: Element>(
    v: &StridedView<'_, T>,
    labels: &[crate::einsum::Label],
    order: &[crate::einsum::Label],
    ext: &dyn Fn(crate::einsum::Label) -> usize,
    buf: &'a mut Vec<T>,
) -> Result<StridedView<'a, T>> {
    let layout = packed_layout(order, labels, ext)?;
    // 64-byte aligned, so that the transposition can stream its stores.
    let (data, off) = zeroed_aligned(v.layout().len(), "a packed operand")?;
    *buf = data;
    {
        let mut dst = StridedViewMut::from_slice(buf, layout.clone(), off)?;
        transpose(
            &identity(v.layout().ndim()),
            T::one(),
            v,
            T::zero(),
            &mut dst,
        )?;
    }
    let buf: &'a [T] = buf;
    StridedView::from_slice(buf, layout, off)
}

/// One fused matrix dimension `(extent, stride)` of a label group.
fn matdim(
    labels: &[crate::einsum::Label],
    axis_labels: &[crate::einsum::Label],
    l: &Layout,
) -> Result<(usize, isize)> {
    let (d, s) = group(labels, axis_labels, l);
    crate::plan::fuse(&d, &s)
        .ok_or_else(|| Error::PlanMismatch("index group does not fuse (planner bug)".into()))
}

impl ContractionPlan {
    /// Runs the plan: `C = alpha * A·B + beta * C` (one operand: `C = alpha * op(A) + beta * C`).
    /// The operands must have the layouts and element type the plan was made for. With
    /// `beta == 0`, C is never read.
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout, tensor::{StridedView, StridedViewMut}};
    /// let a = ndarray::Array2::<f64>::ones((3, 4));
    /// let b = ndarray::Array2::<f64>::ones((4, 5));
    /// let mut c = ndarray::Array2::<f64>::zeros((5, 3));
    /// let plan = ContractionPlan::new("ij,jk->ki", &[Layout::of(&a), Layout::of(&b)], &Layout::of(&c), DType::F64).unwrap();
    /// let times = plan.execute(1.0, &[StridedView::of(&a), StridedView::of(&b)], 0.0,
    ///                          &mut StridedViewMut::of(&mut c).unwrap()).unwrap();
    /// assert_eq!(c[[4, 2]], 4.0);
    /// assert!(times.total() >= times.gemm);
    /// ```
    pub fn execute<T: Element>(
        &self,
        alpha: T,
        inputs: &[StridedView<'_, T>],
        beta: T,
        c: &mut StridedViewMut<'_, T>,
    ) -> Result<StepTimes> {
        self.check_operands(inputs, c)?;
        let bound = &self.bound;
        let ext = |l| bound.extent(l);
        let mut times = StepTimes::default();
        let t0 = Instant::now();
        let mut sum_bufs: Vec<Vec<T>> = vec![Vec::new(); inputs.len()];
        let mut views = Vec::with_capacity(inputs.len());
        for ((k, v), buf) in inputs.iter().enumerate().zip(sum_bufs.iter_mut()) {
            let dims: Vec<usize> = bound.inputs()[k].iter().map(|&l| ext(l)).collect();
            views.push(prepare(&self.preps[k], v.broadcast(&dims)?, &ext, buf)?);
        }
        times.prepare = t0.elapsed();
        let out = bound.output();

        if views.len() == 1 {
            let t = Instant::now();
            let kept = &self.preps[0].kept;
            let perm: Vec<usize> = out
                .iter()
                .map(|l| kept.iter().position(|x| x == l).unwrap_or(0))
                .collect();
            transpose(&perm, alpha, &views[0], beta, c)?;
            times.write_c = t.elapsed();
            return Ok(times);
        }

        let (pa, pb) = (&self.preps[0], &self.preps[1]);
        let (mut buf_a, mut buf_b) = (Vec::new(), Vec::new());
        let t = Instant::now();
        let a = if pa.packed {
            let order: Vec<_> = [&self.batch[..], &self.m, &self.k].concat();
            pack(&views[0], &pa.kept, &order, &ext, &mut buf_a)?
        } else {
            views[0].clone()
        };
        times.pack_a = t.elapsed();
        let t = Instant::now();
        let b = if pb.packed {
            let order: Vec<_> = [&self.batch[..], &self.k, &self.n].concat();
            pack(&views[1], &pb.kept, &order, &ext, &mut buf_b)?
        } else {
            views[1].clone()
        };
        times.pack_b = t.elapsed();

        let (m, a_rs) = matdim(&self.m, &pa.kept, a.layout())?;
        let (k, a_cs) = matdim(&self.k, &pa.kept, a.layout())?;
        let (_, b_rs) = matdim(&self.k, &pb.kept, b.layout())?;
        let (n, b_cs) = matdim(&self.n, &pb.kept, b.layout())?;
        let (batch_dims, a_bs) = group(&self.batch, &pa.kept, a.layout());
        let (_, b_bs) = group(&self.batch, &pb.kept, b.layout());

        let t = Instant::now();
        let mut tmp: Vec<T> = Vec::new();
        let (c_ptr, c_layout, g_alpha, g_beta) = if self.c_direct {
            (c.as_mut_ptr(), c.layout().clone(), alpha, beta)
        } else {
            tmp = zeroed(self.c.len(), "the GEMM result")?;
            let order: Vec<_> = [&self.batch[..], &self.m, &self.n].concat();
            (
                tmp.as_mut_ptr(),
                packed_layout(&order, out, ext)?,
                T::one(),
                T::zero(),
            )
        };
        let (_, c_rs) = matdim(&self.m, out, &c_layout)?;
        let (_, c_cs) = matdim(&self.n, out, &c_layout)?;
        let (_, c_bs) = group(&self.batch, out, &c_layout);
        let (ap, bp) = (a.as_ptr(), b.as_ptr());
        for_each_batch(&batch_dims, [&a_bs, &b_bs, &c_bs], |[oa, ob, oc]| {
            // SAFETY: the M and K groups fuse in A's layout (checked by `matdim`), so
            // `oa + i*a_rs + l*a_cs` for i < m, l < k is the offset of an in-bounds index of
            // `a`; likewise for B and C. C's layout never self-overlaps (checked at planning)
            // and C shares no memory with A or B (`check_operands`; `tmp` is private).
            unsafe {
                gemm(
                    m,
                    n,
                    k,
                    g_alpha,
                    Mat {
                        ptr: ap.wrapping_offset(oa),
                        rs: a_rs,
                        cs: a_cs,
                    },
                    Mat {
                        ptr: bp.wrapping_offset(ob),
                        rs: b_rs,
                        cs: b_cs,
                    },
                    g_beta,
                    MatMut {
                        ptr: c_ptr.wrapping_offset(oc),
                        rs: c_rs,
                        cs: c_cs,
                    },
                );
            }
        });
        times.gemm = t.elapsed();
        if !self.c_direct {
            let t = Instant::now();
            let tv = StridedView::from_slice(&tmp, c_layout, 0)?;
            transpose(&identity(out.len()), alpha, &tv, beta, c)?;
            times.write_c = t.elapsed();
        }
        Ok(times)
    }

    fn check_operands<T: Element>(
        &self,
        inputs: &[StridedView<'_, T>],
        c: &StridedViewMut<'_, T>,
    ) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(Error::PlanMismatch(format!(
                "plan made for {}, executed with {}",
                self.dtype,
                T::DTYPE
            )));
        }
        if inputs.len() != self.inputs.len() {
            return Err(Error::OperandCount {
                spec: self.bound.spec().text().to_string(),
                expected: self.inputs.len(),
                given: inputs.len(),
            });
        }
        for (k, (v, l)) in inputs.iter().zip(&self.inputs).enumerate() {
            if v.layout() != l {
                return Err(Error::PlanMismatch(format!(
                    "operand {k} has extents {:?} / strides {:?}, the plan was made for {:?} / {:?}",
                    v.layout().dims(),
                    v.layout().strides(),
                    l.dims(),
                    l.strides()
                )));
            }
            if spans_overlap(v.as_ptr(), v.layout(), c.as_ptr(), c.layout()) {
                return Err(Error::Overlap {
                    what: format!("input operand {k}"),
                });
            }
        }
        if c.layout() != &self.c {
            return Err(Error::PlanMismatch(format!(
                "output has extents {:?} / strides {:?}, the plan was made for {:?} / {:?}",
                c.layout().dims(),
                c.layout().strides(),
                self.c.dims(),
                self.c.strides()
            )));
        }
        Ok(())
    }
}

/// Calls `f` with the offsets in each of three tensors of every batch index.
fn for_each_batch(dims: &[usize], strides: [&[isize]; 3], mut f: impl FnMut([isize; 3])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut off = [0isize; 3];
    loop {
        f(off);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for (o, s) in off.iter_mut().zip(strides) {
                *o += s[d];
            }
            if idx[d] < dims[d] {
                break;
            }
            for (o, s) in off.iter_mut().zip(strides) {
                *o -= s[d] * dims[d] as isize;
            }
            idx[d] = 0;
        }
    }
}

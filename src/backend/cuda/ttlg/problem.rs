//! The transposition as the GPU kernels see it: normalized dims (size-1 removal and fusion,
//! from the CPU engine's [`Normalized`]), optionally widened to a larger element
//! (OneFlow's movement size), and the dim orders of A and B (fastest first).

use crate::error::{Error, Result};
use crate::tensor::{DType, Layout};
use crate::transpose::{Dim, Normalized};

use super::dtype_of_width;

/// A normalized transposition for the GPU.
///
/// ```
/// use ttgt::backend::cuda::ttlg::GpuProblem;
/// use ttgt::{DType, Layout};
/// // (8, 6, 4) f32 -> perm [1, 0, 2]: the shared fastest dim of 4 floats moves as one
/// // 16-byte element when the copy is plain and the data 16-byte aligned.
/// let a = Layout::row_major(&[8, 6, 4]).unwrap();
/// let b = Layout::row_major(&[6, 8, 4]).unwrap();
/// let p = GpuProblem::new(&[1, 0, 2], &a, &b, DType::F32, true, 16).unwrap();
/// assert_eq!(p.widen, 4);
/// assert_eq!(p.dims.len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuProblem {
    /// Dims in B's order (outermost first), strides in kernel elements.
    pub dims: Vec<Dim>,
    /// Indices into `dims` by increasing |stride in A| (A's fastest first).
    pub in_order: Vec<usize>,
    /// Indices into `dims` by increasing |stride in B|.
    pub out_order: Vec<usize>,
    /// Element type of the kernel (wider than the tensors' when widened).
    pub kernel_dtype: DType,
    /// Tensor elements per kernel element.
    pub widen: usize,
    /// Kernel elements moved.
    pub elements: usize,
}

impl GpuProblem {
    /// Normalizes `B = perm(A)`. `plain`: the execution is a plain copy (alpha = 1,
    /// beta = 0), which allows widening; `align`: the largest power of two (bytes, at most
    /// 16) dividing both data addresses.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[6, 5, 4]).unwrap(), ttgt::Layout::row_major(&[5, 6, 4]).unwrap());
    /// let p = GpuProblem::new(&[1, 0, 2], &a, &b, ttgt::DType::F64, false, 16).unwrap();
    /// assert_eq!(p.elements, 120);
    /// ```
    pub fn new(
        perm: &[usize],
        a: &Layout,
        b: &Layout,
        dtype: DType,
        plain: bool,
        align: usize,
    ) -> Result<Self> {
        if b.may_self_overlap() {
            return Err(Error::Unsupported(
                "GPU transpose into an output whose elements overlap (zero or overlapping strides)"
                    .into(),
            ));
        }
        let norm = Normalized::new(perm, a, b)?;
        let mut dims: Vec<Dim> = norm.dims().to_vec();
        if dims.is_empty() {
            dims.push(Dim { n: 1, sa: 1, sb: 1 });
        }
        let mut p = GpuProblem::from_dims(dims, dtype, 1);
        if plain && !norm.is_empty() {
            p = p.widened(align);
        }
        if norm.is_empty() {
            p.elements = 0;
        }
        Ok(p)
    }

    fn from_dims(dims: Vec<Dim>, dtype: DType, widen: usize) -> Self {
        let mut in_order: Vec<usize> = (0..dims.len()).collect();
        // Stable sorts with the later (inner in B) dim first among equal strides.
        in_order.sort_by_key(|&i| (dims[i].sa.unsigned_abs(), usize::MAX - i));
        let mut out_order: Vec<usize> = (0..dims.len()).collect();
        out_order.sort_by_key(|&i| (dims[i].sb.unsigned_abs(), usize::MAX - i));
        let elements = dims.iter().map(|d| d.n).product();
        GpuProblem {
            dims,
            in_order,
            out_order,
            kernel_dtype: dtype,
            widen,
            elements,
        }
    }

    /// The widest movement size (at most 16 bytes) that the shared unit-stride dim, the
    /// other strides and the alignment allow; `self` when none does.
    fn widened(self, align: usize) -> Self {
        let size = self.kernel_dtype.size_bytes();
        let Some(f) = self.dims.iter().position(|d| d.sa == 1 && d.sb == 1) else {
            return self;
        };
        let mut v = 16 / size;
        while v > 1 {
            let ok = v * size <= align
                && self.dims[f].n.is_multiple_of(v)
                && self
                    .dims
                    .iter()
                    .enumerate()
                    .all(|(i, d)| i == f || (d.sa % v as isize == 0 && d.sb % v as isize == 0));
            if ok {
                break;
            }
            v /= 2;
        }
        let Some(dt) = dtype_of_width(v * size) else {
            return self;
        };
        if v == 1 {
            return self;
        }
        let vi = v as isize;
        let shape: Vec<usize> = self
            .dims
            .iter()
            .enumerate()
            .map(|(i, d)| if i == f { d.n / v } else { d.n })
            .collect();
        // The widened dim keeps unit strides (now in wide elements); the others divide.
        let sa: Vec<isize> = (0..shape.len())
            .map(|i| if i == f { 1 } else { self.dims[i].sa / vi })
            .collect();
        let sb: Vec<isize> = (0..shape.len())
            .map(|i| if i == f { 1 } else { self.dims[i].sb / vi })
            .collect();
        let ident: Vec<usize> = (0..shape.len()).collect();
        let (Ok(la), Ok(lb)) = (Layout::new(shape.clone(), sa), Layout::new(shape, sb)) else {
            return self;
        };
        let Ok(norm) = Normalized::new(&ident, &la, &lb) else {
            return self;
        };
        let mut dims = norm.dims().to_vec();
        if dims.is_empty() {
            dims.push(Dim { n: 1, sa: 1, sb: 1 });
        }
        GpuProblem::from_dims(dims, dt, self.widen * v)
    }

    /// A's fastest dim.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[6, 5, 4]).unwrap(), ttgt::Layout::row_major(&[5, 6, 4]).unwrap());
    /// let p = GpuProblem::new(&[1, 0, 2], &a, &b, ttgt::DType::F64, false, 16).unwrap();
    /// assert_eq!(p.dims[p.fvi_in()].n, 4);
    /// ```
    pub fn fvi_in(&self) -> usize {
        self.in_order[0]
    }

    /// B's fastest dim.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[6, 5, 4]).unwrap(), ttgt::Layout::row_major(&[5, 6, 4]).unwrap());
    /// let p = GpuProblem::new(&[1, 0, 2], &a, &b, ttgt::DType::F64, false, 16).unwrap();
    /// assert_eq!(p.fvi_out(), p.fvi_in());
    /// ```
    pub fn fvi_out(&self) -> usize {
        self.out_order[0]
    }

    /// Whether A and B share their fastest dim.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[6, 5, 4]).unwrap(), ttgt::Layout::row_major(&[5, 6, 4]).unwrap());
    /// let p = GpuProblem::new(&[1, 0, 2], &a, &b, ttgt::DType::F64, false, 16).unwrap();
    /// assert!(p.fvi_match());
    /// ```
    pub fn fvi_match(&self) -> bool {
        self.fvi_in() == self.fvi_out()
    }

    /// Largest |offset| reachable in A and in B (kernel elements).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[6, 5, 4]).unwrap(), ttgt::Layout::row_major(&[5, 6, 4]).unwrap());
    /// let p = GpuProblem::new(&[1, 0, 2], &a, &b, ttgt::DType::F64, false, 16).unwrap();
    /// assert_eq!(p.spans(), (119, 119));
    /// ```
    pub fn spans(&self) -> (u64, u64) {
        let mut sa = 0u64;
        let mut sb = 0u64;
        for d in &self.dims {
            let n = d.n.saturating_sub(1) as u64;
            sa = sa.saturating_add(n.saturating_mul(d.sa.unsigned_abs() as u64));
            sb = sb.saturating_add(n.saturating_mul(d.sb.unsigned_abs() as u64));
        }
        (sa, sb)
    }
}

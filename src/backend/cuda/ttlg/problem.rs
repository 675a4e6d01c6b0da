//! The transposition as the GPU kernels see it: normalized dims (size-1 removal and fusion,
//! from the CPU engine's [`Normalized`]), optionally widened to a larger element
//! (OneFlow's movement size) or cut into 2x2 blocks of f32, and the dim orders of A and B
//! (fastest first).

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
    /// Dims in B's order (outermost first), strides in the units the kernels' pointers
    /// address: wide elements when widened, else tensor elements (2x2 blocks included).
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
    /// Set when the kernel moves 2x2 blocks ([`GpuProblem::micro_blocked`]).
    pub micro: Option<MicroBlock>,
}

/// The 2x2 blocks of an f32 or f64 transposition whose fastest dims differ: A's fastest dim
/// and B's fastest dim are halved, and each kernel element is 2 x 2 tensor elements, read
/// from A as two rows of two elements and written to B as two columns of two (kernel types
/// `q32`: 8-byte rows, `q64`: 16-byte rows). Offsets in tensor elements.
///
/// ```
/// use ttgt::backend::cuda::ttlg::GpuProblem;
/// use ttgt::{DType, Layout};
/// let a = Layout::row_major(&[6, 8]).unwrap();
/// let b = Layout::row_major(&[8, 6]).unwrap();
/// let p = GpuProblem::new(&[1, 0], &a, &b, DType::F32, false, 16).unwrap().micro_blocked(16);
/// let m = p.micro.unwrap();
/// assert_eq!((m.da, m.db), (8, 6)); // A's next row; B's next row
/// assert_eq!(p.elements, 12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroBlock {
    /// Offset in A of a block's second row (the second index of B's fastest dim).
    pub da: isize,
    /// Offset in B of a block's second column (the second index of A's fastest dim).
    pub db: isize,
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
            micro: None,
        }
    }

    /// The same f32 or f64 transposition moved in 2x2 blocks ([`MicroBlock`]) when A's and
    /// B's fastest dims differ, both have unit stride and an even extent of at least 4,
    /// every other stride of A and of B is even and `align` (bytes dividing both data
    /// addresses) is at least two elements; `self` otherwise (other types, widened
    /// problems). Every block's two rows and two columns are then aligned pairs, so the
    /// kernels move f32 with 8-byte and f64 with 16-byte accesses.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// use ttgt::{DType, Layout};
    /// let a = Layout::row_major(&[16, 16, 16]).unwrap();
    /// let b = Layout::row_major(&[16, 16, 16]).unwrap();
    /// let p = GpuProblem::new(&[0, 2, 1], &a, &b, DType::F32, false, 16).unwrap();
    /// assert!(p.clone().micro_blocked(16).micro.is_some());
    /// assert!(p.clone().micro_blocked(4).micro.is_none()); // data only 4-byte aligned
    /// ```
    pub fn micro_blocked(self, align: usize) -> Self {
        let size = self.kernel_dtype.size_bytes();
        if !matches!(self.kernel_dtype, DType::F32 | DType::F64)
            || self.widen != 1
            || self.micro.is_some()
            || self.elements == 0
            || align < 2 * size
            || self.fvi_match()
        {
            return self;
        }
        let (p, q) = (self.fvi_in(), self.fvi_out());
        let (dp, dq) = (self.dims[p], self.dims[q]);
        let ok = dp.sa == 1
            && dq.sb == 1
            && dp.n.is_multiple_of(2)
            && dq.n.is_multiple_of(2)
            && dp.n >= 4
            && dq.n >= 4
            && self
                .dims
                .iter()
                .enumerate()
                .all(|(i, d)| (i == p || d.sa % 2 == 0) && (i == q || d.sb % 2 == 0));
        if !ok {
            return self;
        }
        let micro = MicroBlock {
            da: dq.sa,
            db: dp.sb,
        };
        let dims: Vec<Dim> = self
            .dims
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if i == p || i == q {
                    // Halved; strides still in tensor elements (A's unit dim steps by 2).
                    Dim {
                        n: d.n / 2,
                        sa: 2 * d.sa,
                        sb: 2 * d.sb,
                    }
                } else {
                    d
                }
            })
            .collect();
        let mut out = GpuProblem::from_dims(dims, self.kernel_dtype, 1);
        out.micro = Some(micro);
        out
    }

    /// Bytes of one kernel element (16 for 2x2 blocks of f32, 32 for those of f64).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[8, 8]).unwrap(), ttgt::Layout::row_major(&[8, 8]).unwrap());
    /// let p = GpuProblem::new(&[1, 0], &a, &b, ttgt::DType::F32, false, 16).unwrap();
    /// assert_eq!(p.elem_bytes(), 4);
    /// assert_eq!(p.micro_blocked(16).elem_bytes(), 16);
    /// ```
    pub fn elem_bytes(&self) -> usize {
        self.kernel_dtype.size_bytes() * if self.micro.is_some() { 4 } else { 1 }
    }

    /// Tensor elements moved.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[8, 8]).unwrap(), ttgt::Layout::row_major(&[8, 8]).unwrap());
    /// let p = GpuProblem::new(&[1, 0], &a, &b, ttgt::DType::F32, false, 16).unwrap();
    /// assert_eq!(p.micro_blocked(16).tensor_elements(), 64);
    /// ```
    pub fn tensor_elements(&self) -> usize {
        self.elements * self.widen * if self.micro.is_some() { 4 } else { 1 }
    }

    /// The kernels' element type name (`f32`, ..., `q32` / `q64` for 2x2 blocks of f32 /
    /// f64).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::GpuProblem;
    /// let (a, b) = (ttgt::Layout::row_major(&[8, 8]).unwrap(), ttgt::Layout::row_major(&[8, 8]).unwrap());
    /// let p = GpuProblem::new(&[1, 0], &a, &b, ttgt::DType::F32, false, 16).unwrap();
    /// assert_eq!(p.micro_blocked(16).kernel_type_name(), "q32");
    /// ```
    pub fn kernel_type_name(&self) -> &'static str {
        if self.micro.is_some() {
            if self.kernel_dtype == DType::F64 {
                "q64"
            } else {
                "q32"
            }
        } else {
            self.kernel_dtype.name()
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

    /// Largest |offset| reachable in A and in B (in the kernels' pointer units, as `dims`).
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
        if let Some(m) = self.micro {
            // A block's second row and column, and the second element of each pair.
            sa = sa.saturating_add(m.da.unsigned_abs() as u64 + 1);
            sb = sb.saturating_add(m.db.unsigned_abs() as u64 + 1);
        }
        (sa, sb)
    }
}

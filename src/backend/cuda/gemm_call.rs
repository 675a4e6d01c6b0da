//! The strided-batched GEMM call of a GPU contraction: its shape, its column-major terms
//! (which operand comes first, transposes, leading dimensions, batch strides), its roofline
//! price on a device, the fusion of label groups into one, and the CPU stand-ins that run
//! it under the emulator.

use crate::einsum::Label;
use crate::tensor::{DType, Element};

use super::ttlg::DeviceProps;

/// GEMM rate per byte/s of copy bandwidth for f32 and c32 ([`BlasCall::predicted_seconds`]),
/// the ratio cuBLAS reaches on current data-centre GPUs (see `docs/TUNING.md`).
///
/// ```
/// // A 4 TB/s device is taken to run sgemm at 48 TFLOP/s.
/// assert_eq!(ttgt::backend::cuda::gemm_call::GEMM_FLOPS_PER_BYTE * 4e12, 48e12);
/// ```
pub const GEMM_FLOPS_PER_BYTE: f64 = 12.0;

/// The same for f64 and c64 (devices with fp64 tensor cores; see `docs/TUNING.md`).
///
/// ```
/// use ttgt::backend::cuda::gemm_call::{GEMM_FLOPS_PER_BYTE, GEMM_FLOPS_PER_BYTE_F64};
/// assert!(GEMM_FLOPS_PER_BYTE_F64 > GEMM_FLOPS_PER_BYTE); // fp64 tensor cores
/// ```
pub const GEMM_FLOPS_PER_BYTE_F64: f64 = 15.0;

/// Output tile side the GEMM time model assumes.
const GEMM_TILE: usize = 64;

/// The batched GEMM of a contraction: `batch` products of `(m x k) * (k x n)`, all packed
/// row-major.
///
/// ```
/// let g = ttgt::backend::cuda::gemm_call::GemmShape { batch: 2, m: 3, n: 4, k: 5 };
/// assert_eq!(g.flops(), 2.0 * 2.0 * 3.0 * 4.0 * 5.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Batch count.
    pub batch: usize,
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
}

impl GemmShape {
    /// Real floating-point operations (2 m n k per batch).
    ///
    /// ```
    /// let g = ttgt::backend::cuda::gemm_call::GemmShape { batch: 1, m: 2, n: 2, k: 2 };
    /// assert_eq!(g.flops(), 16.0);
    /// ```
    pub fn flops(&self) -> f64 {
        2.0 * self.batch as f64 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// One strided-batched GEMM in cuBLAS's terms (column-major): for each of `batch` products,
/// `C (m x n, leading dimension ld_c) = op(X) * op(Y)`, with X the first operand (A of the
/// contraction when `first_is_a`, else B) and Y the other; `op(X)` is `m x k`, stored
/// column-major as `m x k` (leading dimension `ld_first`) or, when `trans_first`, as `k x m`;
/// likewise `op(Y)` is `k x n`. Batch strides in elements; 0 reuses one matrix for every
/// product.
///
/// ```
/// use ttgt::backend::cuda::gemm_call::{BlasCall, GemmShape};
/// // Packed row-major C = A B is C^T = B^T A^T in column-major terms: B comes first.
/// let c = BlasCall::packed(&GemmShape { batch: 2, m: 3, n: 4, k: 5 });
/// assert!(!c.first_is_a && (c.m, c.n, c.k) == (4, 3, 5) && c.stride_c == 12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlasCall {
    /// Whether X (the first operand) is A of the contraction (else B).
    pub first_is_a: bool,
    /// X stored as `k x m` (cuBLAS `OP_T`).
    pub trans_first: bool,
    /// Y stored as `n x k` (cuBLAS `OP_T`).
    pub trans_second: bool,
    /// Rows of C and of op(X).
    pub m: usize,
    /// Columns of C and of op(Y).
    pub n: usize,
    /// The summed extent.
    pub k: usize,
    /// Leading dimension of X as stored.
    pub ld_first: usize,
    /// Leading dimension of Y as stored.
    pub ld_second: usize,
    /// Leading dimension of C.
    pub ld_c: usize,
    /// Number of products.
    pub batch: usize,
    /// Batch stride of X (elements).
    pub stride_first: usize,
    /// Batch stride of Y.
    pub stride_second: usize,
    /// Batch stride of C.
    pub stride_c: usize,
}

impl BlasCall {
    /// The call for packed row-major `batch x M x K` A, `batch x K x N` B and `batch x M x N`
    /// C: C^T = B^T A^T (B first, no transposition flags).
    ///
    /// ```
    /// use ttgt::backend::cuda::gemm_call::{BlasCall, GemmShape};
    /// let c = BlasCall::packed(&GemmShape { batch: 1, m: 2, n: 3, k: 4 });
    /// assert_eq!((c.ld_first, c.ld_second, c.ld_c), (3, 4, 3));
    /// ```
    pub fn packed(g: &GemmShape) -> BlasCall {
        BlasCall {
            first_is_a: false,
            trans_first: false,
            trans_second: false,
            m: g.n,
            n: g.m,
            k: g.k,
            ld_first: g.n.max(1),
            ld_second: g.k.max(1),
            ld_c: g.n.max(1),
            batch: g.batch,
            stride_first: g.k * g.n,
            stride_second: g.m * g.k,
            stride_c: g.m * g.n,
        }
    }

    /// Elements each buffer must hold (first operand, second operand, C): one past the last
    /// element the call addresses (0 when the call addresses none).
    ///
    /// ```
    /// use ttgt::backend::cuda::gemm_call::{BlasCall, GemmShape};
    /// assert_eq!(BlasCall::packed(&GemmShape { batch: 2, m: 3, n: 4, k: 5 }).extents(), [40, 30, 24]);
    /// ```
    pub fn extents(&self) -> [usize; 3] {
        if self.batch == 0 || self.m == 0 || self.n == 0 {
            return [0; 3];
        }
        let span = |rows: usize, cols: usize, ld: usize, stride: usize| {
            if rows == 0 || cols == 0 {
                0
            } else {
                (self.batch - 1) * stride + (cols - 1) * ld + rows
            }
        };
        let (xr, xc) = if self.trans_first {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        };
        let (yr, yc) = if self.trans_second {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        };
        [
            span(xr, xc, self.ld_first, self.stride_first),
            span(yr, yc, self.ld_second, self.stride_second),
            span(self.m, self.n, self.ld_c, self.stride_c),
        ]
    }

    /// Predicted seconds of the call on a device with `props` (a roofline; no GPU GEMM is
    /// calibrated): the larger of its flops at the device's GEMM rate, scaled by how much of
    /// 64x64 output tiles each product fills (cuBLAS-style tiling: a 24-wide product wastes
    /// 5/8 of its tiles; many small products pay for it), and its bytes (operands read once
    /// per product, or once for a batch stride of 0; C written) at the copy bandwidth. The
    /// GEMM rate is the copy bandwidth times [`GEMM_FLOPS_PER_BYTE`] (f32 / c32) or
    /// [`GEMM_FLOPS_PER_BYTE_F64`] (f64 / c64).
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::{BlasCall, GemmShape}, ttlg::DeviceProps};
    /// let props = DeviceProps::nominal();
    /// let one = BlasCall::packed(&GemmShape { batch: 1, m: 8192, n: 8192, k: 8192 });
    /// let split = BlasCall::packed(&GemmShape { batch: 128, m: 64, n: 8192, k: 8192 });
    /// let (t1, t2) = (one.predicted_seconds(ttgt::DType::F32, &props),
    ///                 split.predicted_seconds(ttgt::DType::F32, &props));
    /// assert!(t1 > 0.0 && (t2 / t1 - 1.0).abs() < 1e-9); // full tiles either way
    /// let thin = BlasCall::packed(&GemmShape { batch: 256, m: 32, n: 8192, k: 8192 });
    /// assert!(thin.predicted_seconds(ttgt::DType::F32, &props) > 1.9 * t1);
    /// ```
    pub fn predicted_seconds(&self, dtype: DType, props: &DeviceProps) -> f64 {
        if self.batch == 0 || self.m == 0 || self.n == 0 {
            return 0.0;
        }
        let complex = matches!(dtype, DType::C32 | DType::C64);
        let rate = props.copy_bandwidth
            * match dtype {
                DType::F64 | DType::C64 => GEMM_FLOPS_PER_BYTE_F64,
                _ => GEMM_FLOPS_PER_BYTE,
            };
        let (b, m, n, k) = (
            self.batch as f64,
            self.m as f64,
            self.n as f64,
            self.k as f64,
        );
        let flops = 2.0 * b * m * n * k * if complex { 4.0 } else { 1.0 };
        let fill = |x: usize| x as f64 / (x.div_ceil(GEMM_TILE) * GEMM_TILE) as f64;
        let per = |stride: usize| if stride == 0 { 1.0 } else { b };
        let elems = m * k * per(self.stride_first) + k * n * per(self.stride_second) + b * m * n;
        let bytes = elems * dtype.size_bytes() as f64;
        (flops / (rate * fill(self.m) * fill(self.n))).max(bytes / props.copy_bandwidth)
    }

    /// One line: shape, operand order and flags, leading dimensions, batch strides.
    ///
    /// ```
    /// use ttgt::backend::cuda::gemm_call::{BlasCall, GemmShape};
    /// let c = BlasCall::packed(&GemmShape { batch: 1, m: 2, n: 3, k: 4 });
    /// assert!(c.describe().starts_with("gemm 3x2x4 (cuBLAS column-major: B x A"));
    /// ```
    pub fn describe(&self) -> String {
        format!(
            "gemm{} {}x{}x{} (cuBLAS column-major: {}{} x {}{}, ld {}/{}/{}, batch strides {}/{}/{})",
            if self.batch > 1 {
                format!(" batch {} x", self.batch)
            } else {
                String::new()
            },
            self.m,
            self.n,
            self.k,
            if self.first_is_a { "A" } else { "B" },
            if self.trans_first { "^T" } else { "" },
            if self.first_is_a { "B" } else { "A" },
            if self.trans_second { "^T" } else { "" },
            self.ld_first,
            self.ld_second,
            self.ld_c,
            self.stride_first,
            self.stride_second,
            self.stride_c
        )
    }
}

/// The CPU stand-in for a [`BlasCall`] (emulated runs and tests): the same column-major
/// semantics, `C = alpha * op(X) op(Y) + beta * C` per batch (beta = 0 never reads C).
///
/// ```
/// use ttgt::backend::cuda::gemm_call::{cpu_blas_call, BlasCall, GemmShape};
/// let call = BlasCall::packed(&GemmShape { batch: 1, m: 1, n: 1, k: 2 });
/// let mut c = [1.0f64];
/// cpu_blas_call(&call, 2.0, &[1.0, 2.0], &[3.0, 4.0], 1.0, &mut c);
/// assert_eq!(c[0], 1.0 + 2.0 * 11.0);
/// ```
pub fn cpu_blas_call<T: Element>(
    call: &BlasCall,
    alpha: T,
    a: &[T],
    b: &[T],
    beta: T,
    c: &mut [T],
) {
    let (x, y) = if call.first_is_a { (a, b) } else { (b, a) };
    let at = |i: usize, l: usize| {
        if call.trans_first {
            i * call.ld_first + l
        } else {
            l * call.ld_first + i
        }
    };
    let bt = |l: usize, j: usize| {
        if call.trans_second {
            l * call.ld_second + j
        } else {
            j * call.ld_second + l
        }
    };
    for p in 0..call.batch {
        let (xo, yo, co) = (
            p * call.stride_first,
            p * call.stride_second,
            p * call.stride_c,
        );
        for j in 0..call.n {
            for i in 0..call.m {
                let mut acc = T::zero();
                for l in 0..call.k {
                    acc += x[xo + at(i, l)] * y[yo + bt(l, j)];
                }
                let ci = &mut c[co + j * call.ld_c + i];
                *ci = if beta.is_exact_zero() {
                    alpha * acc
                } else {
                    alpha * acc + beta * *ci
                };
            }
        }
    }
}

/// One index group of a direct call fused into one dim: extent and stride in A, B and C
/// (stride 0 where the operand lacks the group).
#[derive(Clone, Copy, Debug)]
pub(super) struct Fused {
    n: usize,
    s: [usize; 3],
}

/// Fuses `group` (labels of extent > 1) into one dim that every operand walks with one
/// stride: ordered by decreasing stride in operand `by`, each label's stride must be the next
/// label's stride times its extent in every operand (an operand lacking every label has
/// stride 0 throughout). None when the group does not fuse.
pub(super) fn fuse(
    group: &[Label],
    ext: &dyn Fn(Label) -> usize,
    strides: &[Vec<(Label, usize)>; 3],
    by: usize,
) -> Option<Fused> {
    let st = |x: usize, l: Label| strides[x].iter().find(|(m, _)| *m == l).map(|&(_, s)| s);
    let mut g: Vec<Label> = group.to_vec();
    if g.is_empty() {
        return Some(Fused { n: 1, s: [0; 3] });
    }
    g.sort_by_key(|&l| std::cmp::Reverse(st(by, l).unwrap_or(0)));
    let mut s = [0usize; 3];
    for (x, sx) in s.iter_mut().enumerate() {
        let present: Vec<bool> = g.iter().map(|&l| st(x, l).is_some()).collect();
        if present.iter().all(|&p| !p) {
            continue;
        }
        if !present.iter().all(|&p| p) {
            return None;
        }
        for w in g.windows(2) {
            if st(x, w[0])? != st(x, w[1])? * ext(w[1]) {
                return None;
            }
        }
        *sx = st(x, *g.last()?)?;
    }
    Some(Fused {
        n: g.iter().map(|&l| ext(l)).product(),
        s,
    })
}

/// The column-major call for fused batch `l`, rows `m`, columns `n` and summed `k` groups,
/// when every matrix has a unit stride (None otherwise). Operand slots: 0 = A, 1 = B, 2 = C.
pub(super) fn blas_call(l: Fused, m: Fused, n: Fused, k: Fused) -> Option<BlasCall> {
    // A stride of an extent-1 group never moves: it may count as the unit stride.
    let unit = |f: Fused, x: usize| f.n <= 1 || f.s[x] == 1;
    let ld = |f: Fused, x: usize, rows: usize| if f.n <= 1 { rows.max(1) } else { f.s[x] };
    // Matrix `x` with row group `r` and column group `c` as a stored column-major operand
    // that the call reads as (r x c): (transposed?, leading dimension).
    let operand = |x: usize, r: Fused, c: Fused| -> Option<(bool, usize)> {
        if unit(r, x) {
            Some((false, ld(c, x, r.n)))
        } else if unit(c, x) {
            Some((true, ld(r, x, c.n)))
        } else {
            None
        }
    };
    let (first_is_a, cm, cn, ld_c) = if unit(n, 2) {
        // C^T (n x m) column-major = B^T A^T.
        (false, n, m, ld(m, 2, n.n))
    } else if unit(m, 2) {
        (true, m, n, ld(n, 2, m.n))
    } else {
        return None;
    };
    let (fx, fy) = if first_is_a { (0, 1) } else { (1, 0) };
    let (trans_first, ld_first) = operand(fx, cm, k)?;
    let (trans_second, ld_second) = operand(fy, k, cn)?;
    Some(BlasCall {
        first_is_a,
        trans_first,
        trans_second,
        m: cm.n,
        n: cn.n,
        k: k.n,
        ld_first,
        ld_second,
        ld_c,
        batch: l.n,
        stride_first: l.s[fx],
        stride_second: l.s[fy],
        stride_c: l.s[2],
    })
}

/// The CPU stand-in for the GEMM (emulated runs): packed row-major, batched.
///
/// ```
/// use ttgt::backend::cuda::gemm_call::{cpu_gemm_packed, GemmShape};
/// let g = GemmShape { batch: 1, m: 1, n: 1, k: 2 };
/// let mut c = [1.0f64];
/// cpu_gemm_packed(&g, 2.0, &[1.0, 2.0], &[3.0, 4.0], 1.0, &mut c);
/// assert_eq!(c[0], 1.0 + 2.0 * 11.0);
/// ```
pub fn cpu_gemm_packed<T: Element>(
    g: &GemmShape,
    alpha: T,
    a: &[T],
    b: &[T],
    beta: T,
    c: &mut [T],
) {
    let (m, n, k) = (g.m, g.n, g.k);
    for p in 0..g.batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::zero();
                for l in 0..k {
                    acc += a[p * m * k + i * k + l] * b[p * k * n + l * n + j];
                }
                let ci = &mut c[p * m * n + i * n + j];
                *ci = if beta.is_exact_zero() {
                    alpha * acc
                } else {
                    alpha * acc + beta * *ci
                };
            }
        }
    }
}

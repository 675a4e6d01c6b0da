//! TTGT on the GPU: a two-operand contraction becomes (optional) TTLG transposes of A and B
//! into packed `batch x M x K` and `batch x K x N` buffers, one strided-batched GEMM into a
//! packed `batch x M x N` result, and (optional) a TTLG transpose of that result into C with
//! beta. The order of the indices inside each group (C's, A's or B's) is chosen by the TTLG
//! model: the combination with the least predicted transpose time. The plan is cudarc-free: the device layer runs it with cuBLAS, the emulator with
//! a CPU stand-in for the GEMM, from the same [`GpuContractionPlan`].

use crate::einsum::{parse, IndexKind, Label};
use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Layout};

use super::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};

/// The batched GEMM of a contraction: `batch` products of `(m x k) * (k x n)`, all packed
/// row-major.
///
/// ```
/// let g = ttgt::backend::cuda::contract::GemmShape { batch: 2, m: 3, n: 4, k: 5 };
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
    /// let g = ttgt::backend::cuda::contract::GemmShape { batch: 1, m: 2, n: 2, k: 2 };
    /// assert_eq!(g.flops(), 16.0);
    /// ```
    pub fn flops(&self) -> f64 {
        2.0 * self.batch as f64 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// One packing or unpacking transpose of a GPU contraction.
///
/// ```
/// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
/// let p = GpuContractionPlan::new("abc,cd->dba", &[4, 5, 6], &[6, 7], ttgt::DType::F32, true,
///                                 &DeviceProps::nominal()).unwrap();
/// let c = p.unpack_c.as_ref().unwrap();
/// assert_eq!(c.shape, vec![7, 5, 4]);
/// ```
#[derive(Clone, Debug)]
pub struct PackStep {
    /// `perm[i] = j`: axis i of the destination is axis j of the source.
    pub perm: Vec<usize>,
    /// Destination extents.
    pub shape: Vec<usize>,
    /// The TTLG launch.
    pub plan: TtlgPlan,
}

/// A planned GPU contraction (TTGT).
///
/// ```
/// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
/// let p = GpuContractionPlan::new("abc,cbd->ad", &[4, 5, 6], &[6, 5, 7], ttgt::DType::F64,
///                                 true, &DeviceProps::nominal()).unwrap();
/// assert_eq!((p.gemm.m, p.gemm.n, p.gemm.k), (4, 7, 30));
/// assert!(p.pack_a.is_none() && p.pack_b.is_some() && p.unpack_c.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct GpuContractionPlan {
    /// The spec.
    pub spec: String,
    /// Element type.
    pub dtype: DType,
    /// The GEMM.
    pub gemm: GemmShape,
    /// Extents of A, B and C.
    pub shapes: [Vec<usize>; 3],
    /// Transpose of A into `batch x M x K` (None: A is already in that order).
    pub pack_a: Option<PackStep>,
    /// Transpose of B into `batch x K x N`.
    pub pack_b: Option<PackStep>,
    /// Transpose of the packed `batch x M x N` result into C (None: the GEMM writes C).
    pub unpack_c: Option<PackStep>,
}

fn position(labels: &[Label], l: Label) -> usize {
    labels.iter().position(|&x| x == l).unwrap_or(0)
}

fn step(
    src_labels: &[Label],
    dst_labels: &[Label],
    src_shape: &[usize],
    dtype: DType,
    plain: bool,
    props: &DeviceProps,
) -> Result<Option<PackStep>> {
    let perm: Vec<usize> = dst_labels
        .iter()
        .map(|&l| position(src_labels, l))
        .collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(None);
    }
    let shape: Vec<usize> = perm.iter().map(|&p| src_shape[p]).collect();
    let plan = TtlgPlan::new(
        &perm,
        &Layout::row_major(src_shape)?,
        &Layout::row_major(&shape)?,
        dtype,
        plain,
        props,
        &TtlgOptions::default(),
    )?;
    Ok(Some(PackStep { perm, shape, plan }))
}

impl GpuContractionPlan {
    /// Plans `C = alpha * einsum(spec, A, B) + beta * C` for row-major operands of the given
    /// extents. `beta_zero`: the plan runs with beta = 0 (lets the final transpose widen).
    /// Diagonals, one-sided sums and broadcast (`...` stretched) axes are not supported on
    /// the GPU path (an [`Error::Unsupported`]).
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// let p = GpuContractionPlan::new("abc,cd->dba", &[4, 5, 6], &[6, 7], ttgt::DType::F32, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert_eq!((p.gemm.m, p.gemm.n, p.gemm.k), (20, 7, 6));
    /// ```
    pub fn new(
        spec: &str,
        a_shape: &[usize],
        b_shape: &[usize],
        dtype: DType,
        beta_zero: bool,
        props: &DeviceProps,
    ) -> Result<Self> {
        let bound = parse(spec)?.bind(&[a_shape, b_shape])?;
        let con = bound.classify()?;
        let unsupported = |what: &str| {
            Err(Error::Unsupported(format!(
                "GPU contraction {spec:?}: {what} are not supported on the GPU path"
            )))
        };
        if con.has_diagonal() {
            return unsupported("repeated indices (diagonals)");
        }
        if con
            .indices()
            .iter()
            .any(|i| matches!(i.kind, IndexKind::SumA | IndexKind::SumB))
        {
            return unsupported("indices summed in one operand only");
        }
        if bound.stretched().iter().flatten().any(|&s| s) {
            return unsupported("broadcast (stretched) axes");
        }
        let (al, bl, cl) = (&bound.inputs()[0], &bound.inputs()[1], bound.output());
        let of = |labels: &[Label], k: IndexKind| -> Vec<Label> {
            labels
                .iter()
                .copied()
                .filter(|&l| con.kind(l) == Some(k))
                .collect()
        };
        // Candidate orders of each group: C's or an operand's (TTGT's freedom); every
        // combination is ranked by the TTLG model's predicted transpose time (the GEMM is
        // the same for all), ties going to the earlier (C-ordered) candidate.
        // (An operand without the group's indices yields an empty, incomplete candidate.)
        let orders = |cands: [Vec<Label>; 3]| -> Vec<Vec<Label>> {
            let full = cands.iter().map(Vec::len).max().unwrap_or(0);
            let mut v: Vec<Vec<Label>> = Vec::new();
            for c in cands {
                if c.len() == full && !v.contains(&c) {
                    v.push(c);
                }
            }
            v
        };
        let kinds = |k: IndexKind| [of(cl, k), of(al, k), of(bl, k)];
        let (batches, ms, ns, ks) = (
            orders(kinds(IndexKind::Batch)),
            orders(kinds(IndexKind::FreeA)),
            orders(kinds(IndexKind::FreeB)),
            orders([
                of(al, IndexKind::Contracted),
                of(bl, IndexKind::Contracted),
                vec![],
            ]),
        );
        let (b_, m_, n_, k_) = con.gemm_shape();
        let c_shape = bound.output_shape();
        let mut memo: std::collections::HashMap<(Vec<Label>, Vec<Label>, bool), Option<PackStep>> =
            std::collections::HashMap::new();
        let mut step_of = |src: &[Label],
                           dst: &[Label],
                           shape: &[usize],
                           plain: bool|
         -> Result<Option<PackStep>> {
            let key = (src.to_vec(), dst.to_vec(), plain);
            if let Some(s) = memo.get(&key) {
                return Ok(s.clone());
            }
            let s = step(src, dst, shape, dtype, plain, props)?;
            memo.insert(key, s.clone());
            Ok(s)
        };
        let cost = |s: &Option<PackStep>| s.as_ref().map_or(0.0, |s| s.plan.predicted_seconds);
        let mut best: Option<(f64, [Option<PackStep>; 3])> = None;
        for batch in &batches {
            for m in &ms {
                for n in &ns {
                    for k in &ks {
                        let pa: Vec<Label> = [&batch[..], m, k].concat();
                        let pb: Vec<Label> = [&batch[..], k, n].concat();
                        let pc: Vec<Label> = [&batch[..], m, n].concat();
                        let pc_shape: Vec<usize> = pc.iter().map(|&l| bound.extent(l)).collect();
                        let sa = step_of(al, &pa, a_shape, true)?;
                        let sb = step_of(bl, &pb, b_shape, true)?;
                        let sc = step_of(&pc, cl, &pc_shape, beta_zero)?;
                        let t = cost(&sa) + cost(&sb) + cost(&sc);
                        if best.as_ref().is_none_or(|(bt, _)| t < *bt) {
                            best = Some((t, [sa, sb, sc]));
                        }
                    }
                }
            }
        }
        let Some((_, [pack_a, pack_b, unpack_c])) = best else {
            return Err(Error::Unsupported(format!(
                "GPU contraction {spec:?}: no matricization"
            )));
        };
        Ok(GpuContractionPlan {
            spec: spec.to_string(),
            dtype,
            gemm: GemmShape {
                batch: b_,
                m: m_,
                n: n_,
                k: k_,
            },
            pack_a,
            pack_b,
            unpack_c,
            shapes: [a_shape.to_vec(), b_shape.to_vec(), c_shape],
        })
    }

    /// Elements of each workspace the execution needs (packed A, packed B, packed C).
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// let p = GpuContractionPlan::new("abc,cd->dba", &[4, 5, 6], &[6, 7], ttgt::DType::F32, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert_eq!(p.workspace_elements(), [0, 0, 140]); // M in A's order: A stays, C is transposed
    /// ```
    pub fn workspace_elements(&self) -> [usize; 3] {
        let g = &self.gemm;
        [
            self.pack_a.as_ref().map_or(0, |_| g.batch * g.m * g.k),
            self.pack_b.as_ref().map_or(0, |_| g.batch * g.k * g.n),
            self.unpack_c.as_ref().map_or(0, |_| g.batch * g.m * g.n),
        ]
    }

    /// Predicted seconds of the transposes (TTLG model).
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// let p = GpuContractionPlan::new("abc,cd->dba", &[4, 5, 6], &[6, 7], ttgt::DType::F32, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert!(p.predicted_transpose_seconds() > 0.0);
    /// ```
    pub fn predicted_transpose_seconds(&self) -> f64 {
        [&self.pack_a, &self.pack_b, &self.unpack_c]
            .iter()
            .filter_map(|s| s.as_ref())
            .map(|s| s.plan.predicted_seconds)
            .sum()
    }

    /// One line per step.
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// let p = GpuContractionPlan::new("abc,cd->dba", &[4, 5, 6], &[6, 7], ttgt::DType::F32, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert!(p.describe().contains("transpose C"));
    /// ```
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}: batch {} x gemm m={} n={} k={}",
            self.spec, self.gemm.batch, self.gemm.m, self.gemm.n, self.gemm.k
        );
        for (name, st) in [
            ("A", &self.pack_a),
            ("B", &self.pack_b),
            ("C", &self.unpack_c),
        ] {
            match st {
                Some(p) => {
                    s += &format!("\n  transpose {name} {:?}: {}", p.perm, p.plan.describe())
                }
                None => s += &format!("\n  {name}: in place (no transpose)"),
            }
        }
        s
    }
}

/// The CPU stand-in for the GEMM (emulated runs): packed row-major, batched.
///
/// ```
/// use ttgt::backend::cuda::contract::{cpu_gemm_packed, GemmShape};
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

/// Runs a GPU contraction plan under the CPU emulator (feature `cuda-emu`): emulated TTLG
/// kernels for the transposes, [`cpu_gemm_packed`] for the GEMM. Operands are row-major.
///
/// ```
/// # #[cfg(feature = "cuda-emu")] {
/// use ttgt::backend::cuda::{contract::{execute_emulated, GpuContractionPlan}, ttlg::DeviceProps};
/// let p = GpuContractionPlan::new("ij,kj->ik", &[2, 3], &[2, 3], ttgt::DType::F64, true,
///                                 &DeviceProps::emulator()).unwrap();
/// let mut c = [0.0; 4];
/// execute_emulated(&p, 1.0, &[1.0; 6], &[1.0; 6], 0.0, &mut c).unwrap();
/// assert_eq!(c, [3.0; 4]);
/// # }
/// ```
#[cfg(feature = "cuda-emu")]
pub fn execute_emulated<T: Element>(
    plan: &GpuContractionPlan,
    alpha: T,
    a: &[T],
    b: &[T],
    beta: T,
    c: &mut [T],
) -> Result<()> {
    use super::emu;
    use crate::tensor::{StridedView, StridedViewMut};
    let [wa, wb, wc] = plan.workspace_elements();
    let g = plan.gemm;
    let pack =
        |st: &Option<PackStep>, src: &[T], shape: &[usize], n: usize| -> Result<Option<Vec<T>>> {
            let Some(st) = st else { return Ok(None) };
            let mut buf = vec![T::zero(); n];
            let va = StridedView::from_slice(src, Layout::row_major(shape)?, 0)?;
            let mut vb = StridedViewMut::from_slice(&mut buf, Layout::row_major(&st.shape)?, 0)?;
            emu::transpose(&st.plan, T::one(), &va, T::zero(), &mut vb)?;
            Ok(Some(buf))
        };
    let pa = pack(&plan.pack_a, a, &plan.shapes[0], wa)?;
    let pb = pack(&plan.pack_b, b, &plan.shapes[1], wb)?;
    let (ga, gb) = (pa.as_deref().unwrap_or(a), pb.as_deref().unwrap_or(b));
    match &plan.unpack_c {
        None => cpu_gemm_packed(&g, alpha, ga, gb, beta, c),
        Some(st) => {
            let mut tmp = vec![T::zero(); wc];
            cpu_gemm_packed(&g, alpha, ga, gb, T::zero(), &mut tmp);
            let pc_shape: Vec<usize> = {
                // Source extents of the unpack: inverse of its permutation.
                let mut s = vec![0; st.perm.len()];
                for (i, &p) in st.perm.iter().enumerate() {
                    s[p] = st.shape[i];
                }
                s
            };
            let va = StridedView::from_slice(&tmp, Layout::row_major(&pc_shape)?, 0)?;
            let mut vc = StridedViewMut::from_slice(c, Layout::row_major(&st.shape)?, 0)?;
            emu::transpose(&st.plan, T::one(), &va, beta, &mut vc)?;
        }
    }
    Ok(())
}

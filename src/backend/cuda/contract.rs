//! TTGT on the GPU: a two-operand contraction becomes (optional) TTLG transposes of A and B
//! into packed `batch x M x K` and `batch x K x N` buffers, one strided-batched GEMM into a
//! packed `batch x M x N` result, and (optional) a TTLG transpose of that result into C with
//! beta. Where every operand can be read in place as a strided batch of matrices (each index
//! group fused to one stride, one unit stride per matrix, free indices that do not fuse taken
//! as batch loops), the plan is a single strided-batched GEMM on the operands themselves and
//! moves no data ([`BlasCall`]). Otherwise each operand is packed or left in place: every
//! combination that one strided-batched call can cover is a candidate (e.g. tccg-1: the GEMM
//! runs per batch loop on A and B in place, and only the small result is transposed into C,
//! not the 226 MB A), with the order of the indices inside each group (C's, A's or B's) as
//! TTGT's freedom; the least predicted time wins: the TTLG model's transposes plus the call's
//! roofline ([`BlasCall::predicted_seconds`], which charges thin products for their partly
//! filled tiles, so a large GEMM is not cut into thin ones to save a small transpose).
//! The plan is cudarc-free: the device layer runs it with cuBLAS, the emulator with a CPU
//! stand-in for the GEMM of the same semantics, from the same [`GpuContractionPlan`].

use crate::einsum::{parse, IndexKind, Label};
use crate::error::{Error, Result};
use crate::tensor::{DType, Layout};

use super::gemm_call::{blas_call, fuse};
pub use super::gemm_call::{
    cpu_blas_call, cpu_gemm_packed, BlasCall, GemmShape, GEMM_FLOPS_PER_BYTE,
    GEMM_FLOPS_PER_BYTE_F64,
};
use super::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};

/// One packing or unpacking transpose of a GPU contraction.
///
/// ```
/// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
/// // C's unit-stride index a would be a batch loop of any call reading A in place: the
/// // call writes a packed result, which is transposed into C.
/// let p = GpuContractionPlan::new("adb,cd->cba", &[6, 50, 7], &[3, 50], ttgt::DType::F32, true,
///                                 &DeviceProps::nominal()).unwrap();
/// let c = p.unpack_c.as_ref().unwrap();
/// assert_eq!(c.shape, vec![3, 7, 6]);
/// assert!(p.pack_a.is_none() && p.pack_b.is_none());
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
    /// The GEMM call: [`BlasCall::packed`] of `gemm` for TTGT plans, a call on the operands
    /// in place for direct plans.
    pub blas: BlasCall,
    /// Predicted seconds of the whole plan: the transposes (TTLG model) plus the call's
    /// roofline ([`BlasCall::predicted_seconds`]).
    pub predicted_seconds: f64,
}

/// The axis of `l` among `labels` (callers look up labels the plan put there).
fn position(labels: &[Label], l: Label) -> usize {
    let p = labels.iter().position(|&x| x == l);
    debug_assert!(p.is_some(), "label {l:?} not among {labels:?}");
    p.unwrap_or(0)
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

/// The direct call of a contraction whose operands all read in place, if any: the free
/// indices that do not fuse become batch loops beside the batch indices. Among the subsets
/// of free indices taken as loops, the one with the largest products (fewest batch entries)
/// wins, then the one with fewer loop indices.
fn direct_call(
    bound: &crate::einsum::BoundSpec,
    con: &crate::einsum::Contraction,
    labels: [&[Label]; 3],
) -> Option<BlasCall> {
    let ext = |l: Label| bound.extent(l);
    // Row-major strides of each operand (size-1 labels left out: their stride never moves).
    let strides: [Vec<(Label, usize)>; 3] = labels.map(|ls| {
        let mut v = Vec::new();
        let mut s = 1usize;
        for &l in ls.iter().rev() {
            if ext(l) > 1 {
                v.push((l, s));
            }
            s *= ext(l);
        }
        v
    });
    let group = |k: IndexKind| -> Vec<Label> {
        labels[2]
            .iter()
            .chain(labels[0])
            .copied()
            .filter(|&l| con.kind(l) == Some(k) && ext(l) > 1)
            .fold(Vec::new(), |mut v, l| {
                if !v.contains(&l) {
                    v.push(l);
                }
                v
            })
    };
    let batch = group(IndexKind::Batch);
    let free: Vec<Label> = [group(IndexKind::FreeA), group(IndexKind::FreeB)].concat();
    let ks = group(IndexKind::Contracted);
    if free.len() > 10 {
        return None;
    }
    let k = fuse(&ks, &ext, &strides, 0)?;
    // Ranking: larger products first, then fewer loop indices.
    let mut best: Option<((std::cmp::Reverse<usize>, usize), BlasCall)> = None;
    for mask in 0u32..(1 << free.len()) {
        let loops: Vec<Label> = free
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, &l)| l)
            .chain(batch.iter().copied())
            .collect();
        let rest = |kind: IndexKind| -> Vec<Label> {
            free.iter()
                .enumerate()
                .filter(|&(i, &l)| mask & (1 << i) == 0 && con.kind(l) == Some(kind))
                .map(|(_, &l)| l)
                .collect()
        };
        let (Some(l), Some(m), Some(n)) = (
            fuse(&loops, &ext, &strides, 2),
            fuse(&rest(IndexKind::FreeA), &ext, &strides, 2),
            fuse(&rest(IndexKind::FreeB), &ext, &strides, 2),
        ) else {
            continue;
        };
        let Some(call) = blas_call(l, m, n, k) else {
            continue;
        };
        let key = (std::cmp::Reverse(call.m * call.n), loops.len());
        if best.as_ref().is_none_or(|(k, _)| key < *k) {
            best = Some((key, call));
        }
    }
    best.map(|(_, c)| c)
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
        Self::ranked(spec, a_shape, b_shape, dtype, beta_zero, props, false)?
            .into_iter()
            .next()
            .ok_or_else(|| {
                Error::Unsupported(format!("GPU contraction {spec:?}: no matricization"))
            })
    }

    /// Every distinct plan the planner weighs, the one [`GpuContractionPlan::new`] picks
    /// first (the direct call where there is one), then the others by predicted time
    /// (`predicted_seconds`): what `ttgt bench contract --backend cuda
    /// --all-candidates` times to measure the planner's regret.
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// let c = GpuContractionPlan::candidates("dca,bd->abc", &[4, 5, 6], &[7, 4], ttgt::DType::F32,
    ///                                        true, &DeviceProps::nominal()).unwrap();
    /// assert!(c.len() > 1 && c.iter().any(|p| p.kind() == "packed"));
    /// assert_eq!(c[0].describe(), GpuContractionPlan::new("dca,bd->abc", &[4, 5, 6], &[7, 4],
    ///            ttgt::DType::F32, true, &DeviceProps::nominal()).unwrap().describe());
    /// ```
    pub fn candidates(
        spec: &str,
        a_shape: &[usize],
        b_shape: &[usize],
        dtype: DType,
        beta_zero: bool,
        props: &DeviceProps,
    ) -> Result<Vec<Self>> {
        Self::ranked(spec, a_shape, b_shape, dtype, beta_zero, props, true)
    }

    /// The plans in the planner's order; `all = false` stops at the direct call when there is
    /// one (its transposes need not be planned).
    fn ranked(
        spec: &str,
        a_shape: &[usize],
        b_shape: &[usize],
        dtype: DType,
        beta_zero: bool,
        props: &DeviceProps,
        all: bool,
    ) -> Result<Vec<Self>> {
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
        let gemm = GemmShape {
            batch: b_,
            m: m_,
            n: n_,
            k: k_,
        };
        let plan = |[pack_a, pack_b, unpack_c]: [Option<PackStep>; 3], blas: BlasCall| {
            let moves: f64 = [&pack_a, &pack_b, &unpack_c]
                .iter()
                .filter_map(|s| s.as_ref())
                .map(|s| s.plan.predicted_seconds)
                .sum();
            GpuContractionPlan {
                predicted_seconds: moves + blas.predicted_seconds(dtype, props),
                spec: spec.to_string(),
                dtype,
                gemm,
                pack_a,
                pack_b,
                unpack_c,
                blas,
                shapes: [a_shape.to_vec(), b_shape.to_vec(), c_shape.clone()],
            }
        };
        let mut out = Vec::new();
        if let Some(blas) = direct_call(&bound, &con, [al, bl, cl]) {
            out.push(plan([None, None, None], blas));
            if !all {
                return Ok(out);
            }
        }
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
        // Each operand is either read in place or packed in the matricization's order; a
        // combination is feasible when one strided-batched call covers the effective layouts
        // (`direct_call`; all three packed is TTGT's packed call). Least predicted transpose
        // time wins, then larger products (fewer batch entries), then fewer packed operands;
        // remaining ties go to the earlier (C-ordered) candidate.
        type Key = (f64, std::cmp::Reverse<usize>, u32);
        let mut calls: std::collections::HashMap<[Vec<Label>; 3], Option<BlasCall>> =
            std::collections::HashMap::new();
        let mut found_plans: Vec<(Key, [Option<PackStep>; 3], BlasCall)> = Vec::new();
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
                        // (Mask 0, all three in place, has no call: the direct check
                        // above failed.)
                        for mask in 1u32..8 {
                            let packed = [mask & 1 != 0, mask & 2 != 0, mask & 4 != 0];
                            let call = if mask == 7 {
                                BlasCall::packed(&gemm)
                            } else {
                                let eff = [
                                    if packed[0] { pa.clone() } else { al.to_vec() },
                                    if packed[1] { pb.clone() } else { bl.to_vec() },
                                    if packed[2] { pc.clone() } else { cl.to_vec() },
                                ];
                                let found = match calls.get(&eff) {
                                    Some(c) => *c,
                                    None => {
                                        let c =
                                            direct_call(&bound, &con, [&eff[0], &eff[1], &eff[2]]);
                                        calls.insert(eff, c);
                                        c
                                    }
                                };
                                let Some(c) = found else { continue };
                                c
                            };
                            let steps = [
                                if packed[0] { sa.clone() } else { None },
                                if packed[1] { sb.clone() } else { None },
                                if packed[2] { sc.clone() } else { None },
                            ];
                            let t: f64 = steps.iter().map(cost).sum::<f64>()
                                + call.predicted_seconds(dtype, props);
                            let moved = steps.iter().filter(|s| s.is_some()).count() as u32;
                            let key = (t, std::cmp::Reverse(call.m * call.n), moved);
                            found_plans.push((key, steps, call));
                        }
                    }
                }
            }
        }
        // Stable: equal keys keep the enumeration order (C's orders first).
        found_plans.sort_by(|(a, _, _), (b, _, _)| {
            a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
        });
        let perm = |s: &Option<PackStep>| s.as_ref().map(|s| s.perm.clone());
        for (_, steps, call) in found_plans {
            let p = plan(steps, call);
            let same = |q: &GpuContractionPlan| {
                q.blas == p.blas
                    && perm(&q.pack_a) == perm(&p.pack_a)
                    && perm(&q.pack_b) == perm(&p.pack_b)
                    && perm(&q.unpack_c) == perm(&p.unpack_c)
            };
            if !out.iter().any(same) {
                out.push(p);
            }
            if !all && !out.is_empty() {
                break;
            }
        }
        Ok(out)
    }

    /// The plan's kind: `direct` (one call on the operands in place), `packed` (TTGT: A and
    /// B packed, the call on packed operands) or `partial` (some operands in place).
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// let p = GpuContractionPlan::new("bda,dc->abc", &[6, 5, 7], &[5, 4], ttgt::DType::F64, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert_eq!(p.kind(), "direct");
    /// ```
    pub fn kind(&self) -> &'static str {
        if self.is_direct() {
            "direct"
        } else if self.blas == BlasCall::packed(&self.gemm) {
            "packed"
        } else {
            "partial"
        }
    }

    /// Whether the plan runs one GEMM call on the operands in place (no workspace, no
    /// transposes).
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// // For each b, C[:, b, :] = A[b]^T B: one strided-batched call, no transposes.
    /// let p = GpuContractionPlan::new("bda,dc->abc", &[6, 5, 7], &[5, 4], ttgt::DType::F64, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert!(p.is_direct() && p.blas.batch == 6);
    /// ```
    pub fn is_direct(&self) -> bool {
        self.pack_a.is_none()
            && self.pack_b.is_none()
            && self.unpack_c.is_none()
            && self.blas != BlasCall::packed(&self.gemm)
    }

    /// Elements of each workspace the execution needs (packed A, packed B, packed C).
    ///
    /// ```
    /// use ttgt::backend::cuda::{contract::GpuContractionPlan, ttlg::DeviceProps};
    /// let p = GpuContractionPlan::new("dca,bd->abc", &[4, 5, 6], &[7, 4], ttgt::DType::F32, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert_eq!(p.workspace_elements(), [120, 0, 0]); // A transposed, B and C in place
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
    /// let p = GpuContractionPlan::new("dca,bd->abc", &[4, 5, 6], &[7, 4], ttgt::DType::F32, true,
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
    /// let p = GpuContractionPlan::new("dca,bd->abc", &[4, 5, 6], &[7, 4], ttgt::DType::F32, true,
    ///                                 &DeviceProps::nominal()).unwrap();
    /// assert!(p.describe().contains("transpose A") && p.describe().contains("C: in place"));
    /// ```
    pub fn describe(&self) -> String {
        if self.is_direct() {
            return format!(
                "{}: direct {} on A, B and C in place (no transpose)",
                self.spec,
                self.blas.describe()
            );
        }
        let mut s = format!(
            "{}: batch {} x gemm m={} n={} k={}",
            self.spec, self.gemm.batch, self.gemm.m, self.gemm.n, self.gemm.k
        );
        if self.blas != BlasCall::packed(&self.gemm) {
            // Some operands in place: the call on the mix of packed and original layouts.
            s += &format!("\n  {}", self.blas.describe());
        }
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

/// Contraction plans measured tuning times ([`shortlist`]): the planner's best few.
pub const MEASURE_CONTRACTIONS: usize = 4;

/// Which of the ranked candidates ([`GpuContractionPlan::candidates`]) to time: the first
/// `max`, then the best-ranked of each kind (direct, partial, packed) not among them.
///
/// ```
/// use ttgt::backend::cuda::{contract::{shortlist, GpuContractionPlan}, ttlg::DeviceProps};
/// let c = GpuContractionPlan::candidates("dca,bd->abc", &[4, 5, 6], &[7, 4], ttgt::DType::F32,
///                                        true, &DeviceProps::nominal()).unwrap();
/// let s = shortlist(&c, 1);
/// assert_eq!(s[0], 0);
/// assert!(s.iter().any(|&i| c[i].kind() == "packed"));
/// ```
pub fn shortlist(plans: &[GpuContractionPlan], max: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..plans.len().min(max)).collect();
    for kind in ["direct", "partial", "packed"] {
        if !out.iter().any(|&i| plans[i].kind() == kind) {
            if let Some(i) = plans.iter().position(|p| p.kind() == kind) {
                out.push(i);
            }
        }
    }
    out
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
pub fn execute_emulated<T: crate::tensor::Element>(
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
        None => cpu_blas_call(&plan.blas, alpha, ga, gb, beta, c),
        Some(st) => {
            let mut tmp = vec![T::zero(); wc];
            cpu_blas_call(&plan.blas, alpha, ga, gb, T::zero(), &mut tmp);
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

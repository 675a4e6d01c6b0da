//! Planning of one- and two-operand contractions as Transpose-Transpose-GEMM-Transpose with
//! copies avoided wherever the operands' strides already form the matrices: diagonals become
//! strided views, one-sided sums are reduced first, index groups are ordered so that as few
//! operands as possible need packing, and the GEMM writes straight into C when C's strides
//! allow it.

use crate::einsum::{parse, BoundSpec, Contraction, IndexKind, Label};
use crate::error::{Error, Result};
use crate::tensor::{DType, Layout};

/// How one input operand is brought into matrix form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperandPrep {
    /// Operand as the spec reads it (`...` axes stretched).
    pub layout: Layout,
    /// Diagonal grouping of axes (`groups[axis]` = merged axis), when a label repeats.
    pub diagonal: Option<Vec<usize>>,
    /// Labels after merging diagonals.
    pub labels: Vec<Label>,
    /// Labels summed over in this operand only (reduced before the GEMM).
    pub summed: Vec<Label>,
    /// Labels kept after the sum; the reduced operand is row-major over them.
    pub kept: Vec<Label>,
    /// Layout of the operand after diagonals and sums.
    pub prepared: Layout,
    /// Whether it is packed (copied) into a contiguous matricized buffer.
    pub packed: bool,
}

/// A planned contraction `C = alpha * A·B + beta * C` (or `C = alpha * op(A) + beta * C`).
/// Planning never touches data; the plan can be executed any number of times on operands of
/// the layouts it was made for ([`ContractionPlan::execute`]).
///
/// ```
/// use ttgt::{ContractionPlan, DType, Layout};
/// let a = Layout::row_major(&[8, 9, 10]).unwrap();
/// let b = Layout::row_major(&[10, 11]).unwrap();
/// let c = Layout::row_major(&[8, 9, 11]).unwrap();
/// let plan = ContractionPlan::new("ijk,kl->ijl", &[a, b], &c, DType::F64).unwrap();
/// assert_eq!(plan.copies(), 0); // already a GEMM: no packing, GEMM writes into C
/// assert_eq!(plan.gemm_shape(), (1, 72, 11, 10));
/// ```
#[derive(Clone, Debug)]
pub struct ContractionPlan {
    pub(crate) bound: BoundSpec,
    pub(crate) contraction: Contraction,
    pub(crate) dtype: DType,
    pub(crate) inputs: Vec<Layout>,
    pub(crate) preps: Vec<OperandPrep>,
    pub(crate) c: Layout,
    pub(crate) batch: Vec<Label>,
    pub(crate) m: Vec<Label>,
    pub(crate) n: Vec<Label>,
    pub(crate) k: Vec<Label>,
    pub(crate) c_direct: bool,
}

/// Fuses a group of axes into one matrix dimension `(extent, stride)` when their strides
/// nest (`s[i] == s[i+1] * d[i+1]`, size-1 axes ignored).
pub(crate) fn fuse(dims: &[usize], strides: &[isize]) -> Option<(usize, isize)> {
    let axes: Vec<(usize, isize)> = dims
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    let len: usize = axes.iter().map(|&(d, _)| d).product();
    if len == 0 {
        return Some((0, 1));
    }
    for w in axes.windows(2) {
        if w[0].1 != w[1].1 * w[1].0 as isize {
            return None;
        }
    }
    Some((len, axes.last().map_or(1, |&(_, s)| s)))
}

/// Extents and strides of `labels` in a tensor whose axes carry `axis_labels` and `layout`.
pub(crate) fn group(
    labels: &[Label],
    axis_labels: &[Label],
    layout: &Layout,
) -> (Vec<usize>, Vec<isize>) {
    labels
        .iter()
        .map(|l| {
            let i = axis_labels.iter().position(|x| x == l).unwrap_or(0);
            (layout.dims()[i], layout.strides()[i])
        })
        .unzip()
}

/// The layout over `axis_labels` of a row-major buffer whose axes, outermost first, are
/// `order` (labels of `order` missing from `axis_labels` have extent 1 there).
pub(crate) fn packed_layout(
    order: &[Label],
    axis_labels: &[Label],
    extent: impl Fn(Label) -> usize,
) -> Result<Layout> {
    let mut stride = vec![0isize; order.len()];
    let mut s = 1isize;
    for (i, &l) in order.iter().enumerate().rev() {
        stride[i] = s;
        s *= extent(l).max(1) as isize;
    }
    let dims: Vec<usize> = axis_labels.iter().map(|&l| extent(l)).collect();
    let strides: Vec<isize> = axis_labels
        .iter()
        .map(|l| order.iter().position(|x| x == l).map_or(0, |i| stride[i]))
        .collect();
    Layout::new(dims, strides)
}

fn in_order_of(labels: &[Label], order: &[Label]) -> Vec<Label> {
    order
        .iter()
        .copied()
        .filter(|l| labels.contains(l))
        .collect()
}

/// `labels` sorted by decreasing stride in the given tensor (the order in which they fuse).
fn by_stride(labels: &[Label], axis_labels: &[Label], layout: &Layout) -> Vec<Label> {
    let (_, strides) = group(labels, axis_labels, layout);
    let mut pairs: Vec<(Label, isize)> = labels.iter().copied().zip(strides).collect();
    pairs.sort_by_key(|&(_, s)| std::cmp::Reverse(s.unsigned_abs()));
    pairs.into_iter().map(|(l, _)| l).collect()
}

fn prepare(bound: &BoundSpec, operand: usize, layout: Layout) -> Result<OperandPrep> {
    let axis_labels = &bound.inputs()[operand];
    let mut labels: Vec<Label> = Vec::new();
    let mut groups = Vec::with_capacity(axis_labels.len());
    for l in axis_labels {
        let g = labels.iter().position(|x| x == l).unwrap_or_else(|| {
            labels.push(*l);
            labels.len() - 1
        });
        groups.push(g);
    }
    let diagonal = (labels.len() != axis_labels.len()).then_some(groups);
    let others: Vec<&Vec<Label>> = bound
        .inputs()
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != operand)
        .map(|(_, ls)| ls)
        .collect();
    let needed = |l: &Label| bound.output().contains(l) || others.iter().any(|ls| ls.contains(l));
    let summed: Vec<Label> = labels.iter().copied().filter(|l| !needed(l)).collect();
    let kept: Vec<Label> = labels.iter().copied().filter(|l| needed(l)).collect();
    let prepared = if !summed.is_empty() {
        let dims: Vec<usize> = kept.iter().map(|&l| bound.extent(l)).collect();
        Layout::row_major(&dims)?
    } else if let Some(g) = &diagonal {
        layout.diagonal(g)?
    } else {
        layout.clone()
    };
    Ok(OperandPrep {
        layout,
        diagonal,
        labels,
        summed,
        kept,
        prepared,
        packed: false,
    })
}

impl ContractionPlan {
    /// Plans `spec` for operands of the given layouts (as passed, before `...` broadcasting)
    /// and an output of layout `c`.
    ///
    /// Errors: everything [`parse`](crate::einsum::parse) and
    /// [`bind`](crate::einsum::Spec::bind) report, an output whose extents differ from the
    /// spec's, an output layout that may address one element twice, and specs with more than
    /// two operands (use [`einsum`](crate::einsum()) for those).
    pub fn new(spec: &str, inputs: &[Layout], c: &Layout, dtype: DType) -> Result<Self> {
        let parsed = parse(spec)?;
        let shapes: Vec<&[usize]> = inputs.iter().map(|l| l.dims()).collect();
        let bound = parsed.bind(&shapes)?;
        let contraction = bound.classify()?;
        let expected = bound.output_shape();
        if c.dims() != expected.as_slice() {
            return Err(Error::OutputShape {
                spec: spec.to_string(),
                expected,
                given: c.dims().to_vec(),
            });
        }
        if c.may_self_overlap() {
            return Err(Error::Overlap {
                what: "itself (two indices address one element)".into(),
            });
        }
        let mut preps: Vec<OperandPrep> = inputs
            .iter()
            .enumerate()
            .map(|(k, l)| prepare(&bound, k, bound.effective_layout(k, l)))
            .collect::<Result<_>>()?;
        let out = bound.output().to_vec();
        let kind_in_c = |kind: IndexKind| in_order_of(&contraction.labels_of(kind), &out);
        let batch = kind_in_c(IndexKind::Batch);
        let mut plan = ContractionPlan {
            dtype,
            inputs: inputs.to_vec(),
            c: c.clone(),
            batch,
            m: kind_in_c(IndexKind::FreeA),
            n: kind_in_c(IndexKind::FreeB),
            k: Vec::new(),
            c_direct: false,
            preps: Vec::new(),
            bound: bound.clone(),
            contraction,
        };
        if preps.len() == 2 {
            plan.choose_orders(&mut preps);
        }
        plan.preps = preps;
        Ok(plan)
    }

    /// Picks the order of the M, N and K groups (C's order or an operand's stride order) that
    /// packs the fewest elements, and whether the GEMM can write into C directly.
    fn choose_orders(&mut self, preps: &mut [OperandPrep]) {
        let (pa, pb) = (&preps[0], &preps[1]);
        let out = self.bound.output().to_vec();
        let k_all = in_order_of(&self.contraction.labels_of(IndexKind::Contracted), &pa.kept);
        let m_opts = [self.m.clone(), by_stride(&self.m, &pa.kept, &pa.prepared)];
        let n_opts = [self.n.clone(), by_stride(&self.n, &pb.kept, &pb.prepared)];
        let k_opts = [
            by_stride(&k_all, &pa.kept, &pa.prepared),
            by_stride(&k_all, &pb.kept, &pb.prepared),
        ];
        let fuses = |labels: &[Label], axis_labels: &[Label], layout: &Layout| {
            let (d, s) = group(labels, axis_labels, layout);
            fuse(&d, &s).is_some()
        };
        let size = |l: &Layout| l.len();
        let mut best: Option<(usize, [usize; 3], bool, bool, bool)> = None;
        for (mi, m) in m_opts.iter().enumerate() {
            for (ni, n) in n_opts.iter().enumerate() {
                for (ki, k) in k_opts.iter().enumerate() {
                    let a_ok = fuses(m, &pa.kept, &pa.prepared) && fuses(k, &pa.kept, &pa.prepared);
                    let b_ok = fuses(k, &pb.kept, &pb.prepared) && fuses(n, &pb.kept, &pb.prepared);
                    let c_ok = fuses(m, &out, &self.c) && fuses(n, &out, &self.c);
                    let moved = (!a_ok as usize) * size(&pa.prepared)
                        + (!b_ok as usize) * size(&pb.prepared)
                        + (!c_ok as usize) * 2 * size(&self.c);
                    if best.as_ref().is_none_or(|b| moved < b.0) {
                        best = Some((moved, [mi, ni, ki], a_ok, b_ok, c_ok));
                    }
                }
            }
        }
        if let Some((_, [mi, ni, ki], a_ok, b_ok, c_ok)) = best {
            self.m = m_opts[mi].clone();
            self.n = n_opts[ni].clone();
            self.k = k_opts[ki].clone();
            preps[0].packed = !a_ok;
            preps[1].packed = !b_ok;
            self.c_direct = c_ok;
        }
    }

    /// The bound spec.
    pub fn bound(&self) -> &BoundSpec {
        &self.bound
    }

    /// The classified contraction.
    pub fn contraction(&self) -> &Contraction {
        &self.contraction
    }

    /// Element type the plan was made for.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// `(batch, m, n, k)` of the GEMM (or of the copy, for one operand).
    pub fn gemm_shape(&self) -> (usize, usize, usize, usize) {
        self.contraction.gemm_shape()
    }

    /// Number of operands (input and output) copied into or out of a workspace.
    pub fn copies(&self) -> usize {
        let packed = self.preps.iter().filter(|p| p.packed).count();
        let reduced = self.preps.iter().filter(|p| !p.summed.is_empty()).count();
        packed + reduced + (self.preps.len() == 2 && !self.c_direct) as usize
    }

    /// Workspace the plan allocates, in bytes.
    pub fn workspace_bytes(&self) -> usize {
        let mut elems = 0usize;
        for p in &self.preps {
            if !p.summed.is_empty() {
                elems += p.prepared.len();
            }
            if p.packed {
                elems += p.prepared.len();
            }
        }
        if self.preps.len() == 2 && !self.c_direct {
            elems += self.c.len();
        }
        elems * self.dtype.size_bytes()
    }

    /// Floating-point operations (TCCG convention, see [`Contraction::flops`]).
    pub fn flops(&self) -> f64 {
        self.contraction.flops(self.dtype)
    }

    /// A printable description of the steps.
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout};
    /// let a = Layout::row_major(&[4, 5, 6, 7]).unwrap();
    /// let b = Layout::row_major(&[7, 5, 8, 9]).unwrap();
    /// let c = Layout::row_major(&[4, 6, 8, 9]).unwrap();
    /// let p = ContractionPlan::new("abcd,dbef->acef", &[a, b], &c, DType::F64).unwrap();
    /// assert!(p.explain().contains("GEMM"));
    /// ```
    pub fn explain(&self) -> String {
        let names = |ls: &[Label]| {
            ls.iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("")
        };
        let mut s = format!("plan for {} ({})\n", self.bound.spec(), self.dtype);
        for (k, p) in self.preps.iter().enumerate() {
            let op = ["A", "B"][k.min(1)];
            if p.diagonal.is_some() {
                s += &format!(
                    "  {op}: diagonal view over repeated indices -> {}\n",
                    names(&p.labels)
                );
            }
            if !p.summed.is_empty() {
                s += &format!(
                    "  {op}: sum over {} -> {} ({} elements)\n",
                    names(&p.summed),
                    names(&p.kept),
                    p.prepared.len()
                );
            }
        }
        if self.preps.len() == 1 {
            s += &format!(
                "  C = alpha * permute(A) + beta * C over {}\n",
                names(self.bound.output())
            );
            return s;
        }
        let (l, m, n, k) = self.gemm_shape();
        let (pa, pb) = (&self.preps[0], &self.preps[1]);
        let step = |packed: bool, what: &str, order: String| {
            if packed {
                format!("  pack {what} -> [{order}] (copy)\n")
            } else {
                format!("  {what} used in place as [{order}]\n")
            }
        };
        s += &step(
            pa.packed,
            "A",
            format!(
                "{}|{}|{}",
                names(&self.batch),
                names(&self.m),
                names(&self.k)
            ),
        );
        s += &step(
            pb.packed,
            "B",
            format!(
                "{}|{}|{}",
                names(&self.batch),
                names(&self.k),
                names(&self.n)
            ),
        );
        s += &format!(
            "  GEMM m={m} n={n} k={k}, {l} batch(es), {:.3} GFLOP\n",
            self.flops() / 1e9
        );
        if self.c_direct {
            s += "  GEMM writes C in place (alpha, beta applied by the GEMM)\n";
        } else {
            s += &format!(
                "  C = alpha * permute(T[{}|{}|{}]) + beta * C (copy)\n",
                names(&self.batch),
                names(&self.m),
                names(&self.n)
            );
        }
        s += &format!("  workspace {} bytes\n", self.workspace_bytes());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(spec: &str, a: Layout, b: Layout, c: Layout) -> ContractionPlan {
        ContractionPlan::new(spec, &[a, b], &c, DType::F64).unwrap()
    }

    #[test]
    fn fusion_rule() {
        assert_eq!(fuse(&[3, 4], &[4, 1]), Some((12, 1)));
        assert_eq!(fuse(&[3, 1, 4], &[4, 99, 1]), Some((12, 1)));
        assert_eq!(fuse(&[3, 4], &[1, 3]), None);
        assert_eq!(fuse(&[], &[]), Some((1, 1)));
        assert_eq!(fuse(&[0, 5], &[5, 1]), Some((0, 1)));
    }

    #[test]
    fn gemm_shaped_needs_no_copy() {
        let r = |d: &[usize]| Layout::row_major(d).unwrap();
        assert_eq!(
            plan("ij,jk->ik", r(&[3, 4]), r(&[4, 5]), r(&[3, 5])).copies(),
            0
        );
        // transposed operands are still GEMMs through their strides
        assert_eq!(
            plan("ji,kj->ik", r(&[4, 3]), r(&[5, 4]), r(&[3, 5])).copies(),
            0
        );
        assert_eq!(
            plan("ij,jk->ki", r(&[3, 4]), r(&[4, 5]), r(&[5, 3])).copies(),
            0
        );
        let p = plan(
            "abcd,dbef->acef",
            r(&[2, 3, 4, 5]),
            r(&[5, 3, 6, 7]),
            r(&[2, 4, 6, 7]),
        );
        assert!(p.copies() >= 1);
        assert!(p.workspace_bytes() > 0);
    }

    #[test]
    fn wrong_output_shape() {
        let r = |d: &[usize]| Layout::row_major(d).unwrap();
        let e = ContractionPlan::new(
            "ij,jk->ik",
            &[r(&[3, 4]), r(&[4, 5])],
            &r(&[5, 3]),
            DType::F32,
        )
        .unwrap_err();
        assert!(matches!(e, Error::OutputShape { .. }));
    }
}

//! Classification of the indices of a one- or two-operand [`BoundSpec`]: the typed view the
//! planner works from (M, N, K, batch, one-operand sums, diagonals).

use super::bind::{BoundSpec, Label};
use crate::error::{Error, Result};

/// The role of an index in `C = A·B` (or in `C = op(A)` for one operand).
///
/// ```
/// use ttgt::einsum::{parse, IndexKind, Label};
/// let c = parse("bij,bjk->bik").unwrap().bind(&[&[2, 3, 4], &[2, 4, 5]]).unwrap().classify().unwrap();
/// assert_eq!(c.kind(Label::Letter('b')), Some(IndexKind::Batch));
/// assert_eq!(c.kind(Label::Letter('j')), Some(IndexKind::Contracted));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexKind {
    /// In A and C, not in B (free in A; a row index of the GEMM).
    FreeA,
    /// In B and C, not in A (free in B; a column index of the GEMM).
    FreeB,
    /// In A and B, not in C (summed by the GEMM).
    Contracted,
    /// In A, B and C (a batch of independent GEMMs).
    Batch,
    /// Only in A: summed over before the GEMM.
    SumA,
    /// Only in B: summed over before the GEMM.
    SumB,
}

impl IndexKind {
    /// Conventional one-letter name: M, N, K, batch (`L`), and `a`/`b` for one-sided sums.
    ///
    /// ```
    /// assert_eq!(ttgt::einsum::IndexKind::Contracted.short(), "K");
    /// ```
    pub fn short(self) -> &'static str {
        match self {
            IndexKind::FreeA => "M",
            IndexKind::FreeB => "N",
            IndexKind::Contracted => "K",
            IndexKind::Batch => "L",
            IndexKind::SumA => "a",
            IndexKind::SumB => "b",
        }
    }
}

/// One index of a classified contraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexInfo {
    /// The index.
    pub label: Label,
    /// Its extent.
    pub extent: usize,
    /// Its role.
    pub kind: IndexKind,
    /// How often it appears in A (more than once: a diagonal or trace of A).
    pub count_a: usize,
    /// How often it appears in B (0 for one-operand specs).
    pub count_b: usize,
}

impl IndexInfo {
    /// Whether the index is repeated within one operand (a diagonal, or a trace when it is
    /// also absent from the output).
    pub fn is_repeated(&self) -> bool {
        self.count_a > 1 || self.count_b > 1
    }
}

/// A classified one- or two-operand contraction.
///
/// ```
/// use ttgt::einsum::{parse, IndexKind};
/// let c = parse("abcd,dbef->acef").unwrap()
///     .bind(&[&[2, 3, 4, 5], &[5, 3, 6, 7]]).unwrap()
///     .classify().unwrap();
/// assert_eq!(c.size_of(IndexKind::FreeA), 2 * 4);
/// assert_eq!(c.size_of(IndexKind::FreeB), 6 * 7);
/// assert_eq!(c.size_of(IndexKind::Contracted), 3 * 5);
/// assert_eq!(c.gemm_shape(), (1, 8, 42, 15));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contraction {
    bound: BoundSpec,
    indices: Vec<IndexInfo>,
}

impl BoundSpec {
    /// Classifies the indices of a one- or two-operand spec.
    pub fn classify(&self) -> Result<Contraction> {
        let n = self.inputs().len();
        if !(1..=2).contains(&n) {
            return Err(Error::Unsupported(format!(
                "index classification is defined for one or two operands, spec {:?} has {n}",
                self.spec().text()
            )));
        }
        let count = |labels: &[Label], l: Label| labels.iter().filter(|&&x| x == l).count();
        let a = &self.inputs()[0];
        let empty = Vec::new();
        let b = self.inputs().get(1).unwrap_or(&empty);
        let indices = self
            .extents()
            .iter()
            .map(|(&label, &extent)| {
                let (ca, cb) = (count(a, label), count(b, label));
                let in_c = self.output().contains(&label);
                let kind = match (ca > 0, cb > 0, in_c) {
                    (true, true, true) => IndexKind::Batch,
                    (true, true, false) => IndexKind::Contracted,
                    (true, false, true) => IndexKind::FreeA,
                    (false, true, true) => IndexKind::FreeB,
                    (true, false, false) => IndexKind::SumA,
                    // Binding only creates labels that some input has.
                    _ => IndexKind::SumB,
                };
                IndexInfo {
                    label,
                    extent,
                    kind,
                    count_a: ca,
                    count_b: cb,
                }
            })
            .collect();
        Ok(Contraction {
            bound: self.clone(),
            indices,
        })
    }
}

impl Contraction {
    /// The bound spec.
    pub fn bound(&self) -> &BoundSpec {
        &self.bound
    }

    /// Every index with its class, in label order.
    pub fn indices(&self) -> &[IndexInfo] {
        &self.indices
    }

    /// The class of one index.
    pub fn kind(&self, label: Label) -> Option<IndexKind> {
        self.indices
            .iter()
            .find(|i| i.label == label)
            .map(|i| i.kind)
    }

    /// The labels of one class, in label order.
    pub fn labels_of(&self, kind: IndexKind) -> Vec<Label> {
        self.indices
            .iter()
            .filter(|i| i.kind == kind)
            .map(|i| i.label)
            .collect()
    }

    /// Product of the extents of one class (1 when the class is empty).
    pub fn size_of(&self, kind: IndexKind) -> usize {
        self.indices
            .iter()
            .filter(|i| i.kind == kind)
            .map(|i| i.extent)
            .product()
    }

    /// `(batch, m, n, k)`: the batched-GEMM shape this contraction matricizes to.
    pub fn gemm_shape(&self) -> (usize, usize, usize, usize) {
        (
            self.size_of(IndexKind::Batch),
            self.size_of(IndexKind::FreeA),
            self.size_of(IndexKind::FreeB),
            self.size_of(IndexKind::Contracted),
        )
    }

    /// Whether some index is repeated within one operand.
    pub fn has_diagonal(&self) -> bool {
        self.indices.iter().any(IndexInfo::is_repeated)
    }

    /// Floating-point operations of the GEMM part, counted as the TCCG benchmark does
    /// (2 × product of the extents of all indices, times 4 for complex types).
    pub fn flops(&self, dtype: crate::DType) -> f64 {
        let (l, m, n, k) = self.gemm_shape();
        dtype.flops_per_fma() * l as f64 * m as f64 * n as f64 * k as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::einsum::parse;

    fn classify(spec: &str, shapes: &[&[usize]]) -> Contraction {
        parse(spec)
            .unwrap()
            .bind(shapes)
            .unwrap()
            .classify()
            .unwrap()
    }

    #[test]
    fn all_kinds() {
        let c = classify("bijx,bjky->bik", &[&[2, 3, 4, 5], &[2, 4, 6, 7]]);
        let kinds: Vec<_> = c
            .indices()
            .iter()
            .map(|i| (i.label.to_string(), i.kind))
            .collect();
        use IndexKind::*;
        assert_eq!(
            kinds,
            vec![
                ("b".into(), Batch),
                ("i".into(), FreeA),
                ("j".into(), Contracted),
                ("k".into(), FreeB),
                ("x".into(), SumA),
                ("y".into(), SumB)
            ]
        );
    }

    #[test]
    fn diagonals_and_unary() {
        let c = classify("ii->i", &[&[3, 3]]);
        assert_eq!(c.indices()[0].kind, IndexKind::FreeA);
        assert!(c.has_diagonal());
        let c = classify("ii", &[&[3, 3]]);
        assert_eq!(c.indices()[0].kind, IndexKind::SumA);
        let c = classify("i,j->ij", &[&[3], &[4]]);
        assert_eq!(c.gemm_shape(), (1, 3, 4, 1));
    }

    #[test]
    fn three_operands_are_not_classified() {
        let b = parse("i,i,i").unwrap().bind(&[&[2], &[2], &[2]]).unwrap();
        assert!(matches!(b.classify(), Err(Error::Unsupported(_))));
    }
}

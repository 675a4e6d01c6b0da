//! Per-operand preparation before the GEMM: diagonals (repeated labels) become strided
//! views, labels summed in one operand only are reduced first.

use crate::einsum::{BoundSpec, Label};
use crate::error::Result;
use crate::tensor::Layout;

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
}

pub(crate) fn prepare(bound: &BoundSpec, operand: usize, layout: Layout) -> Result<OperandPrep> {
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
    })
}

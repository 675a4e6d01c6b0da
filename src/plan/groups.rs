//! Index groups in strided layouts: the extents and strides of a group of labels, whether a
//! group fuses into one matrix dimension, and the layout of a row-major packed buffer.

use crate::einsum::Label;
use crate::error::{Error, Result};
use crate::tensor::Layout;

/// Fuses a group of axes, `(extent, stride)` pairs outermost first, into one matrix
/// dimension `(extent, stride)` when their strides nest (`s[i] == s[i+1] * d[i+1]`, size-1
/// axes ignored); a zero extent gives `(0, 1)`.
pub(crate) fn fuse_axes(axes: impl Iterator<Item = (usize, isize)>) -> Option<(usize, isize)> {
    let mut len = 1usize;
    let mut last: Option<isize> = None;
    let mut nested = true;
    for (d, s) in axes.filter(|&(d, _)| d != 1) {
        len = len.saturating_mul(d);
        if let Some(outer) = last {
            nested &= outer == s * d as isize;
        }
        last = Some(s);
    }
    if len == 0 {
        return Some((0, 1));
    }
    nested.then_some((len, last.unwrap_or(1)))
}

/// `(extent, stride)` of each of `labels` that a tensor whose axes carry `axis_labels` has,
/// in `labels`' order (labels it lacks are skipped).
pub(crate) fn axes_of<'a>(
    labels: &'a [Label],
    axis_labels: &'a [Label],
    layout: &'a Layout,
) -> impl Iterator<Item = (usize, isize)> + 'a {
    labels.iter().filter_map(move |l| {
        let i = axis_labels.iter().position(|x| x == l)?;
        Some((layout.dims()[i], layout.strides()[i]))
    })
}

/// The axis of `label` among `labels`; its absence is an [`Error::Internal`] (the callers
/// look up labels their plan put there).
pub(crate) fn axis_of(label: Label, labels: &[Label]) -> Result<usize> {
    labels
        .iter()
        .position(|&x| x == label)
        .ok_or_else(|| Error::Internal(format!("label {label:?} is not among the axes {labels:?}")))
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

pub(crate) fn in_order_of(labels: &[Label], order: &[Label]) -> Vec<Label> {
    order
        .iter()
        .copied()
        .filter(|l| labels.contains(l))
        .collect()
}

/// `labels` sorted by decreasing stride in the given tensor (the order in which they fuse;
/// a label the tensor lacks has stride 0, ties keep `labels`' order).
pub(crate) fn by_stride(labels: &[Label], axis_labels: &[Label], layout: &Layout) -> Vec<Label> {
    let mut sorted = labels.to_vec();
    sorted.sort_by_key(|&l| std::cmp::Reverse(stride_of(l, axis_labels, layout).unsigned_abs()));
    sorted
}

/// Stride of `label` in a tensor with axes `labels` (0 when it has no such axis: a loop over
/// a label one operand lacks leaves that operand in place, as broadcasting does).
pub(crate) fn stride_of(label: Label, labels: &[Label], l: &Layout) -> isize {
    labels
        .iter()
        .position(|&x| x == label)
        .map_or(0, |i| l.strides()[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fuse(dims: &[usize], strides: &[isize]) -> Option<(usize, isize)> {
        fuse_axes(dims.iter().copied().zip(strides.iter().copied()))
    }

    #[test]
    fn fusion_rule() {
        assert_eq!(fuse(&[3, 4], &[4, 1]), Some((12, 1)));
        assert_eq!(fuse(&[3, 1, 4], &[4, 99, 1]), Some((12, 1)));
        assert_eq!(fuse(&[3, 4], &[1, 3]), None);
        assert_eq!(fuse(&[], &[]), Some((1, 1)));
        assert_eq!(fuse(&[0, 5], &[5, 1]), Some((0, 1)));
        // a zero extent anywhere empties the group, nested or not
        assert_eq!(fuse(&[4, 0, 3], &[1, 7, 2]), Some((0, 1)));
        // size-1 axes are skipped between nested ones; stride-0 axes nest only at the end
        assert_eq!(fuse(&[2, 1, 3, 5], &[15, -4, 5, 1]), Some((30, 1)));
        assert_eq!(fuse(&[2, 3], &[0, 0]), Some((6, 0)));
        assert_eq!(fuse(&[2, 3], &[0, 1]), None);
        assert_eq!(fuse(&[6, 1], &[-1, 8]), Some((6, -1)));
    }

    /// The labels a tensor has, in the order asked for, with their extents and strides.
    #[test]
    fn axes_of_a_group() {
        let l = |c| Label::Letter(c);
        let layout = Layout::new(vec![2, 3, 5], vec![15, 5, 1]).unwrap();
        let labels = [l('a'), l('b'), l('c')];
        let got: Vec<_> = axes_of(&[l('c'), l('x'), l('a')], &labels, &layout).collect();
        assert_eq!(got, vec![(5, 1), (2, 15)]);
        assert_eq!(
            fuse_axes(axes_of(&[l('b'), l('c')], &labels, &layout)),
            Some((15, 1))
        );
        assert_eq!(
            fuse_axes(axes_of(&[l('c'), l('b')], &labels, &layout)),
            None
        );
    }
}

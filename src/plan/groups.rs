//! Index groups in strided layouts: the extents and strides of a group of labels, whether a
//! group fuses into one matrix dimension, and the layout of a row-major packed buffer.

use crate::einsum::Label;
use crate::error::Result;
use crate::tensor::Layout;

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

pub(crate) fn in_order_of(labels: &[Label], order: &[Label]) -> Vec<Label> {
    order
        .iter()
        .copied()
        .filter(|l| labels.contains(l))
        .collect()
}

/// `labels` sorted by decreasing stride in the given tensor (the order in which they fuse).
pub(crate) fn by_stride(labels: &[Label], axis_labels: &[Label], layout: &Layout) -> Vec<Label> {
    let (_, strides) = group(labels, axis_labels, layout);
    let mut pairs: Vec<(Label, isize)> = labels.iter().copied().zip(strides).collect();
    pairs.sort_by_key(|&(_, s)| std::cmp::Reverse(s.unsigned_abs()));
    pairs.into_iter().map(|(l, _)| l).collect()
}

/// Stride of `label` in a tensor with axes `labels` (0 when it has no such axis).
pub(crate) fn stride_of(label: Label, labels: &[Label], l: &Layout) -> isize {
    labels
        .iter()
        .position(|&x| x == label)
        .map_or(0, |i| l.strides()[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_rule() {
        assert_eq!(fuse(&[3, 4], &[4, 1]), Some((12, 1)));
        assert_eq!(fuse(&[3, 1, 4], &[4, 99, 1]), Some((12, 1)));
        assert_eq!(fuse(&[3, 4], &[1, 3]), None);
        assert_eq!(fuse(&[], &[]), Some((1, 1)));
        assert_eq!(fuse(&[0, 5], &[5, 1]), Some((0, 1)));
    }
}

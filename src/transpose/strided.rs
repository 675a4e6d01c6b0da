//! Element-wise kernels over two strided views of equal extents: scaled copy
//! (`B = alpha*A + beta*B`), accumulation into views with zero strides (reductions) and
//! scaling. They walk the index space with the output's smallest stride innermost; this is
//! the general, always-correct engine. Transposition plans with blocking and SIMD build on
//! the same contract.

use crate::error::{Error, Result};
use crate::tensor::{Element, Layout, StridedView, StridedViewMut};

/// Axis order for the walk: outermost first, innermost (smallest destination stride) last.
/// Size-1 axes are dropped.
pub(super) fn walk_order(dst: &Layout) -> Vec<usize> {
    let mut axes: Vec<usize> = (0..dst.ndim()).filter(|&i| dst.dims()[i] != 1).collect();
    axes.sort_by_key(|&i| std::cmp::Reverse(dst.strides()[i].unsigned_abs()));
    axes
}

/// Calls `row(off_src, off_dst)` for the start of every innermost row of the walk over `dims`,
/// and returns the innermost extent and strides `(n, src_stride, dst_stride)` first.
pub(super) fn for_each_row(
    dims: &[usize],
    src: &[isize],
    dst: &[isize],
    order: &[usize],
    mut row: impl FnMut(isize, isize),
) -> (usize, isize, isize) {
    if dims.contains(&0) {
        return (0, 0, 0);
    }
    let Some((&inner, outer)) = order.split_last() else {
        row(0, 0);
        return (1, 0, 0);
    };
    let mut idx = vec![0usize; outer.len()];
    let (mut os, mut od) = (0isize, 0isize);
    loop {
        row(os, od);
        // Odometer over the outer axes, innermost of them fastest.
        let mut k = outer.len();
        loop {
            if k == 0 {
                return (dims[inner], src[inner], dst[inner]);
            }
            k -= 1;
            let ax = outer[k];
            idx[k] += 1;
            os += src[ax];
            od += dst[ax];
            if idx[k] < dims[ax] {
                break;
            }
            os -= src[ax] * dims[ax] as isize;
            od -= dst[ax] * dims[ax] as isize;
            idx[k] = 0;
        }
    }
}

pub(super) fn inner_of(
    dims: &[usize],
    src: &[isize],
    dst: &[isize],
    order: &[usize],
) -> (usize, isize, isize) {
    match order.last() {
        Some(&i) => (dims[i], src[i], dst[i]),
        None => (1, 0, 0),
    }
}

pub(super) fn check_dims(src: &Layout, dst: &Layout) -> Result<()> {
    if src.dims() != dst.dims() {
        return Err(Error::Layout(format!(
            "extents differ: source {:?}, destination {:?}",
            src.dims(),
            dst.dims()
        )));
    }
    Ok(())
}

/// `dst = alpha * src + beta * dst`, element by element. With `beta == 0`, `dst` is only
/// written (NaNs in it do not propagate).
///
/// ```
/// use ttgt::tensor::{StridedView, StridedViewMut};
/// let a = ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]);
/// let mut b = ndarray::Array2::<f64>::from_elem((2, 2), f64::NAN);
/// let at = a.t();
/// ttgt::transpose::scale_copy(2.0, &StridedView::of(&at), 0.0, &mut StridedViewMut::of(&mut b).unwrap()).unwrap();
/// assert_eq!(b, ndarray::arr2(&[[2.0, 6.0], [4.0, 8.0]]));
/// ```
pub fn scale_copy<T: Element>(
    alpha: T,
    src: &StridedView<'_, T>,
    beta: T,
    dst: &mut StridedViewMut<'_, T>,
) -> Result<()> {
    check_dims(src.layout(), dst.layout())?;
    let dl = dst.layout().clone();
    let order = walk_order(&dl);
    let (dims, ss, ds) = (dl.dims(), src.layout().strides(), dl.strides());
    let (n, is, id) = inner_of(dims, ss, ds, &order);
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    let copy = alpha.is_exact_one() && beta.is_exact_zero();
    for_each_row(dims, ss, ds, &order, |os, od| {
        // SAFETY: `for_each_row` yields offsets of indices inside `dims`; both views have
        // those extents, so every `os + j*is` and `od + j*id` (j < n) addresses an element
        // of its view. `dst` is exclusive and never self-overlapping, and no input view
        // overlaps it (the public entry points check spans).
        unsafe {
            let (s, d) = (sp.offset(os), dp.offset(od));
            if copy {
                for j in 0..n as isize {
                    *d.offset(j * id) = *s.offset(j * is);
                }
            } else if beta.is_exact_zero() {
                for j in 0..n as isize {
                    *d.offset(j * id) = alpha * *s.offset(j * is);
                }
            } else {
                for j in 0..n as isize {
                    let q = d.offset(j * id);
                    *q = alpha * *s.offset(j * is) + beta * *q;
                }
            }
        }
    });
    Ok(())
}

/// `dst[idx] += alpha * src[idx]` for every index; `dst` may have zero strides, which sums
/// over those axes (a reduction). `dst` must be a view whose distinct elements are only
/// aliased through its zero strides.
pub(crate) fn accumulate<T: Element>(
    alpha: T,
    src: &StridedView<'_, T>,
    dst_ptr: *mut T,
    dst_layout: &Layout,
) -> Result<()> {
    check_dims(src.layout(), dst_layout)?;
    // Innermost: the smallest non-zero destination stride, so zero-stride (reduced) axes sit
    // outside and each row is a contiguous-ish update.
    let mut order: Vec<usize> = (0..dst_layout.ndim())
        .filter(|&i| dst_layout.dims()[i] != 1)
        .collect();
    order.sort_by_key(|&i| {
        let s = dst_layout.strides()[i].unsigned_abs();
        std::cmp::Reverse(if s == 0 { usize::MAX } else { s })
    });
    let (dims, ss, ds) = (
        dst_layout.dims(),
        src.layout().strides(),
        dst_layout.strides(),
    );
    let (n, is, id) = inner_of(dims, ss, ds, &order);
    let sp = src.as_ptr();
    for_each_row(dims, ss, ds, &order, |os, od| {
        // SAFETY: offsets of in-bounds indices of both layouts (see `scale_copy`); the caller
        // guarantees `dst_ptr`/`dst_layout` describe memory it owns exclusively.
        unsafe {
            let (s, d) = (sp.offset(os), dst_ptr.offset(od));
            for j in 0..n as isize {
                *d.offset(j * id) += alpha * *s.offset(j * is);
            }
        }
    });
    Ok(())
}

/// `dst = beta * dst`; `beta == 0` writes zeros without reading.
///
/// ```
/// use ttgt::tensor::StridedViewMut;
/// let mut b = ndarray::arr1(&[f32::NAN, 1.0]);
/// ttgt::transpose::scale(0.0, &mut StridedViewMut::of(&mut b).unwrap());
/// assert_eq!(b, ndarray::arr1(&[0.0, 0.0]));
/// ```
pub fn scale<T: Element>(beta: T, dst: &mut StridedViewMut<'_, T>) {
    if beta.is_exact_one() {
        return;
    }
    let dl = dst.layout().clone();
    let order = walk_order(&dl);
    let (dims, ds) = (dl.dims(), dl.strides());
    let (n, _, id) = inner_of(dims, ds, ds, &order);
    let dp = dst.as_mut_ptr();
    let zero = beta.is_exact_zero();
    for_each_row(dims, ds, ds, &order, |_, od| {
        // SAFETY: offsets of in-bounds indices of `dst`, which is borrowed exclusively.
        unsafe {
            let d = dp.offset(od);
            for j in 0..n as isize {
                let q = d.offset(j * id);
                *q = if zero { T::zero() } else { beta * *q };
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{s, Array3};

    #[test]
    fn permuted_negative_strided_copy() {
        let a = Array3::from_shape_fn((3, 4, 5), |(i, j, k)| (100 * i + 10 * j + k) as f64);
        let src = a.slice(s![..;-1, .., 1..;2]);
        let srcp = src.view().permuted_axes([2, 0, 1]);
        let mut b = Array3::<f64>::from_elem((2, 3, 4), 1.0);
        scale_copy(
            2.0,
            &StridedView::of(&srcp),
            0.5,
            &mut StridedViewMut::of(&mut b).unwrap(),
        )
        .unwrap();
        for ((k, i, j), v) in b.indexed_iter() {
            assert_eq!(*v, 2.0 * srcp[[k, i, j]] + 0.5);
        }
    }

    #[test]
    fn reduction_through_zero_strides() {
        let a = ndarray::Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f32);
        let mut out = [0f32; 3];
        let dl = Layout::new(vec![3, 4], vec![1, 0]).unwrap();
        accumulate(1.0, &StridedView::of(&a), out.as_mut_ptr(), &dl).unwrap();
        assert_eq!(out, [6.0, 22.0, 38.0]);
    }

    #[test]
    fn rank_zero_and_empty() {
        let a = ndarray::arr0(3.0f64);
        let mut b = ndarray::arr0(1.0f64);
        scale_copy(
            1.0,
            &StridedView::of(&a),
            1.0,
            &mut StridedViewMut::of(&mut b).unwrap(),
        )
        .unwrap();
        assert_eq!(b[()], 4.0);
        let e = ndarray::Array2::<f64>::zeros((0, 3));
        let mut f = ndarray::Array2::<f64>::zeros((0, 3));
        scale_copy(
            1.0,
            &StridedView::of(&e),
            0.0,
            &mut StridedViewMut::of(&mut f).unwrap(),
        )
        .unwrap();
    }
}

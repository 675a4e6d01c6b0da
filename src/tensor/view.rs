//! Borrowed strided views over memory: a base pointer, a [`Layout`] and a lifetime. They are
//! built from ndarray arrays (any strides, negative and zero included) or from slices with a
//! bounds check, and can only be narrowed into views that address a subset of their elements
//! (diagonals, size-1 axes stretched to stride 0), so every offset a view produces is in
//! bounds of the memory it borrows.

use std::marker::PhantomData;

use ndarray::{ArrayBase, Data, DataMut, Dimension};

use super::layout::{check_permutation, Layout};
use crate::error::{Error, Result};

/// A read-only strided view.
///
/// ```
/// use ttgt::tensor::StridedView;
/// let a = ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]);
/// let v = StridedView::of(&a);
/// assert_eq!(v.get(&[1, 0]), 3.0);
/// assert_eq!(v.diagonal(&[0, 0]).unwrap().get(&[1]), 4.0);
/// ```
#[derive(Clone, Debug)]
pub struct StridedView<'a, T> {
    ptr: *const T,
    layout: Layout,
    _borrow: PhantomData<&'a T>,
}

/// A mutable strided view. It never has two indices for one element: constructors reject
/// layouts that may self-overlap.
///
/// ```
/// use ttgt::tensor::StridedViewMut;
/// let mut a = ndarray::Array2::<f32>::zeros((2, 3));
/// let mut v = StridedViewMut::of(&mut a).unwrap();
/// v.set(&[1, 2], 5.0);
/// assert_eq!(a[[1, 2]], 5.0);
/// ```
#[derive(Debug)]
pub struct StridedViewMut<'a, T> {
    ptr: *mut T,
    layout: Layout,
    _borrow: PhantomData<&'a mut T>,
}

// SAFETY: a view is a borrow of `T`s: shareable across threads exactly when `&T` is.
unsafe impl<T: Sync> Send for StridedView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for StridedView<'_, T> {}
// SAFETY: a mutable view is an exclusive borrow of `T`s, sendable when `&mut T` is.
unsafe impl<T: Send> Send for StridedViewMut<'_, T> {}

fn offset_of(layout: &Layout, idx: &[usize]) -> isize {
    assert_eq!(idx.len(), layout.ndim(), "index rank");
    idx.iter()
        .zip(layout.dims())
        .zip(layout.strides())
        .map(|((&i, &d), &s)| {
            assert!(i < d, "index {i} out of bounds for extent {d}");
            i as isize * s
        })
        .sum()
}

fn slice_fits(len: usize, layout: &Layout, offset: usize) -> Result<()> {
    if layout.is_empty() {
        return Ok(());
    }
    let (lo, hi) = layout.offset_range();
    // Checked: an offset or a span near the address range must not wrap into a "fit".
    let ok = isize::try_from(offset).ok().is_some_and(|o| {
        o.checked_add(lo).is_some_and(|x| x >= 0)
            && o.checked_add(hi)
                .and_then(|x| usize::try_from(x).ok())
                .is_some_and(|x| x < len)
    });
    if ok {
        Ok(())
    } else {
        Err(Error::Layout(format!(
            "layout {:?} / {:?} at offset {offset} reaches outside a slice of {len} elements",
            layout.dims(),
            layout.strides()
        )))
    }
}

impl<'a, T: Copy> StridedView<'a, T> {
    /// A view of an ndarray array or view.
    pub fn of<S: Data<Elem = T>, D: Dimension>(a: &'a ArrayBase<S, D>) -> Self {
        StridedView {
            ptr: a.as_ptr(),
            layout: Layout::of(a),
            _borrow: PhantomData,
        }
    }

    /// A view of `data` whose element 0 is `data[offset]`; fails when some index would reach
    /// outside `data`.
    ///
    /// ```
    /// use ttgt::{tensor::StridedView, Layout};
    /// let data = [0.0f64; 6];
    /// let l = Layout::new(vec![3, 2], vec![-2, 1]).unwrap();
    /// assert!(StridedView::from_slice(&data, l.clone(), 4).is_ok());
    /// assert!(StridedView::from_slice(&data, l, 0).is_err());
    /// ```
    pub fn from_slice(data: &'a [T], layout: Layout, offset: usize) -> Result<Self> {
        slice_fits(data.len(), &layout, offset)?;
        Ok(StridedView {
            // In bounds (or one past the end for an empty layout): checked above.
            ptr: data.as_ptr().wrapping_add(offset),
            layout,
            _borrow: PhantomData,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Pointer to the element at index 0.
    pub fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// The element at `idx`. Panics when `idx` is out of bounds (like slice indexing).
    pub fn get(&self, idx: &[usize]) -> T {
        let off = offset_of(&self.layout, idx);
        // SAFETY: `idx` is in bounds, so `off` addresses an element of the borrowed view.
        unsafe { *self.ptr.offset(off) }
    }

    /// The view with its axes reordered: axis `i` of the result is axis `perm[i]` of `self`.
    pub fn permuted(&self, perm: &[usize]) -> Result<Self> {
        check_permutation(perm, self.layout.ndim())?;
        Ok(StridedView {
            ptr: self.ptr,
            layout: self.layout.permuted(perm)?,
            _borrow: PhantomData,
        })
    }

    /// Merges axes into diagonals: `groups[i]` names the output axis of input axis `i`; axes
    /// with the same group must have the same extent and become one axis whose stride is the
    /// sum of theirs. Output axes are numbered `0..` in order of first appearance.
    ///
    /// ```
    /// use ttgt::tensor::StridedView;
    /// let a = ndarray::Array3::<f64>::from_shape_fn((2, 3, 2), |(i, j, k)| (100 * i + 10 * j + k) as f64);
    /// let d = StridedView::of(&a).diagonal(&[0, 1, 0]).unwrap(); // a[i, j, i]
    /// assert_eq!(d.layout().dims(), &[2, 3]);
    /// assert_eq!(d.get(&[1, 2]), 121.0);
    /// ```
    pub fn diagonal(&self, groups: &[usize]) -> Result<Self> {
        let layout = self.layout.diagonal(groups)?;
        Ok(StridedView {
            ptr: self.ptr,
            layout,
            _borrow: PhantomData,
        })
    }

    /// Stretches size-1 axes to extent `dims[i]` with stride 0 (numpy broadcasting); other
    /// axes must keep their extent.
    ///
    /// ```
    /// use ttgt::tensor::StridedView;
    /// let a = ndarray::arr2(&[[1.0f32, 2.0]]);
    /// let v = StridedView::of(&a).broadcast(&[3, 2]).unwrap();
    /// assert_eq!(v.get(&[2, 1]), 2.0);
    /// ```
    pub fn broadcast(&self, dims: &[usize]) -> Result<Self> {
        let l = &self.layout;
        if dims.len() != l.ndim() {
            return Err(Error::Layout(format!(
                "cannot broadcast rank {} to rank {}",
                l.ndim(),
                dims.len()
            )));
        }
        if l.dims() == dims {
            return Ok(self.clone());
        }
        let mut strides = l.strides().to_vec();
        for (i, (&from, &to)) in l.dims().iter().zip(dims).enumerate() {
            if from != to {
                if from != 1 {
                    return Err(Error::Layout(format!(
                        "cannot broadcast extent {from} to {to} (axis {i})"
                    )));
                }
                strides[i] = 0;
            }
        }
        let mut out = self.clone();
        out.layout = Layout::new(dims.to_vec(), strides)?;
        // A stretched axis never moves the pointer; the others are unchanged, so the element
        // set is a subset of the original one. An axis stretched to 0 empties the view.
        Ok(out)
    }
}

impl<'a, T: Copy> StridedViewMut<'a, T> {
    /// A mutable view of an ndarray array or view.
    pub fn of<S: DataMut<Elem = T>, D: Dimension>(a: &'a mut ArrayBase<S, D>) -> Result<Self> {
        let layout = Layout::of(a);
        if layout.may_self_overlap() {
            return Err(Error::Overlap {
                what: "itself (two indices address one element)".into(),
            });
        }
        Ok(StridedViewMut {
            ptr: a.as_mut_ptr(),
            layout,
            _borrow: PhantomData,
        })
    }

    /// A mutable view of `data` whose element 0 is `data[offset]`.
    ///
    /// ```
    /// use ttgt::{tensor::StridedViewMut, Layout};
    /// let mut data = vec![0.0f32; 6];
    /// let mut v = StridedViewMut::from_slice(&mut data, Layout::col_major(&[2, 3]).unwrap(), 0).unwrap();
    /// v.set(&[1, 2], 1.0);
    /// assert_eq!(data[5], 1.0);
    /// ```
    pub fn from_slice(data: &'a mut [T], layout: Layout, offset: usize) -> Result<Self> {
        slice_fits(data.len(), &layout, offset)?;
        if layout.may_self_overlap() {
            return Err(Error::Overlap {
                what: "itself (two indices address one element)".into(),
            });
        }
        Ok(StridedViewMut {
            ptr: data.as_mut_ptr().wrapping_add(offset),
            layout,
            _borrow: PhantomData,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Pointer to the element at index 0.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }

    /// Pointer to the element at index 0, for reading.
    pub fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// A read-only view of the same elements.
    pub fn as_view(&self) -> StridedView<'_, T> {
        StridedView {
            ptr: self.ptr,
            layout: self.layout.clone(),
            _borrow: PhantomData,
        }
    }

    /// A mutable view of the same elements with a shorter lifetime.
    pub fn reborrow(&mut self) -> StridedViewMut<'_, T> {
        StridedViewMut {
            ptr: self.ptr,
            layout: self.layout.clone(),
            _borrow: PhantomData,
        }
    }

    /// The view with its axes reordered (see [`StridedView::permuted`]).
    pub fn permuted(self, perm: &[usize]) -> Result<Self> {
        let layout = self.layout.permuted(perm)?;
        Ok(StridedViewMut { layout, ..self })
    }

    /// The element at `idx`. Panics when `idx` is out of bounds.
    pub fn get(&self, idx: &[usize]) -> T {
        let off = offset_of(&self.layout, idx);
        // SAFETY: `idx` is in bounds, so `off` addresses an element of the borrowed view.
        unsafe { *self.ptr.offset(off) }
    }

    /// Writes the element at `idx`. Panics when `idx` is out of bounds.
    pub fn set(&mut self, idx: &[usize], value: T) {
        let off = offset_of(&self.layout, idx);
        // SAFETY: `idx` is in bounds and the view borrows its elements exclusively.
        unsafe { *self.ptr.offset(off) = value }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_strides_and_diagonal() {
        let a = ndarray::Array2::from_shape_fn((3, 3), |(i, j)| (10 * i + j) as f64);
        let r = a.slice(ndarray::s![..;-1, ..]);
        let v = StridedView::of(&r);
        assert_eq!(v.get(&[0, 1]), 21.0);
        // anti-diagonal of `a` is the diagonal of `r`
        let d = v.diagonal(&[0, 0]).unwrap();
        assert_eq!(
            (0..3).map(|i| d.get(&[i])).collect::<Vec<_>>(),
            vec![20.0, 11.0, 2.0]
        );
    }

    #[test]
    fn mutable_views_refuse_self_overlap() {
        let mut data = vec![0f32; 4];
        let l = Layout::new(vec![2, 2], vec![1, 1]).unwrap();
        assert!(matches!(
            StridedViewMut::from_slice(&mut data, l, 0),
            Err(Error::Overlap { .. })
        ));
    }

    #[test]
    fn broadcast_rules() {
        let a = ndarray::Array2::<f64>::zeros((1, 3));
        let v = StridedView::of(&a);
        assert!(v.broadcast(&[4, 3]).is_ok());
        assert!(v.broadcast(&[4, 2]).is_err());
        assert!(v.broadcast(&[0, 3]).unwrap().layout().is_empty());
    }
}

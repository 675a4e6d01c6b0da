//! [`Layout`]: extents and element strides, the only description of memory that planning code
//! sees.

use ndarray::{ArrayBase, Dimension, RawData};
use smallvec::SmallVec;

use crate::error::{Error, Result};

/// Extents and strides (in elements, possibly negative or zero) of a strided tensor.
///
/// ```
/// use ttgt::Layout;
/// let l = Layout::row_major(&[2, 3, 4]).unwrap();
/// assert_eq!(l.strides(), &[12, 4, 1]);
/// assert_eq!(l.len(), 24);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    dims: SmallVec<[usize; INLINE_RANK]>,
    strides: SmallVec<[isize; INLINE_RANK]>,
}

/// Ranks up to which a layout keeps its extents and strides inline, without a heap
/// allocation (a cached plan's execution makes and copies several layouts per call).
const INLINE_RANK: usize = 8;

impl Layout {
    /// A layout from extents and strides. Fails when the lengths differ or when the number of
    /// elements or the largest offset does not fit in `isize`.
    ///
    /// ```
    /// use ttgt::Layout;
    /// assert!(Layout::new(vec![3, 2], vec![1, -3]).is_ok());
    /// assert!(Layout::new(vec![3], vec![1, 1]).is_err());
    /// ```
    pub fn new(dims: Vec<usize>, strides: Vec<isize>) -> Result<Self> {
        if dims.len() != strides.len() {
            return Err(Error::Layout(format!(
                "{} extents but {} strides",
                dims.len(),
                strides.len()
            )));
        }
        let l = Layout {
            dims: SmallVec::from_vec(dims),
            strides: SmallVec::from_vec(strides),
        };
        l.checked_len()?;
        l.checked_offset_range()?;
        Ok(l)
    }

    /// A C-order (row-major, last index fastest) layout.
    ///
    /// ```
    /// assert_eq!(ttgt::Layout::row_major(&[5, 7]).unwrap().strides(), &[7, 1]);
    /// ```
    pub fn row_major(dims: &[usize]) -> Result<Self> {
        let mut strides = vec![0isize; dims.len()];
        let mut s: usize = 1;
        for i in (0..dims.len()).rev() {
            strides[i] = isize::try_from(s).map_err(|_| overflow(dims))?;
            s = s
                .checked_mul(dims[i].max(1))
                .ok_or_else(|| overflow(dims))?;
        }
        Layout::new(dims.to_vec(), strides)
    }

    /// A Fortran-order (column-major, first index fastest) layout.
    ///
    /// ```
    /// assert_eq!(ttgt::Layout::col_major(&[5, 7]).unwrap().strides(), &[1, 5]);
    /// ```
    pub fn col_major(dims: &[usize]) -> Result<Self> {
        let mut strides = vec![0isize; dims.len()];
        let mut s: usize = 1;
        for i in 0..dims.len() {
            strides[i] = isize::try_from(s).map_err(|_| overflow(dims))?;
            s = s
                .checked_mul(dims[i].max(1))
                .ok_or_else(|| overflow(dims))?;
        }
        Layout::new(dims.to_vec(), strides)
    }

    /// The layout of any ndarray array or view.
    ///
    /// ```
    /// use ndarray::{s, Array2};
    /// let a = Array2::<f64>::zeros((4, 6));
    /// let v = a.slice(s![..;2, ..;-3]);
    /// let l = ttgt::Layout::of(&v);
    /// assert_eq!(l.dims(), &[2, 2]);
    /// assert_eq!(l.strides(), &[12, -3]);
    /// ```
    pub fn of<S: RawData, D: Dimension>(a: &ArrayBase<S, D>) -> Self {
        Layout {
            dims: SmallVec::from_slice(a.shape()),
            strides: SmallVec::from_slice(a.strides()),
        }
    }

    /// Extents.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Rank (number of dimensions).
    ///
    /// ```
    /// assert_eq!(ttgt::Layout::row_major(&[]).unwrap().ndim(), 0);
    /// ```
    pub fn ndim(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements (product of extents; 1 for rank 0).
    pub fn len(&self) -> usize {
        // `new` checked that the product fits.
        self.dims.iter().product()
    }

    /// Whether some extent is zero, so that the tensor holds no element.
    ///
    /// ```
    /// assert!(ttgt::Layout::row_major(&[3, 0]).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.dims.contains(&0)
    }

    fn checked_len(&self) -> Result<usize> {
        self.dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| overflow(&self.dims))
    }

    fn checked_offset_range(&self) -> Result<(isize, isize)> {
        if self.is_empty() {
            return Ok((0, 0));
        }
        let (mut lo, mut hi) = (0isize, 0isize);
        for (&d, &s) in self.dims.iter().zip(&self.strides) {
            let ext = isize::try_from(d - 1)
                .ok()
                .and_then(|e| e.checked_mul(s))
                .ok_or_else(|| overflow(&self.dims))?;
            if ext < 0 {
                lo = lo.checked_add(ext).ok_or_else(|| overflow(&self.dims))?;
            } else {
                hi = hi.checked_add(ext).ok_or_else(|| overflow(&self.dims))?;
            }
        }
        Ok((lo, hi))
    }

    /// Smallest and largest element offset reached from the base element, `(0, 0)` for an
    /// empty tensor.
    ///
    /// ```
    /// let l = ttgt::Layout::new(vec![3, 4], vec![-4, 1]).unwrap();
    /// assert_eq!(l.offset_range(), (-8, 3));
    /// ```
    pub fn offset_range(&self) -> (isize, isize) {
        // `new` checked that this cannot overflow.
        self.checked_offset_range().unwrap_or((0, 0))
    }

    /// Whether two different indices might address the same element. Exact for layouts whose
    /// dimensions nest (each stride larger than the span of all smaller ones), conservative
    /// (answers `true`) otherwise. Zero strides on extents above one always overlap.
    ///
    /// ```
    /// use ttgt::Layout;
    /// assert!(!Layout::row_major(&[3, 4]).unwrap().may_self_overlap());
    /// assert!(Layout::new(vec![3, 4], vec![0, 1]).unwrap().may_self_overlap());
    /// assert!(Layout::new(vec![3, 4], vec![2, 1]).unwrap().may_self_overlap());
    /// ```
    pub fn may_self_overlap(&self) -> bool {
        if self.is_empty() {
            return false;
        }
        let mut axes: SmallVec<[(usize, usize); INLINE_RANK]> = self
            .dims
            .iter()
            .zip(&self.strides)
            .filter(|(&d, _)| d > 1)
            .map(|(&d, &s)| (d, s.unsigned_abs()))
            .collect();
        axes.sort_unstable_by_key(|&(_, s)| s);
        let mut span: usize = 0; // largest offset reachable with the axes seen so far
        for (d, s) in axes {
            if s == 0 || s <= span {
                return true;
            }
            span += (d - 1) * s;
        }
        false
    }

    /// Merges axes into diagonals: `groups[i]` names the output axis of input axis `i`
    /// (numbered `0..n` in order of first appearance); merged axes must have equal extents
    /// and get the sum of their strides.
    ///
    /// ```
    /// let l = ttgt::Layout::row_major(&[3, 4, 3]).unwrap().diagonal(&[0, 1, 0]).unwrap();
    /// assert_eq!((l.dims(), l.strides()), (&[3usize, 4][..], &[13isize, 3][..]));
    /// ```
    pub fn diagonal(&self, groups: &[usize]) -> Result<Layout> {
        let layout = self;
        if groups.len() != layout.ndim() {
            return Err(Error::Layout("diagonal groups must name every axis".into()));
        }
        let n = groups.iter().map(|&g| g + 1).max().unwrap_or(0);
        let mut dims: Vec<Option<usize>> = vec![None; n];
        let mut strides = vec![0isize; n];
        for ((&g, &d), &s) in groups.iter().zip(layout.dims()).zip(layout.strides()) {
            match dims[g] {
                None => dims[g] = Some(d),
                Some(e) if e == d => {}
                Some(e) => {
                    return Err(Error::Layout(format!(
                        "diagonal of axes with extents {e} and {d}"
                    )))
                }
            }
            strides[g] = strides[g]
                .checked_add(s)
                .ok_or_else(|| Error::SizeOverflow {
                    what: "the stride of a diagonal".into(),
                })?;
        }
        let dims: Option<Vec<usize>> = dims.into_iter().collect();
        let dims =
            dims.ok_or_else(|| Error::Layout("diagonal groups must be numbered 0..n".into()))?;
        // Every diagonal index (i, i, ...) is an index of the original view, so the offsets stay
        // inside the original span and `Layout::new` cannot overflow.
        Layout::new(dims, strides)
    }

    /// The layout with its axes reordered: axis `i` of the result is axis `perm[i]` of `self`.
    ///
    /// ```
    /// let l = ttgt::Layout::row_major(&[2, 3]).unwrap().permuted(&[1, 0]).unwrap();
    /// assert_eq!((l.dims(), l.strides()), (&[3usize, 2][..], &[1isize, 3][..]));
    /// ```
    pub fn permuted(&self, perm: &[usize]) -> Result<Layout> {
        check_permutation(perm, self.ndim())?;
        Ok(Layout {
            dims: perm.iter().map(|&p| self.dims[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
        })
    }
}

/// Checks that `perm` is a permutation of `0..rank`.
///
/// ```
/// assert!(ttgt::tensor::check_permutation(&[2, 0, 1], 3).is_ok());
/// assert!(ttgt::tensor::check_permutation(&[0, 0, 1], 3).is_err());
/// ```
pub fn check_permutation(perm: &[usize], rank: usize) -> Result<()> {
    let bad = || Error::InvalidPermutation {
        perm: perm.to_vec(),
        rank,
    };
    if perm.len() != rank {
        return Err(bad());
    }
    let mut seen = vec![false; rank];
    for &p in perm {
        if p >= rank || seen[p] {
            return Err(bad());
        }
        seen[p] = true;
    }
    Ok(())
}

/// Byte address range `[lo, hi)` covered by a tensor with base pointer `ptr`, or `None` when
/// it holds no element.
pub(crate) fn byte_range<T>(ptr: *const T, layout: &Layout) -> Option<(usize, usize)> {
    if layout.is_empty() {
        return None;
    }
    let (lo, hi) = layout.offset_range();
    let size = std::mem::size_of::<T>() as isize;
    let base = ptr as isize;
    // Offsets stay inside one allocation (ndarray's invariant), so these cannot overflow.
    let lo_b = base.wrapping_add(lo.wrapping_mul(size)) as usize;
    let hi_b = base.wrapping_add((hi + 1).wrapping_mul(size)) as usize;
    Some((lo_b, hi_b))
}

/// Whether the memory spans of two tensors intersect (conservative: interleaved but disjoint
/// views count as overlapping, as numpy's `may_share_memory` does).
pub(crate) fn spans_overlap<T, U>(a: *const T, la: &Layout, b: *const U, lb: &Layout) -> bool {
    match (byte_range(a, la), byte_range(b, lb)) {
        (Some((a0, a1)), Some((b0, b1))) => a0 < b1 && b0 < a1,
        _ => false,
    }
}

fn overflow(dims: &[usize]) -> Error {
    Error::SizeOverflow {
        what: format!("a tensor of extents {dims:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_an_error() {
        assert!(matches!(
            Layout::row_major(&[1 << 40, 1 << 40]),
            Err(Error::SizeOverflow { .. })
        ));
        assert!(Layout::new(vec![2, 2], vec![isize::MAX, 1]).is_err());
    }

    #[test]
    fn zero_size_is_fine() {
        let l = Layout::row_major(&[0, 1 << 62]).unwrap();
        assert!(l.is_empty());
        assert_eq!(l.offset_range(), (0, 0));
        assert!(!l.may_self_overlap());
    }

    #[test]
    fn overlap_of_spans() {
        let l = Layout::row_major(&[4]).unwrap();
        let x = [0f64; 8];
        assert!(spans_overlap(x.as_ptr(), &l, x[3..].as_ptr(), &l));
        assert!(!spans_overlap(x.as_ptr(), &l, x[4..].as_ptr(), &l));
    }
}

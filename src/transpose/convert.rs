//! Element-type conversion between two strided views of equal extents: the widening of
//! half-precision operands to their `f32` images and the rounding of an `f32` result back
//! into a half-precision output. The walk is [`scale_copy`](super::scale_copy)'s (the
//! destination's smallest stride innermost); runs contiguous on both sides convert as slices
//! (F16C where the CPU has it), others through a small buffer. A conversion runs on the
//! calling thread: cut over two threads it ran slower (`docs/TUNING.md`).

use super::strided::{check_dims, for_each_row, inner_of, walk_order};
use crate::error::Result;
use crate::tensor::{Element, StridedView, StridedViewMut};

/// Elements gathered per slice conversion on runs that are strided on either side.
const RUN: usize = 64;

/// How an element reaches `f32` and back: `S -> f32 -> D`, with one of the two an `f32`.
trait Via<S, D> {
    fn run(src: &[S], dst: &mut [D]);
}

struct Widen;
impl<S: Element> Via<S, f32> for Widen {
    fn run(src: &[S], dst: &mut [f32]) {
        S::to_f32_slice(src, dst)
    }
}

struct Narrow;
impl<D: Element> Via<f32, D> for Narrow {
    fn run(src: &[f32], dst: &mut [D]) {
        D::from_f32_slice(src, dst)
    }
}

/// `dst = f32(src)`, element by element (real part of complex values).
///
/// ```
/// use ttgt::tensor::{f16, StridedView, StridedViewMut};
/// let a = ndarray::arr2(&[[f16::from_f32(1.0), f16::from_f32(2.0)],
///                         [f16::from_f32(3.0), f16::from_f32(4.5)]]);
/// let mut b = ndarray::Array2::<f32>::zeros((2, 2));
/// let at = a.t();
/// ttgt::transpose::widen_to_f32(&StridedView::of(&at), &mut StridedViewMut::of(&mut b).unwrap()).unwrap();
/// assert_eq!(b, ndarray::arr2(&[[1.0, 3.0], [2.0, 4.5]]));
/// ```
pub fn widen_to_f32<S: Element>(
    src: &StridedView<'_, S>,
    dst: &mut StridedViewMut<'_, f32>,
) -> Result<()> {
    convert::<S, f32, Widen>(src, dst)
}

/// `dst = round(src)` to `D`, element by element (round to nearest, ties to even).
///
/// ```
/// use ttgt::tensor::{bf16, StridedView, StridedViewMut};
/// let a = ndarray::arr1(&[1.0f32, 3.0e38, 1.0 + 2f32.powi(-9)]);
/// let mut b = ndarray::Array1::<bf16>::from_elem(3, bf16::ZERO);
/// ttgt::transpose::narrow_from_f32(&StridedView::of(&a), &mut StridedViewMut::of(&mut b).unwrap()).unwrap();
/// assert_eq!(b.mapv(|x| x.to_f32()).to_vec(), vec![1.0, bf16::from_f32(3.0e38).to_f32(), 1.0]);
/// ```
pub fn narrow_from_f32<D: Element>(
    src: &StridedView<'_, f32>,
    dst: &mut StridedViewMut<'_, D>,
) -> Result<()> {
    convert::<f32, D, Narrow>(src, dst)
}

fn convert<S: Element, D: Element, V: Via<S, D>>(
    src: &StridedView<'_, S>,
    dst: &mut StridedViewMut<'_, D>,
) -> Result<()> {
    check_dims(src.layout(), dst.layout())?;
    let dl = dst.layout().clone();
    let order = walk_order(&dl);
    let (dims, ss, ds) = (dl.dims(), src.layout().strides(), dl.strides());
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    let (n, is, id) = inner_of(dims, ss, ds, &order);
    let mut sbuf = [S::zero(); RUN];
    let mut dbuf = [D::zero(); RUN];
    for_each_row(dims, ss, ds, &order, |os, od| {
        // SAFETY: `for_each_row` yields offsets of indices inside `dims`, the extents of
        // both views, so every `os + j*is` and `od + j*id` (j < n) addresses an element of
        // its view. The destination is exclusive and never self-overlapping, and the source
        // does not overlap it (the views borrow distinct memory: a `&` and a `&mut`).
        unsafe {
            let (s, d) = (sp.offset(os), dp.offset(od));
            if is == 1 && id == 1 {
                V::run(
                    std::slice::from_raw_parts(s, n),
                    std::slice::from_raw_parts_mut(d, n),
                );
                return;
            }
            let mut j0 = 0;
            while j0 < n {
                let m = RUN.min(n - j0);
                for (j, x) in sbuf[..m].iter_mut().enumerate() {
                    *x = *s.offset((j0 + j) as isize * is);
                }
                V::run(&sbuf[..m], &mut dbuf[..m]);
                for (j, x) in dbuf[..m].iter().enumerate() {
                    *d.offset((j0 + j) as isize * id) = *x;
                }
                j0 += m;
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{bf16, f16};
    use ndarray::{s, Array3, ArrayD};

    fn values(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 37) % 101) as f32 * 0.37 - 17.0)
            .collect()
    }

    /// Every permutation, negative strides and a slice of a larger array, widened and then
    /// narrowed, against the element-wise conversions (runs longer than the gather buffer).
    #[test]
    fn conversions_match_elementwise_on_any_strides() {
        {
            // (Miri: the small shape only)
            let shapes: &[(usize, usize, usize)] = if cfg!(miri) {
                &[(3, 4, 5)]
            } else {
                &[(3, 4, 5), (70, 33, 31)]
            };
            for &(d0, d1, d2) in shapes {
                let big: Vec<f32> = values(2 * d0 * d1 * (d2 + 3));
                let base = Array3::from_shape_vec((2 * d0, d1, d2 + 3), big).unwrap();
                let view = base.slice(s![..;-2, .., 1..d2 + 1]);
                let h: ndarray::Array3<f16> = view.mapv(f16::from_f32);
                for perm in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]] {
                    let src = h.view().permuted_axes(perm);
                    let mut wide = ArrayD::<f32>::from_elem(src.shape(), f32::NAN);
                    widen_to_f32(
                        &StridedView::of(&src),
                        &mut StridedViewMut::of(&mut wide).unwrap(),
                    )
                    .unwrap();
                    let want = src.mapv(|x| x.to_f32()).into_dyn();
                    assert_eq!(wide, want);
                    // back, into a destination with negative strides
                    let mut back = ArrayD::<bf16>::from_elem(src.shape(), bf16::NAN);
                    let mut bv = back.view_mut();
                    bv.invert_axis(ndarray::Axis(0));
                    let wv = wide.view();
                    let mut wvi = wv.clone();
                    wvi.invert_axis(ndarray::Axis(0));
                    narrow_from_f32(
                        &StridedView::of(&wvi),
                        &mut StridedViewMut::of(&mut bv).unwrap(),
                    )
                    .unwrap();
                    assert_eq!(back, want.mapv(bf16::from_f32));
                }
            }
        }
    }

    #[test]
    fn mismatched_extents_are_an_error() {
        let a = ndarray::Array2::<f16>::from_elem((2, 3), f16::ONE);
        let mut b = ndarray::Array2::<f32>::zeros((3, 2));
        let before = b.clone();
        assert!(widen_to_f32(
            &StridedView::of(&a),
            &mut StridedViewMut::of(&mut b).unwrap()
        )
        .is_err());
        assert_eq!(b, before);
    }
}

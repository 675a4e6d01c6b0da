//! Element-type conversion between two strided views of equal extents: the widening of
//! half-precision operands to their `f32` images and the rounding of an `f32` result back
//! into a half-precision output. The walk is [`scale_copy`](super::scale_copy)'s (the
//! destination's smallest stride innermost); runs contiguous on both sides convert as slices
//! (F16C where the CPU has it), others through a small buffer; large tensors are cut along
//! the outermost axis over the call's threads.

use rayon::prelude::*;

use super::strided::{check_dims, for_each_row, walk_order};
use crate::error::Result;
use crate::tensor::{Element, StridedView, StridedViewMut};

/// Elements below which a conversion runs on the calling thread (a wake-up of the pool costs
/// about as much as converting this many 2-byte elements); see `docs/TUNING.md`.
pub const CONVERT_PARALLEL_MIN_ELEMENTS: usize = 1 << 16;

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
/// ttgt::transpose::widen_to_f32(&StridedView::of(&at), &mut StridedViewMut::of(&mut b).unwrap(), 1).unwrap();
/// assert_eq!(b, ndarray::arr2(&[[1.0, 3.0], [2.0, 4.5]]));
/// ```
pub fn widen_to_f32<S: Element>(
    src: &StridedView<'_, S>,
    dst: &mut StridedViewMut<'_, f32>,
    threads: usize,
) -> Result<()> {
    convert::<S, f32, Widen>(src, dst, threads)
}

/// `dst = round(src)` to `D`, element by element (round to nearest, ties to even).
///
/// ```
/// use ttgt::tensor::{bf16, StridedView, StridedViewMut};
/// let a = ndarray::arr1(&[1.0f32, 3.0e38, 1.0 + 2f32.powi(-9)]);
/// let mut b = ndarray::Array1::<bf16>::from_elem(3, bf16::ZERO);
/// ttgt::transpose::narrow_from_f32(&StridedView::of(&a), &mut StridedViewMut::of(&mut b).unwrap(), 1).unwrap();
/// assert_eq!(b.mapv(|x| x.to_f32()).to_vec(), vec![1.0, bf16::from_f32(3.0e38).to_f32(), 1.0]);
/// ```
pub fn narrow_from_f32<D: Element>(
    src: &StridedView<'_, f32>,
    dst: &mut StridedViewMut<'_, D>,
    threads: usize,
) -> Result<()> {
    convert::<f32, D, Narrow>(src, dst, threads)
}

#[derive(Clone, Copy)]
struct Ptrs<S, D>(*const S, *mut D);
// SAFETY: the pointers are the views' bases; the parts of the walk given to different threads
// write disjoint destination elements (distinct indices of the outermost axis of a
// destination that never self-overlaps) and only read the source.
unsafe impl<S, D> Send for Ptrs<S, D> {}
// SAFETY: as above.
unsafe impl<S, D> Sync for Ptrs<S, D> {}

fn convert<S: Element, D: Element, V: Via<S, D>>(
    src: &StridedView<'_, S>,
    dst: &mut StridedViewMut<'_, D>,
    threads: usize,
) -> Result<()> {
    check_dims(src.layout(), dst.layout())?;
    let dl = dst.layout().clone();
    let order = walk_order(&dl);
    let (dims, ss, ds) = (dl.dims(), src.layout().strides(), dl.strides());
    let ptrs = Ptrs(src.as_ptr(), dst.as_mut_ptr());
    // One part of the walk: indices `lo..hi` of the outermost axis `order[0]`.
    let part = |p: Ptrs<S, D>, lo: usize, hi: usize| {
        let mut dims = dims.to_vec();
        let (sp, dp) = match order.first() {
            Some(&ax) => {
                dims[ax] = hi - lo;
                let l = lo as isize;
                (
                    p.0.wrapping_offset(l * ss[ax]),
                    p.1.wrapping_offset(l * ds[ax]),
                )
            }
            None => (p.0, p.1),
        };
        let (n, is, id) = match order.last() {
            Some(&i) => (dims[i], ss[i], ds[i]),
            None => (1, 0, 0),
        };
        let mut sbuf = [S::zero(); RUN];
        let mut dbuf = [D::zero(); RUN];
        for_each_row(&dims, ss, ds, &order, |os, od| {
            // SAFETY: `for_each_row` yields offsets of indices inside `dims`, a sub-range of
            // both views' extents along the outermost axis (whose start `sp`, `dp` add), so
            // every `os + j*is` and `od + j*id` (j < n) addresses an element of its view.
            // The destination is exclusive and never self-overlapping; the source does not
            // overlap it (checked by the callers' entry points); parts on other threads write
            // other destination elements.
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
    };
    let outer = order.first().map_or(1, |&ax| dims[ax]);
    let parts = threads.min(outer);
    if parts <= 1 || dl.len() < CONVERT_PARALLEL_MIN_ELEMENTS {
        part(ptrs, 0, outer);
        return Ok(());
    }
    let pieces = (parts * 4).min(outer);
    super::on_threads(threads, || {
        (0..pieces).into_par_iter().for_each(|k| {
            let (lo, hi) = (k * outer / pieces, (k + 1) * outer / pieces);
            if hi > lo {
                part(ptrs, lo, hi);
            }
        })
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
    /// narrowed, against the element-wise conversions, on 1 and 3 threads (a size large
    /// enough to be cut into parts).
    #[test]
    fn conversions_match_elementwise_on_any_strides() {
        for threads in [1, 3] {
            for (d0, d1, d2) in [(3, 4, 5), (70, 33, 31)] {
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
                        threads,
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
                        threads,
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
            &mut StridedViewMut::of(&mut b).unwrap(),
            1
        )
        .is_err());
        assert_eq!(b, before);
    }
}

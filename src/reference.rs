//! The reference engine: einsum by plain nested loops, for any number of operands. It is
//! slow and obviously right; every fast path is tested against it, and `ttgt contract
//! --check` uses it.
//!
//! For each output index it sums, over every value of the indices absent from the output,
//! the product of the operands at that point:
//! `out[o] = alpha * Σ_s Π_k op_k[idx_k(o, s)] + beta * out[o]`.
//!
//! The half-precision types (`f16`, `bf16`) are summed in `f64` and rounded once, so the
//! reference of a half-precision contraction is its exact value rounded to the storage type.

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::einsum::{parse, BoundSpec, Label};
use crate::error::Result;
use crate::tensor::{Element, StridedView, StridedViewMut};

/// Walks all indices of `dims` in row-major order (one empty index for rank 0; nothing when
/// an extent is 0).
fn odometer(dims: &[usize], mut f: impl FnMut(&[usize])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    loop {
        f(&idx);
        let mut k = dims.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// One output element: `Σ_s Π_k op_k[...]` at output index `out_idx` (no alpha, no beta).
///
/// ```
/// use ttgt::{einsum::parse, reference, tensor::StridedView};
/// let a = ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]);
/// let b = ndarray::arr2(&[[5.0, 6.0], [7.0, 8.0]]);
/// let bound = parse("ij,jk->ik").unwrap().bind(&[&[2, 2], &[2, 2]]).unwrap();
/// let v = reference::element(&bound, &[StridedView::of(&a), StridedView::of(&b)], &[1, 0]);
/// assert_eq!(v, 3.0 * 5.0 + 4.0 * 7.0);
/// ```
pub fn element<T: Element>(bound: &BoundSpec, ops: &[StridedView<'_, T>], out_idx: &[usize]) -> T {
    if T::DTYPE.is_half() {
        return T::from_f64(element_in(bound, ops, out_idx, |x: T| x.re()));
    }
    element_in(bound, ops, out_idx, |x: T| x)
}

/// [`element`] with the products and the sum computed in `W` (`f64` for the half-precision
/// types), each operand element widened by `wide`.
fn element_in<T: Element, W: Element>(
    bound: &BoundSpec,
    ops: &[StridedView<'_, T>],
    out_idx: &[usize],
    wide: impl Fn(T) -> W,
) -> W {
    let labels: Vec<Label> = bound.extents().keys().copied().collect();
    // Every label of every term is a key of the bound spec's extents (bind puts it there).
    let pos = |l: Label| {
        let p = labels.iter().position(|&x| x == l);
        debug_assert!(p.is_some(), "label {l:?} without an extent");
        p.unwrap_or(0)
    };
    let summed: Vec<usize> = labels
        .iter()
        .enumerate()
        .filter(|(_, l)| !bound.output().contains(l))
        .map(|(i, _)| i)
        .collect();
    let sum_dims: Vec<usize> = summed.iter().map(|&i| bound.extent(labels[i])).collect();
    let op_pos: Vec<Vec<usize>> = bound
        .inputs()
        .iter()
        .map(|ls| ls.iter().map(|&l| pos(l)).collect())
        .collect();
    let mut value = vec![0usize; labels.len()];
    for (&l, &i) in bound.output().iter().zip(out_idx) {
        value[pos(l)] = i;
    }
    let mut acc = W::zero();
    let mut idx: Vec<usize> = Vec::new();
    odometer(&sum_dims, |s| {
        for (&p, &v) in summed.iter().zip(s) {
            value[p] = v;
        }
        let mut prod = W::one();
        for (op, positions) in ops.iter().zip(&op_pos) {
            idx.clear();
            idx.extend(positions.iter().map(|&p| value[p]));
            prod *= wide(op.get(&idx));
        }
        acc += prod;
    });
    acc
}

/// `out = alpha * einsum(ops) + beta * out` by plain loops. `ops` are the operands as the spec
/// reads them (see [`BoundSpec::effective_layout`] for `...` broadcasting); `out` has the
/// output shape. With `beta == 0`, `out` is not read.
pub fn einsum_into<T: Element>(
    bound: &BoundSpec,
    alpha: T,
    ops: &[StridedView<'_, T>],
    beta: T,
    out: &mut StridedViewMut<'_, T>,
) {
    let shape = bound.output_shape();
    if T::DTYPE.is_half() {
        // the exact value (in f64) rounded once
        odometer(&shape, |o| {
            let v = alpha.re() * element_in(bound, ops, o, |x: T| x.re());
            let old = if beta.is_exact_zero() {
                0.0
            } else {
                beta.re() * out.get(o).re()
            };
            out.set(o, T::from_f64(v + old));
        });
        return;
    }
    odometer(&shape, |o| {
        let v = alpha * element(bound, ops, o);
        let old = if beta.is_exact_zero() {
            T::zero()
        } else {
            beta * out.get(o)
        };
        out.set(o, v + old);
    });
}

/// Evaluates an einsum spec with any number of operands by the reference loops; numpy's
/// `einsum` semantics, including `...` broadcasting, diagonals and traces.
///
/// ```
/// use ndarray::arr2;
/// let a = arr2(&[[1.0, 2.0], [3.0, 4.0]]).into_dyn();
/// let t = ttgt::reference::einsum("ii", &[a.view()]).unwrap();
/// assert_eq!(t[[]], 5.0);
/// ```
pub fn einsum<T: Element, S: Data<Elem = T>, D: Dimension>(
    spec: &str,
    ops: &[ArrayBase<S, D>],
) -> Result<ArrayD<T>> {
    let parsed = parse(spec)?;
    let shapes: Vec<&[usize]> = ops.iter().map(|a| a.shape()).collect();
    let bound = parsed.bind(&shapes)?;
    let views: Vec<StridedView<'_, T>> = ops
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let v = StridedView::of(a);
            let dims: Vec<usize> = bound.inputs()[k].iter().map(|&l| bound.extent(l)).collect();
            v.broadcast(&dims)
        })
        .collect::<Result<_>>()?;
    let mut out = ArrayD::<T>::zeros(IxDyn(&bound.output_shape()));
    let mut ov = StridedViewMut::of(&mut out)?;
    einsum_into(&bound, T::one(), &views, T::zero(), &mut ov);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr1, arr2, Array3};

    #[test]
    fn hand_computed() {
        let a = arr2(&[[1.0, 2.0], [3.0, 4.0]]).into_dyn();
        let b = arr2(&[[5.0, 6.0], [7.0, 8.0]]).into_dyn();
        let c = einsum("ij,jk->ik", &[a.view(), b.view()]).unwrap();
        assert_eq!(c, arr2(&[[19.0, 22.0], [43.0, 50.0]]).into_dyn());
        let d = einsum("ii->i", &[a.view()]).unwrap();
        assert_eq!(d, arr1(&[1.0, 4.0]).into_dyn());
        let s = einsum("ij->", &[a.view()]).unwrap();
        assert_eq!(s[[]], 10.0);
        let o = einsum(
            "i,j->ij",
            &[
                arr1(&[1.0, 2.0]).into_dyn().view(),
                arr1(&[3.0]).into_dyn().view(),
            ],
        )
        .unwrap();
        assert_eq!(o, arr2(&[[3.0], [6.0]]).into_dyn());
        let t = einsum("ij->ji", &[a.view()]).unwrap();
        assert_eq!(t, arr2(&[[1.0, 3.0], [2.0, 4.0]]).into_dyn());
    }

    #[test]
    fn three_operands_and_broadcast() {
        let a = arr1(&[1.0, 2.0]).into_dyn();
        let b = arr1(&[3.0, 4.0]).into_dyn();
        let c = arr1(&[5.0, 6.0]).into_dyn();
        let r = einsum("i,i,i", &[a.view(), b.view(), c.view()]).unwrap();
        assert_eq!(r[[]], 1.0 * 3.0 * 5.0 + 2.0 * 4.0 * 6.0);
        let x = Array3::from_shape_fn((2, 1, 2), |(i, _, k)| (i * 2 + k) as f64).into_dyn();
        let y = arr2(&[[1.0, 0.0], [0.0, 1.0]]).into_dyn();
        let r = einsum("...ij,jk->...ik", &[x.view(), y.view()]);
        assert_eq!(r.unwrap().shape(), &[2, 1, 2]);
        let r = einsum(
            "...j,...j->...",
            &[x.view(), Array3::<f64>::ones((1, 3, 2)).into_dyn().view()],
        )
        .unwrap();
        assert_eq!(r.shape(), &[2, 3]);
        assert_eq!(r[[1, 2]], 2.0 + 3.0);
    }

    #[test]
    fn zero_extents() {
        let a = ndarray::ArrayD::<f64>::zeros(IxDyn(&[2, 0]));
        let b = ndarray::ArrayD::<f64>::zeros(IxDyn(&[0, 3]));
        let c = einsum("ij,jk->ik", &[a.view(), b.view()]).unwrap();
        assert_eq!(c, ndarray::ArrayD::<f64>::zeros(IxDyn(&[2, 3])));
    }
}

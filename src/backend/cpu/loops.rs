//! Runs a [`NestedLoops`] nest: C scaled by beta, then every product of A and B added into
//! its element of C, straight from the operands' strides (no copies, no GEMM call).

use crate::plan::{LoopDim, NestedLoops};
use crate::tensor::Element;

/// Calls `f` with the offsets in A, B and C of every iteration of `dims` (outermost first),
/// starting from `off`.
#[inline]
fn nest(dims: &[LoopDim], off: [isize; 3], f: &mut impl FnMut([isize; 3])) {
    match dims.split_first() {
        None => f(off),
        Some((d, rest)) => {
            let mut o = off;
            for _ in 0..d.extent {
                nest(rest, o, f);
                for (t, s) in o.iter_mut().zip(d.strides) {
                    *t += s;
                }
            }
        }
    }
}

/// `sum(x[i * sx] * y[i * sy])` for `i < n`.
///
/// # Safety
/// Every `x.offset(i * sx)` and `y.offset(i * sy)` for `i < n` is a readable element.
#[inline(always)]
unsafe fn dot<T: Element>(n: usize, x: *const T, sx: isize, y: *const T, sy: isize) -> T {
    if sx == 1 && sy == 1 {
        // SAFETY: unit strides: the caller's elements are `n` contiguous ones from each start.
        let (x, y) = unsafe {
            (
                std::slice::from_raw_parts(x, n),
                std::slice::from_raw_parts(y, n),
            )
        };
        // four independent sums, so that consecutive products do not wait on one another
        let mut acc = [T::zero(); 4];
        let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
        let (xr, yr) = (xc.remainder(), yc.remainder());
        for (a, b) in xc.zip(yc) {
            for l in 0..4 {
                acc[l] += a[l] * b[l];
            }
        }
        let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        for (&a, &b) in xr.iter().zip(yr) {
            s += a * b;
        }
        return s;
    }
    let mut s = T::zero();
    for i in 0..n as isize {
        // SAFETY: `i < n`, as the caller guarantees.
        unsafe { s += *x.offset(i * sx) * *y.offset(i * sy) };
    }
    s
}

/// `z[i * sz] += alpha * x[i * sx]` for `i < n`.
///
/// # Safety
/// Every `x.offset(i * sx)` is readable and every `z.offset(i * sz)` writable for `i < n`,
/// and the two never overlap.
#[inline(always)]
unsafe fn axpy<T: Element>(n: usize, alpha: T, x: *const T, sx: isize, z: *mut T, sz: isize) {
    if sx == 1 && sz == 1 {
        // SAFETY: unit strides: `n` contiguous elements from each start, disjoint.
        let (x, z) = unsafe {
            (
                std::slice::from_raw_parts(x, n),
                std::slice::from_raw_parts_mut(z, n),
            )
        };
        for (z, &x) in z.iter_mut().zip(x) {
            *z += alpha * x;
        }
        return;
    }
    for i in 0..n as isize {
        // SAFETY: `i < n`, as the caller guarantees.
        unsafe { *z.offset(i * sz) += alpha * *x.offset(i * sx) };
    }
}

/// `C = beta * C` over C's loops of the nest (`beta == 0` writes zeros and never reads C).
///
/// # Safety
/// As [`run_nested`].
unsafe fn scale_c<T: Element>(n: &NestedLoops, c: *mut T, beta: T) {
    if beta.is_exact_one() {
        return;
    }
    let zero = beta.is_exact_zero();
    let inner = if n.inner.is_output() {
        (n.inner.extent, n.inner.strides[2])
    } else {
        (1, 0)
    };
    nest(&n.c_outer, [0; 3], &mut |[_, _, oc]| {
        for i in 0..inner.0 as isize {
            // SAFETY: C's offsets of the nest's output loops address C's elements.
            unsafe {
                let p = c.offset(oc + i * inner.1);
                *p = if zero { T::zero() } else { beta * *p };
            }
        }
    });
}

/// `C = alpha * A·B + beta * C` by the nest `n`.
///
/// # Safety
/// `n`'s loops, extents and strides are those of the views `a`, `b` and `c` point to (every
/// iteration's offsets address elements of them), the output loops address distinct
/// elements of C, and C overlaps neither input.
pub(crate) unsafe fn run_nested<T: Element>(
    n: &NestedLoops,
    alpha: T,
    a: *const T,
    b: *const T,
    beta: T,
    c: *mut T,
) {
    // SAFETY: as this function's contract.
    unsafe { scale_c(n, c, beta) };
    if alpha.is_exact_zero() || n.products == 0 {
        return;
    }
    let d = n.inner;
    let [sa, sb, sc] = d.strides;
    let len = d.extent;
    // SAFETY (all four bodies): the offsets come from the nest of the views' own layouts,
    // so each inner run stays inside A, B and C; C is disjoint from A and B.
    if !d.output {
        nest(&n.outer, [0; 3], &mut |[oa, ob, oc]| unsafe {
            let s = dot(len, a.offset(oa), sa, b.offset(ob), sb);
            *c.offset(oc) += alpha * s;
        });
    } else if sb == 0 {
        nest(&n.outer, [0; 3], &mut |[oa, ob, oc]| unsafe {
            axpy(
                len,
                alpha * *b.offset(ob),
                a.offset(oa),
                sa,
                c.offset(oc),
                sc,
            );
        });
    } else if sa == 0 {
        nest(&n.outer, [0; 3], &mut |[oa, ob, oc]| unsafe {
            axpy(
                len,
                alpha * *a.offset(oa),
                b.offset(ob),
                sb,
                c.offset(oc),
                sc,
            );
        });
    } else {
        nest(&n.outer, [0; 3], &mut |[oa, ob, oc]| unsafe {
            let (a, b, c) = (a.offset(oa), b.offset(ob), c.offset(oc));
            for i in 0..len as isize {
                *c.offset(i * sc) += alpha * (*a.offset(i * sa) * *b.offset(i * sb));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{ArrayD, Axis, IxDyn};
    use num_complex::Complex64;

    use crate::plan::CandidateKind;
    use crate::tensor::{Element, StridedView, StridedViewMut};
    use crate::{ContractionPlan, Layout};

    fn filled<T: Element>(shape: &[usize], seed: usize) -> ArrayD<T> {
        let mut k = seed;
        ArrayD::from_shape_simple_fn(IxDyn(shape), || {
            k = (k * 7 + 3) % 11;
            T::from_parts(k as f64 - 5.0, (k % 3) as f64)
        })
    }

    /// `C = alpha * A·B + beta * C` by a plan that must be nested loops, against the
    /// reference, into a C reversed along its first axis (negative strides).
    fn check<T: Element>(spec: &str, a: ndarray::ArrayViewD<'_, T>, b: ndarray::ArrayViewD<'_, T>) {
        let ab = crate::reference::einsum(spec, &[a.clone(), b.clone()]).unwrap();
        let mut store: ArrayD<T> = filled(ab.shape(), 5);
        let mut c = store.view_mut();
        if c.ndim() > 0 {
            c.invert_axis(Axis(0));
        }
        let (alpha, beta) = (T::from_parts(2.0, 1.0), T::from_parts(-1.0, 0.5));
        let mut want = c.to_owned();
        want.zip_mut_with(&ab, |w, &x| *w = alpha * x + beta * *w);
        let plan = ContractionPlan::new(
            spec,
            &[Layout::of(&a), Layout::of(&b)],
            &Layout::of(&c),
            T::DTYPE,
        )
        .unwrap();
        assert_eq!(
            plan.chosen().map(|c| c.kind()),
            Some(CandidateKind::Loops),
            "{spec}"
        );
        let mut cv = StridedViewMut::of(&mut c).unwrap();
        plan.execute(
            alpha,
            &[StridedView::of(&a), StridedView::of(&b)],
            beta,
            &mut cv,
        )
        .unwrap();
        for (g, w) in c.iter().zip(&want) {
            // small integers: exact in every type
            assert_eq!(g, w, "{spec}");
        }
    }

    #[test]
    fn nests_match_the_reference() {
        // Under Miri the planner cannot read `/proc/cpuinfo` for the provisional profile: it
        // gets the default factors of a stored one instead.
        #[cfg(miri)]
        crate::model::profile::set_miri_profile();
        let a: ArrayD<f64> = filled(&[3, 2, 2], 1);
        let b: ArrayD<f64> = filled(&[2, 2, 3], 2);
        // a dot product over a permuted view (strided inner loop)
        check("ijk,jki->", a.view(), b.view());
        // vector updates with a reversed operand, a dot along a unit stride
        let mut m: ArrayD<f64> = filled(&[3, 4], 3);
        m.invert_axis(Axis(1));
        check("ij,jk->ik", m.view(), filled::<f64>(&[4, 2], 4).view());
        check(
            "ij,k->ijk",
            filled::<f64>(&[2, 3], 6).view(),
            filled::<f64>(&[5], 7).view(),
        );
        // a diagonal and a one-sided sum (prepared views)
        check(
            "iij,jk->ik",
            filled::<f64>(&[2, 2, 3], 8).view(),
            filled::<f64>(&[3, 2], 9).view(),
        );
        check(
            "bix,bj->bij",
            filled::<f64>(&[2, 3, 2], 10).view(),
            filled::<f64>(&[2, 2], 11).view(),
        );
        // empty: C without elements, and an empty contracted index (C = beta * C)
        check(
            "ij,jk->ik",
            filled::<f64>(&[0, 3], 12).view(),
            filled::<f64>(&[3, 2], 13).view(),
        );
        check(
            "ij,jk->ik",
            filled::<f64>(&[2, 0], 14).view(),
            filled::<f64>(&[0, 3], 15).view(),
        );
        // complex, every inner form
        let z: ArrayD<Complex64> = filled(&[2, 3], 16);
        check(
            "ij,jk->ik",
            z.view(),
            filled::<Complex64>(&[3, 2], 17).view(),
        );
        check("ij,ij->", z.view(), filled::<Complex64>(&[2, 3], 18).view());
        check(
            "ij,ij->ij",
            z.view(),
            filled::<Complex64>(&[2, 3], 19).view(),
        );
    }
}

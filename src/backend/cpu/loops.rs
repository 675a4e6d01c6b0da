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

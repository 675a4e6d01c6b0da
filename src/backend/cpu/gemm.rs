//! Strided GEMM `C = alpha * A·B + beta * C` for the four element types, through
//! `matrixmultiply` (`sgemm`, `dgemm`, `cgemm`, `zgemm`; arbitrary row and column strides).

use std::any::TypeId;

use matrixmultiply::CGemmOption;
use num_complex::{Complex32, Complex64};

use crate::tensor::Element;

/// A matrix operand: pointer to element (0, 0) and its row and column strides in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

/// The output matrix.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatMut<T> {
    pub ptr: *mut T,
    pub rs: isize,
    pub cs: isize,
}

/// `C[m×n] = alpha * A[m×k] · B[k×n] + beta * C`. With `beta == 0`, C is not read. `k == 0`
/// gives `C = beta * C`.
///
/// # Safety
/// Every `A[i, l]`, `B[l, j]`, `C[i, j]` for `i < m`, `j < n`, `l < k` addresses a valid
/// element (`ptr + i*rs + l*cs` etc.), C's elements are distinct (no zero or overlapping
/// strides), C is not read or written by anything else during the call and overlaps neither
/// A nor B.
#[allow(clippy::too_many_arguments)] // the BLAS signature: shape, scalars and three operands
pub(crate) unsafe fn gemm<T: Element>(
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: Mat<T>,
    b: Mat<T>,
    beta: T,
    c: MatMut<T>,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m as isize {
            for j in 0..n as isize {
                let q = c.ptr.offset(i * c.rs + j * c.cs);
                *q = if beta.is_exact_zero() {
                    T::zero()
                } else {
                    beta * *q
                };
            }
        }
        return;
    }
    let t = TypeId::of::<T>();
    // The casts below are identity casts: `T` is exactly the type compared against, and
    // num-complex's `Complex<f32>` is `#[repr(C)] { re, im }`, the layout of `[f32; 2]`
    // that matrixmultiply's complex kernels take.
    if t == TypeId::of::<f32>() {
        let al = alpha.re() as f32;
        let be = beta.re() as f32;
        matrixmultiply::sgemm(
            m,
            k,
            n,
            al,
            a.ptr.cast(),
            a.rs,
            a.cs,
            b.ptr.cast(),
            b.rs,
            b.cs,
            be,
            c.ptr.cast(),
            c.rs,
            c.cs,
        );
    } else if t == TypeId::of::<f64>() {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            alpha.re(),
            a.ptr.cast(),
            a.rs,
            a.cs,
            b.ptr.cast(),
            b.rs,
            b.cs,
            beta.re(),
            c.ptr.cast(),
            c.rs,
            c.cs,
        );
    } else if t == TypeId::of::<Complex32>() {
        let al = [alpha.re() as f32, alpha.im() as f32];
        let be = [beta.re() as f32, beta.im() as f32];
        matrixmultiply::cgemm(
            CGemmOption::Standard,
            CGemmOption::Standard,
            m,
            k,
            n,
            al,
            a.ptr.cast(),
            a.rs,
            a.cs,
            b.ptr.cast(),
            b.rs,
            b.cs,
            be,
            c.ptr.cast(),
            c.rs,
            c.cs,
        );
    } else if t == TypeId::of::<Complex64>() {
        let al = [alpha.re(), alpha.im()];
        let be = [beta.re(), beta.im()];
        matrixmultiply::zgemm(
            CGemmOption::Standard,
            CGemmOption::Standard,
            m,
            k,
            n,
            al,
            a.ptr.cast(),
            a.rs,
            a.cs,
            b.ptr.cast(),
            b.rs,
            b.cs,
            be,
            c.ptr.cast(),
            c.rs,
            c.cs,
        );
    } else {
        unreachable!("Element is sealed to the four types above");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Element>() {
        // A = [[1,2,3],[4,5,6]] row-major, B = A^T read through swapped strides.
        let a: Vec<T> = (1..=6).map(|x| T::from_parts(x as f64, 0.5)).collect();
        let mut c = vec![T::from_f64(f64::NAN); 4];
        unsafe {
            gemm(
                2,
                2,
                3,
                T::one(),
                Mat {
                    ptr: a.as_ptr(),
                    rs: 3,
                    cs: 1,
                },
                Mat {
                    ptr: a.as_ptr(),
                    rs: 1,
                    cs: 3,
                },
                T::zero(),
                MatMut {
                    ptr: c.as_mut_ptr(),
                    rs: 2,
                    cs: 1,
                },
            );
        }
        for i in 0..2 {
            for j in 0..2 {
                let mut s = T::zero();
                for l in 0..3 {
                    s += a[i * 3 + l] * a[j * 3 + l];
                }
                assert!((c[i * 2 + j] - s).abs_f64() < 1e-4, "{:?}", T::DTYPE);
            }
        }
    }

    #[test]
    fn all_types() {
        check::<f32>();
        check::<f64>();
        check::<Complex32>();
        check::<Complex64>();
    }
}

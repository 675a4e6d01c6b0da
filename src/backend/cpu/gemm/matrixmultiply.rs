//! The `matrixmultiply` GEMM backend.

use std::any::TypeId;

use matrixmultiply::CGemmOption;
use num_complex::{Complex32, Complex64};

use super::{GemmBackend, Mat, MatMut};
use crate::tensor::Element;

/// The `matrixmultiply` crate: `sgemm`, `dgemm`, `cgemm`, `zgemm` with arbitrary strides,
/// single-threaded (built without its `threading` feature, whose thread count is
/// process-wide): threads come from cutting C into blocks (`split.rs`).
pub(crate) struct MatrixMultiply;

impl GemmBackend for MatrixMultiply {
    unsafe fn gemm<T: Element>(
        m: usize,
        n: usize,
        k: usize,
        alpha: T,
        a: Mat<T>,
        b: Mat<T>,
        beta: T,
        c: MatMut<T>,
        threads: usize,
    ) {
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
            // f16 and bf16: `super::gemm` computes them in f32 before any library runs; the
            // GETT engine's scalar kernel takes any element type, should a call get here.
            super::native::Native::gemm(m, n, k, alpha, a, b, beta, c, threads);
        }
    }
}

//! The `gemm` crate backend (`dst = alpha·dst + beta·lhs·rhs` in its own convention; here
//! mapped to BLAS's `C = alpha·A·B + beta·C`).

use std::any::TypeId;

use gemm::Parallelism;
use num_complex::{Complex32, Complex64};

use super::{GemmBackend, Mat, MatMut};
use crate::tensor::Element;

/// The `gemm` crate: runtime-dispatched kernels (AVX-512 with `x86-v4`), arbitrary strides,
/// rayon-parallel on `threads` threads.
pub(crate) struct GemmCrate;

/// Runs the crate's GEMM on `T` after checking that `T` is `U` (the same type, so the casts
/// are identities).
///
/// # Safety
/// As for [`super::gemm`]; `T` and `U` are the same type.
#[allow(clippy::too_many_arguments)] // the BLAS signature plus parallelism
unsafe fn call<T: Element, U: 'static + Copy>(
    m: usize,
    n: usize,
    k: usize,
    alpha: U,
    a: Mat<T>,
    b: Mat<T>,
    beta: U,
    read_c: bool,
    c: MatMut<T>,
    par: Parallelism,
) {
    // The crate computes dst := alpha·dst + beta·lhs·rhs and takes column stride before row
    // stride; it does not read dst when `read_dst` is false.
    gemm::gemm::<U>(
        m,
        n,
        k,
        c.ptr.cast(),
        c.cs,
        c.rs,
        read_c,
        a.ptr.cast(),
        a.cs,
        a.rs,
        b.ptr.cast(),
        b.cs,
        b.rs,
        beta,
        alpha,
        false,
        false,
        false,
        par,
    );
}

impl GemmBackend for GemmCrate {
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
        let par = if threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        let read_c = !beta.is_exact_zero();
        let t = TypeId::of::<T>();
        // Each branch passes `T` as the identical concrete type (checked by `TypeId`).
        if t == TypeId::of::<f32>() {
            let (al, be) = (alpha.re() as f32, beta.re() as f32);
            call::<T, f32>(m, n, k, al, a, b, be, read_c, c, par);
        } else if t == TypeId::of::<f64>() {
            call::<T, f64>(m, n, k, alpha.re(), a, b, beta.re(), read_c, c, par);
        } else if t == TypeId::of::<Complex32>() {
            let al = Complex32::new(alpha.re() as f32, alpha.im() as f32);
            let be = Complex32::new(beta.re() as f32, beta.im() as f32);
            call::<T, Complex32>(m, n, k, al, a, b, be, read_c, c, par);
        } else if t == TypeId::of::<Complex64>() {
            let al = Complex64::new(alpha.re(), alpha.im());
            let be = Complex64::new(beta.re(), beta.im());
            call::<T, Complex64>(m, n, k, al, a, b, be, read_c, c, par);
        } else {
            // f16 and bf16: `super::gemm` computes them in f32 before any library runs; the
            // GETT engine's scalar kernel takes any element type, should a call get here.
            super::native::Native::gemm(m, n, k, alpha, a, b, beta, c, threads);
        }
    }
}

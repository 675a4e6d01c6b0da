//! Our own GEMM: the GETT engine with one index per group (strided rows and columns).

use super::{GemmBackend, Mat, MatMut};
use crate::backend::cpu::gett::{gett, Dim, KernelChoice, Problem};
use crate::tensor::Element;

/// The GETT engine as a plain strided GEMM (SIMD kernels for `f32`/`f64` with AVX2 + FMA,
/// the scalar kernel otherwise), rayon-parallel on `threads` threads.
pub(crate) struct Native;

impl GemmBackend for Native {
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
        let p = Problem {
            m: vec![Dim {
                ext: m,
                s: [a.rs, c.rs],
            }],
            n: vec![Dim {
                ext: n,
                s: [b.cs, c.cs],
            }],
            k: vec![Dim {
                ext: k,
                s: [a.cs, b.rs],
            }],
            batch: Vec::new(),
        };
        // SAFETY: the caller's guarantees for the GEMM are the engine's for this problem.
        gett(
            &p,
            a.ptr,
            b.ptr,
            c.ptr,
            alpha,
            beta,
            threads,
            KernelChoice::Best,
        );
    }
}

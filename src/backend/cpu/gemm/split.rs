//! Threaded GEMM by partitioning C: the product is cut into the grid of blocks of C that
//! [`crate::model::gemm_grid`] chooses, one per thread, each computed by a single-threaded
//! library call. The libraries' own threading gains little or loses on the shapes of
//! contractions (a few hundred rows, a short or a long `k`: `docs/TUNING.md`); blocks of C
//! computed independently scale with the threads as long as each is enough work.

use rayon::prelude::*;

use super::{GemmBackend, Mat, MatMut};
use crate::model::gemm_grid_range as range;
use crate::tensor::Element;
use crate::transpose::on_threads;

/// The operands, handed to the workers.
#[derive(Clone, Copy)]
struct Operands<T> {
    a: Mat<T>,
    b: Mat<T>,
    c: MatMut<T>,
}

// SAFETY: the workers read A and B, which nothing writes during the call, and each writes
// its own block of C, disjoint from every other block (the caller's contract of `run`).
unsafe impl<T: Send> Send for Operands<T> {}
// SAFETY: as for `Send`: shared access only reads A and B; blocks of C are disjoint.
unsafe impl<T: Sync> Sync for Operands<T> {}

impl<T: Copy> Operands<T> {
    /// The operands (a method, so that the workers' closure captures the whole `Sync`
    /// struct rather than its raw-pointer fields).
    fn get(&self) -> (Mat<T>, Mat<T>, MatMut<T>) {
        (self.a, self.b, self.c)
    }
}

/// `C = alpha·A·B + beta·C` by library `G`: as the grid of blocks of C that
/// [`crate::model::gemm_grid`] chooses for `threads` threads, each block one single-threaded
/// call on a pool of `threads` threads, or as one single-threaded call when there is no grid.
///
/// # Safety
/// As for [`super::gemm`].
#[allow(clippy::too_many_arguments)] // the BLAS signature plus the thread count
pub(crate) unsafe fn cut<G: GemmBackend, T: Element>(
    threads: usize,
    (m, n, k): (usize, usize, usize),
    alpha: T,
    a: Mat<T>,
    b: Mat<T>,
    beta: T,
    c: MatMut<T>,
) {
    let Some((tm, tn)) = crate::model::gemm_grid(m, n, k, threads) else {
        return G::gemm(m, n, k, alpha, a, b, beta, c, 1);
    };
    let ops = Operands { a, b, c };
    on_threads(threads, || {
        (0..tm * tn).into_par_iter().for_each(|q| {
            let (a, b, c) = ops.get();
            let (i0, mi) = range(m, tm, q / tn);
            let (j0, nj) = range(n, tn, q % tn);
            if mi == 0 || nj == 0 {
                return;
            }
            let (i0, j0) = (i0 as isize, j0 as isize);
            // SAFETY: the block's rows `i0..i0+mi` of A and C and columns `j0..j0+nj` of B
            // and C lie inside the product the caller vouched for; blocks of C are disjoint
            // (distinct `q` give distinct row or column ranges).
            unsafe {
                let a = Mat {
                    ptr: a.ptr.offset(i0 * a.rs),
                    ..a
                };
                let b = Mat {
                    ptr: b.ptr.offset(j0 * b.cs),
                    ..b
                };
                let c = MatMut {
                    ptr: c.ptr.offset(i0 * c.rs + j0 * c.cs),
                    ..c
                };
                G::gemm(mi, nj, k, alpha, a, b, beta, c, 1);
            }
        });
    });
}

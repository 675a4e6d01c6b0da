//! Strided GEMM `C = alpha * A·B + beta * C` for f32, f64, c32 and c64 behind one small
//! trait, [`GemmBackend`], with two implementations: the `matrixmultiply` crate and the `gemm`
//! crate (AVX-512 kernels through its `x86-v4` feature, rayon-parallel). [`gemm`] dispatches
//! on a [`GemmLibrary`] chosen by the planner, except for matrix-vector products with a
//! unit-stride matrix, which run our streamed GEMV (`gemv.rs`) whatever the library. On
//! several threads a product is cut into blocks of C, one single-threaded library call each
//! (`split.rs`).

mod gemm_crate;
mod gemv;
#[cfg(target_arch = "x86_64")]
mod gemv_x86;
mod matrixmultiply;
mod native;
mod skinny;
mod split;

use crate::model::GemmLibrary;
use crate::tensor::Element;
use crate::transpose::Isa;

pub(crate) use self::gemm_crate::GemmCrate;
pub(crate) use self::matrixmultiply::MatrixMultiply;
pub(crate) use self::native::Native;

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

/// A GEMM library.
pub(crate) trait GemmBackend {
    /// `C[m×n] = alpha * A[m×k] · B[k×n] + beta * C` with `m, n, k > 0`; with `beta == 0`, C
    /// is not read. `threads` is the parallelism the call may use.
    ///
    /// # Safety
    /// As for [`gemm`].
    #[allow(clippy::too_many_arguments)] // the BLAS signature plus a thread count
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
    );
}

/// `C[m×n] = alpha * A[m×k] · B[k×n] + beta * C` through `library` on up to `threads`
/// threads. With `beta == 0`, C is not read. `k == 0` gives `C = beta * C`.
///
/// # Safety
/// Every `A[i, l]`, `B[l, j]`, `C[i, j]` for `i < m`, `j < n`, `l < k` addresses a valid
/// element (`ptr + i*rs + l*cs` etc.), C's elements are distinct (no zero or overlapping
/// strides), C is not read or written by anything else during the call and overlaps neither
/// A nor B.
#[allow(clippy::too_many_arguments)] // the BLAS signature plus library and thread count
pub(crate) unsafe fn gemm<T: Element>(
    library: GemmLibrary,
    threads: usize,
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
    if T::DTYPE.is_half() {
        return half_via_f32(library, threads, (m, n, k), alpha, a, b, beta, c);
    }
    // Matrix-vector products stream their matrix whichever library was chosen.
    if (m == 1 || n == 1) && gemv::try_gemv(Isa::detect(), m, n, k, alpha, a, b, beta, c, threads) {
        return;
    }
    // So do products with a small side and a unit-stride long operand.
    if skinny::try_skinny(Isa::detect(), m, n, k, alpha, a, b, beta, c, threads) {
        return;
    }
    match library {
        GemmLibrary::MatrixMultiply => {
            split::cut::<MatrixMultiply, T>(threads, (m, n, k), alpha, a, b, beta, c)
        }
        GemmLibrary::Gemm => split::cut::<GemmCrate, T>(threads, (m, n, k), alpha, a, b, beta, c),
        GemmLibrary::Native => split::cut::<Native, T>(threads, (m, n, k), alpha, a, b, beta, c),
    }
}

/// A GEMM of f16/bf16 matrices in their compute type: A and B widened to row-major `f32`
/// copies (C too when `beta != 0`), the `f32` GEMM, the result rounded once into C. Plans
/// never call it (their half-precision operands are `f32` images already, `plan::storage`);
/// the benches' same-size GEMM reference of a half type does.
///
/// # Safety
/// As for [`gemm`].
#[allow(clippy::too_many_arguments)] // the BLAS signature plus library and thread count
unsafe fn half_via_f32<T: Element>(
    library: GemmLibrary,
    threads: usize,
    (m, n, k): (usize, usize, usize),
    alpha: T,
    a: Mat<T>,
    b: Mat<T>,
    beta: T,
    c: MatMut<T>,
) {
    let at = |p: *const T, rs: isize, cs: isize, i: usize, j: usize| {
        (*p.offset(i as isize * rs + j as isize * cs)).re() as f32
    };
    let wa: Vec<f32> = (0..m * k)
        .map(|x| at(a.ptr, a.rs, a.cs, x / k, x % k))
        .collect();
    let wb: Vec<f32> = (0..k * n)
        .map(|x| at(b.ptr, b.rs, b.cs, x / n, x % n))
        .collect();
    let read_c = !beta.is_exact_zero();
    let mut wc: Vec<f32> = (0..m * n)
        .map(|x| {
            if read_c {
                at(c.ptr, c.rs, c.cs, x / n, x % n)
            } else {
                0.0
            }
        })
        .collect();
    let (rows, cols) = (n as isize, 1);
    gemm::<f32>(
        library,
        threads,
        m,
        n,
        k,
        alpha.re() as f32,
        Mat {
            ptr: wa.as_ptr(),
            rs: k as isize,
            cs: 1,
        },
        Mat {
            ptr: wb.as_ptr(),
            rs: rows,
            cs: cols,
        },
        beta.re() as f32,
        MatMut {
            ptr: wc.as_mut_ptr(),
            rs: rows,
            cs: cols,
        },
    );
    for (x, &v) in wc.iter().enumerate() {
        *c.ptr
            .offset((x / n) as isize * c.rs + (x % n) as isize * c.cs) = T::from_f64(v as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Element>(library: GemmLibrary) {
        // A = [[1,2,3],[4,5,6]] row-major, B = A^T read through swapped strides; C strided.
        let a: Vec<T> = (1..=6).map(|x| T::from_parts(x as f64, 0.5)).collect();
        for beta in [0.0, 0.5] {
            let mut c = vec![T::from_f64(if beta == 0.0 { f64::NAN } else { 2.0 }); 8];
            unsafe {
                gemm(
                    library,
                    2,
                    2,
                    2,
                    3,
                    T::from_parts(1.5, -0.25),
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
                    T::from_f64(beta),
                    MatMut {
                        ptr: c.as_mut_ptr(),
                        rs: 1,
                        cs: 4,
                    },
                );
            }
            for i in 0..2 {
                for j in 0..2 {
                    let mut s = T::zero();
                    for l in 0..3 {
                        s += a[i * 3 + l] * a[j * 3 + l];
                    }
                    let want = T::from_parts(1.5, -0.25) * s + T::from_f64(beta * 2.0);
                    let got = c[i + 4 * j];
                    // half types: `want` is summed in the storage type here
                    let tol = if T::DTYPE.is_half() {
                        16.0 * T::DTYPE.unit_roundoff() * (1.0 + want.abs_f64())
                    } else {
                        1e-4
                    };
                    assert!(
                        (got - want).abs_f64() < tol,
                        "{library} {:?} beta {beta}: {got:?} vs {want:?}",
                        T::DTYPE
                    );
                }
            }
        }
    }

    /// Products large enough to be cut into blocks of C on several threads (a column-major C
    /// inside a larger buffer, beta != 0) against a plain loop, for every library.
    #[test]
    fn products_cut_over_threads_match_the_reference() {
        for (m, n, k, threads) in [(300, 200, 40, 2), (37, 700, 90, 3), (260, 260, 80, 4)] {
            assert!(crate::model::gemm_grid(m, n, k, threads).is_some());
            let a: Vec<f64> = (0..m * k).map(|x| ((x * 7) % 13) as f64 - 6.0).collect();
            let b: Vec<f64> = (0..k * n).map(|x| ((x * 5) % 11) as f64 - 5.0).collect();
            let ldc = m + 3;
            let c0: Vec<f64> = (0..ldc * n).map(|x| (x % 7) as f64).collect();
            let mut want = c0.clone();
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                    want[i + j * ldc] = 2.0 * s + 0.5 * c0[i + j * ldc];
                }
            }
            for lib in [
                GemmLibrary::MatrixMultiply,
                GemmLibrary::Gemm,
                GemmLibrary::Native,
            ] {
                let mut c = c0.clone();
                unsafe {
                    gemm(
                        lib,
                        threads,
                        m,
                        n,
                        k,
                        2.0,
                        Mat {
                            ptr: a.as_ptr(),
                            rs: k as isize,
                            cs: 1,
                        },
                        Mat {
                            ptr: b.as_ptr(),
                            rs: n as isize,
                            cs: 1,
                        },
                        0.5,
                        MatMut {
                            ptr: c.as_mut_ptr(),
                            rs: 1,
                            cs: ldc as isize,
                        },
                    );
                }
                assert_eq!(c, want, "{lib} {m}x{n}x{k} on {threads} threads");
            }
        }
    }

    #[test]
    fn all_types_both_libraries() {
        for lib in [
            GemmLibrary::MatrixMultiply,
            GemmLibrary::Gemm,
            GemmLibrary::Native,
        ] {
            check::<f32>(lib);
            check::<f64>(lib);
            check::<num_complex::Complex32>(lib);
            check::<num_complex::Complex64>(lib);
            check::<crate::tensor::f16>(lib);
            check::<crate::tensor::bf16>(lib);
        }
    }
}

//! Register-blocked micro-kernels of the GETT engine: `MR×NR` tiles of `C = A·B` from packed
//! panels (`A` panel: `k` columns of `MR` values; `B` panel: `k` rows of `NR` values), either
//! stored straight into C (full tiles whose columns are contiguous in C) or returned in a
//! small row-major buffer that the driver scatters.
//!
//! The scalar kernel works for every element type and is the reference of the SIMD ones
//! (AVX2 + FMA for `f32` and `f64` on x86-64).

use crate::tensor::{DType, Element};

/// Where a full tile goes in C: `c + rows[i] + j` for `i < MR`, `j < NR` (columns
/// contiguous), as `alpha * acc + beta * C` (C not read when `read` is false).
pub(crate) struct Direct<T> {
    pub c: *mut T,
    pub rows: *const isize,
    pub alpha: T,
    pub beta: T,
    pub read: bool,
}

/// A micro-kernel: `k`, the packed panels, the tile buffer (`MR*NR` values, row-major,
/// written when `direct` is `None`), and the direct destination.
///
/// # Safety
/// `a` holds `k*MR` values, `b` `k*NR`; `out` holds `MR*NR`; a direct destination addresses
/// `MR` rows of `NR` valid, distinct elements that nothing else accesses during the call.
pub(crate) type KernelFn<T> =
    unsafe fn(k: usize, a: *const T, b: *const T, out: &mut [T], direct: Option<&Direct<T>>);

/// A kernel with its register tile and the cache blocking that suits it.
pub(crate) struct Kernel<T> {
    /// Rows of a tile.
    pub mr: usize,
    /// Columns of a tile (contiguous in C when possible).
    pub nr: usize,
    /// Rows of a packed A block (kept in L2), a multiple of `mr`.
    pub mc: usize,
    /// Depth of a packed block.
    pub kc: usize,
    /// Columns of a packed B block (kept in L3), a multiple of `nr`.
    pub nc: usize,
    /// The tile routine.
    pub run: KernelFn<T>,
}

/// Which kernel the engine uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelChoice {
    /// The fastest this CPU supports for the element type.
    Best,
    /// The portable scalar kernel (the reference of the others; tests force it).
    #[cfg(test)]
    Scalar,
}

const SCALAR_MR: usize = 4;
const SCALAR_NR: usize = 4;

/// The portable kernel: `MR = NR = 4`, accumulators in an array.
///
/// # Safety
/// As for [`KernelFn`].
unsafe fn scalar_kernel<T: Element>(
    k: usize,
    a: *const T,
    b: *const T,
    out: &mut [T],
    direct: Option<&Direct<T>>,
) {
    let mut acc = [T::zero(); SCALAR_MR * SCALAR_NR];
    for p in 0..k {
        // SAFETY: p < k, so the panel reads stay within k*MR and k*NR values.
        let ap = std::slice::from_raw_parts(a.add(p * SCALAR_MR), SCALAR_MR);
        let bp = std::slice::from_raw_parts(b.add(p * SCALAR_NR), SCALAR_NR);
        for (i, &x) in ap.iter().enumerate() {
            for (j, &y) in bp.iter().enumerate() {
                acc[i * SCALAR_NR + j] += x * y;
            }
        }
    }
    match direct {
        None => out[..acc.len()].copy_from_slice(&acc),
        Some(d) => {
            for i in 0..SCALAR_MR {
                // SAFETY: the destination's MR row offsets and NR contiguous columns are valid.
                let row = d.c.offset(*d.rows.add(i));
                for j in 0..SCALAR_NR {
                    let q = row.add(j);
                    let v = d.alpha * acc[i * SCALAR_NR + j];
                    *q = if d.read { v + d.beta * *q } else { v };
                }
            }
        }
    }
}

/// The scalar kernel for any element type.
pub(crate) fn scalar<T: Element>() -> Kernel<T> {
    Kernel {
        mr: SCALAR_MR,
        nr: SCALAR_NR,
        mc: 64,
        kc: 256,
        nc: 1024,
        run: scalar_kernel::<T>,
    }
}

/// The kernel for `T` on this CPU.
pub(crate) fn select<T: Element>(choice: KernelChoice) -> Kernel<T> {
    if choice == KernelChoice::Best {
        if let Some(k) = simd::<T>() {
            return k;
        }
    }
    scalar()
}

#[cfg(target_arch = "x86_64")]
fn simd<T: Element>() -> Option<Kernel<T>> {
    use crate::model::{gett_blocking, gett_simd_available};
    if !gett_simd_available(T::DTYPE) {
        return None;
    }
    let run: *const () = match T::DTYPE {
        DType::F64 => avx2::kernel_f64 as *const (),
        DType::F32 => avx2::kernel_f32 as *const (),
        DType::C32 | DType::C64 | DType::F16 | DType::BF16 => return None,
    };
    let b = gett_blocking(T::DTYPE);
    // the kernels below are written for these tiles
    debug_assert_eq!(
        (b.mr, b.nr),
        if T::DTYPE == DType::F64 {
            (6, 8)
        } else {
            (6, 16)
        }
    );
    Some(Kernel {
        mr: b.mr,
        nr: b.nr,
        mc: b.mc,
        kc: b.kc,
        nc: b.nc,
        // SAFETY: `T::DTYPE` identifies the concrete type (the trait is sealed), so the
        // kernel picked for it has exactly the signature `KernelFn<T>`.
        run: unsafe { std::mem::transmute::<*const (), KernelFn<T>>(run) },
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn simd<T: Element>() -> Option<Kernel<T>> {
    None
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! AVX2 + FMA kernels: six broadcast A values times two B vectors per step, twelve
    //! accumulator registers; one macro writes both element types.
    use super::Direct;
    use std::arch::x86_64::*;

    macro_rules! kernel {
        ($name:ident, $inner:ident, $t:ty, $doc:literal, lanes = $w:literal,
         $zero:ident, $load:ident, $store:ident, $bcast:ident, $fmadd:ident, $mul:ident,
         $set1:ident) => {
            #[doc = $doc]
            ///
            /// # Safety
            /// As for [`super::KernelFn`]; the CPU supports AVX2 and FMA (checked by
            /// `select`).
            pub(super) unsafe fn $name(
                k: usize,
                a: *const $t,
                b: *const $t,
                out: &mut [$t],
                direct: Option<&Direct<$t>>,
            ) {
                $inner(k, a, b, out, direct)
            }

            #[target_feature(enable = "avx2,fma")]
            unsafe fn $inner(
                k: usize,
                mut a: *const $t,
                mut b: *const $t,
                out: &mut [$t],
                direct: Option<&Direct<$t>>,
            ) {
                const NR: usize = 2 * $w;
                let z = $zero();
                if let Some(d) = direct {
                    // Fetch the C tile while the products accumulate.
                    for i in 0..6 {
                        let p = d.c.offset(*d.rows.add(i));
                        _mm_prefetch::<_MM_HINT_T0>(p.cast());
                        _mm_prefetch::<_MM_HINT_T0>(p.add(NR - 1).cast());
                    }
                }
                let mut c = [[z; 2]; 6];
                for _ in 0..k {
                    // SAFETY: each step reads NR values of the B panel and 6 of the A panel,
                    // k steps in all.
                    _mm_prefetch::<_MM_HINT_T0>(a.add(384 / std::mem::size_of::<$t>()).cast());
                    let b0 = $load(b);
                    let b1 = $load(b.add($w));
                    for (i, row) in c.iter_mut().enumerate() {
                        let x = $bcast(&*a.add(i));
                        row[0] = $fmadd(x, b0, row[0]);
                        row[1] = $fmadd(x, b1, row[1]);
                    }
                    a = a.add(6);
                    b = b.add(NR);
                }
                match direct {
                    None => {
                        for (i, row) in c.iter().enumerate() {
                            $store(out.as_mut_ptr().add(i * NR), row[0]);
                            $store(out.as_mut_ptr().add(i * NR + $w), row[1]);
                        }
                    }
                    Some(d) => {
                        let va = $set1(d.alpha);
                        let vb = $set1(d.beta);
                        for (i, row) in c.iter().enumerate() {
                            // SAFETY: row i of the tile is NR contiguous valid elements of C.
                            let p = d.c.offset(*d.rows.add(i));
                            let mut x0 = $mul(va, row[0]);
                            let mut x1 = $mul(va, row[1]);
                            if d.read {
                                x0 = $fmadd(vb, $load(p), x0);
                                x1 = $fmadd(vb, $load(p.add($w)), x1);
                            }
                            $store(p, x0);
                            $store(p.add($w), x1);
                        }
                    }
                }
            }
        };
    }

    kernel!(
        kernel_f64,
        inner_f64,
        f64,
        "`6×8` f64 tile.",
        lanes = 4,
        _mm256_setzero_pd,
        _mm256_loadu_pd,
        _mm256_storeu_pd,
        _mm256_broadcast_sd,
        _mm256_fmadd_pd,
        _mm256_mul_pd,
        _mm256_set1_pd
    );
    kernel!(
        kernel_f32,
        inner_f32,
        f32,
        "`6×16` f32 tile.",
        lanes = 8,
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_broadcast_ss,
        _mm256_fmadd_ps,
        _mm256_mul_ps,
        _mm256_set1_ps
    );
}

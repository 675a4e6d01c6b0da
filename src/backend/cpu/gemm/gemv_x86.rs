//! AVX2 + FMA kernels of the row-contiguous matrix-vector product: four rows' dot products
//! against one vector at a time, for `f32` and `f64`. The vector is loaded once for four rows,
//! the four rows are four memory streams in flight, and each row keeps two vector
//! accumulators (eight in all, enough to hide the FMA latency). Generic loops over four rows
//! vectorize across the rows instead, with a shuffle per element.

use std::arch::x86_64::*;

/// Defines `$name`: `out[q] = sum over l < k of rows[q][l] * x[l]` for four `$t` rows, `$w`
/// elements a vector, two vectors of each row a step, then one, then a scalar tail of four
/// independent sums. `$sum4` turns the four rows' accumulators into their four sums.
macro_rules! dot4_kernel {
    ($name:ident, $t:ty, $w:literal, $zero:ident, $load:ident, $fmadd:ident, $add:ident,
     $sum4:expr) => {
        /// `out[q] = sum over l < k of rows[q][l] * x[l]` for four rows.
        ///
        /// # Safety
        /// The CPU has AVX2 and FMA; `rows[q]` (q < 4) and `x` are valid for `k` elements
        /// each.
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn $name(rows: [*const $t; 4], x: *const $t, k: usize) -> [$t; 4] {
            let [r0, r1, r2, r3] = rows;
            let z = $zero();
            let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
            let (mut b0, mut b1, mut b2, mut b3) = (z, z, z, z);
            let mut l = 0;
            while l + 2 * $w <= k {
                let (xa, xb) = ($load(x.add(l)), $load(x.add(l + $w)));
                a0 = $fmadd($load(r0.add(l)), xa, a0);
                b0 = $fmadd($load(r0.add(l + $w)), xb, b0);
                a1 = $fmadd($load(r1.add(l)), xa, a1);
                b1 = $fmadd($load(r1.add(l + $w)), xb, b1);
                a2 = $fmadd($load(r2.add(l)), xa, a2);
                b2 = $fmadd($load(r2.add(l + $w)), xb, b2);
                a3 = $fmadd($load(r3.add(l)), xa, a3);
                b3 = $fmadd($load(r3.add(l + $w)), xb, b3);
                l += 2 * $w;
            }
            if l + $w <= k {
                let xa = $load(x.add(l));
                a0 = $fmadd($load(r0.add(l)), xa, a0);
                a1 = $fmadd($load(r1.add(l)), xa, a1);
                a2 = $fmadd($load(r2.add(l)), xa, a2);
                a3 = $fmadd($load(r3.add(l)), xa, a3);
                l += $w;
            }
            let acc = [$add(a0, b0), $add(a1, b1), $add(a2, b2), $add(a3, b3)];
            let mut s: [$t; 4] = $sum4(acc);
            while l < k {
                let xl = *x.add(l);
                s[0] += *r0.add(l) * xl;
                s[1] += *r1.add(l) * xl;
                s[2] += *r2.add(l) * xl;
                s[3] += *r3.add(l) * xl;
                l += 1;
            }
            s
        }
    };
}

dot4_kernel!(
    dot4_f64,
    f64,
    4,
    _mm256_setzero_pd,
    _mm256_loadu_pd,
    _mm256_fmadd_pd,
    _mm256_add_pd,
    |[a0, a1, a2, a3]: [__m256d; 4]| {
        // [a0 lo pair, a1 lo pair, a0 hi pair, a1 hi pair], the same for rows 2 and 3
        let (h01, h23) = (_mm256_hadd_pd(a0, a1), _mm256_hadd_pd(a2, a3));
        let lo = _mm256_permute2f128_pd::<0x20>(h01, h23);
        let hi = _mm256_permute2f128_pd::<0x31>(h01, h23);
        let mut s = [0.0f64; 4];
        _mm256_storeu_pd(s.as_mut_ptr(), _mm256_add_pd(lo, hi));
        s
    }
);

dot4_kernel!(
    dot4_f32,
    f32,
    8,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps,
    |[a0, a1, a2, a3]: [__m256; 4]| {
        // three pairwise stages leave [rows 0..4 of the low lanes | rows 0..4 of the high
        // lanes]
        let h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        let sum = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
        let mut s = [0.0f32; 4];
        _mm_storeu_ps(s.as_mut_ptr(), sum);
        s
    }
);

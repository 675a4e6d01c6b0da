//! AVX2 + FMA kernels of the row-contiguous matrix-vector product: four rows' dot products
//! against one vector at a time, for `f32` and `f64`. The vector is loaded once for four rows,
//! the four rows are four memory streams in flight, and each row keeps two vector
//! accumulators (eight in all, enough to hide the FMA latency). The generic loops of
//! `gemv.rs` were vectorized across the four rows instead, with a shuffle per element.

use std::arch::x86_64::*;

/// `out[q] = sum over l < k of rows[q][l] * x[l]` for four `f64` rows.
///
/// # Safety
/// The CPU has AVX2 and FMA; `rows[q]` (q < 4) and `x` are valid for `k` elements each.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dot4_f64(rows: [*const f64; 4], x: *const f64, k: usize) -> [f64; 4] {
    let [r0, r1, r2, r3] = rows;
    let z = _mm256_setzero_pd();
    let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
    let (mut b0, mut b1, mut b2, mut b3) = (z, z, z, z);
    let mut l = 0;
    while l + 8 <= k {
        let (xa, xb) = (_mm256_loadu_pd(x.add(l)), _mm256_loadu_pd(x.add(l + 4)));
        a0 = _mm256_fmadd_pd(_mm256_loadu_pd(r0.add(l)), xa, a0);
        b0 = _mm256_fmadd_pd(_mm256_loadu_pd(r0.add(l + 4)), xb, b0);
        a1 = _mm256_fmadd_pd(_mm256_loadu_pd(r1.add(l)), xa, a1);
        b1 = _mm256_fmadd_pd(_mm256_loadu_pd(r1.add(l + 4)), xb, b1);
        a2 = _mm256_fmadd_pd(_mm256_loadu_pd(r2.add(l)), xa, a2);
        b2 = _mm256_fmadd_pd(_mm256_loadu_pd(r2.add(l + 4)), xb, b2);
        a3 = _mm256_fmadd_pd(_mm256_loadu_pd(r3.add(l)), xa, a3);
        b3 = _mm256_fmadd_pd(_mm256_loadu_pd(r3.add(l + 4)), xb, b3);
        l += 8;
    }
    if l + 4 <= k {
        let xa = _mm256_loadu_pd(x.add(l));
        a0 = _mm256_fmadd_pd(_mm256_loadu_pd(r0.add(l)), xa, a0);
        a1 = _mm256_fmadd_pd(_mm256_loadu_pd(r1.add(l)), xa, a1);
        a2 = _mm256_fmadd_pd(_mm256_loadu_pd(r2.add(l)), xa, a2);
        a3 = _mm256_fmadd_pd(_mm256_loadu_pd(r3.add(l)), xa, a3);
        l += 4;
    }
    let (a0, a1) = (_mm256_add_pd(a0, b0), _mm256_add_pd(a1, b1));
    let (a2, a3) = (_mm256_add_pd(a2, b2), _mm256_add_pd(a3, b3));
    // [a0 lo pair, a1 lo pair, a0 hi pair, a1 hi pair], the same for rows 2 and 3
    let (h01, h23) = (_mm256_hadd_pd(a0, a1), _mm256_hadd_pd(a2, a3));
    let lo = _mm256_permute2f128_pd::<0x20>(h01, h23);
    let hi = _mm256_permute2f128_pd::<0x31>(h01, h23);
    let mut s = [0.0f64; 4];
    _mm256_storeu_pd(s.as_mut_ptr(), _mm256_add_pd(lo, hi));
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

/// `out[q] = sum over l < k of rows[q][l] * x[l]` for four `f32` rows.
///
/// # Safety
/// The CPU has AVX2 and FMA; `rows[q]` (q < 4) and `x` are valid for `k` elements each.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dot4_f32(rows: [*const f32; 4], x: *const f32, k: usize) -> [f32; 4] {
    let [r0, r1, r2, r3] = rows;
    let z = _mm256_setzero_ps();
    let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
    let (mut b0, mut b1, mut b2, mut b3) = (z, z, z, z);
    let mut l = 0;
    while l + 16 <= k {
        let (xa, xb) = (_mm256_loadu_ps(x.add(l)), _mm256_loadu_ps(x.add(l + 8)));
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r0.add(l)), xa, a0);
        b0 = _mm256_fmadd_ps(_mm256_loadu_ps(r0.add(l + 8)), xb, b0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r1.add(l)), xa, a1);
        b1 = _mm256_fmadd_ps(_mm256_loadu_ps(r1.add(l + 8)), xb, b1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r2.add(l)), xa, a2);
        b2 = _mm256_fmadd_ps(_mm256_loadu_ps(r2.add(l + 8)), xb, b2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r3.add(l)), xa, a3);
        b3 = _mm256_fmadd_ps(_mm256_loadu_ps(r3.add(l + 8)), xb, b3);
        l += 16;
    }
    if l + 8 <= k {
        let xa = _mm256_loadu_ps(x.add(l));
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r0.add(l)), xa, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r1.add(l)), xa, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r2.add(l)), xa, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r3.add(l)), xa, a3);
        l += 8;
    }
    let (a0, a1) = (_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1));
    let (a2, a3) = (_mm256_add_ps(a2, b2), _mm256_add_ps(a3, b3));
    // three pairwise stages leave [rows 0..4 of the low lanes | rows 0..4 of the high lanes]
    let h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    let sum = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    let mut s = [0.0f32; 4];
    _mm_storeu_ps(s.as_mut_ptr(), sum);
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

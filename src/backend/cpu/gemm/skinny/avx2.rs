//! AVX2 + FMA kernels: 2 vectors of rows × up to 6 columns (`axpy`), 2 rows × up to 6
//! columns with vectors along the depth (`dot`); tails by masked loads.
use std::arch::x86_64::*;

use super::Geometry;

/// Lanes `< n` of an f64 mask vector.
#[target_feature(enable = "avx2")]
unsafe fn mask_f64(n: usize) -> __m256i {
    _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), _mm256_setr_epi64x(0, 1, 2, 3))
}

/// Lanes `< n` of an f32 mask vector.
#[target_feature(enable = "avx2")]
unsafe fn mask_f32(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// Sum of an f64 vector's lanes.
#[target_feature(enable = "avx2")]
unsafe fn sum_f64(v: __m256d) -> f64 {
    let mut t = [0.0f64; 4];
    _mm256_storeu_pd(t.as_mut_ptr(), v);
    (t[0] + t[1]) + (t[2] + t[3])
}

/// Sum of an f32 vector's lanes.
#[target_feature(enable = "avx2")]
unsafe fn sum_f32(v: __m256) -> f32 {
    let mut t = [0.0f32; 8];
    _mm256_storeu_ps(t.as_mut_ptr(), v);
    ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))
}

/// Stores the first `n` (1 to 3) lanes of `v` at `p` by 128- and 64-bit stores (a masked
/// store is microcoded and slow on some AVX2 cores; a copy of `n` elements is a library call).
#[target_feature(enable = "avx2")]
unsafe fn store_first_f64(p: *mut f64, v: __m256d, n: usize) {
    let lo = _mm256_castpd256_pd128(v);
    if n >= 2 {
        _mm_storeu_pd(p, lo);
        if n == 3 {
            _mm_storel_pd(p.add(2), _mm256_extractf128_pd::<1>(v));
        }
    } else {
        _mm_storel_pd(p, lo);
    }
}

/// Stores the first `n` (1 to 7) lanes of `v` at `p` by 128-, 64- and 32-bit stores.
#[target_feature(enable = "avx2")]
unsafe fn store_first_f32(p: *mut f32, v: __m256, n: usize) {
    let mut half = _mm256_castps256_ps128(v);
    let mut p = p;
    let mut n = n;
    if n >= 4 {
        _mm_storeu_ps(p, half);
        half = _mm256_extractf128_ps::<1>(v);
        p = p.add(4);
        n -= 4;
    }
    if n >= 2 {
        _mm_storel_epi64(p.cast(), _mm_castps_si128(half));
        half = _mm_movehl_ps(half, half);
        p = p.add(2);
        n -= 2;
    }
    if n == 1 {
        _mm_store_ss(p, half);
    }
}

macro_rules! kernels {
    ($t:ty, $axpy:ident, $axpy_block:ident, $dot:ident, lanes = $w:literal, $maskf:ident,
     $store_first:ident, $zero:ident,
     $maskload:ident, $loadu:ident, $storeu:ident, $set1:ident, $fmadd:ident,
     $mul:ident, $sum:ident) => {
        /// `axpy` pass (see `super::axpy_pass`) of `NP` columns: a block of the full
        /// `2 × lanes` rows by plain loads and stores, a shorter one (the last rows of a
        /// group) by masked loads and partial stores.
        ///
        /// # Safety
        /// As for `super::axpy_pass`; the CPU supports AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn $axpy<const NP: usize>(g: &Geometry<$t>) {
            if g.len == 2 * $w {
                $axpy_block::<NP, true>(g)
            } else {
                $axpy_block::<NP, false>(g)
            }
        }

        /// The `axpy` pass above for blocks of `2 × lanes` rows (`FULL`) or fewer.
        ///
        /// # Safety
        /// As for `super::axpy_pass`, with `g.len == 2 × lanes` when `FULL`; the CPU
        /// supports AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $axpy_block<const NP: usize, const FULL: bool>(g: &Geometry<$t>) {
            let Geometry {
                len,
                kc,
                m,
                mcs,
                x,
                xrs,
                xcs,
                beta,
                first,
                acc,
                ts,
                ahead,
                fetch_m,
            } = *g;
            const RV: usize = 2;
            let counts = [len.min($w), len.saturating_sub($w).min($w)];
            let masks = if FULL {
                [_mm256_setzero_si256(); RV]
            } else {
                [$maskf(counts[0]), $maskf(counts[1])]
            };
            let mut c = [[$zero(); RV]; NP];
            if !first || beta != 0.0 {
                let scale = $set1(if first { beta } else { 1.0 });
                for (j, col) in c.iter_mut().enumerate() {
                    for (v, r) in col.iter_mut().enumerate() {
                        let p = acc.offset(j as isize * ts).add(v * $w);
                        let old = if FULL {
                            $loadu(p)
                        } else {
                            $maskload(p, masks[v])
                        };
                        *r = $mul(scale, old);
                    }
                }
            }
            if first {
                // the first depth block meets these rows of the result: fetch the
                // next blocks' from memory meanwhile
                for j in 0..NP {
                    for v in 0..RV {
                        let p = acc.offset(j as isize * ts).wrapping_add(ahead + v * $w);
                        _mm_prefetch::<_MM_HINT_T0>(p.cast());
                    }
                }
            }
            for l in 0..kc as isize {
                let mp = m.offset(l * mcs);
                if fetch_m {
                    for v in 0..RV {
                        _mm_prefetch::<_MM_HINT_T0>(mp.wrapping_add(ahead + v * $w).cast());
                    }
                }
                let mut mv = [$zero(); RV];
                for (v, e) in mv.iter_mut().enumerate() {
                    *e = if FULL {
                        $loadu(mp.add(v * $w))
                    } else {
                        $maskload(mp.add(v * $w), masks[v])
                    };
                }
                let xp = x.offset(l * xrs);
                for (j, col) in c.iter_mut().enumerate() {
                    let xv = $set1(*xp.offset(j as isize * xcs));
                    for (r, &mvv) in col.iter_mut().zip(&mv) {
                        *r = $fmadd(xv, mvv, *r);
                    }
                }
            }
            for (j, col) in c.iter().enumerate() {
                for (v, &r) in col.iter().enumerate() {
                    let p = acc.offset(j as isize * ts).add(v * $w);
                    if FULL || counts[v] == $w {
                        $storeu(p, r);
                    } else if counts[v] > 0 {
                        $store_first(p, r, counts[v]);
                    }
                }
            }
        }

        /// `dot` pass (see `super::dot_pass`) of `NP` columns over the first two rows;
        /// the row sums go to `out`.
        ///
        /// # Safety
        /// As for `super::dot_pass`; the CPU supports AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn $dot<const NP: usize>(
            kc: usize,
            rows: [*const $t; super::DOT_ROWS],
            x: *const $t,
            xcs: isize,
            out: *mut [$t; super::P_STEP],
        ) {
            const R: usize = 2;
            let mut c = [[$zero(); NP]; R];
            let xs: [*const $t; NP] = std::array::from_fn(|j| x.offset(j as isize * xcs));
            let mut o = 0;
            while o + $w <= kc {
                let mv: [_; R] = std::array::from_fn(|q| $loadu(rows[q].add(o)));
                for (j, &xp) in xs.iter().enumerate() {
                    let xv = $loadu(xp.add(o));
                    for (row, &mvv) in c.iter_mut().zip(&mv) {
                        row[j] = $fmadd(mvv, xv, row[j]);
                    }
                }
                o += $w;
            }
            if o < kc {
                let k = $maskf(kc - o);
                let mv: [_; R] = std::array::from_fn(|q| $maskload(rows[q].add(o), k));
                for (j, &xp) in xs.iter().enumerate() {
                    let xv = $maskload(xp.add(o), k);
                    for (row, &mvv) in c.iter_mut().zip(&mv) {
                        row[j] = $fmadd(mvv, xv, row[j]);
                    }
                }
            }
            for (q, row) in c.iter().enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    (*out.add(q))[j] = $sum(v);
                }
            }
        }
    };
}

kernels!(
    f64,
    axpy_f64,
    axpy_block_f64,
    dot_f64,
    lanes = 4,
    mask_f64,
    store_first_f64,
    _mm256_setzero_pd,
    _mm256_maskload_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_set1_pd,
    _mm256_fmadd_pd,
    _mm256_mul_pd,
    sum_f64
);
kernels!(
    f32,
    axpy_f32,
    axpy_block_f32,
    dot_f32,
    lanes = 8,
    mask_f32,
    store_first_f32,
    _mm256_setzero_ps,
    _mm256_maskload_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    _mm256_mul_ps,
    sum_f32
);

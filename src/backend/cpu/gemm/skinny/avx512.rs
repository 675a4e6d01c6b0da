//! AVX-512F kernels: 4 vectors of rows × up to 6 columns (`axpy`), 4 rows × up to 6
//! columns with vectors along the depth (`dot`); tails by masked loads.
use std::arch::x86_64::*;

use super::Geometry;

macro_rules! kernels {
    ($t:ty, $axpy:ident, $dot:ident, lanes = $w:literal, $mask:ty, $zero:ident,
     $maskz:ident, $loadu:ident, $maskstore:ident, $set1:ident, $fmadd:ident,
     $mul:ident, $reduce:ident) => {
        /// `axpy` pass (see `super::axpy_pass`) of `NP` columns.
        ///
        /// # Safety
        /// As for `super::axpy_pass`; the CPU supports AVX-512F.
        #[allow(clippy::too_many_arguments)] // one pass's geometry
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn $axpy<const NP: usize>(g: &Geometry<$t>) {
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
            const RV: usize = 4;
            let masks: [$mask; RV] = std::array::from_fn(|v| {
                let n = len.saturating_sub(v * $w).min($w);
                ((1u64 << n) - 1) as $mask
            });
            let mut c = [[$zero(); RV]; NP];
            if !first || beta != 0.0 {
                let scale = $set1(if first { beta } else { 1.0 });
                for (j, col) in c.iter_mut().enumerate() {
                    for (v, r) in col.iter_mut().enumerate() {
                        let p = acc.offset(j as isize * ts).add(v * $w);
                        *r = $mul(scale, $maskz(masks[v], p));
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
                let mv: [_; RV] = std::array::from_fn(|v| $maskz(masks[v], mp.add(v * $w)));
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
                    $maskstore(acc.offset(j as isize * ts).add(v * $w), masks[v], r);
                }
            }
        }

        /// `dot` pass (see `super::dot_pass`) of `NP` columns; the row sums go to `out`.
        ///
        /// # Safety
        /// As for `super::dot_pass`; the CPU supports AVX-512F.
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn $dot<const NP: usize>(
            kc: usize,
            rows: [*const $t; super::DOT_ROWS],
            x: *const $t,
            xcs: isize,
            out: *mut [$t; super::P_STEP],
        ) {
            let mut c = [[$zero(); NP]; super::DOT_ROWS];
            let xs: [*const $t; NP] = std::array::from_fn(|j| x.offset(j as isize * xcs));
            let mut o = 0;
            while o + $w <= kc {
                let mv: [_; super::DOT_ROWS] = std::array::from_fn(|q| $loadu(rows[q].add(o)));
                for (j, &xp) in xs.iter().enumerate() {
                    let xv = $loadu(xp.add(o));
                    for (row, &mvv) in c.iter_mut().zip(&mv) {
                        row[j] = $fmadd(mvv, xv, row[j]);
                    }
                }
                o += $w;
            }
            if o < kc {
                let k = ((1u64 << (kc - o)) - 1) as $mask;
                let mv: [_; super::DOT_ROWS] = std::array::from_fn(|q| $maskz(k, rows[q].add(o)));
                for (j, &xp) in xs.iter().enumerate() {
                    let xv = $maskz(k, xp.add(o));
                    for (row, &mvv) in c.iter_mut().zip(&mv) {
                        row[j] = $fmadd(mvv, xv, row[j]);
                    }
                }
            }
            for (q, row) in c.iter().enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    (*out.add(q))[j] = $reduce(v);
                }
            }
        }
    };
}

kernels!(
    f64,
    axpy_f64,
    dot_f64,
    lanes = 8,
    __mmask8,
    _mm512_setzero_pd,
    _mm512_maskz_loadu_pd,
    _mm512_loadu_pd,
    _mm512_mask_storeu_pd,
    _mm512_set1_pd,
    _mm512_fmadd_pd,
    _mm512_mul_pd,
    _mm512_reduce_add_pd
);
kernels!(
    f32,
    axpy_f32,
    dot_f32,
    lanes = 16,
    __mmask16,
    _mm512_setzero_ps,
    _mm512_maskz_loadu_ps,
    _mm512_loadu_ps,
    _mm512_mask_storeu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    _mm512_mul_ps,
    _mm512_reduce_add_ps
);

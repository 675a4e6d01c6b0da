//! AVX2 micro-kernels: in-register transposes of one W×W tile, W = 32 bytes / element size
//! (f32 8×8, f64 and Complex32 4×4, Complex64 2×2), with the scaling fused into the stores.
//!
//! Every kernel reads row `k` of the tile (`W` consecutive elements) at `a + k*lda` and writes
//! column `i` (`W` consecutive elements) at `b + i*ldb`; strides are in bytes.
//!
//! # Safety (all kernels)
//! The CPU supports AVX2; for `k, i < W`, the `W` elements at `a + k*lda` are
//! readable and the `W` elements at `b + i*ldb` are writable (and readable when `M == AXPBY`)
//! and overlap no source element. With `NT`, every `b + i*ldb` is aligned to the
//! register size (32 bytes), and the caller issues a store fence before the data is read
//! by another thread.

use std::arch::x86_64::*;

use super::{AXPBY, COPY};

/// Stores 8 f32 lanes, scaled: `v`, `al*v` or `al*v + be*old`.
#[inline(always)]
unsafe fn store_ps<const M: u8, const NT: bool>(dst: *mut u8, v: __m256, al: f64, be: f64) {
    let p = dst as *mut f32;
    let v = if M == COPY {
        v
    } else {
        let s = _mm256_mul_ps(_mm256_set1_ps(al as f32), v);
        if M == AXPBY {
            _mm256_add_ps(
                s,
                _mm256_mul_ps(_mm256_set1_ps(be as f32), _mm256_loadu_ps(p)),
            )
        } else {
            s
        }
    };
    if NT {
        // Non-temporal: the caller checked that `dst` is 32-byte aligned.
        _mm256_stream_ps(p, v);
    } else {
        _mm256_storeu_ps(p, v);
    }
}

/// Stores 4 f64 lanes, scaled.
#[inline(always)]
unsafe fn store_pd<const M: u8, const NT: bool>(dst: *mut u8, v: __m256d, al: f64, be: f64) {
    let p = dst as *mut f64;
    let v = if M == COPY {
        v
    } else {
        let s = _mm256_mul_pd(_mm256_set1_pd(al), v);
        if M == AXPBY {
            _mm256_add_pd(s, _mm256_mul_pd(_mm256_set1_pd(be), _mm256_loadu_pd(p)))
        } else {
            s
        }
    };
    if NT {
        // Non-temporal: the caller checked that `dst` is 32-byte aligned.
        _mm256_stream_pd(p, v);
    } else {
        _mm256_storeu_pd(p, v);
    }
}

/// 8×8 transpose of f32 rows.
#[inline(always)]
unsafe fn tr8(r: [__m256; 8]) -> [__m256; 8] {
    let [r0, r1, r2, r3, r4, r5, r6, r7] = r;
    // Interleave pairs of rows, then pairs of pairs, then swap 128-bit halves.
    let t0 = _mm256_unpacklo_ps(r0, r1);
    let t1 = _mm256_unpackhi_ps(r0, r1);
    let t2 = _mm256_unpacklo_ps(r2, r3);
    let t3 = _mm256_unpackhi_ps(r2, r3);
    let t4 = _mm256_unpacklo_ps(r4, r5);
    let t5 = _mm256_unpackhi_ps(r4, r5);
    let t6 = _mm256_unpacklo_ps(r6, r7);
    let t7 = _mm256_unpackhi_ps(r6, r7);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

/// f32, 8×8.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn t_f32<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    let r = |k: isize| _mm256_loadu_ps(a.offset(k * lda) as *const f32);
    let c = tr8([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)]);
    for (i, v) in c.into_iter().enumerate() {
        store_ps::<M, NT>(b.offset(i as isize * ldb), v, al, be);
    }
}

/// 4×4 transpose of 8-byte units.
#[inline(always)]
unsafe fn tr4(r: [__m256d; 4]) -> [__m256d; 4] {
    let [r0, r1, r2, r3] = r;
    let t0 = _mm256_unpacklo_pd(r0, r1);
    let t1 = _mm256_unpackhi_pd(r0, r1);
    let t2 = _mm256_unpacklo_pd(r2, r3);
    let t3 = _mm256_unpackhi_pd(r2, r3);
    [
        _mm256_permute2f128_pd::<0x20>(t0, t2),
        _mm256_permute2f128_pd::<0x20>(t1, t3),
        _mm256_permute2f128_pd::<0x31>(t0, t2),
        _mm256_permute2f128_pd::<0x31>(t1, t3),
    ]
}

/// Transposes four rows of four 8-byte units read from `a`.
#[inline(always)]
unsafe fn tr4x8(a: *const u8, lda: isize) -> [__m256d; 4] {
    let r = |k: isize| _mm256_loadu_pd(a.offset(k * lda) as *const f64);
    tr4([r(0), r(1), r(2), r(3)])
}

/// f64, 4×4.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn t_f64<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    for (i, v) in tr4x8(a, lda).into_iter().enumerate() {
        store_pd::<M, NT>(b.offset(i as isize * ldb), v, al, be);
    }
}

/// Complex32 (8-byte units, f32 arithmetic with real scalars), 4×4.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn t_c32<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    for (i, v) in tr4x8(a, lda).into_iter().enumerate() {
        store_ps::<M, NT>(b.offset(i as isize * ldb), _mm256_castpd_ps(v), al, be);
    }
}

/// Complex64 (16-byte units, f64 arithmetic with real scalars), 2×2.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn t_c64<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    let r0 = _mm256_loadu_pd(a as *const f64);
    let r1 = _mm256_loadu_pd(a.offset(lda) as *const f64);
    store_pd::<M, NT>(b, _mm256_permute2f128_pd::<0x20>(r0, r1), al, be);
    store_pd::<M, NT>(
        b.offset(ldb),
        _mm256_permute2f128_pd::<0x31>(r0, r1),
        al,
        be,
    );
}

/// Defines `$row`: `n` micro-tiles of `$micro` side by side along the tile's B rows (the
/// `k`-th at `a + k·W·lda` and `b + k·32` bytes, W the micro-tile width), in one call with
/// the micro-kernel inlined: a tile's rows of whole micro-tiles without an indirect call per
/// micro-tile.
///
/// # Safety
/// As for `$micro`, for each of the `n` micro-tiles.
macro_rules! row_kernel {
    ($row:ident, $micro:ident, $w:expr) => {
        #[target_feature(enable = "avx2")]
        pub(crate) unsafe fn $row<const M: u8, const NT: bool>(
            a: *const u8,
            lda: isize,
            b: *mut u8,
            ldb: isize,
            al: f64,
            be: f64,
            n: usize,
        ) {
            let step = $w as isize * lda;
            for k in 0..n {
                // SAFETY: the caller's promise for micro-tile `k`.
                unsafe {
                    $micro::<M, NT>(a.offset(k as isize * step), lda, b.add(32 * k), ldb, al, be)
                };
            }
        }
    };
}

row_kernel!(r_f32, t_f32, 8);
row_kernel!(r_f64, t_f64, 4);
row_kernel!(r_c32, t_c32, 4);
row_kernel!(r_c64, t_c64, 2);

/// A lane mask of the first `n` 32-bit lanes (sign bits set), for masked moves.
#[inline(always)]
unsafe fn first32(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// A lane mask of the first `n` 64-bit lanes.
#[inline(always)]
unsafe fn first64(n: usize) -> __m256i {
    _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), _mm256_setr_epi64x(0, 1, 2, 3))
}

/// Masked store of the f32 lanes of `m`, scaled as [`store_ps`] (ordinary stores).
#[inline(always)]
unsafe fn store_ps_mask<const M: u8>(dst: *mut u8, m: __m256i, v: __m256, al: f64, be: f64) {
    let p = dst as *mut f32;
    let v = if M == COPY {
        v
    } else {
        let s = _mm256_mul_ps(_mm256_set1_ps(al as f32), v);
        if M == AXPBY {
            let old = _mm256_maskload_ps(p, m);
            _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(be as f32), old))
        } else {
            s
        }
    };
    _mm256_maskstore_ps(p, m, v);
}

/// Masked store of the f64 lanes of `m`, scaled as [`store_pd`] (ordinary stores).
#[inline(always)]
unsafe fn store_pd_mask<const M: u8>(dst: *mut u8, m: __m256i, v: __m256d, al: f64, be: f64) {
    let p = dst as *mut f64;
    let v = if M == COPY {
        v
    } else {
        let s = _mm256_mul_pd(_mm256_set1_pd(al), v);
        if M == AXPBY {
            let old = _mm256_maskload_pd(p, m);
            _mm256_add_pd(s, _mm256_mul_pd(_mm256_set1_pd(be), old))
        } else {
            s
        }
    };
    _mm256_maskstore_pd(p, m, v);
}

// Edge micro-kernels: the W×W kernels above restricted to the first `ri` units of each
// source row (`ri <= W`) and the first `rj` source rows (`rj <= W`), for the right and
// bottom edges of a tile. Only those units are read and written (masked moves, which touch
// no memory in masked-off lanes); rows past `rj` enter the transposition as zeros and their
// lanes are never stored.
//
// Safety: as the full kernels, for `k < rj` and `i < ri` and the first `ri` (resp. `rj`)
// units of each row only; no non-temporal stores.

/// f32 edge, up to 8×8.
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)] // the micro-kernel's operands plus the edge extents
pub(crate) unsafe fn e_f32<const M: u8>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
    ri: usize,
    rj: usize,
) {
    let (mi, mj) = (first32(ri), first32(rj));
    let r = |k: usize| {
        if k < rj {
            _mm256_maskload_ps(a.offset(k as isize * lda) as *const f32, mi)
        } else {
            _mm256_setzero_ps()
        }
    };
    let c = tr8([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)]);
    for (i, v) in c.into_iter().enumerate().take(ri) {
        store_ps_mask::<M>(b.offset(i as isize * ldb), mj, v, al, be);
    }
}

/// Loads rows of four 8-byte units, the first `ri` units of the first `rj` rows.
#[inline(always)]
unsafe fn rows4_mask(a: *const u8, lda: isize, ri: usize, rj: usize) -> [__m256d; 4] {
    let mi = first64(ri);
    let r = |k: usize| {
        if k < rj {
            _mm256_maskload_pd(a.offset(k as isize * lda) as *const f64, mi)
        } else {
            _mm256_setzero_pd()
        }
    };
    [r(0), r(1), r(2), r(3)]
}

/// Defines an edge kernel over four rows of four 8-byte units, stored with `rj`'s lane mask
/// (`$mj`) after `$cast`.
macro_rules! edge4_kernel {
    ($(#[$doc:meta])* $name:ident, $store:ident, $cast:expr, $mj:expr) => {
        $(#[$doc])*
        #[target_feature(enable = "avx2")]
        #[allow(clippy::too_many_arguments)] // the micro-kernel's operands plus the extents
        pub(crate) unsafe fn $name<const M: u8>(
            a: *const u8,
            lda: isize,
            b: *mut u8,
            ldb: isize,
            al: f64,
            be: f64,
            ri: usize,
            rj: usize,
        ) {
            let mj = $mj(rj);
            for (i, v) in tr4(rows4_mask(a, lda, ri, rj)).into_iter().enumerate().take(ri) {
                $store::<M>(b.offset(i as isize * ldb), mj, $cast(v), al, be);
            }
        }
    };
}

edge4_kernel!(
    /// f64 edge, up to 4×4.
    e_f64,
    store_pd_mask,
    |v| v,
    first64
);
edge4_kernel!(
    /// Complex32 edge (8-byte units, f32 arithmetic), up to 4×4.
    e_c32,
    store_ps_mask,
    _mm256_castpd_ps,
    |n: usize| first32(2 * n)
);

/// Complex64 edge (16-byte units, f64 arithmetic), up to 2×2.
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)] // the micro-kernel's operands plus the edge extents
pub(crate) unsafe fn e_c64<const M: u8>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
    ri: usize,
    rj: usize,
) {
    let (mi, mj) = (first64(2 * ri), first64(2 * rj));
    let r0 = _mm256_maskload_pd(a as *const f64, mi);
    let r1 = if rj > 1 {
        _mm256_maskload_pd(a.offset(lda) as *const f64, mi)
    } else {
        _mm256_setzero_pd()
    };
    store_pd_mask::<M>(b, mj, _mm256_permute2f128_pd::<0x20>(r0, r1), al, be);
    if ri > 1 {
        store_pd_mask::<M>(
            b.offset(ldb),
            mj,
            _mm256_permute2f128_pd::<0x31>(r0, r1),
            al,
            be,
        );
    }
}

/// The 32 bytes made of `n` (0 < n < 32, a multiple of 4: every element size a joined copy
/// takes is) bytes at `a` followed by `32 - n` bytes at `b`: two unaligned loads, of the 32
/// bytes ending at `a + n` and of the 32 bytes from `b`, each rotated into place by one dword
/// permute and blended: no scratch block composed by byte copies, whose wide reload of narrow
/// stores stalls (docs/TUNING.md, "Range copies stream whole lines").
///
/// # Safety
/// The CPU has AVX2; `a + n - 32 .. a + n` and `b .. b + 32` are readable.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn join_block(a: *const u8, n: usize, b: *const u8) -> __m256i {
    debug_assert!(n > 0 && n < 32 && n.is_multiple_of(4));
    let k = _mm256_set1_epi32((n / 4) as i32);
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let lo = _mm256_loadu_si256(a.add(n).sub(32) as *const __m256i);
    let hi = _mm256_loadu_si256(b as *const __m256i);
    // dword i < k: lo's dword 8 - k + i (the bytes of `a`); else hi's dword i - k (the
    // permute reads the low three bits of each index)
    let x = _mm256_permutevar8x32_epi32(
        lo,
        _mm256_sub_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(8)), k),
    );
    let y = _mm256_permutevar8x32_epi32(hi, _mm256_sub_epi32(lane, k));
    _mm256_blendv_epi8(y, x, _mm256_cmpgt_epi32(k, lane))
}

super::streaming_copies_for!(
    "avx2",
    32,
    // a range read as streams in runs of two lines: shorter runs moved less (docs/TUNING.md)
    128,
    __m256i,
    _mm256_loadu_si256,
    _mm256_stream_si256,
    join_block
);

//! AVX2 micro-kernels: in-register transposes of one W×W tile, W = 32 bytes / element size
//! (f32 8×8, f64 and Complex32 4×4, Complex64 2×2), with the scaling fused into the stores,
//! and 16×16 copies of 2-byte units (f16, bf16).
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

/// 16×16 transpose of 2-byte units, one row per register: each half of the rows by
/// [`tr8x16h`], then the lanes of the two halves' registers exchanged.
#[inline(always)]
unsafe fn tr16h(r: [__m256i; 16]) -> [__m256i; 16] {
    let lo = tr8x16h([r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]]);
    let hi = tr8x16h([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]);
    let mut out = r;
    for (k, &col) in COL8.iter().enumerate() {
        out[col] = _mm256_permute2x128_si256::<0x20>(lo[k], hi[k]);
        out[col + 8] = _mm256_permute2x128_si256::<0x31>(lo[k], hi[k]);
    }
    out
}

/// The 8×16 to 16×8 transpose of 2-byte units of rows `r` (8 rows of 16): interleaves of
/// 16-, 32- and 64-bit units within 128-bit lanes; register `k` holds, in its low lane,
/// column `COL8[k]` of the 8 rows and, in its high lane, column `COL8[k] + 8`.
#[inline(always)]
unsafe fn tr8x16h(r: [__m256i; 8]) -> [__m256i; 8] {
    let a = [
        _mm256_unpacklo_epi16(r[0], r[1]),
        _mm256_unpackhi_epi16(r[0], r[1]),
        _mm256_unpacklo_epi16(r[2], r[3]),
        _mm256_unpackhi_epi16(r[2], r[3]),
        _mm256_unpacklo_epi16(r[4], r[5]),
        _mm256_unpackhi_epi16(r[4], r[5]),
        _mm256_unpacklo_epi16(r[6], r[7]),
        _mm256_unpackhi_epi16(r[6], r[7]),
    ];
    let b = [
        _mm256_unpacklo_epi32(a[0], a[2]),
        _mm256_unpacklo_epi32(a[1], a[3]),
        _mm256_unpackhi_epi32(a[0], a[2]),
        _mm256_unpackhi_epi32(a[1], a[3]),
        _mm256_unpacklo_epi32(a[4], a[6]),
        _mm256_unpacklo_epi32(a[5], a[7]),
        _mm256_unpackhi_epi32(a[4], a[6]),
        _mm256_unpackhi_epi32(a[5], a[7]),
    ];
    [
        _mm256_unpacklo_epi64(b[0], b[4]),
        _mm256_unpacklo_epi64(b[1], b[5]),
        _mm256_unpacklo_epi64(b[2], b[6]),
        _mm256_unpacklo_epi64(b[3], b[7]),
        _mm256_unpackhi_epi64(b[0], b[4]),
        _mm256_unpackhi_epi64(b[1], b[5]),
        _mm256_unpackhi_epi64(b[2], b[6]),
        _mm256_unpackhi_epi64(b[3], b[7]),
    ]
}

/// Columns of [`tr8x16h`]'s registers.
const COL8: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];

/// 2-byte units, 16×16, ordinary stores: each half of the rows transposed on its own
/// ([`tr8x16h`]) and stored by 16-byte halves of B's rows (no cross-lane stage, no spills).
#[inline(always)]
unsafe fn t_h16_halves(a: *const u8, lda: isize, b: *mut u8, ldb: isize) {
    for h in 0..2 {
        let mut r = [_mm256_setzero_si256(); 8];
        for (k, row) in r.iter_mut().enumerate() {
            *row = _mm256_loadu_si256(a.offset((8 * h + k) as isize * lda) as *const __m256i);
        }
        for (k, v) in tr8x16h(r).into_iter().enumerate() {
            let p = b.offset(COL8[k] as isize * ldb).add(16 * h);
            _mm_storeu_si128(p as *mut __m128i, _mm256_castsi256_si128(v));
            _mm_storeu_si128(
                p.offset(8 * ldb) as *mut __m128i,
                _mm256_extracti128_si256::<1>(v),
            );
        }
    }
}

/// 2-byte units (f16, bf16), 16×16, copied (`M` is [`COPY`]: the bits move unchanged).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn t_h16<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    _al: f64,
    _be: f64,
) {
    debug_assert_eq!(M, COPY);
    if !NT {
        return t_h16_halves(a, lda, b, ldb);
    }
    let mut r = [_mm256_setzero_si256(); 16];
    for (k, row) in r.iter_mut().enumerate() {
        *row = _mm256_loadu_si256(a.offset(k as isize * lda) as *const __m256i);
    }
    for (i, v) in tr16h(r).into_iter().enumerate() {
        let p = b.offset(i as isize * ldb) as *mut __m256i;
        if NT {
            // Non-temporal: the caller checked that B's rows are 32-byte aligned.
            _mm256_stream_si256(p, v);
        } else {
            _mm256_storeu_si256(p, v);
        }
    }
}

/// The 16×16 transposes of 2-byte units at `a` and `a + 16·lda`, in the register rows of B
/// (`[first, second]`).
#[inline(always)]
unsafe fn tr16h_pair(a: *const u8, lda: isize) -> [[__m256i; 16]; 2] {
    let mut r = [[_mm256_setzero_si256(); 16]; 2];
    for (k, row) in r.iter_mut().flatten().enumerate() {
        *row = _mm256_loadu_si256(a.offset(k as isize * lda) as *const __m256i);
    }
    [tr16h(r[0]), tr16h(r[1])]
}

/// `n` micro-tiles of [`t_h16`] side by side along B's rows (the `k`-th at `a + 16k·lda`
/// and `b + 32k` bytes). Streamed (`NT`), they run in pairs that write each line of a B row
/// by two consecutive stores: one micro-tile writes half a line of 16 rows, more open lines
/// than the core's write-combining buffers hold, and lines evicted half written cost a
/// read of the line each.
///
/// # Safety
/// As [`t_h16`], for each of the `n` micro-tiles.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn r_h16<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
    n: usize,
) {
    let step = 16 * lda;
    let mut k = 0;
    if NT && n > 1 {
        // a first micro-tile in the second half of its lines runs alone
        if b as usize & 32 != 0 {
            t_h16::<M, NT>(a, lda, b, ldb, al, be);
            k = 1;
        }
        while k + 2 <= n {
            let [x, y] = tr16h_pair(a.offset(k as isize * step), lda);
            let pb = b.add(32 * k);
            for i in 0..16 {
                let p = pb.offset(i as isize * ldb) as *mut __m256i;
                // Non-temporal: the caller checked that B's rows are 32-byte aligned.
                _mm256_stream_si256(p, x[i]);
                _mm256_stream_si256(p.add(1), y[i]);
            }
            k += 2;
        }
    }
    for k in k..n {
        t_h16::<M, NT>(a.offset(k as isize * step), lda, b.add(32 * k), ldb, al, be);
    }
}

/// The `n` bytes at `p` (`n < 8`, even) as the low bytes of a `u64`: exactly those bytes
/// are read.
#[inline(always)]
unsafe fn read_first_u64(p: *const u8, n: usize) -> u64 {
    let mut v = 0;
    if n & 4 != 0 {
        v = u64::from((p as *const u32).read_unaligned());
    }
    if n & 2 != 0 {
        v |= u64::from((p.add(n & 4) as *const u16).read_unaligned()) << (8 * (n & 4));
    }
    v
}

/// The `n` bytes at `p` (`n <= 32`, even) in the low bytes of a register, zeros above:
/// exactly those bytes are read (AVX2 has no 16-bit masked load).
#[inline(always)]
unsafe fn load_first(p: *const u8, n: usize) -> __m256i {
    if n == 32 {
        return _mm256_loadu_si256(p as *const __m256i);
    }
    let half = |p: *const u8, n: usize| {
        let (lo, hi) = if n >= 8 {
            (
                (p as *const u64).read_unaligned(),
                read_first_u64(p.add(8), n - 8),
            )
        } else {
            (read_first_u64(p, n), 0)
        };
        _mm_set_epi64x(hi as i64, lo as i64)
    };
    if n >= 16 {
        _mm256_set_m128i(
            half(p.add(16), n - 16),
            _mm_loadu_si128(p as *const __m128i),
        )
    } else {
        _mm256_set_m128i(_mm_setzero_si128(), half(p, n))
    }
}

/// Stores the low `n` bytes of `v` at `p` (`n <= 32`, even) by 128-, 64-, 32- and 16-bit
/// stores: nothing past them is written (a masked store is microcoded on some AVX2 cores).
#[inline(always)]
unsafe fn store_first(p: *mut u8, v: __m256i, n: usize) {
    if n == 32 {
        _mm256_storeu_si256(p as *mut __m256i, v);
        return;
    }
    let (mut p, mut n, mut x) = (p, n, _mm256_castsi256_si128(v));
    if n >= 16 {
        _mm_storeu_si128(p as *mut __m128i, x);
        x = _mm256_extracti128_si256::<1>(v);
        p = p.add(16);
        n -= 16;
    }
    if n >= 8 {
        _mm_storel_epi64(p as *mut __m128i, x);
        x = _mm_srli_si128::<8>(x);
        p = p.add(8);
        n -= 8;
    }
    let mut q = _mm_cvtsi128_si64(x) as u64;
    if n & 4 != 0 {
        (p as *mut u32).write_unaligned(q as u32);
        q >>= 32;
        p = p.add(4);
    }
    if n & 2 != 0 {
        (p as *mut u16).write_unaligned(q as u16);
    }
}

/// 2-byte units edge, up to 16×16: the first `ri` units of the first `rj` rows, read and
/// written by exact-width partial moves that touch nothing outside that corner.
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)] // the micro-kernel's operands plus the edge extents
pub(crate) unsafe fn e_h16<const M: u8>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    _al: f64,
    _be: f64,
    ri: usize,
    rj: usize,
) {
    debug_assert_eq!(M, COPY);
    debug_assert!(ri <= 16 && rj <= 16);
    let mut r = [_mm256_setzero_si256(); 16];
    for (k, row) in r.iter_mut().enumerate().take(rj) {
        *row = load_first(a.offset(k as isize * lda), 2 * ri);
    }
    for (i, v) in tr16h(r).into_iter().enumerate().take(ri) {
        store_first(b.offset(i as isize * ldb), v, 2 * rj);
    }
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

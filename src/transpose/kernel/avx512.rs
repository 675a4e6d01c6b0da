//! AVX-512 micro-kernels: in-register transposes of one W×W tile, W = 64 bytes / element
//! size (f32 16×16, f64 and Complex32 8×8, Complex64 4×4), by a butterfly of two-source
//! permutes: stage `s` swaps the off-diagonal `s×s` blocks of every `2s×2s` block, so after
//! the stages `s = 1, 2, 4, ...` element `(k, i)` sits at `(i, k)`.
//!
//! Layout and safety contract as in [`super::avx2`], with AVX-512F instead of AVX2 and
//! 64-byte alignment for the non-temporal (`NT`) variants.

use std::arch::x86_64::*;

use super::{AXPBY, COPY};

/// Permute indices of one butterfly stage over `n` lanes with lane stride `s`:
/// `lo` builds the new row `k`, `hi` the new row `k + s` (bit `n` of an index picks the
/// second source).
const fn stage<const N: usize>(s: usize) -> ([i64; N], [i64; N]) {
    let mut lo = [0i64; N];
    let mut hi = [0i64; N];
    let mut i = 0;
    while i < N {
        if i & s == 0 {
            lo[i] = i as i64;
            hi[i] = (i + s) as i64;
        } else {
            lo[i] = (N + i - s) as i64;
            hi[i] = (N + i) as i64;
        }
        i += 1;
    }
    (lo, hi)
}

const fn narrow(x: [i64; 16]) -> [i32; 16] {
    let mut y = [0i32; 16];
    let mut i = 0;
    while i < 16 {
        y[i] = x[i] as i32;
        i += 1;
    }
    y
}

const S16: [([i64; 16], [i64; 16]); 4] = [
    stage::<16>(1),
    stage::<16>(2),
    stage::<16>(4),
    stage::<16>(8),
];
const S8: [([i64; 8], [i64; 8]); 3] = [stage::<8>(1), stage::<8>(2), stage::<8>(4)];
static IDX32: [[[i32; 16]; 2]; 4] = [
    [narrow(S16[0].0), narrow(S16[0].1)],
    [narrow(S16[1].0), narrow(S16[1].1)],
    [narrow(S16[2].0), narrow(S16[2].1)],
    [narrow(S16[3].0), narrow(S16[3].1)],
];
static IDX64: [[[i64; 8]; 2]; 3] = [[S8[0].0, S8[0].1], [S8[1].0, S8[1].1], [S8[2].0, S8[2].1]];

#[inline(always)]
unsafe fn store_ps<const M: u8, const NT: bool>(dst: *mut u8, v: __m512, al: f64, be: f64) {
    let p = dst as *mut f32;
    let v = if M == COPY {
        v
    } else {
        let s = _mm512_mul_ps(_mm512_set1_ps(al as f32), v);
        if M == AXPBY {
            _mm512_add_ps(
                s,
                _mm512_mul_ps(_mm512_set1_ps(be as f32), _mm512_loadu_ps(p)),
            )
        } else {
            s
        }
    };
    if NT {
        // Non-temporal: the caller checked that `dst` is 64-byte aligned.
        _mm512_stream_ps(p, v);
    } else {
        _mm512_storeu_ps(p, v);
    }
}

#[inline(always)]
unsafe fn store_pd<const M: u8, const NT: bool>(dst: *mut u8, v: __m512d, al: f64, be: f64) {
    let p = dst as *mut f64;
    let v = if M == COPY {
        v
    } else {
        let s = _mm512_mul_pd(_mm512_set1_pd(al), v);
        if M == AXPBY {
            _mm512_add_pd(s, _mm512_mul_pd(_mm512_set1_pd(be), _mm512_loadu_pd(p)))
        } else {
            s
        }
    };
    if NT {
        // Non-temporal: the caller checked that `dst` is 64-byte aligned.
        _mm512_stream_pd(p, v);
    } else {
        _mm512_storeu_pd(p, v);
    }
}

/// One butterfly stage on rows `r`: for every listed `k` (with bit `s` clear), rows `k` and
/// `k + s` exchange their off-diagonal blocks. Written out so the rows stay in registers.
macro_rules! stage {
    ($perm:ident, $r:ident, $idx:expr, $s:expr; $($k:expr),*) => {{
        let lo = _mm512_loadu_si512($idx[0].as_ptr() as *const __m512i);
        let hi = _mm512_loadu_si512($idx[1].as_ptr() as *const __m512i);
        $(
            let (x, y) = ($r[$k], $r[$k + $s]);
            $r[$k] = $perm(x, lo, y);
            $r[$k + $s] = $perm(x, hi, y);
        )*
    }};
}

/// 16×16 transpose of 4-byte units.
#[inline(always)]
unsafe fn tr16x4(a: *const u8, lda: isize) -> [__m512; 16] {
    let ld = |k: isize| _mm512_loadu_ps(a.offset(k * lda) as *const f32);
    let mut r = [
        ld(0),
        ld(1),
        ld(2),
        ld(3),
        ld(4),
        ld(5),
        ld(6),
        ld(7),
        ld(8),
        ld(9),
        ld(10),
        ld(11),
        ld(12),
        ld(13),
        ld(14),
        ld(15),
    ];
    stage!(_mm512_permutex2var_ps, r, IDX32[0], 1; 0, 2, 4, 6, 8, 10, 12, 14);
    stage!(_mm512_permutex2var_ps, r, IDX32[1], 2; 0, 1, 4, 5, 8, 9, 12, 13);
    stage!(_mm512_permutex2var_ps, r, IDX32[2], 4; 0, 1, 2, 3, 8, 9, 10, 11);
    stage!(_mm512_permutex2var_ps, r, IDX32[3], 8; 0, 1, 2, 3, 4, 5, 6, 7);
    r
}

/// 8×8 transpose of 8-byte units.
#[inline(always)]
unsafe fn tr8x8(a: *const u8, lda: isize) -> [__m512d; 8] {
    let ld = |k: isize| _mm512_loadu_pd(a.offset(k * lda) as *const f64);
    let mut r = [ld(0), ld(1), ld(2), ld(3), ld(4), ld(5), ld(6), ld(7)];
    stage!(_mm512_permutex2var_pd, r, IDX64[0], 1; 0, 2, 4, 6);
    stage!(_mm512_permutex2var_pd, r, IDX64[1], 2; 0, 1, 4, 5);
    stage!(_mm512_permutex2var_pd, r, IDX64[2], 4; 0, 1, 2, 3);
    r
}

/// f32, 16×16.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn t_f32<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    for (i, v) in tr16x4(a, lda).into_iter().enumerate() {
        store_ps::<M, NT>(b.offset(i as isize * ldb), v, al, be);
    }
}

/// f64, 8×8.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn t_f64<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    for (i, v) in tr8x8(a, lda).into_iter().enumerate() {
        store_pd::<M, NT>(b.offset(i as isize * ldb), v, al, be);
    }
}

/// Complex32 (8-byte units, f32 arithmetic with real scalars), 8×8.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn t_c32<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    for (i, v) in tr8x8(a, lda).into_iter().enumerate() {
        store_ps::<M, NT>(b.offset(i as isize * ldb), _mm512_castpd_ps(v), al, be);
    }
}

/// Complex64 (16-byte units, f64 arithmetic with real scalars), 4×4: the 8×8 butterfly on
/// f64 lanes with its first stage (single lanes) left out, so lane pairs move together.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn t_c64<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    al: f64,
    be: f64,
) {
    let ld = |k: isize| _mm512_loadu_pd(a.offset(k * lda) as *const f64);
    let mut r = [ld(0), ld(1), ld(2), ld(3)];
    // Unit stages 1 and 2 are lane stages 2 and 4.
    stage!(_mm512_permutex2var_pd, r, IDX64[1], 1; 0, 2);
    stage!(_mm512_permutex2var_pd, r, IDX64[2], 2; 0, 1);
    for (i, v) in r.into_iter().enumerate() {
        store_pd::<M, NT>(b.offset(i as isize * ldb), v, al, be);
    }
}

/// Copies `bytes` bytes from `src` to `dst` with non-temporal stores for every 64-byte
/// line of `dst` that the range covers whole (ordinary stores for the partial lines at
/// either end).
///
/// # Safety
/// AVX-512F is available; `src[..bytes]` is readable, `dst[..bytes]` writable, and they do not
/// overlap; the caller issues a store fence before the data is read by another thread.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn stream_copy(src: *const u8, dst: *mut u8, bytes: usize) {
    let head = ((64 - (dst as usize) % 64) % 64).min(bytes);
    std::ptr::copy_nonoverlapping(src, dst, head);
    let mut k = head;
    while k + 64 <= bytes {
        let v = _mm512_loadu_si512(src.add(k) as *const __m512i);
        _mm512_stream_si512(dst.add(k) as *mut __m512i, v);
        k += 64;
    }
    std::ptr::copy_nonoverlapping(src.add(k), dst.add(k), bytes - k);
}

/// Copies `count` rows of `bytes` bytes, row `r` from `src + r*sa` to `dst + r*sb` (byte
/// strides): rows whose destination is 64-byte aligned and whose length is a multiple of 64
/// go out with non-temporal stores, the others through ordinary copies.
///
/// # Safety
/// As [`stream_copy`], for every row.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn stream_rows(
    src: *const u8,
    sa: isize,
    dst: *mut u8,
    sb: isize,
    count: usize,
    bytes: usize,
) {
    for r in 0..count as isize {
        let (s, d) = (src.offset(r * sa), dst.offset(r * sb));
        if (d as usize).is_multiple_of(64) && bytes.is_multiple_of(64) {
            let mut k = 0;
            while k < bytes {
                let v = _mm512_loadu_si512(s.add(k) as *const __m512i);
                _mm512_stream_si512(d.add(k) as *mut __m512i, v);
                k += 64;
            }
        } else {
            std::ptr::copy_nonoverlapping(s, d, bytes);
        }
    }
}

//! AVX-512 micro-kernels: in-register transposes of one W×W tile, W = 64 bytes / element
//! size (f16 and bf16: 32 bytes, 16×16; f32 16×16, f64 and Complex32 8×8, Complex64 4×4), by a
//! butterfly of two-source permutes: stage `s` swaps the off-diagonal `s×s` blocks of every
//! `2s×2s` block, so after the stages `s = 1, 2, 4, ...` element `(k, i)` sits at `(i, k)`.
//! 2-byte units (16×16 on 256-bit rows) take their first stage by shifts and masks within
//! dwords, the others as dword stages; they move bits unchanged (copies only), and need
//! AVX-512VL (and BW for their edges' 16-bit masked loads and stores).
//!
//! Layout and safety contract as in [`super::avx2`], with AVX-512F instead of AVX2 and
//! 64-byte alignment for the non-temporal (`NT`) variants.

use std::arch::x86_64::*;

use super::{AXPBY, COPY};

/// `[f(0), f(1), ..., f(n - 1)]` written out (an array built with `from_fn` was not inlined
/// into the kernels and ran 4x slower).
macro_rules! rows {
    ($f:ident; $($k:expr),*) => {
        [$($f($k)),*]
    };
}

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

const fn narrow<const N: usize>(x: [i64; N]) -> [i32; N] {
    let mut y = [0i32; N];
    let mut i = 0;
    while i < N {
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

/// The 8-lane stages' indices for dword lanes of 256-bit rows.
static IDX32X8: [[[i32; 8]; 2]; 3] = [
    [narrow(S8[0].0), narrow(S8[0].1)],
    [narrow(S8[1].0), narrow(S8[1].1)],
    [narrow(S8[2].0), narrow(S8[2].1)],
];

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

/// 16×16 transpose of 4-byte units: rows `r` in, columns out.
#[inline(always)]
unsafe fn tr16(mut r: [__m512; 16]) -> [__m512; 16] {
    stage!(_mm512_permutex2var_ps, r, IDX32[0], 1; 0, 2, 4, 6, 8, 10, 12, 14);
    stage!(_mm512_permutex2var_ps, r, IDX32[1], 2; 0, 1, 4, 5, 8, 9, 12, 13);
    stage!(_mm512_permutex2var_ps, r, IDX32[2], 4; 0, 1, 2, 3, 8, 9, 10, 11);
    stage!(_mm512_permutex2var_ps, r, IDX32[3], 8; 0, 1, 2, 3, 4, 5, 6, 7);
    r
}

/// 16×16 transpose of 4-byte units read from `a` (rows `lda` bytes apart).
#[inline(always)]
unsafe fn tr16x4(a: *const u8, lda: isize) -> [__m512; 16] {
    let ld = |k: isize| _mm512_loadu_ps(a.offset(k * lda) as *const f32);
    tr16(rows!(ld; 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
}

/// 8×8 transpose of 8-byte units: rows `r` in, columns out.
#[inline(always)]
unsafe fn tr8(mut r: [__m512d; 8]) -> [__m512d; 8] {
    stage!(_mm512_permutex2var_pd, r, IDX64[0], 1; 0, 2, 4, 6);
    stage!(_mm512_permutex2var_pd, r, IDX64[1], 2; 0, 1, 4, 5);
    stage!(_mm512_permutex2var_pd, r, IDX64[2], 4; 0, 1, 2, 3);
    r
}

/// 8×8 transpose of 8-byte units read from `a`.
#[inline(always)]
unsafe fn tr8x8(a: *const u8, lda: isize) -> [__m512d; 8] {
    let ld = |k: isize| _mm512_loadu_pd(a.offset(k * lda) as *const f64);
    tr8(rows!(ld; 0, 1, 2, 3, 4, 5, 6, 7))
}

/// 4×4 transpose of 16-byte units (pairs of f64 lanes): the 8×8 butterfly without its
/// single-lane stage.
#[inline(always)]
unsafe fn tr4(mut r: [__m512d; 4]) -> [__m512d; 4] {
    // Unit stages 1 and 2 are lane stages 2 and 4.
    stage!(_mm512_permutex2var_pd, r, IDX64[1], 1; 0, 2);
    stage!(_mm512_permutex2var_pd, r, IDX64[2], 2; 0, 1);
    r
}

/// 2-byte units (f16, bf16), 16×16 on 256-bit rows ([`tr16h`]), copied (`M` is
/// [`COPY`]: the bits move unchanged).
#[target_feature(enable = "avx512f,avx512vl")]
pub(crate) unsafe fn t_h16<const M: u8, const NT: bool>(
    a: *const u8,
    lda: isize,
    b: *mut u8,
    ldb: isize,
    _al: f64,
    _be: f64,
) {
    debug_assert_eq!(M, COPY);
    let ld = |k: isize| _mm256_loadu_si256(a.offset(k * lda) as *const __m256i);
    let r = tr16h(rows!(ld; 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (i, v) in r.into_iter().enumerate() {
        let p = b.offset(i as isize * ldb) as *mut __m256i;
        if NT {
            // Non-temporal: the caller checked that B's rows are 32-byte aligned.
            _mm256_stream_si256(p, v);
        } else {
            _mm256_storeu_si256(p, v);
        }
    }
}

/// [`stage!`] on 256-bit rows.
macro_rules! stage256 {
    ($r:ident, $idx:expr, $s:expr; $($k:expr),*) => {{
        let lo = _mm256_loadu_si256($idx[0].as_ptr() as *const __m256i);
        let hi = _mm256_loadu_si256($idx[1].as_ptr() as *const __m256i);
        $(
            let (x, y) = ($r[$k], $r[$k + $s]);
            $r[$k] = _mm256_permutex2var_epi32(x, lo, y);
            $r[$k + $s] = _mm256_permutex2var_epi32(x, hi, y);
        )*
    }};
}

/// 16×16 transpose of 2-byte units in 256-bit rows: a pair stage within dwords, then dword
/// lane stages 1, 2 and 4 (unit stages 2, 4 and 8).
#[inline(always)]
unsafe fn tr16h(mut r: [__m256i; 16]) -> [__m256i; 16] {
    let low = _mm256_set1_epi32(0xffff);
    macro_rules! pairs {
        ($($k:expr),*) => {$(
            let (x, y) = (r[$k], r[$k + 1]);
            r[$k] = _mm256_or_si256(_mm256_and_si256(x, low), _mm256_slli_epi32::<16>(y));
            r[$k + 1] = _mm256_or_si256(_mm256_srli_epi32::<16>(x), _mm256_andnot_si256(low, y));
        )*};
    }
    pairs!(0, 2, 4, 6, 8, 10, 12, 14);
    stage256!(r, IDX32X8[0], 2; 0, 1, 4, 5, 8, 9, 12, 13);
    stage256!(r, IDX32X8[1], 4; 0, 1, 2, 3, 8, 9, 10, 11);
    stage256!(r, IDX32X8[2], 8; 0, 1, 2, 3, 4, 5, 6, 7);
    r
}

/// 2-byte units edge, up to 16×16: the first `ri` units of the first `rj` rows, copied with
/// AVX-512BW/VL masked 16-bit loads and stores that touch nothing outside that corner.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[allow(clippy::too_many_arguments)] // the micro-kernel's operands plus the extents
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
    let (mi, mj) = (low16(ri), low16(rj));
    let ld = |k: usize| {
        if k < rj {
            _mm256_maskz_loadu_epi16(mi, a.offset(k as isize * lda) as *const i16)
        } else {
            _mm256_setzero_si256()
        }
    };
    let r = tr16h(rows!(ld; 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (i, v) in r.into_iter().enumerate().take(ri) {
        _mm256_mask_storeu_epi16(b.offset(i as isize * ldb) as *mut i16, mj, v);
    }
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
    for (i, v) in tr4x4(a, lda).into_iter().enumerate() {
        store_pd::<M, NT>(b.offset(i as isize * ldb), v, al, be);
    }
}

// Seam micro-kernels (streamed stores only, so `M` is COPY or SCALE): the W×W transposes of
// a row block's last W columns (at `a`) and of its successors' first W (at `next`), joined
// lane-wise so that output row `i` is the last `tail` bytes of the first block's row `i`
// followed by the first `64 - tail` bytes of the second's: the line where a B row ends and
// its successor begins (see `super::Seam`), streamed to `b + i*ldb` (64-byte aligned).
//
// Safety: as the full kernels for both blocks, `0 < tail < 64` a multiple of 4, and every
// `b + i*ldb` 64-byte aligned.

/// Output row `i`: the last `q` dwords of `x` then the first `16 - q` of `y`, for the
/// permute index `idx = [16 - q, 17 - q, ...]` ([`join_index`]).
#[inline(always)]
unsafe fn join_lanes(x: __m512i, y: __m512i, idx: __m512i) -> __m512i {
    _mm512_permutex2var_epi32(x, idx, y)
}

/// The permute index of [`join_lanes`] for a tail of `tail` bytes.
#[inline(always)]
unsafe fn join_index(tail: usize) -> __m512i {
    let q = (tail / 4) as i32;
    _mm512_add_epi32(
        _mm512_set1_epi32(16 - q),
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
    )
}

/// Defines a seam kernel: both blocks transposed by `$tr(pointer)` into `$n` rows of `$ty`,
/// each output row joined by [`join_lanes`] (through the bit casts `$to` and `$from`) and
/// streamed by `$store`.
macro_rules! seam_kernel {
    ($(#[$doc:meta])* $name:ident, $n:expr, $tr:expr, $to:ident, $from:ident, $store:ident) => {
        $(#[$doc])*
        #[target_feature(enable = "avx512f")]
        #[allow(clippy::too_many_arguments)] // the micro-kernel's operands, successor and tail
        pub(crate) unsafe fn $name<const M: u8>(
            a: *const u8,
            next: *const u8,
            lda: isize,
            b: *mut u8,
            ldb: isize,
            al: f64,
            be: f64,
            tail: usize,
        ) {
            let (x, y, idx) = ($tr(a, lda), $tr(next, lda), join_index(tail));
            for i in 0..$n {
                let v = join_lanes($to(x[i]), $to(y[i]), idx);
                $store::<M, true>(b.offset(i as isize * ldb), $from(v), al, be);
            }
        }
    };
}

/// 4×4 transpose of 16-byte units read from `a`.
#[inline(always)]
unsafe fn tr4x4(a: *const u8, lda: isize) -> [__m512d; 4] {
    let ld = |k: isize| _mm512_loadu_pd(a.offset(k * lda) as *const f64);
    tr4(rows!(ld; 0, 1, 2, 3))
}

seam_kernel!(
    /// f32 seam, 16 rows.
    s_f32, 16, tr16x4, _mm512_castps_si512, _mm512_castsi512_ps, store_ps
);
seam_kernel!(
    /// f64 seam, 8 rows.
    s_f64, 8, tr8x8, _mm512_castpd_si512, _mm512_castsi512_pd, store_pd
);
seam_kernel!(
    /// Complex32 seam (8-byte units, f32 arithmetic), 8 rows.
    s_c32, 8, tr8x8, _mm512_castpd_si512, _mm512_castsi512_ps, store_ps
);
seam_kernel!(
    /// Complex64 seam (16-byte units, f64 arithmetic), 4 rows.
    s_c64, 4, tr4x4, _mm512_castpd_si512, _mm512_castsi512_pd, store_pd
);

/// The low `n` lanes of a 16-lane mask (`n <= 16`).
#[inline(always)]
fn low16(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

/// The low `n` lanes of an 8-lane mask (`n <= 8`).
#[inline(always)]
fn low8(n: usize) -> __mmask8 {
    ((1u32 << n) - 1) as __mmask8
}

/// Masked store of f32 lanes `m`, scaled as [`store_ps`] (ordinary stores).
#[inline(always)]
unsafe fn store_ps_mask<const M: u8>(dst: *mut u8, m: __mmask16, v: __m512, al: f64, be: f64) {
    let p = dst as *mut f32;
    let v = if M == COPY {
        v
    } else {
        let s = _mm512_mul_ps(_mm512_set1_ps(al as f32), v);
        if M == AXPBY {
            let old = _mm512_maskz_loadu_ps(m, p);
            _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(be as f32), old))
        } else {
            s
        }
    };
    _mm512_mask_storeu_ps(p, m, v);
}

/// Masked store of f64 lanes `m`, scaled as [`store_pd`] (ordinary stores).
#[inline(always)]
unsafe fn store_pd_mask<const M: u8>(dst: *mut u8, m: __mmask8, v: __m512d, al: f64, be: f64) {
    let p = dst as *mut f64;
    let v = if M == COPY {
        v
    } else {
        let s = _mm512_mul_pd(_mm512_set1_pd(al), v);
        if M == AXPBY {
            let old = _mm512_maskz_loadu_pd(m, p);
            _mm512_add_pd(s, _mm512_mul_pd(_mm512_set1_pd(be), old))
        } else {
            s
        }
    };
    _mm512_mask_storeu_pd(p, m, v);
}

// Edge micro-kernels: the W×W kernels above restricted to the first `ri` units of each
// source row (`ri <= W`) and the first `rj` source rows (`rj <= W`), i.e. an `ri`×`rj`
// corner of a micro-tile at the right or bottom edge of a tile. Only those units are read
// and written (masked loads and stores, which touch no memory in masked-off lanes); rows
// past `rj` enter the transposition as zeros and their lanes are never stored.
//
// Safety: as the full kernels, for `k < rj` and `i < ri` and the first `ri` (resp. `rj`)
// units of each row only; no non-temporal stores.

/// Defines an edge kernel: rows `k < rj` loaded with `ri`'s lane mask (`$mi`), the others
/// zero; transposed by `$tr`; rows `i < ri` stored with `rj`'s lane mask (`$mj`).
macro_rules! edge_kernel {
    ($(#[$doc:meta])* $name:ident, $tr:ident, $load:ident, $zero:ident, $ty:ty,
     $store:ident, $cast:expr, $mi:expr, $mj:expr; $($k:expr),*) => {
        $(#[$doc])*
        #[target_feature(enable = "avx512f")]
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
            let (mi, mj) = ($mi(ri), $mj(rj));
            let ld = |k: usize| {
                if k < rj {
                    $load(mi, a.offset(k as isize * lda) as *const $ty)
                } else {
                    $zero()
                }
            };
            let r = $tr([$(ld($k)),*]);
            for (i, v) in r.into_iter().enumerate().take(ri) {
                $store::<M>(b.offset(i as isize * ldb), mj, $cast(v), al, be);
            }
        }
    };
}

edge_kernel!(
    /// f32 edge, up to 16×16.
    e_f32, tr16, _mm512_maskz_loadu_ps, _mm512_setzero_ps, f32, store_ps_mask, |v| v,
    low16, low16; 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
);
edge_kernel!(
    /// f64 edge, up to 8×8.
    e_f64, tr8, _mm512_maskz_loadu_pd, _mm512_setzero_pd, f64, store_pd_mask, |v| v,
    low8, low8; 0, 1, 2, 3, 4, 5, 6, 7
);
edge_kernel!(
    /// Complex32 edge (8-byte units, f32 arithmetic), up to 8×8.
    e_c32, tr8, _mm512_maskz_loadu_pd, _mm512_setzero_pd, f64, store_ps_mask,
    _mm512_castpd_ps, low8, |n: usize| low16(2 * n); 0, 1, 2, 3, 4, 5, 6, 7
);
edge_kernel!(
    /// Complex64 edge (16-byte units, f64 arithmetic), up to 4×4.
    e_c64, tr4, _mm512_maskz_loadu_pd, _mm512_setzero_pd, f64, store_pd_mask, |v| v,
    |n: usize| low8(2 * n), |n: usize| low8(2 * n); 0, 1, 2, 3
);

/// The 64 bytes made of `n` (0 < n < 64, a multiple of 4: every element size is) bytes at
/// `a` followed by `64 - n` bytes at `b`: two unaligned loads, of the 64 bytes ending at
/// `a + n` and of the 64 bytes from `b`, joined by one lane shift (`valignd`): faster than
/// masked loads or a scratch block composed by byte copies (see `docs/TUNING.md`).
///
/// # Safety
/// The CPU has AVX-512F; `a + n - 64 .. a + n` and `b .. b + 64` are readable.
#[target_feature(enable = "avx512f")]
unsafe fn join_block(a: *const u8, n: usize, b: *const u8) -> __m512i {
    debug_assert!(n > 0 && n < 64 && n.is_multiple_of(4));
    let lo = _mm512_loadu_si512(a.add(n).sub(64) as *const __m512i);
    let hi = _mm512_loadu_si512(b as *const __m512i);
    // The concatenation hi:lo shifted right by 16 - n/4 dwords: lo's last n/4 dwords (the
    // bytes of `a`), then hi's first ones.
    macro_rules! shift {
        ($($q:literal),*) => {
            match n / 4 {
                $($q => _mm512_alignr_epi32::<{ 16 - $q }>(hi, lo),)*
                _ => unreachable!("a partial block is 1 to 15 dwords"),
            }
        };
    }
    shift!(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
}

super::streaming_copies_for!(
    "avx512f",
    64,
    // runs of four lines: the split best copy is fastest with them on AVX-512 (docs/TUNING.md)
    256,
    __m512i,
    _mm512_loadu_si512,
    _mm512_stream_si512,
    join_block
);

// TTLG Orthogonal-Arbitrary: the input slice (columns, A's fastest dims) and the output
// slice overlap. The shared buffer holds the whole slice: columns = input slice, rows = the
// output-slice dims that are not in the input slice. The copy-in walks the slice's rows x
// columns as one flat range, U entries a thread at a time (consecutive threads take
// consecutive columns, so reads are coalesced in A and no thread idles when a row is not a
// divisor of the block); the copy-out walks the slice in B's order through two per-element
// offset arrays (B offset, buffer index), which TTLG keeps in read-only memory. Buffer rows
// are `rs` elements apart (odd) and columns skewed by one element every 128 bytes (column c
// at c + (c >> SH)), so that neither a walk down a column nor one across columns a power of
// two apart (B's fastest dim on either side) lands a warp in one bank; the host computes
// rs and the buffer indices the same way (slice.rs: oa_row_stride, oa_col).
// With prefetching on, the first U entries a thread copies in from the block's next slice
// are loaded into registers before the current slice is written out, so those loads are in
// flight while the stores run (a slice of at most U * 256 entries is loaded whole).
// Dynamic shared memory: cols * rows elements. Block: 256 threads.
#include "ttgt_common.cuh"

namespace ttgt {

#ifndef TTGT_OA_PREFETCH
#define TTGT_OA_PREFETCH 1
#endif

// Skew of buffer columns: one element every 32 banks.
template <typename T>
struct OaSkew {
    static constexpr int SH = sizeof(T) <= 4 ? 5 : sizeof(T) <= 8 ? 4 : 3;
};

// A block's slice: base offsets, valid extents, and the thread's place in the flat copy-in
// walk (row r, column c of its next entry; each step moves nthreads entries: dr rows and dc
// columns, dc < nc).
template <typename I>
struct OaSlice {
    I blk, oa, ob, nc, nr, r, c, dr, dc;
};

template <typename I, int R>
TTGT_INLINE void oa_enter(OaSlice<I>& s, const Outer<I, R>& o, const I* __restrict__ meta, I blk,
                          I tid, I nthreads, I va, I r_full, I c_full, I dr_full, I dc_full) {
    I d0, d1;
    s.blk = blk;
    o.decode(blk, s.oa, s.ob, d0, d1);
    s.nc = valid_extent(va, meta[M_INNER_A], meta[M_NA], meta[M_BA], d0);
    s.nr = valid_extent(meta[M_VB], meta[M_INNER_B], meta[M_NB], meta[M_BB], d1);
    if (s.nc == va) {
        s.r = r_full;
        s.c = c_full;
        s.dr = dr_full;
        s.dc = dc_full;
    } else {
        s.r = tid / s.nc;
        s.c = tid - s.r * s.nc;
        s.dr = nthreads / s.nc;
        s.dc = nthreads - s.dr * s.nc;
    }
}

// Loads the thread's next U copy-in entries of slice s into v and records their buffer
// indices in bi (-1: past the slice's end); advances s.r and s.c past them.
template <typename T, typename I, int U>
TTGT_INLINE void oa_load(typename Reg<T>::type (&v)[U], I (&bi)[U], OaSlice<I>& s,
                         const typename Param<T>::type* __restrict__ a, const I* __restrict__ a_col,
                         const I* __restrict__ a_row, I rs, I da) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        bi[u] = -1;
        if (s.r < s.nr) {
            bi[u] = s.r * rs + s.c + (s.c >> OaSkew<T>::SH);
            v[u] = Access<T>::load(a, s.oa + *TTGT_CHECK(a_row + s.r) + *TTGT_CHECK(a_col + s.c),
                                   da);
        }
        s.c += s.dc;
        s.r += s.dr;
        if (s.c >= s.nc) {
            s.c -= s.nc;
            s.r += 1;
        }
    }
}

template <typename T, typename I, int U>
TTGT_INLINE void oa_put(T* buf, const typename Reg<T>::type (&v)[U], const I (&bi)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u)
        if (bi[u] >= 0) *TTGT_CHECK(reinterpret_cast<typename Reg<T>::type*>(&buf[bi[u]])) = v[u];
}

template <typename T, typename I, int R>
TTGT_INLINE void oa_body(const typename Param<T>::type* __restrict__ a,
                         typename Param<T>::type* __restrict__ b, const I* __restrict__ meta,
                         typename Param<T>::type alpha, typename Param<T>::type beta, int mode) {
    constexpr int U = 4;
    TTGT_EXTERN_SHARED(T, buf);
    Outer<I, R> o;
    o.load(meta);
    const I nblk = meta[M_NBLK];
    const I va = meta[M_VA], vb = meta[M_VB], rs = meta[M_P4];
    const I da = meta[M_DA], db = meta[M_DB]; // 2x2 blocks only
    const I* __restrict__ a_col = meta + meta[M_P0];
    const I* __restrict__ a_row = meta + meta[M_P1];
    const I* __restrict__ b_elem = meta + meta[M_P2];
    const I* __restrict__ sm_elem = meta + meta[M_P3];
    const I nthreads = blockDim.x * blockDim.y;
    const I tid = threadIdx.x + threadIdx.y * blockDim.x;
    const I vol = va * vb;
    if (static_cast<I>(blockIdx.x) >= nblk) return; // uniform across the block
    // The copy-in walk's start and step for slices with every column (computed once).
    const I r_full = tid / va, c_full = tid - (tid / va) * va;
    const I dr_full = nthreads / va, dc_full = nthreads - (nthreads / va) * va;
    OaSlice<I> cur;
    oa_enter<I, R>(cur, o, meta, static_cast<I>(blockIdx.x), tid, nthreads, va, r_full, c_full,
                   dr_full, dc_full);
    typename Reg<T>::type v[U];
    I bi[U];
    oa_load<T, I, U>(v, bi, cur, a, a_col, a_row, rs, da);
    bool more = true;
    while (more) {
        // The batch in registers, then the rest of the slice, batch by batch (U loads in
        // flight a thread).
        oa_put<T, I, U>(buf, v, bi);
        while (cur.r < cur.nr) {
            oa_load<T, I, U>(v, bi, cur, a, a_col, a_row, rs, da);
            oa_put<T, I, U>(buf, v, bi);
        }
        __syncthreads();
        OaSlice<I> nxt;
        const I next = cur.blk + gridDim.x;
        more = next < nblk;
        if (more) {
            oa_enter<I, R>(nxt, o, meta, next, tid, nthreads, va, r_full, c_full, dr_full,
                           dc_full);
#if TTGT_OA_PREFETCH
            oa_load<T, I, U>(v, bi, nxt, a, a_col, a_row, rs, da);
#endif
        }
        const bool full = cur.nc == va && cur.nr == vb;
        const I nc_skewed = cur.nc + (cur.nc >> OaSkew<T>::SH);
        for (I e0 = tid; e0 < vol; e0 += U * nthreads) {
            I s[U], bo[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const I e = e0 + u * nthreads;
                s[u] = -1;
                if (e < vol) {
                    s[u] = *TTGT_CHECK(sm_elem + e);
                    bo[u] = *TTGT_CHECK(b_elem + e);
                    if (!full) {
                        // Partial slice: skip elements outside it (the "special
                        // instructions" of TTLG's model: one division per element, only in
                        // partial slices).
                        // (The skew keeps column order, so c < nc <=> skewed c < skewed nc.)
                        const I r = s[u] / rs;
                        if (r >= cur.nr || s[u] - r * rs >= nc_skewed) s[u] = -1;
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (s[u] >= 0)
                    Access<T>::put(b, cur.ob + bo[u], db, *TTGT_CHECK(&buf[s[u]]), alpha, beta, mode);
        }
        // Every thread has read the slice before the next one overwrites the buffer.
        __syncthreads();
        if (more) {
#if !TTGT_OA_PREFETCH
            oa_load<T, I, U>(v, bi, nxt, a, a_col, a_row, rs, da);
#endif
            cur = nxt;
        }
    }
}

} // namespace ttgt

using ttgt::oa_body;
TTGT_FOR_ALL_Q(TTGT_DEFINE, oa)

#ifdef TTGT_EMU
extern "C" int (*ttgt_emu_lookup_oa(const char* name))(const ttgt_emu::Launch*) {
    TTGT_FOR_ALL_Q(TTGT_LOOKUP, oa)
    return nullptr;
}
#endif

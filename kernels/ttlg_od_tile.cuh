// The tiles of TTLG's Orthogonal-Distinct schema, shared by the register-staged kernels
// (ttlg_od.cu) and the asynchronous-copy ones (ttlg_oda.cu): tile shape, the cursor a block
// walks its tiles with, and the write-out of a tile from shared memory.
#pragma once
#include "ttgt_common.cuh"

namespace ttgt {

// Rows of a tile per 32: 2 for elements of at most 4 bytes (overridable for experiments).
#ifndef TTGT_OD_U4
#define TTGT_OD_U4 2
#endif
#ifndef TTGT_OD_U8
#define TTGT_OD_U8 1
#endif
// Columns of a tile per 32 for elements of at most 4 bytes (wider elements: 1).
#ifndef TTGT_OD_C4
#define TTGT_OD_C4 1
#endif
// 1: issue the next tile's loads before the current tile's stores.
#ifndef TTGT_OD_PREFETCH
#define TTGT_OD_PREFETCH 1
#endif

// The tile a block works on: its slice's base offsets and valid extents, and its corner.
template <typename I>
struct OdCursor {
    I blk, oa, ob, nc, nr, r0, c0;
};

// Points the cursor at the first tile of slice `blk` (blk < nblk).
template <typename I, int R>
TTGT_INLINE void od_enter(OdCursor<I>& t, const Outer<I, R>& o, const I* __restrict__ meta, I blk) {
    I d0, d1;
    t.blk = blk;
    o.decode(blk, t.oa, t.ob, d0, d1);
    t.nc = valid_extent(meta[M_VA], meta[M_INNER_A], meta[M_NA], meta[M_BA], d0);
    t.nr = valid_extent(meta[M_VB], meta[M_INNER_B], meta[M_NB], meta[M_BB], d1);
    t.r0 = 0;
    t.c0 = 0;
}

// Moves the cursor to the block's next tile; false when the block has no more.
template <typename I, int R, int TC, int TR>
TTGT_INLINE bool od_advance(OdCursor<I>& t, const Outer<I, R>& o, const I* __restrict__ meta,
                            I nblk) {
    t.c0 += TC;
    if (t.c0 < t.nc) return true;
    t.c0 = 0;
    t.r0 += TR;
    if (t.r0 < t.nr) return true;
    const I next = t.blk + gridDim.x;
    if (next >= nblk) return false;
    od_enter<I, R>(t, o, meta, next);
    return true;
}


// What a block reads from the plan's meta table (built by offsets.rs): the outer dims, the
// slice count, the A and B offsets of every slice column and row, and the 2x2-block offsets.
template <typename I, int R>
struct OdBlock {
    Outer<I, R> o;
    I nblk, da, db;
    const I* __restrict__ a_col;
    const I* __restrict__ b_col;
    const I* __restrict__ a_row;
    const I* __restrict__ b_row;

    // Loads the tables and points `cur` at the block's first tile; false (uniform across the
    // block) when the block has no slice.
    TTGT_INLINE bool start(const I* __restrict__ meta, OdCursor<I>& cur) {
        o.load(meta);
        nblk = meta[M_NBLK];
        a_col = meta + meta[M_P0];
        b_col = meta + meta[M_P1];
        a_row = meta + meta[M_P2];
        b_row = meta + meta[M_P3];
        da = meta[M_DA]; // 2x2 blocks only
        db = meta[M_DB];
        if (static_cast<I>(blockIdx.x) >= nblk) return false;
        od_enter<I, R>(cur, o, meta, static_cast<I>(blockIdx.x));
        return true;
    }
};

// Writes tile t out of shared memory: a warp takes 32 consecutive rows of one column
// (coalesced in B), the block's 8 warps every 8th column.
template <typename T, typename I, int U, int TC>
TTGT_INLINE void od_store(const T (*tile)[TC + 1], const OdCursor<I>& t,
                          typename Param<T>::type* __restrict__ b, const I* __restrict__ b_col,
                          const I* __restrict__ b_row, I db, typename Param<T>::type alpha,
                          typename Param<T>::type beta, int mode, int tx, int ty) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const I r = t.r0 + 32 * u + tx;
        if (r < t.nr) {
            const I br = t.ob + *TTGT_CHECK(b_row + r);
#pragma unroll
            for (int j = 0; j < TC; j += 8) {
                const I cc = t.c0 + ty + j;
                if (cc < t.nc)
                    Access<T>::put(b, br + *TTGT_CHECK(b_col + cc), db, tile[32 * u + tx][ty + j],
                                   alpha, beta, mode);
            }
        }
    }
}

} // namespace ttgt

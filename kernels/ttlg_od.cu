// TTLG Orthogonal-Distinct: the input slice (columns: A's fastest dims) and the output slice
// (rows: B's fastest dims) share no dim. Each slice is moved in tiles of 32*C columns x 32*U
// rows through a padded shared buffer (rows of 32*C + 1 elements): a warp reads 32
// consecutive columns of a row (coalesced in A), then 32 consecutive rows of a column
// (coalesced in B). U (rows per tile / 32) is 2 for 4-byte elements and 1 for wider ones, so
// that a thread has 8 (4-byte) or 4 loads in flight and a tile moves at least 8 KiB between
// barriers; C (columns per tile / 32) is 1.
// Column and row offsets come from the plan's offset arrays, so the slice dims may be any
// combination of fused dims; the slowest dim of each slice may be blocked (partial slices
// are bounded by valid_extent).
// Block: 32 x 8 threads. The block walks its tiles (grid-stride over slices, then the tiles
// of a slice) with a cursor; with prefetching on, the loads of the next tile are issued
// into registers before the current tile is written out, so they are in flight while the
// stores run (software pipelining across the two barriers of a tile).
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

// Loads the entries of tile t that lie inside its slice into v: v[g][j] is column
// c0 + 32g + tx, row r0 + ty + 8j.
template <typename T, typename I, int C, int J>
TTGT_INLINE void od_load(typename Reg<T>::type (&v)[C][J], const OdCursor<I>& t,
                         const typename Param<T>::type* __restrict__ a, const I* __restrict__ a_col,
                         const I* __restrict__ a_row, I da, int tx, int ty) {
#pragma unroll
    for (int g = 0; g < C; ++g) {
        const I c = t.c0 + 32 * g + tx;
        if (c < t.nc) {
            const I ac = t.oa + *TTGT_CHECK(a_col + c);
#pragma unroll
            for (int j = 0; j < J; ++j) {
                const I r = t.r0 + ty + 8 * j;
                if (r < t.nr) v[g][j] = Access<T>::load(a, ac + *TTGT_CHECK(a_row + r), da);
            }
        }
    }
}

template <typename T, typename I, int R>
TTGT_INLINE void od_body(const typename Param<T>::type* __restrict__ a,
                         typename Param<T>::type* __restrict__ b, const I* __restrict__ meta,
                         typename Param<T>::type alpha, typename Param<T>::type beta, int mode) {
    constexpr int U = sizeof(T) <= 4 ? TTGT_OD_U4 : TTGT_OD_U8;
    constexpr int C = sizeof(T) <= 4 ? TTGT_OD_C4 : 1;
    constexpr int TR = 32 * U;
    constexpr int TC = 32 * C;
    constexpr int J = TR / 8; // loads of one column group a thread issues per tile
    __shared__ T tile[TR][TC + 1];
    Outer<I, R> o;
    o.load(meta);
    const I nblk = meta[M_NBLK];
    const I* __restrict__ a_col = meta + meta[M_P0];
    const I* __restrict__ b_col = meta + meta[M_P1];
    const I* __restrict__ a_row = meta + meta[M_P2];
    const I* __restrict__ b_row = meta + meta[M_P3];
    const I da = meta[M_DA], db = meta[M_DB]; // 2x2 blocks only
    const int tx = threadIdx.x, ty = threadIdx.y;
    if (static_cast<I>(blockIdx.x) >= nblk) return; // uniform across the block
    OdCursor<I> cur;
    od_enter<I, R>(cur, o, meta, static_cast<I>(blockIdx.x));
    // The tile being loaded (od_load).
    typename Reg<T>::type v[C][J];
    bool more = true;
    od_load<T, I, C, J>(v, cur, a, a_col, a_row, da, tx, ty);
    while (more) {
        // v -> shared (same guards as the loads, so no unset entry is read).
#pragma unroll
        for (int g = 0; g < C; ++g) {
            if (cur.c0 + 32 * g + tx < cur.nc) {
#pragma unroll
                for (int j = 0; j < J; ++j)
                    if (cur.r0 + ty + 8 * j < cur.nr) *reinterpret_cast<typename Reg<T>::type*>(&tile[ty + 8 * j][32 * g + tx]) =
                            v[g][j];
            }
        }
        __syncthreads();
        OdCursor<I> nxt = cur;
        more = od_advance<I, R, TC, TR>(nxt, o, meta, nblk);
#if TTGT_OD_PREFETCH
        if (more) od_load<T, I, C, J>(v, nxt, a, a_col, a_row, da, tx, ty);
#endif
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const I r = cur.r0 + 32 * u + tx;
            if (r < cur.nr) {
                const I br = cur.ob + *TTGT_CHECK(b_row + r);
#pragma unroll
                for (int j = 0; j < TC; j += 8) {
                    const I cc = cur.c0 + ty + j;
                    if (cc < cur.nc)
                        Access<T>::put(b, br + *TTGT_CHECK(b_col + cc), db, tile[32 * u + tx][ty + j],
                                       alpha, beta, mode);
                }
            }
        }
        // Every thread has read the tile before the next one overwrites it.
        __syncthreads();
#if !TTGT_OD_PREFETCH
        if (more) od_load<T, I, C, J>(v, nxt, a, a_col, a_row, da, tx, ty);
#endif
        cur = nxt;
    }
}

} // namespace ttgt

using ttgt::od_body;
TTGT_FOR_ALL_Q(TTGT_DEFINE, od)

#ifdef TTGT_EMU
extern "C" int (*ttgt_emu_lookup_od(const char* name))(const ttgt_emu::Launch*) {
    TTGT_FOR_ALL_Q(TTGT_LOOKUP, od)
    return nullptr;
}
#endif

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
#include "ttlg_od_tile.cuh"

namespace ttgt {

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
    const int tx = threadIdx.x, ty = threadIdx.y;
    OdBlock<I, R> m;
    OdCursor<I> cur;
    if (!m.start(meta, cur)) return;
    // The tile being loaded (od_load).
    typename Reg<T>::type v[C][J];
    bool more = true;
    od_load<T, I, C, J>(v, cur, a, m.a_col, m.a_row, m.da, tx, ty);
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
        more = od_advance<I, R, TC, TR>(nxt, m.o, meta, m.nblk);
#if TTGT_OD_PREFETCH
        if (more) od_load<T, I, C, J>(v, nxt, a, m.a_col, m.a_row, m.da, tx, ty);
#endif
        od_store<T, I, U, TC>(tile, cur, b, m.b_col, m.b_row, m.db, alpha, beta, mode, tx, ty);
        // Every thread has read the tile before the next one overwrites it.
        __syncthreads();
#if !TTGT_OD_PREFETCH
        if (more) od_load<T, I, C, J>(v, nxt, a, m.a_col, m.a_row, m.da, tx, ty);
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

// TTLG Orthogonal-Distinct: the input slice (columns: A's fastest dims) and the output slice
// (rows: B's fastest dims) share no dim. Each slice is moved in tiles of 32 columns x 32*U
// rows through a padded shared buffer (rows of 33 elements): a warp reads 32 consecutive
// columns of a row (coalesced in A), then 32 consecutive rows of a column (coalesced in B).
// U (rows per tile / 32) is 2 for 4-byte elements and 1 for wider ones, so that a thread
// has 8 (4-byte) or 4 loads in flight and a tile moves at least 8 KiB between barriers.
// Column and row offsets come from the plan's offset arrays, so the slice dims may be any
// combination of fused dims; the slowest dim of each slice may be blocked (partial slices
// are bounded by valid_extent).
// Block: 32 x 8 threads. Grid-stride loop over slices (coarsening when the grid is capped).
#include "ttgt_common.cuh"

namespace ttgt {

// Rows of a tile per 32: 2 for elements of at most 4 bytes (overridable for experiments).
#ifndef TTGT_OD_U4
#define TTGT_OD_U4 2
#endif
#ifndef TTGT_OD_U8
#define TTGT_OD_U8 1
#endif

template <typename T, typename I, int R>
TTGT_INLINE void od_body(const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,
                         T alpha, T beta, int mode) {
    constexpr int U = sizeof(T) <= 4 ? TTGT_OD_U4 : TTGT_OD_U8;
    constexpr int TR = 32 * U;
    __shared__ T tile[TR][33];
    Outer<I, R> o;
    o.load(meta);
    const I nblk = meta[M_NBLK];
    const I* __restrict__ a_col = meta + meta[M_P0];
    const I* __restrict__ b_col = meta + meta[M_P1];
    const I* __restrict__ a_row = meta + meta[M_P2];
    const I* __restrict__ b_row = meta + meta[M_P3];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (I blk = blockIdx.x; blk < nblk; blk += gridDim.x) {
        I oa, ob, d0, d1;
        o.decode(blk, oa, ob, d0, d1);
        const I nc = valid_extent(meta[M_VA], meta[M_INNER_A], meta[M_NA], meta[M_BA], d0);
        const I nr = valid_extent(meta[M_VB], meta[M_INNER_B], meta[M_NB], meta[M_BB], d1);
        for (I r0 = 0; r0 < nr; r0 += TR) {
            for (I c0 = 0; c0 < nc; c0 += 32) {
                const I c = c0 + tx;
                if (c < nc) {
                    const I ac = oa + *TTGT_CHECK(a_col + c);
                    // Global loads and shared stores cannot alias: the loads of the unrolled
                    // loop are all issued before the first store.
#pragma unroll
                    for (int j = 0; j < TR / 8; ++j) {
                        const I r = r0 + ty + 8 * j;
                        if (r < nr) tile[ty + 8 * j][tx] = *TTGT_CHECK(a + (ac + *TTGT_CHECK(a_row + r)));
                    }
                }
                __syncthreads();
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const I r = r0 + 32 * u + tx;
                    if (r < nr) {
                        const I br = ob + *TTGT_CHECK(b_row + r);
#pragma unroll
                        for (int j = 0; j < 32; j += 8) {
                            const I cc = c0 + ty + j;
                            if (cc < nc)
                                store(b + (br + *TTGT_CHECK(b_col + cc)), tile[32 * u + tx][ty + j],
                                      alpha, beta, mode);
                        }
                    }
                }
                __syncthreads();
            }
        }
    }
}

} // namespace ttgt

using ttgt::od_body;
TTGT_FOR_ALL(TTGT_DEFINE, od)

#ifdef TTGT_EMU
extern "C" int (*ttgt_emu_lookup_od(const char* name))(const ttgt_emu::Launch*) {
    TTGT_FOR_ALL(TTGT_LOOKUP, od)
    return nullptr;
}
#endif

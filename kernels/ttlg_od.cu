// TTLG Orthogonal-Distinct: the input slice (columns: A's fastest dims) and the output slice
// (rows: B's fastest dims) share no dim. Each slice is moved in 32x32 tiles through a 32x33
// padded shared buffer: a warp reads 32 consecutive columns of a row (coalesced in A), then
// 32 consecutive rows of a column (coalesced in B). Column and row offsets come from the
// plan's offset arrays, so the slice dims may be any combination of fused dims; the slowest
// dim of each slice may be blocked (partial slices are bounded by valid_extent).
// Block: 32 x 8 threads. Grid-stride loop over slices (coarsening when the grid is capped).
#include "ttgt_common.cuh"

namespace ttgt {

template <typename T, typename I, int R>
TTGT_INLINE void od_body(const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,
                         T alpha, T beta, int mode) {
    __shared__ T tile[32][33];
    Outer<I, R> o;
    o.load(meta);
    const I nblk = meta[M_NBLK];
    const I va = meta[M_VA], inner_a = meta[M_INNER_A], na = meta[M_NA], ba = meta[M_BA];
    const I vb = meta[M_VB], inner_b = meta[M_INNER_B], nb = meta[M_NB], bb = meta[M_BB];
    const I* __restrict__ a_col = meta + meta[M_P0];
    const I* __restrict__ b_col = meta + meta[M_P1];
    const I* __restrict__ a_row = meta + meta[M_P2];
    const I* __restrict__ b_row = meta + meta[M_P3];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (I blk = blockIdx.x; blk < nblk; blk += gridDim.x) {
        I oa, ob, d0, d1;
        o.decode(blk, oa, ob, d0, d1);
        const I nc = valid_extent(va, inner_a, na, ba, d0);
        const I nr = valid_extent(vb, inner_b, nb, bb, d1);
        for (I r0 = 0; r0 < nr; r0 += 32) {
            for (I c0 = 0; c0 < nc; c0 += 32) {
                const I c = c0 + tx;
                if (c < nc) {
                    const I ac = oa + *TTGT_CHECK(a_col + c);
#pragma unroll
                    for (int j = 0; j < 32; j += 8) {
                        const I r = r0 + ty + j;
                        if (r < nr) tile[ty + j][tx] = *TTGT_CHECK(a + (ac + *TTGT_CHECK(a_row + r)));
                    }
                }
                __syncthreads();
                const I r = r0 + tx;
                if (r < nr) {
                    const I br = ob + *TTGT_CHECK(b_row + r);
#pragma unroll
                    for (int j = 0; j < 32; j += 8) {
                        const I cc = c0 + ty + j;
                        if (cc < nc) store(b + (br + *TTGT_CHECK(b_col + cc)), tile[tx][ty + j], alpha, beta, mode);
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

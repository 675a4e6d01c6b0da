// TTLG FVI-Match-Large: A and B share their fastest dim and it has at least 32 elements.
// No shared memory: each row of that dim is copied directly, consecutive threads on
// consecutive elements (coalesced both ways), four loads in flight per thread. Wide
// accesses (8 or 16 bytes) come from the host, which reinterprets runs of narrow elements
// as one wide element when sizes and alignment allow (OneFlow's movement size).
// Block: W x (256 / W) threads, W = row width rounded up to 32 (at most 256); each block
// row handles one row (or one chunk of a long row) of the fused tensor; grid-stride over
// rows.
#include "ttgt_common.cuh"

namespace ttgt {

template <typename T, typename I, int R>
TTGT_INLINE void fl_body(const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,
                         T alpha, T beta, int mode) {
    Outer<I, R> o;
    o.load(meta);
    const I nrows = meta[M_NBLK];
    const I chunk = meta[M_VA], n0 = meta[M_NA];
    const I sa0 = meta[M_P0], sb0 = meta[M_P1];
    const I w = blockDim.x;
    const I tx = threadIdx.x;
    for (I row = (I)blockIdx.x * blockDim.y + threadIdx.y; row < nrows;
         row += (I)gridDim.x * blockDim.y) {
        I oa, ob, d0, d1;
        o.decode(row, oa, ob, d0, d1);
        // Outer dim 0 is the chunk of the fastest dim; the last chunk may be short.
        const I len = valid_extent(chunk, (I)1, n0, chunk, d0);
        I f = tx;
        for (; f + 3 * w < len; f += 4 * w) {
            T v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) v[u] = *TTGT_CHECK(a + (oa + (f + u * w) * sa0));
#pragma unroll
            for (int u = 0; u < 4; ++u) store(b + (ob + (f + u * w) * sb0), v[u], alpha, beta, mode);
        }
        for (; f < len; f += w) store(b + (ob + f * sb0), *TTGT_CHECK(a + (oa + f * sa0)), alpha, beta, mode);
    }
}

} // namespace ttgt

using ttgt::fl_body;
TTGT_FOR_ALL(TTGT_DEFINE, fl)

#ifdef TTGT_EMU
extern "C" int (*ttgt_emu_lookup_fl(const char* name))(const ttgt_emu::Launch*) {
    TTGT_FOR_ALL(TTGT_LOOKUP, fl)
    return nullptr;
}
#endif

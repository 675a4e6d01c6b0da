// TTLG FVI-Match-Large: A and B share their fastest dim and it has at least 32 elements.
// No transposition through shared memory: both sides are contiguous along that dim, so the
// rows are copied directly. Wide accesses (8 or 16 bytes) come from the host, which
// reinterprets runs of narrow elements as one wide element when sizes and alignment allow
// (OneFlow's movement size).
// A block (256 threads, one dimension) takes a group of G consecutive rows (G from the host:
// about 256*U elements a group, G = 1 when long rows are cut into chunks), decodes each
// row's base offsets once into shared memory, and walks the group's G*len elements as one
// flat range: consecutive threads on consecutive elements (coalesced, rows of any length
// keep every lane busy), U loads in flight per thread (U = 8 for 4-byte elements, else 4),
// the (row, element) position advanced without division. Grid-stride over groups.
#include "ttgt_common.cuh"

namespace ttgt {

// Most rows in a group (the host's G never exceeds it).
#define TTGT_FL_MAX_GROUP 64

template <typename T, typename I, int R>
TTGT_INLINE void fl_body(const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,
                         T alpha, T beta, int mode) {
    constexpr int U = sizeof(T) <= 4 ? 8 : 4;
    __shared__ I s_oa[TTGT_FL_MAX_GROUP];
    __shared__ I s_ob[TTGT_FL_MAX_GROUP];
    __shared__ I s_len;
    Outer<I, R> o;
    o.load(meta);
    const I nrows = meta[M_NBLK];
    const I chunk = meta[M_VA], n0 = meta[M_NA], g = meta[M_VB];
    const I sa0 = meta[M_P0], sb0 = meta[M_P1];
    const I nt = blockDim.x * blockDim.y;
    const I tid = threadIdx.x + threadIdx.y * blockDim.x;
    const I ngroups = (nrows + g - 1) / g;
    for (I grp = blockIdx.x; grp < ngroups; grp += gridDim.x) {
        const I row0 = grp * g;
        const I rows = nrows - row0 < g ? nrows - row0 : g;
        if (tid < rows) {
            I oa, ob, d0, d1;
            o.decode(row0 + tid, oa, ob, d0, d1);
            s_oa[tid] = oa;
            s_ob[tid] = ob;
            // Outer dim 0 is the chunk of the fastest dim; the last chunk may be short (only
            // when G = 1, so every row of a larger group has the full length).
            if (tid == 0) s_len = valid_extent(chunk, (I)1, n0, chunk, d0);
        }
        __syncthreads();
        const I len = s_len;
        const I total = rows * len;
        // Flat position tid + k*nt as (row, element), advanced by (q, rem) per step.
        const I q = nt / len, rem = nt - q * len;
        I r = tid / len, f = tid - r * len;
        for (I base = tid; base < total; base += U * nt) {
            T v[U];
            I ro[U], fo[U];
#pragma unroll
            for (int k = 0; k < U; ++k) {
                ro[k] = r;
                fo[k] = f;
                if (base + k * nt < total) v[k] = *TTGT_CHECK(a + (s_oa[r] + f * sa0));
                r += q;
                f += rem;
                if (f >= len) {
                    f -= len;
                    ++r;
                }
            }
#pragma unroll
            for (int k = 0; k < U; ++k)
                if (base + k * nt < total) store(b + (s_ob[ro[k]] + fo[k] * sb0), v[k], alpha, beta, mode);
        }
        __syncthreads();
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

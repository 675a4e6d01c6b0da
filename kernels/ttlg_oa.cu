// TTLG Orthogonal-Arbitrary: the input slice (columns, A's fastest dims) and the output
// slice overlap. The shared buffer holds the whole slice: columns = input slice, rows = the
// output-slice dims that are not in the input slice. The copy-in walks rows and columns
// (coalesced in A, row offsets from an offset array); the copy-out walks the slice in B's
// order through two per-element offset arrays (B offset, buffer index), which TTLG keeps in
// read-only memory. Dynamic shared memory: cols * rows elements. Block: 256 threads.
#include "ttgt_common.cuh"

namespace ttgt {

template <typename T, typename I, int R>
TTGT_INLINE void oa_body(const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,
                         T alpha, T beta, int mode) {
    constexpr int U = 4;
    TTGT_EXTERN_SHARED(T, buf);
    Outer<I, R> o;
    o.load(meta);
    const I nblk = meta[M_NBLK];
    const I va = meta[M_VA], inner_a = meta[M_INNER_A], na = meta[M_NA], ba = meta[M_BA];
    const I vb = meta[M_VB], inner_b = meta[M_INNER_B], nb = meta[M_NB], bb = meta[M_BB];
    const I* __restrict__ a_col = meta + meta[M_P0];
    const I* __restrict__ a_row = meta + meta[M_P1];
    const I* __restrict__ b_elem = meta + meta[M_P2];
    const I* __restrict__ sm_elem = meta + meta[M_P3];
    const I nthreads = blockDim.x * blockDim.y;
    const I tid = threadIdx.x + threadIdx.y * blockDim.x;
    const I vol = va * vb;
    // Copy-in mapping: a thread owns one column and every row_step-th row when a row is
    // shorter than the block, else strided columns of every row.
    const bool narrow = va < nthreads;
    const I row_step = narrow ? nthreads / va : 1;
    const I c_start = narrow ? tid % va : tid;
    const I r_start = narrow ? tid / va : 0;
    for (I blk = blockIdx.x; blk < nblk; blk += gridDim.x) {
        I oa, ob, d0, d1;
        o.decode(blk, oa, ob, d0, d1);
        const I nc = valid_extent(va, inner_a, na, ba, d0);
        const I nr = valid_extent(vb, inner_b, nb, bb, d1);
        // Both copies are unrolled by U so that a thread has U loads in flight (the trip
        // counts are known only at run time, so the compiler would not do it alone).
        if (narrow) {
            if (r_start < row_step && c_start < nc) {
                const I ac = oa + *TTGT_CHECK(a_col + c_start);
                for (I r = r_start; r < nr; r += U * row_step) {
                    T v[U];
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const I rr = r + u * row_step;
                        if (rr < nr) v[u] = *TTGT_CHECK(a + (ac + *TTGT_CHECK(a_row + rr)));
                    }
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const I rr = r + u * row_step;
                        if (rr < nr) buf[rr * va + c_start] = v[u];
                    }
                }
            }
        } else {
            for (I r = 0; r < nr; ++r) {
                const I ar = oa + *TTGT_CHECK(a_row + r);
                for (I c = c_start; c < nc; c += U * nthreads) {
                    T v[U];
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const I cc = c + u * nthreads;
                        if (cc < nc) v[u] = *TTGT_CHECK(a + (ar + *TTGT_CHECK(a_col + cc)));
                    }
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const I cc = c + u * nthreads;
                        if (cc < nc) buf[r * va + cc] = v[u];
                    }
                }
            }
        }
        __syncthreads();
        const bool full = nc == va && nr == vb;
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
                        const I r = s[u] / va;
                        if (r >= nr || s[u] - r * va >= nc) s[u] = -1;
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (s[u] >= 0) store(b + (ob + bo[u]), buf[s[u]], alpha, beta, mode);
        }
        __syncthreads();
    }
}

} // namespace ttgt

using ttgt::oa_body;
TTGT_FOR_ALL(TTGT_DEFINE, oa)

#ifdef TTGT_EMU
extern "C" int (*ttgt_emu_lookup_oa(const char* name))(const ttgt_emu::Launch*) {
    TTGT_FOR_ALL(TTGT_LOOKUP, oa)
    return nullptr;
}
#endif

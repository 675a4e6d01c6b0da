// TTLG FVI-Match-Small: A and B share their fastest dim i0 (N0 < 32 elements). A block moves
// a b x b x N0 brick: b values of A's second dim i1 times b values of B's second dim o1.
// Copy-in: each warp takes one o1 value and reads b*N0 consecutive elements of A (i1, i0);
// copy-out: each warp takes one i1 value and writes b*N0 consecutive elements of B (o1, i0).
// The buffer has b rows (o1) of b*N0 + pad elements, pad chosen so that the row length is
// N0 modulo 32: the copy-out reads of a warp fall in distinct banks.
// Block: 256 threads (8 warps). Outer dim 0 = blocks of i1, dim 1 = blocks of o1.
#include "ttgt_common.cuh"

namespace ttgt {

template <typename T, typename I, int R>
TTGT_INLINE void fs_body(const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,
                         T alpha, T beta, int mode) {
    TTGT_EXTERN_SHARED(T, buf);
    Outer<I, R> o;
    o.load(meta);
    const I nblk = meta[M_NBLK];
    const I n0 = meta[M_VA], bs = meta[M_VB];
    const I n1 = meta[M_NA], n2 = meta[M_NB];
    const I sa0 = meta[M_P0], sb0 = meta[M_P1], sa1 = meta[M_P2], sb1 = meta[M_P3];
    const I sa2 = meta[M_P4], sb2 = meta[M_P5], pad = meta[M_P6];
    const I ld = bs * n0 + pad;
    const int nwarps = (blockDim.x * blockDim.y) / 32;
    const int tid = threadIdx.x + threadIdx.y * blockDim.x;
    const int warp = tid / 32, lane = tid % 32;
    // Position of this lane in a run of N0-element pencils, advanced without division.
    const I q0 = lane / n0, f0 = lane - (lane / n0) * n0;
    const I qstep = 32 / n0, fstep = 32 - (32 / n0) * n0;
    for (I blk = blockIdx.x; blk < nblk; blk += gridDim.x) {
        I oa, ob, d0, d1;
        o.decode(blk, oa, ob, d0, d1);
        const I n1v = n1 - d0 * bs < bs ? n1 - d0 * bs : bs;
        const I n2v = n2 - d1 * bs < bs ? n2 - d1 * bs : bs;
        for (I k = warp; k < n2v; k += nwarps) {
            I q = q0, f = f0;
            for (I t = lane; t < n1v * n0; t += 32) {
                buf[k * ld + t] = *TTGT_CHECK(a + (oa + k * sa2 + q * sa1 + f * sa0));
                q += qstep;
                f += fstep;
                if (f >= n0) {
                    f -= n0;
                    ++q;
                }
            }
        }
        __syncthreads();
        for (I j = warp; j < n1v; j += nwarps) {
            I q = q0, f = f0;
            for (I t = lane; t < n2v * n0; t += 32) {
                store(b + (ob + j * sb1 + q * sb2 + f * sb0), buf[q * ld + j * n0 + f], alpha, beta,
                      mode);
                q += qstep;
                f += fstep;
                if (f >= n0) {
                    f -= n0;
                    ++q;
                }
            }
        }
        __syncthreads();
    }
}

} // namespace ttgt

using ttgt::fs_body;
TTGT_FOR_ALL(TTGT_DEFINE, fs)

#ifdef TTGT_EMU
extern "C" int (*ttgt_emu_lookup_fs(const char* name))(const ttgt_emu::Launch*) {
    TTGT_FOR_ALL(TTGT_LOOKUP, fs)
    return nullptr;
}
#endif

// TTLG Orthogonal-Distinct with asynchronous copies (sm_80 and later; compiled to its own
// PTX for sm_80, kernels ttgt_oda_*). The tiles, the cursor and the write-out are those of
// ttlg_od.cu (ttlg_od_tile.cuh); the loads are cp.async copies from global into shared
// memory, which hold no registers: the block keeps S tiles in shared memory and the copies
// of the next S - 1 in flight while it writes one out (S = 3 for elements of at most 8 bytes,
// 2 for 16-byte ones, whose three tiles would pass 48 KiB of static shared memory). One
// barrier a tile: after it, every copy of the tile to write is complete (each thread waited
// for its own), and every thread has written out the tile before, whose buffer the copies
// issued next reuse. With no registers staging the data, the kernels are bounded for six
// blocks an SM instead of four.
#ifndef TTGT_MIN_BLOCKS
#define TTGT_MIN_BLOCKS 6
#endif
#include "ttgt_common.cuh"
#include "ttlg_od_tile.cuh"

namespace ttgt {

#ifdef TTGT_EMU
// The emulator copies at once (each copy checked for bounds and alignment like a load).
template <int N>
inline void cp_async(void* dst, const void* src) {
    memcpy(dst, ttgt_emu::check_range(src, N, N), N);
}
inline void cp_commit() {}
template <int N>
inline void cp_wait() {}
#else
// Copies N bytes (4, 8 or 16; both addresses aligned to N) from global to shared memory
// without waiting (cp.async.ca: cached in L1).
template <int N>
TTGT_INLINE void cp_async(void* dst, const void* src) {
    unsigned s;
    asm volatile("{ .reg .u64 p; cvta.to.shared.u64 p, %1; cvt.u32.u64 %0, p; }"
                 : "=r"(s)
                 : "l"(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(src), "n"(N)
                 : "memory");
}
// Closes the group of the copies issued since the last commit.
TTGT_INLINE void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's groups are still in flight.
template <int N>
TTGT_INLINE void cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

// Issues the copy of one kernel element into shared memory: one copy of its size, or for a
// 2x2 block of f32 its two 8-byte rows (the block's layout in ttgt_common.cuh).
template <typename T>
struct AsyncAccess {
    template <typename I>
    static TTGT_INLINE void copy(T* dst, const T* __restrict__ a, I off, I) {
        cp_async<sizeof(T)>(dst, a + off);
    }
};
template <>
struct AsyncAccess<q32> {
    template <typename I>
    static TTGT_INLINE void copy(q32* dst, const float* __restrict__ a, I off, I da) {
        cp_async<8>(dst, a + off);
        cp_async<8>(reinterpret_cast<char*>(dst) + 8, a + (off + da));
    }
};

// Issues the copies of the entries of tile t that lie inside its slice: column c0 + tx,
// rows r0 + ty + 8j (the guards the write-out uses, so no unset entry is read).
template <typename T, typename I, int J, int TC>
TTGT_INLINE void oda_issue(T (*tile)[TC + 1], const OdCursor<I>& t,
                           const typename Param<T>::type* __restrict__ a,
                           const I* __restrict__ a_col, const I* __restrict__ a_row, I da, int tx,
                           int ty) {
    const I c = t.c0 + tx;
    if (c < t.nc) {
        const I ac = t.oa + *TTGT_CHECK(a_col + c);
#pragma unroll
        for (int j = 0; j < J; ++j) {
            const I r = t.r0 + ty + 8 * j;
            if (r < t.nr) AsyncAccess<T>::copy(&tile[ty + 8 * j][tx], a, ac + *TTGT_CHECK(a_row + r), da);
        }
    }
}

template <typename T, typename I, int R>
TTGT_INLINE void oda_body(const typename Param<T>::type* __restrict__ a,
                          typename Param<T>::type* __restrict__ b, const I* __restrict__ meta,
                          typename Param<T>::type alpha, typename Param<T>::type beta, int mode) {
    constexpr int U = sizeof(T) <= 4 ? TTGT_OD_U4 : TTGT_OD_U8;
    constexpr int TR = 32 * U;
    constexpr int TC = 32;
    constexpr int J = TR / 8; // copies a thread issues per tile
    constexpr int S = sizeof(T) <= 8 ? 3 : 2;
    __shared__ T tile[S][TR][TC + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    // cur: the tile written out next; ld: the tile copied next (S - 1 ahead).
    OdBlock<I, R> m;
    OdCursor<I> cur;
    if (!m.start(meta, cur)) return;
    OdCursor<I> ld = cur;
    bool ld_more = true;
    // Tiles 0 .. S-2, one commit group each (empty groups keep the count uniform).
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (ld_more) {
            oda_issue<T, I, J, TC>(tile[s], ld, a, m.a_col, m.a_row, m.da, tx, ty);
            ld_more = od_advance<I, R, TC, TR>(ld, m.o, meta, m.nblk);
        }
        cp_commit();
    }
    int stage = 0;
    bool more = true;
    while (more) {
        // Tile `stage` is group t of S - 1 + t committed: at most S - 2 may stay in flight.
        cp_wait<S - 2>();
        __syncthreads();
        // The copies S - 1 tiles ahead go into the buffer written out before this barrier.
        if (ld_more) {
            oda_issue<T, I, J, TC>(tile[(stage + S - 1) % S], ld, a, m.a_col, m.a_row, m.da, tx, ty);
            ld_more = od_advance<I, R, TC, TR>(ld, m.o, meta, m.nblk);
        }
        cp_commit();
        od_store<T, I, U, TC>(tile[stage], cur, b, m.b_col, m.b_row, m.db, alpha, beta, mode, tx, ty);
        more = od_advance<I, R, TC, TR>(cur, m.o, meta, m.nblk);
        stage = (stage + 1) % S;
    }
}

} // namespace ttgt

// Element types whose copies cp.async can make (4, 8 or 16 bytes; 2x2 blocks of f32 as two
// 8-byte rows).
#define TTGT_FOR_ASYNC(X, S)                                                          \
    TTGT_FOR_ALL(X, S) TTGT_FOR_INDEX(X, S, q32, ttgt::q32)

using ttgt::oda_body;
TTGT_FOR_ASYNC(TTGT_DEFINE, oda)

#ifdef TTGT_EMU
extern "C" int (*ttgt_emu_lookup_oda(const char* name))(const ttgt_emu::Launch*) {
    TTGT_FOR_ASYNC(TTGT_LOOKUP, oda)
    return nullptr;
}
#endif

// Shared definitions of the ttgt transpose kernels (TTLG schemas).
//
// Every kernel has the same parameter list:
//   (const T* a, T* b, const I* meta, T alpha, T beta, int mode)
// `a` and `b` point at element (0, ..., 0) of the input and output; offsets may be negative.
// `meta` is the plan's read-only launch table (header, outer dims, offset arrays), built on
// the host (src/backend/cuda/ttlg/launch.rs). `mode`: 0 plain copy, 1 b = alpha*a,
// 2 b = alpha*a + beta*b.
//
// Compiled three ways: clang's CUDA front end to PTX (no CUDA headers), and as plain C++ for
// the CPU emulator (TTGT_EMU, see emu/cuda_emu.h).
#pragma once

#ifdef TTGT_EMU
#include "emu/cuda_emu.h"
#else
#include <__clang_cuda_builtin_vars.h>
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define TTGT_INLINE __attribute__((device)) __attribute__((always_inline)) inline
// Minimum resident blocks per SM (caps registers at 65536 / (256 * TTGT_MIN_BLOCKS)).
#ifndef TTGT_MIN_BLOCKS
#define TTGT_MIN_BLOCKS 4
#endif
#define TTGT_BOUNDS(n) __attribute__((launch_bounds(n, TTGT_MIN_BLOCKS)))
// Dynamic shared memory: one byte array aligned for the widest element.
#define TTGT_EXTERN_SHARED(T, name)                                                   \
    extern __shared__ __attribute__((aligned(16))) unsigned char ttgt_dyn_smem[];     \
    T* name = reinterpret_cast<T*>(ttgt_dyn_smem)
#define TTGT_CHECK(p) (p)
typedef long long int64_t;
typedef int int32_t;
#endif

namespace ttgt {

// Complex types as plain structs (layout of num_complex::Complex<f32/f64>).
struct alignas(8) c32 {
    float re, im;
};
struct alignas(16) c64 {
    double re, im;
};

TTGT_INLINE float mul(float a, float x) { return a * x; }
TTGT_INLINE double mul(double a, double x) { return a * x; }
TTGT_INLINE c32 mul(c32 a, c32 x) {
    c32 r;
    r.re = a.re * x.re - a.im * x.im;
    r.im = a.re * x.im + a.im * x.re;
    return r;
}
TTGT_INLINE c64 mul(c64 a, c64 x) {
    c64 r;
    r.re = a.re * x.re - a.im * x.im;
    r.im = a.re * x.im + a.im * x.re;
    return r;
}
TTGT_INLINE float add(float a, float b) { return a + b; }
TTGT_INLINE double add(double a, double b) { return a + b; }
TTGT_INLINE c32 add(c32 a, c32 b) {
    c32 r;
    r.re = a.re + b.re;
    r.im = a.im + b.im;
    return r;
}
TTGT_INLINE c64 add(c64 a, c64 b) {
    c64 r;
    r.re = a.re + b.re;
    r.im = a.im + b.im;
    return r;
}

// Register image of an element, for values held in registers across a barrier (prefetched
// loads): complex doubles travel as one 16-byte vector, which keeps them in registers (an
// array of two-double structs is left in local memory).
template <typename T>
struct Reg {
    typedef T type;
};
typedef double c64_reg __attribute__((vector_size(16)));
template <>
struct Reg<c64> {
    typedef c64_reg type;
};

// Stores v at *p under the execution mode (uniform across the launch).
template <typename T>
TTGT_INLINE void store(T* p, T v, T alpha, T beta, int mode) {
    if (mode == 0) {
        *TTGT_CHECK(p) = v;
    } else if (mode == 1) {
        *TTGT_CHECK(p) = mul(alpha, v);
    } else {
        *TTGT_CHECK(p) = add(mul(alpha, v), mul(beta, *TTGT_CHECK(p)));
    }
}

// 2x2 blocks (the micro-blocked OD and OA kernels, type names q32 for f32 and q64 for
// f64). The host halves A's and B's fastest dims (both even) and moves blocks of 2 x 2
// elements: two loads of two elements from A (the block's two rows along A's fastest dim,
// `da` elements apart), two stores of two into B (its two columns along B's fastest dim,
// `db` apart), so an f32 transpose issues the 8-byte accesses of an f64 one, and an f64
// one 16-byte accesses. A block in registers and in shared memory is {x0, x1, y0, y1}: x
// the first A row, y the second; B gets {x0, y0} and {x1, y1}.
typedef float f32x2 __attribute__((vector_size(8)));
typedef float q32 __attribute__((vector_size(16)));
typedef double f64x2 __attribute__((vector_size(16)));
typedef double q64 __attribute__((vector_size(32)));

// The scalar type of a kernel element type: what its pointers address and alpha and beta
// are (f32 for 2x2 blocks of f32, f64 for those of f64).
template <typename T>
struct Param {
    typedef T type;
};
template <>
struct Param<q32> {
    typedef float type;
};
template <>
struct Param<q64> {
    typedef double type;
};

// Two elements as one access: the rows and columns of 2x2 blocks.
template <typename S>
struct Pair;
template <>
struct Pair<float> {
    typedef f32x2 type;
};
template <>
struct Pair<double> {
    typedef f64x2 type;
};

// Stores two elements at p (aligned to the pair) under the execution mode.
template <typename S>
TTGT_INLINE void store2(S* p, typename Pair<S>::type v, S alpha, S beta, int mode) {
    typedef typename Pair<S>::type P;
    P* q = TTGT_CHECK(reinterpret_cast<P*>(p));
    if (mode == 0) {
        *q = v;
    } else if (mode == 1) {
        const P r = {alpha * v[0], alpha * v[1]};
        *q = r;
    } else {
        const P o = *q;
        const P r = {alpha * v[0] + beta * o[0], alpha * v[1] + beta * o[1]};
        *q = r;
    }
}

// How a kernel element moves between global memory and registers: `load` the element at
// A offset `off`, `put` one at B offset `off` under the execution mode. `da` and `db` (the
// meta table's M_DA and M_DB) are the second row's and second column's offsets of a 2x2
// block; plain elements ignore them.
template <typename T>
struct Access {
    typedef typename Reg<T>::type R;
    template <typename I>
    static TTGT_INLINE R load(const T* __restrict__ a, I off, I) {
        return *reinterpret_cast<const R*>(TTGT_CHECK(a + off));
    }
    template <typename I>
    static TTGT_INLINE void put(T* __restrict__ b, I off, I, T v, T alpha, T beta, int mode) {
        store(b + off, v, alpha, beta, mode);
    }
};
// 2x2 blocks of scalars S held as the 4-vector Q (layout above).
template <typename Q, typename S>
struct BlockAccess {
    typedef Q R;
    typedef typename Pair<S>::type P;
    template <typename I>
    static TTGT_INLINE Q load(const S* __restrict__ a, I off, I da) {
        const P x = *TTGT_CHECK(reinterpret_cast<const P*>(a + off));
        const P y = *TTGT_CHECK(reinterpret_cast<const P*>(a + (off + da)));
        const Q v = {x[0], x[1], y[0], y[1]};
        return v;
    }
    template <typename I>
    static TTGT_INLINE void put(S* __restrict__ b, I off, I db, Q v, S alpha, S beta, int mode) {
        const P lo = {v[0], v[2]}, hi = {v[1], v[3]};
        store2<S>(b + off, lo, alpha, beta, mode);
        store2<S>(b + (off + db), hi, alpha, beta, mode);
    }
};
template <>
struct Access<q32> : BlockAccess<q32, float> {};
template <>
struct Access<q64> : BlockAccess<q64, double> {};

// Layout of the meta table header (entries of the index type I).
enum Meta {
    M_NBLK = 0,    // number of slices (work items of the grid-stride loop)
    M_VA = 1,      // OD/OA: columns of a full slice (input-side volume); FS: N0
    M_INNER_A = 2, // product of the input slice dims below the blocked one
    M_NA = 3,      // extent of the blocked input dim
    M_BA = 4,      // its block size
    M_VB = 5,      // OD/OA: rows of a full slice; FS: b
    M_INNER_B = 6,
    M_NB = 7,
    M_BB = 8,
    M_P0 = 9,      // schema-specific: offsets (into meta) of arrays, strides, padding
    M_P1 = 10,
    M_P2 = 11,
    M_P3 = 12,
    M_P4 = 13,
    M_P5 = 14,
    M_P6 = 15,
    M_HEADER = 16  // outer dims follow: n[R], sa[R], sb[R]
};
// OD and OA with 2x2 blocks: the offsets of a block's second row in A and second column in B.
constexpr int M_DA = M_P5;
constexpr int M_DB = M_P6;

// Outer (slice-selecting) dims, rank-specialised: the decode loop is unrolled over the R
// dims. Their extents and strides are read from the meta table at each decode (uniform
// loads that the cache serves; one decode per slice) rather than held in 3R registers,
// which would cost the tile loops occupancy. Dim 0 is the outer part of the blocked input
// dim, dim 1 that of the blocked output dim (extent 1 when not blocked).
template <typename I, int R>
struct Outer {
    const I* __restrict__ m;

    TTGT_INLINE void load(const I* __restrict__ meta) { m = meta + M_HEADER; }

    // Decodes a linear slice number into base offsets and the digits of dims 0 and 1.
    TTGT_INLINE void decode(I lin, I& oa, I& ob, I& d0, I& d1) const {
        oa = 0;
        ob = 0;
        d0 = 0;
        d1 = 0;
#pragma unroll
        for (int k = 0; k < R; ++k) {
            const I n = m[k];
            I q = lin / n;
            I d = lin - q * n;
            lin = q;
            oa += d * m[R + k];
            ob += d * m[2 * R + k];
            if (k == 0) d0 = d;
            if (k == 1) d1 = d;
        }
    }
};

// Number of valid entries of a slice side whose slowest dim is blocked: inner * min(b, n - d*b).
template <typename I>
TTGT_INLINE I valid_extent(I full, I inner, I n, I b, I d) {
    I rem = n - d * b;
    return rem >= b ? full : inner * rem;
}

} // namespace ttgt

// Instantiation helpers: every schema is compiled for the four element types, two index
// widths and three outer ranks. Kernel names: ttgt_<schema>_<type>_<index>_r<rank>.
#define TTGT_FOR_RANKS(X, S, TN, T, IN, I) X(S, TN, T, IN, I, 2) X(S, TN, T, IN, I, 4) X(S, TN, T, IN, I, 8)
#define TTGT_FOR_INDEX(X, S, TN, T)                                                   \
    TTGT_FOR_RANKS(X, S, TN, T, i32, int32_t) TTGT_FOR_RANKS(X, S, TN, T, i64, int64_t)
#define TTGT_FOR_ALL(X, S)                                                            \
    TTGT_FOR_INDEX(X, S, f32, float)                                                  \
    TTGT_FOR_INDEX(X, S, f64, double)                                                 \
    TTGT_FOR_INDEX(X, S, c32, ttgt::c32)                                              \
    TTGT_FOR_INDEX(X, S, c64, ttgt::c64)
// OD and OA also come for 2x2 blocks of f32 (`q32`; pointers and scalars are f32).
#define TTGT_FOR_ALL_Q(X, S)                                                          \
    TTGT_FOR_ALL(X, S) TTGT_FOR_INDEX(X, S, q32, ttgt::q32) TTGT_FOR_INDEX(X, S, q64, ttgt::q64)

// 256 threads per block, at least two blocks per SM (at most 128 registers a thread).
// Defines the kernel entry `ttgt_<S>_<TN>_<IN>_r<R>` calling BODY<T, I, R>, and in the
// emulator a launcher registered under the same name.
#ifdef TTGT_EMU
#define TTGT_DEFINE(S, TN, T, IN, I, R)                                               \
    extern "C" __global__ void ttgt_##S##_##TN##_##IN##_r##R(                         \
        const ttgt::Param<T>::type* __restrict__ a, ttgt::Param<T>::type* __restrict__ b, \
        const I* __restrict__ meta, ttgt::Param<T>::type alpha,                       \
        ttgt::Param<T>::type beta, int mode) {                                        \
        S##_body<T, I, R>(a, b, meta, alpha, beta, mode);                             \
    }                                                                                 \
    static int ttgt_emu_##S##_##TN##_##IN##_r##R(const ttgt_emu::Launch* l) {         \
        typedef ttgt::Param<T>::type P;                                               \
        P alpha, beta;                                                                \
        memcpy(&alpha, l->alpha, sizeof(P));                                          \
        memcpy(&beta, l->beta, sizeof(P));                                            \
        const P* a = static_cast<const P*>(l->a);                                     \
        P* b = static_cast<P*>(l->b);                                                 \
        const I* meta = static_cast<const I*>(l->meta);                               \
        int mode = l->mode;                                                           \
        return ttgt_emu::run(l, [=]() {                                               \
            ttgt_##S##_##TN##_##IN##_r##R(a, b, meta, alpha, beta, mode);             \
        });                                                                           \
    }
#define TTGT_LOOKUP(S, TN, T, IN, I, R)                                               \
    if (strcmp(name, "ttgt_" #S "_" #TN "_" #IN "_r" #R) == 0)                        \
        return &ttgt_emu_##S##_##TN##_##IN##_r##R;
#else
#define TTGT_DEFINE(S, TN, T, IN, I, R)                                               \
    extern "C" __global__ void TTGT_BOUNDS(256) ttgt_##S##_##TN##_##IN##_r##R(        \
        const ttgt::Param<T>::type* __restrict__ a, ttgt::Param<T>::type* __restrict__ b, \
        const I* __restrict__ meta, ttgt::Param<T>::type alpha,                       \
        ttgt::Param<T>::type beta, int mode) {                                        \
        S##_body<T, I, R>(a, b, meta, alpha, beta, mode);                             \
    }
#endif

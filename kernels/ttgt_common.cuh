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

// 256 threads per block, at least two blocks per SM (at most 128 registers a thread).
// Defines the kernel entry `ttgt_<S>_<TN>_<IN>_r<R>` calling BODY<T, I, R>, and in the
// emulator a launcher registered under the same name.
#ifdef TTGT_EMU
#define TTGT_DEFINE(S, TN, T, IN, I, R)                                               \
    extern "C" __global__ void ttgt_##S##_##TN##_##IN##_r##R(                         \
        const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,      \
        T alpha, T beta, int mode) {                                                  \
        S##_body<T, I, R>(a, b, meta, alpha, beta, mode);                             \
    }                                                                                 \
    static int ttgt_emu_##S##_##TN##_##IN##_r##R(const ttgt_emu::Launch* l) {         \
        T alpha, beta;                                                                \
        memcpy(&alpha, l->alpha, sizeof(T));                                          \
        memcpy(&beta, l->beta, sizeof(T));                                            \
        const T* a = static_cast<const T*>(l->a);                                     \
        T* b = static_cast<T*>(l->b);                                                 \
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
        const T* __restrict__ a, T* __restrict__ b, const I* __restrict__ meta,      \
        T alpha, T beta, int mode) {                                                  \
        S##_body<T, I, R>(a, b, meta, alpha, beta, mode);                             \
    }
#endif

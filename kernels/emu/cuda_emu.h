// CPU emulation of the small part of CUDA the ttgt kernels use.
//
// A launch runs one block at a time on the calling OS thread. Each CUDA thread of the block
// is a user-space fiber (ucontext) with its own stack; __syncthreads() switches back to the
// block scheduler, which resumes every thread until all of them wait at the same barrier
// (or all have returned). A barrier that some threads never reach, or threads waiting at
// different barriers, makes the launch fail with a message. __shared__ variables are
// thread_local statics: all fibers of a block run on one OS thread, so they share them, and
// one block runs at a time. Dynamic shared memory is a per-launch buffer. Every global
// memory access goes through TTGT_CHECK, which checks the address against the buffers of
// the launch and records an error (the access is redirected to a scratch slot).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

struct dim3 {
    unsigned x, y, z;
};

namespace ttgt_emu {

// One launch, as the Rust side describes it (same layout as `EmuLaunch` in
// src/backend/cuda/emu.rs).
struct Launch {
    unsigned grid[3];
    unsigned block[3];
    size_t shared_bytes;
    const void* a;
    const void* a_lo; // byte range the kernel may read from a
    const void* a_hi;
    void* b;
    const void* b_lo; // byte range the kernel may read and write in b
    const void* b_hi;
    const void* meta;
    size_t meta_bytes;
    const void* alpha;
    const void* beta;
    int mode;
};

extern thread_local dim3 threadIdx_v, blockIdx_v, blockDim_v, gridDim_v;

void syncthreads(int line);
void* dynamic_shared();
const Launch* current_launch();
const void* check_range(const void* p, size_t bytes, size_t align);

// The access *p, checked: inside the launch's buffers and aligned to P's alignment.
template <typename P>
inline P* check(P* p) {
    return (P*)check_range((const void*)p, sizeof(P), alignof(P));
}

typedef void (*Trampoline)(void*);
int run_impl(const Launch* l, Trampoline body, void* ctx);

template <typename F>
int run(const Launch* l, F f) {
    struct Tr {
        static void call(void* c) { (*static_cast<F*>(c))(); }
    };
    return run_impl(l, &Tr::call, &f);
}

} // namespace ttgt_emu

#define threadIdx ttgt_emu::threadIdx_v
#define blockIdx ttgt_emu::blockIdx_v
#define blockDim ttgt_emu::blockDim_v
#define gridDim ttgt_emu::gridDim_v
#define __global__
#define __device__
#define __shared__ static thread_local
#define __syncthreads() ttgt_emu::syncthreads(__LINE__)
#define TTGT_INLINE inline
#define TTGT_BOUNDS(n)
#define TTGT_EXTERN_SHARED(T, name) T* name = static_cast<T*>(ttgt_emu::dynamic_shared())
#define TTGT_CHECK(p) ttgt_emu::check(p)

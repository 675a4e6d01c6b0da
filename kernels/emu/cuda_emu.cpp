// Block scheduler of the CPU emulator (see cuda_emu.h).
#include "cuda_emu.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <ucontext.h>
#include <vector>

namespace ttgt_emu {

thread_local dim3 threadIdx_v, blockIdx_v, blockDim_v, gridDim_v;

namespace {

enum State { RUNNABLE, AT_BARRIER, DONE };

struct Fiber {
    ucontext_t ctx;
    State state;
    int line;
    dim3 tid;
};

const size_t STACK_BYTES = 64 * 1024;
const size_t MAX_SHARED = 48 * 1024;

struct Worker {
    ucontext_t sched;
    std::vector<Fiber> fibers;
    std::vector<char> stacks;
    std::vector<unsigned char> dyn_shared;
    Fiber* current = nullptr;
    const Launch* launch = nullptr;
    Trampoline body = nullptr;
    void* ctx = nullptr;
    std::string error;
    alignas(16) unsigned char scratch[64];
};

thread_local Worker* worker = nullptr;
thread_local std::string last_error;

Worker& me() {
    if (!worker) worker = new Worker();
    return *worker;
}

void fail(Worker& w, const std::string& msg) {
    if (w.error.empty()) w.error = msg;
}

void fiber_main() {
    Worker& w = me();
    w.body(w.ctx);
    w.current->state = DONE;
    // Returning resumes uc_link (the scheduler).
}

bool in(const void* p, size_t n, const void* lo, const void* hi) {
    const char* c = static_cast<const char*>(p);
    return c >= static_cast<const char*>(lo) && c + n <= static_cast<const char*>(hi);
}

} // namespace

void syncthreads(int line) {
    Worker& w = me();
    Fiber* f = w.current;
    f->state = AT_BARRIER;
    f->line = line;
    swapcontext(&f->ctx, &w.sched);
}

void* dynamic_shared() { return me().dyn_shared.data(); }

const Launch* current_launch() { return me().launch; }

const void* check_range(const void* p, size_t bytes, size_t align) {
    Worker& w = me();
    const Launch* l = w.launch;
    if (reinterpret_cast<uintptr_t>(p) % align != 0) {
        // A GPU faults on a misaligned access (e.g. an 8-byte load at a 4-byte boundary).
        char buf[200];
        snprintf(buf, sizeof buf,
                 "misaligned access of %zu bytes at %p (alignment %zu) by thread (%u,%u,%u) of "
                 "block (%u,%u,%u)",
                 bytes, p, align, w.current ? w.current->tid.x : 0,
                 w.current ? w.current->tid.y : 0, w.current ? w.current->tid.z : 0,
                 blockIdx_v.x, blockIdx_v.y, blockIdx_v.z);
        fail(w, buf);
        return w.scratch;
    }
    if (in(p, bytes, l->a_lo, l->a_hi) || in(p, bytes, l->b_lo, l->b_hi)) return p;
    const char* m = static_cast<const char*>(l->meta);
    if (in(p, bytes, m, m + l->meta_bytes)) return p;
    // Dynamic shared memory: the bytes the launch asked for (the allocation has 16 more).
    const char* sh = reinterpret_cast<const char*>(w.dyn_shared.data());
    if (in(p, bytes, sh, sh + l->shared_bytes)) return p;
    char buf[200];
    snprintf(buf, sizeof buf,
             "out-of-bounds access of %zu bytes at %p by thread (%u,%u,%u) of block (%u,%u,%u)",
             bytes, p, w.current ? w.current->tid.x : 0, w.current ? w.current->tid.y : 0,
             w.current ? w.current->tid.z : 0, blockIdx_v.x, blockIdx_v.y, blockIdx_v.z);
    fail(w, buf);
    return w.scratch;
}

int run_impl(const Launch* l, Trampoline body, void* ctx) {
    Worker& w = me();
    w.error.clear();
    unsigned nthreads = l->block[0] * l->block[1] * l->block[2];
    if (nthreads == 0 || nthreads > 1024) {
        last_error = "block of " + std::to_string(nthreads) + " threads (1 to 1024 allowed)";
        return 1;
    }
    if (l->shared_bytes > MAX_SHARED) {
        last_error = "dynamic shared memory of " + std::to_string(l->shared_bytes) +
                     " bytes exceeds 48 KiB";
        return 1;
    }
    w.launch = l;
    w.body = body;
    w.ctx = ctx;
    w.fibers.resize(nthreads);
    if (w.stacks.size() < nthreads * STACK_BYTES) w.stacks.resize(nthreads * STACK_BYTES);
    w.dyn_shared.assign(l->shared_bytes + 16, 0);
    gridDim_v = dim3{l->grid[0], l->grid[1], l->grid[2]};
    blockDim_v = dim3{l->block[0], l->block[1], l->block[2]};
    for (unsigned bz = 0; bz < l->grid[2]; ++bz)
        for (unsigned by = 0; by < l->grid[1]; ++by)
            for (unsigned bx = 0; bx < l->grid[0]; ++bx) {
                blockIdx_v = dim3{bx, by, bz};
                unsigned t = 0;
                for (unsigned z = 0; z < l->block[2]; ++z)
                    for (unsigned y = 0; y < l->block[1]; ++y)
                        for (unsigned x = 0; x < l->block[0]; ++x, ++t) {
                            Fiber& f = w.fibers[t];
                            f.state = RUNNABLE;
                            f.line = 0;
                            f.tid = dim3{x, y, z};
                            getcontext(&f.ctx);
                            f.ctx.uc_stack.ss_sp = &w.stacks[t * STACK_BYTES];
                            f.ctx.uc_stack.ss_size = STACK_BYTES;
                            f.ctx.uc_link = &w.sched;
                            makecontext(&f.ctx, fiber_main, 0);
                        }
                for (;;) {
                    for (unsigned i = 0; i < nthreads; ++i) {
                        Fiber& f = w.fibers[i];
                        if (f.state != RUNNABLE) continue;
                        w.current = &f;
                        threadIdx_v = f.tid;
                        swapcontext(&w.sched, &f.ctx);
                    }
                    w.current = nullptr;
                    unsigned waiting = 0, done = 0;
                    int line = -1;
                    bool mixed = false;
                    for (unsigned i = 0; i < nthreads; ++i) {
                        const Fiber& f = w.fibers[i];
                        if (f.state == DONE) {
                            ++done;
                        } else {
                            ++waiting;
                            if (line >= 0 && f.line != line) mixed = true;
                            line = f.line;
                        }
                    }
                    if (waiting == 0) break;
                    char buf[240];
                    if (done > 0) {
                        snprintf(buf, sizeof buf,
                                 "__syncthreads() at line %d of block (%u,%u,%u) reached by %u of "
                                 "%u threads; the others returned",
                                 line, bx, by, bz, waiting, nthreads);
                        last_error = buf;
                        return 2;
                    }
                    if (mixed) {
                        snprintf(buf, sizeof buf,
                                 "threads of block (%u,%u,%u) wait at different __syncthreads()",
                                 bx, by, bz);
                        last_error = buf;
                        return 2;
                    }
                    for (unsigned i = 0; i < nthreads; ++i) w.fibers[i].state = RUNNABLE;
                }
                if (!w.error.empty()) {
                    last_error = w.error;
                    return 3;
                }
            }
    return 0;
}

} // namespace ttgt_emu

typedef int (*EmuEntry)(const ttgt_emu::Launch*);

// Deliberately broken kernels that test the emulator's own checks.
namespace {
void selftest_divergent_barrier() {
    if (threadIdx.x % 2 == 0) __syncthreads();
}
void selftest_out_of_bounds() {
    float* b = static_cast<float*>(ttgt_emu::current_launch()->b);
    *ttgt_emu::check(b + 1000000) = 1.0f;
}
void selftest_misaligned() {
    // An 8-byte access one float past an 8-byte boundary, inside the buffer.
    typedef float f32x2 __attribute__((vector_size(8)));
    float* b = static_cast<float*>(ttgt_emu::current_launch()->b);
    float* p = reinterpret_cast<uintptr_t>(b) % 8 == 0 ? b + 1 : b;
    *ttgt_emu::check(reinterpret_cast<f32x2*>(p)) = f32x2{1.0f, 2.0f};
}
int run_divergent(const ttgt_emu::Launch* l) { return ttgt_emu::run(l, selftest_divergent_barrier); }
int run_oob(const ttgt_emu::Launch* l) { return ttgt_emu::run(l, selftest_out_of_bounds); }
int run_misaligned(const ttgt_emu::Launch* l) { return ttgt_emu::run(l, selftest_misaligned); }
} // namespace
extern "C" EmuEntry ttgt_emu_lookup_od(const char* name);
extern "C" EmuEntry ttgt_emu_lookup_oa(const char* name);
extern "C" EmuEntry ttgt_emu_lookup_fl(const char* name);
extern "C" EmuEntry ttgt_emu_lookup_fs(const char* name);
extern "C" EmuEntry ttgt_emu_lookup_oda(const char* name);

// Runs kernel `name` under the emulator. Returns 0 on success, -1 for an unknown kernel,
// another nonzero code on a failed launch (message from ttgt_emu_last_error).
extern "C" int ttgt_emu_launch(const char* name, const ttgt_emu::Launch* l) {
    EmuEntry e = nullptr;
    if (strcmp(name, "emu_selftest_divergent_barrier") == 0) e = run_divergent;
    if (strcmp(name, "emu_selftest_out_of_bounds") == 0) e = run_oob;
    if (strcmp(name, "emu_selftest_misaligned") == 0) e = run_misaligned;
    if (!e) e = ttgt_emu_lookup_od(name);
    if (!e) e = ttgt_emu_lookup_oa(name);
    if (!e) e = ttgt_emu_lookup_fl(name);
    if (!e) e = ttgt_emu_lookup_fs(name);
    if (!e) e = ttgt_emu_lookup_oda(name);
    if (!e) {
        ttgt_emu::last_error = std::string("no kernel named ") + name;
        return -1;
    }
    return e(l);
}

// The message of the last failed launch on this thread (valid until the next launch).
extern "C" const char* ttgt_emu_last_error() { return ttgt_emu::last_error.c_str(); }

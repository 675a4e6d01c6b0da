// Whole-line permutations of a 16^6 f32 tensor (A's and B's fastest dim the same, rows of
// 16 f32 = one 64-byte line): the line order of the walk decides how B's writes scatter.
// A stand-alone experiment behind docs/TUNING.md ("Streamed rows of whole lines: A's
// order"), not part of the library. For one permutation it times, best of three, in three
// rounds:
//   memcpy of the same bytes (the reference),
//   the walk in A's order (what ttgt's streamed row copies do),
//   the walk in a given order of A's line dims (outermost first),
//   the same with a prefetch DIST lines ahead.
// Build and run (x86-64 with AVX-512):
//   gcc -O3 -march=native -o line_perms benches/c/line_perms.c
//   ./line_perms 341205 16 12304     # perm (numpy meaning, last entry 5), DIST, order
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static long sa[6], sb[6];
static float *A, *B;

// One step of the odometer over A's line dims 0..4 in `ord` (last fastest).
#define STEP(I, OA, OB)                                                    \
    {                                                                      \
        int k = 4;                                                         \
        while (k >= 0) {                                                   \
            int d = ord[k];                                                \
            I[k]++;                                                        \
            OA += sa[d];                                                   \
            OB += sb[d];                                                   \
            if (I[k] < 16) break;                                          \
            OA -= 16 * sa[d];                                              \
            OB -= 16 * sb[d];                                              \
            I[k] = 0;                                                      \
            k--;                                                           \
        }                                                                  \
    }

// Copies every line of A to its place in B, walking `ord`; prefetches A `dist` lines ahead
// in the walk (0: none). Streaming stores.
static void walk(const int *ord, int dist) {
    int idx[5] = {0}, id2[5] = {0};
    long oa = 0, ob = 0, oa2 = 0, ob2 = 0;
    for (int q = 0; q < dist; q++) STEP(id2, oa2, ob2)
    for (long u = 0; u < (1L << 20); u++) {
        if (dist) _mm_prefetch((const char *)(A + oa2), _MM_HINT_T0);
        _mm512_stream_ps(B + ob, _mm512_load_ps(A + oa));
        STEP(idx, oa, ob)
        if (dist) STEP(id2, oa2, ob2)
    }
    _mm_sfence();
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PERM DIST ORDER (e.g. 341205 16 12304)\n", argv[0]);
        return 2;
    }
    int perm[6], ord[5], aord[5] = {0, 1, 2, 3, 4};
    for (int i = 0; i < 6; i++) perm[i] = argv[1][i] - '0';
    for (int i = 0; i < 5; i++) ord[i] = argv[3][i] - '0';
    int dist = atoi(argv[2]);
    long n = 1L << 24;
    A = aligned_alloc(2 << 20, n * 4);
    B = aligned_alloc(2 << 20, n * 4);
    madvise(A, n * 4, MADV_HUGEPAGE);
    madvise(B, n * 4, MADV_HUGEPAGE);
    for (long i = 0; i < n; i++) A[i] = i;
    memset(B, 0, n * 4);
    for (int k = 0; k < 6; k++) sa[k] = 1L << (4 * (5 - k));
    for (int i = 0; i < 6; i++) sb[perm[i]] = 1L << (4 * (5 - i));
    for (int round = 0; round < 3; round++) {
        double tc = 1e9, ta = 1e9, tx = 1e9, tp = 1e9, t;
        for (int r = 0; r < 3; r++) {
            t = now(); memcpy(B, A, n * 4); t = now() - t; if (t < tc) tc = t;
            t = now(); walk(aord, 0); t = now() - t; if (t < ta) ta = t;
            t = now(); walk(ord, 0); t = now() - t; if (t < tx) tx = t;
            t = now(); walk(ord, dist); t = now() - t; if (t < tp) tp = t;
        }
        long bad = 0;  // spot check of the last walk
        for (long q = 0; q < 100000; q++) {
            long i = (q * 2654435761L) % n, x = i, ob = 0;
            for (int k = 5; k >= 0; k--) { ob += (x % 16) * sb[k]; x /= 16; }
            if (B[ob] != A[i]) bad++;
        }
        printf("%s copy %.2f A-order %.2f (%.3f) X-order %.2f (%.3f) X-order+pf %.2f (%.3f) bad %ld\n",
               argv[1], tc * 1e3, ta * 1e3, tc / ta, tx * 1e3, tc / tx, tp * 1e3, tc / tp, bad);
    }
    return 0;
}

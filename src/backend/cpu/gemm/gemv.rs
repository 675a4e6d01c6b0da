//! Matrix-vector products: GEMM calls with `m == 1` or `n == 1` whose matrix has a unit
//! stride. Both GEMM libraries run these as general GEMMs and read the matrix at about half
//! the memory's rate; here the matrix is streamed once:
//!
//! - rows contiguous: dot products of four rows at a time against one load of the vector
//!   (`gemv_x86.rs`, f32 and f64 on AVX2 + FMA), else one row at a time with sixteen
//!   accumulators; a product on the calling thread needs no heap buffer;
//! - columns contiguous: blocks of rows (up to 128 KiB of accumulators each) take eight
//!   columns at a time (then four, then one), `y[block] += x[l] * M[block, l] + ...`, every
//!   column segment a contiguous run.
//!
//! Threads split the rows; when there are fewer row blocks than threads (few long rows),
//! they split the summed dimension too and the partial sums are added at the end.
//! `alpha` and `beta` are applied once per output element.

use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::gemv_x86;
use super::{Mat, MatMut};
use crate::tensor::{DType, Element};
use crate::transpose::{on_threads, wakes_threads, Isa};

/// Accumulator bytes of one block of rows in the column-contiguous form (they stay in L2 while
/// the block's column segments stream past; 8 KiB blocks, in L1, ran 1.2-1.4x slower on one
/// thread because their short segments defeat the hardware prefetcher).
const ACC_BYTES: usize = 128 << 10;
/// Smallest matrix (bytes) whose product is split over threads when the caller is outside
/// their pool: a 64×64 f64 product (32 KB) ran 20–24 us from the main thread with two
/// tasks, 6 us inside the pool, where entering a parallel region costs 15–21 us
/// (`wakes_threads`) — the time to stream about 256 KB on one thread.
const PARALLEL_MIN_BYTES: usize = 256 << 10;
/// Largest matrix (elements) multiplied by plain loops on the calling thread, whatever its
/// strides: the gathered vector and partial-sum buffers of the streamed form cost more than
/// such a product (a 1×1×5 call: about 90 ns of allocation against a few ns of work).
const DIRECT_MAX_ELEMENTS: usize = 1024;
/// Fewest elements of the summed dimension a task takes when that dimension is split.
const MIN_K_CHUNK: usize = 4096;

/// Raw pointers handed to worker tasks.
#[derive(Clone, Copy)]
struct Shared<T> {
    m: *const T,
    x: *const T,
    part: *mut T,
}
// SAFETY: tasks only read `m` and `x`, which nothing writes during the call, and write
// disjoint ranges of `part` (each task its own (k chunk, row block) range).
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The pointers (a method, so that closures capture the whole `Sync` struct rather than
    /// its raw-pointer fields).
    fn get(&self) -> (*const T, *const T, *mut T) {
        (self.m, self.x, self.part)
    }
}

/// `sum(a[l] * x[l])` with sixteen independent accumulators (several vector registers at
/// every SIMD width, so the adds do not wait on each other).
#[inline(always)]
fn dot<T: Element>(a: &[T], x: &[T]) -> T {
    const L: usize = 16;
    let mut acc = [T::zero(); L];
    let (ca, cx) = (a.chunks_exact(L), x.chunks_exact(L));
    let (ra, rx) = (ca.remainder(), cx.remainder());
    for (pa, px) in ca.zip(cx) {
        for j in 0..L {
            acc[j] += pa[j] * px[j];
        }
    }
    let mut s = T::zero();
    for (&p, &q) in ra.iter().zip(rx) {
        s += p * q;
    }
    for v in acc {
        s += v;
    }
    s
}

/// `out[i] = dot(row i, x)` for rows `rs` apart: four rows at a time through the AVX2 + FMA
/// kernels where `simd` says the CPU has them and the type is `f32` or `f64`, one row at a
/// time otherwise.
///
/// # Safety
/// Rows `i < out.len()` of `x.len()` contiguous elements each start at `m + i * rs`; with
/// `simd`, the CPU has AVX2 and FMA.
#[inline(always)]
unsafe fn dot_rows<T: Element>(simd: bool, m: *const T, rs: isize, x: &[T], out: &mut [T]) {
    let k = x.len();
    let row = |i: usize| m.offset(i as isize * rs);
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if simd && matches!(T::DTYPE, DType::F32 | DType::F64) {
        let mut quads = out.chunks_exact_mut(4);
        for o in quads.by_ref() {
            let rows = [row(i), row(i + 1), row(i + 2), row(i + 3)];
            // SAFETY: T is the kernel's type (checked by DTYPE above), so the casts keep
            // pointers to valid elements; the caller vouches for the rows and the CPU.
            match T::DTYPE {
                DType::F64 => {
                    let s = gemv_x86::dot4_f64(rows.map(|r| r.cast()), x.as_ptr().cast(), k);
                    o.as_mut_ptr().cast::<[f64; 4]>().write_unaligned(s);
                }
                _ => {
                    let s = gemv_x86::dot4_f32(rows.map(|r| r.cast()), x.as_ptr().cast(), k);
                    o.as_mut_ptr().cast::<[f32; 4]>().write_unaligned(s);
                }
            }
            i += 4;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    for o in &mut out[i..] {
        *o = dot(std::slice::from_raw_parts(row(i), k), x);
        i += 1;
    }
}

/// `sum over l < k of a[l * as_] * x[l * xs]` with four independent accumulators.
///
/// # Safety
/// Every `a.offset(l * as_)` and `x.offset(l * xs)` for `l < k` is a valid element.
#[inline(always)]
unsafe fn strided_dot<T: Element>(a: *const T, as_: isize, x: *const T, xs: isize, k: usize) -> T {
    let mut acc = [T::zero(); 4];
    let mut l = 0isize;
    let k = k as isize;
    while l + 4 <= k {
        for (q, s) in acc.iter_mut().enumerate() {
            let j = l + q as isize;
            *s += *a.offset(j * as_) * *x.offset(j * xs);
        }
        l += 4;
    }
    let mut s = T::zero();
    while l < k {
        s += *a.offset(l * as_) * *x.offset(l * xs);
        l += 1;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + s
}

/// `acc[i] += sum over l of x[l] * col_l[i]` for the columns `cols(l)` (each `acc.len()`
/// long), eight columns at a time, then four, then one: eight halve the accumulators' loads
/// and stores per column against four (see `docs/TUNING.md`).
#[inline(always)]
fn axpy_columns<'a, T: Element + 'a>(acc: &mut [T], x: &[T], cols: impl Fn(usize) -> &'a [T]) {
    let k = x.len();
    let mut l = 0;
    while l + 8 <= k {
        let n = acc.len();
        // each column cut to exactly `n`, so the indexing below needs no bounds checks
        let c: [&[T]; 8] = std::array::from_fn(|q| &cols(l + q)[..n]);
        let xs: [T; 8] = std::array::from_fn(|q| x[l + q]);
        let acc = &mut acc[..n];
        for i in 0..n {
            let lo = xs[0] * c[0][i] + xs[1] * c[1][i] + xs[2] * c[2][i] + xs[3] * c[3][i];
            let hi = xs[4] * c[4][i] + xs[5] * c[5][i] + xs[6] * c[6][i] + xs[7] * c[7][i];
            acc[i] += lo + hi;
        }
        l += 8;
    }
    while l + 4 <= k {
        let (c0, c1, c2, c3) = (cols(l), cols(l + 1), cols(l + 2), cols(l + 3));
        let (x0, x1, x2, x3) = (x[l], x[l + 1], x[l + 2], x[l + 3]);
        let cols = c0.iter().zip(c1).zip(c2).zip(c3);
        for (a, (((&v0, &v1), &v2), &v3)) in acc.iter_mut().zip(cols) {
            *a += x0 * v0 + x1 * v1 + x2 * v2 + x3 * v3;
        }
        l += 4;
    }
    for (l, &xl) in x.iter().enumerate().skip(l) {
        for (a, &v) in acc.iter_mut().zip(cols(l)) {
            *a += xl * v;
        }
    }
}

/// One task's part of the matrix: `out.len()` rows from `m`, `x.len()` columns.
struct Block<T> {
    m: *const T,
    rs: isize,
    cs: isize,
    rows_contiguous: bool,
    /// The AVX2 + FMA row kernels may run (see [`simd_rows`]).
    simd: bool,
}

impl<T: Element> Block<T> {
    /// `out[i] = sum over l of M[i, l] * x[l]`.
    ///
    /// # Safety
    /// `M[i, l]` (at `m + i*rs + l*cs`) is valid for `i < out.len()`, `l < x.len()`, with
    /// `cs == 1` (rows contiguous) or `rs == 1` (columns contiguous).
    #[inline(always)]
    unsafe fn run(&self, x: &[T], out: &mut [T]) {
        let rows = out.len();
        if self.rows_contiguous {
            dot_rows(self.simd, self.m, self.rs, x, out);
        } else {
            let col =
                |l: usize| std::slice::from_raw_parts(self.m.offset(l as isize * self.cs), rows);
            axpy_columns(out, x, col);
        }
    }

    /// [`Block::run`] compiled for AVX2.
    ///
    /// # Safety
    /// As for [`Block::run`]; the CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self, x: &[T], out: &mut [T]) {
        self.run(x, out)
    }

    /// [`Block::run`] compiled for AVX-512F.
    ///
    /// # Safety
    /// As for [`Block::run`]; the CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(&self, x: &[T], out: &mut [T]) {
        self.run(x, out)
    }
}

/// Whether the AVX2 + FMA row kernels may run at `isa` on this CPU.
fn simd_rows(isa: Isa) -> bool {
    isa != Isa::Scalar && crate::cpu::features().fma
}

/// Rows of the matrix per call of the row kernel on the calling thread: their dot products
/// wait in a stack buffer for `alpha` and `beta`, so no heap buffer is needed.
const ALONE_ROWS: usize = 64;

/// `y[i * ys] = alpha * dot(row i, x) + beta * y[i * ys]` for `r` contiguous rows `rs` apart,
/// on this thread, with the row kernel compiled for `isa`.
///
/// # Safety
/// Rows `i < r` of `x.len()` elements start at `m + i * rs`; `y + i * ys` is valid and
/// written by nothing else for `i < r`; the CPU supports `isa`.
#[allow(clippy::too_many_arguments)] // the matrix, the vectors and the scalars
unsafe fn rows_alone<T: Element>(
    isa: Isa,
    m: *const T,
    rs: isize,
    x: &[T],
    y: *mut T,
    ys: isize,
    r: usize,
    alpha: T,
    beta: T,
) {
    let mut buf = [T::zero(); ALONE_ROWS];
    for i0 in (0..r).step_by(ALONE_ROWS) {
        let out = &mut buf[..ALONE_ROWS.min(r - i0)];
        let block = Block {
            m: m.offset(i0 as isize * rs),
            rs,
            cs: 1,
            rows_contiguous: true,
            simd: simd_rows(isa),
        };
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => block.run_avx512(x, out),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => block.run_avx2(x, out),
            _ => block.run(x, out),
        }
        for (i, &s) in out.iter().enumerate() {
            let p = y.offset((i0 + i) as isize * ys);
            *p = if beta.is_exact_zero() {
                alpha * s
            } else {
                alpha * s + beta * *p
            };
        }
    }
}

/// Runs `C = alpha * A·B + beta * C` as a matrix-vector product when it is one (`m == 1` or
/// `n == 1`, the matrix with a unit stride), with the loops compiled for `isa`; returns
/// false, having done nothing, otherwise.
///
/// # Safety
/// As for [`super::gemm`], with `m, n, k > 0`; the CPU supports `isa`.
#[allow(clippy::too_many_arguments)] // the BLAS signature plus ISA and thread count
pub(crate) unsafe fn try_gemv<T: Element>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: Mat<T>,
    b: Mat<T>,
    beta: T,
    c: MatMut<T>,
    threads: usize,
) -> bool {
    // y[r] = alpha * M[r x k] · x + beta * y.
    let (r, mat, x, xs, y, ys) = if n == 1 {
        (m, a, b.ptr, b.rs, c.ptr, c.rs)
    } else if m == 1 {
        // C[0, j] = sum_l A[0, l] B[l, j]: M = B transposed.
        let bt = Mat {
            ptr: b.ptr,
            rs: b.cs,
            cs: b.rs,
        };
        (n, bt, a.ptr, a.cs, c.ptr, c.cs)
    } else {
        return false;
    };
    let size = std::mem::size_of::<T>();
    let rows_contiguous = mat.cs == 1 || k == 1;
    // A product that stays on this thread: small ones always, and those that would not wake
    // the pool's other threads for less than PARALLEL_MIN_BYTES.
    let alone = threads <= 1
        || r * k <= DIRECT_MAX_ELEMENTS
        || (r * k * size < PARALLEL_MIN_BYTES && wakes_threads(threads));
    if alone && rows_contiguous && (xs == 1 || k == 1) {
        rows_alone(
            isa,
            mat.ptr,
            mat.rs,
            std::slice::from_raw_parts(x, k),
            y,
            ys,
            r,
            alpha,
            beta,
        );
        return true;
    }
    if r * k <= DIRECT_MAX_ELEMENTS {
        // In cache and too short to split: plain loops, no buffers, with independent
        // accumulators (one running sum waits on its adds: 4 cycles an element).
        for i in 0..r as isize {
            let row = mat.ptr.offset(i * mat.rs);
            let s = if k == 1 || (mat.cs == 1 && xs == 1) {
                dot(
                    std::slice::from_raw_parts(row, k),
                    std::slice::from_raw_parts(x, k),
                )
            } else {
                strided_dot(row, mat.cs, x, xs, k)
            };
            let p = y.offset(i * ys);
            *p = if beta.is_exact_zero() {
                alpha * s
            } else {
                alpha * s + beta * *p
            };
        }
        return true;
    }
    if !rows_contiguous && mat.rs != 1 {
        return false;
    }
    // x contiguous (gathered when strided: k elements beside the r x k matrix).
    let gathered: Vec<T>;
    let xv: &[T] = if xs == 1 {
        std::slice::from_raw_parts(x, k)
    } else {
        gathered = (0..k as isize).map(|l| *x.offset(l * xs)).collect();
        &gathered
    };
    // A small matrix called from outside the pool runs on this thread: waking the workers
    // costs more than streaming it.
    let threads = if alone { 1 } else { threads };
    // Row blocks: a multiple of the thread count (balanced), each at most ACC_BYTES of
    // accumulators in the column form.
    let per_thread = if rows_contiguous {
        4
    } else {
        r.div_ceil(threads * (ACC_BYTES / size))
    };
    let block = r.div_ceil(threads * per_thread).max(1);
    let nb = r.div_ceil(block);
    let nq = if nb >= threads {
        1
    } else {
        (2 * threads)
            .div_ceil(nb)
            .min(k.div_ceil(MIN_K_CHUNK))
            .max(1)
    };
    let kq = k.div_ceil(nq);
    let simd = simd_rows(isa);
    let mut part = vec![T::zero(); r * nq];
    let sh = Shared {
        m: mat.ptr,
        x: xv.as_ptr(),
        part: part.as_mut_ptr(),
    };
    let task = |t: usize| {
        let (q, bi) = (t / nb, t % nb);
        let (i0, i1) = (bi * block, ((bi + 1) * block).min(r));
        let (l0, l1) = (q * kq, ((q + 1) * kq).min(k));
        if l0 >= l1 {
            return;
        }
        let (m, x, part) = sh.get();
        // SAFETY: rows i0..i1 and columns l0..l1 of M are inside the caller's matrix; x has
        // k elements; this task alone writes part[q*r + i0 .. q*r + i1]; the ISA was
        // detected on this CPU.
        unsafe {
            let m0 = m.offset(i0 as isize * mat.rs + l0 as isize * mat.cs);
            let xs = std::slice::from_raw_parts(x.add(l0), l1 - l0);
            let out = std::slice::from_raw_parts_mut(part.add(q * r + i0), i1 - i0);
            let block = Block {
                m: m0,
                rs: mat.rs,
                cs: mat.cs,
                rows_contiguous,
                simd,
            };
            match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => block.run_avx512(xs, out),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => block.run_avx2(xs, out),
                _ => block.run(xs, out),
            }
        }
    };
    if threads == 1 || nb * nq == 1 {
        (0..nb * nq).for_each(task);
    } else {
        on_threads(threads, || (0..nb * nq).into_par_iter().for_each(task));
    }
    for i in 0..r {
        let mut s = part[i];
        for q in 1..nq {
            s += part[q * r + i];
        }
        let p = y.offset(i as isize * ys);
        *p = if beta.is_exact_zero() {
            alpha * s
        } else {
            alpha * s + beta * *p
        };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::{Complex32, Complex64};

    /// Checks one product against a plain triple loop: `(m, n, k)` with the matrix operand
    /// stored row- or column-contiguous, x and y strided or not, both beta cases.
    #[allow(clippy::too_many_arguments)] // one case's parameters
    fn case<T: Element>(
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        col_major: bool,
        step: isize,
        threads: usize,
    ) {
        let f = |i: usize| T::from_parts(((i * 7919) % 13) as f64 - 6.0, (i % 5) as f64 - 2.0);
        // A is m x k, B is k x n; the matrix is the operand that is not the vector.
        let (ars, acs) = if col_major {
            (1, m as isize)
        } else {
            (k as isize, 1)
        };
        let (brs, bcs) = if col_major {
            (1, k as isize)
        } else {
            (n as isize, 1)
        };
        let (ars, acs, brs, bcs) = if n == 1 {
            (ars, acs, step, step)
        } else {
            (step, step, brs, bcs)
        };
        let span = |rows: usize, cols: usize, rs: isize, cs: isize| {
            (rows - 1) * rs.unsigned_abs() + (cols - 1) * cs.unsigned_abs() + 1
        };
        let av: Vec<T> = (0..span(m, k, ars, acs)).map(f).collect();
        let bv: Vec<T> = (0..span(k, n, brs, bcs)).map(|i| f(i + 3)).collect();
        for beta in [0.0, 0.5] {
            let clen = m * n * step.unsigned_abs();
            let init = if beta == 0.0 { f64::NAN } else { 1.5 };
            let mut cv = vec![T::from_f64(init); clen];
            let (crs, ccs) = (n as isize * step, step);
            let alpha = T::from_parts(0.75, 0.25);
            let ok = unsafe {
                try_gemv(
                    isa,
                    m,
                    n,
                    k,
                    alpha,
                    Mat {
                        ptr: av.as_ptr(),
                        rs: ars,
                        cs: acs,
                    },
                    Mat {
                        ptr: bv.as_ptr(),
                        rs: brs,
                        cs: bcs,
                    },
                    T::from_f64(beta),
                    MatMut {
                        ptr: cv.as_mut_ptr(),
                        rs: crs,
                        cs: ccs,
                    },
                    threads,
                )
            };
            assert!(ok, "{m}x{n}x{k} not taken");
            for i in 0..m {
                for j in 0..n {
                    let mut s = T::zero();
                    for l in 0..k {
                        s += av[(i as isize * ars + l as isize * acs) as usize]
                            * bv[(l as isize * brs + j as isize * bcs) as usize];
                    }
                    let c0 = if beta == 0.0 { 0.0 } else { beta * init };
                    let want = alpha * s + T::from_f64(c0);
                    let got = cv[(i as isize * crs + j as isize * ccs) as usize];
                    let tol = 1e-4 * (1.0 + want.abs_f64());
                    assert!(
                        (got - want).abs_f64() <= tol,
                        "{:?} {isa:?} {m}x{n}x{k} col {col_major} step {step} threads {threads}: {got} vs {want}",
                        T::DTYPE
                    );
                }
            }
        }
    }

    fn all<T: Element>() {
        let sizes: &[(usize, usize, usize)] = if cfg!(miri) {
            &[(5, 1, 9), (1, 6, 7), (40, 1, 30)]
        } else {
            &[
                (37, 1, 53),
                (1, 41, 29),
                // the plain loops of small products: rows of 38 (two chunks of 16 and a
                // remainder), of 3, and of 18
                (10, 1, 38),
                (1, 12, 38),
                (6, 1, 3),
                (1, 7, 18),
                (1, 1, 70),
                (3, 1, 9000),
                (1, 2, 9000),
                (300, 1, 5),
                (4, 1, 40000),
                (1, 3, 40000),
                (20000, 1, 7),
                // the four-row kernels: every step (16, 8, 4 elements) and tail, a row
                // count that leaves rows after the last four, rows of one element
                (9, 1, 24),
                (1, 9, 28),
                (70, 1, 1),
            ]
        };
        let isas = [Isa::Scalar, Isa::Avx2, Isa::Avx512];
        // Under Miri (slow, most of all with threads): one thread count that still splits.
        let thread_counts: &[usize] = if cfg!(miri) { &[2] } else { &[1, 3] };
        for isa in isas.into_iter().filter(|i| i.is_available()) {
            for &(m, n, k) in sizes {
                for col_major in [false, true] {
                    for step in [1, 2] {
                        for &threads in thread_counts {
                            // Inside a pool of that size small products split as planned;
                            // from outside one they run on the caller (`wakes_threads`).
                            let pool = rayon::ThreadPoolBuilder::new()
                                .num_threads(threads)
                                .build()
                                .expect("a thread pool");
                            pool.install(|| case::<T>(isa, m, n, k, col_major, step, threads));
                            if !cfg!(miri) {
                                case::<T>(isa, m, n, k, col_major, step, threads);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn matches_the_triple_loop_in_all_types() {
        all::<f32>();
        all::<f64>();
        all::<Complex32>();
        all::<Complex64>();
    }

    #[test]
    fn general_shapes_and_strides_are_declined() {
        let v = [1.0f64; 16];
        let mut c = [0.0f64; 16];
        let mat = |rs, cs| Mat {
            ptr: v.as_ptr(),
            rs,
            cs,
        };
        let out = MatMut {
            ptr: c.as_mut_ptr(),
            rs: 2,
            cs: 1,
        };
        // 2x2 output: a GEMM, not a GEMV.
        assert!(!unsafe { try_gemv(Isa::Scalar, 2, 2, 2, 1.0, mat(2, 1), mat(2, 1), 0.0, out, 1) });
        assert_eq!(c, [0.0; 16]);
        // n == 1 but the matrix, too large for plain loops, has no unit stride.
        let big = vec![1.0f64; 64 * 128];
        let mut y = vec![0.0f64; 64];
        let m = Mat {
            ptr: big.as_ptr(),
            rs: 128,
            cs: 2,
        };
        let y_out = MatMut {
            ptr: y.as_mut_ptr(),
            rs: 1,
            cs: 1,
        };
        let x = Mat {
            ptr: big.as_ptr(),
            rs: 1,
            cs: 1,
        };
        assert!(!unsafe { try_gemv(Isa::Scalar, 64, 1, 64, 1.0, m, x, 0.0, y_out, 1) });
        assert_eq!(y, vec![0.0; 64]);
        // the same product small enough for plain loops is taken, strides and all
        assert!(unsafe { try_gemv(Isa::Scalar, 8, 1, 8, 1.0, m, x, 0.0, y_out, 1) });
        assert_eq!(&y[..8], &[8.0; 8]);
    }
}

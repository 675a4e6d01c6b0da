//! Skinny products: real GEMM calls whose smaller output side `p = min(m, n)` is small and
//! whose other operand (the long matrix `M`, `r × k`) has a unit stride, as
//! [`crate::model::SkinnyForm`] decides. The GEMM libraries pack `M` into panels first, a full extra pass over the largest operand for
//! a product that does only `p` multiply-adds per element of it; here `M` is read in place,
//! once, and the small operand `X` (`k × p`) is broadcast from where it lies:
//!
//! - columns of `M` contiguous (`axpy` form): a register tile of 4 vectors of rows times up to
//!   [`P_STEP`] columns of the result takes one column segment of `M` per step;
//! - rows of `M` contiguous (`dot` form, `X` contiguous along `k` too): [`DOT_ROWS`] rows of
//!   `M` times up to [`P_STEP`] columns of `X`, vectors along `k`, summed across lanes once
//!   per depth block.
//!
//! In the axpy form, groups of rows whose accumulators fit [`ACC_BYTES`] take the depth
//! [`AXPY_KC`] columns at a time, so that `M` streams down that many contiguous columns
//! (prefetched [`PREFETCH_BLOCKS`] blocks of rows ahead) while the accumulators stay in L2;
//! they go to C directly where its rows are contiguous and `alpha` is 1, else to a buffer.
//! The dot form takes the depth [`DOT_KC`] at a time into a buffer. Threads split the rows.
//! `alpha` and `beta` are applied once per element of the result.

use rayon::prelude::*;

use super::{Mat, MatMut};
use crate::model::SkinnyForm;
use crate::tensor::{DType, Element};
use crate::threads::{on_threads, wakes_threads};
use crate::transpose::Isa;

/// Columns of the result one pass accumulates in registers: 4 vectors × 6 columns are 24
/// accumulators of AVX-512's 32 registers (2 × 6 of AVX2's 16).
const P_STEP: usize = 6;
/// Rows of `M` one `dot`-form pass reads (4 × [`P_STEP`] accumulators).
const DOT_ROWS: usize = 4;
/// Depth of one `dot`-form block: up to 24 columns of X, 1024 deep, are 192 KiB of f64, in L2.
const DOT_KC: usize = 1024;
/// Columns of M one `axpy`-form block of rows takes at a time (that many streams down
/// contiguous columns; 16 and 32 ran alike, 8 and 64 slower).
const AXPY_KC: usize = 32;
/// Blocks of rows ahead that the `axpy` form prefetches M and, on the first depth block,
/// the result (without it, M's loads wait on memory: a 24-column product ran at 0.45 of the
/// speed).
const PREFETCH_BLOCKS: usize = 2;
/// Bytes of accumulators of one group of rows in the `axpy` form (they stay in L2).
const ACC_BYTES: usize = 256 << 10;
/// Elements of the accumulation buffer kept on the stack (32 KiB of f64); larger results
/// allocate it.
const STACK_ELEMENTS: usize = 4096;
/// Smallest `M` (bytes) split over threads when the caller is outside their pool (as for the
/// matrix-vector products, `gemv.rs`).
const PARALLEL_MIN_BYTES: usize = 256 << 10;

/// The canonical problem's operands: `Y[r × p] = alpha * M[r × k] · X[k × p] + beta * Y`
/// (the result is written by [`try_skinny`]).
#[derive(Clone, Copy)]
struct Skinny<T> {
    p: usize,
    k: usize,
    /// `M[i, l]` at `m + i*rs + l*cs`.
    m: Mat<T>,
    /// `X[l, j]` at `x + l*rs + j*cs`.
    x: Mat<T>,
    /// Columns of `M` contiguous (`rs == 1`); otherwise its rows and `X`'s columns are.
    axpy: bool,
}

// SAFETY: tasks read `m` and `x`, which nothing writes during the call, and write disjoint
// rows of the result (see `try_skinny`).
unsafe impl<T: Send> Send for Skinny<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Skinny<T> {}

/// Rows of one `axpy`-form block for `T` on `isa` (4 vectors with AVX-512, 2 with AVX2).
fn axpy_rows<T: Element>(isa: Isa) -> usize {
    let bytes = match isa {
        Isa::Avx512 => 64,
        _ => 32,
    };
    let vectors = if isa == Isa::Avx512 { 4 } else { 2 };
    vectors * bytes / std::mem::size_of::<T>()
}

/// Rows of one `dot`-form block on `isa`.
fn dot_rows(isa: Isa) -> usize {
    if isa == Isa::Avx512 {
        DOT_ROWS
    } else {
        2
    }
}

/// The ISA the kernels run with for `T`, if any (real types on AVX-512 or AVX2 + FMA).
fn kernel_isa<T: Element>(isa: Isa) -> Option<Isa> {
    if !matches!(T::DTYPE, DType::F32 | DType::F64) {
        return None;
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if Isa::Avx512.is_available() => Some(Isa::Avx512),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx2 if Isa::Avx2.is_available() && crate::cpu::features().fma => {
            Some(Isa::Avx2)
        }
        _ => None,
    }
}

/// Runs `C = alpha * A·B + beta * C` as a skinny product when it is one (see the module
/// documentation), with kernels for `isa` or the best level below it; returns false, having
/// done nothing, otherwise.
///
/// # Safety
/// As for [`super::gemm`], with `m, n, k > 0`.
#[allow(clippy::too_many_arguments)] // the BLAS signature plus ISA and thread count
pub(crate) unsafe fn try_skinny<T: Element>(
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
    let Some(isa) = kernel_isa::<T>(isa) else {
        return false;
    };
    let Some(form) = SkinnyForm::of(T::DTYPE, (m, n, k), [a.rs, a.cs], [b.rs, b.cs]) else {
        return false;
    };
    let (p, r, transposed) = (form.p, form.r, form.transposed);
    let (ms, xs) = if transposed {
        ([b.cs, b.rs], [a.cs, a.rs])
    } else {
        ([a.rs, a.cs], [b.rs, b.cs])
    };
    let (mp, xp) = if transposed {
        (b.ptr, a.ptr)
    } else {
        (a.ptr, b.ptr)
    };
    let y = if transposed {
        MatMut {
            ptr: c.ptr,
            rs: c.cs,
            cs: c.rs,
        }
    } else {
        c
    };
    let s = Skinny {
        p,
        k,
        m: Mat {
            ptr: mp,
            rs: ms[0],
            cs: ms[1],
        },
        x: Mat {
            ptr: xp,
            rs: xs[0],
            cs: xs[1],
        },
        axpy: form.axpy,
    };
    let bytes = r * k * std::mem::size_of::<T>();
    let threads = if bytes < PARALLEL_MIN_BYTES && wakes_threads(threads.max(1)) {
        1
    } else {
        threads.max(1)
    };
    let block = if s.axpy {
        axpy_rows::<T>(isa)
    } else {
        dot_rows(isa)
    };
    let blocks = r.div_ceil(block);
    let tasks = threads.min(blocks);
    let go = |out: Out<T>| {
        let task = |t: usize| {
            let (b0, b1) = (blocks * t / tasks, blocks * (t + 1) / tasks);
            let rows = (b0 * block, (b1 * block).min(r));
            // SAFETY: each task writes rows `rows` of `out` alone (distinct elements of C
            // or of the buffer); the ISA is this CPU's.
            unsafe { s.run(isa, rows, block, out) }
        };
        if tasks <= 1 {
            task(0);
        } else {
            on_threads(threads, || (0..tasks).into_par_iter().for_each(task));
        }
    };
    if s.axpy && y.rs == 1 && alpha == T::one() {
        // Y's rows are contiguous: the accumulators go there directly.
        go(Out {
            ptr: y.ptr,
            ts: y.cs,
            beta,
        });
        return true;
    }
    let mut stack = [std::mem::MaybeUninit::<T>::uninit(); STACK_ELEMENTS];
    let mut heap: Vec<T>;
    let part: &mut [T] = if r * p <= STACK_ELEMENTS {
        for e in &mut stack[..r * p] {
            e.write(T::zero());
        }
        // SAFETY: the first r*p elements were initialised just above.
        std::slice::from_raw_parts_mut(stack.as_mut_ptr().cast::<T>(), r * p)
    } else {
        heap = vec![T::zero(); r * p];
        &mut heap
    };
    go(Out {
        ptr: part.as_mut_ptr(),
        ts: r as isize,
        beta: T::zero(),
    });
    for j in 0..p {
        for i in 0..r {
            let v = alpha * part[j * r + i];
            let q = y.ptr.offset(i as isize * y.rs + j as isize * y.cs);
            *q = if beta.is_exact_zero() {
                v
            } else {
                v + beta * *q
            };
        }
    }
    true
}

/// Where the accumulators go: `out[j*ts + i]` for row `i`, column `j` (rows contiguous),
/// as `M·X + beta * out`. The dot form adds to a zeroed buffer (`beta` 0).
#[derive(Clone, Copy)]
struct Out<T> {
    ptr: *mut T,
    ts: isize,
    beta: T,
}
// SAFETY: tasks write disjoint rows of `ptr` (see `try_skinny`).
unsafe impl<T: Send> Send for Out<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Out<T> {}

impl<T: Element> Skinny<T> {
    /// Columns of the register pass that starts at result column `j`: the columns are
    /// shared out evenly over the fewest passes of at most [`P_STEP`] (8 columns as 4 + 4,
    /// not 6 + 2, whose second pass does few multiply-adds per load).
    fn pass_columns(&self, j: usize) -> usize {
        let passes = self.p.div_ceil(P_STEP);
        let (base, extra) = (self.p / passes, self.p % passes);
        // passes 0..extra take base + 1 columns, the rest base
        if j < extra * (base + 1) {
            base + 1
        } else {
            base
        }
    }

    /// Computes rows `i0..i1` of the result into `out`, depth block by depth block, each
    /// block of rows `block` long.
    ///
    /// # Safety
    /// The problem's pointers address valid elements; `out` addresses `r×p` elements of
    /// which this call alone touches rows `i0..i1`; the CPU supports `isa` (a kernel ISA for
    /// `T`).
    unsafe fn run(&self, isa: Isa, (i0, i1): (usize, usize), block: usize, out: Out<T>) {
        let size = std::mem::size_of::<T>();
        if self.axpy {
            // Groups of rows whose accumulators stay in L2; each takes the depth a few
            // columns at a time, so that M streams down that many contiguous columns.
            let group = (ACC_BYTES / (self.p * size)).max(block) / block * block;
            let mut g0 = i0;
            while g0 < i1 {
                let g1 = (g0 + group).min(i1);
                let mut l0 = 0;
                while l0 < self.k {
                    let kc = AXPY_KC.min(self.k - l0);
                    let mut i = g0;
                    while i < g1 {
                        let len = block.min(g1 - i);
                        let mp = self
                            .m
                            .ptr
                            .offset(i as isize * self.m.rs + l0 as isize * self.m.cs);
                        let mut j = 0;
                        while j < self.p {
                            let np = self.pass_columns(j);
                            let x = self
                                .x
                                .ptr
                                .offset(l0 as isize * self.x.rs + j as isize * self.x.cs);
                            let acc = out.ptr.offset(j as isize * out.ts).add(i);
                            // the first pass over these columns fetches the next blocks'
                            let ahead = (PREFETCH_BLOCKS * block, j == 0);
                            axpy_pass(
                                isa,
                                np,
                                (len, kc),
                                (mp, self.m.cs),
                                x,
                                self.x,
                                (out.beta, l0 == 0),
                                (acc, out.ts),
                                ahead,
                            );
                            j += np;
                        }
                        i += len;
                    }
                    l0 += kc;
                }
                g0 = g1;
            }
            return;
        }
        let mut l0 = 0;
        while l0 < self.k {
            let kc = DOT_KC.min(self.k - l0);
            let mut i = i0;
            while i < i1 {
                let len = block.min(i1 - i);
                let rows: [*const T; DOT_ROWS] = std::array::from_fn(|q| {
                    // rows past the block repeat its first; their sums are dropped
                    let row = if q < len { i + q } else { i };
                    self.m
                        .ptr
                        .offset(row as isize * self.m.rs + l0 as isize * self.m.cs)
                });
                let mut j = 0;
                while j < self.p {
                    let np = self.pass_columns(j);
                    let x = self
                        .x
                        .ptr
                        .offset(l0 as isize * self.x.rs + j as isize * self.x.cs);
                    let acc = out.ptr.offset(j as isize * out.ts).add(i);
                    dot_pass(isa, np, len, kc, rows, x, self.x.cs, acc, out.ts);
                    j += np;
                }
                i += len;
            }
            l0 += kc;
        }
    }
}

/// One `axpy`-form pass: `acc[j*ts + i] = init + sum over l < kc of M[i, l] * X[l, j]`
/// for `i < len`, `j < np`, where `M[i, l]` is at `m + i + l*mcs`: on the first depth block
/// (`first`) `init` is `beta * acc` (nothing read when `beta` is zero), after it `acc`.
///
/// # Safety
/// The elements read and written are valid; `len` is at most the ISA's block of rows; the
/// CPU supports `isa`, a kernel ISA for `T`.
#[allow(clippy::too_many_arguments)] // one pass's geometry
unsafe fn axpy_pass<T: Element>(
    isa: Isa,
    np: usize,
    (len, kc): (usize, usize),
    (m, mcs): (*const T, isize),
    x: *const T,
    xs: Mat<T>,
    (beta, first): (T, bool),
    (acc, ts): (*mut T, isize),
    (ahead, fetch_m): (usize, bool),
) {
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! go {
            ($module:ident, $f:ident, $t:ty) => {{
                let (m, x, acc) = (m.cast::<$t>(), x.cast::<$t>(), acc.cast::<$t>());
                // SAFETY: `T::DTYPE` identifies `T` as `$t` (the trait is sealed).
                let beta = std::mem::transmute_copy::<T, $t>(&beta);
                let g = Geometry {
                    len,
                    kc,
                    m,
                    mcs,
                    x,
                    xrs: xs.rs,
                    xcs: xs.cs,
                    beta,
                    first,
                    acc,
                    ts,
                    ahead,
                    fetch_m,
                };
                match np {
                    1 => $module::$f::<1>(&g),
                    2 => $module::$f::<2>(&g),
                    3 => $module::$f::<3>(&g),
                    4 => $module::$f::<4>(&g),
                    5 => $module::$f::<5>(&g),
                    _ => $module::$f::<6>(&g),
                }
            }};
        }
        match (isa, T::DTYPE) {
            (Isa::Avx512, DType::F64) => go!(avx512, axpy_f64, f64),
            (Isa::Avx512, _) => go!(avx512, axpy_f32, f32),
            (_, DType::F64) => go!(avx2, axpy_f64, f64),
            _ => go!(avx2, axpy_f32, f32),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (
            isa, np, len, kc, m, mcs, x, xs, beta, first, acc, ts, ahead, fetch_m,
        );
        unreachable!("no skinny kernels on this architecture");
    }
}

/// One `dot`-form pass: `acc[j*ts + q] += sum over l < kc of rows[q][l] * X[l, j]` for
/// `q < len`, `j < np`, where `X[l, j]` is at `x + l + j*xcs`.
///
/// # Safety
/// As for [`axpy_pass`], with `len <= DOT_ROWS` and every `rows[q]` valid for `kc` elements.
#[allow(clippy::too_many_arguments)] // one pass's geometry
unsafe fn dot_pass<T: Element>(
    isa: Isa,
    np: usize,
    len: usize,
    kc: usize,
    rows: [*const T; DOT_ROWS],
    x: *const T,
    xcs: isize,
    acc: *mut T,
    ts: isize,
) {
    let mut sums = [[T::zero(); P_STEP]; DOT_ROWS];
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! go {
            ($module:ident, $f:ident, $t:ty) => {{
                let rows = rows.map(|p| p.cast::<$t>());
                let (x, out) = (x.cast::<$t>(), sums.as_mut_ptr().cast::<[$t; P_STEP]>());
                match np {
                    1 => $module::$f::<1>(kc, rows, x, xcs, out),
                    2 => $module::$f::<2>(kc, rows, x, xcs, out),
                    3 => $module::$f::<3>(kc, rows, x, xcs, out),
                    4 => $module::$f::<4>(kc, rows, x, xcs, out),
                    5 => $module::$f::<5>(kc, rows, x, xcs, out),
                    _ => $module::$f::<6>(kc, rows, x, xcs, out),
                }
            }};
        }
        match (isa, T::DTYPE) {
            (Isa::Avx512, DType::F64) => go!(avx512, dot_f64, f64),
            (Isa::Avx512, _) => go!(avx512, dot_f32, f32),
            (_, DType::F64) => go!(avx2, dot_f64, f64),
            _ => go!(avx2, dot_f32, f32),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, kc, rows, x, xcs);
        unreachable!("no skinny kernels on this architecture");
    }
    for (q, row) in sums.iter().enumerate().take(len) {
        for (j, &v) in row.iter().enumerate().take(np) {
            *acc.offset(j as isize * ts).add(q) += v;
        }
    }
}

/// One `axpy` pass's operands (see [`axpy_pass`]), handed to the kernels.
struct Geometry<T> {
    pub len: usize,
    pub kc: usize,
    pub m: *const T,
    pub mcs: isize,
    pub x: *const T,
    pub xrs: isize,
    pub xcs: isize,
    pub beta: T,
    pub first: bool,
    pub acc: *mut T,
    pub ts: isize,
    pub ahead: usize,
    pub fetch_m: bool,
}

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(test)]
mod tests {
    use super::*;

    /// One product through [`try_skinny`] against a triple loop: A is `m×k` and B `k×n`
    /// with the given `(row, column)` strides (offset so that negative strides stay inside
    /// the buffer), C `m×n` with strides `cs`, alpha 1 or not, beta 0 or not. Asserts that it is taken
    /// exactly when `taken`, and that a declined call leaves C as it was.
    #[allow(clippy::too_many_arguments)] // one case's parameters
    fn case<T: Element>(
        isa: Isa,
        (m, n, k): (usize, usize, usize),
        sa: [isize; 2],
        sb: [isize; 2],
        sc: [isize; 2],
        threads: usize,
        taken: bool,
    ) {
        let f = |i: usize| T::from_f64(((i * 7919) % 13) as f64 - 6.0);
        // the buffer of a rows×cols operand and the offset of its element (0, 0)
        let extent = |rows: usize, cols: usize, s: [isize; 2]| {
            let lo = (rows as isize - 1) * s[0].min(0) + (cols as isize - 1) * s[1].min(0);
            let hi = (rows as isize - 1) * s[0].max(0) + (cols as isize - 1) * s[1].max(0);
            ((hi - lo + 1) as usize, -lo)
        };
        let (la, oa) = extent(m, k, sa);
        let (lb, ob) = extent(k, n, sb);
        let (lc, oc) = extent(m, n, sc);
        let av: Vec<T> = (0..la).map(f).collect();
        let bv: Vec<T> = (0..lb).map(|i| f(i + 5)).collect();
        let at = |i: usize, l: usize| av[(oa + i as isize * sa[0] + l as isize * sa[1]) as usize];
        let bt = |l: usize, j: usize| bv[(ob + l as isize * sb[0] + j as isize * sb[1]) as usize];
        let ci = |i: usize, j: usize| (oc + i as isize * sc[0] + j as isize * sc[1]) as usize;
        // alpha 1 lets the accumulators go to C directly where its rows are contiguous
        for (alpha, beta) in [(1.0, 0.0), (1.0, 0.5), (0.75, 0.0), (0.75, 0.5)] {
            let init = if beta == 0.0 { f64::NAN } else { 1.5 };
            let mut cv = vec![T::from_f64(init); lc];
            let alpha = T::from_f64(alpha);
            // SAFETY: the pointers and strides address the buffers built above.
            let ran = unsafe {
                try_skinny(
                    isa,
                    m,
                    n,
                    k,
                    alpha,
                    Mat {
                        ptr: av.as_ptr().offset(oa),
                        rs: sa[0],
                        cs: sa[1],
                    },
                    Mat {
                        ptr: bv.as_ptr().offset(ob),
                        rs: sb[0],
                        cs: sb[1],
                    },
                    T::from_f64(beta),
                    MatMut {
                        ptr: cv.as_mut_ptr().offset(oc),
                        rs: sc[0],
                        cs: sc[1],
                    },
                    threads,
                )
            };
            assert_eq!(ran, taken, "{m}x{n}x{k} A {sa:?} B {sb:?}: taken {ran}");
            if !ran {
                assert!(cv.iter().all(|x| x.re().to_bits() == init.to_bits()));
                continue;
            }
            for i in 0..m {
                for j in 0..n {
                    let mut s = T::zero();
                    for l in 0..k {
                        s += at(i, l) * bt(l, j);
                    }
                    let want = alpha * s + T::from_f64(if beta == 0.0 { 0.0 } else { beta * init });
                    let got = cv[ci(i, j)];
                    let tol = 1e-5 * (1.0 + k as f64) * (1.0 + want.abs_f64());
                    assert!(
                        (got - want).abs_f64() <= tol,
                        "{:?} {isa:?} {m}x{n}x{k} A {sa:?} B {sb:?} C {sc:?} threads {threads} \
                         at ({i}, {j}): {got:?} vs {want:?}",
                        T::DTYPE
                    );
                }
            }
        }
    }

    /// Both forms (the long operand's columns or rows contiguous), both orientations (small
    /// m or small n), partial blocks of rows, depths across the block sizes, result column
    /// counts across the register passes, strided and negative-stride operands, threads.
    fn all<T: Element>(isa: Isa) {
        let sizes: &[(usize, usize, usize)] = &[
            (5, 265, 53),
            (2, 9, 1),
            (6, 33, 70),
            (7, 100, 300),
            (24, 70, 1100),
            (9, 50, 256),
            (10, 650, 256),
            (8, 40, 130),
            (13, 1, 5),
            (3, 3, 3),
            (12, 40, 128),
            (13, 40, 128),
            (17, 200, 9),
        ];
        for &(p, r, k) in sizes {
            if r < 2 {
                continue;
            }
            for t in [1, 3] {
                // a long side of 4 times the small one; small sides above 8 need a depth of
                // 256 and a long side of 64 times; the dot form a small side of up to 12
                // and a depth of 128 or more
                let any = r >= 4 * p && (p <= 8 || (k >= 256 && r >= 64 * p));
                let dot = any && p <= 12 && k >= 128;
                // small m: M = Bᵀ (B's columns contiguous: axpy form; rows: dot form)
                let (m, n) = (p.min(r), p.max(r));
                let (mi, ni, ki) = (m as isize, n as isize, k as isize);
                let mnk = (m, n, k);
                // axpy: B row-major with a padded row, A strided both ways; C's rows (the
                // long side) contiguous (accumulated in C) or not (in a buffer)
                let sb = [ni + 3, 1];
                case::<T>(isa, mnk, [1, mi + 1], sb, [ni, 1], t, any);
                case::<T>(isa, mnk, [2 * ki, 2], sb, [1, mi], t, any);
                // axpy with a negative column stride of M and negative-stride Cs
                let neg = [-ni, 1];
                case::<T>(isa, mnk, [ki, 1], neg, [-1, -mi], t, any);
                case::<T>(isa, mnk, [1, mi], neg, [-ni, 1], t, any);
                // dot: B column-major, A row-major (X = Aᵀ contiguous along k)
                case::<T>(isa, mnk, [ki, 1], [1, ki + 2], [ni, 1], t, dot);
                // small n: M = A
                let (m, n) = (p.max(r), p.min(r));
                let (mi, ni) = (m as isize, n as isize);
                let mnk = (m, n, k);
                case::<T>(isa, mnk, [1, mi], [ni, 1], [ni, 1], t, any);
                case::<T>(isa, mnk, [1, mi], [ni, 1], [1, mi], t, any);
                // (with k = 1, A's row stride is 1 too: the axpy form)
                case::<T>(
                    isa,
                    mnk,
                    [ki, 1],
                    [1, ki],
                    [1, mi],
                    t,
                    dot || (any && k == 1),
                );
            }
        }
    }

    #[test]
    fn skinny_products_match_the_triple_loop() {
        for isa in [Isa::Avx2, Isa::Avx512] {
            if kernel_isa::<f64>(isa) != Some(isa) {
                eprintln!("skinny kernels for {isa:?}: not on this CPU, not tested");
                continue;
            }
            all::<f64>(isa);
            all::<f32>(isa);
        }
    }

    #[test]
    fn other_products_are_declined_untouched() {
        let v = vec![1.0f64; 4096];
        let mut c = vec![7.0f64; 4096];
        let mat = |rs, cs| Mat {
            ptr: v.as_ptr(),
            rs,
            cs,
        };
        let out = MatMut {
            ptr: c.as_mut_ptr(),
            rs: 40,
            cs: 1,
        };
        let isa = Isa::detect();
        // SAFETY: every case addresses at most 40×40 elements of the 4096-element buffers.
        unsafe {
            // both sides above SKINNY_MAX_SIDE
            assert!(!try_skinny(
                isa,
                25,
                40,
                8,
                1.0,
                mat(8, 1),
                mat(40, 1),
                0.0,
                out,
                1
            ));
            // the long operand (B, 40 columns) has no unit stride
            assert!(!try_skinny(
                isa,
                4,
                40,
                8,
                1.0,
                mat(8, 1),
                mat(80, 2),
                0.0,
                out,
                1
            ));
            // dot form whose small operand is not contiguous along k
            assert!(!try_skinny(
                isa,
                4,
                40,
                8,
                1.0,
                mat(1, 4),
                mat(1, 8),
                0.0,
                out,
                1
            ));
            // a single row is a matrix-vector product, not this
            assert!(!try_skinny(
                isa,
                1,
                40,
                8,
                1.0,
                mat(8, 1),
                mat(40, 1),
                0.0,
                out,
                1
            ));
        }
        let z = vec![num_complex::Complex64::new(1.0, 0.0); 64];
        let mut zc = vec![num_complex::Complex64::new(7.0, 0.0); 64];
        let zm = |rs, cs| Mat {
            ptr: z.as_ptr(),
            rs,
            cs,
        };
        let zout = MatMut {
            ptr: zc.as_mut_ptr(),
            rs: 8,
            cs: 1,
        };
        let one = num_complex::Complex64::new(1.0, 0.0);
        // SAFETY: 8×8 elements of 64-element buffers.
        assert!(!unsafe { try_skinny(isa, 2, 8, 8, one, zm(8, 1), zm(8, 1), one, zout, 1) });
        assert!(c.iter().all(|&x| x == 7.0));
        assert!(zc
            .iter()
            .all(|&x| x == num_complex::Complex64::new(7.0, 0.0)));
    }
}

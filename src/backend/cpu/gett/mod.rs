//! GETT: a blocked GEMM whose packing reads the operands straight from their tensor layouts
//! (any number of M, N and K indices, each with its own strides), so that a contraction
//! needs no transposed copies and no temporary C: `C = alpha * A·B + beta * C` over the
//! multi-indices M (in A and C), N (in B and C), K (in A and B) and batch (in all three).
//!
//! The loop nest is the one of BLIS: blocks of `nc` columns, `kc` depth and `mc` rows; the
//! B block and the A block are packed into micro-panels (from the offsets of their index
//! ranges, [`pack::offsets`]), and register-blocked kernels compute `mr×nr` tiles that go
//! straight into C when their columns are contiguous there. Index orders and the operand
//! roles are chosen from the strides:
//! * roles: C's smallest-stride index should be a column (N) index, so that tile rows are
//!   contiguous runs of C; when it is in M, A and B swap (`Cᵀ = Bᵀ·Aᵀ`);
//! * N order: C's smallest-stride index innermost, then B's, then the rest by C's strides;
//! * M order: A's smallest-stride index innermost, then the rest by C's strides;
//! * K order: by the strides of the larger operand;
//!
//! so that a block covers whole cache lines of every tensor it touches and each element of
//! A, B and C moves through memory about once per block pass.
//!
//! Threads split the batch, else the larger of M and N, into one range each.

pub(crate) mod kernel;
pub(crate) mod pack;

use std::cell::RefCell;

pub(crate) use self::kernel::KernelChoice;
use self::kernel::{select, Direct, Kernel};
pub(crate) use self::pack::Dim;
use self::pack::{offsets, pack_panels, Gather, PackBuffers};
use crate::model::{gett_oriented, GettIndex};
use crate::tensor::Element;

/// A GETT problem: index groups with their strides (elements) in the tensors holding them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Problem {
    /// Row indices: strides in A and C.
    pub m: Vec<Dim>,
    /// Column indices: strides in B and C.
    pub n: Vec<Dim>,
    /// Contracted indices: strides in A and B.
    pub k: Vec<Dim>,
    /// Batch indices: extent and strides in A, B, C.
    pub batch: Vec<(usize, [isize; 3])>,
}

fn size(d: &[Dim]) -> usize {
    d.iter().map(|x| x.ext).product()
}

impl Problem {
    /// The problem with its roles and index orders chosen by [`gett_oriented`] (A and B swap
    /// when the flag is set).
    pub(crate) fn oriented(&self) -> (Problem, bool) {
        let idx = |d: &[Dim]| -> Vec<GettIndex> { d.iter().map(|x| (x.ext, x.s)).collect() };
        let dims = |d: Vec<GettIndex>| -> Vec<Dim> {
            d.into_iter().map(|(ext, s)| Dim { ext, s }).collect()
        };
        let (swap, m, n, k) = gett_oriented(&idx(&self.m), &idx(&self.n), &idx(&self.k));
        let batch = self
            .batch
            .iter()
            .filter(|b| b.0 != 1)
            .map(|&(e, s)| {
                if swap {
                    (e, [s[1], s[0], s[2]])
                } else {
                    (e, s)
                }
            })
            .collect();
        (
            Problem {
                m: dims(m),
                n: dims(n),
                k: dims(k),
                batch,
            },
            swap,
        )
    }
}

/// Raw pointers that the tasks share (each task writes a disjoint part of C).
#[derive(Clone, Copy)]
struct Ptrs<T> {
    a: *const T,
    b: *const T,
    c: *mut T,
}
// SAFETY: the tasks only read A and B and write disjoint elements of C (disjoint batch
// indices, or disjoint M or N ranges of one batch index).
unsafe impl<T> Send for Ptrs<T> {}
unsafe impl<T> Sync for Ptrs<T> {}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

thread_local! {
    static PACK: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with a 64-byte aligned scratch slice of at least `len` values of `T` (a
/// per-thread buffer that is reused across calls).
fn with_scratch<T: Element, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    let lines = (len * std::mem::size_of::<T>()).div_ceil(64).max(1);
    let run = |buf: &mut Vec<Line>| {
        if buf.len() < lines {
            *buf = vec![Line([0; 64]); lines];
        }
        // SAFETY: the buffer holds `lines * 64 >= len * size_of::<T>()` initialised bytes,
        // aligned to 64 (>= align_of::<T>()); every bit pattern is a valid float or complex.
        let s = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<T>(), len) };
        f(s)
    };
    PACK.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => run(&mut buf),
        Err(_) => run(&mut Vec::new()),
    })
}

/// `C = alpha * A·B + beta * C` for the GETT problem `p` on `threads` threads (rayon's
/// current pool), with the kernel `choice`. With `beta == 0`, C is not read.
///
/// # Safety
/// For every value of the indices, `a`, `b`, `c` plus the sum of index × stride address
/// valid elements; the elements of C so addressed are distinct (no two index values share
/// one), overlap neither A nor B, and nothing else accesses C during the call.
#[allow(clippy::too_many_arguments)] // the BLAS arguments plus threads and kernel choice
pub(crate) unsafe fn gett<T: Element>(
    p: &Problem,
    a: *const T,
    b: *const T,
    c: *mut T,
    alpha: T,
    beta: T,
    threads: usize,
    choice: KernelChoice,
) {
    let batches: usize = p.batch.iter().map(|b| b.0).product();
    let (q, swap) = p.oriented();
    let (m, n, k) = (size(&q.m), size(&q.n), size(&q.k));
    if batches == 0 || m == 0 || n == 0 {
        return;
    }
    let ptrs = if swap {
        Ptrs { a: b, b: a, c }
    } else {
        Ptrs { a, b, c }
    };
    let kern = select::<T>(choice);
    // offsets in A, B, C of batch index `i` (the last batch index varies fastest)
    let batch_at = |i: usize| -> [isize; 3] {
        let mut off = [0isize; 3];
        let mut rest = i;
        for &(e, s) in q.batch.iter().rev() {
            let x = (rest % e) as isize;
            rest /= e;
            for (o, st) in off.iter_mut().zip(s) {
                *o += x * st;
            }
        }
        off
    };
    let threads = threads.max(1);
    // One task per batch index, or the larger of M and N split into `threads` ranges.
    let split_m = m >= n;
    let (extent, unit) = if split_m { (m, kern.mr) } else { (n, kern.nr) };
    let parts = if batches >= threads || threads == 1 {
        1
    } else {
        threads.min(extent.div_ceil(unit)).max(1)
    };
    let chunk = extent.div_ceil(parts).div_ceil(unit) * unit;
    let tasks = batches * parts;
    let run = |t: usize| {
        let (bi, part) = (t / parts, t % parts);
        let off = batch_at(bi);
        let lo = (part * chunk).min(extent);
        let hi = ((part + 1) * chunk).min(extent);
        if lo >= hi {
            return;
        }
        let (mr, nr) = if split_m {
            (lo..hi, 0..n)
        } else {
            (0..m, lo..hi)
        };
        let p = ptrs;
        // SAFETY: the caller's guarantees hold for every index value; this task writes the
        // C elements of its own batch index and M or N range only.
        unsafe {
            block(
                &kern,
                &q,
                p.a.offset(off[0]),
                p.b.offset(off[1]),
                p.c.offset(off[2]),
                mr,
                nr,
                k,
                alpha,
                beta,
            )
        };
    };
    if tasks == 1 || threads == 1 {
        (0..tasks).for_each(run);
    } else {
        use rayon::prelude::*;
        (0..tasks).into_par_iter().for_each(run);
    }
}

/// The BLIS loop nest over rows `ms` and columns `ns` of one batch index.
///
/// # Safety
/// As for [`gett`], with `a`, `b`, `c` at this batch index.
#[allow(clippy::too_many_arguments)] // one block of the problem: pointers, ranges, scalars
unsafe fn block<T: Element>(
    kern: &Kernel<T>,
    q: &Problem,
    a: *const T,
    b: *const T,
    c: *mut T,
    ms: std::ops::Range<usize>,
    ns: std::ops::Range<usize>,
    k: usize,
    alpha: T,
    beta: T,
) {
    let (mr, nr) = (kern.mr, kern.nr);
    if k == 0 {
        // C = beta * C over the block (zero when beta is zero: C is not read).
        let (mut ma, mut mc, mut nb, mut nc) = (vec![], vec![], vec![], vec![]);
        offsets(&q.m, ms.start, ms.len(), &mut ma, &mut mc);
        offsets(&q.n, ns.start, ns.len(), &mut nb, &mut nc);
        for &ro in &mc {
            for &co in &nc {
                let x = c.offset(ro + co);
                *x = if beta.is_exact_zero() {
                    T::zero()
                } else {
                    beta * *x
                };
            }
        }
        return;
    }
    let nc_max = kern.nc.min(ns.len().div_ceil(nr) * nr);
    let mc_max = kern.mc.min(ms.len().div_ceil(mr) * mr);
    let kc = crate::model::gett_depth(k, kern.kc); // at most k
    let a_len = mc_max * kc;
    let b_len = nc_max * kc;
    with_scratch::<T, _>(a_len + b_len + mr * nr, |scratch| {
        let (ap, rest) = scratch.split_at_mut(a_len);
        let (bp, tile) = rest.split_at_mut(b_len);
        let (mut ma, mut mcv) = (Vec::new(), Vec::new());
        let (mut nb, mut ncv) = (Vec::new(), Vec::new());
        let (mut ka, mut kb) = (Vec::new(), Vec::new());
        let mut buffers = PackBuffers::default();
        let es = std::mem::size_of::<T>();
        let gather_a = Gather::new(&q.m, &q.k, (0, 0), mr, es);
        let gather_b = Gather::new(&q.n, &q.k, (0, 1), nr, es);
        let mut jc = ns.start;
        while jc < ns.end {
            let ncb = kern.nc.min(ns.end - jc);
            offsets(&q.n, jc, ncb, &mut nb, &mut ncv);
            let mut pc = 0;
            while pc < k {
                let kcb = kc.min(k - pc);
                offsets(&q.k, pc, kcb, &mut ka, &mut kb);
                pack_panels(b, &nb, &kb, nr, gather_b, bp, &mut buffers);
                let (read, beta_b) = if pc == 0 {
                    (!beta.is_exact_zero(), beta)
                } else {
                    (true, T::one())
                };
                let mut ic = ms.start;
                while ic < ms.end {
                    let mcb = kern.mc.min(ms.end - ic);
                    offsets(&q.m, ic, mcb, &mut ma, &mut mcv);
                    pack_panels(a, &ma, &ka, mr, gather_a, ap, &mut buffers);
                    for (jp, cols) in ncv.chunks(nr).enumerate() {
                        let bpanel = bp.as_ptr().add(jp * nr * kcb);
                        let contiguous = cols.len() == nr
                            && cols
                                .iter()
                                .enumerate()
                                .all(|(j, &x)| x == cols[0] + j as isize);
                        for (ip, rows) in mcv.chunks(mr).enumerate() {
                            let apanel = ap.as_ptr().add(ip * mr * kcb);
                            if contiguous && rows.len() == mr {
                                let d = Direct {
                                    c: c.offset(cols[0]),
                                    rows: rows.as_ptr(),
                                    alpha,
                                    beta: beta_b,
                                    read,
                                };
                                (kern.run)(kcb, apanel, bpanel, tile, Some(&d));
                            } else {
                                (kern.run)(kcb, apanel, bpanel, tile, None);
                                for (i, &ro) in rows.iter().enumerate() {
                                    for (j, &co) in cols.iter().enumerate() {
                                        let x = c.offset(ro + co);
                                        let v = alpha * tile[i * nr + j];
                                        *x = if read { v + beta_b * *x } else { v };
                                    }
                                }
                            }
                        }
                    }
                    ic += mcb;
                }
                pc += kcb;
            }
            jc += ncb;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex64;

    /// Deterministic pseudo-random numbers (64-bit LCG).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// A tensor over `axes` (positions into a global index list) with a random layout:
    /// permuted axis order, padded strides (a slice of a larger buffer), negative strides.
    struct Tensor<T> {
        data: Vec<T>,
        base: isize,
        strides: Vec<isize>,
    }

    fn random_tensor<T: Element>(ext: &[usize], rng: &mut Rng, fill: bool) -> Tensor<T> {
        let r = ext.len();
        let mut order: Vec<usize> = (0..r).collect();
        for i in (1..r).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut strides = vec![0isize; r];
        let mut s = 1 + rng.below(2) as isize; // unit or doubled innermost stride
        for &ax in order.iter().rev() {
            strides[ax] = s;
            s *= ext[ax].max(1) as isize + rng.below(2) as isize; // sometimes padded
        }
        let len = s.max(1) as usize;
        let mut base = 0isize;
        for ax in 0..r {
            if rng.below(4) == 0 && ext[ax] > 1 {
                base += (ext[ax] as isize - 1) * strides[ax];
                strides[ax] = -strides[ax];
            }
        }
        let data = (0..len)
            .map(|_| {
                if fill {
                    T::from_parts(rng.below(9) as f64 - 4.0, rng.below(5) as f64 - 2.0)
                } else {
                    T::from_f64(f64::NAN)
                }
            })
            .collect();
        Tensor {
            data,
            base,
            strides,
        }
    }

    fn check<T: Element>(seed: u64, choice: KernelChoice) {
        let mut rng = Rng(seed);
        // group sizes: M, N, K, batch indices (0..=2 each, K up to 3)
        let counts = [rng.below(3), rng.below(3), rng.below(4), rng.below(2)];
        let total: usize = counts.iter().sum();
        let mut ext: Vec<usize> = (0..total)
            .map(|_| match rng.below(40) {
                0 => 0,
                1..=4 => 1,
                5..=8 => 17 + rng.below(20), // longer than a tile
                _ => 1 + rng.below(7),
            })
            .collect();
        // keep the reference loop small: at most ~100k multiply-adds (600 under Miri)
        let cap = if cfg!(miri) { 600 } else { 100_000 };
        while ext.iter().product::<usize>() > cap {
            let big = (0..total).max_by_key(|&i| ext[i]).unwrap_or(0);
            ext[big] /= 2;
        }
        let kinds: Vec<usize> = (0..4).flat_map(|g| vec![g; counts[g]]).collect();
        // axes of A: M, K, batch; B: N, K, batch; C: M, N, batch
        let axes =
            |want: [bool; 4]| -> Vec<usize> { (0..total).filter(|&i| want[kinds[i]]).collect() };
        let (ax_a, ax_b, ax_c) = (
            axes([true, false, true, true]),
            axes([false, true, true, true]),
            axes([true, true, false, true]),
        );
        let dims = |ax: &[usize]| -> Vec<usize> { ax.iter().map(|&i| ext[i]).collect() };
        let ta = random_tensor::<T>(&dims(&ax_a), &mut rng, true);
        let tb = random_tensor::<T>(&dims(&ax_b), &mut rng, true);
        let mut tc = random_tensor::<T>(&dims(&ax_c), &mut rng, true);
        let beta = match rng.below(3) {
            0 => T::zero(),
            1 => T::one(),
            _ => T::from_parts(0.5, -1.0),
        };
        if beta.is_exact_zero() {
            tc.data.iter_mut().for_each(|x| *x = T::from_f64(f64::NAN));
        }
        let alpha = T::from_parts(1.5, 0.25);
        let stride = |t: &Tensor<T>, ax: &[usize], i: usize| -> isize {
            ax.iter().position(|&x| x == i).map_or(0, |p| t.strides[p])
        };
        let mut p = Problem::default();
        for i in 0..total {
            let (sa, sb, sc) = (
                stride(&ta, &ax_a, i),
                stride(&tb, &ax_b, i),
                stride(&tc, &ax_c, i),
            );
            match kinds[i] {
                0 => p.m.push(Dim {
                    ext: ext[i],
                    s: [sa, sc],
                }),
                1 => p.n.push(Dim {
                    ext: ext[i],
                    s: [sb, sc],
                }),
                2 => p.k.push(Dim {
                    ext: ext[i],
                    s: [sa, sb],
                }),
                _ => p.batch.push((ext[i], [sa, sb, sc])),
            }
        }
        // reference: loop over every index value
        let mut want = tc.data.clone();
        let free: Vec<usize> = (0..total).filter(|&i| kinds[i] != 2).collect();
        let contracted: Vec<usize> = (0..total).filter(|&i| kinds[i] == 2).collect();
        let count = |ax: &[usize]| ax.iter().map(|&i| ext[i]).product::<usize>();
        let mut idx = vec![0usize; total];
        for f in 0..count(&free) {
            let mut r = f;
            for &i in free.iter().rev() {
                idx[i] = r % ext[i];
                r /= ext[i];
            }
            let mut acc = T::zero();
            for q in 0..count(&contracted) {
                let mut r = q;
                for &i in contracted.iter().rev() {
                    idx[i] = r % ext[i];
                    r /= ext[i];
                }
                let off = |t: &Tensor<T>, ax: &[usize]| -> usize {
                    (t.base
                        + ax.iter()
                            .enumerate()
                            .map(|(j, &i)| idx[i] as isize * t.strides[j])
                            .sum::<isize>()) as usize
                };
                acc += ta.data[off(&ta, &ax_a)] * tb.data[off(&tb, &ax_b)];
            }
            let oc = (tc.base
                + ax_c
                    .iter()
                    .enumerate()
                    .map(|(j, &i)| idx[i] as isize * tc.strides[j])
                    .sum::<isize>()) as usize;
            want[oc] = if beta.is_exact_zero() {
                alpha * acc
            } else {
                alpha * acc + beta * tc.data[oc]
            };
        }
        let mut got = tc.data.clone();
        let threads = 1 + rng.below(3);
        unsafe {
            gett(
                &p,
                ta.data.as_ptr().offset(ta.base),
                tb.data.as_ptr().offset(tb.base),
                got.as_mut_ptr().offset(tc.base),
                alpha,
                beta,
                threads,
                choice,
            )
        };
        for (g, w) in got.iter().zip(&want) {
            let same = (g.re().is_nan() && w.re().is_nan())
                || (*g - *w).abs_f64() <= 1e-4 * (1.0 + w.abs_f64());
            assert!(
                same,
                "seed {seed} {choice:?} {:?}: {g} vs {w} ({p:?})",
                T::DTYPE
            );
        }
    }

    /// Random M/N/K/batch groups with random layouts, alpha and beta, every element type and
    /// both kernels, against a plain loop over every index value (elements outside C's
    /// index range must stay as they were).
    #[test]
    fn random_problems_match_the_loops() {
        // Miri (`.ci/miri.sh`): a few seeds, which still reach empty and several indices per
        // group, batch indices, negative and padded strides, edge tiles and several threads.
        let seeds = if cfg!(miri) { 6 } else { 300 };
        for seed in 0..seeds {
            for choice in [KernelChoice::Scalar, KernelChoice::Best] {
                if cfg!(miri) && choice == KernelChoice::Best {
                    continue; // no SIMD kernel under Miri: the same scalar kernel again
                }
                check::<f64>(seed, choice);
                check::<f32>(seed + 1000, choice);
            }
            check::<Complex64>(seed + 2000, KernelChoice::Best);
            check::<num_complex::Complex32>(seed + 3000, KernelChoice::Scalar);
        }
    }

    /// Plain row-major GEMM through the engine, both kernels, against a triple loop, with
    /// K > kc (several depth passes) and edge tiles.
    #[test]
    fn row_major_gemm_matches_loops() {
        // Miri (`.ci/miri.sh`): smaller shapes, still with two depth passes (K > 1.5 kc).
        let shapes: &[(usize, usize, usize)] = if cfg!(miri) {
            &[(7, 9, 5), (1, 1, 1), (6, 16, 3), (2, 3, 400)]
        } else {
            &[
                (7, 9, 5),
                (13, 17, 300),
                (1, 1, 1),
                (6, 16, 3),
                (75, 33, 600),
            ]
        };
        // (no SIMD kernel under Miri: `Best` is the scalar kernel there)
        let choices: &[KernelChoice] = if cfg!(miri) {
            &[KernelChoice::Scalar]
        } else {
            &[KernelChoice::Best, KernelChoice::Scalar]
        };
        for &choice in choices {
            for &(m, n, k) in shapes {
                let a: Vec<f64> = (0..m * k).map(|i| (i % 7) as f64 - 3.0).collect();
                let b: Vec<f64> = (0..k * n).map(|i| (i % 5) as f64 * 0.5).collect();
                let mut c = vec![1.0; m * n];
                let p = Problem {
                    m: vec![Dim {
                        ext: m,
                        s: [k as isize, n as isize],
                    }],
                    n: vec![Dim { ext: n, s: [1, 1] }],
                    k: vec![Dim {
                        ext: k,
                        s: [1, n as isize],
                    }],
                    batch: vec![],
                };
                unsafe {
                    gett(
                        &p,
                        a.as_ptr(),
                        b.as_ptr(),
                        c.as_mut_ptr(),
                        2.0,
                        0.5,
                        2,
                        choice,
                    )
                };
                for i in 0..m {
                    for j in 0..n {
                        let s: f64 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                        assert_eq!(c[i * n + j], 2.0 * s + 0.5, "{choice:?} {m}x{n}x{k}");
                    }
                }
            }
        }
    }
}

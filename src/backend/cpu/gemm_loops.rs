//! The loop nests of GEMM calls a candidate runs on concrete operands: loops of calls on
//! the operands or their packs (serial with threaded calls, or parallel with single-threaded
//! ones, batch-reduce loops accumulating into the same C block), and tiled write-backs (each
//! block of C computed into a cached buffer, then transposed into C).

use std::time::{Duration, Instant};

use super::gemm::{gemm, Mat, MatMut};
use crate::einsum::Label;
use crate::error::{Error, Result};
use crate::plan::{axes_of, fuse_axes, packed_layout, stride_of, Candidate, Epilogue, TiledC};
use crate::tensor::{take_aligned, Element, Layout, StridedViewMut};
use crate::transpose::{on_threads, wakes_threads};

/// Calls `f` with the offsets in each of `N` tensors of every index of the `dims` space
/// (`strides[t][d]`: stride of dimension `d` in tensor `t`). Nothing when a dim is 0.
pub(super) fn for_each_index<const N: usize>(
    dims: &[usize],
    strides: [&[isize]; N],
    mut f: impl FnMut([isize; N]),
) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut off = [0isize; N];
    loop {
        f(off);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for (o, s) in off.iter_mut().zip(strides) {
                *o += s[d];
            }
            if idx[d] < dims[d] {
                break;
            }
            for (o, s) in off.iter_mut().zip(strides) {
                *o -= s[d] * dims[d] as isize;
            }
            idx[d] = 0;
        }
    }
}

/// One fused matrix dimension `(extent, stride)` of a label group.
pub(super) fn matdim(
    labels: &[crate::einsum::Label],
    axis_labels: &[crate::einsum::Label],
    l: &Layout,
) -> Result<(usize, isize)> {
    fuse_axes(axes_of(labels, axis_labels, l))
        .ok_or_else(|| Error::PlanMismatch("index group does not fuse (planner bug)".into()))
}

/// A raw pointer that may cross threads (the loops it is used in write disjoint blocks).
#[derive(Clone, Copy)]
pub(super) struct SendPtr<T>(pub(super) *mut T);
// SAFETY: only used by `GemmRun::run`, whose parallel iterations touch disjoint C blocks and
// only read A and B.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so that closures capture the whole `SendPtr`).
    pub(super) fn get(self) -> *mut T {
        self.0
    }
}

/// A tiled candidate over concrete operands: blocks of C computed into cached buffers and
/// transposed into C one by one.
pub(super) struct TiledRun<'a, T> {
    pub(super) cand: &'a Candidate,
    pub(super) tiles: &'a TiledC,
    pub(super) a: (*const T, &'a [Label], &'a Layout),
    pub(super) b: (*const T, &'a [Label], &'a Layout),
    pub(super) ext: &'a (dyn Fn(Label) -> usize + Sync),
    pub(super) out: &'a [Label],
}

impl<T: Element> TiledRun<'_, T> {
    /// Runs every block: the GEMM loop nest of one block into a buffer (`beta = 0`), then
    /// `C_block = alpha * buffer + beta * C_block`. Blocks run on rayon threads, one buffer
    /// each, when the candidate is parallel. Returns the share of the time spent in GEMMs.
    ///
    /// # Safety
    /// A and B address tensors of the given layouts; `c` has the layout the candidate was
    /// made for and overlaps neither.
    pub(super) unsafe fn run(
        &self,
        threads: usize,
        alpha: T,
        beta: T,
        c: &mut StridedViewMut<'_, T>,
        retain: bool,
    ) -> Result<f64> {
        let (cand, tc, out) = (self.cand, self.tiles, self.out);
        let (ap, a_labels, la) = self.a;
        let (bp, b_labels, lb) = self.b;
        let lc = c.layout().clone();
        let dims: Vec<usize> = tc.loops.iter().map(|&l| (self.ext)(l)).collect();
        let strides = |labels: &[Label], l: &Layout| -> Vec<isize> {
            tc.loops.iter().map(|&x| stride_of(x, labels, l)).collect()
        };
        let (sa, sb, sc) = (
            strides(a_labels, la),
            strides(b_labels, lb),
            strides(out, &lc),
        );
        let mut offsets = Vec::with_capacity(dims.iter().product());
        for_each_index(&dims, [&sa, &sb, &sc], |o| offsets.push(o));
        if offsets.is_empty() || tc.block_len == 0 {
            return Ok(1.0);
        }
        let buffers = if cand.parallel {
            threads.min(offsets.len())
        } else {
            1
        };
        let es = std::mem::size_of::<T>();
        // whole 64-byte lines per buffer, so that every buffer starts aligned
        let stride = (tc.block_len * es).div_ceil(64) * 64 / es;
        let (mut buf, off) = take_aligned::<T>(buffers * stride, retain, "the C blocks")?;
        let bufp = SendPtr(buf.as_mut_ptr().wrapping_add(off));
        let block_layout = packed_layout(&tc.order, out, self.ext)?;
        let inner = Candidate {
            parallel: false,
            c_tiles: None,
            gett: None,
            nested: None,
            ..cand.clone()
        };
        let (ap, bp, cp) = (
            SendPtr(ap as *mut T),
            SendPtr(bp as *mut T),
            SendPtr(c.as_mut_ptr()),
        );
        let plan = &tc.plan;
        // Blocks `s..e` on buffer `t`; the GEMM and transposition times.
        let range = |t: usize, s: usize, e: usize| -> Result<(Duration, Duration)> {
            let tp = bufp.get().wrapping_add(t * stride);
            let (mut tg, mut tw) = (Duration::ZERO, Duration::ZERO);
            for &[oa, ob, oc] in &offsets[s..e] {
                let t0 = Instant::now();
                let run = GemmRun {
                    cand: &inner,
                    a: (ap.get().wrapping_offset(oa), a_labels, la),
                    b: (bp.get().wrapping_offset(ob), b_labels, lb),
                    c: (tp, out, &block_layout),
                    ext: self.ext,
                    epilogue: Epilogue::None,
                };
                // SAFETY: `oa`/`ob` are the offsets of in-bounds block indices in A and B,
                // and the GEMMs address only the block's other labels from there; the buffer
                // `t` holds `block_len` elements of `block_layout` and is this task's alone.
                unsafe { run.run(threads, T::one(), T::zero())? };
                let t1 = Instant::now();
                // SAFETY: the plan maps the buffer's layout onto C's layout restricted to the
                // non-block labels, at `oc`, an in-bounds block index of C; different blocks
                // are disjoint parts of C (C never maps two indices to one element).
                unsafe { plan.execute_raw(alpha, tp, beta, cp.get().wrapping_offset(oc)) };
                tg += t1 - t0;
                tw += t1.elapsed();
            }
            Ok((tg, tw))
        };
        let n = offsets.len();
        let (tg, tw) = if buffers == 1 {
            range(0, 0, n)?
        } else {
            let parts: Vec<Result<(Duration, Duration)>> = on_threads(threads, || {
                use rayon::prelude::*;
                (0..buffers)
                    .into_par_iter()
                    .map(|t| range(t, n * t / buffers, n * (t + 1) / buffers))
                    .collect()
            });
            let mut sum = (Duration::ZERO, Duration::ZERO);
            for p in parts {
                let (g, w) = p?;
                sum = (sum.0 + g, sum.1 + w);
            }
            sum
        };
        drop(buf);
        let total = (tg + tw).as_secs_f64();
        Ok(if total > 0.0 {
            tg.as_secs_f64() / total
        } else {
            1.0
        })
    }
}

/// Fewest flops of a parallel loop of GEMM calls that is handed to rayon's workers when the
/// caller is outside their pool: entering a parallel region from there costs about as much
/// as a million flops of small GEMMs (see `docs/TUNING.md`).
pub(super) const PARALLEL_MIN_FLOPS: f64 = 1e6;

/// The GEMM loop nest of one candidate over concrete operands.
pub(super) struct GemmRun<'a, T> {
    pub(super) cand: &'a Candidate,
    pub(super) a: (*const T, &'a [Label], &'a Layout),
    pub(super) b: (*const T, &'a [Label], &'a Layout),
    pub(super) c: (*mut T, &'a [Label], &'a Layout),
    pub(super) ext: &'a (dyn Fn(Label) -> usize + Sync),
    pub(super) epilogue: Epilogue,
}

impl<T: Element> GemmRun<'_, T> {
    /// The one way [`GemmRun::run`] can fail, checked without touching any data: a GEMM
    /// group that does not fuse into one stride in an operand's layout.
    pub(super) fn check(&self) -> Result<()> {
        let cand = self.cand;
        for (groups, labels, layout) in [
            ([&cand.m, &cand.k], self.a.1, self.a.2),
            ([&cand.k, &cand.n], self.b.1, self.b.2),
            ([&cand.m, &cand.n], self.c.1, self.c.2),
        ] {
            for g in groups {
                matdim(g, labels, layout)?;
            }
        }
        Ok(())
    }

    /// Runs every GEMM: independent loops (in parallel when the candidate says so) around
    /// batch-reduce loops around one strided GEMM; the first call of each C block applies
    /// `beta`, later ones add; the epilogue runs once per block after the last.
    ///
    /// # Safety
    /// The three pointers address tensors of the given layouts; C's layout never maps two
    /// indices to one element and C overlaps neither A nor B.
    pub(super) unsafe fn run(&self, threads: usize, alpha: T, beta: T) -> Result<()> {
        let cand = self.cand;
        let (ap, a_labels, la) = self.a;
        let (bp, b_labels, lb) = self.b;
        let (cp, c_labels, lc) = self.c;
        let (m, a_rs) = matdim(&cand.m, a_labels, la)?;
        let (k, a_cs) = matdim(&cand.k, a_labels, la)?;
        let (_, b_rs) = matdim(&cand.k, b_labels, lb)?;
        let (n, b_cs) = matdim(&cand.n, b_labels, lb)?;
        let (_, c_rs) = matdim(&cand.m, c_labels, lc)?;
        let (_, c_cs) = matdim(&cand.n, c_labels, lc)?;
        let strides = |ls: &[Label], labels: &[Label], l: &Layout| -> Vec<isize> {
            ls.iter().map(|&x| stride_of(x, labels, l)).collect()
        };
        let loop_dims: Vec<usize> = cand.loops.iter().map(|&l| (self.ext)(l)).collect();
        let (loop_a, loop_b, loop_c) = (
            strides(&cand.loops, a_labels, la),
            strides(&cand.loops, b_labels, lb),
            strides(&cand.loops, c_labels, lc),
        );
        let red_dims: Vec<usize> = cand.reduce.iter().map(|&l| (self.ext)(l)).collect();
        let (red_a, red_b) = (
            strides(&cand.reduce, a_labels, la),
            strides(&cand.reduce, b_labels, lb),
        );
        let reductions: usize = red_dims.iter().product();
        let (library, epilogue) = (cand.library, self.epilogue);
        let (ap, bp, cp) = (SendPtr(ap as *mut T), SendPtr(bp as *mut T), SendPtr(cp));
        let block = move |[oa, ob, oc]: [isize; 3], gemm_threads: usize| {
            let cb = MatMut {
                ptr: cp.get().wrapping_offset(oc),
                rs: c_rs,
                cs: c_cs,
            };
            let call = |da: isize, db: isize, k: usize, beta: T| {
                // SAFETY: the GEMM groups fuse in each operand's layout (checked by
                // `matdim`) and the loop offsets are offsets of in-bounds indices, so every
                // element the call addresses lies inside its tensor; this C block is
                // written by this call only.
                unsafe {
                    gemm(
                        library,
                        gemm_threads,
                        m,
                        n,
                        k,
                        alpha,
                        Mat {
                            ptr: ap.get().wrapping_offset(oa + da),
                            rs: a_rs,
                            cs: a_cs,
                        },
                        Mat {
                            ptr: bp.get().wrapping_offset(ob + db),
                            rs: b_rs,
                            cs: b_cs,
                        },
                        beta,
                        cb,
                    )
                }
            };
            if reductions == 0 {
                call(0, 0, 0, beta);
            } else {
                let mut first = true;
                for_each_index(&red_dims, [&red_a, &red_b], |[da, db]| {
                    call(da, db, k, if first { beta } else { T::one() });
                    first = false;
                });
            }
            if epilogue != Epilogue::None {
                for i in 0..m as isize {
                    for j in 0..n as isize {
                        // SAFETY: (i, j) is inside this block of C.
                        unsafe {
                            let q = cb.ptr.offset(i * c_rs + j * c_cs);
                            *q = epilogue.apply(*q);
                        }
                    }
                }
            }
        };
        let (calls, m, n, k) = cand.gemm_shape;
        let flops = 2.0 * (calls * m * n * k) as f64;
        // A small loop called from outside the pool runs on this thread: waking the
        // workers would cost more than the calls (`wakes_threads`).
        let inline = flops < PARALLEL_MIN_FLOPS && wakes_threads(threads);
        if cand.parallel && !inline {
            let mut offsets = Vec::with_capacity(loop_dims.iter().product());
            for_each_index(&loop_dims, [&loop_a, &loop_b, &loop_c], |o| offsets.push(o));
            on_threads(threads, || {
                use rayon::prelude::*;
                offsets.par_iter().for_each(|&o| block(o, 1));
            });
        } else if cand.parallel || cand.gemm_threads == 1 || inline {
            // small threaded GEMMs from outside the pool: one thread, no wake-up
            for_each_index(&loop_dims, [&loop_a, &loop_b, &loop_c], |o| block(o, 1));
        } else {
            // the threaded GEMMs run inside a pool of their size (`on_threads`)
            let gt = cand.gemm_threads;
            on_threads(threads, || {
                for_each_index(&loop_dims, [&loop_a, &loop_b, &loop_c], |o| block(o, gt))
            });
        }
        Ok(())
    }
}

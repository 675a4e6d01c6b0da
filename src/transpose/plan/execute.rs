//! Execution of a [`TransposePlan`]: checks, the tasks cut from the loop nest, seams around
//! misaligned rows, and the loop walker that calls the macro- and micro-kernels.

use rayon::prelude::*;

use super::*;
use crate::error::{Error, Result};
use crate::tensor::{spans_overlap, Element, StridedView, StridedViewMut};
use crate::threads::{on_threads, wakes_threads};
use crate::transpose::kernel::{self, Micro, Scalars};
use crate::transpose::problem::Dim;

impl TransposePlan {
    /// Runs `B = alpha * perm(A) + beta * B` on data of the planned layouts. With
    /// `beta == 0`, B is never read.
    pub fn execute<T: Element>(
        &self,
        alpha: T,
        a: &StridedView<'_, T>,
        beta: T,
        b: &mut StridedViewMut<'_, T>,
    ) -> Result<()> {
        self.check(a, b)?;
        // SAFETY: `check` verified the layouts, the element type and that B does not
        // overlap A; B is borrowed mutably.
        unsafe { self.execute_raw(alpha, a.as_ptr(), beta, b.as_mut_ptr()) };
        Ok(())
    }

    /// [`TransposePlan::execute`] on raw pointers, for callers that run one plan on many
    /// sub-blocks of larger tensors (the tiled write-back of a contraction).
    ///
    /// # Safety
    /// `a` and `b` address tensors of the planned A and B layouts and element type `T`
    /// (every offset of an index of the layout is in bounds), B overlaps neither A nor any
    /// memory another thread uses during the call.
    pub(crate) unsafe fn execute_raw<T: Element>(&self, alpha: T, a: *const T, beta: T, b: *mut T) {
        debug_assert_eq!(T::DTYPE, self.dtype);
        if self.norm.is_empty() {
            return;
        }
        let sc = Scalars::new(alpha, beta);
        let micro = match self.kernel {
            KernelKind::Tile { simd: true, .. } => kernel::micro::<T>(self.isa, &sc),
            _ => None,
        };
        let p = Ptrs { a, b };
        let mut stream = self.streams(beta.is_exact_zero());
        if let (true, Some(st), Some(m), Some(copy), KernelKind::Tile { i, j, .. }) = (
            stream,
            &self.staged,
            micro.as_ref(),
            kernel::stream_copy(self.isa),
            self.kernel,
        ) {
            let units = st.units();
            let run = |s: usize, e: usize| {
                // SAFETY: `check` (or the caller of `execute_raw`) guarantees the layouts;
                // the staged nest covers each B element once, tasks take disjoint unit
                // ranges; `copy` and `m` belong to this plan's ISA, available on this CPU.
                let q = p;
                unsafe { st.run((i, j), q.a, q.b, (s, e), &sc, m, copy, !unstaged()) };
                kernel::store_fence();
            };
            self.run_tasks(units, run);
            return;
        }
        // Streamed tile rows must be whole cache lines. User arrays are often only 16-byte
        // aligned (ndarray's, from the system allocator), so when B does not start on a line
        // the grid of B-side macro-tiles starts `head` elements in, at B's first line
        // boundary, and the first macro-tile also covers the `head` columns before it (see
        // `run_range`). Without this shift every strip would split its rows over two lines
        // (0.10 of copy on 7248^2 f32, AVX2), and with ordinary stores instead a tiled
        // contraction write-back ran 2.2x slower (tccg-39, f64, 2 threads: 29 ms against
        // 13 ms into a line-aligned C).
        let mut head = 0;
        if stream {
            if let KernelKind::Tile { j, .. } = self.kernel {
                let es = self.dtype.size_bytes();
                let mis = (b as usize) % 64;
                if mis != 0 {
                    if micro.is_some() && (64 - mis).is_multiple_of(es) {
                        head = ((64 - mis) / es).min(j.n);
                    } else {
                        stream = false;
                    }
                }
            }
        }
        let (loops, bj) = self.nest(stream);
        let shifted: Vec<Loop>;
        let loops = match (head, self.kernel) {
            (h, KernelKind::Tile { j, .. }) if h > 0 => {
                // Blocks along B's stride-1 dim: [0, head + bj), then `bj` wide from
                // `head + bj` on, the last one up to the end. A last block narrower than a
                // micro-tile joins the one before it, so that the partial line at a row's
                // end (a seam's tail) is in a block with whole micro-tiles before it. (All
                // remainders joined ran slower: TTC f64 ttc-40, 1 thread, streamed blocks of
                // 16 into a B 16 bytes past a line, 27 -> 45 ms.)
                let w = micro.as_ref().map_or(1, |m| m.w);
                let rem = (j.n - head) % bj;
                let count = (j.n - head).div_ceil(bj).max(1);
                let count = if rem > 0 && rem < w && count > 1 {
                    count - 1
                } else {
                    count
                };
                shifted = loops
                    .iter()
                    .map(|l| match l.role {
                        Role::BlockJ => Loop { count, ..*l },
                        _ => *l,
                    })
                    .collect();
                &shifted[..]
            }
            _ => loops,
        };
        let seam = match (micro.as_ref(), self.kernel) {
            (Some(m), KernelKind::Tile { i, j, .. }) if stream && head > 0 => {
                self.seam_plan(loops, m, (i, j, bj), b as usize % 64, head)
            }
            (_, KernelKind::Rows { n }) if stream && sc.mode == kernel::COPY => {
                self.row_seam_plan(loops, n, b as usize % 64)
            }
            _ => None,
        };
        let units: usize = loops.iter().map(|l| l.count).product();
        let run = |s: usize, e: usize| {
            // SAFETY: see `run_range`; callers pass disjoint unit ranges.
            unsafe { self.run_range(loops, bj, p, s, e, &sc, micro.as_ref(), stream, head, seam) };
            if stream {
                kernel::store_fence();
            }
        };
        self.run_tasks(units, run);
    }

    /// Executes units `s..e` of the loop nest (last loop fastest). With `head > 0` (tiles
    /// only), B-side block 0 covers columns `[0, head + bj)` and block `J > 0` covers
    /// `[head + J·bj, head + (J+1)·bj)`; the last block ends at the extent (the caller sized
    /// the block loop's count for that).
    ///
    /// # Safety
    /// `p` points at A and B of the planned layouts; B is exclusively ours for these units.
    /// Every unit's offsets are those of in-bounds indices: loops walk whole dimensions, and
    /// block/chunk loops clip their last tile to the extent (with a head, block `J > 0`
    /// starts at `head + J·bj < n` because the count is at most `ceil((n - head) / bj)`).
    #[allow(clippy::too_many_arguments)] // the loop nest, the data, the range and the kernels
    pub(super) unsafe fn run_range<T: Element>(
        &self,
        loops: &[Loop],
        bj: usize,
        p: Ptrs<T>,
        s: usize,
        e: usize,
        sc: &Scalars<T>,
        micro: Option<&Micro>,
        stream: bool,
        head: usize,
        seam: Option<SeamPlan>,
    ) {
        if s >= e {
            return;
        }
        let nl = loops.len();
        // The loop indices and A, B element offsets of unit `u`.
        let unit = |u: usize| {
            let mut idx = vec![0usize; nl];
            let (mut oa, mut ob) = (0isize, 0isize);
            let mut rest = u;
            for k in (0..nl).rev() {
                idx[k] = rest % loops[k].count;
                rest /= loops[k].count;
                oa += idx[k] as isize * loops[k].sa;
                ob += idx[k] as isize * loops[k].sb;
            }
            (idx, oa, ob)
        };
        // One step of the loop nest's odometer (last loop fastest).
        let step = |idx: &mut [usize], oa: &mut isize, ob: &mut isize| {
            let mut k = nl;
            while k > 0 {
                k -= 1;
                idx[k] += 1;
                *oa += loops[k].sa;
                *ob += loops[k].sb;
                if idx[k] < loops[k].count {
                    break;
                }
                *oa -= loops[k].sa * loops[k].count as isize;
                *ob -= loops[k].sb * loops[k].count as isize;
                idx[k] = 0;
            }
        };
        if let Some((f, d, bytes)) = self.unit_sets(loops, p, sc, stream, seam, e - s) {
            // Row batches of `ROW_GROUPS` units at once, the units a quarter of the range
            // apart, then the rest one by one (fewer than `ROW_GROUPS`: no sets).
            const G: usize = kernel::ROW_GROUPS;
            let q = (e - s) / G;
            let es = std::mem::size_of::<T>() as isize;
            let mut odo: [(Vec<usize>, isize, isize); G] = std::array::from_fn(|g| unit(s + g * q));
            for _ in 0..q {
                let sets = std::array::from_fn(|g| {
                    let (_, oa, ob) = odo[g];
                    (p.a.offset(oa) as *const u8, p.b.offset(ob) as *mut u8)
                });
                f(&sets, d.sa * es, d.sb * es, d.n, bytes);
                for (idx, oa, ob) in odo.iter_mut() {
                    step(idx, oa, ob);
                }
            }
            return self.run_range(loops, bj, p, s + G * q, e, sc, micro, stream, head, seam);
        }
        let (mut idx, mut oa, mut ob) = unit(s);
        let pos = |r: Role| loops.iter().position(|l| l.role == r);
        let (pi, pj, pc) = (pos(Role::BlockI), pos(Role::BlockJ), pos(Role::Chunk));
        let b = self.block;
        // A second odometer [`Self::prefetch_units`] units ahead, for the tiles' prefetch of
        // a later unit's A rows (past the last unit it wraps to the first: a harmless hint).
        let ahead = self.prefetches_in(loops).then(|| {
            let (mut i2, mut oa2, mut ob2) = (idx.clone(), oa, ob);
            for _ in 0..self.prefetch_units(bj) {
                step(&mut i2, &mut oa2, &mut ob2);
            }
            (i2, oa2, ob2)
        });
        let mut ahead = ahead;
        // Units that are the same small grid of whole micro-tiles each (each side of the tile
        // is a multiple of the micro-tile's width and within one block, or is cut into
        // equal blocks of such a multiple; `kernel::WholeMicro`): the micro-kernels straight
        // from the unit loop, without `tile_simd`'s set-up.
        let whole = match (self.kernel, micro, head, seam) {
            (KernelKind::Tile { i, j, .. }, Some(m), 0, None) if pi.is_some() && pj.is_some() => {
                // the units' extent along a side of `n` in blocks of `blk`, if all are equal
                let even = |n: usize, blk: usize| {
                    if n <= blk {
                        Some(n)
                    } else {
                        n.is_multiple_of(blk).then_some(blk)
                    }
                };
                even(i.n, b).zip(even(j.n, bj)).and_then(|(ni, nj)| {
                    kernel::WholeMicro::new(&tile_of(i, j, ni, nj), sc, m, stream)
                })
            }
            _ => None,
        };
        // Plain streamed copies of row batches that follow one another in B.
        let joined = match self.row_batch {
            Some(d) if stream && sc.mode == kernel::COPY && self.joined_rows() => {
                kernel::stream_joined_rows(self.isa).map(|f| (f, d))
            }
            _ => None,
        };
        for _ in s..e {
            let (a0, b0) = (p.a.offset(oa), p.b.offset(ob));
            let next = ahead
                .as_ref()
                .map_or(std::ptr::null(), |(_, oa2, _)| p.a.wrapping_offset(*oa2));
            match self.kernel {
                KernelKind::Rows { n } => {
                    let len = pc.map_or(n, |c| b.min(n - idx[c] * b));
                    // Streaming pays off on rows of at least a few lines; below that the call and
                    // the partial lines at both ends cost more than the read of B it saves.
                    let long = len * self.dtype.size_bytes() >= kernel::STREAM_ROW_MIN_BYTES;
                    let copy = if stream && long {
                        kernel::stream_copy(self.isa)
                    } else {
                        None
                    };
                    let batched = match (stream, sc.mode, kernel::stream_rows(self.isa)) {
                        (true, kernel::COPY, Some(f)) => Some(f),
                        _ => None,
                    };
                    let es = std::mem::size_of::<T>() as isize;
                    // Rows that follow one another in B and are not whole aligned blocks:
                    // the batch streamed as one range ([`Self::joined_rows`]).
                    let line = kernel::stream_block(self.isa);
                    let joined = joined.filter(|_| {
                        len == n
                            && (b0 as usize).is_multiple_of(4)
                            && !((len * es as usize).is_multiple_of(line)
                                && (b0 as usize).is_multiple_of(line))
                    });
                    if let Some((f, d)) = joined {
                        // SAFETY (run): the batch's rows lie in A at `d.sa` apart and one
                        // after another in B (`d.sb == n`), `n` elements of at least one
                        // block each, inside this unit (callers of `run_range`).
                        f(
                            a0 as *const u8,
                            d.sa * es,
                            b0 as *mut u8,
                            d.n,
                            len * es as usize,
                        );
                        #[cfg(test)]
                        kernel::JOINED_BATCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    } else if let Some((sp, f)) = seam.zip(batched) {
                        // Row seams exist only for streamed plain copies (`execute_raw`).
                        let (x, count) = (idx[sp.outer], loops[sp.outer].count);
                        let (rows, sa, sb) = self
                            .row_batch
                            .map_or((1, 0, 0), |d| (d.n, d.sa * es, d.sb * es));
                        let rs = kernel::RowSeam {
                            next: loops[sp.outer].sa * es,
                            skip: x > 0,
                            succ: x + 1 < count,
                        };
                        let bytes = len * es as usize;
                        f(
                            a0 as *const u8,
                            sa,
                            b0 as *mut u8,
                            sb,
                            rows,
                            bytes,
                            Some(rs),
                        );
                        #[cfg(test)]
                        kernel::SEAM_LINES.fetch_add(rows, std::sync::atomic::Ordering::Relaxed);
                    } else {
                        match (self.row_batch, batched) {
                            (Some(d), Some(f)) => f(
                                a0 as *const u8,
                                d.sa * es,
                                b0 as *mut u8,
                                d.sb * es,
                                d.n,
                                len * es as usize,
                                None,
                            ),
                            (Some(d), None) => {
                                for r in 0..d.n as isize {
                                    kernel::row(
                                        a0.offset(r * d.sa),
                                        b0.offset(r * d.sb),
                                        len,
                                        sc,
                                        copy,
                                    );
                                }
                            }
                            (None, _) => kernel::row(a0, b0, len, sc, copy),
                        }
                    }
                }
                // SAFETY (run): the unit is a whole tile of `whole`'s shape inside A and B
                // (callers of `run_range`); `false` leaves it to `tile_simd` below.
                KernelKind::Tile { .. }
                    if whole.is_some_and(|wm| unsafe {
                        wm.run(a0 as *const u8, b0 as *mut u8, next as *const u8)
                    }) =>
                {
                    #[cfg(test)]
                    kernel::WHOLE_MICRO_UNITS.with(|c| c.set(c.get() + 1));
                }
                KernelKind::Tile { i, j, .. } => {
                    let ni = pi.map_or(1, |k| b.min(i.n - idx[k] * b));
                    // Block `jb` covers [start, end); blocks after the first are shifted by
                    // `head` from where the odometer put them (no shift without a head).
                    let (a0, b0, nj) = match pj {
                        Some(k) => {
                            let jb = idx[k];
                            let (start, shift) = if jb == 0 {
                                (0, 0)
                            } else {
                                (head + jb * bj, head as isize)
                            };
                            let end = if jb + 1 == loops[k].count {
                                j.n
                            } else {
                                head + (jb + 1) * bj
                            };
                            (
                                a0.offset(shift * j.sa),
                                b0.offset(shift * j.sb),
                                end - start,
                            )
                        }
                        None => (a0, b0, 1),
                    };
                    let t = tile_of(i, j, ni, nj);
                    let sm = match (seam, pj) {
                        (Some(sp), Some(k)) => {
                            let (jb, last) = (idx[k], loops[k].count - 1);
                            let start = if jb == 0 { 0 } else { head + jb * bj };
                            let (x, n) = (idx[sp.outer], loops[sp.outer].count);
                            kernel::Seam {
                                next_a: loops[sp.outer].sa - start as isize * j.sa,
                                head: sp.head,
                                skip: jb == 0 && x > 0,
                                succ: jb == last && x + 1 < n,
                            }
                        }
                        _ => kernel::Seam::default(),
                    };
                    match micro {
                        Some(m) => kernel::tile_simd(a0, b0, &t, sc, m, stream, &sm, next),
                        None => kernel::tile_scalar(a0, b0, &t, sc),
                    }
                }
            }
            step(&mut idx, &mut oa, &mut ob);
            if let Some((i2, oa2, ob2)) = ahead.as_mut() {
                step(i2, oa2, ob2);
            }
        }
    }

    /// Runs `units` units of the loop nest as `run(start, end)` ranges: one range on the
    /// calling thread, or the plan's tasks (equal ranges) on its threads.
    pub(super) fn run_tasks(&self, units: usize, run: impl Fn(usize, usize) + Sync) {
        if self.tasks <= 1 || self.run_inline() {
            run(0, units);
            return;
        }
        let tasks = self.tasks;
        on_threads(self.threads, || {
            (0..tasks)
                .into_par_iter()
                .for_each(|t| run(units * t / tasks, units * (t + 1) / tasks));
        });
    }

    /// Whether this execution runs as one task on the calling thread although the plan has
    /// several: the tensor is under [`TransposeOptions::parallel_min_bytes`] and the caller
    /// is not a worker of a pool of the plan's size, so that handing out tasks would wake
    /// other threads (from inside such a pool the caller starts on the tasks at once; see
    /// `docs/TUNING.md`).
    pub(super) fn run_inline(&self) -> bool {
        self.small_for_threads() && wakes_threads(self.threads)
    }

    /// Whether the tensor is under [`TransposeOptions::parallel_min_bytes`]: a caller outside
    /// a pool of the plan's size runs it as one task on its own thread.
    pub(crate) fn small_for_threads(&self) -> bool {
        let bytes = self.norm.elements() * self.dtype.size_bytes();
        bytes < self.parallel_min_bytes
    }

    pub(super) fn check<T: Element>(
        &self,
        a: &StridedView<'_, T>,
        b: &StridedViewMut<'_, T>,
    ) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(Error::PlanMismatch(format!(
                "transpose plan made for {}, executed with {}",
                self.dtype,
                T::DTYPE
            )));
        }
        if a.layout() != &self.a || b.layout() != &self.b {
            return Err(Error::PlanMismatch(
                "transpose plan executed on operands of other layouts".into(),
            ));
        }
        if spans_overlap(a.as_ptr(), a.layout(), b.as_ptr(), b.layout()) {
            return Err(Error::Overlap {
                what: "the input".into(),
            });
        }
        Ok(())
    }

    /// Seams ([`kernel::Seam`]) for streamed tiles into a B that starts `mis` bytes into a
    /// line: when B's rows (its stride-1 dimension, whole, a multiple of 64 bytes) follow
    /// each other in memory along an outer loop, each row's last partial line and the next
    /// row's first are one line, written by the tile that owns the tail. `head` is the plan's
    /// shift of its B-side block grid. Not where the rows follow along the tile's own rows
    /// (`i.sb` = the row length): both halves of the line are then written by one tile,
    /// close in time, and seams ran slower there (TTC f32, 1 thread, B 16 bytes past a
    /// line: ttc-22 0.65 -> 0.57 of copy, ttc-23 0.69 -> 0.61).
    pub(super) fn seam_plan(
        &self,
        loops: &[Loop],
        m: &kernel::Micro,
        (i, j, bj): (Dim, Dim, usize),
        mis: usize,
        head: usize,
    ) -> Option<SeamPlan> {
        let es = self.dtype.size_bytes();
        // the seam kernels join lines from whole dwords, 16 micro-tile rows at most
        if es < 4 {
            return None;
        }
        let (_, align) = m.nt?;
        m.stream?;
        let row = j.n as isize * j.sb;
        let hn = (align - mis % align) % align;
        loops.iter().position(|l| l.role == Role::BlockJ)?;
        // Whole rows of whole lines; blocks after the first start on a line; the first
        // block holds a whole micro-tile (a seam tile reads its rows' last `w` columns:
        // every block of the plan's shifted grid is at least `w` wide, see `execute_raw`).
        let ok = j.sb == 1
            && i.sa == 1
            && i.sb != row
            && (j.n * es).is_multiple_of(64)
            && (bj * es).is_multiple_of(64)
            && hn > 0
            && hn.is_multiple_of(es)
            && (head + bj).min(j.n) >= m.w;
        if !ok {
            return None;
        }
        let outer = loops
            .iter()
            .position(|l| l.role == Role::Outer && l.sb == row && l.count > 1)?;
        Some(SeamPlan {
            outer,
            head: hn / es,
        })
    }

    /// Seams for streamed row copies into a B that starts `mis` bytes into a line (see
    /// `kernel::streaming_copies_for!`): rows of whole lines, not cut into chunks, each
    /// followed in memory by the row of the next index of an outer loop (not of the batch).
    pub(super) fn row_seam_plan(&self, loops: &[Loop], n: usize, mis: usize) -> Option<SeamPlan> {
        let es = self.dtype.size_bytes();
        // the seamed row copies join lines from whole dwords
        if es < 4 {
            return None;
        }
        let line = kernel::stream_block(self.isa);
        kernel::stream_rows(self.isa)?;
        let ok = !mis.is_multiple_of(line)
            && mis.is_multiple_of(es)
            && (n * es).is_multiple_of(64)
            && loops.iter().all(|l| l.role != Role::Chunk || l.count == 1)
            && self.row_batch.is_none_or(|d| d.sb != n as isize);
        if !ok {
            return None;
        }
        let outer = loops
            .iter()
            .position(|l| l.role == Role::Outer && l.sb == n as isize && l.count > 1)?;
        Some(SeamPlan { outer, head: 0 })
    }

    /// For a streamed row copy whose batches do not group by themselves
    /// ([`kernel::groups_rows`]) but read A as one stream from unit to unit: the copy of
    /// [`kernel::ROW_GROUPS`] units' batches at once, the batch dimension and the row length
    /// in bytes, when `units`
    /// units of this execution are enough for one set. Every destination row must be
    /// line-aligned (B's start and every B stride of the nest whole lines). Several read
    /// streams keep more lines in flight than one (`docs/TUNING.md`, `ROW_GROUPS`).
    pub(super) fn unit_sets<T: Element>(
        &self,
        loops: &[Loop],
        p: Ptrs<T>,
        sc: &Scalars<T>,
        stream: bool,
        seam: Option<SeamPlan>,
        units: usize,
    ) -> Option<(kernel::StreamRowSetsFn, Dim, usize)> {
        let KernelKind::Rows { n } = self.kernel else {
            return None;
        };
        let d = self.row_batch?;
        if !stream || sc.mode != kernel::COPY || seam.is_some() || units < kernel::ROW_GROUPS {
            return None;
        }
        let f = kernel::stream_row_sets(self.isa)?;
        let line = kernel::stream_block(self.isa) as isize;
        let es = self.dtype.size_bytes() as isize;
        let bytes = n as isize * es;
        let whole = |x: isize| x % line == 0;
        let aligned = whole(p.b as isize)
            && whole(bytes)
            && whole(d.sb * es)
            && loops.iter().all(|l| whole(l.sb * es));
        let chunks = loops.iter().all(|l| l.role != Role::Chunk || l.count == 1);
        // Rows that continue one stream, in batches too small to group by themselves.
        let stream_of_rows = kernel::rows_continue(d.sa * es, bytes as usize);
        let grouped = kernel::groups_rows(d.sa * es, bytes as usize, d.n);
        (aligned && chunks && stream_of_rows && !grouped).then_some((f, d, bytes as usize))
    }
}

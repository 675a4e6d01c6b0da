//! [`TransposePlan`]: `B = alpha * perm(A) + beta * B` decomposed as HPTT does it — fused
//! loops around a macro-kernel over A's and B's stride-1 dimensions, macro-tiles made of
//! in-register SIMD micro-tiles — with HPTT's loop-order and parallelization heuristics, an
//! optional measured tuning within a time budget, and execution on rayon.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::kernel::{self, Isa, Micro, Scalars, Tile};
use super::problem::{Dim, Normalized};
use super::rules::{far_row_prefetch, line_tile_streaming, scatter_regroup};
use super::staged::{Staged, StagedLoop};
use crate::error::{Error, Result};
use crate::tensor::{spans_overlap, DType, Element, Layout, StridedView, StridedViewMut};
use crate::threads::{on_threads, wakes_threads};

/// How a plan is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Tuning {
    /// Heuristics only: the quick path (microseconds).
    #[default]
    Estimate,
    /// Time candidate plans on the real data within `budget` and keep the fastest
    /// ([`TransposePlan::measure`]); A and B end with the values one execution gives.
    Measure {
        /// Time allowed for the search.
        budget: Duration,
    },
}

/// Options of a transposition plan.
///
/// ```
/// use ttgt::transpose::{TransposeOptions, Isa};
/// let o = TransposeOptions { threads: Some(1), isa: Some(Isa::Scalar), ..Default::default() };
/// assert_eq!(o.threads, Some(1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct TransposeOptions {
    /// Threads to use; `None`: the current rayon pool's size (`RAYON_NUM_THREADS`).
    pub threads: Option<usize>,
    /// Heuristic or measured plan choice.
    pub tuning: Tuning,
    /// Force a micro-kernel level (for tests and comparisons); `None`: the best available.
    pub isa: Option<Isa>,
    /// Force the macro-tile edge in elements (a multiple of the micro-tile width).
    pub block: Option<usize>,
    /// Force non-temporal stores on (`Some(true)`) or off; `None`: on for `beta == 0` and
    /// outputs of at least [`STREAM_MIN_BYTES`], tiles that read one cache line per A row as
    /// the host's rule says ([`line_tile_streaming`]; see [`TransposePlan::streams`]).
    pub streaming: Option<bool>,
    /// Force the software prefetch of the next macro-tile's A rows on (`Some(true)`) or off;
    /// `None`: the plan's rule ([`TransposePlan::prefetches`]); `Measure` tuning then tries
    /// both.
    pub prefetch: Option<bool>,
    /// How far ahead the tiles' software prefetch runs, in bytes of A: the prefetch targets
    /// the unit this many bytes of tiles later (at least the next one). `None`:
    /// [`PREFETCH_AHEAD_BYTES`]; `Some(0)`: always the next unit.
    pub prefetch_distance: Option<usize>,
    /// Force the regrouped loop nest of streamed scattered-line tiles, the four-line B-side
    /// blocks of streamed one-line-row tiles and the square macro-tiles of long one-thread
    /// strips, on (`Some(true)`) or off; `None`: the host's rule ([`scatter_regroup`]). See
    /// [`TransposePlan::regroups_lines`].
    pub regroup: Option<bool>,
    /// Smallest tensor, in bytes, whose transposition is split into tasks for several
    /// threads when it is called from outside a pool of that many threads; `None`:
    /// [`PARALLEL_MIN_BYTES`]; `Some(0)`: any tensor (tests use it to run the multi-task
    /// paths on small shapes).
    pub parallel_min_bytes: Option<usize>,
    /// Force staged short tiles ([`TransposePlan::stages`]) off (`Some(false)`); `None` or
    /// `Some(true)`: where they apply.
    pub stage: Option<bool>,
}

/// How far ahead, in bytes of A, the tiles' software prefetch runs by default
/// ([`TransposeOptions::prefetch_distance`]): one unit of a small tile ahead does not hide
/// the memory's latency; tiles of 16 KiB and more still prefetch the next unit (see
/// `docs/TUNING.md`).
pub const PREFETCH_AHEAD_BYTES: usize = 16 << 10;

/// Tensors smaller than this are transposed by the calling thread as one task when it is
/// not a worker of a rayon pool of the plan's thread count: waking the pool's workers then
/// costs more than the copy (see `docs/TUNING.md`, "Host rules and pool wake-ups").
///
/// ```
/// assert_eq!(ttgt::transpose::PARALLEL_MIN_BYTES, 64 << 10);
/// ```
pub const PARALLEL_MIN_BYTES: usize = 64 << 10;

/// The most units ahead the tiles' prefetch runs (tiles of a few elements).
pub const PREFETCH_MAX_UNITS: usize = 64;

/// Outputs at least this large are written with non-temporal stores when `beta == 0`
/// (they would not stay in cache anyway, and streaming skips reading them first).
pub const STREAM_MIN_BYTES: usize = 16 << 20;

/// Fewest A-side rows (B rows written per visit) of a strip that takes square macro-tiles
/// ([`TransposePlan::square_long_strips`]).
const SQUARE_MIN_ROWS: usize = 256;

/// Two cache lines, in bytes: the B-side block of widened and regrouped streamed tiles.
const TWO_LINES: usize = 128;

/// Largest macro-tile (bytes of A, as many of B) for which a regrouped scattered-line tile
/// takes the whole of B's stride-1 dim in one block ([`TransposePlan::regroups_lines`]).
const REGROUP_WHOLE_BYTES: usize = 128 << 10;

/// B-side block of streamed tiles whose A rows are one line (`widen_one_line_tiles`), bytes.
const FOUR_LINES: usize = 256;

/// What a loop of the plan walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    /// A whole dimension outside the macro-kernel.
    Outer,
    /// Macro-tiles along the tile's A-contiguous dimension.
    BlockI,
    /// Macro-tiles along the tile's B-contiguous dimension.
    BlockJ,
    /// Chunks of a contiguous row.
    Chunk,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Loop {
    count: usize,
    sa: isize,
    sb: isize,
    role: Role,
}

/// Seams of one execution ([`kernel::Seam`]): the outer loop along which B's rows follow
/// each other, and the columns of each row's head.
#[derive(Clone, Copy, Debug)]
struct SeamPlan {
    outer: usize,
    head: usize,
}

/// The macro-kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// A and B share their stride-1 dimension: contiguous rows (memcpy-class moves), cut
    /// into chunks of [`TransposePlan::block`] elements.
    Rows {
        /// Elements per row (after fusion).
        n: usize,
    },
    /// A 2-D transpose over A's fastest (`i`) and B's fastest (`j`) dimensions.
    Tile {
        /// A's fastest dimension.
        i: Dim,
        /// B's fastest dimension.
        j: Dim,
        /// Whether SIMD micro-tiles apply (both unit-stride).
        simd: bool,
    },
}

/// A planned transposition. Build once, execute on any data of these layouts.
///
/// ```
/// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
/// use ttgt::tensor::{StridedView, StridedViewMut};
/// let a = ndarray::Array3::<f32>::from_shape_fn((3, 50, 70), |(i, j, k)| (i * 10000 + j * 100 + k) as f32);
/// let mut b = ndarray::Array3::<f32>::zeros((70, 3, 50));
/// let plan = TransposePlan::new(&[2, 0, 1], &Layout::of(&a), &Layout::of(&b), DType::F32,
///                               &TransposeOptions::default()).unwrap();
/// plan.execute(1.0, &StridedView::of(&a), 0.0, &mut StridedViewMut::of(&mut b).unwrap()).unwrap();
/// assert_eq!(b[[69, 2, 49]], a[[2, 49, 69]]);
/// ```
#[derive(Clone, Debug)]
pub struct TransposePlan {
    perm: Vec<usize>,
    a: Layout,
    b: Layout,
    dtype: DType,
    norm: Normalized,
    kernel: KernelKind,
    loops: Vec<Loop>,
    block: usize,
    block_j: usize,
    isa: Isa,
    threads: usize,
    tasks: usize,
    streaming: Option<bool>,
    /// The loop nest used when the execution streams its stores (A-stride order), if it
    /// differs from `loops`.
    stream_loops: Option<Vec<Loop>>,
    /// The B-side block extent of tiles under `stream_loops` (may be wider than `block_j`).
    stream_block_j: usize,
    /// Whether one-line-run tiles stream by default ([`line_tile_streaming`] when planned).
    line_stream: bool,
    /// For short rows: a loop folded into each unit (several rows per kernel call).
    row_batch: Option<Dim>,
    /// Whether `stream_loops` is the regrouped nest of a scattered-line tile.
    regrouped: bool,
    /// SIMD tiles: the forced choice of prefetching the next unit's A rows
    /// ([`TransposePlan::prefetches`]).
    prefetch: Option<bool>,
    /// Bytes of A the prefetch runs ahead ([`TransposeOptions::prefetch_distance`]).
    prefetch_bytes: usize,
    /// Whether tiles with continued far-apart A rows prefetch ([`far_row_prefetch`] when
    /// planned).
    far_prefetch: bool,
    /// Smallest tensor (bytes) split into tasks ([`TransposeOptions::parallel_min_bytes`]).
    parallel_min_bytes: usize,
    /// The staged nest of short tiles whose B rows are not whole lines, for executions that
    /// stream ([`TransposePlan::stages`]).
    staged: Option<Staged>,
}

/// The `ni`×`nj` tile over A's fastest dim `i` and B's fastest dim `j`.
fn tile_of(i: Dim, j: Dim, ni: usize, nj: usize) -> Tile {
    Tile {
        ni,
        nj,
        sai: i.sa,
        saj: j.sa,
        sbi: i.sb,
        sbj: j.sb,
    }
}

/// Whether the B-side block loop is the outermost loop that repeats, with other repeating
/// loops (besides the A-side block loop) inside it.
fn block_loop_outermost(loops: &[Loop]) -> bool {
    let mut big = loops
        .iter()
        .filter(|l| l.count > 1 && l.role != Role::BlockI);
    big.next().is_some_and(|l| l.role == Role::BlockJ) && big.next().is_some()
}

/// Rank of each dim when sorted by increasing |stride| (ties by position).
fn stride_ranks(dims: &[Dim], stride: impl Fn(&Dim) -> isize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..dims.len()).collect();
    order.sort_by_key(|&k| (stride(&dims[k]).unsigned_abs(), k));
    let mut rank = vec![0; dims.len()];
    for (r, &k) in order.iter().enumerate() {
        rank[k] = r;
    }
    rank
}

/// HPTT's loop-order heuristic as a key (smaller = closer to the macro-kernel): a loop is as
/// important as its rank among B's strides, or among A's strides plus a small penalty
/// (`bias`), whichever is closer; B's inner loops are favoured over A's.
fn loop_keys(dims: &[Dim], bias: f64) -> Vec<f64> {
    let ra = stride_ranks(dims, |d| d.sa);
    let rb = stride_ranks(dims, |d| d.sb);
    (0..dims.len())
        .map(|k| (ra[k] as f64 + bias).min(rb[k] as f64))
        .collect()
}

/// Set by tests: staged executions write their tiles straight to B, as they do when the
/// buffer's memory cannot be had.
#[cfg(test)]
pub(crate) static UNSTAGED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether staged executions skip the buffer ([`UNSTAGED`] in tests; never otherwise).
fn unstaged() -> bool {
    #[cfg(test)]
    {
        UNSTAGED.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(test))]
    {
        false
    }
}

/// Raw pointers handed to worker threads.
#[derive(Clone, Copy)]
struct Ptrs<T> {
    a: *const T,
    b: *mut T,
}
// SAFETY: the tasks of one execution write disjoint sets of B elements (they walk disjoint
// ranges of the loop nest, and B never self-overlaps) and only read A, which no task writes.
unsafe impl<T: Send> Send for Ptrs<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Ptrs<T> {}

impl TransposePlan {
    /// Plans `B = alpha * perm(A) + beta * B` by heuristics (`options.tuning` is ignored here;
    /// see [`TransposePlan::measure`]). `perm[i] = j`: axis `i` of B is axis `j` of A.
    pub fn new(
        perm: &[usize],
        a: &Layout,
        b: &Layout,
        dtype: DType,
        options: &TransposeOptions,
    ) -> Result<Self> {
        let norm = Normalized::new(perm, a, b)?;
        if b.may_self_overlap() {
            return Err(Error::Overlap {
                what: "itself (two indices address one element)".into(),
            });
        }
        let threads = crate::threads::resolve(options.threads)?;
        let isa = match options.isa {
            Some(i) if i.is_available() => i,
            Some(i) => {
                return Err(Error::Unsupported(format!(
                    "micro-kernel level {} is not supported by this CPU",
                    i.name()
                )))
            }
            None => Isa::detect(),
        };
        let mut plan = TransposePlan {
            perm: perm.to_vec(),
            a: a.clone(),
            b: b.clone(),
            dtype,
            norm,
            kernel: KernelKind::Rows { n: 1 },
            loops: Vec::new(),
            block: 1,
            block_j: 1,
            stream_block_j: 1,
            prefetch: options.prefetch,
            prefetch_bytes: options.prefetch_distance.unwrap_or(PREFETCH_AHEAD_BYTES),
            far_prefetch: far_row_prefetch(),
            isa,
            threads,
            tasks: 1,
            parallel_min_bytes: options.parallel_min_bytes.unwrap_or(PARALLEL_MIN_BYTES),
            streaming: options.streaming,
            stream_loops: None,
            line_stream: line_tile_streaming(),
            row_batch: None,
            regrouped: false,
            staged: None,
        };
        plan.build(0.5, options.block.map(|b| (b, b)), false);
        if options.block.is_none() && options.regroup.unwrap_or_else(scatter_regroup) {
            plan.regroup_scattered_lines();
            plan.widen_one_line_tiles();
            plan.square_long_strips();
        }
        if options.block.is_none() && options.stage.unwrap_or(true) {
            plan.stage_short_tiles();
        }
        Ok(plan)
    }

    /// Chooses the macro-kernel, the loop order (with A-rank `bias`), the block size and the
    /// parallel split. `swap_blocks` puts the A-side block loop innermost instead of B's.
    fn build(&mut self, bias: f64, block: Option<(usize, usize)>, swap_blocks: bool) {
        let dims = self.norm.dims().to_vec();
        let keys = loop_keys(&dims, bias);
        let w = self.isa.width(self.dtype);
        let di = (0..dims.len()).min_by_key(|&k| (dims[k].sa.unsigned_abs(), k));
        let dj = (0..dims.len()).min_by_key(|&k| (dims[k].sb.unsigned_abs(), k));
        let mut outer: Vec<usize> = (0..dims.len()).collect();
        let mut inner_loops: Vec<Loop> = Vec::new();
        match (di, dj) {
            (Some(i), Some(j)) if i == j && dims[i].sa == 1 && dims[i].sb == 1 => {
                let n = dims[i].n;
                // Chunk long rows so that threads can share them.
                let chunk = (n / (4 * self.threads)).max(1 << 14).min(n.max(1));
                self.kernel = KernelKind::Rows { n };
                self.block = chunk;
                outer.retain(|&k| k != i);
                inner_loops.push(Loop {
                    count: n.div_ceil(chunk),
                    sa: chunk as isize,
                    sb: chunk as isize,
                    role: Role::Chunk,
                });
            }
            (Some(i0), Some(j)) => {
                // A's fastest dim for the tile; when it coincides with B's (non-unit strides),
                // take A's next fastest, or a unit dim for rank 1.
                let i = if i0 != j {
                    Some(i0)
                } else {
                    (0..dims.len())
                        .filter(|&k| k != j)
                        .min_by_key(|&k| (dims[k].sa.unsigned_abs(), k))
                };
                let dj_ = dims[j];
                let di_ = i.map_or(Dim { n: 1, sa: 0, sb: 0 }, |k| dims[k]);
                let simd = di_.sa == 1 && dj_.sb == 1 && di_.n > 1 && self.isa != Isa::Scalar;
                // Macro-tiles are long strips: a whole cache line (at least `w` elements) of
                // B's stride-1 dim by ~16 KiB of A's, so that A is read as a few sequential
                // streams and B written a full line per row. With micro-tile rows shorter
                // than a line (AVX2: 32 bytes), the strip holds several micro-tiles side by
                // side, which write the parts of each line one after the other (streamed
                // half lines cost several times a full line).
                let es = self.dtype.size_bytes();
                let line_w = w * 64usize.div_ceil(w * es).max(1);
                let (b, bjx) = match block {
                    Some((bi, bj)) => (bi.max(1), bj.max(1)),
                    None if simd => (((16384 / es) / w).max(1) * w, line_w),
                    None => (16, 16),
                };
                self.block = b;
                self.block_j = bjx;
                self.kernel = KernelKind::Tile {
                    i: di_,
                    j: dj_,
                    simd,
                };
                outer.retain(|&k| Some(k) != i && k != j);
                let bi = Loop {
                    count: di_.n.div_ceil(b),
                    sa: di_.sa * b as isize,
                    sb: di_.sb * b as isize,
                    role: Role::BlockI,
                };
                let bj = Loop {
                    count: dj_.n.div_ceil(bjx),
                    sa: dj_.sa * bjx as isize,
                    sb: dj_.sb * bjx as isize,
                    role: Role::BlockJ,
                };
                inner_loops = if swap_blocks {
                    vec![bj, bi]
                } else {
                    vec![bi, bj]
                };
            }
            _ => {
                // Rank 0: one element.
                self.kernel = KernelKind::Rows { n: 1 };
                self.block = 1;
            }
        }
        // Outer loops: largest key outermost.
        outer.sort_by(|&x, &y| keys[y].total_cmp(&keys[x]).then(x.cmp(&y)));
        // Short rows: fold the innermost outer loop into each unit to amortize the loop
        // overhead over several rows. When the rows can be streamed, B's order stops
        // mattering (whole aligned lines, written without being read): order by A stride
        // instead, so that the batch and the loops around it read A sequentially.
        // Long rows (8 KiB and more) are folded too where the streamed batch copy reads them
        // in groups ([`kernel::groups_rows`]); batched without groups they ran slower than
        // one per unit (`docs/TUNING.md`, `ROW_GROUPS`).
        self.row_batch = None;
        if let KernelKind::Rows { n } = self.kernel {
            let es = self.dtype.size_bytes();
            if self.streams_rows() {
                outer.sort_by_key(|&k| (std::cmp::Reverse(dims[k].sa.unsigned_abs()), k));
            }
            let grouped = |k: usize| {
                let d = dims[k];
                self.streams_rows() && kernel::groups_rows(d.sa * es as isize, n * es, d.n)
            };
            let fold = outer.last().is_some_and(|&k| n * es < 8192 || grouped(k));
            if fold && n <= self.block {
                self.row_batch = outer.pop().map(|k| dims[k]);
            }
        }
        self.loops = outer
            .iter()
            .map(|&k| Loop {
                count: dims[k].n,
                sa: dims[k].sa,
                sb: dims[k].sb,
                role: Role::Outer,
            })
            .chain(inner_loops)
            .collect();
        self.stream_loops = None;
        self.regrouped = false;
        if self.streams_rows() && !swap_blocks {
            // Streaming SIMD tiles (beta = 0): B is written a full line per row and
            // micro-tile, in any order, without being read; what matters is that A is read in
            // long sequential runs. Keep the A-side block loop innermost and order every other
            // loop (the B-side block loop included) by A stride, smallest innermost, so that
            // the `w` rows of A a strip reads continue through the next loops. Executions
            // that read B (beta != 0) keep the HPTT order above.
            let mut loops = self.loops.clone();
            if let Some(pos) = loops.iter().position(|l| l.role == Role::BlockI) {
                let bi = loops.remove(pos);
                loops.sort_by_key(|l| std::cmp::Reverse(l.sa.unsigned_abs()));
                loops.push(bi);
                self.stream_loops = Some(loops);
            }
        }
        self.stream_block_j = self.block_j;
        if block.is_none() {
            self.widen_streamed_blocks();
        }
        self.tasks = self.task_count(self.loops.iter().map(|l| l.count).product());
    }

    /// Tasks an execution of `units` units splits into: up to eight per thread.
    fn task_count(&self, units: usize) -> usize {
        if self.threads == 1 || self.norm.is_empty() {
            1
        } else {
            units.min(self.threads * 8).max(1)
        }
    }

    /// Widens the B-side blocks of streamed tiles from one line of each B row to two
    /// (f64 and Complex32: 16 A rows, Complex64: 8) when the B-side block loop is the
    /// outermost loop and other loops run inside it. One-line blocks then write B a line
    /// per row and visit, with the row's next line written a whole pass of the inner loops
    /// later; two adjacent lines per visit ran 1.5-2x faster (TTC, 1 thread, every such
    /// case: f64 ttc-10 0.54 -> 0.99 of copy, ttc-41 0.45 -> 0.80; Complex64 ttc-37
    /// 0.41 -> 0.81). Not elsewhere: widened blocks with the block loop in the middle of
    /// the nest (f64 ttc-46/-51/-52) or next to the tile (ttc-37) ran up to 2x slower, and
    /// f32, whose one line is already 16 A rows, ran slower at two lines everywhere.
    /// AVX-512 only: with the AVX2 kernels the rule ran mixed (ttc-56 2.6-2.9x faster,
    /// ttc-42 2x slower).
    fn widen_streamed_blocks(&mut self) {
        let (Some(loops), KernelKind::Tile { j, simd: true, .. }, Isa::Avx512) =
            (self.stream_loops.as_mut(), self.kernel, self.isa)
        else {
            return;
        };
        let w = self.isa.width(self.dtype);
        let wide = (TWO_LINES / self.dtype.size_bytes()).div_ceil(w) * w;
        if wide <= self.block_j || wide > 16 || !block_loop_outermost(loops) {
            return;
        }
        if let Some(l) = loops.iter_mut().find(|l| l.role == Role::BlockJ) {
            *l = Loop {
                count: j.n.div_ceil(wide),
                sa: j.sa * wide as isize,
                sb: j.sb * wide as isize,
                role: Role::BlockJ,
            };
            self.stream_block_j = wide;
        }
    }

    /// Gives a streamed scattered-line tile ([`Self::scatters_lines`]) whose A rows are at
    /// least two cache lines long the regrouped nest: HPTT's loop order (B's inner loops next
    /// to the tile), the B-side block loop just outside the A-side one, and B-side blocks of
    /// the whole stride-1 dim where the macro-tile stays within [`REGROUP_WHOLE_BYTES`], else
    /// of two lines. Each visit then writes every B row of the tile in runs of two lines or
    /// more, and the next visit continues them. Executions that read B keep their nest.
    fn regroup_scattered_lines(&mut self) {
        let KernelKind::Tile { i, j, simd: true } = self.kernel else {
            return;
        };
        let es = self.dtype.size_bytes();
        let ni = i.n.min(self.block);
        if !self.scatters_lines() || ni * es < TWO_LINES {
            return;
        }
        let w = self.isa.width(self.dtype);
        let whole = j.n.div_ceil(w) * w;
        let bj = if ni * whole * es <= REGROUP_WHOLE_BYTES {
            whole
        } else if (j.sa.unsigned_abs() * es).is_multiple_of(kernel::PAGE) {
            // A rows a multiple of a page apart share cache sets: two lines of B rows are
            // twice as many such rows in flight (the 720-permutation set's 256x256 f32
            // tiles, rows 256 KiB apart, ran 0.77-1.01x as fast in two-line blocks).
            return;
        } else {
            (TWO_LINES / es).div_ceil(w) * w
        };
        let mut c = self.clone();
        c.build(0.5, Some((self.block, bj)), true);
        self.stream_loops = Some(c.loops);
        self.stream_block_j = bj;
        self.regrouped = true;
    }

    /// Gives a streamed SIMD tile whose A rows are one cache line (so the regrouped nest does
    /// not apply) and whose B-side dim is at least four lines long B-side blocks of four
    /// lines ([`FOUR_LINES`]), with the streamed loop order rebuilt around them: each visit
    /// then writes four lines of every B row instead of one, and the A rows a strip reads
    /// continue through four micro-tiles. Not where A's J rows are a multiple of a page
    /// apart (the rows share cache sets, as for the regrouped nest). Part of the scattered-
    /// line remedies that [`scatter_regroup`] turns on (see `docs/TUNING.md`).
    fn widen_one_line_tiles(&mut self) {
        let KernelKind::Tile { i, j, simd: true } = self.kernel else {
            return;
        };
        let es = self.dtype.size_bytes();
        let bj = FOUR_LINES / es;
        if self.regrouped
            || !self.streams(true)
            || i.n.min(self.block) * es > 64
            || j.n < bj
            || self.stream_block_j * es > 64
            || (j.sa.unsigned_abs() * es).is_multiple_of(kernel::PAGE)
        {
            return;
        }
        let mut c = self.clone();
        c.build(0.5, Some((self.block, bj)), false);
        self.stream_loops = c.stream_loops;
        self.stream_block_j = bj;
    }

    /// Gives a streamed one-thread SIMD tile whose strips write one line of each of many B rows
    /// per visit, with only the A-side block loop inside the B-side one, square macro-tiles
    /// of four micro-tiles a side (64x64 f32) in HPTT's order (the A-side block loop
    /// innermost): each visit then writes four lines of 64 B rows instead of one line of
    /// thousands. Where: at least [`SQUARE_MIN_ROWS`] A-side rows, a B-side dim of at least
    /// 1 KiB and no longer than the A-side one. Part of the scattered-line remedies that
    /// [`scatter_regroup`] turns on; it gains on one thread only, and not with B rows longer
    /// than A's or short (see `docs/TUNING.md`).
    fn square_long_strips(&mut self) {
        let (Some(loops), KernelKind::Tile { i, j, simd: true }) =
            (&self.stream_loops, self.kernel)
        else {
            return;
        };
        if self.regrouped || self.threads != 1 || !self.streams(true) {
            return;
        }
        let Some(pj) = loops.iter().position(|l| l.role == Role::BlockJ) else {
            return;
        };
        let only_i_inside = loops[pj + 1..]
            .iter()
            .all(|l| l.count == 1 || l.role == Role::BlockI);
        if !only_i_inside
            || loops[pj].count < 2
            || i.n < SQUARE_MIN_ROWS
            || j.n > i.n
            || j.n * self.dtype.size_bytes() < 1024
        {
            return;
        }
        let w = self.isa.width(self.dtype);
        let mut c = self.clone();
        c.build(0.5, Some((4 * w, 4 * w)), true);
        *self = c;
    }

    /// Gives a streamed SIMD tile that is short on both sides and whose B rows are not whole
    /// cache lines a staged nest ([`Staged`]): macro-tiles transposed into a buffer and
    /// copied to B in streamed runs. Its loops over macro-tiles are the plan's own (HPTT's
    /// order), the B-side and A-side loops split around the macro-tile.
    fn stage_short_tiles(&mut self) {
        let KernelKind::Tile { i, j, simd: true } = self.kernel else {
            return;
        };
        let es = self.dtype.size_bytes();
        let whole_lines = (i.sb.unsigned_abs() * es).is_multiple_of(64);
        if whole_lines || !self.stream_choice() || kernel::stream_copy(self.isa).is_none() {
            return;
        }
        let outer: Vec<StagedLoop> = self
            .loops
            .iter()
            .filter(|l| l.role == Role::Outer)
            .map(|l| StagedLoop {
                count: l.count,
                sa: l.sa,
                sb: l.sb,
            })
            .collect();
        self.staged = Staged::plan(i, j, &outer, es);
        if let Some(st) = &self.staged {
            self.tasks = self.task_count(st.units());
        }
    }

    /// Whether an execution with `beta == 0` runs staged short tiles: macro-tiles transposed
    /// into a thread-local buffer and copied to B in streamed runs of several rows.
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// use ttgt::transpose::Isa;
    /// // 15^6 f64, B's fastest dim A's slowest and B's next dims A's 1-3: tiles of 15 x 15
    /// // whose B rows are 120 bytes long
    /// let a = Layout::row_major(&[15; 6]).unwrap();
    /// let perm = [5, 4, 1, 2, 3, 0];
    /// let p = TransposePlan::new(&perm, &a, &a, DType::F64, &TransposeOptions::default()).unwrap();
    /// assert_eq!(p.stages(), Isa::detect() != Isa::Scalar);
    /// let off = TransposeOptions { stage: Some(false), ..Default::default() };
    /// let q = TransposePlan::new(&perm, &a, &a, DType::F64, &off).unwrap();
    /// assert!(!q.stages());
    /// ```
    pub fn stages(&self) -> bool {
        self.staged.is_some() && self.streams(true)
    }

    /// Whether streamed executions run the regrouped nest of a scattered-line tile
    /// ([`TransposeOptions::regroup`], [`scatter_regroup`]).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// // ttc-40 (f32, 48x28x28x28x48, reversed): 48x48 tiles, blocks of the whole row
    /// let a = Layout::row_major(&[48, 28, 28, 28, 48]).unwrap();
    /// let opts = TransposeOptions { regroup: Some(true), ..Default::default() };
    /// let p = TransposePlan::new(&[4, 3, 2, 1, 0], &a, &a, DType::F32, &opts).unwrap();
    /// if p.regroups_lines() {
    ///     assert_eq!(p.blocks().1, 48);
    ///     assert!(!p.scatters_lines());
    /// }
    /// ```
    pub fn regroups_lines(&self) -> bool {
        self.regrouped && self.streams(true)
    }

    /// Whether a streamed execution writes B one line per row and visit with the B-side block
    /// loop outermost and other loops inside it: the pattern that two-line blocks
    /// ([`Self::widen_streamed_blocks`]) avoid where they can (the cost model prices it as a
    /// class of its own).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// let a = Layout::row_major(&[48, 28, 28]).unwrap();
    /// let b = Layout::row_major(&[28, 28, 48]).unwrap();
    /// // Without streaming stores there are no scattered lines (with them, on a SIMD level,
    /// // this full reversal has them: its B-side block loop is outermost).
    /// let opts = TransposeOptions { streaming: Some(false), ..Default::default() };
    /// let p = TransposePlan::new(&[2, 1, 0], &a, &b, DType::F32, &opts).unwrap();
    /// assert!(!p.scatters_lines());
    /// ```
    pub fn scatters_lines(&self) -> bool {
        let (Some(loops), KernelKind::Tile { simd: true, .. }) = (&self.stream_loops, self.kernel)
        else {
            return false;
        };
        block_loop_outermost(loops)
            && self.stream_block_j * self.dtype.size_bytes() <= 64
            && self.streams(true)
    }

    /// Whether streaming stores can apply to every micro-tile row: a SIMD tile whose B rows
    /// are a multiple of the vector size apart, on an output large enough to stream.
    fn streams_rows(&self) -> bool {
        let big = || self.stream_choice();
        match self.kernel {
            KernelKind::Rows { n } if self.isa != Isa::Scalar => {
                let align = kernel::stream_block(self.isa);
                (n * self.dtype.size_bytes()).is_multiple_of(align) && big()
            }
            KernelKind::Tile { i, simd: true, .. } => {
                let align = kernel::stream_block(self.isa);
                let row_bytes = i.sb.unsigned_abs() * self.dtype.size_bytes();
                row_bytes.is_multiple_of(align) && big()
            }
            _ => false,
        }
    }

    /// Whether an execution uses non-temporal stores: only when B is overwritten
    /// (`beta == 0`), is larger than [`STREAM_MIN_BYTES`] (or as forced by
    /// [`TransposeOptions::streaming`]), and the kernel is a SIMD tile or a row copy; tiles
    /// whose A rows are a single cache line long stream as the host's rule said when the plan
    /// was made ([`line_tile_streaming`]).
    pub fn streams(&self, beta_zero: bool) -> bool {
        let simd = matches!(
            self.kernel,
            KernelKind::Tile { simd: true, .. } | KernelKind::Rows { .. }
        ) && self.isa != Isa::Scalar;
        simd && beta_zero && self.stream_choice()
    }

    /// Whether a row copy's batches are rows that follow one another in B (`sb == n`), at
    /// least one store block long but shorter than [`kernel::STREAM_ROW_MIN_BYTES`]: a
    /// streamed execution writes each such batch whose rows are not whole blocks (e.g. 24
    /// f32, 96 bytes, in a ccsd(t) write-back) as one range, every whole line composed
    /// from the rows it covers (`kernel::stream_joined_rows`), where a row at a time could
    /// only copy these rows with ordinary stores, which read every line first. Batches of
    /// whole-block rows take the same path when B is not block-aligned.
    fn joined_rows(&self) -> bool {
        let KernelKind::Rows { n } = self.kernel else {
            return false;
        };
        let bytes = n * self.dtype.size_bytes();
        let line = kernel::stream_block(self.isa);
        // the joined copy composes lines from whole dwords: rows of 2-byte elements qualify
        // when they are whole dwords (and B starts on one: checked when it runs)
        line > 0
            && bytes >= line
            && bytes.is_multiple_of(4)
            && bytes < kernel::STREAM_ROW_MIN_BYTES
            && self
                .row_batch
                .is_some_and(|d| d.sb == n as isize && d.n > 1)
    }

    /// Whether an execution with `beta == 0` writes B with non-temporal stores
    /// ([`Self::streams`]) for all but a few partial lines: a row copy streams only rows of
    /// whole lines, rows of at least 1 KiB, and batches of rows that follow one another in
    /// B ([`Self::joined_rows`]); other rows that are not whole lines (24 f32, 96 bytes,
    /// with gaps between them in B) are copied with ordinary stores, which read each line
    /// first.
    pub(crate) fn stores_stream(&self) -> bool {
        match self.kernel {
            KernelKind::Rows { n } => {
                self.streams(true)
                    && (self.streams_rows()
                        || self.joined_rows()
                        || n * self.dtype.size_bytes() >= kernel::STREAM_ROW_MIN_BYTES)
            }
            _ => self.streams(true),
        }
    }

    /// The forced store choice ([`TransposeOptions::streaming`]), else the default one.
    fn stream_choice(&self) -> bool {
        self.streaming.unwrap_or_else(|| self.streams_by_default())
    }

    /// The default store choice for `beta == 0`: stream outputs of at least
    /// [`STREAM_MIN_BYTES`]; tiles whose A-side run is a single cache line (e.g. 16 f32) as
    /// the host's rule says ([`line_tile_streaming`]), except that those whose B rows are
    /// adjacent (one contiguous write per unit) and A rows at least 256 KiB apart always
    /// stream: they streamed faster on every machine measured, as longer A runs do (see
    /// `docs/TUNING.md`).
    fn streams_by_default(&self) -> bool {
        let es = self.dtype.size_bytes();
        let big = self.norm.elements() * es >= STREAM_MIN_BYTES;
        // one-line-run tiles that the host's rule decides (not those that always stream)
        let plain = self.one_line_tile() == Some(false) && !self.line_stream;
        big && !plain
    }

    /// For a tile whose A rows are at most one cache line long (a one-line-run tile, e.g. 16
    /// f32): whether it streams under every store rule, i.e. its B rows are adjacent (one
    /// contiguous write per unit) and its A rows at least 256 KiB apart
    /// ([`Self::streams_by_default`]). `None` for every other kernel.
    pub(crate) fn one_line_tile(&self) -> Option<bool> {
        let es = self.dtype.size_bytes();
        match self.kernel {
            KernelKind::Tile { i, j, .. } if i.n * es <= 64 => {
                let adjacent_b = i.sb.unsigned_abs() * es == 64;
                let far_a = j.sa.unsigned_abs() * es >= 256 << 10;
                Some(adjacent_b && far_a)
            }
            _ => None,
        }
    }

    /// Whether a SIMD tile plan's execution prefetches (into L2, in software) the A rows of
    /// the next unit while it runs a unit, under the loop nest it runs with `beta == 0`.
    ///
    /// The rule: yes, except where the next unit continues the same A rows (the innermost
    /// repeating loop steps along them by one macro-tile) and those rows are at least a page
    /// apart. There every row of a micro-tile is a stream of its own that the hardware
    /// prefetchers follow, and the extra prefetches cost a little. Where the tile's rows are
    /// close together (one or two sequential streams: ttc-22's 96x96 f32 tiles that follow
    /// each other in A) the prefetch keeps more reads in flight. The exception is a host
    /// rule ([`far_row_prefetch`], measured by `ttgt calibrate`; with the prefetch
    /// [`PREFETCH_AHEAD_BYTES`] ahead, some machines run those tiles faster prefetched too;
    /// see `docs/TUNING.md`).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{KernelKind, TransposePlan, TransposeOptions}};
    /// // ttc-22: 96x96 tiles, each contiguous in A and following the last
    /// let a = Layout::row_major(&[75, 75, 96, 96]).unwrap();
    /// let b = Layout::row_major(&[75, 75, 96, 96]).unwrap();
    /// let p = TransposePlan::new(&[1, 0, 3, 2], &a, &b, DType::F32,
    ///                            &TransposeOptions::default()).unwrap();
    /// let simd = matches!(p.kernel(), KernelKind::Tile { simd: true, .. });
    /// assert_eq!(p.prefetches(), simd);
    /// let off = TransposeOptions { prefetch: Some(false), ..Default::default() };
    /// let p = TransposePlan::new(&[1, 0, 3, 2], &a, &b, DType::F32, &off).unwrap();
    /// assert!(!p.prefetches());
    /// ```
    pub fn prefetches(&self) -> bool {
        self.prefetches_in(self.nest(self.streams(true)).0)
    }

    /// [`Self::prefetches`] under the loop nest `loops`.
    fn prefetches_in(&self, loops: &[Loop]) -> bool {
        let KernelKind::Tile { simd: true, .. } = self.kernel else {
            return false;
        };
        if let Some(forced) = self.prefetch {
            return forced;
        }
        self.far_prefetch || !self.continues_far_rows(loops)
    }

    /// Whether, under `loops`, the innermost repeating loop continues the tile's A rows (steps
    /// along them by one macro-tile) and those rows are at least a page apart: the exception
    /// of the prefetch rule that [`far_row_prefetch`] decides.
    fn continues_far_rows(&self, loops: &[Loop]) -> bool {
        let KernelKind::Tile { i, j, .. } = self.kernel else {
            return false;
        };
        let ni = i.n.min(self.block) as isize;
        let continues = loops
            .iter()
            .rev()
            .find(|l| l.count > 1)
            .is_some_and(|l| l.sa == ni * i.sa);
        continues && j.sa.unsigned_abs() * self.dtype.size_bytes() >= kernel::PAGE
    }

    /// Whether this plan's SIMD tiles fall under the far-row exception of the prefetch rule
    /// ([`far_row_prefetch`]) in its `beta == 0` loop nest, whatever the host rule says: the
    /// plans that `ttgt calibrate`'s probe of that rule compares.
    pub(crate) fn far_rows_continue(&self) -> bool {
        matches!(self.kernel, KernelKind::Tile { simd: true, .. })
            && self.continues_far_rows(self.nest(self.streams(true)).0)
    }

    /// How many units (macro-tiles) ahead the tiles' software prefetch runs under the loop
    /// nest of a `beta == 0` execution, or `None` when the plan does not prefetch
    /// ([`Self::prefetches`]).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// // 16^6 f32 with B's fastest dim A's dim 3: 16x16 tiles of 1 KiB of A
    /// let a = Layout::row_major(&[16; 6]).unwrap();
    /// let p = TransposePlan::new(&[0, 1, 2, 5, 4, 3], &a, &a, DType::F32,
    ///     &TransposeOptions::default()).unwrap();
    /// if p.prefetches() {
    ///     assert_eq!(p.prefetch_ahead(), Some(16)); // 16 KiB of A ahead
    /// }
    /// let near = TransposeOptions { prefetch_distance: Some(0), ..Default::default() };
    /// let p = TransposePlan::new(&[0, 1, 2, 5, 4, 3], &a, &a, DType::F32, &near).unwrap();
    /// assert!(p.prefetch_ahead().is_none_or(|k| k == 1));
    /// ```
    pub fn prefetch_ahead(&self) -> Option<usize> {
        let (loops, bj) = self.nest(self.streams(true));
        self.prefetches_in(loops).then(|| self.prefetch_units(bj))
    }

    /// How many units ahead the tiles' prefetch runs with B-side blocks of `bj` columns: the
    /// fewest whose A bytes reach the prefetch distance ([`PREFETCH_AHEAD_BYTES`]), at least
    /// one and at most [`PREFETCH_MAX_UNITS`].
    fn prefetch_units(&self, bj: usize) -> usize {
        let KernelKind::Tile { i, j, .. } = self.kernel else {
            return 1;
        };
        let unit = i.n.min(self.block) * j.n.min(bj) * self.dtype.size_bytes();
        self.prefetch_bytes
            .div_ceil(unit.max(1))
            .clamp(1, PREFETCH_MAX_UNITS)
    }

    /// The macro-kernel chosen.
    pub fn kernel(&self) -> KernelKind {
        self.kernel
    }

    /// Micro-kernel level.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Threads the plan runs on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Macro-tile edge (tiles) or chunk length (rows), in elements.
    pub fn block(&self) -> usize {
        self.block
    }

    /// Macro-tile extents `(along A's stride-1 dim, along B's)` for tiles, as an execution
    /// with `beta == 0` uses them (streamed tiles may be wider along B); `(chunk, 1)` for
    /// rows.
    pub fn blocks(&self) -> (usize, usize) {
        (self.block, self.nest(self.streams(true)).1)
    }

    /// The loop nest and B-side block extent of an execution that streams its stores or not.
    fn nest(&self, stream: bool) -> (&[Loop], usize) {
        match (&self.stream_loops, stream) {
            (Some(l), true) => (l, self.stream_block_j),
            _ => (&self.loops, self.block_j),
        }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The normalized (fused) problem.
    pub fn normalized(&self) -> &Normalized {
        &self.norm
    }

    /// Bytes read plus bytes written by one execution (`beta != 0` reads B too).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// let l = Layout::row_major(&[10, 10]).unwrap();
    /// let p = TransposePlan::new(&[1, 0], &l, &l, DType::F64, &TransposeOptions::default()).unwrap();
    /// assert_eq!(p.bytes_moved(false), 1600);
    /// assert_eq!(p.bytes_moved(true), 2400);
    /// ```
    pub fn bytes_moved(&self, beta_nonzero: bool) -> usize {
        self.norm.elements() * self.dtype.size_bytes() * if beta_nonzero { 3 } else { 2 }
    }

    /// A one-line description (kernel, loop order, block, threads).
    pub fn describe(&self) -> String {
        let kernel = match self.kernel {
            KernelKind::Rows { n } => match self.row_batch {
                Some(d) => format!("rows of {n}, {} per unit", d.n),
                None => format!("rows of {n}"),
            },
            KernelKind::Tile { i, j, simd } => format!(
                "tile {}x{} ({}, block {}x{})",
                i.n,
                j.n,
                if simd { self.isa.name() } else { "scalar" },
                self.block,
                self.block_j
            ),
        };
        let kernel = if self.stream_block_j != self.block_j && self.streams(true) {
            format!(
                "{kernel}, streamed block {}x{}",
                self.block, self.stream_block_j
            )
        } else {
            kernel
        };
        let show = |ls: &[Loop]| {
            ls.iter()
                .map(|l| match l.role {
                    Role::Outer => format!("{}", l.count),
                    Role::BlockI => format!("I{}", l.count),
                    Role::BlockJ => format!("J{}", l.count),
                    Role::Chunk => format!("R{}", l.count),
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let streaming = match (&self.stream_loops, self.streams(true)) {
            (Some(l), true) => format!(", streaming stores when beta = 0 with loops [{}]", show(l)),
            (None, true) => ", streaming stores when beta = 0".to_string(),
            _ => String::new(),
        };
        let streaming = match (&self.staged, self.streams(true)) {
            (Some(st), true) => format!(
                ", staged when beta = 0: {}x{} tiles a macro-tile, streamed runs of {} bytes, loops [{}]",
                st.ka.count,
                st.kb.count,
                match self.kernel {
                    KernelKind::Tile { j, .. } => st.run_bytes(j, self.dtype.size_bytes()),
                    _ => 0,
                },
                st.outer
                    .iter()
                    .map(|l| l.count.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            _ => streaming,
        };
        let prefetch = match self.prefetch_ahead() {
            Some(k) => format!(", prefetch {k} unit(s) ahead"),
            None => String::new(),
        };
        format!(
            "{kernel}{streaming}{prefetch}; loops [{}]; {} thread(s), {} task(s)",
            show(&self.loops),
            self.threads,
            self.tasks
        )
    }

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

    /// Runs `units` units of the loop nest as `run(start, end)` ranges: one range on the
    /// calling thread, or the plan's tasks (equal ranges) on its threads.
    fn run_tasks(&self, units: usize, run: impl Fn(usize, usize) + Sync) {
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
    fn run_inline(&self) -> bool {
        self.small_for_threads() && wakes_threads(self.threads)
    }

    /// Whether the tensor is under [`TransposeOptions::parallel_min_bytes`]: a caller outside
    /// a pool of the plan's size runs it as one task on its own thread.
    pub(crate) fn small_for_threads(&self) -> bool {
        let bytes = self.norm.elements() * self.dtype.size_bytes();
        bytes < self.parallel_min_bytes
    }

    fn check<T: Element>(&self, a: &StridedView<'_, T>, b: &StridedViewMut<'_, T>) -> Result<()> {
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
    fn seam_plan(
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
    fn row_seam_plan(&self, loops: &[Loop], n: usize, mis: usize) -> Option<SeamPlan> {
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
    fn unit_sets<T: Element>(
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
    unsafe fn run_range<T: Element>(
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

    /// Plans by measurement: times candidate plans (loop orders, block sizes, block-loop
    /// order, store kind, the tiles' prefetch) on the real operands within `options.tuning`'s budget and keeps the fastest.
    /// Each candidate performs the real operation; with `beta != 0`, B is saved first and
    /// restored before each run, so B ends as after exactly one execution. Falls back to the
    /// heuristic plan when the budget is zero or memory for the copy of B is short.
    pub fn measure<T: Element>(
        perm: &[usize],
        alpha: T,
        a: &StridedView<'_, T>,
        beta: T,
        b: &mut StridedViewMut<'_, T>,
        options: &TransposeOptions,
    ) -> Result<Self> {
        let base = TransposePlan::new(perm, a.layout(), b.layout(), T::DTYPE, options)?;
        let budget = match options.tuning {
            Tuning::Measure { budget } => budget,
            Tuning::Estimate => Duration::ZERO,
        };
        let w = base.isa.width(T::DTYPE);
        // With beta = 0 and the store kind not forced, every variant also runs with the other
        // kind of stores (which one wins depends on the access pattern and, on a shared host,
        // on the memory traffic of the moment).
        let mut kinds = vec![options.streaming];
        if beta.is_exact_zero() && options.streaming.is_none() {
            kinds.push(Some(!base.streams(true)));
        }
        let mut candidates = vec![base.clone()];
        for bias in [0.5, -0.5, 1.5, 100.0] {
            for swap in [false, true] {
                for blk in [
                    None,
                    Some((4 * w, 4 * w)),
                    Some((256 * w, 2 * w)),
                    Some((64 * w, w)),
                ] {
                    for &kind in &kinds {
                        let mut c = base.clone();
                        c.streaming = kind;
                        c.build(bias, options.block.map(|b| (b, b)).or(blk), swap);
                        if !candidates.iter().any(|x| {
                            x.loops == c.loops
                                && x.stream_loops == c.stream_loops
                                && (x.block, x.block_j, x.stream_block_j)
                                    == (c.block, c.block_j, c.stream_block_j)
                                && x.streams(true) == c.streams(true)
                        }) {
                            candidates.push(c);
                        }
                    }
                }
            }
        }
        // With the prefetch not forced, SIMD tile variants also run with the rule's other
        // choice ([`Self::prefetches`]); the base plan's comes second, the others at the end.
        if options.prefetch.is_none() {
            let flipped: Vec<TransposePlan> = candidates
                .iter()
                .filter(|c| matches!(c.kernel, KernelKind::Tile { simd: true, .. }))
                .map(|c| {
                    let mut f = c.clone();
                    f.prefetch = Some(!c.prefetches());
                    f
                })
                .collect();
            let mut rest = flipped.into_iter();
            if let Some(first) = rest.next() {
                candidates.insert(1, first);
            }
            candidates.extend(rest);
        }
        // Save B when runs depend on its old value.
        let dense = Layout::row_major(b.layout().dims())?;
        let saved: Option<Vec<T>> = if beta.is_exact_zero() {
            None
        } else {
            let Ok(mut v) = crate::tensor::zeroed::<T>(dense.len(), "a copy of B") else {
                return Ok(base);
            };
            let mut dst = StridedViewMut::from_slice(&mut v, dense.clone(), 0)?;
            super::scale_copy(T::one(), &b.as_view(), T::zero(), &mut dst)?;
            Some(v)
        };
        let restore = |b: &mut StridedViewMut<'_, T>| -> Result<()> {
            if let Some(v) = &saved {
                let src = StridedView::from_slice(v, dense.clone(), 0)?;
                super::scale_copy(T::one(), &src, T::zero(), b)?;
            }
            Ok(())
        };
        let start = Instant::now();
        let mut best: Option<(f64, usize)> = None;
        for (k, c) in candidates.iter().enumerate() {
            if k > 0 && start.elapsed() >= budget {
                break;
            }
            restore(b)?;
            let t = Instant::now();
            c.execute(alpha, a, beta, b)?;
            let secs = t.elapsed().as_secs_f64();
            if best.is_none_or(|(s, _)| secs < s) {
                best = Some((secs, k));
            }
        }
        let pick = best.map_or(0, |(_, k)| k);
        if saved.is_some() {
            // Leave B as after exactly one execution of the chosen plan.
            restore(b)?;
            candidates[pick].execute(alpha, a, beta, b)?;
        }
        Ok(candidates.swap_remove(pick))
    }

    /// The permutation.
    pub fn perm(&self) -> &[usize] {
        &self.perm
    }

    /// A's layout.
    pub fn a_layout(&self) -> &Layout {
        &self.a
    }

    /// B's layout.
    pub fn b_layout(&self) -> &Layout {
        &self.b
    }
}

#[cfg(test)]
mod tests {
    //! The loop walker (`run_range`) and the kernels it calls, on every loop-nest shape the
    //! planner builds, against a per-element loop over raw buffers. Small enough to run
    //! under Miri (`.ci/miri.sh`), where only the scalar kernels run.

    use super::*;
    use num_complex::Complex32;

    /// How a tensor is stored: axes outermost first in `order` (row-major when it does not
    /// name every axis), innermost stride `step`, `pad` elements of padding after each axis,
    /// the axes of `rev` (those the tensor has) reversed.
    struct Store<'a> {
        order: &'a [usize],
        step: isize,
        pad: usize,
        rev: &'a [usize],
    }

    const DENSE: Store<'static> = Store {
        order: &[],
        step: 1,
        pad: 0,
        rev: &[],
    };

    /// The layout of `dims` stored as `s`, the backing length and the offset of element 0.
    fn layout(dims: &[usize], s: &Store<'_>) -> (Layout, usize, usize) {
        let order: Vec<usize> = if s.order.len() != dims.len() {
            (0..dims.len()).collect()
        } else {
            s.order.to_vec()
        };
        let mut strides = vec![0isize; dims.len()];
        let mut next = s.step;
        for &ax in order.iter().rev() {
            strides[ax] = next;
            next *= (dims[ax] + s.pad) as isize;
        }
        let mut off = 0;
        for &ax in s.rev.iter().filter(|&&ax| ax < dims.len()) {
            off += dims[ax].saturating_sub(1) * strides[ax] as usize;
            strides[ax] = -strides[ax];
        }
        let l = Layout::new(dims.to_vec(), strides).unwrap();
        (l, next as usize + 1, off)
    }

    /// Offsets of every index of `dims` (last axis fastest) under `strides`.
    fn offsets(dims: &[usize], strides: &[isize]) -> Vec<isize> {
        let mut out = vec![0isize];
        for (&d, &s) in dims.iter().zip(strides) {
            out = out
                .iter()
                .flat_map(|&o| (0..d as isize).map(move |i| o + i * s))
                .collect();
        }
        out
    }

    #[allow(clippy::too_many_arguments)] // the case: shapes, storage, scalars and options
    fn check<T: Element>(
        dims: &[usize],
        perm: &[usize],
        sa: &Store<'_>,
        sb: &Store<'_>,
        alpha: f64,
        beta: f64,
        threads: usize,
        block: Option<usize>,
    ) {
        let bdims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let (la, na, oa) = layout(dims, sa);
        let (lb, nb, ob) = layout(&bdims, sb);
        let a: Vec<T> = (0..na)
            .map(|x| T::from_parts(x as f64 * 0.25 - 3.0, (x % 7) as f64))
            .collect();
        let b0: Vec<T> = (0..nb)
            .map(|x| T::from_parts(1.0 + x as f64, -2.0))
            .collect();
        // want[b offset] = alpha * A[perm index] + beta * B; elements outside B's view stay.
        let (al, be) = (T::from_f64(alpha), T::from_f64(beta));
        let mut want = b0.clone();
        // (slices, not vectors, indexed in the loop: under Miri each `Vec` index retags the
        // whole vector, which makes long loops quadratic)
        let (w, a_s, b_s) = (want.as_mut_slice(), a.as_slice(), b0.as_slice());
        let a_strides: Vec<isize> = perm.iter().map(|&p| la.strides()[p]).collect();
        let from = offsets(&bdims, &a_strides);
        for (&o, &f) in offsets(&bdims, lb.strides()).iter().zip(&from) {
            let (i, j) = ((ob as isize + o) as usize, (oa as isize + f) as usize);
            w[i] = if beta == 0.0 {
                al * a_s[j]
            } else {
                al * a_s[j] + be * b_s[i]
            };
        }
        let tol = if matches!(T::DTYPE, DType::F32 | DType::C32) {
            1e-5
        } else {
            1e-12
        };
        for isa in Isa::available() {
            let streams: &[Option<bool>] = if isa == Isa::Scalar {
                &[None]
            } else {
                &[Some(false), Some(true)]
            };
            for &streaming in streams {
                let opts = TransposeOptions {
                    threads: Some(threads),
                    parallel_min_bytes: Some(0),
                    isa: Some(isa),
                    block,
                    streaming,
                    ..Default::default()
                };
                let plan = TransposePlan::new(perm, &la, &lb, T::DTYPE, &opts).unwrap();
                let mut got = b0.clone();
                let av = StridedView::from_slice(&a, la.clone(), oa).unwrap();
                let mut bv = StridedViewMut::from_slice(&mut got, lb.clone(), ob).unwrap();
                plan.execute(al, &av, be, &mut bv).unwrap();
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (*g - *w).abs_f64() <= tol * (1.0 + w.abs_f64()),
                        "{:?} {dims:?} perm {perm:?} {isa:?} {streaming:?} threads {threads} \
                         block {block:?}: element {k} is {g}, want {w} ({})",
                        T::DTYPE,
                        plan.describe()
                    );
                }
            }
        }
    }

    /// Tiles (unit and non-unit strides, clipped edge blocks), rows (batched, and chunked
    /// across threads), rank 0, empty tensors, size-1 axes, padded and reversed axes, every
    /// scaling mode, one to three threads.
    #[test]
    fn walker_matches_element_loops() {
        let padded = Store {
            order: &[],
            step: 1,
            pad: 1,
            rev: &[0],
        };
        let strided = Store {
            order: &[2, 0, 1],
            step: 2,
            pad: 0,
            rev: &[1],
        };
        // Rows long enough to be cut into chunks (16384 elements) for two threads.
        let long = [if cfg!(miri) {
            16384 + 37
        } else {
            3 * 16384 + 5
        }];
        // (element type: 0 f64, 1 f32, 2 Complex32; extents; perm; A and B storage; threads;
        // forced block)
        type Case<'a> = (
            u8,
            &'a [usize],
            &'a [usize],
            &'a Store<'a>,
            &'a Store<'a>,
            usize,
        );
        let cases: [(Case<'_>, Option<usize>); 11] = [
            ((0, &[7, 5], &[1, 0], &DENSE, &DENSE, 1), None),
            ((0, &[9, 11], &[1, 0], &padded, &DENSE, 2), Some(4)),
            ((1, &[6, 3, 4], &[2, 0, 1], &strided, &padded, 2), None),
            ((1, &[3, 4, 5], &[1, 0, 2], &DENSE, &padded, 2), None),
            ((0, &[4, 3, 5], &[1, 0, 2], &padded, &strided, 2), None),
            ((1, &long, &[0], &DENSE, &DENSE, 2), None),
            ((2, &[9], &[0], &strided, &padded, 1), None),
            ((0, &[], &[], &DENSE, &DENSE, 1), None),
            ((0, &[3, 0, 2], &[2, 1, 0], &DENSE, &DENSE, 2), None),
            ((0, &[1, 6, 1, 5], &[3, 2, 0, 1], &padded, &DENSE, 2), None),
            (
                (2, &[5, 2, 3, 4], &[3, 1, 0, 2], &DENSE, &padded, 3),
                Some(2),
            ),
        ];
        let scalars = [(1.0, 0.0), (-2.0, 0.0), (0.5, 1.5)];
        for (k, ((ty, dims, perm, sa, sb, threads), block)) in cases.into_iter().enumerate() {
            // under Miri (`.ci/miri.sh`) each case runs with one of the scalar pairs in turn
            let pairs = if cfg!(miri) {
                &scalars[k % 3..k % 3 + 1]
            } else {
                &scalars[..]
            };
            for &(al, be) in pairs {
                match ty {
                    0 => check::<f64>(dims, perm, sa, sb, al, be, threads, block),
                    1 => check::<f32>(dims, perm, sa, sb, al, be, threads, block),
                    _ => check::<Complex32>(dims, perm, sa, sb, al, be, threads, block),
                }
            }
        }
    }

    /// Values for a row-major f64 A of extents `dims`, A's layout and that of a row-major B
    /// of A's extents permuted by `perm`.
    fn f64_operands(dims: &[usize], perm: &[usize]) -> (Vec<f64>, Layout, Layout) {
        let n: usize = dims.iter().product();
        let a = (0..n).map(|x| (x * 13 % 1013) as f64 - 400.0).collect();
        let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        (
            a,
            Layout::row_major(dims).unwrap(),
            Layout::row_major(&bd).unwrap(),
        )
    }

    /// Runs `plan` (an f64 transpose of row-major `dims` by `perm`) with `alpha` and
    /// `beta = 0` into a row-major B that starts `off` elements past a cache line, inside a
    /// NaN-filled buffer, and checks every element against the plain index map and that
    /// nothing outside B was written.
    fn run_into_offset_b(
        plan: &TransposePlan,
        a: &[f64],
        dims: &[usize],
        perm: &[usize],
        alpha: f64,
        off: usize,
    ) {
        let n = a.len();
        let la = Layout::row_major(dims).unwrap();
        let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let lb = Layout::row_major(&bd).unwrap();
        let mut back = vec![f64::NAN; n + 16];
        let first = (64 - back.as_ptr() as usize % 64) % 64 / 8 + off;
        {
            let av = StridedView::from_slice(a, la.clone(), 0).unwrap();
            let mut bv = StridedViewMut::from_slice(&mut back[first..first + n], lb, 0).unwrap();
            plan.execute(alpha, &av, 0.0, &mut bv).unwrap();
        }
        let sa = la.strides();
        for (lin, got) in back[first..first + n].iter().enumerate() {
            let (mut rem, mut src) = (lin, 0isize);
            for k in (0..bd.len()).rev() {
                src += (rem % bd[k]) as isize * sa[perm[k]];
                rem /= bd[k];
            }
            assert_eq!(
                *got,
                alpha * a[src as usize],
                "{dims:?} {perm:?} element {lin}"
            );
        }
        assert!(back[..first]
            .iter()
            .chain(&back[first + n..])
            .all(|x| x.is_nan()));
    }

    /// Streamed tiles whose B-side block loop is outermost take blocks of two lines of B
    /// (16 f64 rows of A) instead of one, and stay exact at every B offset; where the block
    /// loop is next to the tile, or stores are not streamed, the block stays one line.
    #[test]
    fn streamed_blocks_widen_when_their_loop_is_outermost() {
        let cases: [(&[usize], &[usize], bool); 3] = [
            (&[32, 5, 70], &[2, 1, 0], true),
            (&[32, 5, 3, 24], &[3, 2, 1, 0], true),
            (&[5, 70, 32], &[0, 2, 1], false),
        ];
        for isa in Isa::available() {
            if isa == Isa::Scalar || cfg!(miri) {
                continue;
            }
            let line = 64usize.div_ceil(isa.width(DType::F64) * 8) * isa.width(DType::F64);
            for (dims, perm, widens) in cases {
                let (a, la, lb) = f64_operands(dims, perm);
                for streaming in [Some(true), Some(false)] {
                    let opts = TransposeOptions {
                        isa: Some(isa),
                        streaming,
                        threads: Some(1),
                        regroup: Some(false),
                        ..Default::default()
                    };
                    let plan = TransposePlan::new(perm, &la, &lb, DType::F64, &opts).unwrap();
                    let want = if widens && streaming == Some(true) && isa == Isa::Avx512 {
                        16
                    } else {
                        line
                    };
                    assert_eq!(plan.blocks().1, want, "{dims:?} {isa:?} {streaming:?}");
                    for off in [0, 2, 5] {
                        run_into_offset_b(&plan, &a, dims, perm, 1.0, off);
                    }
                }
            }
        }
    }

    /// Units that are one whole micro-tile (sides of the micro-tile's width, or cut into
    /// blocks of it) go from the odometer straight to the micro-kernel: every element is
    /// right for each dtype, level, store kind, scalars and thread count, with the streamed
    /// micro-kernel into a line-aligned B and the ordinary one past it, and the path is
    /// taken.
    #[test]
    fn whole_micro_tile_units() {
        fn cases<T: Element>() {
            for isa in Isa::available() {
                if isa == Isa::Scalar || cfg!(miri) {
                    continue;
                }
                let w = isa.width(T::DTYPE);
                // (extents, perm, forced block): a w×w tile with outer loops on both
                // sides, and tiles of 2w and 3w cut into blocks of w.
                let shapes: [(Vec<usize>, &[usize], Option<usize>); 3] = [
                    (vec![w, 3, 2, w], &[3, 1, 2, 0], None),
                    (vec![2 * w, 3, 3 * w], &[2, 1, 0], Some(w)),
                    (vec![2 * w, 3, 2 * w], &[2, 1, 0], Some(2 * w)),
                ];
                for (dims, perm, block) in &shapes {
                    let before = kernel::WHOLE_MICRO_UNITS.with(|c| c.get());
                    for threads in [1, 2] {
                        for (al, be) in [(1.0, 0.0), (-2.0, 0.0), (0.5, 1.5)] {
                            check::<T>(dims, perm, &DENSE, &DENSE, al, be, threads, *block);
                        }
                    }
                    let after = kernel::WHOLE_MICRO_UNITS.with(|c| c.get());
                    assert!(after > before, "{:?} {isa:?} {dims:?}: not taken", T::DTYPE);
                }
            }
        }
        cases::<f32>();
        cases::<f64>();
        cases::<Complex32>();
        cases::<num_complex::Complex64>();
        // f64, streamed, into a line-aligned B whose rows are aligned apart but whose
        // outer index moves them off the line: tiles two micro-tiles wide there go through
        // `tile_simd` (which shifts its grid to stream them); nothing between B's rows is
        // written
        for isa in Isa::available() {
            if isa == Isa::Scalar || cfg!(miri) {
                continue;
            }
            let w = isa.width(DType::F64);
            let (a, la, _) = f64_operands(&[2 * w, 3, w], &[2, 1, 0]);
            let so = 2 * w + 1;
            let si = (3 * so).div_ceil(8) * 8;
            let lb = Layout::new(vec![w, 3, 2 * w], vec![si as isize, so as isize, 1]).unwrap();
            let mut back = vec![f64::NAN; si * w + 8];
            let first = (64 - back.as_ptr() as usize % 64) % 64 / 8;
            let opts = TransposeOptions {
                isa: Some(isa),
                streaming: Some(true),
                threads: Some(1),
                block: Some(2 * w),
                ..Default::default()
            };
            let plan = TransposePlan::new(&[2, 1, 0], &la, &lb, DType::F64, &opts).unwrap();
            assert_eq!(plan.blocks(), (2 * w, 2 * w), "{}", plan.describe());
            let before = kernel::WHOLE_MICRO_UNITS.with(|c| c.get());
            {
                let av = StridedView::from_slice(&a, la.clone(), 0).unwrap();
                let len = back.len() - first;
                let mut bv =
                    StridedViewMut::from_slice(&mut back[first..first + len], lb.clone(), 0)
                        .unwrap();
                plan.execute(2.0, &av, 0.0, &mut bv).unwrap();
            }
            // one unit per outer index, only the first line-aligned
            assert_eq!(kernel::WHOLE_MICRO_UNITS.with(|c| c.get()) - before, 1);
            let mut written = 0;
            for (k, v) in back[first..].iter().enumerate() {
                let (x0, x1, x2) = (k / si, k % si / so, k % si % so);
                if x1 < 3 && x2 < 2 * w && x0 < w {
                    let want = 2.0 * a[x2 * 3 * w + x1 * w + x0];
                    assert_eq!(*v, want, "{isa:?} B[{x0},{x1},{x2}] ({})", plan.describe());
                    written += 1;
                } else {
                    assert!(v.is_nan(), "{isa:?}: offset {k} outside B written");
                }
            }
            assert_eq!(written, a.len());
        }
        // f64 into B at each offset from a line (0: the streamed micro-kernel)
        for isa in Isa::available() {
            if isa == Isa::Scalar || cfg!(miri) {
                continue;
            }
            let w = isa.width(DType::F64);
            let (dims, perm) = ([w, 5, w, 2], [2, 1, 3, 0]);
            let (a, la, lb) = f64_operands(&dims, &perm);
            for streaming in [Some(true), Some(false)] {
                let opts = TransposeOptions {
                    isa: Some(isa),
                    streaming,
                    threads: Some(1),
                    ..Default::default()
                };
                let plan = TransposePlan::new(&perm, &la, &lb, DType::F64, &opts).unwrap();
                for off in [0, 2, 5] {
                    run_into_offset_b(&plan, &a, &dims, &perm, -1.5, off);
                }
            }
        }
    }

    /// Streamed tiles and row copies into a B that starts 16 bytes past a line, with rows of
    /// whole lines following each other along an outer dimension: the seam path runs (its
    /// line counter moves) and every element is right, on one and two threads, for a copy
    /// and a scaled copy. (`tests/transpose.rs` covers every offset,
    /// level and dtype.)
    #[test]
    fn seams_join_the_rows_of_a_misaligned_b() {
        use std::sync::atomic::Ordering;
        let isa = Isa::detect();
        if isa == Isa::Scalar || cfg!(miri) {
            eprintln!("seams_join_the_rows_of_a_misaligned_b: SKIPPED (no SIMD level here)");
            return;
        }
        let cases: [(&[usize], &[usize]); 6] = [
            (&[16, 6, 40], &[2, 1, 0]),
            // rows of one line: every line of B is a seam
            (&[8, 6, 40], &[2, 1, 0]),
            (&[2, 16, 3, 4, 24], &[4, 0, 3, 2, 1]),
            (&[8, 4, 16, 24], &[1, 3, 0, 2]),
            // row copies
            (&[5, 7, 48], &[1, 0, 2]),
            (&[3, 40, 5, 16], &[0, 2, 1, 3]),
        ];
        for (dims, perm) in cases {
            let n: usize = dims.iter().product();
            let a: Vec<f64> = (0..n).map(|x| (x * 7 % 1009) as f64 - 300.0).collect();
            let la = Layout::row_major(dims).unwrap();
            let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
            let lb = Layout::row_major(&bd).unwrap();
            for threads in [1, 2] {
                let opts = TransposeOptions {
                    threads: Some(threads),
                    parallel_min_bytes: Some(0),
                    isa: Some(isa),
                    streaming: Some(true),
                    ..Default::default()
                };
                let plan = TransposePlan::new(perm, &la, &lb, DType::F64, &opts).unwrap();
                for alpha in [1.0, -2.5] {
                    let before = kernel::SEAM_LINES.load(Ordering::Relaxed);
                    run_into_offset_b(&plan, &a, dims, perm, alpha, 2);
                    // Row copies take seams only for a plain copy (the streamed kind).
                    let rows = perm.last() == Some(&(dims.len() - 1));
                    if alpha == 1.0 || !rows {
                        assert!(
                            kernel::SEAM_LINES.load(Ordering::Relaxed) > before,
                            "{dims:?}"
                        );
                    }
                }
            }
        }
    }

    /// Streamed row copies write with non-temporal stores (which the model prices without
    /// reading B's lines first) only for rows of whole blocks, of at least 1 KiB, or in
    /// batches that follow one another in B: rows of 20 f32 (80 bytes) with gaps between
    /// them in B are copied with ordinary stores although the plan streams.
    #[test]
    fn short_rows_that_are_not_whole_lines_store_plainly() {
        for isa in Isa::available() {
            if isa == Isa::Scalar {
                continue;
            }
            let rows = |n: usize| {
                let a = Layout::row_major(&[8, 6, n]).unwrap();
                let pitch = n as isize + 4;
                let b = Layout::new(vec![6, 8, n], vec![8 * pitch, pitch, 1]).unwrap();
                let opts = TransposeOptions {
                    isa: Some(isa),
                    streaming: Some(true),
                    ..Default::default()
                };
                let p = TransposePlan::new(&[1, 0, 2], &a, &b, DType::F32, &opts).unwrap();
                assert_eq!(p.kernel(), KernelKind::Rows { n }, "{}", p.describe());
                assert!(p.streams(true));
                p.stores_stream()
            };
            assert!(!rows(20), "{isa:?}");
            assert!(rows(32), "{isa:?}");
            assert!(rows(365), "{isa:?}");
        }
    }

    /// Batches of short rows that are not whole lines but follow one another in B (24 f32,
    /// 96 bytes; 9 f64) are streamed as one range (`stream_joined_rows`): the model prices
    /// them as streamed, the path runs for a plain copy into any B offset, and the values
    /// are right. Rows shorter than a store block keep ordinary stores.
    #[test]
    fn batches_of_rows_that_follow_one_another_in_b_stream_joined() {
        use std::sync::atomic::Ordering;
        for isa in Isa::available() {
            if isa == Isa::Scalar || cfg!(miri) {
                continue;
            }
            for (n, dt) in [(24usize, DType::F32), (9, DType::F64), (17, DType::F32)] {
                let a = Layout::row_major(&[12, 3, n]).unwrap();
                let b = Layout::row_major(&[3, 12, n]).unwrap();
                let opts = TransposeOptions {
                    isa: Some(isa),
                    threads: Some(1),
                    streaming: Some(true),
                    ..Default::default()
                };
                let p = TransposePlan::new(&[1, 0, 2], &a, &b, dt, &opts).unwrap();
                assert_eq!(p.kernel(), KernelKind::Rows { n }, "{}", p.describe());
                // (Rows of whole blocks stream row by row, their batches ordered by A.)
                let whole = (n * dt.size_bytes()).is_multiple_of(kernel::stream_block(isa));
                assert_eq!(p.joined_rows(), !whole, "{isa:?} {n} {}", p.describe());
                assert!(p.stores_stream(), "{isa:?} {n}");
                if !whole && dt == DType::F64 {
                    let before = kernel::JOINED_BATCHES.load(Ordering::Relaxed);
                    let src: Vec<f64> = (0..12 * 3 * n).map(|x| x as f64 - 7.0).collect();
                    for off in [0, 1, 5] {
                        run_into_offset_b(&p, &src, &[12, 3, n], &[1, 0, 2], 1.0, off);
                    }
                    assert!(kernel::JOINED_BATCHES.load(Ordering::Relaxed) >= before + 3);
                }
            }
            // 12 f32 rows (48 bytes) are shorter than an AVX-512 line.
            let a = Layout::row_major(&[12, 3, 12]).unwrap();
            let b = Layout::row_major(&[3, 12, 12]).unwrap();
            let opts = TransposeOptions {
                isa: Some(isa),
                streaming: Some(true),
                ..Default::default()
            };
            let p = TransposePlan::new(&[1, 0, 2], &a, &b, DType::F32, &opts).unwrap();
            if let KernelKind::Rows { .. } = p.kernel() {
                assert_eq!(
                    p.joined_rows(),
                    isa == Isa::Avx2,
                    "{isa:?} {}",
                    p.describe()
                );
            }
        }
    }
}

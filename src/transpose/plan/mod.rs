//! [`TransposePlan`]: `B = alpha * perm(A) + beta * B` decomposed as HPTT does it — fused
//! loops around a macro-kernel over A's and B's stride-1 dimensions, macro-tiles made of
//! in-register SIMD micro-tiles — with HPTT's loop-order and parallelization heuristics, an
//! optional measured tuning within a time budget, and execution on rayon.

mod execute;
mod measure;
mod refine;

use std::time::Duration;

use super::kernel::{self, Isa, Tile};
use super::problem::{Dim, Normalized};
use super::rules::{far_row_prefetch, line_tile_streaming, scatter_regroup};
use super::staged::Staged;
use crate::error::{Error, Result};
use crate::tensor::{DType, Layout};

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
    /// Force staged tiles ([`TransposePlan::stages`]) off (`Some(false)`); `None` or
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

/// Reorders the outer loops of a copy of rows of `n` elements that are not whole lines so
/// that each unit reads one contiguous block of A and the units walk A in order, where the
/// dims allow it: the batch (innermost) is the dim whose rows follow one another in A
/// (`sa == n`), the loop around it the dim whose rows follow one another in B (`sb == n`)
/// and whose A stride steps over the whole batch. B is then written as one stream per batch
/// row, each unit continuing the lines the previous unit left open. A batch along B instead
/// read each partly used A line once per pass of the loops around it: rows of 15 f64 in
/// batches of 50625 ran at 0.08-0.12 of the best copy against 0.45 this way
/// (`docs/TUNING.md`, "Rows that are not whole lines: A blocks, B streams").
fn a_blocks_b_streams(outer: &mut Vec<usize>, dims: &[Dim], n: usize) {
    let n = n as isize;
    let along_a = outer
        .iter()
        .copied()
        .find(|&k| dims[k].sa == n && dims[k].n > 1);
    let along_b = outer
        .iter()
        .copied()
        .find(|&k| dims[k].sb == n && dims[k].n > 1);
    if let (Some(ka), Some(kb)) = (along_a, along_b) {
        if ka != kb && dims[kb].sa == dims[ka].n as isize * n {
            outer.retain(|&k| k != ka && k != kb);
            outer.push(kb);
            outer.push(ka);
        }
    }
}

/// Shortest batch (bytes) of rows that are not whole store blocks, a page or more apart in
/// A, streamed by default as one joined range (`kernel::stream_joined_rows`): batches of 15
/// rows of 15 f64 (1800 bytes) ran 1.1-2.6x faster with ordinary stores, batches of 225
/// such rows 2.7x slower (`docs/TUNING.md`, "Short joined batches store plainly").
const JOINED_STREAM_MIN_BYTES: usize = kernel::PAGE;

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
    /// The staged nest of tiles whose B rows are not whole lines, for executions that
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
            plan.stage_tiles();
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
                // B rows that cannot stream (their starts are not store blocks apart, e.g.
                // 15 f64) take B-side blocks of one to two lines that cut them into the
                // fewest units (`odd_block_j`): a line and a remainder of one element (225
                // f64: 28 x 8 + 1) doubles the units of small tiles.
                let row_bytes = di_.sb.unsigned_abs() * es;
                let streamable = row_bytes.is_multiple_of(kernel::stream_block(self.isa).max(1));
                let bj_simd = if streamable {
                    line_w
                } else {
                    odd_block_j(dj_.n, line_w, w)
                };
                let (b, bjx) = match block {
                    Some((bi, bj)) => (bi.max(1), bj.max(1)),
                    None if simd => (((16384 / es) / w).max(1) * w, bj_simd),
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
        // overhead over several rows. When the rows can be streamed and are whole lines, B's
        // order stops mattering (whole aligned lines, written without being read): order by
        // A stride instead, so that the batch and the loops around it read A sequentially.
        // Streamed rows shorter than a line (32 bytes: a whole AVX2 store block) keep B's
        // order, so that the line a row leaves open is the next row's to finish; longer rows
        // finish most of their lines themselves (docs/TUNING.md, "Streamed rows shorter than
        // a line").
        // Long rows (8 KiB and more) are folded too where the streamed batch copy reads them
        // in groups ([`kernel::groups_rows`]); batched without groups they ran slower than
        // one per unit (`docs/TUNING.md`, `ROW_GROUPS`).
        self.row_batch = None;
        if let KernelKind::Rows { n } = self.kernel {
            let es = self.dtype.size_bytes();
            if self.streams_rows() && n * es >= kernel::LINE {
                outer.sort_by_key(|&k| (std::cmp::Reverse(dims[k].sa.unsigned_abs()), k));
            } else if !(n * es).is_multiple_of(kernel::LINE) {
                a_blocks_b_streams(&mut outer, &dims, n);
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
                ", staged when beta = 0: {}x{} tiles{} a macro-tile, streamed runs of {} bytes, loops [{}]",
                st.ka.count,
                st.kb.count,
                match self.kernel {
                    KernelKind::Tile { i, j, .. } => match (st.rows < i.n, st.cols < j.n) {
                        (true, true) => format!(" of {} A rows by {} B columns", st.rows, st.cols),
                        (true, false) => format!(" of {} A rows", st.rows),
                        (false, true) => format!(" of {} B columns", st.cols),
                        (false, false) => String::new(),
                    },
                    _ => String::new(),
                },
                st.run_bytes(self.dtype.size_bytes()),
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

/// The B-side block of a SIMD tile whose B rows cannot stream, `n` long: the whole row when it
/// is shorter than two lines (`line_w` elements each), else the block of at least one line
/// and less than two that cuts it into the fewest blocks, and among those the fewest
/// `w`-wide micro-tile columns, then a last block at least `w` wide, then the widest.
///
/// ```text
/// odd_block_j(15, 8, 4) == 15; odd_block_j(225, 8, 4) == 15; odd_block_j(53, 8, 4) == 15
/// ```
fn odd_block_j(n: usize, line_w: usize, w: usize) -> usize {
    if n < 2 * line_w {
        return n.max(1);
    }
    // blocks, micro-tile columns, a last block narrower than a micro-tile (masked edges only)
    let cost = |b: usize| {
        let rest = n % b;
        (
            n.div_ceil(b),
            (n / b) * b.div_ceil(w) + rest.div_ceil(w),
            rest > 0 && rest < w,
        )
    };
    (line_w..2 * line_w)
        .min_by_key(|&b| (cost(b), std::cmp::Reverse(b)))
        .unwrap_or(line_w)
}

#[cfg(test)]
mod tests {
    //! The loop walker (`run_range`) and the kernels it calls, on every loop-nest shape the
    //! planner builds, against a per-element loop over raw buffers. Small enough to run
    //! under Miri (`.ci/miri.sh`), where only the scalar kernels run.

    use super::*;
    use crate::tensor::{Element, StridedView, StridedViewMut};
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

    /// B-side blocks of rows that cannot stream: whole rows under two lines, else one to two
    /// lines, the fewest blocks (225 and 3375 f64: blocks of 15, none narrower than a
    /// micro-tile), and a plan of 15^4 f64 tiles that uses them.
    #[test]
    fn odd_rows_take_the_fewest_blocks() {
        for (n, want) in [
            (15, 15),
            (12, 12),
            (1, 1),
            (225, 15),
            (3375, 15),
            (53, 15),
            (17, 13),
        ] {
            assert_eq!(odd_block_j(n, 8, 4), want, "{n}");
        }
        for n in 16..400 {
            let b = odd_block_j(n, 8, 4);
            assert!((8..16).contains(&b), "{n}: {b}");
            assert!(n.div_ceil(b) <= n.div_ceil(15), "{n}: {b}");
        }
        let l = Layout::row_major(&[15, 15, 15, 15]).unwrap();
        let p = TransposePlan::new(&[3, 1, 2, 0], &l, &l, DType::F64, &Default::default());
        let p = p.unwrap();
        if p.isa != Isa::Scalar {
            assert_eq!(p.blocks().1, 15, "{}", p.describe());
        }
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
    /// loop is next to the tile, or stores are not streamed, the block stays one line, or
    /// where B's rows cannot stream, one to two lines (`odd_block_j`).
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
                    // [5, 70, 32]: B rows of 70 f64 start 560 bytes apart, which cannot
                    // stream: blocks of one to two lines that cut 70 into the fewest
                    let w = isa.width(DType::F64);
                    let want = if widens && streaming == Some(true) && isa == Isa::Avx512 {
                        16
                    } else if !widens {
                        odd_block_j(70, line, w)
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
    /// Streamed row copies batch rows that follow one another in A, except rows shorter than
    /// a line, whose batch follows B so that each line a row leaves open is finished by the
    /// next row (ttc-45 in f16: rows of 16, 32 bytes; ttc-13 in f16: rows of 80, 160 bytes),
    /// and rows that are not whole store blocks (160 bytes on AVX-512), joined along B.
    #[test]
    fn streamed_rows_shorter_than_a_line_batch_along_b() {
        for isa in Isa::available().into_iter().filter(|&i| i != Isa::Scalar) {
            let opts = TransposeOptions {
                threads: Some(1),
                isa: Some(isa),
                streaming: Some(true),
                ..Default::default()
            };
            let plan = |dims: &[usize], perm: &[usize]| {
                let la = Layout::row_major(dims).unwrap();
                let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
                let lb = Layout::row_major(&bd).unwrap();
                TransposePlan::new(perm, &la, &lb, DType::F16, &opts).unwrap()
            };
            let short = plan(&[15, 15, 103, 15, 10, 16], &[4, 1, 0, 3, 2, 5]);
            assert!(
                matches!(short.kernel, KernelKind::Rows { n: 16 }),
                "{}",
                short.describe()
            );
            let batch = short.row_batch.expect("a batch of rows");
            assert_eq!(
                (batch.n, batch.sb),
                (103, 16),
                "{isa:?} {}",
                short.describe()
            );
            let long = plan(&[96, 75, 96, 80], &[2, 1, 0, 3]);
            assert!(
                matches!(long.kernel, KernelKind::Rows { n: 80 }),
                "{}",
                long.describe()
            );
            let batch = long.row_batch.expect("a batch of rows");
            if (80 * 2) % kernel::stream_block(isa) == 0 {
                assert_eq!((batch.n, batch.sa), (96, 80), "{isa:?} {}", long.describe());
            } else {
                // rows that are not whole store blocks (160 bytes on AVX-512) batch along B,
                // streamed as one joined range (`joined_rows`)
                assert_eq!((batch.n, batch.sb), (96, 80), "{isa:?} {}", long.describe());
                assert!(long.joined_rows(), "{isa:?} {}", long.describe());
            }
        }
    }

    /// Tiles of 2-byte units on AVX2 prefetch the next unit's A rows even where the far-row
    /// exception would leave them to the hardware (ttc-47's 112x32 tiles: one f32 micro-tile
    /// reads 8 rows, one of 2-byte units 16); 4-byte units follow the host rule.
    #[test]
    fn two_byte_tiles_on_avx2_prefetch_far_rows() {
        if !Isa::Avx2.is_available() {
            eprintln!("two_byte_tiles_on_avx2_prefetch_far_rows: SKIPPED (no AVX2 here)");
            return;
        }
        let dims = [15, 15, 32, 15, 5, 112];
        let perm = [1, 4, 0, 5, 3, 2];
        let la = Layout::row_major(&dims).unwrap();
        let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let lb = Layout::row_major(&bd).unwrap();
        let opts = TransposeOptions {
            threads: Some(1),
            isa: Some(Isa::Avx2),
            ..Default::default()
        };
        let f32_plan = TransposePlan::new(&perm, &la, &lb, DType::F32, &opts).unwrap();
        assert!(f32_plan.far_rows_continue(), "{}", f32_plan.describe());
        for dtype in [DType::F16, DType::BF16] {
            let p = TransposePlan::new(&perm, &la, &lb, dtype, &opts).unwrap();
            assert!(
                matches!(p.kernel(), KernelKind::Tile { simd: true, .. }),
                "{}",
                p.describe()
            );
            assert!(p.prefetches() && !p.far_rows_continue(), "{}", p.describe());
        }
    }

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

    /// Rows that are not whole lines, where one dim's rows follow one another in A and
    /// another's follow one another in B with an A stride of a whole batch (a 2-D transposition
    /// of rows, `[1, 0, 2]`): the batch runs along A and the loop around it along B
    /// (`a_blocks_b_streams`), at every ISA, and the values are right. Rows of whole lines
    /// keep their order.
    #[test]
    fn rows_that_are_not_whole_lines_read_a_blocks_in_order() {
        for isa in Isa::available() {
            for (n, dt) in [(15usize, DType::F64), (13, DType::F32), (7, DType::F64)] {
                let (p_, q) = if cfg!(miri) {
                    (6, 4)
                } else {
                    (21usize, 10usize)
                };
                let a = Layout::row_major(&[p_, q, n]).unwrap();
                let b = Layout::row_major(&[q, p_, n]).unwrap();
                let opts = TransposeOptions {
                    isa: Some(isa),
                    threads: Some(1),
                    ..Default::default()
                };
                let p = TransposePlan::new(&[1, 0, 2], &a, &b, dt, &opts).unwrap();
                assert_eq!(p.kernel(), KernelKind::Rows { n }, "{}", p.describe());
                let batch = p.row_batch.expect("a batch of rows");
                assert_eq!((batch.n, batch.sa), (q, n as isize), "{}", p.describe());
                let around = p.loops.iter().rfind(|l| l.role == Role::Outer).unwrap();
                assert_eq!(
                    (around.count, around.sb),
                    (p_, n as isize),
                    "{}",
                    p.describe()
                );
                if dt == DType::F64 {
                    let src: Vec<f64> = (0..p_ * q * n).map(|x| x as f64 * 0.5 - 3.0).collect();
                    for off in [0, 3] {
                        run_into_offset_b(&p, &src, &[p_, q, n], &[1, 0, 2], 2.0, off);
                    }
                }
            }
            // rows of 16 f64 (two lines) keep the batch along B
            let a = Layout::row_major(&[21, 10, 16]).unwrap();
            let b = Layout::row_major(&[10, 21, 16]).unwrap();
            let opts = TransposeOptions {
                isa: Some(isa),
                threads: Some(1),
                streaming: Some(false),
                ..Default::default()
            };
            let p = TransposePlan::new(&[1, 0, 2], &a, &b, DType::F64, &opts).unwrap();
            if let Some(batch) = p.row_batch {
                assert_ne!(batch.sa, 16, "{isa:?} {}", p.describe());
            }
        }
    }

    /// Joined batches shorter than a page whose rows lie a page or more apart in A store
    /// plainly by default (`JOINED_STREAM_MIN_BYTES`), with streaming still available when
    /// forced; long batches stream.
    #[test]
    fn short_joined_batches_of_far_rows_store_plainly() {
        let isa = Isa::Avx2;
        if !isa.is_available() || cfg!(miri) {
            return;
        }
        let a = Layout::row_major(&[15; 6]).unwrap();
        let plan = |perm: &[usize], streaming: Option<bool>| {
            let dims: Vec<usize> = perm.iter().map(|_| 15).collect();
            let b = Layout::row_major(&dims).unwrap();
            let opts = TransposeOptions {
                isa: Some(isa),
                threads: Some(1),
                streaming,
                ..Default::default()
            };
            let p = TransposePlan::new(perm, &a, &b, DType::F64, &opts).unwrap();
            assert_eq!(p.kernel(), KernelKind::Rows { n: 15 }, "{}", p.describe());
            p
        };
        // batches of 15 rows of 120 bytes, 27 KiB apart in A
        let far = plan(&[3, 1, 0, 4, 2, 5], None);
        assert!(
            far.joined_rows() && !far.stores_stream(),
            "{}",
            far.describe()
        );
        assert!(plan(&[3, 1, 0, 4, 2, 5], Some(true)).stores_stream());
        // batches of 225 rows (27 KiB)
        let long = plan(&[2, 4, 3, 0, 1, 5], None);
        assert!(
            long.joined_rows() && long.stores_stream(),
            "{}",
            long.describe()
        );
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
            // (B's adjacent rows are 36 rows apart in A and A's adjacent rows form blocks of
            // 3: no A-block order, which would take the batch along A; `a_blocks_b_streams`)
            for (n, dt) in [(24usize, DType::F32), (9, DType::F64), (17, DType::F32)] {
                let a = Layout::row_major(&[4, 12, 3, n]).unwrap();
                let b = Layout::row_major(&[3, 12, 4, n]).unwrap();
                let opts = TransposeOptions {
                    isa: Some(isa),
                    threads: Some(1),
                    streaming: Some(true),
                    ..Default::default()
                };
                let p = TransposePlan::new(&[2, 1, 0, 3], &a, &b, dt, &opts).unwrap();
                assert_eq!(p.kernel(), KernelKind::Rows { n }, "{}", p.describe());
                // (Rows of whole blocks stream row by row, their batches ordered by A.)
                let whole = (n * dt.size_bytes()).is_multiple_of(kernel::stream_block(isa));
                assert_eq!(p.joined_rows(), !whole, "{isa:?} {n} {}", p.describe());
                assert!(p.stores_stream(), "{isa:?} {n}");
                if !whole && dt == DType::F64 {
                    let before = kernel::JOINED_BATCHES.load(Ordering::Relaxed);
                    let src: Vec<f64> = (0..4 * 12 * 3 * n).map(|x| x as f64 - 7.0).collect();
                    for off in [0, 1, 5] {
                        run_into_offset_b(&p, &src, &[4, 12, 3, n], &[2, 1, 0, 3], 1.0, off);
                    }
                    assert!(kernel::JOINED_BATCHES.load(Ordering::Relaxed) >= before + 3);
                }
            }
            // 12 f32 rows (48 bytes) are shorter than an AVX-512 line.
            let a = Layout::row_major(&[4, 12, 3, 12]).unwrap();
            let b = Layout::row_major(&[3, 12, 4, 12]).unwrap();
            let opts = TransposeOptions {
                isa: Some(isa),
                streaming: Some(true),
                ..Default::default()
            };
            let p = TransposePlan::new(&[2, 1, 0, 3], &a, &b, DType::F32, &opts).unwrap();
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

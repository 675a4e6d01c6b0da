//! The ways to run a two-operand contraction, and their predicted costs.
//!
//! A [`Candidate`] says which operands are packed (and in which index order), whether the
//! GEMM writes a temporary that is then transposed into C, which indices the GEMM covers
//! (`m`, `n`, `k`: groups that fuse into one matrix dimension in every operand that holds
//! them), and which remain as loops around it: independent loops (batch indices, and free
//! indices that do not fuse) that may run in parallel, and batch-reduce loops (contracted
//! indices that do not fuse) that accumulate into the same C block. Special cases: no packing
//! and no loops is a GEMM straight on the operands; packing everything is TTGT; no packing
//! with loops is loop-over-GEMM (with batch-reduce when K does not fuse).
//!
//! [`enumerate`] lists them (index orders taken from C's and the operands' strides, packed
//! group orders `[batch|M|K]` or `[batch|K|M]` etc., each GEMM library, serial or parallel
//! independent loops) and prices each step with the transpose and GEMM models.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::fmt;
use std::sync::Arc;

use super::groups::{axes_of, axis_of, by_stride, fuse_axes, packed_layout, stride_of};
use super::loops::NestedLoops;
use super::options::{PlanOptions, DEFAULT_TILE_BYTES, WIDE_TILE_BYTES};
use super::prepare::OperandPrep;
use crate::einsum::{BoundSpec, Label};
use crate::error::{Error, Result};
use crate::model::{
    gemm_coeffs_resident, gemv_seconds, gett_blocking, gett_depth, gett_orient,
    gett_simd_available, gett_work, memory_share, predict_transpose, predict_transpose_from_memory,
    profile_for, GemmLayout, GemmLibrary, GettIndex, OperandSource, Profile,
};
use crate::tensor::{DType, Layout};
use crate::transpose::inplace::{InPlaceOptions, InPlacePlan};
use crate::transpose::{KernelKind, TransposeOptions, TransposePlan, STREAM_MIN_BYTES};

/// A list of index labels, shared: the candidates of one choice of index orders hold the
/// same lists, and cloning one is a reference count, not an allocation (planning made
/// several thousand label vectors a plan before).
///
/// ```
/// let l: ttgt::plan::Labels = vec![].into();
/// assert!(l.is_empty());
/// ```
pub type Labels = Arc<[Label]>;

/// The family a candidate belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CandidateKind {
    /// No copies: one GEMM (or a loop over batch indices) on the operands as they are.
    Direct,
    /// Transpose-Transpose-GEMM-Transpose: at least one operand or the result is copied;
    /// no loops but batch loops.
    Ttgt,
    /// No copies; free or contracted indices that do not fuse are loops around a strided GEMM
    /// (contracted ones as batch-reduce loops).
    LoopOverGemm,
    /// Some copies and some loops.
    Hybrid,
    /// No copies and no loops: one blocked GEMM over all M, N and K indices whose packing
    /// reads A and B in place and whose register tiles go straight into C (our GETT engine).
    Gett,
    /// No copies and no GEMM call: plain loops over every index ([`NestedLoops`]), for
    /// contractions smaller than a GEMM call's fixed cost.
    Loops,
}

impl fmt::Display for CandidateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CandidateKind::Direct => "direct GEMM",
            CandidateKind::Ttgt => "TTGT",
            CandidateKind::LoopOverGemm => "loop-over-GEMM",
            CandidateKind::Hybrid => "TTGT with loops",
            CandidateKind::Gett => "GETT",
            CandidateKind::Loops => "nested loops",
        })
    }
}

/// Predicted (or measured) seconds of each step.
///
/// ```
/// let c = ttgt::plan::StepCosts { gemm: 2.0, pack_a: 0.5, ..Default::default() };
/// assert_eq!(c.total(), 2.5);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepCosts {
    /// Diagonals and one-sided sums.
    pub prepare: f64,
    /// Packing A.
    pub pack_a: f64,
    /// Packing B.
    pub pack_b: f64,
    /// All GEMM calls.
    pub gemm: f64,
    /// Writing the temporary result into C, and the epilogue.
    pub write_c: f64,
}

impl StepCosts {
    /// Sum of the steps.
    pub fn total(&self) -> f64 {
        self.prepare + self.pack_a + self.pack_b + self.gemm + self.write_c
    }
}

/// The GEMM writes into C's own memory, viewed as a row-major tensor with the axes of
/// `order`, and C is then permuted in place into its own layout (for a non-zero beta, C is
/// first permuted in place into `order`): the TTGT write-back without a workspace, for C
/// that fills a dense block of memory.
#[derive(Clone, Debug)]
pub struct InPlaceC {
    /// Axes of the GEMM's view of C's memory, outermost first.
    pub order: Vec<Label>,
    /// C's layout to `order` (run when beta is not zero).
    pub forward: InPlacePlan,
    /// `order` back to C's layout.
    pub back: InPlacePlan,
}

/// The GEMM computes C one block at a time into a small buffer that stays in cache, and
/// each block is transposed into its place in C right after: the TTGT write-back without a
/// C-sized temporary and without that temporary's round trip through memory.
#[derive(Clone, Debug)]
pub struct TiledC {
    /// Labels iterated over blocks, by decreasing stride in C: every batch label and a set
    /// of M and N labels (see `block_sets`). One value of these is one block.
    pub loops: Labels,
    /// Axes of the block buffer, row-major, outermost first: the other output labels.
    pub order: Labels,
    /// Elements of one block.
    pub block_len: usize,
    /// The transposition of one block buffer into its block of C (on one thread when the
    /// blocks run in parallel), streaming its stores when C is large.
    pub(crate) plan: Arc<TransposePlan>,
}

impl TiledC {
    /// Number of blocks.
    pub fn blocks(&self, extent: impl Fn(Label) -> usize) -> usize {
        self.loops.iter().map(|&l| extent(l)).product()
    }
}

/// One way to run a two-operand contraction.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Pack A into a row-major buffer with these axes, outermost first (`None`: use A as is).
    pub a_pack: Option<Labels>,
    /// Pack B likewise.
    pub b_pack: Option<Labels>,
    /// The GEMM writes a row-major temporary with these axes, then it is transposed into C
    /// (`None`: the GEMM writes C).
    pub c_temp: Option<Labels>,
    /// The GEMM writes C's memory in another order, permuted in place afterwards.
    pub c_in_place: Option<InPlaceC>,
    /// The GEMM writes C block by block into a cached buffer, each block transposed into C
    /// right after it is computed. `loops`, `reduce` and the GEMM dimensions are then those
    /// of one block, and `parallel` says whether blocks run on rayon threads.
    pub c_tiles: Option<TiledC>,
    /// Labels fused into the GEMM's rows, outermost first.
    pub m: Labels,
    /// Labels fused into the GEMM's columns.
    pub n: Labels,
    /// Labels fused into the GEMM's inner dimension.
    pub k: Labels,
    /// Independent loops around the GEMM (batch indices and free indices that do not fuse),
    /// outermost first.
    pub loops: Labels,
    /// Batch-reduce loops (contracted indices that do not fuse), accumulating into one C
    /// block: the first call applies beta, the others add.
    pub reduce: Labels,
    /// Whether the independent loops run on rayon threads (each GEMM single-threaded).
    pub parallel: bool,
    /// GEMM library.
    pub library: GemmLibrary,
    /// Threads of each GEMM call.
    pub gemm_threads: usize,
    /// `(calls, m, n, k)` of the GEMMs.
    pub gemm_shape: (usize, usize, usize, usize),
    /// Bytes allocated for packed operands and the temporary result.
    pub workspace_bytes: usize,
    /// Predicted seconds per step.
    pub predicted: StepCosts,
    /// How many of `loops` (the first ones) are batch indices.
    pub(crate) batch_loops: usize,
    /// The GETT engine runs the contraction (`m`, `n`, `k` are then every M, N, K index, in
    /// the engine's order, and `loops` the batch indices, run inside the engine).
    pub gett: Option<GettRun>,
    /// Plain loops run the contraction (no copies, no GEMM call; `m`, `n`, `k` are then
    /// every M, N and K index and `loops` the batch indices, for reports).
    pub nested: Option<Arc<NestedLoops>>,
}

/// How the GETT engine runs a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GettRun {
    /// A and B swap roles (`Cᵀ = Bᵀ·Aᵀ`): C's smallest stride is along an M index.
    pub swap: bool,
    /// Every C tile is stored in place by the kernel (C's contiguous index is the innermost
    /// column index); otherwise some tiles are written element by element.
    pub direct_tiles: bool,
}

fn names(ls: &[Label]) -> String {
    ls.iter().map(|l| l.to_string()).collect()
}

impl Candidate {
    /// The family of the candidate.
    pub fn kind(&self) -> CandidateKind {
        if self.nested.is_some() {
            return CandidateKind::Loops;
        }
        if self.gett.is_some() {
            return CandidateKind::Gett;
        }
        let copies = self.copies() > 0;
        let looped = !self.reduce.is_empty()
            || self.loops.len() > self.batch_loops
            || self.c_tiles.is_some();
        match (copies, looped) {
            (false, false) => CandidateKind::Direct,
            (true, false) => CandidateKind::Ttgt,
            (false, true) => CandidateKind::LoopOverGemm,
            (true, true) => CandidateKind::Hybrid,
        }
    }

    /// Number of operands copied (A, B, the result).
    pub fn copies(&self) -> usize {
        self.a_pack.is_some() as usize
            + self.b_pack.is_some() as usize
            + self.c_temp.is_some() as usize
            + self.c_in_place.is_some() as usize
            + self.c_tiles.is_some() as usize
    }

    /// One line: kind, packing, GEMM shape and loops, library.
    pub fn summary(&self) -> String {
        let mut s = format!("{}", self.kind());
        if let Some(n) = &self.nested {
            let what = if n.inner.is_contracted() {
                "dot product"
            } else {
                "vector update"
            };
            return s + &format!(
                ": {} runs of a {}-long {what}, loops {} (m={} n={} k={}), no copies",
                n.inner_runs(),
                n.inner.extent,
                names(&n.labels),
                names(&self.m),
                names(&self.n),
                names(&self.k),
            );
        }
        if let Some(g) = &self.gett {
            let (calls, m, n, k) = self.gemm_shape;
            s += &format!(
                ": blocked GEMM {m}x{n}x{k} (m={} n={} k={}){}, operands packed in blocks from their layouts, tiles into C{}",
                names(&self.m),
                names(&self.n),
                names(&self.k),
                if g.swap { " as Cᵀ = Bᵀ·Aᵀ" } else { "" },
                if g.direct_tiles { "" } else { " element by element" },
            );
            if calls > 1 {
                s += &format!(", x{calls} over batch {}", names(&self.loops));
            }
            s += &format!(" [{}]", self.library);
            return s;
        }
        let mut parts = Vec::new();
        if let Some(o) = &self.a_pack {
            parts.push(format!("pack A[{}]", names(o)));
        }
        if let Some(o) = &self.b_pack {
            parts.push(format!("pack B[{}]", names(o)));
        }
        let (calls, m, n, k) = self.gemm_shape;
        parts.push(format!(
            "GEMM {m}x{n}x{k} (m={} n={} k={})",
            names(&self.m),
            names(&self.n),
            names(&self.k)
        ));
        if calls != 1 || !self.loops.is_empty() || !self.reduce.is_empty() {
            let mut l = format!("x{calls} calls");
            if !self.loops.is_empty() {
                l += &format!(
                    ", loops {}{}",
                    names(&self.loops),
                    if self.parallel && self.c_tiles.is_none() {
                        " in parallel"
                    } else {
                        ""
                    }
                );
            }
            if !self.reduce.is_empty() {
                l += &format!(", batch-reduce over {}", names(&self.reduce));
            }
            parts.push(l);
        }
        if let Some(o) = &self.c_temp {
            parts.push(format!("T[{}] -> C", names(o)));
        }
        if let Some(t) = &self.c_tiles {
            parts.push(format!(
                "blocks over {}{}: T[{}] -> C per block",
                names(&t.loops),
                if self.parallel { " in parallel" } else { "" },
                names(&t.order)
            ));
        }
        if let Some(ip) = &self.c_in_place {
            parts.push(format!(
                "C as [{}], permuted in place ({} passes)",
                names(&ip.order),
                ip.back.passes()
            ));
        }
        s += ": ";
        s += &parts.join(", ");
        s += &format!(" [{}]", self.library);
        s
    }
}

/// Bytes of a contraction's operands (as the spec reads them) and result together: the size
/// that decides whether its plan waits for this machine's profile
/// ([`crate::model::profile_for`]).
pub(crate) fn problem_bytes(preps: &[OperandPrep], c: &Layout, dtype: DType) -> usize {
    preps
        .iter()
        .map(|p| p.layout.len())
        .fold(c.len(), usize::saturating_add)
        .saturating_mul(dtype.size_bytes())
}

/// What the enumeration needs to know about the contraction.
pub(crate) struct Problem<'a> {
    pub bound: &'a BoundSpec,
    pub preps: &'a [OperandPrep],
    pub c: &'a Layout,
    pub batch: Vec<Label>,
    pub m: Vec<Label>,
    pub n: Vec<Label>,
    pub k: Vec<Label>,
    pub dtype: DType,
}

/// Result of an enumeration: candidates sorted by predicted time, and how many the
/// workspace limit excluded (with the best excluded one).
pub(crate) struct Enumeration {
    pub candidates: Vec<Candidate>,
    pub excluded: usize,
    pub best_excluded: Option<Candidate>,
}

fn dedup(opts: Vec<Vec<Label>>) -> Vec<Vec<Label>> {
    let mut out: Vec<Vec<Label>> = Vec::new();
    for o in opts {
        if !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// The longest innermost part of `order` that fuses (in this order) in every `(labels,
/// layout)` given.
fn fused_suffix(order: &[Label], tensors: &[(&[Label], &Layout)]) -> Vec<Label> {
    for start in 0..=order.len() {
        let part = &order[start..];
        let ok = tensors
            .iter()
            .all(|(labels, layout)| fuse_axes(axes_of(part, labels, layout)).is_some());
        if ok {
            return part.to_vec();
        }
    }
    Vec::new()
}

/// `(extent, stride)` of a fused group, or `(1, 0)` for none.
fn matdim(labels: &[Label], axis_labels: &[Label], l: &Layout) -> (usize, isize) {
    fuse_axes(axes_of(labels, axis_labels, l)).unwrap_or((1, 0))
}

/// Lines at the start of each contiguous run of a strided C block that [`access_penalty`]
/// prices as scattered.
const RUN_HEAD_LINES: usize = 2;

/// Lines at the start of each contiguous run of a strided A or B block that
/// [`access_penalty`] prices as scattered: past its first 2 KiB the hardware prefetcher
/// streams a run. Measured on the Xeon host (f64, 2 threads, same profile, three alternated
/// runs): tccg-6 and -8 read A packed with K outermost, whose 32 rows of 12 KiB per call lie
/// 19 MB apart, in 1536 calls of 1536x24x32 at 0.56 and 0.64 of the same-size GEMM against
/// 0.48 and 0.46 with the K-innermost pack the full price chose (its transposition is also
/// the slower one); tccg-8 in f32 0.71 against 0.54. Runs of up to 2 KiB keep the full price
/// (tccg-2, f64: 39-line rows kept its one-GEMM plan, which beat the loop of in-place calls
/// that capping at 1 KiB chose).
const RUN_STREAMED_AFTER_LINES: usize = 32;

/// Extra seconds a GEMM call spends on an operand block that is not one contiguous run of
/// memory: the lines of its short rows (or of every element, without a unit stride; a
/// strided vector's elements too) are fetched one by one rather than streamed. Scattered lines are priced at a quarter of the
/// copy bandwidth; `passes` is how often the library reads the block.
///
/// With `head_only` (the C block, which the library's micro-kernel writes a few lines per
/// row at a time whether the rows are adjacent or not) only the first [`RUN_HEAD_LINES`]
/// lines of each run count as scattered, so runs of four lines and more cost nothing extra.
/// Measured on tccg-39 (2 threads, Zen 5): 400 f32 GEMM calls writing 480 rows of 1.9 KiB
/// each in place in C ran in 14.5 ms where the full-row price had them at 30.7 ms, and the
/// planner chose a 33 ms plan (f64: 16 ms over 10–12 ms plans). A and B keep the full price:
/// the libraries pack them from each row in turn, and pricing their long runs at the head
/// too picked loops of small in-place calls that ran slower (tccg-5, f64: 72×24×72 calls,
/// 10.9 → 14.1 ms); only lines past [`RUN_STREAMED_AFTER_LINES`] in one run are free.
fn access_penalty(
    rows: (usize, isize),
    cols: (usize, isize),
    passes: f64,
    es: usize,
    p: &Profile,
    head_only: bool,
) -> f64 {
    let ((r, rs), (c, cs)) = (rows, cols);
    let line = 64usize;
    if r <= 1 || c <= 1 {
        // a vector: its elements one stride apart, each on a line of its own once the
        // stride spans a line (a dot product's strided operand, gathered element by element)
        let (len, step) = if r > 1 {
            (r, rs.unsigned_abs() * es)
        } else {
            (c, cs.unsigned_abs() * es)
        };
        if len <= 1 || step <= es {
            return 0.0;
        }
        let scattered_lines = if step >= line {
            len
        } else {
            (len * step).div_ceil(line)
        };
        let extra = scattered_lines.saturating_sub((len * es).div_ceil(line) / 2) as f64;
        return passes * extra * line as f64 * 4.0 / (p.copy_gbps(1) * 1e9);
    }
    let head = |run: usize| {
        let lines = (run * es).div_ceil(line);
        if head_only {
            lines.min(RUN_HEAD_LINES)
        } else {
            lines.min(RUN_STREAMED_AFTER_LINES)
        }
    };
    let scattered_lines = if cs.unsigned_abs() == 1 {
        if rs.unsigned_abs() == c {
            return 0.0;
        }
        r * head(c)
    } else if rs.unsigned_abs() == 1 {
        if cs.unsigned_abs() == r {
            return 0.0;
        }
        c * head(r)
    } else {
        r * c
    };
    let contiguous_lines = (r * c * es).div_ceil(line);
    let extra = scattered_lines.saturating_sub(contiguous_lines / 2) as f64;
    passes * extra * line as f64 * 4.0 / (p.copy_gbps(1) * 1e9)
}

/// C's axes ordered by decreasing stride when C fills a dense block (positive strides that
/// form a row-major layout in that order), else `None`.
fn dense_order(labels: &[Label], c: &Layout) -> Option<Vec<usize>> {
    if c.is_empty()
        || c.strides()
            .iter()
            .zip(c.dims())
            .any(|(&s, &d)| s <= 0 && d > 1)
    {
        return None;
    }
    let mut axes: Vec<usize> = (0..labels.len()).collect();
    axes.sort_by_key(|&i| std::cmp::Reverse((c.strides()[i], c.dims()[i])));
    let mut expect = 1isize;
    for &i in axes.iter().rev() {
        if c.dims()[i] > 1 && c.strides()[i] != expect {
            return None;
        }
        expect *= c.dims()[i] as isize;
    }
    Some(axes)
}

struct Pricer<'a> {
    pb: &'a Problem<'a>,
    threads: usize,
    profile: Profile,
    /// Copy costs by target order, one map per `which` of [`Pricer::copy_cost`] (looked up
    /// by slice, without building a key).
    memo: [HashMap<Vec<Label>, f64>; 3],
    in_place: HashMap<Vec<Label>, Option<(InPlaceC, f64)>>,
    tiles: HashMap<TileKey, (Arc<TransposePlan>, f64)>,
}

/// Block labels, block buffer order, threads of the block transposition.
type TileKey = (Vec<Label>, Vec<Label>, usize);

/// The block buffer of a tiled write-back is read from cache, not memory: its transposition
/// into C is priced at this share of an out-of-place transposition of the same bytes. With
/// the calls' price taking C kept in cache (`OperandSource::Resident`), the write-back of
/// the f64 rank-6 TCCG cases (302 MB of C in 4096 blocks of 384×24, 2 threads, Zen 5 host)
/// took 7.2–7.9 ms where 0.6 priced it at 6.3.
const CACHED_BLOCK_SHARE: f64 = 0.72;

/// Extra seconds per contiguous run of a tiled write-back's block in C when consecutive runs
/// are far apart (a TLB or DRAM-row miss per run, which the transposition model, seeing only
/// the share of each cache line used, does not price): the ccsd(t) blocks of
/// TCCG (384 runs of 24 f64, megabytes apart) took about 8.5 µs per block beyond their price
/// on the Zen 5 host, some 22 ns per run.
const SCATTERED_RUN_SECONDS: f64 = 20e-9;

/// Successive runs at least this far apart (bytes) count as scattered: blocks whose 192-byte
/// runs were 3 KiB apart ran as slowly as those whose runs were megabytes apart.
const SCATTERED_GAP_BYTES: usize = 1024;

/// The number of contiguous runs of `l` whose successive runs lie at least
/// [`SCATTERED_GAP_BYTES`] apart (0 when they are closer).
fn scattered_runs(l: &Layout, es: usize) -> usize {
    let mut dims: Vec<(usize, usize)> = l
        .dims()
        .iter()
        .zip(l.strides())
        .filter(|(&d, _)| d > 1)
        .map(|(&d, &s)| (s.unsigned_abs(), d))
        .collect();
    dims.sort_unstable();
    // the run: the dims that continue each other from unit stride up
    let mut run = 1usize;
    let mut rest = dims.iter();
    let gap = loop {
        match rest.next() {
            Some(&(s, d)) if s == run => run *= d,
            Some(&(s, _)) => break s,
            None => return 0,
        }
    };
    if gap.saturating_mul(es) < SCATTERED_GAP_BYTES {
        return 0;
    }
    l.len() / run
}

impl Pricer<'_> {
    /// The in-place write-back of C through `order`, with its predicted seconds (C's
    /// physical axis order is `phys`).
    fn in_place(&mut self, order: &[Label], phys: &[usize]) -> Result<Option<(InPlaceC, f64)>> {
        if let Some(x) = self.in_place.get(order) {
            return Ok(x.clone());
        }
        let out = self.pb.bound.output();
        let ext = |l: Label| self.pb.bound.extent(l);
        let phys_labels: Vec<Label> = phys.iter().map(|&i| out[i]).collect();
        let shape_p: Vec<usize> = phys_labels.iter().map(|&l| ext(l)).collect();
        let shape_o: Vec<usize> = order.iter().map(|&l| ext(l)).collect();
        let to_o: Vec<usize> = order
            .iter()
            .map(|&l| axis_of(l, &phys_labels))
            .collect::<Result<_>>()?;
        let to_p: Vec<usize> = phys_labels
            .iter()
            .map(|&l| axis_of(l, order))
            .collect::<Result<_>>()?;
        let opts = InPlaceOptions {
            threads: Some(self.threads),
            ..Default::default()
        };
        let es = self.pb.dtype.size_bytes();
        let forward = InPlacePlan::new(&shape_p, &to_o, es, &opts)?;
        let back = InPlacePlan::new(&shape_o, &to_p, es, &opts)?;
        let r = (back.passes() > 0).then(|| {
            let t = back.modelled_bytes() as f64 / (self.profile.copy_gbps(self.threads) * 1e9);
            (
                InPlaceC {
                    order: order.to_vec(),
                    forward,
                    back,
                },
                t,
            )
        });
        self.in_place.insert(order.to_vec(), r.clone());
        Ok(r)
    }

    /// The transposition of a block buffer (axes `order`, row-major) into C's block at one
    /// value of `loops`, on `threads` threads, with its predicted seconds.
    fn tile_plan(
        &mut self,
        loops: &[Label],
        order: &[Label],
        threads: usize,
    ) -> Result<(Arc<TransposePlan>, f64)> {
        let key = (loops.to_vec(), order.to_vec(), threads);
        if let Some(x) = self.tiles.get(&key) {
            return Ok(x.clone());
        }
        let pb = self.pb;
        let out = pb.bound.output();
        let rest: Vec<usize> = (0..out.len())
            .filter(|&i| !loops.contains(&out[i]))
            .collect();
        let rest_labels: Vec<Label> = rest.iter().map(|&i| out[i]).collect();
        let from = packed_layout(order, &rest_labels, |l| pb.bound.extent(l))?;
        let to = Layout::new(
            rest.iter().map(|&i| pb.c.dims()[i]).collect(),
            rest.iter().map(|&i| pb.c.strides()[i]).collect(),
        )?;
        let big = pb.c.len() * pb.dtype.size_bytes() >= STREAM_MIN_BYTES;
        let opts = TransposeOptions {
            threads: Some(threads),
            streaming: big.then_some(true),
            ..Default::default()
        };
        let ident: Vec<usize> = (0..rest.len()).collect();
        let plan = Arc::new(TransposePlan::new(&ident, &from, &to, pb.dtype, &opts)?);
        // the block's destination is part of C, in memory: no in-cache price
        let t = predict_transpose_from_memory(&plan, false, &self.profile) * CACHED_BLOCK_SHARE
            + scattered_runs(&to, pb.dtype.size_bytes()) as f64 * SCATTERED_RUN_SECONDS;
        self.tiles.insert(key, (plan.clone(), t));
        Ok((plan, t))
    }

    /// Predicted seconds of copying `src` (axes `labels`) into the row-major `order` layout
    /// (`which`: 0 = A, 1 = B, 2 = the temporary into C).
    fn copy_cost(&mut self, which: u8, order: &[Label]) -> Result<f64> {
        let slot = usize::from(which.min(2));
        if let Some(&t) = self.memo[slot].get(order) {
            return Ok(t);
        }
        let pb = self.pb;
        let ext = |l| pb.bound.extent(l);
        let out = pb.bound.output();
        let (from, to) = match which {
            0 => (
                pb.preps[0].prepared.clone(),
                packed_layout(order, &pb.preps[0].kept, ext)?,
            ),
            1 => (
                pb.preps[1].prepared.clone(),
                packed_layout(order, &pb.preps[1].kept, ext)?,
            ),
            _ => (packed_layout(order, out, ext)?, pb.c.clone()),
        };
        let ident: Vec<usize> = (0..from.ndim()).collect();
        let opts = TransposeOptions {
            threads: Some(self.threads),
            ..Default::default()
        };
        let plan = TransposePlan::new(&ident, &from, &to, pb.dtype, &opts)?;
        let mut t = predict_transpose(&plan, false, &self.profile) + COPY_STEP_SECONDS;
        if let KernelKind::Rows { n } = plan.kernel() {
            if n > 0 && n * pb.dtype.size_bytes() < SCATTERED_GAP_BYTES {
                let runs = from.len() / n;
                t += runs as f64 * SHORT_ROW_SECONDS / plan.threads().max(1) as f64;
            }
        }
        self.memo[slot].insert(order.to_vec(), t);
        Ok(t)
    }
}

/// Fixed cost of a pack or write-back step in a contraction besides its transposition (the
/// cached transposition plan's lookup, the workspace, the views); see `docs/TUNING.md`.
pub const COPY_STEP_SECONDS: f64 = 3e-7;

/// Fixed cost of executing any contraction plan (checking the operands against the plan,
/// the prepared views, the step timers); see `docs/TUNING.md`.
pub const EXECUTE_CALL_SECONDS: f64 = 9e-7;

/// Extra seconds per row, per thread, of a copy whose rows (the run both sides share) are
/// shorter than [`SCATTERED_GAP_BYTES`]: consecutive rows lie far apart on one side at
/// least, and each costs a TLB or DRAM-row miss that the transposition model, which sees the
/// share of each cache line used, does not price. Measured on tccg-32 (f64, 2 threads, Zen 5
/// host): writing its 302 MB temporary into C in 1.57 million rows of 24 elements took
/// 13.8 ms against a price of 7.0 ms, some 9 ns per row and thread beyond it.
const SHORT_ROW_SECONDS: f64 = 9e-9;

/// The layout of an operand as the GEMM sees it: packed row-major in `order`, or as it is.
fn operand_layout(order: &Option<Labels>, prep: &OperandPrep, pb: &Problem<'_>) -> Result<Layout> {
    match order {
        Some(o) => packed_layout(o, &prep.kept, |l| pb.bound.extent(l)),
        None => Ok(prep.prepared.clone()),
    }
}

/// How the GEMM covers M, N and K (in the given orders) once A, B and C (or the buffer the
/// GEMM writes) have layouts `la`, `lb`, `lc`: the fused groups, the M/N labels left as
/// loops (by decreasing stride in `lc`), the K labels left as batch-reduce loops, the
/// matrix sizes, and the scattered-access penalty of one call.
struct Geometry {
    gm: Vec<Label>,
    gn: Vec<Label>,
    gk: Vec<Label>,
    free: Vec<Label>,
    reduce: Vec<Label>,
    mnk: (usize, usize, usize),
    /// What one call costs.
    call: CallPrice,
}

/// The price of one GEMM call of a [`Geometry`].
struct CallPrice {
    /// The layout class of the call and the `(m, n, k)` to price it at
    /// ([`GemmLayout::classify`]).
    layout: GemmLayout,
    mnk: (usize, usize, usize),
    /// Where the calls read their operands from.
    operands: OperandSource,
    /// How much of the uncalibrated model's per-element costs are those of memory rather than
    /// of the caches: [`crate::model::memory_share`] of the bytes the calls' operands and C span
    /// ([`gemm_coeffs_resident`]).
    memory_share: f64,
    /// Scattered-access penalty of one call (seconds, one thread).
    penalty: f64,
    /// Bytes of C that one call of a loop writes to memory (0 where the calls write a block
    /// that stays in cache, or where the loop's whole C does).
    c_memory_bytes: f64,
}

impl CallPrice {
    /// Seconds of one call by `library` on `gt` threads while `threads / gt` such calls
    /// run at once: the one-thread model times the calibrated slowdown of a parallel loop's
    /// single-threaded calls, plus the penalty; for one call at a time (threaded, or on one
    /// thread), the model's price plus the penalty plus writing the call's C block to memory
    /// and reading it for ownership first (the GEMM model is fitted on calls that write the
    /// same C again; the concurrent-call slowdown already holds that cost).
    fn seconds(
        &self,
        p: &Profile,
        library: GemmLibrary,
        dtype: DType,
        threads: usize,
        gt: usize,
    ) -> f64 {
        let (m, n, k) = self.mnk;
        let single = gemv_seconds(p, dtype, self.mnk, gt).unwrap_or_else(|| {
            let used = crate::model::gemm_grid_threads(m, n, k, gt);
            gemm_coeffs_resident(p, library, dtype, used, self.layout, self.memory_share)
                .seconds(m, n, k)
        });
        let slowdown = p.gemm_concurrency_at(
            library,
            dtype,
            threads / gt,
            self.layout,
            self.operands,
            self.mnk,
        );
        let memory = if threads / gt <= 1 {
            2.0 * self.c_memory_bytes / (p.copy_gbps(gt) * 1e9)
        } else {
            0.0
        };
        single * slowdown + self.penalty / gt as f64 + memory
    }
}

/// Largest operand block (bytes) that [`geometry`] takes to stay in cache between
/// consecutive GEMM calls that use it: a quarter of a 1 MiB L2, leaving room for the other
/// operand's block and the C block.
const REUSED_BLOCK_BYTES: usize = 256 << 10;

/// Largest total of A and B (bytes) that [`geometry`] takes to stay in the last-level cache
/// while a loop of GEMM calls writes C: a quarter of the 32 MiB L3 of the Zen 5 host, so
/// that C's write stream and the other core's data leave it there.
const CACHED_OPERAND_BYTES: usize = 8 << 20;

/// Largest C (bytes) that a loop of GEMM calls leaves in cache: a larger one goes to memory
/// block by block ([`CallPrice::c_memory_bytes`]). A sequential loop of 16 two-thread calls
/// of 6144×384×24 writing 302 MB of C (f64, tccg-33, Xeon host) ran 39.9 ms where the GEMM
/// model priced it at 14.4 ms; writing and first reading C at the copy rate is 22.6 ms.
const CACHED_C_BYTES: usize = 32 << 20;

/// Largest block buffer (bytes) of a tiled write-back that [`geometry`] takes to stay in
/// cache while the GEMM calls write it again and again: half of a 1 MiB L2.
const RESIDENT_BLOCK_BYTES: usize = 512 << 10;

/// How many consecutive calls of a loop nest (`loops`, outermost first, around calls with
/// batch-reduce loops `reduce`) use the same block of an operand with labels `labels`: the
/// product of the innermost loops that do not index it; 1 with batch-reduce loops, which
/// move both operands on every call.
fn consecutive_uses(
    labels: &[Label],
    loops: &[Label],
    reduce: &[Label],
    ext: &dyn Fn(Label) -> usize,
) -> usize {
    if !reduce.is_empty() {
        return 1;
    }
    loops
        .iter()
        .rev()
        .take_while(|l| !labels.contains(l))
        .map(|&l| ext(l))
        .product()
}

/// `outer` are the loops the caller runs around the ones this returns as `free` (batch
/// loops, or a tiled write-back's blocks); they decide how long an operand block stays in
/// use (its access penalty is paid once per block, not once per call, when the block is
/// small enough to stay in cache). `c_resident`: the calls write a block buffer that stays
/// in cache (a tiled write-back's), not C or a temporary in memory.
fn geometry(
    pb: &Problem<'_>,
    [mo, no, ko]: [&[Label]; 3],
    [la, lb, lc]: [&Layout; 3],
    outer: &[Label],
    c_resident: bool,
    p: &Profile,
) -> Geometry {
    let (pa, pbp, out) = (&pb.preps[0], &pb.preps[1], pb.bound.output());
    let ta: (&[Label], &Layout) = (&pa.kept, la);
    let tb: (&[Label], &Layout) = (&pbp.kept, lb);
    let tc: (&[Label], &Layout) = (out, lc);
    let gm = fused_suffix(mo, &[ta, tc]);
    let gn = fused_suffix(no, &[tb, tc]);
    let gk = fused_suffix(ko, &[ta, tb]);
    let free: Vec<Label> = mo[..mo.len() - gm.len()]
        .iter()
        .chain(&no[..no.len() - gn.len()])
        .copied()
        .collect();
    let free = by_stride(&free, out, lc);
    let reduce = ko[..ko.len() - gk.len()].to_vec();
    let (m, a_rs) = matdim(&gm, &pa.kept, la);
    let (k, a_cs) = matdim(&gk, &pa.kept, la);
    let (_, b_rs) = matdim(&gk, &pbp.kept, lb);
    let (n, b_cs) = matdim(&gn, &pbp.kept, lb);
    let (_, c_rs) = matdim(&gm, out, lc);
    let (_, c_cs) = matdim(&gn, out, lc);
    let es = pb.dtype.size_bytes();
    let ext = |l: Label| pb.bound.extent(l);
    // An operand block that the next calls use again is fetched from memory by the first:
    // its penalty (when it has one) is shared by those calls.
    let loops: Vec<Label> = outer.iter().chain(&free).copied().collect();
    let per_call = |penalty: f64, labels: &[Label], elems: usize| {
        if penalty == 0.0 || elems * es > REUSED_BLOCK_BYTES {
            return penalty;
        }
        penalty / consecutive_uses(labels, &loops, &reduce, &ext).max(1) as f64
    };
    let a_penalty = access_penalty(
        (m, a_rs),
        (k, a_cs),
        (n as f64 / 1024.0).ceil(),
        es,
        p,
        false,
    );
    let b_penalty = access_penalty((k, b_rs), (n, b_cs), 1.0, es, p, false);
    let penalty = per_call(a_penalty, &pa.kept, m * k)
        + per_call(b_penalty, &pbp.kept, k * n)
        + access_penalty((m, c_rs), (n, c_cs), 2.0, es, p, true);
    let priced = GemmLayout::classify((m, n, k), [a_rs, a_cs], [b_rs, b_cs], [c_rs, c_cs]);
    // Operands that stay in the last-level cache while the calls write C are read by each
    // call from there, not from memory; C goes to memory unless it is a block buffer that
    // stays in cache.
    let operand_bytes = |labels: &[Label]| labels.iter().map(|&l| ext(l)).product::<usize>() * es;
    let ab_bytes = operand_bytes(&pa.kept) + operand_bytes(&pbp.kept);
    let cached = ab_bytes <= CACHED_OPERAND_BYTES;
    let spanned = ab_bytes + pb.c.len() * es;
    let operands = match (cached, c_resident) {
        (false, false) => OperandSource::Memory,
        (false, true) => OperandSource::Streamed,
        (true, false) => OperandSource::Cache,
        (true, true) => OperandSource::Resident,
    };
    // a loop of calls (of more than one call) writes C block by block to memory when the
    // whole of it is too large to stay in cache; batch-reduce calls write the same block
    // again, from cache after the first
    let prod = |ls: &[Label]| ls.iter().map(|&l| ext(l)).product::<usize>();
    let reductions = prod(&reduce);
    let calls = prod(outer) * prod(&free) * reductions;
    let c_memory_bytes = if !c_resident && calls > 1 && pb.c.len() * es > CACHED_C_BYTES {
        (m * n * es) as f64 / reductions as f64
    } else {
        0.0
    };
    Geometry {
        gm,
        gn,
        gk,
        free,
        reduce,
        mnk: (m, n, k),
        call: CallPrice {
            layout: priced.0,
            mnk: (priced.1, priced.2, k),
            operands,
            memory_share: memory_share(spanned as f64),
            penalty,
            c_memory_bytes,
        },
    }
}

/// How many block shapes a tiled enumeration tries per choice of group orders and packs.
const MAX_BLOCK_SETS: usize = 8;

/// The sets of free labels (M and N) whose values make the blocks of a tiled write-back: a
/// set qualifies when the other labels' extents multiply to at most `max_elems` and dropping
/// any label from it would exceed that (the largest blocks that fit). All subsets are tried
/// for up to 12 free labels, else only leading parts of `free`; the `MAX_BLOCK_SETS` with
/// the largest blocks are kept (fewer, longer GEMM calls), labels in `free`'s order.
fn block_sets(free: &[Label], ext: &dyn Fn(Label) -> usize, max_elems: usize) -> Vec<Vec<Label>> {
    let block = |mask: u64| -> usize {
        free.iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) == 0)
            .map(|(_, &l)| ext(l))
            .fold(1usize, |a, b| a.saturating_mul(b))
    };
    let fits = |mask: u64| block(mask) <= max_elems;
    let maximal = |mask: u64| {
        fits(mask) && (0..free.len()).all(|b| mask & (1 << b) == 0 || !fits(mask & !(1 << b)))
    };
    let masks: Vec<u64> = if free.len() <= 12 {
        (0..1u64 << free.len()).filter(|&m| maximal(m)).collect()
    } else {
        (0..=free.len())
            .map(|i| (1u64 << i) - 1)
            .filter(|&m| fits(m))
            .take(1)
            .collect()
    };
    let mut ranked: Vec<(usize, u64)> = masks.into_iter().map(|m| (block(m), m)).collect();
    ranked.sort_by_key(|&(b, m)| (std::cmp::Reverse(b), m));
    ranked
        .into_iter()
        .take(MAX_BLOCK_SETS)
        .map(|(_, m)| {
            free.iter()
                .enumerate()
                .filter(|(i, _)| m & (1 << i) != 0)
                .map(|(_, &l)| l)
                .collect()
        })
        .collect()
}

/// What the tiled candidates of one choice of group orders and packs share.
struct TileSpace<'a> {
    /// Batch, M, N and K labels in the orders of this choice.
    groups: [&'a [Label]; 4],
    /// A's and B's packed orders (`None`: used as they are).
    packs: [&'a Option<Labels>; 2],
    /// A's and B's layouts as the GEMM sees them (packed or as they are).
    layouts: [&'a Layout; 2],
    /// The sets of M and N labels whose values are blocks ([`tile_block_sets`]).
    sets: &'a [Vec<Label>],
    libs: &'a [GemmLibrary],
    tile_bytes: usize,
    prepare_cost: f64,
    sums_bytes: usize,
    limit: usize,
}

/// Identity of a tiled candidate before the library and parallelism choices: packs, block
/// labels, block order, GEMM groups, inner loops.
type TiledKey = ([Option<Labels>; 2], Labels, Labels, [Labels; 3], Labels);

/// The sets of M and N labels (in the orders `mo`, `no`) whose values are the blocks of tiled write-backs:
/// those of [`block_sets`] under `tile_bytes`, and under `wide_bytes` too when given; none
/// when C is at most four blocks of `tile_bytes` (no tiled candidate is offered then). They
/// depend on the M and N orders only, so they are found once per choice of orders, not for
/// every choice of packs.
fn tile_block_sets(
    pb: &Problem<'_>,
    [mo, no]: [&[Label]; 2],
    tile_bytes: usize,
    wide_bytes: Option<usize>,
) -> Vec<Vec<Label>> {
    let es = pb.dtype.size_bytes();
    let c_len = pb.c.len();
    if c_len == 0 || c_len.saturating_mul(es) <= tile_bytes.saturating_mul(4) {
        return Vec::new();
    }
    let ext = |l: Label| pb.bound.extent(l);
    let free = [mo, no].concat();
    let mut sets = block_sets(&free, &ext, tile_bytes / es);
    if let Some(w) = wide_bytes {
        for s in block_sets(&free, &ext, w / es) {
            if !sets.contains(&s) {
                sets.push(s);
            }
        }
    }
    sets
}

/// Adds the tiled write-back candidates of one choice of group orders and packs: blocks are
/// the values of every batch label and of a set of M and N labels from [`block_sets`] (a
/// block of C holds at most `tile_bytes`, or the largest blocks under `wide_bytes` too, and
/// blocks under 1/64 of `tile_bytes` are skipped), each with the block buffer ordered `[M|N]`
/// or `[N|M]`. Offered only when C is larger than four blocks.
fn tiled_candidates(
    pricer: &mut Pricer<'_>,
    sp: &TileSpace<'_>,
    seen: &mut HashSet<TiledKey>,
    all: &mut Vec<Candidate>,
    excluded: &mut Vec<Candidate>,
) -> Result<()> {
    let pb = pricer.pb;
    let threads = pricer.threads;
    let out = pb.bound.output();
    let ext = |l: Label| pb.bound.extent(l);
    let es = pb.dtype.size_bytes();
    let [batch, mo, no, ko] = sp.groups;
    let [ac, bc] = sp.packs;
    let (pa, pbp) = (&pb.preps[0], &pb.preps[1]);
    // no block sets: C is too small to tile (`tile_block_sets`)
    if sp.sets.is_empty() {
        return Ok(());
    }
    let prod = |ls: &[Label]| ls.iter().map(|&l| ext(l)).product::<usize>();
    let [la, lb] = sp.layouts;
    let mut costs = StepCosts {
        prepare: sp.prepare_cost,
        ..Default::default()
    };
    if let Some(o) = ac {
        costs.pack_a = pricer.copy_cost(0, o)?;
    }
    if let Some(o) = bc {
        costs.pack_b = pricer.copy_cost(1, o)?;
    }
    let packs_bytes = es
        * (ac.as_ref().map_or(0, |_| pa.prepared.len())
            + bc.as_ref().map_or(0, |_| pbp.prepared.len()));
    for set in sp.sets {
        let rest = |g: &[Label]| -> Vec<Label> {
            g.iter().copied().filter(|l| !set.contains(l)).collect()
        };
        let (mr, nr) = (&rest(mo)[..], &rest(no)[..]);
        let block_len = prod(mr) * prod(nr);
        // Tiny blocks cost a GEMM call and a transposition call each.
        if block_len * es < sp.tile_bytes / 64 {
            continue;
        }
        let tiles: Vec<Label> = batch.iter().chain(set).copied().collect();
        let tiles: Labels = by_stride(&tiles, out, pb.c).into();
        let blocks = prod(&tiles);
        for order in [[mr, nr].concat(), [nr, mr].concat()] {
            let order: Labels = order.into();
            let lt = packed_layout(&order, out, ext)?;
            // the block buffer stays in cache when it is at most half the L2
            let resident = block_len * es <= RESIDENT_BLOCK_BYTES;
            let Geometry {
                gm,
                gn,
                gk,
                free: inner,
                reduce,
                mnk: (m, n, k),
                call,
            } = geometry(
                pb,
                [mr, nr, ko],
                [la, lb, &lt],
                &tiles,
                resident,
                &pricer.profile,
            );
            let [gm, gn, gk, inner, reduce]: [Labels; 5] =
                [gm.into(), gn.into(), gk.into(), inner.into(), reduce.into()];
            let key = (
                [ac.clone(), bc.clone()],
                tiles.clone(),
                order.clone(),
                [gm.clone(), gn.clone(), gk.clone()],
                inner.clone(),
            );
            if !seen.insert(key) {
                continue;
            }
            let independent = prod(&inner);
            let reductions = prod(&reduce);
            let calls = blocks * independent * reductions.max(1);
            for &library in sp.libs {
                let par_opts: &[bool] = if threads > 1 && blocks > 1 && library == GemmLibrary::Gemm
                {
                    &[false, true]
                } else {
                    &[false]
                };
                for &parallel in par_opts {
                    let gt = if parallel { 1 } else { threads };
                    let (plan, per_block) = pricer.tile_plan(&tiles, &order, gt)?;
                    let per = call.seconds(&pricer.profile, library, pb.dtype, threads, gt);
                    let waves = if parallel {
                        blocks.div_ceil(threads)
                    } else {
                        blocks
                    };
                    let buffers = if parallel { threads.min(blocks) } else { 1 };
                    // each buffer rounded up to whole 64-byte lines, plus one for alignment
                    let workspace = sp.sums_bytes
                        + packs_bytes
                        + buffers * (block_len * es).div_ceil(64) * 64
                        + 64;
                    let c = Candidate {
                        a_pack: ac.clone(),
                        b_pack: bc.clone(),
                        c_temp: None,
                        c_in_place: None,
                        c_tiles: Some(TiledC {
                            loops: tiles.clone(),
                            order: order.clone(),
                            block_len,
                            plan,
                        }),
                        m: gm.clone(),
                        n: gn.clone(),
                        k: gk.clone(),
                        loops: inner.clone(),
                        reduce: reduce.clone(),
                        parallel,
                        library,
                        gemm_threads: gt,
                        gemm_shape: (calls, m, n, k),
                        workspace_bytes: workspace,
                        predicted: StepCosts {
                            gemm: (waves * independent * reductions.max(1)) as f64 * per,
                            write_c: waves as f64 * per_block,
                            ..costs
                        },
                        batch_loops: 0,
                        gett: None,
                        nested: None,
                    };
                    if workspace > sp.limit {
                        excluded.push(c);
                    } else {
                        all.push(c);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The GETT candidate: every M, N and K index in the engine's order (from
/// [`gett_orient`]), batch indices as the engine's outer loop; priced as
/// [`crate::model::gett_seconds`] does, its work computed once for the price and the tile mode.
fn gett_candidate(
    pb: &Problem<'_>,
    threads: usize,
    p: &Profile,
    prepare_cost: f64,
    sums_bytes: usize,
) -> Candidate {
    let (pa, pbp) = (&pb.preps[0], &pb.preps[1]);
    let out = pb.bound.output();
    let ext = |l: Label| pb.bound.extent(l);
    let sa = |l| stride_of(l, &pa.kept, &pa.prepared);
    let sb = |l| stride_of(l, &pbp.kept, &pbp.prepared);
    let sc = |l| stride_of(l, out, pb.c);
    let idx = |g: &[Label], f: &dyn Fn(Label) -> [isize; 2]| -> Vec<GettIndex> {
        g.iter().map(|&l| (ext(l), f(l))).collect()
    };
    let m = idx(&pb.m, &|l| [sa(l), sc(l)]);
    let n = idx(&pb.n, &|l| [sb(l), sc(l)]);
    let k = idx(&pb.k, &|l| [sa(l), sb(l)]);
    let o = gett_orient(&m, &n, &k);
    let (rows, cols) = if o.swap {
        (&pb.n, &pb.m)
    } else {
        (&pb.m, &pb.n)
    };
    let pick = |g: &[Label], order: &[usize]| -> Labels { order.iter().map(|&i| g[i]).collect() };
    let prod = |g: &[Label]| g.iter().map(|&l| ext(l)).product::<usize>();
    let batches = prod(&pb.batch);
    let (ms, ns, ks) = (prod(&pb.m), prod(&pb.n), prod(&pb.k));
    let blk = gett_blocking(pb.dtype);
    let es = pb.dtype.size_bytes();
    let (mm, nn) = if o.swap { (ns, ms) } else { (ms, ns) };
    // per thread: an A block, a B block and a tile
    let workspace = sums_bytes
        + threads
            * es
            * (blk.mc.min(mm.max(1)) * gett_depth(ks, blk.kc)
                + blk.nc.min(nn.max(1)) * gett_depth(ks, blk.kc)
                + blk.mr * blk.nr)
        + 64 * threads;
    let work = gett_work(pb.dtype, threads, batches, &m, &n, &k, false);
    let gemm = work.seconds(p, pb.dtype, threads, batches);
    let direct_tiles = work.scattered == 0.0;
    Candidate {
        a_pack: None,
        b_pack: None,
        c_temp: None,
        c_in_place: None,
        c_tiles: None,
        m: pick(rows, &o.m),
        n: pick(cols, &o.n),
        k: pick(&pb.k, &o.k),
        loops: pb.batch.as_slice().into(),
        reduce: Labels::from([]),
        parallel: threads > 1,
        library: GemmLibrary::Native,
        gemm_threads: threads,
        gemm_shape: (batches, mm, nn, ks),
        workspace_bytes: workspace,
        predicted: StepCosts {
            prepare: prepare_cost,
            gemm,
            ..Default::default()
        },
        batch_loops: pb.batch.len(),
        nested: None,
        gett: Some(GettRun {
            swap: o.swap,
            direct_tiles,
        }),
    }
}

/// Lists every candidate of a two-operand contraction under `options`, priced and sorted.
///
/// `loops`: the nested-loop candidate ([`super::loops::loops_candidate`]), priced beside the
/// others when there is one.
pub(crate) fn enumerate(
    pb: &Problem<'_>,
    options: &PlanOptions,
    loops: Option<Candidate>,
) -> Result<Enumeration> {
    let threads = crate::threads::resolve(options.threads)?;
    let (pa, pbp) = (&pb.preps[0], &pb.preps[1]);
    let out = pb.bound.output();
    let ext = |l| pb.bound.extent(l);
    let es = pb.dtype.size_bytes();
    let libs: Vec<GemmLibrary> = match options.library {
        Some(l) => vec![l],
        None => GemmLibrary::ALL.to_vec(),
    };
    let m_opts = dedup(vec![
        by_stride(&pb.m, out, pb.c),
        by_stride(&pb.m, &pa.kept, &pa.prepared),
    ]);
    let n_opts = dedup(vec![
        by_stride(&pb.n, out, pb.c),
        by_stride(&pb.n, &pbp.kept, &pbp.prepared),
    ]);
    let k_opts = dedup(vec![
        by_stride(&pb.k, &pa.kept, &pa.prepared),
        by_stride(&pb.k, &pbp.kept, &pbp.prepared),
    ]);
    let batch = by_stride(&pb.batch, out, pb.c);
    let mut pricer = Pricer {
        pb,
        threads,
        profile: profile_for(problem_bytes(pb.preps, pb.c, pb.dtype)),
        memo: Default::default(),
        in_place: HashMap::default(),
        tiles: HashMap::default(),
    };
    // In-place write-backs are slower than out-of-place ones and their planning searches
    // swap sequences: offered only when the limit leaves no room for a temporary C.
    let c_phys = dense_order(out, pb.c).filter(|_| {
        options
            .workspace_limit
            .is_some_and(|l| l < pb.c.len() * pb.dtype.size_bytes())
    });
    let sums_bytes: usize = pb
        .preps
        .iter()
        .filter(|p| !p.summed.is_empty())
        .map(|p| p.prepared.len() * es)
        .sum();
    let prepare_cost: f64 = EXECUTE_CALL_SECONDS
        + pb.preps
            .iter()
            .filter(|p| !p.summed.is_empty())
            .map(|p| (p.layout.len() * es) as f64 / (pricer.profile.copy_gbps(threads) * 1e9))
            .sum::<f64>();
    let limit = options.workspace_limit.unwrap_or(usize::MAX);
    if sums_bytes > limit {
        return Err(Error::Workspace {
            needed: sums_bytes,
            limit,
        });
    }

    let tile_bytes = options.tile_bytes.unwrap_or(DEFAULT_TILE_BYTES).max(1);
    let wide_bytes = options.tile_bytes.is_none().then_some(WIDE_TILE_BYTES);
    let mut seen_tiles = HashSet::default();
    let mut seen = HashSet::default();
    let mut all: Vec<Candidate> = loops.into_iter().collect();
    let mut excluded = Vec::new();
    for mo in &m_opts {
        for no in &n_opts {
            for ko in &k_opts {
                let order = |g: [&[Label]; 3]| -> Option<Labels> { Some(g.concat().into()) };
                let a_choices = [None, order([&batch, mo, ko]), order([&batch, ko, mo])];
                let b_choices = [None, order([&batch, ko, no]), order([&batch, no, ko])];
                let mn: Labels = [&batch[..], mo, no].concat().into();
                let nm: Labels = [&batch[..], no, mo].concat().into();
                let mut c_choices = vec![
                    (None, false),
                    (Some(mn.clone()), false),
                    (Some(nm.clone()), false),
                ];
                if c_phys.is_some() {
                    c_choices.push((Some(mn), true));
                    c_choices.push((Some(nm), true));
                }
                let tile_sets = tile_block_sets(pb, [mo, no], tile_bytes, wide_bytes);
                // the layouts the GEMM sees, once per choice
                let c_layouts = c_choices
                    .iter()
                    .map(|(cc, _)| match cc {
                        Some(o) => packed_layout(o, out, ext),
                        None => Ok(pb.c.clone()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                for ac in &a_choices {
                    let la = operand_layout(ac, pa, pb)?;
                    for bc in &b_choices {
                        let lb = operand_layout(bc, pbp, pb)?;
                        tiled_candidates(
                            &mut pricer,
                            &TileSpace {
                                groups: [&batch, mo, no, ko],
                                packs: [ac, bc],
                                layouts: [&la, &lb],
                                sets: &tile_sets,
                                libs: &libs,
                                tile_bytes,
                                prepare_cost,
                                sums_bytes,
                                limit,
                            },
                            &mut seen_tiles,
                            &mut all,
                            &mut excluded,
                        )?;
                        for ((cc, in_place), lc) in c_choices.iter().zip(&c_layouts) {
                            let Geometry {
                                gm,
                                gn,
                                gk,
                                free,
                                reduce,
                                mnk: (m, n, k),
                                call,
                            } = geometry(
                                pb,
                                [mo, no, ko],
                                [&la, &lb, lc],
                                &batch,
                                false,
                                &pricer.profile,
                            );
                            let mut loops = batch.clone();
                            loops.extend(free);
                            let [gm, gn, gk, loops, reduce]: [Labels; 5] =
                                [gm.into(), gn.into(), gk.into(), loops.into(), reduce.into()];
                            let ip = match (cc, in_place, &c_phys) {
                                (Some(o), true, Some(phys)) => match pricer.in_place(o, phys)? {
                                    Some(x) => Some(x),
                                    None => continue, // C is already in that order
                                },
                                _ => None,
                            };
                            let key = (
                                ac.clone(),
                                bc.clone(),
                                cc.clone(),
                                *in_place,
                                gm.clone(),
                                gn.clone(),
                                gk.clone(),
                                loops.clone(),
                            );
                            if !seen.insert(key) {
                                continue;
                            }
                            let workspace = sums_bytes
                                + es * (ac.as_ref().map_or(0, |_| pa.prepared.len())
                                    + bc.as_ref().map_or(0, |_| pbp.prepared.len())
                                    + match (cc, &ip) {
                                        (Some(_), None) => pb.c.len(),
                                        _ => 0,
                                    })
                                + ip.as_ref().map_or(0, |(x, _)| {
                                    x.forward.workspace_bytes().max(x.back.workspace_bytes())
                                });
                            let independent: usize = loops.iter().map(|&l| ext(l)).product();
                            let reductions: usize = reduce.iter().map(|&l| ext(l)).product();
                            let mut costs = StepCosts {
                                prepare: prepare_cost,
                                ..Default::default()
                            };
                            if let Some(o) = ac {
                                costs.pack_a = pricer.copy_cost(0, o)?;
                            }
                            if let Some(o) = bc {
                                costs.pack_b = pricer.copy_cost(1, o)?;
                            }
                            match (cc, &ip) {
                                (Some(o), None) => costs.write_c = pricer.copy_cost(2, o)?,
                                (_, Some((_, t))) => costs.write_c = *t,
                                _ => {}
                            }
                            let p = &pricer.profile;
                            let calls = independent * reductions.max(1);
                            for &library in &libs {
                                let par_opts: &[bool] = if threads > 1
                                    && independent > 1
                                    && library == GemmLibrary::Gemm
                                {
                                    &[false, true]
                                } else {
                                    &[false]
                                };
                                for &parallel in par_opts {
                                    let gt = if parallel { 1 } else { threads };
                                    let per = call.seconds(p, library, pb.dtype, threads, gt);
                                    let waves = if parallel {
                                        independent.div_ceil(threads)
                                    } else {
                                        independent
                                    };
                                    let c = Candidate {
                                        a_pack: ac.clone(),
                                        b_pack: bc.clone(),
                                        c_temp: if ip.is_some() { None } else { cc.clone() },
                                        c_in_place: ip.as_ref().map(|x| x.0.clone()),
                                        c_tiles: None,
                                        m: gm.clone(),
                                        n: gn.clone(),
                                        k: gk.clone(),
                                        loops: loops.clone(),
                                        reduce: reduce.clone(),
                                        parallel,
                                        library,
                                        gemm_threads: gt,
                                        gemm_shape: (calls, m, n, k),
                                        workspace_bytes: workspace,
                                        predicted: StepCosts {
                                            gemm: waves as f64 * reductions.max(1) as f64 * per,
                                            ..costs
                                        },
                                        batch_loops: batch.len(),
                                        gett: None,
                                        nested: None,
                                    };
                                    if workspace > limit {
                                        excluded.push(c);
                                    } else {
                                        all.push(c);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // GETT is offered when our own library is asked for. The automatic choice leaves it
    // out: on the TCCG set its model never ranked it first where its tiles store in place
    // except on tccg-15 to -18 (f64), where it ran 0.8-1.0x as fast as the copy-free loop
    // of GEMM calls it displaced (our kernel trails the `gemm` crate's on GEMM-shaped work),
    // and where tiles are written element by element they touch one page per element when
    // C's other strides are large, which its model does not price (tccg-3 and -7 ran
    // 1.5-3x slower than TTGT).
    if gett_simd_available(pb.dtype) && options.library == Some(GemmLibrary::Native) {
        let c = gett_candidate(pb, threads, &pricer.profile, prepare_cost, sums_bytes);
        if c.workspace_bytes > limit {
            excluded.push(c);
        } else {
            all.push(c);
        }
    }
    let excluded_count = excluded.len();
    let best_excluded = excluded
        .into_iter()
        .min_by(|x, y| by_time(&rank(x), &rank(y)));
    Ok(Enumeration {
        excluded: excluded_count,
        best_excluded,
        candidates: sorted_by_time(all),
    })
}

/// What candidates are ranked by: predicted seconds, then fewer copies.
fn rank(c: &Candidate) -> (f64, usize) {
    (c.predicted.total(), c.copies())
}

fn by_time(x: &(f64, usize), y: &(f64, usize)) -> std::cmp::Ordering {
    x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
}

/// `v` in the order of [`rank`], ties in their order in `v`. The keys are sorted, not the
/// candidates: a candidate is 656 bytes, and sorting hundreds of them moved each one
/// a dozen times (a tenth of planning time).
fn sorted_by_time(v: Vec<Candidate>) -> Vec<Candidate> {
    let mut keys: Vec<((f64, usize), usize)> =
        v.iter().enumerate().map(|(i, c)| (rank(c), i)).collect();
    keys.sort_by(|x, y| by_time(&x.0, &y.0).then(x.1.cmp(&y.1)));
    let mut slots: Vec<Option<Candidate>> = v.into_iter().map(Some).collect();
    keys.iter().filter_map(|&(_, i)| slots[i].take()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of a block in C: unit-stride dims that continue each other make one run; runs 1 KiB
    /// or more apart count, closer ones do not.
    #[test]
    fn scattered_runs_count_runs_far_apart() {
        let l = |d: &[usize], s: &[isize]| Layout::new(d.to_vec(), s.to_vec()).unwrap();
        // 16 rows of 24 f64 (192 B) 1 MiB apart
        assert_eq!(scattered_runs(&l(&[16, 24], &[131072, 1]), 8), 16);
        // rows 512 B apart: not scattered; 1 KiB apart: scattered
        assert_eq!(scattered_runs(&l(&[16, 24], &[64, 1]), 8), 0);
        assert_eq!(scattered_runs(&l(&[16, 24], &[128, 1]), 8), 16);
        // [4][3][24] with the 3 × 24 contiguous: 4 runs of 72, pages apart; negative strides
        assert_eq!(scattered_runs(&l(&[4, 3, 24], &[-100000, 24, 1]), 4), 4);
        // no unit stride: every element is a run
        assert_eq!(scattered_runs(&l(&[5, 7], &[70000, 256]), 4), 35);
        // dense, or a single run: nothing scattered
        assert_eq!(scattered_runs(&l(&[8, 8], &[8, 1]), 8), 0);
        assert_eq!(scattered_runs(&l(&[1, 300], &[99999, 1]), 8), 0);
    }

    /// The scattered-access price: dense blocks and single rows cost nothing; far-apart rows
    /// cost half their lines at a quarter of the copy bandwidth, or with `head_only` their
    /// first two lines, so that rows of four lines and more cost nothing.
    #[test]
    fn access_penalty_prices_runs() {
        let p = Profile::builtin(vec![25.6]);
        let line_s = 64.0 * 4.0 / 25.6e9;
        let close = |x: f64, want_lines: f64| (x - want_lines * line_s).abs() < 1e-15;
        for head_only in [false, true] {
            // dense (row stride = row length) and one-row blocks: free
            assert_eq!(access_penalty((8, 24), (24, 1), 1.0, 8, &p, head_only), 0.0);
            assert_eq!(
                access_penalty((1, 9999), (24, 1), 1.0, 8, &p, head_only),
                0.0
            );
            // 10 rows of 8 f64 (one line), far apart: 10 scattered - 10/2 = 5 extra lines
            assert!(close(
                access_penalty((10, 9999), (8, 1), 1.0, 8, &p, head_only),
                5.0
            ));
            // column runs are priced like row runs; `passes` multiplies
            assert!(close(
                access_penalty((8, 1), (10, 9999), 2.0, 8, &p, head_only),
                10.0
            ));
        }
        // a strided vector: 1536 f64 a line or more apart cost a line each, less half of the
        // 192 lines they would fill; two elements per line at a 16-byte stride; contiguous
        // vectors and single elements cost nothing
        for (r, c) in [((1536, 256), (1, 0)), ((1, 0), (1536, -256))] {
            assert!(close(
                access_penalty(r, c, 1.0, 8, &p, false),
                1536.0 - 96.0
            ));
        }
        assert!(close(
            access_penalty((1536, 2), (1, 0), 1.0, 8, &p, false),
            384.0 - 96.0
        ));
        assert_eq!(access_penalty((1536, 1), (1, 0), 1.0, 8, &p, false), 0.0);
        assert_eq!(access_penalty((1, 7), (1, 3), 1.0, 8, &p, false), 0.0);
        // 384 rows of 384 f64 (48 lines each): the first 32 lines of each, less half of all
        // 18432 lines, or nothing at the head
        assert!(close(
            access_penalty((384, 98304), (384, 1), 1.0, 8, &p, false),
            384.0 * 32.0 - 9216.0
        ));
        // rows of 192 lines: streamed past their first 32, so no more than half scattered
        assert_eq!(
            access_penalty((32, 2359296), (1536, 1), 1.0, 8, &p, false),
            0.0
        );
        assert_eq!(
            access_penalty((384, 98304), (384, 1), 1.0, 8, &p, true),
            0.0
        );
        // rows of 3 lines: head_only charges 2 of them, less half of all 3
        assert!(close(
            access_penalty((10, 9999), (24, 1), 1.0, 8, &p, true),
            5.0
        ));
        assert!(close(
            access_penalty((10, 9999), (24, 1), 1.0, 8, &p, false),
            15.0
        ));
    }

    #[test]
    fn consecutive_uses_count_the_inner_loops_an_operand_does_not_have() {
        let ext = |l: Label| match l {
            Label::Letter('f') => 16,
            Label::Letter('e') => 24,
            Label::Letter('d') => 5,
            _ => 7,
        };
        let loops = labels("fed");
        // tccg-34's B (labels c, b, e, g): the same block for every d, so 5 calls in a row
        assert_eq!(consecutive_uses(&labels("cbeg"), &loops, &[], &ext), 5);
        // its A (g, f, d, a) changes on every call
        assert_eq!(consecutive_uses(&labels("gfda"), &loops, &[], &ext), 1);
        // an operand that no loop indexes: one block for the whole nest
        assert_eq!(
            consecutive_uses(&labels("xy"), &loops, &[], &ext),
            16 * 24 * 5
        );
        // batch-reduce loops move both operands on every call
        assert_eq!(
            consecutive_uses(&labels("cbeg"), &loops, &labels("k"), &ext),
            1
        );
    }

    fn labels(s: &str) -> Vec<Label> {
        s.chars().map(Label::Letter).collect()
    }

    /// The tccg-7 shape: C = e d c b a with extents 48 24 32 32 48; blocks of at most 64 Ki
    /// elements.
    #[test]
    fn block_sets_are_the_largest_blocks_that_fit() {
        let free = labels("ecbad");
        let ext = |l: Label| match l {
            Label::Letter('e') | Label::Letter('a') => 48,
            Label::Letter('d') => 24,
            _ => 32,
        };
        let sets = block_sets(&free, &ext, 1 << 16);
        assert!(!sets.is_empty() && sets.len() <= MAX_BLOCK_SETS);
        let block = |set: &[Label]| -> usize {
            free.iter()
                .filter(|l| !set.contains(l))
                .map(|&l| ext(l))
                .product()
        };
        for set in &sets {
            // fits, and no label can leave the set without the block exceeding the bound
            assert!(block(set) <= 1 << 16, "{set:?}");
            for l in set {
                let smaller: Vec<Label> = set.iter().copied().filter(|x| x != l).collect();
                assert!(block(&smaller) > 1 << 16, "{set:?} is not maximal");
            }
        }
        // the block over b and c (a e d in the block: 55 296 elements) is the largest
        assert_eq!(sets[0], labels("cb"));
        // every set is in `free`'s order and sorted by decreasing block size
        assert!(sets.windows(2).all(|w| block(&w[0]) >= block(&w[1])));
        // a bound below the smallest extent leaves only the full set (1-element blocks)
        assert_eq!(block_sets(&free, &ext, 1), vec![free.clone()]);
    }
}

//! The prices of a candidate's steps: its packs and write-backs (transposition plans priced
//! by the transpose model, with what that model does not see: short rows, scattered runs,
//! blocks read from cache), and its GEMM calls (the GEMM model at the call's layout class and
//! operand residency, plus the scattered-access penalty of strided operand blocks).

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::candidate::{InPlaceC, Labels, Problem};
use super::groups::{axes_of, axis_of, by_stride, fuse_axes, packed_layout};
use super::prepare::OperandPrep;
use crate::einsum::Label;
use crate::error::Result;
use crate::model::{
    gemm_coeffs_resident, gemv_seconds, memory_share, predict_transpose,
    predict_transpose_from_memory, skinny_seconds, GemmLayout, GemmLibrary, OperandSource, Profile,
    SkinnyForm,
};
use crate::tensor::{DType, Layout};
use crate::transpose::inplace::{InPlaceOptions, InPlacePlan};
use crate::transpose::{KernelKind, TransposeOptions, TransposePlan, STREAM_MIN_BYTES};

/// The longest innermost part of `order` that fuses (in this order) in every `(labels,
/// layout)` given.
///
/// A part that fuses still fuses without its outermost label, so the part is grown from
/// the innermost label outwards, each label checked once against the part so far. A zero
/// extent makes any group fuse ([`fuse_axes`]), which breaks that order: such tensors are
/// searched part by part.
pub(super) fn fused_suffix(order: &[Label], tensors: &[(&[Label], &Layout)]) -> Vec<Label> {
    if tensors.iter().any(|(_, l)| l.dims().contains(&0)) {
        return fused_suffix_by_search(order, tensors);
    }
    // per tensor, the extent and stride of the outermost axis (of extent above 1) so far
    let mut outermost: smallvec::SmallVec<[Option<(usize, isize)>; 4]> =
        smallvec::smallvec![None; tensors.len()];
    let mut start = order.len();
    'grow: while start > 0 {
        let label = order[start - 1];
        let mut next = outermost.clone();
        for (t, (labels, layout)) in tensors.iter().enumerate() {
            let Some(i) = labels.iter().position(|&x| x == label) else {
                continue;
            };
            let (d, s) = (layout.dims()[i], layout.strides()[i]);
            if d == 1 {
                continue;
            }
            if let Some((inner_d, inner_s)) = outermost[t] {
                if s != inner_s.wrapping_mul(inner_d as isize) {
                    break 'grow;
                }
            }
            next[t] = Some((d, s));
        }
        outermost = next;
        start -= 1;
    }
    order[start..].to_vec()
}

/// [`fused_suffix`] by trying every part from the longest down.
fn fused_suffix_by_search(order: &[Label], tensors: &[(&[Label], &Layout)]) -> Vec<Label> {
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
/// streams a run (see `docs/TUNING.md`).
const RUN_STREAMED_AFTER_LINES: usize = 32;

/// Stride (bytes) whose multiples put the runs of a block in the same sets of the L1 and L2
/// caches (64 sets × 64 B per L1 way, and a divisor of every common L2 way size).
const CONFLICT_STRIDE_BYTES: usize = 64 << 10;

/// Most runs a stride of [`CONFLICT_STRIDE_BYTES`] multiples may hold before they conflict
/// (the L1's associativity): beyond it [`access_penalty`] prices every line as scattered
/// (`docs/TUNING.md`, "Loops outside a packed operand's K").
const CONFLICT_MIN_RUNS: usize = 8;

/// Extra seconds a GEMM call spends on an operand block that is not one contiguous run of
/// memory: the lines of its short rows (or of every element, without a unit stride; a
/// strided vector's elements too) are fetched one by one rather than streamed. Scattered lines are priced at a quarter of the
/// copy bandwidth; `passes` is how often the library reads the block.
///
/// With `head_only` (the C block, which the library's micro-kernel writes a few lines per
/// row at a time whether the rows are adjacent or not) only the first [`RUN_HEAD_LINES`]
/// lines of each run count as scattered, so runs of four lines and more cost nothing extra.
/// A and B keep the full price: the libraries pack them from each row in turn; only lines
/// past [`RUN_STREAMED_AFTER_LINES`] in one run are free (see `docs/TUNING.md`). More than
/// [`CONFLICT_MIN_RUNS`] runs a multiple of [`CONFLICT_STRIDE_BYTES`] apart share cache sets
/// and evict each other: all their lines count as scattered.
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
    // the lines priced as scattered in each of `runs` runs of `run` elements, `stride`
    // elements apart
    let scattered_per_run = |run: usize, runs: usize, stride: isize| {
        let lines = (run * es).div_ceil(line);
        let conflicting = runs > CONFLICT_MIN_RUNS
            && (stride.unsigned_abs() * es).is_multiple_of(CONFLICT_STRIDE_BYTES);
        if conflicting {
            lines
        } else if head_only {
            lines.min(RUN_HEAD_LINES)
        } else {
            lines.min(RUN_STREAMED_AFTER_LINES)
        }
    };
    let scattered_lines = if cs.unsigned_abs() == 1 {
        if rs.unsigned_abs() == c {
            return 0.0;
        }
        r * scattered_per_run(c, r, rs)
    } else if rs.unsigned_abs() == 1 {
        if cs.unsigned_abs() == r {
            return 0.0;
        }
        c * scattered_per_run(r, c, cs)
    } else {
        r * c
    };
    let contiguous_lines = (r * c * es).div_ceil(line);
    let extra = scattered_lines.saturating_sub(contiguous_lines / 2) as f64;
    passes * extra * line as f64 * 4.0 / (p.copy_gbps(1) * 1e9)
}

/// C's axes ordered by decreasing stride when C fills a dense block (positive strides that
/// form a row-major layout in that order), else `None`.
pub(super) fn dense_order(labels: &[Label], c: &Layout) -> Option<Vec<usize>> {
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

pub(super) struct Pricer<'a> {
    pub(super) pb: &'a Problem<'a>,
    pub(super) threads: usize,
    pub(super) profile: Profile,
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
/// the calls' price taking C kept in cache (`OperandSource::Resident`); see `docs/TUNING.md`.
const CACHED_BLOCK_SHARE: f64 = 0.72;

/// Extra seconds per contiguous run of a tiled write-back's block in C when consecutive runs
/// are far apart (a TLB or DRAM-row miss per run, which the transposition model, seeing only
/// the share of each cache line used, does not price; see `docs/TUNING.md`).
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

impl<'a> Pricer<'a> {
    /// A pricer of `pb`'s steps on `threads` threads with `profile`'s rates.
    pub(super) fn new(pb: &'a Problem<'a>, threads: usize, profile: Profile) -> Self {
        Pricer {
            pb,
            threads,
            profile,
            memo: Default::default(),
            in_place: HashMap::default(),
            tiles: HashMap::default(),
        }
    }

    /// The in-place write-back of C through `order`, with its predicted seconds (C's
    /// physical axis order is `phys`).
    pub(super) fn in_place(
        &mut self,
        order: &[Label],
        phys: &[usize],
    ) -> Result<Option<(InPlaceC, f64)>> {
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
    pub(super) fn tile_plan(
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
    pub(super) fn copy_cost(&mut self, which: u8, order: &[Label]) -> Result<f64> {
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
            t += short_rows_seconds(from.len(), n, pb.dtype.size_bytes(), plan.threads());
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
/// share of each cache line used, does not price; weighted by the copy's
/// [`memory_share`], as the misses are the memory's (see `docs/TUNING.md`).
const SHORT_ROW_SECONDS: f64 = 9e-9;

/// What a row copy of `elements` in rows of `n` (bytes of `es` each) on `threads` threads costs
/// beyond the transposition model's price: [`SHORT_ROW_SECONDS`] a row and thread where the
/// rows are shorter than [`SCATTERED_GAP_BYTES`], weighted by the [`memory_share`] of the
/// bytes moved (none while source and destination stay in cache).
fn short_rows_seconds(elements: usize, n: usize, es: usize, threads: usize) -> f64 {
    if n == 0 || n * es >= SCATTERED_GAP_BYTES {
        return 0.0;
    }
    let share = memory_share(2.0 * (elements * es) as f64);
    share * (elements / n) as f64 * SHORT_ROW_SECONDS / threads.max(1) as f64
}

/// The layout of an operand as the GEMM sees it: packed row-major in `order`, or as it is.
pub(super) fn operand_layout(
    order: &Option<Labels>,
    prep: &OperandPrep,
    pb: &Problem<'_>,
) -> Result<Layout> {
    match order {
        Some(o) => packed_layout(o, &prep.kept, |l| pb.bound.extent(l)),
        None => Ok(prep.prepared.clone()),
    }
}

/// How the GEMM covers M, N and K (in the given orders) once A, B and C (or the buffer the
/// GEMM writes) have layouts `la`, `lb`, `lc`: the fused groups, the M/N labels left as
/// loops (by decreasing stride in `lc`), the K labels left as batch-reduce loops, the
/// matrix sizes, and the scattered-access penalty of one call.
pub(super) struct Geometry {
    pub(super) gm: Vec<Label>,
    pub(super) gn: Vec<Label>,
    pub(super) gk: Vec<Label>,
    pub(super) free: Vec<Label>,
    pub(super) reduce: Vec<Label>,
    pub(super) mnk: (usize, usize, usize),
    /// What one call costs.
    pub(super) call: CallPrice,
}

/// The price of one GEMM call of a [`Geometry`].
pub(super) struct CallPrice {
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
    /// How the backend runs the calls when they are skinny products.
    skinny: Option<SkinnyForm>,
}

impl CallPrice {
    /// Whether the backend runs these calls as skinny products ([`SkinnyForm`]), the same
    /// kernel whichever library is asked for.
    pub(super) fn skinny(&self) -> bool {
        self.skinny.is_some()
    }

    /// Seconds of one call by `library` on `gt` threads while `threads / gt` such calls
    /// run at once: the one-thread model times the calibrated slowdown of a parallel loop's
    /// single-threaded calls, plus the penalty; for one call at a time (threaded, or on one
    /// thread), the model's price plus the penalty plus writing the call's C block to memory
    /// and reading it for ownership first (the GEMM model is fitted on calls that write the
    /// same C again; the concurrent-call slowdown already holds that cost).
    pub(super) fn seconds(
        &self,
        p: &Profile,
        library: GemmLibrary,
        dtype: DType,
        threads: usize,
        gt: usize,
    ) -> f64 {
        let (m, n, k) = self.mnk;
        let skinny = || {
            self.skinny
                .map(|f| skinny_seconds(p, dtype, f, k, gt, self.memory_share))
        };
        let single = gemv_seconds(p, dtype, self.mnk, gt)
            .or_else(skinny)
            .unwrap_or_else(|| {
                let used = crate::model::gemm_grid_threads(m, n, k, gt);
                let mut c =
                    gemm_coeffs_resident(p, library, dtype, used, self.layout, self.memory_share);
                if self.c_memory_bytes > 0.0 && !c.measured {
                    // C's trip to memory is `memory` below: the call itself writes C at the
                    // caches' per-element cost, not at a share of memory's as well
                    c.c = gemm_coeffs_resident(p, library, dtype, used, self.layout, 0.0).c;
                }
                c.seconds(m, n, k)
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
/// while a loop of GEMM calls writes C: a quarter of a 32 MiB L3, so that C's write stream
/// and the other core's data leave it there (see `docs/TUNING.md`).
const CACHED_OPERAND_BYTES: usize = 8 << 20;

/// Largest C (bytes) that a loop of GEMM calls leaves in cache: a larger one goes to memory
/// block by block ([`CallPrice::c_memory_bytes`]): priced as cached, larger C ran far above
/// its price (see `docs/TUNING.md`).
const CACHED_C_BYTES: usize = 32 << 20;

/// Largest block buffer (bytes) of a tiled write-back that [`geometry`] takes to stay in
/// cache while the GEMM calls write it again and again: half of a 1 MiB L2.
pub(super) const RESIDENT_BLOCK_BYTES: usize = 512 << 10;

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
pub(super) fn geometry(
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
            skinny: SkinnyForm::of(pb.dtype, (m, n, k), [a_rs, a_cs], [b_rs, b_cs]),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GemmCoeffs;

    /// The inside-out growth finds the part the search over every part finds: orders of up
    /// to four labels against two tensors whose axes are the labels in every order, with
    /// extents 1-3 (0 too, the searched case), dense or with a gap after an axis.
    #[test]
    fn fused_suffix_grows_to_the_searched_part() {
        let all: Vec<Label> = "abcd".chars().map(Label::Letter).collect();
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % n
        };
        let mut checked = 0;
        for _ in 0..4000 {
            let rank = 1 + next(4);
            let tensor = |next: &mut dyn FnMut(usize) -> usize| {
                let mut labels = all[..rank].to_vec();
                for i in (1..labels.len()).rev() {
                    labels.swap(i, next(i + 1));
                }
                let dims: Vec<usize> = (0..rank)
                    .map(|_| [0, 1, 2, 3, 3, 2, 1, 2][next(8)])
                    .collect();
                // row-major strides, with a gap of one element after a random axis
                let gap = next(rank + 1);
                let mut strides = vec![0isize; rank];
                let mut s = 1isize;
                for i in (0..rank).rev() {
                    strides[i] = s;
                    s *= dims[i].max(1) as isize + isize::from(i == gap);
                }
                (labels, Layout::new(dims, strides).unwrap())
            };
            let (la, ta) = tensor(&mut next);
            let (lb, tb) = tensor(&mut next);
            let mut order = all[..rank].to_vec();
            for i in (1..order.len()).rev() {
                order.swap(i, next(i + 1));
            }
            order.truncate(1 + next(rank));
            let tensors = [(&la[..], &ta), (&lb[..], &tb)];
            assert_eq!(
                fused_suffix(&order, &tensors),
                fused_suffix_by_search(&order, &tensors),
                "{order:?} {la:?} {ta:?} {lb:?} {tb:?}"
            );
            checked += usize::from(fused_suffix(&order, &tensors).len() < order.len());
        }
        // the orders that do not fuse whole are a fair share of the cases
        assert!(checked > 400, "{checked}");
    }

    /// A call of a loop whose C goes to memory block by block pays C's trip to memory once
    /// (read for ownership and write-back at the copy rate), beside the caches' per-element
    /// cost of C: not a memory share of C's per-element cost as well.
    #[test]
    fn c_to_memory_is_priced_once() {
        let p = Profile::builtin(vec![40.0]);
        let (lib, dt) = (GemmLibrary::Gemm, DType::F64);
        let (m, n, k) = (24, 4096, 24);
        let price = |c_memory_bytes: f64| CallPrice {
            layout: GemmLayout::ROW,
            mnk: (m, n, k),
            operands: OperandSource::Memory,
            memory_share: 0.65,
            penalty: 0.0,
            c_memory_bytes,
            skinny: None,
        };
        let c_bytes = (m * n * 8) as f64;
        let resident = price(0.0).seconds(&p, lib, dt, 1, 1);
        let to_memory = price(c_bytes).seconds(&p, lib, dt, 1, 1);
        let trip = 2.0 * c_bytes / (p.copy_gbps(1) * 1e9);
        let mixed = gemm_coeffs_resident(&p, lib, dt, 1, GemmLayout::ROW, 0.65);
        let cached = gemm_coeffs_resident(&p, lib, dt, 1, GemmLayout::ROW, 0.0);
        let own = GemmCoeffs {
            c: cached.c,
            ..mixed.clone()
        };
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * y;
        assert!(close(resident, mixed.seconds(m, n, k)), "{resident}");
        let want = own.seconds(m, n, k) + trip;
        assert!(close(to_memory, want), "{to_memory} against {want}");
        assert!(to_memory <= resident + trip);
    }

    /// Short rows cost nothing in cache (1.1 MB moved is partly), the whole per-row price
    /// from 4 MiB moved on, per thread; rows of 1 KiB and more cost nothing.
    #[test]
    fn short_rows_are_priced_as_memory_misses() {
        // 14045 rows of 5 f64 (562 KB each way): about half the price
        let part = short_rows_seconds(70225, 5, 8, 1);
        let full = 14045.0 * SHORT_ROW_SECONDS;
        assert!(part > 0.4 * full && part < 0.6 * full, "{part} {full}");
        // 1000 rows of 5 f64 (40 KB): in cache, free
        assert_eq!(short_rows_seconds(5000, 5, 8, 1), 0.0);
        // 1M rows of 24 f64 (192 MB): the whole price, halved on two threads
        let big = short_rows_seconds(24 << 20, 24, 8, 2);
        assert!((big - (1 << 20) as f64 * SHORT_ROW_SECONDS / 2.0).abs() < 1e-12);
        // rows of 128 f64 (1 KiB), or no rows: nothing
        assert_eq!(short_rows_seconds(128 << 20, 128, 8, 1), 0.0);
        assert_eq!(short_rows_seconds(100, 0, 8, 1), 0.0);
    }

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
            access_penalty((384, 98312), (384, 1), 1.0, 8, &p, false),
            384.0 * 32.0 - 9216.0
        ));
        // rows of 192 lines: streamed past their first 32, so no more than half scattered
        assert_eq!(
            access_penalty((32, 2359304), (1536, 1), 1.0, 8, &p, false),
            0.0
        );
        assert_eq!(
            access_penalty((384, 98312), (384, 1), 1.0, 8, &p, true),
            0.0
        );
        // the same rows a multiple of 64 KiB apart share cache sets: every line scattered,
        // less half of all, at the head too; eight such rows still fit the sets' ways
        assert!(close(
            access_penalty((32, 2359296), (1536, 1), 1.0, 8, &p, false),
            32.0 * 192.0 - 3072.0
        ));
        assert!(close(
            access_penalty((384, 1), (384, 98304), 1.0, 8, &p, true),
            384.0 * 48.0 - 9216.0
        ));
        assert_eq!(
            access_penalty((8, 2359296), (1536, 1), 1.0, 8, &p, false),
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
}

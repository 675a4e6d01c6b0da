//! The ways to run a two-operand contraction: a [`Candidate`] says which operands are packed
//! (and in which index order), whether the GEMM writes a temporary that is then transposed
//! into C, which indices the GEMM covers (`m`, `n`, `k`: groups that fuse into one matrix
//! dimension in every operand that holds them), and which remain as loops around it:
//! independent loops (batch indices, and free indices that do not fuse) that may run in
//! parallel, and batch-reduce loops (contracted indices that do not fuse) that accumulate into
//! the same C block. Special cases: no packing and no loops is a GEMM straight on the operands;
//! packing everything is TTGT; no packing with loops is loop-over-GEMM (with batch-reduce when
//! K does not fuse).
//!
//! [`super::enumerate`] lists them and [`super::price`] prices their steps.

use std::fmt;
use std::sync::Arc;

use super::loops::NestedLoops;
use super::prepare::OperandPrep;
use crate::einsum::{BoundSpec, Label};
use crate::model::GemmLibrary;
use crate::tensor::{DType, Layout};
use crate::transpose::inplace::InPlacePlan;
use crate::transpose::TransposePlan;

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
    pub c_in_place: Option<Box<InPlaceC>>,
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
    /// The GEMM calls run as skinny products (`model::SkinnyForm`: the backend's kernel that
    /// reads the long operand in place, whatever `library` says).
    pub skinny: bool,
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
        if self.skinny {
            s += " [skinny kernel]";
        } else {
            s += &format!(" [{}]", self.library);
        }
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

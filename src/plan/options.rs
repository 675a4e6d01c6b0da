//! Options of a contraction plan.

use std::time::Duration;

use crate::model::GemmLibrary;

/// How a contraction plan is chosen (as for transpositions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PlanTuning {
    /// The cost models alone pick the candidate (microseconds to a millisecond).
    #[default]
    Estimate,
    /// The best-predicted candidates are timed on the real data within `budget`
    /// ([`crate::ContractionPlan::measure`]) and the fastest is kept.
    Measure {
        /// Time allowed for the search.
        budget: Duration,
    },
}

/// An element-wise operation applied to C after the contraction (the "last touch"):
/// `C = epilogue(alpha * A·B + beta * C)`.
///
/// ```
/// use ttgt::plan::Epilogue;
/// assert_eq!(Epilogue::Relu.apply(-2.0f64), 0.0);
/// assert_eq!(Epilogue::None.apply(-2.0f64), -2.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Epilogue {
    /// Nothing.
    #[default]
    None,
    /// `max(x, 0)`, for real element types only (planning a complex one is an error).
    Relu,
}

impl Epilogue {
    /// Applies the operation to one real value.
    pub fn apply<T: crate::Element>(self, x: T) -> T {
        match self {
            Epilogue::None => x,
            Epilogue::Relu => {
                if x.re() > 0.0 {
                    x
                } else {
                    T::zero()
                }
            }
        }
    }
}

/// What the planner may use.
///
/// ```
/// use ttgt::plan::{PlanOptions, Epilogue};
/// let o = PlanOptions { threads: Some(1), workspace_limit: Some(1 << 20), ..Default::default() };
/// assert_eq!(o.epilogue, Epilogue::None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct PlanOptions {
    /// Threads (transposes, GEMMs, parallel loops); `None`: the current rayon pool's size.
    pub threads: Option<usize>,
    /// Most bytes of workspace the plan may allocate (packed operands and the GEMM's
    /// temporary result); candidates needing more are not considered.
    pub workspace_limit: Option<usize>,
    /// Model-only or measured choice.
    pub tuning: PlanTuning,
    /// Force one GEMM library; `None`: the faster by the model, per candidate.
    pub library: Option<GemmLibrary>,
    /// Element-wise last-touch operation on C.
    pub epilogue: Epilogue,
    /// Largest block of C, in bytes, that a tiled write-back computes at a time (the GEMM
    /// writes the block into a buffer that stays in cache, and the block is transposed into
    /// C from there); `None`: [`DEFAULT_TILE_BYTES`], and also the largest blocks up to
    /// [`WIDE_TILE_BYTES`]. Tiled candidates are offered when C is larger than four blocks of
    /// this bound.
    pub tile_bytes: Option<usize>,
}

/// Default bound of a tiled write-back's block: half of a 1 MiB L2 cache, so the block and
/// the operand panels the GEMM streams through stay there together.
pub const DEFAULT_TILE_BYTES: usize = 512 << 10;

/// Second bound of a tiled write-back's block, offered beside [`DEFAULT_TILE_BYTES`] when
/// [`PlanOptions::tile_bytes`] is not set: where no set of C's labels gives blocks between
/// 1/64 and all of 512 KiB with long GEMM calls, a block of one or two megabytes still stays
/// in the last-level cache. Such blocks are priced as not resident in L2 (their GEMM calls
/// write C at the memory's rate); see `docs/TUNING.md`.
pub const WIDE_TILE_BYTES: usize = 2 << 20;

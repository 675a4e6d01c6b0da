//! Planning: from a spec and operand layouts to an executable [`ContractionPlan`]. Diagonals
//! and one-sided sums are handled first ([`OperandPrep`]); then every way to run the
//! two-operand contraction ([`Candidate`]: direct GEMM, TTGT with chosen index orders,
//! loop-over-GEMM with batch-reduce, mixtures, each GEMM library, serial or parallel loops) is
//! priced with the transpose and GEMM cost models and the cheapest is chosen. Plans are
//! reusable and cached ([`cached_contraction_plan`]). Specs of three or more operands are
//! first split into pairwise steps by a [`ContractionPath`].

mod cache;
mod candidate;
mod contraction;
mod enumerate;
mod explain;
mod groups;
mod loops;
mod options;
mod path;
mod path_flops;
mod path_notation;
mod path_time;
mod prepare;
mod price;
mod refine;
mod slicing;
mod storage;
mod times;

pub use cache::{
    better_on_one_thread, cached_contraction_plan, cached_path, clear_plan_caches,
    CONTRACTION_CACHE_CAPACITY, FULL_SEARCH_ON_HIT, PATH_CACHE_CAPACITY,
    SINGLE_THREAD_BELOW_SECONDS,
};
pub use candidate::{Candidate, CandidateKind, GettRun, InPlaceC, Labels, StepCosts, TiledC};
pub use contraction::{ContractionPlan, QUICK_PLAN_BELOW_SECONDS};
pub(crate) use groups::{axes_of, axis_of, fuse_axes, packed_layout, stride_of};
pub use loops::{LoopDim, NestedLoops, LOOPS_ALONE_SECONDS, LOOPS_MAX_PRODUCTS};
pub use options::{Epilogue, PlanOptions, PlanTuning, DEFAULT_TILE_BYTES, WIDE_TILE_BYTES};
pub use path::{
    ContractionPath, PathOptions, PathReference, PathStep, PathStrategy, AUTO_OPTIMAL_MAX_OPERANDS,
    OPTIMAL_MAX_OPERANDS,
};
pub use path_flops::RANDOM_GREEDY_RESTARTS;
pub use path_time::{
    TIME_DP_MAX_OPERANDS, TIME_DP_ORDERS, TIME_SEARCH_MIN_PATH_SECONDS, TIME_SEARCH_MIN_SECONDS,
    TIME_SEARCH_SHARE, TIME_SWITCH_MARGIN,
};
pub use prepare::OperandPrep;
pub use price::{COPY_STEP_SECONDS, EXECUTE_CALL_SECONDS};
pub(crate) use refine::Refinement;
pub use refine::{
    refinement_enabled, set_refinement, ALTERNATIVES, PREDICTED_WITHIN, PRUNE_ABOVE,
    REFINE_MIN_SECONDS, ROUNDS, SWITCH_BELOW,
};
pub use slicing::Slicing;
pub use times::StepTimes;

//! Tensor transposition `B = alpha * perm(A) + beta * B` on strided views, HPTT's design:
//! [`Normalized`] drops size-1 dimensions and fuses dimensions contiguous in both tensors;
//! [`TransposePlan`] puts loops (ordered by HPTT's heuristic) around a macro-kernel —
//! contiguous rows when A and B share their stride-1 dimension, else 2-D macro-tiles over both
//! stride-1 dimensions made of in-register SIMD micro-tiles ([`Isa`]) — and splits the loop
//! nest across rayon threads. [`transpose`] plans through a bounded cache.
//!
//! `perm[i] = j` means axis `i` of B is axis `j` of A (numpy's `transpose(axes)`).

mod cache;
mod convert;
pub mod inplace;
mod kernel;
mod plan;
mod problem;
mod rules;
mod staged;
mod strided;

pub(crate) use crate::threads::{on_threads, wakes_threads};
pub use cache::{cached_plan, clear_plan_cache, transpose, PLAN_CACHE_CAPACITY};
pub use convert::{narrow_from_f32, widen_to_f32};
pub use kernel::Isa;
pub(crate) use kernel::{streaming_copy, streaming_copy_one_stream};
pub use plan::{
    KernelKind, TransposeOptions, TransposePlan, Tuning, PARALLEL_MIN_BYTES, PREFETCH_AHEAD_BYTES,
    PREFETCH_MAX_UNITS, STREAM_MIN_BYTES,
};
pub use problem::{Dim, Normalized};
pub(crate) use rules::{bump_rules_generation, load_rules, rules_generation};
pub use rules::{
    far_row_prefetch, line_tile_streaming, scatter_regroup, set_far_row_prefetch,
    set_line_tile_streaming, set_scatter_regroup,
};
pub(crate) use strided::accumulate;
pub use strided::{scale, scale_copy};

//! Cost models any caller can query: the predicted time of a GEMM call ([`gemm_seconds`]) and
//! of a transposition
//! ([`transpose_seconds`], [`crate::transpose::TransposePlan::estimated_seconds`]) from a
//! calibration [`Profile`] of this machine ([`calibrate`], stored by `ttgt calibrate`).

mod calibrate;
mod concurrency;
mod gemm;
mod gemm_grid;
mod gemm_probe;
mod gett;
mod loops;
pub(crate) mod profile;
mod residency;
mod transpose;

pub use calibrate::{
    best_copy_seconds, best_copy_seconds_on, calibrate, copy_seconds, copy_seconds_on, probe_copy,
    probe_far_row_prefetch, probe_line_tile_stores, probe_scatter_regroup,
    streaming_copy_seconds_on,
};
pub use concurrency::{ConcurrentGemm, OperandSource, ShapeFactor};
pub use gemm::{
    gemm_coeffs, gemm_coeffs_in, gemm_coeffs_resident, gemm_seconds, gemm_seconds_strided,
    gemm_training_shapes, gemv_seconds, narrow_c_speedup, skinny_seconds, GemmCoeffs, GemmLayout,
    GemmLibrary, SkinnyForm, AVX512_GEMM_CRATE_FACTOR, GEMM_CALL_SECONDS,
    GEMM_THREADED_CALL_SECONDS, GEMV_CALL_SECONDS, NARROW_C_MAX_ELEMENTS, NARROW_C_MIN_K,
    SKINNY_DOT_MAX_SIDE, SKINNY_DOT_MIN_K, SKINNY_MAX_SIDE, SKINNY_MIN_LONG_SIDES,
    SKINNY_RATE_SHARE, SKINNY_SHORT_MAX_SIDE, SKINNY_WIDE_LONG_SIDES, SKINNY_WIDE_MIN_K,
};
pub use gemm_grid::{gemm_grid, gemm_grid_range, gemm_grid_threads, GEMM_MIN_BLOCK_FMAS};
pub use gemm_probe::{probed_gemm_coeffs, GEMM_PROBE_SHAPES};
pub use gett::{
    gett_blocking, gett_depth, gett_orient, gett_oriented, gett_seconds, gett_simd_available,
    gett_work, GettBlocking, GettIndex, GettOrder, GettWork,
};
pub use loops::{
    nested_loops_seconds, LOOPS_CALL_SECONDS, LOOPS_PRODUCT_SECONDS, LOOPS_RUN_SECONDS,
};
pub use profile::{
    is_provisional, last_level_cache_bytes, machine_name, profile, profile_for,
    provisional_profile, set_profile, Profile, TransposeCoeffs, PROBE_MIN_BYTES,
};
pub use residency::{memory_share, CACHE_RESIDENT_BYTES, MEMORY_BOUND_BYTES};
pub use transpose::{
    convert_seconds, predict_transpose, predict_transpose_from_memory, transpose_seconds,
    CONVERT_CALL_SECONDS, CONVERT_GBPS, IN_CACHE_TRANSPOSE_GBPS, TRANSPOSE_CALL_SECONDS,
};

//! The price of a contraction run as plain nested loops ([`crate::plan::NestedLoops`]): a
//! fixed cost per call, per run of the inner loop and per product, with no GEMM call, copy
//! or thread wake-up.

use crate::tensor::DType;

/// Fixed cost of one nested-loop run (set-up, scaling C's first element, the return); see
/// `docs/TUNING.md`.
pub const LOOPS_CALL_SECONDS: f64 = 5e-8;

/// Cost of one run of the inner loop besides its products (the outer loops' step, the inner
/// loop's set-up and, for a dot product, adding its sum into C); see `docs/TUNING.md`.
pub const LOOPS_RUN_SECONDS: f64 = 3e-9;

/// Cost of one real product-and-add in an inner loop whose operands are contiguous; see
/// `docs/TUNING.md`.
pub const LOOPS_PRODUCT_SECONDS: f64 = 4e-10;

/// Predicted seconds of a nested-loop contraction of `products` products in `inner_runs`
/// runs of the inner loop (`unit`: the inner loop reads every operand contiguously),
/// scaling `c_elements` elements of C first. Complex products count four real ones, strided
/// inner loops twice.
///
/// ```
/// use ttgt::{DType, model::nested_loops_seconds};
/// let dot = nested_loops_seconds(DType::F64, 125, 1, true, 1);
/// let strided = nested_loops_seconds(DType::F64, 125, 25, false, 1);
/// assert!(dot < strided && strided < 1e-6);
/// ```
pub fn nested_loops_seconds(
    dtype: DType,
    products: usize,
    inner_runs: usize,
    unit: bool,
    c_elements: usize,
) -> f64 {
    let per_product = LOOPS_PRODUCT_SECONDS
        * if dtype.is_complex() { 4.0 } else { 1.0 }
        * if unit { 1.0 } else { 2.0 };
    LOOPS_CALL_SECONDS
        + inner_runs as f64 * LOOPS_RUN_SECONDS
        + products as f64 * per_product
        + c_elements as f64 * LOOPS_PRODUCT_SECONDS
}

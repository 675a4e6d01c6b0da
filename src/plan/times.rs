//! The measured wall time of each step of one execution of a plan (what an executor
//! reports and `explain` prints beside the predictions).

use std::time::Duration;

/// Wall time of each step of one execution of a plan.
///
/// ```
/// let t = ttgt::StepTimes::default();
/// assert_eq!(t.total(), std::time::Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepTimes {
    /// Diagonal views and one-sided sums.
    pub prepare: Duration,
    /// Copying A into its matricized layout.
    pub pack_a: Duration,
    /// Copying B into its matricized layout.
    pub pack_b: Duration,
    /// The GEMM calls.
    pub gemm: Duration,
    /// Writing the result into C (`alpha * T + beta * C`), or the whole unary operation.
    pub write_c: Duration,
    /// Half-precision operands: widening the inputs to `f32` and rounding the result.
    pub convert: Duration,
}

impl StepTimes {
    /// Sum of all steps.
    pub fn total(&self) -> Duration {
        self.prepare + self.pack_a + self.pack_b + self.gemm + self.write_c + self.convert
    }

    /// Time spent moving data (packing A and B, writing C).
    pub fn transpose(&self) -> Duration {
        self.pack_a + self.pack_b + self.write_c + self.convert
    }
}

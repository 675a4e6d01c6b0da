//! The CPU backend: GEMM through `matrixmultiply` or the `gemm` crate (one small trait),
//! strided copies from [`transpose`](crate::transpose), the executor of
//! [`ContractionPlan`](crate::ContractionPlan)s, and GEMM timing and calibration.

mod calibrate;
mod execute;
mod gemm;
mod gemm_loops;
pub(crate) mod gett;
mod half;
mod loops;
mod measure;

pub use crate::plan::StepTimes;
pub use calibrate::{
    calibrate_gemm, calibrate_gemm_concurrency, calibrate_machine, time_gemm, time_gemm_in,
    CalibrateParts, GemmTimer, CONCURRENCY_ROUND_SECONDS,
};

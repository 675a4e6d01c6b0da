//! The CPU backend: GEMM through `matrixmultiply`, strided copies from
//! [`transpose`](crate::transpose), and the executor of [`ContractionPlan`](crate::ContractionPlan)s.

mod execute;
mod gemm;

pub use execute::StepTimes;

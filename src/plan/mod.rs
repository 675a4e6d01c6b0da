//! Planning: from a spec and operand layouts to an executable [`ContractionPlan`]
//! (which operands are used in place, which are packed, how indices are grouped into the
//! GEMM's M, N, K and batch dimensions).

mod ttgt;

pub(crate) use ttgt::{fuse, group, packed_layout};
pub use ttgt::{ContractionPlan, OperandPrep};

//! Tensor transposition `B = alpha * perm(A) + beta * B` on strided views.
//!
//! The kernels in [`strided`](self) walk any pair of layouts with equal extents; permuting is
//! a matter of permuting the source view's axes first.

mod strided;

pub(crate) use strided::accumulate;
pub use strided::{scale, scale_copy};

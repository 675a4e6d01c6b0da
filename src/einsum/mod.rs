//! The einsum front end: [`parse`] a spec string into a [`Spec`], [`Spec::bind`] it to operand
//! shapes ([`BoundSpec`]), [`BoundSpec::classify`] its indices ([`Contraction`]).
//!
//! ```
//! use ttgt::einsum::{parse, IndexKind};
//! let c = parse("abcd,dbef->acef").unwrap()
//!     .bind(&[&[4, 5, 6, 7], &[7, 5, 8, 9]]).unwrap()
//!     .classify().unwrap();
//! assert_eq!(c.gemm_shape(), (1, 4 * 6, 8 * 9, 5 * 7));
//! ```

mod bind;
mod classify;
mod parse;

pub use bind::{BoundSpec, Label};
pub use classify::{Contraction, IndexInfo, IndexKind};
pub use parse::{parse, Spec, Term};

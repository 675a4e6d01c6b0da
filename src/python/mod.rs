//! The Python extension module `ttgt._ttgt` (feature `python`): numpy arrays in, results
//! written into numpy arrays the Python layer allocated, the GIL released while ttgt plans
//! and runs.
//!
//! The Python package (`src/python/ttgt/`) does everything numpy-facing around these calls:
//! argument forms, dtype promotion, `out` allocation, copies of the arrays that cannot be
//! viewed in place (misaligned, byte-swapped, strides that are not whole elements). Every
//! array reaching this module has one of the six element types, native byte order and
//! element-aligned strides; anything else is a `TypeError`/`ValueError`, never a panic.

mod arrays;
mod calls;
mod expression;
mod plan;

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::Error;

/// A ttgt error as the Python exception a numpy user expects: `MemoryError` when an
/// allocation failed, `RuntimeError` for an internal inconsistency, `ValueError` otherwise.
pub(crate) fn to_py(e: Error) -> PyErr {
    match e {
        Error::Allocation { .. } => PyMemoryError::new_err(e.to_string()),
        Error::Internal(_) => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

#[pymodule]
fn _ttgt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    calls::register(m)?;
    m.add_class::<plan::Plan>()?;
    m.add_class::<expression::Expression>()?;
    Ok(())
}

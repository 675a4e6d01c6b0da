//! numpy arrays as ttgt operands: the element type by numpy's type character, read-only and
//! writable borrows (rust-numpy's borrow flags refuse an `out` that aliases an operand), and
//! the thread count of a call.

use numpy::{PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::tensor::DType;

/// The element type for numpy's type character (`dtype.char`): `f`, `d`, `F`, `D`, `e`
/// (float16) and `E` (`ml_dtypes.bfloat16`).
pub(crate) fn dtype_of(code: &str) -> PyResult<DType> {
    match code {
        "e" => Ok(DType::F16),
        "E" => Ok(DType::BF16),
        "f" => Ok(DType::F32),
        "d" => Ok(DType::F64),
        "F" => Ok(DType::C32),
        "D" => Ok(DType::C64),
        _ => Err(PyTypeError::new_err(format!(
            "ttgt computes in float16, bfloat16, float32, float64, complex64 and complex128, not dtype char {code:?}"
        ))),
    }
}

/// A Python scalar (as the complex the Python layer passes) as an element; the imaginary
/// part is dropped for real types (the Python layer refuses a complex scalar for them).
pub(crate) fn scalar<T: crate::tensor::Element>(z: num_complex::Complex64) -> T {
    T::from_parts(z.re, z.im)
}

/// Borrows every operand read-only as an array of `T`.
pub(crate) fn readonly<'py, T: numpy::Element>(
    operands: &[Bound<'py, PyAny>],
) -> PyResult<Vec<PyReadonlyArrayDyn<'py, T>>> {
    operands
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let a = o.cast::<PyArrayDyn<T>>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "operand {k} is not a numpy array of the call's dtype"
                ))
            })?;
            a.try_readonly()
                .map_err(|e| PyValueError::new_err(format!("operand {k}: {e}")))
        })
        .collect()
}

/// Borrows `out` writably as an array of `T`; an `out` that shares memory with an operand
/// borrowed before is refused.
pub(crate) fn writable<'py, T: numpy::Element>(
    out: &Bound<'py, PyAny>,
) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    let a = out
        .cast::<PyArrayDyn<T>>()
        .map_err(|_| PyTypeError::new_err("out is not a numpy array of the call's dtype"))?;
    a.try_readwrite().map_err(|e| {
        PyValueError::new_err(format!(
            "out must be writable and must not share memory with an operand ({e})"
        ))
    })
}

/// Calls in flight through this module, across Python threads.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// One call in flight: counted while it lives.
pub(crate) struct Flight(usize);

impl Flight {
    /// Enters a call and says how many threads it runs on: the setting when one was made
    /// (`set_num_threads`), else the cores shared by the calls in flight, so that Python
    /// threads calling ttgt at once do not oversubscribe the machine.
    pub(crate) fn enter(requested: usize) -> Self {
        let now = IN_FLIGHT.fetch_add(1, Ordering::AcqRel) + 1;
        let threads = match (requested, crate::threads::num_threads_setting()) {
            (n, _) if n > 0 => n,
            (_, Some(n)) => n,
            (_, None) => (cores() / now).max(1),
        };
        Flight(threads)
    }

    /// Threads of this call.
    pub(crate) fn threads(&self) -> usize {
        self.0
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Cores this process may run on, read once (the query reads cgroup files: tens of
/// microseconds, longer than a small contraction).
pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

//! `ttgt._ttgt.Expression`: an einsum of any number of operands planned once for their shapes,
//! with constant operands held and the steps among them evaluated once
//! ([`crate::EinsumExpression`]).

use ndarray::ArrayViewD;
use num_complex::{Complex32, Complex64};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::arrays::{dtype_of, readonly, scalar, writable, Flight};
use super::calls::path_options;
use super::to_py;
use crate::plan::PathOptions;
use crate::tensor::{bf16, f16, DType, Element};
use crate::threads::with_threads;
use crate::EinsumExpression;

/// The expression for the dtype it was made for.
enum Typed {
    F16(EinsumExpression<f16>),
    BF16(EinsumExpression<bf16>),
    F32(EinsumExpression<f32>),
    F64(EinsumExpression<f64>),
    C32(EinsumExpression<Complex32>),
    C64(EinsumExpression<Complex64>),
}

/// Element types whose expressions [`Typed`] holds.
trait Held: Element + numpy::Element {
    fn wrap(e: EinsumExpression<Self>) -> Typed;
    fn get(t: &Typed) -> Option<&EinsumExpression<Self>>;
}

macro_rules! held {
    ($t:ty, $v:ident) => {
        impl Held for $t {
            fn wrap(e: EinsumExpression<Self>) -> Typed {
                Typed::$v(e)
            }
            fn get(t: &Typed) -> Option<&EinsumExpression<Self>> {
                match t {
                    Typed::$v(e) => Some(e),
                    _ => None,
                }
            }
        }
    };
}
held!(f16, F16);
held!(bf16, BF16);
held!(f32, F32);
held!(f64, F64);
held!(Complex32, C32);
held!(Complex64, C64);

/// An einsum expression: spec, shapes, constants and dtype fixed.
#[pyclass(module = "ttgt._ttgt", frozen)]
pub struct Expression {
    dtype: DType,
    threads: usize,
    typed: Typed,
}

fn build<T: Held>(
    py: Python<'_>,
    spec: &str,
    shapes: &[Vec<usize>],
    positions: &[usize],
    constants: &[Bound<'_, PyAny>],
    options: &PathOptions,
    threads: usize,
) -> PyResult<Typed> {
    let ro = readonly::<T>(constants)?;
    let views: Vec<(usize, ArrayViewD<'_, T>)> = positions
        .iter()
        .copied()
        .zip(ro.iter().map(|r| r.as_array()))
        .collect();
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    py.detach(|| {
        with_threads(threads, || {
            crate::einsum_expression(spec, &refs, &views, options)
        })
    })
    .map(T::wrap)
    .map_err(to_py)
}

fn run<T: Held>(
    e: &Expression,
    py: Python<'_>,
    operands: &[Bound<'_, PyAny>],
    out: &Bound<'_, PyAny>,
    (alpha, beta): (Complex64, Complex64),
) -> PyResult<()> {
    let inner = T::get(&e.typed).ok_or_else(|| PyValueError::new_err("dtype mismatch"))?;
    let ro = readonly::<T>(operands)?;
    let mut rw = writable::<T>(out)?;
    let views: Vec<ArrayViewD<'_, T>> = ro.iter().map(|r| r.as_array()).collect();
    let mut c = rw.as_array_mut();
    let (alpha, beta) = (scalar::<T>(alpha), scalar::<T>(beta));
    let _flight = Flight::enter(e.threads);
    py.detach(|| with_threads(e.threads, || inner.run_into(alpha, &views, beta, &mut c)))
        .map_err(to_py)
}

#[pymethods]
impl Expression {
    /// Plans `spec` for operands of `shapes` (every operand's), holding `constants` (arrays
    /// of numpy dtype character `dtype`) at `positions`, on `threads` threads (0: the
    /// module's default).
    #[new]
    #[pyo3(signature = (spec, shapes, positions, constants, dtype, strategy="auto", path=None, memory_limit=None, threads=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        spec: String,
        shapes: Vec<Vec<usize>>,
        positions: Vec<usize>,
        constants: Vec<Bound<'_, PyAny>>,
        dtype: &str,
        strategy: &str,
        path: Option<Vec<Vec<usize>>>,
        memory_limit: Option<usize>,
        threads: usize,
    ) -> PyResult<Self> {
        if positions.len() != constants.len() {
            return Err(PyValueError::new_err("one position per constant"));
        }
        let dtype = dtype_of(dtype)?;
        let threads = Flight::enter(threads).threads();
        let options = PathOptions {
            dtype: Some(dtype),
            ..path_options(strategy, path, memory_limit)?
        };
        let a = (
            py,
            spec.as_str(),
            &shapes[..],
            &positions[..],
            &constants[..],
        );
        let typed = match dtype {
            DType::F16 => build::<f16>(a.0, a.1, a.2, a.3, a.4, &options, threads),
            DType::BF16 => build::<bf16>(a.0, a.1, a.2, a.3, a.4, &options, threads),
            DType::F32 => build::<f32>(a.0, a.1, a.2, a.3, a.4, &options, threads),
            DType::F64 => build::<f64>(a.0, a.1, a.2, a.3, a.4, &options, threads),
            DType::C32 => build::<Complex32>(a.0, a.1, a.2, a.3, a.4, &options, threads),
            DType::C64 => build::<Complex64>(a.0, a.1, a.2, a.3, a.4, &options, threads),
        }?;
        Ok(Expression {
            dtype,
            threads,
            typed,
        })
    }

    /// `out = alpha * expression(*operands) + beta * out` (the non-constant operands).
    #[pyo3(signature = (operands, out, alpha, beta))]
    fn execute(
        &self,
        py: Python<'_>,
        operands: Vec<Bound<'_, PyAny>>,
        out: Bound<'_, PyAny>,
        alpha: Complex64,
        beta: Complex64,
    ) -> PyResult<()> {
        let ab = (alpha, beta);
        match self.dtype {
            DType::F16 => run::<f16>(self, py, &operands, &out, ab),
            DType::BF16 => run::<bf16>(self, py, &operands, &out, ab),
            DType::F32 => run::<f32>(self, py, &operands, &out, ab),
            DType::F64 => run::<f64>(self, py, &operands, &out, ab),
            DType::C32 => run::<Complex32>(self, py, &operands, &out, ab),
            DType::C64 => run::<Complex64>(self, py, &operands, &out, ab),
        }
    }

    /// The path (with each step's predicted time) as text.
    fn explain(&self) -> String {
        let (path, pre) = match &self.typed {
            Typed::F16(e) => (e.path().to_string(), e.precomputed_steps()),
            Typed::BF16(e) => (e.path().to_string(), e.precomputed_steps()),
            Typed::F32(e) => (e.path().to_string(), e.precomputed_steps()),
            Typed::F64(e) => (e.path().to_string(), e.precomputed_steps()),
            Typed::C32(e) => (e.path().to_string(), e.precomputed_steps()),
            Typed::C64(e) => (e.path().to_string(), e.precomputed_steps()),
        };
        format!("{path}  steps evaluated once, among constants: {pre}")
    }

    /// The result's shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        match &self.typed {
            Typed::F16(e) => e.shape().to_vec(),
            Typed::BF16(e) => e.shape().to_vec(),
            Typed::F32(e) => e.shape().to_vec(),
            Typed::F64(e) => e.shape().to_vec(),
            Typed::C32(e) => e.shape().to_vec(),
            Typed::C64(e) => e.shape().to_vec(),
        }
    }

    /// Steps evaluated when the expression was made (among constants only).
    #[getter]
    fn precomputed_steps(&self) -> usize {
        match &self.typed {
            Typed::F16(e) => e.precomputed_steps(),
            Typed::BF16(e) => e.precomputed_steps(),
            Typed::F32(e) => e.precomputed_steps(),
            Typed::F64(e) => e.precomputed_steps(),
            Typed::C32(e) => e.precomputed_steps(),
            Typed::C64(e) => e.precomputed_steps(),
        }
    }
}

//! `ttgt._ttgt.Plan`: a contraction planned once for given shapes, strides and dtype, then
//! executed on any arrays of exactly those layouts, with the report of what it chose and,
//! after a call, what each step took.

use std::sync::Mutex;
use std::time::Duration;

use ndarray::ArrayViewD;
use num_complex::Complex64;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::arrays::{dtype_of, readonly, scalar, writable, Flight};
use super::calls::{for_dtype, path_options};
use super::to_py;
use crate::plan::{better_on_one_thread, PlanOptions};
use crate::tensor::{DType, Element, Layout, StridedView, StridedViewMut};
use crate::threads::with_threads;
use crate::{ContractionPath, ContractionPlan, StepTimes};

/// What the plan runs: one planned contraction (one or two operands) or a pairwise path.
enum Kind {
    Single(Box<ContractionPlan>),
    Path(Box<ContractionPath>),
}

/// Times of the last execution.
#[derive(Clone)]
enum Measured {
    Single(StepTimes),
    Path(Vec<Duration>),
}

/// A planned einsum: spec, operand and output layouts, dtype and thread count fixed.
#[pyclass(module = "ttgt._ttgt", frozen)]
pub struct Plan {
    spec: String,
    dtype: DType,
    inputs: Vec<Layout>,
    out: Layout,
    threads: usize,
    kind: Kind,
    last: Mutex<Option<Measured>>,
}

fn layouts(shapes: Vec<Vec<usize>>, strides: Vec<Vec<isize>>) -> PyResult<Vec<Layout>> {
    if shapes.len() != strides.len() {
        return Err(PyValueError::new_err("one stride list per shape"));
    }
    shapes
        .into_iter()
        .zip(strides)
        .map(|(d, s)| Layout::new(d, s).map_err(to_py))
        .collect()
}

impl Plan {
    fn run<T: Element + numpy::Element>(
        &self,
        py: Python<'_>,
        operands: &[Bound<'_, PyAny>],
        out: &Bound<'_, PyAny>,
        (alpha, beta): (Complex64, Complex64),
    ) -> PyResult<()> {
        let ro = readonly::<T>(operands)?;
        let mut rw = writable::<T>(out)?;
        let views: Vec<ArrayViewD<'_, T>> = ro.iter().map(|r| r.as_array()).collect();
        let mut c = rw.as_array_mut();
        for (k, (v, l)) in views.iter().zip(&self.inputs).enumerate() {
            if Layout::of(v) != *l {
                return Err(PyValueError::new_err(format!(
                    "operand {k} has shape {:?} and strides {:?} (elements); the plan was made for {:?} and {:?}",
                    v.shape(), Layout::of(v).strides(), l.dims(), l.strides()
                )));
            }
        }
        if Layout::of(&c) != self.out {
            return Err(PyValueError::new_err(format!(
                "out has shape {:?} and strides {:?} (elements); the plan was made for {:?} and {:?}",
                c.shape(), Layout::of(&c).strides(), self.out.dims(), self.out.strides()
            )));
        }
        let (alpha, beta) = (scalar::<T>(alpha), scalar::<T>(beta));
        let _flight = Flight::enter(self.threads);
        let measured = py
            .detach(|| {
                with_threads(self.threads, || match &self.kind {
                    Kind::Single(p) => {
                        let v: Vec<StridedView<'_, T>> =
                            views.iter().map(StridedView::of).collect();
                        let mut cv = StridedViewMut::of(&mut c)?;
                        p.execute(alpha, &v, beta, &mut cv).map(Measured::Single)
                    }
                    Kind::Path(p) => {
                        crate::einsum_along_into(p, alpha, &views, beta, &mut c).map(Measured::Path)
                    }
                })
            })
            .map_err(to_py)?;
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(measured);
        Ok(())
    }
}

#[pymethods]
impl Plan {
    /// Plans `spec` for operands of these shapes and strides (in elements), an output of
    /// `out_shape`/`out_strides`, numpy dtype character `dtype`, on `threads` threads (0: the
    /// module's default).
    #[new]
    #[pyo3(signature = (spec, shapes, strides, out_shape, out_strides, dtype, strategy="auto", path=None, memory_limit=None, threads=0, workspace_limit=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        spec: String,
        shapes: Vec<Vec<usize>>,
        strides: Vec<Vec<isize>>,
        out_shape: Vec<usize>,
        out_strides: Vec<isize>,
        dtype: &str,
        strategy: &str,
        path: Option<Vec<Vec<usize>>>,
        memory_limit: Option<usize>,
        threads: usize,
        workspace_limit: Option<usize>,
    ) -> PyResult<Self> {
        let dtype = dtype_of(dtype)?;
        let inputs = layouts(shapes, strides)?;
        let out = Layout::new(out_shape, out_strides).map_err(to_py)?;
        let requested = threads;
        let mut threads = Flight::enter(threads).threads();
        let options = crate::plan::PathOptions {
            dtype: Some(dtype),
            ..path_options(strategy, path.clone(), memory_limit)?
        };
        let kind = py
            .detach(|| -> crate::Result<Kind> {
                if inputs.len() <= 2 && path.is_none() {
                    let o = PlanOptions {
                        threads: Some(threads),
                        workspace_limit,
                        ..Default::default()
                    };
                    let mut p = ContractionPlan::with_options(&spec, &inputs, &out, dtype, &o)?;
                    if requested == 0 && better_on_one_thread(&p) {
                        // small work, as `einsum` runs it: on the calling thread
                        let one = PlanOptions {
                            threads: Some(1),
                            ..o
                        };
                        p = ContractionPlan::with_options(&spec, &inputs, &out, dtype, &one)?;
                    }
                    Ok(Kind::Single(Box::new(p)))
                } else {
                    let shapes: Vec<&[usize]> = inputs.iter().map(Layout::dims).collect();
                    let p = crate::einsum_path(&spec, &shapes, &options)?;
                    Ok(Kind::Path(Box::new(p)))
                }
            })
            .map_err(to_py)?;
        if let Kind::Single(p) = &kind {
            threads = p.threads();
        }
        Ok(Plan {
            spec,
            dtype,
            inputs,
            out,
            threads,
            kind,
            last: Mutex::new(None),
        })
    }

    /// `out = alpha * einsum(spec, *operands) + beta * out` on arrays of the planned layouts.
    #[pyo3(signature = (operands, out, alpha, beta))]
    fn execute(
        &self,
        py: Python<'_>,
        operands: Vec<Bound<'_, PyAny>>,
        out: Bound<'_, PyAny>,
        alpha: Complex64,
        beta: Complex64,
    ) -> PyResult<()> {
        if operands.len() != self.inputs.len() {
            return Err(PyValueError::new_err(format!(
                "the plan takes {} operands, {} given",
                self.inputs.len(),
                operands.len()
            )));
        }
        let ab = (alpha, beta);
        for_dtype!(self.dtype, run_plan(self, py, &operands, &out, ab))
    }

    /// The spec the plan was made for.
    #[getter]
    fn spec(&self) -> &str {
        &self.spec
    }

    /// Threads the plan runs on.
    #[getter]
    fn threads(&self) -> usize {
        self.threads
    }

    /// The report: chosen steps with predicted (and, after a call, measured) times.
    fn explain(&self) -> String {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match (&self.kind, last) {
            (Kind::Single(p), Some(Measured::Single(t))) => p.explain_measured(&t),
            (Kind::Single(p), _) => p.explain(),
            (Kind::Path(p), last) => {
                let mut s = p.to_string();
                if let Some(Measured::Path(times)) = last {
                    s.push_str("\n  measured step times:");
                    for (k, t) in times.iter().enumerate() {
                        s.push_str(&format!("\n    step {k}: {:.3} ms", t.as_secs_f64() * 1e3));
                    }
                }
                s
            }
        }
    }

    /// The report as a dict (see the Python `Plan.explain(as_dict=True)`).
    fn explain_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("spec", &self.spec)?;
        d.set_item("dtype", self.dtype.name())?;
        d.set_item("backend", "ttgt")?;
        d.set_item("threads", self.threads)?;
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match &self.kind {
            Kind::Single(p) => {
                d.set_item("kind", "contraction")?;
                d.set_item("flops", p.flops())?;
                d.set_item("predicted_seconds", p.predicted_seconds())?;
                d.set_item("candidates", p.candidates().len())?;
                d.set_item("chosen", p.chosen().map(|c| c.summary()))?;
                d.set_item("gemm_shape", p.gemm_shape())?;
                d.set_item("copies", p.copies())?;
                d.set_item("workspace_bytes", p.workspace_bytes())?;
                let s = p.predicted_steps();
                let steps = [s.prepare, s.pack_a, s.pack_b, s.gemm, s.write_c];
                d.set_item("predicted", step_dict(py, steps, s.total())?)?;
                if let Some(Measured::Single(t)) = last {
                    let steps = [t.prepare, t.pack_a, t.pack_b, t.gemm, t.write_c];
                    let secs = steps.map(|x| x.as_secs_f64());
                    d.set_item("measured", step_dict(py, secs, t.total().as_secs_f64())?)?;
                } else {
                    d.set_item("measured", py.None())?;
                }
            }
            Kind::Path(p) => {
                d.set_item("kind", "path")?;
                d.set_item("flops", p.flops())?;
                d.set_item("naive_flops", p.naive_flops())?;
                d.set_item("largest_intermediate", p.largest_intermediate())?;
                d.set_item("strategy", p.strategy())?;
                d.set_item("predicted_seconds", p.predicted_seconds())?;
                if let Some(r) = p.reference() {
                    let f = PyDict::new(py);
                    f.set_item("pairs", r.pairs.clone())?;
                    f.set_item("specs", r.specs.clone())?;
                    f.set_item("flops", r.flops)?;
                    f.set_item("predicted_seconds", r.predicted_seconds)?;
                    f.set_item("planning_seconds", r.planning_seconds)?;
                    d.set_item("flop_optimal_path", f)?;
                }
                let times = match last {
                    Some(Measured::Path(t)) => Some(t),
                    _ => None,
                };
                let steps = p
                    .steps()
                    .iter()
                    .enumerate()
                    .map(|(k, s)| -> PyResult<Bound<'py, PyDict>> {
                        let e = PyDict::new(py);
                        e.set_item("pair", s.pair)?;
                        e.set_item("spec", &s.spec)?;
                        e.set_item("flops", s.flops)?;
                        e.set_item("predicted_seconds", s.predicted_seconds)?;
                        let t = times
                            .as_ref()
                            .and_then(|t| t.get(k))
                            .map(Duration::as_secs_f64);
                        e.set_item("measured_seconds", t)?;
                        Ok(e)
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                d.set_item("steps", steps)?;
            }
        }
        Ok(d)
    }
}

/// The five steps of a contraction (seconds) and their total, by name.
fn step_dict(py: Python<'_>, steps: [f64; 5], total: f64) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in ["prepare", "pack_a", "pack_b", "gemm", "write_c"]
        .iter()
        .zip(steps)
    {
        d.set_item(k, v)?;
    }
    d.set_item("total", total)?;
    Ok(d)
}

fn run_plan<T: Element + numpy::Element>(
    plan: &Plan,
    py: Python<'_>,
    operands: &[Bound<'_, PyAny>],
    out: &Bound<'_, PyAny>,
    ab: (Complex64, Complex64),
) -> PyResult<()> {
    plan.run::<T>(py, operands, out, ab)
}

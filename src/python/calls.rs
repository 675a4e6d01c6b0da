//! The module's functions: einsum into an `out`, paths, transposes, threads, calibration.

use ndarray::{ArrayViewD, ArrayViewMutD};
use num_complex::Complex64;
use std::sync::{Mutex, OnceLock};

use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::arrays::{cores, dtype_of, readonly, scalar, writable, Flight};
use super::to_py;
use crate::bounded_cache::{cached, hash_of, BoundedCache};
use crate::plan::{PathOptions, PathStrategy};
use crate::tensor::{DType, Element};
use crate::threads::with_threads;

/// Runs `$f::<T>(args)` for the element type `T` of a [`DType`].
macro_rules! for_dtype {
    ($dtype:expr, $f:ident($($arg:expr),* $(,)?)) => {
        $crate::with_dtype!($dtype, T => $f::<T>($($arg),*))
    };
}
pub(crate) use for_dtype;

/// Path options from the Python layer's strategy name, explicit numpy path and memory limit.
pub(crate) fn path_options(
    strategy: &str,
    path: Option<Vec<Vec<usize>>>,
    memory_limit: Option<usize>,
) -> PyResult<PathOptions> {
    let strategy = match (strategy, path) {
        (_, Some(p)) => PathStrategy::Numpy(p),
        ("auto", None) => PathStrategy::Auto,
        ("optimal", None) => PathStrategy::Optimal,
        ("greedy", None) => PathStrategy::Greedy,
        ("left", None) => PathStrategy::LeftToRight,
        (s, None) => {
            return Err(PyValueError::new_err(format!(
                "unknown path strategy {s:?}: use 'auto', 'optimal', 'greedy' or 'left'"
            )))
        }
    };
    Ok(PathOptions {
        strategy,
        memory_limit,
        ..Default::default()
    })
}

/// `c = alpha * einsum(spec, views) + beta * c` with the GIL released; one and two operands
/// straight through the (cached) contraction planner, more along a path.
fn run_einsum<T: Element>(
    py: Python<'_>,
    spec: &str,
    views: &[ArrayViewD<'_, T>],
    c: &mut ArrayViewMutD<'_, T>,
    (alpha, beta): (T, T),
    options: Option<PathOptions>,
    threads: usize,
) -> PyResult<()> {
    let flight = Flight::enter(threads);
    py.detach(|| {
        with_threads(flight.threads(), || match (views, options) {
            ([a], None) => crate::einsum_unary_into(spec, alpha, a, beta, c),
            ([a, b], None) => crate::contract_into(spec, alpha, a, b, beta, c),
            (_, options) => {
                let shapes: Vec<&[usize]> = views.iter().map(|v| v.shape()).collect();
                let o = PathOptions {
                    dtype: Some(T::DTYPE),
                    ..options.unwrap_or_default()
                };
                let path = crate::plan::cached_path(spec, &shapes, &o)?;
                crate::einsum_along_into(&path, alpha, views, beta, c).map(|_| ())
            }
        })
    })
    .map_err(to_py)
}

/// `out = alpha * einsum(spec, operands) + beta * out` on borrowed arrays.
fn einsum_typed<T: Element + numpy::Element>(
    py: Python<'_>,
    spec: &str,
    operands: &[Bound<'_, PyAny>],
    out: &Bound<'_, PyAny>,
    (alpha, beta): (Complex64, Complex64),
    options: Option<PathOptions>,
    threads: usize,
) -> PyResult<()> {
    let ro = readonly::<T>(operands)?;
    let mut rw = writable::<T>(out)?;
    let views: Vec<ArrayViewD<'_, T>> = ro.iter().map(|r| r.as_array()).collect();
    let mut c = rw.as_array_mut();
    let ab = (scalar::<T>(alpha), scalar::<T>(beta));
    run_einsum(py, spec, &views, &mut c, ab, options, threads)
}

/// `out = alpha * einsum(spec, *operands) + beta * out` for operands and `out` of one dtype
/// (`dtype`: numpy's type character). `path`: numpy's explicit path (without its leading
/// `'einsum_path'`); `strategy`: `auto`, `optimal`, `greedy` or `left`; `threads`: 0 for the
/// module's default.
#[pyfunction]
#[pyo3(signature = (spec, operands, out, alpha, beta, dtype, strategy=None, path=None, memory_limit=None, threads=0))]
#[allow(clippy::too_many_arguments)]
fn einsum_into(
    py: Python<'_>,
    spec: &str,
    operands: Vec<Bound<'_, PyAny>>,
    out: Bound<'_, PyAny>,
    alpha: Complex64,
    beta: Complex64,
    dtype: &str,
    strategy: Option<&str>,
    path: Option<Vec<Vec<usize>>>,
    memory_limit: Option<usize>,
    threads: usize,
) -> PyResult<()> {
    let options = match (strategy, &path, memory_limit) {
        (None | Some("auto"), None, None) => None,
        _ => Some(path_options(
            strategy.unwrap_or("auto"),
            path,
            memory_limit,
        )?),
    };
    let ab = (alpha, beta);
    for_dtype!(
        dtype_of(dtype)?,
        einsum_typed(py, spec, &operands, &out, ab, options, threads)
    )
}

/// The element type of an array ttgt can use where it is (one of the four types, native byte
/// order, aligned, strides of whole elements, at most 32 dimensions), else `None`.
fn direct_dtype(a: &Bound<'_, PyAny>) -> Option<DType> {
    let a = a.cast::<PyUntypedArray>().ok()?;
    let d = a.dtype();
    let dtype = match d.char() {
        b'f' => DType::F32,
        b'd' => DType::F64,
        b'F' => DType::C32,
        b'D' => DType::C64,
        b'e' => DType::F16,
        b'E' => DType::BF16,
        _ => return None,
    };
    let size = dtype.size_bytes() as isize;
    let fits = a.is_aligned()
        && d.is_native_byteorder() != Some(false)
        && a.ndim() <= 32
        && a.strides().iter().all(|s| s % size == 0);
    fits.then_some(dtype)
}

/// Result shapes by spec and operand shapes, so a repeated call parses nothing.
type Shapes = BoundedCache<(String, Vec<Vec<usize>>), Vec<usize>>;

fn result_shape(spec: &str, shapes: &[&[usize]]) -> crate::Result<Vec<usize>> {
    static SHAPES: OnceLock<Mutex<Shapes>> = OnceLock::new();
    let cache = SHAPES.get_or_init(|| Mutex::new(BoundedCache::new(4096)));
    let hash = hash_of(&(spec, shapes));
    let same = |k: &(String, Vec<Vec<usize>>)| k.0 == spec && k.1 == shapes;
    cached(cache, hash, same, || {
        let shape = crate::output_shape(spec, shapes)?;
        let key = (
            spec.to_string(),
            shapes.iter().map(|s| s.to_vec()).collect(),
        );
        Ok((key, shape))
    })
}

/// Results of at least this many bytes start on a cache line (`ttgt._arrays.ALIGNED_MIN_BYTES`,
/// the same value, where the package allocates them).
const ALIGNED_MIN_BYTES: usize = 1 << 20;

fn einsum_new_typed<'py, T: Element + numpy::Element>(
    py: Python<'py>,
    spec: &str,
    operands: &[Bound<'py, PyAny>],
    threads: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let shape = {
        let arrays: Vec<&Bound<'py, PyUntypedArray>> = operands
            .iter()
            .map(|o| o.cast::<PyUntypedArray>())
            .collect::<Result<_, _>>()?;
        let shapes: Vec<&[usize]> = arrays.iter().map(|a| a.shape()).collect();
        result_shape(spec, &shapes).map_err(to_py)?
    };
    let ro = readonly::<T>(operands)?;
    let views: Vec<ArrayViewD<'_, T>> = ro.iter().map(|r| r.as_array()).collect();
    let bytes = shape.iter().product::<usize>() * std::mem::size_of::<T>();
    let out = if bytes >= ALIGNED_MIN_BYTES {
        // numpy's large arrays start 16 bytes past a cache line: the package's allocator
        // of line-aligned results (`ttgt._arrays.empty`) makes this one
        py.import("ttgt._arrays")?
            .getattr("empty")?
            .call1((shape, numpy::dtype::<T>(py)))?
            .cast_into::<PyArrayDyn<T>>()?
    } else {
        // SAFETY: beta = 0, so the engine writes every element before anything reads one.
        unsafe { PyArrayDyn::<T>::new(py, shape, false) }
    };
    // SAFETY: `out` was created just above; no other reference to its data exists, so this
    // view is the only one (rust-numpy's borrow flags would only confirm that).
    let mut c = unsafe { out.as_array_mut() };
    run_einsum(
        py,
        spec,
        &views,
        &mut c,
        (T::one(), T::zero()),
        None,
        threads,
    )?;
    Ok(out.into_any())
}

/// `einsum(spec, *operands)` into a new C-ordered array when every operand can be used
/// where it is and all share one of the six element types; `None` otherwise (the Python
/// layer then takes the general road: promotion, copies, numpy for other dtypes).
#[pyfunction]
#[pyo3(signature = (spec, operands, threads=0))]
fn einsum_new<'py>(
    py: Python<'py>,
    spec: &str,
    operands: Vec<Bound<'py, PyAny>>,
    threads: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(first) = operands.first() else {
        return Ok(None);
    };
    let Some(dtype) = direct_dtype(first) else {
        return Ok(None);
    };
    if !operands[1..].iter().all(|o| direct_dtype(o) == Some(dtype)) {
        return Ok(None);
    }
    for_dtype!(dtype, einsum_new_typed(py, spec, &operands, threads)).map(Some)
}

fn einsum_out_typed<'py, T: Element + numpy::Element>(
    py: Python<'py>,
    spec: &str,
    operands: &[Bound<'py, PyAny>],
    out: &Bound<'py, PyAny>,
    (alpha, beta): (f64, f64),
    threads: usize,
) -> PyResult<bool> {
    {
        let arrays: Vec<&Bound<'py, PyUntypedArray>> = operands
            .iter()
            .map(|o| o.cast::<PyUntypedArray>())
            .collect::<Result<_, _>>()?;
        let shapes: Vec<&[usize]> = arrays.iter().map(|a| a.shape()).collect();
        let Ok(shape) = result_shape(spec, &shapes) else {
            return Ok(false);
        };
        if out.cast::<PyUntypedArray>()?.shape() != shape.as_slice() {
            return Ok(false);
        }
    }
    let ro = readonly::<T>(operands)?;
    let Ok(mut rw) = out
        .cast::<PyArrayDyn<T>>()
        .map_err(|_| ())
        .and_then(|a| a.try_readwrite().map_err(|_| ()))
    else {
        return Ok(false);
    };
    let views: Vec<ArrayViewD<'_, T>> = ro.iter().map(|r| r.as_array()).collect();
    let mut c = rw.as_array_mut();
    run_einsum(
        py,
        spec,
        &views,
        &mut c,
        (T::from_parts(alpha, 0.0), T::from_parts(beta, 0.0)),
        None,
        threads,
    )?;
    Ok(true)
}

/// `out = alpha * einsum(spec, *operands) + beta * out` for real `scalars = (alpha, beta)` when every
/// operand and `out` can be used where they are, all of one of the six element types, and
/// `out` has the result's shape; `false` (nothing written) otherwise, and the Python layer
/// takes the general road (promotion, casting into `out`, its checks and messages).
#[pyfunction]
#[pyo3(signature = (spec, operands, out, scalars, threads=0))]
fn einsum_out<'py>(
    py: Python<'py>,
    spec: &str,
    operands: Vec<Bound<'py, PyAny>>,
    out: Bound<'py, PyAny>,
    scalars: (f64, f64),
    threads: usize,
) -> PyResult<bool> {
    let Some(dtype) = direct_dtype(&out) else {
        return Ok(false);
    };
    if operands.is_empty() || !operands.iter().all(|o| direct_dtype(o) == Some(dtype)) {
        return Ok(false);
    }
    for_dtype!(
        dtype,
        einsum_out_typed(py, spec, &operands, &out, scalars, threads)
    )
}

/// The pairwise path for operands of these shapes: (steps in numpy's notation, numpy-style
/// report, FLOPs of the path, FLOPs of a single loop nest, largest intermediate).
#[pyfunction]
#[pyo3(signature = (spec, shapes, strategy="auto", path=None, memory_limit=None))]
#[allow(clippy::type_complexity)]
fn einsum_path(
    py: Python<'_>,
    spec: &str,
    shapes: Vec<Vec<usize>>,
    strategy: &str,
    path: Option<Vec<Vec<usize>>>,
    memory_limit: Option<usize>,
) -> PyResult<(Vec<Vec<usize>>, String, f64, f64, f64)> {
    let options = path_options(strategy, path, memory_limit)?;
    let p = py
        .detach(|| {
            let s: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
            crate::einsum_path(spec, &s, &options)
        })
        .map_err(to_py)?;
    let mut steps: Vec<Vec<usize>> = p.pairs().into_iter().map(|(i, j)| vec![i, j]).collect();
    if steps.is_empty() {
        steps.push(vec![0]);
    }
    Ok((
        steps,
        p.to_string(),
        p.flops(),
        p.naive_flops(),
        p.largest_intermediate(),
    ))
}

fn transpose_typed<T: Element + numpy::Element>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    axes: &[usize],
    out: &Bound<'_, PyAny>,
    (alpha, beta): (Complex64, Complex64),
    threads: usize,
) -> PyResult<()> {
    let ro = readonly::<T>(std::slice::from_ref(a))?;
    let mut rw = writable::<T>(out)?;
    let av = ro[0].as_array();
    let mut b = rw.as_array_mut();
    let (alpha, beta) = (scalar::<T>(alpha), scalar::<T>(beta));
    let flight = Flight::enter(threads);
    py.detach(|| {
        with_threads(flight.threads(), || {
            crate::permute_into(alpha, &av, axes, beta, &mut b)
        })
    })
    .map_err(to_py)
}

/// `out = alpha * a.transpose(axes) + beta * out` (numpy's meaning of `axes`).
#[pyfunction]
#[pyo3(signature = (a, axes, out, alpha, beta, dtype, threads=0))]
#[allow(clippy::too_many_arguments)]
fn transpose_into(
    py: Python<'_>,
    a: Bound<'_, PyAny>,
    axes: Vec<usize>,
    out: Bound<'_, PyAny>,
    alpha: Complex64,
    beta: Complex64,
    dtype: &str,
    threads: usize,
) -> PyResult<()> {
    let ab = (alpha, beta);
    for_dtype!(
        dtype_of(dtype)?,
        transpose_typed(py, &a, &axes, &out, ab, threads)
    )
}

/// The result's shape for operands of these shapes (every error of the spec and the shapes
/// is reported here, before anything is allocated).
#[pyfunction]
fn output_shape(spec: &str, shapes: Vec<Vec<usize>>) -> PyResult<Vec<usize>> {
    let s: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    result_shape(spec, &s).map_err(to_py)
}

/// Sets the process-wide thread count (0: back to the default, the cores shared by the calls
/// in flight).
#[pyfunction]
fn set_num_threads(n: usize) {
    crate::threads::set_num_threads((n > 0).then_some(n));
}

/// The process-wide thread count, or 0 when none was set.
#[pyfunction]
fn num_threads_setting() -> usize {
    crate::threads::num_threads_setting().unwrap_or(0)
}

/// Cores this process may run on.
#[pyfunction]
fn cpu_count() -> usize {
    cores()
}

/// Measures this machine for the cost models, stores the profile and uses it from now on;
/// returns the profile as JSON and where it was stored (`None` with `store=False`).
#[pyfunction]
#[pyo3(signature = (parts="all", threads=0, copy_mib=192, gemm_mflop=20000.0, store=true))]
fn calibrate(
    py: Python<'_>,
    parts: &str,
    threads: usize,
    copy_mib: usize,
    gemm_mflop: f64,
    store: bool,
) -> PyResult<(String, Option<String>)> {
    use crate::backend::cpu::{calibrate_machine, CalibrateParts, CONCURRENCY_ROUND_SECONDS};
    let parts = match parts {
        "all" => CalibrateParts::All,
        "transpose" => CalibrateParts::TransposeOnly,
        "gemm" => CalibrateParts::GemmOnly,
        p => {
            return Err(PyValueError::new_err(format!(
                "parts must be 'all', 'transpose' or 'gemm', not {p:?}"
            )))
        }
    };
    let threads = if threads == 0 { cores() } else { threads };
    py.detach(|| {
        let (p, _) = calibrate_machine(
            parts,
            copy_mib.max(1) << 20,
            threads,
            gemm_mflop * 1e6,
            CONCURRENCY_ROUND_SECONDS,
        )?;
        let at = if store {
            Some(p.save()?.display().to_string())
        } else {
            None
        };
        let json = p.to_json();
        crate::model::set_profile(p);
        Ok((json, at))
    })
    .map_err(to_py)
}

/// Frees the workspace buffers kept for later calls.
#[pyfunction]
fn release_workspace() -> usize {
    crate::tensor::release_workspace()
}

/// Bytes of finished workspace buffers kept for later calls; sets the bound first when
/// `bytes` is given (0 keeps none; buffers beyond the new bound are freed now).
#[pyfunction]
#[pyo3(signature = (bytes=None))]
fn workspace_retention(bytes: Option<usize>) -> usize {
    if let Some(b) = bytes {
        crate::tensor::set_workspace_retention(b);
    }
    crate::tensor::workspace_retention()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(einsum_into, m)?)?;
    m.add_function(wrap_pyfunction!(einsum_new, m)?)?;
    m.add_function(wrap_pyfunction!(einsum_out, m)?)?;
    m.add_function(wrap_pyfunction!(einsum_path, m)?)?;
    m.add_function(wrap_pyfunction!(output_shape, m)?)?;
    m.add_function(wrap_pyfunction!(transpose_into, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(num_threads_setting, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_count, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(release_workspace, m)?)?;
    m.add_function(wrap_pyfunction!(workspace_retention, m)?)?;
    Ok(())
}

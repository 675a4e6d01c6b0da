//! File mode: operands from `.npy` files, `C = alpha * einsum(...) + beta * C_in`, the result
//! written to `-o` or printed.

use std::path::PathBuf;

use ndarray::{ArrayD, ArrayViewD, Zip};
use ttgt::einsum::{parse, BoundSpec, Spec};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, DType, Element, Layout};

use crate::check::{check, CheckJob};
use crate::error::{CliError, CliResult};
use crate::npy::{read_any, with_dtype, write, zeros, AnyArray, CliElement};
use crate::scalar::{parse_scalar, Scalar};
use crate::{say, ContractArgs, Outcome};

/// A validated file-mode request, its files read.
struct Job<'a> {
    args: &'a ContractArgs,
    spec: Spec,
    inputs: Vec<AnyArray>,
    /// `operand k (path)` for each input, used in messages.
    names: Vec<String>,
    /// The initial C with its name for messages (`--c (C0.npy)`).
    c_in: Option<(String, AnyArray)>,
    alpha: Scalar,
    beta: Scalar,
}

/// Runs file mode.
pub fn run(args: &ContractArgs) -> CliResult<Outcome> {
    reject_random_mode_options(args)?;
    let spec = parse(&args.spec)?;
    check_file_count(&spec, &args.files)?;
    if let Some(out) = &args.output {
        // The result replaces -o only after the call; an input named there would be lost.
        if let Some(input) = args
            .files
            .iter()
            .chain(&args.c_in)
            .find(|p| ttgt::files::same_file(p, out))
        {
            return Err(CliError::new(format!(
                "-o {} is the input {}: write the result to another file",
                out.display(),
                input.display()
            )));
        }
    }
    let alpha = scalar_option(args.alpha.as_deref(), "--alpha", 1.0)?;
    let default_beta = if args.c_in.is_some() { 1.0 } else { 0.0 };
    let beta = scalar_option(args.beta.as_deref(), "--beta", default_beta)?;
    let names: Vec<String> = args
        .files
        .iter()
        .enumerate()
        .map(|(k, p)| format!("operand {k} ({})", p.display()))
        .collect();
    let inputs = args
        .files
        .iter()
        .zip(&names)
        .map(|(p, name)| read_any(p, name))
        .collect::<CliResult<Vec<_>>>()?;
    let c_in = match &args.c_in {
        Some(p) => {
            let name = format!("--c ({})", p.display());
            let c = read_any(p, &name)?;
            Some((name, c))
        }
        None => None,
    };
    let dtype = result_dtype(&inputs, c_in.as_ref().map(|(_, c)| c), alpha, beta);
    let job = Job {
        args,
        spec,
        inputs,
        names,
        c_in,
        alpha,
        beta,
    };
    with_dtype!(dtype, run_typed(job))
}

/// Random-mode options make no sense with files.
fn reject_random_mode_options(args: &ContractArgs) -> CliResult<()> {
    let given = [
        (args.dtype.is_some(), "--dtype"),
        (args.repeat.is_some(), "--repeat"),
        (args.seed.is_some(), "--seed"),
        (args.json, "--json"),
        (args.measure.is_some(), "--measure"),
    ];
    match given.iter().find(|(g, _)| *g) {
        Some((_, what)) => Err(CliError::new(format!(
            "{what} needs random mode (--sizes): with input files the element type follows \
             the files, and the plan is executed once, from the models"
        ))),
        None => Ok(()),
    }
}

/// A shape as numpy prints it: `(3, 5)`, `(4,)`.
fn shape_tuple(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn check_file_count(spec: &Spec, files: &[PathBuf]) -> CliResult<()> {
    let expected = spec.inputs().len();
    if files.is_empty() {
        return Err(CliError::new(format!(
            "no operands: spec {:?} needs {expected} input .npy file(s), or use --sizes for \
             random operands",
            spec.text()
        )));
    }
    if files.len() != expected {
        return Err(CliError::new(format!(
            "spec {:?} has {expected} input operand(s) but {} file(s) were given",
            spec.text(),
            files.len()
        )));
    }
    Ok(())
}

fn scalar_option(text: Option<&str>, flag: &str, default: f64) -> CliResult<Scalar> {
    text.map_or(Ok(Scalar::real(default)), |t| parse_scalar(t, flag))
}

/// numpy's promotion over the operands and C_in (f16 with f16 stays f16; f16 with bf16 gives
/// f32); a complex alpha or beta makes it complex.
fn result_dtype(
    inputs: &[AnyArray],
    c_in: Option<&AnyArray>,
    alpha: Scalar,
    beta: Scalar,
) -> DType {
    let mut types = inputs.iter().chain(c_in).map(AnyArray::dtype);
    let first = types.next().unwrap_or(DType::F32);
    let mut dtype = types.fold(first, DType::promote);
    if alpha.is_complex() || beta.is_complex() {
        dtype = dtype.promote(DType::C32);
    }
    dtype
}

/// Appends which file each operand number is to a binding error.
fn name_operands(e: ttgt::Error, names: &[String]) -> CliError {
    CliError::new(format!("{e} [{}]", names.join(", ")))
}

/// The initial C: `--c` converted to row-major `T` (its shape checked), or zeros.
fn initial_c<T: CliElement>(job: &mut Job<'_>, shape: &[usize]) -> CliResult<ArrayD<T>> {
    let Some((name, c_in)) = job.c_in.take() else {
        return zeros(shape, "the result");
    };
    if c_in.shape() != shape {
        return Err(CliError::new(format!(
            "{name} has shape {:?} but spec {:?} produces shape {shape:?}",
            c_in.shape(),
            job.args.spec
        )));
    }
    let c = T::from_any(c_in);
    Ok(if c.is_standard_layout() {
        c
    } else {
        c.as_standard_layout().into_owned()
    })
}

fn run_typed<T: CliElement>(mut job: Job<'_>) -> CliResult<Outcome> {
    let arrays: Vec<ArrayD<T>> = std::mem::take(&mut job.inputs)
        .into_iter()
        .map(T::from_any)
        .collect();
    let shapes: Vec<&[usize]> = arrays.iter().map(|a| a.shape()).collect();
    let bound = job
        .spec
        .bind(&shapes)
        .map_err(|e| name_operands(e, &job.names))?;
    let mut c = initial_c::<T>(&mut job, &bound.output_shape())?;
    let keep_c0 = job.args.check && job.args.c_in.is_some() && !job.beta.is_zero();
    let c0 = keep_c0.then(|| c.clone());
    if arrays.len() <= 2 {
        // A --path for one or two operands can only be checked.
        ttgt::einsum_path(&job.args.spec, &shapes, &job.args.path_options()?)?;
        execute_plan(&job, &arrays, &mut c)?;
    } else {
        execute_pairwise(&job, &arrays, &mut c)?;
    }
    match &job.args.output {
        Some(path) => write(path, &c)?,
        // a scalar as a bare number; an array under a line with its dtype and shape
        None if c.ndim() == 0 => say(&c.to_string())?,
        None => say(&format!(
            "{} array of shape {}:\n{c}",
            T::DTYPE.numpy_name(),
            shape_tuple(c.shape())
        ))?,
    }
    if !job.args.check {
        return Ok(Outcome::Success);
    }
    check_result(&job, &bound, &arrays, c0.as_ref(), &c)
}

/// One or two operands: one plan, executed once.
fn execute_plan<T: Element>(
    job: &Job<'_>,
    arrays: &[ArrayD<T>],
    c: &mut ArrayD<T>,
) -> CliResult<()> {
    let layouts: Vec<Layout> = arrays.iter().map(Layout::of).collect();
    let plan = ContractionPlan::with_options(
        &job.args.spec,
        &layouts,
        &Layout::of(c),
        T::DTYPE,
        &job.args.plan_options()?,
    )?;
    if job.args.explain {
        say(plan.explain().trim_end())?;
    }
    let views: Vec<StridedView<'_, T>> = arrays.iter().map(StridedView::of).collect();
    let mut cv = StridedViewMut::of(c)?;
    plan.execute(job.alpha.to(), &views, job.beta.to(), &mut cv)?;
    Ok(())
}

/// Three or more operands: pairwise along the path of --path (`ttgt::einsum_along`), then
/// `C = alpha * R + beta * C`.
fn execute_pairwise<T: Element>(
    job: &Job<'_>,
    arrays: &[ArrayD<T>],
    c: &mut ArrayD<T>,
) -> CliResult<()> {
    let shapes: Vec<&[usize]> = arrays.iter().map(|a| a.shape()).collect();
    let path = ttgt::einsum_path(&job.args.spec, &shapes, &job.args.path_options()?)?;
    if job.args.explain {
        say(path.to_string().trim_end())?;
    }
    let views: Vec<ArrayViewD<'_, T>> = arrays.iter().map(|a| a.view()).collect();
    let (r, _) = ttgt::einsum_along(&path, &views)?;
    if r.shape() != c.shape() {
        return Err(CliError::new(format!(
            "einsum produced shape {:?}, expected {:?}",
            r.shape(),
            c.shape()
        )));
    }
    let (alpha, beta): (T, T) = (job.alpha.to(), job.beta.to());
    Zip::from(c).and(&r).for_each(|c, &r| {
        *c = if beta.is_exact_zero() {
            alpha * r
        } else {
            alpha * r + beta * *c
        };
    });
    Ok(())
}

fn check_result<T: Element>(
    job: &Job<'_>,
    bound: &BoundSpec,
    arrays: &[ArrayD<T>],
    c0: Option<&ArrayD<T>>,
    got: &ArrayD<T>,
) -> CliResult<Outcome> {
    let report = check(&CheckJob {
        bound,
        operands: arrays.iter().map(|a| a.view()).collect(),
        alpha: job.alpha,
        beta: job.beta,
        c0,
        got,
        path: None,
        seed: crate::random_mode::DEFAULT_SEED,
    })?;
    say(&report.line())?;
    Ok(if report.passed() {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}

//! Random mode (`--sizes`): random row-major operands, a plan built once and executed
//! `--repeat` times, the best time reported with its step breakdown.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use ndarray::ArrayD;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ttgt::einsum::{parse, BoundSpec, Spec};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, DType, Element, Layout, StepTimes};

use crate::check::{check, CheckJob};
use crate::error::{CliError, CliResult};
use crate::npy::{filled, with_dtype, zeros};
use crate::report::RunReport;
use crate::scalar::Scalar;
use crate::{say, ContractArgs, Outcome};

/// Seed of the random operands without `--seed`.
pub const DEFAULT_SEED: u64 = 42;
/// Timed executions without `--repeat`.
pub const DEFAULT_REPEAT: usize = 5;

/// A validated random-mode request.
struct Job<'a> {
    args: &'a ContractArgs,
    spec: Spec,
    sizes: BTreeMap<char, usize>,
    repeat: usize,
    seed: u64,
}

/// Runs random mode.
pub fn run(args: &ContractArgs) -> CliResult<Outcome> {
    reject_file_mode_options(args)?;
    let spec = parse(&args.spec)?;
    check_no_ellipsis(&spec)?;
    let sizes = parse_sizes(args.sizes.as_deref().unwrap_or(""))?;
    check_sizes_cover(&spec, &sizes)?;
    let dtype = match &args.dtype {
        Some(d) => d.parse::<DType>().map_err(CliError::new)?,
        None => DType::F64,
    };
    let repeat = args.repeat.unwrap_or(DEFAULT_REPEAT);
    if repeat == 0 {
        return Err(CliError::new("--repeat must be at least 1"));
    }
    let job = Job {
        args,
        spec,
        sizes,
        repeat,
        seed: args.seed.unwrap_or(DEFAULT_SEED),
    };
    if job.spec.inputs().len() > 2 {
        return crate::network_mode::run(&job.spec, &job.sizes, dtype, repeat, job.seed, args);
    }
    use ttgt::plan::PathStrategy;
    let path_options = args.path_options()?;
    match path_options.strategy {
        // numpy's explicit paths also name the one step of one or two operands: checked only.
        PathStrategy::Explicit(_) | PathStrategy::Numpy(_) if args.memory_limit.is_none() => {
            let shapes: Vec<Vec<usize>> = job
                .spec
                .inputs()
                .iter()
                .map(|t| t.letters().iter().map(|c| job.sizes[c]).collect())
                .collect();
            let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
            ttgt::einsum_path(&args.spec, &refs, &path_options)?;
        }
        _ if args.path.is_some() || args.memory_limit.is_some() => {
            return Err(CliError::new(
                "--path and --memory-limit order the steps of 3 or more operands; this spec \
                 has one step (only an explicit path naming it is accepted)",
            ));
        }
        _ => {}
    }
    with_dtype!(dtype, run_typed(&job))
}

/// File-mode options make no sense with random operands.
fn reject_file_mode_options(args: &ContractArgs) -> CliResult<()> {
    let given = [
        (!args.files.is_empty(), "input files"),
        (args.output.is_some(), "-o/--output"),
        (args.c_in.is_some(), "--c"),
        (args.alpha.is_some(), "--alpha"),
        (args.beta.is_some(), "--beta"),
    ];
    match given.iter().find(|(g, _)| *g) {
        Some((_, what)) => Err(CliError::new(format!(
            "{what} cannot be combined with --sizes (random mode makes its own operands; drop \
             --sizes to contract files)"
        ))),
        None => Ok(()),
    }
}

fn check_no_ellipsis(spec: &Spec) -> CliResult<()> {
    let any = spec
        .inputs()
        .iter()
        .chain([spec.output()])
        .any(|t| t.ellipsis().is_some());
    if any {
        return Err(CliError::new(format!(
            "'...' is not allowed with --sizes: write every index of spec {:?} as a letter",
            spec.text()
        )));
    }
    Ok(())
}

/// Parses `a=48,b=32` (spaces allowed around the parts; empty for a spec without indices).
pub fn parse_sizes(text: &str) -> CliResult<BTreeMap<char, usize>> {
    let mut sizes = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || {
            CliError::new(format!(
                "bad --sizes entry {entry:?}: expected LETTER=EXTENT, e.g. a=48"
            ))
        };
        let (name, value) = entry.split_once('=').ok_or_else(bad)?;
        let mut chars = name.trim().chars();
        let letter = match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => c,
            _ => return Err(bad()),
        };
        let extent: usize = value.trim().parse().map_err(|_| bad())?;
        if sizes.insert(letter, extent).is_some() {
            return Err(CliError::new(format!(
                "--sizes gives index '{letter}' twice"
            )));
        }
    }
    Ok(sizes)
}

/// Every letter of the spec needs a size, and every size a letter of the spec.
fn check_sizes_cover(spec: &Spec, sizes: &BTreeMap<char, usize>) -> CliResult<()> {
    let letters: Vec<char> = spec
        .inputs()
        .iter()
        .flat_map(|t| t.letters().iter().copied())
        .collect();
    if let Some(c) = letters.iter().find(|c| !sizes.contains_key(c)) {
        return Err(CliError::new(format!(
            "--sizes gives no extent for index '{c}' of spec {:?} (add {c}=N)",
            spec.text()
        )));
    }
    if let Some(c) = sizes.keys().find(|c| !letters.contains(c)) {
        return Err(CliError::new(format!(
            "--sizes gives an extent for '{c}', which is not an index of spec {:?}",
            spec.text()
        )));
    }
    Ok(())
}

/// A row-major array of `shape` with entries uniform in [-1, 1) (both parts for complex
/// types).
fn random_array<T: Element>(shape: &[usize], rng: &mut StdRng, what: &str) -> CliResult<ArrayD<T>> {
    let complex = T::DTYPE.is_complex();
    filled(shape, what, |_| {
        let re = rng.random_range(-1.0..1.0);
        let im = if complex {
            rng.random_range(-1.0..1.0)
        } else {
            0.0
        };
        T::from_parts(re, im)
    })
}

/// Executes `plan` `repeat` times into `c`; returns the best wall time and its breakdown.
fn time_runs<T: Element>(
    plan: &ContractionPlan,
    operands: &[ArrayD<T>],
    c: &mut ArrayD<T>,
    repeat: usize,
) -> CliResult<(Duration, StepTimes)> {
    let views: Vec<StridedView<'_, T>> = operands.iter().map(StridedView::of).collect();
    let mut cv = StridedViewMut::of(c)?;
    let mut best: Option<(Duration, StepTimes)> = None;
    for _ in 0..repeat {
        let start = Instant::now();
        let times = plan.execute(T::one(), &views, T::zero(), &mut cv)?;
        let wall = start.elapsed();
        if best.is_none_or(|(b, _)| wall < b) {
            best = Some((wall, times));
        }
    }
    best.ok_or_else(|| CliError::new("--repeat must be at least 1"))
}

/// Row-major random operands of `spec` with the extents of `sizes` (seeded by `seed`), and
/// the spec bound to their shapes.
pub fn random_operands<T: Element>(
    spec: &Spec,
    sizes: &BTreeMap<char, usize>,
    seed: u64,
) -> CliResult<(BoundSpec, Vec<ArrayD<T>>)> {
    let shapes: Vec<Vec<usize>> = spec
        .inputs()
        .iter()
        .map(|t| t.letters().iter().map(|c| sizes[c]).collect())
        .collect();
    let shape_refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let bound = spec.bind(&shape_refs)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let operands = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| random_array(s, &mut rng, &format!("operand {k}")))
        .collect::<CliResult<_>>()?;
    Ok((bound, operands))
}

fn run_typed<T: Element>(job: &Job<'_>) -> CliResult<Outcome> {
    let (bound, operands) = random_operands::<T>(&job.spec, &job.sizes, job.seed)?;
    let mut c = zeros::<T>(&bound.output_shape(), "the result")?;
    let layouts: Vec<Layout> = operands.iter().map(Layout::of).collect();
    let mut plan = ContractionPlan::with_options(
        &job.args.spec,
        &layouts,
        &Layout::of(&c),
        T::DTYPE,
        &job.args.plan_options()?,
    )?;
    if let Some(ms) = job.args.measure {
        let views: Vec<StridedView<'_, T>> = operands.iter().map(StridedView::of).collect();
        let mut cv = StridedViewMut::of(&mut c)?;
        plan.measure(
            T::one(),
            &views,
            T::zero(),
            &mut cv,
            Duration::from_millis(ms),
        )?;
    }
    let (best, times) = time_runs(&plan, &operands, &mut c, job.repeat)?;
    let check = if job.args.check {
        Some(check(&CheckJob {
            bound: &bound,
            operands: operands.iter().map(|a| a.view()).collect(),
            alpha: Scalar::real(1.0),
            beta: Scalar::real(0.0),
            c0: None,
            got: &c,
            path: None,
            seed: job.seed,
        })?)
    } else {
        None
    };
    let report = RunReport {
        spec: job.args.spec.clone(),
        explicit_spec: job.spec.to_string(),
        dtype: T::DTYPE,
        sizes: job.sizes.clone(),
        repeat: job.repeat,
        best,
        times,
        flops: plan.flops(),
        gemm_shape: plan.gemm_shape(),
        copies: plan.copies(),
        workspace_bytes: plan.workspace_bytes(),
        threads: rayon::current_num_threads(),
        explain: job.args.explain.then(|| plan.explain_measured(&times)),
        check,
    };
    emit(&report, job.args.json)
}

/// Prints the report; a failed check also prints its line on stderr in JSON mode.
fn emit(report: &RunReport, json: bool) -> CliResult<Outcome> {
    if json {
        say(&report.json().to_string())?;
    } else {
        say(&report.human())?;
    }
    match &report.check {
        Some(c) if !c.passed() => {
            if json {
                // Nothing more can be done if stderr is gone.
                let _ = writeln!(std::io::stderr(), "{}", c.line());
            }
            Ok(Outcome::CheckFailed)
        }
        _ => Ok(Outcome::Success),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_syntax() {
        let s = parse_sizes("a=48, b = 3,C=0").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[&'C'], 0);
        assert!(parse_sizes("").unwrap().is_empty());
        for bad in ["a48", "ab=3", "a=-1", "a=x", "1=3", "a=1,a=2", "=3"] {
            assert!(parse_sizes(bad).is_err(), "{bad:?}");
        }
    }
}

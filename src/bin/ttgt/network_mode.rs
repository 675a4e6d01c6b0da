//! Random mode for three or more operands: random row-major operands, the contraction path of
//! `--path`, executed `--repeat` times step by step; the best run is reported with each
//! step's time beside the path's FLOPs.

use std::collections::BTreeMap;
use std::time::Duration;

use ndarray::ArrayViewD;
use serde_json::json;
use ttgt::einsum::Spec;
use ttgt::{ContractionPath, DType, Element};

use crate::check::{check, CheckJob, CheckReport};
use crate::error::CliResult;
use crate::npy::{with_dtype, zeros};
use crate::random_mode::random_operands;
use crate::report::sizes_text;
use crate::scalar::Scalar;
use crate::{say, ContractArgs, Outcome};

/// What one network run needs besides the element type.
struct Job<'a> {
    spec: &'a Spec,
    sizes: &'a BTreeMap<char, usize>,
    repeat: usize,
    seed: u64,
    args: &'a ContractArgs,
}

/// Runs random mode on a spec of three or more operands.
pub fn run(
    spec: &Spec,
    sizes: &BTreeMap<char, usize>,
    dtype: DType,
    repeat: usize,
    seed: u64,
    args: &ContractArgs,
) -> CliResult<Outcome> {
    let job = Job {
        spec,
        sizes,
        repeat,
        seed,
        args,
    };
    with_dtype!(dtype, run_typed(&job))
}

fn run_typed<T: Element>(job: &Job<'_>) -> CliResult<Outcome> {
    let (bound, operands) = random_operands::<T>(job.spec, job.sizes, job.seed)?;
    let refs: Vec<&[usize]> = operands.iter().map(|a| a.shape()).collect();
    let options = ttgt::PathOptions {
        dtype: Some(T::DTYPE),
        ..job.args.path_options()?
    };
    let path = ttgt::einsum_path(&job.args.spec, &refs, &options)?;
    let views: Vec<ArrayViewD<'_, T>> = operands.iter().map(|a| a.view()).collect();
    // One result array for every run, as the two-operand mode reuses its C: the first run
    // faults its pages in, the best run is reported.
    let mut result = zeros::<T>(&bound.output_shape(), "the result")?;
    let mut best_run = |path: &ContractionPath| -> CliResult<Option<(Duration, Vec<Duration>)>> {
        let mut best: Option<(Duration, Vec<Duration>)> = None;
        for _ in 0..job.repeat {
            let start = std::time::Instant::now();
            let steps = ttgt::einsum_along_into(path, T::one(), &views, T::zero(), &mut result)?;
            let wall = start.elapsed();
            if best.as_ref().is_none_or(|(b, _)| wall < *b) {
                best = Some((wall, steps));
            }
        }
        Ok(best)
    };
    // --explain: the FLOP-optimal path the search started from, run the same way first
    let differs = path.reference().filter(|r| {
        job.args.explain
            && path.slicing().is_none()
            && (r.pairs != path.pairs() || r.specs.iter().ne(path.steps().iter().map(|s| &s.spec)))
    });
    let flop_run = match differs {
        Some(r) => {
            let flop = ttgt::einsum_path(
                &job.args.spec,
                &refs,
                &ttgt::PathOptions {
                    strategy: ttgt::plan::PathStrategy::Numpy(
                        r.pairs.iter().map(|&(i, j)| vec![i, j]).collect(),
                    ),
                    ..options.clone()
                },
            )?;
            best_run(&flop)?.map(|(wall, _)| wall)
        }
        None => None,
    };
    let Some((wall, steps)) = best_run(&path)? else {
        return Ok(Outcome::Success); // repeat >= 1 was checked by the caller
    };
    let checked = if job.args.check {
        Some(check(&CheckJob {
            bound: &bound,
            operands: views.clone(),
            alpha: Scalar::real(1.0),
            beta: Scalar::real(0.0),
            c0: None,
            got: &result,
            path: Some(&path),
            seed: job.seed,
        })?)
    } else {
        None
    };
    let report = Report {
        path: &path,
        dtype: T::DTYPE,
        wall,
        steps,
        flop_wall: flop_run,
        check: checked,
    };
    if job.args.json {
        say(&report.json(job).to_string())?;
    } else {
        say(&report.human(job))?;
    }
    Ok(match &report.check {
        Some(c) if !c.passed() => {
            if job.args.json {
                eprintln!("{}", c.line());
            }
            Outcome::CheckFailed
        }
        _ => Outcome::Success,
    })
}

/// The best run of a path.
struct Report<'a> {
    path: &'a ContractionPath,
    dtype: DType,
    wall: Duration,
    steps: Vec<Duration>,
    /// The best run along the FLOP-optimal path, where `--explain` ran one (it differs).
    flop_wall: Option<Duration>,
    check: Option<CheckReport>,
}

impl Report<'_> {
    fn gflops(&self) -> f64 {
        self.path.flops() / self.wall.as_secs_f64() / 1e9
    }

    fn human(&self, job: &Job<'_>) -> String {
        let mut lines = Vec::new();
        if job.args.explain {
            lines.push(self.path.to_string().trim_end().to_string());
        }
        lines.push(format!(
            "{}  {}  {}  best of {}: {:.6} s  {:.2} GFLOP/s (path FLOPs {:.4e}, {})",
            self.path.spec(),
            self.dtype,
            sizes_text(job.sizes),
            job.repeat,
            self.wall.as_secs_f64(),
            self.gflops(),
            self.path.flops(),
            self.path.strategy()
        ));
        let total = self.wall.as_secs_f64().max(f64::MIN_POSITIVE);
        let parts: Vec<String> = self
            .path
            .steps()
            .iter()
            .zip(&self.steps)
            .map(|(s, t)| {
                format!(
                    "{} {:.3} ms ({:.1}%)",
                    s.spec,
                    t.as_secs_f64() * 1e3,
                    100.0 * t.as_secs_f64() / total
                )
            })
            .collect();
        lines.push(format!("  {}", parts.join(" | ")));
        match (self.flop_wall, self.path.reference()) {
            (Some(f), _) => lines.push(format!(
                "  the FLOP-optimal path, measured: {:.6} s ({:.2}x this path's time)",
                f.as_secs_f64(),
                f.as_secs_f64() / total
            )),
            (None, Some(_)) if job.args.explain && self.path.slicing().is_none() => {
                lines.push("  this path is the FLOP-optimal path".to_string())
            }
            _ => {}
        }
        if let Some(c) = &self.check {
            lines.push(c.line());
        }
        lines.join("\n")
    }

    fn json(&self, job: &Job<'_>) -> serde_json::Value {
        let sizes: serde_json::Map<String, serde_json::Value> = job
            .sizes
            .iter()
            .map(|(c, n)| (c.to_string(), json!(n)))
            .collect();
        let check = self.check.as_ref();
        let steps: Vec<serde_json::Value> = self
            .path
            .steps()
            .iter()
            .zip(&self.steps)
            .map(|(s, t)| {
                json!({
                    "pair": [s.pair.0, s.pair.1],
                    "spec": s.spec,
                    "flops": s.flops,
                    "elements": s.elements,
                    "seconds": t.as_secs_f64(),
                    "predicted_seconds": s.predicted_seconds,
                })
            })
            .collect();
        json!({
            "spec": job.args.spec,
            "explicit_spec": self.path.spec(),
            "dtype": self.dtype.name(),
            "sizes": sizes,
            "repeat": job.repeat,
            "threads": rayon::current_num_threads(),
            "seconds": self.wall.as_secs_f64(),
            "gflops": self.gflops(),
            "flops": self.path.flops(),
            "naive_flops": self.path.naive_flops(),
            "largest_intermediate": self.path.largest_intermediate(),
            "path_strategy": self.path.strategy(),
            "predicted_seconds": self.path.predicted_seconds(),
            "flop_path_predicted_seconds": self.path.reference().map(|r| r.predicted_seconds),
            "flop_path_seconds": self.flop_wall.map(|f| f.as_secs_f64()),
            "path_planning_seconds": self.path.reference().map(|r| r.planning_seconds),
            "steps": steps,
            "check": check.map(|c| if c.passed() { "ok" } else { "failed" }),
            "check_elements": check.map(|c| c.elements),
            "check_max_rel_err": check.map(|c| c.max_rel_err),
            "explain": job.args.explain.then(|| self.path.to_string()),
        })
    }
}

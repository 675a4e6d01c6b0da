//! `ttgt bench contract`: the TCCG contractions, each beside a plain GEMM of the same
//! `m, n, k` measured in the same run, with the planner's prediction and chosen candidate;
//! with `--all-candidates`, the best-predicted candidates are timed too and the planner's
//! regret (chosen time over fastest time) is reported.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use ttgt::bench::{
    bench_contract, parse_tccg, ContractBenchOptions, ContractResult, QC_TSV, TCCG_TSV,
};
use ttgt::DType;

use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use crate::{say, say_record};

/// Arguments of `ttgt bench contract`.
#[derive(Args, Debug)]
pub struct ContractBenchArgs {
    /// Also draw the run as an SVG figure: each case's transposition, GEMM and other time
    /// over the same-size GEMM's.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// A TCCG-format table (default: the TCCG benchmark shipped in benches/data), or `qc`:
    /// the einsum calls of PySCF coupled-cluster runs (benches/data/qc_contractions.tsv, or a
    /// file in its format), each beside numpy and its roofline bound. With --backend cuda:
    /// `tccg` (default) or `ccsd`, the distinct calls of a PySCF RCCSD iteration (water,
    /// cc-pVTZ) rescaled to the orbital counts of --orbitals (default 24,117 and 40,301).
    #[arg(long, value_name = "FILE.tsv|qc|ccsd")]
    pub cases: Option<PathBuf>,
    /// With the qc table: the same calls for a molecule of O occupied and V virtual orbitals.
    #[arg(long, value_name = "O,V")]
    pub orbitals: Option<String>,
    /// With the qc table: the Python interpreter whose numpy is timed beside (default:
    /// python3; the numpy column is left out when it cannot import numpy).
    #[arg(long, value_name = "PATH")]
    pub python: Option<String>,
    /// Element type: f16, bf16, f32, f64, c32 or c64 (f32, f16 and bf16 use the table's
    /// 4-byte extents, the others its 8-byte ones; f16 and bf16 are computed in f32).
    #[arg(long, value_name = "TYPE", default_value = "f64")]
    pub dtype: String,
    /// Threads for the contraction and the reference GEMM (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Timed rounds per case, after one untimed warm-up execution of each plan and GEMM; on the
    /// CPU a round runs every timed candidate and the reference GEMMs once, interleaved. The
    /// best of each is reported.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: usize,
    /// Multiply every extent by this factor (e.g. 0.5 for a quick run).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// Also time the best-predicted candidates (up to --max-candidates) and report the
    /// planner's regret.
    #[arg(long)]
    pub all_candidates: bool,
    /// How many candidates --all-candidates times per case.
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub max_candidates: usize,
    /// Force the GEMM library (matrixmultiply, gemm, or ttgt: our own, which also enables the GETT candidate).
    #[arg(long, value_name = "LIB")]
    pub gemm: Option<String>,
    /// Run only these TCCG ids (comma list: `3,12` or `tccg-3,tccg-12`) or cases whose name
    /// contains this text; with the qc table, case ids or runs (`water/cc-pvtz`).
    #[arg(long, value_name = "IDS")]
    pub only: Option<String>,
    /// One JSON object per case and one summary object, one per line; each carries
    /// `provenance` (CPU model, cores, memory, ttgt version and commit, OS, date).
    #[arg(long)]
    pub json: bool,
    /// cpu, or cuda (the GPU contraction beside a cuBLAS GEMM; needs the `cuda` feature and a
    /// device).
    #[arg(long, value_name = "BACKEND", default_value = "cpu")]
    pub backend: String,
    /// With --backend cuda: measured tuning of the contractions' transposes (time the TTLG
    /// model's best candidates for at most this many milliseconds a plan, keep the fastest).
    #[arg(long, value_name = "MS")]
    pub measure: Option<u64>,
}

fn record(r: &ContractResult) -> serde_json::Value {
    let timed: Vec<_> = r
        .timed
        .iter()
        .map(|t| json!({"plan": t.summary, "predicted_seconds": t.predicted, "seconds": t.seconds}))
        .collect();
    json!({
        "case": r.case, "spec": r.spec, "dtype": r.dtype.name(), "threads": r.threads,
        "extents": r.extents.iter().map(|(k, v)| (k.to_string(), *v)).collect::<std::collections::BTreeMap<_, _>>(),
        "seconds": r.seconds, "median_seconds": r.samples.median, "samples": r.samples.count,
        "gflops": r.gflops(), "gemm_gflops": r.gemm_gflops(),
        "ratio": r.ratio(), "transpose_seconds": r.transpose_seconds, "gemm_seconds": r.gemm_seconds,
        "predicted_seconds": r.predicted_seconds, "plan": r.plan,
        "gemm_mnk": [r.gemm_mnk.0, r.gemm_mnk.1, r.gemm_mnk.2],
        "gemm_reference_library": r.gemm_reference_library.name(),
        "plan_seconds": r.plan_seconds, "regret": r.regret(), "candidates": timed,
    })
}

fn line(r: &ContractResult) -> String {
    let regret = r
        .regret()
        .map_or_else(String::new, |g| format!("  regret {:.1} %", g * 100.0));
    format!(
        "{:<8} {:<22} {:>9.3} ms {:>7.1} GFLOP/s  gemm {:>7.1}  ratio {:>5.2}  transp {:>8.3} ms  model {:>9.3} ms{regret}  {}",
        r.case,
        r.spec,
        r.seconds * 1e3,
        r.gflops(),
        r.gemm_gflops(),
        r.ratio(),
        r.transpose_seconds * 1e3,
        r.predicted_seconds * 1e3,
        r.plan
    )
}

/// Runs `ttgt bench contract`.
pub fn contract(a: &ContractBenchArgs) -> CliResult<()> {
    match a.backend.as_str() {
        "cpu" => {}
        "cuda" => {
            return crate::cuda::bench_contract(&crate::cuda::ContractBenchArgs {
                backend: a.backend.clone(),
                dtype: a.dtype.clone(),
                repeat: a.repeat,
                only: a.only.clone(),
                measure: a.measure,
                json: a.json,
                cases: a
                    .cases
                    .as_ref()
                    .map_or_else(|| "tccg".to_string(), |p| p.display().to_string()),
                orbitals: a.orbitals.clone(),
                all_candidates: a.all_candidates.then_some(a.max_candidates),
            })
        }
        other => {
            return Err(CliError::new(format!(
                "--backend takes cpu or cuda, got {other:?}"
            )))
        }
    }
    if a.measure.is_some() {
        return Err(CliError::new(
            "--measure applies to --backend cuda only (the CPU bench times candidates with --all-candidates)",
        ));
    }
    let threads = crate::bench::bench_threads(a.threads)?;
    let text = match &a.cases {
        Some(p) if p.as_os_str() == "qc" => return crate::bench_qc::qc(a, QC_TSV, threads),
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())))?,
        None => TCCG_TSV.to_string(),
    };
    if crate::bench_qc::is_qc_table(&text) {
        return crate::bench_qc::qc(a, &text, threads);
    }
    if a.orbitals.is_some() || a.python.is_some() {
        return Err(CliError::new("--orbitals and --python apply to --cases qc"));
    }
    let dtype: DType = a.dtype.parse().map_err(CliError::new)?;
    crate::bench::check_scale(a.scale)?;
    let mut list = parse_tccg(&text)?;
    if let Some(only) = &a.only {
        list.retain(|c| selected(&c.name, only));
    }
    if list.is_empty() {
        return Err(CliError::new("no benchmark case selected"));
    }
    let library = match &a.gemm {
        Some(g) => Some(g.parse()?),
        None => None,
    };
    let o = ContractBenchOptions {
        dtype,
        threads,
        repeat: a.repeat.max(1),
        scale: a.scale,
        candidates: if a.all_candidates {
            a.max_candidates.max(2)
        } else {
            0
        },
        library,
    };
    let mut ratios = Vec::new();
    let mut errs = Vec::new();
    let mut regrets = Vec::new();
    let progress = Progress::cases(list.len(), a.json);
    let mut records = Vec::new();
    for c in &list {
        progress.running(&c.name);
        let r = bench_contract(c, &o)?;
        ratios.push(r.ratio());
        errs.push((r.predicted_seconds - r.seconds).abs() / r.seconds);
        if let Some(g) = r.regret() {
            regrets.push(g);
        }
        crate::emit(record(&r), a.json, a.plot.is_some(), &mut records, || {
            progress.say(&line(&r))
        })?;
        progress.inc();
    }
    drop(progress);
    if let Some(path) = &a.plot {
        crate::plot::write_figure(path, &records, crate::plot::contract_svg)?;
    }
    let n = ratios.len() as f64;
    let mean = ratios.iter().sum::<f64>() / n;
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let mare = errs.iter().sum::<f64>() / n;
    let within20 = errs.iter().filter(|&&e| e < 0.2).count();
    let low_regret = regrets.iter().filter(|&&g| g < 0.1).count();
    if a.json {
        say_record(
            json!({"summary": true, "cases": list.len(), "dtype": dtype.name(), "threads": threads,
            "mean_ratio": mean, "min_ratio": min, "model_mare": mare, "model_within_20pct": within20,
            "regret_cases": regrets.len(), "regret_under_10pct": low_regret}),
        )?;
    } else {
        let mut s = format!(
            "summary: {} cases  mean ratio to same-size GEMM {mean:.3}  min {min:.3}  model mean abs rel error {:.1} % ({within20} cases under 20 %)",
            list.len(),
            mare * 100.0
        );
        if !regrets.is_empty() {
            s += &format!(
                "  regret under 10 % in {low_regret} of {} cases",
                regrets.len()
            );
        }
        say(&s)?;
    }
    Ok(())
}

/// Whether TCCG case `name` is among `only`: a comma list of ids (`3,12` or `tccg-3,tccg-12`),
/// or a text the name contains.
fn selected(name: &str, only: &str) -> bool {
    let id = |s: &str| {
        let s = s.trim();
        format!("tccg-{}", s.strip_prefix("tccg-").unwrap_or(s))
    };
    only.split(',').any(|s| id(s) == name)
        || (!only.contains(',')
            && !only.starts_with("tccg-")
            && only.parse::<usize>().is_err()
            && name.contains(only))
}

#[cfg(test)]
mod tests {
    use super::selected;

    #[test]
    fn only_takes_ids_in_either_form_or_a_name_part() {
        assert!(selected("tccg-3", "3"));
        assert!(selected("tccg-3", "tccg-3"));
        assert!(selected("tccg-12", "3, tccg-12"));
        // an id selects that case, not every case whose name starts with it
        assert!(!selected("tccg-31", "3"));
        assert!(!selected("tccg-31", "tccg-3"));
        assert!(!selected("tccg-31", "1,tccg-3"));
        // a text that is no id: the cases whose name contains it
        assert!(selected("tccg-31", "cg-3"));
        assert!(!selected("tccg-12", "cg-3"));
    }
}

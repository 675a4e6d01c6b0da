//! `ttgt bench networks`: einsum networks of three or more operands along the path `einsum`
//! chooses, each beside the same network along the FLOP-optimal path and beside plain GEMMs
//! of every step's `m, n, k`, measured in the same rounds.

use clap::Args;
use serde_json::json;
use ttgt::bench::{
    bench_network, parse_networks, NetworkBenchOptions, NetworkResult, NETWORKS_TSV,
};
use ttgt::DType;

use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use crate::{say, say_record};

/// Arguments of `ttgt bench networks`.
#[derive(Args, Debug)]
pub struct NetworkBenchArgs {
    /// Element type: f16, bf16, f32, f64, c32 or c64 (f16 and bf16 computed in f32).
    #[arg(long, value_name = "TYPE", default_value = "f64")]
    pub dtype: String,
    /// Threads for the contractions and the reference GEMMs (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Timed rounds after an untimed one; a round runs the chosen path, the FLOP-optimal path
    /// (when it differs) and the reference GEMMs once each. The best of each is reported.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub repeat: usize,
    /// Multiply every extent by this factor (e.g. 0.5 for a quick run).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// Run only these networks (comma list of names).
    #[arg(long, value_name = "NAMES")]
    pub only: Option<String>,
    /// One JSON object per network and one summary object, one per line; each carries
    /// `provenance` (CPU model, cores, memory, ttgt version and commit, OS, date).
    #[arg(long)]
    pub json: bool,
}

fn record(r: &NetworkResult) -> serde_json::Value {
    let steps: Vec<_> = r
        .steps
        .iter()
        .map(|(s, t)| json!({"spec": s, "seconds": t}))
        .collect();
    json!({
        "case": r.case, "spec": r.spec, "dtype": r.dtype.name(), "threads": r.threads,
        "extents": r.extents.iter().map(|(k, v)| (k.to_string(), *v)).collect::<std::collections::BTreeMap<_, _>>(),
        "seconds": r.seconds, "median_seconds": r.samples.median, "samples": r.samples.count,
        "gflops": r.gflops(), "flops": r.flops, "path_strategy": r.strategy,
        "predicted_seconds": r.predicted_seconds, "prediction_ratio": r.prediction_ratio(),
        "planning_seconds": r.planning_seconds,
        "flop_path_seconds": r.flop_seconds, "flop_path_flops": r.flop_flops,
        "flop_path_predicted_seconds": r.flop_predicted_seconds, "flop_path_speedup": r.flop_speedup(),
        "gemm_reference_seconds": r.gemm_reference_seconds, "ratio": r.ratio(), "steps": steps,
    })
}

/// Runs `ttgt bench networks`.
pub fn networks(a: &NetworkBenchArgs) -> CliResult<()> {
    let dtype: DType = a.dtype.parse().map_err(CliError::new)?;
    let threads = crate::bench::bench_threads(a.threads)?;
    crate::bench::check_scale(a.scale)?;
    let mut list = parse_networks(NETWORKS_TSV)?;
    if let Some(only) = &a.only {
        let names: Vec<&str> = only.split(',').map(str::trim).collect();
        list.retain(|c| names.contains(&c.name.as_str()));
    }
    if list.is_empty() {
        return Err(CliError::new("no network selected"));
    }
    let o = NetworkBenchOptions {
        dtype,
        threads,
        repeat: a.repeat.max(1),
        scale: a.scale,
    };
    let (mut ratios, mut speedups, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    let progress = Progress::cases(list.len(), a.json);
    for c in &list {
        progress.running(&c.name);
        let r = bench_network(c, &o)?;
        ratios.push(r.ratio());
        speedups.push(r.flop_speedup());
        errors.push((r.prediction_ratio() - 1.0).abs());
        if a.json {
            say_record(record(&r))
        } else {
            progress.say(&format!(
                "{:<13} {:<32} {:>9.3} ms (predicted {:>9.3}) {:>7.1} GFLOP/s  ratio to same-size GEMMs {:>5.2}  FLOP-optimal path {:>9.3} ms ({:.2}x)  planning {:.2} ms",
                r.case,
                r.spec,
                r.seconds * 1e3,
                r.predicted_seconds * 1e3,
                r.gflops(),
                r.ratio(),
                r.flop_seconds * 1e3,
                r.flop_speedup(),
                r.planning_seconds * 1e3
            ))
        }?;
        progress.inc();
    }
    drop(progress);
    let n = ratios.len() as f64;
    let mean = ratios.iter().sum::<f64>() / n;
    let geo = (speedups.iter().map(|s| s.ln()).sum::<f64>() / n).exp();
    let error = errors.iter().sum::<f64>() / n;
    if a.json {
        say_record(
            json!({"summary": true, "cases": list.len(), "dtype": dtype.name(), "threads": threads,
            "mean_ratio": mean, "geomean_flop_path_speedup": geo,
            "mean_prediction_error": error}),
        )?;
    } else {
        say(&format!(
            "summary: {} networks  mean ratio to same-size GEMMs {mean:.3}  geometric-mean speed-up over the FLOP-optimal path {geo:.2}x  mean prediction error {:.0} %",
            list.len(),
            error * 100.0
        ))?;
    }
    Ok(())
}

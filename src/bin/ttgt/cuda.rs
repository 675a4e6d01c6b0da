//! `--backend cuda` of `ttgt bench transpose`, `ttgt bench contract` and `ttgt calibrate`.
//! Without the `cuda` feature, or without a usable device, these report a one-line error
//! (exit status 2).

use crate::error::{CliError, CliResult};
#[cfg(feature = "cuda")]
use crate::say;
use clap::Args;

/// Whether `--backend` names the CUDA backend (`cpu` or `cuda`).
pub fn is_cuda(backend: &str) -> CliResult<bool> {
    match backend {
        "cpu" => Ok(false),
        "cuda" => Ok(true),
        other => Err(CliError::new(format!(
            "unknown backend {other:?} (expected cpu or cuda)"
        ))),
    }
}

/// One TCCG case: id, row-major einsum spec, operand extents.
type TccgCase = (String, String, Vec<usize>, Vec<usize>);

/// The TCCG cases in row-major terms (the table's `einsum_rowmajor_equiv`, the same memory
/// layouts as the CPU bench) with the extents for `dtype`.
fn tccg_cases(dtype: ttgt::DType) -> CliResult<Vec<TccgCase>> {
    let bad = |w: &str| CliError::new(format!("TCCG table: {w}"));
    let mut out = Vec::new();
    for c in ttgt::bench::parse_tccg(ttgt::bench::TCCG_TSV)? {
        let ext = c.extents(dtype, 1.0);
        let (ins, _) = c
            .spec
            .split_once("->")
            .ok_or_else(|| bad("spec without ->"))?;
        let (ta, tb) = ins
            .split_once(',')
            .ok_or_else(|| bad("spec without two inputs"))?;
        let shape = |t: &str| -> CliResult<Vec<usize>> {
            t.chars()
                .map(|ch| {
                    ext.get(&ch)
                        .copied()
                        .ok_or_else(|| bad(&format!("no extent for {ch}")))
                })
                .collect()
        };
        out.push((c.name.clone(), c.spec.clone(), shape(ta)?, shape(tb)?));
    }
    Ok(out)
}

/// Arguments of `ttgt bench contract`.
#[derive(Args, Debug)]
pub struct ContractBenchArgs {
    /// Backend: cuda (the CPU contraction benchmark is `cargo bench --bench contract`).
    #[arg(long, value_name = "BACKEND", default_value = "cuda")]
    pub backend: String,
    /// Element type: f32, f64, c32 or c64.
    #[arg(long, value_name = "TYPE", default_value = "f32")]
    pub dtype: String,
    /// Timed executions per case; the best is reported.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub repeat: usize,
    /// Run only the TCCG cases whose names contain this text, or a comma list of ids.
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// Measured tuning of the contractions' transposes: time the model's best candidates on
    /// the device for at most this many milliseconds a plan and keep the fastest.
    #[arg(long, value_name = "MS")]
    pub measure: Option<u64>,
    /// One JSON object per case and one summary object, one per line.
    #[arg(long)]
    pub json: bool,
}

#[cfg(not(feature = "cuda"))]
fn no_cuda<T>() -> CliResult<T> {
    Err(CliError::new(
        "--backend cuda: this ttgt was built without the cuda feature (cargo build --features cuda)",
    ))
}

#[cfg(feature = "cuda")]
fn device() -> CliResult<ttgt::backend::cuda::device::Device> {
    ttgt::backend::cuda::device::Device::new(0)
        .map_err(|e| CliError::new(format!("--backend cuda: {e}")))
}

/// `ttgt bench transpose --backend cuda`; `schema` forces a TTLG schema (cases where it
/// does not apply are skipped); `measure` (milliseconds) turns on measured tuning;
/// `micro_blocks` (off, f32 or all) sets which types move in 2x2 blocks; `async_copies`
/// runs OD with cp.async.
#[allow(unused_variables, clippy::too_many_arguments)]
pub fn bench_transpose(
    cases: &[ttgt::bench::TransposeCase],
    dtype: ttgt::DType,
    repeat: usize,
    beta: f64,
    schema: Option<&str>,
    measure: Option<u64>,
    micro_blocks: Option<&str>,
    async_copies: bool,
    as_json: bool,
) -> CliResult<()> {
    #[cfg(not(feature = "cuda"))]
    return no_cuda();
    #[cfg(feature = "cuda")]
    {
        use ttgt::backend::cuda::ttlg::Schema;
        let schema: Option<Schema> = schema
            .map(|s| s.parse().map_err(CliError::new))
            .transpose()?;
        let micro_blocks: ttgt::backend::cuda::ttlg::MicroBlocks = micro_blocks
            .map(|s| s.parse().map_err(CliError::new))
            .transpose()?
            .unwrap_or_default();
        let mut dev = device()?;
        if let Some(ms) = measure {
            dev.set_tuning(ttgt::backend::cuda::ttlg::GpuTuning::Measure {
                budget: std::time::Duration::from_millis(ms),
            });
        }
        dev.set_micro_blocks(micro_blocks);
        dev.set_async_copies(async_copies)
            .map_err(|e| CliError::new(format!("--async-copies: {e}")))?;
        let mut tb = ttgt::backend::cuda::bench::TransposeBench::new(&dev);
        let mut ratios = Vec::new();
        let mut skipped = 0usize;
        for c in cases {
            let r = match tb.run(c, dtype, repeat, beta, schema) {
                Ok(r) => r,
                Err(ttgt::Error::Unsupported(_)) if schema.is_some() => {
                    skipped += 1;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            ratios.push(r.ratio);
            if as_json {
                say(&crate::bench::record(&r).to_string())?;
            } else {
                say(&crate::bench::line(&r))?;
            }
        }
        let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let s = serde_json::json!({"summary": true, "backend": "cuda", "device": dev.props().name,
                       "cases": ratios.len(), "skipped": skipped,
                       "schema": schema.map(|s| s.short_name()), "measure_ms": measure,
                       "micro_blocks": format!("{micro_blocks:?}").to_lowercase(),
                       "async_copies": async_copies,
                       "mean_ratio": mean, "min_ratio": min});
        say(&if as_json {
            s.to_string()
        } else {
            format!("summary: {s}")
        })
    }
}

/// `ttgt bench contract --backend cuda`.
pub fn bench_contract(a: &ContractBenchArgs) -> CliResult<()> {
    if !is_cuda(&a.backend)? {
        return Err(CliError::new(
            "ttgt bench contract: only --backend cuda is implemented here (CPU: cargo bench --bench contract)",
        ));
    }
    let dtype: ttgt::DType = a.dtype.parse().map_err(CliError::new)?;
    let mut cases = tccg_cases(dtype)?;
    if let Some(only) = &a.only {
        let ids: Vec<String> = only
            .split(',')
            .map(|s| format!("tccg-{}", s.trim()))
            .collect();
        // a number names one TCCG case; other text selects the names that contain it
        cases.retain(|c| {
            ids.contains(&c.0)
                || (!only.contains(',')
                    && only.parse::<usize>().is_err()
                    && c.0.contains(only.as_str()))
        });
    }
    if cases.is_empty() {
        return Err(CliError::new("no benchmark case selected"));
    }
    #[cfg(not(feature = "cuda"))]
    return no_cuda();
    #[cfg(feature = "cuda")]
    {
        let mut dev = device()?;
        if let Some(ms) = a.measure {
            dev.set_tuning(ttgt::backend::cuda::ttlg::GpuTuning::Measure {
                budget: std::time::Duration::from_millis(ms),
            });
        }
        let mut ratios = Vec::new();
        for (name, spec, sa, sb) in &cases {
            let r =
                ttgt::backend::cuda::bench::bench_contract(&dev, spec, sa, sb, dtype, a.repeat)?;
            ratios.push(r.ratio);
            let v = serde_json::json!({
                "case": name, "spec": r.spec, "shapes": r.shapes, "dtype": r.dtype.name(),
                "seconds": r.seconds, "single_use_seconds": r.single_use_seconds,
                "gflops": r.gflops, "gemm_gflops": r.gemm_gflops, "ratio": r.ratio, "plan": r.plan,
            });
            say(&if a.json {
                v.to_string()
            } else {
                format!(
                    "{name:<9} {spec:<22} {:>9.3} ms {:>9.1} GFLOP/s  gemm {:>9.1}  ratio {:>5.2}",
                    r.seconds * 1e3,
                    r.gflops,
                    r.gemm_gflops,
                    r.ratio
                )
            })?;
        }
        let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
        let s = serde_json::json!({"summary": true, "backend": "cuda", "device": dev.props().name,
                       "cases": ratios.len(), "mean_ratio": mean, "measure_ms": a.measure});
        say(&if a.json {
            s.to_string()
        } else {
            format!("summary: {s}")
        })
    }
}

/// `ttgt calibrate --backend cuda`: fits the GPU model and stores it per device name.
#[allow(unused_variables)]
pub fn calibrate(mib: usize, dry_run: bool) -> CliResult<()> {
    #[cfg(not(feature = "cuda"))]
    return no_cuda();
    #[cfg(feature = "cuda")]
    {
        let dev = device()?;
        let model = ttgt::backend::cuda::bench::calibrate(&dev, mib)?;
        say(&model.to_json())?;
        if !dry_run {
            let path = model.save()?;
            say(&format!("stored in {}", path.display()))?;
        }
        Ok(())
    }
}

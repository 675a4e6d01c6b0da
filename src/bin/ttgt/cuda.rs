//! `--backend cuda` of `ttgt bench transpose`, `ttgt bench contract` and `ttgt calibrate`.
//! Without the `cuda` feature, or without a usable device, these report a one-line error
//! (exit status 2).

use crate::error::{CliError, CliResult};
#[cfg(feature = "cuda")]
use crate::say;

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

/// The run whose calls make the CCSD set: RCCSD on water in cc-pVTZ (5 occupied, 53 virtual
/// orbitals), each call's extents rescaled to other orbital counts.
const CCSD_RUN: &str = "water/cc-pvtz/rccsd";

/// The distinct contractions of a PySCF RCCSD iteration at each `(occupied, virtual)` pair:
/// the recorded calls of [`CCSD_RUN`] with every occupied extent replaced by the first and
/// every virtual extent by the second, as dense row-major operands.
fn ccsd_cases(orbitals: &[(usize, usize)]) -> CliResult<Vec<TccgCase>> {
    let all = ttgt::bench::parse_qc(ttgt::bench::QC_TSV)?;
    let mut out = Vec::new();
    for &(o, v) in orbitals {
        for c in all.iter().filter(|c| c.workload == CCSD_RUN) {
            let (ro, rv) = c.orbitals;
            let map = |x: usize| -> CliResult<usize> {
                match x {
                    x if x == ro => Ok(o),
                    x if x == rv => Ok(v),
                    x => Err(CliError::new(format!(
                        "{}: extent {x} is neither the occupied ({ro}) nor the virtual ({rv}) count",
                        c.name
                    ))),
                }
            };
            let mut shapes = Vec::new();
            for s in &c.shapes {
                shapes.push(s.iter().map(|&x| map(x)).collect::<CliResult<Vec<_>>>()?);
            }
            let [sa, sb] = <[Vec<usize>; 2]>::try_from(shapes)
                .map_err(|_| CliError::new(format!("{}: not two operands", c.name)))?;
            out.push((format!("ccsd-{o}x{v}-{}", c.name), c.spec.clone(), sa, sb));
        }
    }
    Ok(out)
}

/// Orbital counts of the ccsd set when none are given: the occupied/virtual sizes of a
/// mid-size (triple-zeta, small molecule) and a large (40 occupied) CCSD.
const CCSD_ORBITALS: [(usize, usize); 2] = [(24, 117), (40, 301)];

/// Parses `O,V` into one orbital pair (none given: [`CCSD_ORBITALS`]).
fn parse_orbitals(s: Option<&str>) -> CliResult<Vec<(usize, usize)>> {
    let Some(s) = s else {
        return Ok(CCSD_ORBITALS.to_vec());
    };
    let bad = || CliError::new(format!("--orbitals {s:?}: expected O,V (e.g. 24,117)"));
    let (o, v) = s.split_once(',').ok_or_else(bad)?;
    let n = |x: &str| {
        x.trim()
            .parse::<usize>()
            .ok()
            .filter(|&x| x > 0)
            .ok_or_else(bad)
    };
    Ok(vec![(n(o)?, n(v)?)])
}

/// What `ttgt bench contract --backend cuda` was asked for.
#[derive(Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct ContractBenchArgs {
    /// Backend: cuda.
    pub backend: String,
    /// Element type: f32, f64, c32 or c64.
    pub dtype: String,
    /// Timed samples per case; the best is reported.
    pub repeat: usize,
    /// Case set: tccg (the 48 TCCG contractions) or ccsd (the distinct contractions of a
    /// PySCF RCCSD iteration at the orbital counts of `orbitals`).
    pub cases: String,
    /// `O,V`: occupied and virtual orbital counts of the ccsd set (default: 24,117 and
    /// 40,301).
    pub orbitals: Option<String>,
    /// Run only the TCCG cases whose names contain this text, or a comma list of ids.
    pub only: Option<String>,
    /// Also time the planner's candidates one by one: the first N in its order and the
    /// best-ranked plan of each kind (direct, partial, packed); reports the planner's regret.
    pub all_candidates: Option<usize>,
    /// Measured tuning of the contractions' transposes: time the model's best candidates on
    /// the device for at most this many milliseconds a plan and keep the fastest.
    pub measure: Option<u64>,
    /// One JSON object per case and one summary object, one per line.
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
        let mut tb = ttgt::bench::cuda::TransposeBench::new(&dev);
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
    let mut cases = match a.cases.as_str() {
        "tccg" => tccg_cases(dtype)?,
        "ccsd" => ccsd_cases(&parse_orbitals(a.orbitals.as_deref())?)?,
        other => {
            return Err(CliError::new(format!(
                "--cases {other:?}: the GPU contraction sets are tccg and ccsd"
            )))
        }
    };
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
        let mut regrets = Vec::new();
        let mut skipped = Vec::new();
        for (name, spec, sa, sb) in &cases {
            let r = match ttgt::bench::cuda::bench_contract_candidates(
                &dev,
                spec,
                sa,
                sb,
                dtype,
                a.repeat,
                a.all_candidates.unwrap_or(0),
            ) {
                Ok(r) => r,
                Err(ttgt::Error::Unsupported(why)) => {
                    say(&format!("{name}: skipped ({why})"))?;
                    skipped.push(name.clone());
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            ratios.push(r.ratio);
            let fastest = r
                .candidates
                .iter()
                .map(|c| c.seconds)
                .fold(f64::INFINITY, f64::min);
            let regret = r.candidates.first().map(|c| c.seconds / fastest - 1.0);
            regrets.extend(regret);
            let cands: Vec<serde_json::Value> = r
                .candidates
                .iter()
                .map(|c| {
                    serde_json::json!({"rank": c.rank, "kind": c.kind,
                        "predicted_seconds": c.predicted_seconds, "seconds": c.seconds,
                        "plan": c.plan})
                })
                .collect();
            let v = serde_json::json!({
                "case": name, "spec": r.spec, "shapes": r.shapes, "dtype": r.dtype.name(),
                "seconds": r.seconds, "single_use_seconds": r.single_use_seconds,
                "gflops": r.gflops, "gemm_gflops": r.gemm_gflops, "ratio": r.ratio, "plan": r.plan,
                "kind": r.kind, "predicted_seconds": r.predicted_seconds,
                "candidates": cands, "regret": regret,
            });
            say(&if a.json {
                v.to_string()
            } else {
                format!(
                    "{name:<9} {spec:<22} {:>9.3} ms {:>9.1} GFLOP/s  gemm {:>9.1}  ratio {:>5.2}  {}{}",
                    r.seconds * 1e3,
                    r.gflops,
                    r.gemm_gflops,
                    r.ratio,
                    r.kind,
                    regret.map_or(String::new(), |x| format!("  regret {:.1} %", 100.0 * x))
                )
            })?;
        }
        let within = regrets.iter().filter(|&&x| x < 0.10).count();
        let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
        let s = serde_json::json!({"summary": true, "backend": "cuda", "device": dev.props().name,
                       "cases": ratios.len(), "mean_ratio": mean, "measure_ms": a.measure,
                       "set": a.cases, "skipped": skipped,
                       "regret_cases": regrets.len(), "regret_under_10pct": within});
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
        let model = ttgt::bench::cuda::calibrate(&dev, mib)?;
        say(&model.to_json())?;
        if !dry_run {
            let path = model.save()?;
            say(&format!("stored in {}", path.display()))?;
        }
        Ok(())
    }
}

//! `ttgt bench contract --cases qc`: the einsum calls of PySCF coupled-cluster runs, each
//! replayed with its recorded layouts, beside numpy (when a Python with numpy is found) and
//! beside its roofline bound, with call-weighted totals per run.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use ttgt::bench::{bench_qc, parse_qc, MachineLimits, QcBenchOptions, QcCase, QcResult, QC_TSV};

use crate::bench_contract::ContractBenchArgs;
use crate::error::{CliError, CliResult};
use crate::say;

/// The numpy side, run by the Python interpreter the user names (or `python3`).
const NUMPY_PEER: &str = include_str!("../../../benches/python/qc_numpy_peer.py");

/// Whether `--cases` names the qc table (the word `qc`, or a file with a `workload` column).
pub fn is_qc(cases: Option<&std::path::Path>) -> CliResult<Option<String>> {
    let Some(p) = cases else { return Ok(None) };
    if p.as_os_str() == "qc" {
        return Ok(Some(QC_TSV.to_string()));
    }
    let text = std::fs::read_to_string(p)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())))?;
    let header = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty());
    Ok(header
        .is_some_and(|h| h.split('\t').any(|c| c == "workload"))
        .then_some(text))
}

/// numpy's times per case name, or why there are none.
fn numpy_times(
    python: &str,
    cases: &[&QcCase],
    threads: usize,
    repeat: usize,
) -> Result<HashMap<String, Value>, String> {
    let input: Vec<Value> = cases
        .iter()
        .map(|c| {
            json!({"name": c.name, "spec": c.spec, "shapes": c.shapes, "strides": c.strides,
                   "dtype": numpy_dtype(c.dtype)})
        })
        .collect();
    let mut child = Command::new(python)
        .args(["-c", NUMPY_PEER, &repeat.to_string(), "2e-3"])
        .env_remove("OPENBLAS_CORETYPE")
        .env("OPENBLAS_NUM_THREADS", threads.to_string())
        .env("OMP_NUM_THREADS", threads.to_string())
        .env("MKL_NUM_THREADS", threads.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    let text = serde_json::to_string(&input).map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(text.as_bytes())
        .map_err(|e| format!("{python}: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{python}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("failed");
        return Err(format!("{python}: {last}"));
    }
    let mut m = HashMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(l).map_err(|e| format!("{python}: {e}"))?;
        if let Some(n) = v["name"].as_str() {
            m.insert(n.to_string(), v);
        }
    }
    Ok(m)
}

fn numpy_dtype(d: ttgt::DType) -> &'static str {
    match d {
        ttgt::DType::F32 => "float32",
        ttgt::DType::F64 => "float64",
        ttgt::DType::C32 => "complex64",
        ttgt::DType::C64 => "complex128",
    }
}

/// The identity of a call, shared by runs that make the same one.
fn key(c: &QcCase) -> String {
    format!("{} {:?} {:?} {:?}", c.spec, c.shapes, c.strides, c.dtype)
}

fn shapes(c: &QcCase) -> String {
    c.shapes
        .iter()
        .map(|s| {
            s.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("x")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs the qc bench on `text`.
pub fn qc(a: &ContractBenchArgs, text: &str, threads: usize) -> CliResult<()> {
    let mut list = parse_qc(text)?;
    if let Some(orb) = &a.orbitals {
        let (o, v) = orb
            .split_once(',')
            .and_then(|(o, v)| Some((o.trim().parse().ok()?, v.trim().parse().ok()?)))
            .filter(|&(o, v): &(usize, usize)| o > 0 && v > 0)
            .ok_or_else(|| CliError::new(format!("--orbitals takes O,V, got {orb:?}")))?;
        list = list.iter().map(|c| c.with_orbitals(o, v)).collect();
    }
    if let Some(only) = &a.only {
        let words: Vec<&str> = only.split(',').map(str::trim).collect();
        list.retain(|c| {
            words
                .iter()
                .any(|w| c.name == *w || c.name == format!("qc-{w}") || c.workload.contains(w))
        });
    }
    if list.is_empty() {
        return Err(CliError::new("no benchmark case selected"));
    }
    let dtype = list[0].dtype;
    let limits = MachineLimits::measure(dtype, threads)?;
    let o = QcBenchOptions {
        threads,
        repeat: a.repeat.max(1),
        ..Default::default()
    };
    // Each distinct call once, then numpy on the same distinct calls (never concurrently).
    let mut distinct: BTreeMap<String, &QcCase> = BTreeMap::new();
    for c in &list {
        distinct.entry(key(c)).or_insert(c);
    }
    let mut ours: HashMap<String, QcResult> = HashMap::new();
    for (k, c) in &distinct {
        ours.insert(k.clone(), bench_qc(c, &o)?);
    }
    let firsts: Vec<&QcCase> = distinct.values().copied().collect();
    let python = a.python.clone().unwrap_or_else(|| "python3".into());
    let peer = numpy_times(&python, &firsts, threads, a.repeat.max(1));
    let peer = match peer {
        Ok(m) => m,
        Err(why) => {
            eprintln!("numpy column left out: {why}");
            HashMap::new()
        }
    };
    let peer_of = |c: &QcCase| peer.get(&distinct[&key(c)].name);
    let mut totals: BTreeMap<&str, [f64; 6]> = BTreeMap::new();
    for c in &list {
        let r = &ours[&key(c)];
        let bound = r.bound(&limits);
        let np = peer_of(c).and_then(|v| v["seconds"].as_f64());
        let t = totals.entry(c.workload.as_str()).or_default();
        let w = c.calls as f64;
        t[0] += w * r.seconds;
        t[1] += w * np.unwrap_or(f64::NAN);
        t[2] += w * bound;
        t[3] += w * r.first_seconds.max(r.seconds) / r.seconds;
        t[4] += w;
        t[5] += f64::from(u8::from(np.is_some_and(|n| r.seconds <= n)));
        if a.json {
            say(
                &json!({"case": c.name, "workload": c.workload, "spec": c.spec,
                "shapes": c.shapes, "strides": c.strides, "dtype": c.dtype.name(),
                "calls": c.calls, "threads": threads, "seconds": r.seconds,
                "first_seconds": r.first_seconds, "flops": r.flops, "bytes": r.bytes,
                "bound_seconds": bound, "numpy": peer_of(c)})
                .to_string(),
            )?;
        } else {
            let np_s = np.map_or_else(|| "        -".to_string(), |n| format!("{:>9.1}", n * 1e6));
            let speed = np.map_or_else(String::new, |n| format!("{:>5.2}x", n / r.seconds));
            say(&format!(
                "{:<7} {:<22} {:<26} {:<24} {:>6} {:>9.1} us  first {:>9.1}  numpy {np_s} {speed:>6}  bound {:>5.2}",
                c.name,
                c.workload,
                c.spec,
                shapes(c),
                c.calls,
                r.seconds * 1e6,
                r.first_seconds * 1e6,
                bound / r.seconds,
            ))?;
        }
    }
    let distinct_per_run = |w: &str| list.iter().filter(|c| c.workload == w).count();
    for (w, t) in &totals {
        let n = distinct_per_run(w);
        if a.json {
            say(
                &json!({"summary": true, "workload": w, "threads": threads, "cases": n,
                "calls": t[4], "seconds": t[0], "numpy_seconds": t[1], "bound_seconds": t[2],
                "speedup_over_numpy": t[1] / t[0], "of_bound": t[2] / t[0],
                "numpy_of_bound": t[2] / t[1], "not_slower_than_numpy": t[5],
                "first_over_repeated": t[3] / t[4],
                "gemm_gflops": limits.gemm_flops / 1e9, "copy_gbs": limits.copy_bytes / 1e9})
                .to_string(),
            )?;
        } else {
            say(&format!(
                "summary {w:<22} {n:>3} cases {:>6} calls  ttgt {:>9.3} ms  numpy {:>9.3} ms  speed-up {:>5.2}x  of bound: ttgt {:.2} numpy {:.2}  at most numpy's time: {} of {n}  first/repeated {:.2}",
                t[4], t[0] * 1e3, t[1] * 1e3, t[1] / t[0], t[2] / t[0], t[2] / t[1], t[5], t[3] / t[4]
            ))?;
        }
    }
    if !a.json {
        say(&format!(
            "limits: GEMM {:.1} GFLOP/s, best copy {:.1} GB/s ({threads} threads)",
            limits.gemm_flops / 1e9,
            limits.copy_bytes / 1e9
        ))?;
    }
    Ok(())
}

//! `ttgt bench contract --cases qc`: the einsum calls of PySCF coupled-cluster runs, each
//! replayed with its recorded layouts, beside numpy (when a Python with numpy is found) and
//! beside its roofline bound, with call-weighted totals per run.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};
use ttgt::bench::{parse_qc, MachineLimits, QcBenchOptions, QcCase, QcResult, QcRun};

use crate::bench_contract::ContractBenchArgs;
use crate::error::{CliError, CliResult};
use crate::{say, say_record};

/// How long the bench waits after numpy's calls before timing ttgt on several threads: the
/// spin-wait of OpenBLAS's idle workers (`OPENBLAS_THREAD_TIMEOUT`'s default, 2^28 cycles, is
/// about 0.1 s at 2.5–3.5 GHz).
const PEER_SPIN_SECONDS: std::time::Duration = std::time::Duration::from_millis(120);

/// The numpy side, run by the Python interpreter the user names (or `python3`).
const NUMPY_PEER: &str = include_str!("../../../benches/python/qc_numpy_peer.py");

/// Whether a table is in the qc format (a header with a `workload` column).
pub fn is_qc_table(text: &str) -> bool {
    text.lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .is_some_and(|h| h.split('\t').any(|c| c.trim() == "workload"))
}

/// The numpy side: a Python child answering one request per line.
struct Peer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    python: String,
}

/// numpy's times of one case: the first call and the best batch of each way.
#[derive(Default)]
struct PeerTimes {
    first: BTreeMap<String, f64>,
    best: BTreeMap<String, f64>,
}

impl PeerTimes {
    /// The fastest way, its time per call and its first call.
    fn fastest(&self) -> Option<(&str, f64, f64)> {
        let (way, &s) = self.best.iter().min_by(|a, b| a.1.total_cmp(b.1))?;
        Some((way, s, self.first.get(way).copied().unwrap_or(f64::NAN)))
    }
}

impl Peer {
    fn spawn(python: &str, threads: usize, batch_seconds: f64) -> Result<Peer, String> {
        let mut child = Command::new(python)
            .args(["-c", NUMPY_PEER, &batch_seconds.to_string()])
            .env_remove("OPENBLAS_CORETYPE")
            .env("OPENBLAS_NUM_THREADS", threads.to_string())
            .env("OMP_NUM_THREADS", threads.to_string())
            .env("MKL_NUM_THREADS", threads.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {python}: {e}"))?;
        let input = child.stdin.take().ok_or("no stdin")?;
        let output = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Peer {
            child,
            input,
            output,
            python: python.to_string(),
        })
    }

    fn ask(&mut self, request: &Value) -> Result<BTreeMap<String, f64>, String> {
        let python = &self.python;
        writeln!(self.input, "{request}").map_err(|e| format!("{python}: {e}"))?;
        let mut line = String::new();
        let n = self
            .output
            .read_line(&mut line)
            .map_err(|e| format!("{python}: {e}"))?;
        if n == 0 {
            let mut err = String::new();
            if let Some(mut e) = self.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let last = err.lines().last().unwrap_or("exited");
            return Err(format!("{python}: {last}"));
        }
        serde_json::from_str(&line).map_err(|e| format!("{python}: {e}"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn numpy_dtype(d: ttgt::DType) -> &'static str {
    d.numpy_name()
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
    // Each distinct call once: its first call, then rounds that each time one batch of ttgt
    // and one of every numpy way, so that a slow spell of a shared host falls on both.
    let mut distinct: BTreeMap<String, &QcCase> = BTreeMap::new();
    for c in &list {
        distinct.entry(key(c)).or_insert(c);
    }
    let python = a.python.clone().unwrap_or_else(|| "python3".into());
    // The peer imports numpy and PySCF (a second or more of a core) before it answers: the
    // first case's plans and the planner's one-time probes must not run beside that.
    let ready = |mut p: Peer| p.ask(&json!({"op": "ready"})).map(|_| p);
    let mut peer = match Peer::spawn(&python, threads, o.batch_seconds).and_then(ready) {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!("numpy column left out: {why}");
            None
        }
    };
    let mut ours: HashMap<String, QcResult> = HashMap::new();
    let mut theirs: HashMap<String, PeerTimes> = HashMap::new();
    // OpenBLAS's workers spin for some 10^8 cycles after each call before they sleep: on a
    // machine with no spare core they would take the cores ttgt's next round runs on
    let quiet = || {
        if threads != 1 {
            std::thread::sleep(PEER_SPIN_SECONDS);
        }
    };
    for (k, c) in &distinct {
        if peer.is_some() {
            quiet();
        }
        let mut run = QcRun::start(c, &o)?;
        let request = json!({"op": "start", "case": {"spec": c.spec, "shapes": c.shapes,
            "strides": c.strides, "dtype": numpy_dtype(c.dtype)}});
        let mut times = PeerTimes::default();
        if let Some(p) = peer.as_mut() {
            match p.ask(&request) {
                Ok(first) => times.first = first,
                Err(why) => {
                    eprintln!("numpy column left out: {why}");
                    peer = None;
                }
            }
        }
        for _ in 0..o.repeat {
            // numpy's batches follow ttgt's and each other's on running cores; ttgt's follow
            // the pause for numpy's spinning workers, so an untimed batch runs first
            if peer.is_some() {
                quiet();
                if threads != 1 {
                    run.warm_up()?;
                }
            }
            run.round()?;
            if let Some(p) = peer.as_mut() {
                let round = p.ask(&json!({"op": "round"})).map_err(CliError::new)?;
                for (way, s) in round {
                    let b = times.best.entry(way).or_insert(f64::INFINITY);
                    *b = b.min(s);
                }
            }
        }
        ours.insert(k.clone(), run.result().clone());
        theirs.insert(k.clone(), times);
    }
    drop(peer);
    // --all-candidates: the planner's regret per distinct two-operand call, timed after the
    // numpy peer has exited (none of its threads left spinning).
    let mut regret: HashMap<String, (f64, Vec<ttgt::bench::TimedCandidate>)> = HashMap::new();
    if a.all_candidates {
        for (k, c) in &distinct {
            if let Some(t) = ttgt::bench::qc_candidates(c, threads, a.max_candidates, o.repeat)? {
                let best = t.iter().map(|x| x.seconds).fold(f64::INFINITY, f64::min);
                regret.insert(k.clone(), (t[0].seconds / best - 1.0, t));
            }
        }
    }
    let regret_of = |c: &QcCase| regret.get(&key(c));
    let peer_of = |c: &QcCase| theirs.get(&key(c)).and_then(PeerTimes::fastest);
    let mut totals: BTreeMap<&str, [f64; 8]> = BTreeMap::new();
    for c in &list {
        let r = &ours[&key(c)];
        let bound = r.bound(&limits);
        let np = peer_of(c).map(|(_, s, _)| s);
        let t = totals.entry(c.workload.as_str()).or_default();
        let w = c.calls as f64;
        t[0] += w * r.seconds;
        t[1] += w * np.unwrap_or(f64::NAN);
        t[2] += w * bound;
        t[3] += w * r.first_seconds.max(r.seconds) / r.seconds;
        t[4] += w;
        t[5] += f64::from(u8::from(np.is_some_and(|n| r.seconds <= n)));
        if let Some((g, _)) = regret_of(c) {
            t[6] += 1.0;
            t[7] += f64::from(u8::from(*g < 0.10));
        }
        if a.json {
            say_record(
                json!({"case": c.name, "workload": c.workload, "spec": c.spec,
                "shapes": c.shapes, "strides": c.strides, "dtype": c.dtype.name(),
                "calls": c.calls, "threads": threads, "seconds": r.seconds,
                "median_seconds": r.samples.median, "samples": r.samples.count,
                "first_seconds": r.first_seconds, "flops": r.flops, "bytes": r.bytes,
                "bound_seconds": bound,
                "plan": r.plan.as_ref().map(|(t, p, s)| json!({"threads": t, "predicted_seconds": p, "summary": s})),
                "numpy": peer_of(c).map(|(way, s, first)| json!({"way": way, "seconds": s, "first_seconds": first})),
                "regret": regret_of(c).map(|(g, _)| *g),
                "candidates": regret_of(c).map(|(_, t)| t.iter().map(|x| json!({"plan": x.summary,
                    "predicted_seconds": x.predicted, "seconds": x.seconds})).collect::<Vec<_>>())}),
            )?;
        } else {
            let np_s = np.map_or_else(|| "        -".to_string(), |n| format!("{:>9.1}", n * 1e6));
            let speed = np.map_or_else(String::new, |n| format!("{:>5.2}x", n / r.seconds));
            let plan = r.plan.as_ref().map_or_else(String::new, |(t, p, s)| {
                format!("  model {:>8.1} us  {t}t {s}", p * 1e6)
            });
            let plan = match regret_of(c) {
                Some((g, _)) => format!("  regret {:>5.1} %{plan}", 100.0 * g),
                None => plan,
            };
            say(&format!(
                "{:<7} {:<22} {:<26} {:<24} {:>6} {:>9.1} us  first {:>9.1}  numpy {np_s} {speed:>6}  bound {:>5.2}{plan}",
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
            say_record(
                json!({"summary": true, "workload": w, "threads": threads, "cases": n,
                "calls": t[4], "seconds": t[0], "numpy_seconds": t[1], "bound_seconds": t[2],
                "speedup_over_numpy": t[1] / t[0], "of_bound": t[2] / t[0],
                "numpy_of_bound": t[2] / t[1], "not_slower_than_numpy": t[5],
                "first_over_repeated": t[3] / t[4],
                "regret_cases": t[6], "regret_under_10pct": t[7],
                "gemm_gflops": limits.gemm_flops / 1e9, "copy_gbs": limits.copy_bytes / 1e9}),
            )?;
        } else {
            say(&format!(
                "summary {w:<22} {n:>3} cases {:>6} calls  ttgt {:>9.3} ms  numpy {:>9.3} ms  speed-up {:>5.2}x  of bound: ttgt {:.2} numpy {:.2}  at most numpy's time: {} of {n}  first/repeated {:.2}",
                t[4], t[0] * 1e3, t[1] * 1e3, t[1] / t[0], t[2] / t[0], t[2] / t[1], t[5], t[3] / t[4]
            ))?;
            if t[6] > 0.0 {
                say(&format!(
                    "        regret under 10 %: {} of {} calls with candidates to choose from",
                    t[7], t[6]
                ))?;
            }
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

//! `ttgt bench transpose`: the transposition engine on the TTC table or on all permutations of
//! a rank, each case beside the machine's best copy of the same bytes (memcpy or streaming
//! stores) measured in the same run, with the
//! cost model's prediction; a summary (mean and minimum ratio, model error), grouped by rank
//! after fusion for the all-permutations set.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::json;
use ttgt::bench::{
    all_perms, bench_inplace, bench_transpose, inplace_cases, parse_ttc, InPlaceBenchOptions,
    InPlaceCase, TransposeBenchOptions, TransposeCase, TransposeResult, TTC_TSV,
};
use ttgt::transpose::Tuning;
use ttgt::DType;

use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use crate::{say, say_record};

/// What to benchmark.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Tensor transpositions (B = perm(A)) beside the machine's best copy of the same bytes.
    Transpose(TransposeArgs),
    /// Tensor contractions (the TCCG set) beside a same-size GEMM.
    Contract(crate::bench_contract::ContractBenchArgs),
    /// In-place chunked transpositions (GKK cycle leaders) beside a same-size copy and an
    /// in-place scale.
    Inplace(InplaceArgs),
    /// einsum networks of 3+ operands along the chosen path, beside the FLOP-optimal path and
    /// same-size GEMMs of the path's steps.
    Networks(crate::bench_networks::NetworkBenchArgs),
}

/// The thread count of `--threads` (all cores without it); 0 is an error.
pub fn bench_threads(threads: Option<usize>) -> CliResult<usize> {
    match threads {
        Some(0) => Err(CliError::new("--threads must be at least 1")),
        Some(t) if t > ttgt::threads::MAX_THREADS => Err(CliError::new(format!(
            "--threads {t}: at most {} are supported",
            ttgt::threads::MAX_THREADS
        ))),
        Some(t) => Ok(t),
        None => Ok(rayon::current_num_threads()),
    }
}

/// `--scale` must be in (0, 4].
pub fn check_scale(scale: f64) -> CliResult<()> {
    if scale > 0.0 && scale <= 4.0 {
        Ok(())
    } else {
        Err(CliError::new("--scale must be in (0, 4]"))
    }
}

/// Arguments of `ttgt bench inplace`.
#[derive(Args, Debug)]
pub struct InplaceArgs {
    /// Random cases per group: random m, n in 2..=500 with chunk 64, the same with chunk
    /// 128, and m, n in 1000..=4000 with chunk 1.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub cases: usize,
    /// Instead of random cases: this problem, MxNxCHUNK (repeatable), e.g. 300x499x64.
    #[arg(long = "case", value_name = "MxNxCHUNK")]
    pub case: Vec<String>,
    /// Seed of the random cases.
    #[arg(long, value_name = "S", default_value_t = 42)]
    pub seed: u64,
    /// Element type: f16, bf16, f32, f64, c32 or c64 (f16 and bf16 computed in f32).
    #[arg(long, value_name = "TYPE", default_value = "f64")]
    pub dtype: String,
    /// Threads for the transposition and both references (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Timed executions of each measurement; the best is reported.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: usize,
    /// One JSON object per case, one per line; each carries
    /// `provenance` (CPU model, cores, memory, ttgt version and commit, OS, date).
    #[arg(long)]
    pub json: bool,
}

fn parse_case(s: &str) -> CliResult<InPlaceCase> {
    let parts: Vec<usize> = s
        .split('x')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            CliError::new(format!(
                "--case takes MxNxCHUNK (e.g. 300x499x64), got {s:?}"
            ))
        })?;
    match parts[..] {
        [m, n, chunk] if m > 0 && n > 0 && chunk > 0 => Ok(InPlaceCase { m, n, chunk }),
        _ => Err(CliError::new(format!(
            "--case takes MxNxCHUNK with positive numbers (e.g. 300x499x64), got {s:?}"
        ))),
    }
}

/// Runs `ttgt bench inplace`.
pub fn inplace(a: &InplaceArgs) -> CliResult<()> {
    let dtype: DType = a.dtype.parse().map_err(CliError::new)?;
    let threads = bench_threads(a.threads)?;
    let list: Vec<InPlaceCase> = if a.case.is_empty() {
        inplace_cases(a.seed, a.cases)
    } else {
        a.case
            .iter()
            .map(|c| parse_case(c))
            .collect::<CliResult<_>>()?
    };
    if list.is_empty() {
        return Err(CliError::new("no benchmark case selected"));
    }
    let o = InPlaceBenchOptions {
        dtype,
        threads,
        repeat: a.repeat.max(1),
    };
    if !a.json {
        say(&format!(
            "ttgt bench inplace: {} case(s), {dtype}, {threads} thread(s); ns per element beside a copy and an in-place scale of the same size; leader share = time to find all cycle leaders / transposition time",
            list.len()
        ))?;
    }
    let (mut ratios, mut worst_share) = (Vec::new(), 0.0f64);
    let progress = Progress::cases(list.len(), a.json);
    for c in &list {
        progress.running(&format!("{} x {}", c.m, c.n));
        let r = bench_inplace(c, &o)?;
        progress.inc();
        if a.json {
            say_record(json!({
                "m": c.m, "n": c.n, "chunk": c.chunk, "threads": r.threads, "dtype": dtype.name(),
                "method": r.method, "cycles": r.cycles, "seconds": r.seconds,
                "median_seconds": r.samples.median, "samples": r.samples.count,
                "ns_per_elem": r.ns_per_elem(), "copy_ns_per_elem": r.copy_ns_per_elem(),
                "scale_ns_per_elem": r.scale_ns_per_elem(), "leader_share": r.leader_share(),
                "leader_seconds": r.leader_seconds, "gbps": r.gbps(),
            }))?;
        } else {
            progress.say(&format!(
                "{:>5} x {:<5} chunk {:<4} {:<8} {:>8} cycles {:>10.3} ms {:>7.3} ns/elem {:>7.2} GB/s  copy {:>7.3}  scale {:>7.3} ns/elem  vs copy {:>5.2}x  leaders {:>6.3} %",
                c.m, c.n, c.chunk, r.method, r.cycles, r.seconds * 1e3, r.ns_per_elem(), r.gbps(),
                r.copy_ns_per_elem(), r.scale_ns_per_elem(), r.ns_per_elem() / r.copy_ns_per_elem(),
                r.leader_share() * 100.0
            ))?;
        }
        if c.chunk >= 64 {
            ratios.push(r.ns_per_elem() / r.copy_ns_per_elem());
            if c.m >= 100 && c.n >= 100 {
                worst_share = worst_share.max(r.leader_share());
            }
        }
    }
    drop(progress);
    if !a.json && !ratios.is_empty() {
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        let max = ratios.iter().copied().fold(0.0, f64::max);
        say(&format!(
            "summary (chunk >= 64): in-place / copy time mean {mean:.2}x, worst {max:.2}x (target <= 1.5x); largest leader share with m, n >= 100: {:.3} % (target < 1 %)",
            worst_share * 100.0
        ))?;
    }
    Ok(())
}

/// Arguments of `ttgt bench transpose`.
#[derive(Args, Debug)]
pub struct TransposeArgs {
    /// Also draw the run as an SVG figure: bandwidth over the best copy's, cases sorted (HPTT
    /// beside when built in).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// A TTC-format table (default: the TTC benchmark shipped in benches/data).
    #[arg(long, value_name = "FILE.tsv")]
    pub cases: Option<PathBuf>,
    /// Instead of a table: all permutations of this rank (TTLG's test), every extent --extent.
    #[arg(long, value_name = "RANK")]
    pub all_perms: Option<usize>,
    /// Extent of every dimension for --all-perms.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub extent: usize,
    /// Element type: f16, bf16, f32, f64, c32 or c64 (f16 and bf16 computed in f32).
    #[arg(long, value_name = "TYPE", default_value = "f32")]
    pub dtype: String,
    /// Threads for the transposition and for the copy reference (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Timed executions per case; the best is reported.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: usize,
    /// beta of B = perm(A) + beta*B (0: B overwritten).
    #[arg(
        long,
        value_name = "B",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    pub beta: f64,
    /// Tune each plan by measurement for this many milliseconds (default: heuristics only);
    /// with --backend cuda: time the model's best candidates on the device and keep the fastest.
    #[arg(long, value_name = "MS")]
    pub measure: Option<u64>,
    /// Run only the cases whose names contain this text, or a comma list of TTC ids (numbers)
    /// and name parts.
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// One JSON object per case and one summary object, one per line; each carries
    /// `provenance` (CPU model, cores, memory, ttgt version and commit, OS, date).
    #[arg(long)]
    pub json: bool,
    /// Backend: cpu or cuda (a device-to-device copy is the reference).
    #[arg(long, value_name = "BACKEND", default_value = "cpu")]
    pub backend: String,
    /// With --backend cuda: force a TTLG schema (od, oa, fl or fs) instead of the model's
    /// choice; cases it does not apply to are skipped.
    #[arg(long, value_name = "SCHEMA")]
    pub schema: Option<String>,
    /// With --backend cuda: which types move in 2x2 blocks where their layouts allow: off,
    /// f32, or all (f32 and f64, the default).
    #[arg(long, value_name = "TYPES")]
    pub micro_blocks: Option<String>,
    /// With --backend cuda: Orthogonal-Distinct with asynchronous global-to-shared copies
    /// (cp.async; compute capability 8.0 and later).
    #[arg(long)]
    pub async_copies: bool,
    /// Non-temporal stores for beta = 0: on, off, or auto (the plan's rule).
    #[arg(long, value_name = "MODE", default_value = "auto")]
    pub streaming: String,
    /// Software prefetch of the next macro-tile's A rows: on, off, or auto (the plan's rule).
    #[arg(long, value_name = "MODE", default_value = "auto")]
    pub prefetch: String,
    /// How far ahead the tiles' prefetch runs, in bytes of A (0: the next macro-tile; default:
    /// 16384)
    #[arg(long, value_name = "BYTES")]
    pub prefetch_distance: Option<usize>,
    /// Regrouped loop nest for streamed tiles that would scatter single lines over B (full
    /// reversals), four-line B blocks for streamed tiles of one-line A rows, and square
    /// macro-tiles for long one-thread strips: on, off, or auto (the host's rule, measured by
    /// `ttgt calibrate`).
    #[arg(long, value_name = "MODE", default_value = "auto")]
    pub regroup: String,
    /// Staged tiles (tiles whose B rows are not whole lines, transposed through a
    /// cache-resident buffer and streamed to B in runs): auto (where they apply) or off.
    #[arg(long, value_name = "MODE", default_value = "auto")]
    pub stage: String,
    /// B starts this many bytes past a cache-line boundary (a multiple of the element size,
    /// below 64), as large results from the system allocator do (16); the copy reference
    /// writes to the same B.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub b_offset: usize,
}

fn cases(a: &TransposeArgs) -> CliResult<Vec<TransposeCase>> {
    let mut list = match a.all_perms {
        Some(r) if (1..=8).contains(&r) => all_perms(r, a.extent),
        Some(r) => {
            return Err(CliError::new(format!(
                "--all-perms takes a rank from 1 to 8, got {r}"
            )))
        }
        None => {
            let text = match &a.cases {
                Some(p) => std::fs::read_to_string(p)
                    .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())))?,
                None => TTC_TSV.to_string(),
            };
            parse_ttc(&text)?
        }
    };
    if let Some(only) = &a.only {
        let items: Vec<&str> = only.split(',').map(str::trim).collect();
        // a number names one TTC case (`3` is ttc-3, not every name with a 3 in it)
        list.retain(|c| {
            items.iter().any(|i| match i.parse::<usize>() {
                Ok(id) => c.name == format!("ttc-{id}"),
                Err(_) => !i.is_empty() && c.name.contains(i),
            })
        });
    }
    if list.is_empty() {
        return Err(CliError::new("no benchmark case selected"));
    }
    Ok(list)
}

pub(crate) fn line(r: &TransposeResult) -> String {
    let peer = match r.hptt_seconds {
        Some(h) => format!("  hptt {:>8.3} ms ({:.2}x)", h * 1e3, h / r.seconds),
        None => String::new(),
    };
    format!(
        "{:<10} {:>14} {:>26} {:>9.3} ms {:>7.2} GB/s  copy {:>6.2} GB/s  ratio {:>5.2}  model {:>8.3} ms{peer}  {}",
        r.case,
        format!("{:?}", r.perm),
        format!("{:?}", r.sizes),
        r.seconds * 1e3,
        r.gbps,
        r.copy_gbps,
        r.ratio,
        r.predicted_seconds * 1e3,
        r.plan
    )
}

pub(crate) fn record(r: &TransposeResult) -> serde_json::Value {
    json!({
        "case": r.case, "perm": r.perm, "sizes": r.sizes, "dtype": r.dtype.name(),
        "seconds": r.seconds, "median_seconds": r.samples.median, "samples": r.samples.count,
        "gbps": r.gbps, "copy_gbps": r.copy_gbps, "ratio": r.ratio,
        "predicted_seconds": r.predicted_seconds, "single_use_seconds": r.single_use_seconds,
        "plan_seconds": r.plan_seconds, "threads": r.threads, "fused_rank": r.fused_rank,
        "plan": r.plan, "hptt_seconds": r.hptt_seconds,
        "speedup_vs_hptt": r.hptt_seconds.map(|h| h / r.seconds),
    })
}

#[derive(Default)]
struct Stats {
    ratios: Vec<f64>,
    model_err: Vec<f64>,
    gbps: Vec<f64>,
    /// HPTT time / ours, per case, when the peer ran.
    vs_hptt: Vec<f64>,
}

impl Stats {
    fn add(&mut self, r: &TransposeResult) {
        self.ratios.push(r.ratio);
        self.gbps.push(r.gbps);
        if let Some(h) = r.hptt_seconds {
            self.vs_hptt.push(h / r.seconds);
        }
        self.model_err
            .push((r.predicted_seconds - r.seconds).abs() / r.seconds);
    }
    fn summary(&self) -> (f64, f64, f64, f64) {
        let n = self.ratios.len().max(1) as f64;
        let mean = self.ratios.iter().sum::<f64>() / n;
        let min = self.ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let geo = (self.gbps.iter().map(|g| g.ln()).sum::<f64>() / n).exp();
        let mare = self.model_err.iter().sum::<f64>() / n;
        (mean, min, geo, mare)
    }
    /// Cases faster than HPTT, cases compared, geometric-mean speedup (`None`: no peer ran).
    fn versus_hptt(&self) -> Option<(usize, usize, f64)> {
        if self.vs_hptt.is_empty() {
            return None;
        }
        let n = self.vs_hptt.len();
        let faster = self.vs_hptt.iter().filter(|&&s| s > 1.0).count();
        let geo = (self.vs_hptt.iter().map(|s| s.ln()).sum::<f64>() / n as f64).exp();
        Some((faster, n, geo))
    }
}

/// Runs `ttgt bench transpose`.
pub fn transpose(a: &TransposeArgs) -> CliResult<()> {
    let dtype: DType = a.dtype.parse().map_err(CliError::new)?;
    if crate::cuda::is_cuda(&a.backend)? {
        return crate::cuda::bench_transpose(
            &cases(a)?,
            dtype,
            a.repeat,
            a.beta,
            a.schema.as_deref(),
            a.measure,
            a.micro_blocks.as_deref(),
            a.async_copies,
            a.json,
        );
    }
    if a.schema.is_some() {
        return Err(CliError::new("--schema applies to --backend cuda only"));
    }
    if a.micro_blocks.is_some() || a.async_copies {
        return Err(CliError::new(
            "--micro-blocks and --async-copies apply to --backend cuda only",
        ));
    }
    let threads = bench_threads(a.threads)?;
    if a.b_offset >= 64 || !a.b_offset.is_multiple_of(dtype.size_bytes()) {
        return Err(CliError::new(format!(
            "--b-offset must be a multiple of the element size ({} bytes) below 64, got {}",
            dtype.size_bytes(),
            a.b_offset
        )));
    }
    let o = TransposeBenchOptions {
        dtype,
        threads,
        b_offset: a.b_offset,
        repeat: a.repeat.max(1),
        beta: a.beta,
        tuning: match a.measure {
            Some(ms) => Tuning::Measure {
                budget: Duration::from_millis(ms),
            },
            None => Tuning::Estimate,
        },
        streaming: on_off_auto("--streaming", &a.streaming)?,
        prefetch: on_off_auto("--prefetch", &a.prefetch)?,
        prefetch_distance: a.prefetch_distance,
        regroup: on_off_auto("--regroup", &a.regroup)?,
        stage: on_off_auto("--stage", &a.stage)?,
    };
    let list = cases(a)?;
    if !a.json {
        say(&format!(
            "ttgt bench transpose: {} case(s), {dtype}, {threads} thread(s), beta {}, huge pages: {}; bandwidth = bytes read + written per second",
            list.len(),
            a.beta,
            ttgt::tensor::huge_page_mode().unwrap_or_else(|| "unknown".into())
        ))?;
    }
    let mut all = Stats::default();
    let mut by_rank: BTreeMap<usize, Stats> = BTreeMap::new();
    let progress = Progress::cases(list.len(), a.json);
    let mut records = Vec::new();
    for c in &list {
        progress.running(&c.name);
        let r = bench_transpose(c, &o)?;
        all.add(&r);
        by_rank.entry(r.fused_rank).or_default().add(&r);
        crate::emit(record(&r), a.json, a.plot.is_some(), &mut records, || {
            progress.say(&line(&r))
        })?;
        progress.inc();
    }
    drop(progress);
    if let Some(path) = &a.plot {
        crate::plot::write_figure(path, &records, crate::plot::transpose_svg)?;
    }
    let (mean, min, geo, mare) = all.summary();
    let versus = all.versus_hptt();
    if a.json {
        let groups: Vec<_> = by_rank
            .iter()
            .map(|(k, s)| {
                let (m, mn, g, e) = s.summary();
                json!({"fused_rank": k, "cases": s.ratios.len(), "mean_ratio": m, "min_ratio": mn, "geomean_gbps": g, "model_mare": e})
            })
            .collect();
        say_record(
            json!({"summary": true, "cases": list.len(), "dtype": dtype.name(), "threads": threads,
            "mean_ratio": mean, "min_ratio": min, "geomean_gbps": geo, "model_mare": mare, "by_fused_rank": groups,
            "faster_than_hptt": versus.map(|v| v.0), "geomean_speedup_vs_hptt": versus.map(|v| v.2)}),
        )?;
    } else {
        if a.all_perms.is_some() {
            for (k, s) in &by_rank {
                let (m, mn, g, e) = s.summary();
                say(&format!("fused rank {k}: {:>4} cases  mean ratio {m:.3}  min {mn:.3}  geomean {g:.2} GB/s  model error {:.1} %", s.ratios.len(), e * 100.0))?;
            }
        }
        say(&format!(
            "summary: {} cases  mean ratio {mean:.3}  min ratio {min:.3}  geomean {geo:.2} GB/s  model mean abs rel error {:.1} %",
            list.len(),
            mare * 100.0
        ))?;
        if let Some((faster, n, geo)) = versus {
            say(&format!(
                "versus HPTT (same operands, same threads; its C API plans on every call): faster in {faster}/{n} cases, geomean speedup {geo:.2}x"
            ))?;
        }
    }
    Ok(())
}

/// Arguments of `ttgt calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Size of the calibration tensors in MiB (tensors far beyond the last-level cache, like
    /// the TTC benchmark's 200 MiB ones: at 64 MiB, streamed tiles calibrated 1.3x faster
    /// than they ran on the TTC set).
    #[arg(long, value_name = "MIB", default_value_t = 192)]
    pub mib: usize,
    /// A quicker, rougher calibration: tensors of 64 MiB, GEMMs up to 2000 MFLOP and 2 ms
    /// probe rounds (instead of --mib 192 --gemm-mflop 20000 --probe-ms 5).
    #[arg(long, conflicts_with_all = ["mib", "gemm_mflop", "probe_ms"])]
    pub quick: bool,
    /// Threads for the transposition factors (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Largest GEMM timed, in MFLOP: the GEMM model's training calls (real types; a quarter
    /// for complex ones) and the concurrent-call probe's shapes (2·m·n·k, every type; all of
    /// them from 17180).
    #[arg(long, value_name = "MFLOP", default_value_t = 20000.0)]
    pub gemm_mflop: f64,
    /// Skip the GEMM-model calibration (keep nominal GEMM rates).
    #[arg(long)]
    pub no_gemm: bool,
    /// Print the profile without storing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Only re-measure the slowdown of concurrent single-threaded GEMM calls (parallel loops)
    /// and keep the rest of the stored profile.
    #[arg(long)]
    pub gemm_concurrency_only: bool,
    /// Only re-measure copy bandwidth and the transposition factors, keeping the stored
    /// profile's GEMM model (after a change to the transposition engine).
    #[arg(long, conflicts_with_all = ["gemm_concurrency_only", "no_gemm"])]
    pub transpose_only: bool,
    /// Only re-measure the GEMM model (rates at the thread count and at one thread, and the
    /// concurrent-call slowdown), keeping the stored profile's copy bandwidth and
    /// transposition factors.
    #[arg(long, conflicts_with_all = ["gemm_concurrency_only", "no_gemm", "transpose_only"])]
    pub gemm_only: bool,
    /// Milliseconds of calls per thread and shape in each round of the concurrent-call
    /// probe (shorter is quicker and noisier).
    #[arg(long, value_name = "MS", default_value_t = ttgt::backend::cpu::CONCURRENCY_ROUND_SECONDS * 1e3)]
    pub probe_ms: f64,
    /// Backend: cpu, or cuda (fits the GPU transpose model, stored per device name).
    #[arg(long, value_name = "BACKEND", default_value = "cpu")]
    pub backend: String,
}

/// `calibrate --quick`: tensor MiB, largest GEMM in MFLOP, probe-round milliseconds (a
/// rougher calibration in less time; measurements in docs/TUNING.md).
const QUICK_MIB: usize = 64;
const QUICK_GEMM_MFLOP: f64 = 2000.0;
const QUICK_PROBE_MS: f64 = 2.0;

/// Median spread of the GEMM samples between calibration rounds above which `ttgt calibrate`
/// warns: a few per cent on a quiet machine.
const BUSY_SPREAD: f64 = 0.15;

/// Signs in a calibration's own numbers that other work shared the machine while it ran:
/// more threads copying slower than one (`copy`: GB/s for 1, 2, ... threads; empty when not
/// measured in this run), or GEMM samples that varied by more than [`BUSY_SPREAD`] between
/// rounds (`spreads`: per thread count, from `calibrate_gemm`).
fn load_warnings(copy: &[f64], spreads: &[(usize, f64)]) -> Vec<String> {
    let mut w = Vec::new();
    if let Some((&one, more)) = copy.split_first() {
        for (i, &gbps) in more.iter().enumerate() {
            if gbps < 0.95 * one {
                w.push(format!(
                    "the copy bandwidth at {} threads ({gbps:.1} GB/s) came out below one \
                     thread's ({one:.1} GB/s): other work was probably using the memory system; \
                     calibrate again when the machine is quiet",
                    i + 2
                ));
            }
        }
    }
    for &(threads, spread) in spreads {
        if spread > BUSY_SPREAD {
            w.push(format!(
                "GEMM timings at {threads} thread(s) varied by {:.0} % between rounds (median): \
                 other work was probably running; the fit uses each shape's fastest round, but \
                 calibrate again when the machine is quiet",
                spread * 100.0
            ));
        }
    }
    w
}

/// Runs `ttgt calibrate`.
pub fn calibrate(a: &CalibrateArgs) -> CliResult<()> {
    if crate::cuda::is_cuda(&a.backend)? {
        return crate::cuda::calibrate(a.mib, a.dry_run);
    }
    let threads = a.threads.unwrap_or_else(rayon::current_num_threads).max(1);
    if !(a.probe_ms > 0.0 && a.probe_ms <= 1e4) {
        return Err(CliError::new(format!(
            "--probe-ms must be above 0 and at most 10000, got {}",
            a.probe_ms
        )));
    }
    let (mib, gemm_mflop, probe_ms) = if a.quick {
        (QUICK_MIB, QUICK_GEMM_MFLOP, QUICK_PROBE_MS)
    } else {
        (a.mib, a.gemm_mflop, a.probe_ms)
    };
    let probe = probe_ms * 1e-3;
    let measured_copy = !(a.gemm_concurrency_only || a.gemm_only);
    use ttgt::backend::cpu::CalibrateParts;
    let parts = if a.gemm_concurrency_only {
        CalibrateParts::GemmConcurrencyOnly
    } else if a.transpose_only {
        CalibrateParts::TransposeOnly
    } else if a.gemm_only {
        CalibrateParts::GemmOnly
    } else if a.no_gemm {
        CalibrateParts::NoGemm
    } else {
        CalibrateParts::All
    };
    let what = match parts {
        CalibrateParts::All => "copy bandwidth, transposition factors and the GEMM model",
        CalibrateParts::NoGemm | CalibrateParts::TransposeOnly => {
            "copy bandwidth and transposition factors"
        }
        CalibrateParts::GemmOnly => "the GEMM model",
        CalibrateParts::GemmConcurrencyOnly => "the slowdown of concurrent GEMM calls",
    };
    let target = if a.dry_run {
        "printed, not stored (--dry-run)".to_string()
    } else {
        ttgt::model::Profile::path().map_or_else(
            || "no cache directory: set TTGT_PROFILE".to_string(),
            |p| format!("stored in {}", p.display()),
        )
    };
    // (threads, median spread of the GEMM samples between rounds)
    let (p, spreads) = {
        let _spinner = Progress::spinner(
            &format!(
                "calibrating {what} on {threads} thread(s) (the whole calibration takes minutes; \
                 --no-gemm or --transpose-only less); the profile will be {target}"
            ),
            false,
        );
        ttgt::backend::cpu::calibrate_machine(
            parts,
            mib.max(1) << 20,
            threads,
            gemm_mflop * 1e6,
            probe,
        )?
    };
    let copy = if measured_copy { &p.copy[..] } else { &[] };
    for w in load_warnings(copy, &spreads) {
        eprintln!("ttgt: warning: {w}");
    }
    say(&p.to_json())?;
    if !a.dry_run {
        let path = p.save()?;
        say(&format!("stored in {}", path.display()))?;
    }
    ttgt::model::set_profile(p);
    Ok(())
}

/// A forced choice from `on`, `off` or `auto` (`None`: the plan's rule).
fn on_off_auto(flag: &str, v: &str) -> Result<Option<bool>, CliError> {
    match v {
        "auto" => Ok(None),
        "on" => Ok(Some(true)),
        "off" => Ok(Some(false)),
        other => Err(CliError::new(format!(
            "{flag} takes on, off or auto, got {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_warnings_name_slow_copies_and_spread_rounds() {
        assert!(load_warnings(&[30.0, 60.0], &[(2, 0.03), (1, 0.1)]).is_empty());
        assert!(load_warnings(&[], &[]).is_empty());
        let w = load_warnings(&[32.0, 22.6, 40.0], &[(2, 0.4)]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("at 2 threads (22.6 GB/s)"), "{}", w[0]);
        assert!(w[1].contains("2 thread(s) varied by 40 %"), "{}", w[1]);
    }
}

//! `ttgt`: the command-line front end of the ttgt tensor-contraction library.
//!
//! `ttgt contract` evaluates one einsum spec either on `.npy` files (file mode) or on random
//! operands of given index sizes (random mode, which times the contraction and reports the
//! step breakdown). Errors are reported as one line `ttgt: error: <message>` and exit
//! status 2; a failed `--check` exits with status 1; an internal error (a panic) prints one
//! line `ttgt: internal error: ...` and exits with status 101.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[path = "ttgt/bench.rs"]
mod bench;
#[path = "ttgt/bench_contract.rs"]
mod bench_contract;
#[path = "ttgt/bench_networks.rs"]
mod bench_networks;
#[path = "ttgt/bench_qc.rs"]
mod bench_qc;
#[path = "ttgt/check.rs"]
mod check;
#[path = "ttgt/cuda.rs"]
mod cuda;
#[path = "ttgt/error.rs"]
mod error;
#[path = "ttgt/file_mode.rs"]
mod file_mode;
#[path = "ttgt/html_report.rs"]
mod html_report;
#[path = "ttgt/network_mode.rs"]
mod network_mode;
#[path = "ttgt/npy.rs"]
mod npy;
#[path = "ttgt/plot.rs"]
mod plot;
#[path = "ttgt/progress.rs"]
mod progress;
#[path = "ttgt/random_mode.rs"]
mod random_mode;
#[path = "ttgt/report.rs"]
mod report;
#[path = "ttgt/scalar.rs"]
mod scalar;

use error::{CliError, CliResult};

const TOP_EXAMPLES: &str = "\
Examples:
  ttgt contract 'ij,jk->ik' A.npy B.npy -o C.npy
  ttgt contract 'abcd,dbef->acef' --sizes a=48,b=48,c=48,d=48,e=48,f=48 --check
  ttgt bench transpose --threads 1 --json
  ttgt bench transpose --all-perms 6 --extent 16
  ttgt bench contract --dtype f64 --threads 1
  ttgt bench contract --dtype f32 --scale 0.5 --all-candidates --json
  ttgt bench inplace --threads 1 --json
  ttgt bench networks --threads 2
  ttgt bench transpose --threads 1 --json --plot ttc.svg > runs/ttc.jsonl
  ttgt report runs -o report.html
  ttgt calibrate
  ttgt contract --help          (all options of the contract command)

Exit status: 0 success, 1 a --check found a wrong result, 2 bad input or usage,
101 internal error.";

const CONTRACT_EXAMPLES: &str = "\
File mode (operands from .npy files; float16, bfloat16, f32, f64, complex64, complex128; C or
Fortran order; bfloat16 as numpy saves an ml_dtypes.bfloat16 array, descriptor '<V2'):
  ttgt contract 'ij,jk->ik' A.npy B.npy -o C.npy
  ttgt contract 'ii' M.npy                          (trace, printed to stdout)
  ttgt contract 'bij,bjk->bik' A.npy B.npy -o C.npy --alpha 2 --beta 0.5 --c C0.npy
  ttgt contract 'ij,jk->ik' A.npy B.npy -o C.npy --alpha 1-2j
  ttgt contract 'ij,jk,kl->il' A.npy B.npy D.npy -o E.npy   (3+ operands: pairwise, in
      the order of --path, default the fewest FLOPs; --explain prints the path)
  Mixed input types are promoted as numpy does (f32 with f64 gives f64, f64 with
  complex64 gives complex128); a complex --alpha or --beta makes a real result complex.
  Without -o the result is printed (an array under a line with its numpy dtype and shape).

Random mode (--sizes: random operands, timed; every index letter needs a size):
  ttgt contract 'abcd,dbef->acef' --sizes a=48,b=48,c=48,d=48,e=48,f=48
  ttgt contract 'abc,cd->abd' --sizes a=64,b=64,c=64,d=64 --dtype c64 --repeat 10 --check
  ttgt contract 'ij,jk->ik' --sizes i=1000,j=1000,k=1000 --json --explain
  Operands are row-major with entries uniform in [-1, 1) (real and imaginary parts),
  seeded by --seed. The plan is built once and executed --repeat times; the best run is
  reported with GFLOP/s and the step breakdown (prepare, pack A, pack B, GEMM, write C).
  --json prints one line with the keys spec, explicit_spec, dtype, sizes, repeat, threads,
  seconds, gflops, flops, prepare_seconds, pack_a_seconds, pack_b_seconds, gemm_seconds,
  write_c_seconds, convert_seconds (f16/bf16: widening to f32 and rounding the result),
  transpose_seconds (pack A + pack B + write C + convert), gemm_shape, copies,
  workspace_bytes, check (ok, failed or null), check_elements, check_max_rel_err and
  explain (the plan text with --explain, else null).

--check compares with the plain-loop reference engine (computed in double precision):
every element when the iteration space has at most 2e7 points; beyond that, for 3+ operands,
every element with the reference computed pairwise along the path (and a few elements over the
whole iteration space), otherwise 2000 sampled output elements. The error of an element is |got - want| / (|alpha| * sum over the summed
terms of |product| + |beta| * |C_in|); it must not exceed 1e-10 (f64, c64) or 1e-3 (f32,
c32). On failure the exit status is 1.";

/// Tensor contractions by Transpose-Transpose-GEMM-Transpose.
#[derive(Parser, Debug)]
#[command(name = "ttgt", version, after_help = TOP_EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Commands {
    /// Evaluate an einsum spec on .npy files, or time it on random operands (--sizes).
    #[command(after_help = CONTRACT_EXAMPLES)]
    Contract(ContractArgs),
    /// Benchmarks, each beside a reference measured in the same run.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Measure this machine (copy bandwidth, transposition efficiency) for the cost models.
    Calibrate(bench::CalibrateArgs),
    /// Gather the JSON records of `ttgt bench ... --json` runs in a folder into one HTML page
    /// with their figures and provenance.
    Report(html_report::ReportArgs),
}

/// Arguments of `ttgt contract`.
#[derive(Args, Debug, Clone)]
pub struct ContractArgs {
    /// einsum spec in numpy's notation, e.g. 'ij,jk->ik', 'bij,bjk->bik', 'ii', '...ij,jk'
    /// (`...` broadcasting in file mode only).
    #[arg(value_name = "SPEC", allow_hyphen_values = true)]
    pub spec: String,

    /// Input operands as .npy files, one per operand of SPEC (file mode).
    #[arg(value_name = "FILE.npy")]
    pub files: Vec<PathBuf>,

    /// File mode: write the result to this .npy file (C order); without it the result is
    /// printed.
    #[arg(short = 'o', long = "output", value_name = "C.npy")]
    pub output: Option<PathBuf>,

    /// File mode: scale of the contraction, real or complex in numpy style ('2', '-0.5',
    /// '1+2j', '1-2j', '2j'). Default 1.
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub alpha: Option<String>,

    /// File mode: scale of the initial C (the file of --c; zeros without it). Default 1
    /// with --c, else 0. Same syntax as --alpha.
    #[arg(long, value_name = "Y", allow_hyphen_values = true)]
    pub beta: Option<String>,

    /// File mode: the initial C for --beta, an .npy file of the output's shape.
    #[arg(long = "c", value_name = "C_IN.npy")]
    pub c_in: Option<PathBuf>,

    /// Random mode: the extent of every index, e.g. a=48,b=48,c=32.
    #[arg(long, value_name = "a=N,b=M,...")]
    pub sizes: Option<String>,

    /// Random mode: element type, f16, bf16, f32, f64, c32 (complex64) or c64 (complex128);
    /// f16 and bf16 are computed in f32 and rounded once. Default f64.
    #[arg(long, value_name = "TYPE")]
    pub dtype: Option<String>,

    /// Random mode: number of timed executions; the best is reported. Default 5.
    #[arg(long, value_name = "N")]
    pub repeat: Option<usize>,

    /// Random mode: seed of the random operands (and of the sampled --check). Default 42.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,

    /// Random mode: print one JSON object (one line) instead of the human-readable report.
    #[arg(long)]
    pub json: bool,

    /// Compare the result with the reference engine; exit status 1 when it differs.
    #[arg(long)]
    pub check: bool,

    /// Print the contraction plan (which operands are packed, the GEMM shape, workspace).
    #[arg(long)]
    pub explain: bool,

    /// Run inside a thread pool of N threads (default: rayon's default pool).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// Force the GEMM library: matrixmultiply, gemm, or ttgt (our own; also enables the GETT candidate) (default: the faster by the model).
    #[arg(long, value_name = "LIB")]
    pub gemm: Option<String>,

    /// Most bytes of workspace the plan may use (packed operands, temporary result).
    #[arg(long, value_name = "BYTES")]
    pub workspace: Option<usize>,
    /// Largest block of C a tiled write-back computes at a time, in bytes (default 512 KiB).
    #[arg(long, value_name = "BYTES")]
    pub tile_bytes: Option<usize>,

    /// Random mode: time the best-predicted candidates for this many milliseconds and keep
    /// the fastest (default: the cost models alone choose).
    #[arg(long, value_name = "MS")]
    pub measure: Option<u64>,

    /// Order of the pairwise steps of 3+ operands: auto (fewest FLOPs, searched exactly up
    /// to 10 operands, greedy beyond), optimal, greedy, left (left to right), or steps in
    /// numpy's notation, e.g. '1,2;0,1', '[(1, 2), (0, 1)]' or np.einsum_path's
    /// "['einsum_path', (0, 1, 2)]" (a step of 3+ positions runs pairwise from the left).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,

    /// Most elements any intermediate of a 3+ operand path may hold (numpy's memory_limit).
    #[arg(long, value_name = "ELEMENTS")]
    pub memory_limit: Option<usize>,
}

impl ContractArgs {
    /// Planning options from --threads, --gemm, --workspace and --tile-bytes.
    pub fn plan_options(&self) -> CliResult<ttgt::plan::PlanOptions> {
        let library = match &self.gemm {
            Some(g) => Some(g.parse::<ttgt::model::GemmLibrary>()?),
            None => None,
        };
        Ok(ttgt::plan::PlanOptions {
            threads: self.threads,
            workspace_limit: self.workspace,
            library,
            tile_bytes: self.tile_bytes,
            ..Default::default()
        })
    }

    /// Path options from --path and --memory-limit.
    pub fn path_options(&self) -> CliResult<ttgt::PathOptions> {
        use ttgt::plan::PathStrategy;
        let strategy = match self.path.as_deref().map(str::trim) {
            None | Some("auto") => PathStrategy::Auto,
            Some("optimal") => PathStrategy::Optimal,
            Some("greedy") => PathStrategy::Greedy,
            Some("left") => PathStrategy::LeftToRight,
            Some(text) => parse_path(text)?,
        };
        Ok(ttgt::PathOptions {
            strategy,
            memory_limit: self.memory_limit,
            ..Default::default()
        })
    }
}

/// A path in numpy's notation: `1,2;0,1`, `[(1, 2), (0, 1)]`, or `np.einsum_path`'s list as
/// printed (`['einsum_path', (0, 2), (0, 1)]`); steps of one position (`(0,)`) or of three
/// and more are accepted too. Steps are the parenthesised groups, else the `;`-separated
/// ones, else consecutive pairs of numbers.
fn parse_path(text: &str) -> CliResult<ttgt::plan::PathStrategy> {
    use ttgt::plan::PathStrategy;
    let bad = || {
        CliError::new(format!(
            "bad --path {text:?}: expected auto, optimal, greedy, left, or steps of operand \
             positions in numpy's notation such as '1,2;0,1' or '[(1, 2), (0, 1)]'"
        ))
    };
    let body = text.replace("einsum_path", "").replace(['\'', '"'], "");
    if !body
        .chars()
        .all(|c| c.is_ascii_digit() || " ,;()[]".contains(c))
    {
        return Err(bad());
    }
    let numbers = |group: &str| -> CliResult<Vec<usize>> {
        group
            .split(|c: char| !c.is_ascii_digit())
            .filter(|t| !t.is_empty())
            .map(|t| t.parse().map_err(|_| bad()))
            .collect()
    };
    let steps: Vec<Vec<usize>> = if body.contains('(') {
        // Every number inside a parenthesised group; groups neither nested nor left open.
        let mut steps = Vec::new();
        let mut rest = body.as_str();
        while let Some(open) = rest.find('(') {
            if !numbers(&rest[..open])?.is_empty() {
                return Err(bad());
            }
            let close = rest[open..].find(')').ok_or_else(bad)? + open;
            let inner = &rest[open + 1..close];
            if inner.contains('(') {
                return Err(bad());
            }
            steps.push(numbers(inner)?);
            rest = &rest[close + 1..];
        }
        if rest.contains(')') || !numbers(rest)?.is_empty() {
            return Err(bad());
        }
        steps
    } else if body.contains(';') {
        body.split(';').map(numbers).collect::<CliResult<_>>()?
    } else {
        let flat = numbers(&body)?;
        if !flat.len().is_multiple_of(2) {
            return Err(bad());
        }
        flat.chunks(2).map(<[usize]>::to_vec).collect()
    };
    if steps.is_empty() || steps.iter().any(Vec::is_empty) {
        return Err(bad());
    }
    Ok(if steps.iter().all(|s| s.len() == 2) {
        PathStrategy::Explicit(steps.iter().map(|s| (s[0], s[1])).collect())
    } else {
        PathStrategy::Numpy(steps)
    })
}

/// How a successful run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything went well.
    Success,
    /// `--check` found a wrong result.
    CheckFailed,
}

/// Writes `text` and a newline to stdout. A closed pipe (`ttgt ... | head -1`) ends the
/// program quietly, with status 0, as other command-line tools do.
pub fn say(text: &str) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => r.map_err(|e| CliError::new(format!("cannot write to stdout: {e}"))),
    }
}

/// Writes one JSON record of a benchmark on one line, with the run's provenance added under
/// `"provenance"` (CPU model, cores, memory, ttgt version and commit, OS, date), so that
/// records from two machines or builds can be compared field by field.
pub fn say_record(record: serde_json::Value) -> CliResult<()> {
    say(&stamped(record).to_string())
}

/// One case of a bench: its record stamped with the provenance once, printed as JSON (`json`)
/// or as the human-readable line `line` prints, and kept in `kept` for a figure (`keep`).
pub fn emit(
    record: serde_json::Value,
    json: bool,
    keep: bool,
    kept: &mut Vec<serde_json::Value>,
    line: impl FnOnce() -> CliResult<()>,
) -> CliResult<()> {
    let record = stamped(record);
    if json {
        say(&record.to_string())?;
    } else {
        line()?;
    }
    if keep {
        kept.push(record);
    }
    Ok(())
}

/// `record` with the run's provenance added under `"provenance"` (see [`say_record`]).
pub fn stamped(mut record: serde_json::Value) -> serde_json::Value {
    static STAMP: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    let stamp = STAMP.get_or_init(|| {
        let p = ttgt::bench::Provenance::current();
        serde_json::json!({"cpu_model": p.cpu_model, "cores": p.cores, "memory_bytes": p.memory_bytes,
            "ttgt_version": p.version, "commit": p.commit, "os": p.os, "date": p.date})
    });
    if let serde_json::Value::Object(m) = &mut record {
        m.insert("provenance".into(), stamp.clone());
    }
    record
}

/// Runs `ttgt contract`, in a thread pool of `--threads` threads when asked.
fn contract(args: &ContractArgs) -> CliResult<Outcome> {
    match args.threads {
        None => contract_here(args),
        Some(0) => Err(CliError::new("--threads must be at least 1")),
        Some(n) if n > ttgt::threads::MAX_THREADS => Err(CliError::new(format!(
            "--threads {n}: at most {} are supported",
            ttgt::threads::MAX_THREADS
        ))),
        Some(n) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| CliError::new(format!("cannot start {n} threads: {e}")))?;
            pool.install(|| contract_here(args))
        }
    }
}

/// Runs `ttgt contract` on the current thread pool.
fn contract_here(args: &ContractArgs) -> CliResult<Outcome> {
    if args.sizes.is_some() {
        random_mode::run(args)
    } else {
        file_mode::run(args)
    }
}

/// Makes a panic print one line and exit with status 101 instead of a backtrace.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        let at = info
            .location()
            .map(|l| format!(" (at {}:{})", l.file(), l.line()))
            .unwrap_or_default();
        let line = format!("ttgt: internal error: {msg}{at}").replace('\n', " ");
        // Nothing more can be done if stderr is gone.
        let _ = writeln!(std::io::stderr(), "{line}");
        std::process::exit(101);
    }));
}

fn main() -> ExitCode {
    install_panic_hook();
    let cli = Cli::parse();
    let result = match &cli.command {
        Commands::Contract(args) => contract(args),
        Commands::Bench(bench::BenchCommand::Transpose(args)) => {
            bench::transpose(args).map(|()| Outcome::Success)
        }
        Commands::Bench(bench::BenchCommand::Contract(args)) => {
            bench_contract::contract(args).map(|()| Outcome::Success)
        }
        Commands::Bench(bench::BenchCommand::Inplace(args)) => {
            bench::inplace(args).map(|()| Outcome::Success)
        }
        Commands::Bench(bench::BenchCommand::Networks(args)) => {
            bench_networks::networks(args).map(|()| Outcome::Success)
        }
        Commands::Calibrate(args) => bench::calibrate(args).map(|()| Outcome::Success),
        Commands::Report(args) => html_report::report(args).map(|()| Outcome::Success),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::CheckFailed) => ExitCode::from(1),
        Err(e) => {
            // Nothing more can be done if stderr is gone.
            let _ = writeln!(std::io::stderr(), "ttgt: error: {e}");
            ExitCode::from(2)
        }
    }
}

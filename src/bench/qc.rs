//! The quantum-chemistry contraction benchmark behind `ttgt bench contract --cases qc`: every
//! einsum call that PySCF coupled-cluster runs make (recorded in `benches/data/`), replayed
//! with the operand layouts PySCF passed, each timed on its first call (planning included)
//! and repeated (plan cached), beside its roofline bound: the larger of its FLOPs at the
//! machine's large-GEMM rate and its compulsory bytes at the machine's best copy rate, both
//! measured in the same run.

use std::collections::BTreeMap;
use std::time::Instant;

use ndarray::{ArrayD, ArrayViewD, IxDyn, ShapeBuilder};

use super::contract::fill;
use crate::backend::cpu::GemmTimer;
use crate::error::{Error, Result};
use crate::model::{best_copy_seconds, GemmLayout, GemmLibrary};
use crate::plan::{
    cached_contraction_plan, clear_plan_caches, ContractionPath, PathOptions, PlanOptions,
};
use crate::tensor::{DType, Element, Layout};

/// The quantum-chemistry contraction table (PySCF RCCSD, UCCSD, GCCSD and CCSD(T) on small
/// molecules in double- and triple-zeta bases).
pub const QC_TSV: &str = include_str!("../../benches/data/qc_contractions.tsv");

/// One recorded einsum call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QcCase {
    /// Case name (`qc-7`).
    pub name: String,
    /// The run that made the call (`water/cc-pvtz/rccsd`).
    pub workload: String,
    /// The einsum spec as the client wrote it (implicit output allowed).
    pub spec: String,
    /// Extents of each operand.
    pub shapes: Vec<Vec<usize>>,
    /// Element strides of each operand's view.
    pub strides: Vec<Vec<isize>>,
    /// Element type.
    pub dtype: DType,
    /// How many times the run made this call.
    pub calls: u64,
    /// Occupied and virtual orbital counts of the run (spatial orbitals).
    pub orbitals: (usize, usize),
}

fn bad(line: usize, what: &str) -> Error {
    Error::Unsupported(format!("qc table line {line}: {what}"))
}

fn numbers<N: std::str::FromStr>(s: &str, line: usize) -> Result<Vec<Vec<N>>> {
    s.split(',')
        .map(|op| {
            if op == "-" {
                return Ok(Vec::new());
            }
            op.split('x')
                .map(|x| {
                    x.parse()
                        .map_err(|_| bad(line, &format!("bad number {x:?}")))
                })
                .collect()
        })
        .collect()
}

fn dtype_of(name: &str, line: usize) -> Result<DType> {
    Ok(match name {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "complex64" => DType::C32,
        "complex128" => DType::C64,
        _ => return Err(bad(line, &format!("unknown dtype {name:?}"))),
    })
}

/// Parses a qc-format table: tab-separated columns `id, workload, spec, shapes, strides,
/// dtype, calls`, `#` comments, and one comment per workload that gives its orbital counts
/// (`# water/cc-pvdz/rccsd: 5 occupied, 19 virtual orbitals, ...`).
///
/// ```
/// let cases = ttgt::bench::parse_qc(ttgt::bench::QC_TSV).unwrap();
/// assert!(cases.len() > 100);
/// let c = &cases[0];
/// assert_eq!(c.shapes.len(), c.strides.len());
/// assert!(c.calls > 0 && c.orbitals.0 > 0);
/// ```
pub fn parse_qc(text: &str) -> Result<Vec<QcCase>> {
    let mut orbitals = BTreeMap::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("# ")) {
        let Some((run, rest)) = l.split_once(": ") else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        if let [o, "occupied,", v, "virtual", ..] = words[..] {
            if let (Ok(o), Ok(v)) = (o.parse::<usize>(), v.parse::<usize>()) {
                orbitals.insert(run.to_string(), (o, v));
            }
        }
    }
    let columns = [
        "id", "workload", "spec", "shapes", "strides", "dtype", "calls",
    ];
    crate::cases::table_rows(text, &columns)?
        .into_iter()
        .map(|(line, f)| {
            let workload = f[1].to_string();
            let shapes: Vec<Vec<usize>> = numbers(f[3], line)?;
            let strides: Vec<Vec<isize>> = numbers(f[4], line)?;
            if shapes.len() != strides.len()
                || shapes.iter().zip(&strides).any(|(s, t)| s.len() != t.len())
            {
                return Err(bad(line, "shapes and strides differ in rank"));
            }
            Ok(QcCase {
                name: format!("qc-{}", f[0].trim_start_matches("qc-")),
                orbitals: *orbitals
                    .get(&workload)
                    .ok_or_else(|| bad(line, &format!("no orbital counts for {workload}")))?,
                workload,
                spec: f[2].to_string(),
                shapes,
                strides,
                dtype: dtype_of(f[5], line)?,
                calls: f[6].parse().map_err(|_| bad(line, "bad call count"))?,
            })
        })
        .collect()
}

impl QcCase {
    /// The same call for a molecule with `occupied` and `virtual` orbitals: every extent equal
    /// to the run's occupied or virtual count (or twice it, spin orbitals) takes the new count
    /// (or twice it); other extents stay. Operands become compact, in their views' stride
    /// order (a sliced view becomes a whole array).
    ///
    /// ```
    /// let cases = ttgt::bench::parse_qc(ttgt::bench::QC_TSV).unwrap();
    /// let c = cases.iter().find(|c| c.orbitals == (5, 19) && c.shapes[0] == [5, 19]).unwrap();
    /// let s = c.with_orbitals(24, 120);
    /// assert_eq!(s.shapes[0], [24, 120]);
    /// assert_eq!(s.orbitals, (24, 120));
    /// ```
    pub fn with_orbitals(&self, occupied: usize, virt: usize) -> QcCase {
        let (o, v) = self.orbitals;
        let map = |x: usize| match x {
            _ if x == o => occupied,
            _ if x == v => virt,
            _ if x == 2 * o => 2 * occupied,
            _ if x == 2 * v => 2 * virt,
            _ => x,
        };
        let mut c = self.clone();
        for (shape, strides) in c.shapes.iter_mut().zip(c.strides.iter_mut()) {
            *shape = shape.iter().map(|&x| map(x)).collect();
            let mut order: Vec<usize> = (0..shape.len()).collect();
            order.sort_by_key(|&i| std::cmp::Reverse(strides[i].unsigned_abs()));
            let mut step = 1isize;
            for &i in order.iter().rev() {
                strides[i] = step;
                step *= shape[i].max(1) as isize;
            }
        }
        c.orbitals = (occupied, virt);
        c
    }
}

/// How to run the qc benchmark.
///
/// ```
/// let o = ttgt::bench::QcBenchOptions::default();
/// assert_eq!(o.threads, 1);
/// ```
#[derive(Clone, Debug)]
pub struct QcBenchOptions {
    /// Threads (0: the library's default, the pool's size).
    pub threads: usize,
    /// Timed batches per case; the best batch's mean time per call is reported.
    pub repeat: usize,
    /// Each batch repeats the call until it has run at least this long (and at least twice).
    pub batch_seconds: f64,
}

impl Default for QcBenchOptions {
    fn default() -> Self {
        QcBenchOptions {
            threads: 1,
            repeat: 3,
            batch_seconds: 5e-3,
        }
    }
}

/// The machine's limits for the roofline bound, measured once per run.
#[derive(Clone, Copy, Debug)]
pub struct MachineLimits {
    /// FLOP/s of a large square GEMM (the faster GEMM library) for the bench's element type.
    pub gemm_flops: f64,
    /// Bytes/s (read + written) of the best copy of a large buffer.
    pub copy_bytes: f64,
}

impl MachineLimits {
    /// Measures both on `threads` threads: an `n`³ GEMM (`n` = 1536) and a 256 MiB copy.
    ///
    /// ```no_run
    /// let l = ttgt::bench::MachineLimits::measure(ttgt::DType::F64, 1).unwrap();
    /// assert!(l.gemm_flops > 0.0 && l.copy_bytes > 0.0);
    /// ```
    pub fn measure(dtype: DType, threads: usize) -> Result<MachineLimits> {
        let n = 1536;
        let flops = (n * n * n) as f64 * dtype.flops_per_fma();
        let gemm = crate::with_dtype!(dtype.compute(), T => best_gemm::<T>(n, threads)?);
        let bytes = 256 << 20;
        let copy = best_copy_seconds(bytes, threads, 5)?;
        Ok(MachineLimits {
            gemm_flops: flops / gemm,
            copy_bytes: 2.0 * bytes as f64 / copy,
        })
    }

    /// The roofline bound of `flops` and `bytes`, seconds.
    pub fn bound(&self, flops: f64, bytes: f64) -> f64 {
        (flops / self.gemm_flops).max(bytes / self.copy_bytes)
    }
}

fn best_gemm<T: Element>(n: usize, threads: usize) -> Result<f64> {
    let mut timer = GemmTimer::<T>::new((n, n, n), GemmLayout::ROW)?;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        for lib in GemmLibrary::ALL {
            best = best.min(timer.time(lib, threads));
        }
    }
    Ok(best)
}

/// The result of one case.
#[derive(Clone, Debug)]
pub struct QcResult {
    /// The case replayed.
    pub case: QcCase,
    /// FLOPs of one call along its path (a multiply-add counts 2, complex 8).
    pub flops: f64,
    /// Compulsory bytes of one call: every operand read once, the result written once.
    pub bytes: f64,
    /// Seconds of the first call (planning and first touches included).
    pub first_seconds: f64,
    /// Seconds per call, repeated (best batch mean).
    pub seconds: f64,
    /// Every timed batch's mean seconds per call (`samples.min == seconds`).
    pub samples: super::Samples,
    /// For a two-operand call, the plan it ran: threads, predicted seconds, summary.
    pub plan: Option<(usize, f64, String)>,
}

impl QcResult {
    /// The call's roofline bound under `limits`, seconds.
    pub fn bound(&self, limits: &MachineLimits) -> f64 {
        limits.bound(self.flops, self.bytes)
    }
}

fn span(shape: &[usize], strides: &[isize]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    1 + shape
        .iter()
        .zip(strides)
        .map(|(&d, &s)| (d - 1) * s.unsigned_abs())
        .sum::<usize>()
}

/// One case's operands, result and path, replayed by [`QcRun`].
struct Replay<T: Element> {
    case: QcCase,
    buffers: Vec<Vec<T>>,
    out: ArrayD<T>,
    path: ContractionPath,
    threads: usize,
}

/// A replay with its element type erased.
trait Calls {
    /// Runs the call `times` times in a row; seconds per call.
    fn calls(&mut self, times: usize) -> Result<f64>;
    /// The cached plan a two-operand call runs: threads, prediction and summary.
    fn plan(&self) -> Option<(usize, f64, String)>;
}

impl<T: Element> Replay<T> {
    fn new(case: &QcCase, threads: usize) -> Result<(Self, f64, f64)> {
        let name = &case.name;
        if case.strides.iter().flatten().any(|&s| s <= 0) {
            return Err(Error::Unsupported(format!(
                "{name}: only positive strides can be replayed"
            )));
        }
        let buffers: Vec<Vec<T>> = case
            .shapes
            .iter()
            .zip(&case.strides)
            .enumerate()
            .map(|(i, (s, t))| fill::<T>(span(s, t), i + 1, "qc operand"))
            .collect::<Result<_>>()?;
        let shapes: Vec<&[usize]> = case.shapes.iter().map(Vec::as_slice).collect();
        let out_shape = crate::output_shape(&case.spec, &shapes)?;
        let path = crate::einsum_path(&case.spec, &shapes, &PathOptions::default())?;
        let flops = path.flops().max(0.0) * T::DTYPE.flops_per_fma() / 2.0;
        let elems: usize = shapes
            .iter()
            .map(|s| s.iter().product::<usize>())
            .sum::<usize>()
            + out_shape.iter().product::<usize>();
        let bytes = (elems * std::mem::size_of::<T>()) as f64;
        let replay = Replay {
            case: case.clone(),
            buffers,
            out: ArrayD::<T>::zeros(IxDyn(&out_shape)),
            path,
            threads,
        };
        Ok((replay, flops, bytes))
    }
}

impl<T: Element> Calls for Replay<T> {
    fn calls(&mut self, times: usize) -> Result<f64> {
        let case = &self.case;
        let views: Vec<ArrayViewD<'_, T>> = self
            .buffers
            .iter()
            .zip(case.shapes.iter().zip(&case.strides))
            .map(|(buf, (s, t))| {
                let strides: Vec<usize> = t.iter().map(|&x| x as usize).collect();
                ArrayViewD::from_shape(IxDyn(s).strides(IxDyn(&strides)), buf)
                    .map_err(|e| Error::Layout(format!("{}: {e}", case.name)))
            })
            .collect::<Result<_>>()?;
        let (path, c, spec) = (&self.path, &mut self.out, case.spec.as_str());
        // The call as a client makes it: one and two operands straight to the library, more
        // along a path made once (the Python package caches paths the same way).
        let t = Instant::now();
        for _ in 0..times {
            crate::threads::with_threads(self.threads, || match views.as_slice() {
                [a] => crate::einsum_unary_into(spec, T::one(), a, T::zero(), c),
                [a, b] => crate::contract_into(spec, T::one(), a, b, T::zero(), c),
                _ => crate::einsum_along_into(path, T::one(), &views, T::zero(), c).map(|_| ()),
            })?;
        }
        let seconds = t.elapsed().as_secs_f64() / times.max(1) as f64;
        std::hint::black_box(&self.out);
        Ok(seconds)
    }

    fn plan(&self) -> Option<(usize, f64, String)> {
        let [a, b] = self.case.shapes.as_slice() else {
            return None;
        };
        let [sa, sb] = self.case.strides.as_slice() else {
            return None;
        };
        let layout = |d: &[usize], s: &[isize]| Layout::new(d.to_vec(), s.to_vec()).ok();
        let inputs = [layout(a, sa)?, layout(b, sb)?];
        let c = Layout::of(&self.out);
        let spec = &self.case.spec;
        // the same key as the calls' lookups (same thread, same override): a cache hit
        let plan = crate::threads::with_threads(self.threads, || {
            cached_contraction_plan(spec, &inputs, &c, T::DTYPE, &PlanOptions::default())
        })
        .ok()?;
        let summary = plan.chosen().map(|c| c.summary()).unwrap_or_default();
        Some((plan.threads(), plan.predicted_seconds(), summary))
    }
}

/// A case being replayed: made by its first call, then timed in rounds of batches, so that
/// a caller can interleave its rounds with a peer's.
pub struct QcRun {
    replay: Box<dyn Calls>,
    per_batch: usize,
    batches: Vec<f64>,
    result: QcResult,
}

impl QcRun {
    /// Allocates the operands, drops every cached plan, and makes the first call (timed:
    /// planning and first touches included) and a second one to size the batches.
    pub fn start(case: &QcCase, o: &QcBenchOptions) -> Result<QcRun> {
        fn boxed<T: Element>(c: &QcCase, t: usize) -> Result<(Box<dyn Calls>, f64, f64)> {
            let (r, flops, bytes) = Replay::<T>::new(c, t)?;
            Ok((Box::new(r), flops, bytes))
        }
        let (mut replay, flops, bytes) =
            crate::with_dtype!(case.dtype, T => boxed::<T>(case, o.threads)?);
        clear_plan_caches();
        let first_seconds = replay.calls(1)?;
        let once = replay.calls(1)?.max(1e-8);
        // at least two calls a batch: a single call of several milliseconds is as noisy as
        // the host
        let per_batch = ((o.batch_seconds / once).ceil() as usize).clamp(2, 1 << 20);
        let plan = replay.plan();
        Ok(QcRun {
            replay,
            per_batch,
            batches: Vec::new(),
            result: QcResult {
                case: case.clone(),
                flops,
                bytes,
                first_seconds,
                seconds: f64::INFINITY,
                samples: super::Samples::default(),
                plan,
            },
        })
    }

    /// One timed batch; the best batch's time per call is kept.
    pub fn round(&mut self) -> Result<f64> {
        let s = self.replay.calls(self.per_batch)?;
        self.result.seconds = self.result.seconds.min(s);
        self.batches.push(s);
        self.result.samples = super::Samples::of(&self.batches);
        Ok(s)
    }

    /// One untimed batch, so that the next timed one starts on cores that are already
    /// running this call (after a pause, a 2-core host's first milliseconds of threaded
    /// calls run several times slower).
    pub fn warm_up(&mut self) -> Result<()> {
        self.replay.calls(self.per_batch).map(|_| ())
    }

    /// The result so far.
    pub fn result(&self) -> &QcResult {
        &self.result
    }
}

/// Replays one recorded call: its first call, then `repeat` batches of repeated calls.
///
/// ```
/// use ttgt::bench::{bench_qc, parse_qc, QcBenchOptions, QC_TSV};
/// let case = &parse_qc(QC_TSV).unwrap()[0];
/// let r = bench_qc(case, &QcBenchOptions { repeat: 1, ..Default::default() }).unwrap();
/// assert!(r.seconds > 0.0 && r.first_seconds > 0.0 && r.bytes > 0.0);
/// ```
pub fn bench_qc(case: &QcCase, o: &QcBenchOptions) -> Result<QcResult> {
    let mut run = QcRun::start(case, o)?;
    for _ in 0..o.repeat.max(1) {
        run.round()?;
    }
    Ok(run.result().clone())
}

//! `ttgt bench networks`: einsum networks of three or more operands (the table of
//! `benches/data/networks.tsv`), each run along the path `einsum` chooses (fewest predicted
//! seconds), beside the same network run by ttgt along the FLOP-optimal path and beside plain
//! GEMMs of every step's `m, n, k`, all measured in the same rounds.

use std::collections::BTreeMap;
use std::time::Instant;

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::backend::cpu::GemmTimer;
use crate::error::{Error, Result};
use crate::model::{GemmLayout, GemmLibrary};
use crate::plan::{ContractionPath, PathOptions, PathStrategy};
use crate::tensor::{DType, Element, Layout};
use crate::ContractionPlan;

/// The network table shipped with the crate (`benches/data/networks.tsv`).
pub const NETWORKS_TSV: &str = include_str!("../../benches/data/networks.tsv");

/// One network: a name, an einsum spec of three or more operands and an extent per index.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkCase {
    /// Short name (`ao2mo`).
    pub name: String,
    /// The einsum spec, output explicit.
    pub spec: String,
    /// Extent of every index.
    pub sizes: BTreeMap<char, usize>,
    /// What the network computes.
    pub what: String,
}

impl NetworkCase {
    /// The extents scaled by `scale` (rounded, at least 1).
    ///
    /// ```
    /// let c = &ttgt::bench::parse_networks(ttgt::bench::NETWORKS_TSV).unwrap()[0];
    /// assert!(c.extents(0.5).values().all(|&e| e >= 1));
    /// ```
    pub fn extents(&self, scale: f64) -> BTreeMap<char, usize> {
        self.sizes
            .iter()
            .map(|(&c, &e)| (c, ((e as f64 * scale).round() as usize).max(1)))
            .collect()
    }
}

/// Parses a network table: tab-separated `name spec sizes what`, `#` comments, a header.
///
/// ```
/// let cases = ttgt::bench::parse_networks(ttgt::bench::NETWORKS_TSV).unwrap();
/// assert!(cases.iter().any(|c| c.name == "ao2mo"));
/// assert!(ttgt::bench::parse_networks("name\tspec\tsizes\twhat\nx\tij,jk\ti=2\tbad").is_err());
/// ```
pub fn parse_networks(text: &str) -> Result<Vec<NetworkCase>> {
    let bad = |line: &str, why: &str| Error::Unsupported(format!("network table: {why}: {line:?}"));
    let mut cases = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .skip(1)
    {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 4 {
            return Err(bad(line, "expected name, spec, sizes and what"));
        }
        let mut sizes = BTreeMap::new();
        for kv in f[2].split(',') {
            let (k, v) = kv.split_once('=').ok_or_else(|| bad(line, "size"))?;
            let mut ch = k.trim().chars();
            let c = match (ch.next(), ch.next()) {
                (Some(c), None) => c,
                _ => return Err(bad(line, "size")),
            };
            sizes.insert(c, v.trim().parse().map_err(|_| bad(line, "size"))?);
        }
        let spec = f[1].trim().to_string();
        let letters = spec.chars().filter(|c| c.is_ascii_alphabetic());
        if letters.clone().any(|c| !sizes.contains_key(&c)) || spec.contains("...") {
            return Err(bad(line, "every index needs a size, and no '...'"));
        }
        cases.push(NetworkCase {
            name: f[0].trim().to_string(),
            spec,
            sizes,
            what: f[3].trim().to_string(),
        });
    }
    Ok(cases)
}

/// Options of [`bench_network`].
#[derive(Clone, Debug)]
pub struct NetworkBenchOptions {
    /// Element type.
    pub dtype: DType,
    /// Threads of the contractions and of the reference GEMMs.
    pub threads: usize,
    /// Timed rounds (after an untimed one); the best of each measurement is kept.
    pub repeat: usize,
    /// Factor on every extent.
    pub scale: f64,
}

impl Default for NetworkBenchOptions {
    fn default() -> Self {
        NetworkBenchOptions {
            dtype: DType::F64,
            threads: rayon::current_num_threads(),
            repeat: 5,
            scale: 1.0,
        }
    }
}

/// One network's times.
#[derive(Clone, Debug)]
pub struct NetworkResult {
    /// The case's name.
    pub case: String,
    /// Its spec.
    pub spec: String,
    /// Element type.
    pub dtype: DType,
    /// Threads.
    pub threads: usize,
    /// Extents used.
    pub extents: BTreeMap<char, usize>,
    /// Every timed run along the chosen path (`samples.min == seconds`).
    pub samples: super::Samples,
    /// Best time along the chosen path.
    pub seconds: f64,
    /// FLOPs of the chosen path.
    pub flops: f64,
    /// Which search chose it.
    pub strategy: &'static str,
    /// Each step's spec and its time in the best run.
    pub steps: Vec<(String, f64)>,
    /// Predicted seconds of the chosen path.
    pub predicted_seconds: f64,
    /// Seconds the path search took.
    pub planning_seconds: f64,
    /// Best time along the FLOP-optimal path (greedy beyond
    /// [`AUTO_OPTIMAL_MAX_OPERANDS`](crate::plan::AUTO_OPTIMAL_MAX_OPERANDS) operands) with the
    /// FLOP search's intermediate orders, run by ttgt.
    pub flop_seconds: f64,
    /// FLOPs of the FLOP-optimal path.
    pub flop_flops: f64,
    /// Predicted seconds of the FLOP-optimal path.
    pub flop_predicted_seconds: f64,
    /// Sum over the chosen path's steps of the best same-size GEMM (`batch` calls of the
    /// step's `m, n, k`, the faster library).
    pub gemm_reference_seconds: f64,
}

impl NetworkResult {
    /// GFLOP/s along the chosen path.
    pub fn gflops(&self) -> f64 {
        self.flops / self.seconds / 1e9
    }

    /// Same-size GEMM time over the path's time (1 = as fast as the GEMMs alone).
    pub fn ratio(&self) -> f64 {
        self.gemm_reference_seconds / self.seconds
    }

    /// The FLOP-optimal path's time over the chosen path's time.
    pub fn flop_speedup(&self) -> f64 {
        self.flop_seconds / self.seconds
    }

    /// Predicted over measured time of the chosen path (1 = the model is right).
    pub fn prediction_ratio(&self) -> f64 {
        self.predicted_seconds / self.seconds
    }
}

/// A benchmark operand of `shape` (the contraction bench's deterministic values).
fn operand<T: Element>(shape: &[usize], seed: usize) -> Result<ArrayD<T>> {
    let data = super::contract::fill::<T>(shape.iter().product(), seed, "a network operand")?;
    ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|e| Error::Layout(e.to_string()))
}

/// A term's shape from its letters.
fn shape_of(term: &str, ext: &BTreeMap<char, usize>) -> Vec<usize> {
    term.chars()
        .map(|c| ext.get(&c).copied().unwrap_or(1))
        .collect()
}

fn run_typed<T: Element>(case: &NetworkCase, o: &NetworkBenchOptions) -> Result<NetworkResult> {
    let ext = case.extents(o.scale);
    let (inputs, _) = case
        .spec
        .split_once("->")
        .ok_or_else(|| Error::Unsupported(format!("{}: the output must be explicit", case.name)))?;
    let shapes: Vec<Vec<usize>> = inputs.split(',').map(|t| shape_of(t, &ext)).collect();
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let ops: Vec<ArrayD<T>> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| operand(s, 7 + k))
        .collect::<Result<_>>()?;
    let views: Vec<ArrayViewD<'_, T>> = ops.iter().map(|a| a.view()).collect();
    let priced = PathOptions {
        dtype: Some(T::DTYPE),
        threads: Some(o.threads.max(1)),
        ..Default::default()
    };
    crate::plan::clear_plan_caches(); // the search's time is part of the record
    let path = crate::einsum_path(&case.spec, &refs, &priced)?;
    let flop_options = PathOptions {
        strategy: if refs.len() <= crate::plan::AUTO_OPTIMAL_MAX_OPERANDS {
            PathStrategy::Optimal
        } else {
            PathStrategy::Greedy
        },
        ..Default::default()
    };
    let flop = crate::einsum_path(&case.spec, &refs, &flop_options)?;
    let reference = path.reference();
    // Each step's GEMM shape, from its plan.
    let mut timers = Vec::new();
    for step in path.steps() {
        let (ins, out) = step.spec.split_once("->").unwrap_or((&step.spec, ""));
        let (x, y) = ins.split_once(',').unwrap_or((ins, ""));
        let layouts = [
            Layout::row_major(&shape_of(x, &ext))?,
            Layout::row_major(&shape_of(y, &ext))?,
        ];
        let lc = Layout::row_major(&shape_of(out, &ext))?;
        let plan = ContractionPlan::new(&step.spec, &layouts, &lc, T::DTYPE)?;
        let (batch, m, n, k) = plan.gemm_shape();
        if m * n * k > 0 {
            timers.push((
                batch.max(1),
                GemmTimer::<T>::new((m, n, k), GemmLayout::ROW)?,
            ));
        }
    }
    let threads = o.threads.max(1);
    // The result goes into one output reused by every run, as the GEMMs' C is: a fresh one
    // would add the page faults of its first touch, which can cost more than the GEMM
    // (`docs/TUNING.md`).
    let (_, out_term) = case.spec.split_once("->").unwrap_or((&case.spec, ""));
    let out_shape = shape_of(out_term, &ext);
    let data = crate::tensor::zeroed::<T>(Layout::row_major(&out_shape)?.len(), "the result")?;
    let mut out = ArrayD::from_shape_vec(IxDyn(&out_shape), data)
        .map_err(|e| Error::Layout(e.to_string()))?;
    let mut run = |p: &ContractionPath| -> Result<(f64, Vec<f64>)> {
        let t = Instant::now();
        let steps = crate::einsum_along_into(p, T::one(), &views, T::zero(), &mut out)?;
        Ok((
            t.elapsed().as_secs_f64(),
            steps.iter().map(|d| d.as_secs_f64()).collect(),
        ))
    };
    let gemms = |timers: &mut Vec<(usize, GemmTimer<T>)>| -> f64 {
        timers
            .iter_mut()
            .map(|(batch, tm)| {
                let best = GemmLibrary::ALL
                    .into_iter()
                    .map(|lib| tm.time(lib, threads))
                    .fold(f64::INFINITY, f64::min);
                *batch as f64 * best
            })
            .sum()
    };
    // One untimed round (plans, first touch of pages), then rounds that time everything once.
    let same_steps = path.pairs() == flop.pairs()
        && path
            .steps()
            .iter()
            .zip(flop.steps())
            .all(|(a, b)| a.spec == b.spec);
    run(&path)?;
    run(&flop)?;
    gemms(&mut timers);
    let (mut best, mut best_flop, mut best_gemm) =
        ((f64::INFINITY, Vec::new()), f64::INFINITY, f64::INFINITY);
    let mut times = Vec::with_capacity(o.repeat.max(1));
    for _ in 0..o.repeat.max(1) {
        let r = run(&path)?;
        times.push(r.0);
        if r.0 < best.0 {
            best = r.clone();
        }
        // the same steps as the chosen path: the same run, not a second sample of it
        if same_steps {
            best_flop = best_flop.min(r.0);
        } else {
            best_flop = best_flop.min(run(&flop)?.0);
        }
        best_gemm = best_gemm.min(gemms(&mut timers));
    }
    Ok(NetworkResult {
        case: case.name.clone(),
        spec: case.spec.clone(),
        dtype: T::DTYPE,
        threads,
        extents: ext,
        seconds: best.0,
        samples: super::Samples::of(&times),
        flops: path.flops(),
        strategy: path.strategy(),
        steps: path
            .steps()
            .iter()
            .map(|s| s.spec.clone())
            .zip(best.1)
            .collect(),
        predicted_seconds: path.predicted_seconds().unwrap_or(f64::NAN),
        planning_seconds: reference.map_or(0.0, |r| r.planning_seconds),
        flop_seconds: best_flop,
        flop_flops: flop.flops(),
        flop_predicted_seconds: reference.map_or(f64::NAN, |r| r.predicted_seconds),
        gemm_reference_seconds: best_gemm,
    })
}

/// Runs one network in `o.threads` threads: along the chosen path, along the FLOP-optimal
/// path, and the same-size GEMMs of the chosen path's steps, in interleaved rounds.
///
/// ```
/// use ttgt::bench::{bench_network, parse_networks, NetworkBenchOptions, NETWORKS_TSV};
/// let case = &parse_networks(NETWORKS_TSV).unwrap()[0];
/// let o = NetworkBenchOptions { scale: 0.25, repeat: 1, threads: 1, ..Default::default() };
/// let r = bench_network(case, &o).unwrap();
/// assert!(r.seconds > 0.0 && r.ratio() > 0.0 && r.flop_flops <= r.flops);
/// assert!(r.predicted_seconds <= r.flop_predicted_seconds * (1.0 + 1e-9));
/// ```
pub fn bench_network(case: &NetworkCase, o: &NetworkBenchOptions) -> Result<NetworkResult> {
    let go = || crate::with_dtype!(o.dtype, T => run_typed::<T>(case, o));
    crate::transpose::on_threads(o.threads.max(1), go)
}

//! The contraction benchmark behind `ttgt bench contract`: the TCCG cases (shipped in
//! `benches/data/`), each planned and timed beside a plain GEMM of the same `m, n, k`
//! measured in the same run, with the planner's prediction and, on request, every candidate
//! timed to measure the planner's regret.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::backend::cpu::GemmTimer;
use crate::error::{Error, Result};
use crate::model::{GemmLayout, GemmLibrary};
use crate::plan::{PlanOptions, StepCosts};
use crate::tensor::{zeroed, DType, Element, Layout, StridedView, StridedViewMut};
use crate::ContractionPlan;

/// The TCCG contraction benchmark table (48 cases).
pub const TCCG_TSV: &str = include_str!("../../benches/data/tccg_contractions.tsv");

/// One contraction case in row-major (ndarray) terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContractCase {
    /// Case name (`tccg-7`).
    pub name: String,
    /// The spec for row-major operands.
    pub spec: String,
    /// Extent of every index for 4-byte (and 2-byte) elements.
    pub extents_4: BTreeMap<char, usize>,
    /// Extent of every index for 8-byte (and larger) elements.
    pub extents_8: BTreeMap<char, usize>,
}

impl ContractCase {
    /// Extents for `dtype`, each multiplied by `scale` (rounded, at least 1).
    pub fn extents(&self, dtype: DType, scale: f64) -> BTreeMap<char, usize> {
        // f16 and bf16 at f32's extents: their speed against f32 on the same problems
        let e = if dtype.size_bytes() <= 4 {
            &self.extents_4
        } else {
            &self.extents_8
        };
        e.iter()
            .map(|(&c, &x)| (c, ((x as f64 * scale).round() as usize).max(1)))
            .collect()
    }
}

fn bad(line: usize, what: &str) -> Error {
    Error::Unsupported(format!("contraction table line {line}: {what}"))
}

fn extents(s: &str, line: usize) -> Result<BTreeMap<char, usize>> {
    s.split(',')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(line, &format!("bad extent {kv:?}")))?;
            let c = k
                .trim()
                .chars()
                .next()
                .ok_or_else(|| bad(line, "empty index name"))?;
            let v = v
                .trim()
                .parse()
                .map_err(|_| bad(line, &format!("bad extent {kv:?}")))?;
            Ok((c, v))
        })
        .collect()
}

/// Parses a TCCG-format table (tab-separated, `#` comments, header with `id`,
/// `einsum_rowmajor_equiv`, `extents_f32`, `extents_f64`).
///
/// ```
/// let cases = ttgt::bench::parse_tccg(ttgt::bench::TCCG_TSV).unwrap();
/// assert_eq!(cases.len(), 48);
/// assert_eq!(cases[0].spec, "adb,cd->cba");
/// ```
pub fn parse_tccg(text: &str) -> Result<Vec<ContractCase>> {
    let columns = ["id", "einsum_rowmajor_equiv", "extents_f32", "extents_f64"];
    crate::cases::table_rows(text, &columns)?
        .into_iter()
        .map(|(n, f)| {
            Ok(ContractCase {
                name: format!("tccg-{}", f[0]),
                spec: f[1].to_string(),
                extents_4: extents(f[2], n)?,
                extents_8: extents(f[3], n)?,
            })
        })
        .collect()
}

/// How to run the contraction benchmark.
///
/// ```
/// let o = ttgt::bench::ContractBenchOptions::default();
/// assert_eq!(o.repeat, 3);
/// ```
#[derive(Clone, Debug)]
pub struct ContractBenchOptions {
    /// Element type.
    pub dtype: DType,
    /// Threads (planner, transposes, GEMM, reference GEMM).
    pub threads: usize,
    /// Timed rounds per case, after one untimed warm-up execution of everything timed: each
    /// round runs every timed candidate and every reference GEMM library once, interleaved so
    /// that a slow spell of a shared host falls on all of them (best of the rounds kept).
    pub repeat: usize,
    /// Extent multiplier (1: the table's sizes, about 200 MiB per largest operand).
    pub scale: f64,
    /// Time this many of the best-predicted candidates too (0: only the chosen one).
    pub candidates: usize,
    /// Force a GEMM library.
    pub library: Option<GemmLibrary>,
}

impl Default for ContractBenchOptions {
    fn default() -> Self {
        ContractBenchOptions {
            dtype: DType::F64,
            threads: 1,
            repeat: 3,
            scale: 1.0,
            candidates: 0,
            library: None,
        }
    }
}

/// One timed candidate.
#[derive(Clone, Debug)]
pub struct TimedCandidate {
    /// Its one-line summary.
    pub summary: String,
    /// Predicted seconds.
    pub predicted: f64,
    /// Measured seconds (best of the repeats).
    pub seconds: f64,
}

/// The result of one case.
#[derive(Clone, Debug)]
pub struct ContractResult {
    /// Case name.
    pub case: String,
    /// Spec (row-major).
    pub spec: String,
    /// Extents used.
    pub extents: BTreeMap<char, usize>,
    /// Element type.
    pub dtype: DType,
    /// Threads.
    pub threads: usize,
    /// Best execution time of the chosen plan.
    pub seconds: f64,
    /// Every timed execution of the chosen plan (`samples.min == seconds`).
    pub samples: super::Samples,
    /// Flops (TCCG convention).
    pub flops: f64,
    /// `(m, n, k)` of the same-size GEMM.
    pub gemm_mnk: (usize, usize, usize),
    /// Seconds of a plain row-major GEMM of that size (the faster library), same run, in the
    /// compute type (f32 for f16 and bf16).
    pub gemm_reference_seconds: f64,
    /// Library of the reference GEMM.
    pub gemm_reference_library: GemmLibrary,
    /// Time in transposes (packing and writing C) of the best execution.
    pub transpose_seconds: f64,
    /// Time in GEMM calls of the best execution.
    pub gemm_seconds: f64,
    /// The planner's prediction.
    pub predicted_seconds: f64,
    /// Predicted steps.
    pub predicted_steps: StepCosts,
    /// The chosen candidate.
    pub plan: String,
    /// Planning time (estimate mode), seconds.
    pub plan_seconds: f64,
    /// Other candidates timed (with `candidates > 0`), the chosen one first.
    pub timed: Vec<TimedCandidate>,
}

impl ContractResult {
    /// GFLOP/s of the contraction.
    pub fn gflops(&self) -> f64 {
        self.flops / self.seconds / 1e9
    }

    /// GFLOP/s of the reference GEMM.
    pub fn gemm_gflops(&self) -> f64 {
        self.flops / self.gemm_reference_seconds / 1e9
    }

    /// Reference GEMM time over contraction time (1: as fast as the GEMM alone).
    pub fn ratio(&self) -> f64 {
        self.gemm_reference_seconds / self.seconds
    }

    /// Chosen time over the fastest timed candidate, minus one (None when nothing else was
    /// timed).
    pub fn regret(&self) -> Option<f64> {
        if self.timed.len() < 2 {
            return None;
        }
        let best = self
            .timed
            .iter()
            .map(|t| t.seconds)
            .fold(f64::INFINITY, f64::min);
        Some(self.timed[0].seconds / best - 1.0)
    }
}

/// `n` deterministic values in [-1, 1) (a half-size imaginary part for complex types), in a
/// fallible allocation.
pub(super) fn fill<T: Element>(n: usize, seed: usize, what: &str) -> Result<Vec<T>> {
    let mut v = zeroed::<T>(n, what)?;
    for (i, x) in v.iter_mut().enumerate() {
        let r = ((i.wrapping_mul(2654435761).wrapping_add(seed)) % 1000) as f64 / 500.0 - 1.0;
        *x = T::from_parts(r, 0.5 * r);
    }
    Ok(v)
}

fn run_typed<T: Element>(case: &ContractCase, o: &ContractBenchOptions) -> Result<ContractResult> {
    let ext = case.extents(o.dtype, o.scale);
    let (ins, out) = case
        .spec
        .split_once("->")
        .ok_or_else(|| Error::Unsupported(format!("{}: spec without ->", case.name)))?;
    let terms: Vec<&str> = ins.split(',').collect();
    let dims = |t: &str| -> Result<Vec<usize>> {
        t.chars()
            .map(|c| {
                ext.get(&c).copied().ok_or_else(|| {
                    Error::Unsupported(format!("{}: no extent for index {c}", case.name))
                })
            })
            .collect()
    };
    if terms.len() != 2 {
        return Err(Error::Unsupported(format!(
            "{}: two operands expected",
            case.name
        )));
    }
    let (da, db, dc) = (dims(terms[0])?, dims(terms[1])?, dims(out)?);
    let (la, lb, lc) = (
        Layout::row_major(&da)?,
        Layout::row_major(&db)?,
        Layout::row_major(&dc)?,
    );
    let a: Vec<T> = fill(la.len(), 1, "benchmark operand A")?;
    let b: Vec<T> = fill(lb.len(), 2, "benchmark operand B")?;
    let mut c: Vec<T> = zeroed(lc.len(), "benchmark result")?;
    let options = PlanOptions {
        threads: Some(o.threads),
        library: o.library,
        ..Default::default()
    };
    let t = Instant::now();
    let mut plan = ContractionPlan::with_options(
        &case.spec,
        &[la.clone(), lb.clone()],
        &lc,
        T::DTYPE,
        &options,
    )?;
    let plan_seconds = t.elapsed().as_secs_f64();
    let av = StridedView::from_slice(&a, la, 0)?;
    let bv = StridedView::from_slice(&b, lb, 0)?;
    // The chosen candidate first, then the next best-predicted ones.
    let chosen_index = plan.chosen_index();
    let order: Vec<usize> = match plan.chosen() {
        Some(_) => std::iter::once(chosen_index)
            .chain((0..plan.candidates().len()).filter(|&i| i != chosen_index))
            .take(o.candidates.max(1))
            .collect(),
        None => vec![chosen_index],
    };
    let (_, m, n, k) = plan.gemm_shape();
    // The same-size GEMM of the compute type: for f16 and bf16 the f32 GEMM on f32 data (the
    // fastest a contraction of half-precision operands computed in f32 can run).
    let mut reference: Box<dyn FnMut(GemmLibrary, usize) -> f64> = crate::with_dtype!(T::DTYPE.compute(), U => {
        let mut timer = GemmTimer::<U>::new((m, n, k), GemmLayout::ROW)?;
        Box::new(move |lib, threads| timer.time(lib, threads))
    });
    let mut cv = StridedViewMut::from_slice(&mut c, lc.clone(), 0)?;
    let mut run = |plan: &mut ContractionPlan, i: usize| -> Result<(f64, crate::StepTimes)> {
        // a plan without candidates (nothing to choose) runs as it is
        if plan.chosen().is_some() {
            plan.choose(i)?;
        }
        let t = Instant::now();
        let st = plan.execute(T::one(), &[av.clone(), bv.clone()], T::zero(), &mut cv)?;
        Ok((t.elapsed().as_secs_f64(), st))
    };
    // One untimed execution of each candidate and each reference library first: it pays
    // the first touch of C's pages (the bench allocates C zeroed, mapped lazily) and of
    // workspace buffers of a size the pool has not held yet, which would otherwise be
    // charged to whichever plan runs first (the chosen one).
    for &i in &order {
        run(&mut plan, i)?;
    }
    for lib in GemmLibrary::ALL {
        reference(lib, o.threads);
    }
    // Then rounds that each time every candidate and every library once, best kept: on a
    // shared host a slow spell falls on one round of all of them, not on all the
    // executions of whichever was being timed during it.
    let mut best = vec![(f64::INFINITY, crate::StepTimes::default()); order.len()];
    let mut best_lib = [f64::INFINITY; GemmLibrary::ALL.len()];
    let mut chosen_times = Vec::with_capacity(o.repeat.max(1));
    for _ in 0..o.repeat.max(1) {
        for (k, (slot, &i)) in best.iter_mut().zip(&order).enumerate() {
            let (s, st) = run(&mut plan, i)?;
            if k == 0 {
                chosen_times.push(s);
            }
            if s < slot.0 {
                *slot = (s, st);
            }
        }
        for (b, lib) in best_lib.iter_mut().zip(GemmLibrary::ALL) {
            *b = b.min(reference(lib, o.threads));
        }
    }
    if plan.chosen().is_some() {
        plan.choose(chosen_index)?;
    }
    let (seconds, steps) = best[0];
    let chosen = plan.chosen().cloned();
    let timed = if chosen.is_some() {
        order
            .iter()
            .zip(&best)
            .map(|(&i, &(s, _))| {
                let cd = &plan.candidates()[i];
                TimedCandidate {
                    summary: cd.summary(),
                    predicted: cd.predicted.total(),
                    seconds: s,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let reference = GemmLibrary::ALL
        .into_iter()
        .zip(best_lib)
        .map(|(lib, s)| (s, lib))
        .fold((f64::INFINITY, GemmLibrary::Gemm), |a, b| {
            if b.0 < a.0 {
                b
            } else {
                a
            }
        });
    Ok(ContractResult {
        case: case.name.clone(),
        spec: case.spec.clone(),
        extents: ext,
        dtype: T::DTYPE,
        threads: o.threads,
        seconds,
        samples: super::Samples::of(&chosen_times),
        flops: plan.flops(),
        gemm_mnk: (m, n, k),
        gemm_reference_seconds: reference.0,
        gemm_reference_library: reference.1,
        transpose_seconds: steps.transpose().as_secs_f64(),
        gemm_seconds: steps.gemm.as_secs_f64(),
        predicted_seconds: plan.predicted_seconds(),
        predicted_steps: plan.predicted_steps(),
        plan: chosen.map(|c| c.summary()).unwrap_or_default(),
        plan_seconds,
        timed,
    })
}

/// Plans, runs and times one case, with its same-run GEMM reference.
///
/// ```
/// use ttgt::bench::{bench_contract, parse_tccg, ContractBenchOptions, TCCG_TSV};
/// let case = &parse_tccg(TCCG_TSV).unwrap()[0];
/// let o = ContractBenchOptions { scale: 0.1, repeat: 1, ..Default::default() };
/// let r = bench_contract(case, &o).unwrap();
/// assert!(r.seconds > 0.0 && r.ratio() > 0.0);
/// // with other candidates timed in the same rounds, the chosen one comes first
/// let o = ContractBenchOptions { candidates: 3, ..o };
/// let r = bench_contract(case, &o).unwrap();
/// assert!(r.timed.len() > 1 && r.timed.len() <= 3);
/// assert_eq!((r.timed[0].summary.as_str(), r.timed[0].seconds), (r.plan.as_str(), r.seconds));
/// assert!(r.regret().unwrap() >= 0.0);
/// ```
pub fn bench_contract(case: &ContractCase, o: &ContractBenchOptions) -> Result<ContractResult> {
    crate::with_dtype!(o.dtype, T => run_typed::<T>(case, o))
}

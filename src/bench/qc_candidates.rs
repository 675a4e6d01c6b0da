//! The planner's regret on the quantum-chemistry calls (`ttgt bench contract --cases qc
//! --all-candidates`): a two-operand call is planned as a client's call plans it (the
//! operands' layouts as PySCF passed them, the thread count as an override, default
//! options), then its chosen candidate and the next ones in the planner's order are timed
//! in interleaved rounds of batched calls.

use std::time::Instant;

use ndarray::IxDyn;

use super::contract::{fill, TimedCandidate};
use super::qc::QcCase;
use crate::error::{Error, Result};
use crate::plan::PlanOptions;
use crate::tensor::{Element, Layout, StridedView, StridedViewMut};
use crate::ContractionPlan;

/// Seconds of calls one timed batch holds at least (short calls are timed in batches).
const BATCH_SECONDS: f64 = 1e-3;

/// The chosen candidate of a two-operand qc call and up to `max - 1` more in the planner's
/// order, each timed as the best of `repeat` interleaved batches (seconds per call), the
/// chosen one first. `None` for calls of other arities, layouts that cannot be replayed
/// (non-positive strides) and plans with nothing to choose.
///
/// ```
/// use ttgt::bench::{parse_qc, qc_candidates, QC_TSV};
/// let case = parse_qc(QC_TSV).unwrap().into_iter()
///     .find(|c| c.spec == "ijac,bc->ijab" && c.workload == "water/cc-pvdz/rccsd").unwrap();
/// let t = qc_candidates(&case, 1, 3, 1).unwrap().unwrap();
/// assert!(t.len() >= 2 && t.iter().all(|c| c.seconds > 0.0));
/// ```
pub fn qc_candidates(
    case: &QcCase,
    threads: usize,
    max: usize,
    repeat: usize,
) -> Result<Option<Vec<TimedCandidate>>> {
    crate::with_dtype!(case.dtype, T => typed::<T>(case, threads, max, repeat))
}

fn typed<T: Element>(
    case: &QcCase,
    threads: usize,
    max: usize,
    repeat: usize,
) -> Result<Option<Vec<TimedCandidate>>> {
    let ([sa, sb], [ta, tb]) = (case.shapes.as_slice(), case.strides.as_slice()) else {
        return Ok(None);
    };
    if case.strides.iter().flatten().any(|&s| s <= 0) {
        return Ok(None);
    }
    let la = Layout::new(sa.clone(), ta.clone())?;
    let lb = Layout::new(sb.clone(), tb.clone())?;
    let shapes: Vec<&[usize]> = vec![sa, sb];
    let out = crate::output_shape(&case.spec, &shapes)?;
    let lc = Layout::row_major(&out)?;
    let span = |l: &Layout| l.offset_range().1.max(0) as usize + 1;
    let a: Vec<T> = fill(span(&la), 1, "qc operand")?;
    let b: Vec<T> = fill(span(&lb), 2, "qc operand")?;
    let mut c = ndarray::ArrayD::<T>::zeros(IxDyn(&out));
    let mut plan = crate::threads::with_threads(threads, || {
        ContractionPlan::with_options(
            &case.spec,
            &[la.clone(), lb.clone()],
            &lc,
            T::DTYPE,
            &PlanOptions::default(),
        )
    })?;
    if plan.chosen().is_none() || plan.candidates().len() < 2 {
        return Ok(None);
    }
    let chosen = plan.chosen_index();
    let order: Vec<usize> = std::iter::once(chosen)
        .chain((0..plan.candidates().len()).filter(|&i| i != chosen))
        .take(max.max(2))
        .collect();
    let (av, bv) = (
        StridedView::from_slice(&a, la, 0)?,
        StridedView::from_slice(&b, lb, 0)?,
    );
    let mut cv = StridedViewMut::of(&mut c)?;
    let mut run = |plan: &mut ContractionPlan, i: usize, times: usize| -> Result<f64> {
        plan.choose(i)?;
        let t = Instant::now();
        for _ in 0..times {
            plan.execute(T::one(), &[av.clone(), bv.clone()], T::zero(), &mut cv)?;
        }
        Ok(t.elapsed().as_secs_f64() / times as f64)
    };
    // One untimed call of each (first touches), which also sizes its batch.
    let mut batches = Vec::with_capacity(order.len());
    for &i in &order {
        let once = run(&mut plan, i, 1)?.max(1e-8);
        batches.push(((BATCH_SECONDS / once).ceil() as usize).clamp(2, 1 << 20));
    }
    let mut best = vec![f64::INFINITY; order.len()];
    for _ in 0..repeat.max(1) {
        for ((slot, &i), &n) in best.iter_mut().zip(&order).zip(&batches) {
            *slot = slot.min(run(&mut plan, i, n)?);
        }
    }
    let timed = order
        .iter()
        .zip(&best)
        .map(|(&i, &s)| {
            let cd = &plan.candidates()[i];
            TimedCandidate {
                summary: cd.summary(),
                predicted: cd.predicted.total(),
                seconds: s,
            }
        })
        .collect();
    if best.iter().any(|s| !s.is_finite()) {
        return Err(Error::Unsupported(format!(
            "{}: a candidate was not timed",
            case.name
        )));
    }
    Ok(Some(timed))
}

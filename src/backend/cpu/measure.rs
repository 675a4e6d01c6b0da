//! Measured tuning of a [`ContractionPlan`]: the best-predicted candidates timed on the
//! real data, C saved and restored between trials.

use std::time::{Duration, Instant};

use super::gemm_loops::for_each_index;
use crate::error::{Error, Result};
use crate::plan::ContractionPlan;
use crate::plan::StepTimes;
use crate::tensor::{Element, StridedView, StridedViewMut};

impl ContractionPlan {
    /// Times the best-predicted candidates on the real data within `budget` (at least the
    /// first two), keeps the fastest, and returns the step times of its run. C ends as after
    /// one execution (it is saved and restored between trials when `beta != 0`).
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout, tensor::{StridedView, StridedViewMut}};
    /// let a = ndarray::Array3::<f32>::ones((6, 5, 7));
    /// let b = ndarray::Array3::<f32>::ones((7, 5, 4));
    /// let mut c = ndarray::Array2::<f32>::from_elem((6, 4), 1.0);
    /// let mut plan = ContractionPlan::new("abc,cbd->ad", &[Layout::of(&a), Layout::of(&b)], &Layout::of(&c), DType::F32).unwrap();
    /// plan.measure(1.0, &[StridedView::of(&a), StridedView::of(&b)], 1.0,
    ///              &mut StridedViewMut::of(&mut c).unwrap(), std::time::Duration::from_millis(50)).unwrap();
    /// assert!(c.iter().all(|&x| x == 36.0)); // 1 + 5 * 7, once
    /// assert!(plan.measured_seconds(plan.chosen_index()).is_some());
    /// ```
    pub fn measure<T: Element>(
        &mut self,
        alpha: T,
        inputs: &[StridedView<'_, T>],
        beta: T,
        c: &mut StridedViewMut<'_, T>,
        budget: Duration,
    ) -> Result<StepTimes> {
        self.check_operands(inputs, c)?;
        // measured tuning replaces refinement from executions
        self.refine = crate::plan::Refinement::default();
        if self.candidates.len() <= 1 {
            return self.execute(alpha, inputs, beta, c);
        }
        // C's elements, restored before every trial after the first (beta != 0 reads them).
        // Without memory for that copy, no trials: the predicted best runs once.
        let saved = if beta.is_exact_zero() {
            None
        } else {
            match snapshot(c) {
                Ok(s) => Some(s),
                Err(_) => return self.execute(alpha, inputs, beta, c),
            }
        };
        let start = Instant::now();
        let mut best: Option<(usize, f64, StepTimes)> = None;
        let mut failed: Option<Error> = None;
        let (mut last, mut dirty) = (usize::MAX, false);
        for i in 0..self.candidates.len() {
            if i >= 2 && start.elapsed() >= budget {
                break;
            }
            if let (Some(s), true) = (&saved, dirty) {
                restore(c, s);
            }
            self.chosen = i;
            dirty = true;
            // A candidate that fails (its workspace cannot be had, say) is left out of the
            // choice; the call fails only when every trial does.
            let t = match self.execute(alpha, inputs, beta, c) {
                Ok(t) => t,
                Err(e) => {
                    failed.get_or_insert(e);
                    last = usize::MAX;
                    continue;
                }
            };
            last = i;
            let secs = t.total().as_secs_f64();
            self.measured[i] = Some(secs);
            if best.as_ref().is_none_or(|b| secs < b.1) {
                best = Some((i, secs, t));
            }
        }
        let Some((i, _, t)) = best else {
            if let Some(s) = &saved {
                restore(c, s);
            }
            return match failed {
                Some(e) => Err(e),
                None => self.execute(alpha, inputs, beta, c),
            };
        };
        self.chosen = i;
        if i == last {
            return Ok(t);
        }
        if let Some(s) = &saved {
            restore(c, s);
        }
        self.execute(alpha, inputs, beta, c)
    }
}

/// The elements of a view, in its index order (an error when their copy cannot be had).
fn snapshot<T: Element>(c: &StridedViewMut<'_, T>) -> Result<Vec<T>> {
    let l = c.layout();
    let p = c.as_ptr();
    let mut v = Vec::new();
    v.try_reserve_exact(l.len())
        .map_err(|_| Error::Allocation {
            bytes: l.len().saturating_mul(std::mem::size_of::<T>()),
            what: "a copy of C for measured tuning".into(),
        })?;
    // SAFETY: every offset of an index of `l` addresses an element of the view.
    for_each_index(l.dims(), [l.strides()], |[o]| {
        v.push(unsafe { *p.offset(o) })
    });
    Ok(v)
}

/// Writes back what [`snapshot`] took.
fn restore<T: Element>(c: &mut StridedViewMut<'_, T>, v: &[T]) {
    let l = c.layout().clone();
    let p = c.as_mut_ptr();
    let mut it = v.iter();
    // SAFETY: as in `snapshot`; the view is borrowed mutably.
    for_each_index(l.dims(), [l.strides()], |[o]| {
        if let Some(&x) = it.next() {
            unsafe { *p.offset(o) = x }
        }
    });
}

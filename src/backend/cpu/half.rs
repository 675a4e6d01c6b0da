//! Execution of a half-precision plan (`plan::storage`): the inputs widened to their `f32`
//! images, the `f32` plan run on them into an `f32` image of C, the result rounded once into
//! C. With `beta != 0`, C is widened into its image first; with `beta == 0` it is only
//! written. C is written last, so a failed execution leaves it as it was. A one-operand plan
//! without sums (a transposition) runs on the 16-bit elements directly.

use std::time::Instant;

use crate::error::{Error, Result};
use crate::plan::ContractionPlan;
use crate::tensor::{take_aligned, Element, StridedView, StridedViewMut, Workspace};
use crate::transpose::{narrow_from_f32, widen_to_f32};

use super::StepTimes;

impl ContractionPlan {
    /// One execution of candidate `index` of a half-precision plan (operands checked by the
    /// caller against the storage layouts).
    pub(super) fn execute_half<T: Element>(
        &self,
        index: usize,
        alpha: T,
        inputs: &[StridedView<'_, T>],
        beta: T,
        c: &mut StridedViewMut<'_, T>,
    ) -> Result<StepTimes> {
        if self.storage.is_none() {
            return Err(Error::PlanMismatch(
                "not a half-precision plan: no conversions to run".into(),
            ));
        }
        // A transposition (one operand, no sum) moves the 16-bit elements as they are; scaled
        // elements are computed in f32 and rounded once.
        if self.runs_unconverted() {
            return self.execute_candidate(index, alpha, inputs, beta, c);
        }
        let retain = self.options.workspace_limit.is_none();
        let t0 = Instant::now();
        let mut bufs: Vec<(Workspace<f32>, usize)> = Vec::with_capacity(inputs.len());
        for (v, img) in inputs.iter().zip(&self.inputs) {
            let (mut buf, off) =
                take_aligned::<f32>(img.len(), retain, "an f32 image of an operand")?;
            widen_to_f32(
                v,
                &mut StridedViewMut::from_slice(&mut buf, img.clone(), off)?,
            )?;
            bufs.push((buf, off));
        }
        let (mut cbuf, coff) = take_aligned::<f32>(self.c.len(), retain, "the f32 image of C")?;
        let mut cimg = StridedViewMut::from_slice(&mut cbuf, self.c.clone(), coff)?;
        let beta32 = beta.re() as f32;
        if beta32 != 0.0 {
            widen_to_f32(&c.as_view(), &mut cimg)?;
        }
        let views = bufs
            .iter()
            .zip(&self.inputs)
            .map(|((b, off), img)| StridedView::from_slice(b, img.clone(), *off))
            .collect::<Result<Vec<_>>>()?;
        let widen = t0.elapsed();
        let mut times =
            self.execute_candidate::<f32>(index, alpha.re() as f32, &views, beta32, &mut cimg)?;
        let t = Instant::now();
        narrow_from_f32(&cimg.as_view(), c)?;
        times.convert = widen + t.elapsed();
        Ok(times)
    }
}

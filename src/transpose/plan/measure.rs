//! Measured tuning of a [`TransposePlan`]: candidate plans timed on the real data within a
//! budget, B saved and restored between trials.

use std::time::{Duration, Instant};

use super::*;
use crate::error::Result;
use crate::tensor::{Element, Layout, StridedView, StridedViewMut};

impl TransposePlan {
    /// Plans by measurement: times candidate plans (loop orders, block sizes, block-loop
    /// order, store kind, the tiles' prefetch) on the real operands within `options.tuning`'s budget and keeps the fastest.
    /// Each candidate performs the real operation; with `beta != 0`, B is saved first and
    /// restored before each run, so B ends as after exactly one execution. Falls back to the
    /// heuristic plan when the budget is zero or memory for the copy of B is short.
    pub fn measure<T: Element>(
        perm: &[usize],
        alpha: T,
        a: &StridedView<'_, T>,
        beta: T,
        b: &mut StridedViewMut<'_, T>,
        options: &TransposeOptions,
    ) -> Result<Self> {
        let base = TransposePlan::new(perm, a.layout(), b.layout(), T::DTYPE, options)?;
        let budget = match options.tuning {
            Tuning::Measure { budget } => budget,
            Tuning::Estimate => Duration::ZERO,
        };
        let w = base.isa.width(T::DTYPE);
        // With beta = 0 and the store kind not forced, every variant also runs with the other
        // kind of stores (which one wins depends on the access pattern and, on a shared host,
        // on the memory traffic of the moment).
        let mut kinds = vec![options.streaming];
        if beta.is_exact_zero() && options.streaming.is_none() {
            kinds.push(Some(!base.streams(true)));
        }
        let mut candidates = vec![base.clone()];
        for bias in [0.5, -0.5, 1.5, 100.0] {
            for swap in [false, true] {
                for blk in [
                    None,
                    Some((4 * w, 4 * w)),
                    Some((256 * w, 2 * w)),
                    Some((64 * w, w)),
                ] {
                    for &kind in &kinds {
                        let mut c = base.clone();
                        c.streaming = kind;
                        c.build(bias, options.block.map(|b| (b, b)).or(blk), swap);
                        if !candidates.iter().any(|x| {
                            x.loops == c.loops
                                && x.stream_loops == c.stream_loops
                                && (x.block, x.block_j, x.stream_block_j)
                                    == (c.block, c.block_j, c.stream_block_j)
                                && x.streams(true) == c.streams(true)
                        }) {
                            candidates.push(c);
                        }
                    }
                }
            }
        }
        // With the prefetch not forced, SIMD tile variants also run with the rule's other
        // choice ([`Self::prefetches`]); the base plan's comes second, the others at the end.
        if options.prefetch.is_none() {
            let flipped: Vec<TransposePlan> = candidates
                .iter()
                .filter(|c| matches!(c.kernel, KernelKind::Tile { simd: true, .. }))
                .map(|c| {
                    let mut f = c.clone();
                    f.prefetch = Some(!c.prefetches());
                    f
                })
                .collect();
            let mut rest = flipped.into_iter();
            if let Some(first) = rest.next() {
                candidates.insert(1, first);
            }
            candidates.extend(rest);
        }
        // Save B when runs depend on its old value.
        let dense = Layout::row_major(b.layout().dims())?;
        let saved: Option<Vec<T>> = if beta.is_exact_zero() {
            None
        } else {
            let Ok(mut v) = crate::tensor::zeroed::<T>(dense.len(), "a copy of B") else {
                return Ok(base);
            };
            let mut dst = StridedViewMut::from_slice(&mut v, dense.clone(), 0)?;
            crate::transpose::scale_copy(T::one(), &b.as_view(), T::zero(), &mut dst)?;
            Some(v)
        };
        let restore = |b: &mut StridedViewMut<'_, T>| -> Result<()> {
            if let Some(v) = &saved {
                let src = StridedView::from_slice(v, dense.clone(), 0)?;
                crate::transpose::scale_copy(T::one(), &src, T::zero(), b)?;
            }
            Ok(())
        };
        let start = Instant::now();
        let mut best: Option<(f64, usize)> = None;
        for (k, c) in candidates.iter().enumerate() {
            if k > 0 && start.elapsed() >= budget {
                break;
            }
            restore(b)?;
            let t = Instant::now();
            c.execute(alpha, a, beta, b)?;
            let secs = t.elapsed().as_secs_f64();
            if best.is_none_or(|(s, _)| secs < s) {
                best = Some((secs, k));
            }
        }
        let pick = best.map_or(0, |(_, k)| k);
        if saved.is_some() {
            // Leave B as after exactly one execution of the chosen plan.
            restore(b)?;
            candidates[pick].execute(alpha, a, beta, b)?;
        }
        Ok(candidates.swap_remove(pick))
    }
}

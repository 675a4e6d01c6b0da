//! Refinement from executions: a plan that is executed again and again (the cached plans of
//! `contract`, `einsum` and the Python package) times its first executions of the
//! best-predicted candidates and keeps the fastest, so that a close call the cost models got
//! wrong is corrected by measurement on the caller's own data, machine and load.
//!
//! The schedule: the first execution runs the model's choice; the next ones run each
//! candidate of a small pool (the choice and up to [`ALTERNATIVES`] others predicted within
//! [`PREDICTED_WITHIN`] of it) in turn, for [`ROUNDS`] rounds, skipping in later rounds those
//! already [`PRUNE_ABOVE`] times slower than the best; then the plan settles on the fastest
//! (another candidate only when it was at least [`SWITCH_BELOW`] of the choice's time). Every
//! execution computes the same contraction, so callers get their results throughout; only
//! the summation order, and so the last bits, may differ between the first executions.
//! Executions from several threads at once share the state; one that finds it busy runs the
//! current choice untimed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Other candidates a plan may try besides the model's choice.
pub const ALTERNATIVES: usize = 3;
/// Candidates predicted within this factor of the choice are tried.
pub const PREDICTED_WITHIN: f64 = 1.5;
/// Rounds over the pool.
pub const ROUNDS: usize = 2;
/// After the first round, candidates this much slower than the best are not run again.
pub const PRUNE_ABOVE: f64 = 1.3;
/// Another candidate replaces the choice only when its best time is below this share of the
/// choice's (timing noise of a shared machine).
pub const SWITCH_BELOW: f64 = 0.95;
/// Plans predicted below this many seconds are not refined (their times are mostly noise).
pub const REFINE_MIN_SECONDS: f64 = 5e-6;

static ENABLED: AtomicBool = AtomicBool::new(true);
static FROM_ENV: std::sync::Once = std::sync::Once::new();

/// Whether cached plans refine their choice from their executions (on by default; off with
/// `TTGT_REFINE=0` in the environment or [`set_refinement`]).
///
/// ```
/// let was = ttgt::plan::refinement_enabled();
/// ttgt::plan::set_refinement(false);
/// assert!(!ttgt::plan::refinement_enabled());
/// ttgt::plan::set_refinement(was);
/// ```
pub fn refinement_enabled() -> bool {
    FROM_ENV.call_once(|| {
        if std::env::var("TTGT_REFINE").is_ok_and(|v| v.trim() == "0") {
            ENABLED.store(false, Ordering::Relaxed);
        }
    });
    ENABLED.load(Ordering::Relaxed)
}

/// Turns refinement of cached plans on or off for plans made from now on (plans already cached
/// keep what they had; [`clear_plan_caches`](super::clear_plan_caches) drops them).
pub fn set_refinement(on: bool) {
    FROM_ENV.call_once(|| {});
    ENABLED.store(on, Ordering::Relaxed);
}

/// Where a plan's refinement stands.
#[derive(Clone, Debug, Default)]
struct State {
    /// Candidate indices tried, the model's choice first.
    pool: Vec<usize>,
    /// Best seconds measured per pool entry.
    best: Vec<f64>,
    /// Position in the schedule: 0 is the first execution (the choice, untimed for the
    /// decision), then `ROUNDS` rounds over the pool.
    step: usize,
}

/// No candidate settled on yet.
const UNSETTLED: usize = usize::MAX;

/// The refinement of one plan (no state for plans made without it). The settled choice is
/// read without locking, so executions after refinement cost one atomic load.
#[derive(Debug)]
pub(crate) struct Refinement {
    state: Option<Mutex<State>>,
    settled: AtomicUsize,
}

impl Default for Refinement {
    fn default() -> Self {
        Refinement {
            state: None,
            settled: AtomicUsize::new(UNSETTLED),
        }
    }
}

impl Clone for Refinement {
    fn clone(&self) -> Self {
        Refinement {
            state: self
                .state
                .as_ref()
                .map(|m| Mutex::new(m.lock().unwrap_or_else(|e| e.into_inner()).clone())),
            settled: AtomicUsize::new(self.settled.load(Ordering::Acquire)),
        }
    }
}

/// What one execution should run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pick {
    /// The candidate to run.
    pub index: usize,
    /// Whether its time is to be recorded.
    pub timed: bool,
}

impl Refinement {
    /// A refinement over `predicted` (seconds per candidate, best first) from the choice
    /// `chosen`; none when there is nothing to choose between.
    pub(crate) fn new(predicted: &[f64], chosen: usize) -> Refinement {
        let Some(&p0) = predicted.get(chosen) else {
            return Refinement::default();
        };
        if p0 < REFINE_MIN_SECONDS {
            return Refinement::default();
        }
        let mut pool = vec![chosen];
        pool.extend(
            (0..predicted.len())
                .filter(|&i| i != chosen && predicted[i] <= PREDICTED_WITHIN * p0)
                .take(ALTERNATIVES),
        );
        if pool.len() < 2 {
            return Refinement::default();
        }
        let best = vec![f64::INFINITY; pool.len()];
        Refinement {
            state: Some(Mutex::new(State {
                pool,
                best,
                step: 0,
            })),
            settled: AtomicUsize::new(UNSETTLED),
        }
    }

    /// The candidate the plan runs after refinement, if it has settled.
    pub(crate) fn settled(&self) -> Option<usize> {
        Some(self.settled.load(Ordering::Acquire)).filter(|&i| i != UNSETTLED)
    }

    /// Whether executions may still try other candidates.
    pub(crate) fn active(&self) -> bool {
        self.state.is_some() && self.settled().is_none()
    }

    /// Settles on the fastest of `s`'s pool; returns it.
    fn settle(&self, s: &State) -> usize {
        let choice = settle(s);
        self.settled.store(choice, Ordering::Release);
        choice
    }

    /// Best measured seconds of candidate `index`, if it was tried.
    pub(crate) fn measured(&self, index: usize) -> Option<f64> {
        let s = self.state.as_ref()?.lock().ok()?;
        let k = s.pool.iter().position(|&i| i == index)?;
        Some(s.best[k]).filter(|t| t.is_finite())
    }

    /// What the next execution runs (`fallback`: the choice, when there is no refinement or
    /// its state is busy with another thread).
    pub(crate) fn pick(&self, fallback: usize) -> Pick {
        let untimed = Pick {
            index: fallback,
            timed: false,
        };
        if let Some(i) = self.settled() {
            return Pick {
                index: i,
                timed: false,
            };
        }
        let Some(m) = &self.state else {
            return untimed;
        };
        let Ok(mut s) = m.try_lock() else {
            return untimed;
        };
        if let Some(i) = self.settled() {
            // settled by another thread meanwhile
            return Pick {
                index: i,
                timed: false,
            };
        }
        if s.step == 0 {
            s.step = 1;
            return untimed;
        }
        // rounds over the pool, skipping entries pruned after the first round
        let n = s.pool.len();
        let low = s.best.iter().copied().fold(f64::INFINITY, f64::min);
        while s.step <= ROUNDS * n {
            let k = (s.step - 1) % n;
            let round = (s.step - 1) / n;
            s.step += 1;
            if round > 0 && s.best[k] > PRUNE_ABOVE * low {
                continue;
            }
            return Pick {
                index: s.pool[k],
                timed: true,
            };
        }
        Pick {
            index: self.settle(&s),
            timed: false,
        }
    }

    /// Records the seconds of a timed execution of `index` (`None`: it failed, and is not
    /// tried again).
    pub(crate) fn record(&self, index: usize, seconds: Option<f64>) {
        let Some(m) = &self.state else {
            return;
        };
        let mut s = m.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = s.pool.iter().position(|&i| i == index) {
            s.best[k] = match seconds {
                Some(t) => s.best[k].min(t),
                None => f64::NAN,
            };
        }
        if self.settled().is_none() && s.step > ROUNDS * s.pool.len() {
            self.settle(&s);
        }
    }
}

/// The fastest pool entry, the choice unless another beat it by more than the noise margin;
/// failed entries (NaN) never win.
fn settle(s: &State) -> usize {
    let first = s.best[0];
    let (k, t) = s
        .best
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, t)| t.is_finite())
        .fold(
            (0, f64::INFINITY),
            |a, (k, &t)| if t < a.1 { (k, t) } else { a },
        );
    if k > 0 && (!first.is_finite() || t < SWITCH_BELOW * first) {
        s.pool[k]
    } else {
        s.pool[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the schedule with `time(index)` as each execution's seconds; returns the indices
    /// run, in order, and the settled choice.
    fn drive(r: &Refinement, chosen: usize, time: impl Fn(usize) -> f64) -> (Vec<usize>, usize) {
        let mut ran = Vec::new();
        for _ in 0..40 {
            let p = r.pick(chosen);
            ran.push(p.index);
            if p.timed {
                r.record(p.index, Some(time(p.index)));
            }
            if let Some(s) = r.settled() {
                return (ran, s);
            }
        }
        panic!("never settled: ran {ran:?}");
    }

    #[test]
    fn tries_close_candidates_and_keeps_the_fastest() {
        // candidates 0..5 predicted; 4 and 5 are too far from the choice to be tried
        let r = Refinement::new(&[1e-3, 1.1e-3, 1.2e-3, 1.4e-3, 1.6e-3, 3e-3], 0);
        let (ran, kept) = drive(&r, 0, |i| [1.0, 1.2, 0.5, 2.0, 0.1, 0.1][i]);
        assert_eq!(kept, 2);
        // first the choice untimed, then a round over the pool, then the second round
        // without candidate 3 (2.0 > 1.3 x 0.5) nor 0 and 1 (above 1.3 x 0.5 too)
        assert_eq!(ran[..5], [0, 0, 1, 2, 3]);
        assert!(ran[5..].iter().all(|&i| i == 2), "{ran:?}");
        assert_eq!(
            r.pick(0),
            Pick {
                index: 2,
                timed: false
            }
        );
        assert_eq!(r.measured(2), Some(0.5));
        assert_eq!(r.measured(4), None);
    }

    #[test]
    fn keeps_the_choice_within_the_noise_margin() {
        let r = Refinement::new(&[1e-3, 1e-3], 0);
        let (_, kept) = drive(&r, 0, |i| [1.0, 0.97][i]);
        assert_eq!(kept, 0);
    }

    #[test]
    fn a_failed_candidate_is_never_kept() {
        let r = Refinement::new(&[1e-3, 1e-3, 1e-3], 0);
        let mut ran = Vec::new();
        while r.settled().is_none() {
            let p = r.pick(0);
            ran.push(p.index);
            if p.timed {
                r.record(
                    p.index,
                    if p.index == 1 {
                        None
                    } else {
                        Some(1.0 + p.index as f64)
                    },
                );
            }
            assert!(ran.len() < 40);
        }
        assert_eq!(r.settled(), Some(0));
    }

    #[test]
    fn nothing_to_refine() {
        assert!(!Refinement::new(&[1e-3], 0).active());
        assert!(!Refinement::new(&[1e-3, 5e-3], 0).active()); // the other is too far
        assert!(!Refinement::new(&[1e-7, 1e-7], 0).active()); // too small to time
        assert_eq!(
            Refinement::default().pick(3),
            Pick {
                index: 3,
                timed: false
            }
        );
        assert!(Refinement::new(&[1e-3, 1e-3], 0).active());
    }
}

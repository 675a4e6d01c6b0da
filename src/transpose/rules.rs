//! The transposition engine's host rules, set from the calibrated profile (`ttgt calibrate`
//! measures each on this machine; without a profile the built-in default applies), and the
//! generation counter of the planning rules that the plan caches key on.

use std::sync::atomic::{AtomicU8, Ordering};

use super::kernel::Isa;

/// A host rule of this process, set from the calibrated profile: unset (the built-in
/// default), on or off.
struct HostRule(AtomicU8);

/// Bumped whenever a planning rule or the profile changes: part of the plan caches' keys, so
/// a cached plan is never served after the rules it was made under have changed.
static RULES_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The current generation of the planning rules (see [`bump_rules_generation`]).
pub(crate) fn rules_generation() -> u64 {
    RULES_GENERATION.load(Ordering::Acquire)
}

/// Marks the planning rules as changed: plans cached before are not served again.
pub(crate) fn bump_rules_generation() {
    RULES_GENERATION.fetch_add(1, Ordering::AcqRel);
}

impl HostRule {
    const fn unset() -> Self {
        HostRule(AtomicU8::new(0))
    }

    /// Sets the rule; `true` when that changed it.
    fn set(&self, v: Option<bool>) -> bool {
        let v = match v {
            None => 0,
            Some(true) => 1,
            Some(false) => 2,
        };
        self.0.swap(v, Ordering::Relaxed) != v
    }

    fn get(&self) -> Option<bool> {
        match self.0.load(Ordering::Relaxed) {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        }
    }
}

/// This process's store rule for one-line-run tiles (on: stream).
static LINE_TILE_STORES: HostRule = HostRule::unset();

/// Sets how tiles whose A rows are a single cache line long (e.g. 16 f32, the 16^6
/// permutation set's tiles) store by default when `beta == 0`: `Some(true)` streams them,
/// `Some(false)` uses ordinary stores, `None` restores the built-in default (see
/// [`line_tile_streaming`]). Hosts disagree here, so the calibration measures it
/// (`ttgt calibrate`) and loading a profile ([`crate::model::profile`],
/// [`crate::model::set_profile`]) sets it. Plans made afterwards follow the new rule; plans
/// already made keep theirs; cached plans are made again.
///
/// ```
/// use ttgt::transpose::{line_tile_streaming, set_line_tile_streaming};
/// set_line_tile_streaming(Some(false));
/// assert!(!line_tile_streaming());
/// set_line_tile_streaming(None); // back to the built-in default
/// ```
pub fn set_line_tile_streaming(stream: Option<bool>) {
    if LINE_TILE_STORES.set(stream) {
        bump_rules_generation();
    }
}

/// Whether one-line-run tiles stream by default (see [`set_line_tile_streaming`]). Without
/// a setting: on AVX-512 CPUs yes, else no, as measured on one machine of each kind (see
/// `docs/TUNING.md`).
///
/// ```
/// let _default: bool = ttgt::transpose::line_tile_streaming();
/// ```
pub fn line_tile_streaming() -> bool {
    LINE_TILE_STORES
        .get()
        .unwrap_or_else(|| Isa::detect() == Isa::Avx512)
}

/// This process's rule for streamed scattered-line tiles (on: regroup).
static SCATTER_REGROUP: HostRule = HostRule::unset();

/// Sets whether streamed tiles that would scatter single lines over B (the B-side block loop
/// outermost, one line per B row and visit: full reversals such as `[4,3,2,1,0]`) run the
/// regrouped nest instead ([`super::TransposePlan::regroups_lines`]): `Some(true)` regroups,
/// `Some(false)` keeps the A-stride nest, `None` restores the built-in default (keep).
/// Hosts disagree, so the calibration measures it (`ttgt calibrate`) and loading a profile
/// sets it. Plans made afterwards follow the new rule; plans already made keep theirs; cached
/// plans are made again.
///
/// ```
/// use ttgt::transpose::{scatter_regroup, set_scatter_regroup};
/// set_scatter_regroup(Some(true));
/// assert!(scatter_regroup());
/// set_scatter_regroup(None); // back to the built-in default
/// assert!(!scatter_regroup());
/// ```
pub fn set_scatter_regroup(regroup: Option<bool>) {
    if SCATTER_REGROUP.set(regroup) {
        bump_rules_generation();
    }
}

/// Whether streamed scattered-line tiles run the regrouped nest by default, streamed
/// one-line-row tiles four-line B-side blocks, and long one-thread strips square macro-tiles
/// (see [`set_scatter_regroup`]). Without a setting: no. Machines disagree on this rule, so
/// `ttgt calibrate` measures it (`docs/TUNING.md`).
///
/// ```
/// let _default: bool = ttgt::transpose::scatter_regroup();
/// ```
pub fn scatter_regroup() -> bool {
    SCATTER_REGROUP.get().unwrap_or(false)
}

/// This process's prefetch rule for tiles whose A rows are far apart (on: prefetch them).
static FAR_ROW_PREFETCH: HostRule = HostRule::unset();

/// Sets whether SIMD tiles prefetch even where the innermost repeating loop continues the same
/// A rows and those rows are a page or more apart (each row then a stream of its own that
/// the hardware prefetchers may follow; [`super::TransposePlan::prefetches`]): `Some(true)`
/// prefetches them, `Some(false)` leaves them to the hardware, `None` restores the built-in
/// default (leave them). Hosts disagree, so the calibration measures it (`ttgt calibrate`)
/// and loading a profile sets it. Plans made afterwards follow the new rule; plans already
/// made keep theirs; cached plans are made again.
///
/// ```
/// use ttgt::transpose::{far_row_prefetch, set_far_row_prefetch};
/// set_far_row_prefetch(Some(true));
/// assert!(far_row_prefetch());
/// set_far_row_prefetch(None); // back to the built-in default
/// assert!(!far_row_prefetch());
/// ```
pub fn set_far_row_prefetch(prefetch: Option<bool>) {
    if FAR_ROW_PREFETCH.set(prefetch) {
        bump_rules_generation();
    }
}

/// The three rules as the profile loaded on first use states them, without marking cached
/// plans stale: a small call may be planned and cached before the profile is read (small
/// plans do not wait for it), and re-planning it on the next call would cost more than the
/// rule can gain.
pub(crate) fn load_rules(line_tile: Option<bool>, regroup: Option<bool>, prefetch: Option<bool>) {
    LINE_TILE_STORES.set(line_tile);
    SCATTER_REGROUP.set(regroup);
    FAR_ROW_PREFETCH.set(prefetch);
}

/// Whether SIMD tiles whose continued A rows are a page or more apart prefetch by default
/// (see [`set_far_row_prefetch`]). Without a setting: no. It helps on some machines and costs
/// on others, so `ttgt calibrate` measures it (`docs/TUNING.md`).
///
/// ```
/// let _default: bool = ttgt::transpose::far_row_prefetch();
/// ```
pub fn far_row_prefetch() -> bool {
    FAR_ROW_PREFETCH.get().unwrap_or(false)
}

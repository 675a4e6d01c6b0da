//! A bounded cache of contraction plans keyed by spec, operand layouts, element type and
//! options, so that a repeated `contract()` call plans once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::contraction::ContractionPlan;
use super::enumerate::Scope;
use super::options::PlanOptions;
use super::path::{ContractionPath, PathOptions};
use crate::bounded_cache::{cached, hash_of, BoundedCache};
use crate::error::Result;
use crate::tensor::{DType, Layout};

/// Plans kept (least recently inserted ones are dropped first).
pub const CONTRACTION_CACHE_CAPACITY: usize = 256;

/// Spec, layouts, dtype, options, the thread count the options resolve to here, and whether
/// the call comes from outside a pool of that size with the count left open.
type Key = (
    String,
    Vec<Layout>,
    Layout,
    DType,
    PlanOptions,
    usize,
    bool,
    u64,
);

/// A cached plan and how often a lookup found it (counted while it has not searched every
/// candidate).
#[derive(Clone)]
struct Entry {
    plan: Arc<ContractionPlan>,
    hits: Arc<AtomicUsize>,
}

/// A plan made by a quick search is planned again, fully, on this lookup that finds it.
/// Rationale: by then the calls have shown they repeat, and a full search (100-300 µs) costs
/// a few of the calls it may speed up (`docs/TUNING.md`).
pub const FULL_SEARCH_ON_HIT: usize = 8;

type Cache = BoundedCache<Key, Entry>;

fn cache() -> &'static Mutex<Cache> {
    static C: OnceLock<Mutex<Cache>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(BoundedCache::new(CONTRACTION_CACHE_CAPACITY)))
}

/// The plan for `spec` on these layouts, from the cache or made (and cached) now. Plans made
/// with [`PlanTuning::Measure`](super::PlanTuning::Measure) are cached as their estimate until
/// measured by the caller; the others refine their choice from their first executions
/// ([`ContractionPlan::refine_from_executions`]) unless
/// [`set_refinement`](super::set_refinement)`(false)` or `TTGT_REFINE=0`.
///
/// ```
/// use ttgt::{DType, Layout, plan::{cached_contraction_plan, PlanOptions}};
/// let r = |d: &[usize]| Layout::row_major(d).unwrap();
/// let o = PlanOptions::default();
/// let p1 = cached_contraction_plan("ij,jk->ik", &[r(&[3, 4]), r(&[4, 5])], &r(&[3, 5]), DType::F32, &o).unwrap();
/// let p2 = cached_contraction_plan("ij,jk->ik", &[r(&[3, 4]), r(&[4, 5])], &r(&[3, 5]), DType::F32, &o).unwrap();
/// assert!(std::sync::Arc::ptr_eq(&p1, &p2));
/// ```
pub fn cached_contraction_plan(
    spec: &str,
    inputs: &[Layout],
    c: &Layout,
    dtype: DType,
    options: &PlanOptions,
) -> Result<Arc<ContractionPlan>> {
    let threads = crate::threads::resolve(options.threads)?;
    // whether the small-work rule may apply: part of the key, so a hit needs one lookup
    let outside = options.threads.is_none() && crate::transpose::wakes_threads(threads);
    // the generation of the planning rules and profile: a change makes every plan again
    let rules = crate::transpose::rules_generation();
    let hash = hash_of(&(spec, inputs, c, dtype, options, threads, outside, rules));
    let same = |k: &Key| {
        k.0 == spec
            && k.1 == inputs
            && k.2 == *c
            && k.3 == dtype
            && k.4 == *options
            && k.5 == threads
            && k.6 == outside
            && k.7 == rules
    };
    let made = |scope| -> Result<Arc<ContractionPlan>> {
        let mut plan = plan_at(spec, inputs, c, dtype, options, threads, outside, scope)?;
        // a plan called again and again refines its choice from its first executions
        if super::refinement_enabled() && options.tuning == super::PlanTuning::Estimate {
            plan.refine_from_executions();
        }
        Ok(Arc::new(plan))
    };
    // a quick first plan is replaced by a full one after a few calls: only where the plan
    // may change its choice anyway (refinement on), so that `TTGT_REFINE=0` keeps one plan
    let first = if super::refinement_enabled() {
        Scope::Quick
    } else {
        Scope::Full
    };
    let entry = cached(cache(), hash, same, || {
        let plan = made(first)?;
        let key = (
            spec.to_string(),
            inputs.to_vec(),
            c.clone(),
            dtype,
            options.clone(),
            threads,
            outside,
            rules,
        );
        let hits = Arc::new(AtomicUsize::new(0));
        Ok((key, Entry { plan, hits }))
    })?;
    if entry.plan.searched_fully()
        || entry.hits.fetch_add(1, Ordering::Relaxed) + 1 != FULL_SEARCH_ON_HIT
    {
        return Ok(entry.plan);
    }
    // called repeatedly: planned again with every candidate, in place of the quick plan (a
    // full search that fails keeps the quick plan, which has run: the call need not fail)
    let Ok(plan) = made(Scope::Full) else {
        return Ok(entry.plan);
    };
    let full = Entry {
        plan: plan.clone(),
        hits: entry.hits,
    };
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .replace(hash, same, full);
    Ok(plan)
}

/// The plan a call makes at `threads`, on one thread instead where the small-work rule
/// applies (`outside`: called from outside a pool of that size with the count left open).
#[allow(clippy::too_many_arguments)]
fn plan_at(
    spec: &str,
    inputs: &[Layout],
    c: &Layout,
    dtype: DType,
    options: &PlanOptions,
    threads: usize,
    outside: bool,
    scope: Scope,
) -> Result<ContractionPlan> {
    let planned = |threads| {
        let o = PlanOptions {
            threads: Some(threads),
            ..options.clone()
        };
        ContractionPlan::with_scope(spec, inputs, c, dtype, &o, scope)
    };
    if !outside || threads == 1 || !may_be_small(spec, inputs, dtype) {
        return planned(threads);
    }
    // Planned on one thread first: work predicted below the rule's bound there keeps that
    // plan without planning again (most calls the rule applies to plan once).
    let one = planned(1)?;
    if one.predicted_seconds() < SINGLE_THREAD_BELOW_SECONDS {
        return Ok(one);
    }
    let plan = planned(threads)?;
    Ok(if better_on_one_thread(&plan) {
        one
    } else {
        plan
    })
}

/// Double-precision FLOPs per second no single core reaches (twice that in single
/// precision). Rationale: two 512-bit FMA pipes at 3.9 GHz give 125 GFLOP/s.
const SINGLE_CORE_F64_FLOPS_ABOVE: f64 = 1.25e11;

/// FLOPs per second of `dtype` no single core reaches: work of more FLOPs than this rate
/// does in some time takes longer on one core.
pub(super) fn single_core_flops_above(dtype: DType) -> f64 {
    match dtype {
        DType::F64 | DType::C64 => SINGLE_CORE_F64_FLOPS_ABOVE,
        _ => 2.0 * SINGLE_CORE_F64_FLOPS_ABOVE,
    }
}

/// Whether the contraction's FLOPs leave the small-work rule possible (errors are left to
/// the planner, which reports them).
fn may_be_small(spec: &str, inputs: &[Layout], dtype: DType) -> bool {
    let shapes: Vec<&[usize]> = inputs.iter().map(|l| l.dims()).collect();
    let flops = crate::einsum::parse(spec)
        .and_then(|p| p.bind(&shapes))
        .and_then(|b| b.classify())
        .map_or(0.0, |c| c.flops(dtype));
    flops < SINGLE_THREAD_BELOW_SECONDS * single_core_flops_above(dtype)
}

/// The plan [`cached_contraction_plan`] would make for these arguments, made now and not
/// cached (the path search prices candidate steps with it).
pub(crate) fn plan_as_called(
    spec: &str,
    inputs: &[Layout],
    c: &Layout,
    dtype: DType,
    options: &PlanOptions,
) -> Result<ContractionPlan> {
    let threads = crate::threads::resolve(options.threads)?;
    let outside = options.threads.is_none() && crate::transpose::wakes_threads(threads);
    plan_at(
        spec,
        inputs,
        c,
        dtype,
        options,
        threads,
        outside,
        Scope::Full,
    )
}

/// Paths kept (least recently inserted ones are dropped first).
pub const PATH_CACHE_CAPACITY: usize = 64;

/// Spec, operand shapes, options, the thread count they resolve to and the rules' generation.
type PathKey = (String, Vec<Vec<usize>>, PathOptions, usize, u64);

fn path_cache() -> &'static Mutex<BoundedCache<PathKey, Arc<ContractionPath>>> {
    static C: OnceLock<Mutex<BoundedCache<PathKey, Arc<ContractionPath>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(BoundedCache::new(PATH_CACHE_CAPACITY)))
}

/// The path [`crate::einsum_path`] finds for these arguments, from the cache or found (and
/// cached) now: an einsum of three or more operands called again with the same shapes
/// searches its path once.
///
/// ```
/// use ttgt::plan::{cached_path, PathOptions};
/// let s: [&[usize]; 3] = [&[4, 5], &[5, 6], &[6, 7]];
/// let p1 = cached_path("ab,bc,cd->ad", &s, &PathOptions::default()).unwrap();
/// let p2 = cached_path("ab,bc,cd->ad", &s, &PathOptions::default()).unwrap();
/// assert!(std::sync::Arc::ptr_eq(&p1, &p2));
/// ```
pub fn cached_path(
    spec: &str,
    shapes: &[&[usize]],
    options: &PathOptions,
) -> Result<Arc<ContractionPath>> {
    let threads = crate::threads::resolve(options.threads)?;
    let rules = crate::transpose::rules_generation();
    let hash = hash_of(&(spec, shapes, options, threads, rules));
    let same = |k: &PathKey| {
        k.0 == spec
            && k.1.len() == shapes.len()
            && k.1.iter().zip(shapes).all(|(a, b)| a.as_slice() == *b)
            && k.2 == *options
            && k.3 == threads
            && k.4 == rules
    };
    cached(path_cache(), hash, same, || {
        let bound = crate::einsum::parse(spec)?.bind(shapes)?;
        let path = ContractionPath::new(&bound, options)?;
        let key = (
            spec.to_string(),
            shapes.iter().map(|s| s.to_vec()).collect(),
            options.clone(),
            threads,
            rules,
        );
        Ok((key, Arc::new(path)))
    })
}

/// Drops every cached contraction plan and transposition plan, so that the next call of
/// each shape plans again (what a first call costs).
///
/// ```
/// ttgt::plan::clear_plan_caches();
/// ```
pub fn clear_plan_caches() {
    cache().lock().unwrap_or_else(|e| e.into_inner()).clear();
    path_cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    crate::transpose::clear_plan_cache();
}

/// Work predicted below this, at a plan's thread count, runs on one thread when the call
/// comes from outside a rayon pool of that size and its options leave the count open.
/// Rationale: below it, waking the workers and competing with the caller's own threads cost
/// more than the second thread saves (measurements: `docs/TUNING.md`).
pub const SINGLE_THREAD_BELOW_SECONDS: f64 = 4e-4;

/// Whether `plan`, made for several threads, predicts less than
/// [`SINGLE_THREAD_BELOW_SECONDS`] and would be entered from outside a pool of its size.
///
/// ```
/// use ttgt::{ContractionPlan, DType, Layout, plan::{better_on_one_thread, PlanOptions}};
/// let r = |d: &[usize]| Layout::row_major(d).unwrap();
/// let o = PlanOptions { threads: Some(2), ..Default::default() };
/// let p = ContractionPlan::with_options("ij,jk->ik", &[r(&[8, 8]), r(&[8, 8])], &r(&[8, 8]), DType::F64, &o).unwrap();
/// assert!(better_on_one_thread(&p));
/// ```
pub fn better_on_one_thread(plan: &ContractionPlan) -> bool {
    plan.threads() > 1
        && plan.predicted_seconds() < SINGLE_THREAD_BELOW_SECONDS
        && crate::transpose::wakes_threads(plan.threads())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::with_threads;

    fn plan(n: usize, threads: usize) -> Arc<ContractionPlan> {
        let r = |d: &[usize]| Layout::row_major(d).unwrap();
        let o = PlanOptions::default();
        with_threads(threads, || {
            cached_contraction_plan(
                "ij,jk->ik",
                &[r(&[n, n]), r(&[n, n])],
                &r(&[n, n]),
                DType::F64,
                &o,
            )
            .unwrap()
        })
    }

    #[test]
    fn plans_are_cached_per_resolved_thread_count() {
        // 2 GFLOP: several milliseconds on any machine, so not moved to one thread
        let (one, two) = (plan(1000, 1), plan(1000, 2));
        assert_eq!((one.threads(), two.threads()), (1, 2));
        assert!(Arc::ptr_eq(&two, &plan(1000, 2)));
        assert!(!Arc::ptr_eq(&one, &two));
    }

    #[test]
    fn a_quick_plan_is_searched_fully_once_it_repeats() {
        // tiny work whose M group has two orders (A's and C's): a quick search on the first
        // call considers one
        let r = |d: &[usize]| Layout::row_major(d).unwrap();
        let (l, lc) = ([r(&[11, 12, 13]), r(&[13, 14])], r(&[12, 11, 14]));
        let o = PlanOptions::default();
        let get = || {
            with_threads(1, || {
                cached_contraction_plan("bac,cd->abd", &l, &lc, DType::F64, &o).unwrap()
            })
        };
        let first = get();
        if !crate::plan::refinement_enabled() {
            // (`TTGT_REFINE=0`: one plan, searched fully from the first call)
            assert!(first.searched_fully());
            return;
        }
        assert!(!first.searched_fully());
        let one = PlanOptions {
            threads: Some(1),
            ..Default::default()
        };
        let direct =
            ContractionPlan::with_options("bac,cd->abd", &l, &lc, DType::F64, &one).unwrap();
        assert!(direct.searched_fully());
        assert!(first.candidates().len() < direct.candidates().len());
        // (another test may clear the cache meanwhile: the count then starts again)
        let full = (0..4 * FULL_SEARCH_ON_HIT)
            .map(|_| get())
            .find(|p| p.searched_fully())
            .expect("a full search after repeated calls");
        assert_eq!(full.candidates().len(), direct.candidates().len());
        assert!((0..100).any(|_| Arc::ptr_eq(&full, &get())));
    }

    #[test]
    fn small_work_from_outside_a_pool_runs_on_one_thread() {
        assert!(crate::transpose::wakes_threads(2));
        assert_eq!(plan(8, 2).threads(), 1);
        let inside = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        assert_eq!(inside.install(|| plan(8, 2).threads()), 2);
    }
}

//! A bounded cache of contraction plans keyed by spec, operand layouts, element type and
//! options, so that a repeated `contract()` call plans once.

use std::sync::{Arc, Mutex, OnceLock};

use super::contraction::ContractionPlan;
use super::options::PlanOptions;
use crate::bounded_cache::{cached, hash_of, BoundedCache};
use crate::error::Result;
use crate::tensor::{DType, Layout};

/// Plans kept (least recently inserted ones are dropped first).
pub const CONTRACTION_CACHE_CAPACITY: usize = 256;

/// Spec, layouts, dtype, options and the thread count the options resolve to here.
type Key = (String, Vec<Layout>, Layout, DType, PlanOptions, usize);

type Cache = BoundedCache<Key, Arc<ContractionPlan>>;

fn cache() -> &'static Mutex<Cache> {
    static C: OnceLock<Mutex<Cache>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(BoundedCache::new(CONTRACTION_CACHE_CAPACITY)))
}

/// The plan for `spec` on these layouts, from the cache or made (and cached) now. Plans made
/// with [`PlanTuning::Measure`](super::PlanTuning::Measure) are cached as their estimate until
/// measured by the caller.
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
    let threads = options
        .threads
        .unwrap_or_else(crate::threads::default_threads);
    // a hit builds no key: the hash and the comparison read the borrowed parts
    let hash = hash_of(&(spec, inputs, c, dtype, options, threads));
    let same = |k: &Key| {
        k.0 == spec
            && k.1 == inputs
            && k.2 == *c
            && k.3 == dtype
            && k.4 == *options
            && k.5 == threads
    };
    cached(cache(), hash, same, || {
        let plan = ContractionPlan::with_options(spec, inputs, c, dtype, options)?;
        let key = (
            spec.to_string(),
            inputs.to_vec(),
            c.clone(),
            dtype,
            options.clone(),
            threads,
        );
        Ok((key, Arc::new(plan)))
    })
}

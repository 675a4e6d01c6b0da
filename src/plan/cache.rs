//! A bounded cache of contraction plans keyed by spec, operand layouts, element type and
//! options, so that a repeated `contract()` call plans once.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::contraction::ContractionPlan;
use super::options::PlanOptions;
use crate::error::Result;
use crate::tensor::{DType, Layout};

/// Plans kept (least recently inserted ones are dropped first).
pub const CONTRACTION_CACHE_CAPACITY: usize = 256;

/// Spec, layouts, dtype, options and the thread count the options resolve to here.
type Key = (String, Vec<Layout>, Layout, DType, PlanOptions, usize);

#[derive(Default)]
struct Cache {
    map: HashMap<Key, Arc<ContractionPlan>>,
    order: VecDeque<Key>,
}

fn cache() -> &'static Mutex<Cache> {
    static C: OnceLock<Mutex<Cache>> = OnceLock::new();
    C.get_or_init(Default::default)
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
    let key: Key = (
        spec.to_string(),
        inputs.to_vec(),
        c.clone(),
        dtype,
        options.clone(),
        options
            .threads
            .unwrap_or_else(crate::threads::default_threads),
    );
    if let Some(p) = cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map
        .get(&key)
    {
        return Ok(p.clone());
    }
    let plan = Arc::new(ContractionPlan::with_options(
        spec, inputs, c, dtype, options,
    )?);
    let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
    if c.map.insert(key.clone(), plan.clone()).is_none() {
        c.order.push_back(key);
        while c.order.len() > CONTRACTION_CACHE_CAPACITY {
            if let Some(old) = c.order.pop_front() {
                c.map.remove(&old);
            }
        }
    }
    Ok(plan)
}

//! A bounded cache of heuristic transposition plans keyed by permutation, layouts, element
//! type and options, so repeated one-shot calls do not re-plan.

use std::sync::{Arc, Mutex, OnceLock};

use super::plan::{TransposeOptions, TransposePlan};
use crate::bounded_cache::{cached, hash_of, BoundedCache};
use crate::error::Result;
use crate::tensor::{DType, Element, Layout, StridedView, StridedViewMut};

/// Plans kept by [`cached_plan`]; the oldest is evicted first.
pub const PLAN_CACHE_CAPACITY: usize = 256;

/// Permutation, layouts, dtype, options, the thread count the options resolve to here and
/// the generation of the planning rules (`set_*` rules, profile) the plan was made under.
type Key = (
    Vec<usize>,
    Layout,
    Layout,
    DType,
    TransposeOptions,
    usize,
    u64,
);

type Cache = BoundedCache<Key, Arc<TransposePlan>>;

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(BoundedCache::new(PLAN_CACHE_CAPACITY)))
}

/// Drops every cached transposition plan (the next call of each shape plans again).
///
/// ```
/// ttgt::transpose::clear_plan_cache();
/// ```
pub fn clear_plan_cache() {
    cache().lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The heuristic plan for these arguments, from the cache or made and stored.
///
/// ```
/// use ttgt::{Layout, DType, transpose::{cached_plan, TransposeOptions}};
/// let l = Layout::row_major(&[30, 40]).unwrap();
/// let t = Layout::row_major(&[40, 30]).unwrap();
/// let p1 = cached_plan(&[1, 0], &l, &t, DType::F64, &TransposeOptions::default()).unwrap();
/// let p2 = cached_plan(&[1, 0], &l, &t, DType::F64, &TransposeOptions::default()).unwrap();
/// assert!(std::sync::Arc::ptr_eq(&p1, &p2));
/// ```
pub fn cached_plan(
    perm: &[usize],
    a: &Layout,
    b: &Layout,
    dtype: DType,
    options: &TransposeOptions,
) -> Result<Arc<TransposePlan>> {
    let threads = crate::threads::resolve(options.threads)?;
    let rules = super::rules_generation();
    // a hit builds no key: the hash and the comparison read the borrowed parts
    let hash = hash_of(&(perm, a, b, dtype, options, threads, rules));
    let same = |k: &Key| {
        k.0 == perm
            && k.1 == *a
            && k.2 == *b
            && k.3 == dtype
            && k.4 == *options
            && k.5 == threads
            && k.6 == rules
    };
    cached(cache(), hash, same, || {
        let plan = TransposePlan::new(perm, a, b, dtype, options)?;
        let key = (
            perm.to_vec(),
            a.clone(),
            b.clone(),
            dtype,
            options.clone(),
            threads,
            rules,
        );
        Ok((key, Arc::new(plan)))
    })
}

/// `B = alpha * perm(A) + beta * B` through a cached heuristic plan.
///
/// ```
/// use ttgt::tensor::{StridedView, StridedViewMut};
/// let a = ndarray::Array2::<f64>::from_shape_fn((3, 5), |(i, j)| (10 * i + j) as f64);
/// let mut b = ndarray::Array2::<f64>::zeros((5, 3));
/// ttgt::transpose::transpose(&[1, 0], 1.0, &StridedView::of(&a), 0.0,
///                            &mut StridedViewMut::of(&mut b).unwrap()).unwrap();
/// assert_eq!(b, a.t());
/// ```
pub fn transpose<T: Element>(
    perm: &[usize],
    alpha: T,
    a: &StridedView<'_, T>,
    beta: T,
    b: &mut StridedViewMut<'_, T>,
) -> Result<()> {
    let plan = cached_plan(
        perm,
        a.layout(),
        b.layout(),
        T::DTYPE,
        &TransposeOptions::default(),
    )?;
    plan.execute(alpha, a, beta, b)
}

//! Property tests: every fast path (`contract`, `contract_into`, `einsum`, `einsum_unary`,
//! `einsum_unary_into`, `permute`, `permute_into`, `ContractionPlan::new` + `execute`) against
//! the reference engine, for random specs (all index classes, diagonals, traces, `...`
//! broadcasting, three operands), random strided operands (steps, negative strides, padding,
//! permuted axes, zero-stride broadcasts), strided outputs inside a bigger array, random
//! alpha/beta (exact 0 and 1 included; NaN-filled C when beta == 0), in all six element types
//! (f16 and bf16 against the exact value rounded once, within their storage roundings).

mod common;

use std::collections::BTreeMap;

use common::{check_close, check_into, scalar, view_recipe, Built, Tol, ViewRecipe};
use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, IxDyn};
use num_complex::{Complex32, Complex64};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use ttgt::plan::{PlanOptions, PlanTuning};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, Element, Layout};

/// Upper bound on the iteration points of a case (product of the non-zero extents), and on
/// the number of elements of any operand or output.
const MAX_POINTS: usize = 20_000;

/// Letters in a scrambled order, so that label numbering and ASCII order disagree.
const POOL: &str = "qWeRtyuIopAsdFghjKlzXcvBnmQwErTYUiOPaSDfGHJkLZxCVbNM";

/// `cases` proptest cases, times `TTGT_PROPTEST_MULT` when set (for longer soak runs).
fn config(cases: u32) -> ProptestConfig {
    let mult: u32 = std::env::var("TTGT_PROPTEST_MULT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    ProptestConfig {
        cases: cases.saturating_mul(mult),
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..ProptestConfig::default()
    }
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

fn letters() -> impl Strategy<Value = Vec<char>> {
    prop::sample::subsequence(POOL.chars().collect::<Vec<_>>(), 8)
}

/// An extent in 0..=max, zero rarely.
fn extent(max: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 30 => 1usize..=max]
}

/// An extent that is usually small (0 rarely) and sometimes large enough to cross the tile
/// sizes of blocked kernels (the iteration-space cap then shrinks the largest extents).
fn extent_wide() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 24 => 1usize..=6, 5 => 7usize..=40]
}

fn scalar_of<T: Element>(s: (f64, f64)) -> T {
    T::from_parts(s.0, s.1)
}

fn product_nonzero<'a>(e: impl Iterator<Item = &'a usize>) -> usize {
    e.fold(1usize, |acc, &x| acc.saturating_mul(x.max(1)))
}

/// Shrinks the largest extents until the iteration space and every operand (`terms`, with
/// repeated letters) hold at most `MAX_POINTS` points.
fn cap_extents(ext: &mut BTreeMap<char, usize>, terms: &[&[char]]) {
    loop {
        let points = product_nonzero(ext.values());
        let biggest = terms
            .iter()
            .map(|t| product_nonzero(t.iter().map(|c| &ext[c])))
            .max()
            .unwrap_or(1);
        if points.max(biggest) <= MAX_POINTS {
            return;
        }
        let Some((&c, _)) = ext.iter().max_by_key(|(_, &e)| e) else {
            return;
        };
        if let Some(e) = ext.get_mut(&c) {
            *e -= 1;
        }
    }
}

fn sorted_letters(mut v: Vec<(u8, char)>) -> Vec<char> {
    v.sort_by_key(|&(k, _)| k);
    v.into_iter().map(|(_, c)| c).collect()
}

fn text(v: &[char]) -> String {
    v.iter().collect()
}

/// Builds the strided operands of `recipes` (storage, slicing, permutation, broadcast) and
/// hands them to `f`.
fn with_views<T: Element, R>(
    dims: &[Vec<usize>],
    recipes: &[ViewRecipe],
    seed: u64,
    f: impl FnOnce(&[ArrayViewD<'_, T>]) -> R,
) -> R {
    let built: Vec<Built> = dims
        .iter()
        .zip(recipes)
        .map(|(d, r)| r.build(d, true))
        .collect();
    let stores: Vec<ArrayD<T>> = built
        .iter()
        .enumerate()
        .map(|(k, b)| b.storage(seed.wrapping_add(k as u64)))
        .collect();
    let raw: Vec<ArrayViewD<'_, T>> = built.iter().zip(&stores).map(|(b, s)| b.view(s)).collect();
    let views: Vec<ArrayViewD<'_, T>> = raw
        .iter()
        .zip(dims)
        .map(|(v, d)| v.broadcast(IxDyn(d)).expect("recipe broadcasts"))
        .collect();
    f(&views)
}

// ---------------------------------------------------------------------------------------
// Runners: one per operand count, each exercising every entry point for that count.

fn reference<T: Element>(
    spec: &str,
    ops: &[ArrayViewD<'_, T>],
) -> Result<ArrayD<T>, TestCaseError> {
    ttgt::reference::einsum(spec, ops).map_err(|e| fail(format!("reference {spec:?}: {e}")))
}

fn run_unary<T: Element>(
    spec: &str,
    a: &ArrayViewD<'_, T>,
    rc: &ViewRecipe,
    alpha: T,
    beta: T,
    seed: u64,
) -> Result<(), TestCaseError> {
    let ac = a.to_owned();
    let want = reference(spec, &[ac.view()])?;
    let tol = Tol::new(spec, &[ac.view()]);
    let got = ttgt::einsum_unary(spec, a).map_err(|e| fail(format!("einsum_unary: {e}")))?;
    check_close("einsum_unary", &got.view(), &want, &tol).map_err(fail)?;
    let got = ttgt::einsum(spec, &[a.view()]).map_err(|e| fail(format!("einsum: {e}")))?;
    check_close("einsum (1 operand)", &got.view(), &want, &tol).map_err(fail)?;
    check_into(
        "einsum_unary_into",
        rc,
        seed,
        alpha,
        beta,
        &want,
        &tol,
        |c| ttgt::einsum_unary_into(spec, alpha, a, beta, c),
    )
    .map_err(fail)?;
    check_into(
        "ContractionPlan::execute (1 operand)",
        rc,
        seed ^ 0x55,
        alpha,
        beta,
        &want,
        &tol,
        |c| {
            let plan = ContractionPlan::new(spec, &[Layout::of(a)], &Layout::of(c), T::DTYPE)?;
            let mut cv = StridedViewMut::of(c)?;
            plan.execute(alpha, &[StridedView::of(a)], beta, &mut cv)?;
            Ok(())
        },
    )
    .map_err(fail)
}

fn run_binary<T: Element>(
    spec: &str,
    a: &ArrayViewD<'_, T>,
    b: &ArrayViewD<'_, T>,
    rc: &ViewRecipe,
    alpha: T,
    beta: T,
    seed: u64,
) -> Result<(), TestCaseError> {
    let (ac, bc) = (a.to_owned(), b.to_owned());
    let want = reference(spec, &[ac.view(), bc.view()])?;
    let tol = Tol::new(spec, &[ac.view(), bc.view()]);
    let got = ttgt::contract(spec, a, b).map_err(|e| fail(format!("contract: {e}")))?;
    check_close("contract", &got.view(), &want, &tol).map_err(fail)?;
    let got =
        ttgt::einsum(spec, &[a.view(), b.view()]).map_err(|e| fail(format!("einsum: {e}")))?;
    check_close("einsum (2 operands)", &got.view(), &want, &tol).map_err(fail)?;
    check_into("contract_into", rc, seed, alpha, beta, &want, &tol, |c| {
        ttgt::contract_into(spec, alpha, a, b, beta, c)
    })
    .map_err(fail)?;
    check_into(
        "ContractionPlan::execute (2 operands)",
        rc,
        seed ^ 0x55,
        alpha,
        beta,
        &want,
        &tol,
        |c| {
            let plan = ContractionPlan::new(
                spec,
                &[Layout::of(a), Layout::of(b)],
                &Layout::of(c),
                T::DTYPE,
            )?;
            let mut cv = StridedViewMut::of(c)?;
            let ins = [StridedView::of(a), StridedView::of(b)];
            plan.execute(alpha, &ins, beta, &mut cv)?;
            Ok(())
        },
    )
    .map_err(fail)?;
    run_candidates(spec, a, b, rc, alpha, beta, seed, &want, &tol)
}

/// Every kind of candidate the planner lists (direct GEMM, TTGT, loop-over-GEMM with
/// batch-reduce, mixtures; each GEMM library; serial and parallel loops), forced one at a
/// time (at most 16 per case, spread over the list), in-place and tiled write-backs, and the
/// choice under a random workspace limit.
#[allow(clippy::too_many_arguments)]
fn run_candidates<T: Element>(
    spec: &str,
    a: &ArrayViewD<'_, T>,
    b: &ArrayViewD<'_, T>,
    rc: &ViewRecipe,
    alpha: T,
    beta: T,
    seed: u64,
    want: &ArrayD<T>,
    tol: &Tol,
) -> Result<(), TestCaseError> {
    let plan_for = |c: &ArrayViewMutD<'_, T>, o: &PlanOptions| {
        ContractionPlan::with_options(
            spec,
            &[Layout::of(a), Layout::of(b)],
            &Layout::of(c),
            T::DTYPE,
            o,
        )
    };
    let built = rc.build(want.shape(), false);
    let mut probe_store: ArrayD<T> = built.storage(0);
    // measured tuning: every candidate is listed (the models alone plan the smallest
    // contractions as nested loops without pricing the others)
    let opts = PlanOptions {
        threads: Some(1 + (seed % 3) as usize),
        tuning: PlanTuning::Measure {
            budget: std::time::Duration::ZERO,
        },
        ..Default::default()
    };
    let n = plan_for(&built.view_mut(&mut probe_store), &opts)
        .map_err(|e| fail(format!("plan: {e}")))?
        .candidates()
        .len();
    // Candidate `i` of the plan made with `o`, run into `c`.
    let forced = |c: &mut ArrayViewMutD<'_, T>, o: &PlanOptions, i: usize| {
        let mut plan = plan_for(c, o)?;
        plan.choose(i)?;
        let what = plan.chosen().map(|c| c.summary()).unwrap_or_default();
        let mut cv = StridedViewMut::of(c)?;
        let ins = [StridedView::of(a), StridedView::of(b)];
        plan.execute(alpha, &ins, beta, &mut cv)
            .map_err(|e| ttgt::Error::Unsupported(format!("{what}: {e}")))
            .map(|_| ())
    };
    let step = n.div_ceil(16).max(1);
    let picks: Vec<usize> = (0..n).step_by(step).chain([n - 1]).collect();
    for i in picks {
        check_into(
            &format!("candidate {i} of {n}"),
            rc,
            seed ^ i as u64,
            alpha,
            beta,
            want,
            tol,
            |c| forced(c, &opts, i),
        )
        .map_err(fail)?;
    }
    // With no room for a temporary C, in-place write-backs (C dense in any axis order).
    let tight = PlanOptions {
        workspace_limit: Some(want.len() * T::DTYPE.size_bytes() / 2),
        ..opts.clone()
    };
    let in_place: Vec<usize> = match plan_for(&built.view_mut(&mut probe_store), &tight) {
        Ok(p) => (0..p.candidates().len())
            .filter(|&i| p.candidates()[i].c_in_place.is_some())
            .take(4)
            .collect(),
        Err(_) => Vec::new(),
    };
    for i in in_place {
        check_into(
            &format!("in-place candidate {i}"),
            rc,
            seed ^ 0x99 ^ i as u64,
            alpha,
            beta,
            want,
            tol,
            |c| {
                let mut plan = plan_for(c, &tight)?;
                plan.choose(i)?;
                let mut cv = StridedViewMut::of(c)?;
                let ins = [StridedView::of(a), StridedView::of(b)];
                plan.execute(alpha, &ins, beta, &mut cv)?;
                Ok(())
            },
        )
        .map_err(fail)?;
    }
    // Tiled write-backs (C computed block by block into a buffer, each block transposed
    // into C), with blocks small enough that these small tensors have many of them.
    let tiled_opts = PlanOptions {
        tile_bytes: Some(T::DTYPE.size_bytes() * (2 + (seed % 24) as usize)),
        ..opts.clone()
    };
    let tiled: Vec<usize> = match plan_for(&built.view_mut(&mut probe_store), &tiled_opts) {
        Ok(p) => {
            let all: Vec<usize> = (0..p.candidates().len())
                .filter(|&i| p.candidates()[i].c_tiles.is_some())
                .collect();
            let step = all.len().div_ceil(4).max(1);
            all.into_iter().step_by(step).collect()
        }
        Err(_) => Vec::new(),
    };
    for i in tiled {
        check_into(
            &format!("tiled candidate {i}"),
            rc,
            seed ^ 0x3c ^ i as u64,
            alpha,
            beta,
            want,
            tol,
            |c| forced(c, &tiled_opts, i),
        )
        .map_err(fail)?;
    }
    // A workspace limit: the choice fits (or planning says that nothing does).
    let limit = (seed >> 8) as usize % (1 + 8 * want.len() * T::DTYPE.size_bytes());
    let limited = PlanOptions {
        workspace_limit: Some(limit),
        ..opts.clone()
    };
    check_into(
        "workspace-limited plan",
        rc,
        seed ^ 0x77,
        alpha,
        beta,
        want,
        tol,
        |c| {
            let plan = match plan_for(c, &limited) {
                Err(ttgt::Error::Workspace { .. }) => plan_for(c, &opts)?,
                other => {
                    let plan = other?;
                    assert!(plan.workspace_bytes() <= limit, "{}", plan.explain());
                    plan
                }
            };
            let mut cv = StridedViewMut::of(c)?;
            let ins = [StridedView::of(a), StridedView::of(b)];
            plan.execute(alpha, &ins, beta, &mut cv)?;
            Ok(())
        },
    )
    .map_err(fail)
}

fn run_multi<T: Element>(spec: &str, ops: &[ArrayViewD<'_, T>]) -> Result<(), TestCaseError> {
    let owned: Vec<ArrayD<T>> = ops.iter().map(|o| o.to_owned()).collect();
    let contiguous: Vec<ArrayViewD<'_, T>> = owned.iter().map(|o| o.view()).collect();
    let want = reference(spec, &contiguous)?;
    let tol = Tol::new(spec, &contiguous);
    let got = ttgt::einsum(spec, ops).map_err(|e| fail(format!("einsum: {e}")))?;
    check_close("einsum (3 operands)", &got.view(), &want, &tol).map_err(fail)
}

// ---------------------------------------------------------------------------------------
// Two operands: random label classes, orders, diagonals.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    M,
    N,
    K,
    Batch,
    SumA,
    SumB,
}

#[derive(Clone, Debug)]
struct PairLabel {
    class: Class,
    extent: usize,
    diag: bool,
    diag_in_b: bool,
    keys: [u8; 5],
}

#[derive(Clone, Debug)]
struct PairCase {
    spec: String,
    dims: Vec<Vec<usize>>,
    recipes: Vec<ViewRecipe>,
    alpha: (f64, f64),
    beta: (f64, f64),
    seed: u64,
}

fn pair_label() -> impl Strategy<Value = PairLabel> {
    let class = prop_oneof![
        3 => Just(Class::M),
        3 => Just(Class::N),
        3 => Just(Class::K),
        2 => Just(Class::Batch),
        1 => Just(Class::SumA),
        1 => Just(Class::SumB),
    ];
    (
        class,
        extent_wide(),
        prop::bool::weighted(0.08),
        any::<bool>(),
        any::<[u8; 5]>(),
    )
        .prop_map(|(class, extent, diag, diag_in_b, keys)| PairLabel {
            class,
            extent,
            diag,
            diag_in_b,
            keys,
        })
}

fn pair_case() -> impl Strategy<Value = PairCase> {
    (
        prop::collection::vec(pair_label(), 0..=7),
        letters(),
        prop::bool::weighted(0.15),
        prop::collection::vec(view_recipe(), 3),
        scalar(),
        scalar(),
        any::<u64>(),
    )
        .prop_map(|(labels, letters, implicit, recipes, alpha, beta, seed)| {
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            let mut ext = BTreeMap::new();
            for (l, &ch) in labels.iter().zip(&letters) {
                use Class::*;
                let in_a = matches!(l.class, M | K | Batch | SumA);
                let in_b = matches!(l.class, N | K | Batch | SumB);
                let in_c = matches!(l.class, M | N | Batch);
                let diag_a = l.diag && in_a && !(in_b && l.diag_in_b);
                let diag_b = l.diag && in_b && !diag_a;
                if a.len() + in_a as usize + diag_a as usize > 6
                    || b.len() + in_b as usize + diag_b as usize > 6
                {
                    continue;
                }
                if in_a {
                    a.push((l.keys[0], ch));
                }
                if diag_a {
                    a.push((l.keys[1], ch));
                }
                if in_b {
                    b.push((l.keys[2], ch));
                }
                if diag_b {
                    b.push((l.keys[3], ch));
                }
                if in_c {
                    c.push((l.keys[4], ch));
                }
                ext.insert(ch, l.extent);
            }
            let (a, b, c) = (sorted_letters(a), sorted_letters(b), sorted_letters(c));
            cap_extents(&mut ext, &[&a, &b, &c]);
            let spec = if implicit {
                format!("{},{}", text(&a), text(&b))
            } else {
                format!("{},{}->{}", text(&a), text(&b), text(&c))
            };
            let dims = |t: &[char]| t.iter().map(|c| ext[c]).collect::<Vec<usize>>();
            PairCase {
                spec,
                dims: vec![dims(&a), dims(&b)],
                recipes,
                alpha,
                beta,
                seed,
            }
        })
}

fn check_pair<T: Element>(case: &PairCase) -> Result<(), TestCaseError> {
    with_views::<T, _>(&case.dims, &case.recipes, case.seed, |v| {
        run_binary(
            &case.spec,
            &v[0],
            &v[1],
            &case.recipes[2],
            scalar_of(case.alpha),
            scalar_of(case.beta),
            case.seed ^ 0xC0FFEE,
        )
    })
}

// ---------------------------------------------------------------------------------------
// One operand: permutations, diagonals, traces, partial sums.

#[derive(Clone, Debug)]
struct UnaryLabel {
    summed: bool,
    extent: usize,
    reps: usize,
    keys: [u8; 4],
}

#[derive(Clone, Debug)]
struct UnaryCase {
    spec: String,
    dims: Vec<usize>,
    recipes: Vec<ViewRecipe>,
    alpha: (f64, f64),
    beta: (f64, f64),
    seed: u64,
}

fn unary_case() -> impl Strategy<Value = UnaryCase> {
    let label = (
        prop::bool::weighted(0.35),
        extent_wide(),
        prop_oneof![8 => Just(1usize), 3 => Just(2usize), 1 => Just(3usize)],
        any::<[u8; 4]>(),
    )
        .prop_map(|(summed, extent, reps, keys)| UnaryLabel {
            summed,
            extent,
            reps,
            keys,
        });
    (
        prop::collection::vec(label, 0..=6),
        letters(),
        prop::bool::weighted(0.15),
        prop::collection::vec(view_recipe(), 2),
        scalar(),
        scalar(),
        any::<u64>(),
    )
        .prop_map(|(labels, letters, implicit, recipes, alpha, beta, seed)| {
            let (mut a, mut c) = (Vec::new(), Vec::new());
            let mut ext = BTreeMap::new();
            for (l, &ch) in labels.iter().zip(&letters) {
                if a.len() + l.reps > 6 {
                    continue;
                }
                for r in 0..l.reps {
                    a.push((l.keys[r], ch));
                }
                if !l.summed {
                    c.push((l.keys[3], ch));
                }
                ext.insert(ch, l.extent);
            }
            let (a, c) = (sorted_letters(a), sorted_letters(c));
            cap_extents(&mut ext, &[&a, &c]);
            let spec = if implicit {
                text(&a)
            } else {
                format!("{}->{}", text(&a), text(&c))
            };
            UnaryCase {
                spec,
                dims: a.iter().map(|c| ext[c]).collect(),
                recipes,
                alpha,
                beta,
                seed,
            }
        })
}

fn check_unary<T: Element>(case: &UnaryCase) -> Result<(), TestCaseError> {
    with_views::<T, _>(
        std::slice::from_ref(&case.dims),
        &case.recipes,
        case.seed,
        |v| {
            run_unary(
                &case.spec,
                &v[0],
                &case.recipes[1],
                scalar_of(case.alpha),
                scalar_of(case.beta),
                case.seed ^ 0xC0FFEE,
            )
        },
    )
}

// ---------------------------------------------------------------------------------------
// permute / permute_into.

#[derive(Clone, Debug)]
struct PermuteCase {
    dims: Vec<usize>,
    perm: Vec<usize>,
    recipes: Vec<ViewRecipe>,
    alpha: (f64, f64),
    beta: (f64, f64),
    seed: u64,
}

fn permute_case() -> impl Strategy<Value = PermuteCase> {
    (
        prop::collection::vec(extent_wide(), 0..=6),
        prop::collection::vec(any::<u8>(), 6),
        prop::collection::vec(view_recipe(), 2),
        scalar(),
        scalar(),
        any::<u64>(),
    )
        .prop_map(|(mut dims, keys, recipes, alpha, beta, seed)| {
            while product_nonzero(dims.iter()) > MAX_POINTS {
                if let Some(d) = dims.iter_mut().max() {
                    *d -= 1;
                }
            }
            let mut perm: Vec<usize> = (0..dims.len()).collect();
            perm.sort_by_key(|&i| (keys[i], i));
            PermuteCase {
                dims,
                perm,
                recipes,
                alpha,
                beta,
                seed,
            }
        })
}

fn check_permute<T: Element>(case: &PermuteCase) -> Result<(), TestCaseError> {
    with_views::<T, _>(
        std::slice::from_ref(&case.dims),
        &case.recipes,
        case.seed,
        |v| {
            let a = &v[0];
            let want = a.view().permuted_axes(IxDyn(&case.perm)).to_owned();
            // The same permutation as an einsum spec, for the reference and the bounds.
            let names: Vec<char> = ('a'..='z').take(case.perm.len()).collect();
            let out: String = case.perm.iter().map(|&p| names[p]).collect();
            let spec = format!("{}->{out}", text(&names));
            let ac = a.to_owned();
            prop_assert_eq!(&reference(&spec, &[ac.view()])?, &want);
            let tol = Tol::new(&spec, &[ac.view()]);
            let got = ttgt::permute(a, &case.perm).map_err(|e| fail(format!("permute: {e}")))?;
            prop_assert_eq!(&got, &want, "permute is a copy: exact");
            let (alpha, beta) = (scalar_of::<T>(case.alpha), scalar_of::<T>(case.beta));
            check_into(
                "permute_into",
                &case.recipes[1],
                case.seed ^ 0xC0FFEE,
                alpha,
                beta,
                &want,
                &tol,
                |c| ttgt::permute_into(alpha, a, &case.perm, beta, c),
            )
            .map_err(fail)
        },
    )
}

// ---------------------------------------------------------------------------------------
// `...` specs with broadcasting between the operands' `...` dimensions.

const ELLIPSIS_SPECS: &[&str] = &[
    "...ij,...jk->...ik",
    "...ij,...jk",
    "ij...,jk...->ik...",
    "...ij,jk->...ik",
    "ij,...jk->...ik",
    "...i,...i->...",
    "a...b,b...c->...ac",
    "...,...->...",
    "...ij,...jk->ik...",
    "...ii->...i",
    "i...->...",
    "...ij->...ji",
    "...ij",
    "...ij,...jk,...kl->...il",
    "...i,i...,...->...",
];

#[derive(Clone, Debug)]
struct EllipsisCase {
    spec: &'static str,
    dims: Vec<Vec<usize>>,
    recipes: Vec<ViewRecipe>,
    alpha: (f64, f64),
    beta: (f64, f64),
    seed: u64,
}

fn ellipsis_case() -> impl Strategy<Value = EllipsisCase> {
    (
        0..ELLIPSIS_SPECS.len(),
        prop::collection::vec(extent(4), 3),
        prop::collection::vec(0usize..=3, 3),
        prop::collection::vec(prop::bool::weighted(0.3), 9),
        prop::collection::vec(extent(4), 26),
        prop::collection::vec(view_recipe(), 4),
        scalar(),
        scalar(),
        any::<u64>(),
    )
        .prop_map(
            |(t, batch, widths, stretch, lext, recipes, alpha, beta, seed)| {
                let spec = ELLIPSIS_SPECS[t];
                let parsed = ttgt::einsum::parse(spec).expect("template parses");
                let dims = parsed
                    .inputs()
                    .iter()
                    .enumerate()
                    .map(|(k, term)| {
                        let mut d: Vec<usize> = term
                            .letters()
                            .iter()
                            .map(|&c| lext[(c as u8 - b'a') as usize])
                            .collect();
                        if let Some(at) = term.ellipsis() {
                            let bd: Vec<usize> = (3 - widths[k]..3)
                                .map(|j| if stretch[3 * k + j] { 1 } else { batch[j] })
                                .collect();
                            d.splice(at..at, bd);
                        }
                        d
                    })
                    .collect();
                EllipsisCase {
                    spec,
                    dims,
                    recipes,
                    alpha,
                    beta,
                    seed,
                }
            },
        )
}

fn check_ellipsis<T: Element>(case: &EllipsisCase) -> Result<(), TestCaseError> {
    let n = case.dims.len();
    with_views::<T, _>(&case.dims, &case.recipes[..n], case.seed, |v| {
        let (alpha, beta) = (scalar_of::<T>(case.alpha), scalar_of::<T>(case.beta));
        let rc = &case.recipes[3];
        let seed = case.seed ^ 0xC0FFEE;
        match v {
            [a] => run_unary(case.spec, a, rc, alpha, beta, seed),
            [a, b] => run_binary(case.spec, a, b, rc, alpha, beta, seed),
            _ => run_multi(case.spec, v),
        }
    })
}

// ---------------------------------------------------------------------------------------
// Named indices of extent 1 in some operands and larger in others (numpy broadcasts them).

const LETTER_BROADCAST_SPECS: &[&str] = &[
    "bij,bjk->bik",
    "ij,jk->ik",
    "ij,jk",
    "ij,ij",
    "ij,jk->ijk",
    "ii,i->i",
    "abc,cba->",
    "abcd,dbef->acef",
    "ij,ji->",
    "...ij,bjk->b...ik",
    "ab,bc,cd->ad",
    "i,i,i->i",
    "ijk,jkl,li->",
];

#[derive(Clone, Debug)]
struct LetterBroadcastCase {
    spec: &'static str,
    /// Each operand's shape, with the stretched letters at extent 1.
    dims: Vec<Vec<usize>>,
    /// The same shapes with every letter at its full extent.
    full: Vec<Vec<usize>>,
    recipes: Vec<ViewRecipe>,
    alpha: (f64, f64),
    beta: (f64, f64),
    seed: u64,
}

fn letter_broadcast_case() -> impl Strategy<Value = LetterBroadcastCase> {
    (
        0..LETTER_BROADCAST_SPECS.len(),
        prop::collection::vec(extent(4), 26),
        prop::collection::vec(prop::bool::weighted(0.35), 3 * 26),
        1usize..=3,
        prop::collection::vec(view_recipe(), 4),
        scalar(),
        scalar(),
        any::<u64>(),
    )
        .prop_map(|(t, lext, stretch, batch, recipes, alpha, beta, seed)| {
            let spec = LETTER_BROADCAST_SPECS[t];
            let parsed = ttgt::einsum::parse(spec).expect("template parses");
            let terms = parsed.inputs();
            let index = |c: char| (c as u8 - b'a') as usize;
            // A letter at extent 1 in every operand that holds it is simply of extent 1.
            let full_extent = |l: usize| {
                let kept = terms.iter().enumerate().any(|(k, t)| {
                    t.letters().iter().any(|&c| index(c) == l) && !stretch[26 * k + l]
                });
                if kept {
                    lext[l]
                } else {
                    1
                }
            };
            let shape = |k: usize, term: &ttgt::einsum::Term, stretched: bool| {
                let mut d: Vec<usize> = term
                    .letters()
                    .iter()
                    .map(|&c| {
                        let l = index(c);
                        if stretched && stretch[26 * k + l] {
                            1
                        } else {
                            full_extent(l)
                        }
                    })
                    .collect();
                if let Some(at) = term.ellipsis() {
                    d.splice(at..at, [batch]);
                }
                d
            };
            LetterBroadcastCase {
                spec,
                dims: terms
                    .iter()
                    .enumerate()
                    .map(|(k, t)| shape(k, t, true))
                    .collect(),
                full: terms
                    .iter()
                    .enumerate()
                    .map(|(k, t)| shape(k, t, false))
                    .collect(),
                recipes,
                alpha,
                beta,
                seed,
            }
        })
}

/// Every entry point on the stretched operands against the reference on the operands
/// materialised at full extent (no broadcasting left), and the reference's own broadcasting
/// against the same.
fn check_letter_broadcast<T: Element>(case: &LetterBroadcastCase) -> Result<(), TestCaseError> {
    let n = case.dims.len();
    with_views::<T, _>(&case.dims, &case.recipes[..n], case.seed, |v| {
        let full: Vec<ArrayD<T>> = v
            .iter()
            .zip(&case.full)
            .map(|(x, d)| {
                x.broadcast(IxDyn(d))
                    .map(|b| b.to_owned())
                    .ok_or_else(|| fail(format!("{:?} does not broadcast to {d:?}", x.shape())))
            })
            .collect::<Result<_, _>>()?;
        let full_views: Vec<ArrayViewD<'_, T>> = full.iter().map(|x| x.view()).collect();
        let want = reference(case.spec, &full_views)?;
        let tol = Tol::new(case.spec, &full_views);
        let owned: Vec<ArrayD<T>> = v.iter().map(|x| x.to_owned()).collect();
        let stretched: Vec<ArrayViewD<'_, T>> = owned.iter().map(|x| x.view()).collect();
        let by_reference = reference(case.spec, &stretched)?;
        check_close("reference (stretched)", &by_reference.view(), &want, &tol).map_err(fail)?;
        let (alpha, beta) = (scalar_of::<T>(case.alpha), scalar_of::<T>(case.beta));
        let rc = &case.recipes[3];
        let seed = case.seed ^ 0xB0A7;
        match v {
            [a, b] => run_binary(case.spec, a, b, rc, alpha, beta, seed),
            _ => {
                let got = ttgt::einsum(case.spec, v).map_err(|e| fail(format!("einsum: {e}")))?;
                check_close("einsum (3 operands)", &got.view(), &want, &tol).map_err(fail)
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// Three operands through `ttgt::einsum`.

#[derive(Clone, Debug)]
struct MultiLabel {
    mask: u8,
    extent: usize,
    diag: bool,
    keys: [u8; 5],
}

#[derive(Clone, Debug)]
struct MultiCase {
    spec: String,
    dims: Vec<Vec<usize>>,
    recipes: Vec<ViewRecipe>,
    seed: u64,
}

fn multi_case() -> impl Strategy<Value = MultiCase> {
    let label = (
        1u8..16,
        extent(4),
        prop::bool::weighted(0.08),
        any::<[u8; 5]>(),
    )
        .prop_map(|(mask, extent, diag, keys)| MultiLabel {
            // bits 0..3: in operand 0, 1, 2; bit 3: in the output. Some input must have it.
            mask: if mask & 7 == 0 { mask | 1 } else { mask },
            extent,
            diag,
            keys,
        });
    (
        prop::collection::vec(label, 0..=7),
        letters(),
        prop::bool::weighted(0.15),
        prop::collection::vec(view_recipe(), 3),
        any::<u64>(),
    )
        .prop_map(|(labels, letters, implicit, recipes, seed)| {
            let mut ops: Vec<Vec<(u8, char)>> = vec![Vec::new(); 3];
            let mut out = Vec::new();
            let mut ext = BTreeMap::new();
            for (l, &ch) in labels.iter().zip(&letters) {
                let first = (0..3).find(|&k| l.mask & (1 << k) != 0).unwrap_or(0);
                let fits = (0..3).all(|k| {
                    let n = (l.mask >> k & 1) as usize + (l.diag && k == first) as usize;
                    ops[k].len() + n <= 5
                });
                if !fits {
                    continue;
                }
                for (k, op) in ops.iter_mut().enumerate() {
                    if l.mask & (1 << k) != 0 {
                        op.push((l.keys[k], ch));
                        if l.diag && k == first {
                            op.push((l.keys[3], ch));
                        }
                    }
                }
                if l.mask & 8 != 0 {
                    out.push((l.keys[4], ch));
                }
                ext.insert(ch, l.extent);
            }
            let ops: Vec<Vec<char>> = ops.into_iter().map(sorted_letters).collect();
            let out = sorted_letters(out);
            let terms: Vec<&[char]> = ops.iter().map(|t| &t[..]).chain([&out[..]]).collect();
            cap_extents(&mut ext, &terms);
            let ins: Vec<String> = ops.iter().map(|t| text(t)).collect();
            let spec = if implicit {
                ins.join(",")
            } else {
                format!("{}->{}", ins.join(","), text(&out))
            };
            MultiCase {
                spec,
                dims: ops
                    .iter()
                    .map(|t| t.iter().map(|c| ext[c]).collect())
                    .collect(),
                recipes,
                seed,
            }
        })
}

fn check_multi<T: Element>(case: &MultiCase) -> Result<(), TestCaseError> {
    with_views::<T, _>(&case.dims, &case.recipes, case.seed, |v| {
        run_multi(&case.spec, v)
    })
}

// ---------------------------------------------------------------------------------------
// Instantiation for the six element types.

macro_rules! properties_for {
    ($name:ident, $t:ty) => {
        mod $name {
            use super::*;

            proptest! {
                #![proptest_config(config(512))]
                #[test]
                fn two_operands(case in pair_case()) {
                    check_pair::<$t>(&case)?;
                }
            }

            proptest! {
                #![proptest_config(config(256))]
                #[test]
                fn one_operand(case in unary_case()) {
                    check_unary::<$t>(&case)?;
                }
            }

            proptest! {
                #![proptest_config(config(128))]
                #[test]
                fn permutations(case in permute_case()) {
                    check_permute::<$t>(&case)?;
                }
            }

            proptest! {
                #![proptest_config(config(256))]
                #[test]
                fn ellipsis_broadcasting(case in ellipsis_case()) {
                    check_ellipsis::<$t>(&case)?;
                }
            }

            proptest! {
                #![proptest_config(config(128))]
                #[test]
                fn letter_broadcasting(case in letter_broadcast_case()) {
                    check_letter_broadcast::<$t>(&case)?;
                }
            }

            proptest! {
                #![proptest_config(config(192))]
                #[test]
                fn three_operands(case in multi_case()) {
                    check_multi::<$t>(&case)?;
                }
            }
        }
    };
}

properties_for!(real_f32, f32);
properties_for!(real_f64, f64);
properties_for!(complex_c32, Complex32);
properties_for!(complex_c64, Complex64);
properties_for!(half_f16, ttgt::tensor::f16);
properties_for!(half_bf16, ttgt::tensor::bf16);

//! The contraction planner: every candidate family appears and computes the right result,
//! workspace limits are honoured, cached plans give identical results, the epilogue and
//! measured tuning behave, and bad options are errors.

mod common;

use common::random_array;
use ndarray::ArrayD;
use num_complex::Complex64;
use ttgt::plan::{
    cached_contraction_plan, CandidateKind, Epilogue, PlanOptions, PlanTuning, DEFAULT_TILE_BYTES,
    WIDE_TILE_BYTES,
};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, DType, Element, Error, Layout};

fn close<T: Element>(got: &ArrayD<T>, want: &ArrayD<T>, tol: f64) {
    assert_eq!(got.shape(), want.shape());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (*g - *w).abs_f64() <= tol * (1.0 + w.abs_f64()),
            "{g} vs {w}"
        );
    }
}

fn run<T: Element>(plan: &ContractionPlan, a: &ArrayD<T>, b: &ArrayD<T>, c: &mut ArrayD<T>) {
    run_scaled(plan, T::one(), a, b, T::zero(), c);
}

/// `c = alpha·(a·b) + beta·c` by `plan`.
fn run_scaled<T: Element>(
    plan: &ContractionPlan,
    alpha: T,
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    beta: T,
    c: &mut ArrayD<T>,
) {
    let mut cv = StridedViewMut::of(c).unwrap();
    plan.execute(
        alpha,
        &[StridedView::of(a), StridedView::of(b)],
        beta,
        &mut cv,
    )
    .unwrap();
}

/// The plan of `spec` for these arrays' layouts under `o`.
fn plan_of<T: Element>(
    spec: &str,
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    c: &ArrayD<T>,
    o: &PlanOptions,
) -> ContractionPlan {
    ContractionPlan::with_options(
        spec,
        &[Layout::of(a), Layout::of(b)],
        &Layout::of(c),
        T::DTYPE,
        o,
    )
    .unwrap()
}

/// A spec whose candidates include every family: K = {c, d} does not fuse in B (e sits
/// between them), M = {a, b} does not fuse in C's order.
#[test]
fn every_family_is_listed_and_correct() {
    let spec = "abcd,ced->bea";
    let a: ArrayD<f64> = random_array(&[5, 4, 3, 6], 1);
    let b: ArrayD<f64> = random_array(&[3, 7, 6], 2);
    let want = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let mut c = ArrayD::<f64>::zeros(want.shape());
    let opts = PlanOptions {
        threads: Some(2),
        ..Default::default()
    };
    let mut plan = ContractionPlan::with_options(
        spec,
        &[Layout::of(&a), Layout::of(&b)],
        &Layout::of(&c),
        DType::F64,
        &opts,
    )
    .unwrap();
    // From this thread, small parallel loops and transpositions run on it
    // (`wakes_threads`); inside a pool of the plan's two threads they split into tasks.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let mut seen = std::collections::HashSet::new();
    for i in 0..plan.candidates().len() {
        plan.choose(i).unwrap();
        seen.insert(plan.chosen().unwrap().kind());
        c.fill(f64::NAN);
        run(&plan, &a, &b, &mut c);
        close(&c, &want, 1e-12);
        c.fill(f64::NAN);
        pool.install(|| run(&plan, &a, &b, &mut c));
        close(&c, &want, 1e-12);
    }
    for k in [
        CandidateKind::Ttgt,
        CandidateKind::LoopOverGemm,
        CandidateKind::Hybrid,
        CandidateKind::Loops,
    ] {
        assert!(seen.contains(&k), "{k} missing: {seen:?}");
    }
    assert!(plan.candidates().iter().any(|c| !c.reduce.is_empty()));
    assert!(plan.candidates().iter().any(|c| c.parallel));
}

/// Workspace buffers are reused across executions (a process-wide pool): a run whose packs
/// and GEMM temporary hold NaN and infinities must not leak into the next run of any
/// candidate, at both GEMM libraries and with k = 0 (an empty contracted index).
#[test]
fn reused_workspace_never_leaks_into_results() {
    for (spec, sa, sb) in [
        ("abcd,ced->bea", vec![5, 4, 3, 6], vec![3, 7, 6]),
        ("abk,kcb->ca", vec![4, 3, 0], vec![0, 5, 3]),
    ] {
        let a: ArrayD<f64> = random_array(&sa, 11);
        let b: ArrayD<f64> = random_array(&sb, 12);
        let mut poison_a = a.clone();
        poison_a
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = if i % 2 == 0 { f64::NAN } else { f64::INFINITY });
        let want = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
        let mut c = ArrayD::<f64>::zeros(want.shape());
        for lib in ttgt::model::GemmLibrary::ALL {
            let o = PlanOptions {
                library: Some(lib),
                ..Default::default()
            };
            let mut plan = ContractionPlan::with_options(
                spec,
                &[Layout::of(&a), Layout::of(&b)],
                &Layout::of(&c),
                DType::F64,
                &o,
            )
            .unwrap();
            for i in 0..plan.candidates().len() {
                plan.choose(i).unwrap();
                for _ in 0..2 {
                    run(&plan, &poison_a, &b, &mut c); // leaves NaN/inf in pooled buffers
                    c.fill(f64::NAN);
                    run(&plan, &a, &b, &mut c);
                    close(&c, &want, 1e-12);
                }
            }
        }
    }
}

#[test]
fn workspace_limit_is_respected_and_reported() {
    let spec = "abcd,dbef->acef";
    let a: ArrayD<f32> = random_array(&[6, 5, 7, 8], 3);
    let b: ArrayD<f32> = random_array(&[8, 5, 4, 3], 4);
    let want = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let mut c = ArrayD::<f32>::zeros(want.shape());
    for limit in [0usize, 100, 2000, 1 << 20] {
        let o = PlanOptions {
            workspace_limit: Some(limit),
            ..Default::default()
        };
        let plan = ContractionPlan::with_options(
            spec,
            &[Layout::of(&a), Layout::of(&b)],
            &Layout::of(&c),
            DType::F32,
            &o,
        )
        .unwrap();
        assert!(plan.workspace_bytes() <= limit);
        if limit == 0 {
            assert!(plan.explain().contains("workspace limit 0 bytes excluded"));
        }
        run(&plan, &a, &b, &mut c);
        close(&c, &want, 1e-4);
    }
    // one-sided sums need a buffer: a zero limit is then an error, not a panic
    let e = ContractionPlan::with_options(
        "abx,bc->ac",
        &[
            Layout::row_major(&[3, 4, 5]).unwrap(),
            Layout::row_major(&[4, 6]).unwrap(),
        ],
        &Layout::row_major(&[3, 6]).unwrap(),
        DType::F64,
        &PlanOptions {
            workspace_limit: Some(0),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Workspace { .. }), "{e}");
}

#[test]
fn cached_plans_are_reused_and_give_identical_results() {
    let spec = "abc,cbd->ad";
    let a: ArrayD<f64> = random_array(&[9, 8, 7], 5);
    let b: ArrayD<f64> = random_array(&[7, 8, 6], 6);
    let l = [Layout::of(&a), Layout::of(&b)];
    let lc = Layout::row_major(&[9, 6]).unwrap();
    let o = PlanOptions::default();
    // (a rule change by another test between the two lookups re-makes the plan: retry)
    let reused = (0..100).any(|_| {
        let p1 = cached_contraction_plan(spec, &l, &lc, DType::F64, &o).unwrap();
        let p2 = cached_contraction_plan(spec, &l, &lc, DType::F64, &o).unwrap();
        std::sync::Arc::ptr_eq(&p1, &p2)
    });
    assert!(reused);
    let x = ttgt::contract(spec, &a, &b).unwrap();
    let y = ttgt::contract(spec, &a, &b).unwrap();
    assert_eq!(x, y);
}

/// Changing a planning rule (or the profile) makes cached plans again: a plan made under the
/// old rule is never served after the change.
#[test]
fn cached_plans_follow_rule_changes() {
    use std::sync::Arc;
    use ttgt::transpose::{cached_plan, far_row_prefetch, set_far_row_prefetch, TransposeOptions};
    let r = |d: &[usize]| Layout::row_major(d).unwrap();
    let (l, lc) = ([r(&[30, 40]), r(&[40, 50])], r(&[30, 50]));
    let o = PlanOptions::default();
    let contraction = || cached_contraction_plan("ik,kj->ij", &l, &lc, DType::F64, &o).unwrap();
    let t = TransposeOptions::default();
    let transpose = || cached_plan(&[1, 0], &r(&[30, 40]), &r(&[40, 30]), DType::F64, &t).unwrap();
    // (other tests may change a rule meanwhile: take a pair made under one generation)
    let (c1, t1) = (0..100)
        .find_map(|_| {
            let (c, t) = (contraction(), transpose());
            (Arc::ptr_eq(&c, &contraction()) && Arc::ptr_eq(&t, &transpose())).then_some((c, t))
        })
        .expect("cached plans are reused");
    let was = far_row_prefetch();
    set_far_row_prefetch(Some(!was));
    assert!(!Arc::ptr_eq(&c1, &contraction()));
    assert!(!Arc::ptr_eq(&t1, &transpose()));
    set_far_row_prefetch(None);
    // setting a rule to the value it has changes nothing
    let c2 = contraction();
    set_far_row_prefetch(None);
    assert!(Arc::ptr_eq(&c2, &contraction()));
}

#[test]
fn relu_epilogue_applies_after_alpha_and_beta() {
    let spec = "ij,jk->ik";
    let a: ArrayD<f64> = random_array(&[7, 5], 7);
    let b: ArrayD<f64> = random_array(&[5, 6], 8);
    let ab = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let c0: ArrayD<f64> = random_array(&[7, 6], 9);
    for c_layout_t in [false, true] {
        // C in place (direct GEMM) and C transposed (a temporary written back)
        let mut store = if c_layout_t {
            c0.t().to_owned().into_dyn()
        } else {
            c0.clone()
        };
        let mut cview = if c_layout_t {
            store.view_mut().reversed_axes()
        } else {
            store.view_mut()
        };
        let o = PlanOptions {
            epilogue: Epilogue::Relu,
            ..Default::default()
        };
        let plan = ContractionPlan::with_options(
            spec,
            &[Layout::of(&a), Layout::of(&b)],
            &Layout::of(&cview),
            DType::F64,
            &o,
        )
        .unwrap();
        let mut cv = StridedViewMut::of(&mut cview).unwrap();
        plan.execute(
            2.0,
            &[StridedView::of(&a), StridedView::of(&b)],
            0.5,
            &mut cv,
        )
        .unwrap();
        let want = (&ab * 2.0 + &c0 * 0.5).mapv(|x| x.max(0.0));
        close(&cview.to_owned(), &want, 1e-12);
    }
    let e = ContractionPlan::with_options(
        spec,
        &[
            Layout::row_major(&[2, 2]).unwrap(),
            Layout::row_major(&[2, 2]).unwrap(),
        ],
        &Layout::row_major(&[2, 2]).unwrap(),
        DType::C64,
        &PlanOptions {
            epilogue: Epilogue::Relu,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)));
}

#[test]
fn measured_tuning_leaves_c_as_one_execution() {
    let spec = "acbd,cbe->aed";
    let a: ArrayD<Complex64> = random_array(&[4, 3, 5, 6], 10);
    let b: ArrayD<Complex64> = random_array(&[3, 5, 4], 11);
    let ab = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let c0: ArrayD<Complex64> = random_array(ab.shape(), 12);
    let mut c = c0.clone();
    let mut plan = ContractionPlan::new(
        spec,
        &[Layout::of(&a), Layout::of(&b)],
        &Layout::of(&c),
        DType::C64,
    )
    .unwrap();
    let (alpha, beta) = (Complex64::new(0.5, 1.0), Complex64::new(-1.0, 0.25));
    plan.measure(
        alpha,
        &[StridedView::of(&a), StridedView::of(&b)],
        beta,
        &mut StridedViewMut::of(&mut c).unwrap(),
        std::time::Duration::from_millis(20),
    )
    .unwrap();
    let want = ab.mapv(|x| x * alpha) + c0.mapv(|x| x * beta);
    close(&c, &want, 1e-12);
    let timed = (0..plan.candidates().len())
        .filter(|&i| plan.measured_seconds(i).is_some())
        .count();
    assert!(timed >= 2);
    assert!(plan.explain().contains("measured"));
}

#[test]
fn forced_library_and_bad_options() {
    let r = |d: &[usize]| Layout::row_major(d).unwrap();
    for lib in ttgt::model::GemmLibrary::ALL {
        let o = PlanOptions {
            library: Some(lib),
            ..Default::default()
        };
        let p = ContractionPlan::with_options(
            "abc,cbd->ad",
            &[r(&[4, 5, 6]), r(&[6, 5, 3])],
            &r(&[4, 3]),
            DType::F32,
            &o,
        )
        .unwrap();
        assert!(p.candidates().iter().all(|c| c.library == lib));
    }
    let o = PlanOptions {
        threads: Some(0),
        ..Default::default()
    };
    let e = ContractionPlan::with_options(
        "ij,jk",
        &[r(&[2, 2]), r(&[2, 2])],
        &r(&[2, 2]),
        DType::F32,
        &o,
    );
    assert!(e.is_err());
    let mut p =
        ContractionPlan::new("ij,jk", &[r(&[2, 2]), r(&[2, 2])], &r(&[2, 2]), DType::F32).unwrap();
    assert!(p.choose(10_000).is_err());
}

/// Under a workspace limit too small for a temporary C, TTGT's write-back runs in place:
/// the GEMM writes C's memory in its own order and C is permuted in place (also with a
/// non-zero beta, where C is first permuted the other way).
#[test]
fn in_place_write_back_under_a_workspace_limit() {
    let spec = "abk,kc->bca";
    let a: ArrayD<f64> = random_array(&[30, 20, 16], 13);
    let b: ArrayD<f64> = random_array(&[16, 25], 14);
    let ab = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let c0: ArrayD<f64> = random_array(ab.shape(), 15);
    let limit = 64 << 10; // C is 117 KiB
    let o = PlanOptions {
        workspace_limit: Some(limit),
        threads: Some(2),
        ..Default::default()
    };
    let mut plan = ContractionPlan::with_options(
        spec,
        &[Layout::of(&a), Layout::of(&b)],
        &Layout::of(&c0),
        DType::F64,
        &o,
    )
    .unwrap();
    let in_place: Vec<usize> = (0..plan.candidates().len())
        .filter(|&i| plan.candidates()[i].c_in_place.is_some())
        .collect();
    assert!(!in_place.is_empty(), "{}", plan.explain());
    assert!(plan.candidates().iter().all(|c| c.c_temp.is_none()));
    for i in in_place {
        plan.choose(i).unwrap();
        assert!(plan.workspace_bytes() <= limit);
        assert!(plan.explain().contains("in place"));
        for beta in [0.0, -0.5] {
            let mut c = c0.clone();
            let mut cv = StridedViewMut::of(&mut c).unwrap();
            plan.execute(
                1.5,
                &[StridedView::of(&a), StridedView::of(&b)],
                beta,
                &mut cv,
            )
            .unwrap();
            let want = &ab * 1.5 + &c0 * beta;
            close(&c, &want, 1e-12);
        }
    }
}

/// Every tiled candidate of `spec` (C computed block by block into a cached buffer, each
/// block transposed into C) against the reference, with alpha and beta, after a run on
/// poisoned operands has left NaN in the pooled block buffers.
fn tiled_candidates_match<T: Element>(spec: &str, sa: &[usize], sb: &[usize], seed: u64) {
    let a: ArrayD<T> = random_array(sa, seed);
    let b: ArrayD<T> = random_array(sb, seed + 1);
    let ab = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let c0: ArrayD<T> = random_array(ab.shape(), seed + 2);
    let poison = a.mapv(|_| T::from_parts(f64::NAN, f64::NAN));
    let (alpha, beta) = (T::from_parts(1.5, -0.25), T::from_parts(-0.5, 0.75));
    let mut want = c0.clone();
    want.zip_mut_with(&ab, |w, &x| *w = alpha * x + beta * *w);
    let block = 6 * T::DTYPE.size_bytes();
    for threads in [1, 2] {
        let o = PlanOptions {
            threads: Some(threads),
            tile_bytes: Some(block),
            ..Default::default()
        };
        let mut plan = ContractionPlan::with_options(
            spec,
            &[Layout::of(&a), Layout::of(&b)],
            &Layout::of(&c0),
            T::DTYPE,
            &o,
        )
        .unwrap();
        let tiled: Vec<usize> = (0..plan.candidates().len())
            .filter(|&i| plan.candidates()[i].c_tiles.is_some())
            .collect();
        assert!(tiled.len() >= 4, "{spec}: {}", plan.explain());
        for &i in &tiled {
            plan.choose(i).unwrap();
            let summary = plan.chosen().unwrap().summary();
            assert!(summary.contains("per block"), "{summary}");
            assert!(plan.explain().contains("buffer in cache"));
            let mut c = c0.clone();
            let mut cv = StridedViewMut::of(&mut c).unwrap();
            plan.execute(
                T::one(),
                &[StridedView::of(&poison), StridedView::of(&b)],
                T::zero(),
                &mut cv,
            )
            .unwrap();
            let mut c = c0.clone();
            let mut cv = StridedViewMut::of(&mut c).unwrap();
            plan.execute(
                alpha,
                &[StridedView::of(&a), StridedView::of(&b)],
                beta,
                &mut cv,
            )
            .unwrap();
            close(&c, &want, 1e-4);
        }
        if threads == 2 {
            assert!(tiled.iter().any(|&i| plan.candidates()[i].parallel));
        }
    }
}

#[test]
fn tiled_write_back_candidates_are_correct() {
    // a ccsd(t)-like rank-6 C whose labels alternate between A and B
    let s1 = ("bged,cafg->fedcba", [3, 4, 2, 5], [2, 5, 3, 4]);
    tiled_candidates_match::<f64>(s1.0, &s1.1, &s1.2, 20);
    tiled_candidates_match::<f32>(s1.0, &s1.1, &s1.2, 21);
    tiled_candidates_match::<Complex64>(s1.0, &s1.1, &s1.2, 22);
    tiled_candidates_match::<num_complex::Complex32>(s1.0, &s1.1, &s1.2, 23);
    // batch labels (always iterated over blocks) and K labels that do not fuse in B
    // (batch-reduce inside a block)
    tiled_candidates_match::<f64>("zabcd,zced->bzea", &[2, 5, 4, 3, 6], &[2, 3, 7, 6], 24);
    tiled_candidates_match::<Complex64>("xik,xkj->jxi", &[3, 7, 5], &[3, 5, 6], 25);
}

/// Where only an inner part of an operand's free labels fuses in C, the planner also packs
/// that operand with the other free labels (loops around the GEMM calls) outside K, so that
/// each call reads one dense block (`dabfe,fc->edcba`: A as `[ed|f|ba]`; the same with the
/// operands swapped for B). Every such candidate against the reference, with alpha and
/// beta, on one and two threads.
#[test]
fn packs_with_loops_outside_k_are_offered_and_correct() {
    let ext = |labels: &str| -> Vec<usize> {
        labels
            .chars()
            .map(|l| match l {
                'a' => 3,
                'b' => 2,
                'c' => 4,
                'd' => 2,
                'e' => 3,
                _ => 5,
            })
            .collect()
    };
    for (spec, pack) in [
        ("dabfe,fc->edcba", "pack A[edfba]"),
        ("fc,dabfe->edcba", "pack B[edfba]"),
    ] {
        let (ins, out) = spec.split_once("->").unwrap();
        let (la, lb) = ins.split_once(',').unwrap();
        let a: ArrayD<f64> = random_array(&ext(la), 70);
        let b: ArrayD<f64> = random_array(&ext(lb), 71);
        let c0: ArrayD<f64> = random_array(&ext(out), 72);
        let ab = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
        let (alpha, beta) = (1.5, -0.5);
        let want = &ab * alpha + &c0 * beta;
        for threads in [1, 2] {
            let o = PlanOptions {
                threads: Some(threads),
                tuning: PlanTuning::Measure {
                    budget: std::time::Duration::ZERO,
                },
                ..Default::default()
            };
            let mut plan = plan_of(spec, &a, &b, &c0, &o);
            let picked: Vec<usize> = (0..plan.candidates().len())
                .filter(|&i| plan.candidates()[i].summary().contains(pack))
                .collect();
            assert!(
                !picked.is_empty(),
                "{spec}: no {pack} in {}",
                plan.explain()
            );
            for i in picked {
                plan.choose(i).unwrap();
                let mut c = c0.clone();
                run_scaled(&plan, alpha, &a, &b, beta, &mut c);
                close(&c, &want, 1e-12);
            }
        }
    }
}

/// With the default block bound, tiled write-backs also offer the largest blocks of up to
/// `WIDE_TILE_BYTES` (tccg-32's f64 shape: no block set gives long GEMM calls under 512
/// KiB, one over `fe` gives 1.15 MB blocks of 384×384×24 calls); an explicit bound offers
/// none above it. Plans only, no data: the blocks' correctness is the test above.
#[test]
fn default_tiles_offer_wide_blocks_and_an_explicit_bound_caps_them() {
    let (spec, sa, sb) = ("bged,cafg->fedcba", [16, 24, 16, 24], [16, 24, 16, 24]);
    let c = Layout::row_major(&[16, 16, 24, 16, 16, 24]).unwrap();
    let ins = [
        Layout::row_major(&sa).unwrap(),
        Layout::row_major(&sb).unwrap(),
    ];
    let blocks = |tile_bytes: Option<usize>| -> Vec<usize> {
        let o = PlanOptions {
            threads: Some(2),
            tile_bytes,
            ..Default::default()
        };
        let plan = ContractionPlan::with_options(spec, &ins, &c, DType::F64, &o).unwrap();
        plan.candidates()
            .iter()
            .filter_map(|x| x.c_tiles.as_ref().map(|t| t.block_len * 8))
            .collect()
    };
    let default = blocks(None);
    assert!(default
        .iter()
        .any(|&b| b > DEFAULT_TILE_BYTES && b <= WIDE_TILE_BYTES));
    assert!(default.iter().all(|&b| b <= WIDE_TILE_BYTES));
    assert!(default.contains(&(24 * 16 * 16 * 24 * 8)));
    let capped = blocks(Some(DEFAULT_TILE_BYTES));
    assert!(!capped.is_empty());
    assert!(capped.iter().all(|&b| b <= DEFAULT_TILE_BYTES));
}

/// The GETT candidate (our blocked GEMM packing straight from the tensors; offered when our
/// library is forced, and absent otherwise) on specs with
/// batch indices, a trace, an outer product, transposed and sliced (strided, reversed)
/// operands, alpha and beta, f32 and f64, one and two threads, against the reference.
#[test]
fn gett_candidate_matches_the_reference() {
    if !ttgt::model::gett_simd_available(DType::F64) {
        eprintln!("SKIPPED: no AVX2+FMA GETT kernel on this CPU");
        return;
    }
    fn one<T: Element>(spec: &str, sa: &[usize], sb: &[usize], threads: usize, seed: u64) {
        use ndarray::Axis;
        let a: ArrayD<T> = random_array(sa, seed);
        let b: ArrayD<T> = random_array(sb, seed + 1);
        // A sliced with a step and B reversed along its first axis: strided, negative strides
        let a_big: ArrayD<T> = {
            let mut shape = sa.to_vec();
            shape[0] *= 2;
            let mut big = ArrayD::<T>::from_elem(shape, T::from_f64(f64::NAN));
            big.slice_axis_mut(Axis(0), ndarray::Slice::new(0, None, 2))
                .assign(&a);
            big
        };
        let av = a_big.slice_axis(Axis(0), ndarray::Slice::new(0, None, 2));
        let b_rev = {
            let mut r = b.clone();
            r.invert_axis(Axis(0));
            r
        };
        let mut bv = b_rev.view();
        bv.invert_axis(Axis(0)); // the same values as b, through a negative stride
        let want0 = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
        let c0: ArrayD<T> = random_array(want0.shape(), seed + 2);
        let (alpha, beta) = (T::from_parts(1.5, 0.0), T::from_parts(-0.5, 0.0));
        let want = want0.mapv(|x| alpha * x) + c0.mapv(|x| beta * x);
        let mut c_store = c0.t().to_owned(); // C in column-major order
        let mut c = c_store.view_mut().reversed_axes();
        let mut plan = ContractionPlan::with_options(
            spec,
            &[Layout::of(&av), Layout::of(&bv)],
            &Layout::of(&c),
            T::DTYPE,
            &PlanOptions {
                threads: Some(threads),
                library: Some(ttgt::model::GemmLibrary::Native),
                ..Default::default()
            },
        )
        .unwrap();
        let i = plan
            .candidates()
            .iter()
            .position(|c| c.kind() == CandidateKind::Gett)
            .expect("a GETT candidate");
        plan.choose(i).unwrap();
        assert!(plan.chosen().unwrap().summary().starts_with("GETT"));
        let default = ContractionPlan::new(
            spec,
            &[Layout::of(&av), Layout::of(&bv)],
            &Layout::of(&c),
            T::DTYPE,
        )
        .unwrap();
        assert!(default
            .candidates()
            .iter()
            .all(|c| c.kind() != CandidateKind::Gett));
        plan.execute(
            alpha,
            &[StridedView::of(&av), StridedView::of(&bv)],
            beta,
            &mut StridedViewMut::of(&mut c).unwrap(),
        )
        .unwrap();
        let tol = if T::DTYPE == DType::F32 { 1e-4 } else { 1e-12 };
        close(&c.to_owned(), &want, tol);
    }
    for threads in [1, 2] {
        for (spec, sa, sb) in [
            ("abcd,dbef->acef", vec![6, 5, 7, 9], vec![9, 5, 4, 3]),
            ("bij,bjk->bik", vec![3, 20, 30], vec![3, 30, 19]),
            ("afbce,df->edcba", vec![5, 6, 4, 3, 9], vec![7, 6]),
            ("ij,kl->ijlk", vec![7, 5], vec![3, 17]),
            ("iij,jk->ki", vec![9, 9, 40], vec![40, 23]),
            ("ab,bc->ac", vec![70, 300], vec![300, 33]),
        ] {
            one::<f64>(spec, &sa, &sb, threads, 7);
            one::<f32>(spec, &sa, &sb, threads, 9);
        }
    }
}

/// `C = alpha * A·B + beta * C` for every way ndarray can hand the views over, against the
/// reference, for a plan that must be nested loops alone.
fn check_nested_loops<T: Element>(
    spec: &str,
    a: ndarray::ArrayViewD<'_, T>,
    b: ndarray::ArrayViewD<'_, T>,
) {
    let want_ab = ttgt::reference::einsum(spec, &[a.clone(), b.clone()]).unwrap();
    let c0: ArrayD<T> = random_array(want_ab.shape(), 9);
    let (alpha, beta) = (T::from_parts(0.5, 0.25), T::from_parts(-1.5, 0.5));
    // C reversed along its first axis, so that its strides are negative too
    let mut c_store = c0.clone();
    let mut c = c_store.view_mut();
    if c.ndim() > 0 {
        c.invert_axis(ndarray::Axis(0));
    }
    let want: ArrayD<T> = {
        let mut w = c.to_owned();
        w.zip_mut_with(&want_ab, |w, &x| *w = alpha * x + beta * *w);
        w
    };
    let plan = ContractionPlan::new(
        spec,
        &[Layout::of(&a), Layout::of(&b)],
        &Layout::of(&c),
        T::DTYPE,
    )
    .unwrap();
    assert_eq!(plan.candidates().len(), 1, "{spec}: {}", plan.explain());
    assert_eq!(plan.chosen().unwrap().kind(), CandidateKind::Loops);
    // no packs, no temporary: at most the one-sided sums' buffers
    assert_eq!(plan.chosen().unwrap().copies(), 0);
    let mut cv = StridedViewMut::of(&mut c).unwrap();
    plan.execute(
        alpha,
        &[StridedView::of(&a), StridedView::of(&b)],
        beta,
        &mut cv,
    )
    .unwrap();
    close(&c.to_owned(), &want, 1e-5);
    // beta = 0 never reads C: NaN in C must not survive
    c.fill(T::from_parts(f64::NAN, 0.0));
    let mut cv = StridedViewMut::of(&mut c).unwrap();
    plan.execute(
        T::one(),
        &[StridedView::of(&a), StridedView::of(&b)],
        T::zero(),
        &mut cv,
    )
    .unwrap();
    close(&c.to_owned(), &want_ab, 1e-5);
}

fn nested_loops_cases<T: Element>() {
    let r = |shape: &[usize], seed| random_array::<T>(shape, seed);
    // a 5x5x5 dot product over views in other axis orders (ccsd_t's `ijk,jki`)
    let a = r(&[5, 5, 5], 1);
    let b = r(&[5, 5, 5], 2);
    let bt = b.view().permuted_axes(ndarray::IxDyn(&[1, 2, 0]));
    check_nested_loops("ijk,jki->", a.view(), bt.into_dyn());
    // an outer product, a matrix product with reversed and sliced operands, extents 1 to 3
    check_nested_loops("ij,k->ijk", r(&[5, 5], 3).view(), r(&[5], 4).view());
    let mut m = r(&[4, 6], 5);
    m.invert_axis(ndarray::Axis(1));
    let n = r(&[6, 9], 6);
    let ns = n.slice(ndarray::s![.., ..;3]).into_dyn();
    check_nested_loops("ij,jk->ik", m.view(), ns);
    check_nested_loops(
        "abc,cbd->ad",
        r(&[1, 2, 3], 7).view(),
        r(&[3, 2, 1], 8).view(),
    );
    // a batch index, a one-sided sum (x) and a diagonal (ii)
    check_nested_loops(
        "bix,bj->bij",
        r(&[3, 4, 2], 10).view(),
        r(&[3, 2], 11).view(),
    );
    check_nested_loops(
        "iij,jk->ik",
        r(&[3, 3, 2], 12).view(),
        r(&[2, 4], 13).view(),
    );
    // empty operands: a zero extent in C, and an empty contracted index (C = beta * C)
    check_nested_loops("ij,jk->ik", r(&[0, 3], 14).view(), r(&[3, 2], 15).view());
    check_nested_loops("ij,jk->ik", r(&[2, 0], 16).view(), r(&[0, 3], 17).view());
}

/// Contractions smaller than a GEMM call's fixed cost run as nested loops over the operands
/// as they lie, for every element type, layout, alpha and beta.
#[test]
fn tiny_contractions_run_as_nested_loops() {
    nested_loops_cases::<f32>();
    nested_loops_cases::<f64>();
    nested_loops_cases::<num_complex::Complex32>();
    nested_loops_cases::<Complex64>();
}

/// A plan that refines its choice from its executions computes `alpha * A·B + beta * C` on
/// every call while it tries its candidates, then settles on one and stops trying; a forced
/// choice ends refinement. Returns whether the plan refined: it does when other candidates
/// are predicted close to the choice, which depends on the machine's GEMM rates (the quick
/// probe's, without a stored profile).
fn refinement_case<T: Element>(spec: &str, sa: &[usize], sb: &[usize], seed: u64) -> bool {
    let a: ArrayD<T> = random_array(sa, seed);
    let b: ArrayD<T> = random_array(sb, seed + 1);
    let product = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let mut c: ArrayD<T> = random_array(product.shape(), seed + 2);
    let mut plan = ContractionPlan::new(
        spec,
        &[Layout::of(&a), Layout::of(&b)],
        &Layout::of(&c),
        T::DTYPE,
    )
    .unwrap();
    plan.refine_from_executions();
    if !plan.refining() {
        return false;
    }
    let (alpha, beta) = (T::from_f64(2.0), T::from_f64(0.5));
    let tol = if matches!(T::DTYPE, DType::F32 | DType::C32) {
        1e-4
    } else {
        1e-10
    };
    let mut calls = 0;
    while plan.refining() {
        let before = c.clone();
        plan.execute(
            alpha,
            &[StridedView::of(&a), StridedView::of(&b)],
            beta,
            &mut StridedViewMut::of(&mut c).unwrap(),
        )
        .unwrap();
        let want = product.mapv(|x| alpha * x) + before.mapv(|x| beta * x);
        close(&c, &want, tol);
        calls += 1;
        assert!(
            calls <= 1 + ttgt::plan::ROUNDS * (1 + ttgt::plan::ALTERNATIVES) + 1,
            "{spec}: never settles"
        );
    }
    // settled: the choice stays, with its measured time known
    let kept = plan.chosen_index();
    assert!(plan.measured_seconds(kept).is_some());
    run(&plan, &a, &b, &mut c);
    close(&c, &product, tol);
    assert_eq!(plan.chosen_index(), kept);
    plan.refine_from_executions();
    plan.choose(0).unwrap();
    assert!(!plan.refining());
    true
}

#[test]
fn refinement_from_executions_gives_the_contraction_every_call() {
    let refined = [
        refinement_case::<f64>("abc,cbd->ad", &[30, 20, 40], &[40, 20, 30], 11),
        refinement_case::<f64>("aikb,kjab->ij", &[19, 5, 19, 5], &[19, 5, 19, 5], 12),
        refinement_case::<Complex64>("abcd,dbef->acef", &[8, 6, 7, 9], &[9, 6, 8, 5], 13),
        refinement_case::<f32>("bij,bjk->bik", &[6, 40, 30], &[6, 30, 50], 14),
        refinement_case::<f32>("bij,bkj->bik", &[6, 40, 30], &[6, 50, 30], 15),
        refinement_case::<f64>("abcd,dbef->acef", &[8, 6, 7, 9], &[9, 6, 8, 5], 16),
    ];
    assert!(
        refined.iter().filter(|&&r| r).count() >= 3,
        "too few plans refined: {refined:?}"
    );
}

/// The cached plans of `contract` refine unless refinement is switched off; plans made while
/// it is off never try other candidates.
#[test]
fn cached_plans_refine_unless_switched_off() {
    let r = |d: &[usize]| Layout::row_major(d).unwrap();
    let o = PlanOptions::default();
    let (l, lc) = ([r(&[33, 21, 41]), r(&[41, 21, 31])], r(&[33, 31]));
    let get = || cached_contraction_plan("abc,cbd->ad", &l, &lc, DType::F64, &o).unwrap();
    assert!(get().refining() || get().candidates().len() < 2);
    let was = ttgt::plan::refinement_enabled();
    ttgt::plan::set_refinement(false);
    ttgt::plan::clear_plan_caches();
    let off = get();
    ttgt::plan::set_refinement(was);
    assert!(!off.refining());
    ttgt::plan::clear_plan_caches();
}

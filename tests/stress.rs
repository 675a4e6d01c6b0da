//! Concurrency stress: OS threads, each inside its own rayon pool of 1 to 3 threads (and some
//! with a per-thread override), call `contract`, `contract_into`, `einsum`, `permute`,
//! `permute_in_place` and a shared cached `ContractionPlan` over and over, while another
//! thread changes every process-wide setting under them: the profile, workspace retention,
//! refinement, the default thread count, the transposition rules, and clears the
//! transposition plan cache. Every result is checked against the reference loops.
//!
//! Runs `TTGT_STRESS_SECONDS` seconds (default 2). `.ci/tsan.sh` runs it under
//! ThreadSanitizer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn, Slice};
use ttgt::plan::PlanOptions;
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, Layout};

/// A deterministic array of `shape` (values in [-2, 2]).
fn array(shape: &[usize], salt: usize) -> ArrayD<f64> {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|i| ((i * 37 + salt * 11) % 17) as f64 / 4.0 - 2.0)
        .collect();
    ArrayD::from_shape_vec(IxDyn(shape), v).unwrap()
}

fn assert_close(got: &ArrayD<f64>, want: &ArrayD<f64>, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-10 * (1.0 + w.abs()),
            "{what}: {g} != {w}"
        );
    }
}

/// One kind of call, with its operands and the reference result.
struct Case {
    spec: &'static str,
    ops: Vec<ArrayD<f64>>,
    want: ArrayD<f64>,
}

fn cases() -> Vec<Case> {
    let make = |spec: &'static str, shapes: &[&[usize]]| {
        let ops: Vec<ArrayD<f64>> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| array(s, k))
            .collect();
        let views: Vec<_> = ops.iter().map(|a| a.view()).collect();
        let want = ttgt::reference::einsum(spec, &views).unwrap();
        Case { spec, ops, want }
    };
    vec![
        make("abcd,dbef->acef", &[&[6, 5, 4, 7], &[7, 5, 3, 4]]),
        make("ij,jk->ik", &[&[33, 17], &[17, 29]]),
        make("bij,bjk->bik", &[&[3, 8, 9], &[3, 9, 5]]),
        make("aikb,kjab->ij", &[&[5, 5, 53, 5], &[53, 5, 5, 5]]),
        make("ijm,mk->ijk", &[&[5, 5, 5], &[5, 5]]),
        make("ab,bc,cd->ad", &[&[9, 40], &[40, 3], &[3, 11]]),
        make("abc->cab", &[&[40, 33, 29]]),
    ]
}

/// One round of every call kind on the calling thread.
fn round(cases: &[Case], plan: &ContractionPlan, round: usize) {
    for (k, c) in cases.iter().enumerate() {
        let views: Vec<_> = c.ops.iter().map(|a| a.view()).collect();
        match (c.ops.len(), (round + k) % 3) {
            (1, _) => {
                let got = ttgt::permute(&c.ops[0], &[2, 0, 1]).unwrap();
                assert_close(&got, &c.want, c.spec);
            }
            (2, 0) => {
                let got = ttgt::contract(c.spec, &c.ops[0], &c.ops[1]).unwrap();
                assert_close(&got, &c.want, c.spec);
            }
            (2, 1) => {
                // Into every other element of a wider C (a strided output), beta = 1.
                let mut wide_shape = c.want.shape().to_vec();
                let last = wide_shape.len() - 1;
                wide_shape[last] *= 2;
                let mut wide = ArrayD::<f64>::ones(IxDyn(&wide_shape));
                let mut view = wide.view_mut();
                view.slice_axis_inplace(ndarray::Axis(last), Slice::new(0, None, 2));
                ttgt::contract_into(c.spec, 2.0, &c.ops[0], &c.ops[1], 1.0, &mut view).unwrap();
                let want = c.want.mapv(|w| 2.0 * w + 1.0);
                assert_close(&view.to_owned(), &want, c.spec);
            }
            _ => {
                let got = ttgt::einsum(c.spec, &views).unwrap();
                assert_close(&got, &c.want, c.spec);
            }
        }
    }
    // An in-place permutation of the rank-3 operand (the chunk movers on this pool's threads).
    let c = &cases[cases.len() - 1];
    let mut v: Vec<f64> = c.ops[0].iter().copied().collect();
    let shape =
        ttgt::transpose::inplace::permute_in_place(&mut v, c.ops[0].shape(), &[2, 0, 1]).unwrap();
    assert_eq!(shape, c.want.shape());
    assert!(v.iter().eq(c.want.iter()), "permute_in_place");
    // The shared plan (refining from its executions on every thread at once).
    let (a, b) = (&cases[0].ops[0], &cases[0].ops[1]);
    let mut c = ArrayD::<f64>::zeros(IxDyn(cases[0].want.shape()));
    {
        let mut cv = StridedViewMut::of(&mut c).unwrap();
        plan.execute(1.0, &[StridedView::of(a), StridedView::of(b)], 0.0, &mut cv)
            .unwrap();
    }
    assert_close(&c, &cases[0].want, "shared plan");
}

#[test]
fn calls_from_many_pools_while_settings_change() {
    let seconds: f64 = std::env::var("TTGT_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let cases = Arc::new(cases());
    let c0 = &cases[0];
    let mut plan = ContractionPlan::with_options(
        c0.spec,
        &[Layout::of(&c0.ops[0]), Layout::of(&c0.ops[1])],
        &Layout::of(&c0.want),
        ttgt::DType::F64,
        &PlanOptions::default(),
    )
    .unwrap();
    plan.refine_from_executions();
    let plan = Arc::new(plan);
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..6)
        .map(|k| {
            let (cases, plan, stop, rounds) =
                (cases.clone(), plan.clone(), stop.clone(), rounds.clone());
            std::thread::spawn(move || {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(1 + k % 3)
                    .build()
                    .unwrap();
                pool.install(|| {
                    let mut r = 0;
                    while !stop.load(Ordering::Relaxed) {
                        if k.is_multiple_of(2) {
                            ttgt::threads::with_threads(1 + r % 2, || round(&cases, &plan, r));
                        } else {
                            round(&cases, &plan, r);
                        }
                        r += 1;
                        rounds.fetch_add(1, Ordering::Relaxed);
                    }
                });
            })
        })
        .collect();
    // The settings, changed under the callers until the deadline.
    let base = ttgt::model::profile();
    let mut slow = base.clone();
    for g in &mut slow.copy {
        *g *= 0.5;
    }
    let retention = ttgt::tensor::workspace_retention();
    let mut step = 0usize;
    while Instant::now() < deadline {
        ttgt::model::set_profile(if step.is_multiple_of(2) {
            slow.clone()
        } else {
            base.clone()
        });
        ttgt::tensor::set_workspace_retention([0, 1 << 20, 64 << 20][step % 3]);
        ttgt::plan::set_refinement(step % 4 != 3);
        ttgt::threads::set_num_threads([None, Some(1), Some(2)][step % 3]);
        ttgt::transpose::set_line_tile_streaming([None, Some(true), Some(false)][step % 3]);
        ttgt::transpose::set_scatter_regroup([None, Some(false)][step % 2]);
        if step.is_multiple_of(5) {
            ttgt::transpose::clear_plan_cache();
        }
        step += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("a worker panicked");
    }
    ttgt::model::set_profile(base);
    ttgt::tensor::set_workspace_retention(retention);
    ttgt::plan::set_refinement(true);
    ttgt::threads::set_num_threads(None);
    ttgt::transpose::set_line_tile_streaming(None);
    ttgt::transpose::set_scatter_regroup(None);
    let done = rounds.load(Ordering::Relaxed);
    assert!(done >= 6, "only {done} rounds ran in {seconds} s");
    println!(
        "{done} rounds of {} calls each, {step} setting changes",
        cases.len() + 2
    );
}

//! The contraction planner and executor on arbitrary two-operand contractions: random labels
//! (batch, free, contracted, summed, diagonal), extents, strided operands (steps, reversed
//! axes, permuted storage), strided outputs, alpha and beta, element types, thread counts and
//! workspace limits; every candidate the planner lists may be forced. A plan either fails with
//! an error or its result matches the reference loops; a failed execution leaves C as it was.
#![no_main]

use libfuzzer_sys::fuzz_target;
mod common;

use common::{Bytes, Recipe};
use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, IxDyn};
use num_complex::Complex64;
use ttgt::plan::{PlanOptions, PlanTuning};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, Element, Layout};

fn run<T: Element>(
    b: &mut Bytes<'_>,
    value: impl Fn(usize) -> T,
    scalar: impl Fn(usize) -> T,
    tol: f64,
) {
    // Up to six labels with extents 1 to 4; each in A, B and C or not (a label in C only is
    // an error the planner must report).
    let n = 1 + b.next() % 6;
    let letters: Vec<char> = "pqrstu".chars().take(n).collect();
    let extent: Vec<usize> = (0..n).map(|_| 1 + b.next() % 4).collect();
    let member: Vec<usize> = (0..n).map(|_| b.next()).collect();
    let term = |bit: usize, b: &mut Bytes<'_>| {
        let mut t: Vec<usize> = (0..n).filter(|&l| member[l] >> bit & 1 == 1).collect();
        let r = t.len();
        for k in (1..r).rev() {
            t.swap(k, b.next() % (k + 1));
        }
        t
    };
    let (mut ta, tb, tc) = (term(0, b), term(1, b), term(2, b));
    // A diagonal: one of A's labels twice.
    if member[0] & 8 != 0 && !ta.is_empty() && ta.len() < 5 {
        let l = ta[0];
        ta.push(l);
    }
    let text = |t: &[usize]| t.iter().map(|&l| letters[l]).collect::<String>();
    let spec = format!("{},{}->{}", text(&ta), text(&tb), text(&tc));
    let dims = |t: &[usize]| t.iter().map(|&l| extent[l]).collect::<Vec<usize>>();
    let (da, db, dc) = (dims(&ta), dims(&tb), dims(&tc));
    let (ra, rb, rc) = (
        Recipe::read(b, da.len()),
        Recipe::read(b, db.len()),
        Recipe::read(b, dc.len()),
    );
    let store = |d: &[usize], r: &Recipe, salt: usize| {
        let s = r.storage(d);
        let len = s.iter().product::<usize>();
        ArrayD::from_shape_vec(IxDyn(&s), (0..len).map(|i| value(i * 3 + salt)).collect())
            .expect("shape and data agree")
    };
    let (sa, sb, mut sc) = (store(&da, &ra, 1), store(&db, &rb, 2), store(&dc, &rc, 3));
    let a: ArrayViewD<'_, T> = ra.shape(sa.view());
    let bv: ArrayViewD<'_, T> = rb.shape(sb.view());
    let (alpha, beta) = (scalar(b.next()), scalar(b.next()));
    let threads = 1 + b.next() % 2;
    let limit = b.next();
    let pick = b.next();
    let c0: ArrayD<T> = rc.shape(sc.view()).to_owned();
    let want = ttgt::reference::einsum(&spec, &[a.clone(), bv.clone()]);
    let opts = PlanOptions {
        threads: Some(threads),
        // Every candidate listed (the model alone plans the smallest ones as loops only).
        tuning: PlanTuning::Measure {
            budget: std::time::Duration::ZERO,
        },
        // A limit below C's size leaves only candidates that write C in place or directly.
        workspace_limit: (limit & 1 == 1).then(|| (limit >> 1) * 8),
        ..Default::default()
    };
    let mut cv: ArrayViewMutD<'_, T> = rc.shape(sc.view_mut());
    let plan = ContractionPlan::with_options(
        &spec,
        &[Layout::of(&a), Layout::of(&bv)],
        &Layout::of(&cv),
        T::DTYPE,
        &opts,
    );
    let (mut plan, want) = match (plan, want) {
        (Ok(p), Ok(w)) => (p, w),
        (Err(_), _) => return,
        (Ok(_), Err(e)) => panic!("{spec}: planned where the reference fails: {e}"),
    };
    let count = plan.candidates().len();
    if count > 0 {
        plan.choose(pick % count)
            .expect("a listed candidate can be chosen");
    }
    let what = plan.chosen().map(|c| c.summary()).unwrap_or_default();
    let result = {
        let mut out = StridedViewMut::of(&mut cv).expect("C's view is valid");
        plan.execute(
            alpha,
            &[StridedView::of(&a), StridedView::of(&bv)],
            beta,
            &mut out,
        )
    };
    if result.is_err() {
        assert!(
            cv.iter()
                .zip(c0.iter())
                .all(|(x, y)| x == y || (x != x && y != y)),
            "{spec} ({what}): a failed execution changed C"
        );
        return;
    }
    for (idx, got) in cv.indexed_iter() {
        let w = alpha * want[&idx] + beta * c0[&idx];
        let scale = 1.0 + w.abs_f64();
        assert!(
            (*got - w).abs_f64() <= tol * scale * 64.0,
            "{spec} ({what}) at {idx:?}: {got:?} != {w:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let scalars = [0.0, 1.0, -0.5, 2.0];
    match b.next() % 4 {
        0 => run::<f64>(
            &mut b,
            |i| ((i * 7) % 9) as f64 - 4.0,
            |x| scalars[x % 4],
            1e-13,
        ),
        1 => run::<f32>(
            &mut b,
            |i| ((i * 7) % 9) as f32 - 4.0,
            |x| scalars[x % 4] as f32,
            1e-5,
        ),
        2 => run::<Complex64>(
            &mut b,
            |i| Complex64::new(((i * 7) % 9) as f64 - 4.0, (i % 3) as f64),
            |x| Complex64::new(scalars[x % 4], scalars[(x >> 2) % 4]),
            1e-13,
        ),
        _ => run::<num_complex::Complex32>(
            &mut b,
            |i| num_complex::Complex32::new(((i * 7) % 9) as f32 - 4.0, (i % 3) as f32),
            |x| num_complex::Complex32::new(scalars[x % 4] as f32, scalars[(x >> 2) % 4] as f32),
            1e-5,
        ),
    }
});

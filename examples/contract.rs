//! The mission call: `contract("abcd,dbef->acef", &a, &b)` on f64 tensors with every extent
//! 40 (8.2 GFLOP), then the same contraction through an explicit plan to show where the time
//! goes, and a check of sampled output elements against the reference engine.
//!
//! Run: `cargo run --release --example contract [extent]`

use std::time::Instant;

use ndarray::ArrayD;
use rand::{rngs::StdRng, Rng, SeedableRng};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{einsum::parse, reference, ContractionPlan, Layout};

fn random(shape: &[usize], rng: &mut StdRng) -> ArrayD<f64> {
    ArrayD::from_shape_simple_fn(shape.to_vec(), || rng.random_range(-1.0..1.0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let e: usize = match std::env::args().nth(1) {
        Some(s) => s.parse()?,
        None => 40,
    };
    let spec = "abcd,dbef->acef";
    let mut rng = StdRng::seed_from_u64(7);
    let a = random(&[e, e, e, e], &mut rng);
    let b = random(&[e, e, e, e], &mut rng);

    // The one-line call.
    let t = Instant::now();
    let c = ttgt::contract(spec, &a, &b)?;
    let first = t.elapsed().as_secs_f64();

    // The same through a plan, executed a few times, with the step breakdown.
    let mut c2 = ArrayD::<f64>::zeros(c.shape());
    let plan = ContractionPlan::new(
        spec,
        &[Layout::of(&a), Layout::of(&b)],
        &Layout::of(&c2),
        ttgt::DType::F64,
    )?;
    let mut best = None;
    for _ in 0..3 {
        let mut cv = StridedViewMut::of(&mut c2)?;
        let times = plan.execute(
            1.0,
            &[StridedView::of(&a), StridedView::of(&b)],
            0.0,
            &mut cv,
        )?;
        if best.is_none_or(|b: ttgt::StepTimes| times.total() < b.total()) {
            best = Some(times);
        }
    }
    let best = best.ok_or("no run")?;
    let gflop = plan.flops() / 1e9;
    let secs = best.total().as_secs_f64();
    println!("{spec}  extents {e}  f64  {gflop:.2} GFLOP");
    println!(
        "contract():       {:.4} s  ({:.1} GFLOP/s, first call)",
        first,
        gflop / first
    );
    println!(
        "plan.execute():   {:.4} s  ({:.1} GFLOP/s, best of 3)",
        secs,
        gflop / secs
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!(
        "  prepare {:.2} ms | pack A {:.2} ms | pack B {:.2} ms | GEMM {:.2} ms | write C {:.2} ms",
        ms(best.prepare),
        ms(best.pack_a),
        ms(best.pack_b),
        ms(best.gemm),
        ms(best.write_c)
    );
    print!("{}", plan.explain());

    // Check 1000 sampled elements against the reference engine.
    let bound = parse(spec)?.bind(&[a.shape(), b.shape()])?;
    let ops = [StridedView::of(&a), StridedView::of(&b)];
    let mut worst: f64 = 0.0;
    for _ in 0..1000 {
        let idx: Vec<usize> = c.shape().iter().map(|&n| rng.random_range(0..n)).collect();
        let want = reference::element(&bound, &ops, &idx);
        let got = c[idx.as_slice()];
        let agree = c2[idx.as_slice()];
        worst = worst.max((got - want).abs() / want.abs().max(1.0));
        worst = worst.max((agree - want).abs() / want.abs().max(1.0));
    }
    if worst > 1e-12 {
        return Err(format!("check FAILED: max relative error {worst:.2e}").into());
    }
    println!("check: ok (1000 sampled elements vs the reference engine, max rel err {worst:.1e})");
    Ok(())
}

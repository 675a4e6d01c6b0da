//! A network of five operands: the four-index AO-to-MO transformation of quantum chemistry,
//! `(ij|kl) = sum_pqrs C_pi C_qj (pq|rs) C_rk C_sl`, as one einsum call. Prints the path
//! ttgt chooses (fewest predicted seconds) beside left-to-right evaluation, times both step by step, and
//! checks sampled elements of the result against a direct sum.
//!
//! Run: `cargo run --release --example network [n]` (n basis functions, default 32).

use std::time::Instant;

use ndarray::ArrayD;
use rand::{rngs::StdRng, Rng, SeedableRng};
use ttgt::plan::{PathOptions, PathStrategy};

fn random(shape: &[usize], rng: &mut StdRng) -> ArrayD<f64> {
    ArrayD::from_shape_simple_fn(shape.to_vec(), || rng.random_range(-1.0..1.0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(s) => s.parse()?,
        None => 32,
    };
    let spec = "pi,qj,pqrs,rk,sl->ijkl";
    let mut rng = StdRng::seed_from_u64(11);
    let c = random(&[n, n], &mut rng);
    let eri = random(&[n, n, n, n], &mut rng);
    let ops = [c.view(), c.view(), eri.view(), c.view(), c.view()];
    let shapes: Vec<&[usize]> = ops.iter().map(|a| a.shape()).collect();

    let mut result = None;
    for strategy in [PathStrategy::Auto, PathStrategy::LeftToRight] {
        let options = PathOptions {
            strategy,
            ..Default::default()
        };
        let path = ttgt::einsum_path(spec, &shapes, &options)?;
        print!("{path}");
        ttgt::einsum_along(&path, &ops)?; // plans every step once
        let t = Instant::now();
        let (r, steps) = ttgt::einsum_along(&path, &ops)?;
        let total = t.elapsed().as_secs_f64();
        let each: Vec<String> = steps
            .iter()
            .map(|d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
            .collect();
        println!(
            "  {:.2} ms in all ({}), {:.2} GFLOP/s\n",
            total * 1e3,
            each.join(" + "),
            path.flops() / total / 1e9
        );
        result.get_or_insert(r);
    }

    // A few elements summed directly over p, q, r, s.
    let r = result.ok_or("no result")?;
    let mut worst: f64 = 0.0;
    for _ in 0..4 {
        let idx: Vec<usize> = (0..4).map(|_| rng.random_range(0..n)).collect();
        let (i, j, k, l) = (idx[0], idx[1], idx[2], idx[3]);
        let mut want = 0.0;
        for p in 0..n {
            for q in 0..n {
                for s in 0..n {
                    let mut inner = 0.0;
                    for rr in 0..n {
                        inner += eri[[p, q, rr, s]] * c[[rr, k]];
                    }
                    want += c[[p, i]] * c[[q, j]] * inner * c[[s, l]];
                }
            }
        }
        let got = r[[i, j, k, l].as_slice()];
        worst = worst.max((got - want).abs() / want.abs().max(1.0));
    }
    println!("check of 4 sampled elements: max relative error {worst:.1e}");
    if worst > 1e-10 {
        return Err("the result differs from the direct sum".into());
    }
    Ok(())
}

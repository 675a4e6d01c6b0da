//! Per-call time of small contractions, called from the main thread (outside any rayon
//! pool, as most programs call a library) and from inside a 2-thread pool: the best of five
//! rounds of 2000 `contract_into` calls each, in microseconds, one Markdown row per case.
//! First, the time of the process's first contraction (8x8 matrices: planning, the thread
//! pool's start and, where the problem needs one, the profile).
//!
//! `cargo run --release --example small_calls`
use ndarray::ArrayD;
use std::time::Instant;

/// Prints one row: `spec` on operands of ones of shapes `sa` and `sb`.
fn run(spec: &str, sa: Vec<usize>, sb: Vec<usize>, pool: &rayon::ThreadPool) -> ttgt::Result<()> {
    let a = ArrayD::<f64>::from_elem(sa, 1.0);
    let b = ArrayD::<f64>::from_elem(sb, 1.0);
    let shape = ttgt::contract(spec, &a, &b)?.shape().to_vec();
    let mut c = ArrayD::<f64>::zeros(shape);
    let time = |c: &mut ArrayD<f64>| -> ttgt::Result<f64> {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..2000 {
                ttgt::contract_into(spec, 1.0, &a, &b, 0.0, c)?;
            }
            best = best.min(t.elapsed().as_secs_f64() / 2000.0);
        }
        Ok(best * 1e6)
    };
    let p = pool.install(|| time(&mut c))?;
    let m = time(&mut c)?;
    println!("| `{spec}` | {:?} | {m:.1} | {p:.1} |", a.shape());
    Ok(())
}

fn main() -> ttgt::Result<()> {
    let a = ArrayD::<f64>::from_elem(vec![8, 8], 1.0);
    let t = Instant::now();
    let c = ttgt::contract("ij,jk->ik", &a, &a)?;
    let first = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let c2 = ttgt::contract("ij,jk->ik", &a, &a)?;
    let second = t.elapsed().as_secs_f64();
    assert_eq!((c[[0, 0]], c2[[0, 0]]), (8.0, 8.0));
    println!(
        "first call of the process: {:.2} ms (second: {:.1} us)\n",
        first * 1e3,
        second * 1e6
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("a thread pool");
    // (spec, extent of every index, rank of A, rank of B)
    let cases = [
        ("abc,bdc->ad", 4, 3, 3),
        ("abc,bdc->ad", 16, 3, 3),
        ("abc,dbc->adc", 4, 3, 3),
        ("abc,dbc->adc", 8, 3, 3),
        ("abc,dbc->adc", 16, 3, 3),
        ("ij,j->i", 64, 2, 1),
        ("ij,j->i", 256, 2, 1),
        ("ij,jk->ik", 32, 2, 2),
        ("ij,jk->ik", 64, 2, 2),
        ("bij,bjk->bik", 16, 3, 3),
        ("abcd,dbef->acef", 8, 4, 4),
        ("abcd,dbef->acef", 12, 4, 4),
    ];
    println!("| spec | shape of A | main thread, us | inside a pool, us |");
    println!("| --- | --- | ---: | ---: |");
    for (spec, n, ra, rb) in cases {
        run(spec, vec![n; ra], vec![n; rb], &pool)?;
    }
    Ok(())
}

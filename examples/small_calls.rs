//! Per-call time of small contractions, called from the main thread (outside any rayon
//! pool, as most programs call a library) and from inside a 2-thread pool: the best of five
//! rounds of 2000 `contract_into` calls each, in microseconds, one Markdown row per case.
//!
//! `cargo run --release --example small_calls`
use ndarray::ArrayD;
use std::time::Instant;
fn run(spec: &str, sa: Vec<usize>, sb: Vec<usize>, pool: &rayon::ThreadPool) {
    let a = ArrayD::<f64>::from_elem(sa, 1.0);
    let b = ArrayD::<f64>::from_elem(sb, 1.0);
    let shape = ttgt::contract(spec, &a, &b).unwrap().shape().to_vec();
    let mut c = ArrayD::<f64>::zeros(shape);
    let time = |c: &mut ArrayD<f64>| {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..2000 {
                ttgt::contract_into(spec, 1.0, &a, &b, 0.0, c).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64() / 2000.0);
        }
        best * 1e6
    };
    let p = pool.install(|| time(&mut c));
    let m = time(&mut c);
    println!("| `{spec}` | {:?} | {:.1} | {:.1} |", a.shape(), m, p);
}
fn main() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let n = |k: usize, r: usize| vec![k; r];
    run("abc,bdc->ad", n(4, 3), n(4, 3), &pool);
    run("abc,bdc->ad", n(16, 3), n(16, 3), &pool);
    run("abc,dbc->adc", n(4, 3), n(4, 3), &pool);
    run("abc,dbc->adc", n(8, 3), n(8, 3), &pool);
    run("abc,dbc->adc", n(16, 3), n(16, 3), &pool);
    run("ij,j->i", n(64, 2), n(64, 1), &pool);
    run("ij,j->i", n(256, 2), n(256, 1), &pool);
    run("ij,jk->ik", n(32, 2), n(32, 2), &pool);
    run("ij,jk->ik", n(64, 2), n(64, 2), &pool);
    run("bij,bjk->bik", n(16, 3), n(16, 3), &pool);
    run("abcd,dbef->acef", n(8, 4), n(8, 4), &pool);
    run("abcd,dbef->acef", n(12, 4), n(12, 4), &pool);
}

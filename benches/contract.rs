//! Criterion benches of whole contractions, each beside the GEMM of the same m, n, k run in
//! the same process (the ratio is what to read; absolute times drift on shared machines).
//!
//! Run: `cargo bench --bench contract`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndarray::{Array2, ArrayD, Dimension};

fn filled(shape: &[usize]) -> ArrayD<f64> {
    ArrayD::from_shape_fn(shape.to_vec(), |i| {
        (i.slice().iter().sum::<usize>() % 7) as f64 - 3.0
    })
}

fn bench(c: &mut Criterion) {
    let cases: &[(&str, &[usize], &[usize])] = &[
        ("abcd,dbef->acef", &[24, 24, 24, 24], &[24, 24, 24, 24]),
        ("ij,jk->ik", &[576, 576], &[576, 576]),
        ("bij,bjk->bik", &[64, 72, 72], &[64, 72, 72]),
        ("abc,bda->cd", &[48, 48, 48], &[48, 96, 48]),
    ];
    let mut g = c.benchmark_group("contract_f64");
    for &(spec, sa, sb) in cases {
        let (a, b) = (filled(sa), filled(sb));
        let plan = ttgt::einsum::parse(spec)
            .and_then(|s| s.bind(&[sa, sb]))
            .and_then(|b| b.classify())
            .expect("valid bench spec");
        let (l, m, n, k) = plan.gemm_shape();
        g.throughput(Throughput::Elements(plan.flops(ttgt::DType::F64) as u64));
        g.bench_function(spec, |bch| {
            bch.iter(|| ttgt::contract(spec, &a, &b).expect("contract"))
        });
        // The same-size plain GEMM (l batches of m×k · k×n) as the in-run reference.
        let ga = Array2::<f64>::ones((m * l, k));
        let gb = Array2::<f64>::ones((k, n));
        g.bench_function(format!("{spec} gemm-reference {}x{m}x{n}x{k}", l), |bch| {
            bch.iter(|| ga.dot(&gb))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);

//! Criterion benches of the transposition engine, each beside the machine's best copy of the
//! same bytes in the same process (per iteration the faster of memcpy and a streaming-store
//! copy; the ratio is what to read).
//!
//! Run: `cargo bench --bench transpose`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use ttgt::model::best_copy_seconds_on;
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::transpose::{TransposeOptions, TransposePlan};
use ttgt::{DType, Layout};

fn bench(c: &mut Criterion) {
    // Row-major extents and permutations of a few TTC-like shapes, scaled to 16 MiB.
    let cases: &[(&[usize], &[usize])] = &[
        (&[2048, 2048], &[1, 0]),
        (&[128, 64, 512], &[1, 0, 2]),
        (&[96, 75, 24, 24], &[3, 2, 1, 0]),
        (&[16, 16, 16, 16, 16, 4], &[5, 4, 3, 2, 1, 0]),
    ];
    let mut g = c.benchmark_group("transpose_f32");
    for &(dims, perm) in cases {
        let la = Layout::row_major(dims).expect("layout");
        let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let lb = Layout::row_major(&bd).expect("layout");
        let a: Vec<f32> = (0..la.len()).map(|i| (i % 977) as f32).collect();
        let mut b = vec![0f32; lb.len()];
        let plan = TransposePlan::new(perm, &la, &lb, DType::F32, &TransposeOptions::default())
            .expect("plan");
        g.throughput(Throughput::Bytes(plan.bytes_moved(false) as u64));
        let name = format!("{dims:?} perm {perm:?}");
        g.bench_function(&name, |bch| {
            let av = StridedView::from_slice(&a, la.clone(), 0).expect("view");
            let mut bv = StridedViewMut::from_slice(&mut b, lb.clone(), 0).expect("view");
            bch.iter(|| plan.execute(1.0, &av, 0.0, &mut bv).expect("execute"))
        });
        let mut d = vec![0f32; a.len()];
        g.bench_function(format!("{name} copy-reference"), |bch| {
            bch.iter_custom(|iters| {
                (0..iters)
                    .map(|_| Duration::from_secs_f64(best_copy_seconds_on(&a, &mut d, 1, 1)))
                    .sum()
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);

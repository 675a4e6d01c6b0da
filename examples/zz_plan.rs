use std::time::Instant;
use ttgt::{ContractionPlan, DType, Layout};
fn main() {
    let specs = [
        ("ij,jk->ik", 2, 2),
        ("abc,cbd->ad", 3, 3),
        ("abcd,dbef->acef", 4, 4),
        ("abcdef,dfgb->geac", 6, 4),
    ];
    let only: Option<String> = std::env::args().nth(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    pool.install(|| {
        for (spec, ra, rb) in specs {
            if only.as_deref().is_some_and(|o| o != spec) {
                continue;
            }
            let p = ttgt::einsum::parse(spec).unwrap();
            let mut times = Vec::new();
            let mut ncand = 0;
            let rounds = if only.is_some() { 3000 } else { 200 };
            for i in 0..rounds {
                let n = 5 + i % 20;
                let (sa, sb) = (vec![n; ra], vec![n; rb]);
                let out = p.bind(&[&sa, &sb]).unwrap().output_shape();
                let t = Instant::now();
                let plan = ContractionPlan::new(
                    spec,
                    &[
                        Layout::row_major(&sa).unwrap(),
                        Layout::row_major(&sb).unwrap(),
                    ],
                    &Layout::row_major(&out).unwrap(),
                    DType::F64,
                )
                .unwrap();
                times.push(t.elapsed().as_secs_f64());
                ncand = plan.candidates().len();
            }
            times.sort_by(|a, b| a.total_cmp(b));
            println!(
                "{spec}: plan time median {:.1} us, min {:.1} us, {ncand} candidates",
                times[times.len() / 2] * 1e6,
                times[0] * 1e6
            );
        }
    });
}

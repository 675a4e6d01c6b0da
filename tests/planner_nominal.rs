//! The planner's ranking under the built-in (nominal) GEMM model: with the quick GEMM probe off
//! and no stored profile, a contraction that is one GEMM as written runs as that GEMM, copying
//! nothing. The ranking then follows fixed rates, not the timings of the run, so the choice is
//! the same on every machine. (This file holds one test: it sets the environment of its whole
//! process before the first plan is made.)

use ttgt::plan::CandidateKind;
use ttgt::{ContractionPlan, DType, Layout};

#[test]
fn gemm_shaped_contraction_copies_nothing() {
    // Read once per process, before any plan: the probe off, and a profile path that holds none.
    std::env::set_var("TTGT_GEMM_PROBE", "0");
    std::env::set_var("TTGT_PROFILE", "/nonexistent/ttgt-test-profile.json");
    let r = |d: &[usize]| Layout::row_major(d).unwrap();
    for (spec, a, b, c) in [
        ("ij,jk->ik", &[30, 40][..], &[40, 50][..], &[30, 50][..]),
        // both operands column-major as GEMM matrices: the GEMM's transposed-operand flags
        ("ji,kj->ik", &[40, 30], &[50, 40], &[30, 50]),
        ("bij,bjk->bik", &[3, 20, 30], &[3, 30, 24], &[3, 20, 24]),
    ] {
        for dtype in [DType::F32, DType::F64] {
            let p = ContractionPlan::new(spec, &[r(a), r(b)], &r(c), dtype).unwrap();
            let direct = p
                .candidates()
                .iter()
                .find(|c| c.kind() == CandidateKind::Direct)
                .expect("a direct GEMM");
            assert_eq!(direct.copies(), 0);
            let chosen = p.chosen().unwrap();
            assert_eq!(
                chosen.kind(),
                CandidateKind::Direct,
                "{spec} {dtype:?}: {}",
                p.explain()
            );
            assert_eq!(chosen.copies(), 0, "{spec} {dtype:?}");
        }
    }
}

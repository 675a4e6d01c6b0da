//! Real-GPU tests (feature `cuda`). Without a CUDA device each test prints a SKIPPED line and
//! passes; with `TTGT_REQUIRE_GPU=1` a missing device is a failure.
#![cfg(feature = "cuda")]

use ndarray::{ArrayD, IxDyn};
use num_complex::{Complex32, Complex64};
use ttgt::backend::cuda::device::Device;
use ttgt::Element;

fn device(test: &str) -> Option<Device> {
    match Device::new(0) {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("TTGT_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("{test}: TTGT_REQUIRE_GPU=1 but no CUDA device is usable: {e}");
            }
            println!("SKIPPED: no CUDA device ({e}) [{test}]");
            None
        }
    }
}

fn data<T: Element>(shape: &[usize], seed: usize) -> ArrayD<T> {
    let mut k = seed;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        k = k.wrapping_mul(1103515245).wrapping_add(12345) % (1 << 30);
        T::from_parts(
            (k % 200) as f64 / 10.0 - 10.0,
            (k / 200 % 100) as f64 / 10.0,
        )
    })
}

fn perms(n: usize) -> Vec<Vec<usize>> {
    fn rec(p: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
        if k == p.len() {
            out.push(p.clone());
            return;
        }
        for i in k..p.len() {
            p.swap(k, i);
            rec(p, k + 1, out);
            p.swap(k, i);
        }
    }
    let mut out = Vec::new();
    rec(&mut (0..n).collect(), 0, &mut out);
    out
}

fn transposes<T: Element>(dev: &Device, sizes: &[usize]) {
    let a: ArrayD<T> = data(sizes, 3);
    let da = dev.upload(&a).unwrap();
    for perm in perms(sizes.len()) {
        let db = dev.permute(&da, &perm).unwrap();
        let got = dev.download(&db).unwrap();
        let want = a.view().permuted_axes(IxDyn(&perm));
        assert_eq!(got, want, "{perm:?} {}", T::DTYPE);
    }
}

#[test]
fn all_permutations_all_dtypes() {
    let Some(dev) = device("all_permutations_all_dtypes") else {
        return;
    };
    transposes::<f32>(&dev, &[5, 4, 3, 6, 2, 7]);
    transposes::<f64>(&dev, &[3, 2, 5, 2, 3, 4]);
    transposes::<Complex32>(&dev, &[7, 3, 33, 2]);
    transposes::<Complex64>(&dev, &[31, 2, 3, 17]);
}

#[test]
fn alpha_beta_and_ttc_shapes() {
    let Some(dev) = device("alpha_beta_and_ttc_shapes") else {
        return;
    };
    let cases = ttgt::bench::parse_ttc(ttgt::bench::TTC_TSV).unwrap();
    for c in cases.iter().take(20) {
        let sizes: Vec<usize> = c.sizes.iter().map(|&s| (s / 4).max(2)).collect();
        let a: ArrayD<f64> = data(&sizes, 1);
        let da = dev.upload(&a).unwrap();
        let bshape: Vec<usize> = c.perm.iter().map(|&p| sizes[p]).collect();
        let b0: ArrayD<f64> = data(&bshape, 2);
        let mut db = dev.upload(&b0).unwrap();
        dev.permute_into(&c.perm, 2.0, &da, -0.5, &mut db).unwrap();
        let got = dev.download(&db).unwrap();
        let want = a.view().permuted_axes(IxDyn(&c.perm)).mapv(|x| 2.0 * x) + b0.mapv(|x| -0.5 * x);
        assert!(
            got.iter()
                .zip(want.iter())
                .all(|(g, w)| (g - w).abs() < 1e-9),
            "{}",
            c.name
        );
    }
}

/// Every permutation of a rank-6 tensor with even fastest dims, with 2x2 blocks (f32 and
/// f64: `MicroBlocks::All`) and without, in the three execution modes, against the CPU.
fn micro_blocks_agree<T: Element>(dev: &mut Device) {
    use ttgt::backend::cuda::ttlg::MicroBlocks;
    let sizes = [4, 6, 2, 8, 3, 4];
    let a: ArrayD<T> = data(&sizes, 5);
    let da = dev.upload(&a).unwrap();
    let mut blocked = 0;
    for setting in [MicroBlocks::All, MicroBlocks::Off] {
        dev.set_micro_blocks(setting);
        for (i, perm) in perms(6).into_iter().enumerate() {
            let bshape: Vec<usize> = perm.iter().map(|&p| sizes[p]).collect();
            let b0: ArrayD<T> = data(&bshape, 6);
            let (alpha, beta) = [(1.0, 0.0), (-2.0, 0.0), (0.5, 1.5)][i % 3];
            let (alpha, beta) = (T::from_f64(alpha), T::from_f64(beta));
            let mut db = dev.upload(&b0).unwrap();
            dev.permute_into(&perm, alpha, &da, beta, &mut db).unwrap();
            let got = dev.download(&db).unwrap();
            let want =
                a.view().permuted_axes(IxDyn(&perm)).mapv(|x| alpha * x) + b0.mapv(|x| beta * x);
            for (g, w) in got.iter().zip(want.iter()) {
                assert!(
                    (*g - *w).abs_f64() <= 1e-5 * (1.0 + w.abs_f64()),
                    "{perm:?} {} {setting:?}: {g} vs {w}",
                    T::DTYPE
                );
            }
            let la = ttgt::Layout::row_major(&sizes).unwrap();
            let lb = ttgt::Layout::row_major(&bshape).unwrap();
            let plan = dev
                .transpose_plan(&perm, &la, &lb, T::DTYPE, beta.is_exact_zero())
                .unwrap();
            blocked += usize::from(plan.problem.micro.is_some());
            assert!(setting == MicroBlocks::All || plan.problem.micro.is_none());
        }
    }
    assert!(blocked > 100, "{} {blocked} blocked plans", T::DTYPE);
}

#[test]
fn async_copy_kernels_agree() {
    let Some(mut dev) = device("async_copy_kernels_agree") else {
        return;
    };
    if let Err(e) = dev.set_async_copies(true) {
        println!("SKIPPED: {e} [async_copy_kernels_agree]");
        return;
    }
    transposes::<f32>(&dev, &[5, 4, 3, 6, 2, 7]);
    transposes::<f64>(&dev, &[3, 2, 5, 2, 3, 4]);
    transposes::<Complex32>(&dev, &[7, 3, 33, 2]);
    transposes::<Complex64>(&dev, &[31, 2, 3, 17]);
    // 2x2 blocks of f32 through cp.async, and the three execution modes.
    micro_blocks_agree::<f32>(&mut dev);
    let la = ttgt::Layout::row_major(&[64, 48, 40]).unwrap();
    let lb = ttgt::Layout::row_major(&[40, 48, 64]).unwrap();
    let p = dev
        .transpose_plan(&[2, 1, 0], &la, &lb, ttgt::DType::F64, true)
        .unwrap();
    assert!(p.kernel.starts_with("ttgt_oda_"), "{}", p.kernel);
}

#[test]
fn micro_blocked_and_element_wise_agree() {
    let Some(mut dev) = device("micro_blocked_and_element_wise_agree") else {
        return;
    };
    micro_blocks_agree::<f32>(&mut dev);
    micro_blocks_agree::<f64>(&mut dev);
}

fn contraction<T: Element>(dev: &Device, spec: &str, sa: &[usize], sb: &[usize]) {
    let a: ArrayD<T> = data(sa, 4);
    let b: ArrayD<T> = data(sb, 5);
    let want = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    let got = dev
        .download(&dev.contract(spec, &da, &db).unwrap())
        .unwrap();
    for (g, w) in got.iter().zip(want.iter()) {
        assert!(
            (*g - *w).abs_f64() <= 1e-3 * (1.0 + w.abs_f64()),
            "{spec} {}: {g} vs {w}",
            T::DTYPE
        );
    }
}

/// Asserts f64 results within 1e-9 (relative to 1 + |want|).
fn assert_close(got: &ArrayD<f64>, want: &ArrayD<f64>, what: &dyn Fn() -> String) {
    for (g, w) in got.iter().zip(want.iter()) {
        assert!(
            (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
            "{}: {g} vs {w}",
            what()
        );
    }
}

/// A, B, the initial C and the CPU reference of `C = 2 * einsum(spec, A, B) - 0.5 * C` (f64).
type AlphaBetaCase = [ArrayD<f64>; 4];

fn alpha_beta_case(spec: &str, sa: &[usize], sb: &[usize]) -> AlphaBetaCase {
    let a: ArrayD<f64> = data(sa, 4);
    let b: ArrayD<f64> = data(sb, 5);
    let r = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let c0: ArrayD<f64> = data(r.shape(), 6);
    let want = r.mapv(|x| 2.0 * x) + c0.mapv(|x| -0.5 * x);
    [a, b, c0, want]
}

/// `C = 2 * einsum(spec, A, B) - 0.5 * C` on the device against the CPU reference (f64).
fn contraction_alpha_beta(dev: &Device, spec: &str, sa: &[usize], sb: &[usize]) {
    let [a, b, c0, want] = alpha_beta_case(spec, sa, sb);
    let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    let mut dc = dev.upload(&c0).unwrap();
    dev.contract_into(spec, 2.0, &da, &db, -0.5, &mut dc)
        .unwrap();
    assert_close(&dev.download(&dc).unwrap(), &want, &|| spec.to_string());
}

#[test]
fn direct_contraction_with_alpha_beta() {
    let Some(dev) = device("direct_contraction_with_alpha_beta") else {
        return;
    };
    // A direct call (no transposes).
    contraction_alpha_beta(&dev, "bda,dc->abc", &[6, 5, 7], &[5, 4]);
    // A partial plan (the result packed, then transposed into C with beta).
    contraction_alpha_beta(&dev, "adb,cd->cba", &[64, 48, 40], &[8, 48]);
}

#[test]
fn contractions_all_dtypes() {
    let Some(dev) = device("contractions_all_dtypes") else {
        return;
    };
    for (spec, sa, sb) in [
        ("ij,jk->ik", &[33, 17][..], &[17, 9][..]),
        ("abcd,dbef->acef", &[4, 5, 6, 7], &[7, 5, 3, 2]),
        ("bij,bjk->bik", &[3, 8, 5], &[3, 5, 4]),
        ("abc,cbd->da", &[4, 5, 6], &[6, 5, 7]),
        // Direct calls on the operands in place (every transposition flag and both orders).
        ("bda,dc->abc", &[6, 5, 7], &[5, 4]),
        ("acd,db->abc", &[3, 4, 5], &[5, 6]),
        ("ad,bdc->abc", &[3, 5], &[4, 5, 6]),
        ("adc,bd->abc", &[3, 5, 4], &[6, 5]),
        ("adc,db->abc", &[3, 5, 4], &[5, 6]),
        ("ec,abed->abcd", &[5, 4], &[2, 3, 5, 6]),
        ("bda,dc->abc", &[6, 1, 7], &[1, 4]),
        // Partial packing: A and B in place, only the result transposed (tccg-1's shape);
        // A packed, B and C in place.
        ("adb,cd->cba", &[6, 5, 7], &[3, 5]),
        ("adb,cd->cba", &[64, 48, 40], &[8, 48]),
        ("dca,bd->abc", &[4, 5, 6], &[7, 4]),
    ] {
        contraction::<f32>(&dev, spec, sa, sb);
        contraction::<f64>(&dev, spec, sa, sb);
        contraction::<Complex32>(&dev, spec, sa, sb);
        contraction::<Complex64>(&dev, spec, sa, sb);
    }
}

#[test]
fn measured_tuning_keeps_results_exact() {
    let Some(mut dev) = device("measured_tuning_keeps_results_exact") else {
        return;
    };
    dev.set_tuning(ttgt::backend::cuda::ttlg::GpuTuning::Measure {
        budget: std::time::Duration::from_millis(5),
    });
    // Contractions: the measured plan (any of the planner's shortlist) with alpha and beta.
    for (spec, sa, sb) in [
        ("adb,cd->cba", &[64, 48, 40][..], &[8, 48][..]),
        ("bgfd,caeg->fedcba", &[4, 5, 6, 3], &[7, 2, 4, 5]),
        ("ka,jbki->jiba", &[3, 7], &[4, 7, 3, 4]),
    ] {
        contraction_alpha_beta(&dev, spec, sa, sb);
    }
    // Every permutation of a rank-5 tensor: the measured plans (any of the ranked slices)
    // agree with the CPU.
    transposes::<f32>(&dev, &[7, 4, 3, 6, 5]);
    transposes::<f64>(&dev, &[3, 5, 2, 6, 4]);
    let cases = ttgt::bench::parse_ttc(ttgt::bench::TTC_TSV).unwrap();
    for c in cases.iter().skip(20).step_by(2) {
        let sizes: Vec<usize> = c.sizes.iter().map(|&s| (s / 3).max(2)).collect();
        let a: ArrayD<f32> = data(&sizes, 5);
        let da = dev.upload(&a).unwrap();
        let bshape: Vec<usize> = c.perm.iter().map(|&p| sizes[p]).collect();
        let b0: ArrayD<f32> = data(&bshape, 6);
        let mut db = dev.upload(&b0).unwrap();
        dev.permute_into(&c.perm, 1.5, &da, 0.5, &mut db).unwrap();
        let got = dev.download(&db).unwrap();
        let want = a.view().permuted_axes(IxDyn(&c.perm)).mapv(|x| 1.5 * x) + b0.mapv(|x| 0.5 * x);
        assert!(
            got.iter()
                .zip(want.iter())
                .all(|(g, w)| (g - w).abs() <= 1e-5 * (1.0 + w.abs())),
            "{}",
            c.name
        );
    }
}

/// Every candidate the planner weighs (direct, partial and packed), run as it is, with
/// alpha/beta, against the CPU reference; a plan run on operands of another shape is refused
/// and leaves C as it was.
#[test]
fn every_candidate_plan_agrees() {
    use ttgt::backend::cuda::contract::GpuContractionPlan;
    let Some(dev) = device("every_candidate_plan_agrees") else {
        return;
    };
    let mut kinds = std::collections::BTreeSet::new();
    for (spec, sa, sb) in [
        ("adb,cd->cba", &[6, 5, 7][..], &[3, 5][..]),
        ("dca,bd->abc", &[4, 5, 6], &[7, 4]),
        ("abcd,dbef->acef", &[4, 5, 6, 7], &[7, 5, 3, 2]),
        ("ka,jbki->jiba", &[3, 7], &[4, 7, 3, 4]),
        ("bkic,jkca->bija", &[7, 3, 4, 7], &[4, 3, 7, 7]),
        ("bda,dc->abc", &[6, 5, 7], &[5, 4]),
    ] {
        let [a, b, c0, want] = alpha_beta_case(spec, sa, sb);
        let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
        let plans =
            GpuContractionPlan::candidates(spec, sa, sb, ttgt::DType::F64, false, dev.props())
                .unwrap();
        for p in &plans {
            kinds.insert(p.kind());
            let mut dc = dev.upload(&c0).unwrap();
            dev.contract_with_plan(p, 2.0, &da, &db, -0.5, &mut dc)
                .unwrap();
            assert_close(&dev.download(&dc).unwrap(), &want, &|| p.describe());
        }
        // Operands swapped: a shape mismatch, C untouched.
        let mut dc = dev.upload(&c0).unwrap();
        assert!(dev
            .contract_with_plan(&plans[0], 2.0, &db, &da, -0.5, &mut dc)
            .is_err());
        assert_eq!(dev.download(&dc).unwrap(), c0);
    }
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    // The packed plans left their workspaces in the pool: released once, then nothing.
    assert!(dev.release_workspaces() > 0);
    assert_eq!(dev.release_workspaces(), 0);
}

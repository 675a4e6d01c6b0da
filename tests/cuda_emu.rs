//! The CUDA transpose kernels run under the CPU emulator (feature `cuda-emu`), each launch
//! planned by the host-side TTLG planner, compared with the CPU transpose.
#![cfg(feature = "cuda-emu")]

use std::collections::BTreeMap;

use ndarray::{ArrayD, IxDyn};
use num_complex::{Complex32, Complex64};
use ttgt::backend::cuda::emu;
use ttgt::backend::cuda::ttlg::{DeviceProps, Schema, TtlgOptions, TtlgPlan};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{Element, Error};

fn data<T: Element>(shape: &[usize], seed: usize) -> ArrayD<T> {
    let mut k = seed;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        k = k.wrapping_mul(1103515245).wrapping_add(12345) % (1 << 30);
        T::from_parts((k % 1000) as f64 - 500.0, (k / 1000 % 1000) as f64)
    })
}

fn permuted_shape(sizes: &[usize], perm: &[usize]) -> Vec<usize> {
    perm.iter().map(|&p| sizes[p]).collect()
}

/// `alpha * perm(a) + beta * b0` by the CPU transpose (the reference).
fn reference<T: Element>(
    perm: &[usize],
    a: &ArrayD<T>,
    alpha: T,
    beta: T,
    b0: &ArrayD<T>,
) -> Result<ArrayD<T>, String> {
    let mut want = b0.clone();
    ttgt::transpose::transpose(
        perm,
        alpha,
        &StridedView::of(a),
        beta,
        &mut StridedViewMut::of(&mut want).unwrap(),
    )
    .map_err(|e| e.to_string())?;
    Ok(want)
}

/// Runs one case; `Ok(None)` when a forced schema does not apply.
fn run<T: Element>(
    perm: &[usize],
    a: &ArrayD<T>,
    schema: Option<Schema>,
    plain: bool,
    alpha: T,
    beta: T,
) -> Result<Option<Schema>, String> {
    run_with(perm, a, schema, plain, alpha, beta, false)
}

fn run_with<T: Element>(
    perm: &[usize],
    a: &ArrayD<T>,
    schema: Option<Schema>,
    plain: bool,
    alpha: T,
    beta: T,
    index64: bool,
) -> Result<Option<Schema>, String> {
    let opts = TtlgOptions {
        schema,
        force_index64: index64,
        ..TtlgOptions::default()
    };
    Ok(run_plan(perm, &a.view(), &opts, plain, alpha, beta)?.map(|p| p.schema))
}

/// Plans `B = alpha * perm(a) + beta * B` with `opts`, runs it under the emulator and
/// compares with the CPU transpose; `Ok(None)` when a forced schema does not apply.
fn run_plan<T: Element>(
    perm: &[usize],
    a: &ndarray::ArrayViewD<'_, T>,
    opts: &TtlgOptions,
    plain: bool,
    alpha: T,
    beta: T,
) -> Result<Option<TtlgPlan>, String> {
    let bshape = permuted_shape(a.shape(), perm);
    let b0: ArrayD<T> = data(&bshape, 7);
    let want = reference(perm, &a.to_owned(), alpha, beta, &b0)?;
    let mut got = b0.clone();
    let va = StridedView::of(a);
    let mut vb = StridedViewMut::of(&mut got).unwrap();
    let plan = match TtlgPlan::new(
        perm,
        va.layout(),
        vb.layout(),
        T::DTYPE,
        plain,
        &DeviceProps::emulator(),
        opts,
    ) {
        Ok(p) => p,
        Err(Error::Unsupported(m)) if opts.schema.is_some() && m.contains("does not apply") => {
            return Ok(None)
        }
        Err(e) => return Err(format!("plan: {e}")),
    };
    emu::transpose(&plan, alpha, &va, beta, &mut vb)
        .map_err(|e| format!("{e} [{}]", plan.describe()))?;
    let tol = if alpha.is_exact_one() && beta.is_exact_zero() {
        0.0
    } else {
        1e-3
    };
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        if (*g - *w).abs_f64() > tol * (1.0 + w.abs_f64()) {
            return Err(format!(
                "element {i}: got {g}, want {w} [{}]",
                plan.describe()
            ));
        }
    }
    Ok(Some(plan))
}

fn all_perms(rank: usize) -> Vec<Vec<usize>> {
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
    rec(&mut (0..rank).collect(), 0, &mut out);
    out
}

const FORCED: [Option<Schema>; 5] = [
    None,
    Some(Schema::OrthogonalDistinct),
    Some(Schema::OrthogonalArbitrary),
    Some(Schema::FviMatchLarge),
    Some(Schema::FviMatchSmall),
];

fn tally(count: &mut BTreeMap<String, usize>, forced: Option<Schema>, got: Option<Schema>) {
    if let Some(s) = got {
        let key = match forced {
            Some(_) => format!("forced {s}"),
            None => format!("auto {s}"),
        };
        *count.entry(key).or_default() += 1;
    }
}

#[test]
fn all_720_permutations_every_schema_f32() {
    let sizes = [2, 3, 2, 5, 3, 4];
    let a: ArrayD<f32> = data(&sizes, 1);
    let mut count = BTreeMap::new();
    let mut failures = Vec::new();
    for perm in all_perms(6) {
        for forced in FORCED {
            match run(&perm, &a, forced, false, 1.0f32, 0.0) {
                Ok(s) => tally(&mut count, forced, s),
                Err(e) => failures.push(format!("{perm:?} {forced:?}: {e}")),
            }
        }
        match run(&perm, &a, None, true, 1.0f32, 0.0) {
            Ok(s) => tally(&mut count, None, s),
            Err(e) => failures.push(format!("{perm:?} plain: {e}")),
        }
    }
    eprintln!("schemas exercised: {count:?}");
    assert!(
        failures.is_empty(),
        "{} failures, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    for s in Schema::ALL {
        assert!(
            count.get(&format!("forced {s}")).copied().unwrap_or(0) > 0,
            "{s} never ran"
        );
    }
}

fn subset_all_dtypes<T: Element>(alpha: T, beta: T) {
    let sizes = [3, 2, 5, 2, 3, 2];
    let a: ArrayD<T> = data(&sizes, 3);
    let mut failures = Vec::new();
    let mut count = BTreeMap::new();
    for (i, perm) in all_perms(6).into_iter().enumerate() {
        if i % 9 != 0 {
            continue;
        }
        for forced in FORCED {
            match run(&perm, &a, forced, false, alpha, beta) {
                Ok(s) => tally(&mut count, forced, s),
                Err(e) => failures.push(format!("{perm:?} {forced:?}: {e}")),
            }
        }
        if alpha.is_exact_one() && beta.is_exact_zero() {
            if let Err(e) = run(&perm, &a, None, true, alpha, beta) {
                failures.push(format!("{perm:?} plain: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    for s in Schema::ALL {
        assert!(
            count.get(&format!("forced {s}")).copied().unwrap_or(0) > 0,
            "{s} never ran"
        );
    }
}

#[test]
fn permutations_f64_alpha_beta() {
    subset_all_dtypes::<f64>(1.0, 0.0);
    subset_all_dtypes::<f64>(-1.5, 0.0);
    subset_all_dtypes::<f64>(2.0, 0.5);
}

#[test]
fn permutations_complex() {
    subset_all_dtypes::<Complex32>(Complex32::new(1.0, 0.0), Complex32::new(0.0, 0.0));
    subset_all_dtypes::<Complex64>(Complex64::new(1.0, 0.0), Complex64::new(0.0, 0.0));
    subset_all_dtypes::<Complex64>(Complex64::new(0.5, -2.0), Complex64::new(1.0, 1.0));
    subset_all_dtypes::<f32>(3.0, -1.0);
}

#[test]
fn ttc_cases_scaled_down() {
    let cases = ttgt::bench::parse_ttc(ttgt::bench::TTC_TSV).unwrap();
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let vol: f64 = c.sizes.iter().map(|&s| s as f64).product();
        let f = (vol / 6000.0).powf(1.0 / c.sizes.len() as f64).max(1.0);
        // Scaled extents, made odd where they were even for a third of the cases.
        let sizes: Vec<usize> = c
            .sizes
            .iter()
            .map(|&s| {
                let n = ((s as f64 / f).round() as usize).max(2);
                if i % 3 == 0 {
                    n | 1
                } else {
                    n
                }
            })
            .collect();
        let a32: ArrayD<f32> = data(&sizes, i);
        let a64: ArrayD<Complex64> = data(&sizes, i);
        for forced in FORCED {
            if let Err(e) = run(&c.perm, &a32, forced, false, 1.0f32, 0.0) {
                failures.push(format!("{} {sizes:?} {forced:?} f32: {e}", c.name));
            }
        }
        if let Err(e) = run(&c.perm, &a32, None, true, 1.0f32, 0.0) {
            failures.push(format!("{} {sizes:?} plain f32: {e}", c.name));
        }
        if let Err(e) = run(
            &c.perm,
            &a64,
            None,
            false,
            Complex64::new(2.0, 1.0),
            Complex64::new(0.5, 0.0),
        ) {
            failures.push(format!("{} {sizes:?} c64: {e}", c.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn odd_and_prime_extents() {
    let mut failures = Vec::new();
    let shapes: [&[usize]; 6] = [
        &[7, 11, 13, 3],
        &[31, 37],
        &[33, 65],
        &[1, 97, 1, 5],
        &[5, 3, 29, 2, 1],
        &[67, 3, 2],
    ];
    for sizes in shapes {
        let a: ArrayD<f64> = data(sizes, 5);
        for perm in all_perms(sizes.len()) {
            for forced in FORCED {
                if let Err(e) = run(&perm, &a, forced, false, 1.0f64, 0.0) {
                    failures.push(format!("{sizes:?} {perm:?} {forced:?}: {e}"));
                }
            }
            if let Err(e) = run(&perm, &a, None, true, 1.0f64, 0.0) {
                failures.push(format!("{sizes:?} {perm:?} plain: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn long_rows_widening_and_strided_views() {
    // A long shared fastest dim (chunked FVI-Match-Large), widened to 16-byte moves.
    let a: ArrayD<f32> = data(&[3, 9000], 2);
    run(&[0, 1], &a, None, true, 1.0f32, 0.0).unwrap();
    let a: ArrayD<f32> = data(&[5, 6, 8], 2);
    let s = run(&[1, 0, 2], &a, None, true, 1.0f32, 0.0).unwrap();
    assert!(s.is_some());
    // Negative strides and a sliced input.
    let base: ArrayD<f64> = data(&[9, 40, 6], 4);
    let rev = base.slice(ndarray::s![..;-1, 3..37, ..;2]).into_dyn();
    let view = rev.to_owned();
    for perm in all_perms(3) {
        let bshape = permuted_shape(rev.shape(), &perm);
        let mut got = ArrayD::<f64>::zeros(IxDyn(&bshape));
        let va = StridedView::of(&rev);
        let mut vb = StridedViewMut::of(&mut got).unwrap();
        for forced in FORCED {
            let opts = TtlgOptions {
                schema: forced,
                ..TtlgOptions::default()
            };
            let Ok(plan) = TtlgPlan::new(
                &perm,
                va.layout(),
                vb.layout(),
                ttgt::DType::F64,
                false,
                &DeviceProps::emulator(),
                &opts,
            ) else {
                continue;
            };
            emu::transpose(&plan, 1.0, &va, 0.0, &mut vb).unwrap();
            let want = view.view().permuted_axes(IxDyn(&perm));
            drop(vb);
            assert_eq!(got, want, "{perm:?} {forced:?}");
            vb = StridedViewMut::of(&mut got).unwrap();
        }
    }
}

/// Every `step`-th permutation of a 4x3x2x6x5x4 tensor (A's fastest dim 4, B's 4 or 6 for a
/// third of the permutations: those move in 2x2 blocks) under OD and OA, forced and chosen,
/// in the three execution modes, with `micro`; returns how often each kernel family ran.
fn micro_blocked_permutations<T: Element>(
    micro: ttgt::backend::cuda::ttlg::MicroBlocks,
    step: usize,
) -> BTreeMap<String, usize> {
    let sizes = [4, 3, 2, 6, 5, 4];
    let a: ArrayD<T> = data(&sizes, 11);
    let mut kernels: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for (i, perm) in all_perms(6)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0)
    {
        let (alpha, beta) = [(1.0, 0.0), (-1.5, 0.0), (2.0, 0.5)][i / step % 3];
        let (alpha, beta) = (T::from_f64(alpha), T::from_f64(beta));
        for forced in [
            None,
            Some(Schema::OrthogonalDistinct),
            Some(Schema::OrthogonalArbitrary),
        ] {
            let opts = TtlgOptions {
                schema: forced,
                micro_blocks: micro,
                ..TtlgOptions::default()
            };
            match run_plan(&perm, &a.view(), &opts, false, alpha, beta) {
                Ok(Some(p)) => *kernels.entry(p.kernel[..12].to_string()).or_default() += 1,
                Ok(None) => {}
                Err(e) => failures.push(format!("{perm:?} {forced:?} ({alpha}, {beta}): {e}")),
            }
        }
    }
    eprintln!("{} kernels: {kernels:?}", T::DTYPE);
    assert!(
        failures.is_empty(),
        "{} failures, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    kernels
}

#[test]
fn micro_blocked_f32_all_720_permutations() {
    // The default: f32 in 2x2 blocks (q32) where the layouts allow, single elements elsewhere.
    let k = micro_blocked_permutations::<f32>(Default::default(), 1);
    for f in [
        "ttgt_od_q32_",
        "ttgt_oa_q32_",
        "ttgt_od_f32_",
        "ttgt_oa_f32_",
    ] {
        assert!(k.get(f).copied().unwrap_or(0) >= 20, "{f}: {k:?}");
    }
}

#[test]
fn micro_blocked_f64_permutations() {
    // 2x2 blocks of f64 (q64, 16-byte rows) only when asked for.
    use ttgt::backend::cuda::ttlg::MicroBlocks;
    let k = micro_blocked_permutations::<f64>(MicroBlocks::All, 3);
    for f in ["ttgt_od_q64_", "ttgt_oa_q64_"] {
        assert!(k.get(f).copied().unwrap_or(0) >= 20, "{f}: {k:?}");
    }
    let k = micro_blocked_permutations::<f64>(MicroBlocks::F32, 9);
    assert!(k.keys().all(|f| !f.contains("q64")), "{k:?}");
}

/// Every `step`-th permutation of `sizes` through the asynchronous-copy OD kernels (OD forced
/// and chosen, three execution modes); returns how often each kernel family ran.
fn async_permutations<T: Element>(sizes: &[usize], step: usize) -> BTreeMap<String, usize> {
    let a: ArrayD<T> = data(sizes, 17);
    let mut kernels: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let perms = all_perms(sizes.len());
    for (i, perm) in perms.into_iter().enumerate().filter(|(i, _)| i % step == 0) {
        let (alpha, beta) = [(1.0, 0.0), (-1.5, 0.0), (2.0, 0.5)][i / step % 3];
        let (alpha, beta) = (T::from_f64(alpha), T::from_f64(beta));
        for forced in [None, Some(Schema::OrthogonalDistinct)] {
            let opts = TtlgOptions {
                schema: forced,
                async_copies: true,
                ..TtlgOptions::default()
            };
            match run_plan(&perm, &a.view(), &opts, false, alpha, beta) {
                Ok(Some(p)) => {
                    let family = p.kernel.split('_').take(3).collect::<Vec<_>>().join("_");
                    *kernels.entry(family).or_default() += 1
                }
                Ok(None) => {}
                Err(e) => failures.push(format!("{perm:?} {forced:?} ({alpha}, {beta}): {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} {} failures, first: {:#?}",
        T::DTYPE,
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    kernels
}

#[test]
fn async_copy_od_kernels() {
    // The cp.async pipeline (S tiles in shared memory, copies S - 1 tiles ahead) in every
    // type it is built for; a grid of 3 blocks makes each block walk several slices, so the
    // stage ring wraps many times.
    let shapes: [&[usize]; 2] = [&[4, 3, 2, 6, 5, 4], &[33, 7, 40]];
    let mut all: BTreeMap<String, usize> = BTreeMap::new();
    for sizes in shapes {
        let step = if sizes.len() == 6 { 7 } else { 1 };
        for k in [
            async_permutations::<f32>(sizes, step),
            async_permutations::<f64>(sizes, step),
            async_permutations::<Complex32>(sizes, step),
            async_permutations::<Complex64>(sizes, step),
        ] {
            for (f, n) in k {
                *all.entry(f).or_default() += n;
            }
        }
    }
    eprintln!("kernels: {all:?}");
    for f in [
        "ttgt_oda_f32",
        "ttgt_oda_q32",
        "ttgt_oda_f64",
        "ttgt_oda_c32",
        "ttgt_oda_c64",
    ] {
        assert!(all.get(f).copied().unwrap_or(0) >= 10, "{f}: {all:?}");
    }
    // No register-staged OD plan when the asynchronous kernels are asked for, except for
    // 2x2 blocks of f64 (32 bytes; cp.async copies at most 16).
    assert!(
        all.keys()
            .all(|f| !f.starts_with("ttgt_od_") || f == "ttgt_od_q64"),
        "{all:?}"
    );
}

#[test]
fn micro_blocks_on_views_follow_strides_and_alignment() {
    let base: ArrayD<f32> = data(&[6, 8, 14], 12);
    let mut runs = 0;
    // Even strides, 8-byte aligned start: 2x2 blocks; 4-byte aligned start or an odd
    // stride: single elements (with the alignment taken from the addresses).
    for (view, micro) in [
        (base.slice(ndarray::s![1..5, .., 2..10]).into_dyn(), true),
        (base.slice(ndarray::s![1..5, .., 3..11]).into_dyn(), false),
        (base.slice(ndarray::s![.., ..;2, 4..8]).into_dyn(), true),
        (base.slice(ndarray::s![..;-1, 2..6, 6..12]).into_dyn(), true),
    ] {
        let addr = view.as_ptr() as usize;
        for perm in all_perms(3) {
            let bshape = permuted_shape(view.shape(), &perm);
            let opts = TtlgOptions {
                align: ttgt::backend::cuda::ttlg::address_align(&[addr, 0]),
                ..TtlgOptions::default()
            };
            let k = run_plan(&perm, &view, &opts, false, 1.0f32, 0.0)
                .unwrap_or_else(|e| panic!("{:?} {perm:?}: {e}", view.shape()))
                .unwrap()
                .kernel;
            let fvi_differs = perm[2] != 2 && bshape[2].is_multiple_of(2) && bshape[2] >= 4;
            assert_eq!(
                k.contains("q32"),
                micro && fvi_differs,
                "{:?} {:?} {perm:?}: {k}",
                view.shape(),
                view.strides()
            );
            runs += 1;
        }
    }
    assert_eq!(runs, 24);
    // A plan made for aligned data run on data that is not: an error, not a fault.
    let view = base.slice(ndarray::s![1..5, .., 3..11]).into_dyn();
    let va = StridedView::of(&view);
    let mut got = ArrayD::<f32>::zeros(IxDyn(&[8, 4, 8]));
    let mut vb = StridedViewMut::of(&mut got).unwrap();
    let plan = TtlgPlan::new(
        &[1, 0, 2],
        va.layout(),
        vb.layout(),
        ttgt::DType::F32,
        false,
        &DeviceProps::emulator(),
        &TtlgOptions::default(),
    )
    .unwrap();
    let plan2 = TtlgPlan::new(
        &[2, 1, 0],
        va.layout(),
        &ttgt::Layout::row_major(&[8, 8, 4]).unwrap(),
        ttgt::DType::F32,
        false,
        &DeviceProps::emulator(),
        &TtlgOptions::default(),
    )
    .unwrap();
    assert!(plan2.kernel.contains("q32"), "{}", plan2.describe());
    let mut got2 = ArrayD::<f32>::zeros(IxDyn(&[8, 8, 4]));
    let mut vb2 = StridedViewMut::of(&mut got2).unwrap();
    let e = emu::transpose(&plan2, 1.0, &va, 0.0, &mut vb2).unwrap_err();
    assert!(e.to_string().contains("8-byte aligned"), "{e}");
    emu::transpose(&plan, 1.0, &va, 0.0, &mut vb).unwrap();
}

#[test]
fn emulator_reports_divergent_barriers_and_out_of_bounds() {
    let mut b = vec![0f32; 4];
    let meta = [0u8; 8];
    let run = |name: &str, b: &mut Vec<f32>| {
        let p = b.as_mut_ptr();
        // SAFETY: the self-test kernels only touch `b` through the emulator's checks.
        unsafe {
            emu::launch_raw(
                name,
                [1, 1, 1],
                [64, 1, 1],
                0,
                p.cast(),
                (p.cast(), p.add(4).cast()),
                p.cast(),
                (p.cast(), p.add(4).cast()),
                &meta,
                meta.as_ptr().cast(),
                meta.as_ptr().cast(),
                0,
            )
        }
    };
    let e = run("emu_selftest_divergent_barrier", &mut b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("reached by 32 of 64 threads"), "{e}");
    let e = run("emu_selftest_out_of_bounds", &mut b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("out-of-bounds"), "{e}");
    let e = run("emu_selftest_misaligned", &mut b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("misaligned access of 8 bytes"), "{e}");
    let e = run("no_such_kernel", &mut b).unwrap_err().to_string();
    assert!(e.contains("no kernel named"), "{e}");
}

fn emulated_contraction<T: Element>(spec: &str, sa: &[usize], sb: &[usize], alpha: T, beta: T) {
    use ttgt::backend::cuda::contract::GpuContractionPlan;
    let plan = GpuContractionPlan::new(
        spec,
        sa,
        sb,
        T::DTYPE,
        beta.is_exact_zero(),
        &DeviceProps::emulator(),
    )
    .unwrap();
    emulated_plan(&plan, alpha, beta);
}

/// Runs `plan` (of `plan.spec` on `plan.shapes`) in the emulator against the reference.
fn emulated_plan<T: Element>(
    plan: &ttgt::backend::cuda::contract::GpuContractionPlan,
    alpha: T,
    beta: T,
) {
    use ttgt::backend::cuda::contract::execute_emulated;
    let (spec, sa, sb) = (plan.spec.as_str(), &plan.shapes[0], &plan.shapes[1]);
    let a: ArrayD<T> = data(sa, 4);
    let b: ArrayD<T> = data(sb, 5);
    let r = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let c0: ArrayD<T> = data(r.shape(), 6);
    let want = r.mapv(|x| alpha * x) + c0.mapv(|x| beta * x);
    let mut c = c0.clone();
    execute_emulated(
        plan,
        alpha,
        a.as_slice().unwrap(),
        b.as_slice().unwrap(),
        beta,
        c.as_slice_mut().unwrap(),
    )
    .unwrap_or_else(|e| panic!("{spec}: {e}\n{}", plan.describe()));
    for (g, w) in c.iter().zip(want.iter()) {
        assert!(
            (*g - *w).abs_f64() <= 1e-3 * (1.0 + w.abs_f64()),
            "{spec} {}: {g} vs {w}\n{}",
            T::DTYPE,
            plan.describe()
        );
    }
}

#[test]
fn ttgt_contractions_emulated_with_cpu_gemm() {
    let cases: [(&str, &[usize], &[usize]); 8] = [
        ("ij,jk->ik", &[9, 7], &[7, 5]),
        // Partial packing: the GEMM per a on A and B in place, the result transposed.
        ("adb,cd->cba", &[12, 10, 24], &[4, 10]),
        ("ij,kj->ki", &[9, 7], &[5, 7]),
        ("abcd,dbef->acef", &[4, 5, 6, 7], &[7, 5, 3, 2]),
        ("bij,bjk->bik", &[3, 8, 5], &[3, 5, 4]),
        ("abc,cbd->da", &[4, 5, 6], &[6, 5, 7]),
        ("aebf,dfce->abcd", &[3, 4, 5, 2], &[6, 2, 3, 4]),
        ("i,j->ji", &[5], &[33]),
    ];
    for (spec, sa, sb) in cases {
        emulated_contraction::<f32>(spec, sa, sb, 1.0, 0.0);
        emulated_contraction::<f64>(spec, sa, sb, 0.5, 2.0);
        emulated_contraction::<Complex32>(
            spec,
            sa,
            sb,
            Complex32::new(1.0, 0.0),
            Complex32::new(0.0, 0.0),
        );
        emulated_contraction::<Complex64>(
            spec,
            sa,
            sb,
            Complex64::new(0.5, 1.0),
            Complex64::new(-1.0, 0.5),
        );
    }
    // Unsupported on the GPU path: a clear error, no panic.
    let e = ttgt::backend::cuda::contract::GpuContractionPlan::new(
        "iij,jk->ik",
        &[3, 3, 4],
        &[4, 2],
        ttgt::DType::F64,
        true,
        &DeviceProps::emulator(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("not supported on the GPU path"),
        "{e}"
    );
}

#[test]
fn index64_kernels_and_all_rank_buckets() {
    let mut failures = Vec::new();
    let mut kernels = std::collections::BTreeSet::new();
    for (sizes, step) in [
        (&[3usize, 2, 5, 2, 3, 2][..], 11),
        (&[5, 7, 3][..], 1),
        (&[33, 4][..], 1),
    ] {
        let a: ArrayD<Complex32> = data(sizes, 9);
        for (i, perm) in all_perms(sizes.len()).into_iter().enumerate() {
            if i % step != 0 {
                continue;
            }
            for forced in FORCED {
                for wide in [false, true] {
                    match run_with(
                        &perm,
                        &a,
                        forced,
                        false,
                        Complex32::new(2.0, -1.0),
                        Complex32::new(0.5, 0.5),
                        wide,
                    ) {
                        Ok(Some(s)) => {
                            kernels.insert(format!("{}-{}", s.short_name(), wide));
                        }
                        Ok(None) => {}
                        Err(e) => {
                            failures.push(format!("{sizes:?} {perm:?} {forced:?} i64={wide}: {e}"))
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(kernels.len(), 8, "{kernels:?}");
}

/// Row-major einsum spec and operand extents of every TCCG case, extents scaled down to
/// 2..=5 (distinct per index, so that transposed strides are caught).
fn tccg_small() -> Vec<(String, Vec<usize>, Vec<usize>)> {
    ttgt::bench::parse_tccg(ttgt::bench::TCCG_TSV)
        .unwrap()
        .into_iter()
        .map(|c| {
            let (ins, _) = c.spec.split_once("->").unwrap();
            let (ta, tb) = ins.split_once(',').unwrap();
            let shape =
                |t: &str| -> Vec<usize> { t.chars().map(|ch| 2 + (ch as usize * 7) % 4).collect() };
            (c.spec.clone(), shape(ta), shape(tb))
        })
        .collect()
}

#[test]
fn direct_gemm_plans_emulated_against_the_reference() {
    use ttgt::backend::cuda::contract::GpuContractionPlan;
    let mut direct = 0;
    let mut partial = std::collections::BTreeSet::new();
    let cases = tccg_small();
    assert_eq!(cases.len(), 48);
    // Some operands in place, the others packed: one call on the mix (None: direct or TTGT).
    let mix = |p: &GpuContractionPlan| {
        (!p.is_direct() && p.blas != ttgt::backend::cuda::contract::BlasCall::packed(&p.gemm))
            .then(|| [p.pack_a.is_some(), p.pack_b.is_some(), p.unpack_c.is_some()])
    };
    let f64_plans = |spec: &str, sa: &[usize], sb: &[usize]| {
        let props = DeviceProps::emulator();
        let all = GpuContractionPlan::candidates(spec, sa, sb, ttgt::DType::F64, false, &props);
        let best = GpuContractionPlan::new(spec, sa, sb, ttgt::DType::F64, false, &props);
        (best.unwrap(), all.unwrap())
    };
    for (i, (spec, sa, sb)) in cases.iter().enumerate() {
        let (p, _) = f64_plans(spec, sa, sb);
        direct += usize::from(p.is_direct());
        partial.extend(mix(&p));
        emulated_contraction::<f64>(spec, sa, sb, 0.5, 2.0);
        if i % 4 == 0 {
            emulated_contraction::<f32>(spec, sa, sb, 1.0, 0.0);
            emulated_contraction::<Complex64>(
                spec,
                sa,
                sb,
                Complex64::new(0.5, 1.0),
                Complex64::new(-1.0, 0.5),
            );
        }
        if i % 4 == 1 {
            emulated_contraction::<Complex32>(
                spec,
                sa,
                sb,
                Complex32::new(1.0, -1.0),
                Complex32::new(0.0, 0.0),
            );
        }
    }
    // tccg-2, 9-12 and 15-18 (tests/cuda_plan.rs lists them); the others keep TTGT.
    assert_eq!(direct, 9, "TCCG cases planned as one direct call");
    // Partial packing: every mix of packed and in-place operands runs (but all three packed,
    // which is TTGT's packed call); a mix no TCCG case plans runs as a listed candidate.
    'cases: for (spec, sa, sb) in &cases {
        if partial.len() == 6 {
            break;
        }
        for p in f64_plans(spec, sa, sb).1 {
            if mix(&p).is_some_and(|m| partial.insert(m)) {
                emulated_plan::<f64>(&p, 0.5, 2.0);
                continue 'cases;
            }
        }
    }
    assert_eq!(partial.len(), 6, "{partial:?}");
    // Degenerate extents: unit M, N or K groups, unit loops, and the batch index.
    let odd: [(&str, &[usize], &[usize]); 8] = [
        ("bda,dc->abc", &[6, 1, 7], &[1, 4]),
        ("bda,dc->abc", &[1, 5, 7], &[5, 4]),
        ("ij,jk->ik", &[1, 7], &[7, 5]),
        ("ij,jk->ik", &[9, 7], &[7, 1]),
        ("ij,kj->ki", &[9, 1], &[5, 1]),
        ("bij,bjk->bik", &[3, 8, 5], &[3, 5, 4]),
        ("ibj,jbk->kbi", &[4, 3, 5], &[5, 3, 2]),
        ("ab,cb->ca", &[1, 1], &[1, 1]),
    ];
    for (spec, sa, sb) in odd {
        emulated_contraction::<f64>(spec, sa, sb, -1.5, 0.25);
        emulated_contraction::<Complex32>(
            spec,
            sa,
            sb,
            Complex32::new(0.5, 2.0),
            Complex32::new(1.0, 0.0),
        );
    }
}

#[test]
fn packed_blas_call_matches_the_packed_gemm() {
    use ttgt::backend::cuda::contract::{cpu_blas_call, cpu_gemm_packed, BlasCall, GemmShape};
    for (batch, m, n, k) in [(1, 1, 1, 1), (2, 3, 4, 5), (3, 7, 1, 6), (1, 5, 9, 1)] {
        let g = GemmShape { batch, m, n, k };
        let a: Vec<f64> = (0..batch * m * k).map(|i| (i % 7) as f64 - 3.0).collect();
        let b: Vec<f64> = (0..batch * k * n).map(|i| (i % 5) as f64 * 0.5).collect();
        let c0: Vec<f64> = (0..batch * m * n).map(|i| (i % 3) as f64).collect();
        let (mut c1, mut c2) = (c0.clone(), c0);
        cpu_gemm_packed(&g, 1.5, &a, &b, -0.5, &mut c1);
        let call = BlasCall::packed(&g);
        assert_eq!(call.extents(), [b.len(), a.len(), c1.len()]);
        cpu_blas_call(&call, 1.5, &a, &b, -0.5, &mut c2);
        assert_eq!(c1, c2, "{g:?}");
    }
}

/// Runs every candidate that measured tuning would time (the model's best few) on `a`,
/// against the CPU transpose; the first must be the plan `TtlgPlan::new` makes.
fn all_ranked<T: Element>(
    perm: &[usize],
    a: &ArrayD<T>,
    alpha: T,
    beta: T,
) -> Result<usize, String> {
    use ttgt::backend::cuda::ttlg::MEASURE_CANDIDATES;
    let bshape = permuted_shape(a.shape(), perm);
    let b0: ArrayD<T> = data(&bshape, 11);
    let want = reference(perm, a, alpha, beta, &b0)?;
    let va = StridedView::of(a);
    let (props, opts) = (DeviceProps::emulator(), TtlgOptions::default());
    let lb = ttgt::Layout::row_major(&bshape).unwrap();
    let ranked = TtlgPlan::ranked(
        perm,
        va.layout(),
        &lb,
        T::DTYPE,
        false,
        &props,
        &opts,
        MEASURE_CANDIDATES,
    )
    .map_err(|e| e.to_string())?;
    let first = TtlgPlan::new(perm, va.layout(), &lb, T::DTYPE, false, &props, &opts)
        .map_err(|e| e.to_string())?;
    if ranked[0].describe() != first.describe() {
        return Err(format!(
            "ranked[0] {} != new {}",
            ranked[0].describe(),
            first.describe()
        ));
    }
    for plan in &ranked {
        let mut got = b0.clone();
        let mut vb = StridedViewMut::of(&mut got).unwrap();
        emu::transpose(plan, alpha, &va, beta, &mut vb)
            .map_err(|e| format!("{e} [{}]", plan.describe()))?;
        for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
            if (*g - *w).abs_f64() > 1e-3 * (1.0 + w.abs_f64()) {
                return Err(format!(
                    "element {i}: got {g}, want {w} [{}]",
                    plan.describe()
                ));
            }
        }
    }
    Ok(ranked.len())
}

#[test]
fn every_candidate_of_measured_tuning_is_correct() {
    let cases = ttgt::bench::parse_ttc(ttgt::bench::TTC_TSV).unwrap();
    let mut failures = Vec::new();
    let mut several = 0;
    for (i, c) in cases.iter().enumerate().step_by(3) {
        let vol: f64 = c.sizes.iter().map(|&s| s as f64).product();
        let f = (vol / 4000.0).powf(1.0 / c.sizes.len() as f64).max(1.0);
        let sizes: Vec<usize> = c
            .sizes
            .iter()
            .map(|&s| ((s as f64 / f).round() as usize).max(2) | (i & 1))
            .collect();
        let a32: ArrayD<f32> = data(&sizes, i);
        let a64: ArrayD<f64> = data(&sizes, i + 1);
        match all_ranked(&c.perm, &a32, 1.0f32, 0.0) {
            Ok(n) => several += usize::from(n > 1),
            Err(e) => failures.push(format!("{} {sizes:?} f32: {e}", c.name)),
        }
        if let Err(e) = all_ranked(&c.perm, &a64, 1.5f64, -0.5) {
            failures.push(format!("{} {sizes:?} f64: {e}", c.name));
        }
    }
    // 720 permutations of a small rank-5 tensor (f32): every ranked OA and OD slice.
    for (k, perm) in all_perms(5).iter().enumerate().step_by(7) {
        let a: ArrayD<f32> = data(&[5, 4, 7, 3, 6], k);
        if let Err(e) = all_ranked(perm, &a, 1.0f32, 0.0) {
            failures.push(format!("{perm:?}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(
        several > 5,
        "measured tuning would have had a choice in only {several} TTC cases"
    );
}

/// Every candidate the GPU planner weighs (`GpuContractionPlan::candidates`: direct, partial
/// and packed plans in every index order), emulated, against the reference.
#[test]
fn every_gpu_contraction_candidate_emulated() {
    use ttgt::backend::cuda::contract::{execute_emulated, shortlist, GpuContractionPlan};
    let mut kinds = std::collections::BTreeSet::new();
    let cases: [(&str, &[usize], &[usize]); 5] = [
        ("adb,cd->cba", &[6, 5, 7], &[3, 5]),
        ("bgfd,caeg->fedcba", &[4, 5, 3, 2], &[3, 2, 4, 5]),
        ("ka,jbki->jiba", &[3, 7], &[4, 7, 3, 4]),
        ("bda,dc->abc", &[6, 5, 7], &[5, 4]),
        ("abcd,dbef->acef", &[4, 5, 6, 7], &[7, 5, 3, 2]),
    ];
    for (spec, sa, sb) in cases {
        let a: ArrayD<f64> = data(sa, 4);
        let b: ArrayD<f64> = data(sb, 5);
        let r = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
        let c0: ArrayD<f64> = data(r.shape(), 6);
        let want = r.mapv(|x| 0.5 * x) + c0.mapv(|x| -2.0 * x);
        let plans = GpuContractionPlan::candidates(
            spec,
            sa,
            sb,
            ttgt::DType::F64,
            false,
            &DeviceProps::emulator(),
        )
        .unwrap();
        let first = GpuContractionPlan::new(
            spec,
            sa,
            sb,
            ttgt::DType::F64,
            false,
            &DeviceProps::emulator(),
        )
        .unwrap();
        assert_eq!(plans[0].describe(), first.describe(), "{spec}");
        assert_eq!(
            shortlist(&plans, 2)[..2.min(plans.len())],
            [0, 1][..2.min(plans.len())]
        );
        for p in &plans {
            kinds.insert(p.kind());
            let mut c = c0.clone();
            execute_emulated(
                p,
                0.5,
                a.as_slice().unwrap(),
                b.as_slice().unwrap(),
                -2.0,
                c.as_slice_mut().unwrap(),
            )
            .unwrap_or_else(|e| panic!("{spec}: {e}\n{}", p.describe()));
            for (g, w) in c.iter().zip(want.iter()) {
                assert!(
                    (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
                    "{spec} {}: {g} vs {w}\n{}",
                    p.kind(),
                    p.describe()
                );
            }
        }
    }
    assert_eq!(kinds.len(), 3, "{kinds:?}");
}

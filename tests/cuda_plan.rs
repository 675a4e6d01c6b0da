//! Host-side TTLG planning (no GPU, no feature): schema decisions (Alg. 1), slice choice by
//! the model (Alg. 3), index width, limits, the model's storage and fit.

use ttgt::backend::cuda::contract::GpuContractionPlan;
use ttgt::backend::cuda::ttlg::{
    fit_least_squares, DeviceProps, GpuModel, MicroBlocks, Schema, TtlgOptions, TtlgPlan,
    MAX_OUTER_DIMS,
};
use ttgt::{DType, Layout};

/// Row-major A of `sizes` and row-major B of `perm(A)`.
fn layouts(perm: &[usize], sizes: &[usize]) -> (Layout, Layout) {
    let bs: Vec<usize> = perm.iter().map(|&p| sizes[p]).collect();
    (
        Layout::row_major(sizes).unwrap(),
        Layout::row_major(&bs).unwrap(),
    )
}

fn plan(perm: &[usize], sizes: &[usize], dtype: DType, plain: bool) -> TtlgPlan {
    let (a, b) = layouts(perm, sizes);
    TtlgPlan::new(
        perm,
        &a,
        &b,
        dtype,
        plain,
        &DeviceProps::nominal(),
        &TtlgOptions::default(),
    )
    .unwrap()
}

#[test]
fn schema_decisions_follow_alg1() {
    // Distinct fastest dims, both large: Orthogonal-Distinct.
    assert_eq!(
        plan(&[2, 1, 0], &[64, 48, 40], DType::F64, false).schema,
        Schema::OrthogonalDistinct
    );
    // Shared fastest dim >= 32: FVI-Match-Large.
    assert_eq!(
        plan(&[1, 0, 2], &[40, 30, 64], DType::F64, false).schema,
        Schema::FviMatchLarge
    );
    // Shared fastest dim < 32 with enough volume in the next dims: FVI-Match-Small.
    assert_eq!(
        plan(&[1, 0, 2], &[40, 30, 5], DType::F64, false).schema,
        Schema::FviMatchSmall
    );
    // Fastest dims differ but the 32-element prefixes overlap: Orthogonal-Arbitrary.
    let p = plan(&[0, 3, 2, 1], &[64, 2, 4, 2], DType::F32, false);
    assert_eq!(p.schema, Schema::OrthogonalArbitrary, "{}", p.describe());
}

#[test]
fn fvi_match_small_blocks_give_the_warps_whole_turns() {
    // The FS kernel hands a brick's b rows to its 8 warps in turns: b is a multiple of 8,
    // or the whole larger dim, or any b when that dim is below 8. Every FS plan of the
    // 720 permutations of 16^6 and of the TTC set, in f32 and f64.
    let mut seen = 0;
    let mut check = |p: &TtlgPlan| {
        if p.schema != Schema::FviMatchSmall {
            return;
        }
        seen += 1;
        let b = p.slice.input.block;
        let (i1, o1) = (p.problem.in_order[1], p.problem.out_order[1]);
        let nmax = p.problem.dims[i1].n.max(p.problem.dims[o1].n);
        assert_eq!(b, p.slice.output.block);
        assert!(
            nmax < 8 || b.is_multiple_of(8) || b == nmax,
            "b = {b}, extents up to {nmax}: {}",
            p.describe()
        );
    };
    let perms = ttgt::bench::all_perms(6, 16);
    assert_eq!(perms.len(), 720);
    for c in perms
        .iter()
        .chain(&ttgt::bench::parse_ttc(ttgt::bench::TTC_TSV).unwrap())
    {
        for dtype in [DType::F32, DType::F64] {
            check(&plan(&c.perm, &c.sizes, dtype, true));
        }
    }
    assert!(seen >= 200, "{seen} FS plans");
    // ttc-13 in f32 (widened to 8-byte elements, N0 = 20 of them): b = 8, where the model
    // alone picked 12 (0.76 of copy on an H200 against 0.88 for b = 8).
    let p = plan(&[2, 1, 0, 3], &[96, 75, 96, 80], DType::F32, true);
    assert_eq!(p.schema, Schema::FviMatchSmall, "{}", p.describe());
    assert_eq!(p.slice.input.block, 8, "{}", p.describe());
}

#[test]
fn slices_are_warp_multiples_and_model_ranked() {
    // 27^5 as in TTLG's Fig. 5, with a permutation that fuses nothing.
    let sizes = [27usize; 5];
    let p = plan(&[3, 1, 4, 0, 2], &sizes, DType::F64, false);
    let va: usize = p.slice.input.extents(&p.problem).iter().product();
    let vb: usize = p.slice.output.extents(&p.problem).iter().product();
    eprintln!("27^5 example: {}", p.describe());
    assert_eq!(p.schema, Schema::OrthogonalDistinct, "{}", p.describe());
    assert!(va >= 27 && vb >= 27, "{}", p.describe());
    assert!(p.predicted_seconds > 0.0);
    // The chosen slice is the model's minimum among all candidates of the schema.
    let opts = TtlgOptions {
        schema: Some(p.schema),
        ..TtlgOptions::default()
    };
    let a = Layout::row_major(&sizes).unwrap();
    let again = TtlgPlan::new(
        &[3, 1, 4, 0, 2],
        &a,
        &a,
        DType::F64,
        false,
        &DeviceProps::nominal(),
        &opts,
    )
    .unwrap();
    assert_eq!(again.slice, p.slice);
}

#[test]
fn widening_index_width_and_limits() {
    // Plain f32 copies with a shared fastest dim of 4 move 16-byte elements.
    let p = plan(&[1, 0, 2], &[300, 200, 4], DType::F32, true);
    assert_eq!(p.problem.widen, 4);
    assert!(p.kernel.contains("_c64_"), "{}", p.kernel);
    assert!(p.kernel.contains("_i32_"));
    // Not plain: no widening.
    assert_eq!(
        plan(&[1, 0, 2], &[300, 200, 4], DType::F32, false)
            .problem
            .widen,
        1
    );
    // More than 2^31 elements: 64-bit indices (planning touches no data).
    let p = plan(&[1, 0], &[70_000, 40_000], DType::F32, false);
    assert!(p.index64 && p.kernel.contains("_i64_"));
    // Too many dims left after fusion: a clear error.
    let sizes = [2usize; 12];
    let perm: Vec<usize> = (0..12).rev().collect();
    let a = Layout::row_major(&sizes).unwrap();
    let e = TtlgPlan::new(
        &perm,
        &a,
        &a,
        DType::F32,
        false,
        &DeviceProps::nominal(),
        &TtlgOptions::default(),
    );
    assert!(e.is_err() || e.as_ref().unwrap().outer_rank <= MAX_OUTER_DIMS);
    // A forced schema that does not apply.
    let opts = TtlgOptions {
        schema: Some(Schema::FviMatchLarge),
        ..TtlgOptions::default()
    };
    let a = Layout::row_major(&[8, 9]).unwrap();
    let b = Layout::row_major(&[9, 8]).unwrap();
    let e = TtlgPlan::new(
        &[1, 0],
        &a,
        &b,
        DType::F32,
        false,
        &DeviceProps::nominal(),
        &opts,
    )
    .unwrap_err();
    assert!(e.to_string().contains("does not apply"), "{e}");
}

#[test]
fn micro_blocks_where_layouts_allow() {
    // Distinct even fastest dims of f32: 2x2 blocks (q32 kernels), A's and B's fastest dims
    // halved, the block's second row and column in the meta table.
    let p = plan(&[2, 1, 0], &[64, 48, 40], DType::F32, false);
    let m = p.problem.micro.expect("2x2 blocks");
    assert_eq!((m.da, m.db), (48 * 40, 64 * 48), "{}", p.describe());
    assert!(p.kernel.starts_with("ttgt_od_q32_i32"), "{}", p.kernel);
    assert_eq!(p.problem.elements, 64 * 48 * 40 / 4);
    assert_eq!(p.problem.tensor_elements(), 64 * 48 * 40);
    assert_eq!(p.problem.elem_bytes(), 16);
    assert_eq!((p.meta[14], p.meta[15]), (48 * 40, 64 * 48));
    assert!(p.describe().contains("2x2 blocks"));
    assert_eq!(p.required_align(), 8);
    // OA too (a batch of 16x16 transposes).
    let p = plan(&[0, 1, 3, 2], &[64, 16, 16, 16], DType::F32, false);
    assert!(p.kernel.starts_with("ttgt_oa_q32_"), "{}", p.describe());
    // f64 blocks (q64, 16-byte rows): by default, and not with `MicroBlocks::F32`.
    let a = Layout::row_major(&[64, 48, 40]).unwrap();
    let b = Layout::row_major(&[40, 48, 64]).unwrap();
    let reverse = |a: &Layout, dtype: DType, opts: &TtlgOptions| {
        TtlgPlan::new(
            &[2, 1, 0],
            a,
            &b,
            dtype,
            false,
            &DeviceProps::nominal(),
            opts,
        )
        .unwrap()
    };
    let all = TtlgOptions {
        micro_blocks: MicroBlocks::All,
        ..TtlgOptions::default()
    };
    let p = reverse(&a, DType::F64, &all);
    assert!(p.kernel.starts_with("ttgt_od_q64_i32"), "{}", p.describe());
    assert_eq!((p.required_align(), p.problem.elem_bytes()), (16, 32));
    let p = reverse(
        &a,
        DType::F64,
        &TtlgOptions {
            align: 8,
            ..all.clone()
        },
    );
    assert!(
        p.problem.micro.is_none(),
        "8-byte aligned f64: {}",
        p.describe()
    );
    assert!(reverse(&a, DType::F64, &TtlgOptions::default())
        .kernel
        .starts_with("ttgt_od_q64_i32"));
    let f32_only = TtlgOptions {
        micro_blocks: MicroBlocks::F32,
        ..TtlgOptions::default()
    };
    let p = reverse(&a, DType::F64, &f32_only);
    assert!(p.problem.micro.is_none(), "{}", p.describe());
    assert!(reverse(&a, DType::F32, &f32_only).problem.micro.is_some());
    // Not for: other types, odd or short fastest dims, a shared fastest dim, unaligned data,
    // or when turned off.
    for (perm, sizes, dtype) in [
        (&[2, 1, 0][..], &[64, 48, 40][..], DType::C32),
        (&[2, 1, 0], &[63, 48, 40], DType::F32),
        (&[2, 1, 0], &[64, 48, 41], DType::F32),
        (&[2, 1, 0], &[2, 48, 40], DType::F32),
        (&[1, 0, 2], &[64, 48, 40], DType::F32),
    ] {
        let p = plan(perm, sizes, dtype, false);
        assert!(
            p.problem.micro.is_none(),
            "{sizes:?} {dtype}: {}",
            p.describe()
        );
        assert!(!p.kernel.contains("q32"));
    }
    for opts in [
        TtlgOptions {
            align: 4,
            ..TtlgOptions::default()
        },
        TtlgOptions {
            micro_blocks: MicroBlocks::Off,
            ..TtlgOptions::default()
        },
    ] {
        let p = reverse(&a, DType::F32, &opts);
        assert!(p.problem.micro.is_none());
        assert_eq!(p.required_align(), 4);
    }
    // Halving tips Alg. 1 from OD to OA (ttc-34: fastest dims of 48 become 24 blocks, the
    // 32-element prefixes then overlap). f32: the blocked OA plan first (measured on an
    // H200: 0.83 of copy against 0.54 for the element-wise OD plan), the element-wise form
    // second for measured tuning. f64: the element-wise OD plan first, the blocked form
    // second.
    let (sizes, perm) = ([28, 28, 48, 28, 48], [1, 3, 0, 4, 2]);
    let (la, lb) = layouts(&perm, &sizes);
    let (props, o) = (DeviceProps::nominal(), TtlgOptions::default());
    for (dtype, first, schema) in [
        (DType::F32, true, Schema::OrthogonalArbitrary),
        (DType::F64, false, Schema::OrthogonalDistinct),
    ] {
        let p = plan(&perm, &sizes, dtype, false);
        assert_eq!(p.problem.micro.is_some(), first, "{}", p.describe());
        assert_eq!(p.schema, schema);
        let top = TtlgPlan::ranked(&perm, &la, &lb, dtype, false, &props, &o, 6).unwrap();
        let forms: Vec<bool> = top.iter().map(|p| p.problem.micro.is_some()).collect();
        let other = !first;
        assert_eq!(
            forms,
            [first, other, first, other, first, first],
            "{dtype}: {forms:?}"
        );
        assert_eq!(top[0].describe(), p.describe());
        assert_eq!(
            TtlgPlan::ranked(&perm, &la, &lb, dtype, false, &props, &o, 1)
                .unwrap()
                .len(),
            1
        );
    }
    // An odd stride in A (a view of every other column of a 41-wide row): single elements.
    let a = Layout::new(vec![64, 48, 40], vec![48 * 41, 41, 1]).unwrap();
    let p = reverse(&a, DType::F32, &TtlgOptions::default());
    assert!(p.problem.micro.is_none(), "{}", p.describe());
}

#[test]
fn blocked_orthogonal_arbitrary_features_count_runs_in_blocks() {
    // 2x2 blocks keep strides in tensor elements (A's fastest dim steps by 2): the OA
    // features must still see the contiguous runs, in blocks, on both sides, so that the
    // model prices a blocked slice like the element-wise slice of the same shape.
    let perm = [1, 3, 0, 4, 2];
    let (a, b) = layouts(&perm, &[28, 28, 48, 4, 352]);
    let (props, o) = (DeviceProps::nominal(), TtlgOptions::default());
    let all = TtlgPlan::ranked(&perm, &a, &b, DType::F32, true, &props, &o, 400).unwrap();
    let oa: Vec<&TtlgPlan> = all
        .iter()
        .filter(|p| p.schema == Schema::OrthogonalArbitrary && p.problem.micro.is_some())
        .collect();
    assert!(!oa.is_empty(), "no blocked OA candidate");
    let names = GpuModel::feature_names(Schema::OrthogonalArbitrary);
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    for p in &oa {
        let (run_in, run_out) = (
            p.features.values[at("input_stride")],
            p.features.values[at("output_stride")],
        );
        // A's fastest dim holds 176 blocks and B's 24: every slice starts with a run of A's
        // fastest dim and ends up with one of B's (at least two blocks).
        assert!(
            (2.0..=176.0 * 4.0).contains(&run_in),
            "{run_in}: {}",
            p.describe()
        );
        assert!(run_out >= 2.0, "{run_out}: {}", p.describe());
    }
    // The 64 x 24 slice: runs of 64 and 24 blocks. A slice whose output runs are two blocks
    // (16 bytes, half a sector) long ranks after it whatever the model predicts (on an H200
    // the two ran at 0.76 and 0.19 of copy bandwidth; docs/TUNING.md), and the plan is one
    // with runs that fill sectors.
    let slice = |p: &TtlgPlan| p.describe().contains("input slice 64, output slice 24");
    let good = oa.iter().position(|p| slice(p)).expect("the 64 x 24 slice");
    assert_eq!(oa[good].features.values[at("input_stride")], 64.0);
    assert_eq!(oa[good].features.values[at("output_stride")], 24.0);
    let short = oa
        .iter()
        .position(|p| p.features.values[at("output_stride")] == 2.0)
        .expect("a slice with two-block output runs");
    assert!(good < short, "{}", oa[short].describe());
    let best = TtlgPlan::new(&perm, &a, &b, DType::F32, true, &props, &o).unwrap();
    assert!(
        best.features.values[at("output_stride")] >= 4.0,
        "{}",
        best.describe()
    );
}

#[test]
fn planning_is_fast_enough_for_single_use() {
    let cases = ttgt::bench::parse_ttc(ttgt::bench::TTC_TSV).unwrap();
    let t = std::time::Instant::now();
    for c in &cases {
        let _ = plan(&c.perm, &c.sizes, DType::F64, false);
    }
    let per = t.elapsed().as_secs_f64() / cases.len() as f64;
    eprintln!(
        "TTLG planning: {:.1} us per TTC case (debug build)",
        per * 1e6
    );
    assert!(per < 0.5, "planning takes {per} s");
}

#[test]
fn model_round_trip_store_and_fit() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("TTGT_GPU_MODEL_DIR", dir.path());
    let mut m = GpuModel::default_for(&DeviceProps::nominal());
    m.device = "Test GPU / 80GB".into();
    let path = m.save().unwrap();
    assert!(path.ends_with("Test_GPU___80GB.json"), "{}", path.display());
    let back = GpuModel::load("Test GPU / 80GB").unwrap();
    assert_eq!(back.device, m.device);
    // A corrupt stored model is ignored (reported on stderr), and saving replaces it whole
    // with no temporary file left beside it.
    std::fs::write(&path, "{\"device\": 3").unwrap();
    assert!(GpuModel::load("Test GPU / 80GB").is_none());
    m.save().unwrap();
    assert!(GpuModel::load("Test GPU / 80GB").is_some());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    for (x, y) in back
        .coefficients
        .iter()
        .flatten()
        .zip(m.coefficients.iter().flatten())
    {
        assert!((x - y).abs() <= 1e-12 * y.abs(), "{x} vs {y}");
    }
    // The fit recovers known coefficients.
    let truth = [2e-11, 3e-8, 5e-6];
    let x: Vec<Vec<f64>> = (1..40)
        .map(|i| {
            vec![
                (i * 1_000_003 % 977) as f64 * 1e6,
                (i * 37 % 101) as f64 * 100.0,
                1.0,
            ]
        })
        .collect();
    let y: Vec<f64> = x
        .iter()
        .map(|r| r.iter().zip(&truth).map(|(a, b)| a * b).sum())
        .collect();
    let c = fit_least_squares(&x, &y).unwrap();
    for (c, t) in c.iter().zip(&truth) {
        assert!((c - t).abs() <= 1e-4 * t.abs(), "{c} vs {t}");
    }
}

#[test]
fn contraction_matricization() {
    let p = GpuContractionPlan::new(
        "abcd,dbef->acef",
        &[4, 5, 6, 7],
        &[7, 5, 3, 2],
        DType::F32,
        true,
        &DeviceProps::nominal(),
    )
    .unwrap();
    assert_eq!((p.gemm.batch, p.gemm.m, p.gemm.n, p.gemm.k), (1, 24, 6, 35));
    // b sits between a and c in A: at least one operand is transposed, C need not be.
    assert!(p.pack_a.is_some() || p.pack_b.is_some());
    assert!(p.unpack_c.is_none(), "{}", p.describe());
    // Batched: b is a batch index; C in batch-M-N order needs no final transpose.
    let p = GpuContractionPlan::new(
        "bij,bjk->bik",
        &[3, 8, 5],
        &[3, 5, 4],
        DType::F64,
        false,
        &DeviceProps::nominal(),
    )
    .unwrap();
    assert_eq!((p.gemm.batch, p.gemm.m, p.gemm.n, p.gemm.k), (3, 8, 4, 5));
    assert!(p.pack_a.is_none() && p.pack_b.is_none() && p.unpack_c.is_none());
    assert!(p.describe().contains("in place"));
}

#[test]
fn fvi_match_large_groups_rows_into_blocks() {
    // ttc-29-like: a shared fastest dim of 44 (after widening to 16-byte elements rows stay
    // short): a block takes a group of G rows, G = floor(256 * U / len) with U = 4 loads
    // per thread for 8- and 16-byte elements, 8 for 4-byte ones, at most 64 rows.
    for (sizes, dtype, plain, len, group) in [
        (
            vec![48usize, 28, 28, 8, 176],
            DType::F32,
            true,
            44usize,
            23usize,
        ),
        (vec![48, 28, 28, 8, 176], DType::F32, false, 176, 11),
        (vec![40, 30, 32], DType::F32, false, 32, 64),
        (vec![40, 30, 50], DType::F64, false, 50, 20),
        (vec![3, 5, 20000], DType::F32, false, 20000, 1),
    ] {
        let perm: Vec<usize> = if sizes.len() == 5 {
            vec![1, 3, 2, 0, 4]
        } else {
            vec![1, 0, 2]
        };
        let p = plan(&perm, &sizes, dtype, plain);
        assert_eq!(p.schema, Schema::FviMatchLarge, "{sizes:?}");
        let n0 = p.problem.dims[p.problem.fvi_in()].n;
        assert_eq!(n0, len, "{sizes:?}");
        assert_eq!(p.meta[5], group as i64, "rows per group {sizes:?}");
        assert_eq!(p.block, [256, 1, 1]);
        let groups = p.num_slices.div_ceil(group);
        assert_eq!(
            p.grid[0] as usize,
            groups.min(DeviceProps::nominal().max_grid as usize)
        );
    }
}

#[test]
fn nonnegative_fit_recovers_positive_models_and_never_goes_negative() {
    use ttgt::backend::cuda::ttlg::fit_nonnegative;
    let mut k = 7u64;
    let mut rnd = || {
        k = k
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (k >> 11) as f64 / (1u64 << 53) as f64
    };
    for trial in 0..40 {
        let n = 12 + trial % 9;
        let x: Vec<Vec<f64>> = (0..n)
            .map(|_| vec![rnd() * 1e6, rnd() * 100.0, rnd(), 1.0])
            .collect();
        // A model with one zero term, observed exactly: recovered.
        let truth = [2e-12, 0.0, 3e-6, 1e-5];
        let y: Vec<f64> = x
            .iter()
            .map(|r| r.iter().zip(&truth).map(|(a, b)| a * b).sum())
            .collect();
        let c = fit_nonnegative(&x, &y).unwrap();
        for (got, want) in c.iter().zip(truth) {
            assert!(
                *got >= 0.0 && (got - want).abs() <= 1e-6 * want.max(1e-6),
                "{c:?}"
            );
        }
        // Arbitrary (even decreasing) data: still no negative coefficient, and no worse
        // than the zero model.
        let y: Vec<f64> = x.iter().map(|r| 1.0 - r[0] * 1e-6 + rnd() * 0.1).collect();
        let c = fit_nonnegative(&x, &y).unwrap();
        assert!(c.iter().all(|&v| v >= 0.0), "{c:?}");
        let sse = |c: &[f64]| -> f64 {
            x.iter()
                .zip(&y)
                .map(|(r, t)| (r.iter().zip(c).map(|(a, b)| a * b).sum::<f64>() - t).powi(2))
                .sum()
        };
        assert!(sse(&c) <= sse(&[0.0; 4]) + 1e-12, "{c:?}");
    }
}

#[test]
fn tccg_cases_whose_operands_all_read_in_place_run_one_direct_call() {
    let mut direct = Vec::new();
    for (i, case) in ttgt::bench::parse_tccg(ttgt::bench::TCCG_TSV)
        .unwrap()
        .iter()
        .enumerate()
    {
        let spec = case.spec.as_str();
        let (ins, _) = spec.split_once("->").unwrap();
        let (ta, tb) = ins.split_once(',').unwrap();
        let ext = |c: char| 2 + (c as usize * 7) % 4;
        let sa: Vec<usize> = ta.chars().map(ext).collect();
        let sb: Vec<usize> = tb.chars().map(ext).collect();
        let p = GpuContractionPlan::new(spec, &sa, &sb, DType::F64, true, &DeviceProps::nominal())
            .unwrap();
        if p.is_direct() {
            assert_eq!(p.workspace_elements(), [0, 0, 0], "{}", p.describe());
            assert!(p.describe().contains("in place (no transpose)"));
            direct.push(i + 1);
        }
    }
    // The others have an operand whose unit-stride index would have to be a batch loop (or
    // need a transpose whatever the loops), which cuBLAS cannot take.
    assert_eq!(direct, [2, 9, 10, 11, 12, 15, 16, 17, 18]);
    // tccg-2 with its f64 extents: for each c (296), C[c] (b x a, a unit) = (A[:, c, :] B)^T,
    // in column-major terms C[c]^T (a x b) = A[:, c, :] (stored d-fastest: transposed) times
    // B^T (stored b-fastest: transposed).
    let p = GpuContractionPlan::new(
        "acd,db->cba",
        &[312, 296, 312],
        &[312, 24],
        DType::F64,
        true,
        &DeviceProps::nominal(),
    )
    .unwrap();
    let c = p.blas;
    assert!(p.is_direct());
    assert!(c.first_is_a && c.trans_first && c.trans_second);
    assert_eq!((c.batch, c.m, c.n, c.k), (296, 312, 24, 312));
    assert_eq!((c.ld_first, c.ld_second, c.ld_c), (296 * 312, 24, 312));
    assert_eq!(
        (c.stride_first, c.stride_second, c.stride_c),
        (312, 0, 24 * 312)
    );
}

#[test]
fn partial_packing_moves_the_small_operand_and_keeps_large_gemms_whole() {
    let tccg = ttgt::bench::parse_tccg(ttgt::bench::TCCG_TSV).unwrap();
    let plan_of = |id: usize| {
        let case = &tccg[id - 1];
        let ext = case.extents(DType::F32, 1.0);
        let (ins, _) = case.spec.split_once("->").unwrap();
        let (ta, tb) = ins.split_once(',').unwrap();
        let sh = |t: &str| -> Vec<usize> { t.chars().map(|c| ext[&c]).collect() };
        GpuContractionPlan::new(
            &case.spec,
            &sh(ta),
            &sh(tb),
            DType::F32,
            true,
            &DeviceProps::nominal(),
        )
        .unwrap()
    };
    // tccg-1 (adb,cd->cba; A 226 MB, C 14 MB): C's unit-stride index a is a batch loop of
    // any call on A in place, so the GEMM runs per a on A and B in place into a packed
    // workspace, and only that (small) result is transposed into C.
    let p = plan_of(1);
    assert!(p.pack_a.is_none() && p.pack_b.is_none(), "{}", p.describe());
    assert!(p.unpack_c.is_some() && !p.is_direct());
    assert_eq!((p.blas.batch, p.blas.k), (384, 384), "{}", p.describe());
    assert_eq!(p.workspace_elements(), [0, 0, 24 * 384 * 384]);
    assert!(p.describe().contains("A: in place"));
    // The ccsd cases (GEMMs of 8064^2 x 7056 and up) keep one whole GEMM: splitting M into
    // 84 products of 96 rows would waste more GEMM time than the transposes it saves.
    for id in 20..=30 {
        let p = plan_of(id);
        assert_eq!(p.blas.batch, 1, "tccg-{id}: {}", p.describe());
        assert_eq!(p.blas.m * p.blas.n, p.gemm.m * p.gemm.n, "tccg-{id}");
    }
    // The model behind that choice: full tiles cost the same however the products are cut;
    // thin products cost more.
    let props = DeviceProps::nominal();
    let g =
        |batch, m, n, k| {
            ttgt::backend::cuda::contract::BlasCall::packed(
                &ttgt::backend::cuda::contract::GemmShape { batch, m, n, k },
            )
            .predicted_seconds(DType::F64, &props)
        };
    let whole = g(1, 8192, 8192, 8192);
    assert!((g(64, 128, 8192, 8192) / whole - 1.0).abs() < 1e-9);
    assert!(g(128, 64, 8192, 8192) > 0.99 * whole);
    assert!(g(256, 32, 8192, 8192) > 1.9 * whole);
    // Memory-bound calls: bytes at the copy rate.
    let t = g(1, 1 << 20, 8, 8);
    // A (2^20 x 8) and C (2^20 x 8) stream once, B (8 x 8) is read once.
    let bytes = 8.0 * (2.0 * (1u64 << 20) as f64 * 8.0 + 64.0);
    assert!(
        (t / (bytes / props.copy_bandwidth) - 1.0).abs() < 1e-9,
        "{t}"
    );
}

#[test]
fn async_copies_pick_the_cp_async_od_kernels() {
    let a = Layout::row_major(&[64, 48, 40]).unwrap();
    let b = Layout::row_major(&[40, 48, 64]).unwrap();
    let run = |dtype: DType, micro_blocks: MicroBlocks| {
        let o = TtlgOptions {
            async_copies: true,
            micro_blocks,
            ..TtlgOptions::default()
        };
        TtlgPlan::new(
            &[2, 1, 0],
            &a,
            &b,
            dtype,
            false,
            &DeviceProps::nominal(),
            &o,
        )
        .unwrap()
        .kernel
    };
    assert!(run(DType::F32, MicroBlocks::F32).starts_with("ttgt_oda_q32_"));
    assert!(run(DType::F32, MicroBlocks::Off).starts_with("ttgt_oda_f32_"));
    assert!(run(DType::C64, MicroBlocks::F32).starts_with("ttgt_oda_c64_"));
    // 32-byte elements (2x2 blocks of f64): cp.async copies at most 16 bytes at a time.
    assert!(run(DType::F64, MicroBlocks::All).starts_with("ttgt_od_q64_"));
    assert!(run(DType::F64, MicroBlocks::F32).starts_with("ttgt_oda_f64_"));
    // Other schemas are unaffected.
    let o = TtlgOptions {
        async_copies: true,
        ..TtlgOptions::default()
    };
    let p = TtlgPlan::new(
        &[1, 0, 2],
        &a,
        &Layout::row_major(&[48, 64, 40]).unwrap(),
        DType::F32,
        false,
        &DeviceProps::nominal(),
        &o,
    )
    .unwrap();
    assert!(p.kernel.starts_with("ttgt_fl_"), "{}", p.kernel);
}

//! The transposition engine against a plain-loop reference: random permutations up to rank 8,
//! odd, prime, 0 and 1 extents, strided and negative-stride views for A and B, all six dtypes,
//! alpha/beta, every micro-kernel level (forced), several thread counts and block sizes, and
//! measured tuning.

use ndarray::{ArrayD, Dimension, IxDyn, SliceInfoElem};
use num_complex::{Complex32, Complex64};
use proptest::prelude::*;
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::transpose::{
    line_tile_streaming, set_line_tile_streaming, Isa, KernelKind, TransposeOptions, TransposePlan,
    Tuning, PREFETCH_AHEAD_BYTES, PREFETCH_MAX_UNITS,
};
use ttgt::{DType, Element, Layout};

/// A random strided view description: per axis a step (negative = reversed) and padding.
#[derive(Clone, Debug)]
struct ViewSpec {
    steps: Vec<isize>,
}

fn backing_shape(dims: &[usize], v: &ViewSpec) -> Vec<usize> {
    dims.iter()
        .zip(&v.steps)
        .map(|(&d, &s)| {
            if d == 0 {
                0
            } else {
                (d - 1) * s.unsigned_abs() + 1 + (s.unsigned_abs() - 1)
            }
        })
        .collect()
}

fn slice_info(v: &ViewSpec) -> Vec<SliceInfoElem> {
    v.steps
        .iter()
        .map(|&s| SliceInfoElem::Slice {
            start: 0,
            end: None,
            step: s,
        })
        .collect()
}

fn value<T: Element>(x: usize) -> T {
    T::from_parts(
        ((x * 7919) % 1000) as f64 / 37.0 - 13.0,
        ((x * 104729) % 997) as f64 / 53.0,
    )
}

#[allow(clippy::too_many_arguments)]
fn check<T: Element>(
    dims: &[usize],
    perm: &[usize],
    va: &ViewSpec,
    vb: &ViewSpec,
    alpha: f64,
    beta: f64,
    opts: &TransposeOptions,
    measure: bool,
) -> Result<(), TestCaseError> {
    let a_back = ArrayD::<T>::from_shape_fn(IxDyn(&backing_shape(dims, va)), |ix| {
        value(
            ix.as_array_view()
                .iter()
                .enumerate()
                .map(|(k, &i)| i * (k + 3))
                .sum(),
        )
    });
    let a = a_back.slice(slice_info(va).as_slice());
    prop_assert_eq!(a.shape(), dims);
    let bdims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let mut b_back = ArrayD::<T>::from_shape_fn(IxDyn(&backing_shape(&bdims, vb)), |ix| {
        value::<T>(ix.as_array_view().iter().sum::<usize>() + 11usize)
    });
    let sentinel = b_back.clone();
    let (alpha, beta) = (T::from_parts(alpha, 0.0), T::from_parts(beta, 0.0));
    let mut b = b_back.slice_mut(slice_info(vb).as_slice());
    let b0 = b.to_owned();
    let av = StridedView::of(&a);
    let mut bv = StridedViewMut::of(&mut b).unwrap();
    if measure {
        let o = TransposeOptions {
            tuning: Tuning::Measure {
                budget: std::time::Duration::from_millis(5),
            },
            ..opts.clone()
        };
        let plan = TransposePlan::measure(perm, alpha, &av, beta, &mut bv, &o).unwrap();
        prop_assert_eq!(plan.dtype(), T::DTYPE);
    } else {
        let plan = TransposePlan::new(perm, av.layout(), bv.layout(), T::DTYPE, opts).unwrap();
        plan.execute(alpha, &av, beta, &mut bv).unwrap();
    }
    drop(bv);
    // 2-byte types: the kernels scale in f32 and round once, `want` rounds after each
    // operation
    let tol = match T::DTYPE {
        DType::F32 | DType::C32 => 1e-5,
        DType::F16 | DType::BF16 => 4.0 * T::DTYPE.unit_roundoff(),
        _ => 1e-13,
    };
    for (ix, &got) in b.indexed_iter() {
        let src: Vec<usize> = (0..dims.len())
            .map(|d| ix[perm.iter().position(|&p| p == d).unwrap()])
            .collect();
        let (x, y) = (alpha * a[src.as_slice()], beta * b0[&ix]);
        let want = x + y;
        // relative to the terms: they may cancel
        prop_assert!(
            (got - want).abs_f64() <= tol * (1.0 + x.abs_f64() + y.abs_f64()),
            "at {:?}: got {} want {}",
            ix.as_array_view(),
            got,
            want
        );
    }
    drop(b);
    // Elements of the backing store outside the view are untouched.
    let mut mask = ArrayD::<bool>::from_elem(b_back.raw_dim(), false);
    mask.slice_mut(slice_info(vb).as_slice()).fill(true);
    for ((x, y), m) in b_back.iter().zip(sentinel.iter()).zip(mask.iter()) {
        if !m {
            prop_assert_eq!(x, y);
        }
    }
    Ok(())
}

fn perm_strategy(max_rank: usize) -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (1..=max_rank).prop_flat_map(|r| {
        let dims = prop::collection::vec(prop_oneof![1 => Just(0usize), 3 => Just(1usize), 12 => 2usize..=9, 2 => Just(13usize), 1 => Just(17usize)], r);
        let perm = Just((0..r).collect::<Vec<usize>>()).prop_shuffle();
        (dims, perm)
    })
}

fn view_strategy(r: usize) -> impl Strategy<Value = ViewSpec> {
    prop::collection::vec(
        prop_oneof![6 => Just(1isize), 1 => Just(2isize), 1 => Just(-1isize), 1 => Just(-2isize)],
        r,
    )
    .prop_map(|steps| ViewSpec { steps })
}

fn case_strategy() -> impl Strategy<
    Value = (
        Vec<usize>,
        Vec<usize>,
        ViewSpec,
        ViewSpec,
        f64,
        f64,
        usize,
        usize,
        bool,
    ),
> {
    perm_strategy(8)
        .prop_filter("bounded volume", |(d, _)| {
            d.iter().product::<usize>() <= 40_000
        })
        .prop_flat_map(|(dims, perm)| {
            let r = dims.len();
            (
                Just(dims),
                Just(perm),
                view_strategy(r),
                view_strategy(r),
                prop_oneof![Just(1.0), Just(-0.5), Just(2.0)],
                prop_oneof![Just(0.0), Just(1.0), Just(0.75)],
                0usize..3,
                1usize..=3,
                prop::bool::weighted(0.1),
            )
        })
}

macro_rules! dtype_props {
    ($name:ident, $t:ty) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(160))]
            #[test]
            fn $name((dims, perm, va, vb, alpha, beta, isa_k, threads, measure) in case_strategy()) {
                let isas = Isa::available();
                let isa = isas[isa_k % isas.len()];
                // Streaming stores forced on for a third of the cases, so that the
                // non-temporal paths run on small tensors too.
                let streaming = [None, Some(true), Some(false)][(isa_k + threads) % 3];
                // The tiles' prefetch of the next unit forced on and off as well (the
                // rule alone would leave one branch untried on many shapes).
                let prefetch = [None, Some(true), Some(false)][(isa_k + 2 * threads) % 3];
                // The regrouped nest of scattered-line tiles forced on and off too.
                let regroup = [None, Some(true), Some(false)][(isa_k + threads + 1) % 3];
                let opts = TransposeOptions { threads: Some(threads), parallel_min_bytes: Some(0), isa: Some(isa), streaming, prefetch, regroup, ..Default::default() };
                check::<$t>(&dims, &perm, &va, &vb, alpha, beta, &opts, measure)?;
            }
        }
    };
}

dtype_props!(f32_matches_reference, f32);
dtype_props!(f64_matches_reference, f64);
dtype_props!(c32_matches_reference, Complex32);
dtype_props!(c64_matches_reference, Complex64);
dtype_props!(f16_matches_reference, ttgt::tensor::f16);
dtype_props!(bf16_matches_reference, ttgt::tensor::bf16);

/// Streamed row copies whose batch is copied in groups (rows one after another in A, groups
/// a page or more apart), rows of 2 KiB and of 10 KiB (long rows are batched only then), A
/// read forwards and backwards (negative steps), every dtype and level, alpha/beta.
#[test]
fn grouped_row_batches_match_reference() {
    for (dims, steps) in [
        (vec![3usize, 40, 512], vec![1isize, 1, 1]),
        (vec![2, 13, 2560], vec![1, 1, 1]),
        (vec![3, 40, 512], vec![1, -1, 1]),
        (vec![2, 13, 2560], vec![-1, -1, 1]),
    ] {
        let perm = [1usize, 0, 2];
        let va = ViewSpec { steps };
        let vb = ViewSpec {
            steps: vec![1, 1, 1],
        };
        for isa in Isa::available() {
            let opts = TransposeOptions {
                threads: Some(1),
                isa: Some(isa),
                streaming: Some(true),
                ..Default::default()
            };
            for (al, be) in [(1.0, 0.0), (2.0, 0.0), (1.0, 0.5)] {
                check::<f32>(&dims, &perm, &va, &vb, al, be, &opts, false).unwrap();
                check::<f64>(&dims, &perm, &va, &vb, al, be, &opts, false).unwrap();
                check::<Complex32>(&dims, &perm, &va, &vb, al, be, &opts, false).unwrap();
                check::<Complex64>(&dims, &perm, &va, &vb, al, be, &opts, false).unwrap();
                check::<ttgt::tensor::f16>(&dims, &perm, &va, &vb, al, be, &opts, false).unwrap();
                check::<ttgt::tensor::bf16>(&dims, &perm, &va, &vb, al, be, &opts, false).unwrap();
            }
        }
    }
}

/// `B = alpha * perm(A)` (`beta = 0`) with streaming stores forced, into a row-major B that
/// starts `skip` elements past a 64-byte boundary: every element of B is checked against A,
/// and nothing around B is written.
fn streamed_into_offset_b<T: Element>(
    dims: &[usize],
    perm: &[usize],
    isa: Isa,
    alpha: f64,
    threads: usize,
    skip: usize,
) {
    let n: usize = dims.iter().product();
    let a: Vec<T> = (0..n)
        .map(|x| T::from_parts(x as f64, -(x as f64) * 0.5))
        .collect();
    let la = Layout::row_major(dims).unwrap();
    let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let lb = Layout::row_major(&bd).unwrap();
    let mut b = vec![T::from_f64(-1.0); n + 128];
    let es = std::mem::size_of::<T>();
    let off = skip
        + (0..64)
            .find(|k| (b.as_ptr() as usize + k * es).is_multiple_of(64))
            .unwrap();
    let opts = TransposeOptions {
        threads: Some(threads),
        parallel_min_bytes: Some(0),
        isa: Some(isa),
        streaming: Some(true),
        ..Default::default()
    };
    let plan = TransposePlan::new(perm, &la, &lb, T::DTYPE, &opts).unwrap();
    let av = StridedView::from_slice(&a, la.clone(), 0).unwrap();
    let mut bv = StridedViewMut::from_slice(&mut b, lb, off).unwrap();
    plan.execute(T::from_f64(alpha), &av, T::from_f64(0.0), &mut bv)
        .unwrap();
    for (lin, &got) in b[off..off + n].iter().enumerate() {
        let (mut rem, mut src) = (lin, 0isize);
        for k in (0..bd.len()).rev() {
            src += (rem % bd[k]) as isize * la.strides()[perm[k]];
            rem /= bd[k];
        }
        let want = a[src as usize] * T::from_f64(alpha);
        assert_eq!(
            got, want,
            "{dims:?} {perm:?} {isa:?} +{skip}: element {lin}"
        );
    }
    assert!(b[..off]
        .iter()
        .chain(&b[off + n..])
        .all(|&x| x == T::from_f64(-1.0)));
}

/// Streamed row copies whose small batches are copied four units at a time (short rows one
/// after another in A, into a line-aligned B): every element lands in its place, for unit
/// counts with and without a remainder, every dtype and level, plain and scaled copies, on
/// one and two threads.
#[test]
fn row_batches_of_several_units_match_reference() {
    for dims in [[10, 7, 6, 32], [9, 5, 3, 64], [3, 1, 5, 16]] {
        for isa in Isa::available() {
            for (alpha, threads) in [(1.0, 1), (2.0, 1), (1.0, 2)] {
                // B[c][b][a][d] = alpha * A[a][b][c][d]
                let perm = [2, 1, 0, 3];
                streamed_into_offset_b::<f32>(&dims, &perm, isa, alpha, threads, 0);
                streamed_into_offset_b::<f64>(&dims, &perm, isa, alpha, threads, 0);
                streamed_into_offset_b::<Complex32>(&dims, &perm, isa, alpha, threads, 0);
                streamed_into_offset_b::<Complex64>(&dims, &perm, isa, alpha, threads, 0);
                streamed_into_offset_b::<ttgt::tensor::f16>(&dims, &perm, isa, alpha, threads, 0);
            }
        }
    }
}

/// Streamed row copies of short rows that are not whole store blocks (e.g. 24 f32, 96
/// bytes), whose batches lie one after another in B: each batch is streamed as one range,
/// its lines composed from the rows they cover. Every B offset within a line, every dtype
/// and level, plain and scaled copies, one and two threads; nothing outside B is written.
#[test]
fn joined_row_batches_match_reference() {
    // B[b][a][r] = alpha * A[a][b][r]: B's rows of one `b` follow one another.
    let perm = [1, 0, 2];
    // Rows of 17, 20, 24 and 33 f32 (68 to 132 bytes), 16 f32 (whole lines: only a
    // misaligned B takes the joined path), 9 and 24 f64, 5 complex f64.
    for (len, skip) in [(17, 0), (20, 3), (24, 0), (24, 5), (33, 7), (16, 2)] {
        for isa in Isa::available() {
            for (alpha, threads) in [(1.0, 1), (2.0, 1), (1.0, 2)] {
                streamed_into_offset_b::<f32>(&[20, 3, len], &perm, isa, alpha, threads, skip);
            }
        }
    }
    for (len, skip) in [(9, 0), (9, 1), (24, 0), (24, 3), (5, 1)] {
        for isa in Isa::available() {
            for (alpha, threads) in [(1.0, 1), (1.0, 2), (-0.5, 2)] {
                let d = [13, 2, len];
                streamed_into_offset_b::<f64>(&d, &perm, isa, alpha, threads, skip);
                streamed_into_offset_b::<Complex32>(&d, &perm, isa, alpha, threads, skip);
                streamed_into_offset_b::<Complex64>(&[7, 4, len], &perm, isa, alpha, threads, skip);
            }
        }
    }
}

/// Every level on shapes large enough for full micro-tiles plus remainders, every dtype.
#[test]
fn every_isa_and_block_on_tiles_with_remainders() {
    let dims = [67usize, 3, 45];
    let perm = [2usize, 1, 0];
    let va = ViewSpec {
        steps: vec![1, 1, 1],
    };
    for isa in Isa::available() {
        for (block, streaming, prefetch) in [
            (None, None, None),
            (None, Some(true), Some(true)),
            (None, Some(true), Some(false)),
            (Some(Isa::Avx512.width(DType::F32)), Some(true), Some(true)),
            (Some(64), Some(false), Some(true)),
        ] {
            let opts = TransposeOptions {
                threads: Some(2),
                parallel_min_bytes: Some(0),
                isa: Some(isa),
                block,
                streaming,
                prefetch,
                ..Default::default()
            };
            for (al, be) in [(1.0, 0.0), (0.5, 0.0), (2.0, -1.0)] {
                check::<f32>(&dims, &perm, &va, &va, al, be, &opts, false).unwrap();
                check::<f64>(&dims, &perm, &va, &va, al, be, &opts, false).unwrap();
                check::<Complex32>(&dims, &perm, &va, &va, al, be, &opts, false).unwrap();
                check::<Complex64>(&dims, &perm, &va, &va, al, be, &opts, false).unwrap();
            }
        }
    }
}

/// Streamed tiles into a B that starts anywhere inside a cache line (every element offset
/// from a line boundary): the B-side block grid shifts to the first line boundary, the first
/// block covers the columns before it. Every element of B gets `alpha * perm(A)` (a plain
/// and a scaled copy), nothing around B is touched; all levels and dtypes, several block
/// widths, one and two threads.
fn misaligned_case<T: Element>(dims: &[usize], perm: &[usize], opts: &TransposeOptions) {
    let es = std::mem::size_of::<T>();
    let n: usize = dims.iter().product();
    let a: Vec<T> = (0..n).map(value).collect();
    let la = Layout::row_major(dims).unwrap();
    let bdims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let lb = Layout::row_major(&bdims).unwrap();
    let plan = TransposePlan::new(perm, &la, &lb, T::DTYPE, opts).unwrap();
    let sentinel = T::from_parts(-7.25, 3.5);
    let mut back = vec![sentinel; n + 2 * 64];
    let start = back.as_ptr() as usize;
    for off_bytes in (0..64).step_by(es) {
        // First element of B `off_bytes` past a line boundary (the buffer itself starts at
        // a multiple of the element's alignment, not necessarily of its size).
        let first = (64 - start % 64) % 64 + off_bytes;
        if !first.is_multiple_of(es) {
            continue;
        }
        let off = first / es;
        // A plain copy (row copies stream only those) and a scaled one.
        for alpha in [T::one(), T::from_parts(0.5, 0.0)] {
            back.fill(sentinel);
            {
                let av = StridedView::from_slice(&a, la.clone(), 0).unwrap();
                let mut bv =
                    StridedViewMut::from_slice(&mut back[off..off + n], lb.clone(), 0).unwrap();
                plan.execute(alpha, &av, T::zero(), &mut bv).unwrap();
            }
            let strides_a = la.strides();
            for (lin, got) in back[off..off + n].iter().enumerate() {
                // B's multi-index from its linear position, then A's element.
                let mut rem = lin;
                let mut src = 0isize;
                for k in (0..bdims.len()).rev() {
                    let i = rem % bdims[k];
                    rem /= bdims[k];
                    src += i as isize * strides_a[perm[k]];
                }
                let want = alpha * a[src as usize];
                assert!(
                    (*got - want).abs_f64() <= 1e-6 * (1.0 + want.abs_f64()),
                    "offset {off_bytes} B, element {lin}: got {got}, want {want} ({opts:?})"
                );
            }
            assert!(
                back[..off].iter().all(|x| *x == sentinel),
                "before B, offset {off_bytes}"
            );
            assert!(
                back[off + n..].iter().all(|x| *x == sentinel),
                "after B, offset {off_bytes}"
            );
        }
    }
}

/// [`misaligned_case`] for all four element types.
fn misaligned_every_dtype(dims: &[usize], perm: &[usize], opts: &TransposeOptions) {
    misaligned_case::<f32>(dims, perm, opts);
    misaligned_case::<f64>(dims, perm, opts);
    misaligned_case::<Complex32>(dims, perm, opts);
    misaligned_case::<Complex64>(dims, perm, opts);
    misaligned_case::<ttgt::tensor::f16>(dims, perm, opts);
}

/// Streamed stores and the regroup rule forced on, at a level and thread count.
fn streamed_regrouped(isa: Isa, threads: usize) -> TransposeOptions {
    TransposeOptions {
        threads: Some(threads),
        parallel_min_bytes: Some(0),
        isa: Some(isa),
        streaming: Some(true),
        regroup: Some(true),
        ..Default::default()
    }
}

#[test]
fn streamed_tiles_into_misaligned_outputs() {
    // The six after the first four have B rows of whole lines that follow each other in
    // memory along the tile's rows (`[1, 0]`) or along an outer dimension (seams,
    // `kernel::Seam`, along the latter).
    let shapes: [(&[usize], &[usize]); 13] = [
        (&[37, 53], &[1, 0]),
        (&[48, 5, 3, 48], &[3, 1, 2, 0]),
        (&[16, 40, 9], &[2, 0, 1]),
        (&[7, 24, 384], &[0, 2, 1]),
        (&[48, 300], &[1, 0]),
        (&[32, 133], &[1, 0]),
        (&[32, 5, 70], &[2, 1, 0]),
        (&[3, 48, 4, 5, 48], &[4, 0, 3, 2, 1]),
        // B rows of 8 and 16 elements: one line of f64 (rows that are all head and tail)
        // or of f32, two or four of the complex types.
        (&[8, 5, 3, 40], &[3, 1, 2, 0]),
        (&[16, 5, 3, 40], &[3, 1, 2, 0]),
        // Row copies (A and B share their stride-1 dim): rows of whole lines (seams along an
        // outer dimension in plain copies) or not.
        (&[5, 7, 48], &[1, 0, 2]),
        (&[6, 9, 37], &[1, 0, 2]),
        (&[3, 40, 5, 32], &[0, 2, 1, 3]),
    ];
    for isa in Isa::available() {
        for threads in [1, 2] {
            for block in [None, Some(64)] {
                let opts = TransposeOptions {
                    threads: Some(threads),
                    parallel_min_bytes: Some(0),
                    isa: Some(isa),
                    block,
                    streaming: Some(true),
                    ..Default::default()
                };
                for (dims, perm) in shapes {
                    misaligned_every_dtype(dims, perm, &opts);
                }
            }
        }
    }
}

/// Row-major layouts of A (`dims`) and of B = perm(A).
fn row_major_pair(dims: &[usize], perm: &[usize]) -> (Layout, Layout) {
    let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    (
        Layout::row_major(dims).unwrap(),
        Layout::row_major(&bd).unwrap(),
    )
}

/// Full reversals whose streamed tiles would scatter single lines over B, run in the
/// regrouped nest (`TransposeOptions::regroup`): blocks of the whole B row (small tiles) or
/// of two lines with a remainder (long A rows), into a B at every offset inside a line, on
/// every level, dtype, one and two threads. The nest is taken where the rule says so: f32
/// on AVX-512 (where one line is one block of 16) on all three shapes.
#[test]
fn regrouped_scattered_tiles_into_misaligned_outputs() {
    let shapes: [(&[usize], &[usize], usize); 3] = [
        (&[48, 5, 3, 48], &[3, 2, 1, 0], 48),
        (&[48, 3, 1100], &[2, 1, 0], 32),
        (&[64, 3, 5, 2, 40], &[4, 3, 2, 1, 0], 64),
    ];
    for isa in Isa::available() {
        for threads in [1, 2] {
            let opts = streamed_regrouped(isa, threads);
            for (dims, perm, bj) in shapes {
                let (la, lb) = row_major_pair(dims, perm);
                let plan = TransposePlan::new(perm, &la, &lb, DType::F32, &opts).unwrap();
                if isa == Isa::Avx512 {
                    assert!(plan.regroups_lines(), "{dims:?}");
                    assert_eq!(plan.blocks().1, bj, "{dims:?}");
                    assert!(!plan.scatters_lines(), "{dims:?}");
                    let keep = TransposeOptions {
                        regroup: Some(false),
                        ..opts.clone()
                    };
                    let old = TransposePlan::new(perm, &la, &lb, DType::F32, &keep).unwrap();
                    assert!(old.scatters_lines() && !old.regroups_lines(), "{dims:?}");
                }
                misaligned_every_dtype(dims, perm, &opts);
            }
        }
    }
}

/// Streamed tiles short on both sides whose B rows are not whole lines run staged (through a
/// buffer, streamed to B in runs): odd and prime extents, every level, dtype, output offset
/// inside a line, one and two threads, with and without an A-side loop in the macro-tile (the
/// last shape: B's next dim is A's next dim too); off when the option says so, and not where
/// B's rows are whole lines.
#[test]
fn short_tiles_run_staged() {
    let shapes: [(&[usize], &[usize]); 4] = [
        (&[15, 6, 9, 13], &[3, 2, 1, 0]),
        (&[7, 5, 11, 3, 17], &[4, 3, 1, 2, 0]),
        (&[13, 5, 4, 3, 15], &[4, 3, 2, 1, 0]),
        (&[15, 6, 9, 13], &[3, 1, 2, 0]),
    ];
    for isa in Isa::available() {
        for threads in [1, 2] {
            let opts = streamed_regrouped(isa, threads);
            for (dims, perm) in shapes {
                let (la, lb) = row_major_pair(dims, perm);
                let plan = TransposePlan::new(perm, &la, &lb, DType::F64, &opts).unwrap();
                assert_eq!(plan.stages(), isa != Isa::Scalar, "{}", plan.describe());
                let off = TransposeOptions {
                    stage: Some(false),
                    ..opts.clone()
                };
                let plain = TransposePlan::new(perm, &la, &lb, DType::F64, &off).unwrap();
                assert!(!plain.stages(), "{}", plain.describe());
                misaligned_every_dtype(dims, perm, &opts);
            }
            // B rows of whole lines (864 f64 apart): not staged.
            let (dims, perm): (&[usize], &[usize]) = (&[16, 6, 9, 13], &[3, 2, 1, 0]);
            let (la, lb) = row_major_pair(dims, perm);
            let plan = TransposePlan::new(perm, &la, &lb, DType::F64, &opts).unwrap();
            assert!(!plan.stages(), "{}", plan.describe());
        }
    }
}

/// Streamed tiles whose A rows are one line and whose B rows are long take four-line B-side
/// blocks under the regroup rule (AVX-512, f32: 16-element A rows), and stay exact on every
/// level, dtype, misaligned output and thread count.
#[test]
fn one_line_tiles_take_four_line_blocks() {
    // i = A's dim 2 (16 f32, one line), j = A's dim 1 (80, rows one line apart in A).
    let (dims, perm): (&[usize], &[usize]) = (&[5, 80, 16], &[0, 2, 1]);
    for isa in Isa::available() {
        for threads in [1, 2] {
            let opts = streamed_regrouped(isa, threads);
            let (la, lb) = row_major_pair(dims, perm);
            if isa == Isa::Avx512 {
                let plan = TransposePlan::new(perm, &la, &lb, DType::F32, &opts).unwrap();
                assert_eq!(plan.blocks().1, 64, "{}", plan.describe());
                let keep = TransposeOptions {
                    regroup: Some(false),
                    ..opts.clone()
                };
                let old = TransposePlan::new(perm, &la, &lb, DType::F32, &keep).unwrap();
                assert_eq!(old.blocks().1, 16, "{}", old.describe());
            }
            misaligned_every_dtype(dims, perm, &opts);
        }
    }
}

/// Streamed one-thread strips that write one line of each of many B rows per visit (a 2-D
/// transpose of 320x320) take square macro-tiles of four micro-tiles a side under the
/// regroup rule, not at two threads nor without the rule, and stay exact on every level,
/// dtype and output offset.
#[test]
fn long_strips_take_square_tiles() {
    let (dims, perm): (&[usize], &[usize]) = (&[320, 320], &[1, 0]);
    let (la, lb) = row_major_pair(dims, perm);
    for isa in Isa::available() {
        for threads in [1, 2] {
            let opts = streamed_regrouped(isa, threads);
            for dtype in [DType::F32, DType::F64, DType::C32, DType::C64] {
                let plan = TransposePlan::new(perm, &la, &lb, dtype, &opts).unwrap();
                let keep = TransposeOptions {
                    regroup: Some(false),
                    ..opts.clone()
                };
                let old = TransposePlan::new(perm, &la, &lb, dtype, &keep).unwrap();
                let w = isa.width(dtype);
                if isa != Isa::Scalar && threads == 1 {
                    assert_eq!(plan.blocks(), (4 * w, 4 * w), "{}", plan.describe());
                    assert_ne!(old.blocks(), plan.blocks(), "{}", old.describe());
                } else {
                    assert_eq!(plan.blocks(), old.blocks(), "{}", plan.describe());
                }
            }
            misaligned_every_dtype(dims, perm, &opts);
        }
    }
}

/// The tiles' software prefetch runs a distance of A bytes ahead: sixteen 1 KiB tiles (16x16
/// f32) by default, the next tile with distance 0, and at most `PREFETCH_MAX_UNITS` for a
/// huge distance; the results are exact at every distance, on every level, dtype, thread
/// count (ranges split between tasks, each with its own look-ahead) and output offset.
#[test]
fn prefetch_distances_keep_results_exact() {
    // i = A's dim 3 (16 f32, one line), j = A's dim 1 (16, rows 80 elements apart).
    let (dims, perm): (&[usize], &[usize]) = (&[6, 16, 5, 16], &[2, 0, 3, 1]);
    let (la, lb) = row_major_pair(dims, perm);
    for isa in Isa::available() {
        for threads in [1, 2] {
            for (distance, units) in [
                (None, PREFETCH_AHEAD_BYTES / 1024),
                (Some(0), 1),
                (Some(1 << 30), PREFETCH_MAX_UNITS),
            ] {
                let opts = TransposeOptions {
                    threads: Some(threads),
                    parallel_min_bytes: Some(0),
                    isa: Some(isa),
                    streaming: Some(true),
                    prefetch: Some(true),
                    prefetch_distance: distance,
                    ..Default::default()
                };
                let plan = TransposePlan::new(perm, &la, &lb, DType::F32, &opts).unwrap();
                if isa != Isa::Scalar {
                    let (i, j) = match plan.kernel() {
                        KernelKind::Tile { i, j, .. } => (i.n, j.n),
                        k => panic!("{k:?}: {}", plan.describe()),
                    };
                    assert_eq!((i, j), (16, 16), "{}", plan.describe());
                    assert_eq!(plan.prefetch_ahead(), Some(units), "{}", plan.describe());
                    assert!(plan
                        .describe()
                        .contains(&format!("prefetch {units} unit(s)")));
                } else {
                    assert_eq!(plan.prefetch_ahead(), None, "{}", plan.describe());
                }
                misaligned_every_dtype(dims, perm, &opts);
            }
        }
    }
}

/// Complex (non-real) scalars take the scalar path and are still right.
#[test]
fn complex_scalars() {
    let a = ArrayD::<Complex64>::from_shape_fn(IxDyn(&[20, 30]), |ix| {
        Complex64::new(ix[0] as f64, ix[1] as f64)
    });
    let mut b = ArrayD::<Complex64>::from_elem(IxDyn(&[30, 20]), Complex64::new(1.0, 1.0));
    let (al, be) = (Complex64::new(0.5, 2.0), Complex64::new(-1.0, 0.25));
    let plan = TransposePlan::new(
        &[1, 0],
        &Layout::of(&a),
        &Layout::of(&b),
        DType::C64,
        &TransposeOptions::default(),
    )
    .unwrap();
    plan.execute(
        al,
        &StridedView::of(&a),
        be,
        &mut StridedViewMut::of(&mut b).unwrap(),
    )
    .unwrap();
    for i in 0..30 {
        for j in 0..20 {
            let want = al * a[[j, i]] + be * Complex64::new(1.0, 1.0);
            assert!((b[[i, j]] - want).norm() < 1e-12);
        }
    }
}

/// Long contiguous rows are chunked across threads; identity permutations are copies.
#[test]
fn long_rows_and_copies() {
    let n = 100_003;
    let a = ArrayD::<f32>::from_shape_fn(IxDyn(&[3, n]), |ix| (ix[0] * n + ix[1]) as f32);
    let mut b = ArrayD::<f32>::zeros(IxDyn(&[3, n]));
    let plan = TransposePlan::new(
        &[0, 1],
        &Layout::of(&a),
        &Layout::of(&b),
        DType::F32,
        &TransposeOptions {
            threads: Some(2),
            parallel_min_bytes: Some(0),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(plan.normalized().is_copy());
    plan.execute(
        1.0,
        &StridedView::of(&a),
        0.0,
        &mut StridedViewMut::of(&mut b).unwrap(),
    )
    .unwrap();
    assert_eq!(a, b);
}

/// `TransposePlan::measure` of `b = alpha * perm(a) + beta * b` within `ms` milliseconds.
fn measured<T: Element>(
    perm: &[usize],
    alpha: T,
    a: &ArrayD<T>,
    beta: T,
    b: &mut ArrayD<T>,
    ms: u64,
) -> TransposePlan {
    let o = TransposeOptions {
        tuning: Tuning::Measure {
            budget: std::time::Duration::from_millis(ms),
        },
        ..Default::default()
    };
    let (av, mut bv) = (StridedView::of(a), StridedViewMut::of(b).unwrap());
    TransposePlan::measure(perm, alpha, &av, beta, &mut bv, &o).unwrap()
}

/// Measured tuning with beta != 0 leaves B as after exactly one execution.
#[test]
fn measure_applies_once() {
    let a = ArrayD::<f64>::from_shape_fn(IxDyn(&[40, 50, 3]), |ix| {
        (ix[0] + 100 * ix[1] + 10000 * ix[2]) as f64
    });
    let mut b = ArrayD::<f64>::from_elem(IxDyn(&[3, 40, 50]), 1.0);
    let _ = measured(&[2, 0, 1], 2.0, &a, 3.0, &mut b, 50);
    for ((k, i, j), v) in b
        .view()
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap()
        .indexed_iter()
    {
        assert_eq!(*v, 2.0 * a[[i, j, k]] + 3.0);
    }
}

/// The default store choice on large outputs (layouts only): tiles with one-line A rows
/// follow the host's rule (`set_line_tile_streaming`, the only test here that sets it), except
/// adjacent B rows read from far-apart A rows, which stream; longer A rows and row copies
/// stream; a forced choice wins.
#[test]
fn default_store_choice() {
    if Isa::detect() == Isa::Scalar {
        return; // nothing streams without SIMD kernels
    }
    let plan = |dims: &[usize], perm: &[usize], streaming: Option<bool>| {
        let a = Layout::row_major(dims).unwrap();
        let b = Layout::row_major(&perm.iter().map(|&p| dims[p]).collect::<Vec<_>>()).unwrap();
        let o = TransposeOptions {
            streaming,
            ..Default::default()
        };
        TransposePlan::new(perm, &a, &b, DType::F32, &o).unwrap()
    };
    let d6 = [16usize; 6];
    // A rows of 16 f32 (one line), B rows 1 KiB apart: as the rule says, unless forced.
    set_line_tile_streaming(Some(false));
    assert!(!line_tile_streaming());
    assert!(!plan(&d6, &[0, 1, 2, 5, 3, 4], None).streams(true));
    assert!(plan(&d6, &[0, 1, 2, 5, 3, 4], Some(true)).streams(true));
    // Adjacent B rows (one contiguous 1 KiB write per unit): streamed when the A rows are far
    // apart (256 KiB), not when they are adjacent too.
    assert!(plan(&d6, &[0, 2, 3, 4, 5, 1], None).streams(true));
    assert!(!plan(&d6, &[1, 0, 2, 3, 5, 4], None).streams(true));
    // A plan keeps the rule it was made under.
    let made_plain = plan(&d6, &[5, 4, 3, 2, 1, 0], None);
    set_line_tile_streaming(Some(true));
    assert!(line_tile_streaming());
    assert!(plan(&d6, &[0, 1, 2, 5, 3, 4], None).streams(true));
    assert!(plan(&d6, &[1, 0, 2, 3, 5, 4], None).streams(true));
    assert!(plan(&d6, &[5, 4, 3, 2, 1, 0], None).streams(true));
    assert!(!made_plain.streams(true));
    assert!(!plan(&d6, &[0, 1, 2, 5, 3, 4], Some(false)).streams(true));
    // Unset: the built-in default, streaming on AVX-512 CPUs.
    set_line_tile_streaming(None);
    assert_eq!(line_tile_streaming(), Isa::detect() == Isa::Avx512);
    assert_eq!(
        plan(&d6, &[0, 1, 2, 5, 3, 4], None).streams(true),
        Isa::detect() == Isa::Avx512
    );
    // A rows of 96 f32 (the TTC set's shapes): streamed; never with beta != 0.
    let p = plan(&[75, 75, 96, 96], &[1, 0, 3, 2], None);
    assert!(p.streams(true) && !p.streams(false));
    assert!(!plan(&[75, 75, 96, 96], &[1, 0, 3, 2], Some(false)).streams(true));
    // Row copies stream; small outputs do not.
    assert!(plan(&d6, &[1, 0, 2, 3, 4, 5], None).streams(true));
    assert!(!plan(&[64, 64], &[1, 0], None).streams(true));
}

/// Measured tuning with beta = 0 (a 2 MiB output, below the streaming threshold, so the
/// flipped candidates stream): candidates with either kind of stores all overwrite B
/// (prefilled with NaN) with the right values, and so does the chosen plan.
#[test]
fn measure_with_both_store_kinds() {
    let dims = [16usize, 16, 128, 128];
    let a = ArrayD::<f32>::from_shape_fn(IxDyn(&dims), |ix| {
        (ix[0] + 16 * ix[1] + 256 * ix[2] + 32768 * ix[3]) as f32
    });
    let mut b = ArrayD::<f32>::from_elem(IxDyn(&[16, 128, 16, 128]), f32::NAN);
    let plan = measured(&[1, 3, 0, 2], 1.0, &a, 0.0, &mut b, 400);
    let check = |b: &ArrayD<f32>| {
        for (ix, v) in b.indexed_iter() {
            assert_eq!(*v, a[[ix[2], ix[0], ix[3], ix[1]]]);
        }
    };
    check(&b);
    b.fill(f32::NAN);
    plan.execute(
        1.0,
        &StridedView::of(&a),
        0.0,
        &mut StridedViewMut::of(&mut b).unwrap(),
    )
    .unwrap();
    check(&b);
}

/// Errors: overlapping output, wrong dtype, wrong layouts, bad permutation, bad shape.
#[test]
fn errors() {
    let mut data = vec![0f64; 100];
    let a = ArrayD::<f64>::zeros(IxDyn(&[4, 5]));
    let l = Layout::of(&a);
    let t = Layout::row_major(&[5, 4]).unwrap();
    assert!(TransposePlan::new(&[0, 0], &l, &t, DType::F64, &TransposeOptions::default()).is_err());
    assert!(TransposePlan::new(&[0, 1], &l, &t, DType::F64, &TransposeOptions::default()).is_err());
    let overl = Layout::new(vec![5, 4], vec![1, 1]).unwrap();
    assert!(matches!(
        TransposePlan::new(
            &[1, 0],
            &l,
            &overl,
            DType::F64,
            &TransposeOptions::default()
        ),
        Err(ttgt::Error::Overlap { .. })
    ));
    let plan =
        TransposePlan::new(&[1, 0], &l, &t, DType::F64, &TransposeOptions::default()).unwrap();
    let mut b32 = vec![0f32; 20];
    let r = plan.execute(
        1.0f32,
        &StridedView::from_slice(&[0f32; 20], l.clone(), 0).unwrap(),
        0.0,
        &mut StridedViewMut::from_slice(&mut b32, t.clone(), 0).unwrap(),
    );
    assert!(matches!(r, Err(ttgt::Error::PlanMismatch(_))));
    let r = plan.execute(
        1.0,
        &StridedView::of(&a),
        0.0,
        &mut StridedViewMut::from_slice(&mut data, Layout::col_major(&[5, 4]).unwrap(), 0).unwrap(),
    );
    assert!(matches!(r, Err(ttgt::Error::PlanMismatch(_))));
}

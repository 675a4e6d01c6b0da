//! Every error class of `ttgt::Error`, one table row each: the variant, its fields and the
//! key parts of the message (index letter, operand number, position, both sizes). No row may
//! panic. Zero-size extents, by contrast, are not errors. Then arbitrary specs on arbitrary
//! shapes through every entry point: an error or the reference's result, never a panic.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ndarray::{s, Array2, ArrayD, ArrayView, IxDyn, ShapeBuilder};
use ttgt::plan::{PathOptions, PathStrategy};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, DType, Error, Layout};

fn z(shape: &[usize]) -> ArrayD<f64> {
    ArrayD::zeros(IxDyn(shape))
}

fn rm(dims: &[usize]) -> Layout {
    Layout::row_major(dims).expect("layout")
}

type Run = Box<dyn Fn() -> ttgt::Result<()>>;

struct Row {
    name: &'static str,
    run: Run,
    variant: fn(&Error) -> bool,
    message: &'static [&'static str],
}

fn row(
    name: &'static str,
    run: impl Fn() -> ttgt::Result<()> + 'static,
    variant: fn(&Error) -> bool,
    message: &'static [&'static str],
) -> Row {
    Row {
        name,
        run: Box::new(run),
        variant,
        message,
    }
}

fn contract2(spec: &'static str, a: &[usize], b: &[usize]) -> impl Fn() -> ttgt::Result<()> {
    let (a, b) = (z(a), z(b));
    move || ttgt::contract(spec, &a, &b).map(drop)
}

fn unary(spec: &'static str, a: &[usize]) -> impl Fn() -> ttgt::Result<()> {
    let a = z(a);
    move || ttgt::einsum_unary(spec, &a).map(drop)
}

fn parse_rows() -> Vec<Row> {
    vec![
        row(
            "invalid character (digit)",
            contract2("ij,j1->i", &[2, 3], &[3, 3]),
            |e| matches!(e, Error::InvalidCharacter { ch: '1', pos: 4, spec } if spec == "ij,j1->i"),
            &["'1'", "position 4", "\"ij,j1->i\""],
        ),
        row(
            "invalid character counted in characters, not bytes",
            // U+00A0 is whitespace (skipped) and two bytes long: '_' is character 9, byte 10.
            contract2("i\u{a0}j,jk->i_", &[2, 3], &[3, 4]),
            |e| {
                matches!(
                    e,
                    Error::InvalidCharacter {
                        ch: '_',
                        pos: 9,
                        ..
                    }
                )
            },
            &["'_'", "position 9"],
        ),
        row(
            "invalid character in the output",
            unary("ij->i2", &[2, 3]),
            |e| {
                matches!(
                    e,
                    Error::InvalidCharacter {
                        ch: '2',
                        pos: 5,
                        ..
                    }
                )
            },
            &["'2'", "position 5"],
        ),
        row(
            "'-' without '>'",
            contract2("ij-jk", &[2, 3], &[3, 4]),
            |e| matches!(e, Error::Malformed { pos: 2, .. }),
            &["position 2", "'-' must be followed by '>'", "\"ij-jk\""],
        ),
        row(
            "'-' at the end",
            contract2("ij,jk-", &[2, 3], &[3, 4]),
            |e| matches!(e, Error::Malformed { pos: 5, .. }),
            &["position 5", "'-' must be followed by '>'"],
        ),
        row(
            "'>' without '-'",
            contract2("ij>jk", &[2, 3], &[3, 4]),
            |e| matches!(e, Error::Malformed { pos: 2, .. }),
            &["position 2", "'>' without '-'"],
        ),
        row(
            "stray '.'",
            contract2("i.j,jk", &[2, 3], &[3, 4]),
            |e| matches!(e, Error::Malformed { pos: 1, .. }),
            &["position 1", "'.' must be part of '...'"],
        ),
        row(
            "'..' at the end",
            unary("ij..", &[2, 3]),
            |e| matches!(e, Error::Malformed { pos: 2, .. }),
            &["position 2", "'.' must be part of '...'"],
        ),
        row(
            "'....'",
            unary("....ij", &[2, 3]),
            |e| matches!(e, Error::Malformed { pos: 3, .. }),
            &["position 3", "'....'"],
        ),
        row(
            "second '->'",
            unary("ij->i->j", &[2, 3]),
            |e| matches!(e, Error::Malformed { pos: 5, .. }),
            &["position 5", "a second '->'"],
        ),
        row(
            "two '...' in one term",
            contract2("...i...,i", &[2, 3], &[3]),
            |e| matches!(e, Error::Malformed { pos: 4, .. }),
            &["position 4", "a second '...' in one term"],
        ),
        row(
            "comma in the output",
            contract2("ij,jk->i,k", &[2, 3], &[3, 4]),
            |e| matches!(e, Error::Malformed { pos: 8, .. }),
            &["position 8", "',' after '->'"],
        ),
        row(
            "repeated output index",
            contract2("ij,jk->kik", &[2, 3], &[3, 4]),
            |e| {
                matches!(
                    e,
                    Error::RepeatedOutputIndex {
                        label: 'k',
                        first: 7,
                        pos: 9,
                        ..
                    }
                )
            },
            &[
                "index 'k' appears twice",
                "positions 7 and 9",
                "\"ij,jk->kik\"",
            ],
        ),
        row(
            "output index absent from the inputs",
            contract2("ij,jk->iz", &[2, 3], &[3, 4]),
            |e| {
                matches!(
                    e,
                    Error::UnknownOutputIndex {
                        label: 'z',
                        pos: 8,
                        ..
                    }
                )
            },
            &["output index 'z'", "position 8", "appears in no input"],
        ),
    ]
}

fn binding_rows() -> Vec<Row> {
    vec![
        row(
            "contract with a three-operand spec",
            contract2("ij,jk,kl->il", &[2, 3], &[3, 4]),
            |e| {
                matches!(
                    e,
                    Error::OperandCount {
                        expected: 3,
                        given: 2,
                        ..
                    }
                )
            },
            &[
                "\"ij,jk,kl->il\"",
                "has 3 input operand(s) but 2 were given",
            ],
        ),
        row(
            "contract with a one-operand spec",
            contract2("ij->ji", &[2, 3], &[3, 4]),
            |e| {
                matches!(
                    e,
                    Error::OperandCount {
                        expected: 1,
                        given: 2,
                        ..
                    }
                )
            },
            &["has 1 input operand(s) but 2 were given"],
        ),
        row(
            "einsum_unary with a two-operand spec",
            unary("ij,jk->ik", &[2, 3]),
            |e| {
                matches!(
                    e,
                    Error::OperandCount {
                        expected: 2,
                        given: 1,
                        ..
                    }
                )
            },
            &["has 2 input operand(s) but 1 were given"],
        ),
        row(
            "einsum with one operand for two terms",
            || {
                let a = z(&[2, 3]);
                ttgt::einsum("ij,jk->ik", &[a.view()]).map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::OperandCount {
                        expected: 2,
                        given: 1,
                        ..
                    }
                )
            },
            &["has 2 input operand(s) but 1 were given"],
        ),
        row(
            "einsum with three operands for two terms",
            || {
                let (a, b, c) = (z(&[2, 3]), z(&[3, 4]), z(&[4]));
                ttgt::einsum("ij,jk->ik", &[a.view(), b.view(), c.view()]).map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::OperandCount {
                        expected: 2,
                        given: 3,
                        ..
                    }
                )
            },
            &["has 2 input operand(s) but 3 were given"],
        ),
        row(
            "einsum with no operand",
            || ttgt::einsum::<f64>("->", &[]).map(drop),
            |e| {
                matches!(
                    e,
                    Error::OperandCount {
                        expected: 1,
                        given: 0,
                        ..
                    }
                )
            },
            &["has 1 input operand(s) but 0 were given"],
        ),
        row(
            "rank mismatch",
            contract2("ijk,jk->i", &[2, 3], &[3, 3]),
            |e| {
                matches!(e, Error::RankMismatch { operand: 0, rank: 2, subscripts, need }
                    if subscripts == "ijk" && need == "need rank 3")
            },
            &["operand 0 has rank 2", "\"ijk\"", "need rank 3"],
        ),
        row(
            "rank mismatch in the second operand",
            contract2("ij,jk->ik", &[2, 3], &[3]),
            |e| {
                matches!(
                    e,
                    Error::RankMismatch {
                        operand: 1,
                        rank: 1,
                        ..
                    }
                )
            },
            &["operand 1 has rank 1", "\"jk\"", "need rank 2"],
        ),
        row(
            "rank mismatch with an ellipsis",
            unary("i...jk", &[2, 3]),
            |e| {
                matches!(e, Error::RankMismatch { operand: 0, rank: 2, subscripts, .. }
                    if subscripts == "i...jk")
            },
            &["operand 0 has rank 2", "\"i...jk\"", "need rank at least 3"],
        ),
        row(
            "extent mismatch across operands",
            contract2("ij,jk->ik", &[2, 3], &[4, 5]),
            |e| {
                matches!(
                    e,
                    Error::ExtentMismatch {
                        label: 'j',
                        first_operand: 0,
                        first_axis: 1,
                        first_extent: 3,
                        second_operand: 1,
                        second_axis: 0,
                        second_extent: 4,
                    }
                )
            },
            &["index 'j' has extent 3 in operand 0 (axis 1) but 4 in operand 1 (axis 0)"],
        ),
        row(
            "extent mismatch within one operand",
            unary("ii", &[2, 3]),
            |e| {
                matches!(
                    e,
                    Error::ExtentMismatch {
                        label: 'i',
                        first_operand: 0,
                        first_axis: 0,
                        first_extent: 2,
                        second_operand: 0,
                        second_axis: 1,
                        second_extent: 3,
                    }
                )
            },
            &["index 'i' has extent 2 in operand 0 (axis 0) but 3 in operand 0 (axis 1)"],
        ),
        row(
            "extent mismatch within the second operand",
            contract2("ij,kk->ijk", &[2, 3], &[4, 5]),
            |e| {
                matches!(
                    e,
                    Error::ExtentMismatch {
                        label: 'k',
                        first_operand: 1,
                        first_axis: 0,
                        first_extent: 4,
                        second_operand: 1,
                        second_axis: 1,
                        second_extent: 5,
                    }
                )
            },
            &["index 'k' has extent 4 in operand 1 (axis 0) but 5 in operand 1 (axis 1)"],
        ),
        row(
            "'...' dimensions that cannot broadcast",
            contract2("...i,...i->...", &[2, 3], &[4, 3]),
            |e| {
                matches!(
                    e,
                    Error::Broadcast {
                        dim: 0,
                        first_operand: 0,
                        first_extent: 2,
                        second_operand: 1,
                        second_extent: 4,
                    }
                )
            },
            &[
                "broadcast dimension 0",
                "extent 2 in operand 0 but 4 in operand 1",
            ],
        ),
        row(
            "'...' dimensions that cannot broadcast, second from the right",
            contract2("...i,...i->...", &[2, 5, 3], &[4, 5, 3]),
            |e| {
                matches!(
                    e,
                    Error::Broadcast {
                        dim: 1,
                        first_extent: 2,
                        second_extent: 4,
                        ..
                    }
                )
            },
            &[
                "broadcast dimension 1",
                "extent 2 in operand 0 but 4 in operand 1",
            ],
        ),
        row(
            "explicit output without '...'",
            unary("...i->i", &[2, 3]),
            |e| matches!(e, Error::MissingOutputEllipsis { ndim: 1, .. }),
            &["\"...i->i\"", "covers 1 dimension(s)", "no '...'"],
        ),
        row(
            "explicit output without '...' (two operands)",
            contract2("...ij,...jk->ik", &[5, 6, 2, 3], &[3, 4]),
            |e| matches!(e, Error::MissingOutputEllipsis { ndim: 2, .. }),
            &["covers 2 dimension(s)"],
        ),
    ]
}

/// A read-only view of one element broadcast (stride 0) to a huge shape: no memory.
fn huge_view<'a>(data: &'a [f64], shape: &[usize]) -> ndarray::ArrayViewD<'a, f64> {
    let strides = vec![0usize; shape.len()];
    ArrayView::from_shape(IxDyn(shape).strides(IxDyn(&strides)), &data[..1]).expect("stride 0")
}

fn output_rows() -> Vec<Row> {
    vec![
        row(
            "iteration space overflow",
            || {
                let one = [1.0f64];
                let big = huge_view(&one, &[1 << 20, 1 << 20]);
                ttgt::contract("ab,cd->abcd", &big, &big).map(drop)
            },
            |e| matches!(e, Error::SizeOverflow { .. }),
            &["size overflow", "iteration space", "\"ab,cd->abcd\""],
        ),
        row(
            "iteration space overflow with a contraction",
            || {
                let one = [1.0f64];
                let big = huge_view(&one, &[1 << 16, 1 << 16, 1 << 16]);
                let mut c = z(&[1, 1, 1, 1]);
                ttgt::contract_into("abc,cde->abde", 1.0, &big, &big, 0.0, &mut c)
            },
            |e| matches!(e, Error::SizeOverflow { .. }),
            &["size overflow", "\"abc,cde->abde\""],
        ),
        row(
            "plan for an overflowing iteration space",
            || {
                let l = Layout::new(vec![1 << 20, 1 << 20], vec![0, 0])?;
                ContractionPlan::new("ab,cd->abcd", &[l.clone(), l], &rm(&[1]), DType::F32)
                    .map(drop)
            },
            |e| matches!(e, Error::SizeOverflow { .. }),
            &["size overflow", "iteration space"],
        ),
        row(
            "layout that overflows",
            || Layout::row_major(&[1 << 40, 1 << 40]).map(drop),
            |e| matches!(e, Error::SizeOverflow { .. }),
            &["size overflow", "1099511627776"],
        ),
        row(
            "result too large to allocate",
            || {
                let one = [1.0f64];
                let big = huge_view(&one, &[1 << 30, 1 << 30]);
                ttgt::einsum_unary("ab->ab", &big).map(drop)
            },
            |e| matches!(e, Error::Allocation { .. }),
            &["could not allocate", "the result"],
        ),
        row(
            "contract_into with a wrong output shape",
            || {
                let (a, b, mut c) = (z(&[2, 3]), z(&[3, 4]), z(&[3, 3]));
                ttgt::contract_into("ij,jk->ik", 1.0, &a, &b, 0.0, &mut c)
            },
            |e| {
                matches!(e, Error::OutputShape { expected, given, .. }
                    if expected == &[2, 4] && given == &[3, 3])
            },
            &[
                "output has shape [3, 3]",
                "\"ij,jk->ik\"",
                "produces shape [2, 4]",
            ],
        ),
        row(
            "contract_into with a wrong output rank",
            || {
                let (a, b, mut c) = (z(&[2, 3]), z(&[3, 4]), z(&[2, 4, 1]));
                ttgt::contract_into("ij,jk->ik", 1.0, &a, &b, 0.0, &mut c)
            },
            |e| matches!(e, Error::OutputShape { .. }),
            &["output has shape [2, 4, 1]", "produces shape [2, 4]"],
        ),
        row(
            "einsum_unary_into with a wrong output shape",
            || {
                let (a, mut c) = (z(&[2, 3]), z(&[2]));
                ttgt::einsum_unary_into("ij->j", 1.0, &a, 0.0, &mut c)
            },
            |e| matches!(e, Error::OutputShape { .. }),
            &["output has shape [2]", "produces shape [3]"],
        ),
        row(
            "permute_into with a wrong output shape",
            || {
                let (a, mut b) = (z(&[2, 3, 4]), z(&[2, 3, 4]));
                ttgt::permute_into(1.0, &a, &[2, 0, 1], 0.0, &mut b)
            },
            |e| matches!(e, Error::OutputShape { .. }),
            &["output has shape [2, 3, 4]", "produces shape [4, 2, 3]"],
        ),
        row(
            "plan with a wrong output shape",
            || {
                ContractionPlan::new(
                    "ij,jk->ik",
                    &[rm(&[3, 4]), rm(&[4, 5])],
                    &rm(&[5, 3]),
                    DType::F64,
                )
                .map(drop)
            },
            |e| matches!(e, Error::OutputShape { .. }),
            &["output has shape [5, 3]", "produces shape [3, 5]"],
        ),
        row(
            "self-overlapping mutable view",
            || {
                let mut data = vec![0.0f32; 4];
                let l = Layout::new(vec![2, 2], vec![1, 1])?;
                StridedViewMut::from_slice(&mut data, l, 0).map(drop)
            },
            |e| matches!(e, Error::Overlap { .. }),
            &["overlaps itself"],
        ),
        row(
            "plan with a self-overlapping output (zero stride)",
            || {
                let c = Layout::new(vec![2, 2], vec![0, 1])?;
                ContractionPlan::new("ij,jk->ik", &[rm(&[2, 3]), rm(&[3, 2])], &c, DType::F64)
                    .map(drop)
            },
            |e| matches!(e, Error::Overlap { .. }),
            &["overlaps itself"],
        ),
        row(
            "plan with a self-overlapping output (interleaved strides)",
            || {
                let c = Layout::new(vec![3, 4], vec![2, 1])?;
                ContractionPlan::new("ij->ij", &[rm(&[3, 4])], &c, DType::C64).map(drop)
            },
            |e| matches!(e, Error::Overlap { .. }),
            &["overlaps itself"],
        ),
        row(
            "output interleaved with the input (one buffer)",
            || {
                let mut buf = ndarray::Array1::<f64>::zeros(8);
                let (a, mut c) = buf.multi_slice_mut((s![..;2], s![1..;2]));
                ttgt::einsum_unary_into("i->i", 1.0, &a, 0.0, &mut c)
            },
            |e| matches!(e, Error::Overlap { what } if what == "input operand 0"),
            &["the output view overlaps input operand 0"],
        ),
        row(
            "output interleaved with the second input",
            || {
                let mut buf = ndarray::Array1::<f64>::zeros(12);
                let (a, b, mut c) = buf.multi_slice_mut((s![..4], s![4..;2], s![5..;2]));
                ttgt::contract_into("i,i->i", 1.0, &a, &b, 0.0, &mut c)
            },
            |e| matches!(e, Error::Overlap { what } if what == "input operand 1"),
            &["the output view overlaps input operand 1"],
        ),
        row(
            "plan executed with the output interleaved with an input",
            || {
                let mut buf = ndarray::Array2::<f64>::zeros((4, 4));
                let (a, mut c) = buf.multi_slice_mut((s![.., ..;2], s![.., 1..;2]));
                let plan =
                    ContractionPlan::new("ij->ij", &[Layout::of(&a)], &Layout::of(&c), DType::F64)?;
                let mut cv = StridedViewMut::of(&mut c)?;
                plan.execute(1.0, &[StridedView::of(&a)], 0.0, &mut cv)
                    .map(drop)
            },
            |e| matches!(e, Error::Overlap { .. }),
            &["overlaps input operand 0"],
        ),
        row(
            "permute_into with the output interleaved with the input",
            || {
                let mut buf = ndarray::Array2::<f64>::zeros((4, 4));
                let (a, mut c) = buf.multi_slice_mut((s![..;2, ..], s![1..;2, ..]));
                let at = a.t();
                ttgt::permute_into(1.0, &at, &[1, 0], 0.0, &mut c)
            },
            |e| matches!(e, Error::Overlap { .. }),
            &["overlaps input operand 0"],
        ),
        row(
            "permutation too short",
            || ttgt::permute(&z(&[2, 3, 4]), &[0, 1]).map(drop),
            |e| matches!(e, Error::InvalidPermutation { perm, rank: 3 } if perm == &[0, 1]),
            &["[0, 1] is not a permutation of 0..3"],
        ),
        row(
            "permutation with a repeat",
            || ttgt::permute(&z(&[2, 3, 4]), &[0, 0, 1]).map(drop),
            |e| matches!(e, Error::InvalidPermutation { rank: 3, .. }),
            &["[0, 0, 1] is not a permutation of 0..3"],
        ),
        row(
            "permutation out of range (permute_into)",
            || {
                let (a, mut b) = (z(&[2, 3, 4]), z(&[2, 3, 4]));
                ttgt::permute_into(1.0, &a, &[0, 1, 3], 0.0, &mut b)
            },
            |e| matches!(e, Error::InvalidPermutation { rank: 3, .. }),
            &["[0, 1, 3] is not a permutation of 0..3"],
        ),
        row(
            "layout with mismatched lengths",
            || Layout::new(vec![3], vec![1, 1]).map(drop),
            |e| matches!(e, Error::Layout(_)),
            &["1 extents but 2 strides"],
        ),
        row(
            "strided view reaching outside its slice",
            || {
                let data = [0.0f64; 6];
                StridedView::from_slice(&data, Layout::new(vec![3, 2], vec![-2, 1])?, 0).map(drop)
            },
            |e| matches!(e, Error::Layout(_)),
            &["reaches outside a slice of 6 elements"],
        ),
        row(
            "plan with three operands",
            || {
                let l = rm(&[2]);
                ContractionPlan::new(
                    "i,i,i->i",
                    &[l.clone(), l.clone(), l.clone()],
                    &l,
                    DType::F64,
                )
                .map(drop)
            },
            |e| matches!(e, Error::Unsupported(_)),
            &["one or two operands", "\"i,i,i->i\""],
        ),
    ]
}

fn plan_rows() -> Vec<Row> {
    let too_many = ttgt::threads::MAX_THREADS + 1;
    vec![
        row(
            "contraction plan for more threads than supported",
            move || {
                let o = ttgt::plan::PlanOptions {
                    threads: Some(too_many),
                    ..Default::default()
                };
                ContractionPlan::with_options(
                    "ij,jk->ik",
                    &[rm(&[2, 3]), rm(&[3, 4])],
                    &rm(&[2, 4]),
                    DType::F64,
                    &o,
                )
                .map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::Threads {
                        requested: 1025,
                        max: 1024
                    }
                )
            },
            &["1025 threads requested", "at most 1024"],
        ),
        row(
            "contraction from a thread whose override is too large",
            move || {
                ttgt::threads::with_threads(too_many, || {
                    ttgt::contract("ij,jk->ik", &z(&[2, 3]), &z(&[3, 4])).map(drop)
                })
            },
            |e| matches!(e, Error::Threads { .. }),
            &["threads requested"],
        ),
        row(
            "transposition plan for more threads than supported",
            move || {
                let o = ttgt::transpose::TransposeOptions {
                    threads: Some(too_many),
                    ..Default::default()
                };
                ttgt::transpose::TransposePlan::new(
                    &[1, 0],
                    &rm(&[3, 4]),
                    &rm(&[4, 3]),
                    DType::F64,
                    &o,
                )
                .map(drop)
            },
            |e| matches!(e, Error::Threads { .. }),
            &["threads requested"],
        ),
        row(
            "view at an offset near the end of the address range",
            || {
                let data = [0.0f64; 8];
                StridedView::from_slice(&data, rm(&[2, 2]), usize::MAX - 1).map(drop)
            },
            |e| matches!(e, Error::Layout(_)),
            &["reaches outside a slice of 8 elements"],
        ),
        row(
            "diagonal whose summed stride overflows",
            || {
                let l = Layout::new(vec![2, 2], vec![isize::MAX / 2 + 1, isize::MAX / 2 + 1])?;
                l.diagonal(&[0, 0]).map(drop)
            },
            |e| matches!(e, Error::SizeOverflow { .. } | Error::Layout(_)),
            &["overflow"],
        ),
        row(
            "cycle schedule for 2^62 threads",
            || ttgt::transpose::inplace::cycle_schedule(6, 4, 1 << 62).map(drop),
            |e| matches!(e, Error::Threads { .. }),
            &["threads requested"],
        ),
        row(
            "in-place transposition on more threads than supported",
            move || {
                let mut v = vec![0u8; 12];
                ttgt::transpose::inplace::transpose_chunks_in_place(&mut v, 3, 4, 1, Some(too_many))
            },
            |e| matches!(e, Error::Threads { .. }),
            &["threads requested"],
        ),
        row(
            "plan executed with another element type",
            || {
                let (a, b) = (Array2::<f32>::zeros((2, 3)), Array2::<f32>::zeros((3, 4)));
                let mut c = Array2::<f32>::zeros((2, 4));
                let plan = ContractionPlan::new(
                    "ij,jk->ik",
                    &[Layout::of(&a), Layout::of(&b)],
                    &Layout::of(&c),
                    DType::F64,
                )?;
                let ins = [StridedView::of(&a), StridedView::of(&b)];
                plan.execute(1.0f32, &ins, 0.0, &mut StridedViewMut::of(&mut c)?)
                    .map(drop)
            },
            |e| matches!(e, Error::PlanMismatch(_)),
            &["plan mismatch", "plan made for f64, executed with f32"],
        ),
        row(
            "plan executed with an operand of other strides",
            || {
                let a = Array2::<f64>::zeros((3, 3));
                let b = Array2::<f64>::zeros((3, 3));
                let mut c = Array2::<f64>::zeros((3, 3));
                let plan = ContractionPlan::new(
                    "ij,jk->ik",
                    &[Layout::of(&a), Layout::of(&b)],
                    &Layout::of(&c),
                    DType::F64,
                )?;
                let at = a.t();
                let ins = [StridedView::of(&at), StridedView::of(&b)];
                plan.execute(1.0, &ins, 0.0, &mut StridedViewMut::of(&mut c)?)
                    .map(drop)
            },
            |e| matches!(e, Error::PlanMismatch(_)),
            &[
                "operand 0 has extents [3, 3] / strides [1, 3]",
                "made for [3, 3] / [3, 1]",
            ],
        ),
        row(
            "plan executed with an output of other strides",
            || {
                let a = Array2::<f64>::zeros((3, 3));
                let b = Array2::<f64>::zeros((3, 3));
                let mut c = Array2::<f64>::zeros((3, 3).f());
                let plan = ContractionPlan::new(
                    "ij,jk->ik",
                    &[Layout::of(&a), Layout::of(&b)],
                    &rm(&[3, 3]),
                    DType::F64,
                )?;
                let ins = [StridedView::of(&a), StridedView::of(&b)];
                plan.execute(1.0, &ins, 0.0, &mut StridedViewMut::of(&mut c)?)
                    .map(drop)
            },
            |e| matches!(e, Error::PlanMismatch(_)),
            &["output has extents [3, 3] / strides [1, 3]"],
        ),
        row(
            "plan executed with too few operands",
            || {
                let a = Array2::<f64>::zeros((2, 3));
                let mut c = Array2::<f64>::zeros((2, 4));
                let plan = ContractionPlan::new(
                    "ij,jk->ik",
                    &[Layout::of(&a), rm(&[3, 4])],
                    &Layout::of(&c),
                    DType::F64,
                )?;
                plan.execute(
                    1.0,
                    &[StridedView::of(&a)],
                    0.0,
                    &mut StridedViewMut::of(&mut c)?,
                )
                .map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::OperandCount {
                        expected: 2,
                        given: 1,
                        ..
                    }
                )
            },
            &["has 2 input operand(s) but 1 were given"],
        ),
        row(
            "explicit path with a repeated position",
            || {
                let (a, b, c) = (z(&[2, 3]), z(&[3, 4]), z(&[4, 5]));
                let o = PathOptions {
                    strategy: PathStrategy::Explicit(vec![(1, 1), (0, 1)]),
                    ..Default::default()
                };
                ttgt::einsum_with("ij,jk,kl->il", &[a.view(), b.view(), c.view()], &o).map(drop)
            },
            |e| matches!(e, Error::InvalidPath(_)),
            &["invalid contraction path: step 0 names position 1 twice in (1, 1)"],
        ),
        row(
            "path run on operands of other shapes",
            || {
                let path = ttgt::einsum_path(
                    "ij,jk,kl->il",
                    &[&[2, 3], &[3, 4], &[4, 5]],
                    &PathOptions::default(),
                )?;
                let (a, b, c) = (z(&[2, 3]), z(&[3, 4]), z(&[4, 6]));
                ttgt::einsum_along(&path, &[a.view(), b.view(), c.view()]).map(drop)
            },
            |e| matches!(e, Error::PlanMismatch(_)),
            &["made for operand shapes [[2, 3], [3, 4], [4, 5]]"],
        ),
    ]
}

fn check_rows(rows: Vec<Row>) {
    let mut failures = Vec::new();
    for r in &rows {
        let outcome = catch_unwind(AssertUnwindSafe(|| (r.run)()));
        match outcome {
            Err(_) => failures.push(format!("{}: panicked", r.name)),
            Ok(Ok(())) => failures.push(format!("{}: returned Ok, want an error", r.name)),
            Ok(Err(e)) => {
                if !(r.variant)(&e) {
                    failures.push(format!("{}: unexpected error {e:?}", r.name));
                }
                let msg = e.to_string();
                for part in r.message {
                    if !msg.contains(part) {
                        failures.push(format!("{}: message {msg:?} lacks {part:?}", r.name));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn parse_errors() {
    check_rows(parse_rows());
}

#[test]
fn binding_errors() {
    check_rows(binding_rows());
}

#[test]
fn output_layout_and_size_errors() {
    check_rows(output_rows());
}

#[test]
fn plan_errors() {
    check_rows(plan_rows());
}

#[test]
fn exact_messages() {
    let e = ttgt::contract("ij,jk->ik", &z(&[2, 3]), &z(&[4, 5])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "index 'j' has extent 3 in operand 0 (axis 1) but 4 in operand 1 (axis 0)"
    );
    let e = ttgt::einsum_unary("ii", &z(&[2, 3])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "index 'i' has extent 2 in operand 0 (axis 0) but 3 in operand 0 (axis 1)"
    );
    let e = ttgt::permute(&z(&[2, 3, 4]), &[0, 1]).unwrap_err();
    assert_eq!(e.to_string(), "[0, 1] is not a permutation of 0..3");
}

/// Errors are reported before any output element is written.
#[test]
fn failed_calls_leave_the_output_alone() {
    let (a, b) = (z(&[2, 3]), z(&[4, 5]));
    let mut c = ArrayD::<f64>::from_elem(IxDyn(&[2, 5]), 7.0);
    assert!(ttgt::contract_into("ij,jk->ik", 1.0, &a, &b, 0.0, &mut c).is_err());
    assert!(ttgt::contract_into("ij,jk->iz", 1.0, &a, &b, 0.0, &mut c).is_err());
    assert!(c.iter().all(|&x| x == 7.0));
}

/// Zero-size extents are ordinary tensors, never errors.
#[test]
fn zero_size_extents_are_not_errors() {
    let runs: Vec<(&str, Run)> = vec![
        (
            "empty M",
            Box::new(|| {
                let c = ttgt::contract("ij,jk->ik", &z(&[0, 3]), &z(&[3, 4]))?;
                assert_eq!(c.shape(), &[0, 4]);
                Ok(())
            }),
        ),
        (
            "empty K gives zeros",
            Box::new(|| {
                let c = ttgt::contract("ij,jk", &z(&[2, 0]), &z(&[0, 3]))?;
                assert_eq!(c, z(&[2, 3]));
                Ok(())
            }),
        ),
        (
            "empty K with beta = 0 over NaN",
            Box::new(|| {
                let mut c = ArrayD::<f64>::from_elem(IxDyn(&[2, 3]), f64::NAN);
                ttgt::contract_into("ij,jk->ik", 1.0, &z(&[2, 0]), &z(&[0, 3]), 0.0, &mut c)?;
                assert_eq!(c, z(&[2, 3]));
                Ok(())
            }),
        ),
        (
            "empty trace",
            Box::new(|| {
                let t = ttgt::einsum_unary("ii", &z(&[0, 0]))?;
                assert_eq!(t.shape(), &[] as &[usize]);
                assert_eq!(t[[]], 0.0);
                Ok(())
            }),
        ),
        (
            "empty diagonal",
            Box::new(|| {
                assert_eq!(ttgt::einsum_unary("ii->i", &z(&[0, 0]))?.shape(), &[0]);
                Ok(())
            }),
        ),
        (
            "empty permute",
            Box::new(|| {
                assert_eq!(
                    ttgt::permute(&z(&[2, 0, 3]), &[2, 1, 0])?.shape(),
                    &[3, 0, 2]
                );
                Ok(())
            }),
        ),
        (
            "empty outer product",
            Box::new(|| {
                assert_eq!(
                    ttgt::contract("i,j->ij", &z(&[0]), &z(&[3]))?.shape(),
                    &[0, 3]
                );
                Ok(())
            }),
        ),
        (
            "empty '...'",
            Box::new(|| {
                let c = ttgt::contract("...ij,...jk->...ik", &z(&[0, 2, 3]), &z(&[1, 3, 4]))?;
                assert_eq!(c.shape(), &[0, 2, 4]);
                Ok(())
            }),
        ),
        (
            "empty with huge other extents",
            Box::new(|| {
                let a = z(&[0, 1 << 40]);
                let b = z(&[1 << 40, 0]);
                assert_eq!(ttgt::contract("ij,jk->ik", &a, &b)?.shape(), &[0, 0]);
                let c = ttgt::contract("ij,jk->ji", &b, &a)?;
                assert_eq!(c.shape(), &[0, 1 << 40]);
                Ok(())
            }),
        ),
        (
            "empty three operands",
            Box::new(|| {
                let (a, b, c) = (z(&[2, 0]), z(&[0, 3]), z(&[3, 4]));
                let r = ttgt::einsum("ij,jk,kl->il", &[a.view(), b.view(), c.view()])?;
                assert_eq!(r, z(&[2, 4]));
                Ok(())
            }),
        ),
        (
            "empty plan",
            Box::new(|| {
                let plan = ContractionPlan::new(
                    "abc,cbd->ad",
                    &[rm(&[0, 3, 4]), rm(&[4, 3, 5])],
                    &rm(&[0, 5]),
                    DType::C32,
                )?;
                assert_eq!(plan.gemm_shape().1, 0);
                Ok(())
            }),
        ),
    ];
    let mut failures = Vec::new();
    for (name, run) in &runs {
        match catch_unwind(AssertUnwindSafe(run)) {
            Err(_) => failures.push(format!("{name}: panicked")),
            Ok(Err(e)) => failures.push(format!("{name}: error {e}")),
            Ok(Ok(())) => {}
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Views of one buffer that do not share memory are fine as input and output.
#[test]
fn disjoint_views_of_one_buffer_are_not_errors() {
    let mut buf = ndarray::Array1::<f64>::from_shape_fn(12, |i| i as f64);
    let (a, b, mut c) = buf.multi_slice_mut((s![..4], s![4..8], s![8..]));
    ttgt::contract_into("i,i->i", 1.0, &a, &b, 0.0, &mut c).expect("disjoint");
    assert_eq!(c, ndarray::arr1(&[0.0, 5.0, 12.0, 21.0]));
    let mut buf = ndarray::Array2::<f64>::from_shape_fn((4, 3), |(i, j)| (3 * i + j) as f64);
    let (a, mut c) = buf.multi_slice_mut((s![..2, ..], s![2.., ..]));
    ttgt::einsum_unary_into("ij->ij", 2.0, &a, 1.0, &mut c).expect("disjoint");
    assert_eq!(c, ndarray::arr2(&[[6.0, 9.0, 12.0], [15.0, 18.0, 21.0]]));
}

/// Operand shapes for `spec`: each term's letters get their extent from `ext` (a to d; the
/// choice bytes `pick` sometimes make one 1, a broadcast, or give an operand a random
/// shape), `...` a suffix of `ell`, any other character an extent of 2; `count` operands
/// (more or fewer than the spec's terms now and then).
fn shapes_for(spec: &str, ext: &[usize; 4], ell: &[usize], pick: &[u8]) -> Vec<Vec<usize>> {
    let mut p = pick.iter().cycle().copied();
    let mut next = move |n: u8| p.next().unwrap_or(0) % n;
    let terms: Vec<&str> = spec.split("->").next().unwrap_or("").split(',').collect();
    let count = match next(8) {
        0 => 1 + next(3) as usize,
        _ => terms.len().clamp(1, 4),
    };
    (0..count)
        .map(|i| match terms.get(i) {
            Some(t) if next(8) != 0 => {
                let mut v = Vec::new();
                let mut chars = t.chars();
                while let Some(c) = chars.next() {
                    match c {
                        '.' => {
                            chars.next();
                            chars.next();
                            let k = next(ell.len() as u8 + 1) as usize;
                            v.extend_from_slice(&ell[ell.len() - k..]);
                        }
                        'a'..='d' => v.push(if next(10) == 0 {
                            1
                        } else {
                            ext[c as usize - 'a' as usize]
                        }),
                        _ => v.push(2),
                    }
                }
                v
            }
            _ => (0..next(5)).map(|_| next(4) as usize).collect(),
        })
        .collect()
}

/// Small integers, distinct enough that a wrong pairing of elements changes the result.
fn ints(shape: &[usize]) -> ArrayD<f64> {
    let mut q = 0usize;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        q += 1;
        ((q * 7) % 5) as f64 - 2.0
    })
}

/// A spec: random characters from a pool that holds every piece of the grammar (and some
/// that are not), or 1 to 3 terms of the letters a to d with an optional `...` and an
/// optional explicit output.
fn any_spec() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "a", "b", "c", "i", "j", ".", "...", ",", "-", ">", "->", " ", "A", "Z", "0", "é",
    ]);
    let term = (prop::collection::vec(prop::sample::select(vec!['a', 'b', 'c', 'd']), 0..5))
        .prop_flat_map(|letters| {
            let n = letters.len();
            (Just(letters), 0..=n, prop::bool::weighted(0.15))
        })
        .prop_map(|(letters, at, ell)| {
            let mut t: String = letters.into_iter().collect();
            if ell {
                t.insert_str(at, "...");
            }
            t
        });
    prop_oneof![
        prop::collection::vec(piece, 0..10).prop_map(|p| p.concat()),
        (
            prop::collection::vec(term.clone(), 1..4),
            prop::option::weighted(0.7, term)
        )
            .prop_map(|(terms, out)| match out {
                Some(o) => format!("{}->{o}", terms.join(",")),
                None => terms.join(","),
            }),
    ]
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary specs on operands of arbitrary (mostly matching) shapes, zero extents and
    /// broadcasts included: every entry point returns a result or an error, never panics;
    /// `einsum` succeeds exactly when the reference loops do, with the same values.
    #[test]
    fn arbitrary_specs_error_or_agree_never_panic(
        spec in any_spec(),
        ext in prop::array::uniform4(0usize..4),
        ell in prop::collection::vec(1usize..4, 0..3),
        pick in prop::collection::vec(any::<u8>(), 1..24),
        out_shape in prop::collection::vec(0usize..4, 0..4),
    ) {
        let shapes = shapes_for(&spec, &ext, &ell, &pick);
        let ops: Vec<ArrayD<f64>> = shapes.iter().map(|s| ints(s)).collect();
        let views: Vec<_> = ops.iter().map(|a| a.view()).collect();
        let what = format!("{spec:?} on {shapes:?}");
        let calls = catch_unwind(AssertUnwindSafe(|| {
            let ours = ttgt::einsum(&spec, &views);
            let want = ttgt::reference::einsum(&spec, &views);
            let slices: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
            let _ = ttgt::einsum_path(&spec, &slices, &PathOptions::default());
            let mut out = z(&out_shape);
            if let [a, b] = ops.as_slice() {
                let _ = ttgt::contract(&spec, a, b);
                let _ = ttgt::contract_into(&spec, 2.0, a, b, 1.0, &mut out);
                let layouts = [Layout::of(a), Layout::of(b)];
                let _ = ContractionPlan::new(&spec, &layouts, &Layout::of(&out), DType::F64);
            }
            if let [a] = ops.as_slice() {
                let _ = ttgt::einsum_unary(&spec, a);
                let _ = ttgt::einsum_unary_into(&spec, 2.0, a, 1.0, &mut out);
            }
            (ours, want)
        }));
        let (ours, want) = calls.map_err(|_| TestCaseError::fail(format!("{what}: panicked")))?;
        match (ours, want) {
            (Ok(x), Ok(y)) => prop_assert_eq!(x, y, "{}", what),
            (Err(_), Err(_)) => {}
            (x, y) => prop_assert!(false, "{}: ttgt {:?}, reference {:?}", what, x.err(), y.err()),
        }
    }
}

//! Hand-computed cases with exact values, checked for the reference engine and for every fast
//! path (`einsum`, `contract`, `contract_into`, `einsum_unary`, `einsum_unary_into`,
//! `ContractionPlan`), in all four element types, with row-major, column-major and reversed
//! (negative-stride) operands. Small integers make every result exact, whatever the
//! summation order. Also the mission spec `abcd,dbef->acef` on a mid-size case.

mod common;

use common::{int_array, nan};
use ndarray::{arr0, arr1, arr2, arr3, s, ArrayD, ArrayViewD, IxDyn, ShapeBuilder, Slice};
use num_complex::{Complex32, Complex64};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{ContractionPlan, Element, Layout};

type C = Complex64;

fn c(re: f64, im: f64) -> C {
    C::new(re, im)
}

/// A real array as `Complex64` (the common storage of the table).
fn r<D: ndarray::Dimension>(a: ndarray::Array<f64, D>) -> ArrayD<C> {
    a.mapv(|x| c(x, 0.0)).into_dyn()
}

fn zeros(shape: &[usize]) -> ArrayD<C> {
    ArrayD::from_elem(IxDyn(shape), c(0.0, 0.0))
}

struct Case {
    spec: &'static str,
    inputs: Vec<ArrayD<C>>,
    want: ArrayD<C>,
}

fn case(spec: &'static str, inputs: Vec<ArrayD<C>>, want: ArrayD<C>) -> Case {
    Case { spec, inputs, want }
}

/// Cases with real values: run in all four element types.
fn real_cases() -> Vec<Case> {
    let m22 = || r(arr2(&[[1.0, 2.0], [3.0, 4.0]]));
    let n22 = || r(arr2(&[[5.0, 6.0], [7.0, 8.0]]));
    let m23 = || r(arr2(&[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]));
    let m32 = || r(arr2(&[[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]]));
    vec![
        case(
            "ij,jk->ik",
            vec![m22(), n22()],
            r(arr2(&[[19.0, 22.0], [43.0, 50.0]])),
        ),
        case(
            "ij,jk",
            vec![m23(), m32()],
            r(arr2(&[[7.0, -1.0], [16.0, -1.0]])),
        ),
        case(
            " i j , j k -> i k ",
            vec![m22(), n22()],
            r(arr2(&[[19.0, 22.0], [43.0, 50.0]])),
        ),
        case(
            "ij,jk->ki",
            vec![m22(), n22()],
            r(arr2(&[[19.0, 43.0], [22.0, 50.0]])),
        ),
        case(
            "ji,kj->ik",
            vec![m22(), n22()],
            // A^T B^T
            r(arr2(&[[23.0, 31.0], [34.0, 46.0]])),
        ),
        case(
            "bij,bjk->bik",
            vec![
                r(arr3(&[[[1.0, 2.0], [3.0, 4.0]], [[1.0, 1.0], [1.0, 1.0]]])),
                r(arr3(&[[[1.0, 0.0], [0.0, 1.0]], [[2.0, 3.0], [4.0, 5.0]]])),
            ],
            r(arr3(&[[[1.0, 2.0], [3.0, 4.0]], [[6.0, 8.0], [6.0, 8.0]]])),
        ),
        case(
            "bi,bj->b",
            vec![
                r(arr2(&[[1.0, 2.0], [3.0, 4.0]])),
                r(arr2(&[[1.0, 1.0], [2.0, 0.0]])),
            ],
            r(arr1(&[6.0, 14.0])),
        ),
        case("ii->", vec![m22()], r(arr0(5.0))),
        case("ii", vec![m22()], r(arr0(5.0))),
        case("ii->i", vec![m22()], r(arr1(&[1.0, 4.0]))),
        case("ij->", vec![m22()], r(arr0(10.0))),
        case("ij->i", vec![m22()], r(arr1(&[3.0, 7.0]))),
        case("ij->j", vec![m22()], r(arr1(&[4.0, 6.0]))),
        case(
            "ij->ji",
            vec![m23()],
            r(arr2(&[[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]])),
        ),
        case(
            "ba",
            vec![m23()],
            r(arr2(&[[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]])),
        ),
        case("ij", vec![m23()], m23()),
        case(
            "i,j->ij",
            vec![r(arr1(&[1.0, 2.0])), r(arr1(&[3.0, 4.0, 5.0]))],
            r(arr2(&[[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]])),
        ),
        case(
            "i,i->",
            vec![r(arr1(&[1.0, 2.0, 3.0])), r(arr1(&[4.0, 5.0, 6.0]))],
            r(arr0(32.0)),
        ),
        case(
            "i,i",
            vec![r(arr1(&[1.0, 2.0, 3.0])), r(arr1(&[4.0, 5.0, 6.0]))],
            r(arr0(32.0)),
        ),
        case(
            "i,i->i",
            vec![r(arr1(&[1.0, 2.0, 3.0])), r(arr1(&[4.0, 5.0, 6.0]))],
            r(arr1(&[4.0, 10.0, 18.0])),
        ),
        case(
            "ii,i->i",
            vec![m22(), r(arr1(&[10.0, 20.0]))],
            r(arr1(&[10.0, 80.0])),
        ),
        case(
            "ij,ij->",
            vec![m22(), n22()],
            r(arr0(5.0 + 12.0 + 21.0 + 32.0)),
        ),
        case(
            "iij,j->i",
            vec![
                r(arr3(&[[[1.0, 2.0], [9.0, 9.0]], [[9.0, 9.0], [3.0, 4.0]]])),
                r(arr1(&[1.0, -1.0])),
            ],
            r(arr1(&[-1.0, -1.0])),
        ),
        case(
            "...ij,...jk->...ik",
            vec![
                r(arr3(&[[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])),
                r(arr2(&[[1.0, 2.0], [3.0, 4.0]])),
            ],
            r(arr3(&[[[1.0, 2.0], [3.0, 4.0]], [[3.0, 4.0], [1.0, 2.0]]])),
        ),
        case(
            "...j,...j->...",
            vec![
                r(arr3(&[[[1.0, 2.0]], [[3.0, 4.0]]])),
                r(arr2(&[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])),
            ],
            r(arr2(&[[1.0, 2.0, 3.0], [3.0, 4.0, 7.0]])),
        ),
        case("i...->...", vec![m23()], r(arr1(&[5.0, 7.0, 9.0]))),
        case("...ii->...i", vec![m22()], r(arr1(&[1.0, 4.0]))),
        // numpy's implicit output: '...' first, then the letters seen once in ASCII order
        // (upper case before lower case).
        case(
            "...i,i",
            vec![m22(), r(arr1(&[1.0, -1.0]))],
            r(arr1(&[-1.0, -1.0])),
        ),
        case(
            "bA,a",
            vec![m23(), r(arr1(&[1.0, 10.0]))],
            r(arr3(&[
                [[1.0, 4.0], [10.0, 40.0]],
                [[2.0, 5.0], [20.0, 50.0]],
                [[3.0, 6.0], [30.0, 60.0]],
            ])),
        ),
        // Zero-size extents: empty results, or zeros when a summed extent is 0.
        case(
            "ij,jk->ik",
            vec![zeros(&[2, 0]), zeros(&[0, 3])],
            zeros(&[2, 3]),
        ),
        case("ij,jk->ik", vec![zeros(&[0, 3]), m32()], zeros(&[0, 2])),
        case("ij->", vec![zeros(&[0, 3])], r(arr0(0.0))),
        case("ij->j", vec![zeros(&[0, 3])], zeros(&[3])),
        case("ii->i", vec![zeros(&[0, 0])], zeros(&[0])),
        case("ii", vec![zeros(&[0, 0])], r(arr0(0.0))),
        case("i,j->ij", vec![zeros(&[0]), zeros(&[3])], zeros(&[0, 3])),
        case(
            "bij,bjk->bik",
            vec![zeros(&[0, 2, 3]), zeros(&[0, 3, 4])],
            zeros(&[0, 2, 4]),
        ),
        // Rank 0.
        case("->", vec![r(arr0(3.0))], r(arr0(3.0))),
        case("", vec![r(arr0(3.0))], r(arr0(3.0))),
        case(",->", vec![r(arr0(2.0)), r(arr0(-4.0))], r(arr0(-8.0))),
        case(",", vec![r(arr0(2.0)), r(arr0(-4.0))], r(arr0(-8.0))),
        case(
            ",i->i",
            vec![r(arr0(2.0)), r(arr1(&[1.0, 2.0, 3.0]))],
            r(arr1(&[2.0, 4.0, 6.0])),
        ),
        case(
            "i,->i",
            vec![r(arr1(&[1.0, 2.0, 3.0])), r(arr0(-1.0))],
            r(arr1(&[-1.0, -2.0, -3.0])),
        ),
        // Three and four operands.
        case(
            "i,i,i",
            vec![
                r(arr1(&[1.0, 2.0])),
                r(arr1(&[3.0, 4.0])),
                r(arr1(&[5.0, 6.0])),
            ],
            r(arr0(63.0)),
        ),
        case(
            "ij,jk,kl->il",
            vec![m22(), r(arr2(&[[1.0, 0.0], [1.0, 1.0]])), n22()],
            // (A·B) = [[3, 2], [7, 4]]; times N
            r(arr2(&[[29.0, 34.0], [63.0, 74.0]])),
        ),
        case(
            "ij,jk,kl->li",
            vec![m22(), r(arr2(&[[1.0, 0.0], [1.0, 1.0]])), n22()],
            r(arr2(&[[29.0, 63.0], [34.0, 74.0]])),
        ),
        case(
            "i,j,k->ijk",
            vec![r(arr1(&[1.0, 2.0])), r(arr1(&[1.0, -1.0])), r(arr1(&[3.0]))],
            r(arr3(&[[[3.0], [-3.0]], [[6.0], [-6.0]]])),
        ),
        case(
            "ij,j,i,ii->",
            vec![m22(), r(arr1(&[1.0, 1.0])), r(arr1(&[1.0, 2.0])), m22()],
            // sum_i (row sum of M)_i * v_i * M_ii = 3*1*1 + 7*2*4
            r(arr0(59.0)),
        ),
        case(
            "...ij,...jk,...kl->...il",
            vec![
                r(arr3(&[[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 2.0]]])),
                m22(),
                r(arr3(&[[[1.0, 0.0], [0.0, 1.0]]])),
            ],
            r(arr3(&[[[1.0, 2.0], [3.0, 4.0]], [[2.0, 4.0], [6.0, 8.0]]])),
        ),
    ]
}

/// Cases with complex values (no conjugation anywhere): complex types only.
fn complex_cases() -> Vec<Case> {
    let a = || {
        ArrayD::from_shape_vec(
            IxDyn(&[2, 2]),
            vec![c(1.0, 1.0), c(2.0, 0.0), c(0.0, 0.0), c(1.0, -1.0)],
        )
        .expect("shape")
    };
    let b = || {
        ArrayD::from_shape_vec(
            IxDyn(&[2, 2]),
            vec![c(1.0, 0.0), c(0.0, 1.0), c(0.0, 1.0), c(1.0, 0.0)],
        )
        .expect("shape")
    };
    let v = |x: &[C]| ArrayD::from_shape_vec(IxDyn(&[x.len()]), x.to_vec()).expect("shape");
    vec![
        case(
            "ij,jk->ik",
            vec![a(), b()],
            ArrayD::from_shape_vec(
                IxDyn(&[2, 2]),
                vec![c(1.0, 3.0), c(1.0, 1.0), c(1.0, 1.0), c(1.0, -1.0)],
            )
            .expect("shape"),
        ),
        case(
            "i,i->",
            vec![
                v(&[c(1.0, 2.0), c(3.0, -1.0)]),
                v(&[c(2.0, -1.0), c(0.0, 1.0)]),
            ],
            ArrayD::from_elem(IxDyn(&[]), c(5.0, 6.0)),
        ),
        case(
            "ii",
            vec![ArrayD::from_shape_vec(
                IxDyn(&[2, 2]),
                vec![c(0.0, 1.0), c(2.0, 0.0), c(3.0, 0.0), c(1.0, 1.0)],
            )
            .expect("shape")],
            ArrayD::from_elem(IxDyn(&[]), c(1.0, 2.0)),
        ),
        case(
            "i,j->ji",
            vec![
                v(&[c(0.0, 1.0), c(1.0, 0.0)]),
                v(&[c(0.0, 1.0), c(2.0, 0.0), c(0.0, -1.0)]),
            ],
            ArrayD::from_shape_vec(
                IxDyn(&[3, 2]),
                vec![
                    c(-1.0, 0.0),
                    c(0.0, 1.0),
                    c(0.0, 2.0),
                    c(2.0, 0.0),
                    c(1.0, 0.0),
                    c(0.0, -1.0),
                ],
            )
            .expect("shape"),
        ),
        case(
            "ij->ji",
            vec![a()],
            ArrayD::from_shape_vec(
                IxDyn(&[2, 2]),
                vec![c(1.0, 1.0), c(0.0, 0.0), c(2.0, 0.0), c(1.0, -1.0)],
            )
            .expect("shape"),
        ),
    ]
}

fn convert<T: Element>(a: &ArrayD<C>) -> ArrayD<T> {
    a.mapv(|z| T::from_parts(z.re, z.im))
}

/// A column-major copy.
fn fortran<T: Element>(a: &ArrayD<T>) -> ArrayD<T> {
    let mut f = ArrayD::from_elem(IxDyn(a.shape()).f(), T::zero());
    f.assign(a);
    f
}

/// Storage holding `a` reversed along every axis; viewing it reversed again gives `a`'s
/// values through negative strides.
fn reversed_storage<T: Element>(a: &ArrayD<T>) -> ArrayD<T> {
    a.slice_each_axis(|_| Slice::new(0, None, -1)).to_owned()
}

fn reversed_view<T: Element>(st: &ArrayD<T>) -> ArrayViewD<'_, T> {
    st.slice_each_axis(|_| Slice::new(0, None, -1))
}

/// `alpha * want + beta * c0`, element-wise.
fn axpby<T: Element>(alpha: T, want: &ArrayD<T>, beta: T, c0: &ArrayD<T>) -> ArrayD<T> {
    let mut out = want.mapv(|w| alpha * w);
    if !beta.is_exact_zero() {
        out.zip_mut_with(c0, |o, &c| *o += beta * c);
    }
    out
}

/// An `_into` entry point: `(C, alpha, beta)`.
type IntoFn<'a, T> = dyn Fn(&mut ArrayD<T>, T, T) -> ttgt::Result<()> + 'a;

/// Every fast path on `ops` (one layout variant), exact comparison with `want`.
fn check_fast_paths<T: Element>(
    label: &str,
    spec: &str,
    ops: &[ArrayViewD<'_, T>],
    want: &ArrayD<T>,
) {
    let ctx = |what: &str| format!("{what} for {spec:?} ({label}, {})", T::DTYPE);
    assert_eq!(
        &ttgt::einsum(spec, ops).expect("einsum"),
        want,
        "{}",
        ctx("einsum")
    );
    let (alpha, beta) = (T::from_parts(2.0, 0.0), T::from_parts(-1.0, 0.0));
    let c0: ArrayD<T> = int_array(want.shape(), 99, 3);
    let layouts: Vec<Layout> = ops.iter().map(Layout::of).collect();
    let views: Vec<StridedView<'_, T>> = ops.iter().map(StridedView::of).collect();
    let into = |f: &IntoFn<'_, T>| {
        // beta == 0 over NaN, then beta != 0 over c0.
        let mut out = ArrayD::from_elem(IxDyn(want.shape()), nan::<T>());
        f(&mut out, alpha, T::zero()).expect("into, beta = 0");
        assert_eq!(
            out,
            axpby(alpha, want, T::zero(), &c0),
            "{}",
            ctx("beta = 0")
        );
        let mut out = c0.clone();
        f(&mut out, alpha, beta).expect("into, beta != 0");
        assert_eq!(out, axpby(alpha, want, beta, &c0), "{}", ctx("beta != 0"));
        // Column-major output.
        let mut out = fortran(&c0);
        f(&mut out, alpha, beta).expect("into, column-major C");
        assert_eq!(
            out,
            axpby(alpha, want, beta, &c0),
            "{}",
            ctx("column-major C")
        );
    };
    let plan = |out: &mut ArrayD<T>, alpha: T, beta: T| -> ttgt::Result<()> {
        let p = ContractionPlan::new(spec, &layouts, &Layout::of(out), T::DTYPE)?;
        p.execute(alpha, &views, beta, &mut StridedViewMut::of(out)?)?;
        Ok(())
    };
    match ops {
        [a] => {
            assert_eq!(
                &ttgt::einsum_unary(spec, a).expect("einsum_unary"),
                want,
                "{}",
                ctx("einsum_unary")
            );
            into(&|out, al, be| ttgt::einsum_unary_into(spec, al, a, be, out));
            into(&plan);
        }
        [a, b] => {
            assert_eq!(
                &ttgt::contract(spec, a, b).expect("contract"),
                want,
                "{}",
                ctx("contract")
            );
            into(&|out, al, be| ttgt::contract_into(spec, al, a, b, be, out));
            into(&plan);
        }
        _ => {}
    }
}

fn check_case<T: Element>(case: &Case) {
    let spec = case.spec;
    let inputs: Vec<ArrayD<T>> = case.inputs.iter().map(convert).collect();
    let want: ArrayD<T> = convert(&case.want);
    let views: Vec<ArrayViewD<'_, T>> = inputs.iter().map(|a| a.view()).collect();
    let got = ttgt::reference::einsum(spec, &views).expect("reference");
    assert_eq!(got, want, "reference for {spec:?} ({})", T::DTYPE);
    check_fast_paths("row-major", spec, &views, &want);
    let cols: Vec<ArrayD<T>> = inputs.iter().map(fortran).collect();
    let views: Vec<ArrayViewD<'_, T>> = cols.iter().map(|a| a.view()).collect();
    check_fast_paths("column-major", spec, &views, &want);
    let revs: Vec<ArrayD<T>> = inputs.iter().map(reversed_storage).collect();
    let views: Vec<ArrayViewD<'_, T>> = revs.iter().map(reversed_view).collect();
    check_fast_paths("reversed", spec, &views, &want);
}

fn check_all<T: Element>(cases: &[Case]) {
    for c in cases {
        check_case::<T>(c);
    }
}

#[test]
fn hand_computed_f32() {
    check_all::<f32>(&real_cases());
}

#[test]
fn hand_computed_f64() {
    check_all::<f64>(&real_cases());
}

#[test]
fn hand_computed_c32() {
    check_all::<Complex32>(&real_cases());
    check_all::<Complex32>(&complex_cases());
}

#[test]
fn hand_computed_c64() {
    check_all::<Complex64>(&real_cases());
    check_all::<Complex64>(&complex_cases());
}

/// numpy's `permute` meaning: axis `i` of the result is axis `perm[i]` of the input.
#[test]
fn permute_hand_computed() {
    let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |i| {
        (100 * i[0] + 10 * i[1] + i[2]) as f64
    });
    let p = ttgt::permute(&a, &[2, 0, 1]).expect("permute");
    assert_eq!(p.shape(), &[4, 2, 3]);
    assert_eq!(p[[3, 1, 2]], 123.0);
    let mut b = ArrayD::from_elem(IxDyn(&[4, 2, 3]), 1.0);
    ttgt::permute_into(2.0, &a, &[2, 0, 1], -1.0, &mut b).expect("permute_into");
    assert_eq!(b[[3, 1, 2]], 245.0);
    assert_eq!(b[[0, 0, 0]], -1.0);
    let r0 = ttgt::permute(&arr0(7.0), &[]).expect("rank 0");
    assert_eq!(r0[[]], 7.0);
}

// ---------------------------------------------------------------------------------------
// The mission spec on a mid-size case.

const MISSION: &str = "abcd,dbef->acef";

fn mission<T: Element>() {
    let (na, nb, nc, nd, ne, nf) = (5, 6, 7, 8, 9, 5);
    let a: ArrayD<T> = int_array(&[na, nb, nc, nd], 1, 3);
    let b: ArrayD<T> = int_array(&[nd, nb, ne, nf], 2, 3);
    let want = ttgt::reference::einsum(MISSION, &[a.view(), b.view()]).expect("reference");
    assert_eq!(want.shape(), &[na, nc, ne, nf]);
    // Spot-check one element of the reference by hand.
    let mut v = T::zero();
    for bb in 0..nb {
        for dd in 0..nd {
            v += a[[4, bb, 6, dd]] * b[[dd, bb, 8, 4]];
        }
    }
    assert_eq!(want[[4, 6, 8, 4]], v);
    // Integer data: the fast paths must agree exactly, whatever the layout.
    let views = [a.view(), b.view()];
    check_fast_paths("row-major", MISSION, &views, &want);
    let (af, bf) = (fortran(&a), fortran(&b));
    check_fast_paths("column-major", MISSION, &[af.view(), bf.view()], &want);
    let (ar, br) = (reversed_storage(&a), reversed_storage(&b));
    check_fast_paths(
        "reversed",
        MISSION,
        &[reversed_view(&ar), reversed_view(&br)],
        &want,
    );
    // Operands cut out of bigger arrays with steps, output a strided view.
    let big_a: ArrayD<T> = int_array(&[2 * na, nb + 1, nc, 3 * nd], 3, 3);
    let mut big_a = big_a;
    big_a.slice_mut(s![..;2, 1.., .., ..;3]).assign(&a);
    let va = big_a.slice(s![..;2, 1.., .., ..;3]).into_dyn();
    let pb = b.view().permuted_axes(IxDyn(&[2, 0, 3, 1])).to_owned();
    let vb = pb.view().permuted_axes(IxDyn(&[1, 3, 0, 2]));
    assert_eq!(vb, b.view());
    let mut big_c = ArrayD::from_elem(IxDyn(&[na, 2 * nc, ne + 2, nf]), T::from_parts(-7.0, 0.0));
    {
        let mut cv = big_c.slice_mut(s![.., ..;-2, 1..ne + 1, ..]).into_dyn();
        ttgt::contract_into(MISSION, T::one(), &va, &vb, T::zero(), &mut cv)
            .expect("contract_into");
        assert_eq!(cv, want.view());
    }
    let mut outside = big_c.clone();
    outside
        .slice_mut(s![.., ..;-2, 1..ne + 1, ..])
        .fill(T::from_parts(-7.0, 0.0));
    assert!(outside.iter().all(|&x| x == T::from_parts(-7.0, 0.0)));
    // A plan made once runs any number of times.
    let mut out = ArrayD::from_elem(IxDyn(want.shape()), T::zero());
    let plan = ContractionPlan::new(
        MISSION,
        &[Layout::of(&va), Layout::of(&vb)],
        &Layout::of(&out),
        T::DTYPE,
    )
    .expect("plan");
    assert_eq!(plan.gemm_shape(), (1, na * nc, ne * nf, nb * nd));
    for _ in 0..2 {
        plan.execute(
            T::one(),
            &[StridedView::of(&va), StridedView::of(&vb)],
            T::one(),
            &mut StridedViewMut::of(&mut out).expect("view"),
        )
        .expect("execute");
    }
    assert_eq!(out, want.mapv(|w| w + w));
}

#[test]
fn mission_spec_f32() {
    mission::<f32>();
}

#[test]
fn mission_spec_f64() {
    mission::<f64>();
}

#[test]
fn mission_spec_c32() {
    mission::<Complex32>();
}

#[test]
fn mission_spec_c64() {
    mission::<Complex64>();
}

/// The mission spec with random (non-integer) data against the reference, within rounding.
#[test]
fn mission_spec_random_values() {
    let a: ArrayD<f64> = common::random_array(&[9, 7, 8, 6], 11);
    let b: ArrayD<f64> = common::random_array(&[6, 7, 5, 9], 12);
    let want = ttgt::reference::einsum(MISSION, &[a.view(), b.view()]).expect("reference");
    let got = ttgt::contract(MISSION, &a, &b).expect("contract");
    let tol = common::Tol::new(MISSION, &[a.view(), b.view()]);
    common::check_close("contract", &got.view(), &want, &tol).expect("close");
}

/// The mission spec with GEMM dimensions beyond the usual kernel blocks (M = 70, N = 72,
/// K = 320), integer data: exact.
fn mission_large<T: Element>() {
    let (na, nb, nc, nd, ne, nf) = (5, 8, 14, 40, 9, 8);
    let a: ArrayD<T> = int_array(&[na, nb, nc, nd], 21, 3);
    let b: ArrayD<T> = int_array(&[nd, nb, ne, nf], 22, 3);
    let want = ttgt::reference::einsum(MISSION, &[a.view(), b.view()]).expect("reference");
    assert_eq!(ttgt::contract(MISSION, &a, &b).expect("contract"), want);
    let (af, br) = (fortran(&a), reversed_storage(&b));
    let mut c = ArrayD::from_elem(IxDyn(&[nf, ne, nc, na]).f(), nan::<T>());
    let mut cv = c.view_mut().reversed_axes();
    ttgt::contract_into(
        MISSION,
        T::one(),
        &af,
        &reversed_view(&br),
        T::zero(),
        &mut cv,
    )
    .expect("contract_into");
    assert_eq!(cv, want.view());
}

#[test]
fn mission_spec_large_blocks() {
    mission_large::<f32>();
    mission_large::<f64>();
    mission_large::<Complex32>();
    mission_large::<Complex64>();
}

/// One array passed as both operands (shared input memory is fine).
#[test]
fn same_array_as_both_operands() {
    let m = arr2(&[[1.0, 2.0], [3.0, 4.0]]);
    let sq = ttgt::contract("ij,jk->ik", &m, &m).expect("square");
    assert_eq!(sq, arr2(&[[7.0, 10.0], [15.0, 22.0]]).into_dyn());
    let gram = ttgt::contract("ji,jk->ik", &m, &m).expect("gram");
    assert_eq!(gram, arr2(&[[10.0, 14.0], [14.0, 20.0]]).into_dyn());
}

/// The mission spec at a size where parallel or blocked code paths may kick in, checked
/// against an independent route: permute and reshape to matrices, then ndarray's `dot`.
fn large_vs_dot<T: Element + ndarray::LinalgScalar>() {
    let (na, nb, nc, nd, ne, nf) = (24, 16, 24, 16, 24, 24);
    let a: ArrayD<T> = int_array(&[na, nb, nc, nd], 31, 3);
    let b: ArrayD<T> = int_array(&[nd, nb, ne, nf], 32, 3);
    let got = ttgt::contract(MISSION, &a, &b).expect("contract");
    let am = a
        .view()
        .permuted_axes(IxDyn(&[0, 2, 1, 3]))
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((na * nc, nb * nd))
        .expect("A as a matrix");
    let bm = b
        .view()
        .permuted_axes(IxDyn(&[1, 0, 2, 3]))
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((nb * nd, ne * nf))
        .expect("B as a matrix");
    let want = am
        .dot(&bm)
        .into_shape_with_order(IxDyn(&[na, nc, ne, nf]))
        .expect("C");
    assert_eq!(got, want, "{}", T::DTYPE);
}

#[test]
fn mission_spec_large_vs_ndarray_dot() {
    large_vs_dot::<f32>();
    large_vs_dot::<Complex64>();
}

/// A large permutation against ndarray's own (exact copy).
#[test]
fn large_permutation_vs_ndarray() {
    let a: ArrayD<f64> = common::random_array(&[130, 70, 3, 41], 41);
    for perm in [[3, 2, 1, 0], [1, 0, 3, 2], [0, 3, 1, 2], [2, 3, 0, 1]] {
        let want = a.view().permuted_axes(IxDyn(&perm)).to_owned();
        assert_eq!(ttgt::permute(&a, &perm).expect("permute"), want, "{perm:?}");
        let mut out = ArrayD::from_elem(IxDyn(want.shape()).f(), f64::NAN);
        ttgt::permute_into(1.0, &a, &perm, 0.0, &mut out).expect("permute_into");
        assert_eq!(out, want, "{perm:?} into column-major");
    }
}

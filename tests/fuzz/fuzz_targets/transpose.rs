//! The transposition engine and the in-place movers on arbitrary problems, under the fuzz
//! build's AddressSanitizer: `TransposePlan` over random permutations of odd, prime and
//! short extents, strided sources (steps, reversed axes, permuted storage), destinations
//! placed at any element offset inside a guarded buffer, every kernel level this CPU has,
//! forced streaming, staging, regrouping, prefetch and block sizes, 1 or 2 threads, alpha
//! and beta, every element type (f16 and bf16 included); then `permute_in_place` and `transpose_batch_in_place` with every method. Results
//! match the element loops and no element outside the destination changes.
#![no_main]

mod common;

use common::{Bytes, Recipe};
use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayD, IxDyn};
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::transpose::inplace::{self, InPlaceOptions, Method};
use ttgt::transpose::{Isa, TransposeOptions, TransposePlan};
use ttgt::{Element, Layout};

/// Most elements of one tensor.
const MAX_ELEMENTS: usize = 1 << 16;

/// A rank-1 to rank-6 shape (extents 1 to 40) of at most [`MAX_ELEMENTS`] elements, and a
/// permutation of its axes.
fn shape_and_perm(b: &mut Bytes<'_>) -> Option<(Vec<usize>, Vec<usize>)> {
    let rank = 1 + b.next() % 6;
    let dims: Vec<usize> = (0..rank).map(|_| 1 + b.next() % 40).collect();
    if dims.iter().product::<usize>() > MAX_ELEMENTS {
        return None;
    }
    let mut perm: Vec<usize> = (0..rank).collect();
    for k in (1..rank).rev() {
        perm.swap(k, b.next() % (k + 1));
    }
    Some((dims, perm))
}

fn opt(x: usize) -> Option<bool> {
    [None, Some(true), Some(false)][x % 3]
}

fn run<T: Element>(b: &mut Bytes<'_>, value: impl Fn(usize) -> T, scalar: impl Fn(usize) -> T) {
    let Some((dims, perm)) = shape_and_perm(b) else {
        return;
    };
    let recipe = Recipe::read(b, dims.len());
    let store: ArrayD<T> = {
        let s = recipe.storage(&dims);
        let n = s.iter().product();
        ArrayD::from_shape_vec(IxDyn(&s), (0..n).map(&value).collect())
            .expect("shape and data agree")
    };
    let a = recipe.shape(store.view());
    let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let lb = Layout::row_major(&bd).expect("a small shape");
    let isas = Isa::available();
    let opts = TransposeOptions {
        threads: Some(1 + b.next() % 2),
        isa: Some(isas[b.next() % isas.len()]),
        block: [None, Some(8), Some(24), Some(64)][b.next() % 4],
        streaming: opt(b.next()),
        prefetch: opt(b.next()),
        regroup: opt(b.next()),
        stage: opt(b.next()),
        parallel_min_bytes: Some(0),
        ..Default::default()
    };
    let (alpha, beta) = (scalar(b.next()), scalar(b.next()));
    // B at an element offset of 0 to 15 inside a buffer with 16 guard elements after it.
    let off = b.next() % 16;
    let guard = value(999_983);
    let mut buf: Vec<T> = vec![guard; off + lb.len() + 16];
    for (k, x) in buf[off..off + lb.len()].iter_mut().enumerate() {
        *x = value(k * 5 + 1);
    }
    let before = buf.clone();
    let plan = match TransposePlan::new(&perm, &Layout::of(&a), &lb, T::DTYPE, &opts) {
        Ok(p) => p,
        Err(e) => panic!("{dims:?} {perm:?} {opts:?}: {e}"),
    };
    {
        let av = StridedView::of(&a);
        let mut bv =
            StridedViewMut::from_slice(&mut buf, lb.clone(), off).expect("B fits its buffer");
        plan.execute(alpha, &av, beta, &mut bv)
            .expect("a planned transposition runs");
    }
    let what = || {
        format!(
            "{dims:?} {perm:?} {opts:?} offset {off}: {}",
            plan.describe()
        )
    };
    let pa = a.view().permuted_axes(IxDyn(&perm));
    for (k, (x, want_a)) in buf[off..off + lb.len()].iter().zip(pa.iter()).enumerate() {
        let want = alpha * *want_a + beta * before[off + k];
        let err = (*x - want).abs_f64();
        assert!(
            err <= 1e-5 * (1.0 + want.abs_f64()),
            "{} at {k}: {x:?} != {want:?}",
            what()
        );
    }
    assert!(
        buf[..off]
            .iter()
            .chain(&buf[off + lb.len()..])
            .all(|x| *x == guard),
        "{}: a write outside B",
        what()
    );
}

/// The in-place movers: a whole-tensor permutation and a batch of chunked transpositions.
fn in_place(b: &mut Bytes<'_>) {
    let Some((dims, perm)) = shape_and_perm(b) else {
        return;
    };
    let n: usize = dims.iter().product();
    let a = ArrayD::from_shape_vec(IxDyn(&dims), (0..n as u32).collect())
        .expect("shape and data agree");
    let want: Vec<u32> = a
        .view()
        .permuted_axes(IxDyn(&perm))
        .iter()
        .copied()
        .collect();
    let mut v: Vec<u32> = a.iter().copied().collect();
    let shape = inplace::permute_in_place(&mut v, &dims, &perm).expect("a valid permutation");
    assert_eq!(shape, perm.iter().map(|&p| dims[p]).collect::<Vec<_>>());
    assert_eq!(v, want, "permute_in_place {dims:?} {perm:?}");
    // [batch][n][m][chunk] -> [batch][m][n][chunk]
    let (batch, m, nn, chunk) = (
        1 + b.next() % 3,
        1 + b.next() % 30,
        1 + b.next() % 30,
        1 + b.next() % 5,
    );
    let method = [
        Method::Auto,
        Method::Cycles,
        Method::Square,
        Method::Buffered,
    ][b.next() % 4];
    let o = InPlaceOptions {
        threads: Some(1 + b.next() % 2),
        method,
    };
    let len = batch * m * nn * chunk;
    let mut w: Vec<u32> = (0..len as u32).collect();
    match inplace::transpose_batch_in_place(&mut w, batch, m, nn, chunk, &o) {
        Ok(()) => {
            for (q, x) in w.iter().enumerate() {
                let (c, rest) = (q % chunk, q / chunk);
                let (j, rest) = (rest % nn, rest / nn);
                let (i, t) = (rest % m, rest / m);
                // Output [t][i][j][c] is input [t][j][i][c].
                let src = ((t * nn + j) * m + i) * chunk + c;
                assert_eq!(
                    *x as usize, src,
                    "batch {batch} m {m} n {nn} chunk {chunk} {method:?}"
                );
            }
        }
        // A method that does not apply (the square method on a non-square problem) is an
        // error that leaves the data as it was.
        Err(_) => assert!(
            w.iter().enumerate().all(|(q, x)| *x as usize == q),
            "a failed {method:?} changed the data"
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let scalars = [0.0, 1.0, -0.5, 2.0];
    match b.next() % 5 {
        0 => run::<f64>(&mut b, |i| ((i * 7) % 19) as f64 - 9.0, |x| scalars[x % 4]),
        1 => run::<f32>(
            &mut b,
            |i| ((i * 7) % 19) as f32 - 9.0,
            |x| scalars[x % 4] as f32,
        ),
        2 => run::<num_complex::Complex64>(
            &mut b,
            |i| num_complex::Complex64::new(((i * 7) % 19) as f64 - 9.0, (i % 5) as f64),
            |x| num_complex::Complex64::new(scalars[x % 4], 0.0),
        ),
        3 => run::<num_complex::Complex32>(
            &mut b,
            |i| num_complex::Complex32::new(((i * 7) % 19) as f32 - 9.0, (i % 5) as f32),
            |x| num_complex::Complex32::new(scalars[x % 4] as f32, 0.0),
        ),
        // 2-byte units, and the in-place movers (a second byte picks one)
        _ => match b.next() % 3 {
            0 => in_place(&mut b),
            1 => run::<ttgt::tensor::f16>(
                &mut b,
                |i| Element::from_f64(((i * 7) % 19) as f64 - 9.0),
                |x| Element::from_f64(scalars[x % 4]),
            ),
            _ => run::<ttgt::tensor::bf16>(
                &mut b,
                |i| Element::from_f64(((i * 7) % 19) as f64 - 9.0),
                |x| Element::from_f64(scalars[x % 4]),
            ),
        },
    }
});

//! In-place transposition (GKK) against out-of-place references: the leader set against a
//! brute-force cycle decomposition; chunked transpositions of random `m × n` (primes,
//! squares, 1, `q = mn - 1` even, odd and with many divisors), chunk sizes, batches, thread
//! counts and methods against a plain loop; tensor permutations of all four element types
//! against `ttgt::permute`; every storage-format conversion pair against the storage
//! mappings, and round trips; error values for bad input.

use ndarray::{ArrayD, IxDyn};
use num_complex::{Complex32, Complex64};
use proptest::prelude::*;
use ttgt::transpose::inplace::{
    convert_format, cycle_schedule, format_offset, permute_array_in_place, permute_in_place,
    transpose_batch_in_place, transpose_chunks_in_place, CycleLeaders, InPlaceOptions, InPlacePlan,
    Method, StorageFormat,
};
use ttgt::{Element, Error};

/// Brute-force check of the leader set of `m × n`: every cycle of `k -> k*n mod q` on
/// `1..q` is hit exactly once, with its true length.
fn check_leaders(m: usize, n: usize) {
    let c = CycleLeaders::new(m, n).unwrap();
    let mn = (m * n) as u64;
    if mn <= 2 {
        assert_eq!(c.iter().count(), 0);
        return;
    }
    let q = mn - 1;
    assert_eq!(c.q(), q);
    let mut cycle_of = vec![u32::MAX; q as usize];
    let mut lens = Vec::new();
    for s in 1..q {
        if cycle_of[s as usize] != u32::MAX {
            continue;
        }
        let id = lens.len() as u32;
        let (mut k, mut len) = (s, 0u64);
        loop {
            cycle_of[k as usize] = id;
            len += 1;
            k = k * n as u64 % q;
            if k == s {
                break;
            }
        }
        lens.push(len);
    }
    let mut hit = vec![false; lens.len()];
    for (leader, len) in c.iter() {
        assert!(
            leader > 0 && leader < q,
            "{m}x{n}: leader {leader} out of 1..{q}"
        );
        let id = cycle_of[leader as usize] as usize;
        assert!(!hit[id], "{m}x{n}: cycle of {leader} hit twice");
        hit[id] = true;
        assert_eq!(len, lens[id], "{m}x{n}: length of the cycle of {leader}");
    }
    assert!(hit.iter().all(|&h| h), "{m}x{n}: a cycle has no leader");
    let moved: u64 = lens.iter().filter(|&&l| l > 1).sum();
    assert_eq!(c.moved_chunks(), moved);
    assert_eq!(
        c.nontrivial_cycles(),
        lens.iter().filter(|&&l| l > 1).count() as u64
    );
}

#[test]
fn leaders_hit_every_cycle_once_small() {
    for m in 1..=48 {
        for n in 1..=48 {
            check_leaders(m, n);
        }
    }
}

#[test]
fn leaders_hit_every_cycle_once_special() {
    for (m, n) in [
        (68, 227),  // the paper's example, q = 3^2 5 7^3
        (19, 19),   // q = 360 = 2^3 3^2 5, 24 divisors
        (25, 41),   // q = 2^10
        (17, 241),  // q = 2^12
        (59, 509),  // q = 30030 = 2 3 5 7 11 13
        (7, 103),   // q = 720 = 2^4 3^2 5
        (3, 7),     // q = 20
        (2, 3),     // q = 5 prime
        (1, 997),   // identity
        (997, 2),   // q = 1993 prime
        (101, 103), // both prime
        (5, 3),     // the paper's first example
        (243, 9),   // q = 2186 = 2 3^7
        (127, 129), // q = 16382 = 2 8191
        (1, 1),
        (3, 1),
    ] {
        check_leaders(m, n);
        check_leaders(n, m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn leaders_hit_every_cycle_once_random(m in 1usize..400, n in 1usize..400) {
        check_leaders(m, n);
    }
}

/// Distinct values for the chunked tests.
fn data(len: usize) -> Vec<u32> {
    (0..len as u32)
        .map(|x| x.wrapping_mul(2654435761))
        .collect()
}

/// Out-of-place reference of the chunked transposition.
fn reference(v: &[u32], batch: usize, m: usize, n: usize, chunk: usize) -> Vec<u32> {
    let mut out = vec![0; v.len()];
    let block = m * n * chunk;
    for b in 0..batch {
        for i in 0..m {
            for j in 0..n {
                for e in 0..chunk {
                    out[b * block + (i * n + j) * chunk + e] =
                        v[b * block + (j * m + i) * chunk + e];
                }
            }
        }
    }
    out
}

fn method_of(k: u8, m: usize, n: usize) -> Method {
    match k {
        0 => Method::Auto,
        1 => Method::Cycles,
        2 if m == n => Method::Square,
        2 => Method::Cycles,
        _ => Method::Buffered,
    }
}

fn extent() -> impl Strategy<Value = usize> {
    prop_oneof![
        1usize..40,
        prop::sample::select(vec![
            1usize, 2, 3, 5, 7, 13, 31, 37, 41, 61, 64, 97, 100, 127, 128
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn chunked_matches_out_of_place(
        m in extent(),
        n in extent(),
        chunk in prop::sample::select(vec![1usize, 2, 3, 4, 7, 16, 64]),
        batch in 1usize..4,
        threads in 1usize..=3,
        method in 0u8..4,
        square in any::<bool>(),
    ) {
        let n = if square { m } else { n };
        let len = batch * m * n * chunk;
        prop_assume!(len <= 200_000);
        let orig = data(len);
        let mut v = orig.clone();
        let opts = InPlaceOptions { threads: Some(threads), method: method_of(method, m, n) };
        transpose_batch_in_place(&mut v, batch, m, n, chunk, &opts).unwrap();
        prop_assert_eq!(v, reference(&orig, batch, m, n, chunk));
    }

    #[test]
    fn chunked_large_elementwise(m in 100usize..700, n in 100usize..700, threads in 1usize..=3) {
        let orig = data(m * n);
        let mut v = orig.clone();
        transpose_chunks_in_place(&mut v, m, n, 1, Some(threads)).unwrap();
        prop_assert_eq!(v, reference(&orig, 1, m, n, 1));
    }
}

/// Problems whose q has many divisors, is a power of two, or is prime, with each method and
/// thread count, and chunks longer than one piece (64 KiB), which move in pieces.
#[test]
fn chunked_special_cases() {
    for (m, n, chunk) in [
        (59usize, 509usize, 1usize),
        (25, 41, 3),
        (17, 241, 2),
        (7, 103, 5),
        (19, 19, 4),
        (997, 2, 1),
        (2, 997, 9),
        (3, 2, 40_000),
        (5, 7, 17_000),
        (64, 64, 1),
        (1, 50, 3),
        (50, 1, 3),
    ] {
        let orig = data(m * n * chunk);
        let want = reference(&orig, 1, m, n, chunk);
        for threads in 1..=3 {
            for k in 0..4 {
                let mut v = orig.clone();
                let opts = InPlaceOptions {
                    threads: Some(threads),
                    method: method_of(k, m, n),
                };
                transpose_batch_in_place(&mut v, 1, m, n, chunk, &opts).unwrap();
                assert_eq!(
                    v, want,
                    "{m}x{n} chunk {chunk} threads {threads} method {k}"
                );
            }
        }
    }
}

/// Greedy assignment with cycle splitting keeps the threads' loads close.
#[test]
fn schedule_balances_threads() {
    for (m, n) in [
        (2, 997),
        (997, 2),
        (68, 227),
        (59, 509),
        (300, 499),
        (25, 41),
        (7, 3),
    ] {
        for threads in 2..=4 {
            let s = cycle_schedule(m, n, threads).unwrap();
            assert!(
                s.imbalance <= 1.35,
                "{m}x{n} on {threads}: imbalance {}",
                s.imbalance
            );
            assert!(
                s.sequences <= 8 * threads,
                "{m}x{n}: {} sequences",
                s.sequences
            );
        }
    }
}

fn values<T: Element>(len: usize) -> Vec<T> {
    (0..len)
        .map(|k| T::from_parts(k as f64 * 0.5 - 3.0, (k % 17) as f64))
        .collect()
}

fn check_permute<T: Element>(
    shape: &[usize],
    perm: &[usize],
    threads: usize,
    method: Method,
) -> Result<(), TestCaseError> {
    let len: usize = shape.iter().product();
    let a = ArrayD::from_shape_vec(IxDyn(shape), values::<T>(len)).unwrap();
    let want = ttgt::permute(&a, perm).unwrap();
    // the free function
    let mut v = a.as_slice().unwrap().to_vec();
    let out_shape = permute_in_place(&mut v, shape, perm).unwrap();
    prop_assert_eq!(&out_shape[..], want.shape());
    prop_assert_eq!(&v[..], want.as_slice().unwrap());
    // a plan with explicit threads and method
    let opts = InPlaceOptions {
        threads: Some(threads),
        method,
    };
    let plan = InPlacePlan::new(shape, perm, std::mem::size_of::<T>(), &opts).unwrap();
    let mut w = a.as_slice().unwrap().to_vec();
    plan.execute(&mut w).unwrap();
    prop_assert_eq!(&w[..], want.as_slice().unwrap());
    // the cost model may take an extra cheap pass (in cache) to avoid an element-wise one
    prop_assert!(plan.passes() <= 2 * shape.len());
    // the ndarray convenience
    let mut b = a.clone();
    permute_array_in_place(&mut b, perm).unwrap();
    prop_assert_eq!(&b, &want);
    Ok(())
}

fn shape_and_perm(
    max_rank: usize,
    max_extent: usize,
) -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (1..=max_rank).prop_flat_map(move |r| {
        (
            prop::collection::vec(1..=max_extent, r),
            Just((0..r).collect::<Vec<usize>>()).prop_shuffle(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn permute_matches_out_of_place_all_dtypes(
        (shape, perm) in shape_and_perm(6, 6),
        threads in 1usize..=3,
        method in 0u8..3,
    ) {
        let method = [Method::Auto, Method::Cycles, Method::Buffered][method as usize];
        check_permute::<f32>(&shape, &perm, threads, method)?;
        check_permute::<f64>(&shape, &perm, threads, method)?;
        check_permute::<Complex32>(&shape, &perm, threads, method)?;
        check_permute::<Complex64>(&shape, &perm, threads, method)?;
    }

    #[test]
    fn permute_high_rank_greedy((shape, perm) in shape_and_perm(10, 3), threads in 1usize..=3) {
        check_permute::<f64>(&shape, &perm, threads, Method::Auto)?;
    }
}

#[test]
fn permute_larger_tensors() {
    for (shape, perm) in [
        (vec![40, 50, 60], vec![2, 1, 0]),
        (vec![16, 17, 18, 19], vec![3, 1, 0, 2]),
        (vec![300, 301], vec![1, 0]),
        (vec![64, 3, 128], vec![1, 0, 2]),
    ] {
        for threads in 1..=3 {
            check_permute::<f64>(&shape, &perm, threads, Method::Auto).unwrap();
            check_permute::<f32>(&shape, &perm, threads, Method::Cycles).unwrap();
        }
    }
}

#[test]
fn plan_queries() {
    let o = InPlaceOptions {
        threads: Some(2),
        ..Default::default()
    };
    let p = InPlacePlan::new(&[30, 40, 50], &[2, 1, 0], 8, &o).unwrap();
    assert_eq!(p.out_shape(), &[50, 40, 30]);
    assert!((2..=3).contains(&p.passes()));
    assert_eq!(p.bytes_moved(), 2 * p.passes() as u64 * 60_000 * 8);
    assert!(p.modelled_bytes() >= p.bytes_moved());
    assert!(p.workspace_bytes() <= 2 * 9 * 64 * 1024);
    assert!(p.describe().contains(&format!("{} passes", p.passes())));
    let id = InPlacePlan::new(&[3, 1, 4], &[1, 0, 2], 8, &o).unwrap();
    assert_eq!(id.passes(), 0);
    assert_eq!(id.workspace_bytes(), 0);
}

fn fill_format(f: StorageFormat, m: usize, n: usize, mb: usize, nb: usize) -> Vec<u32> {
    let mut v = vec![u32::MAX; m * n];
    for i in 0..m {
        for j in 0..n {
            v[format_offset(f, m, n, mb, nb, i, j).unwrap()] = (i * 1000 + j) as u32;
        }
    }
    v
}

#[test]
fn format_offsets_are_bijections() {
    for (m, n, mb, nb) in [(6, 9, 2, 3), (7, 10, 3, 4), (5, 5, 8, 2), (1, 9, 1, 4)] {
        for f in StorageFormat::ALL {
            let v = fill_format(f, m, n, mb, nb);
            assert!(v.iter().all(|&x| x != u32::MAX), "{} not onto", f.name());
        }
    }
}

#[test]
fn format_conversions_every_pair() {
    for (m, n, mb, nb) in [
        (6, 9, 2, 3),   // blocks divide the matrix
        (7, 10, 3, 4),  // partial blocks on both sides
        (13, 11, 4, 4), // square blocks, rectangular matrix
        (5, 8, 8, 3),   // block taller than the matrix
        (9, 9, 3, 3),   // square everything
        (1, 7, 2, 2),
        (64, 48, 16, 12),
    ] {
        for from in StorageFormat::ALL {
            for to in StorageFormat::ALL {
                let mut v = fill_format(from, m, n, mb, nb);
                convert_format(&mut v, m, n, mb, nb, from, to).unwrap();
                assert_eq!(
                    v,
                    fill_format(to, m, n, mb, nb),
                    "{m}x{n} blocks {mb}x{nb}: {} -> {}",
                    from.name(),
                    to.name()
                );
                convert_format(&mut v, m, n, mb, nb, to, from).unwrap();
                assert_eq!(
                    v,
                    fill_format(from, m, n, mb, nb),
                    "round trip {} -> {}",
                    from.name(),
                    to.name()
                );
            }
        }
    }
}

#[test]
fn errors_not_panics() {
    let mut v = vec![0.0f64; 12];
    assert!(matches!(
        transpose_chunks_in_place(&mut v, 5, 3, 1, None),
        Err(Error::Layout(_))
    ));
    assert!(matches!(
        transpose_chunks_in_place(&mut v, usize::MAX, 3, 1, None),
        Err(Error::SizeOverflow { .. })
    ));
    let sq = InPlaceOptions {
        threads: None,
        method: Method::Square,
    };
    assert!(matches!(
        transpose_batch_in_place(&mut v, 1, 3, 4, 1, &sq),
        Err(Error::Unsupported(_))
    ));
    assert!(matches!(
        permute_in_place(&mut v, &[3, 4], &[0, 0]),
        Err(Error::InvalidPermutation { .. })
    ));
    assert!(matches!(
        permute_in_place(&mut v, &[3, 5], &[1, 0]),
        Err(Error::Layout(_))
    ));
    assert!(matches!(
        permute_in_place(&mut v, &[usize::MAX, 3], &[1, 0]),
        Err(Error::SizeOverflow { .. })
    ));
    assert!(convert_format(&mut v, 3, 4, 0, 2, StorageFormat::Cm, StorageFormat::Rm).is_err());
    assert!(convert_format(&mut v, 3, 5, 1, 2, StorageFormat::Cm, StorageFormat::Rm).is_err());
    let mut f = ndarray::Array2::<f64>::zeros((3, 4))
        .reversed_axes()
        .into_dyn();
    assert!(matches!(
        permute_array_in_place(&mut f, &[1, 0]),
        Err(Error::Layout(_))
    ));
    assert!(CycleLeaders::new(usize::MAX, 3).is_err());
}

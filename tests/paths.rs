//! Contraction paths for three or more operands (`einsum_path`, `einsum_with`): random
//! networks against the reference engine under every strategy and all four element types,
//! the optimal search against a brute-force enumeration of every pairwise order, memory
//! limits, and the errors of bad explicit paths.

mod common;

use std::collections::BTreeSet;

use common::{
    check_close, check_into, random_array, scalar, view_recipe, SplitMix, Tol, ViewRecipe,
};
use ndarray::{ArrayD, ArrayViewD, Axis};
use num_complex::{Complex32, Complex64};
use proptest::prelude::*;
use ttgt::plan::{PathOptions, PathStrategy};
use ttgt::ContractionPath;
use ttgt::{Element, Error};

/// A random network: operand subscripts, output subscripts and extents.
#[derive(Clone, Debug)]
struct Network {
    spec: String,
    shapes: Vec<Vec<usize>>,
}

/// `n` operands over up to `labels` indices of extents `1..=max_extent` (sometimes 0 when
/// `zeros`); indices shared by two, three or more operands, some only in one, some
/// repeated within an operand (diagonals), some kept in the output.
fn network(seed: u64, n: usize, labels: usize, max_extent: usize, zeros: bool) -> Network {
    let mut r = SplitMix::new(seed);
    let mut pick = |m: u64| (r.next_u64() % m) as usize;
    let mut ops: Vec<String> = vec![String::new(); n];
    let mut out = String::new();
    let mut extents = std::collections::BTreeMap::new();
    let letters: Vec<char> = ('a'..='z').collect();
    for &ch in letters.iter().take(labels) {
        // Most indices join two operands (a bond), some three or more, some one.
        let holders: Vec<usize> = match pick(10) {
            0 => vec![pick(n as u64)],
            1 | 2 => (0..n).filter(|_| pick(2) == 0).collect(),
            _ => {
                let a = pick(n as u64);
                let b = (a + 1 + pick(n as u64 - 1)) % n;
                vec![a, b]
            }
        };
        let holders = if holders.is_empty() {
            vec![pick(n as u64)]
        } else {
            holders
        };
        if holders.iter().any(|&k| ops[k].len() >= 5) {
            continue;
        }
        for &k in &holders {
            ops[k].push(ch);
            if pick(25) == 0 && ops[k].len() < 5 {
                ops[k].push(ch); // a diagonal
            }
        }
        if pick(3) == 0 {
            out.push(ch);
        }
        let e = if zeros && pick(40) == 0 {
            0
        } else {
            1 + pick(max_extent as u64)
        };
        extents.insert(ch, e);
    }
    // Shuffle each operand's subscripts.
    for op in ops.iter_mut() {
        let mut v: Vec<char> = op.chars().collect();
        for i in (1..v.len()).rev() {
            v.swap(i, pick(i as u64 + 1));
        }
        *op = v.into_iter().collect();
    }
    let shapes = ops
        .iter()
        .map(|op| op.chars().map(|c| extents[&c]).collect())
        .collect();
    Network {
        spec: format!("{}->{}", ops.join(","), out),
        shapes,
    }
}

/// A valid path in numpy's notation, random.
fn random_path(seed: u64, n: usize) -> Vec<(usize, usize)> {
    let mut r = SplitMix::new(seed ^ 0x5eed);
    (0..n - 1)
        .map(|s| {
            let len = n - s;
            let i = (r.next_u64() % len as u64) as usize;
            let j = (i + 1 + (r.next_u64() % (len as u64 - 1)) as usize) % len;
            (i, j)
        })
        .collect()
}

/// A valid path in numpy's notation with steps of any arity: single-operand steps
/// (at most two), pairs and longer groups, random.
fn random_numpy_path(seed: u64, n: usize) -> Vec<Vec<usize>> {
    let mut r = SplitMix::new(seed ^ 0x9a7);
    let mut len = n;
    let mut singles = 0;
    let mut path = Vec::new();
    while len > 1 || path.is_empty() {
        let k = match r.next_u64() % 4 {
            0 if singles < 2 => {
                singles += 1;
                1
            }
            3 if len >= 3 => 3,
            _ if len >= 2 => 2,
            _ => 1,
        };
        // k different positions below len.
        let mut all: Vec<usize> = (0..len).collect();
        for i in (1..len).rev() {
            all.swap(i, (r.next_u64() % (i as u64 + 1)) as usize);
        }
        path.push(all[..k].to_vec());
        len -= k - 1;
    }
    path
}

fn strategy(k: u64, seed: u64, n: usize) -> PathStrategy {
    match k % 6 {
        5 => PathStrategy::Numpy(random_numpy_path(seed, n)),
        0 => PathStrategy::Auto,
        1 => PathStrategy::Optimal,
        2 => PathStrategy::Greedy,
        3 => PathStrategy::LeftToRight,
        _ => PathStrategy::Explicit(random_path(seed, n)),
    }
}

fn shape_refs(net: &Network) -> Vec<&[usize]> {
    net.shapes.iter().map(Vec::as_slice).collect()
}

fn run_network<T: Element>(net: &Network, strategy: PathStrategy, seed: u64, flip: bool) {
    let owned: Vec<ArrayD<T>> = net
        .shapes
        .iter()
        .enumerate()
        .map(|(k, s)| random_array::<T>(s, seed ^ k as u64))
        .collect();
    // Some operands read through reversed axes (negative strides).
    let views: Vec<ArrayViewD<'_, T>> = owned
        .iter()
        .map(|a| {
            let mut v = a.view();
            if flip && v.ndim() > 0 {
                v.invert_axis(Axis(0));
            }
            v
        })
        .collect();
    let flipped: Vec<ArrayD<T>> = views.iter().map(|v| v.to_owned()).collect();
    let plain: Vec<ArrayViewD<'_, T>> = flipped.iter().map(|a| a.view()).collect();
    let want = ttgt::reference::einsum(&net.spec, &plain).expect("reference");
    let tol = Tol::new(&net.spec, &plain);
    let o = PathOptions {
        strategy: strategy.clone(),
        ..Default::default()
    };
    let got = ttgt::einsum_with(&net.spec, &views, &o)
        .unwrap_or_else(|e| panic!("{} with {strategy:?}: {e}", net.spec));
    if let Err(e) = check_close(&net.spec, &got.view(), &want, &tol) {
        panic!("{strategy:?}: {e}");
    }
}

/// An expression with the operands that `mask` marks held constant (not all of them),
/// evaluated on two sets of the other operands against the reference.
fn run_expression<T: Element>(net: &Network, mask: u32, seed: u64) {
    let n = net.shapes.len();
    let constant: Vec<bool> = (0..n).map(|k| mask >> k & 1 == 1).collect();
    let constant = if constant.iter().all(|&c| c) {
        (0..n).map(|k| k != 0 && constant[k]).collect()
    } else {
        constant
    };
    let fixed: Vec<ArrayD<T>> = net
        .shapes
        .iter()
        .enumerate()
        .map(|(k, s)| random_array::<T>(s, seed ^ (k as u64 + 100)))
        .collect();
    let consts: Vec<(usize, ArrayViewD<'_, T>)> = (0..n)
        .filter(|&k| constant[k])
        .map(|k| (k, fixed[k].view()))
        .collect();
    let shapes = shape_refs(net);
    let e = ttgt::einsum_expression(&net.spec, &shapes, &consts, &PathOptions::default())
        .unwrap_or_else(|err| panic!("{}: {err}", net.spec));
    assert_eq!(e.operands(), constant.iter().filter(|&&c| !c).count());
    for round in 0..2u64 {
        let fresh: Vec<ArrayD<T>> = net
            .shapes
            .iter()
            .enumerate()
            .map(|(k, s)| random_array::<T>(s, seed ^ (k as u64 + 200 * (round + 1))))
            .collect();
        let all: Vec<ArrayViewD<'_, T>> = (0..n)
            .map(|k| {
                if constant[k] {
                    fixed[k].view()
                } else {
                    fresh[k].view()
                }
            })
            .collect();
        let given: Vec<ArrayViewD<'_, T>> = (0..n)
            .filter(|&k| !constant[k])
            .map(|k| fresh[k].view())
            .collect();
        let want = ttgt::reference::einsum(&net.spec, &all).expect("reference");
        let tol = Tol::new(&net.spec, &all);
        let got = e
            .run(&given)
            .unwrap_or_else(|err| panic!("{}: {err}", net.spec));
        if let Err(err) = check_close(&net.spec, &got.view(), &want, &tol) {
            panic!("expression, constants {constant:?}: {err}");
        }
        // alpha and beta: C = 2 * network - C, from C = the reference
        let mut c = want.clone();
        e.run_into(T::from_f64(2.0), &given, T::from_f64(-1.0), &mut c)
            .expect("run_into");
        if let Err(err) = check_close(&net.spec, &c.view(), &want, &tol) {
            panic!("expression into C, constants {constant:?}: {err}");
        }
    }
    // the wrong operands are an error, never a panic
    if let Some(first) = (0..n).find(|&k| !constant[k]) {
        let wrong = ArrayD::<T>::zeros(vec![net.shapes[first].iter().product::<usize>() + 1]);
        let given: Vec<ArrayViewD<'_, T>> = vec![wrong.view()];
        assert!(matches!(e.run(&given), Err(Error::PlanMismatch(_))));
    }
}

/// `C = alpha * network + beta * C` into a strided view of a bigger array, along a path
/// (`einsum_along_into`, run twice so the second run meets pooled buffers) and along the
/// default one (`einsum_into`).
fn run_network_into<T: Element>(
    net: &Network,
    strategy: PathStrategy,
    seed: u64,
    rc: &ViewRecipe,
    ab: ((f64, f64), (f64, f64)),
) {
    run_limited_into::<T>(net, strategy, None, seed, rc, ab);
}

/// [`run_network_into`] with a memory limit on the path's intermediates (elements): the path
/// keeps every step's result within it (sliced where no order does) or says it cannot.
fn run_limited_into<T: Element>(
    net: &Network,
    strategy: PathStrategy,
    memory_limit: Option<usize>,
    seed: u64,
    rc: &ViewRecipe,
    (alpha, beta): ((f64, f64), (f64, f64)),
) {
    let owned: Vec<ArrayD<T>> = net
        .shapes
        .iter()
        .enumerate()
        .map(|(k, s)| random_array::<T>(s, seed ^ (k as u64 + 11)))
        .collect();
    let views: Vec<ArrayViewD<'_, T>> = owned.iter().map(|a| a.view()).collect();
    let want = ttgt::reference::einsum(&net.spec, &views).expect("reference");
    let tol = Tol::new(&net.spec, &views);
    let (alpha, beta) = (
        T::from_parts(alpha.0, alpha.1),
        T::from_parts(beta.0, beta.1),
    );
    let o = PathOptions {
        strategy: strategy.clone(),
        memory_limit,
        ..Default::default()
    };
    let path: ContractionPath = match ttgt::einsum_path(&net.spec, &shape_refs(net), &o) {
        Ok(p) => p,
        Err(Error::InvalidPath(m)) if memory_limit.is_some() && m.contains("memory limit") => {
            return
        }
        Err(e) => panic!("{}: {e}", net.spec),
    };
    if let Some(limit) = memory_limit {
        let steps = path.steps();
        for s in &steps[..steps.len().saturating_sub(1)] {
            assert!(
                s.elements <= limit as f64,
                "{}: {} > {limit}\n{path}",
                net.spec,
                s.elements
            );
        }
    }
    for round in 0..2 {
        let what = format!(
            "{} with {strategy:?}, einsum_along_into round {round}",
            net.spec
        );
        check_into(&what, rc, seed ^ round, alpha, beta, &want, &tol, |c| {
            let times = ttgt::einsum_along_into(&path, alpha, &views, beta, c)?;
            assert_eq!(times.len(), path.steps().len());
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
    if memory_limit.is_some() {
        return;
    }
    let what = format!("{}: einsum_into", net.spec);
    check_into(&what, rc, seed ^ 7, alpha, beta, &want, &tol, |c| {
        ttgt::einsum_into(&net.spec, alpha, &views, beta, c)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Networks written into strided outputs with alpha and beta give
    /// `alpha * reference + beta * C` and leave the rest of the storage alone.
    #[test]
    fn networks_into_strided_outputs(
        seed in any::<u64>(),
        n in 3usize..=5,
        labels in 2usize..=8,
        k in any::<u64>(),
        rc in view_recipe(),
        alpha in scalar(),
        beta in scalar(),
    ) {
        let net = network(seed, n, labels, 4, true);
        let s = strategy(k / 4, seed, n);
        match k % 4 {
            0 => run_network_into::<f32>(&net, s, seed, &rc, (alpha, beta)),
            1 => run_network_into::<f64>(&net, s, seed, &rc, (alpha, beta)),
            2 => run_network_into::<Complex32>(&net, s, seed, &rc, (alpha, beta)),
            _ => run_network_into::<Complex64>(&net, s, seed, &rc, (alpha, beta)),
        }
    }

    /// Under a memory limit that no order may meet, the default path slices: its results
    /// equal the reference's (alpha, beta, strided outputs) and its steps fit the limit.
    #[test]
    fn sliced_networks_match_the_reference(
        seed in any::<u64>(),
        n in 3usize..=5,
        labels in 3usize..=8,
        limit in 1usize..40,
        k in 0u64..4,
        rc in view_recipe(),
        alpha in scalar(),
        beta in scalar(),
    ) {
        let net = network(seed, n, labels, 6, false);
        let ab = (alpha, beta);
        let (s, l) = (PathStrategy::Auto, Some(limit));
        match k {
            0 => run_limited_into::<f32>(&net, s, l, seed, &rc, ab),
            1 => run_limited_into::<f64>(&net, s, l, seed, &rc, ab),
            2 => run_limited_into::<Complex32>(&net, s, l, seed, &rc, ab),
            _ => run_limited_into::<Complex64>(&net, s, l, seed, &rc, ab),
        }
    }

    /// Networks beyond the subset search's reach (9 to 12 operands) take randomised greedy
    /// restarts: the values are the reference's, and the path is never predicted slower
    /// than the greedy one it started from.
    #[test]
    fn large_networks_match_the_reference(
        seed in any::<u64>(),
        n in 9usize..=12,
        labels in 4usize..=10,
        k in 0u64..2,
    ) {
        let net = network(seed, n, labels, 3, false);
        let p = ttgt::einsum_path(&net.spec, &shape_refs(&net), &PathOptions::default()).expect("path");
        let r = p.reference().expect("reference");
        prop_assert!(p.predicted_seconds().expect("predicted") <= r.predicted_seconds * (1.0 + 1e-9));
        prop_assert_eq!(p.steps().len(), n - 1);
        match k {
            0 => run_network::<f64>(&net, PathStrategy::Auto, seed, false),
            _ => run_network::<Complex32>(&net, PathStrategy::Auto, seed, true),
        }
    }

    /// Random networks of 3 to 6 operands give the reference's values under every strategy.
    #[test]
    fn networks_match_the_reference(
        seed in any::<u64>(),
        n in 3usize..=6,
        labels in 2usize..=9,
        k in any::<u64>(),
        flip in any::<bool>(),
    ) {
        let net = network(seed, n, labels, 4, true);
        let s = strategy(k / 4, seed, n);
        match k % 4 {
            0 => run_network::<f32>(&net, s, seed, flip),
            1 => run_network::<f64>(&net, s, seed, flip),
            2 => run_network::<Complex32>(&net, s, seed, flip),
            _ => run_network::<Complex64>(&net, s, seed, flip),
        }
    }

    /// Expressions with any set of constant operands give the reference's values, evaluated
    /// twice with new operands, into a fresh result and with alpha and beta.
    #[test]
    fn expressions_with_constants_match_the_reference(
        seed in any::<u64>(),
        n in 2usize..=5,
        labels in 2usize..=8,
        mask in any::<u32>(),
        k in 0u64..4,
    ) {
        let net = network(seed, n, labels, 4, true);
        match k {
            0 => run_expression::<f32>(&net, mask, seed),
            1 => run_expression::<f64>(&net, mask, seed),
            2 => run_expression::<Complex32>(&net, mask, seed),
            _ => run_expression::<Complex64>(&net, mask, seed),
        }
    }

    /// The optimal search finds the fewest FLOPs of all pairwise orders; greedy and
    /// left-to-right never beat it; every strategy's FLOPs are the sum of its steps'.
    #[test]
    fn optimal_is_the_minimum_of_all_orders(seed in any::<u64>(), n in 3usize..=5, labels in 2usize..=8) {
        let net = network(seed, n, labels, 9, false);
        let shapes = shape_refs(&net);
        let path = |s: PathStrategy| {
            ttgt::einsum_path(&net.spec, &shapes, &PathOptions { strategy: s, ..Default::default() })
                .expect("path")
        };
        let best = path(PathStrategy::Optimal);
        let brute = brute_force(&net);
        prop_assert!((best.flops() - brute).abs() <= 1e-9 * brute, "{} {:?}: optimal {} vs all orders {}\n{}", net.spec, net.shapes, best.flops(), brute, best);
        for s in [PathStrategy::Greedy, PathStrategy::LeftToRight, PathStrategy::Explicit(random_path(seed, n)), PathStrategy::Numpy(random_numpy_path(seed, n))] {
            let p = path(s.clone());
            prop_assert!(p.flops() >= best.flops() * (1.0 - 1e-12), "{s:?} beat optimal on {}", net.spec);
            let sum: f64 = p.steps().iter().map(|x| x.flops).sum();
            prop_assert_eq!(sum, p.flops());
            prop_assert_eq!(p.steps().len(), n - 1);
        }
        // Auto starts from the optimal path at this size and predicts no more time than it.
        let auto = path(PathStrategy::Auto);
        let reference = auto.reference().expect("a reference");
        prop_assert_eq!(reference.flops, best.flops());
        prop_assert!(auto.predicted_seconds().expect("predicted") <= reference.predicted_seconds * (1.0 + 1e-9));
        prop_assert_eq!(auto.steps().len(), n - 1);
    }

    /// With a memory limit, every intermediate fits, or no order fits and the error says so.
    #[test]
    fn memory_limits_hold(seed in any::<u64>(), n in 3usize..=6, limit in 1usize..200, kind in 0usize..3) {
        let net = network(seed, n, 7, 6, false);
        let shapes = shape_refs(&net);
        let strategy = [PathStrategy::Greedy, PathStrategy::Optimal, PathStrategy::Auto][kind].clone();
        let o = PathOptions { strategy, memory_limit: Some(limit), ..Default::default() };
        match ttgt::einsum_path(&net.spec, &shapes, &o) {
            Ok(p) => {
                let steps = p.steps();
                for s in &steps[..steps.len() - 1] {
                    prop_assert!(s.elements <= limit as f64, "{}: {} > {limit}", net.spec, s.elements);
                }
                prop_assert!(p.largest_intermediate() <= limit as f64);
            }
            Err(Error::InvalidPath(msg)) => prop_assert!(msg.contains("memory limit"), "{msg}"),
            Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
        }
    }
}

/// Fewest FLOPs over every sequence of pairwise contractions (labels as sets; the same
/// counting as the library: indices only one operand holds are summed out of it first, one
/// add per element; a pair costs the product of the extents of both operands' indices,
/// doubled when one is summed).
fn brute_force(net: &Network) -> f64 {
    let (ins, out) = net.spec.split_once("->").expect("explicit output");
    let ext: std::collections::BTreeMap<char, f64> = ins
        .split(',')
        .zip(&net.shapes)
        .flat_map(|(t, s)| t.chars().zip(s.iter().map(|&e| e as f64)))
        .collect();
    let out: BTreeSet<char> = out.chars().collect();
    let full: Vec<BTreeSet<char>> = ins.split(',').map(|t| t.chars().collect()).collect();
    let mut reductions = 0.0;
    let ops: Vec<BTreeSet<char>> = (0..full.len())
        .map(|k| {
            let needed: BTreeSet<char> = full[k]
                .iter()
                .copied()
                .filter(|c| {
                    out.contains(c) || (0..full.len()).any(|j| j != k && full[j].contains(c))
                })
                .collect();
            if needed.len() < full[k].len() {
                reductions += full[k].iter().map(|c| ext[c]).product::<f64>();
            }
            needed
        })
        .collect();
    fn go(
        ops: &[BTreeSet<char>],
        out: &BTreeSet<char>,
        ext: &std::collections::BTreeMap<char, f64>,
    ) -> f64 {
        if ops.len() == 1 {
            return 0.0;
        }
        let mut best = f64::INFINITY;
        for i in 0..ops.len() {
            for j in i + 1..ops.len() {
                let rest: Vec<&BTreeSet<char>> = (0..ops.len())
                    .filter(|&k| k != i && k != j)
                    .map(|k| &ops[k])
                    .collect();
                let all: BTreeSet<char> = ops[i].union(&ops[j]).copied().collect();
                let keep: BTreeSet<char> = all
                    .iter()
                    .copied()
                    .filter(|c| out.contains(c) || rest.iter().any(|r| r.contains(c)))
                    .collect();
                let size: f64 = all.iter().map(|c| ext[c]).product();
                let flops = size * if keep.len() < all.len() { 2.0 } else { 1.0 };
                let mut next: Vec<BTreeSet<char>> = rest.into_iter().cloned().collect();
                next.push(keep);
                best = best.min(flops + go(&next, out, ext));
            }
        }
        best
    }
    reductions + go(&ops, &out, &ext)
}

#[test]
fn a_long_chain_prices_randomised_restarts() {
    // ten matrices: beyond the subset search, so the search prices greedy restarts
    let dims = [240usize, 200, 280, 160, 320, 120, 360, 180, 220, 260, 140];
    let letters: Vec<char> = ('a'..='k').collect();
    let terms: Vec<String> = (0..10)
        .map(|k| format!("{}{}", letters[k], letters[k + 1]))
        .collect();
    let spec = format!("{}->ak", terms.join(","));
    let mats: Vec<ndarray::Array2<f64>> = (0..10)
        .map(|k| {
            random_array::<f64>(&[dims[k], dims[k + 1]], k as u64)
                .into_dimensionality()
                .unwrap()
        })
        .collect();
    let shapes: Vec<&[usize]> = mats.iter().map(|m| m.shape()).collect();
    let path = ttgt::einsum_path(&spec, &shapes, &PathOptions::default()).unwrap();
    let r = path.reference().unwrap();
    assert!(path.predicted_seconds().unwrap() <= r.predicted_seconds * (1.0 + 1e-9));
    assert!(r.steps_planned > 9, "only the reference was priced: {path}");
    let views: Vec<ArrayViewD<'_, f64>> = mats.iter().map(|m| m.view().into_dyn()).collect();
    let got = ttgt::einsum(&spec, &views).unwrap();
    let want = mats[1..].iter().fold(mats[0].clone(), |acc, m| acc.dot(m));
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (g, w) in got.iter().zip(want.iter()) {
        assert!((g - w).abs() <= 1e-12 * scale.max(1.0), "{g} vs {w}");
    }
}

#[test]
fn a_chain_too_large_for_the_limit_is_sliced() {
    // every order holds an 8x8 or 30x30 intermediate; a limit of 40 elements needs a slice
    let shapes: [&[usize]; 4] = [&[8, 30], &[30, 30], &[30, 30], &[30, 8]];
    let o = PathOptions {
        memory_limit: Some(40),
        ..Default::default()
    };
    let spec = "ij,jk,kl,lm->im";
    let path = ttgt::einsum_path(spec, &shapes, &o).unwrap();
    let s = path.slicing().expect("sliced");
    assert!(s.count() >= 8, "{path}");
    assert!(path.largest_intermediate() <= 40.0);
    assert!(path.to_string().contains("sliced over"));
    let ops: Vec<ArrayD<f64>> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| random_array::<f64>(s, k as u64))
        .collect();
    let views: Vec<ArrayViewD<'_, f64>> = ops.iter().map(|a| a.view()).collect();
    let (got, times) = ttgt::einsum_along(&path, &views).unwrap();
    assert_eq!(times.len(), path.steps().len());
    let want = ttgt::reference::einsum(spec, &views).unwrap();
    let tol = Tol::new(spec, &views);
    check_close(spec, &got.view(), &want, &tol).unwrap();
    // FLOPs and predicted time count every slice; without the limit the path is not sliced
    let one: f64 = path.steps().iter().map(|x| x.flops).sum();
    assert_eq!(path.flops(), one * s.count() as f64);
    let free = ttgt::einsum_path(spec, &shapes, &PathOptions::default()).unwrap();
    assert!(free.slicing().is_none());
    assert!(path.predicted_seconds() > free.predicted_seconds());
}

#[test]
fn chain_of_matrices_is_ordered_by_cost() {
    // The textbook chain: (A(BC))D beats left to right by far.
    let shapes: [&[usize]; 4] = [&[10, 30], &[30, 5], &[5, 60], &[60, 2]];
    let optimal = PathOptions {
        strategy: PathStrategy::Optimal,
        ..Default::default()
    };
    let best = ttgt::einsum_path("ab,bc,cd,de->ae", &shapes, &optimal).unwrap();
    let auto = ttgt::einsum_path("ab,bc,cd,de->ae", &shapes, &PathOptions::default()).unwrap();
    assert_eq!(auto.reference().unwrap().pairs, best.pairs());
    assert_eq!(auto.reference().unwrap().flops, best.flops());
    let left = PathOptions {
        strategy: PathStrategy::LeftToRight,
        ..Default::default()
    };
    let naive = ttgt::einsum_path("ab,bc,cd,de->ae", &shapes, &left).unwrap();
    assert_eq!(best.strategy(), "optimal");
    // cd,de first (5x60x2), then bc with it (30x5x2), then ab (10x30x2).
    assert_eq!(
        best.steps()
            .iter()
            .map(|s| s.spec.as_str())
            .collect::<Vec<_>>(),
        ["cd,de->ce", "bc,ce->be", "ab,be->ae"]
    );
    assert_eq!(best.flops(), 2.0 * (600.0 + 300.0 + 600.0));
    assert_eq!(naive.flops(), 2.0 * (1500.0 + 3000.0 + 1200.0));
    assert_eq!(best.pairs(), vec![(2, 3), (1, 2), (0, 1)]);
    assert!(best.to_string().contains("cd,de->ce"));
}

#[test]
fn outer_products_are_avoided_until_needed() {
    // numpy's documented example: a 10^8-point loop nest becomes five small steps.
    let s = "ea,fb,abcd,gc,hd->efgh";
    let shapes: [&[usize]; 5] = [
        &[10, 10],
        &[10, 10],
        &[10, 10, 10, 10],
        &[10, 10],
        &[10, 10],
    ];
    for strategy in [PathStrategy::Optimal, PathStrategy::Greedy] {
        let p = ttgt::einsum_path(
            s,
            &shapes,
            &PathOptions {
                strategy,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(p.flops(), 4.0 * 2.0 * 1e5, "{p}");
        assert_eq!(p.largest_intermediate(), 1e4);
        assert_eq!(p.naive_flops(), 5.0 * 1e8);
        assert!(p.steps().iter().all(|st| st.scaling == 5));
    }
}

#[test]
fn broadcast_networks_drop_stretched_axes() {
    let a = random_array::<f64>(&[1, 3, 4], 1);
    let b = random_array::<f64>(&[5, 4, 2], 2);
    let c = random_array::<f64>(&[2], 3);
    let d = random_array::<f64>(&[5, 1, 3], 4);
    let spec = "...ij,...jk,k,...i->...";
    let ops = [a.view(), b.view(), c.view(), d.view()];
    let want = ttgt::reference::einsum(spec, &ops).unwrap();
    for strategy in [
        PathStrategy::Auto,
        PathStrategy::Greedy,
        PathStrategy::LeftToRight,
    ] {
        let got = ttgt::einsum_with(
            spec,
            &ops,
            &PathOptions {
                strategy,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(got.shape(), want.shape());
        for (g, w) in got.iter().zip(want.iter()) {
            assert!((g - w).abs() < 1e-12, "{g} vs {w}");
        }
    }
}

#[test]
fn bad_paths_are_errors() {
    let shapes: [&[usize]; 3] = [&[2, 3], &[3, 4], &[4, 5]];
    let with = |p: Vec<(usize, usize)>| {
        ttgt::einsum_path(
            "ij,jk,kl->il",
            &shapes,
            &PathOptions {
                strategy: PathStrategy::Explicit(p),
                ..Default::default()
            },
        )
    };
    for (p, needle) in [
        (vec![(0, 1)], "need 2 pairwise step(s), the path has 1"),
        (vec![(0, 1), (0, 1), (0, 1)], "the path has 3"),
        (vec![(1, 1), (0, 1)], "names position 1 twice in (1, 1)"),
        (vec![(0, 3), (0, 1)], "names positions (0, 3)"),
        (vec![(0, 1), (0, 2)], "step 1 names positions (0, 2)"),
    ] {
        match with(p.clone()) {
            Err(Error::InvalidPath(msg)) => assert!(msg.contains(needle), "{p:?}: {msg}"),
            other => panic!("{p:?}: {other:?}"),
        }
    }
    // numpy's steps of any arity: the same checks, in numpy's tuple notation.
    let numpy = |p: Vec<Vec<usize>>| {
        ttgt::einsum_path(
            "ij,jk,kl->il",
            &shapes,
            &PathOptions {
                strategy: PathStrategy::Numpy(p),
                ..Default::default()
            },
        )
    };
    for (p, needle) in [
        (vec![vec![0, 1]], "need 2 pairwise step(s), the path has 1"),
        (
            vec![vec![0], vec![0, 1, 0]],
            "names position 0 twice in (0, 1, 0)",
        ),
        (vec![vec![3], vec![0, 1, 2]], "step 0 names positions (3,)"),
        (vec![vec![], vec![0, 1, 2]], "step 0 names no position"),
    ] {
        match numpy(p.clone()) {
            Err(Error::InvalidPath(msg)) => assert!(msg.contains(needle), "{p:?}: {msg}"),
            other => panic!("{p:?}: {other:?}"),
        }
    }
    // A single-operand step moves its operand to the end; a group runs from the left.
    assert_eq!(
        numpy(vec![vec![0], vec![0, 1], vec![0, 1]])
            .unwrap()
            .pairs(),
        with(vec![(1, 2), (0, 1)]).unwrap().pairs()
    );
    assert_eq!(
        numpy(vec![vec![0], vec![1, 2, 0]]).unwrap().pairs(),
        with(vec![(0, 2), (0, 1)]).unwrap().pairs()
    );
    assert_eq!(
        numpy(vec![vec![2, 0, 1]]).unwrap().pairs(),
        with(vec![(0, 2), (0, 1)]).unwrap().pairs()
    );
    // One operand: numpy's `(0,)`, or no step at all.
    for p in [vec![vec![0]], vec![]] {
        let one = ttgt::einsum_path(
            "ii->i",
            &[&[3, 3]],
            &PathOptions {
                strategy: PathStrategy::Numpy(p),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(one.steps().is_empty());
    }
    // Positions in either order are accepted.
    assert_eq!(
        with(vec![(2, 1), (1, 0)]).unwrap().pairs(),
        vec![(1, 2), (0, 1)]
    );
    // The optimal search has a size bound, greedy has none.
    let spec = (0..17)
        .map(|k| format!("a{}", char::from(b'b' + k as u8)))
        .collect::<Vec<_>>()
        .join(",");
    let shapes17: Vec<Vec<usize>> = vec![vec![2, 2]; 17];
    let refs: Vec<&[usize]> = shapes17.iter().map(Vec::as_slice).collect();
    let optimal = PathOptions {
        strategy: PathStrategy::Optimal,
        ..Default::default()
    };
    assert!(matches!(
        ttgt::einsum_path(&spec, &refs, &optimal),
        Err(Error::Unsupported(m)) if m.contains("at most 16")
    ));
    let auto = ttgt::einsum_path(&spec, &refs, &PathOptions::default()).unwrap();
    assert!(auto.strategy().starts_with("predicted time"));
    assert_eq!(auto.steps().len(), 16);
    // beyond the optimal search's reach the reference is the greedy path
    let greedy = PathOptions {
        strategy: PathStrategy::Greedy,
        ..Default::default()
    };
    let greedy = ttgt::einsum_path(&spec, &refs, &greedy).unwrap();
    assert_eq!(auto.reference().unwrap().pairs, greedy.pairs());
    // A memory limit nothing meets.
    let tight = PathOptions {
        strategy: PathStrategy::Optimal,
        memory_limit: Some(1),
        ..Default::default()
    };
    assert!(matches!(
        ttgt::einsum_path("ij,jk,kl->il", &shapes, &tight),
        Err(Error::InvalidPath(m)) if m.contains("memory limit of 1 elements")
    ));
    // Operand count and extents are checked before any search.
    let a = ArrayD::<f64>::zeros(vec![2, 3]);
    assert!(matches!(
        ttgt::einsum_with(
            "ij,jk,kl->il",
            &[a.view(), a.view()],
            &PathOptions::default()
        ),
        Err(Error::OperandCount { .. })
    ));
    assert!(matches!(
        ttgt::einsum_with(
            "ij,jk,kl->il",
            &[a.view(), a.view(), a.view()],
            &PathOptions::default()
        ),
        Err(Error::ExtentMismatch { .. })
    ));
}

#[test]
fn hyperedges_stay_until_their_last_operand() {
    // b is shared by all three operands and summed: it must survive the first step.
    let a = random_array::<f64>(&[3, 4], 7);
    let b = random_array::<f64>(&[4, 5], 8);
    let c = random_array::<f64>(&[4, 5, 2], 9);
    let spec = "ab,bc,bcd->ad";
    let ops = [a.view(), b.view(), c.view()];
    let want = ttgt::reference::einsum(spec, &ops).unwrap();
    for p in [
        vec![(0, 1), (0, 1)],
        vec![(0, 2), (0, 1)],
        vec![(1, 2), (0, 1)],
    ] {
        let o = PathOptions {
            strategy: PathStrategy::Explicit(p.clone()),
            ..Default::default()
        };
        let path = ttgt::einsum_path(spec, &[&[3, 4], &[4, 5], &[4, 5, 2]], &o).unwrap();
        assert!(
            path.steps()[0]
                .spec
                .split("->")
                .nth(1)
                .unwrap()
                .contains('b'),
            "{p:?}: {path}"
        );
        let got = ttgt::einsum_with(spec, &ops, &o).unwrap();
        for (g, w) in got.iter().zip(want.iter()) {
            assert!((g - w).abs() < 1e-12, "{p:?}: {g} vs {w}");
        }
    }
}

#[test]
fn network_outputs_of_the_wrong_shape_or_overlapping_an_operand_are_errors() {
    let spec = "ab,bc,cd->ad";
    let shapes: [&[usize]; 3] = [&[4, 5], &[5, 6], &[6, 3]];
    let ops: Vec<ArrayD<f64>> = shapes.iter().map(|s| random_array::<f64>(s, 3)).collect();
    let views: Vec<ArrayViewD<'_, f64>> = ops.iter().map(|a| a.view()).collect();
    let path = ttgt::einsum_path(spec, &shapes, &PathOptions::default()).unwrap();
    let mut wrong = ArrayD::<f64>::zeros(vec![4, 4]);
    let e = ttgt::einsum_along_into(&path, 1.0, &views, 0.0, &mut wrong).unwrap_err();
    assert!(
        e.to_string().contains('3') && e.to_string().contains('4'),
        "{e}"
    );
    let e = ttgt::einsum_into(spec, 1.0, &views, 0.0, &mut wrong).unwrap_err();
    assert!(!e.to_string().is_empty());
    // Operands of other shapes than the path's.
    let mut out = ArrayD::<f64>::zeros(vec![4, 3]);
    let e = ttgt::einsum_along_into(&path, 1.0, &views[..2], 0.0, &mut out).unwrap_err();
    assert!(matches!(e, Error::PlanMismatch(_)), "{e}");
    // An output that shares memory with an operand (built through raw parts, which the
    // borrow checker cannot see): every operand is checked, whichever step reads it. The
    // store holds every operand's elements, so the views stay in bounds.
    let mut store = ArrayD::<f64>::from_elem(vec![4, 15], 1.0);
    let base = store.as_ptr();
    let mut sub = store.slice_mut(ndarray::s![.., ..3]);
    for k in 0..3 {
        let mut ops3: Vec<ArrayViewD<'_, f64>> = views.iter().map(|v| v.view()).collect();
        // SAFETY: `store` has 60 elements, more than any operand's 30; only the overlap
        // check looks at the view before the error.
        ops3[k] = unsafe { ArrayViewD::from_shape_ptr(shapes[k], base) };
        let e = ttgt::einsum_into(spec, 1.0, &ops3, 0.0, &mut sub).unwrap_err();
        assert!(matches!(e, Error::Overlap { .. }), "operand {k}: {e}");
    }
}

#[test]
fn repeated_runs_reuse_intermediates_without_leaks() {
    // Intermediates live in pooled workspace buffers: a second run on other data (and a run
    // after the pool held NaNs of a third shape) must not see the first run's values.
    let spec = "ab,bc,cd,de->ae";
    let shapes: [&[usize]; 4] = [&[6, 9], &[9, 7], &[7, 8], &[8, 5]];
    let path = ttgt::einsum_path(spec, &shapes, &PathOptions::default()).unwrap();
    for round in 0..3u64 {
        let ops: Vec<ArrayD<f64>> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| random_array::<f64>(s, 100 * round + k as u64))
            .collect();
        let views: Vec<ArrayViewD<'_, f64>> = ops.iter().map(|a| a.view()).collect();
        let want = ttgt::reference::einsum(spec, &views).unwrap();
        let (got, times) = ttgt::einsum_along(&path, &views).unwrap();
        assert_eq!(times.len(), 3);
        for (g, w) in got.iter().zip(want.iter()) {
            assert!((g - w).abs() < 1e-12, "round {round}: {g} vs {w}");
        }
        // Fill the pool with NaN buffers of the intermediates' sizes.
        let nan = ArrayD::<f64>::from_elem(vec![6, 7], f64::NAN);
        let id = ArrayD::<f64>::from_elem(vec![7, 7], 0.0);
        let _ = ttgt::einsum("ab,bc,cd->ad", &[nan.view(), id.view(), id.view()]);
    }
}

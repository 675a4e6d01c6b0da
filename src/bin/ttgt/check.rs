//! `--check`: comparison of a result with the plain-loop reference engine, computed in double
//! precision (`f64`, or `Complex64` for complex types).
//!
//! The error of an element is `|got - want| / scale` with `scale = |alpha| * Σ |product| +
//! |beta| * |C_in|`, the sum running over the terms the element adds up: the rounding error
//! of any summation order is bounded by a multiple of that scale, so the bound holds for
//! cancelling sums too.

use ndarray::{ArrayD, ArrayViewD, Dimension, IxDyn};
use num_complex::Complex64;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ttgt::einsum::{parse, BoundSpec};
use ttgt::plan::ContractionPath;
use ttgt::reference;
use ttgt::tensor::{StridedView, StridedViewMut};
use ttgt::{DType, Element};

use crate::error::CliResult;
use crate::npy::zeros;
use crate::scalar::Scalar;

/// The whole reference is computed when the iteration space has at most this many points;
/// otherwise elements are sampled.
const FULL_CHECK_POINTS: usize = 20_000_000;
/// Number of output elements compared when sampling.
const SAMPLES: usize = 2000;
/// Products the plain-loop reference may spend on the elements it samples beside a reference
/// computed along a path (a check of the path's own steps).
const SAMPLED_PRODUCTS: usize = 10_000_000;

/// What to check: `got == alpha * einsum(operands) + beta * c0`.
pub struct CheckJob<'a, T> {
    /// The spec bound to the operands' shapes.
    pub bound: &'a BoundSpec,
    /// The operands as given (before `...` broadcasting).
    pub operands: Vec<ArrayViewD<'a, T>>,
    /// Scale of the contraction.
    pub alpha: Scalar,
    /// Scale of the initial C.
    pub beta: Scalar,
    /// The initial C (`None`: zeros).
    pub c0: Option<&'a ArrayD<T>>,
    /// The result to check.
    pub got: &'a ArrayD<T>,
    /// Seed of the sampled element positions.
    pub seed: u64,
    /// The path of a 3+ operand result: when the whole iteration space is too large to
    /// compute, the reference follows it (every output element compared, at about the cost
    /// of the contraction in plain loops), and a few elements are also computed over the
    /// whole iteration space.
    pub path: Option<&'a ContractionPath>,
}

/// The largest error and where it occurred.
#[derive(Clone, Debug)]
pub struct Worst {
    /// Output index.
    pub index: Vec<usize>,
    /// The result's value (re, im).
    pub got: (f64, f64),
    /// The reference value (re, im).
    pub want: (f64, f64),
}

/// Outcome of a check.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// Elements compared.
    pub elements: usize,
    /// Total elements of the output (more than `elements` when sampled).
    pub total: usize,
    /// Largest relative error.
    pub max_rel_err: f64,
    /// Tolerance for the element type.
    pub tolerance: f64,
    /// The element with the largest error.
    pub worst: Option<Worst>,
}

impl CheckReport {
    /// Whether every compared element is within the tolerance.
    pub fn passed(&self) -> bool {
        self.max_rel_err <= self.tolerance
    }

    /// `check: ok (...)` or `check: FAILED (...)`.
    pub fn line(&self) -> String {
        let sampled = if self.elements < self.total {
            format!(", sampled from {}", self.total)
        } else {
            String::new()
        };
        let head = format!(
            "{} elements, max rel err {:.3e}{sampled}",
            self.elements, self.max_rel_err
        );
        if self.passed() {
            return format!("check: ok ({head})");
        }
        let worst = self.worst.as_ref().map_or(String::new(), |w| {
            format!(
                "; worst at {:?}: got {}, want {}",
                w.index,
                show(w.got),
                show(w.want)
            )
        });
        format!(
            "check: FAILED ({head} > tolerance {:.0e}{worst})",
            self.tolerance
        )
    }
}

fn show((re, im): (f64, f64)) -> String {
    if im == 0.0 {
        format!("{re:e}")
    } else {
        format!("{re:e}{im:+e}j")
    }
}

/// Relative tolerance of `--check` for an element type.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 4e-3,
        DType::BF16 => 3e-2,
        DType::F32 | DType::C32 => 1e-3,
        DType::F64 | DType::C64 => 1e-10,
    }
}

/// Compares `job.got` with the reference engine.
pub fn check<T: Element>(job: &CheckJob<'_, T>) -> CliResult<CheckReport> {
    if T::DTYPE.is_complex() {
        check_in::<T, Complex64>(job)
    } else {
        check_in::<T, f64>(job)
    }
}

/// The per-element comparison, with everything converted to the wide type `W`.
struct Comparer<W> {
    alpha: W,
    beta: W,
    alpha_abs: f64,
    beta_abs: f64,
    report: CheckReport,
}

impl<W: Element> Comparer<W> {
    /// Records one element: `sum` is the reference contraction at `index`, `abs_sum` the same
    /// over the absolute values, `c0` the initial C there.
    fn add(&mut self, index: &[usize], got: (f64, f64), sum: W, abs_sum: W, c0: Option<W>) {
        let c0 = c0.filter(|_| !self.beta.is_exact_zero());
        let mut want = self.alpha * sum;
        let mut scale = self.alpha_abs * abs_sum.re();
        if let Some(c) = c0 {
            want += self.beta * c;
            scale += self.beta_abs * c.abs_f64();
        }
        let want = (want.re(), want.im());
        let d = distance(got, want);
        let err = if d == 0.0 {
            0.0
        } else {
            let e = d / scale.max(f64::MIN_POSITIVE);
            if e.is_nan() {
                f64::INFINITY
            } else {
                e
            }
        };
        self.report.elements += 1;
        if err > self.report.max_rel_err || self.report.worst.is_none() {
            self.report.max_rel_err = self.report.max_rel_err.max(err);
            self.report.worst = Some(Worst {
                index: index.to_vec(),
                got,
                want,
            });
        }
    }
}

/// `|a - b|`, with equal infinities and NaN against NaN counting as equal.
fn distance(a: (f64, f64), b: (f64, f64)) -> f64 {
    let part = |x: f64, y: f64| {
        if x == y || (x.is_nan() && y.is_nan()) {
            0.0
        } else {
            let d = (x - y).abs();
            if d.is_nan() {
                f64::INFINITY
            } else {
                d
            }
        }
    };
    part(a.0, b.0).hypot(part(a.1, b.1))
}

fn widen<T: Element, W: Element>(a: &ArrayViewD<'_, T>, f: impl Fn(T) -> W) -> ArrayD<W> {
    a.map(|&x| f(x))
}

/// Views of the operands as the spec reads them (`...` axes stretched).
fn spec_views<'a, W: Element>(
    bound: &BoundSpec,
    arrays: &'a [ArrayD<W>],
) -> CliResult<Vec<StridedView<'a, W>>> {
    arrays
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let dims: Vec<usize> = bound.inputs()[k].iter().map(|&l| bound.extent(l)).collect();
            Ok(StridedView::of(a).broadcast(&dims)?)
        })
        .collect()
}

fn check_in<T: Element, W: Element>(job: &CheckJob<'_, T>) -> CliResult<CheckReport> {
    let to_w = |x: T| W::from_parts(x.re(), x.im());
    let values: Vec<ArrayD<W>> = job.operands.iter().map(|a| widen(a, to_w)).collect();
    let abs: Vec<ArrayD<W>> = job
        .operands
        .iter()
        .map(|a| widen(a, |x: T| W::from_f64(x.abs_f64())))
        .collect();
    let (arrays, abs_arrays) = (&values, &abs);
    let (values, abs) = (
        spec_views(job.bound, arrays)?,
        spec_views(job.bound, abs_arrays)?,
    );
    let mut cmp = Comparer {
        alpha: job.alpha.to::<W>(),
        beta: job.beta.to::<W>(),
        alpha_abs: job.alpha.re.hypot(job.alpha.im),
        beta_abs: job.beta.re.hypot(job.beta.im),
        report: CheckReport {
            elements: 0,
            total: job.got.len(),
            max_rel_err: 0.0,
            tolerance: tolerance(T::DTYPE),
            worst: None,
        },
    };
    let parts = |x: T| (x.re(), x.im());
    let c0_at = |idx: &[usize]| job.c0.map(|c| to_w(c[idx]));
    let large = job.bound.iteration_points() > FULL_CHECK_POINTS;
    let along = job
        .path
        .filter(|p| large && p.slicing().is_none())
        .filter(|p| p.stretched().iter().all(|s| s.iter().all(|&x| !x)));
    if let Some(path) = along {
        let sums = path_reference(path, arrays.clone())?;
        let abs_sums = path_reference(path, abs_arrays.clone())?;
        for (idx, &g) in job.got.indexed_iter() {
            let i = idx.slice();
            cmp.add(i, parts(g), sums[i], abs_sums[i], c0_at(i));
        }
        let summed = job.bound.iteration_points() / job.got.len().max(1);
        let n = (SAMPLED_PRODUCTS / summed.max(1)).clamp(1, SAMPLES);
        for idx in sample_indices(job.got.shape(), job.seed)
            .into_iter()
            .take(n)
        {
            let (s, a) = (
                reference::element(job.bound, &values, &idx),
                reference::element(job.bound, &abs, &idx),
            );
            cmp.add(&idx, parts(job.got[&idx[..]]), s, a, c0_at(&idx));
        }
        // those elements were compared already along the path
        cmp.report.elements = job.got.len();
    } else if !large {
        let sums = full_reference(job.bound, &values)?;
        let abs_sums = full_reference(job.bound, &abs)?;
        for (idx, &g) in job.got.indexed_iter() {
            let i = idx.slice();
            cmp.add(i, parts(g), sums[i], abs_sums[i], c0_at(i));
        }
    } else {
        for idx in sample_indices(job.got.shape(), job.seed) {
            let (s, a) = (
                reference::element(job.bound, &values, &idx),
                reference::element(job.bound, &abs, &idx),
            );
            cmp.add(&idx, parts(job.got[&idx[..]]), s, a, c0_at(&idx));
        }
    }
    Ok(cmp.report)
}

/// The plain-loop reference of a 3+ operand einsum computed pairwise along `path` (its
/// intermediates in the wide type), over the whole output.
fn path_reference<W: Element>(
    path: &ContractionPath,
    mut list: Vec<ArrayD<W>>,
) -> CliResult<ArrayD<W>> {
    for step in path.steps() {
        // as the path runs: the pair's second operand leaves the list first
        let (i, j) = step.pair;
        let y = list.remove(j);
        let x = list.remove(i);
        let bound = parse(&step.spec)?.bind(&[x.shape(), y.shape()])?;
        let mut out = zeros::<W>(&bound.output_shape(), "a reference intermediate")?;
        let views = [StridedView::of(&x), StridedView::of(&y)];
        reference::einsum_into(
            &bound,
            W::one(),
            &views,
            W::zero(),
            &mut StridedViewMut::of(&mut out)?,
        );
        list.push(out);
    }
    match list.pop() {
        Some(r) if list.is_empty() => Ok(r),
        _ => Err(crate::error::CliError::new(
            "the path did not end in one result",
        )),
    }
}

/// The reference contraction over the whole output.
fn full_reference<W: Element>(
    bound: &BoundSpec,
    ops: &[StridedView<'_, W>],
) -> CliResult<ArrayD<W>> {
    let mut out = zeros::<W>(&bound.output_shape(), "the reference result")?;
    let mut view = StridedViewMut::of(&mut out)?;
    reference::einsum_into(bound, W::one(), ops, W::zero(), &mut view);
    Ok(out)
}

/// Every index of `shape` when it has at most [`SAMPLES`] elements, else [`SAMPLES`] random
/// ones.
fn sample_indices(shape: &[usize], seed: u64) -> Vec<Vec<usize>> {
    let total: usize = shape.iter().product();
    if total <= SAMPLES {
        return ndarray::indices(IxDyn(shape))
            .into_iter()
            .map(|i| i.slice().to_vec())
            .collect();
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    (0..SAMPLES)
        .map(|_| shape.iter().map(|&d| rng.random_range(0..d)).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance((1.0, 0.0), (1.0, 0.0)), 0.0);
        assert_eq!(distance((f64::NAN, 0.0), (f64::NAN, 0.0)), 0.0);
        assert_eq!(distance((f64::INFINITY, 0.0), (f64::INFINITY, 0.0)), 0.0);
        assert_eq!(distance((f64::NAN, 0.0), (1.0, 0.0)), f64::INFINITY);
        assert_eq!(distance((3.0, 0.0), (0.0, 4.0)), 5.0);
    }

    /// A 3+ operand result too large to check whole is checked along its path, every element:
    /// one wrong element is found.
    #[test]
    fn networks_are_checked_along_the_path() {
        let n = 70; // 70^4 iteration points: more than FULL_CHECK_POINTS
        let shapes: [&[usize]; 3] = [&[n, n], &[n, n], &[n, n]];
        let ops: Vec<ArrayD<f64>> = (0..3)
            .map(|k| {
                ArrayD::from_shape_fn(IxDyn(shapes[k]), |i| {
                    ((i[0] * 7 + i[1] * 3 + k) % 11) as f64 - 5.0
                })
            })
            .collect();
        let views: Vec<ArrayViewD<'_, f64>> = ops.iter().map(|a| a.view()).collect();
        let path = ttgt::einsum_path("ij,jk,kl->il", &shapes, &Default::default()).unwrap();
        let bound = parse("ij,jk,kl->il").unwrap().bind(&shapes).unwrap();
        assert!(bound.iteration_points() > FULL_CHECK_POINTS);
        let mut got = ArrayD::<f64>::zeros(IxDyn(&[n, n]));
        ttgt::einsum_along_into(&path, 1.0, &views, 0.0, &mut got).unwrap();
        let run = |got: &ArrayD<f64>| {
            check(&CheckJob {
                bound: &bound,
                operands: views.clone(),
                alpha: Scalar::real(1.0),
                beta: Scalar::real(0.0),
                c0: None,
                got,
                seed: 1,
                path: Some(&path),
            })
            .unwrap()
        };
        let ok = run(&got);
        assert!(ok.passed(), "{}", ok.line());
        assert_eq!(ok.elements, n * n);
        got[[41, 17]] += 1.0;
        let bad = run(&got);
        assert!(!bad.passed());
        assert_eq!(bad.worst.unwrap().index, vec![41, 17]);
    }

    #[test]
    fn samples_cover_small_outputs() {
        assert_eq!(sample_indices(&[2, 3], 1).len(), 6);
        assert_eq!(sample_indices(&[], 1), vec![Vec::<usize>::new()]);
        let s = sample_indices(&[100, 100], 1);
        assert_eq!(s.len(), SAMPLES);
        assert!(s.iter().all(|i| i[0] < 100 && i[1] < 100));
    }
}

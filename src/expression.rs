//! Reusable einsum expressions (opt_einsum's `contract_expression`): a network of three or more
//! operands planned once for its shapes, then evaluated again and again with new operands.
//! Operands given as constants are held by the expression, and every step of the path that
//! only involves constants (and what they make) is evaluated once, when the expression is
//! built; each later evaluation runs the remaining steps only.

use std::sync::Arc;

use ndarray::{ArrayD, ArrayViewD, Axis, DataMut, Dimension, IxDyn};

use crate::error::{Error, Result};
use crate::plan::{cached_path, ContractionPath, PathOptions};
use crate::tensor::Element;

/// An operand of the expression's path: given at each evaluation, held constant, or made by
/// an earlier step.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    /// The k-th of the operands passed to each evaluation.
    Given(usize),
    /// The k-th value the expression holds (a constant operand or a precomputed step).
    Held(usize),
    /// The result of step s of this evaluation.
    Step(usize),
}

/// An einsum planned once, evaluated many times (see the module text).
///
/// ```
/// use ndarray::ArrayD;
/// let shapes: [&[usize]; 3] = [&[4, 5], &[5, 6], &[6, 3]];
/// let w = ArrayD::<f64>::from_elem(vec![5, 6], 0.5);
/// let e = ttgt::einsum_expression("ij,jk,kl->il", &shapes, &[(1, w.view())], &Default::default()).unwrap();
/// let x = ArrayD::<f64>::from_elem(vec![4, 5], 1.0);
/// let y = ArrayD::<f64>::from_elem(vec![6, 3], 2.0);
/// let r = e.run(&[x.view(), y.view()]).unwrap();
/// assert!(r.iter().all(|&v| v == 5.0 * 6.0 * 0.5 * 2.0));
/// assert_eq!(e.operands(), 2);
/// ```
pub struct EinsumExpression<T: Element> {
    path: Arc<ContractionPath>,
    /// The shapes of the operands passed to each evaluation, in order.
    given_shapes: Vec<Vec<usize>>,
    /// Constants (stretched axes dropped) and precomputed intermediates.
    held: Vec<ArrayD<T>>,
    /// The steps left for each evaluation: spec and the sources of its two operands.
    steps: Vec<(String, Source, Source)>,
    /// Source of the result when every step was precomputed.
    result: Source,
    /// Steps evaluated when the expression was built.
    precomputed: usize,
    /// Which of the spec's operands are constants.
    constant: Vec<bool>,
    /// The result's shape.
    shape: Vec<usize>,
}

/// Builds an [`EinsumExpression`] for operands of `shapes` (every operand's, constants
/// included); `constants` are `(position, value)` pairs whose values the expression keeps.
/// The path is the one [`crate::einsum_path`] finds with `options` (priced for `T` where
/// `options.dtype` is open).
///
/// Errors: everything [`crate::einsum_path`] reports; a constant at a position out of range
/// or given twice, or whose shape differs from `shapes`; every operand constant (evaluate it
/// with [`crate::einsum`] instead).
///
/// ```
/// use ndarray::ArrayD;
/// let shapes: [&[usize]; 2] = [&[3, 4], &[4, 5]];
/// let c = ArrayD::<f32>::zeros(vec![4, 6]);
/// assert!(ttgt::einsum_expression("ij,jk->ik", &shapes, &[(1, c.view())], &Default::default()).is_err());
/// ```
pub fn einsum_expression<T: Element>(
    spec: &str,
    shapes: &[&[usize]],
    constants: &[(usize, ArrayViewD<'_, T>)],
    options: &PathOptions,
) -> Result<EinsumExpression<T>> {
    let n = shapes.len();
    let mut constant: Vec<Option<ArrayViewD<'_, T>>> = vec![None; n];
    for (pos, v) in constants {
        let slot = constant.get_mut(*pos).ok_or_else(|| {
            Error::InvalidPath(format!("constant operand {pos}: the spec has {n} operands"))
        })?;
        if slot.is_some() {
            return Err(Error::InvalidPath(format!(
                "constant operand {pos} is given twice"
            )));
        }
        if v.shape() != shapes[*pos] {
            return Err(Error::PlanMismatch(format!(
                "constant operand {pos} has shape {:?}, the expression is for {:?}",
                v.shape(),
                shapes[*pos]
            )));
        }
        *slot = Some(v.view());
    }
    if n > 0 && constant.iter().all(Option::is_some) {
        return Err(Error::Unsupported(
            "every operand is constant: evaluate the spec with einsum".into(),
        ));
    }
    let priced = PathOptions {
        dtype: options.dtype.or(Some(T::DTYPE)),
        ..options.clone()
    };
    let path = cached_path(spec, shapes, &priced)?;
    let shape = crate::output_shape(path.spec(), shapes)?;
    let flags: Vec<bool> = constant.iter().map(Option::is_some).collect();
    let mut held: Vec<ArrayD<T>> = Vec::new();
    let mut given_shapes = Vec::new();
    // the live list of the path's notation, as sources
    let mut list: Vec<Source> = Vec::with_capacity(n);
    for (k, c) in constant.into_iter().enumerate() {
        match c {
            Some(v) => {
                held.push(drop_stretched(v, &path.stretched()[k]).to_owned());
                list.push(Source::Held(held.len() - 1));
            }
            None => {
                given_shapes.push(shapes[k].to_vec());
                list.push(Source::Given(given_shapes.len() - 1));
            }
        }
    }
    if n == 1 {
        // one operand, not constant: the path has no step
        return Ok(EinsumExpression {
            path,
            given_shapes,
            held,
            steps: Vec::new(),
            result: Source::Given(0),
            precomputed: 0,
            constant: flags,
            shape,
        });
    }
    let mut steps = Vec::new();
    let mut precomputed = 0;
    for step in path.steps() {
        let (i, j) = step.pair;
        let y = list.remove(j);
        let x = list.remove(i);
        match (x, y) {
            (Source::Held(a), Source::Held(b)) => {
                let r = crate::contract(&step.spec, &held[a], &held[b])?;
                held.push(r);
                precomputed += 1;
                list.push(Source::Held(held.len() - 1));
            }
            _ => {
                steps.push((step.spec.clone(), x, y));
                list.push(Source::Step(steps.len() - 1));
            }
        }
    }
    let result = list.pop().unwrap_or(Source::Given(0));
    Ok(EinsumExpression {
        path,
        given_shapes,
        held,
        steps,
        result,
        precomputed,
        constant: flags,
        shape,
    })
}

/// `v` without the axes `stretched` marks (extent 1, stretched by broadcasting).
fn drop_stretched<'a, T>(mut v: ArrayViewD<'a, T>, stretched: &[bool]) -> ArrayViewD<'a, T> {
    for ax in (0..stretched.len()).rev().filter(|&ax| stretched[ax]) {
        v.index_axis_inplace(Axis(ax), 0);
    }
    v
}

impl<T: Element> EinsumExpression<T> {
    /// The path the expression follows (over every operand, constants included).
    pub fn path(&self) -> &ContractionPath {
        &self.path
    }

    /// How many operands each evaluation takes (the spec's operands less the constants).
    pub fn operands(&self) -> usize {
        self.given_shapes.len()
    }

    /// Steps of the path evaluated once, when the expression was built (those that involve
    /// constants only).
    ///
    /// ```
    /// use ndarray::ArrayD;
    /// let shapes: [&[usize]; 3] = [&[4, 5], &[5, 6], &[6, 3]];
    /// let (a, b) = (ArrayD::<f64>::ones(vec![5, 6]), ArrayD::<f64>::ones(vec![6, 3]));
    /// let e = ttgt::einsum_expression("ij,jk,kl->il", &shapes, &[(1, a.view()), (2, b.view())], &Default::default()).unwrap();
    /// assert_eq!(e.precomputed_steps(), 1);
    /// ```
    pub fn precomputed_steps(&self) -> usize {
        self.precomputed
    }

    /// Evaluates the expression on `operands` (the non-constant ones, in spec order).
    ///
    /// Errors: a wrong number of operands or a shape other than the expression's.
    pub fn run(&self, operands: &[ArrayViewD<'_, T>]) -> Result<ArrayD<T>> {
        let shape = &self.shape;
        let mut out = ArrayD::from_shape_vec(
            IxDyn(shape),
            crate::tensor::zeroed::<T>(shape.iter().product(), "the result")?,
        )
        .map_err(|e| Error::Layout(e.to_string()))?;
        self.run_into(T::one(), operands, T::zero(), &mut out)?;
        Ok(out)
    }

    /// `C = alpha * expression(operands) + beta * C` (any strided mutable view of the output's
    /// shape; with `beta == 0`, C is never read). A `c` that shares memory with an operand is
    /// an [`Error::Overlap`].
    ///
    /// ```
    /// use ndarray::ArrayD;
    /// let shapes: [&[usize]; 3] = [&[2, 3], &[3, 4], &[4, 2]];
    /// let m = ArrayD::<f64>::ones(vec![3, 4]);
    /// let e = ttgt::einsum_expression("ij,jk,kl->il", &shapes, &[(1, m.view())], &Default::default()).unwrap();
    /// let (x, y) = (ArrayD::<f64>::ones(vec![2, 3]), ArrayD::<f64>::ones(vec![4, 2]));
    /// let mut c = ArrayD::<f64>::from_elem(vec![2, 2], 1.0);
    /// e.run_into(2.0, &[x.view(), y.view()], 1.0, &mut c).unwrap();
    /// assert!(c.iter().all(|&v| v == 2.0 * 12.0 + 1.0));
    /// ```
    pub fn run_into<Sc, Dc>(
        &self,
        alpha: T,
        operands: &[ArrayViewD<'_, T>],
        beta: T,
        c: &mut ndarray::ArrayBase<Sc, Dc>,
    ) -> Result<()>
    where
        Sc: DataMut<Elem = T>,
        Dc: Dimension,
    {
        let given: Vec<&[usize]> = operands.iter().map(|a| a.shape()).collect();
        let made: Vec<&[usize]> = self.given_shapes.iter().map(Vec::as_slice).collect();
        if given != made {
            return Err(Error::PlanMismatch(format!(
                "the expression for {} takes operands of shapes {made:?}, not {given:?}",
                self.path.spec()
            )));
        }
        if c.shape() != self.shape.as_slice() {
            return Err(Error::OutputShape {
                spec: self.path.spec().to_string(),
                expected: self.shape.clone(),
                given: c.shape().to_vec(),
            });
        }
        let spans: Vec<(*const T, crate::Layout)> = operands
            .iter()
            .map(|a| (a.as_ptr(), crate::Layout::of(a)))
            .collect();
        crate::check_no_overlap(&spans, c)?;
        // stretched axes of the given operands dropped, as the path did
        let views: Vec<ArrayViewD<'_, T>> = operands
            .iter()
            .zip(self.given_stretched())
            .map(|(a, st)| drop_stretched(a.view(), st))
            .collect();
        if self.steps.is_empty() {
            // one operand: the spec applied to it
            let src = match self.result {
                Source::Given(k) => views[k].view(),
                Source::Held(k) => self.held[k].view(),
                Source::Step(_) => return Err(Error::Internal("no step to read".into())),
            };
            return crate::einsum_unary_into(self.path.spec(), alpha, &src, beta, c);
        }
        // intermediates in pooled workspace buffers, as `einsum_along_into` keeps them
        let mut results: Vec<crate::Operand<'_, T>> = Vec::with_capacity(self.steps.len());
        let last = self.steps.len() - 1;
        for (s, (spec, x, y)) in self.steps.iter().enumerate() {
            let view = |src: Source| -> Result<ArrayViewD<'_, T>> {
                match src {
                    Source::Given(k) => Ok(views[k].view()),
                    Source::Held(k) => Ok(self.held[k].view()),
                    Source::Step(k) => results[k].view(),
                }
            };
            let (xv, yv) = (view(*x)?, view(*y)?);
            if s == last {
                crate::contract_into(spec, alpha, &xv, &yv, beta, c)?;
            } else {
                let r = crate::pooled_step(spec, &xv, &yv)?;
                results.push(r);
            }
        }
        Ok(())
    }

    /// The stretched-axis marks of the operands each evaluation takes.
    fn given_stretched(&self) -> impl Iterator<Item = &[bool]> {
        self.path
            .stretched()
            .iter()
            .zip(&self.constant)
            .filter(|(_, &c)| !c)
            .map(|(s, _)| s.as_slice())
    }

    /// The result's shape.
    ///
    /// ```
    /// let e = ttgt::einsum_expression::<f64>("ij,jk,kl->li", &[&[2, 3], &[3, 4], &[4, 5]], &[], &Default::default()).unwrap();
    /// assert_eq!(e.shape(), &[5, 2]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
}

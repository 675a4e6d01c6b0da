//! # ttgt — tensor contractions at the speed of the GEMM underneath
//!
//! ```
//! use ndarray::ArrayD;
//! let a = ArrayD::<f64>::from_shape_fn(vec![4, 5, 6, 7], |i| (i[0] + 2 * i[1] + i[2] * i[3]) as f64);
//! let b = ArrayD::<f64>::from_shape_fn(vec![7, 5, 3, 2], |i| (i[0] * i[1]) as f64 - i[2] as f64 + 0.5 * i[3] as f64);
//! let c = ttgt::contract("abcd,dbef->acef", &a, &b).unwrap();
//! assert_eq!(c.shape(), &[4, 6, 3, 2]);
//! let want = ttgt::reference::einsum("abcd,dbef->acef", &[a.view(), b.view()]).unwrap();
//! assert_eq!(c, want);
//! ```
//!
//! Specs follow numpy's `einsum`: implicit outputs (`"ij,jk"`), batch indices
//! (`"bij,bjk->bik"`), diagonals and traces (`"ii->i"`, `"ii"`), sums (`"ij->"`), outer
//! products (`"i,j->ij"`) and broadcasting (`...` dimensions, and any index of extent 1
//! where other operands are larger, as numpy does). Operands are any ndarray arrays or views,
//! with any strides (negative, zero, sliced). Errors are values of [`Error`]; nothing panics on user
//! input.
//!
//! Layers (each depends only on those before it): [`einsum`] (parse, bind, classify) →
//! [`tensor`] (element types, layouts, strided views) → [`transpose`] → [`plan`] →
//! [`backend`] → this API. [`reference`] is the plain-loop oracle everything is tested
//! against.

#![warn(missing_docs)]

pub mod backend;
pub mod bench;
pub mod bounded_cache;
mod cases;
pub mod cpu;
pub mod einsum;
mod error;
mod expression;
pub mod files;
pub mod model;
pub mod plan;
pub mod reference;
pub mod tensor;
pub mod threads;

#[cfg(feature = "python")]
mod python;
pub mod transpose;

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Axis, Data, DataMut, Dimension, IxDyn};

pub use error::{Error, Result};
pub use expression::{einsum_expression, EinsumExpression};
pub use plan::{ContractionPath, ContractionPlan, PathOptions, StepTimes};
pub use tensor::{DType, Element, Layout};

use einsum::parse;
use tensor::{check_permutation, spans_overlap, StridedView, StridedViewMut};

/// An output array of `shape` (zeros), or an allocation error.
fn new_output<T: Element>(shape: &[usize]) -> Result<ArrayD<T>> {
    let n = Layout::row_major(shape)?.len();
    let data = tensor::zeroed::<T>(n, "the result")?;
    ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|e| Error::Layout(e.to_string()))
}

fn output_shape(spec: &str, shapes: &[&[usize]]) -> Result<Vec<usize>> {
    Ok(parse(spec)?.bind(shapes)?.output_shape())
}

fn check_no_overlap<T, S: ndarray::RawData, D: Dimension>(
    inputs: &[(*const T, Layout)],
    c: &ArrayBase<S, D>,
) -> Result<()> {
    let lc = Layout::of(c);
    for (k, (p, l)) in inputs.iter().enumerate() {
        if spans_overlap(*p, l, c.as_ptr(), &lc) {
            return Err(Error::Overlap {
                what: format!("input operand {k}"),
            });
        }
    }
    Ok(())
}

/// Contracts two tensors: the mission call.
///
/// ```
/// let a = ndarray::Array2::<f32>::from_shape_fn((2, 3), |(i, j)| (i + j) as f32);
/// let b = ndarray::Array2::<f32>::from_shape_fn((3, 4), |(i, j)| (i * j) as f32);
/// let c = ttgt::contract("ij,jk", &a, &b).unwrap();
/// assert_eq!(c.into_dimensionality::<ndarray::Ix2>().unwrap(), a.dot(&b));
/// ```
pub fn contract<T, Sa, Da, Sb, Db>(
    spec: &str,
    a: &ArrayBase<Sa, Da>,
    b: &ArrayBase<Sb, Db>,
) -> Result<ArrayD<T>>
where
    T: Element,
    Sa: Data<Elem = T>,
    Sb: Data<Elem = T>,
    Da: Dimension,
    Db: Dimension,
{
    let shape = output_shape(spec, &[a.shape(), b.shape()])?;
    let mut c = new_output(&shape)?;
    contract_into(spec, T::one(), a, b, T::zero(), &mut c)?;
    Ok(c)
}

/// `C = alpha * einsum(spec, A, B) + beta * C` into any strided mutable view. With
/// `beta == 0`, C is never read (NaNs in it do not leak into the result).
///
/// ```
/// use ndarray::{s, Array2};
/// let a = Array2::<f64>::ones((3, 4));
/// let b = Array2::<f64>::ones((4, 5));
/// let mut big = Array2::<f64>::from_elem((6, 6), f64::NAN);
/// let mut c = big.slice_mut(s![..;2, 1..]); // a non-contiguous output
/// ttgt::contract_into("ij,jk->ik", 2.0, &a, &b, 0.0, &mut c).unwrap();
/// assert!(c.iter().all(|&x| x == 8.0));
/// ```
pub fn contract_into<T, Sa, Da, Sb, Db, Sc, Dc>(
    spec: &str,
    alpha: T,
    a: &ArrayBase<Sa, Da>,
    b: &ArrayBase<Sb, Db>,
    beta: T,
    c: &mut ArrayBase<Sc, Dc>,
) -> Result<()>
where
    T: Element,
    Sa: Data<Elem = T>,
    Sb: Data<Elem = T>,
    Sc: DataMut<Elem = T>,
    Da: Dimension,
    Db: Dimension,
    Dc: Dimension,
{
    let (la, lb) = (Layout::of(a), Layout::of(b));
    check_no_overlap(&[(a.as_ptr(), la.clone()), (b.as_ptr(), lb.clone())], c)?;
    let plan = plan::cached_contraction_plan(
        spec,
        &[la, lb],
        &Layout::of(c),
        T::DTYPE,
        &plan::PlanOptions::default(),
    )?;
    if plan.bound().inputs().len() != 2 {
        return Err(Error::OperandCount {
            spec: spec.to_string(),
            expected: plan.bound().inputs().len(),
            given: 2,
        });
    }
    let mut cv = StridedViewMut::of(c)?;
    plan.execute(
        alpha,
        &[StridedView::of(a), StridedView::of(b)],
        beta,
        &mut cv,
    )?;
    Ok(())
}

/// One-operand einsum: transposes, diagonals, traces, sums.
///
/// ```
/// let a = ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]);
/// assert_eq!(ttgt::einsum_unary("ii", &a).unwrap()[[]], 5.0);
/// assert_eq!(ttgt::einsum_unary("ij->j", &a).unwrap(), ndarray::arr1(&[4.0, 6.0]).into_dyn());
/// ```
pub fn einsum_unary<T, S, D>(spec: &str, a: &ArrayBase<S, D>) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let shape = output_shape(spec, &[a.shape()])?;
    let mut c = new_output(&shape)?;
    einsum_unary_into(spec, T::one(), a, T::zero(), &mut c)?;
    Ok(c)
}

/// `C = alpha * einsum(spec, A) + beta * C` for a one-operand spec.
///
/// ```
/// let a = ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]);
/// let mut c = ndarray::arr1(&[10.0, 10.0]);
/// ttgt::einsum_unary_into("ii->i", 2.0, &a, 1.0, &mut c).unwrap();
/// assert_eq!(c, ndarray::arr1(&[12.0, 18.0]));
/// ```
pub fn einsum_unary_into<T, S, D, Sc, Dc>(
    spec: &str,
    alpha: T,
    a: &ArrayBase<S, D>,
    beta: T,
    c: &mut ArrayBase<Sc, Dc>,
) -> Result<()>
where
    T: Element,
    S: Data<Elem = T>,
    Sc: DataMut<Elem = T>,
    D: Dimension,
    Dc: Dimension,
{
    let la = Layout::of(a);
    check_no_overlap(&[(a.as_ptr(), la.clone())], c)?;
    let plan = plan::cached_contraction_plan(
        spec,
        &[la],
        &Layout::of(c),
        T::DTYPE,
        &plan::PlanOptions::default(),
    )?;
    if plan.bound().inputs().len() != 1 {
        return Err(Error::OperandCount {
            spec: spec.to_string(),
            expected: plan.bound().inputs().len(),
            given: 1,
        });
    }
    let mut cv = StridedViewMut::of(c)?;
    plan.execute(alpha, &[StridedView::of(a)], beta, &mut cv)?;
    Ok(())
}

/// `B = permute(A)` with numpy's meaning: axis `i` of the result is axis `perm[i]` of `A`.
///
/// ```
/// let a = ndarray::Array3::<f64>::zeros((2, 3, 4));
/// assert_eq!(ttgt::permute(&a, &[2, 0, 1]).unwrap().shape(), &[4, 2, 3]);
/// assert!(ttgt::permute(&a, &[0, 1]).is_err());
/// ```
pub fn permute<T, S, D>(a: &ArrayBase<S, D>, perm: &[usize]) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    check_permutation(perm, a.ndim())?;
    let shape: Vec<usize> = perm.iter().map(|&p| a.shape()[p]).collect();
    let mut b = new_output(&shape)?;
    permute_into(T::one(), a, perm, T::zero(), &mut b)?;
    Ok(b)
}

/// `B = alpha * permute(A) + beta * B` (numpy meaning of `perm`); B may be any strided view.
///
/// ```
/// let a = ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0]]);
/// let mut b = ndarray::Array2::<f32>::ones((2, 2));
/// ttgt::permute_into(1.0, &a, &[1, 0], 1.0, &mut b).unwrap();
/// assert_eq!(b, ndarray::arr2(&[[2.0, 4.0], [3.0, 5.0]]));
/// ```
pub fn permute_into<T, S, D, Sb, Db>(
    alpha: T,
    a: &ArrayBase<S, D>,
    perm: &[usize],
    beta: T,
    b: &mut ArrayBase<Sb, Db>,
) -> Result<()>
where
    T: Element,
    S: Data<Elem = T>,
    Sb: DataMut<Elem = T>,
    D: Dimension,
    Db: Dimension,
{
    check_permutation(perm, a.ndim())?;
    let la = Layout::of(a);
    let want = la.permuted(perm)?;
    if want.dims() != b.shape() {
        return Err(Error::OutputShape {
            spec: format!("permute {perm:?}"),
            expected: want.dims().to_vec(),
            given: b.shape().to_vec(),
        });
    }
    check_no_overlap(&[(a.as_ptr(), la)], b)?;
    if b.len().saturating_mul(std::mem::size_of::<T>()) >= transpose::STREAM_MIN_BYTES {
        // large outputs may stream: follow this machine's store rule from its profile
        model::profile::ensure_loaded();
    }
    transpose::transpose(
        perm,
        alpha,
        &StridedView::of(a),
        beta,
        &mut StridedViewMut::of(b)?,
    )
}

/// einsum with any number of operands. One and two operands run through the planner; more
/// are contracted pairwise in the order [`einsum_path`] finds with default options (the
/// fewest predicted seconds for `T`, see [`plan::PathStrategy::Auto`]; found once per spec
/// and shapes), each intermediate keeping only the indices still needed.
///
/// ```
/// use ndarray::Array2;
/// let a = Array2::<f64>::eye(3).into_dyn();
/// let b = Array2::<f64>::from_elem((3, 3), 2.0).into_dyn();
/// let r = ttgt::einsum("ij,jk,kl->il", &[a.view(), b.view(), a.view()]).unwrap();
/// assert_eq!(r, Array2::<f64>::from_elem((3, 3), 2.0).into_dyn());
/// ```
pub fn einsum<T: Element>(spec: &str, operands: &[ArrayViewD<'_, T>]) -> Result<ArrayD<T>> {
    einsum_with(spec, operands, &PathOptions::default())
}

/// The contraction order [`einsum_with`] would follow for operands of these shapes, with its
/// FLOP count and, for the default search, its predicted time (numpy's `einsum_path`; the
/// steps are priced for [`PathOptions::dtype`], `f64` when it is open).
///
/// ```
/// use ttgt::plan::{PathOptions, PathStrategy};
/// let shapes: [&[usize]; 4] = [&[8, 8], &[8, 64], &[64, 64, 64], &[64, 8]];
/// let best = ttgt::einsum_path("ab,bc,cde,ef->adf", &shapes, &PathOptions::default()).unwrap();
/// let left = PathOptions { strategy: PathStrategy::LeftToRight, ..Default::default() };
/// let naive = ttgt::einsum_path("ab,bc,cde,ef->adf", &shapes, &left).unwrap();
/// assert!(best.flops() <= naive.flops());
/// println!("{best}");
/// ```
pub fn einsum_path(
    spec: &str,
    shapes: &[&[usize]],
    options: &PathOptions,
) -> Result<ContractionPath> {
    plan::cached_path(spec, shapes, options).map(|p| (*p).clone())
}

/// `options` with the element type the steps are priced for set to `T`'s where it is open.
fn priced_for<T: Element>(options: &PathOptions) -> PathOptions {
    PathOptions {
        dtype: options.dtype.or(Some(T::DTYPE)),
        ..options.clone()
    }
}

/// An operand of a pairwise step: one of the caller's (a view) or an intermediate in a pooled
/// workspace buffer (row-major from `offset`).
enum Operand<'a, T: Element> {
    Given(ArrayViewD<'a, T>),
    Pooled {
        buf: tensor::Workspace<T>,
        offset: usize,
        shape: Vec<usize>,
    },
}

impl<T: Element> Operand<'_, T> {
    fn view(&self) -> Result<ArrayViewD<'_, T>> {
        match self {
            Operand::Given(v) => Ok(v.view()),
            Operand::Pooled { buf, offset, shape } => {
                let n: usize = shape.iter().product();
                ArrayViewD::from_shape(IxDyn(shape), &buf[*offset..*offset + n])
                    .map_err(|e| Error::Layout(e.to_string()))
            }
        }
    }
}

/// The intermediate of one path step in a pooled workspace buffer (`beta = 0`: the buffer's
/// old contents are never read), so that repeated evaluations of a network reuse memory
/// instead of zero-filling and faulting in fresh pages every time.
fn pooled_step<'a, T: Element>(
    spec: &str,
    x: &ArrayViewD<'_, T>,
    y: &ArrayViewD<'_, T>,
) -> Result<Operand<'a, T>> {
    let shape = output_shape(spec, &[x.shape(), y.shape()])?;
    let n = Layout::row_major(&shape)?.len();
    let (mut buf, offset) = tensor::take_aligned::<T>(n, true, "a path intermediate")?;
    {
        let mut out =
            ndarray::ArrayViewMutD::from_shape(IxDyn(&shape), &mut buf[offset..offset + n])
                .map_err(|e| Error::Layout(e.to_string()))?;
        contract_into(spec, T::one(), x, y, T::zero(), &mut out)?;
    }
    Ok(Operand::Pooled { buf, offset, shape })
}

/// einsum with any number of operands, contracted pairwise along the path that `options`
/// chooses (see [`plan::PathStrategy`]); each step is planned and run like [`contract`].
///
/// ```
/// use ndarray::{Array2, ArrayD};
/// use ttgt::plan::{PathOptions, PathStrategy};
/// let a = ArrayD::<f64>::from_elem(vec![4, 5], 1.0);
/// let b = ArrayD::<f64>::from_elem(vec![5, 6], 2.0);
/// let c = ArrayD::<f64>::from_elem(vec![6, 3], 0.5);
/// let o = PathOptions { strategy: PathStrategy::Explicit(vec![(1, 2), (0, 1)]), ..Default::default() };
/// let r = ttgt::einsum_with("ij,jk,kl->il", &[a.view(), b.view(), c.view()], &o).unwrap();
/// assert_eq!(r, Array2::<f64>::from_elem((4, 3), 30.0).into_dyn());
/// ```
pub fn einsum_with<T: Element>(
    spec: &str,
    operands: &[ArrayViewD<'_, T>],
    options: &PathOptions,
) -> Result<ArrayD<T>> {
    let shapes: Vec<&[usize]> = operands.iter().map(|a| a.shape()).collect();
    let path = plan::cached_path(spec, &shapes, &priced_for::<T>(options))?;
    Ok(einsum_along(&path, operands)?.0)
}

/// Runs a path made by [`einsum_path`] on operands of the shapes it was made for: the result
/// and the wall time of each pairwise step (a path of one operand has no step).
///
/// ```
/// use ndarray::ArrayD;
/// let shapes: [&[usize]; 3] = [&[6, 7], &[7, 8], &[8, 2]];
/// let path = ttgt::einsum_path("ij,jk,kl->il", &shapes, &Default::default()).unwrap();
/// let ops: Vec<ArrayD<f32>> = shapes.iter().map(|s| ArrayD::from_elem(s.to_vec(), 1.0)).collect();
/// let views: Vec<_> = ops.iter().map(|a| a.view()).collect();
/// let (r, times) = ttgt::einsum_along(&path, &views).unwrap();
/// assert_eq!(times.len(), 2);
/// assert!(r.iter().all(|&x| x == 56.0));
/// ```
pub fn einsum_along<T: Element>(
    path: &ContractionPath,
    operands: &[ArrayViewD<'_, T>],
) -> Result<(ArrayD<T>, Vec<std::time::Duration>)> {
    check_path_operands(path, operands)?;
    let given: Vec<&[usize]> = operands.iter().map(|a| a.shape()).collect();
    let mut out = new_output(&output_shape(path.spec(), &given)?)?;
    let times = einsum_along_into(path, T::one(), operands, T::zero(), &mut out)?;
    Ok((out, times))
}

/// The operands' shapes must be the ones `path` was made for.
fn check_path_operands<T: Element>(
    path: &ContractionPath,
    operands: &[ArrayViewD<'_, T>],
) -> Result<()> {
    let given: Vec<&[usize]> = operands.iter().map(|a| a.shape()).collect();
    let made: Vec<&[usize]> = path.shapes().iter().map(Vec::as_slice).collect();
    if given != made {
        return Err(Error::PlanMismatch(format!(
            "the path for {} was made for operand shapes {made:?}, not {given:?}",
            path.spec()
        )));
    }
    Ok(())
}

/// `C = alpha * einsum(...) + beta * C` along a path made by [`einsum_path`]: the
/// intermediates live in pooled workspace buffers and the last step writes straight into `c`
/// (any strided mutable view of the output's shape), so a network evaluated again and again
/// allocates nothing and faults in no fresh pages (numpy's `out=`). With `beta == 0`, C is
/// never read. A `c` that shares memory with any operand is an [`Error::Overlap`]. Returns
/// the wall time of each pairwise step.
///
/// ```
/// use ndarray::ArrayD;
/// let shapes: [&[usize]; 3] = [&[6, 7], &[7, 8], &[8, 2]];
/// let path = ttgt::einsum_path("ij,jk,kl->il", &shapes, &Default::default()).unwrap();
/// let ops: Vec<ArrayD<f64>> = shapes.iter().map(|s| ArrayD::from_elem(s.to_vec(), 1.0)).collect();
/// let views: Vec<_> = ops.iter().map(|a| a.view()).collect();
/// let mut c = ArrayD::<f64>::from_elem(vec![6, 2], 1.0);
/// let times = ttgt::einsum_along_into(&path, 2.0, &views, 0.5, &mut c).unwrap();
/// assert_eq!(times.len(), 2);
/// assert!(c.iter().all(|&x| x == 2.0 * 56.0 + 0.5));
/// ```
pub fn einsum_along_into<T, Sc, Dc>(
    path: &ContractionPath,
    alpha: T,
    operands: &[ArrayViewD<'_, T>],
    beta: T,
    c: &mut ArrayBase<Sc, Dc>,
) -> Result<Vec<std::time::Duration>>
where
    T: Element,
    Sc: DataMut<Elem = T>,
    Dc: Dimension,
{
    check_path_operands(path, operands)?;
    let spans: Vec<(*const T, Layout)> = operands
        .iter()
        .map(|a| (a.as_ptr(), Layout::of(a)))
        .collect();
    check_no_overlap(&spans, c)?;
    if let Some(s) = path.slicing() {
        return run_sliced(s, alpha, operands, beta, c);
    }
    if let [a] = operands {
        einsum_unary_into(path.spec(), alpha, a, beta, c)?;
        return Ok(Vec::new());
    }
    // Stretched axes (`...` dimensions or letters of extent 1 where other operands are
    // larger) hold one value along their index: drop them, as the path did.
    let mut list: Vec<Operand<'_, T>> = operands
        .iter()
        .zip(path.stretched())
        .map(|(a, st)| {
            let mut v = a.view();
            for ax in (0..st.len()).rev().filter(|&ax| st[ax]) {
                v.index_axis_inplace(Axis(ax), 0);
            }
            Operand::Given(v)
        })
        .collect();
    let mut times = Vec::with_capacity(path.steps().len());
    let last = path.steps().len().saturating_sub(1);
    for (s, step) in path.steps().iter().enumerate() {
        let (i, j) = step.pair;
        let start = std::time::Instant::now();
        let y = list.remove(j);
        let x = list.remove(i);
        let (xv, yv) = (x.view()?, y.view()?);
        if s == last {
            contract_into(&step.spec, alpha, &xv, &yv, beta, c)?;
        } else {
            list.push(pooled_step(&step.spec, &xv, &yv)?);
        }
        drop((x, y)); // intermediates go back to the pool as soon as they are used
        times.push(start.elapsed());
    }
    if list.is_empty() {
        Ok(times)
    } else {
        Err(Error::InvalidPath(
            "the path did not end in one result".into(),
        ))
    }
}

/// A sliced path: the inner path once per value of the sliced indices, on the operands and
/// the part of C with those indices fixed; slices that differ only in summed indices add into
/// the same part of C (the first with `beta`, the others with 1). Returns each inner step's
/// time summed over the slices. The intermediates of every slice after the first reuse the
/// first's pooled buffers.
fn run_sliced<T, Sc, Dc>(
    s: &plan::Slicing,
    alpha: T,
    operands: &[ArrayViewD<'_, T>],
    beta: T,
    c: &mut ArrayBase<Sc, Dc>,
) -> Result<Vec<std::time::Duration>>
where
    T: Element,
    Sc: DataMut<Elem = T>,
    Dc: Dimension,
{
    let n = s.letters.len();
    let in_output: Vec<bool> = (0..n)
        .map(|k| s.output_axes.iter().any(|&(_, p)| p == k))
        .collect();
    // output indices outermost, so that the summed ones of one part of C follow each other
    let order: Vec<usize> = (0..n)
        .filter(|&k| in_output[k])
        .chain((0..n).filter(|&k| !in_output[k]))
        .collect();
    let mut times = vec![std::time::Duration::ZERO; s.inner.steps().len()];
    let mut value = vec![0usize; n];
    let mut c = c.view_mut().into_dyn();
    for _ in 0..s.count() {
        let views: Vec<ArrayViewD<'_, T>> = operands
            .iter()
            .zip(&s.operand_axes)
            .map(|(a, axes)| {
                let mut v = a.view();
                for &(ax, p) in axes {
                    v.index_axis_inplace(Axis(ax), value[p]);
                }
                v
            })
            .collect();
        let mut part = c.view_mut();
        for &(ax, p) in &s.output_axes {
            part.index_axis_inplace(Axis(ax), value[p]);
        }
        let first = (0..n).all(|k| in_output[k] || value[k] == 0);
        let b = if first { beta } else { T::one() };
        let t = einsum_along_into(&s.inner, alpha, &views, b, &mut part)?;
        for (acc, d) in times.iter_mut().zip(t) {
            *acc += d;
        }
        // next slice: the last index in `order` fastest
        for &k in order.iter().rev() {
            value[k] += 1;
            if value[k] < s.extents[k] {
                break;
            }
            value[k] = 0;
        }
    }
    Ok(times)
}

/// `C = alpha * einsum(spec, operands...) + beta * C` for any number of operands, along the
/// path [`einsum`] takes (the fewest FLOPs); see [`einsum_along_into`].
///
/// ```
/// use ndarray::{Array2, ArrayD};
/// let a = ArrayD::<f64>::from_elem(vec![4, 5], 1.0);
/// let b = ArrayD::<f64>::from_elem(vec![5, 6], 2.0);
/// let d = ArrayD::<f64>::from_elem(vec![6, 3], 0.5);
/// let mut c = Array2::<f64>::zeros((4, 3));
/// ttgt::einsum_into("ij,jk,kl->il", 1.0, &[a.view(), b.view(), d.view()], 0.0, &mut c).unwrap();
/// assert!(c.iter().all(|&x| x == 30.0));
/// ```
pub fn einsum_into<T, Sc, Dc>(
    spec: &str,
    alpha: T,
    operands: &[ArrayViewD<'_, T>],
    beta: T,
    c: &mut ArrayBase<Sc, Dc>,
) -> Result<()>
where
    T: Element,
    Sc: DataMut<Elem = T>,
    Dc: Dimension,
{
    let shapes: Vec<&[usize]> = operands.iter().map(|a| a.shape()).collect();
    let path = plan::cached_path(spec, &shapes, &priced_for::<T>(&PathOptions::default()))?;
    einsum_along_into(&path, alpha, operands, beta, c).map(|_| ())
}

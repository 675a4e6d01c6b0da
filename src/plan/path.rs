//! Contraction order for einsum specs of three or more operands (numpy's `einsum_path`,
//! opt_einsum's optimizers): which pair of operands is contracted first, which next, and the
//! index order of every intermediate. Each pairwise step is then an ordinary two-operand
//! contraction, planned like any other.
//!
//! The cost of a step is its FLOP count as numpy and opt_einsum count it: the product of the
//! extents of every index the two operands hold, doubled when an index is summed. Indices
//! that only one operand holds (and the output does not) are summed out of that operand
//! before its first step, as the two-operand planner does ([`super::OperandPrep`]): that sum
//! costs one add per element of the operand, is the same on every path, and is counted in the
//! operand's first step, whose pairwise part then sees the reduced operand. A path's cost is
//! the sum over its steps; ties go to the path whose intermediates hold fewer elements.
//!
//! - [`PathStrategy::Optimal`]: dynamic programming over subsets of operands (every way to
//!   split every subset in two, outer products included), exact for the FLOP count; 3^n
//!   work, so at most [`OPTIMAL_MAX_OPERANDS`] operands.
//! - [`PathStrategy::Greedy`]: opt_einsum's greedy rule: among pairs that share an index,
//!   the one whose result removes the most elements (result size minus the sizes of the two
//!   inputs), then the fewer FLOPs; outer products only when no pair shares an index, the
//!   smallest result first.
//! - [`PathStrategy::Auto`] (the default): the path of fewest predicted seconds, not FLOPs.
//!   From the FLOP-optimal path (greedy beyond [`AUTO_OPTIMAL_MAX_OPERANDS`] operands), each
//!   step priced by the two-operand planner, the intermediates' index orders and (up to
//!   [`TIME_DP_MAX_OPERANDS`](super::TIME_DP_MAX_OPERANDS) operands) the order of the steps
//!   are searched on predicted time within a planning budget; the FLOP-optimal path's
//!   predicted time is kept beside it ([`ContractionPath::reference`]). See
//!   `plan/path_time.rs`.
//! - [`PathStrategy::LeftToRight`]: the first two operands, then the result with the third,
//!   and so on.
//! - [`PathStrategy::Explicit`]: a path in numpy's notation: pairs of positions in the
//!   current operand list, whose result goes to the end of the list.
//! - [`PathStrategy::Numpy`]: numpy's notation with steps of any arity, as
//!   `np.einsum_path` prints them: `(i,)` reduces one operand (it moves to the end of the
//!   list; its summed indices go before its first pairwise step anyway), `(i, j)` is a
//!   pairwise step, and `(i, j, k, ...)` contracts its operands pairwise from the left.
//!
//! Axes of extent 1 that `...` broadcasting stretches are dropped from their operand before
//! the search (they hold one value along the index), so broadcasting costs nothing extra.

use std::collections::BTreeMap;
use std::fmt;

use super::path_flops::{
    greedy, kept, live_mask, multiplicity, optimal, random_greedy, Sets, Ssa,
    RANDOM_GREEDY_RESTARTS,
};
use super::path_notation::{from_numpy, from_positions, to_positions};
use super::path_time::{self, Net, Pricer, Tree};
use super::slicing::Slicing;
use crate::einsum::{BoundSpec, Label};
use crate::error::{Error, Result};
use crate::tensor::DType;

/// Most operands [`PathStrategy::Optimal`] accepts (its search visits 3^n splits).
pub const OPTIMAL_MAX_OPERANDS: usize = 16;

/// Most operands for which [`PathStrategy::Auto`] searches the optimal path.
pub const AUTO_OPTIMAL_MAX_OPERANDS: usize = 10;

/// How the order of pairwise contractions is chosen.
///
/// ```
/// use ttgt::plan::PathStrategy;
/// assert_eq!(PathStrategy::default(), PathStrategy::Auto);
/// let numpy_style = PathStrategy::Explicit(vec![(0, 2), (0, 1)]);
/// assert_ne!(numpy_style, PathStrategy::Greedy);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum PathStrategy {
    /// Fewest predicted seconds: the FLOP search's path (optimal up to
    /// [`AUTO_OPTIMAL_MAX_OPERANDS`] operands, greedy beyond) refined on predicted time.
    #[default]
    Auto,
    /// Fewest FLOPs over all pairwise orders (dynamic programming over subsets).
    Optimal,
    /// opt_einsum's greedy rule (most elements removed first).
    Greedy,
    /// From the left: `((A·B)·C)·D`.
    LeftToRight,
    /// numpy's notation: each pair holds positions in the current operand list; the pair is
    /// removed and its result appended at the end.
    Explicit(Vec<(usize, usize)>),
    /// numpy's notation with steps of any arity (`np.einsum_path`'s output without its
    /// leading `'einsum_path'`): one position reduces that operand and moves it to the end
    /// of the list; two or more are contracted pairwise from the left, the result appended.
    ///
    /// ```
    /// use ttgt::plan::{PathOptions, PathStrategy};
    /// let o = PathOptions { strategy: PathStrategy::Numpy(vec![vec![0, 1, 2]]), ..Default::default() };
    /// let p = ttgt::einsum_path("ij,jk,kl->il", &[&[2, 3], &[3, 4], &[4, 5]], &o).unwrap();
    /// assert_eq!(p.pairs(), vec![(0, 1), (0, 1)]);
    /// let one = PathOptions { strategy: PathStrategy::Numpy(vec![vec![0]]), ..Default::default() };
    /// assert!(ttgt::einsum_path("ii->i", &[&[3, 3]], &one).is_ok());
    /// ```
    Numpy(Vec<Vec<usize>>),
}

/// Options of the path search.
///
/// ```
/// use ttgt::plan::{PathOptions, PathStrategy};
/// let o = PathOptions { strategy: PathStrategy::Greedy, memory_limit: Some(1 << 20), ..Default::default() };
/// assert_eq!(PathOptions::default().memory_limit, None);
/// # let _ = o;
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct PathOptions {
    /// The search.
    pub strategy: PathStrategy,
    /// Most elements an intermediate may hold (numpy's `memory_limit`); the final result is
    /// exempt. Not applied to [`PathStrategy::Explicit`], [`PathStrategy::Numpy`] and
    /// [`PathStrategy::LeftToRight`].
    pub memory_limit: Option<usize>,
    /// Element type the steps are priced for by [`PathStrategy::Auto`]; `None`: `f64`.
    /// [`crate::einsum`] and its relatives set their operands' type.
    pub dtype: Option<DType>,
    /// Threads the steps are priced for; `None`: the calling pool's, as the steps run.
    pub threads: Option<usize>,
}

/// One pairwise contraction of a path.
///
/// ```
/// let p = ttgt::einsum_path("ij,jk,kl->il", &[&[200, 30], &[30, 40], &[40, 5]], &Default::default()).unwrap();
/// let s = &p.steps()[0];
/// assert_eq!(s.pair, (1, 2)); // numpy's notation: positions in the current list
/// assert_eq!(s.spec, "jk,kl->jl");
/// assert_eq!(s.flops, 2.0 * 30.0 * 40.0 * 5.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PathStep {
    /// Positions of the two operands in the current list (numpy's notation); the result is
    /// appended at the end.
    pub pair: (usize, usize),
    /// The step as a two-operand spec (letters; `...` dimensions get free letters).
    pub spec: String,
    /// FLOPs of the step (product of the extents of every index of both operands, doubled
    /// when an index is summed).
    pub flops: f64,
    /// Elements of the result.
    pub elements: f64,
    /// Number of distinct indices of both operands (the step's scaling, as numpy prints it).
    pub scaling: usize,
    /// Predicted seconds of the step (row-major operands and result), where the path was
    /// searched on predicted time.
    pub predicted_seconds: Option<f64>,
}

/// What a path searched on predicted time is compared with: the FLOP-optimal path (greedy
/// beyond [`AUTO_OPTIMAL_MAX_OPERANDS`] operands) with the FLOP search's intermediate orders,
/// and what the search cost.
///
/// ```
/// let shapes: [&[usize]; 3] = [&[60, 50, 40], &[40, 30], &[30, 50]];
/// let p = ttgt::einsum_path("abc,cd,db->a", &shapes, &Default::default()).unwrap();
/// let r = p.reference().unwrap();
/// assert!(p.predicted_seconds().unwrap() <= r.predicted_seconds * (1.0 + 1e-9));
/// assert!(r.steps_planned >= 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PathReference {
    /// The reference path in numpy's notation.
    pub pairs: Vec<(usize, usize)>,
    /// Its steps as two-operand specs.
    pub specs: Vec<String>,
    /// Its FLOPs.
    pub flops: f64,
    /// Its predicted seconds.
    pub predicted_seconds: f64,
    /// Distinct steps the search planned to price them.
    pub steps_planned: usize,
    /// Seconds the search took.
    pub planning_seconds: f64,
}

/// A contraction order for an einsum spec: the pairwise steps, their costs, and how the
/// path was found. Made by [`crate::einsum_path`]; [`crate::einsum_with`] runs one.
///
/// ```
/// let shapes: [&[usize]; 3] = [&[10, 100], &[100, 100], &[100, 10]];
/// let p = ttgt::einsum_path("ij,jk,kl->il", &shapes, &Default::default()).unwrap();
/// assert_eq!(p.pairs(), vec![(0, 1), (0, 1)]);
/// assert!(p.flops() < p.naive_flops());
/// println!("{p}");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ContractionPath {
    spec: String,
    shapes: Vec<Vec<usize>>,
    stretched: Vec<Vec<bool>>,
    strategy: &'static str,
    steps: Vec<PathStep>,
    naive_flops: f64,
    largest: f64,
    reference: Option<PathReference>,
    slicing: Option<Box<Slicing>>,
}

/// `f(label, stretched)` of every axis of every operand, the `None`s left out.
fn per_axis<R>(bound: &BoundSpec, f: impl Fn(Label, bool) -> Option<R>) -> Vec<Vec<R>> {
    bound
        .inputs()
        .iter()
        .zip(bound.stretched())
        .map(|(ls, st)| ls.iter().zip(st).filter_map(|(&l, &s)| f(l, s)).collect())
        .collect()
}

/// A letter for every label: a letter keeps its own, `...` dimensions take unused ones.
fn letters(bound: &BoundSpec) -> Result<BTreeMap<Label, char>> {
    let used: Vec<char> = bound
        .extents()
        .keys()
        .filter_map(|l| match l {
            Label::Letter(c) => Some(*c),
            Label::Broadcast(_) => None,
        })
        .collect();
    let mut free = ('a'..='z').chain('A'..='Z').filter(|c| !used.contains(c));
    let mut map = BTreeMap::new();
    for &l in bound.extents().keys() {
        let c = match l {
            Label::Letter(c) => c,
            Label::Broadcast(_) => free.next().ok_or_else(|| {
                Error::Unsupported(
                    "too many distinct indices for pairwise evaluation (more than 52)".into(),
                )
            })?,
        };
        map.insert(l, c);
    }
    Ok(map)
}

/// The index order the FLOP searches give each step's result: the larger operand's kept
/// indices first, in its order, then the other's (the larger one can then often be read in
/// place as the GEMM's row-major M x K or K x N matrix and the result written without a
/// transposition); the output's order for the last step.
fn flop_orders(
    labels: &[Vec<Label>],
    masks: &[u128],
    sets: &Sets,
    index: &BTreeMap<Label, usize>,
    output: &[Label],
    ssa: &Ssa,
) -> Vec<Vec<Label>> {
    let mask = |ls: &[Label]| ls.iter().fold(0u128, |m, l| m | 1 << index[l]);
    let mut tensors: Vec<Vec<Label>> = labels.to_vec();
    let mut live: Vec<(usize, u128)> = masks.iter().copied().enumerate().collect();
    let mut orders = Vec::with_capacity(ssa.len());
    for (s, &(x, y)) in ssa.iter().enumerate() {
        let (ge2, ge3) = multiplicity(&live);
        let keep = kept(live_mask(&live, x), live_mask(&live, y), sets.out, ge2, ge3);
        let out: Vec<Label> = if s + 1 == ssa.len() {
            output.to_vec()
        } else {
            let size = |t: &[Label]| sets.size(mask(t));
            let (first, second) = if size(&tensors[x]) >= size(&tensors[y]) {
                (x, y)
            } else {
                (y, x)
            };
            let mut v: Vec<Label> = Vec::new();
            for &l in tensors[first].iter().chain(&tensors[second]) {
                if keep & 1 << index[&l] != 0 && !v.contains(&l) {
                    v.push(l);
                }
            }
            v
        };
        live.retain(|&(id, _)| id != x && id != y);
        live.push((masks.len() + s, keep));
        tensors.push(out.clone());
        orders.push(out);
    }
    orders
}

/// What the walk along a path needs to write its steps.
struct Walk<'a> {
    labels: &'a [Vec<Label>],
    masks: &'a [u128],
    sets: &'a Sets,
    index: &'a BTreeMap<Label, usize>,
    letter: &'a BTreeMap<Label, char>,
    reduction: &'a dyn Fn(usize) -> f64,
}

impl Walk<'_> {
    /// The steps of `ssa` (pairs in numpy's notation in `positions`, results in `orders`)
    /// and the elements of the largest intermediate.
    fn steps(
        &self,
        ssa: &Ssa,
        positions: &[(usize, usize)],
        orders: &[Vec<Label>],
    ) -> (Vec<PathStep>, f64) {
        let mask = |ls: &[Label]| ls.iter().fold(0u128, |m, l| m | 1 << self.index[l]);
        let text = |ls: &[Label]| ls.iter().map(|l| self.letter[l]).collect::<String>();
        let n = self.labels.len();
        let mut tensors: Vec<Vec<Label>> = self.labels.to_vec();
        let mut live: Vec<(usize, u128)> = self.masks.iter().copied().enumerate().collect();
        let mut steps = Vec::with_capacity(ssa.len());
        let mut largest: f64 = 0.0;
        for (s, ((&(x, y), &pair), out)) in ssa.iter().zip(positions).zip(orders).enumerate() {
            let (mx, my) = (live_mask(&live, x), live_mask(&live, y));
            let keep = mask(out);
            let elements = self.sets.size(keep);
            if s + 1 < ssa.len() {
                largest = largest.max(elements);
            }
            steps.push(PathStep {
                pair,
                spec: format!("{},{}->{}", text(&tensors[x]), text(&tensors[y]), text(out)),
                flops: (self.reduction)(x) + (self.reduction)(y) + self.sets.flops(mx, my, keep),
                elements,
                scaling: (mx | my).count_ones() as usize,
                predicted_seconds: None,
            });
            live.retain(|&(id, _)| id != x && id != y);
            live.push((n + s, keep));
            tensors.push(out.clone());
        }
        (steps, largest)
    }
}

impl ContractionPath {
    /// Finds a contraction order for a bound spec.
    ///
    /// ```
    /// use ttgt::{einsum::parse, plan::{ContractionPath, PathOptions}};
    /// let b = parse("ab,bc,cd").unwrap().bind(&[&[4, 5], &[5, 6], &[6, 7]]).unwrap();
    /// let p = ContractionPath::new(&b, &PathOptions::default()).unwrap();
    /// assert_eq!(p.steps().len(), 2);
    /// ```
    pub fn new(bound: &BoundSpec, options: &PathOptions) -> Result<Self> {
        // Labels as the path sees them: stretched axes dropped, repeats kept.
        let labels = per_axis(bound, |l, s| (!s).then_some(l));
        let n = labels.len();
        let index: BTreeMap<Label, usize> = bound
            .extents()
            .keys()
            .enumerate()
            .map(|(k, &l)| (l, k))
            .collect();
        if index.len() > 128 {
            return Err(Error::Unsupported(format!(
                "{} distinct indices: path search handles at most 128",
                index.len()
            )));
        }
        let mask = |ls: &[Label]| ls.iter().fold(0u128, |m, l| m | 1 << index[l]);
        let sets = Sets {
            ext: bound.extents().values().map(|&e| e as f64).collect(),
            out: mask(bound.output()),
        };
        let full: Vec<u128> = labels.iter().map(|ls| mask(ls)).collect();
        // Each operand without the indices only it holds (summed before its first step).
        let masks: Vec<u128> = (0..n)
            .map(|k| {
                let others = full
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != k)
                    .fold(sets.out, |m, (_, &x)| m | x);
                full[k] & others
            })
            .collect();
        let reduction = |id: usize| {
            if id < n && masks[id] != full[id] {
                sets.size(full[id])
            } else {
                0.0
            }
        };
        let limit = options.memory_limit.map(|l| l as f64);
        let auto_optimal = n <= AUTO_OPTIMAL_MAX_OPERANDS;
        // the default search starts from the FLOP search's path, found once here
        let auto_flop = (options.strategy == PathStrategy::Auto && n >= 3).then(|| {
            if auto_optimal {
                ("optimal", optimal(&masks, &sets, limit))
            } else {
                ("greedy", greedy(&masks, &sets, limit))
            }
        });
        // no order keeps the intermediates within the limit: loop over some indices
        if let Some((_, Err(_))) = &auto_flop {
            if limit.is_some() {
                if let Some(p) = super::slicing::sliced_path(bound, options)? {
                    return Ok(p);
                }
            }
        }
        let (strategy, mut ssa) = match &options.strategy {
            PathStrategy::Explicit(p) => ("explicit", from_positions(p, n)?),
            PathStrategy::Numpy(p) => ("explicit", from_numpy(p, n)?),
            _ if n <= 2 => (
                "single step",
                from_positions(&[(0, 1)][..n.saturating_sub(1)], n)?,
            ),
            PathStrategy::LeftToRight => {
                let mut ssa = vec![(0, 1)];
                ssa.extend((2..n).map(|k| (n + k - 2, k)));
                ("left to right", ssa)
            }
            PathStrategy::Optimal if n > OPTIMAL_MAX_OPERANDS => {
                return Err(Error::Unsupported(format!(
                    "the optimal path search takes at most {OPTIMAL_MAX_OPERANDS} operands \
                     ({n} given): use the greedy search"
                )))
            }
            PathStrategy::Optimal => ("optimal", optimal(&masks, &sets, limit)?),
            PathStrategy::Auto => match auto_flop {
                Some((name, found)) => (name, found?),
                None => ("greedy", greedy(&masks, &sets, limit)?),
            },
            PathStrategy::Greedy => ("greedy", greedy(&masks, &sets, limit)?),
        };
        let letter = letters(bound)?;
        let mut orders = flop_orders(&labels, &masks, &sets, &index, bound.output(), &ssa);
        let walk = Walk {
            labels: &labels,
            masks: &masks,
            sets: &sets,
            index: &index,
            letter: &letter,
            reduction: &reduction,
        };
        let mut strategy = strategy;
        let mut predicted: Option<Vec<f64>> = None;
        let mut reference = None;
        if options.strategy == PathStrategy::Auto && n >= 3 {
            let bits: Vec<f64> = sets.ext.clone();
            let net = Net {
                labels: &labels,
                bit: &index,
                ext: &bits,
                letter: &letter,
                masks: &masks,
                output: bound.output(),
                out_mask: sets.out,
            };
            let mut pricer = Pricer::new(options.dtype.unwrap_or(DType::F64), options.threads);
            // beyond the subset search's reach: randomised greedy orders to price too
            let mut restarts: Vec<Tree> = Vec::new();
            if n > super::TIME_DP_MAX_OPERANDS {
                for seed in 1..=RANDOM_GREEDY_RESTARTS as u64 {
                    let Ok(t) = random_greedy(&masks, &sets, limit, seed) else {
                        continue;
                    };
                    if t != ssa && restarts.iter().all(|r| r.ssa != t) {
                        let o = flop_orders(&labels, &masks, &sets, &index, bound.output(), &t);
                        restarts.push(Tree { ssa: t, orders: o });
                    }
                }
            }
            let found = path_time::search(
                &net,
                Tree {
                    ssa: ssa.clone(),
                    orders: orders.clone(),
                },
                restarts,
                &mut pricer,
                limit,
            );
            let mut flop_ssa = ssa.clone();
            let flop_positions = to_positions(&mut flop_ssa, n);
            let (flop_steps, _) = walk.steps(&flop_ssa, &flop_positions, &orders);
            reference = Some(PathReference {
                pairs: flop_positions,
                specs: flop_steps.iter().map(|s| s.spec.clone()).collect(),
                flops: flop_steps.iter().map(|s| s.flops).sum(),
                predicted_seconds: found.reference.total(),
                steps_planned: found.planned,
                planning_seconds: found.seconds,
            });
            strategy = found.how;
            ssa = found.chosen.tree.ssa;
            orders = found.chosen.tree.orders;
            predicted = Some(found.chosen.seconds);
        }
        let positions = to_positions(&mut ssa, n);
        let (mut steps, largest) = walk.steps(&ssa, &positions, &orders);
        if let Some(p) = predicted {
            for (step, s) in steps.iter_mut().zip(p) {
                step.predicted_seconds = Some(s);
            }
        }
        // numpy's naive count: every index at once, one multiply per extra operand, one more
        // add when something is summed.
        let all: u128 = full.iter().fold(0, |m, &x| m | x);
        let factor = (n.max(2) - 1) as f64 + if all & !sets.out != 0 { 1.0 } else { 0.0 };
        let shapes = per_axis(bound, |l, s| Some(if s { 1 } else { bound.extent(l) }));
        Ok(Self {
            spec: bound.spec().to_string(),
            shapes,
            stretched: bound.stretched().to_vec(),
            strategy,
            steps,
            naive_flops: sets.size(all) * factor,
            largest,
            reference,
            slicing: None,
        })
    }

    /// A path that loops over `slicing`'s indices, running its inner path once per slice.
    pub(crate) fn sliced(bound: &BoundSpec, slicing: Slicing) -> Self {
        let inner = &slicing.inner;
        let count = slicing.count() as f64;
        ContractionPath {
            spec: bound.spec().to_string(),
            shapes: per_axis(bound, |l, s| Some(if s { 1 } else { bound.extent(l) })),
            stretched: bound.stretched().to_vec(),
            strategy: inner.strategy,
            steps: inner.steps.clone(),
            naive_flops: inner.naive_flops * count,
            largest: inner.largest,
            // the FLOP-optimal path of the sliced network, over every slice
            reference: inner.reference.clone().map(|r| PathReference {
                flops: r.flops * count,
                predicted_seconds: r.predicted_seconds * count,
                ..r
            }),
            slicing: Some(Box::new(slicing)),
        }
    }

    /// The indices the path loops over to keep its intermediates within the memory limit,
    /// and the path of one slice; `None` for a path without slicing. The steps, FLOPs and
    /// predicted time of a sliced path count every slice ([`ContractionPath::steps`] are one
    /// slice's).
    ///
    /// ```
    /// use ttgt::plan::PathOptions;
    /// let shapes: [&[usize]; 3] = [&[8, 30], &[30, 30], &[30, 8]];
    /// let o = PathOptions { memory_limit: Some(100), ..Default::default() };
    /// let p = ttgt::einsum_path("ij,jk,kl->il", &shapes, &o).unwrap();
    /// let s = p.slicing().unwrap();
    /// assert!(p.largest_intermediate() <= 100.0 && s.count() > 1);
    /// ```
    pub fn slicing(&self) -> Option<&Slicing> {
        self.slicing.as_deref()
    }

    /// Slices the path runs (1 without slicing).
    fn slices(&self) -> f64 {
        self.slicing.as_ref().map_or(1.0, |s| s.count() as f64)
    }

    /// The spec the path was made for (output explicit).
    ///
    /// ```
    /// let p = ttgt::einsum_path("ij,jk,kl", &[&[2, 3], &[3, 4], &[4, 5]], &Default::default()).unwrap();
    /// assert_eq!(p.spec(), "ij,jk,kl->il");
    /// ```
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// The operand shapes the path was made for.
    ///
    /// ```
    /// let p = ttgt::einsum_path("ij,jk,kl", &[&[2, 3], &[3, 4], &[4, 5]], &Default::default()).unwrap();
    /// assert_eq!(p.shapes()[2], vec![4, 5]);
    /// ```
    pub fn shapes(&self) -> &[Vec<usize>] {
        &self.shapes
    }

    /// Per operand and axis: whether the axis has extent 1 and is stretched by broadcasting
    /// (a `...` dimension or a letter larger in another operand; dropped before the first
    /// step).
    ///
    /// ```
    /// let p = ttgt::einsum_path("...i,...i,i", &[&[1, 3], &[4, 3], &[3]], &Default::default()).unwrap();
    /// assert_eq!(p.stretched()[0], vec![true, false]);
    /// ```
    pub fn stretched(&self) -> &[Vec<bool>] {
        &self.stretched
    }

    /// The pairwise steps, in order.
    ///
    /// ```
    /// let p = ttgt::einsum_path("i,i,i", &[&[3], &[3], &[3]], &Default::default()).unwrap();
    /// assert_eq!(p.steps().len(), 2);
    /// ```
    pub fn steps(&self) -> &[PathStep] {
        &self.steps
    }

    /// The path in numpy's notation (`numpy.einsum_path(...)[0][1:]`).
    ///
    /// ```
    /// let p = ttgt::einsum_path("ab,cd,bc->ad", &[&[9, 9], &[9, 9], &[9, 9]], &Default::default()).unwrap();
    /// assert_eq!(p.pairs().len(), 2);
    /// ```
    pub fn pairs(&self) -> Vec<(usize, usize)> {
        self.steps.iter().map(|s| s.pair).collect()
    }

    /// Total FLOPs of the path.
    ///
    /// ```
    /// let p = ttgt::einsum_path("ij,jk,kl", &[&[2, 3], &[3, 4], &[4, 5]], &Default::default()).unwrap();
    /// assert_eq!(p.flops(), p.steps().iter().map(|s| s.flops).sum::<f64>());
    /// ```
    pub fn flops(&self) -> f64 {
        self.steps.iter().map(|s| s.flops).sum::<f64>() * self.slices()
    }

    /// FLOPs of evaluating the spec in one loop nest over every index (numpy's "naive" count).
    ///
    /// ```
    /// let p = ttgt::einsum_path("ij,jk,kl", &[&[2, 3], &[3, 4], &[4, 5]], &Default::default()).unwrap();
    /// assert_eq!(p.naive_flops(), 3.0 * 120.0);
    /// ```
    pub fn naive_flops(&self) -> f64 {
        self.naive_flops
    }

    /// Elements of the largest intermediate (the final result not counted).
    ///
    /// ```
    /// let p = ttgt::einsum_path("ij,jk,kl", &[&[2, 3], &[3, 4], &[4, 5]], &Default::default()).unwrap();
    /// assert_eq!(p.largest_intermediate(), 8.0); // i x k = 2 x 4
    /// ```
    pub fn largest_intermediate(&self) -> f64 {
        self.largest
    }

    /// Predicted seconds of the whole path, where it was searched on predicted time
    /// ([`PathStrategy::Auto`] with three or more operands).
    ///
    /// ```
    /// let s: [&[usize]; 3] = [&[20, 30], &[30, 40], &[40, 50]];
    /// let p = ttgt::einsum_path("ij,jk,kl->il", &s, &Default::default()).unwrap();
    /// assert!(p.predicted_seconds().unwrap() > 0.0);
    /// let o = ttgt::plan::PathOptions { strategy: ttgt::plan::PathStrategy::Optimal, ..Default::default() };
    /// assert_eq!(ttgt::einsum_path("ij,jk,kl->il", &s, &o).unwrap().predicted_seconds(), None);
    /// ```
    pub fn predicted_seconds(&self) -> Option<f64> {
        let one: Option<f64> = self.steps.iter().map(|s| s.predicted_seconds).sum();
        one.map(|t| t * self.slices())
    }

    /// The FLOP-optimal path this one was compared with, where it was searched on predicted
    /// time (see [`PathReference`]).
    ///
    /// ```
    /// let s: [&[usize]; 3] = [&[20, 30], &[30, 40], &[40, 50]];
    /// let p = ttgt::einsum_path("ij,jk,kl->il", &s, &Default::default()).unwrap();
    /// assert!(p.reference().unwrap().flops <= p.flops());
    /// ```
    pub fn reference(&self) -> Option<&PathReference> {
        self.reference.as_ref()
    }

    /// Which search made the path: "predicted time (...)" (how far the search went),
    /// "optimal", "greedy", "left to right", "explicit" or "single step" (one or two
    /// operands).
    ///
    /// ```
    /// let p = ttgt::einsum_path("ij,jk", &[&[2, 3], &[3, 4]], &Default::default()).unwrap();
    /// assert_eq!(p.strategy(), "single step");
    /// ```
    pub fn strategy(&self) -> &'static str {
        self.strategy
    }
}

impl fmt::Display for ContractionPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let speedup = if self.flops() > 0.0 {
            self.naive_flops / self.flops()
        } else {
            1.0
        };
        writeln!(f, "path for {} ({}):", self.spec, self.strategy)?;
        if let Some(s) = &self.slicing {
            let idx: Vec<String> = s
                .letters
                .iter()
                .zip(&s.extents)
                .map(|(c, e)| format!("{c}={e}"))
                .collect();
            writeln!(
                f,
                "  sliced over {} ({} slices of {}, within the memory limit); steps of one slice:",
                idx.join(", "),
                s.count(),
                s.inner.spec
            )?;
        }
        writeln!(
            f,
            "  FLOPs {:.4e} (one loop nest: {:.4e}, {:.1}x more); largest intermediate {:.0} elements",
            self.flops(),
            self.naive_flops,
            speedup,
            self.largest
        )?;
        for (k, s) in self.steps.iter().enumerate() {
            write!(
                f,
                "  step {k}: {:?} {:<24} {} indices, {:.3e} FLOPs, result {:.0} elements",
                s.pair, s.spec, s.scaling, s.flops, s.elements
            )?;
            match s.predicted_seconds {
                Some(t) => writeln!(f, ", predicted {}", seconds_text(t))?,
                None => writeln!(f)?,
            }
        }
        if let (Some(t), Some(r)) = (self.predicted_seconds(), &self.reference) {
            writeln!(
                f,
                "  predicted {}; the FLOP-optimal path {:?}: {:.4e} FLOPs, predicted {} ({:.2}x); \
                 search: {} steps planned in {}",
                seconds_text(t),
                r.pairs,
                r.flops,
                seconds_text(r.predicted_seconds),
                r.predicted_seconds / t,
                r.steps_planned,
                seconds_text(r.planning_seconds)
            )?;
        }
        Ok(())
    }
}

/// Seconds in the unit that suits them (`12.3 us`, `4.56 ms`, `1.23 s`).
fn seconds_text(t: f64) -> String {
    if t < 1e-3 {
        format!("{:.1} us", t * 1e6)
    } else if t < 1.0 {
        format!("{:.2} ms", t * 1e3)
    } else {
        format!("{t:.2} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::einsum::parse;

    fn path(spec: &str, shapes: &[&[usize]], strategy: PathStrategy) -> ContractionPath {
        let b = parse(spec).unwrap().bind(shapes).unwrap();
        let o = PathOptions {
            strategy,
            ..Default::default()
        };
        ContractionPath::new(&b, &o).unwrap()
    }

    #[test]
    fn positions_round_trip() {
        let mut ssa = vec![(3, 1), (0, 4), (5, 2)];
        let pos = to_positions(&mut ssa, 4);
        assert_eq!(pos, vec![(1, 3), (0, 2), (0, 1)]);
        assert_eq!(ssa, vec![(1, 3), (0, 4), (2, 5)]);
        assert_eq!(from_positions(&pos, 4).unwrap(), ssa);
    }

    #[test]
    fn chain_takes_the_small_side_first() {
        // (AB)C costs 2*10*100*100 + 2*10*100*10, A(BC) 2*100*100*10 + 2*10*100*10: equal
        // here, so make B·C clearly cheaper.
        let p = path(
            "ij,jk,kl->il",
            &[&[100, 100], &[100, 100], &[100, 2]],
            PathStrategy::Optimal,
        );
        assert_eq!(p.steps()[0].spec, "jk,kl->jl");
        assert_eq!(p.flops(), 2.0 * 100.0 * 100.0 * 2.0 * 2.0);
        let l = path(
            "ij,jk,kl->il",
            &[&[100, 100], &[100, 100], &[100, 2]],
            PathStrategy::LeftToRight,
        );
        assert_eq!(l.pairs(), vec![(0, 1), (0, 1)]);
        assert_eq!(l.flops(), 2.0 * 1e6 + 2.0 * 100.0 * 100.0 * 2.0);
    }

    #[test]
    fn broadcast_axes_are_dropped() {
        // The stretched axis of extent 1 does not count.
        let p = path(
            "...i,...i,i->...",
            &[&[1, 5], &[7, 5], &[5]],
            PathStrategy::Auto,
        );
        assert_eq!(p.steps().len(), 2);
        assert!(p.steps().iter().all(|s| s.flops <= 2.0 * 35.0));
    }
}

//! The path search on predicted time: contraction orders and the index order of every
//! intermediate chosen together, each pairwise step priced by the two-operand planner (its
//! packs, GEMM calls and write-backs, on this machine's models), so that a path whose
//! intermediates come out of one GEMM already laid out for the next can win over one with
//! fewer FLOPs.
//!
//! The search, within a planning budget:
//! 1. The FLOP-optimal tree (or opt_einsum's greedy tree beyond
//!    [`AUTO_OPTIMAL_MAX_OPERANDS`](super::AUTO_OPTIMAL_MAX_OPERANDS) operands) with the
//!    FLOP search's own intermediate orders, priced step by step: the reference the
//!    chosen path is reported against.
//! 2. Each intermediate's order refined over the tree: orders that its producing step writes
//!    for free (its operands' kept indices, either operand first) and orders its consumer
//!    reads best (the indices it shares with its partner in the partner's order, before or
//!    after the rest in the consumer's result order), by coordinate descent on the producing
//!    and consuming steps' predicted time.
//! 3. Beyond [`TIME_DP_MAX_OPERANDS`] operands, the trees of randomised greedy restarts
//!    (opt_einsum's random-greedy: each step takes the pair of rank k in the greedy order with
//!    probability proportional to e^-k), priced, cheapest first refined as in 2.
//! 4. Up to [`TIME_DP_MAX_OPERANDS`] operands, dynamic programming over subsets on predicted
//!    time, keeping the [`TIME_DP_ORDERS`] cheapest orders of each intermediate, with a
//!    branch-and-bound cut: a split is priced only if its FLOPs at the machine's best GEMM
//!    rate could still beat the subset's best time. Its tree is refined as in 2.
//!
//! Networks predicted under [`TIME_SEARCH_MIN_PATH_SECONDS`] keep the reference.
//! Planning stops early once it has spent [`TIME_SEARCH_SHARE`] of the reference path's
//! predicted time (and at least [`TIME_SEARCH_MIN_SECONDS`]); the cheapest path found by
//! then is taken if it is predicted at least [`TIME_SWITCH_MARGIN`] faster than the
//! reference, else the reference. Steps are priced as their calls plan them (row-major intermediates, the
//! same thread rule), and a priced step is not priced again.

use std::collections::HashMap;
use std::time::Instant;

use crate::einsum::Label;
use crate::plan::PlanOptions;
use crate::tensor::{DType, Layout};

/// Most operands for which the search runs the dynamic programming over subsets.
pub const TIME_DP_MAX_OPERANDS: usize = 8;

/// Orders of an intermediate the dynamic programming keeps per subset of operands.
pub const TIME_DP_ORDERS: usize = 2;

/// Share of the reference path's predicted time the search may spend planning.
/// Rationale: a path planned for one evaluation costs at most a tenth more than the
/// reference's run; repeated evaluations find it in the path cache.
pub const TIME_SEARCH_SHARE: f64 = 0.1;

/// Planning time the search may always spend, however small the network.
pub const TIME_SEARCH_MIN_SECONDS: f64 = 2e-3;

/// Least predicted gain for which the search leaves the reference path: paths predicted
/// within it of the reference are inside the model's error between near-equal plans.
/// Rationale: on the network table, paths predicted 1 % faster ran 3 % slower or 3 % faster
/// from run to run; those predicted 2 % faster and more ran 1.2-1.8x faster (docs/TUNING.md).
pub const TIME_SWITCH_MARGIN: f64 = 0.015;

/// Networks whose reference path is predicted below this are not searched: what a search
/// could save is less than what it costs (each step planned takes 30-150 us).
pub const TIME_SEARCH_MIN_PATH_SECONDS: f64 = 1e-4;

/// Sweeps of the order refinement over a tree.
const REFINE_SWEEPS: usize = 3;

/// What the search knows of the network: operand labels (stretched axes dropped), the bit of
/// each label, extents by bit, letters, the reduced operand masks and the output.
pub(crate) struct Net<'a> {
    pub labels: &'a [Vec<Label>],
    pub bit: &'a std::collections::BTreeMap<Label, usize>,
    pub ext: &'a [f64],
    pub letter: &'a std::collections::BTreeMap<Label, char>,
    pub masks: &'a [u128],
    pub output: &'a [Label],
    pub out_mask: u128,
}

impl Net<'_> {
    fn mask(&self, ls: &[Label]) -> u128 {
        ls.iter().fold(0u128, |m, l| m | 1 << self.bit[l])
    }

    fn size(&self, mut m: u128) -> f64 {
        let mut p = 1.0;
        while m != 0 {
            p *= self.ext[m.trailing_zeros() as usize];
            m &= m - 1;
        }
        p
    }

    fn shape(&self, ls: &[Label]) -> Vec<usize> {
        ls.iter().map(|l| self.ext[self.bit[l]] as usize).collect()
    }

    fn text(&self, ls: &[Label]) -> String {
        ls.iter().map(|l| self.letter[l]).collect()
    }
}

/// A step's operands' and result's index orders.
type StepKey = (Vec<Label>, Vec<Label>, Vec<Label>);

/// Prices pairwise steps with the two-operand planner, each distinct step once.
pub(crate) struct Pricer {
    dtype: DType,
    options: PlanOptions,
    seen: HashMap<StepKey, f64>,
    /// Steps planned (cache misses).
    pub planned: usize,
    started: Instant,
    budget: f64,
    /// Whether a stage stopped early on the budget.
    cut: std::cell::Cell<bool>,
}

impl Pricer {
    pub fn new(dtype: DType, threads: Option<usize>) -> Self {
        Pricer {
            dtype,
            options: PlanOptions {
                threads,
                ..Default::default()
            },
            seen: HashMap::new(),
            planned: 0,
            started: Instant::now(),
            budget: f64::INFINITY,
            cut: std::cell::Cell::new(false),
        }
    }

    /// Seconds spent since the pricer was made.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn over_budget(&self) -> bool {
        let over = self.elapsed() > self.budget;
        if over {
            self.cut.set(true);
        }
        over
    }

    /// Predicted seconds of `x, y -> out` (row-major operands and result); infinite when
    /// the step cannot be planned.
    fn price(&mut self, net: &Net<'_>, x: &[Label], y: &[Label], out: &[Label]) -> f64 {
        let key = (x.to_vec(), y.to_vec(), out.to_vec());
        if let Some(&s) = self.seen.get(&key) {
            return s;
        }
        self.planned += 1;
        let spec = format!("{},{}->{}", net.text(x), net.text(y), net.text(out));
        let layout = |ls: &[Label]| Layout::row_major(&net.shape(ls));
        let s = match (layout(x), layout(y), layout(out)) {
            (Ok(a), Ok(b), Ok(c)) => {
                super::cache::plan_as_called(&spec, &[a, b], &c, self.dtype, &self.options)
                    .map_or(f64::INFINITY, |p| p.predicted_seconds())
            }
            _ => f64::INFINITY,
        };
        self.seen.insert(key, s);
        s
    }
}

/// A tree of pairwise steps in single-assignment ids (operands 0..n, step s's result n + s)
/// with each step's result order (the last one is the output's).
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    pub ssa: Vec<(usize, usize)>,
    pub orders: Vec<Vec<Label>>,
}

/// A priced tree: the predicted seconds of each step.
#[derive(Clone, Debug)]
pub(crate) struct Priced {
    pub tree: Tree,
    pub seconds: Vec<f64>,
}

impl Priced {
    pub fn total(&self) -> f64 {
        self.seconds.iter().sum()
    }
}

/// The labels of node `id` of `tree`.
fn node<'t>(net: &'t Net<'_>, tree: &'t Tree, id: usize) -> &'t [Label] {
    let n = net.labels.len();
    if id < n {
        &net.labels[id]
    } else {
        &tree.orders[id - n]
    }
}

/// Predicted seconds of every step of `tree`.
pub(crate) fn price_tree(net: &Net<'_>, tree: Tree, pricer: &mut Pricer) -> Priced {
    let seconds = (0..tree.ssa.len())
        .map(|s| step_price(net, &tree, s, pricer))
        .collect();
    Priced { tree, seconds }
}

fn step_price(net: &Net<'_>, tree: &Tree, s: usize, pricer: &mut Pricer) -> f64 {
    let (x, y) = tree.ssa[s];
    pricer.price(net, node(net, tree, x), node(net, tree, y), &tree.orders[s])
}

/// `keep`'s labels in the order they come in `first`, then in `second`.
pub(crate) fn concat_kept(
    net: &Net<'_>,
    first: &[Label],
    second: &[Label],
    keep: u128,
) -> Vec<Label> {
    let mut v: Vec<Label> = Vec::new();
    for &l in first.iter().chain(second) {
        if keep & 1 << net.bit[&l] != 0 && !v.contains(&l) {
            v.push(l);
        }
    }
    v
}

/// Orders worth trying for the result of step `s` of `tree`: what its step writes for free
/// (either operand's indices first) and what its consumer reads best (the indices shared
/// with the consumer's other operand, in that operand's order, before or after the rest in
/// the consumer's result order).
fn order_choices(net: &Net<'_>, tree: &Tree, s: usize) -> Vec<Vec<Label>> {
    let n = net.labels.len();
    let id = n + s;
    let current = tree.orders[s].clone();
    let keep = net.mask(&current);
    let (x, y) = tree.ssa[s];
    let (lx, ly) = (node(net, tree, x), node(net, tree, y));
    let mut v = vec![
        current.clone(),
        concat_kept(net, lx, ly, keep),
        concat_kept(net, ly, lx, keep),
    ];
    if let Some(p) = tree.ssa.iter().position(|&(a, b)| a == id || b == id) {
        let (a, b) = tree.ssa[p];
        let partner = node(net, tree, if a == id { b } else { a });
        let pm = net.mask(partner);
        let shared = concat_kept(net, partner, &[], keep & pm);
        let rest = concat_kept(net, &tree.orders[p], &current, keep & !pm);
        v.push(shared.iter().chain(&rest).copied().collect());
        v.push(rest.iter().chain(&shared).copied().collect());
    }
    let mut out: Vec<Vec<Label>> = Vec::new();
    for o in v {
        if !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// Coordinate descent over the intermediates' orders: each in turn takes the choice that
/// makes its producing and consuming steps cheapest, until a sweep changes nothing.
pub(crate) fn refine(net: &Net<'_>, mut p: Priced, pricer: &mut Pricer) -> Priced {
    let n = net.labels.len();
    let steps = p.tree.ssa.len();
    for _ in 0..REFINE_SWEEPS {
        let mut changed = false;
        for s in 0..steps.saturating_sub(1) {
            let id = n + s;
            let Some(c) = p.tree.ssa.iter().position(|&(a, b)| a == id || b == id) else {
                continue;
            };
            let mut best = (p.seconds[s] + p.seconds[c], p.tree.orders[s].clone());
            for o in order_choices(net, &p.tree, s) {
                if pricer.over_budget() {
                    return p;
                }
                let mut t = p.tree.clone();
                t.orders[s] = o.clone();
                let cost = step_price(net, &t, s, pricer) + step_price(net, &t, c, pricer);
                if cost < best.0 * (1.0 - 1e-9) {
                    best = (cost, o);
                }
            }
            if best.1 != p.tree.orders[s] {
                p.tree.orders[s] = best.1;
                p.seconds[s] = step_price(net, &p.tree, s, pricer);
                p.seconds[c] = step_price(net, &p.tree, c, pricer);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    p
}

/// One way to form a subset's intermediate: its cost, order and the children's choices.
#[derive(Clone)]
struct Alt {
    cost: f64,
    order: Vec<Label>,
    from: Option<(usize, usize, usize, usize)>,
}

/// Dynamic programming over subsets on predicted time (see the module text), keeping `keep`
/// orders per subset; `None` when the budget runs out first or no order fits the memory
/// limit. `per_flop`: the fastest seconds per FLOP a step can take (the branch-and-bound's
/// lower bound).
fn dp(
    net: &Net<'_>,
    pricer: &mut Pricer,
    limit: Option<f64>,
    per_flop: f64,
    keep: usize,
) -> Option<Tree> {
    let n = net.labels.len();
    let full: usize = (1 << n) - 1;
    let mut union = vec![0u128; 1 << n];
    for s in 1..=full {
        union[s] = union[s & (s - 1)] | net.masks[s.trailing_zeros() as usize];
    }
    let lab = |s: usize| union[s] & (union[full ^ s] | net.out_mask);
    let mut alts: Vec<Vec<Alt>> = vec![Vec::new(); 1 << n];
    for i in 0..n {
        alts[1 << i] = vec![Alt {
            cost: 0.0,
            order: Vec::new(),
            from: None,
        }];
    }
    let order_of = |alts: &[Vec<Alt>], s: usize, k: usize| -> Vec<Label> {
        if s.count_ones() == 1 {
            net.labels[s.trailing_zeros() as usize].clone()
        } else {
            alts[s][k].order.clone()
        }
    };
    // subsets by size, so that every split's parts are done first
    let mut subsets: Vec<usize> = (1..=full).filter(|s| s.count_ones() >= 2).collect();
    subsets.sort_by_key(|s| s.count_ones());
    for s in subsets {
        let ls = lab(s);
        if s != full && limit.is_some_and(|l| net.size(ls) > l) {
            continue;
        }
        // splits (t, s ^ t), t holding s's lowest operand; connected ones unless none is
        let low = s & s.wrapping_neg();
        let rest = s ^ low;
        let mut splits: Vec<(f64, usize, usize)> = Vec::new();
        for outer in [false, true] {
            let mut sub = rest;
            loop {
                let t = sub | low;
                let u = s ^ t;
                if u != 0 && !alts[t].is_empty() && !alts[u].is_empty() {
                    let (mt, mu) = (lab(t), lab(u));
                    if (mt & mu != 0) != outer {
                        let flops =
                            net.size(mt | mu) * if (mt | mu) & !ls != 0 { 2.0 } else { 1.0 };
                        let bound = alts[t][0].cost + alts[u][0].cost + flops * per_flop;
                        splits.push((bound, t, u));
                    }
                }
                if sub == 0 {
                    break;
                }
                sub = (sub - 1) & rest;
            }
            if !splits.is_empty() {
                break;
            }
        }
        splits.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut found: Vec<Alt> = Vec::new();
        for (bound, t, u) in splits {
            let worst = if found.len() >= keep {
                found[keep - 1].cost
            } else {
                f64::INFINITY
            };
            if bound >= worst {
                break;
            }
            for a in 0..alts[t].len() {
                for b in 0..alts[u].len() {
                    if pricer.over_budget() {
                        return None;
                    }
                    let (ot, ou) = (order_of(&alts, t, a), order_of(&alts, u, b));
                    let base = alts[t][a].cost + alts[u][b].cost;
                    let orders = if s == full {
                        vec![net.output.to_vec()]
                    } else {
                        vec![
                            concat_kept(net, &ot, &ou, ls),
                            concat_kept(net, &ou, &ot, ls),
                        ]
                    };
                    for o in orders {
                        let cost = base + pricer.price(net, &ot, &ou, &o);
                        if !cost.is_finite() {
                            continue;
                        }
                        match found.iter_mut().find(|x| x.order == o) {
                            Some(x) if x.cost <= cost => {}
                            Some(x) => {
                                x.cost = cost;
                                x.from = Some((t, a, u, b));
                            }
                            None => found.push(Alt {
                                cost,
                                order: o,
                                from: Some((t, a, u, b)),
                            }),
                        }
                        found.sort_by(|x, y| x.cost.total_cmp(&y.cost));
                        found.truncate(keep);
                    }
                }
            }
        }
        alts[s] = found;
    }
    if alts[full].is_empty() {
        return None;
    }
    // post-order walk of the chosen alternatives
    fn walk(s: usize, k: usize, alts: &[Vec<Alt>], tree: &mut Tree, n: usize) -> usize {
        if s.count_ones() == 1 {
            return s.trailing_zeros() as usize;
        }
        let alt = &alts[s][k];
        let (t, a, u, b) = alt.from.unwrap_or_default();
        let x = walk(t, a, alts, tree, n);
        let y = walk(u, b, alts, tree, n);
        tree.ssa.push((x, y));
        tree.orders.push(alt.order.clone());
        n + tree.ssa.len() - 1
    }
    let mut tree = Tree {
        ssa: Vec::new(),
        orders: Vec::new(),
    };
    walk(full, 0, &alts, &mut tree, n);
    Some(tree)
}

/// The search's result: the chosen tree priced, the reference tree priced, and what the
/// search cost.
pub(crate) struct Searched {
    pub chosen: Priced,
    pub reference: Priced,
    pub how: &'static str,
    pub planned: usize,
    pub seconds: f64,
}

/// Runs the search of the module text from `reference` (the FLOP search's tree and orders);
/// `restarts` are further trees (randomised greedy ones) priced and refined in turn while the
/// budget lasts.
pub(crate) fn search(
    net: &Net<'_>,
    reference: Tree,
    restarts: Vec<Tree>,
    pricer: &mut Pricer,
    limit: Option<f64>,
) -> Searched {
    let reference = price_tree(net, reference, pricer);
    if reference.total() < TIME_SEARCH_MIN_PATH_SECONDS {
        return Searched {
            chosen: reference.clone(),
            reference,
            how: "predicted time (the FLOP-optimal path: too small to search)",
            planned: pricer.planned,
            seconds: pricer.elapsed(),
        };
    }
    // the clock starts after the reference's pricing, which may include the first use's
    // probe of the machine
    pricer.budget =
        pricer.elapsed() + (TIME_SEARCH_SHARE * reference.total()).max(TIME_SEARCH_MIN_SECONDS);
    let mut chosen = refine(net, reference.clone(), pricer);
    let mut how = "predicted time (orders refined)";
    if net.labels.len() <= TIME_DP_MAX_OPERANDS && !pricer.over_budget() {
        let per_flop = best_seconds_per_flop(pricer.dtype, &pricer.options);
        if let Some(t) = dp(net, pricer, limit, per_flop, TIME_DP_ORDERS) {
            let p = refine(net, price_tree(net, t, pricer), pricer);
            if p.total() < chosen.total() {
                chosen = p;
                how = "predicted time (searched)";
            }
        }
    }
    // the restarts cheapest first, each refined, until the budget runs out
    let mut priced: Vec<Priced> = Vec::new();
    for t in restarts {
        if pricer.over_budget() {
            break;
        }
        priced.push(price_tree(net, t, pricer));
    }
    priced.sort_by(|a, b| a.total().total_cmp(&b.total()));
    for p in priced {
        if pricer.over_budget() {
            break;
        }
        let p = refine(net, p, pricer);
        if p.total() < chosen.total() {
            chosen = p;
            how = "predicted time (randomised greedy restarts)";
        }
    }
    if chosen.total() > reference.total() * (1.0 - TIME_SWITCH_MARGIN) {
        chosen = reference.clone();
        how = "predicted time (the FLOP-optimal path: nothing predicted faster by the margin)";
    }
    if pricer.cut.get() {
        how = match how {
            "predicted time (searched)" => {
                "predicted time (searched, refinement cut by its budget)"
            }
            "predicted time (orders refined)" => {
                "predicted time (orders refined, search cut by its budget)"
            }
            "predicted time (randomised greedy restarts)" => {
                "predicted time (randomised greedy restarts, cut by the budget)"
            }
            _ => "predicted time (the FLOP-optimal path; search cut by its budget)",
        };
    }
    Searched {
        reference,
        chosen,
        how,
        planned: pricer.planned,
        seconds: pricer.elapsed(),
    }
}

/// The fewest seconds per FLOP the model gives any step: half a large square GEMM's, so that
/// the bound stays below every real step.
fn best_seconds_per_flop(dtype: DType, options: &PlanOptions) -> f64 {
    const SIDE: usize = 384;
    let square = Layout::row_major(&[SIDE, SIDE]);
    let seconds = square.ok().and_then(|l| {
        super::cache::plan_as_called("ik,kj->ij", &[l.clone(), l.clone()], &l, dtype, options)
            .ok()
            .map(|p| p.predicted_seconds())
    });
    match seconds {
        Some(s) if s.is_finite() => 0.5 * s / (2.0 * (SIDE as f64).powi(3)),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A network over letters with the given extents (no index summed within one operand).
    struct Case {
        labels: Vec<Vec<Label>>,
        bit: BTreeMap<Label, usize>,
        ext: Vec<f64>,
        letter: BTreeMap<Label, char>,
        masks: Vec<u128>,
        output: Vec<Label>,
    }

    impl Case {
        fn new(terms: &[&str], out: &str, extents: &[(char, usize)]) -> Case {
            let l = |c: char| Label::Letter(c);
            let bit: BTreeMap<Label, usize> = extents
                .iter()
                .enumerate()
                .map(|(k, &(c, _))| (l(c), k))
                .collect();
            let letter = extents.iter().map(|&(c, _)| (l(c), c)).collect();
            let ext = extents.iter().map(|&(_, e)| e as f64).collect();
            let labels: Vec<Vec<Label>> =
                terms.iter().map(|t| t.chars().map(l).collect()).collect();
            let masks = labels
                .iter()
                .map(|ls| ls.iter().fold(0u128, |m, x| m | 1 << bit[x]))
                .collect();
            Case {
                labels,
                bit,
                ext,
                letter,
                masks,
                output: out.chars().map(l).collect(),
            }
        }

        fn net(&self) -> Net<'_> {
            Net {
                labels: &self.labels,
                bit: &self.bit,
                ext: &self.ext,
                letter: &self.letter,
                masks: &self.masks,
                out_mask: self.output.iter().fold(0u128, |m, x| m | 1 << self.bit[x]),
                output: &self.output,
            }
        }
    }

    /// Every tree (connected splits where a subset has one) with every order the dynamic
    /// programming considers (each step's result in either operand's order first): the
    /// cheapest (cost, order) of each subset.
    fn brute(net: &Net<'_>, pricer: &mut Pricer, s: usize) -> Vec<(f64, Vec<Label>)> {
        let n = net.labels.len();
        if s.count_ones() == 1 {
            return vec![(0.0, net.labels[s.trailing_zeros() as usize].clone())];
        }
        let full = (1usize << n) - 1;
        let union = |s: usize| {
            (0..n)
                .filter(|i| s >> i & 1 == 1)
                .fold(0u128, |m, i| m | net.masks[i])
        };
        let lab = |s: usize| union(s) & (union(full ^ s) | net.out_mask);
        let low = s & s.wrapping_neg();
        let mut splits = Vec::new();
        for outer in [false, true] {
            for t in (1..s).filter(|t| t & s == *t && t & low != 0) {
                let u = s ^ t;
                if (lab(t) & lab(u) != 0) != outer {
                    splits.push((t, u));
                }
            }
            if !splits.is_empty() {
                break;
            }
        }
        let mut out: Vec<(f64, Vec<Label>)> = Vec::new();
        for (t, u) in splits {
            for (ct, ot) in brute(net, pricer, t) {
                for (cu, ou) in brute(net, pricer, u) {
                    let orders = if s == full {
                        vec![net.output.to_vec()]
                    } else {
                        vec![
                            concat_kept(net, &ot, &ou, lab(s)),
                            concat_kept(net, &ou, &ot, lab(s)),
                        ]
                    };
                    for o in orders {
                        let c = ct + cu + pricer.price(net, &ot, &ou, &o);
                        match out.iter_mut().find(|x| x.1 == o) {
                            Some(x) => x.0 = x.0.min(c),
                            None => out.push((c, o)),
                        }
                    }
                }
            }
        }
        out
    }

    fn tree_cost(net: &Net<'_>, tree: Tree, pricer: &mut Pricer) -> f64 {
        price_tree(net, tree, pricer).total()
    }

    #[test]
    fn dynamic_programming_equals_brute_force_over_its_orders() {
        let cases = [
            Case::new(
                &["abc", "cd", "dbe"],
                "ae",
                &[('a', 40), ('b', 6), ('c', 50), ('d', 30), ('e', 20)],
            ),
            Case::new(
                &["Pia", "Pjb", "iajb"],
                "",
                &[('P', 60), ('i', 5), ('j', 5), ('a', 19), ('b', 19)],
            ),
            Case::new(
                &["pi", "qj", "pqrs", "rk"],
                "ijks",
                &[
                    ('p', 12),
                    ('q', 12),
                    ('r', 12),
                    ('s', 12),
                    ('i', 9),
                    ('j', 9),
                    ('k', 9),
                ],
            ),
            Case::new(
                &["ac", "asb", "st", "ctd"],
                "bd",
                &[
                    ('a', 30),
                    ('b', 30),
                    ('c', 30),
                    ('d', 30),
                    ('s', 3),
                    ('t', 3),
                ],
            ),
        ];
        for case in &cases {
            let net = case.net();
            let mut pricer = Pricer::new(DType::F64, Some(1));
            let full = (1usize << net.labels.len()) - 1;
            let best = brute(&net, &mut pricer, full)
                .into_iter()
                .map(|x| x.0)
                .fold(f64::INFINITY, f64::min);
            let tree = dp(&net, &mut pricer, None, 0.0, usize::MAX).expect("a tree");
            let found = tree_cost(&net, tree.clone(), &mut pricer);
            assert!(
                (found - best).abs() <= 1e-12 * best,
                "{:?}: {found} against {best}",
                case.labels
            );
            // two orders per subset: no better than all of them, and the bound prunes
            // nothing that could enter them
            let kept = dp(&net, &mut pricer, None, 0.0, TIME_DP_ORDERS).expect("a tree");
            let kept = tree_cost(&net, kept, &mut pricer);
            assert!(kept >= best * (1.0 - 1e-12));
            let per_flop = best_seconds_per_flop(DType::F64, &pricer.options);
            assert!(per_flop > 0.0);
            let pruned = dp(&net, &mut pricer, None, per_flop, TIME_DP_ORDERS).expect("a tree");
            assert_eq!(tree_cost(&net, pruned, &mut pricer), kept);
        }
    }

    #[test]
    fn the_search_never_predicts_more_than_its_reference_and_refining_never_adds_time() {
        let case = Case::new(
            &["Pia", "Pjb", "iajb"],
            "",
            &[('P', 200), ('i', 8), ('j', 8), ('a', 40), ('b', 40)],
        );
        let net = case.net();
        let l = |c: &str| c.chars().map(Label::Letter).collect::<Vec<_>>();
        // the FLOP rule's orders: P last in the first intermediate
        let reference = Tree {
            ssa: vec![(0, 2), (1, 3)],
            orders: vec![l("jbP"), vec![]],
        };
        let mut pricer = Pricer::new(DType::F64, Some(1));
        let priced = price_tree(&net, reference.clone(), &mut pricer);
        let refined = refine(&net, priced.clone(), &mut pricer);
        assert!(refined.total() <= priced.total());
        let found = search(
            &net,
            reference,
            Vec::new(),
            &mut Pricer::new(DType::F64, Some(1)),
            None,
        );
        assert!(found.chosen.total() <= found.reference.total() * (1.0 + 1e-12));
        assert!((found.reference.total() - priced.total()).abs() <= 1e-12 * priced.total());
        assert!(found.planned >= 2 && found.seconds > 0.0);
        // every intermediate holds the labels the FLOP walk keeps, in some order
        let mut first = found.chosen.tree.orders[0].clone();
        first.sort();
        let mut want = l("jbP");
        want.sort();
        assert_eq!(first, want);
    }

    #[test]
    fn steps_that_cannot_be_planned_are_priced_infinite() {
        let case = Case::new(
            &["ab", "bc", "cd"],
            "ad",
            &[('a', 4), ('b', 5), ('c', 6), ('d', 7)],
        );
        let net = case.net();
        let mut pricer = Pricer::new(DType::F64, Some(usize::MAX));
        let l = |c: &str| c.chars().map(Label::Letter).collect::<Vec<_>>();
        assert_eq!(
            pricer.price(&net, &l("ab"), &l("bc"), &l("ac")),
            f64::INFINITY
        );
        let mut ok = Pricer::new(DType::F64, Some(1));
        let s = ok.price(&net, &l("ab"), &l("bc"), &l("ac"));
        assert!(s.is_finite() && s > 0.0);
        assert_eq!(ok.price(&net, &l("ab"), &l("bc"), &l("ac")), s);
        assert_eq!(ok.planned, 1);
    }
}

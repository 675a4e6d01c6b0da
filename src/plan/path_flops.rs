//! The FLOP searches of the contraction path: index sets as bit masks, exact dynamic
//! programming over subsets ([`optimal`]), opt_einsum's greedy rule ([`greedy`]) and its
//! randomised restarts ([`random_greedy`]), in single-assignment form ([`Ssa`]).

use crate::error::{Error, Result};

/// Index sets as bit masks over the spec's labels, with their extents.
pub(super) struct Sets {
    pub(super) ext: Vec<f64>,
    pub(super) out: u128,
}

impl Sets {
    /// Elements of a tensor over the labels of `m`.
    pub(super) fn size(&self, mut m: u128) -> f64 {
        let mut p = 1.0;
        while m != 0 {
            p *= self.ext[m.trailing_zeros() as usize];
            m &= m - 1;
        }
        p
    }

    /// FLOPs of contracting operands over `a` and `b` into a result over `keep`.
    pub(super) fn flops(&self, a: u128, b: u128, keep: u128) -> f64 {
        let all = a | b;
        let factor = if all & !keep != 0 { 2.0 } else { 1.0 };
        self.size(all) * factor
    }
}

/// Labels of the result of contracting `a` with `b`, when `ge2` / `ge3` mark the labels
/// that two / three or more of the live operands hold: what the output or another operand
/// still needs.
pub(super) fn kept(a: u128, b: u128, out: u128, ge2: u128, ge3: u128) -> u128 {
    ((a | b) & out) | ((a ^ b) & ge2) | (a & b & ge3)
}

/// The path as a list of `(x, y)` in single-assignment ids: operands are 0..n, the result
/// of step s is n + s.
pub(super) type Ssa = Vec<(usize, usize)>;

/// Fewest FLOPs over all pairwise orders: for every subset of operands, the best split in
/// two, from the singletons up.
pub(super) fn optimal(masks: &[u128], sets: &Sets, limit: Option<f64>) -> Result<Ssa> {
    let n = masks.len();
    let full: usize = (1 << n) - 1;
    let mut union = vec![0u128; 1 << n];
    for s in 1..=full {
        union[s] = union[s & (s - 1)] | masks[s.trailing_zeros() as usize];
    }
    // Labels of the intermediate of subset s: those it holds that the rest or the output needs.
    let lab = |s: usize| union[s] & (union[full ^ s] | sets.out);
    let mut best = vec![(f64::INFINITY, f64::INFINITY); 1 << n];
    let mut split = vec![0usize; 1 << n];
    for i in 0..n {
        best[1 << i] = (0.0, 0.0);
    }
    for s in 1..=full {
        if s.count_ones() < 2 {
            continue;
        }
        let ls = lab(s);
        let size = sets.size(ls);
        if s != full && limit.is_some_and(|l| size > l) {
            continue;
        }
        // Splits (t, s ^ t) with t holding s's lowest operand: each unordered split once.
        let low = s & s.wrapping_neg();
        let rest = s ^ low;
        let mut sub = rest;
        loop {
            let t = sub | low;
            let u = s ^ t;
            if u != 0 && best[t].0.is_finite() && best[u].0.is_finite() {
                let f = sets.flops(lab(t), lab(u), ls);
                let cand = (best[t].0 + best[u].0 + f, best[t].1 + best[u].1 + size);
                if cand < best[s] {
                    best[s] = cand;
                    split[s] = t;
                }
            }
            if sub == 0 {
                break;
            }
            sub = (sub - 1) & rest;
        }
    }
    if !best[full].0.is_finite() {
        return Err(no_path_under_limit(limit));
    }
    // Post-order walk of the split tree.
    fn walk(s: usize, split: &[usize], ssa: &mut Ssa, next: &mut usize) -> usize {
        if s.count_ones() == 1 {
            return s.trailing_zeros() as usize;
        }
        let t = split[s];
        let x = walk(t, split, ssa, next);
        let y = walk(s ^ t, split, ssa, next);
        ssa.push((x, y));
        *next += 1;
        *next - 1
    }
    let mut ssa = Vec::with_capacity(n - 1);
    let mut next = n;
    walk(full, &split, &mut ssa, &mut next);
    Ok(ssa)
}

pub(super) fn no_path_under_limit(limit: Option<f64>) -> Error {
    Error::InvalidPath(format!(
        "no contraction order keeps every intermediate within the memory limit of {} elements",
        limit.unwrap_or(0.0)
    ))
}

/// Masks of the labels that at least two / three of `live` hold.
pub(super) fn multiplicity(live: &[(usize, u128)]) -> (u128, u128) {
    let (mut ge1, mut ge2, mut ge3) = (0u128, 0u128, 0u128);
    for &(_, m) in live {
        ge3 |= ge2 & m;
        ge2 |= ge1 & m;
        ge1 |= m;
    }
    (ge2, ge3)
}

/// The mask of live operand `id`.
pub(super) fn live_mask(live: &[(usize, u128)], id: usize) -> u128 {
    live.iter().find(|&&(i, _)| i == id).map_or(0, |&(_, m)| m)
}

/// opt_einsum's greedy rule (see the module text).
pub(super) fn greedy(masks: &[u128], sets: &Sets, limit: Option<f64>) -> Result<Ssa> {
    ranked_greedy(masks, sets, limit, &mut |_| 0)
}

/// Restarts of the randomised greedy search the default search prices beyond
/// [`TIME_DP_MAX_OPERANDS`](super::TIME_DP_MAX_OPERANDS) operands.
pub const RANDOM_GREEDY_RESTARTS: usize = 16;

/// opt_einsum's random-greedy: the greedy rule, except that each step takes the pair of rank
/// k (0 the greedy choice) with probability proportional to e^-k, so that restarts explore
/// orders near the greedy one. `seed` makes a restart repeatable.
pub(super) fn random_greedy(
    masks: &[u128],
    sets: &Sets,
    limit: Option<f64>,
    seed: u64,
) -> Result<Ssa> {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(seed);
    ranked_greedy(masks, sets, limit, &mut |count| {
        let u: f64 = rng.random();
        ((-(1.0 - u).ln()) as usize).min(count.saturating_sub(1))
    })
}

/// The greedy search taking, at each step, the candidate pair of the rank `pick` returns
/// (given how many candidates there are) in the greedy order.
pub(super) fn ranked_greedy(
    masks: &[u128],
    sets: &Sets,
    limit: Option<f64>,
    pick: &mut dyn FnMut(usize) -> usize,
) -> Result<Ssa> {
    let n = masks.len();
    let mut live: Vec<(usize, u128)> = masks.iter().copied().enumerate().collect();
    let mut ssa = Vec::with_capacity(n.saturating_sub(1));
    while live.len() > 1 {
        let (ge2, ge3) = multiplicity(&live);
        let last = live.len() == 2;
        // Key: (outer product?, removed elements or result size, flops); then the pair and
        // the result's labels.
        type Choice = ((bool, f64, f64), usize, usize, u128);
        let mut choices: Vec<Choice> = Vec::new();
        for i in 0..live.len() {
            for j in i + 1..live.len() {
                let (a, b) = (live[i].1, live[j].1);
                let keep = kept(a, b, sets.out, ge2, ge3);
                let size = sets.size(keep);
                if !last && limit.is_some_and(|l| size > l) {
                    continue;
                }
                let outer = a & b == 0;
                let gain = if outer {
                    size
                } else {
                    size - sets.size(a) - sets.size(b)
                };
                choices.push(((outer, gain, sets.flops(a, b, keep)), i, j, keep));
            }
        }
        if choices.is_empty() {
            return Err(no_path_under_limit(limit));
        }
        choices.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap_or(std::cmp::Ordering::Equal));
        // outer products only where nothing else is left, whatever the rank drawn
        let shared = choices.iter().take_while(|c| !c.0 .0).count().max(1);
        let (_, i, j, keep) = choices[pick(shared).min(shared - 1)];
        ssa.push((live[i].0, live[j].0));
        live.remove(j);
        live.remove(i);
        live.push((n + ssa.len() - 1, keep));
    }
    Ok(ssa)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_labels_follow_multiplicity() {
        // a in A and B only: summed; b in A, B and a third operand: kept; c only in A: summed
        // unless in the output.
        let (a, b, c) = (1u128, 2u128, 4u128);
        let ma = a | b | c;
        let mb = a | b;
        let live = [(0, ma), (1, mb), (2, b)];
        let (ge2, ge3) = multiplicity(&live);
        assert_eq!((ge2, ge3), (a | b, b));
        assert_eq!(kept(ma, mb, 0, ge2, ge3), b);
        assert_eq!(kept(ma, mb, c, ge2, ge3), b | c);
    }

    #[test]
    fn random_greedy_restarts_are_valid_repeatable_and_start_from_greedy() {
        // a ring of eight matrices: every order is valid, and many tie
        let masks: Vec<u128> = (0..8)
            .map(|k| 1u128 << k | 1u128 << ((k + 1) % 8))
            .collect();
        let sets = Sets {
            ext: vec![10.0; 8],
            out: 0,
        };
        let g = greedy(&masks, &sets, None).unwrap();
        assert_eq!(ranked_greedy(&masks, &sets, None, &mut |_| 0).unwrap(), g);
        let mut distinct = std::collections::BTreeSet::new();
        for seed in 1..=16 {
            let r = random_greedy(&masks, &sets, None, seed).unwrap();
            assert_eq!(r, random_greedy(&masks, &sets, None, seed).unwrap());
            assert_eq!(r.len(), 7);
            // every id used once: operands 0..8 and the results 8..14 but the last (14)
            let mut used: Vec<usize> = r.iter().flat_map(|&(x, y)| [x, y]).collect();
            used.sort_unstable();
            assert_eq!(used, (0..14).collect::<Vec<_>>());
            distinct.insert(r);
        }
        assert!(distinct.len() > 1);
        // a limit nothing meets fails as the greedy search does
        assert!(random_greedy(&masks, &sets, Some(1.0), 3).is_err());
    }
}

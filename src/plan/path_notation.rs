//! Contraction paths in numpy's notation (each step names positions in the current operand
//! list; the result is appended) and their conversion to and from single-assignment ids
//! ([`Ssa`]: operands are 0..n, the result of step s is n + s).

use super::path_flops::Ssa;
use crate::error::{Error, Result};

/// numpy's notation (positions in the current list, result appended) to single-assignment ids.
pub(super) fn from_positions(path: &[(usize, usize)], n: usize) -> Result<Ssa> {
    let steps: Vec<Vec<usize>> = path.iter().map(|&(i, j)| vec![i, j]).collect();
    from_numpy(&steps, n)
}

/// numpy's notation with steps of any arity to single-assignment ids: a one-position step
/// moves that operand to the end of the list; a step of k >= 2 positions becomes k - 1
/// pairwise steps from the left, its result appended.
pub(super) fn from_numpy(path: &[Vec<usize>], n: usize) -> Result<Ssa> {
    let pairs: usize = path.iter().map(|s| s.len().saturating_sub(1)).sum();
    if pairs + 1 != n.max(1) {
        return Err(Error::InvalidPath(format!(
            "{n} operand(s) need {} pairwise step(s), the path has {pairs}",
            n.saturating_sub(1),
        )));
    }
    let mut ids: Vec<usize> = (0..n).collect();
    let mut ssa = Vec::with_capacity(pairs);
    for (step, positions) in path.iter().enumerate() {
        let tuple = match positions.as_slice() {
            [p] => format!("({p},)"),
            ps => format!(
                "({})",
                ps.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let mut sorted = positions.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidPath(format!(
                "step {step} names position {} twice in {tuple}: a step needs different positions",
                w[0]
            )));
        }
        match sorted.last() {
            None => return Err(Error::InvalidPath(format!("step {step} names no position"))),
            Some(&p) if p >= ids.len() => {
                return Err(Error::InvalidPath(format!(
                    "step {step} names positions {tuple}, but the list holds {} operand(s) then",
                    ids.len()
                )))
            }
            Some(_) => {}
        }
        let taken: Vec<usize> = positions.iter().map(|&p| ids[p]).collect();
        for &p in sorted.iter().rev() {
            ids.remove(p);
        }
        let mut acc = taken[0];
        for &id in &taken[1..] {
            ssa.push((acc, id));
            acc = n + ssa.len() - 1;
        }
        ids.push(acc);
    }
    Ok(ssa)
}

/// Single-assignment ids to numpy's notation, each pair in increasing order; `ssa`'s pairs
/// are swapped to match (the operand at the lower position is the step's first operand).
pub(super) fn to_positions(ssa: &mut Ssa, n: usize) -> Vec<(usize, usize)> {
    let mut ids: Vec<usize> = (0..n).collect();
    let mut out = Vec::with_capacity(ssa.len());
    for (step, pair) in ssa.iter_mut().enumerate() {
        // Every id of a step is live: an input or an earlier step's result not yet consumed.
        let pos = |id: usize| {
            let p = ids.iter().position(|&v| v == id);
            debug_assert!(p.is_some(), "operand {id} is not live at step {step}");
            p.unwrap_or(0)
        };
        let (i, j) = (pos(pair.0), pos(pair.1));
        if i > j {
            *pair = (pair.1, pair.0);
        }
        out.push((i.min(j), i.max(j)));
        ids.remove(i.max(j));
        ids.remove(i.min(j));
        ids.push(n + step);
    }
    out
}

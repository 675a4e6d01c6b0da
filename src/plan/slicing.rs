//! Slicing under a memory limit (cotengra's slicing): when no contraction order keeps every
//! intermediate within [`PathOptions::memory_limit`], some indices are fixed in turn (looped
//! over) and the network without them is contracted once per value, each result added into
//! C or written into its slice of C. Each slice moves smaller intermediates; the price is the
//! work the slices repeat.
//!
//! The indices are chosen greedily: while no path of the network without the chosen indices
//! fits the limit, the index whose removal leaves the smallest largest intermediate is added;
//! once some do fit, the one whose slice path (searched as any other, on predicted time) is
//! predicted fastest over all its slices.

use super::path::{ContractionPath, PathOptions, PathStrategy};
use super::AUTO_OPTIMAL_MAX_OPERANDS;
use crate::einsum::{parse, BoundSpec, Label};
use crate::error::Result;

/// The indices a sliced path loops over and the path of one slice.
#[derive(Clone, Debug, PartialEq)]
pub struct Slicing {
    /// The sliced indices.
    pub letters: Vec<char>,
    /// Their extents.
    pub extents: Vec<usize>,
    /// The path of one slice (over the spec without the sliced indices).
    pub inner: ContractionPath,
    /// Per operand: the axes to fix, highest first, each with its sliced index's position.
    pub(crate) operand_axes: Vec<Vec<(usize, usize)>>,
    /// The output's axes to fix, highest first, each with its sliced index's position.
    pub(crate) output_axes: Vec<(usize, usize)>,
}

impl Slicing {
    /// How many slices the path runs.
    pub fn count(&self) -> usize {
        self.extents.iter().product()
    }
}

/// The spec and operand shapes without the indices in `sliced`.
fn without(bound: &BoundSpec, sliced: &[char]) -> (String, Vec<Vec<usize>>) {
    let keep = |l: &Label| !matches!(l, Label::Letter(c) if sliced.contains(c));
    let text = |ls: &[Label]| -> String {
        ls.iter()
            .filter(|l| keep(l))
            .map(|l| match l {
                Label::Letter(c) => *c,
                Label::Broadcast(_) => '?',
            })
            .collect()
    };
    let terms: Vec<String> = bound.inputs().iter().map(|ls| text(ls)).collect();
    let spec = format!("{}->{}", terms.join(","), text(bound.output()));
    let shapes = bound
        .inputs()
        .iter()
        .zip(bound.stretched())
        .map(|(ls, st)| {
            ls.iter()
                .zip(st)
                .filter(|(l, _)| keep(l))
                .map(|(&l, &s)| if s { 1 } else { bound.extent(l) })
                .collect()
        })
        .collect();
    (spec, shapes)
}

/// The FLOP path of the network without `sliced`, under `limit` (elements) or without one.
fn flop_path(bound: &BoundSpec, sliced: &[char], limit: Option<usize>) -> Option<ContractionPath> {
    let (spec, shapes) = without(bound, sliced);
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let inner = parse(&spec).ok()?.bind(&refs).ok()?;
    let strategy = if shapes.len() <= AUTO_OPTIMAL_MAX_OPERANDS {
        PathStrategy::Optimal
    } else {
        PathStrategy::Greedy
    };
    let o = PathOptions {
        strategy,
        memory_limit: limit,
        ..Default::default()
    };
    ContractionPath::new(&inner, &o).ok()
}

/// The sliced path for `bound` under `options.memory_limit`, or `None` when slicing cannot
/// help (the spec uses `...`, or no set of indices brings the intermediates under the limit).
pub(crate) fn sliced_path(
    bound: &BoundSpec,
    options: &PathOptions,
) -> Result<Option<ContractionPath>> {
    let Some(limit) = options.memory_limit else {
        return Ok(None);
    };
    if bound
        .extents()
        .keys()
        .any(|l| matches!(l, Label::Broadcast(_)))
    {
        return Ok(None);
    }
    let candidates: Vec<char> = bound
        .extents()
        .iter()
        .filter_map(|(l, &e)| match l {
            Label::Letter(c) if e >= 2 => Some(*c),
            _ => None,
        })
        .collect();
    let slices = |s: &[char]| -> f64 {
        s.iter()
            .map(|c| bound.extent(Label::Letter(*c)) as f64)
            .product()
    };
    let mut chosen: Vec<char> = Vec::new();
    while chosen.len() < candidates.len() {
        let rest = candidates.iter().filter(|c| !chosen.contains(c));
        let mut fits: Option<(f64, char)> = None;
        let mut smallest: Option<(f64, char)> = None;
        for &c in rest {
            let mut s = chosen.clone();
            s.push(c);
            if flop_path(bound, &s, Some(limit)).is_some() {
                // the slice's own path, priced: a summed index's slices each add into all
                // of C, an output index's write their part of it
                let cost = match inner_path(bound, options, &s) {
                    Ok(p) => p.predicted_seconds().unwrap_or(p.flops()) * slices(&s),
                    Err(_) => continue,
                };
                if fits.is_none_or(|(f, _)| cost < f) {
                    fits = Some((cost, c));
                }
            } else if let Some(p) = flop_path(bound, &s, None) {
                let largest = p.largest_intermediate();
                if smallest.is_none_or(|(l, _)| largest < l) {
                    smallest = Some((largest, c));
                }
            }
        }
        match (fits, smallest) {
            (Some((_, c)), _) => {
                chosen.push(c);
                return finish(bound, options, chosen).map(Some);
            }
            (None, Some((_, c))) => chosen.push(c),
            (None, None) => return Ok(None),
        }
    }
    Ok(None)
}

/// The path of one slice of the network without `letters`, searched with `options`.
fn inner_path(
    bound: &BoundSpec,
    options: &PathOptions,
    letters: &[char],
) -> Result<ContractionPath> {
    let (spec, shapes) = without(bound, letters);
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    ContractionPath::new(&parse(&spec)?.bind(&refs)?, options)
}

/// The sliced path over `letters`: the path of one slice searched with `options`.
fn finish(bound: &BoundSpec, options: &PathOptions, letters: Vec<char>) -> Result<ContractionPath> {
    let inner = inner_path(bound, options, &letters)?;
    let position = |l: &Label| match l {
        Label::Letter(c) => letters.iter().position(|x| x == c),
        Label::Broadcast(_) => None,
    };
    let axes = |ls: &[Label]| -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = ls
            .iter()
            .enumerate()
            .filter_map(|(ax, l)| position(l).map(|p| (ax, p)))
            .collect();
        v.reverse();
        v
    };
    let slicing = Slicing {
        extents: letters
            .iter()
            .map(|&c| bound.extent(Label::Letter(c)))
            .collect(),
        operand_axes: bound.inputs().iter().map(|ls| axes(ls)).collect(),
        output_axes: axes(bound.output()),
        letters,
        inner,
    };
    Ok(ContractionPath::sliced(bound, slicing))
}

//! Binding a [`Spec`] to operand shapes: rank checks, broadcasting (`...` dimensions and
//! letters of extent 1, as numpy does), one extent per index, overflow checks. The result,
//! [`BoundSpec`], names every axis of every operand by a [`Label`].

use std::collections::BTreeMap;

use super::parse::Spec;
use crate::error::{Error, Result};
use crate::tensor::Layout;

/// An index after binding: a letter of the spec, or one dimension of the `...` block
/// (numbered from 0 at the left of the widest `...`).
///
/// ```
/// use ttgt::einsum::Label;
/// assert_eq!(Label::Letter('a').to_string(), "a");
/// assert_eq!(Label::Broadcast(1).to_string(), "...1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Label {
    /// A `...` dimension. Ordered before letters, as numpy's implicit output puts `...` first.
    Broadcast(usize),
    /// A letter `a-z`, `A-Z`.
    Letter(char),
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Letter(c) => write!(f, "{c}"),
            Label::Broadcast(k) => write!(f, "...{k}"),
        }
    }
}

/// A spec bound to the shapes of its operands: every axis of every operand and of the output
/// carries a [`Label`], and every label one extent.
///
/// ```
/// use ttgt::einsum::{parse, Label};
/// let b = parse("...ij,jk->...ik").unwrap().bind(&[&[7, 2, 3], &[3, 4]]).unwrap();
/// assert_eq!(b.output_shape(), vec![7, 2, 4]);
/// assert_eq!(b.extent(Label::Letter('j')), 3);
/// assert_eq!(b.inputs()[0], vec![Label::Broadcast(0), Label::Letter('i'), Label::Letter('j')]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundSpec {
    spec: Spec,
    inputs: Vec<Vec<Label>>,
    output: Vec<Label>,
    extents: BTreeMap<Label, usize>,
    /// The extents of the letters a-z, A-Z (0 where absent), a copy of `extents` that
    /// [`BoundSpec::extent`] reads without a tree search (the planner asks for extents some
    /// hundred thousand times a plan).
    letters: [usize; 52],
    stretched: Vec<Vec<bool>>,
}

/// The slot of a label in [`BoundSpec`]'s `letters` (`None` for `...` dimensions).
fn letter_slot(label: Label) -> Option<usize> {
    match label {
        Label::Letter(c @ 'a'..='z') => Some(c as usize - 'a' as usize),
        Label::Letter(c @ 'A'..='Z') => Some(26 + c as usize - 'A' as usize),
        _ => None,
    }
}

impl Spec {
    /// Binds the spec to operand shapes (one slice of extents per input operand).
    ///
    /// ```
    /// let spec = ttgt::einsum::parse("ij,jk->ik").unwrap();
    /// assert!(spec.bind(&[&[2, 3], &[3, 4]]).is_ok());
    /// assert!(spec.bind(&[&[2, 3], &[4, 4]]).is_err());
    /// assert!(spec.bind(&[&[2, 3]]).is_err());
    /// ```
    pub fn bind(&self, shapes: &[&[usize]]) -> Result<BoundSpec> {
        let terms = self.inputs();
        if shapes.len() != terms.len() {
            return Err(Error::OperandCount {
                spec: self.text().to_string(),
                expected: terms.len(),
                given: shapes.len(),
            });
        }
        // Ranks and the width of each operand's `...`.
        let mut widths = Vec::with_capacity(terms.len());
        for (op, (t, shape)) in terms.iter().zip(shapes).enumerate() {
            let n = t.letters().len();
            let ok = match t.ellipsis() {
                Some(_) => shape.len() >= n,
                None => shape.len() == n,
            };
            if !ok {
                return Err(Error::RankMismatch {
                    operand: op,
                    rank: shape.len(),
                    subscripts: t.to_text(),
                    need: match t.ellipsis() {
                        Some(_) => format!("need rank at least {n}"),
                        None => format!("need rank {n}"),
                    },
                });
            }
            widths.push(shape.len() - n);
        }
        let nb = widths.iter().copied().max().unwrap_or(0);
        if self.has_explicit_output() && self.output().ellipsis().is_none() && nb > 0 {
            return Err(Error::MissingOutputEllipsis {
                spec: self.text().to_string(),
                ndim: nb,
            });
        }

        let mut inputs = Vec::with_capacity(terms.len());
        let mut extents: BTreeMap<Label, usize> = BTreeMap::new();
        // Where each letter's extent came from, and the same for broadcast dims (non-1 only).
        let mut origin: BTreeMap<Label, (usize, usize)> = BTreeMap::new();
        for (op, (t, shape)) in terms.iter().zip(shapes).enumerate() {
            let w = widths[op];
            let labels = expand(t.letters(), t.ellipsis(), nb - w, w);
            for (axis, (&label, &ext)) in labels.iter().zip(shape.iter()).enumerate() {
                match label {
                    Label::Letter(c) => {
                        // Axes of one label within one operand (a diagonal) must agree.
                        if let Some((a0, &e0)) = labels[..axis]
                            .iter()
                            .zip(shape.iter())
                            .enumerate()
                            .find(|(_, (&l, _))| l == label)
                            .map(|(a, (_, e))| (a, e))
                        {
                            if e0 != ext {
                                return Err(Error::ExtentMismatch {
                                    label: c,
                                    first_operand: op,
                                    first_axis: a0,
                                    first_extent: e0,
                                    second_operand: op,
                                    second_axis: axis,
                                    second_extent: ext,
                                });
                            }
                            continue;
                        }
                        // Across operands an extent of 1 broadcasts, as in numpy.
                        match origin.get(&label) {
                            None => {
                                origin.insert(label, (op, axis));
                                extents.insert(label, ext);
                            }
                            Some(&(op0, axis0)) => {
                                let e0 = extents[&label];
                                if e0 == 1 && ext != 1 {
                                    origin.insert(label, (op, axis));
                                    extents.insert(label, ext);
                                } else if e0 != ext && ext != 1 {
                                    return Err(Error::ExtentMismatch {
                                        label: c,
                                        first_operand: op0,
                                        first_axis: axis0,
                                        first_extent: e0,
                                        second_operand: op,
                                        second_axis: axis,
                                        second_extent: ext,
                                    });
                                }
                            }
                        }
                    }
                    Label::Broadcast(k) => {
                        let e0 = extents.entry(label).or_insert(1);
                        if ext != 1 {
                            if *e0 != 1 && *e0 != ext {
                                let (op0, _) = origin[&label];
                                return Err(Error::Broadcast {
                                    dim: nb - 1 - k,
                                    first_operand: op0,
                                    first_extent: *e0,
                                    second_operand: op,
                                    second_extent: ext,
                                });
                            }
                            if *e0 == 1 {
                                *e0 = ext;
                                origin.insert(label, (op, axis));
                            }
                        }
                    }
                }
            }
            inputs.push(labels);
        }
        let stretched = inputs
            .iter()
            .zip(shapes)
            .map(|(labels, shape)| {
                labels
                    .iter()
                    .zip(shape.iter())
                    .map(|(l, &e)| e != extents[l])
                    .collect()
            })
            .collect();
        let out = self.output();
        let output = expand(out.letters(), out.ellipsis(), 0, nb);
        let mut letters = [0; 52];
        for (&l, &e) in &extents {
            if let Some(i) = letter_slot(l) {
                letters[i] = e;
            }
        }
        let bound = BoundSpec {
            spec: self.clone(),
            inputs,
            output,
            extents,
            letters,
            stretched,
        };
        bound.check_sizes()?;
        Ok(bound)
    }
}

/// Labels of a term whose `...` covers broadcast dims `first..first + width`.
fn expand(letters: &[char], ellipsis: Option<usize>, first: usize, width: usize) -> Vec<Label> {
    let mut labels: Vec<Label> = letters.iter().map(|&c| Label::Letter(c)).collect();
    if let Some(at) = ellipsis {
        let block = (first..first + width).map(Label::Broadcast);
        labels.splice(at..at, block);
    }
    labels
}

impl BoundSpec {
    /// The parsed spec this was bound from.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Labels of each input operand's axes.
    pub fn inputs(&self) -> &[Vec<Label>] {
        &self.inputs
    }

    /// Labels of the output's axes.
    pub fn output(&self) -> &[Label] {
        &self.output
    }

    /// Every label with its extent, in label order.
    pub fn extents(&self) -> &BTreeMap<Label, usize> {
        &self.extents
    }

    /// Extent of a label (0 for a label not in the spec).
    pub fn extent(&self, label: Label) -> usize {
        match letter_slot(label) {
            Some(i) => self.letters[i],
            None => self.extents.get(&label).copied().unwrap_or(0),
        }
    }

    /// Shape of the output.
    pub fn output_shape(&self) -> Vec<usize> {
        self.output.iter().map(|&l| self.extent(l)).collect()
    }

    /// Per operand and axis: whether the axis has extent 1 and is stretched (read with
    /// stride 0) to the larger extent its index has in other operands (a `...` dimension,
    /// or a letter: numpy broadcasts both).
    pub fn stretched(&self) -> &[Vec<bool>] {
        &self.stretched
    }

    /// The operand's layout as the contraction reads it: stretched axes (`...` dimensions or
    /// letters of extent 1 where other operands are larger) get the broadcast extent and
    /// stride 0.
    ///
    /// ```
    /// use ttgt::{einsum::parse, Layout};
    /// let b = parse("...i,...i").unwrap().bind(&[&[1, 3], &[5, 3]]).unwrap();
    /// let l = b.effective_layout(0, &Layout::row_major(&[1, 3]).unwrap());
    /// assert_eq!((l.dims(), l.strides()), (&[5usize, 3][..], &[0isize, 1][..]));
    /// ```
    pub fn effective_layout(&self, operand: usize, layout: &Layout) -> Layout {
        let labels = &self.inputs[operand];
        let dims: Vec<usize> = labels.iter().map(|&l| self.extent(l)).collect();
        let strides: Vec<isize> = layout
            .strides()
            .iter()
            .zip(&self.stretched[operand])
            .map(|(&s, &st)| if st { 0 } else { s })
            .collect();
        // Only stride-0 axes changed extent, so the offset range is unchanged and valid.
        Layout::new(dims, strides).unwrap_or_else(|_| layout.clone())
    }

    /// Number of points of the full iteration space (product of all extents; `usize::MAX`
    /// where it overflows, as it may for networks of three or more operands).
    pub fn iteration_points(&self) -> usize {
        self.extents
            .values()
            .try_fold(1usize, |acc, &e| acc.checked_mul(e))
            .unwrap_or(usize::MAX)
    }

    /// One and two operands are computed over their whole iteration space, which must fit in
    /// `usize`; three or more run pairwise, each step checked when it is bound.
    fn check_sizes(&self) -> Result<()> {
        let points = self
            .extents
            .values()
            .try_fold(1usize, |acc, &e| acc.checked_mul(e));
        if points.is_none() && self.inputs.len() <= 2 {
            return Err(Error::SizeOverflow {
                what: format!(
                    "the iteration space of {:?} (extents {})",
                    self.spec.text(),
                    self.extents
                        .iter()
                        .map(|(l, e)| format!("{l}={e}"))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            });
        }
        let shape = self.output_shape();
        Layout::row_major(&shape).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::einsum::parse;

    #[test]
    fn ellipsis_broadcast() {
        let b = parse("...ij,...jk")
            .unwrap()
            .bind(&[&[2, 1, 3, 4], &[5, 4, 6]])
            .unwrap();
        assert_eq!(b.output_shape(), vec![2, 5, 3, 6]);
        assert_eq!(b.stretched()[0], vec![false, true, false, false]);
        assert_eq!(b.stretched()[1], vec![false, false, false]);
        let e = parse("...i,...i")
            .unwrap()
            .bind(&[&[2, 3], &[4, 3]])
            .unwrap_err();
        assert!(matches!(
            e,
            Error::Broadcast {
                dim: 0,
                first_extent: 2,
                second_extent: 4,
                first_operand: 0,
                second_operand: 1
            }
        ));
    }

    #[test]
    fn letters_of_extent_one_broadcast_across_operands() {
        let b = parse("bij,bjk->bik")
            .unwrap()
            .bind(&[&[1, 3, 4], &[5, 4, 2]])
            .unwrap();
        assert_eq!(b.output_shape(), vec![5, 3, 2]);
        assert_eq!(b.stretched()[0], vec![true, false, false]);
        assert_eq!(b.stretched()[1], vec![false, false, false]);
        // A later operand may stretch too, and a summed index broadcasts like a kept one.
        let b = parse("ij,jk,k")
            .unwrap()
            .bind(&[&[2, 1], &[3, 4], &[1]])
            .unwrap();
        assert_eq!(b.extent(Label::Letter('j')), 3);
        assert_eq!(b.extent(Label::Letter('k')), 4);
        assert_eq!(b.stretched()[2], vec![true]);
        // 1 broadcasts to 0 as to any extent.
        let b = parse("i,i->i").unwrap().bind(&[&[1], &[0]]).unwrap();
        assert_eq!(b.output_shape(), vec![0]);
        // Two extents other than 1 still disagree, naming the operand that set the extent.
        let e = parse("ij,jk,kl")
            .unwrap()
            .bind(&[&[2, 1], &[3, 4], &[5, 6]])
            .unwrap_err();
        assert!(matches!(
            e,
            Error::ExtentMismatch {
                label: 'k',
                first_operand: 1,
                first_extent: 4,
                second_operand: 2,
                second_extent: 5,
                ..
            }
        ));
        // Within one operand (a diagonal) nothing broadcasts, as in numpy.
        let e = parse("ii,i").unwrap().bind(&[&[1, 3], &[3]]).unwrap_err();
        assert!(matches!(
            e,
            Error::ExtentMismatch {
                label: 'i',
                first_operand: 0,
                second_operand: 0,
                ..
            }
        ));
        let b = parse("ii,i->i").unwrap().bind(&[&[1, 1], &[3]]).unwrap();
        assert_eq!(b.stretched()[0], vec![true, true]);
    }

    #[test]
    fn rank_and_count() {
        let s = parse("ij,jk").unwrap();
        assert!(matches!(
            s.bind(&[&[2, 2]]),
            Err(Error::OperandCount {
                expected: 2,
                given: 1,
                ..
            })
        ));
        assert!(matches!(
            s.bind(&[&[2, 2, 2], &[2, 2]]),
            Err(Error::RankMismatch {
                operand: 0,
                rank: 3,
                ..
            })
        ));
        let s = parse("i...j").unwrap();
        assert!(matches!(
            s.bind(&[&[2]]),
            Err(Error::RankMismatch {
                operand: 0,
                rank: 1,
                ..
            })
        ));
        assert_eq!(s.bind(&[&[2, 3]]).unwrap().output_shape(), vec![2, 3]);
    }

    /// `extent` reads letters from the table and `...` dimensions from the map: both agree
    /// with `extents()`, at both ends of the alphabet, and an absent label has extent 0.
    #[test]
    fn extent_table_matches_the_map() {
        let b = parse("aZ...z,zAa->...A")
            .unwrap()
            .bind(&[&[2, 3, 5, 7, 11], &[11, 13, 2]])
            .unwrap();
        assert_eq!(b.extents().len(), 6);
        for (&l, &e) in b.extents() {
            assert_eq!(b.extent(l), e, "{l}");
        }
        assert_eq!(b.extent(Label::Letter('A')), 13);
        assert_eq!(b.extent(Label::Letter('Z')), 3);
        assert_eq!(b.extent(Label::Broadcast(1)), 7);
        assert_eq!(b.extent(Label::Letter('q')), 0);
        assert_eq!(b.extent(Label::Broadcast(5)), 0);
        assert_eq!(b.extent(Label::Letter('é')), 0);
    }

    #[test]
    fn diagonal_extents_must_agree() {
        let e = parse("ii").unwrap().bind(&[&[2, 3]]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "index 'i' has extent 2 in operand 0 (axis 0) but 3 in operand 0 (axis 1)"
        );
    }

    #[test]
    fn output_needs_ellipsis() {
        assert!(matches!(
            parse("...i->i").unwrap().bind(&[&[2, 3]]),
            Err(Error::MissingOutputEllipsis { ndim: 1, .. })
        ));
        assert!(parse("...i->i").unwrap().bind(&[&[3]]).is_ok());
        assert_eq!(
            parse("i->...i")
                .unwrap()
                .bind(&[&[3]])
                .unwrap()
                .output_shape(),
            vec![3]
        );
    }

    #[test]
    fn overflow() {
        let big = 1usize << 22;
        let e = parse("abc,cde->abde")
            .unwrap()
            .bind(&[&[big, big, big], &[big, big, big]]);
        assert!(matches!(e, Err(Error::SizeOverflow { .. })));
    }
}

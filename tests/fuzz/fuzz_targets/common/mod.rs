//! Decoding helpers shared by the fuzz targets.
// Each target uses only some of these helpers.
#![allow(dead_code)]

use ndarray::{Axis, IxDyn, Slice};

/// The input read byte by byte (zeros past its end).
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    /// The next byte (0 past the end).
    pub fn next(&mut self) -> usize {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b as usize
            }
            None => 0,
        }
    }
}

/// How an operand's storage is laid out: a row-major store that is larger than the operand
/// (step 2 along one axis), with some axes reversed and the axes stored in another order.
#[derive(Clone, Copy, Debug)]
pub struct Recipe {
    pub step_axis: Option<usize>,
    pub reversed: usize,
    pub rotate: usize,
}

impl Recipe {
    /// A recipe for an operand of `rank` axes.
    pub fn read(b: &mut Bytes<'_>, rank: usize) -> Recipe {
        let x = b.next();
        Recipe {
            step_axis: (x & 1 == 1 && rank > 0).then(|| (x >> 1) % rank.max(1)),
            reversed: x >> 3,
            rotate: b.next() % rank.max(1),
        }
    }

    /// The storage shape (axes rotated, the step axis doubled).
    pub fn storage(&self, dims: &[usize]) -> Vec<usize> {
        let r = dims.len();
        (0..r)
            .map(|k| {
                let axis = (k + self.rotate) % r;
                dims[axis] * if self.step_axis == Some(axis) { 2 } else { 1 }
            })
            .collect()
    }

    /// The operand's view of its storage: axis `k` of the operand is storage axis
    /// `(r + k - rotate) % r`, then stepped and reversed.
    pub fn shape<V>(&self, mut v: ndarray::ArrayBase<V, IxDyn>) -> ndarray::ArrayBase<V, IxDyn>
    where
        V: ndarray::RawData,
    {
        let r = v.ndim();
        if r == 0 {
            return v;
        }
        let order: Vec<usize> = (0..r).map(|k| (r + k - self.rotate) % r).collect();
        v = v.permuted_axes(IxDyn(&order));
        for k in 0..r {
            if self.step_axis == Some(k) {
                v.slice_axis_inplace(Axis(k), Slice::new(0, None, 2));
            }
            if self.reversed >> k & 1 == 1 {
                v.invert_axis(Axis(k));
            }
        }
        v
    }
}

/// Operand shapes for a parsed spec of one to four operands, from two choice bytes: one
/// extent per letter (1 to 3, from the letter and the first byte), the broadcast dims of
/// `...` 1 or 2; with the second byte's top bit, any extent per dim, which the binder may
/// reject. `None` when an operand or the iteration space would be too large to run.
pub fn shapes_for(spec: &ttgt::einsum::Spec, choice: [u8; 2]) -> Option<Vec<Vec<usize>>> {
    /// Largest operand (elements).
    const MAX_ELEMENTS: usize = 4096;
    let wild = choice[1] & 0x80 != 0;
    let letter_extent = |c: char| {
        1 + (c as usize)
            .wrapping_mul(31)
            .wrapping_add(choice[0] as usize)
            % 3
    };
    let mut salt = choice[0] as usize;
    let mut shapes: Vec<Vec<usize>> = Vec::new();
    let mut space = 1usize;
    for (k, term) in spec.inputs().iter().enumerate() {
        let ell = if term.ellipsis().is_some() {
            (choice[1] as usize >> (2 * k)) % 3
        } else {
            0
        };
        let mut shape = Vec::new();
        for (pos, &c) in term.letters().iter().enumerate() {
            if term.ellipsis() == Some(pos) {
                shape.extend((0..ell).map(|d| if (k + d) % 2 == 0 { 2 } else { 1 }));
            }
            salt = salt.wrapping_mul(5).wrapping_add(1);
            shape.push(if wild { 1 + salt % 3 } else { letter_extent(c) });
        }
        if term.ellipsis() == Some(term.letters().len()) {
            shape.extend((0..ell).map(|d| if (k + d) % 2 == 0 { 2 } else { 1 }));
        }
        let n: usize = shape.iter().product();
        if n > MAX_ELEMENTS {
            return None;
        }
        space = space.saturating_mul(n.max(1));
        shapes.push(shape);
    }
    if space > 1 << 20 {
        return None;
    }
    Some(shapes)
}

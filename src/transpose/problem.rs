//! Normalization of a transposition `B = alpha * perm(A) + beta * B`: validation, size-1
//! removal and fusion of dimensions that are contiguous in both A and B.

use crate::error::{Error, Result};
use crate::tensor::{check_permutation, Layout};

/// One loop of a normalized transposition: an extent and the element strides of that
/// dimension in A and in B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim {
    /// Extent.
    pub n: usize,
    /// Stride in A (elements).
    pub sa: isize,
    /// Stride in B (elements).
    pub sb: isize,
}

/// A transposition reduced to its essential loops (in B's axis order, outermost first).
///
/// ```
/// use ttgt::{Layout, transpose::Normalized};
/// // (2,3,4) -> perm [2,0,1]: dims 0 and 1 stay adjacent in both, so they fuse.
/// let a = Layout::row_major(&[2, 3, 4]).unwrap();
/// let b = Layout::row_major(&[4, 2, 3]).unwrap();
/// let n = Normalized::new(&[2, 0, 1], &a, &b).unwrap();
/// assert_eq!(n.dims().len(), 2);
/// assert_eq!(n.elements(), 24);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Normalized {
    dims: Vec<Dim>,
    empty: bool,
}

impl Normalized {
    /// Validates `perm` (numpy meaning: axis `i` of B is axis `perm[i]` of A) against the
    /// layouts and normalizes.
    pub fn new(perm: &[usize], a: &Layout, b: &Layout) -> Result<Self> {
        check_permutation(perm, a.ndim())?;
        let want = a.permuted(perm)?;
        if want.dims() != b.dims() {
            return Err(Error::OutputShape {
                spec: format!("transpose {perm:?}"),
                expected: want.dims().to_vec(),
                given: b.dims().to_vec(),
            });
        }
        let empty = a.is_empty();
        let dims: Vec<Dim> = (0..b.ndim())
            .map(|i| Dim {
                n: b.dims()[i],
                sa: want.strides()[i],
                sb: b.strides()[i],
            })
            .filter(|d| d.n != 1)
            .collect();
        Ok(Normalized {
            dims: fuse_all(dims),
            empty,
        })
    }

    /// The loops after fusion, in B's order (outermost first).
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// Whether there is no element to move.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Number of elements moved.
    pub fn elements(&self) -> usize {
        if self.empty {
            0
        } else {
            self.dims.iter().map(|d| d.n).product()
        }
    }

    /// Whether the fused transposition is the identity (a copy, possibly scaled).
    pub fn is_copy(&self) -> bool {
        self.dims.len() <= 1 && self.dims.iter().all(|d| d.sa == d.sb)
    }
}

/// Repeatedly merges an outer dim `o` with an inner dim `i` when `o` steps exactly over `i`
/// in both tensors: `sa_o == sa_i * n_i` and `sb_o == sb_i * n_i`.
fn fuse_all(mut dims: Vec<Dim>) -> Vec<Dim> {
    'again: loop {
        for o in 0..dims.len() {
            for i in 0..dims.len() {
                if o == i {
                    continue;
                }
                let (dout, din) = (dims[o], dims[i]);
                let step = din.n as isize;
                if dout.sa == din.sa.wrapping_mul(step) && dout.sb == din.sb.wrapping_mul(step) {
                    dims[i] = Dim {
                        n: dout.n * din.n,
                        sa: din.sa,
                        sb: din.sb,
                    };
                    dims.remove(o);
                    continue 'again;
                }
            }
        }
        return dims;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(perm: &[usize], dims: &[usize]) -> Normalized {
        let a = Layout::row_major(dims).unwrap();
        let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        Normalized::new(perm, &a, &Layout::row_major(&bd).unwrap()).unwrap()
    }

    #[test]
    fn identity_fuses_to_copy() {
        let n = norm(&[0, 1, 2], &[3, 4, 5]);
        assert!(n.is_copy());
        assert_eq!(
            n.dims(),
            &[Dim {
                n: 60,
                sa: 1,
                sb: 1
            }]
        );
    }

    #[test]
    fn partial_fusion() {
        // (a b c d) -> (c d a b): two fused groups, a 2-D transpose
        let n = norm(&[2, 3, 0, 1], &[2, 3, 4, 5]);
        assert_eq!(n.dims().len(), 2);
        assert!(!n.is_copy());
        // size-1 dims vanish
        let n = norm(&[1, 0, 2], &[1, 7, 1]);
        assert!(n.is_copy());
    }

    #[test]
    fn shape_mismatch_and_bad_perm() {
        let a = Layout::row_major(&[2, 3]).unwrap();
        assert!(Normalized::new(&[1, 0], &a, &a).is_err());
        assert!(Normalized::new(&[0, 0], &a, &a).is_err());
    }
}

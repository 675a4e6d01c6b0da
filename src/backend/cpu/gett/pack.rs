//! Offsets of a range of a multi-index (the GETT engine's "scatter vectors") and the packing
//! of operand blocks into micro-panels, read straight from the strided tensors.

use crate::tensor::Element;

/// One index of a GETT group: its extent and its strides in the two tensors that hold it
/// (M: A and C; N: B and C; K: A and B).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dim {
    pub ext: usize,
    pub s: [isize; 2],
}

/// Fills `o0`/`o1` with the offsets (in the two tensors) of the linear indices
/// `start..start + len` of `dims` (outermost first; the last dim varies fastest).
pub(crate) fn offsets(
    dims: &[Dim],
    start: usize,
    len: usize,
    o0: &mut Vec<isize>,
    o1: &mut Vec<isize>,
) {
    o0.clear();
    o1.clear();
    let mut digit = vec![0usize; dims.len()];
    let mut rest = start;
    for (d, dim) in digit.iter_mut().zip(dims).rev() {
        *d = rest % dim.ext.max(1);
        rest /= dim.ext.max(1);
    }
    let (mut x0, mut x1) = (0isize, 0isize);
    for (d, dim) in digit.iter().zip(dims) {
        x0 += *d as isize * dim.s[0];
        x1 += *d as isize * dim.s[1];
    }
    for _ in 0..len {
        o0.push(x0);
        o1.push(x1);
        // odometer step, innermost first
        for (d, dim) in digit.iter_mut().zip(dims).rev() {
            *d += 1;
            x0 += dim.s[0];
            x1 += dim.s[1];
            if *d < dim.ext {
                break;
            }
            x0 -= dim.ext as isize * dim.s[0];
            x1 -= dim.ext as isize * dim.s[1];
            *d = 0;
        }
    }
}

/// Packs the block `src[rows[i] + cols[p]]` (`i < rows.len()`, `p < cols.len()`) into
/// panels of `r` rows: panel `q` holds, for each `p`, the values of rows `q*r .. q*r + r`
/// (zeros past the last row). `dst` receives `ceil(rows/r) * r * cols` values.
///
/// # Safety
/// Every `src + rows[i] + cols[p]` addresses a readable element.
pub(crate) unsafe fn pack_panels<T: Element>(
    src: *const T,
    rows: &[isize],
    cols: &[isize],
    r: usize,
    dst: &mut [T],
) {
    let kc = cols.len();
    // Read along whichever direction is closer to contiguous in the source.
    let step = |o: &[isize]| {
        if o.len() > 1 {
            (o[1] - o[0]).unsigned_abs()
        } else {
            usize::MAX
        }
    };
    let rows_inner = step(rows) <= step(cols);
    for (q, chunk) in rows.chunks(r).enumerate() {
        let panel = &mut dst[q * r * kc..(q + 1) * r * kc];
        if chunk.len() < r {
            panel.fill(T::zero());
        }
        if rows_inner {
            for (p, &cp) in cols.iter().enumerate() {
                let out = &mut panel[p * r..p * r + chunk.len()];
                for (o, &ri) in out.iter_mut().zip(chunk) {
                    // SAFETY: the caller guarantees every rows[i] + cols[p] is readable.
                    *o = *src.offset(ri + cp);
                }
            }
        } else {
            for (i, &ri) in chunk.iter().enumerate() {
                let base = src.offset(ri);
                for (p, &cp) in cols.iter().enumerate() {
                    // SAFETY: as above.
                    panel[p * r + i] = *base.offset(cp);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_the_odometer() {
        let dims = [
            Dim { ext: 3, s: [10, 1] },
            Dim {
                ext: 2,
                s: [1, 100],
            },
        ];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        offsets(&dims, 1, 4, &mut a, &mut b);
        // linear 1..5 = (0,1) (1,0) (1,1) (2,0)
        assert_eq!(a, vec![1, 10, 11, 20]);
        assert_eq!(b, vec![100, 1, 101, 2]);
        offsets(&[], 0, 1, &mut a, &mut b);
        assert_eq!((a, b), (vec![0], vec![0]));
    }

    #[test]
    fn panels_hold_rows_then_zeros() {
        let src: Vec<f64> = (0..20).map(f64::from).collect();
        let rows = [0isize, 5, 10];
        let cols = [0isize, 1];
        let mut dst = vec![f64::NAN; 2 * 2 * 2];
        unsafe { pack_panels(src.as_ptr(), &rows, &cols, 2, &mut dst) };
        assert_eq!(dst, vec![0.0, 5.0, 1.0, 6.0, 10.0, 0.0, 11.0, 0.0]);
    }
}

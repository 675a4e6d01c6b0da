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

/// Panels whose rows are gathered together at least (so that a depth step reads a few
/// lines in a row from each source page it touches).
const GROUP_PANELS: usize = 8;

/// How to read one operand's blocks: along the rows or along the columns (the direction
/// holding the operand's smallest stride), and, for rows, how many consecutive rows are
/// gathered in address order at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gather {
    /// Rows are the inner loop (each depth step reads a run of rows).
    pub rows_inner: bool,
    /// Rows per group (a multiple of the panel height): enough that the operand's
    /// unit-stride index, when it is not the innermost row index, makes runs of a whole
    /// cache line inside the group.
    pub group: usize,
}

impl Gather {
    /// The gather for an operand whose rows are `rows` (outermost first, strides in tensor
    /// `t.0`) and columns `cols` (tensor `t.1`), packed into panels of `r` rows of `es`-byte
    /// values.
    pub(crate) fn new(rows: &[Dim], cols: &[Dim], t: (usize, usize), r: usize, es: usize) -> Self {
        let min = |d: &[Dim], t: usize| {
            d.iter()
                .enumerate()
                .filter(|(_, x)| x.ext > 1)
                .min_by_key(|(_, x)| x.s[t].unsigned_abs())
                .map(|(i, x)| (i, x.s[t].unsigned_abs()))
        };
        let (row, col) = (min(rows, t.0), min(cols, t.1));
        let rows_inner = match (row, col) {
            (Some((_, x)), Some((_, y))) => x <= y,
            (Some(_), None) => true,
            _ => false,
        };
        // rows between neighbours along the smallest-stride row index
        let dist: usize = row.map_or(1, |(u, _)| rows[u + 1..].iter().map(|x| x.ext).product());
        let line = (64 / es.max(1)).max(1);
        Gather {
            rows_inner,
            group: (dist.max(1) * line).div_ceil(r).max(GROUP_PANELS) * r,
        }
    }
}

/// The working lists of [`pack_panels`], kept between calls.
#[derive(Debug, Default)]
pub(crate) struct PackBuffers {
    /// (source offset, panel position at depth 0) of each row of a group, in address order.
    order: Vec<(isize, usize)>,
    /// The same merged into runs consecutive in both: (source, panel, length).
    runs: Vec<(isize, usize, usize)>,
}

/// Copies `len` values from `src` to `dst`: runs of up to two cache lines by unaligned
/// moves of 32, 16, 8 and 4 bytes (a library call costs more than the copy at these
/// lengths), longer ones through `copy_nonoverlapping`.
///
/// # Safety
/// `src` is readable and `dst` writable for `len` values; they do not overlap. `T` is 4, 8
/// or 16 bytes (every element type).
#[inline(always)]
unsafe fn copy_run<T>(src: *const T, dst: *mut T, len: usize) {
    let bytes = len * std::mem::size_of::<T>();
    if bytes > 128 {
        // SAFETY: as the caller guarantees.
        std::ptr::copy_nonoverlapping(src, dst, len);
        return;
    }
    let (s, d) = (src.cast::<u8>(), dst.cast::<u8>());
    let mut at = 0;
    // SAFETY: every move stays inside the `bytes` bytes the caller guarantees (element
    // sizes are multiples of 4, so the steps below end exactly at `bytes`).
    // four tests, not a loop: a loop of moves would be turned back into a library call
    for _ in 0..4 {
        if at + 32 > bytes {
            break;
        }
        let v = std::ptr::read_unaligned(s.add(at).cast::<[u64; 4]>());
        std::ptr::write_unaligned(d.add(at).cast::<[u64; 4]>(), v);
        at += 32;
    }
    if at + 16 <= bytes {
        let v = std::ptr::read_unaligned(s.add(at).cast::<[u64; 2]>());
        std::ptr::write_unaligned(d.add(at).cast::<[u64; 2]>(), v);
        at += 16;
    }
    if at + 8 <= bytes {
        let v = std::ptr::read_unaligned(s.add(at).cast::<u64>());
        std::ptr::write_unaligned(d.add(at).cast::<u64>(), v);
        at += 8;
    }
    if at + 4 <= bytes {
        let v = std::ptr::read_unaligned(s.add(at).cast::<u32>());
        std::ptr::write_unaligned(d.add(at).cast::<u32>(), v);
    }
}

/// Packs the block `src[rows[i] + cols[p]]` (`i < rows.len()`, `p < cols.len()`) into
/// panels of `r` rows: panel `q` holds, for each `p`, the values of rows `q*r .. q*r + r`
/// (zeros past the last row). `dst` receives `ceil(rows/r) * r * cols` values; `buf` is
/// reused from call to call.
///
/// With `g.rows_inner`, each group of `g.group` rows is read in the source's address order
/// for one depth step after the other. A block whose rows run along a non-innermost index of
/// the source (rows `(b, a)` of a tensor where `b` is contiguous and `a` far apart) then
/// reads whole cache lines from a few pages at a time instead of one element from each of
/// thousands of pages per panel row, which is bound by address translation, not memory.
/// Otherwise each row reads its columns in turn.
///
/// # Safety
/// Every `src + rows[i] + cols[p]` addresses a readable element, and `dst` holds at least
/// `ceil(rows/r) * r * cols` values.
pub(crate) unsafe fn pack_panels<T: Element>(
    src: *const T,
    rows: &[isize],
    cols: &[isize],
    r: usize,
    g: Gather,
    dst: &mut [T],
    buf: &mut PackBuffers,
) {
    let PackBuffers { order, runs } = buf;
    let kc = cols.len();
    if !rows.len().is_multiple_of(r) {
        // the last panel's missing rows are zeros
        let q = rows.len() / r;
        dst[q * r * kc..(q + 1) * r * kc].fill(T::zero());
    }
    let d = dst.as_mut_ptr();
    if g.rows_inner {
        let group = g.group.max(r);
        for start in (0..rows.len()).step_by(group) {
            let part = &rows[start..rows.len().min(start + group)];
            // (source offset, destination of depth 0) of each row, in address order
            order.clear();
            order.extend(part.iter().enumerate().map(|(j, &ro)| {
                let i = start + j;
                (ro, (i / r) * r * kc + i % r)
            }));
            if part.windows(2).any(|w| w[1] < w[0]) {
                order.sort_unstable_by_key(|x| x.0);
            }
            // merge rows that are consecutive in both the source and the panel into runs
            runs.clear();
            for &(ro, at) in order.iter() {
                match runs.last_mut() {
                    Some((r0, a0, len)) if *r0 + *len as isize == ro && *a0 + *len == at => {
                        *len += 1
                    }
                    _ => runs.push((ro, at, 1)),
                }
            }
            for (p, &cp) in cols.iter().enumerate() {
                let base = src.offset(cp);
                let out = d.add(p * r);
                for &(ro, at, len) in runs.iter() {
                    // SAFETY: the caller guarantees rows[i] + cols[p] is readable for each
                    // row of the run and that `dst` covers panel i / r, line p, lane i % r
                    // (= at + p * r, the run's lanes following on); source and scratch
                    // do not overlap.
                    copy_run(base.offset(ro), out.add(at), len);
                }
            }
        }
    } else {
        for (i, &ri) in rows.iter().enumerate() {
            let base = src.offset(ri);
            let row = d.add((i / r) * r * kc + i % r);
            for (p, &cp) in cols.iter().enumerate() {
                // SAFETY: as above.
                *row.add(p * r) = *base.offset(cp);
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
        let g = Gather {
            rows_inner: true,
            group: 2,
        };
        unsafe {
            pack_panels(
                src.as_ptr(),
                &rows,
                &cols,
                2,
                g,
                &mut dst,
                &mut PackBuffers::default(),
            )
        };
        assert_eq!(dst, vec![0.0, 5.0, 1.0, 6.0, 10.0, 0.0, 11.0, 0.0]);
    }

    /// Rows and columns in any address order (descending, interleaved runs, a unit run
    /// hidden under a far-apart index), both loop orders: every value lands where the panel
    /// layout puts it.
    #[test]
    fn panels_from_any_address_order() {
        let src: Vec<f64> = (0..4000).map(f64::from).collect();
        let lists: [&[isize]; 4] = [
            &[0, 100, 1, 101, 2, 102, 3],
            &[30, 20, 10, 0],
            &[5],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8],
        ];
        for rows in lists {
            for cols in lists {
                let cols: Vec<isize> = cols.iter().map(|c| c * 37).collect();
                for r in [1, 2, 4] {
                    let panels = rows.len().div_ceil(r);
                    let mut dst = vec![f64::NAN; panels * r * cols.len()];
                    for g in [
                        Gather {
                            rows_inner: true,
                            group: r,
                        },
                        Gather {
                            rows_inner: true,
                            group: 4 * r,
                        },
                        Gather {
                            rows_inner: false,
                            group: r,
                        },
                    ] {
                        unsafe {
                            pack_panels(
                                src.as_ptr(),
                                rows,
                                &cols,
                                r,
                                g,
                                &mut dst,
                                &mut PackBuffers::default(),
                            )
                        };
                        for q in 0..panels {
                            for (p, &c) in cols.iter().enumerate() {
                                for lane in 0..r {
                                    let i = q * r + lane;
                                    let want =
                                        rows.get(i).map_or(0.0, |&ro| src[(ro + c) as usize]);
                                    assert_eq!(dst[(q * cols.len() + p) * r + lane], want);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

//! Offset arrays (TTLG's Algorithm 4) and the meta table a kernel reads: header, outer
//! dims, arrays. The layout matches `enum Meta` in `kernels/ttgt_common.cuh`.

use super::problem::GpuProblem;
use super::slice::{fl_group_rows, fs_pad, oa_col, oa_row_stride, Side, Slice};
use super::Schema;

/// Header entries (`M_HEADER`).
pub(crate) const HEADER: usize = 16;
pub(crate) const M_NBLK: usize = 0;
const M_VA: usize = 1;
const M_INNER_A: usize = 2;
const M_NA: usize = 3;
const M_BA: usize = 4;
const M_VB: usize = 5;
const M_NB: usize = 7;
const M_P0: usize = 9;
/// OD and OA with 2x2 blocks: A offset of a block's second row, B offset of its second column.
const M_DA: usize = 14;
const M_DB: usize = 15;

/// One outer dim: extent and strides in A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OuterDim {
    pub n: usize,
    pub sa: isize,
    pub sb: isize,
}

const UNIT: OuterDim = OuterDim { n: 1, sa: 0, sb: 0 };

/// The outer part of a side's blocked dim (extent 1 when not blocked).
fn blocked_outer(p: &GpuProblem, dim: Option<usize>, b: usize) -> OuterDim {
    match dim {
        Some(d) if b < p.dims[d].n => {
            let x = p.dims[d];
            OuterDim {
                n: x.n.div_ceil(b),
                sa: x.sa * b as isize,
                sb: x.sb * b as isize,
            }
        }
        _ => UNIT,
    }
}

/// Outer dims of a slice: [input-side blocks, output-side blocks, the remaining dims in A's
/// order].
pub(crate) fn outer_dims(p: &GpuProblem, s: &Slice) -> Vec<OuterDim> {
    let inside = s.slice_dims(p);
    let (d0, d1) = match s.schema {
        Schema::FviMatchLarge => (blocked_outer(p, Some(p.fvi_in()), s.chunk), UNIT),
        _ => (
            blocked_outer(p, s.input.dims.last().copied(), s.input.block),
            blocked_outer(p, s.output.dims.last().copied(), s.output.block),
        ),
    };
    let mut v = vec![d0, d1];
    for &d in &p.in_order {
        if !inside.contains(&d) {
            let x = p.dims[d];
            v.push(OuterDim {
                n: x.n,
                sa: x.sa,
                sb: x.sb,
            });
        }
    }
    v
}

/// Offsets in A and B of every index of a mixed-radix walk over `dims` (fastest first).
fn walk(p: &GpuProblem, dims: &[usize], exts: &[usize]) -> (Vec<i64>, Vec<i64>) {
    let vol: usize = exts.iter().product();
    let mut a = Vec::with_capacity(vol);
    let mut b = Vec::with_capacity(vol);
    let mut digit = vec![0usize; dims.len()];
    for _ in 0..vol {
        let (mut oa, mut ob) = (0i64, 0i64);
        for (k, &d) in dims.iter().enumerate() {
            oa += digit[k] as i64 * p.dims[d].sa as i64;
            ob += digit[k] as i64 * p.dims[d].sb as i64;
        }
        a.push(oa);
        b.push(ob);
        for k in 0..dims.len() {
            digit[k] += 1;
            if digit[k] < exts[k] {
                break;
            }
            digit[k] = 0;
        }
    }
    (a, b)
}

fn side_header(m: &mut [i64], p: &GpuProblem, side: &Side, at: usize) {
    let (vol, inner, n, b) = if side.dims.is_empty() {
        (1, 1, 1, 1)
    } else {
        (
            side.volume(p),
            side.inner(p),
            side.blocked_extent(p),
            side.block,
        )
    };
    m[at] = vol as i64;
    m[at + 1] = inner as i64;
    m[at + 2] = n as i64;
    m[at + 3] = b as i64;
}

/// The meta table of a slice whose outer dims are padded to `rank`.
pub(crate) fn build_meta(p: &GpuProblem, s: &Slice, outer: &[OuterDim], rank: usize) -> Vec<i64> {
    let mut m = vec![0i64; HEADER + 3 * rank];
    m[M_NBLK] = outer.iter().map(|o| o.n as i64).product();
    for k in 0..rank {
        let o = outer.get(k).copied().unwrap_or(UNIT);
        m[HEADER + k] = o.n as i64;
        m[HEADER + rank + k] = o.sa as i64;
        m[HEADER + 2 * rank + k] = o.sb as i64;
    }
    let push = |m: &mut Vec<i64>, slot: usize, arr: &[i64]| {
        m[M_P0 + slot] = m.len() as i64;
        m.extend_from_slice(arr);
    };
    match s.schema {
        Schema::OrthogonalDistinct | Schema::OrthogonalArbitrary => {
            side_header(&mut m, p, &s.input, M_VA);
            side_header(&mut m, p, &s.output, M_VB);
            let ea = s.input.extents(p);
            let eb = s.output.extents(p);
            let (a_col, b_col) = walk(p, &s.input.dims, &ea);
            let (a_row, b_row) = walk(p, &s.output.dims, &eb);
            if s.schema == Schema::OrthogonalDistinct {
                push(&mut m, 0, &a_col);
                push(&mut m, 1, &b_col);
                push(&mut m, 2, &a_row);
                push(&mut m, 3, &b_row);
            } else {
                // Elements of the slice in B's order: their B offsets and buffer indices.
                let va = a_col.len();
                let size = p.elem_bytes();
                let rs = oa_row_stride(va, size);
                let mut all: Vec<(usize, usize, bool)> = s
                    .input
                    .dims
                    .iter()
                    .zip(&ea)
                    .map(|(&d, &e)| (d, e, true))
                    .chain(s.output.dims.iter().zip(&eb).map(|(&d, &e)| (d, e, false)))
                    .collect();
                all.sort_by_key(|&(d, _, _)| (p.dims[d].sb.unsigned_abs(), usize::MAX - d));
                let total = va * a_row.len();
                let mut b_elem = Vec::with_capacity(total);
                let mut sm_elem = Vec::with_capacity(total);
                let mut digit = vec![0usize; all.len()];
                // Mixed-radix weights of each dim in the column and row numbering.
                let weight = |side: &[usize], exts: &[usize], d: usize| -> usize {
                    // `d` is a dim of this side (the callers iterate that side's dims).
                    let k = side.iter().position(|&x| x == d);
                    debug_assert!(k.is_some(), "dim {d} not on its side");
                    let k = k.unwrap_or(0);
                    exts[..k].iter().product()
                };
                let w: Vec<usize> = all
                    .iter()
                    .map(|&(d, _, col)| {
                        if col {
                            weight(&s.input.dims, &ea, d)
                        } else {
                            weight(&s.output.dims, &eb, d)
                        }
                    })
                    .collect();
                for _ in 0..total {
                    let (mut ob, mut c, mut r) = (0i64, 0usize, 0usize);
                    for (k, &(d, _, col)) in all.iter().enumerate() {
                        ob += digit[k] as i64 * p.dims[d].sb as i64;
                        if col {
                            c += digit[k] * w[k];
                        } else {
                            r += digit[k] * w[k];
                        }
                    }
                    b_elem.push(ob);
                    sm_elem.push((r * rs + oa_col(c, size)) as i64);
                    for k in 0..all.len() {
                        digit[k] += 1;
                        if digit[k] < all[k].1 {
                            break;
                        }
                        digit[k] = 0;
                    }
                }
                push(&mut m, 0, &a_col);
                push(&mut m, 1, &a_row);
                push(&mut m, 2, &b_elem);
                push(&mut m, 3, &sm_elem);
                m[M_P0 + 4] = rs as i64;
            }
            if let Some(mb) = p.micro {
                m[M_DA] = mb.da as i64;
                m[M_DB] = mb.db as i64;
            }
        }
        Schema::FviMatchLarge => {
            let f = p.dims[p.fvi_in()];
            m[M_VA] = s.chunk as i64;
            m[M_INNER_A] = 1;
            m[M_NA] = f.n as i64;
            m[M_BA] = s.chunk as i64;
            m[M_VB] = fl_group_rows(f.n, s.chunk, p.elem_bytes()) as i64;
            m[M_P0] = f.sa as i64;
            m[M_P0 + 1] = f.sb as i64;
        }
        Schema::FviMatchSmall => {
            let f = p.dims[p.fvi_in()];
            let i1 = p.dims[s.input.dims[0]];
            let o1 = p.dims[s.output.dims[0]];
            let b = s.input.block;
            m[M_VA] = f.n as i64;
            m[M_VB] = b as i64;
            m[M_NA] = i1.n as i64;
            m[M_NB] = o1.n as i64;
            let ps = [
                f.sa,
                f.sb,
                i1.sa,
                i1.sb,
                o1.sa,
                o1.sb,
                fs_pad(f.n, b) as isize,
            ];
            for (k, v) in ps.iter().enumerate() {
                m[M_P0 + k] = *v as i64;
            }
        }
    }
    m
}

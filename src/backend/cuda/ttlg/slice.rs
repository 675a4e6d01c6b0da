//! Slices: which dims a thread block moves (TTLG's Algorithm 1 for the schema, Algorithm 3
//! for the slice sizes and blocking), as candidates the performance model ranks.

use super::problem::GpuProblem;
use super::Schema;

/// Warp size.
pub(crate) const WS: usize = 32;

/// One side of a slice: dims (fastest first) and the extent used of the last one (the
/// blocked dim; equal to its extent when not blocked).
///
/// ```
/// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
/// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
/// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
/// let s = &p.slice.input;
/// assert!(!s.dims.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Side {
    /// Indices into [`GpuProblem::dims`].
    pub dims: Vec<usize>,
    /// Block size of the last dim.
    pub block: usize,
}

impl Side {
    /// Extent used of each dim.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
    /// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let s = &p.slice.input;
    /// assert_eq!(s.extents(&p.problem).len(), s.dims.len());
    /// ```
    pub fn extents(&self, p: &GpuProblem) -> Vec<usize> {
        let k = self.dims.len();
        self.dims
            .iter()
            .enumerate()
            .map(|(i, &d)| if i + 1 == k { self.block } else { p.dims[d].n })
            .collect()
    }

    /// Volume of a full slice side.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
    /// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let s = &p.slice.input;
    /// assert!(s.volume(&p.problem) >= 32);
    /// ```
    pub fn volume(&self, p: &GpuProblem) -> usize {
        self.inner(p) * self.dims.last().map_or(1, |_| self.block)
    }

    /// Product of the extents below the blocked dim.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
    /// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let s = &p.slice.input;
    /// assert!(s.inner(&p.problem) <= s.volume(&p.problem));
    /// ```
    pub fn inner(&self, p: &GpuProblem) -> usize {
        // (No allocation: planning evaluates this for every candidate slice.)
        let k = self.dims.len().saturating_sub(1);
        self.dims[..k].iter().map(|&d| p.dims[d].n).product()
    }

    /// Extent of the blocked dim (1 when the side is empty).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
    /// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let s = &p.slice.input;
    /// assert!(s.blocked_extent(&p.problem) >= s.block_size());
    /// ```
    pub fn blocked_extent(&self, p: &GpuProblem) -> usize {
        self.dims.last().map_or(1, |&d| p.dims[d].n)
    }

    /// Block size of the blocked dim (1 when the side is empty).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
    /// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let s = &p.slice.input;
    /// assert!(s.block_size() >= 1);
    /// ```
    pub fn block_size(&self) -> usize {
        if self.dims.is_empty() {
            1
        } else {
            self.block
        }
    }

    /// Whether the last dim is cut into blocks.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
    /// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let s = &p.slice.input;
    /// assert_eq!(s.is_blocked(&p.problem), s.block < s.blocked_extent(&p.problem));
    /// ```
    pub fn is_blocked(&self, p: &GpuProblem) -> bool {
        !self.dims.is_empty() && self.block < self.blocked_extent(p)
    }
}

/// What a thread block moves, per schema.
///
/// * Orthogonal-Distinct: `input` = columns (A's fastest dims), `output` = rows (B's fastest
///   dims), disjoint.
/// * Orthogonal-Arbitrary: `input` = columns, `output` = rows = B's fastest dims that are not
///   columns.
/// * FVI-Match-Large: `input.dims` = the shared fastest dim; `chunk` = elements of it per
///   block row.
/// * FVI-Match-Small: `input` = A's second dim blocked by `b`, `output` = B's second dim
///   blocked by `b`; the shared fastest dim is whole.
///
/// ```
/// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
/// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
/// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
/// let s = &p.slice.input;
/// assert_eq!(p.slice.schema, p.schema);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    /// The schema.
    pub schema: Schema,
    /// Input side.
    pub input: Side,
    /// Output side.
    pub output: Side,
    /// FVI-Match-Large: elements of the fastest dim per block row.
    pub chunk: usize,
}

impl Slice {
    /// Dims moved inside a slice (not selected by the block number).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[100, 7, 60]).unwrap(), ttgt::Layout::row_major(&[60, 7, 100]).unwrap());
    /// let p = TtlgPlan::new(&[2, 1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let s = &p.slice.input;
    /// assert!(p.slice.slice_dims(&p.problem).len() >= 2);
    /// ```
    pub fn slice_dims(&self, p: &GpuProblem) -> Vec<usize> {
        let mut v: Vec<usize> = match self.schema {
            Schema::FviMatchSmall => vec![p.fvi_in()],
            _ => Vec::new(),
        };
        v.extend(&self.input.dims);
        v.extend(&self.output.dims);
        v
    }
}

/// Walks `order` accumulating extents until the volume reaches `limit`; the dim that crosses
/// it is blocked (TTLG Alg. 3, lines 10-18). Dims for which `stop` holds end the walk.
fn prefix(p: &GpuProblem, order: &[usize], limit: usize, stop: impl Fn(usize) -> bool) -> Side {
    let mut side = Side::default();
    let mut vol = 1usize;
    for &d in order {
        if stop(d) {
            break;
        }
        let n = p.dims[d].n;
        side.dims.push(d);
        if vol.saturating_mul(n) >= limit {
            side.block = limit.div_ceil(vol).min(n);
            return side;
        }
        vol *= n;
        side.block = n;
    }
    side
}

/// The largest per-side limit Alg. 3 tries.
const MAX_SIDE: usize = 1024;

/// Orthogonal-Distinct candidates: input-order prefixes that stop before B's fastest dim,
/// output-order prefixes that stop at the first input-slice dim.
pub(crate) fn od_candidates(p: &GpuProblem) -> Vec<Slice> {
    let mut out = Vec::new();
    if p.fvi_match() {
        return out;
    }
    let fo = p.fvi_out();
    for is in unique_runs(
        (WS..=MAX_SIDE)
            .step_by(WS)
            .map(|la| prefix(p, &p.in_order, la, |d| d == fo)),
    ) {
        if is.dims.is_empty() {
            continue;
        }
        let oss = (WS..=MAX_SIDE)
            .step_by(WS)
            .map(|lb| prefix(p, &p.out_order, lb, |d| is.dims.contains(&d)));
        for os in unique_runs(oss) {
            if !os.dims.is_empty() {
                out.push(Slice {
                    schema: Schema::OrthogonalDistinct,
                    input: is.clone(),
                    output: os,
                    chunk: 0,
                });
            }
        }
    }
    out
}

/// The distinct items of `it` when equal items are adjacent (prefixes for growing limits
/// are: a longer limit never gives back an earlier prefix), in order, without comparing
/// every pair.
fn unique_runs<T: PartialEq>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = Vec::new();
    for x in it {
        if v.last() != Some(&x) {
            v.push(x);
        }
    }
    v
}

/// The distinct items of `it`, in first-seen order.
fn unique<T: PartialEq>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// Orthogonal-Arbitrary candidates: any input-order prefix for the columns; rows are the
/// dims of an output-order prefix that are not columns, the last one blocked. The walk over
/// B's order counts column dims too (they belong to the contiguous output run) and stops
/// after a blocked column dim. Slices must fit in shared memory.
pub(crate) fn oa_candidates(p: &GpuProblem, max_shared: usize) -> Vec<Slice> {
    let size = p.elem_bytes();
    let cap = max_shared / size;
    let mut out = Vec::new();
    for is in unique_runs(
        (WS..=MAX_SIDE)
            .step_by(WS)
            .map(|la| prefix(p, &p.in_order, la, |_| false)),
    ) {
        let va = is.volume(p);
        let rows_all = (WS..=MAX_SIDE).step_by(WS).map(|lb| {
            let mut rows = Side::default();
            let mut vol = 1usize;
            for &d in &p.out_order {
                if let Some(k) = is.dims.iter().position(|&x| x == d) {
                    let e = if k + 1 == is.dims.len() {
                        is.block
                    } else {
                        p.dims[d].n
                    };
                    vol = vol.saturating_mul(e);
                    if e < p.dims[d].n || vol >= lb {
                        break;
                    }
                    continue;
                }
                let n = p.dims[d].n;
                rows.dims.push(d);
                if vol.saturating_mul(n) >= lb {
                    rows.block = lb.div_ceil(vol).min(n);
                    break;
                }
                vol *= n;
                rows.block = n;
            }
            if rows.dims.is_empty() {
                rows.block = 1;
            }
            rows
        });
        for rows in unique(rows_all) {
            if oa_shared_elems(va, rows.volume(p), size) <= cap {
                out.push(Slice {
                    schema: Schema::OrthogonalArbitrary,
                    input: is.clone(),
                    output: rows,
                    chunk: 0,
                });
            }
        }
    }
    if out.is_empty() {
        // The smallest slice: one element column, no rows (always fits).
        let d = p.in_order[0];
        out.push(Slice {
            schema: Schema::OrthogonalArbitrary,
            input: Side {
                dims: vec![d],
                // Columns whose skewed row fits (the skew adds at most 1/8).
                block: p.dims[d].n.min((cap.saturating_sub(2) * 8 / 9).max(1)),
            },
            output: Side {
                dims: vec![],
                block: 1,
            },
            chunk: 0,
        });
    }
    out
}

/// FVI-Match-Large: the shared fastest dim, cut into chunks of at most 4096 elements when
/// longer than 8192 (so that one long row still spreads over many blocks).
pub(crate) fn fl_candidates(p: &GpuProblem) -> Vec<Slice> {
    if !p.fvi_match() {
        return Vec::new();
    }
    let f = p.fvi_in();
    let n0 = p.dims[f].n;
    let chunk = if n0 > 8192 { 4096 } else { n0 };
    vec![Slice {
        schema: Schema::FviMatchLarge,
        input: Side {
            dims: vec![f],
            block: n0,
        },
        output: Side::default(),
        chunk,
    }]
}

/// Warps of an FVI-Match-Small block (256 threads). Each phase of `kernels/ttlg_fs.cu`
/// hands the brick's b rows to them in turns, so a b that is not a multiple of 8 leaves
/// warps idle in the last turn of both phases (b = 12: two turns for 1.5 turns of work).
pub(crate) const FS_WARPS: usize = 8;

/// FVI-Match-Small: every b whose b x (b*N0 + pad) buffer fits in shared memory and that
/// gives the 8 warps whole turns: b a multiple of [`FS_WARPS`], or the larger of the two
/// blocked dims whole (b = its extent), or any b when that extent is below 8. The model's
/// features (volume, blocks) cannot see the idle warps; measured tuning chose blocks of
/// this set over the model's other picks (see `docs/TUNING.md`).
pub(crate) fn fs_candidates(p: &GpuProblem, max_shared: usize) -> Vec<Slice> {
    if !p.fvi_match() || p.dims.len() < 3 {
        return Vec::new();
    }
    let (i1, o1) = (p.in_order[1], p.out_order[1]);
    if i1 == o1 {
        return Vec::new();
    }
    let n0 = p.dims[p.fvi_in()].n;
    let size = p.elem_bytes();
    let nmax = p.dims[i1].n.max(p.dims[o1].n);
    let mut out = Vec::new();
    for b in 1..=WS.min(nmax) {
        if fs_shared_elems(n0, b) * size > max_shared {
            break;
        }
        if nmax >= FS_WARPS && b % FS_WARPS != 0 && b != nmax {
            continue;
        }
        out.push(Slice {
            schema: Schema::FviMatchSmall,
            input: Side {
                dims: vec![i1],
                block: b,
            },
            output: Side {
                dims: vec![o1],
                block: b,
            },
            chunk: 0,
        });
    }
    out
}

/// Most rows an FVI-Match-Large block takes as one group (`TTGT_FL_MAX_GROUP` in
/// `kernels/ttlg_fl.cu`).
pub(crate) const FL_MAX_GROUP: usize = 64;

/// FVI-Match-Large: rows per block group, about 256 x U elements (U = 8 loads in flight per
/// thread for 4-byte elements, else 4); 1 when long rows are cut into chunks (every row of a
/// larger group must have the same length). Rows of 44 16-byte elements: 23 rows a group
/// (`tests/cuda_plan.rs` checks this and other cases through the plan's meta table).
pub(crate) fn fl_group_rows(n0: usize, chunk: usize, elem_bytes: usize) -> usize {
    if chunk < n0 {
        return 1;
    }
    let u = if elem_bytes <= 4 { 8 } else { 4 };
    (256 * u / n0.max(1)).clamp(1, FL_MAX_GROUP)
}

/// Padding of an FVI-Match-Small buffer row: row length = N0 (mod 32).
pub(crate) fn fs_pad(n0: usize, b: usize) -> usize {
    (WS - (b * n0 - n0) % WS) % WS
}

/// Orthogonal-Arbitrary buffer columns are skewed by one element every 128 bytes (32 banks):
/// column `c` sits at `c + (c >> shift)`, so that a warp reading columns a power of two
/// apart (B's fastest dim inside the input slice) spreads over the banks.
fn oa_skew_shift(size: usize) -> u32 {
    match size {
        0..=4 => 5,
        5..=8 => 4,
        _ => 3,
    }
}

/// Position of column `c` inside an Orthogonal-Arbitrary buffer row (see `oa_skew_shift`).
pub(crate) fn oa_col(c: usize, size: usize) -> usize {
    c + (c >> oa_skew_shift(size))
}

/// Distance in elements between Orthogonal-Arbitrary buffer rows: past the last skewed
/// column, rounded up to an odd number, so that a warp reading down a column (B's fastest
/// dim among the rows) hits distinct banks. The kernel reads it from meta slot `M_P4`.
pub(crate) fn oa_row_stride(va: usize, size: usize) -> usize {
    (oa_col(va.max(1) - 1, size) + 1) | 1
}

/// Elements of an Orthogonal-Arbitrary buffer of `va` columns and `rows` rows.
pub(crate) fn oa_shared_elems(va: usize, rows: usize, size: usize) -> usize {
    rows.max(1).saturating_mul(oa_row_stride(va, size))
}

/// Elements of an FVI-Match-Small buffer.
pub(crate) fn fs_shared_elems(n0: usize, b: usize) -> usize {
    b * (b * n0 + fs_pad(n0, b))
}

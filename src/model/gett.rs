//! The GETT engine's planning facts and cost model: its cache blocking per element type, the
//! roles and index orders it uses for a contraction (from the strides alone), and the
//! predicted seconds of a run.
//!
//! A GETT run is one blocked GEMM over the multi-indices M, N, K whose packing reads the
//! tensors in place. It costs what the same-size GEMM of our own kernel costs (the fitted
//! [`GemmLibrary::Native`] coefficients) plus what the tensor layouts add: operand blocks
//! whose cache lines are only partly used before they are evicted, and C tiles whose rows
//! are not contiguous (written element by element).

use super::gemm::{gemm_coeffs, GemmLibrary};
use super::profile::Profile;
use crate::tensor::DType;

/// Register tile and cache blocks of the GETT kernels for one element type.
///
/// ```
/// let b = ttgt::model::gett_blocking(ttgt::DType::F64);
/// assert_eq!(b.mc % b.mr, 0);
/// assert_eq!(b.nc % b.nr, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GettBlocking {
    /// Rows of a register tile.
    pub mr: usize,
    /// Columns of a register tile (contiguous in C when possible).
    pub nr: usize,
    /// Rows of a packed A block (kept in L2).
    pub mc: usize,
    /// Depth of a packed block.
    pub kc: usize,
    /// Columns of a packed B block (kept in L3).
    pub nc: usize,
}

/// The blocking of the SIMD kernels (AVX2: `6×8` f64, `6×16` f32); the scalar kernel of the
/// complex types uses `4×4` tiles.
pub fn gett_blocking(dtype: DType) -> GettBlocking {
    match dtype {
        DType::F64 => GettBlocking {
            mr: 6,
            nr: 8,
            mc: 72,
            kc: DEPTH_BLOCK,
            nc: 4080,
        },
        DType::F32 => GettBlocking {
            mr: 6,
            nr: 16,
            mc: 144,
            kc: DEPTH_BLOCK,
            nc: 4080,
        },
        DType::C32 | DType::C64 | DType::F16 | DType::BF16 => GettBlocking {
            mr: 4,
            nr: 4,
            mc: 64,
            kc: DEPTH_BLOCK,
            nc: 1024,
        },
    }
}

/// The depth of a packed block (`kc`), the same for every element type.
const DEPTH_BLOCK: usize = 256;

/// The depth of the packed blocks for a contracted size `k` and a nominal depth `kc`: the
/// passes over C are `ceil(k / kc)` and the depth is spread evenly over them, with one pass
/// up to `1.5 × kc` (a pass reads and writes all of C, a slightly deeper panel costs less).
///
/// ```
/// use ttgt::model::gett_depth;
/// assert_eq!(gett_depth(312, 256), 312);
/// assert_eq!(gett_depth(600, 256), 200);
/// assert_eq!(gett_depth(20, 256), 20);
/// ```
pub fn gett_depth(k: usize, kc: usize) -> usize {
    let kc = kc.max(1);
    if 2 * k <= 3 * kc {
        return k.max(1);
    }
    let passes = k.div_ceil(kc);
    k.div_ceil(passes)
}

/// Whether this CPU has a SIMD GETT kernel for `dtype` (x86-64 with AVX2 and FMA, real
/// types): the planner offers GETT candidates only then.
///
/// ```
/// assert!(!ttgt::model::gett_simd_available(ttgt::DType::C64));
/// ```
pub fn gett_simd_available(dtype: DType) -> bool {
    let f = crate::cpu::features();
    matches!(dtype, DType::F32 | DType::F64) && f.avx2 && f.fma
}

/// One index of a GETT group: extent and strides (elements) in the two tensors holding it
/// (M: A and C; N: B and C; K: A and B).
pub type GettIndex = (usize, [isize; 2]);

/// Roles and orders chosen for a GETT run.
///
/// ```
/// use ttgt::model::gett_orient;
/// // C[i,j] = A[i,k] B[k,j], row-major: no swap; one index each.
/// let o = gett_orient(&[(5, [7, 9])], &[(9, [1, 1])], &[(7, [1, 9])]);
/// assert!(!o.swap);
/// assert_eq!((o.m, o.n, o.k), (vec![0], vec![0], vec![0]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GettOrder {
    /// Whether A and B swap roles (`Cᵀ = Bᵀ·Aᵀ`; then `m` lists the original N indices).
    pub swap: bool,
    /// Row indices, outermost first, as positions in the (possibly swapped) row group; indices
    /// of extent 1 are dropped (those of extent 0 kept).
    pub m: Vec<usize>,
    /// Column indices likewise.
    pub n: Vec<usize>,
    /// Contracted indices likewise.
    pub k: Vec<usize>,
}

fn min_by(d: &[GettIndex], t: usize) -> Option<usize> {
    (0..d.len())
        .filter(|&i| d[i].0 > 1)
        .min_by_key(|&i| d[i].1[t].unsigned_abs())
}

/// `d` ordered outermost first: `inner` (then `next`) innermost, the rest by decreasing
/// absolute stride in tensor `t`.
fn order(d: &[GettIndex], inner: Option<usize>, next: Option<usize>, t: usize) -> Vec<usize> {
    let mut rest: Vec<usize> = (0..d.len())
        .filter(|&i| d[i].0 != 1 && Some(i) != inner && Some(i) != next)
        .collect();
    rest.sort_by_key(|&i| std::cmp::Reverse(d[i].1[t].unsigned_abs()));
    if let Some(i) = next.filter(|&i| Some(i) != inner) {
        rest.push(i);
    }
    if let Some(i) = inner {
        rest.push(i);
    }
    rest
}

/// The roles and index orders of a GETT run, from the strides:
/// * C's smallest-stride index should be a column index, so that tile rows are contiguous
///   runs of C; when it is a row index, A and B swap;
/// * columns: C's smallest-stride index innermost, then B's, then the rest by C's strides;
///   B's first, then C's, when B's block moves more bytes than C's tiles (K > M times C's
///   passes);
/// * rows: A's smallest-stride index innermost, then the rest by C's strides;
/// * contracted: by the strides of the larger operand;
///
/// so that a block covers whole cache lines of every tensor it touches.
pub fn gett_orient(m: &[GettIndex], n: &[GettIndex], k: &[GettIndex]) -> GettOrder {
    let c_in_m = min_by(m, 1).map(|i| m[i].1[1].unsigned_abs());
    let c_in_n = min_by(n, 1).map(|i| n[i].1[1].unsigned_abs());
    let swap = match (c_in_m, c_in_n) {
        (Some(x), Some(y)) => x < y,
        (Some(_), None) => true,
        _ => false,
    };
    let flipped: Vec<GettIndex> = k.iter().map(|&(e, s)| (e, [s[1], s[0]])).collect();
    let (m, n, k) = if swap {
        (n, m, &flipped[..])
    } else {
        (m, n, k)
    };
    let size = |d: &[GettIndex]| d.iter().map(|x| x.0).product::<usize>();
    let big = if size(m) >= size(n) { 0 } else { 1 };
    // K: the unit-stride index of an operand whose unit stride is contracted goes innermost
    // (the larger operand's first when both are), so that its block rows are whole lines.
    let unit_in_k = |t: usize, free: &[GettIndex]| -> Option<usize> {
        let kk = min_by(k, t)?;
        let f = min_by(free, 0).map_or(usize::MAX, |i| free[i].1[0].unsigned_abs());
        (k[kk].1[t].unsigned_abs() < f).then_some(kk)
    };
    let (ka, kb) = (unit_in_k(0, m), unit_in_k(1, n));
    let (inner, next) = match (ka, kb) {
        (Some(a), Some(b)) if big == 0 => (Some(a), Some(b)),
        (Some(a), Some(b)) => (Some(b), Some(a)),
        (Some(x), None) | (None, Some(x)) => (Some(x), None),
        (None, None) => (min_by(k, big), None),
    };
    // N: the unit-stride index of whichever of B and C moves more bytes goes innermost. B's
    // block is read once (N·K values); C is read and written once per depth block (M·N
    // values each time): a large K against a small M makes B the one to read in whole lines,
    // and C's tiles are then written element by element.
    let passes = size(k).max(1).div_ceil(gett_depth(size(k), DEPTH_BLOCK));
    let b_first = size(k) > size(m) * (2 * passes - 1);
    let b_in_k = min_by(k, 1).map_or(usize::MAX, |i| k[i].1[1].unsigned_abs());
    let (c_unit, b_unit) = (min_by(n, 1), min_by(n, 0));
    // B's smallest stride along the columns matters only when it is smaller than along K
    let b_first = b_first && b_unit.is_some_and(|i| n[i].1[0].unsigned_abs() < b_in_k);
    let (n_inner, n_next) = if b_first {
        (b_unit, c_unit)
    } else {
        (c_unit, b_unit)
    };
    GettOrder {
        swap,
        m: order(m, min_by(m, 0), None, 1),
        n: order(n, n_inner, n_next, 1),
        k: order(k, inner, next, big),
    }
}

/// The groups as the engine runs them: whether A and B swap, then rows, columns and
/// contracted indices in [`gett_orient`]'s orders (strides flipped for a swap: each index's
/// first stride is then in the operand that plays A).
///
/// ```
/// let (swap, m, n, k) = ttgt::model::gett_oriented(&[(5, [1, 1])], &[(9, [1, 5])], &[(7, [5, 9])]);
/// assert!(swap); // C is contiguous along the row index
/// assert_eq!((m, n, k), (vec![(9, [1, 5])], vec![(5, [1, 1])], vec![(7, [9, 5])]));
/// ```
#[allow(clippy::type_complexity)] // the flag and the three groups
pub fn gett_oriented(
    m: &[GettIndex],
    n: &[GettIndex],
    k: &[GettIndex],
) -> (bool, Vec<GettIndex>, Vec<GettIndex>, Vec<GettIndex>) {
    let o = gett_orient(m, n, k);
    let flipped: Vec<GettIndex> = k.iter().map(|&(e, s)| (e, [s[1], s[0]])).collect();
    let (m, n, k) = if o.swap {
        (n, m, &flipped[..])
    } else {
        (m, n, k)
    };
    let pick =
        |d: &[GettIndex], idx: &[usize]| -> Vec<GettIndex> { idx.iter().map(|&i| d[i]).collect() };
    (o.swap, pick(m, &o.m), pick(n, &o.n), pick(k, &o.k))
}

/// Elements of the innermost contiguous run of `dims` (ordered outermost first) in tensor
/// `t`: the product of the innermost extents whose strides continue a unit-stride run.
fn contiguous_run(dims: &[GettIndex], t: usize) -> usize {
    let mut run = 1usize;
    for &(e, s) in dims.iter().rev() {
        if s[t].unsigned_abs() != run {
            break;
        }
        run *= e;
    }
    run
}

/// How many more bytes than its size a tensor moves when a block of `span` consecutive
/// linear indices of `dims` (outermost first) is read at a time: the tensor's unit-stride
/// index (and the indices outside it that continue its run in memory) makes runs of
/// contiguous elements; a run shorter than a cache line wastes the rest of each line.
/// `None` when no index of `dims` has a unit stride in tensor `t`.
fn amplification(dims: &[GettIndex], t: usize, span: usize, es: usize) -> Option<f64> {
    let u = dims.iter().rposition(|d| d.1[t].unsigned_abs() == 1)?;
    let inner: usize = dims[u + 1..].iter().map(|d| d.0).product();
    let mut left = (span / inner.max(1)).max(1);
    let (mut run, mut expect) = (1usize, 1usize);
    for &(e, s) in dims[..=u].iter().rev() {
        if s[t].unsigned_abs() != expect {
            break;
        }
        let c = left.min(e);
        run *= c;
        if c < e {
            break;
        }
        left /= e.max(1);
        expect *= e;
        if left == 0 {
            break;
        }
    }
    Some((64.0 / (run * es).clamp(1, 64) as f64).max(1.0))
}

/// The amplification of an operand block made of `rows` (a block of `rs` of them) and
/// `cols` (`cs`): where its unit-stride index is; one line per element (at most 8) without.
fn block_amplification(
    rows: &[GettIndex],
    rs: usize,
    cols: &[GettIndex],
    cs: usize,
    t: (usize, usize),
    es: usize,
) -> f64 {
    match (
        amplification(rows, t.0, rs, es),
        amplification(cols, t.1, cs, es),
    ) {
        (Some(x), Some(y)) => x.min(y),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => (64.0 / es as f64).min(8.0),
    }
}

/// What a GETT run does, for its cost: flops (the kernels' work, with small-K tiles
/// weighted by their store overhead), bytes moved through memory (operand blocks with their
/// line waste and re-reads, C once per depth block), and C elements written one at a time
/// (tiles whose rows are not contiguous in C).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GettWork {
    /// Kernel flops, weighted for small depths.
    pub flops: f64,
    /// Bytes through memory.
    pub bytes: f64,
    /// C elements updated through the scalar path.
    pub scattered: f64,
}

/// The work of one batch index of a GETT run on `threads` threads (see [`GettWork`]).
///
/// ```
/// use ttgt::{DType, model::gett_work};
/// let w = gett_work(DType::F64, 1, 1, &[(512, [512, 512])], &[(512, [1, 1])], &[(512, [1, 512])], false);
/// assert!(w.flops >= 2.0 * 512f64.powi(3));
/// assert_eq!(w.scattered, 0.0);
/// ```
#[allow(clippy::too_many_arguments)] // the problem: type, threads, batches and four groups
pub fn gett_work(
    dtype: DType,
    threads: usize,
    batches: usize,
    m: &[GettIndex],
    n: &[GettIndex],
    k: &[GettIndex],
    read_c: bool,
) -> GettWork {
    let (_, m, n, k) = gett_oriented(m, n, k);
    let size = |d: &[GettIndex]| d.iter().map(|x| x.0).product::<usize>();
    let (ms, ns, ks) = (size(&m), size(&n), size(&k));
    if ms == 0 || ns == 0 || batches == 0 {
        return GettWork::default();
    }
    let blk = gett_blocking(dtype);
    let es = dtype.size_bytes();
    // as the engine splits: the batch across threads, else the larger of M and N
    let parts = if batches >= threads {
        1
    } else {
        threads.max(1)
    };
    let split_m = ms >= ns;
    let n_part = if split_m { ns } else { ns.div_ceil(parts) };
    let a_reads = (if split_m { 1 } else { parts } * n_part.div_ceil(blk.nc)) as f64;
    let b_reads = if split_m { parts } else { 1 } as f64;
    let kc = gett_depth(ks, blk.kc);
    let amp_a = block_amplification(&m, blk.mc, &k, kc, (0, 0), es);
    let amp_b = block_amplification(&n, blk.nc, &k, kc, (0, 1), es);
    let bytes_a = (ms * ks * es) as f64;
    let bytes_b = (ns * ks * es) as f64;
    let bytes_c = (ms * ns * es) as f64;
    let k_passes = ks.max(1).div_ceil(kc) as f64;
    let run_c = contiguous_run(&n, 1);
    // C's lines are used whole when the column block covers them, even if a tile's row is
    // not a contiguous run
    let amp_c = amplification(&n, 1, blk.nc, es).unwrap_or(8.0);
    // each depth pass reads and writes C, except a first pass that does not read it
    let c_moves = 2.0 * k_passes - if read_c { 0.0 } else { 1.0 };
    let small_k = 1.0 + SMALL_K_TILE_STEPS / ks.clamp(1, kc) as f64;
    GettWork {
        flops: dtype.flops_per_fma() * (ms * ns * ks) as f64 * small_k,
        bytes: bytes_a * amp_a * a_reads + bytes_b * amp_b * b_reads + bytes_c * amp_c * c_moves,
        scattered: if run_c >= blk.nr {
            0.0
        } else {
            (ms * ns) as f64 * k_passes
        },
    }
}

/// A tile's load, scale and store of C cost about as much as this many depth steps of the
/// kernel.
const SMALL_K_TILE_STEPS: f64 = 6.0;

/// Share of our GEMM's rate on a 512³ problem (in cache, from the fitted model) that the
/// kernels sustain inside a GETT run over memory-resident tensors, and share of the copy
/// bandwidth at which a GETT run's bytes move (gathers of block rows, C updated in place).
/// Placeholders from a first fit on the TCCG set, until a refit (see `docs/TUNING.md`).
const GETT_RATE_SHARE: f64 = 0.93;
const GETT_MEMORY_SHARE: f64 = 0.63;

/// Seconds per C element updated through the scalar path (one thread).
const SCATTER_SECONDS: f64 = 1.5e-9;

/// Predicted seconds of a GETT run on `threads` threads: `batches` blocked GEMMs over the
/// row, column and contracted indices (each `(extent, strides)` in its two tensors; any
/// order, extent-1 indices allowed), C read as well when `read_c`: the kernels' flops at a
/// share of our own GEMM's rate, plus the bytes at a share of the copy bandwidth (see
/// [`GettWork`]), plus the C elements written one by one.
///
/// ```
/// use ttgt::{DType, model::{gett_seconds, profile}};
/// let p = profile();
/// let plain = gett_seconds(&p, DType::F64, 1, 1, &[(512, [512, 512])], &[(512, [1, 1])], &[(512, [1, 512])], false);
/// // the same GEMM on every other element of a larger A (no unit stride) is dearer
/// let strided = gett_seconds(&p, DType::F64, 1, 1, &[(512, [1024, 512])], &[(512, [1, 1])], &[(512, [2, 512])], false);
/// assert!(plain > 0.0 && strided > plain);
/// ```
#[allow(clippy::too_many_arguments)] // the problem: profile, type, threads and four groups
pub fn gett_seconds(
    p: &Profile,
    dtype: DType,
    threads: usize,
    batches: usize,
    m: &[GettIndex],
    n: &[GettIndex],
    k: &[GettIndex],
    read_c: bool,
) -> f64 {
    gett_work(dtype, threads, batches, m, n, k, read_c).seconds(p, dtype, threads, batches)
}

impl GettWork {
    /// Predicted seconds of `batches` runs of this work on `threads` threads (see
    /// [`gett_seconds`], which is `gett_work(..).seconds(..)`).
    ///
    /// ```
    /// use ttgt::{DType, model::{gett_work, profile}};
    /// let w = gett_work(DType::F64, 1, 1, &[(64, [64, 64])], &[(64, [1, 1])], &[(64, [1, 64])], false);
    /// let one = w.seconds(&profile(), DType::F64, 1, 1);
    /// assert!(one > 0.0 && w.seconds(&profile(), DType::F64, 1, 3) > 2.9 * one);
    /// ```
    pub fn seconds(&self, p: &Profile, dtype: DType, threads: usize, batches: usize) -> f64 {
        if self.flops == 0.0 {
            return 0.0;
        }
        let co = gemm_coeffs(p, GemmLibrary::Native, dtype, threads);
        let s = 512;
        let rate = dtype.flops_per_fma() * (s * s * s) as f64 / co.seconds(s, s, s);
        let compute = self.flops / (GETT_RATE_SHARE * rate);
        let memory = self.bytes / (GETT_MEMORY_SHARE * p.copy_gbps(threads) * 1e9);
        let scatter = self.scattered * SCATTER_SECONDS / threads.max(1) as f64;
        let per_batch = compute + memory + scatter + co.call;
        batches as f64 * per_batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orient_swaps_when_c_is_contiguous_along_rows() {
        // C[a, d] = A[a, f] B[d, f] with C column-major (a contiguous): swap.
        let o = gett_orient(&[(48, [48, 1])], &[(24, [48, 48])], &[(48, [1, 1])]);
        assert!(o.swap);
        // Rows {x, e}: A's unit index e innermost; columns {a, b}: C's unit index a, then B's.
        let o = gett_orient(
            &[(10, [1000, 100]), (8, [1, 5000])],
            &[(4, [1, 800]), (6, [4, 1])],
            &[(3, [10, 24])],
        );
        assert!(!o.swap);
        assert_eq!(o.m, vec![0, 1]);
        assert_eq!(o.n, vec![0, 1]);
    }

    #[test]
    fn columns_follow_the_operand_that_moves_more() {
        // C[c,b,a] = A[a,d,b] B[c,d] row-major (a = b = d = 312, c = 24): C is contiguous
        // along a (a row index), so A and B swap and A's labels {a, b} become the columns.
        let m = [(312, [97344, 1]), (312, [1, 312])];
        let n = [(24, [312, 97344])];
        let k = |d: usize| [(d, [312, 1])];
        // K = 312 against M = 24: A's block (N·K) outweighs C (M·N, one pass): A's unit
        // index b innermost, C's a next
        let o = gett_orient(&m, &n, &k(312));
        assert!(o.swap);
        assert_eq!(o.n, vec![0, 1]);
        // K = 8: C moves more, its unit index a innermost
        let o = gett_orient(&m, &n, &k(8));
        assert_eq!(o.n, vec![1, 0]);
        // A[a,b,d] (contiguous along K): nothing to gain in the columns, C's order stays
        let m2 = [(312, [97344, 1]), (312, [312, 312])];
        let o = gett_orient(&m2, &n, &[(312, [1, 1])]);
        assert_eq!(o.n, vec![1, 0]);
        assert_eq!(gett_depth(312, 256), 312);
        assert_eq!(gett_depth(385, 256), 193);
    }

    #[test]
    fn amplification_counts_partial_lines() {
        // unit-stride index of extent 2 (f64) under one of stride 7: a quarter of each line
        assert_eq!(
            amplification(&[(100, [7, 0]), (2, [1, 0])], 0, 1000, 8),
            Some(4.0)
        );
        // ... but whole lines when the outer index continues the run
        assert_eq!(
            amplification(&[(100, [2, 0]), (2, [1, 0])], 0, 1000, 8),
            Some(1.0)
        );
        assert_eq!(amplification(&[(100, [1, 0])], 0, 72, 8), Some(1.0));
        // a block of 2 values of the unit index (under an inner one of extent 36)
        assert_eq!(
            amplification(&[(100, [1, 0]), (36, [100, 0])], 0, 72, 8),
            Some(4.0)
        );
        // no unit stride at all
        assert_eq!(amplification(&[(100, [7, 0])], 0, 72, 8), None);
        assert_eq!(
            block_amplification(&[(100, [7, 0])], 72, &[], 256, (0, 0), 8),
            8.0
        );
        assert_eq!(
            contiguous_run(&[(3, [8, 0]), (4, [2, 0]), (2, [1, 0])], 0),
            24
        );
    }
}

//! Staged tiles: streamed transpositions whose B rows are not whole cache lines (e.g. 15 or
//! 225 f64).
//!
//! Tiled directly, such a transposition writes B in rows that start inside a line, so B
//! cannot be streamed and every line of B is read before it is written, and short tiles read
//! A in runs of one tile row, at a fraction of the speed of whole-line tiles
//! (`docs/TUNING.md`). A staged execution takes a macro-tile of `p` steps of the loop next to
//! A's stride-1 dim by `q` steps of the dim that follows B's stride-1 dim in B (so that B's
//! part of the macro-tile is made of runs `q` rows long), transposes it tile by tile into a
//! thread-local buffer laid out like B's runs, and copies each run to B with streaming
//! stores (whole lines streamed, the partial lines at the two ends of a run stored plainly).
//! Tiles short on both sides (A's and B's stride-1 extents of at most [`SHORT_BYTES`]) are
//! staged several to a macro-tile. A longer tile is staged with the steps the buffer allows
//! (`q` = 1 too where B's rows are at least [`LONG_ROW_BYTES`]), its A side in blocks (a
//! divisor of its extent, at least [`MIN_ROWS`]; then `p` = 1) where the whole would not fit
//! the buffer or would read more than [`RUN_BYTES`] of an A row at a time. Where that would
//! cut a long A side, or a short A side's B rows are too long even for it, B's side is cut
//! too (segments of B's rows of at most [`RUN_BYTES`] and at least [`LONG_ROW_BYTES`]),
//! beside an A side of one run of at most [`RUN_BYTES`].

use super::kernel::{self, Micro, Scalars, Seam, Tile};
use super::problem::Dim;
use crate::tensor::Element;

/// Longest stride-1 extent (bytes) on either side of a tile that is staged.
pub(crate) const SHORT_BYTES: usize = 256;

/// Longest run (bytes) of A or B that a macro-tile's steps make: `p` and `q` are the largest
/// divisors of their loops' extents whose runs stay within it (`docs/TUNING.md`).
const RUN_BYTES: usize = 2048;

/// Largest buffer (bytes) of one macro-tile, which bounds `p` times `q` (a quarter of a 1 MiB
/// L2, with A's lines beside it; `docs/TUNING.md`).
const BUFFER_BYTES: usize = 256 << 10;

/// Shortest B row (bytes) that a macro-tile of one tile of rows streams on its own (`q` = 1):
/// long enough that its partial lines at the two ends are a small share of it.
const LONG_ROW_BYTES: usize = 1024;

/// Fewest A rows of a tile whose A side is cut into blocks (to fit the buffer beside long B
/// rows): blocks of 5 rows of a 15-row side ran 2-3x as fast as unstaged (`docs/TUNING.md`).
const MIN_ROWS: usize = 3;

/// One loop of a staged nest: extent and element strides in A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StagedLoop {
    pub count: usize,
    pub sa: isize,
    pub sb: isize,
}

/// The loop nest of a staged execution.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Staged {
    /// Loops over macro-tiles, outermost first.
    pub outer: Vec<StagedLoop>,
    /// The A-side loop inside a macro-tile (`p` steps of the dim next to A's stride-1 one).
    pub ka: StagedLoop,
    /// The B-side loop inside a macro-tile (`q` steps of the dim whose B stride is the extent
    /// of B's stride-1 dim, so that B's runs are `q` rows long).
    pub kb: StagedLoop,
    /// A-side extent of one tile: all of A's stride-1 dim, or a block of it (a divisor) where
    /// the whole dim would not fit the buffer; its blocks are then the innermost outer loop.
    pub rows: usize,
    /// B-side extent of one tile: all of B's stride-1 dim, or a block of it (a divisor) where
    /// its rows are too long for the buffer beside a short A side; its blocks are then the
    /// innermost outer loop.
    pub cols: usize,
}

impl Staged {
    /// The staged nest of a tile `i` (A's stride-1 dim) by `j` (B's) under the outer loops
    /// `outer` (outermost first), or `None` where it does not apply: no block of A's side
    /// that fits the buffer, no outer loop that continues B's rows in memory while they are
    /// shorter than [`LONG_ROW_BYTES`] (or the tile is short), or runs that would not grow.
    pub fn plan(i: Dim, j: Dim, outer: &[StagedLoop], es: usize) -> Option<Staged> {
        if i.sa != 1 || j.sb != 1 {
            return None;
        }
        let short = i.n * es <= SHORT_BYTES && j.n * es <= SHORT_BYTES;
        // The largest divisor of `n` that `ok` accepts, among those whose run stays within
        // RUN_BYTES (both uses require it; the search then takes at most RUN_BYTES / es steps).
        let divisor = |n: usize, ok: &dyn Fn(usize) -> bool| {
            (1..=n.min(RUN_BYTES / es))
                .rev()
                .find(|&d| n.is_multiple_of(d) && ok(d))
        };
        // Long tiles (a side past SHORT_BYTES): A's side in blocks of the largest divisor of
        // its extent whose A run stays within RUN_BYTES and whose tile fits the buffer.
        let a_block = divisor(i.n, &|d| {
            d * es <= RUN_BYTES && d * j.n * es <= BUFFER_BYTES
        })
        .filter(|&d| d >= MIN_ROWS.min(i.n));
        // Where that cuts a long A side (or finds no block), both sides in blocks instead: A's
        // side in one run of at most RUN_BYTES, B's in the largest divisor whose segment of a
        // B row stays within RUN_BYTES and beside that A block within the buffer, and is a
        // long row (a short A side keeps all its rows: B's side alone is cut).
        let both = || {
            let r = divisor(i.n, &|d| d * es <= RUN_BYTES)?;
            let c = divisor(j.n, &|d| d * es <= RUN_BYTES && r * d * es <= BUFFER_BYTES)?;
            (r >= MIN_ROWS.min(i.n) && c * es >= LONG_ROW_BYTES && c < j.n).then_some((r, c))
        };
        let (rows, cols) = if short {
            (i.n, j.n)
        } else if let Some(d) = a_block.filter(|&d| d == i.n || i.n * es <= SHORT_BYTES) {
            (d, j.n)
        } else if let Some(rc) = both() {
            rc
        } else {
            (a_block?, j.n)
        };
        // The tile's B side: all of B's stride-1 dim, or a block of it whose successor is
        // the next block (the innermost loop over macro-tiles).
        let (jn, j) = (j.n, Dim { n: cols, ..j });
        let long_rows = j.n * es >= LONG_ROW_BYTES;
        let kb = outer
            .iter()
            .position(|l| l.count > 1 && l.sb == j.n as isize)
            .filter(|_| cols == jn);
        // B's rows continue in memory (q steps of that dim make longer runs), or are long
        // enough to be streamed one by one.
        let kb = match kb {
            Some(k) => k,
            None if long_rows && !short => outer.len(),
            None => return None,
        };
        let one = StagedLoop {
            count: 1,
            sa: 0,
            sb: 0,
        };
        let outer: Vec<StagedLoop> = outer.iter().copied().chain([one]).collect();
        let outer = &outer[..];
        // The dim next to A's stride-1 one, split around the macro-tile unless it is the one
        // that continues B's rows: the B-side loop then continues A's rows too.
        let ka = (0..outer.len())
            .filter(|&k| outer[k].count > 1)
            .min_by_key(|&k| (outer[k].sa.unsigned_abs(), k))
            .filter(|&k| k != kb);
        let tile = rows * j.n * es;
        // The steps of a loop of `n` in a macro-tile: the largest divisor of `n` whose run of
        // `row` bytes a step stays within RUN_BYTES, else (a prime extent above it) the
        // smallest divisor above 1, each as long as the buffer stays within `room` tiles.
        let steps = |n: usize, row: usize, room: usize, above: bool| {
            let fits = |d: usize| n.is_multiple_of(d) && d <= room;
            (2..=n)
                .rev()
                .find(|&d| fits(d) && d * row <= RUN_BYTES)
                .or_else(|| (2..=n).find(|&d| above && fits(d)))
                .unwrap_or(1)
        };
        let room = BUFFER_BYTES / tile;
        // A's runs first (p steps of the dim next to A's stride-1 one), then B's, which
        // decide whether staging applies at all (a B run of one row streams nothing more).
        // Room for q >= 2 B rows per run, unless B's side is in blocks (q = 1).
        let p_room = if cols < jn { room } else { room / 2 };
        let p = if rows < i.n {
            1
        } else {
            ka.map_or(1, |k| steps(outer[k].count, i.n * es, p_room, false))
        };
        let q = steps(outer[kb].count, j.n * es, room / p, true);
        if q < 2 && (short || !long_rows) {
            return None;
        }
        let split = |l: StagedLoop, d: usize| {
            (
                StagedLoop {
                    count: l.count / d,
                    sa: l.sa * d as isize,
                    sb: l.sb * d as isize,
                },
                StagedLoop { count: d, ..l },
            )
        };
        let (bo, bi) = split(outer[kb], q);
        let (ao, ai) = match ka {
            Some(k) => split(outer[k], p),
            None => (
                StagedLoop {
                    count: 1,
                    sa: 0,
                    sb: 0,
                },
                StagedLoop {
                    count: 1,
                    sa: 0,
                    sb: 0,
                },
            ),
        };
        let mut loops: Vec<StagedLoop> = (0..outer.len())
            .filter(|&k| k != kb && Some(k) != ka)
            .map(|k| outer[k])
            .collect();
        loops.extend([ao, bo]);
        // A's or B's blocks innermost: each macro-tile continues the A rows (B rows) the
        // last one read (wrote).
        loops.push(StagedLoop {
            count: i.n / rows,
            sa: rows as isize * i.sa,
            sb: rows as isize * i.sb,
        });
        loops.push(StagedLoop {
            count: jn / cols,
            sa: cols as isize * j.sa,
            sb: cols as isize * j.sb,
        });
        loops.retain(|l| l.count > 1);
        Some(Staged {
            outer: loops,
            ka: ai,
            kb: bi,
            rows,
            cols,
        })
    }

    /// Macro-tiles of one execution.
    pub fn units(&self) -> usize {
        self.outer.iter().map(|l| l.count).product()
    }

    /// Bytes of B each streamed run writes.
    pub fn run_bytes(&self, es: usize) -> usize {
        self.kb.count * self.cols * es
    }

    /// Runs macro-tiles `s..e` of `B = alpha * perm(A)` (beta = 0) with tile `i` by `j`,
    /// through the buffer when `stage` and its memory can be had, else each tile straight
    /// into B.
    ///
    /// # Safety
    /// `a` and `b` address tensors whose every element the nest (with the tile) reaches is in
    /// bounds, B overlaps neither A nor memory another thread uses, `copy` is the ISA's
    /// streaming copy and `m` its micro-kernels; the caller fences the streamed stores.
    #[allow(clippy::too_many_arguments)] // the nest, the range, the data and the kernels
    pub unsafe fn run<T: Element>(
        &self,
        (i, j): (Dim, Dim),
        a: *const T,
        b: *mut T,
        (s, e): (usize, usize),
        sc: &Scalars<T>,
        m: &Micro,
        copy: unsafe fn(*const u8, *mut u8, usize),
        stage: bool,
    ) {
        let (i, j) = (Dim { n: self.rows, ..i }, Dim { n: self.cols, ..j });
        let (p, q) = (self.ka.count, self.kb.count);
        let run = q * j.n;
        let es = std::mem::size_of::<T>();
        // The buffer holds B's runs of the macro-tile: element (i, ka, kb, j) at
        // (ka * i.n + i) * rs + kb * j.n + j, the runs `rs` apart: one line more than a run,
        // so that the rows a tile writes fall in different cache sets.
        let rs = run + 64 / es;
        let mut buf: Vec<T> = Vec::new();
        // Without memory for the buffer, the tiles go straight to B with ordinary stores.
        let staged = stage && buf.try_reserve_exact(i.n * p * rs).is_ok();
        let bp = buf.as_mut_ptr();
        let t = Tile {
            ni: i.n,
            nj: j.n,
            sai: i.sa,
            saj: j.sa,
            sbi: rs as isize,
            sbj: 1,
        };
        let direct = Tile { sbi: i.sb, ..t };
        let none = Seam::default();
        let nl = self.outer.len();
        let mut idx = vec![0usize; nl];
        let (mut oa, mut ob) = (0isize, 0isize);
        let mut rest = s;
        for k in (0..nl).rev() {
            idx[k] = rest % self.outer[k].count;
            rest /= self.outer[k].count;
            oa += idx[k] as isize * self.outer[k].sa;
            ob += idx[k] as isize * self.outer[k].sb;
        }
        for _ in s..e {
            // The A-side loop innermost: each of the tile's A rows continues where the last
            // tile left it.
            for y in 0..q {
                for x in 0..p {
                    let ta = a.offset(oa + x as isize * self.ka.sa + y as isize * self.kb.sa);
                    if !staged {
                        let tb = b.offset(ob + x as isize * self.ka.sb + y as isize * self.kb.sb);
                        // SAFETY: the tile's A and B elements are in bounds (caller).
                        kernel::tile_simd(ta, tb, &direct, sc, m, false, &none, std::ptr::null());
                        continue;
                    }
                    let tb = bp.add(x * i.n * rs + y * j.n);
                    // SAFETY: the tile's A elements are in bounds (caller); its buffer
                    // elements are inside the buffer's i.n * p * rs elements.
                    kernel::tile_simd(ta, tb, &t, sc, m, false, &none, std::ptr::null());
                }
            }
            for r in (0..i.n).filter(|_| staged) {
                for x in 0..p {
                    let src = bp.add((x * i.n + r) * rs) as *const u8;
                    let dst = b.offset(ob + r as isize * i.sb + x as isize * self.ka.sb);
                    // SAFETY: the run is `run` elements of the buffer, all written above, and
                    // `run` elements of B in bounds (the caller), which no other thread uses.
                    copy(src, dst as *mut u8, run * es);
                }
            }
            let mut k = nl;
            while k > 0 {
                k -= 1;
                idx[k] += 1;
                oa += self.outer[k].sa;
                ob += self.outer[k].sb;
                if idx[k] < self.outer[k].count {
                    break;
                }
                oa -= self.outer[k].sa * self.outer[k].count as isize;
                ob -= self.outer[k].sb * self.outer[k].count as isize;
                idx[k] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::UNSTAGED;
    use super::super::{Isa, TransposeOptions, TransposePlan};
    use crate::tensor::{DType, Layout, StridedView, StridedViewMut};
    use std::sync::atomic::Ordering;

    /// Runs `B = 2 * perm(A)` (row-major, f64, on one and two threads, streamed) through the staged nest
    /// and, with the buffer turned off, with its tiles written straight to B, against the
    /// reference; the plan must stage (on a CPU with a SIMD level), its tile's A or B side
    /// cut into the `blocks` its description names (`"200 A rows"`) or whole.
    fn staged_agrees(dims: &[usize], perm: &[usize], blocks: Option<&str>) {
        let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let (la, lb) = (
            Layout::row_major(dims).unwrap(),
            Layout::row_major(&bd).unwrap(),
        );
        for threads in [1, 2] {
            let opts = TransposeOptions {
                streaming: Some(true),
                threads: Some(threads),
                // two threads split the macro-tiles between them even on small shapes
                parallel_min_bytes: Some(0),
                ..Default::default()
            };
            let plan = TransposePlan::new(perm, &la, &lb, DType::F64, &opts).unwrap();
            if Isa::detect() == Isa::Scalar {
                return;
            }
            assert!(plan.stages(), "{dims:?} {perm:?}: {}", plan.describe());
            // A side cut into blocks of `blocks` rows, or whole
            let shown = plan.describe();
            match blocks {
                Some(r) => assert!(shown.contains(&format!(" of {r} ")), "{shown}"),
                None => assert!(
                    !shown.contains(" A rows ") && !shown.contains(" B columns "),
                    "{shown}"
                ),
            }
            let n = dims.len();
            let a: Vec<f64> = (0..la.len()).map(|x| x as f64 * 0.5 - 7.0).collect();
            // B's element at a multi-index is A's at the permuted one, times 2.
            let want: Vec<f64> = (0..lb.len())
                .map(|lin| {
                    let (mut rem, mut src) = (lin, 0);
                    let sa = la.strides();
                    for k in (0..n).rev() {
                        src += (rem % bd[k]) as isize * sa[perm[k]];
                        rem /= bd[k];
                    }
                    2.0 * a[src as usize]
                })
                .collect();
            for direct in [false, true] {
                UNSTAGED.store(direct, Ordering::Relaxed);
                let mut b = vec![f64::NAN; lb.len()];
                let av = StridedView::from_slice(&a, la.clone(), 0).unwrap();
                let mut bv = StridedViewMut::from_slice(&mut b, lb.clone(), 0).unwrap();
                plan.execute(2.0, &av, 0.0, &mut bv).unwrap();
                UNSTAGED.store(false, Ordering::Relaxed);
                assert!(
                    b == want,
                    "{dims:?} {perm:?}, {threads} threads, direct tiles: {direct}"
                );
            }
        }
    }

    /// Short tiles (15 x 13 f64) staged several to a macro-tile.
    #[test]
    fn short_tiles_agree_with_the_reference() {
        staged_agrees(&[15, 6, 9, 13], &[3, 2, 1, 0], None);
    }

    /// Long tiles: B rows of 130 f64 (1040 bytes) streamed one by one, a whole A side of 90
    /// in one tile, and an A side of 600 cut into blocks of 200 (the innermost outer loop);
    /// B rows of 330 (two fused dims) under an outer loop, in blocks of 75 (their B segments
    /// would be short); an A side of 5 whose B rows of 11025 are cut into blocks of 245.
    #[test]
    fn long_tiles_agree_with_the_reference() {
        staged_agrees(&[130, 5, 90], &[2, 1, 0], None);
        staged_agrees(&[130, 600], &[1, 0], Some("200 A rows"));
        staged_agrees(&[3, 110, 2, 600], &[3, 2, 0, 1], Some("75 A rows"));
        staged_agrees(&[11025, 2, 5], &[2, 1, 0], Some("245 B columns"));
    }

    /// Long tiles cut on both sides: an A side of 150 (one run) with B rows of 1300 in
    /// blocks of 130; an A side of 300 in blocks of 150 with B rows of 1050 in blocks of 210;
    /// B rows of 390 (two fused dims) under an outer loop, in blocks of 130 beside A blocks
    /// of 200.
    #[test]
    fn tiles_cut_on_both_sides_agree_with_the_reference() {
        staged_agrees(&[1300, 150], &[1, 0], Some("130 B columns"));
        staged_agrees(&[1050, 300], &[1, 0], Some("150 A rows by 210 B columns"));
        staged_agrees(
            &[3, 130, 2, 600],
            &[3, 2, 0, 1],
            Some("200 A rows by 130 B columns"),
        );
    }
}

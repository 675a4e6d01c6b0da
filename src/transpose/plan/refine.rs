//! The plan's layout refinements after the loop nest is built (wider streamed blocks,
//! regrouped scattered lines, widened one-line tiles, square long strips, staged
//! tiles) and its streaming and prefetch decisions.

use super::*;
use crate::transpose::kernel::{self, Isa};
use crate::transpose::staged::{Staged, StagedLoop};

impl TransposePlan {
    /// Widens the B-side blocks of streamed tiles from one line of each B row to two
    /// (f64 and Complex32: 16 A rows, Complex64: 8) when the B-side block loop is the
    /// outermost loop and other loops run inside it. One-line blocks then write B a line
    /// per row and visit, with the row's next line written a whole pass of the inner loops
    /// later; two adjacent lines per visit ran 1.5-2x faster (TTC, 1 thread, every such
    /// case: f64 ttc-10 0.54 -> 0.99 of copy, ttc-41 0.45 -> 0.80; Complex64 ttc-37
    /// 0.41 -> 0.81). Not elsewhere: widened blocks with the block loop in the middle of
    /// the nest (f64 ttc-46/-51/-52) or next to the tile (ttc-37) ran up to 2x slower, and
    /// f32, whose one line is already 16 A rows, ran slower at two lines everywhere.
    /// AVX-512 only: with the AVX2 kernels the rule ran mixed (ttc-56 2.6-2.9x faster,
    /// ttc-42 2x slower).
    pub(super) fn widen_streamed_blocks(&mut self) {
        let (Some(loops), KernelKind::Tile { j, simd: true, .. }, Isa::Avx512) =
            (self.stream_loops.as_mut(), self.kernel, self.isa)
        else {
            return;
        };
        let w = self.isa.width(self.dtype);
        let wide = (TWO_LINES / self.dtype.size_bytes()).div_ceil(w) * w;
        if wide <= self.block_j || wide > 16 || !block_loop_outermost(loops) {
            return;
        }
        if let Some(l) = loops.iter_mut().find(|l| l.role == Role::BlockJ) {
            *l = Loop {
                count: j.n.div_ceil(wide),
                sa: j.sa * wide as isize,
                sb: j.sb * wide as isize,
                role: Role::BlockJ,
            };
            self.stream_block_j = wide;
        }
    }

    /// Gives a streamed scattered-line tile ([`Self::scatters_lines`]) whose A rows are at
    /// least two cache lines long the regrouped nest: HPTT's loop order (B's inner loops next
    /// to the tile), the B-side block loop just outside the A-side one, and B-side blocks of
    /// the whole stride-1 dim where the macro-tile stays within [`REGROUP_WHOLE_BYTES`], else
    /// of two lines. Each visit then writes every B row of the tile in runs of two lines or
    /// more, and the next visit continues them. Executions that read B keep their nest.
    pub(super) fn regroup_scattered_lines(&mut self) {
        let KernelKind::Tile { i, j, simd: true } = self.kernel else {
            return;
        };
        let es = self.dtype.size_bytes();
        let ni = i.n.min(self.block);
        if !self.scatters_lines() || ni * es < TWO_LINES {
            return;
        }
        let w = self.isa.width(self.dtype);
        let whole = j.n.div_ceil(w) * w;
        let bj = if ni * whole * es <= REGROUP_WHOLE_BYTES {
            whole
        } else if (j.sa.unsigned_abs() * es).is_multiple_of(kernel::PAGE) {
            // A rows a multiple of a page apart share cache sets: two lines of B rows are
            // twice as many such rows in flight (the 720-permutation set's 256x256 f32
            // tiles, rows 256 KiB apart, ran 0.77-1.01x as fast in two-line blocks).
            return;
        } else {
            (TWO_LINES / es).div_ceil(w) * w
        };
        let mut c = self.clone();
        c.build(0.5, Some((self.block, bj)), true);
        self.stream_loops = Some(c.loops);
        self.stream_block_j = bj;
        self.regrouped = true;
    }

    /// Gives a streamed SIMD tile whose A rows are one cache line (so the regrouped nest does
    /// not apply) and whose B-side dim is at least four lines long B-side blocks of four
    /// lines ([`FOUR_LINES`]), with the streamed loop order rebuilt around them: each visit
    /// then writes four lines of every B row instead of one, and the A rows a strip reads
    /// continue through four micro-tiles. Not where A's J rows are a multiple of a page
    /// apart (the rows share cache sets, as for the regrouped nest). Part of the scattered-
    /// line remedies that [`scatter_regroup`] turns on (see `docs/TUNING.md`).
    pub(super) fn widen_one_line_tiles(&mut self) {
        let KernelKind::Tile { i, j, simd: true } = self.kernel else {
            return;
        };
        let es = self.dtype.size_bytes();
        let bj = FOUR_LINES / es;
        if self.regrouped
            || !self.streams(true)
            || i.n.min(self.block) * es > 64
            || j.n < bj
            || self.stream_block_j * es > 64
            || (j.sa.unsigned_abs() * es).is_multiple_of(kernel::PAGE)
        {
            return;
        }
        let mut c = self.clone();
        c.build(0.5, Some((self.block, bj)), false);
        self.stream_loops = c.stream_loops;
        self.stream_block_j = bj;
    }

    /// Gives a streamed one-thread SIMD tile whose strips write one line of each of many B rows
    /// per visit, with only the A-side block loop inside the B-side one, square macro-tiles
    /// of four micro-tiles a side (64x64 f32) in HPTT's order (the A-side block loop
    /// innermost): each visit then writes four lines of 64 B rows instead of one line of
    /// thousands. Where: at least [`SQUARE_MIN_ROWS`] A-side rows, a B-side dim of at least
    /// 1 KiB and no longer than the A-side one. Part of the scattered-line remedies that
    /// [`scatter_regroup`] turns on; it gains on one thread only, and not with B rows longer
    /// than A's or short (see `docs/TUNING.md`).
    pub(super) fn square_long_strips(&mut self) {
        let (Some(loops), KernelKind::Tile { i, j, simd: true }) =
            (&self.stream_loops, self.kernel)
        else {
            return;
        };
        if self.regrouped || self.threads != 1 || !self.streams(true) {
            return;
        }
        let Some(pj) = loops.iter().position(|l| l.role == Role::BlockJ) else {
            return;
        };
        let only_i_inside = loops[pj + 1..]
            .iter()
            .all(|l| l.count == 1 || l.role == Role::BlockI);
        if !only_i_inside
            || loops[pj].count < 2
            || i.n < SQUARE_MIN_ROWS
            || j.n > i.n
            || j.n * self.dtype.size_bytes() < 1024
        {
            return;
        }
        let w = self.isa.width(self.dtype);
        let mut c = self.clone();
        c.build(0.5, Some((4 * w, 4 * w)), true);
        *self = c;
    }

    /// Gives a streamed SIMD tile whose B rows are not whole cache lines a staged nest
    /// ([`Staged`]) where one applies: macro-tiles transposed into a buffer and copied to B
    /// in streamed runs. Its loops over macro-tiles are the plan's own (HPTT's order), the
    /// B-side and A-side loops split around the macro-tile, a long A side's blocks innermost.
    pub(super) fn stage_tiles(&mut self) {
        let KernelKind::Tile { i, j, simd: true } = self.kernel else {
            return;
        };
        let es = self.dtype.size_bytes();
        let whole_lines = (i.sb.unsigned_abs() * es).is_multiple_of(64);
        if whole_lines || !self.stream_choice() || kernel::stream_copy(self.isa).is_none() {
            return;
        }
        let outer: Vec<StagedLoop> = self
            .loops
            .iter()
            .filter(|l| l.role == Role::Outer)
            .map(|l| StagedLoop {
                count: l.count,
                sa: l.sa,
                sb: l.sb,
            })
            .collect();
        self.staged = Staged::plan(i, j, &outer, es);
        if let Some(st) = &self.staged {
            self.tasks = self.task_count(st.units());
        }
    }

    /// Whether an execution with `beta == 0` runs staged tiles: macro-tiles transposed
    /// into a thread-local buffer and copied to B in streamed runs of several rows.
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// use ttgt::transpose::Isa;
    /// // 15^6 f64, B's fastest dim A's slowest and B's next dims A's 1-3: tiles of 15 x 15
    /// // whose B rows are 120 bytes long
    /// let a = Layout::row_major(&[15; 6]).unwrap();
    /// let perm = [5, 4, 1, 2, 3, 0];
    /// let p = TransposePlan::new(&perm, &a, &a, DType::F64, &TransposeOptions::default()).unwrap();
    /// assert_eq!(p.stages(), Isa::detect() != Isa::Scalar);
    /// let off = TransposeOptions { stage: Some(false), ..Default::default() };
    /// let q = TransposePlan::new(&perm, &a, &a, DType::F64, &off).unwrap();
    /// assert!(!q.stages());
    /// ```
    pub fn stages(&self) -> bool {
        self.staged.is_some() && self.streams(true)
    }

    /// Whether streamed executions run the regrouped nest of a scattered-line tile
    /// ([`TransposeOptions::regroup`], [`scatter_regroup`]).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// // ttc-40 (f32, 48x28x28x28x48, reversed): 48x48 tiles, blocks of the whole row
    /// let a = Layout::row_major(&[48, 28, 28, 28, 48]).unwrap();
    /// let opts = TransposeOptions { regroup: Some(true), ..Default::default() };
    /// let p = TransposePlan::new(&[4, 3, 2, 1, 0], &a, &a, DType::F32, &opts).unwrap();
    /// if p.regroups_lines() {
    ///     assert_eq!(p.blocks().1, 48);
    ///     assert!(!p.scatters_lines());
    /// }
    /// ```
    pub fn regroups_lines(&self) -> bool {
        self.regrouped && self.streams(true)
    }

    /// Whether a streamed execution writes B one line per row and visit with the B-side block
    /// loop outermost and other loops inside it: the pattern that two-line blocks
    /// ([`Self::widen_streamed_blocks`]) avoid where they can (the cost model prices it as a
    /// class of its own).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// let a = Layout::row_major(&[48, 28, 28]).unwrap();
    /// let b = Layout::row_major(&[28, 28, 48]).unwrap();
    /// // Without streaming stores there are no scattered lines (with them, on a SIMD level,
    /// // this full reversal has them: its B-side block loop is outermost).
    /// let opts = TransposeOptions { streaming: Some(false), ..Default::default() };
    /// let p = TransposePlan::new(&[2, 1, 0], &a, &b, DType::F32, &opts).unwrap();
    /// assert!(!p.scatters_lines());
    /// ```
    pub fn scatters_lines(&self) -> bool {
        let (Some(loops), KernelKind::Tile { simd: true, .. }) = (&self.stream_loops, self.kernel)
        else {
            return false;
        };
        block_loop_outermost(loops)
            && self.stream_block_j * self.dtype.size_bytes() <= 64
            && self.streams(true)
    }

    /// Whether streaming stores can apply to every micro-tile row: a SIMD tile whose B rows
    /// are a multiple of the vector size apart, on an output large enough to stream.
    pub(super) fn streams_rows(&self) -> bool {
        let big = || self.stream_choice();
        match self.kernel {
            KernelKind::Rows { n } if self.isa != Isa::Scalar => {
                let align = kernel::stream_block(self.isa);
                (n * self.dtype.size_bytes()).is_multiple_of(align) && big()
            }
            KernelKind::Tile { i, simd: true, .. } => {
                let align = kernel::stream_block(self.isa);
                let row_bytes = i.sb.unsigned_abs() * self.dtype.size_bytes();
                row_bytes.is_multiple_of(align) && big()
            }
            _ => false,
        }
    }

    /// Whether an execution uses non-temporal stores: only when B is overwritten
    /// (`beta == 0`), is larger than [`STREAM_MIN_BYTES`] (or as forced by
    /// [`TransposeOptions::streaming`]), and the kernel is a SIMD tile or a row copy; tiles
    /// whose A rows are a single cache line long stream as the host's rule said when the plan
    /// was made ([`line_tile_streaming`]).
    pub fn streams(&self, beta_zero: bool) -> bool {
        let simd = matches!(
            self.kernel,
            KernelKind::Tile { simd: true, .. } | KernelKind::Rows { .. }
        ) && self.isa != Isa::Scalar;
        simd && beta_zero && self.stream_choice()
    }

    /// Whether a row copy's batches are rows that follow one another in B (`sb == n`), at
    /// least one store block long but shorter than [`kernel::STREAM_ROW_MIN_BYTES`]: a
    /// streamed execution writes each such batch whose rows are not whole blocks (e.g. 24
    /// f32, 96 bytes, in a ccsd(t) write-back) as one range, every whole line composed
    /// from the rows it covers (`kernel::stream_joined_rows`), where a row at a time could
    /// only copy these rows with ordinary stores, which read every line first. Batches of
    /// whole-block rows take the same path when B is not block-aligned.
    pub(super) fn joined_rows(&self) -> bool {
        let KernelKind::Rows { n } = self.kernel else {
            return false;
        };
        let bytes = n * self.dtype.size_bytes();
        let line = kernel::stream_block(self.isa);
        // the joined copy composes lines from whole dwords: rows of 2-byte elements qualify
        // when they are whole dwords (and B starts on one: checked when it runs)
        line > 0
            && bytes >= line
            && bytes.is_multiple_of(4)
            && bytes < kernel::STREAM_ROW_MIN_BYTES
            && self
                .row_batch
                .is_some_and(|d| d.sb == n as isize && d.n > 1)
    }

    /// Whether an execution with `beta == 0` writes B with non-temporal stores
    /// ([`Self::streams`]) for all but a few partial lines: a row copy streams only rows of
    /// whole lines, rows of at least 1 KiB, and batches of rows that follow one another in
    /// B ([`Self::joined_rows`]); other rows that are not whole lines (24 f32, 96 bytes,
    /// with gaps between them in B) are copied with ordinary stores, which read each line
    /// first.
    pub(crate) fn stores_stream(&self) -> bool {
        match self.kernel {
            KernelKind::Rows { n } => {
                self.streams(true)
                    && (self.streams_rows()
                        || self.joined_rows()
                        || n * self.dtype.size_bytes() >= kernel::STREAM_ROW_MIN_BYTES)
            }
            _ => self.streams(true),
        }
    }

    /// The forced store choice ([`TransposeOptions::streaming`]), else the default one.
    pub(super) fn stream_choice(&self) -> bool {
        self.streaming.unwrap_or_else(|| self.streams_by_default())
    }

    /// The default store choice for `beta == 0`: stream outputs of at least
    /// [`STREAM_MIN_BYTES`]; tiles whose A-side run is a single cache line (e.g. 16 f32) as
    /// the host's rule says ([`line_tile_streaming`]), except that those whose B rows are
    /// adjacent (one contiguous write per unit) and A rows at least 256 KiB apart always
    /// stream: they streamed faster on every machine measured, as longer A runs do (see
    /// `docs/TUNING.md`).
    pub(super) fn streams_by_default(&self) -> bool {
        let es = self.dtype.size_bytes();
        let big = self.norm.elements() * es >= STREAM_MIN_BYTES;
        // one-line-run tiles that the host's rule decides (not those that always stream)
        let plain = self.one_line_tile() == Some(false) && !self.line_stream;
        big && !plain && !self.short_joined_batches()
    }

    /// Whether a row copy could stream only as joined batches ([`Self::joined_rows`]: rows
    /// that are not whole store blocks) shorter than [`JOINED_STREAM_MIN_BYTES`] whose rows
    /// lie a page or more apart in A: such a plan stores plainly unless streaming is forced
    /// (batches of rows close together in A ran alike either way).
    fn short_joined_batches(&self) -> bool {
        let KernelKind::Rows { n } = self.kernel else {
            return false;
        };
        let bytes = n * self.dtype.size_bytes();
        let whole = bytes.is_multiple_of(kernel::stream_block(self.isa).max(1));
        !whole
            && self.joined_rows()
            && self.row_batch.is_some_and(|d| {
                let apart = d.sa.unsigned_abs() * self.dtype.size_bytes();
                d.n * bytes < JOINED_STREAM_MIN_BYTES && apart >= kernel::PAGE
            })
    }

    /// For a tile whose A rows are at most one cache line long (a one-line-run tile, e.g. 16
    /// f32): whether it streams under every store rule, i.e. its B rows are adjacent (one
    /// contiguous write per unit) and its A rows at least 256 KiB apart
    /// ([`Self::streams_by_default`]). `None` for every other kernel.
    pub(crate) fn one_line_tile(&self) -> Option<bool> {
        let es = self.dtype.size_bytes();
        match self.kernel {
            KernelKind::Tile { i, j, .. } if i.n * es <= 64 => {
                let adjacent_b = i.sb.unsigned_abs() * es == 64;
                let far_a = j.sa.unsigned_abs() * es >= 256 << 10;
                Some(adjacent_b && far_a)
            }
            _ => None,
        }
    }

    /// Whether a SIMD tile plan's execution prefetches (into L2, in software) the A rows of
    /// the next unit while it runs a unit, under the loop nest it runs with `beta == 0`.
    ///
    /// The rule: yes, except where the next unit continues the same A rows (the innermost
    /// repeating loop steps along them by one macro-tile) and those rows are at least a page
    /// apart. There every row of a micro-tile is a stream of its own that the hardware
    /// prefetchers follow, and the extra prefetches cost a little. Where the tile's rows are
    /// close together (one or two sequential streams: ttc-22's 96x96 f32 tiles that follow
    /// each other in A) the prefetch keeps more reads in flight. The exception is a host
    /// rule ([`far_row_prefetch`], measured by `ttgt calibrate`; with the prefetch
    /// [`PREFETCH_AHEAD_BYTES`] ahead, some machines run those tiles faster prefetched too;
    /// see `docs/TUNING.md`), and tiles of 2-byte units on AVX2, which always prefetch.
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{KernelKind, TransposePlan, TransposeOptions}};
    /// // ttc-22: 96x96 tiles, each contiguous in A and following the last
    /// let a = Layout::row_major(&[75, 75, 96, 96]).unwrap();
    /// let b = Layout::row_major(&[75, 75, 96, 96]).unwrap();
    /// let p = TransposePlan::new(&[1, 0, 3, 2], &a, &b, DType::F32,
    ///                            &TransposeOptions::default()).unwrap();
    /// let simd = matches!(p.kernel(), KernelKind::Tile { simd: true, .. });
    /// assert_eq!(p.prefetches(), simd);
    /// let off = TransposeOptions { prefetch: Some(false), ..Default::default() };
    /// let p = TransposePlan::new(&[1, 0, 3, 2], &a, &b, DType::F32, &off).unwrap();
    /// assert!(!p.prefetches());
    /// ```
    pub fn prefetches(&self) -> bool {
        self.prefetches_in(self.nest(self.streams(true)).0)
    }

    /// [`Self::prefetches`] under the loop nest `loops`.
    pub(super) fn prefetches_in(&self, loops: &[Loop]) -> bool {
        let KernelKind::Tile { simd: true, .. } = self.kernel else {
            return false;
        };
        if let Some(forced) = self.prefetch {
            return forced;
        }
        self.far_prefetch || self.many_row_streams() || !self.continues_far_rows(loops)
    }

    /// Whether the tile's micro-tiles read more A rows at once than the hardware prefetchers
    /// follow, so that far rows are prefetched whatever the host rule says: 2-byte units on
    /// AVX2 (16 rows a micro-tile, 32 for a streamed pair; docs/TUNING.md, "Half-precision
    /// tiles on AVX2").
    fn many_row_streams(&self) -> bool {
        self.isa == Isa::Avx2 && self.dtype.size_bytes() == 2
    }

    /// Whether, under `loops`, the innermost repeating loop continues the tile's A rows (steps
    /// along them by one macro-tile) and those rows are at least a page apart: the exception
    /// of the prefetch rule that [`far_row_prefetch`] decides.
    pub(super) fn continues_far_rows(&self, loops: &[Loop]) -> bool {
        let KernelKind::Tile { i, j, .. } = self.kernel else {
            return false;
        };
        let ni = i.n.min(self.block) as isize;
        let continues = loops
            .iter()
            .rev()
            .find(|l| l.count > 1)
            .is_some_and(|l| l.sa == ni * i.sa);
        continues && j.sa.unsigned_abs() * self.dtype.size_bytes() >= kernel::PAGE
    }

    /// Whether this plan's SIMD tiles fall under the far-row exception of the prefetch rule
    /// ([`far_row_prefetch`]) in its `beta == 0` loop nest, whatever the host rule says: the
    /// plans that `ttgt calibrate`'s probe of that rule compares.
    pub(crate) fn far_rows_continue(&self) -> bool {
        matches!(self.kernel, KernelKind::Tile { simd: true, .. })
            && !self.many_row_streams()
            && self.continues_far_rows(self.nest(self.streams(true)).0)
    }

    /// How many units (macro-tiles) ahead the tiles' software prefetch runs under the loop
    /// nest of a `beta == 0` execution, or `None` when the plan does not prefetch
    /// ([`Self::prefetches`]).
    ///
    /// ```
    /// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}};
    /// // 16^6 f32 with B's fastest dim A's dim 3: 16x16 tiles of 1 KiB of A
    /// let a = Layout::row_major(&[16; 6]).unwrap();
    /// let p = TransposePlan::new(&[0, 1, 2, 5, 4, 3], &a, &a, DType::F32,
    ///     &TransposeOptions::default()).unwrap();
    /// if p.prefetches() {
    ///     assert_eq!(p.prefetch_ahead(), Some(16)); // 16 KiB of A ahead
    /// }
    /// let near = TransposeOptions { prefetch_distance: Some(0), ..Default::default() };
    /// let p = TransposePlan::new(&[0, 1, 2, 5, 4, 3], &a, &a, DType::F32, &near).unwrap();
    /// assert!(p.prefetch_ahead().is_none_or(|k| k == 1));
    /// ```
    pub fn prefetch_ahead(&self) -> Option<usize> {
        let (loops, bj) = self.nest(self.streams(true));
        self.prefetches_in(loops).then(|| self.prefetch_units(bj))
    }

    /// How many units ahead the tiles' prefetch runs with B-side blocks of `bj` columns: the
    /// fewest whose A bytes reach the prefetch distance ([`PREFETCH_AHEAD_BYTES`]), at least
    /// one and at most [`PREFETCH_MAX_UNITS`].
    pub(super) fn prefetch_units(&self, bj: usize) -> usize {
        let KernelKind::Tile { i, j, .. } = self.kernel else {
            return 1;
        };
        let unit = i.n.min(self.block) * j.n.min(bj) * self.dtype.size_bytes();
        self.prefetch_bytes
            .div_ceil(unit.max(1))
            .clamp(1, PREFETCH_MAX_UNITS)
    }
}

//! Transposition kernels: the scalar tile kernel every SIMD path is tested against, the
//! SIMD micro-kernels (AVX2, AVX-512) chosen at run time, the macro-tile driver that covers a
//! tile with micro-tiles and masked edge micro-tiles for the remainders narrower than one
//! micro-tile, and the contiguous-row kernel.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

mod streaming;

use std::sync::OnceLock;

use crate::tensor::{DType, Element};

pub(crate) use streaming::{
    groups_rows, row, rows_continue, stream_block, stream_copy, stream_joined_rows,
    stream_row_sets, stream_rows, streaming_copies_for, streaming_copy, streaming_copy_one_stream,
    RowSeam, StreamRowSetsFn, StreamRowsFn, LINE, PAGE, ROW_GROUPS, SPLIT_COPY_MIN_PART,
    STREAM_ROW_MIN_BYTES,
};

/// Scaling mode of a kernel: `B = A`.
pub(crate) const COPY: u8 = 0;
/// Scaling mode of a kernel: `B = alpha * A`.
pub(crate) const SCALE: u8 = 1;
/// Scaling mode of a kernel: `B = alpha * A + beta * B`.
pub(crate) const AXPBY: u8 = 2;

/// Instruction-set level of the micro-kernels.
///
/// ```
/// use ttgt::transpose::Isa;
/// assert!(Isa::Scalar.is_available());
/// assert!(Isa::detect().is_available());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Portable loops (the reference for every SIMD kernel).
    Scalar,
    /// x86-64 AVX2: 32-byte tile rows.
    Avx2,
    /// x86-64 AVX-512F: 64-byte tile rows.
    Avx512,
}

impl Isa {
    /// The best level this CPU supports (detected once).
    pub fn detect() -> Isa {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| {
            [Isa::Avx512, Isa::Avx2]
                .into_iter()
                .find(|i| i.is_available())
                .unwrap_or(Isa::Scalar)
        })
    }

    /// Whether this CPU can run the level.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            Isa::Avx2 => crate::cpu::features().avx2,
            Isa::Avx512 => crate::cpu::features().avx512f,
        }
    }

    /// Every level this CPU can run.
    pub fn available() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|i| i.is_available())
            .collect()
    }

    /// Micro-tile width in elements for an element type (2-byte elements on AVX-512: 16,
    /// 256-bit rows, see `avx512::t_h16`).
    ///
    /// ```
    /// use ttgt::{transpose::Isa, DType};
    /// assert_eq!(Isa::Avx2.width(DType::F32), 8);
    /// assert_eq!(Isa::Avx512.width(DType::C64), 4);
    /// assert_eq!(Isa::Avx512.width(DType::F16), 16);
    /// ```
    pub fn width(self, dtype: DType) -> usize {
        let bytes = match self {
            Isa::Scalar => 8 * dtype.size_bytes().min(8),
            Isa::Avx2 => 32,
            Isa::Avx512 if dtype.size_bytes() == 2 => 32,
            Isa::Avx512 => 64,
        };
        (bytes / dtype.size_bytes()).max(1)
    }

    /// Short name (`scalar`, `avx2`, `avx512`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

/// A SIMD micro-kernel: `(a, lda_bytes, b, ldb_bytes, alpha, beta)`, see [`avx2`].
pub(crate) type MicroFn = unsafe fn(*const u8, isize, *mut u8, isize, f64, f64);

/// An edge micro-kernel: a [`MicroFn`] restricted to the first `ri` units of each source row
/// and the first `rj` source rows (`..., ri, rj)`, both at most the width), with masked loads
/// and stores that touch nothing outside that corner.
pub(crate) type EdgeFn = unsafe fn(*const u8, isize, *mut u8, isize, f64, f64, usize, usize);

/// A seam micro-kernel: `(a, next, lda, b, ldb, alpha, beta, tail)` transposes the `w×w`
/// blocks at `a` and `next` and streams, to each aligned `b + i*ldb`, the line made of the
/// last `tail` bytes of the first block's row `i` and the head of the second's.
pub(crate) type SeamFn = unsafe fn(*const u8, *const u8, isize, *mut u8, isize, f64, f64, usize);

/// A row of micro-kernels: `(a, lda_bytes, b, ldb_bytes, alpha, beta, n)` runs `n` micro-tiles
/// side by side along B's rows (each `width` A rows and one register of B row further on), see
/// [`avx2`]'s row kernels.
pub(crate) type RowFn = unsafe fn(*const u8, isize, *mut u8, isize, f64, f64, usize);

/// A micro-kernel with its tile width, for `beta == 0` its non-temporal-store variant (used
/// on destinations aligned to `align` bytes), its edge variant for the partial
/// micro-tiles at a tile's right and bottom edges, and the ISA's streaming row copy (for
/// the seam lines of [`Seam`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Micro {
    pub w: usize,
    pub f: MicroFn,
    pub nt: Option<(MicroFn, usize)>,
    pub edge: EdgeFn,
    pub stream: Option<StreamRowsFn>,
    /// The seam kernel, where the ISA has one (for streamed, i.e. `beta == 0`, modes).
    pub seam: Option<SeamFn>,
    /// The row kernel of `f`, with that of the non-temporal variant where there is one, on
    /// the ISAs that have them (AVX2).
    pub row: Option<(RowFn, Option<RowFn>)>,
    /// Edges of tiles at least one micro-tile wide and high run as whole micro-tiles that
    /// overlap the last whole ones (rewriting their values) instead of masked edge
    /// micro-tiles: modes that do not read B, on ISAs whose masked stores are slow (AVX2).
    pub overlap: bool,
}

/// Streamed rows of B that start inside a line and are followed in memory by the row of the
/// next index of an outer dimension (row length a multiple of 64 bytes, e.g. a result that
/// the system allocator placed 16 bytes past a line): the line where a row ends holds the
/// head of the row after it. Written as two partial lines with ordinary stores by two tiles
/// far apart in time, each half is a read for ownership from memory (2.2x the time of a
/// line-aligned B on a 48-wide f64 tile with far-apart rows); a seam writes the line once,
/// streamed, composed from both rows' sources by the tile that owns the tail, and the tile
/// of the next rows skips their heads. The default: no seams.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seam {
    /// Element offset in A from this tile's first element to its rows' successors' column 0.
    pub next_a: isize,
    /// Columns of a row's head (up to its first aligned line) that its predecessor writes.
    pub head: usize,
    /// The heads of this tile's rows were written by their predecessors' seams: skip them.
    pub skip: bool,
    /// This tile's rows have successors whose heads it writes with their tails.
    pub succ: bool,
}

/// Orders earlier non-temporal stores before later stores (a no-op off x86-64).
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions (SSE is part of the x86-64 baseline).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// The scalars of one execution, with the kernel mode they select.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalars<T> {
    pub alpha: T,
    pub beta: T,
    pub mode: u8,
}

impl<T: Element> Scalars<T> {
    pub fn new(alpha: T, beta: T) -> Self {
        let mode = if !beta.is_exact_zero() {
            AXPBY
        } else if alpha.is_exact_one() {
            COPY
        } else {
            SCALE
        };
        Scalars { alpha, beta, mode }
    }

    /// Whether SIMD kernels (real-lane arithmetic) can apply these scalars.
    fn real(&self) -> bool {
        self.alpha.im() == 0.0 && self.beta.im() == 0.0
    }

    #[inline(always)]
    fn apply(&self, src: T, dst: *mut T) {
        // SAFETY (callers): `dst` is a valid, exclusively owned element.
        unsafe {
            *dst = match self.mode {
                COPY => src,
                SCALE => T::scale(self.alpha, src),
                _ => T::axpby(self.alpha, src, self.beta, *dst),
            }
        }
    }
}

/// Whether the CPU has AVX-512BW and VL (the 16-bit masked loads and stores, on 256-bit
/// rows, of the 2-byte edge kernels).
fn avx512bw() -> bool {
    let f = crate::cpu::features();
    f.avx512bw && f.avx512vl
}

/// The micro-kernel of `isa` for `T` and the scalars' mode, with its width.
pub(crate) fn micro<T: Element>(isa: Isa, sc: &Scalars<T>) -> Option<Micro> {
    if isa == Isa::Scalar || !sc.real() || !isa.is_available() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! pick {
            ($m:ident :: $f:ident, $e:ident) => {
                pick!($m::$f, $e, |_| None)
            };
            ($m:ident :: $f:ident, $e:ident, $s:ident) => {
                pick!($m::$f, $e, |mode| match mode {
                    COPY => Some($m::$s::<COPY> as SeamFn),
                    _ => Some($m::$s::<SCALE> as SeamFn),
                })
            };
            ($m:ident :: $f:ident, $e:ident, $seam:expr) => {
                match sc.mode {
                    COPY => (
                        $m::$f::<COPY, false> as MicroFn,
                        Some($m::$f::<COPY, true> as MicroFn),
                        $m::$e::<COPY> as EdgeFn,
                        $seam(COPY),
                    ),
                    SCALE => (
                        $m::$f::<SCALE, false> as MicroFn,
                        Some($m::$f::<SCALE, true> as MicroFn),
                        $m::$e::<SCALE> as EdgeFn,
                        $seam(SCALE),
                    ),
                    _ => (
                        $m::$f::<AXPBY, false> as MicroFn,
                        None,
                        $m::$e::<AXPBY> as EdgeFn,
                        None,
                    ),
                }
            };
        }
        let (f, nt, edge, seam) = match (isa, T::DTYPE) {
            (Isa::Avx2, DType::F32) => pick!(avx2::t_f32, e_f32),
            (Isa::Avx2, DType::F64) => pick!(avx2::t_f64, e_f64),
            (Isa::Avx2, DType::C32) => pick!(avx2::t_c32, e_c32),
            (Isa::Avx2, DType::C64) => pick!(avx2::t_c64, e_c64),
            (Isa::Avx512, DType::F32) => pick!(avx512::t_f32, e_f32, s_f32),
            (Isa::Avx512, DType::F64) => pick!(avx512::t_f64, e_f64, s_f64),
            (Isa::Avx512, DType::C32) => pick!(avx512::t_c32, e_c32, s_c32),
            (Isa::Avx512, DType::C64) => pick!(avx512::t_c64, e_c64, s_c64),
            // 2-byte elements: copies on AVX2 and on AVX-512 with BW (16-bit masked edges);
            // scaled ones (computed in f32) take the scalar tile.
            (Isa::Avx2, DType::F16 | DType::BF16) if sc.mode == COPY => (
                avx2::t_h16::<COPY, false> as MicroFn,
                Some(avx2::t_h16::<COPY, true> as MicroFn),
                avx2::e_h16::<COPY> as EdgeFn,
                None,
            ),
            (Isa::Avx512, DType::F16 | DType::BF16) if sc.mode == COPY && avx512bw() => (
                avx512::t_h16::<COPY, false> as MicroFn,
                Some(avx512::t_h16::<COPY, true> as MicroFn),
                avx512::e_h16::<COPY> as EdgeFn,
                None,
            ),
            (_, DType::F16 | DType::BF16) | (Isa::Scalar, _) => return None,
        };
        macro_rules! rows {
            ($m:ident :: $r:ident) => {
                match sc.mode {
                    COPY => Some((
                        $m::$r::<COPY, false> as RowFn,
                        Some($m::$r::<COPY, true> as RowFn),
                    )),
                    SCALE => Some((
                        $m::$r::<SCALE, false> as RowFn,
                        Some($m::$r::<SCALE, true> as RowFn),
                    )),
                    _ => Some(($m::$r::<AXPBY, false> as RowFn, None)),
                }
            };
        }
        let row = match (isa, T::DTYPE) {
            (Isa::Avx2, DType::F32) => rows!(avx2::r_f32),
            (Isa::Avx2, DType::F64) => rows!(avx2::r_f64),
            (Isa::Avx2, DType::C32) => rows!(avx2::r_c32),
            (Isa::Avx2, DType::C64) => rows!(avx2::r_c64),
            (Isa::Avx2, DType::F16 | DType::BF16) => Some((
                avx2::r_h16::<COPY, false> as RowFn,
                Some(avx2::r_h16::<COPY, true> as RowFn),
            )),
            _ => None,
        };
        // 2-byte micro-tiles store 32-byte rows
        let align = if T::DTYPE.is_half() {
            32
        } else {
            stream_block(isa)
        };
        Some(Micro {
            w: isa.width(T::DTYPE),
            f,
            nt: nt.map(|g| (g, align)),
            edge,
            stream: stream_rows(isa),
            seam,
            row,
            overlap: isa == Isa::Avx2 && sc.mode != AXPBY,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Shape of a 2-D tile: element `(i, j)` is at `a + i*sai + j*saj` in A and
/// `b + i*sbi + j*sbj` in B (element strides).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tile {
    pub ni: usize,
    pub nj: usize,
    pub sai: isize,
    pub saj: isize,
    pub sbi: isize,
    pub sbj: isize,
}

/// Scalar tile: any strides.
///
/// # Safety
/// Every `(i, j)` with `i < ni`, `j < nj` addresses a readable A element and a writable B
/// element; B's elements are distinct and overlap no A element.
pub(crate) unsafe fn tile_scalar<T: Element>(a: *const T, b: *mut T, t: &Tile, sc: &Scalars<T>) {
    for i in 0..t.ni as isize {
        let (ai, bi) = (a.offset(i * t.sai), b.offset(i * t.sbi));
        for j in 0..t.nj as isize {
            sc.apply(*ai.offset(j * t.saj), bi.offset(j * t.sbj));
        }
    }
}

/// A tile covered by `w×w` SIMD micro-tiles, with edge micro-tiles (masked, [`EdgeFn`]) for
/// the strips narrower than `w` on the right and bottom edges, so that no part of the tile
/// runs element by element. Requires `sai == 1` and `sbj == 1`. With `stream`, micro-tiles
/// whose destination rows are aligned use non-temporal stores (the caller fences). With a
/// non-null `next` (the A origin of the tile the caller runs next, same row stride), each
/// whole micro-tile first prefetches the lines of the next tile's rows at its own position
/// ([`prefetch_rows`]; `next` need not be a valid address).
///
/// # Safety
/// As [`tile_scalar`], plus: `micro` runs on this CPU and `t.sai == 1 && t.sbj == 1`.
#[allow(clippy::too_many_arguments)] // the tile, its kernels and scalars, the store kind, seams, the prefetch
pub(crate) unsafe fn tile_simd<T: Element>(
    a: *const T,
    b: *mut T,
    t: &Tile,
    sc: &Scalars<T>,
    m: &Micro,
    stream: bool,
    seam: &Seam,
    next: *const T,
) {
    let w = m.w;
    debug_assert!(t.sai == 1 && t.sbj == 1);
    let es = std::mem::size_of::<T>() as isize;
    let (lda, ldb) = (t.saj * es, t.sbi * es);
    let (al, be) = (sc.alpha.re(), sc.beta.re());
    // Byte pointers to element (i0, j0) of a tile at `a`, `b`.
    // SAFETY (callers): the element lies inside the tile.
    let at = |a: *const T, b: *mut T, t: &Tile, i0: usize, j0: usize| unsafe {
        (
            a.add(i0).offset(j0 as isize * t.saj) as *const u8,
            b.add(j0).offset(i0 as isize * t.sbi) as *mut u8,
        )
    };
    // The micro-tile at row `i0`, column `j0` (callers: inside the tile).
    let micro_at = |f: MicroFn, a: *const T, b: *mut T, t: &Tile, i0: usize, j0: usize| {
        let (pa, pb) = at(a, b, t, i0, j0);
        // SAFETY: the micro-tile lies inside the tile (callers).
        unsafe { f(pa, lda, pb, ldb, al, be) }
    };
    // The `ri`×`rj` corner of the micro-tile at `i0`, `j0` (`ri, rj <= w`; callers: inside
    // the tile).
    let edge_at = |a: *const T, b: *mut T, t: &Tile, i0: usize, j0: usize, ri, rj| {
        let (pa, pb) = at(a, b, t, i0, j0);
        // SAFETY: the corner lies inside the tile (callers).
        unsafe { (m.edge)(pa, lda, pb, ldb, al, be, ri, rj) }
    };
    // Non-temporal stores when every destination row of a micro-tile is aligned: rows are
    // `ldb` bytes apart, so that is `ldb` and the first row's address being multiples.
    let nt = match m.nt {
        Some((g, align)) if stream && ldb as usize & (align - 1) == 0 => Some((g, align)),
        _ => None,
    };
    // When the rows are equally misaligned (a tile that starts inside a line of a
    // line-aligned B, e.g. with a forced block size), the micro-tile grid starts `shift`
    // elements into each row so that every micro-tile row is aligned; the first `shift`
    // columns go to a strip on the left. (A plan shifts its grid of B-side blocks so that
    // only its first block starts inside a line: `TransposePlan::execute_raw`.) With seams,
    // the shifted part may be narrower than a micro-tile: a row of one line, say, is then
    // all head (written by the left strip or its predecessor's seam) and tail.
    // Seams apply only where the grid is line-aligned and streamed.
    let seam = match (nt, m.stream) {
        (Some(_), Some(_)) => *seam,
        _ => Seam::default(),
    };
    let seamed = seam.head > 0;
    let shift = match nt {
        Some((_, align)) if (b as usize).is_multiple_of(es as usize) => {
            let mis = b as usize & (align - 1);
            let s = if mis == 0 {
                0
            } else {
                (align - mis) / es as usize
            };
            if s < t.nj && (t.nj - s >= w || (seamed && t.nj >= w)) {
                s
            } else {
                0
            }
        }
        _ => 0,
    };
    let (ni, es_u) = (t.ni, es as usize);
    debug_assert!(!seam.skip || shift == seam.head);
    if shift > 0 && !seam.skip {
        // The left strip: ordinary-store micro-tiles over columns [0, w), whose columns
        // [shift, w) the aligned streamed micro-tiles below write again with the same values
        // (streaming implies beta = 0: B is not read, only overwritten, by this thread);
        // its rows below the last whole micro-tile, an edge micro-tile over [0, shift).
        // (Masked edge micro-tiles over [0, shift) alone ran slower: TTC f32, 1 thread,
        // B 16 bytes past a line, ttc-22 0.64 -> 0.53 of copy, ttc-49 0.34 -> 0.26.)
        // SAFETY: the strip and the shifted rest are sub-tiles of `t` (w <= nj).
        let fi = ni / w * w;
        for i0 in (0..fi).step_by(w) {
            micro_at(m.f, a, b, t, i0, 0);
        }
        if fi < ni {
            edge_at(a, b, t, fi, 0, ni - fi, shift);
        }
    }
    let (a0, full) = (a, t.nj);
    let (a, b) = (a.offset(shift as isize * t.saj), b.add(shift));
    let t = &Tile {
        nj: t.nj - shift,
        ..*t
    };
    let (fi, fj) = (t.ni / w * w, t.nj / w * w);
    // Whole micro-tiles over the edges (`Micro::overlap`): ordinary stores only, as the
    // edge micro-tiles have.
    let overlap = m.overlap && nt.is_none() && t.ni >= w && t.nj >= w;
    // The tail columns [fj, nj) of rows with a successor go out as seam lines (below).
    let tail = t.nj - fj;
    let seams = tail > 0 && seam.succ;
    debug_assert!(!seams || (tail + seam.head) * es_u == nt.map_or(0, |n| n.1));
    // Streamed micro-tiles: alignments are powers of two (a mask, not a division per
    // micro-tile).
    let (g, mask) = nt.map_or((m.f, usize::MAX), |(g, align)| (g, align - 1));
    // A row of micro-tiles whose stores are all of one kind (every micro-tile streamed, or
    // none) runs as one call of the row kernel where the ISA has one: that of `g` where the
    // loop below would pick `g`, else that of `m.f`.
    let alternating = mask != usize::MAX && (w * es_u) & mask != 0;
    let row_of = |pb: *mut u8| {
        let (rf, rg) = m.row.filter(|_| !alternating)?;
        if pb as usize & mask == 0 {
            rg
        } else {
            Some(rf)
        }
    };
    for i0 in (0..fi).step_by(w) {
        let (pa_row, pb_row) = at(a, b, t, i0, 0);
        // The next tile's A rows at this column, one line per row (micro-tile rows narrower
        // than a line: at the line's first micro-tile only).
        let next_row = (!next.is_null() && (i0 * es_u).is_multiple_of(64))
            .then(|| next.wrapping_add(i0) as *const u8);
        let row = if next_row.is_none() && fj > 0 {
            row_of(pb_row)
        } else {
            None
        };
        if let Some(rf) = row {
            // SAFETY: the `fj / w` micro-tiles of this row lie inside the tile; their store
            // kind is the one the loop below would pick for each.
            unsafe { rf(pa_row, lda, pb_row, ldb, al, be, fj / w) };
        }
        // Streamed micro-tiles of 2-byte units write half a line of each of their 16 rows:
        // two at a time through the row kernel, which writes each line whole (`avx2::r_h16`).
        let pairs = match (nt, m.row) {
            (Some(_), Some((_, Some(rg))))
                if row.is_none() && es_u == 2 && pb_row as usize & mask == 0 =>
            {
                Some(rg)
            }
            _ => None,
        };
        let step = if pairs.is_some() { 2 * w } else { w };
        for j0 in (0..fj).step_by(step).filter(|_| row.is_none()) {
            let n = if pairs.is_some() && j0 + 2 * w <= fj {
                2
            } else {
                1
            };
            if let Some(nr) = next_row {
                for k in 0..n {
                    prefetch_rows(nr.wrapping_offset((j0 + k * w) as isize * lda), lda, w);
                }
            }
            // SAFETY: the micro-tile at (i0, j0) lies inside the tile.
            let (pa, pb) = unsafe { (pa_row.offset(j0 as isize * lda), pb_row.add(j0 * es_u)) };
            match pairs {
                // SAFETY: the `n` micro-tiles from (i0, j0) lie inside the tile; every one
                // is aligned (2-byte micro-tile rows are whole alignment units), as the
                // streamed kernel requires.
                Some(rg) => unsafe { rg(pa, lda, pb, ldb, al, be, n) },
                None => {
                    let f = if pb as usize & mask == 0 { g } else { m.f };
                    // SAFETY: as above.
                    unsafe { f(pa, lda, pb, ldb, al, be) };
                }
            }
        }
        // The right edge of this row of micro-tiles.
        if fj < t.nj && !seams {
            if overlap {
                micro_at(m.f, a, b, t, i0, t.nj - w);
            } else {
                edge_at(a, b, t, i0, fj, w, t.nj - fj);
            }
        }
    }
    // The bottom edge, when not empty: the first element of an empty strip lies past the
    // tile, where even computing its address (with `offset`/`add`) may leave the
    // allocation, which is undefined behaviour.
    if fi < t.ni && overlap && !seams {
        // The last `w` rows, overlapping the rows above (a mode that does not read B writes
        // the same values again).
        let i0 = t.ni - w;
        let (pa_row, pb_row) = at(a, b, t, i0, 0);
        match row_of(pb_row) {
            // SAFETY: the `fj / w` micro-tiles of rows [i0, ni) lie inside the tile.
            Some(rf) if fj > 0 => unsafe { rf(pa_row, lda, pb_row, ldb, al, be, fj / w) },
            _ => {
                for j0 in (0..fj).step_by(w) {
                    micro_at(m.f, a, b, t, i0, j0);
                }
            }
        }
        if fj < t.nj {
            micro_at(m.f, a, b, t, i0, t.nj - w);
        }
    } else if fi < t.ni {
        let end = if seams { fj } else { t.nj };
        for j0 in (0..end).step_by(w) {
            edge_at(a, b, t, fi, j0, t.ni - fi, w.min(t.nj - j0));
        }
    }
    if let (true, Some(copy)) = (seams, m.stream) {
        // Each row's tail and its successor's head: the line that straddles them, from the
        // transposes of the row's last `w` columns and of the successor's first `w`, joined
        // in registers by the seam kernel, or (without one, or for the partial rows at the
        // bottom) composed in an aligned scratch row of two lines and streamed out.
        let line = nt.map_or(64, |n| n.1);
        debug_assert!(w * es_u == line && w <= 16);
        let from = line - tail * es_u;
        for i0 in (0..t.ni).step_by(w) {
            let r = w.min(t.ni - i0);
            let (pt, pb) = at(a, b, t, i0, fj);
            // SAFETY: the successors' first `w` columns lie in A (the caller's promise for
            // tiles with seams: the successor rows are whole rows of at least `w` columns).
            let na = unsafe { a0.offset(seam.next_a).add(i0) } as *const u8;
            // Whole micro-tiles: `w` rows, and the row's last `w` columns inside the
            // unshifted tile (a plan's seam tiles always have them).
            let whole = r == w && full >= w;
            // SAFETY (when `whole`): column `full - w` is in the unshifted tile.
            let last = || unsafe { a0.add(i0).offset((full - w) as isize * t.saj) } as *const u8;
            match (m.seam, whole) {
                // SAFETY: both blocks lie in A (above); the lines at `pb`, `ldb` apart, are
                // this row's tail and its successor's head, both ours to write, aligned (the
                // grid is).
                (Some(sf), true) => unsafe { sf(last(), na, lda, pb, ldb, al, be, tail * es_u) },
                _ => {
                    let (src, ends) = if whole {
                        (last(), None)
                    } else {
                        (pt, Some((r, tail, seam.head)))
                    };
                    // SAFETY: the row's last `w` columns (when `whole`), its tail columns
                    // [fj, nj) and the successors' first `w` lie in A; the lines at `pb`,
                    // `ldb` apart, are this row's tail and its successor's head, both ours
                    // to write, aligned (the grid is).
                    unsafe {
                        seam_via_scratch(
                            m,
                            copy,
                            (src, na, lda),
                            (pb, ldb),
                            (al, be),
                            line,
                            from,
                            ends,
                        )
                    };
                }
            }
            #[cfg(test)]
            SEAM_LINES.fetch_add(r, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The most micro-tiles in a tile that [`WholeMicro`] runs (16x16 f64 on AVX-512: 2x2; 16x64
/// f32: 1x4).
pub(crate) const WHOLE_MICRO_MAX: usize = 4;

/// A tile that is a small grid of whole `w`×`w` micro-tiles (sides multiples of `w`, at
/// most [`WHOLE_MICRO_MAX`] micro-tiles), prepared once for a run of such tiles: what
/// [`tile_simd`] does for it (no edges, no seams), without its per-call set-up, which weighs
/// on small tiles; larger tiles amortize it (`docs/TUNING.md`, `WHOLE_MICRO_MAX`).
#[derive(Clone, Copy)]
pub(crate) struct WholeMicro {
    f: MicroFn,
    g: MicroFn,
    mask: usize,
    lda: isize,
    ldb: isize,
    al: f64,
    be: f64,
    w: usize,
    ni: usize,
    nj: usize,
    es: usize,
}

impl WholeMicro {
    /// The prepared micro-tiles for tiles of shape `t` (`None` unless its sides are
    /// multiples of `w`, with at most [`WHOLE_MICRO_MAX`] micro-tiles, and unit strides along
    /// its contiguous sides).
    pub(crate) fn new<T: Element>(
        t: &Tile,
        sc: &Scalars<T>,
        m: &Micro,
        stream: bool,
    ) -> Option<Self> {
        let w = m.w;
        let whole = |n: usize| n >= w && n.is_multiple_of(w);
        if !whole(t.ni) || !whole(t.nj) || t.sai != 1 || t.sbj != 1 {
            return None;
        }
        if (t.ni / w) * (t.nj / w) > WHOLE_MICRO_MAX {
            return None;
        }
        let es = std::mem::size_of::<T>();
        let (lda, ldb) = (t.saj * es as isize, t.sbi * es as isize);
        // As in `tile_simd`: streamed stores where the rows' spacing and the first row are
        // aligned, ordinary ones elsewhere (a mask that no address passes).
        let (g, mask) = match m.nt {
            Some((g, align)) if stream && ldb as usize & (align - 1) == 0 => (g, align - 1),
            _ => (m.f, usize::MAX),
        };
        Some(Self {
            f: m.f,
            g,
            mask,
            lda,
            ldb,
            al: sc.alpha.re(),
            be: sc.beta.re(),
            w,
            ni: t.ni,
            nj: t.nj,
            es,
        })
    }

    /// Transposes the tile at `a` into `b`, each micro-tile first asking for the rows of the
    /// tile at `next` (unless null) at its position to be fetched, as [`tile_simd`] does.
    /// Returns `false`, doing nothing, for a tile more than one micro-tile wide whose
    /// streamed rows start inside a line: [`tile_simd`] shifts its grid for those.
    ///
    /// # Safety
    /// As [`tile_simd`] for a tile of this shape at `a` and `b`.
    #[inline(always)]
    pub(crate) unsafe fn run(&self, a: *const u8, b: *mut u8, next: *const u8) -> bool {
        let aligned = b as usize & self.mask == 0;
        if !aligned && self.mask != usize::MAX && self.nj > self.w {
            return false;
        }
        let f = if aligned { self.g } else { self.f };
        let (w, es) = (self.w, self.es);
        if self.ni == w && self.nj == w {
            // one micro-tile (16x16 f32 tiles: the 720 permutations' common case)
            if !next.is_null() {
                prefetch_rows(next, self.lda, w);
            }
            // SAFETY: the tile is this micro-tile (the caller's promise).
            unsafe { f(a, self.lda, b, self.ldb, self.al, self.be) };
            return true;
        }
        for i0 in (0..self.ni).step_by(w) {
            // SAFETY (both rows): inside the tile (the caller's promise).
            let (pa, pb) = unsafe { (a.add(i0 * es), b.offset(i0 as isize * self.ldb)) };
            let fetch = !next.is_null() && (i0 * es).is_multiple_of(64);
            for j0 in (0..self.nj).step_by(w) {
                if fetch {
                    let nr = next.wrapping_add(i0 * es);
                    prefetch_rows(nr.wrapping_offset(j0 as isize * self.lda), self.lda, w);
                }
                // SAFETY: the micro-tile at (i0, j0) lies inside the tile.
                unsafe {
                    f(
                        pa.offset(j0 as isize * self.lda),
                        self.lda,
                        pb.add(j0 * es),
                        self.ldb,
                        self.al,
                        self.be,
                    )
                };
            }
        }
        true
    }
}

/// Asks for the `rows` lines at `p`, `ld` bytes apart, to be brought into the L2 cache.
/// A hint only: prefetches never fault, so the addresses need not be valid (they are formed
/// with wrapping arithmetic for that reason).
#[inline(always)]
fn prefetch_rows(p: *const u8, ld: isize, rows: usize) {
    #[cfg(target_arch = "x86_64")]
    for r in 0..rows as isize {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        // SAFETY: a prefetch has no architectural effect and does not fault on any address.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_offset(r * ld) as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, ld, rows);
}

/// The seam lines of one row of micro-tiles composed in an aligned scratch of two lines per
/// row and streamed out: the row's tail (`src`: its last `w` columns, or with `ends =
/// Some((rows, tail, head))` its `tail` columns of `rows` rows) and its successor's head
/// (`na`). Out of line (a rare path), so that its 2 KiB scratch is not part of the stack
/// frame of every [`tile_simd`] call (a frame over 4 KiB, probed on each call).
///
/// # Safety
/// As the seam branch of [`tile_simd`]: the A blocks are readable, the `rows` lines at `pb`
/// (`ldb` apart) are the caller's to write and `line`-aligned, `line <= 128`.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)] // two sources, a destination, the scalars and the shape
unsafe fn seam_via_scratch(
    m: &Micro,
    copy: StreamRowsFn,
    (src, na, lda): (*const u8, *const u8, isize),
    (pb, ldb): (*mut u8, isize),
    (al, be): (f64, f64),
    line: usize,
    from: usize,
    ends: Option<(usize, usize, usize)>,
) {
    #[repr(align(64))]
    struct Scratch([u8; 16 * 128]);
    let mut buf = Scratch([0; 16 * 128]);
    let sp = buf.0.as_mut_ptr();
    let ld = 2 * line as isize;
    // SAFETY: the scratch holds up to 16 rows of two lines; the sources lie in A (caller).
    let rows = unsafe {
        match ends {
            None => {
                (m.f)(src, lda, sp, ld, al, be);
                (m.f)(na, lda, sp.add(line), ld, al, be);
                m.w
            }
            Some((r, tail, head)) => {
                (m.edge)(src, lda, sp.add(from), ld, al, be, r, tail);
                (m.edge)(na, lda, sp.add(line), ld, al, be, r, head);
                r
            }
        }
    };
    // SAFETY: the scratch rows' bytes [from, from + line) go to their lines [pb, pb + line)
    // (caller).
    unsafe { copy(sp.add(from), ld, pb, ldb, rows, line, None) };
}

thread_local! {
    /// Units run through [`WholeMicro`] on this thread (tests check that their cases reach
    /// it).
    #[cfg(test)]
    pub(crate) static WHOLE_MICRO_UNITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Seam lines written (tests check that their cases reach the seam path).
#[cfg(test)]
pub(crate) static SEAM_LINES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Row batches streamed as one range ([`stream_joined_rows`]; tests check that their cases
/// reach it).
#[cfg(test)]
pub(crate) static JOINED_BATCHES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::{Complex32, Complex64};

    /// Tile shapes `(ni, nj)`: remainders on both edges, tiles narrower than every micro-tile
    /// in one or both directions, and whole micro-tiles.
    const SHAPES: [(usize, usize); 8] = [
        (37, 45),
        (3, 2),
        (1, 20),
        (17, 1),
        (5, 13),
        (16, 16),
        (8, 9),
        (2, 35),
    ];

    /// Batched streamed rows copied in groups ([`groups_rows`]): every row lands whole and
    /// in its place, rows past the last whole group included, and nothing else is written;
    /// batches that do not group (rows a page or more apart, too few rows) as well.
    #[test]
    fn grouped_rows_match_a_plain_copy() {
        for isa in Isa::available() {
            let (Some(rows), line) = (stream_rows(isa), stream_block(isa)) else {
                continue;
            };
            // (row bytes, source stride, rows): grouped, grouped with a remainder, long rows
            // one after another, and three that do not group.
            for (bytes, sa, count) in [
                (2048, 2048, 8),
                (1536, 1536 + 12, 13),
                (10240, 10240, 9),
                // rows of an odd number of AVX2 blocks, not whole AVX-512 blocks
                (2080, 2080, 8),
                (64, 4096 + 64, 16),
                (64, 64, 12),
                (512, 512, 7),
                // rows of 1 KiB and more that are not whole blocks: streamed one by one
                // (`stream_copy`), into destinations that start anywhere in a block
                (1460, 1460 + 12, 5),
                (1028, 1028, 7),
            ] {
                let grouped = groups_rows(sa as isize, bytes, count);
                // Destination rows a line apart beyond their length (gaps must stay 0xAA).
                let sb = bytes + line;
                let src: Vec<u8> = (0..sa * count).map(|x| (x * 7 % 251) as u8).collect();
                let mut dst = vec![0xAAu8; sb * count + 2 * line];
                let base = (line - dst.as_ptr() as usize % line) % line;
                // SAFETY: `count` rows of `bytes` lie `sa` apart in `src` and `sb` apart from
                // the line-aligned `base` in `dst`.
                unsafe {
                    let d = dst.as_mut_ptr().add(base);
                    rows(
                        src.as_ptr(),
                        sa as isize,
                        d,
                        sb as isize,
                        count,
                        bytes,
                        None,
                    );
                }
                store_fence();
                for r in 0..count {
                    let at = base + r * sb;
                    assert_eq!(
                        &dst[at..at + bytes],
                        &src[r * sa..r * sa + bytes],
                        "{isa:?} {bytes} bytes {sa} apart, {count} rows (grouped {grouped}): row {r}"
                    );
                    assert!(dst[at + bytes..at + sb].iter().all(|&x| x == 0xAA));
                }
                assert!(dst[..base].iter().all(|&x| x == 0xAA));
            }
        }
        // The cases above are what they claim to be.
        assert!(groups_rows(2048, 2048, 8) && groups_rows(-2048, 2048, 8));
        assert!(groups_rows(1548, 1536, 13) && groups_rows(10240, 10240, 9));
        assert!(!groups_rows(4096 + 64, 64, 16) && !groups_rows(64, 64, 12));
        assert!(!groups_rows(512, 512, 7));
        assert!(!groups_rows(1472, 1460, 5) && !groups_rows(1028, 1028, 7));
    }

    /// A streamed range copy, on every SIMD level of this CPU, for lengths below, at and above
    /// the one where the range is read as [`ROW_GROUPS`] streams
    /// ([`SPLIT_COPY_MIN_PART`]), from and to every offset into a block: every byte lands
    /// where a plain copy puts it and nothing around the destination is written.
    #[test]
    fn split_range_copies_match_a_plain_copy() {
        let split = ROW_GROUPS * SPLIT_COPY_MIN_PART;
        for isa in Isa::available() {
            let (Some(copy), line) = (stream_copy(isa), stream_block(isa)) else {
                continue;
            };
            for bytes in [split - 1, split, split + 300, 5 * split + 37, 1 << 20] {
                for (so, doff) in [(0, 0), (4, 0), (0, 4), (3, 17), (line - 1, line - 1)] {
                    let src: Vec<u8> = (0..bytes + 2 * line)
                        .map(|x| (x * 13 % 253) as u8)
                        .collect();
                    let mut dst = vec![0xAAu8; bytes + 4 * line];
                    let base = (line - dst.as_ptr() as usize % line) % line + doff;
                    // SAFETY: `src[so..so + bytes]` is readable, `dst[base..base + bytes]`
                    // writable (`base < 2 * line`), and the two do not overlap.
                    unsafe { copy(src.as_ptr().add(so), dst.as_mut_ptr().add(base), bytes) };
                    store_fence();
                    assert_eq!(
                        &dst[base..base + bytes],
                        &src[so..so + bytes],
                        "{isa:?} {bytes} bytes from +{so} to +{doff}"
                    );
                    assert!(dst[..base].iter().all(|&x| x == 0xAA));
                    assert!(dst[base + bytes..].iter().all(|&x| x == 0xAA));
                }
            }
        }
    }

    /// The batched streaming row copy with seams, on every SIMD level of this CPU: rows of
    /// one to four blocks whose destinations start every 4-byte offset into a block, each
    /// followed in memory by its successor, sources with gaps between the rows; every byte
    /// of every row lands where a plain copy puts it and nothing outside the rows is touched.
    #[test]
    fn seam_rows_match_a_plain_copy() {
        for isa in Isa::available() {
            let (Some(rows), line) = (stream_rows(isa), stream_block(isa)) else {
                continue;
            };
            for blocks in 1..=4 {
                let bytes = blocks * line;
                for mis in (4..line).step_by(4) {
                    let count = 5;
                    // Source rows `bytes + 36` apart (the gap marks stray reads as wrong data).
                    let sa = bytes + 36;
                    let src: Vec<u8> = (0..sa * (count + 1)).map(|x| (x * 7 % 251) as u8).collect();
                    let mut dst = vec![0xAAu8; bytes * (count + 1) + 3 * line];
                    let base = (line - dst.as_ptr() as usize % line) % line + line + mis;
                    // Rows 0..count: the first copies its head, the last writes no seam.
                    let seam = |skip, succ| RowSeam {
                        next: sa as isize,
                        skip,
                        succ,
                    };
                    // SAFETY: rows lie inside `src` and `dst`; with `succ`, the successor row
                    // (source `sa` bytes on, destination right after) exists and is ours.
                    unsafe {
                        let (s, d) = (src.as_ptr(), dst.as_mut_ptr().add(base));
                        rows(
                            s,
                            sa as isize,
                            d,
                            bytes as isize,
                            1,
                            bytes,
                            Some(seam(false, true)),
                        );
                        rows(
                            s.add(sa),
                            sa as isize,
                            d.add(bytes),
                            bytes as isize,
                            count - 2,
                            bytes,
                            Some(seam(true, true)),
                        );
                        let last = count - 1;
                        rows(
                            s.add(last * sa),
                            sa as isize,
                            d.add(last * bytes),
                            bytes as isize,
                            1,
                            bytes,
                            Some(seam(true, false)),
                        );
                    }
                    store_fence();
                    let what = format!("{isa:?} {blocks} blocks, {mis} bytes in");
                    assert_rows_landed(&dst, base, &src, sa, (count, bytes), 0xAA, &what);
                }
            }
        }
    }

    /// Asserts that `count` rows of `bytes` bytes, `sa` apart in `src`, lie one after another
    /// in `dst` from `base`, and that every byte of `dst` around them still holds `fill`.
    fn assert_rows_landed(
        dst: &[u8],
        base: usize,
        src: &[u8],
        sa: usize,
        (count, bytes): (usize, usize),
        fill: u8,
        what: &str,
    ) {
        for r in 0..count {
            assert_eq!(
                &dst[base + r * bytes..base + (r + 1) * bytes],
                &src[r * sa..r * sa + bytes],
                "{what}, row {r}"
            );
        }
        assert!(dst[..base].iter().all(|&x| x == fill), "{what}: before");
        assert!(
            dst[base + count * bytes..].iter().all(|&x| x == fill),
            "{what}: after"
        );
    }

    /// The joined-rows streaming copy on every SIMD level of this CPU: rows of one store
    /// block (32 bytes on AVX2, 64 on AVX-512) to 200 bytes (every dword count, so every
    /// join offset), sources with gaps between them,
    /// destinations starting every 4 bytes into a line: the range equals the rows one after
    /// another, and the bytes around it are untouched.
    #[test]
    fn joined_rows_match_a_plain_copy() {
        for isa in Isa::available() {
            let Some(joined) = stream_joined_rows(isa) else {
                continue;
            };
            for bytes in (stream_block(isa)..=200).step_by(4) {
                let count = 7;
                let sa = bytes + 20;
                let src: Vec<u8> = (0..sa * count + 64).map(|x| (x * 13 % 251) as u8).collect();
                for mis in (0..64).step_by(4) {
                    let mut dst = vec![0x5Au8; bytes * count + 256];
                    let base = (64 - dst.as_ptr() as usize % 64) % 64 + 64 + mis;
                    // SAFETY: `count` rows of `bytes` lie in `src`, `sa` apart; the range
                    // lies inside `dst`.
                    unsafe {
                        joined(
                            src.as_ptr(),
                            sa as isize,
                            dst.as_mut_ptr().add(base),
                            count,
                            bytes,
                        )
                    };
                    store_fence();
                    let what = format!("{isa:?} rows of {bytes} bytes, {mis} bytes into a line");
                    assert_rows_landed(&dst, base, &src, sa, (count, bytes), 0x5A, &what);
                }
            }
        }
    }

    /// Every micro-kernel against the scalar tile, on a tile of `ni`×`nj` (remainders go to the
    /// edge micro-kernels); `ldb` of 64 elements makes the non-temporal variants run too, from
    /// an aligned start (`shift` 0) or `shift` elements past one (the shifted micro-tile grid).
    fn check<T: Element>((ni, nj): (usize, usize), wide: bool, shift: usize) {
        let (lda, ldb) = (ni + 3, if wide { 64 } else { nj + 5 });
        let a: Vec<T> = (0..lda * nj)
            .map(|x| T::from_parts(x as f64 * 0.5 - 7.0, x as f64))
            .collect();
        let b0: Vec<T> = (0..ldb * ni + 64)
            .map(|x| T::from_parts(1.0 + x as f64, -(x as f64)))
            .collect();
        // First 64-byte-aligned element of the destination buffer.
        let es = std::mem::size_of::<T>();
        let off = (0..64)
            .find(|k| (b0.as_ptr() as usize + k * es).is_multiple_of(64))
            .unwrap_or(0)
            + shift;
        let t = Tile {
            ni,
            nj,
            sai: 1,
            saj: lda as isize,
            sbi: ldb as isize,
            sbj: 1,
        };
        let mut checked = 0;
        for (al, be) in [(1.0, 0.0), (-2.5, 0.0), (0.5, 3.0), (1.0, 1.0)] {
            let sc = Scalars::new(T::from_f64(al), T::from_f64(be));
            let mut want = b0.clone();
            unsafe { tile_scalar(a.as_ptr(), want.as_mut_ptr().add(off), &t, &sc) };
            for isa in Isa::available() {
                let Some(m) = micro::<T>(isa, &sc) else {
                    continue;
                };
                // without a prefetch, rows of whole micro-tiles run through the row kernels
                // (AVX2), streamed or not; with one, micro-tile by micro-tile
                for (stream, prefetch) in [(false, false), (true, false), (true, true)] {
                    let mut got = b0.clone();
                    unsafe {
                        tile_simd(
                            a.as_ptr(),
                            got.as_mut_ptr().add(off),
                            &t,
                            &sc,
                            &m,
                            stream,
                            &Seam::default(),
                            // the prefetch of a next tile (here: this one) changes nothing
                            if prefetch {
                                a.as_ptr()
                            } else {
                                std::ptr::null()
                            },
                        )
                    };
                    store_fence();
                    assert_eq!(
                        got,
                        want,
                        "{:?} {isa:?} alpha {al} beta {be} stream {stream} prefetch {prefetch}",
                        T::DTYPE
                    );
                }
                checked += 1;
            }
        }
        // Every SIMD level of this CPU was exercised, for every scalar mode (2-byte elements:
        // copies on AVX2 and on AVX-512 with BW).
        let expected = if T::DTYPE.is_half() {
            usize::from(Isa::Avx2.is_available())
                + usize::from(Isa::Avx512.is_available() && avx512bw())
        } else {
            4 * (Isa::available().len() - 1)
        };
        assert_eq!(checked, expected, "{:?}", T::DTYPE);
    }

    #[test]
    fn micro_kernels_match_scalar() {
        for shape in SHAPES {
            for wide in [false, true] {
                for shift in [0, 1, 2, 3, 7] {
                    check::<f32>(shape, wide, shift);
                    check::<f64>(shape, wide, shift);
                    check::<Complex32>(shape, wide, shift.min(3));
                    check::<Complex64>(shape, wide, shift.min(3));
                    check::<crate::tensor::f16>(shape, wide, shift);
                    check::<crate::tensor::bf16>(shape, wide, shift);
                }
            }
        }
    }

    /// Edges as overlapping whole micro-tiles only where B is not read (a copy or a scaled
    /// copy writes the same values again; `beta != 0` would add twice) and only on AVX2;
    /// tiles of 15x15 and 5x7 (the shapes of odd extents) against the scalar tile, with the
    /// elements around the tile checked by `check` (for 2-byte units, every partial width
    /// of the AVX2 edge kernel's loads and stores).
    #[test]
    fn edges_overlap_only_where_b_is_not_read() {
        for isa in Isa::available() {
            for (al, be, reads) in [(1.0, 0.0, false), (2.0, 0.0, false), (1.0, 0.5, true)] {
                let sc = Scalars::new(al, be);
                let Some(m) = micro::<f64>(isa, &sc) else {
                    continue;
                };
                assert_eq!(m.overlap, isa == Isa::Avx2 && !reads, "{isa:?} beta {be}");
            }
        }
        for shape in [(15, 15), (5, 7), (7, 5), (4, 9), (14, 10), (30, 19)] {
            check::<f64>(shape, false, 0);
            check::<f32>(shape, false, 0);
            check::<Complex32>(shape, false, 0);
            check::<crate::tensor::f16>(shape, false, 0);
            check::<crate::tensor::bf16>(shape, false, 0);
        }
    }

    /// Every seam kernel of this CPU, for a copy and a scaled copy, at every tail the
    /// element size allows: output row `i` is the last `tail` bytes of row `i` of the
    /// transposed block at `a` followed by the first bytes of row `i` of the transposed
    /// block at `next`, scaled, and nothing else is written.
    fn check_seam<T: Element>() -> usize {
        let es = std::mem::size_of::<T>();
        let mut ran = 0;
        for isa in Isa::available() {
            for al in [1.0, -2.5] {
                let sc = Scalars::new(T::from_f64(al), T::from_f64(0.0));
                let Some(m) = micro::<T>(isa, &sc) else {
                    continue;
                };
                let Some(seam) = m.seam else {
                    continue;
                };
                let (w, lda, ldb) = (m.w, m.w + 5, 3 * m.w);
                let a: Vec<T> = (0..2 * lda * w)
                    .map(|x| T::from_parts(x as f64 * 0.25 - 3.0, -(x as f64)))
                    .collect();
                let next = lda * w; // the second block's first element
                let fill = T::from_parts(-1.0, 7.0);
                for tail in (es..w * es).step_by(es) {
                    let mut b = vec![fill; ldb * w + 64];
                    let off = (0..64)
                        .find(|k| (b.as_ptr() as usize + k * es).is_multiple_of(64))
                        .unwrap_or(0);
                    // SAFETY: both blocks (w rows of w elements, `lda` apart) lie in `a`;
                    // the w output lines lie in `b`, 64-byte aligned (`ldb * es` is a
                    // multiple of 64: `w * es` is 64 on this level).
                    unsafe {
                        let pa = a.as_ptr() as *const u8;
                        seam(
                            pa,
                            pa.add(next * es),
                            (lda * es) as isize,
                            b.as_mut_ptr().add(off) as *mut u8,
                            (ldb * es) as isize,
                            al,
                            0.0,
                            tail,
                        );
                    }
                    store_fence();
                    let t = tail / es;
                    let mut want = vec![fill; ldb * w + 64];
                    for i in 0..w {
                        for k in 0..w {
                            // Row i of a transposed block is column i of the block.
                            let src = if k < t {
                                (w - t + k) * lda + i
                            } else {
                                next + (k - t) * lda + i
                            };
                            want[off + i * ldb + k] = T::from_f64(al) * a[src];
                        }
                    }
                    assert_eq!(b, want, "{:?} {isa:?} alpha {al} tail {tail}", T::DTYPE);
                    ran += 1;
                }
            }
        }
        ran
    }

    #[test]
    fn seam_kernels_join_two_transposes() {
        let ran = check_seam::<f32>()
            + check_seam::<f64>()
            + check_seam::<Complex32>()
            + check_seam::<Complex64>();
        if Isa::Avx512.is_available() {
            // Two scalar modes, tails 1..w-1 elements: f32 15, f64 and Complex32 7,
            // Complex64 3.
            assert_eq!(ran, 2 * (15 + 7 + 7 + 3));
        } else {
            eprintln!("seam_kernels_join_two_transposes: SKIPPED (no AVX-512 here)");
        }
    }

    #[test]
    fn complex_scalars_use_no_simd() {
        let sc = Scalars::new(Complex64::new(0.0, 1.0), Complex64::new(0.0, 0.0));
        assert!(micro::<Complex64>(Isa::detect(), &sc).is_none());
    }
}

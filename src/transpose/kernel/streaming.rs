//! Streaming copies: a byte range or a batch of rows copied with non-temporal stores on whole
//! lines (seams composed in scratch where rows start misaligned), the per-ISA definitions
//! (`streaming_copies_for!`), their dispatch, and the contiguous-row kernel.

#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512};
use super::{store_fence, Isa, Scalars, COPY, SCALE};
use crate::tensor::Element;

/// Copies `src` into `dst` (equal lengths) with the best ISA's non-temporal stores and
/// fences; returns false, copying nothing, when the CPU has no streaming copy.
pub(crate) fn streaming_copy<T: Copy>(src: &[T], dst: &mut [T]) -> bool {
    streaming_copy_by(src, dst, stream_copy)
}

/// [`streaming_copy`] reading the range as one stream however long it is
/// ([`SPLIT_COPY_MIN_PART`] does not apply): the copy the cost models are scaled by.
pub(crate) fn streaming_copy_one_stream<T: Copy>(src: &[T], dst: &mut [T]) -> bool {
    streaming_copy_by(src, dst, stream_copy_one)
}

/// A byte copy `(src, dst, bytes)` of one ISA.
pub(crate) type ByteCopyFn = unsafe fn(*const u8, *mut u8, usize);

/// [`streaming_copy`] by the byte copy that `pick` gives for the best ISA.
fn streaming_copy_by<T: Copy>(
    src: &[T],
    dst: &mut [T],
    pick: fn(Isa) -> Option<ByteCopyFn>,
) -> bool {
    assert_eq!(src.len(), dst.len(), "streaming_copy: lengths differ");
    let Some(copy) = pick(Isa::detect()) else {
        return false;
    };
    // SAFETY: `copy` is available on this CPU (`stream_copy` checked); `src` is readable and
    // `dst` writable for `size_of_val(src)` bytes, and they cannot overlap (one is borrowed
    // shared, the other exclusively); the fence orders the non-temporal stores before any
    // later read.
    unsafe {
        copy(
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            std::mem::size_of_val(src),
        )
    };
    store_fence();
    true
}

/// A streaming byte copy for `isa` (non-temporal stores on whole lines), if it has one.
pub(crate) fn stream_copy(isa: Isa) -> Option<ByteCopyFn> {
    #[cfg(target_arch = "x86_64")]
    {
        match isa {
            Isa::Avx512 if isa.is_available() => Some(avx512::stream_copy as ByteCopyFn),
            Isa::Avx2 if isa.is_available() => Some(avx2::stream_copy as ByteCopyFn),
            _ => None,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        None
    }
}

/// [`stream_copy`] reading every range as one stream, if `isa` has a streaming copy.
fn stream_copy_one(isa: Isa) -> Option<ByteCopyFn> {
    #[cfg(target_arch = "x86_64")]
    {
        match isa {
            Isa::Avx512 if isa.is_available() => Some(avx512::stream_copy_one as ByteCopyFn),
            Isa::Avx2 if isa.is_available() => Some(avx2::stream_copy_one as ByteCopyFn),
            _ => None,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        None
    }
}

/// Defines the streaming copies of one ISA, whose non-temporal stores write `$line`-byte
/// blocks (`$join(a, n, b)` loads one block made of `0 < n < $line` bytes at `a` followed by
/// `$line - n` at `b`, and may read the `$line` bytes ending at `a + n`): `stream_copy` (one
/// range: streamed whole blocks, ordinary moves for the partial ones at either end; a long
/// range read as [`ROW_GROUPS`] streams) and `stream_rows` (a batch of rows: rows whose
/// destination is block-aligned and whose length is whole blocks streamed, the others
/// copied; or rows with seams, below). A range read as several streams streams `$run` bytes
/// (whole blocks) of each in turn: runs of whole lines, so that no write-combining buffer is
/// left half full while the others are written (see `docs/TUNING.md`); `$run` = 0: a range
/// is read as one stream.
///
/// A row copy with seams ([`RowSeam`]) is for rows of whole lines whose destinations all start
/// `$line`-misaligned by the same amount and are each followed in memory by their successor
/// row (whose source lies `next` bytes after theirs): every whole `$line`-byte block inside
/// a row is streamed; the block where a row ends and its successor begins is composed in an
/// aligned scratch block and streamed once (when `succ`: the successors exist), else the
/// row's tail is copied; the row's head, up to its first whole block, is skipped when
/// `skip` (its predecessor's seam wrote it), else copied.
macro_rules! streaming_copies_for {
    ($feature:literal, $line:literal, $run:literal, $vec:ty, $loadu:ident, $stream:ident, $join:path) => {
        /// Copies `bytes` bytes from `src` to `dst` with non-temporal stores for every
        /// block of `dst` that the range covers whole (see `streaming_copies_for!`).
        ///
        /// # Safety
        /// The CPU has the feature; `src[..bytes]` is readable, `dst[..bytes]` writable, and
        /// they do not overlap; the caller fences before the data is read by another thread.
        #[target_feature(enable = $feature)]
        pub(crate) unsafe fn stream_copy(src: *const u8, dst: *mut u8, bytes: usize) {
            copy_streamed(src, dst, bytes, $run > 0);
        }

        /// `stream_copy` reading the range as one stream, however long: the copy the cost
        /// models' built-in factors are scaled by (`model::probe_copy`).
        ///
        /// # Safety
        /// As `stream_copy`.
        #[target_feature(enable = $feature)]
        pub(crate) unsafe fn stream_copy_one(src: *const u8, dst: *mut u8, bytes: usize) {
            copy_streamed(src, dst, bytes, false);
        }

        /// `stream_copy`, reading a long range as several streams where `split`.
        ///
        /// # Safety
        /// As `stream_copy`.
        #[inline]
        #[target_feature(enable = $feature)]
        unsafe fn copy_streamed(src: *const u8, dst: *mut u8, bytes: usize, split: bool) {
            const G: usize = super::ROW_GROUPS;
            // Whole cache lines only are streamed (`super::LINE`).
            let head = ((super::LINE - (dst as usize) % super::LINE) % super::LINE).min(bytes);
            std::ptr::copy_nonoverlapping(src, dst, head);
            // A long range is read as `ROW_GROUPS` concurrent streams, one per consecutive
            // part of it (see `super::SPLIT_COPY_MIN_PART`).
            let part = (bytes - head) / G / $run.max(1) * $run;
            let mut k = head;
            if split && part >= super::SPLIT_COPY_MIN_PART {
                let mut sets = [(src, dst); G];
                for (g, set) in sets.iter_mut().enumerate() {
                    let o = head + g * part;
                    *set = (src.add(o), dst.add(o));
                }
                stream_runs(&sets, part);
                k += G * part;
            }
            let k = stream_blocks(
                src,
                dst,
                k,
                head + (bytes - head) / super::LINE * super::LINE,
            );
            std::ptr::copy_nonoverlapping(src.add(k), dst.add(k), bytes - k);
        }

        /// Streams the whole blocks of bytes `[from, bytes)` from `src` to `dst` and returns
        /// where they end (the partial block after them, if any, is left to the caller).
        ///
        /// # Safety
        /// As `stream_copy` for those bytes, and `dst + from` is block-aligned.
        #[inline]
        #[target_feature(enable = $feature)]
        unsafe fn stream_blocks(src: *const u8, dst: *mut u8, from: usize, bytes: usize) -> usize {
            let mut k = from;
            while k + $line <= bytes {
                $stream(dst.add(k) as *mut $vec, $loadu(src.add(k) as *const $vec));
                k += $line;
            }
            k
        }

        /// Copies `count` rows of `bytes` bytes that follow one another in `dst` (row `r`
        /// from `src + r*sa` to `dst + r*bytes`; a batch of rows that are not whole blocks,
        /// e.g. 24 f32): every whole block of the destination range is streamed, composed
        /// from the one or two rows it covers, so that the lines are written in order and
        /// never read; the partial blocks at the range's ends are copied.
        ///
        /// # Safety
        /// The CPU has the feature; `bytes >= $line` and is a multiple of 4; each row
        /// `src + r*sa .. + bytes` is readable, `dst .. dst + count*bytes` writable, and no
        /// row overlaps the destination; the caller fences before the data is read by
        /// another thread.
        #[target_feature(enable = $feature)]
        pub(crate) unsafe fn stream_joined_rows(
            src: *const u8,
            sa: isize,
            dst: *mut u8,
            count: usize,
            bytes: usize,
        ) {
            debug_assert!(bytes >= $line && bytes.is_multiple_of(4));
            let total = count * bytes;
            let row = |r: usize| src.offset(r as isize * sa);
            // Destination bytes `[from, to)`, a row's piece at a time.
            let copy = |from: usize, to: usize| {
                let mut k = from;
                while k < to {
                    let (r, o) = (k / bytes, k % bytes);
                    let len = (bytes - o).min(to - k);
                    std::ptr::copy_nonoverlapping(row(r).add(o), dst.add(k), len);
                    k += len;
                }
            };
            let head = (($line - (dst as usize) % $line) % $line).min(total);
            copy(0, head);
            let (mut r, mut o, mut k) = (head / bytes, head % bytes, head);
            while k + $line <= total {
                let s = row(r).add(o);
                let left = bytes - o;
                let v = if left >= $line {
                    $loadu(s as *const $vec)
                } else {
                    // The row's last `left` bytes, then the next row's first ones (it
                    // exists: the block ends inside the range).
                    $join(s, left, row(r + 1))
                };
                $stream(dst.add(k) as *mut $vec, v);
                k += $line;
                o += $line;
                if o >= bytes {
                    o -= bytes;
                    r += 1;
                }
            }
            copy(k, total);
        }

        /// The grouped part of `stream_rows` without seams ([`super::ROW_GROUPS`]): copies
        /// the first `count / G * G` rows as `G` sets of consecutive rows
        /// (`stream_row_sets`) and returns how many rows it copied.
        ///
        /// # Safety
        /// As `stream_rows`, and every destination row is block-aligned, `bytes` whole blocks.
        #[inline(never)]
        #[target_feature(enable = $feature)]
        unsafe fn stream_row_groups(
            src: *const u8,
            sa: isize,
            dst: *mut u8,
            sb: isize,
            count: usize,
            bytes: usize,
        ) -> usize {
            const G: usize = super::ROW_GROUPS;
            let per = count / G;
            let mut sets = [(src, dst); G];
            for (g, set) in sets.iter_mut().enumerate() {
                let k = (g * per) as isize;
                *set = (src.offset(k * sa), dst.offset(k * sb));
            }
            stream_row_sets(&sets, sa, sb, per, bytes);
            per * G
        }

        /// Copies `ROW_GROUPS` sets of `count` rows of `bytes` bytes, row `r` of set `g` from
        /// `sets[g].0 + r*sa` to `sets[g].1 + r*sb`, a block of each set's row `r` in turn,
        /// so that the sets' reads run as concurrent streams ([`super::ROW_GROUPS`]).
        ///
        /// # Safety
        /// As `stream_copy` for every row; every destination row is block-aligned and `bytes`
        /// is whole blocks; no destination row overlaps another or any source.
        #[inline(never)]
        #[target_feature(enable = $feature)]
        pub(crate) unsafe fn stream_row_sets(
            sets: &[(*const u8, *mut u8); super::ROW_GROUPS],
            sa: isize,
            sb: isize,
            count: usize,
            bytes: usize,
        ) {
            for r in 0..count as isize {
                let rows = sets.map(|(s, d)| (s.offset(r * sa), d.offset(r * sb)));
                let mut k = 0;
                while k < bytes {
                    for &(s, d) in &rows {
                        $stream(d.add(k) as *mut $vec, $loadu(s.add(k) as *const $vec));
                    }
                    k += $line;
                }
            }
        }

        /// Copies `ROW_GROUPS` ranges of `bytes` bytes (whole `$run`-byte runs) from
        /// `sets[g].0` to `sets[g].1`, a run of each range in turn, so that their reads run
        /// as concurrent streams.
        ///
        /// # Safety
        /// As `stream_copy` for every range; every destination is block-aligned and `bytes`
        /// a multiple of `$run`; no destination overlaps another or any source.
        #[inline(never)]
        #[target_feature(enable = $feature)]
        unsafe fn stream_runs(sets: &[(*const u8, *mut u8); super::ROW_GROUPS], bytes: usize) {
            let mut k = 0;
            while k < bytes {
                for &(s, d) in sets {
                    let mut t = k;
                    while t < k + $run {
                        $stream(d.add(t) as *mut $vec, $loadu(s.add(t) as *const $vec));
                        t += $line;
                    }
                }
                k += $run;
            }
        }

        /// Copies `count` rows of `bytes` bytes, row `r` from `src + r*sa` to `dst + r*sb`
        /// (byte strides), without or with seams (see `streaming_copies_for!`).
        ///
        /// # Safety
        /// As `stream_copy`, for every row; with a seam whose `succ` is set, the `$line`
        /// bytes at `src + r*sa + next` are readable and the bytes after each destination
        /// row up to its successor's first block boundary are this call's to write.
        #[target_feature(enable = $feature)]
        pub(crate) unsafe fn stream_rows(
            src: *const u8,
            sa: isize,
            dst: *mut u8,
            sb: isize,
            count: usize,
            bytes: usize,
            seam: Option<super::RowSeam>,
        ) {
            // Rows of whole blocks into aligned destinations: `ROW_GROUPS` groups of rows,
            // copied a block of each in turn (see `ROW_GROUPS`); the rest one by one below.
            let grouped = seam.is_none()
                && bytes.is_multiple_of($line)
                && (dst as usize).is_multiple_of($line)
                && (sb as usize).is_multiple_of($line)
                && super::groups_rows(sa, bytes, count);
            let first = if grouped {
                stream_row_groups(src, sa, dst, sb, count, bytes)
            } else {
                0
            };
            for r in first as isize..count as isize {
                let (s, d) = (src.offset(r * sa), dst.offset(r * sb));
                let Some(seam) = seam else {
                    if (d as usize).is_multiple_of($line) && bytes.is_multiple_of($line) {
                        // Whole aligned blocks: no partial ends, no calls, so that the
                        // loads of many short rows are in flight at once.
                        stream_blocks(s, d, 0, bytes);
                    } else if bytes >= super::STREAM_ROW_MIN_BYTES {
                        // Long rows: their whole blocks streamed, the partial ends copied.
                        stream_copy(s, d, bytes);
                    } else {
                        std::ptr::copy_nonoverlapping(s, d, bytes);
                    }
                    continue;
                };
                let head = (($line - d as usize % $line) % $line).min(bytes);
                if !seam.skip {
                    std::ptr::copy_nonoverlapping(s, d, head);
                }
                let k = stream_blocks(s, d, head, bytes);
                let tail = bytes - k;
                if tail > 0 && seam.succ {
                    // The row's tail and its successor's head, one aligned block.
                    $stream(
                        d.add(k) as *mut $vec,
                        $join(s.add(k), tail, s.offset(seam.next)),
                    );
                } else {
                    std::ptr::copy_nonoverlapping(s.add(k), d.add(k), tail);
                }
            }
        }
    };
}
pub(crate) use streaming_copies_for;

/// Shortest row (bytes) that is not whole aligned blocks and that a streamed row copy still
/// streams (its whole blocks; the partial blocks at its ends get ordinary stores): below it
/// the partial ends cost more than the read of B that streaming saves, and the row is
/// copied with ordinary stores.
pub(crate) const STREAM_ROW_MIN_BYTES: usize = 1024;

/// Groups of rows that a batched streaming row copy without seams reads at once: it copies
/// a block of one row from each group in turn, so that the reads run as this many streams,
/// each in its own pages: one sequential read stream can keep too few lines in flight (see
/// `docs/TUNING.md`). Only where [`groups_rows`] says so.
pub(crate) const ROW_GROUPS: usize = 4;

/// Whether a streamed batch of `count` rows of `bytes` bytes, `sa` bytes apart in the
/// source, is copied in [`ROW_GROUPS`] groups: where each row starts less than a page after
/// the previous one ends (one row after another they read as one stream) and the groups start
/// at least a page apart. Groups within a page or two (ttc-15: 16 rows of 320 bytes, ttc-43:
/// 32 rows of 64) ran 0.7–0.8x as fast as row by row, and so did rows of one line each a page
/// or more apart (16 f32 rows of the 720 permutations: about 0.85x).
pub(crate) fn groups_rows(sa: isize, bytes: usize, count: usize) -> bool {
    count >= 2 * ROW_GROUPS
        && rows_continue(sa, bytes)
        && (count / ROW_GROUPS) * sa.unsigned_abs() >= PAGE
}

/// Whether rows of `bytes` bytes, `sa` bytes apart, read one after another as one stream:
/// each starts less than a page after the previous one ends.
pub(crate) fn rows_continue(sa: isize, bytes: usize) -> bool {
    sa.unsigned_abs() < bytes + PAGE
}

/// Shortest part (bytes) of a streamed range copy that is read as its own stream: the range
/// is split into [`ROW_GROUPS`] consecutive parts when each is at least this long, so that
/// each stream runs within its own pages.
pub(crate) const SPLIT_COPY_MIN_PART: usize = PAGE;

/// The cache line (bytes): a range copy (`stream_copy`: staged runs, long rows) streams the
/// whole lines of its range only, on every ISA, and copies the partial lines at its ends with
/// ordinary stores; a line streamed in part beside an ordinary store is written to memory in
/// pieces (`docs/TUNING.md`, "Range copies stream whole lines").
pub(crate) const LINE: usize = 64;

/// The page size the streaming rules reason in (bytes): the hardware prefetchers follow a
/// stream within a page.
pub(crate) const PAGE: usize = 4096;

/// A seam of a streamed row copy (see `streaming_copies_for!`): the successor rows' sources
/// lie `next` bytes after the rows' own; `skip`: the rows' heads were written by their
/// predecessors' seams; `succ`: the successors exist and this copy writes their heads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowSeam {
    pub next: isize,
    pub skip: bool,
    pub succ: bool,
}

/// The streaming block size of `isa` in bytes (0 without streaming copies).
pub(crate) fn stream_block(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 64,
        Isa::Avx2 => 32,
        _ => 0,
    }
}

/// A batch-of-rows streaming copy: `(src, src_stride, dst, dst_stride, rows, bytes, seam)`
/// with byte strides.
pub(crate) type StreamRowsFn =
    unsafe fn(*const u8, isize, *mut u8, isize, usize, usize, Option<RowSeam>);

/// Sets of row batches copied together (`(sets, src_stride, dst_stride, rows, bytes)`, byte
/// strides; see `streaming_copies_for!`'s `stream_row_sets`).
pub(crate) type StreamRowSetsFn =
    unsafe fn(&[(*const u8, *mut u8); ROW_GROUPS], isize, isize, usize, usize);

/// `$name` from the module of `isa` (AVX-512 or AVX2) as a `$ty`, where `isa` has one and
/// this CPU runs it; `None` otherwise.
macro_rules! simd_fn {
    ($isa:expr, $name:ident, $ty:ty) => {{
        #[cfg(target_arch = "x86_64")]
        {
            match $isa {
                Isa::Avx512 if $isa.is_available() => Some(avx512::$name as $ty),
                Isa::Avx2 if $isa.is_available() => Some(avx2::$name as $ty),
                _ => None,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = $isa;
            None::<$ty>
        }
    }};
}

/// The streaming copy of [`ROW_GROUPS`] row batches at once for `isa`, if it has one.
pub(crate) fn stream_row_sets(isa: Isa) -> Option<StreamRowSetsFn> {
    simd_fn!(isa, stream_row_sets, StreamRowSetsFn)
}

/// A batch of rows that follow one another in B, streamed whole block by whole block:
/// `(src, src_stride, dst, rows, bytes)`, byte strides (see `streaming_copies_for!`'s
/// `stream_joined_rows`).
pub(crate) type StreamJoinedRowsFn = unsafe fn(*const u8, isize, *mut u8, usize, usize);

/// The joined-rows streaming copy of `isa`, if it has one.
pub(crate) fn stream_joined_rows(isa: Isa) -> Option<StreamJoinedRowsFn> {
    simd_fn!(isa, stream_joined_rows, StreamJoinedRowsFn)
}

/// The batched streaming row copy of `isa`, if it has one.
pub(crate) fn stream_rows(isa: Isa) -> Option<StreamRowsFn> {
    simd_fn!(isa, stream_rows, StreamRowsFn)
}

/// A contiguous row of `n` elements in both A and B; plain copies go through `stream` (a
/// non-temporal copy) when given.
///
/// # Safety
/// `a[..n]` is readable, `b[..n]` writable, and they do not overlap; `stream` runs on this
/// CPU.
pub(crate) unsafe fn row<T: Element>(
    a: *const T,
    b: *mut T,
    n: usize,
    sc: &Scalars<T>,
    stream: Option<ByteCopyFn>,
) {
    if let (COPY, Some(copy)) = (sc.mode, stream) {
        copy(a as *const u8, b as *mut u8, n * std::mem::size_of::<T>());
        return;
    }
    match sc.mode {
        // Short rows: an inline loop beats a call to memcpy.
        COPY if n * std::mem::size_of::<T>() <= 256 => {
            for k in 0..n {
                *b.add(k) = *a.add(k);
            }
        }
        COPY => std::ptr::copy_nonoverlapping(a, b, n),
        SCALE => {
            let (src, dst) = (
                std::slice::from_raw_parts(a, n),
                std::slice::from_raw_parts_mut(b, n),
            );
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = sc.alpha * s;
            }
        }
        _ => {
            let (src, dst) = (
                std::slice::from_raw_parts(a, n),
                std::slice::from_raw_parts_mut(b, n),
            );
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = sc.alpha * s + sc.beta * *d;
            }
        }
    }
}

//! Cycle following with chunks: every cycle of the transposition permutation is shifted
//! backwards from its a-priori leader ([`CycleLeaders`]), moving `L` contiguous elements per
//! step. Three levels of parallelism (Section 2.3 of the GKK paper):
//!
//! 1. independent subtranspositions: a batch of identical problems, one per task;
//! 2. independent cycles: runs of leaders and cycle pieces become work items, assigned
//!    greedily (longest first, to the least loaded thread) by their known lengths;
//! 3. long cycles: a cycle longer than a thread's share is cut into sequences; the first
//!    chunk of each sequence is saved to workspace first, so the sequences then run
//!    independently, each ending with the saved chunk of the next one.
//!
//! Chunks longer than [`PIECE_BYTES`] are moved in pieces (the same cycles, one piece range
//! at a time), which bounds the workspace whatever the chunk size.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::leaders::CycleLeaders;
use super::numtheory::{mul_mod, pow_mod};
use super::scratch::Scratch;
use crate::error::Result;

/// Chunks are moved in pieces of at most this many bytes (the per-thread buffer size).
pub(crate) const PIECE_BYTES: usize = 64 << 10;

/// Below this many moved elements a transposition runs on one thread.
const PAR_MIN_ELEMS: u64 = 1 << 15;

/// Items per thread the balancer aims for (the granularity of level 2).
const ITEMS_PER_THREAD: u64 = 4;

/// Elements per piece for element type `T`.
pub(crate) fn piece_len<T>(chunk: usize) -> usize {
    (PIECE_BYTES / std::mem::size_of::<T>().max(1))
        .max(1)
        .min(chunk.max(1))
}

/// A raw base pointer shared by worker threads that write disjoint chunks.
pub(crate) struct SharedPtr<T>(pub(crate) *mut T);
impl<T> Clone for SharedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedPtr<T> {}
impl<T> SharedPtr<T> {
    /// The pointer (a method, so that closures capture the whole `Send` wrapper).
    #[inline]
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}
// SAFETY: the pointer is only dereferenced for chunk positions owned by one task (see the
// callers); T: Send makes moving values between threads sound.
unsafe impl<T: Send> Send for SharedPtr<T> {}
unsafe impl<T: Send> Sync for SharedPtr<T> {}

/// Geometry of one (piece of a) chunked transposition: `m × n` chunks of stride `stride`
/// elements, of which the range `offset..offset + len` is moved.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    /// `m * n` fits in 32 bits (32-bit divisions are several times faster).
    narrow: bool,
    m: usize,
    n: usize,
    stride: usize,
    offset: usize,
    len: usize,
}

impl Geometry {
    /// Where the chunk that lands at position `k` comes from: position `k = i*n + j` of the
    /// output holds chunk `(i, j)`, stored at `j*m + i` in the input. (For `0 < k < q` this
    /// is `k*m mod q`, the inverse of the permutation.)
    #[inline]
    fn source(&self, k: usize) -> usize {
        if self.narrow {
            let (k, n, m) = (k as u32, self.n as u32, self.m as u32);
            ((k % n) * m + k / n) as usize
        } else {
            (k % self.n) * self.m + k / self.n
        }
    }

    #[inline]
    fn at(&self, k: usize) -> usize {
        k * self.stride + self.offset
    }
}

/// Copies one chunk piece from position `from` to position `to`.
///
/// # Safety
/// `base` addresses a block of `m*n*stride` elements, `from != to`, both `< m*n`; no other
/// thread accesses either piece during the call.
#[inline]
unsafe fn move_piece<T: Copy>(base: *mut T, g: &Geometry, from: usize, to: usize) {
    std::ptr::copy_nonoverlapping(base.add(g.at(from)), base.add(g.at(to)), g.len);
}

/// Steps ahead of the current position whose piece is prefetched (< 8, the ring size) (a cycle's positions are
/// known in advance, so its memory latency need not be paid one chunk at a time).
const PREFETCH_AHEAD: usize = 6;
/// At most this many bytes of a piece are prefetched (longer runs are streamed by hardware).
const PREFETCH_BYTES: usize = 1024;

/// Hints that the piece at `p` will be read soon.
#[inline(always)]
fn prefetch<T>(p: *const T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut off = 0;
        while off < bytes.min(PREFETCH_BYTES) {
            // SAFETY: a prefetch is only a hint; it never faults or changes memory, even for
            // an address outside the allocation (wrapping_add keeps the arithmetic defined).
            unsafe { _mm_prefetch::<_MM_HINT_T0>((p as *const i8).wrapping_add(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// Positions of a cycle walk computed `PREFETCH_AHEAD` steps early (each once), their
/// pieces prefetched when computed.
struct Lookahead {
    ring: [usize; 8],
    head: usize,
}

impl Lookahead {
    /// Starts the walk that visits `source(start)`, `source(source(start))`, ...
    #[inline(always)]
    fn new<T>(base: *mut T, g: &Geometry, start: usize) -> Self {
        let mut ring = [0usize; 8];
        let mut pos = start;
        for r in ring.iter_mut().take(PREFETCH_AHEAD) {
            pos = g.source(pos);
            prefetch(
                base.wrapping_add(g.at(pos)),
                g.len * std::mem::size_of::<T>(),
            );
            *r = pos;
        }
        Lookahead { ring, head: 0 }
    }

    /// The next position of the walk (and one more computed and prefetched).
    #[inline(always)]
    fn next<T>(&mut self, base: *mut T, g: &Geometry) -> usize {
        let k = self.ring[self.head & 7];
        let far = g.source(self.ring[(self.head + PREFETCH_AHEAD - 1) & 7]);
        prefetch(
            base.wrapping_add(g.at(far)),
            g.len * std::mem::size_of::<T>(),
        );
        self.ring[(self.head + PREFETCH_AHEAD) & 7] = far;
        self.head += 1;
        k
    }
}

/// Shifts the cycle through `s` backwards: position `k` receives the piece from `source(k)`.
///
/// # Safety
/// As [`move_piece`] for every position of the cycle; `buf` has capacity `g.len`.
unsafe fn shift_cycle<T: Copy>(base: *mut T, g: &Geometry, s: usize, buf: &mut Vec<T>) {
    buf.clear();
    buf.extend_from_slice(std::slice::from_raw_parts(base.add(g.at(s)), g.len));
    let mut walk = Lookahead::new(base, g, s);
    let mut k1 = s;
    let mut k2 = walk.next(base, g);
    while k2 != s {
        move_piece(base, g, k2, k1);
        k1 = k2;
        k2 = walk.next(base, g);
    }
    std::ptr::copy_nonoverlapping(buf.as_ptr(), base.add(g.at(k1)), g.len);
}

/// Runs `steps` backward steps from position `start`; the last position receives `last`
/// (the saved first piece of the next sequence of the same cycle).
///
/// # Safety
/// As [`move_piece`] for every position of the sequence; `last` has `g.len` elements.
unsafe fn shift_sequence<T: Copy>(
    base: *mut T,
    g: &Geometry,
    start: usize,
    steps: u64,
    last: &[T],
) {
    let mut walk = Lookahead::new(base, g, start);
    let mut k1 = start;
    for _ in 1..steps {
        let k2 = walk.next(base, g);
        move_piece(base, g, k2, k1);
        k1 = k2;
    }
    std::ptr::copy_nonoverlapping(last.as_ptr(), base.add(g.at(k1)), g.len);
}

/// A unit of level-2/3 work.
#[derive(Clone, Copy, Debug)]
enum Item {
    /// Leaders `first..first + count` of subproblem `sub` (whole cycles).
    Cycles { sub: usize, first: u64, count: u64 },
    /// Sequence number `seq` of a split cycle: `steps` steps from `start`; it ends with
    /// the saved piece of sequence `next`.
    Sequence { start: u64, steps: u64, next: usize },
}

/// A load-balanced assignment of one transposition's cycles to threads (independent of the
/// chunk length, so one schedule serves every block and piece).
#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    bins: Vec<Vec<Item>>,
    /// Start positions of the split sequences, in sequence number order.
    seq_starts: Vec<u64>,
    /// Largest bin load over mean bin load (1 = perfect balance).
    imbalance: f64,
}

impl Schedule {
    /// Splits the cycles of `leaders` over `threads` bins: cycles longer than a
    /// `1/(ITEMS_PER_THREAD * threads)` share of the work are cut into sequences of about
    /// that share, shorter ones grouped into runs of about that share; then longest item
    /// first to the least loaded bin.
    pub(crate) fn new(leaders: &CycleLeaders, m: usize, threads: usize) -> Self {
        let q = leaders.q();
        let total = leaders.moved_chunks();
        let share = (total / (ITEMS_PER_THREAD * threads as u64)).max(1);
        let mut items: Vec<(u64, Item)> = Vec::new();
        let mut seq_starts = Vec::new();
        for (si, sub) in leaders.subproblems().iter().enumerate() {
            let len = sub.cycle_len();
            if len <= 1 {
                continue;
            }
            if len > share {
                let parts = len.div_ceil(share);
                for s in sub.leaders(0, sub.count()) {
                    let first_seq = seq_starts.len();
                    for p in 0..parts {
                        let (x0, x1) = (p * len / parts, (p + 1) * len / parts);
                        let next = if p + 1 == parts {
                            first_seq
                        } else {
                            first_seq + p as usize + 1
                        };
                        let start = mul_mod(s, pow_mod(m as u64 % q, x0, q), q);
                        seq_starts.push(start);
                        items.push((
                            x1 - x0,
                            Item::Sequence {
                                start,
                                steps: x1 - x0,
                                next,
                            },
                        ));
                    }
                }
            } else {
                let per = (share / len).max(1);
                let mut first = 0;
                while first < sub.count() {
                    let count = per.min(sub.count() - first);
                    items.push((
                        count * len,
                        Item::Cycles {
                            sub: si,
                            first,
                            count,
                        },
                    ));
                    first += count;
                }
            }
        }
        items.sort_by_key(|&(w, _)| Reverse(w));
        let mut bins: Vec<Vec<Item>> = vec![Vec::new(); threads];
        let mut loads: Vec<u64> = vec![0; threads];
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
            (0..threads).map(|b| Reverse((0, b))).collect();
        for (w, it) in items {
            if let Some(Reverse((load, b))) = heap.pop() {
                bins[b].push(it);
                loads[b] = load + w;
                heap.push(Reverse((load + w, b)));
            }
        }
        let max = loads.iter().copied().max().unwrap_or(0) as f64;
        let mean = total as f64 / threads as f64;
        Schedule {
            bins,
            seq_starts,
            imbalance: if mean > 0.0 { max / mean } else { 1.0 },
        }
    }

    /// Largest bin load over the mean (1.0 = perfect balance).
    pub(crate) fn imbalance(&self) -> f64 {
        self.imbalance
    }

    /// Number of split sequences (each needs one saved piece of workspace).
    pub(crate) fn sequences(&self) -> usize {
        self.seq_starts.len()
    }
}

/// Transposes one block serially.
fn block_serial<T: Copy>(
    block: &mut [T],
    leaders: &CycleLeaders,
    (m, n, chunk, piece): (usize, usize, usize, usize),
    buf: &mut Vec<T>,
) {
    let base = block.as_mut_ptr();
    let mut offset = 0;
    while offset < chunk {
        let g = Geometry {
            narrow: (m as u64) * (n as u64) <= u32::MAX as u64,
            m,
            n,
            stride: chunk,
            offset,
            len: piece.min(chunk - offset),
        };
        for sub in leaders.subproblems().iter().filter(|s| s.cycle_len() > 1) {
            for s in sub.leaders(0, sub.count()) {
                // SAFETY: block has m*n*chunk elements and we hold it exclusively; leaders
                // lie in 1..q, so every cycle position is < m*n and positions differ.
                unsafe { shift_cycle(base, &g, s as usize, buf) };
            }
        }
        offset += piece;
    }
}

/// Transposes one block with the cycles spread over `schedule`'s threads.
fn block_parallel<T: Copy + Send + Sync>(
    block: &mut [T],
    leaders: &CycleLeaders,
    schedule: &Schedule,
    (m, n, chunk, piece): (usize, usize, usize, usize),
    scratch: &mut Scratch<T>,
) -> Result<()> {
    let base = SharedPtr(block.as_mut_ptr());
    let nseq = schedule.seq_starts.len();
    // Slot 0: the saved first pieces of the sequences; then one chunk buffer per bin.
    scratch.reserve(0, 1, nseq * piece)?;
    scratch.reserve(1, schedule.bins.len(), piece)?;
    let (first, bufs) = scratch.take(0, 1 + schedule.bins.len(), 0)?.split_at_mut(1);
    let saved = &mut first[0];
    let mut offset = 0;
    while offset < chunk {
        let g = Geometry {
            narrow: (m as u64) * (n as u64) <= u32::MAX as u64,
            m,
            n,
            stride: chunk,
            offset,
            len: piece.min(chunk - offset),
        };
        // Level 3, phase 1: save the first piece of every sequence (before anything moves).
        saved.clear();
        for &s in &schedule.seq_starts {
            // SAFETY: s < m*n, so the piece lies inside the block; nothing writes meanwhile.
            saved.extend_from_slice(unsafe {
                std::slice::from_raw_parts(base.0.add(g.at(s as usize)), g.len)
            });
        }
        let saved_ref = &*saved;
        // Phase 2: every bin on its own thread.
        schedule
            .bins
            .par_iter()
            .zip(bufs.par_iter_mut())
            .for_each(|(bin, buf)| {
                for item in bin {
                    match *item {
                        Item::Cycles { sub, first, count } => {
                            for s in leaders.subproblems()[sub].leaders(first, count) {
                                // SAFETY: each cycle belongs to exactly one item (leaders
                                // hit every cycle once), so no other thread touches its
                                // positions; positions are < m*n and distinct.
                                unsafe { shift_cycle(base.get(), &g, s as usize, buf) };
                            }
                        }
                        Item::Sequence { start, steps, next } => {
                            let last = &saved_ref[next * g.len..(next + 1) * g.len];
                            // SAFETY: the sequences of a cycle partition it; this one writes
                            // its own positions only and reads them before they are
                            // written, except its last source, the next sequence's start,
                            // which it takes from the saved copy.
                            unsafe { shift_sequence(base.get(), &g, start as usize, steps, last) };
                        }
                    }
                }
            });
        offset += piece;
    }
    Ok(())
}

/// Transposes `batch` consecutive blocks of `m × n` chunks of `chunk` elements by cycle
/// following on `threads` threads (the caller runs this inside a pool of that size).
/// Unless `forced`, small problems run on one thread.
pub(crate) fn transpose_cycles<T: Copy + Send + Sync>(
    data: &mut [T],
    (batch, m, n, chunk): (usize, usize, usize, usize),
    threads: usize,
    forced: bool,
    scratch: &mut Scratch<T>,
) -> Result<()> {
    let block = m * n * chunk;
    if block == 0 {
        return Ok(());
    }
    let leaders = CycleLeaders::new(m, n)?;
    let piece = piece_len::<T>(chunk);
    let moved = leaders.moved_chunks().saturating_mul(chunk as u64);
    let small = !forced && moved.saturating_mul(batch as u64) < PAR_MIN_ELEMS;
    if threads <= 1 || small {
        let buf = &mut scratch.take(0, 1, piece)?[0];
        for b in data.chunks_mut(block) {
            block_serial(b, &leaders, (m, n, chunk, piece), buf);
        }
        return Ok(());
    }
    if batch >= threads {
        // Level 1: whole blocks per task.
        let bufs = scratch.take(1, threads, piece)?;
        let per = batch.div_ceil(threads);
        data.par_chunks_mut(block * per)
            .zip(bufs.par_iter_mut())
            .for_each(|(group, buf)| {
                for b in group.chunks_mut(block) {
                    block_serial(b, &leaders, (m, n, chunk, piece), buf);
                }
            });
        return Ok(());
    }
    let schedule = Schedule::new(&leaders, m, threads);
    for b in data.chunks_mut(block) {
        block_parallel(b, &leaders, &schedule, (m, n, chunk, piece), scratch)?;
    }
    Ok(())
}

/// Workspace bytes of [`transpose_cycles`] for `threads` threads: one piece per thread plus
/// one saved piece per split sequence (at most `2 * ITEMS_PER_THREAD` per thread).
pub(crate) fn cycles_workspace_bytes(chunk: usize, elem_bytes: usize, threads: usize) -> usize {
    let piece = (PIECE_BYTES / elem_bytes.max(1)).max(1).min(chunk.max(1)) * elem_bytes;
    let slots = if threads <= 1 {
        1
    } else {
        threads + max_sequences(threads)
    };
    piece * slots
}

/// Most split sequences of a parallel cycle schedule on `threads` threads: cycles longer than
/// a `1/(ITEMS_PER_THREAD * threads)` share of the work are at most that many and are cut
/// into at most as many sequences again.
pub(crate) fn max_sequences(threads: usize) -> usize {
    threads.saturating_mul(2 * ITEMS_PER_THREAD as usize)
}

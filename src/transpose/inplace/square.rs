//! Square problems (`m == n`): every cycle is a pair `(i, j) <-> (j, i)` or a fixed diagonal
//! chunk, so no leaders are needed; chunks are swapped pairwise, tile by tile (tiles of about
//! [`TILE_BYTES`] so that both tiles of a pair stay in cache), with no workspace at all.

use rayon::prelude::*;

use super::chunked::SharedPtr;

/// Bytes of one tile of chunks.
const TILE_BYTES: usize = 16 << 10;

/// Below this many elements per call a square transposition runs on one thread.
const PAR_MIN_ELEMS: usize = 1 << 15;

/// Tile side (in chunks) for chunks of `chunk * elem_bytes` bytes.
fn tile(chunk: usize, elem_bytes: usize) -> usize {
    let c = (chunk * elem_bytes).max(1);
    ((TILE_BYTES / c) as f64).sqrt().floor().max(1.0) as usize
}

/// Swaps the chunk pairs of tile pair `(ti, tj)`, `ti <= tj`.
///
/// # Safety
/// `base` addresses a block of `n*n*chunk` elements; no other thread touches the chunks of
/// tiles `(ti, tj)` and `(tj, ti)` during the call.
unsafe fn swap_tiles<T>(base: *mut T, n: usize, chunk: usize, b: usize, ti: usize, tj: usize) {
    for i in ti * b..((ti + 1) * b).min(n) {
        let j0 = if ti == tj { i + 1 } else { tj * b };
        for j in j0..((tj + 1) * b).min(n) {
            std::ptr::swap_nonoverlapping(
                base.add((i * n + j) * chunk),
                base.add((j * n + i) * chunk),
                chunk,
            );
        }
    }
}

fn block_serial<T>(block: &mut [T], n: usize, chunk: usize, b: usize) {
    let nt = n.div_ceil(b);
    let base = block.as_mut_ptr();
    for ti in 0..nt {
        for tj in ti..nt {
            // SAFETY: the block has n*n*chunk elements and is held exclusively.
            unsafe { swap_tiles(base, n, chunk, b, ti, tj) };
        }
    }
}

/// Transposes `batch` blocks of `n × n` chunks by pairwise swaps on `threads` threads.
/// Unless `forced`, small problems run on one thread.
pub(crate) fn transpose_square<T: Send>(
    data: &mut [T],
    batch: usize,
    n: usize,
    chunk: usize,
    threads: usize,
    forced: bool,
) {
    let block = n * n * chunk;
    if block == 0 {
        return;
    }
    let b = tile(chunk, std::mem::size_of::<T>());
    if threads <= 1 || (!forced && data.len() < PAR_MIN_ELEMS) {
        for blk in data.chunks_mut(block) {
            block_serial(blk, n, chunk, b);
        }
        return;
    }
    if batch >= threads {
        data.par_chunks_mut(block)
            .for_each(|blk| block_serial(blk, n, chunk, b));
        return;
    }
    let nt = n.div_ceil(b);
    let pairs: Vec<(usize, usize)> = (0..nt).flat_map(|i| (i..nt).map(move |j| (i, j))).collect();
    for blk in data.chunks_mut(block) {
        let base = SharedPtr(blk.as_mut_ptr());
        pairs.par_iter().for_each(|&(ti, tj)| {
            // SAFETY: each unordered tile pair is one task, and a chunk (i, j) belongs to
            // the pair of tiles (i/b, j/b) only, so tasks touch disjoint chunks.
            unsafe { swap_tiles(base.get(), n, chunk, b, ti, tj) };
        });
    }
}

//! Small problems: a block that fits in cache ([`SMALL_BYTES`]) is copied to a buffer and
//! gathered back transposed — out of place, but in cache, with workspace of one block per
//! thread.

use rayon::prelude::*;

use super::scratch::Scratch;
use crate::error::Result;

/// Blocks of at most this many bytes go through a buffer (when the method is automatic).
pub(crate) const SMALL_BYTES: usize = 64 << 10;

fn block_buffered<T: Copy>(block: &mut [T], m: usize, n: usize, chunk: usize, tmp: &mut Vec<T>) {
    tmp.clear();
    tmp.extend_from_slice(block);
    if chunk == 1 {
        for i in 0..m {
            let row = &mut block[i * n..(i + 1) * n];
            for (j, x) in row.iter_mut().enumerate() {
                *x = tmp[j * m + i];
            }
        }
        return;
    }
    for i in 0..m {
        for j in 0..n {
            let src = (j * m + i) * chunk;
            block[(i * n + j) * chunk..][..chunk].copy_from_slice(&tmp[src..src + chunk]);
        }
    }
}

/// Transposes `batch` blocks through a per-thread buffer of one block.
pub(crate) fn transpose_buffered<T: Copy + Send + Sync>(
    data: &mut [T],
    batch: usize,
    m: usize,
    n: usize,
    chunk: usize,
    threads: usize,
    scratch: &mut Scratch<T>,
) -> Result<()> {
    let block = m * n * chunk;
    if block == 0 {
        return Ok(());
    }
    let workers = threads.min(batch).max(1);
    let tmps = scratch.take(1, workers, block)?;
    if workers == 1 {
        for b in data.chunks_mut(block) {
            block_buffered(b, m, n, chunk, &mut tmps[0]);
        }
        return Ok(());
    }
    let per = batch.div_ceil(workers);
    data.par_chunks_mut(block * per)
        .zip(tmps.par_iter_mut())
        .for_each(|(group, tmp)| {
            for b in group.chunks_mut(block) {
                block_buffered(b, m, n, chunk, tmp);
            }
        });
    Ok(())
}

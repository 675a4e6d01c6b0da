//! How a GEMM is cut over threads: a grid of blocks of C, each block one single-threaded
//! library call (the CPU backend's `gemm/split.rs` runs it; the GEMM model prices the
//! threads it uses).

/// Fewest multiply-adds a block of C gets when a GEMM is cut over threads: below it, the
/// wake-up of a second thread and the packing each block repeats cost more than the block
/// (measurements: `docs/TUNING.md`).
///
/// ```
/// assert!(ttgt::model::GEMM_MIN_BLOCK_FMAS >= 1 << 16);
/// ```
pub const GEMM_MIN_BLOCK_FMAS: usize = 1 << 20;

/// Rows or columns of a block are a multiple of this (the libraries' register tiles are 4,
/// 8, 16 or 24 wide), except the last block's.
const UNIT: usize = 8;

/// The grid `(tm, tn)` of blocks of C that an `m×n×k` GEMM on `threads` threads is cut
/// into, one single-threaded library call each, or None when it runs as one call (too
/// little work per thread, or C too small to cut).
///
/// Among the grids with at most `threads` blocks of at least [`GEMM_MIN_BLOCK_FMAS`] each,
/// the one with the most blocks, and of those the squarest blocks (the least packing per
/// block).
///
/// ```
/// use ttgt::model::gemm_grid;
/// assert_eq!(gemm_grid(2809, 265, 53, 2), Some((2, 1)));
/// assert_eq!(gemm_grid(8, 8, 8, 2), None);
/// ```
pub fn gemm_grid(m: usize, n: usize, k: usize, threads: usize) -> Option<(usize, usize)> {
    let work = m.saturating_mul(n).saturating_mul(k);
    let parts = threads.min(work / GEMM_MIN_BLOCK_FMAS);
    (2..=parts).rev().find_map(|p| {
        (1..=p)
            .filter(|tm| p % tm == 0)
            .map(|tm| (tm, p / tm))
            .filter(|&(tm, tn)| m.div_ceil(UNIT) >= tm && n.div_ceil(UNIT) >= tn)
            .min_by_key(|&(tm, tn)| largest(m, tm) + largest(n, tn))
    })
}

/// The threads an `m×n×k` GEMM call on `threads` threads uses: the blocks of its
/// [`gemm_grid`], or one.
///
/// ```
/// assert_eq!(ttgt::model::gemm_grid_threads(64, 64, 64, 2), 1);
/// assert_eq!(ttgt::model::gemm_grid_threads(512, 512, 512, 2), 2);
/// ```
pub fn gemm_grid_threads(m: usize, n: usize, k: usize, threads: usize) -> usize {
    gemm_grid(m, n, k, threads).map_or(1, |(tm, tn)| tm * tn)
}

/// Rows in each of the first `parts - 1` blocks of a dimension of `len`: the nearest
/// multiple of [`UNIT`] to an even share, the last block taking the rest.
fn block(len: usize, parts: usize) -> usize {
    let share = (len / parts).max(1);
    let b = ((share + UNIT / 2) / UNIT * UNIT).max(UNIT);
    if b * (parts - 1) < len {
        b
    } else {
        share
    }
}

/// The largest block of a dimension of `len` cut in `parts`.
fn largest(len: usize, parts: usize) -> usize {
    (0..parts)
        .map(|i| gemm_grid_range(len, parts, i).1)
        .max()
        .unwrap_or(len)
}

/// The range `(start, length)` of block `i` of `parts` along a dimension of `len` in a
/// [`gemm_grid`].
///
/// ```
/// assert_eq!(ttgt::model::gemm_grid_range(17, 2, 1), (8, 9));
/// ```
pub fn gemm_grid_range(len: usize, parts: usize, i: usize) -> (usize, usize) {
    let b = block(len, parts);
    let start = (i * b).min(len);
    let end = if i + 1 == parts {
        len
    } else {
        ((i + 1) * b).min(len)
    };
    (start, end - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_cover_and_respect_the_minimum() {
        assert_eq!(gemm_grid(8, 8, 8, 2), None); // too little work
        assert_eq!(gemm_grid(265, 265, 265, 1), None);
        assert_eq!(gemm_grid(265, 265, 265, 2), Some((1, 2)));
        assert_eq!(gemm_grid(2809, 265, 53, 2), Some((2, 1)));
        assert_eq!(gemm_grid(5, 265, 2809, 2), Some((1, 2)));
        assert_eq!(gemm_grid(5, 5, 1 << 20, 4), None); // C too small to cut
        let (tm, tn) = gemm_grid(1000, 1000, 1000, 16).unwrap();
        assert_eq!(tm * tn, 16);
        assert_eq!((tm, tn), (4, 4));
        // every row and column lands in exactly one block
        assert_eq!(gemm_grid_range(17, 2, 1), (8, 9));
        assert_eq!(gemm_grid_range(265, 2, 0), (0, 136));
        for (len, parts) in [
            (265, 2),
            (5, 1),
            (17, 2),
            (1000, 3),
            (9, 2),
            (20, 4),
            (8, 3),
        ] {
            let mut next = 0;
            for i in 0..parts {
                let (s, l) = gemm_grid_range(len, parts, i);
                assert_eq!(s, next.min(len));
                next = s + l;
            }
            assert_eq!(next, len, "{len} in {parts}");
        }
    }
}

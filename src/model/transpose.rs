//! The transposition cost model: predicted seconds of a [`TransposePlan`] from the machine's
//! copy bandwidth at the plan's thread count and a per-kernel efficiency, discounted for
//! partly used cache lines (short contiguous runs).

use super::profile::{profile, Profile};
use super::residency::memory_share;
use crate::error::Result;
use crate::tensor::{DType, Layout};
use crate::transpose::{KernelKind, TransposeOptions, TransposePlan};

/// Fraction of the fetched bytes that a contiguous run of `bytes` bytes uses (unaligned runs
/// touch about one extra partial line).
fn line_use(bytes: f64) -> f64 {
    bytes / (bytes + 48.0)
}

/// Number of kernel classes ([`Costs::parts`]).
pub(crate) const CLASSES: usize = 8;

/// The coefficient-free cost of a plan (seconds at efficiency 1), split by kernel class.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Costs {
    pub rows: f64,
    pub tile: f64,
    pub tile_stream: f64,
    pub tile_odd: f64,
    pub tile_scatter: f64,
    pub tile_regroup: f64,
    pub tile_contiguous_b: f64,
    pub scalar: f64,
}

impl Costs {
    /// The costs as an array: rows, tile, streamed tile, scalar, tile with rows that are
    /// not whole lines, streamed tile writing one line per row and visit, regrouped streamed
    /// tile, streamed tile that is one contiguous block of B.
    pub fn parts(&self) -> [f64; CLASSES] {
        [
            self.rows,
            self.tile,
            self.tile_stream,
            self.scalar,
            self.tile_odd,
            self.tile_scatter,
            self.tile_regroup,
            self.tile_contiguous_b,
        ]
    }
}

/// The coefficient-free costs of `plan` at copy bandwidth `bw` (bytes per second): the
/// model's features, which the calibration fits.
pub(crate) fn unit_costs(plan: &TransposePlan, beta_nonzero: bool, bw: f64) -> Costs {
    let bytes = plan.bytes_moved(beta_nonzero) as f64;
    let es = plan.dtype().size_bytes() as f64;
    // Without streaming stores a write first reads its line: beta = 0 then moves 3x the
    // size instead of 2x.
    let rfo = if !beta_nonzero && !plan.stores_stream() {
        1.5
    } else {
        1.0
    };
    let base = bytes * rfo / bw;
    match plan.kernel() {
        KernelKind::Rows { n } => Costs {
            rows: base / line_use(n as f64 * es).max(1e-3),
            ..Costs::default()
        },
        KernelKind::Tile { i, j, simd } => {
            let (bi, bj) = plan.blocks();
            let (ri, rj) = (
                (i.n as f64).min(bi as f64) * es,
                (j.n as f64).min(bj as f64) * es,
            );
            // Streamed runs are whole aligned lines: nothing wasted.
            let streamed = plan.streams(!beta_nonzero);
            let (ua, ub) = if simd {
                (
                    line_use(ri),
                    if streamed && rj % 64.0 == 0.0 {
                        1.0
                    } else {
                        line_use(rj)
                    },
                )
            } else {
                // Non-unit strides: every element is its own partial line access.
                let ua = if i.sa.unsigned_abs() == 1 {
                    line_use(ri)
                } else {
                    line_use(es)
                };
                let ub = if j.sb.unsigned_abs() == 1 {
                    line_use(rj)
                } else {
                    line_use(es)
                };
                (ua, ub)
            };
            // Reads inflate by 1/ua, writes (and B reads) by 1/ub.
            let rw = if beta_nonzero {
                (1.0 / ua + 2.0 / ub) / 3.0
            } else {
                (1.0 / ua + 1.0 / ub) / 2.0
            };
            let cost = base * rw;
            if !simd {
                return Costs {
                    scalar: cost,
                    ..Costs::default()
                };
            }
            // Remainders narrower than a micro-tile run through masked edge micro-tiles; tiles
            // whose rows are not whole lines (remainders, rows split across lines) form a
            // class of their own, well below aligned tiles (see `docs/TUNING.md`).
            let odd = |n: usize| !(n * es as usize).is_multiple_of(64);
            if odd(i.n) || odd(j.n) {
                Costs {
                    tile_odd: cost,
                    ..Costs::default()
                }
            } else if streamed && plan.regroups_lines() {
                Costs {
                    tile_regroup: cost,
                    ..Costs::default()
                }
            } else if streamed && plan.scatters_lines() {
                Costs {
                    tile_scatter: cost,
                    ..Costs::default()
                }
            } else if streamed && bj >= j.n && i.sb.unsigned_abs() == j.n {
                // B rows of the whole B-side extent, one after another: each macro-tile
                // writes one contiguous block, faster than other streamed tiles (see
                // `docs/TUNING.md`).
                Costs {
                    tile_contiguous_b: cost,
                    ..Costs::default()
                }
            } else if streamed {
                Costs {
                    tile_stream: cost,
                    ..Costs::default()
                }
            } else {
                Costs {
                    tile: cost,
                    ..Costs::default()
                }
            }
        }
    }
}

/// Predicted seconds of one execution of `plan` under profile `p`.
///
/// ```
/// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}, model};
/// let a = Layout::row_major(&[512, 512]).unwrap();
/// let plan = TransposePlan::new(&[1, 0], &a, &a, DType::F64, &TransposeOptions::default()).unwrap();
/// let p = model::Profile::builtin(vec![20.0]);
/// let t = model::predict_transpose(&plan, false, &p);
/// assert!(t > 2.0 * 512.0 * 512.0 * 8.0 / 20e9); // never faster than a copy
/// ```
pub fn predict_transpose(plan: &TransposePlan, beta_nonzero: bool, p: &Profile) -> f64 {
    let memory = predict_transpose_from_memory(plan, beta_nonzero, p);
    let bytes = plan.bytes_moved(beta_nonzero) as f64;
    let w = memory_share(bytes);
    if w >= 1.0 || plan.normalized().is_empty() {
        return memory;
    }
    let (threads, overhead) = fixed_cost(plan, p);
    let strided = matches!(plan.kernel(), KernelKind::Tile { simd: false, .. });
    let rate = IN_CACHE_TRANSPOSE_GBPS * 1e9 * threads as f64 / if strided { 2.0 } else { 1.0 };
    let in_cache = overhead + bytes / rate;
    in_cache.powf(1.0 - w) * memory.powf(w)
}

/// The threads a plan's execution uses (a tensor too small to be split runs on the calling
/// thread, without a wake-up) and its fixed cost.
fn fixed_cost(plan: &TransposePlan, p: &Profile) -> (usize, f64) {
    let alone = plan.threads() == 1 || plan.small_for_threads();
    let threads = if alone { 1 } else { plan.threads() };
    let c = p.transpose_coeffs(threads);
    let overhead = if alone {
        c.overhead.min(TRANSPOSE_CALL_SECONDS)
    } else {
        c.overhead
    };
    (threads, overhead)
}

/// [`predict_transpose`] for a plan whose tensors come from or go to memory whatever its own
/// size (one block of a larger tensor): the memory model alone, no in-cache blend.
///
/// ```
/// use ttgt::{Layout, DType, transpose::{TransposePlan, TransposeOptions}, model};
/// let a = Layout::row_major(&[64, 64]).unwrap();
/// let plan = TransposePlan::new(&[1, 0], &a, &a, DType::F64, &TransposeOptions::default()).unwrap();
/// let p = model::Profile::builtin(vec![20.0]);
/// assert!(model::predict_transpose_from_memory(&plan, false, &p) > model::predict_transpose(&plan, false, &p));
/// ```
pub fn predict_transpose_from_memory(plan: &TransposePlan, beta_nonzero: bool, p: &Profile) -> f64 {
    let (threads, overhead) = fixed_cost(plan, p);
    if plan.normalized().is_empty() {
        return overhead;
    }
    let c = p.transpose_coeffs(threads);
    let bw = p.copy_gbps(threads) * 1e9;
    let u = unit_costs(plan, beta_nonzero, bw);
    overhead
        + u.rows / c.rows
        + u.tile / c.tile
        + u.tile_stream / c.tile_stream
        + u.tile_odd / c.tile_odd
        + u.tile_scatter / c.tile_scatter
        + u.tile_regroup / c.tile_regroup
        + u.tile_contiguous_b / c.tile_contiguous_b
        + u.scalar / c.scalar
}

/// Fixed cost of a transposition that runs on the calling thread (no wake-up); see
/// `docs/TUNING.md`.
pub const TRANSPOSE_CALL_SECONDS: f64 = 1.5e-7;

/// Bytes moved (read and written) per second and thread, / 1e9, by a SIMD transposition
/// whose tensors stay in the caches ([`crate::model::CACHE_RESIDENT_BYTES`]); scalar
/// (strided) kernels at half of it; see `docs/TUNING.md`.
pub const IN_CACHE_TRANSPOSE_GBPS: f64 = 50.0;

/// Bytes converted (read and written) per second, / 1e9, between a half-precision type and
/// `f32` on one thread, in cache and from memory alike; see `docs/TUNING.md`.
pub const CONVERT_GBPS: f64 = 40.0;

/// Fixed cost of one conversion (a workspace buffer taken, the walk set up); see
/// `docs/TUNING.md`.
pub const CONVERT_CALL_SECONDS: f64 = 4e-7;

/// Predicted seconds of converting `elements` elements of `from_bytes` bytes into elements of
/// `to_bytes` bytes (a half-precision operand widened to its `f32` image, or a result rounded
/// back) on the calling thread: the bytes moved at [`CONVERT_GBPS`], plus
/// [`CONVERT_CALL_SECONDS`].
///
/// ```
/// use ttgt::model::convert_seconds;
/// let small = convert_seconds(1000, 2, 4);
/// let large = convert_seconds(10_000_000, 2, 4);
/// assert!(small > 0.0 && large > 1000.0 * small);
/// ```
pub fn convert_seconds(elements: usize, from_bytes: usize, to_bytes: usize) -> f64 {
    if elements == 0 {
        return 0.0;
    }
    let bytes = (elements * (from_bytes + to_bytes)) as f64;
    CONVERT_CALL_SECONDS + bytes / (CONVERT_GBPS * 1e9)
}

/// Predicted seconds of `B = alpha * perm(A) + beta * B` for these layouts on `threads`
/// threads, without data: the heuristic plan is made and costed.
///
/// ```
/// use ttgt::{Layout, DType};
/// let a = Layout::row_major(&[64, 48, 32]).unwrap();
/// let b = Layout::row_major(&[32, 64, 48]).unwrap();
/// let t = ttgt::model::transpose_seconds(&[2, 0, 1], &a, &b, DType::F32, 1, false).unwrap();
/// assert!(t > 0.0);
/// ```
pub fn transpose_seconds(
    perm: &[usize],
    a: &Layout,
    b: &Layout,
    dtype: DType,
    threads: usize,
    beta_nonzero: bool,
) -> Result<f64> {
    let opts = TransposeOptions {
        threads: Some(threads),
        ..Default::default()
    };
    let plan = TransposePlan::new(perm, a, b, dtype, &opts)?;
    Ok(predict_transpose(&plan, beta_nonzero, &profile()))
}

impl TransposePlan {
    /// Predicted seconds of one execution with `beta == 0`, from this machine's profile
    /// (see [`crate::model::profile`]).
    pub fn estimated_seconds(&self) -> f64 {
        predict_transpose(self, false, &profile())
    }

    /// Predicted seconds of one execution, `beta` zero or not.
    pub fn estimated_seconds_with(&self, beta_nonzero: bool) -> f64 {
        predict_transpose(self, beta_nonzero, &profile())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transpose::Isa;

    /// The class that prices a plan: the index in [`Costs::parts`] of its only cost.
    fn class_of(plan: &TransposePlan) -> usize {
        let parts = unit_costs(plan, false, 20e9).parts();
        let k = (0..CLASSES).filter(|&k| parts[k] > 0.0).collect::<Vec<_>>();
        assert_eq!(k.len(), 1, "{parts:?} {}", plan.describe());
        k[0]
    }

    /// Streamed tiles in the regrouped nest, and streamed tiles that are one contiguous
    /// block of B (a 16x16 f32 tile of 16^6 whose B rows follow each other), have classes
    /// of their own; the same layouts without streaming stores are plain tiles, and the
    /// calibration's training cases for the contiguous and scattered classes land in them.
    #[test]
    fn regrouped_and_contiguous_b_tiles_have_their_own_classes() {
        if Isa::detect() != Isa::Avx512 {
            eprintln!(
                "regrouped_and_contiguous_b_tiles_have_their_own_classes: SKIPPED (no AVX-512)"
            );
            return;
        }
        let plan = |dims: &[usize], perm: &[usize], streaming: bool| {
            let a = Layout::row_major(dims).unwrap();
            let bd: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
            let b = Layout::row_major(&bd).unwrap();
            let opts = TransposeOptions {
                threads: Some(1),
                streaming: Some(streaming),
                regroup: Some(true),
                ..Default::default()
            };
            TransposePlan::new(perm, &a, &b, DType::F32, &opts).unwrap()
        };
        // ttc-40's shape, scaled: a full reversal with 48x48 tiles
        let rev = plan(&[48, 28, 28, 28, 48], &[4, 3, 2, 1, 0], true);
        assert!(rev.regroups_lines(), "{}", rev.describe());
        assert_eq!(class_of(&rev), 6);
        let d6 = [16; 6];
        let contiguous = plan(&d6, &[3, 0, 4, 1, 5, 2], true);
        assert_eq!(class_of(&contiguous), 7, "{}", contiguous.describe());
        let scattered = plan(&d6, &[2, 4, 3, 5, 0, 1], true);
        assert_eq!(class_of(&scattered), 5, "{}", scattered.describe());
        for (dims, perm) in [
            (&[48, 28, 28, 28, 48][..], &[4, 3, 2, 1, 0][..]),
            (&d6[..], &[3, 0, 4, 1, 5, 2][..]),
        ] {
            assert_eq!(class_of(&plan(dims, perm, false)), 1);
        }
    }

    /// A streamed f32 full reversal with the B-side block loop outermost writes one line per
    /// row and visit: it is priced by the `tile_scatter` factor alone (half the factor, twice
    /// the time), and the same layouts without streaming stores are not.
    #[test]
    fn scattered_line_tiles_have_their_own_factor() {
        if Isa::detect() == Isa::Scalar {
            eprintln!("scattered_line_tiles_have_their_own_factor: SKIPPED (no SIMD level here)");
            return;
        }
        // large enough to be priced at the memory rate alone (no in-cache blend)
        let a = Layout::row_major(&[192, 160, 160]).unwrap();
        let b = Layout::row_major(&[160, 160, 192]).unwrap();
        let plan_with = |streaming| {
            // the scattering nest, whatever the host's regroup rule
            let opts = TransposeOptions {
                threads: Some(1),
                streaming: Some(streaming),
                regroup: Some(false),
                ..Default::default()
            };
            TransposePlan::new(&[2, 1, 0], &a, &b, DType::F32, &opts).unwrap()
        };
        let price = |plan: &TransposePlan, f: f64| {
            let mut p = Profile::builtin(vec![20.0]);
            p.transpose.tile_scatter = f;
            p.transpose_at.clear();
            predict_transpose(plan, false, &p) - TRANSPOSE_CALL_SECONDS
        };
        let streamed = plan_with(true);
        assert!(streamed.scatters_lines(), "{}", streamed.describe());
        let (full, half) = (price(&streamed, 1.0), price(&streamed, 0.5));
        assert!((half / full - 2.0).abs() < 1e-9, "{full} {half}");
        let plain = plan_with(false);
        assert!(!plain.scatters_lines());
        assert_eq!(price(&plain, 1.0), price(&plain, 0.5));
    }
}

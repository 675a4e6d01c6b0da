//! How much of a step's price is the memory's: the copy rate the models are built on is
//! measured on tensors far larger than the last-level cache, while a transposition of a few
//! kilobytes runs from L1 and L2 several times faster than that rate says.

/// Bytes moved (read and written) at or below which a transposition is priced from the caches
/// alone: half a 512 KiB to 2 MiB L2; see `docs/TUNING.md`.
pub const CACHE_RESIDENT_BYTES: f64 = 256.0 * 1024.0;

/// Bytes moved at or above which a transposition is priced at the memory model alone (the size
/// from which a contraction's plan waits for the machine's copy probe,
/// [`crate::model::PROBE_MIN_BYTES`]); see `docs/TUNING.md`.
pub const MEMORY_BOUND_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

/// Where `bytes` lies between [`CACHE_RESIDENT_BYTES`] (0) and [`MEMORY_BOUND_BYTES`] (1), on
/// a log scale: the weight of the memory-bound price in a geometric blend with the in-cache
/// one, so that no candidate gains a step in price by being a little smaller than another.
///
/// ```
/// use ttgt::model::{memory_share, CACHE_RESIDENT_BYTES, MEMORY_BOUND_BYTES};
/// assert_eq!(memory_share(CACHE_RESIDENT_BYTES), 0.0);
/// assert_eq!(memory_share(MEMORY_BOUND_BYTES), 1.0);
/// let mid = memory_share(1e6);
/// assert!(mid > 0.0 && mid < 1.0);
/// ```
pub fn memory_share(bytes: f64) -> f64 {
    if bytes <= CACHE_RESIDENT_BYTES {
        return 0.0;
    }
    ((bytes / CACHE_RESIDENT_BYTES).ln() / (MEMORY_BOUND_BYTES / CACHE_RESIDENT_BYTES).ln())
        .clamp(0.0, 1.0)
}

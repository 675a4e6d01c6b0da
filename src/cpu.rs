//! The CPU's SIMD features, detected once per process: every kernel choice (transposition
//! micro-kernels, GETT, matrix-vector products, the GEMM model's AVX-512 factor) reads them
//! from here.

use std::sync::OnceLock;

/// The x86-64 features the kernels use (all false on other architectures).
///
/// ```
/// let f = ttgt::cpu::features();
/// assert!(!f.avx512f || f.avx2); // every AVX-512 CPU has AVX2
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// AVX2 (256-bit integer and float vectors).
    pub avx2: bool,
    /// Fused multiply-add.
    pub fma: bool,
    /// AVX-512 Foundation.
    pub avx512f: bool,
    /// AVX-512 byte and word instructions (16-bit masked loads and stores).
    pub avx512bw: bool,
    /// AVX-512 vector-length extensions (AVX-512 instructions on 256-bit registers).
    pub avx512vl: bool,
}

/// The features of the CPU this process runs on.
pub fn features() -> Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    *FEATURES.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Features {
    Features {
        avx2: is_x86_feature_detected!("avx2"),
        fma: is_x86_feature_detected!("fma"),
        avx512f: is_x86_feature_detected!("avx512f"),
        avx512bw: is_x86_feature_detected!("avx512bw"),
        avx512vl: is_x86_feature_detected!("avx512vl"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Features {
    Features::default()
}

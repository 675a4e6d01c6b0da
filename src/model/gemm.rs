//! GEMM cost model: the predicted seconds of one `C[m×n] += A[m×k]·B[k×n]` call by a given
//! GEMM library, element type and thread count.
//!
//! The model is linear in five features: `t = call + flop·F + a·(m·k) + b·(k·n) + c·(m·n)`,
//! with `F` the flop count. The flop term is the compute-bound rate; the three size terms are
//! the costs of packing A and B and of reading/writing C, which dominate skinny and small
//! GEMMs (a GEMM with efficiency `1 / (1 + m0/m + n0/n + k0/k)` has exactly this form). The
//! coefficients are fitted by least squares on relative errors over a training set of shapes
//! measured on this machine (`ttgt calibrate`); without a calibration, defaults derived from
//! the copy bandwidth of the [`Profile`] and a nominal per-thread rate are used
//! ([`GemmCoeffs::nominal`]), and plans say so.

use std::fmt;
use std::str::FromStr;

use super::calibrate::solve_ridge;
use super::profile::{profile, Profile};
use crate::error::{Error, Result};
use crate::tensor::DType;

/// A GEMM library the CPU backend can call.
///
/// ```
/// use ttgt::model::GemmLibrary;
/// assert_eq!("gemm".parse::<GemmLibrary>().unwrap(), GemmLibrary::Gemm);
/// assert_eq!(GemmLibrary::MatrixMultiply.to_string(), "matrixmultiply");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GemmLibrary {
    /// The `matrixmultiply` crate (its own thread pool, `MATMUL_NUM_THREADS`, at most 4).
    MatrixMultiply,
    /// The `gemm` crate (AVX-512 kernels with `x86-v4`, rayon-parallel).
    Gemm,
    /// Our own blocked GEMM (the GETT engine: AVX2 + FMA kernels for `f32` and `f64`, which
    /// packs operands straight from tensor layouts). Not in [`GemmLibrary::ALL`]: GETT
    /// candidates use it, and calibration and the benchmarks' GEMM reference measure it.
    Native,
}

impl GemmLibrary {
    /// Every library, in a fixed order.
    pub const ALL: [GemmLibrary; 2] = [GemmLibrary::MatrixMultiply, GemmLibrary::Gemm];

    /// The libraries to measure for `dtype` on this CPU: [`GemmLibrary::ALL`], and our own
    /// where it has a SIMD kernel for `dtype`.
    ///
    /// ```
    /// use ttgt::{DType, model::GemmLibrary};
    /// assert!(GemmLibrary::measured(DType::C64).len() == 2);
    /// ```
    pub fn measured(dtype: DType) -> Vec<GemmLibrary> {
        let mut v = Self::ALL.to_vec();
        if super::gett::gett_simd_available(dtype) {
            v.push(GemmLibrary::Native);
        }
        v
    }

    /// Short name (as accepted by `FromStr` and the CLI's `--gemm`).
    ///
    /// ```
    /// assert_eq!(ttgt::model::GemmLibrary::Gemm.name(), "gemm");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            GemmLibrary::MatrixMultiply => "matrixmultiply",
            GemmLibrary::Gemm => "gemm",
            GemmLibrary::Native => "ttgt",
        }
    }
}

impl fmt::Display for GemmLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GemmLibrary {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "matrixmultiply" | "mm" => Ok(GemmLibrary::MatrixMultiply),
            "gemm" => Ok(GemmLibrary::Gemm),
            "ttgt" | "native" => Ok(GemmLibrary::Native),
            _ => Err(Error::Unsupported(format!(
                "unknown GEMM library {s:?} (expected matrixmultiply, gemm or ttgt)"
            ))),
        }
    }
}

/// Fitted coefficients of one (library, element type, thread count).
///
/// ```
/// use ttgt::{DType, model::{GemmCoeffs, GemmLibrary, Profile}};
/// let c = GemmCoeffs::nominal(GemmLibrary::Gemm, DType::F64, 1, &Profile::builtin(vec![20.0]));
/// let t = c.seconds(1000, 1000, 1000);
/// assert!(t > 2e9 * c.flop); // at least the flop term
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GemmCoeffs {
    /// Library.
    pub library: GemmLibrary,
    /// Element type.
    pub dtype: DType,
    /// Threads the GEMM ran on.
    pub threads: usize,
    /// Seconds per call.
    pub call: f64,
    /// Seconds per flop (TCCG convention: 2 per real multiply-add, 8 per complex one).
    pub flop: f64,
    /// Seconds per element of A (`m·k`).
    pub a: f64,
    /// Seconds per element of B (`k·n`).
    pub b: f64,
    /// Seconds per element of C (`m·n`).
    pub c: f64,
    /// Whether the coefficients were measured on this machine.
    pub measured: bool,
}

/// Nominal compute rate per thread (GFLOP/s, TCCG flops) used before a calibration.
fn nominal_gflops(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::C32 => 60.0,
        DType::F64 | DType::C64 => 30.0,
    }
}

impl GemmCoeffs {
    /// Defaults before calibration: a nominal rate per thread and operand costs from the
    /// copy bandwidth of `p`.
    pub fn nominal(library: GemmLibrary, dtype: DType, threads: usize, p: &Profile) -> Self {
        let t = threads.max(1) as f64;
        let per_byte = 1.0 / (p.copy_gbps(threads) * 1e9);
        let es = dtype.size_bytes() as f64;
        GemmCoeffs {
            library,
            dtype,
            threads,
            call: 2e-6,
            flop: 1.0 / (nominal_gflops(dtype) * 1e9 * t),
            a: 2.0 * es * per_byte,
            b: 2.0 * es * per_byte,
            c: 3.0 * es * per_byte,
            measured: false,
        }
    }

    /// Predicted seconds of one `m×n×k` call.
    pub fn seconds(&self, m: usize, n: usize, k: usize) -> f64 {
        if m == 0 || n == 0 {
            return 0.0;
        }
        let f = features(self.dtype, m, n, k);
        self.call * f[0] + self.flop * f[1] + self.a * f[2] + self.b * f[3] + self.c * f[4]
    }

    /// Fits coefficients to measured `(m, n, k, seconds)` samples by least squares on
    /// relative errors; coefficients the data cannot determine (or that come out negative)
    /// keep the `fallback`'s values.
    ///
    /// ```
    /// use ttgt::{DType, model::{GemmCoeffs, GemmLibrary, Profile}};
    /// let truth = GemmCoeffs { call: 1e-6, flop: 1e-11, a: 1e-9, b: 2e-9, c: 3e-9,
    ///     ..GemmCoeffs::nominal(GemmLibrary::Gemm, DType::F64, 1, &Profile::builtin(vec![20.0])) };
    /// let shapes = [(64, 64, 64), (512, 512, 512), (4096, 16, 512), (16, 4096, 512),
    ///               (512, 512, 8), (1024, 1024, 64), (200, 300, 1000)];
    /// let s: Vec<_> = shapes.iter().map(|&(m, n, k)| (m, n, k, truth.seconds(m, n, k))).collect();
    /// let fit = GemmCoeffs::fit(&s, &truth);
    /// assert!((fit.flop / truth.flop - 1.0).abs() < 0.01);
    /// assert!(fit.measured);
    /// ```
    pub fn fit(samples: &[(usize, usize, usize, f64)], fallback: &GemmCoeffs) -> GemmCoeffs {
        let rows: Vec<[f64; 5]> = samples
            .iter()
            .filter(|s| s.3 > 0.0 && s.0 > 0 && s.1 > 0)
            .map(|&(m, n, k, t)| features(fallback.dtype, m, n, k).map(|x| x / t))
            .collect();
        let x = solve_ridge(&rows);
        let pick = |i: usize, d: f64| match x[i] {
            Some(v) if v > 0.0 && v.is_finite() => v,
            _ => d,
        };
        GemmCoeffs {
            call: pick(0, fallback.call),
            flop: pick(1, fallback.flop),
            a: pick(2, fallback.a),
            b: pick(3, fallback.b),
            c: pick(4, fallback.c),
            measured: true,
            ..fallback.clone()
        }
    }
}

fn features(dtype: DType, m: usize, n: usize, k: usize) -> [f64; 5] {
    let (m, n, k) = (m as f64, n as f64, k as f64);
    [1.0, dtype.flops_per_fma() * m * n * k, m * k, k * n, m * n]
}

/// Shapes a calibration measures for each library and element type: square sizes, and
/// skinny and flat shapes of the kinds TTGT produces (about `max_flops` flops at most).
///
/// ```
/// let s = ttgt::model::gemm_training_shapes(2e9);
/// assert!(s.len() >= 16);
/// assert!(s.iter().all(|&(m, n, k)| 2.0 * (m * n * k) as f64 <= 2e9 * 1.01));
/// ```
pub fn gemm_training_shapes(max_flops: f64) -> Vec<(usize, usize, usize)> {
    let mut v = Vec::new();
    let cube = |s: usize| 2.0 * (s * s * s) as f64;
    for s in [32usize, 64, 128, 256, 512, 1024, 2048] {
        if cube(s) <= max_flops * 1.01 {
            v.push((s, s, s));
        }
    }
    let big = ((max_flops / 2.0 / 64.0).sqrt() as usize).clamp(64, 8192);
    for small in [8usize, 24, 64] {
        let b = ((max_flops / 2.0 / small as f64).sqrt() as usize).clamp(64, 8192);
        v.push((b, b, small)); // flat K (rank-k update)
        v.push((small, b, b)); // few rows
        v.push((b, small, b)); // few columns
    }
    v.push((big, 64, big / 4));
    v.push((100, 300, 700));
    // small GEMMs, as loop-over-GEMM plans call them many times: these fix the per-call cost
    for s in [
        (8, 8, 8),
        (16, 16, 16),
        (96, 12, 12),
        (12, 512, 12),
        (96, 96, 12),
        (48, 48, 48),
    ] {
        v.push(s);
    }
    v
}

/// Coefficients for `(library, dtype, threads)` from a profile: the stored calibration when
/// there is one for that thread count (else the closest one below, rescaled), otherwise
/// [`GemmCoeffs::nominal`].
pub fn gemm_coeffs(p: &Profile, library: GemmLibrary, dtype: DType, threads: usize) -> GemmCoeffs {
    let threads = threads.max(1);
    let best = p
        .gemm
        .iter()
        .filter(|c| c.library == library && c.dtype == dtype && c.threads <= threads)
        .max_by_key(|c| c.threads);
    match best {
        Some(c) if c.threads == threads => c.clone(),
        Some(c) => {
            let f = c.threads as f64 / threads as f64;
            GemmCoeffs {
                threads,
                flop: c.flop * f,
                ..c.clone()
            }
        }
        None => GemmCoeffs::nominal(library, dtype, threads, p),
    }
}

/// Predicted seconds of one `m×n×k` GEMM call by `library` on `threads` threads, from this
/// machine's profile.
///
/// ```
/// use ttgt::{DType, model::{gemm_seconds, GemmLibrary}};
/// let small = gemm_seconds(GemmLibrary::Gemm, DType::F32, 64, 64, 64, 1);
/// let big = gemm_seconds(GemmLibrary::Gemm, DType::F32, 1024, 1024, 1024, 1);
/// assert!(big > 100.0 * small);
/// ```
pub fn gemm_seconds(
    library: GemmLibrary,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
    threads: usize,
) -> f64 {
    gemm_coeffs(&profile(), library, dtype, threads).seconds(m, n, k)
}

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
//!
//! Libraries run at different rates depending on whether A and B are row- or column-major
//! (`docs/TUNING.md`), so coefficients are fitted per [`GemmLayout`]: the
//! layout class of a call once C is made row-major (a call whose C is column-major is priced
//! as its transpose, Cᵀ = Bᵀ·Aᵀ).

use std::fmt;
use std::str::FromStr;

use super::calibrate::{solve_ridge, solve_ridge_to};
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
    /// The `matrixmultiply` crate (single-threaded calls; threads cut C into blocks).
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

/// The operand layout class of a GEMM call `C[m×n] = A[m×k]·B[k×n]` once C is row-major:
/// whether A and B are column-major (unit stride down their columns) rather than row-major.
/// Operands with no unit stride count as row-major (their scattered lines are priced apart).
///
/// ```
/// use ttgt::model::GemmLayout;
/// // C column-major: the call is priced as Cᵀ[n×m] = Bᵀ·Aᵀ, whose operands swap roles.
/// let (l, m, n) = GemmLayout::classify((100, 20, 30), [30, 1], [1, 30], [1, 100]);
/// assert_eq!((l.name(), m, n), ("rc", 20, 100));
/// assert_eq!(GemmLayout::classify((100, 20, 30), [30, 1], [20, 1], [20, 1]).0, GemmLayout::ROW);
/// assert_eq!("rc".parse::<GemmLayout>().unwrap(), GemmLayout { a_col: false, b_col: true });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GemmLayout {
    /// A is column-major (its `m` index has unit stride, its `k` index does not).
    pub a_col: bool,
    /// B is column-major (its `k` index has unit stride, its `n` index does not).
    pub b_col: bool,
}

impl GemmLayout {
    /// Both operands row-major: the layout of the base fit and of the benchmarks' GEMM
    /// reference.
    pub const ROW: GemmLayout = GemmLayout {
        a_col: false,
        b_col: false,
    };

    /// The four classes, [`GemmLayout::ROW`] first.
    pub const ALL: [GemmLayout; 4] = [
        GemmLayout::ROW,
        GemmLayout {
            a_col: true,
            b_col: false,
        },
        GemmLayout {
            a_col: false,
            b_col: true,
        },
        GemmLayout {
            a_col: true,
            b_col: true,
        },
    ];

    /// Short name: `r` or `c` for A, then for B (`"rr"`, `"cr"`, `"rc"`, `"cc"`).
    pub fn name(self) -> &'static str {
        match (self.a_col, self.b_col) {
            (false, false) => "rr",
            (true, false) => "cr",
            (false, true) => "rc",
            (true, true) => "cc",
        }
    }

    /// The class of a call with these `(row, column)` strides (in elements) of A, B and C,
    /// and the `(m, n)` to price it at: swapped when C is column-major, since the call is then
    /// priced as its transpose.
    pub fn classify(
        (m, n, k): (usize, usize, usize),
        [a_rs, a_cs]: [isize; 2],
        [b_rs, b_cs]: [isize; 2],
        [c_rs, c_cs]: [isize; 2],
    ) -> (GemmLayout, usize, usize) {
        // A dimension of extent 1 has no stride that matters.
        let unit = |s: isize, extent: usize| extent <= 1 || s.unsigned_abs() == 1;
        let col =
            |rs: isize, cs: isize, rows: usize, cols: usize| !unit(cs, cols) && unit(rs, rows);
        if col(c_rs, c_cs, m, n) {
            // Cᵀ[n×m] = Bᵀ[n×k]·Aᵀ[k×m]: Bᵀ has strides (b_cs, b_rs), Aᵀ (a_cs, a_rs).
            let l = GemmLayout {
                a_col: col(b_cs, b_rs, n, k),
                b_col: col(a_cs, a_rs, k, m),
            };
            (l, n, m)
        } else {
            let l = GemmLayout {
                a_col: col(a_rs, a_cs, m, k),
                b_col: col(b_rs, b_cs, k, n),
            };
            (l, m, n)
        }
    }

    /// `(row, column)` strides of dense `m×k` A and `k×n` B buffers in this class.
    pub fn strides(self, m: usize, n: usize, k: usize) -> ([isize; 2], [isize; 2]) {
        let (m, n, k) = (m as isize, n as isize, k as isize);
        let a = if self.a_col { [1, m] } else { [k, 1] };
        let b = if self.b_col { [1, k] } else { [n, 1] };
        (a, b)
    }
}

impl fmt::Display for GemmLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GemmLayout {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        GemmLayout::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "unknown GEMM layout {s:?} (expected rr, cr, rc or cc)"
                ))
            })
    }
}

/// Fitted coefficients of one (library, element type, thread count, operand layout).
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
    /// Operand layout class of the calls these coefficients price.
    pub layout: GemmLayout,
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
///
/// The `gemm` crate is built with its AVX-512 kernels (`x86-v4`), which it selects at run time;
/// where the CPU has AVX-512F it is rated [`AVX512_GEMM_CRATE_FACTOR`] times the others, so that
/// an uncalibrated plan does not fall back to `matrixmultiply` (the first library in
/// [`GemmLibrary::ALL`]) on a tie. Elsewhere the libraries are rated alike.
pub(super) fn nominal_gflops(library: GemmLibrary, dtype: DType) -> f64 {
    let base = match dtype {
        DType::F32 | DType::C32 | DType::F16 | DType::BF16 => 60.0,
        DType::F64 | DType::C64 => 30.0,
    };
    if library == GemmLibrary::Gemm && cpu_has_avx512f() {
        base * AVX512_GEMM_CRATE_FACTOR
    } else {
        base
    }
}

/// How much faster than `matrixmultiply` the uncalibrated model rates the `gemm` crate on a CPU
/// with AVX-512F, where its `x86-v4` kernels ran 1.1–2.0× faster (`docs/TUNING.md`,
/// `AVX512_GEMM_CRATE_FACTOR`); a calibration replaces it with measured rates.
///
/// ```
/// assert!(ttgt::model::AVX512_GEMM_CRATE_FACTOR > 1.0);
/// ```
pub const AVX512_GEMM_CRATE_FACTOR: f64 = 1.4;

/// Whether this CPU has AVX-512F (the `gemm` crate's `x86-v4` kernels run on it).
fn cpu_has_avx512f() -> bool {
    crate::cpu::features().avx512f
}

impl GemmCoeffs {
    /// Defaults before calibration: a nominal rate per thread (60 GFLOP/s for 4-byte reals,
    /// 30 for 8-byte ones; the `gemm` crate [`AVX512_GEMM_CRATE_FACTOR`] times faster on a CPU
    /// with AVX-512F) and operand costs from the copy bandwidth of `p`.
    pub fn nominal(library: GemmLibrary, dtype: DType, threads: usize, p: &Profile) -> Self {
        let t = threads.max(1) as f64;
        let per_byte = 1.0 / (p.copy_gbps(threads) * 1e9);
        let es = dtype.size_bytes() as f64;
        GemmCoeffs {
            library,
            dtype,
            threads,
            layout: GemmLayout::ROW,
            call: if threads > 1 {
                GEMM_THREADED_CALL_SECONDS
            } else {
                GEMM_CALL_SECONDS
            },
            flop: 1.0 / (nominal_gflops(library, dtype) * 1e9 * t),
            a: 2.0 * es * per_byte,
            b: 2.0 * es * per_byte,
            c: 3.0 * es * per_byte,
            measured: false,
        }
    }

    /// Predicted seconds of one `m×n×k` call (C row-major, `n` its contiguous extent). Without
    /// a calibration (`measured` false), a column-major B adds what the quick probe measured
    /// it to cost per element of B, divided among the threads, except where
    /// [`narrow_c_speedup`] prices that class instead.
    ///
    /// ```
    /// use ttgt::{DType, model::{GemmCoeffs, GemmLayout, GemmLibrary, Profile}};
    /// let row = GemmCoeffs::nominal(GemmLibrary::Gemm, DType::F64, 1, &Profile::builtin(vec![20.0]));
    /// let rc = GemmCoeffs { layout: GemmLayout { a_col: false, b_col: true }, ..row.clone() };
    /// assert!(rc.seconds(24, 5000, 72) >= row.seconds(24, 5000, 72));
    /// ```
    pub fn seconds(&self, m: usize, n: usize, k: usize) -> f64 {
        if m == 0 || n == 0 {
            return 0.0;
        }
        let f = self.features_of(m, n, k);
        let priced =
            self.call * f[0] + self.flop * f[1] + self.a * f[2] + self.b * f[3] + self.c * f[4];
        let column_b = self.layout.b_col
            && !self.measured
            && narrow_c_speedup(self.library, self.dtype, self.layout, (m, n, k)) == 1.0;
        let column_b = if column_b {
            super::gemm_probe::column_major_b_seconds(self.library, self.dtype) * (k * n) as f64
                / self.threads.max(1) as f64
        } else {
            0.0
        };
        priced + column_b
    }

    /// The model's features of an `m×n×k` call in this library and layout class: the
    /// five plain ones divided by [`narrow_c_speedup`] (so that a fit prices the
    /// coefficients of larger products, and predictions add the speed-up back).
    fn features_of(&self, m: usize, n: usize, k: usize) -> [f64; 5] {
        let s = narrow_c_speedup(self.library, self.dtype, self.layout, (m, n, k));
        features(self.dtype, m, n, k).map(|x| x / s)
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
            .map(|&(m, n, k, t)| fallback.features_of(m, n, k).map(|x| x / t))
            .collect();
        Self::from_solution(solve_ridge(&rows), fallback)
    }

    /// Coefficients from a least-squares solution in feature order; those it left
    /// undetermined, negative or infinite keep the `fallback`'s values.
    fn from_solution(x: [Option<f64>; 5], fallback: &GemmCoeffs) -> GemmCoeffs {
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

impl GemmCoeffs {
    /// As [`GemmCoeffs::fit`], with the compute rate held at `flop` seconds per flop (the
    /// row-major class's): a library packs A and B into its own panel format whatever their
    /// layout, so its micro-kernel's rate is the same for every layout class, and a layout
    /// changes only the packing (the per-element costs) and C's write pattern. Fitted freely
    /// on the fewer and smaller shapes the other classes are measured on, the rate came out
    /// faster than the row-major one, which steered large GEMMs to transposed layouts (and
    /// GEMM-shaped contractions to a needless copy; see `docs/TUNING.md`).
    ///
    /// ```
    /// use ttgt::{DType, model::{GemmCoeffs, GemmLibrary, Profile}};
    /// let truth = GemmCoeffs { call: 1e-6, flop: 1e-11, a: 1e-9, b: 2e-9, c: 3e-9,
    ///     ..GemmCoeffs::nominal(GemmLibrary::Gemm, DType::F64, 1, &Profile::builtin(vec![20.0])) };
    /// let shapes = [(64, 64, 64), (512, 512, 512), (4096, 16, 512), (16, 4096, 512),
    ///               (512, 512, 8), (1024, 1024, 64), (200, 300, 1000)];
    /// let s: Vec<_> = shapes.iter().map(|&(m, n, k)| (m, n, k, truth.seconds(m, n, k))).collect();
    /// let fit = GemmCoeffs::fit_with_flop(&s, &truth, 1e-11);
    /// assert_eq!(fit.flop, 1e-11);
    /// assert!((fit.c / truth.c - 1.0).abs() < 0.01);
    /// ```
    pub fn fit_with_flop(
        samples: &[(usize, usize, usize, f64)],
        fallback: &GemmCoeffs,
        flop: f64,
    ) -> GemmCoeffs {
        let (rows, targets): (Vec<[f64; 5]>, Vec<f64>) = samples
            .iter()
            .filter(|s| s.3 > 0.0 && s.0 > 0 && s.1 > 0)
            .map(|&(m, n, k, t)| {
                let f = fallback.features_of(m, n, k);
                (
                    [f[0] / t, 0.0, f[2] / t, f[3] / t, f[4] / t],
                    1.0 - flop * f[1] / t,
                )
            })
            .unzip();
        let mut x = solve_ridge_to(&rows, &targets);
        x[1] = Some(flop);
        Self::from_solution(x, fallback)
    }
}

/// Largest C (`m·n` elements) that the `gemm` crate computes faster with both operands
/// K-contiguous ([`narrow_c_speedup`]): at 265 (53×5) and above the layouts ran alike.
pub const NARROW_C_MAX_ELEMENTS: usize = 240;

/// Least depth K at which [`narrow_c_speedup`] applies: shallower calls take well under a
/// microsecond, where the model's fixed costs, not the layout, decide.
pub const NARROW_C_MIN_K: usize = 16;

/// How much faster the `gemm` crate runs a real call with a small row-major C (at most
/// [`NARROW_C_MAX_ELEMENTS`] elements, rows not whole 64-byte vectors) when both operands
/// are K-contiguous (class `rc`) and K is at least [`NARROW_C_MIN_K`] than the five-feature
/// model prices it (its coefficients price larger products):
/// `sqrt(2 · elements per vector / n)` within [1.4, 4], at or below what was measured
/// (`docs/TUNING.md`, "Small C in the gemm crate"). 1 elsewhere.
///
/// ```
/// use ttgt::{DType, model::{narrow_c_speedup, GemmLayout, GemmLibrary}};
/// let rc = GemmLayout { a_col: false, b_col: true };
/// let s = narrow_c_speedup(GemmLibrary::Gemm, DType::F64, rc, (5, 2, 361));
/// assert!((s - 8f64.sqrt()).abs() < 1e-12);
/// assert_eq!(narrow_c_speedup(GemmLibrary::Gemm, DType::F64, GemmLayout::ROW, (5, 2, 361)), 1.0);
/// assert_eq!(narrow_c_speedup(GemmLibrary::Gemm, DType::F64, rc, (5, 8, 361)), 1.0); // whole vectors
/// assert_eq!(narrow_c_speedup(GemmLibrary::Gemm, DType::F64, rc, (53, 5, 361)), 1.0); // C too big
/// assert_eq!(narrow_c_speedup(GemmLibrary::Gemm, DType::F64, rc, (5, 2, 8)), 1.0); // too shallow
/// assert_eq!(narrow_c_speedup(GemmLibrary::MatrixMultiply, DType::F64, rc, (5, 2, 361)), 1.0);
/// ```
pub fn narrow_c_speedup(
    library: GemmLibrary,
    dtype: DType,
    layout: GemmLayout,
    (m, n, k): (usize, usize, usize),
) -> f64 {
    let real = matches!(dtype, DType::F32 | DType::F64);
    let rc = layout.b_col && !layout.a_col;
    let es = dtype.size_bytes();
    if library != GemmLibrary::Gemm
        || !real
        || !rc
        || m < 2
        || n == 0
        || k < NARROW_C_MIN_K
        || m * n > NARROW_C_MAX_ELEMENTS
        || (n * es).is_multiple_of(64)
    {
        return 1.0;
    }
    let per_vector = (64 / es) as f64;
    (2.0 * per_vector / n as f64).sqrt().clamp(1.4, 4.0)
}

pub(super) fn features(dtype: DType, m: usize, n: usize, k: usize) -> [f64; 5] {
    let (m, n, k) = (m as f64, n as f64, k as f64);
    [1.0, dtype.flops_per_fma() * m * n * k, m * k, k * n, m * n]
}

/// Shapes a calibration measures for each library, element type and layout: square sizes
/// up to `max_flops` flops (the large ones fix the compute-bound rate, which decides between
/// libraries on big contractions), and skinny, flat, long, deep and small shapes of the kinds
/// TTGT produces (at most `min(max_flops, 1e9)` flops each).
///
/// ```
/// let s = ttgt::model::gemm_training_shapes(2e9);
/// assert!(s.len() >= 16);
/// assert!(s.iter().all(|&(m, n, k)| 2.0 * (m * n * k) as f64 <= 2e9 * 1.01));
/// assert!(ttgt::model::gemm_training_shapes(2e10).contains(&(2048, 2048, 2048)));
/// ```
pub fn gemm_training_shapes(max_flops: f64) -> Vec<(usize, usize, usize)> {
    let mut v = Vec::new();
    let cube = |s: usize| 2.0 * (s * s * s) as f64;
    for s in [32usize, 64, 128, 256, 512, 1024, 2048] {
        if cube(s) <= max_flops * 1.01 {
            v.push((s, s, s));
        }
    }
    let skinny = max_flops.min(1e9);
    let big = ((skinny / 2.0 / 64.0).sqrt() as usize).clamp(64, 8192);
    for small in [8usize, 24, 64] {
        let b = ((skinny / 2.0 / small as f64).sqrt() as usize).clamp(64, 8192);
        v.push((b, b, small)); // flat K (rank-k update)
        v.push((small, b, b)); // few rows
        v.push((b, small, b)); // few columns
    }
    v.push((big, 64, big / 4));
    v.push((100, 300, 700));
    // long, thin products with a short K (one huge and one small free dimension: the
    // memory-bound GEMMs of contractions with small extents)
    let long = ((skinny / 2.0 / (24.0 * 64.0)) as usize).max(64);
    v.push((long, 24, 64));
    v.push((24, long, 64));
    // deep products (a small C summed over a long K, as TTGT makes of contractions whose
    // free labels are few)
    for side in [64usize, 256] {
        let k = ((skinny / 2.0 / (side * side) as f64) as usize).max(64);
        v.push((side, side, k));
    }
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

/// Coefficients for `(library, dtype, threads)` and row-major operands from a profile (see
/// [`gemm_coeffs_in`]).
///
/// ```
/// use ttgt::{DType, model::{gemm_coeffs, GemmLayout, GemmLibrary, Profile}};
/// let c = gemm_coeffs(&Profile::builtin(vec![20.0]), GemmLibrary::Gemm, DType::F32, 2);
/// assert_eq!((c.threads, c.layout), (2, GemmLayout::ROW));
/// ```
pub fn gemm_coeffs(p: &Profile, library: GemmLibrary, dtype: DType, threads: usize) -> GemmCoeffs {
    gemm_coeffs_in(p, library, dtype, threads, GemmLayout::ROW)
}

/// Coefficients for `(library, dtype, threads, layout)` from a profile: the stored calibration
/// when there is one for that thread count (else the closest one below, rescaled); a layout
/// the profile has no entry for is priced as row-major; without any calibration,
/// [`GemmCoeffs::nominal`].
///
/// ```
/// use ttgt::{DType, model::{gemm_coeffs_in, GemmLayout, GemmLibrary, Profile}};
/// let p = Profile::builtin(vec![20.0]);
/// let l = GemmLayout { a_col: true, b_col: false };
/// let c = gemm_coeffs_in(&p, GemmLibrary::MatrixMultiply, DType::F64, 1, l);
/// assert!(!c.measured && c.flop > 0.0);
/// ```
pub fn gemm_coeffs_in(
    p: &Profile,
    library: GemmLibrary,
    dtype: DType,
    threads: usize,
    layout: GemmLayout,
) -> GemmCoeffs {
    let threads = threads.max(1);
    let of = |layout: GemmLayout| {
        p.gemm
            .iter()
            .filter(|c| {
                c.library == library
                    && c.dtype == dtype
                    && c.threads <= threads
                    && c.layout == layout
            })
            .max_by_key(|c| c.threads)
    };
    let best = of(layout).or_else(|| of(GemmLayout::ROW));
    // The class asked for, whichever entry prices it: `seconds` adds what is particular to
    // that class ([`narrow_c_speedup`]).
    let coeffs = match best {
        Some(c) if c.threads == threads => c.clone(),
        Some(c) => {
            let f = c.threads as f64 / threads as f64;
            GemmCoeffs {
                threads,
                flop: c.flop * f,
                ..c.clone()
            }
        }
        None => probed_or_nominal(library, dtype, threads, p),
    };
    GemmCoeffs { layout, ..coeffs }
}

/// Coefficients without a calibration: [`GemmCoeffs::nominal`] with the quick probe's compute
/// rate (divided among `threads`) and per-call cost (at least the nominal one, which counts
/// the engine's dispatch of a call as well as the library's) when there is a probe
/// ([`super::probed_gemm_coeffs`]). The per-element costs stay the nominal ones, from the
/// profile's copy rate: the probe's come from operands in cache, and priced with them, loops
/// of small GEMMs over tensors in memory looked cheaper than they ran (docs/TUNING.md).
fn probed_or_nominal(
    library: GemmLibrary,
    dtype: DType,
    threads: usize,
    p: &Profile,
) -> GemmCoeffs {
    let nominal = GemmCoeffs::nominal(library, dtype, threads, p);
    match super::gemm_probe::probed_gemm_coeffs(library, dtype) {
        Some(c) => GemmCoeffs {
            flop: c.flop / threads as f64,
            call: c.call.max(nominal.call),
            ..nominal
        },
        None => nominal,
    }
}

/// [`gemm_coeffs_in`] for calls whose operands and result span `memory_share` of the way from
/// the caches to memory ([`super::memory_share`] of their bytes): without a calibration, the
/// per-element costs move from the quick probe's (operands in cache) to the nominal ones
/// (the copy rate's) in proportion. A calibrated model is used as it is.
///
/// ```
/// use ttgt::{DType, model::{gemm_coeffs_in, gemm_coeffs_resident, GemmLayout, GemmLibrary, Profile}};
/// let p = Profile::builtin(vec![20.0]);
/// let (lib, row) = (GemmLibrary::Gemm, GemmLayout::ROW);
/// let memory = gemm_coeffs_resident(&p, lib, DType::F64, 1, row, 1.0);
/// assert_eq!(memory, gemm_coeffs_in(&p, lib, DType::F64, 1, row));
/// let cache = gemm_coeffs_resident(&p, lib, DType::F64, 1, row, 0.0);
/// assert!(cache.a <= memory.a && cache.flop == memory.flop);
/// ```
pub fn gemm_coeffs_resident(
    p: &Profile,
    library: GemmLibrary,
    dtype: DType,
    threads: usize,
    layout: GemmLayout,
    memory_share: f64,
) -> GemmCoeffs {
    let base = gemm_coeffs_in(p, library, dtype, threads, layout);
    let w = memory_share.clamp(0.0, 1.0);
    if base.measured || w >= 1.0 {
        return base;
    }
    match super::gemm_probe::probed_gemm_coeffs(library, dtype) {
        Some(c) => {
            let mix = |cache: f64, memory: f64| (1.0 - w) * cache.min(memory) + w * memory;
            GemmCoeffs {
                a: mix(c.a, base.a),
                b: mix(c.b, base.b),
                c: mix(c.c, base.c),
                ..base
            }
        }
        None => base,
    }
}

/// Predicted seconds of one `m×n×k` GEMM call with row-major operands by `library` on
/// `threads` threads, from this machine's profile.
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
    let p = profile();
    gemv_seconds(&p, dtype, (m, n, k), threads).unwrap_or_else(|| {
        gemm_coeffs(
            &p,
            library,
            dtype,
            super::gemm_grid_threads(m, n, k, threads),
        )
        .seconds(m, n, k)
    })
}

/// Predicted seconds of a matrix-vector product (a GEMM call with `m == 1` or `n == 1`),
/// which the CPU backend streams whatever the library (`backend/cpu/gemm/gemv.rs`): its
/// matrix read once at this machine's copy rate (which counts bytes read and written; a
/// read-only stream keeps up with it, see `docs/TUNING.md`), plus [`GEMV_CALL_SECONDS`].
/// `None` for any other shape.
///
/// ```
/// use ttgt::{DType, model::{gemv_seconds, profile}};
/// let t = gemv_seconds(&profile(), DType::F64, (2000, 1, 3000), 1).unwrap();
/// assert!(t > 0.0);
/// assert!(gemv_seconds(&profile(), DType::F64, (20, 20, 20), 1).is_none());
/// ```
pub fn gemv_seconds(
    p: &Profile,
    dtype: DType,
    (m, n, k): (usize, usize, usize),
    threads: usize,
) -> Option<f64> {
    if m != 1 && n != 1 {
        return None;
    }
    let bytes = (m.max(n) * k + k + m * n) as f64 * dtype.size_bytes() as f64;
    Some(GEMV_CALL_SECONDS + bytes / (p.copy_gbps(threads) * 1e9))
}

/// Largest small side (`min(m, n)`) of a skinny product, which the CPU backend runs without
/// packing (`backend/cpu/gemm/skinny/`): up to 24 result columns are four register passes
/// over each block of the long operand held in L2.
pub const SKINNY_MAX_SIDE: usize = 24;

/// Largest small side of a skinny product of any depth; wider ones (up to
/// [`SKINNY_MAX_SIDE`]) need a depth of [`SKINNY_WIDE_MIN_K`]: with a short depth, the
/// result's own traffic and the register passes over M outweigh the packing the libraries
/// spend (`docs/TUNING.md`).
pub const SKINNY_SHORT_MAX_SIDE: usize = 8;

/// Shortest depth of a skinny product wider than [`SKINNY_SHORT_MAX_SIDE`].
pub const SKINNY_WIDE_MIN_K: usize = 256;

/// Fewest times its small side that a skinny product wider than [`SKINNY_SHORT_MAX_SIDE`]
/// is long: shorter ones, whose small operand is as large as the long one, stream both
/// from memory, which the kernels do not prefetch for X (`docs/TUNING.md`).
pub const SKINNY_WIDE_LONG_SIDES: usize = 64;

/// Fewest times its small side that any skinny product is long (a row block of the axpy
/// form would be mostly empty lanes).
pub const SKINNY_MIN_LONG_SIDES: usize = 4;

/// Largest small side of a skinny product in the dot form (the long operand's rows
/// contiguous): each result element's lanes are summed once per depth block, which wider
/// results pay for more than packing (`docs/TUNING.md`).
pub const SKINNY_DOT_MAX_SIDE: usize = 12;

/// Shortest depth of a skinny product in the dot form: below it the lane sums cost more
/// than the libraries' packing saves (`docs/TUNING.md`).
pub const SKINNY_DOT_MIN_K: usize = 128;

/// A skinny product `Y[r × p] = M[r × k] · X[k × p]` read off a GEMM call: which operand is
/// the long matrix `M` and which of its strides is the unit one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkinnyForm {
    /// Columns of the result (the small side).
    pub p: usize,
    /// Rows of the result (the long side).
    pub r: usize,
    /// Whether `M` is `Bᵀ` (small `m`) rather than `A` (small `n`).
    pub transposed: bool,
    /// `M`'s columns are contiguous (rows of the result stream down them); otherwise its rows
    /// and `X`'s columns are (dot products along `k`).
    pub axpy: bool,
}

impl SkinnyForm {
    /// The form of an `m×n×k` call of `dtype` with these `(row, column)` strides of A and B,
    /// or `None` when the CPU backend runs it otherwise: a side of 2 to [`SKINNY_MAX_SIDE`]
    /// and a long side of [`SKINNY_MIN_LONG_SIDES`] times it (above [`SKINNY_SHORT_MAX_SIDE`],
    /// a depth of [`SKINNY_WIDE_MIN_K`] and [`SKINNY_WIDE_LONG_SIDES`] times; in the dot
    /// form up to [`SKINNY_DOT_MAX_SIDE`] and a depth of [`SKINNY_DOT_MIN_K`] or more),
    /// a real element type, AVX2 + FMA or AVX-512, and a unit stride where the form needs it.
    ///
    /// ```
    /// use ttgt::{DType, model::SkinnyForm};
    /// // 5 rows of A against a row-major 2809×265 B
    /// let f = SkinnyForm::of(DType::F64, (5, 265, 2809), [2809, 1], [265, 1]);
    /// if let Some(f) = f {
    ///     assert_eq!((f.p, f.r, f.transposed, f.axpy), (5, 265, true, true));
    /// }
    /// assert_eq!(SkinnyForm::of(DType::F64, (64, 64, 64), [64, 1], [64, 1]), None);
    /// ```
    pub fn of(
        dtype: DType,
        (m, n, k): (usize, usize, usize),
        a: [isize; 2],
        b: [isize; 2],
    ) -> Option<SkinnyForm> {
        let isa = crate::transpose::Isa::detect();
        let simd = isa == crate::transpose::Isa::Avx512
            || (isa == crate::transpose::Isa::Avx2 && crate::cpu::features().fma);
        if !simd || !matches!(dtype, DType::F32 | DType::F64) {
            return None;
        }
        // Small m: Yᵀ = Bᵀ·Aᵀ, M = Bᵀ, X = Aᵀ; small n: M = A, X = B.
        let (p, r, mat, x, transposed) = if m <= n {
            (m, n, [b[1], b[0]], [a[1], a[0]], true)
        } else {
            (n, m, a, b, false)
        };
        if !(2..=SKINNY_MAX_SIDE).contains(&p) || k == 0 || r < SKINNY_MIN_LONG_SIDES * p {
            return None;
        }
        if p > SKINNY_SHORT_MAX_SIDE && (k < SKINNY_WIDE_MIN_K || r < SKINNY_WIDE_LONG_SIDES * p) {
            return None;
        }
        let axpy = mat[0] == 1;
        let dot = mat[1] == 1 && x[0] == 1 && p <= SKINNY_DOT_MAX_SIDE && k >= SKINNY_DOT_MIN_K;
        (axpy || dot).then_some(SkinnyForm {
            p,
            r,
            transposed,
            axpy,
        })
    }

    /// Rows and depth as the kernels run them for an element of `size` bytes: the rows of the
    /// axpy form in whole blocks of 4 vectors (2 without AVX-512), the depth of the dot form
    /// in whole vectors and its rows in whole blocks of 4 (2).
    fn padded(&self, k: usize, size: usize) -> (usize, usize) {
        let wide = crate::transpose::Isa::detect() == crate::transpose::Isa::Avx512;
        let lanes = if wide { 64 } else { 32 } / size.max(1);
        let vectors = if wide { 4 } else { 2 };
        if self.axpy {
            (self.r.next_multiple_of(vectors * lanes), k)
        } else {
            (self.r.next_multiple_of(vectors), k.next_multiple_of(lanes))
        }
    }
}

/// Share of the GEMM libraries' compute rate that the skinny kernels reach where both are
/// bound by their multiply-adds (`docs/TUNING.md`).
pub const SKINNY_RATE_SHARE: f64 = 0.9;

/// Predicted seconds of a skinny product `form` of `dtype` with depth `k` on `threads`
/// threads: the longer of its multiply-adds (rows and depth rounded up as the kernels run
/// them) at [`SKINNY_RATE_SHARE`] of the quick probe's GEMM rate and its operands read once
/// at this machine's copy rate, plus the result written back and read for ownership at that
/// rate (a stream the kernels' prefetches do not hide), the byte terms weighted by the
/// `memory_share` of the bytes the call spans; plus [`GEMM_CALL_SECONDS`].
///
/// ```
/// use ttgt::{DType, model::{profile, skinny_seconds, SkinnyForm}};
/// let p = profile();
/// let form = |r| SkinnyForm { p: 5, r, transposed: true, axpy: true };
/// let big = skinny_seconds(&p, DType::F64, form(2880), 14400, 1, 1.0);
/// let small = skinny_seconds(&p, DType::F64, form(265), 2809, 1, 0.0);
/// assert!(big > 10.0 * small && small > 0.0);
/// ```
pub fn skinny_seconds(
    p: &Profile,
    dtype: DType,
    form: SkinnyForm,
    k: usize,
    threads: usize,
    memory_share: f64,
) -> f64 {
    let size = dtype.size_bytes();
    let (rows, depth) = form.padded(k, size);
    let threads = threads.clamp(1, form.r.div_ceil(16).max(1));
    let flops = 2.0 * (rows * form.p * depth) as f64;
    let compute =
        flops * gemm_coeffs(p, GemmLibrary::Gemm, dtype, threads).flop / SKINNY_RATE_SHARE;
    let rate = p.copy_gbps(threads) * 1e9 / memory_share.clamp(0.0, 1.0);
    let read = ((form.r * k + form.p * k) * size) as f64 / rate;
    let result = (2 * form.r * form.p * size) as f64 / rate;
    GEMM_CALL_SECONDS + compute.max(read) + result
}

/// Fixed cost of one single-threaded GEMM call in the uncalibrated model (dispatch, packing
/// set-up); see `docs/TUNING.md`.
pub const GEMM_CALL_SECONDS: f64 = 3e-7;

/// Fixed cost of one GEMM call on several threads in the uncalibrated model (the parallel
/// region's wake-up and join besides [`GEMM_CALL_SECONDS`]).
pub const GEMM_THREADED_CALL_SECONDS: f64 = 2e-6;

/// Fixed cost of one matrix-vector call (dispatch, loop set-up; measured in `docs/TUNING.md`).
pub const GEMV_CALL_SECONDS: f64 = 3e-8;

/// Predicted seconds of one GEMM call `C[m×n] = A[m×k]·B[k×n]` with these `(row, column)`
/// element strides of A, B and C (see [`GemmLayout::classify`]).
///
/// ```
/// use ttgt::{DType, model::{gemm_seconds_strided, GemmLibrary}};
/// // row-major A and B, column-major C
/// let t = gemm_seconds_strided(GemmLibrary::Gemm, DType::F64, (300, 200, 100),
///                              [[100, 1], [200, 1], [1, 300]], 2);
/// assert!(t > 0.0);
/// ```
pub fn gemm_seconds_strided(
    library: GemmLibrary,
    dtype: DType,
    (m, n, k): (usize, usize, usize),
    [a, b, c]: [[isize; 2]; 3],
    threads: usize,
) -> f64 {
    let p = profile();
    if let Some(t) = gemv_seconds(&p, dtype, (m, n, k), threads) {
        return t;
    }
    if let Some(form) = SkinnyForm::of(dtype, (m, n, k), a, b) {
        return skinny_seconds(&p, dtype, form, k, threads, 1.0);
    }
    let (layout, m, n) = GemmLayout::classify((m, n, k), a, b, c);
    let threads = super::gemm_grid_threads(m, n, k, threads);
    gemm_coeffs_in(&p, library, dtype, threads, layout).seconds(m, n, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strides of a dense `rows×cols` matrix, row- or column-major.
    fn dense(rows: usize, cols: usize, col_major: bool) -> [isize; 2] {
        if col_major {
            [1, rows as isize]
        } else {
            [cols as isize, 1]
        }
    }

    #[test]
    fn classify_reads_the_unit_strides_and_prices_a_column_major_c_as_its_transpose() {
        let (m, n, k) = (7, 5, 3);
        for a_col in [false, true] {
            for b_col in [false, true] {
                let (a, b) = (dense(m, k, a_col), dense(k, n, b_col));
                let (l, pm, pn) = GemmLayout::classify((m, n, k), a, b, dense(m, n, false));
                assert_eq!((l, pm, pn), (GemmLayout { a_col, b_col }, m, n));
                // The same call with C column-major is Cᵀ = Bᵀ·Aᵀ: Bᵀ is row-major exactly
                // when B is column-major, and so on.
                let (t, tm, tn) = GemmLayout::classify((m, n, k), a, b, dense(m, n, true));
                let expect = GemmLayout {
                    a_col: !b_col,
                    b_col: !a_col,
                };
                assert_eq!((t, tm, tn), (expect, n, m));
            }
        }
        // Extent-1 dimensions have no stride that matters; strided operands count as rows.
        let one = GemmLayout::classify((1, 4, 6), [99, 1], [4, 1], [1, 1]);
        assert_eq!(one, (GemmLayout::ROW, 1, 4));
        let strided = GemmLayout::classify((4, 4, 4), [8, 2], [12, 3], [4, 1]);
        assert_eq!(strided.0, GemmLayout::ROW);
        for l in GemmLayout::ALL {
            assert_eq!(l.name().parse::<GemmLayout>().unwrap(), l);
        }
        assert!("xr".parse::<GemmLayout>().is_err());
    }

    #[test]
    fn nominal_rates_favour_the_gemm_crate_only_with_avx512() {
        let p = Profile::builtin(vec![20.0]);
        for dtype in [DType::F32, DType::F64, DType::C32, DType::C64] {
            let mm = GemmCoeffs::nominal(GemmLibrary::MatrixMultiply, dtype, 2, &p);
            let gc = GemmCoeffs::nominal(GemmLibrary::Gemm, dtype, 2, &p);
            let native = GemmCoeffs::nominal(GemmLibrary::Native, dtype, 2, &p);
            assert_eq!(mm.flop, native.flop);
            let want = if cpu_has_avx512f() {
                mm.flop / AVX512_GEMM_CRATE_FACTOR
            } else {
                mm.flop
            };
            assert!((gc.flop - want).abs() <= 1e-6 * want, "{dtype:?}");
            assert!(!gc.measured && !mm.measured);
            // everything but the rate is the same
            assert_eq!((gc.call, gc.a, gc.b, gc.c), (mm.call, mm.a, mm.b, mm.c));
        }
    }

    #[test]
    fn small_c_with_k_contiguous_operands_is_priced_faster_in_the_gemm_crate_only() {
        let p = Profile::builtin(vec![20.0]);
        let rc = GemmLayout {
            a_col: false,
            b_col: true,
        };
        for dtype in [DType::F32, DType::F64] {
            let at = |library, layout, mnk: (usize, usize, usize)| {
                gemm_coeffs_in(&p, library, dtype, 1, layout).seconds(mnk.0, mnk.1, mnk.2)
            };
            // 5x5 C, K = 1805 (a CCSD energy-like call): rc priced at least 1.4x faster.
            let (row, k_contig) = (
                at(GemmLibrary::Gemm, GemmLayout::ROW, (5, 5, 1805)),
                at(GemmLibrary::Gemm, rc, (5, 5, 1805)),
            );
            assert!(
                row >= 1.4 * k_contig * 0.999,
                "{dtype:?}: {row} vs {k_contig}"
            );
            // Large C, other libraries, shallow K: no speed-up; rc is priced as row-major
            // plus what the probe measured a column-major B to add (nothing without a probe,
            // or for our own GEMM).
            for (library, mnk) in [
                (GemmLibrary::Gemm, (53, 5, 2809)),
                (GemmLibrary::Gemm, (5, 5, 8)),
                (GemmLibrary::MatrixMultiply, (5, 5, 1805)),
                (GemmLibrary::Native, (53, 5, 2809)),
            ] {
                assert_eq!(narrow_c_speedup(library, dtype, rc, mnk), 1.0);
                let (x, y) = (at(library, GemmLayout::ROW, mnk), at(library, rc, mnk));
                let extra = super::super::gemm_probe::column_major_b_seconds(library, dtype)
                    * (mnk.1 * mnk.2) as f64;
                assert!((y - x - extra).abs() <= 1e-12 * x, "{library:?} {mnk:?}");
            }
        }
        // A fit in the rc class recovers the coefficients it was generated with (measured
        // ones: no probe term).
        let truth = GemmCoeffs {
            layout: rc,
            measured: true,
            call: 1e-6,
            flop: 1e-11,
            a: 1e-9,
            b: 2e-9,
            c: 3e-9,
            ..GemmCoeffs::nominal(GemmLibrary::Gemm, DType::F64, 1, &p)
        };
        let shapes = [
            (5, 5, 1805),
            (5, 2, 400),
            (64, 64, 64),
            (512, 512, 512),
            (4096, 16, 512),
            (16, 4096, 512),
            (512, 512, 8),
            (200, 300, 1000),
        ];
        let s: Vec<_> = shapes
            .iter()
            .map(|&(m, n, k)| (m, n, k, truth.seconds(m, n, k)))
            .collect();
        let fit = GemmCoeffs::fit(&s, &truth);
        assert!((fit.b / truth.b - 1.0).abs() < 0.01, "{fit:?}");
        assert!((fit.seconds(5, 5, 1805) / truth.seconds(5, 5, 1805) - 1.0).abs() < 0.01);
    }

    #[test]
    fn layouts_fall_back_to_row_major_coefficients_and_survive_the_profile_file() {
        let mut p = Profile::builtin(vec![20.0]);
        let base = GemmCoeffs {
            measured: true,
            ..GemmCoeffs::nominal(GemmLibrary::Gemm, DType::F32, 2, &p)
        };
        let slow_b = GemmCoeffs {
            layout: GemmLayout {
                a_col: false,
                b_col: true,
            },
            flop: base.flop * 1.5,
            ..base.clone()
        };
        p.gemm = vec![base.clone(), slow_b.clone()];
        let q = Profile::from_json(&p.to_json()).unwrap();
        assert_eq!(q.gemm, p.gemm);
        let get = |l| gemm_coeffs_in(&q, GemmLibrary::Gemm, DType::F32, 2, l);
        assert_eq!(get(slow_b.layout), slow_b);
        // no entry for "cr": the row-major one prices it
        assert_eq!(
            get(GemmLayout::ALL[1]),
            GemmCoeffs {
                layout: GemmLayout::ALL[1],
                ..base.clone()
            }
        );
        // on 4 threads the 2-thread entry of the layout is rescaled
        let four = gemm_coeffs_in(&q, GemmLibrary::Gemm, DType::F32, 4, slow_b.layout);
        assert_eq!(four.layout, slow_b.layout);
        assert!((four.flop - slow_b.flop / 2.0).abs() < 1e-24);
        // profiles from before layouts existed read as row-major
        let old = p.to_json().replace("\"layout\": \"rc\",", "");
        let r = Profile::from_json(&old).unwrap();
        assert!(r.gemm.iter().all(|g| g.layout == GemmLayout::ROW));
    }
}

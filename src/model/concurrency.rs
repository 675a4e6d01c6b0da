//! The slowdown of single-threaded GEMM calls that run several at a time (the tasks of a
//! parallel loop of calls) against the one-thread GEMM model, as `ttgt calibrate` measures
//! it: one geometric mean per library, element type, thread count and operand layout class,
//! and the factor of each probe shape, interpolated at the shape a plan asks about.
//!
//! The probe's calls write a fresh C block each, from memory, and read a fresh A block each,
//! from memory or from the last-level cache, as a loop's calls do, or (a tiled write-back's
//! calls) write C blocks that stay in cache ([`OperandSource`]), while the one-thread model is
//! fitted on calls that write the same C again. So the per-shape factors also carry the cost
//! of writing C from memory, which depends on the shape and the layout class (see
//! `docs/TUNING.md`).

use std::str::FromStr;

use serde_json::{json, Value};

use super::gemm::{GemmLayout, GemmLibrary};
use super::profile::Profile;
use crate::error::{Error, Result};
use crate::tensor::DType;

/// Where the GEMM calls of a loop read the operand block that changes from call to call,
/// and where the C block they write lives: both in memory, the operands in the last-level
/// cache with C going to memory, both in cache (a tiled write-back's C block buffer, which
/// each call writes again while it stays in cache), or the operands from memory with C in
/// such a buffer.
///
/// ```
/// use ttgt::model::OperandSource;
/// assert_eq!("cache".parse::<OperandSource>().unwrap(), OperandSource::Cache);
/// assert_eq!("resident".parse::<OperandSource>().unwrap(), OperandSource::Resident);
/// assert_eq!(OperandSource::Memory.name(), "memory");
/// assert_eq!(OperandSource::Resident.fallbacks(), [OperandSource::Resident, OperandSource::Cache, OperandSource::Memory]);
/// assert_eq!("streamed".parse::<OperandSource>().unwrap().fallbacks(), [OperandSource::Streamed, OperandSource::Memory]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperandSource {
    /// From memory (what profiles stored before the cache case was measured hold).
    Memory,
    /// Operands from the last-level cache, C to memory.
    Cache,
    /// Operands from the last-level cache, C into a block that stays in cache.
    Resident,
    /// Operands from memory, C into a block that stays in cache (a tiled write-back whose
    /// operands are too large for the last-level cache).
    Streamed,
}

impl OperandSource {
    /// `"memory"`, `"cache"` or `"resident"`.
    pub fn name(self) -> &'static str {
        match self {
            OperandSource::Memory => "memory",
            OperandSource::Cache => "cache",
            OperandSource::Resident => "resident",
            OperandSource::Streamed => "streamed",
        }
    }

    /// This source and the ones whose measurements stand in for it where it has none, nearest
    /// first: resident calls read like cached ones, streamed ones like those from memory, and
    /// every source falls back to memory.
    pub fn fallbacks(self) -> &'static [OperandSource] {
        use OperandSource::*;
        match self {
            Memory => &[Memory],
            Cache => &[Cache, Memory],
            Resident => &[Resident, Cache, Memory],
            Streamed => &[Streamed, Memory],
        }
    }
}

impl FromStr for OperandSource {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "memory" => Ok(OperandSource::Memory),
            "cache" => Ok(OperandSource::Cache),
            "resident" => Ok(OperandSource::Resident),
            "streamed" => Ok(OperandSource::Streamed),
            _ => Err(Error::Unsupported(format!(
                "unknown operand source {s:?} (expected memory, cache, resident or streamed)"
            ))),
        }
    }
}

/// The measured factor of one probe shape `m×n×k` (see [`ConcurrentGemm::at`]).
///
/// ```
/// let s = ttgt::model::ShapeFactor { m: 24, n: 96, k: 384, factor: 1.2 };
/// assert_eq!(s.m * s.n * s.k, 884_736);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShapeFactor {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Depth.
    pub k: usize,
    /// (time of a call among the concurrent ones) / (one-thread model's price of it).
    pub factor: f64,
}

/// One measured slowdown of concurrent single-threaded GEMM calls (see
/// [`Profile::gemm_concurrent`]).
///
/// ```
/// use ttgt::{DType, model::{ConcurrentGemm, GemmLayout, GemmLibrary, Profile, OperandSource}};
/// let mut p = Profile::builtin(vec![20.0, 30.0]);
/// let (lib, rr, rc) = (GemmLibrary::Gemm, GemmLayout::ROW, GemmLayout::ALL[2]);
/// assert_eq!(p.gemm_concurrency(lib, DType::F32, 2, rr), 1.0);
/// let entry = |layout, factor| ConcurrentGemm {
///     library: lib, dtype: DType::F32, threads: 2, layout, operands: OperandSource::Memory,
///     factor, at: Vec::new(),
/// };
/// p.gemm_concurrent.push(entry(rr, 1.3));
/// assert_eq!(p.gemm_concurrency(lib, DType::F32, 4, rr), 1.3);
/// assert_eq!(p.gemm_concurrency(lib, DType::F32, 2, rc), 1.3); // falls back to row-major
/// p.gemm_concurrent.push(entry(rc, 1.1));
/// assert_eq!(p.gemm_concurrency(lib, DType::F32, 2, rc), 1.1);
/// assert_eq!(p.gemm_concurrency(lib, DType::F64, 2, rr), 1.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ConcurrentGemm {
    /// The library.
    pub library: GemmLibrary,
    /// The element type.
    pub dtype: DType,
    /// How many calls ran at once, one per thread.
    pub threads: usize,
    /// Operand layout class of the calls (profiles stored before classes were measured
    /// apart read as row-major).
    pub layout: GemmLayout,
    /// Where the probe's calls read their changing operand block from.
    pub operands: OperandSource,
    /// Geometric mean over the probe shapes of (time of a call among `threads` concurrent
    /// ones) / (one-thread model's price of the call).
    pub factor: f64,
    /// The factor of each probe shape, on a grid of `m`, `n` and `k` values (empty in
    /// profiles stored before shapes were kept: [`ConcurrentGemm::factor`] then applies to
    /// every shape).
    pub at: Vec<ShapeFactor>,
}

impl ConcurrentGemm {
    /// The factor at shape `m×n×k`: interpolated linearly in the logarithms of the shape
    /// and of the factor between the probe shapes around it (clamped to the grid's edges);
    /// the nearest probe shape where the grid has a hole; [`ConcurrentGemm::factor`] without
    /// probe shapes.
    ///
    /// ```
    /// use ttgt::{DType, model::{ConcurrentGemm, GemmLayout, GemmLibrary, ShapeFactor, OperandSource}};
    /// let mut at = Vec::new();
    /// for m in [10, 1000] {
    ///     for n in [10, 1000] {
    ///         at.push(ShapeFactor { m, n, k: 10, factor: if m == 10 { 1.0 } else { 4.0 } });
    ///     }
    /// }
    /// let c = ConcurrentGemm { library: GemmLibrary::Gemm, dtype: DType::F64, threads: 2,
    ///     layout: GemmLayout::ROW, operands: OperandSource::Memory, factor: 2.0, at };
    /// assert!((c.factor_at(100, 50, 10) - 2.0).abs() < 1e-12); // halfway in log m
    /// assert!((c.factor_at(5000, 5, 99) - 4.0).abs() < 1e-12); // clamped
    /// assert_eq!(c.factor_at(10, 10, 10), 1.0);
    /// ```
    pub fn factor_at(&self, m: usize, n: usize, k: usize) -> f64 {
        if self.at.is_empty() {
            return self.factor;
        }
        let (ms, ns, ks) = (self.axis(|s| s.m), self.axis(|s| s.n), self.axis(|s| s.k));
        let mut log = 0.0;
        for (mv, mw) in bracket(&ms, m) {
            for (nv, nw) in bracket(&ns, n) {
                for (kv, kw) in bracket(&ks, k) {
                    let w = mw * nw * kw;
                    if w == 0.0 {
                        continue;
                    }
                    match self.at.iter().find(|s| (s.m, s.n, s.k) == (mv, nv, kv)) {
                        Some(s) => log += w * s.factor.ln(),
                        None => return self.nearest(m, n, k),
                    }
                }
            }
        }
        log.exp()
    }

    /// The distinct values of one coordinate of the probe shapes, ascending.
    fn axis(&self, f: impl Fn(&ShapeFactor) -> usize) -> Vec<usize> {
        let mut v: Vec<usize> = self.at.iter().map(f).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The factor of the probe shape nearest to `m×n×k` in log space.
    fn nearest(&self, m: usize, n: usize, k: usize) -> f64 {
        let d = |s: &ShapeFactor| {
            [(s.m, m), (s.n, n), (s.k, k)]
                .iter()
                .map(|&(a, b)| (ln(a) - ln(b)).powi(2))
                .sum::<f64>()
        };
        self.at
            .iter()
            .min_by(|x, y| d(x).total_cmp(&d(y)))
            .map_or(self.factor, |s| s.factor)
    }
}

fn ln(x: usize) -> f64 {
    (x.max(1) as f64).ln()
}

/// The grid values around `q` in ascending `v` (non-empty) and their weights, linear in
/// `ln q`; one value with weight 1 outside the grid.
fn bracket(v: &[usize], q: usize) -> [(usize, f64); 2] {
    let (first, last) = (v[0], v[v.len() - 1]);
    if q <= first {
        return [(first, 1.0), (first, 0.0)];
    }
    if q >= last {
        return [(last, 1.0), (last, 0.0)];
    }
    let i = v.windows(2).position(|w| w[1] >= q).unwrap_or(0);
    let (lo, hi) = (v[i], v[i + 1]);
    let w = (ln(q) - ln(lo)) / (ln(hi) - ln(lo));
    [(lo, 1.0 - w), (hi, w)]
}

impl Profile {
    /// The entry for calls of layout class `layout` run `threads` at a time whose operands and
    /// C live where `operands` says: the one measured at the most threads not above
    /// `threads` for that class and the nearest source measured
    /// ([`OperandSource::fallbacks`]), else for row-major operands from memory.
    fn concurrent_entry(
        &self,
        library: GemmLibrary,
        dtype: DType,
        threads: usize,
        layout: GemmLayout,
        operands: OperandSource,
    ) -> Option<&ConcurrentGemm> {
        if threads <= 1 {
            return None;
        }
        let of = |l: GemmLayout, s: OperandSource| {
            self.gemm_concurrent
                .iter()
                .filter(|c| {
                    c.library == library
                        && c.dtype == dtype
                        && c.threads <= threads
                        && c.layout == l
                        && c.operands == s
                })
                .max_by_key(|c| c.threads)
        };
        operands
            .fallbacks()
            .iter()
            .find_map(|&s| of(layout, s))
            .or_else(|| of(GemmLayout::ROW, OperandSource::Memory))
    }

    /// The mean slowdown factor of single-threaded GEMM calls of layout class `layout` run
    /// `threads` at a time, reading from memory ([`ConcurrentGemm::factor`] of the entry measured at
    /// the most threads not above `threads` for that class, else for row-major operands), 1
    /// without one.
    pub fn gemm_concurrency(
        &self,
        library: GemmLibrary,
        dtype: DType,
        threads: usize,
        layout: GemmLayout,
    ) -> f64 {
        self.concurrent_entry(library, dtype, threads, layout, OperandSource::Memory)
            .map_or(1.0, |c| c.factor)
    }

    /// As [`Profile::gemm_concurrency`], at the call shape `m×n×k`
    /// ([`ConcurrentGemm::factor_at`]) of calls whose operands and C live where `operands`
    /// says (the nearest source measured where none was measured from `operands`,
    /// [`OperandSource::fallbacks`]).
    ///
    /// ```
    /// use ttgt::{DType, model::{GemmLayout, GemmLibrary, Profile, OperandSource}};
    /// let p = Profile::builtin(vec![20.0, 30.0]);
    /// let (lib, rr, a) = (GemmLibrary::Gemm, GemmLayout::ROW, OperandSource::Cache);
    /// assert_eq!(p.gemm_concurrency_at(lib, DType::F64, 2, rr, a, (24, 256, 24)), 1.0);
    /// ```
    pub fn gemm_concurrency_at(
        &self,
        library: GemmLibrary,
        dtype: DType,
        threads: usize,
        layout: GemmLayout,
        operands: OperandSource,
        (m, n, k): (usize, usize, usize),
    ) -> f64 {
        self.concurrent_entry(library, dtype, threads, layout, operands)
            .map_or(1.0, |c| c.factor_at(m, n, k))
    }
}

/// The JSON form of one entry (read back by [`concurrent_entry`]); probe shapes as
/// `[m, n, k, factor]`.
pub(super) fn concurrent_json(c: &ConcurrentGemm) -> Value {
    json!({
        "library": c.library.name(), "dtype": c.dtype.name(), "threads": c.threads,
        "layout": c.layout.name(), "operands": c.operands.name(), "factor": c.factor,
        "at": c.at.iter().map(|s| json!([s.m, s.n, s.k, s.factor])).collect::<Vec<_>>(),
    })
}

/// One stored entry; `num` reads a numeric field.
pub(super) fn concurrent_entry(
    c: &Value,
    num: &dyn Fn(&Value, &str) -> Result<f64>,
) -> Result<ConcurrentGemm> {
    let bad =
        |what: &str| Error::Unsupported(format!("calibration profile: gemm_concurrent {what}"));
    let text = |k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("entry without {k}")))
    };
    let positive = |f: f64| f.is_finite() && f > 0.0;
    let factor = num(c, "factor")?;
    if !positive(factor) {
        return Err(bad("factor must be a positive number"));
    }
    let shape = |s: &Value| -> Result<ShapeFactor> {
        let x: Vec<f64> = s
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        match x[..] {
            [m, n, k, f] if m >= 1.0 && n >= 1.0 && k >= 1.0 && positive(f) => Ok(ShapeFactor {
                m: m as usize,
                n: n as usize,
                k: k as usize,
                factor: f,
            }),
            _ => Err(bad(
                "shape entries must be [m, n, k, factor] with positive numbers",
            )),
        }
    };
    Ok(ConcurrentGemm {
        library: text("library")?.parse()?,
        dtype: text("dtype")?.parse().map_err(|e: String| bad(&e))?,
        threads: num(c, "threads")?.max(1.0) as usize,
        layout: match c.get("layout").and_then(Value::as_str) {
            Some(l) => l.parse()?,
            None => GemmLayout::ROW,
        },
        // profiles stored before the cache case was measured: from memory
        operands: match c.get("operands").and_then(Value::as_str) {
            Some(o) => o.parse()?,
            None => OperandSource::Memory,
        },
        factor,
        // profiles stored before the probe shapes were kept have none
        at: match c.get("at").and_then(Value::as_array) {
            Some(list) => list.iter().map(shape).collect::<Result<_>>()?,
            None => Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grid of probe shapes whose factor is 1 at m = 24 and 2 at m = 96 (k and n 24 and
    /// 96 alike), with one hole that `factor_at` fills from the nearest shape.
    fn grid() -> Vec<ShapeFactor> {
        let mut v = Vec::new();
        for m in [24, 96] {
            for n in [24, 96] {
                for k in [24, 96] {
                    let factor = if m == 24 { 1.0 } else { 2.0 };
                    v.push(ShapeFactor { m, n, k, factor });
                }
            }
        }
        v
    }

    #[test]
    fn a_grid_with_a_hole_takes_the_nearest_shape() {
        let mut at = grid();
        at.retain(|s| (s.m, s.n, s.k) != (96, 96, 96));
        let c = ConcurrentGemm {
            library: GemmLibrary::Gemm,
            dtype: DType::F32,
            threads: 2,
            layout: GemmLayout::ROW,
            operands: OperandSource::Memory,
            factor: 1.5,
            at,
        };
        // inside the cell with the hole: the nearest shape (m = 96) decides
        assert_eq!(c.factor_at(95, 60, 60), 2.0);
        assert_eq!(c.factor_at(30, 30, 30), 1.0);
        // the cell's other corners are all there below n = 24..96 at k = 24
        assert!((c.factor_at(48, 24, 24) - 2f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn concurrent_call_factors_survive_the_profile_file() {
        let mut p = Profile::builtin(vec![20.0, 30.0]);
        let entry = |dtype, layout, operands, factor, at| ConcurrentGemm {
            library: GemmLibrary::Gemm,
            dtype,
            threads: 2,
            layout,
            operands,
            factor,
            at,
        };
        let (f32_, f64_, memory) = (DType::F32, DType::F64, OperandSource::Memory);
        p.gemm_concurrent = vec![
            entry(f32_, GemmLayout::ROW, memory, 1.25, Vec::new()),
            entry(f64_, GemmLayout::ROW, memory, 1.125, Vec::new()),
            entry(f64_, GemmLayout::ALL[3], OperandSource::Cache, 1.5, grid()),
            entry(
                f32_,
                GemmLayout::ROW,
                OperandSource::Resident,
                0.75,
                Vec::new(),
            ),
        ];
        let q = Profile::from_json(&p.to_json()).unwrap();
        assert_eq!(q.gemm_concurrent, p.gemm_concurrent);
        let (rr, cr, cc) = (GemmLayout::ROW, GemmLayout::ALL[1], GemmLayout::ALL[3]);
        // cc was measured from the cache only: calls reading from memory take row-major's
        let (gemm, mm) = (GemmLibrary::Gemm, GemmLibrary::MatrixMultiply);
        for (lib, dtype, threads, layout, want) in [
            (gemm, f64_, 2, rr, 1.125),
            (gemm, f64_, 2, cc, 1.125),
            (gemm, f64_, 2, cr, 1.125),
            (gemm, f32_, 1, rr, 1.0),
            (mm, f32_, 2, rr, 1.0),
        ] {
            assert_eq!(q.gemm_concurrency(lib, dtype, threads, layout), want);
        }
        // a C block kept in cache: its own entry where measured, else the cached
        // operands', else memory's
        let resident = |dtype, layout| {
            q.gemm_concurrency_at(
                gemm,
                dtype,
                2,
                layout,
                OperandSource::Resident,
                (96, 24, 24),
            )
        };
        assert_eq!(resident(f32_, rr), 0.75);
        assert_eq!(resident(f64_, cc), 2.0);
        assert_eq!(resident(f64_, rr), 1.125);
        // profiles from before the entry existed: no slowdown; before the layout classes
        // were measured apart: row-major entries; a bad factor is an error
        let v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("gemm_concurrent");
        let r = Profile::from_json(&old.to_string()).unwrap();
        assert!(r.gemm_concurrent.is_empty());
        let mut unclassed = v.clone();
        for e in unclassed["gemm_concurrent"].as_array_mut().unwrap() {
            e.as_object_mut().unwrap().remove("layout");
        }
        let r = Profile::from_json(&unclassed.to_string()).unwrap();
        assert!(r.gemm_concurrent.iter().all(|c| c.layout == rr));
        // before the cache case was measured: from memory
        let mut sourceless = v.clone();
        for e in sourceless["gemm_concurrent"].as_array_mut().unwrap() {
            e.as_object_mut().unwrap().remove("operands");
        }
        let r = Profile::from_json(&sourceless.to_string()).unwrap();
        assert!(r
            .gemm_concurrent
            .iter()
            .all(|c| c.operands == OperandSource::Memory));

        // shape factors: the grid's values at its points, the mean without them
        let at = |s| {
            q.gemm_concurrency_at(
                GemmLibrary::Gemm,
                DType::F64,
                2,
                cc,
                OperandSource::Cache,
                s,
            )
        };
        assert!((at((96, 24, 24)) - 2.0).abs() < 1e-12);
        assert!((at((24, 24, 24)) - 1.0).abs() < 1e-12);
        assert!((at((48, 24, 24)) - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(
            q.gemm_concurrency_at(
                GemmLibrary::Gemm,
                DType::F64,
                2,
                rr,
                OperandSource::Cache,
                (96, 24, 24)
            ),
            1.125
        );
        let mut shapeless = v.clone();
        for e in shapeless["gemm_concurrent"].as_array_mut().unwrap() {
            e.as_object_mut().unwrap().remove("at");
        }
        let r = Profile::from_json(&shapeless.to_string()).unwrap();
        assert!(r.gemm_concurrent.iter().all(|c| c.at.is_empty()));
        assert_eq!(
            r.gemm_concurrency_at(
                GemmLibrary::Gemm,
                DType::F64,
                2,
                cc,
                OperandSource::Cache,
                (96, 24, 24)
            ),
            1.5
        );
        let mut bad_shape = v.clone();
        bad_shape["gemm_concurrent"][2]["at"][0] = serde_json::json!([24, 24, 24, -1.0]);
        assert!(Profile::from_json(&bad_shape.to_string()).is_err());
        let bad = p.to_json().replace("1.125", "-1.0");
        assert!(Profile::from_json(&bad).is_err());
    }
}

//! Calibration numbers for one machine: memory-copy bandwidth per thread count and the
//! transposition efficiency factors, stored as JSON in the user's cache directory
//! (`ttgt calibrate` re-creates it) or measured by a quick built-in probe when no file exists.

use std::path::PathBuf;
use std::sync::{OnceLock, RwLock};

use serde_json::{json, Value};

use super::concurrency::{concurrent_entry, concurrent_json, ConcurrentGemm};
use super::gemm::{GemmCoeffs, GemmLayout};
use crate::error::{Error, Result};

/// Efficiency of each transposition macro-kernel class relative to a plain copy
/// (bandwidth ratio at perfect cache-line use).
#[derive(Clone, Debug, PartialEq)]
pub struct TransposeCoeffs {
    /// Contiguous rows (A and B share their stride-1 dimension).
    pub rows: f64,
    /// SIMD 2-D tiles with ordinary stores.
    pub tile: f64,
    /// SIMD 2-D tiles with non-temporal (streaming) stores.
    pub tile_stream: f64,
    /// SIMD 2-D tiles whose A or B rows are not a whole number of cache lines (e.g. 24 f32):
    /// remainders in edge micro-tiles and rows split across lines, with either store kind.
    pub tile_odd: f64,
    /// Streamed SIMD tiles that write one line of each B row per visit, with the B-side
    /// block loop outermost (the next line of a row comes a whole pass of the inner loops
    /// later): full reversals in f32 on AVX-512, where two-line blocks would read too many
    /// A rows at once (`TransposePlan::scatters_lines`).
    pub tile_scatter: f64,
    /// Streamed SIMD tiles in the regrouped nest of scattered-line tiles
    /// (`TransposePlan::regroups_lines`): full reversals whose visits write runs of two lines
    /// or whole rows of every B row of the macro-tile.
    pub tile_regroup: f64,
    /// Streamed SIMD tiles whose macro-tile is one contiguous block of B (whole B rows that
    /// follow each other): the writes are runs of the whole macro-tile, not lines.
    pub tile_contiguous_b: f64,
    /// Scalar tiles (non-unit strides, complex scalars, no SIMD).
    pub scalar: f64,
    /// Fixed cost of one execution, seconds (planning excluded).
    pub overhead: f64,
}

impl Default for TransposeCoeffs {
    fn default() -> Self {
        TransposeCoeffs {
            rows: 0.9,
            tile: 0.4,
            tile_stream: 0.7,
            tile_odd: 0.35,
            tile_scatter: 0.45,
            tile_regroup: 0.7,
            tile_contiguous_b: 0.7,
            scalar: 0.25,
            overhead: 2e-6,
        }
    }
}

/// Calibration of one machine.
///
/// ```
/// let p = ttgt::model::Profile::from_json(&ttgt::model::Profile::builtin(vec![20.0, 32.0]).to_json()).unwrap();
/// assert_eq!(p.copy_gbps(2), 32.0);
/// assert_eq!(p.copy_gbps(8), 32.0); // beyond the measured range: the last value
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Where it was measured (CPU model and core count).
    pub machine: String,
    /// Unix time of the measurement.
    pub created: u64,
    /// Whether it comes from `ttgt calibrate` (`false`: the quick probe and default factors).
    pub calibrated: bool,
    /// Copy bandwidth (bytes read + written per second / 1e9) for 1, 2, ... threads.
    pub copy: Vec<f64>,
    /// Transposition efficiency factors (at the calibration's thread count; see also
    /// [`Profile::transpose_at`]).
    pub transpose: TransposeCoeffs,
    /// Transposition efficiency factors fitted at each calibrated thread count, as
    /// `(threads, factors)`: one core cannot keep as many misses in flight as the memory
    /// system serves, so a kernel's rate relative to a copy at the same thread count differs
    /// between one thread and all cores. Empty in profiles stored before this entry existed.
    pub transpose_at: Vec<(usize, TransposeCoeffs)>,
    /// GEMM coefficients measured per library, element type and thread count (empty before
    /// `ttgt calibrate`: the planner then uses [`GemmCoeffs::nominal`]).
    pub gemm: Vec<GemmCoeffs>,
    /// How much longer each single-threaded GEMM call takes, against the one-thread model,
    /// when `threads` of them run at once (a parallel loop of calls): measured per library
    /// and element type by `ttgt calibrate` ([`crate::backend::cpu::calibrate_gemm_concurrency`]).
    pub gemm_concurrent: Vec<ConcurrentGemm>,
    /// Whether transpositions whose tiles read one cache line per A row (16 f32, 8 f64) run
    /// faster with streaming stores on this machine, as `ttgt calibrate` measured it
    /// ([`crate::transpose::set_line_tile_streaming`]); `None`: not measured (the engine's
    /// built-in default applies).
    pub line_tile_stream: Option<bool>,
    /// Whether streamed scattered-line tiles (full reversals) run faster in the regrouped
    /// loop nest on this machine, as `ttgt calibrate` measured it
    /// ([`crate::transpose::set_scatter_regroup`]); `None`: not measured (the engine's
    /// built-in default applies).
    pub scatter_regroup: Option<bool>,
    /// Whether SIMD tiles whose continued A rows are a page or more apart run faster with the
    /// software prefetch on this machine, as `ttgt calibrate` measured it
    /// ([`crate::transpose::set_far_row_prefetch`]); `None`: not measured (the engine's
    /// built-in default applies).
    pub far_row_prefetch: Option<bool>,
}

impl Profile {
    /// A profile from measured copy bandwidths and default efficiency factors.
    pub fn builtin(copy: Vec<f64>) -> Profile {
        Profile {
            machine: machine_name(),
            created: now(),
            calibrated: false,
            copy,
            transpose: TransposeCoeffs::default(),
            transpose_at: Vec::new(),
            gemm: Vec::new(),
            gemm_concurrent: Vec::new(),
            line_tile_stream: None,
            scatter_regroup: None,
            far_row_prefetch: None,
        }
    }

    /// The transposition factors for `threads` threads: those fitted at that thread count, else
    /// at the most threads below it, else [`Profile::transpose`].
    ///
    /// ```
    /// use ttgt::model::{Profile, TransposeCoeffs};
    /// let mut p = Profile::builtin(vec![20.0, 30.0]);
    /// let one = TransposeCoeffs { tile: 1.2, ..Default::default() };
    /// p.transpose_at.push((1, one.clone()));
    /// assert_eq!(p.transpose_coeffs(1), &one);
    /// assert_eq!(p.transpose_coeffs(4), &one);
    /// p.transpose_at.clear();
    /// assert_eq!(p.transpose_coeffs(1), &p.transpose);
    /// ```
    pub fn transpose_coeffs(&self, threads: usize) -> &TransposeCoeffs {
        self.transpose_at
            .iter()
            .filter(|(t, _)| *t <= threads.max(1))
            .max_by_key(|(t, _)| *t)
            .map_or(&self.transpose, |(_, c)| c)
    }

    /// Copy bandwidth at `threads` threads, GB/s.
    pub fn copy_gbps(&self, threads: usize) -> f64 {
        let k = threads.max(1) - 1;
        self.copy
            .get(k)
            .or(self.copy.last())
            .copied()
            .unwrap_or(10.0)
    }

    /// The JSON form stored on disk.
    pub fn to_json(&self) -> String {
        let t = &self.transpose;
        let v = json!({
            "version": 1,
            "machine": self.machine,
            "created": self.created,
            "calibrated": self.calibrated,
            "copy_gbps": self.copy,
            "transpose": coeffs_json(t),
            "transpose_threads": self.transpose_at.iter().map(|(n, t)| {
                let mut e = coeffs_json(t);
                e["threads"] = json!(n);
                e
            }).collect::<Vec<_>>(),
            "gemm": self.gemm.iter().map(|g| json!({
                "library": g.library.name(), "dtype": g.dtype.name(), "threads": g.threads,
                "layout": g.layout.name(),
                "call": g.call, "flop": g.flop, "a": g.a, "b": g.b, "c": g.c,
            })).collect::<Vec<_>>(),
            "gemm_concurrent": self.gemm_concurrent.iter().map(concurrent_json).collect::<Vec<_>>(),
            "line_tile_stream": self.line_tile_stream,
            "scatter_regroup": self.scatter_regroup,
            "far_row_prefetch": self.far_row_prefetch,
        });
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    /// Reads the JSON form.
    pub fn from_json(text: &str) -> Result<Profile> {
        let bad = |what: &str| Error::Unsupported(format!("calibration profile: {what}"));
        let v: Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
        let num = |x: &Value, k: &str| {
            x.get(k)
                .and_then(Value::as_f64)
                .ok_or_else(|| bad(&format!("missing {k}")))
        };
        let t = v.get("transpose").ok_or_else(|| bad("missing transpose"))?;
        let coeffs = |t: &Value| -> Result<TransposeCoeffs> {
            Ok(TransposeCoeffs {
                rows: num(t, "rows")?,
                tile: num(t, "tile")?,
                tile_stream: num(t, "tile_stream")?,
                // Profiles stored before this class existed priced such tiles as the others.
                tile_odd: num(t, "tile_odd").or_else(|_| num(t, "tile_stream"))?,
                tile_scatter: num(t, "tile_scatter").or_else(|_| num(t, "tile_stream"))?,
                tile_regroup: num(t, "tile_regroup").or_else(|_| num(t, "tile_stream"))?,
                tile_contiguous_b: num(t, "tile_contiguous_b")
                    .or_else(|_| num(t, "tile_stream"))?,
                scalar: num(t, "scalar")?,
                overhead: num(t, "overhead")?,
            })
        };
        let copy: Vec<f64> = v
            .get("copy_gbps")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("missing copy_gbps"))?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        if copy.is_empty()
            || copy
                .iter()
                .any(|c| c.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
        {
            return Err(bad("copy_gbps must be positive numbers"));
        }
        Ok(Profile {
            machine: v
                .get("machine")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            created: v.get("created").and_then(Value::as_u64).unwrap_or(0),
            calibrated: v
                .get("calibrated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            copy,
            transpose: coeffs(t)?,
            // Profiles stored before this entry existed: the one set of factors for all.
            transpose_at: match v.get("transpose_threads").and_then(Value::as_array) {
                Some(list) => list
                    .iter()
                    .map(|e| {
                        let n = e
                            .get("threads")
                            .and_then(Value::as_u64)
                            .filter(|&n| n > 0)
                            .ok_or_else(|| bad("transpose_threads entry without threads"))?;
                        Ok((n as usize, coeffs(e)?))
                    })
                    .collect::<Result<_>>()?,
                None => Vec::new(),
            },
            gemm: match v.get("gemm").and_then(Value::as_array) {
                Some(list) => list
                    .iter()
                    .map(|g| gemm_entry(g, &num))
                    .collect::<Result<_>>()?,
                None => Vec::new(),
            },
            // Profiles stored before this entry existed read as "no slowdown measured".
            gemm_concurrent: match v.get("gemm_concurrent").and_then(Value::as_array) {
                Some(list) => list
                    .iter()
                    .map(|c| concurrent_entry(c, &num))
                    .collect::<Result<_>>()?,
                None => Vec::new(),
            },
            // Absent (older profiles) or null: not measured.
            line_tile_stream: v.get("line_tile_stream").and_then(Value::as_bool),
            scatter_regroup: v.get("scatter_regroup").and_then(Value::as_bool),
            far_row_prefetch: v.get("far_row_prefetch").and_then(Value::as_bool),
        })
    }

    /// Where the profile is stored: `$TTGT_PROFILE`, else `$XDG_CACHE_HOME/ttgt/profile.json`,
    /// else `$HOME/.cache/ttgt/profile.json`.
    pub fn path() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("TTGT_PROFILE") {
            return Some(PathBuf::from(p));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("ttgt").join("profile.json"))
    }

    /// Writes the profile to [`Profile::path`].
    pub fn save(&self) -> Result<PathBuf> {
        let path = Profile::path()
            .ok_or_else(|| Error::Unsupported("no cache directory (set TTGT_PROFILE)".into()))?;
        let io = |e: std::io::Error| Error::Unsupported(format!("writing {}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        crate::files::write_bytes_atomic(&path, self.to_json().as_bytes()).map_err(io)?;
        Ok(path)
    }

    /// Loads the stored profile, if there is a valid one.
    /// A profile file that cannot be read or parsed is reported once per process on stderr
    /// (the built-in values are used; `ttgt calibrate` writes a new one).
    pub fn load() -> Option<Profile> {
        crate::files::load_stored(
            &Profile::path()?,
            "calibration profile",
            "`ttgt calibrate` writes a new one",
            Profile::from_json,
        )
    }
}

/// The JSON form of a set of transposition factors (read back by `Profile::from_json`).
fn coeffs_json(t: &TransposeCoeffs) -> Value {
    json!({
        "rows": t.rows, "tile": t.tile, "tile_stream": t.tile_stream, "tile_odd": t.tile_odd,
        "tile_scatter": t.tile_scatter, "tile_regroup": t.tile_regroup,
        "tile_contiguous_b": t.tile_contiguous_b, "scalar": t.scalar, "overhead": t.overhead,
    })
}

/// One stored GEMM coefficient set.
fn gemm_entry(g: &Value, num: &dyn Fn(&Value, &str) -> Result<f64>) -> Result<GemmCoeffs> {
    let bad = |what: &str| Error::Unsupported(format!("calibration profile: gemm {what}"));
    let text = |k: &str| {
        g.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("entry without {k}")))
    };
    Ok(GemmCoeffs {
        library: text("library")?.parse()?,
        dtype: text("dtype")?.parse().map_err(|e: String| bad(&e))?,
        threads: g
            .get("threads")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("entry without threads"))? as usize,
        // profiles written before layouts were fitted hold row-major coefficients only
        layout: match g.get("layout").and_then(Value::as_str) {
            Some(l) => l.parse()?,
            None => GemmLayout::ROW,
        },
        call: num(g, "call")?,
        flop: num(g, "flop")?,
        a: num(g, "a")?,
        b: num(g, "b")?,
        c: num(g, "c")?,
        measured: true,
    })
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Loads a stored-profile stand-in with the default factors, for tests under Miri: its
/// isolation forbids reading `/proc/cpuinfo` for the provisional profile and the copy probe.
#[cfg(all(test, miri))]
pub(crate) fn set_miri_profile() {
    set_profile(
        Profile::from_json(
            r#"{"copy_gbps": [10.0], "transpose": {"rows": 0.9, "tile": 0.4,
                "tile_stream": 0.7, "scalar": 0.25, "overhead": 2e-6}}"#,
        )
        .unwrap(),
    );
}

/// CPU model and logical core count, as far as the OS tells.
pub fn machine_name() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model} ({cores} cores)")
}

/// Bytes of the largest data cache the OS reports for CPU 0 (Linux's
/// `/sys/devices/system/cpu/cpu0/cache/index*/size`, e.g. `"491520K"`), `None` where it
/// reports none.
///
/// ```
/// if let Some(b) = ttgt::model::last_level_cache_bytes() {
///     assert!(b >= 1024);
/// }
/// ```
pub fn last_level_cache_bytes() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|e| {
        let path = e.ok()?.path();
        let kind = std::fs::read_to_string(path.join("type")).ok()?;
        if kind.trim() == "Instruction" {
            return None;
        }
        parse_cache_size(&std::fs::read_to_string(path.join("size")).ok()?)
    })
    .max()
}

/// A sysfs cache size (`"32K"`, `"2048K"`, `"30M"`, or plain bytes) in bytes.
fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let n: usize = digits.parse().ok()?;
    let scale = match unit.trim() {
        "" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

fn current() -> &'static RwLock<Option<Profile>> {
    static P: OnceLock<RwLock<Option<Profile>>> = OnceLock::new();
    P.get_or_init(|| RwLock::new(None))
}

/// The profile the models use: the one set by [`set_profile`], else the stored one, else a
/// quick probe of copy bandwidth (about 0.1 s, once per process) with default factors.
pub fn profile() -> Profile {
    if let Some(p) = current().read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return p.clone();
    }
    let p =
        Profile::load().unwrap_or_else(|| Profile::builtin(super::calibrate::probe_copy(16 << 20)));
    crate::transpose::load_rules(p.line_tile_stream, p.scatter_regroup, p.far_row_prefetch);
    *current().write().unwrap_or_else(|p| p.into_inner()) = Some(p.clone());
    p
}

/// Bytes of operands and result (together) from which a contraction's plan waits for this
/// machine's profile when none is loaded: the stored one, else the copy-bandwidth probe
/// (once per process; its cost is in `docs/TUNING.md`). Smaller problems run from the caches,
/// where the DRAM copy rate does not decide their speed, and are planned with
/// [`provisional_profile`] instead, so that a program's first small contraction does not
/// pay for the probe.
pub const PROBE_MIN_BYTES: usize = 4 << 20;

/// Copy rate per thread (GB/s, read + written) of [`provisional_profile`].
const PROVISIONAL_GBPS_PER_THREAD: f64 = 20.0;

/// Threads past which [`provisional_profile`]'s copy rate stops growing.
const PROVISIONAL_MAX_THREADS: usize = 8;

/// The profile small problems are planned with while no profile is loaded and none is
/// stored: the built-in factors and a fixed copy rate of 20 GB/s a thread up to 8 threads
/// (not measured; the same in every process, so small problems get the same plans).
///
/// ```
/// let p = ttgt::model::provisional_profile();
/// assert_eq!(p.copy_gbps(1), 20.0);
/// assert_eq!(p.copy_gbps(2), 40.0);
/// assert!(!p.calibrated);
/// ```
pub fn provisional_profile() -> Profile {
    static P: OnceLock<Profile> = OnceLock::new();
    P.get_or_init(|| {
        let max = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(2, 64);
        Profile::builtin(
            (1..=max)
                .map(|t| PROVISIONAL_GBPS_PER_THREAD * t.min(PROVISIONAL_MAX_THREADS) as f64)
                .collect(),
        )
    })
    .clone()
}

/// The profile to plan a problem of `bytes` bytes (operands and result together) with: the
/// loaded one if there is one; below [`PROBE_MIN_BYTES`] the stored one (which is then
/// loaded) or else [`provisional_profile`], without probing; from it on, [`profile`].
///
/// ```
/// use ttgt::model::{profile_for, PROBE_MIN_BYTES};
/// let p = profile_for(1 << 10); // no probe for a kilobyte
/// assert!(p.copy_gbps(1) > 0.0);
/// assert!(profile_for(PROBE_MIN_BYTES).copy_gbps(1) > 0.0);
/// ```
pub fn profile_for(bytes: usize) -> Profile {
    if let Some(p) = current().read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return p.clone();
    }
    if bytes < PROBE_MIN_BYTES && none_stored() {
        return provisional_profile();
    }
    profile()
}

/// Whether no valid profile is stored, looked up once per process (as [`profile`] loads the
/// stored one once), so that small plans do not look for the file each time.
fn none_stored() -> bool {
    static NONE: OnceLock<bool> = OnceLock::new();
    *NONE.get_or_init(|| Profile::load().is_none())
}

/// Whether a problem of `bytes` bytes would be planned with [`provisional_profile`] now (no
/// profile loaded, none stored, below [`PROBE_MIN_BYTES`]).
pub fn is_provisional(bytes: usize) -> bool {
    bytes < PROBE_MIN_BYTES
        && current()
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
        && none_stored()
}

/// Loads the profile if no profile is loaded yet (which also sets its transposition store
/// rule); a read lock when one is.
pub(crate) fn ensure_loaded() {
    if current()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .is_none()
    {
        profile();
    }
}

/// Sets the transposition engine's host rules from `p`: the store kind of one-line-run
/// tiles, the nest of scattered-line tiles and the prefetch of far-apart rows.
fn apply_rules(p: &Profile) {
    crate::transpose::set_line_tile_streaming(p.line_tile_stream);
    crate::transpose::set_scatter_regroup(p.scatter_regroup);
    crate::transpose::set_far_row_prefetch(p.far_row_prefetch);
}

/// Makes `p` the profile of this process (e.g. right after calibrating), with its
/// transposition rules ([`crate::transpose::set_line_tile_streaming`],
/// [`crate::transpose::set_scatter_regroup`], [`crate::transpose::set_far_row_prefetch`]).
pub fn set_profile(p: Profile) {
    apply_rules(&p);
    *current().write().unwrap_or_else(|p| p.into_inner()) = Some(p);
    // new prices: plans cached under the old profile are made again
    crate::transpose::bump_rules_generation();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("491520K\n"), Some(480 << 20));
        assert_eq!(parse_cache_size("30M"), Some(30 << 20));
        assert_eq!(parse_cache_size("65536"), Some(65536));
        assert_eq!(parse_cache_size("12Q"), None);
        assert_eq!(parse_cache_size(""), None);
    }

    #[test]
    fn transposition_rules_survive_the_profile_file() {
        let mut p = Profile::builtin(vec![10.0, 20.0]);
        for rule in [Some(true), Some(false), None] {
            p.line_tile_stream = rule;
            p.scatter_regroup = rule.map(|r| !r);
            p.far_row_prefetch = rule;
            let q = Profile::from_json(&p.to_json()).unwrap();
            assert_eq!(q.line_tile_stream, rule);
            assert_eq!(q.scatter_regroup, rule.map(|r| !r));
            assert_eq!(q.far_row_prefetch, rule);
            assert_eq!(q, p);
        }
        // profiles stored before the rules existed read as "not measured"
        let mut old: Value = serde_json::from_str(&p.to_json()).unwrap();
        old.as_object_mut().unwrap().remove("line_tile_stream");
        old.as_object_mut().unwrap().remove("scatter_regroup");
        old.as_object_mut().unwrap().remove("far_row_prefetch");
        let r = Profile::from_json(&old.to_string()).unwrap();
        assert_eq!(r.line_tile_stream, None);
        assert_eq!(r.scatter_regroup, None);
        assert_eq!(r.far_row_prefetch, None);
    }
}

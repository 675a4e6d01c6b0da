//! TTLG's performance model: one linear regression per kernel over the features of the
//! paper's Table II, with default coefficients (`DEFAULTS`: the paper's for OD; a fit to
//! timed plans for OA, see `docs/TUNING.md`) scaled by the ratio of copy bandwidths, and a
//! least-squares fit for `ttgt calibrate --backend cuda`.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::error::{Error, Result};

use super::problem::GpuProblem;
use super::slice::{Slice, WS};
use super::{DeviceProps, Schema};

/// Copy bandwidth (bytes/s, read + write) of the GPU the paper's coefficients were fitted on
/// (Tesla K40c, ECC off; the paper's best transposes reach about 200 GB/s).
///
/// ```
/// assert_eq!(ttgt::backend::cuda::ttlg::REFERENCE_BANDWIDTH, 180e9);
/// ```
pub const REFERENCE_BANDWIDTH: f64 = 180e9;

/// Feature names per schema (the last one is the intercept).
const NAMES: [&[&str]; 4] = [
    &[
        "volume",
        "num_blocks",
        "input_slice",
        "output_slice",
        "cycles",
        "intercept",
    ],
    &[
        "volume",
        "num_threads",
        "total_slice",
        "input_stride",
        "output_stride",
        "special_instr",
        "cycles",
        "intercept",
    ],
    &["volume", "num_rows", "intercept"],
    &["volume", "num_blocks", "intercept"],
];

/// Indices of the OA features' contiguous input and output runs (kernel elements).
const OA_RUNS: [usize; 2] = [3, 4];

/// Default coefficients at the reference bandwidth. Orthogonal-Distinct: the paper's Table
/// II. Orthogonal-Arbitrary: a non-negative fit of these kernels (element-wise and 2x2
/// blocks) to timed plans with the launch intercept held at the other schemas' 4 us,
/// rescaled from the device's copy rate to the reference one (the paper's OA row ranked
/// this project's OA slices worse than chance; `docs/TUNING.md`, "GPU model defaults").
/// The two FVI-Match kernels, whose fits the paper omits: volume at the reference bandwidth
/// plus a per-row or per-brick cost. Seconds per unit; volume in 8-byte elements.
const DEFAULTS: [&[f64]; 4] = [
    &[1.278e-11, 5.001e-8, 7.835e-7, 1.252e-6, -2.692e-11, 4e-6],
    &[
        8.362e-11, 1.245e-10, 1.733e-8, 1.205e-7, 5.666e-8, 7.219e-11, 2.543e-11, 4e-6,
    ],
    &[8.0e-11, 2.0e-10, 4e-6],
    &[9.0e-11, 1.0e-8, 4e-6],
];

/// The features of one candidate launch.
///
/// ```
/// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, TtlgOptions, TtlgPlan};
/// use ttgt::{DType, Layout};
/// let a = Layout::row_major(&[256, 256]).unwrap();
/// let b = Layout::row_major(&[256, 256]).unwrap();
/// let plan = TtlgPlan::new(&[1, 0], &a, &b, DType::F32, false, &DeviceProps::nominal(),
///                          &TtlgOptions::default()).unwrap();
/// assert_eq!(plan.features.values.len(), GpuModel::feature_names(plan.schema).len());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Features {
    /// The kernel.
    pub schema: Schema,
    /// Values, in the order of [`GpuModel::feature_names`].
    pub values: Vec<f64>,
    /// Bytes read plus bytes written.
    pub bytes: f64,
}

/// Coefficients of the four per-kernel regressions for one device.
///
/// ```
/// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel};
/// let m = GpuModel::default_for(&DeviceProps::nominal());
/// let back = GpuModel::from_json(&m.to_json()).unwrap();
/// assert_eq!(back.device, m.device);
/// let c = (back.coefficients[0][0], m.coefficients[0][0]);
/// assert!((c.0 - c.1).abs() <= 1e-12 * c.1.abs());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GpuModel {
    /// Device name.
    pub device: String,
    /// Copy bandwidth (bytes/s) the coefficients assume; the floor of every prediction.
    pub copy_bandwidth: f64,
    /// Coefficients per schema, indexed by [`Schema::index`].
    pub coefficients: [Vec<f64>; 4],
    /// Whether the coefficients were measured (`ttgt calibrate --backend cuda`).
    pub calibrated: bool,
}

impl GpuModel {
    /// Feature names of a schema's regression.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// assert_eq!(GpuModel::feature_names(Schema::OrthogonalDistinct)[4], "cycles");
    /// ```
    pub fn feature_names(schema: Schema) -> &'static [&'static str] {
        NAMES[schema.index()]
    }

    /// The default coefficients (`DEFAULTS`) scaled by `REFERENCE_BANDWIDTH /
    /// props.copy_bandwidth` (the intercept, a launch overhead, is kept).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// let slow = GpuModel::default_for(&DeviceProps { copy_bandwidth: 180e9, ..DeviceProps::nominal() });
    /// assert_eq!(slow.coefficients[0][0], 1.278e-11);
    /// ```
    pub fn default_for(props: &DeviceProps) -> Self {
        let s = REFERENCE_BANDWIDTH / props.copy_bandwidth.max(1.0);
        let coefficients = std::array::from_fn(|k| {
            let c = DEFAULTS[k];
            c.iter()
                .enumerate()
                .map(|(i, &v)| if i + 1 == c.len() { v } else { v * s })
                .collect()
        });
        GpuModel {
            device: props.name.clone(),
            copy_bandwidth: props.copy_bandwidth,
            coefficients,
            calibrated: false,
        }
    }

    /// The stored calibrated model of `props.name`, else the default.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// let m = GpuModel::for_device(&DeviceProps::nominal());
    /// assert_eq!(m.device, "nominal");
    /// ```
    pub fn for_device(props: &DeviceProps) -> Self {
        GpuModel::load(&props.name).unwrap_or_else(|| GpuModel::default_for(props))
    }

    /// Predicted seconds: the regression, never below the time of a copy of the same bytes.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[512, 256]).unwrap(), ttgt::Layout::row_major(&[256, 512]).unwrap());
    /// let p = TtlgPlan::new(&[1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// let m = GpuModel::default_for(&DeviceProps::nominal());
    /// assert!(m.predict(&p.features) >= 2.0 * 512.0 * 256.0 * 4.0 / 900e9);
    /// ```
    pub fn predict(&self, f: &Features) -> f64 {
        let c = &self.coefficients[f.schema.index()];
        let lin: f64 = c.iter().zip(&f.values).map(|(a, b)| a * b).sum();
        lin.max(f.bytes / self.copy_bandwidth.max(1.0))
    }

    /// JSON text of the model.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// assert!(GpuModel::default_for(&DeviceProps::nominal()).to_json().contains("\"od\""));
    /// ```
    pub fn to_json(&self) -> String {
        let mut coef = serde_json::Map::new();
        for s in Schema::ALL {
            coef.insert(s.short_name().into(), json!(self.coefficients[s.index()]));
        }
        serde_json::to_string_pretty(&json!({
            "device": self.device,
            "copy_bandwidth": self.copy_bandwidth,
            "calibrated": self.calibrated,
            "coefficients": coef,
        }))
        .unwrap_or_default()
    }

    /// Parses [`GpuModel::to_json`]'s output.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// assert!(GpuModel::from_json("{}").is_err());
    /// ```
    pub fn from_json(text: &str) -> Result<Self> {
        let bad = |w: &str| Error::Unsupported(format!("GPU model file: {w}"));
        let v: Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
        let device = v["device"]
            .as_str()
            .ok_or_else(|| bad("no device"))?
            .to_string();
        let copy_bandwidth = v["copy_bandwidth"]
            .as_f64()
            .ok_or_else(|| bad("no copy_bandwidth"))?;
        let calibrated = v["calibrated"].as_bool().unwrap_or(false);
        let mut coefficients: [Vec<f64>; 4] = Default::default();
        for s in Schema::ALL {
            let arr = v["coefficients"][s.short_name()]
                .as_array()
                .ok_or_else(|| bad(&format!("no coefficients for {}", s.short_name())))?;
            let c: Option<Vec<f64>> = arr.iter().map(|x| x.as_f64()).collect();
            let c = c.ok_or_else(|| bad("non-numeric coefficient"))?;
            if c.len() != NAMES[s.index()].len() {
                return Err(bad(&format!(
                    "{} coefficients for {}",
                    c.len(),
                    s.short_name()
                )));
            }
            coefficients[s.index()] = c;
        }
        Ok(GpuModel {
            device,
            copy_bandwidth,
            coefficients,
            calibrated,
        })
    }

    /// Where the model of `device` is stored: `$TTGT_GPU_MODEL_DIR/<device>.json`, else
    /// `$XDG_CACHE_HOME/ttgt/gpu/<device>.json`, else `$HOME/.cache/ttgt/gpu/<device>.json`
    /// (the device name with characters other than letters, digits, `-` and `_` replaced).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// let p = GpuModel::path("NVIDIA H100 80GB HBM3");
    /// assert!(p.map_or(true, |p| p.ends_with("NVIDIA_H100_80GB_HBM3.json")));
    /// ```
    pub fn path(device: &str) -> Option<PathBuf> {
        let file: String = device
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let dir = if let Some(d) = std::env::var_os("TTGT_GPU_MODEL_DIR") {
            PathBuf::from(d)
        } else {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
                .join("ttgt")
                .join("gpu")
        };
        Some(dir.join(format!("{file}.json")))
    }

    /// Writes the model to [`GpuModel::path`].
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// std::env::set_var("TTGT_GPU_MODEL_DIR", std::env::temp_dir().join("ttgt-doc-gpu"));
    /// let mut m = GpuModel::default_for(&DeviceProps::nominal());
    /// m.device = "doc-test-gpu".into();
    /// let path = m.save().unwrap();
    /// assert!(path.exists());
    /// ```
    pub fn save(&self) -> Result<PathBuf> {
        let path = GpuModel::path(&self.device).ok_or_else(|| {
            Error::Unsupported("no cache directory (set TTGT_GPU_MODEL_DIR)".into())
        })?;
        let io = |e: std::io::Error| Error::Unsupported(format!("writing {}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        crate::files::write_bytes_atomic(&path, self.to_json().as_bytes()).map_err(io)?;
        Ok(path)
    }

    /// The stored model of `device`, if there is a valid one.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, GpuModel, Schema};
    /// assert!(GpuModel::load("no such device, surely").is_none());
    /// ```
    pub fn load(device: &str) -> Option<Self> {
        crate::files::load_stored(
            &GpuModel::path(device)?,
            "GPU model",
            "`ttgt calibrate --backend cuda` writes a new one",
            GpuModel::from_json,
        )
    }

    /// Fits the coefficients of `schema` to measured `(features, seconds)` samples, none of
    /// them negative ([`fit_nonnegative`]: every feature counts work that costs time).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, Features, GpuModel, Schema};
    /// let mut m = GpuModel::default_for(&DeviceProps::nominal());
    /// let s: Vec<(Features, f64)> = (1..20)
    ///     .map(|i| (Features { schema: Schema::FviMatchLarge, values: vec![i as f64 * 1e6, (i % 7) as f64, 1.0], bytes: 0.0 },
    ///               i as f64 * 1e-4 + 5e-6))
    ///     .collect();
    /// m.fit(Schema::FviMatchLarge, &s).unwrap();
    /// assert!((m.coefficients[2][0] - 1e-10).abs() < 1e-13 && m.calibrated);
    /// ```
    pub fn fit(&mut self, schema: Schema, samples: &[(Features, f64)]) -> Result<()> {
        let rows: Vec<Vec<f64>> = samples
            .iter()
            .filter(|(f, _)| f.schema == schema)
            .map(|(f, _)| f.values.clone())
            .collect();
        let y: Vec<f64> = samples
            .iter()
            .filter(|(f, _)| f.schema == schema)
            .map(|(_, t)| *t)
            .collect();
        self.coefficients[schema.index()] = fit_nonnegative(&rows, &y)?;
        self.calibrated = true;
        Ok(())
    }
}

/// Non-negative least squares `min |X c - y|` subject to `c >= 0` (Lawson and Hanson's
/// active-set method over [`fit_least_squares`] on the columns left free). A time model's
/// features each count work, so a negative coefficient is an artefact of collinear or
/// unevenly covered training data, and prices unseen slices wrongly (`docs/TUNING.md`).
///
/// ```
/// use ttgt::backend::cuda::ttlg::{fit_least_squares, fit_nonnegative};
/// // y depends on x0 only; x1 is nearly collinear with x0 and the noise pulls its
/// // unconstrained coefficient below zero.
/// let x: Vec<Vec<f64>> = (1..30).map(|i| vec![i as f64, i as f64 + (i % 3) as f64, 1.0]).collect();
/// let y: Vec<f64> = (1..30).map(|i| 2.0 * i as f64 + 1.0 - 0.3 * (i % 3) as f64).collect();
/// assert!(fit_least_squares(&x, &y).unwrap()[1] < 0.0);
/// let c = fit_nonnegative(&x, &y).unwrap();
/// assert!(c.iter().all(|&v| v >= 0.0), "{c:?}");
/// assert!((c[0] - 2.0).abs() < 0.1 && c[1] < 1e-9, "{c:?}");
/// ```
pub fn fit_nonnegative(x: &[Vec<f64>], y: &[f64]) -> Result<Vec<f64>> {
    let k = x.first().map_or(0, |r| r.len());
    // Validates the shapes (and fails the same way as the unconstrained fit).
    let free = fit_least_squares(x, y)?;
    if free.iter().all(|&v| v >= 0.0) {
        return Ok(free);
    }
    let scale: Vec<f64> = (0..k)
        .map(|j| {
            let s = x.iter().map(|r| r[j].abs()).fold(0.0, f64::max);
            if s > 0.0 && s.is_finite() {
                s
            } else {
                1.0
            }
        })
        .collect();
    let xs: Vec<Vec<f64>> = x
        .iter()
        .map(|r| r.iter().zip(&scale).map(|(v, s)| v / s).collect())
        .collect();
    let ynorm = y
        .iter()
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    // Least squares on the columns in `set` (the others held at zero).
    let sub = |set: &[usize]| -> Result<Vec<f64>> {
        let rows: Vec<Vec<f64>> = xs
            .iter()
            .map(|r| set.iter().map(|&j| r[j]).collect())
            .collect();
        let z = fit_least_squares(&rows, y)?;
        let mut full = vec![0.0; k];
        for (&j, v) in set.iter().zip(z) {
            full[j] = v;
        }
        Ok(full)
    };
    let mut c = vec![0.0; k];
    let mut passive: Vec<usize> = Vec::new();
    for _ in 0..3 * k + 3 {
        // Gradient of -|Xc - y|^2 / 2: X^T (y - X c).
        let resid: Vec<f64> = xs
            .iter()
            .zip(y)
            .map(|(r, t)| t - r.iter().zip(&c).map(|(a, b)| a * b).sum::<f64>())
            .collect();
        let grad = |j: usize| xs.iter().zip(&resid).map(|(r, e)| r[j] * e).sum::<f64>();
        let tol = 1e-12 * ynorm * (x.len() as f64).sqrt();
        let Some(j) = (0..k)
            .filter(|j| !passive.contains(j))
            .map(|j| (j, grad(j)))
            .filter(|&(_, g)| g > tol)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(j, _)| j)
        else {
            break;
        };
        passive.push(j);
        loop {
            let z = sub(&passive)?;
            if passive.iter().all(|&i| z[i] > 0.0) {
                c = z;
                break;
            }
            // Step from c towards z until the first passive coefficient reaches zero.
            let step = passive
                .iter()
                .filter(|&&i| z[i] <= 0.0)
                .map(|&i| c[i] / (c[i] - z[i]))
                .fold(1.0, f64::min);
            for (ci, zi) in c.iter_mut().zip(&z) {
                *ci += step * (zi - *ci);
            }
            passive.retain(|&i| c[i] > 1e-15);
            for (i, v) in c.iter_mut().enumerate() {
                if !passive.contains(&i) {
                    *v = 0.0;
                }
            }
            if passive.is_empty() {
                break;
            }
        }
    }
    Ok(c.iter().zip(&scale).map(|(v, s)| v / s).collect())
}

/// Least squares `min |X c - y|` by the normal equations on column-scaled data, with a tiny
/// ridge so that constant or collinear features (common in small training sets) do not
/// make the system singular.
///
/// ```
/// use ttgt::backend::cuda::ttlg::fit_least_squares;
/// let x: Vec<Vec<f64>> = (0..10).map(|i| vec![i as f64, 1.0]).collect();
/// let y: Vec<f64> = (0..10).map(|i| 3.0 * i as f64 + 2.0).collect();
/// let c = fit_least_squares(&x, &y).unwrap();
/// assert!((c[0] - 3.0).abs() < 1e-6 && (c[1] - 2.0).abs() < 1e-6);
/// ```
pub fn fit_least_squares(x: &[Vec<f64>], y: &[f64]) -> Result<Vec<f64>> {
    let k = x.first().map_or(0, |r| r.len());
    if x.is_empty() || x.len() != y.len() || x.iter().any(|r| r.len() != k) {
        return Err(Error::Unsupported(format!(
            "least squares: {} rows of features for {} measurements",
            x.len(),
            y.len()
        )));
    }
    let scale: Vec<f64> = (0..k)
        .map(|j| {
            let s = (x.iter().map(|r| r[j] * r[j]).sum::<f64>() / x.len() as f64).sqrt();
            if s > 0.0 && s.is_finite() {
                s
            } else {
                1.0
            }
        })
        .collect();
    // Augmented normal equations [XtX | Xty] on scaled columns.
    let mut m = vec![vec![0.0; k + 1]; k];
    for (r, &t) in x.iter().zip(y) {
        for i in 0..k {
            let xi = r[i] / scale[i];
            for j in 0..k {
                m[i][j] += xi * r[j] / scale[j];
            }
            m[i][k] += xi * t;
        }
    }
    for (i, row) in m.iter_mut().enumerate() {
        row[i] += 1e-10 * x.len() as f64;
    }
    for col in 0..k {
        let piv = (col..k)
            .max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))
            .unwrap_or(col);
        m.swap(col, piv);
        let p = m[col][col];
        if p.abs() < 1e-300 {
            return Err(Error::Unsupported("least squares: singular system".into()));
        }
        let pivot = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / p;
                if f != 0.0 {
                    for (x, y) in row[col..].iter_mut().zip(&pivot[col..]) {
                        *x -= f * y;
                    }
                }
            }
        }
    }
    Ok((0..k).map(|i| m[i][k] / m[i][i] / scale[i]).collect())
}

/// Length of the contiguous run at the start of a walk over `dims` (fastest first) with the
/// given extents and strides, in kernel elements. `unit`: the stride of one kernel element
/// along the fastest dim (2 for 2x2 blocks, whose strides count tensor elements and whose
/// rows are two elements long; 1 otherwise).
fn run_length(exts: &[usize], strides: &[isize], unit: isize) -> usize {
    let mut run = 1usize;
    for (&e, &s) in exts.iter().zip(strides) {
        if s != unit * run as isize {
            break;
        }
        run *= e;
        if e == 1 {
            break;
        }
    }
    run.max(1)
}

/// Stride, in tensor elements, of one kernel element along a fastest dim: 2 for 2x2 blocks
/// (their strides count tensor elements and their rows are two elements long), else 1.
fn run_unit(p: &GpuProblem) -> isize {
    if p.micro.is_some() {
        2
    } else {
        1
    }
}

/// Bytes of the shorter of an Orthogonal-Arbitrary candidate's two contiguous runs (input
/// and output side); `None` for the other schemas.
pub(crate) fn oa_min_run_bytes(p: &GpuProblem, f: &Features) -> Option<f64> {
    (f.schema == Schema::OrthogonalArbitrary).then(|| {
        let row = (p.elem_bytes() / run_unit(p) as usize) as f64;
        f.values[OA_RUNS[0]].min(f.values[OA_RUNS[1]]) * row
    })
}

/// Counts of slices by kind along one side: (full, partial, valid extent of a partial one).
fn side_kinds(inner: usize, n: usize, b: usize) -> (usize, usize, usize) {
    if b == 0 {
        return (1, 0, 0);
    }
    let rem = n % b;
    (n / b, usize::from(rem > 0), inner * rem)
}

/// OD cycles of one slice with `x` columns and `y` rows (the paper's f formula).
fn od_cycles(x: usize, y: usize) -> f64 {
    let (fx, rx) = (x / WS, x % WS);
    let (fy, ry) = (y / WS, y % WS);
    let n1 = fx * fy;
    let n2 = fx * usize::from(ry > 0);
    let n3 = usize::from(rx > 0) * fy;
    let n4 = usize::from(rx > 0 && ry > 0);
    (n1 * 2 * WS + n2 * (WS + ry) + n3 * (rx + WS) + n4 * (rx + ry)) as f64
}

/// Features of a candidate slice (`nblk` slices in all).
pub(crate) fn features(p: &GpuProblem, s: &Slice, nblk: usize) -> Features {
    let size = p.elem_bytes();
    let vol8 = (p.elements * size) as f64 / 8.0;
    let bytes = (2 * p.elements * size) as f64;
    let rest = |sa: (usize, usize, usize), sb: (usize, usize, usize)| {
        // Slices per combination of (full/partial A) x (full/partial B).
        let ab = (sa.0 + sa.1).max(1) * (sb.0 + sb.1).max(1);
        nblk / ab.max(1)
    };
    let values = match s.schema {
        Schema::OrthogonalDistinct | Schema::OrthogonalArbitrary => {
            let (va, vb) = (s.input.volume(p), s.output.volume(p).max(1));
            let ka = side_kinds(
                s.input.inner(p),
                s.input.blocked_extent(p),
                s.input.block_size(),
            );
            let kb = side_kinds(
                s.output.inner(p),
                s.output.blocked_extent(p),
                s.output.block_size(),
            );
            let r = rest(ka, kb) as f64;
            let kinds = [
                (ka.0 * kb.0, va, vb),
                (ka.0 * kb.1, va, kb.2),
                (ka.1 * kb.0, ka.2, vb),
                (ka.1 * kb.1, ka.2, kb.2),
            ];
            if s.schema == Schema::OrthogonalDistinct {
                let cycles: f64 = kinds
                    .iter()
                    .map(|&(c, x, y)| c as f64 * r * od_cycles(x, y))
                    .sum();
                vec![vol8, nblk as f64, va as f64, vb as f64, cycles, 1.0]
            } else {
                let unit = run_unit(p);
                let ea = s.input.extents(p);
                let sa: Vec<isize> = s.input.dims.iter().map(|&d| p.dims[d].sa).collect();
                let run_in = run_length(&ea, &sa, unit);
                let mut out_dims: Vec<(usize, usize)> = s
                    .input
                    .dims
                    .iter()
                    .copied()
                    .zip(ea.iter().copied())
                    .chain(s.output.dims.iter().copied().zip(s.output.extents(p)))
                    .collect();
                out_dims.sort_by_key(|&(d, _)| p.dims[d].sb.unsigned_abs());
                let eo: Vec<usize> = out_dims.iter().map(|&(_, e)| e).collect();
                let so: Vec<isize> = out_dims.iter().map(|&(d, _)| p.dims[d].sb).collect();
                let run_out = run_length(&eo, &so, unit);
                let total = (va * vb) as f64;
                let partial: f64 = kinds[1..]
                    .iter()
                    .map(|&(c, _, _)| c as f64 * r * total)
                    .sum();
                let tx = |run: usize| run.div_ceil(WS) as f64 * total / run as f64;
                let cycles = nblk as f64 * (tx(run_in) + tx(run_out));
                vec![
                    vol8,
                    (nblk * 256) as f64,
                    total,
                    run_in as f64,
                    run_out as f64,
                    partial,
                    cycles,
                    1.0,
                ]
            }
        }
        Schema::FviMatchLarge => vec![vol8, nblk as f64, 1.0],
        Schema::FviMatchSmall => vec![vol8, nblk as f64, 1.0],
    };
    Features {
        schema: s.schema,
        values,
        bytes,
    }
}

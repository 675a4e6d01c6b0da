//! Host-side planning of the TTLG transpose kernels (`kernels/ttlg_*.cu`): which schema
//! (TTLG's Algorithm 1), which slices and blocking (Algorithm 3, ranked by the performance
//! model), the offset arrays (Algorithm 4) and the launch (grid, block, shared memory, the
//! kernel's read-only meta table). None of this needs a GPU or cudarc: the plans are
//! executed by the device backend (feature `cuda`) or by the CPU emulator (feature
//! `cuda-emu`), from the same [`TtlgPlan`].
//!
//! ```
//! use ttgt::backend::cuda::ttlg::{DeviceProps, Schema, TtlgPlan, TtlgOptions};
//! use ttgt::{DType, Layout};
//! let a = Layout::row_major(&[64, 48, 40]).unwrap();
//! let b = Layout::row_major(&[40, 48, 64]).unwrap();
//! let plan = TtlgPlan::new(&[2, 1, 0], &a, &b, DType::F64, false,
//!                          &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
//! assert_eq!(plan.schema, Schema::OrthogonalDistinct);
//! assert!(plan.predicted_seconds > 0.0);
//! ```

mod model;
mod offsets;
mod plan;
mod problem;
mod slice;

pub use model::{fit_least_squares, fit_nonnegative, Features, GpuModel, REFERENCE_BANDWIDTH};
pub use plan::{blocked_first, TtlgOptions, TtlgPlan, MAX_OUTER_DIMS};
pub use problem::{GpuProblem, MicroBlock};
pub use slice::Slice;

use crate::tensor::DType;

/// TTLG's four transposition schemas.
///
/// ```
/// use ttgt::backend::cuda::ttlg::Schema;
/// assert_eq!(Schema::FviMatchSmall.short_name(), "fs");
/// assert_eq!("od".parse::<Schema>().unwrap(), Schema::OrthogonalDistinct);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Schema {
    /// Input and output slices share no dim: 32x33 shared tiles.
    OrthogonalDistinct,
    /// Slices overlap: whole slice in shared memory, per-element offset arrays.
    OrthogonalArbitrary,
    /// Shared fastest dim of at least 32 elements: direct coalesced copy.
    FviMatchLarge,
    /// Shared fastest dim below 32 elements: b x b x N0 shared bricks.
    FviMatchSmall,
}

impl Schema {
    /// All four, in a fixed order.
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::ttlg::Schema::ALL.len(), 4);
    /// ```
    pub const ALL: [Schema; 4] = [
        Schema::OrthogonalDistinct,
        Schema::OrthogonalArbitrary,
        Schema::FviMatchLarge,
        Schema::FviMatchSmall,
    ];

    /// The two-letter name used in kernel names (`od`, `oa`, `fl`, `fs`).
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::ttlg::Schema::OrthogonalArbitrary.short_name(), "oa");
    /// ```
    pub fn short_name(self) -> &'static str {
        match self {
            Schema::OrthogonalDistinct => "od",
            Schema::OrthogonalArbitrary => "oa",
            Schema::FviMatchLarge => "fl",
            Schema::FviMatchSmall => "fs",
        }
    }

    /// Index in [`Schema::ALL`].
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::Schema;
    /// assert!(Schema::ALL.iter().enumerate().all(|(i, s)| s.index() == i));
    /// ```
    pub fn index(self) -> usize {
        match self {
            Schema::OrthogonalDistinct => 0,
            Schema::OrthogonalArbitrary => 1,
            Schema::FviMatchLarge => 2,
            Schema::FviMatchSmall => 3,
        }
    }
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Schema::OrthogonalDistinct => "orthogonal-distinct",
            Schema::OrthogonalArbitrary => "orthogonal-arbitrary",
            Schema::FviMatchLarge => "fvi-match-large",
            Schema::FviMatchSmall => "fvi-match-small",
        })
    }
}

impl std::str::FromStr for Schema {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "od" | "orthogonal-distinct" => Ok(Schema::OrthogonalDistinct),
            "oa" | "orthogonal-arbitrary" => Ok(Schema::OrthogonalArbitrary),
            "fl" | "fvi-match-large" => Ok(Schema::FviMatchLarge),
            "fs" | "fvi-match-small" => Ok(Schema::FviMatchSmall),
            other => Err(format!(
                "unknown schema {other:?} (expected od, oa, fl or fs)"
            )),
        }
    }
}

/// Which element types move in 2x2 blocks where their layouts allow
/// ([`GpuProblem::micro_blocked`], [`TtlgOptions::micro_blocks`]).
///
/// ```
/// use ttgt::backend::cuda::ttlg::MicroBlocks;
/// assert_eq!(MicroBlocks::default(), MicroBlocks::All);
/// assert!(MicroBlocks::All.applies(ttgt::DType::F64) && !MicroBlocks::F32.applies(ttgt::DType::F64));
/// assert!(!MicroBlocks::All.applies(ttgt::DType::C32));
/// assert_eq!("off".parse::<MicroBlocks>().unwrap(), MicroBlocks::Off);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MicroBlocks {
    /// Never: one element per access.
    Off,
    /// f32 only: 8-byte rows and columns, the accesses of an f64 transposition.
    F32,
    /// f32 and f64 (the default; 16-byte rows and columns for f64, which gain too; see
    /// `docs/TUNING.md`).
    #[default]
    All,
}

impl MicroBlocks {
    /// Whether tensors of `dtype` move in 2x2 blocks under this setting.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::MicroBlocks;
    /// assert!(MicroBlocks::F32.applies(ttgt::DType::F32) && !MicroBlocks::Off.applies(ttgt::DType::F32));
    /// ```
    pub fn applies(self, dtype: DType) -> bool {
        match self {
            MicroBlocks::Off => false,
            MicroBlocks::F32 => dtype == DType::F32,
            MicroBlocks::All => matches!(dtype, DType::F32 | DType::F64),
        }
    }
}

impl std::str::FromStr for MicroBlocks {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "off" => Ok(MicroBlocks::Off),
            "f32" => Ok(MicroBlocks::F32),
            "all" => Ok(MicroBlocks::All),
            other => Err(format!(
                "unknown micro-block setting {other:?} (expected off, f32 or all)"
            )),
        }
    }
}

/// How a device chooses among the candidate plans of a transposition.
///
/// ```
/// use ttgt::backend::cuda::ttlg::GpuTuning;
/// assert_eq!(GpuTuning::default(), GpuTuning::Estimate);
/// let t = GpuTuning::Measure { budget: std::time::Duration::from_millis(20) };
/// assert_ne!(t, GpuTuning::Estimate);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuTuning {
    /// The model's choice alone (planning in tens of microseconds).
    #[default]
    Estimate,
    /// Time the model's best candidates (at most [`MEASURE_CANDIDATES`], at least two when
    /// there are two) on the device, on scratch buffers of the tensors' size, until `budget`
    /// is spent, and keep the fastest (cuTT's measured planning). Planned once per layout:
    /// the plan cache keeps the winner. The scratch buffers come from, and go back to, the
    /// device's workspace cache (so they stay allocated for later workspaces). Falls back to
    /// the model's choice when they cannot be allocated or a layout has negative offsets.
    /// Contractions likewise time the contraction planner's shortlist
    /// ([`contract::shortlist`](super::contract::shortlist)) into a scratch C and keep the
    /// fastest plan.
    Measure {
        /// Most time to spend timing candidates of one plan.
        budget: std::time::Duration,
    },
}

/// Most candidates measured tuning times ([`GpuTuning::Measure`]).
pub const MEASURE_CANDIDATES: usize = 6;

/// What the planner needs to know about the device.
///
/// ```
/// let p = ttgt::backend::cuda::ttlg::DeviceProps::nominal();
/// assert_eq!(p.max_shared_bytes, 48 * 1024);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceProps {
    /// Device name (the key of calibrated models and of the plan cache).
    pub name: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Shared memory a block may use without opting in (bytes).
    pub max_shared_bytes: usize,
    /// Largest grid the planner launches (the kernels loop over the remaining slices).
    pub max_grid: u32,
    /// Device-to-device copy bandwidth in bytes/s (read + write counted), measured or nominal.
    pub copy_bandwidth: f64,
}

impl DeviceProps {
    /// A mid-size modern GPU (80 SMs, 900 GB/s copies); used when nothing is measured.
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::ttlg::DeviceProps::nominal().sm_count, 80);
    /// ```
    pub fn nominal() -> Self {
        DeviceProps {
            name: "nominal".into(),
            sm_count: 80,
            max_shared_bytes: 48 * 1024,
            max_grid: 80 * 32,
            copy_bandwidth: 900e9,
        }
    }

    /// The CPU emulator: a small grid cap so that the kernels' slice loops are exercised and
    /// emulated launches stay cheap.
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::ttlg::DeviceProps::emulator().max_grid, 3);
    /// ```
    pub fn emulator() -> Self {
        DeviceProps {
            name: "cpu-emulator".into(),
            sm_count: 1,
            max_shared_bytes: 48 * 1024,
            max_grid: 3,
            copy_bandwidth: 900e9,
        }
    }
}

/// The largest power of two, at most 16, dividing every address in `addrs`: the
/// [`TtlgOptions::align`] of data at those addresses.
///
/// ```
/// use ttgt::backend::cuda::ttlg::address_align;
/// assert_eq!(address_align(&[0x1000, 0x2008]), 8);
/// assert_eq!(address_align(&[0x1004]), 4);
/// assert_eq!(address_align(&[]), 16);
/// ```
pub fn address_align(addrs: &[usize]) -> usize {
    let mut align = 16usize;
    for &a in addrs {
        while align > 1 && !a.is_multiple_of(align) {
            align /= 2;
        }
    }
    align
}

/// Kernel element type for a byte width (plain copies of widened elements).
pub(crate) fn dtype_of_width(bytes: usize) -> Option<DType> {
    match bytes {
        4 => Some(DType::F32),
        8 => Some(DType::F64),
        16 => Some(DType::C64),
        _ => None,
    }
}

/// Predicted seconds of `B = alpha * perm(A) + beta * B` on a device with `props`, without
/// data (the GPU counterpart of `ttgt::model::transpose_seconds`): the model's prediction
/// for the launch the planner would choose.
///
/// ```
/// use ttgt::backend::cuda::ttlg::{transpose_seconds, DeviceProps};
/// use ttgt::{DType, Layout};
/// let a = Layout::row_major(&[64, 48, 32]).unwrap();
/// let b = Layout::row_major(&[32, 64, 48]).unwrap();
/// let t = transpose_seconds(&[2, 0, 1], &a, &b, DType::F32, false, &DeviceProps::nominal()).unwrap();
/// assert!(t > 0.0);
/// ```
pub fn transpose_seconds(
    perm: &[usize],
    a: &crate::Layout,
    b: &crate::Layout,
    dtype: DType,
    beta_nonzero: bool,
    props: &DeviceProps,
) -> crate::Result<f64> {
    let plan = TtlgPlan::new(
        perm,
        a,
        b,
        dtype,
        !beta_nonzero,
        props,
        &TtlgOptions::default(),
    )?;
    Ok(plan.predicted_seconds)
}

//! [`TtlgPlan`]: everything one kernel launch needs, chosen by the model.

use crate::error::{Error, Result};
use crate::tensor::{DType, Layout};

use super::model::{features, oa_min_run_bytes, Features, GpuModel};
use super::offsets::{build_meta, outer_dims, OuterDim};
use super::problem::GpuProblem;
use super::slice::{
    fl_candidates, fl_group_rows, fs_candidates, fs_shared_elems, oa_candidates, oa_shared_elems,
    od_candidates, Slice, WS,
};
use super::{DeviceProps, MicroBlocks, Schema};

/// Most outer (slice-selecting) dims a kernel handles, including the two blocked-dim slots.
///
/// ```
/// assert_eq!(ttgt::backend::cuda::ttlg::MAX_OUTER_DIMS, 8);
/// ```
pub const MAX_OUTER_DIMS: usize = 8;

/// Rank buckets the kernels are compiled for.
const RANKS: [usize; 3] = [2, 4, 8];

/// Threads per block of every kernel.
const THREADS: u32 = 256;

/// Bytes of a memory sector, the unit a GPU moves DRAM in: an Orthogonal-Arbitrary slice
/// whose contiguous run on either side is shorter ranks after every slice whose runs fill
/// sectors (measurement in `docs/TUNING.md`, "GPU model defaults").
const SECTOR_BYTES: f64 = 32.0;

/// A ranked candidate: prediction, slice, outer dims, features.
type Scored = (f64, Slice, Vec<OuterDim>, Features);

/// Planning options.
///
/// ```
/// use ttgt::backend::cuda::ttlg::{Schema, TtlgOptions};
/// let o = TtlgOptions { schema: Some(Schema::OrthogonalArbitrary), ..TtlgOptions::default() };
/// assert_eq!(o.align, 16);
/// ```
#[derive(Clone, Debug)]
pub struct TtlgOptions {
    /// Force a schema (an error when it does not apply); `None`: TTLG's Alg. 1 and the model.
    pub schema: Option<Schema>,
    /// The model ranking candidates; `None`: [`GpuModel::for_device`].
    pub model: Option<GpuModel>,
    /// Largest power of two (bytes, at most 16) dividing both data addresses; executors set
    /// it from the actual pointers. Widening needs it.
    pub align: usize,
    /// Use 64-bit index arithmetic even when 32 bits would do (tests of the i64 kernels).
    pub force_index64: bool,
    /// Which types move in 2x2 blocks where their fastest dims differ and the layouts allow
    /// it ([`GpuProblem::micro_blocked`]; default f32 and f64; for comparisons: `ttgt bench
    /// transpose --backend cuda --micro-blocks off|f32|all`).
    pub micro_blocks: MicroBlocks,
    /// Run Orthogonal-Distinct with the asynchronous-copy kernels (`ttgt_oda_*`: cp.async,
    /// GPUs of compute capability 8.0 and later; elements of at most 16 bytes) instead of
    /// the register-staged ones (2x2 blocks of f64, 32 bytes, keep the register-staged
    /// kernels: `cp.async` copies at most 16 bytes). Off by default: they were slower than
    /// the register-staged 2x2-block kernels (see `docs/TUNING.md`).
    pub async_copies: bool,
}

impl Default for TtlgOptions {
    fn default() -> Self {
        TtlgOptions {
            schema: None,
            model: None,
            align: 16,
            force_index64: false,
            micro_blocks: MicroBlocks::default(),
            async_copies: false,
        }
    }
}

/// A planned GPU transposition `B = alpha * perm(A) + beta * B`: the kernel, its launch
/// configuration and its meta table. Made from layouts, a dtype and the device properties;
/// executable any number of times (by the device backend or the emulator).
///
/// ```
/// use ttgt::backend::cuda::ttlg::{DeviceProps, Schema, TtlgOptions, TtlgPlan};
/// use ttgt::{DType, Layout};
/// let a = Layout::row_major(&[40, 3, 64]).unwrap();
/// let b = Layout::row_major(&[3, 40, 64]).unwrap();
/// let p = TtlgPlan::new(&[1, 0, 2], &a, &b, DType::F64, false, &DeviceProps::nominal(),
///                       &TtlgOptions::default()).unwrap();
/// assert_eq!(p.schema, Schema::FviMatchLarge);
/// assert!(p.kernel.starts_with("ttgt_fl_f64_i32_r"));
/// ```
#[derive(Clone, Debug)]
pub struct TtlgPlan {
    /// The schema.
    pub schema: Schema,
    /// The slice moved by a thread block.
    pub slice: Slice,
    /// The normalized problem.
    pub problem: GpuProblem,
    /// Element type of the tensors.
    pub dtype: DType,
    /// Kernel name (`ttgt_<schema>_<type>_<index>_r<rank>`, type `q32` for 2x2 blocks of
    /// f32), as in the PTX.
    pub kernel: String,
    /// 64-bit index arithmetic (else 32-bit).
    pub index64: bool,
    /// Outer rank the kernel is compiled for.
    pub outer_rank: usize,
    /// Grid (blocks).
    pub grid: [u32; 3],
    /// Block (threads).
    pub block: [u32; 3],
    /// Dynamic shared memory (bytes).
    pub shared_bytes: usize,
    /// The meta table (written to the device as `i32` or `i64`, see [`TtlgPlan::meta_bytes`]).
    pub meta: Vec<i64>,
    /// Slices (or rows) the grid loops over.
    pub num_slices: usize,
    /// Model features of the launch.
    pub features: Features,
    /// Model prediction (seconds).
    pub predicted_seconds: f64,
    /// Planned for a plain copy (alpha = 1, beta = 0) only: needed when widened.
    pub plain: bool,
}

/// Schemas to rank (TTLG Alg. 1; the model decides between FVI-Match-Small and
/// Orthogonal-Arbitrary where the paper's flow chart leaves that choice).
fn schemas_for(p: &GpuProblem) -> Vec<Schema> {
    if p.fvi_match() {
        let n0 = p.dims[p.fvi_in()].n;
        if n0 >= WS {
            return vec![Schema::FviMatchLarge];
        }
        if p.dims.len() >= 3 && p.in_order[1] != p.out_order[1] {
            let n_i1 = p.dims[p.in_order[1]].n;
            let n_o1 = p.dims[p.out_order[1]].n;
            if n0 * n_i1 >= WS && n0 * n_o1 >= WS {
                return vec![Schema::FviMatchSmall];
            }
            return vec![Schema::FviMatchSmall, Schema::OrthogonalArbitrary];
        }
        return vec![Schema::FviMatchLarge, Schema::OrthogonalArbitrary];
    }
    // Alg. 1: the smallest input and output prefixes of at least WS elements.
    let grow = |order: &[usize]| {
        let mut vol = 1usize;
        let mut set = Vec::new();
        for &d in order {
            if vol >= WS {
                break;
            }
            vol = vol.saturating_mul(p.dims[d].n);
            set.push(d);
        }
        set
    };
    let (i, o) = (grow(&p.in_order), grow(&p.out_order));
    // Disjoint: Orthogonal-Distinct (Orthogonal-Arbitrary only as a fallback when no
    // distinct slice fits the outer-rank limit).
    if i.iter().any(|d| o.contains(d)) {
        vec![Schema::OrthogonalArbitrary]
    } else {
        vec![Schema::OrthogonalDistinct]
    }
}

/// Whether the 2x2-block form of a transposition is ranked before the element-wise form
/// ([`TtlgPlan::ranked`]); `same_schema`: Alg. 1 gives both forms the same schemas.
///
/// Where halving the fastest dims tips f32 from Orthogonal-Distinct to Orthogonal-Arbitrary,
/// measured tuning chose the blocked plan every time; f64 went both ways (its blocked OA
/// kernels spill registers), so f64 keeps the schema rule (`docs/TUNING.md`, `blocked_first`).
///
/// ```
/// use ttgt::backend::cuda::ttlg::blocked_first;
/// assert!(blocked_first(ttgt::DType::F32, false) && blocked_first(ttgt::DType::F64, true));
/// assert!(!blocked_first(ttgt::DType::F64, false));
/// ```
pub fn blocked_first(dtype: DType, same_schema: bool) -> bool {
    same_schema || dtype == DType::F32
}

fn candidates(p: &GpuProblem, schema: Schema, props: &DeviceProps) -> Vec<Slice> {
    match schema {
        Schema::OrthogonalDistinct => od_candidates(p),
        Schema::OrthogonalArbitrary => oa_candidates(p, props.max_shared_bytes),
        Schema::FviMatchLarge => fl_candidates(p),
        Schema::FviMatchSmall => fs_candidates(p, props.max_shared_bytes),
    }
}

fn num_slices(outer: &[OuterDim]) -> usize {
    outer.iter().map(|o| o.n).product()
}

impl TtlgPlan {
    /// Plans `B = perm(A)` (numpy meaning of `perm`) for elements of `dtype` on a device
    /// with `props`. `plain`: the plan will only run with alpha = 1 and beta = 0 (allows
    /// widening the element, OneFlow's movement size).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[40, 50]).unwrap(), ttgt::Layout::row_major(&[50, 40]).unwrap());
    /// let p = TtlgPlan::new(&[1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// assert!(p.outer_rank <= 8);
    /// ```
    pub fn new(
        perm: &[usize],
        a: &Layout,
        b: &Layout,
        dtype: DType,
        plain: bool,
        props: &DeviceProps,
        opts: &TtlgOptions,
    ) -> Result<Self> {
        let mut best = Self::ranked(perm, a, b, dtype, plain, props, opts, 1)?;
        best.pop()
            .ok_or_else(|| Error::Gpu("the GPU planner ranked no candidate".into()))
    }

    /// The `k` best candidates (at least one); the first is [`TtlgPlan::new`]'s plan. For
    /// measured tuning: the device times these and keeps the fastest (TTLG's model ranks; a
    /// measurement settles what it cannot tell apart).
    ///
    /// Where a transposition can move in 2x2 blocks ([`GpuProblem::micro_blocked`])
    /// there are two forms of the problem. The blocked form is preferred for f32 always,
    /// and for f64 when TTLG's Alg. 1 gives it the schema of the element-wise form (halved
    /// fastest dims can tip it from OD to OA, and the paper's model, fitted on one element
    /// width, cannot weigh element widths): see [`blocked_first`]. Each form's candidates
    /// are ranked by the model; the list holds the preferred form's best first and then
    /// alternates, giving the other form up to a third of the places (at least one when
    /// `k >= 2`), so that measured tuning also times the other form.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let a = ttgt::Layout::row_major(&[48, 28, 28, 28, 48]).unwrap();
    /// let b = ttgt::Layout::row_major(&[48, 28, 28, 28, 48]).unwrap();
    /// let (props, o) = (DeviceProps::nominal(), TtlgOptions::default());
    /// let top = TtlgPlan::ranked(&[4, 3, 2, 1, 0], &a, &b, ttgt::DType::F64, false, &props, &o, 4).unwrap();
    /// assert!(top.len() > 1 && top.len() <= 4);
    /// assert!(top.windows(2).all(|w| w[0].predicted_seconds <= w[1].predicted_seconds));
    /// // f32: the 2x2-block form first, the element-wise form second.
    /// let top = TtlgPlan::ranked(&[4, 3, 2, 1, 0], &a, &b, ttgt::DType::F32, false, &props, &o, 4).unwrap();
    /// assert!(top[0].problem.micro.is_some() && top[1].problem.micro.is_none());
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn ranked(
        perm: &[usize],
        a: &Layout,
        b: &Layout,
        dtype: DType,
        plain: bool,
        props: &DeviceProps,
        opts: &TtlgOptions,
        k: usize,
    ) -> Result<Vec<Self>> {
        let base = GpuProblem::new(perm, a, b, dtype, plain, opts.align)?;
        let model = opts
            .model
            .clone()
            .unwrap_or_else(|| GpuModel::for_device(props));
        let schemas_of = |p: &GpuProblem| match opts.schema {
            Some(s) => vec![s],
            None => schemas_for(p),
        };
        let micro = if opts.micro_blocks.applies(dtype) {
            Some(base.clone().micro_blocked(opts.align)).filter(|m| m.micro.is_some())
        } else {
            None
        };
        let (first, second) = match micro {
            Some(m) if blocked_first(dtype, schemas_of(&m) == schemas_of(&base)) => (m, Some(base)),
            Some(m) => (base, Some(m)),
            None => (base, None),
        };
        let mut lists = vec![Self::scored(
            &first,
            &schemas_of(&first),
            opts,
            props,
            &model,
        )];
        // The other form only matters when it gets places (k >= 2) or the preferred form has
        // no candidate (a forced schema that does not apply to it).
        if let Some(p) = second.as_ref().filter(|_| k >= 2 || lists[0].is_empty()) {
            lists.push(Self::scored(p, &schemas_of(p), opts, props, &model));
        }
        let mut problems = vec![first];
        problems.extend(second.filter(|_| lists.len() == 2));
        if lists[0].is_empty() && lists.len() == 2 {
            lists.swap(0, 1);
            problems.swap(0, 1);
        }
        if lists[0].is_empty() {
            return Err(Error::Unsupported(match opts.schema {
                Some(s) => format!(
                    "the {s} schema does not apply to transpose {perm:?} of {:?} \
                     (fused dims {:?})",
                    a.dims(),
                    problems[0].dims.iter().map(|d| d.n).collect::<Vec<_>>()
                ),
                None => format!(
                    "GPU transpose {perm:?} of {:?}: more than {MAX_OUTER_DIMS} dims remain \
                     after fusion",
                    a.dims()
                ),
            }));
        }
        // The other form's share, then the preferred form's, alternated from the preferred.
        let k = k.max(1);
        lists.resize_with(2, Vec::new);
        let n1 = lists[1].len().min(if k >= 2 { (k / 3).max(1) } else { 0 });
        let n0 = lists[0].len().min(k - n1);
        let mut second_list = lists.pop().unwrap_or_default().into_iter().take(n1);
        let mut first_list = lists.pop().unwrap_or_default().into_iter().take(n0);
        let mut picked: Vec<(usize, Scored)> = Vec::with_capacity(n0 + n1);
        loop {
            let (x, y) = (first_list.next(), second_list.next());
            if x.is_none() && y.is_none() {
                break;
            }
            picked.extend(x.map(|x| (0, x)));
            picked.extend(y.map(|y| (1, y)));
        }
        picked
            .into_iter()
            .map(|(w, (t, slice, outer, f))| {
                Self::build(
                    problems[w].clone(),
                    dtype,
                    plain,
                    props,
                    opts,
                    t,
                    slice,
                    outer,
                    f,
                )
            })
            .collect()
    }

    /// The candidates of `problem` under `schemas`, model-ranked (fastest first; stable, so
    /// among equal predictions the first enumerated wins). Orthogonal-Arbitrary is the
    /// fallback when no slice of Alg. 1's schema fits the outer-rank limit.
    fn scored(
        problem: &GpuProblem,
        schemas: &[Schema],
        opts: &TtlgOptions,
        props: &DeviceProps,
        model: &GpuModel,
    ) -> Vec<Scored> {
        let mut all: Vec<Scored> = Vec::new();
        let rank = |schema: Schema, all: &mut Vec<Scored>| {
            for s in candidates(problem, schema, props) {
                let outer = outer_dims(problem, &s);
                if outer.len() > MAX_OUTER_DIMS {
                    continue;
                }
                let f = features(problem, &s, num_slices(&outer));
                let t = model.predict(&f);
                all.push((t, s, outer, f));
            }
        };
        for &schema in schemas {
            rank(schema, &mut all);
        }
        if all.is_empty()
            && opts.schema.is_none()
            && !schemas.contains(&Schema::OrthogonalArbitrary)
        {
            rank(Schema::OrthogonalArbitrary, &mut all);
        }
        // Runs shorter than a sector waste most of each access, which the linear model
        // (fitted where such slices are rare) does not price: those slices rank last.
        let short = |f: &Features| oa_min_run_bytes(problem, f).is_some_and(|b| b < SECTOR_BYTES);
        all.sort_by(|x, y| {
            short(&x.3)
                .cmp(&short(&y.3))
                .then_with(|| x.0.total_cmp(&y.0))
        });
        all
    }

    /// The plan of one ranked candidate: meta table, kernel, launch configuration.
    #[allow(clippy::too_many_arguments)]
    fn build(
        problem: GpuProblem,
        dtype: DType,
        plain: bool,
        props: &DeviceProps,
        opts: &TtlgOptions,
        predicted_seconds: f64,
        slice: Slice,
        outer: Vec<OuterDim>,
        features: Features,
    ) -> Result<Self> {
        let outer_rank = RANKS
            .iter()
            .copied()
            .find(|&r| r >= outer.len())
            .unwrap_or(MAX_OUTER_DIMS);
        let meta = build_meta(&problem, &slice, &outer, outer_rank);
        let nslices = num_slices(&outer);
        let schema = slice.schema;
        let size = problem.elem_bytes();
        let (block, shared_bytes, grid_units) = match schema {
            Schema::OrthogonalDistinct => ([WS as u32, THREADS / WS as u32, 1], 0, nslices),
            Schema::OrthogonalArbitrary => {
                let va = slice.input.volume(&problem);
                let elems = oa_shared_elems(va, slice.output.volume(&problem), size);
                ([THREADS, 1, 1], elems * size, nslices)
            }
            Schema::FviMatchLarge => {
                let n0 = problem.dims[problem.fvi_in()].n;
                let g = fl_group_rows(n0, slice.chunk, size);
                ([THREADS, 1, 1], 0, nslices.div_ceil(g))
            }
            Schema::FviMatchSmall => {
                let n0 = problem.dims[problem.fvi_in()].n;
                let elems = fs_shared_elems(n0, slice.input.block);
                ([THREADS, 1, 1], elems * size, nslices)
            }
        };
        let grid_x = grid_units.clamp(1, props.max_grid.max(1) as usize) as u32;
        let (span_a, span_b) = problem.spans();
        let bound = span_a
            .max(span_b)
            .max(nslices as u64 + (props.max_grid as u64) * 8)
            .max(meta.len() as u64)
            .max(problem.elements as u64);
        let index64 = opts.force_index64 || bound >= (1u64 << 31) - (1u64 << 24);
        let family = if schema == Schema::OrthogonalDistinct && opts.async_copies && size <= 16 {
            "oda"
        } else {
            schema.short_name()
        };
        let kernel = format!(
            "ttgt_{}_{}_{}_r{}",
            family,
            problem.kernel_type_name(),
            if index64 { "i64" } else { "i32" },
            outer_rank
        );
        Ok(TtlgPlan {
            schema,
            slice,
            dtype,
            kernel,
            index64,
            outer_rank,
            grid: [grid_x, 1, 1],
            block,
            shared_bytes,
            meta,
            num_slices: nslices,
            features,
            predicted_seconds,
            plain: plain && problem.widen > 1,
            problem,
        })
    }

    /// Bytes both data addresses must be a multiple of: the kernel element's size when
    /// widened, two elements for 2x2 blocks (their rows and columns), else the tensors'
    /// element size.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[64, 96]).unwrap(), ttgt::Layout::row_major(&[96, 64]).unwrap());
    /// let p = TtlgPlan::new(&[1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// assert_eq!(p.required_align(), 8); // 2x2 blocks
    /// ```
    pub fn required_align(&self) -> usize {
        if self.problem.micro.is_some() {
            2 * self.problem.kernel_dtype.size_bytes()
        } else {
            self.problem.kernel_dtype.size_bytes()
        }
    }

    /// Whether there is nothing to launch (an empty tensor).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[40, 50]).unwrap(), ttgt::Layout::row_major(&[50, 40]).unwrap());
    /// let p = TtlgPlan::new(&[1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// assert!(!p.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.problem.elements == 0
    }

    /// The meta table as the kernel reads it (little-endian `i32` or `i64`).
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[40, 50]).unwrap(), ttgt::Layout::row_major(&[50, 40]).unwrap());
    /// let p = TtlgPlan::new(&[1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// assert_eq!(p.meta_bytes().len(), 4 * p.meta.len());
    /// ```
    pub fn meta_bytes(&self) -> Vec<u8> {
        if self.index64 {
            self.meta.iter().flat_map(|v| v.to_le_bytes()).collect()
        } else {
            self.meta
                .iter()
                .flat_map(|&v| (v as i32).to_le_bytes())
                .collect()
        }
    }

    /// The kernel's `mode` argument for these scalars: 0 plain copy, 1 scaled, 2 with beta.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::TtlgPlan;
    /// assert_eq!((TtlgPlan::mode(true, true), TtlgPlan::mode(false, true), TtlgPlan::mode(true, false)), (0, 1, 2));
    /// ```
    pub fn mode(alpha_is_one: bool, beta_is_zero: bool) -> i32 {
        match (alpha_is_one, beta_is_zero) {
            (true, true) => 0,
            (_, true) => 1,
            _ => 2,
        }
    }

    /// One line: schema, slices, blocking, launch and prediction.
    ///
    /// ```
    /// use ttgt::backend::cuda::ttlg::{DeviceProps, TtlgOptions, TtlgPlan};
    /// let (a, b) = (ttgt::Layout::row_major(&[64, 96]).unwrap(), ttgt::Layout::row_major(&[96, 64]).unwrap());
    /// let p = TtlgPlan::new(&[1, 0], &a, &b, ttgt::DType::F32, false, &DeviceProps::nominal(), &TtlgOptions::default()).unwrap();
    /// assert!(p.describe().starts_with("orthogonal-distinct"));
    /// assert!(p.describe().contains("2x2 blocks"));
    /// ```
    pub fn describe(&self) -> String {
        let p = &self.problem;
        let side = |s: &super::slice::Side| {
            let e = s.extents(p);
            if e.is_empty() {
                "-".to_string()
            } else {
                e.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("x")
            }
        };
        format!(
            "{} ({}): fused dims {:?}, input slice {}, output slice {}, {} slices, grid {}x{}, block {}x{}, shared {} B, widen {}{}, predicted {:.3e} s",
            self.schema,
            self.kernel,
            p.dims.iter().map(|d| d.n).collect::<Vec<_>>(),
            side(&self.slice.input),
            side(&self.slice.output),
            self.num_slices,
            self.grid[0],
            self.grid[1],
            self.block[0],
            self.block[1],
            self.shared_bytes,
            p.widen,
            if p.micro.is_some() { ", 2x2 blocks" } else { "" },
            self.predicted_seconds
        )
    }
}

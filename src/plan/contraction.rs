//! [`ContractionPlan`]: a spec bound to operand layouts, its candidates priced by the cost
//! models, and the chosen one.

use super::cache::single_core_flops_above;
use super::candidate::{problem_bytes, Candidate, Problem, StepCosts};
use super::enumerate::{enumerate, Scope};
use super::groups::in_order_of;
use super::loops::{loops_alone, loops_candidate};
use super::options::{Epilogue, PlanOptions, PlanTuning};
use super::prepare::{prepare, OperandPrep};
use super::refine::{Pick, Refinement};
use super::storage::{f32_image, HalfStorage};
use crate::einsum::{parse, BoundSpec, Contraction, IndexKind, Label};
use crate::error::{Error, Result};
use crate::model::{gemm_coeffs, profile_for};
use crate::tensor::{DType, Layout};

/// A planned contraction `C = alpha * A·B + beta * C` (or `C = alpha * op(A) + beta * C`).
/// Planning never touches data; the plan can be executed any number of times on operands of
/// the layouts it was made for ([`ContractionPlan::execute`]).
///
/// ```
/// use ttgt::{ContractionPlan, DType, Layout};
/// let a = Layout::row_major(&[8, 9, 10]).unwrap();
/// let b = Layout::row_major(&[10, 11]).unwrap();
/// let c = Layout::row_major(&[8, 9, 11]).unwrap();
/// let plan = ContractionPlan::new("ijk,kl->ijl", &[a, b], &c, DType::F64).unwrap();
/// assert_eq!(plan.copies(), 0); // already a GEMM: no packing, GEMM writes into C
/// assert_eq!(plan.gemm_shape(), (1, 72, 11, 10));
/// ```
#[derive(Clone, Debug)]
pub struct ContractionPlan {
    pub(crate) bound: BoundSpec,
    pub(crate) contraction: Contraction,
    pub(crate) dtype: DType,
    pub(crate) inputs: Vec<Layout>,
    pub(crate) preps: Vec<OperandPrep>,
    pub(crate) c: Layout,
    pub(crate) options: PlanOptions,
    pub(crate) threads: usize,
    pub(crate) candidates: Vec<Candidate>,
    pub(crate) chosen: usize,
    pub(crate) excluded: usize,
    pub(crate) best_excluded: Option<Candidate>,
    pub(crate) measured: Vec<Option<f64>>,
    pub(crate) refine: Refinement,
    /// For `f16`/`bf16` operands: the caller's layouts and the conversions around the `f32`
    /// plan this is (whose `dtype`, `inputs` and `c` are the images').
    pub(crate) storage: Option<Box<HalfStorage>>,
    /// Whether every candidate was considered (not only a quick search's).
    pub(crate) searched_fully: bool,
}

/// Work whose best candidate of a quick search predicts below this keeps that search's
/// choice on its first calls. Rationale: a full search costs 100-300 µs, more than such a
/// call could gain from it before it has been repeated (`docs/TUNING.md`).
pub const QUICK_PLAN_BELOW_SECONDS: f64 = 2e-5;

impl ContractionPlan {
    /// Plans `spec` for operands of the given layouts (as passed, before `...` broadcasting)
    /// and an output of layout `c`, with default [`PlanOptions`].
    ///
    /// Errors: everything [`parse`](crate::einsum::parse) and
    /// [`bind`](crate::einsum::Spec::bind) report, an output whose extents differ from the
    /// spec's, an output layout that may address one element twice, and specs with more than
    /// two operands (use [`einsum`](crate::einsum()) for those).
    pub fn new(spec: &str, inputs: &[Layout], c: &Layout, dtype: DType) -> Result<Self> {
        Self::with_options(spec, inputs, c, dtype, &PlanOptions::default())
    }

    /// Plans with explicit options: threads, a workspace limit (candidates that need more are
    /// not considered; the error [`Error::Workspace`] when none fits), a forced GEMM library,
    /// an epilogue.
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout, plan::PlanOptions};
    /// let a = Layout::row_major(&[16, 12, 20]).unwrap();
    /// let b = Layout::row_major(&[20, 12, 14]).unwrap();
    /// let c = Layout::row_major(&[16, 14]).unwrap();
    /// let o = PlanOptions { workspace_limit: Some(0), ..Default::default() };
    /// let p = ContractionPlan::with_options("abc,cbd->ad", &[a, b], &c, DType::F64, &o).unwrap();
    /// assert_eq!(p.workspace_bytes(), 0); // no room for copies: a loop over GEMMs
    /// ```
    pub fn with_options(
        spec: &str,
        inputs: &[Layout],
        c: &Layout,
        dtype: DType,
        options: &PlanOptions,
    ) -> Result<Self> {
        Self::with_scope(spec, inputs, c, dtype, options, Scope::Full)
    }

    /// Plans with `scope` [`Scope::Quick`]: work whose best quick candidate predicts under
    /// [`QUICK_PLAN_BELOW_SECONDS`] keeps the quick search's candidates (the plan cache
    /// searches fully once such a plan is called again and again); other work, and plans
    /// tuned by measurement, are searched fully.
    pub(crate) fn with_scope(
        spec: &str,
        inputs: &[Layout],
        c: &Layout,
        dtype: DType,
        options: &PlanOptions,
        scope: Scope,
    ) -> Result<Self> {
        let parsed = parse(spec)?;
        let shapes: Vec<&[usize]> = inputs.iter().map(|l| l.dims()).collect();
        let bound = parsed.bind(&shapes)?;
        let contraction = bound.classify()?;
        let expected = bound.output_shape();
        if c.dims() != expected.as_slice() {
            return Err(Error::OutputShape {
                spec: spec.to_string(),
                expected,
                given: c.dims().to_vec(),
            });
        }
        if c.may_self_overlap() {
            return Err(Error::Overlap {
                what: "itself (two indices address one element)".into(),
            });
        }
        if options.epilogue == Epilogue::Relu && matches!(dtype, DType::C32 | DType::C64) {
            return Err(Error::Unsupported(format!(
                "the ReLU epilogue is defined for real element types, not {dtype}"
            )));
        }
        if options.threads == Some(0) {
            return Err(Error::Unsupported("threads must be at least 1".into()));
        }
        if dtype.is_half() {
            let images: Vec<Layout> = inputs.iter().map(f32_image).collect::<Result<_>>()?;
            // the images come out of the workspace limit first (a transposition has none)
            let image_bytes = HalfStorage::image_bytes(&images, c);
            let rest = options.workspace_limit.map(|l| l.checked_sub(image_bytes));
            let inner = match rest {
                Some(Some(l)) => PlanOptions {
                    workspace_limit: Some(l),
                    ..options.clone()
                },
                _ => options.clone(),
            };
            let mut plan =
                Self::with_scope(spec, &images, &f32_image(c)?, DType::F32, &inner, scope)?;
            if let (Some(None), Some(limit)) = (rest, options.workspace_limit) {
                if !plan.runs_unconverted() {
                    return Err(Error::Workspace {
                        needed: image_bytes,
                        limit,
                    });
                }
            }
            plan.options = options.clone();
            plan.storage = Some(Box::new(HalfStorage::new(dtype, inputs, c)));
            return Ok(plan);
        }
        let preps: Vec<OperandPrep> = inputs
            .iter()
            .enumerate()
            .map(|(k, l)| prepare(&bound, k, bound.effective_layout(k, l)))
            .collect::<Result<_>>()?;
        let threads = crate::threads::resolve(options.threads)?;
        let mut plan = ContractionPlan {
            dtype,
            inputs: inputs.to_vec(),
            c: c.clone(),
            options: options.clone(),
            threads,
            candidates: Vec::new(),
            chosen: 0,
            excluded: 0,
            best_excluded: None,
            measured: Vec::new(),
            refine: Refinement::default(),
            storage: None,
            searched_fully: true,
            preps,
            bound,
            contraction,
        };
        if plan.preps.len() == 2 {
            let kind = |kind: IndexKind| plan.contraction.labels_of(kind);
            let out = plan.bound.output().to_vec();
            let problem = Problem {
                bound: &plan.bound,
                preps: &plan.preps,
                c: &plan.c,
                batch: in_order_of(&kind(IndexKind::Batch), &out),
                m: in_order_of(&kind(IndexKind::FreeA), &out),
                n: in_order_of(&kind(IndexKind::FreeB), &out),
                k: in_order_of(&kind(IndexKind::Contracted), &plan.preps[0].kept),
                dtype,
            };
            let loops = loops_candidate(&problem, options);
            if let Some(c) = loops.as_ref().filter(|c| loops_alone(c, options)) {
                plan.measured = vec![None];
                plan.candidates = vec![c.clone()];
                return Ok(plan);
            }
            let quick = scope == Scope::Quick
                && options.tuning == PlanTuning::Estimate
                && plan.contraction.flops(dtype)
                    < QUICK_PLAN_BELOW_SECONDS * single_core_flops_above(dtype);
            let kept = if quick {
                let q = enumerate(&problem, options, loops.clone(), Scope::Quick)?;
                let small = q.candidates.first().map(|c| c.predicted.total());
                small
                    .is_some_and(|t| t < QUICK_PLAN_BELOW_SECONDS)
                    .then_some(q)
            } else {
                None
            };
            plan.searched_fully = kept.is_none();
            let e = match kept {
                Some(q) => q,
                None => enumerate(&problem, options, loops, Scope::Full)?,
            };
            if e.candidates.is_empty() {
                return Err(Error::Workspace {
                    needed: e.best_excluded.map_or(0, |c| c.workspace_bytes),
                    limit: options.workspace_limit.unwrap_or(usize::MAX),
                });
            }
            plan.measured = vec![None; e.candidates.len()];
            plan.candidates = e.candidates;
            plan.excluded = e.excluded;
            plan.best_excluded = e.best_excluded;
        }
        Ok(plan)
    }

    /// The bound spec.
    pub fn bound(&self) -> &BoundSpec {
        &self.bound
    }

    /// The classified contraction.
    pub fn contraction(&self) -> &Contraction {
        &self.contraction
    }

    /// Element type the plan was made for (the type its operands are stored in).
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout};
    /// let r = |d: &[usize]| Layout::row_major(d).unwrap();
    /// let p = ContractionPlan::new("ij,jk->ik", &[r(&[3, 4]), r(&[4, 5])], &r(&[3, 5]), DType::BF16).unwrap();
    /// assert_eq!((p.dtype(), p.compute_dtype()), (DType::BF16, DType::F32));
    /// ```
    pub fn dtype(&self) -> DType {
        self.storage.as_ref().map_or(self.dtype, |s| s.dtype)
    }

    /// Element type the plan computes and accumulates in: `f32` for `f16`/`bf16` operands
    /// (widened before the contraction, the result rounded once), the operands' type
    /// otherwise.
    pub fn compute_dtype(&self) -> DType {
        self.dtype
    }

    /// Predicted seconds of the conversions of a half-precision plan (0 for other types):
    /// widening the inputs to `f32` and rounding the result into C.
    pub fn conversion_seconds(&self) -> f64 {
        self.storage.as_ref().map_or(0.0, |s| s.seconds())
    }

    /// The options the plan was made with.
    pub fn options(&self) -> &PlanOptions {
        &self.options
    }

    /// Threads the plan runs on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether the plan considered every candidate: false for a small contraction planned
    /// by the plan cache on its first call, which searches only the groups' first orders
    /// (the cache plans it again, fully, once it is called repeatedly).
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout};
    /// let r = |d: &[usize]| Layout::row_major(d).unwrap();
    /// let p = ContractionPlan::new("ij,jk->ik", &[r(&[3, 4]), r(&[4, 5])], &r(&[3, 5]), DType::F64).unwrap();
    /// assert!(p.searched_fully());
    /// ```
    pub fn searched_fully(&self) -> bool {
        self.searched_fully
    }

    /// Every candidate that fits the workspace limit, best predicted first (empty for
    /// one-operand specs).
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout};
    /// let r = |d: &[usize]| Layout::row_major(d).unwrap();
    /// let p = ContractionPlan::new("abc,cbd->ad", &[r(&[8, 6, 10]), r(&[10, 6, 7])], &r(&[8, 7]), DType::F32).unwrap();
    /// assert!(p.candidates().len() > 2);
    /// assert!(p.candidates().windows(2).all(|w| w[0].predicted.total() <= w[1].predicted.total()));
    /// ```
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// The candidate executions use (`None` for one-operand specs): the model's choice, a
    /// forced or measured one, or the one refinement settled on.
    pub fn chosen(&self) -> Option<&Candidate> {
        self.candidates.get(self.chosen_index())
    }

    /// Index of the chosen candidate in [`ContractionPlan::candidates`].
    pub fn chosen_index(&self) -> usize {
        self.refine.settled().unwrap_or(self.chosen)
    }

    /// Lets the plan's executions refine its choice: the first ones also run the candidates
    /// predicted close to the choice, and the plan keeps the fastest measured (see
    /// `plan::refine`; the cached plans of `contract` and `einsum` do this unless
    /// [`set_refinement`](super::set_refinement)`(false)`). Results are the contraction's
    /// every time; only the last bits may differ between the first executions.
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout, tensor::{StridedView, StridedViewMut}};
    /// let a = ndarray::Array3::<f64>::ones((30, 20, 40));
    /// let b = ndarray::Array3::<f64>::ones((40, 20, 30));
    /// let mut c = ndarray::Array2::<f64>::zeros((30, 30));
    /// let mut plan = ContractionPlan::new("abc,cbd->ad", &[Layout::of(&a), Layout::of(&b)], &Layout::of(&c), DType::F64).unwrap();
    /// plan.refine_from_executions();
    /// for _ in 0..12 {
    ///     plan.execute(1.0, &[StridedView::of(&a), StridedView::of(&b)], 0.0,
    ///                  &mut StridedViewMut::of(&mut c).unwrap()).unwrap();
    ///     assert!(c.iter().all(|&x| x == 800.0));
    /// }
    /// assert!(!plan.refining());
    /// ```
    pub fn refine_from_executions(&mut self) {
        let predicted: Vec<f64> = self
            .candidates
            .iter()
            .map(|c| c.predicted.total())
            .collect();
        self.refine = Refinement::new(&predicted, self.chosen);
    }

    /// Whether executions may still try other candidates than the current choice.
    pub fn refining(&self) -> bool {
        self.refine.active()
    }

    /// The candidate the next execution runs.
    pub(crate) fn pick(&self) -> Pick {
        self.refine.pick(self.chosen)
    }

    /// Records a timed execution of candidate `index` (`None`: it failed).
    pub(crate) fn record(&self, index: usize, seconds: Option<f64>) {
        self.refine.record(index, seconds);
    }

    /// Makes candidate `index` the one executions use (to force a strategy, or to compare).
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout};
    /// let r = |d: &[usize]| Layout::row_major(d).unwrap();
    /// let mut p = ContractionPlan::new("abc,cbd->ad", &[r(&[8, 6, 10]), r(&[10, 6, 7])], &r(&[8, 7]), DType::F32).unwrap();
    /// let last = p.candidates().len() - 1;
    /// p.choose(last).unwrap();
    /// assert_eq!(p.chosen_index(), last);
    /// assert!(p.choose(last + 1).is_err());
    /// ```
    pub fn choose(&mut self, index: usize) -> Result<()> {
        if index >= self.candidates.len() {
            return Err(Error::Unsupported(format!(
                "candidate {index} does not exist (the plan has {})",
                self.candidates.len()
            )));
        }
        self.chosen = index;
        self.refine = Refinement::default();
        Ok(())
    }

    /// Predicted seconds of one execution of the chosen candidate (the one-sided sums and
    /// the transposition for one-operand specs are priced by the copy bandwidth).
    pub fn predicted_seconds(&self) -> f64 {
        self.conversion_seconds() + self.compute_seconds()
    }

    /// [`ContractionPlan::predicted_seconds`] without the conversions of a half-precision
    /// plan.
    fn compute_seconds(&self) -> f64 {
        match self.chosen() {
            Some(c) => c.predicted.total(),
            None => {
                let bytes =
                    (self.preps[0].layout.len() + 2 * self.c.len()) * self.dtype.size_bytes();
                bytes as f64 / (self.profile().copy_gbps(self.threads) * 1e9)
            }
        }
    }

    /// `(batch, m, n, k)` of the contraction as one batched GEMM (or of the copy, for one
    /// operand); the chosen candidate may split it further ([`Candidate::gemm_shape`]).
    pub fn gemm_shape(&self) -> (usize, usize, usize, usize) {
        self.contraction.gemm_shape()
    }

    /// Number of operands (input and output) copied into or out of a workspace.
    pub fn copies(&self) -> usize {
        let reduced = self.preps.iter().filter(|p| !p.summed.is_empty()).count();
        reduced + self.chosen().map_or(0, Candidate::copies)
    }

    /// Workspace the plan allocates, in bytes (with the f32 images of a half-precision
    /// plan's operands).
    pub fn workspace_bytes(&self) -> usize {
        let images = match &self.storage {
            Some(_) if !self.runs_unconverted() => HalfStorage::image_bytes(&self.inputs, &self.c),
            _ => 0,
        };
        images + self.compute_workspace_bytes()
    }

    /// Whether the plan moves its elements without a conversion: a transposition (one
    /// operand, no sum), which a half-precision plan runs on the 16-bit elements.
    pub(crate) fn runs_unconverted(&self) -> bool {
        self.candidates.is_empty() && self.preps.iter().all(|p| p.summed.is_empty())
    }

    /// [`ContractionPlan::workspace_bytes`] without a half-precision plan's images.
    fn compute_workspace_bytes(&self) -> usize {
        match self.chosen() {
            Some(c) => c.workspace_bytes,
            None => {
                let p = &self.preps[0];
                if p.summed.is_empty() {
                    0
                } else {
                    p.prepared.len() * self.dtype.size_bytes()
                }
            }
        }
    }

    /// Floating-point operations (TCCG convention, see [`Contraction::flops`]).
    pub fn flops(&self) -> f64 {
        self.contraction.flops(self.dtype)
    }

    /// Seconds measured for candidate `index` by [`ContractionPlan::measure`] or by refinement
    /// from executions (its best), if it was timed.
    pub fn measured_seconds(&self, index: usize) -> Option<f64> {
        self.measured
            .get(index)
            .copied()
            .flatten()
            .or_else(|| self.refine.measured(index))
    }

    /// Bytes of the operands (as the spec reads them) and the result together.
    pub(crate) fn problem_bytes(&self) -> usize {
        problem_bytes(&self.preps, &self.c, self.dtype)
    }

    /// The profile this plan's models read ([`crate::model::profile_for`] its size).
    fn profile(&self) -> crate::model::Profile {
        profile_for(self.problem_bytes())
    }

    /// Whether the GEMM model of the chosen library comes from a calibration of this machine.
    pub fn gemm_model_calibrated(&self) -> bool {
        self.chosen().is_none_or(|c| {
            gemm_coeffs(&self.profile(), c.library, self.dtype, c.gemm_threads).measured
        })
    }

    /// A printable report: the chosen candidate, each step with its predicted time, the
    /// runner-up candidates with their predictions (and measured times after
    /// [`ContractionPlan::measure`]).
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout};
    /// let a = Layout::row_major(&[4, 5, 6, 7]).unwrap();
    /// let b = Layout::row_major(&[7, 5, 8, 9]).unwrap();
    /// let c = Layout::row_major(&[4, 6, 8, 9]).unwrap();
    /// let p = ContractionPlan::new("abcd,dbef->acef", &[a, b], &c, DType::F64).unwrap();
    /// assert!(p.explain().contains("GEMM"));
    /// ```
    pub fn explain(&self) -> String {
        super::explain::explain(self, None)
    }

    /// [`ContractionPlan::explain`] with the measured time of each step of one execution.
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout, StepTimes};
    /// let r = |d: &[usize]| Layout::row_major(d).unwrap();
    /// let p = ContractionPlan::new("ij,jk->ik", &[r(&[3, 4]), r(&[4, 5])], &r(&[3, 5]), DType::F64).unwrap();
    /// let t = StepTimes { gemm: std::time::Duration::from_micros(5), ..Default::default() };
    /// assert!(p.explain_measured(&t).contains("measured"));
    /// ```
    pub fn explain_measured(&self, times: &super::StepTimes) -> String {
        super::explain::explain(self, Some(times))
    }

    /// Names of a label list, concatenated.
    pub(crate) fn names(ls: &[Label]) -> String {
        ls.iter().map(|l| l.to_string()).collect()
    }

    /// Predicted step costs of the chosen candidate (zeros for one-operand specs).
    pub fn predicted_steps(&self) -> StepCosts {
        self.chosen()
            .map_or_else(StepCosts::default, |c| c.predicted)
    }
}

//! Execution of a [`ContractionPlan`] on the CPU: diagonal views, one-sided sums, packing,
//! the batched GEMM loop and the write-back into C, each step timed.

use std::time::Instant;

use super::gemm_loops::{for_each_index, GemmRun, SendPtr, TiledRun};
use super::gett::{gett, Dim, KernelChoice, Problem as GettProblem};
use super::loops::run_nested;
use crate::einsum::Label;
use crate::error::{Error, Result};
use crate::plan::{
    axis_of, packed_layout, stride_of, ContractionPlan, Epilogue, OperandPrep, StepTimes,
};
use crate::tensor::{
    spans_overlap, take_aligned, zeroed, Element, StridedView, StridedViewMut, Workspace,
};
use crate::transpose::{accumulate, cached_plan, on_threads, TransposeOptions};

/// `[0, 1, ..., n-1]`.
fn identity(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// Applies the diagonal and the one-sided sum of `p` to `v`, reducing into `buf`.
fn prepare<'a, T: Element>(
    p: &OperandPrep,
    v: StridedView<'a, T>,
    ext: &dyn Fn(crate::einsum::Label) -> usize,
    buf: &'a mut Vec<T>,
) -> Result<StridedView<'a, T>> {
    let v = match &p.diagonal {
        Some(g) => v.diagonal(g)?,
        None => v,
    };
    if p.summed.is_empty() {
        return Ok(v);
    }
    *buf = zeroed(p.prepared.len(), "a reduced operand")?;
    let dst = packed_layout(&p.kept, &p.labels, ext)?;
    // `dst` addresses only `buf` (row-major over the kept labels, stride 0 on summed ones).
    accumulate(T::one(), &v, buf.as_mut_ptr(), &dst)?;
    let buf: &'a [T] = buf;
    StridedView::from_slice(buf, p.prepared.clone(), 0)
}

/// `b = alpha * perm(a) + beta * b` through a cached transposition plan on `threads` threads.
fn transpose_on<T: Element>(
    threads: usize,
    perm: &[usize],
    alpha: T,
    a: &StridedView<'_, T>,
    beta: T,
    b: &mut StridedViewMut<'_, T>,
) -> Result<()> {
    let opts = TransposeOptions {
        threads: Some(threads),
        ..Default::default()
    };
    cached_plan(perm, a.layout(), b.layout(), T::DTYPE, &opts)?.execute(alpha, a, beta, b)
}

/// Copies `v` (axes labelled `labels`) into a row-major buffer ordered by `order`.
fn pack<'a, T: Element>(
    threads: usize,
    v: &StridedView<'_, T>,
    labels: &[crate::einsum::Label],
    order: &[crate::einsum::Label],
    ext: &dyn Fn(crate::einsum::Label) -> usize,
    retain: bool,
    buf: &'a mut Workspace<T>,
) -> Result<StridedView<'a, T>> {
    let layout = packed_layout(order, labels, ext)?;
    // 64-byte aligned, so that the transposition can stream its stores; a reused buffer (the
    // transpose with beta = 0 writes every element of the packed layout before any read).
    let (data, off) = take_aligned(v.layout().len(), retain, "a packed operand")?;
    *buf = data;
    {
        let mut dst = StridedViewMut::from_slice(buf, layout.clone(), off)?;
        transpose_on(
            threads,
            &identity(v.layout().ndim()),
            T::one(),
            v,
            T::zero(),
            &mut dst,
        )?;
    }
    let buf: &'a [T] = buf;
    StridedView::from_slice(buf, layout, off)
}

impl ContractionPlan {
    /// Runs the plan: `C = epilogue(alpha * A·B + beta * C)` (one operand:
    /// `C = epilogue(alpha * op(A) + beta * C)`). The operands must have the layouts and
    /// element type the plan was made for. With `beta == 0`, C is never read.
    ///
    /// ```
    /// use ttgt::{ContractionPlan, DType, Layout, tensor::{StridedView, StridedViewMut}};
    /// let a = ndarray::Array2::<f64>::ones((3, 4));
    /// let b = ndarray::Array2::<f64>::ones((4, 5));
    /// let mut c = ndarray::Array2::<f64>::zeros((5, 3));
    /// let plan = ContractionPlan::new("ij,jk->ki", &[Layout::of(&a), Layout::of(&b)], &Layout::of(&c), DType::F64).unwrap();
    /// let times = plan.execute(1.0, &[StridedView::of(&a), StridedView::of(&b)], 0.0,
    ///                          &mut StridedViewMut::of(&mut c).unwrap()).unwrap();
    /// assert_eq!(c[[4, 2]], 4.0);
    /// assert!(times.total() >= times.gemm);
    /// ```
    pub fn execute<T: Element>(
        &self,
        alpha: T,
        inputs: &[StridedView<'_, T>],
        beta: T,
        c: &mut StridedViewMut<'_, T>,
    ) -> Result<StepTimes> {
        self.check_operands(inputs, c)?;
        let pick = self.pick();
        let run = match &self.storage {
            Some(_) => self.execute_half(pick.index, alpha, inputs, beta, c),
            None => self.execute_candidate(pick.index, alpha, inputs, beta, c),
        };
        if pick.timed {
            let secs = run.as_ref().ok().map(|t| t.total().as_secs_f64());
            self.record(pick.index, secs);
        }
        run
    }

    /// One execution with candidate `index` (the operands checked by the caller); the
    /// one-operand path when the plan has no candidates.
    pub(super) fn execute_candidate<T: Element>(
        &self,
        index: usize,
        alpha: T,
        inputs: &[StridedView<'_, T>],
        beta: T,
        c: &mut StridedViewMut<'_, T>,
    ) -> Result<StepTimes> {
        let bound = &self.bound;
        let ext = |l| bound.extent(l);
        let threads = self.threads;
        let mut times = StepTimes::default();
        let t0 = Instant::now();
        let mut sum_bufs: Vec<Vec<T>> = vec![Vec::new(); inputs.len()];
        let mut views = Vec::with_capacity(inputs.len());
        for ((k, v), buf) in inputs.iter().enumerate().zip(sum_bufs.iter_mut()) {
            let dims: smallvec::SmallVec<[usize; 8]> =
                bound.inputs()[k].iter().map(|&l| ext(l)).collect();
            views.push(prepare(&self.preps[k], v.broadcast(&dims)?, &ext, buf)?);
        }
        times.prepare = t0.elapsed();
        let out = bound.output();
        let epilogue = self.options.epilogue;

        let Some(cand) = self.candidates.get(index) else {
            let t = Instant::now();
            let kept = &self.preps[0].kept;
            let perm: Vec<usize> = out
                .iter()
                .map(|&l| axis_of(l, kept))
                .collect::<Result<_>>()?;
            transpose_on(threads, &perm, alpha, &views[0], beta, c)?;
            apply_epilogue(epilogue, c);
            times.write_c = t.elapsed();
            return Ok(times);
        };

        if let Some(nest) = &cand.nested {
            let t = Instant::now();
            // SAFETY: the nest was built from the prepared operands' layouts, which `views`
            // have (`check_operands` checked the inputs against the plan; `prepare` gives the
            // planned prepared layouts), and from C's layout, also checked; C maps distinct
            // index values to distinct elements (checked when planning) and overlaps no input.
            unsafe {
                run_nested(
                    nest,
                    alpha,
                    views[0].as_ptr(),
                    views[1].as_ptr(),
                    beta,
                    c.as_mut_ptr(),
                )
            };
            apply_epilogue(epilogue, c);
            times.gemm = t.elapsed();
            return Ok(times);
        }
        let (pa, pb) = (&self.preps[0], &self.preps[1]);
        if cand.gett.is_some() {
            let t = Instant::now();
            let (la, lb, lc) = (views[0].layout(), views[1].layout(), c.layout().clone());
            let sa = |l| stride_of(l, &pa.kept, la);
            let sb = |l| stride_of(l, &pb.kept, lb);
            let sc = |l| stride_of(l, out, &lc);
            let dims = |g: &[Label], f: &dyn Fn(Label) -> [isize; 2]| -> Vec<Dim> {
                g.iter()
                    .map(|&l| Dim {
                        ext: ext(l),
                        s: f(l),
                    })
                    .collect()
            };
            let (m, n) = if cand.gett.is_some_and(|g| g.swap) {
                (&cand.n, &cand.m)
            } else {
                (&cand.m, &cand.n)
            };
            let problem = GettProblem {
                m: dims(m, &|l| [sa(l), sc(l)]),
                n: dims(n, &|l| [sb(l), sc(l)]),
                k: dims(&cand.k, &|l| [sa(l), sb(l)]),
                batch: cand
                    .loops
                    .iter()
                    .map(|&l| (ext(l), [sa(l), sb(l), sc(l)]))
                    .collect(),
            };
            let (ap, bp, cp) = (
                SendPtr(views[0].as_ptr() as *mut T),
                SendPtr(views[1].as_ptr() as *mut T),
                SendPtr(c.as_mut_ptr()),
            );
            on_threads(threads, || {
                // SAFETY: the index groups and strides come from the views' own layouts
                // (every index value addresses an element of its view); C's layout was
                // checked against the plan in `check_operands`, maps distinct index values
                // to distinct elements, and overlaps no input.
                unsafe {
                    gett(
                        &problem,
                        ap.get(),
                        bp.get(),
                        cp.get(),
                        alpha,
                        beta,
                        threads,
                        KernelChoice::Best,
                    )
                }
            });
            apply_epilogue(epilogue, c);
            times.gemm = t.elapsed();
            return Ok(times);
        }
        // Workspace goes back to the process-wide pool after the call, except under a
        // workspace limit (memory is short: nothing outlives the call).
        let retain = self.options.workspace_limit.is_none();
        let (mut buf_a, mut buf_b) = (Workspace::default(), Workspace::default());
        let t = Instant::now();
        let a = match &cand.a_pack {
            Some(order) => pack(
                threads, &views[0], &pa.kept, order, &ext, retain, &mut buf_a,
            )?,
            None => views[0].clone(),
        };
        times.pack_a = t.elapsed();
        let t = Instant::now();
        let b = match &cand.b_pack {
            Some(order) => pack(
                threads, &views[1], &pb.kept, order, &ext, retain, &mut buf_b,
            )?,
            None => views[1].clone(),
        };
        times.pack_b = t.elapsed();

        if let Some(tc) = &cand.c_tiles {
            let t = Instant::now();
            let run = TiledRun {
                cand,
                tiles: tc,
                a: (a.as_ptr(), &pa.kept, a.layout()),
                b: (b.as_ptr(), &pb.kept, b.layout()),
                ext: &ext,
                out,
            };
            // SAFETY: `a` and `b` are views of the operands or of private packed buffers of
            // the layouts the candidate was made for; `c` has the plan's layout (checked in
            // `check_operands`) and overlaps no input.
            let share = unsafe { run.run(threads, alpha, beta, c, retain)? };
            apply_epilogue(epilogue, c);
            let wall = t.elapsed();
            times.gemm = wall.mul_f64(share);
            times.write_c = wall - times.gemm;
            return Ok(times);
        }
        let t = Instant::now();
        let mut tmp: Workspace<T> = Workspace::default();
        let mut tmp_off = 0;
        let direct = cand.c_temp.is_none();
        if let Some(ip) = &cand.c_in_place {
            let len = self.c.len();
            // SAFETY: the planner offers in-place candidates only for a C whose strides are
            // positive and form a row-major layout of a permutation of its axes, so its
            // elements are exactly the `len` elements from its first one; `c` borrows them
            // mutably for this call and they overlap no input (`check_operands`).
            let data = unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr(), len) };
            // Everything that can fail comes before C moves: the GEMMs' layout, and the
            // buffers of both permutations, reserved together. From the first move on, C is
            // permuted, overwritten and permuted back with no allocation and no error.
            let layout = packed_layout(&ip.order, out, ext)?;
            let run = GemmRun {
                cand,
                a: (a.as_ptr(), &pa.kept, a.layout()),
                b: (b.as_ptr(), &pb.kept, b.layout()),
                c: (data.as_mut_ptr(), out, &layout),
                ext: &ext,
                epilogue: Epilogue::None,
            };
            run.check()?;
            let mut scratch = ip.back.reserve()?;
            if !beta.is_exact_zero() {
                ip.forward.reserve_into(&mut scratch)?;
                ip.forward.execute_with(data, &mut scratch)?;
            }
            // C's pointer taken again after the permutation wrote through `data`.
            let run = GemmRun {
                c: (data.as_mut_ptr(), out, &layout),
                ..run
            };
            // SAFETY: as below; `data` is C's memory, of the layout the candidate GEMMs into.
            unsafe { run.run(threads, alpha, beta)? };
            times.gemm = t.elapsed();
            let t = Instant::now();
            ip.back.execute_with(data, &mut scratch)?;
            apply_epilogue(epilogue, c);
            times.write_c = t.elapsed();
            return Ok(times);
        }
        let (c_ptr, c_layout, g_alpha, g_beta) = match &cand.c_temp {
            None => (c.as_mut_ptr(), c.layout().clone(), alpha, beta),
            Some(order) => {
                // a reused buffer: the GEMMs start it with beta = 0, which never reads C
                let (data, off) = take_aligned(self.c.len(), retain, "the GEMM result")?;
                tmp = data;
                tmp_off = off;
                (
                    tmp.as_mut_ptr().wrapping_add(off),
                    packed_layout(order, out, ext)?,
                    T::one(),
                    T::zero(),
                )
            }
        };
        let run = GemmRun {
            cand,
            a: (a.as_ptr(), &pa.kept, a.layout()),
            b: (b.as_ptr(), &pb.kept, b.layout()),
            c: (c_ptr, out, &c_layout),
            ext: &ext,
            epilogue: if direct { epilogue } else { Epilogue::None },
        };
        // SAFETY: `a` and `b` are views of the operands or of private packed buffers whose
        // layouts the candidate was made for; `c_ptr` is C (checked against the plan's layout
        // in `check_operands`, disjoint from the inputs) or the private temporary `tmp`.
        unsafe { run.run(threads, g_alpha, g_beta)? };
        times.gemm = t.elapsed();
        if !direct {
            let t = Instant::now();
            let tv = StridedView::from_slice(&tmp, c_layout, tmp_off)?;
            transpose_on(threads, &identity(out.len()), alpha, &tv, beta, c)?;
            apply_epilogue(epilogue, c);
            times.write_c = t.elapsed();
        }
        Ok(times)
    }

    pub(super) fn check_operands<T: Element>(
        &self,
        inputs: &[StridedView<'_, T>],
        c: &StridedViewMut<'_, T>,
    ) -> Result<()> {
        if T::DTYPE != self.dtype() {
            return Err(Error::PlanMismatch(format!(
                "plan made for {}, executed with {}",
                self.dtype(),
                T::DTYPE
            )));
        }
        // A half-precision plan checks the caller's layouts, not its f32 images'.
        let (planned, planned_c) = match &self.storage {
            Some(st) => (&st.inputs, &st.c),
            None => (&self.inputs, &self.c),
        };
        if inputs.len() != planned.len() {
            return Err(Error::OperandCount {
                spec: self.bound.spec().text().to_string(),
                expected: planned.len(),
                given: inputs.len(),
            });
        }
        for (k, (v, l)) in inputs.iter().zip(planned).enumerate() {
            if v.layout() != l {
                return Err(Error::PlanMismatch(format!(
                    "operand {k} has extents {:?} / strides {:?}, the plan was made for {:?} / {:?}",
                    v.layout().dims(),
                    v.layout().strides(),
                    l.dims(),
                    l.strides()
                )));
            }
            if spans_overlap(v.as_ptr(), v.layout(), c.as_ptr(), c.layout()) {
                return Err(Error::Overlap {
                    what: format!("input operand {k}"),
                });
            }
        }
        if c.layout() != planned_c {
            return Err(Error::PlanMismatch(format!(
                "output has extents {:?} / strides {:?}, the plan was made for {:?} / {:?}",
                c.layout().dims(),
                c.layout().strides(),
                planned_c.dims(),
                planned_c.strides()
            )));
        }
        Ok(())
    }
}

/// Applies the epilogue to every element of C.
fn apply_epilogue<T: Element>(e: Epilogue, c: &mut StridedViewMut<'_, T>) {
    if e == Epilogue::None {
        return;
    }
    let l = c.layout().clone();
    let p = c.as_mut_ptr();
    // SAFETY: every offset of an index of `l` addresses an element of the view, which is
    // borrowed mutably.
    for_each_index(l.dims(), [l.strides()], |[o]| unsafe {
        let q = p.offset(o);
        *q = e.apply(*q);
    });
}

#[cfg(test)]
mod tests {
    //! Every candidate of small contractions through our own GEMM (the GETT engine; its
    //! scalar kernel under Miri, `.ci/miri.sh`): packed operands, diagonals and one-sided
    //! sums, the loop nest with batch and batch-reduce loops, C written directly, through a
    //! temporary, in place and in tiles, beta zero or not, the epilogue, the measured choice
    //! (which saves and restores C), and one-operand specs, against the reference loops.

    use super::*;
    use crate::model::GemmLibrary;
    use crate::plan::{Candidate, PlanOptions};
    use crate::tensor::Layout;
    use ndarray::{ArrayD, Axis, IxDyn};
    use std::time::Duration;

    /// Small integers (exact sums in every element type).
    fn ints<T: Element>(shape: &[usize], seed: usize) -> ArrayD<T> {
        let mut k = seed;
        ArrayD::from_shape_simple_fn(IxDyn(shape), || {
            k = (k * 1103515245 + 12345) % (1 << 31);
            T::from_parts((k >> 16) as f64 % 7.0 - 3.0, (k >> 8) as f64 % 5.0 - 2.0)
        })
    }

    /// The ways of running a candidate: C through a temporary, in place, in tiles; a packed
    /// operand; loops; batch-reduce loops.
    const WAYS: [&str; 6] = [
        "temporary C",
        "C in place",
        "tiles",
        "packing",
        "loops",
        "reduce",
    ];

    fn ways(c: &Candidate) -> [bool; 6] {
        [
            c.c_temp.is_some(),
            c.c_in_place.is_some(),
            c.c_tiles.is_some(),
            c.a_pack.is_some() || c.b_pack.is_some(),
            !c.loops.is_empty(),
            !c.reduce.is_empty(),
        ]
    }

    /// Runs the candidates of `spec` (every one; under Miri the planner's choice and the
    /// first one of each way that `seen` lacks) and the measured choice, with beta zero and
    /// not, against the reference; marks the ways run in `seen`.
    fn check<T: Element>(
        spec: &str,
        shapes: &[&[usize]],
        invert_c: bool,
        opts: &PlanOptions,
        seen: &mut [bool; 6],
    ) {
        let ops: Vec<ArrayD<T>> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| ints(s, k + 1))
            .collect();
        let views: Vec<_> = ops.iter().map(|a| a.view()).collect();
        let product = crate::reference::einsum(spec, &views).unwrap();
        let mut c0: ArrayD<T> = ints(product.shape(), 7);
        if invert_c && c0.ndim() > 0 {
            c0.invert_axis(Axis(0));
        }
        let layouts: Vec<Layout> = ops.iter().map(Layout::of).collect();
        let mut plan =
            ContractionPlan::with_options(spec, &layouts, &Layout::of(&c0), T::DTYPE, opts)
                .unwrap();
        let inputs: Vec<StridedView<'_, T>> = ops.iter().map(StridedView::of).collect();
        let cands = plan.candidates();
        let mut picks: Vec<usize> = if cfg!(miri) {
            let new = |w: usize| cands.iter().position(|c| ways(c)[w] && !seen[w]);
            (0..WAYS.len()).filter_map(new).chain([0]).collect()
        } else {
            (0..cands.len()).collect()
        };
        picks.retain(|&i| i < cands.len());
        picks.sort_unstable();
        picks.dedup();
        for &i in &picks {
            for (s, w) in seen.iter_mut().zip(ways(&cands[i])) {
                *s |= w;
            }
        }
        for (alpha, beta) in [(T::one(), T::zero()), (T::from_f64(2.0), T::from_f64(-1.0))] {
            let want = c0.mapv(|x| beta * x) + product.mapv(|x| alpha * x);
            let want = want.mapv(|x| opts.epilogue.apply(x));
            // one run per picked candidate (one plain run for a one-operand spec), then the
            // measured choice, which saves and restores C between its trials when beta != 0
            // (under Miri only then)
            let measured = !cfg!(miri) || !beta.is_exact_zero() || picks.is_empty();
            let runs = picks
                .iter()
                .map(|&i| Some(i))
                .chain(measured.then_some(None));
            for run in runs.collect::<Vec<_>>() {
                let mut c = c0.clone();
                let mut cv = StridedViewMut::of(&mut c).unwrap();
                match run {
                    Some(i) => {
                        plan.choose(i).unwrap();
                        plan.execute(alpha, &inputs, beta, &mut cv).unwrap();
                    }
                    None if picks.is_empty() => {
                        plan.execute(alpha, &inputs, beta, &mut cv).unwrap();
                    }
                    None => {
                        plan.measure(alpha, &inputs, beta, &mut cv, Duration::ZERO)
                            .unwrap();
                    }
                }
                for (g, w) in c.iter().zip(&want) {
                    assert!(
                        (*g - *w).abs_f64() <= 1e-5 * (1.0 + w.abs_f64()),
                        "{spec} {:?} candidate {run:?}: {g} vs {w}\n{}",
                        T::DTYPE,
                        plan.explain()
                    );
                }
            }
        }
    }

    #[test]
    fn every_candidate_with_the_native_gemm() {
        // Under Miri the planner cannot probe this machine's copy bandwidth (16 MiB copies,
        // `/proc/cpuinfo`): it gets the default factors of a stored profile instead.
        #[cfg(miri)]
        crate::model::profile::set_miri_profile();
        let opts = PlanOptions {
            threads: Some(2),
            library: Some(GemmLibrary::Native),
            tile_bytes: Some(32),
            ..Default::default()
        };
        let relu = PlanOptions {
            epilogue: Epilogue::Relu,
            ..opts.clone()
        };
        // No room for a copy of C (480 bytes): C is transposed in place, one 160-byte block
        // of its batch index at a time.
        let tight = PlanOptions {
            threads: Some(1),
            workspace_limit: Some(400),
            ..opts.clone()
        };
        let mut seen = [false; 6];
        // Inside a pool of the plans' two threads, so that small parallel loops and
        // transpositions split into tasks as planned (from outside one they run on the
        // caller, `wakes_threads`).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a thread pool");
        pool.install(|| every_candidate_cases(&opts, &relu, &tight, &mut seen));
        let missing: Vec<&str> = (0..WAYS.len())
            .filter(|&w| !seen[w])
            .map(|w| WAYS[w])
            .collect();
        assert!(
            missing.is_empty(),
            "no case runs a candidate with {missing:?}"
        );
    }

    /// A C permuted in place for the GEMMs and back: every buffer of both permutations is
    /// reserved before C moves, so a failure of any one of those allocations (injected, the
    /// first, second, ... in turn) leaves C exactly as it was, and the run after the last
    /// failure point gives the right result.
    #[test]
    #[cfg_attr(miri, ignore)] // planning takes Miri minutes; the movers run under it elsewhere
    fn failed_in_place_runs_leave_c_as_it_was() {
        use crate::transpose::inplace::fail_allocations_after;
        let (a, b) = (ints::<f64>(&[3, 7, 5], 1), ints::<f64>(&[3, 5, 9], 2));
        let product = crate::reference::einsum("bij,bjk->bki", &[a.view(), b.view()]).unwrap();
        let c0: ArrayD<f64> = ints(product.shape(), 7);
        let want = c0.mapv(|x| -x) + product.mapv(|x| 2.0 * x);
        let inputs = [StridedView::of(&a), StridedView::of(&b)];
        let mut injected = 0;
        for threads in [1, 2] {
            let opts = PlanOptions {
                threads: Some(threads),
                library: Some(GemmLibrary::Native),
                // Room for neither a copy of C (1512 bytes) nor a tile of it; every candidate
                // listed (the model alone plans this one as a direct GEMM only).
                workspace_limit: Some(1000),
                tile_bytes: Some(32),
                tuning: crate::plan::PlanTuning::Measure {
                    budget: Duration::ZERO,
                },
                ..Default::default()
            };
            let mut plan = ContractionPlan::with_options(
                "bij,bjk->bki",
                &[Layout::of(&a), Layout::of(&b)],
                &Layout::of(&c0),
                crate::DType::F64,
                &opts,
            )
            .unwrap();
            let in_place: Vec<usize> = (0..plan.candidates().len())
                .filter(|&i| plan.candidates()[i].c_in_place.is_some())
                .collect();
            for i in in_place {
                plan.choose(i).unwrap();
                for k in 0.. {
                    let mut c = c0.clone();
                    fail_allocations_after(Some(k));
                    let r =
                        plan.execute(2.0, &inputs, -1.0, &mut StridedViewMut::of(&mut c).unwrap());
                    fail_allocations_after(None);
                    match r {
                        Err(e) => {
                            assert!(e.to_string().contains("injected"), "{e}");
                            assert!(
                                c.iter().zip(&c0).all(|(x, y)| x.to_bits() == y.to_bits()),
                                "candidate {i}, failure {k}: C changed"
                            );
                            injected += 1;
                        }
                        Ok(_) => {
                            for (g, w) in c.iter().zip(&want) {
                                assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "candidate {i}");
                            }
                            break;
                        }
                    }
                }
            }
        }
        assert!(injected > 0, "no in-place run allocated a buffer");
    }

    /// Measured tuning leaves a candidate that fails out of its choice (here every in-place
    /// one, its buffers refused) and still gives the right C from the others.
    #[test]
    #[cfg_attr(miri, ignore)] // planning takes Miri minutes
    fn measured_tuning_skips_failing_candidates() {
        use crate::transpose::inplace::fail_allocations_after;
        let (a, b) = (ints::<f64>(&[3, 7, 5], 1), ints::<f64>(&[3, 5, 9], 2));
        let product = crate::reference::einsum("bij,bjk->bki", &[a.view(), b.view()]).unwrap();
        let c0: ArrayD<f64> = ints(product.shape(), 7);
        let want = c0.mapv(|x| -x) + product.mapv(|x| 2.0 * x);
        let opts = PlanOptions {
            threads: Some(1),
            library: Some(GemmLibrary::Native),
            workspace_limit: Some(1000),
            tile_bytes: Some(32),
            tuning: crate::plan::PlanTuning::Measure {
                budget: Duration::from_secs(1),
            },
            ..Default::default()
        };
        let mut plan = ContractionPlan::with_options(
            "bij,bjk->bki",
            &[Layout::of(&a), Layout::of(&b)],
            &Layout::of(&c0),
            crate::DType::F64,
            &opts,
        )
        .unwrap();
        let cands = plan.candidates();
        assert!(cands.iter().any(|c| c.c_in_place.is_some()));
        assert!(cands.iter().any(|c| c.c_in_place.is_none()));
        let inputs = [StridedView::of(&a), StridedView::of(&b)];
        let mut c = c0.clone();
        fail_allocations_after(Some(0));
        let r = plan.measure(
            2.0,
            &inputs,
            -1.0,
            &mut StridedViewMut::of(&mut c).unwrap(),
            Duration::from_secs(1),
        );
        fail_allocations_after(None);
        r.unwrap();
        assert!(plan.chosen().unwrap().c_in_place.is_none());
        for (g, w) in c.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "{g} vs {w}");
        }
    }

    fn every_candidate_cases(
        opts: &PlanOptions,
        relu: &PlanOptions,
        tight: &PlanOptions,
        s: &mut [bool; 6],
    ) {
        let every_family: &[&[usize]] = &[&[3, 2, 2, 3], &[2, 3, 3]];
        check::<f64>("abcd,ced->bea", every_family, false, opts, s);
        check::<f64>("bij,bjk->bki", &[&[3, 4, 2], &[3, 2, 5]], false, tight, s);
        check::<f32>("abk,kcb->ca", &[&[2, 3, 0], &[0, 2, 3]], true, relu, s);
        check::<f64>("abb->ba", &[&[3, 4, 4]], true, relu, s);
        if !cfg!(miri) {
            // More of the same loop nest (planning each of these takes Miri many seconds):
            // batch loops, C reversed, diagonals and one-sided sums (views and `accumulate`,
            // which the strided tests run under Miri).
            check::<f32>("bij,bjk->bik", &[&[2, 3, 4], &[2, 4, 3]], true, relu, s);
            check::<f64>("aab,bc->ca", &[&[3, 3, 4], &[4, 5]], true, opts, s);
            check::<num_complex::Complex32>("abx,bc->ac", &[&[3, 4, 2], &[4, 5]], false, opts, s);
            check::<num_complex::Complex64>("abc->ca", &[&[3, 2, 4]], false, opts, s);
        }
    }
}

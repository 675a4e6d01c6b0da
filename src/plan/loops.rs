//! The loop nest of a contraction too small for a GEMM call or a copy to pay off: every
//! index a loop over the operands as they lie, the innermost a dot product (a contracted
//! index) or a scaled sum of vectors (an output index).

use std::sync::Arc;

use super::candidate::{Candidate, Labels, Problem, StepCosts};
use super::groups::stride_of;
use super::options::{PlanOptions, PlanTuning};
use super::price::EXECUTE_CALL_SECONDS;
use crate::einsum::Label;
use crate::model::{nested_loops_seconds, profile_for, GemmLibrary};
use crate::tensor::DType;

/// Largest contraction, in products, offered as nested loops beside the GEMM candidates: an
/// inner loop at [`crate::model::LOOPS_PRODUCT_SECONDS`] a product then runs about 13 µs,
/// where GEMM candidates are faster whatever their fixed costs; see `docs/TUNING.md`.
pub const LOOPS_MAX_PRODUCTS: usize = 1 << 15;

/// Nested loops whose work (beyond the fixed cost of an execution) is predicted within this
/// many seconds are planned without pricing any other candidate: a GEMM call and its planning
/// cost more; see `docs/TUNING.md`.
pub const LOOPS_ALONE_SECONDS: f64 = 7e-7;

/// One loop of a [`NestedLoops`] nest: its extent and its stride in A, B and C (0 where the
/// tensor lacks the index; several labels whose strides nest in all three are one loop).
///
/// ```
/// let d = ttgt::plan::LoopDim { extent: 5, strides: [1, 0, 5], output: true };
/// assert!(d.is_output() && !d.is_contracted());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LoopDim {
    /// Number of iterations.
    pub extent: usize,
    /// Element strides in A, B and C.
    pub strides: [isize; 3],
    /// Whether C has the index (a free or batch index; the stride alone does not say: an
    /// empty C may have zero strides).
    pub output: bool,
}

impl LoopDim {
    /// Whether the loop runs over elements of C (a free or batch index).
    pub fn is_output(&self) -> bool {
        self.output
    }

    /// Whether the loop sums (an index of A and B that C lacks).
    pub fn is_contracted(&self) -> bool {
        !self.is_output()
    }

    /// Whether every tensor that has the index steps through it contiguously.
    fn unit(&self) -> bool {
        self.strides.iter().all(|&s| s == 0 || s.abs() == 1)
    }
}

/// A contraction run as plain loops over the operands (no copies, no GEMM calls): `outer`
/// loops, outermost first, around one `inner` loop. C is first scaled by beta, then every
/// product is added into its element.
///
/// ```
/// use ttgt::{ContractionPlan, DType, Layout};
/// let r = |d: &[usize]| Layout::row_major(d).unwrap();
/// // a 5x5x5 dot product: far below the cost of any GEMM call
/// let p = ContractionPlan::new("ijk,ijk", &[r(&[5, 5, 5]), r(&[5, 5, 5])], &r(&[]), DType::F64).unwrap();
/// let n = p.chosen().unwrap().nested.as_ref().unwrap();
/// assert_eq!((n.outer.len(), n.inner.extent), (0, 125)); // the three indices fuse
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NestedLoops {
    /// Loops around the inner one, outermost first.
    pub outer: Vec<LoopDim>,
    /// The innermost loop.
    pub inner: LoopDim,
    /// The output loops among `outer` (those that scale C by beta).
    pub c_outer: Vec<LoopDim>,
    /// The labels, outermost loop first (fused labels side by side), for reports.
    pub labels: Labels,
    /// Products the nest computes (every index's extent multiplied).
    pub products: usize,
}

impl NestedLoops {
    /// The nest over `dims` (`(label, extent, strides in A, B, C, whether C has it)`, in any
    /// order): loops of extent 1 dropped, the others by decreasing stride, neighbours whose
    /// strides nest fused, and the inner loop the one that streams longest at unit stride.
    pub(crate) fn new(dims: &[(Label, usize, [isize; 3], bool)]) -> NestedLoops {
        let products = dims.iter().map(|d| d.1).fold(1usize, usize::saturating_mul);
        let mut sorted: Vec<(Label, usize, [isize; 3], bool)> =
            dims.iter().copied().filter(|d| d.1 != 1).collect();
        // by decreasing total stride; stable, so ties keep the spec's order
        sorted.sort_by_key(|d| {
            std::cmp::Reverse(d.2.iter().map(|s| s.unsigned_abs()).sum::<usize>())
        });
        let mut loops: Vec<(Vec<Label>, LoopDim)> = Vec::with_capacity(sorted.len());
        for (label, extent, strides, output) in sorted {
            let d = LoopDim {
                extent,
                strides,
                output,
            };
            if let Some((ls, outer)) = loops.last_mut() {
                let nests = (0..3).all(|t| outer.strides[t] == strides[t] * extent as isize);
                if nests && output == outer.output && extent != 0 && outer.extent != 0 {
                    outer.extent *= extent;
                    outer.strides = strides;
                    ls.push(label);
                    continue;
                }
            }
            loops.push((vec![label], d));
        }
        let inner = loops
            .iter()
            .enumerate()
            .max_by_key(|(i, (_, d))| {
                // unit strides stream at up to twice the rate; later (smaller-stride) loops
                // win ties
                (d.extent.saturating_mul(if d.unit() { 2 } else { 1 }), *i)
            })
            .map(|(i, _)| i);
        let (labels, inner) = match inner {
            Some(i) => loops.remove(i),
            None => (
                Vec::new(),
                LoopDim {
                    extent: 1,
                    strides: [0, 0, 0],
                    output: false,
                },
            ),
        };
        let all: Vec<Label> = loops
            .iter()
            .flat_map(|(ls, _)| ls.iter().copied())
            .chain(labels)
            .collect();
        let outer: Vec<LoopDim> = loops.into_iter().map(|(_, d)| d).collect();
        NestedLoops {
            c_outer: outer.iter().copied().filter(|d| d.is_output()).collect(),
            outer,
            inner,
            labels: all.into(),
            products,
        }
    }

    /// Iterations of the inner loop's body (runs of the inner loop).
    pub fn inner_runs(&self) -> usize {
        self.outer
            .iter()
            .map(|d| d.extent)
            .fold(1usize, usize::saturating_mul)
    }

    /// Predicted seconds of one run (the model's [`nested_loops_seconds`]).
    pub fn predicted_seconds(&self, dtype: DType, c_elements: usize) -> f64 {
        nested_loops_seconds(
            dtype,
            self.products,
            self.inner_runs(),
            self.inner.unit(),
            c_elements,
        )
    }
}

/// The nested-loop candidate of a two-operand contraction, or `None` when it has more than
/// [`LOOPS_MAX_PRODUCTS`] products or a GEMM library is forced.
pub(crate) fn loops_candidate(pb: &Problem<'_>, options: &PlanOptions) -> Option<Candidate> {
    if options.library.is_some() {
        return None;
    }
    let (pa, pbp) = (&pb.preps[0], &pb.preps[1]);
    let out = pb.bound.output();
    let ext = |l: Label| pb.bound.extent(l);
    let labels: Vec<Label> = [&pb.batch, &pb.m, &pb.n, &pb.k]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    let products = labels
        .iter()
        .map(|&l| ext(l))
        .fold(1usize, usize::saturating_mul);
    if products > LOOPS_MAX_PRODUCTS {
        return None;
    }
    let dims: Vec<(Label, usize, [isize; 3], bool)> = labels
        .iter()
        .map(|&l| {
            let s = [
                stride_of(l, &pa.kept, &pa.prepared),
                stride_of(l, &pbp.kept, &pbp.prepared),
                stride_of(l, out, pb.c),
            ];
            (l, ext(l), s, out.contains(&l))
        })
        .collect();
    let nest = NestedLoops::new(&dims);
    let es = pb.dtype.size_bytes();
    let sums: Vec<_> = pb.preps.iter().filter(|p| !p.summed.is_empty()).collect();
    let workspace_bytes: usize = sums.iter().map(|p| p.prepared.len() * es).sum();
    if workspace_bytes > options.workspace_limit.unwrap_or(usize::MAX) {
        return None;
    }
    let prepare = EXECUTE_CALL_SECONDS
        + if sums.is_empty() {
            0.0
        } else {
            let gbps =
                profile_for(super::candidate::problem_bytes(pb.preps, pb.c, pb.dtype)).copy_gbps(1);
            sums.iter()
                .map(|p| (p.layout.len() * es) as f64 / (gbps * 1e9))
                .sum::<f64>()
        };
    let prod = |g: &[Label]| g.iter().map(|&l| ext(l)).product::<usize>();
    Some(Candidate {
        a_pack: None,
        b_pack: None,
        c_temp: None,
        c_in_place: None,
        c_tiles: None,
        m: pb.m.as_slice().into(),
        n: pb.n.as_slice().into(),
        k: pb.k.as_slice().into(),
        loops: pb.batch.as_slice().into(),
        reduce: Labels::from([]),
        parallel: false,
        library: GemmLibrary::MatrixMultiply,
        gemm_threads: 1,
        gemm_shape: (prod(&pb.batch), prod(&pb.m), prod(&pb.n), prod(&pb.k)),
        workspace_bytes,
        predicted: StepCosts {
            prepare,
            gemm: nest.predicted_seconds(pb.dtype, pb.c.len()),
            ..Default::default()
        },
        batch_loops: pb.batch.len(),
        gett: None,
        nested: Some(Arc::new(nest)),
        skinny: false,
    })
}

/// Whether the nested-loop candidate `c` is planned alone: its work (beyond the fixed cost
/// of any execution, [`EXECUTE_CALL_SECONDS`]) is predicted within [`LOOPS_ALONE_SECONDS`] and
/// the options let the models choose (no measured tuning).
pub(crate) fn loops_alone(c: &Candidate, options: &PlanOptions) -> bool {
    options.tuning == PlanTuning::Estimate
        && c.predicted.total() - EXECUTE_CALL_SECONDS <= LOOPS_ALONE_SECONDS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(c: char) -> Label {
        Label::Letter(c)
    }

    #[test]
    fn nest_fuses_orders_and_picks_the_inner_loop() {
        // ijk,ijk with A row-major and B as ikj: i fuses nowhere, j and k stay apart
        let n = NestedLoops::new(&[
            (l('i'), 5, [25, 25, 0], false),
            (l('j'), 5, [5, 1, 0], false),
            (l('k'), 5, [1, 5, 0], false),
        ]);
        assert_eq!(n.outer.len(), 2);
        assert_eq!(n.inner.extent, 5);
        assert_eq!(n.products, 125);
        assert_eq!(n.inner_runs(), 25);
        // ij,jk->ik row-major: k is the inner loop (unit in B and C)
        let n = NestedLoops::new(&[
            (l('i'), 3, [4, 0, 6], true),
            (l('j'), 4, [1, 6, 0], false),
            (l('k'), 6, [0, 1, 1], true),
        ]);
        assert_eq!(
            n.inner,
            LoopDim {
                extent: 6,
                strides: [0, 1, 1],
                output: true
            }
        );
        assert_eq!(n.labels.last(), Some(&l('k')));
        // extents of 1 vanish; an empty nest is one inner iteration
        let n = NestedLoops::new(&[(l('a'), 1, [1, 1, 0], false)]);
        assert_eq!((n.outer.len(), n.inner.extent, n.products), (0, 1, 1));
        // a zero extent never fuses, and the product count is 0; an empty C's zero strides
        // still mark its loops as C's
        let n = NestedLoops::new(&[(l('a'), 0, [3, 0, 0], true), (l('b'), 3, [1, 1, 0], false)]);
        assert_eq!(n.products, 0);
        assert_eq!(n.outer.len() + 1, 2);
        assert_eq!(n.c_outer.len() + n.inner.is_output() as usize, 1);
    }
}

//! Any tensor permutation in place, as a sequence of chunked transpositions.
//!
//! Row-major storage is a mixed-radix number whose digits are the axes (GKK Section 2).
//! Exchanging two *adjacent groups* of axes — memory order `[.., X.., Y.., ..]` becoming
//! `[.., Y.., X.., ..]` — is one chunked transposition: `batch` = product of the axes before
//! the groups, `n` = the X group's size, `m` = the Y group's, `chunk` = product of the axes
//! after them. Each such swap reads and writes the tensor once, so [`InPlacePlan`] looks for
//! a short sequence: size-1 axes are dropped and axes that stay neighbours are fused, then
//! for up to [`EXACT_MAX_RANK`] fused axes a shortest-path search over the orders finds the
//! cheapest sequence under a simple traffic model (every pass moves the tensor; every chunk
//! moved by cycle following costs a random access); above that a greedy rule places the
//! output's axes front to back, at most one pass per axis.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use ndarray::{ArrayD, IxDyn};

use super::{
    checked_product, reserve_batch, transpose_batch_with, transpose_workspace_bytes,
    InPlaceOptions, Method, Scratch,
};
use crate::error::{Error, Result};
use crate::tensor::check_permutation;

/// Fused ranks up to this are planned by exhaustive search; larger ones greedily.
pub const EXACT_MAX_RANK: usize = 7;

/// Bytes of traffic one randomly placed chunk access is counted as in the cost model.
const RANDOM_ACCESS_BYTES: u64 = 256;
/// The same for chunk swaps of the square method (tile-local accesses).
const TILE_ACCESS_BYTES: u64 = 32;

/// One pass of an [`InPlacePlan`]: [`super::transpose_batch_in_place`] with these arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapStep {
    /// Independent blocks.
    pub batch: usize,
    /// Chunks per output row (the size of the axis group that moves forward).
    pub m: usize,
    /// Output rows (the size of the axis group that moves back).
    pub n: usize,
    /// Elements per chunk (product of the axes after the two groups).
    pub chunk: usize,
    /// How it is carried out.
    pub method: Method,
}

/// A planned in-place permutation of a row-major tensor (numpy meaning: axis `i` of the
/// result is axis `perm[i]` of the input). Planning reads no data; a plan can be executed
/// on any number of buffers of the same shape.
///
/// ```
/// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
/// let plan = InPlacePlan::new(&[4, 5, 6], &[2, 0, 1], 8, &InPlaceOptions::default()).unwrap();
/// assert_eq!(plan.out_shape(), &[6, 4, 5]);
/// assert_eq!(plan.passes(), 1); // axes 0 and 1 stay neighbours: one swap of [4*5] and [6]
/// let mut v: Vec<f64> = (0..120).map(|x| x as f64).collect();
/// plan.execute(&mut v).unwrap();
/// assert_eq!(v[1], 6.0); // out[0][0][1] = in[0][1][0]
/// ```
#[derive(Clone, Debug)]
pub struct InPlacePlan {
    shape: Vec<usize>,
    perm: Vec<usize>,
    out_shape: Vec<usize>,
    len: usize,
    elem_bytes: usize,
    options: InPlaceOptions,
    steps: Vec<SwapStep>,
}

/// Fused axes: sizes in input order and the target order (fused ids in output order).
fn fuse(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    // output order of the input axes longer than 1
    let order: Vec<usize> = perm.iter().copied().filter(|&a| shape[a] > 1).collect();
    let kept: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] > 1).collect();
    let next_kept = |a: usize| kept.iter().copied().find(|&b| b > a);
    // groups of consecutive kept input axes, in output order
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &a in &order {
        match groups.last_mut() {
            Some(g) if g.last().and_then(|&l| next_kept(l)) == Some(a) => g.push(a),
            _ => groups.push(vec![a]),
        }
    }
    let mut by_input: Vec<usize> = (0..groups.len()).collect();
    by_input.sort_by_key(|&g| groups[g][0]);
    let sizes: Vec<usize> = by_input
        .iter()
        .map(|&g| groups[g].iter().map(|&a| shape[a]).product())
        .collect();
    // fused id of group g = its rank in input order
    let mut id = vec![0; groups.len()];
    for (k, &g) in by_input.iter().enumerate() {
        id[g] = k;
    }
    (sizes, (0..groups.len()).map(|g| id[g]).collect())
}

/// The swap of memory positions `[a, b)` and `[b, c)` in a state whose axis sizes (in
/// memory order) are `dims`.
fn step(
    dims: &[usize],
    (a, b, c): (usize, usize, usize),
    elem_bytes: usize,
    method: Method,
) -> SwapStep {
    let p = |r: &[usize]| r.iter().product::<usize>();
    let (batch, x, y, chunk) = (p(&dims[..a]), p(&dims[a..b]), p(&dims[b..c]), p(&dims[c..]));
    let method = match method {
        Method::Auto => Method::choose(y, x, chunk, elem_bytes),
        Method::Square if x != y => Method::Cycles,
        other => other,
    };
    SwapStep {
        batch,
        m: y,
        n: x,
        chunk,
        method,
    }
}

/// Modelled cost (bytes of traffic) of one step over `len` elements.
fn cost(s: &SwapStep, len: usize, elem_bytes: usize) -> u64 {
    let bytes = len as u64 * elem_bytes as u64;
    let chunks = (len / s.chunk.max(1)) as u64;
    match s.method {
        Method::Buffered => 3 * bytes,
        Method::Square => 2 * bytes + chunks * TILE_ACCESS_BYTES,
        _ => 2 * bytes + chunks * RANDOM_ACCESS_BYTES,
    }
}

fn apply(state: &[usize], (a, b, c): (usize, usize, usize)) -> Vec<usize> {
    let mut v = Vec::with_capacity(state.len());
    v.extend_from_slice(&state[..a]);
    v.extend_from_slice(&state[b..c]);
    v.extend_from_slice(&state[a..b]);
    v.extend_from_slice(&state[c..]);
    v
}

type Move = (usize, usize, usize);

/// Best (cost, passes) found for an order, and the order and move it came from.
type Reached = (u64, usize, Option<(Vec<usize>, Move)>);

/// Cheapest sequence of block swaps taking `0..r` to `goal` (Dijkstra over the orders).
fn search(
    sizes: &[usize],
    goal: &[usize],
    len: usize,
    elem_bytes: usize,
    method: Method,
) -> Vec<Move> {
    let r = sizes.len();
    let start: Vec<usize> = (0..r).collect();
    let mut best: HashMap<Vec<usize>, Reached> = HashMap::new();
    best.insert(start.clone(), (0, 0, None));
    let mut heap = BinaryHeap::new();
    heap.push(Reverse((0u64, 0usize, start)));
    while let Some(Reverse((c0, n0, s))) = heap.pop() {
        if best.get(&s).is_some_and(|&(c, n, _)| (c, n) < (c0, n0)) {
            continue;
        }
        if s == goal {
            break;
        }
        let dims: Vec<usize> = s.iter().map(|&i| sizes[i]).collect();
        for a in 0..r {
            for b in a + 1..r {
                for c in b + 1..=r {
                    let mv = (a, b, c);
                    let t = apply(&s, mv);
                    let key = (
                        c0 + cost(&step(&dims, mv, elem_bytes, method), len, elem_bytes),
                        n0 + 1,
                    );
                    if best.get(&t).is_none_or(|&(c, n, _)| key < (c, n)) {
                        best.insert(t.clone(), (key.0, key.1, Some((s.clone(), mv))));
                        heap.push(Reverse((key.0, key.1, t)));
                    }
                }
            }
        }
    }
    let mut moves = Vec::new();
    let mut cur = goal.to_vec();
    while let Some((_, _, Some((prev, mv)))) = best.get(&cur) {
        moves.push(*mv);
        cur = prev.clone();
    }
    moves.reverse();
    moves
}

/// Greedy sequence: fix the first misplaced position by bringing the goal's axis there
/// together with every following axis already in goal order.
fn greedy(goal: &[usize]) -> Vec<Move> {
    let r = goal.len();
    let mut s: Vec<usize> = (0..r).collect();
    let mut moves = Vec::new();
    while let Some(a) = (0..r).find(|&i| s[i] != goal[i]) {
        let b = (a..r).find(|&i| s[i] == goal[a]).unwrap_or(r - 1);
        let mut c = b + 1;
        while c < r && a + (c - b) < r && s[c] == goal[a + (c - b)] {
            c += 1;
        }
        moves.push((a, b, c));
        s = apply(&s, (a, b, c));
    }
    moves
}

impl InPlacePlan {
    /// Plans the permutation of a row-major tensor of `shape` with elements of
    /// `elem_bytes` bytes. Errors for an invalid `perm` or a shape whose size overflows.
    ///
    /// ```
    /// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
    /// let p = InPlacePlan::new(&[8, 1, 9, 10], &[3, 2, 1, 0], 4, &InPlaceOptions::default()).unwrap();
    /// assert_eq!(p.out_shape(), &[10, 9, 1, 8]);
    /// assert_eq!(p.passes(), 2); // reversing three axes takes two block swaps
    /// assert!(InPlacePlan::new(&[2, 3], &[0, 0], 4, &InPlaceOptions::default()).is_err());
    /// ```
    pub fn new(
        shape: &[usize],
        perm: &[usize],
        elem_bytes: usize,
        options: &InPlaceOptions,
    ) -> Result<Self> {
        check_permutation(perm, shape.len())?;
        let len = checked_product(shape, || format!("a tensor of shape {shape:?}"))?;
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let mut steps = Vec::new();
        if len > 0 {
            let (sizes, goal) = fuse(shape, perm);
            let moves = if sizes.len() <= EXACT_MAX_RANK {
                search(&sizes, &goal, len, elem_bytes, options.method)
            } else {
                greedy(&goal)
            };
            let mut state: Vec<usize> = (0..sizes.len()).collect();
            for mv in moves {
                let dims: Vec<usize> = state.iter().map(|&i| sizes[i]).collect();
                steps.push(step(&dims, mv, elem_bytes, options.method));
                state = apply(&state, mv);
            }
        }
        Ok(InPlacePlan {
            shape: shape.to_vec(),
            perm: perm.to_vec(),
            out_shape,
            len,
            elem_bytes,
            options: *options,
            steps,
        })
    }

    /// Shape of the result.
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// The chunked transpositions, in order.
    pub fn steps(&self) -> &[SwapStep] {
        &self.steps
    }

    /// Number of passes over the tensor (0 when the permutation moves nothing).
    pub fn passes(&self) -> usize {
        self.steps.len()
    }

    /// Bytes read plus written by all passes (each pass moves every element once; fixed
    /// points are counted too).
    ///
    /// ```
    /// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
    /// let p = InPlacePlan::new(&[100, 200], &[1, 0], 8, &InPlaceOptions::default()).unwrap();
    /// assert_eq!(p.bytes_moved(), 2 * 100 * 200 * 8);
    /// ```
    pub fn bytes_moved(&self) -> u64 {
        2 * self.steps.len() as u64 * self.len as u64 * self.elem_bytes as u64
    }

    /// Modelled cost in bytes of traffic: [`InPlacePlan::bytes_moved`] plus a penalty per
    /// non-contiguous chunk access (256 bytes for cycle following, 32 for tiled square swaps)
    /// and a third pass over the data for buffered blocks. For comparing plans, and in-place
    /// against out-of-place (`2 * len * elem_bytes` for one copy).
    ///
    /// ```
    /// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
    /// let p = InPlacePlan::new(&[1000, 3, 64], &[1, 0, 2], 8, &InPlaceOptions::default()).unwrap();
    /// assert!(p.modelled_bytes() > p.bytes_moved());
    /// ```
    pub fn modelled_bytes(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| cost(s, self.len, self.elem_bytes))
            .sum()
    }

    /// Largest workspace (bytes) any pass allocates, with this plan's threads.
    ///
    /// ```
    /// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
    /// let o = InPlaceOptions { threads: Some(1), ..Default::default() };
    /// let p = InPlacePlan::new(&[1000, 3, 64], &[1, 0, 2], 8, &o).unwrap();
    /// assert_eq!(p.workspace_bytes(), 64 * 8); // one chunk
    /// ```
    pub fn workspace_bytes(&self) -> usize {
        self.steps
            .iter()
            .map(|s| {
                let opts = InPlaceOptions {
                    method: s.method,
                    ..self.options
                };
                transpose_workspace_bytes(s.m, s.n, s.chunk, self.elem_bytes, &opts)
            })
            .max()
            .unwrap_or(0)
    }

    /// A one-line description for plan explanations.
    ///
    /// ```
    /// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
    /// let p = InPlacePlan::new(&[3, 4], &[1, 0], 8, &InPlaceOptions::default()).unwrap();
    /// assert!(p.describe().starts_with("in place [3, 4] -> [4, 3]: 1 pass"));
    /// ```
    pub fn describe(&self) -> String {
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|s| {
                format!(
                    "{}x({}x{}->{}x{})x{} {}",
                    s.batch,
                    s.n,
                    s.m,
                    s.m,
                    s.n,
                    s.chunk,
                    s.method.name()
                )
            })
            .collect();
        format!(
            "in place {:?} -> {:?}: {} pass{} [{}], workspace {} B",
            self.shape,
            self.out_shape,
            self.steps.len(),
            if self.steps.len() == 1 { "" } else { "es" },
            steps.join(", "),
            self.workspace_bytes()
        )
    }

    /// Runs the plan on `data` (row-major, the planned shape). Errors when the length or
    /// the element size differs from the plan's, or when the buffers of its passes cannot be
    /// had; it reserves them all before the first pass, so that an error leaves `data` as it
    /// was.
    ///
    /// ```
    /// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
    /// let p = InPlacePlan::new(&[2, 3], &[1, 0], 4, &InPlaceOptions::default()).unwrap();
    /// let mut v = [0.0f32, 1., 2., 3., 4., 5.];
    /// p.execute(&mut v).unwrap();
    /// assert_eq!(v, [0., 3., 1., 4., 2., 5.]);
    /// assert!(p.execute(&mut [0.0f64; 6]).is_err());
    /// ```
    pub fn execute<T: Copy + Send + Sync>(&self, data: &mut [T]) -> Result<()> {
        self.check_data(data)?;
        let mut scratch = self.reserve()?;
        self.execute_with(data, &mut scratch)
    }

    /// The buffers of every pass of the plan, reserved now ([`InPlacePlan::execute_with`]).
    ///
    /// ```
    /// use ttgt::transpose::inplace::{InPlacePlan, InPlaceOptions};
    /// let p = InPlacePlan::new(&[40, 3, 50], &[2, 0, 1], 8, &InPlaceOptions::default()).unwrap();
    /// assert!(p.reserve::<f64>().is_ok());
    /// ```
    pub fn reserve<T: Copy>(&self) -> Result<Scratch<T>> {
        let mut scratch = Scratch::new();
        self.reserve_into(&mut scratch)?;
        Ok(scratch)
    }

    /// Adds the buffers of every pass of the plan to `scratch` (for running this plan and
    /// others, e.g. a permutation and its inverse, from one reservation).
    pub fn reserve_into<T: Copy>(&self, scratch: &mut Scratch<T>) -> Result<()> {
        for s in &self.steps {
            reserve_batch(scratch, (s.batch, s.m, s.n, s.chunk), &self.step_options(s))?;
        }
        Ok(())
    }

    /// Runs the plan on `data` with the buffers of `scratch`; after
    /// [`InPlacePlan::reserve`] (or [`InPlacePlan::reserve_into`] on `scratch`) it allocates
    /// nothing and fails only where [`InPlacePlan::execute`] would have before moving
    /// anything (a length or element size other than the plan's).
    pub fn execute_with<T: Copy + Send + Sync>(
        &self,
        data: &mut [T],
        scratch: &mut Scratch<T>,
    ) -> Result<()> {
        self.check_data(data)?;
        for s in &self.steps {
            transpose_batch_with(
                data,
                (s.batch, s.m, s.n, s.chunk),
                &self.step_options(s),
                scratch,
            )?;
        }
        Ok(())
    }

    /// The options of one pass: auto plans re-resolve to the same method (and keep small
    /// passes serial).
    fn step_options(&self, s: &SwapStep) -> InPlaceOptions {
        let method = match self.options.method {
            Method::Auto => Method::Auto,
            _ => s.method,
        };
        InPlaceOptions {
            method,
            ..self.options
        }
    }

    fn check_data<T>(&self, data: &[T]) -> Result<()> {
        if data.len() != self.len || std::mem::size_of::<T>() != self.elem_bytes {
            return Err(Error::PlanMismatch(format!(
                "in-place plan for {} elements of {} bytes executed on {} elements of {} bytes",
                self.len,
                self.elem_bytes,
                data.len(),
                std::mem::size_of::<T>()
            )));
        }
        Ok(())
    }

    /// The planned permutation.
    pub fn perm(&self) -> &[usize] {
        &self.perm
    }
}

/// Permutes a row-major tensor of `shape` stored in `data` in place (numpy meaning: axis `i`
/// of the result is axis `perm[i]` of the input) and returns the new shape. Uses the current
/// rayon pool. Errors for an invalid permutation, a size overflow or a length mismatch.
///
/// ```
/// let mut v: Vec<f64> = (0..24).map(|x| x as f64).collect(); // shape [2, 3, 4]
/// let shape = ttgt::transpose::inplace::permute_in_place(&mut v, &[2, 3, 4], &[2, 0, 1]).unwrap();
/// assert_eq!(shape, [4, 2, 3]);
/// assert_eq!(v[..6], [0.0, 4.0, 8.0, 12.0, 16.0, 20.0]); // out[0][i][j] = in[i][j][0]
/// assert!(ttgt::transpose::inplace::permute_in_place(&mut v, &[2, 3, 5], &[0, 1, 2]).is_err());
/// ```
pub fn permute_in_place<T: Copy + Send + Sync>(
    data: &mut [T],
    shape: &[usize],
    perm: &[usize],
) -> Result<Vec<usize>> {
    let plan = InPlacePlan::new(
        shape,
        perm,
        std::mem::size_of::<T>(),
        &InPlaceOptions::default(),
    )?;
    if data.len() != plan.len {
        return Err(Error::Layout(format!(
            "a tensor of shape {shape:?} has {} elements but the slice has {}",
            plan.len,
            data.len()
        )));
    }
    plan.execute(data)?;
    Ok(plan.out_shape)
}

/// Permutes a standard-layout (row-major, contiguous) array in place: afterwards `a` has
/// axes `perm` of the old array (numpy meaning) and is again in standard layout, with no
/// second copy of the data. Errors for an invalid permutation or another layout.
///
/// ```
/// let mut a = ndarray::ArrayD::from_shape_fn(vec![2, 3, 4], |i| (100 * i[0] + 10 * i[1] + i[2]) as f32);
/// let want = a.clone().permuted_axes(vec![1, 2, 0]).as_standard_layout().into_owned();
/// ttgt::transpose::inplace::permute_array_in_place(&mut a, &[1, 2, 0]).unwrap();
/// assert_eq!(a, want);
/// assert!(a.is_standard_layout());
/// ```
pub fn permute_array_in_place<T: Copy + Send + Sync>(
    a: &mut ArrayD<T>,
    perm: &[usize],
) -> Result<()> {
    let shape = a.shape().to_vec();
    check_permutation(perm, shape.len())?;
    let data = a.as_slice_mut().ok_or_else(|| {
        Error::Layout(
            "in-place permutation needs a standard-layout (row-major, contiguous) array".into(),
        )
    })?;
    let new_shape = permute_in_place(data, &shape, perm)?;
    let empty = ArrayD::from_shape_vec(IxDyn(&[0]), Vec::new())
        .map_err(|e| Error::Layout(e.to_string()))?;
    let taken = std::mem::replace(a, empty);
    *a = taken
        .into_shape_with_order(IxDyn(&new_shape))
        .map_err(|e| Error::Layout(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inplace_fuse_drops_ones_and_fuses_neighbours() {
        assert_eq!(fuse(&[4, 5, 6], &[2, 0, 1]), (vec![20, 6], vec![1, 0]));
        assert_eq!(fuse(&[4, 1, 6], &[1, 2, 0]), (vec![4, 6], vec![1, 0]));
        assert_eq!(fuse(&[2, 3, 4], &[0, 1, 2]), (vec![24], vec![0]));
        assert_eq!(fuse(&[2, 3, 4, 5], &[3, 2, 1, 0]).1, vec![3, 2, 1, 0]);
    }

    #[test]
    fn inplace_greedy_and_search_reach_the_goal() {
        for goal in [
            vec![3, 2, 1, 0],
            vec![1, 0, 3, 2],
            vec![2, 0, 3, 1],
            vec![4, 3, 2, 1, 0],
        ] {
            for moves in [
                greedy(&goal),
                search(
                    &vec![7; goal.len()],
                    &goal,
                    7usize.pow(goal.len() as u32),
                    8,
                    Method::Auto,
                ),
            ] {
                let mut s: Vec<usize> = (0..goal.len()).collect();
                for mv in &moves {
                    s = apply(&s, *mv);
                }
                assert_eq!(s, goal);
                assert!(moves.len() < goal.len());
            }
        }
    }
}

//! Helpers shared by the integration tests: deterministic data, strided-view recipes (sliced
//! with steps, reversed, padded, permuted, broadcast) and error bounds for comparing the fast
//! paths with the reference engine.

#![allow(dead_code)]

use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Axis, Dimension, IxDyn, Slice};
use proptest::prelude::*;
use ttgt::{DType, Element};

/// SplitMix64: a tiny deterministic generator for operand data.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    /// Uniform integer in `-m..=m`, as `f64`.
    pub fn small_int(&mut self, m: u64) -> f64 {
        (self.next_u64() % (2 * m + 1)) as f64 - m as f64
    }
}

/// Random values in `[-1, 1)` (both parts for complex types).
pub fn random_array<T: Element>(shape: &[usize], seed: u64) -> ArrayD<T> {
    let mut r = SplitMix::new(seed);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        let re = r.unit();
        let im = r.unit();
        T::from_parts(re, im)
    })
}

/// Random small integers in `-m..=m` (both parts for complex types): every contraction of
/// such data is exact in all four element types as long as the sums stay small.
pub fn int_array<T: Element>(shape: &[usize], seed: u64, m: u64) -> ArrayD<T> {
    let mut r = SplitMix::new(seed);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        let re = r.small_int(m);
        let im = r.small_int(m);
        T::from_parts(re, im)
    })
}

/// NaN in every part.
pub fn nan<T: Element>() -> T {
    T::from_parts(f64::NAN, f64::NAN)
}

/// Machine epsilon of the type the element type computes in (`f32` for `f16` and `bf16`).
pub fn eps<T: Element>() -> f64 {
    match T::DTYPE {
        DType::F32 | DType::C32 | DType::F16 | DType::BF16 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    }
}

/// How one axis of a strided view is cut out of its storage.
#[derive(Clone, Debug)]
pub struct AxisRecipe {
    /// Slice step (1..=3).
    pub step: usize,
    /// Walk the axis backwards (negative stride).
    pub neg: bool,
    /// Extra storage before the slice.
    pub pad_lo: usize,
    /// Extra storage after the slice.
    pub pad_hi: usize,
    /// Zero stride: the storage has extent 1 on this axis and the view broadcasts it.
    pub bcast: bool,
    /// Sort key of the axis in storage order (axes are permuted by it).
    pub key: u8,
}

/// How to build a strided view of given extents: per axis recipes (cycled when the rank
/// exceeds their number), or a plain row-major array when `plain`.
#[derive(Clone, Debug)]
pub struct ViewRecipe {
    pub plain: bool,
    pub axes: Vec<AxisRecipe>,
}

pub fn axis_recipe() -> impl Strategy<Value = AxisRecipe> {
    (
        prop_oneof![3 => Just(1usize), 2 => Just(2usize), 1 => Just(3usize)],
        prop::bool::weighted(0.3),
        0usize..=1,
        0usize..=1,
        prop::bool::weighted(0.12),
        any::<u8>(),
    )
        .prop_map(|(step, neg, pad_lo, pad_hi, bcast, key)| AxisRecipe {
            step,
            neg,
            pad_lo,
            pad_hi,
            bcast,
            key,
        })
}

pub fn view_recipe() -> impl Strategy<Value = ViewRecipe> {
    (
        prop::bool::weighted(0.3),
        prop::collection::vec(axis_recipe(), 8),
    )
        .prop_map(|(plain, axes)| ViewRecipe { plain, axes })
}

/// The largest storage (in elements) a recipe may allocate; larger ones lose their steps and
/// paddings, axis by axis.
pub const MAX_STORAGE: usize = 1 << 16;

/// A recipe bound to extents: the storage to allocate and how to cut the view out of it.
#[derive(Clone, Debug)]
pub struct Built {
    pub storage_shape: Vec<usize>,
    slices: Vec<Slice>,
    to_logical: Vec<usize>,
    pub dims: Vec<usize>,
}

impl ViewRecipe {
    /// A plain row-major recipe.
    pub fn plain() -> Self {
        ViewRecipe {
            plain: true,
            axes: Vec::new(),
        }
    }

    /// Binds the recipe to `dims`. With `allow_bcast == false` (outputs) no axis has a zero
    /// stride.
    pub fn build(&self, dims: &[usize], allow_bcast: bool) -> Built {
        let r = dims.len();
        let plain_axis = AxisRecipe {
            step: 1,
            neg: false,
            pad_lo: 0,
            pad_hi: 0,
            bcast: false,
            key: 0,
        };
        let mut ax: Vec<AxisRecipe> = if self.plain || self.axes.is_empty() {
            vec![plain_axis.clone(); r]
        } else {
            self.axes.iter().cycle().take(r).cloned().collect()
        };
        for a in &mut ax {
            a.bcast &= allow_bcast;
        }
        let mut order: Vec<usize> = (0..r).collect();
        order.sort_by_key(|&i| (ax[i].key, i));
        let ext = |a: &AxisRecipe, d: usize| {
            if a.bcast {
                1
            } else if d == 0 {
                a.pad_lo + a.pad_hi
            } else {
                a.pad_lo + (d - 1) * a.step + 1 + a.pad_hi
            }
        };
        loop {
            let size: usize = (0..r).map(|i| ext(&ax[i], dims[i])).product();
            if size <= MAX_STORAGE {
                break;
            }
            let widest = (0..r)
                .filter(|&i| ax[i].step > 1 || ax[i].pad_lo + ax[i].pad_hi > 0)
                .max_by_key(|&i| ext(&ax[i], dims[i]));
            match widest {
                Some(i) => {
                    ax[i].step = 1;
                    ax[i].pad_lo = 0;
                    ax[i].pad_hi = 0;
                }
                None => break,
            }
        }
        let storage_shape = order.iter().map(|&i| ext(&ax[i], dims[i])).collect();
        let slices = order
            .iter()
            .map(|&i| {
                let a = &ax[i];
                if a.bcast {
                    Slice::from(..)
                } else {
                    let len = if dims[i] == 0 {
                        0
                    } else {
                        (dims[i] - 1) * a.step + 1
                    };
                    let step = if a.neg {
                        -(a.step as isize)
                    } else {
                        a.step as isize
                    };
                    Slice::new(a.pad_lo as isize, Some((a.pad_lo + len) as isize), step)
                }
            })
            .collect();
        let to_logical = (0..r)
            .map(|i| order.iter().position(|&x| x == i).unwrap_or(0))
            .collect();
        Built {
            storage_shape,
            slices,
            to_logical,
            dims: dims.to_vec(),
        }
    }
}

impl Built {
    /// The sliced, permuted view of `storage` (broadcast axes still have extent 1: call
    /// `.broadcast(IxDyn(&self.dims))` on the result).
    pub fn view<'a, T>(&self, storage: &'a ArrayD<T>) -> ArrayViewD<'a, T> {
        let mut v = storage.view();
        for (k, s) in self.slices.iter().enumerate() {
            v.slice_axis_inplace(Axis(k), *s);
        }
        v.permuted_axes(IxDyn(&self.to_logical))
    }

    /// The sliced, permuted mutable view of `storage`.
    pub fn view_mut<'a, T>(&self, storage: &'a mut ArrayD<T>) -> ArrayViewMutD<'a, T> {
        let mut v = storage.view_mut();
        for (k, s) in self.slices.iter().enumerate() {
            v.slice_axis_inplace(Axis(k), *s);
        }
        v.permuted_axes(IxDyn(&self.to_logical))
    }

    /// Random storage for this recipe.
    pub fn storage<T: Element>(&self, seed: u64) -> ArrayD<T> {
        random_array(&self.storage_shape, seed)
    }
}

/// Element-wise error bounds for `alpha * einsum(spec, ops) + beta * C`: the reference run
/// on absolute values bounds the sum of the magnitudes of the terms of every output element.
///
/// A sum of `n` products accumulated in a type of epsilon `eps` errs by at most about
/// `n * eps` times the sum of the magnitudes of its terms; `16 * eps * (n + 8)` leaves room
/// for blocked sums and the scaling by alpha and beta. The half-precision types add their
/// storage roundings: the result rounded once (and, for three or more operands, each
/// intermediate), the expected value `alpha * want + beta * C0` computed in the storage type
/// by the test: `8 * u` of the same magnitude, `u` the storage type's unit roundoff, and
/// 4 units of the spacing of the subnormal numbers, which no relative bound covers.
pub struct Tol {
    pub absref: ArrayD<f64>,
    pub nsum: f64,
    pub eps: f64,
    /// Unit roundoff of a half-precision storage type (0 for the others).
    pub round: f64,
    /// Spacing of the subnormal numbers of a half-precision storage type (0 for the others).
    pub tiny: f64,
}

impl Tol {
    pub fn new<T: Element>(spec: &str, ops: &[ArrayViewD<'_, T>]) -> Tol {
        let abs: Vec<ArrayD<f64>> = ops.iter().map(|o| o.mapv(|x| x.abs_f64())).collect();
        let views: Vec<ArrayViewD<'_, f64>> = abs.iter().map(|a| a.view()).collect();
        let absref = ttgt::reference::einsum(spec, &views).expect("reference on |ops|");
        let shapes: Vec<&[usize]> = ops.iter().map(|o| o.shape()).collect();
        let bound = ttgt::einsum::parse(spec)
            .and_then(|p| p.bind(&shapes))
            .expect("spec binds");
        let nsum = bound
            .extents()
            .iter()
            .filter(|(l, _)| !bound.output().contains(l))
            .map(|(_, &e)| e as f64)
            .product::<f64>();
        Tol {
            absref,
            nsum,
            eps: eps::<T>(),
            round: if T::DTYPE.is_half() {
                T::DTYPE.unit_roundoff()
            } else {
                0.0
            },
            tiny: match T::DTYPE {
                DType::F16 => 2f64.powi(-24),
                DType::BF16 => 2f64.powi(-133),
                _ => 0.0,
            },
        }
    }

    /// Allowed absolute error for an element whose terms sum (in magnitude) to `scale`.
    pub fn allowed(&self, scale: f64) -> f64 {
        (16.0 * self.eps * (self.nsum + 8.0) + 8.0 * self.round) * scale + 4.0 * self.tiny
    }
}

/// Compares `got` with `want` element by element within `tol` (with alpha = 1, beta = 0).
pub fn check_close<T: Element>(
    what: &str,
    got: &ArrayViewD<'_, T>,
    want: &ArrayD<T>,
    tol: &Tol,
) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "{what}: shape {:?}, want {:?}",
            got.shape(),
            want.shape()
        ));
    }
    for (((idx, &w), &g), &r) in want.indexed_iter().zip(got.iter()).zip(tol.absref.iter()) {
        let allowed = tol.allowed(r);
        let ok = (g - w).abs_f64() <= allowed; // false for NaN
        if !ok {
            return Err(format!(
                "{what}: at {:?} got {g}, want {w} (allowed error {allowed:e})",
                idx.slice()
            ));
        }
    }
    Ok(())
}

/// Runs `run` on a strided mutable view (built from `rc`) of a bigger array, then checks
/// `C == alpha * want + beta * C0` inside the view (C0 prefilled with NaN when beta == 0)
/// and that nothing outside the view changed.
#[allow(clippy::too_many_arguments)]
pub fn check_into<T: Element>(
    what: &str,
    rc: &ViewRecipe,
    seed: u64,
    alpha: T,
    beta: T,
    want: &ArrayD<T>,
    tol: &Tol,
    run: impl FnOnce(&mut ArrayViewMutD<'_, T>) -> ttgt::Result<()>,
) -> Result<(), String> {
    let built = rc.build(want.shape(), false);
    let mut st: ArrayD<T> = built.storage(seed);
    if beta.is_exact_zero() {
        built.view_mut(&mut st).fill(nan());
    }
    let orig = st.clone();
    let mut mask = ArrayD::from_elem(IxDyn(&built.storage_shape), false);
    built.view_mut(&mut mask).fill(true);
    {
        let mut cv = built.view_mut(&mut st);
        run(&mut cv).map_err(|e| format!("{what}: returned error: {e}"))?;
    }
    for (k, ((s, o), &m)) in st.iter().zip(orig.iter()).zip(mask.iter()).enumerate() {
        if !m && s != o {
            return Err(format!(
                "{what}: element {k} of the storage outside the output view changed from {o} to {s}"
            ));
        }
    }
    let got = built.view(&st);
    let c0 = built.view(&orig);
    let (aa, ba) = (alpha.abs_f64(), beta.abs_f64());
    let items = want
        .indexed_iter()
        .zip(got.iter())
        .zip(c0.iter())
        .zip(tol.absref.iter());
    for ((((idx, &w), &g), &c), &r) in items {
        let (expected, scale) = if beta.is_exact_zero() {
            (alpha * w, aa * r)
        } else {
            (alpha * w + beta * c, aa * r + ba * c.abs_f64())
        };
        let allowed = tol.allowed(scale);
        let ok = (g - expected).abs_f64() <= allowed; // false for NaN
        if !ok {
            return Err(format!(
                "{what}: at {:?} got {g}, want {expected} (alpha {alpha}, beta {beta}, C0 {c}, allowed error {allowed:e})",
                idx.slice()
            ));
        }
    }
    Ok(())
}

/// Scalars for alpha and beta: exact 0, 1, -1 often, random (complex) values otherwise.
pub fn scalar() -> impl Strategy<Value = (f64, f64)> {
    prop_oneof![
        2 => Just((0.0, 0.0)),
        3 => Just((1.0, 0.0)),
        1 => Just((-1.0, 0.0)),
        4 => (-2.0f64..2.0, -2.0f64..2.0),
    ]
}

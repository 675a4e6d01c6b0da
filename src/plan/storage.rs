//! Plans for half-precision storage (`f16`, `bf16`): the operands are widened to `f32`
//! images, the contraction is planned and run in `f32` on the images (so it accumulates in
//! `f32` and has every plan form of `f32`), and the `f32` result is rounded once into C.
//!
//! An image has the operand's extents and is dense in the operand's own order of strides
//! (the smallest stride innermost), so widening reads and writes both tensors in address
//! order, and the `f32` plan makes the choices it makes for an `f32` operand of that layout.

use crate::error::Result;
use crate::model::convert_seconds;
use crate::tensor::{DType, Layout};

/// A half-precision plan's conversions: the layouts the caller's operands have, and the
/// predicted seconds of widening the inputs and rounding the result.
#[derive(Clone, Debug)]
pub(crate) struct HalfStorage {
    /// `F16` or `BF16`.
    pub dtype: DType,
    /// The caller's input layouts (the plan's own are their `f32` images).
    pub inputs: Vec<Layout>,
    /// The caller's output layout.
    pub c: Layout,
    /// Predicted seconds of widening each input.
    pub widen: Vec<f64>,
    /// Predicted seconds of rounding the result into C (beta = 0: C is not read).
    pub narrow: f64,
}

impl HalfStorage {
    pub(crate) fn new(dtype: DType, inputs: &[Layout], c: &Layout) -> Self {
        let price = |l: &Layout| convert_seconds(l.len(), 2, 4);
        HalfStorage {
            dtype,
            inputs: inputs.to_vec(),
            c: c.clone(),
            widen: inputs.iter().map(price).collect(),
            narrow: price(c),
        }
    }

    /// Bytes of the f32 images of the inputs `images` and of an output of layout `c`.
    pub(crate) fn image_bytes(images: &[Layout], c: &Layout) -> usize {
        (images.iter().map(Layout::len).sum::<usize>() + c.len()) * 4
    }

    /// Predicted seconds of all the conversions of one execution.
    pub(crate) fn seconds(&self) -> f64 {
        self.widen.iter().sum::<f64>() + self.narrow
    }
}

/// The `f32` image of a layout: the same extents, dense, the axes nested in the order of
/// the layout's strides (largest absolute stride outermost; ties in axis order). Zero
/// strides (broadcast axes) are materialised, outermost.
///
/// Strides `[1, -3]` over extents `[3, 4]` give the image strides `[1, 3]`.
pub(crate) fn f32_image(l: &Layout) -> Result<Layout> {
    let mut axes: Vec<usize> = (0..l.ndim()).collect();
    // broadcast axes (stride 0) outermost: the rows repeat the operand's own
    let key = |i: usize| match l.strides()[i].unsigned_abs() {
        0 => usize::MAX,
        s => s,
    };
    axes.sort_by_key(|&i| std::cmp::Reverse(key(i)));
    let mut strides = vec![0isize; l.ndim()];
    let mut s: usize = 1;
    for &i in axes.iter().rev() {
        strides[i] = s as isize;
        s = s.saturating_mul(l.dims()[i].max(1));
    }
    Layout::new(l.dims().to_vec(), strides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_dense_in_the_stride_order() {
        let l = Layout::new(vec![3, 4, 5], vec![1, -15, 3]).unwrap();
        let img = f32_image(&l).unwrap();
        assert_eq!(img.dims(), &[3, 4, 5]);
        assert_eq!(img.strides(), &[1, 15, 3]);
        let b = Layout::new(vec![2, 6], vec![0, 1]).unwrap();
        assert_eq!(
            HalfStorage::image_bytes(&[l.clone(), b.clone()], &b),
            (60 + 12 + 12) * 4
        );
        assert_eq!(f32_image(&b).unwrap().strides(), &[6, 1]);
        assert!(!f32_image(&l).unwrap().may_self_overlap());
    }

    /// The f32 images count against a workspace limit (a transposition needs none), and
    /// `workspace_bytes` includes them.
    #[test]
    fn images_count_against_the_workspace_limit() {
        use crate::plan::{ContractionPlan, PlanOptions};
        use crate::Error;
        let r = |d: &[usize]| Layout::row_major(d).unwrap();
        let (a, b, c) = (r(&[6, 5, 7]), r(&[7, 5, 4]), r(&[6, 4]));
        let images = HalfStorage::image_bytes(&[a.clone(), b.clone()], &c);
        let limited = |l| PlanOptions {
            workspace_limit: Some(l),
            ..Default::default()
        };
        let plan = |o: &PlanOptions| {
            ContractionPlan::with_options("abc,cbd->ad", &[a.clone(), b.clone()], &c, DType::F16, o)
        };
        let e = plan(&limited(images - 1)).unwrap_err();
        assert!(
            matches!(e, Error::Workspace { needed, .. } if needed == images),
            "{e}"
        );
        let p = plan(&limited(images)).unwrap();
        assert_eq!(p.workspace_bytes(), images);
        let free = plan(&PlanOptions::default()).unwrap();
        assert!(free.workspace_bytes() >= images);
        let t = ContractionPlan::with_options(
            "ij->ji",
            &[r(&[3, 4])],
            &r(&[4, 3]),
            DType::BF16,
            &limited(0),
        )
        .unwrap();
        assert_eq!(t.workspace_bytes(), 0);
    }
}

//! HPTT itself as a same-run peer of `ttgt bench transpose` (feature `hptt`): the C library
//! built from the `hptt` crate's vendored sources, called through its one-shot C API (which
//! plans in its estimate mode and executes on every call), on the bench's own operands, with
//! a sampled check that it computed the same permutation.

use std::time::Instant;

use crate::error::{Error, Result};
use crate::tensor::{DType, Element};

fn peer_error(e: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("HPTT peer: {e}"))
}

/// Reinterprets a slice of `T` as one of `U`.
///
/// # Safety
/// `T` and `U` are the same type (callers check `T::DTYPE` against the `U` they name).
unsafe fn same<T, U>(s: &[T]) -> &[U] {
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>());
    std::slice::from_raw_parts(s.as_ptr() as *const U, s.len())
}

/// [`same`] for a mutable slice.
///
/// # Safety
/// As [`same`].
unsafe fn same_mut<T, U>(s: &mut [T]) -> &mut [U] {
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>());
    std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut U, s.len())
}

/// Seconds of one HPTT call (which plans and executes) of `b = alpha * perm(a) + beta * b` on
/// the bench's dense row-major operands, on `threads` OpenMP threads.
pub(crate) fn hptt_seconds<T: Element>(
    perm: &[usize],
    sizes: &[usize],
    alpha: T,
    a: &[T],
    beta: T,
    b: &mut [T],
    threads: usize,
) -> Result<f64> {
    use hptt::MemoryOrder::RowMajor as RM;
    use num_complex::{Complex32, Complex64};
    let t = Instant::now();
    // SAFETY (every arm): the arm's type is the one `T::DTYPE` names.
    let r = match T::DTYPE {
        DType::F16 | DType::BF16 => return Err(peer_error("HPTT has no 2-byte element types")),
        DType::F32 => unsafe {
            hptt::transpose_f32(
                perm,
                alpha.re() as f32,
                same(a),
                sizes,
                beta.re() as f32,
                same_mut(b),
                threads,
                RM,
            )
        },
        DType::F64 => unsafe {
            hptt::transpose_f64(
                perm,
                alpha.re(),
                same(a),
                sizes,
                beta.re(),
                same_mut(b),
                threads,
                RM,
            )
        },
        DType::C32 => unsafe {
            hptt::transpose_c32(
                perm,
                Complex32::new(alpha.re() as f32, alpha.im() as f32),
                same(a),
                sizes,
                Complex32::new(beta.re() as f32, beta.im() as f32),
                same_mut(b),
                threads,
                false,
                RM,
            )
        },
        DType::C64 => unsafe {
            hptt::transpose_c64(
                perm,
                Complex64::new(alpha.re(), alpha.im()),
                same(a),
                sizes,
                Complex64::new(beta.re(), beta.im()),
                same_mut(b),
                threads,
                false,
                RM,
            )
        },
    };
    let secs = t.elapsed().as_secs_f64();
    r.map_err(peer_error).map(|()| secs)
}

/// Checks HPTT's output `b` (dense row-major, extents `sizes[perm[i]]`, computed with
/// `beta == 0`) at up to 4096 spread elements against `alpha * a` at the permuted index, so
/// that a peer computing another permutation is an error, not a fast figure.
pub(crate) fn check<T: Element>(
    perm: &[usize],
    sizes: &[usize],
    alpha: T,
    a: &[T],
    b: &[T],
) -> Result<()> {
    let rank = sizes.len();
    let mut a_strides = vec![1usize; rank];
    for k in (0..rank.saturating_sub(1)).rev() {
        a_strides[k] = a_strides[k + 1] * sizes[k + 1];
    }
    let b_dims: Vec<usize> = perm.iter().map(|&p| sizes[p]).collect();
    let n = b.len();
    let step = (n / 4096).max(1);
    for lin in (0..n).step_by(step) {
        let (mut rest, mut off) = (lin, 0usize);
        for i in (0..rank).rev() {
            off += (rest % b_dims[i]) * a_strides[perm[i]];
            rest /= b_dims[i];
        }
        let want = alpha * a[off];
        if (b[lin] - want).abs_f64() > 1e-6 * (1.0 + want.abs_f64()) {
            return Err(peer_error(format!(
                "element {lin} of B is {:?}, expected {:?}: HPTT computed another permutation",
                b[lin], want
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HPTT, called as the bench calls it, computes numpy's permutation; the check catches a
    /// wrong one.
    #[test]
    fn hptt_agrees_with_the_permutation_and_the_check_fails_on_another() {
        let sizes = [3usize, 5, 7];
        let a: Vec<f64> = (0..105).map(|i| i as f64).collect();
        let mut b = vec![0.0; 105];
        let t = hptt_seconds(&[2, 0, 1], &sizes, 2.0, &a, 0.0, &mut b, 1).unwrap();
        assert!(t > 0.0);
        check(&[2, 0, 1], &sizes, 2.0, &a, &b).unwrap();
        // b[k][i][j] = 2 * a[i][j][k]
        assert_eq!(b[(6 * 3 + 2) * 5 + 4], 2.0 * a[(2 * 5 + 4) * 7 + 6]);
        assert!(check(&[1, 0, 2], &sizes, 2.0, &a, &b).is_err());
    }
}

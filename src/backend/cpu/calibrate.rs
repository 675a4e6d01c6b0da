//! Measured GEMM times: the same-run GEMM reference of the benchmarks and the calibration of
//! the GEMM cost model ([`GemmCoeffs`]).

use std::time::Instant;

use num_complex::{Complex32, Complex64};

use super::gemm::{gemm, Mat, MatMut};
use crate::error::Result;
use crate::model::{gemm_training_shapes, GemmCoeffs, GemmLibrary, Profile};
use crate::tensor::{zeroed_aligned, DType, Element};

fn time_typed<T: Element>(
    library: GemmLibrary,
    (m, n, k): (usize, usize, usize),
    threads: usize,
    repeat: usize,
) -> Result<f64> {
    let (mut a, oa) = zeroed_aligned::<T>(m * k, "GEMM timing operand")?;
    let (mut b, ob) = zeroed_aligned::<T>(k * n, "GEMM timing operand")?;
    let (mut c, oc) = zeroed_aligned::<T>(m * n, "GEMM timing result")?;
    for (i, x) in a[oa..].iter_mut().enumerate() {
        *x = T::from_f64((i % 7) as f64 * 0.25);
    }
    for (i, x) in b[ob..].iter_mut().enumerate() {
        *x = T::from_f64((i % 5) as f64 * 0.5);
    }
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) + 1 {
        let t = Instant::now();
        // SAFETY: row-major m×k, k×n and m×n buffers of exactly those sizes; C is private.
        unsafe {
            gemm(
                library,
                threads,
                m,
                n,
                k,
                T::one(),
                Mat {
                    ptr: a.as_ptr().add(oa),
                    rs: k as isize,
                    cs: 1,
                },
                Mat {
                    ptr: b.as_ptr().add(ob),
                    rs: n as isize,
                    cs: 1,
                },
                T::zero(),
                MatMut {
                    ptr: c.as_mut_ptr().add(oc),
                    rs: n as isize,
                    cs: 1,
                },
            );
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&c);
    Ok(best)
}

/// Best-of-`repeat` seconds of one row-major `m×n×k` GEMM (`C = A·B`) by `library` on
/// `threads` threads (after one warm-up call).
///
/// ```
/// use ttgt::{DType, model::GemmLibrary};
/// let t = ttgt::backend::cpu::time_gemm(GemmLibrary::Gemm, DType::F64, 64, 64, 64, 1, 2).unwrap();
/// assert!(t > 0.0);
/// ```
pub fn time_gemm(
    library: GemmLibrary,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
    threads: usize,
    repeat: usize,
) -> Result<f64> {
    let s = (m, n, k);
    match dtype {
        DType::F32 => time_typed::<f32>(library, s, threads, repeat),
        DType::F64 => time_typed::<f64>(library, s, threads, repeat),
        DType::C32 => time_typed::<Complex32>(library, s, threads, repeat),
        DType::C64 => time_typed::<Complex64>(library, s, threads, repeat),
    }
}

/// Measures every library and element type on the training shapes (at most `max_flops` real
/// flops each, a quarter of that for complex types) at `threads` threads and fits the GEMM
/// model. Replaces the entries for `threads` in `profile.gemm`. Takes a few seconds.
///
/// ```no_run
/// let mut p = ttgt::model::profile();
/// ttgt::backend::cpu::calibrate_gemm(&mut p, 1, 2e8).unwrap();
/// assert!(!p.gemm.is_empty());
/// ```
pub fn calibrate_gemm(profile: &mut Profile, threads: usize, max_flops: f64) -> Result<()> {
    let mut fitted = Vec::new();
    for dtype in [DType::F32, DType::F64, DType::C32, DType::C64] {
        for library in GemmLibrary::measured(dtype) {
            let budget = if matches!(dtype, DType::C32 | DType::C64) {
                max_flops / 4.0
            } else {
                max_flops
            };
            let mut samples = Vec::new();
            for (m, n, k) in gemm_training_shapes(budget) {
                let t = time_gemm(library, dtype, m, n, k, threads, 3)?;
                samples.push((m, n, k, t));
            }
            let fallback = GemmCoeffs::nominal(library, dtype, threads, profile);
            fitted.push(GemmCoeffs::fit(&samples, &fallback));
        }
    }
    profile.gemm.retain(|g| g.threads != threads);
    profile.gemm.extend(fitted);
    Ok(())
}

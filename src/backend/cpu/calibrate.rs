//! Measured GEMM times: the same-run GEMM reference of the benchmarks and the calibration of
//! the GEMM cost model ([`GemmCoeffs`]).

use std::time::Instant;

use num_complex::{Complex32, Complex64};

use super::gemm::{gemm, Mat, MatMut};
use crate::error::Result;
use crate::model::{gemm_training_shapes, GemmCoeffs, GemmLayout, GemmLibrary, Profile};
use crate::tensor::{zeroed_aligned, DType, Element};

fn time_typed<T: Element>(
    library: GemmLibrary,
    (m, n, k): (usize, usize, usize),
    layout: GemmLayout,
    threads: usize,
    repeat: usize,
) -> Result<f64> {
    let ([a_rs, a_cs], [b_rs, b_cs]) = layout.strides(m, n, k);
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
        // SAFETY: dense m×k and k×n buffers (row- or column-major as `layout` says) and a
        // row-major m×n one of exactly those sizes; C is private.
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
                    rs: a_rs,
                    cs: a_cs,
                },
                Mat {
                    ptr: b.as_ptr().add(ob),
                    rs: b_rs,
                    cs: b_cs,
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
    time_gemm_in(library, dtype, (m, n, k), GemmLayout::ROW, threads, repeat)
}

/// Best-of-`repeat` seconds of one `m×n×k` GEMM whose A and B are row- or column-major as
/// `layout` says (C row-major), by `library` on `threads` threads (after one warm-up call).
///
/// ```
/// use ttgt::{DType, model::{GemmLayout, GemmLibrary}};
/// let l = GemmLayout { a_col: false, b_col: true };
/// let t = ttgt::backend::cpu::time_gemm_in(GemmLibrary::MatrixMultiply, DType::F32, (64, 48, 80), l, 1, 2).unwrap();
/// assert!(t > 0.0);
/// ```
pub fn time_gemm_in(
    library: GemmLibrary,
    dtype: DType,
    shape: (usize, usize, usize),
    layout: GemmLayout,
    threads: usize,
    repeat: usize,
) -> Result<f64> {
    let s = shape;
    match dtype {
        DType::F32 => time_typed::<f32>(library, s, layout, threads, repeat),
        DType::F64 => time_typed::<f64>(library, s, layout, threads, repeat),
        DType::C32 => time_typed::<Complex32>(library, s, layout, threads, repeat),
        DType::C64 => time_typed::<Complex64>(library, s, layout, threads, repeat),
    }
}

/// Measures every library and element type on the training shapes (at most `max_flops` real
/// flops each, a quarter of that for complex types) at `threads` threads and fits the GEMM
/// model, for each operand layout class ([`GemmLayout`]; our own library, which only the
/// GETT engine and forced plans use, for row-major operands only). Replaces the entries for
/// `threads` in `profile.gemm`. Takes tens of seconds at the CLI's default budget.
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
            let layouts: &[GemmLayout] = if library == GemmLibrary::Native {
                &[GemmLayout::ROW]
            } else {
                &GemmLayout::ALL
            };
            for &layout in layouts {
                // The other layouts' compute-bound rates are fitted up to a quarter of the
                // budget (an eighth of the time per square size).
                let shapes = if layout == GemmLayout::ROW {
                    gemm_training_shapes(budget)
                } else {
                    gemm_training_shapes(budget / 4.0)
                };
                let mut samples = Vec::new();
                for s in shapes {
                    // long calls vary little: fewer repetitions
                    let flops = 2.0 * (s.0 * s.1 * s.2) as f64;
                    let repeat = if flops > 2e9 { 1 } else { 3 };
                    let t = time_gemm_in(library, dtype, s, layout, threads, repeat)?;
                    samples.push((s.0, s.1, s.2, t));
                }
                let fallback = GemmCoeffs {
                    layout,
                    ..GemmCoeffs::nominal(library, dtype, threads, profile)
                };
                fitted.push(GemmCoeffs::fit(&samples, &fallback));
            }
        }
    }
    profile.gemm.retain(|g| g.threads != threads);
    profile.gemm.extend(fitted);
    Ok(())
}

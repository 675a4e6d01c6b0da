//! The CPU emulator of the CUDA kernels (feature `cuda-emu`): `kernels/*.cu` compiled as
//! C++ by `build.rs` with `kernels/emu/cuda_emu.h`, each CUDA thread a fiber, one block at a
//! time. It runs a [`TtlgPlan`] exactly as the device would (same kernel, grid, block, shared
//! memory and meta table), so tests compare it with the CPU transpose.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use crate::error::{Error, Result};
use crate::tensor::{Element, StridedView, StridedViewMut};

use super::ttlg::TtlgPlan;

/// Mirror of `ttgt_emu::Launch` in `kernels/emu/cuda_emu.h`.
#[repr(C)]
struct EmuLaunch {
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: usize,
    a: *const c_void,
    a_lo: *const c_void,
    a_hi: *const c_void,
    b: *mut c_void,
    b_lo: *const c_void,
    b_hi: *const c_void,
    meta: *const c_void,
    meta_bytes: usize,
    alpha: *const c_void,
    beta: *const c_void,
    mode: c_int,
}

extern "C" {
    fn ttgt_emu_launch(name: *const c_char, l: *const EmuLaunch) -> c_int;
    fn ttgt_emu_last_error() -> *const c_char;
}

/// Runs kernel `name` under the emulator on raw buffers. `a_range` / `b_range`: the byte
/// ranges the kernel may touch.
///
/// # Safety
/// `a`, `b` and `meta` must be valid for the ranges given, `b`'s range writable and not
/// aliased, and `alpha` / `beta` must point at values of the kernel's element type.
///
/// ```
/// # #[cfg(feature = "cuda-emu")] {
/// let mut b = [0f32; 4];
/// let p = b.as_mut_ptr();
/// let meta = [0u8; 8];
/// // SAFETY: the self-test kernel only touches `b` through the emulator's checks.
/// let r = unsafe {
///     ttgt::backend::cuda::emu::launch_raw("emu_selftest_divergent_barrier", [1, 1, 1], [64, 1, 1], 0,
///         p.cast(), (p.cast(), p.add(4).cast()), p.cast(), (p.cast(), p.add(4).cast()),
///         &meta, meta.as_ptr().cast(), meta.as_ptr().cast(), 0)
/// };
/// assert!(r.unwrap_err().to_string().contains("__syncthreads()"));
/// # }
/// ```
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch_raw(
    name: &str,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: usize,
    a: *const c_void,
    a_range: (*const c_void, *const c_void),
    b: *mut c_void,
    b_range: (*const c_void, *const c_void),
    meta: &[u8],
    alpha: *const c_void,
    beta: *const c_void,
    mode: i32,
) -> Result<()> {
    let cname =
        CString::new(name).map_err(|_| Error::Unsupported("kernel name with NUL".into()))?;
    let l = EmuLaunch {
        grid,
        block,
        shared_bytes,
        a,
        a_lo: a_range.0,
        a_hi: a_range.1,
        b,
        b_lo: b_range.0,
        b_hi: b_range.1,
        meta: meta.as_ptr().cast(),
        meta_bytes: meta.len(),
        alpha,
        beta,
        mode,
    };
    // SAFETY: `l` describes buffers the caller vouches for; the emulator checks every global
    // access against the ranges in `l` and reports violations instead of performing them.
    let rc = unsafe { ttgt_emu_launch(cname.as_ptr(), &l) };
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: the emulator returns a NUL-terminated string that lives until its next launch
    // on this thread; it is copied at once.
    let msg = unsafe { CStr::from_ptr(ttgt_emu_last_error()) }
        .to_string_lossy()
        .into_owned();
    Err(Error::Unsupported(format!("emulated kernel {name}: {msg}")))
}

/// Byte range `[lo, hi)` addressed by a view (pointer at element 0, offsets may be negative).
fn range<T>(ptr: *const T, layout: &crate::Layout) -> (*const c_void, *const c_void) {
    if layout.is_empty() {
        return (ptr.cast(), ptr.cast());
    }
    let (lo, hi) = layout.offset_range();
    (
        ptr.wrapping_offset(lo).cast(),
        ptr.wrapping_offset(hi + 1).cast(),
    )
}

/// `B = alpha * perm(A) + beta * B` by running `plan` under the emulator. The plan must have
/// been made for these layouts and this element type.
///
/// ```
/// # #[cfg(feature = "cuda-emu")] {
/// use ttgt::backend::cuda::{emu, ttlg::{DeviceProps, TtlgOptions, TtlgPlan}};
/// use ttgt::tensor::{StridedView, StridedViewMut};
/// let a = ndarray::Array2::<f32>::from_shape_fn((40, 33), |(i, j)| (i * 100 + j) as f32);
/// let mut b = ndarray::Array2::<f32>::zeros((33, 40));
/// let (va, mut vb) = (StridedView::of(&a), StridedViewMut::of(&mut b).unwrap());
/// let plan = TtlgPlan::new(&[1, 0], va.layout(), vb.layout(), ttgt::DType::F32, true,
///                          &DeviceProps::emulator(), &TtlgOptions::default()).unwrap();
/// emu::transpose(&plan, 1.0, &va, 0.0, &mut vb).unwrap();
/// assert_eq!(b, a.t());
/// # }
/// ```
pub fn transpose<T: Element>(
    plan: &TtlgPlan,
    alpha: T,
    a: &StridedView<'_, T>,
    beta: T,
    b: &mut StridedViewMut<'_, T>,
) -> Result<()> {
    if plan.dtype != T::DTYPE {
        return Err(Error::Unsupported(format!(
            "plan for {} run on {} data",
            plan.dtype,
            T::DTYPE
        )));
    }
    let mode = TtlgPlan::mode(alpha.is_exact_one(), beta.is_exact_zero());
    if plan.plain && mode != 0 {
        return Err(Error::Unsupported(
            "a plan made for plain copies (widened elements) run with alpha != 1 or beta != 0"
                .into(),
        ));
    }
    if plan.is_empty() {
        return Ok(());
    }
    let need = plan.required_align();
    if !(a.as_ptr() as usize).is_multiple_of(need) || !(b.as_ptr() as usize).is_multiple_of(need) {
        return Err(Error::Unsupported(format!(
            "the plan moves {need}-byte aligned elements; the data addresses are not {need}-byte \
             aligned (plan with TtlgOptions::align set from them)"
        )));
    }
    let meta = plan.meta_bytes();
    let ar = range(a.as_ptr(), a.layout());
    let br = range(b.as_ptr(), b.layout());
    let kbytes = plan.problem.kernel_dtype.size_bytes();
    let (mut sa, mut sb) = ([0u8; 16], [0u8; 16]);
    // Scalars as the kernel's element type: the tensors' type, or (plain copies of widened
    // elements) unused by mode 0.
    if kbytes == std::mem::size_of::<T>() {
        // SAFETY: T is plain old data of `kbytes` bytes; the arrays hold 16 bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&alpha as *const T).cast::<u8>(),
                sa.as_mut_ptr(),
                kbytes,
            );
            std::ptr::copy_nonoverlapping(
                (&beta as *const T).cast::<u8>(),
                sb.as_mut_ptr(),
                kbytes,
            );
        }
    }
    // SAFETY: the views guarantee that every offset of their layouts is in bounds, which is
    // the range passed; the plan was made for these layouts; B is a unique borrow.
    unsafe {
        launch_raw(
            &plan.kernel,
            plan.grid,
            plan.block,
            plan.shared_bytes,
            a.as_ptr().cast(),
            ar,
            b.as_mut_ptr().cast(),
            br,
            &meta,
            sa.as_ptr().cast(),
            sb.as_ptr().cast(),
            mode,
        )
    }
}

//! The element types ttgt computes with: `f32`, `f64`, [`Complex32`], [`Complex64`] and the
//! half-precision storage types [`f16`] and [`bf16`].
//!
//! [`Element`] is sealed: the GEMM dispatch, the `.npy` descriptors and the transposition
//! micro-kernels are written for exactly these six types. Half-precision tensors are stored in
//! 16 bits and computed in their [`DType::compute`] type, `f32`: contractions convert their
//! operands to `f32`, accumulate in `f32` and round the result once when it is stored.

use std::fmt::{Debug, Display};
use std::ops::{Add, AddAssign, Mul, MulAssign, Sub};

use half::slice::HalfFloatSliceExt;
pub use half::{bf16, f16};
pub use num_complex::{Complex32, Complex64};
use num_traits::{One, Zero};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for num_complex::Complex32 {}
    impl Sealed for num_complex::Complex64 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// The run-time tag of an element type.
///
/// ```
/// use ttgt::DType;
/// assert_eq!("c64".parse::<DType>().unwrap(), DType::C64);
/// assert_eq!(DType::F32.size_bytes(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// Complex number made of two `f32` (numpy `complex64`).
    C32,
    /// Complex number made of two `f64` (numpy `complex128`).
    C64,
    /// 16-bit IEEE float (numpy `float16`), computed in `f32`.
    F16,
    /// bfloat16: the upper half of an `f32` (`ml_dtypes.bfloat16`), computed in `f32`.
    BF16,
}

impl DType {
    /// All element types.
    pub const ALL: [DType; 6] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C32,
        DType::C64,
    ];

    /// Size of one element in bytes.
    ///
    /// ```
    /// assert_eq!(ttgt::DType::C64.size_bytes(), 16);
    /// ```
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 => 4,
            DType::F64 | DType::C32 => 8,
            DType::C64 => 16,
        }
    }

    /// Whether the type is a 16-bit storage type (`f16`, `bf16`).
    ///
    /// ```
    /// assert!(ttgt::DType::BF16.is_half());
    /// assert!(!ttgt::DType::F32.is_half());
    /// ```
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// The type a contraction of this type computes and accumulates in: `f32` for the
    /// half-precision types, the type itself otherwise.
    ///
    /// ```
    /// use ttgt::DType;
    /// assert_eq!(DType::F16.compute(), DType::F32);
    /// assert_eq!(DType::C64.compute(), DType::C64);
    /// ```
    pub fn compute(self) -> DType {
        if self.is_half() {
            DType::F32
        } else {
            self
        }
    }

    /// Unit roundoff of the storage type: half the distance from 1 to the next value
    /// (`2^-11` for f16, `2^-8` for bf16, `2^-24` for f32, `2^-53` for f64).
    ///
    /// ```
    /// assert_eq!(ttgt::DType::F16.unit_roundoff(), 2f64.powi(-11));
    /// ```
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F16 => 2f64.powi(-11),
            DType::BF16 => 2f64.powi(-8),
            DType::F32 | DType::C32 => 2f64.powi(-24),
            DType::F64 | DType::C64 => 2f64.powi(-53),
        }
    }

    /// Whether the type is complex.
    ///
    /// ```
    /// assert!(ttgt::DType::C32.is_complex());
    /// ```
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C32 | DType::C64)
    }

    /// Floating-point operations of one multiply-add, counted as numpy and the GEMM literature do
    /// (2 for real, 8 for complex).
    ///
    /// ```
    /// assert_eq!(ttgt::DType::F64.flops_per_fma(), 2.0);
    /// ```
    pub fn flops_per_fma(self) -> f64 {
        if self.is_complex() {
            8.0
        } else {
            2.0
        }
    }

    /// The smallest type that holds values of both `self` and `other` (numpy's promotion;
    /// `f16` with `bf16` gives `f32`, as in PyTorch and JAX).
    ///
    /// ```
    /// use ttgt::DType;
    /// assert_eq!(DType::F64.promote(DType::C32), DType::C64);
    /// assert_eq!(DType::F16.promote(DType::F16), DType::F16);
    /// assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
    /// ```
    pub fn promote(self, other: DType) -> DType {
        if self == other {
            return self;
        }
        // Two different types of which one is half: the other one's type with f32 for the
        // half (f16 with bf16 gives f32).
        let (this, other) = (self.compute(), other.compute());
        let complex = this.is_complex() || other.is_complex();
        let wide =
            matches!(this, DType::F64 | DType::C64) || matches!(other, DType::F64 | DType::C64);
        match (complex, wide) {
            (false, false) => DType::F32,
            (false, true) => DType::F64,
            (true, false) => DType::C32,
            (true, true) => DType::C64,
        }
    }

    /// Short name used by the CLI and the benches (`f16`, `bf16`, `f32`, `f64`, `c32`, `c64`).
    ///
    /// ```
    /// assert_eq!(ttgt::DType::C32.name(), "c32");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C32 => "c32",
            DType::C64 => "c64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }
}

impl DType {
    /// numpy's name of the type (`float16`, `float32`, `float64`, `complex64`, `complex128`,
    /// and `bfloat16` as `ml_dtypes` names it): `C32` is numpy's `complex64` (two `f32`),
    /// `C64` its `complex128`.
    ///
    /// ```
    /// assert_eq!(ttgt::DType::C64.numpy_name(), "complex128");
    /// assert_eq!("complex128".parse::<ttgt::DType>().unwrap(), ttgt::DType::C64);
    /// ```
    pub fn numpy_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C32 => "complex64",
            DType::C64 => "complex128",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
        }
    }
}

impl Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "s" => Ok(DType::F32),
            "f64" | "float64" | "d" => Ok(DType::F64),
            "c32" | "complex64" | "c" => Ok(DType::C32),
            "c64" | "complex128" | "z" => Ok(DType::C64),
            "f16" | "float16" | "half" => Ok(DType::F16),
            "bf16" | "bfloat16" => Ok(DType::BF16),
            other => Err(format!(
                "unknown dtype {other:?} (expected f16, bf16, f32, f64, c32 or c64; numpy names float16, bfloat16, float32, float64, complex64, complex128 work too)"
            )),
        }
    }
}

/// Runs `$body` with `$t` the element type of a run-time [`DType`]: one arm per type, each
/// with `type $t = ...;` in scope.
///
/// ```
/// use ttgt::{with_dtype, DType, Element};
/// fn bytes<T: Element>() -> usize { std::mem::size_of::<T>() }
/// assert_eq!(with_dtype!(DType::BF16, T => bytes::<T>()), 2);
/// assert_eq!(with_dtype!(DType::C64, T => bytes::<T>()), 16);
/// ```
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F16 => {
                type $t = $crate::tensor::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $t = $crate::tensor::bf16;
                $body
            }
            $crate::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::DType::F64 => {
                type $t = f64;
                $body
            }
            $crate::DType::C32 => {
                type $t = $crate::tensor::Complex32;
                $body
            }
            $crate::DType::C64 => {
                type $t = $crate::tensor::Complex64;
                $body
            }
        }
    };
}

/// An element type ttgt computes with. Sealed: implemented for `f32`, `f64`, `Complex32`,
/// `Complex64`, [`f16`] and [`bf16`] only.
///
/// ```
/// use ttgt::Element;
/// use num_complex::Complex64;
/// assert_eq!(f64::from_f64(2.5), 2.5);
/// assert_eq!(Complex64::from_parts(1.0, 2.0).conj(), Complex64::new(1.0, -2.0));
/// ```
pub trait Element:
    Copy
    + Send
    + Sync
    + Debug
    + Display
    + PartialEq
    + Zero
    + One
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + MulAssign
    + 'static
    + sealed::Sealed
{
    /// The run-time tag of this type.
    const DTYPE: DType;
    /// Converts a real number (rounding to `f32` where needed).
    fn from_f64(x: f64) -> Self;
    /// Builds a value from real and imaginary parts; the imaginary part is dropped for real types.
    fn from_parts(re: f64, im: f64) -> Self;
    /// Real part as `f64`.
    fn re(self) -> f64;
    /// Imaginary part as `f64` (0 for real types).
    fn im(self) -> f64;
    /// Complex conjugate (identity for real types).
    fn conj(self) -> Self;
    /// Absolute value (modulus for complex types) as `f64`.
    fn abs_f64(self) -> f64 {
        self.re().hypot(self.im())
    }
    /// Whether the value is exactly zero.
    fn is_exact_zero(self) -> bool {
        self.re() == 0.0 && self.im() == 0.0
    }
    /// Whether the value is exactly one.
    fn is_exact_one(self) -> bool {
        self.re() == 1.0 && self.im() == 0.0
    }
    /// `alpha * a + beta * b` rounded once: the half-precision types compute it in `f32`.
    #[inline(always)]
    fn axpby(alpha: Self, a: Self, beta: Self, b: Self) -> Self {
        alpha * a + beta * b
    }
    /// `alpha * a` rounded once (computed in `f32` for the half-precision types).
    #[inline(always)]
    fn scale(alpha: Self, a: Self) -> Self {
        alpha * a
    }
    /// Widens `src` to `f32` into `dst` (equal lengths; the real part of a complex value).
    ///
    /// ```
    /// use ttgt::{tensor::f16, Element};
    /// let mut out = [0.0f32; 2];
    /// f16::to_f32_slice(&[f16::from_f32(1.5), f16::from_f32(-2.0)], &mut out);
    /// assert_eq!(out, [1.5, -2.0]);
    /// ```
    fn to_f32_slice(src: &[Self], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.re() as f32;
        }
    }
    /// Rounds `src` to this type into `dst` (equal lengths; round to nearest, ties to even).
    ///
    /// ```
    /// use ttgt::{tensor::bf16, Element};
    /// let mut out = [bf16::ZERO; 1];
    /// bf16::from_f32_slice(&[1.0 + 2f32.powi(-9)], &mut out);
    /// assert_eq!(out[0].to_f32(), 1.0); // bf16 keeps 8 significant bits
    /// ```
    fn from_f32_slice(src: &[f32], dst: &mut [Self]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = Self::from_f64(*s as f64);
        }
    }
}

macro_rules! real_element {
    ($t:ty, $tag:expr) => {
        impl Element for $t {
            const DTYPE: DType = $tag;
            #[inline]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline]
            fn from_parts(re: f64, _im: f64) -> Self {
                re as $t
            }
            #[inline]
            fn re(self) -> f64 {
                self as f64
            }
            #[inline]
            fn im(self) -> f64 {
                0.0
            }
            #[inline]
            fn conj(self) -> Self {
                self
            }
        }
    };
}

macro_rules! complex_element {
    ($t:ty, $r:ty, $tag:expr) => {
        impl Element for $t {
            const DTYPE: DType = $tag;
            #[inline]
            fn from_f64(x: f64) -> Self {
                <$t>::new(x as $r, 0.0)
            }
            #[inline]
            fn from_parts(re: f64, im: f64) -> Self {
                <$t>::new(re as $r, im as $r)
            }
            #[inline]
            fn re(self) -> f64 {
                self.re as f64
            }
            #[inline]
            fn im(self) -> f64 {
                self.im as f64
            }
            #[inline]
            fn conj(self) -> Self {
                <$t>::new(self.re, -self.im)
            }
        }
    };
}

/// The half-precision storage types: conversions through `f32`, scaled sums computed in `f32`
/// and rounded once.
macro_rules! half_element {
    ($t:ty, $tag:expr) => {
        impl Element for $t {
            const DTYPE: DType = $tag;
            #[inline]
            fn from_f64(x: f64) -> Self {
                <$t>::from_f64(x)
            }
            #[inline]
            fn from_parts(re: f64, _im: f64) -> Self {
                <$t>::from_f64(re)
            }
            #[inline]
            fn re(self) -> f64 {
                self.to_f64()
            }
            #[inline]
            fn im(self) -> f64 {
                0.0
            }
            #[inline]
            fn conj(self) -> Self {
                self
            }
            #[inline(always)]
            fn axpby(alpha: Self, a: Self, beta: Self, b: Self) -> Self {
                <$t>::from_f32(alpha.to_f32() * a.to_f32() + beta.to_f32() * b.to_f32())
            }
            #[inline(always)]
            fn scale(alpha: Self, a: Self) -> Self {
                <$t>::from_f32(alpha.to_f32() * a.to_f32())
            }
            fn to_f32_slice(src: &[Self], dst: &mut [f32]) {
                src.convert_to_f32_slice(dst);
            }
            fn from_f32_slice(src: &[f32], dst: &mut [Self]) {
                dst.convert_from_f32_slice(src);
            }
        }
    };
}

half_element!(f16, DType::F16);
half_element!(bf16, DType::BF16);
real_element!(f32, DType::F32);
real_element!(f64, DType::F64);
complex_element!(Complex32, f32, DType::C32);
complex_element!(Complex64, f64, DType::C64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_table() {
        use DType::*;
        assert_eq!(F32.promote(F32), F32);
        assert_eq!(F32.promote(F64), F64);
        assert_eq!(F32.promote(C32), C32);
        assert_eq!(F64.promote(C32), C64);
        assert_eq!(C32.promote(C64), C64);
        assert_eq!(F16.promote(F16), F16);
        assert_eq!(BF16.promote(BF16), BF16);
        assert_eq!(F16.promote(BF16), F32);
        assert_eq!(F16.promote(F32), F32);
        assert_eq!(BF16.promote(F64), F64);
        assert_eq!(F16.promote(C32), C32);
        assert_eq!(C64.promote(BF16), C64);
    }

    #[test]
    fn half_types_scale_in_f32_and_round_once() {
        // alpha * a + beta * b computed in f32 and rounded once, on a grid of values.
        let vals = [-3.0f32, -0.7, 0.1, 1.0 + 2f32.powi(-10), 2.5, 1000.3];
        for &al in &vals {
            for &x in &vals {
                for &be in &vals {
                    for &y in &vals {
                        let h = |v: f32| f16::from_f32(v);
                        let want = f16::from_f32(
                            h(al).to_f32() * h(x).to_f32() + h(be).to_f32() * h(y).to_f32(),
                        );
                        assert_eq!(f16::axpby(h(al), h(x), h(be), h(y)), want);
                    }
                }
            }
        }
        assert_eq!(
            bf16::scale(bf16::from_f32(3.0), bf16::from_f32(0.5)).to_f32(),
            1.5
        );
        assert_eq!(f16::DTYPE.size_bytes(), 2);
        assert_eq!("bfloat16".parse::<DType>().unwrap(), DType::BF16);
        assert_eq!(DType::F16.numpy_name(), "float16");
    }

    #[test]
    fn parse_names() {
        assert_eq!("complex128".parse::<DType>().unwrap(), DType::C64);
        assert!("int8".parse::<DType>().is_err());
    }

    #[test]
    fn parts_roundtrip() {
        let z = Complex32::from_parts(1.5, -2.0);
        assert_eq!((z.re(), z.im()), (1.5, -2.0));
        assert_eq!(f32::from_parts(3.0, 9.0), 3.0);
        assert_eq!(Complex64::from_parts(3.0, 4.0).abs_f64(), 5.0);
    }
}

//! The element types ttgt computes with: `f32`, `f64`, [`Complex32`] and [`Complex64`].
//!
//! [`Element`] is sealed: the GEMM dispatch, the `.npy` descriptors and the transposition
//! micro-kernels are written for exactly these four types.

use std::fmt::{Debug, Display};
use std::ops::{Add, AddAssign, Mul, MulAssign, Sub};

use num_complex::{Complex32, Complex64};
use num_traits::{One, Zero};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for num_complex::Complex32 {}
    impl Sealed for num_complex::Complex64 {}
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
}

impl DType {
    /// All element types, in promotion order.
    pub const ALL: [DType; 4] = [DType::F32, DType::F64, DType::C32, DType::C64];

    /// Size of one element in bytes.
    ///
    /// ```
    /// assert_eq!(ttgt::DType::C64.size_bytes(), 16);
    /// ```
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::C32 => 8,
            DType::C64 => 16,
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

    /// The smallest type that holds values of both `self` and `other` (numpy's promotion).
    ///
    /// ```
    /// use ttgt::DType;
    /// assert_eq!(DType::F64.promote(DType::C32), DType::C64);
    /// ```
    pub fn promote(self, other: DType) -> DType {
        let complex = self.is_complex() || other.is_complex();
        let wide =
            matches!(self, DType::F64 | DType::C64) || matches!(other, DType::F64 | DType::C64);
        match (complex, wide) {
            (false, false) => DType::F32,
            (false, true) => DType::F64,
            (true, false) => DType::C32,
            (true, true) => DType::C64,
        }
    }

    /// Short name used by the CLI and the benches (`f32`, `f64`, `c32`, `c64`).
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
        }
    }
}

impl DType {
    /// numpy's name of the type (`float32`, `float64`, `complex64`, `complex128`): `C32` is
    /// numpy's `complex64` (two `f32`), `C64` its `complex128`.
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
            other => Err(format!(
                "unknown dtype {other:?} (expected f32, f64, c32 or c64; numpy names float32, float64, complex64, complex128 work too)"
            )),
        }
    }
}

/// An element type ttgt computes with. Sealed: implemented for `f32`, `f64`, `Complex32`,
/// `Complex64` only.
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

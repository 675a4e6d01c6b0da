//! Parsing of `--alpha` / `--beta`: real numbers, or complex numbers in numpy's notation.

use crate::error::{CliError, CliResult};

/// A scalar as real and imaginary parts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scalar {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

impl Scalar {
    /// A real scalar.
    pub const fn real(re: f64) -> Self {
        Scalar { re, im: 0.0 }
    }

    /// Whether the imaginary part is nonzero.
    pub fn is_complex(self) -> bool {
        self.im != 0.0
    }

    /// Whether the scalar is exactly zero.
    pub fn is_zero(self) -> bool {
        self.re == 0.0 && self.im == 0.0
    }

    /// Converts to an element type (the imaginary part must be zero for real types).
    pub fn to<T: ttgt::Element>(self) -> T {
        T::from_parts(self.re, self.im)
    }
}

/// Parses `2`, `-0.5`, `1e-3`, `1+2j`, `1-2j`, `2j`, `-j`, `(1+2j)` (`i` works for `j`).
pub fn parse_scalar(text: &str, flag: &str) -> CliResult<Scalar> {
    parse_inner(text).ok_or_else(|| {
        CliError::new(format!(
            "{flag} {text:?} is not a number: expected a real number such as 2 or -0.5, \
             or a complex one such as 1+2j, 1-2j or 2j"
        ))
    })
}

fn parse_inner(text: &str) -> Option<Scalar> {
    let s = text.trim();
    let s = s
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(s)
        .trim();
    let Some(body) = s.strip_suffix(['j', 'J', 'i', 'I']) else {
        return real(s).map(Scalar::real);
    };
    // Split "re±im" at the last sign that does not belong to an exponent.
    let bytes = body.as_bytes();
    let split = (1..bytes.len())
        .rev()
        .find(|&i| matches!(bytes[i], b'+' | b'-') && !matches!(bytes[i - 1], b'e' | b'E'));
    let (re, im) = match split {
        Some(i) => (real(&body[..i])?, imaginary(&body[i..])?),
        None => (0.0, imaginary(body)?),
    };
    Some(Scalar { re, im })
}

fn real(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() || s.starts_with("+-") || s.starts_with("-+") {
        return None;
    }
    s.parse().ok()
}

/// The coefficient of `j`: a number, or nothing / a bare sign for ±1.
fn imaginary(s: &str) -> Option<f64> {
    match s.trim() {
        "" | "+" => Some(1.0),
        "-" => Some(-1.0),
        t => real(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<(f64, f64)> {
        parse_inner(s).map(|z| (z.re, z.im))
    }

    #[test]
    fn numpy_notation() {
        assert_eq!(p("2"), Some((2.0, 0.0)));
        assert_eq!(p("-0.5"), Some((-0.5, 0.0)));
        assert_eq!(p("1e-3"), Some((1e-3, 0.0)));
        assert_eq!(p("1+2j"), Some((1.0, 2.0)));
        assert_eq!(p("1-2j"), Some((1.0, -2.0)));
        assert_eq!(p("-1.5e-1-2.5e+2j"), Some((-0.15, -250.0)));
        assert_eq!(p("2j"), Some((0.0, 2.0)));
        assert_eq!(p("-j"), Some((0.0, -1.0)));
        assert_eq!(p("(3-4j)"), Some((3.0, -4.0)));
        assert_eq!(p("1e5j"), Some((0.0, 1e5)));
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "x", "1+", "1+2", "j1", "1+-2j", "1++2j", "2jj", "()"] {
            assert_eq!(p(s), None, "{s:?}");
        }
    }
}

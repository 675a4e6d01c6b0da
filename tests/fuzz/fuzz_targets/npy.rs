//! The CLI's `.npy` reader on arbitrary bytes: an array or an error, never a panic or an
//! allocation beyond the bytes given; an array read writes back to a file that reads as the
//! same array.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../../src/bin/ttgt/error.rs"]
#[allow(dead_code)]
mod error;
#[path = "../../../src/bin/ttgt/npy.rs"]
#[allow(dead_code, unused_macros, unused_imports)]
mod npy;

use npy::{AnyArray, CliElement};

/// Writes `a` as `.npy` bytes, as `ttgt contract -o` does.
fn bytes<T: CliElement>(a: &ndarray::ArrayD<T>) -> Vec<u8> {
    let mut out = Vec::new();
    T::write_npy(a, &mut out).expect("writing to memory");
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(a) = npy::parse_any(data, "input") else {
        return;
    };
    let back = match &a {
        AnyArray::F16(x) => bytes(x),
        AnyArray::BF16(x) => bytes(x),
        AnyArray::F32(x) => bytes(x),
        AnyArray::F64(x) => bytes(x),
        AnyArray::C32(x) => bytes(x),
        AnyArray::C64(x) => bytes(x),
    };
    let b = npy::parse_any(&back, "written").expect("a written array reads back");
    let same = match (&a, &b) {
        // Bitwise: NaN payloads included.
        (AnyArray::F16(x), AnyArray::F16(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (AnyArray::BF16(x), AnyArray::BF16(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (AnyArray::F32(x), AnyArray::F32(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (AnyArray::F64(x), AnyArray::F64(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (AnyArray::C32(x), AnyArray::C32(y)) => {
            x.shape() == y.shape()
                && x.iter().zip(y).all(|(p, q)| {
                    p.re.to_bits() == q.re.to_bits() && p.im.to_bits() == q.im.to_bits()
                })
        }
        (AnyArray::C64(x), AnyArray::C64(y)) => {
            x.shape() == y.shape()
                && x.iter().zip(y).all(|(p, q)| {
                    p.re.to_bits() == q.re.to_bits() && p.im.to_bits() == q.im.to_bits()
                })
        }
        _ => false,
    };
    assert!(same, "round trip changed the array");
});

//! Reading and writing `.npy` files of the six element types, and conversion between them.
//!
//! `float16` files are numpy's `'<f2'`. numpy has no bfloat16 of its own: an
//! `ml_dtypes.bfloat16` array is saved with the descriptor `'<V2'` (two raw bytes), and
//! `np.load` gives it back as such (`.view(ml_dtypes.bfloat16)` restores it); ttgt reads a
//! 2-byte void descriptor as bf16 and writes bf16 results with `'<V2'`.

use std::io::Write;
use std::path::Path;

use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use ndarray_npy::npy::header::Header;
use ndarray_npy::ReadNpyExt;
use num_complex::{Complex32, Complex64};
use ttgt::tensor::{bf16, f16};
use ttgt::{DType, Element};

use crate::error::{CliError, CliResult};

/// An array of any of the six element types.
#[derive(Clone, Debug)]
pub enum AnyArray {
    /// `float16`.
    F16(ArrayD<f16>),
    /// bfloat16 (`ml_dtypes.bfloat16`, stored as `'<V2'`).
    BF16(ArrayD<bf16>),
    /// `float32`.
    F32(ArrayD<f32>),
    /// `float64`.
    F64(ArrayD<f64>),
    /// `complex64`.
    C32(ArrayD<Complex32>),
    /// `complex128`.
    C64(ArrayD<Complex64>),
}

impl AnyArray {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            AnyArray::F16(_) => DType::F16,
            AnyArray::BF16(_) => DType::BF16,
            AnyArray::F32(_) => DType::F32,
            AnyArray::F64(_) => DType::F64,
            AnyArray::C32(_) => DType::C32,
            AnyArray::C64(_) => DType::C64,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            AnyArray::F16(a) => a.shape(),
            AnyArray::BF16(a) => a.shape(),
            AnyArray::F32(a) => a.shape(),
            AnyArray::F64(a) => a.shape(),
            AnyArray::C32(a) => a.shape(),
            AnyArray::C64(a) => a.shape(),
        }
    }
}

/// Converts every element (keeping the memory order of contiguous arrays).
fn convert<S: Element, T: Element>(a: ArrayD<S>) -> ArrayD<T> {
    a.mapv(|x| T::from_parts(x.re(), x.im()))
}

/// An element type the CLI reads, computes with and writes.
pub trait CliElement: Element {
    /// The array converted to this type (moved when it already has it). Converting complex to
    /// real drops the imaginary part; callers only convert to the promoted type.
    fn from_any(a: AnyArray) -> ArrayD<Self>;
    /// Writes `a` as the bytes of an `.npy` file.
    fn write_npy(a: &ArrayD<Self>, w: &mut dyn Write) -> std::io::Result<()>;
}

macro_rules! cli_element {
    ($t:ty, $variant:ident, $write:expr; $($other:ident),*) => {
        impl CliElement for $t {
            fn from_any(a: AnyArray) -> ArrayD<Self> {
                match a {
                    AnyArray::$variant(x) => x,
                    $(AnyArray::$other(x) => convert(x),)*
                }
            }
            fn write_npy(a: &ArrayD<Self>, w: &mut dyn Write) -> std::io::Result<()> {
                $write(a, w)
            }
        }
    };
}

/// The `.npy` writer of ndarray-npy (the types it knows).
fn write_known<T: ndarray_npy::WritableElement>(
    a: &ArrayD<T>,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    ndarray_npy::WriteNpyExt::write_npy(a, w).map_err(std::io::Error::other)
}

cli_element!(f16, F16, |a, w| write_half(a, w, "<f2", f16::to_bits); F32, F64, C32, C64, BF16);
cli_element!(bf16, BF16, |a, w| write_half(a, w, "<V2", bf16::to_bits); F32, F64, C32, C64, F16);
cli_element!(f32, F32, write_known; F64, C32, C64, F16, BF16);
cli_element!(f64, F64, write_known; F32, C32, C64, F16, BF16);
cli_element!(Complex32, C32, write_known; F32, F64, C64, F16, BF16);
cli_element!(Complex64, C64, write_known; F32, F64, C32, F16, BF16);

/// Writes a 2-byte element array as a version 1.0 `.npy` file in C order: the header dict
/// padded with spaces so that the data starts on a 64-byte boundary, then the elements'
/// bits little-endian.
fn write_half<T: Copy>(
    a: &ArrayD<T>,
    w: &mut dyn Write,
    descr: &str,
    bits: fn(T) -> u16,
) -> std::io::Result<()> {
    let shape = match a.shape() {
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + header length (2) + dict + newline: a multiple of 64
    let pad = (64 - (10 + dict.len() + 1) % 64) % 64;
    dict.push_str(&" ".repeat(pad));
    dict.push('\n');
    let len = u16::try_from(dict.len())
        .map_err(|_| std::io::Error::other("the .npy header is longer than 65535 bytes"))?;
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(dict.as_bytes())?;
    let mut buf = Vec::with_capacity(a.len() * 2);
    for &x in a.iter() {
        buf.extend_from_slice(&bits(x).to_le_bytes());
    }
    w.write_all(&buf)
}

/// Reads the data of a 2-byte element `.npy` file (`data`: the bytes after the header, at
/// least as many as the shape needs, checked by the caller) in C or Fortran order.
fn read_half<T>(
    header: &Header,
    data: &[u8],
    big_endian: bool,
    from_bits: fn(u16) -> T,
) -> CliResult<ArrayD<T>> {
    let n: usize = header.shape.iter().product();
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| CliError::new(format!("cannot allocate {n} 2-byte elements")))?;
    v.extend(data.chunks_exact(2).take(n).map(|b| {
        let pair = [b[0], b[1]];
        from_bits(if big_endian {
            u16::from_be_bytes(pair)
        } else {
            u16::from_le_bytes(pair)
        })
    }));
    let shape = IxDyn(&header.shape);
    let a = if header.layout.is_fortran() {
        ArrayD::from_shape_vec(shape.f(), v)
    } else {
        ArrayD::from_shape_vec(shape, v)
    };
    a.map_err(|e| CliError::new(e.to_string()))
}

/// Calls `$f::<T>($args)` with `T` the element type of `$dtype`.
macro_rules! with_dtype {
    ($dtype:expr, $f:ident($($arg:expr),* $(,)?)) => {
        ttgt::with_dtype!($dtype, T => $f::<T>($($arg),*))
    };
}
pub(crate) use with_dtype;

/// The element type of a `.npy` type descriptor such as `'<f8'`.
fn dtype_of_descriptor(descr: &str) -> Option<DType> {
    let d = descr.trim_matches(|c| c == '\'' || c == '"');
    let code = d.strip_prefix(['<', '>', '=', '|']).unwrap_or(d);
    match code {
        "f4" => Some(DType::F32),
        "f8" => Some(DType::F64),
        "c8" => Some(DType::C32),
        "c16" => Some(DType::C64),
        "f2" => Some(DType::F16),
        // numpy's descriptor of an ml_dtypes.bfloat16 array: two raw bytes
        "V2" => Some(DType::BF16),
        _ => None,
    }
}

/// Reads an `.npy` file of `float16`, bfloat16 (`'<V2'`), `float32`, `float64`, `complex64`
/// or `complex128` elements in C or Fortran order. `what` names the file in messages (`operand 0 (A.npy)`).
pub fn read_any(path: &Path, what: &str) -> CliResult<AnyArray> {
    let bytes =
        std::fs::read(path).map_err(|e| CliError::new(format!("cannot read {what}: {e}")))?;
    parse_any(&bytes, what)
}

/// Parses the bytes of an `.npy` file as [`read_any`] does: any input gives an array or an
/// error, never a panic or an allocation larger than the data it holds
/// (`tests/fuzz/fuzz_targets/npy.rs`).
pub fn parse_any(bytes: &[u8], what: &str) -> CliResult<AnyArray> {
    check_header_length(bytes, what)?;
    let mut data = bytes;
    let header = Header::from_reader(&mut data)
        .map_err(|e| CliError::new(format!("{what} is not a valid .npy file: {e}")))?;
    let descr = header.type_descriptor.to_string();
    let dtype = dtype_of_descriptor(&descr).ok_or_else(|| {
        CliError::new(format!(
            "{what} has element type {descr}; ttgt reads float16, bfloat16, float32, float64, \
             complex64 and complex128 ('<f2', '<V2', '<f4', '<f8', '<c8', '<c16')"
        ))
    })?;
    check_length(&header, dtype, data.len(), what)?;
    let read_err = |e: ndarray_npy::ReadNpyError| CliError::new(format!("cannot read {what}: {e}"));
    let big = descr
        .trim_matches(|c| c == '\'' || c == '"')
        .starts_with('>');
    Ok(match dtype {
        DType::F16 => AnyArray::F16(read_half(&header, data, big, f16::from_bits)?),
        DType::BF16 => AnyArray::BF16(read_half(&header, data, big, bf16::from_bits)?),
        DType::F32 => AnyArray::F32(ArrayD::read_npy(bytes).map_err(read_err)?),
        DType::F64 => AnyArray::F64(ArrayD::read_npy(bytes).map_err(read_err)?),
        DType::C32 => AnyArray::C32(ArrayD::read_npy(bytes).map_err(read_err)?),
        DType::C64 => AnyArray::C64(ArrayD::read_npy(bytes).map_err(read_err)?),
    })
}

/// Rejects a file whose header announces more bytes than the file holds, before the `.npy`
/// reader allocates a buffer of that length (up to 4 GiB from a version 2 file of a few
/// bytes), and a header whose brackets nest too deeply for the reader to parse in time.
fn check_header_length(bytes: &[u8], what: &str) -> CliResult<()> {
    // Magic (6 bytes), version (2), then the header's length: 2 bytes in version 1, 4 after.
    let (len, start) = match bytes.get(6) {
        Some(1) => (
            bytes
                .get(8..10)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize),
            10,
        ),
        Some(_) => (
            bytes
                .get(8..12)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize),
            12,
        ),
        None => (None, 0),
    };
    let n = match len {
        Some(n) if n > bytes.len() - start => {
            return Err(CliError::new(format!(
                "{what} is not a valid .npy file: its header announces {n} bytes but only {} \
                 follow",
                bytes.len() - start
            )))
        }
        Some(n) => n,
        // Anything else is for the reader to accept or reject.
        None => return Ok(()),
    };
    // The header is a Python literal, a flat dict with a shape tuple (a structured type's
    // list of tuples nests deeper). The reader's literal parser takes time exponential in
    // the nesting depth (a 128-byte header of nested braces took 26 s), so deep ones are
    // refused first.
    let mut depth = 0usize;
    for &c in &bytes[start..start + n] {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_HEADER_DEPTH {
            return Err(CliError::new(format!(
                "{what} is not a valid .npy file: its header nests brackets more than \
                 {MAX_HEADER_DEPTH} deep"
            )));
        }
    }
    Ok(())
}

/// Deepest bracket nesting accepted in an `.npy` header (numpy writes 2: the dict and the
/// shape tuple; structured types, which ttgt does not read, a few more).
const MAX_HEADER_DEPTH: usize = 6;

/// Rejects a header whose shape needs more data than the file holds (`data_len` bytes after
/// the header), before anything is allocated for it.
fn check_length(header: &Header, dtype: DType, data_len: usize, what: &str) -> CliResult<()> {
    let bytes = header
        .shape
        .iter()
        .try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d));
    match bytes {
        Some(b) if b <= data_len => Ok(()),
        _ => Err(CliError::new(format!(
            "{what} is truncated: its header announces shape {:?} of {dtype} but only \
             {data_len} bytes of data follow",
            header.shape
        ))),
    }
}

/// Writes `a` as an `.npy` file (C order when `a` is in standard layout), whole or not at
/// all (a temporary file renamed over `path`).
pub fn write<T: CliElement>(path: &Path, a: &ArrayD<T>) -> CliResult<()> {
    ttgt::files::write_atomic(path, |w| T::write_npy(a, w))
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}

/// A zero-filled row-major array, or an error instead of an abort when memory runs out.
pub fn zeros<T: Element>(shape: &[usize], what: &str) -> CliResult<ArrayD<T>> {
    filled(shape, what, |_| T::zero())
}

/// A row-major array of `shape` whose elements (in memory order) are `f(i)`, or an error
/// instead of an abort or an OOM kill when memory runs out (also when it is larger than the
/// memory the system has available).
pub fn filled<T: Element>(
    shape: &[usize],
    what: &str,
    mut f: impl FnMut(usize) -> T,
) -> CliResult<ArrayD<T>> {
    let too_big = || {
        CliError::new(format!(
            "cannot allocate {what} of shape {shape:?} ({})",
            T::DTYPE
        ))
    };
    let n = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|n| n.checked_mul(T::DTYPE.size_bytes()).is_some())
        .ok_or_else(too_big)?;
    ttgt::tensor::ensure_available(n * T::DTYPE.size_bytes(), what).map_err(|_| too_big())?;
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| too_big())?;
    data.extend((0..n).map(&mut f));
    ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|e| CliError::new(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors() {
        assert_eq!(dtype_of_descriptor("'<f8'"), Some(DType::F64));
        assert_eq!(dtype_of_descriptor("'>c16'"), Some(DType::C64));
        assert_eq!(dtype_of_descriptor("'<f4'"), Some(DType::F32));
        assert_eq!(dtype_of_descriptor("'<c8'"), Some(DType::C32));
        assert_eq!(dtype_of_descriptor("'<i8'"), None);
        assert_eq!(dtype_of_descriptor("'<f2'"), Some(DType::F16));
        assert_eq!(dtype_of_descriptor("'|V2'"), Some(DType::BF16));
        assert_eq!(dtype_of_descriptor("'<V4'"), None);
    }

    #[test]
    fn half_files_round_trip_in_c_and_fortran_order() {
        let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 5]), |i| {
            f16::from_f32((i[0] * 15 + i[1] * 5 + i[2]) as f32 * 0.25 - 3.0)
        });
        let mut bytes = Vec::new();
        f16::write_npy(&a, &mut bytes).unwrap();
        assert_eq!(
            (10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize) % 64,
            0
        );
        match parse_any(&bytes, "x.npy").unwrap() {
            AnyArray::F16(b) => assert_eq!(a, b),
            other => panic!("read as {:?}", other.dtype()),
        }
        let h = a.mapv(|x| bf16::from_f32(x.to_f32()));
        let mut bytes = Vec::new();
        bf16::write_npy(&h, &mut bytes).unwrap();
        assert!(String::from_utf8_lossy(&bytes[..80]).contains("'<V2'"));
        assert_eq!(bf16::from_any(parse_any(&bytes, "x.npy").unwrap()), h);
        // A Fortran-order, big-endian float16 file as numpy writes it.
        let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_bits().to_be_bytes())
            .collect();
        let mut dict = "{'descr': '>f2', 'fortran_order': True, 'shape': (2, 3), }".to_string();
        dict.push_str(&" ".repeat((64 - (10 + dict.len() + 1) % 64) % 64));
        dict.push('\n');
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend((dict.len() as u16).to_le_bytes());
        f.extend(dict.as_bytes());
        f.extend(data);
        let got = f32::from_any(parse_any(&f, "x.npy").unwrap());
        assert_eq!(
            got,
            ndarray::arr2(&[[1.0f32, 3.0, 5.0], [2.0, 4.0, 6.0]]).into_dyn()
        );
        // A truncated half file is refused.
        assert!(parse_any(&f[..f.len() - 1], "x.npy").is_err());
    }

    #[test]
    fn headers_longer_than_the_file_are_rejected_before_allocation() {
        // Version 2 announcing a header of 0xfffffff0 bytes (the reader would allocate it).
        let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
        v2.extend(0xffff_fff0u32.to_le_bytes());
        let e = parse_any(&v2, "x.npy").unwrap_err().to_string();
        assert!(
            e.contains("announces 4294967280 bytes but only 0 follow"),
            "{e}"
        );
        let mut v1 = b"\x93NUMPY\x01\x00".to_vec();
        v1.extend(200u16.to_le_bytes());
        v1.extend([b' '; 10]);
        let e = parse_any(&v1, "x.npy").unwrap_err().to_string();
        assert!(e.contains("announces 200 bytes but only 10 follow"), "{e}");
        // Nested braces (the reader's parser would take seconds to minutes).
        let mut deep = b"\x93NUMPY\x01\x00".to_vec();
        let text = format!("{{'descr': '<f8', {}", "{'a', ".repeat(40));
        deep.extend((text.len() as u16).to_le_bytes());
        deep.extend(text.as_bytes());
        let t = std::time::Instant::now();
        let e = parse_any(&deep, "x.npy").unwrap_err().to_string();
        assert!(e.contains("nests brackets more than 6 deep"), "{e}");
        assert!(t.elapsed().as_secs() < 1);
        // A valid file still reads.
        let mut ok = Vec::new();
        ndarray_npy::WriteNpyExt::write_npy(&ndarray::arr1(&[1.0f64, 2.0]), &mut ok).unwrap();
        assert_eq!(parse_any(&ok, "x.npy").unwrap().shape(), &[2]);
    }

    #[test]
    fn conversion_keeps_values() {
        let a = ndarray::arr1(&[1.5f32, -2.0]).into_dyn();
        let z = Complex64::from_any(AnyArray::F32(a));
        assert_eq!(z[[1]], Complex64::new(-2.0, 0.0));
    }
}

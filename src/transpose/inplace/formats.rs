//! Matrix storage formats and in-place conversion between them (GKK Sections 1.2 and 5).
//!
//! An `m × n` matrix with `mb × nb` blocks: `m = M*mb + rm`, `n = N*nb + cn`. The standard
//! formats [`StorageFormat::Cm`] and [`StorageFormat::Rm`] store the whole matrix column- or
//! row-major. The four blocked formats split it into the full-block part `A11` (`M*mb ×
//! N*nb`), the right strip `A12` (`M*mb × cn`), the bottom strip `A21` (`rm × N*nb`) and the
//! corner `A22` (`rm × cn`); each is stored contiguously with blocks of one size (`mb × nb`,
//! `mb × cn`, `rm × nb`, `rm × cn`), laid out by the format's inter-block order (blocks
//! column- or row-major) and intra-block order (elements of a block column- or row-major).
//! Formats with column-major block order store the parts as `A11, A12, A21, A22`, those with
//! row-major block order as `A11, A21, A12, A22`.
//!
//! Within one part, every format is a mixed-radix number over the digits `(i2, i1, j2, j1)`
//! (block row, row in block, block column, column in block) in some order, so a conversion
//! is a digit permutation, run in place by [`permute_in_place`]. From or to the standard
//! formats the parts are first packed out of (or last unpacked into) the interleaved matrix:
//! the segments that belong to the top (or left) parts are moved together, with the
//! `rm` (or `cn`) elements between them parked in a workspace of `(n-1)*rm` (or `(m-1)*cn`)
//! elements.

use super::{InPlaceOptions, InPlacePlan, Scratch};
use crate::error::{Error, Result};

/// A matrix storage format.
///
/// ```
/// use ttgt::transpose::inplace::StorageFormat;
/// assert_eq!(StorageFormat::ALL.len(), 6);
/// assert_eq!("ccrb".parse::<StorageFormat>().unwrap(), StorageFormat::Ccrb);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StorageFormat {
    /// Column-major.
    Cm,
    /// Row-major.
    Rm,
    /// Blocks column-major, elements in a block column-major.
    Ccrb,
    /// Blocks column-major, elements in a block row-major.
    Crrb,
    /// Blocks row-major, elements in a block column-major.
    Rcrb,
    /// Blocks row-major, elements in a block row-major.
    Rrrb,
}

/// The four digits of an element's position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Digit {
    I2,
    I1,
    J2,
    J1,
}
use Digit::*;

/// A part of the matrix: its block grid and block size.
#[derive(Clone, Copy, Debug)]
struct Part {
    blocks_m: usize,
    blocks_n: usize,
    mb: usize,
    nb: usize,
}

impl Part {
    fn len(&self) -> usize {
        self.blocks_m * self.blocks_n * self.mb * self.nb
    }
    fn radix(&self, d: Digit) -> usize {
        match d {
            I2 => self.blocks_m,
            I1 => self.mb,
            J2 => self.blocks_n,
            J1 => self.nb,
        }
    }
}

impl StorageFormat {
    /// All formats.
    pub const ALL: [StorageFormat; 6] = [
        StorageFormat::Cm,
        StorageFormat::Rm,
        StorageFormat::Ccrb,
        StorageFormat::Crrb,
        StorageFormat::Rcrb,
        StorageFormat::Rrrb,
    ];

    /// The mnemonic (`CM`, `RM`, `CCRB`, `CRRB`, `RCRB`, `RRRB`).
    ///
    /// ```
    /// assert_eq!(ttgt::transpose::inplace::StorageFormat::Rcrb.name(), "RCRB");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            StorageFormat::Cm => "CM",
            StorageFormat::Rm => "RM",
            StorageFormat::Ccrb => "CCRB",
            StorageFormat::Crrb => "CRRB",
            StorageFormat::Rcrb => "RCRB",
            StorageFormat::Rrrb => "RRRB",
        }
    }

    /// Digits, most significant first.
    fn digits(self) -> [Digit; 4] {
        match self {
            StorageFormat::Cm => [J2, J1, I2, I1],
            StorageFormat::Ccrb => [J2, I2, J1, I1],
            StorageFormat::Crrb => [J2, I2, I1, J1],
            StorageFormat::Rcrb => [I2, J2, J1, I1],
            StorageFormat::Rrrb => [I2, J2, I1, J1],
            StorageFormat::Rm => [I2, I1, J2, J1],
        }
    }

    /// Whether the parts are stored `A11, A12, A21, A22` (column-major block order).
    fn column_parts(self) -> bool {
        matches!(
            self,
            StorageFormat::Cm | StorageFormat::Ccrb | StorageFormat::Crrb
        )
    }
}

impl std::str::FromStr for StorageFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        StorageFormat::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "unknown storage format {s:?} (CM, RM, CCRB, CRRB, RCRB, RRRB)"
                ))
            })
    }
}

/// The parts `[A11, A12, A21, A22]`.
fn parts(m: usize, n: usize, mb: usize, nb: usize) -> [Part; 4] {
    let (bm, rm, bn, cn) = (m / mb, m % mb, n / nb, n % nb);
    [
        Part {
            blocks_m: bm,
            blocks_n: bn,
            mb,
            nb,
        },
        Part {
            blocks_m: bm,
            blocks_n: 1,
            mb,
            nb: cn,
        },
        Part {
            blocks_m: 1,
            blocks_n: bn,
            mb: rm,
            nb,
        },
        Part {
            blocks_m: 1,
            blocks_n: 1,
            mb: rm,
            nb: cn,
        },
    ]
}

/// Storage order of the parts for a format.
fn part_order(f: StorageFormat) -> [usize; 4] {
    if f.column_parts() {
        [0, 1, 2, 3]
    } else {
        [0, 2, 1, 3]
    }
}

fn check_blocks(mb: usize, nb: usize) -> Result<()> {
    if mb == 0 || nb == 0 {
        return Err(Error::Layout(format!(
            "block sizes must be at least 1, got {mb} x {nb}"
        )));
    }
    Ok(())
}

/// The offset of element `(i, j)` of an `m × n` matrix with `mb × nb` blocks stored in
/// `format` (the storage mapping the conversions implement).
///
/// ```
/// use ttgt::transpose::inplace::{format_offset, StorageFormat::*};
/// assert_eq!(format_offset(Cm, 4, 6, 2, 3, 1, 2).unwrap(), 1 + 2 * 4);
/// assert_eq!(format_offset(Rm, 4, 6, 2, 3, 1, 2).unwrap(), 6 + 2);
/// // CCRB, 2 x 2 blocks of 2 x 3: element (1, 4) is in block (0, 1), at (1, 1) inside it
/// assert_eq!(format_offset(Ccrb, 4, 6, 2, 3, 1, 4).unwrap(), 2 * 6 + 1 + 1 * 2);
/// assert!(format_offset(Cm, 4, 6, 2, 3, 4, 0).is_err());
/// ```
pub fn format_offset(
    format: StorageFormat,
    m: usize,
    n: usize,
    mb: usize,
    nb: usize,
    i: usize,
    j: usize,
) -> Result<usize> {
    check_blocks(mb, nb)?;
    if i >= m || j >= n {
        return Err(Error::Layout(format!(
            "element ({i}, {j}) is outside a {m} x {n} matrix"
        )));
    }
    match format {
        StorageFormat::Cm => return Ok(i + j * m),
        StorageFormat::Rm => return Ok(i * n + j),
        _ => {}
    }
    let ps = parts(m, n, mb, nb);
    let (top, left) = (ps[0].blocks_m * mb, ps[0].blocks_n * nb);
    let which = 2 * usize::from(i >= top) + usize::from(j >= left);
    let (li, lj) = (
        i - if i >= top { top } else { 0 },
        j - if j >= left { left } else { 0 },
    );
    let p = ps[which];
    let value = |d: Digit| match d {
        I2 => li / p.mb,
        I1 => li % p.mb,
        J2 => lj / p.nb,
        J1 => lj % p.nb,
    };
    let inner = format
        .digits()
        .iter()
        .fold(0usize, |acc, &d| acc * p.radix(d) + value(d));
    let base: usize = part_order(format)
        .iter()
        .take_while(|&&k| k != which)
        .map(|&k| ps[k].len())
        .sum();
    Ok(base + inner)
}

/// Moves `n_seg` segments of `n_con` elements, `n_sep` apart, to the front (in order); the
/// elements between them follow, in order.
/// `gaps` is the workspace ([`gaps_len`] elements reserved).
fn pack<T: Copy>(data: &mut [T], n_seg: usize, n_con: usize, n_sep: usize, gaps: &mut Vec<T>) {
    if gaps_len(n_seg, n_con, n_sep) == 0 {
        return;
    }
    gaps.clear();
    for s in 0..n_seg - 1 {
        let at = s * (n_con + n_sep) + n_con;
        gaps.extend_from_slice(&data[at..at + n_sep]);
    }
    for s in 1..n_seg {
        let from = s * (n_con + n_sep);
        data.copy_within(from..from + n_con, s * n_con);
    }
    data[n_seg * n_con..n_seg * n_con + gaps.len()].copy_from_slice(gaps);
}

/// The inverse of [`pack`].
fn unpack<T: Copy>(data: &mut [T], n_seg: usize, n_con: usize, n_sep: usize, gaps: &mut Vec<T>) {
    if gaps_len(n_seg, n_con, n_sep) == 0 {
        return;
    }
    let start = n_seg * n_con;
    gaps.clear();
    gaps.extend_from_slice(&data[start..start + (n_seg - 1) * n_sep]);
    for s in (1..n_seg).rev() {
        data.copy_within(s * n_con..(s + 1) * n_con, s * (n_con + n_sep));
    }
    for (s, g) in gaps.chunks(n_sep).enumerate() {
        let at = s * (n_con + n_sep) + n_con;
        data[at..at + n_sep].copy_from_slice(g);
    }
}

/// Elements of [`pack`]'s and [`unpack`]'s workspace.
fn gaps_len(n_seg: usize, n_con: usize, n_sep: usize) -> usize {
    if n_sep == 0 || n_seg <= 1 || n_con == 0 {
        0
    } else {
        (n_seg - 1) * n_sep
    }
}

fn workspace<T>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    if len == 0 {
        return Ok(v);
    }
    super::scratch::fail_point()?;
    v.try_reserve_exact(len).map_err(|_| Error::Allocation {
        bytes: len.saturating_mul(std::mem::size_of::<T>()),
        what: "format conversion packing workspace".into(),
    })?;
    Ok(v)
}

/// Converts an `m × n` matrix with `mb × nb` blocks from storage format `from` to `to` in
/// place ([`format_offset`] defines both layouts). Works for any `m`, `n` (partial blocks
/// are stored as separate parts). Workspace: none between blocked formats; `(n-1)*(m mod
/// mb)` elements from/to column-major and `(m-1)*(n mod nb)` from/to row-major when the
/// blocks do not divide the matrix.
///
/// ```
/// use ttgt::transpose::inplace::{convert_format, format_offset, StorageFormat::*};
/// let (m, n, mb, nb) = (5, 7, 2, 3);
/// let mut v: Vec<usize> = vec![0; m * n];
/// for i in 0..m { for j in 0..n { v[format_offset(Cm, m, n, mb, nb, i, j).unwrap()] = 10 * i + j; } }
/// convert_format(&mut v, m, n, mb, nb, Cm, Rrrb).unwrap();
/// assert_eq!(v[format_offset(Rrrb, m, n, mb, nb, 3, 4).unwrap()], 34);
/// convert_format(&mut v, m, n, mb, nb, Rrrb, Rm).unwrap();
/// assert_eq!(v[..7], [0, 1, 2, 3, 4, 5, 6]);
/// ```
pub fn convert_format<T: Copy + Send + Sync>(
    data: &mut [T],
    m: usize,
    n: usize,
    mb: usize,
    nb: usize,
    from: StorageFormat,
    to: StorageFormat,
) -> Result<()> {
    check_blocks(mb, nb)?;
    let len = m.checked_mul(n).ok_or_else(|| Error::SizeOverflow {
        what: format!("a {m} x {n} matrix"),
    })?;
    if data.len() != len {
        return Err(Error::Layout(format!(
            "a {m} x {n} matrix has {len} elements but the slice has {}",
            data.len()
        )));
    }
    if from == to || len == 0 {
        return Ok(());
    }
    let ps = parts(m, n, mb, nb);
    let (rm, cn) = (m % mb, n % nb);
    // Everything that can fail comes before anything moves: the plans of the parts'
    // permutations, their buffers and the packing workspace, so that a failed conversion
    // leaves `data` as it was.
    let (fd, td) = (from.digits(), to.digits());
    let perm: Vec<usize> = td
        .iter()
        // Every format orders the same four digits.
        .map(|d| fd.iter().position(|e| e == d).unwrap_or(0))
        .collect();
    let mut scratch = Scratch::new();
    let mut plans = Vec::new();
    for &k in &part_order(from) {
        let p = ps[k];
        let shape: Vec<usize> = fd.iter().map(|&d| p.radix(d)).collect();
        let plan = InPlacePlan::new(
            &shape,
            &perm,
            std::mem::size_of::<T>(),
            &InPlaceOptions::default(),
        )?;
        plan.reserve_into(&mut scratch)?;
        plans.push((p.len(), plan));
    }
    let pack_gaps = match from {
        StorageFormat::Cm => gaps_len(n, m - rm, rm),
        StorageFormat::Rm => gaps_len(m, n - cn, cn),
        _ => 0,
    };
    let unpack_gaps = match to {
        StorageFormat::Cm => gaps_len(n, m - rm, rm),
        StorageFormat::Rm => gaps_len(m, n - cn, cn),
        _ => 0,
    };
    let mut gaps = workspace(pack_gaps.max(unpack_gaps))?;
    match from {
        StorageFormat::Cm => pack(data, n, m - rm, rm, &mut gaps),
        StorageFormat::Rm => pack(data, m, n - cn, cn, &mut gaps),
        _ => {}
    }
    let mut at = 0;
    for (len, plan) in &plans {
        plan.execute_with(&mut data[at..at + len], &mut scratch)?;
        at += len;
    }
    if from.column_parts() != to.column_parts() {
        let (l12, l21) = (ps[1].len(), ps[2].len());
        let mid = &mut data[ps[0].len()..ps[0].len() + l12 + l21];
        if from.column_parts() {
            mid.rotate_left(l12);
        } else {
            mid.rotate_left(l21);
        }
    }
    match to {
        StorageFormat::Cm => unpack(data, n, m - rm, rm, &mut gaps),
        StorageFormat::Rm => unpack(data, m, n - cn, cn, &mut gaps),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inplace_pack_unpack_round_trip() {
        let orig: Vec<u32> = (0..4 * 7).collect();
        let mut v = orig.clone();
        let mut gaps = workspace(gaps_len(4, 5, 2)).unwrap();
        pack(&mut v, 4, 5, 2, &mut gaps);
        assert_eq!(v[..10], [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]);
        assert_eq!(v[20..], [5, 6, 12, 13, 19, 20, 26, 27]);
        unpack(&mut v, 4, 5, 2, &mut gaps);
        assert_eq!(v, orig);
    }

    /// Every buffer of a conversion is had before anything moves: a failure of any of them
    /// (injected, each in turn) leaves the matrix as it was.
    #[test]
    fn failed_conversions_leave_the_data_as_it_was() {
        let (m, n, mb, nb) = (9, 13, 4, 5);
        let orig: Vec<u32> = (0..(m * n) as u32).collect();
        let mut injected = 0;
        for (from, to) in [
            (StorageFormat::Cm, StorageFormat::Rrrb),
            (StorageFormat::Ccrb, StorageFormat::Rm),
        ] {
            let mut want = orig.clone();
            convert_format(&mut want, m, n, mb, nb, from, to).unwrap();
            for k in 0.. {
                let mut v = orig.clone();
                super::super::scratch::fail_allocations_after(Some(k));
                let r = convert_format(&mut v, m, n, mb, nb, from, to);
                super::super::scratch::fail_allocations_after(None);
                if r.is_err() {
                    assert_eq!(v, orig, "{from:?} -> {to:?}, failure {k}");
                    injected += 1;
                    continue;
                }
                assert_eq!(v, want);
                break;
            }
        }
        assert!(injected >= 2, "{injected} failures injected");
    }
}

//! Benchmark case tables: the TTC transposition set (shipped in `benches/data/`, embedded so
//! the binary needs no files) and the TTLG all-permutations set.

use crate::error::{Error, Result};

/// The TTC transposition benchmark table (57 cases).
pub const TTC_TSV: &str = include_str!("../../benches/data/ttc_transpositions.tsv");

/// One transposition case in row-major (ndarray) terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransposeCase {
    /// Case name (`ttc-17`, `perm-3-0-2-1-...`).
    pub name: String,
    /// `perm[i] = j`: axis i of B is axis j of A.
    pub perm: Vec<usize>,
    /// Extents of A.
    pub sizes: Vec<usize>,
}

fn bad(line: usize, what: &str) -> Error {
    Error::Unsupported(format!("benchmark table line {line}: {what}"))
}

fn list(s: &str, line: usize) -> Result<Vec<usize>> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| bad(line, &format!("bad number list {s:?}")))
        })
        .collect()
}

/// Parses a TTC-format table (tab-separated, `#` comments, header with `id`,
/// `rowmajor_perm`, `rowmajor_sizes`).
///
/// ```
/// let cases = ttgt::bench::parse_ttc(ttgt::bench::TTC_TSV).unwrap();
/// assert_eq!(cases.len(), 57);
/// assert_eq!(cases[0].perm, vec![1, 0]);
/// ```
pub fn parse_ttc(text: &str) -> Result<Vec<TransposeCase>> {
    let mut rows = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty());
    let (_, header) = rows.next().ok_or_else(|| bad(0, "no header"))?;
    let cols: Vec<&str> = header.split('\t').collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .ok_or_else(|| bad(0, &format!("no column {name}")))
    };
    let (ci, cp, cs) = (col("id")?, col("rowmajor_perm")?, col("rowmajor_sizes")?);
    rows.map(|(n, l)| {
        let f: Vec<&str> = l.split('\t').collect();
        let get = |c: usize| {
            f.get(c)
                .copied()
                .ok_or_else(|| bad(n + 1, "missing column"))
        };
        let case = TransposeCase {
            name: format!("ttc-{}", get(ci)?),
            perm: list(get(cp)?, n + 1)?,
            sizes: list(get(cs)?, n + 1)?,
        };
        crate::tensor::check_permutation(&case.perm, case.sizes.len())?;
        Ok(case)
    })
    .collect()
}

/// All `rank!` permutations of a tensor with every extent `extent` (TTLG's test).
///
/// ```
/// assert_eq!(ttgt::bench::all_perms(4, 8).len(), 24);
/// ```
pub fn all_perms(rank: usize, extent: usize) -> Vec<TransposeCase> {
    let mut out = Vec::new();
    let mut p: Vec<usize> = (0..rank).collect();
    permutations(&mut p, 0, &mut |q| {
        out.push(TransposeCase {
            name: format!(
                "perm-{}",
                q.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("-")
            ),
            perm: q.to_vec(),
            sizes: vec![extent; rank],
        })
    });
    out.sort_by(|a, b| a.perm.cmp(&b.perm));
    out
}

fn permutations(p: &mut Vec<usize>, k: usize, f: &mut dyn FnMut(&[usize])) {
    if k == p.len() {
        f(p);
        return;
    }
    for i in k..p.len() {
        p.swap(k, i);
        permutations(p, k + 1, f);
        p.swap(k, i);
    }
}

//! Benchmark case tables: the TTC transposition set (shipped in `benches/data/`, embedded so
//! the binary needs no files) and the TTLG all-permutations set.

use crate::error::{Error, Result};

/// The TTC transposition benchmark table (57 cases).
pub const TTC_TSV: &str = include_str!("../benches/data/ttc_transpositions.tsv");

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

/// The rows of a tab-separated table (`#` comments, blank lines skipped, a header row naming
/// the columns): for each row, its 1-based line among the data lines and its fields in the
/// order of `columns`.
pub(crate) fn table_rows<'a>(
    text: &'a str,
    columns: &[&str],
) -> Result<Vec<(usize, Vec<&'a str>)>> {
    let mut rows = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty());
    let (_, header) = rows.next().ok_or_else(|| bad(0, "no header"))?;
    let cols: Vec<&str> = header.split('\t').map(str::trim).collect();
    let idx: Vec<usize> = columns
        .iter()
        .map(|name| {
            cols.iter()
                .position(|c| c == name)
                .ok_or_else(|| bad(0, &format!("no column {name}")))
        })
        .collect::<Result<_>>()?;
    rows.map(|(n, l)| {
        let f: Vec<&str> = l.split('\t').map(str::trim).collect();
        let picked = idx
            .iter()
            .map(|&i| {
                f.get(i)
                    .copied()
                    .ok_or_else(|| bad(n + 1, "missing column"))
            })
            .collect::<Result<_>>()?;
        Ok((n + 1, picked))
    })
    .collect()
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
    table_rows(text, &["id", "rowmajor_perm", "rowmajor_sizes"])?
        .into_iter()
        .map(|(n, f)| {
            let case = TransposeCase {
                name: format!("ttc-{}", f[0]),
                perm: list(f[1], n)?,
                sizes: list(f[2], n)?,
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

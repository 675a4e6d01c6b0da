//! `ttgt report DIR`: the JSON records of `ttgt bench ... --json` runs found in a folder,
//! grouped by benchmark, element type, thread count and machine, as one self-contained HTML
//! page: per group its provenance, a summary and its figure (inline SVG from `plot`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;

use crate::error::{CliError, CliResult};
use crate::plot;
use crate::say;

/// Arguments of `ttgt report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Folder with the records: every `*.json` and `*.jsonl` file in it, one JSON object per
    /// line, as `ttgt bench transpose|contract --json` prints them.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The HTML page to write.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE.html",
        default_value = "report.html"
    )]
    pub output: PathBuf,
}

/// One group of records: benchmark kind, dtype, threads, CPU, commit.
type Key = (String, String, String, String, String);

fn text(v: &Value, pointer: &str) -> String {
    match v.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(x) => x.to_string(),
    }
}

/// `&`, `<`, `>` and `"` escaped for HTML.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Every record of every `*.json` / `*.jsonl` file in `dir`, with the file it came from.
fn read_records(dir: &Path) -> CliResult<Vec<(String, Value)>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("json" | "jsonl")
            )
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let body = std::fs::read_to_string(&f)
            .map_err(|e| CliError::new(format!("cannot read {}: {e}", f.display())))?;
        let name = f
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        for (k, line) in body
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                CliError::new(format!("{}:{}: not a JSON record: {e}", f.display(), k + 1))
            })?;
            out.push((name.clone(), v));
        }
    }
    Ok(out)
}

/// The page for `records` (pairs of source file and record).
pub fn page(records: &[(String, Value)]) -> CliResult<String> {
    let mut groups: BTreeMap<Key, Vec<(&str, &Value)>> = BTreeMap::new();
    for (file, v) in records {
        let kind = if plot::is_transpose(v) {
            "transpositions"
        } else if plot::is_contract(v) {
            "contractions"
        } else {
            continue;
        };
        let key = (
            kind.to_string(),
            text(v, "/dtype"),
            text(v, "/threads"),
            text(v, "/provenance/cpu_model"),
            text(v, "/provenance/commit"),
        );
        groups.entry(key).or_default().push((file, v));
    }
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ttgt benchmark report</title>\n\
         <style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}\
         table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #bbb;padding:2px 8px;text-align:left}\
         h2{margin-top:2em}svg{max-width:100%;height:auto}</style></head><body>\n<h1>ttgt benchmark report</h1>\n",
    );
    let _ = writeln!(
        html,
        "<p>{} record(s) in {} group(s). Ratios are to a reference timed in the same run: the best copy of the same bytes for transpositions, a GEMM of the same m, n, k for contractions.</p>",
        groups.values().map(Vec::len).sum::<usize>(),
        groups.len()
    );
    if groups.is_empty() {
        html.push_str("<p>No transposition or contraction records found.</p>\n");
    }
    for ((kind, dtype, threads, cpu, commit), list) in &groups {
        let values: Vec<&Value> = list.iter().map(|(_, v)| *v).collect();
        let first = values[0];
        let _ = writeln!(
            html,
            "<h2>{} ({}, {} thread(s))</h2>",
            escape(kind),
            escape(dtype),
            escape(threads)
        );
        html.push_str("<table>\n");
        let mut files: Vec<&str> = list.iter().map(|(f, _)| *f).collect();
        files.dedup();
        let rows = [
            ("CPU", cpu.clone()),
            ("cores", text(first, "/provenance/cores")),
            ("memory bytes", text(first, "/provenance/memory_bytes")),
            (
                "ttgt",
                format!("{} ({})", text(first, "/provenance/ttgt_version"), commit),
            ),
            ("date", text(first, "/provenance/date")),
            ("files", files.join(", ")),
        ];
        for (k, v) in rows {
            let _ = writeln!(html, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
        }
        let ratios: Vec<f64> = values
            .iter()
            .filter_map(|v| v.get("ratio").and_then(Value::as_f64))
            .collect();
        if !ratios.is_empty() {
            let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
            let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let _ = writeln!(html, "<tr><th>cases</th><td>{}</td></tr>\n<tr><th>mean ratio</th><td>{mean:.3}</td></tr>\n<tr><th>min ratio</th><td>{min:.3}</td></tr>", ratios.len());
        }
        html.push_str("</table>\n");
        let svg = if kind == "transpositions" {
            plot::transpose_svg(&values)?
        } else {
            plot::contract_svg(&values)?
        };
        html.push_str(&svg);
        html.push('\n');
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

/// Runs `ttgt report`.
pub fn report(a: &ReportArgs) -> CliResult<()> {
    let records = read_records(&a.dir)?;
    let html = page(&records)?;
    ttgt::files::write_atomic(&a.output, |w| std::io::Write::write_all(w, html.as_bytes()))
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", a.output.display())))?;
    say(&format!(
        "{} record(s) from {} written to {}",
        records.len(),
        a.dir.display(),
        a.output.display()
    ))
}

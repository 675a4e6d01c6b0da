//! The random-mode report: a human-readable summary or one JSON object.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use ttgt::{DType, StepTimes};

use crate::check::CheckReport;

/// Everything random mode reports about one contraction.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The spec as given.
    pub spec: String,
    /// The spec with its output made explicit (`ij,jk->ik`).
    pub explicit_spec: String,
    /// Element type.
    pub dtype: DType,
    /// Extent of every index.
    pub sizes: BTreeMap<char, usize>,
    /// Number of timed executions.
    pub repeat: usize,
    /// Wall time of the fastest execution.
    pub best: Duration,
    /// Step breakdown of the fastest execution.
    pub times: StepTimes,
    /// Floating-point operations of one execution.
    pub flops: f64,
    /// `(batch, m, n, k)` of the GEMM.
    pub gemm_shape: (usize, usize, usize, usize),
    /// Operands copied into or out of a workspace.
    pub copies: usize,
    /// Workspace bytes.
    pub workspace_bytes: usize,
    /// Threads of the pool the contraction ran in.
    pub threads: usize,
    /// The plan's description, with `--explain`.
    pub explain: Option<String>,
    /// The comparison with the reference, with `--check`.
    pub check: Option<CheckReport>,
}

/// `a=48,b=32`: the extents as `--sizes` takes them.
pub fn sizes_text(sizes: &BTreeMap<char, usize>) -> String {
    let parts: Vec<String> = sizes.iter().map(|(c, n)| format!("{c}={n}")).collect();
    parts.join(",")
}

impl RunReport {
    /// GFLOP/s of the fastest execution.
    pub fn gflops(&self) -> f64 {
        self.flops / self.best.as_secs_f64() / 1e9
    }

    /// The human-readable report (several lines, no trailing newline).
    pub fn human(&self) -> String {
        let mut lines = Vec::new();
        if let Some(e) = &self.explain {
            lines.push(e.trim_end().to_string());
        }
        lines.push(format!(
            "{}  {}  {}  best of {}: {:.6} s  {:.2} GFLOP/s",
            self.explicit_spec,
            self.dtype,
            sizes_text(&self.sizes),
            self.repeat,
            self.best.as_secs_f64(),
            self.gflops()
        ));
        lines.push(format!("  {}", self.breakdown()));
        if let Some(c) = &self.check {
            lines.push(c.line());
        }
        lines.join("\n")
    }

    /// `prepare 0.001 ms (0.1%) | pack A ... | other ...`.
    fn breakdown(&self) -> String {
        let total = self.best.as_secs_f64();
        let t = &self.times;
        let other = self.best.saturating_sub(t.total());
        let steps = [
            ("prepare", t.prepare),
            ("pack A", t.pack_a),
            ("pack B", t.pack_b),
            ("GEMM", t.gemm),
            ("write C", t.write_c),
            ("convert", t.convert),
            ("other", other),
        ];
        let parts: Vec<String> = steps
            .iter()
            // the conversions of the half-precision types only
            .filter(|(name, d)| *name != "convert" || !d.is_zero())
            .map(|(name, d)| {
                let pct = if total > 0.0 {
                    100.0 * d.as_secs_f64() / total
                } else {
                    0.0
                };
                format!("{name} {:.3} ms ({pct:.1}%)", d.as_secs_f64() * 1e3)
            })
            .collect();
        parts.join(" | ")
    }

    /// The JSON object (printed on one line).
    pub fn json(&self) -> Value {
        let sizes: serde_json::Map<String, Value> = self
            .sizes
            .iter()
            .map(|(c, n)| (c.to_string(), json!(n)))
            .collect();
        let (l, m, n, k) = self.gemm_shape;
        let check = self.check.as_ref();
        json!({
            "spec": self.spec,
            "explicit_spec": self.explicit_spec,
            "dtype": self.dtype.name(),
            "sizes": sizes,
            "repeat": self.repeat,
            "threads": self.threads,
            "seconds": self.best.as_secs_f64(),
            "gflops": self.gflops(),
            "flops": self.flops,
            "prepare_seconds": self.times.prepare.as_secs_f64(),
            "pack_a_seconds": self.times.pack_a.as_secs_f64(),
            "pack_b_seconds": self.times.pack_b.as_secs_f64(),
            "gemm_seconds": self.times.gemm.as_secs_f64(),
            "write_c_seconds": self.times.write_c.as_secs_f64(),
            "convert_seconds": self.times.convert.as_secs_f64(),
            "transpose_seconds": self.times.transpose().as_secs_f64(),
            "gemm_shape": [l, m, n, k],
            "copies": self.copies,
            "workspace_bytes": self.workspace_bytes,
            "check": check.map(|c| if c.passed() { "ok" } else { "failed" }),
            "check_elements": check.map(|c| c.elements),
            "check_max_rel_err": check.map(|c| c.max_rel_err),
            "explain": self.explain,
        })
    }
}

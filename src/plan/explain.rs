//! The printable report of a [`ContractionPlan`]: the chosen candidate step by step with
//! predicted (and measured) times, and the runners-up.

use std::fmt::Write;

use super::candidate::Candidate;
use super::contraction::ContractionPlan;
use super::StepTimes;

const RUNNERS_UP: usize = 6;

fn ms(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

fn row(out: &mut String, step: &str, predicted: Option<f64>, measured: Option<f64>, note: &str) {
    let p = predicted.map_or_else(|| "-".to_string(), ms);
    let m = measured.map_or_else(String::new, ms);
    let _ = writeln!(out, "  {step:<34} {p:>12} {m:>12}  {note}");
}

fn operand_steps(plan: &ContractionPlan, out: &mut String) {
    let names = ContractionPlan::names;
    for (k, p) in plan.preps.iter().enumerate() {
        let op = ["A", "B"][k.min(1)];
        if p.diagonal.is_some() {
            let _ = writeln!(
                out,
                "  {op}: diagonal view over repeated indices -> {} (no copy)",
                names(&p.labels)
            );
        }
        if !p.summed.is_empty() {
            let _ = writeln!(
                out,
                "  {op}: sum over {} -> {} ({} elements)",
                names(&p.summed),
                names(&p.kept),
                p.prepared.len()
            );
        }
    }
}

pub(crate) fn explain(plan: &ContractionPlan, times: Option<&StepTimes>) -> String {
    let names = ContractionPlan::names;
    let mut s = String::new();
    let threads = plan.threads;
    let _ = writeln!(
        s,
        "plan for {} ({}, {} thread{}), {:.3} GFLOP",
        plan.bound.spec(),
        match &plan.storage {
            Some(st) => format!("{} stored, computed in {}", st.dtype, plan.dtype),
            None => plan.dtype.to_string(),
        },
        threads,
        if threads == 1 { "" } else { "s" },
        plan.flops() / 1e9
    );
    operand_steps(plan, &mut s);
    if let Some(st) = &plan.storage {
        let _ = writeln!(
            s,
            "  convert: inputs widened to {} images, result rounded to {} (predicted {})",
            plan.dtype,
            st.dtype,
            ms(st.seconds())
        );
        if let Some(t) = times {
            let _ = writeln!(s, "  convert measured {}", ms(t.convert.as_secs_f64()));
        }
    }
    let Some(c) = plan.chosen() else {
        let _ = writeln!(
            s,
            "  C = alpha * permute(A) + beta * C over {}",
            names(plan.bound.output())
        );
        if let Some(t) = times {
            let _ = writeln!(s, "  measured {}", ms(t.total().as_secs_f64()));
        }
        return s;
    };
    let secs = |d: std::time::Duration| Some(d.as_secs_f64());
    // the candidates are listed best predicted first; measured tuning may choose another
    let how = match plan.measured_seconds(plan.chosen) {
        Some(t) => format!(
            "fastest measured, {}, ranked {} of {} by prediction",
            ms(t),
            plan.chosen + 1,
            plan.candidates.len()
        ),
        None => format!("1 of {}, best predicted", plan.candidates.len()),
    };
    let how = if plan.searched_fully {
        how
    } else {
        format!("{how} by a quick search")
    };
    let _ = writeln!(s, "  chosen ({how}): {}", c.summary());
    let _ = writeln!(
        s,
        "  {:<34} {:>12} {:>12}",
        "step",
        "predicted",
        if times.is_some() { "measured" } else { "" }
    );
    let p = &c.predicted;
    if plan.preps.iter().any(|p| !p.summed.is_empty()) {
        row(
            &mut s,
            "prepare (one-sided sums)",
            Some(p.prepare),
            times.and_then(|t| secs(t.prepare)),
            "",
        );
    }
    for (k, (pack, pred, meas)) in [
        (&c.a_pack, p.pack_a, times.map(|t| t.pack_a)),
        (&c.b_pack, p.pack_b, times.map(|t| t.pack_b)),
    ]
    .into_iter()
    .enumerate()
    {
        let op = ["A", "B"][k];
        match pack {
            Some(o) => row(
                &mut s,
                &format!("pack {op} -> [{}]", names(o)),
                Some(pred),
                meas.and_then(secs),
                "(copy)",
            ),
            None => row(
                &mut s,
                &format!("{op} used in place"),
                None,
                None,
                "(no copy)",
            ),
        }
    }
    let (calls, m, n, k) = c.gemm_shape;
    let mut g = format!("GEMM m={m} n={n} k={k}");
    if calls != 1 {
        g += &format!(" x{calls}");
    }
    let library = if c.skinny {
        "skinny kernel".to_string()
    } else {
        c.library.to_string()
    };
    let mut note = format!(
        "{library}, {} thread{}",
        c.gemm_threads,
        if c.gemm_threads == 1 { "" } else { "s" }
    );
    if let Some(t) = &c.c_tiles {
        let _ = write!(
            note,
            "; per block of C over {} ({} blocks{})",
            names(&t.loops),
            t.blocks(|l| plan.bound().extent(l)),
            if c.parallel {
                format!(" on {threads} threads, one buffer each")
            } else {
                String::new()
            }
        );
    }
    if !c.loops.is_empty() {
        let _ = write!(
            note,
            "; loops {}{}",
            names(&c.loops),
            if c.parallel && c.c_tiles.is_none() {
                format!(" on {threads} threads")
            } else {
                String::new()
            }
        );
    }
    if !c.reduce.is_empty() {
        let _ = write!(
            note,
            "; batch-reduce over {} (first call applies beta)",
            names(&c.reduce)
        );
    }
    row(
        &mut s,
        &g,
        Some(p.gemm),
        times.and_then(|t| secs(t.gemm)),
        &note,
    );
    match (&c.c_temp, &c.c_in_place, &c.c_tiles) {
        (_, _, Some(t)) => row(
            &mut s,
            &format!("write C = alpha*T[{}] + beta*C", names(&t.order)),
            Some(p.write_c),
            times.and_then(|t| secs(t.write_c)),
            &format!(
                "(per block, from a {} KiB buffer in cache)",
                (t.block_len * plan.dtype.size_bytes()).div_ceil(1024)
            ),
        ),
        (_, Some(ip), None) => row(
            &mut s,
            &format!("permute C in place from [{}]", names(&ip.order)),
            Some(p.write_c),
            times.and_then(|t| secs(t.write_c)),
            &format!(
                "(no workspace: GEMM wrote C's memory in that order; {})",
                ip.back.describe()
            ),
        ),
        (Some(o), None, None) => row(
            &mut s,
            &format!("write C = alpha*T[{}] + beta*C", names(o)),
            Some(p.write_c),
            times.and_then(|t| secs(t.write_c)),
            "(copy)",
        ),
        (None, None, None) => row(
            &mut s,
            "write C: GEMM writes C in place",
            None,
            None,
            "(alpha, beta applied by the GEMM)",
        ),
    }
    row(
        &mut s,
        "total",
        Some(p.total() + plan.conversion_seconds()),
        times.map(|t| t.total().as_secs_f64()),
        "",
    );
    let _ = writeln!(s, "  workspace {} bytes", c.workspace_bytes);
    if !plan.gemm_model_calibrated() {
        let probed = crate::model::probed_gemm_coeffs(c.library, plan.dtype).is_some();
        let _ = writeln!(
            s,
            "{}",
            if probed {
                "  (GEMM model: a quick probe of this machine; `ttgt calibrate` measures the full model)"
            } else {
                "  (GEMM model: nominal rates; run `ttgt calibrate` for measured ones)"
            }
        );
    }
    if crate::model::is_provisional(plan.problem_bytes()) {
        let _ = writeln!(
            s,
            "  (copy rates: provisional, not probed: problem below {} MiB and no stored profile)",
            crate::model::PROBE_MIN_BYTES >> 20
        );
    }
    let others: Vec<(usize, &Candidate)> = plan
        .candidates
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != plan.chosen)
        .take(RUNNERS_UP)
        .collect();
    if !others.is_empty() {
        let _ = writeln!(s, "  runners-up (rank by prediction, predicted total):");
        for (i, o) in others {
            let meas = plan
                .measured_seconds(i)
                .map_or_else(String::new, |t| format!(" (measured {})", ms(t)));
            let _ = writeln!(
                s,
                "    {:>3}. {:>12}{meas}  {}",
                i + 1,
                ms(o.predicted.total()),
                o.summary()
            );
        }
    }
    if plan.excluded > 0 {
        let limit = plan.options.workspace_limit.unwrap_or(usize::MAX);
        let _ = write!(
            s,
            "  workspace limit {limit} bytes excluded {} candidate(s)",
            plan.excluded
        );
        if let Some(b) = &plan.best_excluded {
            let _ = write!(
                s,
                "; the best of them: {} predicted, {} bytes: {}",
                ms(b.predicted.total()),
                b.workspace_bytes,
                b.summary()
            );
        }
        s.push('\n');
    }
    s
}

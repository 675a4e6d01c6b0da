//! Figures of benchmark records, as SVG (plotters): transpositions as the fraction of the best
//! copy's bandwidth over the cases sorted (HPTT beside when it ran), contractions as stacked
//! bars of their transposition and GEMM time over the same-size GEMM's. Both read the JSON
//! records `ttgt bench ... --json` prints, so `--plot` and `ttgt report` draw the same figure.

use plotters::prelude::*;
use serde_json::Value;

use crate::error::{CliError, CliResult};

/// Width and height of a figure, in pixels.
const SIZE: (u32, u32) = (960, 540);

fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn err<E: std::fmt::Display>(e: E) -> CliError {
    CliError::new(format!("cannot draw the figure: {e}"))
}

/// Whether a record is one of `ttgt bench transpose` (not a summary).
pub fn is_transpose(v: &Value) -> bool {
    v.get("perm").is_some() && f(v, "ratio").is_some()
}

/// Whether a record is one of `ttgt bench contract` (not a summary).
pub fn is_contract(v: &Value) -> bool {
    v.get("gemm_mnk").is_some() && f(v, "seconds").is_some()
}

type Root<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// An SVG figure of [`SIZE`] on white, drawn by `draw`.
fn render(draw: impl FnOnce(&Root<'_>) -> CliResult<()>) -> CliResult<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The chart of a figure: its caption, margins and label areas (`x_area` pixels below).
fn builder<'a, 'b>(
    root: &'a Root<'b>,
    caption: String,
    x_area: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(x_area)
        .y_label_area_size(56);
    b
}

/// A caption from the records' common dtype, threads and CPU.
fn caption(kind: &str, records: &[&Value]) -> String {
    let first = records.first();
    let get = |k: &str| {
        first
            .and_then(|v| v.get(k))
            .map_or_else(String::new, |x| x.to_string().trim_matches('"').to_string())
    };
    let cpu = first
        .and_then(|v| v.pointer("/provenance/cpu_model"))
        .and_then(Value::as_str)
        .unwrap_or("unknown CPU");
    format!(
        "{kind}: {} cases, {}, {} thread(s), {cpu}",
        records.len(),
        get("dtype"),
        get("threads")
    )
}

/// The transposition figure: each case's bandwidth as a fraction of the best copy of the same
/// bytes, cases sorted from slowest to fastest (HPTT's, sorted on its own, beside).
pub fn transpose_svg(records: &[&Value]) -> CliResult<String> {
    let mut ours: Vec<f64> = records.iter().filter_map(|v| f(v, "ratio")).collect();
    let mut hptt: Vec<f64> = records
        .iter()
        .filter_map(|v| Some(f(v, "ratio")? * f(v, "seconds")? / f(v, "hptt_seconds")?))
        .collect();
    ours.sort_by(f64::total_cmp);
    hptt.sort_by(f64::total_cmp);
    let top = ours.iter().chain(&hptt).copied().fold(1.0f64, f64::max) * 1.05;
    let n = ours.len().max(1);
    render(|root| {
        let mut chart = builder(root, caption("transpositions", records), 40)
            .build_cartesian_2d(0f64..n as f64, 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("cases, sorted by ratio")
            .y_desc("bandwidth / best copy")
            .draw()
            .map_err(err)?;
        let line = |v: &[f64]| {
            v.iter()
                .enumerate()
                .map(|(i, &r)| (i as f64 + 0.5, r))
                .collect::<Vec<_>>()
        };
        chart
            .draw_series(LineSeries::new(line(&ours), BLUE.stroke_width(2)))
            .map_err(err)?
            .label("ttgt")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
        if !hptt.is_empty() {
            chart
                .draw_series(LineSeries::new(line(&hptt), RED.stroke_width(2)))
                .map_err(err)?
                .label("HPTT")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
        }
        chart
            .draw_series(LineSeries::new(
                [(0.0, 1.0), (n as f64, 1.0)],
                BLACK.mix(0.4),
            ))
            .map_err(err)?
            .label("best copy")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.4)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    })
}

/// The contraction figure: per case, its time split into transpositions (packs and
/// write-back), GEMM calls and the rest, over the same-size GEMM's time (1.0: as fast as one
/// plain GEMM of the same m, n, k).
pub fn contract_svg(records: &[&Value]) -> CliResult<String> {
    struct Bar {
        name: String,
        parts: [f64; 3],
    }
    let bars: Vec<Bar> = records
        .iter()
        .filter_map(|v| {
            let (s, g) = (
                f(v, "seconds")?,
                f(v, "gemm_reference_seconds")
                    .or_else(|| Some(f(v, "seconds")? * f(v, "ratio")?))?,
            );
            let t = f(v, "transpose_seconds").unwrap_or(0.0);
            let m = f(v, "gemm_seconds").unwrap_or(0.0);
            let name = v
                .get("case")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            Some(Bar {
                name,
                parts: [t / g, m / g, (s - t - m).max(0.0) / g],
            })
        })
        .collect();
    let top = bars
        .iter()
        .map(|b| b.parts.iter().sum::<f64>())
        .fold(1.0f64, f64::max)
        * 1.05;
    let n = bars.len().max(1);
    render(|root| {
        let mut chart = builder(root, caption("contractions", records), 90)
            .build_cartesian_2d((0..n).into_segmented(), 0f64..top)
            .map_err(err)?;
        let names: Vec<String> = bars.iter().map(|b| b.name.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.min(60))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_label_style(
                ("sans-serif", 11)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            )
            .y_desc("time / same-size GEMM time")
            .draw()
            .map_err(err)?;
        let colors = [RED.mix(0.8), BLUE.mix(0.8), GREEN.mix(0.6)];
        let labels = ["transpositions", "GEMM", "other"];
        for (k, (color, label)) in colors.iter().zip(labels).enumerate() {
            let color = *color;
            chart
                .draw_series(bars.iter().enumerate().map(|(i, b)| {
                    let base: f64 = b.parts[..k].iter().sum();
                    let mut r = Rectangle::new(
                        [
                            (SegmentValue::Exact(i), base),
                            (SegmentValue::Exact(i + 1), base + b.parts[k]),
                        ],
                        color.filled(),
                    );
                    r.set_margin(0, 0, 4, 4);
                    r
                }))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .draw_series(LineSeries::new(
                [(SegmentValue::Exact(0), 1.0), (SegmentValue::Exact(n), 1.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?
            .label("same-size GEMM")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    })
}

/// Draws `records` with `figure` into `path`.
pub fn write_figure(
    path: &std::path::Path,
    records: &[Value],
    figure: fn(&[&Value]) -> CliResult<String>,
) -> CliResult<()> {
    let refs: Vec<&Value> = records.iter().collect();
    write(path, &figure(&refs)?)
}

/// Writes `svg` to `path` (atomically: a failed write leaves what was there).
pub fn write(path: &std::path::Path, svg: &str) -> CliResult<()> {
    ttgt::files::write_atomic(path, |w| std::io::Write::write_all(w, svg.as_bytes()))
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}

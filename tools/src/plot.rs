//! Plots rendered from a results file (never from the live run), as SVG and
//! PNG: `throughput` (goodput per flow over time), `jain` (Jain's index and
//! fairness ratio over time), `queue` (queue length and queueing delay at the
//! bottleneck ports) and, for sweeps, `sweep` (JFI and utilization across
//! the swept values); for campaigns, `campaign-<metric>` (the mean of a
//! metric over seeds against the swept value, with 95 % error bars); for
//! `tollgate compare`, `compare-throughput` and `compare-jain` (runs overlaid).
//!
//! Text needs a TrueType font: DejaVu Sans from Debian's `fonts-dejavu-core`
//! (`/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf`), or any `.ttf` named
//! by the `TOLLGATE_FONT` environment variable. Without one, plots are
//! skipped with a warning (results.json and the CSV are unaffected).

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::results::{FlowResult, Results};

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];
const SIZE: (u32, u32) = (1000, 560);

/// Register a font with plotters once; `false` if none was found.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let env = std::env::var("TOLLGATE_FONT").ok();
        let candidates = env
            .iter()
            .map(String::as_str)
            .chain(FONT_PATHS.iter().copied());
        for path in candidates {
            if let Ok(bytes) = std::fs::read(path) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

type Res = Result<(), Box<dyn std::error::Error>>;
/// Draws one chart into whichever backend it is handed.
type Painter<'a> = &'a mut dyn FnMut(Chart) -> Res;

/// Draw with `f` into `<dir>/<name>.svg` and `<dir>/<name>.png`.
fn both(dir: &Path, name: &str, f: &dyn Fn(Painter) -> Res) -> anyhow::Result<()> {
    let svg = dir.join(format!("{name}.svg"));
    let png = dir.join(format!("{name}.png"));
    let run = |root: Painter| f(root);
    {
        let area = SVGBackend::new(&svg, SIZE).into_drawing_area();
        let mut draw = |c: Chart| c.draw(&area);
        run(&mut draw).map_err(|e| anyhow::anyhow!("{}: {e}", svg.display()))?;
        area.present()
            .map_err(|e| anyhow::anyhow!("{}: {e}", svg.display()))?;
    }
    {
        let area = BitMapBackend::new(&png, SIZE).into_drawing_area();
        let mut draw = |c: Chart| c.draw(&area);
        run(&mut draw).map_err(|e| anyhow::anyhow!("{}: {e}", png.display()))?;
        area.present()
            .map_err(|e| anyhow::anyhow!("{}: {e}", png.display()))?;
    }
    Ok(())
}

/// One line chart, backend-independent.
struct Chart {
    title: String,
    x_label: String,
    y_label: String,
    x: Range<f64>,
    y: Range<f64>,
    lines: Vec<(String, Vec<(f64, f64)>)>,
    /// Means with error bars: per series, `(x, mean, low, high)`.
    bars: Vec<ErrorSeries>,
}

/// A series of means with their confidence intervals, for
/// [`render_error_bars`].
#[derive(Clone, Debug)]
pub struct ErrorSeries {
    /// Legend label.
    pub name: String,
    /// `(x, mean, low, high)` per point.
    pub points: Vec<(f64, f64, f64, f64)>,
}

impl Chart {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Res
    where
        DB::ErrorType: 'static,
    {
        area.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(65)
            .build_cartesian_2d(self.x.clone(), self.y.clone())?;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (i, (name, pts)) in self.lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
                });
        }
        for (i, e) in self.bars.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    e.points.iter().map(|p| (p.0, p.1)),
                    color.stroke_width(2),
                ))?
                .label(e.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
                });
            chart.draw_series(e.points.iter().map(|&(x, mean, lo, hi)| {
                ErrorBar::new_vertical(x, lo, mean, hi, color.stroke_width(2), 10)
            }))?;
            chart.draw_series(
                e.points
                    .iter()
                    .map(|&(x, mean, _, _)| Circle::new((x, mean), 4, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 14))
            .draw()?;
        Ok(())
    }
}

fn max_of(lines: &[(String, Vec<(f64, f64)>)]) -> f64 {
    lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0, f64::max)
}

/// Render `throughput`, `jain` and `queue` plots of one run into `dir`.
pub fn render_run(dir: &Path, r: &Results) -> anyhow::Result<()> {
    if !font_ready() {
        eprintln!("warning: no TrueType font found (install fonts-dejavu-core or set TOLLGATE_FONT); plots skipped");
        return Ok(());
    }
    let t = &r.series.t_s;
    let tmax = t.last().copied().unwrap_or(1.0).max(1e-3);
    let mut title = match &r.sweep_point {
        Some(p) => format!("{} [{p}]", r.scenario),
        None => r.scenario.clone(),
    };
    if r.partial {
        title.push_str(&format!(" (partial, to {:.1} s)", r.reached_s));
    }
    // Throughput per flow.
    let lines = flow_lines(r, 12);
    let ymax = max_of(&lines).max(1.0) * 1.1;
    let chart = Chart {
        title: format!("{title}: goodput per flow ({})", r.summary.discipline),
        x_label: "time (s)".into(),
        y_label: "goodput (Mbit/s)".into(),
        x: 0.0..tmax,
        y: 0.0..ymax,
        lines,
        bars: Vec::new(),
    };
    both(dir, "throughput", &|d| d(chart.clone_chart()))?;

    // Jain's index over time.
    let jain = jain_line(r);
    let jchart = Chart {
        title: format!(
            "{title}: Jain's index over time (window {} s)",
            window_of(r)
        ),
        x_label: "time (s)".into(),
        y_label: "Jain's fairness index".into(),
        x: 0.0..tmax,
        y: 0.0..1.05,
        lines: vec![("Jain's index".into(), jain)],
        bars: Vec::new(),
    };
    both(dir, "jain", &|d| d(jchart.clone_chart()))?;

    // Queue length / delay at the forward ports.
    let mut qlines = Vec::new();
    for (p, (q, dl)) in r
        .ports
        .iter()
        .zip(r.series.queue_packets.iter().zip(&r.series.queue_delay_ms))
    {
        if !p.name.starts_with("fwd") {
            continue;
        }
        qlines.push((
            format!("{} queue (packets)", p.name),
            t.iter()
                .copied()
                .zip(q.iter().map(|x| f64::from(*x)))
                .collect::<Vec<_>>(),
        ));
        qlines.push((
            format!("{} delay (ms)", p.name),
            t.iter().copied().zip(dl.iter().copied()).collect(),
        ));
    }
    let qchart = Chart {
        title: format!("{title}: bottleneck queue"),
        x_label: "time (s)".into(),
        y_label: "packets / ms".into(),
        x: 0.0..tmax,
        y: 0.0..max_of(&qlines).max(1.0) * 1.1,
        lines: qlines,
        bars: Vec::new(),
    };
    both(dir, "queue", &|d| d(qchart.clone_chart()))?;

    // What each sender believed the bottleneck capacity to be.
    if !r.series.flow_capacity_mbps.is_empty() {
        let clines: Vec<(String, Vec<(f64, f64)>)> = r
            .flows
            .iter()
            .zip(&r.series.flow_capacity_mbps)
            .filter(|(_, c)| c.iter().any(Option::is_some))
            .take(12)
            .map(|(f, c)| {
                let pts = t
                    .iter()
                    .zip(c)
                    .filter_map(|(&tk, v)| v.map(|v| (tk, v)))
                    .collect();
                (flow_label(f), pts)
            })
            .collect();
        let cchart = Chart {
            title: format!("{title}: capacity estimate per flow"),
            x_label: "time (s)".into(),
            y_label: "capacity estimate (Mbit/s)".into(),
            x: 0.0..tmax,
            y: 0.0..max_of(&clines).max(1.0) * 1.1,
            lines: clines,
            bars: Vec::new(),
        };
        both(dir, "capacity", &|d| d(cchart.clone_chart()))?;
    }
    Ok(())
}

fn window_of(r: &Results) -> String {
    r.config
        .get("metrics")
        .and_then(|m| m.get("fairness_window_s"))
        .and_then(|v| v.as_f64())
        .map_or("?".into(), |w| format!("{w}"))
}

/// Goodput over time per flow, or per group (the group's mean) when there
/// are more than `max` flows.
/// A flow's legend label: id, CCA and RTT.
fn flow_label(f: &FlowResult) -> String {
    format!("{} {} {:.0} ms", f.id, f.cca, f.rtt_ms)
}

fn flow_lines(r: &Results, max: usize) -> Vec<(String, Vec<(f64, f64)>)> {
    if r.flows.len() > max {
        return group_means(r);
    }
    let t = &r.series.t_s;
    r.flows
        .iter()
        .zip(&r.series.flow_goodput_mbps)
        .map(|(f, g)| {
            (
                flow_label(f),
                t.iter().copied().zip(g.iter().copied()).collect(),
            )
        })
        .collect()
}

/// Jain's index over time, where defined.
fn jain_line(r: &Results) -> Vec<(f64, f64)> {
    r.series
        .t_s
        .iter()
        .zip(&r.series.jain)
        .filter_map(|(t, j)| j.map(|j| (*t, j)))
        .collect()
}

/// `compare-throughput` (every run's flows, or group means past 6 flows per
/// run) and `compare-jain` (every run's Jain's index) into `dir`, for
/// `tollgate compare`.
pub fn render_compare(dir: &Path, labels: &[String], runs: &[Results]) -> anyhow::Result<()> {
    if !font_ready() {
        eprintln!("warning: no TrueType font found (install fonts-dejavu-core or set TOLLGATE_FONT); plots skipped");
        return Ok(());
    }
    let tmax = runs
        .iter()
        .filter_map(|r| r.series.t_s.last().copied())
        .fold(1e-3, f64::max);
    let mut lines = Vec::new();
    let mut jain = Vec::new();
    for (label, r) in labels.iter().zip(runs) {
        for (name, pts) in flow_lines(r, 6) {
            lines.push((format!("{label}: {name}"), pts));
        }
        jain.push((label.clone(), jain_line(r)));
    }
    let name = &runs[0].scenario;
    let chart = Chart {
        title: format!("{name}: goodput per flow, {}", labels.join(" vs ")),
        x_label: "time (s)".into(),
        y_label: "goodput (Mbit/s)".into(),
        x: 0.0..tmax,
        y: 0.0..max_of(&lines).max(1.0) * 1.1,
        lines,
        bars: Vec::new(),
    };
    both(dir, "compare-throughput", &|d| d(chart.clone_chart()))?;
    let jchart = Chart {
        title: format!("{name}: Jain's index over time, {}", labels.join(" vs ")),
        x_label: "time (s)".into(),
        y_label: "Jain's fairness index".into(),
        x: 0.0..tmax,
        y: 0.0..1.05,
        lines: jain,
        bars: Vec::new(),
    };
    both(dir, "compare-jain", &|d| d(jchart.clone_chart()))
}

fn group_means(r: &Results) -> Vec<(String, Vec<(f64, f64)>)> {
    let t = &r.series.t_s;
    r.groups
        .iter()
        .map(|g| {
            let members: Vec<usize> = r
                .flows
                .iter()
                .filter(|f| f.group == g.name)
                .map(|f| f.id)
                .collect();
            let pts = (0..t.len())
                .map(|k| {
                    let s: f64 = members
                        .iter()
                        .map(|&i| r.series.flow_goodput_mbps[i][k])
                        .sum();
                    (t[k], s / members.len().max(1) as f64)
                })
                .collect();
            (format!("{} (mean of {})", g.name, members.len()), pts)
        })
        .collect()
}

impl Chart {
    fn clone_chart(&self) -> Chart {
        Chart {
            title: self.title.clone(),
            x_label: self.x_label.clone(),
            y_label: self.y_label.clone(),
            x: self.x.clone(),
            y: self.y.clone(),
            lines: self.lines.clone(),
            bars: self.bars.clone(),
        }
    }
}

/// Render `sweep.svg/png`: JFI and utilization across the sweep.
pub fn render_sweep(dir: &Path, param: &str, runs: &[Results]) -> anyhow::Result<()> {
    if !font_ready() {
        eprintln!("warning: no TrueType font found; sweep plot skipped");
        return Ok(());
    }
    let values: Vec<f64> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            r.sweep_point
                .as_deref()
                .and_then(|p| p.split_once('='))
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .unwrap_or(i as f64)
        })
        .collect();
    let xmin = values.iter().copied().fold(f64::INFINITY, f64::min);
    let xmax = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = ((xmax - xmin) * 0.05).max(1e-6);
    let jfi: Vec<(f64, f64)> = values
        .iter()
        .zip(runs)
        .filter_map(|(x, r)| r.summary.jain.map(|j| (*x, j)))
        .collect();
    let util: Vec<(f64, f64)> = values
        .iter()
        .zip(runs)
        .map(|(x, r)| (*x, r.summary.utilization))
        .collect();
    let chart = Chart {
        title: format!(
            "{}: sweep over {param}",
            runs.first().map_or("", |r| r.scenario.as_str())
        ),
        x_label: param.to_string(),
        y_label: "Jain's index / utilization".into(),
        x: (xmin - pad)..(xmax + pad),
        y: 0.0..1.05,
        lines: vec![("Jain's index".into(), jfi), ("utilization".into(), util)],
        bars: Vec::new(),
    };
    both(dir, "sweep", &|d| d(chart.clone_chart()))
}

/// Render `<dir>/<name>.svg/png`: each series' means against x with their
/// confidence intervals as error bars (`tollgate campaign merge`).
pub fn render_error_bars(
    dir: &Path,
    name: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[ErrorSeries],
) -> anyhow::Result<()> {
    if !font_ready() {
        eprintln!("warning: no TrueType font found; {name} plot skipped");
        return Ok(());
    }
    let all = || series.iter().flat_map(|e| e.points.iter());
    let xmin = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let xmax = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    if !xmin.is_finite() {
        return Ok(()); // nothing measured
    }
    let pad = if xmax > xmin {
        (xmax - xmin) * 0.08
    } else {
        (xmin.abs() * 0.5).max(0.5)
    };
    let ylo = all().map(|p| p.2).fold(0.0, f64::min);
    let yhi = all().map(|p| p.3).fold(0.0, f64::max);
    let chart = Chart {
        title: title.to_string(),
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        x: (xmin - pad)..(xmax + pad),
        y: ylo * 1.1..(yhi * 1.1).max(1e-6),
        lines: Vec::new(),
        bars: series.to_vec(),
    };
    both(dir, name, &|d| d(chart.clone_chart()))
}

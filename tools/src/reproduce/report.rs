//! `REPORT.md`, `reproduce.json` and the per-experiment plots.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::{Experiment, Published, RowResult, Verdict};
use crate::plot::{render_error_bars, ErrorSeries};

/// What the report says about how it was made.
#[derive(Clone, Debug, Serialize)]
pub struct ReportInfo {
    /// The command line.
    pub command: String,
    /// `tollgate-tools` version.
    pub tollgate_version: String,
    /// `--quick`.
    pub quick: bool,
    /// Wall time of the runs, seconds.
    pub wall_s: f64,
    /// Runs that ran now / were finished before.
    pub runs_now: usize,
    /// Runs already finished by an earlier invocation.
    pub runs_before: usize,
}

#[derive(Serialize)]
struct ExperimentJson<'a> {
    name: &'a str,
    title: &'a str,
    source: &'a str,
    seeds: u64,
    rows: &'a [RowResult],
}

#[derive(Serialize)]
struct ReportJson<'a> {
    format: u32,
    info: &'a ReportInfo,
    reproduced: usize,
    differs: usize,
    no_data: usize,
    measured: usize,
    experiments: Vec<ExperimentJson<'a>>,
}

fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn published_text(p: Option<Published>) -> String {
    match p {
        None => "-".into(),
        Some(Published::Value(v)) => num(v),
        Some(Published::Range([a, b])) => format!("{}–{}", num(a), num(b)),
    }
}

fn ours_text(r: &RowResult) -> String {
    let Some(o) = &r.ours else {
        return "no data".into();
    };
    let undefined = r.values.iter().filter(|v| v.1.is_none()).count();
    let mut s = match o.half_width {
        Some(h) => format!("{} ± {}", num(o.mean), num(h)),
        None => num(o.mean),
    };
    let _ = write!(s, " (n={})", o.n);
    if undefined > 0 {
        let _ = write!(s, ", {undefined} undefined");
    }
    if r.missing > 0 {
        let _ = write!(s, ", {} missing", r.missing);
    }
    s
}

/// The verdict as the report and the command's summary print it.
impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Reproduced => f.write_str("reproduced"),
            Verdict::Differs { by, relative } => {
                write!(f, "differs by {} ({:+.0} %)", num(*by), relative * 100.0)
            }
            Verdict::Measured => f.write_str("measured"),
            Verdict::NoData => f.write_str("no data"),
        }
    }
}

/// Count rows by verdict: (reproduced, differs, no data, measured).
fn counts<'a>(rows: impl Iterator<Item = &'a RowResult>) -> (usize, usize, usize, usize) {
    let mut c = (0, 0, 0, 0);
    for r in rows {
        match r.verdict {
            Verdict::Reproduced => c.0 += 1,
            Verdict::Differs { .. } => c.1 += 1,
            Verdict::NoData => c.2 += 1,
            Verdict::Measured => c.3 += 1,
        }
    }
    c
}

/// The Markdown report.
fn markdown(info: &ReportInfo, results: &[(&Experiment, u64, Vec<RowResult>)]) -> String {
    let mut md = String::new();
    let (rep, diff, none, meas) = counts(results.iter().flat_map(|r| r.2.iter()));
    let _ = writeln!(md, "# Tollgate reproductions\n");
    let _ = writeln!(
        md,
        "Written by `{}` (tollgate-tools {}){}. {} published rows: **{rep} reproduced, {diff} \
         differ**{}; {meas} rows measured without a published number. Each number is the mean \
         over seeds with its 95 % Student-t interval; a row is *reproduced* when the mean is \
         within the stated tolerance of the published value (or range).\n",
        info.command,
        info.tollgate_version,
        if info.quick {
            ", **--quick: shortened runs, indicative only**"
        } else {
            ""
        },
        rep + diff + none,
        if none > 0 {
            format!(", {none} without data")
        } else {
            String::new()
        },
    );
    let _ = writeln!(
        md,
        "| experiment | rows | reproduced | differ | no data | measured |\n|---|---:|---:|---:|---:|---:|"
    );
    for (exp, _, rows) in results {
        let (r, d, n, m) = counts(rows.iter());
        let _ = writeln!(
            md,
            "| [{}](#{}) | {} | {r} | {d} | {n} | {m} |",
            exp.name,
            exp.name,
            rows.len(),
        );
    }
    for (exp, seeds, rows) in results {
        let m = &exp.manifest;
        let _ = writeln!(md, "\n## {}\n\n**{}**\n", exp.name, m.title);
        let _ = writeln!(md, "Source: {}. Seeds per run: {seeds}.\n", m.source);
        if let Some(s) = &m.summary {
            let _ = writeln!(md, "{}\n", s.trim());
        }
        let mut table: Option<&Option<String>> = None;
        let mut notes: Vec<String> = Vec::new();
        for r in rows {
            if table != Some(&r.table) {
                if let Some(t) = &r.table {
                    let _ = writeln!(md, "\n### {t}\n");
                } else {
                    md.push('\n');
                }
                let _ = writeln!(
                    md,
                    "| row | scenario | metric | published | tolerance | Tollgate | verdict |\n\
                     |---|---|---|---:|---:|---:|---|"
                );
                table = Some(&r.table);
            }
            let mut label = r.label.clone();
            if let Some(n) = &r.note {
                notes.push(n.trim().to_string());
                let _ = write!(label, " [{}]", notes.len());
            }
            let scenario = match &r.point {
                Some(p) => format!("{} ({p})", r.scenario),
                None => r.scenario.clone(),
            };
            let _ = writeln!(
                md,
                "| {label} | `{scenario}` | `{}` | {} | {} | {} | {} |",
                r.metric,
                published_text(r.published),
                r.tolerance.map_or("-".into(), |t| format!("±{}", num(t))),
                ours_text(r),
                r.verdict
            );
        }
        for (i, n) in notes.iter().enumerate() {
            let _ = writeln!(md, "\n[{}] {n}", i + 1);
        }
        if let Some(f) = &m.findings {
            let _ = writeln!(md, "\n{}", f.trim());
        }
        let _ = writeln!(md, "\n![{}]({}/rows.svg)", exp.name, exp.name);
    }
    md
}

/// The per-experiment plot: each published row's value (or range) and our
/// mean with its interval, normalised to the published value so rows of
/// different units share an axis (1.0 = the published number).
fn plot(dir: &Path, exp: &Experiment, rows: &[RowResult]) -> anyhow::Result<()> {
    let mut published = ErrorSeries {
        name: "published (= 1)".into(),
        points: Vec::new(),
    };
    let mut ours = ErrorSeries {
        name: "Tollgate / published".into(),
        points: Vec::new(),
    };
    for (i, r) in rows.iter().enumerate() {
        let (Some(p), Some(o)) = (r.published, &r.ours) else {
            continue;
        };
        let c = p.centre();
        if c == 0.0 {
            continue;
        }
        let x = (i + 1) as f64;
        let (lo, hi) = match p {
            Published::Value(_) => (1.0, 1.0),
            Published::Range([a, b]) => (a / c, b / c),
        };
        published.points.push((x, 1.0, lo, hi));
        let h = o.half_width.unwrap_or(0.0);
        ours.points
            .push((x, o.mean / c, (o.mean - h) / c, (o.mean + h) / c));
    }
    render_error_bars(
        dir,
        "rows",
        &format!("{}: Tollgate relative to the published value", exp.name),
        "row (REPORT.md order)",
        "value / published",
        &[published, ours],
    )
}

/// Write `REPORT.md`, `reproduce.json` and `<experiment>/rows.svg|png`
/// under `out`; returns the report's path.
pub fn write_report(
    out: &Path,
    info: &ReportInfo,
    results: &[(&Experiment, u64, Vec<RowResult>)],
    plots: bool,
) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(out)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
    if plots {
        for (exp, _, rows) in results {
            plot(&out.join(&exp.name), exp, rows)?;
        }
    }
    let (reproduced, differs, no_data, measured) = counts(results.iter().flat_map(|r| r.2.iter()));
    let json = ReportJson {
        format: 1,
        info,
        reproduced,
        differs,
        no_data,
        measured,
        experiments: results
            .iter()
            .map(|(e, seeds, rows)| ExperimentJson {
                name: &e.name,
                title: &e.manifest.title,
                source: &e.manifest.source,
                seeds: *seeds,
                rows,
            })
            .collect(),
    };
    let path = out.join("reproduce.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    let report = out.join("REPORT.md");
    std::fs::write(&report, markdown(info, results))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", report.display()))?;
    Ok(report)
}

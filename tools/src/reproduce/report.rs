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

/// One experiment's rows, judged.
#[derive(Debug)]
pub struct Judged<'a> {
    /// The experiment.
    pub experiment: &'a Experiment,
    /// Seeds per run.
    pub seeds: u64,
    /// Its rows.
    pub rows: Vec<RowResult>,
    /// Where the values came from when not from this command's runs under
    /// `--out` (an earlier report's runs: their command and what they were).
    pub values: Option<String>,
    /// With runs: where they are (`<out>/<experiment>`), recorded so that a
    /// later `--values-from` of this report can say where its values came
    /// from.
    pub runs: Option<String>,
}

#[derive(Serialize)]
struct ExperimentJson<'a> {
    name: &'a str,
    title: &'a str,
    source: &'a str,
    seeds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    runs: Option<&'a str>,
    rows: &'a [RowResult],
}

#[derive(Serialize)]
struct ReportJson<'a> {
    format: u32,
    info: &'a ReportInfo,
    #[serde(flatten)]
    counts: Counts,
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
            Verdict::Inconclusive { seeds_needed } => match seeds_needed {
                Some(n) => write!(f, "inconclusive (about {n} seeds would settle it)"),
                None => f.write_str("inconclusive"),
            },
            Verdict::Differs { by, relative } => {
                write!(f, "differs by {} ({:+.0} %)", num(*by), relative * 100.0)
            }
            Verdict::NotMeasurable { limit } => write!(
                f,
                "not measurable at this resolution (the metric's limit is {})",
                num(*limit)
            ),
            Verdict::Measured => f.write_str("measured"),
            Verdict::NoData => f.write_str("no data"),
        }
    }
}

impl RowResult {
    /// The verdict as the report and the command's summary print it: an
    /// inconclusive row with an interval but no seed count needs more than
    /// [`super::verdict::MAX_SEEDS`].
    pub fn verdict_text(&self) -> String {
        match (self.verdict, &self.ours) {
            (Verdict::Inconclusive { seeds_needed: None }, Some(o)) if o.n >= 2 => format!(
                "inconclusive (more than {} seeds would be needed)",
                super::verdict::MAX_SEEDS
            ),
            (v, _) => v.to_string(),
        }
    }
}

/// Rows by verdict.
#[derive(Clone, Copy, Debug, Default, Serialize)]
struct Counts {
    reproduced: usize,
    inconclusive: usize,
    differs_explained: usize,
    differs_unexplained: usize,
    not_measurable: usize,
    no_data: usize,
    measured: usize,
}

impl Counts {
    fn of<'a>(rows: impl Iterator<Item = &'a RowResult>) -> Counts {
        let mut c = Counts::default();
        for r in rows {
            match r.verdict {
                Verdict::Reproduced => c.reproduced += 1,
                Verdict::Inconclusive { .. } => c.inconclusive += 1,
                Verdict::Differs { .. } if r.evidence.is_some() => c.differs_explained += 1,
                Verdict::Differs { .. } => c.differs_unexplained += 1,
                Verdict::NotMeasurable { .. } => c.not_measurable += 1,
                Verdict::NoData => c.no_data += 1,
                Verdict::Measured => c.measured += 1,
            }
        }
        c
    }

    fn published(&self) -> usize {
        self.reproduced
            + self.inconclusive
            + self.differs_explained
            + self.differs_unexplained
            + self.not_measurable
            + self.no_data
    }
}

/// The rules, as the report states them at the top.
const RULES: &str = "Each number is the mean over seeds with its 95 % Student-t interval. \
The published number and the tolerance we claim give a band of agreeing values (`±t`: \
the value ± t; `±p %`: ± p % of it; `fx`: from the value / f to the value × f; a published \
range widens by the tolerance at each end). A row is **reproduced** when the whole interval \
lies inside the band, **differs** when the whole interval lies outside it, and is \
**inconclusive** when the interval crosses an edge of the band (or one seed gives no \
interval); then the report says about how many seeds would settle it at the observed spread. \
A published value beyond what the metric can take in the setup (below its floor, such as a \
time measured in 1-s windows; above its ceiling) is **not measurable at this resolution**. \
A differing row is *explained* when it names its evidence (an independent simulator's run, \
a diagnostic run), else *unexplained*.";

/// The Markdown report.
fn markdown(info: &ReportInfo, results: &[Judged<'_>]) -> String {
    let mut md = String::new();
    let all = Counts::of(results.iter().flat_map(|r| r.rows.iter()));
    let _ = writeln!(md, "# Tollgate reproductions\n");
    let _ = write!(
        md,
        "Written by `{}` (tollgate-tools {}){}.",
        info.command,
        info.tollgate_version,
        if info.quick {
            ", **--quick: shortened runs, indicative only**"
        } else {
            ""
        },
    );
    let stored: Vec<&Judged> = results.iter().filter(|j| j.values.is_some()).collect();
    if !stored.is_empty() {
        if stored.len() == results.len() {
            md.push_str(" The values come from earlier runs:");
        } else {
            let ran: Vec<&str> = results
                .iter()
                .filter(|j| j.values.is_none())
                .map(|j| j.experiment.name.as_str())
                .collect();
            let _ = write!(
                md,
                " The values of {} come from the runs this command read; the other \
                 experiments' from earlier runs:",
                ran.join(", ")
            );
        }
        md.push('\n');
        for j in stored {
            let _ = write!(
                md,
                "\n- {}: {}",
                j.experiment.name,
                j.values.as_deref().unwrap_or("").trim()
            );
        }
        md.push('\n');
    }
    md.push('\n');
    let _ = writeln!(md, "\n{RULES}\n");
    let _ = writeln!(
        md,
        "{} published rows: **{} reproduced, {} inconclusive, {} differ** ({} explained, {} \
         unexplained), {} not measurable at this resolution, {} without data; {} rows measured \
         without a published number.\n",
        all.published(),
        all.reproduced,
        all.inconclusive,
        all.differs_explained + all.differs_unexplained,
        all.differs_explained,
        all.differs_unexplained,
        all.not_measurable,
        all.no_data,
        all.measured,
    );
    let _ = writeln!(
        md,
        "| experiment | rows | reproduced | inconclusive | differ, explained | differ, unexplained | not measurable | no data | measured |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for Judged {
        experiment: exp,
        rows,
        ..
    } in results
    {
        let c = Counts::of(rows.iter());
        let _ = writeln!(
            md,
            "| [{}](#{}) | {} | {} | {} | {} | {} | {} | {} | {} |",
            exp.name,
            exp.name,
            rows.len(),
            c.reproduced,
            c.inconclusive,
            c.differs_explained,
            c.differs_unexplained,
            c.not_measurable,
            c.no_data,
            c.measured,
        );
    }
    for Judged {
        experiment: exp,
        seeds,
        rows,
        ..
    } in results
    {
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
                    "| row | scenario | metric | published | tolerance (band) | Tollgate | verdict |\n\
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
            let tolerance = match (&r.tolerance, r.band) {
                (Some(t), Some([lo, hi])) => format!("{t} ({}–{})", num(lo), num(hi)),
                _ => "-".into(),
            };
            let mut verdict = r.verdict_text();
            if matches!(r.verdict, Verdict::Differs { .. }) {
                match &r.evidence {
                    Some(e) => {
                        let _ = write!(verdict, "; explained: {}", e.trim());
                    }
                    None => verdict.push_str("; unexplained"),
                }
            }
            let _ = writeln!(
                md,
                "| {label} | `{scenario}` | `{}` | {} | {tolerance} | {} | {verdict} |",
                r.metric,
                published_text(r.published),
                ours_text(r),
            );
        }
        for (i, n) in notes.iter().enumerate() {
            let _ = writeln!(md, "\n[{}] {n}", i + 1);
        }
        if let Some(f) = &m.findings {
            let _ = writeln!(md, "\n{}", f.trim());
        }
        if rows.iter().any(plotted) {
            let _ = writeln!(md, "\n![{}]({}/rows.svg)", exp.name, exp.name);
        }
    }
    md
}

/// Whether a row has a point in the experiment's plot: a published number
/// other than 0 and a value of ours. An experiment of measured rows only
/// has no plot, and its report section no link to one.
fn plotted(r: &RowResult) -> bool {
    r.published.is_some_and(|p| p.centre() != 0.0) && r.ours.is_some()
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
        let (true, Some(p), Some(o)) = (plotted(r), r.published, &r.ours) else {
            continue;
        };
        let c = p.centre();
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
    results: &[Judged<'_>],
    plots: bool,
) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(out)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
    if plots {
        for Judged {
            experiment: exp,
            rows,
            ..
        } in results
        {
            let dir = out.join(&exp.name);
            std::fs::create_dir_all(&dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
            plot(&dir, exp, rows)?;
        }
    }
    let json = ReportJson {
        format: 2,
        info,
        counts: Counts::of(results.iter().flat_map(|r| r.rows.iter())),
        experiments: results
            .iter()
            .map(|j| ExperimentJson {
                name: &j.experiment.name,
                title: &j.experiment.manifest.title,
                source: &j.experiment.manifest.source,
                seeds: j.seeds,
                values: j.values.as_deref(),
                runs: j.runs.as_deref(),
                rows: &j.rows,
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

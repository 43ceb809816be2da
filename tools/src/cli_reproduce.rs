//! `tollgate reproduce`: run the seed experiments and write the report. The
//! experiments, verdicts and report are in [`tollgate_tools::reproduce`];
//! this file holds the options and drives the process pool.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use tollgate_tools::reproduce::{self, Experiment, Options, Prepared, ReportInfo};

use crate::cli_pool::{self, ChildRun, Ended, PoolArgs};
use crate::cli_sim::EXIT_INTERRUPTED;

/// `tollgate reproduce`.
#[derive(Debug, Args)]
#[command(
    after_help = "Experiments: --list names them. Each is a directory of scenario files \
and an experiment.toml whose rows name a scenario, a metric, the published number and the \
tolerance we claim. Every scenario runs as a campaign of N seeds (default 5; 2 with --quick) \
under <out>/<experiment>/, all runs of all experiments through one pool of -j child processes. \
Then <out>/REPORT.md puts each published row beside our mean and 95 % interval with a verdict \
(reproduced / differs by how much), <out>/reproduce.json holds the same and every seed's value, \
and <out>/<experiment>/rows.svg plots ours relative to the published numbers.

Resumable: finished runs are kept; after Ctrl-C (exit 130, the report is written from what \
finished) the same command runs only what is missing, and --report-only rewrites the report \
from what finished without starting any run. Changing --seeds or --quick for an \
existing --out is refused: give another --out. --values-from judges the rows again from the \
per-seed values an earlier reproduce.json recorded (after a manifest's published number, \
tolerance or evidence changed, or the verdict rules did), without the runs.

Verdicts: a row is reproduced when the whole 95 % interval of our mean lies inside the band \
the published number and its tolerance give, differs when the whole interval lies outside it, \
and is inconclusive when the interval crosses an edge (with the seeds that would likely \
settle it); a published value beyond the metric's floor or ceiling in the setup is not \
measurable at this resolution.

Examples:
  tollgate reproduce --list
  tollgate reproduce tax                 # one experiment, 5 seeds
  tollgate reproduce --all --quick       # every experiment, short runs (what CI runs)
  tollgate reproduce libra --seeds 10 -j 8
  tollgate reproduce --all --report-only # the report of what finished so far, no runs
  tollgate reproduce --all --values-from tools/reproduce/reproduce.json --out tools/reproduce"
)]
pub struct ReproduceArgs {
    /// Experiments to run (see --list).
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Run every experiment.
    #[arg(long, conflicts_with = "names")]
    pub all: bool,
    /// List the experiments (name, title, rows, runs) and exit.
    #[arg(long)]
    pub list: bool,
    /// Shorter runs with fewer seeds (each experiment's `quick` settings):
    /// indicative numbers in minutes.
    #[arg(long)]
    pub quick: bool,
    /// Seeds per run (default: the experiment's, 5; 2 with --quick).
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
    /// Results root (default results/reproduce, or results/reproduce-quick
    /// with --quick).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Where the experiments are (default: tools/scenarios/reproduce under
    /// the current directory, else in the source tree this binary was built
    /// from).
    #[arg(long, value_name = "DIR")]
    pub experiments: Option<PathBuf>,
    /// Start no run: write the report from the runs of --out that finished
    /// (a long campaign's state so far; rows of missing runs say how many
    /// seeds they have, or "no data").
    #[arg(long)]
    pub report_only: bool,
    /// Start no run: an experiment with a directory under --out is reported
    /// from its finished runs there, every other one judged again from the
    /// per-seed values FILE (an earlier reproduce.json) recorded, with the
    /// current manifests (published numbers, tolerances, evidence).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["quick", "seeds"])]
    pub values_from: Option<PathBuf>,
    #[command(flatten)]
    pub pool: PoolArgs,
}

/// The command line as a user types it (`tollgate ...`, not the binary's path).
fn command_line() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        *first = "tollgate".into();
    }
    args.join(" ")
}

/// One line per row: experiment, label, published, ours, verdict.
fn print_rows(results: &[reproduce::Judged<'_>]) {
    for j in results {
        for r in &j.rows {
            let ours = r
                .ours
                .as_ref()
                .map_or("-".into(), |o| format!("{:.3}", o.mean));
            let published = r
                .published
                .map_or("-".into(), |p| format!("{:.3}", p.centre()));
            println!(
                "{:<8} {:<44} published {:>8}  ours {:>8}  {}",
                j.experiment.name,
                r.label,
                published,
                ours,
                r.verdict_text()
            );
        }
    }
}

fn experiments_dir(given: Option<&Path>) -> PathBuf {
    if let Some(d) = given {
        return d.to_path_buf();
    }
    let here = PathBuf::from("tools/scenarios/reproduce");
    if here.is_dir() {
        return here;
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/reproduce"))
}

fn select(all: Vec<Experiment>, a: &ReproduceArgs) -> anyhow::Result<Vec<Experiment>> {
    if a.all {
        return Ok(all);
    }
    let known: Vec<String> = all.iter().map(|e| e.name.clone()).collect();
    if a.names.is_empty() {
        anyhow::bail!(
            "name the experiments to run ({}), or give --all; --list describes them",
            known.join(", ")
        );
    }
    let mut all: Vec<Option<Experiment>> = all.into_iter().map(Some).collect();
    let mut chosen = Vec::new();
    for n in &a.names {
        let Some(i) = known.iter().position(|k| k == n) else {
            anyhow::bail!("no experiment `{n}`; known: {}", known.join(", "));
        };
        // A name given twice runs once.
        chosen.extend(all[i].take());
    }
    Ok(chosen)
}

fn list(all: &[Experiment], quick: bool, seeds: Option<u64>) {
    let w = all.iter().map(|e| e.name.len()).max().unwrap_or(0).max(4);
    println!(
        "{:<w$} {:>5} {:>6} {:>8}  title",
        "name", "rows", "runs", "virtual"
    );
    for e in all {
        let n = e.seeds(quick, seeds);
        let (mut runs, mut virt) = (0usize, 0.0);
        for plan in &e.plans {
            runs += plan.runs.len() * n as usize;
            virt += plan.runs.iter().map(|s| s.duration_s).sum::<f64>() * n as f64;
        }
        let virt = if quick {
            "(quick)".to_string()
        } else {
            format!("{:.0} s", virt)
        };
        println!(
            "{:<w$} {:>5} {:>6} {:>8}  {}",
            e.name,
            e.manifest.rows.len(),
            runs,
            virt,
            e.manifest.title
        );
    }
}

/// Whether a `results.json` lies in `dir` or below it, at most `depth`
/// directories down (a campaign's `<point>/seed-<n>/`).
fn has_results(dir: &Path, depth: u32) -> bool {
    if dir.join("results.json").is_file() {
        return true;
    }
    depth > 0
        && std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.path().is_dir() && has_results(&e.path(), depth - 1))
        })
}

/// Run `tollgate reproduce`.
pub fn reproduce(a: ReproduceArgs) -> anyhow::Result<ExitCode> {
    let dir = experiments_dir(a.experiments.as_deref());
    let all = reproduce::discover(&dir)?;
    if a.list {
        list(&all, a.quick, a.seeds);
        return Ok(ExitCode::SUCCESS);
    }
    if a.seeds == Some(0) {
        anyhow::bail!("--seeds 0: give at least 1 (5 or more for a reproduction)");
    }
    let chosen = select(all, &a)?;
    let jobs = cli_pool::jobs(a.pool.jobs)?;
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(if a.quick {
            "results/reproduce-quick"
        } else {
            "results/reproduce"
        })
    });
    let opts = Options {
        out: out.clone(),
        quick: a.quick,
        seeds: a.seeds,
    };
    // With --values-from, an experiment without a finished run under --out
    // takes the values the earlier report recorded; the others their runs.
    let stored = a
        .values_from
        .as_deref()
        .map(reproduce::read_stored)
        .transpose()?;
    let from_runs: Vec<bool> = chosen
        .iter()
        .map(|e| {
            stored.is_none()
                || e.plans
                    .iter()
                    .any(|p| has_results(&out.join(&e.name).join(&p.name), 3))
        })
        .collect();
    let prepared = reproduce::prepare_some(&chosen, &from_runs, &opts)?;
    let total: usize = prepared.iter().map(|p| p.campaign.runs.len()).sum();
    let unfinished: Vec<ChildRun> = prepared
        .iter()
        .flat_map(|p| {
            p.campaign
                .unfinished(&p.root)
                .into_iter()
                .map(move |index| ChildRun {
                    scenario: p.path.clone(),
                    index,
                    out: p.root.clone(),
                    seeds: Some(p.seeds),
                    no_plots: a.pool.no_plots,
                    dir: p.campaign.run_dir(&p.root, index),
                })
        })
        .collect();
    let before = total - unfinished.len();
    // --report-only and --values-from start no run.
    let starts_runs = !a.report_only && stored.is_none();
    let todo = if !starts_runs {
        if !a.pool.quiet && !unfinished.is_empty() {
            eprintln!(
                "--report-only: {} of {total} runs not finished are left out of the report",
                unfinished.len()
            );
        }
        Vec::new()
    } else {
        unfinished
    };
    if !a.pool.quiet && starts_runs {
        eprintln!(
            "reproduce {}: {total} runs, {before} already finished, {} to run, {} at a time; results in {}",
            chosen
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            todo.len(),
            jobs.min(todo.len().max(1)),
            out.display()
        );
    }
    let started = Instant::now();
    let ended = cli_pool::run_all(&todo, jobs, "reproduce", total, before, a.pool.quiet)?;
    let wall = started.elapsed().as_secs_f64();
    let failed = ended
        .iter()
        .filter(|(_, e)| matches!(e, Ended::Failed(_)))
        .count();
    let now = ended
        .iter()
        .filter(|(_, e)| matches!(e, Ended::Finished))
        .count();
    // The campaign statistics of every scenario (campaign.json, plots),
    // from whatever finished.
    for p in &prepared {
        let dir = p.campaign.dir(&p.root);
        let merged = tollgate_tools::campaign::merge(&dir)?;
        merged.write(&dir, !a.pool.no_plots)?;
    }
    let mut results = Vec::new();
    for (i, e) in chosen.iter().enumerate() {
        if from_runs[i] {
            let mine: Vec<&Prepared> = prepared.iter().filter(|p| p.experiment == i).collect();
            results.push(reproduce::Judged {
                experiment: e,
                seeds: e.seeds(a.quick, a.seeds),
                rows: reproduce::evaluate(e, reproduce::Source::Runs(&mine))?,
                values: None,
                runs: Some(out.join(&e.name).display().to_string()),
            });
            continue;
        }
        let (Some(stored), Some(file)) = (&stored, &a.values_from) else {
            unreachable!("only --values-from leaves an experiment without runs");
        };
        let s = stored
            .experiments
            .iter()
            .find(|s| s.name == e.name)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no values for experiment `{}` (and no runs under {}); it holds {}",
                    file.display(),
                    e.name,
                    out.display(),
                    stored
                        .experiments
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        results.push(reproduce::Judged {
            experiment: e,
            seeds: s.seeds,
            rows: reproduce::evaluate(e, reproduce::Source::Stored(s))?,
            values: Some(stored.provenance(s)),
            runs: None,
        });
    }
    let info = ReportInfo {
        command: command_line(),
        tollgate_version: env!("CARGO_PKG_VERSION").to_string(),
        quick: a.quick,
        wall_s: wall,
        runs_now: now,
        runs_before: before,
    };
    let report = reproduce::write_report(&out, &info, &results, !a.pool.no_plots)?;
    if !a.pool.quiet {
        print_rows(&results);
        eprintln!(
            "ran {now} runs in {wall:.1} s wall; report: {}",
            report.display()
        );
    }
    if cli_pool::stopped() {
        eprintln!(
            "stopped: the report covers the runs that finished; the same command resumes the rest"
        );
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if failed > 0 {
        eprintln!("error: {failed} runs failed (above); the report leaves them out");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

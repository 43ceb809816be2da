//! One scenario file end to end: resolve every sweep point, simulate, build
//! and write the results, render the plots, print the summary table.
//!
//! Nothing is written unless the whole file (every sweep point) validates.
//!
//! A run can be stopped early through a stop flag (the CLI sets it on Ctrl-C
//! or SIGTERM): the point being simulated ends at the virtual time reached
//! and is written as usual, marked partial; later sweep points are not run
//! ([`Outcome`]).
//!
//! A file with replicated seeds runs as a campaign ([`run_replicated`]):
//! every sweep point once per seed, into `<out>/<name>/<point>/seed-<s>/`,
//! then the mean and 95 % confidence interval of every summary metric per
//! point (`campaign.json`). [`run_index`] runs one numbered run of such a
//! campaign (`tollgate sim --run-index`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::campaign::{self, Campaign, Merged};
use crate::results::{self, Results};
use crate::scenario::{Plan, Scenario};
use crate::{plot, sim};

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Results root (`results/` by default); a run writes `<root>/<name>/`.
    pub out: PathBuf,
    /// Print nothing but errors.
    pub quiet: bool,
    /// Render plots.
    pub plots: bool,
}

/// Wall-clock figures of one run (stdout only; never in results.json).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Wall time of the simulation.
    pub wall: Duration,
    /// Datagrams simulated.
    pub packets: u64,
    /// Logical processes the network was split into.
    pub lps: usize,
    /// Threads the run used (at most `lps`).
    pub threads: usize,
}

/// What [`run_plan`] did.
#[derive(Debug)]
pub struct Outcome {
    /// The results of every point that ran, in order (the last one partial
    /// when the plan was stopped during it).
    pub results: Vec<Results>,
    /// The plan was stopped before it finished.
    pub stopped: bool,
    /// Sweep points that were not run because of the stop (`param=value`;
    /// the scenario name for a plan without a sweep).
    pub not_run: Vec<String>,
}

/// Simulate one resolved scenario, with a progress bar on a terminal.
///
/// When `stop` becomes true the simulation ends at the virtual time reached
/// and the results are marked partial ([`Results::partial`]).
pub fn simulate(s: &Scenario, quiet: bool, stop: &AtomicBool) -> anyhow::Result<(Results, Timing)> {
    let started = Instant::now();
    let show = !quiet && std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:40}] {percent}% virtual time, {elapsed} wall")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(s.name.clone());
    let mut visible = false;
    let mut progress = |f: f64| {
        if show && !visible && started.elapsed() > Duration::from_secs(2) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            visible = true;
        }
        bar.set_position((f * 1000.0) as u64);
    };
    let data = sim::run(s, &mut progress, stop)?;
    bar.finish_and_clear();
    let wall = started.elapsed();
    let r = results::build(s, &data);
    Ok((
        r,
        Timing {
            wall,
            packets: data.packets_sent,
            lps: data.lps,
            threads: sim::engine::default_threads().min(data.lps),
        },
    ))
}

/// The directory of one run's results.
pub fn run_dir(root: &Path, s: &Scenario) -> PathBuf {
    let mut d = root.join(&s.name);
    if let Some(p) = &s.sweep_point {
        d = d.join(p.replace(['/', ' '], "_"));
    }
    d
}

/// Run every point of a plan, writing each point's results as it finishes.
///
/// `stop` ends the plan early: the point being simulated is written partial,
/// and the points after it are not run (listed in [`Outcome::not_run`]). A
/// stop requested while a finished point is being written lets that point
/// stand complete.
pub fn run_plan(plan: &Plan, opts: &Options, stop: &AtomicBool) -> anyhow::Result<Outcome> {
    let mut all = Vec::new();
    let mut not_run = Vec::new();
    for (i, s) in plan.runs.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            not_run = plan.runs[i..].iter().map(point_name).collect();
            break;
        }
        if !opts.quiet {
            eprintln!(
                "running {}{} ({} s virtual; Ctrl-C stops it and keeps the results so far)",
                s.name,
                s.sweep_point
                    .as_ref()
                    .map_or(String::new(), |p| format!(" [{p}]")),
                s.duration_s
            );
        }
        let (r, timing) = simulate(s, opts.quiet, stop)?;
        let dir = run_dir(&opts.out, s);
        results::write(&dir, &r)?;
        if opts.plots {
            plot::render_run(&dir, &r)?;
        }
        if r.partial {
            eprintln!(
                "{}: partial results up to {:.1} s of {} s virtual time in {}",
                point_name(s),
                r.reached_s,
                s.duration_s,
                dir.display()
            );
        }
        if !opts.quiet {
            print!("{}", results::table(&r));
            println!("{}", timing_line(s, &r, timing, &dir));
            println!();
        }
        all.push(r);
    }
    let stopped = all.last().is_some_and(|r| r.partial) || !not_run.is_empty();
    if !not_run.is_empty() {
        eprintln!("not run (stopped): {}", not_run.join(", "));
    }
    if let Some(param) = &plan.sweep_param {
        let dir = opts.out.join(&plan.name);
        let summary: Vec<serde_json::Value> = all
            .iter()
            .map(|r| {
                serde_json::json!({
                    "point": r.sweep_point,
                    "partial": r.partial,
                    "reached_s": r.reached_s,
                    "jain": r.summary.jain,
                    "fairness_ratio": r.summary.fairness_ratio,
                    "utilization": r.summary.utilization,
                    "total_goodput_mbps": r.summary.total_goodput_mbps,
                })
            })
            .collect();
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join("sweep.json"),
            serde_json::to_string_pretty(&serde_json::json!({
                "scenario": plan.name,
                "param": param,
                "runs": summary,
                "not_run": not_run,
            }))? + "\n",
        )?;
        if opts.plots {
            plot::render_sweep(&dir, param, &all)?;
        }
        if !opts.quiet {
            println!("sweep over {param}:");
            println!("{:>16} {:>7} {:>8} {:>8}", "value", "JFI", "ratio", "util");
            for r in &all {
                let v = r
                    .sweep_point
                    .as_deref()
                    .and_then(|p| p.split_once('='))
                    .map_or("", |(_, v)| v);
                println!(
                    "{:>16} {:>7} {:>8} {:>7.1}%{}",
                    v,
                    r.summary.jain.map_or("-".into(), |x| format!("{x:.3}")),
                    r.summary
                        .fairness_ratio
                        .map_or("-".into(), |x| format!("{x:.2}")),
                    r.summary.utilization * 100.0,
                    if r.partial {
                        format!("  (partial, to {:.1} s)", r.reached_s)
                    } else {
                        String::new()
                    }
                );
            }
            for p in &not_run {
                println!(
                    "{:>16} not run",
                    p.split_once('=').map_or(p.as_str(), |(_, v)| v)
                );
            }
        }
    }
    Ok(Outcome {
        results: all,
        stopped,
        not_run,
    })
}

/// A run's name in messages: its sweep point, or the scenario name.
fn point_name(s: &Scenario) -> String {
    s.sweep_point.clone().unwrap_or_else(|| s.name.clone())
}

/// What [`run_replicated`] did.
#[derive(Debug)]
pub struct Replicated {
    /// The statistics over every finished run (also in `campaign.json`).
    pub merged: Merged,
    /// The campaign was stopped before it finished.
    pub stopped: bool,
}

/// Run number `index` of a campaign into `<out>/<name>/<point>/seed-<s>/`
/// (and the plan file, created or checked), print its table unless quiet.
/// An index out of range is an error naming the valid range, and writes
/// nothing.
pub fn run_index(
    c: &Campaign,
    index: usize,
    opts: &Options,
    stop: &AtomicBool,
) -> anyhow::Result<Results> {
    let s = c.scenario(index)?;
    c.ensure_plan_file(&opts.out)?;
    let (r, timing) = simulate(s, opts.quiet, stop)?;
    let dir = c.run_dir(&opts.out, index);
    write_run(&dir, &r, opts)?;
    if !opts.quiet {
        print!("{}", results::table(&r));
        println!("{}", timing_line(s, &r, timing, &dir));
    }
    Ok(r)
}

/// Every run of a campaign in turn (point-major, seed-minor), then the
/// statistics per point: `campaign.json`, the error-bar plots, and the
/// table on stdout. A stop ends the campaign after the run it interrupts
/// (written partial); the runs not reached are named.
pub fn run_replicated(
    c: &Campaign,
    opts: &Options,
    stop: &AtomicBool,
) -> anyhow::Result<Replicated> {
    c.ensure_plan_file(&opts.out)?;
    let mut not_run = Vec::new();
    let mut stopped = false;
    for (i, run) in c.runs.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            not_run = c.runs[i..].iter().map(|r| r.dir.clone()).collect();
            break;
        }
        let s = c.scenario(i)?;
        if !opts.quiet {
            eprintln!(
                "running {} run {i} (of {}): {} seed {} ({} s virtual; Ctrl-C stops it and keeps the results so far)",
                c.name,
                c.runs.len(),
                point_name(s),
                run.seed,
                s.duration_s
            );
        }
        let (r, timing) = simulate(s, opts.quiet, stop)?;
        let dir = c.run_dir(&opts.out, i);
        write_run(&dir, &r, opts)?;
        stopped |= r.partial;
        if !opts.quiet {
            let f = |x: Option<f64>, d: usize| x.map_or("-".to_string(), |v| format!("{v:.d$}"));
            println!(
                "run {i:>3}  {}  seed {:<6} JFI {}  ratio {}  util {:.1}%  goodput {:.2} Mbit/s{}  ({:.2} s wall)",
                point_name(s),
                run.seed,
                f(r.summary.jain, 3),
                f(r.summary.fairness_ratio, 2),
                r.summary.utilization * 100.0,
                r.summary.total_goodput_mbps,
                if r.partial { "  PARTIAL" } else { "" },
                timing.wall.as_secs_f64()
            );
        }
    }
    if !not_run.is_empty() {
        stopped = true;
        eprintln!("not run (stopped): {}", not_run.join(", "));
    }
    let dir = c.dir(&opts.out);
    let merged = campaign::merge(&dir)?;
    merged.write(&dir, opts.plots)?;
    if !opts.quiet {
        println!();
        print!("{}", campaign::stats_table(&merged));
        println!(
            "statistics in {}",
            dir.join(campaign::MERGED_FILE).display()
        );
    }
    Ok(Replicated { merged, stopped })
}

/// Write one run's results.json, flows.csv and plots; say so if partial.
fn write_run(dir: &Path, r: &Results, opts: &Options) -> anyhow::Result<()> {
    results::write(dir, r)
        .map_err(|e| anyhow::anyhow!("cannot write the results to {}: {e}", dir.display()))?;
    if opts.plots {
        plot::render_run(dir, r)?;
    }
    if r.partial {
        eprintln!(
            "{} seed {}: partial results up to {:.1} s of {} s virtual time in {}",
            r.sweep_point.as_deref().unwrap_or(&r.scenario),
            r.seed,
            r.reached_s,
            r.summary.duration_s,
            dir.display()
        );
    }
    Ok(())
}

/// The wall-time line printed after a run's table.
fn timing_line(s: &Scenario, r: &Results, timing: Timing, dir: &Path) -> String {
    let secs = timing.wall.as_secs_f64();
    let simulated = if r.partial {
        format!("{:.1}", r.reached_s)
    } else {
        s.duration_s.to_string()
    };
    format!(
        "wall time {:.2} s for {simulated} s simulated ({:.1}x real time), {} packets, {:.0} packets/s, \
         {} thread{} ({} logical processes); results in {}",
        secs,
        r.reached_s / secs.max(1e-9),
        timing.packets,
        timing.packets as f64 / secs.max(1e-9),
        timing.threads,
        if timing.threads == 1 { "" } else { "s" },
        timing.lps,
        dir.display()
    )
}

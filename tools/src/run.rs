//! One scenario file end to end: resolve every sweep point, simulate, build
//! and write the results, render the plots, print the summary table.
//!
//! Nothing is written unless the whole file (every sweep point) validates.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
}

/// Simulate one resolved scenario, with a progress bar on a terminal.
pub fn simulate(s: &Scenario, quiet: bool) -> anyhow::Result<(Results, Timing)> {
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
    let data = sim::run(s, &mut progress)?;
    bar.finish_and_clear();
    let wall = started.elapsed();
    let r = results::build(s, &data);
    Ok((
        r,
        Timing {
            wall,
            packets: data.packets_sent,
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

/// Run every point of a plan; returns the results in order.
pub fn run_plan(plan: &Plan, opts: &Options) -> anyhow::Result<Vec<Results>> {
    let mut all = Vec::new();
    for s in &plan.runs {
        let (r, timing) = simulate(s, opts.quiet)?;
        let dir = run_dir(&opts.out, s);
        results::write(&dir, &r)?;
        if opts.plots {
            plot::render_run(&dir, &r)?;
        }
        if !opts.quiet {
            print!("{}", results::table(&r));
            let secs = timing.wall.as_secs_f64();
            println!(
                "wall time {:.2} s for {} s simulated ({:.1}x real time), {} packets, {:.0} packets/s; results in {}",
                secs,
                s.duration_s,
                s.duration_s / secs.max(1e-9),
                timing.packets,
                timing.packets as f64 / secs.max(1e-9),
                dir.display()
            );
            println!();
        }
        all.push(r);
    }
    if let Some(param) = &plan.sweep_param {
        let dir = opts.out.join(&plan.name);
        let summary: Vec<serde_json::Value> = all
            .iter()
            .map(|r| {
                serde_json::json!({
                    "point": r.sweep_point,
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
                    "{:>16} {:>7} {:>8} {:>7.1}%",
                    v,
                    r.summary.jain.map_or("-".into(), |x| format!("{x:.3}")),
                    r.summary
                        .fairness_ratio
                        .map_or("-".into(), |x| format!("{x:.2}")),
                    r.summary.utilization * 100.0
                );
            }
        }
    }
    Ok(all)
}

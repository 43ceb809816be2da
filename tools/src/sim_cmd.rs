//! `tollgate sim SCENARIO.toml` and `tollgate report RESULTS.json`.

use std::path::PathBuf;

use clap::Args;
use tollgate_tools::{plot, results, run, scenario};

/// Run a scenario in virtual time.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The scenario file (see tools/README.md for the format).
    pub scenario: PathBuf,
    /// Results root; the run writes `<out>/<name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Override the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print nothing but errors (no table, no progress bar).
    #[arg(long, short)]
    pub quiet: bool,
    /// Skip the SVG/PNG plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Only check the scenario file.
    #[arg(long)]
    pub check: bool,
}

/// Re-render a results file (table and plots) without re-running.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results.json written by `tollgate sim`.
    pub results: PathBuf,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `tollgate sim`.
pub fn sim(args: SimArgs) -> anyhow::Result<()> {
    let mut plan = scenario::load(&args.scenario)?;
    if let Some(seed) = args.seed {
        for r in &mut plan.runs {
            r.seed = seed;
        }
    }
    if args.check {
        if !args.quiet {
            println!(
                "{}: ok ({} run{}, {} flows)",
                args.scenario.display(),
                plan.runs.len(),
                if plan.runs.len() == 1 { "" } else { "s" },
                plan.runs[0].flow_count()
            );
        }
        return Ok(());
    }
    run::run_plan(
        &plan,
        &run::Options {
            out: args.out,
            quiet: args.quiet,
            plots: !args.no_plots,
        },
    )?;
    Ok(())
}

/// `tollgate report`.
pub fn report(args: ReportArgs) -> anyhow::Result<()> {
    let r = results::read(&args.results)?;
    if !args.no_plots {
        let dir = args
            .results
            .parent()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        plot::render_run(&dir, &r)?;
    }
    if !args.quiet {
        print!("{}", results::table(&r));
    }
    Ok(())
}

//! The command-line glue of `tollgate sim SCENARIO.toml` and `tollgate report
//! RESULTS.json`: options, the Ctrl-C / SIGTERM handler, exit codes. The
//! work itself is in [`tollgate_tools::experiment`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use clap::Args;
use tollgate_tools::{experiment, plot, results, scenario};

/// Exit code of a run stopped by a signal (128 + SIGINT, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Set by the first SIGINT / SIGTERM; the engine polls it.
static STOP: AtomicBool = AtomicBool::new(false);
/// Signals received so far.
static SIGNALS: AtomicU32 = AtomicU32::new(0);

/// Run a scenario in virtual time (Ctrl-C: see [`sim`]).
#[derive(Debug, Args)]
#[command(
    after_help = "Ctrl-C (or SIGTERM) stops the run at the virtual time reached and \
writes its results marked partial (\"partial\": true, \"reached_s\" in results.json); \
later sweep points are not run; exit code 130. A second Ctrl-C aborts at once."
)]
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

/// Install the SIGINT / SIGTERM handler: the first signal sets [`STOP`], the
/// second exits at once with [`EXIT_INTERRUPTED`].
fn install_stop_handler() -> anyhow::Result<()> {
    ctrlc::set_handler(|| {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            STOP.store(true, Ordering::SeqCst);
            eprintln!(
                "\ninterrupted: stopping at the current virtual time and writing partial results \
                 (Ctrl-C again to abort at once)"
            );
        } else {
            eprintln!("\naborted");
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
}

/// `tollgate sim`.
///
/// Ctrl-C (SIGINT) or SIGTERM stops the simulation at the virtual time it has
/// reached and writes results.json, flows.csv and the plots as usual, marked
/// `"partial": true` with `"reached_s"`; for a sweep, finished points are kept,
/// the interrupted point is written partial and the remaining points are not
/// run. The exit code is then 130. A second Ctrl-C aborts at once (exit 130),
/// writing nothing more.
pub fn sim(args: SimArgs) -> anyhow::Result<ExitCode> {
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
        return Ok(ExitCode::SUCCESS);
    }
    install_stop_handler()?;
    let outcome = experiment::run_plan(
        &plan,
        &experiment::Options {
            out: args.out,
            quiet: args.quiet,
            plots: !args.no_plots,
        },
        &STOP,
    )?;
    Ok(if outcome.stopped {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
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

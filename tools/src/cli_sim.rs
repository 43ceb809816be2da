//! The command-line glue of `tollgate sim SCENARIO.toml` and `tollgate report
//! RESULTS.json`: options, the Ctrl-C / SIGTERM handler, exit codes. The
//! work itself is in [`tollgate_tools::experiment`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use clap::Args;
use tollgate_tools::campaign::Campaign;
use tollgate_tools::{experiment, plot, results, scenario};

/// Exit code of a run stopped by a signal (128 + SIGINT, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Set by the first SIGINT / SIGTERM; the engine (or the load sampler) polls it.
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);
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
    /// The scenario file (see docs/scenarios.md for the format).
    pub scenario: PathBuf,
    /// Results root; the run writes `<out>/<name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Run with this one seed instead of the file's `seed`/`seeds` (results in
    /// `<out>/<name>/`, as without `seeds`).
    #[arg(long, conflicts_with = "seeds", value_name = "SEED")]
    pub seed: Option<u64>,
    /// Replicate every sweep point over seeds 1..=N (overrides the file's
    /// `seed`/`seeds`): runs go to `<out>/<name>/<point>/seed-<s>/`, and the
    /// mean and 95 % confidence interval of every summary metric per point are
    /// printed and written to `<out>/<name>/campaign.json`.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
    /// Run only run number I of the file's sweep points x seeds (point-major,
    /// seed-minor; `tollgate campaign plan FILE` lists them) into
    /// `<out>/<name>/<point>/seed-<s>/`: what a cluster's job-array task runs.
    #[arg(long, value_name = "I")]
    pub run_index: Option<usize>,
    /// Print nothing but errors (no table, no progress bar).
    #[arg(long, short)]
    pub quiet: bool,
    /// Skip the SVG/PNG plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Only check the scenario file.
    #[arg(long)]
    pub check: bool,
    /// Skip QUIC packet protection (AES-GCM) on 1-RTT packets for speed:
    /// a null cipher with the same tag length, so every packet keeps its
    /// size and results are the same (scenario field `packet_protection`).
    #[arg(long)]
    pub no_packet_protection: bool,
    /// Write the hosts' datagrams as pcap files, `DIR/sender.pcap` (every
    /// flow's data sender) and `DIR/receiver.pcap`, stamped in virtual time:
    /// what tcpdump records on a testbed's hosts (one run only; the same
    /// as setting `TOLLGATE_PCAP=DIR`).
    #[arg(long, value_name = "DIR")]
    pub pcap: Option<PathBuf>,
    /// Threads per run (default: the cores available). The emulator splits
    /// the network into logical processes synchronised by the shortest
    /// delay between them, so results are identical for any N; only the wall
    /// time changes (tools/README.md, "How the emulator works"). The
    /// threads wait for each other at every window: on a machine busy with
    /// other work, `--threads 1` can be faster.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
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
    install_stop_handler_saying(
        "interrupted: stopping at the current virtual time and writing partial results \
         (Ctrl-C again to abort at once)",
    )
}

/// [`install_stop_handler`] with the given message on the first signal.
pub(crate) fn install_stop_handler_saying(message: &'static str) -> anyhow::Result<()> {
    ctrlc::set_handler(move || {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            STOP.store(true, Ordering::SeqCst);
            eprintln!("\n{message}");
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
        plan.seeds = None;
    }
    if let Some(n) = args.seeds {
        plan.set_seed_count(n)?;
    }
    let threads = match args.threads {
        Some(0) => anyhow::bail!("--threads 0: give at least 1 thread"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    tollgate_tools::sim::engine::set_default_threads(threads);
    if args.no_packet_protection {
        for r in &mut plan.runs {
            r.packet_protection = false;
        }
    }
    if let Some(dir) = &args.pcap {
        if plan.run_count() != 1 {
            anyhow::bail!(
                "--pcap captures one run; {} has {} (pick one with --seed, without a sweep)",
                args.scenario.display(),
                plan.run_count()
            );
        }
        // Read by the engine (sim::pcap), like TOLLGATE_TRACE; set before
        // any thread starts.
        std::env::set_var("TOLLGATE_PCAP", dir);
    }
    if args.check {
        if !args.quiet {
            let n = plan.run_count();
            println!(
                "{}: ok ({} run{}, {} flows)",
                args.scenario.display(),
                n,
                if n == 1 { "" } else { "s" },
                plan.runs[0].flow_count()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let opts = experiment::Options {
        out: args.out,
        quiet: args.quiet,
        plots: !args.no_plots,
    };
    if let Some(index) = args.run_index {
        let c = Campaign::new(&plan)?;
        // Out of range: an error before anything is written.
        c.scenario(index)?;
        install_stop_handler()?;
        let r = experiment::run_index(&c, index, &opts, &STOP)?;
        return Ok(if r.partial {
            ExitCode::from(EXIT_INTERRUPTED)
        } else {
            ExitCode::SUCCESS
        });
    }
    if plan.seeds.is_some() {
        let c = Campaign::new(&plan)?;
        install_stop_handler()?;
        let outcome = experiment::run_replicated(&c, &opts, &STOP)?;
        return Ok(if outcome.stopped {
            ExitCode::from(EXIT_INTERRUPTED)
        } else {
            ExitCode::SUCCESS
        });
    }
    install_stop_handler()?;
    let outcome = experiment::run_plan(&plan, &opts, &STOP)?;
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

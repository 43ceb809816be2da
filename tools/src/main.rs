//! `tollgate`: the command-line front end.
//!
//! Today: `tollgate cca list` (every congestion-control algorithm with its
//! parameters and defaults) and `tollgate cca trace` (congestion windows over
//! a scripted scenario, printed and written as CSV), in `cli_cca.rs`;
//! `tollgate sim` (run a scenario in virtual time) and `tollgate report`
//! (re-render its results), in `cli_sim.rs`, over the library's
//! `experiment` module; `tollgate campaign plan|run|merge|slurm` (seeds x
//! sweep points as numbered runs, a local process pool, Slurm job arrays), in
//! `cli_campaign.rs`. `tollgate serve` and `tollgate
//! load` (the load generator for real networks), in `cli_load.rs`; `tollgate
//! compare` (results side by side), in `cli_compare.rs`; `tollgate
//! testbed` (a scenario through namespaces and `tollgate-router`), in
//! `cli_testbed.rs`; `tollgate reproduce` (the seed experiments beside
//! their published numbers), in `cli_reproduce.rs`. The child-process pool
//! of `campaign run` and `reproduce` is `cli_pool.rs`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: see `Cargo.toml`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cli_campaign;
mod cli_cca;
mod cli_compare;
mod cli_load;
mod cli_pool;
mod cli_reproduce;
mod cli_sim;
mod cli_testbed;
// docs/man/ and docs/schema/, checked against the code (tests only).
#[cfg(test)]
mod generated_docs;

/// Tollgate: run, measure and fix congestion-control unfairness.
#[derive(Debug, Parser)]
// `--version`: the crate version and the git revision it was built from
// (tools/build.rs).
#[command(name = "tollgate", version = env!("TOLLGATE_VERSION"), about, long_about = None)]
struct Cli {
    /// Log more on stderr: -v info, -vv debug, -vvv trace (default: warnings).
    /// `RUST_LOG` (e.g. `RUST_LOG=tollgate_transport=debug`) overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Congestion-control algorithms: list them, trace their windows.
    #[command(subcommand)]
    Cca(cli_cca::CcaCommand),
    /// Run a scenario in virtual time: summary table, `results/<name>/` (JSON, CSV, plots).
    Sim(cli_sim::SimArgs),
    /// Re-render a results.json (table and plots) without re-running.
    Report(cli_sim::ReportArgs),
    /// Results side by side (e.g. sim vs load of one scenario): metrics, differences, flow order, plots.
    Compare(cli_compare::CompareArgs),
    /// Serve bulk transfers to `tollgate load` (QUIC and kernel TCP, client-chosen CCAs).
    Serve(cli_load::ServeArgs),
    /// Run a scenario's flows (or --flows) over a real network against `tollgate serve`.
    Load(cli_load::LoadArgs),
    /// Run a scenario through network namespaces and tollgate-router on this machine (root).
    Testbed(cli_testbed::TestbedArgs),
    /// Many seeds and sweep points: plan, run locally in parallel, merge, or submit to Slurm.
    #[command(subcommand)]
    Campaign(cli_campaign::CampaignCommand),
    /// The seed experiments beside their published numbers: runs, verdicts, REPORT.md.
    Reproduce(cli_reproduce::ReproduceArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tollgate_transport::logging::init(cli.verbose);
    let result = match cli.command {
        Command::Cca(command) => cli_cca::run(command).map(|()| ExitCode::SUCCESS),
        Command::Sim(args) => cli_sim::sim(args),
        Command::Report(args) => cli_sim::report(args).map(|()| ExitCode::SUCCESS),
        Command::Compare(args) => cli_compare::compare(args).map(|()| ExitCode::SUCCESS),
        Command::Campaign(command) => cli_campaign::run(command),
        Command::Reproduce(args) => cli_reproduce::reproduce(args),
        Command::Serve(args) => cli_load::serve(args),
        Command::Load(args) => cli_load::load(args),
        Command::Testbed(args) => cli_testbed::testbed(args),
    };
    match result {
        Ok(code) => code,
        // A closed pipe (`tollgate cca list | head`) is not an error.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

//! `tollgate`: the command-line front end.
//!
//! Today: `tollgate cca list` (every congestion-control algorithm with its
//! parameters and defaults) and `tollgate cca trace` (congestion windows over
//! a scripted scenario, printed and written as CSV). The emulator (`sim`),
//! load generator (`load`/`serve`), testbed runner and reports join here as
//! their issues land. `tollgate sim` runs a scenario in virtual time and
//! `tollgate report` re-renders its results.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cca_cmd;
mod sim_cmd;

/// Tollgate: run, measure and fix congestion-control unfairness.
#[derive(Debug, Parser)]
#[command(name = "tollgate", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Congestion-control algorithms: list them, trace their windows.
    #[command(subcommand)]
    Cca(cca_cmd::CcaCommand),
    /// Run a scenario in virtual time: summary table, `results/<name>/` (JSON, CSV, plots).
    Sim(sim_cmd::SimArgs),
    /// Re-render a results.json (table and plots) without re-running.
    Report(sim_cmd::ReportArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cca(command) => cca_cmd::run(command).map(|()| ExitCode::SUCCESS),
        Command::Sim(args) => sim_cmd::sim(args),
        Command::Report(args) => sim_cmd::report(args).map(|()| ExitCode::SUCCESS),
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

//! The command line of `tollgate-router`.
//!
//! Compiled with or without the cargo feature `dpdk`, so the man page
//! (`docs/man/tollgate-router.1`) is generated from this definition on any
//! machine; the binary itself is built only with `dpdk`.

use std::time::Duration;

use clap::{ArgAction, Parser};

use crate::config::parse_duration;

/// What `--help` prints after the options.
const AFTER_HELP: &str = "\
Everything after `--` is passed to DPDK's EAL unchanged.

Example on virtual devices (no NICs, no hugepages; as root):
  tollgate-router --config router/examples/net-null.toml --duration 10s -- \\
      -l 0 --no-huge --no-pci -m 512 --vdev net_null0 --vdev net_null1

Example configurations (net_null, veth, two 10 GbE ports, L3): router/examples/.
Configuration reference (every key of router.toml, metric names):
router/DPDK.md in the Tollgate source tree.

Logging: warnings by default; -v info, -vv debug, -vvv trace. RUST_LOG
(e.g. RUST_LOG=tollgate_dataplane=debug), when set, takes precedence over -v.

Exit codes:
  0  ok
  2  bad command line or config (the message names the option or field)
  3  EAL or port failure (the message says what to change)
  4  packet accounting mismatch (rx != tx + dropped + queued)";

/// The DPDK dataplane of the Tollgate router.
///
/// Forwards packets between DPDK ports through the router library's
/// per-egress pipeline (classify, delay line, queue discipline, shaper),
/// prints statistics periodically, serves them as Prometheus metrics, and
/// on SIGINT/SIGTERM (or after --duration) drains the queues, prints the
/// final statistics and checks the accounting rx = tx + dropped + queued.
#[derive(Parser, Debug)]
#[command(name = "tollgate-router", version, after_help = AFTER_HELP)]
pub struct Args {
    /// The router configuration (TOML; reference: router/DPDK.md).
    #[arg(short, long, value_name = "FILE")]
    pub config: String,
    /// Stop by itself after this long, e.g. 10s, 500ms, 2m (overrides
    /// `duration` in the config).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Do not print the periodic statistics table (the final report is
    /// still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// More log output on stderr: -v info, -vv debug, -vvv trace.
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,
    /// DPDK EAL arguments, after `--` (e.g. -l 0 --no-huge --no-pci
    /// --vdev net_null0 --vdev net_null1).
    #[arg(last = true, value_name = "EAL_ARGS")]
    pub eal: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn eal_arguments_follow_the_double_dash() {
        let a = Args::try_parse_from([
            "tollgate-router",
            "-c",
            "r.toml",
            "--duration",
            "2s",
            "-vv",
            "--",
            "-l",
            "0",
            "--vdev",
            "net_null0",
        ])
        .unwrap();
        assert_eq!(a.config, "r.toml");
        assert_eq!(a.duration, Some(Duration::from_secs(2)));
        assert_eq!(a.verbose, 2);
        assert_eq!(a.eal, ["-l", "0", "--vdev", "net_null0"]);
    }

    #[test]
    fn bad_command_lines_name_the_problem_and_exit_2() {
        let e = Args::try_parse_from(["tollgate-router", "--duration", "10"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("no unit"), "{e}");
        // EAL arguments before `--`: the message names the argument and
        // tells where it goes.
        let e =
            Args::try_parse_from(["tollgate-router", "-c", "r.toml", "--vdev", "x"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--vdev"), "{e}");
        assert!(e.to_string().contains("-- --vdev"), "{e}");
        let e = Args::try_parse_from(["tollgate-router"]).unwrap_err();
        assert!(e.to_string().contains("--config"), "{e}");
    }

    #[test]
    fn help_teaches_example_reference_and_exit_codes() {
        let h = Args::command().render_long_help().to_string();
        for want in [
            "--no-huge",
            "router/DPDK.md",
            "Exit codes",
            "-vv",
            "--vdev net_null0",
        ] {
            assert!(h.contains(want), "{want} missing from --help:\n{h}");
        }
    }
}

//! Log output of the binaries that link the transport (`tollgate`, the
//! examples): a `tracing-subscriber` fmt subscriber on stderr.
//!
//! The DPDK dataplane (`tollgate-router`, `tollgate-dpdk-bench`) does not
//! link the transport and has the same module (`tollgate_dataplane::logging`);
//! keep the two in step.
//!
//! The filter is `RUST_LOG` when it is set (EnvFilter syntax, e.g.
//! `RUST_LOG=tollgate_transport=debug,warn`), otherwise the `-v` count:
//! warnings by default, `-v` info, `-vv` debug, `-vvv` trace. Statistics and
//! reports stay on stdout; only log events go to stderr.

use std::io::IsTerminal;

use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// The level a `-v` count selects: 0 warn, 1 info, 2 debug, 3+ trace.
pub fn level_for(verbose: u8) -> &'static str {
    match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    }
}

/// The filter: `rust_log` (the value of `RUST_LOG`) when set and valid,
/// else the level for `verbose`. An invalid `RUST_LOG` is reported on
/// stderr and ignored.
pub fn filter(rust_log: Option<&str>, verbose: u8) -> EnvFilter {
    if let Some(spec) = rust_log.filter(|s| !s.trim().is_empty()) {
        match EnvFilter::try_new(spec) {
            Ok(f) => return f,
            Err(e) => eprintln!("warning: ignoring RUST_LOG={spec:?}: {e}"),
        }
    }
    EnvFilter::new(level_for(verbose))
}

/// Install the subscriber for this process (once; later calls do nothing).
pub fn init(verbose: u8) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter(rust_log.as_deref(), verbose))
        .finish()
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbose_count_and_rust_log_select_the_filter() {
        assert_eq!(level_for(0), "warn");
        assert_eq!(level_for(1), "info");
        assert_eq!(level_for(2), "debug");
        assert_eq!(level_for(9), "trace");
        assert_eq!(filter(None, 1).to_string(), "info");
        assert_eq!(filter(Some(""), 0).to_string(), "warn");
        assert_eq!(
            filter(Some("tollgate_dataplane=debug"), 0).to_string(),
            "tollgate_dataplane=debug"
        );
        // Invalid: falls back to -v.
        assert_eq!(filter(Some("=[{"), 2).to_string(), "debug");
    }
}

//! Shared by the examples: log output on stderr.

use std::io::IsTerminal;

use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Install a `tracing-subscriber` fmt subscriber writing to stderr, filtered
/// by `RUST_LOG` when it is set (EnvFilter syntax), else by the `-v` count:
/// warnings by default, `-v` info, `-vv` debug, `-vvv` trace.
pub fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| match EnvFilter::try_new(&s) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("warning: ignoring RUST_LOG={s:?}: {e}");
                None
            }
        })
        .unwrap_or_else(|| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .finish()
        .try_init();
}

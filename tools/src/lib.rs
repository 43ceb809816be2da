//! # tollgate-tools
//!
//! The library behind the `tollgate` binary, so integration tests can drive
//! the emulator directly.
//!
//! | module | role |
//! |---|---|
//! | [`scenario`] | scenario files: parsing, validation, sweeps |
//! | [`sim`] | the virtual-time emulator (its event loop: `sim/engine.rs`) |
//! | [`metrics`] | Jain's index, fairness ratio, time to fairness |
//! | [`results`] | results.json / CSV / summary table |
//! | [`plot`] | SVG and PNG plots from a results file |
//! | [`experiment`] | one scenario file end to end: every sweep point simulated, written, plotted, printed (used by `tollgate sim`) |
//!
//! The binary's command-line glue is not part of the library: `src/main.rs`
//! (argument parsing), `src/cli_sim.rs` (`tollgate sim` and `tollgate
//! report`: options, Ctrl-C handling, exit codes) and `src/cli_cca.rs`
//! (`tollgate cca list|trace`).

pub mod experiment;
pub mod metrics;
pub mod plot;
pub mod results;
pub mod scenario;
pub mod sim;

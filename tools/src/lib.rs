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
//! | [`campaign`] | sweep points x seeds as numbered runs (`sim --run-index`), the plan file, `campaign.json` (merge), the Slurm script |
//! | [`serve`] | `tollgate serve`: QUIC workers (SO_REUSEPORT) and a TCP acceptor speaking the bulk protocol, live Prometheus metrics |
//! | [`load`] | `tollgate load`: a scenario's flows as real QUIC, kernel TCP and quiche connections; the environment of a real run |
//! | [`reproduce`] | `tollgate reproduce`: experiment manifests, the row metrics and verdicts, REPORT.md / reproduce.json |
//! | [`stats`] | mean and 95 % Student-t confidence interval over seeds |
//! | [`compare`] | `tollgate compare`: results side by side, differences, flow order |
//! | [`testbed`] | `tollgate testbed`: a dumbbell scenario through namespaces, veths and `tollgate-router`, serve and load inside, one merged results.json |
//!
//! The binary's command-line glue is not part of the library: `src/main.rs`
//! (argument parsing), `src/cli_sim.rs` (`tollgate sim` and `tollgate
//! report`: options, Ctrl-C handling, exit codes), `src/cli_campaign.rs`
//! (`tollgate campaign plan|run|merge|slurm`), `src/cli_pool.rs` (the local
//! process pool both it and `reproduce` use), `src/cli_reproduce.rs`
//! (`tollgate reproduce`),
//! `src/cli_cca.rs` (`tollgate cca list|trace`), `src/cli_load.rs`
//! (`tollgate serve` and `tollgate load`), `src/cli_compare.rs`
//! (`tollgate compare`) and `src/cli_testbed.rs` (`tollgate testbed`).

pub mod campaign;
pub mod compare;
pub mod experiment;
pub mod load;
pub mod metrics;
pub mod plot;
pub mod reproduce;
pub mod results;
pub mod scenario;
pub mod serve;
pub mod sim;
pub mod stats;
pub mod testbed;

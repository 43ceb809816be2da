//! # tollgate-tools
//!
//! The library behind the `tollgate` binary, so integration tests can drive
//! the emulator directly.
//!
//! | module | role |
//! |---|---|
//! | [`scenario`] | scenario files: parsing, validation, sweeps |
//! | [`sim`] | the virtual-time emulator |
//! | [`metrics`] | Jain's index, fairness ratio, time to fairness |
//! | [`results`] | results.json / CSV / summary table |
//! | [`plot`] | SVG and PNG plots from a results file |
//! | [`run`] | one scenario file end to end (used by `tollgate sim`) |

pub mod metrics;
pub mod plot;
pub mod results;
pub mod run;
pub mod scenario;
pub mod sim;

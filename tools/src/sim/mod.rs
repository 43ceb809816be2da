//! The virtual-time emulator.
//!
//! A discrete-event engine: the network is split into logical processes
//! ([`partition`]), each with a binary heap of `(virtual time, sequence
//! number)` events ([`queue`]), run in windows of the lookahead on one or
//! more threads ([`engine`]); a run is a pure function of the scenario and
//! its seed, whatever the number of threads.
//! Hosts run the real Tollgate transport ([`tollgate_transport::Endpoint`],
//! quinn-proto with Tollgate's CCAs) fed with virtual `Instant`s (one base
//! `Instant` captured at start plus the virtual offset); router ports run the
//! real `tollgate-router` disciplines.
//!
//! | module | role |
//! |---|---|
//! | [`net`] | packets, links, router ports (classifier + discipline + shaper) |
//! | [`host`] | endpoints and the sender / receiver apps; optional fault injection (`TOLLGATE_DROP_FIRST_ACK_FREQUENCY`) |
//! | [`noise`] | timing noise: host wake-up latencies measured on the testbed (default), or i.i.d. |
//! | [`pcap`] | optional pcap capture of the hosts' datagrams (`--pcap`, `TOLLGATE_PCAP`) |
//! | [`topology`] | building links, hosts and paths from a scenario |
//! | [`engine`] | the event loop, its windows and threads, and what it records ([`engine::RunData`]) |
//! | [`partition`] | the logical processes and their lookahead |
//! | [`queue`] | the event queue |
//! | [`tls`] | a deterministic certificate |
//! | [`trace`] | optional per-packet trace (`TOLLGATE_TRACE`) for debugging |

pub mod engine;
pub mod host;
pub mod net;
pub mod noise;
pub mod partition;
pub mod pcap;
pub mod queue;
pub mod tls;
pub mod topology;
pub mod trace;

pub use engine::{run, RunData};

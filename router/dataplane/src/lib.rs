//! # tollgate-dataplane
//!
//! The DPDK dataplane (cargo feature `dpdk`): binding, port setup, the
//! burst-oriented forwarding loop around the library's pipeline, stats,
//! Prometheus endpoint (served by `tollgate-metrics-http`), pcap capture and
//! L3 forwarding.
//!
//! | module | what |
//! |---|---|
//! | [`ffi`] | hand-written declarations of DPDK and of the C shim (`csrc/shim.c`) |
//! | [`eal`] | EAL init with operator hints, mbuf pool, ports, TSC clock |
//! | [`mbuf`] | owned mbufs, the `Pkt` packet handle, RX/TX bursts |
//! | [`cli`] | the command line of `tollgate-router` (clap) |
//! | [`config`] | `router.toml` (serde, unknown fields rejected) |
//! | [`dataplane`] | the RX -> classify -> delay -> qdisc -> shaper -> TX loop |
//! | [`pipeline`] | the multi-core mode: RX/classify workers, rings, one scheduler lcore per egress |
//! | [`l3`] | static routes, neighbours, ARP / NDP answers |
//! | [`stats`] | snapshots and their hand-over ([`stats::Published`]), text table, OpenMetrics text, accounting |
//! | [`pcap`] | size-bounded capture |
//! | [`synth`] | synthetic frames for net_null benchmarks and tests |
//! | [`logging`] | the binaries' log output (tracing-subscriber on stderr, `RUST_LOG` / `-v`) |
//!
//! The `tollgate-router` binary (this crate) and `tollgate-dpdk-bench` use it
//! as `tollgate_dataplane`. Everything that touches DPDK, threads or a clock
//! lives here; the algorithms it runs come from the `tollgate-router` library,
//! which has none of those.
//!
//! Without the cargo feature `dpdk` only [`config`] (the `router.toml`
//! schema, pure Rust) and [`cli`] (the binary's options) are compiled, so
//! the workspace builds on machines without libdpdk-dev, other crates can
//! check router configurations and the man page can be generated.

// Without `dpdk` the table above links to modules that are not compiled:
// `cargo doc` without the feature documents `config` alone, not an error.
#![cfg_attr(not(feature = "dpdk"), allow(rustdoc::broken_intra_doc_links))]

pub mod cli;
pub mod config;
#[cfg(feature = "dpdk")]
pub mod dataplane;
#[cfg(feature = "dpdk")]
pub mod eal;
#[cfg(feature = "dpdk")]
pub mod ffi;
#[cfg(feature = "dpdk")]
pub mod l3;
#[cfg(feature = "dpdk")]
pub mod logging;
#[cfg(feature = "dpdk")]
pub mod mbuf;
#[cfg(feature = "dpdk")]
pub mod pcap;
#[cfg(feature = "dpdk")]
pub mod pipeline;
#[cfg(feature = "dpdk")]
pub mod stats;
#[cfg(feature = "dpdk")]
pub mod synth;

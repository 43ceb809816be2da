//! The DPDK dataplane (cargo feature `dpdk`): binding, port setup, the
//! burst-oriented forwarding loop around the library's pipeline, stats,
//! Prometheus endpoint, pcap capture and L3 forwarding.
//!
//! | module | what |
//! |---|---|
//! | [`ffi`] | hand-written declarations of DPDK and of the C shim (`csrc/shim.c`) |
//! | [`eal`] | EAL init with operator hints, mbuf pool, ports, TSC clock |
//! | [`mbuf`] | owned mbufs, the `Pkt` packet handle, RX/TX bursts |
//! | [`config`] | `router.toml` (serde, unknown fields rejected) |
//! | [`disc`] | the configured discipline as an enum (static dispatch, stats access) |
//! | [`dataplane`] | the RX -> classify -> delay -> qdisc -> shaper -> TX loop |
//! | [`l3`] | static routes, neighbours, ARP / NDP answers |
//! | [`stats`] | snapshots, text table, Prometheus text, accounting |
//! | [`http`] | the Prometheus endpoint |
//! | [`pcap`] | size-bounded capture |
//! | [`synth`] | synthetic frames for net_null benchmarks and tests |
//!
//! The `tollgate-router` and `tollgate-dpdk-bench` binaries use it as
//! `tollgate_router::dpdk`.

pub mod config;
pub mod dataplane;
pub mod disc;
pub mod eal;
pub mod ffi;
pub mod http;
pub mod l3;
pub mod mbuf;
pub mod pcap;
pub mod stats;
pub mod synth;

//! # tollgate-dpdk-bench
//!
//! The library half of the `tollgate-dpdk-bench` binary: its command line
//! ([`cli`]), compiled with or without the cargo feature `dpdk` so that its
//! man page can be generated on machines without DPDK. The benchmark itself
//! (the binary's `bench` module) is built only with `dpdk`; see the
//! binary's crate documentation and `tollgate-dpdk-bench --help`.

pub mod cli;

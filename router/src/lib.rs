//! # tollgate-router
//!
//! Packet handling and the fairness-enforcing queue disciplines, as a plain Rust
//! library shared by the DPDK dataplane and the virtual-time emulator: header
//! parsing into flow keys, variant classification, DropTail, RED, CHOKe, Cebinae,
//! RRMQS, the egress shaper and the delay line. No DPDK dependency here.
//!
//! Nothing is implemented yet; see the router library issue.

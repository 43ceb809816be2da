//! # tollgate-dpdk-bench
//!
//! Will measure Mpps per core for each queue discipline against a plain
//! forwarding loop, with synthetic traffic through DPDK `net_null`/`net_ring`
//! ports. Not implemented yet: it needs the DPDK dataplane issue.

fn main() {
    eprintln!(
        "tollgate-dpdk-bench is not implemented yet: it needs the DPDK dataplane (router issue)."
    );
    std::process::exit(2);
}

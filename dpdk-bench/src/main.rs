//! # tollgate-dpdk-bench
//!
//! Mpps per core of the Tollgate dataplane for each queue discipline against
//! a plain forwarding loop, in the same run, with synthetic 64-byte UDP
//! traffic through DPDK `net_null` ports (`--no-huge --no-pci`).
//!
//! `tollgate-dpdk-bench [--seconds 2] [--frame-len 64] [--flows 1024] [--lcores 1,2]
//! [--repeat N] [--interleave SLICE] [--json FILE] [-v...] [-- EAL args]`
//! runs one child process per case (EAL initialises once per process) and
//! prints a table with the ratio to plain forwarding in the same run; with
//! `--repeat`, also the median and range over N interleaved rounds; with
//! `--interleave`, each 1-lcore case's ratio is to a forwarding loop that
//! alternated with it in slices inside the same process, and each 2-lcore
//! case's ratio to 1 lcore to the same case on 1 lcore alternating likewise.
//! `--help` lists every option.
//!
//! Built only with the cargo feature `dpdk`:
//! `cargo run --release -p tollgate-dpdk-bench --features dpdk`.

#[cfg(feature = "dpdk")]
mod bench;

#[cfg(feature = "dpdk")]
fn main() -> std::process::ExitCode {
    bench::main()
}

#[cfg(not(feature = "dpdk"))]
fn main() {
    eprintln!(
        "tollgate-dpdk-bench was built without DPDK. Install libdpdk-dev (22.11) and pkg-config, then:\n  \
         cargo run --release -p tollgate-dpdk-bench --features dpdk"
    );
    std::process::exit(2);
}

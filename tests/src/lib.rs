//! # tollgate-tests
//!
//! End-to-end tests that cross crate boundaries (CCA + transport + router +
//! dataplane + emulator) live in `tests/tests/`; this library is their shared
//! harness, also used by the dataplane's own tests:
//!
//! | module | what |
//! |---|---|
//! | [`skip`] | the one place a test may decline to run, and why it may not under CI |
//! | [`router_run`] | run the `tollgate-router` binary, parse its final report |
//! | [`netns`] | network namespaces and veth pairs through the router |
//!
//! A test that needs root, DPDK or namespaces calls [`skip()`] when they are
//! missing. Outside CI that prints a visible `SKIP:` line and the test passes;
//! under `CI=true` (CI runs as root with every package installed) it panics, so
//! a broken environment cannot pass as green.

pub mod netns;
pub mod router_run;

/// Whether this is a CI run (`CI=true`, as `.ci/run` sets it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Decline to run `test` because of `reason` (no root, no DPDK, no `ip`...).
///
/// Outside CI: prints `SKIP: <test>: <reason>` on stdout and stderr and
/// returns, so the caller can `return skip(...)`. Under `CI=true`: panics,
/// because CI provides root and the packages, so a skip there means the
/// environment is broken and the run must fail.
pub fn skip(test: &str, reason: &str) {
    if under_ci() {
        panic!(
            "{test}: would SKIP ({reason}), but CI=true: CI runs as root with DPDK, iproute2 \
             and python3 installed, so this is a broken environment, not a reason to pass"
        );
    }
    println!("SKIP: {test}: {reason}");
    eprintln!("SKIP: {test}: {reason}");
}

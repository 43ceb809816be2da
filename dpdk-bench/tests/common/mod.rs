//! Helpers shared by the benchmark's end-to-end tests.

use std::process::Command;

use serde_json::Value;

/// The benchmark binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tollgate-dpdk-bench");

/// The number `k` of JSON object `v`.
pub fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Equal but for rounding (serde_json's default float parsing may be one
/// ulp off the written value).
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Run `cmd` to its end; its stdout, after asserting that it succeeded
/// (the failure message holds both outputs).
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run tollgate-dpdk-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

//! `tollgate-dpdk-bench --interleave` end to end: a discipline case and
//! plain forwarding (1 lcore), or the case on 2 lcores and on 1, in one
//! child process, on four real DPDK `net_null` ports (root needed; without it the tests print `SKIP:`, and fail under
//! CI). As in `repeat.rs`, the figures are not asserted (a shared machine's
//! Mpps are noise): what is asserted is that both sides ran their time in
//! alternating slices, and that the row's ratios are to the paired loop.
#![cfg(feature = "dpdk")]

use std::process::Command;

use serde_json::Value;
use tollgate_tests::router_run::{require_root, scratch};
use tollgate_tests::skip;

mod common;
use common::{close, f, run_ok, BIN};

/// The value of `key=` in a child's `RESULT` line.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// Run one interleaved `cebinae` child on `lcores` lcores for 0.3 s in
/// 30 ms slices; its `RESULT` line.
fn interleaved_child(lcores: &str, layout: &str) -> String {
    let stdout = run_ok(
        Command::new(BIN)
            .args([
                "--child",
                "cebinae",
                "--seconds",
                "0.3",
                "--interleave",
                "30ms",
            ])
            .args(["--flows", "1024", "--lcores", lcores, "--layout", layout])
            .arg("--")
            .arg(format!(
                "--file-prefix=tgbench-il{lcores}-{}",
                std::process::id()
            )),
    );
    stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line: {stdout}"))
        .to_string()
}

/// Both sides of `line` (the case's and the paired side's, whose keys
/// start with `paired`) ran at least 0.3 s, about as long as each other,
/// in at least 10 slices, and forwarded packets.
fn assert_alternated(line: &str, paired: &str) {
    // Each iteration of the child runs one slice of each side.
    let slices = field(line, "slices");
    assert!(slices >= 10.0, "0.3 s in 30 ms slices: {line}");
    // Each side ran at least the time asked for, and about as long as the
    // other (a slice each per iteration; the loops check their end every
    // 4,096 packets).
    let (secs, other) = (field(line, "secs"), field(line, &format!("{paired}_secs")));
    assert!(secs >= 0.3 && other >= 0.3, "{line}");
    assert!((secs - other).abs() < 0.1, "{line}");
    for n in ["tx".to_string(), format!("{paired}_tx")] {
        assert!(field(line, &n) > 0.0, "{n}: {line}");
    }
}

/// One child: the router and the forwarding loop each run at least
/// `--seconds`, in slices, and each forwards packets. A child that ran the
/// two one after the other (one slice each) or only one of them fails here.
#[test]
fn the_case_and_forwarding_alternate_in_one_process() {
    if let Err(why) = require_root() {
        return skip("the_case_and_forwarding_alternate_in_one_process", &why);
    }
    let line = interleaved_child("1", "split");
    assert_alternated(&line, "fwd");
    assert!(!line.contains("one_"), "{line}");
}

/// A 2-lcore child runs two routers in one EAL (each with its own mempool):
/// the pipeline on net_null0/1, in both layouts, alternating with the same
/// case on 1 lcore on net_null2/3.
#[test]
fn two_lcores_alternate_with_one_lcore_in_one_process() {
    if let Err(why) = require_root() {
        return skip("two_lcores_alternate_with_one_lcore_in_one_process", &why);
    }
    for layout in ["split", "two-workers"] {
        let line = interleaved_child("2", layout);
        assert_alternated(&line, "one");
        assert!(!line.contains("fwd_"), "{layout}: {line}");
    }
}

/// A parent run of `red` with `--interleave 20ms` and `extra` options:
/// its stdout and its JSON report.
fn parent(name: &str, extra: &[&str]) -> (String, Value) {
    let dir = scratch(name);
    let json = dir.join("r.json");
    let stdout = run_ok(
        Command::new(BIN)
            .args(["--seconds", "0.2", "--interleave", "20ms", "--cases", "red"])
            .args(extra)
            .arg("--json")
            .arg(&json),
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (stdout, r)
}

/// `row[ratio]` is `row[mpps] / base`, but for rounding.
fn assert_ratio(row: &Value, ratio: &str, mpps: &str, base: f64) {
    assert!(close(f(row, ratio), f(row, mpps) / base), "{ratio}: {row}");
}

/// The parent: a 1-lcore case's row carries the paired forward's Mpps and
/// its ratios are to it, not to the round's separate `forward` row.
#[test]
fn interleaved_rows_take_their_ratio_to_the_paired_forward() {
    if let Err(why) = require_root() {
        return skip(
            "interleaved_rows_take_their_ratio_to_the_paired_forward",
            &why,
        );
    }
    let (stdout, r) = parent("bench-interleave", &[]);
    assert!(stdout.contains("paired forward Mpps"), "{stdout}");
    assert!(close(f(&r, "interleave_slice_s"), 0.02), "{r}");
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (fwd, red) = (&rows[0], &rows[1]);
    assert_eq!(fwd["case"], "forward");
    assert!(fwd["paired_forward_mpps"].is_null(), "{fwd}");
    let paired = f(red, "paired_forward_mpps");
    assert!(paired > 0.0, "{red}");
    assert_ratio(red, "ratio_to_forward", "tx_mpps", paired);
    assert_ratio(red, "rx_ratio_to_forward", "rx_mpps", paired);
}

/// The parent with 1 and 2 lcores: the 2-lcore row's ratio to 1 lcore is
/// to the 1-lcore router paired with it, not to the round's 1-lcore row,
/// and its ratio to forward stays to the round's forward.
#[test]
fn two_lcore_rows_take_their_ratio_to_the_paired_one_lcore_router() {
    if let Err(why) = require_root() {
        return skip(
            "two_lcore_rows_take_their_ratio_to_the_paired_one_lcore_router",
            &why,
        );
    }
    let (stdout, r) = parent("bench-interleave-2", &["--lcores", "1,2"]);
    assert!(stdout.contains("paired 1-lcore Mpps"), "{stdout}");
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    let (fwd, one, two) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(
        (one["lcores"].as_u64(), two["lcores"].as_u64()),
        (Some(1), Some(2))
    );
    assert!(one["paired_1_lcore_mpps"].is_null(), "{one}");
    assert!(two["paired_forward_mpps"].is_null(), "{two}");
    let paired = f(two, "paired_1_lcore_mpps");
    assert!(paired > 0.0, "{two}");
    assert_ratio(two, "ratio_to_1_lcore", "tx_mpps", paired);
    assert_ratio(two, "ratio_to_forward", "tx_mpps", f(fwd, "tx_mpps"));
}

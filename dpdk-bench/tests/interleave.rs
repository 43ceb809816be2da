//! `tollgate-dpdk-bench --interleave` end to end: a discipline case and
//! plain forwarding in one child process, on four real DPDK `net_null`
//! ports (root needed; without it the tests print `SKIP:`, and fail under
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

/// One child: the router and the forwarding loop each run at least
/// `--seconds`, in slices, and each forwards packets. A child that ran the
/// two one after the other (one slice each) or only one of them fails here.
#[test]
fn the_case_and_forwarding_alternate_in_one_process() {
    if let Err(why) = require_root() {
        return skip("the_case_and_forwarding_alternate_in_one_process", &why);
    }
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
            .args([
                "--flows", "1024", "--lcores", "1", "--layout", "split", "--",
            ])
            .arg(format!("--file-prefix=tgbench-il-{}", std::process::id())),
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line: {stdout}"));
    // Each iteration of the child runs one slice of each side.
    let slices = field(line, "slices");
    assert!(slices >= 10.0, "0.3 s in 30 ms slices: {line}");
    // Each side ran at least the time asked for, and about as long as the
    // other (a slice each per iteration; the loops check their end every
    // 4,096 packets).
    let (secs, fwd_secs) = (field(line, "secs"), field(line, "fwd_secs"));
    assert!(secs >= 0.3 && fwd_secs >= 0.3, "{line}");
    assert!((secs - fwd_secs).abs() < 0.1, "{line}");
    for n in ["tx", "fwd_tx"] {
        assert!(field(line, n) > 0.0, "{n}: {line}");
    }
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
    let dir = scratch("bench-interleave");
    let json = dir.join("r.json");
    let stdout = run_ok(
        Command::new(BIN)
            .args(["--seconds", "0.2", "--interleave", "20ms", "--cases", "red"])
            .arg("--json")
            .arg(&json),
    );
    assert!(stdout.contains("paired forward Mpps"), "{stdout}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(close(f(&r, "interleave_slice_s"), 0.02), "{r}");
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (fwd, red) = (&rows[0], &rows[1]);
    assert_eq!(fwd["case"], "forward");
    assert!(fwd["paired_forward_mpps"].is_null(), "{fwd}");
    let paired = f(red, "paired_forward_mpps");
    assert!(paired > 0.0, "{red}");
    assert!(
        close(f(red, "ratio_to_forward"), f(red, "tx_mpps") / paired),
        "{red}"
    );
    assert!(
        close(f(red, "rx_ratio_to_forward"), f(red, "rx_mpps") / paired),
        "{red}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

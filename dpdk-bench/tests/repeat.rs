//! `tollgate-dpdk-bench --repeat` end to end: real DPDK `net_null` ports in
//! child processes (root needed; without it the tests print `SKIP:`, and
//! fail under CI). The figures themselves are not asserted (a shared
//! machine's Mpps are noise): what is asserted is the arithmetic of the
//! rounds, the summary and the JSON file an interrupted run leaves.
#![cfg(feature = "dpdk")]

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tollgate_tests::router_run::{require_root, scratch};
use tollgate_tests::skip;

mod common;
use common::{close, f, run_ok, BIN};

/// Each round's ratio is to that round's forward, and the summary is the
/// median and range of those ratios.
#[test]
fn rounds_have_their_own_baseline_and_a_summary() {
    if let Err(why) = require_root() {
        return skip("rounds_have_their_own_baseline_and_a_summary", &why);
    }
    let dir = scratch("bench-repeat");
    let json = dir.join("r.json");
    // Every child with this file prefix (the last one given wins): each
    // must leave no EAL runtime directory behind.
    let prefix = format!("tgbench-test-{}", std::process::id());
    let runtime = Path::new("/var/run/dpdk").join(&prefix);
    let stdout = run_ok(
        Command::new(BIN)
            .args(["--repeat", "2", "--seconds", "0.2", "--cases", "droptail"])
            .arg("--json")
            .arg(&json)
            .arg("--")
            .arg(format!("--file-prefix={prefix}")),
    );
    assert!(stdout.contains("Over 2 rounds"), "{stdout}");
    assert!(
        !runtime.exists(),
        "{} left behind (13 MB each without --no-shconf)",
        runtime.display()
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = r["rows"].as_array().unwrap();
    let order: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| (r["round"].as_u64().unwrap(), r["case"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            (1, "forward"),
            (1, "droptail"),
            (2, "forward"),
            (2, "droptail")
        ]
    );
    let mut ratios = Vec::new();
    for pair in rows.chunks(2) {
        let (fwd, dt) = (&pair[0], &pair[1]);
        assert!(
            f(fwd, "tx_mpps") > 0.0 && f(dt, "tx_mpps") > 0.0,
            "{pair:?}"
        );
        let ratio = f(dt, "tx_mpps") / f(fwd, "tx_mpps");
        assert!(close(f(dt, "ratio_to_forward"), ratio), "{pair:?}");
        ratios.push(ratio);
    }
    let summary = r["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 2, "{summary:?}");
    let dt = &summary[1];
    assert_eq!(
        (dt["case"].as_str(), dt["rounds"].as_u64()),
        (Some("droptail"), Some(2))
    );
    let s = &dt["ratio_to_forward"];
    assert!(close(f(s, "median"), (ratios[0] + ratios[1]) / 2.0), "{s}");
    assert!(close(f(s, "min"), ratios[0].min(ratios[1])), "{s}");
    assert!(close(f(s, "max"), ratios[0].max(ratios[1])), "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rows of `path` once it parses, else 0.
fn rows_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["rows"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Ctrl-C (SIGINT to the process group, as a terminal sends it) keeps the
/// cases already measured in the JSON file, with their summary.
#[test]
fn an_interrupted_run_keeps_the_finished_cases() {
    if let Err(why) = require_root() {
        return skip("an_interrupted_run_keeps_the_finished_cases", &why);
    }
    let dir = scratch("bench-interrupt");
    let json = dir.join("r.json");
    let mut cmd = Command::new(BIN);
    cmd.args([
        "--repeat",
        "3",
        "--seconds",
        "0.3",
        "--cases",
        "droptail,red",
    ])
    .arg("--json")
    .arg(&json)
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .process_group(0);
    // A shell without job control (a CI script, `nohup ... &`) starts its
    // background commands with SIGINT ignored, and the disposition is
    // inherited; a terminal's foreground job has the default, which is
    // what Ctrl-C meets. Restore it, as an interactive shell does.
    // SAFETY: signal() is async-signal-safe; nothing else runs in the fork.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut run = cmd.spawn().expect("run tollgate-dpdk-bench");
    let t0 = Instant::now();
    while rows_in(&json) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no two finished cases in the JSON file after 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pgid = run.id() as i32;
    // SAFETY: kill has no memory preconditions; the group is the run's own.
    assert_eq!(unsafe { libc::kill(-pgid, libc::SIGINT) }, 0);
    let status = run.wait().unwrap();
    assert!(!status.success(), "the run was interrupted: {status:?}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = r["rows"].as_array().unwrap();
    assert!(
        (2..9).contains(&rows.len()),
        "at least the 2 finished cases, fewer than the 9 asked: {}",
        rows.len()
    );
    let counted: u64 = r["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rounds"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, rows.len() as u64, "the summary covers every row");
    let _ = std::fs::remove_dir_all(&dir);
}

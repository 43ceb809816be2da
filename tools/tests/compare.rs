//! `tollgate compare` on real emulator output: a run against itself, against
//! a copy with two flows' goodputs swapped, and bad labels.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SCENARIO: &str = r#"
name = "three"
duration = "6s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "1bdp" }
[[flows]]
count = 3
cca = "newreno"
rtt = ["10ms", "40ms", "100ms"]
[metrics]
measure_from = "1s"
"#;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tollgate")
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

/// A fresh directory with the scenario's results in it.
fn simulated(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("tollgate-compare-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let out = dir.join("results");
    let o = run(&[
        "sim",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-plots",
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (dir, out.join("three/results.json"))
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_run_against_itself_has_no_differences_and_the_same_order() {
    let (dir, json) = simulated("self");
    let out = dir.join("cmp");
    let j = json.to_str().unwrap();
    let o = run(&[
        "compare",
        j,
        j,
        "--labels",
        "a,b",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("flow order, b vs a: same"), "{text}");
    let c = read_json(&out.join("compare.json"));
    assert_eq!(c["ordering"][0]["discordant"], 0);
    // Three NewReno flows at 10/40/100 ms are not within 5 % of each other.
    assert!(c["ordering"][0]["pairs"].as_u64().unwrap() >= 2, "{c}");
    for f in c["flows"].as_array().unwrap() {
        assert_eq!(f["goodput_mbps"][0], f["goodput_mbps"][1]);
    }
    if Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        for p in ["compare-throughput.png", "compare-jain.svg"] {
            assert!(out.join(p).exists(), "{p}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn swapped_flows_are_reported_as_a_different_order_with_their_differences() {
    let (dir, json) = simulated("swap");
    // The same run with the fastest and the slowest flow's goodput swapped.
    let mut v = read_json(&json);
    let flows = v["flows"].as_array_mut().unwrap();
    let g: Vec<f64> = flows
        .iter()
        .map(|f| f["goodput_mbps"].as_f64().unwrap())
        .collect();
    let hi = (0..3).max_by(|&a, &b| g[a].total_cmp(&g[b])).unwrap();
    let lo = (0..3).min_by(|&a, &b| g[a].total_cmp(&g[b])).unwrap();
    assert!(g[hi] > 1.1 * g[lo], "the flows differ: {g:?}");
    flows[hi]["goodput_mbps"] = g[lo].into();
    flows[lo]["goodput_mbps"] = g[hi].into();
    let swapped = dir.join("swapped.json");
    std::fs::write(&swapped, serde_json::to_string(&v).unwrap()).unwrap();
    let out = dir.join("cmp");
    let o = run(&[
        "compare",
        json.to_str().unwrap(),
        swapped.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-plots",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("differs"), "{text}");
    let c = read_json(&out.join("compare.json"));
    assert!(c["ordering"][0]["discordant"].as_u64().unwrap() >= 1, "{c}");
    let row = &c["flows"][hi];
    assert_eq!(row["goodput_mbps"][0].as_f64().unwrap(), g[hi]);
    assert_eq!(row["goodput_mbps"][1].as_f64().unwrap(), g[lo]);
    // The percent difference printed for the fastest flow.
    let pct = (g[lo] - g[hi]) / g[hi] * 100.0;
    assert!(text.contains(&format!("{pct:+.1}")), "{pct:+.1} in {text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn labels_must_match_the_files() {
    let (dir, json) = simulated("labels");
    let j = json.to_str().unwrap();
    let o = run(&["compare", j, j, "--labels", "only-one", "--no-plots"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--labels") && err.contains("one per file"),
        "{err}"
    );
    let o = run(&["compare", j]);
    assert!(!o.status.success(), "one file is not a comparison");
    let _ = std::fs::remove_dir_all(&dir);
}

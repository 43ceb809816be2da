//! The emulator's default timing noise against the testbed's.
//!
//! `tollgate sim --pcap` captures the noise reference scenario
//! (tools/reproduce/noise/libra-1bdp.toml, shortened to 12 s) and
//! tools/reproduce/noise/pcap_timing.py measures it exactly as it measures a
//! testbed capture (capture-testbed.sh). Each statistic must fall in the
//! range three testbed captures of the same scenario spanned (README.md in
//! tools/reproduce/noise/), widened by the stated tolerance. The same run
//! checks CapProbe's bounds: every Libra flow's estimate within 0.7-1.4x of
//! the bottleneck, and no estimate above the hosts' access rate ever used.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tollgate_tools::scenario::{parse_plan, NoiseKind};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `(statistic, quantile, testbed low, testbed high, tolerance)`: the range
/// of the three testbed captures (µs; fraction for `batch_merged`).
const TESTBED: &[(&str, &str, f64, f64, f64)] = &[
    ("wake_us", "p25", 36.2, 38.6, 4.0),
    ("wake_us", "p50", 39.8, 42.4, 4.0),
    ("wake_us", "p75", 50.5, 57.2, 6.0),
    ("wake_us", "p95", 113.5, 173.8, 20.0),
    ("pair_us", "p25", 119.0, 119.0, 2.0),
    ("pair_us", "p50", 119.4, 119.4, 2.0),
    ("pair_us", "p75", 119.9, 119.9, 2.0),
    ("pair_us", "p95", 126.4, 162.1, 10.0),
    ("ack_gap_us", "p25", 114.7, 118.5, 8.0),
    ("ack_gap_us", "p50", 131.6, 173.8, 20.0),
    ("ack_gap_us", "p75", 241.3, 269.9, 25.0),
    ("ack_change_us", "p5", -81.1, -17.2, 6.0),
    ("ack_change_us", "p25", -1.7, -1.2, 1.0),
    ("ack_change_us", "p75", 1.0, 1.4, 1.0),
    ("ack_change_us", "p95", 16.7, 66.3, 6.0),
];

#[test]
fn default_noise_reproduces_the_testbed_timing_and_capprobe_stays_bounded() {
    let dir = tempdir("noise");
    let text = std::fs::read_to_string(repo().join("tools/reproduce/noise/libra-1bdp.toml"))
        .unwrap()
        .replace("duration = \"30s\"", "duration = \"12s\"")
        .replace("measure_from = \"10s\"", "measure_from = \"4s\"");
    let plan = parse_plan(&text).unwrap();
    assert_eq!(
        plan.runs[0].noise,
        NoiseKind::Host,
        "host noise is the default"
    );
    let scenario = dir.join("noise.toml");
    std::fs::write(&scenario, &text).unwrap();
    let cap = dir.join("cap");
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["sim", "--no-plots", "-q", "--out"])
        .arg(dir.join("results"))
        .arg("--pcap")
        .arg(&cap)
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let json = dir.join("timing.json");
    let out = Command::new("python3")
        .arg(repo().join("tools/reproduce/noise/pcap_timing.py"))
        .arg(&cap)
        .args(["--from", "3", "--json"])
        .arg(&json)
        .output()
        .expect("python3 runs pcap_timing.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &stats[cap.to_str().unwrap()];
    let mut failures = Vec::new();
    for &(stat, q, lo, hi, tol) in TESTBED {
        let got = run[stat][q].as_f64().unwrap_or(f64::NAN);
        if !(lo - tol..=hi + tol).contains(&got) {
            failures.push(format!(
                "{stat} {q}: {got:.1}, testbed {lo}..{hi} (tolerance {tol})"
            ));
        }
    }
    // Merged ACKs (one ACK for two or more data packets): 0.039-0.062.
    let merged = run["batch_merged"].as_f64().unwrap_or(f64::NAN);
    if !(0.02..=0.08).contains(&merged) {
        failures.push(format!("batch_merged {merged:.3}, testbed 0.039..0.062"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // CapProbe: every flow's estimate near the 100 Mbit/s bottleneck, and
    // no sample of the estimate above the 1 Gbit/s access links.
    let results =
        std::fs::read_to_string(dir.join("results/noise-libra-1bdp/results.json")).unwrap();
    let r: Value = serde_json::from_str(&results).unwrap();
    for f in r["flows"].as_array().unwrap() {
        let stats: Vec<(String, String)> = serde_json::from_value(f["cca_stats"].clone()).unwrap();
        let get = |k: &str| stats.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("capacity_source").as_deref(),
            Some("capprobe"),
            "{stats:?}"
        );
        let mbps: f64 = get("capacity_mbps").unwrap().parse().unwrap();
        assert!(
            (70.0..=140.0).contains(&mbps),
            "estimate {mbps} Mbit/s: {stats:?}"
        );
    }
    let series = r["series"]["flow_capacity_mbps"].as_array().unwrap();
    assert_eq!(series.len(), 2);
    for flow in series {
        for v in flow.as_array().unwrap().iter().filter_map(Value::as_f64) {
            assert!(
                v <= 1000.0,
                "an estimate above the access rate was used: {v}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn noise_keys_are_checked_and_jitter_alone_selects_iid() {
    let base = |topology_extra: &str| {
        format!(
            "name = \"n\"\nduration = \"1s\"\n[topology]\nkind = \"dumbbell\"\n\
             bottleneck = {{ rate = \"100Mbit\", delay = \"1ms\", buffer = \"1bdp\" }}\n\
             {topology_extra}\n[[flows]]\ncca = \"newreno\"\nrtt = \"10ms\"\n"
        )
    };
    let noise = |extra: &str| parse_plan(&base(extra)).map(|p| p.runs[0].clone());
    let s = noise("").unwrap();
    assert_eq!(
        (s.noise, s.noise_scale, s.host_jitter_s),
        (NoiseKind::Host, 1.0, 0.0)
    );
    let s = noise("jitter = \"120us\"").unwrap();
    assert_eq!(s.noise, NoiseKind::Iid);
    assert!((s.host_jitter_s - 120e-6).abs() < 1e-12);
    let s = noise("noise = \"iid\"").unwrap();
    assert!(
        (s.host_jitter_s - 960e-6).abs() < 1e-9,
        "auto: eight packet times"
    );
    let s = noise("noise = \"host\"\nnoise_scale = 2.0\npath_noise_scale = 0.0").unwrap();
    assert_eq!((s.noise_scale, s.path_noise_scale), (2.0, 0.0));
    assert_eq!(noise("noise = \"none\"").unwrap().noise, NoiseKind::None);
    for (extra, field) in [
        ("noise = \"bogus\"", "topology.noise"),
        ("noise = \"host\"\njitter = \"1ms\"", "topology.jitter"),
        ("noise = \"iid\"\nnoise_scale = 2.0", "topology.noise_scale"),
        ("noise_scale = 11.0", "topology.noise_scale"),
        (
            "noise = \"none\"\npath_noise_scale = 1.0",
            "topology.path_noise_scale",
        ),
    ] {
        let e = noise(extra).unwrap_err().to_string();
        assert!(e.contains(field), "{extra}: {e}");
    }
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tollgate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

//! `tollgate cca list` and `tollgate cca trace` as a user runs them.

use std::path::PathBuf;
use std::process::{Command, Output};

use tollgate_cca::registry::ALGORITHMS;

fn tollgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .output()
        .expect("run tollgate")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-cca-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn list_shows_every_registered_algorithm_with_its_defaults() {
    let out = tollgate(&["cca", "list"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for algorithm in ALGORITHMS {
        assert!(text.contains(algorithm.name), "{} missing", algorithm.name);
        for param in algorithm.params {
            let line = text
                .lines()
                .find(|l| {
                    l.trim_start().starts_with(&format!("{} ", param.name))
                        && l.contains(param.help)
                })
                .unwrap_or_else(|| panic!("{}.{} missing", algorithm.name, param.name));
            assert!(line.contains(param.default), "{line}");
        }
    }
}

#[test]
fn trace_writes_one_csv_row_per_flow_and_interval() {
    let csv = scratch("rows").join("trace.csv");
    let out = tollgate(&[
        "cca",
        "trace",
        "newreno",
        "cubic",
        "--rtt",
        "40ms",
        "--duration",
        "6s",
        "--interval",
        "200ms",
        "--loss",
        "every:1s",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "time_s,flow,spec,cwnd_bytes,cwnd_packets,in_flight_bytes,rtt_ms,goodput_mbps,losses"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2 * 30);
    // On an uncongested 40 ms path the RTT is the base RTT, and each flow loses
    // one packet per second (the first second has none: the flow just started).
    let last_newreno = rows.iter().rev().find(|r| r[1] == "0").unwrap();
    assert_eq!(last_newreno[6], "40.000");
    let losses: u64 = last_newreno[8].parse().unwrap();
    assert!((4..=6).contains(&losses), "{losses} losses");
    // CUBIC keeps more of its window than NewReno under the same losses.
    let last_cubic = rows.iter().rev().find(|r| r[1] == "1").unwrap();
    let window = |r: &Vec<&str>| r[3].parse::<u64>().unwrap();
    assert!(
        window(last_cubic) > window(last_newreno),
        "{last_cubic:?} vs {last_newreno:?}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("goodput Mbit/s") && stdout.contains("wrote"),
        "{stdout}"
    );
}

#[test]
fn trace_rejects_bad_input_with_a_message_that_names_it() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["cca", "trace", "cubc"],
            "`cubc`: unknown congestion-control algorithm; valid: newreno",
        ),
        (&["cca", "trace", "libra(k1=-1)"], "`k1=-1`: -1 is outside"),
        (
            &["cca", "trace", "newreno", "--loss", "often"],
            "--loss `often` is not understood",
        ),
        (
            &[
                "cca", "trace", "newreno", "cubic", "--rtt", "1ms", "--rtt", "2ms", "--rtt", "3ms",
            ],
            "--rtt was given 3 times for 2 specs",
        ),
        (
            &[
                "cca",
                "trace",
                "newreno",
                "--bottleneck",
                "100Mbit",
                "--buffer",
                "10",
            ],
            "smaller than one packet",
        ),
    ];
    for (args, expected) in cases {
        let out = tollgate(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

//! A run's results are a pure function of (scenario, seed): `results.json`
//! and `flows.csv` are byte-identical whatever the number of threads.
//!
//! The scenarios split into several logical processes (checked first, so
//! the test cannot pass by running everything in one), and between them
//! cover what crosses LPs: host noise (wake-ups, path noise), i.i.d.
//! jitter, random loss, a reverse flow, an access rate cap, a parking lot
//! and disciplines with per-window state (RRMQS, Cebinae).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use tollgate_tools::results;
use tollgate_tools::scenario::{parse_plan, Scenario};
use tollgate_tools::sim::{engine, partition, topology};

fn files(s: &Scenario, threads: usize, dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let data = engine::run_threads(s, threads, &mut |_| {}, &AtomicBool::new(false))
        .expect("simulation runs");
    let r = results::build(s, &data);
    let d = dir.join(format!("threads-{threads}"));
    results::write(&d, &r).expect("results written");
    (
        std::fs::read(d.join("results.json")).expect("results.json"),
        std::fs::read(d.join("flows.csv")).expect("flows.csv"),
    )
}

fn check(text: &str, min_lps: usize) {
    let plan = parse_plan(text).expect("scenario is valid");
    let s = &plan.runs[0];
    let net = topology::build(s).expect("topology");
    let part = partition::build(&net.flows, &net.links);
    assert!(
        part.lps >= min_lps,
        "{}: {} logical processes, expected at least {min_lps}",
        s.name,
        part.lps
    );
    let dir = std::env::temp_dir().join(format!(
        "tollgate-threads-{}-{}",
        s.name,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let (json1, csv1) = files(s, 1, &dir);
    for threads in [2, 3] {
        let (json, csv) = files(s, threads, &dir);
        assert!(
            json == json1,
            "{}: results.json differs with {threads} threads",
            s.name
        );
        assert!(
            csv == csv1,
            "{}: flows.csv differs with {threads} threads",
            s.name
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dumbbell_results_do_not_depend_on_threads() {
    check(
        r#"
name = "threads-dumbbell"
duration = "3s"
seed = 11
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "1bdp", loss = 0.001 }
[router]
discipline = "rrmqs"
classify = "scenario"
[[flows]]
count = 2
cca = "cubic"
rtt = ["20ms", "60ms"]
start = "0s..0.5s"
[[flows]]
cca = "newreno"
rtt = "40ms"
rate_cap = "8Mbit"
[[flows]]
cca = "libra"
rtt = "30ms"
reverse = true
[[flows]]
cca = "newreno"
rtt = "25ms"
size = "200KB"
start = "1s"
"#,
        5,
    );
}

#[test]
fn parking_lot_with_jitter_does_not_depend_on_threads() {
    check(
        r#"
name = "threads-parking"
duration = "3s"
seed = 5
[topology]
kind = "parking-lot"
hops = 2
bottleneck = { rate = "20Mbit", delay = "3ms", buffer = "0.5bdp" }
noise = "iid"
jitter = "50us"
[router]
discipline = "cebinae"
[[flows]]
cca = "cubic"
rtt = "40ms"
hops = [1, 2]
[[flows]]
cca = "newreno"
rtt = "20ms"
hops = [1, 1]
[[flows]]
cca = "bbr"
rtt = "30ms"
hops = [2, 2]
"#,
        5,
    );
}

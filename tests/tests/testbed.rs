//! `tollgate testbed` end to end (root, DPDK, iproute2, ethtool): the
//! `tollgate` binary builds a dumbbell of network namespaces through
//! `tollgate-router` (net_af_packet on veth), runs `tollgate serve` and
//! `tollgate load` inside, and writes one merged results.json.
//!
//! - A 100 Mbit/s dumbbell with Tollgate QUIC NewReno at 10 ms and 100 ms
//!   emulated RTT, kernel TCP CUBIC (30 ms) and Tollgate QUIC Libra (50 ms):
//!   every flow completes, the goodput sums to at least 90 % of the
//!   bottleneck over the measurement window, the router's accounting is
//!   exact on both egresses, and each flow's measured minimum RTT is never
//!   below its emulated RTT and at most 2 ms above it (the router's per-rule
//!   delay classes); the 100 ms flow, whose first round trips meet the 10 ms
//!   flow's standing queue, at most 5 ms above (see the test).
//! - A parking lot of three links (tools/scenarios/testbed-parking-lot.toml):
//!   each flow crosses its links and no other, at its emulated RTT, every
//!   link filled, every egress exact.
//! - A quiche flow beside a Tollgate QUIC flow gets its emulated RTT.
//! - A `[testbed]` table's hosts (namespaces the test builds, reached with
//!   `ip netns exec NS sh -c` as `ssh` reaches a real host) and router
//!   ports (vdevs; PCI addresses on real NICs) run the scenario.
//! - The same scenario (`tools/scenarios/sim-vs-testbed.toml`) through
//!   `tollgate sim` (seeds 1-3) and `tollgate testbed`: the same order of
//!   flows and Jain's indices within 0.1; the same for a parking lot
//!   (`tools/scenarios/sim-vs-testbed-parking-lot.toml`).
//! - Router fairness against a flood (`tools/scenarios/testbed-flood.toml`):
//!   a kernel TCP CUBIC flow against a 150 Mbit/s `cbr` Tollgate QUIC flood
//!   on 100 Mbit/s; CHOKe and Cebinae at their defaults give TCP more
//!   goodput than DropTail.
//! - Teardown: after the run no namespace, veth, DPDK runtime directory,
//!   pid file or process of the run is left; after SIGKILL of a running
//!   testbed (a parking lot) its children die with it, and `tollgate
//!   testbed --cleanup` removes the namespaces, bridges and veths it left.
//!
//! The binaries: `$TOLLGATE_BIN` / `$TOLLGATE_ROUTER_BIN`, else the ones
//! cargo built next to this test (`cargo test --workspace --features
//! tollgate-dataplane/dpdk,tollgate-tests/dpdk` builds both). Without root
//! or the tools each test prints `SKIP:` (and fails under `CI=true`).
#![cfg(feature = "dpdk")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tollgate_tests::netns::have;
use tollgate_tests::router_run::{require_root, router_bin, scratch};
use tollgate_tests::skip;
use tollgate_tools::compare;
use tollgate_tools::results::{self, Results};
use tollgate_tools::testbed::netns as tbnet;

/// One testbed at a time: a second one would see the first's namespaces
/// as another run's, and they would share the two CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

fn tollgate_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TOLLGATE_BIN") {
        return PathBuf::from(p);
    }
    let bin = router_bin().with_file_name("tollgate");
    assert!(
        bin.exists(),
        "{} does not exist: build it with `cargo build -p tollgate-tools` or point TOLLGATE_BIN at it",
        bin.display()
    );
    bin
}

/// Why the testbed cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    if let Err(r) = require_root() {
        return Some(r);
    }
    for (cmd, arg) in [("ip", "-V"), ("ethtool", "--version")] {
        if !have(cmd, arg) {
            return Some(format!("`{cmd}` is not installed"));
        }
    }
    None
}

const SCENARIO: &str = include_str!("../../tools/scenarios/testbed-dumbbell.toml");

fn run_testbed(dir: &Path, scenario: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, scenario).unwrap();
    let mut cmd = Command::new(tollgate_bin());
    cmd.arg("testbed")
        .arg(&path)
        .arg("--router-bin")
        .arg(router_bin())
        .arg("--out")
        .arg(dir.join("results"))
        .arg("--no-plots")
        .args(extra);
    let out = cmd.output().expect("run tollgate testbed");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `<dir>/results/<name>/results.json` of a `run_testbed` run; a missing or
/// unreadable file fails the test with the run's exit code and output.
fn results_of(dir: &Path, name: &str, run: &(Option<i32>, String, String)) -> Results {
    let (code, stdout, stderr) = run;
    results::read(&dir.join(format!("results/{name}/results.json")))
        .unwrap_or_else(|e| panic!("{name}: no results ({e}); exit {code:?}\n{stdout}\n{stderr}"))
}

/// Everything of run `id` that still exists.
fn remains_of(id: u32) -> Vec<String> {
    let n = tbnet::Names::new(id);
    let mut left = Vec::new();
    let netns = tbnet::netns_list();
    for ns in [&n.client_ns, &n.server_ns] {
        if netns.contains(ns) {
            left.push(format!("namespace {ns}"));
        }
    }
    // The dumbbell's veths, a parking lot's bridges and veths: every link
    // whose name carries the run id.
    for e in std::fs::read_dir("/sys/class/net").unwrap().flatten() {
        let l = e.file_name().to_string_lossy().to_string();
        if tbnet::run_id(&l) == Some(id) {
            left.push(format!("link {l}"));
        }
    }
    let dpdk = Path::new(tbnet::DPDK_RUN_DIR).join(&n.file_prefix);
    if dpdk.exists() {
        left.push(format!("{}", dpdk.display()));
    }
    if n.router_pid_file().exists() {
        left.push(format!("{}", n.router_pid_file().display()));
    }
    left.extend(processes_of(id));
    left
}

/// The run's child processes: the router (its `--file-prefix`), serve and
/// load (their certificate in the run's work directory).
fn processes_of(id: u32) -> Vec<String> {
    let mut v = processes_mentioning(&tbnet::Names::new(id).file_prefix);
    v.extend(processes_mentioning(&format!("tollgate-testbed-{id}/")));
    v
}

/// Processes whose command line mentions `needle` (the router's
/// `--file-prefix`, the namespaces of `ip netns exec`).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.parse::<u32>().is_err() {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            v.push(format!("process {name}: {cmd}"));
        }
    }
    v
}

#[test]
fn a_dumbbell_through_the_router_carries_every_flow_at_its_emulated_rtt() {
    const NAME: &str = "a_dumbbell_through_the_router_carries_every_flow_at_its_emulated_rtt";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(NAME, &r);
    }
    // The RTT bounds are the one check that host load can break on its
    // own (see `dumbbell_rtt_misses`).
    repeat_once_on_rtt_misses(NAME, &scratch("testbed"), dumbbell_rtt_misses);
}

/// Run `run` in `dir/run-1`; when it returns missed RTT bounds, print them
/// and run it once more in `dir/run-2`, failing when that run misses too.
/// Every other check `run` makes must hold in every run.
fn repeat_once_on_rtt_misses(name: &str, dir: &Path, run: fn(&Path) -> Vec<String>) {
    for attempt in 1..=2 {
        let misses = run(&dir.join(format!("run-{attempt}")));
        if misses.is_empty() {
            return;
        }
        assert!(attempt == 1, "{misses:?}");
        println!("RETRY {name}: {misses:?}");
    }
}

/// One run of the dumbbell scenario in `dir`: asserts everything but the
/// flows' RTTs, and returns the RTT bounds that were missed.
fn dumbbell_rtt_misses(dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let dir = dir.to_path_buf();
    let t0 = Instant::now();
    let run = run_testbed(&dir, SCENARIO, &[]);
    let (code, ref stdout, ref stderr) = run;
    println!("{stdout}\n{stderr}");
    let r = results_of(&dir, "testbed-dumbbell", &run);
    let router_out =
        std::fs::read_to_string(dir.join("results/testbed-dumbbell/testbed/router.out"))
            .unwrap_or_default();
    println!("{router_out}");
    println!("testbed took {:.1} s", t0.elapsed().as_secs_f64());

    // Every flow completed, and the run exited 0.
    for f in &r.flows {
        println!(
            "flow {} {:<14} {:<10} goodput {:7.2} Mbit/s  min RTT {:7.3} ms  emulated {:?} ms  bytes {}",
            f.id, f.group, f.cca, f.goodput_mbps, f.rtt_ms, f.emulated_rtt_ms, f.bytes
        );
        assert_eq!(f.error, None, "flow {} ({})", f.id, f.cca);
        assert!(f.bytes > 0, "flow {} moved no bytes", f.id);
    }
    assert_eq!(code, Some(0), "tollgate testbed failed:\n{stderr}");
    assert!(!r.partial);

    // The router's accounting, per egress and overall.
    assert_eq!(r.ports.len(), 2);
    for p in &r.ports {
        println!(
            "port {} {}: received {} transmitted {} dropped {:?} in flight {} utilization {:.3}",
            p.name, p.discipline, p.received, p.transmitted, p.dropped, p.in_flight, p.utilization
        );
        assert!(p.accounting_exact, "port {}: {p:?}", p.name);
        assert!(p.received > 0);
    }
    assert!(router_out.contains("accounting=ok"), "{router_out}");
    // Every loss was the discipline's: nothing lost in the veths, the
    // router's AF_PACKET rings or the hosts' sockets at 100 Mbit/s.
    assert_eq!(r.outside_losses, Vec::<(String, u64)>::new());
    assert!(r.summary.jain.is_some());
    assert_eq!(r.ports[0].name, "fwd1");
    assert_eq!(r.ports[0].discipline, "droptail");

    // Goodput: at least 90 % of the bottleneck over the measurement window.
    let total = r.summary.total_goodput_mbps;
    println!(
        "total goodput {total:.2} Mbit/s of {} (window from {} s), Jain {:?}",
        r.summary.bottleneck_mbps, r.summary.measure_from_s, r.summary.jain
    );
    assert_eq!(r.summary.bottleneck_mbps, 100.0);

    // Each flow's measured minimum RTT against its emulated RTT: never
    // below it (the delay line must not release a packet early; it did
    // before packets were stamped after the RX burst), above it by at most
    // 2 ms. The minimum is over every RTT sample of the connection, the
    // handshake's included (QUIC's path `min_rtt`, TCP's `tcpi_min_rtt`):
    // the longer flows' first data packets come after the 10 ms flow has
    // built a standing DropTail queue, and over data packets alone Libra
    // (50 ms) once measured 52.5 ms in CI. The 100 ms NewReno flow is
    // bounded by 5 ms: its handshake reaches the server 50 ms in, while the
    // (debug-built) server is busy with the 10 ms flow's slow start, and
    // even with the handshake's sample it measured 101.0-102.3 ms in 3 runs
    // (data packets alone: 1.1-2.6 ms above in 10 runs; alone on the path:
    // 100.2 ms). That is queueing and host delay, not emulation error; it
    // is reported (docs/testbed.md) rather than hidden by
    // staggering the starts. The same inflation reached Libra once, in
    // one of about 20 CI runs (54.5 ms, the handshake's sample
    // included, with the other three flows within their bounds and the
    // router stalled for 14 ms): hence the repeat in the test above.
    let mut rtt_misses = Vec::new();
    for f in &r.flows {
        let emulated = f.emulated_rtt_ms.expect("emulated_rtt_ms");
        let above = if f.group == "newreno-100ms" { 5.0 } else { 2.0 };
        if f.rtt_ms < emulated - 0.5 || f.rtt_ms > emulated + above {
            rtt_misses.push(format!(
                "flow {} ({}): min RTT {:.3} ms, emulated {emulated} ms, allowed -0.5..+{above} ms",
                f.id, f.cca, f.rtt_ms
            ));
        }
    }
    // While the router has lost its CPU (a busy shared machine; `stalled_ms`
    // in router.out, 14-390 ms per run measured) the link carries nothing:
    // the floor is 90 % of the time the router had. The stall is counted
    // over the whole run, so this is the lenient side by at most the stalls
    // before the window.
    let window_s = r.summary.duration_s - r.summary.measure_from_s;
    let stalled_s = stalled_ms_in(&router_out) / 1e3;
    let floor = 90.0 * had_cpu(stalled_s, window_s);
    assert!(
        total >= floor,
        "goodput {total:.2} Mbit/s is below 90 % of 100 Mbit/s over the {window_s:.1} s window \
         less the router's {stalled_s:.3} s without CPU ({floor:.2} Mbit/s)"
    );

    // Nothing of the run is left.
    let id = testbed_id(&dir.join("results/testbed-dumbbell/testbed/router.toml"));
    assert_eq!(remains_of(id), Vec::<String>::new());
    rtt_misses
}

const PARKING_LOT: &str = include_str!("../../tools/scenarios/testbed-parking-lot.toml");

/// Bytes each router egress sent per variant (its `variants` line in the
/// router's report), by the egress's name in results.json: device
/// `net_af_packet<i>` is link `i / 2 + 1`'s forward egress for odd `i`, its
/// reverse egress for even `i`.
fn variant_bytes_per_egress(router_out: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut m = BTreeMap::new();
    for line in router_out.lines() {
        let Some(rest) = line.strip_prefix("variants ") else {
            continue;
        };
        let mut lane = None;
        let mut bytes = BTreeMap::new();
        for (k, v) in rest.split_whitespace().filter_map(|t| t.split_once('=')) {
            if k == "port" {
                let i: usize = v.trim_start_matches("net_af_packet").parse().unwrap();
                lane = Some(format!(
                    "{}{}",
                    if i % 2 == 1 { "fwd" } else { "rev" },
                    i / 2 + 1
                ));
            } else {
                bytes.insert(k.to_string(), v.parse::<u64>().unwrap());
            }
        }
        m.insert(lane.expect("port= in a variants line"), bytes);
    }
    m
}

/// A parking lot through the router (tools/scenarios/testbed-parking-lot.toml):
/// three 50 Mbit/s drop-tail links, a Tollgate QUIC NewReno flow across all
/// three at 60 ms and a cross flow per link at 20 ms (Tollgate QUIC Libra,
/// kernel TCP CUBIC, Tollgate QUIC HighSpeed), 20 s. Every flow completes;
/// no packet is lost outside the disciplines; all six egresses account
/// exactly; each flow crossed its links and no other (the router's
/// per-variant byte counters: link h carries NewReno and link h's cross
/// flow's variant, both ways, and nothing else but the path probes'
/// unmarked bytes); each link is full (its forward egress sent at least
/// 90 % of its rate over the whole run, start and end included) and the
/// flows crossing it get at least 85 % of its rate as goodput (headers take
/// about 6 % of a link's bytes: 1,452-byte QUIC datagrams in 1,494-byte
/// frames plus QUIC's header, AEAD tag and frame bytes, so a full 50 Mbit/s
/// link delivers at most about 47 Mbit/s; debug builds measured 44.9-46.0
/// with utilization 0.94, and a first version of this test that asked for
/// 90 % of the rate as goodput failed at 45.00);
/// each flow's minimum RTT is within -0.5/+2 ms of its emulated RTT (the
/// long flow's split over three links); and the long flow gets less than
/// each cross flow, the parking lot's known unfairness (sim agrees:
/// `the_same_parking_lot_ranks_flows_alike_in_sim_and_testbed`). At 100
/// Mbit/s (release build): long 1.9-3.6 Mbit/s, cross flows 87-90, minimum
/// RTTs 60.1 and 20.0-20.1 ms; a debug build's link 1 carried 89.1 Mbit/s
/// there (the hosts' CPU), hence 50 Mbit/s here.
#[test]
fn a_parking_lot_sends_each_flow_through_its_links_at_its_rtt() {
    const NAME: &str = "a_parking_lot_sends_each_flow_through_its_links_at_its_rtt";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(NAME, &r);
    }
    // As in the dumbbell test, host load can delay a packet by a few ms.
    repeat_once_on_rtt_misses(
        NAME,
        &scratch("testbed-parking-lot"),
        parking_lot_rtt_misses,
    );
}

/// One run of the parking-lot scenario in `dir`: asserts everything but the
/// flows' RTTs, and returns the RTT bounds that were missed.
fn parking_lot_rtt_misses(dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let run = run_testbed(dir, PARKING_LOT, &[]);
    let (code, ref stdout, ref stderr) = run;
    println!("{stdout}\n{stderr}");
    let r = results_of(dir, "testbed-parking-lot", &run);
    let router_out =
        std::fs::read_to_string(dir.join("results/testbed-parking-lot/testbed/router.out"))
            .unwrap_or_default();
    println!("{router_out}");
    for f in &r.flows {
        println!(
            "flow {} {:<8} {:<10} goodput {:7.2} Mbit/s  min RTT {:7.3} ms  emulated {:?} ms",
            f.id, f.group, f.cca, f.goodput_mbps, f.rtt_ms, f.emulated_rtt_ms
        );
        assert_eq!(f.error, None, "flow {} ({})", f.id, f.cca);
        assert!(f.bytes > 0, "flow {} moved no bytes", f.id);
    }
    assert_eq!(code, Some(0), "tollgate testbed failed:\n{stderr}");
    assert!(!r.partial);
    assert_eq!(r.outside_losses, Vec::<(String, u64)>::new());

    // Six egresses, forward first, each exact.
    let names: Vec<&str> = r.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fwd1", "fwd2", "fwd3", "rev1", "rev2", "rev3"]);
    for p in &r.ports {
        assert!(p.accounting_exact, "port {}: {p:?}", p.name);
        assert!(p.received > 0, "port {} received nothing", p.name);
    }
    assert!(router_out.contains("accounting=ok"), "{router_out}");

    // Each flow crossed its links and no other.
    let cross = ["libra", "cubic", "highspeed"];
    let lanes = variant_bytes_per_egress(&router_out);
    assert_eq!(lanes.len(), 6, "{lanes:?}");
    for (lane, bytes) in &lanes {
        let h: usize = lane[3..].parse().unwrap();
        let carried: Vec<&str> = bytes
            .iter()
            .filter(|(v, n)| **n > 0 && v.as_str() != "unmarked")
            .map(|(v, _)| v.as_str())
            .collect();
        let mut want = vec!["newreno", cross[h - 1]];
        want.sort_unstable();
        assert_eq!(carried, want, "{lane}: {bytes:?}");
    }

    // The flows of each link fill it; each flow sees its emulated RTT.
    let goodput = |group: &str| {
        r.flows
            .iter()
            .find(|f| f.group == group)
            .map(|f| f.goodput_mbps)
            .unwrap()
    };
    // While the router has lost its CPU its links carry nothing: both floors
    // are of the time the router had (as in the dumbbell test; the stall is
    // counted over the whole run, the lenient side for the goodput window).
    let stalled_s = stalled_ms_in(&router_out) / 1e3;
    let window_s = r.summary.duration_s - r.summary.measure_from_s;
    for h in 1..=3 {
        let fwd = r
            .ports
            .iter()
            .find(|p| p.name == format!("fwd{h}"))
            .unwrap();
        assert!(
            fwd.utilization >= 0.9 * had_cpu(stalled_s, r.summary.duration_s),
            "link {h}: the router sent {:.3} of its rate, less than 0.9 of the \
             time it had its CPU ({stalled_s:.3} s stalled)",
            fwd.utilization
        );
        let link = goodput("long") + goodput(&format!("cross{h}"));
        assert!(
            link >= 0.85 * r.summary.bottleneck_mbps * had_cpu(stalled_s, window_s),
            "link {h}: the long flow and cross{h} carry {link:.2} Mbit/s of {}, \
             less than 85 % of the time the router had its CPU ({stalled_s:.3} s stalled)",
            r.summary.bottleneck_mbps
        );
        assert!(
            goodput("long") < goodput(&format!("cross{h}")),
            "the long flow got more than cross{h}"
        );
    }
    let id = testbed_id(&dir.join("results/testbed-parking-lot/testbed/router.toml"));
    assert_eq!(remains_of(id), Vec::<String>::new());

    let mut misses = Vec::new();
    for f in &r.flows {
        let emulated = f.emulated_rtt_ms.expect("emulated_rtt_ms");
        if f.rtt_ms < emulated - 0.5 || f.rtt_ms > emulated + 2.0 {
            misses.push(format!(
                "flow {} ({}): min RTT {:.3} ms, emulated {emulated} ms",
                f.id, f.group, f.rtt_ms
            ));
        }
    }
    misses
}

/// Every flow kind of the load generator through the router: a quiche
/// CUBIC flow (its client bound to the flow's port, so the router's rules
/// give it its RTT) beside a Tollgate QUIC NewReno flow, both at 20 ms on
/// 50 Mbit/s for 8 s: both complete, each flow's minimum RTT (quiche's
/// path `min_rtt`) is within -0.5/+2 ms of 20 ms, and no packet is lost
/// outside the discipline. (Kernel TCP and Tollgate QUIC: the dumbbell test.)
#[test]
fn a_quiche_flow_gets_its_emulated_rtt_through_the_router() {
    const NAME: &str = "a_quiche_flow_gets_its_emulated_rtt_through_the_router";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(NAME, &r);
    }
    let scenario = r#"
name = "testbed-quiche"
duration = "8s"
seed = 1
[topology]
kind = "dumbbell"
bottleneck = { rate = "50Mbit", delay = "1ms", buffer = "1bdp" }
[router]
discipline = "droptail"
[metrics]
measure_from = "2s"
[[flows]]
name = "quiche-cubic"
cca = "quiche:cubic"
rtt = "20ms"
[[flows]]
name = "newreno"
cca = "newreno"
rtt = "20ms"
"#;
    let dir = scratch("testbed-quiche");
    let run = run_testbed(&dir, scenario, &[]);
    let (code, ref stdout, ref stderr) = run;
    if stderr.contains("built without quiche") {
        return skip(
            NAME,
            "the tollgate binary was built without the quiche feature",
        );
    }
    let r = results_of(&dir, "testbed-quiche", &run);
    println!("{stdout}\n{stderr}");
    assert_eq!(code, Some(0), "tollgate testbed failed:\n{stderr}");
    assert_eq!(r.outside_losses, Vec::<(String, u64)>::new());
    for f in &r.flows {
        assert_eq!(f.error, None, "flow {} ({})", f.id, f.cca);
        assert!(f.goodput_mbps > 1.0, "flow {} ({}): {f:?}", f.id, f.cca);
        assert!(
            f.rtt_ms >= 19.5 && f.rtt_ms <= 22.0,
            "flow {} ({}): minimum RTT {:.3} ms for an emulated 20 ms",
            f.id,
            f.cca,
            f.rtt_ms
        );
    }
    assert!(r.flows.iter().any(|f| f.cca.starts_with("quiche")));
}

/// Real hosts, as far as CI can take them: a `[testbed]` table
/// names the hosts and the router's ports instead of letting the testbed
/// build namespaces. The "hosts" here are two namespaces this test builds
/// and reaches with `ip netns exec NS sh -c` (a command that runs a shell
/// command line there, as `ssh host` does), the ports are `net_af_packet`
/// vdevs on their veths (where a real setup names PCI addresses). Files
/// (scenario, certificate, results) move through that command, the server
/// is stopped through it, and the hosts' loss counters are differences of
/// before and after. A Tollgate QUIC NewReno flow (10 ms) and a kernel TCP
/// CUBIC flow (30 ms) on 50 Mbit/s for 8 s: both complete, exact accounting,
/// minimum RTTs within -0.5/+2 ms, no loss outside the discipline, and the
/// hosts' run directories are removed afterwards.
#[test]
fn a_testbed_table_runs_the_scenario_on_the_hosts_and_ports_it_names() {
    const NAME: &str = "a_testbed_table_runs_the_scenario_on_the_hosts_and_ports_it_names";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(NAME, &r);
    }
    // The "hosts": namespaces and veths as the testbed would build them,
    // under a run id no testbed process has (removed on drop).
    let hosts = tbnet::Names::new(4_100_000 + std::process::id() % 100_000);
    let topo = tbnet::Topology::build(hosts.clone()).expect("build the test's namespaces");
    let bin = tollgate_bin();
    let host = |ns: &str, address: &str| {
        format!(
            "{{ run = [\"ip\", \"netns\", \"exec\", \"{ns}\", \"sh\", \"-c\"], address = \"{address}\", \
             interface = \"eth0\", tollgate = \"{}\" }}",
            bin.display()
        )
    };
    let scenario = format!(
        r#"
name = "testbed-site"
duration = "8s"
seed = 1
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "50Mbit", delay = "1ms", buffer = "1bdp" }}
[router]
discipline = "droptail"
[metrics]
measure_from = "2s"
[[flows]]
name = "newreno"
cca = "newreno"
rtt = "10ms"
[[flows]]
name = "tcp-cubic"
cca = "tcp:cubic"
rtt = "30ms"
[testbed]
client = {}
server = {}
router = {{ ports = ["net_af_packet0,iface={}", "net_af_packet1,iface={}"], eal = ["--no-huge", "--no-pci", "-m", "512"] }}
"#,
        host(&hosts.client_ns, tbnet::CLIENT_IP),
        host(&hosts.server_ns, tbnet::SERVER_IP),
        hosts.client_veth,
        hosts.server_veth,
    );
    let dir = scratch("testbed-site");
    let run = run_testbed(&dir, &scenario, &[]);
    let (code, ref stdout, ref stderr) = run;
    println!("{stdout}\n{stderr}");
    let r = results_of(&dir, "testbed-site", &run);
    assert_eq!(code, Some(0), "tollgate testbed failed:\n{stderr}");
    assert_eq!(r.outside_losses, Vec::<(String, u64)>::new());
    for p in &r.ports {
        assert!(p.accounting_exact, "port {}: {p:?}", p.name);
        assert!(p.received > 0, "port {}", p.name);
    }
    for f in &r.flows {
        let emulated = f.emulated_rtt_ms.expect("emulated_rtt_ms");
        assert_eq!(f.error, None, "flow {} ({})", f.id, f.cca);
        assert!(f.goodput_mbps > 1.0, "flow {} ({}): {f:?}", f.id, f.cca);
        assert!(
            f.rtt_ms >= emulated - 0.5 && f.rtt_ms <= emulated + 2.0,
            "flow {} ({}): minimum RTT {:.3} ms, emulated {emulated} ms",
            f.id,
            f.cca,
            f.rtt_ms
        );
    }
    // The run's directories on the hosts are gone; the testbed built no
    // namespace of its own.
    let id = testbed_id(&dir.join("results/testbed-site/testbed/router.toml"));
    for side in ["client", "server"] {
        let d = format!("{}-{side}", tbnet::Names::new(id).work_dir().display());
        assert!(!Path::new(&d).exists(), "{d} was left behind");
    }
    assert_eq!(remains_of(id), Vec::<String>::new());
    drop(topo);
    assert_eq!(remains_of(hosts.id), Vec::<String>::new());
}

const SIM_VS_TESTBED: &str = include_str!("../../tools/scenarios/sim-vs-testbed.toml");

const SIM_VS_TESTBED_PARKING_LOT: &str =
    include_str!("../../tools/scenarios/sim-vs-testbed-parking-lot.toml");

/// Run scenario `text` (named `name`) through `tollgate sim` with seeds 1-3
/// and through `tollgate testbed`; every sim seed must rank the flows as the
/// testbed does (`tollgate compare`'s ordering: no pair ranked the other way
/// round; a pair within 5 % in both runs is a tie) and give Jain's index
/// within 0.1 of the testbed's.
///
/// The simulations are deterministic; the testbed runs in real time on a
/// shared host, where other work can take the router's or the load
/// generator's CPU for seconds (a CI rehearsal with
/// clippy and tests running beside it: the 10 ms flow got 32.3 Mbit/s and
/// the 160 ms flow 49.5, against about 76 and 3.5 on a quiet host). So a
/// testbed run that disagrees is repeated once, with its problems and the
/// router's stall time (`stalled_ms` in router.out) printed, and the test
/// fails when the repeat disagrees too.
fn sim_vs_testbed(test: &str, name: &str, text: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(test, &r);
    }
    let dir = scratch(name);
    let scenario = dir.join("scenario.toml");
    std::fs::write(&scenario, text).unwrap();
    let sim_out = dir.join("sim");
    let out = Command::new(tollgate_bin())
        .arg("sim")
        .arg(&scenario)
        .args(["--seeds", "3", "--quiet", "--no-plots", "--out"])
        .arg(&sim_out)
        .output()
        .expect("run tollgate sim");
    assert!(
        out.status.success(),
        "tollgate sim failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sim_paths: Vec<PathBuf> = (1..=3)
        .map(|seed| sim_out.join(format!("{name}/default/seed-{seed}/results.json")))
        .collect();
    let sims: Vec<Results> = sim_paths
        .iter()
        .map(|path| results::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect();
    let mut problems = Vec::new();
    for attempt in 1..=2 {
        let tb_dir = dir.join(format!("testbed-{attempt}"));
        std::fs::create_dir_all(&tb_dir).unwrap();
        problems = testbed_disagreements(&tb_dir, name, text, &sims, &sim_paths[0]);
        if problems.is_empty() {
            break;
        }
        if attempt == 1 {
            println!("RETRY {name}: the testbed run disagreed: {problems:?}");
        }
    }
    assert!(problems.is_empty(), "{problems:?}");
}

/// One `tollgate testbed` run of scenario `text` in `dir` against the sim
/// runs `sims` (seeds 1, 2, ...; `sim1` is seed 1's results.json, compared
/// in the log): what disagrees, with the router's stall time when anything
/// does.
fn testbed_disagreements(
    dir: &Path,
    name: &str,
    text: &str,
    sims: &[Results],
    sim1: &Path,
) -> Vec<String> {
    let run = run_testbed(dir, text, &[]);
    let (code, ref stdout, ref stderr) = run;
    let tb_path = dir.join(format!("results/{name}/results.json"));
    let tb = results_of(dir, name, &run);
    assert_eq!(
        code,
        Some(0),
        "tollgate testbed failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(tb.outside_losses, Vec::<(String, u64)>::new());
    let tb_jain = tb.summary.jain.expect("testbed Jain's index");
    let goodputs = |r: &Results| -> Vec<String> {
        r.flows
            .iter()
            .map(|f| format!("{} {:.1}", f.group, f.goodput_mbps))
            .collect()
    };
    println!("testbed: {:?}, Jain {tb_jain:.3}", goodputs(&tb));
    let mut problems = Vec::new();
    for (i, sim) in sims.iter().enumerate() {
        let seed = i + 1;
        let sim_jain = sim.summary.jain.expect("sim Jain's index");
        let c = compare::compare(
            vec!["testbed".into(), "sim".into()],
            &[tb.clone(), sim.clone()],
        );
        let o = &c.ordering[0];
        println!(
            "sim seed {seed}: {:?}, Jain {sim_jain:.3}; {} of {} untied pairs ranked the other way",
            goodputs(sim),
            o.discordant,
            o.pairs
        );
        if o.discordant > 0 || o.pairs + 1 < tb.flows.len() {
            problems.push(format!(
                "seed {seed}: {} of {} untied flow pairs ranked the other way round (sim {:?}, \
                 testbed {:?})",
                o.discordant,
                o.pairs,
                goodputs(sim),
                goodputs(&tb)
            ));
        }
        if (sim_jain - tb_jain).abs() > 0.1 {
            problems.push(format!(
                "seed {seed}: Jain's index sim {sim_jain:.3}, testbed {tb_jain:.3}"
            ));
        }
    }
    // `tollgate compare` of the two, for the log.
    let cmp = Command::new(tollgate_bin())
        .arg("compare")
        .arg(sim1)
        .arg(&tb_path)
        .args(["--labels", "sim,testbed", "--no-plots", "--out"])
        .arg(dir.join("compare"))
        .output()
        .expect("run tollgate compare");
    println!("{}", String::from_utf8_lossy(&cmp.stdout));
    if !problems.is_empty() {
        let stalled_ms = router_stalled_ms(&dir.join(format!("results/{name}/testbed/router.out")));
        problems.push(format!("the router lost its CPU for {stalled_ms:.0} ms"));
    }
    problems
}

/// Sim against testbed: the same scenario file (tools/scenarios/sim-vs-testbed.toml:
/// Tollgate QUIC NewReno at 10, 40 and 160 ms through a 100 Mbit/s
/// drop-tail, 40 s, measured from 10 s) through `tollgate sim` with seeds
/// 1-3 and once through `tollgate testbed`: every sim seed ranks the flows
/// as the testbed does and has Jain's index within 0.1 of the testbed's.
/// Measured: sim 0.462-0.477 over seeds 1-5 (78 / 13-14 / 2.8 Mbit/s),
/// testbed 0.472 and 0.482 (74-76 / 12-13 / 3.4-3.5 Mbit/s) in two runs.
#[test]
fn the_same_scenario_ranks_flows_alike_in_sim_and_testbed() {
    sim_vs_testbed(
        "the_same_scenario_ranks_flows_alike_in_sim_and_testbed",
        "sim-vs-testbed",
        SIM_VS_TESTBED,
    );
}

/// The same for a parking lot (tools/scenarios/sim-vs-testbed-parking-lot.toml:
/// three 100 Mbit/s drop-tail links, a NewReno flow across all three at
/// 60 ms and a NewReno cross flow per link at 20 ms, 40 s from 10 s): the
/// long flow last and the cross flows tied in both, Jain's indices within
/// 0.1. Measured (release build): sim seeds 1-3 Jain 0.766-0.808 (long
/// flow 3.1-10.3 Mbit/s, cross flows 84.6-91.8), testbed 0.789 (6.9, 85.5).
#[test]
fn the_same_parking_lot_ranks_flows_alike_in_sim_and_testbed() {
    sim_vs_testbed(
        "the_same_parking_lot_ranks_flows_alike_in_sim_and_testbed",
        "sim-vs-testbed-parking-lot",
        SIM_VS_TESTBED_PARKING_LOT,
    );
}

/// How long the router lost its CPU in a run: the largest `stalled_ms` in
/// its router.out (0 when the file is missing).
fn router_stalled_ms(router_out: &Path) -> f64 {
    stalled_ms_in(&std::fs::read_to_string(router_out).unwrap_or_default())
}

/// The fraction of `span_s` seconds in which the router had its CPU, given
/// `stalled_s` seconds without it (never below 0).
fn had_cpu(stalled_s: f64, span_s: f64) -> f64 {
    1.0 - (stalled_s / span_s).min(1.0)
}

/// The largest `stalled_ms` in router.out's text.
fn stalled_ms_in(router_out: &str) -> f64 {
    router_out
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("stalled_ms=")?.parse::<f64>().ok())
        .fold(0.0, f64::max)
}

/// The run id from the generated router.toml's first line.
fn testbed_id(router_toml: &Path) -> u32 {
    let text = std::fs::read_to_string(router_toml).expect("router.toml kept with the results");
    text.split_whitespace()
        .skip_while(|w| *w != "run")
        .nth(1)
        .and_then(|w| w.parse().ok())
        .expect("run id in router.toml")
}

#[test]
fn a_killed_testbed_leaves_nothing_after_cleanup() {
    const NAME: &str = "a_killed_testbed_leaves_nothing_after_cleanup";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(NAME, &r);
    }
    let dir = scratch("testbed-kill");
    let path = dir.join("scenario.toml");
    // The parking lot: the most a run builds (bridges, eighteen veth ends).
    std::fs::write(
        &path,
        PARKING_LOT.replace("duration = \"20s\"", "duration = \"30s\""),
    )
    .unwrap();
    let mut child = Command::new(tollgate_bin())
        .arg("testbed")
        .arg(&path)
        .arg("--router-bin")
        .arg(router_bin())
        .arg("--out")
        .arg(dir.join("results"))
        .arg("--no-plots")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tollgate testbed");
    let id = child.id();
    let names = tbnet::Names::new(id);
    // Wait until the flows run: load is up in the client namespace.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut running = false;
    while Instant::now() < deadline {
        if processes_of(id).iter().any(|p| p.contains(" load ")) {
            running = true;
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the testbed exited before its flows started: {st}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(running, "the testbed's load never started");
    std::thread::sleep(Duration::from_secs(2));
    let before = remains_of(id);
    assert!(
        before.iter().any(|r| r.contains("namespace"))
            && before.iter().any(|r| r.ends_with(&format!("{id}n0")))
            && before.iter().any(|r| r.contains("tollgate-router")),
        "{before:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The children die with it (PR_SET_PDEATHSIG).
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !processes_of(id).is_empty() {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        processes_of(id),
        Vec::<String>::new(),
        "processes outlived the testbed"
    );
    // A new run refuses to start and names --cleanup.
    let (code, _, stderr) = run_testbed(&dir, SCENARIO, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--cleanup"), "{stderr}");
    // --cleanup removes everything.
    let out = Command::new(tollgate_bin())
        .args(["testbed", "--cleanup"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&names.client_ns), "{said}");
    assert_eq!(remains_of(id), Vec::<String>::new());
    let again = Command::new(tollgate_bin())
        .args(["testbed", "--cleanup"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to clean up"));
}

#[test]
fn the_generated_router_config_is_accepted_by_the_router() {
    // No root needed: the dataplane's own parser checks the text the testbed writes.
    let text = SCENARIO.replace(
        "discipline = \"droptail\"",
        "discipline = \"cebinae\"\ntau = 0.05",
    );
    let plan = tollgate_tools::scenario::parse_plan(&text).unwrap();
    let s = &plan.runs[0];
    let raw: toml::Table = toml::from_str(&text).unwrap();
    let router = raw["router"].as_table().unwrap().clone();
    let names = tbnet::Names::new(1);
    let site = tollgate_tools::testbed::site::Site::namespaces(
        &names,
        tbnet::Pmd::AfPacket,
        Path::new("tollgate"),
    );
    let (cfg, ports) = tollgate_tools::testbed::router_config(s, &router, &names, &site).unwrap();
    let parsed = tollgate_dataplane::config::RouterConfig::parse(&cfg)
        .unwrap_or_else(|e| panic!("{e}\n{cfg}"));
    let rules = parsed.rules().unwrap();
    assert_eq!(rules.len(), 2 * ports.len());
    let classifier = tollgate_router::classify::Classifier::new(rules, true);
    // 5, 50, 15 and 25 ms each way.
    assert_eq!(classifier.rule_delays().len(), 4);
    let plan = parsed.ports[1].egress.build(10e9).unwrap();
    assert_eq!(plan.shaper.rate_bps, 100e6);
    assert_eq!(plan.discipline.name(), "cebinae");
}

const FLOOD: &str = include_str!("../../tools/scenarios/testbed-flood.toml");

/// One discipline's run of the flood scenario.
struct FloodRun {
    discipline: &'static str,
    /// Why the run cannot be used: the testbed failed (exit code, a flow's
    /// error) or the flood fell short of its rate.
    invalid: Option<String>,
    tcp_mbps: f64,
    flood_mbps: f64,
    flood_sent_mbps: f64,
    /// The flood's mean datagram size, bytes (path MTU discovery's doing).
    flood_datagram_bytes: f64,
    drops: Vec<(String, u64)>,
    /// How long the router lost its CPU (router.out's `stalled_ms`).
    stalled_ms: f64,
}

/// The bottleneck rate of a flood run, in Mbit/s; the flood offers 1.5x it.
#[derive(Clone, Copy)]
struct FloodRate(u32);

impl FloodRate {
    /// The least the flood must offer for a valid run: 140 of its 150 %.
    fn offered_min_mbps(self) -> f64 {
        f64::from(self.0) * 1.4
    }
}

/// Run tools/scenarios/testbed-flood.toml under `discipline` (its documented
/// defaults: no discipline key is set) at `rate` and check the run itself.
fn flood_run(discipline: &'static str, rate: FloodRate) -> FloodRun {
    let dir = scratch(&format!("testbed-flood-{discipline}-{}", rate.0));
    let mut scenario = FLOOD.replace(
        "discipline = \"droptail\"",
        &format!("discipline = \"{discipline}\""),
    );
    assert!(scenario.contains(&format!("discipline = \"{discipline}\"")));
    // The shipped file's 100 Mbit/s and 150 Mbit/s flood, set to `rate`.
    let (link, flood) = (
        format!("rate = \"{}Mbit\"", rate.0),
        format!("cbr(rate={}Mbit)", rate.0 * 3 / 2),
    );
    scenario = scenario
        .replace("rate = \"100Mbit\"", &link)
        .replace("cbr(rate=150Mbit)", &flood);
    assert!(scenario.contains(&link) && scenario.contains(&flood));
    let run = run_testbed(&dir, &scenario, &[]);
    let code = run.0;
    let r = results_of(&dir, "testbed-flood", &run);
    // Under DropTail the flood can starve TCP into RTO backoff so deeply
    // that it cannot deliver its last data within the load generator's
    // grace after the end ("no final count from the server"): that is the
    // DropTail outcome being measured, and its goodput samples stand. Any
    // other failure makes the run unusable.
    let starved = |f: &results::FlowResult| {
        discipline == "droptail"
            && f.group == "tcp-cubic"
            && f.goodput_mbps < 2.0
            && f.error
                .as_deref()
                .is_some_and(|e| e.starts_with("no final count from the server"))
    };
    let why: Vec<String> = r
        .flows
        .iter()
        .filter(|f| f.error.is_some() && !starved(f))
        .map(|f| format!("{}: {}", f.group, f.error.as_deref().unwrap_or("")))
        .collect();
    let accepted_failure = code == Some(1) && why.is_empty();
    let mut invalid = (code != Some(0) && !accepted_failure)
        .then(|| format!("exit {code:?} ({})", why.join("; ")));
    assert!(!r.partial, "{discipline}");
    assert_eq!(r.summary.discipline, discipline);
    for p in &r.ports {
        assert!(p.accounting_exact, "{discipline}: port {}: {p:?}", p.name);
    }
    let flow = |group: &str| {
        r.flows
            .iter()
            .find(|f| f.group == group)
            .unwrap_or_else(|| panic!("{discipline}: no {group} flow in {:?}", r.flows))
    };
    let (tcp, flood) = (flow("tcp-cubic"), flow("flood"));
    // What the flood offered: the UDP payload bytes it sent over its
    // active time. (The few seconds it keeps sending its send buffer after
    // the end make this a slight overestimate.) Not its datagrams times
    // QUIC's initial 1200 bytes: path MTU discovery raises the datagram
    // size in some runs and not in others. Measured: DropTail runs average
    // 1,288 bytes per datagram, CHOKe and Cebinae runs (40-55 % of the
    // flood dropped, probes included) stay at 1,200. So a DropTail run that
    // seemed to offer only 27.8 Mbit/s, counted at 1,200 bytes, was a full
    // link and a full-rate flood.
    let active_s = r.summary.duration_s - flood.start_s;
    let flood_sent_bytes = flood
        .sent_bytes
        .unwrap_or_else(|| panic!("{discipline}: the QUIC flood reports no sent_bytes"))
        as f64;
    let flood_sent_mbps = flood_sent_bytes * 8.0 / active_s / 1e6;
    // The bottleneck port: data flows client -> server through port 1.
    let bottleneck = r
        .ports
        .iter()
        .max_by_key(|p| p.received)
        .expect("router ports");
    if invalid.is_none() && flood_sent_mbps < rate.offered_min_mbps() {
        invalid = Some(format!(
            "the flood offered only {flood_sent_mbps:.1} Mbit/s"
        ));
    }
    let stalled_ms = router_stalled_ms(&dir.join("results/testbed-flood/testbed/router.out"));
    FloodRun {
        discipline,
        invalid,
        stalled_ms,
        tcp_mbps: tcp.goodput_mbps,
        flood_mbps: flood.goodput_mbps,
        flood_sent_mbps,
        flood_datagram_bytes: flood_sent_bytes / flood.sent_packets.max(1) as f64,
        drops: bottleneck.dropped.clone(),
    }
}

/// The three disciplines' flood runs at `rate`, each repeated once if it
/// was invalid (said on stdout), and their table printed.
fn flood_runs(rate: FloodRate) -> Vec<FloodRun> {
    // The comparison needs every flow to complete and the flood at its
    // rate in every run. On a loaded host neither is certain: the
    // (debug-built) flood sender once offered only ~115 of 150 Mbit/s
    // (DropTail then left TCP 6 Mbit/s), and a TCP flow starved into RTO
    // backoff once could not deliver its last data within the load
    // generator's 5 s grace after the end. Such a run is repeated once; a
    // second invalid run fails the test.
    let runs: Vec<FloodRun> = ["droptail", "choke", "cebinae"]
        .into_iter()
        .map(|d| {
            let r = flood_run(d, rate);
            let Some(why) = &r.invalid else {
                return r;
            };
            println!(
                "RETRY {d}: {why} (TCP {:.2}, flood goodput {:.2} Mbit/s)",
                r.tcp_mbps, r.flood_mbps
            );
            flood_run(d, rate)
        })
        .collect();
    println!(
        "{} Mbit/s: discipline  TCP Mbit/s  flood Mbit/s  flood offered Mbit/s  flood datagram B  router stalled ms  bottleneck drops",
        rate.0
    );
    for r in &runs {
        println!(
            "{:<10}  {:>10.2}  {:>12.2}  {:>20.1}  {:>16.0}  {:>17.0}  {:?}",
            r.discipline,
            r.tcp_mbps,
            r.flood_mbps,
            r.flood_sent_mbps,
            r.flood_datagram_bytes,
            r.stalled_ms,
            r.drops
        );
    }
    for r in &runs {
        assert_eq!(r.invalid, None, "{}: invalid twice", r.discipline);
        // A sanity bound only: a shared host may take the router's CPU for
        // seconds per run (`stalled_ms` in router.out).
        assert!(
            r.tcp_mbps + r.flood_mbps > f64::from(rate.0) / 2.0,
            "{}: the bottleneck carried only {:.1} Mbit/s of goodput",
            r.discipline,
            r.tcp_mbps + r.flood_mbps
        );
    }
    runs
}

/// Router fairness against a flood, the version that gates CI: the flood scenario at a
/// 20 Mbit/s bottleneck with a 30 Mbit/s flood (still 1.5x), a load this
/// 2-core VM carries with debug builds while it runs other work. CHOKe and
/// Cebinae (documented defaults) must each give the kernel TCP flow at
/// least twice its DropTail goodput *and* 0.5 Mbit/s (2.5 % of the
/// bottleneck) more. Measured with release builds, 4-5 runs each, most
/// with `nice`d simulations on both CPUs: TCP under DropTail 0.17-0.24,
/// CHOKe 1.39-1.57, Cebinae 3.97-4.36 Mbit/s. The 100 Mbit/s version below
/// remains for quiet hosts.
#[test]
fn choke_and_cebinae_protect_tcp_against_a_flood_at_20_mbit() {
    const NAME: &str = "choke_and_cebinae_protect_tcp_against_a_flood_at_20_mbit";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(NAME, &r);
    }
    let runs = flood_runs(FloodRate(20));
    let droptail = runs[0].tcp_mbps;
    for r in &runs[1..] {
        assert!(
            r.tcp_mbps >= 2.0 * droptail && r.tcp_mbps >= droptail + 0.5,
            "{}: TCP got {:.2} Mbit/s, DropTail {droptail:.2} Mbit/s (router stalled {:.0} ms)",
            r.discipline,
            r.tcp_mbps,
            r.stalled_ms
        );
    }
}

/// Router fairness against a flood: CHOKe and Cebinae (at their documented defaults)
/// protect a kernel TCP CUBIC flow against an unresponsive 150 Mbit/s
/// Tollgate QUIC flood (`cbr`) on a 100 Mbit/s bottleneck better than
/// DropTail does. DropTail leaves TCP 0.7-1.2 Mbit/s. Cebinae must give
/// it at least 5 Mbit/s more (measured 12-15 Mbit/s at the defaults dT =
/// 2^24 ns, L = 100 us, tau = 0.5; 0.15 Mbit/s at the ns-3 queue disc's
/// defaults).
/// CHOKe's protection of a single TCP flow is weak (1.5-1.9 Mbit/s here,
/// 1.75 in `tollgate sim`: TCP still loses about 10 % of its packets), 0.4
/// to 1.2 Mbit/s above DropTail in the same test run, so the bound is
/// 0.25 Mbit/s above DropTail. docs/testbed.md, "Router fairness against a
/// flood", has the measurements: on the shared 2-core development VM this
/// test passed 6 of 16 times (router CPU stalls, a flood sender that cannot
/// pace 150 Mbit/s in a debug build); on a quiet 2-core VM 3 of 3; it needs
/// a host with CPUs to spare.
/// So it does not gate CI (the 20 Mbit/s version above does): run it on a
/// quiet host with
/// `cargo test --release -p tollgate-tests --features dpdk --test testbed -- --ignored`.
#[test]
#[ignore = "timing-sensitive (passed 6 of 16 runs on a busy 2-core VM, 3 of 3 on a quiet one); run with --ignored on a quiet host"]
fn choke_and_cebinae_protect_tcp_against_a_flood_better_than_droptail() {
    const NAME: &str = "choke_and_cebinae_protect_tcp_against_a_flood_better_than_droptail";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = unavailable() {
        return skip(NAME, &r);
    }
    let runs = flood_runs(FloodRate(100));
    let droptail = runs[0].tcp_mbps;
    let (choke, cebinae) = (&runs[1], &runs[2]);
    assert!(
        choke.tcp_mbps >= droptail + 0.25,
        "choke: TCP got {:.2} Mbit/s, DropTail {droptail:.2} Mbit/s (router stalled {:.0} ms)",
        choke.tcp_mbps,
        choke.stalled_ms
    );
    assert!(
        cebinae.tcp_mbps >= droptail + 5.0,
        "cebinae: TCP got {:.2} Mbit/s, DropTail {droptail:.2} Mbit/s (router stalled {:.0} ms)",
        cebinae.tcp_mbps,
        cebinae.stalled_ms
    );
}

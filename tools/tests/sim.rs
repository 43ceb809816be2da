//! Emulator behaviour: determinism, link utilization, RTT (un)fairness, exact
//! packet accounting in every discipline, validation that writes nothing.
//!
//! Rates are kept low (20 Mbit/s) where the property does not depend on the
//! rate. The Libra experiment needs 120 s of 100 Mbit/s virtual time; with
//! the dev profile optimising the transport, router, CCAs and dependencies it
//! takes about 30 s, so it runs with the rest of the suite.

use std::process::Command;
use std::sync::atomic::AtomicBool;

use tollgate_tools::experiment;
use tollgate_tools::results::{self, Results};
use tollgate_tools::scenario::parse_plan;

fn simulate(text: &str) -> Results {
    let plan = parse_plan(text).expect("scenario is valid");
    let (r, _) = experiment::simulate(&plan.runs[0], true, &AtomicBool::new(false))
        .expect("simulation runs");
    r
}

fn two_flows(cca: &str, rate: &str, buffer: &str, duration: &str, from: &str) -> String {
    format!(
        r#"
name = "two-flows"
duration = "{duration}"
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "{rate}", delay = "2ms", buffer = "{buffer}" }}
[[flows]]
name = "short"
cca = "{cca}"
rtt = "10ms"
[[flows]]
name = "long"
cca = "{cca}"
rtt = "100ms"
[metrics]
measure_from = "{from}"
"#
    )
}

#[test]
fn same_seed_gives_identical_results_json() {
    let text = r#"
name = "det"
duration = "3s"
seed = 7
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "0.5bdp" }
[router]
discipline = "red"
[[flows]]
count = 2
cca = "newreno"
rtt = ["20ms", "60ms"]
start = "0s..0.5s"
[[flows]]
cca = "libra"
rtt = "40ms"
start = "0.2s"
"#;
    let a = serde_json::to_string_pretty(&simulate(text)).unwrap();
    let b = serde_json::to_string_pretty(&simulate(text)).unwrap();
    assert!(a.len() > 1000);
    assert!(a == b, "two runs with the same seed differ");
    // A different seed draws different start times, so the results differ.
    let c = serde_json::to_string_pretty(&simulate(&text.replace("seed = 7", "seed = 8"))).unwrap();
    assert_ne!(a, c, "the seed has no effect");
}

/// `packet_protection = false` swaps AES-GCM for a null cipher with the same
/// tag length on 1-RTT packets: every packet keeps its size and the emulator
/// never reads packet contents, so per-flow goodput, losses and packet counts
/// are exactly equal (tolerance zero), drops and queueing included (a
/// 1-BDP drop-tail buffer with four flows makes losses).
#[test]
fn packet_protection_off_gives_the_same_results() {
    let text = r#"
name = "protection"
duration = "4s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "1bdp" }
[[flows]]
count = 3
cca = "newreno"
rtt = ["10ms", "30ms", "60ms"]
[[flows]]
cca = "cubic"
rtt = "40ms"
"#;
    let on = simulate(text);
    let off = simulate(&text.replace(
        "duration = \"4s\"",
        "duration = \"4s\"\npacket_protection = false",
    ));
    assert_eq!(on.config["packet_protection"], true);
    assert_eq!(off.config["packet_protection"], false);
    assert!(
        on.flows.iter().map(|f| f.lost_packets).sum::<u64>() > 0,
        "no losses: a weak test"
    );
    for (a, b) in on.flows.iter().zip(&off.flows) {
        assert!(
            a.goodput_mbps > 0.2,
            "flow {} carried {} Mbit/s: a weak test",
            a.id,
            a.goodput_mbps
        );
        assert_eq!(a.goodput_mbps, b.goodput_mbps, "flow {}", a.id);
        assert_eq!(a.lost_packets, b.lost_packets, "flow {}", a.id);
        assert_eq!(a.sent_packets, b.sent_packets, "flow {}", a.id);
    }
    assert_eq!(on.summary.events, off.summary.events);
}

#[test]
fn a_single_flow_uses_at_least_95_percent_of_the_bottleneck() {
    let r = simulate(
        r#"
name = "single"
duration = "8s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "5ms" }
[[flows]]
cca = "newreno"
rtt = "20ms"
[metrics]
measure_from = "3s"
"#,
    );
    let u = r.summary.utilization;
    assert!(u >= 0.95, "utilization {u}");
    assert!(u <= 1.001, "utilization above capacity: {u}");
    // Goodput excludes QUIC/UDP/IP/Ethernet headers (about 6 % at 1452-byte datagrams).
    assert!(
        r.flows[0].goodput_mbps > 0.9 * 20.0,
        "{}",
        r.flows[0].goodput_mbps
    );
}

/// NewReno's RTT unfairness: with loss-based AIMD on a shared drop-tail
/// queue, a flow's throughput goes roughly as 1/RTT (its window grows one
/// packet per RTT), so a 10 ms flow gets far more than a 100 ms flow. The
/// lead's fluid model gives ~90 vs ~10 Mbit/s at 100 Mbit/s with a 1-BDP
/// buffer; queueing delay (up to 100 ms) narrows the effective RTT ratio,
/// so we require "well over twice".
#[test]
fn newreno_short_rtt_flow_gets_well_over_twice_the_long_one() {
    let r = simulate(&two_flows("newreno", "20Mbit", "1bdp", "40s", "10s"));
    let (short, long) = (r.flows[0].goodput_mbps, r.flows[1].goodput_mbps);
    assert!(short > 2.5 * long, "short {short} long {long}");
    assert!(r.summary.utilization > 0.95);
}

/// TCP Libra's property (Marfia et al.): the window
/// grows `alpha T^2 / (T + T0)` packets per RTT, so the rate grows
/// `alpha / (T + T0)` packets/s per second, nearly independent of the RTT for
/// `T << T0`; the equilibrium rate `sqrt(alpha (1 - p) / p)` does not depend
/// on the RTT. Two Libra flows with 10 ms and 100 ms RTT through one
/// bottleneck should therefore end within a small ratio; we require 1.5x at
/// every buffer the paper's claim covers (0.2 to 2 BDP), with the capacity
/// configured (`capacity=100Mbit`) so the test checks the window rule, not
/// CapProbe.
///
/// It does NOT hold today, so the test is ignored rather than tuned: an
/// earlier version asserted it at 0.5 BDP only, the one buffer where it
/// passed (47.6 vs 47.3 Mbit/s, while 1 BDP gave 70 vs 25 and 0.2 BDP 73 vs
/// 22). With host jitter (tools/docs/droptail-drops.md: without it drop-tail
/// losses were decided by sub-microsecond arrival phase) 0.5 BDP gives 58.9
/// vs 36.0 Mbit/s (1.64x).
///
/// What holds instead is a long-window, many-seed figure: with random
/// starts in the first second and measured over 60-300 s, the mean
/// short/long ratio over 10 seeds is 0.99-1.31 at the four buffers
/// (`tollgate reproduce libra`, capacity-configured rows; single seeds
/// 0.60-2.15), but
/// over this test's 20-120 s with both flows starting at 0 the geometric
/// means of 5 seeds are 0.82 / 2.17 / 1.67 / 2.87: Libra converges over
/// many sawtooth cycles (the penalty P slows growth under a standing
/// queue), so 100 s measure mostly its approach. A gating test of the
/// long-window claim would take several 300-s runs per buffer, too long for
/// CI. Run with `--ignored` to see the current figures.
#[test]
#[ignore = "Libra converges slowly: 20-120 s windows give 1.7-2.9x; the 300-s, 10-seed means are 0.99-1.31x (tools/reproduce/REPORT.md)"]
fn libra_flows_with_10_and_100_ms_rtt_come_within_1_5x_at_every_buffer() {
    let mut failures = Vec::new();
    for buffer in ["0.2bdp", "0.5bdp", "1bdp", "2bdp"] {
        let r = simulate(&two_flows(
            "libra(capacity=100Mbit)",
            "100Mbit",
            buffer,
            "120s",
            "20s",
        ));
        let (short, long) = (r.flows[0].goodput_mbps, r.flows[1].goodput_mbps);
        let ratio = short.max(long) / short.min(long);
        if ratio >= 1.5 {
            failures.push(format!(
                "{buffer}: short {short:.1} long {long:.1} ratio {ratio:.2}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// NewReno's RTT unfairness, the contrast to Libra: at 0.5 BDP the 10 ms
/// flow takes more than twice the 100 ms flow's goodput.
#[test]
fn newreno_favours_the_short_rtt_flow() {
    let n = simulate(&two_flows("newreno", "100Mbit", "0.5bdp", "120s", "20s"));
    let (s, l) = (n.flows[0].goodput_mbps, n.flows[1].goodput_mbps);
    assert!(s > 2.0 * l, "newreno short {s} long {l}");
}

/// Short/long goodput ratio of NewReno 10 ms vs 100 ms flows at 100 Mbit/s,
/// 0.2-BDP drop-tail, with the short flow's RTT given, `noise` as the
/// topology's timing noise (`None`: the default) and `seed`.
fn phase_run(short_rtt: &str, noise: Option<&str>, seed: u64) -> f64 {
    let jitter = noise.map_or(String::new(), |n| format!("noise = \"{n}\""));
    let r = simulate(&format!(
        r#"
name = "phase"
duration = "120s"
seed = {seed}
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "100Mbit", delay = "2ms", buffer = "0.2bdp" }}
{jitter}
[[flows]]
name = "short"
cca = "newreno"
rtt = "{short_rtt}"
[[flows]]
name = "long"
cca = "newreno"
rtt = "100ms"
[metrics]
measure_from = "30s"
"#
    ));
    r.flows[0].goodput_mbps / r.flows[1].goodput_mbps
}

/// Without timing noise every delay in the emulator is exact, so each flow's
/// ACK-clocked arrivals at a drop-tail port keep a fixed phase within the
/// port's transmission slots, and which flow's packet finds the queue full
/// is decided by that phase (Floyd & Jacobson's traffic phase effect):
/// moving the short flow's RTT by 60 µs (half a packet time at 100 Mbit/s)
/// halved the short/long ratio (20.4 to 9.5 over 300 s). With the default
/// noise (host wake-ups measured on the testbed) it must not matter
/// (tools/reproduce/DROP-BIAS.md). With noise one run's ratio varies from
/// seed to seed (12-22 at 10 ms over seeds 1-4), so the noisy side compares
/// the mean of two seeds.
#[test]
fn droptail_outcome_does_not_hinge_on_sub_packet_rtt_phase() {
    let change = |a: f64, b: f64| a.max(b) / a.min(b);
    let mean = |rtt: &str| (phase_run(rtt, None, 1) + phase_run(rtt, None, 2)) / 2.0;
    let (a, b) = (mean("10ms"), mean("10060us"));
    assert!(
        change(a, b) < 1.5,
        "default noise: short/long ratio {a:.2} at 10 ms vs {b:.2} at 10.06 ms (mean of seeds 1, 2)"
    );
    // The same pair without noise shows the artefact the noise removes.
    let (a0, b0) = (
        phase_run("10ms", Some("none"), 1),
        phase_run("10060us", Some("none"), 1),
    );
    assert!(
        change(a0, b0) > 1.5,
        "no noise: short/long ratio {a0:.2} at 10 ms vs {b0:.2} at 10.06 ms"
    );
}

/// Per-packet drop rates (drops / packets sent, whole run) of NewReno at 10
/// and 100 ms RTT, 100 Mbit/s, 0.2-BDP drop-tail, 120 s, with `noise` as
/// the timing noise (`None`: the default).
fn drop_rates(noise: Option<&str>) -> (f64, f64) {
    let mut text = two_flows("newreno", "100Mbit", "0.2bdp", "120s", "20s");
    if let Some(n) = noise {
        text = text.replacen("[[flows]]", &format!("noise = \"{n}\"\n[[flows]]"), 1);
    }
    let r = simulate(&text);
    let rate = |i: usize| {
        let f = &r.flows[i];
        let drops: u64 = f.drops.iter().map(|(_, n)| n).sum();
        drops as f64 / f.sent_packets.max(1) as f64
    };
    (rate(0), rate(1))
}

/// Without timing noise, ACK-clocked arrivals stay phase-locked to the
/// bottleneck's transmission slots at 0.2 BDP and the drop-tail queue drops
/// the 100 ms flow's packets at many times the 10 ms flow's rate (9-11x over
/// seeds 1-2; tools/reproduce/DROP-BIAS.md). With the default noise
/// (measured host wake-ups) the relative drop rate must be at most half of
/// what exact timing gives (it is 1.8-3.2x over seeds 1-4: the long flow
/// still loses more, as its window is larger and drop-tail drops in bursts).
/// Whole-run counts include the start-up (the short flow's slow-start
/// overshoot), which dilutes the steady-state bias.
#[test]
fn droptail_does_not_single_out_the_long_rtt_flow_with_the_default_noise() {
    let (short, long) = drop_rates(None);
    assert!(
        short > 0.0 && long > 0.0,
        "both flows lose packets: {short} {long}"
    );
    let (short0, long0) = drop_rates(Some("none"));
    assert!(
        long0 / short0 > 2.0 * (long / short),
        "long/short per-packet drop rate {:.2} without noise, {:.2} with the default: \
         the phase-locking bias the noise removes did not show",
        long0 / short0,
        long / short
    );
}

/// Every discipline runs in the emulator with exact packet accounting: at
/// each port `received == transmitted + dropped + queued`, and the drops the
/// ports count equal the drops the emulator saw per flow.
#[test]
fn every_discipline_has_exact_packet_accounting() {
    for (discipline, extra) in [
        ("droptail", ""),
        ("red", ""),
        ("choke", ""),
        ("cebinae", "tau = 0.05\ndt = \"67108864ns\""),
        ("rrmqs", "variants = [\"newreno\", \"cubic\"]"),
        ("fq", ""),
        ("codel", ""),
        ("fq_codel", ""),
        ("dualpi2", ""),
    ] {
        let text = format!(
            r#"
name = "acct-{discipline}"
duration = "4s"
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "20Mbit", delay = "2ms", buffer = "60pkt" }}
[router]
discipline = "{discipline}"
{extra}
[[flows]]
count = 2
cca = "newreno"
rtt = ["10ms", "50ms"]
[[flows]]
cca = "cubic"
rtt = "30ms"
start = "0.5s"
"#
        );
        let r = simulate(&text);
        let mut port_drops = 0;
        for p in &r.ports {
            let dropped: u64 = p.dropped.iter().map(|(_, n)| n).sum();
            assert_eq!(
                p.received,
                p.transmitted + dropped + p.in_flight,
                "{discipline} {}",
                p.name
            );
            assert!(p.accounting_exact);
            port_drops += dropped;
        }
        let flow_drops: u64 = r
            .flows
            .iter()
            .flat_map(|f| f.drops.iter().map(|(_, n)| n))
            .sum();
        assert_eq!(port_drops, flow_drops, "{discipline}");
        assert!(r.ports[0].received > 1_000, "{discipline}: traffic flowed");
        assert!(port_drops > 0, "{discipline}: a 60-packet buffer must drop");
        // RRMQS feedback drops a whole variant's main-queue packets for a
        // window when its index exceeds 1.2, which empties the link for a
        // while (utilization ~0.45 here); the others keep the link busy.
        let floor = if discipline == "rrmqs" { 0.2 } else { 0.8 };
        assert!(
            r.summary.utilization > floor,
            "{discipline}: {}",
            r.summary.utilization
        );
    }
}

#[test]
fn cebinae_reports_top_flows_and_rrmqs_reports_its_index() {
    let r = simulate(
        r#"
name = "ceb"
duration = "4s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms" }
[router]
discipline = "cebinae"
tau = 0.05
[[flows]]
count = 2
cca = "newreno"
rtt = ["10ms", "80ms"]
"#,
    );
    assert!(r.series.cebinae_top_flows.iter().any(|&n| n > 0));
    assert_eq!(r.series.cebinae_top_fraction.len(), 2);
    let r = simulate(
        r#"
name = "rr"
duration = "4s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "200pkt" }
[router]
discipline = "rrmqs"
variants = ["newreno", "cubic"]
[[flows]]
count = 3
cca = "newreno"
rtt = "20ms"
[[flows]]
count = 3
cca = "cubic"
rtt = "20ms"
"#,
    );
    let rr = r.rrmqs.expect("rrmqs results");
    assert!(rr.windows.len() >= 5, "{} windows", rr.windows.len());
    assert!(rr.mean_jain_real.is_some());
}

#[test]
fn parking_lot_sized_flows_and_reverse_traffic_run() {
    let r = simulate(
        r#"
name = "pl"
duration = "4s"
[topology]
kind = "parking-lot"
hops = 2
bottleneck = { rate = "20Mbit", delay = "2ms" }
[[flows]]
name = "long"
cca = "newreno"
rtt = "30ms"
[[flows]]
name = "cross"
cca = "newreno"
rtt = "20ms"
hops = [2, 2]
[[flows]]
name = "mice"
count = 5
cca = "cubic"
rtt = "20ms"
size = "10kB..100kB"
start = "0.5s"
interarrival = "200ms"
hops = [1, 1]
[[flows]]
name = "back"
cca = "newreno"
rtt = "30ms"
reverse = true
"#,
    );
    assert_eq!(r.ports.len(), 4);
    let mice: Vec<_> = r.flows.iter().filter(|f| f.group == "mice").collect();
    assert!(
        mice.iter().all(|f| f.completion_s.is_some()),
        "all mice finish"
    );
    assert!(mice.iter().all(|f| Some(f.bytes) == f.size_bytes));
    let back = r.flows.iter().find(|f| f.group == "back").unwrap();
    assert!(back.goodput_mbps > 1.0);
    // The reverse flow's data crosses the reverse ports.
    assert!(r
        .ports
        .iter()
        .any(|p| p.name.starts_with("rev") && p.utilization > 0.05));
}

#[test]
fn a_bad_scenario_names_the_field_and_writes_nothing() {
    let dir = std::env::temp_dir().join(format!("tollgate-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        two_flows("newreno", "20Mbit", "1bdp", "5s", "1s")
            .replace("rtt = \"100ms\"", "rtt = \"1ms\""),
    )
    .unwrap();
    let out = dir.join("results");
    let o = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args([
            "sim",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("flows[1].rtt") && err.contains("1ms") && err.contains("4ms"),
        "{err}"
    );
    assert!(!out.exists(), "nothing may be written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_re_renders_a_results_file() {
    let dir = std::env::temp_dir().join(format!("tollgate-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(&file, two_flows("newreno", "20Mbit", "1bdp", "2s", "0s")).unwrap();
    let out = dir.join("results");
    let bin = env!("CARGO_BIN_EXE_tollgate");
    let o = Command::new(bin)
        .args([
            "sim",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--no-plots",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(table.contains("overall: JFI"), "{table}");
    let json = out.join("two-flows/results.json");
    let r = results::read(&json).unwrap();
    assert_eq!(r.flows.len(), 2);
    assert!(out.join("two-flows/flows.csv").exists());
    let o = Command::new(bin)
        .args(["report", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let again = String::from_utf8_lossy(&o.stdout);
    assert!(again.contains("overall: JFI"));
    // The table re-rendered from the file is the table the run printed.
    assert!(table.starts_with(again.as_ref()), "{again}\n---\n{table}");
    if std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        for p in ["throughput.png", "throughput.svg", "jain.png", "queue.svg"] {
            assert!(out.join("two-flows").join(p).exists(), "{p}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

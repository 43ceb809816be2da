//! Prague on DualPI2, end to end in the emulator:
//! `tools/scenarios/prague-dualpi2.toml` at a fifth of its rate (20 Mbit/s)
//! and for 10 s. Prague's packets carry ECT(1), so DualPI2 keeps them in its
//! L4S queue and marks them from its 1 ms step; the marks come back as the
//! ECN counts of QUIC ACK frames. What RFC 9331/9332 claim and this test
//! asserts: Prague alone fills the link with a queue of about a millisecond,
//! and Prague and CUBIC share DualPI2 within a factor of two (the coupling's
//! purpose). The same pair through drop-tail is reported, not asserted.

use std::sync::atomic::AtomicBool;

use tollgate_tools::experiment;
use tollgate_tools::results::Results;
use tollgate_tools::scenario::parse_plan;

const RATE_MBPS: f64 = 20.0;

fn scenario() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/prague-dualpi2.toml");
    std::fs::read_to_string(path)
        .unwrap()
        .replace("rate = \"100Mbit\"", "rate = \"20Mbit\"")
        .replace("duration = \"40s\"", "duration = \"10s\"")
        .replace("measure_from = \"10s\"", "measure_from = \"4s\"")
}

/// Run every point of the scenario's sweep (dualpi2, droptail).
fn run_all(text: &str) -> Vec<Results> {
    let plan = parse_plan(text).expect("scenario is valid");
    assert_eq!(plan.runs.len(), 2, "the sweep: dualpi2, droptail");
    plan.runs
        .iter()
        .map(|run| {
            experiment::simulate(run, true, &AtomicBool::new(false))
                .expect("simulation runs")
                .0
        })
        .collect()
}

fn stat(r: &Results, flow: usize, key: &str) -> String {
    r.flows[flow]
        .cca_stats
        .iter()
        .find(|(k, _)| k == key)
        .map_or_else(|| "-".into(), |(_, v)| v.clone())
}

/// Queueing delay a flow saw: its median and p99 RTT over the base RTT, ms.
fn flow_queue_ms(r: &Results, flow: usize) -> (f64, f64) {
    let f = &r.flows[flow];
    (
        f.rtt_p50_ms.unwrap() - f.rtt_ms,
        f.rtt_p99_ms.unwrap() - f.rtt_ms,
    )
}

#[test]
fn prague_alone_fills_dualpi2_with_a_millisecond_queue() {
    // The scenario without its CUBIC flow.
    let text = scenario();
    let cut = text.find("[[flows]]\nname = \"cubic\"").unwrap();
    let end = text.find("[metrics]").unwrap();
    let text = format!("{}{}", &text[..cut], &text[end..]);
    let runs = run_all(&text);
    let r = &runs[0];
    assert_eq!(r.summary.discipline, "dualpi2");
    assert_eq!(r.flows.len(), 1);
    let port = &r.ports[0];
    let delay = port.queue_delay_ms.as_ref().unwrap();
    let (q50, q99) = flow_queue_ms(r, 0);
    let report = format!(
        "prague alone on dualpi2: {:.1} Mbit/s, utilisation {:.3}, port queue delay p50 {:.2} \
         p99 {:.2} max {:.2} ms, flow queueing p50 {q50:.2} p99 {q99:.2} ms, marks {}, drops {:?}, \
         alpha {}, ce_reductions {}, loss_reductions {}",
        r.flows[0].goodput_mbps,
        port.utilization,
        delay.p50,
        delay.p99,
        delay.max,
        port.marked,
        port.dropped,
        stat(r, 0, "alpha"),
        stat(r, 0, "ce_reductions"),
        stat(r, 0, "loss_reductions"),
    );
    eprintln!("{report}");
    assert!(port.utilization >= 0.85, "{report}");
    // The L4S queue's step marks from 1 ms: a few ms at most.
    assert!(delay.p99 <= 3.0, "{report}");
    // The marks are ECN, answered by the scalable response, not by loss.
    assert!(port.marked > 100, "{report}");
    assert_eq!(
        stat(r, 0, "loss_reductions").parse::<f64>(),
        Ok(0.0),
        "{report}"
    );
    assert!(port.accounting_exact, "{report}");
}

#[test]
fn prague_and_cubic_share_dualpi2_within_a_factor_of_two() {
    let runs = run_all(&scenario());
    let (pi, dt) = (&runs[0], &runs[1]);
    assert_eq!(pi.summary.discipline, "dualpi2");
    assert_eq!(dt.summary.discipline, "droptail");
    let describe = |r: &Results| {
        let (p, c) = (r.flows[0].goodput_mbps, r.flows[1].goodput_mbps);
        let (pq50, pq99) = flow_queue_ms(r, 0);
        let (cq50, cq99) = flow_queue_ms(r, 1);
        format!(
            "{}: prague {p:.3} Mbit/s, cubic {c:.3} Mbit/s (ratio {:.2}), utilisation {:.3}; \
             queueing prague p50 {pq50:.1} p99 {pq99:.1} ms, cubic p50 {cq50:.1} p99 {cq99:.1} ms; \
             prague alpha {} ce/loss reductions {}/{}",
            r.summary.discipline,
            p / c,
            r.ports[0].utilization,
            stat(r, 0, "alpha"),
            stat(r, 0, "ce_reductions"),
            stat(r, 0, "loss_reductions"),
        )
    };
    let report = format!("{}\n{}", describe(pi), describe(dt));
    eprintln!("{report}");
    assert_eq!(pi.flows[0].cca, "prague");
    let ratio = pi.flows[0].goodput_mbps / pi.flows[1].goodput_mbps;
    assert!((0.5..=2.0).contains(&ratio), "{report}");
    let total: f64 = pi.flows.iter().map(|f| f.goodput_mbps).sum();
    assert!(total > 0.85 * RATE_MBPS, "{report}");
    // Prague's packets wait in the L4S queue, CUBIC's in the Classic one.
    let (pq50, _) = flow_queue_ms(pi, 0);
    let (cq50, _) = flow_queue_ms(pi, 1);
    assert!(pq50 < cq50, "{report}");
    for r in [pi, dt] {
        assert!(r.ports.iter().all(|p| p.accounting_exact), "{report}");
    }
    // The port's delay split by ECN class: the L4S packets' sojourn stays
    // near DualPI2's 1 ms step, the Classic packets' near PI2's target, the
    // two together make up the port's whole histogram; through drop-tail
    // both classes wait in the same queue.
    let classes = |r: &Results| {
        let p = &r.ports[0];
        let l4s = p
            .queue_delay_l4s_ms
            .clone()
            .expect("prague's ECT(1) packets");
        let classic = p.queue_delay_classic_ms.clone().expect("cubic's packets");
        (l4s, classic, p.queue_delay_ms.clone().unwrap())
    };
    let (l4s, classic, all) = classes(pi);
    eprintln!(
        "dualpi2 port delay: L4S mean {:.2} p99 {:.2} ms, Classic p50 {:.2} ms, all p50 {:.2} ms",
        l4s.mean, l4s.p99, classic.p50, all.p50
    );
    assert!(l4s.mean < 1.0 && l4s.p99 < 3.0, "{l4s:?}");
    assert!(classic.p50 > 5.0 && classic.p50 < 25.0, "{classic:?}");
    assert!(all.p50 > l4s.p50 && all.p50 < classic.p99, "{all:?}");
    let (l4s, classic, _) = classes(dt);
    assert!(
        (l4s.mean / classic.mean - 1.0).abs() < 0.25,
        "drop-tail: one queue for both, L4S {l4s:?}, Classic {classic:?}"
    );
}

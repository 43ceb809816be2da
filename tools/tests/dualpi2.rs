//! DualPI2 holds a Classic queue near its target, end to end in the
//! emulator: `tools/scenarios/dualpi2-classic.toml` (two CUBIC flows at 20
//! and 40 ms through a 2-BDP buffer) at a fifth of its rate (20 Mbit/s) and
//! for 8 s. Every packet is Classic (CUBIC sends ECT(0); Prague's use of
//! the L4S queue is tools/tests/prague.rs): the PI
//! controller must keep the median queueing delay near its 15-ms target
//! while the link stays busy, where drop-tail, the sweep's second run, lets
//! CUBIC fill the 80-ms buffer.

use std::sync::atomic::AtomicBool;

use tollgate_tools::experiment;
use tollgate_tools::scenario::parse_plan;

#[test]
fn dualpi2_holds_the_classic_queue_near_its_target_where_droptail_fills_the_buffer() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/dualpi2-classic.toml"
    );
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("rate = \"100Mbit\"", "rate = \"20Mbit\"")
        .replace("duration = \"20s\"", "duration = \"8s\"")
        .replace("measure_from = \"5s\"", "measure_from = \"3s\"");
    let plan = parse_plan(&text).expect("scenario is valid");
    assert_eq!(plan.runs.len(), 2, "the sweep: dualpi2, droptail");
    let run = |i: usize| {
        experiment::simulate(&plan.runs[i], true, &AtomicBool::new(false))
            .expect("simulation runs")
            .0
    };
    let (pi, dt) = (run(0), run(1));
    assert_eq!(pi.summary.discipline, "dualpi2");
    assert_eq!(dt.summary.discipline, "droptail");
    let mbps = |r: &tollgate_tools::results::Results| -> f64 {
        r.flows.iter().map(|f| f.goodput_mbps).sum()
    };
    let (pi_mbps, dt_mbps) = (mbps(&pi), mbps(&dt));
    let pi_delay = pi.ports[0].queue_delay_ms.as_ref().unwrap();
    let dt_delay = dt.ports[0].queue_delay_ms.as_ref().unwrap();
    let report = format!(
        "dualpi2: {pi_mbps:.1} Mbit/s, queue delay p50 {:.1} ms p99 {:.1} ms, drops {:?}, \
         marks {}; droptail: {dt_mbps:.1} Mbit/s, p50 {:.1} ms",
        pi_delay.p50, pi_delay.p99, pi.ports[0].dropped, pi.ports[0].marked, dt_delay.p50
    );
    eprintln!("{report}");
    // Near the 15-ms target, and well below the full buffer.
    assert!(pi_delay.p50 > 5.0 && pi_delay.p50 < 30.0, "{report}");
    assert!(dt_delay.p50 > 2.0 * pi_delay.p50, "{report}");
    // The link stays busy.
    assert!(pi_mbps > 0.85 * 20.0, "{report}");
    assert!(
        pi.ports[0].marked > 0,
        "ECT(0) packets are marked: {report}"
    );
    for r in [&pi, &dt] {
        assert!(r.ports.iter().all(|p| p.accounting_exact), "{report}");
        // No L4S traffic (CUBIC sends ECT(0)): no per-class split.
        assert!(r
            .ports
            .iter()
            .all(|p| p.queue_delay_l4s_ms.is_none() && p.queue_delay_classic_ms.is_none()));
    }
}

//! FQ-CoDel isolates responsive flows from an unresponsive flood, end to
//! end in the emulator: `tools/scenarios/fq-codel-flood.toml` (two CUBIC and
//! two NewReno flows at 10-80 ms and a flood at twice the bottleneck), run at
//! a fifth of its rates (20 Mbit/s, a 40 Mbit/s flood) and for 8 s to keep
//! the test short. Under FQ-CoDel the responsive flows share equally (Jain's
//! index >= 0.9) at a median queueing delay near CoDel's 5-ms target; under
//! drop-tail, the sweep's second run, the flood starves them.

use std::sync::atomic::AtomicBool;

use tollgate_tools::experiment;
use tollgate_tools::results::Results;
use tollgate_tools::scenario::parse_plan;

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * q)
}

/// Jain's index and total goodput (Mbit/s) of the responsive flows.
fn responsive(r: &Results) -> (f64, f64) {
    let g: Vec<f64> = r
        .flows
        .iter()
        .filter(|f| f.group != "flood")
        .map(|f| f.goodput_mbps)
        .collect();
    assert_eq!(g.len(), 4);
    (jain(&g), g.iter().sum())
}

#[test]
fn fq_codel_protects_responsive_flows_from_a_flood_where_droptail_starves_them() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/fq-codel-flood.toml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("rate = \"100Mbit\"", "rate = \"20Mbit\"")
        .replace("cbr(rate=200Mbit)", "cbr(rate=40Mbit)")
        .replace("duration = \"20s\"", "duration = \"8s\"")
        .replace("measure_from = \"5s\"", "measure_from = \"3s\"");
    let plan = parse_plan(&text).expect("scenario is valid");
    assert_eq!(plan.runs.len(), 2, "the sweep: fq_codel, droptail");
    let run = |i: usize| {
        experiment::simulate(&plan.runs[i], true, &AtomicBool::new(false))
            .expect("simulation runs")
            .0
    };
    let (fq, dt) = (run(0), run(1));
    assert_eq!(fq.summary.discipline, "fq_codel");
    assert_eq!(dt.summary.discipline, "droptail");
    let (fq_jain, fq_mbps) = responsive(&fq);
    let (dt_jain, dt_mbps) = responsive(&dt);
    let fq_delay = fq.ports[0].queue_delay_ms.as_ref().unwrap();
    let dt_delay = dt.ports[0].queue_delay_ms.as_ref().unwrap();
    let report = format!(
        "fq_codel: responsive Jain {fq_jain:.3}, {fq_mbps:.1} Mbit/s, queue delay p50 {:.1} ms, \
         drops {:?}, marks {}; droptail: Jain {dt_jain:.3}, {dt_mbps:.1} Mbit/s, p50 {:.1} ms",
        fq_delay.p50, fq.ports[0].dropped, fq.ports[0].marked, dt_delay.p50
    );
    eprintln!("{report}");
    assert!(fq_jain >= 0.9, "{report}");
    assert!(fq_delay.p50 < 15.0, "{report}");
    assert!(
        fq.ports[0].marked > 0,
        "ECN-capable packets are marked: {report}"
    );
    // Four of five queues: the responsive flows get about 80 % of the link.
    assert!(fq_mbps > 0.6 * 20.0, "{report}");
    assert!(dt_mbps < 0.5 * fq_mbps, "{report}");
    assert!(dt_delay.p50 > 2.0 * fq_delay.p50, "{report}");
    for r in [&fq, &dt] {
        assert!(r.ports.iter().all(|p| p.accounting_exact), "{report}");
    }
}

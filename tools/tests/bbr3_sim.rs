//! BBRv3 (`bbr3`) end to end in the emulator: the bbr3 flow of
//! `tools/scenarios/bbr3-vs-cubic.toml` alone on its 100 Mbit/s, 40-ms path,
//! for 8 s instead of 60 to keep the test short, with a 4-BDP buffer so that
//! a sender stuck in Startup (or a loss-based one) would keep a queue of one
//! BDP or more. BBRv3 must fill the link (>= 90 %) and leave Startup on the
//! bandwidth plateau, after which its median queue stays well under one BDP
//! (40 ms).

use std::sync::atomic::AtomicBool;

use tollgate_tools::experiment;
use tollgate_tools::scenario::parse_plan;

#[test]
fn bbr3_alone_fills_the_link_and_leaves_startup() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/bbr3-vs-cubic.toml");
    let text = std::fs::read_to_string(path).unwrap();
    // The bbr3 flow only: drop the CUBIC flow and the sweep.
    let cubic = text
        .find("[[flows]]\nname = \"cubic\"")
        .expect("cubic flow");
    let metrics = text.find("[metrics]").expect("metrics");
    let sweep = text.find("[sweep]").expect("sweep");
    let sweep_end = sweep + text[sweep..].find("\n\n").expect("end of [sweep]");
    let text = format!(
        "{}{}{}",
        &text[..sweep],
        &text[sweep_end..cubic],
        &text[metrics..]
    )
    .replace("buffer = \"1bdp\"", "buffer = \"4bdp\"")
    .replace("duration = \"60s\"", "duration = \"8s\"")
    .replace("measure_from = \"10s\"", "measure_from = \"2s\"");
    let plan = parse_plan(&text).expect("scenario is valid");
    assert_eq!(plan.runs.len(), 1);
    let (r, _) = experiment::simulate(&plan.runs[0], true, &AtomicBool::new(false))
        .expect("simulation runs");
    assert_eq!(r.flows.len(), 1);
    let flow = &r.flows[0];
    assert_eq!(flow.cca, "bbr3");
    let stat = |key: &str| {
        flow.cca_stats
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {key} in {:?}", flow.cca_stats))
    };
    let delay = r.ports[0].queue_delay_ms.as_ref().expect("queue delay");
    let report = format!(
        "utilisation {:.3}, goodput {:.2} Mbit/s, queue delay p50 {:.1} ms p99 {:.1} ms, \
         mode {}, startup exit {}, drops {:?}",
        r.summary.utilization,
        flow.goodput_mbps,
        delay.p50,
        delay.p99,
        stat("mode"),
        stat("startup_exit"),
        r.ports[0].dropped
    );
    eprintln!("{report}");
    assert!(r.summary.utilization >= 0.9, "{report}");
    assert_eq!(stat("startup_exit"), "bw_plateau", "{report}");
    assert_ne!(stat("mode"), "startup", "{report}");
    // A sender stuck in Startup keeps about one BDP (40 ms) queued; the
    // percentiles cover the whole run, Startup's queue included.
    assert!(delay.p50 < 10.0, "{report}");
}

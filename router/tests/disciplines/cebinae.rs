//! Cebinae: the heavy flow is classified top; on a saturated port the top
//! class is limited to (1 - tau) of its previous rate and bot flows gain; an
//! unsaturated port is not taxed, and one that stops being saturated stops
//! taxing (nothing stays top).

use std::time::Duration;

use tollgate_router::cebinae::{Cebinae, CebinaeConfig, ReconfigReport};
use tollgate_router::droptail::{DropTail, DropTailConfig, Limit};
use tollgate_router::{DropReason, PacketMeta, Qdisc};

use tollgate_cca::Time;

use tollgate_cca::rng;

use crate::common::{assert_accounting, flow_hash, run_cbr, tick_arrivals, Source};

const LEN: u32 = 1000;
/// 1000-byte packets at 100 Mbit/s: 80 us each.
const TICK_NS: u64 = 80_000;

fn cfg() -> CebinaeConfig {
    CebinaeConfig {
        line_rate_bps: 100e6,
        dt: Duration::from_nanos(1 << 22),
        tau: 0.05,
        max_size: 200,
        ..CebinaeConfig::default()
    }
}

fn sources(heavy: f64, light: f64) -> Vec<Source> {
    vec![
        Source::new(1, heavy, LEN),
        Source::new(2, light, LEN),
        Source::new(3, light, LEN),
    ]
}

/// Drive Cebinae like [`run_cbr`] and record every distinct evaluation report
/// and every departure `(time, flow)`.
fn run(
    q: &mut Cebinae<PacketMeta>,
    srcs: &mut [Source],
    ticks: u64,
) -> (Vec<u64>, Vec<ReconfigReport>, Vec<(u64, u64)>) {
    run_from(q, srcs, 0, ticks)
}

/// [`run`] from tick `from` on (to continue a run with other sources).
fn run_from(
    q: &mut Cebinae<PacketMeta>,
    srcs: &mut [Source],
    from: u64,
    ticks: u64,
) -> (Vec<u64>, Vec<ReconfigReport>, Vec<(u64, u64)>) {
    let mut reports: Vec<ReconfigReport> = Vec::new();
    let mut delivered = vec![0u64; srcs.len()];
    let mut departures = Vec::new();
    let mut rng = rng::seeded(11);
    for tick in from..from + ticks {
        for (at, p) in tick_arrivals(srcs, tick, TICK_NS, &mut rng) {
            let _ = q.enqueue(p, at);
        }
        let now = tick * TICK_NS + TICK_NS - 1;
        if let Some(p) = q.dequeue(Time::from_nanos(now)) {
            delivered[(p.tag - 1) as usize] += u64::from(p.len);
            departures.push((now, p.tag));
        }
        let r = *q.last_report();
        if reports.last().map_or(r.at.as_nanos() > 0, |l| l.at != r.at) {
            reports.push(r);
        }
    }
    (delivered, reports, departures)
}

#[test]
fn saturated_port_taxes_the_heavy_flow_and_bot_flows_gain() {
    let c = cfg();
    let mut q = Cebinae::new(&c).unwrap();
    // Heavy flow at 1.2x line rate, two light flows at 0.25x each.
    let ticks = 25_000; // 2 s
    let (got, reports, departures) = run(&mut q, &mut sources(1.2, 0.25), ticks);
    assert!(q.is_top(flow_hash(1)), "heavy flow is top");
    assert!(
        !q.is_top(flow_hash(2)) && !q.is_top(flow_hash(3)),
        "light flows are bot"
    );

    let window_ns = c.dt.as_nanos() as f64 * f64::from(c.p);
    let (mut checked, mut heavy_top) = (0usize, 0usize);
    for pair in reports.windows(2) {
        let (prev, cur) = (pair[0], pair[1]);
        // The detector counts bytes at dequeue: per-flow departures in the window.
        let in_window = |&&(t, _): &&(u64, u64)| t >= prev.at.as_nanos() && t < cur.at.as_nanos();
        let mut per_flow = [0u64; 3];
        for &(_, f) in departures.iter().filter(in_window) {
            per_flow[(f - 1) as usize] += u64::from(LEN);
        }
        assert_eq!(
            cur.port_bytes,
            per_flow.iter().sum::<u64>(),
            "port bytes at {:?}",
            cur.at
        );
        if cur.saturated {
            // Top flows: bytes > max * (1 - delta_flow).
            let max = *per_flow.iter().max().unwrap() as f64;
            let top: Vec<u64> = per_flow
                .iter()
                .copied()
                .filter(|&b| b as f64 > max * (1.0 - c.delta_flow))
                .collect();
            assert_eq!(
                cur.top_flows,
                top.len(),
                "top flows at {:?}: {per_flow:?}",
                cur.at
            );
            let top_bytes: u64 = top.iter().sum();
            assert_eq!(cur.top_bytes, top_bytes, "top bytes at {:?}", cur.at);
            // Limited to (1 - tau) of its previous rate (capped at (1 - tau) of the line).
            let expected = (top_bytes as f64 * 8.0 * (1.0 - c.tau) / (window_ns / 1e9))
                .min(c.line_rate_bps * (1.0 - c.tau));
            assert!(
                (cur.top_rate_bps - expected).abs() < 1e-6 * expected,
                "{} vs {expected}",
                cur.top_rate_bps
            );
            assert!((cur.top_rate_bps + cur.bot_rate_bps - c.line_rate_bps).abs() < 1.0);
            heavy_top += usize::from(per_flow[0] as f64 > max * (1.0 - c.delta_flow));
            checked += 1;
        } else {
            assert_eq!((cur.top_flows, cur.top_bytes), (0, 0));
            assert_eq!(cur.bot_rate_bps, c.line_rate_bps);
        }
    }
    // Taxed below the light flows for a window, it can briefly drop out of the top class.
    assert!(
        heavy_top * 10 > checked * 9,
        "heavy flow top in {heavy_top} of {checked} saturated windows"
    );
    assert!(
        checked > reports.len() / 3,
        "port saturated in {checked} of {} windows",
        reports.len()
    );
    assert!(q.counters().dropped_for(DropReason::Tax) > 0);

    // Against DropTail with the same buffer, the bot flows gain.
    let mut dt = DropTail::new(&DropTailConfig {
        limit: Limit::Packets(400),
        ..Default::default()
    })
    .unwrap();
    let base = run_cbr(&mut dt, &mut sources(1.2, 0.25), TICK_NS, ticks, 0);
    let bot = |v: &[u64]| (v[1] + v[2]) as f64 / v.iter().sum::<u64>() as f64;
    let (bot_ceb, bot_dt) = (bot(&got), bot(&base.delivered));
    println!("bot share: Cebinae {bot_ceb:.3}, DropTail {bot_dt:.3}");
    assert!(
        bot_ceb > bot_dt + 0.1,
        "Cebinae {bot_ceb} vs DropTail {bot_dt}"
    );
    // The light flows ask for 0.5 of the link; the heavy flow, taxed by
    // (1 - tau) per round while the port is saturated, leaves them well over 0.3.
    assert!(bot_ceb > 0.3, "{bot_ceb}");
    // The tax costs little throughput: the link stays busy.
    let busy = got.iter().sum::<u64>() as f64 / (ticks as f64 * f64::from(LEN));
    assert!(busy > 0.9, "utilisation {busy}");
    assert_accounting(&q);
}

#[test]
fn a_port_that_stops_being_saturated_stops_taxing() {
    let c = cfg();
    let mut q = Cebinae::new(&c).unwrap();
    let ticks = 25_000; // 2 s
    run(&mut q, &mut sources(1.2, 0.25), ticks);
    assert!(q.is_top(flow_hash(1)), "heavy flow is top");
    assert!(q.counters().dropped_for(DropReason::Tax) > 0);
    // The same flows at 0.7 of the link: once the backlog has drained the
    // evaluations find the port unsaturated and nothing is top any more.
    let (_, reports, _) = run_from(&mut q, &mut sources(0.5, 0.1), ticks, ticks);
    let last = reports.last().expect("evaluations ran");
    assert!(!last.saturated && last.top_flows == 0, "{last:?}");
    assert!(!q.is_top(flow_hash(1)) && !q.is_top(flow_hash(2)));
    let taxed = q.counters().dropped_for(DropReason::Tax);
    run_from(&mut q, &mut sources(0.5, 0.1), 2 * ticks, ticks);
    assert_eq!(q.counters().dropped_for(DropReason::Tax), taxed);
    // No flow is top: the top class's rate is 0, the bot class has the line.
    assert_eq!(q.head_rates_bps(), (0.0, c.line_rate_bps));
    assert_accounting(&q);
}

#[test]
fn unsaturated_port_is_not_taxed() {
    let c = cfg();
    let mut q = Cebinae::new(&c).unwrap();
    let ticks = 12_500;
    let (got, reports, _) = run(&mut q, &mut sources(0.5, 0.1), ticks);
    assert!(reports.len() > 100);
    assert!(reports
        .iter()
        .all(|r| !r.saturated && r.top_flows == 0 && r.bot_rate_bps == c.line_rate_bps));
    assert_eq!(q.counters().dropped_total(), 0, "{:?}", q.counters());
    assert!(!q.is_top(flow_hash(1)));
    // Everything offered is delivered or still queued.
    let offered = ticks as f64 * 0.7 * f64::from(LEN);
    let received = q.counters().received_bytes;
    assert!((received as f64 - offered).abs() <= 3.0 * f64::from(LEN));
    assert_eq!(got.iter().sum::<u64>() + q.bytes(), received);
    // No flow is top: the top class's rate is 0, the bot class has the line.
    assert_eq!(q.head_rates_bps(), (0.0, c.line_rate_bps));
}

#[test]
fn bad_parameters_name_the_field() {
    let e = CebinaeConfig {
        tau: 1.5,
        ..CebinaeConfig::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "tau");
    let e = CebinaeConfig {
        cache_slots: 1000,
        ..CebinaeConfig::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "cache_slots");
    let e = CebinaeConfig {
        l: Duration::from_secs(1),
        ..CebinaeConfig::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "l (ns)");
    // The flow cache counts 32-bit bytes: an evaluation window at line rate,
    // and the two rounds Cebinae may admit ahead, must fit (10 Gbit/s x 2^24
    // ns x (254 + 2) rounds is 5.4 GB; 126 + 2 fit).
    let window = |p| CebinaeConfig {
        line_rate_bps: 10e9,
        p,
        ..CebinaeConfig::default()
    };
    let e = window(254).validate().unwrap_err();
    assert_eq!(e.field, "p");
    assert!(e.valid.contains("lower p or dt"), "{e}");
    assert!(window(126).validate().is_ok());
}

//! RED: drop rate against the formula (with the count correction), the gentle
//! region, Adaptive RED's direction, idle decay, ECN marking.

use std::time::Duration;

use tollgate_cca::Time;
use tollgate_router::red::{Red, RedConfig};
use tollgate_router::{DropReason, Qdisc, Verdict};

use crate::common::{assert_accounting, ect, pkt};

/// Expected fraction of arrivals dropped when RED sees a constant `p_b`:
/// the k-th packet after a drop is dropped with `p_a(k) = p_b / (1 - k p_b)`
/// (1 once `k p_b >= 1`), so the drop rate is `1 / E[X]`, X = distance between drops.
fn expected_drop_rate(p_b: f64) -> f64 {
    let (mut survive, mut mean) = (1.0, 0.0);
    for k in 1..100_000u32 {
        let denom = 1.0 - f64::from(k) * p_b;
        let p_a = if denom <= 0.0 {
            1.0
        } else {
            (p_b / denom).min(1.0)
        };
        mean += f64::from(k) * survive * p_a;
        survive *= 1.0 - p_a;
        if survive < 1e-15 {
            break;
        }
    }
    1.0 / mean
}

/// Hold the queue (and, with w = 1, the average) at `q` packets and measure
/// the fraction of `n` arrivals dropped, by reason.
fn drop_rate_at(cfg: &RedConfig, q: usize, n: u64) -> (f64, Red<tollgate_router::PacketMeta>) {
    let mut red = Red::new(cfg).unwrap();
    let mut t = 0u64;
    while red.len() < q {
        t += 1_000;
        let _ = red.enqueue(pkt(t, 1000), Time::from_nanos(t));
    }
    let before = red.counters().dropped_total();
    for _ in 0..n {
        t += 1_000;
        let now = Time::from_nanos(t);
        if red.enqueue(pkt(t, 1000), now).is_queued() {
            red.dequeue(now).unwrap();
        }
        assert_eq!(red.len(), q);
    }
    assert_accounting(&red);
    (
        (red.counters().dropped_total() - before) as f64 / n as f64,
        red,
    )
}

fn held(gentle: bool) -> RedConfig {
    RedConfig {
        weight: 1.0,
        min_th: 10.0,
        max_th: 30.0,
        max_p: 0.1,
        gentle,
        seed: 42,
        ..RedConfig::default()
    }
}

#[test]
fn drop_rate_matches_formula_with_count_correction() {
    let cfg = held(false);
    let n = 60_000;
    for q in [14usize, 20, 26] {
        let (measured, red) = drop_rate_at(&cfg, q, n);
        let p_b = cfg.max_p * (q as f64 - cfg.min_th) / (cfg.max_th - cfg.min_th);
        let expected = expected_drop_rate(p_b);
        // Inter-drop distance is at most 1/p_b, so its variance is <= 1/(12 p_b^2);
        // five standard errors of the renewal estimate:
        let tol = 5.0
            * expected
            * (expected * expected / (12.0 * p_b * p_b) / (n as f64 * expected)).sqrt();
        assert!(
            (measured - expected).abs() < tol,
            "q={q}: measured {measured}, formula {expected} (tol {tol})"
        );
        // The count correction matters: without it the rate would be p_b.
        assert!(
            measured > 1.5 * p_b,
            "q={q}: {measured} vs uncorrected {p_b}"
        );
        assert_eq!(
            red.counters().dropped_for(DropReason::Early),
            red.counters().dropped_total()
        );
    }
}

#[test]
fn gentle_region_and_forced_drops() {
    let n = 20_000;
    // avg = 40 is between max_th = 30 and 2 max_th = 60.
    let cfg = held(true);
    let (measured, red) = drop_rate_at(&cfg, 40, n);
    // Gentle region: p_a = p_b (geometric drops), no count correction.
    let p_b = cfg.max_p + (1.0 - cfg.max_p) * (40.0 - cfg.max_th) / cfg.max_th;
    let tol = 5.0 * (p_b * (1.0 - p_b) / n as f64).sqrt();
    assert!(
        (measured - p_b).abs() < tol,
        "gentle: measured {measured}, formula {p_b}"
    );
    assert!(measured < 1.0 && measured > cfg.max_p);
    assert_eq!(red.counters().dropped_for(DropReason::Forced), 0);
    // Without gentle, the same average drops everything (forced).
    let mut plain = Red::new(&held(false)).unwrap();
    for i in 0..40u64 {
        let _ = plain.enqueue(pkt(i, 1000), Time::ZERO);
    }
    let len = plain.len();
    assert!(len < 40, "forced drops while filling past max_th");
    for i in 0..100u64 {
        assert_eq!(
            plain.enqueue(pkt(i, 1000), Time::ZERO).drop_reason(),
            Some(DropReason::Forced),
            "q={len}"
        );
    }
    // Gentle at avg >= 2 max_th: forced too.
    let (rate, red) = drop_rate_at(&cfg, 60, 1_000);
    assert_eq!(rate, 1.0);
    assert!(red.counters().dropped_for(DropReason::Forced) >= 1_000);
}

#[test]
fn adaptive_red_moves_max_p_in_the_right_direction() {
    let cfg = RedConfig {
        adaptive: true,
        ..held(false)
    };
    let mut red = Red::new(&cfg).unwrap();
    let mut t = Time::ZERO;
    let step = Duration::from_millis(1);
    let hold = |red: &mut Red<_>, q: usize, ms: u64, t: &mut Time| {
        for _ in 0..ms {
            *t = *t + step;
            while red.len() < q {
                let _ = red.enqueue(pkt(1, 1000), *t);
            }
            if red.enqueue(pkt(1, 1000), *t).is_queued() {
                red.dequeue(*t);
            }
        }
    };
    // avg = 26 > min_th + 0.6 D = 22: max_p grows by min(0.01, max_p / 4) per 0.5 s.
    hold(&mut red, 26, 600, &mut t);
    assert!(
        (red.core().max_p() - 0.11).abs() < 1e-12,
        "{}",
        red.core().max_p()
    );
    hold(&mut red, 26, 2_000, &mut t);
    let high = red.core().max_p();
    assert!((high - (0.11 + 4.0 * 0.01)).abs() < 1e-9, "{high}");
    // avg = 12 < min_th + 0.4 D = 18: max_p *= 0.9 per interval.
    let mut red_low = red;
    let mut drain = t;
    while red_low.len() > 12 {
        red_low.dequeue(drain);
    }
    drain = drain + Duration::from_millis(1);
    hold(&mut red_low, 12, 500, &mut drain);
    assert!(
        (red_low.core().max_p() - high * 0.9).abs() < 1e-12,
        "{}",
        red_low.core().max_p()
    );
    hold(&mut red_low, 12, 5_000, &mut drain);
    assert!(red_low.core().max_p() < high * 0.9 * 0.9);
}

#[test]
fn idle_time_decays_the_average() {
    // 1000-byte packets at 80 Mbit/s: one packet time = 100 us.
    let cfg = RedConfig {
        weight: 0.1,
        link_rate_bps: 80e6,
        mean_pkt_bytes: 1000,
        ..RedConfig::default()
    };
    let mut red = Red::new(&cfg).unwrap();
    let t0 = Time::from_millis(1);
    for i in 0..30u64 {
        let _ = red.enqueue(pkt(i, 1000), t0);
    }
    let avg = red.core().average();
    assert!(avg > 5.0);
    while red.dequeue(t0).is_some() {}
    // Idle for 50 packet times: avg *= 0.9^50.
    let _ = red.enqueue(pkt(99, 1000), t0 + Duration::from_micros(5_000));
    let expected = avg * 0.9f64.powi(50);
    assert!(
        (red.core().average() - expected).abs() < 1e-9 * avg,
        "{} vs {expected}",
        red.core().average()
    );
}

#[test]
fn ecn_marks_capable_packets_and_drops_others() {
    let cfg = RedConfig {
        ecn: true,
        ..held(false)
    };
    let mut red = Red::new(&cfg).unwrap();
    for i in 0..20u64 {
        let _ = red.enqueue(ect(i, 1000), Time::ZERO);
    }
    let (mut marked, mut dropped) = (0, 0);
    for i in 0..2_000u64 {
        // Alternate an ECN-capable and a non-capable arrival at a held queue.
        match red.enqueue(ect(i, 1000), Time::ZERO) {
            Verdict::Marked => marked += 1,
            Verdict::Dropped { .. } => panic!("ECT packets are marked, not dropped"),
            Verdict::Queued => {}
        }
        red.dequeue(Time::ZERO);
        match red.enqueue(pkt(i, 1000), Time::ZERO) {
            Verdict::Marked => panic!("a non-ECT packet cannot be marked"),
            Verdict::Dropped { .. } => dropped += 1,
            Verdict::Queued => {
                red.dequeue(Time::ZERO);
            }
        }
    }
    assert!(
        marked > 50 && dropped > 50,
        "marked {marked}, dropped {dropped}"
    );
    assert_eq!(red.counters().marked, marked);
    assert_accounting(&red);
}

#[test]
fn bad_thresholds_are_rejected_by_name() {
    let e = Red::<tollgate_router::PacketMeta>::new(&RedConfig {
        max_th: 3.0,
        ..RedConfig::default()
    })
    .unwrap_err();
    assert_eq!(e.field, "max_th");
    assert!(e.to_string().contains("> min_th"), "{e}");
    let e = RedConfig {
        weight: 0.0,
        ..RedConfig::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "weight");
    let auto = RedConfig::auto(1e6, Duration::from_millis(5), 1000, 100);
    // 125 packets/s: target_delay * C / 2 < 5, so min_th = 5 and max_th = 15.
    assert_eq!((auto.min_th, auto.max_th), (5.0, 15.0));
    assert!((auto.weight - (1.0 - (-1.0f64 / 125.0).exp())).abs() < 1e-15);
    auto.validate().unwrap();
}

//! TCP Libra: the window rule, the decrease, RTT-independent equilibrium
//! rates, and CapProbe feeding the capacity.

mod common;

use std::time::Duration;

use common::{ms, Driver};
use tollgate_cca::libra::{Libra, LibraConfig};
use tollgate_cca::model::{Bottleneck, FlowSetup, LossPattern, Model};
use tollgate_cca::{build, CongestionControl, Env, StatValue, Time};

const MSS: u64 = 1000;

fn libra(capacity_bps: Option<f64>, initial_packets: u64) -> Libra {
    let config = LibraConfig {
        capacity_bps,
        ..LibraConfig::default()
    };
    Libra::new(
        config,
        &Env {
            mss: MSS,
            initial_window: initial_packets * MSS,
            link_rate_bps: None,
            seed: None,
        },
    )
}

/// Per RTT in congestion avoidance the window grows alpha * T^2 / (T + T0)
/// packets, with alpha = k1 * C[Mbit/s] * P (P = 1 at a constant RTT).
#[test]
fn per_rtt_increase_is_alpha_t_squared_over_t_plus_t0() {
    for rtt_ms in [50u64, 200] {
        // A large window keeps the per-ACK discretisation error (~ increase / 2w) small.
        let mut cca = libra(Some(100e6), 2000);
        let mut d = Driver::new(MSS);
        let rtt = ms(rtt_ms);
        d.round_trip(&mut cca, rtt); // establishes Tmin = Tmax = T
        d.loss(&mut cca);
        let before = cca.window() as f64 / MSS as f64;
        for _ in 0..5 {
            d.ack_window(&mut cca, rtt);
        }
        let t = rtt.as_secs_f64();
        let alpha = 2.0 * 100.0;
        assert!((cca.alpha() - alpha).abs() < 1e-9);
        let expected = alpha * t * t / (t + 1.0);
        let per_rtt = (cca.window() as f64 / MSS as f64 - before) / 5.0;
        assert!(
            (per_rtt / expected - 1.0).abs() < 0.01,
            "T={rtt_ms}ms: {per_rtt:.3} vs {expected:.3}"
        );
    }
}

/// On loss: w = w * T1 / (2 (T + T0)).
#[test]
fn decrease_is_t1_over_two_t_plus_t0() {
    let mut cca = libra(Some(100e6), 100);
    let mut d = Driver::new(MSS);
    d.round_trip(&mut cca, ms(250));
    let before = cca.window() as f64;
    d.loss(&mut cca);
    let expected = before * 1.0 / (2.0 * (0.25 + 1.0));
    assert!(
        (cca.window() as f64 - expected).abs() <= 1.0,
        "{} vs {expected}",
        cca.window()
    );
    assert_eq!(cca.stats().ssthresh, Some(cca.window()));
}

/// The penalty P = exp(-k2 (T - Tmin) / (Tmax - Tmin)) slows growth as the RTT
/// approaches its historic maximum.
#[test]
fn penalty_falls_as_rtt_approaches_its_maximum() {
    let mut cca = libra(Some(100e6), 100);
    let mut d = Driver::new(MSS);
    d.round_trip(&mut cca, ms(20));
    assert_eq!(cca.penalty(), 1.0);
    d.round_trip(&mut cca, ms(120));
    assert!((cca.penalty() - (-2.0f64).exp()).abs() < 1e-9);
    d.round_trip(&mut cca, ms(70));
    assert!((cca.penalty() - (-1.0f64).exp()).abs() < 1e-9);
}

/// Mean rate in packets/s of one flow with every `loss_every`-th packet lost,
/// over the second half of `secs` seconds, on an uncongested path.
fn mean_rate_packets(spec: &str, rtt: Duration, loss_every: u64, secs: f64) -> f64 {
    let env = Env::with_mss(MSS);
    let flow = FlowSetup {
        cca: build(spec, &env).unwrap(),
        base_rtt: rtt,
        start: Time::ZERO,
        mss: MSS,
        loss: LossPattern::EveryNth(loss_every),
        receive_window: 8 << 20,
    };
    let mut model = Model::new(vec![flow], None, ms(500));
    model.run_until(Time::from_secs_f64(secs));
    model.mean_goodput_bps(
        0,
        Time::from_secs_f64(secs / 2.0),
        Time::from_secs_f64(secs),
    ) / 8.0
        / MSS as f64
}

/// The paper's central property (eq. 5): under the same loss probability the
/// equilibrium *rate* x = sqrt(alpha (1 - p) / p) does not depend on the RTT,
/// while NewReno's rate is inversely proportional to it.
///
/// p = 1e-4 keeps the sawtooth period (~7 s) long against the 100 ms flow's
/// recovery period, in which Libra, like NewReno, does not grow; at p = 1e-3
/// that pause alone costs the 100 ms flow ~13 % and the rates differ by ~25 %.
#[test]
fn equilibrium_rate_is_rtt_independent_unlike_newreno() {
    let spec = "libra(capacity=100Mbit)"; // alpha = 2 * 100
    let short = mean_rate_packets(spec, ms(10), 10_000, 300.0);
    let long = mean_rate_packets(spec, ms(100), 10_000, 300.0);
    assert!(
        (short / long - 1.0).abs() < 0.10,
        "Libra rates {short:.0} vs {long:.0} packets/s"
    );
    let p: f64 = 1e-4;
    let predicted = (200.0 * (1.0 - p) / p).sqrt();
    assert!(
        short / predicted > 0.7 && short / predicted < 1.5,
        "{short:.0} vs eq. 5's {predicted:.0}"
    );

    let reno_short = mean_rate_packets("newreno", ms(10), 10_000, 40.0);
    let reno_long = mean_rate_packets("newreno", ms(100), 10_000, 40.0);
    assert!(
        reno_short / reno_long > 5.0,
        "NewReno rates {reno_short:.0} vs {reno_long:.0}"
    );
}

/// With capacity=auto, packet pairs through a 100 Mbit/s bottleneck converge
/// and Libra uses the CapProbe estimate.
#[test]
fn capprobe_supplies_the_capacity_through_a_real_bottleneck() {
    let env = Env::with_mss(MSS);
    let flow = FlowSetup {
        cca: build("libra", &env).unwrap(),
        base_rtt: ms(20),
        start: Time::ZERO,
        mss: MSS,
        loss: LossPattern::None,
        receive_window: 8 << 20,
    };
    let link = Bottleneck {
        rate_bps: 100e6,
        buffer_bytes: 250_000,
    };
    let mut model = Model::new(vec![flow], Some(link), ms(100));
    model.run_until(Time::from_secs_f64(5.0));
    let stats = model.cca(0).stats();
    let detail = |key: &str| {
        stats
            .details
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(detail("capacity_source"), StatValue::Text("capprobe"));
    let StatValue::Num(mbps) = detail("capacity_mbps") else {
        panic!()
    };
    assert!((mbps / 100.0 - 1.0).abs() < 0.05, "estimate {mbps} Mbit/s");
    // The flow itself uses the link.
    assert!(model.mean_goodput_bps(0, Time::from_secs_f64(2.0), Time::from_secs_f64(5.0)) > 80e6);
}

/// Until a pair converges the capacity comes from the documented fallback.
#[test]
fn fallback_source_is_reported_before_capprobe_converges() {
    let mut cca = libra(None, 10);
    assert_eq!(cca.capacity().1.label(), "window");
    let mut d = Driver::new(MSS);
    // ACKs spaced 5 ms apart: packets are never sent back to back, no pairs.
    for _ in 0..50 {
        d.round_trip(&mut cca, ms(20));
        d.now = d.now + ms(5);
    }
    assert_eq!(cca.capacity().1.label(), "delivery-rate");
    assert_eq!(cca.capprobe().pairs(), 0);
}

/// Feed one back-to-back pair (packets `pn`, `pn + 1`, sent 1 µs apart,
/// 20 ms RTT) whose ACKs arrive `gap` apart.
fn pair(cca: &mut Libra, pn: u64, start: Time, gap: Duration) {
    use tollgate_cca::{Ack, RttSample, SentPacket};
    let us = Duration::from_micros;
    for (i, at) in [(0, start), (1, start + us(1))] {
        let sent = SentPacket {
            packet_number: pn + i,
            bytes: MSS,
            bytes_in_flight: MSS * (i + 1),
        };
        cca.on_packet_sent(at, &sent);
    }
    for (i, at) in [(0, start + ms(20)), (1, start + ms(20) + gap)] {
        let ack = Ack {
            packet_number: pn + i,
            bytes: MSS,
            sent_time: start + us(i),
            rtt: RttSample::fixed(ms(20)),
            app_limited: false,
        };
        cca.on_ack(at, &ack);
    }
}

/// CapProbe never uses an estimate above the sender's own link rate (from
/// the driver's `Env`, or the `link_rate` parameter): a pair whose ACKs were
/// compressed to 4 µs (2 Gbit/s for 1,000 bytes) is rejected and counted.
#[test]
fn capprobe_rejects_estimates_above_the_link_rate() {
    let env = Env::with_mss(MSS).with_link_rate(Some(1e9));
    for (config, bounded) in [
        (LibraConfig::default(), true),
        (
            LibraConfig {
                link_rate_bps: Some(10e9),
                ..LibraConfig::default()
            },
            false,
        ),
    ] {
        let mut cca = Libra::new(config, &env);
        pair(&mut cca, 0, Time::ZERO, Duration::from_micros(4));
        let probe = cca.capprobe();
        let reason = tollgate_cca::capprobe::Reject::AboveLinkRate;
        assert_eq!(probe.rejected_for(reason), u64::from(bounded));
        assert_eq!(probe.pairs(), u64::from(!bounded));
        // A pair at 100 Mbit/s (80 µs for 1,000 bytes) is used either way.
        pair(&mut cca, 2, Time::ZERO + ms(30), Duration::from_micros(80));
        assert_eq!(cca.capprobe().pairs(), 1 + u64::from(!bounded));
    }
}

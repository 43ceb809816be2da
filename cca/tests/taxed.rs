//! Sender-side taxation: the tax modes and the detector gate.

mod common;

use common::{ms, Driver};
use tollgate_cca::newreno::{NewReno, NewRenoConfig};
use tollgate_cca::taxed::{TaxConfig, TaxMode, Taxed};
use tollgate_cca::{build, CongestionControl, Env, VariantId};

const MSS: u64 = 1000;

fn env(packets: u64) -> Env {
    Env {
        mss: MSS,
        initial_window: packets * MSS,
        link_rate_bps: None,
        seed: None,
    }
}

fn taxed(mode: TaxMode, detector: bool, packets: u64) -> Taxed {
    let base = Box::new(NewReno::new(NewRenoConfig::default(), &env(packets)));
    Taxed::new(
        base,
        TaxConfig {
            tau: 0.025,
            mode,
            detector,
            ..TaxConfig::default()
        },
    )
}

/// Growth mode, ungated: in congestion avoidance NewReno grows one MSS per RTT
/// and the tax takes 2.5 % of the grown window, so w' = (w + 1)(1 - tau); the
/// window settles at (1 - tau) / tau = 39 packets.
#[test]
fn growth_tax_on_newreno_follows_w_plus_one_times_one_minus_tau() {
    let mut cca = taxed(TaxMode::Growth, false, 40);
    let mut d = Driver::new(MSS);
    d.loss(&mut cca); // 20 packets, congestion avoidance
    assert_eq!(cca.window(), 20 * MSS);
    // Every growth event (one per window of ACKed bytes) is taxed: w' = (w + mss)(1 - tau).
    let mut events = 0;
    while events < 5 {
        let before = cca.window();
        d.round_trip(&mut cca, ms(50));
        if cca.window() != before {
            let expected = ((before + MSS) as f64 * 0.975) as u64;
            assert_eq!(cca.window(), expected, "growth event {events}");
            events += 1;
        }
    }
    for _ in 0..400 {
        d.ack_window(&mut cca, ms(50));
    }
    let settled = cca.window() as f64 / MSS as f64;
    assert!((settled - 39.0).abs() < 1.5, "settled at {settled}");
}

/// Gated by the detector: with a flat RTT the tax never applies; with a rising
/// RTT it does.
#[test]
fn detector_gates_the_tax() {
    let mut gated = taxed(TaxMode::Growth, true, 10);
    let mut plain = NewReno::new(NewRenoConfig::default(), &env(10));
    for cca in [&mut gated as &mut dyn CongestionControl, &mut plain] {
        let mut d = Driver::new(MSS);
        for _ in 0..4 {
            d.ack_window(cca, ms(40));
        }
    }
    assert_eq!(gated.window(), plain.window(), "flat RTT: no tax");

    let mut gated = taxed(TaxMode::Growth, true, 10);
    let mut plain = NewReno::new(NewRenoConfig::default(), &env(10));
    for cca in [&mut gated as &mut dyn CongestionControl, &mut plain] {
        let mut d = Driver::new(MSS);
        for i in 0..4 {
            d.ack_window(cca, ms(40 + 5 * i)); // queue building: RTT rises 5 ms per RTT
        }
    }
    assert!(
        gated.window() < plain.window() * 9 / 10,
        "{} vs {}",
        gated.window(),
        plain.window()
    );
}

/// Increment mode taxes only the growth: slow start grows by (1 - tau) per MSS acked.
#[test]
fn increment_mode_taxes_only_the_increment() {
    let mut cca = taxed(TaxMode::Increment, false, 10);
    let mut d = Driver::new(MSS);
    for _ in 0..10 {
        d.round_trip(&mut cca, ms(30));
    }
    let expected = 10.0 * MSS as f64 + 10.0 * MSS as f64 * 0.975;
    assert!(
        (cca.window() as f64 - expected).abs() <= 10.0,
        "{} vs {expected}",
        cca.window()
    );
}

/// Every-ACK mode taxes even ACKs that do not grow the window (here: ACKs of
/// packets sent before the recovery period began).
#[test]
fn every_ack_mode_taxes_without_growth() {
    let mut growth = taxed(TaxMode::Growth, false, 40);
    let mut every = taxed(TaxMode::EveryAck, false, 40);
    for cca in [&mut growth, &mut every] {
        let mut d = Driver::new(MSS);
        let early = d.now;
        d.now = d.now + ms(10);
        d.loss(cca);
        // An ACK for a packet sent before the loss: NewReno does not grow.
        let ack = tollgate_cca::Ack {
            packet_number: 0,
            bytes: MSS,
            sent_time: early,
            rtt: tollgate_cca::RttSample::fixed(ms(30)),
            app_limited: false,
        };
        cca.on_ack(d.now + ms(1), &ack);
    }
    assert_eq!(growth.window(), 20 * MSS);
    assert_eq!(every.window(), 19_500);
}

/// RTT-scaled mode: tau = rtt_scale / RTT capped at 5 %: 1 % at 100 ms, 5 % at 10 ms.
#[test]
fn rtt_scaled_mode_taxes_short_rtts_harder() {
    for (rtt, tau) in [(100u64, 0.01), (10, 0.05)] {
        let mut cca = taxed(TaxMode::RttScaled, false, 10);
        let mut d = Driver::new(MSS);
        d.round_trip(&mut cca, ms(rtt));
        let expected = ((11 * MSS) as f64 * (1.0 - tau)) as u64;
        assert_eq!(cca.window(), expected, "RTT {rtt} ms");
    }
}

#[test]
fn taxed_variant_ids_and_spec_strings() {
    let env = Env::default();
    let cca = build("taxed(cubic, tau=0.05, mode=increment, detector=off)", &env).unwrap();
    assert_eq!(cca.variant(), VariantId::CUBIC.taxed());
    assert_eq!(cca.variant().dscp(), 34);
    assert_eq!(cca.variant().to_string(), "taxed(cubic)");
    let e = build("taxed(cubic, mode=sometimes)", &env).unwrap_err();
    assert!(
        e.to_string()
            .contains("growth|every-ack|increment|rtt-scaled"),
        "{e}"
    );
}

/// `per=ack`: one levy per ACK frame. In slow start, ACK frames covering two
/// packets grow the window by two segments per levy, so growth (2 MSS) and
/// tax (tau w) balance near 2 (1 - tau) / tau = 78 packets; with `per=packet`
/// (one levy per packet, 1 MSS each) near 39. Frames of one packet levy the
/// same under both.
#[test]
fn per_ack_frame_levy_balances_at_twice_the_window_under_two_packet_acks() {
    use tollgate_cca::{Ack, AckBatch, RttSample, SentPacket, Time};
    let settle = |spec: &str, per_frame: u64| {
        let mut cca = build(spec, &env(10)).unwrap();
        let (mut now, mut pn) = (Time::ZERO, 0u64);
        for _ in 0..200 {
            // One window sent, then acknowledged in frames of `per_frame` packets.
            let first = pn;
            for _ in 0..cca.window() / MSS {
                let sent = SentPacket {
                    packet_number: pn,
                    bytes: MSS,
                    bytes_in_flight: MSS,
                };
                cca.on_packet_sent(now, &sent);
                pn += 1;
            }
            for frame in (first..pn).collect::<Vec<_>>().chunks(per_frame as usize) {
                now = now + ms(1);
                for &p in frame {
                    let ack = Ack {
                        packet_number: p,
                        bytes: MSS,
                        sent_time: now,
                        rtt: RttSample::fixed(ms(50)),
                        app_limited: false,
                    };
                    cca.on_ack(now, &ack);
                }
                let batch = AckBatch {
                    bytes_in_flight: 0,
                    app_limited: false,
                    largest_acked: frame.last().copied(),
                };
                cca.on_ack_batch_end(now, &batch);
            }
        }
        cca.window() as f64 / MSS as f64
    };
    let per_packet = settle("taxed(newreno, detector=off)", 2);
    let per_ack = settle("taxed(newreno, detector=off, per=ack)", 2);
    assert!(
        (37.0..=41.0).contains(&per_packet),
        "per packet: {per_packet}"
    );
    assert!((75.0..=80.0).contains(&per_ack), "per ACK frame: {per_ack}");
    let single = settle("taxed(newreno, detector=off, per=ack)", 1);
    assert!(
        (37.0..=41.0).contains(&single),
        "one-packet frames: {single}"
    );
}

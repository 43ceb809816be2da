//! NewReno (RFC 9002) and CUBIC (RFC 9438) behave as specified.

mod common;

use common::{ms, Driver};
use tollgate_cca::cubic::{Cubic, CubicConfig};
use tollgate_cca::newreno::{NewReno, NewRenoConfig};
use tollgate_cca::{CongestionControl, CongestionEvent, CongestionKind, Env, Time};

const MSS: u64 = 1000;

fn env(initial_packets: u64) -> Env {
    Env {
        mss: MSS,
        initial_window: initial_packets * MSS,
        link_rate_bps: None,
        seed: None,
    }
}

#[test]
fn newreno_slow_start_doubles_per_rtt() {
    let mut cca = NewReno::new(NewRenoConfig::default(), &env(10));
    let mut d = Driver::new(MSS);
    d.ack_window(&mut cca, ms(50));
    assert_eq!(cca.window(), 20 * MSS);
    d.ack_window(&mut cca, ms(50));
    assert_eq!(cca.window(), 40 * MSS);
}

#[test]
fn newreno_halves_once_per_loss_event_and_grows_one_mss_per_rtt() {
    let mut cca = NewReno::new(NewRenoConfig::default(), &env(100));
    let mut d = Driver::new(MSS);
    // Three losses of packets sent before the first reduction: one reduction.
    let sent_before = d.now;
    for i in 0..3 {
        let event = CongestionEvent {
            kind: CongestionKind::Loss,
            sent_time: sent_before,
            lost_bytes: MSS,
            persistent_congestion: false,
        };
        cca.on_congestion_event(sent_before + ms(1 + i), &event);
    }
    assert_eq!(cca.window(), 50 * MSS);
    assert_eq!(cca.stats().ssthresh, Some(50 * MSS));
    d.now = sent_before + ms(10);
    // Congestion avoidance: +1 MSS per window of ACKs, for 10 RTTs.
    for rtt in 1..=10 {
        d.ack_window(&mut cca, ms(50));
        assert_eq!(cca.window(), (50 + rtt) * MSS, "after RTT {rtt}");
    }
    // A loss of a packet sent after recovery began is a new event.
    d.loss(&mut cca);
    assert_eq!(cca.window(), 30 * MSS);
}

#[test]
fn newreno_persistent_congestion_collapses_to_two_segments() {
    let mut cca = NewReno::new(NewRenoConfig::default(), &env(40));
    let event = CongestionEvent {
        kind: CongestionKind::Loss,
        sent_time: Time::from_millis(1),
        lost_bytes: 10 * MSS,
        persistent_congestion: true,
    };
    cca.on_congestion_event(Time::from_millis(500), &event);
    assert_eq!(cca.window(), 2 * MSS);
}

/// RFC 9438 §4.2: after a loss at W_max = 100 segments, cwnd = 70 segments and
/// K = cbrt((100 - 70) / 0.4) s; the window then tracks W_cubic(t + RTT).
#[test]
fn cubic_window_follows_w_cubic_after_a_loss() {
    let mut cca = Cubic::new(CubicConfig::default(), &env(100));
    let mut d = Driver::new(MSS);
    d.loss(&mut cca);
    assert_eq!(cca.window(), 70 * MSS);
    assert_eq!(cca.w_max(), 100.0);
    let rtt = ms(100);
    let epoch = d.now;
    d.ack_window(&mut cca, rtt);
    let k = (30.0f64 / 0.4).cbrt();
    assert!((cca.k() - k).abs() < 1e-9, "K = {}", cca.k());
    let mut checked = 0;
    // Until t = 5 s the Reno estimate (70 + 0.53 segments per RTT) stays below
    // the curve; after that §4.3 switches alpha to 1 and the Reno-friendly
    // region legitimately takes over.
    while d.now.saturating_since(epoch) < ms(5000) {
        d.ack_window(&mut cca, rtt);
        let t = d.now.saturating_since(epoch).as_secs_f64();
        let expected = 0.4 * (t - k).powi(3) + 100.0;
        let actual = cca.window() as f64 / MSS as f64;
        // One RTT of lag plus integer rounding: within 3 %.
        assert!(
            (actual / expected - 1.0).abs() < 0.03,
            "t={t:.2}: cwnd {actual:.1} vs W_cubic {expected:.1}"
        );
        checked += 1;
    }
    assert!(checked > 40);
    // Past K the window leaves the W_max plateau.
    for _ in 0..15 {
        d.ack_window(&mut cca, rtt);
    }
    assert!(cca.window() > 103 * MSS, "{}", cca.window());
}

#[test]
fn cubic_fast_convergence_lowers_w_max_when_loss_comes_early() {
    let mut cca = Cubic::new(CubicConfig::default(), &env(100));
    let mut d = Driver::new(MSS);
    d.loss(&mut cca);
    d.ack_window(&mut cca, ms(100));
    let before = cca.window() as f64 / MSS as f64;
    assert!(before < 100.0);
    d.loss(&mut cca);
    assert!(
        (cca.w_max() - before * 1.7 / 2.0).abs() < 1e-6,
        "w_max {}",
        cca.w_max()
    );
    let mut slow = Cubic::new(
        CubicConfig {
            fast_convergence: false,
            ..CubicConfig::default()
        },
        &env(100),
    );
    let mut d = Driver::new(MSS);
    d.loss(&mut slow);
    d.ack_window(&mut slow, ms(100));
    let before = slow.window() as f64 / MSS as f64;
    d.loss(&mut slow);
    assert_eq!(slow.w_max(), before);
}

/// §4.3: with a small window and a short RTT the cubic curve is slower than
/// Reno-with-beta-0.7, so the window grows like the Reno estimate.
#[test]
fn cubic_reno_friendly_region_keeps_pace_with_aimd() {
    let mut friendly = Cubic::new(CubicConfig::default(), &env(20));
    let mut pure = Cubic::new(
        CubicConfig {
            reno_friendly: false,
            ..CubicConfig::default()
        },
        &env(20),
    );
    for cca in [&mut friendly, &mut pure] {
        let mut d = Driver::new(MSS);
        d.loss(cca);
        for _ in 0..40 {
            d.ack_window(cca, ms(2));
        }
    }
    // 40 RTTs at alpha = 3*0.3/1.7 ~ 0.53 segments per RTT: ~ +21 segments.
    let friendly_seg = friendly.window() as f64 / MSS as f64;
    let pure_seg = pure.window() as f64 / MSS as f64;
    assert!(friendly_seg > 14.0 + 15.0, "friendly {friendly_seg}");
    assert!(
        pure_seg < friendly_seg - 5.0,
        "pure {pure_seg} friendly {friendly_seg}"
    );
}

/// HyStart (`hystart=on`): on a 40 ms path whose bottleneck holds 100
/// packets in flight (more sit in a queue and add delay, up to 4 BDP), slow
/// start ends in the first round whose RTT exceeds 40 ms + 5 ms (the round
/// sent at a window of 160 packets, RTT 64 ms), long before the queue
/// overflows; without HyStart the window keeps doubling past 4 BDP.
#[test]
fn cubic_hystart_leaves_slow_start_when_queueing_delay_appears() {
    use tollgate_cca::{Ack, RttSample, SentPacket};
    for hystart in [true, false] {
        let mut cca = Cubic::new(
            CubicConfig {
                hystart,
                ..CubicConfig::default()
            },
            &env(10),
        );
        let (mut now, mut pn) = (Time::ZERO, 0u64);
        for _ in 0..7 {
            // Send one window, then take its ACKs, one per packet, over one RTT.
            let w = cca.window() / MSS;
            let rtt = ms(40 * w.max(100) / 100);
            let first = pn;
            for _ in 0..w {
                let sent = SentPacket {
                    packet_number: pn,
                    bytes: MSS,
                    bytes_in_flight: (pn - first + 1) * MSS,
                };
                cca.on_packet_sent(now, &sent);
                pn += 1;
            }
            for p in first..pn {
                now = now + rtt / w as u32;
                let ack = Ack {
                    packet_number: p,
                    bytes: MSS,
                    sent_time: now,
                    rtt: RttSample::fixed(rtt),
                    app_limited: false,
                };
                cca.on_ack(now, &ack);
            }
        }
        let ssthresh = cca.stats().ssthresh;
        if hystart {
            let exit = ssthresh.expect("HyStart set ssthresh") / MSS;
            assert!(
                (160..=180).contains(&exit),
                "left slow start at {exit} packets"
            );
            assert!(cca.window() < 250 * MSS, "{}", cca.window() / MSS);
        } else {
            assert_eq!(ssthresh, None);
            assert_eq!(cca.window(), 1280 * MSS);
        }
    }
}

//! The port pipeline: the shaper's output rate and the delay line's added
//! delay match the configuration within one packet time; accounting is exact.

use std::time::Duration;

use tollgate_cca::{Time, VariantId};
use tollgate_router::cebinae::CebinaeConfig;
use tollgate_router::choke::ChokeConfig;
use tollgate_router::classify::Classifier;
use tollgate_router::codel::CodelConfig;
use tollgate_router::delay::DelayConfig;
use tollgate_router::droptail::{DropTail, DropTailConfig};
use tollgate_router::dualpi2::DualPi2Config;
use tollgate_router::fq::FqConfig;
use tollgate_router::fq_codel::FqCodelConfig;
use tollgate_router::packet::{build, FlowKey, PROTO_UDP};
use tollgate_router::port::{Port, Sink};
use tollgate_router::red::RedConfig;
use tollgate_router::rrmqs::RrmqsConfig;
use tollgate_router::shaper::ShaperConfig;
use tollgate_router::{AnyQdisc, DisciplineConfig, DropReason, PacketMeta, Qdisc};

use crate::common::vpkt;

#[derive(Default)]
struct Record {
    tx: Vec<(Time, PacketMeta)>,
    dropped: Vec<(PacketMeta, DropReason)>,
}

impl Sink<PacketMeta> for Record {
    fn transmit(&mut self, p: PacketMeta, now: Time) {
        self.tx.push((now, p));
    }
    fn drop(&mut self, p: PacketMeta, reason: DropReason) {
        self.dropped.push((p, reason));
    }
}

fn port(delay: DelayConfig, rate_bps: f64, burst: u64) -> Port<PacketMeta, DropTail<PacketMeta>> {
    let q = DropTail::new(&DropTailConfig::default()).unwrap();
    Port::new(
        Classifier::dscp(),
        9,
        &delay,
        q,
        &ShaperConfig {
            rate_bps,
            burst_bytes: burst,
        },
    )
    .unwrap()
}

/// Run the port's event loop until it is idle.
fn drain(p: &mut Port<PacketMeta, DropTail<PacketMeta>>, sink: &mut Record, mut now: Time) {
    p.poll(now, sink);
    while let Some(next) = p.next_event() {
        now = next.max(now);
        p.poll(now, sink);
    }
}

#[test]
fn shaper_rate_and_delay_match_configuration() {
    let delay = Duration::from_millis(10);
    let rate = 10e6; // 1500 B take 1.2 ms
    let mut p = port(
        DelayConfig {
            delay,
            ..DelayConfig::default()
        },
        rate,
        1500,
    );
    let mut sink = Record::default();
    let n = 200u64;
    for i in 0..n {
        p.receive(vpkt(i, VariantId::UNMARKED, 1500), Time::ZERO, &mut sink);
    }
    drain(&mut p, &mut sink, Time::ZERO);
    assert_eq!(sink.tx.len(), n as usize);
    let pkt_time = 1500.0 * 8.0 / rate * 1e9;
    // The first packet leaves after exactly the propagation delay (the bucket is full).
    let first = sink.tx[0].0.as_nanos() as f64;
    assert!(
        (first - delay.as_nanos() as f64).abs() <= pkt_time,
        "first at {first}"
    );
    // Then one packet per packet time: each departure within one packet time of the ideal.
    for (k, (t, _)) in sink.tx.iter().enumerate() {
        let ideal = delay.as_nanos() as f64 + k as f64 * pkt_time;
        assert!(
            (t.as_nanos() as f64 - ideal).abs() <= pkt_time,
            "packet {k}: {t:?} vs {ideal}"
        );
    }
    let span = (sink.tx[n as usize - 1].0.as_nanos() - sink.tx[0].0.as_nanos()) as f64 / 1e9;
    let measured = (n - 1) as f64 * 1500.0 * 8.0 / span;
    assert!((measured - rate).abs() / rate < 0.01, "rate {measured}");
    assert_eq!(p.counters().dequeued, n);
}

#[test]
fn per_class_delay_and_accounting() {
    let cfg = DelayConfig {
        delay: Duration::from_millis(5),
        class_delays: vec![(VariantId::CUBIC, Duration::from_millis(50))],
        ..DelayConfig::default()
    };
    let mut p = port(cfg, 1e9, 100_000);
    let mut sink = Record::default();
    p.receive(vpkt(1, VariantId::CUBIC, 100), Time::ZERO, &mut sink);
    p.receive(vpkt(2, VariantId::NEWRENO, 100), Time::ZERO, &mut sink);
    drain(&mut p, &mut sink, Time::ZERO);
    let at = |tag| sink.tx.iter().find(|(_, m)| m.tag == tag).unwrap().0;
    assert_eq!(at(2), Time::from_millis(5));
    assert_eq!(at(1), Time::from_millis(50));

    // Frames through classify: a bad frame is counted as received and dropped.
    let key = FlowKey::new(
        "10.0.0.1".parse().unwrap(),
        "10.0.0.2".parse().unwrap(),
        PROTO_UDP,
        1,
        2,
    );
    let frame = build::udp4(&key, VariantId::LIBRA.dscp() << 2, 100);
    let meta = p.classify(&frame).unwrap();
    assert_eq!(meta.variant, VariantId::LIBRA);
    assert_eq!(meta.len as usize, frame.len());
    assert!(p.classify(&frame[..20]).is_err());
    p.receive(meta, Time::from_millis(60), &mut sink);
    drain(&mut p, &mut sink, Time::from_millis(60));
    let c = p.counters();
    assert_eq!(c.received, 4);
    assert_eq!(c.dropped_for(DropReason::Unparsable), 1);
    assert_eq!(
        c.received,
        c.dequeued + c.dropped_total() + p.in_flight() as u64
    );
    assert_eq!(p.parse_stats().truncated, 1);
    assert_eq!(p.qdisc().counters().dequeued, 3);
}

/// Bursts of 32 64-byte frames through RED (default thresholds 5/15) at
/// 10 Gbit/s, the way a dataplane takes them from an RX queue, at half and
/// at twice the shaped rate, through a port with `delay` (its delay line
/// releases a burst at a time in `poll`). Returns (RED's drops, the most
/// packets the discipline held after a burst, bits per second transmitted).
fn red_bursts(load: f64, per_packet_send: bool, delay: Duration) -> (u64, usize, f64) {
    use tollgate_router::red::Red;
    let rate = 10e9;
    let red = RedConfig {
        link_rate_bps: rate,
        ..RedConfig::default()
    };
    let mut p = Port::new(
        Classifier::dscp(),
        9,
        &DelayConfig {
            delay,
            ..DelayConfig::default()
        },
        Red::<PacketMeta>::new(&red).unwrap(),
        &ShaperConfig {
            rate_bps: rate,
            burst_bytes: 125_000,
        },
    )
    .unwrap();
    let mut sink = Record::default();
    let (burst, len) = (32u64, 64u32);
    let gap_ns = (burst * u64::from(len) * 8) as f64 / (rate * load) * 1e9;
    let bursts = 20_000u64;
    let mut most = 0;
    for b in 0..bursts {
        let now = Time::from_nanos((b as f64 * gap_ns) as u64);
        for i in 0..burst {
            let pkt = vpkt(b * burst + i, VariantId::UNMARKED, len);
            if per_packet_send {
                p.receive_and_send(pkt, now, &mut sink);
            } else {
                p.receive(pkt, now, &mut sink);
            }
        }
        most = most.max(p.qdisc().len());
        p.poll(now, &mut sink);
    }
    // Keep polling, at the same pace, until the delay line is empty.
    let mut b = bursts;
    while p.in_flight() > 0 && b < 2 * bursts {
        p.poll(Time::from_nanos((b as f64 * gap_ns) as u64), &mut sink);
        b += 1;
    }
    let c = p.counters();
    assert_eq!(
        c.received,
        c.dequeued + c.dropped_total() + p.in_flight() as u64
    );
    let span = (bursts - 1) as f64 * gap_ns / 1e9;
    let bits: u64 = sink.tx.iter().map(|(_, m)| u64::from(m.len) * 8).sum();
    (c.dropped_total(), most, bits as f64 / span)
}

#[test]
fn an_rx_burst_on_an_idle_link_is_not_a_queue() {
    // Half the shaped rate: the link is idle between bursts. Received a
    // burst at a time and polled after it, the discipline holds the whole
    // burst and RED's average reads it as congestion.
    let none = Duration::ZERO;
    let (drops, most, _) = red_bursts(0.5, false, none);
    assert_eq!(most, 32);
    assert!(drops > 1_000, "RED dropped {drops} batched packets");
    // Sent as they arrive (receive_and_send): nothing waits, nothing drops.
    let (drops, most, bps) = red_bursts(0.5, true, none);
    assert_eq!((drops, most), (0, 0));
    assert!((bps - 5e9).abs() / 5e9 < 0.01, "{bps} bit/s");
    // Twice the shaped rate: the queue is real; RED holds it between its
    // thresholds and drops the excess, and the link stays at its rate.
    let (drops, most, bps) = red_bursts(2.0, true, none);
    assert!(most > 5, "queue {most}");
    assert!(drops > 100_000, "RED dropped {drops}");
    assert!((bps - 10e9).abs() / 10e9 < 0.01, "{bps} bit/s");
}

#[test]
fn a_burst_leaving_the_delay_line_on_an_idle_link_is_not_a_queue() {
    // The same bursts through a port with a 1 ms or a 10 us delay: `poll`
    // releases a whole burst from the delay line at once. At half the
    // shaped rate nothing may wait or drop; at twice the rate RED still
    // works.
    for delay in [Duration::from_millis(1), Duration::from_micros(10)] {
        let (drops, _, bps) = red_bursts(0.5, true, delay);
        assert_eq!(drops, 0, "delay {delay:?}");
        assert!((bps - 5e9).abs() / 5e9 < 0.01, "{bps} bit/s");
        let (drops, _, bps) = red_bursts(2.0, true, delay);
        assert!(drops > 100_000, "RED dropped {drops}");
        assert!((bps - 10e9).abs() / 10e9 < 0.01, "{bps} bit/s");
    }
}

#[test]
fn rule_delay_applies_to_exactly_its_packets() {
    // Two flows of one variant get different delays from 5-tuple rules;
    // a third flow (and the reverse direction) keeps the port's delay, and
    // a CUBIC-marked flow without a rule keeps its variant's class delay.
    use tollgate_router::classify::Rule;
    let ms = Duration::from_millis;
    let key = |src_port| {
        FlowKey::new(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            PROTO_UDP,
            src_port,
            443,
        )
    };
    let rules = vec![
        Rule {
            src_ports: Some((1001, 1001)),
            ..Rule::delay(ms(10))
        },
        Rule {
            src_ports: Some((1002, 1002)),
            ..Rule::delay(ms(100))
        },
    ];
    let cfg = DelayConfig {
        delay: ms(3),
        class_delays: vec![(VariantId::CUBIC, ms(40))],
        ..DelayConfig::default()
    };
    let mut p = Port::new(
        Classifier::new(rules, true),
        1,
        &cfg,
        DropTail::<PacketMeta>::new(&DropTailConfig::default()).unwrap(),
        &ShaperConfig {
            rate_bps: 1e9,
            burst_bytes: 100_000,
        },
    )
    .unwrap();
    let newreno = VariantId::NEWRENO.dscp() << 2;
    let cubic = VariantId::CUBIC.dscp() << 2;
    let cases = [
        (key(1001), newreno, ms(10)),
        (key(1002), newreno, ms(100)),
        (key(1003), newreno, ms(3)),
        (key(1004), cubic, ms(40)),
        // A rule delay wins over the variant's class delay.
        (key(1002), cubic, ms(100)),
        // The reverse direction of flow 1001 (ports swapped) has no rule.
        (
            FlowKey::new(
                "10.0.0.2".parse().unwrap(),
                "10.0.0.1".parse().unwrap(),
                PROTO_UDP,
                443,
                1001,
            ),
            newreno,
            ms(3),
        ),
    ];
    let mut sink = Record::default();
    let start = Time::from_millis(1);
    for (tag, (k, tos, _)) in cases.iter().enumerate() {
        let mut meta = p.classify(&build::udp4(k, *tos, 100)).unwrap();
        meta.tag = tag as u64;
        p.receive(meta, start, &mut sink);
    }
    drain(&mut p, &mut sink, start);
    assert_eq!(sink.tx.len(), cases.len());
    for (tag, (_, _, want)) in cases.iter().enumerate() {
        let (at, m) = sink.tx.iter().find(|(_, m)| m.tag == tag as u64).unwrap();
        assert_eq!(*at, start + *want, "case {tag}: {m:?}");
    }
    let c = p.counters();
    assert_eq!(c.received, c.dequeued + c.dropped_total());
}

#[test]
fn compact_classification_matches_the_full_one() {
    // classify_compact (IPv4 fast path without rules, general path with
    // rules or other shapes) gives the same hash, variant, ECN, length and
    // flow end as classify, and counts the same parse outcomes; on a port
    // whose discipline does not read the flow hash (DropTail, RED) it skips
    // the hash (0) and gives the rest the same.
    use tollgate_router::classify::Rule;
    use tollgate_router::packet::PROTO_TCP;
    let mut frames = Vec::new();
    for i in 0..64u32 {
        let key = FlowKey::new(
            std::net::Ipv4Addr::from(0x0A00_0000 | i).into(),
            "10.9.9.9".parse().unwrap(),
            PROTO_UDP,
            1000 + i as u16,
            53,
        );
        let tos = ((i as u8 % 64) << 2) | (i as u8 & 3);
        frames.push(build::udp4(&key, tos, i as usize));
        let mut t = build::udp4(
            &FlowKey {
                proto: PROTO_TCP,
                ..key
            },
            tos,
            20 + i as usize,
        );
        t[23] = PROTO_TCP;
        t[46] = 5 << 4;
        t[47] = if i % 3 == 0 { 0x01 } else { 0x10 };
        frames.push(t);
    }
    frames.push(vec![0u8; 10]); // truncated
    let mut arp = build::udp4(&FlowKey::default(), 0, 10);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    frames.push(arp);
    let disciplines = [
        (DisciplineConfig::DropTail(DropTailConfig::default()), false),
        (DisciplineConfig::Red(RedConfig::default()), false),
        (DisciplineConfig::Choke(ChokeConfig::default()), true),
        (DisciplineConfig::Cebinae(CebinaeConfig::default()), true),
        (DisciplineConfig::Rrmqs(RrmqsConfig::default()), true),
        (DisciplineConfig::Fq(FqConfig::default()), true),
        (DisciplineConfig::Codel(CodelConfig::default()), false),
        (DisciplineConfig::FqCodel(FqCodelConfig::default()), true),
        (DisciplineConfig::DualPi2(DualPi2Config::default()), false),
    ];
    for ((discipline, reads_hash), rules) in disciplines.iter().flat_map(|d| {
        [
            Vec::new(),
            vec![Rule::any(VariantId::from_dscp(7).unwrap())],
        ]
        .map(|r| (d, r))
    }) {
        let mk = || {
            Port::new(
                Classifier::new(rules.clone(), true),
                9,
                &DelayConfig::default(),
                AnyQdisc::<PacketMeta>::new(discipline).unwrap(),
                &ShaperConfig::default(),
            )
            .unwrap()
        };
        let (mut a, mut b) = (mk(), mk());
        assert_eq!(a.qdisc().reads_flow_hash(), *reads_hash);
        let mut hashed = 0;
        for f in &frames {
            let full = a.classify(f);
            let compact = b.classify_compact(f);
            match (full, compact) {
                (Ok(m), Ok(c)) => {
                    hashed += usize::from(m.flow_hash != 0);
                    assert_eq!(
                        (
                            if *reads_hash { m.flow_hash } else { 0 },
                            m.variant,
                            m.ecn,
                            m.len,
                            m.flow_end,
                            m.delay_class
                        ),
                        (
                            c.flow_hash,
                            c.variant,
                            c.ecn,
                            c.len,
                            c.flow_end,
                            c.delay_class
                        )
                    );
                    assert_eq!(c.l3_offset, 14);
                }
                (Err(x), Err(y)) => assert_eq!(x, y),
                (x, y) => panic!("classify {x:?} but classify_compact {y:?}"),
            }
        }
        assert_eq!(a.parse_stats(), b.parse_stats());
        assert_eq!(a.counters(), b.counters());
        // The full classification always hashes, so the skipped hash above
        // is a real difference.
        assert!(hashed >= 128, "{hashed} frames hashed");
    }
}

//! Property tests: the parser never panics on arbitrary bytes, and every
//! discipline keeps exact accounting (received = dequeued + dropped + queued,
//! in packets and bytes, and every handle comes back exactly once) under
//! arbitrary operations with arbitrary, non-monotonic timestamps.

use std::collections::HashSet;
use std::time::Duration;

use proptest::prelude::*;
use tollgate_cca::{Time, VariantId};
use tollgate_router::cebinae::CebinaeConfig;
use tollgate_router::choke::ChokeConfig;
use tollgate_router::codel::{CodelConfig, CodelParams};
use tollgate_router::droptail::{DropTailConfig, Limit};
use tollgate_router::dualpi2::DualPi2Config;
use tollgate_router::fq::FqConfig;
use tollgate_router::fq_codel::FqCodelConfig;
use tollgate_router::packet::{build, parse_ethernet, parse_ip, Ecn, FlowKey};
use tollgate_router::red::RedConfig;
use tollgate_router::rrmqs::RrmqsConfig;
use tollgate_router::{AnyQdisc, DisciplineConfig, PacketMeta, Qdisc, Verdict};

fn configs() -> Vec<DisciplineConfig> {
    let red = RedConfig {
        limit: 16,
        min_th: 2.0,
        max_th: 6.0,
        weight: 0.5,
        ecn: true,
        adaptive: true,
        adapt_interval: Duration::from_micros(50),
        ..RedConfig::default()
    };
    vec![
        DisciplineConfig::DropTail(DropTailConfig {
            limit: Limit::Bytes(4000),
            ..Default::default()
        }),
        DisciplineConfig::Red(red),
        DisciplineConfig::Red(RedConfig {
            byte_mode: true,
            min_th: 500.0,
            max_th: 3000.0,
            ..red
        }),
        DisciplineConfig::Choke(ChokeConfig { red }),
        DisciplineConfig::Cebinae(CebinaeConfig {
            max_size: 8,
            dt: Duration::from_micros(20),
            l: Duration::from_micros(5),
            line_rate_bps: 1e9,
            cache_slots: 4,
            ..CebinaeConfig::default()
        }),
        DisciplineConfig::Rrmqs(RrmqsConfig {
            variants: vec![VariantId::NEWRENO, VariantId::CUBIC],
            packets_per_queue: 3,
            main_limit: 10,
            window: Duration::from_micros(30),
            flow_idle_timeout: Duration::from_micros(10),
            rrmqs_probability: Some(0.5),
            ..RrmqsConfig::default()
        }),
        DisciplineConfig::Fq(FqConfig {
            limit: 12,
            buckets: 4,
            quantum: 300,
        }),
        DisciplineConfig::Codel(CodelConfig {
            limit: 12,
            codel: CodelParams {
                target: Duration::from_micros(5),
                interval: Duration::from_micros(40),
                ecn: true,
                mtu: 1514,
            },
        }),
        DisciplineConfig::FqCodel(FqCodelConfig {
            limit: 12,
            memory_limit: 6000,
            flows: 4,
            quantum: 300,
            drop_batch: 3,
            codel: CodelParams {
                target: Duration::from_micros(5),
                interval: Duration::from_micros(40),
                ecn: true,
                mtu: 300,
            },
        }),
        DisciplineConfig::DualPi2(DualPi2Config {
            limit: 12,
            target: Duration::from_micros(5),
            tupdate: Duration::from_micros(8),
            step_thresh: Duration::from_micros(2),
            tshift: Duration::from_micros(10),
            ..DualPi2Config::default()
        }),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        flow: u8,
        len: u16,
        variant: u8,
        ecn: u8,
        fin: bool,
        t: u64,
    },
    Dequeue {
        t: u64,
    },
    Poll {
        t: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    // Times from a small range (many collisions and reversals) or anywhere in u64.
    let time = prop_oneof![0u64..200_000, any::<u64>()];
    prop_oneof![
        4 => (any::<u8>(), 0u16..2000, 0u8..4, 0u8..4, any::<bool>(), time.clone())
            .prop_map(|(flow, len, variant, ecn, fin, t)| Op::Enqueue { flow: flow % 8, len, variant, ecn, fin, t }),
        3 => time.clone().prop_map(|t| Op::Dequeue { t }),
        1 => time.prop_map(|t| Op::Poll { t }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(info) = parse_ethernet(&bytes) {
            prop_assert!(usize::from(info.l4_offset) <= bytes.len());
            prop_assert!(info.ip_len as usize + usize::from(info.l3_offset) <= bytes.len());
        }
        let _ = parse_ip(&bytes);
    }

    #[test]
    fn parser_survives_mutated_valid_frames(
        edits in proptest::collection::vec((0usize..80, any::<u8>()), 0..6),
        cut in 0usize..90,
    ) {
        let key = FlowKey::new("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 17, 1, 2);
        let mut f = build::udp4(&key, 0b10, 30);
        for (i, b) in edits {
            if i < f.len() { f[i] = b; }
        }
        f.truncate(cut.max(1));
        if let Ok(info) = parse_ethernet(&f) {
            prop_assert!(usize::from(info.l4_offset) <= f.len());
            let mut g = f.clone();
            let _ = tollgate_router::packet::set_ce_in_frame(&mut g, &info);
        }
    }

    #[test]
    fn accounting_is_exact_under_arbitrary_operations(ops in proptest::collection::vec(op(), 1..300)) {
        for cfg in configs() {
            let mut q = AnyQdisc::<PacketMeta>::new(&cfg).unwrap();
            let mut outstanding = HashSet::new();
            let mut returned = 0u64;
            let give_back = |p: PacketMeta, outstanding: &mut HashSet<u64>| {
                assert!(outstanding.remove(&p.tag), "{}: handle {} returned twice", cfg.name(), p.tag);
            };
            for (seq, o) in ops.iter().enumerate() {
                match *o {
                    Op::Enqueue { flow, len, variant, ecn, fin, t } => {
                        let p = PacketMeta {
                            len: u32::from(len),
                            flow_hash: u64::from(flow).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                            variant: VariantId::from_dscp(variant).unwrap(),
                            ecn: Ecn::from_bits(ecn),
                            flow_end: fin,
                            delay_class: 0,
                            tag: seq as u64,
                        };
                        outstanding.insert(p.tag);
                        if let Verdict::Dropped { packet, victim, .. } = q.enqueue(p, Time::from_nanos(t)) {
                            give_back(packet, &mut outstanding);
                            returned += 1;
                            if let Some(v) = victim {
                                give_back(v, &mut outstanding);
                                returned += 1;
                            }
                        }
                    }
                    Op::Dequeue { t } => {
                        if let Some(p) = q.dequeue(Time::from_nanos(t)) {
                            give_back(p, &mut outstanding);
                            returned += 1;
                        }
                    }
                    Op::Poll { t } => q.poll(Time::from_nanos(t)),
                }
                while let Some((p, _)) = q.take_dropped() {
                    give_back(p, &mut outstanding);
                    returned += 1;
                }
                let c = *q.counters();
                prop_assert_eq!(c.received, c.dequeued + c.dropped_total() + q.len() as u64, "{}", cfg.name());
                prop_assert_eq!(c.received_bytes, c.dequeued_bytes + c.dropped_bytes_total() + q.bytes(), "{}", cfg.name());
                prop_assert_eq!(outstanding.len(), q.len(), "{}", cfg.name());
                prop_assert_eq!(returned, c.dequeued + c.dropped_total());
            }
        }
    }
}

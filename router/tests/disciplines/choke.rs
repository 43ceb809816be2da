//! CHOKe: matched pairs are dropped together; a responsive low-rate flow keeps
//! a far larger share against an unresponsive flow than under DropTail.

use tollgate_cca::rng;
use tollgate_cca::Time;
use tollgate_router::choke::{Choke, ChokeConfig};
use tollgate_router::droptail::{DropTail, DropTailConfig, Limit};
use tollgate_router::red::RedConfig;
use tollgate_router::{DropReason, PacketMeta, Qdisc, Verdict};

use crate::common::{assert_accounting, pkt};

fn cfg() -> ChokeConfig {
    ChokeConfig {
        red: RedConfig {
            limit: 100,
            min_th: 10.0,
            max_th: 40.0,
            weight: 0.02,
            max_p: 0.1,
            gentle: false,
            seed: 7,
            ..RedConfig::default()
        },
    }
}

#[test]
fn matched_pairs_are_dropped_together() {
    // w = 1 (avg = queue length) and a far max_th: above min_th only the match test acts.
    let c = ChokeConfig {
        red: RedConfig {
            weight: 1.0,
            max_p: 1e-9,
            min_th: 29.5,
            max_th: 1e6,
            ..cfg().red
        },
    };
    let mut q = Choke::new(&c).unwrap();
    for _ in 0..30 {
        assert!(
            q.enqueue(pkt(1, 500), Time::ZERO).is_queued(),
            "below min_th everything is admitted"
        );
    }
    // Every queued packet is flow 1: above min_th each arrival of flow 1 matches its victim.
    for _ in 0..5 {
        match q.enqueue(pkt(1, 500), Time::ZERO) {
            Verdict::Dropped {
                reason: DropReason::ChokeMatch,
                packet,
                victim: Some(v),
            } => {
                assert_eq!((packet.tag, v.tag), (1, 1));
            }
            other => panic!("expected a matched pair, got {other:?}"),
        }
        assert_eq!(q.len(), 29, "the victim leaves the queue");
        // avg = 29 < min_th: admitted without a match test.
        assert!(q.enqueue(pkt(1, 500), Time::ZERO).is_queued());
    }
    assert_eq!(q.counters().dropped_for(DropReason::ChokeMatch), 10);
    // A flow with no packet queued is never matched.
    for i in 0..50u64 {
        let v = q.enqueue(pkt(1000 + i, 500), Time::ZERO);
        assert_ne!(v.drop_reason(), Some(DropReason::ChokeMatch));
    }
    assert_accounting(&q);
}

/// Ticks of one packet time; an unresponsive flow at `udp_rate` packets per
/// tick against an AIMD flow (window +1 per RTT, halved on a loss in the RTT,
/// capped at `cap` packets per tick). Returns the AIMD flow's share of the
/// delivered packets after warm-up.
fn aimd_share<Q: Qdisc<PacketMeta>>(q: &mut Q, udp_rate: f64, cap: f64) -> f64 {
    const RTT: u64 = 40;
    const UDP: u64 = 1;
    const TCP: u64 = 2;
    let (mut r, mut acc_tcp, mut acc_udp) = (0.05f64, 0.0f64, 0.0f64);
    let mut loss = false;
    let (mut got_tcp, mut got_all) = (0u64, 0u64);
    let tick_ns = 80_000;
    let mut rng = rng::seeded(5);
    for tick in 0..40_000u64 {
        let now = Time::from_nanos(tick * tick_ns);
        acc_udp += udp_rate;
        acc_tcp += r;
        let mut offer = |flow: u64, acc: &mut f64, loss: &mut bool| {
            while *acc >= 1.0 {
                *acc -= 1.0;
                if let Verdict::Dropped { packet, victim, .. } = q.enqueue(pkt(flow, 1000), now) {
                    *loss |= packet.tag == TCP || victim.is_some_and(|v| v.tag == TCP);
                }
            }
        };
        // Random order inside the tick, so neither flow always arrives first.
        if rng::chance(&mut rng, 0.5) {
            offer(UDP, &mut acc_udp, &mut loss);
            offer(TCP, &mut acc_tcp, &mut loss);
        } else {
            offer(TCP, &mut acc_tcp, &mut loss);
            offer(UDP, &mut acc_udp, &mut loss);
        }
        if let Some(p) = q.dequeue(now) {
            if tick >= 10_000 {
                got_all += 1;
                got_tcp += u64::from(p.tag == TCP);
            }
        }
        if tick % RTT == 0 {
            r = if loss {
                (r / 2.0).max(0.002)
            } else {
                (r + 1.0 / RTT as f64).min(cap)
            };
            loss = false;
        }
    }
    got_tcp as f64 / got_all as f64
}

#[test]
fn responsive_flow_keeps_its_share_against_an_unresponsive_one() {
    let mut choke = Choke::new(&cfg()).unwrap();
    let mut droptail = DropTail::new(&DropTailConfig {
        limit: Limit::Packets(100),
        ..Default::default()
    })
    .unwrap();
    let share_choke = aimd_share(&mut choke, 1.5, 0.25);
    let share_dt = aimd_share(&mut droptail, 1.5, 0.25);
    println!("responsive flow share: CHOKe {share_choke:.3}, DropTail {share_dt:.3}");
    assert!(
        share_choke > 3.0 * share_dt,
        "CHOKe {share_choke} vs DropTail {share_dt}"
    );
    assert!(share_choke > 0.1, "CHOKe share {share_choke}");
    assert!(choke.counters().dropped_for(DropReason::ChokeMatch) > 0);
    assert_accounting(&choke);
}

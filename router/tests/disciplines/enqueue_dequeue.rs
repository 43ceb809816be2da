//! `Qdisc::enqueue_dequeue` is exactly `enqueue` followed by `dequeue`.
//!
//! The port calls the fused form for a packet that finds the discipline
//! empty and the link free; DropTail, RED, CHOKe, Cebinae, RRMQS, CoDel
//! and DualPI2 override it to skip their queue in that case (FQ and
//! FQ-CoDel keep the two calls, and are checked the same way). Here two
//! instances of each discipline, built from the same configuration, see
//! the same random
//! operations: arrivals handled by one call on one instance and by the two
//! calls on the other, plus plain enqueues (bursts that build a queue),
//! plain dequeues (which drain it) and polls. Every verdict and every packet
//! handed out must be equal, and so must the whole state (compared through
//! `Debug`, which prints every field a later call could read) every 500
//! operations and at the end. The traffic is shaped so that each discipline
//! reaches the paths its override has to match: the test also asserts that
//! they were reached (drops, marks, Cebinae's tax, RRMQS's feedback...).
//! Drops no verdict carries ([`Qdisc::take_dropped`]: CoDel's) are taken
//! after every operation and compared too.

use std::time::Duration;

use tollgate_cca::rng::{self, SimRng};
use tollgate_cca::Time;
use tollgate_router::cebinae::CebinaeConfig;
use tollgate_router::choke::ChokeConfig;
use tollgate_router::codel::{CodelConfig, CodelParams};
use tollgate_router::droptail::{DropTailConfig, Limit};
use tollgate_router::dualpi2::DualPi2Config;
use tollgate_router::fq_codel::FqCodelConfig;
use tollgate_router::packet::Ecn;
use tollgate_router::qdisc::enqueue_then_dequeue;
use tollgate_router::red::RedConfig;
use tollgate_router::rrmqs::{RrmqsConfig, THESIS_VARIANTS};
use tollgate_router::{AnyQdisc, DisciplineConfig, DropReason, PacketMeta, Qdisc, Verdict};

use super::common::flow_hash;

/// What the run went through, to check that the interesting paths ran.
#[derive(Debug, Default)]
struct Seen {
    fused_on_empty: u64,
    fused_on_busy: u64,
    max_len: usize,
    dropped: [u64; DropReason::COUNT],
}

/// A random packet: 40 flows (the first 4 send half of the packets and
/// their flows' packets are long), a thesis variant or none, ECN-capable
/// or not, now and then a TCP FIN.
fn packet(rng: &mut SimRng, tag: u64) -> PacketMeta {
    let heavy = rng::chance(rng, 0.5);
    let flow = if heavy {
        rng::below(rng, 4)
    } else {
        4 + rng::below(rng, 36)
    };
    let variant = match flow % 13 {
        12 => tollgate_cca::VariantId::UNMARKED,
        v => THESIS_VARIANTS[v as usize],
    };
    PacketMeta {
        len: if heavy {
            1500
        } else {
            64 + rng::below(rng, 1437) as u32
        },
        flow_hash: flow_hash(flow),
        variant,
        ecn: if flow % 3 == 0 {
            Ecn::Ect0
        } else {
            Ecn::NotEct
        },
        flow_end: rng::chance(rng, 0.002),
        delay_class: 0,
        tag,
    }
}

/// Run both instances of `config` through `steps` random operations.
fn run(config: &DisciplineConfig, seed: u64, steps: u64) -> (AnyQdisc<PacketMeta>, Seen) {
    let mut fused = AnyQdisc::<PacketMeta>::new(config).unwrap();
    let mut twice = AnyQdisc::<PacketMeta>::new(config).unwrap();
    let mut rng = rng::seeded(seed);
    let mut seen = Seen::default();
    let mut now_ns = 0u64;
    for step in 0..steps {
        // Phases of 2,000 operations: a burst phase that builds a queue,
        // a drain phase, and two phases of mostly single arrivals on a
        // mostly empty queue.
        let phase = (step / 2_000) % 4;
        let (p_enqueue, p_dequeue, p_poll) = match phase {
            0 => (0.45, 0.05, 0.02),
            1 => (0.02, 0.50, 0.02),
            _ => (0.05, 0.08, 0.02),
        };
        // Time advances about a 1,000-byte packet at 100 Mbit/s per operation
        // (80 us), a little faster in the burst phase.
        now_ns += rng::below(&mut rng, if phase == 0 { 100_000 } else { 160_000 });
        let now = Time::from_nanos(now_ns);
        let draw = rng::uniform_f64(&mut rng);
        if draw < p_enqueue {
            let p = packet(&mut rng, step);
            let a = fused.enqueue(p, now);
            let b = twice.enqueue(p, now);
            assert_eq!(a, b, "enqueue at step {step}");
            count(&mut seen, &a);
        } else if draw < p_enqueue + p_dequeue {
            assert_eq!(
                fused.dequeue(now),
                twice.dequeue(now),
                "dequeue at step {step}"
            );
        } else if draw < p_enqueue + p_dequeue + p_poll {
            fused.poll(now);
            twice.poll(now);
        } else {
            let p = packet(&mut rng, step);
            if fused.is_empty() {
                seen.fused_on_empty += 1;
            } else {
                seen.fused_on_busy += 1;
            }
            let (va, a) = fused.enqueue_dequeue(p, now);
            let (vb, b) = enqueue_then_dequeue(&mut twice, p, now);
            assert_eq!((&va, a), (&vb, b), "enqueue_dequeue at step {step}");
            count(&mut seen, &va);
        }
        let late = |q: &mut AnyQdisc<PacketMeta>| {
            std::iter::from_fn(|| q.take_dropped()).collect::<Vec<_>>()
        };
        let late_fused = late(&mut fused);
        assert_eq!(late_fused, late(&mut twice), "late drops at step {step}");
        for (_, r) in late_fused {
            seen.dropped[r.index()] += 1;
        }
        seen.max_len = seen.max_len.max(fused.len());
        assert_eq!(
            (fused.len(), fused.bytes(), fused.counters()),
            (twice.len(), twice.bytes(), twice.counters()),
            "step {step}"
        );
        if step % 500 == 0 {
            assert_eq!(format!("{fused:?}"), format!("{twice:?}"), "step {step}");
        }
    }
    assert_eq!(format!("{fused:?}"), format!("{twice:?}"), "at the end");
    assert!(
        seen.fused_on_empty > steps / 10 && seen.fused_on_busy > steps / 10,
        "the fused call must run on empty and busy queues: {seen:?}"
    );
    (fused, seen)
}

fn count(seen: &mut Seen, v: &Verdict<PacketMeta>) {
    if let Some(r) = v.drop_reason() {
        seen.dropped[r.index()] += 1;
    }
}

fn dropped(seen: &Seen, r: DropReason) -> u64 {
    seen.dropped[r.index()]
}

const STEPS: u64 = 40_000;

#[test]
fn droptail() {
    // A byte limit (200 kB) the burst phases overrun, in packets of every size.
    let cfg = DisciplineConfig::DropTail(DropTailConfig {
        limit: Limit::Bytes(200_000),
        ..DropTailConfig::default()
    });
    for seed in 1..=3 {
        let (_, seen) = run(&cfg, seed, STEPS);
        assert!(dropped(&seen, DropReason::Overlimit) > 0, "{seen:?}");
    }
}

#[test]
fn red_with_ecn() {
    let cfg = DisciplineConfig::Red(RedConfig {
        ecn: true,
        ..RedConfig::default()
    });
    for seed in 1..=3 {
        let (q, seen) = run(&cfg, seed, STEPS);
        assert!(q.counters().marked > 0, "{seen:?}");
        assert!(dropped(&seen, DropReason::Early) > 0, "{seen:?}");
    }
}

#[test]
fn choke() {
    let cfg = DisciplineConfig::Choke(ChokeConfig::default());
    for seed in 1..=3 {
        let (_, seen) = run(&cfg, seed, STEPS);
        assert!(dropped(&seen, DropReason::ChokeMatch) > 0, "{seen:?}");
    }
}

#[test]
fn cebinae_taxing() {
    // 1-ms rounds at 100 Mbit/s: the burst phases saturate the port, so
    // flows turn top and the tax drops.
    let cfg = DisciplineConfig::Cebinae(CebinaeConfig {
        dt: Duration::from_millis(1),
        l: Duration::from_micros(50),
        cache_slots: 64,
        ..CebinaeConfig::default()
    });
    for seed in 1..=3 {
        let (q, seen) = run(&cfg, seed, STEPS);
        assert!(dropped(&seen, DropReason::Tax) > 0, "{seen:?}");
        let AnyQdisc::Cebinae(c) = &q else {
            unreachable!()
        };
        assert!(c.counters().dequeued > 0, "{seen:?}");
    }
}

#[test]
fn rrmqs_with_feedback() {
    let cfg = DisciplineConfig::Rrmqs(RrmqsConfig {
        window: Duration::from_millis(50),
        rrmqs_probability: Some(0.3),
        ..RrmqsConfig::default()
    });
    for seed in 1..=3 {
        let (_, seen) = run(&cfg, seed, STEPS);
        assert!(dropped(&seen, DropReason::Feedback) > 0, "{seen:?}");
    }
}

#[test]
fn fq_uses_the_two_calls() {
    let cfg = DisciplineConfig::default_for("fq").unwrap();
    let (_, seen) = run(&cfg, 1, STEPS);
    assert!(seen.max_len > 10, "{seen:?}");
}

#[test]
fn codel_with_ecn() {
    let cfg = DisciplineConfig::Codel(CodelConfig {
        codel: CodelParams {
            ecn: true,
            ..CodelParams::DEFAULT
        },
        ..CodelConfig::default()
    });
    for seed in 1..=3 {
        let (q, seen) = run(&cfg, seed, STEPS);
        assert!(dropped(&seen, DropReason::Codel) > 0, "{seen:?}");
        assert!(q.counters().marked > 0, "{seen:?}");
    }
}

#[test]
fn fq_codel_with_overflow() {
    let cfg = DisciplineConfig::FqCodel(FqCodelConfig {
        limit: 300,
        ..FqCodelConfig::default()
    });
    for seed in 1..=3 {
        let (q, seen) = run(&cfg, seed, STEPS);
        assert!(dropped(&seen, DropReason::Codel) > 0, "{seen:?}");
        assert!(dropped(&seen, DropReason::Overlimit) > 0, "{seen:?}");
        assert!(q.counters().marked > 0, "{seen:?}");
    }
}

#[test]
fn dualpi2_with_classic_drops_and_marks() {
    let cfg = DisciplineConfig::DualPi2(DualPi2Config {
        limit: 300,
        ..DualPi2Config::default()
    });
    for seed in 1..=3 {
        let (q, seen) = run(&cfg, seed, STEPS);
        assert!(dropped(&seen, DropReason::Early) > 0, "{seen:?}");
        assert!(dropped(&seen, DropReason::Overlimit) > 0, "{seen:?}");
        assert!(q.counters().marked > 0, "{seen:?}");
    }
}

//! Helpers shared by the discipline tests.
#![allow(dead_code)]

use tollgate_cca::rng::{self, SimRng};
use tollgate_cca::{Time, VariantId};
use tollgate_router::packet::Ecn;
use tollgate_router::{PacketMeta, Qdisc};

/// A packet of `flow` (the flow hash is derived from the index).
pub fn pkt(flow: u64, len: u32) -> PacketMeta {
    PacketMeta {
        len,
        flow_hash: flow_hash(flow),
        tag: flow,
        ..PacketMeta::default()
    }
}

/// A packet of `flow` with a variant.
pub fn vpkt(flow: u64, variant: VariantId, len: u32) -> PacketMeta {
    PacketMeta {
        variant,
        ..pkt(flow, len)
    }
}

/// An ECN-capable packet.
pub fn ect(flow: u64, len: u32) -> PacketMeta {
    PacketMeta {
        ecn: Ecn::Ect0,
        ..pkt(flow, len)
    }
}

/// Distinct, well-spread hashes for flow indices.
pub fn flow_hash(flow: u64) -> u64 {
    tollgate_router::flow::mix64(flow.wrapping_add(0x1234_5678))
}

/// Exact accounting check.
pub fn assert_accounting<Q: Qdisc<PacketMeta>>(q: &Q) {
    let c = q.counters();
    assert_eq!(
        c.received,
        c.dequeued + c.dropped_total() + q.len() as u64,
        "{c:?}"
    );
    assert_eq!(
        c.received_bytes,
        c.dequeued_bytes + c.dropped_bytes_total() + q.bytes(),
        "{c:?}"
    );
}

/// A constant-rate source in a tick simulation (one tick = one packet time of the link).
#[derive(Clone, Debug)]
pub struct Source {
    pub flow: u64,
    pub variant: VariantId,
    /// Packets per tick.
    pub rate: f64,
    pub len: u32,
    pub acc: f64,
}

impl Source {
    pub fn new(flow: u64, rate: f64, len: u32) -> Self {
        Source {
            flow,
            variant: VariantId::UNMARKED,
            rate,
            len,
            acc: 0.0,
        }
    }
}

/// Per-source results of [`run_cbr`].
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Delivered bytes per source after the warm-up.
    pub delivered: Vec<u64>,
    /// (time, flow, len) of every dequeue after the warm-up.
    pub departures: Vec<(Time, u64, u32)>,
}

/// The arrivals of one tick, in time order: each source emits its packets of
/// the tick at random instants inside it (seeded), so that no source always
/// arrives first (a DropTail queue would otherwise starve the later ones).
pub fn tick_arrivals(
    sources: &mut [Source],
    tick: u64,
    tick_ns: u64,
    rng: &mut SimRng,
) -> Vec<(Time, PacketMeta)> {
    let mut out = Vec::new();
    for s in sources.iter_mut() {
        s.acc += s.rate;
        while s.acc >= 1.0 {
            s.acc -= 1.0;
            let at = Time::from_nanos(tick * tick_ns + rng::below(rng, tick_ns - 1));
            out.push((
                at,
                PacketMeta {
                    variant: s.variant,
                    ..pkt(s.flow, s.len)
                },
            ));
        }
    }
    out.sort_by_key(|&(t, p)| (t, p.tag));
    out
}

/// Drive `q` with constant-rate sources over a link that dequeues one packet
/// at the end of each tick (`tick_ns`), for `ticks` ticks; count deliveries
/// after `warmup`.
pub fn run_cbr<Q: Qdisc<PacketMeta>>(
    q: &mut Q,
    sources: &mut [Source],
    tick_ns: u64,
    ticks: u64,
    warmup: u64,
) -> Outcome {
    let mut out = Outcome {
        delivered: vec![0; sources.len()],
        ..Outcome::default()
    };
    let mut rng = rng::seeded(11);
    for tick in 0..ticks {
        for (at, p) in tick_arrivals(sources, tick, tick_ns, &mut rng) {
            let _ = q.enqueue(p, at);
        }
        let now = Time::from_nanos(tick * tick_ns + tick_ns - 1);
        if let Some(p) = q.dequeue(now) {
            if tick >= warmup {
                let i = sources.iter().position(|s| s.flow == p.tag).unwrap();
                out.delivered[i] += u64::from(p.len);
                out.departures.push((now, p.tag, p.len));
            }
        }
    }
    out
}

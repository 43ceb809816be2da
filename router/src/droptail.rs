//! DropTail: a FIFO that drops arrivals once full.
//!
//! The limit is in packets, in bytes, or a fraction of the bandwidth-delay
//! product `BDP = rate * RTT / 8` bytes (the usual way buffers are sized in
//! the fairness literature, e.g. 20 % of the BDP). An arrival that would
//! exceed the limit is dropped with [`DropReason::Overlimit`].
//!
//! With a byte limit the ring is sized for `limit / min_packet_bytes`
//! packets (64 B minimum Ethernet frames by default), so it never has to grow.

use std::time::Duration;

use tollgate_cca::Time;

use crate::qdisc::{
    check, enqueue_then_dequeue, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict,
};
use crate::ring::Fifo;

const NAME: &str = "droptail";
/// Largest ring allocated for one queue, in packets.
pub const MAX_SLOTS: u64 = 1 << 24;

/// A queue limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many bytes.
    Bytes(u64),
    /// `fraction * rate_bps * rtt / 8` bytes.
    Bdp {
        /// Multiple of the BDP (0.2 = 20 % BDP).
        fraction: f64,
        /// Bottleneck rate, bit/s.
        rate_bps: f64,
        /// Round-trip time the buffer is sized for.
        rtt: Duration,
    },
}

impl Limit {
    /// `(packets, bytes)`: the packet and byte caps this limit imposes.
    pub fn caps(&self, min_packet_bytes: u32) -> (u64, u64) {
        match *self {
            Limit::Packets(n) => (u64::from(n), u64::MAX),
            Limit::Bytes(b) => (b.div_ceil(u64::from(min_packet_bytes.max(1))), b),
            Limit::Bdp {
                fraction,
                rate_bps,
                rtt,
            } => {
                let b = (fraction * rate_bps * rtt.as_secs_f64() / 8.0).round() as u64;
                (b.div_ceil(u64::from(min_packet_bytes.max(1))), b)
            }
        }
    }
}

/// DropTail parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DropTailConfig {
    /// Queue limit. Default 1000 packets (the ns-3 / Cebinae MaxSize).
    pub limit: Limit,
    /// Smallest frame expected, used to size the ring for byte limits. Default 64.
    pub min_packet_bytes: u32,
}

impl Default for DropTailConfig {
    fn default() -> Self {
        DropTailConfig {
            limit: Limit::Packets(1000),
            min_packet_bytes: 64,
        }
    }
}

impl DropTailConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::int(
            NAME,
            "min_packet_bytes",
            u64::from(self.min_packet_bytes),
            1,
            65_535,
        )?;
        if let Limit::Bdp {
            fraction, rate_bps, ..
        } = self.limit
        {
            check::open_closed(NAME, "limit.fraction", fraction, 0.0, 1e3)?;
            check::open_closed(NAME, "limit.rate_bps", rate_bps, 0.0, 1e13)?;
        }
        let (pkts, bytes) = self.limit.caps(self.min_packet_bytes);
        check::int(NAME, "limit (packets)", pkts, 1, MAX_SLOTS)?;
        check::int(NAME, "limit (bytes)", bytes, 1, u64::MAX)?;
        Ok(())
    }
}

/// The DropTail discipline.
#[derive(Debug)]
pub struct DropTail<P> {
    q: Fifo<P>,
    byte_limit: u64,
    counters: Counters,
}

impl<P: PacketHandle> DropTail<P> {
    /// Build from a validated configuration.
    pub fn new(config: &DropTailConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let (pkts, bytes) = config.limit.caps(config.min_packet_bytes);
        Ok(DropTail {
            q: Fifo::with_capacity(pkts as usize),
            byte_limit: bytes,
            counters: Counters::default(),
        })
    }
}

impl<P: PacketHandle> Qdisc<P> for DropTail<P> {
    fn enqueue(&mut self, packet: P, _now: Time) -> Verdict<P> {
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        if self.q.bytes() + u64::from(len) > self.byte_limit {
            return self.counters.drop(DropReason::Overlimit, packet);
        }
        match self.q.push(packet) {
            Ok(()) => Verdict::Queued,
            Err(packet) => self.counters.drop(DropReason::Overlimit, packet),
        }
    }

    fn dequeue(&mut self, _now: Time) -> Option<P> {
        let p = self.q.pop()?;
        self.counters.on_dequeue(p.len_bytes());
        Some(p)
    }

    /// An empty queue hands an admitted arrival straight back.
    #[inline]
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        if !self.q.is_empty() {
            return enqueue_then_dequeue(self, packet, now);
        }
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        if u64::from(len) > self.byte_limit {
            return (self.counters.drop(DropReason::Overlimit, packet), None);
        }
        // The packet limit is at least 1 (`validate`).
        self.counters.on_dequeue(len);
        (Verdict::Queued, Some(packet))
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn bytes(&self) -> u64 {
        self.q.bytes()
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn reads_flow_hash(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::PacketMeta;

    fn pkt(len: u32) -> PacketMeta {
        PacketMeta {
            len,
            ..PacketMeta::default()
        }
    }

    #[test]
    fn packet_byte_and_bdp_limits() {
        let t = Time::ZERO;
        let mut q = DropTail::new(&DropTailConfig {
            limit: Limit::Packets(3),
            ..Default::default()
        })
        .unwrap();
        for _ in 0..3 {
            assert_eq!(q.enqueue(pkt(1500), t), Verdict::Queued);
        }
        assert_eq!(
            q.enqueue(pkt(64), t).drop_reason(),
            Some(DropReason::Overlimit)
        );
        let mut b = DropTail::new(&DropTailConfig {
            limit: Limit::Bytes(3000),
            ..Default::default()
        })
        .unwrap();
        assert!(b.enqueue(pkt(1500), t).is_queued());
        assert!(b.enqueue(pkt(1400), t).is_queued());
        assert!(!b.enqueue(pkt(101), t).is_queued());
        assert!(b.enqueue(pkt(100), t).is_queued());
        assert_eq!(b.bytes(), 3000);
        // 10 Mbit/s * 12 ms = 15000 B; half of it = 7500 B = 5 full-size packets.
        let bdp = Limit::Bdp {
            fraction: 0.5,
            rate_bps: 10e6,
            rtt: Duration::from_millis(12),
        };
        let mut d = DropTail::new(&DropTailConfig {
            limit: bdp,
            ..Default::default()
        })
        .unwrap();
        let admitted = (0..10)
            .filter(|_| d.enqueue(pkt(1500), t).is_queued())
            .count();
        assert_eq!(admitted, 5);
        assert_eq!(d.dequeue(t).unwrap().len, 1500);
        let c = d.counters();
        assert_eq!(c.received, c.dequeued + c.dropped_total() + d.len() as u64);
    }

    #[test]
    fn bad_limit_names_the_field() {
        let e = DropTailConfig {
            limit: Limit::Packets(0),
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.field, "limit (packets)");
        assert!(e.to_string().contains("1 ..= "), "{e}");
    }
}

//! Delivery-rate sampling, shared by [`bbr`](crate::bbr) and
//! [`bbr3`](crate::bbr3) (draft-cheng-iccrg-delivery-rate-estimation-00;
//! draft-ietf-ccwg-bbr-06 §4.1).
//!
//! The trait passes only `(packet number, bytes, bytes in flight, now)` at
//! send time and `(packet number, bytes, sent_time, now)` at ACK time, so the
//! sampler keeps the per-packet send state itself. At each send it records
//! `delivered` (bytes acknowledged so far, `C.delivered`), `delivered_time`
//! (when that count last changed), `first_sent_time` (send time of the packet
//! whose ACK last advanced it), `lost` (bytes declared lost so far,
//! `C.lost`), the bytes in flight after the send (`P.tx_in_flight`) and an
//! app-limited flag the caller chooses. When the ACK for that packet arrives:
//!
//! ```text
//! interval = max(sent_time - first_sent_time, now - delivered_time)
//! rate     = (delivered_now - delivered_at_send) / interval
//! ```
//!
//! Samples whose interval is zero or shorter than the minimum RTT are not
//! rates (ACK compression), as in Linux; the rest of the sample (what was
//! delivered and lost since the send, the in-flight at send) is still given.
//!
//! The records live in a **fixed ring of `ring` slots indexed by `packet
//! number mod ring`** (allocated once, so memory is bounded whatever the
//! window). A slot is reused when its packet was acknowledged or is older than
//! the largest acknowledged packet (lost or reordered: its sample is no
//! longer wanted). If the slot still holds a newer in-flight packet (more than
//! `ring` packets in flight), the new packet is simply not sampled
//! ([`DeliverySampler::unsampled`]); with `k * ring` packets in flight
//! roughly one in `k` packets still yields a sample, which is plenty for a max
//! filter. Drivers must call `on_packet_sent` for every packet.

use crate::{Ack, SentPacket, Time};

/// Send state of one packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendRecord {
    /// Packet number, `u64::MAX` when the slot is free.
    pub pn: u64,
    /// Bytes of the packet.
    pub bytes: u64,
    /// When it was sent.
    pub sent_time: Time,
    /// `C.delivered` when it was sent (`P.delivered`).
    pub delivered: u64,
    /// `C.delivered_time` when it was sent.
    pub delivered_time: Time,
    /// `C.first_sent_time` when it was sent.
    pub first_sent_time: Time,
    /// `C.lost` when it was sent (`P.lost`).
    pub lost: u64,
    /// Bytes in flight just after it was sent (`P.tx_in_flight`).
    pub tx_in_flight: u64,
    /// The caller's app-limited flag for this packet.
    pub app_limited: bool,
}

const FREE: SendRecord = SendRecord {
    pn: u64::MAX,
    bytes: 0,
    sent_time: Time::ZERO,
    delivered: 0,
    delivered_time: Time::ZERO,
    first_sent_time: Time::ZERO,
    lost: 0,
    tx_in_flight: 0,
    app_limited: false,
};

/// What one acknowledged packet tells (`RS` of the draft).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The acknowledged packet's send record.
    pub packet: SendRecord,
    /// Bytes delivered between its send and now (`RS.delivered`).
    pub delivered: u64,
    /// Bytes declared lost between its send and now (`RS.lost`).
    pub lost: u64,
    /// Delivery rate, bytes per second (`None` when the interval is zero or
    /// shorter than the minimum RTT).
    pub rate: Option<f64>,
    /// The packet's or the ACK's app-limited flag.
    pub app_limited: bool,
}

/// The per-connection sampling state (`C.delivered`, `C.lost`, ...) and the
/// ring of send records.
#[derive(Clone, Debug)]
pub struct DeliverySampler {
    ring: Vec<SendRecord>,
    unsampled: u64,
    delivered: u64,
    delivered_time: Time,
    first_sent_time: Time,
    lost: u64,
    largest_acked: Option<u64>,
}

impl DeliverySampler {
    /// A sampler with `ring` record slots (at least one).
    pub fn new(ring: usize) -> Self {
        DeliverySampler {
            ring: vec![FREE; ring.max(1)],
            unsampled: 0,
            delivered: 0,
            delivered_time: Time::ZERO,
            first_sent_time: Time::ZERO,
            lost: 0,
            largest_acked: None,
        }
    }

    /// Bytes acknowledged so far (`C.delivered`).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes declared lost so far (`C.lost`).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Packets sent while their ring slot was still taken (not sampled).
    pub fn unsampled(&self) -> u64 {
        self.unsampled
    }

    /// Record a packet's send state; `app_limited` is stored with it.
    pub fn on_packet_sent(&mut self, now: Time, sent: &SentPacket, app_limited: bool) {
        if sent.bytes_in_flight <= sent.bytes {
            // The pipe was empty: restart the sampling intervals here.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let slot = (sent.packet_number % self.ring.len() as u64) as usize;
        let occupant = self.ring[slot].pn;
        let reusable = occupant == u64::MAX
            || self
                .largest_acked
                .is_some_and(|largest| occupant <= largest);
        if !reusable {
            self.unsampled += 1;
            return;
        }
        self.ring[slot] = SendRecord {
            pn: sent.packet_number,
            bytes: sent.bytes,
            sent_time: now,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            lost: self.lost,
            tx_in_flight: sent.bytes_in_flight,
            app_limited,
        };
    }

    /// Count `ack`'s bytes as delivered and take its packet's record out of
    /// the ring: the sample, or `None` when the packet was not sampled.
    pub fn on_ack(&mut self, now: Time, ack: &Ack) -> Option<Sample> {
        self.delivered += ack.bytes;
        self.delivered_time = now;
        self.largest_acked = Some(
            self.largest_acked
                .map_or(ack.packet_number, |l| l.max(ack.packet_number)),
        );
        let slot = (ack.packet_number % self.ring.len() as u64) as usize;
        let record = self.ring[slot];
        if record.pn != ack.packet_number {
            return None;
        }
        self.ring[slot] = FREE;
        self.first_sent_time = record.sent_time;
        let send_elapsed = record.sent_time.saturating_since(record.first_sent_time);
        let ack_elapsed = self.delivered_time.saturating_since(record.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = self.delivered - record.delivered;
        let rate = (!interval.is_zero() && interval >= ack.rtt.min)
            .then(|| delivered as f64 / interval.as_secs_f64());
        Some(Sample {
            packet: record,
            delivered,
            lost: self.lost - record.lost,
            rate,
            app_limited: record.app_limited || ack.app_limited,
        })
    }

    /// Count `bytes` as declared lost (`C.lost`).
    pub fn on_lost(&mut self, bytes: u64) {
        self.lost += bytes;
    }

    /// The send record of the in-flight packet sent at `sent_time`, if its
    /// slot still holds it (the newest such packet when several share the
    /// time). Loss events name a packet only by its send time.
    pub fn find_sent_at(&self, sent_time: Time) -> Option<SendRecord> {
        self.ring
            .iter()
            .filter(|r| r.pn != u64::MAX && r.sent_time == sent_time)
            .max_by_key(|r| r.pn)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RttSample;
    use std::time::Duration;

    fn ack(pn: u64, sent_time: Time, min_rtt: Duration) -> Ack {
        Ack {
            packet_number: pn,
            bytes: 1000,
            sent_time,
            rtt: RttSample::fixed(min_rtt),
            app_limited: false,
        }
    }

    #[test]
    fn rate_is_delivered_bytes_over_the_longer_interval() {
        let mut s = DeliverySampler::new(16);
        let rtt = Duration::from_millis(10);
        // Ten packets, 1 ms apart, each ACKed 10 ms later.
        for pn in 0..10u64 {
            let sent = SentPacket {
                packet_number: pn,
                bytes: 1000,
                bytes_in_flight: 1000 * (pn + 1),
            };
            s.on_packet_sent(Time::from_millis(pn), &sent, false);
        }
        s.on_lost(500);
        let mut last = None;
        for pn in 0..10u64 {
            last = s.on_ack(
                Time::from_millis(10 + pn),
                &ack(pn, Time::from_millis(pn), rtt),
            );
        }
        let last = last.unwrap();
        assert_eq!(s.delivered(), 10_000);
        assert_eq!(last.delivered, 10_000);
        assert_eq!(last.lost, 500);
        assert_eq!(last.packet.tx_in_flight, 10_000);
        // interval = max(9 ms send, 19 ms ack) = 19 ms
        let rate = last.rate.unwrap();
        assert!((rate - 10_000.0 / 0.019).abs() < 1e-6, "{rate}");
        assert_eq!(
            s.find_sent_at(Time::from_millis(3)),
            None,
            "acked records are freed"
        );
    }

    #[test]
    fn short_intervals_and_unknown_packets_give_no_rate() {
        let mut s = DeliverySampler::new(4);
        let sent = SentPacket {
            packet_number: 0,
            bytes: 1000,
            bytes_in_flight: 1000,
        };
        s.on_packet_sent(Time::ZERO, &sent, true);
        assert_eq!(s.find_sent_at(Time::ZERO).map(|r| r.pn), Some(0));
        let sample = s
            .on_ack(
                Time::from_millis(5),
                &ack(0, Time::ZERO, Duration::from_millis(10)),
            )
            .unwrap();
        assert_eq!(sample.rate, None);
        assert!(sample.app_limited);
        assert_eq!(
            s.on_ack(Time::from_millis(6), &ack(7, Time::ZERO, Duration::ZERO)),
            None
        );
    }
}

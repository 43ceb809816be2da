//! Helpers shared by the algorithm tests: drive a CCA directly with ACKs.

#![allow(dead_code)]

use std::time::Duration;

use tollgate_cca::{
    Ack, CongestionControl, CongestionEvent, CongestionKind, RttSample, SentPacket, Time,
};

#[derive(Debug)]
/// Drives one algorithm with whole windows of ACKs at a fixed RTT.
pub struct Driver {
    pub now: Time,
    pub next_pn: u64,
    pub mss: u64,
}

impl Driver {
    pub fn new(mss: u64) -> Self {
        Driver {
            now: Time::ZERO,
            next_pn: 0,
            mss,
        }
    }

    /// Send one packet and ACK it after `rtt`, with `latest` as its RTT sample.
    pub fn round_trip(&mut self, cca: &mut dyn CongestionControl, rtt: Duration) {
        let pn = self.next_pn;
        self.next_pn += 1;
        let sent_time = self.now;
        cca.on_packet_sent(
            self.now,
            &SentPacket {
                packet_number: pn,
                bytes: self.mss,
                bytes_in_flight: self.mss,
            },
        );
        let ack = Ack {
            packet_number: pn,
            bytes: self.mss,
            sent_time,
            rtt: RttSample::fixed(rtt),
            app_limited: false,
        };
        cca.on_ack(self.now + rtt, &ack);
    }

    /// ACK one full window, one packet at a time, spread evenly over `rtt`;
    /// time advances by `rtt`.
    pub fn ack_window(&mut self, cca: &mut dyn CongestionControl, rtt: Duration) {
        let packets = (cca.window() / self.mss).max(1);
        let step = rtt / packets as u32;
        for _ in 0..packets {
            self.round_trip(cca, rtt);
            self.now = self.now + step;
        }
    }

    /// A loss of a packet sent just now, reported at `now`.
    pub fn loss(&mut self, cca: &mut dyn CongestionControl) {
        self.now = self.now + Duration::from_micros(1);
        let event = CongestionEvent {
            kind: CongestionKind::Loss,
            sent_time: self.now,
            lost_bytes: self.mss,
            persistent_congestion: false,
        };
        cca.on_congestion_event(self.now + Duration::from_micros(1), &event);
        self.now = self.now + Duration::from_micros(2);
    }
}

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

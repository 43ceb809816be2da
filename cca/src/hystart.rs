//! HyStart's delay-increase test: leave slow start when the RTT rises.
//!
//! Source: Ha & Rhee, "Taming the elephants: New TCP slow start", Computer
//! Networks 55(9), 2011; the detector as Linux `tcp_cubic.c` and ns-3's
//! `TcpCubic` run it (RFC 9406, HyStart++, standardises the same test).
//!
//! Slow start is split into rounds: a round ends when a packet sent after the
//! round began is acknowledged. In each round the first
//! [`MIN_SAMPLES`] RTT samples give the round's minimum `curr_rtt`; once they
//! are in, slow start ends (`ssthresh = cwnd`) as soon as
//!
//! ```text
//! curr_rtt > delay_min + clamp(delay_min / 8, 4 ms, 16 ms)
//! ```
//!
//! where `delay_min` is the smallest RTT sample seen. The test runs only while
//! `cwnd >= 16` segments (Linux's `hystart_low_window`).
//!
//! Linux and ns-3 also end slow start on an *ACK train* that spans more than
//! half the minimum RTT. That test reads the spacing of ACKs, which pacing
//! spreads over the whole round (Linux raises its threshold for paced
//! flows); Tollgate's QUIC senders pace, so it is not implemented here.

use std::time::Duration;

use crate::Ack;

/// RTT samples per round before the round's minimum is tested.
pub const MIN_SAMPLES: u32 = 8;
/// The test runs from this window, in segments.
pub const LOW_WINDOW_SEGMENTS: u64 = 16;
/// Smallest and largest RTT rise that ends slow start.
pub const DELAY_THRESH_MIN: Duration = Duration::from_millis(4);
/// See [`DELAY_THRESH_MIN`].
pub const DELAY_THRESH_MAX: Duration = Duration::from_millis(16);

/// HyStart's per-connection state.
#[derive(Clone, Debug, Default)]
pub struct HyStart {
    /// Largest packet number sent so far.
    largest_sent: Option<u64>,
    /// The current round ends when a packet numbered above this is acknowledged.
    round_end: Option<u64>,
    /// Minimum RTT of the current round's first samples.
    curr_rtt: Option<Duration>,
    /// Samples taken in the current round.
    samples: u32,
    /// Smallest RTT sample seen.
    delay_min: Option<Duration>,
    /// Slow start was ended by the test.
    found: bool,
}

impl HyStart {
    /// Record a sent packet (rounds are delimited by packet numbers).
    pub fn on_packet_sent(&mut self, packet_number: u64) {
        self.largest_sent = Some(
            self.largest_sent
                .map_or(packet_number, |p| p.max(packet_number)),
        );
    }

    /// Whether the test has ended slow start.
    pub fn found(&self) -> bool {
        self.found
    }

    /// Smallest RTT sample seen.
    pub fn delay_min(&self) -> Option<Duration> {
        self.delay_min
    }

    /// The RTT rise that ends slow start for a minimum RTT `delay_min`.
    pub fn threshold(delay_min: Duration) -> Duration {
        (delay_min / 8).clamp(DELAY_THRESH_MIN, DELAY_THRESH_MAX)
    }

    /// Feed one acknowledged packet while the sender is in slow start with a
    /// window of `cwnd_segments`. Returns `true` when slow start must end now
    /// (the caller sets `ssthresh = cwnd`).
    pub fn on_ack(&mut self, ack: &Ack, cwnd_segments: u64) -> bool {
        let rtt = ack.rtt.latest;
        if rtt.is_zero() {
            return false;
        }
        self.delay_min = Some(self.delay_min.map_or(rtt, |d| d.min(rtt)));
        if self.round_end.is_none_or(|end| ack.packet_number > end) {
            // A new round: it ends with the packets sent up to now.
            self.round_end = Some(self.largest_sent.unwrap_or(ack.packet_number));
            self.curr_rtt = None;
            self.samples = 0;
        }
        if self.found || cwnd_segments < LOW_WINDOW_SEGMENTS {
            return false;
        }
        if self.samples < MIN_SAMPLES {
            self.curr_rtt = Some(self.curr_rtt.map_or(rtt, |c| c.min(rtt)));
            self.samples += 1;
            return false;
        }
        let (Some(curr), Some(min)) = (self.curr_rtt, self.delay_min) else {
            return false;
        };
        if curr > min + Self::threshold(min) {
            self.found = true;
        }
        self.found
    }

    /// Forget the outcome (after persistent congestion: slow start restarts).
    pub fn restart(&mut self) {
        self.found = false;
        self.round_end = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RttSample, Time};

    fn ack(pn: u64, rtt_ms: u64) -> Ack {
        Ack {
            packet_number: pn,
            bytes: 1200,
            sent_time: Time::ZERO,
            rtt: RttSample::fixed(Duration::from_millis(rtt_ms)),
            app_limited: false,
        }
    }

    /// Rounds of `n` packets: all packets of a round are sent, then acknowledged.
    fn round(h: &mut HyStart, first_pn: u64, n: u64, rtt_ms: u64, cwnd: u64) -> bool {
        for pn in first_pn..first_pn + n {
            h.on_packet_sent(pn);
        }
        (first_pn..first_pn + n).any(|pn| h.on_ack(&ack(pn, rtt_ms), cwnd))
    }

    #[test]
    fn threshold_is_an_eighth_of_the_minimum_clamped_to_4_and_16_ms() {
        let ms = Duration::from_millis;
        assert_eq!(HyStart::threshold(ms(10)), ms(4));
        assert_eq!(HyStart::threshold(ms(80)), ms(10));
        assert_eq!(HyStart::threshold(ms(400)), ms(16));
    }

    #[test]
    fn a_round_whose_minimum_rtt_rose_past_the_threshold_ends_slow_start() {
        let mut h = HyStart::default();
        // 40 ms base RTT: threshold 5 ms. Rounds at 40, 44 (below) and 46 ms.
        assert!(!round(&mut h, 0, 20, 40, 20));
        assert!(!round(&mut h, 20, 40, 44, 40));
        assert!(!h.found());
        assert!(round(&mut h, 60, 80, 46, 80));
        assert!(h.found());
        assert_eq!(h.delay_min(), Some(Duration::from_millis(40)));
    }

    #[test]
    fn the_test_waits_for_eight_samples_and_the_low_window() {
        let mut h = HyStart::default();
        assert!(!round(&mut h, 0, 10, 20, 10));
        // RTT doubled, but the window is below 16 segments.
        assert!(!round(&mut h, 10, 10, 40, 15));
        // Only 8 samples in the round: the minimum is known, nothing tested yet.
        assert!(!round(&mut h, 20, 8, 40, 16));
        // A ninth sample in the next round tests it.
        assert!(round(&mut h, 28, 9, 40, 16));
    }

    #[test]
    fn one_low_sample_among_the_first_eight_keeps_slow_start() {
        let mut h = HyStart::default();
        assert!(!round(&mut h, 0, 20, 20, 20));
        for pn in 20..60 {
            h.on_packet_sent(pn);
        }
        // The round's minimum is its lowest early sample: 21 ms, under 20 + 4.
        let rtts = [30, 30, 21, 30, 30, 30, 30, 30];
        for (i, r) in rtts.iter().enumerate() {
            assert!(!h.on_ack(&ack(20 + i as u64, *r), 30));
        }
        for pn in 28..60 {
            assert!(!h.on_ack(&ack(pn, 30), 30));
        }
    }
}

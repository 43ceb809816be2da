//! Flow-control windows that fit the path: receive-window auto-tuning and a
//! send buffer that follows the congestion window.
//!
//! A QUIC sender may have at most `min(cwnd, peer's receive window, own send
//! buffer)` bytes in flight. With fixed 16 MiB windows a flow on a
//! 10 Gbit/s, 120 ms path (150 MB BDP) is limited by flow control, not by its
//! congestion controller. Both windows therefore grow with the connection:
//!
//! - **Receive window** (dynamic right-sizing, in the spirit of Linux's
//!   `tcp_rcv_space_adjust`): once per smoothed RTT the receiver measures the
//!   bytes its application consumed during that RTT, `d`. If `2 d` exceeds the
//!   current connection window, the window becomes `2 d` (at most
//!   [`Windows::max`]). A sender held by the window delivers one window per
//!   RTT, so the window doubles every RTT until flow control no longer binds;
//!   a receiver that reads slowly never grows it. The stream window is set to
//!   the ceiling once, so the connection window is what limits the peer.
//! - **Send buffer** (quinn-proto's `send_window`, the bytes written but not
//!   yet acknowledged): it starts at twice the initial congestion window and,
//!   whenever a write is blocked, grows to twice the current congestion
//!   window, so it never limits a sender for longer than one write while
//!   memory stays proportional to what the path carries. A write blocked with
//!   the buffer already at the ceiling counts as send-window limited.
//!
//! Memory stays bounded: a receiver buffers at most its window of
//! out-of-order data, a sender at most its send buffer, and both stop at
//! [`Windows::max`] (default [`DEFAULT_MAX`], above 10 Gbit/s x 200 ms).
//!
//! Sans-IO like the rest of the transport: the caller passes `now`.

use std::time::{Duration, Instant};

/// Default initial receive window, bytes (16 MiB: no 1 Gbit/s, 100 ms flow
/// waits for auto-tuning).
pub const DEFAULT_INITIAL: u64 = 16 << 20;
/// Default ceiling of both windows, bytes (256 MiB >= 10 Gbit/s x 200 ms = 250 MB).
pub const DEFAULT_MAX: u64 = 256 << 20;
/// Smallest send buffer, bytes.
pub const MIN_SEND: u64 = 64 << 10;
/// Shortest measurement interval of the receive-window adjustment.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// One connection's window state.
#[derive(Clone, Debug)]
pub struct Windows {
    /// Current connection-level receive window, bytes.
    pub receive: u64,
    /// Current send buffer, bytes.
    pub send: u64,
    /// Ceiling of both, bytes.
    pub max: u64,
    /// Times a write was blocked with the send buffer at the ceiling and the
    /// congestion window asking for more.
    pub send_limited: u64,
    /// Times the receive window grew.
    pub receive_grown: u64,
    /// Start of the current receive measurement: instant and bytes consumed.
    epoch: Option<(Instant, u64)>,
}

impl Windows {
    /// Windows starting at `initial` (receive) and twice `cwnd` (send), both
    /// capped at `max` (raised to `initial` if smaller).
    pub fn new(initial: u64, max: u64, cwnd: u64) -> Self {
        let max = max.max(initial).max(MIN_SEND);
        Windows {
            receive: initial.max(1),
            send: cwnd.saturating_mul(2).clamp(MIN_SEND, max),
            max,
            send_limited: 0,
            receive_grown: 0,
            epoch: None,
        }
    }

    /// The receiver's application has consumed `consumed` bytes in total by
    /// `now`; `rtt` is the smoothed RTT. Returns the new receive window when
    /// it should grow.
    pub fn on_consumed(&mut self, now: Instant, consumed: u64, rtt: Duration) -> Option<u64> {
        let (t0, b0) = *self.epoch.get_or_insert((now, consumed));
        let elapsed = now.saturating_duration_since(t0);
        if elapsed < rtt.max(MIN_INTERVAL) {
            return None;
        }
        self.epoch = Some((now, consumed));
        if self.receive >= self.max {
            return None;
        }
        // Bytes per RTT over the interval (which may span several RTTs).
        let per_rtt = consumed.saturating_sub(b0) as f64 * rtt.as_secs_f64()
            / elapsed.as_secs_f64().max(1e-9);
        let target = (2.0 * per_rtt) as u64;
        if target <= self.receive {
            return None;
        }
        self.receive = target.min(self.max);
        self.receive_grown += 1;
        Some(self.receive)
    }

    /// A write was blocked while the congestion window was `cwnd`. Returns
    /// the new send buffer when it should grow.
    pub fn on_write_blocked(&mut self, cwnd: u64) -> Option<u64> {
        let want = cwnd.saturating_mul(2);
        if want <= self.send {
            return None;
        }
        if self.send >= self.max {
            self.send_limited += 1;
            return None;
        }
        self.send = want.min(self.max);
        Some(self.send)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn receive_window_doubles_per_rtt_while_it_binds() {
        let t0 = Instant::now();
        let rtt = 100 * MS;
        let mut w = Windows::new(1 << 20, 64 << 20, 12_000);
        let mut consumed = 0;
        assert_eq!(
            w.on_consumed(t0, consumed, rtt),
            None,
            "first call starts the epoch"
        );
        let mut sizes = Vec::new();
        for k in 1..=8u32 {
            // A window-limited sender delivers one window per RTT.
            consumed += w.receive;
            if let Some(n) = w.on_consumed(t0 + rtt * k, consumed, rtt) {
                sizes.push(n);
            }
        }
        assert_eq!(
            sizes,
            vec![2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20],
            "doubles each RTT, then stops at the ceiling"
        );
        assert_eq!(w.receive_grown, 6);
    }

    #[test]
    fn a_slow_reader_keeps_its_window() {
        let t0 = Instant::now();
        let rtt = 10 * MS;
        let mut w = Windows::new(1 << 20, 64 << 20, 12_000);
        w.on_consumed(t0, 0, rtt);
        // 100 kB per RTT is far below the 1 MiB window.
        for k in 1..=50u32 {
            assert_eq!(
                w.on_consumed(t0 + rtt * k, 100_000 * u64::from(k), rtt),
                None
            );
        }
        assert_eq!(w.receive, 1 << 20);
    }

    #[test]
    fn no_adjustment_within_one_rtt() {
        let t0 = Instant::now();
        let mut w = Windows::new(1 << 20, 64 << 20, 12_000);
        w.on_consumed(t0, 0, 50 * MS);
        assert_eq!(w.on_consumed(t0 + 49 * MS, 10 << 20, 50 * MS), None);
        assert!(w.on_consumed(t0 + 50 * MS, 10 << 20, 50 * MS).is_some());
    }

    #[test]
    fn send_buffer_follows_twice_the_congestion_window_up_to_the_ceiling() {
        let mut w = Windows::new(1 << 20, 1 << 20, 12_000);
        assert_eq!(w.send, MIN_SEND, "2 x 12 kB is below the floor");
        assert_eq!(w.on_write_blocked(20_000), None, "2 cwnd fits");
        assert_eq!(w.on_write_blocked(100_000), Some(200_000));
        assert_eq!(w.on_write_blocked(10 << 20), Some(1 << 20), "capped");
        assert_eq!(w.send_limited, 0);
        assert_eq!(w.on_write_blocked(10 << 20), None);
        assert_eq!(w.send_limited, 1, "blocked at the ceiling is counted");
    }
}

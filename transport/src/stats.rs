//! Per-connection statistics: a goodput / cwnd / RTT time series sampled at a
//! configurable interval, the per-packet RTT histogram (HdrHistogram, µs),
//! losses, bytes in flight and the DSCP codepoints seen from the peer.

use std::time::Duration;

use hdrhistogram::Histogram;
use quinn_proto::{ConnectionHandle, Side};

use crate::adapter::CcaSnapshot;

/// Time-series samples kept per connection (older ones are kept, newer dropped
/// and counted once full, so memory stays bounded).
pub const MAX_SAMPLES: usize = 100_000;

/// One point of a connection's time series.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Time since the connection was created.
    pub t: Duration,
    /// Application bytes read from the peer so far.
    pub rx_bytes: u64,
    /// Application bytes accepted for sending so far.
    pub tx_bytes: u64,
    /// Receive goodput over the last interval, bit/s.
    pub rx_bps: f64,
    /// Send goodput (bytes acknowledged) over the last interval, bit/s.
    pub tx_bps: f64,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// The CCA's pacing rate, bytes/s, if it paces.
    pub pacing_rate: Option<u64>,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Packets declared lost so far.
    pub lost_packets: u64,
}

/// Running counters of one connection, owned by the endpoint.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub interval: Duration,
    pub next_sample: Duration,
    pub samples: Vec<Sample>,
    pub samples_dropped: u64,
    pub app_rx: u64,
    pub app_tx: u64,
    pub peer_dscp: [u64; 64],
    last_rx: u64,
    last_acked: u64,
    last_t: Duration,
}

impl Recorder {
    pub fn new(interval: Duration) -> Self {
        Recorder {
            interval,
            next_sample: interval,
            samples: Vec::new(),
            samples_dropped: 0,
            app_rx: 0,
            app_tx: 0,
            peer_dscp: [0; 64],
            last_rx: 0,
            last_acked: 0,
            last_t: Duration::ZERO,
        }
    }

    /// Record a sample at `t` (time since connection start).
    pub fn sample(&mut self, t: Duration, cca: &CcaSnapshot, srtt: Duration, lost_packets: u64) {
        let dt = t.saturating_sub(self.last_t).as_secs_f64();
        let rate = |delta: u64| {
            if dt > 0.0 {
                delta as f64 * 8.0 / dt
            } else {
                0.0
            }
        };
        let s = Sample {
            t,
            rx_bytes: self.app_rx,
            tx_bytes: self.app_tx,
            rx_bps: rate(self.app_rx - self.last_rx),
            tx_bps: rate(cca.acked_bytes.saturating_sub(self.last_acked)),
            cwnd: cca.stats.window,
            pacing_rate: cca.stats.pacing_rate,
            srtt,
            bytes_in_flight: cca.bytes_in_flight,
            lost_packets,
        };
        self.last_rx = self.app_rx;
        self.last_acked = cca.acked_bytes;
        self.last_t = t;
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(s);
        } else {
            self.samples_dropped += 1;
        }
        self.next_sample = (self.next_sample + self.interval).max(t + self.interval / 2);
    }
}

/// Everything known about one connection, as returned by
/// [`Endpoint::stats`](crate::Endpoint::stats) and in
/// [`Event::Drained`](crate::Event::Drained).
#[derive(Clone, Debug)]
pub struct ConnReport {
    /// The connection.
    pub handle: ConnectionHandle,
    /// Client or server.
    pub side: Side,
    /// Time from creation to this report.
    pub age: Duration,
    /// DSCP codepoint put on outgoing packets (`None` when marking is off).
    pub dscp_marking: Option<u8>,
    /// Application bytes read.
    pub app_rx_bytes: u64,
    /// Application bytes written.
    pub app_tx_bytes: u64,
    /// Time series.
    pub samples: Vec<Sample>,
    /// Samples not kept because the series was full.
    pub samples_dropped: u64,
    /// Per-packet RTT samples (ACK arrival − send), microseconds.
    pub rtt_us: Histogram<u64>,
    /// Congestion controller view.
    pub cca: CcaSnapshot,
    /// quinn-proto's counters (packets, frames, losses, path).
    pub quic: quinn_proto::ConnectionStats,
    /// Datagrams received from the peer, by DSCP codepoint.
    pub peer_dscp: [u64; 64],
    /// Flow-control windows (receive window, send buffer, how often they grew or capped).
    pub windows: crate::window::Windows,
}

impl ConnReport {
    /// RTT at quantile `q` (0..=1), or `None` with no samples.
    pub fn rtt_quantile(&self, q: f64) -> Option<Duration> {
        (!self.rtt_us.is_empty()).then(|| Duration::from_micros(self.rtt_us.value_at_quantile(q)))
    }

    /// Whether flow control rather than congestion control limited this
    /// connection as a sender: it told the peer it was blocked by the peer's
    /// window (DATA_BLOCKED / STREAM_DATA_BLOCKED frames), or its own send
    /// buffer was at the ceiling while the congestion window wanted more.
    pub fn window_limited(&self) -> bool {
        self.quic.frame_tx.data_blocked + self.quic.frame_tx.stream_data_blocked > 0
            || self.windows.send_limited > 0
    }

    /// The DSCP codepoints the peer's datagrams carried, with counts.
    pub fn peer_dscp_seen(&self) -> Vec<(u8, u64)> {
        (0u8..64)
            .zip(self.peer_dscp)
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// Endpoint-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams handed to [`Endpoint::handle_datagram`](crate::Endpoint::handle_datagram).
    pub datagrams_in: u64,
    /// Datagrams quinn-proto could not attribute or decode (garbage), dropped.
    pub datagrams_dropped: u64,
    /// Datagrams returned by `poll_transmit`.
    pub datagrams_out: u64,
    /// Stateless responses (version negotiation, resets, refusals) sent.
    pub responses: u64,
    /// Stateless responses dropped because the queue was full.
    pub responses_dropped: u64,
    /// Incoming connections accepted.
    pub accepted: u64,
    /// Incoming connections refused (`CONNECTION_REFUSED`) because
    /// `max_connections` were held (or the endpoint is no server).
    pub refused: u64,
    /// Incoming connections refused (`CONNECTION_REFUSED`) because
    /// [`Admission::max_handshakes`](crate::endpoint::Admission::max_handshakes)
    /// handshakes were in progress.
    pub refused_handshakes: u64,
    /// Incoming connections answered with a Retry (address validation
    /// under load, see [`Admission`](crate::endpoint::Admission)); no state kept.
    pub retry_sent: u64,
    /// Incoming connections dropped unanswered because the queue of
    /// stateless responses was full.
    pub ignored: u64,
    /// Incoming connections whose handshake could not start (an Initial
    /// that fails authentication: garbage with a valid-looking header).
    pub accept_failed: u64,
    /// Connections closed by the idle timeout after their handshake (the
    /// peer went silent: vanished mid-transfer).
    pub timed_out_idle: u64,
    /// Server connections whose handshake did not complete in time (the
    /// handshake timeout or the idle timeout during the handshake).
    pub timed_out_handshake: u64,
    /// Application events dropped because the queue was full.
    pub events_dropped: u64,
}

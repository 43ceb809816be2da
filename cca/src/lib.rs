//! # tollgate-cca
//!
//! Congestion-control algorithms as pure state machines. Any QUIC or TCP sender
//! drives them through one trait, [`CongestionControl`]; no algorithm reads a
//! clock (every call carries `now`), performs I/O or knows about QUIC types.
//!
//! | module | algorithm | source |
//! |---|---|---|
//! | [`newreno`] | NewReno: slow start, AIMD, one reduction per recovery period | RFC 9002 §7, RFC 6582 |
//! | [`cubic`] | CUBIC: cubic growth, Reno-friendly region, fast convergence | RFC 9438 |
//! | [`libra`] | TCP Libra: RTT-independent window rule, fed by [`capprobe`] | Marfia et al., "TCP Libra" |
//! | [`taxed`] | sender-side tax wrapper over any algorithm, gated by [`detector`] | Brown & Kaur poster |
//! | [`highspeed`] | HighSpeed TCP: response-function a(w), b(w) above 38 segments | RFC 3649 |
//! | [`scalable`] | Scalable TCP: +1 % of a segment per ACK, -12.5 % per loss | Kelly, ACM CCR 2003 |
//! | [`bic`] | BIC: binary search towards the last W_max, then max probing | Xu, Harfoush, Rhee, INFOCOM 2004 |
//! | [`htcp`] | H-TCP: increase grows with time since loss, RTT-ratio backoff | Leith & Shorten, PFLDnet 2004 |
//! | [`hybla`] | Hybla: growth scaled by rho = RTT / 25 ms | Caini & Firrincieli, IJSCN 2004 |
//! | [`illinois`] | Illinois: delay-driven alpha 10..0.3 and beta 1/8..1/2 | Liu, Başar, Srikant, VALUETOOLS 2006 |
//! | [`vegas`] | Vegas: keep 2..4 segments queued | Brakmo & Peterson, IEEE JSAC 1995 |
//! | [`veno`] | Veno: Vegas backlog tells random from congestive loss | Fu & Liew, IEEE JSAC 2003 |
//! | [`westwood`] | Westwood+: cwnd = bandwidth estimate * RTT_min after a loss | Grieco & Mascolo, ACM CCR 2004 |
//! | [`yeah`] | YeAH: Scalable/Reno modes, precautionary decongestion | Baiocchi et al., PFLDnet 2007 |
//! | [`ledbat`] | LEDBAT: scavenger holding queueing delay at a target | RFC 6817 |
//! | [`bbr`] | BBR v1: max-bandwidth / min-RTT model, pacing, gain cycling | Cardwell et al., ACM Queue 2016 |
//! | [`bbr3`] | BBRv3: BBR with loss/ECN bounds, ProbeBW DOWN/CRUISE/REFILL/UP | draft-ietf-ccwg-bbr-06 |
//! | [`prague`] | Prague: L4S scalable ECN response (DCTCP alpha), RTT independence below 25 ms | draft-briscoe-iccrg-prague-congestion-control-04, RFC 9331 |
//! | [`cbr`] | CBR: paced at a constant rate, losses ignored (the unresponsive flood of fairness tests) | Tollgate |
//!
//! [`classic`] holds small helpers the classic variants share; [`delivery`]
//! the delivery-rate sampler both BBRs use.
//!
//! Algorithms are built from spec strings such as `taxed(cubic, tau=0.025)` by
//! the [`registry`]; see [`registry::ALGORITHMS`] for every name, parameter and
//! default, and [`registry::register`] to add an algorithm of your own. [`model`] holds a small deterministic bottleneck model used by the
//! tests and by `tollgate cca trace`. [`rng`] is the one seeded random
//! generator (xoshiro256++) that the algorithms, the model, the router and the
//! transport draw from.
//!
//! ## Units
//! Windows and byte counts are bytes; rates are bytes per second; time is
//! [`Time`] (nanoseconds since a caller-chosen epoch) and [`std::time::Duration`].

use std::fmt;
use std::time::Duration;

pub mod bbr;
pub mod bbr3;
pub mod bic;
pub mod capprobe;
pub mod cbr;
pub mod classic;
pub mod cubic;
pub mod delivery;
pub mod detector;
pub mod highspeed;
pub mod htcp;
pub mod hybla;
pub mod hystart;
pub mod illinois;
pub mod ledbat;
pub mod libra;
pub mod model;
pub mod newreno;
pub mod prague;
pub mod registry;
pub mod rng;
pub mod scalable;
pub mod spec;
pub mod taxed;
pub mod time;
pub mod units;
pub mod variant;
pub mod vegas;
pub mod veno;
pub mod westwood;
pub mod yeah;

pub use registry::{build, Env};
pub use spec::SpecError;
pub use time::Time;
pub use variant::VariantId;

/// A packet handed to the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentPacket {
    /// Packet number (strictly increasing per connection).
    pub packet_number: u64,
    /// Bytes counted against the congestion window.
    pub bytes: u64,
    /// Bytes in flight after this packet was sent.
    pub bytes_in_flight: u64,
}

/// The round-trip-time view at the moment of an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttSample {
    /// The sample taken from this ACK (or the latest one the sender has).
    pub latest: Duration,
    /// The sender's smoothed RTT (RFC 9002 `smoothed_rtt`).
    pub smoothed: Duration,
    /// The minimum RTT seen on the path.
    pub min: Duration,
}

impl RttSample {
    /// A sample where latest, smoothed and min are all `rtt`.
    pub fn fixed(rtt: Duration) -> Self {
        RttSample {
            latest: rtt,
            smoothed: rtt,
            min: rtt,
        }
    }
}

/// One newly acknowledged packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Packet number of the acknowledged packet.
    pub packet_number: u64,
    /// Bytes acknowledged.
    pub bytes: u64,
    /// When the acknowledged packet was sent.
    pub sent_time: Time,
    /// RTT estimates after processing this ACK.
    pub rtt: RttSample,
    /// Whether the sender was application-limited when the packet was sent;
    /// algorithms do not grow the window on such ACKs.
    pub app_limited: bool,
}

/// The end of one ACK frame's worth of [`Ack`] calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckBatch {
    /// Bytes still in flight after the batch.
    pub bytes_in_flight: u64,
    /// Whether the sender is currently application-limited.
    pub app_limited: bool,
    /// Largest packet number acknowledged in this batch, if any.
    pub largest_acked: Option<u64>,
}

/// What signalled congestion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionKind {
    /// Packets were declared lost.
    Loss,
    /// The peer reported ECN Congestion Experienced marks.
    EcnCe,
}

/// A congestion signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CongestionEvent {
    /// Loss or ECN-CE.
    pub kind: CongestionKind,
    /// Send time of the newest packet the signal is about; signals about
    /// packets sent before the current recovery period began are ignored
    /// (one reduction per recovery period).
    pub sent_time: Time,
    /// Bytes declared lost (0 for ECN-CE).
    pub lost_bytes: u64,
    /// RFC 9002 §7.6 persistent congestion: collapse to the minimum window.
    pub persistent_congestion: bool,
}

/// A value reported in [`Stats::details`].
#[derive(Clone, Debug, PartialEq)]
pub enum StatValue {
    /// A number.
    Num(f64),
    /// A label, e.g. where an estimate came from.
    Text(&'static str),
}

impl fmt::Display for StatValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatValue::Num(v) => write!(f, "{v}"),
            StatValue::Text(s) => f.write_str(s),
        }
    }
}

/// A snapshot of an algorithm's state for statistics and traces.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Congestion window, bytes.
    pub window: u64,
    /// Slow-start threshold, bytes (`None` while unset / infinite).
    pub ssthresh: Option<u64>,
    /// Pacing rate, bytes per second, if the algorithm paces.
    pub pacing_rate: Option<u64>,
    /// Algorithm-specific values, e.g. Libra's capacity estimate and its source.
    pub details: Vec<(&'static str, StatValue)>,
}

/// The [`Stats::details`] key under which an algorithm reports its estimate
/// of the bottleneck capacity, Mbit/s (Libra's `C`).
pub const CAPACITY_MBPS: &str = "capacity_mbps";

impl Stats {
    /// The number reported under `key` in [`details`](Self::details), if any.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.details.iter().find_map(|(k, v)| match v {
            StatValue::Num(x) if *k == key => Some(*x),
            _ => None,
        })
    }
}

/// A congestion-control algorithm, driven by a sender.
///
/// The sender calls [`on_packet_sent`](Self::on_packet_sent) for every packet
/// that counts against the window, [`on_ack`](Self::on_ack) for every newly
/// acknowledged packet followed by one [`on_ack_batch_end`](Self::on_ack_batch_end)
/// per ACK frame, and [`on_congestion_event`](Self::on_congestion_event) for
/// losses and ECN-CE. It must not send while bytes in flight ≥
/// [`window`](Self::window), and paces at [`pacing_rate`](Self::pacing_rate)
/// when the algorithm gives one.
pub trait CongestionControl: Send + fmt::Debug {
    /// The registry name, e.g. `"cubic"` or `"taxed"`.
    fn name(&self) -> &'static str;

    /// The stable variant id (DSCP codepoint) of this algorithm instance.
    fn variant(&self) -> VariantId;

    /// A packet was sent.
    fn on_packet_sent(&mut self, now: Time, sent: &SentPacket) {
        let _ = (now, sent);
    }

    /// A packet was newly acknowledged.
    fn on_ack(&mut self, now: Time, ack: &Ack);

    /// All ACKs of one ACK frame have been passed to [`on_ack`](Self::on_ack).
    fn on_ack_batch_end(&mut self, now: Time, batch: &AckBatch) {
        let _ = (now, batch);
    }

    /// Loss or ECN-CE was detected.
    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent);

    /// The peer's ECN counts grew: of the packets it reports received since
    /// the last report, `acked_ect` carried an ECN-capable codepoint (ECT(0),
    /// ECT(1) or CE) and `ce` of them arrived marked CE. QUIC senders call it
    /// once per ACK frame whose ECN counts they examine (RFC 9000 §13.4.2),
    /// after that frame's [`on_ack_batch_end`](Self::on_ack_batch_end) and
    /// before its [`on_congestion_event`](Self::on_congestion_event) for the
    /// CE marks. A scalable algorithm computes the fraction of marked packets
    /// from the two; the default ignores them.
    fn on_ecn_counts(&mut self, now: Time, acked_ect: u64, ce: u64) {
        let _ = (now, acked_ect, ce);
    }

    /// Whether the algorithm responds to the fraction of CE marks rather
    /// than halving on any (L4S, RFC 9331): the sender then marks its packets
    /// ECT(1), which an L4S queue (DualPI2) classifies into its low-latency
    /// queue. `false` (ECT(0), the classic response) by default.
    fn l4s(&self) -> bool {
        false
    }

    /// The maximum datagram size changed to `mss` bytes.
    fn on_mtu_change(&mut self, now: Time, mss: u64);

    /// An outside controller (the sender-side tax) lowers the window to
    /// `window` bytes; the algorithm continues from there as if it had only
    /// grown that far. Values above the current window are ignored.
    fn impose_window(&mut self, now: Time, window: u64);

    /// The congestion window, bytes.
    fn window(&self) -> u64;

    /// The pacing rate in bytes per second, for algorithms that pace.
    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    /// A snapshot for statistics.
    fn stats(&self) -> Stats {
        Stats {
            window: self.window(),
            ssthresh: None,
            pacing_rate: self.pacing_rate(),
            details: Vec::new(),
        }
    }

    /// A boxed copy (drivers such as quinn-proto clone controller templates).
    fn clone_box(&self) -> Box<dyn CongestionControl>;
}

impl Clone for Box<dyn CongestionControl> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

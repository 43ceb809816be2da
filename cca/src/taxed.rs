//! Sender-side taxation (Brown & Kaur, "Addressing Legacy Challenge of RTT
//! Unfairness using Sender-Side Taxation", poster): a wrapper that
//! taxes any base algorithm's window.
//!
//! After the base algorithm processes an ACK that grew its window from `w0` to
//! `w1`, the tax lowers it (through [`CongestionControl::impose_window`]):
//!
//! | mode | rule | note |
//! |---|---|---|
//! | `growth` (default) | `w = w1 - tau * w1` on ACKs where the window grew | the poster's "option 6" |
//! | `every-ack` | `w = w1 - tau * w1` on every ACK | "like Cebinae" |
//! | `increment` | `w = w0 + (1 - tau) * (w1 - w0)` | tax only the increment |
//! | `rtt-scaled` | `growth` with `tau = min(rtt_cap, rtt_scale / RTT)` | shorter RTT, higher tax |
//!
//! With `per=packet` (default) the tax is levied per newly acknowledged
//! packet; with `per=ack`, once per ACK frame ([`CongestionControl::on_ack_batch_end`]),
//! comparing the window before and after the frame's packets, as a TCP
//! sender levies it per ACK. Under QUIC's ACK of every second packet the two
//! differ by a factor of two in the window where growth and tax balance
//! (about `g / tau` segments for `g` segments of growth per levy).
//!
//! With `detector=on` (default) the tax applies only while the RTT-rise
//! [`CongestionDetector`] says the path is congested; the window never goes
//! below two segments. The taxed variant's id is its base id with the tax bit
//! set ([`VariantId::taxed`]).

use std::time::Duration;

use crate::detector::{CongestionDetector, DetectorConfig};
use crate::registry::Algorithm;
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{
    Ack, AckBatch, CongestionControl, CongestionEvent, SentPacket, StatValue, Stats, Time,
    VariantId,
};

/// How the tax is levied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaxMode {
    /// `w = w1 (1 - tau)` on ACKs that grew the window.
    Growth,
    /// `w = w1 (1 - tau)` on every ACK.
    EveryAck,
    /// Only the increment is taxed: `w = w0 + (1 - tau)(w1 - w0)`.
    Increment,
    /// `Growth` with `tau = min(rtt_cap, rtt_scale / RTT)`.
    RttScaled,
}

const MODES: &[&str] = &["growth", "every-ack", "increment", "rtt-scaled"];
const PER: &[&str] = &["packet", "ack"];

/// The tax's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaxConfig {
    /// Tax rate.
    pub tau: f64,
    /// How the tax is levied.
    pub mode: TaxMode,
    /// `rtt-scaled`: `tau = rtt_scale / RTT` ...
    pub rtt_scale: Duration,
    /// ... capped at this.
    pub rtt_cap: f64,
    /// Levy once per ACK frame instead of once per acknowledged packet.
    pub per_ack_frame: bool,
    /// Gate the tax on the congestion detector.
    pub detector: bool,
    /// Detector settings.
    pub detector_config: DetectorConfig,
}

const PARAMS: &[Param] = &[
    Param {
        name: "tau",
        kind: Kind::Float {
            min: 0.0,
            max: 0.99,
        },
        default: "0.025",
        help: "tax rate",
    },
    Param {
        name: "mode",
        kind: Kind::Choice(MODES),
        default: "growth",
        help: "when and what to tax",
    },
    Param {
        name: "rtt_scale",
        kind: Kind::Duration,
        default: "1ms",
        help: "rtt-scaled mode: tau = rtt_scale / RTT (1ms = the poster's 1000/RTT_us)",
    },
    Param {
        name: "rtt_cap",
        kind: Kind::Float {
            min: 0.0,
            max: 0.99,
        },
        default: "0.05",
        help: "rtt-scaled mode: largest tau",
    },
    Param {
        name: "per",
        kind: Kind::Choice(PER),
        default: "packet",
        help: "levy the tax per acknowledged packet or once per ACK frame (a TCP sender's per-ACK levy)",
    },
    Param {
        name: "detector",
        kind: Kind::Bool,
        default: "on",
        help: "tax only while the RTT-rise detector says congested",
    },
    Param {
        name: "ring",
        kind: Kind::Int { min: 1, max: 16 },
        default: "4",
        help: "detector: RTT samples kept",
    },
    Param {
        name: "interval",
        kind: Kind::Duration,
        default: "25ms",
        help: "detector: time between samples",
    },
    Param {
        name: "expiry",
        kind: Kind::Duration,
        default: "100ms",
        help: "detector: sample lifetime",
    },
    Param {
        name: "threshold",
        kind: Kind::Duration,
        default: "1ms",
        help: "detector: RTT rise meaning congestion",
    },
];

impl TaxConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        let mode = match args.choice("mode")? {
            0 => TaxMode::Growth,
            1 => TaxMode::EveryAck,
            2 => TaxMode::Increment,
            _ => TaxMode::RttScaled,
        };
        Ok(TaxConfig {
            tau: args.float("tau")?,
            mode,
            rtt_scale: args.duration("rtt_scale")?,
            rtt_cap: args.float("rtt_cap")?,
            per_ack_frame: args.choice("per")? == 1,
            detector: args.bool("detector")?,
            detector_config: DetectorConfig {
                ring: args.int("ring")? as usize,
                interval: args.duration("interval")?,
                expiry: args.duration("expiry")?,
                threshold: args.duration("threshold")?,
            },
        })
    }
}

impl Default for TaxConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("taxed", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "taxed",
    variant: VariantId::UNMARKED,
    summary: "wraps a base CCA: w -= tau * w on window growth, gated by an RTT-rise detector",
    source: "Brown & Kaur sender-side taxation poster",
    takes_base: true,
    params: PARAMS,
    build: |args, base, _env| {
        let base = base.expect("registry passes the base algorithm");
        Ok(Box::new(Taxed::new(base, TaxConfig::from_args(args)?)))
    },
};

/// A base algorithm with a sender-side tax.
#[derive(Debug)]
pub struct Taxed {
    config: TaxConfig,
    detector: CongestionDetector,
    taxed_acks: u64,
    taxed_bytes: u64,
    /// `per=ack`: the window before the current ACK frame, the frame's
    /// latest RTT sample and the detector's verdict on it.
    frame: Option<(u64, Duration, bool)>,
    base: Box<dyn CongestionControl>,
}

impl Taxed {
    /// Tax `base` with `config`.
    pub fn new(base: Box<dyn CongestionControl>, config: TaxConfig) -> Self {
        Taxed {
            detector: CongestionDetector::new(config.detector_config),
            config,
            taxed_acks: 0,
            taxed_bytes: 0,
            frame: None,
            base,
        }
    }

    /// The wrapped algorithm.
    pub fn base(&self) -> &dyn CongestionControl {
        self.base.as_ref()
    }

    /// Levy the tax on the growth from `before` to the base's window now
    /// (one packet's or one ACK frame's), given the latest RTT sample and the
    /// detector's verdict on it.
    fn levy(&mut self, now: Time, before: u64, rtt: Duration, congested: bool) {
        if self.config.detector && !congested {
            return;
        }
        let after = self.base.window();
        let tau = self.tax_rate(rtt);
        let grew = after > before;
        let taxed = match self.config.mode {
            TaxMode::Growth | TaxMode::RttScaled if grew => after as f64 * (1.0 - tau),
            TaxMode::EveryAck => after as f64 * (1.0 - tau),
            TaxMode::Increment if grew => before as f64 + (after - before) as f64 * (1.0 - tau),
            _ => return,
        } as u64;
        self.base.impose_window(now, taxed);
        self.taxed_acks += 1;
        self.taxed_bytes += after.saturating_sub(self.base.window());
    }

    fn tax_rate(&self, rtt: Duration) -> f64 {
        match self.config.mode {
            TaxMode::RttScaled if !rtt.is_zero() => {
                (self.config.rtt_scale.as_secs_f64() / rtt.as_secs_f64()).min(self.config.rtt_cap)
            }
            TaxMode::RttScaled => self.config.rtt_cap,
            _ => self.config.tau,
        }
    }
}

impl CongestionControl for Taxed {
    fn name(&self) -> &'static str {
        "taxed"
    }

    fn variant(&self) -> VariantId {
        self.base.variant().taxed()
    }

    fn on_packet_sent(&mut self, now: Time, sent: &SentPacket) {
        self.base.on_packet_sent(now, sent);
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        let before = self.base.window();
        self.base.on_ack(now, ack);
        let congested = self.detector.on_rtt(now, ack.rtt.latest);
        if self.config.per_ack_frame {
            let start = self.frame.map_or(before, |f| f.0);
            self.frame = Some((start, ack.rtt.latest, congested));
            return;
        }
        self.levy(now, before, ack.rtt.latest, congested);
    }

    fn on_ack_batch_end(&mut self, now: Time, batch: &AckBatch) {
        self.base.on_ack_batch_end(now, batch);
        if let Some((before, rtt, congested)) = self.frame.take() {
            self.levy(now, before, rtt, congested);
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        self.base.on_congestion_event(now, event);
    }

    fn on_ecn_counts(&mut self, now: Time, acked_ect: u64, ce: u64) {
        self.base.on_ecn_counts(now, acked_ect, ce);
    }

    fn l4s(&self) -> bool {
        self.base.l4s()
    }

    fn on_mtu_change(&mut self, now: Time, mss: u64) {
        self.base.on_mtu_change(now, mss);
    }

    fn impose_window(&mut self, now: Time, window: u64) {
        self.base.impose_window(now, window);
    }

    fn window(&self) -> u64 {
        self.base.window()
    }

    fn pacing_rate(&self) -> Option<u64> {
        self.base.pacing_rate()
    }

    fn stats(&self) -> Stats {
        let mut stats = self.base.stats();
        stats
            .details
            .push(("base", StatValue::Text(self.base.name())));
        stats.details.push((
            "congested",
            StatValue::Num(f64::from(u8::from(self.detector.congested()))),
        ));
        stats
            .details
            .push(("taxed_acks", StatValue::Num(self.taxed_acks as f64)));
        stats
            .details
            .push(("taxed_bytes", StatValue::Num(self.taxed_bytes as f64)));
        stats
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(Taxed {
            config: self.config,
            detector: self.detector.clone(),
            taxed_acks: self.taxed_acks,
            taxed_bytes: self.taxed_bytes,
            frame: self.frame,
            base: self.base.clone(),
        })
    }
}

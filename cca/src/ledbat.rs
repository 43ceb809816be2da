//! LEDBAT, Low Extra Delay Background Transport (RFC 6817).
//!
//! A scavenger: it uses spare capacity while keeping at most `TARGET` of
//! queueing delay, and yields to standard TCP, which pushes the delay past
//! `TARGET`. Per ACK (RFC 6817 §2.4.2):
//!
//! ```text
//! queuing_delay = FILTER(current delays) - min(base delay history)
//! off_target    = (TARGET - queuing_delay) / TARGET
//! cwnd         += GAIN * off_target * bytes_acked * MSS / cwnd
//! cwnd          = min(cwnd, flightsize + ALLOWED_INCREASE * MSS)
//! cwnd          = max(cwnd, MIN_CWND * MSS)
//! ```
//!
//! On a loss, once per recovery period (≈ once per RTT):
//! `cwnd = min(cwnd, max(cwnd / 2, MIN_CWND * MSS))`. By default there is no
//! slow start: the window starts at `INIT_CWND` segments and the delay rule
//! alone grows it (at most `GAIN` segments per RTT, never faster than TCP).
//!
//! **`slow_start=on`** is LEDBAT as ns-3's `TcpLedbat` runs it by default
//! (attribute `SSParam = yes`; ns-3 3.37 checked): NewReno's slow start
//! (`cwnd += bytes_acked`) from `INIT_CWND` until the first loss, the delay
//! rule after it, and slow start again up to the halved window after a
//! persistent congestion (ns-3: after a retransmission timeout). Studies run
//! on ns-3's TCP variants (the RRMQS thesis) measured this LEDBAT; a short
//! transfer without slow start takes many more round trips than with it.
//!
//! **Delay samples.** RFC 6817 measures one-way delay from receiver
//! timestamps; the trait gives RTT samples, so each ACK's `latest` RTT is the
//! delay sample (reverse-path queueing is then counted too; with an
//! uncongested reverse path the difference cancels in `current - base`).
//! `FILTER` is the minimum of the last `current_filter` samples (the RFC's
//! suggested MIN filter). The **base delay history** keeps the minimum delay
//! of each of the last `base_history` one-minute intervals (RFC: 10), so a
//! route change that raises the base delay is forgotten within that time;
//! memory is a fixed array of 60 minutes at most.
//!
//! **`TARGET` default: 100 ms.** RFC 6817 §2.5.1 requires `TARGET <= 100 ms`;
//! 100 ms is also what the deployed implementations (BitTorrent's uTP / libutp
//! and Apple's LEDBAT) use. A larger target keeps LEDBAT from mistaking delay
//! jitter for congestion and lets it use the link alone; the cost is up to
//! 100 ms of standing queue. Note that on a bottleneck whose buffer holds less
//! than `TARGET` of queue, LEDBAT never sees its target and ends up loss-driven
//! like Reno (set `target=25ms` for shallow buffers).
//!
//! Defaults (RFC 6817): `target = 100ms`, `gain = 1`, `allowed_increase = 1`,
//! `init_cwnd = 2`, `min_cwnd = 2`, `current_filter = 4`, `base_history = 10`,
//! `slow_start = off`. ns-3's `TcpLedbat`: `slow_start=on, init_cwnd=10`.

use std::time::Duration;

use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{
    Ack, AckBatch, CongestionControl, CongestionEvent, SentPacket, StatValue, Stats, Time,
    VariantId,
};

/// LEDBAT's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LedbatConfig {
    /// Target queueing delay.
    pub target: Duration,
    /// Window change per RTT at full off-target, segments.
    pub gain: f64,
    /// Window may exceed the flight size by at most this many segments.
    pub allowed_increase: f64,
    /// Initial window, segments.
    pub init_cwnd: u64,
    /// Smallest window, segments.
    pub min_cwnd: u64,
    /// Delay samples in the current-delay filter.
    pub current_filter: usize,
    /// One-minute intervals of base-delay history.
    pub base_history: usize,
    /// NewReno slow start until the first loss (ns-3's `TcpLedbat`).
    pub slow_start: bool,
}

const PARAMS: &[Param] = &[
    Param {
        name: "target",
        kind: Kind::Duration,
        default: "100ms",
        help: "TARGET queueing delay (RFC 6817: at most 100ms)",
    },
    Param {
        name: "gain",
        kind: Kind::Float {
            min: 0.01,
            max: 1.0,
        },
        default: "1",
        help: "GAIN: segments per RTT at full off-target",
    },
    Param {
        name: "allowed_increase",
        kind: Kind::Float {
            min: 0.0,
            max: 1000.0,
        },
        default: "1",
        help: "ALLOWED_INCREASE over flight size (segments)",
    },
    Param {
        name: "init_cwnd",
        kind: Kind::Int { min: 2, max: 1000 },
        default: "2",
        help: "INIT_CWND (segments)",
    },
    Param {
        name: "min_cwnd",
        kind: Kind::Int { min: 2, max: 1000 },
        default: "2",
        help: "MIN_CWND (segments)",
    },
    Param {
        name: "current_filter",
        kind: Kind::Int {
            min: 1,
            max: MAX_FILTER as u64,
        },
        default: "4",
        help: "CURRENT_FILTER: delay samples, min taken",
    },
    Param {
        name: "base_history",
        kind: Kind::Int {
            min: 1,
            max: MAX_HISTORY as u64,
        },
        default: "10",
        help: "BASE_HISTORY: minutes of base-delay minima",
    },
    Param {
        name: "slow_start",
        kind: Kind::Bool,
        default: "off",
        help: "NewReno slow start until the first loss (on: ns-3's TcpLedbat)",
    },
];

const MAX_FILTER: usize = 16;
const MAX_HISTORY: usize = 60;
const MINUTE_NS: u64 = 60_000_000_000;

impl LedbatConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(LedbatConfig {
            target: args.duration("target")?.max(Duration::from_micros(1)),
            gain: args.float("gain")?,
            allowed_increase: args.float("allowed_increase")?,
            init_cwnd: args.int("init_cwnd")?,
            min_cwnd: args.int("min_cwnd")?,
            current_filter: args.int("current_filter")? as usize,
            base_history: args.int("base_history")? as usize,
            slow_start: args.bool("slow_start")?,
        })
    }
}

impl Default for LedbatConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("ledbat", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "ledbat",
    variant: VariantId::LEDBAT,
    summary: "scavenger: hold queueing delay at TARGET (100ms), yield to loss-based flows",
    source: "RFC 6817",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Ledbat::new(LedbatConfig::from_args(args)?, env))),
};

/// LEDBAT congestion control.
#[derive(Clone, Debug)]
pub struct Ledbat {
    config: LedbatConfig,
    mss: u64,
    cwnd: f64,
    /// Recent delay samples (ring) and how many are valid.
    current: [Duration; MAX_FILTER],
    current_len: usize,
    current_next: usize,
    /// Per-minute base-delay minima (ring), the minute of the newest, and count.
    base: [Duration; MAX_HISTORY],
    base_len: usize,
    base_newest: usize,
    base_minute: u64,
    /// Bytes in flight as last reported by the sender, and whether it reports.
    in_flight: u64,
    knows_flight: bool,
    recovery_start: Option<Time>,
    queuing_delay: Duration,
    /// `slow_start=on`: the window slow start ends at (bytes); infinite
    /// until the first loss.
    ssthresh: f64,
    /// In slow start: from the start (`slow_start=on`) until the first loss
    /// or `ssthresh`, and again after a persistent congestion. Once the delay
    /// rule has taken over, a window below `ssthresh` (the flight-size cap,
    /// an imposed window) does not slow-start again, as in ns-3.
    slow_starting: bool,
}

impl Ledbat {
    /// LEDBAT with `config` for a sender described by `env`.
    pub fn new(config: LedbatConfig, env: &Env) -> Self {
        Ledbat {
            config,
            mss: env.mss,
            cwnd: (config.init_cwnd.max(config.min_cwnd) * env.mss) as f64,
            current: [Duration::ZERO; MAX_FILTER],
            current_len: 0,
            current_next: 0,
            base: [Duration::MAX; MAX_HISTORY],
            base_len: 0,
            base_newest: 0,
            base_minute: 0,
            in_flight: 0,
            knows_flight: false,
            recovery_start: None,
            queuing_delay: Duration::ZERO,
            ssthresh: f64::INFINITY,
            slow_starting: config.slow_start,
        }
    }

    /// The current queueing-delay estimate.
    pub fn queuing_delay(&self) -> Duration {
        self.queuing_delay
    }

    /// The base delay (minimum over the history), if any sample was seen.
    pub fn base_delay(&self) -> Option<Duration> {
        self.base[..self.base_len].iter().copied().min()
    }

    fn min_window(&self) -> f64 {
        (self.config.min_cwnd * self.mss) as f64
    }

    fn update_base(&mut self, now: Time, delay: Duration) {
        let minute = now.as_nanos() / MINUTE_NS;
        if self.base_len == 0 {
            self.base[0] = delay;
            self.base_len = 1;
            self.base_newest = 0;
            self.base_minute = minute;
        } else if minute != self.base_minute {
            // Roll over: a new interval, dropping the oldest beyond base_history.
            let history = self.config.base_history;
            self.base_newest = (self.base_newest + 1) % history;
            self.base[self.base_newest] = delay;
            self.base_len = (self.base_len + 1).min(history);
            self.base_minute = minute;
        } else {
            let newest = &mut self.base[self.base_newest];
            *newest = (*newest).min(delay);
        }
    }

    fn update_current(&mut self, delay: Duration) {
        let n = self.config.current_filter;
        self.current[self.current_next] = delay;
        self.current_next = (self.current_next + 1) % n;
        self.current_len = (self.current_len + 1).min(n);
    }

    fn current_delay(&self) -> Duration {
        self.current[..self.current_len]
            .iter()
            .copied()
            .min()
            .unwrap_or(Duration::ZERO)
    }
}

impl CongestionControl for Ledbat {
    fn name(&self) -> &'static str {
        "ledbat"
    }

    fn variant(&self) -> VariantId {
        VariantId::LEDBAT
    }

    fn on_packet_sent(&mut self, _now: Time, sent: &SentPacket) {
        self.in_flight = sent.bytes_in_flight;
        self.knows_flight = true;
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        let flight_before = self.in_flight;
        self.in_flight = self.in_flight.saturating_sub(ack.bytes);
        let delay = ack.rtt.latest;
        if !delay.is_zero() {
            self.update_base(now, delay);
            self.update_current(delay);
        }
        let base = self.base_delay().unwrap_or(delay);
        self.queuing_delay = self.current_delay().saturating_sub(base);
        if ack.app_limited {
            return;
        }
        if self.slow_starting {
            self.cwnd += ack.bytes as f64;
            if self.cwnd >= self.ssthresh {
                self.slow_starting = false;
            }
            return;
        }
        let target = self.config.target.as_secs_f64();
        let off_target = (target - self.queuing_delay.as_secs_f64()) / target;
        let mss = self.mss as f64;
        self.cwnd += self.config.gain * off_target * ack.bytes as f64 * mss / self.cwnd;
        if self.knows_flight {
            let allowed = flight_before as f64 + self.config.allowed_increase * mss;
            self.cwnd = self.cwnd.min(allowed);
        }
        self.cwnd = self.cwnd.max(self.min_window());
    }

    fn on_ack_batch_end(&mut self, _now: Time, batch: &AckBatch) {
        self.in_flight = batch.bytes_in_flight;
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        self.in_flight = self.in_flight.saturating_sub(event.lost_bytes);
        let new_period = match self.recovery_start {
            Some(start) => event.sent_time > start,
            None => true,
        };
        if new_period {
            self.recovery_start = Some(now);
            self.cwnd = self.cwnd.min((self.cwnd / 2.0).max(self.min_window()));
            if self.config.slow_start {
                self.ssthresh = self.cwnd;
                self.slow_starting = false;
            }
        }
        if event.persistent_congestion {
            self.cwnd = self.min_window();
            self.slow_starting = self.config.slow_start;
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.mss = mss;
        self.cwnd = self.cwnd.max(self.min_window());
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        self.cwnd = self.cwnd.min(window as f64).max(self.min_window());
    }

    fn window(&self) -> u64 {
        self.cwnd as u64
    }

    fn stats(&self) -> Stats {
        Stats {
            window: self.window(),
            // Finite only once a loss has ended slow start (`slow_start=on`).
            ssthresh: self.ssthresh.is_finite().then_some(self.ssthresh as u64),
            pacing_rate: None,
            details: vec![
                (
                    "queuing_delay_s",
                    StatValue::Num(self.queuing_delay.as_secs_f64()),
                ),
                (
                    "base_delay_s",
                    StatValue::Num(self.base_delay().map_or(0.0, |d| d.as_secs_f64())),
                ),
                ("target_s", StatValue::Num(self.config.target.as_secs_f64())),
            ],
        }
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}

//! CBR: a constant-rate sender that ignores congestion, the unresponsive
//! flood of router-fairness experiments.
//!
//! **Rule.** Pace at `rate`, always. The window is `rate * window` bytes
//! (default 250 ms at `rate`), so it limits the sending rate only on a path
//! whose round trip plus queueing plus loss-detection delay exceeds `window`;
//! the network never changes it. The window is not larger by default because
//! the transport's send buffer is twice the window and a flow with a
//! duration delivers what it has buffered after its end: with one second at
//! 150 Mbit/s that tail was 37.5 MB, several seconds of flood after the run
//! that starved a TCP flow past the load generator's grace period. Losses, ECN-CE marks and
//! persistent congestion are ignored. A window imposed from outside
//! ([`CongestionControl::impose_window`], the sender-side tax) is an explicit
//! request, not a congestion signal: it is kept as the trait asks, but the
//! pacing rate stays `rate` (as with BBR, the tax does not reach pacing).
//!
//! **Purpose.** Queue disciplines such as CHOKe and Cebinae are meant to
//! protect responsive flows against a flow that does not back off, e.g. a
//! kernel TCP flow against an unresponsive flood at 1.5x the bottleneck.
//! Because `cbr` is a Tollgate QUIC congestion
//! controller, the same scenario line, e.g. `cca = "cbr(rate=150Mbit)"`, runs
//! in `tollgate sim`, `tollgate load` and `tollgate testbed`, with the same
//! transport code. QUIC still retransmits lost stream data, so the flow's
//! goodput is what the network delivers of its `rate` (never more): the
//! retransmissions come out of the same paced budget, as the packets of a
//! UDP flood at `rate` would.
//!
//! The sender must honour [`pacing_rate`](CongestionControl::pacing_rate):
//! the Tollgate transport does (`tollgate_transport::pacing`), as does the
//! [`model`](crate::model).

use std::time::Duration;

use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// Smallest accepted rate, bit/s.
pub const MIN_RATE_BPS: f64 = 8e3;
/// Largest accepted rate, bit/s.
pub const MAX_RATE_BPS: f64 = 1e12;
/// Smallest accepted `window`.
pub const MIN_WINDOW: Duration = Duration::from_millis(1);
/// Largest accepted `window`.
pub const MAX_WINDOW: Duration = Duration::from_secs(60);

/// CBR's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CbrConfig {
    /// Sending (pacing) rate, bit/s.
    pub rate_bps: f64,
    /// The window, as time at `rate`: `cwnd = rate * window`.
    pub window: Duration,
}

const PARAMS: &[Param] = &[
    Param {
        name: "rate",
        kind: Kind::Rate {
            auto_allowed: false,
        },
        default: "10Mbit",
        help: "constant sending rate (8kbit..=1000Gbit), paced; never reduced",
    },
    Param {
        name: "window",
        kind: Kind::Duration,
        default: "250ms",
        help:
            "window as time at rate (1ms..=60s): cwnd = rate x window; must exceed RTT + queueing",
    },
];

impl CbrConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        let rate_bps = args.rate_bps("rate")?.expect("`auto` is not accepted");
        if !(MIN_RATE_BPS..=MAX_RATE_BPS).contains(&rate_bps) {
            return Err(args.invalid(
                "rate",
                format!("{rate_bps} bit/s is out of range 8kbit..=1000Gbit"),
            ));
        }
        let window = args.duration("window")?;
        if !(MIN_WINDOW..=MAX_WINDOW).contains(&window) {
            return Err(args.invalid("window", format!("{window:?} is out of range 1ms..=60s")));
        }
        Ok(CbrConfig { rate_bps, window })
    }
}

impl Default for CbrConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("cbr", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "cbr",
    variant: VariantId::CBR,
    summary: "unresponsive flood: paced at a constant rate, window rate x 250ms, losses ignored",
    source: "constant bit rate (a UDP flood over QUIC), for router-fairness tests",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Cbr::new(CbrConfig::from_args(args)?, env))),
};

/// The constant-rate sender.
#[derive(Clone, Debug)]
pub struct Cbr {
    config: CbrConfig,
    mss: u64,
    window: u64,
    /// Congestion events seen (and ignored), for statistics.
    ignored_events: u64,
}

impl Cbr {
    /// CBR with `config` for a sender described by `env`.
    pub fn new(config: CbrConfig, env: &Env) -> Self {
        let mut cbr = Cbr {
            config,
            mss: env.mss,
            window: 0,
            ignored_events: 0,
        };
        cbr.size_window();
        cbr
    }

    fn size_window(&mut self) {
        let bytes = self.config.rate_bps / 8.0 * self.config.window.as_secs_f64();
        self.window = (bytes as u64).max(2 * self.mss);
    }

    /// Congestion events received and ignored so far.
    pub fn ignored_events(&self) -> u64 {
        self.ignored_events
    }
}

impl CongestionControl for Cbr {
    fn name(&self) -> &'static str {
        "cbr"
    }

    fn variant(&self) -> VariantId {
        VariantId::CBR
    }

    fn on_ack(&mut self, _now: Time, _ack: &Ack) {}

    fn on_congestion_event(&mut self, _now: Time, _event: &CongestionEvent) {
        self.ignored_events = self.ignored_events.saturating_add(1);
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.mss = mss;
        self.window = self.window.max(2 * mss);
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        if window < self.window {
            self.window = window.max(2 * self.mss);
        }
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(((self.config.rate_bps / 8.0) as u64).max(1))
    }

    fn stats(&self) -> Stats {
        Stats {
            window: self.window,
            ssthresh: None,
            pacing_rate: self.pacing_rate(),
            details: vec![(
                "ignored_congestion_events",
                StatValue::Num(self.ignored_events as f64),
            )],
        }
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Bottleneck, FlowSetup, LossPattern, Model};
    use crate::{build, CongestionKind};

    const MSS: u64 = 1200;

    fn flow(spec: &str, rtt_ms: u64, loss: LossPattern) -> FlowSetup {
        FlowSetup {
            cca: build(spec, &Env::with_mss(MSS)).unwrap(),
            base_rtt: Duration::from_millis(rtt_ms),
            start: Time::ZERO,
            mss: MSS,
            loss,
            receive_window: 1 << 30,
        }
    }

    fn sent_bps(model: &Model, i: usize, secs: f64) -> f64 {
        model.totals(i).sent as f64 * MSS as f64 * 8.0 / secs
    }

    #[test]
    fn holds_its_rate_through_an_overloaded_bottleneck() {
        // 150 Mbit/s into 100 Mbit/s next to NewReno: a third of the flood's
        // packets are dropped, and it sends at 150 Mbit/s all the same.
        let bottleneck = Bottleneck {
            rate_bps: 100e6,
            buffer_bytes: 250_000,
        };
        let mut model = Model::new(
            vec![
                flow("cbr(rate=150Mbit)", 20, LossPattern::None),
                flow("newreno", 20, LossPattern::None),
            ],
            Some(bottleneck),
            Duration::from_millis(100),
        );
        model.run_until(Time::ZERO + Duration::from_secs(10));
        let sent = sent_bps(&model, 0, 10.0);
        assert!((sent - 150e6).abs() < 1.5e6, "cbr sent {sent} bit/s");
        let t = model.totals(0);
        assert!(
            t.lost as f64 > 0.3 * t.sent as f64,
            "lost {} of {}",
            t.lost,
            t.sent
        );
        let cca = model.cca(0);
        assert_eq!(cca.pacing_rate(), Some(150_000_000 / 8));
        assert_eq!(cca.window(), 150_000_000 / 8 / 4);
        // The flood takes the link: NewReno is left with (almost) nothing.
        let from = Time::ZERO + Duration::from_secs(2);
        let to = Time::ZERO + Duration::from_secs(10);
        let reno = model.mean_goodput_bps(1, from, to);
        let flood = model.mean_goodput_bps(0, from, to);
        assert!(flood > 90e6 && reno < 10e6, "flood {flood} reno {reno}");
    }

    #[test]
    fn ignores_losses_and_ecn_and_keeps_an_imposed_window() {
        let mut cbr = build("cbr(rate=80Mbit, window=500ms)", &Env::with_mss(MSS)).unwrap();
        let window = cbr.window();
        assert_eq!(window, 5_000_000);
        let now = Time::ZERO + Duration::from_secs(1);
        for (kind, persistent) in [
            (CongestionKind::Loss, false),
            (CongestionKind::EcnCe, false),
            (CongestionKind::Loss, true),
        ] {
            cbr.on_congestion_event(
                now,
                &CongestionEvent {
                    kind,
                    sent_time: now,
                    lost_bytes: 100 * MSS,
                    persistent_congestion: persistent,
                },
            );
        }
        assert_eq!(cbr.window(), window);
        assert_eq!(cbr.pacing_rate(), Some(10_000_000));
        assert!(cbr
            .stats()
            .details
            .contains(&("ignored_congestion_events", StatValue::Num(3.0))));
        // An imposed window is kept (raising is ignored); the rate is not.
        cbr.impose_window(now, 100 * MSS);
        cbr.impose_window(now, window);
        assert_eq!(cbr.window(), 100 * MSS);
        assert_eq!(cbr.pacing_rate(), Some(10_000_000));
        cbr.on_mtu_change(now, 1500);
        assert_eq!(cbr.window(), 100 * MSS);
    }

    #[test]
    fn random_loss_does_not_slow_it() {
        // 20 % random loss on an uncongested path: NewReno collapses, CBR
        // keeps sending at its rate and delivers 80 % of it.
        let mut model = Model::new(
            vec![
                flow(
                    "cbr(rate=50Mbit)",
                    30,
                    LossPattern::Random { p: 0.2, seed: 7 },
                ),
                flow("newreno", 30, LossPattern::Random { p: 0.2, seed: 8 }),
            ],
            None,
            Duration::from_millis(100),
        );
        model.run_until(Time::ZERO + Duration::from_secs(5));
        let sent = sent_bps(&model, 0, 5.0);
        assert!((sent - 50e6).abs() < 0.5e6, "cbr sent {sent} bit/s");
        let from = Time::ZERO + Duration::from_secs(1);
        let to = Time::ZERO + Duration::from_secs(5);
        let good = model.mean_goodput_bps(0, from, to);
        assert!((good - 40e6).abs() < 2e6, "cbr goodput {good}");
        assert!(model.mean_goodput_bps(1, from, to) < 5e6);
    }

    #[test]
    fn bad_parameters_are_errors_naming_the_field() {
        let env = Env::default();
        for (spec, part) in [
            ("cbr(rate=1bit)", "rate=1bit"),
            ("cbr(rate=2000Gbit)", "rate=2000Gbit"),
            ("cbr(rate=fast)", "rate=fast"),
            ("cbr(rate=auto)", "rate=auto"),
            ("cbr(window=0s)", "window=0s"),
            ("cbr(window=2min)", "window=2min"),
            ("cbr(rate=10Mbit, burst=3)", "burst=3"),
        ] {
            let e = build(spec, &env).map(|_| ()).unwrap_err();
            assert_eq!(e.part, part, "{spec}: {e}");
            assert!(e.to_string().contains(part), "{spec}: {e}");
        }
    }

    #[test]
    fn the_window_never_falls_below_two_segments() {
        let cbr = build("cbr(rate=8kbit, window=1ms)", &Env::with_mss(MSS)).unwrap();
        assert_eq!(cbr.window(), 2 * MSS);
    }
}

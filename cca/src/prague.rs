//! Prague, the scalable congestion control of L4S
//! (draft-briscoe-iccrg-prague-congestion-control-04, after the reference
//! Linux `tcp_prague`; the requirements it meets are RFC 9331 §4).
//!
//! Prague is DCTCP (RFC 8257) made fit for the Internet. It marks its packets
//! ECT(1), so an L4S queue ([DualPI2](https://www.rfc-editor.org/rfc/rfc9332))
//! keeps them in its low-latency queue and marks them CE from a shallow
//! threshold (1 ms), and it responds to the *fraction* of marked packets
//! instead of halving on any mark:
//!
//! ```text
//! per round trip (a round ends when a packet sent after it began is acked):
//!   F     = CE / (ECT(0) + ECT(1) + CE)        counts the peer reported this round
//!   alpha = (1 - g) * alpha + g * F            g = 1/16, alpha starts at 1
//! on CE, at most once per round trip (not for packets sent before the last
//! reduction):
//!   cwnd  = ssthresh = max(cwnd * (1 - alpha / 2), 2 * mss)
//! slow start (cwnd < ssthresh): cwnd += acked bytes; the first CE ends it
//! congestion avoidance: cwnd += a * mss per round trip,
//!   a = min(1, (srtt / rtt_target)^2)          rtt_target = 25 ms
//! loss (once per recovery period): cwnd = ssthresh = max(cwnd / 2, 2 * mss)
//! persistent congestion: cwnd = 2 * mss
//! pacing rate = gain * cwnd / srtt,  gain = 2 in slow start, 1.2 after
//! ```
//!
//! - **Scalable response.** With `p` the marking probability, the window
//!   settles where the per-round increase equals the reduction,
//!   `W * p / 2 = a`: `W = 2 a / p`, so the number of marks per round trip
//!   stays constant however fast the link is (RFC 9331 §4.3).
//! - **RTT independence** (the draft's "reduced RTT dependence", RFC 9331
//!   §4.3's requirement). Below `rtt_target`, the additive increase is scaled
//!   so that the *rate* `cwnd / RTT` grows as fast as a flow with a 25 ms RTT
//!   would make it grow: `a / RTT` segments/s per round, i.e.
//!   `a / RTT^2 = 1 / rtt_target^2` segments/s per second, whatever the RTT.
//!   This is Hybla's rule ([`hybla`](crate::hybla)) turned downwards. Above
//!   `rtt_target` Prague is Reno-like (one segment per round trip).
//! - **Loss** is a classic signal: Prague halves as Reno does (`beta = 0.5`),
//!   as DCTCP answers loss like standard TCP (RFC 8257 §3.5) and RFC 9331
//!   §4.3 asks of a scalable sender on loss. Halving rather than CUBIC's 0.7
//!   keeps it no more aggressive than a Reno-friendly flow on a classic
//!   drop-tail queue (a classic RFC 3168 AQM's marks are still answered with
//!   the DCTCP response: classic-ECN detection is not modelled).
//! - **Pacing**, as the draft asks, at Linux's default ratios: 200 % of
//!   `cwnd / srtt` in slow start, 120 % after.
//! - No window growth on ACKs of packets sent before the latest reduction or
//!   while app-limited (as DCTCP in Linux, which grows nothing in CWR).
//!
//! The ECN counts come from [`CongestionControl::on_ecn_counts`] (QUIC ACK
//! frames' ECN counts, RFC 9000 §19.3.2); the CE reduction itself is driven by
//! [`CongestionControl::on_congestion_event`] with
//! [`CongestionKind::EcnCe`](crate::CongestionKind), which the sender
//! raises once per ACK frame that reports new CE marks.
//!
//! Not modelled: the draft's optional fractional-window and
//! paced-chirping parts, and classic-ECN AQM detection.

use std::time::Duration;

use crate::classic::{Fraction, Rounds};
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{
    Ack, CongestionControl, CongestionEvent, CongestionKind, StatValue, Stats, Time, VariantId,
};

/// Prague's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PragueConfig {
    /// EWMA gain `g` of alpha.
    pub g: f64,
    /// Below this smoothed RTT the additive increase is scaled by `(srtt / rtt_target)^2`.
    pub rtt_target: Duration,
    /// Pacing gain over `cwnd / srtt` in slow start.
    pub ss_pacing_gain: f64,
    /// Pacing gain over `cwnd / srtt` in congestion avoidance.
    pub ca_pacing_gain: f64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "g",
        kind: Kind::Float {
            min: 0.001,
            max: 1.0,
        },
        default: "0.0625",
        help: "EWMA gain of alpha, the fraction of CE-marked packets (DCTCP's g = 1/16)",
    },
    Param {
        name: "rtt_target",
        kind: Kind::Duration,
        default: "25ms",
        help: "RTT below which the additive increase is scaled by (srtt / rtt_target)^2",
    },
    Param {
        name: "ss_pacing_gain",
        kind: Kind::Float { min: 1.0, max: 4.0 },
        default: "2.0",
        help: "pacing rate over cwnd / srtt in slow start",
    },
    Param {
        name: "ca_pacing_gain",
        kind: Kind::Float { min: 1.0, max: 4.0 },
        default: "1.2",
        help: "pacing rate over cwnd / srtt in congestion avoidance",
    },
];

impl PragueConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(PragueConfig {
            g: args.float("g")?,
            rtt_target: args.duration("rtt_target")?.max(Duration::from_micros(1)),
            ss_pacing_gain: args.float("ss_pacing_gain")?,
            ca_pacing_gain: args.float("ca_pacing_gain")?,
        })
    }
}

impl Default for PragueConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("prague", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "prague",
    variant: VariantId::PRAGUE,
    summary:
        "L4S: ECT(1), cwnd -= cwnd*alpha/2 per marked RTT, RTT-independent increase below 25 ms",
    source: "draft-briscoe-iccrg-prague-congestion-control-04, RFC 9331",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Prague::new(PragueConfig::from_args(args)?, env))),
};

/// Prague congestion control.
#[derive(Clone, Debug)]
pub struct Prague {
    config: PragueConfig,
    core: RenoCore,
    /// Carries fractions of the scaled additive increase.
    frac: Fraction,
    /// Smoothed fraction of CE-marked packets.
    alpha: f64,
    rounds: Rounds,
    /// ECN-capable packets (ECT(0), ECT(1), CE) reported in the current round.
    round_ect: u64,
    /// CE-marked packets reported in the current round.
    round_ce: u64,
    /// `F` of the last completed round that had ECN counts.
    last_fraction: f64,
    /// The sender's smoothed RTT at the latest ACK.
    srtt: Option<Duration>,
    ce_reductions: u64,
    loss_reductions: u64,
}

impl Prague {
    /// Prague with `config` for a sender described by `env`.
    pub fn new(config: PragueConfig, env: &Env) -> Self {
        Prague {
            config,
            core: RenoCore::new(env),
            frac: Fraction::default(),
            alpha: 1.0,
            rounds: Rounds::default(),
            round_ect: 0,
            round_ce: 0,
            last_fraction: 0.0,
            srtt: None,
            ce_reductions: 0,
            loss_reductions: 0,
        }
    }

    /// The smoothed fraction of CE-marked packets.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The additive increase per round trip, in segments, for smoothed RTT `srtt`.
    pub fn ai_per_round(&self, srtt: Duration) -> f64 {
        let r = srtt.as_secs_f64() / self.config.rtt_target.as_secs_f64();
        (r * r).min(1.0)
    }

    /// End of a round trip: fold the round's marking fraction into alpha.
    fn end_round(&mut self) {
        if self.round_ect > 0 {
            let f = (self.round_ce as f64 / self.round_ect as f64).min(1.0);
            self.last_fraction = f;
            self.alpha = (1.0 - self.config.g) * self.alpha + self.config.g * f;
        }
        self.round_ect = 0;
        self.round_ce = 0;
    }
}

impl CongestionControl for Prague {
    fn name(&self) -> &'static str {
        "prague"
    }

    fn variant(&self) -> VariantId {
        VariantId::PRAGUE
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        self.srtt = Some(ack.rtt.smoothed);
        if self.rounds.on_ack(now, ack.sent_time) {
            self.end_round();
        }
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest == 0 {
            return;
        }
        // cwnd += a * mss per cwnd of acknowledged bytes.
        let a = self.ai_per_round(ack.rtt.smoothed);
        let grow = a * self.core.mss as f64 * rest as f64 / self.core.cwnd as f64;
        self.frac.grow(&mut self.core.cwnd, grow);
    }

    fn on_ecn_counts(&mut self, _now: Time, acked_ect: u64, ce: u64) {
        self.round_ect += acked_ect;
        self.round_ce += ce.min(acked_ect);
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let keep = match event.kind {
                CongestionKind::EcnCe => {
                    self.ce_reductions += 1;
                    1.0 - self.alpha / 2.0
                }
                CongestionKind::Loss => {
                    self.loss_reductions += 1;
                    0.5
                }
            };
            self.core.reduce_to((self.core.cwnd as f64 * keep) as u64);
            self.frac.reset();
        }
        if event.persistent_congestion {
            self.core.persistent_congestion();
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.core.set_mss(mss);
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        self.core.impose(window);
        self.frac.reset();
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        let srtt = self.srtt?.as_secs_f64();
        if srtt <= 0.0 {
            return None;
        }
        let gain = if self.core.in_slow_start() {
            self.config.ss_pacing_gain
        } else {
            self.config.ca_pacing_gain
        };
        Some((gain * self.core.cwnd as f64 / srtt) as u64)
    }

    fn l4s(&self) -> bool {
        true
    }

    fn stats(&self) -> Stats {
        let mut s = self.core.stats(vec![
            ("alpha", StatValue::Num(self.alpha)),
            ("ce_fraction", StatValue::Num(self.last_fraction)),
            ("ce_reductions", StatValue::Num(self.ce_reductions as f64)),
            (
                "loss_reductions",
                StatValue::Num(self.loss_reductions as f64),
            ),
        ]);
        s.pacing_rate = self.pacing_rate();
        s
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AckBatch, RttSample};

    const MSS: u64 = 1200;

    fn prague() -> Box<dyn CongestionControl> {
        crate::build("prague", &Env::with_mss(MSS)).unwrap()
    }

    fn ack(pn: u64, sent: Time, rtt: Duration) -> Ack {
        Ack {
            packet_number: pn,
            bytes: MSS,
            sent_time: sent,
            rtt: RttSample::fixed(rtt),
            app_limited: false,
        }
    }

    fn ce(sent: Time) -> CongestionEvent {
        CongestionEvent {
            kind: CongestionKind::EcnCe,
            sent_time: sent,
            lost_bytes: 0,
            persistent_congestion: false,
        }
    }

    fn loss(sent: Time) -> CongestionEvent {
        CongestionEvent {
            kind: CongestionKind::Loss,
            sent_time: sent,
            lost_bytes: MSS,
            persistent_congestion: false,
        }
    }

    fn alpha(c: &dyn CongestionControl) -> f64 {
        c.stats().number("alpha").unwrap()
    }

    /// One round trip of `rtt` starting at `t`: a window's worth of packets
    /// sent at `t` are acked at `t + rtt`, with `marked` of `n` reported CE.
    fn round(c: &mut dyn CongestionControl, t: Time, rtt: Duration, n: u64, marked: u64) -> Time {
        let end = t + rtt;
        for i in 0..n {
            c.on_ack(end, &ack(i, t, rtt));
        }
        c.on_ack_batch_end(
            end,
            &AckBatch {
                bytes_in_flight: 0,
                app_limited: false,
                largest_acked: Some(n),
            },
        );
        c.on_ecn_counts(end, n, marked);
        end
    }

    #[test]
    fn is_l4s_and_registered() {
        let c = prague();
        assert!(c.l4s());
        assert_eq!(c.variant(), VariantId::PRAGUE);
        assert_eq!(c.name(), "prague");
        assert!(!crate::build("cubic", &Env::with_mss(MSS)).unwrap().l4s());
        assert!(crate::build("taxed(prague)", &Env::with_mss(MSS))
            .unwrap()
            .l4s());
    }

    #[test]
    fn alpha_is_an_ewma_of_the_marked_fraction_per_round() {
        let mut c = prague();
        let rtt = Duration::from_millis(20);
        assert_eq!(alpha(&*c), 1.0);
        // Counts reported within a round are folded in when the round ends
        // (at the next round's first ACK), once per round however many ACK
        // frames carried them.
        let mut t = Time::ZERO;
        let mut want = 1.0;
        for (n, marked) in [(10, 5), (10, 0), (20, 5), (8, 8), (10, 1)] {
            t = round(&mut *c, t, rtt, n / 2, marked / 2);
            c.on_ecn_counts(t, n - n / 2, marked - marked / 2);
            let before = alpha(&*c);
            // The next round's first ACK closes this round.
            c.on_ack(t + rtt, &ack(0, t, rtt));
            want = (1.0 - 1.0 / 16.0) * want + marked as f64 / n as f64 / 16.0;
            assert!(
                (alpha(&*c) - want).abs() < 1e-12,
                "{} vs {want}",
                alpha(&*c)
            );
            assert_ne!(before, alpha(&*c));
            t = t + rtt;
        }
        // With no marks, alpha decays by 15/16 per round.
        let a0 = alpha(&*c);
        for _ in 0..16 {
            t = round(&mut *c, t, rtt, 4, 0);
        }
        let decayed = alpha(&*c);
        assert!(
            decayed < a0 * 0.4 && decayed > a0 * 0.3,
            "{a0} -> {decayed}"
        );
    }

    #[test]
    fn ce_reduces_by_alpha_over_two_at_most_once_per_round() {
        let mut c = prague();
        let rtt = Duration::from_millis(20);
        // Drive alpha to about 0.2: rounds with 20 % of the packets marked.
        let mut t = Time::ZERO;
        for _ in 0..200 {
            t = round(&mut *c, t, rtt, 10, 2);
        }
        let a = alpha(&*c);
        assert!((a - 0.2).abs() < 0.01, "alpha {a}");
        // Leave slow start (first CE), then check the next reduction.
        c.on_congestion_event(t, &ce(t));
        t = t + rtt;
        c.on_ack(t, &ack(0, t - rtt, rtt));
        let a = alpha(&*c);
        let w = c.window();
        let sent = t;
        t = t + Duration::from_millis(1);
        c.on_congestion_event(t, &ce(sent));
        let expect = (w as f64 * (1.0 - a / 2.0)) as u64;
        assert_eq!(c.window(), expect);
        assert!(expect > w * 85 / 100 && expect < w * 95 / 100);
        // More CE about packets sent before that reduction: no change.
        for k in 1..5 {
            c.on_congestion_event(t + Duration::from_millis(k), &ce(sent));
        }
        assert_eq!(c.window(), expect);
        // CE about a packet sent after it (one round later): reduce again.
        let later = t + Duration::from_millis(2);
        c.on_congestion_event(later + rtt, &ce(later));
        assert!(c.window() < expect);
        assert_eq!(c.stats().number("ce_reductions"), Some(3.0));
    }

    #[test]
    fn slow_start_ends_at_the_first_ce() {
        let mut c = prague();
        let rtt = Duration::from_millis(10);
        let w0 = c.window();
        let mut t = round(&mut *c, Time::ZERO, rtt, w0 / MSS, 0);
        assert_eq!(c.window(), 2 * w0, "slow start doubles per round");
        assert_eq!(c.stats().ssthresh, None);
        c.on_congestion_event(t, &ce(t - rtt));
        let w = c.window();
        // alpha is still 1 (DCTCP's start value; no round has ended with counts): half.
        assert!(w < 2 * w0 * 55 / 100 && w > 2 * w0 * 45 / 100, "{w}");
        assert_eq!(c.stats().ssthresh, Some(w));
        // From now on the window grows additively, not by the acked bytes.
        t = t + rtt;
        let n = w / MSS;
        c.on_ack(t, &ack(0, t - Duration::from_micros(1), rtt));
        round(&mut *c, t, rtt, n, 0);
        assert!(c.window() <= w + 2 * MSS, "{} vs {w}", c.window());
    }

    /// Window growth in congestion avoidance over `rounds` rounds at `rtt`.
    fn ca_growth(rtt: Duration, rounds: u32) -> f64 {
        let mut c = prague();
        let mut t = Time::ZERO;
        // Slow start to 100 segments or more, then leave it on a CE.
        while c.window() < 100 * MSS {
            let n = c.window() / MSS;
            t = round(&mut *c, t, rtt, n, 0);
        }
        c.on_congestion_event(t, &ce(t));
        t = t + Duration::from_millis(1);
        let w0 = c.window();
        for _ in 0..rounds {
            let n = c.window() / MSS;
            t = round(&mut *c, t, rtt, n, 0);
        }
        (c.window() - w0) as f64 / MSS as f64
    }

    #[test]
    fn additive_increase_is_scaled_below_the_rtt_target_for_equal_rate_growth() {
        // Over the same span of time (200 ms), the rate (cwnd / RTT) of a
        // 5 ms and a 10 ms flow grows by the same amount, as a 25 ms flow's
        // would: (R / 25 ms)^2 segments per round.
        let g5 = ca_growth(Duration::from_millis(5), 40);
        let g10 = ca_growth(Duration::from_millis(10), 20);
        let g25 = ca_growth(Duration::from_millis(25), 8);
        let rate = |g: f64, ms: f64| g / ms; // segments per ms
        assert!((g5 - 40.0 * 0.04).abs() < 0.2, "5 ms: {g5} segments");
        assert!((g10 - 20.0 * 0.16).abs() < 0.3, "10 ms: {g10} segments");
        assert!((g25 - 8.0).abs() < 0.5, "25 ms: {g25} segments");
        let (r5, r10, r25) = (rate(g5, 5.0), rate(g10, 10.0), rate(g25, 25.0));
        assert!((r5 / r10 - 1.0).abs() < 0.15, "{r5} vs {r10}");
        assert!((r10 / r25 - 1.0).abs() < 0.15, "{r10} vs {r25}");
        // Above the target, one segment per round (Reno-like).
        let g50 = ca_growth(Duration::from_millis(50), 8);
        assert!((g50 - 8.0).abs() < 0.5, "50 ms: {g50} segments");
    }

    #[test]
    fn loss_halves_once_per_recovery_period() {
        let mut c = prague();
        let rtt = Duration::from_millis(20);
        let mut t = Time::ZERO;
        // alpha near 0: a CE would barely reduce, a loss still halves.
        for _ in 0..300 {
            t = round(&mut *c, t, rtt, 10, 0);
        }
        assert!(alpha(&*c) < 0.001);
        c.impose_window(t, 80 * MSS);
        let w = c.window();
        c.on_congestion_event(t, &loss(t));
        assert_eq!(c.window(), w / 2);
        c.on_congestion_event(t + Duration::from_millis(1), &loss(t));
        assert_eq!(c.window(), w / 2);
        assert_eq!(c.stats().number("loss_reductions"), Some(1.0));
        // Persistent congestion: the minimum window.
        let later = t + Duration::from_millis(5);
        c.on_congestion_event(
            later + rtt,
            &CongestionEvent {
                persistent_congestion: true,
                ..loss(later)
            },
        );
        assert_eq!(c.window(), 2 * MSS);
    }

    #[test]
    fn paces_at_two_in_slow_start_then_one_point_two() {
        let mut c = prague();
        assert_eq!(c.pacing_rate(), None);
        let rtt = Duration::from_millis(10);
        let t = round(&mut *c, Time::ZERO, rtt, 4, 0);
        let w = c.window() as f64;
        assert_eq!(c.pacing_rate(), Some((2.0 * w / 0.010) as u64));
        c.on_congestion_event(t, &ce(t));
        let w = c.window() as f64;
        assert_eq!(c.pacing_rate(), Some((1.2 * w / 0.010) as u64));
    }
}

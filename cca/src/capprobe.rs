//! CapProbe: path capacity from packet pairs (Kapoor, Chen, Lao, Gerla,
//! Sanadidi: "CapProbe: A Simple and Accurate Capacity Estimation
//! Technique", SIGCOMM 2004), the capacity estimator TCP Libra relies on.
//!
//! Packets are sent in back-to-back pairs of equal size. For each pair the
//! sender records both round-trip delays `d1`, `d2` and the *dispersion* `D`:
//! the gap between the two packets' ACK arrivals. A pair that crossed the
//! narrow link with no queueing leaves it spaced by exactly `size / C`, and
//! such a pair also has the smallest delay sum. So CapProbe keeps the pair
//! with the **minimum `d1 + d2`** and estimates
//!
//! ```text
//! C = size / D(kept pair)
//! ```
//!
//! **Convergence test** (the paper's): the kept pair is trusted once its delay
//! sum is the sum of the minimum delays, `min(d1) + min(d2)`, i.e. neither of
//! its packets queued more than the least-queued packets did. Exact equality
//! never happens with real timers, so the slack is measured against what it
//! can corrupt, the dispersion:
//!
//! ```text
//! converged  <=>  (d1 + d2) - (min d1 + min d2)  <=  tolerance * D
//! ```
//!
//! Queueing or timing noise that the kept pair may still carry is then at most
//! `tolerance` of the gap the estimate divides by. (A slack relative to the
//! delay sum, as in a percentage of tens of milliseconds, would admit
//! hundreds of microseconds of noise against a 100-µs dispersion.)
//!
//! **Runs.** Pairs are grouped in runs of `run_pairs` accepted pairs; each
//! run keeps its own minimum and minima, as the paper's probing phases do.
//! A run whose kept pair converged contributes its estimate; the reported
//! capacity is the **median of the last [`HISTORY`] converged runs**, so one
//! run fooled by noise does not decide the figure, and the estimate follows
//! a path whose capacity changes. Before the first run completes, the run in
//! progress gives a provisional estimate once its kept pair converges.
//! `run_pairs = 0` keeps a single run forever (the paper's one-shot filter).
//!
//! **Pairs that cannot carry the capacity are rejected, counted by reason**
//! ([`Reject`]): both packets acknowledged at the same instant (one ACK frame
//! covering both: no dispersion), a pair already spaced at the sender by at
//! least its dispersion (the gap is the sender's, not the narrow link's),
//! packets of different sizes, and estimates above the sender's own link rate
//! (no narrow link downstream can be faster than the first link, so such a
//! gap was compressed after the narrow link, e.g. by ACK compression).
//!
//! **Where it still fails.** The filter assumes some pair crossed the path
//! without queueing. A link that never empties (a standing drop-tail queue)
//! leaves only pairs that queued; the convergence test then keeps failing and
//! Libra falls back (see `libra.rs`), or, when noise happens to shrink the
//! excess, a run converges on a gap another flow's packet stretched.

use std::collections::VecDeque;
use std::time::Duration;

/// How many converged runs the reported median covers.
pub const HISTORY: usize = 21;

/// One measured packet pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairSample {
    /// Round-trip delay of the first packet.
    pub d1: Duration,
    /// Round-trip delay of the second packet.
    pub d2: Duration,
    /// Gap between the two packets' ACK (or receive) times.
    pub dispersion: Duration,
    /// Gap between the two packets' send times.
    pub send_gap: Duration,
    /// Size of the first packet, bytes.
    pub first_bytes: u64,
    /// Size of the second packet, bytes: the bytes the dispersion carried.
    pub bytes: u64,
}

/// Why a pair was not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// Both packets were acknowledged at the same instant (zero dispersion).
    SharedAck,
    /// The pair left the sender at least as far apart as it arrived.
    SpreadAtSender,
    /// Its estimate exceeds the sender's own link rate.
    AboveLinkRate,
    /// The two packets differ in size (or are empty).
    OtherSize,
}

impl Reject {
    /// Every reason, in the order of their counters.
    pub const ALL: [Reject; 4] = [
        Reject::SharedAck,
        Reject::SpreadAtSender,
        Reject::AboveLinkRate,
        Reject::OtherSize,
    ];

    /// Statistics key of this reason's count.
    pub fn stat_key(self) -> &'static str {
        match self {
            Reject::SharedAck => "capprobe_rejected_shared_ack",
            Reject::SpreadAtSender => "capprobe_rejected_spread_at_sender",
            Reject::AboveLinkRate => "capprobe_rejected_above_link_rate",
            Reject::OtherSize => "capprobe_rejected_other_size",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// CapProbe's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapProbeConfig {
    /// Convergence slack as a fraction of the kept pair's dispersion.
    pub tolerance: f64,
    /// Accepted pairs per run; 0 = one run forever.
    pub run_pairs: u64,
    /// The sender's own link (interface or access) rate, bit/s, if known:
    /// estimates above it are rejected.
    pub link_rate_bps: Option<f64>,
}

/// The minimum-delay-sum filter over one run.
#[derive(Clone, Copy, Debug)]
struct Run {
    best: Option<PairSample>,
    min_d1: Duration,
    min_d2: Duration,
    pairs: u64,
}

impl Run {
    const EMPTY: Run = Run {
        best: None,
        min_d1: Duration::MAX,
        min_d2: Duration::MAX,
        pairs: 0,
    };

    fn add(&mut self, pair: PairSample) {
        self.pairs += 1;
        self.min_d1 = self.min_d1.min(pair.d1);
        self.min_d2 = self.min_d2.min(pair.d2);
        if self.best.is_none_or(|b| pair.d1 + pair.d2 < b.d1 + b.d2) {
            self.best = Some(pair);
        }
    }

    /// The kept pair's delay sum above `min(d1) + min(d2)`.
    fn excess(&self) -> Option<Duration> {
        self.best
            .map(|b| (b.d1 + b.d2).saturating_sub(self.min_d1 + self.min_d2))
    }

    /// The kept pair's estimate, if it passes the convergence test.
    fn converged_bps(&self, tolerance: f64) -> Option<f64> {
        let best = self.best?;
        let excess = self.excess()?.as_secs_f64();
        let dispersion = best.dispersion.as_secs_f64();
        (excess <= tolerance * dispersion).then(|| estimate_bps(&best))
    }
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(values: &VecDeque<f64>) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

fn estimate_bps(pair: &PairSample) -> f64 {
    pair.bytes as f64 * 8.0 / pair.dispersion.as_secs_f64()
}

/// The CapProbe estimator.
#[derive(Clone, Debug)]
pub struct CapProbe {
    config: CapProbeConfig,
    run: Run,
    /// Estimates of the last converged runs, oldest first (at most [`HISTORY`]).
    history: VecDeque<f64>,
    /// The median of `history`, kept as it changes: Libra reads the
    /// estimate on every ACK, the history changes once per run.
    median: Option<f64>,
    pairs: u64,
    runs: u64,
    converged_runs: u64,
    rejected: [u64; Reject::ALL.len()],
}

impl CapProbe {
    /// An estimator with `config`.
    pub fn new(config: CapProbeConfig) -> Self {
        CapProbe {
            config,
            run: Run::EMPTY,
            history: VecDeque::with_capacity(HISTORY),
            median: None,
            pairs: 0,
            runs: 0,
            converged_runs: 0,
            rejected: [0; Reject::ALL.len()],
        }
    }

    /// Why `pair` cannot be used, if it cannot.
    pub fn check(&self, pair: &PairSample) -> Option<Reject> {
        if pair.bytes == 0 || pair.first_bytes != pair.bytes {
            return Some(Reject::OtherSize);
        }
        if pair.dispersion.is_zero() {
            return Some(Reject::SharedAck);
        }
        if pair.send_gap >= pair.dispersion {
            return Some(Reject::SpreadAtSender);
        }
        if self
            .config
            .link_rate_bps
            .is_some_and(|link| estimate_bps(pair) > link)
        {
            return Some(Reject::AboveLinkRate);
        }
        None
    }

    /// Feed one pair.
    pub fn on_pair(&mut self, pair: PairSample) {
        if let Some(reason) = self.check(&pair) {
            self.rejected[reason.index()] += 1;
            return;
        }
        self.pairs += 1;
        self.run.add(pair);
        if self.config.run_pairs > 0 && self.run.pairs >= self.config.run_pairs {
            self.runs += 1;
            if let Some(bps) = self.run.converged_bps(self.config.tolerance) {
                self.converged_runs += 1;
                if self.history.len() == HISTORY {
                    self.history.pop_front();
                }
                self.history.push_back(bps);
                self.median = median(&self.history);
            }
            self.run = Run::EMPTY;
        }
    }

    /// The capacity estimate in bit/s: the median of the last converged runs,
    /// or, before any, the run in progress if its kept pair has converged.
    pub fn capacity_bps(&self) -> Option<f64> {
        self.median
            .or_else(|| self.run.converged_bps(self.config.tolerance))
    }

    /// Whether [`capacity_bps`](Self::capacity_bps) has an estimate.
    pub fn converged(&self) -> bool {
        self.capacity_bps().is_some()
    }

    /// The current run's kept pair's dispersion: the ACK gap it divides by.
    pub fn kept_dispersion(&self) -> Option<Duration> {
        self.run.best.map(|b| b.dispersion)
    }

    /// How far the current run's kept pair's delay sum lies above
    /// `min(d1) + min(d2)`: the queueing (or timing noise) it may still carry.
    pub fn kept_excess(&self) -> Option<Duration> {
        self.run.excess()
    }

    /// Pairs accepted (all runs).
    pub fn pairs(&self) -> u64 {
        self.pairs
    }

    /// Completed runs, and how many of them converged.
    pub fn runs(&self) -> (u64, u64) {
        (self.runs, self.converged_runs)
    }

    /// Pairs rejected for `reason`.
    pub fn rejected_for(&self, reason: Reject) -> u64 {
        self.rejected[reason.index()]
    }

    /// Pairs rejected, all reasons.
    pub fn rejected(&self) -> u64 {
        self.rejected.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{self, SimRng};

    const BYTES: u64 = 1200;

    fn config(run_pairs: u64, link_rate_bps: Option<f64>) -> CapProbeConfig {
        CapProbeConfig {
            tolerance: 0.1,
            run_pairs,
            link_rate_bps,
        }
    }

    fn pair(d1_us: u64, d2_us: u64, dispersion_us: u64) -> PairSample {
        PairSample {
            d1: Duration::from_micros(d1_us),
            d2: Duration::from_micros(d2_us),
            dispersion: Duration::from_micros(dispersion_us),
            send_gap: Duration::from_micros(1),
            first_bytes: BYTES,
            bytes: BYTES,
        }
    }

    /// A 100 Mbit/s narrow link behind a 1 Gbit/s first link, 20 ms base RTT.
    /// Each packet of a pair independently queues 0-5 ms with probability
    /// 0.7; queueing ahead of the second packet (but not the first) stretches
    /// the dispersion. The ACK path adds its own noise, independently per ACK,
    /// up to `ack_noise` (which may compress the gap).
    fn noisy_pair(rng: &mut SimRng, ack_noise: Duration) -> PairSample {
        let transmit = Duration::from_secs_f64(BYTES as f64 * 8.0 / 100e6);
        let base = Duration::from_millis(20);
        let send_gap = Duration::from_micros(10);
        let queue = |rng: &mut SimRng| {
            if rng::chance(rng, 0.7) {
                Duration::from_secs_f64(rng::uniform_f64(rng) * 0.005)
            } else {
                Duration::ZERO
            }
        };
        let (q1, q2) = (queue(rng), queue(rng));
        // ACK arrival times, counted from the first packet's send time.
        let ack1 = base + transmit + q1 + ack_noise.mul_f64(rng::uniform_f64(rng));
        let ack2 =
            base + transmit + transmit + q1.max(q2) + ack_noise.mul_f64(rng::uniform_f64(rng));
        PairSample {
            d1: ack1,
            d2: ack2 - send_gap,
            dispersion: ack2.saturating_sub(ack1),
            send_gap,
            first_bytes: BYTES,
            bytes: BYTES,
        }
    }

    #[test]
    fn recovers_100_mbit_within_5_percent_from_queued_pairs() {
        for seed in 1..=5 {
            let mut rng = rng::seeded(seed);
            let mut probe = CapProbe::new(config(100, Some(1e9)));
            for _ in 0..1000 {
                probe.on_pair(noisy_pair(&mut rng, Duration::ZERO));
            }
            let estimate = probe.capacity_bps().unwrap();
            assert!(
                (estimate / 100e6 - 1.0).abs() < 0.05,
                "seed {seed}: estimate {estimate}"
            );
            assert_eq!(probe.runs().0, 10);
        }
    }

    /// ACK-path noise up to 50 µs (half the 96-µs packet time): runs whose
    /// kept pair carries noise fail the test or land in the median's tails.
    #[test]
    fn the_median_of_runs_stays_within_15_percent_under_ack_noise() {
        for seed in 1..=5 {
            let mut rng = rng::seeded(seed);
            let mut probe = CapProbe::new(config(100, Some(1e9)));
            for _ in 0..3000 {
                probe.on_pair(noisy_pair(&mut rng, Duration::from_micros(50)));
            }
            let estimate = probe.capacity_bps().expect("some run converged");
            assert!(
                (estimate / 100e6 - 1.0).abs() < 0.15,
                "seed {seed}: estimate {estimate}"
            );
        }
    }

    #[test]
    fn unusable_pairs_are_rejected_by_reason() {
        let mut probe = CapProbe::new(config(0, Some(1e9)));
        probe.on_pair(pair(20_000, 20_000, 0));
        let mut spread = pair(20_000, 20_100, 100);
        spread.send_gap = Duration::from_micros(100);
        probe.on_pair(spread);
        // 1200 bytes in 6 µs: 1.6 Gbit/s, above the 1 Gbit/s link.
        probe.on_pair(pair(20_000, 20_006, 6));
        let mut sizes = pair(20_000, 20_100, 100);
        sizes.first_bytes = 600;
        probe.on_pair(sizes);
        for reason in Reject::ALL {
            assert_eq!(probe.rejected_for(reason), 1, "{reason:?}");
        }
        assert_eq!((probe.pairs(), probe.rejected()), (0, 4));
        assert_eq!(probe.capacity_bps(), None);
        // Without a known link rate the fast pair is used.
        let mut unbounded = CapProbe::new(config(0, None));
        unbounded.on_pair(pair(20_000, 20_006, 6));
        assert_eq!(unbounded.rejected(), 0);
        assert!(unbounded.capacity_bps().unwrap() > 1e9);
    }

    #[test]
    fn convergence_is_judged_against_the_dispersion() {
        let mut probe = CapProbe::new(config(0, None));
        // Minima from two different pairs: 20,000 + 20,090 µs; the kept pair
        // (least sum, 40,100 µs) is 10 µs above them, with a 96-µs gap:
        // 10 > 0.1 * 96, not converged.
        probe.on_pair(pair(20_000, 20_110, 96));
        probe.on_pair(pair(20_030, 20_090, 96));
        probe.on_pair(pair(20_010, 20_090, 96));
        assert_eq!(probe.kept_excess(), Some(Duration::from_micros(10)));
        assert!(!probe.converged());
        // A pair 5 µs above the floor converges (5 <= 9.6).
        probe.on_pair(pair(20_000, 20_095, 96));
        assert_eq!(probe.kept_excess(), Some(Duration::from_micros(5)));
        let estimate = probe.capacity_bps().unwrap();
        assert!((estimate / 100e6 - 1.0).abs() < 0.001, "{estimate}");
    }

    #[test]
    fn one_fooled_run_does_not_move_the_median() {
        let mut probe = CapProbe::new(config(1, None));
        for _ in 0..5 {
            probe.on_pair(pair(20_000, 20_096, 96));
        }
        // A run converged on a gap compressed to 10 µs (960 Mbit/s).
        probe.on_pair(pair(20_000, 20_010, 10));
        assert_eq!(probe.runs(), (6, 6));
        let estimate = probe.capacity_bps().unwrap();
        assert!((estimate / 100e6 - 1.0).abs() < 0.001, "{estimate}");
        // The history is bounded and follows a new capacity.
        for _ in 0..HISTORY {
            probe.on_pair(pair(20_000, 20_192, 192));
        }
        let estimate = probe.capacity_bps().unwrap();
        assert!((estimate / 50e6 - 1.0).abs() < 0.001, "{estimate}");
    }
}

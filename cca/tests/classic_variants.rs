//! The classic variants each show the behaviour that defines them, and every
//! registered algorithm honours `impose_window`, `on_mtu_change` and survives
//! a lossy model link.

use std::time::Duration;

use tollgate_cca::bic::BicConfig;
use tollgate_cca::highspeed::HighSpeedConfig;
use tollgate_cca::htcp::HtcpConfig;
use tollgate_cca::illinois::IllinoisConfig;
use tollgate_cca::model::{Bottleneck, FlowSample, FlowSetup, LossPattern, Model};
use tollgate_cca::registry::{self, build, Env};
use tollgate_cca::{
    Ack, AckBatch, CongestionControl, CongestionEvent, CongestionKind, RttSample, SentPacket,
    StatValue, Time,
};

const MSS: u64 = 1200;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn env(initial_segments: u64) -> Env {
    Env {
        mss: MSS,
        initial_window: initial_segments * MSS,
        link_rate_bps: None,
        seed: None,
    }
}

fn make(spec: &str, env: &Env) -> Box<dyn CongestionControl> {
    build(spec, env).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn num(cca: &dyn CongestionControl, key: &str) -> f64 {
    match cca.stats().details.iter().find(|(k, _)| *k == key) {
        Some((_, StatValue::Num(v))) => *v,
        other => panic!("{}: no numeric stat {key}: {other:?}", cca.name()),
    }
}

fn text(cca: &dyn CongestionControl, key: &str) -> &'static str {
    match cca.stats().details.iter().find(|(k, _)| *k == key) {
        Some((_, StatValue::Text(v))) => v,
        other => panic!("{}: no text stat {key}: {other:?}", cca.name()),
    }
}

fn segments(cca: &dyn CongestionControl) -> f64 {
    cca.window() as f64 / MSS as f64
}

/// An uncongested path driven by hand: each round sends one window of
/// packets (1 ns apart) and ACKs each of them `rtt` later, with monotonic time.
#[derive(Debug)]
struct Path {
    now: Time,
    next_pn: u64,
    min_rtt: Duration,
    srtt: Option<Duration>,
}

impl Path {
    fn new() -> Self {
        Path {
            now: Time::from_millis(1),
            next_pn: 0,
            min_rtt: Duration::MAX,
            srtt: None,
        }
    }

    /// One round trip of a whole window at `rtt`.
    fn round(&mut self, cca: &mut dyn CongestionControl, rtt: Duration) {
        let n = (cca.window() / MSS).max(1);
        let first = self.next_pn;
        let start = self.now;
        let mut in_flight = 0;
        for i in 0..n {
            in_flight += MSS;
            let sent = SentPacket {
                packet_number: first + i,
                bytes: MSS,
                bytes_in_flight: in_flight,
            };
            cca.on_packet_sent(start + Duration::from_nanos(i), &sent);
        }
        self.next_pn += n;
        self.min_rtt = self.min_rtt.min(rtt);
        for i in 0..n {
            let sent_time = start + Duration::from_nanos(i);
            let now = sent_time + rtt;
            let srtt = match self.srtt {
                None => rtt,
                Some(s) => (s * 7 + rtt) / 8,
            };
            self.srtt = Some(srtt);
            in_flight -= MSS;
            let ack = Ack {
                packet_number: first + i,
                bytes: MSS,
                sent_time,
                rtt: RttSample {
                    latest: rtt,
                    smoothed: srtt,
                    min: self.min_rtt,
                },
                app_limited: false,
            };
            cca.on_ack(now, &ack);
            let batch = AckBatch {
                bytes_in_flight: in_flight,
                app_limited: false,
                largest_acked: Some(first + i),
            };
            cca.on_ack_batch_end(now, &batch);
        }
        self.now = start + rtt + Duration::from_nanos(n);
    }

    /// `k` rounds at `rtt`.
    fn rounds(&mut self, cca: &mut dyn CongestionControl, rtt: Duration, k: usize) {
        for _ in 0..k {
            self.round(cca, rtt);
        }
    }

    /// A loss of a packet sent just now; later packets are outside its recovery period.
    fn loss(&mut self, cca: &mut dyn CongestionControl) {
        self.congestion(cca, false);
    }

    /// [`Path::loss`], declared a persistent congestion or not.
    fn congestion(&mut self, cca: &mut dyn CongestionControl, persistent_congestion: bool) {
        let event = CongestionEvent {
            kind: CongestionKind::Loss,
            sent_time: self.now,
            lost_bytes: MSS,
            persistent_congestion,
        };
        cca.on_congestion_event(self.now, &event);
        self.now = self.now + Duration::from_micros(1);
    }

    /// Window change (bytes) over one round at `rtt`.
    fn growth(&mut self, cca: &mut dyn CongestionControl, rtt: Duration) -> f64 {
        let before = cca.window() as f64;
        self.round(cca, rtt);
        cca.window() as f64 - before
    }
}

fn flow(cca: Box<dyn CongestionControl>, base_rtt: Duration, start: Time) -> FlowSetup {
    FlowSetup {
        cca,
        base_rtt,
        start,
        mss: MSS,
        loss: LossPattern::None,
        receive_window: 8 << 20,
    }
}

fn link(mbit: f64, buffer_packets: u64) -> Option<Bottleneck> {
    Some(Bottleneck {
        rate_bps: mbit * 1e6,
        buffer_bytes: buffer_packets * MSS,
    })
}

fn serialization(mbit: f64) -> Duration {
    Duration::from_secs_f64(MSS as f64 * 8.0 / (mbit * 1e6))
}

fn flow_samples(samples: &[FlowSample], i: usize, from: Time, to: Time) -> Vec<FlowSample> {
    samples
        .iter()
        .filter(|s| s.flow == i && s.time > from && s.time <= to)
        .copied()
        .collect()
}

// ---------------------------------------------------------------- HighSpeed

#[test]
fn highspeed_response_function_matches_rfc3649() {
    let c = HighSpeedConfig::default();
    // Standard TCP up to Low_Window.
    assert_eq!(c.a(38.0), 1.0);
    assert_eq!(c.b(38.0), 0.5);
    // RFC 3649 §5 / Appendix B table.
    assert!(
        (c.b(83000.0) - 0.1).abs() < 1e-9,
        "b(83000) = {}",
        c.b(83000.0)
    );
    assert!(
        (c.a(83000.0) - 72.0).abs() < 1.0,
        "a(83000) = {}",
        c.a(83000.0)
    );
    assert!((c.a(1058.0) - 8.0).abs() < 0.5, "a(1058) = {}", c.a(1058.0));
    assert!(
        (c.b(1058.0) - 0.33).abs() < 0.01,
        "b(1058) = {}",
        c.b(1058.0)
    );
    assert!((c.p(83000.0) - 1e-7).abs() < 1e-12);

    // The algorithm uses them: at 83000 segments a loss removes 10 %, and a
    // round of ACKs adds about a(w) segments.
    let mut cca = make("highspeed", &env(83_000));
    let mut path = Path::new();
    path.loss(cca.as_mut());
    let after_loss = segments(cca.as_ref());
    assert!((after_loss / 83_000.0 - 0.9).abs() < 0.001, "{after_loss}");
    let grown = path.growth(cca.as_mut(), ms(100)) / MSS as f64;
    let a = c.a(after_loss);
    assert!(
        (grown - a).abs() < 0.05 * a,
        "grew {grown} segments, a(w) = {a}"
    );
}

// ---------------------------------------------------------------- Scalable

#[test]
fn scalable_grows_one_percent_per_ack_and_backs_off_one_eighth() {
    let mut cca = make("scalable", &env(1000));
    let mut path = Path::new();
    path.loss(cca.as_mut());
    assert_eq!(cca.window(), 1000 * MSS * 7 / 8);
    // Exactly 0.01 segment per acknowledged segment, independent of the window.
    let before = cca.window();
    for i in 0..100 {
        let ack = Ack {
            packet_number: i,
            bytes: MSS,
            sent_time: path.now,
            rtt: RttSample::fixed(ms(50)),
            app_limited: false,
        };
        cca.on_ack(path.now + ms(50), &ack);
    }
    assert_eq!(cca.window() - before, MSS);
    // So one window of ACKs grows the window by 1 %.
    let w = cca.window() as f64;
    let grown = path.growth(cca.as_mut(), ms(50));
    assert!((grown / w - 0.01).abs() < 0.0005, "{}", grown / w);
    // And each loss event takes 12.5 %.
    let w = cca.window() as f64;
    path.loss(cca.as_mut());
    assert!((cca.window() as f64 / w - 0.875).abs() < 0.001);
}

// ---------------------------------------------------------------- BIC

#[test]
fn bic_binary_searches_towards_w_max() {
    let c = BicConfig::default();
    let mut cca = make("bic", &env(1000));
    let mut path = Path::new();
    path.loss(cca.as_mut());
    assert_eq!(num(cca.as_ref(), "w_max_segments"), 1000.0);
    assert!((segments(cca.as_ref()) - 800.0).abs() < 0.01);
    // Far from W_max: the increase is capped at Smax per RTT.
    let grown = path.growth(cca.as_mut(), ms(50)) / MSS as f64;
    assert!((grown - c.smax).abs() < 0.5, "{grown}");
    // Keep going until within Smax * B of W_max, then each RTT closes about a
    // quarter (1/B) of the remaining distance: a binary search.
    while 1000.0 - segments(cca.as_ref()) > c.smax * c.b {
        path.round(cca.as_mut(), ms(50));
    }
    for _ in 0..6 {
        let dist = 1000.0 - segments(cca.as_ref());
        if dist <= c.b {
            break;
        }
        let grown = path.growth(cca.as_mut(), ms(50)) / MSS as f64;
        assert!(
            (grown - dist / c.b).abs() < 0.15 * dist / c.b + 0.05,
            "dist {dist}, grew {grown}"
        );
    }
    // It then plateaus at W_max (B / smooth_part = 0.2 segments per RTT).
    for _ in 0..10 {
        path.round(cca.as_mut(), ms(50));
    }
    let w = segments(cca.as_ref());
    assert!((996.0..=1004.0).contains(&w), "{w}");
    let grown = path.growth(cca.as_mut(), ms(50)) / MSS as f64;
    assert!(grown < 0.5, "{grown}");
}

// ---------------------------------------------------------------- H-TCP

#[test]
fn htcp_alpha_grows_with_time_since_congestion() {
    let c = HtcpConfig::default();
    assert_eq!(c.alpha_of_delta(0.5), 1.0);
    assert_eq!(c.alpha_of_delta(1.0), 1.0);
    assert_eq!(c.alpha_of_delta(2.0), 1.0 + 10.0 + 0.25);
    assert_eq!(c.alpha_of_delta(11.0), 1.0 + 100.0 + 25.0);

    // At RTT 100 ms (RTT scaling factor 1) and beta 0.5 (first backoff),
    // alpha = 2 (1 - beta) alpha(Δ) = alpha(Δ).
    let mut cca = make("htcp", &env(100));
    let mut path = Path::new();
    path.round(cca.as_mut(), ms(100));
    path.loss(cca.as_mut());
    let lost_at = path.now;
    assert_eq!(num(cca.as_ref(), "beta"), 0.5);
    // Low-speed phase: about one segment per RTT.
    path.round(cca.as_mut(), ms(100));
    let early = path.growth(cca.as_mut(), ms(100)) / MSS as f64;
    assert!((0.8..=1.2).contains(&early), "{early}");
    // High-speed phase: at Δ ≈ 3 s, alpha(Δ) = 1 + 20 + 1 = 22.
    while path.now.saturating_since(lost_at) < Duration::from_secs(3) {
        path.round(cca.as_mut(), ms(100));
    }
    let alpha = num(cca.as_ref(), "alpha");
    assert!((21.0..=24.0).contains(&alpha), "{alpha}");
    let late = path.growth(cca.as_mut(), ms(100)) / MSS as f64;
    assert!((18.0..=25.0).contains(&late), "{late}");
}

// ---------------------------------------------------------------- Hybla

#[test]
fn hybla_rate_growth_per_second_is_rtt_independent() {
    // Rate growth (segments/s per second) in congestion avoidance over 2 s.
    let rate_growth = |spec: &str, rtt: Duration| {
        let mut cca = make(spec, &env(1000));
        let mut path = Path::new();
        path.round(cca.as_mut(), rtt);
        path.loss(cca.as_mut());
        let w0 = segments(cca.as_ref());
        let rounds = (2.0 / rtt.as_secs_f64()).round() as usize;
        path.rounds(cca.as_mut(), rtt, rounds);
        (segments(cca.as_ref()) - w0) / rtt.as_secs_f64() / 2.0
    };
    let reference = rate_growth("hybla", ms(25));
    // Reno at 25 ms grows 1 segment per 25 ms round: 40 segments/s per 25 ms.
    assert!(
        (reference - 1.0 / 0.025 / 0.025).abs() < 0.1 * reference,
        "{reference}"
    );
    for rtt in [ms(100), ms(200)] {
        let g = rate_growth("hybla", rtt);
        assert!(
            (g / reference - 1.0).abs() < 0.12,
            "rtt {rtt:?}: {g} vs {reference}"
        );
        // NewReno's rate growth falls with the square of the RTT.
        let reno = rate_growth("newreno", rtt);
        assert!(reno / reference < 0.1, "newreno at {rtt:?}: {reno}");
    }
    let cca = make("hybla", &env(10));
    let mut cca = cca;
    Path::new().round(cca.as_mut(), ms(100));
    assert_eq!(num(cca.as_ref(), "rho"), 4.0);
}

// ---------------------------------------------------------------- Illinois

#[test]
fn illinois_alpha_and_beta_follow_queueing_delay() {
    let c = IllinoisConfig::default();
    let dm = 0.1;
    assert_eq!(c.alpha(0.0, dm), 10.0);
    assert!((c.alpha(dm, dm) - 0.3).abs() < 1e-9);
    assert!(c.alpha(dm / 2.0, dm) < 1.0 && c.alpha(dm / 2.0, dm) > 0.3);
    assert_eq!(c.beta(0.0, dm), 0.125);
    assert_eq!(c.beta(dm, dm), 0.5);
    assert!((c.beta(0.45 * dm, dm) - 0.3125).abs() < 1e-9);

    let mut cca = make("illinois", &env(100));
    let mut path = Path::new();
    path.rounds(cca.as_mut(), ms(100), 2);
    path.loss(cca.as_mut());
    path.rounds(cca.as_mut(), ms(200), 2); // d_m = 100 ms
    path.rounds(cca.as_mut(), ms(100), 8); // then theta low-delay rounds
    assert_eq!(num(cca.as_ref(), "alpha"), 10.0);
    assert_eq!(num(cca.as_ref(), "beta"), 0.125);
    let grown = path.growth(cca.as_mut(), ms(100)) / MSS as f64;
    assert!((8.5..=10.5).contains(&grown), "{grown}");
    let w = cca.window() as f64;
    path.loss(cca.as_mut());
    assert!((cca.window() as f64 / w - 0.875).abs() < 0.002);
    // High queueing delay: slow growth, deep backoff.
    path.rounds(cca.as_mut(), ms(200), 3);
    assert!((num(cca.as_ref(), "alpha") - 0.3).abs() < 1e-6);
    assert_eq!(num(cca.as_ref(), "beta"), 0.5);
    let grown = path.growth(cca.as_mut(), ms(200)) / MSS as f64;
    assert!((0.2..=0.4).contains(&grown), "{grown}");
    let w = cca.window() as f64;
    path.loss(cca.as_mut());
    assert!((cca.window() as f64 / w - 0.5).abs() < 0.002);
}

// ---------------------------------------------------------------- Vegas

#[test]
fn vegas_keeps_alpha_to_beta_packets_queued_without_filling_the_buffer() {
    let mbit = 10.0;
    let base = ms(40);
    let mut model = Model::new(
        vec![flow(make("vegas", &Env::with_mss(MSS)), base, Time::ZERO)],
        link(mbit, 100),
        ms(10),
    );
    model.run_until(Time::from_secs_f64(10.0));
    let ser = serialization(mbit);
    let queued =
        |s: &FlowSample| (s.rtt.saturating_sub(base + ser)).as_secs_f64() / ser.as_secs_f64();
    let steady = flow_samples(
        model.samples(),
        0,
        Time::from_secs_f64(5.0),
        Time::from_secs_f64(10.0),
    );
    let mean = steady.iter().map(queued).sum::<f64>() / steady.len() as f64;
    let max = steady.iter().map(queued).fold(0.0, f64::max);
    assert!((1.5..=5.0).contains(&mean), "mean queue {mean} packets");
    assert!(max <= 6.5, "max queue {max} packets");
    assert_eq!(
        model.totals(0).lost,
        0,
        "Vegas never fills the 100-packet buffer"
    );
    let diff = num(model.cca(0), "diff_segments");
    assert!((1.0..=5.0).contains(&diff), "{diff}");
    // And it still uses the link.
    let goodput = model.mean_goodput_bps(0, Time::from_secs_f64(5.0), Time::from_secs_f64(10.0));
    assert!(goodput > 0.9 * mbit * 1e6, "{goodput}");
}

// ---------------------------------------------------------------- Veno

#[test]
fn veno_backs_off_less_for_random_loss_than_for_congestive_loss() {
    let mut cca = make("veno", &env(100));
    let mut path = Path::new();
    path.rounds(cca.as_mut(), ms(100), 2);
    // No queueing: a loss is taken as random.
    assert_eq!(text(cca.as_ref(), "state"), "non-congestive");
    let w = cca.window() as f64;
    path.loss(cca.as_mut());
    assert!((cca.window() as f64 / w - 0.8).abs() < 0.002);
    // RTT doubled: half the window is queued, far above beta = 3.
    path.rounds(cca.as_mut(), ms(200), 2);
    assert_eq!(text(cca.as_ref(), "state"), "congestive");
    assert!(num(cca.as_ref(), "backlog_segments") > 3.0);
    // In the congestive state it grows one segment every other RTT.
    let grown: f64 = (0..4)
        .map(|_| path.growth(cca.as_mut(), ms(200)))
        .sum::<f64>()
        / MSS as f64;
    assert!((1.5..=2.5).contains(&grown), "{grown}");
    let w = cca.window() as f64;
    path.loss(cca.as_mut());
    assert!((cca.window() as f64 / w - 0.5).abs() < 0.002);
}

// ---------------------------------------------------------------- Westwood+

#[test]
fn westwood_backs_off_to_bandwidth_estimate_times_min_rtt() {
    let mbit = 10.0;
    let base = ms(20);
    let bdp = mbit * 1e6 / 8.0 * (base + serialization(mbit)).as_secs_f64() / MSS as f64;
    // Buffer of two BDPs: NewReno would halve from ~3 BDP to ~1.5 BDP.
    let buffer = (2.0 * bdp) as u64;
    let run = |spec: &str| {
        let mut model = Model::new(
            vec![flow(make(spec, &Env::with_mss(MSS)), base, Time::ZERO)],
            link(mbit, buffer),
            ms(5),
        );
        model.run_until(Time::from_secs_f64(20.0));
        let s = flow_samples(model.samples(), 0, Time::ZERO, Time::from_secs_f64(20.0));
        // Windows right after each reduction, after the estimate has settled.
        let drops: Vec<f64> = s
            .windows(2)
            .filter(|p| {
                p[1].time > Time::from_secs_f64(4.0)
                    && (p[1].window as f64) < 0.85 * p[0].window as f64
            })
            .map(|p| p[1].window as f64 / MSS as f64)
            .collect();
        (drops, model)
    };
    let (drops, model) = run("westwood");
    assert!(drops.len() >= 3, "{drops:?}");
    for w in &drops {
        assert!(
            (w / bdp - 1.0).abs() < 0.15,
            "after-loss window {w} vs BDP {bdp}"
        );
    }
    let bwe = num(model.cca(0), "bwe_Bps") * 8.0;
    assert!((bwe / (mbit * 1e6) - 1.0).abs() < 0.1, "BWE {bwe}");
    // NewReno on the same link backs off to about 1.5 BDP.
    let (reno_drops, _) = run("newreno");
    assert!(reno_drops.iter().all(|w| w / bdp > 1.3), "{reno_drops:?}");
}

// ---------------------------------------------------------------- YeAH

#[test]
fn yeah_fast_mode_is_scalable_and_slow_mode_decongests_a_queue() {
    let mut cca = make("yeah", &env(1000));
    let mut path = Path::new();
    path.rounds(cca.as_mut(), ms(50), 2);
    // A loss without a queue removes only cwnd / 8 (delta = 3).
    let w = cca.window() as f64;
    path.loss(cca.as_mut());
    assert!((cca.window() as f64 / w - 0.875).abs() < 0.002);
    // Fast mode: Scalable, 1 % per RTT above 100 segments.
    path.round(cca.as_mut(), ms(50));
    assert_eq!(text(cca.as_ref(), "mode"), "fast");
    let w = cca.window() as f64;
    let grown = path.growth(cca.as_mut(), ms(50));
    assert!((grown / w - 0.01).abs() < 0.001, "{}", grown / w);
    // The RTT doubles: half the window is queued (> alpha = 80 segments), so
    // YeAH switches to slow mode and removes the queue without any loss.
    let before = segments(cca.as_ref());
    path.rounds(cca.as_mut(), ms(100), 3);
    assert_eq!(text(cca.as_ref(), "mode"), "slow");
    assert!(num(cca.as_ref(), "decongestions") >= 1.0);
    let after = segments(cca.as_ref());
    assert!(after < 0.6 * before, "{before} -> {after}");
    // Decongestion also sets ssthresh to the new window (Reno growth since).
    let ssthresh = cca.stats().ssthresh.expect("ssthresh set") as f64 / MSS as f64;
    assert!(
        ssthresh <= after && ssthresh > 0.95 * after,
        "ssthresh {ssthresh}, cwnd {after}"
    );
}

// ---------------------------------------------------------------- LEDBAT

#[test]
fn ledbat_holds_its_target_alone_and_yields_to_newreno() {
    let mbit = 10.0;
    let base = ms(40);
    let mut model = Model::new(
        vec![
            flow(make("ledbat", &Env::with_mss(MSS)), base, Time::ZERO),
            flow(
                make("newreno", &Env::with_mss(MSS)),
                base,
                Time::from_secs_f64(6.0),
            ),
        ],
        link(mbit, 300), // 288 ms of buffer: more than the 100 ms target
        ms(10),
    );
    model.run_until(Time::from_secs_f64(6.0));
    // Alone: the link is used and the queueing delay climbs towards (but,
    // at GAIN = 1, approaches only slowly) the 100 ms target; no loss.
    let alone = model.mean_goodput_bps(0, Time::from_secs_f64(4.0), Time::from_secs_f64(6.0));
    assert!(alone > 0.9 * mbit * 1e6, "{alone}");
    let qd = num(model.cca(0), "queuing_delay_s");
    assert!((0.02..0.1).contains(&qd), "{qd}");
    assert_eq!(model.totals(0).lost, 0);
    let joined_at = model.cca(0).window();
    // With NewReno the queueing delay exceeds the target for good, so LEDBAT
    // shrinks (by |off_target| ~ 1.6 segments per ~300 ms RTT) down to its
    // minimum window and NewReno gets the link.
    model.run_until(Time::from_secs_f64(28.0));
    let from = Time::from_secs_f64(22.0);
    let to = Time::from_secs_f64(28.0);
    let ledbat = model.mean_goodput_bps(0, from, to);
    let reno = model.mean_goodput_bps(1, from, to);
    assert!(
        reno > 0.9 * (ledbat + reno),
        "ledbat {ledbat}, newreno {reno}"
    );
    assert!(
        model.cca(0).window() <= 8 * MSS,
        "{} (was {joined_at})",
        model.cca(0).window()
    );
}

#[test]
fn ledbat_settles_at_a_configured_target() {
    let mut model = Model::new(
        vec![flow(
            make("ledbat(target=25ms)", &Env::with_mss(MSS)),
            ms(40),
            Time::ZERO,
        )],
        link(10.0, 300),
        ms(10),
    );
    model.run_until(Time::from_secs_f64(6.0));
    let qd = num(model.cca(0), "queuing_delay_s");
    assert!((0.018..=0.0255).contains(&qd), "{qd}");
    assert_eq!(num(model.cca(0), "target_s"), 0.025);
    assert_eq!(model.totals(0).lost, 0);
}

#[test]
fn ledbat_slow_starts_until_the_first_loss_only_when_asked() {
    let rtt = ms(40);
    // RFC 6817 (the default): from 2 segments, at most about GAIN = 1
    // segment per round trip on an empty path.
    let mut rfc = make("ledbat", &Env::with_mss(MSS));
    let mut path = Path::new();
    path.rounds(rfc.as_mut(), rtt, 5);
    assert!(segments(rfc.as_ref()) <= 7.0, "{}", segments(rfc.as_ref()));
    assert_eq!(rfc.stats().ssthresh, None);

    // ns-3's TcpLedbat: slow start doubles the window each round trip from
    // 10 segments...
    let mut ss = make("ledbat(slow_start=on, init_cwnd=10)", &Env::with_mss(MSS));
    let mut path = Path::new();
    path.rounds(ss.as_mut(), rtt, 5);
    assert_eq!(segments(ss.as_ref()), 320.0);
    // ...until the first loss halves it; the delay rule grows it after, by
    // at most a segment per round trip. (This path sends a whole window and
    // then takes its ACKs, so RFC 6817's cap of the flight size plus one
    // segment also shrinks it; a sender refilling the window on each ACK
    // does not see that.)
    path.loss(ss.as_mut());
    assert_eq!(segments(ss.as_ref()), 160.0);
    assert_eq!(ss.stats().ssthresh, Some(160 * MSS));
    for _ in 0..5 {
        let grew = path.growth(ss.as_mut(), rtt) / MSS as f64;
        assert!(grew <= 1.01, "grew {grew} segments in a round trip");
    }

    // A persistent congestion restarts slow start, up to the halved window.
    let mut ss = make("ledbat(slow_start=on, init_cwnd=10)", &Env::with_mss(MSS));
    let mut path = Path::new();
    path.rounds(ss.as_mut(), rtt, 5);
    path.congestion(ss.as_mut(), true);
    assert_eq!(segments(ss.as_ref()), 2.0);
    assert_eq!(ss.stats().ssthresh, Some(160 * MSS));
    path.rounds(ss.as_mut(), rtt, 3);
    assert_eq!(segments(ss.as_ref()), 16.0);
}

// ---------------------------------------------------------------- BBR

/// BBR alone on a 10 Mbit/s, 40 ms link; `(time, mode, pacing gain, cycle index, window)`
/// every 5 ms.
fn bbr_trace(until_secs: f64) -> Vec<(f64, &'static str, f64, f64, u64)> {
    let mut model = Model::new(
        vec![flow(make("bbr", &Env::with_mss(MSS)), ms(40), Time::ZERO)],
        link(10.0, 200),
        ms(100),
    );
    let mut trace = Vec::new();
    let mut t = 0.0;
    while t < until_secs {
        t += 0.005;
        model.run_until(Time::from_secs_f64(t));
        let cca = model.cca(0);
        trace.push((
            t,
            text(cca, "mode"),
            num(cca, "pacing_gain"),
            num(cca, "cycle_index"),
            cca.window(),
        ));
    }
    trace
}

#[test]
fn bbr_cycles_pacing_gains_and_probes_rtt_after_ten_seconds() {
    let trace = bbr_trace(11.0);
    // Startup, drain, then ProbeBW within the first second.
    let first_probe_bw = trace
        .iter()
        .position(|e| e.1 == "probe_bw")
        .expect("reaches probe_bw");
    assert!(trace[first_probe_bw].0 < 1.0, "{}", trace[first_probe_bw].0);
    assert!(trace[..first_probe_bw].iter().any(|e| e.1 == "drain"));
    // Gain cycle in ProbeBW before ProbeRTT: phases in order, gains 1.25, 0.75, then 1 x6,
    // each phase at least one RTprop (~41 ms), the six unit phases together ~6 RTprop.
    let probe_rtt = trace
        .iter()
        .position(|e| e.1 == "probe_rtt")
        .expect("enters probe_rtt");
    let mut phases: Vec<(f64, f64, f64)> = Vec::new(); // (start, index, gain)
    for e in &trace[first_probe_bw..probe_rtt] {
        if !phases.last().is_some_and(|p| p.1 == e.3) {
            phases.push((e.0, e.3, e.2));
        }
    }
    assert!(phases.len() > 40, "{}", phases.len());
    for pair in phases.windows(2) {
        assert_eq!(
            pair[1].1 as usize,
            (pair[0].1 as usize + 1) % 8,
            "{phases:?}"
        );
    }
    for p in &phases {
        let expected = match p.1 as usize {
            0 => 1.25,
            1 => 0.75,
            _ => 1.0,
        };
        assert_eq!(p.2, expected);
    }
    let starts_of_zero: Vec<f64> = phases.iter().filter(|p| p.1 == 0.0).map(|p| p.0).collect();
    for pair in starts_of_zero.windows(2) {
        let cycle = pair[1] - pair[0];
        assert!(
            (0.3..=0.45).contains(&cycle),
            "8-phase cycle took {cycle} s"
        );
    }
    // ProbeRTT ten seconds after the last new minimum (the first ACKs, ~41 ms).
    let t = trace[probe_rtt].0;
    assert!((10.0..=10.3).contains(&t), "probe_rtt at {t}");
    let in_probe: Vec<_> = trace[probe_rtt..]
        .iter()
        .take_while(|e| e.1 == "probe_rtt")
        .collect();
    assert!(in_probe.iter().all(|e| e.4 <= 4 * MSS), "cwnd in probe_rtt");
    let lasted = in_probe.len() as f64 * 0.005;
    assert!((0.2..=0.35).contains(&lasted), "probe_rtt lasted {lasted}");
    assert_eq!(trace[probe_rtt + in_probe.len()].1, "probe_bw");
}

#[test]
fn bbr_paces_near_the_bottleneck_rate() {
    let mut model = Model::new(
        vec![flow(make("bbr", &Env::with_mss(MSS)), ms(40), Time::ZERO)],
        link(10.0, 200),
        ms(100),
    );
    model.run_until(Time::from_secs_f64(4.0));
    let cca = model.cca(0);
    let btl_bw = num(cca, "btl_bw_Bps") * 8.0;
    assert!((btl_bw / 10e6 - 1.0).abs() < 0.05, "{btl_bw}");
    let rt_prop = num(cca, "rt_prop_s");
    assert!((rt_prop - 0.041).abs() < 0.002, "{rt_prop}");
    let rate = cca.pacing_rate().unwrap() as f64 * 8.0;
    assert!((0.7..=1.3).contains(&(rate / 10e6)), "{rate}");
    let goodput = model.mean_goodput_bps(0, Time::from_secs_f64(2.0), Time::from_secs_f64(4.0));
    assert!(goodput > 0.9 * 10e6, "{goodput}");
    // No standing queue: the RTT stays within a few ms of the propagation delay.
    let late = flow_samples(
        model.samples(),
        0,
        Time::from_secs_f64(2.0),
        Time::from_secs_f64(4.0),
    );
    let mean_rtt = late.iter().map(|s| s.rtt.as_secs_f64()).sum::<f64>() / late.len() as f64;
    assert!(mean_rtt < 0.041 + 0.015, "{mean_rtt}");
}

/// BBR's window in ProbeBW's unit-gain phases is `2 BDP + 3 send quanta`,
/// with the draft's send quantum: two segments at 10 Mbit/s of pacing (1.2-24
/// Mbit/s), 1 ms of data at 50 Mbit/s (above 24 Mbit/s). With one segment
/// of budget instead (the rule below 1.2 Mbit/s), or a fixed 3 segments,
/// the windows differ by 3 or more segments.
#[test]
fn bbr_budgets_three_send_quanta_above_two_bdp() {
    for (mbps, quantum) in [(10.0, 2.0 * MSS as f64), (50.0, 50e6 / 8.0 * 1e-3)] {
        let mut model = Model::new(
            vec![flow(make("bbr", &Env::with_mss(MSS)), ms(40), Time::ZERO)],
            link(mbps, 2000),
            ms(100),
        );
        let mut checked = 0;
        let mut t = 2.0;
        while t < 6.0 {
            t += 0.01;
            model.run_until(Time::from_secs_f64(t));
            let cca = model.cca(0);
            if text(cca, "mode") != "probe_bw" || num(cca, "cycle_index") < 3.0 {
                continue;
            }
            let bdp = num(cca, "btl_bw_Bps") * num(cca, "rt_prop_s");
            let pacing = cca.pacing_rate().unwrap() as f64 * 8.0;
            assert!(
                (1.2e6..24e6).contains(&pacing) == (mbps < 24.0),
                "pacing {pacing} bit/s at {mbps} Mbit/s"
            );
            let want = 2.0 * bdp + 3.0 * quantum;
            let got = cca.window() as f64;
            assert!(
                (got - want).abs() <= MSS as f64,
                "{mbps} Mbit/s at {t:.2} s: window {got}, 2 BDP + 3 quanta {want}"
            );
            checked += 1;
        }
        assert!(
            checked > 100,
            "{mbps} Mbit/s: {checked} samples in unit phases"
        );
    }
}

// ---------------------------------------------------------------- all algorithms

fn spec_of(algorithm: &registry::Algorithm) -> String {
    if algorithm.takes_base {
        format!("{}(newreno)", algorithm.name)
    } else {
        algorithm.name.to_string()
    }
}

#[test]
fn every_algorithm_continues_from_an_imposed_window() {
    for algorithm in registry::ALGORITHMS {
        let spec = spec_of(algorithm);
        let mut cca = make(&spec, &env(40));
        let mut path = Path::new();
        path.rounds(cca.as_mut(), ms(50), 3);
        path.loss(cca.as_mut());
        path.rounds(cca.as_mut(), ms(50), 3);
        let w = cca.window();
        let imposed = (w / 2).max(8 * MSS);
        cca.impose_window(path.now, imposed);
        assert!(
            cca.window() <= imposed.max(4 * MSS),
            "{spec}: {} > {imposed}",
            cca.window()
        );
        // Raising is ignored.
        cca.impose_window(path.now, 10 * w);
        assert!(cca.window() <= imposed.max(4 * MSS), "{spec}");
        // A few ACKs grow it from there, not back to the old window.
        for i in 0..3 {
            let ack = Ack {
                packet_number: path.next_pn + i,
                bytes: MSS,
                sent_time: path.now,
                rtt: RttSample::fixed(ms(50)),
                app_limited: false,
            };
            cca.on_packet_sent(
                path.now,
                &SentPacket {
                    packet_number: path.next_pn + i,
                    bytes: MSS,
                    bytes_in_flight: MSS,
                },
            );
            cca.on_ack(path.now + ms(50), &ack);
        }
        // (Libra's alpha grows with its capacity estimate, so allow 5 %.)
        let limit = imposed + imposed / 20 + 4 * MSS;
        assert!(
            cca.window() <= limit,
            "{spec}: snapped back to {} (imposed {imposed})",
            cca.window()
        );
        // Nor does the next loss restore it.
        path.now = path.now + ms(60);
        path.loss(cca.as_mut());
        assert!(cca.window() <= limit, "{spec}: after loss {}", cca.window());
        assert!(cca.window() >= 2 * MSS, "{spec}");
    }
}

#[test]
fn every_algorithm_handles_an_mtu_change_and_a_lossy_link() {
    for algorithm in registry::ALGORITHMS {
        let spec = spec_of(algorithm);
        let mut cca = make(&spec, &Env::with_mss(MSS));
        let mut path = Path::new();
        path.rounds(cca.as_mut(), ms(30), 3);
        cca.on_mtu_change(path.now, 1500);
        assert!(cca.window() >= 2 * 1500, "{spec}");
        path.rounds(cca.as_mut(), ms(30), 2);

        let loss = LossPattern::Random { p: 0.01, seed: 7 };
        let setup = FlowSetup {
            cca: make(&spec, &Env::with_mss(MSS)),
            base_rtt: ms(30),
            start: Time::ZERO,
            mss: MSS,
            loss,
            receive_window: 8 << 20,
        };
        let mut model = Model::new(vec![setup], link(20.0, 60), ms(50));
        model.run_until(Time::from_secs_f64(3.0));
        let goodput = model.mean_goodput_bps(0, Time::from_secs_f64(1.0), Time::from_secs_f64(3.0));
        assert!(goodput > 0.0, "{spec}");
        let stats = model.cca(0).stats();
        assert!(stats.window >= 2 * MSS, "{spec}");
        assert!(
            !stats.details.is_empty() || matches!(algorithm.name, "newreno"),
            "{spec}: no details"
        );
    }
}

#[test]
fn readme_lists_every_registered_parameter_default() {
    let readme = include_str!("../README.md");
    for algorithm in registry::ALGORITHMS {
        let start = format!("| `{}` |", algorithm.name);
        let row = readme
            .lines()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("README.md has no table row for {}", algorithm.name));
        for p in algorithm.params {
            let entry = format!("`{}={}`", p.name, p.default);
            assert!(
                row.contains(&entry),
                "README.md row for {} lacks {entry}",
                algorithm.name
            );
        }
        let source = algorithm
            .source
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches(',');
        assert!(
            row.contains(source),
            "README.md row for {} does not cite {source}",
            algorithm.name
        );
    }
}

//! Turning a [`RawScenario`] into a resolved [`Scenario`]: one function per
//! section of the file, in the order the file is checked (top level,
//! topology, flows, buffer, router, metrics), so the first error reported is
//! the same whatever the split.

use std::time::Duration;

use tollgate_cca::units::{format_duration, parse_bytes, parse_duration, parse_rate_bps};
use tollgate_cca::{Env, VariantId};

use super::kind::FlowKind;
use super::router::resolve_router;
use super::schema::{OneOrMany, RawFlowGroup, RawMetrics, RawScenario, RawTopology};
use super::{
    Draw, FlowGroup, MetricSpec, NoiseKind, Scenario, ScenarioError, TopologyKind, PACKET_BYTES,
};

/// A duration in seconds.
pub(super) fn dur(field: &str, text: &str) -> Result<f64, ScenarioError> {
    parse_duration(text)
        .map(|d| d.as_secs_f64())
        .map_err(|e| ScenarioError::new(field, format!("\"{text}\""), format!("a duration ({e})")))
}

/// A rate in bit/s.
fn rate(field: &str, text: &str) -> Result<f64, ScenarioError> {
    parse_rate_bps(text)
        .map_err(|e| ScenarioError::new(field, format!("\"{text}\""), format!("a rate ({e})")))
}

/// `a..b` with both sides parsed by `f`, or a single value.
fn draw(
    field: &str,
    text: &str,
    f: impl Fn(&str, &str) -> Result<f64, ScenarioError>,
) -> Result<Draw, ScenarioError> {
    match text.split_once("..") {
        Some((a, b)) => {
            let lo = f(field, a)?;
            let hi = f(field, b)?;
            if lo > hi {
                return Err(ScenarioError::new(
                    field,
                    format!("\"{text}\""),
                    "a range lo..hi with lo <= hi",
                ));
            }
            Ok(Draw::Uniform(lo, hi))
        }
        None => Ok(Draw::Fixed(f(field, text)?)),
    }
}

/// A size in bytes.
fn bytes(field: &str, text: &str) -> Result<f64, ScenarioError> {
    parse_bytes(text)
        .map(|b| b as f64)
        .map_err(|e| ScenarioError::new(field, format!("\"{text}\""), format!("a size ({e})")))
}

/// One value per flow of a group of `count`.
fn per_flow(field: &str, v: &OneOrMany, count: u32) -> Result<Vec<String>, ScenarioError> {
    match v {
        OneOrMany::One(s) => Ok(vec![s.clone(); count as usize]),
        OneOrMany::Many(list) if list.len() == count as usize => Ok(list.clone()),
        OneOrMany::Many(list) => Err(ScenarioError::new(
            field,
            format!("a list of {}", list.len()),
            format!("one value, or a list of exactly `count` = {count} values"),
        )),
    }
}

/// Check a raw scenario and resolve every quantity.
pub fn resolve(raw: &RawScenario) -> Result<Scenario, ScenarioError> {
    check_name(&raw.name)?;
    let duration_s = dur("duration", &raw.duration)?;
    if !(0.01..=100_000.0).contains(&duration_s) {
        return Err(ScenarioError::new(
            "duration",
            format!("\"{}\"", raw.duration),
            "10ms ..= 100000s",
        ));
    }
    let sample_interval_s = match &raw.sample_interval {
        Some(t) => dur("sample_interval", t)?,
        None => 0.1,
    };
    if !(0.001..=duration_s).contains(&sample_interval_s) {
        return Err(ScenarioError::new(
            "sample_interval",
            format!("{sample_interval_s}s"),
            "1ms ..= duration",
        ));
    }
    let topo = resolve_topology(&raw.topology)?;
    let flows = resolve_flows(raw, &topo, duration_s)?;
    let (buffer, buffer_packets) = resolve_buffer(&raw.topology, topo.bottleneck_rate_bps, &flows)?;
    let router = resolve_router(&raw.router, buffer_packets, topo.bottleneck_rate_bps)?;
    let metrics = resolve_metrics(&raw.metrics, &flows, duration_s, sample_interval_s)?;
    Ok(Scenario {
        name: raw.name.clone(),
        description: raw.description.clone().unwrap_or_default(),
        duration_s,
        seed: raw.seed.unwrap_or(1),
        sample_interval_s,
        topology: topo.kind,
        hops: topo.hops,
        bottleneck_rate_bps: topo.bottleneck_rate_bps,
        bottleneck_delay_s: topo.bottleneck_delay_s,
        bottleneck_loss: topo.bottleneck_loss,
        buffer,
        access_rate_bps: topo.access_rate_bps,
        noise: topo.noise,
        noise_scale: topo.noise_scale,
        path_noise_scale: topo.path_noise_scale,
        host_jitter_s: topo.host_jitter_s,
        packet_protection: raw.packet_protection.unwrap_or(true),
        router,
        flows,
        metrics,
        sweep_point: None,
    })
}

/// `name`: non-empty and safe as a directory name.
fn check_name(name: &str) -> Result<(), ScenarioError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || name.starts_with('.')
    {
        return Err(ScenarioError::new(
            "name",
            format!("\"{name}\""),
            "a non-empty file-name-safe name: letters, digits, - _ . (not starting with .)",
        ));
    }
    Ok(())
}

/// The resolved `[topology]` (the buffer is resolved after the flows).
struct Topology {
    kind: TopologyKind,
    hops: u32,
    bottleneck_rate_bps: f64,
    bottleneck_delay_s: f64,
    access_rate_bps: f64,
    noise: NoiseKind,
    noise_scale: f64,
    path_noise_scale: f64,
    host_jitter_s: f64,
    bottleneck_loss: f64,
}

/// `topology.noise = "iid"` with `topology.jitter = "auto"`: this many
/// 1500-byte packet times at the bottleneck rate (960 µs at 100 Mbit/s). One packet time (the default
/// before) left drop-tail losses phase-locked onto the long-RTT flow at
/// 0.2-0.5 BDP (its per-packet drop rate 5.5x the short flow's); the
/// short/long ratio falls as the jitter grows and levels off from about
/// 1 ms at 100 Mbit/s, where both flows lose the same fraction of their
/// packets and Tollgate agrees with ns-3 given timing noise
/// (tools/reproduce/DROP-BIAS.md, "Default jitter"). Phase locking is a
/// matter of the bottleneck's transmission slots, so the bound scales with
/// the packet time; only 100 Mbit/s was measured.
pub const JITTER_AUTO_PACKETS: f64 = 8.0;

/// `[topology]`: kind, hops, bottleneck rate and delay, access rate.
fn resolve_topology(t: &RawTopology) -> Result<Topology, ScenarioError> {
    let topology = match t.kind.as_str() {
        "dumbbell" => TopologyKind::Dumbbell,
        "parking-lot" => TopologyKind::ParkingLot,
        other => {
            return Err(ScenarioError::new(
                "topology.kind",
                format!("\"{other}\""),
                "\"dumbbell\" or \"parking-lot\"",
            ))
        }
    };
    let hops = match (topology, t.hops) {
        (TopologyKind::Dumbbell, None) => 1,
        (TopologyKind::Dumbbell, Some(h)) => {
            return Err(ScenarioError::new(
                "topology.hops",
                h,
                "only with kind = \"parking-lot\"",
            ))
        }
        (TopologyKind::ParkingLot, None) => 3,
        (TopologyKind::ParkingLot, Some(h)) if (1..=16).contains(&h) => h,
        (TopologyKind::ParkingLot, Some(h)) => {
            return Err(ScenarioError::new("topology.hops", h, "1 ..= 16"))
        }
    };
    let bottleneck_rate_bps = rate("topology.bottleneck.rate", &t.bottleneck.rate)?;
    if !(1e5..=1e11).contains(&bottleneck_rate_bps) {
        return Err(ScenarioError::new(
            "topology.bottleneck.rate",
            format!("\"{}\"", t.bottleneck.rate),
            "100kbit ..= 100Gbit",
        ));
    }
    let bottleneck_delay_s = dur("topology.bottleneck.delay", &t.bottleneck.delay)?;
    if bottleneck_delay_s > 10.0 {
        return Err(ScenarioError::new(
            "topology.bottleneck.delay",
            format!("\"{}\"", t.bottleneck.delay),
            "0s ..= 10s",
        ));
    }
    let access_rate_bps = match &t.access_rate {
        Some(r) => rate("topology.access_rate", r)?,
        None => 10.0 * bottleneck_rate_bps,
    };
    let noise = match (t.noise.as_deref(), t.jitter.as_deref()) {
        (None, None) => NoiseKind::Host,
        // A jitter alone selects the i.i.d. model it belongs to.
        (None, Some(_)) | (Some("iid"), _) => NoiseKind::Iid,
        (Some("host"), None) => NoiseKind::Host,
        (Some("none"), None) => NoiseKind::None,
        (Some(n @ ("host" | "none")), Some(j)) => {
            return Err(ScenarioError::new(
                "topology.jitter",
                format!("\"{j}\""),
                format!("no jitter with noise = \"{n}\" (jitter sets the bound of noise = \"iid\")"),
            ))
        }
        (Some(other), _) => {
            return Err(ScenarioError::new(
                "topology.noise",
                format!("\"{other}\""),
                "\"host\" (measured host wake-ups, the default), \"iid\" (uniform per datagram, bound topology.jitter) or \"none\"",
            ))
        }
    };
    let scale = |field: &str, value: Option<f64>| match (value, noise) {
        (None, _) => Ok(1.0),
        (Some(x), NoiseKind::Host) if (0.0..=10.0).contains(&x) => Ok(x),
        (Some(x), NoiseKind::Host) => Err(ScenarioError::new(field, x, "0 ..= 10")),
        (Some(x), _) => Err(ScenarioError::new(field, x, "only with noise = \"host\"")),
    };
    let noise_scale = scale("topology.noise_scale", t.noise_scale)?;
    let path_noise_scale = scale("topology.path_noise_scale", t.path_noise_scale)?;
    let host_jitter_s = match t.jitter.as_deref() {
        _ if noise != NoiseKind::Iid => 0.0,
        None | Some("auto") => {
            JITTER_AUTO_PACKETS * PACKET_BYTES as f64 * 8.0 / bottleneck_rate_bps
        }
        Some(j) => {
            let v = dur("topology.jitter", j)?;
            if v > 0.1 {
                return Err(ScenarioError::new(
                    "topology.jitter",
                    format!("\"{j}\""),
                    "\"auto\" or a duration 0s ..= 100ms",
                ));
            }
            v
        }
    };
    let bottleneck_loss = match t.bottleneck.loss {
        None => 0.0,
        Some(p) if (0.0..=0.5).contains(&p) => p,
        Some(p) => {
            return Err(ScenarioError::new(
                "topology.bottleneck.loss",
                p,
                "a probability 0 ..= 0.5 (e.g. 1e-4)",
            ))
        }
    };
    Ok(Topology {
        kind: topology,
        bottleneck_loss,
        hops,
        bottleneck_rate_bps,
        bottleneck_delay_s,
        access_rate_bps,
        noise,
        noise_scale,
        path_noise_scale,
        host_jitter_s,
    })
}

/// `[[flows]]`: every group, then distinct group names.
fn resolve_flows(
    raw: &RawScenario,
    topo: &Topology,
    duration_s: f64,
) -> Result<Vec<FlowGroup>, ScenarioError> {
    if raw.flows.is_empty() {
        return Err(ScenarioError::new(
            "flows",
            "none",
            "at least one [[flows]] group",
        ));
    }
    let mut flows = Vec::new();
    for (gi, g) in raw.flows.iter().enumerate() {
        flows.push(resolve_flow_group(gi, g, topo, duration_s, &raw.duration)?);
    }
    let mut names: Vec<&str> = flows.iter().map(|g| g.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(ScenarioError::new(
            "flows[].name",
            format!("\"{}\"", w[0]),
            "distinct group names",
        ));
    }
    Ok(flows)
}

/// `flows[gi]`; `duration` is the run's duration as written (for messages).
fn resolve_flow_group(
    gi: usize,
    g: &RawFlowGroup,
    topo: &Topology,
    duration_s: f64,
    duration: &str,
) -> Result<FlowGroup, ScenarioError> {
    let p = |f: &str| format!("flows[{gi}].{f}");
    let count = g.count.unwrap_or(1);
    if !(1..=10_000).contains(&count) {
        return Err(ScenarioError::new(p("count"), count, "1 ..= 10000"));
    }
    let kind =
        FlowKind::parse(&g.cca).map_err(|e| ScenarioError::new(p("cca"), e.value, e.allowed))?;
    let variant: VariantId = kind.variant();
    let cca_name = match &kind {
        FlowKind::Quic(spec) => tollgate_cca::build(spec, &Env::default())
            .map(|c| c.name().to_string())
            .unwrap_or_default(),
        other => other.to_string(),
    };
    let hops = topo.hops;
    let hops_range = match (topo.kind, g.hops) {
        (_, None) => (0, hops - 1),
        (TopologyKind::Dumbbell, Some(h)) => {
            return Err(ScenarioError::new(
                p("hops"),
                format!("{h:?}"),
                "only with topology.kind = \"parking-lot\"",
            ))
        }
        (TopologyKind::ParkingLot, Some([a, b])) if a >= 1 && a <= b && b <= hops => (a - 1, b - 1),
        (TopologyKind::ParkingLot, Some(h)) => {
            return Err(ScenarioError::new(
                p("hops"),
                format!("{h:?}"),
                format!("[first, last] with 1 <= first <= last <= topology.hops = {hops}"),
            ))
        }
    };
    let crossed = f64::from(hops_range.1 - hops_range.0 + 1);
    let min_rtt = 2.0 * crossed * topo.bottleneck_delay_s;
    let rtt_s = resolve_rtts(gi, g, count, min_rtt)?;
    let start_s = resolve_starts(gi, g, count, duration_s, duration)?;
    let size_bytes = match g.size.as_deref() {
        None | Some("unbounded") => None,
        Some(s) => {
            let d = draw(&p("size"), s, bytes)?;
            let lo = match d {
                Draw::Fixed(x) | Draw::Uniform(x, _) => x,
            };
            if lo < 1.0 {
                return Err(ScenarioError::new(
                    p("size"),
                    format!("\"{s}\""),
                    "\"unbounded\", a size >= 1 B, or a range such as \"10kB..100kB\"",
                ));
            }
            Some(d)
        }
    };
    let interarrival_s = match &g.interarrival {
        None => None,
        Some(t) => {
            let v = dur(&p("interarrival"), t)?;
            if v <= 0.0 {
                return Err(ScenarioError::new(
                    p("interarrival"),
                    format!("\"{t}\""),
                    "> 0",
                ));
            }
            if matches!(g.start, Some(OneOrMany::Many(_))) {
                return Err(ScenarioError::new(
                    p("start"),
                    "a list",
                    "a single start (the arrival process begins there) when interarrival is set",
                ));
            }
            Some(v)
        }
    };
    let rate_cap_bps = match &g.rate_cap {
        None => None,
        Some(r) => Some(rate(&p("rate_cap"), r)?),
    };
    let window_bytes = match g.window.as_deref() {
        None | Some("auto") => None,
        Some(w) => {
            let v = bytes(&p("window"), w)?;
            if !(16_384.0..=4e9).contains(&v) {
                return Err(ScenarioError::new(
                    p("window"),
                    format!("\"{w}\""),
                    "\"auto\" or a size 16KB ..= 4GB",
                ));
            }
            Some(v as u64)
        }
    };
    let server = match &g.server {
        None => None,
        Some(a) => Some(a.parse::<std::net::SocketAddr>().map_err(|_| {
            ScenarioError::new(
                p("server"),
                format!("\"{a}\""),
                "an address with port, e.g. \"10.0.0.2:4433\"",
            )
        })?),
    };
    let prompt_acks = g.prompt_acks.clone().unwrap_or_else(|| "auto".into());
    if !["auto", "always", "never"].contains(&prompt_acks.as_str()) {
        return Err(ScenarioError::new(
            p("prompt_acks"),
            format!("\"{prompt_acks}\""),
            "\"auto\", \"always\" or \"never\"",
        ));
    }
    Ok(FlowGroup {
        name: g.name.clone().unwrap_or_else(|| format!("g{gi}")),
        count,
        cca: g.cca.clone(),
        cca_name,
        variant: variant.dscp(),
        rtt_s,
        start_s,
        size_bytes,
        interarrival_s,
        rate_cap_bps,
        mark_dscp: g.mark_dscp.unwrap_or(true),
        reverse: g.reverse.unwrap_or(false),
        hops: hops_range,
        prompt_acks,
        window_bytes,
        server,
    })
}

/// `flows[gi].rtt`: per flow, at least `min_rtt` (the propagation delay of
/// the bottleneck hops crossed, both ways) and at most 20 s.
fn resolve_rtts(
    gi: usize,
    g: &RawFlowGroup,
    count: u32,
    min_rtt: f64,
) -> Result<Vec<f64>, ScenarioError> {
    let p = |f: &str| format!("flows[{gi}].{f}");
    let mut rtt_s = Vec::new();
    for (k, r) in per_flow(&p("rtt"), &g.rtt, count)?.iter().enumerate() {
        let field = match &g.rtt {
            OneOrMany::One(_) => p("rtt"),
            OneOrMany::Many(_) => format!("flows[{gi}].rtt[{k}]"),
        };
        let v = dur(&field, r)?;
        if v + 1e-12 < min_rtt || v > 20.0 {
            return Err(ScenarioError::new(
                field,
                format!("\"{r}\""),
                format!(
                    "{} ..= 20s (at least twice the one-way propagation delay of the bottleneck hops crossed)",
                    format_duration(Duration::from_secs_f64(min_rtt))
                ),
            ));
        }
        rtt_s.push(v);
    }
    Ok(rtt_s)
}

/// `flows[gi].start`: per flow, fixed or a range, before the end of the run.
fn resolve_starts(
    gi: usize,
    g: &RawFlowGroup,
    count: u32,
    duration_s: f64,
    duration: &str,
) -> Result<Vec<Draw>, ScenarioError> {
    let p = |f: &str| format!("flows[{gi}].{f}");
    let start_spec = g.start.clone().unwrap_or(OneOrMany::One("0s".to_string()));
    let mut start_s = Vec::new();
    for (k, s) in per_flow(&p("start"), &start_spec, count)?
        .iter()
        .enumerate()
    {
        let field = match &start_spec {
            OneOrMany::One(_) => p("start"),
            OneOrMany::Many(_) => format!("flows[{gi}].start[{k}]"),
        };
        let d = draw(&field, s, dur)?;
        let hi = match d {
            Draw::Fixed(x) | Draw::Uniform(_, x) => x,
        };
        if hi >= duration_s {
            return Err(ScenarioError::new(
                field,
                format!("\"{s}\""),
                format!(
                    "a start before the end of the run (duration = {})",
                    duration
                ),
            ));
        }
        start_s.push(d);
    }
    Ok(start_s)
}

/// `topology.bottleneck.buffer` as written (default `1bdp`) and in packets;
/// a BDP is of the bottleneck rate and the longest flow RTT.
fn resolve_buffer(
    t: &RawTopology,
    bottleneck_rate_bps: f64,
    flows: &[FlowGroup],
) -> Result<(String, u32), ScenarioError> {
    let max_rtt = flows
        .iter()
        .flat_map(|g| g.rtt_s.iter().copied())
        .fold(0.0, f64::max);
    let buffer = t.bottleneck.buffer.clone().unwrap_or_else(|| "1bdp".into());
    let packets = buffer_packets(&buffer, bottleneck_rate_bps, max_rtt)?;
    Ok((buffer, packets))
}

/// A buffer spelling in packets.
fn buffer_packets(text: &str, rate_bps: f64, max_rtt: f64) -> Result<u32, ScenarioError> {
    let field = "topology.bottleneck.buffer";
    let allowed = "\"<x>bdp\" (of the bottleneck rate and the longest flow RTT), \"<n>pkt\", \
                   a bare packet count, or a byte size such as \"375KB\"; at least 2 packets";
    let bad = || ScenarioError::new(field, format!("\"{text}\""), allowed);
    let pkts = if let Some(x) = text.strip_suffix("bdp") {
        let f: f64 = x.trim().parse().map_err(|_| bad())?;
        if !(f.is_finite() && f > 0.0) {
            return Err(bad());
        }
        (f * rate_bps * max_rtt / 8.0 / PACKET_BYTES as f64).ceil()
    } else if let Some(x) = text.strip_suffix("pkt") {
        x.trim().parse::<f64>().map_err(|_| bad())?
    } else if let Ok(n) = text.trim().parse::<f64>() {
        n
    } else {
        let b = parse_bytes(text).map_err(|_| bad())?;
        (b as f64 / PACKET_BYTES as f64).ceil()
    };
    if !(2.0..=1e7).contains(&pkts) || pkts.fract() != 0.0 {
        return Err(bad());
    }
    Ok(pkts as u32)
}

/// `[metrics]`: the measurement window (default: the last fixed start), the
/// fairness window, the target ratio and its hold time.
fn resolve_metrics(
    m: &RawMetrics,
    flows: &[FlowGroup],
    duration_s: f64,
    sample_interval_s: f64,
) -> Result<MetricSpec, ScenarioError> {
    let last_fixed_start = flows
        .iter()
        .filter(|g| g.interarrival_s.is_none())
        .flat_map(|g| g.start_s.iter())
        .map(|d| match d {
            Draw::Fixed(x) | Draw::Uniform(_, x) => *x,
        })
        .fold(0.0, f64::max);
    let measure_from_s = match &m.measure_from {
        Some(t) => dur("metrics.measure_from", t)?,
        None => last_fixed_start,
    };
    if measure_from_s >= duration_s {
        return Err(ScenarioError::new(
            "metrics.measure_from",
            format!("{measure_from_s}s"),
            "a time before the end of the run",
        ));
    }
    let fairness_window_s = match &m.fairness_window {
        Some(t) => dur("metrics.fairness_window", t)?,
        None => 1.0,
    };
    if fairness_window_s < sample_interval_s {
        return Err(ScenarioError::new(
            "metrics.fairness_window",
            format!("{fairness_window_s}s"),
            format!(">= sample_interval ({sample_interval_s}s)"),
        ));
    }
    let target_fairness_ratio = m.target_fairness_ratio.unwrap_or(1.5);
    if !(target_fairness_ratio.is_finite() && target_fairness_ratio >= 1.0) {
        return Err(ScenarioError::new(
            "metrics.target_fairness_ratio",
            target_fairness_ratio,
            "a number >= 1",
        ));
    }
    let target_window_s = match &m.target_window {
        Some(t) => dur("metrics.target_window", t)?,
        None => fairness_window_s,
    };
    if target_window_s < sample_interval_s {
        return Err(ScenarioError::new(
            "metrics.target_window",
            format!("{target_window_s}s"),
            format!(">= sample_interval ({sample_interval_s}s)"),
        ));
    }
    let hold_s = match &m.hold {
        Some(t) => dur("metrics.hold", t)?,
        None => 1.0,
    };
    Ok(MetricSpec {
        measure_from_s,
        fairness_window_s,
        target_fairness_ratio,
        target_window_s,
        hold_s,
    })
}

//! Scenario files: the TOML an experimenter writes, checked and resolved into
//! a [`Scenario`] the emulator runs.
//!
//! Parsing is two-step. Serde reads the file into `Raw*` structs that mirror
//! the text (every table has `deny_unknown_fields`, so a typo is an error, not
//! a silently ignored key); [`resolve`] then turns every quantity into numbers
//! and checks it. Every error names the field path (`flows[1].rtt`), the bad
//! value and what is allowed. The full reference is in `tools/README.md`.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tollgate_cca::units::{format_duration, parse_bytes, parse_duration, parse_rate_bps};
use tollgate_cca::{Env, VariantId};
use tollgate_router::{Context, DisciplineConfig, DisciplineKeys};

/// Bytes assumed per packet when a buffer given in bytes or BDPs is turned
/// into a packet limit (a full 1500-byte IP packet).
pub const PACKET_BYTES: u64 = 1500;

/// A scenario error: which field, what value, what would be allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// Field path, e.g. `flows[1].rtt`.
    pub field: String,
    /// The offending value as written (empty for a missing field).
    pub value: String,
    /// What is allowed there.
    pub allowed: String,
}

impl ScenarioError {
    fn new(field: impl Into<String>, value: impl fmt::Display, allowed: impl Into<String>) -> Self {
        ScenarioError {
            field: field.into(),
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` = {}: invalid; allowed: {}",
            self.field, self.value, self.allowed
        )
    }
}

impl std::error::Error for ScenarioError {}

// ---------------------------------------------------------------- raw text

/// A value given once for all flows of a group, or once per flow.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// Same for every flow.
    One(String),
    /// One per flow (length = `count`).
    Many(Vec<String>),
}

/// The scenario file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    /// Name; results go to `results/<name>/`.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Simulated time.
    pub duration: String,
    /// RNG seed (default 1).
    pub seed: Option<u64>,
    /// Metrics sampling interval (default 100ms).
    pub sample_interval: Option<String>,
    /// Links.
    pub topology: RawTopology,
    /// Queue discipline at the bottleneck port(s).
    #[serde(default)]
    pub router: RawRouter,
    /// Flow groups.
    #[serde(default)]
    pub flows: Vec<RawFlowGroup>,
    /// Metric settings.
    #[serde(default)]
    pub metrics: RawMetrics,
    /// Optional one-parameter sweep.
    pub sweep: Option<RawSweep>,
}

/// `[topology]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    /// `dumbbell` or `parking-lot`.
    pub kind: String,
    /// The bottleneck link (every hop of a parking lot).
    pub bottleneck: RawLink,
    /// Parking lot: number of bottleneck links in series (default 3).
    pub hops: Option<u32>,
    /// Access-link rate (default 10 x the bottleneck rate).
    pub access_rate: Option<String>,
    /// Random delay added to every datagram a host emits: a duration, or
    /// `"auto"` (one 1500-byte packet at the bottleneck rate).
    pub jitter: Option<String>,
}

/// A link.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLink {
    /// Rate, e.g. `100Mbit`.
    pub rate: String,
    /// One-way propagation delay.
    pub delay: String,
    /// Buffer: `1bdp`, `0.2bdp`, `500pkt` / `500`, or bytes (`375KB`). Default `1bdp`.
    pub buffer: Option<String>,
}

/// `[router]`: how the router classifies, and the discipline with its keys
/// (`discipline = "red"` plus RED's keys: the same shape and names as a
/// `router.toml` egress table, documented in `router/README.md`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct RawRouter {
    /// How the router learns a packet's variant: `dscp` (default) or `scenario`.
    pub classify: Option<String>,
    /// The discipline and its keys (default DropTail).
    pub discipline: DisciplineKeys,
}

impl TryFrom<toml::Table> for RawRouter {
    type Error = String;

    fn try_from(mut table: toml::Table) -> Result<Self, String> {
        let classify = match table.remove("classify") {
            None => None,
            Some(toml::Value::String(s)) => Some(s),
            Some(other) => return Err(format!("`router.classify` = {other}: expected a string")),
        };
        let discipline = DisciplineKeys::from_table(table).map_err(|e| format!("[router]: {e}"))?;
        Ok(RawRouter {
            classify,
            discipline,
        })
    }
}

/// `[[flows]]`: a group of identical flows.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlowGroup {
    /// Label (default `g<index>`).
    pub name: Option<String>,
    /// Number of flows (default 1).
    pub count: Option<u32>,
    /// CCA spec string.
    pub cca: String,
    /// Base RTT, one for all or one per flow.
    pub rtt: OneOrMany,
    /// Start: `2s`, or `0s..2s` (uniform random), one for all or one per flow.
    pub start: Option<OneOrMany>,
    /// Size: `unbounded` (default), `1MB`, or `10kB..100kB` (uniform random).
    pub size: Option<String>,
    /// Mean of exponential gaps between successive flow starts (a Poisson
    /// arrival process starting at `start`).
    pub interarrival: Option<String>,
    /// Sender access-link rate cap, e.g. `10Mbit`.
    pub rate_cap: Option<String>,
    /// Mark the CCA variant in DSCP (default true).
    pub mark_dscp: Option<bool>,
    /// Send right to left (reverse traffic), default false.
    pub reverse: Option<bool>,
    /// Parking lot: first and last bottleneck hop crossed (1-based), default all.
    pub hops: Option<[u32; 2]>,
    /// Receiver ACK policy: `auto` (default), `always`, `never`.
    pub prompt_acks: Option<String>,
}

/// `[metrics]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    /// Start of the measurement window (default: when the last fixed-start flow starts).
    pub measure_from: Option<String>,
    /// Window of the Jain's index / fairness ratio time series (default 1s).
    pub fairness_window: Option<String>,
    /// Target fairness ratio for "time to fairness" (default 1.5).
    pub target_fairness_ratio: Option<f64>,
    /// How long the ratio must stay at or below the target (default 1s).
    pub hold: Option<String>,
}

/// `[sweep]`: run the scenario once per value of one parameter.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSweep {
    /// Dotted path, e.g. `router.tau` or `topology.bottleneck.buffer`.
    pub param: String,
    /// Values, as they would be written in the file.
    pub values: Vec<toml::Value>,
}

// ---------------------------------------------------------------- resolved

/// Topology kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// One bottleneck; per-flow access delays.
    Dumbbell,
    /// Bottlenecks in series.
    ParkingLot,
}

/// A value drawn per flow: fixed or uniform in `[lo, hi]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Draw {
    /// Always this.
    Fixed(f64),
    /// Uniform in `[lo, hi]`.
    Uniform(f64, f64),
}

/// A resolved flow group.
#[derive(Clone, Debug, Serialize)]
pub struct FlowGroup {
    /// Label.
    pub name: String,
    /// Flows in the group.
    pub count: u32,
    /// CCA spec.
    pub cca: String,
    /// Registry name of the CCA (`taxed` for `taxed(newreno)`).
    pub cca_name: String,
    /// Variant id the flow carries.
    pub variant: u8,
    /// Base RTT per flow, seconds.
    pub rtt_s: Vec<f64>,
    /// Start per flow, seconds.
    pub start_s: Vec<Draw>,
    /// Size in bytes (`None` = unbounded).
    pub size_bytes: Option<Draw>,
    /// Mean gap between starts (Poisson arrivals), seconds.
    pub interarrival_s: Option<f64>,
    /// Sender rate cap, bit/s.
    pub rate_cap_bps: Option<f64>,
    /// DSCP marking.
    pub mark_dscp: bool,
    /// Reverse direction.
    pub reverse: bool,
    /// First and last hop (0-based, inclusive).
    pub hops: (u32, u32),
    /// Receiver ACK policy: `auto`, `always` (one ACK per packet), `never` (QUIC default).
    pub prompt_acks: String,
}

/// The resolved router configuration.
#[derive(Clone, Debug, Serialize)]
pub struct RouterSpec {
    /// Discipline name.
    pub discipline: String,
    /// `dscp` or `scenario`.
    pub classify: String,
    /// Buffer in packets (every discipline's limit).
    pub buffer_packets: u32,
    /// The discipline's full configuration (debug text).
    pub config: String,
    #[serde(skip)]
    /// The configuration itself.
    pub discipline_config: Option<DisciplineConfig>,
}

/// Metric settings.
#[derive(Clone, Debug, Serialize)]
pub struct MetricSpec {
    /// Measurement window start, seconds.
    pub measure_from_s: f64,
    /// Fairness time-series window, seconds.
    pub fairness_window_s: f64,
    /// Target fairness ratio.
    pub target_fairness_ratio: f64,
    /// Hold time, seconds.
    pub hold_s: f64,
}

/// A checked scenario with every quantity in numbers.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Seed.
    pub seed: u64,
    /// Sampling interval, seconds.
    pub sample_interval_s: f64,
    /// Topology.
    pub topology: TopologyKind,
    /// Bottleneck links in series (1 for a dumbbell).
    pub hops: u32,
    /// Bottleneck rate, bit/s.
    pub bottleneck_rate_bps: f64,
    /// Bottleneck one-way delay per hop, seconds.
    pub bottleneck_delay_s: f64,
    /// Buffer as written.
    pub buffer: String,
    /// Access rate, bit/s.
    pub access_rate_bps: f64,
    /// Host emission jitter: each datagram leaves its host after a delay
    /// uniform in `[0, host_jitter_s]` (FIFO per host), seconds.
    pub host_jitter_s: f64,
    /// Router.
    pub router: RouterSpec,
    /// Flow groups.
    pub flows: Vec<FlowGroup>,
    /// Metrics.
    pub metrics: MetricSpec,
    /// The sweep setting this run belongs to, if any (`param=value`).
    pub sweep_point: Option<String>,
}

impl Scenario {
    /// Total number of flows.
    pub fn flow_count(&self) -> usize {
        self.flows.iter().map(|g| g.count as usize).sum()
    }
}

/// A scenario file with its sweep expanded: one resolved scenario per point.
#[derive(Debug)]
pub struct Plan {
    /// Name of the file's scenario.
    pub name: String,
    /// The swept parameter, if any.
    pub sweep_param: Option<String>,
    /// The runs (one without a sweep).
    pub runs: Vec<Scenario>,
}

/// Read, parse and check a scenario file (all sweep points).
pub fn load(path: &Path) -> anyhow::Result<Plan> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    parse_plan(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Parse and check scenario text (all sweep points).
pub fn parse_plan(text: &str) -> anyhow::Result<Plan> {
    let value: toml::Table = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let raw: RawScenario = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let Some(sweep) = raw.sweep.clone() else {
        let s = resolve(&raw)?;
        return Ok(Plan {
            name: s.name.clone(),
            sweep_param: None,
            runs: vec![s],
        });
    };
    if sweep.values.is_empty() {
        return Err(ScenarioError::new("sweep.values", "[]", "at least one value").into());
    }
    let mut runs = Vec::new();
    for (i, v) in sweep.values.iter().enumerate() {
        let mut table = value.clone();
        table.remove("sweep");
        set_path(&mut table, &sweep.param, v.clone()).map_err(anyhow::Error::from)?;
        let raw_i: RawScenario = table
            .try_into()
            .map_err(|e| anyhow::anyhow!("sweep.values[{i}] = {v}: {e}"))?;
        let mut s = resolve(&raw_i)
            .map_err(|e| anyhow::anyhow!("with sweep.values[{i}] ({} = {v}): {e}", sweep.param))?;
        s.sweep_point = Some(format!("{}={}", sweep.param, value_text(v)));
        runs.push(s);
    }
    Ok(Plan {
        name: raw.name.clone(),
        sweep_param: Some(sweep.param),
        runs,
    })
}

/// A sweep value as plain text (strings without quotes).
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

const SWEEPABLE: &str = "a dotted path to a scalar field: duration, seed, router.<param>, \
    topology.bottleneck.<rate|delay|buffer>, topology.access_rate, topology.hops, \
    flows.<index>.<field>, metrics.<field>";

fn set_path(table: &mut toml::Table, path: &str, v: toml::Value) -> Result<(), ScenarioError> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError::new("sweep.param", path, SWEEPABLE));
    }
    let mut cur = table;
    for (k, part) in parts.iter().enumerate() {
        let last = k + 1 == parts.len();
        if last {
            cur.insert(part.to_string(), v);
            return Ok(());
        }
        let next = cur
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match next {
            toml::Value::Table(t) => t,
            toml::Value::Array(a) => {
                let idx: usize = parts[k + 1]
                    .parse()
                    .map_err(|_| ScenarioError::new("sweep.param", path, SWEEPABLE))?;
                let Some(toml::Value::Table(t)) = a.get_mut(idx) else {
                    return Err(ScenarioError::new("sweep.param", path, SWEEPABLE));
                };
                if k + 2 == parts.len() {
                    return Err(ScenarioError::new("sweep.param", path, SWEEPABLE));
                }
                // Skip the index component.
                return set_path(t, &parts[k + 2..].join("."), v);
            }
            _ => return Err(ScenarioError::new("sweep.param", path, SWEEPABLE)),
        };
    }
    Ok(())
}

fn dur(field: &str, text: &str) -> Result<f64, ScenarioError> {
    parse_duration(text)
        .map(|d| d.as_secs_f64())
        .map_err(|e| ScenarioError::new(field, format!("\"{text}\""), format!("a duration ({e})")))
}

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

fn bytes(field: &str, text: &str) -> Result<f64, ScenarioError> {
    parse_bytes(text)
        .map(|b| b as f64)
        .map_err(|e| ScenarioError::new(field, format!("\"{text}\""), format!("a size ({e})")))
}

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
    if raw.name.is_empty()
        || !raw
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || raw.name.starts_with('.')
    {
        return Err(ScenarioError::new(
            "name",
            format!("\"{}\"", raw.name),
            "a non-empty file-name-safe name: letters, digits, - _ . (not starting with .)",
        ));
    }
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

    // Topology.
    let t = &raw.topology;
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
    let host_jitter_s = match t.jitter.as_deref() {
        None | Some("auto") => PACKET_BYTES as f64 * 8.0 / bottleneck_rate_bps,
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

    // Flows.
    if raw.flows.is_empty() {
        return Err(ScenarioError::new(
            "flows",
            "none",
            "at least one [[flows]] group",
        ));
    }
    let mut flows = Vec::new();
    for (gi, g) in raw.flows.iter().enumerate() {
        let p = |f: &str| format!("flows[{gi}].{f}");
        let count = g.count.unwrap_or(1);
        if !(1..=10_000).contains(&count) {
            return Err(ScenarioError::new(p("count"), count, "1 ..= 10000"));
        }
        let cca = tollgate_cca::build(&g.cca, &Env::default()).map_err(|e| {
            let allowed = if e.valid.is_empty() {
                e.message.clone()
            } else {
                format!("{}; valid: {}", e.message, e.valid.join(", "))
            };
            ScenarioError::new(
                p("cca"),
                format!("\"{}\" (at `{}`)", g.cca, e.part),
                allowed,
            )
        })?;
        let variant: VariantId = cca.variant();
        let cca_name = cca.name().to_string();
        let hops_range = match (topology, g.hops) {
            (_, None) => (0, hops - 1),
            (TopologyKind::Dumbbell, Some(h)) => {
                return Err(ScenarioError::new(
                    p("hops"),
                    format!("{h:?}"),
                    "only with topology.kind = \"parking-lot\"",
                ))
            }
            (TopologyKind::ParkingLot, Some([a, b])) if a >= 1 && a <= b && b <= hops => {
                (a - 1, b - 1)
            }
            (TopologyKind::ParkingLot, Some(h)) => {
                return Err(ScenarioError::new(
                    p("hops"),
                    format!("{h:?}"),
                    format!("[first, last] with 1 <= first <= last <= topology.hops = {hops}"),
                ))
            }
        };
        let crossed = f64::from(hops_range.1 - hops_range.0 + 1);
        let min_rtt = 2.0 * crossed * bottleneck_delay_s;
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
                        raw.duration
                    ),
                ));
            }
            start_s.push(d);
        }
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
        let prompt_acks = g.prompt_acks.clone().unwrap_or_else(|| "auto".into());
        if !["auto", "always", "never"].contains(&prompt_acks.as_str()) {
            return Err(ScenarioError::new(
                p("prompt_acks"),
                format!("\"{prompt_acks}\""),
                "\"auto\", \"always\" or \"never\"",
            ));
        }
        flows.push(FlowGroup {
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
        });
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

    // Buffer.
    let max_rtt = flows
        .iter()
        .flat_map(|g| g.rtt_s.iter().copied())
        .fold(0.0, f64::max);
    let buffer = t.bottleneck.buffer.clone().unwrap_or_else(|| "1bdp".into());
    let buffer_packets = buffer_packets(&buffer, bottleneck_rate_bps, max_rtt)?;

    let router = resolve_router(&raw.router, buffer_packets, bottleneck_rate_bps)?;

    // Metrics.
    let m = &raw.metrics;
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
    let hold_s = match &m.hold {
        Some(t) => dur("metrics.hold", t)?,
        None => 1.0,
    };

    Ok(Scenario {
        name: raw.name.clone(),
        description: raw.description.clone().unwrap_or_default(),
        duration_s,
        seed: raw.seed.unwrap_or(1),
        sample_interval_s,
        topology,
        hops,
        bottleneck_rate_bps,
        bottleneck_delay_s,
        buffer,
        access_rate_bps,
        host_jitter_s,
        router,
        flows,
        metrics: MetricSpec {
            measure_from_s,
            fairness_window_s,
            target_fairness_ratio,
            hold_s,
        },
        sweep_point: None,
    })
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

fn resolve_router(r: &RawRouter, buffer: u32, rate_bps: f64) -> Result<RouterSpec, ScenarioError> {
    let classify = r.classify.clone().unwrap_or_else(|| "dscp".into());
    if classify != "dscp" && classify != "scenario" {
        return Err(ScenarioError::new(
            "router.classify",
            format!("\"{classify}\""),
            "\"dscp\" (variant from the DSCP marking) or \"scenario\" (from each flow's cca)",
        ));
    }
    let ctx = Context {
        rate_bps,
        buffer_packets: Some(buffer),
        buffer_field: "topology.bottleneck.buffer",
    };
    let config = r.discipline.resolve(&ctx).map_err(|e| {
        let field = match e.field {
            // A limit computed from the topology's buffer that the discipline refuses.
            "limit" | "max_size" | "main_limit" if e.value != "(set)" => {
                "topology.bottleneck.buffer".to_string()
            }
            f => format!("router.{f}"),
        };
        ScenarioError::new(field, e.value.clone(), e.valid.clone())
    })?;
    Ok(RouterSpec {
        discipline: config.name().to_string(),
        classify,
        buffer_packets: buffer,
        config: format!("{config:?}"),
        discipline_config: Some(config),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "t"
duration = "5s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "100Mbit", delay = "5ms" }
[[flows]]
cca = "newreno"
rtt = "20ms"
"#;

    fn err(text: &str) -> String {
        parse_plan(text).unwrap_err().to_string()
    }

    #[test]
    fn base_resolves_with_defaults() {
        let p = parse_plan(BASE).unwrap();
        let s = &p.runs[0];
        assert_eq!(s.router.discipline, "droptail");
        // 1 BDP of 100 Mbit/s x 20 ms = 250 kB = 167 packets.
        assert_eq!(s.router.buffer_packets, 167);
        assert_eq!(s.seed, 1);
        assert_eq!(s.flows[0].variant, VariantId::NEWRENO.dscp());
    }

    #[test]
    fn errors_name_field_value_and_allowed() {
        let e = err(&BASE.replace("rtt = \"20ms\"", "rtt = \"5ms\""));
        assert!(
            e.contains("flows[0].rtt") && e.contains("5ms") && e.contains("10ms"),
            "{e}"
        );
        let e = err(&BASE.replace("cca = \"newreno\"", "cca = \"newrenoo\""));
        assert!(
            e.contains("flows[0].cca") && e.contains("newrenoo") && e.contains("cubic"),
            "{e}"
        );
        let e = err(&BASE.replace("rtt = \"20ms\"", "rtt = \"20ms\"\nrtt_typo = 1"));
        assert!(e.contains("rtt_typo"), "{e}");
        let e = err(&format!(
            "{BASE}\n[router]\ndiscipline = \"droptail\"\ntau = 0.1\n"
        ));
        assert!(
            e.contains("[router]") && e.contains("`tau`") && e.contains("droptail"),
            "{e}"
        );
        let e = err(&format!(
            "{BASE}\n[router]\ndiscipline = \"cebinae\"\ntau = 3.0\n"
        ));
        assert!(e.contains("router.tau") && e.contains('3'), "{e}");
        let e = err(&BASE.replace("delay = \"5ms\"", "delay = \"5ms\", buffer = \"lots\""));
        assert!(
            e.contains("topology.bottleneck.buffer") && e.contains("lots"),
            "{e}"
        );
        let e = err(&BASE.replace("kind = \"dumbbell\"", "kind = \"ring\""));
        assert!(
            e.contains("topology.kind") && e.contains("parking-lot"),
            "{e}"
        );
    }

    #[test]
    fn sweep_expands_and_checks_each_point() {
        let text = format!(
            "{BASE}\n[router]\ndiscipline = \"cebinae\"\n[sweep]\nparam = \"router.tau\"\nvalues = [0.01, 0.1]\n"
        );
        let p = parse_plan(&text).unwrap();
        assert_eq!(p.runs.len(), 2);
        assert_eq!(p.runs[1].sweep_point.as_deref(), Some("router.tau=0.1"));
        let bad = text.replace("0.1]", "7.0]");
        let e = err(&bad);
        assert!(e.contains("router.tau") && e.contains('7'), "{e}");
    }
}

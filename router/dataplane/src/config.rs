//! `router.toml`: the dataplane configuration.
//!
//! Parsed with serde; every table rejects unknown fields, naming the field.
//! Values are checked again by the library's `validate()` when the
//! disciplines, shaper and delay lines are built, so an out-of-range value
//! fails at start with the discipline, the field and the valid range.
//! The reference is `router/DPDK.md`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;
use tollgate_cca::{units, VariantId};
use tollgate_router::classify::{Classifier, Prefix, Rule};
use tollgate_router::delay::DelayConfig;
use tollgate_router::discipline_config::parse_variant;
use tollgate_router::shaper::ShaperConfig;
use tollgate_router::{Context, DisciplineConfig, DisciplineKeys};

/// Forwarding mode.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Bump in the wire: each port forwards to its `peer`, frames unchanged.
    #[default]
    L2,
    /// IPv4/IPv6 static routes with MAC rewrite.
    L3,
}

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// `l2` (default) or `l3`.
    #[serde(default)]
    pub mode: Mode,
    /// Packets per RX/TX burst (1..=256). Default 32.
    #[serde(default = "d_burst")]
    pub burst: u16,
    /// Mbufs in the packet pool. Default 65535.
    #[serde(default = "d_mbufs")]
    pub mbufs: u32,
    /// RX descriptors per queue. Default 1024.
    #[serde(default = "d_desc")]
    pub rx_descriptors: u16,
    /// TX descriptors per queue. Default 1024.
    #[serde(default = "d_desc")]
    pub tx_descriptors: u16,
    /// Stats print / Prometheus refresh interval. Default "1s"; "0s" disables printing.
    #[serde(default = "d_stats")]
    pub stats_interval: String,
    /// Serve Prometheus text at http://ADDR/metrics on this address (e.g. "127.0.0.1:9464").
    #[serde(default)]
    pub prometheus: Option<String>,
    /// Stop by itself after this long (also `--duration`).
    #[serde(default)]
    pub duration: Option<String>,
    /// How long to drain queued packets at shutdown. Default "2s".
    #[serde(default = "d_drain")]
    pub drain_timeout: String,
    /// Seed of the flow hash (per-flow buckets of CHOKe, Cebinae, RRMQS).
    /// Default: none, i.e. random at every start (see
    /// [`crate::dataplane::resolve_hash_seed`]), so senders cannot aim hash
    /// collisions at a known seed; set it only to repeat a run (the seed in
    /// use is printed at start-up).
    #[serde(default)]
    pub hash_seed: Option<u64>,
    /// Classify by DSCP when no rule matches. Default true.
    #[serde(default = "d_true")]
    pub use_dscp: bool,
    /// Variant rules on the 5-tuple (first match wins).
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// The ports.
    pub ports: Vec<PortConfig>,
    /// L3 static routes.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// L3 static neighbours.
    #[serde(default)]
    pub neighbours: Vec<NeighbourConfig>,
    /// L3: a learned neighbour not refreshed for this long is forgotten.
    /// Default "5m" (static neighbours never are).
    #[serde(default = "d_neighbour_timeout")]
    pub neighbour_timeout: String,
    /// Packet capture.
    #[serde(default)]
    pub pcap: Option<PcapConfig>,
    /// Multi-core pipeline layout. Absent (the default): one lcore polls
    /// every RX queue and runs every egress pipeline.
    #[serde(default)]
    pub pipeline: Option<PipelineConfig>,
}

/// `[pipeline]`: the multi-core layout of DPDK's qos_sched example.
///
/// RX/classify worker lcores poll the ports' RX queues (`ports[].queues`
/// of them per port, RSS spreading flows over them), classify, and hand
/// the packets over single-producer/single-consumer rings, one per
/// (worker, egress port), to the scheduler lcore of the egress port, which
/// runs the delay line, the discipline, the shaper and TX. RX queues are
/// dealt to workers round robin in config order (port 0 queue 0, port 0
/// queue 1, ..., port 1 queue 0, ...).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// RX/classify worker lcores (EAL lcore ids, listed in `-l`).
    pub workers: Vec<u32>,
    /// Egress device -> scheduler lcore; every port needs one, and one
    /// lcore may schedule several ports. A scheduler lcore may also be a
    /// worker: it then runs both, one step each per iteration (the "two
    /// workers" layout: each lcore RX of one port and the egress of the
    /// other, run to completion).
    pub schedulers: BTreeMap<String, u32>,
    /// Packets per (worker, egress) ring, a power of two in 64..=65536.
    /// Default 1024. A full ring drops (counted `ring_full`).
    #[serde(default = "d_ring_size")]
    pub ring_size: u32,
}

fn d_ring_size() -> u32 {
    1024
}

impl PipelineConfig {
    /// Checks that need no DPDK (lcores listed in `-l` are checked at start).
    fn check(&self, cfg: &RouterConfig) -> Result<(), ConfigProblem> {
        if self.workers.is_empty() {
            return Err(problem(
                "`pipeline.workers` is empty: list at least one RX/classify lcore, e.g. workers = [1]",
            ));
        }
        for (i, w) in self.workers.iter().enumerate() {
            if self.workers[..i].contains(w) {
                return Err(problem(format!(
                    "`pipeline.workers` lists lcore {w} twice: each worker lcore once"
                )));
            }
            if *w >= MAX_LCORE {
                return Err(problem(format!(
                    "`pipeline.workers`: lcore {w} is out of range (0..{MAX_LCORE})"
                )));
            }
        }
        for (dev, l) in &self.schedulers {
            if !cfg.ports.iter().any(|p| &p.device == dev) {
                return Err(problem(format!(
                    "`pipeline.schedulers.{dev}`: {dev:?} is not the `device` of any [[ports]] entry"
                )));
            }
            if *l >= MAX_LCORE {
                return Err(problem(format!(
                    "`pipeline.schedulers.{dev}` = {l} is out of range (0..{MAX_LCORE})"
                )));
            }
        }
        for p in &cfg.ports {
            if !self.schedulers.contains_key(&p.device) {
                return Err(problem(format!(
                    "`pipeline.schedulers` has no lcore for port {:?}: add `\"{}\" = <lcore>`",
                    p.device, p.device
                )));
            }
        }
        let queues: u32 = cfg.ports.iter().map(|p| u32::from(p.queues)).sum();
        if (self.workers.len() as u32) > queues {
            return Err(problem(format!(
                "`pipeline.workers` lists {} lcores but the ports have {queues} RX queues in all \
                 (`ports[].queues`): a worker without a queue would only spin; raise `queues` or \
                 list fewer workers",
                self.workers.len()
            )));
        }
        if !self.ring_size.is_power_of_two() || !(64..=65536).contains(&self.ring_size) {
            return Err(problem(format!(
                "`pipeline.ring_size` = {} must be a power of two in 64..=65536",
                self.ring_size
            )));
        }
        if cfg.mode == Mode::L3 {
            return Err(problem(
                "`[pipeline]` supports mode = \"l2\" only (the L3 neighbour table is not shared \
                 between worker lcores yet): remove `[pipeline]` or use mode = \"l2\"",
            ));
        }
        if cfg.pcap.is_some() {
            let mut lcores: Vec<u32> = self.schedulers.values().copied().collect();
            lcores.dedup();
            lcores.sort_unstable();
            lcores.dedup();
            if lcores.len() > 1 {
                return Err(problem(
                    "`[pcap]` with `[pipeline]` needs every port on one scheduler lcore (the \
                     capture ring has one producer): put all `pipeline.schedulers` on one lcore \
                     or remove `[pcap]`",
                ));
            }
        }
        Ok(())
    }
}

/// Highest lcore id + 1 (`RTE_MAX_LCORE` of Debian's DPDK 22.11).
pub const MAX_LCORE: u32 = 128;

fn d_burst() -> u16 {
    32
}
fn d_mbufs() -> u32 {
    65_535
}
fn d_desc() -> u16 {
    1024
}
fn d_stats() -> String {
    "1s".into()
}
fn d_drain() -> String {
    "2s".into()
}
fn d_neighbour_timeout() -> String {
    "5m".into()
}
fn d_true() -> bool {
    true
}

/// One port.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// DPDK device name (`net_null0`, `net_af_packet0`, `0000:01:00.0`) or port index.
    pub device: String,
    /// L2: the device frames received here are sent out of.
    #[serde(default)]
    pub peer: Option<String>,
    /// L3: this port's IPv4 address with prefix length ("10.0.1.1/24").
    #[serde(default)]
    pub ipv4: Option<String>,
    /// L3: this port's IPv6 address with prefix length ("fd00:1::1/64").
    #[serde(default)]
    pub ipv6: Option<String>,
    /// RX/TX queue pairs (RSS when > 1). Default 1.
    #[serde(default = "d_queues")]
    pub queues: u16,
    /// Egress: what happens to packets leaving through this port.
    #[serde(default)]
    pub egress: EgressConfig,
    /// Replace every received frame by synthetic UDP traffic (benchmarks, tests on net_null).
    #[serde(default)]
    pub synthetic: Option<SyntheticConfig>,
}

fn d_queues() -> u16 {
    1
}

/// The egress pipeline of a port: delay line, discipline, shaper.
///
/// One flat table: the egress keys below, `discipline = "<name>"` and that
/// discipline's keys, the same shape as a scenario's `[router]` table
/// ([`DisciplineKeys`], documented in `router/README.md`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct EgressConfig {
    /// Shaper rate ("100Mbit", "10Gbit", or bit/s). Default: the link speed.
    pub rate: Option<Rate>,
    /// Shaper bucket depth in bytes. Default 3028.
    pub burst_bytes: Option<u64>,
    /// Emulated propagation delay of every packet ("10ms"). Default 0.
    pub delay: Option<String>,
    /// Per-variant delays: `{ cubic = "40ms", newreno = "10ms" }`.
    pub class_delays: BTreeMap<String, String>,
    /// Packets per delay class. Default 100000.
    pub delay_capacity: Option<usize>,
    /// The discipline and its keys. Default DropTail.
    pub discipline: DisciplineKeys,
}

/// The egress keys that are not the discipline's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EgressKeys {
    rate: Option<Rate>,
    burst_bytes: Option<u64>,
    delay: Option<String>,
    #[serde(default)]
    class_delays: BTreeMap<String, String>,
    delay_capacity: Option<usize>,
}

const EGRESS_KEYS: [&str; 5] = [
    "rate",
    "burst_bytes",
    "delay",
    "class_delays",
    "delay_capacity",
];

impl TryFrom<toml::Table> for EgressConfig {
    type Error = String;

    fn try_from(mut table: toml::Table) -> Result<Self, String> {
        let mut own = toml::Table::new();
        for k in EGRESS_KEYS {
            if let Some(v) = table.remove(k) {
                own.insert(k.to_string(), v);
            }
        }
        let keys: EgressKeys = own.try_into().map_err(|e| e.to_string())?;
        let discipline = DisciplineKeys::from_table(table).map_err(|e| {
            format!(
                "{e} (an egress table takes {}, `discipline` and that discipline's keys; \
                 reference: router/README.md)",
                EGRESS_KEYS.join(", ")
            )
        })?;
        Ok(EgressConfig {
            rate: keys.rate,
            burst_bytes: keys.burst_bytes,
            delay: keys.delay,
            class_delays: keys.class_delays,
            delay_capacity: keys.delay_capacity,
            discipline,
        })
    }
}

/// A rate: bit/s as a number, or a string with unit.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Rate {
    /// Bit/s.
    Number(f64),
    /// "100Mbit", "1.5Gbit", "500kbit", "10Gbps".
    Text(String),
}

/// A variant rule.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Source prefix ("10.0.0.0/8").
    #[serde(default)]
    pub src: Option<String>,
    /// Destination prefix.
    #[serde(default)]
    pub dst: Option<String>,
    /// Source port or range ("5000-5010").
    #[serde(default)]
    pub src_port: Option<PortRange>,
    /// Destination port or range.
    #[serde(default)]
    pub dst_port: Option<PortRange>,
    /// "tcp", "udp" or a protocol number.
    #[serde(default)]
    pub proto: Option<Proto>,
    /// Variant name ("cubic", "newreno", "taxed(newreno)") or DSCP number.
    /// Unset: the rule leaves the variant to a later rule or the DSCP.
    #[serde(default)]
    pub variant: Option<VariantName>,
    /// Propagation delay of matching packets on every egress ("50ms"),
    /// instead of the port's `delay` and `class_delays`. Unset: none.
    #[serde(default)]
    pub delay: Option<String>,
}

/// A port or an inclusive range.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum PortRange {
    /// One port.
    One(u16),
    /// "lo-hi" or "p".
    Text(String),
}

/// A protocol name or number.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Proto {
    /// Number.
    Number(u8),
    /// "tcp", "udp", "icmp", "icmpv6".
    Name(String),
}

/// A variant name or DSCP number.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum VariantName {
    /// DSCP codepoint.
    Number(u8),
    /// Name.
    Name(String),
}

/// An L3 static route.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Destination prefix.
    pub prefix: String,
    /// Egress device.
    pub port: String,
    /// Next hop (must be a neighbour: static, or learned by ARP/ND); default: the destination itself (on-link).
    #[serde(default)]
    pub via: Option<String>,
}

/// An L3 static neighbour.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourConfig {
    /// IP address.
    pub ip: String,
    /// MAC address ("02:00:00:00:00:01").
    pub mac: String,
}

/// Synthetic traffic stamped over received frames.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Distinct UDP flows, round robin. Default 16.
    #[serde(default = "d_flows")]
    pub flows: u32,
    /// Frame length in bytes (60..=1514). Default 64.
    #[serde(default = "d_frame")]
    pub frame_len: u16,
    /// Variants marked in DSCP, assigned to flows round robin. Default none (DSCP 0).
    #[serde(default)]
    pub variants: Vec<VariantName>,
    /// Simple IMIX instead of `frame_len`: frames of 64, 570 and 1514 bytes
    /// (1518 on the wire with the FCS) in the ratio 7:4:1. Default false.
    #[serde(default)]
    pub imix: bool,
    /// Heavy hitters: the first `heavy_flows` flows send `heavy_share` of
    /// the frames (round robin among them), the other flows the rest (round
    /// robin among them). Default 0: every flow sends alike.
    #[serde(default)]
    pub heavy_flows: u32,
    /// Share of the frames the heavy flows send, in (0, 1). Default 0.5.
    #[serde(default = "d_heavy_share")]
    pub heavy_share: f64,
}

/// Default of [`SyntheticConfig::heavy_share`].
pub const DEFAULT_HEAVY_SHARE: f64 = 0.5;

fn d_heavy_share() -> f64 {
    DEFAULT_HEAVY_SHARE
}

impl SyntheticConfig {
    /// Check the heavy-hitter fields (nothing to check without heavy
    /// flows); the error starts with the field's name.
    pub fn check_heavy(&self) -> Result<(), String> {
        if self.heavy_flows == 0 {
            return Ok(());
        }
        if self.heavy_flows >= self.flows {
            return Err(format!(
                "heavy_flows = {} must be below flows = {} (at least one light flow)",
                self.heavy_flows, self.flows
            ));
        }
        if !(self.heavy_share > 0.0 && self.heavy_share < 1.0) {
            return Err(format!(
                "heavy_share = {} must be in (0, 1), e.g. 0.5",
                self.heavy_share
            ));
        }
        if self.imix && self.flows < IMIX.len() as u32 {
            return Err(format!(
                "heavy_flows with imix needs flows >= {} (got {})",
                IMIX.len(),
                self.flows
            ));
        }
        Ok(())
    }
}

/// The simple IMIX frame lengths, in the order [`crate::synth`] cycles them (7:4:1).
pub const IMIX: [u16; 12] = [64, 570, 64, 64, 570, 64, 1514, 64, 570, 64, 64, 570];

fn d_flows() -> u32 {
    16
}
fn d_frame() -> u16 {
    64
}

/// What to capture.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CaptureWhat {
    /// Transmitted frames.
    Forwarded,
    /// Dropped frames.
    #[default]
    Dropped,
    /// Both.
    Both,
}

/// pcap capture.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapConfig {
    /// Output file.
    pub path: String,
    /// `forwarded`, `dropped` (default) or `both`.
    #[serde(default)]
    pub capture: CaptureWhat,
    /// Stop capturing when the file reaches this size. Default 64 MiB.
    #[serde(default = "d_pcap_max")]
    pub max_bytes: u64,
    /// Bytes kept per frame. Default 128.
    #[serde(default = "d_snaplen")]
    pub snaplen: u32,
}

fn d_pcap_max() -> u64 {
    64 << 20
}
fn d_snaplen() -> u32 {
    128
}

/// A configuration error: what is wrong and where.
#[derive(Debug)]
pub struct ConfigProblem(pub String);

impl std::fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigProblem {}

fn problem(msg: impl Into<String>) -> ConfigProblem {
    ConfigProblem(msg.into())
}

impl RouterConfig {
    /// Parse TOML text.
    pub fn parse(text: &str) -> Result<RouterConfig, ConfigProblem> {
        let cfg: RouterConfig = toml::from_str(text).map_err(|e| problem(e.to_string()))?;
        cfg.check()?;
        Ok(cfg)
    }

    /// Read and parse a file.
    pub fn load(path: &str) -> Result<RouterConfig, ConfigProblem> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| problem(format!("cannot read config {path}: {e}")))?;
        RouterConfig::parse(&text).map_err(|e| problem(format!("{path}: {e}")))
    }

    /// Structural checks that need no DPDK.
    fn check(&self) -> Result<(), ConfigProblem> {
        if self.ports.is_empty() {
            return Err(problem("`ports`: at least one [[ports]] entry is needed"));
        }
        if !(1..=256).contains(&self.burst) {
            return Err(problem(format!(
                "`burst` = {} must be in 1..=256",
                self.burst
            )));
        }
        if self.mbufs < 1024 {
            return Err(problem(format!(
                "`mbufs` = {} must be at least 1024",
                self.mbufs
            )));
        }
        parse_duration(&self.stats_interval)
            .map_err(|e| problem(format!("`stats_interval`: {e}")))?;
        parse_duration(&self.drain_timeout)
            .map_err(|e| problem(format!("`drain_timeout`: {e}")))?;
        let t = parse_duration(&self.neighbour_timeout)
            .map_err(|e| problem(format!("`neighbour_timeout`: {e}")))?;
        if t < Duration::from_secs(1) {
            return Err(problem(format!(
                "`neighbour_timeout` = {:?} must be at least 1s",
                self.neighbour_timeout
            )));
        }
        if let Some(d) = &self.duration {
            parse_duration(d).map_err(|e| problem(format!("`duration`: {e}")))?;
        }
        let mut seen = Vec::new();
        for (i, p) in self.ports.iter().enumerate() {
            if seen.contains(&p.device) {
                return Err(problem(format!(
                    "ports[{i}]: device {:?} listed twice",
                    p.device
                )));
            }
            seen.push(p.device.clone());
            if p.queues == 0 || p.queues > 16 {
                return Err(problem(format!(
                    "ports[{i}].queues = {} must be in 1..=16",
                    p.queues
                )));
            }
            if let Some(s) = &p.synthetic {
                if !(60..=1514).contains(&s.frame_len) || s.flows == 0 {
                    return Err(problem(format!(
                        "ports[{i}].synthetic: frame_len must be 60..=1514 and flows >= 1 (got {}, {})",
                        s.frame_len, s.flows
                    )));
                }
                s.check_heavy()
                    .map_err(|e| problem(format!("ports[{i}].synthetic.{e}")))?;
                for v in &s.variants {
                    variant_id(v)
                        .map_err(|e| problem(format!("ports[{i}].synthetic.variants: {e}")))?;
                }
            }
        }
        for (i, p) in self.ports.iter().enumerate() {
            match self.mode {
                Mode::L2 => {
                    let Some(peer) = &p.peer else {
                        return Err(problem(format!(
                            "ports[{i}] ({}): `peer` is required in mode = \"l2\"",
                            p.device
                        )));
                    };
                    if !self.ports.iter().any(|q| &q.device == peer) {
                        return Err(problem(format!(
                            "ports[{i}].peer = {peer:?} is not the `device` of any [[ports]] entry"
                        )));
                    }
                }
                Mode::L3 => {
                    if p.ipv4.is_none() && p.ipv6.is_none() {
                        return Err(problem(format!(
                            "ports[{i}] ({}): `ipv4` or `ipv6` is required in mode = \"l3\"",
                            p.device
                        )));
                    }
                    if let Some(a) = &p.ipv4 {
                        parse_prefix(a).map_err(|e| problem(format!("ports[{i}].ipv4: {e}")))?;
                    }
                    if let Some(a) = &p.ipv6 {
                        parse_prefix(a).map_err(|e| problem(format!("ports[{i}].ipv6: {e}")))?;
                    }
                }
            }
            // Build once to surface range errors early (rate defaults to 10 Gbit/s here).
            p.egress
                .build(10e9)
                .map_err(|e| problem(format!("ports[{i}].egress: {e}")))?;
        }
        for (i, r) in self.routes.iter().enumerate() {
            parse_prefix(&r.prefix).map_err(|e| problem(format!("routes[{i}].prefix: {e}")))?;
            if !self.ports.iter().any(|p| p.device == r.port) {
                return Err(problem(format!(
                    "routes[{i}].port = {:?} is not a configured device",
                    r.port
                )));
            }
            if let Some(v) = &r.via {
                v.parse::<IpAddr>()
                    .map_err(|e| problem(format!("routes[{i}].via = {v:?}: {e}")))?;
            }
        }
        for (i, n) in self.neighbours.iter().enumerate() {
            n.ip.parse::<IpAddr>()
                .map_err(|e| problem(format!("neighbours[{i}].ip = {:?}: {e}", n.ip)))?;
            parse_mac(&n.mac).map_err(|e| problem(format!("neighbours[{i}].mac: {e}")))?;
        }
        self.rules().map_err(|e| problem(format!("rules: {e}")))?;
        if let Some(p) = &self.pipeline {
            p.check(self)?;
        }
        Ok(())
    }

    /// The classification rules.
    pub fn rules(&self) -> Result<Vec<Rule>, String> {
        self.rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let pre = |s: &Option<String>| -> Result<Option<Prefix>, String> {
                    s.as_ref()
                        .map(|s| parse_prefix(s).map(|(a, l)| Prefix::new(a, l)))
                        .transpose()
                        .map(|o| o.flatten())
                };
                Ok(Rule {
                    src: pre(&r.src).map_err(|e| format!("[{i}].src: {e}"))?,
                    dst: pre(&r.dst).map_err(|e| format!("[{i}].dst: {e}"))?,
                    src_ports: r
                        .src_port
                        .as_ref()
                        .map(port_range)
                        .transpose()
                        .map_err(|e| format!("[{i}].src_port: {e}"))?,
                    dst_ports: r
                        .dst_port
                        .as_ref()
                        .map(port_range)
                        .transpose()
                        .map_err(|e| format!("[{i}].dst_port: {e}"))?,
                    proto: r
                        .proto
                        .as_ref()
                        .map(proto_number)
                        .transpose()
                        .map_err(|e| format!("[{i}].proto: {e}"))?,
                    variant: r
                        .variant
                        .as_ref()
                        .map(variant_id)
                        .transpose()
                        .map_err(|e| format!("[{i}].variant: {e}"))?,
                    delay: r
                        .delay
                        .as_deref()
                        .map(parse_duration)
                        .transpose()
                        .map_err(|e| format!("[{i}].delay: {e}"))?,
                })
            })
            .collect::<Result<Vec<Rule>, String>>()
            .and_then(|rules| Classifier::check_rules(&rules).map(|()| rules))
    }
}

/// Everything the library needs to build one egress pipeline.
#[derive(Clone, Debug)]
pub struct EgressPlan {
    /// Discipline.
    pub discipline: DisciplineConfig,
    /// Shaper.
    pub shaper: ShaperConfig,
    /// Delay line.
    pub delay: DelayConfig,
}

impl EgressConfig {
    /// The shaper rate, or `line_rate_bps` when unset.
    pub fn rate_bps(&self, line_rate_bps: f64) -> Result<f64, String> {
        match &self.rate {
            None => Ok(line_rate_bps),
            Some(r) => parse_rate(r),
        }
    }

    /// Library configurations, with `line_rate_bps` as the default shaper rate.
    pub fn build(&self, line_rate_bps: f64) -> Result<EgressPlan, String> {
        let rate = self
            .rate_bps(line_rate_bps)
            .map_err(|e| format!("`rate`: {e}"))?;
        let shaper = ShaperConfig {
            rate_bps: rate,
            burst_bytes: self
                .burst_bytes
                .unwrap_or_else(|| default_burst_bytes(rate)),
        };
        shaper.validate().map_err(|e| e.to_string())?;
        let mut delay = DelayConfig::default();
        if let Some(d) = &self.delay {
            delay.delay = parse_duration(d).map_err(|e| format!("`delay`: {e}"))?;
        }
        for (name, d) in &self.class_delays {
            let v = variant_id(&VariantName::Name(name.clone()))
                .map_err(|e| format!("`class_delays`: {e}"))?;
            let d = parse_duration(d).map_err(|e| format!("`class_delays.{name}`: {e}"))?;
            delay.class_delays.push((v, d));
        }
        if let Some(c) = self.delay_capacity {
            delay.capacity = c;
        }
        delay.validate().map_err(|e| e.to_string())?;
        let discipline = self
            .discipline
            .resolve(&Context::port(rate))
            .map_err(|e| e.to_string())?;
        Ok(EgressPlan {
            discipline,
            shaper,
            delay,
        })
    }
}

/// The longest time the dataplane may leave an egress port unpolled in
/// steady state: one loop iteration over two full RX bursts of the most
/// expensive discipline plus a stats tick, with margin for a shared host
/// (measured: tens of microseconds on the 2-core CI VM).
pub const POLL_GAP: Duration = Duration::from_micros(100);

/// Default shaper bucket depth for `rate_bps`: what the link sends in
/// [`POLL_GAP`], and at least two full-size frames (2 x 1514 B, the
/// library's default and what the 100 Mbit/s - 1 Gbit/s experiments use).
///
/// A token bucket polled every `T` seconds can release at most
/// `burst_bytes` per poll, so it sustains at most `burst_bytes / T`:
/// with 3028 B and T = 10 us that is 2.4 Gbit/s, far below a 10 Gbit/s
/// port (measured 3.3 Gbit/s with 1514-byte frames). Sizing the bucket as
/// `rate x POLL_GAP` keeps the shaped rate exact for loop gaps up to
/// [`POLL_GAP`]: 125 kB at 10 Gbit/s, 12.5 kB at 1 Gbit/s, 3028 B
/// (the floor) at 100 Mbit/s.
pub fn default_burst_bytes(rate_bps: f64) -> u64 {
    let gap = (rate_bps / 8.0 * POLL_GAP.as_secs_f64()).ceil();
    (gap as u64).max(ShaperConfig::default().burst_bytes)
}

/// "10ms", "1.5s", "250us", "100ns", "2m": the project's duration spellings
/// ([`tollgate_cca::units::parse_duration`]), except that the unit is
/// required here and the value must be at most 10^7 s.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(format!("{s:?} has no unit (use ns, us, ms, s, m)"));
    }
    let d = units::parse_duration(s)?;
    if d.as_secs_f64() > 1e7 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(d)
}

/// A rate in bit/s.
pub fn parse_rate(r: &Rate) -> Result<f64, String> {
    let v = match r {
        Rate::Number(v) => *v,
        // A bare number is bit/s, as for `Rate::Number`.
        Rate::Text(s) => match s.trim().parse::<f64>() {
            Ok(n) => n,
            Err(_) => units::parse_rate_bps(s)?,
        },
    };
    if v.is_finite() && v > 0.0 && v <= 1e13 {
        Ok(v)
    } else {
        Err(format!("rate {v} bit/s is out of range (0, 1e13]"))
    }
}

/// "10.0.0.0/8" -> (address, length). A bare address is a host prefix.
pub fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = a.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match l {
        Some(l) => l
            .trim()
            .parse::<u8>()
            .map_err(|e| format!("{s:?}: prefix length: {e}"))?,
        None => max,
    };
    if len > max {
        return Err(format!("{s:?}: prefix length {len} > {max}"));
    }
    Ok((addr, len))
}

/// "02:00:00:00:00:01".
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address like 02:00:00:00:00:01"));
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16)
            .map_err(|_| format!("{s:?} is not a MAC address like 02:00:00:00:00:01"))?;
    }
    Ok(mac)
}

fn port_range(p: &PortRange) -> Result<(u16, u16), String> {
    match p {
        PortRange::One(n) => Ok((*n, *n)),
        PortRange::Text(s) => {
            let bad = || format!("{s:?} is not a port or a range like \"5000-5010\"");
            let (lo, hi) = match s.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                ),
                None => {
                    let v = s.trim().parse().map_err(|_| bad())?;
                    (v, v)
                }
            };
            if lo > hi {
                return Err(bad());
            }
            Ok((lo, hi))
        }
    }
}

fn proto_number(p: &Proto) -> Result<u8, String> {
    match p {
        Proto::Number(n) => Ok(*n),
        Proto::Name(s) => match s.to_ascii_lowercase().as_str() {
            "tcp" => Ok(6),
            "udp" => Ok(17),
            "icmp" => Ok(1),
            "icmpv6" => Ok(58),
            _ => Err(format!(
                "unknown protocol {s:?} (use tcp, udp, icmp, icmpv6 or a number)"
            )),
        },
    }
}

/// A variant by name (as `tollgate-cca` prints it) or DSCP number.
pub fn variant_id(v: &VariantName) -> Result<VariantId, String> {
    match v {
        VariantName::Number(n) => {
            VariantId::from_dscp(*n).ok_or_else(|| format!("DSCP {n} is not below 64"))
        }
        VariantName::Name(name) => parse_variant(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_table_is_optional_and_checked() {
        let two = |pipeline: &str, extra: &str| {
            RouterConfig::parse(&format!(
                "{extra}\n{pipeline}\n[[ports]]\ndevice = \"a\"\npeer = \"b\"\n[[ports]]\ndevice = \"b\"\npeer = \"a\"\n"
            ))
        };
        assert!(two("", "").unwrap().pipeline.is_none());
        let ok = two(
            "[pipeline]\nworkers = [1]\nschedulers = { a = 0, b = 0 }",
            "",
        )
        .unwrap();
        let p = ok.pipeline.unwrap();
        assert_eq!((p.workers, p.ring_size), (vec![1], 1024));
        // "Two workers": each lcore is a worker and a scheduler.
        assert!(two(
            "[pipeline]\nworkers = [0, 1]\nschedulers = { a = 1, b = 0 }",
            ""
        )
        .is_ok());
        for (pipeline, extra, want) in [
            (
                "[pipeline]\nworkers = []\nschedulers = { a = 0, b = 0 }",
                "",
                "`pipeline.workers` is empty",
            ),
            (
                "[pipeline]\nworkers = [1]\nschedulers = { a = 0 }",
                "",
                "no lcore for port \"b\"",
            ),
            (
                "[pipeline]\nworkers = [1]\nschedulers = { a = 0, b = 0, c = 0 }",
                "",
                "`pipeline.schedulers.c`",
            ),
            (
                "[pipeline]\nworkers = [1, 1]\nschedulers = { a = 0, b = 0 }",
                "",
                "twice",
            ),
            (
                "[pipeline]\nworkers = [1, 2, 3]\nschedulers = { a = 0, b = 0 }",
                "",
                "raise `queues`",
            ),
            (
                "[pipeline]\nworkers = [1]\nschedulers = { a = 0, b = 0 }\nring_size = 1000",
                "",
                "power of two",
            ),
            (
                "[pipeline]\nworkers = [1]\nschedulers = { a = 0, b = 2 }",
                "[pcap]\npath = \"/tmp/x\"",
                "one scheduler lcore",
            ),
            (
                "[pipeline]\nworkers = [1]\nschedulers = { a = 0, b = 0 }\nrx_rings = 1",
                "",
                "unknown field `rx_rings`",
            ),
        ] {
            let e = two(pipeline, extra).unwrap_err().to_string();
            assert!(e.contains(want), "{pipeline}: {e}");
        }
    }

    #[test]
    fn synthetic_heavy_hitters_are_checked() {
        let port = |syn: &str| {
            RouterConfig::parse(&format!(
                "[[ports]]\ndevice = \"a\"\npeer = \"b\"\nsynthetic = {{ {syn} }}\n[[ports]]\ndevice = \"b\"\npeer = \"a\"\n"
            ))
        };
        let ok = port("flows = 100, heavy_flows = 4").unwrap();
        let s = ok.ports[0].synthetic.as_ref().unwrap();
        assert_eq!((s.heavy_flows, s.heavy_share), (4, 0.5));
        assert!(port("flows = 12, imix = true, heavy_flows = 1, heavy_share = 0.9").is_ok());
        for (syn, want) in [
            (
                "flows = 4, heavy_flows = 4",
                "heavy_flows = 4 must be below flows = 4",
            ),
            (
                "flows = 100, heavy_flows = 4, heavy_share = 1.0",
                "heavy_share = 1 must be in (0, 1)",
            ),
            (
                "flows = 100, heavy_flows = 4, heavy_share = 0",
                "heavy_share = 0 must be in (0, 1)",
            ),
            (
                "flows = 8, imix = true, heavy_flows = 1",
                "needs flows >= 12",
            ),
        ] {
            let e = port(syn).unwrap_err().to_string();
            assert!(e.contains(want), "{syn}: {e}");
        }
    }

    #[test]
    fn default_shaper_bucket_covers_the_poll_gap() {
        // 10 Gbit/s x 100 us = 125 kB; slow links keep two full frames.
        assert_eq!(default_burst_bytes(10e9), 125_000);
        assert_eq!(default_burst_bytes(1e9), 12_500);
        assert_eq!(default_burst_bytes(100e6), 3028);
        let cfg = |rate: &str| {
            let e = EgressConfig {
                rate: Some(Rate::Text(rate.into())),
                ..Default::default()
            };
            e.build(10e9).unwrap().shaper.burst_bytes
        };
        assert_eq!(cfg("10Gbit"), 125_000);
        assert_eq!(cfg("50Mbit"), 3028);
    }

    #[test]
    fn durations_need_a_unit_and_stay_in_range() {
        assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration(" 1.5s "), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("200000min")
            .unwrap_err()
            .contains("out of range"));
    }

    #[test]
    fn rates_take_units_or_plain_bits_per_second() {
        let text = |s: &str| parse_rate(&Rate::Text(s.to_string()));
        assert_eq!(text("100Mbit"), Ok(100e6));
        assert_eq!(text("10Gbps"), Ok(10e9));
        assert_eq!(text("500kbit"), Ok(500e3));
        assert_eq!(text("9600"), Ok(9600.0));
        assert_eq!(parse_rate(&Rate::Number(1e9)), Ok(1e9));
        assert!(text("fast").is_err());
        assert!(text("0").is_err());
        assert!(text("20Tbit").is_err());
        assert!(parse_rate(&Rate::Number(1e14)).is_err());
    }

    #[test]
    fn rules_take_a_delay_with_or_without_a_variant() {
        let ports = "[[ports]]\ndevice = \"a\"\npeer = \"a\"\n";
        let c = RouterConfig::parse(&format!(
            "[[rules]]\nsrc_port = 40001\ndelay = \"10ms\"\n\
             [[rules]]\nsrc_port = 40002\nproto = \"udp\"\nvariant = \"cubic\"\ndelay = \"100ms\"\n{ports}"
        ))
        .unwrap();
        let rules = c.rules().unwrap();
        assert_eq!(rules[0].variant, None);
        assert_eq!(rules[0].delay, Some(Duration::from_millis(10)));
        assert_eq!(rules[1].variant, Some(VariantId::CUBIC));
        assert_eq!(rules[1].delay, Some(Duration::from_millis(100)));
        for (rule, want) in [
            ("src_port = 1", "a rule sets `variant`, `delay` or both"),
            ("src_port = 1\ndelay = \"10\"", "[0].delay"),
            ("src_port = 1\ndelay = \"soon\"", "[0].delay"),
        ] {
            let e = RouterConfig::parse(&format!("[[rules]]\n{rule}\n{ports}")).unwrap_err();
            assert!(e.0.contains(want), "{rule}: {e}");
        }
        let many: String = (1..=32)
            .map(|i| format!("[[rules]]\nsrc_port = {i}\ndelay = \"{i}ms\"\n"))
            .collect();
        let e = RouterConfig::parse(&format!("{many}{ports}")).unwrap_err();
        assert!(e.0.contains("at most 31"), "{e}");
    }

    #[test]
    fn neighbour_timeout_is_a_duration_of_at_least_a_second() {
        let ports = "[[ports]]\ndevice = \"a\"\npeer = \"a\"\n";
        let c = RouterConfig::parse(ports).unwrap();
        assert_eq!(
            parse_duration(&c.neighbour_timeout),
            Ok(Duration::from_secs(300))
        );
        let c = RouterConfig::parse(&format!("neighbour_timeout = \"30s\"\n{ports}")).unwrap();
        assert_eq!(c.neighbour_timeout, "30s");
        let e = RouterConfig::parse(&format!("neighbour_timeout = \"10ms\"\n{ports}")).unwrap_err();
        assert!(
            e.0.contains("neighbour_timeout") && e.0.contains("1s"),
            "{e}"
        );
        let e = RouterConfig::parse(&format!("neighbour_timeout = \"soon\"\n{ports}")).unwrap_err();
        assert!(e.0.contains("neighbour_timeout"), "{e}");
    }
}

//! The resolved scenario: every quantity checked and in numbers.

use serde::Serialize;
use tollgate_router::DisciplineConfig;

/// Topology kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// One bottleneck; per-flow access delays.
    Dumbbell,
    /// Bottlenecks in series.
    ParkingLot,
}

/// The timing noise the emulator adds to real hosts' perfect clocks
/// (`topology.noise`; [`crate::sim::noise`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseKind {
    /// Host wake-up latencies measured on the namespace testbed.
    Host,
    /// An independent uniform delay per datagram (`host_jitter_s`).
    Iid,
    /// None: every host reacts at once and emits on time.
    None,
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
    /// Fixed flow-control window (bytes); `None` = auto-tuned.
    pub window_bytes: Option<u64>,
    /// `tollgate load`: this group's server instead of `--server` (ignored by `sim`).
    pub server: Option<std::net::SocketAddr>,
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
    /// Window of the ratio `time_to_target_s` follows, seconds: its
    /// resolution and least value.
    pub target_window_s: f64,
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
    /// Probability that a packet entering a forward bottleneck port is lost
    /// at random (before the discipline sees it).
    pub bottleneck_loss: f64,
    /// Access rate, bit/s.
    pub access_rate_bps: f64,
    /// Which timing noise the emulator adds.
    pub noise: NoiseKind,
    /// `noise = "host"`: the measured wake-up latencies are multiplied by this.
    pub noise_scale: f64,
    /// `noise = "host"`: the path noise (ACK compression) is multiplied by this.
    pub path_noise_scale: f64,
    /// `noise = "iid"`: each datagram leaves its host after a delay uniform
    /// in `[0, host_jitter_s]` (FIFO per host), seconds; 0 otherwise.
    pub host_jitter_s: f64,
    /// Real AES-GCM packet protection on 1-RTT packets; false: a null
    /// cipher with the same tag length, so packets keep their sizes
    /// ([`crate::sim::tls`]).
    pub packet_protection: bool,
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
    /// Replicated seeds (the file's `seeds`, or `tollgate sim --seeds N`):
    /// every point runs once per seed. `None`: every point runs once, with
    /// its own resolved `seed`.
    pub seeds: Option<Vec<u64>>,
}

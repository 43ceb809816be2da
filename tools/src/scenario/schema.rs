//! The scenario file as written: serde structs that mirror the TOML text.
//!
//! Every table has `deny_unknown_fields`, so a typo is an error. Quantities
//! stay strings here; [`resolve`](super::resolve()) turns them into numbers.
//! `[router]`'s [`RawRouter`] lives in [`router`](super::router).

use serde::{Deserialize, Serialize};

use super::router::RawRouter;

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
    /// Replicated seeds: every sweep point runs once per seed (`tollgate sim`
    /// then reports the mean and 95 % confidence interval of each metric).
    pub seeds: Option<Vec<u64>>,
    /// Metrics sampling interval (default 100ms).
    pub sample_interval: Option<String>,
    /// QUIC packet protection (AES-GCM) on 1-RTT packets (default true);
    /// false keeps the same packet sizes without the cipher work
    /// (`tollgate sim --no-packet-protection`).
    pub packet_protection: Option<bool>,
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
    /// `tollgate testbed` on named hosts and router ports instead of
    /// namespaces (read by the testbed, `tools/src/testbed/site.rs`;
    /// `sim` and `load` ignore it).
    pub testbed: Option<toml::Value>,
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
    /// Timing noise: `"host"` (measured host wake-up latencies, the
    /// default), `"iid"` (a uniform delay per datagram) or `"none"`.
    pub noise: Option<String>,
    /// `noise = "host"`: multiply the measured latencies by this (default 1).
    pub noise_scale: Option<f64>,
    /// `noise = "host"`: multiply the path noise (ACK compression between
    /// the hosts) by this (default 1; 0 turns it off).
    pub path_noise_scale: Option<f64>,
    /// `noise = "iid"` (implied when set alone): bound of the random delay
    /// added to every datagram a host emits: a duration, or `"auto"` (eight
    /// 1500-byte packet times at the bottleneck rate).
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
    /// Random loss: the probability that a packet entering a forward
    /// bottleneck port is lost (0 ..= 0.5, default 0; `sim` only).
    pub loss: Option<f64>,
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
    /// `tollgate load` only: this group's server (`ADDR:PORT`) instead of `--server`.
    pub server: Option<String>,
    /// Flow-control window: `auto` (default: starts at 16 MiB, auto-tuned up
    /// to 256 MiB) or a fixed size such as `64MB` (QUIC flows).
    pub window: Option<String>,
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
    /// Window of the ratio "time to fairness" follows, which is also its
    /// resolution and least value (default: `fairness_window`).
    pub target_window: Option<String>,
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

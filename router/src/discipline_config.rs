//! The discipline configuration: which discipline a port runs and with what
//! parameters, in one TOML shape that every front end reads.
//!
//! A scenario's `[router]` table (`tollgate sim`, `tollgate testbed`) and a
//! `router.toml` `[ports.egress]` table (`tollgate-router`) both hold
//! `discipline = "<name>"` plus that discipline's keys, with the same names
//! and meanings everywhere:
//!
//! ```toml
//! discipline = "cebinae"
//! tau = 0.01
//! dt = "67108864ns"
//! l = "100us"
//! ```
//!
//! [`DisciplineKeys`] is that shape (serde; a key that does not belong to the
//! named discipline is an error naming it), and [`DisciplineKeys::resolve`]
//! turns it into the validated [`DisciplineConfig`] the disciplines are built
//! from. What is not a key but comes from the surrounding configuration (the
//! port rate, and in a scenario the buffer size of the topology) is passed in
//! a [`Context`]. Every key is documented once, in `router/README.md`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tollgate_cca::{units, VariantId};

use crate::cebinae::CebinaeConfig;
use crate::choke::ChokeConfig;
use crate::codel::{CodelConfig, CodelParams};
use crate::droptail::{DropTailConfig, Limit};
use crate::dualpi2::DualPi2Config;
use crate::fq::FqConfig;
use crate::fq_codel::FqCodelConfig;
use crate::qdisc::ConfigError;
use crate::red::RedConfig;
use crate::rrmqs::RrmqsConfig;

/// The configuration of any discipline, checked and in numbers.
#[derive(Clone, Debug, PartialEq)]
pub enum DisciplineConfig {
    /// [`DropTail`](crate::droptail::DropTail).
    DropTail(DropTailConfig),
    /// [`Red`](crate::red::Red).
    Red(RedConfig),
    /// [`Choke`](crate::choke::Choke).
    Choke(ChokeConfig),
    /// [`Cebinae`](crate::cebinae::Cebinae).
    Cebinae(CebinaeConfig),
    /// [`Rrmqs`](crate::rrmqs::Rrmqs).
    Rrmqs(RrmqsConfig),
    /// [`Fq`](crate::fq::Fq).
    Fq(FqConfig),
    /// [`Codel`](crate::codel::Codel).
    Codel(CodelConfig),
    /// [`FqCodel`](crate::fq_codel::FqCodel).
    FqCodel(FqCodelConfig),
    /// [`DualPi2`](crate::dualpi2::DualPi2).
    DualPi2(DualPi2Config),
}

/// The names of the disciplines, as written after `discipline =`.
pub const DISCIPLINE_NAMES: [&str; 9] = [
    "droptail", "red", "choke", "cebinae", "rrmqs", "fq", "codel", "fq_codel", "dualpi2",
];

impl Default for DisciplineConfig {
    fn default() -> Self {
        DisciplineConfig::DropTail(DropTailConfig::default())
    }
}

impl DisciplineConfig {
    /// The discipline's name.
    pub fn name(&self) -> &'static str {
        match self {
            DisciplineConfig::DropTail(_) => "droptail",
            DisciplineConfig::Red(_) => "red",
            DisciplineConfig::Choke(_) => "choke",
            DisciplineConfig::Cebinae(_) => "cebinae",
            DisciplineConfig::Rrmqs(_) => "rrmqs",
            DisciplineConfig::Fq(_) => "fq",
            DisciplineConfig::Codel(_) => "codel",
            DisciplineConfig::FqCodel(_) => "fq_codel",
            DisciplineConfig::DualPi2(_) => "dualpi2",
        }
    }

    /// The configuration named `name` with its published defaults.
    pub fn default_for(name: &str) -> Option<DisciplineConfig> {
        Some(match name {
            "droptail" => DisciplineConfig::DropTail(DropTailConfig::default()),
            "red" => DisciplineConfig::Red(RedConfig::default()),
            "choke" => DisciplineConfig::Choke(ChokeConfig::default()),
            "cebinae" => DisciplineConfig::Cebinae(CebinaeConfig::default()),
            "rrmqs" => DisciplineConfig::Rrmqs(RrmqsConfig::default()),
            "fq" => DisciplineConfig::Fq(FqConfig::default()),
            "codel" => DisciplineConfig::Codel(CodelConfig::default()),
            "fq_codel" => DisciplineConfig::FqCodel(FqCodelConfig::default()),
            "dualpi2" => DisciplineConfig::DualPi2(DualPi2Config::default()),
            _ => return None,
        })
    }

    /// Check the configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            DisciplineConfig::DropTail(c) => c.validate(),
            DisciplineConfig::Red(c) => c.validate(),
            DisciplineConfig::Choke(c) => c.validate(),
            DisciplineConfig::Cebinae(c) => c.validate(),
            DisciplineConfig::Rrmqs(c) => c.validate(),
            DisciplineConfig::Fq(c) => c.validate(),
            DisciplineConfig::Codel(c) => c.validate(),
            DisciplineConfig::FqCodel(c) => c.validate(),
            DisciplineConfig::DualPi2(c) => c.validate(),
        }
    }
}

/// What the table around the discipline keys decides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Context {
    /// The rate of the port the discipline feeds, bit/s: RED's idle decay
    /// (`link_rate_bps`), Cebinae's `line_rate_bps`, a DropTail `limit_bdp`.
    pub rate_bps: f64,
    /// A buffer size in packets set outside the discipline table (a
    /// scenario's `topology.bottleneck.buffer`). When set, it is every
    /// discipline's queue limit and the limit keys (`limit`, `limit_bytes`,
    /// `limit_bdp`, `max_size`, `main_limit`) are refused, naming
    /// `buffer_field` as the place to set it.
    pub buffer_packets: Option<u32>,
    /// Where the buffer is set, for the error message.
    pub buffer_field: &'static str,
}

impl Context {
    /// A port of `rate_bps` whose discipline table sets its own limits
    /// (`router.toml`).
    pub fn port(rate_bps: f64) -> Context {
        Context {
            rate_bps,
            buffer_packets: None,
            buffer_field: "",
        }
    }
}

/// `discipline = "<name>"` and that discipline's keys, as written.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "discipline", rename_all = "lowercase")]
pub enum DisciplineKeys {
    /// `discipline = "droptail"`.
    #[serde(rename = "droptail")]
    DropTail(DropTailKeys),
    /// `discipline = "red"`.
    Red(RedKeys),
    /// `discipline = "choke"`: RED's keys (CHOKe's default `gentle` is false).
    Choke(RedKeys),
    /// `discipline = "cebinae"`.
    Cebinae(CebinaeKeys),
    /// `discipline = "rrmqs"`.
    Rrmqs(RrmqsKeys),
    /// `discipline = "fq"`.
    Fq(FqKeys),
    /// `discipline = "codel"`.
    Codel(CodelKeys),
    /// `discipline = "fq_codel"`.
    #[serde(rename = "fq_codel")]
    FqCodel(FqCodelKeys),
    /// `discipline = "dualpi2"`.
    #[serde(rename = "dualpi2")]
    DualPi2(DualPi2Keys),
}

impl Default for DisciplineKeys {
    fn default() -> Self {
        DisciplineKeys::DropTail(DropTailKeys::default())
    }
}

/// FQ's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FqKeys {
    /// Packets queued in all. Default 1000.
    pub limit: Option<u32>,
    /// Flow queues (hash buckets). Default 1024.
    pub buckets: Option<u32>,
    /// Bytes per queue per round. Default 1514.
    pub quantum: Option<u32>,
}

/// CoDel's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CodelKeys {
    /// Packets queued at most. Default 1000.
    pub limit: Option<u32>,
    /// Acceptable standing delay ("5ms"). Default 5 ms.
    pub target: Option<String>,
    /// Window of the delay and base of the control law ("100ms"). Default 100 ms.
    pub interval: Option<String>,
    /// Mark ECN-capable packets instead of dropping. Default false.
    pub ecn: Option<bool>,
}

/// FQ-CoDel's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FqCodelKeys {
    /// Packets queued in all. Default 10240.
    pub limit: Option<u32>,
    /// Bytes queued in all. Default 33554432 (32 MiB).
    pub memory_limit: Option<u64>,
    /// Flow queues. Default 1024.
    pub flows: Option<u32>,
    /// Bytes per queue per round. Default 1514.
    pub quantum: Option<u32>,
    /// Packets dropped at most per overflow batch. Default 64.
    pub drop_batch: Option<u32>,
    /// CoDel's target ("5ms"). Default 5 ms.
    pub target: Option<String>,
    /// CoDel's interval ("100ms"). Default 100 ms.
    pub interval: Option<String>,
    /// Mark ECN-capable packets instead of dropping. Default true.
    pub ecn: Option<bool>,
}

/// DualPI2's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DualPi2Keys {
    /// Packets queued in the L and C queues together. Default 10000.
    pub limit: Option<u32>,
    /// Classic queue delay target ("15ms"). Default 15 ms.
    pub target: Option<String>,
    /// PI update interval ("16ms"). Default 16 ms.
    pub tupdate: Option<String>,
    /// Integral gain, Hz. Default 0.16.
    pub alpha: Option<f64>,
    /// Proportional gain, Hz. Default 3.2.
    pub beta: Option<f64>,
    /// Coupling factor `k` (`p_CL = k p'`). Default 2.
    pub coupling_factor: Option<f64>,
    /// L4S step marking threshold on the sojourn time ("1ms"). Default 1 ms.
    pub step_thresh: Option<String>,
    /// Scheduler time shift ("40ms"). Default 40 ms.
    pub tshift: Option<String>,
    /// Mark ECN-capable Classic packets instead of dropping. Default true.
    pub ecn: Option<bool>,
    /// Seed of the drop and mark decisions. Default 1.
    pub seed: Option<u64>,
}

/// DropTail's keys: at most one of the limits.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DropTailKeys {
    /// Packets. Default 1000.
    pub limit: Option<u32>,
    /// Bytes.
    pub limit_bytes: Option<u64>,
    /// A multiple of the BDP at the port rate and `rtt`.
    pub limit_bdp: Option<f64>,
    /// The RTT of `limit_bdp` ("100ms").
    pub rtt: Option<String>,
    /// Smallest packet expected; sizes the ring of a byte limit. Default 64.
    pub min_packet_bytes: Option<u32>,
}

/// RED's and CHOKe's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RedKeys {
    /// Hard limit, packets. Default 1000.
    pub limit: Option<u32>,
    /// Lower threshold (packets; bytes in byte mode). Default 5.
    pub min_th: Option<f64>,
    /// Upper threshold. Default 15.
    pub max_th: Option<f64>,
    /// Drop probability at `max_th`. Default 0.1.
    pub max_p: Option<f64>,
    /// EWMA weight. Default 0.002.
    pub weight: Option<f64>,
    /// Gentle ramp above `max_th`. Default true for RED, false for CHOKe.
    pub gentle: Option<bool>,
    /// Adaptive RED. Default false.
    pub adaptive: Option<bool>,
    /// ARED interval ("500ms").
    pub adapt_interval: Option<String>,
    /// Queue and thresholds in bytes. Default false.
    pub byte_mode: Option<bool>,
    /// Mean packet size (`avpkt`). Default 1000.
    pub mean_pkt_bytes: Option<u32>,
    /// Mark ECN-capable packets instead of dropping. Default false.
    pub ecn: Option<bool>,
    /// With `ecn`, still drop in the forced region. Default false.
    pub harddrop: Option<bool>,
    /// Seed of the drop decisions. Default 1.
    pub seed: Option<u64>,
}

/// Cebinae's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CebinaeKeys {
    /// Packets per queue (head and tail each). Default 1000.
    pub max_size: Option<u32>,
    /// Round `dT` ("67108864ns"). Default 2^24 ns.
    pub dt: Option<String>,
    /// Time quantum of the entitlement. Default 1024 ns.
    pub vdt: Option<String>,
    /// RECONFIG lead before ROTATE. Default 100 us.
    pub l: Option<String>,
    /// Rounds per evaluation. Default 1.
    pub p: Option<u32>,
    /// Tax. Default 0.5.
    pub tau: Option<f64>,
    /// Port saturation slack. Default 0.05.
    pub delta_port: Option<f64>,
    /// Top-flow slack. Default 0.05.
    pub delta_flow: Option<f64>,
    /// Detector slots per stage (power of two). Default 2048.
    pub cache_slots: Option<usize>,
    /// Seed of the detector's stage hashes. Default 1.
    pub seed: Option<u64>,
}

/// RRMQS's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RrmqsKeys {
    /// Variants with a measuring queue: CCA names or specs (`"taxed(newreno)"`),
    /// `"unmarked"`, or DSCP numbers as strings. Default: the thesis's 12.
    pub variants: Option<Vec<String>>,
    /// `C_f`, flows per measuring queue. Default 2.
    pub flows_per_queue: Option<usize>,
    /// `C_p`, packets per measuring queue. Default 2.
    pub packets_per_queue: Option<usize>,
    /// Main queue, packets. Default 1200.
    pub main_limit: Option<usize>,
    /// Probability of serving the measuring set first. Default `m C_p / (main + m C_p)`.
    pub rrmqs_probability: Option<f64>,
    /// Meter window ("500ms").
    pub window: Option<String>,
    /// Apply the feedback loop. Default true.
    pub feedback: Option<bool>,
    /// `"drop"` (the thesis; default), `"delay"` or `"probability"`.
    pub feedback_mode: Option<String>,
    /// Over-share threshold on the index. Default 1.2.
    pub upper: Option<f64>,
    /// Prioritise below this index. Default 0.8.
    pub lower: Option<f64>,
    /// `delay` and `probability` modes: weight of the newest window in the
    /// smoothed index. Default 0.3.
    pub smoothing: Option<f64>,
    /// A measuring flow idle this long is forgotten ("500ms").
    pub flow_idle_timeout: Option<String>,
    /// Bloom filter bits. Default 65536.
    pub bloom_bits: Option<usize>,
    /// Bloom filter hashes. Default 3.
    pub bloom_hashes: Option<u32>,
    /// Seed of the dequeue choice. Default 1.
    pub seed: Option<u64>,
}

fn set<T: Clone>(dst: &mut T, src: &Option<T>) {
    if let Some(v) = src {
        *dst = v.clone();
    }
}

/// A duration key: "10ms", "1.5s", "67108864ns" (a unit is required).
fn duration(
    discipline: &'static str,
    field: &'static str,
    text: &Option<String>,
    dst: &mut Duration,
) -> Result<(), ConfigError> {
    let Some(text) = text else { return Ok(()) };
    let bad = |why: String| ConfigError::new(discipline, field, format!("{text:?}"), why);
    if text
        .trim()
        .ends_with(|c: char| c.is_ascii_digit() || c == '.')
    {
        return Err(bad(
            "a duration with a unit, such as \"10ms\" or \"100us\"".into()
        ));
    }
    *dst = units::parse_duration(text).map_err(bad)?;
    Ok(())
}

impl DisciplineKeys {
    /// Read the discipline keys of a table whose other keys the caller has
    /// already taken out: `discipline` (default `"droptail"`) and that
    /// discipline's keys. A key the discipline does not have is an error
    /// naming the key, the discipline and the keys it has.
    pub fn from_table(mut table: toml::Table) -> Result<DisciplineKeys, String> {
        let name = match table.get("discipline") {
            None => {
                table.insert("discipline".into(), "droptail".into());
                "droptail".to_string()
            }
            Some(toml::Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(format!(
                    "`discipline` = {other}: expected one of {}",
                    DISCIPLINE_NAMES.join(", ")
                ))
            }
        };
        if !DISCIPLINE_NAMES.contains(&name.as_str()) {
            return Err(format!(
                "`discipline` = {name:?}: expected one of {}",
                DISCIPLINE_NAMES.join(", ")
            ));
        }
        table.try_into().map_err(|e: toml::de::Error| {
            format!("discipline {name:?}: {}", e.message().trim_end())
        })
    }

    /// The discipline's name.
    pub fn name(&self) -> &'static str {
        match self {
            DisciplineKeys::DropTail(_) => "droptail",
            DisciplineKeys::Red(_) => "red",
            DisciplineKeys::Choke(_) => "choke",
            DisciplineKeys::Cebinae(_) => "cebinae",
            DisciplineKeys::Rrmqs(_) => "rrmqs",
            DisciplineKeys::Fq(_) => "fq",
            DisciplineKeys::Codel(_) => "codel",
            DisciplineKeys::FqCodel(_) => "fq_codel",
            DisciplineKeys::DualPi2(_) => "dualpi2",
        }
    }

    /// The checked configuration: unset keys take the library defaults, the
    /// rate (and a scenario's buffer) come from `ctx`.
    pub fn resolve(&self, ctx: &Context) -> Result<DisciplineConfig, ConfigError> {
        let name = self.name();
        // A limit key where the buffer is set elsewhere.
        let outside = |field: &'static str, given: bool| -> Result<(), ConfigError> {
            match (given, ctx.buffer_packets) {
                (true, Some(_)) => Err(ConfigError::new(
                    name,
                    field,
                    "(set)",
                    format!("not here: the queue limit is `{}`", ctx.buffer_field),
                )),
                _ => Ok(()),
            }
        };
        let config = match self {
            DisciplineKeys::DropTail(k) => {
                outside("limit", k.limit.is_some())?;
                outside("limit_bytes", k.limit_bytes.is_some())?;
                outside("limit_bdp", k.limit_bdp.is_some())?;
                let mut c = DropTailConfig::default();
                set(&mut c.min_packet_bytes, &k.min_packet_bytes);
                let given = [
                    k.limit.is_some(),
                    k.limit_bytes.is_some(),
                    k.limit_bdp.is_some(),
                ];
                if given.iter().filter(|g| **g).count() > 1 {
                    return Err(ConfigError::new(
                        name,
                        "limit",
                        "(several)",
                        "one of `limit`, `limit_bytes`, `limit_bdp`",
                    ));
                }
                if let Some(n) = k.limit.or(ctx.buffer_packets) {
                    c.limit = Limit::Packets(n);
                }
                if let Some(b) = k.limit_bytes {
                    c.limit = Limit::Bytes(b);
                }
                match (k.limit_bdp, &k.rtt) {
                    (Some(fraction), Some(_)) => {
                        let mut rtt = Duration::ZERO;
                        duration(name, "rtt", &k.rtt, &mut rtt)?;
                        c.limit = Limit::Bdp {
                            fraction,
                            rate_bps: ctx.rate_bps,
                            rtt,
                        };
                    }
                    (Some(_), None) => {
                        return Err(ConfigError::new(
                            name,
                            "rtt",
                            "(missing)",
                            "an RTT such as \"100ms\": `limit_bdp` is a multiple of rate x rtt",
                        ))
                    }
                    (None, Some(_)) => {
                        return Err(ConfigError::new(
                            name,
                            "rtt",
                            "(set)",
                            "only together with `limit_bdp`",
                        ))
                    }
                    (None, None) => {}
                }
                DisciplineConfig::DropTail(c)
            }
            DisciplineKeys::Red(k) => DisciplineConfig::Red(k.apply(RedConfig::default(), ctx)?),
            DisciplineKeys::Choke(k) => DisciplineConfig::Choke(ChokeConfig {
                red: k.apply(ChokeConfig::default().red, ctx)?,
            }),
            DisciplineKeys::Cebinae(k) => {
                outside("max_size", k.max_size.is_some())?;
                let mut c = CebinaeConfig {
                    line_rate_bps: ctx.rate_bps,
                    ..CebinaeConfig::default()
                };
                set(&mut c.max_size, &k.max_size.or(ctx.buffer_packets));
                duration(name, "dt", &k.dt, &mut c.dt)?;
                duration(name, "vdt", &k.vdt, &mut c.vdt)?;
                duration(name, "l", &k.l, &mut c.l)?;
                set(&mut c.p, &k.p);
                set(&mut c.tau, &k.tau);
                set(&mut c.delta_port, &k.delta_port);
                set(&mut c.delta_flow, &k.delta_flow);
                set(&mut c.cache_slots, &k.cache_slots);
                set(&mut c.seed, &k.seed);
                DisciplineConfig::Cebinae(c)
            }
            DisciplineKeys::Rrmqs(k) => {
                outside("main_limit", k.main_limit.is_some())?;
                let mut c = RrmqsConfig::default();
                if let Some(names) = &k.variants {
                    c.variants = names
                        .iter()
                        .map(|n| {
                            parse_variant(n).map_err(|e| {
                                ConfigError::new(name, "variants", format!("{n:?}"), e)
                            })
                        })
                        .collect::<Result<_, _>>()?;
                }
                set(&mut c.flows_per_queue, &k.flows_per_queue);
                set(&mut c.packets_per_queue, &k.packets_per_queue);
                set(
                    &mut c.main_limit,
                    &k.main_limit.or(ctx.buffer_packets.map(|b| b as usize)),
                );
                if k.rrmqs_probability.is_some() {
                    c.rrmqs_probability = k.rrmqs_probability;
                }
                duration(name, "window", &k.window, &mut c.window)?;
                set(&mut c.feedback, &k.feedback);
                if let Some(m) = &k.feedback_mode {
                    c.feedback_mode = crate::rrmqs::FeedbackMode::parse(m).map_err(|e| {
                        ConfigError::new(name, "feedback_mode", format!("{m:?}"), e)
                    })?;
                }
                set(&mut c.upper, &k.upper);
                set(&mut c.lower, &k.lower);
                set(&mut c.smoothing, &k.smoothing);
                duration(
                    name,
                    "flow_idle_timeout",
                    &k.flow_idle_timeout,
                    &mut c.flow_idle_timeout,
                )?;
                set(&mut c.bloom_bits, &k.bloom_bits);
                set(&mut c.bloom_hashes, &k.bloom_hashes);
                set(&mut c.seed, &k.seed);
                DisciplineConfig::Rrmqs(c)
            }
            DisciplineKeys::Fq(k) => {
                outside("limit", k.limit.is_some())?;
                let mut c = FqConfig::default();
                set(&mut c.limit, &k.limit.or(ctx.buffer_packets));
                set(&mut c.buckets, &k.buckets);
                set(&mut c.quantum, &k.quantum);
                DisciplineConfig::Fq(c)
            }
            DisciplineKeys::Codel(k) => {
                outside("limit", k.limit.is_some())?;
                let mut c = CodelConfig::default();
                set(&mut c.limit, &k.limit.or(ctx.buffer_packets));
                codel_keys(name, &mut c.codel, &k.target, &k.interval, k.ecn)?;
                DisciplineConfig::Codel(c)
            }
            DisciplineKeys::FqCodel(k) => {
                outside("limit", k.limit.is_some())?;
                let mut c = FqCodelConfig::default();
                set(&mut c.limit, &k.limit.or(ctx.buffer_packets));
                set(&mut c.memory_limit, &k.memory_limit);
                set(&mut c.flows, &k.flows);
                set(&mut c.quantum, &k.quantum);
                set(&mut c.drop_batch, &k.drop_batch);
                codel_keys(name, &mut c.codel, &k.target, &k.interval, k.ecn)?;
                DisciplineConfig::FqCodel(c)
            }
            DisciplineKeys::DualPi2(k) => {
                outside("limit", k.limit.is_some())?;
                let mut c = DualPi2Config::default();
                set(&mut c.limit, &k.limit.or(ctx.buffer_packets));
                duration(name, "target", &k.target, &mut c.target)?;
                duration(name, "tupdate", &k.tupdate, &mut c.tupdate)?;
                set(&mut c.alpha, &k.alpha);
                set(&mut c.beta, &k.beta);
                set(&mut c.coupling_factor, &k.coupling_factor);
                duration(name, "step_thresh", &k.step_thresh, &mut c.step_thresh)?;
                duration(name, "tshift", &k.tshift, &mut c.tshift)?;
                set(&mut c.ecn, &k.ecn);
                set(&mut c.seed, &k.seed);
                DisciplineConfig::DualPi2(c)
            }
        };
        config.validate()?;
        Ok(config)
    }
}

/// CoDel's keys, shared by `codel` and `fq_codel`.
fn codel_keys(
    name: &'static str,
    c: &mut CodelParams,
    target: &Option<String>,
    interval: &Option<String>,
    ecn: Option<bool>,
) -> Result<(), ConfigError> {
    duration(name, "target", target, &mut c.target)?;
    duration(name, "interval", interval, &mut c.interval)?;
    set(&mut c.ecn, &ecn);
    Ok(())
}

impl RedKeys {
    fn apply(&self, mut c: RedConfig, ctx: &Context) -> Result<RedConfig, ConfigError> {
        let name = if c.gentle { "red" } else { "choke" };
        if self.limit.is_some() && ctx.buffer_packets.is_some() {
            return Err(ConfigError::new(
                name,
                "limit",
                "(set)",
                format!("not here: the queue limit is `{}`", ctx.buffer_field),
            ));
        }
        c.link_rate_bps = ctx.rate_bps;
        set(&mut c.limit, &self.limit.or(ctx.buffer_packets));
        set(&mut c.min_th, &self.min_th);
        set(&mut c.max_th, &self.max_th);
        set(&mut c.max_p, &self.max_p);
        set(&mut c.weight, &self.weight);
        set(&mut c.gentle, &self.gentle);
        set(&mut c.adaptive, &self.adaptive);
        duration(
            name,
            "adapt_interval",
            &self.adapt_interval,
            &mut c.adapt_interval,
        )?;
        set(&mut c.byte_mode, &self.byte_mode);
        set(&mut c.mean_pkt_bytes, &self.mean_pkt_bytes);
        set(&mut c.ecn, &self.ecn);
        set(&mut c.harddrop, &self.harddrop);
        set(&mut c.seed, &self.seed);
        Ok(c)
    }
}

/// A variant as users write it: a CCA name or spec (`"cubic"`,
/// `"taxed(newreno)"`, `"reno"` for NewReno), `"unmarked"`, or a DSCP number
/// (`"34"`). The one spelling every configuration (RRMQS `variants`,
/// `router.toml` rules and class delays) accepts.
pub fn parse_variant(text: &str) -> Result<VariantId, String> {
    let t = text.trim();
    if let Ok(n) = t.parse::<u8>() {
        return VariantId::from_dscp(n).ok_or_else(|| format!("DSCP {n} is not below 64"));
    }
    let lower = t.to_ascii_lowercase();
    match lower.as_str() {
        "unmarked" => return Ok(VariantId::UNMARKED),
        "reno" => return Ok(VariantId::NEWRENO),
        _ => {}
    }
    tollgate_cca::build(&lower, &tollgate_cca::Env::default())
        .map(|cca| cca.variant())
        .map_err(|e| {
            format!(
                "not a variant: {}; use a CCA name or spec (`tollgate cca list`), \
                 \"unmarked\", or a DSCP number below 64",
                e.message
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Result<DisciplineKeys, String> {
        DisciplineKeys::from_table(toml::from_str(text).map_err(|e| e.to_string())?)
    }

    const RATE: Context = Context {
        rate_bps: 1e9,
        buffer_packets: None,
        buffer_field: "",
    };

    #[test]
    fn every_discipline_reads_its_keys() {
        let c = keys("discipline = \"red\"\nmin_th = 7\nmax_th = 21\nharddrop = true\nadapt_interval = \"1s\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap();
        let DisciplineConfig::Red(r) = c else {
            panic!()
        };
        assert_eq!((r.min_th, r.max_th, r.harddrop), (7.0, 21.0, true));
        assert_eq!(r.adapt_interval, Duration::from_secs(1));
        assert_eq!(r.link_rate_bps, 1e9);
        assert!(r.gentle);
        let DisciplineConfig::Choke(c) = keys("discipline = \"choke\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap()
        else {
            panic!()
        };
        assert!(!c.red.gentle, "CHOKe's default is not gentle");
        let DisciplineConfig::Cebinae(c) = keys(
            "discipline = \"cebinae\"\ndt = \"67108864ns\"\nl = \"100us\"\ncache_slots = 4096",
        )
        .unwrap()
        .resolve(&RATE)
        .unwrap() else {
            panic!()
        };
        assert_eq!(c.dt, Duration::from_nanos(1 << 26));
        assert_eq!((c.cache_slots, c.line_rate_bps), (4096, 1e9));
        let DisciplineConfig::Rrmqs(c) = keys(
            "discipline = \"rrmqs\"\nvariants = [\"reno\", \"taxed(cubic)\", \"unmarked\", \"7\"]\nrrmqs_probability = 0.3",
        )
        .unwrap()
        .resolve(&RATE)
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            c.variants,
            vec![
                VariantId::NEWRENO,
                VariantId::CUBIC.taxed(),
                VariantId::UNMARKED,
                VariantId::HTCP
            ]
        );
        assert_eq!(c.rrmqs_probability, Some(0.3));
        let DisciplineConfig::Codel(c) =
            keys("discipline = \"codel\"\ntarget = \"2ms\"\ninterval = \"50ms\"\necn = true")
                .unwrap()
                .resolve(&RATE)
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(c.codel.target, Duration::from_millis(2));
        assert_eq!(c.codel.interval, Duration::from_millis(50));
        assert!(c.codel.ecn);
        assert_eq!(c.limit, 1000);
        let DisciplineConfig::FqCodel(c) = keys(
            "discipline = \"fq_codel\"\nflows = 256\nquantum = 300\nmemory_limit = 1000000\necn = false\ntarget = \"10ms\"",
        )
        .unwrap()
        .resolve(&RATE)
        .unwrap() else {
            panic!()
        };
        assert_eq!((c.flows, c.quantum, c.memory_limit), (256, 300, 1_000_000));
        assert_eq!((c.limit, c.drop_batch), (10_240, 64));
        assert!(!c.codel.ecn);
        assert_eq!(c.codel.target, Duration::from_millis(10));
        assert_eq!(c.codel.interval, Duration::from_millis(100));
        let DisciplineConfig::FqCodel(c) = keys("discipline = \"fq_codel\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap()
        else {
            panic!()
        };
        assert!(c.codel.ecn, "fq_codel marks by default, as Linux");
        let DisciplineConfig::DualPi2(c) = keys(
            "discipline = \"dualpi2\"\ntarget = \"20ms\"\ntupdate = \"10ms\"\nalpha = 0.2\nbeta = 4.0\ncoupling_factor = 1.5\nstep_thresh = \"500us\"\ntshift = \"30ms\"\necn = false\nseed = 9\nlimit = 500",
        )
        .unwrap()
        .resolve(&RATE)
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (c.target, c.tupdate, c.step_thresh, c.tshift),
            (
                Duration::from_millis(20),
                Duration::from_millis(10),
                Duration::from_micros(500),
                Duration::from_millis(30)
            )
        );
        assert_eq!((c.alpha, c.beta, c.coupling_factor), (0.2, 4.0, 1.5));
        assert_eq!((c.ecn, c.seed, c.limit), (false, 9, 500));
        let DisciplineConfig::DualPi2(c) = keys("discipline = \"dualpi2\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(c, DualPi2Config::default());
    }

    #[test]
    fn a_key_of_another_discipline_is_named() {
        let e = keys("discipline = \"droptail\"\ntau = 0.1").unwrap_err();
        assert!(e.contains("tau") && e.contains("droptail"), "{e}");
        assert!(keys("tau = 0.1").unwrap_err().contains("droptail"));
        assert_eq!(keys("").unwrap(), DisciplineKeys::default());
        let e = keys("discipline = \"rrmqs\"\nprobability = 0.1").unwrap_err();
        assert!(
            e.contains("probability") && e.contains("rrmqs_probability"),
            "{e}"
        );
        let e = keys("discipline = \"sfq\"").unwrap_err();
        assert!(
            e.contains("sfq") && e.contains("cebinae") && e.contains("fq"),
            "{e}"
        );
        assert!(keys("discipline = \"fq\"\nquantum = 3000").is_ok());
    }

    #[test]
    fn values_out_of_range_name_discipline_and_field() {
        let e = keys("discipline = \"cebinae\"\ntau = 3.0")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!((e.discipline, e.field), ("cebinae", "tau"));
        let e = keys("discipline = \"cebinae\"\ndt = \"1e20s\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!(e.field, "dt");
        let e = keys("discipline = \"red\"\nadapt_interval = \"10\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert!(e.valid.contains("unit"), "{e}");
        let e = keys("discipline = \"rrmqs\"\nvariants = [\"newrenoo\"]")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!(e.field, "variants");
        assert!(e.value.contains("newrenoo"), "{e}");
        let e = keys("discipline = \"fq_codel\"\ntarget = \"5\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!((e.discipline, e.field), ("fq_codel", "target"));
        assert!(e.valid.contains("unit"), "{e}");
        let e = keys("discipline = \"codel\"\ntarget = \"200ms\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!((e.discipline, e.field), ("codel", "target"));
        assert!(e.valid.contains("interval"), "{e}");
        let e = keys("discipline = \"dualpi2\"\ntshift = \"40\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!((e.discipline, e.field), ("dualpi2", "tshift"));
        assert!(e.valid.contains("unit"), "{e}");
        let e = keys("discipline = \"dualpi2\"\ncoupling_factor = 0.0")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!((e.discipline, e.field), ("dualpi2", "coupling_factor"));
        let e = keys("discipline = \"dualpi2\"\ncoupling = 2.0").unwrap_err();
        assert!(
            e.contains("coupling") && e.contains("coupling_factor"),
            "{e}"
        );
        let e = keys("discipline = \"fq_codel\"\nbuckets = 8").unwrap_err();
        assert!(e.contains("buckets") && e.contains("flows"), "{e}");
    }

    #[test]
    fn a_buffer_set_outside_fills_every_limit_and_refuses_the_keys() {
        let ctx = Context {
            rate_bps: 1e8,
            buffer_packets: Some(250),
            buffer_field: "topology.bottleneck.buffer",
        };
        for (name, limit) in [
            ("droptail", "limit"),
            ("red", "limit"),
            ("choke", "limit"),
            ("cebinae", "max_size"),
            ("rrmqs", "main_limit"),
            ("fq", "limit"),
            ("codel", "limit"),
            ("fq_codel", "limit"),
            ("dualpi2", "limit"),
        ] {
            let k = keys(&format!("discipline = \"{name}\"")).unwrap();
            let c = k.resolve(&ctx).unwrap();
            let got = match c {
                DisciplineConfig::DropTail(c) => match c.limit {
                    Limit::Packets(n) => n as usize,
                    other => panic!("{other:?}"),
                },
                DisciplineConfig::Red(c) => c.limit as usize,
                DisciplineConfig::Choke(c) => c.red.limit as usize,
                DisciplineConfig::Cebinae(c) => c.max_size as usize,
                DisciplineConfig::Rrmqs(c) => c.main_limit,
                DisciplineConfig::Fq(c) => c.limit as usize,
                DisciplineConfig::Codel(c) => c.limit as usize,
                DisciplineConfig::FqCodel(c) => c.limit as usize,
                DisciplineConfig::DualPi2(c) => c.limit as usize,
            };
            assert_eq!(got, 250, "{name}");
            let e = keys(&format!("discipline = \"{name}\"\n{limit} = 10"))
                .unwrap()
                .resolve(&ctx)
                .unwrap_err();
            assert_eq!(e.field, limit, "{name}");
            assert!(e.valid.contains("topology.bottleneck.buffer"), "{e}");
        }
    }

    #[test]
    fn droptail_limits_are_exclusive_and_bdp_needs_rtt() {
        let c = keys("discipline = \"droptail\"\nlimit_bdp = 0.5\nrtt = \"100ms\"")
            .unwrap()
            .resolve(&RATE)
            .unwrap();
        let DisciplineConfig::DropTail(d) = c else {
            panic!()
        };
        assert_eq!(d.limit.caps(1500).1, 6_250_000);
        let e = keys("discipline = \"droptail\"\nlimit_bdp = 0.5")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!(e.field, "rtt");
        let e = keys("discipline = \"droptail\"\nlimit = 5\nlimit_bytes = 9000")
            .unwrap()
            .resolve(&RATE)
            .unwrap_err();
        assert_eq!(e.field, "limit");
    }
}

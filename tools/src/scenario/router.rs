//! `[router]`: the raw table and its resolution into a [`RouterSpec`] (the
//! discipline's configuration, validated).

use std::time::Duration;

use serde::Deserialize;
use tollgate_cca::Env;
use tollgate_router::cebinae::CebinaeConfig;
use tollgate_router::choke::ChokeConfig;
use tollgate_router::droptail::{DropTailConfig, Limit};
use tollgate_router::red::RedConfig;
use tollgate_router::rrmqs::RrmqsConfig;
use tollgate_router::DisciplineConfig;

use super::resolve::{dur, unit_interval};
use super::{RouterSpec, ScenarioError, PACKET_BYTES};

/// `[router]`: the discipline and any parameter overrides.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouter {
    /// droptail | red | choke | cebinae | rrmqs (default droptail).
    pub discipline: Option<String>,
    /// How the router learns a packet's variant: `dscp` (default) or `scenario`.
    pub classify: Option<String>,
    // RED / CHOKe
    /// RED lower threshold, packets.
    pub min_th: Option<f64>,
    /// RED upper threshold, packets.
    pub max_th: Option<f64>,
    /// RED max drop probability.
    pub max_p: Option<f64>,
    /// RED EWMA weight.
    pub weight: Option<f64>,
    /// Gentle RED.
    pub gentle: Option<bool>,
    /// Adaptive RED.
    pub adaptive: Option<bool>,
    /// Mark ECN instead of dropping.
    pub ecn: Option<bool>,
    // Cebinae
    /// Tax rate.
    pub tau: Option<f64>,
    /// Port saturation slack.
    pub delta_port: Option<f64>,
    /// Top-flow slack.
    pub delta_flow: Option<f64>,
    /// Round length dT.
    pub dt: Option<String>,
    /// RECONFIG lead L.
    pub l: Option<String>,
    /// Entitlement quantum vdT.
    pub vdt: Option<String>,
    /// Rounds per evaluation.
    pub p: Option<u32>,
    // RRMQS
    /// Variants with a measuring queue (CCA names).
    pub variants: Option<Vec<String>>,
    /// C_f.
    pub flows_per_queue: Option<usize>,
    /// C_p.
    pub packets_per_queue: Option<usize>,
    /// Probability of serving the measuring set first.
    pub probability: Option<f64>,
    /// Meter window.
    pub window: Option<String>,
    /// Feedback on/off.
    pub feedback: Option<bool>,
    /// Drop threshold on i.
    pub upper: Option<f64>,
    /// Priority threshold on i.
    pub lower: Option<f64>,
}

pub(super) fn resolve_router(
    r: &RawRouter,
    buffer: u32,
    rate_bps: f64,
) -> Result<RouterSpec, ScenarioError> {
    let discipline = r.discipline.clone().unwrap_or_else(|| "droptail".into());
    let classify = r.classify.clone().unwrap_or_else(|| "dscp".into());
    if classify != "dscp" && classify != "scenario" {
        return Err(ScenarioError::new(
            "router.classify",
            format!("\"{classify}\""),
            "\"dscp\" (variant from the DSCP marking) or \"scenario\" (from each flow's cca)",
        ));
    }
    // Which parameters each discipline accepts.
    let red_keys = [
        "min_th", "max_th", "max_p", "weight", "gentle", "adaptive", "ecn",
    ];
    let ceb_keys = ["tau", "delta_port", "delta_flow", "dt", "l", "vdt", "p"];
    let rr_keys = [
        "variants",
        "flows_per_queue",
        "packets_per_queue",
        "probability",
        "window",
        "feedback",
        "upper",
        "lower",
    ];
    let given: Vec<(&str, bool)> = vec![
        ("min_th", r.min_th.is_some()),
        ("max_th", r.max_th.is_some()),
        ("max_p", r.max_p.is_some()),
        ("weight", r.weight.is_some()),
        ("gentle", r.gentle.is_some()),
        ("adaptive", r.adaptive.is_some()),
        ("ecn", r.ecn.is_some()),
        ("tau", r.tau.is_some()),
        ("delta_port", r.delta_port.is_some()),
        ("delta_flow", r.delta_flow.is_some()),
        ("dt", r.dt.is_some()),
        ("l", r.l.is_some()),
        ("vdt", r.vdt.is_some()),
        ("p", r.p.is_some()),
        ("variants", r.variants.is_some()),
        ("flows_per_queue", r.flows_per_queue.is_some()),
        ("packets_per_queue", r.packets_per_queue.is_some()),
        ("probability", r.probability.is_some()),
        ("window", r.window.is_some()),
        ("feedback", r.feedback.is_some()),
        ("upper", r.upper.is_some()),
        ("lower", r.lower.is_some()),
    ];
    let accepted: &[&str] = match discipline.as_str() {
        "droptail" => &[],
        "red" | "choke" => &red_keys,
        "cebinae" => &ceb_keys,
        "rrmqs" => &rr_keys,
        other => {
            return Err(ScenarioError::new(
                "router.discipline",
                format!("\"{other}\""),
                "droptail, red, choke, cebinae or rrmqs",
            ))
        }
    };
    if let Some((k, _)) = given.iter().find(|(k, set)| *set && !accepted.contains(k)) {
        let allowed = if accepted.is_empty() {
            format!("no parameters for {discipline}")
        } else {
            format!("for {discipline} only: {}", accepted.join(", "))
        };
        return Err(ScenarioError::new(format!("router.{k}"), "(set)", allowed));
    }
    let rdur = |field: &str, v: &Option<String>, d: Duration| -> Result<Duration, ScenarioError> {
        match v {
            Some(t) => dur(&format!("router.{field}"), t).map(Duration::from_secs_f64),
            None => Ok(d),
        }
    };
    let red = |gentle_default: bool| RedConfig {
        limit: buffer,
        min_th: r.min_th.unwrap_or(RedConfig::default().min_th),
        max_th: r.max_th.unwrap_or(RedConfig::default().max_th),
        max_p: r.max_p.unwrap_or(RedConfig::default().max_p),
        weight: r.weight.unwrap_or(RedConfig::default().weight),
        gentle: r.gentle.unwrap_or(gentle_default),
        adaptive: r.adaptive.unwrap_or(false),
        ecn: r.ecn.unwrap_or(false),
        link_rate_bps: rate_bps,
        mean_pkt_bytes: PACKET_BYTES as u32,
        ..RedConfig::default()
    };
    let config = match discipline.as_str() {
        "droptail" => DisciplineConfig::DropTail(DropTailConfig {
            limit: Limit::Packets(buffer),
            ..DropTailConfig::default()
        }),
        "red" => DisciplineConfig::Red(red(true)),
        "choke" => DisciplineConfig::Choke(ChokeConfig { red: red(false) }),
        "cebinae" => {
            let d = CebinaeConfig::default();
            DisciplineConfig::Cebinae(CebinaeConfig {
                line_rate_bps: rate_bps,
                max_size: buffer,
                tau: r.tau.unwrap_or(d.tau),
                delta_port: r.delta_port.unwrap_or(d.delta_port),
                delta_flow: r.delta_flow.unwrap_or(d.delta_flow),
                dt: rdur("dt", &r.dt, d.dt)?,
                l: rdur("l", &r.l, d.l)?,
                vdt: rdur("vdt", &r.vdt, d.vdt)?,
                p: r.p.unwrap_or(d.p),
                ..d
            })
        }
        _ => {
            let d = RrmqsConfig::default();
            let variants = match &r.variants {
                None => d.variants.clone(),
                Some(names) => {
                    let mut out = Vec::new();
                    for (i, n) in names.iter().enumerate() {
                        let cca = tollgate_cca::build(n, &Env::default()).map_err(|e| {
                            ScenarioError::new(
                                format!("router.variants[{i}]"),
                                format!("\"{n}\""),
                                format!("a CCA name ({})", e.message),
                            )
                        })?;
                        out.push(cca.variant());
                    }
                    out
                }
            };
            DisciplineConfig::Rrmqs(RrmqsConfig {
                variants,
                flows_per_queue: r.flows_per_queue.unwrap_or(d.flows_per_queue),
                packets_per_queue: r.packets_per_queue.unwrap_or(d.packets_per_queue),
                main_limit: buffer as usize,
                rrmqs_probability: r.probability.or(d.rrmqs_probability),
                window: rdur("window", &r.window, d.window)?,
                feedback: r.feedback.unwrap_or(d.feedback),
                upper: r.upper.unwrap_or(d.upper),
                lower: r.lower.unwrap_or(d.lower),
                ..d
            })
        }
    };
    if let Some(p) = r.probability {
        unit_interval("router.probability", p, 0.0, 1.0)?;
    }
    config.validate().map_err(|e| {
        let field = match e.field {
            "limit" | "max_size" | "main_limit" => "topology.bottleneck.buffer".to_string(),
            f => format!("router.{f}"),
        };
        ScenarioError::new(field, e.value.clone(), e.valid.clone())
    })?;
    Ok(RouterSpec {
        discipline,
        classify,
        buffer_packets: buffer,
        config: format!("{config:?}"),
        discipline_config: Some(config),
    })
}

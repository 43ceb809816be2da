//! `[router]`: the raw table and its resolution into a [`RouterSpec`].
//!
//! The table is `classify` plus the router library's discipline keys
//! ([`DisciplineKeys`]: `discipline = "red"` and RED's keys), the same shape
//! `tollgate-router` reads from a `router.toml` egress table. The bottleneck
//! rate and the topology's buffer reach the library as its [`Context`].

use serde::Deserialize;
use tollgate_router::{Context, DisciplineKeys};

use super::{RouterSpec, ScenarioError};

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

pub(super) fn resolve_router(
    r: &RawRouter,
    buffer: u32,
    rate_bps: f64,
) -> Result<RouterSpec, ScenarioError> {
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

//! Scenario files: the TOML an experimenter writes, checked and resolved into
//! a [`Scenario`] the emulator runs.
//!
//! Parsing is two-step. Serde reads the file into `Raw*` structs that mirror
//! the text (every table has `deny_unknown_fields`, so a typo is an error, not
//! a silently ignored key); [`resolve`] then turns every quantity into numbers
//! and checks it. Every error names the field path (`flows[1].rtt`), the bad
//! value and what is allowed. The full reference is in `docs/scenarios.md`.
//!
//! | module | holds |
//! |---|---|
//! | `schema` | the `Raw*` serde structs mirroring the file |
//! | `resolved` | the resolved [`Scenario`] and its parts, and [`Plan`] |
//! | `resolve` | raw to resolved, one function per section (topology, flows, buffer, metrics) |
//! | `router` | `[router]`: [`RawRouter`] and its resolution into a [`RouterSpec`] |
//! | `sweep` | `[sweep]` expansion: one scenario per value |
//!
//! This file holds the entry points ([`load`], [`parse_plan`]) and the error
//! type.

use std::fmt;
use std::path::Path;

pub mod kind;
mod resolve;
mod resolved;
mod router;
mod schema;
mod sweep;

pub use resolve::resolve;
pub use resolved::{
    Draw, FlowGroup, MetricSpec, NoiseKind, Plan, RouterSpec, Scenario, TopologyKind,
};
pub use router::RawRouter;
pub use schema::{
    OneOrMany, RawFlowGroup, RawLink, RawMetrics, RawScenario, RawSweep, RawTopology,
};
pub use sweep::value_text;

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
    let seeds = check_seeds(&raw)?;
    let Some(sweep) = raw.sweep.clone() else {
        let s = resolve(&raw)?;
        return Ok(Plan {
            name: s.name.clone(),
            sweep_param: None,
            runs: vec![s],
            seeds,
        });
    };
    let runs = sweep::expand(&value, &sweep)?;
    Ok(Plan {
        name: raw.name.clone(),
        sweep_param: Some(sweep.param),
        runs,
        seeds,
    })
}

impl Plan {
    /// `--seeds N`: replicate every point over seeds `1..=N`, whatever the
    /// file says about `seed` / `seeds`.
    pub fn set_seed_count(&mut self, n: u64) -> anyhow::Result<()> {
        if n == 0 || n > MAX_SEEDS as u64 {
            anyhow::bail!(
                "--seeds {n}: give a number of seeds in 1 ..= {MAX_SEEDS} (runs seeds 1..=N)"
            );
        }
        if self.sweep_param.as_deref() == Some("seed") {
            anyhow::bail!(
                "--seeds {n}: this file sweeps `seed` (sweep.param = \"seed\"), so each point already \
                 has its seed; drop --seeds, or sweep another parameter"
            );
        }
        self.seeds = Some((1..=n).collect());
        Ok(())
    }

    /// Runs in the plan: points x seeds.
    pub fn run_count(&self) -> usize {
        self.runs.len() * self.seeds.as_ref().map_or(1, Vec::len)
    }
}

/// Most seeds a scenario file or `--seeds` may ask for.
pub const MAX_SEEDS: usize = 10_000;

/// `seeds`: a non-empty list of distinct seeds, not combined with a sweep
/// over `seed` or `seeds`.
fn check_seeds(raw: &RawScenario) -> Result<Option<Vec<u64>>, ScenarioError> {
    let Some(seeds) = &raw.seeds else {
        if let Some(sweep) = raw.sweep.as_ref().filter(|s| s.param == "seeds") {
            return Err(ScenarioError::new(
                "sweep.param",
                format!("\"{}\"", sweep.param),
                "a scalar field; to replicate seeds write `seeds = [1, 2, 3]` at the top level",
            ));
        }
        return Ok(None);
    };
    let text = format!("{seeds:?}");
    if seeds.is_empty() || seeds.len() > MAX_SEEDS {
        return Err(ScenarioError::new(
            "seeds",
            text,
            format!("a list of 1 ..= {MAX_SEEDS} seeds, e.g. seeds = [1, 2, 3]"),
        ));
    }
    let mut sorted = seeds.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(ScenarioError::new(
            "seeds",
            text,
            format!("distinct seeds ({} appears twice)", w[0]),
        ));
    }
    if let Some(sweep) = raw
        .sweep
        .as_ref()
        .filter(|s| s.param == "seed" || s.param == "seeds")
    {
        return Err(ScenarioError::new(
            "sweep.param",
            format!("\"{}\"", sweep.param),
            "another field: a file with `seeds` replicates every sweep point over those seeds, \
             so it cannot also sweep the seed (drop `seeds`, or sweep something else)",
        ));
    }
    Ok(Some(seeds.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_cca::VariantId;

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
        // What is wrong goes with the value, what may stand there after "allowed".
        assert!(
            e.contains("(`newrenoo`: unknown congestion-control algorithm)")
                && e.contains("allowed: newreno, cubic"),
            "{e}"
        );
        let e = err(&BASE.replace("cca = \"newreno\"", "cca = \"taxed(newreno, tua=0.1)\""));
        assert!(
            e.contains("unknown parameter `tua`") && e.contains("allowed: tau,"),
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

    #[test]
    fn seeds_replicate_points_and_are_checked() {
        assert_eq!(parse_plan(BASE).unwrap().seeds, None);
        let p = parse_plan(&format!("seeds = [3, 1, 2]\n{BASE}")).unwrap();
        assert_eq!(p.seeds, Some(vec![3, 1, 2]));
        assert_eq!(p.run_count(), 3);
        let e = err(&format!("seeds = []\n{BASE}"));
        assert!(e.contains("`seeds`") && e.contains("1 ..="), "{e}");
        let e = err(&format!("seeds = [1, 2, 1]\n{BASE}"));
        assert!(
            e.contains("`seeds`") && e.contains("1 appears twice"),
            "{e}"
        );
        let e = err(&format!(
            "seeds = [1, 2]\n{BASE}\n[sweep]\nparam = \"seed\"\nvalues = [1, 2]\n"
        ));
        assert!(e.contains("sweep.param") && e.contains("seeds"), "{e}");
        let mut p = parse_plan(BASE).unwrap();
        p.set_seed_count(4).unwrap();
        assert_eq!(p.seeds, Some(vec![1, 2, 3, 4]));
        assert!(p
            .set_seed_count(0)
            .unwrap_err()
            .to_string()
            .contains("--seeds 0"));
    }
}

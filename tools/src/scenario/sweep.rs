//! `[sweep]`: one resolved scenario per value of one parameter, made by
//! writing the value into the file's TOML table at the parameter's dotted
//! path and resolving the result like any other file.

use super::schema::{RawScenario, RawSweep};
use super::{resolve, Scenario, ScenarioError};

/// Every point of a sweep, checked; errors name the value (`sweep.values[i]`).
pub(super) fn expand(value: &toml::Table, sweep: &RawSweep) -> anyhow::Result<Vec<Scenario>> {
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
    Ok(runs)
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

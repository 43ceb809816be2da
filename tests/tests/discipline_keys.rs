//! Every discipline key documented in `router/README.md` is accepted by both
//! front ends, `tollgate sim` (a scenario's `[router]` table) and
//! `tollgate-router` (a `router.toml` egress table), and means the same thing
//! there: the two resolve to equal `DisciplineConfig`s. And every key the
//! library accepts is documented.
//!
//! The README's key tables are the input: each row's `example` value is what
//! is written into both files.

use std::collections::BTreeSet;

use tollgate_dataplane::config::RouterConfig;
use tollgate_router::{DisciplineConfig, DisciplineKeys};

const README: &str = include_str!("../../router/README.md");

/// `(discipline, key, example)` for every documented key. CHOKe documents
/// "RED's keys", so it gets RED's rows.
fn documented() -> Vec<(String, String, String)> {
    let section = README
        .split("## Configuration: one shape for every front end")
        .nth(1)
        .expect("router/README.md has the configuration section");
    let section = section.split("\n## ").next().unwrap();
    let mut rows = Vec::new();
    let mut discipline = None;
    let mut example_col = None;
    for line in section.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            discipline = h
                .split("discipline = \"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .map(str::to_string);
            example_col = None;
            continue;
        }
        let Some(d) = &discipline else { continue };
        if !line.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells[0] == "key" {
            example_col = cells.iter().position(|c| *c == "example");
            continue;
        }
        let (Some(col), Some(key)) = (
            example_col,
            cells[0].strip_prefix('`').and_then(|k| k.strip_suffix('`')),
        ) else {
            continue;
        };
        let example = cells[col].trim_matches('`').to_string();
        rows.push((d.clone(), key.to_string(), example));
    }
    let red: Vec<_> = rows.iter().filter(|r| r.0 == "red").cloned().collect();
    rows.extend(red.into_iter().map(|(_, k, e)| ("choke".to_string(), k, e)));
    rows
}

/// The keys the library accepts for `discipline`, from its own error message.
fn accepted(discipline: &str) -> BTreeSet<String> {
    let table: toml::Table =
        toml::from_str(&format!("discipline = \"{discipline}\"\nno_such_key = 1")).unwrap();
    let err = DisciplineKeys::from_table(table).unwrap_err();
    let list = err
        .split("expected one of")
        .nth(1)
        .unwrap_or_else(|| panic!("{err}"));
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The packet-limit key of each discipline, and the byte/BDP ones.
fn limit_key(discipline: &str) -> &'static str {
    match discipline {
        "cebinae" => "max_size",
        "rrmqs" => "main_limit",
        _ => "limit",
    }
}

/// Keys that only make sense with a companion key.
fn companion(key: &str) -> &'static str {
    match key {
        "limit_bdp" => "rtt = \"100ms\"",
        "rtt" => "limit_bdp = 0.5",
        _ => "",
    }
}

fn via_sim(discipline: &str, keys: &str, buffer: &str) -> Result<DisciplineConfig, String> {
    let text = format!(
        "name = \"keys\"\nduration = \"5s\"\n[topology]\nkind = \"dumbbell\"\n\
         bottleneck = {{ rate = \"100Mbit\", delay = \"5ms\", buffer = \"{buffer}\" }}\n\
         [router]\ndiscipline = \"{discipline}\"\n{keys}\n\
         [[flows]]\ncca = \"newreno\"\nrtt = \"20ms\"\n"
    );
    let plan = tollgate_tools::scenario::parse_plan(&text).map_err(|e| format!("{e:#}"))?;
    Ok(plan.runs[0].router.discipline_config.clone().unwrap())
}

fn via_router(discipline: &str, keys: &str) -> Result<DisciplineConfig, String> {
    let text = format!(
        "[[ports]]\ndevice = \"net_null0\"\npeer = \"net_null1\"\n[ports.egress]\n\
         rate = \"100Mbit\"\ndiscipline = \"{discipline}\"\n{keys}\n\
         [[ports]]\ndevice = \"net_null1\"\npeer = \"net_null0\"\n"
    );
    let config = RouterConfig::parse(&text).map_err(|e| e.to_string())?;
    let plan = config.ports[0].egress.build(10e9)?;
    Ok(plan.discipline)
}

#[test]
fn every_library_key_is_documented_and_every_documented_key_exists() {
    let rows = documented();
    for d in tollgate_router::discipline_config::DISCIPLINE_NAMES {
        let doc: BTreeSet<String> = rows
            .iter()
            .filter(|r| r.0 == d)
            .map(|r| r.1.clone())
            .collect();
        assert!(!doc.is_empty(), "router/README.md documents no key of {d}");
        assert_eq!(
            doc,
            accepted(d),
            "{d}: documented keys (left) differ from the keys the library accepts (right)"
        );
    }
}

#[test]
fn every_documented_key_means_the_same_in_sim_and_router() {
    let rows = documented();
    assert!(rows.len() > 40, "only {} rows found", rows.len());
    for (d, key, example) in rows {
        let keys = format!("{key} = {example}\n{}", companion(&key));
        let limit = limit_key(&d);
        let is_limit = [
            "limit",
            "limit_bytes",
            "limit_bdp",
            "rtt",
            "max_size",
            "main_limit",
        ]
        .contains(&key.as_str());
        let router = via_router(
            &d,
            &if is_limit {
                keys.clone()
            } else {
                format!("{keys}\n{limit} = 1000")
            },
        )
        .unwrap_or_else(|e| panic!("tollgate-router refuses {d} `{key} = {example}`: {e}"));
        if !is_limit {
            let sim = via_sim(&d, &keys, "1000pkt")
                .unwrap_or_else(|e| panic!("tollgate sim refuses {d} `{key} = {example}`: {e}"));
            assert_eq!(
                sim, router,
                "{d} `{key} = {example}` differs between sim and router"
            );
            continue;
        }
        // A scenario's queue limit is its topology's buffer: the key is
        // refused there, pointing at the buffer, which means the same.
        let e = via_sim(&d, &keys, "1000pkt").unwrap_err();
        // (`rtt` comes with `limit_bdp`, which is the key refused first.)
        let named = if key == "rtt" { "limit_bdp" } else { &key };
        assert!(
            e.contains("topology.bottleneck.buffer") && e.contains(named),
            "{d} `{key}` in a scenario: {e}"
        );
        if key == limit {
            let sim = via_sim(&d, "", &format!("{example}pkt")).unwrap();
            assert_eq!(
                sim, router,
                "{d}: buffer = {example}pkt vs `{key} = {example}`"
            );
        }
    }
}

#[test]
fn a_misspelt_key_is_refused_by_both_naming_it() {
    let e = via_sim("rrmqs", "probability = 0.2", "1000pkt").unwrap_err();
    assert!(
        e.contains("probability") && e.contains("rrmqs_probability"),
        "{e}"
    );
    let e = via_router("rrmqs", "probability = 0.2").unwrap_err();
    assert!(
        e.contains("probability") && e.contains("rrmqs_probability"),
        "{e}"
    );
    let e = via_router("red", "min_thresh = 3").unwrap_err();
    assert!(e.contains("min_thresh") && e.contains("min_th"), "{e}");
}

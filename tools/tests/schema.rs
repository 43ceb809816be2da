//! What the commands write matches the checked-in JSON Schemas of
//! `docs/schema/`: `tollgate sim` (with two seeds, so it also merges a
//! `campaign.json`) and `tollgate compare`, validated with every object of
//! the schema closed, so a key the schema does not describe fails too.
//!
//! `src/generated_docs.rs` checks that the schemas are the ones the types
//! generate; this test checks the types are the ones the commands write.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Cebinae, a Libra flow (its capacity estimate), a sized flow (its
/// completion time), two seeds (campaign.json): 3 s at 20 Mbit/s.
const CEBINAE: &str = r#"
name = "schema-cebinae"
duration = "3s"
seeds = [1, 2]
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "1bdp" }
[router]
discipline = "cebinae"
[[flows]]
name = "libra"
cca = "libra"
rtt = "10ms"
[[flows]]
name = "reno"
cca = "newreno"
rtt = "40ms"
[[flows]]
name = "short"
cca = "cubic"
rtt = "20ms"
size = "100kB"
start = "0.5s"
[metrics]
measure_from = "1s"
"#;

/// RRMQS (its measurement windows), one seed.
const RRMQS: &str = r#"
name = "schema-rrmqs"
duration = "3s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "200pkt" }
[router]
discipline = "rrmqs"
variants = ["newreno", "cubic"]
[[flows]]
name = "newreno"
count = 2
cca = "newreno"
rtt = "20ms"
[[flows]]
name = "cubic"
count = 2
cca = "cubic"
rtt = "20ms"
[metrics]
measure_from = "1s"
"#;

fn tollgate(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tollgate {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `schema` with `additionalProperties: false` on every object schema that
/// lists its properties and says nothing about others.
fn closed(mut schema: Value) -> Value {
    fn close(v: &mut Value) {
        match v {
            Value::Object(map) => {
                if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                    map.insert("additionalProperties".into(), Value::Bool(false));
                }
                map.values_mut().for_each(close);
            }
            Value::Array(items) => items.iter_mut().for_each(close),
            _ => {}
        }
    }
    close(&mut schema);
    schema
}

/// Panic with every place `file` breaks `docs/schema/<schema>`.
fn validate(schema: &str, file: &Path) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schema")
        .join(schema);
    let validator = jsonschema::validator_for(&closed(read(&path))).unwrap();
    let instance = read(file);
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| {
            let at = e.instance_path().to_string();
            format!("  at {}: {e}", if at.is_empty() { "the top" } else { &at })
        })
        .collect();
    assert!(
        errors.is_empty(),
        "{} does not match docs/schema/{schema}:\n{}\n(a changed results type: regenerate the \
         schemas, see docs/generated.md)",
        file.display(),
        errors.join("\n")
    );
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-schema-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn what_sim_campaign_and_compare_write_matches_the_schemas() {
    let dir = scratch();
    let out = dir.join("results");
    for (name, text) in [("cebinae.toml", CEBINAE), ("rrmqs.toml", RRMQS)] {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        tollgate(&[
            "sim",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--no-plots",
            "-q",
        ]);
    }
    let seeds = out.join("schema-cebinae/default");
    let rrmqs = out.join("schema-rrmqs/results.json");
    let runs = [
        seeds.join("seed-1/results.json"),
        seeds.join("seed-2/results.json"),
        rrmqs.clone(),
    ];
    for run in &runs {
        validate("results.schema.json", run);
    }
    // The runs hold what the schema must describe: Cebinae's and Libra's
    // series, a completion time, RRMQS windows.
    let r = read(&runs[0]);
    assert!(!r["series"]["cebinae_top_rate_mbps"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(r["series"]["flow_capacity_mbps"].is_array(), "{r}");
    assert!(
        r["flows"][2]["completion_s"].is_number(),
        "{}",
        r["flows"][2]
    );
    assert!(read(&rrmqs)["rrmqs"]["windows"][0].is_object());

    validate(
        "campaign.schema.json",
        &out.join("schema-cebinae/campaign.json"),
    );

    let cmp = dir.join("cmp");
    tollgate(&[
        "compare",
        runs[0].to_str().unwrap(),
        runs[1].to_str().unwrap(),
        "--out",
        cmp.to_str().unwrap(),
        "--no-plots",
        "-q",
    ]);
    validate("compare.schema.json", &cmp.join("compare.json"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_key_the_schema_does_not_describe_fails() {
    let schema = closed(serde_json::json!({
        "type": "object",
        "properties": { "a": { "type": "number" } }
    }));
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&serde_json::json!({ "a": 1.0 })));
    assert!(!validator.is_valid(&serde_json::json!({ "a": 1.0, "b": 2 })));
}

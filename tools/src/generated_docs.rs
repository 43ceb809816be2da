//! The generated reference under `docs/`, checked against the code:
//!
//! - `docs/man/`: man pages of `tollgate` and each of its subcommands,
//!   `tollgate-router` and `tollgate-dpdk-bench`, from their clap definitions
//!   (`clap_mangen`);
//! - `docs/schema/`: JSON Schemas (draft 2020-12) of `results.json`,
//!   `campaign.json` and `compare.json`, from the Rust types that write them
//!   (`schemars`; the fields' doc comments are the descriptions).
//!
//! The tests fail when a checked-in file differs from what the code
//! generates, or when a checked-in file is no longer generated. With
//! `TOLLGATE_REGENERATE=1` they write the files instead ([`REGENERATE`]).
//! `tests/schema.rs` validates what the commands write against the
//! checked-in schemas.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

/// The one command that rewrites `docs/man/` and `docs/schema/`.
const REGENERATE: &str =
    "TOLLGATE_REGENERATE=1 cargo test -p tollgate-tools --bin tollgate generated_docs";

/// Generated files by name.
type Files = BTreeMap<String, String>;

/// The repository's `docs/` directory.
fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

/// The version the man pages carry: the package's, without the git
/// revision `--version` may add, so the pages do not change with every
/// commit.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every man page: `tollgate.1`, `tollgate-<sub>.1` (and
/// `tollgate-<sub>-<subsub>.1`) for each visible subcommand,
/// `tollgate-router.1`, `tollgate-dpdk-bench.1`.
fn man_pages() -> Files {
    let mut pages = Files::new();
    for cmd in [
        super::Cli::command(),
        tollgate_dataplane::cli::Args::command(),
        tollgate_dpdk_bench::cli::Opts::command(),
    ] {
        let mut cmd = cmd
            .version(VERSION)
            .long_version(None::<&str>)
            .disable_help_subcommand(true);
        cmd.build();
        add_pages(&mut pages, cmd);
    }
    pages
}

fn add_pages(pages: &mut Files, cmd: clap::Command) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        add_pages(pages, sub.clone());
    }
    let man = clap_mangen::Man::new(cmd)
        .source(format!("Tollgate {VERSION}"))
        .manual("Tollgate manual");
    let mut text = Vec::new();
    man.render(&mut text).expect("render a man page");
    pages.insert(
        man.get_filename(),
        String::from_utf8(text).expect("man pages are UTF-8"),
    );
}

/// A JSON Schema as checked in: pretty-printed, a newline at the end, the
/// file's name as its title, the descriptions as a reader of the JSON
/// wants them ([`description`]).
fn schema_text(file: &str, mut schema: schemars::Schema) -> String {
    schema.insert("title".into(), file.into());
    let mut value = schema.to_value();
    descriptions(&mut value);
    serde_json::to_string_pretty(&sorted(value)).expect("a schema serializes") + "\n"
}

/// `value` with the keys of every object in sorted order, whether or not
/// serde_json preserves insertion order in this build.
fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.cmp(b));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(items) => items.into_iter().map(sorted).collect(),
        other => other,
    }
}

/// A schema file as compared: parsed and printed again with sorted keys,
/// so only its content counts (the text itself when it is not JSON).
fn canonical_json(text: &str) -> String {
    serde_json::from_str(text)
        .map(|value| serde_json::to_string_pretty(&sorted(value)).expect("JSON serializes"))
        .unwrap_or_else(|_| text.to_string())
}

/// Every `description` in `value` rewritten by [`description`].
fn descriptions(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    serde_json::Value::String(text) if key == "description" => {
                        *text = description(text);
                    }
                    _ => descriptions(v),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(descriptions),
        _ => {}
    }
}

/// A field's doc comment as a description of JSON: lines of a paragraph
/// joined, rustdoc links as plain code, Rust's `None` as JSON's `null`.
fn description(doc: &str) -> String {
    doc.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
        .replace("[`", "`")
        .replace("`]", "`")
        .replace("`None`", "`null`")
}

/// Every results schema: `results.schema.json` for `results.json`, ...
fn schemas() -> Files {
    [
        (
            "results.json",
            schemars::schema_for!(tollgate_tools::results::Results),
        ),
        (
            "campaign.json",
            schemars::schema_for!(tollgate_tools::campaign::Merged),
        ),
        (
            "compare.json",
            schemars::schema_for!(tollgate_tools::compare::Comparison),
        ),
    ]
    .into_iter()
    .map(|(file, schema)| {
        let stem = file.trim_end_matches(".json");
        (format!("{stem}.schema.json"), schema_text(file, schema))
    })
    .collect()
}

/// A man page without the lines that carry the version (`.TH` and the
/// VERSION section), so a version or revision change alone is no drift.
fn without_version(page: &str) -> String {
    let mut out = Vec::new();
    let mut in_version = false;
    for line in page.lines() {
        if line.starts_with(".TH ") {
            continue;
        }
        if line.starts_with(".SH ") {
            in_version = line == ".SH VERSION";
        }
        if !in_version {
            out.push(line);
        }
    }
    out.join("\n")
}

/// Write `generated` into `dir` (removing files matching `suffix` that are
/// no longer generated) under `TOLLGATE_REGENERATE=1`; otherwise panic with
/// every difference between `dir` and `generated`, compared through
/// `normalise`.
fn check_or_write(dir: &Path, suffix: &str, generated: &Files, normalise: fn(&str) -> String) {
    let checked_in: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(suffix))
                .collect()
        })
        .unwrap_or_default();
    let shown = |name: &str| format!("docs/{}/{name}", dir.file_name().unwrap().to_string_lossy());
    if std::env::var_os("TOLLGATE_REGENERATE").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(dir).unwrap();
        for name in checked_in.iter().filter(|n| !generated.contains_key(*n)) {
            std::fs::remove_file(dir.join(name)).unwrap();
            eprintln!("removed {}", shown(name));
        }
        for (name, text) in generated {
            let path = dir.join(name);
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                std::fs::write(&path, text).unwrap();
                eprintln!("wrote {}", shown(name));
            }
        }
        return;
    }
    let mut problems = Vec::new();
    for name in checked_in.iter().filter(|n| !generated.contains_key(*n)) {
        problems.push(format!("{} is no longer generated", shown(name)));
    }
    for (name, text) in generated {
        match std::fs::read_to_string(dir.join(name)) {
            Err(_) => problems.push(format!("{} is missing", shown(name))),
            Ok(old) => {
                let (old, new) = (normalise(&old), normalise(text));
                if old != new {
                    let (k, (was, is)) = old
                        .lines()
                        .chain(std::iter::repeat(""))
                        .zip(new.lines().chain(std::iter::repeat("")))
                        .enumerate()
                        .find(|(_, (a, b))| a != b)
                        .unwrap_or((0, ("", "")));
                    problems.push(format!(
                        "{} differs from what the code generates; first at line {}:\n    \
                         checked in: {was}\n    generated:  {is}",
                        shown(name),
                        k + 1
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n\nRegenerate with:\n    {REGENERATE}\nand commit the result.",
        problems.join("\n")
    );
}

#[test]
fn man_pages_match_the_clap_definitions() {
    let pages = man_pages();
    for name in [
        "tollgate.1",
        "tollgate-sim.1",
        "tollgate-campaign-run.1",
        "tollgate-router.1",
        "tollgate-dpdk-bench.1",
    ] {
        assert!(pages.contains_key(name), "{name} not generated");
    }
    check_or_write(&docs().join("man"), ".1", &pages, without_version);
}

#[test]
fn schemas_match_the_types() {
    check_or_write(
        &docs().join("schema"),
        ".schema.json",
        &schemas(),
        canonical_json,
    );
}

#[test]
fn descriptions_read_as_json() {
    assert_eq!(
        description("Smoothed RTT,\nms (`None`: see [`Results::x`]).\n\nMore."),
        "Smoothed RTT, ms (`null`: see `Results::x`).\n\nMore."
    );
}

#[test]
fn a_version_change_alone_is_no_drift() {
    let page = ".TH tollgate 1  \"tollgate 0.1.0\" Tollgate\n.SH NAME\ntollgate\n\
                .SH VERSION\nv0.1.0\n.SH AUTHORS\nx\n";
    let other = page.replace("0.1.0", "0.1.0 (abc1234)");
    assert_ne!(page, other);
    assert_eq!(without_version(page), without_version(&other));
    assert!(without_version(page).contains(".SH AUTHORS\nx"));
}

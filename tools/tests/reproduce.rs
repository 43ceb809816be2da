//! `tollgate reproduce`: every shipped experiment end to end in --quick mode
//! (the report must hold every manifest row with its numbers and a verdict
//! that follows from them), a fixture experiment whose verdicts are known,
//! resuming, and manifest errors that name the field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tollgate")
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-reproduce-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/reproduce")
}

/// `<out>/reproduce.json`.
fn report_json(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("reproduce.json")).unwrap()).unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Check one report row: its seeds all ran, and its verdict is what its
/// interval and band say (the rules of `tollgate_tools::reproduce::verdict`,
/// restated here from the report's own numbers).
fn check_row(exp: &str, row: &Value, seeds: u64) {
    let label = row["label"].as_str().unwrap();
    let what = format!("{exp}: {label}");
    assert_eq!(row["missing"].as_u64(), Some(0), "{what}: runs missing");
    assert_eq!(
        row["values"].as_array().unwrap().len() as u64,
        seeds,
        "{what}: one value per seed"
    );
    let verdict = row["verdict"].as_str().unwrap();
    let (lo_p, hi_p) = match &row["published"] {
        Value::Null => {
            assert_eq!(verdict, "measured", "{what}");
            return;
        }
        Value::Array(r) => (r[0].as_f64().unwrap(), r[1].as_f64().unwrap()),
        v => (v.as_f64().unwrap(), v.as_f64().unwrap()),
    };
    if verdict == "not_measurable" {
        let limit = row["limit"].as_f64().unwrap();
        assert!(
            hi_p < limit || lo_p > limit,
            "{what}: published {lo_p}-{hi_p} is within the limit {limit}"
        );
        return;
    }
    let Some(mean) = row["ours"]["mean"].as_f64() else {
        assert_eq!(verdict, "no_data", "{what}");
        return;
    };
    let band = row["band"].as_array().unwrap();
    let (lo, hi) = (band[0].as_f64().unwrap(), band[1].as_f64().unwrap());
    assert!(lo <= lo_p && hi >= hi_p, "{what}: band {lo}-{hi}");
    let (Some(ci_lo), Some(ci_hi)) = (
        row["ours"]["ci95_low"].as_f64(),
        row["ours"]["ci95_high"].as_f64(),
    ) else {
        assert_eq!(verdict, "inconclusive", "{what}: one value");
        return;
    };
    // The report cuts the interval at the metric's floor and ceiling (which
    // the mean cannot pass), so a reported interval reaching past a band's
    // edge at 1.0 may still reproduce; one wholly outside never does.
    let inside = ci_lo >= lo - 1e-12 && ci_hi <= hi + 1e-12;
    let outside = ci_hi < lo - 1e-12 || ci_lo > hi + 1e-12;
    match verdict {
        "reproduced" => assert!(!outside, "{what}: {ci_lo}-{ci_hi} outside {lo}-{hi}"),
        "inconclusive" => assert!(!inside && !outside, "{what}: {ci_lo}-{ci_hi}, {lo}-{hi}"),
        "differs" => {
            assert!(
                outside,
                "{what}: differs with {ci_lo}-{ci_hi} touching {lo}-{hi}"
            );
            let by = row["by"].as_f64().unwrap();
            let d = if mean < lo_p {
                lo_p - mean
            } else {
                mean - hi_p
            };
            assert!((by.abs() - d).abs() < 1e-9, "{what}: by {by} vs {d}");
        }
        other => panic!("{what}: verdict {other} with values"),
    }
    if inside {
        assert_eq!(
            verdict, "reproduced",
            "{what}: {ci_lo}-{ci_hi} in {lo}-{hi}"
        );
    }
}

#[test]
fn every_shipped_experiment_runs_quick_and_its_report_follows_from_the_numbers() {
    let dir = scratch("all");
    let out = dir.join("out");
    let o = run(&[
        "reproduce",
        "--all",
        "--quick",
        "--no-plots",
        "--out",
        out.to_str().unwrap(),
        "--experiments",
        shipped().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report = report_json(&out);
    let md = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    let exps = report["experiments"].as_array().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(shipped())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("experiment.toml").is_file())
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    names.sort();
    let got: Vec<&str> = exps.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(got, names, "every shipped experiment is in the report");
    for e in exps {
        let name = e["name"].as_str().unwrap();
        let manifest: toml::Table = toml::from_str(
            &std::fs::read_to_string(shipped().join(name).join("experiment.toml")).unwrap(),
        )
        .unwrap();
        let rows = e["rows"].as_array().unwrap();
        assert_eq!(
            rows.len(),
            manifest["rows"].as_array().unwrap().len(),
            "{name}: every manifest row is reported"
        );
        let seeds = e["seeds"].as_u64().unwrap();
        for row in rows {
            check_row(name, row, seeds);
            assert!(
                md.contains(row["label"].as_str().unwrap()),
                "REPORT.md lacks {name}: {}",
                row["label"]
            );
        }
        assert!(md.contains(&format!("## {name}")), "REPORT.md lacks {name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

const TWIN: &str = r#"
name = "twin"
duration = "8s"
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "1bdp" }
[[flows]]
name = "a"
cca = "newreno"
rtt = "20ms"
[[flows]]
name = "b"
cca = "newreno"
rtt = "20ms"
[metrics]
measure_from = "3s"
"#;

const MANIFEST: &str = r#"
title = "fixture"
source = "this test"
seeds = 2
[[rows]]
label = "equal flows are fair"
scenario = "twin.toml"
metric = "jain"
published = [0.9, 1.0]
tolerance = 0.0
[[rows]]
label = "a claim that cannot hold"
scenario = "twin.toml"
metric = "jain(a, b)"
published = 0.5
tolerance = 0.01
[[rows]]
label = "goodput against itself"
scenario = "twin.toml"
baseline = "twin.toml"
metric = "sum(a, b)"
published = 1.0
tolerance = 1e-9
[[rows]]
label = "a time below the metric's floor"
scenario = "twin.toml"
metric = "time_to_target_s"
published = 0.1
tolerance = 1.0
[[rows]]
label = "measured only"
scenario = "twin.toml"
metric = "group.a.goodput_mbps / group.b.goodput_mbps"
"#;

fn fixture(dir: &Path, manifest: &str) -> PathBuf {
    let exps = dir.join("experiments");
    let e = exps.join("fixture");
    std::fs::create_dir_all(&e).unwrap();
    std::fs::write(e.join("twin.toml"), TWIN).unwrap();
    std::fs::write(e.join("experiment.toml"), manifest).unwrap();
    exps
}

#[test]
fn a_fixture_experiment_gets_the_verdicts_its_numbers_imply_and_resumes() {
    let dir = scratch("fixture");
    let exps = fixture(&dir, MANIFEST);
    let out = dir.join("out");
    let args = [
        "reproduce",
        "fixture",
        "--out",
        out.to_str().unwrap(),
        "--experiments",
        exps.to_str().unwrap(),
    ];
    let mut only = args.to_vec();
    only.push("--report-only");

    // --report-only before any run: no run starts, every row is missing
    // both seeds (of its scenario and of its baseline, if it has one) and a
    // published row has no data.
    let o = run(&only);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("2 of 2 runs not finished are left out"),
        "{}",
        text(&o)
    );
    let empty = report_json(&out);
    for r in empty["experiments"][0]["rows"].as_array().unwrap() {
        let with_baseline = r["metric"].as_str().unwrap().contains("÷ same in");
        let seeds = if with_baseline { 4 } else { 2 };
        assert_eq!(r["missing"].as_u64(), Some(seeds), "{r}");
        if !r["published"].is_null() {
            // A value beyond the metric's floor needs no runs to say so.
            let expect = if r["label"].as_str().unwrap().contains("floor") {
                "not_measurable"
            } else {
                "no_data"
            };
            assert_eq!(r["verdict"].as_str(), Some(expect), "{r}");
        }
    }
    for seed in ["seed-1", "seed-2"] {
        let res = out
            .join("fixture/twin/default")
            .join(seed)
            .join("results.json");
        assert!(!res.exists(), "--report-only ran {}", res.display());
    }

    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    let json = std::fs::read_to_string(out.join("reproduce.json")).unwrap();
    let report: Value = serde_json::from_str(&json).unwrap();
    let rows = report["experiments"][0]["rows"].as_array().unwrap();
    let verdicts: Vec<&str> = rows
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        [
            "reproduced",
            "differs",
            "reproduced",
            "not_measurable",
            "measured"
        ],
        "{json}"
    );
    for r in rows {
        check_row("fixture", r, 2);
    }
    assert!(rows[1]["by"].as_f64().unwrap() > 0.3, "{json}");
    assert_eq!(rows[2]["ours"]["mean"].as_f64(), Some(1.0));
    // A time measured in 1-s windows is at least 1 s: the published 0.1 s
    // with a tolerance of ±1 would pass every run under a rule on the mean.
    assert_eq!(rows[3]["limit"].as_f64(), Some(1.0), "{json}");
    assert_eq!(report["reproduced"].as_u64(), Some(2));
    assert_eq!(report["differs_unexplained"].as_u64(), Some(1));
    assert_eq!(report["not_measurable"].as_u64(), Some(1));
    assert!(out.join("fixture/rows.svg").is_file(), "the report plot");
    assert!(out.join("fixture/twin/campaign.json").is_file());
    let md = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(
        md.contains("**2 reproduced, 0 inconclusive, 1 differ** (0 explained, 1 unexplained)"),
        "{md}"
    );
    assert!(
        md.contains("A row is **reproduced** when the whole interval"),
        "{md}"
    );
    // Rows, reproduced, inconclusive, differ explained / unexplained, not
    // measurable, no data, measured.
    assert!(
        md.contains("| [fixture](#fixture) | 5 | 2 | 0 | 0 | 1 | 1 | 0 | 1 |"),
        "{md}"
    );

    // Again: nothing left to run, the same numbers.
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("2 already finished, 0 to run"),
        "{}",
        text(&o)
    );
    let again = report_json(&out);
    assert_eq!(again["experiments"], report["experiments"]);
    // --report-only now: the same report, nothing said missing.
    let o = run(&only);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("left out"), "{}", text(&o));
    let from_disk = report_json(&out);
    assert_eq!(from_disk["experiments"], report["experiments"]);

    // Other seeds for the same --out: refused, the results kept.
    let mut more = args.to_vec();
    more.extend(["--seeds", "3"]);
    let o = run(&more);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("another\n--out") || text(&o).contains("--out"),
        "{}",
        text(&o)
    );
    assert!(out.join("fixture/twin/campaign.json").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_manifests_and_names_are_refused_with_the_field_and_the_fix() {
    let dir = scratch("bad");
    let cases = [
        (
            MANIFEST.replace("tolerance = 0.01\n", ""),
            "rows[1].tolerance: missing",
        ),
        (
            MANIFEST.replace("metric = \"jain(a, b)\"", "metric = \"jfi\""),
            "rows[1].metric: \"jfi\": unknown",
        ),
        (
            MANIFEST.replace(
                "scenario = \"twin.toml\"\nmetric = \"jain\"",
                "scenario = \"nope.toml\"\nmetric = \"jain\"",
            ),
            "rows[0].scenario: cannot read",
        ),
        (
            MANIFEST.replace(
                "metric = \"jain\"",
                "metric = \"jain\"\npoint = \"router.tau=0.1\"",
            ),
            "rows[0].point",
        ),
        (
            MANIFEST.replace("seeds = 2\n", "seeds = 2\nquick = { seeds = 0 }\n"),
            "quick.seeds = 0",
        ),
        (
            MANIFEST.replace("tolerance = 0.01\n", "tolerance = \"0.8x\"\n"),
            "rows[1].tolerance: \"0.8x\": a factor either way is at least 1",
        ),
        (
            MANIFEST.replace(
                "metric = \"group.a.goodput_mbps / group.b.goodput_mbps\"",
                "metric = \"group.a.goodput_mbps / group.b.goodput_mbps\"\nevidence = \"x\"",
            ),
            "rows[4].evidence: given without `published`",
        ),
    ];
    for (i, (manifest, want)) in cases.iter().enumerate() {
        let sub = dir.join(format!("case{i}"));
        let exps = fixture(&sub, manifest);
        let o = run(&[
            "reproduce",
            "--all",
            "--out",
            sub.join("out").to_str().unwrap(),
            "--experiments",
            exps.to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "case {i} accepted");
        assert!(
            text(&o).contains(want),
            "case {i}: want {want:?} in {}",
            text(&o)
        );
        assert!(!sub.join("out").exists(), "case {i}: nothing written");
    }
    let exps = fixture(&dir.join("ok"), MANIFEST);
    let o = run(&[
        "reproduce",
        "nosuch",
        "--experiments",
        exps.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("no experiment `nosuch`; known: fixture"),
        "{}",
        text(&o)
    );
    let o = run(&["reproduce", "--experiments", exps.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--all"), "{}", text(&o));
    let o = run(&[
        "reproduce",
        "--list",
        "--experiments",
        exps.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(
        text(&o).contains("fixture") && text(&o).contains("5"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tollgate reproduce --all EXTRA --out OUT --experiments EXPS`.
fn all_in(exps: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["reproduce", "--all"];
    args.extend_from_slice(extra);
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend(["--experiments", exps.to_str().unwrap()]);
    run(&args)
}

#[test]
fn values_from_an_earlier_report_are_judged_again_by_the_rules() {
    // An earlier report's values: a row whose mean sits inside the band
    // with an interval far wider than it (the shape the old rule, a mean
    // within the tolerance, passed), and a row with a tight interval.
    let dir = scratch("values-from");
    let exps = fixture(&dir, MANIFEST);
    let stored = serde_json::json!({
        "format": 1,
        "info": { "command": "tollgate reproduce fixture --seeds 5", "note": "five seeds" },
        "experiments": [{
            "name": "fixture",
            "seeds": 5,
            "rows": [
                { "scenario": "twin.toml", "point": null, "metric": "jain",
                  "values": [[1, 0.99], [2, 0.86], [3, 1.0], [4, 0.9], [5, 0.97]] },
                { "scenario": "twin.toml", "point": null, "metric": "jain(a, b)",
                  "values": [[1, 0.5], [2, 0.502], [3, 0.499], [4, 0.501], [5, 0.5]] }
            ]
        }]
    });
    let file = dir.join("earlier.json");
    std::fs::write(&file, stored.to_string()).unwrap();
    let out = dir.join("out");
    let o = all_in(
        &exps,
        &out,
        &["--no-plots", "--values-from", file.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report = report_json(&out);
    let rows = report["experiments"][0]["rows"].as_array().unwrap();
    // Mean 0.944 in [0.9, 1.0], interval 0.944 ± 0.072: crosses 0.9.
    assert_eq!(
        rows[0]["verdict"].as_str(),
        Some("inconclusive"),
        "{report}"
    );
    let n = rows[0]["seeds_needed"].as_u64().unwrap();
    assert!(n > 5, "{n}");
    assert_eq!(rows[1]["verdict"].as_str(), Some("reproduced"), "{report}");
    // Rows the earlier report did not hold have no data; nothing ran.
    assert_eq!(rows[2]["verdict"].as_str(), Some("no_data"));
    assert!(!out.join("fixture/twin").exists(), "a run started");
    let md = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(
        md.contains(
            "- fixture: 5 seeds per run, by `tollgate reproduce fixture --seeds 5`; five seeds"
        ),
        "{md}"
    );
    assert!(report["experiments"][0]["values"].as_str().is_some());
    assert!(
        md.contains(&format!("inconclusive (about {n} seeds would settle it)")),
        "{md}"
    );
    // Judging again with the report's own directory as --out: its plots do
    // not count as runs.
    let o = all_in(&exps, &out, &["--values-from", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("fixture/rows.svg").is_file());
    assert!(report_json(&out)["experiments"][0]["values"].is_string());
    // Once the experiment has runs under --out, they are what it reports.
    let o = all_in(&exps, &out, &["--no-plots"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = all_in(
        &exps,
        &out,
        &["--no-plots", "--values-from", file.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report = report_json(&out);
    let e = &report["experiments"][0];
    assert!(e["values"].is_null(), "{e}");
    assert_eq!(e["rows"][2]["verdict"].as_str(), Some("reproduced"), "{e}");
    assert_eq!(e["rows"][2]["values"].as_array().unwrap().len(), 2, "{e}");
    assert!(e["runs"].as_str().unwrap().ends_with("fixture"), "{e}");
    // That report judged again elsewhere names the runs it came from.
    let again = dir.join("again");
    let o = all_in(
        &exps,
        &again,
        &[
            "--no-plots",
            "--values-from",
            out.join("reproduce.json").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let e = &report_json(&again)["experiments"][0];
    let values = e["values"].as_str().unwrap();
    assert!(
        values.starts_with("2 seeds per run, the runs under `") && values.ends_with("fixture`"),
        "{values}"
    );
    assert_eq!(e["rows"][2]["verdict"].as_str(), Some("reproduced"), "{e}");
    // An experiment the file lacks, with no runs, is refused by name.
    let _ = std::fs::remove_dir_all(&out);
    std::fs::write(&file, r#"{"info":{"command":"x"},"experiments":[]}"#).unwrap();
    let o = run(&[
        "reproduce",
        "fixture",
        "--values-from",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--experiments",
        exps.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("no values for experiment `fixture`"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

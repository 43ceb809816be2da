//! Replicated seeds and campaigns through the `tollgate` binary: `sim
//! --seeds`, `sim --run-index`, `campaign plan|run|merge|slurm`, resuming,
//! refusing another file's directory, failed runs, missing runs.
//!
//! The scenario is small (2 flows, 2 s at 20 Mbit/s) so the suite stays
//! fast; `tests/slurm.rs` runs a campaign on a real Slurm cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_tollgate");

/// 2 sweep points (buffer) x 3 seeds.
fn campaign_file(duration: &str) -> String {
    format!(
        r#"
name = "camp"
duration = "{duration}"
seeds = [1, 2, 3]
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "20Mbit", delay = "2ms" }}
[[flows]]
name = "short"
cca = "newreno"
rtt = "10ms"
[[flows]]
name = "long"
cca = "newreno"
rtt = "60ms"
[metrics]
measure_from = "0.5s"
[sweep]
param = "topology.bottleneck.buffer"
values = ["0.5bdp", "1bdp"]
"#
    )
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-camp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tollgate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json(path: &Path) -> Value {
    let t = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&t).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const RUN_DIRS: [&str; 6] = [
    "topology.bottleneck.buffer=0.5bdp/seed-1",
    "topology.bottleneck.buffer=0.5bdp/seed-2",
    "topology.bottleneck.buffer=0.5bdp/seed-3",
    "topology.bottleneck.buffer=1bdp/seed-1",
    "topology.bottleneck.buffer=1bdp/seed-2",
    "topology.bottleneck.buffer=1bdp/seed-3",
];

/// `sim` with `seeds`: every point x seed runs into its own directory, and
/// the statistics printed and written are the mean and Student-t interval
/// of the per-run values.
#[test]
fn sim_with_seeds_reports_mean_and_confidence_interval_per_point() {
    let dir = temp_dir("seeds");
    let file = dir.join("c.toml");
    std::fs::write(&file, campaign_file("2s")).unwrap();
    let out = dir.join("results");
    let o = tollgate(&["sim", s(&file), "--out", s(&out), "--no-plots"]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let root = out.join("camp");
    for d in RUN_DIRS {
        assert!(root.join(d).join("results.json").exists(), "{d}");
    }
    assert!(
        stdout.contains("mean and 95 % confidence interval")
            && stdout.contains("topology.bottleneck.buffer=1bdp (3 of 3 runs)"),
        "{stdout}"
    );
    // The JSON's numbers are the statistics of the three runs' values.
    let merged = json(&root.join("campaign.json"));
    let jfi: Vec<f64> = RUN_DIRS[3..]
        .iter()
        .map(|d| {
            json(&root.join(d).join("results.json"))["summary"]["jain"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let mean = jfi.iter().sum::<f64>() / 3.0;
    let sd = (jfi.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    let m = &merged["points"][1]["metrics"]["jain"];
    assert_eq!(m["n"], 3);
    assert!((m["mean"].as_f64().unwrap() - mean).abs() < 1e-12);
    // t(0.975, 2) = 4.3027
    let half = 4.302_653 * sd / 3f64.sqrt();
    assert!(
        (m["half_width"].as_f64().unwrap() - half).abs() < 1e-6 * half.max(1.0),
        "{m}"
    );
    // The seeds make a difference (else the interval would say nothing).
    assert!(sd > 0.0, "three seeds gave the same JFI {jfi:?}");
    // Per-group goodput is among the metrics.
    assert!(merged["points"][0]["metrics"]["group.long.goodput_mbps"]["mean"].is_number());

    // --seeds N overrides the file: seeds 1..=2.
    let out2 = dir.join("results2");
    let o = tollgate(&[
        "sim",
        s(&file),
        "--out",
        s(&out2),
        "--no-plots",
        "--quiet",
        "--seeds",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let merged2 = json(&out2.join("camp/campaign.json"));
    assert_eq!(merged2["runs_planned"], 4);
    assert!(out2
        .join("camp/topology.bottleneck.buffer=1bdp/seed-2")
        .exists());
    assert!(!out2
        .join("camp/topology.bottleneck.buffer=1bdp/seed-3")
        .exists());
    // The same seed gives the same bytes in both layouts' runs.
    assert_eq!(
        std::fs::read(root.join(RUN_DIRS[4]).join("results.json")).unwrap(),
        std::fs::read(out2.join("camp").join(RUN_DIRS[4]).join("results.json")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file without `seed`/`seeds` behaves as before: one run per point, seed
/// 1, in `<out>/<name>/<point>/`.
#[test]
fn a_file_without_seeds_runs_as_before() {
    let dir = temp_dir("noseeds");
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        campaign_file("1s").replace("seeds = [1, 2, 3]\n", ""),
    )
    .unwrap();
    let out = dir.join("results");
    let o = tollgate(&["sim", s(&file), "--out", s(&out), "--no-plots", "-q"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let r = json(&out.join("camp/topology.bottleneck.buffer=1bdp/results.json"));
    assert_eq!(r["seed"], 1);
    assert!(out.join("camp/sweep.json").exists());
    assert!(!out.join("camp/campaign.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `campaign plan` lists the runs point-major, seed-minor; `sim --run-index`
/// runs exactly that one, byte-identical to the same run done by `campaign
/// run`; an index out of range names the valid range and writes nothing.
#[test]
fn plan_and_run_index_agree_and_out_of_range_is_an_error() {
    let dir = temp_dir("plan");
    let file = dir.join("c.toml");
    std::fs::write(&file, campaign_file("1s")).unwrap();
    let out = dir.join("results");
    let o = tollgate(&["campaign", "plan", s(&file), "--out", s(&out)]);
    let (stdout, _) = text(&o);
    assert!(o.status.success());
    let rows: Vec<&str> = stdout.lines().skip(2).collect();
    assert_eq!(rows.len(), 6, "{stdout}");
    assert!(
        rows[4].trim_start().starts_with("4 ")
            && rows[4].contains("buffer=1bdp")
            && rows[4].contains(" 2 ")
            && rows[4].contains(RUN_DIRS[4]),
        "{stdout}"
    );
    assert!(!out.exists(), "plan writes nothing");

    let o = tollgate(&[
        "sim",
        s(&file),
        "--out",
        s(&out),
        "--run-index",
        "6",
        "--no-plots",
    ]);
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(
        stderr.contains("--run-index 6") && stderr.contains("0..=5"),
        "{stderr}"
    );
    assert!(!out.exists(), "an index out of range writes nothing");

    let o = tollgate(&[
        "sim",
        s(&file),
        "--out",
        s(&out),
        "--run-index",
        "4",
        "--no-plots",
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let root = out.join("camp");
    let entries = |p: &Path| std::fs::read_dir(p).map_or(0, |d| d.count());
    assert_eq!(entries(&root.join("topology.bottleneck.buffer=1bdp")), 1);
    assert_eq!(entries(&root.join("topology.bottleneck.buffer=0.5bdp")), 0);
    let r = json(&root.join(RUN_DIRS[4]).join("results.json"));
    assert_eq!(r["seed"], 2);
    assert_eq!(r["sweep_point"], "topology.bottleneck.buffer=1bdp");
    let one = std::fs::read(root.join(RUN_DIRS[4]).join("results.json")).unwrap();

    let out2 = dir.join("results2");
    let o = tollgate(&[
        "campaign",
        "run",
        s(&file),
        "--out",
        s(&out2),
        "-j",
        "2",
        "--no-plots",
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let again = std::fs::read(out2.join("camp").join(RUN_DIRS[4]).join("results.json")).unwrap();
    assert!(
        one == again,
        "run 4 differs between --run-index and campaign run"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// After an interrupted first attempt (one run deleted, one marked partial,
/// one cut short), `campaign run -j 2` runs exactly those three, leaves the
/// finished ones untouched, and ends with the same bytes as a clean run.
#[test]
fn campaign_run_resumes_only_the_unfinished_runs() {
    let dir = temp_dir("resume");
    let file = dir.join("c.toml");
    std::fs::write(&file, campaign_file("1s")).unwrap();
    let out = dir.join("results");
    let args = [
        "campaign",
        "run",
        s(&file),
        "--out",
        s(&out),
        "-j",
        "2",
        "--no-plots",
    ];
    let o = tollgate(&args);
    let (_, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("6 runs, 0 already finished, 6 to run"),
        "{stderr}"
    );
    let root = out.join("camp");
    let merged = std::fs::read(root.join("campaign.json")).unwrap();
    let original: Vec<Vec<u8>> = RUN_DIRS
        .iter()
        .map(|d| std::fs::read(root.join(d).join("results.json")).unwrap())
        .collect();

    // The "interruption": run 1 never ran, run 3 was stopped (partial),
    // run 5's file was cut short by a crash.
    std::fs::remove_dir_all(root.join(RUN_DIRS[1])).unwrap();
    let p = root.join(RUN_DIRS[3]).join("results.json");
    let t = std::fs::read_to_string(&p).unwrap();
    assert!(t.contains("\"partial\": false"));
    std::fs::write(&p, t.replace("\"partial\": false", "\"partial\": true")).unwrap();
    let p5 = root.join(RUN_DIRS[5]).join("results.json");
    std::fs::write(&p5, &original[5][..original[5].len() / 2]).unwrap();
    std::fs::remove_file(root.join("campaign.json")).unwrap();
    // Mark the finished runs' files so a rewrite would show.
    let untouched = [0, 2, 4];
    for i in untouched {
        let f = std::fs::File::options()
            .write(true)
            .open(root.join(RUN_DIRS[i]).join("results.json"))
            .unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
    }

    let o = tollgate(&args);
    let (_, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("6 runs, 3 already finished, 3 to run"),
        "{stderr}"
    );
    for i in untouched {
        let m = std::fs::metadata(root.join(RUN_DIRS[i]).join("results.json"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(m, std::time::SystemTime::UNIX_EPOCH, "run {i} was re-run");
    }
    for (i, d) in RUN_DIRS.iter().enumerate() {
        let now = std::fs::read(root.join(d).join("results.json")).unwrap();
        assert!(now == original[i], "run {i} differs after the resume");
    }
    assert!(std::fs::read(root.join("campaign.json")).unwrap() == merged);

    // Nothing left to do: nothing runs.
    let o = tollgate(&args);
    assert!(text(&o).1.contains("6 already finished, 0 to run"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A campaign directory made from another file is refused, saying what to
/// do; so is a different --seeds.
#[test]
fn a_campaign_directory_from_another_file_is_refused() {
    let dir = temp_dir("other");
    let file = dir.join("c.toml");
    std::fs::write(&file, campaign_file("1s")).unwrap();
    let out = dir.join("results");
    let o = tollgate(&[
        "sim",
        s(&file),
        "--out",
        s(&out),
        "--run-index",
        "0",
        "--no-plots",
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let other = dir.join("other.toml");
    std::fs::write(&other, campaign_file("2s")).unwrap();
    for args in [
        vec!["campaign", "run", s(&other), "--out", s(&out), "--no-plots"],
        vec!["sim", s(&other), "--out", s(&out), "--run-index", "1"],
        vec![
            "campaign",
            "run",
            s(&file),
            "--out",
            s(&out),
            "--seeds",
            "2",
        ],
    ] {
        let o = tollgate(&args);
        let (_, stderr) = text(&o);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            stderr.contains("made from another campaign file")
                && stderr.contains("--out")
                && stderr.contains(&format!("delete {}", out.join("camp").display())),
            "{stderr}"
        );
    }
    // Nothing of the other file was written.
    let entries = std::fs::read_dir(out.join("camp/topology.bottleneck.buffer=0.5bdp"))
        .unwrap()
        .count();
    assert_eq!(entries, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run that fails (its directory cannot be created: a file is in the way)
/// is reported with its index and error; the others finish; the exit code
/// is non-zero; no campaign.json is written. Removing the cause and running
/// again completes the campaign.
#[test]
fn a_failed_run_is_reported_with_its_index_and_the_others_go_on() {
    let dir = temp_dir("fail");
    let file = dir.join("c.toml");
    std::fs::write(&file, campaign_file("1s")).unwrap();
    let out = dir.join("results");
    let blocker = out.join("camp").join(RUN_DIRS[2]);
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, "not a directory").unwrap();
    let args = [
        "campaign",
        "run",
        s(&file),
        "--out",
        s(&out),
        "-j",
        "2",
        "--no-plots",
    ];
    let o = tollgate(&args);
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(
        stderr.contains("run 2 failed")
            && stderr.contains("seed-3")
            && stderr.contains("cannot write"),
        "{stderr}"
    );
    assert!(stderr.contains("1 of 6 runs failed (run 2)"), "{stderr}");
    for (i, d) in RUN_DIRS.iter().enumerate() {
        if i != 2 {
            assert!(
                out.join("camp").join(d).join("results.json").exists(),
                "run {i}"
            );
        }
    }
    assert!(!out.join("camp/campaign.json").exists());
    std::fs::remove_file(&blocker).unwrap();
    let o = tollgate(&args);
    let (_, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("5 already finished, 1 to run"), "{stderr}");
    assert!(out.join("camp/campaign.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `campaign merge` names the missing runs (index and directory) and fails;
/// with --allow-missing it writes campaign.json listing them and computes
/// the statistics over the runs that are there.
#[test]
fn merge_names_what_is_missing() {
    let dir = temp_dir("merge");
    let file = dir.join("c.toml");
    std::fs::write(&file, campaign_file("1s")).unwrap();
    let out = dir.join("results");
    for i in ["0", "1", "3", "5"] {
        let o = tollgate(&[
            "sim",
            s(&file),
            "--out",
            s(&out),
            "--run-index",
            i,
            "--no-plots",
            "-q",
        ]);
        assert!(o.status.success(), "{}", text(&o).1);
    }
    let root = out.join("camp");
    let o = tollgate(&["campaign", "merge", s(&root), "--no-plots"]);
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(stderr.contains("2 of 6 runs"), "{stderr}");
    for (i, d) in [(2, RUN_DIRS[2]), (4, RUN_DIRS[4])] {
        assert!(
            stderr.contains(&format!("run {i} ")) && stderr.contains(d),
            "run {i}: {stderr}"
        );
    }
    assert!(!root.join("campaign.json").exists());

    let o = tollgate(&[
        "campaign",
        "merge",
        s(&root),
        "--no-plots",
        "--allow-missing",
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("4 of 6 runs finished"), "{stdout}");
    let m = json(&root.join("campaign.json"));
    let missing: Vec<u64> = m["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(missing, [2, 4]);
    assert_eq!(m["points"][0]["finished"], 2);
    assert_eq!(m["points"][1]["metrics"]["jain"]["n"], 2);
    // Nothing path- or host-dependent: directories are relative.
    let text = std::fs::read_to_string(root.join("campaign.json")).unwrap();
    assert!(!text.contains(s(&dir)), "absolute path in campaign.json");

    // A directory that is not a campaign.
    let o = tollgate(&["campaign", "merge", s(&dir)]);
    assert!(!o.status.success());
    assert!(text_of(&o).contains("campaign-plan.json"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn text_of(o: &Output) -> String {
    text(o).1
}

/// `campaign slurm` without --submit writes the job-array script with
/// absolute paths and says how to submit it.
#[test]
fn campaign_slurm_writes_a_job_array_script() {
    let dir = temp_dir("sbatch");
    let file = dir.join("c.toml");
    std::fs::write(&file, campaign_file("1s")).unwrap();
    let o = Command::new(BIN)
        .current_dir(&dir)
        .args([
            "campaign",
            "slurm",
            "c.toml",
            "--out",
            "res",
            "--max-parallel",
            "3",
            "--partition",
            "short",
            "--time",
            "00:05:00",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let root = std::fs::canonicalize(&dir).unwrap();
    let script_path = root.join("res/camp/campaign.sbatch");
    assert!(
        stdout.contains(&format!("sbatch {}", script_path.display())),
        "{stdout}"
    );
    let script = std::fs::read_to_string(&script_path).unwrap();
    assert!(script.contains("#SBATCH --array=0-5%3\n"), "{script}");
    assert!(script.contains("#SBATCH --partition=short\n"), "{script}");
    let bin = std::fs::canonicalize(BIN).unwrap();
    assert!(
        script.contains(&format!(
            "exec '{}' sim '{}' --run-index \"$SLURM_ARRAY_TASK_ID\" --out '{}'",
            bin.display(),
            root.join("c.toml").display(),
            root.join("res").display()
        )),
        "{script}"
    );
    assert!(root.join("res/camp/slurm").is_dir(), "log directory");
    assert!(root.join("res/camp/campaign-plan.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

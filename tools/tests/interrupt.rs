//! Stopping a run early (Ctrl-C, SIGTERM, or a stop request through the
//! library): the work done so far is kept and marked partial.
//!
//! The library tests stop the engine at a chosen virtual time through the
//! progress callback; the CLI tests send real signals to the `tollgate`
//! binary.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tollgate_tools::results;
use tollgate_tools::scenario::parse_plan;
use tollgate_tools::sim;

fn two_flows(duration: &str, measure_from: &str) -> String {
    format!(
        r#"
name = "stop"
duration = "{duration}"
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "20Mbit", delay = "2ms", buffer = "1bdp" }}
[[flows]]
name = "short"
cca = "newreno"
rtt = "10ms"
[[flows]]
name = "long"
cca = "newreno"
rtt = "60ms"
[metrics]
measure_from = "{measure_from}"
"#
    )
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// (a) A stop request at 4 s of a 10 s run: results are built and written as
/// usual, marked partial, with the time reached, and every series ends there.
#[test]
fn a_stop_request_keeps_the_work_done_and_marks_it_partial() {
    let plan = parse_plan(&two_flows("10s", "1s")).unwrap();
    let s = &plan.runs[0];
    let stop = AtomicBool::new(false);
    let data = sim::run(
        s,
        &mut |f| {
            if f * s.duration_s >= 4.0 - 1e-9 {
                stop.store(true, Ordering::Relaxed);
            }
        },
        &stop,
    )
    .unwrap();
    assert!(data.partial);
    assert!(
        (data.reached_s - 4.0).abs() < s.sample_interval_s,
        "reached {}",
        data.reached_s
    );

    let r = results::build(s, &data);
    let dir = temp_dir("stop-lib");
    results::write(&dir, &r).unwrap();
    let v = json(&dir.join("results.json"));
    assert_eq!(v["partial"], serde_json::Value::Bool(true));
    let reached = v["reached_s"].as_f64().expect("reached_s is a number");
    assert!((reached - 4.0).abs() < s.sample_interval_s, "{reached}");
    // The series end where the run stopped.
    let t = v["series"]["t_s"].as_array().unwrap();
    let last = t.last().unwrap().as_f64().unwrap();
    assert!((last - reached).abs() < 1e-9, "last sample {last}");
    assert_eq!(t.len(), 40, "one sample per 100 ms up to 4 s");
    for g in v["series"]["flow_goodput_mbps"].as_array().unwrap() {
        assert_eq!(g.as_array().unwrap().len(), t.len());
    }
    // Goodput is measured over [1 s, 4 s], not over the scenario's 10 s: the
    // two flows fill most of the 20 Mbit/s link.
    let total = r.summary.total_goodput_mbps;
    assert!(total > 15.0 && total < 20.0, "total goodput {total}");
    assert!(r.summary.utilization > 0.9, "{}", r.summary.utilization);
    assert!(r.summary.jain.is_some());
    let csv = std::fs::read_to_string(dir.join("flows.csv")).unwrap();
    assert!(
        csv.lines().last().unwrap().starts_with("4.000,"),
        "{}",
        csv.lines().last().unwrap()
    );
    // The table says it is partial and up to when.
    let table = results::table(&r);
    assert!(
        table.contains("PARTIAL") && table.contains("4.0 s of 10 s"),
        "{table}"
    );
    // It round-trips through the file (what `tollgate report` prints).
    assert_eq!(
        results::table(&results::read(&dir.join("results.json")).unwrap()),
        table
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run that was not stopped says so, and reaches its duration.
#[test]
fn a_complete_run_is_not_partial() {
    let plan = parse_plan(&two_flows("1s", "0.5s")).unwrap();
    let s = &plan.runs[0];
    let stop = AtomicBool::new(false);
    let data = sim::run(s, &mut |_| {}, &stop).unwrap();
    assert!(!data.partial);
    assert_eq!(data.reached_s, 1.0);
    let r = results::build(s, &data);
    assert!(!r.partial);
    assert_eq!(r.reached_s, 1.0);
    assert!(!results::table(&r).contains("PARTIAL"));
}

/// Stopped before `metrics.measure_from`: no goodput or fairness numbers, and
/// the table says why instead of printing zeros as if they were measured.
#[test]
fn a_stop_before_the_measurement_window_says_there_is_no_window() {
    let plan = parse_plan(&two_flows("10s", "3s")).unwrap();
    let s = &plan.runs[0];
    let stop = AtomicBool::new(false);
    let data = sim::run(
        s,
        &mut |f| {
            if f * s.duration_s >= 1.0 - 1e-9 {
                stop.store(true, Ordering::Relaxed);
            }
        },
        &stop,
    )
    .unwrap();
    assert!(data.partial && data.reached_s < 3.0);
    let r = results::build(s, &data);
    assert!(r.summary.window_empty);
    assert_eq!(r.summary.jain, None);
    assert_eq!(r.summary.fairness_ratio, None);
    assert_eq!(r.summary.time_to_target_s, None);
    // Bytes were still received before the stop, and are reported.
    assert!(r.flows.iter().all(|f| f.bytes > 0));
    let table = results::table(&r);
    assert!(
        table.contains("before the measurement window") && table.contains("measure_from 3.0 s"),
        "{table}"
    );
}

/// A stop requested before the first event: no samples were taken by the
/// engine's sampler, and building the results must not panic.
#[test]
fn a_stop_at_time_zero_builds_results() {
    let plan = parse_plan(&two_flows("10s", "1s")).unwrap();
    let s = &plan.runs[0];
    let stop = AtomicBool::new(true);
    let data = sim::run(s, &mut |_| {}, &stop).unwrap();
    assert!(data.partial);
    assert_eq!(data.reached_s, 0.0);
    let r = results::build(s, &data);
    assert!(r.summary.window_empty);
    assert!(results::table(&r).contains("PARTIAL"));
}

// ------------------------------------------------------------------ CLI

/// The `tollgate sim` process with its stderr lines arriving on a channel.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Vec<String>,
}

fn spawn_sim(file: &Path, out: &Path, extra: &[&str]) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args([
            "sim",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Running {
        child,
        lines,
        stderr: Vec::new(),
    }
}

impl Running {
    /// Wait until a stderr line contains `needle` (true) or `limit` passes (false).
    fn wait_for(&mut self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.stderr.push(line);
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
        false
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// Wait for the exit (killing the child after `limit`); returns the
    /// status, stdout and all of stderr.
    fn finish(mut self, limit: Duration) -> (ExitStatus, String, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("tollgate did not exit within {limit:?} of the signal");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        let _ = self
            .child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.stderr.push(line);
        }
        (status, stdout, self.stderr.join("\n"))
    }
}

/// (b) SIGINT during a long run: results.json, flows.csv (and plots) are
/// written, marked partial, and the exit code is 130.
#[test]
fn sigint_during_sim_writes_partial_results_and_exits_130() {
    let dir = temp_dir("sigint");
    let file = dir.join("long.toml");
    std::fs::write(&file, two_flows("10000s", "0s")).unwrap();
    let out = dir.join("results");
    let mut run = spawn_sim(&file, &out, &[]);
    // The binary announces the run once its signal handler is in place; an
    // old binary without it gets the signal after a short sleep.
    run.wait_for("running stop", Duration::from_secs(3));
    std::thread::sleep(Duration::from_millis(500));
    run.signal(libc::SIGINT);
    let (status, stdout, stderr) = run.finish(Duration::from_secs(120));
    assert_eq!(status.code(), Some(130), "stderr: {stderr}");
    let run_dir = out.join("stop");
    let v = json(&run_dir.join("results.json"));
    assert_eq!(v["partial"], serde_json::Value::Bool(true));
    let reached = v["reached_s"].as_f64().unwrap();
    assert!(reached > 0.0 && reached < 10000.0, "reached {reached}");
    assert!(run_dir.join("flows.csv").exists());
    if std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        assert!(run_dir.join("throughput.png").exists());
    }
    assert!(stdout.contains("PARTIAL"), "{stdout}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM is handled like Ctrl-C.
#[test]
fn sigterm_during_sim_writes_partial_results() {
    let dir = temp_dir("sigterm");
    let file = dir.join("long.toml");
    std::fs::write(&file, two_flows("10000s", "0s")).unwrap();
    let out = dir.join("results");
    let run = spawn_sim(&file, &out, &["--no-plots", "--quiet"]);
    // --quiet prints nothing: give the process time to start the run.
    std::thread::sleep(Duration::from_millis(1500));
    run.signal(libc::SIGTERM);
    let (status, stdout, _) = run.finish(Duration::from_secs(120));
    assert_eq!(status.code(), Some(130));
    assert!(stdout.is_empty(), "--quiet: {stdout}");
    let v = json(&out.join("stop/results.json"));
    assert_eq!(v["partial"], serde_json::Value::Bool(true));
    let _ = std::fs::remove_dir_all(&dir);
}

/// (c) SIGINT during the third point of a four-point sweep: the two finished
/// points are kept as complete runs, the third is written partial, the
/// fourth is not run and is named, and the exit code is 130.
#[test]
fn sigint_during_a_sweep_keeps_finished_points_and_names_the_rest() {
    let dir = temp_dir("sigint-sweep");
    let file = dir.join("sweep.toml");
    std::fs::write(
        &file,
        format!(
            "{}\n[sweep]\nparam = \"duration\"\nvalues = [\"1s\", \"2s\", \"10000s\", \"3s\"]\n",
            two_flows("1s", "0s")
        ),
    )
    .unwrap();
    let out = dir.join("results");
    let mut run = spawn_sim(&file, &out, &["--no-plots"]);
    run.wait_for("duration=10000s", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    run.signal(libc::SIGINT);
    let (status, _stdout, stderr) = run.finish(Duration::from_secs(120));
    assert_eq!(status.code(), Some(130), "stderr: {stderr}");
    let root = out.join("stop");
    for (point, reached) in [("duration=1s", 1.0), ("duration=2s", 2.0)] {
        let v = json(&root.join(point).join("results.json"));
        assert_eq!(v["partial"], serde_json::Value::Bool(false), "{point}");
        assert_eq!(v["reached_s"].as_f64(), Some(reached), "{point}");
    }
    let v = json(&root.join("duration=10000s/results.json"));
    assert_eq!(v["partial"], serde_json::Value::Bool(true));
    assert!(
        !root.join("duration=3s").exists(),
        "the last point must not run"
    );
    assert!(
        stderr.contains("not run") && stderr.contains("duration=3s"),
        "{stderr}"
    );
    // The sweep summary covers the points that ran and names the rest.
    let sweep = json(&root.join("sweep.json"));
    assert_eq!(sweep["runs"].as_array().unwrap().len(), 3);
    assert_eq!(sweep["not_run"][0], "duration=3s");
    let _ = std::fs::remove_dir_all(&dir);
}

//! Run the `tollgate-router` binary (one process per EAL) and parse its
//! final report.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The `tollgate-router` binary: `$TOLLGATE_ROUTER_BIN`, else the one cargo
/// built next to this test executable (`target/<profile>/tollgate-router`;
/// `cargo test --workspace --features tollgate-dataplane/dpdk` builds it before
/// any test runs). Panics with the build command when it is missing.
pub fn router_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TOLLGATE_ROUTER_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/tollgate-router
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("tollgate-router"))
        .expect("test executable has a target directory");
    assert!(
        bin.exists(),
        "{} does not exist: build it with `cargo build -p tollgate-dataplane --features dpdk` \
         (or run the tests with `cargo test --workspace --features tollgate-dataplane/dpdk,...`), \
         or point TOLLGATE_ROUTER_BIN at it",
        bin.display()
    );
    bin
}

/// `Err(reason)` when the tests cannot run DPDK here (not root).
pub fn require_root() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root (DPDK virtual devices and af_packet need root)".into());
    }
    Ok(())
}

/// A scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-dpdk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// EAL arguments for an in-memory run with these vdevs. Each run gets its
/// own file prefix so parallel test processes do not collide, and
/// `--no-shconf --no-telemetry`, so that it leaves nothing under that
/// prefix (`Eal` removes the empty directory).
pub fn eal_args(prefix: &str, vdevs: &[&str]) -> Vec<String> {
    eal_args_on(&["-l", "0"], prefix, vdevs)
}

/// [`eal_args`] on the lcores `lcores` names: an lcore list (`["-l",
/// "0-1"]`) or map (`["--lcores", "0@0,1@1"]`).
pub fn eal_args_on(lcores: &[&str], prefix: &str, vdevs: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = lcores.iter().map(|s| s.to_string()).collect();
    a.extend(
        [
            "--no-huge",
            "--no-pci",
            "--no-shconf",
            "--no-telemetry",
            "-m",
            "512",
            "--log-level=lib.eal:warning",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    a.push(format!("--file-prefix={prefix}"));
    for v in vdevs {
        a.push("--vdev".into());
        a.push(v.to_string());
    }
    a
}

/// The result of one router run.
#[derive(Debug)]
pub struct Run {
    /// Exit code.
    pub code: Option<i32>,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

impl Run {
    /// The `key=value` pairs of the `tollgate-router final:` line.
    pub fn totals(&self) -> HashMap<String, String> {
        self.stdout
            .lines()
            .find(|l| l.starts_with("tollgate-router final:"))
            .map(kv)
            .unwrap_or_default()
    }

    /// The final totals `(rx, tx, dropped, queued)`, asserting that the
    /// router reported `accounting=ok` and that they add up
    /// (`rx = tx + dropped + queued`); `what` names the case in failures.
    pub fn exact_totals(&self, what: &str) -> (u64, u64, u64, u64) {
        let t = self.totals();
        assert_eq!(
            t.get("accounting").map(String::as_str),
            Some("ok"),
            "{what}: {}",
            self.stdout
        );
        let (rx, tx, dropped, queued) = (
            num(&t, "rx"),
            num(&t, "tx"),
            num(&t, "dropped"),
            num(&t, "queued"),
        );
        assert_eq!(rx, tx + dropped + queued, "{what}: {t:?}");
        (rx, tx, dropped, queued)
    }

    /// The `lane port=NAME ...` line as key=value pairs.
    pub fn lane(&self, port: &str) -> HashMap<String, String> {
        let tag = format!("lane port={port} ");
        self.stdout
            .lines()
            .find(|l| l.starts_with(&tag))
            .map(kv)
            .unwrap_or_default()
    }

    /// Whether EAL could not start here (then the test SKIPs).
    pub fn eal_unavailable(&self) -> Option<String> {
        // A bad argument (rte_errno 22) is the test's fault: fail, do not skip.
        if self.code == Some(3)
            && self.stderr.contains("EAL initialisation failed")
            && !self.stderr.contains("rte_errno 22")
        {
            Some(format!(
                "DPDK EAL init failed: {}",
                self.stderr
                    .lines()
                    .find(|l| l.contains("EAL initialisation"))
                    .unwrap_or("")
            ))
        } else {
            None
        }
    }
}

/// `key=value` tokens of a line.
pub fn kv(line: &str) -> HashMap<String, String> {
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A number from a map (0 if absent).
pub fn num(m: &HashMap<String, String>, k: &str) -> u64 {
    m.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Run the router with `config` text for `duration`, bounded by a watchdog.
pub fn run_router(dir: &Path, config: &str, duration: &str, eal: &[String]) -> Run {
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, config).expect("write config");
    let mut cmd = Command::new(router_bin());
    cmd.arg("--config")
        .arg(&cfg)
        .arg("--duration")
        .arg(duration)
        .arg("--quiet")
        .arg("--")
        .args(eal);
    let out = run_bounded(cmd, Duration::from_secs(60));
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    };
    if std::env::var_os("TOLLGATE_TEST_VERBOSE").is_some() {
        println!("{}\n{}", run.stdout, run.stderr);
    }
    run
}

/// Router runs are serialised within a test binary: the machine may have
/// two cores, and the shaping assertions need the loop to keep up.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run a command, killing it after `limit`.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(limit).is_err() {
            // SAFETY: sends SIGKILL to the child we spawned (by pid).
            unsafe {
                libc::kill(id as libc::pid_t, libc::SIGKILL);
            }
        }
    });
    let out = child.wait_with_output().expect("wait");
    let _ = tx.send(());
    let _ = watchdog.join();
    out
}

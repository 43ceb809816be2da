//! `tollgate campaign slurm --submit` against a real Slurm: a one-node
//! cluster on localhost (`tests/support/slurm_cluster.sh`, stopped by a Drop
//! guard even when the test fails), a 2-point x 3-seed campaign submitted as
//! a job array, merged, and compared byte for byte with the same campaign
//! run by `campaign run`.
//!
//! Needs root and Debian's `slurm-wlm` and `munge` (.ci/run installs them).
//! Without them the test prints `SKIP: ...` and passes, except under
//! `CI=true`, where it fails: CI must not pass without running it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tollgate");
const CLUSTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/support/slurm_cluster.sh"
);

const FILE: &str = r#"
name = "slurm-camp"
duration = "5s"
seeds = [1, 2, 3]
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms" }
[[flows]]
name = "short"
cca = "newreno"
rtt = "10ms"
[[flows]]
name = "long"
cca = "newreno"
rtt = "60ms"
[metrics]
measure_from = "1s"
[sweep]
param = "topology.bottleneck.buffer"
values = ["0.5bdp", "1bdp"]
"#;

/// Skip (print why) outside CI; fail under `CI=true`.
fn skip(why: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true but the Slurm test cannot run: {why} (run .ci/run as root: it installs slurm-wlm and munge)");
    }
    println!("SKIP: Slurm campaign test: {why}");
}

fn have(program: &str) -> bool {
    ["/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin"]
        .iter()
        .any(|d| Path::new(d).join(program).exists())
}

/// A TCP port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The cluster; stopped (pid files) when dropped, also on a panic.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let cluster = Cluster {
            dir: dir.to_path_buf(),
        };
        let (a, b) = (free_port(), free_port());
        let o = Command::new("bash")
            .arg(CLUSTER)
            .arg("start")
            .arg(dir)
            .arg(a.to_string())
            .arg(b.to_string())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "cluster did not start: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        cluster
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(CLUSTER)
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

#[test]
fn a_campaign_on_slurm_merges_to_the_same_bytes_as_campaign_run() {
    let missing: Vec<&str> = ["sbatch", "squeue", "slurmctld", "slurmd", "munged"]
        .into_iter()
        .filter(|p| !have(p))
        .collect();
    if !missing.is_empty() {
        return skip(&format!(
            "{} not installed (Debian: slurm-wlm munge)",
            missing.join(", ")
        ));
    }
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not root (the test starts slurmctld, slurmd and munged)");
    }

    let dir = std::env::temp_dir().join(format!("tollgate-slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("campaign.toml");
    std::fs::write(&file, FILE).unwrap();
    let cluster = Cluster::start(&dir.join("cluster"));

    // Submit the array.
    let slurm_out = dir.join("on-slurm");
    let o = Command::new(BIN)
        .env("SLURM_CONF", cluster.conf())
        .args(["campaign", "slurm"])
        .arg(&file)
        .arg("--out")
        .arg(&slurm_out)
        .args(["--submit", "--max-parallel", "2", "--no-plots"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let job = stdout
        .lines()
        .find_map(|l| l.strip_prefix("submitted job array "))
        .unwrap_or_else(|| panic!("no job id in: {stdout}"))
        .trim()
        .to_string();
    assert!(job.chars().all(|c| c.is_ascii_digit()), "job id {job}");

    // Wait for it: squeue lists nothing once every task is done.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let q = Command::new("squeue")
            .env("SLURM_CONF", cluster.conf())
            .args(["-h", "-j", &job])
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&q.stdout).trim().to_string();
        if q.status.success() && listed.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "job {job} not done after 300 s: {listed}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Every task left its logs, and the merge finds every run.
    let root = slurm_out.join("slurm-camp");
    for task in 0..6 {
        assert!(
            root.join(format!("slurm/{job}_{task}.out")).exists(),
            "task {task} log"
        );
    }
    let o = Command::new(BIN)
        .args(["campaign", "merge"])
        .arg(&root)
        .args(["--no-plots", "-q"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "merge: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The same campaign run locally into another directory.
    let local_out = dir.join("local");
    let o = Command::new(BIN)
        .args(["campaign", "run"])
        .arg(&file)
        .arg("--out")
        .arg(&local_out)
        .args(["-j", "2", "--no-plots", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let on_slurm = std::fs::read(root.join("campaign.json")).unwrap();
    let local = std::fs::read(local_out.join("slurm-camp/campaign.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&on_slurm).unwrap();
    assert_eq!(v["runs_finished"], 6, "{v}");
    assert!(v["missing"].as_array().unwrap().is_empty());
    assert!(
        on_slurm == local,
        "campaign.json differs between Slurm and campaign run"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

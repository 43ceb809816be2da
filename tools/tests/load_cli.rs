//! The `tollgate serve` and `tollgate load` binaries: certificates handed
//! over by file, exit codes, Ctrl-C keeping the results, live metrics.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `tollgate serve --self-signed` on a free loopback port, with metrics.
struct Serve {
    child: Child,
    addr: SocketAddr,
    metrics: SocketAddr,
}

impl Serve {
    fn start(dir: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .current_dir(dir)
            .args([
                "serve",
                "--self-signed",
                "--listen",
                "127.0.0.1:0",
                "--threads",
                "2",
                "--metrics",
                "127.0.0.1:0",
                "--duration",
                "60s",
            ])
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (mut addr, mut metrics) = (None, None);
        while addr.is_none() || metrics.is_none() {
            let line = lines.next().expect("serve output").unwrap();
            if let Some(rest) = line.strip_prefix("serving QUIC and TCP on ") {
                addr = rest.split_whitespace().next().map(|a| a.parse().unwrap());
            }
            if let Some(rest) = line.strip_prefix("metrics on http://") {
                metrics = rest.trim_end_matches("/metrics").parse().ok();
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Serve {
            child,
            addr: addr.unwrap(),
            metrics: metrics.unwrap(),
        }
    }

    fn scrape(&self) -> String {
        let mut s = std::net::TcpStream::connect(self.metrics).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        body
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn load(dir: &Path, serve: &Serve, extra: &[&str]) -> Child {
    let mut args = vec![
        "load".to_string(),
        "--server".into(),
        serve.addr.to_string(),
        "--ca".into(),
        "tollgate-serve-cert.pem".into(),
        "--no-plots".into(),
        "-q".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .current_dir(dir)
        .args(args)
        .spawn()
        .unwrap()
}

fn wait(mut child: Child, limit: Duration) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("process did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_quick_run_writes_results_and_the_metrics_count_it() {
    let dir = temp_dir("load-quick");
    let serve = Serve::start(&dir);
    let child = load(
        &dir,
        &serve,
        &[
            "--flows",
            "1x cubic, 1x tcp:cubic",
            "--duration",
            "2s",
            "--name",
            "quick",
        ],
    );
    assert_eq!(
        wait(child, Duration::from_secs(30)),
        0,
        "every flow completed"
    );
    let r = json(&dir.join("results/quick/results.json"));
    let flows = r["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    assert!(flows
        .iter()
        .all(|f| f["goodput_mbps"].as_f64().unwrap() > 0.0));
    assert!(
        r["environment"]["git_revision"].is_string() || r["environment"]["git_revision"].is_null()
    );
    assert!(dir.join("results/quick/flows.csv").exists());
    let text = serve.scrape();
    assert!(
        text.contains("tollgate_serve_connections_total{stack=\"quic\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("tollgate_serve_connections_total{stack=\"tcp\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("variant=\"cubic\",direction=\"received\""),
        "{text}"
    );
}

#[test]
fn a_failed_flow_makes_the_exit_code_non_zero_and_ctrl_c_keeps_partial_results() {
    let dir = temp_dir("load-fail");
    let serve = Serve::start(&dir);
    let dead = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    std::fs::write(
        dir.join("dead.toml"),
        format!(
            r#"name = "dead"
duration = "2s"
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "1Gbit", delay = "1ms" }}
[[flows]]
name = "ok"
cca = "newreno"
rtt = "2ms"
[[flows]]
name = "nobody"
cca = "tcp:cubic"
rtt = "2ms"
server = "{dead}"
"#
        ),
    )
    .unwrap();
    let child = load(&dir, &serve, &["dead.toml"]);
    assert_eq!(wait(child, Duration::from_secs(30)), 1);
    let r = json(&dir.join("results/dead/results.json"));
    assert!(r["flows"][0]["error"].is_null());
    assert!(r["flows"][1]["error"].as_str().unwrap().contains("refused"));

    let child = load(
        &dir,
        &serve,
        &["--flows", "2x cubic", "--duration", "30s", "--name", "int"],
    );
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait(child, Duration::from_secs(15)), 130);
    let r = json(&dir.join("results/int/results.json"));
    assert_eq!(r["partial"], true);
    let reached = r["reached_s"].as_f64().unwrap();
    assert!((1.5..10.0).contains(&reached), "stopped early: {reached}");
    assert!(r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["bytes"].as_u64().unwrap() > 0));
}

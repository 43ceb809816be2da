//! End to end through `tollgate-router` with Tollgate QUIC: two network
//! namespaces joined by veth pairs bound to the dataplane (`net_af_packet`),
//! a 100 Mbit/s RRMQS bottleneck on the router's egress towards B with
//! measuring queues for newreno and cubic (`C_f = 1`: the first flow of each
//! variant is measured, the second uses the main queue, so the slowdown index
//! is defined; feedback off so the transfers' timing stays predictable).
//! In-process QUIC endpoints (each thread enters its namespace with `setns`):
//! a bulk server in B and five clients in A uploading for 4 s, two newreno and
//! two cubic with DSCP variant marking plus one unmarked newreno control. The
//! uploads (the senders' data, marked with the sender's CCA variant) cross the
//! RRMQS port. Asserts: router accounting ok; every upload complete and intact
//! (client and server); the router's per-variant tx bytes on that port are at
//! least the uploaded bytes for newreno (DSCP 1), cubic (DSCP 2) and unmarked
//! (the control), unmarked not much more than the control; RRMQS printed a
//! measured index for newreno and cubic. Needs root and `ip`; otherwise
//! prints `SKIP: <reason>`. Namespaces are removed at the end even on failure.
#![cfg(feature = "dpdk")]

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tollgate_tests::netns::{enter_netns, have, KillOnDrop, Topology};
use tollgate_tests::router_run::*;
use tollgate_tests::skip;
use tollgate_transport::bulk::{BulkClient, BulkServer, Mode, Request, ServerSummary};
use tollgate_transport::tls::SelfSigned;
use tollgate_transport::{ConnectionOptions, Driver, EndpointOptions};

const UPLOAD: Duration = Duration::from_secs(4);
const SERVER: &str = "10.77.0.2:4433";

/// One client's outcome.
struct Upload {
    label: &'static str,
    cca: &'static str,
    marked: bool,
    bytes: u64,
    secs: f64,
    complete: bool,
    mismatches: u64,
    error: Option<String>,
}

/// The router's egress towards B: RRMQS measuring newreno and cubic.
fn config() -> String {
    r#"
stats_interval = "500ms"
drain_timeout = "500ms"
use_dscp = true
[[ports]]
device = "net_af_packet0"
peer = "net_af_packet1"
[ports.egress]
rate = "1Gbit"
delay = "5ms"
[[ports]]
device = "net_af_packet1"
peer = "net_af_packet0"
[ports.egress]
rate = "100Mbit"
delay = "5ms"
discipline = "rrmqs"
variants = ["newreno", "cubic"]
flows_per_queue = 1
packets_per_queue = 4
main_limit = 300
rrmqs_probability = 0.2
window = "500ms"
feedback = false
"#
    .to_string()
}

/// The server in `ns`: serves until `stop`, then returns its totals.
fn spawn_server(
    ns: String,
    cert: Arc<SelfSigned>,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<(), String>>,
) -> std::thread::JoinHandle<Result<ServerSummary, String>> {
    std::thread::spawn(move || {
        let setup = || -> Result<Driver, String> {
            enter_netns(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
            let addr: SocketAddr = SERVER.parse().unwrap();
            let mut d = Driver::bind(addr, EndpointOptions::default())
                .map_err(|e| format!("bind {addr}: {e}"))?;
            let crypto = cert.server_crypto().map_err(|e| format!("{e:?}"))?;
            d.endpoint()
                .set_server(crypto, ConnectionOptions::with_cca("newreno"))
                .map_err(|e| format!("set_server: {e:?}"))?;
            Ok(d)
        };
        let mut d = match setup() {
            Ok(d) => {
                let _ = ready.send(Ok(()));
                d
            }
            Err(e) => {
                let _ = ready.send(Err(e.clone()));
                return Err(e);
            }
        };
        let mut app = BulkServer::new();
        d.run(&mut app, &stop).map_err(|e| format!("server: {e}"))?;
        Ok(app.summary)
    })
}

/// One uploading client in `ns`; reports on `done`.
#[allow(clippy::too_many_arguments)]
fn spawn_client(
    ns: String,
    label: &'static str,
    cca: &'static str,
    marked: bool,
    cert: Arc<SelfSigned>,
    abort: Arc<AtomicBool>,
    done: mpsc::Sender<Result<Upload, String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let run = || -> Result<Upload, String> {
            enter_netns(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
            let bind: SocketAddr = "10.77.0.1:0".parse().unwrap();
            let mut d =
                Driver::bind(bind, EndpointOptions::default()).map_err(|e| format!("bind: {e}"))?;
            d.endpoint()
                .set_client(cert.client_crypto().map_err(|e| format!("{e:?}"))?);
            let request = Request {
                mode: Mode::Upload,
                size: None,
                duration: Some(UPLOAD),
            };
            let options = ConnectionOptions {
                mark_dscp: marked,
                // A small send buffer: the upload drains soon after its deadline.
                window: 256 << 10,
                max_window: 256 << 10,
                ..ConnectionOptions::with_cca(cca)
            };
            let mut app = BulkClient::new(SERVER.parse().unwrap(), "localhost", request, options);
            d.run(&mut app, &abort)
                .map_err(|e| format!("{label}: {e}"))?;
            let r = app.result;
            Ok(Upload {
                label,
                cca,
                marked,
                bytes: r.bytes,
                secs: r.elapsed.as_secs_f64(),
                complete: r.complete,
                mismatches: r.mismatches,
                error: r.error,
            })
        };
        let _ = done.send(run());
    })
}

/// Every `rrmqs_index{variant="NAME"}=X` gauge the router printed, per variant.
fn rrmqs_indices(out: &str) -> HashMap<String, Vec<f64>> {
    let mut m: HashMap<String, Vec<f64>> = HashMap::new();
    for tok in out.split_whitespace() {
        if let Some(rest) = tok.strip_prefix("rrmqs_index{variant=\"") {
            if let Some((name, v)) = rest.split_once("\"}=") {
                if let Ok(x) = v.parse::<f64>() {
                    m.entry(name.to_string()).or_default().push(x);
                }
            }
        }
    }
    m
}

#[test]
fn quic_dscp_variants_are_measured_by_rrmqs() {
    const NAME: &str = "quic_dscp_variants_are_measured_by_rrmqs";
    let t0 = Instant::now();
    if let Err(r) = require_root() {
        return skip(NAME, &r);
    }
    if !have("ip", "-V") {
        return skip(NAME, "`ip` is not installed");
    }
    let dir = scratch("quic");
    let topo = match Topology::new("q") {
        Ok(t) => t,
        Err(e) => return skip(NAME, &format!("cannot build namespaces/veth: {e}")),
    };
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, config()).unwrap();
    let prefix = format!("tg-quic-{}", std::process::id());
    let eal = eal_args(
        &prefix,
        &[
            &format!("net_af_packet0,iface={}", topo.r_a),
            &format!("net_af_packet1,iface={}", topo.r_b),
        ],
    );
    let router_secs = UPLOAD.as_secs_f64() + 5.0;
    let mut router = Command::new(router_bin());
    router
        .arg("--config")
        .arg(&cfg)
        .arg("--duration")
        .arg(format!("{router_secs}s"))
        .arg("--")
        .args(&eal)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut router = KillOnDrop(router.spawn().expect("spawn router"));
    // Read the router's output on threads so its pipes never fill up.
    let mut out_pipe = router.0.stdout.take().unwrap();
    let mut err_pipe = router.0.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    std::thread::sleep(Duration::from_millis(1500));
    if let Ok(Some(status)) = router.0.try_wait() {
        let out = out_reader.join().unwrap_or_default();
        let err = err_reader.join().unwrap_or_default();
        let run = Run {
            code: status.code(),
            stdout: out,
            stderr: err,
        };
        if let Some(reason) = run.eal_unavailable() {
            return skip(NAME, &reason);
        }
        panic!(
            "router exited early ({status}):\n{}\n{}",
            run.stdout, run.stderr
        );
    }

    let ss = Arc::new(SelfSigned::generate(&["localhost"]).expect("certificate"));
    let stop_server = Arc::new(AtomicBool::new(false));
    let abort = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = spawn_server(topo.ns_b.clone(), ss.clone(), stop_server.clone(), ready_tx);
    match ready_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("server setup: {e}"),
        Err(_) => panic!("server did not start"),
    }
    let clients = [
        ("newreno-1", "newreno", true),
        ("newreno-2", "newreno", true),
        ("cubic-1", "cubic", true),
        ("cubic-2", "cubic", true),
        ("control", "newreno", false),
    ];
    let (done_tx, done_rx) = mpsc::channel();
    let mut threads = Vec::new();
    for (label, cca, marked) in clients {
        threads.push(spawn_client(
            topo.ns_a.clone(),
            label,
            cca,
            marked,
            ss.clone(),
            abort.clone(),
            done_tx.clone(),
        ));
    }
    drop(done_tx);
    let deadline = Instant::now() + UPLOAD + Duration::from_secs(12);
    let mut uploads = Vec::new();
    let mut failures = Vec::new();
    while uploads.len() + failures.len() < clients.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(Ok(u)) => uploads.push(u),
            Ok(Err(e)) => failures.push(e),
            Err(_) => {
                failures.push("clients timed out".to_string());
                break;
            }
        }
    }
    abort.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    // Let the last ACKs and closes cross before the server stops.
    std::thread::sleep(Duration::from_millis(300));
    stop_server.store(true, Ordering::Relaxed);
    let summary = server.join().expect("server thread");

    // The router stops by itself after `--duration`; bound it anyway.
    let router_deadline = Instant::now() + Duration::from_secs(15);
    while router.0.try_wait().ok().flatten().is_none() && Instant::now() < router_deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(router);
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let run = Run {
        code: None,
        stdout: out.clone(),
        stderr: err.clone(),
    };

    for u in &uploads {
        println!(
            "QUIC upload {:<10} cca={:<7} marked={:<5} bytes={} in {:.2}s = {:.1} Mbit/s complete={} mismatches={} error={:?}",
            u.label,
            u.cca,
            u.marked,
            u.bytes,
            u.secs,
            u.bytes as f64 * 8.0 / u.secs.max(1e-9) / 1e6,
            u.complete,
            u.mismatches,
            u.error
        );
    }
    let egress = "net_af_packet1";
    let variants_line = out
        .lines()
        .find(|l| l.starts_with(&format!("variants port={egress}")))
        .unwrap_or("")
        .to_string();
    let per_variant = kv(&variants_line);
    println!("router {variants_line}");
    for l in out
        .lines()
        .filter(|l| l.starts_with("  variants:") || l.starts_with("  rrmqs:"))
    {
        println!("router periodic {}", l.trim());
    }
    let indices = rrmqs_indices(&out);
    for (v, xs) in &indices {
        println!("RRMQS measured index {v}: {xs:?}");
    }
    println!(
        "server: transfers={} bytes_received={} mismatches={} bad_requests={}",
        summary.as_ref().map_or(0, |s| s.transfers),
        summary.as_ref().map_or(0, |s| s.bytes_received),
        summary.as_ref().map_or(0, |s| s.mismatches),
        summary.as_ref().map_or(0, |s| s.bad_requests),
    );
    println!("router lane {:?}", run.lane(egress));
    println!(
        "router final: {}",
        out.lines()
            .find(|l| l.starts_with("tollgate-router final:"))
            .unwrap_or("(none)")
    );

    let ctx = || format!("router stdout:\n{out}\nrouter stderr:\n{err}");
    assert!(failures.is_empty(), "client failures: {failures:?}");
    assert!(
        run.totals().get("accounting").map(String::as_str) == Some("ok"),
        "router accounting\n{}",
        ctx()
    );
    let summary = summary.expect("server");
    assert_eq!(summary.mismatches, 0, "server saw corrupted upload bytes");
    assert_eq!(summary.bad_requests, 0);
    let mut app_bytes: HashMap<&str, u64> = HashMap::new();
    for u in &uploads {
        assert!(u.error.is_none(), "{}: {:?}", u.label, u.error);
        assert!(u.complete, "{}: upload incomplete", u.label);
        assert_eq!(u.mismatches, 0, "{}: mismatched bytes", u.label);
        assert!(u.bytes > 100_000, "{}: only {} bytes", u.label, u.bytes);
        let variant = if u.marked { u.cca } else { "unmarked" };
        *app_bytes.entry(variant).or_default() += u.bytes;
    }
    assert!(
        summary.bytes_received >= app_bytes.values().sum::<u64>(),
        "server received {} < clients' {}",
        summary.bytes_received,
        app_bytes.values().sum::<u64>()
    );
    for variant in ["newreno", "cubic", "unmarked"] {
        let wire = num(&per_variant, variant);
        let app = app_bytes[variant];
        println!("variant {variant}: router tx bytes {wire} >= uploaded app bytes {app}");
        assert!(
            wire >= app && app > 0,
            "{variant}: router counted {wire} bytes for {app} uploaded\n{}",
            ctx()
        );
    }
    // The control is the only unmarked upload: the marked uploads' data must
    // not be counted as unmarked (handshakes may be, so allow some slack).
    let unmarked = num(&per_variant, "unmarked");
    assert!(
        unmarked < app_bytes["unmarked"] + app_bytes["unmarked"] / 5 + 1_000_000,
        "unmarked {unmarked} vs control {}",
        app_bytes["unmarked"]
    );
    for variant in ["newreno", "cubic"] {
        assert!(
            indices.get(variant).is_some_and(|xs| !xs.is_empty()),
            "RRMQS measured no index for {variant}\n{}",
            ctx()
        );
    }
    println!("test took {:.1}s", t0.elapsed().as_secs_f64());
    drop(topo);
    let _ = std::fs::remove_dir_all(dir);
}

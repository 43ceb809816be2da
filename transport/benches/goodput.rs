//! Goodput on loopback: Tollgate (mio + quinn-proto, NewReno) against the
//! `quinn` crate (tokio, its NewReno) and kernel TCP (`iperf3`, if installed),
//! same machine, same run, 1 and 8 connections.
//!
//! ```text
//! cargo bench -p tollgate-transport --bench goodput -- [BYTES] [ROUNDS] [--conns=1,8] [--only=tollgate|quinn|iperf3] [--server-threads=N]
//! ```
//!
//! Each round moves BYTES (default 1 GB) once per stack and connection count:
//! with N connections each downloads BYTES/N at the same time (aggregate
//! goodput: all bytes over the time from the first connection attempt to the
//! last byte; handshakes included, close and drain excluded).
//! Tollgate's N clients run in one [`Pool`] (one socket each) on the main
//! thread against one server endpoint on another thread (or
//! `--server-threads` endpoints on as many threads sharing the port with
//! `SO_REUSEPORT`); quinn's N clients are
//! N client endpoints on a 2-thread tokio runtime against one server endpoint;
//! iperf3 runs `-P N` against `iperf3 -s -1`. Reported per run: goodput
//! (Gbit/s), and Gbit/s per core = bits moved / CPU-seconds of both ends
//! together (this process's `getrusage`, or the two iperf3 processes'), then
//! the medians and Tollgate's ratios against each baseline.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate_transport::bulk::{BulkClient, BulkServer, Mode, Request};
use tollgate_transport::driver::{spawn, UdpIo};
use tollgate_transport::tls::SelfSigned;
use tollgate_transport::{App, ConnectionOptions, Driver, Endpoint, EndpointOptions, Event, Pool};

/// CPU time (user + system) of this process, or of its reaped children.
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[derive(Clone, Copy, Debug)]
struct Run {
    gbps: f64,
    gbps_per_core: f64,
}

/// Measure `f` (returns the transfer time) by this process's CPU time.
fn measure(bytes: u64, f: impl FnOnce() -> Duration) -> Run {
    let cpu0 = cpu_time(libc::RUSAGE_SELF);
    let elapsed = f();
    let cpu = (cpu_time(libc::RUSAGE_SELF) - cpu0).as_secs_f64();
    let bits = bytes as f64 * 8.0;
    Run {
        gbps: bits / elapsed.as_secs_f64() / 1e9,
        gbps_per_core: bits / cpu / 1e9,
    }
}

fn request(bytes: u64) -> Request {
    Request {
        mode: Mode::Download,
        size: Some(bytes),
        duration: None,
    }
}

/// A bulk client that notes when it started connecting and when its last
/// byte arrived, in the loop's own clock (close and drain excluded).
struct Timed {
    inner: BulkClient,
    started: Option<Instant>,
    finished: Option<Instant>,
}

impl Timed {
    fn note(&mut self, now: Instant) {
        if self.finished.is_none() && self.inner.result.complete {
            self.finished = Some(now);
        }
    }
}

impl App for Timed {
    fn start(&mut self, now: Instant, ep: &mut Endpoint) {
        self.started = Some(now);
        self.inner.start(now, ep);
    }
    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, event: Event) {
        self.inner.on_event(now, ep, event);
        self.note(now);
    }
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        self.inner.poll(now, ep);
        self.note(now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
    fn is_done(&self) -> bool {
        self.inner.is_done()
    }
}

fn tollgate(certs: &SelfSigned, bytes: u64, conns: usize, server_threads: usize) -> Duration {
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // One server endpoint per thread; several share the port (SO_REUSEPORT).
    let mut addr = loopback;
    let mut servers = Vec::new();
    for _ in 0..server_threads.max(1) {
        let socket = if server_threads > 1 {
            UdpIo::bind_reuse_port(addr).unwrap()
        } else {
            UdpIo::bind(addr).unwrap()
        };
        let mut server = Driver::new(socket, EndpointOptions::default()).unwrap();
        server
            .endpoint()
            .set_server(
                certs.server_crypto().unwrap(),
                ConnectionOptions::with_cca("newreno"),
            )
            .unwrap();
        addr = server.local_addr().unwrap();
        let app = BulkServer::new();
        let shutdown = app.shutdown_flag();
        servers.push((shutdown, spawn(server, app, stop.clone())));
    }
    let client = |share: u64| Timed {
        inner: BulkClient::new(
            addr,
            "localhost",
            request(share),
            ConnectionOptions::with_cca("newreno"),
        ),
        started: None,
        finished: None,
    };
    let apps = if conns == 1 {
        let mut driver = Driver::bind(loopback, EndpointOptions::default()).unwrap();
        driver.endpoint().set_client(certs.client_crypto().unwrap());
        let mut app = client(bytes);
        let (t0, c0) = (Instant::now(), cpu_time(libc::RUSAGE_THREAD));
        driver.run(&mut app, &AtomicBool::new(false)).unwrap();
        if std::env::var_os("GOODPUT_VERBOSE").is_some() {
            eprintln!(
                "  client thread: {:.0} % of a core busy; socket {:?}",
                (cpu_time(libc::RUSAGE_THREAD) - c0).as_secs_f64() / t0.elapsed().as_secs_f64()
                    * 100.0,
                driver.stats()
            );
        }
        vec![app]
    } else {
        let mut pool: Pool<Timed> = Pool::new().unwrap();
        let t0 = Instant::now();
        for _ in 0..conns {
            let crypto = certs.client_crypto().unwrap();
            pool.add(
                UdpIo::bind(loopback).unwrap(),
                EndpointOptions::default(),
                |ep| ep.set_client(crypto),
                client(bytes / conns as u64),
                t0,
            )
            .unwrap();
        }
        pool.run(&AtomicBool::new(false)).unwrap();
        pool.into_apps()
    };
    for a in &apps {
        assert!(a.inner.result.complete, "{:?}", a.inner.result.error);
    }
    let first = apps.iter().filter_map(|a| a.started).min().unwrap();
    let last = apps.iter().filter_map(|a| a.finished).max().unwrap();
    let elapsed = last - first;
    for (shutdown, _) in &servers {
        shutdown.store(true, Ordering::Relaxed);
    }
    for (_, thread) in servers {
        let (server, app) = thread.join().unwrap().unwrap();
        if std::env::var_os("GOODPUT_VERBOSE").is_some() {
            for r in &app.summary.reports {
                eprintln!(
                    "  server conn: lost {} of {} packets, {} congestion events, cwnd {} B",
                    r.quic.path.lost_packets,
                    r.quic.path.sent_packets,
                    r.quic.path.congestion_events,
                    r.quic.path.cwnd
                );
            }
            eprintln!("  server socket: {:?}", server.stats());
        }
    }
    elapsed
}

fn quinn_run(certs: &SelfSigned, bytes: u64, conns: usize) -> Duration {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let transport = || {
            let mut t = quinn::TransportConfig::default();
            let w = quinn::VarInt::from_u32(16 << 20);
            t.stream_receive_window(w)
                .receive_window(w)
                .send_window(16 << 20);
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()));
            Arc::new(t)
        };
        let mut scfg = quinn::ServerConfig::with_crypto(certs.server_crypto().unwrap());
        scfg.transport_config(transport());
        let server = quinn::Endpoint::server(scfg, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        let serve = {
            let server = server.clone();
            tokio::spawn(async move {
                let mut handlers = Vec::new();
                for _ in 0..conns {
                    let incoming = server.accept().await.unwrap();
                    handlers.push(tokio::spawn(async move {
                        let conn = incoming.await.unwrap();
                        let (mut send, mut recv) = conn.accept_bi().await.unwrap();
                        let mut req = [0u8; tollgate_transport::bulk::REQUEST_LEN];
                        recv.read_exact(&mut req).await.unwrap();
                        let req = Request::decode(&req).unwrap();
                        let chunk = bytes::Bytes::from(
                            tollgate_transport::bulk::pattern_slice(0, 32 * 1024).to_vec(),
                        );
                        let mut left = req.size.unwrap();
                        while left > 0 {
                            let n = left.min(chunk.len() as u64) as usize;
                            send.write_chunk(chunk.slice(..n)).await.unwrap();
                            left -= n as u64;
                        }
                        send.finish().unwrap();
                        conn.closed().await;
                    }));
                }
                for h in handlers {
                    h.await.unwrap();
                }
            })
        };
        let each = bytes / conns as u64;
        // From the first connection attempt to the last byte, as for Tollgate.
        let start = Instant::now();
        let mut clients = Vec::new();
        for _ in 0..conns {
            let mut ccfg = quinn::ClientConfig::new(certs.client_crypto().unwrap());
            ccfg.transport_config(transport());
            clients.push(tokio::spawn(async move {
                let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
                client.set_default_client_config(ccfg);
                let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
                let (mut send, mut recv) = conn.open_bi().await.unwrap();
                send.write_all(&request(each).encode()).await.unwrap();
                send.finish().unwrap();
                let mut got = 0u64;
                while let Some(c) = recv.read_chunk(1 << 20, true).await.unwrap() {
                    got += c.bytes.len() as u64;
                }
                let end = Instant::now();
                assert_eq!(got, each);
                conn.close(0u32.into(), b"done");
                client.wait_idle().await;
                end
            }));
        }
        let mut last = start;
        for c in clients {
            last = last.max(c.await.unwrap());
        }
        serve.await.unwrap();
        server.wait_idle().await;
        last - start
    })
}

/// Kernel TCP through iperf3: `(elapsed, bits per CPU-second of both
/// processes)`, or `None` if iperf3 is missing or fails.
fn iperf3(bytes: u64, conns: usize) -> Option<Run> {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
        l.local_addr().ok()?.port()
    };
    let cpu0 = cpu_time(libc::RUSAGE_CHILDREN);
    let mut server = Command::new("iperf3")
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(20));
        let o = Command::new("iperf3")
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-J",
                "-n",
                &bytes.to_string(),
                "-P",
                &conns.to_string(),
            ])
            .output()
            .ok()?;
        if o.status.success() {
            out = Some(o);
            break;
        }
    }
    let status = server.wait().ok()?;
    let out = out?;
    if !status.success() {
        return None;
    }
    let cpu = (cpu_time(libc::RUSAGE_CHILDREN) - cpu0).as_secs_f64();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let sum = &json["end"]["sum_received"];
    let bits = sum["bytes"].as_f64()? * 8.0;
    let seconds = sum["seconds"].as_f64()?;
    Some(Run {
        gbps: bits / seconds / 1e9,
        gbps_per_core: bits / cpu / 1e9,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&String> = raw.iter().filter(|a| !a.starts_with("--")).collect();
    let flag = |name: &str| {
        raw.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")).map(str::to_string))
    };
    let bytes: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000_000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let conn_counts: Vec<usize> = flag("conns")
        .map(|c| c.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8]);
    let only = flag("only");
    let server_threads: usize = flag("server-threads")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let wants = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let have_iperf = wants("iperf3")
        && Command::new("iperf3")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok();
    if wants("iperf3") && !have_iperf {
        println!("note: iperf3 not found, kernel-TCP baseline skipped (apt-get install iperf3)");
    }
    let certs = SelfSigned::generate(&["localhost"]).unwrap();
    for &conns in &conn_counts {
        let (mut t, mut q, mut k) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let mut line = format!("{conns} conn, round {round}:");
            if wants("tollgate") {
                let a = measure(bytes, || tollgate(&certs, bytes, conns, server_threads));
                line += &format!(
                    "  tollgate {:.2} Gbit/s ({:.2}/core)",
                    a.gbps, a.gbps_per_core
                );
                t.push(a);
            }
            if wants("quinn") {
                let b = measure(bytes, || quinn_run(&certs, bytes, conns));
                line += &format!("  quinn {:.2} Gbit/s ({:.2}/core)", b.gbps, b.gbps_per_core);
                q.push(b);
            }
            if have_iperf {
                match iperf3(bytes, conns) {
                    Some(c) => {
                        line += &format!(
                            "  iperf3/TCP {:.2} Gbit/s ({:.2}/core)",
                            c.gbps, c.gbps_per_core
                        );
                        k.push(c);
                    }
                    None => line += "  iperf3 failed",
                }
            }
            println!("{line}");
        }
        let med = |v: &[Run]| {
            (!v.is_empty()).then(|| {
                (
                    median(v.iter().map(|r| r.gbps).collect()),
                    median(v.iter().map(|r| r.gbps_per_core).collect()),
                )
            })
        };
        let (tm, qm, km) = (med(&t), med(&q), med(&k));
        let show = |name: &str, m: Option<(f64, f64)>| {
            if let Some((g, c)) = m {
                println!(
                    "{conns} conn median {name:<10} {g:6.2} Gbit/s  {c:5.2} Gbit/s per core (both ends)  {:4.1} cores for 10 Gbit/s",
                    10.0 / c
                );
            }
        };
        show("tollgate", tm);
        show("quinn", qm);
        show("iperf3/TCP", km);
        if let Some((tg, tc)) = tm {
            for (name, m) in [("quinn", qm), ("iperf3/TCP", km)] {
                if let Some((g, c)) = m {
                    println!(
                        "{conns} conn ratio tollgate/{name}: goodput {:.2}, per core {:.2}",
                        tg / g,
                        tc / c
                    );
                }
            }
        }
    }
}

//! `tollgate serve` under hostile load, on loopback: garbage and truncated
//! Initials from many source ports, more QUIC clients than
//! `--max-connections` (and than `--max-handshakes` at once), clients that
//! vanish mid-transfer and a flood of real Initials from clients that never
//! answer, all while one well-behaved client downloads. Checked: the server
//! survives, its counters by reason match what the test did, its peak RSS
//! stays bounded, and the well-behaved client keeps a stated fraction of
//! the goodput it had alone.
//!
//! One QUIC worker (`--threads 1`), so every limit is the server's limit.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tollgate_transport::bulk::{pattern_slice, BulkClient, BulkResult, Mode, Request};
use tollgate_transport::driver::{spawn, UdpIo};
use tollgate_transport::{
    CloseReason, ConnectionHandle, ConnectionOptions, Dir, Driver, Endpoint, EndpointOptions,
    Event, StreamId,
};

const MAX_CONNECTIONS: usize = 24;
const MAX_HANDSHAKES: usize = 8;
const RETRY_THRESHOLD: usize = 4;
/// Garbage datagrams sprayed.
const GARBAGE: u64 = 4000;
/// Real clients that want to stay connected (more than MAX_CONNECTIONS).
const CROWD: usize = 40;
/// Clients that try one after another once the crowd holds every slot.
const PROBES: usize = 4;
/// Clients that start their handshake and stall (more than MAX_HANDSHAKES).
const STALLED: usize = 32;
/// Clients that start a transfer and vanish.
const VANISH: usize = 6;
/// TCP downloads whose clients stop reading.
const TCP_STUCK: usize = 2;
/// Real Initials from clients that never answer.
const HALF_OPEN: u64 = 2000;
/// The server's peak RSS must stay below this. Measured (debug build, 2
/// cores): 53-58 MiB after the download alone, 64-90 MiB after the flood.
const RSS_LIMIT_KB: u64 = 160 * 1024;
/// The well-behaved client's goodput during the flood, as a fraction of its
/// goodput alone, must be at least this.
const GOODPUT_FRACTION: f64 = 0.3;
const SERVER_NAME: &str = "tollgate";
const TCP_IDLE: &str = "tollgate_serve_timed_out_total{stack=\"tcp\",reason=\"idle\"}";

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Serve {
    child: Child,
    addr: SocketAddr,
    metrics: SocketAddr,
    stdout: Option<JoinHandle<String>>,
}

impl Serve {
    fn start(dir: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .current_dir(dir)
            .args(["serve", "--self-signed", "--listen", "127.0.0.1:0"])
            .args(["--threads", "1", "--metrics", "127.0.0.1:0"])
            .args(["--max-connections", &MAX_CONNECTIONS.to_string()])
            .args(["--max-handshakes", &MAX_HANDSHAKES.to_string()])
            .args(["--retry-threshold", &RETRY_THRESHOLD.to_string()])
            .args(["--handshake-timeout", "1s", "--idle-timeout", "2s"])
            .args(["--duration", "120s"])
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
        let mut out = child.stdout.take().unwrap();
        let stdout = Some(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        }));
        Serve {
            child,
            addr: addr.unwrap(),
            metrics: metrics.unwrap(),
            stdout,
        }
    }

    /// Every sample of a scrape, by name with labels.
    fn scrape(&self) -> Metrics {
        let mut s = std::net::TcpStream::connect(self.metrics).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        Metrics(
            body.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| {
                    let (k, v) = l.rsplit_once(' ')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect(),
        )
    }

    /// Scrape until `cond` holds (the server refreshes its counters every
    /// 500 ms), at most `within`.
    fn wait_for(&self, within: Duration, mut cond: impl FnMut(&Metrics) -> bool) -> Metrics {
        let t0 = Instant::now();
        loop {
            let m = self.scrape();
            if cond(&m) || t0.elapsed() > within {
                return m;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Peak resident set size (VmHWM), KiB.
    fn peak_rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmHWM in /proc/PID/status")
    }

    /// Stop with SIGINT as Ctrl-C would; returns the summary it printed.
    fn stop(mut self) -> String {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(t0.elapsed() < Duration::from_secs(10), "serve did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stdout.take().unwrap().join().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone, Debug)]
struct Metrics(HashMap<String, f64>);

impl Metrics {
    fn get(&self, key: &str) -> u64 {
        *self
            .0
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key} in {:?}", self.0)) as u64
    }
    fn refused(&self, reason: &str) -> u64 {
        self.get(&format!(
            "tollgate_serve_refused_total{{stack=\"quic\",reason=\"{reason}\"}}"
        ))
    }
    fn timed_out(&self, reason: &str) -> u64 {
        self.get(&format!(
            "tollgate_serve_timed_out_total{{stack=\"quic\",reason=\"{reason}\"}}"
        ))
    }
    fn retries(&self) -> u64 {
        self.get("tollgate_serve_retries_total{stack=\"quic\"}")
    }
    fn accepted(&self) -> u64 {
        self.get("tollgate_serve_connections_total{stack=\"quic\"}")
    }
    fn open(&self) -> u64 {
        self.get("tollgate_serve_connections_open{stack=\"quic\"}")
    }
    fn handshakes(&self) -> u64 {
        self.get("tollgate_serve_handshakes{stack=\"quic\"}")
    }
}

fn client_crypto(dir: &Path) -> Arc<quinn_proto::crypto::rustls::QuicClientConfig> {
    tollgate_transport::tls::client_crypto_with_roots_pem(dir.join("tollgate-serve-cert.pem"))
        .unwrap()
}

/// The well-behaved client: one timed download on its own driver thread.
struct Good {
    progress: Arc<AtomicU64>,
    thread: JoinHandle<std::io::Result<(Driver, BulkClient)>>,
}

impl Good {
    fn start(dir: &Path, server: SocketAddr, secs: u64) -> Good {
        let mut driver = Driver::new(
            UdpIo::bind("127.0.0.1:0".parse().unwrap()).unwrap(),
            EndpointOptions::default(),
        )
        .unwrap();
        driver.endpoint().set_client(client_crypto(dir));
        let request = Request {
            mode: Mode::Download,
            size: None,
            duration: Some(Duration::from_secs(secs)),
        };
        let app = BulkClient::new(server, SERVER_NAME, request, ConnectionOptions::default());
        let progress = app.progress();
        let thread = spawn(driver, app, Arc::new(AtomicBool::new(false)));
        Good { progress, thread }
    }

    fn bytes(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }

    /// The result, and when the transfer's data ended.
    fn finish(self) -> (BulkResult, Instant) {
        let app = self.thread.join().unwrap().unwrap().1;
        let connected = app.connected_at().expect("connected");
        let end = connected + app.result.elapsed;
        (app.result, end)
    }
}

/// A QUIC client on its own socket, driven by hand from the test thread.
struct Peer {
    sock: UdpSocket,
    ep: Endpoint,
    ch: ConnectionHandle,
    connected: bool,
    /// Closed with CONNECTION_REFUSED.
    refused: bool,
    /// Closed otherwise.
    closed: Option<CloseReason>,
    /// Retry packets received.
    retries: u64,
    /// The transfer's stream and the bytes moved on it.
    stream: Option<StreamId>,
    moved: u64,
    /// When to send the next keep-alive (a one-byte unidirectional stream,
    /// which the server stops): set for clients that hold a connection.
    keepalive: Option<Instant>,
    /// Flights this client may still send (`None`: any): a stalled client
    /// sends its first flight, and one more per Retry, then nothing.
    allowance: Option<u32>,
}

impl Peer {
    fn connect(
        server: SocketAddr,
        crypto: Arc<quinn_proto::crypto::rustls::QuicClientConfig>,
    ) -> Peer {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_nonblocking(true).unwrap();
        let mut ep = Endpoint::new(EndpointOptions::default());
        ep.set_client(crypto);
        let ch = ep
            .connect(
                Instant::now(),
                server,
                SERVER_NAME,
                ConnectionOptions::default(),
            )
            .unwrap();
        Peer {
            sock,
            ep,
            ch,
            connected: false,
            refused: false,
            closed: None,
            retries: 0,
            stream: None,
            moved: 0,
            allowance: None,
            keepalive: None,
        }
    }

    /// A client that holds its connection once it has it.
    fn holding(
        server: SocketAddr,
        crypto: Arc<quinn_proto::crypto::rustls::QuicClientConfig>,
    ) -> Peer {
        Peer {
            keepalive: Some(Instant::now()),
            ..Peer::connect(server, crypto)
        }
    }

    /// A client that starts its handshake (answering a Retry) and then
    /// never sends another packet.
    fn stalled(
        server: SocketAddr,
        crypto: Arc<quinn_proto::crypto::rustls::QuicClientConfig>,
    ) -> Peer {
        Peer {
            allowance: Some(1),
            ..Peer::connect(server, crypto)
        }
    }

    fn resolved(&self) -> bool {
        self.connected || self.refused || self.closed.is_some()
    }

    /// Receive, fire timers, run `on_event`, send.
    fn pump(&mut self, mut on_event: impl FnMut(&mut Peer, Event)) {
        let now = Instant::now();
        let mut buf = [0u8; 2048];
        loop {
            match self.sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    if is_retry(&buf[..n]) {
                        self.retries += 1;
                        if let Some(a) = self.allowance.as_mut() {
                            *a += 1;
                        }
                    }
                    self.ep
                        .handle_datagram_owned(now, from, None, BytesMut::from(&buf[..n]));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => break,
            }
        }
        self.ep.handle_timeout(now);
        if let (true, Some(at)) = (self.connected, self.keepalive) {
            if now >= at {
                self.keepalive = Some(now + Duration::from_millis(400));
                if let Ok(Some(id)) = self.ep.open(self.ch, Dir::Uni) {
                    let _ = self.ep.write(self.ch, id, b"k");
                    let _ = self.ep.finish(self.ch, id);
                }
            }
        }
        while let Some(ev) = self.ep.poll_event() {
            match &ev {
                Event::Connected(_) => self.connected = true,
                Event::Closed(_, CloseReason::Other(why)) if why.contains("refused") => {
                    self.refused = true
                }
                Event::Closed(_, reason) => self.closed = Some(reason.clone()),
                _ => {}
            }
            on_event(self, ev);
        }
        self.flush(now);
    }

    fn flush(&mut self, now: Instant) {
        let mut out = Vec::new();
        let send = self.allowance.is_none_or(|a| a > 0);
        let mut sent = false;
        while let Some(t) = self.ep.poll_transmit(now, &mut out) {
            if !send {
                continue;
            }
            for d in out[..t.size].chunks(t.segment_size.unwrap_or(t.size)) {
                let _ = self.sock.send_to(d, t.destination);
                sent = true;
            }
        }
        if let (true, Some(a)) = (sent, self.allowance.as_mut()) {
            *a -= 1;
        }
    }
}

/// A QUIC v1 Retry packet (long header, type 3).
fn is_retry(d: &[u8]) -> bool {
    d.len() > 5 && d[0] & 0xC0 == 0xC0 && (d[0] >> 4) & 3 == 3 && d[1..5] == [0, 0, 0, 1]
}

/// xorshift64: the garbage's bytes.
fn noise(seed: &mut u64, out: &mut [u8]) {
    for b in out {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *b = *seed as u8;
    }
}

/// Garbage datagram `i`: random short-header packets, truncated Initials,
/// random Handshake packets, and full-size Initials whose header parses
/// but whose payload is noise.
fn garbage(i: u64, seed: &mut u64) -> Vec<u8> {
    let mut len = [0u8; 2];
    noise(seed, &mut len);
    let n = usize::from(u16::from_le_bytes(len));
    let mut d = match i % 4 {
        0 => vec![0; 1 + n % 1400],
        1 => vec![0; 30 + n % 1100],
        2 => vec![0; 40 + n % 1300],
        _ => vec![0; 1200 + n % 200],
    };
    noise(seed, &mut d);
    match i % 4 {
        0 => d[0] = 0x40 | (d[0] & 0x3f),
        1 | 3 => {
            // Initial, version 1, 8-byte connection ids, no token, the
            // length of what follows.
            d[0] = 0xC0 | (d[0] & 0x0f);
            d[1..5].copy_from_slice(&1u32.to_be_bytes());
            d[5] = 8;
            d[14] = 8;
            d[23] = 0;
            let rest = (d.len() - 26) as u16;
            d[24..26].copy_from_slice(&(0x4000 | rest).to_be_bytes());
        }
        _ => {
            d[0] = 0xE0 | (d[0] & 0x0f);
            d[1..5].copy_from_slice(&1u32.to_be_bytes());
        }
    }
    d
}

/// Send `datagrams` from `ports` sockets in turn, at most `per_ms` a millisecond.
fn spray(
    server: SocketAddr,
    datagrams: impl Iterator<Item = Vec<u8>>,
    ports: usize,
    per_ms: usize,
) -> u64 {
    let socks: Vec<UdpSocket> = (0..ports)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut sent = 0u64;
    let t0 = Instant::now();
    for (i, d) in datagrams.enumerate() {
        socks[i % ports].send_to(&d, server).unwrap();
        sent += 1;
        let due = Duration::from_micros(1000 * sent / per_ms as u64);
        if let Some(wait) = due.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    sent
}

/// Real first Initials (1200 bytes each) of `n` connections nobody will
/// finish: what a spoofed-source flood carries.
fn half_open_initials(server: SocketAddr, dir: &Path, n: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ep = Endpoint::new(EndpointOptions::default());
    ep.set_client(client_crypto(dir));
    let now = Instant::now();
    let mut buf = Vec::new();
    while (out.len() as u64) < n {
        // A fresh endpoint every 200 connections keeps its tables small.
        if out.len() % 200 == 0 {
            ep = Endpoint::new(EndpointOptions::default());
            ep.set_client(client_crypto(dir));
        }
        ep.connect(now, server, SERVER_NAME, ConnectionOptions::default())
            .unwrap();
        let t = ep.poll_transmit(now, &mut buf).expect("an Initial");
        out.push(buf[..t.segment_size.unwrap_or(t.size)].to_vec());
        // The rest of this connection's flight, if any, is not wanted.
        while ep.poll_transmit(now, &mut buf).is_some() {}
    }
    out
}

#[test]
fn serve_survives_hostile_load_and_counts_it_by_reason() {
    let t_test = Instant::now();
    let dir = temp_dir("serve-hostile");
    let serve = Serve::start(&dir);
    let server = serve.addr;

    // The well-behaved client alone: a 2 s download.
    let (alone, _) = Good::start(&dir, server, 2).finish();
    assert_eq!(alone.error, None, "{alone:?}");
    let rss_alone_kb = serve.peak_rss_kb();
    let goodput_alone = alone.goodput_bps();
    assert!(goodput_alone > 0.0);

    let crypto = client_crypto(&dir);
    let initials = half_open_initials(server, &dir, HALF_OPEN);
    // The same client again, for long enough to outlast the flood (about
    // 3.5 s here; if the flood lasts longer, its first 8 s are compared).
    let good = Good::start(&dir, server, 8);
    let t = Instant::now();
    while good.bytes() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "download did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let base = serve.wait_for(Duration::from_secs(3), |m| m.accepted() == 2);
    assert_eq!(base.accepted(), 2, "the two good connections");
    let (flood_start, bytes_start) = (Instant::now(), good.bytes());

    // (a) Garbage from 64 source ports.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let sprayed = spray(server, (0..GARBAGE).map(|i| garbage(i, &mut seed)), 64, 20);
    assert_eq!(sprayed, GARBAGE);

    // (b) More clients than --max-connections, in waves of 8 from their own
    // ports, each holding its connection once it has it.
    let mut crowd: Vec<Peer> = Vec::new();
    let t = Instant::now();
    while crowd.len() < CROWD || !crowd.iter().all(Peer::resolved) {
        if crowd.len() < CROWD
            && t.elapsed() >= Duration::from_millis(100) * (crowd.len() / 8) as u32
        {
            for _ in 0..8 {
                crowd.push(Peer::holding(server, crypto.clone()));
            }
        }
        for p in &mut crowd {
            p.pump(|_, _| {});
        }
        assert!(t.elapsed() < Duration::from_secs(20), "crowd unresolved");
        std::thread::sleep(Duration::from_millis(1));
    }
    let crowd_connected = crowd.iter().filter(|p| p.connected).count() as u64;
    let crowd_refused = crowd.iter().filter(|p| p.refused).count() as u64;
    let crowd_retries: u64 = crowd.iter().map(|p| p.retries).sum();
    let others: Vec<_> = crowd.iter().filter_map(|p| p.closed.clone()).collect();
    assert!(
        others.is_empty(),
        "crowd clients closed otherwise: {others:?}"
    );
    // The server is full now: one more client after another is refused.
    let mut probes_refused = 0;
    for _ in 0..PROBES {
        let mut probe = Peer::connect(server, crypto.clone());
        let t = Instant::now();
        while !probe.resolved() {
            probe.pump(|_, _| {});
            for p in &mut crowd {
                p.pump(|_, _| {});
            }
            assert!(t.elapsed() < Duration::from_secs(10), "probe unresolved");
            std::thread::sleep(Duration::from_millis(1));
        }
        probes_refused += u64::from(probe.refused);
    }
    assert_eq!(probes_refused, PROBES as u64, "a full server refuses");
    let peak_open = serve.scrape().open();
    // Leave cleanly.
    for p in &mut crowd {
        if p.connected {
            p.ep.close(Instant::now(), p.ch, 0, b"");
            p.flush(Instant::now());
        }
    }
    drop(crowd);
    // Their slots free once the server has drained them.
    // (The counters are refreshed every 500 ms, and the open-connection
    // gauge only at those refreshes, so a scrape soon after the close can
    // still show the count from before the crowd came: let two refreshes
    // pass first, then wait for the one that counts the crowd and the slots.)
    std::thread::sleep(Duration::from_millis(1100));
    let m = serve.wait_for(Duration::from_secs(5), |m| {
        m.accepted() - base.accepted() == crowd_connected && m.open() <= 1
    });
    assert!(m.open() <= 1, "crowd connections still open: {}", m.open());

    // (c) Clients that start their handshake, answer the Retry, and stall:
    // at most MAX_HANDSHAKES are held, the others are refused.
    let mut stalled: Vec<Peer> = (0..STALLED)
        .map(|_| Peer::stalled(server, crypto.clone()))
        .collect();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(400) {
        for p in &mut stalled {
            p.pump(|_, _| {});
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let stalled_refused = stalled.iter().filter(|p| p.refused).count() as u64;
    let stalled_retries: u64 = stalled.iter().map(|p| p.retries).sum();
    let stalled_accepted = STALLED as u64 - stalled_refused;
    drop(stalled);
    // The stalled handshakes end at the handshake timeout (1 s).
    let m = serve.wait_for(Duration::from_secs(5), |m| {
        m.timed_out("handshake") - base.timed_out("handshake") == stalled_accepted
            && m.handshakes() == 0
    });
    assert_eq!(m.handshakes(), 0, "stalled handshakes still in progress");

    // (d) Clients that start a transfer (half downloads, half uploads) and
    // vanish without a word once 256 KiB have moved.
    let mut vanish: Vec<Peer> = (0..VANISH)
        .map(|_| Peer::connect(server, crypto.clone()))
        .collect();
    let t = Instant::now();
    while vanish.iter().any(|p| p.moved < 256 * 1024) {
        for (i, p) in vanish.iter_mut().enumerate() {
            let upload = i % 2 == 1;
            p.pump(|p, ev| match ev {
                Event::Connected(ch) => {
                    let id = p.ep.open(ch, Dir::Bi).unwrap().unwrap();
                    let mode = if upload { Mode::Upload } else { Mode::Download };
                    let req = Request {
                        mode,
                        size: None,
                        duration: Some(Duration::from_secs(60)),
                    };
                    p.ep.write(ch, id, &req.encode()).unwrap();
                    if !upload {
                        p.ep.finish(ch, id).unwrap();
                    }
                    p.stream = Some(id);
                }
                Event::Readable(ch, id) => {
                    let mut n = 0;
                    let _ = p.ep.read_unordered(ch, id, usize::MAX, |_, d| n += d.len());
                    p.moved += n as u64;
                }
                _ => {}
            });
            if let (true, Some(id)) = (upload, p.stream) {
                // The pattern the server checks every byte against.
                let chunk = |moved| pattern_slice(moved, 16 * 1024);
                while let Ok(n) = p.ep.write(p.ch, id, chunk(p.moved)) {
                    if n == 0 {
                        break;
                    }
                    p.moved += n as u64;
                }
                p.flush(Instant::now());
            }
            assert!(
                p.closed.is_none() && !p.refused,
                "vanishing client {i} failed: refused {}, {:?}",
                p.refused,
                p.closed
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "transfers did not start"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let vanish_retries: u64 = vanish.iter().map(|p| p.retries).sum();
    drop(vanish);
    // Over TCP: downloads whose clients stop reading (the server's writes
    // make no progress once the socket buffers are full).
    let stuck: Vec<std::net::TcpStream> = (0..TCP_STUCK)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(server).unwrap();
            let req = Request {
                mode: Mode::Download,
                size: None,
                duration: Some(Duration::from_secs(60)),
            };
            s.write_all(&req.encode()).unwrap();
            s
        })
        .collect();

    // (e) Real Initials of clients that never answer, from 256 ports.
    let half_open = spray(server, initials.into_iter(), 256, 4);
    let (flood_end, bytes_end) = (Instant::now(), good.bytes());

    // Let the vanished clients and the half-open handshakes time out
    // (idle 2 s, handshake 1 s).
    let known_accepted = crowd_connected + stalled_accepted + VANISH as u64;
    let end = serve.wait_for(Duration::from_secs(10), |m| {
        m.timed_out("idle") - base.timed_out("idle") >= VANISH as u64
            && m.get(TCP_IDLE) >= TCP_STUCK as u64
            && m.handshakes() == 0
            && m.timed_out("handshake") - base.timed_out("handshake")
                + crowd_connected
                + VANISH as u64
                == m.accepted() - base.accepted()
    });
    let (good, good_end) = good.finish();
    assert_eq!(good.error, None, "the well-behaved client: {good:?}");
    let flood_secs = (flood_end.min(good_end) - flood_start).as_secs_f64();
    let goodput_flood = (bytes_end - bytes_start) as f64 * 8.0 / flood_secs;
    let rss_kb = serve.peak_rss_kb();
    let d = |f: &dyn Fn(&Metrics) -> u64| f(&end) - f(&base);
    let garbage_counted = d(&|m| m.refused("garbage")) + d(&|m| m.refused("invalid_initial"));
    let refused = d(&|m| m.refused("full")) + d(&|m| m.refused("handshake_limit"));
    let half_open_accepted = d(&|m| m.accepted()) - known_accepted;
    let half_open_retried = d(&|m| m.retries()) - crowd_retries - stalled_retries - vanish_retries;
    eprintln!(
        "flood {flood_secs:.1} s; goodput alone {:.1} Mbit/s, during the flood {:.1} Mbit/s ({:.0} %); \
         peak RSS {} MiB (after the download alone {} MiB); garbage {sprayed} sent, {garbage_counted} counted \
         (garbage {}, invalid_initial {}); crowd of {CROWD}: {crowd_connected} connected, \
         {crowd_refused} refused, {crowd_retries} retries, then {probes_refused} of {PROBES} refused; stalled {STALLED}: {stalled_accepted} \
         held, {stalled_refused} refused, {stalled_retries} retries; refused in all: full {}, \
         handshake_limit {}; vanish retries {vanish_retries}; \
         half-open {half_open} sent: {half_open_accepted} accepted, {half_open_retried} retried, \
         timed out (handshake) {}; vanished {VANISH}: timed out (idle) {}; TCP stuck {TCP_STUCK}: timed out (idle) {}; test so far {:.1} s",
        goodput_alone / 1e6,
        goodput_flood / 1e6,
        100.0 * goodput_flood / goodput_alone,
        rss_kb / 1024,
        rss_alone_kb / 1024,
        d(&|m| m.refused("garbage")),
        d(&|m| m.refused("invalid_initial")),
        d(&|m| m.refused("full")),
        d(&|m| m.refused("handshake_limit")),
        d(&|m| m.timed_out("handshake")),
        d(&|m| m.timed_out("idle")),
        end.get(TCP_IDLE),
        t_test.elapsed().as_secs_f64(),
    );

    // Garbage: every datagram counted as garbage or as an Initial that
    // failed authentication (loopback may lose a few under load).
    assert!(
        (GARBAGE * 98 / 100..=GARBAGE).contains(&garbage_counted),
        "garbage counted {garbage_counted} of {GARBAGE}"
    );
    // The crowd: the server holds at most --max-connections (the good
    // client has one), every client it turned away was told so, and every
    // Retry it sent reached a client.
    assert_eq!(crowd_connected, (MAX_CONNECTIONS - 1) as u64);
    assert_eq!(crowd_connected + crowd_refused, CROWD as u64);
    assert_eq!(
        refused,
        crowd_refused + probes_refused + stalled_refused,
        "refusals counted = refusals seen"
    );
    // Stalled handshakes: at most MAX_HANDSHAKES held at once.
    assert!(stalled_accepted <= MAX_HANDSHAKES as u64);
    assert!(
        d(&|m| m.refused("handshake_limit")) >= (STALLED - MAX_HANDSHAKES) as u64,
        "the handshake cap refused the stalled clients beyond it"
    );
    assert!(
        d(&|m| m.refused("full")) >= PROBES as u64,
        "the connection limit refused the probes"
    );
    assert!(peak_open <= MAX_CONNECTIONS as u64);
    // Half-open flood: each Initial accepted (at most RETRY_THRESHOLD at a
    // time) or answered with a Retry; the accepted ones time out.
    assert_eq!(half_open_accepted + half_open_retried, half_open);
    assert!(
        half_open_retried >= half_open / 2,
        "Retry under load: {half_open_retried} of {half_open}"
    );
    assert_eq!(
        d(&|m| m.timed_out("handshake")),
        half_open_accepted + stalled_accepted
    );
    assert_eq!(end.handshakes(), 0);
    // Vanished clients: closed by the idle timeout.
    assert_eq!(d(&|m| m.timed_out("idle")), VANISH as u64);
    assert_eq!(end.get(TCP_IDLE), TCP_STUCK as u64);
    drop(stuck);
    // The metrics endpoint's own counters are exported.
    assert_eq!(end.get("tollgate_serve_metrics_http_refused_total"), 0);
    // Bounded memory, and the well-behaved client kept going.
    assert!(rss_kb < RSS_LIMIT_KB, "peak RSS {rss_kb} KiB");
    assert!(
        goodput_flood >= GOODPUT_FRACTION * goodput_alone,
        "goodput during the flood {goodput_flood:.0} bit/s < {GOODPUT_FRACTION} x {goodput_alone:.0} bit/s alone"
    );
    // The final summary has the same counts.
    let summary = serve.stop();
    eprintln!("{summary}");
    assert!(summary.contains(" 0 mismatched"), "{summary}");
    assert!(
        summary.contains(&format!("quic full {}", end.refused("full"))),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("retries sent: quic {}", end.retries())),
        "{summary}"
    );
}

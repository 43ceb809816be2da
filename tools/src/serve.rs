//! `tollgate serve`: the load generator's server.
//!
//! On every listen address it runs `threads` QUIC worker threads, each a mio
//! [`Driver`] with its own UDP socket bound with `SO_REUSEPORT` to the same
//! address (the kernel spreads client connections over them by 4-tuple), and
//! one kernel-TCP acceptor on the same port number with a thread per
//! connection. Both speak the bulk protocol
//! ([`tollgate_transport::bulk`]): uploads are verified byte by byte and
//! answered with progress counts; downloads are sent with the congestion
//! control the client asked for, if `--allow-cca` permits it.
//!
//! Under load each QUIC worker admits new connections by the [`Admission`]
//! in [`ServeOptions`]: unvalidated clients get a Retry once
//! `retry_threshold` of their handshakes are in progress, at most
//! `max_handshakes` handshakes run at once, a handshake is abandoned after
//! `handshake_timeout`, and a connection whose peer goes silent is closed
//! after `idle_timeout`; every connection turned away or timed out is
//! counted by reason. The TCP side drops clients that send no request
//! within [`tcp::REQUEST_TIMEOUT`] or whose transfer stalls for
//! `idle_timeout`.
//!
//! Live totals (connections, bytes, per-variant bytes, refusals, Retries and
//! timeouts by reason) are kept in atomics that the QUIC workers refresh
//! every [`SCAN`]; [`Live::render_prometheus`] encodes them for `tollgate
//! serve --metrics` (served by `tollgate-metrics-http`).

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use quinn_proto::crypto::rustls::QuicServerConfig;
use tollgate_transport::bulk::{BulkServer, ServerSummary};
use tollgate_transport::driver::UdpIo;
use tollgate_transport::{
    udp, Admission, App, ConnectionOptions, Driver, Endpoint, EndpointOptions, Event,
};

use crate::load::tcp::{self, TcpServeCounters};

/// How often QUIC workers refresh the live counters.
pub const SCAN: Duration = Duration::from_millis(500);

/// What `tollgate serve` runs.
#[derive(Clone)]
pub struct ServeOptions {
    /// Addresses to listen on (UDP for QUIC and TCP, same port numbers).
    pub listen: Vec<SocketAddr>,
    /// QUIC worker threads per address.
    pub threads: usize,
    /// TLS configuration.
    pub crypto: Arc<QuicServerConfig>,
    /// Registry names (QUIC) and kernel names (TCP) a client may request; `None` = any.
    pub allow_cca: Option<Vec<String>>,
    /// CCA of QUIC downloads that request none, and of the server's side of uploads.
    pub default_cca: String,
    /// Most QUIC connections per worker and TCP connections per address.
    pub max_connections: usize,
    /// Retry, handshake cap and handshake timeout of each QUIC worker.
    pub admission: Admission,
    /// A connection whose peer sends nothing for this long is closed (QUIC:
    /// the idle timeout the server offers; TCP: no transfer progress).
    pub idle_timeout: Duration,
}

/// Final reports kept per QUIC worker (the summary prints the first 64).
const REPORTS_KEPT: usize = 64;

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("listen", &self.listen)
            .field("threads", &self.threads)
            .field("allow_cca", &self.allow_cca)
            .field("max_connections", &self.max_connections)
            .field("admission", &self.admission)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

/// Live totals, shared by every server thread.
#[derive(Debug, Default)]
pub struct Live {
    /// QUIC connections accepted.
    pub quic_accepted: AtomicU64,
    /// QUIC connections open now (summed over workers at each scan).
    pub quic_open: Vec<AtomicU64>,
    /// QUIC connections refused (full) per worker.
    pub quic_refused: Vec<AtomicU64>,
    /// QUIC connections refused because `max_handshakes` were in progress, per worker.
    pub quic_refused_handshakes: Vec<AtomicU64>,
    /// New QUIC clients dropped unanswered (the response queue was full), per worker.
    pub quic_ignored: Vec<AtomicU64>,
    /// Initials that failed authentication at accept (garbage with a
    /// valid-looking header), per worker.
    pub quic_invalid_initial: Vec<AtomicU64>,
    /// New QUIC clients answered with a Retry, per worker.
    pub quic_retry: Vec<AtomicU64>,
    /// QUIC handshakes in progress now, per worker.
    pub quic_handshakes: Vec<AtomicU64>,
    /// QUIC connections closed by the idle timeout (peer vanished), per worker.
    pub quic_timed_out_idle: Vec<AtomicU64>,
    /// QUIC handshakes abandoned (handshake or idle timeout), per worker.
    pub quic_timed_out_handshake: Vec<AtomicU64>,
    /// QUIC downloads refused for their CCA, per worker.
    pub quic_refused_cca: Vec<AtomicU64>,
    /// Datagrams that were not QUIC of a known connection (garbage), per worker.
    pub quic_garbage: Vec<AtomicU64>,
    /// Application bytes sent, per worker and variant (index = DSCP codepoint).
    pub sent_by_variant: Vec<[AtomicU64; 64]>,
    /// Application bytes received, per worker and variant the client marked
    /// (the DSCP codepoint most of its datagrams carried; 0 = unmarked).
    pub received_by_variant: Vec<[AtomicU64; 64]>,
    /// The TCP side.
    pub tcp: TcpServeCounters,
}

impl Live {
    fn new(workers: usize) -> Self {
        let zeros = || (0..workers).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Live {
            quic_open: zeros(),
            quic_refused: zeros(),
            quic_refused_handshakes: zeros(),
            quic_ignored: zeros(),
            quic_invalid_initial: zeros(),
            quic_retry: zeros(),
            quic_handshakes: zeros(),
            quic_timed_out_idle: zeros(),
            quic_timed_out_handshake: zeros(),
            quic_refused_cca: zeros(),
            quic_garbage: zeros(),
            sent_by_variant: (0..workers)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            received_by_variant: (0..workers)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            ..Live::default()
        }
    }

    fn sum(v: &[AtomicU64]) -> u64 {
        v.iter().map(|a| a.load(Ordering::Relaxed)).sum()
    }

    /// Per variant (DSCP codepoint): bytes sent and received over QUIC.
    pub fn variant_bytes(&self) -> Vec<(u8, u64, u64)> {
        (0..64u8)
            .map(|v| {
                let i = usize::from(v);
                let s = self
                    .sent_by_variant
                    .iter()
                    .map(|a| a[i].load(Ordering::Relaxed))
                    .sum();
                let r = self
                    .received_by_variant
                    .iter()
                    .map(|a| a[i].load(Ordering::Relaxed))
                    .sum();
                (v, s, r)
            })
            .filter(|(_, s, r)| s + r > 0)
            .collect()
    }

    /// The counts by reason, as the metrics and the final summary give
    /// them: (stack, reason, count) of connections, requests or datagrams
    /// refused.
    pub fn refused_by_reason(&self) -> Vec<(&'static str, &'static str, u64)> {
        let t = &self.tcp;
        vec![
            ("quic", "full", Self::sum(&self.quic_refused)),
            (
                "quic",
                "handshake_limit",
                Self::sum(&self.quic_refused_handshakes),
            ),
            ("quic", "busy", Self::sum(&self.quic_ignored)),
            (
                "quic",
                "invalid_initial",
                Self::sum(&self.quic_invalid_initial),
            ),
            ("quic", "garbage", Self::sum(&self.quic_garbage)),
            ("quic", "cca", Self::sum(&self.quic_refused_cca)),
            ("tcp", "full", t.refused_full.load(Ordering::Relaxed)),
            ("tcp", "cca", t.refused_cca.load(Ordering::Relaxed)),
            ("tcp", "bad_request", t.bad_requests.load(Ordering::Relaxed)),
        ]
    }

    /// (stack, reason, count) of connections closed by a timeout.
    pub fn timed_out_by_reason(&self) -> Vec<(&'static str, &'static str, u64)> {
        let t = &self.tcp;
        vec![
            ("quic", "idle", Self::sum(&self.quic_timed_out_idle)),
            (
                "quic",
                "handshake",
                Self::sum(&self.quic_timed_out_handshake),
            ),
            ("tcp", "idle", t.timed_out_idle.load(Ordering::Relaxed)),
            (
                "tcp",
                "request",
                t.timed_out_request.load(Ordering::Relaxed),
            ),
        ]
    }

    /// New QUIC clients answered with a Retry.
    pub fn retries(&self) -> u64 {
        Self::sum(&self.quic_retry)
    }

    /// The Prometheus text exposition of the totals.
    pub fn render_prometheus(&self) -> String {
        use prometheus_client::encoding::text::encode;
        use prometheus_client::metrics::counter::Counter;
        use prometheus_client::metrics::family::Family;
        use prometheus_client::metrics::gauge::Gauge;
        use prometheus_client::registry::Registry;

        let mut reg = Registry::with_prefix("tollgate_serve");
        let conns = Family::<Vec<(String, String)>, Counter>::default();
        let open = Family::<Vec<(String, String)>, Gauge>::default();
        let bytes = Family::<Vec<(String, String)>, Counter>::default();
        let refused = Family::<Vec<(String, String)>, Counter>::default();
        let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        conns
            .get_or_create(&l(&[("stack", "quic")]))
            .inc_by(self.quic_accepted.load(Ordering::Relaxed));
        conns
            .get_or_create(&l(&[("stack", "tcp")]))
            .inc_by(self.tcp.accepted.load(Ordering::Relaxed));
        open.get_or_create(&l(&[("stack", "quic")]))
            .set(Self::sum(&self.quic_open) as i64);
        open.get_or_create(&l(&[("stack", "tcp")]))
            .set(self.tcp.open.load(Ordering::Relaxed) as i64);
        for (stack, reason, n) in self.refused_by_reason() {
            refused
                .get_or_create(&l(&[("stack", stack), ("reason", reason)]))
                .inc_by(n);
        }
        let timed_out = Family::<Vec<(String, String)>, Counter>::default();
        for (stack, reason, n) in self.timed_out_by_reason() {
            timed_out
                .get_or_create(&l(&[("stack", stack), ("reason", reason)]))
                .inc_by(n);
        }
        let retries = Family::<Vec<(String, String)>, Counter>::default();
        retries
            .get_or_create(&l(&[("stack", "quic")]))
            .inc_by(self.retries());
        let handshakes = Family::<Vec<(String, String)>, Gauge>::default();
        handshakes
            .get_or_create(&l(&[("stack", "quic")]))
            .set(Self::sum(&self.quic_handshakes) as i64);
        for (v, sent, recv) in self.variant_bytes() {
            let name = crate::results::variant_name(v);
            bytes
                .get_or_create(&l(&[
                    ("stack", "quic"),
                    ("variant", &name),
                    ("direction", "sent"),
                ]))
                .inc_by(sent);
            bytes
                .get_or_create(&l(&[
                    ("stack", "quic"),
                    ("variant", &name),
                    ("direction", "received"),
                ]))
                .inc_by(recv);
        }
        bytes
            .get_or_create(&l(&[
                ("stack", "tcp"),
                ("variant", "all"),
                ("direction", "sent"),
            ]))
            .inc_by(self.tcp.bytes_sent.load(Ordering::Relaxed));
        bytes
            .get_or_create(&l(&[
                ("stack", "tcp"),
                ("variant", "all"),
                ("direction", "received"),
            ]))
            .inc_by(self.tcp.bytes_received.load(Ordering::Relaxed));
        reg.register("connections", "Connections accepted", conns);
        reg.register("connections_open", "Connections open now", open);
        reg.register(
            "refused",
            "Connections, requests or datagrams refused, by reason",
            refused,
        );
        reg.register(
            "retries",
            "New QUIC clients answered with a Retry (address validation under load)",
            retries,
        );
        reg.register(
            "timed_out",
            "Connections closed by a timeout, by reason (idle: the peer went silent; handshake: never completed; request: no complete request)",
            timed_out,
        );
        reg.register("handshakes", "QUIC handshakes in progress now", handshakes);
        reg.register(
            "bytes",
            "Application bytes by stack, variant (of the data sender: the server's CCA for sent, the client's DSCP marking for received) and direction; rate() gives per-variant rates",
            bytes,
        );
        let mut out = String::new();
        let _ = encode(&mut out, &reg);
        out
    }
}

/// A QUIC worker's app: the bulk server plus live counters.
#[derive(Debug)]
struct WorkerApp {
    inner: BulkServer,
    live: Arc<Live>,
    worker: usize,
    next_scan: Option<Instant>,
    /// Bytes of drained connections, per variant: (sent, received).
    drained: [(u64, u64); 64],
}

impl WorkerApp {
    fn scan(&mut self, now: Instant, ep: &Endpoint) {
        self.next_scan = Some(now + SCAN);
        let mut per: [(u64, u64); 64] = self.drained;
        for &ch in ep.handles() {
            if let Some(((own, tx), (peer, rx))) = ep.conn_bytes(ch) {
                per[usize::from(own & 63)].0 += tx;
                per[usize::from(peer & 63)].1 += rx;
            }
        }
        let w = self.worker;
        for (i, (s, r)) in per.iter().enumerate() {
            self.live.sent_by_variant[w][i].store(*s, Ordering::Relaxed);
            self.live.received_by_variant[w][i].store(*r, Ordering::Relaxed);
        }
        let st = ep.endpoint_stats();
        self.live.quic_open[w].store(ep.connection_count() as u64, Ordering::Relaxed);
        let (handshakes, _) = ep.handshakes_in_progress();
        let live = &self.live;
        for (v, n) in [
            (&live.quic_refused, st.refused),
            (&live.quic_refused_handshakes, st.refused_handshakes),
            (&live.quic_ignored, st.ignored),
            (&live.quic_invalid_initial, st.accept_failed),
            (&live.quic_retry, st.retry_sent),
            (&live.quic_handshakes, handshakes as u64),
            (&live.quic_timed_out_idle, st.timed_out_idle),
            (&live.quic_timed_out_handshake, st.timed_out_handshake),
        ] {
            v[w].store(n, Ordering::Relaxed);
        }
        self.live.quic_garbage[w].store(st.datagrams_dropped, Ordering::Relaxed);
        self.live.quic_refused_cca[w].store(self.inner.summary.refused_cca, Ordering::Relaxed);
    }
}

impl App for WorkerApp {
    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, event: Event) {
        match &event {
            Event::Accepted(_) => {
                self.live.quic_accepted.fetch_add(1, Ordering::Relaxed);
            }
            Event::Drained(r) => {
                self.drained[usize::from(r.cca.variant.dscp() & 63)].0 += r.app_tx_bytes;
                let peer = tollgate_transport::endpoint::dominant_dscp(&r.peer_dscp);
                self.drained[usize::from(peer & 63)].1 += r.app_rx_bytes;
            }
            _ => {}
        }
        self.inner.on_event(now, ep, event);
    }

    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        self.inner.poll(now, ep);
        if self.next_scan.is_none_or(|t| now >= t) {
            self.scan(now, ep);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.inner.poll_timeout(), self.next_scan]
            .into_iter()
            .flatten()
            .min()
    }

    fn is_done(&self) -> bool {
        self.inner.is_done()
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    /// The bound addresses (ports resolved when 0 was asked for).
    pub addrs: Vec<SocketAddr>,
    /// Live totals.
    pub live: Arc<Live>,
    stop: Arc<AtomicBool>,
    quic: Vec<JoinHandle<std::io::Result<(Driver, WorkerApp)>>>,
    tcp: Vec<JoinHandle<()>>,
}

/// Everything the server did, at the end.
#[derive(Debug, Default)]
pub struct ServeSummary {
    /// QUIC totals over all workers (reports of the first 1024 connections per worker).
    pub quic: ServerSummary,
}

/// Start serving; returns once every socket is bound.
pub fn start(opts: &ServeOptions) -> anyhow::Result<Server> {
    let workers = opts.listen.len() * opts.threads.max(1);
    let live = Arc::new(Live::new(workers));
    let stop = Arc::new(AtomicBool::new(false));
    let allowed: Arc<Option<Vec<String>>> = Arc::new(opts.allow_cca.clone());
    let mut addrs = Vec::new();
    let mut quic = Vec::new();
    let mut tcp_threads = Vec::new();
    let mut worker = 0;
    for &want in &opts.listen {
        // The first socket fixes the port; the others share it.
        let (listener, first) = bind_port_pair(want)?;
        let addr = first.local_addr()?;
        addrs.push(addr);
        let mut first = Some(first);
        for _ in 0..opts.threads.max(1) {
            let std = match first.take() {
                Some(s) => s,
                None => udp::bind_reuse_port(addr)
                    .with_context(|| format!("bind UDP {addr} (--listen)"))?,
            };
            let options = EndpointOptions {
                max_connections: opts.max_connections,
                ..EndpointOptions::default()
            };
            let mut driver = Driver::new(UdpIo::from_std(std)?, options)?;
            driver
                .endpoint()
                .set_server(
                    opts.crypto.clone(),
                    ConnectionOptions {
                        idle_timeout: opts.idle_timeout,
                        // No time series: the server reports totals only
                        // (one sample an hour keeps a connection's memory flat).
                        stats_interval: Duration::from_secs(3600),
                        ..ConnectionOptions::with_cca(&opts.default_cca)
                    },
                )
                .map_err(|e| anyhow::anyhow!("--default-cca: {e}"))?;
            driver.endpoint().set_admission(opts.admission.clone());
            let mut inner = BulkServer::new().with_max_reports(REPORTS_KEPT);
            if let Some(list) = opts.allow_cca.as_ref() {
                inner = inner.with_allowed_ccas(list.clone());
            }
            let app = WorkerApp {
                inner,
                live: live.clone(),
                worker,
                next_scan: None,
                drained: [(0, 0); 64],
            };
            worker += 1;
            quic.push(tollgate_transport::driver::spawn(driver, app, stop.clone()));
        }
        listener.set_nonblocking(true)?;
        let (live, stop, allowed) = (live.clone(), stop.clone(), allowed.clone());
        let (max, idle) = (opts.max_connections, opts.idle_timeout);
        tcp_threads.push(
            std::thread::Builder::new()
                .name("serve-tcp".into())
                .spawn(move || accept_tcp(listener, live, stop, allowed, max, idle))?,
        );
    }
    Ok(Server {
        addrs,
        live,
        stop,
        quic,
        tcp: tcp_threads,
    })
}

/// The TCP listener and the first UDP socket of a `--listen` address, on
/// one port. For port 0 the kernel picks a TCP port and the UDP socket takes
/// the same number; if that UDP port is taken, another pair is tried (the
/// two ephemeral spaces are separate, so the first choice can collide).
fn bind_port_pair(want: SocketAddr) -> anyhow::Result<(TcpListener, std::net::UdpSocket)> {
    let attempts = if want.port() == 0 { 32 } else { 1 };
    for _ in 0..attempts {
        let listener = TcpListener::bind(want).with_context(|| {
            format!("bind TCP {want} (--listen; the TCP port must be free too)")
        })?;
        let addr = listener.local_addr()?;
        match udp::bind_reuse_port(addr) {
            Ok(u) => return Ok((listener, u)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && want.port() == 0 => continue,
            Err(e) => return Err(e).with_context(|| format!("bind UDP {addr} (--listen)")),
        }
    }
    anyhow::bail!("--listen {want}: found no port free for both TCP and UDP in {attempts} tries")
}

fn accept_tcp(
    listener: TcpListener,
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
    allowed: Arc<Option<Vec<String>>>,
    max: usize,
    idle: Duration,
) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        conns.retain(|h| !h.is_finished());
        match listener.accept() {
            Ok((stream, peer)) => {
                if conns.len() >= max {
                    live.tcp.refused_full.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(%peer, "TCP connection refused: server full");
                    drop(stream);
                    continue;
                }
                live.tcp.accepted.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nonblocking(false);
                let (live, stop, allowed) = (live.clone(), stop.clone(), allowed.clone());
                let spawned = std::thread::Builder::new()
                    .name("serve-tcp-conn".into())
                    .spawn(move || {
                        live.tcp.open.fetch_add(1, Ordering::Relaxed);
                        let ok = |c: &str| {
                            allowed
                                .as_ref()
                                .as_ref()
                                .is_none_or(|l| l.iter().any(|a| a == c))
                        };
                        if let Err(e) = tcp::serve_connection(stream, &ok, &stop, &live.tcp, idle) {
                            tracing::info!(%peer, error = %e, "TCP connection ended");
                        }
                        live.tcp.open.fetch_sub(1, Ordering::Relaxed);
                    });
                match spawned {
                    Ok(h) => conns.push(h),
                    Err(e) => tracing::warn!(error = %e, "cannot spawn a TCP connection thread"),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => {
                tracing::debug!(error = %e, "accept");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

impl Server {
    /// Stop every thread (open connections are dropped) and sum up.
    pub fn stop(self) -> ServeSummary {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = ServerSummary::default();
        for h in self.quic {
            if let Ok(Ok((_, app))) = h.join() {
                let s = app.inner.summary;
                total.transfers += s.transfers;
                total.bytes_sent += s.bytes_sent;
                total.bytes_received += s.bytes_received;
                total.mismatches += s.mismatches;
                total.bad_requests += s.bad_requests;
                total.refused_cca += s.refused_cca;
                total.clean_closes += s.clean_closes;
                total.reports.extend(s.reports);
            }
        }
        for h in self.tcp {
            let _ = h.join();
        }
        ServeSummary { quic: total }
    }
}

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
//! Live totals (connections, bytes, per-variant bytes) are kept in atomics
//! that the QUIC workers refresh every [`SCAN`]; [`Live::render_prometheus`]
//! encodes them for `tollgate serve --metrics` (served by
//! `tollgate-metrics-http`).

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use quinn_proto::crypto::rustls::QuicServerConfig;
use tollgate_transport::bulk::{BulkServer, ServerSummary};
use tollgate_transport::driver::UdpIo;
use tollgate_transport::{udp, App, ConnectionOptions, Driver, Endpoint, EndpointOptions, Event};

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
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("listen", &self.listen)
            .field("threads", &self.threads)
            .field("allow_cca", &self.allow_cca)
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
        for (stack, reason, n) in [
            ("quic", "full", Self::sum(&self.quic_refused)),
            ("quic", "cca", Self::sum(&self.quic_refused_cca)),
            ("quic", "garbage", Self::sum(&self.quic_garbage)),
            ("tcp", "full", self.tcp.refused_full.load(Ordering::Relaxed)),
            ("tcp", "cca", self.tcp.refused_cca.load(Ordering::Relaxed)),
            (
                "tcp",
                "bad_request",
                self.tcp.bad_requests.load(Ordering::Relaxed),
            ),
        ] {
            refused
                .get_or_create(&l(&[("stack", stack), ("reason", reason)]))
                .inc_by(n);
        }
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
        self.live.quic_refused[w].store(st.refused, Ordering::Relaxed);
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
                    ConnectionOptions::with_cca(&opts.default_cca),
                )
                .map_err(|e| anyhow::anyhow!("--default-cca: {e}"))?;
            let mut inner = BulkServer::new();
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
        let max = opts.max_connections;
        tcp_threads.push(
            std::thread::Builder::new()
                .name("serve-tcp".into())
                .spawn(move || accept_tcp(listener, live, stop, allowed, max))?,
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
                        if let Err(e) = tcp::serve_connection(stream, &ok, &stop, &live.tcp) {
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

//! `tollgate load`: the scenario's `[[flows]]` as real connections to a
//! `tollgate serve`.
//!
//! The flows are drawn exactly as the emulator draws them
//! ([`crate::sim::topology::flows`]: same seed, same starts, sizes and
//! arrivals), then each runs on a real stack:
//!
//! - **Tollgate QUIC** ([`FlowKind::Quic`]): a [`BulkClient`] on its own UDP
//!   socket (its own 5-tuple and DSCP). The QUIC flows are dealt round-robin
//!   to [`LoadOptions::threads`] worker threads, each running one
//!   [`Pool`] (one mio loop for its share of the sockets, starting each flow
//!   at its scheduled instant on a `timerfd`). Forward flows upload with the
//!   flow's CCA; `reverse` flows download and ask the server for the flow's
//!   CCA (bulk protocol v2).
//! - **Kernel TCP** ([`FlowKind::Tcp`]): [`tcp::run_flow`], `TCP_CONGESTION`
//!   and `IP_TOS` on the data sender.
//! - **quiche** ([`FlowKind::Quiche`], feature `quiche`): uploads from
//!   quiche's client with its own congestion control.
//!
//! What is not emulated: `rtt` (and the topology) belong to the path the
//! packets take. The results say so ([`environment::Environment::note`])
//! and report each flow's *measured* minimum RTT in `rtt_ms`.
//!
//! A sampler on the calling thread records every flow's goodput bytes each
//! `sample_interval` (receiver-side: bytes received and verified, or the
//! server's progress counts for uploads; TCP uploads use `tcpi_bytes_acked`),
//! so [`crate::results::build`] computes the same metrics as for `sim`.

pub mod environment;
pub mod tcp;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quinn_proto::crypto::rustls::QuicClientConfig;
use tollgate_router::DropReason;
use tollgate_transport::bulk::{BulkClient, Mode, Request};
use tollgate_transport::driver::UdpIo;
use tollgate_transport::pool::Pool;
use tollgate_transport::{ConnReport, ConnectionOptions, EndpointOptions, PromptAcks};

use crate::results::{self, Results};
use crate::scenario::kind::FlowKind;
use crate::scenario::Scenario;
use crate::sim::engine::{FlowRecord, RunData};
use crate::sim::topology::{self, FlowSpec};

/// How long flows still running at the end of the duration get to finish
/// (sized flows; unbounded ones end at the duration on their own).
pub const GRACE: Duration = Duration::from_secs(5);
/// Time between building the plan and the first start, for thread start-up.
const LEAD: Duration = Duration::from_millis(200);

/// How to reach the server.
#[derive(Clone)]
pub struct LoadOptions {
    /// The server's address (UDP and TCP on the same port).
    pub server: SocketAddr,
    /// Name the server certificate must carry.
    pub server_name: String,
    /// TLS roots for QUIC flows.
    pub crypto: Arc<QuicClientConfig>,
    /// Local address to bind (default: the unspecified address of the server's family).
    pub bind: Option<IpAddr>,
    /// Connection set-up limit.
    pub connect_timeout: Duration,
    /// Worker threads for the QUIC flows (at least 1).
    pub threads: usize,
    /// Local port of each flow, in flow order (0 or no entry: the kernel's
    /// choice). A fixed port gives the flow a 5-tuple known in advance, so
    /// `tollgate testbed` can write the router rule that emulates its RTT.
    pub bind_ports: Vec<u16>,
    /// Local address of each flow, in flow order, before `bind` (no entry:
    /// `bind`): a parking lot's testbed binds each flow to the address of
    /// its entry node, which routes it through that node.
    pub bind_addrs: Vec<IpAddr>,
    /// Server of each flow, in flow order, before `server` and the flow
    /// group's `server` (no entry: those): a parking lot's testbed has a
    /// server address per exit node.
    pub flow_servers: Vec<SocketAddr>,
    /// The rate of this host's link, bit/s, if known: passed to every QUIC
    /// sender's congestion controller (Libra's CapProbe rejects capacity
    /// estimates above it).
    pub link_rate_bps: Option<f64>,
}

impl std::fmt::Debug for LoadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadOptions")
            .field("server", &self.server)
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// What `load` adds to a flow's results beyond the `sim` fields.
#[derive(Clone, Debug, Default)]
pub struct FlowExtra {
    /// `quic`, `tcp` or `quiche`.
    pub stack: String,
    /// Actual start minus scheduled start, ms.
    pub start_late_ms: f64,
    /// Flow control limited the sender (QUIC).
    pub window_limited: Option<bool>,
    /// Measured minimum RTT, ms.
    pub min_rtt_ms: Option<f64>,
    /// TCP: final TCP_INFO.
    pub tcp: Option<tcp::TcpStats>,
    /// TCP: sampled RTT percentiles p50 / p99, ms.
    pub tcp_rtt_ms: Option<(f64, f64)>,
    /// Every requested byte arrived intact.
    pub complete: bool,
}

/// Everything a load run measured.
#[derive(Debug)]
pub struct LoadRun {
    /// The same raw data the emulator produces (no router ports).
    pub data: RunData,
    /// Per flow, in flow order.
    pub extra: Vec<FlowExtra>,
}

/// One flow's outcome, from its thread.
#[derive(Debug, Default)]
struct Outcome {
    started: Option<Instant>,
    bytes: u64,
    complete: bool,
    finished_at: Option<Instant>,
    error: Option<String>,
    report: Option<ConnReport>,
    tcp: Option<tcp::TcpOutcome>,
    /// quiche's smoothed RTT at the end.
    quiche_rtt: Option<Duration>,
}

/// Checks that need the flow kinds: everything `load` cannot do is an error
/// naming the field.
pub fn check(s: &Scenario) -> anyhow::Result<()> {
    for (i, g) in s.flows.iter().enumerate() {
        let kind = FlowKind::parse(&g.cca).map_err(|e| anyhow::anyhow!("flows[{i}].cca: {e}"))?;
        if g.reverse && g.rate_cap_bps.is_some() {
            anyhow::bail!(
                "flows[{i}]: rate_cap with reverse = true is not supported by tollgate load \
                 (the server would have to cap); cap uploads only"
            );
        }
        if let FlowKind::Quiche(_) = kind {
            if g.reverse {
                anyhow::bail!(
                    "flows[{i}]: quiche flows upload only (quiche's congestion control runs on \
                     the quiche client); remove reverse = true"
                );
            }
            if !cfg!(feature = "quiche") {
                anyhow::bail!(
                    "flows[{i}].cca = \"{}\": this tollgate was built without quiche; rebuild \
                     with `cargo build --release -p tollgate-tools --features quiche`",
                    g.cca
                );
            }
        }
    }
    Ok(())
}

/// The local address of flow `flow`: its entry of `bind_addrs`, else `bind`
/// (or the unspecified address of the server's family), and the flow's
/// port from `bind_ports` (or 0).
fn local_bind(o: &LoadOptions, flow: usize) -> SocketAddr {
    let ip = o
        .bind_addrs
        .get(flow)
        .copied()
        .or(o.bind)
        .unwrap_or(if o.server.is_ipv6() {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        });
    SocketAddr::new(ip, o.bind_ports.get(flow).copied().unwrap_or(0))
}

/// Checks `o` against the scenario: local ports, local addresses and
/// servers per flow at most one per flow; fixed ports distinct.
pub fn check_options(s: &Scenario, o: &LoadOptions) -> anyhow::Result<()> {
    let n = s.flow_count();
    for (what, len) in [
        ("local addresses (--bind-addrs)", o.bind_addrs.len()),
        ("servers (--flow-servers)", o.flow_servers.len()),
    ] {
        if len > n {
            anyhow::bail!("{len} {what} for {n} flows: give at most one per flow, in flow order");
        }
    }
    if o.bind_ports.is_empty() {
        return Ok(());
    }
    if o.bind_ports.len() > n {
        anyhow::bail!(
            "{} local ports for {n} flows: give at most one port per flow, in flow order",
            o.bind_ports.len()
        );
    }
    for (i, p) in o.bind_ports.iter().enumerate() {
        if *p != 0 && o.bind_ports[..i].contains(p) {
            anyhow::bail!("local port {p} is given twice: each flow needs its own");
        }
    }
    Ok(())
}

/// Run every flow of `s` against the server; `on_sample(t, bytes)` is called
/// after every sample with the seconds since the schedule's zero and each
/// flow's goodput bytes so far. `stop` ends the run early (results partial).
pub fn run(
    s: &Scenario,
    o: &LoadOptions,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(f64, &[u64]),
) -> anyhow::Result<LoadRun> {
    check(s)?;
    check_options(s, o)?;
    let specs = topology::flows(s);
    let t0 = Instant::now() + LEAD;
    let duration = Duration::from_secs_f64(s.duration_s);
    let end = t0 + duration;
    let flow_stop = Arc::new(AtomicBool::new(false));
    let mut progress = Vec::new();
    let mut outcomes: Vec<Arc<Mutex<Outcome>>> = Vec::new();
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let workers = o.threads.max(1);
    let mut pools: Vec<Vec<PoolFlow>> = (0..workers).map(|_| Vec::new()).collect();
    let mut quic_flows = 0usize;
    for (flow_index, spec) in specs.iter().enumerate() {
        let out = Arc::new(Mutex::new(Outcome::default()));
        outcomes.push(out.clone());
        let kind = FlowKind::parse(&spec.cca).map_err(|e| anyhow::anyhow!(e))?;
        let g = &s.flows[spec.group];
        let mut options = o.clone();
        if let Some(addr) = o.flow_servers.get(flow_index).copied().or(g.server) {
            options.server = addr;
        }
        let job = FlowJob {
            spec: spec.clone(),
            kind,
            start_at: t0 + Duration::from_nanos(spec.start_ns),
            end,
            rate_cap_bps: g.rate_cap_bps,
            options,
            bind: local_bind(o, flow_index),
            cca_seed: crate::sim::topology::cca_seed(s.seed, flow_index),
        };
        if let FlowKind::Quic(cca) = &job.kind {
            let app = job.quic_app(cca, job.request(job.start_at));
            progress.push(app.progress());
            pools[quic_flows % workers].push(PoolFlow {
                app,
                bind: job.bind,
                crypto: job.options.crypto.clone(),
                start_at: job.start_at,
                out,
            });
            quic_flows += 1;
            continue;
        }
        let p = Arc::new(AtomicU64::new(0));
        progress.push(p.clone());
        let stop = flow_stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("load-flow-{}", threads.len()))
                .spawn(move || job.run(&stop, &p, &out))?,
        );
    }
    for (w, flows) in pools.into_iter().enumerate() {
        if flows.is_empty() {
            continue;
        }
        let stop = flow_stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("load-quic-{w}"))
                .spawn(move || run_pool(flows, &stop))?,
        );
    }

    // The sampler: every sample_interval until every flow is over.
    let dt = Duration::from_secs_f64(s.sample_interval_s);
    let mut t = Vec::new();
    let mut rx: Vec<Vec<u64>> = vec![Vec::new(); specs.len()];
    let mut k = 1u32;
    let mut partial = false;
    let hard_end = end + GRACE;
    // The last read: seconds since t0 and the counts (all 0 at t0: no flow
    // starts before it).
    let mut last = (0.0, vec![0u64; specs.len()]);
    loop {
        let at = t0 + dt * k;
        let now = Instant::now();
        if at > now {
            std::thread::sleep((at - now).min(Duration::from_millis(20)));
            if Instant::now() < at && !stop.load(Ordering::Relaxed) {
                continue;
            }
        }
        if stop.load(Ordering::Relaxed) {
            partial = true;
        }
        let now = Instant::now();
        let ts = now.saturating_duration_since(t0).as_secs_f64();
        let snapshot: Vec<u64> = progress.iter().map(|p| p.load(Ordering::Relaxed)).collect();
        // Samples stay on the schedule's grid (a final partial sample at the
        // stop time). The read comes after the grid time, by the sleep's
        // overshoot or longer on a busy machine, so each count is the value
        // at the grid time interpolated between the last two reads: reading
        // late and stamping the grid time would move the bytes of the
        // lateness into the wrong interval.
        let grid = if partial { ts } else { (dt * k).as_secs_f64() };
        t.push(grid);
        for (r, b) in rx.iter_mut().zip(at_time(&last, (ts, &snapshot), grid)) {
            r.push(b);
        }
        on_sample(ts, &snapshot);
        last = (ts, snapshot);
        k += 1;
        let all_done = threads.iter().all(|h| h.is_finished());
        if partial || (all_done && now >= end) || now >= hard_end {
            break;
        }
    }
    flow_stop.store(true, Ordering::Relaxed);
    for h in threads {
        let _ = h.join();
    }

    // Assemble the emulator's record format.
    let mut flows = Vec::new();
    let mut extra = Vec::new();
    for ((spec, out), samples) in specs.into_iter().zip(outcomes).zip(rx) {
        let out = std::mem::take(&mut *out.lock().unwrap_or_else(|e| e.into_inner()));
        let scheduled = t0 + Duration::from_nanos(spec.start_ns);
        let late = out.started.map_or(0.0, |st| {
            st.saturating_duration_since(scheduled).as_secs_f64() * 1e3
        });
        let kind = FlowKind::parse(&spec.cca).map_err(|e| anyhow::anyhow!(e))?;
        let mut x = FlowExtra {
            stack: kind.stack().to_string(),
            start_late_ms: late,
            complete: out.complete,
            ..FlowExtra::default()
        };
        if let Some(r) = &out.report {
            x.window_limited = Some(r.window_limited());
            // The connection's least RTT sample, the handshake's included
            // (quinn-proto's path `min_rtt`, like quiche's and tcp_info's): a
            // flow that starts behind others may send no data packet through
            // an empty queue, so its data packets' minimum would be queueing
            // as well as path. Only once there are samples (before any,
            // quinn-proto holds its initial guess there).
            x.min_rtt_ms =
                (!r.rtt_us.is_empty()).then_some(r.quic.path.min_rtt.as_secs_f64() * 1e3);
        }
        if let Some(rtt) = out.quiche_rtt {
            x.min_rtt_ms = Some(rtt.as_secs_f64() * 1e3);
        }
        if let Some(tc) = &out.tcp {
            x.tcp = tc.stats.clone();
            x.min_rtt_ms = tc
                .stats
                .as_ref()
                .filter(|st| st.min_rtt_us > 0)
                .map(|st| f64::from(st.min_rtt_us) / 1e3);
            if !tc.rtt_us.is_empty() {
                x.tcp_rtt_ms = Some((
                    tc.rtt_us.value_at_quantile(0.5) as f64 / 1e3,
                    tc.rtt_us.value_at_quantile(0.99) as f64 / 1e3,
                ));
            }
        }
        let mut error = out.error.clone();
        if error.is_none() && !out.complete && !partial {
            error = Some(match out.started {
                None => "never started".to_string(),
                Some(_) if spec.size.is_some() => format!(
                    "did not finish within the duration plus {} s",
                    GRACE.as_secs()
                ),
                Some(_) => "ended without completing its transfer".to_string(),
            });
        }
        flows.push(FlowRecord {
            rx: samples,
            capacity_mbps: Vec::new(),
            drops: [0; DropReason::COUNT],
            access_drops: 0,
            loss_drops: 0,
            port_bytes: Vec::new(),
            fin_at: out
                .finished_at
                .filter(|_| out.complete && spec.size.is_some())
                .map(|f| f.saturating_duration_since(t0).as_nanos() as u64),
            acked_at: None,
            report: out.report,
            receiver_report: None,
            injected_drops: 0,
            error,
            spec,
        });
        extra.push(x);
    }
    let reached_s = t.last().copied().unwrap_or(0.0);
    Ok(LoadRun {
        data: RunData {
            t,
            flows,
            ports: Vec::new(),
            packets_sent: 0,
            events: 0,
            partial,
            reached_s: if partial { reached_s } else { s.duration_s },
            lps: 1,
        },
        extra,
    })
}

/// A QUIC flow handed to a worker thread.
struct PoolFlow {
    app: BulkClient,
    bind: SocketAddr,
    crypto: Arc<QuicClientConfig>,
    start_at: Instant,
    out: Arc<Mutex<Outcome>>,
}

/// The byte counts at `t` (seconds) from two reads `(seconds, counts)`
/// around it, `last.0 <= t <= cur.0`, interpolated linearly; at or after
/// `cur`'s time the counts of `cur`. Counts only grow, so the results lie
/// between the two reads' counts.
fn at_time(last: &(f64, Vec<u64>), cur: (f64, &[u64]), t: f64) -> Vec<u64> {
    let span = cur.0 - last.0;
    let f = if span > 0.0 {
        ((t - last.0) / span).clamp(0.0, 1.0)
    } else {
        1.0
    };
    last.1
        .iter()
        .zip(cur.1)
        .map(|(&a, &b)| a + (b.saturating_sub(a) as f64 * f).round() as u64)
        .collect()
}

/// A worker thread: its share of the QUIC flows, each on its own socket, in
/// one [`Pool`] until every flow is done or `stop` is set.
fn run_pool(flows: Vec<PoolFlow>, stop: &AtomicBool) {
    let fail_all = |flows: Vec<PoolFlow>, why: &str| {
        for f in flows {
            lock(&f.out).error = Some(why.to_string());
        }
    };
    let mut pool: Pool<BulkClient> = match Pool::new() {
        Ok(p) => p,
        Err(e) => return fail_all(flows, &format!("event loop: {e}")),
    };
    let mut outs = Vec::new();
    for f in flows {
        let added = UdpIo::bind(f.bind).and_then(|socket| {
            let crypto = f.crypto;
            pool.add(
                socket,
                EndpointOptions::default(),
                |ep| ep.set_client(crypto),
                f.app,
                f.start_at,
            )
        });
        match added {
            Ok(_) => outs.push(f.out),
            Err(e) => lock(&f.out).error = Some(format!("bind {}: {e}", f.bind)),
        }
    }
    let ran = pool.run(stop);
    let now = Instant::now();
    let started: Vec<Option<Instant>> = (0..pool.len()).map(|i| pool.started_at(i)).collect();
    for ((out, app), started) in outs.into_iter().zip(pool.into_apps()).zip(started) {
        let connected = app.connected_at();
        let r = app.result;
        let mut o = lock(&out);
        o.started = started;
        o.bytes = r.bytes;
        o.complete = r.complete;
        o.finished_at = Some(match (r.complete, connected) {
            (true, Some(c)) => c + r.elapsed,
            _ => now,
        });
        o.error = r.error.clone();
        if let (None, Err(e)) = (&o.error, &ran) {
            if !r.complete {
                o.error = Some(format!("event loop: {e}"));
            }
        }
        o.report = r.report.map(|b| *b);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One flow, ready to run on its own thread.
struct FlowJob {
    spec: FlowSpec,
    kind: FlowKind,
    start_at: Instant,
    end: Instant,
    rate_cap_bps: Option<f64>,
    options: LoadOptions,
    bind: SocketAddr,
    /// The flow's congestion-controller seed (as in `sim`).
    cca_seed: u64,
}

impl FlowJob {
    fn request(&self, now: Instant) -> Request {
        Request {
            mode: if self.spec.reverse {
                Mode::Download
            } else {
                Mode::Upload
            },
            size: self.spec.size,
            // Unbounded flows run to the end of the run.
            duration: self.spec.size.is_none().then(|| {
                self.end
                    .saturating_duration_since(now)
                    .max(Duration::from_millis(1))
            }),
        }
    }

    fn run(self, stop: &AtomicBool, progress: &AtomicU64, out: &Mutex<Outcome>) {
        // Sleep to the start: coarse, then fine, so the start is within ~0.1 ms.
        loop {
            let now = Instant::now();
            if now >= self.start_at || stop.load(Ordering::Relaxed) {
                break;
            }
            let left = self.start_at - now;
            if left > Duration::from_millis(2) {
                std::thread::sleep(
                    (left - Duration::from_millis(1)).min(Duration::from_millis(50)),
                );
            } else {
                std::thread::yield_now();
            }
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let started = Instant::now();
        let mut result = Outcome {
            started: Some(started),
            ..Outcome::default()
        };
        let request = self.request(started);
        match &self.kind {
            FlowKind::Quic(_) => unreachable!("QUIC flows run in a worker's pool"),
            FlowKind::Tcp(name) => {
                let flow = tcp::TcpFlow {
                    server: self.options.server,
                    cca: name.clone(),
                    tos: if self.spec.mark_dscp {
                        self.spec.variant.dscp() << 2
                    } else {
                        0
                    },
                    request,
                    rate_cap_bps: self.rate_cap_bps,
                    connect_timeout: self.options.connect_timeout,
                    bind: (self.bind.port() != 0).then_some(self.bind),
                };
                let o = tcp::run_flow(&flow, stop, progress);
                result.bytes = o.bytes;
                result.complete = o.complete;
                result.error = o.error.clone();
                result.tcp = Some(o);
            }
            FlowKind::Quiche(cc) => self.run_quiche(cc, request, stop, progress, &mut result),
        }
        result.finished_at = Some(Instant::now());
        *out.lock().unwrap_or_else(|e| e.into_inner()) = result;
    }

    /// The QUIC client for this flow (run by a worker's [`Pool`]).
    fn quic_app(&self, spec: &str, request: Request) -> BulkClient {
        let base = ConnectionOptions::default();
        let sender_side = ConnectionOptions {
            cca: if self.spec.reverse {
                base.cca.clone()
            } else {
                spec.to_string()
            },
            mark_dscp: self.spec.mark_dscp,
            prompt_acks: if self.spec.reverse {
                PromptAcks::Auto
            } else {
                self.spec.prompt_acks
            },
            window: self.spec.window.unwrap_or(base.window),
            max_window: self.spec.window.unwrap_or(base.max_window),
            // Also the handshake timeout: an unreachable server fails the flow after this long.
            idle_timeout: self.options.connect_timeout.max(Duration::from_millis(500)),
            link_rate_bps: self.options.link_rate_bps,
            cca_seed: Some(self.cca_seed),
            ..base
        };
        let mut app = BulkClient::new(
            self.options.server,
            &self.options.server_name,
            request,
            sender_side,
        );
        if self.spec.reverse {
            app = app.with_server_cca(spec);
        }
        if let Some(bps) = self.rate_cap_bps {
            app = app.with_rate_cap(bps);
        }
        app
    }

    #[cfg(feature = "quiche")]
    fn run_quiche(
        &self,
        cc: &str,
        request: Request,
        stop: &AtomicBool,
        progress: &AtomicU64,
        out: &mut Outcome,
    ) {
        use tollgate_transport::quiche_peer::{run_client, PeerOptions};
        // quiche's client has its own hard time limit; a stop request ends
        // the run at the sampler, and the flow at that limit.
        let _ = stop;
        let Some(base) = PeerOptions::with_cc(cc) else {
            out.error = Some(format!("quiche has no congestion control \"{cc}\""));
            return;
        };
        let live = Arc::new(AtomicU64::new(0));
        let options = PeerOptions {
            time_limit: request.duration.unwrap_or(Duration::from_secs(3600)) + GRACE,
            progress: Some(live.clone()),
            local: (self.bind.port() != 0).then_some(self.bind),
            ..base
        };
        let server = self.options.server;
        let name = self.options.server_name.clone();
        let handle = std::thread::spawn(move || run_client(server, &name, request, &options));
        while !handle.is_finished() {
            progress.store(live.load(Ordering::Relaxed), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(5));
        }
        let r = match handle.join() {
            Ok(r) => r,
            Err(_) => {
                out.error = Some("quiche client panicked".into());
                return;
            }
        };
        progress.store(r.bytes, Ordering::Relaxed);
        out.quiche_rtt = r.stats.as_ref().and_then(|st| st.min_rtt.or(st.rtt));
        out.bytes = r.bytes;
        out.complete = r.complete;
        out.error = r.error.clone();
    }

    #[cfg(not(feature = "quiche"))]
    fn run_quiche(
        &self,
        _cc: &str,
        _request: Request,
        _stop: &AtomicBool,
        _progress: &AtomicU64,
        out: &mut Outcome,
    ) {
        out.error = Some("this tollgate was built without the quiche feature".into());
    }
}

/// The results file of a load run: the `sim` metrics over the sampled
/// goodput, plus each flow's stack, start lateness, measured RTT (in
/// `rtt_ms`: nothing is emulated), TCP_INFO figures and the environment.
pub fn into_results(s: &Scenario, run: &LoadRun, env: environment::Environment) -> Results {
    let mut r = results::build(s, &run.data);
    r.summary.bottleneck_mbps = 0.0;
    r.summary.discipline = "real network".into();
    for (f, x) in r.flows.iter_mut().zip(&run.extra) {
        f.stack = Some(x.stack.clone());
        f.start_late_ms = Some(x.start_late_ms);
        if x.window_limited.is_some() {
            f.window_limited = x.window_limited;
        }
        f.rtt_ms = x.min_rtt_ms.unwrap_or(0.0);
        if let Some(t) = &x.tcp {
            f.srtt_ms = Some(f64::from(t.srtt_us) / 1e3);
            f.lost_packets = u64::from(t.total_retrans);
            f.sent_packets = u64::from(t.segs_out);
            f.cca_stats = vec![
                ("cwnd_segments".into(), t.cwnd_segments.to_string()),
                ("mss".into(), t.mss.to_string()),
                ("total_retrans".into(), t.total_retrans.to_string()),
                ("pacing_rate_Bps".into(), t.pacing_rate.to_string()),
            ];
        }
        if let Some((p50, p99)) = x.tcp_rtt_ms {
            f.rtt_p50_ms = Some(p50);
            f.rtt_p99_ms = Some(p99);
        }
    }
    r.environment = Some(env);
    r
}

#[cfg(test)]
mod tests {
    use super::at_time;

    #[test]
    fn a_late_read_is_brought_back_to_the_grid_time() {
        // Read at 0.100 s (1,000 and 0 bytes), then 3 ms late for the 0.2 s
        // grid point at 0.203 s: a flow moving 10 kB/s had 2,000 bytes at
        // 0.2 s, not the 2,030 it has at the read.
        let last = (0.100, vec![1_000, 0]);
        assert_eq!(at_time(&last, (0.203, &[2_030, 0]), 0.2), vec![2_000, 0]);
        // On time: the read itself; a partial sample at the read's own time too.
        assert_eq!(at_time(&last, (0.2, &[2_000, 7]), 0.2), vec![2_000, 7]);
        // Never outside the two reads, never below the last.
        assert_eq!(at_time(&last, (0.3, &[5_000, 9]), 0.05), vec![1_000, 0]);
        assert_eq!(at_time(&last, (0.3, &[5_000, 9]), 0.4), vec![5_000, 9]);
        assert_eq!(at_time(&last, (0.1, &[1_500, 0]), 0.1), vec![1_500, 0]);
    }
}

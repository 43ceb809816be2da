//! Kernel TCP flows: the legacy traffic real networks carry, speaking the
//! bulk protocol ([`tollgate_transport::bulk`]) over a TCP connection.
//!
//! The data sender's socket gets the flow's congestion control through
//! `TCP_CONGESTION` (the client's for uploads; for downloads the server sets
//! the one named in the request) and its DSCP through `IP_TOS` /
//! `IPV6_TCLASS`. Progress and the per-flow RTT, congestion window and
//! retransmissions come from `TCP_INFO`: uploads count `tcpi_bytes_acked`
//! (bytes the receiver acknowledged), downloads the bytes read and verified.
//!
//! Each flow runs on its own thread with blocking I/O: the kernel does the
//! work, and the thread wakes at least every [`TICK`] to sample `TCP_INFO`
//! and notice a stop request.

use std::io::{self, Read, Write};
use std::mem;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use socket2::{Domain, Protocol, Socket, Type};
use tollgate_transport::bulk::{pattern_slice, Mode, Receiver, ReplyCounts, Request};

/// Longest blocking call before the flow thread samples and checks for a stop.
pub const TICK: Duration = Duration::from_millis(20);
/// TCP_INFO sampling interval.
const SAMPLE: Duration = Duration::from_millis(50);
/// Bytes per write.
const CHUNK: usize = 64 * 1024;
/// Burst of the application rate cap, bytes.
const RATE_BURST: f64 = 16_384.0;

/// The kernel's view of one TCP connection (from `TCP_INFO`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TcpStats {
    /// Smoothed RTT, µs.
    pub srtt_us: u32,
    /// Minimum RTT, µs.
    pub min_rtt_us: u32,
    /// Congestion window, segments.
    pub cwnd_segments: u32,
    /// Sender MSS, bytes.
    pub mss: u32,
    /// Segments retransmitted in total.
    pub total_retrans: u32,
    /// Segments sent.
    pub segs_out: u32,
    /// Bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Pacing rate, bytes/s.
    pub pacing_rate: u64,
}

/// Read `TCP_INFO` from a connected TCP socket.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpStats> {
    // SAFETY: tcp_info is plain old data; the kernel writes at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpStats {
        srtt_us: info.tcpi_rtt,
        min_rtt_us: info.tcpi_min_rtt,
        cwnd_segments: info.tcpi_snd_cwnd,
        mss: info.tcpi_snd_mss,
        total_retrans: info.tcpi_total_retrans,
        segs_out: info.tcpi_segs_out,
        bytes_acked: info.tcpi_bytes_acked,
        bytes_received: info.tcpi_bytes_received,
        pacing_rate: info.tcpi_pacing_rate,
    })
}

/// Set the socket's congestion control; the error says which the kernel offers.
pub fn set_congestion(fd: RawFd, name: &str) -> Result<(), String> {
    // SAFETY: the name is passed with its length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    Err(format!(
        "TCP congestion control \"{name}\" not available ({e}); this kernel offers: {} \
         (load others with e.g. `modprobe tcp_bbr`; unprivileged users are limited to \
         /proc/sys/net/ipv4/tcp_allowed_congestion_control)",
        available.trim()
    ))
}

/// Set the TOS / traffic-class byte of every segment the socket sends.
pub fn set_tos(fd: RawFd, ipv6: bool, tos: u8) -> io::Result<()> {
    let (level, name) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    let v = libc::c_int::from(tos);
    // SAFETY: `v` lives for the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One TCP flow to run.
#[derive(Clone, Debug)]
pub struct TcpFlow {
    /// The server.
    pub server: SocketAddr,
    /// Linux congestion-control name for the data sender.
    pub cca: String,
    /// TOS byte for the client's segments (DSCP << 2).
    pub tos: u8,
    /// The transfer.
    pub request: Request,
    /// Upload rate cap, bit/s.
    pub rate_cap_bps: Option<f64>,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Local address to bind before connecting (`None`: the kernel's choice).
    pub bind: Option<SocketAddr>,
}

/// What a TCP flow did.
#[derive(Clone, Debug)]
pub struct TcpOutcome {
    /// Goodput bytes (received and verified, or acknowledged by the server).
    pub bytes: u64,
    /// Every requested byte arrived intact.
    pub complete: bool,
    /// Bytes that failed the pattern check.
    pub mismatches: u64,
    /// Why the flow failed.
    pub error: Option<String>,
    /// Final TCP_INFO.
    pub stats: Option<TcpStats>,
    /// Sampled smoothed RTTs, µs.
    pub rtt_us: Histogram<u64>,
    /// When the connection was established.
    pub connected_at: Option<Instant>,
}

/// Run `flow` until done or `stop`; `progress` follows the goodput bytes.
pub fn run_flow(flow: &TcpFlow, stop: &AtomicBool, progress: &AtomicU64) -> TcpOutcome {
    let mut out = TcpOutcome {
        bytes: 0,
        complete: false,
        mismatches: 0,
        error: None,
        stats: None,
        rtt_us: tollgate_transport::adapter::new_rtt_histogram(),
        connected_at: None,
    };
    if let Err(e) = transfer(flow, stop, progress, &mut out) {
        out.error.get_or_insert(e);
    }
    out
}

fn transfer(
    flow: &TcpFlow,
    stop: &AtomicBool,
    progress: &AtomicU64,
    out: &mut TcpOutcome,
) -> Result<(), String> {
    let addr = flow.server;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| format!("socket: {e}"))?;
    let fd = socket.as_raw_fd();
    set_tos(fd, addr.is_ipv6(), flow.tos).map_err(|e| format!("IP_TOS: {e}"))?;
    if flow.request.mode == Mode::Upload {
        set_congestion(fd, &flow.cca)?;
    }
    if let Some(local) = flow.bind {
        socket
            .set_reuse_address(true)
            .map_err(|e| format!("SO_REUSEADDR: {e}"))?;
        socket
            .bind(&local.into())
            .map_err(|e| format!("bind {local} (TCP): {e}"))?;
    }
    socket
        .connect_timeout(&addr.into(), flow.connect_timeout)
        .map_err(|e| format!("connect to {addr} (TCP): {e}"))?;
    out.connected_at = Some(Instant::now());
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(TICK))
        .and_then(|()| stream.set_write_timeout(Some(TICK)))
        .map_err(|e| format!("socket timeouts: {e}"))?;
    let server_cca = (flow.request.mode == Mode::Download).then_some(flow.cca.as_str());
    let header = flow.request.encode_v2(server_cca)?;
    write_all(&mut stream, &header, stop)?;
    let mut sampler = Sampler::new(fd);
    let result = match flow.request.mode {
        Mode::Upload => upload(flow, &mut stream, stop, progress, &mut sampler, out),
        Mode::Download => download(flow, &mut stream, stop, progress, &mut sampler, out),
    };
    sampler.sample(out);
    result
}

/// Samples TCP_INFO into the outcome every [`SAMPLE`].
struct Sampler {
    fd: RawFd,
    next: Instant,
}

impl Sampler {
    fn new(fd: RawFd) -> Self {
        Sampler {
            fd,
            next: Instant::now(),
        }
    }

    fn maybe(&mut self, out: &mut TcpOutcome) {
        if Instant::now() >= self.next {
            self.sample(out);
        }
    }

    /// `tcpi_bytes_acked` now (not at the last sample), from one read of
    /// TCP_INFO that is also the sample when one is due.
    fn bytes_acked(&mut self, out: &mut TcpOutcome) -> Option<u64> {
        let s = tcp_info(self.fd).ok()?;
        let acked = s.bytes_acked;
        if Instant::now() >= self.next {
            self.record(out, s);
        }
        Some(acked)
    }

    fn sample(&mut self, out: &mut TcpOutcome) {
        if let Ok(s) = tcp_info(self.fd) {
            self.record(out, s);
        } else {
            self.next = Instant::now() + SAMPLE;
        }
    }

    fn record(&mut self, out: &mut TcpOutcome, s: TcpStats) {
        self.next = Instant::now() + SAMPLE;
        if s.srtt_us > 0 {
            let _ = out.rtt_us.record(u64::from(s.srtt_us));
        }
        out.stats = Some(s);
    }
}

fn write_all(stream: &mut TcpStream, mut data: &[u8], stop: &AtomicBool) -> Result<(), String> {
    while !data.is_empty() {
        if stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        match stream.write(data) {
            Ok(0) => return Err("connection closed by the server".into()),
            Ok(n) => data = &data[n..],
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(format!("send: {e}")),
        }
    }
    Ok(())
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn upload(
    flow: &TcpFlow,
    stream: &mut TcpStream,
    stop: &AtomicBool,
    progress: &AtomicU64,
    sampler: &mut Sampler,
    out: &mut TcpOutcome,
) -> Result<(), String> {
    let start = Instant::now();
    let deadline = flow.request.duration.map(|d| start + d);
    let limit = flow.request.size.unwrap_or(u64::MAX);
    let header_len = flow.request.encode_v2(None).map_or(0, |h| h.len()) as u64;
    let mut sent = 0u64;
    let mut stopped = false;
    while sent < limit {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            stopped = true;
            break;
        }
        // The live count is read fresh, not from the last sample: the run's
        // series reads it on its own grid, and a count up to SAMPLE old put
        // a whole SAMPLE of bytes into the wrong interval whenever the two
        // grids slipped past each other (a 40 Mbit/s capped flow read 38.1).
        if let Some(acked) = sampler.bytes_acked(out) {
            progress.store(acked.saturating_sub(header_len), Ordering::Relaxed);
        }
        let mut n = (limit - sent).min(CHUNK as u64) as usize;
        if let Some(bps) = flow.rate_cap_bps {
            let allowed =
                RATE_BURST + bps / 8.0 * now.duration_since(start).as_secs_f64() - sent as f64;
            if allowed < 1448.0 {
                std::thread::sleep(
                    Duration::from_secs_f64((1448.0 - allowed) * 8.0 / bps).min(TICK),
                );
                continue;
            }
            n = n.min(allowed as usize);
        }
        match stream.write(pattern_slice(sent, n)) {
            Ok(0) => return Err("connection closed by the server".into()),
            Ok(k) => sent += k as u64,
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(format!("send: {e}")),
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // The reply: the server's received count (v2 sends progress counts too).
    let mut reply = ReplyCounts::default();
    let mut buf = [0u8; 256];
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        sampler.maybe(out);
        // The server's counts may lag the kernel's bytes_acked stored
        // above (replies queued during the transfer): never go backwards.
        if let Some(n) = reply.latest {
            progress.fetch_max(n, Ordering::Relaxed);
        }
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => reply.on_bytes(&buf[..k]),
            Err(e) if is_timeout(&e) => {
                if Instant::now() > give_up || (stop.load(Ordering::Relaxed) && !stopped) {
                    return Err("no final count from the server".into());
                }
            }
            Err(e) => return Err(format!("reply: {e}")),
        }
    }
    let acked = reply
        .finish()
        .ok_or_else(|| "malformed or missing reply from the server".to_string())?;
    progress.fetch_max(acked, Ordering::Relaxed);
    out.bytes = acked;
    out.mismatches = acked.abs_diff(sent);
    out.complete = out.mismatches == 0 && flow.request.size.is_none_or(|s| s == acked);
    Ok(())
}

fn download(
    flow: &TcpFlow,
    stream: &mut TcpStream,
    stop: &AtomicBool,
    progress: &AtomicU64,
    sampler: &mut Sampler,
    out: &mut TcpOutcome,
) -> Result<(), String> {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut rx = Receiver::new(0);
    let mut buf = vec![0u8; CHUNK];
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        sampler.maybe(out);
        match stream.read(&mut buf) {
            Ok(0) => {
                rx.finished = true;
                break;
            }
            Ok(k) => {
                rx.on_chunk(rx.received, &buf[..k]);
                progress.store(rx.received, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(format!("receive: {e}")),
        }
    }
    out.bytes = rx.received;
    out.mismatches = rx.mismatches;
    if rx.finished && rx.received == 0 && flow.request.size != Some(0) {
        return Err(format!(
            "the server closed without sending: it may refuse tcp:{} (--allow-cca) or be full",
            flow.cca
        ));
    }
    out.complete =
        rx.finished && rx.mismatches == 0 && flow.request.size.is_none_or(|s| s == rx.received);
    Ok(())
}

/// How long a TCP client has to send its whole request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The server side of one accepted TCP connection: read the request, then
/// serve the download (with the requested congestion control, if `allowed`
/// accepts it) or receive the upload, sending progress counts. A client
/// that sends no complete request within [`REQUEST_TIMEOUT`], or whose
/// transfer makes no progress (nothing written to or read from the socket)
/// for `idle`, is dropped and counted in `counters.timed_out_request` or
/// `counters.timed_out_idle`.
pub fn serve_connection(
    mut stream: TcpStream,
    allowed: &dyn Fn(&str) -> bool,
    stop: &AtomicBool,
    counters: &TcpServeCounters,
    idle: Duration,
) -> Result<(), String> {
    stream
        .set_read_timeout(Some(TICK))
        .and_then(|()| stream.set_write_timeout(Some(TICK)))
        .map_err(|e| e.to_string())?;
    let mut head = Vec::with_capacity(64);
    let give_up = Instant::now() + REQUEST_TIMEOUT;
    let idle_out = |counters: &TcpServeCounters| {
        counters.timed_out_idle.fetch_add(1, Ordering::Relaxed);
        Err(format!("no progress for {idle:?}: client gone"))
    };
    let (received, len) = loop {
        match Request::parse(&head) {
            tollgate_transport::bulk::RequestParse::Done(r, len) => break (r, len),
            tollgate_transport::bulk::RequestParse::Malformed => {
                counters.bad_requests.fetch_add(1, Ordering::Relaxed);
                return Err("bad request".into());
            }
            tollgate_transport::bulk::RequestParse::Need(n) => {
                let mut b = vec![0u8; n];
                match stream.read(&mut b) {
                    Ok(0) => return Err("short request".into()),
                    Ok(k) => head.extend_from_slice(&b[..k]),
                    Err(e) if is_timeout(&e) => {
                        if stop.load(Ordering::Relaxed) {
                            return Err("stopped".into());
                        }
                        if Instant::now() > give_up {
                            counters.timed_out_request.fetch_add(1, Ordering::Relaxed);
                            return Err("request timed out".into());
                        }
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
    };
    debug_assert_eq!(head.len(), len);
    let req = received.request;
    match req.mode {
        Mode::Download => {
            if let Some(cca) = received.server_cca.as_deref() {
                if !allowed(cca) {
                    counters.refused_cca.fetch_add(1, Ordering::Relaxed);
                    return Err(format!("tcp:{cca} not allowed"));
                }
                if let Err(e) = set_congestion(stream.as_raw_fd(), cca) {
                    counters.refused_cca.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
            }
            let deadline = req.duration.map(|d| Instant::now() + d);
            let limit = req.size.unwrap_or(u64::MAX);
            let mut sent = 0u64;
            let mut progress = Instant::now();
            while sent < limit && !stop.load(Ordering::Relaxed) {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let n = (limit - sent).min(CHUNK as u64) as usize;
                match stream.write(pattern_slice(sent, n)) {
                    Ok(0) => break,
                    Ok(k) => {
                        sent += k as u64;
                        progress = Instant::now();
                        counters.bytes_sent.fetch_add(k as u64, Ordering::Relaxed);
                    }
                    Err(e) if is_timeout(&e) => {
                        if progress.elapsed() >= idle {
                            return idle_out(counters);
                        }
                    }
                    // The client went away: its flow is over.
                    Err(_) => break,
                }
            }
            counters.transfers.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Mode::Upload => {
            let mut rx = Receiver::new(len as u64);
            let mut offset = len as u64;
            let mut buf = vec![0u8; CHUNK];
            let mut next_progress = Instant::now() + tollgate_transport::bulk::PROGRESS_INTERVAL;
            let mut progress = Instant::now();
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => {
                        rx.on_chunk(offset, &buf[..k]);
                        offset += k as u64;
                        progress = Instant::now();
                        counters
                            .bytes_received
                            .fetch_add(k as u64, Ordering::Relaxed);
                    }
                    Err(e) if is_timeout(&e) => {
                        if progress.elapsed() >= idle {
                            return idle_out(counters);
                        }
                    }
                    Err(e) => return Err(e.to_string()),
                }
                if received.version >= 2 && Instant::now() >= next_progress {
                    next_progress += tollgate_transport::bulk::PROGRESS_INTERVAL;
                    write_all(&mut stream, &rx.received.to_be_bytes(), stop)?;
                }
            }
            counters
                .mismatches
                .fetch_add(rx.mismatches, Ordering::Relaxed);
            write_all(&mut stream, &rx.received.to_be_bytes(), stop)?;
            let _ = stream.shutdown(std::net::Shutdown::Write);
            counters.transfers.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }
}

/// Live totals of a server's TCP side.
#[derive(Debug, Default)]
pub struct TcpServeCounters {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections refused because the server was full.
    pub refused_full: AtomicU64,
    /// Downloads refused because the CCA is not allowed or not available.
    pub refused_cca: AtomicU64,
    /// Malformed requests.
    pub bad_requests: AtomicU64,
    /// Connections dropped for sending no complete request in time.
    pub timed_out_request: AtomicU64,
    /// Connections dropped because their transfer made no progress for the
    /// idle timeout (the client vanished).
    pub timed_out_idle: AtomicU64,
    /// Transfers completed.
    pub transfers: AtomicU64,
    /// Bytes sent.
    pub bytes_sent: AtomicU64,
    /// Bytes received.
    pub bytes_received: AtomicU64,
    /// Bytes that failed the pattern check.
    pub mismatches: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
}

/// Shared handle on [`TcpServeCounters`].
pub type SharedTcpCounters = Arc<TcpServeCounters>;

//! quiche as an independent reference peer (cargo feature `quiche`).
//!
//! Tollgate's own transport is quinn-proto; to check that it speaks QUIC with
//! somebody else, and to run "legacy" flows with Cloudflare's production
//! congestion control (Reno, CUBIC, BBRv2) next to Tollgate's, this module
//! runs [quiche](https://docs.rs/quiche) speaking Tollgate's
//! [bulk protocol](crate::bulk) (ALPN `tollgate-bulk`, [`ALPN`]):
//!
//! - [`run_client`] / [`spawn_client`]: a quiche **client** doing one
//!   [`Request`] (download or upload) against any bulk server;
//! - [`QuicheServer`]: a quiche **server** serving the bulk protocol to any
//!   number of connections on its own thread.
//!
//! Both check every received byte against the deterministic
//! [pattern](crate::bulk::pattern_byte), like [`crate::bulk`]'s apps, and both
//! are bounded in time ([`PeerOptions::time_limit`]).
//!
//! ## I/O and time
//!
//! Each peer owns one non-blocking UDP socket (bound through [`crate::udp::bind`]
//! for the same 8 MiB socket buffers) and a mio poll, on one thread. quiche reads
//! the clock itself (one reason it is not Tollgate's state machine: the
//! emulator must drive time), so these peers run in real time only, never in the
//! emulator's virtual time. Packets are sent as soon as quiche produces them
//! (quiche's `SendInfo::at` pacing hint is ignored, as in quiche's own
//! examples); datagrams are read in batches, then quiche is asked for
//! packets, so quiche acknowledges whatever arrived in one batch with one ACK.
//!
//! ## Certificates
//!
//! The server presents a [`SelfSigned`] certificate: quiche loads certificates
//! only from files, so [`QuicheServer::start`] writes the PEMs to a private
//! temporary directory, loads them and deletes the directory again. The quiche
//! **client does not verify the server's certificate** (`verify_peer(false)`):
//! it is a test peer talking to a self-signed Tollgate server on loopback.
//! Tollgate's client, talking to [`QuicheServer`], does verify it against the
//! same [`SelfSigned`] certificate.
//!
//! ## What the Tollgate side sees
//!
//! quiche implements neither the ACK-frequency extension nor a `min_ack_delay`
//! transport parameter, so a Tollgate sender running Libra cannot ask a quiche
//! receiver for one ACK per packet ([`crate::PromptAcks`]); Libra's capacity
//! then comes from its delivery-rate estimate (see `tests/quiche_interop.rs`).
//!
//! ## Building
//!
//! `cargo test -p tollgate-transport --features quiche`. quiche vendors
//! BoringSSL and builds it with cmake, and generates its bindings with
//! bindgen: the build needs `cmake`, a C/C++ compiler and `libclang-dev`
//! (Debian: `apt-get install cmake build-essential libclang-dev`).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

pub use quiche::CongestionControlAlgorithm;

use crate::bulk::{
    pattern_slice, Mode, Receiver, ReplyCounts, Request, RequestParse, PROTOCOL_ERROR, REQUEST_LEN,
};
use crate::tls::{SelfSigned, ALPN};

/// Length of the connection ids quiche peers choose for themselves.
const CID_LEN: usize = 16;
/// Largest UDP payload received.
const RECV_BUF: usize = 65_535;
/// Largest UDP payload quiche sends (fits any loopback or Ethernet path).
const MAX_SEND_PAYLOAD: usize = 1350;
/// Datagrams read per wake-up before timers and sending get a turn.
const RECV_BATCH: usize = 256;
/// Longest sleep, so deadlines and stop requests are noticed.
const MAX_SLEEP: Duration = Duration::from_millis(20);
/// Pattern bytes offered to quiche per `stream_send` call.
const WRITE_CHUNK: usize = 32 * 1024;
/// Most bidirectional streams a peer may open.
const MAX_STREAMS: u64 = 64;
/// Bound on per-connection reports kept by the server.
const MAX_REPORTS: usize = 1024;
/// After its time limit, how long a peer still waits for its close to go out.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Settings of a quiche peer.
#[derive(Clone, Debug)]
pub struct PeerOptions {
    /// quiche's congestion controller for the data this peer sends.
    pub cc: CongestionControlAlgorithm,
    /// Flow-control window per stream and per connection, bytes.
    pub window: u64,
    /// quiche's idle timeout.
    pub idle_timeout: Duration,
    /// Hard wall-clock bound. A client gives up its transfer after this long
    /// (closing with [`PROTOCOL_ERROR`]); a server stops after this long even
    /// if it was not asked to.
    pub time_limit: Duration,
    /// A client's goodput bytes so far (bytes received for downloads, the
    /// server's latest received count for uploads), for a sampler on another
    /// thread.
    pub progress: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// A client's local address (`None`: the unspecified address of the
    /// server's family, a port the kernel picks). A fixed port lets a router
    /// tell the flow apart by its 5-tuple (`tollgate testbed`).
    pub local: Option<SocketAddr>,
}

impl PeerOptions {
    /// Default options with congestion control `name` (`reno`, `cubic`,
    /// `bbr2`: quiche 0.30's BBRv2, "gcongestion"); `None` for other names.
    pub fn with_cc(name: &str) -> Option<Self> {
        let cc = match name {
            "reno" => CongestionControlAlgorithm::Reno,
            "cubic" => CongestionControlAlgorithm::CUBIC,
            "bbr2" => CongestionControlAlgorithm::Bbr2Gcongestion,
            _ => return None,
        };
        Some(PeerOptions {
            cc,
            ..PeerOptions::default()
        })
    }
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions {
            cc: CongestionControlAlgorithm::CUBIC,
            window: 16 << 20,
            idle_timeout: Duration::from_secs(5),
            time_limit: Duration::from_secs(10),
            progress: None,
            local: None,
        }
    }
}

/// An error setting up a quiche peer.
#[derive(Debug)]
pub struct PeerError(pub String);

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "quiche peer: {}", self.0)
    }
}

impl std::error::Error for PeerError {}

impl From<quiche::Error> for PeerError {
    fn from(e: quiche::Error) -> Self {
        PeerError(format!("quiche: {e}"))
    }
}

impl From<io::Error> for PeerError {
    fn from(e: io::Error) -> Self {
        PeerError(format!("io: {e}"))
    }
}

/// A `CONNECTION_CLOSE` as quiche reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseInfo {
    /// Closed by the application (`true`) or the transport.
    pub app: bool,
    /// Error code (0 with `app` = clean).
    pub code: u64,
    /// Reason phrase.
    pub reason: Vec<u8>,
}

impl From<&quiche::ConnectionError> for CloseInfo {
    fn from(e: &quiche::ConnectionError) -> Self {
        CloseInfo {
            app: e.is_app,
            code: e.error_code,
            reason: e.reason.clone(),
        }
    }
}

impl CloseInfo {
    /// An application close with code 0.
    pub fn is_clean(&self) -> bool {
        self.app && self.code == 0
    }
}

/// quiche's view of one connection, taken when it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerStats {
    /// QUIC packets sent.
    pub packets_sent: u64,
    /// QUIC packets received.
    pub packets_received: u64,
    /// Packets quiche declared lost.
    pub packets_lost: u64,
    /// Packets retransmitted.
    pub packets_retransmitted: u64,
    /// Bytes sent (UDP payload).
    pub bytes_sent: u64,
    /// Bytes received (UDP payload).
    pub bytes_received: u64,
    /// Bytes quiche declared lost.
    pub bytes_lost: u64,
    /// Smoothed RTT of the active path.
    pub rtt: Option<Duration>,
    /// Minimum RTT of the active path.
    pub min_rtt: Option<Duration>,
    /// Congestion window of the active path, bytes.
    pub cwnd: Option<u64>,
    /// How the peer closed the connection, if it did.
    pub peer_close: Option<CloseInfo>,
    /// How this side closed it, if it did.
    pub local_close: Option<CloseInfo>,
    /// The idle timeout ended the connection.
    pub timed_out: bool,
}

fn stats_of(conn: &quiche::Connection) -> PeerStats {
    let s = conn.stats();
    let path = conn.path_stats().find(|p| p.active);
    PeerStats {
        packets_sent: s.sent as u64,
        packets_received: s.recv as u64,
        packets_lost: s.lost as u64,
        packets_retransmitted: s.retrans as u64,
        bytes_sent: s.sent_bytes,
        bytes_received: s.recv_bytes,
        bytes_lost: s.lost_bytes,
        rtt: path.as_ref().map(|p| p.rtt),
        min_rtt: path.as_ref().and_then(|p| p.min_rtt),
        cwnd: path.as_ref().map(|p| p.cwnd as u64),
        peer_close: conn.peer_error().map(CloseInfo::from),
        local_close: conn.local_error().map(CloseInfo::from),
        timed_out: conn.is_timed_out(),
    }
}

/// A fresh connection id. Not cryptographically strong (std's randomly keyed
/// SipHash over a counter and the time): enough for test peers, not for
/// exposed servers.
fn random_cid() -> [u8; CID_LEN] {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut out = [0u8; CID_LEN];
    for chunk in out.chunks_mut(8) {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(nanos);
        chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
    }
    out
}

/// A quiche configuration for Tollgate's bulk protocol.
fn config(options: &PeerOptions, pem: Option<(&str, &str)>) -> Result<quiche::Config, PeerError> {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION)?;
    c.set_application_protos(&[ALPN])?;
    match pem {
        Some((cert, key)) => {
            c.load_cert_chain_from_pem_file(cert)?;
            c.load_priv_key_from_pem_file(key)?;
            // No client certificates.
            c.verify_peer(false);
        }
        // Test client against a self-signed server: see the module docs.
        None => c.verify_peer(false),
    }
    c.set_max_idle_timeout(options.idle_timeout.as_millis() as u64);
    c.set_max_recv_udp_payload_size(RECV_BUF);
    c.set_max_send_udp_payload_size(MAX_SEND_PAYLOAD);
    c.set_initial_max_data(options.window);
    c.set_initial_max_stream_data_bidi_local(options.window);
    c.set_initial_max_stream_data_bidi_remote(options.window);
    c.set_initial_max_stream_data_uni(0);
    c.set_initial_max_streams_bidi(MAX_STREAMS);
    c.set_initial_max_streams_uni(0);
    c.set_max_connection_window(options.window.max(1 << 20));
    c.set_max_stream_window(options.window.max(1 << 20));
    c.set_disable_active_migration(true);
    c.set_cc_algorithm(options.cc);
    Ok(c)
}

/// One UDP socket with a mio poll and a one-datagram send backlog.
struct Io {
    socket: mio::net::UdpSocket,
    poll: Poll,
    events: Events,
    local: SocketAddr,
    rx: Vec<u8>,
    tx: Vec<u8>,
    /// A datagram in `tx` the socket would not take yet.
    pending: Option<(usize, SocketAddr)>,
    send_errors: u64,
}

impl Io {
    fn bind(addr: SocketAddr) -> io::Result<Io> {
        Io::from_std(crate::udp::bind(addr)?)
    }

    fn from_std(std: std::net::UdpSocket) -> io::Result<Io> {
        std.set_nonblocking(true)?;
        let mut socket = mio::net::UdpSocket::from_std(std);
        let poll = Poll::new()?;
        poll.registry().register(
            &mut socket,
            Token(0),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let local = socket.local_addr()?;
        Ok(Io {
            socket,
            poll,
            events: Events::with_capacity(8),
            local,
            rx: vec![0; RECV_BUF],
            tx: vec![0; RECV_BUF],
            pending: None,
            send_errors: 0,
        })
    }

    /// One datagram into `rx`, or `None` when there is none.
    fn recv(&mut self) -> Option<(usize, SocketAddr)> {
        loop {
            match self.socket.recv_from(&mut self.rx) {
                Ok(got) => return Some(got),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock, or e.g. ICMP port unreachable from a peer that left.
                Err(_) => return None,
            }
        }
    }

    /// Send the pending datagram; `false` if the socket is still full.
    fn send_pending(&mut self) -> bool {
        let Some((len, to)) = self.pending else {
            return true;
        };
        match self.socket.send_to(&self.tx[..len], to) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => self.send_errors += 1,
        }
        self.pending = None;
        true
    }

    /// Send everything `conn` has; `false` if the socket filled up first.
    fn flush(&mut self, conn: &mut quiche::Connection) -> bool {
        loop {
            if !self.send_pending() {
                return false;
            }
            match conn.send(&mut self.tx) {
                Ok((len, info)) => self.pending = Some((len, info.to)),
                // Done, or an error quiche has already turned into a close.
                Err(_) => return true,
            }
        }
    }

    /// Sleep until a datagram arrives, the socket drains, or `until`.
    fn wait(&mut self, until: Option<Instant>) -> io::Result<()> {
        let now = Instant::now();
        let mut sleep = until.map_or(MAX_SLEEP, |t| t.saturating_duration_since(now));
        sleep = sleep.min(MAX_SLEEP);
        if self.pending.is_some() {
            sleep = sleep.min(Duration::from_millis(1));
        }
        match self.poll.poll(&mut self.events, Some(sleep)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// When quiche's next timer fires.
fn timer_at(conn: &quiche::Connection, now: Instant) -> Option<Instant> {
    conn.timeout().map(|d| now + d)
}

/// Pattern data into a quiche stream, with back-pressure: `limit` bytes (or
/// unlimited) or until `deadline`, then FIN.
#[derive(Clone, Debug)]
struct PatternSender {
    prefix: Vec<u8>,
    prefix_sent: usize,
    sent: u64,
    limit: Option<u64>,
    deadline: Option<Instant>,
    finished: bool,
}

impl PatternSender {
    fn new(prefix: Vec<u8>, limit: Option<u64>, deadline: Option<Instant>) -> Self {
        PatternSender {
            prefix,
            prefix_sent: 0,
            sent: 0,
            limit,
            deadline,
            finished: false,
        }
    }

    /// Write until blocked or done; `Err` on a stream error (stopped, reset).
    fn pump(
        &mut self,
        now: Instant,
        conn: &mut quiche::Connection,
        id: u64,
    ) -> Result<(), quiche::Error> {
        if self.finished {
            return Ok(());
        }
        while self.prefix_sent < self.prefix.len() {
            match conn.stream_send(id, &self.prefix[self.prefix_sent..], false) {
                Ok(0) | Err(quiche::Error::Done) => return Ok(()),
                Ok(n) => self.prefix_sent += n,
                Err(e) => return Err(e),
            }
        }
        loop {
            let expired = self.deadline.is_some_and(|d| now >= d);
            let remaining = self.limit.map_or(u64::MAX, |l| l - self.sent);
            if expired || remaining == 0 {
                return match conn.stream_send(id, &[], true) {
                    Ok(_) => {
                        self.finished = true;
                        Ok(())
                    }
                    Err(quiche::Error::Done) => Ok(()),
                    Err(e) => Err(e),
                };
            }
            let n = remaining.min(WRITE_CHUNK as u64) as usize;
            match conn.stream_send(id, pattern_slice(self.sent, n), false) {
                Ok(0) | Err(quiche::Error::Done) => return Ok(()),
                Ok(w) => self.sent += w as u64,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Outcome of one quiche client transfer.
#[derive(Clone, Debug, Default)]
pub struct QuicheResult {
    /// Pattern bytes moved: received (download) or acknowledged by the
    /// server's reply (upload).
    pub bytes: u64,
    /// Pattern bytes this client wrote (upload).
    pub bytes_sent: u64,
    /// From handshake completion to the end of the data.
    pub elapsed: Duration,
    /// Bytes that failed the pattern check, plus any difference between the
    /// upload's sent and acknowledged counts (must be 0).
    pub mismatches: u64,
    /// All requested bytes arrived intact (uploads: the server agreed on the count).
    pub complete: bool,
    /// The handshake completed with ALPN `tollgate-bulk`.
    pub established: bool,
    /// quiche's statistics when the connection ended.
    pub stats: Option<PeerStats>,
    /// The first error, if any (including hitting the time limit).
    pub error: Option<String>,
}

impl QuicheResult {
    /// The transfer completed and this client closed with code 0 while the
    /// server did not close with an error.
    pub fn closed_cleanly(&self) -> bool {
        self.complete
            && self.stats.as_ref().is_some_and(|s| {
                s.local_close.as_ref().is_some_and(CloseInfo::is_clean)
                    && s.peer_close.as_ref().is_none_or(CloseInfo::is_clean)
            })
    }
}

/// Client stream id: the first client-initiated bidirectional stream.
const CLIENT_STREAM: u64 = 0;

struct ClientState {
    request: Request,
    sender: Option<PatternSender>,
    receiver: Receiver,
    read_offset: u64,
    reply: ReplyCounts,
    started: Option<Instant>,
    /// The transfer is over: close once the pending ACKs have been sent.
    close_pending: bool,
    closing: bool,
    result: QuicheResult,
    progress: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl ClientState {
    fn fail(&mut self, conn: &mut quiche::Connection, msg: String) {
        self.result.error.get_or_insert(msg);
        if !self.closing {
            self.closing = true;
            let _ = conn.close(true, u64::from(PROTOCOL_ERROR), b"error");
        }
    }

    fn finish_transfer(&mut self, now: Instant, bytes: u64) {
        self.result.bytes = bytes;
        self.result.elapsed = self
            .started
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        self.result.mismatches += self.receiver.mismatches;
        self.result.complete =
            self.result.mismatches == 0 && self.request.size.is_none_or(|s| s == bytes);
        // Acknowledge the last data before closing (quiche puts no ACK in a
        // 1-RTT close), so the sender's congestion controller sees every ACK.
        self.close_pending = true;
    }

    /// Close with code 0 if the transfer is over (call after a flush);
    /// whether it closed now.
    fn close_if_done(&mut self, conn: &mut quiche::Connection) -> bool {
        if !self.close_pending || self.closing {
            return false;
        }
        self.closing = true;
        let _ = conn.close(true, 0, b"done");
        true
    }

    /// Advance the transfer after input or timers.
    fn drive(&mut self, now: Instant, conn: &mut quiche::Connection, buf: &mut [u8]) {
        if self.closing || self.close_pending || !conn.is_established() {
            return;
        }
        if self.started.is_none() {
            self.started = Some(now);
            self.result.established = conn.application_proto() == ALPN;
            // v2 (no server CCA): a v2 server sends upload progress counts.
            let prefix = self.request.encode_v2(None).unwrap_or_default();
            let deadline = self.request.duration.map(|d| now + d);
            self.sender = Some(match self.request.mode {
                Mode::Download => PatternSender::new(prefix, Some(0), None),
                Mode::Upload => PatternSender::new(prefix, self.request.size, deadline),
            });
        }
        if let Some(s) = self.sender.as_mut() {
            if let Err(e) = s.pump(now, conn, CLIENT_STREAM) {
                return self.fail(conn, format!("send: {e}"));
            }
            self.result.bytes_sent = s.sent;
        }
        // Read whatever the server sent on our stream.
        let mut fin = false;
        while !fin {
            match conn.stream_recv(CLIENT_STREAM, buf) {
                Ok((n, f)) => {
                    fin = f;
                    match self.request.mode {
                        Mode::Download => {
                            self.receiver.on_chunk(self.read_offset, &buf[..n]);
                            if let Some(p) = self.progress.as_ref() {
                                p.store(
                                    self.receiver.received,
                                    std::sync::atomic::Ordering::Relaxed,
                                );
                            }
                        }
                        Mode::Upload => {
                            self.reply.on_bytes(&buf[..n]);
                            if let (Some(p), Some(c)) = (self.progress.as_ref(), self.reply.latest)
                            {
                                p.store(c, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                    self.read_offset += n as u64;
                }
                Err(quiche::Error::Done) => break,
                Err(e) => return self.fail(conn, format!("receive: {e}")),
            }
        }
        if !fin {
            return;
        }
        match self.request.mode {
            Mode::Download => {
                let bytes = self.receiver.received;
                self.finish_transfer(now, bytes);
            }
            Mode::Upload => {
                let Some(acked) = self.reply.finish() else {
                    return self.fail(conn, "malformed reply".into());
                };
                let sent = self.sender.as_ref().map_or(0, |s| s.sent);
                self.result.mismatches += acked.abs_diff(sent);
                self.finish_transfer(now, acked);
            }
        }
    }
}

/// Run one bulk transfer as a quiche client against `remote` (a Tollgate
/// [`BulkServer`](crate::bulk::BulkServer) or any server of the protocol),
/// from a fresh socket on [`PeerOptions::local`] (default: the unspecified
/// address of `remote`'s family). Returns
/// within [`PeerOptions::time_limit`] plus about a second.
pub fn run_client(
    remote: SocketAddr,
    server_name: &str,
    request: Request,
    options: &PeerOptions,
) -> QuicheResult {
    let mut result = QuicheResult::default();
    if let Err(e) = client_loop(remote, server_name, request, options, &mut result) {
        result.error.get_or_insert(e.to_string());
    }
    result
}

/// [`run_client`] on a new thread.
pub fn spawn_client(
    remote: SocketAddr,
    server_name: &str,
    request: Request,
    options: PeerOptions,
) -> JoinHandle<QuicheResult> {
    let server_name = server_name.to_string();
    std::thread::Builder::new()
        .name("quiche-client".into())
        .spawn(move || run_client(remote, &server_name, request, &options))
        .expect("spawn quiche client thread")
}

/// Any local address of `remote`'s family (the kernel picks the source
/// address of the route to `remote`).
fn unspecified_for(remote: SocketAddr) -> SocketAddr {
    if remote.is_ipv6() {
        "[::]:0".parse().expect("address")
    } else {
        "0.0.0.0:0".parse().expect("address")
    }
}

fn client_loop(
    remote: SocketAddr,
    server_name: &str,
    request: Request,
    options: &PeerOptions,
    out: &mut QuicheResult,
) -> Result<(), PeerError> {
    let mut cfg = config(options, None)?;
    let mut io = Io::bind(options.local.unwrap_or_else(|| unspecified_for(remote)))?;
    let scid = random_cid();
    let scid = quiche::ConnectionId::from_ref(&scid);
    let mut conn = quiche::connect(Some(server_name), &scid, io.local, remote, &mut cfg)?;
    let start = Instant::now();
    let deadline = start + options.time_limit;
    let mut state = ClientState {
        request,
        sender: None,
        receiver: Receiver::new(0),
        read_offset: 0,
        reply: ReplyCounts::default(),
        started: None,
        close_pending: false,
        closing: false,
        result: QuicheResult::default(),
        progress: options.progress.clone(),
    };
    let mut buf = vec![0u8; RECV_BUF];
    loop {
        let now = Instant::now();
        io.flush(&mut conn);
        if state.close_if_done(&mut conn) {
            io.flush(&mut conn);
        }
        let timer = timer_at(&conn, now);
        if conn.is_closed() {
            break;
        }
        if now >= deadline {
            if !state.closing {
                state.fail(
                    &mut conn,
                    format!("time limit {:?} reached", options.time_limit),
                );
                continue;
            }
            if now >= deadline + CLOSE_GRACE {
                break;
            }
        }
        // Past the time limit, only the close is still going out.
        let until = if now >= deadline {
            deadline + CLOSE_GRACE
        } else {
            deadline
        };
        io.wait(Some(timer.map_or(until, |t| t.min(until))))?;
        let mut got = 0;
        while got < RECV_BATCH {
            let Some((n, from)) = io.recv() else { break };
            got += 1;
            let info = quiche::RecvInfo { from, to: io.local };
            // Undecryptable or stray datagrams are dropped by quiche.
            let _ = conn.recv(&mut io.rx[..n], info);
        }
        let now = Instant::now();
        if timer.is_some_and(|t| now >= t) {
            conn.on_timeout();
        }
        state.drive(now, &mut conn, &mut buf);
    }
    if !state.result.complete && state.result.error.is_none() {
        state.result.error = Some(match conn.peer_error() {
            Some(e) => format!("server closed: {:?}", CloseInfo::from(e)),
            None if conn.is_timed_out() => "idle timeout".into(),
            None => "connection ended before completion".into(),
        });
    }
    state.result.stats = Some(stats_of(&conn));
    *out = state.result;
    Ok(())
}

/// One stream on the quiche server.
#[derive(Debug)]
enum ServerStream {
    Header(Vec<u8>),
    Sending(PatternSender),
    Receiving { rx: Receiver, offset: u64 },
    Replying(PatternSender),
    Done,
}

/// Totals of a [`QuicheServer`].
#[derive(Clone, Debug, Default)]
pub struct QuicheServerSummary {
    /// Connections accepted.
    pub accepted: u64,
    /// Transfers whose stream ended normally.
    pub transfers: u64,
    /// Pattern bytes sent (downloads).
    pub bytes_sent: u64,
    /// Pattern bytes received (uploads).
    pub bytes_received: u64,
    /// Received bytes that failed the pattern check.
    pub mismatches: u64,
    /// Requests rejected as malformed.
    pub bad_requests: u64,
    /// Connections the peer closed with application code 0.
    pub clean_closes: u64,
    /// quiche's statistics of each finished connection, in order of closing
    /// (the first 1024).
    pub connections: Vec<PeerStats>,
    /// Datagrams the socket refused (other than would-block).
    pub send_errors: u64,
    /// The server stopped at its time limit rather than on request.
    pub hit_time_limit: bool,
}

struct ServerConn {
    conn: quiche::Connection,
    cids: Vec<Vec<u8>>,
    streams: HashMap<u64, ServerStream>,
}

impl ServerConn {
    /// Read from and write to every stream that can make progress.
    fn drive(&mut self, now: Instant, sum: &mut QuicheServerSummary, buf: &mut [u8]) {
        let readable: Vec<u64> = self.conn.readable().collect();
        for id in readable {
            // Bulk transfers use client-initiated bidirectional streams only.
            if id % 4 != 0 {
                let _ = self.conn.stream_shutdown(
                    id,
                    quiche::Shutdown::Read,
                    u64::from(PROTOCOL_ERROR),
                );
                continue;
            }
            self.streams
                .entry(id)
                .or_insert_with(|| ServerStream::Header(Vec::with_capacity(REQUEST_LEN)));
            self.step(now, id, sum, buf);
        }
        let active: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, s)| matches!(s, ServerStream::Sending(_) | ServerStream::Replying(_)))
            .map(|(id, _)| *id)
            .collect();
        for id in active {
            self.step(now, id, sum, buf);
        }
    }

    /// Advance one stream.
    fn step(&mut self, now: Instant, id: u64, sum: &mut QuicheServerSummary, buf: &mut [u8]) {
        let Some(mut state) = self.streams.remove(&id) else {
            return;
        };
        if let Err(e) = self.advance(now, id, &mut state, sum, buf) {
            tracing::debug!(stream = id, error = %e, "quiche server stream ended");
            state = ServerStream::Done;
        }
        self.streams.insert(id, state);
    }

    fn advance(
        &mut self,
        now: Instant,
        id: u64,
        state: &mut ServerStream,
        sum: &mut QuicheServerSummary,
        buf: &mut [u8],
    ) -> Result<(), quiche::Error> {
        let conn = &mut self.conn;
        if let ServerStream::Header(head) = state {
            // v1 or v2 (whose requested server CCA this reference peer
            // ignores: quiche's congestion control is fixed per peer).
            let mut fin = false;
            let parsed = loop {
                match Request::parse(head) {
                    RequestParse::Need(want) if !fin => {
                        match conn.stream_recv(id, &mut buf[..want]) {
                            Ok((n, f)) => {
                                head.extend_from_slice(&buf[..n]);
                                fin = f;
                            }
                            Err(quiche::Error::Done) => return Ok(()),
                            Err(e) => return Err(e),
                        }
                    }
                    RequestParse::Done(r, len) => break Some((r.request, len)),
                    _ => break None,
                }
            };
            let Some((req, len)) = parsed else {
                sum.bad_requests += 1;
                let _ = conn.close(true, u64::from(PROTOCOL_ERROR), b"bad request");
                *state = ServerStream::Done;
                return Ok(());
            };
            let deadline = req.duration.map(|d| now + d);
            *state = match req.mode {
                Mode::Download => {
                    ServerStream::Sending(PatternSender::new(Vec::new(), req.size, deadline))
                }
                Mode::Upload => ServerStream::Receiving {
                    rx: Receiver::new(len as u64),
                    offset: len as u64,
                },
            };
        }
        match state {
            ServerStream::Header(_) | ServerStream::Done => {
                // Drain and ignore anything else the client sends (e.g. its FIN).
                while let Ok((_, fin)) = conn.stream_recv(id, buf) {
                    if fin {
                        break;
                    }
                }
            }
            ServerStream::Sending(s) => {
                while let Ok((_, fin)) = conn.stream_recv(id, buf) {
                    if fin {
                        break;
                    }
                }
                let before = s.sent;
                s.pump(now, conn, id)?;
                sum.bytes_sent += s.sent - before;
                if s.finished {
                    sum.transfers += 1;
                    *state = ServerStream::Done;
                }
            }
            ServerStream::Receiving { rx, offset } => {
                let before = (rx.received, rx.mismatches);
                let mut fin = false;
                while !fin {
                    match conn.stream_recv(id, buf) {
                        Ok((n, f)) => {
                            rx.on_chunk(*offset, &buf[..n]);
                            *offset += n as u64;
                            fin = f;
                        }
                        Err(quiche::Error::Done) => break,
                        Err(e) => return Err(e),
                    }
                }
                sum.bytes_received += rx.received - before.0;
                sum.mismatches += rx.mismatches - before.1;
                if fin {
                    let count = rx.received.to_be_bytes().to_vec();
                    let mut reply = PatternSender::new(count, Some(0), None);
                    reply.pump(now, conn, id)?;
                    *state = ServerStream::Replying(reply);
                }
                if let ServerStream::Replying(r) = state {
                    if r.finished {
                        sum.transfers += 1;
                        *state = ServerStream::Done;
                    }
                }
            }
            ServerStream::Replying(r) => {
                r.pump(now, conn, id)?;
                if r.finished {
                    sum.transfers += 1;
                    *state = ServerStream::Done;
                }
            }
        }
        Ok(())
    }
}

/// A quiche server serving Tollgate's bulk protocol on its own thread.
#[derive(Debug)]
pub struct QuicheServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<QuicheServerSummary, PeerError>>>,
}

/// Removes a directory when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pem_dir(certs: &SelfSigned) -> Result<TempDir, PeerError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tollgate-quiche-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut builder = std::fs::DirBuilder::new();
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(&dir)?;
    let dir = TempDir(dir);
    std::fs::write(dir.0.join("cert.pem"), certs.cert_pem())?;
    std::fs::write(dir.0.join("key.pem"), certs.key_pem())?;
    Ok(dir)
}

impl QuicheServer {
    /// Bind to `addr` (use a loopback address in tests), present `certs`
    /// and serve until [`finish`](Self::finish) or [`PeerOptions::time_limit`].
    pub fn start(
        addr: SocketAddr,
        certs: &SelfSigned,
        options: PeerOptions,
    ) -> Result<QuicheServer, PeerError> {
        let socket = crate::udp::bind(addr)?;
        let addr = socket.local_addr()?;
        let dir = pem_dir(certs)?;
        let cert = dir.0.join("cert.pem").to_string_lossy().into_owned();
        let key = dir.0.join("key.pem").to_string_lossy().into_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("quiche-server".into())
            .spawn(move || {
                // quiche's configuration is built on this thread (it need not be Send).
                let setup = config(&options, Some((&cert, &key)))
                    .and_then(|cfg| Ok((cfg, Io::from_std(socket)?)));
                let (cfg, io) = match setup {
                    Ok(v) => {
                        let _ = ready_tx.send(Ok(()));
                        v
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.0.clone()));
                        return Err(e);
                    }
                };
                server_loop(cfg, io, &options, &flag)
            })
            .map_err(PeerError::from)?;
        let ready = ready_rx
            .recv()
            .unwrap_or_else(|_| Err("server thread exited".into()));
        // The key material is loaded (or loading failed): remove the files.
        drop(dir);
        if let Err(e) = ready {
            let _ = thread.join();
            return Err(PeerError(e));
        }
        Ok(QuicheServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting work: the server ends once every connection has closed
    /// (or at its time limit); returns its totals.
    pub fn finish(mut self) -> Result<QuicheServerSummary, PeerError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().expect("thread").join() {
            Ok(r) => r,
            Err(_) => Err(PeerError("server thread panicked".into())),
        }
    }
}

impl Drop for QuicheServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn server_loop(
    mut cfg: quiche::Config,
    mut io: Io,
    options: &PeerOptions,
    stop: &AtomicBool,
) -> Result<QuicheServerSummary, PeerError> {
    let mut sum = QuicheServerSummary::default();
    let mut conns: HashMap<u64, ServerConn> = HashMap::new();
    let mut by_cid: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut next_key = 0u64;
    let mut buf = vec![0u8; RECV_BUF];
    let deadline = Instant::now() + options.time_limit;
    loop {
        // Send, retire closed connections, and decide whether to go on.
        let now = Instant::now();
        let mut timer: Option<Instant> = None;
        let mut closed = Vec::new();
        for (key, c) in conns.iter_mut() {
            io.flush(&mut c.conn);
            if c.conn.is_closed() {
                closed.push(*key);
            } else if let Some(t) = timer_at(&c.conn, now) {
                timer = Some(timer.map_or(t, |x| x.min(t)));
            }
        }
        for key in closed {
            let c = conns.remove(&key).expect("connection");
            for cid in &c.cids {
                by_cid.remove(cid);
            }
            let stats = stats_of(&c.conn);
            if stats.peer_close.as_ref().is_some_and(CloseInfo::is_clean) {
                sum.clean_closes += 1;
            }
            if sum.connections.len() < MAX_REPORTS {
                sum.connections.push(stats);
            }
        }
        if stop.load(Ordering::Relaxed) && conns.is_empty() && io.pending.is_none() {
            break;
        }
        if now >= deadline {
            sum.hit_time_limit = true;
            for c in conns.values_mut() {
                let _ = c.conn.close(true, u64::from(PROTOCOL_ERROR), b"time limit");
                io.flush(&mut c.conn);
            }
            break;
        }
        io.wait(Some(timer.map_or(deadline, |t| t.min(deadline))))?;

        // Input.
        let mut got = 0;
        while got < RECV_BATCH {
            let Some((n, from)) = io.recv() else { break };
            got += 1;
            let packet = &mut io.rx[..n];
            let Ok(hdr) = quiche::Header::from_slice(packet, CID_LEN) else {
                continue;
            };
            let dcid = hdr.dcid.to_vec();
            let key = match by_cid.get(&dcid) {
                Some(k) => *k,
                None => {
                    if hdr.ty != quiche::Type::Initial {
                        continue;
                    }
                    if !quiche::version_is_supported(hdr.version) {
                        if let Ok(len) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut buf) {
                            let _ = io.socket.send_to(&buf[..len], from);
                        }
                        continue;
                    }
                    let scid = random_cid();
                    let cid = quiche::ConnectionId::from_ref(&scid);
                    let conn = match quiche::accept(&cid, None, io.local, from, &mut cfg) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::debug!(error = %e, "quiche accept failed");
                            continue;
                        }
                    };
                    let key = next_key;
                    next_key += 1;
                    sum.accepted += 1;
                    by_cid.insert(scid.to_vec(), key);
                    by_cid.insert(dcid.clone(), key);
                    conns.insert(
                        key,
                        ServerConn {
                            conn,
                            cids: vec![scid.to_vec(), dcid],
                            streams: HashMap::new(),
                        },
                    );
                    key
                }
            };
            if let Some(c) = conns.get_mut(&key) {
                let info = quiche::RecvInfo { from, to: io.local };
                let _ = c.conn.recv(&mut io.rx[..n], info);
            }
        }

        // Timers and application.
        let now = Instant::now();
        for c in conns.values_mut() {
            if timer_at(&c.conn, now).is_some_and(|t| t <= now) {
                c.conn.on_timeout();
            }
            if c.conn.is_established() {
                c.drive(now, &mut sum, &mut buf);
            }
        }
    }
    sum.send_errors = io.send_errors;
    Ok(sum)
}

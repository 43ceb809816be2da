//! The sans-IO core: one [`Endpoint`] owns a quinn-proto endpoint and all its
//! connections. It never reads a clock and never touches a socket; a driver
//! feeds it datagrams and time and takes datagrams out:
//!
//! ```text
//! loop {
//!     while let Some(t) = ep.poll_transmit(now, &mut buf) { send(&buf[..t.size], t.destination, t.tos()) }
//!     wait until a datagram arrives or ep.poll_timeout() passes
//!     ep.handle_datagram(now, from, tos, &data)   // for each datagram
//!     ep.handle_timeout(now)
//!     while let Some(ev) = ep.poll_event() { app reacts: ep.read / ep.write / ep.close … }
//! }
//! ```
//!
//! The mio driver ([`crate::driver`]) uses the real monotonic clock; the
//! emulator uses virtual `Instant`s (a fixed base plus a virtual offset). Both
//! only ever move `now` forward.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{
    AckFrequencyConfig, ClientConfig, ConnectionError, ConnectionHandle, DatagramEvent, Dir,
    EcnCodepoint, EndpointConfig, ServerConfig, StreamEvent, StreamId, TransportConfig, VarInt,
};
use rustc_hash::FxHashMap;
use tracing::Span;

use crate::adapter::CcaHandle;
use crate::pacing::RatePacer;
use crate::stats::{ConnReport, EndpointStats, Recorder};
use crate::window::Windows;

/// Bound on queued stateless responses.
const MAX_RESPONSES: usize = 1024;
/// Bound on queued application events.
const MAX_EVENTS: usize = 1 << 16;

/// When to ask the peer for an ACK per packet (ACK-frequency extension).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PromptAcks {
    /// Only for algorithms that need per-packet timing (Libra's CapProbe).
    #[default]
    Auto,
    /// Always request an immediate ACK for every ack-eliciting packet.
    Always,
    /// Never (the peer's default: one ACK per two packets or `max_ack_delay`).
    Never,
}

/// Per-connection settings.
#[derive(Clone, Debug)]
pub struct ConnectionOptions {
    /// Congestion control, as a `tollgate-cca` registry spec (`"cubic"`, `"taxed(cubic, tau=0.02)"`).
    pub cca: String,
    /// Put the CCA's variant id in the DSCP field of every outgoing datagram.
    pub mark_dscp: bool,
    /// Interval of the statistics time series.
    pub stats_interval: Duration,
    /// Per-packet ACK policy.
    pub prompt_acks: PromptAcks,
    /// Initial connection-level receive window, bytes (what the peer may
    /// send ahead of our reads). See [`window`](crate::window) for how it
    /// grows up to [`max_window`](Self::max_window).
    pub window: u64,
    /// Ceiling of the receive window's auto-tuning and of the send buffer,
    /// bytes; `max_window == window` fixes the receive window.
    pub max_window: u64,
    /// Idle timeout.
    pub idle_timeout: Duration,
    /// The rate of this host's own link (interface or access link), bit/s,
    /// if known: the congestion controller's upper bound for capacity
    /// estimates (Libra's CapProbe rejects pair estimates above it).
    pub link_rate_bps: Option<f64>,
    /// A seed of this flow's own for the congestion controller's random
    /// draws (BBR's probe timing; `tollgate_cca::Env::seed`), used where the
    /// spec sets no `seed`; `None`: the algorithm's default.
    pub cca_seed: Option<u64>,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            cca: "newreno".into(),
            mark_dscp: false,
            stats_interval: Duration::from_millis(100),
            prompt_acks: PromptAcks::Auto,
            window: crate::window::DEFAULT_INITIAL,
            max_window: crate::window::DEFAULT_MAX,
            idle_timeout: Duration::from_secs(30),
            link_rate_bps: None,
            cca_seed: None,
        }
    }
}

impl ConnectionOptions {
    /// Options with congestion control `spec`.
    pub fn with_cca(spec: &str) -> Self {
        ConnectionOptions {
            cca: spec.into(),
            ..Default::default()
        }
    }

    /// Whether prompt ACKs are requested for this connection.
    pub fn wants_prompt_acks(&self) -> bool {
        match self.prompt_acks {
            PromptAcks::Always => true,
            PromptAcks::Never => false,
            PromptAcks::Auto => self.cca.contains("libra"),
        }
    }

    fn transport(&self, cca: &CcaHandle) -> Arc<TransportConfig> {
        let mut t = TransportConfig::default();
        t.congestion_controller_factory(cca.factory());
        let w = crate::window::Windows::new(self.window, self.max_window, cca.window());
        // The stream window is the ceiling: the connection window (grown by
        // auto-tuning) is what limits the peer.
        t.stream_receive_window(VarInt::from_u64(w.max).unwrap_or(VarInt::MAX))
            .receive_window(VarInt::from_u64(w.receive).unwrap_or(VarInt::MAX))
            .send_window(w.send);
        t.max_idle_timeout(self.idle_timeout.try_into().ok());
        if self.wants_prompt_acks() {
            let mut af = AckFrequencyConfig::default();
            af.ack_eliciting_threshold(VarInt::from_u32(0));
            t.ack_frequency_config(Some(af));
        }
        Arc::new(t)
    }
}

/// Endpoint-wide settings.
#[derive(Clone, Debug)]
pub struct EndpointOptions {
    /// Most connections held at once; further incoming ones are refused.
    pub max_connections: usize,
    /// Datagrams quinn-proto may put in one transmit (GSO batch); 1 disables batching.
    pub max_gso_segments: usize,
    /// Allow path-MTU discovery (the driver must set don't-fragment).
    pub allow_mtud: bool,
    /// Seed for quinn-proto's RNG (connection ids, tokens); `None` uses the OS.
    pub rng_seed: Option<[u8; 32]>,
}

impl Default for EndpointOptions {
    fn default() -> Self {
        EndpointOptions {
            max_connections: 4096,
            max_gso_segments: 1,
            allow_mtud: true,
            rng_seed: None,
        }
    }
}

/// How a server admits new connections: address validation (QUIC Retry)
/// under load, a cap on handshakes in progress and a deadline for each
/// handshake. Set with [`Endpoint::set_admission`]; [`Default`] validates no
/// address, caps nothing beyond [`EndpointOptions::max_connections`] and
/// leaves half-open connections to the idle timeout (what an emulated
/// server, whose clients are all real, wants).
///
/// Each new client (an Initial packet that quinn-proto could decode) meets
/// these checks in order; the first that applies decides, and each outcome
/// is counted in [`EndpointStats`]:
///
/// 1. `max_connections` connections held (handshakes included): refused
///    with `CONNECTION_REFUSED` ([`EndpointStats::refused`]);
/// 2. the client's address is not validated (no Retry token) and at least
///    `retry_threshold` handshakes with unvalidated clients are in progress:
///    answered with a Retry ([`EndpointStats::retry_sent`]), which costs the
///    server no state; a client that owns its address comes back with the
///    token, one round trip later, and is validated;
/// 3. `max_handshakes` handshakes in progress: refused with
///    `CONNECTION_REFUSED` ([`EndpointStats::refused_handshakes`]);
/// 4. otherwise accepted ([`EndpointStats::accepted`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// Answer unvalidated clients with a Retry once this many handshakes
    /// with unvalidated clients are in progress; `Some(0)` always, `None`
    /// never.
    pub retry_threshold: Option<usize>,
    /// Most handshakes in progress at once.
    pub max_handshakes: usize,
    /// Close a server connection whose handshake has not completed this long
    /// after its first Initial arrived (counted in
    /// [`EndpointStats::timed_out_handshake`]); `None`: only the idle
    /// timeout ends it.
    pub handshake_timeout: Option<Duration>,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            retry_threshold: None,
            max_handshakes: usize::MAX,
            handshake_timeout: None,
        }
    }
}

/// A datagram (or GSO batch) to send; its bytes are the first `size` bytes of
/// the buffer passed to [`Endpoint::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where to send it.
    pub destination: SocketAddr,
    /// Bytes written into the buffer.
    pub size: usize,
    /// With GSO: the size of each datagram but the last.
    pub segment_size: Option<usize>,
    /// ECN codepoint.
    pub ecn: Option<EcnCodepoint>,
    /// DSCP codepoint (0 when unmarked).
    pub dscp: u8,
}

impl Transmit {
    /// The IPv4 TOS / IPv6 traffic-class byte: DSCP in the upper six bits, ECN below.
    pub fn tos(&self) -> u8 {
        (self.dscp << 2) | self.ecn.map_or(0, |e| e as u8)
    }
}

/// Why a connection closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// We closed it with [`Endpoint::close`].
    Local,
    /// The peer's application closed it.
    Application {
        /// Application error code (0 = clean).
        code: u64,
        /// Reason phrase.
        reason: Vec<u8>,
    },
    /// The idle timeout expired.
    TimedOut,
    /// Anything else (transport error, reset, version mismatch…).
    Other(String),
}

impl From<ConnectionError> for CloseReason {
    fn from(e: ConnectionError) -> Self {
        match e {
            ConnectionError::LocallyClosed => CloseReason::Local,
            ConnectionError::ApplicationClosed(c) => CloseReason::Application {
                code: c.error_code.into_inner(),
                reason: c.reason.to_vec(),
            },
            ConnectionError::TimedOut => CloseReason::TimedOut,
            other => CloseReason::Other(other.to_string()),
        }
    }
}

/// What happened, for the application.
#[derive(Debug)]
pub enum Event {
    /// A server accepted an incoming connection (its handshake is under way).
    Accepted(ConnectionHandle),
    /// The handshake completed.
    Connected(ConnectionHandle),
    /// The peer opened a stream.
    StreamOpened(ConnectionHandle, StreamId),
    /// A stream has data (or its end) to read.
    Readable(ConnectionHandle, StreamId),
    /// A stream that was blocked by flow or congestion control can take more data.
    Writable(ConnectionHandle, StreamId),
    /// All data of a finished stream was acknowledged.
    StreamAcked(ConnectionHandle, StreamId),
    /// The peer asked us to stop sending on a stream.
    StreamStopped(ConnectionHandle, StreamId, u64),
    /// The connection closed (it lingers for the draining period).
    Closed(ConnectionHandle, CloseReason),
    /// The connection is gone; its final statistics.
    Drained(Box<ConnReport>),
}

/// An error from an application call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// No such connection.
    UnknownConnection,
    /// The stream is closed or does not exist.
    ClosedStream,
    /// The peer stopped the stream with this code.
    Stopped(u64),
    /// The peer reset the stream with this code.
    Reset(u64),
    /// The connection is lost.
    ConnectionLost,
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for StreamError {}

/// An error from [`Endpoint::connect`].
#[derive(Debug)]
pub enum ConnectError {
    /// [`Endpoint::set_client`] was not called.
    NoClientConfig,
    /// The CCA spec is invalid.
    Cca(tollgate_cca::SpecError),
    /// quinn-proto refused.
    Quic(quinn_proto::ConnectError),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::NoClientConfig => f.write_str("endpoint has no client configuration"),
            ConnectError::Cca(e) => write!(f, "{e}"),
            ConnectError::Quic(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConnectError {}

/// An error from [`Endpoint::set_cca`].
#[derive(Debug)]
pub enum SetCcaError {
    /// No such connection.
    UnknownConnection,
    /// The CCA spec is invalid.
    Cca(tollgate_cca::SpecError),
}

impl fmt::Display for SetCcaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetCcaError::UnknownConnection => f.write_str("no such connection"),
            SetCcaError::Cca(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SetCcaError {}

/// Result of one [`Endpoint::read`] call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStatus {
    /// Bytes handed to the callback.
    pub bytes: usize,
    /// The stream's end was reached; no more data will come.
    pub finished: bool,
}

struct Conn {
    proto: quinn_proto::Connection,
    cca: CcaHandle,
    dscp: u8,
    mark_dscp: bool,
    windows: Windows,
    pacer: RatePacer,
    pacing_wait: Option<Instant>,
    created: Instant,
    rec: Recorder,
    span: Span,
    closed: bool,
    /// A server connection whose handshake is in progress: whether the
    /// client's address was validated when it was accepted.
    handshake: Option<bool>,
}

/// The server's handshakes in progress (see [`Admission`]).
#[derive(Clone, Copy, Debug, Default)]
struct Handshakes {
    /// Server connections whose handshake is in progress.
    all: usize,
    /// Those of them whose client's address was not validated.
    unvalidated: usize,
}

impl Handshakes {
    /// `conn`'s handshake is over (completed, failed, closed or abandoned).
    fn leave(&mut self, conn: &mut Conn) {
        if let Some(validated) = conn.handshake.take() {
            self.all -= 1;
            if !validated {
                self.unvalidated -= 1;
            }
        }
    }
}

/// The sans-IO endpoint: quinn-proto plus Tollgate's CCAs, marking, pacing and stats.
pub struct Endpoint {
    proto: quinn_proto::Endpoint,
    options: EndpointOptions,
    /// Looked up on every datagram, timer and API call: FxHash (handles are
    /// small integers; SipHash was 2 % of an emulator run).
    conns: FxHashMap<ConnectionHandle, Conn>,
    order: Vec<ConnectionHandle>,
    next_rr: usize,
    server: Option<(ServerConfig, ConnectionOptions)>,
    admission: Admission,
    handshakes: Handshakes,
    client: Option<Arc<dyn quinn_proto::crypto::ClientConfig>>,
    responses: VecDeque<(quinn_proto::Transmit, Vec<u8>)>,
    events: VecDeque<Event>,
    stats: EndpointStats,
    scratch: Vec<u8>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("connections", &self.conns.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A new endpoint with neither role configured.
    pub fn new(options: EndpointOptions) -> Self {
        let mut cfg = EndpointConfig::default();
        cfg.rng_seed(options.rng_seed);
        let proto = quinn_proto::Endpoint::new(Arc::new(cfg), None, options.allow_mtud, None);
        Endpoint {
            proto,
            options,
            conns: FxHashMap::default(),
            order: Vec::new(),
            next_rr: 0,
            server: None,
            admission: Admission::default(),
            handshakes: Handshakes::default(),
            client: None,
            responses: VecDeque::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
            scratch: Vec::new(),
        }
    }

    /// Accept incoming connections with `crypto` (usually a
    /// [`QuicServerConfig`](quinn_proto::crypto::rustls::QuicServerConfig));
    /// each gets `defaults`
    /// (CCA, marking, …). Fails if `defaults.cca` is not a valid spec.
    pub fn set_server(
        &mut self,
        crypto: Arc<dyn quinn_proto::crypto::ServerConfig>,
        defaults: ConnectionOptions,
    ) -> Result<(), tollgate_cca::SpecError> {
        CcaHandle::new(&defaults.cca)?;
        let cfg = ServerConfig::with_crypto(crypto);
        self.proto.set_server_config(Some(Arc::new(cfg.clone())));
        self.server = Some((cfg, defaults));
        Ok(())
    }

    /// How new incoming connections are admitted (Retry under load,
    /// handshake cap and deadline); see [`Admission`].
    pub fn set_admission(&mut self, admission: Admission) {
        self.admission = admission;
    }

    /// Server handshakes in progress now: (all, with unvalidated clients).
    pub fn handshakes_in_progress(&self) -> (usize, usize) {
        (self.handshakes.all, self.handshakes.unvalidated)
    }

    /// Allow outgoing connections with `crypto` (usually a
    /// [`QuicClientConfig`](quinn_proto::crypto::rustls::QuicClientConfig)).
    pub fn set_client(&mut self, crypto: Arc<dyn quinn_proto::crypto::ClientConfig>) {
        self.client = Some(crypto);
    }

    /// Start a connection to `remote`, verifying the certificate for `server_name`.
    pub fn connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        server_name: &str,
        options: ConnectionOptions,
    ) -> Result<ConnectionHandle, ConnectError> {
        let crypto = self.client.clone().ok_or(ConnectError::NoClientConfig)?;
        let cca = CcaHandle::for_flow(&options.cca, options.link_rate_bps, options.cca_seed)
            .map_err(ConnectError::Cca)?;
        let mut cfg = ClientConfig::new(crypto);
        cfg.transport_config(options.transport(&cca));
        let (ch, conn) = self
            .proto
            .connect(now, cfg, remote, server_name)
            .map_err(ConnectError::Quic)?;
        self.insert(now, ch, conn, cca, &options, None);
        Ok(ch)
    }

    fn insert(
        &mut self,
        now: Instant,
        ch: ConnectionHandle,
        proto: quinn_proto::Connection,
        cca: CcaHandle,
        options: &ConnectionOptions,
        handshake: Option<bool>,
    ) {
        let side = proto.side();
        let dscp = if options.mark_dscp {
            cca.variant().dscp()
        } else {
            0
        };
        let span = tracing::info_span!(
            "quic_conn",
            conn = ch.0,
            ?side,
            cca = %options.cca,
            remote = %proto.remote_address()
        );
        tracing::info!(parent: &span, dscp, prompt_acks = options.wants_prompt_acks(), "connection created");
        let windows = Windows::new(options.window, options.max_window, cca.window());
        self.conns.insert(
            ch,
            Conn {
                proto,
                cca,
                dscp,
                mark_dscp: options.mark_dscp,
                windows,
                pacer: RatePacer::default(),
                pacing_wait: None,
                created: now,
                rec: Recorder::new(options.stats_interval),
                span,
                closed: false,
                handshake,
            },
        );
        if let Some(validated) = handshake {
            self.handshakes.all += 1;
            if !validated {
                self.handshakes.unvalidated += 1;
            }
        }
        self.order.push(ch);
    }

    /// Feed one received datagram. `tos` is the IP TOS / traffic-class byte if
    /// the driver has it (ECN and the peer's DSCP are taken from it).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        tos: Option<u8>,
        data: &[u8],
    ) {
        self.handle_datagram_owned(now, from, tos, BytesMut::from(data));
    }

    /// [`handle_datagram`](Self::handle_datagram) taking the bytes by value,
    /// so a driver that copied one received buffer (e.g. a GRO batch) once
    /// can hand out its datagrams with `split_to` and no further copy.
    pub fn handle_datagram_owned(
        &mut self,
        now: Instant,
        from: SocketAddr,
        tos: Option<u8>,
        data: BytesMut,
    ) {
        self.stats.datagrams_in += 1;
        let ecn = tos.and_then(|t| EcnCodepoint::from_bits(t & 0b11));
        // quinn-proto appends its response to the buffer and reports the
        // buffer's whole length as the size: it must start empty, or a
        // response goes out behind the previous one (and the peer drops it).
        self.scratch.clear();
        let event = self
            .proto
            .handle(now, from, None, ecn, data, &mut self.scratch);
        match event {
            None => self.stats.datagrams_dropped += 1,
            Some(DatagramEvent::Response(t)) => self.queue_response(t),
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                if let Some(conn) = self.conns.get_mut(&ch) {
                    conn.rec.peer_dscp[usize::from(tos.unwrap_or(0) >> 2)] += 1;
                    conn.proto.handle_event(ev);
                    let rtt = conn.proto.rtt();
                    if let Some(w) = conn.windows.on_consumed(now, conn.rec.app_rx, rtt) {
                        conn.proto
                            .set_receive_window(VarInt::from_u64(w).unwrap_or(VarInt::MAX));
                    }
                    self.process(now, ch);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.admit(now, tos, incoming),
        }
    }

    /// Decide about a new client (see [`Admission`]).
    fn admit(&mut self, now: Instant, tos: Option<u8>, incoming: quinn_proto::Incoming) {
        if self.responses.len() >= MAX_RESPONSES {
            // No room to answer: drop it unanswered, before any crypto.
            self.stats.ignored += 1;
            return self.proto.ignore(incoming);
        }
        let server = self
            .server
            .as_ref()
            .filter(|_| self.conns.len() < self.options.max_connections);
        let Some((base, defaults)) = server else {
            self.stats.refused += 1;
            return self.refuse(incoming);
        };
        let validated = incoming.remote_address_validated();
        let retry = !validated
            && incoming.may_retry()
            && self
                .admission
                .retry_threshold
                .is_some_and(|t| self.handshakes.unvalidated >= t);
        if retry {
            self.scratch.clear(); // see handle_datagram_owned
            match self.proto.retry(incoming, &mut self.scratch) {
                Ok(t) => {
                    self.stats.retry_sent += 1;
                    self.queue_response(t);
                }
                Err(e) => {
                    self.stats.refused_handshakes += 1;
                    self.refuse(e.into_incoming());
                }
            }
            return;
        }
        if self.handshakes.all >= self.admission.max_handshakes {
            self.stats.refused_handshakes += 1;
            return self.refuse(incoming);
        }
        let defaults = defaults.clone();
        // Validated by set_server, so this only fails on a race with a
        // registry change; refuse rather than panic.
        let Ok(cca) = CcaHandle::for_flow(&defaults.cca, defaults.link_rate_bps, defaults.cca_seed)
        else {
            self.stats.refused += 1;
            return self.refuse(incoming);
        };
        let mut cfg = base.clone();
        cfg.transport_config(defaults.transport(&cca));
        self.scratch.clear();
        match self
            .proto
            .accept(incoming, now, &mut self.scratch, Some(Arc::new(cfg)))
        {
            Ok((ch, conn)) => {
                self.stats.accepted += 1;
                self.insert(now, ch, conn, cca, &defaults, Some(validated));
                self.push_event(Event::Accepted(ch));
                if let Some(c) = self.conns.get_mut(&ch) {
                    c.rec.peer_dscp[usize::from(tos.unwrap_or(0) >> 2)] += 1;
                }
                self.process(now, ch);
            }
            Err(e) => {
                self.stats.accept_failed += 1;
                tracing::debug!(cause = %e.cause, "incoming connection failed");
                if let Some(t) = e.response {
                    self.queue_response(t);
                }
            }
        }
    }

    /// Refuse an incoming connection (the caller counts why) and queue
    /// quinn-proto's CONNECTION_CLOSE (`CONNECTION_REFUSED`) for its client.
    fn refuse(&mut self, incoming: quinn_proto::Incoming) {
        self.scratch.clear(); // see handle_datagram_owned
        let t = self.proto.refuse(incoming, &mut self.scratch);
        self.queue_response(t);
    }

    fn queue_response(&mut self, t: quinn_proto::Transmit) {
        if self.responses.len() >= MAX_RESPONSES {
            self.stats.responses_dropped += 1;
            return;
        }
        let bytes = self.scratch[..t.size].to_vec();
        self.responses.push_back((t, bytes));
    }

    fn push_event(&mut self, ev: Event) {
        push_bounded(&mut self.events, &mut self.stats.events_dropped, ev);
    }

    /// Exchange endpoint events, collect application events, drop drained connections.
    fn process(&mut self, now: Instant, ch: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&ch) else {
            return;
        };
        while let Some(ev) = conn.proto.poll_endpoint_events() {
            if let Some(back) = self.proto.handle_event(ch, ev) {
                conn.proto.handle_event(back);
            }
        }
        // Straight into the event queue (a field apart from `conns`): a
        // `Vec` per call was an allocation per received packet.
        let (events, stats) = (&mut self.events, &mut self.stats);
        let handshakes = &mut self.handshakes;
        while let Some(ev) = conn.proto.poll() {
            let mut out = |ev| push_bounded(events, &mut stats.events_dropped, ev);
            match ev {
                quinn_proto::Event::Connected => {
                    tracing::info!(parent: &conn.span, "connected");
                    handshakes.leave(conn);
                    out(Event::Connected(ch));
                }
                quinn_proto::Event::ConnectionLost { reason } => {
                    tracing::info!(parent: &conn.span, %reason, "connection closed");
                    if matches!(reason, ConnectionError::TimedOut) {
                        if conn.handshake.is_some() {
                            stats.timed_out_handshake += 1;
                        } else {
                            stats.timed_out_idle += 1;
                        }
                    }
                    handshakes.leave(conn);
                    conn.closed = true;
                    out(Event::Closed(ch, reason.into()));
                }
                quinn_proto::Event::Stream(StreamEvent::Opened { dir }) => {
                    while let Some(id) = conn.proto.streams().accept(dir) {
                        out(Event::StreamOpened(ch, id));
                    }
                }
                quinn_proto::Event::Stream(StreamEvent::Readable { id }) => {
                    out(Event::Readable(ch, id))
                }
                quinn_proto::Event::Stream(StreamEvent::Writable { id }) => {
                    out(Event::Writable(ch, id))
                }
                quinn_proto::Event::Stream(StreamEvent::Finished { id }) => {
                    out(Event::StreamAcked(ch, id))
                }
                quinn_proto::Event::Stream(StreamEvent::Stopped { id, error_code }) => {
                    out(Event::StreamStopped(ch, id, error_code.into_inner()))
                }
                _ => {}
            }
        }
        let drained = conn.proto.is_drained();
        if drained {
            handshakes.leave(conn);
            let report = self.report(now, ch).expect("connection exists");
            if let Some(conn) = self.conns.remove(&ch) {
                tracing::info!(parent: &conn.span, "connection drained");
            }
            self.order.retain(|c| *c != ch);
            self.push_event(Event::Drained(Box::new(report)));
        }
    }

    /// The next datagram to send, written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if let Some((t, bytes)) = self.responses.pop_front() {
            buf.clear();
            buf.extend_from_slice(&bytes);
            self.stats.responses += 1;
            self.stats.datagrams_out += 1;
            return Some(Transmit {
                destination: t.destination,
                size: t.size,
                segment_size: t.segment_size,
                ecn: t.ecn,
                dscp: 0,
            });
        }
        let n = self.order.len();
        for i in 0..n {
            let idx = (self.next_rr + i) % n;
            let ch = self.order[idx];
            let Some(conn) = self.conns.get_mut(&ch) else {
                continue;
            };
            let mtu = u64::from(conn.proto.current_mtu());
            let rate = conn.cca.pacing_rate();
            let segments = match conn.pacer.check(now, rate, mtu) {
                Ok(()) => {
                    conn.pacing_wait = None;
                    match rate {
                        // Stay within the bucket when batching.
                        Some(_) => 1,
                        None => self.options.max_gso_segments.max(1),
                    }
                }
                Err(at) => {
                    conn.pacing_wait = Some(at);
                    continue;
                }
            };
            buf.clear();
            if let Some(t) = conn.proto.poll_transmit(now, segments, buf) {
                conn.pacer.on_sent(t.size);
                self.next_rr = (idx + 1) % n;
                self.stats.datagrams_out += 1;
                let dscp = conn.dscp;
                self.process(now, ch);
                return Some(Transmit {
                    destination: t.destination,
                    size: t.size,
                    segment_size: t.segment_size,
                    ecn: t.ecn,
                    dscp,
                });
            } else {
                // Nothing to send: the bucket refills meanwhile, no pacing wake-up needed.
                conn.pacing_wait = None;
            }
        }
        None
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout)
    /// (or, for paced connections, [`poll_transmit`](Self::poll_transmit)) has work.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        let mut earliest: Option<Instant> = None;
        let mut consider = |t: Instant| {
            earliest = Some(earliest.map_or(t, |e| e.min(t)));
        };
        for conn in self.conns.values_mut() {
            if let Some(t) = conn.proto.poll_timeout() {
                consider(t);
            }
            if let Some(t) = conn.pacing_wait {
                consider(t);
            }
            if !conn.closed {
                consider(conn.created + conn.rec.next_sample);
                if let (Some(_), Some(limit)) = (conn.handshake, self.admission.handshake_timeout) {
                    consider(conn.created + limit);
                }
            }
        }
        earliest
    }

    /// Advance timers to `now`: quinn-proto's loss, ACK and idle timers and
    /// the statistics sampler.
    pub fn handle_timeout(&mut self, now: Instant) {
        let handles: Vec<ConnectionHandle> = self.order.clone();
        for ch in handles {
            let Some(conn) = self.conns.get_mut(&ch) else {
                continue;
            };
            if conn.proto.poll_timeout().is_some_and(|t| t <= now) {
                conn.proto.handle_timeout(now);
            }
            let abandon = conn.handshake.is_some()
                && !conn.closed
                && self
                    .admission
                    .handshake_timeout
                    .is_some_and(|limit| now.saturating_duration_since(conn.created) >= limit);
            if abandon {
                tracing::info!(parent: &conn.span, "handshake timed out");
                conn.proto.close(
                    now,
                    VarInt::from_u32(0),
                    bytes::Bytes::from_static(b"handshake timeout"),
                );
                conn.closed = true;
                self.handshakes.leave(conn);
                self.stats.timed_out_handshake += 1;
                push_bounded(
                    &mut self.events,
                    &mut self.stats.events_dropped,
                    Event::Closed(ch, CloseReason::TimedOut),
                );
            }
            let age = now.saturating_duration_since(conn.created);
            if !conn.closed && age >= conn.rec.next_sample {
                let snap = conn.cca.snapshot();
                let qs = conn.proto.stats();
                let rtt = conn.proto.rtt();
                conn.rec.sample(age, &snap, rtt, qs.path.lost_packets);
            }
            self.process(now, ch);
        }
    }

    /// The next application event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn conn(&mut self, ch: ConnectionHandle) -> Result<&mut Conn, StreamError> {
        self.conns
            .get_mut(&ch)
            .ok_or(StreamError::UnknownConnection)
    }

    /// Open a stream (`None` when the peer's stream limit is reached).
    pub fn open(
        &mut self,
        ch: ConnectionHandle,
        dir: Dir,
    ) -> Result<Option<StreamId>, StreamError> {
        Ok(self.conn(ch)?.proto.streams().open(dir))
    }

    /// Write as much of `data` as flow and congestion control allow; `Ok(0)`
    /// means blocked (an [`Event::Writable`] follows when space frees up).
    pub fn write(
        &mut self,
        ch: ConnectionHandle,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, StreamError> {
        let conn = self.conn(ch)?;
        let mut result = conn.proto.send_stream(stream).write(data);
        if matches!(result, Err(quinn_proto::WriteError::Blocked)) {
            if let Some(w) = conn.windows.on_write_blocked(conn.cca.window()) {
                conn.proto.set_send_window(w);
                result = conn.proto.send_stream(stream).write(data);
            }
        }
        match result {
            Ok(n) => {
                conn.rec.app_tx += n as u64;
                Ok(n)
            }
            Err(quinn_proto::WriteError::Blocked) => Ok(0),
            Err(quinn_proto::WriteError::Stopped(c)) => Err(StreamError::Stopped(c.into_inner())),
            Err(quinn_proto::WriteError::ClosedStream) => Err(StreamError::ClosedStream),
        }
    }

    /// [`write`](Self::write) without copying: the stream keeps a reference
    /// to `data` (e.g. a slice of a static or shared buffer) instead of a
    /// copy. Returns the bytes taken from the front of `data`; `Ok(0)` means
    /// blocked, as for `write`.
    pub fn write_bytes(
        &mut self,
        ch: ConnectionHandle,
        stream: StreamId,
        data: bytes::Bytes,
    ) -> Result<usize, StreamError> {
        let conn = self.conn(ch)?;
        let mut chunks = [data];
        let mut result = conn.proto.send_stream(stream).write_chunks(&mut chunks);
        // As in `write`: a blocked write may grow the send window.
        if matches!(result, Err(quinn_proto::WriteError::Blocked)) {
            if let Some(w) = conn.windows.on_write_blocked(conn.cca.window()) {
                conn.proto.set_send_window(w);
                result = conn.proto.send_stream(stream).write_chunks(&mut chunks);
            }
        }
        match result {
            Ok(w) => {
                conn.rec.app_tx += w.bytes as u64;
                Ok(w.bytes)
            }
            Err(quinn_proto::WriteError::Blocked) => Ok(0),
            Err(quinn_proto::WriteError::Stopped(c)) => Err(StreamError::Stopped(c.into_inner())),
            Err(quinn_proto::WriteError::ClosedStream) => Err(StreamError::ClosedStream),
        }
    }

    /// Mark the end of a stream's data.
    pub fn finish(&mut self, ch: ConnectionHandle, stream: StreamId) -> Result<(), StreamError> {
        self.conn(ch)?
            .proto
            .send_stream(stream)
            .finish()
            .map_err(|e| match e {
                quinn_proto::FinishError::Stopped(c) => StreamError::Stopped(c.into_inner()),
                quinn_proto::FinishError::ClosedStream => StreamError::ClosedStream,
            })
    }

    /// Read up to `max` bytes in order, handing each chunk with its stream
    /// offset to `sink`.
    pub fn read(
        &mut self,
        ch: ConnectionHandle,
        stream: StreamId,
        max: usize,
        sink: impl FnMut(u64, &[u8]),
    ) -> Result<ReadStatus, StreamError> {
        self.read_chunks(ch, stream, max, true, sink)
    }

    /// Read up to `max` bytes as they arrive, out of order, each byte once,
    /// handing each chunk with its stream offset to `sink`. `finished` is set
    /// once every byte up to the stream's end has been handed out.
    ///
    /// Bulk receivers read this way: quinn-proto aborts a connection whose
    /// in-order reassembly buffer holds more than 1,024 separate chunks ("too
    /// many gaps in stream buffer", its bound against memory exhaustion), which
    /// a high-BDP flow with a burst of losses (slow-start overshoot at
    /// 10 Gbit/s x 120 ms) exceeds. Read unordered, data leaves the buffer as
    /// it arrives. Once a stream is read unordered it cannot be read in order.
    pub fn read_unordered(
        &mut self,
        ch: ConnectionHandle,
        stream: StreamId,
        max: usize,
        sink: impl FnMut(u64, &[u8]),
    ) -> Result<ReadStatus, StreamError> {
        self.read_chunks(ch, stream, max, false, sink)
    }

    fn read_chunks(
        &mut self,
        ch: ConnectionHandle,
        stream: StreamId,
        max: usize,
        ordered: bool,
        mut sink: impl FnMut(u64, &[u8]),
    ) -> Result<ReadStatus, StreamError> {
        let conn = self.conn(ch)?;
        let mut recv = conn.proto.recv_stream(stream);
        let mut chunks = recv.read(ordered).map_err(|_| StreamError::ClosedStream)?;
        let mut status = ReadStatus::default();
        let mut error = None;
        while status.bytes < max {
            match chunks.next(max - status.bytes) {
                Ok(Some(chunk)) => {
                    sink(chunk.offset, &chunk.bytes);
                    status.bytes += chunk.bytes.len();
                }
                Ok(None) => {
                    status.finished = true;
                    break;
                }
                Err(quinn_proto::ReadError::Blocked) => break,
                Err(quinn_proto::ReadError::Reset(c)) => {
                    error = Some(StreamError::Reset(c.into_inner()));
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        conn.rec.app_rx += status.bytes as u64;
        match error {
            Some(e) => Err(e),
            None => Ok(status),
        }
    }

    /// Ask the peer to stop sending on `stream`.
    pub fn stop(
        &mut self,
        ch: ConnectionHandle,
        stream: StreamId,
        code: u32,
    ) -> Result<(), StreamError> {
        self.conn(ch)?
            .proto
            .recv_stream(stream)
            .stop(VarInt::from_u32(code))
            .map_err(|_| StreamError::ClosedStream)
    }

    /// Close a connection with an application error code (0 = clean).
    pub fn close(&mut self, now: Instant, ch: ConnectionHandle, code: u32, reason: &[u8]) {
        if let Some(conn) = self.conns.get_mut(&ch) {
            tracing::info!(parent: &conn.span, code, "closing");
            conn.proto.close(
                now,
                VarInt::from_u32(code),
                bytes::Bytes::copy_from_slice(reason),
            );
            self.handshakes.leave(conn);
            // quinn-proto reports no event for a local close; the app gets one anyway.
            let first = !std::mem::replace(&mut conn.closed, true);
            if first {
                self.push_event(Event::Closed(ch, CloseReason::Local));
            }
            self.process(now, ch);
        }
    }

    /// Replace a connection's congestion controller with `spec` (a server
    /// applying the CCA its client asked for, before any application data is
    /// sent). With DSCP marking on, later datagrams carry the new variant.
    pub fn set_cca(&mut self, ch: ConnectionHandle, spec: &str) -> Result<(), SetCcaError> {
        let conn = self
            .conns
            .get_mut(&ch)
            .ok_or(SetCcaError::UnknownConnection)?;
        conn.cca.replace(spec).map_err(SetCcaError::Cca)?;
        if conn.mark_dscp {
            conn.dscp = conn.cca.variant().dscp();
        }
        tracing::info!(parent: &conn.span, cca = spec, "congestion control replaced");
        Ok(())
    }

    /// Statistics of a live connection as of `now`.
    pub fn stats(&self, now: Instant, ch: ConnectionHandle) -> Option<ConnReport> {
        self.report(now, ch)
    }

    fn report(&self, now: Instant, ch: ConnectionHandle) -> Option<ConnReport> {
        let conn = self.conns.get(&ch)?;
        Some(self.build_report(ch, conn, now.saturating_duration_since(conn.created)))
    }

    fn build_report(&self, ch: ConnectionHandle, conn: &Conn, age: Duration) -> ConnReport {
        ConnReport {
            handle: ch,
            side: conn.proto.side(),
            age,
            dscp_marking: (conn.dscp != 0).then_some(conn.dscp),
            app_rx_bytes: conn.rec.app_rx,
            app_tx_bytes: conn.rec.app_tx,
            samples: conn.rec.samples.clone(),
            samples_dropped: conn.rec.samples_dropped,
            rtt_us: conn.cca.rtt_histogram(),
            cca: conn.cca.snapshot(),
            quic: conn.proto.stats(),
            peer_dscp: conn.rec.peer_dscp,
            windows: conn.windows.clone(),
        }
    }

    /// Endpoint-wide counters.
    pub fn endpoint_stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Handles of the live connections.
    pub fn handles(&self) -> &[ConnectionHandle] {
        &self.order
    }

    /// A live connection's application bytes: (own CCA's variant, bytes
    /// sent), (the DSCP codepoint most of the peer's datagrams carried, bytes
    /// received). A cheap view for periodic metrics, unlike [`stats`](Self::stats).
    pub fn conn_bytes(&self, ch: ConnectionHandle) -> Option<((u8, u64), (u8, u64))> {
        let c = self.conns.get(&ch)?;
        Some((
            (c.cca.variant().dscp(), c.rec.app_tx),
            (dominant_dscp(&c.rec.peer_dscp), c.rec.app_rx),
        ))
    }

    /// quinn-proto's counters of a live connection (datagrams, frames by
    /// type, path): a cheap copy, unlike [`stats`](Self::stats).
    pub fn quic_stats(&self, ch: ConnectionHandle) -> Option<quinn_proto::ConnectionStats> {
        self.conns.get(&ch).map(|c| c.proto.stats())
    }

    /// Live (not yet drained) connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Whether any stateless response is queued.
    pub fn has_pending_responses(&self) -> bool {
        !self.responses.is_empty()
    }

    /// The congestion controller of a connection (a shared handle: window,
    /// pacing rate, snapshot), e.g. for a tracer.
    pub fn cca_handle(&self, ch: ConnectionHandle) -> Option<CcaHandle> {
        self.conns.get(&ch).map(|c| c.cca.clone())
    }

    /// The remote address of a connection.
    pub fn remote_address(&self, ch: ConnectionHandle) -> Option<SocketAddr> {
        self.conns.get(&ch).map(|c| c.proto.remote_address())
    }
}

/// The codepoint with the most datagrams (0 when none were counted).
pub fn dominant_dscp(counts: &[u64; 64]) -> u8 {
    let mut best = 0usize;
    for (i, &n) in counts.iter().enumerate() {
        if n > counts[best] {
            best = i;
        }
    }
    best as u8
}

/// Queue `ev` unless [`MAX_EVENTS`] are waiting; then count it in `dropped`.
fn push_bounded(events: &mut VecDeque<Event>, dropped: &mut u64, ev: Event) {
    if events.len() >= MAX_EVENTS {
        *dropped += 1;
    } else {
        events.push_back(ev);
    }
}

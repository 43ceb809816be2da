//! Bulk transfer: the protocol, a pattern generator with integrity check, and
//! the client and server [`App`]s used by the examples, tests and load generator.
//!
//! ## Protocol (ALPN `tollgate-bulk`)
//!
//! The client opens a bidirectional stream and sends a request. Version 1 is
//! 21 bytes: `"TGB1"`, a mode byte, the size (u64 big-endian, `u64::MAX` =
//! unlimited) and a duration in milliseconds (u64 big-endian, 0 = none).
//! Version 2 starts with `"TGB2"`, has the same 17 bytes after the magic,
//! then one length byte and that many bytes of ASCII: the congestion-control
//! spec the *server* should send with (empty = the server's default).
//!
//! - `D` (download): the client finishes its side; a v2 server first switches
//!   the connection to the requested CCA if its allow-list permits (else it
//!   closes the connection with [`CCA_REFUSED`] and the reason); it sends
//!   `size` bytes of the [pattern](pattern_byte), or sends until the
//!   duration has passed, then finishes the stream.
//! - `U` (upload): the client follows the request with the data and finishes;
//!   the server replies with the byte count it received (u64 big-endian). A
//!   v2 server also sends that count every [`PROGRESS_INTERVAL`] (10 ms, so
//!   a goodput series is accurate to about 1 % over a second) while data
//!   arrives, so the reply is a sequence of 8-byte counts whose last one is
//!   final; the client gets a receiver-side goodput series from them.
//!
//! The client then closes the connection with code 0. Every byte is checked
//! against the pattern on arrival, so integrity costs no memory. The same
//! protocol runs over kernel TCP (the load generator's `tcp:` flows), where
//! the requested CCA is applied with `TCP_CONGESTION`.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use quinn_proto::{ConnectionHandle, Dir, StreamId};
use tollgate_cca::rng::{self, Rng as _};

use crate::driver::App;
use crate::endpoint::{CloseReason, ConnectionOptions, Endpoint, Event, StreamError};
use crate::stats::ConnReport;

/// Request magic.
pub const MAGIC: &[u8; 4] = b"TGB1";
/// Version-2 request magic.
pub const MAGIC_V2: &[u8; 4] = b"TGB2";
/// Version-1 request length in bytes (also the fixed part of a v2 request).
pub const REQUEST_LEN: usize = 21;
/// Longest CCA spec a v2 request carries.
pub const MAX_CCA_SPEC: usize = 255;
/// Longest request on the wire.
pub const MAX_REQUEST_LEN: usize = REQUEST_LEN + 1 + MAX_CCA_SPEC;
/// Interval of a v2 server's upload progress counts.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(10);
/// Application error code: the server does not allow the requested CCA.
pub const CCA_REFUSED: u32 = 2;
/// Period of the data pattern (a prime, so misplaced data is detected).
///
/// One period is the first `PATTERN_PERIOD` bytes drawn from
/// [`tollgate_cca::rng::seeded`] with seed [`PATTERN_SEED`], each 64-bit draw
/// written little-endian.
pub const PATTERN_PERIOD: usize = 65_521;
/// Seed of the generator that produces the data pattern.
pub const PATTERN_SEED: u64 = 0x9E37_79B9_7F4A_7C15;
/// Application error code for protocol violations.
pub const PROTOCOL_ERROR: u32 = 1;
/// Most bytes handed to quinn-proto per write call.
const WRITE_CHUNK: usize = 32 * 1024;
/// Most bytes read per read call.
const READ_CHUNK: usize = 1 << 20;
/// Bound on connection reports kept by the server.
const MAX_REPORTS: usize = 1024;

/// Transfer direction, from the client's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Server sends.
    Download,
    /// Client sends.
    Upload,
}

/// A bulk request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Direction.
    pub mode: Mode,
    /// Bytes to transfer (`None` = unlimited).
    pub size: Option<u64>,
    /// Stop after this long (`None` = no limit).
    pub duration: Option<Duration>,
}

impl Request {
    /// The wire encoding.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut out = [0u8; REQUEST_LEN];
        out[..4].copy_from_slice(MAGIC);
        out[4] = match self.mode {
            Mode::Download => b'D',
            Mode::Upload => b'U',
        };
        out[5..13].copy_from_slice(&self.size.unwrap_or(u64::MAX).to_be_bytes());
        let ms = self.duration.map_or(0, |d| d.as_millis() as u64);
        out[13..21].copy_from_slice(&ms.to_be_bytes());
        out
    }

    /// Parse a request (`None` if malformed).
    pub fn decode(b: &[u8]) -> Option<Request> {
        if b.len() != REQUEST_LEN || &b[..4] != MAGIC {
            return None;
        }
        let mode = match b[4] {
            b'D' => Mode::Download,
            b'U' => Mode::Upload,
            _ => return None,
        };
        let size = u64::from_be_bytes(b[5..13].try_into().ok()?);
        let ms = u64::from_be_bytes(b[13..21].try_into().ok()?);
        Some(Request {
            mode,
            size: (size != u64::MAX).then_some(size),
            duration: (ms != 0).then(|| Duration::from_millis(ms)),
        })
    }
}

/// A request as received, with what version 2 adds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The transfer.
    pub request: Request,
    /// The CCA spec the client asked the server to send with (v2, non-empty).
    pub server_cca: Option<String>,
    /// 1 or 2.
    pub version: u8,
}

/// Progress of reading a request from the start of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestParse {
    /// At least this many more bytes are needed.
    Need(usize),
    /// Complete; the request took this many bytes.
    Done(Received, usize),
    /// Not a request of this protocol.
    Malformed,
}

impl Request {
    /// The version-2 wire encoding, asking the server to send with `server_cca`.
    /// Fails if the spec is longer than [`MAX_CCA_SPEC`] or not ASCII.
    pub fn encode_v2(&self, server_cca: Option<&str>) -> Result<Vec<u8>, String> {
        let cca = server_cca.unwrap_or("");
        if cca.len() > MAX_CCA_SPEC || !cca.is_ascii() {
            return Err(format!(
                "server CCA spec must be ASCII and at most {MAX_CCA_SPEC} bytes"
            ));
        }
        let mut out = self.encode().to_vec();
        out[..4].copy_from_slice(MAGIC_V2);
        out.push(cca.len() as u8);
        out.extend_from_slice(cca.as_bytes());
        Ok(out)
    }

    /// Parse a v1 or v2 request from the first bytes of a stream.
    pub fn parse(b: &[u8]) -> RequestParse {
        let magic_len = b.len().min(4);
        let v2 = b[..magic_len] == MAGIC_V2[..magic_len];
        if !v2 && b[..magic_len] != MAGIC[..magic_len] {
            return RequestParse::Malformed;
        }
        if b.len() < REQUEST_LEN {
            return RequestParse::Need(REQUEST_LEN + usize::from(v2) - b.len());
        }
        let mut fixed = [0u8; REQUEST_LEN];
        fixed.copy_from_slice(&b[..REQUEST_LEN]);
        fixed[..4].copy_from_slice(MAGIC);
        let Some(request) = Request::decode(&fixed) else {
            return RequestParse::Malformed;
        };
        if !v2 {
            let r = Received {
                request,
                server_cca: None,
                version: 1,
            };
            return RequestParse::Done(r, REQUEST_LEN);
        }
        let Some(&n) = b.get(REQUEST_LEN) else {
            return RequestParse::Need(1);
        };
        let total = REQUEST_LEN + 1 + usize::from(n);
        if b.len() < total {
            return RequestParse::Need(total - b.len());
        }
        let Ok(cca) = std::str::from_utf8(&b[REQUEST_LEN + 1..total]) else {
            return RequestParse::Malformed;
        };
        if !cca.is_ascii() {
            return RequestParse::Malformed;
        }
        let r = Received {
            request,
            server_cca: (!cca.is_empty()).then(|| cca.to_string()),
            version: 2,
        };
        RequestParse::Done(r, total)
    }
}

/// The upload reply as it arrives: a sequence of 8-byte counts (v2 progress
/// then the final one; v1 sends only the final one).
#[derive(Clone, Debug, Default)]
pub struct ReplyCounts {
    partial: Vec<u8>,
    /// The latest complete count.
    pub latest: Option<u64>,
}

impl ReplyCounts {
    /// Take the next bytes of the reply.
    pub fn on_bytes(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let take = (8 - self.partial.len()).min(data.len());
            self.partial.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.partial.len() == 8 {
                let v = u64::from_be_bytes(self.partial[..].try_into().expect("8 bytes"));
                self.latest = Some(v);
                self.partial.clear();
            }
        }
    }

    /// The final count once the reply has ended (`None` if it was malformed).
    pub fn finish(&self) -> Option<u64> {
        self.latest.filter(|_| self.partial.is_empty())
    }
}

/// Two periods of the pattern, so any window of up to one period is contiguous.
fn pattern() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut rng = rng::seeded(PATTERN_SEED);
        let mut one = Vec::with_capacity(PATTERN_PERIOD);
        while one.len() < PATTERN_PERIOD {
            let take = (PATTERN_PERIOD - one.len()).min(8);
            one.extend_from_slice(&rng.next_u64().to_le_bytes()[..take]);
        }
        let mut two = one.clone();
        two.extend_from_slice(&one);
        two
    })
}

/// The data byte at position `offset` of a transfer.
pub fn pattern_byte(offset: u64) -> u8 {
    pattern()[(offset % PATTERN_PERIOD as u64) as usize]
}

/// Pattern bytes starting at `offset`, at most `max` (and at most one period).
pub fn pattern_slice(offset: u64, max: usize) -> &'static [u8] {
    let start = (offset % PATTERN_PERIOD as u64) as usize;
    &pattern()[start..start + max.min(PATTERN_PERIOD)]
}

/// Writes pattern data to a stream with back-pressure.
#[derive(Clone, Debug)]
pub struct Sender {
    prefix: Vec<u8>,
    prefix_sent: usize,
    /// Pattern bytes written so far.
    pub sent: u64,
    limit: Option<u64>,
    deadline: Option<Instant>,
    /// Whether the stream has been finished.
    pub finished: bool,
    /// Application rate cap: bytes per second and the instant it counts from.
    rate: Option<(f64, Option<Instant>)>,
    /// When the rate cap next allows a write.
    rate_wake: Option<Instant>,
}

/// Bytes a rate-capped sender may write ahead of its schedule.
const RATE_BURST: f64 = 16_384.0;

impl Sender {
    /// Send `prefix` then pattern data up to `limit` bytes or until `deadline`.
    pub fn new(prefix: Vec<u8>, limit: Option<u64>, deadline: Option<Instant>) -> Self {
        Sender {
            prefix,
            prefix_sent: 0,
            sent: 0,
            limit,
            deadline,
            finished: false,
            rate: None,
            rate_wake: None,
        }
    }

    /// Cap the pattern data at `bytes_per_s` (a token bucket of
    /// 16 KB, counted from the first [`pump`](Self::pump)).
    pub fn with_rate(mut self, bytes_per_s: f64) -> Self {
        self.rate = Some((bytes_per_s, None));
        self
    }

    /// The next instant at which the sender has timed work: its end, or the
    /// rate cap allowing more data.
    pub fn deadline(&self) -> Option<Instant> {
        if self.finished {
            return None;
        }
        match (self.deadline, self.rate_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Write until blocked or done; finish the stream when done.
    pub fn pump(
        &mut self,
        now: Instant,
        ep: &mut Endpoint,
        ch: ConnectionHandle,
        id: StreamId,
    ) -> Result<(), StreamError> {
        if self.finished {
            return Ok(());
        }
        while self.prefix_sent < self.prefix.len() {
            let n = ep.write(ch, id, &self.prefix[self.prefix_sent..])?;
            if n == 0 {
                return Ok(());
            }
            self.prefix_sent += n;
        }
        loop {
            let expired = self.deadline.is_some_and(|d| now >= d);
            let remaining = self.limit.map_or(u64::MAX, |l| l - self.sent);
            if expired || remaining == 0 {
                ep.finish(ch, id)?;
                self.finished = true;
                return Ok(());
            }
            let mut n = remaining.min(WRITE_CHUNK as u64) as usize;
            if let Some((rate, start)) = &mut self.rate {
                let t0 = *start.get_or_insert(now);
                let elapsed = now.saturating_duration_since(t0).as_secs_f64();
                let allowed = (RATE_BURST + *rate * elapsed - self.sent as f64).max(0.0) as usize;
                if allowed < n.min(1200) {
                    // Wake when a full datagram's worth is allowed.
                    let need = (self.sent as f64 + n.min(1200) as f64 - RATE_BURST) / *rate;
                    self.rate_wake = Some(t0 + Duration::from_secs_f64(need.max(elapsed)));
                    return Ok(());
                }
                self.rate_wake = None;
                n = n.min(allowed);
            }
            let written = ep.write(ch, id, pattern_slice(self.sent, n))?;
            if written == 0 {
                return Ok(());
            }
            self.sent += written as u64;
        }
    }
}

/// Counts and verifies pattern data read from a stream, in any order: every
/// byte is checked against the pattern at its own offset (the period is a
/// prime, so data delivered at the wrong offset fails the check), and each
/// byte is counted once (the transport hands out each byte once).
#[derive(Clone, Debug, Default)]
pub struct Receiver {
    /// Stream offset at which pattern data starts.
    base: u64,
    /// Pattern bytes received.
    pub received: u64,
    /// Bytes that did not match the pattern at their offset.
    pub mismatches: u64,
    /// The stream's end was read.
    pub finished: bool,
}

impl Receiver {
    /// A receiver whose pattern starts at stream offset `base`.
    pub fn new(base: u64) -> Self {
        Receiver {
            base,
            ..Default::default()
        }
    }

    /// Check one chunk read at stream offset `offset`.
    pub fn on_chunk(&mut self, offset: u64, data: &[u8]) {
        let Some(pos) = offset.checked_sub(self.base) else {
            self.mismatches += data.len() as u64;
            return;
        };
        let mut done = 0;
        while done < data.len() {
            let n = (data.len() - done).min(PATTERN_PERIOD);
            if data[done..done + n] != *pattern_slice(pos + done as u64, n) {
                self.mismatches += data[done..done + n]
                    .iter()
                    .enumerate()
                    .filter(|(i, b)| **b != pattern_byte(pos + (done + i) as u64))
                    .count() as u64;
            }
            done += n;
        }
        self.received += data.len() as u64;
    }

    /// Drain everything readable from `id`.
    pub fn pump(
        &mut self,
        ep: &mut Endpoint,
        ch: ConnectionHandle,
        id: StreamId,
    ) -> Result<(), StreamError> {
        loop {
            let st = ep.read_unordered(ch, id, READ_CHUNK, |off, data| self.on_chunk(off, data))?;
            if st.finished {
                self.finished = true;
                return Ok(());
            }
            if st.bytes == 0 {
                return Ok(());
            }
        }
    }
}

/// Outcome of one client transfer.
#[derive(Clone, Debug, Default)]
pub struct BulkResult {
    /// Pattern bytes moved (received for downloads, acknowledged by the server for uploads).
    pub bytes: u64,
    /// From handshake completion to the end of the data.
    pub elapsed: Duration,
    /// Bytes that failed the pattern check (must be 0).
    pub mismatches: u64,
    /// Whether all requested bytes arrived intact (and, for uploads, the server agreed on the count).
    pub complete: bool,
    /// How the connection closed.
    pub close: Option<CloseReason>,
    /// Final connection statistics.
    pub report: Option<Box<ConnReport>>,
    /// Error, if any.
    pub error: Option<String>,
}

impl BulkResult {
    /// Goodput in bit/s.
    pub fn goodput_bps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.bytes as f64 * 8.0 / s
        } else {
            0.0
        }
    }
}

/// The client side: one connection, one transfer.
#[derive(Debug)]
pub struct BulkClient {
    remote: SocketAddr,
    server_name: String,
    request: Request,
    options: ConnectionOptions,
    server_cca: Option<String>,
    rate_cap: Option<f64>,
    conn: Option<ConnectionHandle>,
    stream: Option<StreamId>,
    sender: Option<Sender>,
    receiver: Receiver,
    reply: ReplyCounts,
    started: Option<Instant>,
    progress: Arc<AtomicU64>,
    /// The result so far (final once [`App::is_done`]).
    pub result: BulkResult,
    done: bool,
    closing: bool,
}

impl BulkClient {
    /// A client that will connect to `remote` and run `request`.
    pub fn new(
        remote: SocketAddr,
        server_name: &str,
        request: Request,
        options: ConnectionOptions,
    ) -> Self {
        BulkClient {
            remote,
            server_name: server_name.into(),
            request,
            options,
            server_cca: None,
            rate_cap: None,
            conn: None,
            stream: None,
            sender: None,
            receiver: Receiver::new(0),
            reply: ReplyCounts::default(),
            started: None,
            progress: Arc::new(AtomicU64::new(0)),
            result: BulkResult::default(),
            done: false,
            closing: false,
        }
    }

    /// Ask the server to send (downloads) with `spec` instead of its default.
    pub fn with_server_cca(mut self, spec: &str) -> Self {
        self.server_cca = Some(spec.to_string());
        self
    }

    /// Cap an upload's data rate at `bits_per_s` (application-level token bucket).
    pub fn with_rate_cap(mut self, bits_per_s: f64) -> Self {
        self.rate_cap = Some(bits_per_s);
        self
    }

    /// Goodput bytes so far, updated as the transfer runs: bytes received
    /// (downloads) or the server's latest received count (uploads). For a
    /// sampler on another thread.
    pub fn progress(&self) -> Arc<AtomicU64> {
        self.progress.clone()
    }

    /// When the handshake completed.
    pub fn connected_at(&self) -> Option<Instant> {
        self.started
    }

    fn fail(&mut self, now: Instant, ep: &mut Endpoint, msg: String) {
        self.result.error.get_or_insert(msg);
        self.close(now, ep, PROTOCOL_ERROR);
    }

    fn close(&mut self, now: Instant, ep: &mut Endpoint, code: u32) {
        if let (Some(ch), false) = (self.conn, self.closing) {
            self.closing = true;
            ep.close(now, ch, code, if code == 0 { b"done" } else { b"error" });
        }
    }

    fn finish_transfer(&mut self, now: Instant, ep: &mut Endpoint, bytes: u64) {
        self.result.bytes = bytes;
        self.result.elapsed = self
            .started
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        self.result.mismatches = self.receiver.mismatches;
        self.result.complete =
            self.result.mismatches == 0 && self.request.size.is_none_or(|s| s == bytes);
        self.close(now, ep, 0);
    }

    fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
        let (Some(ch), Some(id)) = (self.conn, self.stream) else {
            return;
        };
        if self.closing {
            return;
        }
        if let Some(s) = self.sender.as_mut() {
            if let Err(e) = s.pump(now, ep, ch, id) {
                return self.fail(now, ep, format!("send: {e}"));
            }
        }
        match self.request.mode {
            Mode::Download => {
                if let Err(e) = self.receiver.pump(ep, ch, id) {
                    return self.fail(now, ep, format!("receive: {e}"));
                }
                self.progress
                    .store(self.receiver.received, Ordering::Relaxed);
                if self.receiver.finished {
                    let bytes = self.receiver.received;
                    self.finish_transfer(now, ep, bytes);
                }
            }
            Mode::Upload => {
                let reply = &mut self.reply;
                let fin = loop {
                    match ep.read(ch, id, 4096, |_, d| reply.on_bytes(d)) {
                        Ok(st) if st.finished => break true,
                        Ok(st) if st.bytes == 0 => break false,
                        Ok(_) => {}
                        Err(e) => return self.fail(now, ep, format!("reply: {e}")),
                    }
                };
                if let Some(n) = self.reply.latest {
                    self.progress.store(n, Ordering::Relaxed);
                }
                if fin {
                    let Some(acked) = self.reply.finish() else {
                        return self.fail(now, ep, "malformed reply".into());
                    };
                    let sent = self.sender.as_ref().map_or(0, |s| s.sent);
                    if acked != sent {
                        self.result.mismatches += acked.abs_diff(sent);
                    }
                    self.finish_transfer(now, ep, acked);
                }
            }
        }
    }
}

impl App for BulkClient {
    fn start(&mut self, now: Instant, ep: &mut Endpoint) {
        match ep.connect(now, self.remote, &self.server_name, self.options.clone()) {
            Ok(ch) => self.conn = Some(ch),
            Err(e) => {
                self.result.error = Some(e.to_string());
                self.done = true;
            }
        }
    }

    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, event: Event) {
        match event {
            Event::Connected(ch) if Some(ch) == self.conn => {
                self.started = Some(now);
                let Ok(Some(id)) = ep.open(ch, Dir::Bi) else {
                    return self.fail(now, ep, "cannot open stream".into());
                };
                self.stream = Some(id);
                let prefix = match self.request.encode_v2(self.server_cca.as_deref()) {
                    Ok(p) => p,
                    Err(e) => return self.fail(now, ep, e),
                };
                let deadline = self.request.duration.map(|d| now + d);
                self.sender = Some(match self.request.mode {
                    Mode::Download => Sender::new(prefix, Some(0), None),
                    Mode::Upload => {
                        let s = Sender::new(prefix, self.request.size, deadline);
                        match self.rate_cap {
                            Some(bps) => s.with_rate(bps / 8.0),
                            None => s,
                        }
                    }
                });
            }
            Event::Closed(_, reason) => {
                if self.result.error.is_none() && !self.result.complete {
                    self.result.error = Some(match &reason {
                        CloseReason::Application { code, reason }
                            if *code == u64::from(CCA_REFUSED) =>
                        {
                            format!(
                                "server refused the CCA: {}",
                                String::from_utf8_lossy(reason)
                            )
                        }
                        CloseReason::Application { code, reason } => format!(
                            "peer closed with code {code} before completion: {}",
                            String::from_utf8_lossy(reason)
                        ),
                        CloseReason::TimedOut => {
                            "no answer from the server (idle timeout)".to_string()
                        }
                        other => format!("closed before completion: {other:?}"),
                    });
                }
                self.result.close = Some(reason);
            }
            Event::Drained(report) => {
                self.result.report = Some(report);
                self.done = true;
            }
            _ => {}
        }
        self.drive(now, ep);
    }

    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        self.drive(now, ep);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.sender.as_ref().and_then(|s| s.deadline())
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

/// An upload being received.
#[derive(Debug)]
struct Upload {
    rx: Receiver,
    /// v2: when the next progress count is due.
    next_progress: Option<Instant>,
    /// Reply bytes not yet accepted by the stream (at most one count).
    out: Vec<u8>,
    /// The final count, once the data has ended.
    reply: Option<Sender>,
}

/// One stream on the server.
#[derive(Debug)]
enum ServerStream {
    Header(Vec<u8>),
    Sending(Sender),
    Receiving(Upload),
}

/// Server-side totals.
#[derive(Clone, Debug, Default)]
pub struct ServerSummary {
    /// Transfers whose stream ended normally.
    pub transfers: u64,
    /// Pattern bytes sent.
    pub bytes_sent: u64,
    /// Pattern bytes received.
    pub bytes_received: u64,
    /// Bytes that failed the pattern check.
    pub mismatches: u64,
    /// Requests rejected as malformed.
    pub bad_requests: u64,
    /// Downloads refused because the requested CCA is invalid or not allowed.
    pub refused_cca: u64,
    /// Connections closed with code 0 by the peer.
    pub clean_closes: u64,
    /// Final reports of drained connections (the first 1024, or
    /// [`BulkServer::with_max_reports`]).
    pub reports: Vec<ConnReport>,
}

/// The server side: serves any number of connections and streams until
/// stopped, or, after a [shutdown request](Self::shutdown_flag), until every
/// connection has drained.
#[derive(Debug, Default)]
pub struct BulkServer {
    streams: HashMap<(ConnectionHandle, StreamId), ServerStream>,
    live: HashSet<ConnectionHandle>,
    shutdown: Arc<AtomicBool>,
    allowed_ccas: Option<Vec<String>>,
    /// Most reports kept in [`ServerSummary::reports`] (`None`: 1024).
    max_reports: Option<usize>,
    /// Totals.
    pub summary: ServerSummary,
}

impl BulkServer {
    /// A server.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only switch to requested CCAs whose registry name (`cubic`, `libra`,
    /// `taxed`, ...) is in `names`; by default any valid spec is accepted.
    pub fn with_allowed_ccas(mut self, names: Vec<String>) -> Self {
        self.allowed_ccas = Some(names);
        self
    }

    /// Keep the final reports of the first `n` drained connections only
    /// (default 1024; each holds the connection's full RTT histogram, so a
    /// long-running server keeps few).
    pub fn with_max_reports(mut self, n: usize) -> Self {
        self.max_reports = Some(n);
        self
    }

    /// Whether `spec` may be requested: `Err` says why not.
    pub fn check_cca(&self, spec: &str) -> Result<(), String> {
        let cca = tollgate_cca::build(spec, &tollgate_cca::Env::default())
            .map_err(|e| format!("invalid CCA \"{spec}\": {e}"))?;
        match &self.allowed_ccas {
            Some(allowed) if !allowed.iter().any(|a| a == cca.name()) => Err(format!(
                "CCA \"{spec}\" is not allowed by this server (--allow-cca {})",
                allowed.join(",")
            )),
            _ => Ok(()),
        }
    }

    /// Setting this flag makes the server finish once no connection is left.
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        self.shutdown.clone()
    }

    fn drive(&mut self, now: Instant, ep: &mut Endpoint, ch: ConnectionHandle, id: StreamId) {
        let Some(mut state) = self.streams.remove(&(ch, id)) else {
            return;
        };
        // A stream error (reset, stopped, closed) ends the stream.
        let keep = self.step(now, ep, ch, id, &mut state).unwrap_or(false);
        if keep {
            self.streams.insert((ch, id), state);
        }
    }

    /// Advance one stream; `Ok(false)` when it is over.
    fn step(
        &mut self,
        now: Instant,
        ep: &mut Endpoint,
        ch: ConnectionHandle,
        id: StreamId,
        state: &mut ServerStream,
    ) -> Result<bool, StreamError> {
        if let ServerStream::Header(buf) = state {
            let (received, len) = loop {
                match Request::parse(buf) {
                    RequestParse::Done(r, len) => break (r, len),
                    RequestParse::Malformed => {
                        self.summary.bad_requests += 1;
                        ep.close(now, ch, PROTOCOL_ERROR, b"bad request");
                        return Ok(false);
                    }
                    RequestParse::Need(want) => {
                        let st = ep.read(ch, id, want, |_, d| buf.extend_from_slice(d))?;
                        if st.bytes == 0 {
                            if st.finished {
                                self.summary.bad_requests += 1;
                                ep.close(now, ch, PROTOCOL_ERROR, b"short request");
                                return Ok(false);
                            }
                            return Ok(true);
                        }
                    }
                }
            };
            let req = received.request;
            if let (Mode::Download, Some(spec)) = (req.mode, received.server_cca.as_deref()) {
                let switched = self
                    .check_cca(spec)
                    .and_then(|()| ep.set_cca(ch, spec).map_err(|e| e.to_string()));
                if let Err(why) = switched {
                    self.summary.refused_cca += 1;
                    tracing::info!(cca = spec, %why, "download refused");
                    ep.close(now, ch, CCA_REFUSED, why.as_bytes());
                    return Ok(false);
                }
            }
            let deadline = req.duration.map(|d| now + d);
            *state = match req.mode {
                Mode::Download => {
                    ServerStream::Sending(Sender::new(Vec::new(), req.size, deadline))
                }
                Mode::Upload => ServerStream::Receiving(Upload {
                    rx: Receiver::new(len as u64),
                    next_progress: (received.version >= 2).then(|| now + PROGRESS_INTERVAL),
                    out: Vec::with_capacity(8),
                    reply: None,
                }),
            };
        }
        match state {
            ServerStream::Header(_) => Ok(true),
            ServerStream::Sending(s) => {
                // Drain (and ignore) anything the client still sends, e.g. its FIN.
                let _ = ep.read_unordered(ch, id, READ_CHUNK, |_, _| {});
                let before = s.sent;
                s.pump(now, ep, ch, id)?;
                self.summary.bytes_sent += s.sent - before;
                if s.finished {
                    self.summary.transfers += 1;
                    return Ok(false);
                }
                Ok(true)
            }
            ServerStream::Receiving(up) => {
                if up.reply.is_none() {
                    let r = &mut up.rx;
                    let before = (r.received, r.mismatches);
                    r.pump(ep, ch, id)?;
                    self.summary.bytes_received += r.received - before.0;
                    self.summary.mismatches += r.mismatches - before.1;
                    if up.next_progress.is_some_and(|t| now >= t) {
                        up.next_progress = Some(now + PROGRESS_INTERVAL);
                        if up.out.is_empty() {
                            up.out.extend_from_slice(&r.received.to_be_bytes());
                        }
                    }
                    while !up.out.is_empty() {
                        let n = ep.write(ch, id, &up.out)?;
                        if n == 0 {
                            break;
                        }
                        up.out.drain(..n);
                    }
                    if r.finished {
                        up.next_progress = None;
                        let mut last = std::mem::take(&mut up.out);
                        last.extend_from_slice(&r.received.to_be_bytes());
                        up.reply = Some(Sender::new(last, Some(0), None));
                    }
                }
                if let Some(s) = &mut up.reply {
                    s.pump(now, ep, ch, id)?;
                    if s.finished {
                        self.summary.transfers += 1;
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    /// When a stream has timed work: the end of a timed download, or an
    /// upload's next progress count.
    fn stream_deadline(s: &ServerStream) -> Option<Instant> {
        match s {
            ServerStream::Sending(s) => s.deadline(),
            ServerStream::Receiving(up) => up.next_progress,
            ServerStream::Header(_) => None,
        }
    }
}

impl App for BulkServer {
    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, event: Event) {
        match event {
            Event::Accepted(ch) => {
                self.live.insert(ch);
            }
            Event::StreamOpened(ch, id) => {
                if id.dir() == Dir::Bi {
                    self.streams.insert(
                        (ch, id),
                        ServerStream::Header(Vec::with_capacity(REQUEST_LEN)),
                    );
                    self.drive(now, ep, ch, id);
                } else {
                    let _ = ep.stop(ch, id, PROTOCOL_ERROR);
                }
            }
            Event::Readable(ch, id) | Event::Writable(ch, id) => self.drive(now, ep, ch, id),
            Event::Closed(ch, reason) => {
                if matches!(reason, CloseReason::Application { code: 0, .. }) {
                    self.summary.clean_closes += 1;
                }
                self.streams.retain(|(c, _), _| *c != ch);
            }
            Event::Drained(report) => {
                self.live.remove(&report.handle);
                if self.summary.reports.len() < self.max_reports.unwrap_or(MAX_REPORTS) {
                    self.summary.reports.push(*report);
                }
            }
            _ => {}
        }
    }

    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        let due: Vec<_> = self
            .streams
            .iter()
            .filter(|(_, s)| Self::stream_deadline(s).is_some_and(|d| d <= now))
            .map(|(k, _)| *k)
            .collect();
        for (ch, id) in due {
            self.drive(now, ep, ch, id);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter_map(Self::stream_deadline)
            .min()
    }

    fn is_done(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed) && self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips() {
        let r = Request {
            mode: Mode::Upload,
            size: Some(12345),
            duration: Some(Duration::from_millis(1500)),
        };
        assert_eq!(Request::decode(&r.encode()), Some(r));
        let unlimited = Request {
            mode: Mode::Download,
            size: None,
            duration: None,
        };
        assert_eq!(Request::decode(&unlimited.encode()), Some(unlimited));
        assert_eq!(Request::decode(b"nope"), None);
    }

    #[test]
    fn v2_requests_carry_the_server_cca_and_parse_incrementally() {
        let r = Request {
            mode: Mode::Download,
            size: Some(1 << 20),
            duration: None,
        };
        let wire = r.encode_v2(Some("libra(capacity=1Gbit)")).unwrap();
        assert_eq!(wire.len(), REQUEST_LEN + 1 + 21);
        // Byte by byte, the parser asks for more until it has everything.
        for cut in 0..wire.len() {
            match Request::parse(&wire[..cut]) {
                RequestParse::Need(n) => assert!(n >= 1 && cut + n <= wire.len(), "cut {cut}"),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        let mut with_data = wire.clone();
        with_data.extend_from_slice(b"trailing data");
        let RequestParse::Done(got, len) = Request::parse(&with_data) else {
            panic!("complete request not parsed");
        };
        assert_eq!(len, wire.len());
        assert_eq!(got.request, r);
        assert_eq!(got.server_cca.as_deref(), Some("libra(capacity=1Gbit)"));
        assert_eq!(got.version, 2);
        // Empty spec: the server's default.
        let RequestParse::Done(got, _) = Request::parse(&r.encode_v2(None).unwrap()) else {
            panic!()
        };
        assert_eq!(got.server_cca, None);
        // v1 still parses.
        let RequestParse::Done(got, len) = Request::parse(&r.encode()) else {
            panic!()
        };
        assert_eq!((got.version, len), (1, REQUEST_LEN));
        assert_eq!(
            Request::parse(b"GET / HTTP/1.1\r\n"),
            RequestParse::Malformed
        );
        let mut bad_mode = wire.clone();
        bad_mode[4] = b'X';
        assert_eq!(Request::parse(&bad_mode), RequestParse::Malformed);
        let mut non_ascii = wire;
        non_ascii[REQUEST_LEN + 1] = 0xff;
        assert_eq!(Request::parse(&non_ascii), RequestParse::Malformed);
        assert!(r.encode_v2(Some(&"x".repeat(256))).is_err());
    }

    #[test]
    fn reply_counts_keep_the_latest_and_reject_a_torn_end() {
        let mut c = ReplyCounts::default();
        let mut wire = Vec::new();
        for v in [10u64, 2000, 123_456] {
            wire.extend_from_slice(&v.to_be_bytes());
        }
        for chunk in wire.chunks(5) {
            c.on_bytes(chunk);
        }
        assert_eq!(c.latest, Some(123_456));
        assert_eq!(c.finish(), Some(123_456));
        c.on_bytes(&[1, 2, 3]);
        assert_eq!(c.finish(), None, "a partial count at the end is malformed");
        assert_eq!(ReplyCounts::default().finish(), None);
    }

    #[test]
    fn receiver_detects_corruption_and_misplacement() {
        let mut r = Receiver::new(0);
        r.on_chunk(0, pattern_slice(0, 1000));
        assert_eq!(r.mismatches, 0);
        let mut bad = pattern_slice(1000, 100).to_vec();
        bad[7] ^= 1;
        r.on_chunk(1000, &bad);
        assert_eq!(r.mismatches, 1);
        // Out of order is fine; data at the wrong offset is not.
        let mut r = Receiver::new(0);
        r.on_chunk(500, pattern_slice(500, 100));
        r.on_chunk(0, pattern_slice(0, 500));
        assert_eq!((r.received, r.mismatches), (600, 0));
        r.on_chunk(600, pattern_slice(0, 100));
        assert!(
            r.mismatches >= 90,
            "misplaced data counts: {}",
            r.mismatches
        );
    }
}

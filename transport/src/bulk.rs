//! Bulk transfer: the protocol, a pattern generator with integrity check, and
//! the client and server [`App`]s used by the examples, tests and load generator.
//!
//! ## Protocol (ALPN `tollgate-bulk`)
//!
//! The client opens a bidirectional stream and sends a 21-byte request:
//! `"TGB1"`, a mode byte, the size (u64 big-endian, `u64::MAX` = unlimited)
//! and a duration in milliseconds (u64 big-endian, 0 = none).
//!
//! - `D` (download): the client finishes its side; the server sends `size`
//!   bytes of the [pattern](pattern_byte), or sends until the duration has
//!   passed, then finishes the stream.
//! - `U` (upload): the client follows the request with the data and finishes;
//!   the server replies with the byte count it received (u64 big-endian).
//!
//! The client then closes the connection with code 0. Every byte is checked
//! against the pattern on arrival, so integrity costs no memory.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
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
/// Request length in bytes.
pub const REQUEST_LEN: usize = 21;
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
}

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
        }
    }

    /// The instant at which the sender will stop on its own.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.filter(|_| !self.finished)
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
            let n = remaining.min(WRITE_CHUNK as u64) as usize;
            let written = ep.write(ch, id, pattern_slice(self.sent, n))?;
            if written == 0 {
                return Ok(());
            }
            self.sent += written as u64;
        }
    }
}

/// Counts and verifies pattern data read from a stream.
#[derive(Clone, Debug, Default)]
pub struct Receiver {
    /// Stream offset at which pattern data starts.
    base: u64,
    /// Pattern bytes received.
    pub received: u64,
    /// Bytes that did not match the pattern or arrived out of place.
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
        if pos != self.received {
            self.mismatches += data.len() as u64;
        }
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
            let st = ep.read(ch, id, READ_CHUNK, |off, data| self.on_chunk(off, data))?;
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
    conn: Option<ConnectionHandle>,
    stream: Option<StreamId>,
    sender: Option<Sender>,
    receiver: Receiver,
    reply: Vec<u8>,
    started: Option<Instant>,
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
            conn: None,
            stream: None,
            sender: None,
            receiver: Receiver::new(0),
            reply: Vec::new(),
            started: None,
            result: BulkResult::default(),
            done: false,
            closing: false,
        }
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
                if self.receiver.finished {
                    let bytes = self.receiver.received;
                    self.finish_transfer(now, ep, bytes);
                }
            }
            Mode::Upload => {
                let reply = &mut self.reply;
                let fin = match ep.read(ch, id, 64, |_, d| {
                    reply.extend_from_slice(&d[..d.len().min(8)])
                }) {
                    Ok(st) => st.finished,
                    Err(e) => return self.fail(now, ep, format!("reply: {e}")),
                };
                if fin {
                    if self.reply.len() != 8 {
                        return self.fail(now, ep, "malformed reply".into());
                    }
                    let acked = u64::from_be_bytes(self.reply[..8].try_into().expect("8 bytes"));
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
                let prefix = self.request.encode().to_vec();
                let deadline = self.request.duration.map(|d| now + d);
                self.sender = Some(match self.request.mode {
                    Mode::Download => Sender::new(prefix, Some(0), None),
                    Mode::Upload => Sender::new(prefix, self.request.size, deadline),
                });
            }
            Event::Closed(_, reason) => {
                if self.result.error.is_none() && !self.result.complete {
                    self.result.error = Some(format!("closed before completion: {reason:?}"));
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

/// One stream on the server.
#[derive(Debug)]
enum ServerStream {
    Header(Vec<u8>),
    Sending(Sender),
    Receiving(Receiver, Option<Sender>),
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
    /// Connections closed with code 0 by the peer.
    pub clean_closes: u64,
    /// Final reports of drained connections (the first 1024).
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
    /// Totals.
    pub summary: ServerSummary,
}

impl BulkServer {
    /// A server.
    pub fn new() -> Self {
        Self::default()
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
            let want = REQUEST_LEN - buf.len();
            let st = ep.read(ch, id, want, |_, d| buf.extend_from_slice(d))?;
            if buf.len() < REQUEST_LEN {
                if st.finished {
                    self.summary.bad_requests += 1;
                    ep.close(now, ch, PROTOCOL_ERROR, b"short request");
                    return Ok(false);
                }
                return Ok(true);
            }
            let Some(req) = Request::decode(buf) else {
                self.summary.bad_requests += 1;
                ep.close(now, ch, PROTOCOL_ERROR, b"bad request");
                return Ok(false);
            };
            let deadline = req.duration.map(|d| now + d);
            *state = match req.mode {
                Mode::Download => {
                    ServerStream::Sending(Sender::new(Vec::new(), req.size, deadline))
                }
                Mode::Upload => ServerStream::Receiving(Receiver::new(REQUEST_LEN as u64), None),
            };
        }
        match state {
            ServerStream::Header(_) => Ok(true),
            ServerStream::Sending(s) => {
                // Drain (and ignore) anything the client still sends, e.g. its FIN.
                let _ = ep.read(ch, id, READ_CHUNK, |_, _| {});
                let before = s.sent;
                s.pump(now, ep, ch, id)?;
                self.summary.bytes_sent += s.sent - before;
                if s.finished {
                    self.summary.transfers += 1;
                    return Ok(false);
                }
                Ok(true)
            }
            ServerStream::Receiving(r, reply) => {
                if reply.is_none() {
                    let before = (r.received, r.mismatches);
                    r.pump(ep, ch, id)?;
                    self.summary.bytes_received += r.received - before.0;
                    self.summary.mismatches += r.mismatches - before.1;
                    if r.finished {
                        *reply = Some(Sender::new(
                            r.received.to_be_bytes().to_vec(),
                            Some(0),
                            None,
                        ));
                    }
                }
                if let Some(s) = reply {
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

    /// Earliest deadline of a timed download.
    fn next_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter_map(|s| match s {
                ServerStream::Sending(s) => s.deadline(),
                _ => None,
            })
            .min()
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
                if self.summary.reports.len() < MAX_REPORTS {
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
            .filter_map(|(k, s)| match s {
                ServerStream::Sending(s) if s.deadline().is_some_and(|d| d <= now) => Some(*k),
                _ => None,
            })
            .collect();
        for (ch, id) in due {
            self.drive(now, ep, ch, id);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_deadline()
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
    fn receiver_detects_corruption_and_misplacement() {
        let mut r = Receiver::new(0);
        r.on_chunk(0, pattern_slice(0, 1000));
        assert_eq!(r.mismatches, 0);
        let mut bad = pattern_slice(1000, 100).to_vec();
        bad[7] ^= 1;
        r.on_chunk(1000, &bad);
        assert_eq!(r.mismatches, 1);
        let mut r = Receiver::new(0);
        r.on_chunk(1, pattern_slice(1, 100));
        assert!(r.mismatches >= 100, "out-of-place data counts");
    }
}

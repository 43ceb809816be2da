//! The mio event loop. This is the only place that reads the clock
//! (`Instant::now()`); everything below it takes `now` as an argument.
//!
//! One loop serves any number of *slots*: an [`Endpoint`] on its own
//! [`DatagramSocket`], driven by its own [`App`]. [`Driver`] is the loop with
//! one slot (one thread, one socket, one endpoint with any number of
//! connections); [`Pool`](crate::pool::Pool) is the same loop with many (one
//! socket per client connection, each started at its own instant). Both run
//! the same code, per slot and per wake-up:
//!
//! 1. start the apps whose start instant has come (`App::start`);
//! 2. fire due timers: `Endpoint::handle_timeout`, then the endpoint's events
//!    to `App::on_event` and `App::poll`;
//! 3. flush: `Endpoint::poll_transmit` into up to [`udp::MAX_BATCH`] buffers,
//!    sent with one `sendmmsg` (each message a GSO batch of up to
//!    [`GSO_SEGMENTS`] datagrams with its own TOS byte); what the socket
//!    refuses (would block) waits for the socket to become writable;
//! 4. sleep until a socket is readable or writable, the earliest slot deadline
//!    (endpoint timers, app deadline) or the next start, on a `timerfd` so
//!    wake-ups are precise to microseconds rather than epoll's milliseconds;
//! 5. receive with `recvmmsg` (GRO-coalesced buffers split back into
//!    datagrams), at most [`RECV_BUDGET`] datagrams per slot per wake-up, each
//!    handed to the endpoint with the kernel's receive timestamp converted to
//!    an `Instant` (never earlier than the endpoint's previous `now`).
//!
//! Per wake-up the loop only touches the slots that have work (a readiness
//! event, a due timer, a start, a flush left unfinished), so a thousand idle
//! flows cost nothing between their packets.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::BytesMut;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::endpoint::{Endpoint, EndpointOptions, Event, Transmit};
use crate::udp::{self, OutMsg, RecvBatch, RecvMeta};

/// Longest sleep, so a stop request or an app finishing through another
/// thread is noticed promptly.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// Datagrams handled per slot per wake-up before other slots, timers and
/// transmits get a turn.
pub const RECV_BUDGET: usize = 256;
/// Transmits (each up to [`GSO_SEGMENTS`] datagrams) sent per slot per
/// wake-up before others get a turn.
const SEND_BUDGET: usize = 64;
/// Messages per `recvmmsg`.
const RECV_SLOTS: usize = 16;
/// GSO batch size (datagrams per send) used when the kernel supports it:
/// 40 × 1472 bytes (quinn-proto's largest datagram by default) = 58 880
/// bytes, within one UDP send's 64 KiB. Measured on loopback: 10 → 40 cut
/// the sender's CPU per byte by about a tenth (fewer trips through the IP
/// stack; the GRO receiver gets the batch whole).
pub const GSO_SEGMENTS: usize = 40;
/// How often every app's `is_done` is checked even if nothing happened to it
/// (apps can finish through another thread, e.g. a server's shutdown flag).
const SWEEP: Duration = Duration::from_millis(5);
/// The timerfd's token; slots use `Token(index)`.
const TIMER: Token = Token(usize::MAX);

/// A datagram socket the driver can poll; [`UdpIo`] is the real one and
/// [`crate::impair::Impaired`] wraps one to inject loss and reordering.
pub trait DatagramSocket {
    /// Send `data` (one datagram, or a GSO batch split at `segment_size`).
    fn send(
        &mut self,
        dest: SocketAddr,
        data: &[u8],
        tos: u8,
        segment_size: Option<usize>,
    ) -> io::Result<()>;
    /// Receive one message (with GRO on, possibly several coalesced datagrams:
    /// see [`RecvMeta::segment_size`]).
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<RecvMeta>;
    /// The bound address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The socket to register with mio.
    fn source(&mut self) -> &mut mio::net::UdpSocket;
    /// Whether GSO batches may be passed to [`send`](Self::send).
    fn gso(&self) -> bool;
    /// Send several messages; returns how many of the first ones went out
    /// (at least one), or the first one's error. The default sends one by one.
    fn send_batch(&mut self, msgs: &[OutMsg<'_>]) -> io::Result<usize> {
        for (i, m) in msgs.iter().enumerate() {
            if let Err(e) = self.send(m.dest, m.data, m.tos, m.segment_size) {
                return if i == 0 { Err(e) } else { Ok(i) };
            }
        }
        Ok(msgs.len())
    }
    /// Receive one or more messages into `batch`; returns how many. The
    /// default receives one with [`recv`](Self::recv).
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.push_with(|buf| self.recv(buf))
    }
}

/// A real non-blocking UDP socket with TOS control messages, GSO, GRO,
/// `sendmmsg`/`recvmmsg` and kernel receive timestamps.
#[derive(Debug)]
pub struct UdpIo {
    socket: mio::net::UdpSocket,
    gso: bool,
    gro: bool,
    /// GSO sends the kernel or device refused (`EIO`/`EINVAL`); each was
    /// split and sent datagram by datagram instead.
    pub gso_fallbacks: u64,
}

impl UdpIo {
    /// Bind to `addr`, with GSO, GRO and receive timestamps where the kernel
    /// has them.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        Self::from_std(udp::bind(addr)?)
    }

    /// Bind with `SO_REUSEPORT`: one socket per server worker thread on the
    /// same address, the kernel spreading connections over them (see
    /// [`udp::bind_with`]).
    pub fn bind_reuse_port(addr: SocketAddr) -> io::Result<Self> {
        Self::from_std(udp::bind_with(addr, true)?)
    }

    /// Wrap a socket made by [`udp::bind`], [`udp::bind_reuse_port`] or
    /// [`udp::bind_with`], enabling GRO and receive timestamps on it.
    pub fn from_std(std: std::net::UdpSocket) -> io::Result<Self> {
        let fd = std.as_raw_fd();
        let gso = udp::gso_supported(fd);
        let gro = udp::enable_gro(fd);
        udp::enable_timestamps(fd);
        Ok(UdpIo {
            socket: mio::net::UdpSocket::from_std(std),
            gso,
            gro,
            gso_fallbacks: 0,
        })
    }

    /// Never batch datagrams on send (GSO off).
    pub fn without_gso(mut self) -> Self {
        self.gso = false;
        self
    }

    /// Receive datagrams one by one (GRO off).
    pub fn without_gro(mut self) -> Self {
        if self.gro {
            // SAFETY: plain setsockopt on our own socket with an int argument.
            let off: libc::c_int = 0;
            unsafe {
                libc::setsockopt(
                    self.socket.as_raw_fd(),
                    libc::SOL_UDP,
                    libc::UDP_GRO,
                    (&off as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
            self.gro = false;
        }
        self
    }

    /// Whether GRO is on.
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// Send a GSO batch the device refused as separate datagrams.
    fn send_split(&mut self, m: &OutMsg<'_>) -> io::Result<()> {
        self.gso_fallbacks += 1;
        let seg = m.segment_size.unwrap_or(m.data.len()).max(1);
        for d in m.data.chunks(seg) {
            udp::send(self.socket.as_raw_fd(), m.dest, d, m.tos, None)?;
        }
        Ok(())
    }
}

/// Whether a send error means "this socket cannot do GSO after all".
fn gso_refused(e: &io::Error, m: &OutMsg<'_>) -> bool {
    matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL))
        && m.segment_size.is_some_and(|s| s < m.data.len())
}

impl DatagramSocket for UdpIo {
    fn send(
        &mut self,
        dest: SocketAddr,
        data: &[u8],
        tos: u8,
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        let m = OutMsg {
            dest,
            data,
            tos,
            segment_size,
        };
        match udp::send(self.socket.as_raw_fd(), dest, data, tos, segment_size) {
            Ok(_) => Ok(()),
            Err(e) if gso_refused(&e, &m) => self.send_split(&m),
            Err(e) => Err(e),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        udp::recv(self.socket.as_raw_fd(), buf)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    fn source(&mut self) -> &mut mio::net::UdpSocket {
        &mut self.socket
    }

    fn gso(&self) -> bool {
        self.gso
    }

    fn send_batch(&mut self, msgs: &[OutMsg<'_>]) -> io::Result<usize> {
        match udp::send_batch(self.socket.as_raw_fd(), msgs) {
            Err(e) if msgs.first().is_some_and(|m| gso_refused(&e, m)) => {
                self.send_split(&msgs[0]).map(|()| 1)
            }
            other => other,
        }
    }

    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        udp::recv_batch(self.socket.as_raw_fd(), batch)
    }
}

/// Application logic run by a driver (the bulk client and server, the load
/// generator). The emulator drives the same trait with virtual time.
pub trait App {
    /// Called once before the loop starts (e.g. to connect).
    fn start(&mut self, now: Instant, ep: &mut Endpoint) {
        let _ = (now, ep);
    }
    /// One endpoint event.
    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, event: Event);
    /// Called after every batch of input and timers, e.g. to write more data.
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        let _ = (now, ep);
    }
    /// The app's own next deadline (e.g. end of a timed transfer).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    /// Whether the driver may stop.
    fn is_done(&self) -> bool;
}

/// Counters of the driver itself (per socket).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Send errors other than would-block (datagram dropped).
    pub send_errors: u64,
    /// Receive errors other than would-block (e.g. ICMP port unreachable).
    pub recv_errors: u64,
    /// Times a send had to wait for the socket to become writable.
    pub send_blocked: u64,
    /// Send system calls that sent something (`sendmmsg`/`sendmsg`).
    pub send_calls: u64,
    /// Messages sent (each one datagram or a GSO batch).
    pub messages_sent: u64,
    /// Receive system calls that returned data.
    pub recv_calls: u64,
    /// Messages received (each one datagram or a GRO-coalesced batch).
    pub messages_received: u64,
    /// Datagrams handed to the endpoint (after splitting GRO batches).
    pub datagrams_received: u64,
    /// Received messages dropped as truncated or with a non-IP source.
    pub recv_malformed: u64,
}

/// Transmit buffers of one loop: up to [`udp::MAX_BATCH`] transmits built
/// by `Endpoint::poll_transmit` and sent with one `sendmmsg`.
#[derive(Debug, Default)]
pub(crate) struct TxBatch {
    bufs: Vec<Vec<u8>>,
    metas: Vec<Transmit>,
}

impl TxBatch {
    fn new() -> Self {
        TxBatch {
            bufs: (0..udp::MAX_BATCH).map(|_| Vec::new()).collect(),
            metas: Vec::with_capacity(udp::MAX_BATCH),
        }
    }
}

/// Per-loop buffers, allocated when a loop starts running.
#[derive(Debug)]
pub(crate) struct Buffers {
    rx: RecvBatch,
    tx: TxBatch,
}

/// One endpoint on its own socket with its scheduling state: the unit the
/// loop serves. [`Driver`] holds one, [`Pool`](crate::pool::Pool) many.
pub(crate) struct Slot<S> {
    pub(crate) endpoint: Endpoint,
    pub(crate) socket: S,
    pub(crate) stats: DriverStats,
    /// Transmits the socket refused (would block), oldest first.
    blocked: VecDeque<(Transmit, Vec<u8>)>,
    /// When `App::start` may run, and when it did.
    pub(crate) start_at: Instant,
    pub(crate) started_at: Option<Instant>,
    /// The latest `now` handed to the endpoint: times only move forward.
    last_now: Option<Instant>,
    /// The deadline this slot has in the loop's timer heap.
    deadline: Option<Instant>,
    /// The last `recv` stopped at the budget with data left.
    more_to_read: bool,
    /// The last flush stopped at the budget with data left.
    more_to_send: bool,
    /// The app is done and nothing is left to send.
    done: bool,
}

impl<S: DatagramSocket> Slot<S> {
    /// A slot on `socket`; GSO batching follows the socket's ability.
    pub(crate) fn new(socket: S, mut options: EndpointOptions, start_at: Instant) -> Self {
        if socket.gso() && options.max_gso_segments == 1 {
            options.max_gso_segments = GSO_SEGMENTS;
        }
        if !socket.gso() {
            options.max_gso_segments = 1;
        }
        options.max_gso_segments = options.max_gso_segments.min(udp::MAX_GSO_SEGMENTS);
        Slot {
            endpoint: Endpoint::new(options),
            socket,
            stats: DriverStats::default(),
            blocked: VecDeque::new(),
            start_at,
            started_at: None,
            last_now: None,
            deadline: None,
            more_to_read: false,
            more_to_send: false,
            done: false,
        }
    }

    /// `Instant::now()`, never before the endpoint's previous `now`.
    fn clock(&mut self) -> Instant {
        let now = Instant::now();
        let now = self.last_now.map_or(now, |l| l.max(now));
        self.last_now = Some(now);
        now
    }

    fn start<A: App>(&mut self, app: &mut A) {
        let now = self.clock();
        self.started_at = Some(now);
        app.start(now, &mut self.endpoint);
    }

    fn deliver_events<A: App>(&mut self, now: Instant, app: &mut A) {
        while let Some(ev) = self.endpoint.poll_event() {
            app.on_event(now, &mut self.endpoint, ev);
        }
        app.poll(now, &mut self.endpoint);
        while let Some(ev) = self.endpoint.poll_event() {
            app.on_event(now, &mut self.endpoint, ev);
        }
    }

    /// Timers, events, transmits: everything but receiving.
    fn service<A: App>(&mut self, app: &mut A, tx: &mut TxBatch) {
        let now = self.clock();
        self.endpoint.handle_timeout(now);
        self.deliver_events(now, app);
        self.more_to_send = self.flush(now, tx);
        self.done = self.finished(app);
    }

    fn finished<A: App>(&self, app: &A) -> bool {
        app.is_done() && self.blocked.is_empty() && !self.endpoint.has_pending_responses()
    }

    fn next_deadline<A: App>(&mut self, app: &A) -> Option<Instant> {
        [self.endpoint.poll_timeout(), app.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Send until the endpoint has nothing more, the socket is full or the
    /// budget is spent; returns whether the budget ran out with more to send.
    fn flush(&mut self, now: Instant, tx: &mut TxBatch) -> bool {
        let mut transmits = 0;
        loop {
            tx.metas.clear();
            while tx.metas.len() < udp::MAX_BATCH {
                let Some((t, bytes)) = self.blocked.pop_front() else {
                    break;
                };
                tx.bufs[tx.metas.len()] = bytes;
                tx.metas.push(t);
            }
            let mut exhausted = false;
            while tx.metas.len() < udp::MAX_BATCH && transmits + tx.metas.len() < SEND_BUDGET {
                let k = tx.metas.len();
                match self.endpoint.poll_transmit(now, &mut tx.bufs[k]) {
                    Some(t) => tx.metas.push(t),
                    None => {
                        exhausted = true;
                        break;
                    }
                }
            }
            if tx.metas.is_empty() {
                return false;
            }
            let n = tx.metas.len();
            let msgs: [OutMsg<'_>; udp::MAX_BATCH] = std::array::from_fn(|j| {
                let (t, buf) = match tx.metas.get(j) {
                    Some(t) => (t, &tx.bufs[j][..t.size.min(tx.bufs[j].len())]),
                    None => (&tx.metas[0], &[][..]),
                };
                OutMsg {
                    dest: t.destination,
                    data: buf,
                    tos: t.tos(),
                    segment_size: t.segment_size,
                }
            });
            let mut off = 0;
            while off < n {
                match self.socket.send_batch(&msgs[off..n]) {
                    Ok(k) if k > 0 => {
                        self.stats.send_calls += 1;
                        self.stats.messages_sent += k as u64;
                        off += k;
                    }
                    Ok(_) => break,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.stats.send_errors += 1;
                        tracing::debug!(error = %e, dest = %msgs[off].dest, "send failed");
                        off += 1;
                    }
                }
            }
            if off < n {
                // The socket is full: keep the rest, in order, until it is writable.
                self.stats.send_blocked += 1;
                for j in (off..n).rev() {
                    let bytes = std::mem::take(&mut tx.bufs[j]);
                    self.blocked.push_front((tx.metas[j], bytes));
                }
                return false;
            }
            transmits += n;
            if exhausted {
                return false;
            }
            if transmits >= SEND_BUDGET {
                return true;
            }
        }
    }

    /// Read up to [`RECV_BUDGET`] datagrams into the endpoint; returns whether
    /// the budget ran out with data possibly left.
    fn receive(&mut self, rx: &mut RecvBatch) -> bool {
        let mut handled = 0;
        loop {
            match self.socket.recv_batch(rx) {
                Ok(_) => {
                    self.stats.recv_calls += 1;
                    self.stats.recv_malformed += std::mem::take(&mut rx.malformed);
                    let now = Instant::now();
                    let wall = SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .ok();
                    for i in 0..rx.len() {
                        let (meta, data) = rx.get(i);
                        self.stats.messages_received += 1;
                        let at = self.arrival(meta.timestamp, wall, now);
                        // One allocation and copy per message; its datagrams
                        // share it (quinn-proto keeps stream data as slices).
                        let mut bytes = BytesMut::from(data);
                        for d in meta.datagrams(data) {
                            let d = bytes.split_to(d.len());
                            self.endpoint
                                .handle_datagram_owned(at, meta.from, meta.tos, d);
                            self.stats.datagrams_received += 1;
                            handled += 1;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.stats.recv_errors += 1;
                    handled += 1;
                    tracing::trace!(error = %e, "recv error");
                }
            }
            if handled >= RECV_BUDGET {
                return true;
            }
        }
    }

    /// A datagram's arrival instant: the kernel's timestamp (wall clock)
    /// carried over to the monotonic clock read at `now`, clamped between the
    /// endpoint's previous `now` and `now`.
    fn arrival(
        &mut self,
        kernel: Option<Duration>,
        wall_now: Option<Duration>,
        now: Instant,
    ) -> Instant {
        let stamped = match (kernel, wall_now) {
            (Some(k), Some(w)) => now.checked_sub(w.saturating_sub(k)).unwrap_or(now),
            _ => now,
        };
        let at = match self.last_now {
            Some(l) => stamped.max(l).min(now.max(l)),
            None => stamped.min(now),
        };
        self.last_now = Some(at);
        at
    }
}

/// The slots one loop serves, with their apps.
pub(crate) trait Members {
    type App: App;
    type Socket: DatagramSocket;
    fn count(&self) -> usize;
    fn member(&mut self, i: usize) -> (&mut Slot<Self::Socket>, &mut Self::App);
}

/// A precise one-shot wake-up: a `timerfd` registered with the poll.
#[derive(Debug)]
struct Alarm {
    fd: OwnedFd,
    armed: Option<Instant>,
}

impl Alarm {
    fn new(poll: &Poll) -> io::Result<Self> {
        // SAFETY: plain syscall; the returned descriptor is checked and owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        poll.registry()
            .register(&mut SourceFd(&fd.as_raw_fd()), TIMER, Interest::READABLE)?;
        Ok(Alarm { fd, armed: None })
    }

    /// Fire at `at` (`now` is the current time).
    fn set(&mut self, at: Instant, now: Instant) {
        if self.armed == Some(at) {
            return;
        }
        let d = at
            .saturating_duration_since(now)
            .max(Duration::from_micros(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and itimerspec; the old value is not requested.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        self.armed = (rc == 0).then_some(at);
    }

    fn fired(&mut self) {
        let mut ticks = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `ticks`; errors (nothing to read) are fine.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), ticks.as_mut_ptr().cast(), 8) };
        self.armed = None;
    }
}

/// The mio poll and precise alarm of one loop.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) poll: Poll,
    alarm: Alarm,
}

/// Mark slot `i` for service in this wake-up.
fn mark(dirty: &mut Vec<usize>, flags: &mut [bool], i: usize) {
    if !flags[i] {
        flags[i] = true;
        dirty.push(i);
    }
}

impl Engine {
    pub(crate) fn new() -> io::Result<Self> {
        let poll = Poll::new()?;
        let alarm = Alarm::new(&poll)?;
        Ok(Engine { poll, alarm })
    }

    /// Register slot `i`'s socket.
    pub(crate) fn register<S: DatagramSocket>(&self, socket: &mut S, i: usize) -> io::Result<()> {
        self.poll.registry().register(
            socket.source(),
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    /// Run every member until all are done (started, app done, nothing left
    /// to send) or `stop` is set.
    pub(crate) fn run<M: Members>(&mut self, m: &mut M, stop: &AtomicBool) -> io::Result<()> {
        let n = m.count();
        let mut bufs = Buffers {
            rx: RecvBatch::new(RECV_SLOTS),
            tx: TxBatch::new(),
        };
        let mut events = Events::with_capacity(256);
        let mut heap: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
        let mut dirty: Vec<usize> = Vec::new();
        let mut flags = vec![false; n];
        let mut reading: Vec<usize> = Vec::new();
        let mut round: Vec<usize> = Vec::new();
        let mut still: Vec<usize> = Vec::new();
        // Not yet started, latest first (so `pop` gives the next one).
        let mut starts: Vec<(Instant, usize)> = Vec::new();
        let mut done = 0usize;
        for i in 0..n {
            let (slot, app) = m.member(i);
            slot.deadline = None;
            slot.more_to_read = false;
            if slot.started_at.is_none() {
                starts.push((slot.start_at, i));
                slot.done = false;
            } else {
                slot.done = slot.finished(app);
                // Whatever arrived or is due meanwhile.
                reading.push(i);
                mark(&mut dirty, &mut flags, i);
            }
            done += usize::from(slot.done);
        }
        starts.sort_by(|a, b| b.cmp(a));
        let mut next_sweep = Instant::now() + SWEEP;
        loop {
            let now = Instant::now();
            start_due(m, &mut starts, now, &mut dirty, &mut flags, &mut reading);
            while let Some(&Reverse((at, i))) = heap.peek() {
                if at > now {
                    break;
                }
                heap.pop();
                let (slot, _) = m.member(i);
                if slot.deadline == Some(at) {
                    slot.deadline = None;
                    mark(&mut dirty, &mut flags, i);
                }
            }
            // Service every slot with work; a flush cut short comes back next round.
            std::mem::swap(&mut round, &mut dirty);
            for &i in &round {
                flags[i] = false;
                let (slot, app) = m.member(i);
                let was_done = slot.done;
                slot.service(app, &mut bufs.tx);
                if slot.done != was_done {
                    if slot.done {
                        done += 1;
                    } else {
                        done -= 1;
                    }
                }
                let deadline = slot.next_deadline(app);
                if deadline != slot.deadline {
                    slot.deadline = deadline;
                    if let Some(at) = deadline {
                        heap.push(Reverse((at, i)));
                    }
                }
                if slot.more_to_send {
                    mark(&mut dirty, &mut flags, i);
                }
                // A round over many busy endpoints takes a while: start
                // whatever fell due meanwhile rather than after the round.
                if starts.last().is_some_and(|&(at, _)| at <= Instant::now()) {
                    start_due(
                        m,
                        &mut starts,
                        Instant::now(),
                        &mut dirty,
                        &mut flags,
                        &mut reading,
                    );
                }
            }
            round.clear();
            if heap.len() > 2 * n + 4096 {
                heap.clear();
                for i in 0..n {
                    if let Some(at) = m.member(i).0.deadline {
                        heap.push(Reverse((at, i)));
                    }
                }
            }
            if now >= next_sweep {
                next_sweep = now + SWEEP;
                done = 0;
                for i in 0..n {
                    let (slot, app) = m.member(i);
                    slot.done = slot.started_at.is_some() && slot.finished(app);
                    done += usize::from(slot.done);
                }
            }
            if done == n && starts.is_empty() {
                return Ok(());
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let timeout = if !dirty.is_empty() || !reading.is_empty() {
                Duration::ZERO
            } else {
                let wake = [
                    heap.peek().map(|Reverse((at, _))| *at),
                    starts.last().map(|(at, _)| *at),
                ]
                .into_iter()
                .flatten()
                .min();
                match wake {
                    Some(at) if at.saturating_duration_since(now) < MAX_SLEEP => {
                        self.alarm.set(at, now);
                        MAX_SLEEP
                    }
                    _ => MAX_SLEEP,
                }
            };
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            for ev in events.iter() {
                if ev.token() == TIMER {
                    self.alarm.fired();
                    continue;
                }
                let i = ev.token().0;
                if i >= n {
                    continue;
                }
                let (slot, _) = m.member(i);
                if slot.started_at.is_none() {
                    // Read once started; nothing runs before `App::start`.
                    continue;
                }
                let readable = ev.is_readable() || ev.is_error() || ev.is_read_closed();
                if readable && !slot.more_to_read {
                    slot.more_to_read = true;
                    reading.push(i);
                }
                if ev.is_writable() {
                    mark(&mut dirty, &mut flags, i);
                }
            }
            for i in reading.drain(..) {
                let (slot, _) = m.member(i);
                slot.more_to_read = slot.receive(&mut bufs.rx);
                if slot.more_to_read {
                    still.push(i);
                }
                mark(&mut dirty, &mut flags, i);
            }
            std::mem::swap(&mut reading, &mut still);
        }
    }
}

/// Start every member whose start instant is at or before `now` (`starts` is
/// sorted latest first).
fn start_due<M: Members>(
    m: &mut M,
    starts: &mut Vec<(Instant, usize)>,
    now: Instant,
    dirty: &mut Vec<usize>,
    flags: &mut [bool],
    reading: &mut Vec<usize>,
) {
    while let Some(&(at, i)) = starts.last() {
        if at > now {
            break;
        }
        starts.pop();
        let (slot, app) = m.member(i);
        slot.start(app);
        mark(dirty, flags, i);
        // Anything that arrived before the start was left unread.
        slot.more_to_read = true;
        reading.push(i);
    }
}

/// The mio event loop around one [`Endpoint`] on one socket.
pub struct Driver<S: DatagramSocket = UdpIo> {
    slot: Slot<S>,
    engine: Engine,
}

impl<S: DatagramSocket> std::fmt::Debug for Driver<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("endpoint", &self.slot.endpoint)
            .field("stats", &self.slot.stats)
            .finish_non_exhaustive()
    }
}

impl Driver<UdpIo> {
    /// A driver on a fresh socket bound to `addr`.
    pub fn bind(addr: SocketAddr, options: EndpointOptions) -> io::Result<Self> {
        Driver::new(UdpIo::bind(addr)?, options)
    }
}

/// The one member of a [`Driver`]'s loop.
struct Single<'a, S, A> {
    slot: &'a mut Slot<S>,
    app: &'a mut A,
}

impl<S: DatagramSocket, A: App> Members for Single<'_, S, A> {
    type App = A;
    type Socket = S;
    fn count(&self) -> usize {
        1
    }
    fn member(&mut self, _: usize) -> (&mut Slot<S>, &mut A) {
        (self.slot, self.app)
    }
}

impl<S: DatagramSocket> Driver<S> {
    /// A driver on `socket`.
    pub fn new(mut socket: S, options: EndpointOptions) -> io::Result<Self> {
        let engine = Engine::new()?;
        engine.register(&mut socket, 0)?;
        Ok(Driver {
            slot: Slot::new(socket, options, Instant::now()),
            engine,
        })
    }

    /// The endpoint, e.g. to configure roles before running.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.slot.endpoint
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.slot.socket.local_addr()
    }

    /// The socket (e.g. an [`Impaired`](crate::impair::Impaired) wrapper's counters).
    pub fn socket(&self) -> &S {
        &self.slot.socket
    }

    /// Driver counters.
    pub fn stats(&self) -> &DriverStats {
        &self.slot.stats
    }

    /// Run `app` until it is done or `stop` is set; `app.start` is called
    /// first.
    pub fn run<A: App>(&mut self, app: &mut A, stop: &AtomicBool) -> io::Result<()> {
        self.slot.started_at = None;
        self.slot.start_at = Instant::now();
        let mut one = Single {
            slot: &mut self.slot,
            app,
        };
        self.engine.run(&mut one, stop)
    }
}

/// Run `app` on `driver` in a new thread until it is done or `stop` is set;
/// the thread returns both.
pub fn spawn<S, A>(
    mut driver: Driver<S>,
    mut app: A,
    stop: Arc<AtomicBool>,
) -> JoinHandle<io::Result<(Driver<S>, A)>>
where
    S: DatagramSocket + Send + 'static,
    A: App + Send + 'static,
{
    std::thread::Builder::new()
        .name("tollgate-endpoint".into())
        .spawn(move || {
            driver.run(&mut app, &stop)?;
            Ok((driver, app))
        })
        .expect("spawn endpoint thread")
}

//! The mio driver: one thread, one UDP socket, one [`Endpoint`] with any
//! number of connections. This is the only place that reads the clock
//! (`Instant::now()`); everything below it takes `now` as an argument.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::endpoint::{Endpoint, EndpointOptions, Event, Transmit};
use crate::udp::{self, RecvMeta};

/// Datagrams read per wake-up before timers and transmits get a turn.
const RECV_BATCH: usize = 256;
/// Longest sleep, so a stop request is noticed promptly.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// Receive buffer: the largest UDP payload.
const RECV_BUF: usize = 65_535;
/// GSO batch size used when the kernel supports it.
const GSO_SEGMENTS: usize = 10;

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
    /// Receive one datagram.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<RecvMeta>;
    /// The bound address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The socket to register with mio.
    fn source(&mut self) -> &mut mio::net::UdpSocket;
    /// Whether GSO batches may be passed to [`send`](Self::send).
    fn gso(&self) -> bool;
}

/// A real non-blocking UDP socket with TOS control messages.
#[derive(Debug)]
pub struct UdpIo {
    socket: mio::net::UdpSocket,
    gso: bool,
}

impl UdpIo {
    /// Bind to `addr`.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let std = udp::bind(addr)?;
        let gso = udp::gso_supported(std.as_raw_fd());
        Ok(UdpIo {
            socket: mio::net::UdpSocket::from_std(std),
            gso,
        })
    }

    /// Wrap a socket made by [`udp::bind`] or [`udp::bind_reuse_port`].
    pub fn from_std(std: std::net::UdpSocket) -> Self {
        let gso = udp::gso_supported(std.as_raw_fd());
        UdpIo {
            socket: mio::net::UdpSocket::from_std(std),
            gso,
        }
    }

    /// Never batch datagrams (GSO off).
    pub fn without_gso(mut self) -> Self {
        self.gso = false;
        self
    }
}

impl DatagramSocket for UdpIo {
    fn send(
        &mut self,
        dest: SocketAddr,
        data: &[u8],
        tos: u8,
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        udp::send(self.socket.as_raw_fd(), dest, data, tos, segment_size).map(|_| ())
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

/// Counters of the driver itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Send errors other than would-block (datagram dropped).
    pub send_errors: u64,
    /// Receive errors other than would-block (e.g. ICMP port unreachable).
    pub recv_errors: u64,
    /// Times a send had to wait for the socket to become writable.
    pub send_blocked: u64,
}

/// The mio event loop around one [`Endpoint`].
pub struct Driver<S: DatagramSocket = UdpIo> {
    endpoint: Endpoint,
    socket: S,
    poll: Poll,
    stats: DriverStats,
}

impl<S: DatagramSocket> std::fmt::Debug for Driver<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("endpoint", &self.endpoint)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Driver<UdpIo> {
    /// A driver on a fresh socket bound to `addr`.
    pub fn bind(addr: SocketAddr, options: EndpointOptions) -> io::Result<Self> {
        Driver::new(UdpIo::bind(addr)?, options)
    }
}

impl<S: DatagramSocket> Driver<S> {
    /// A driver on `socket`.
    pub fn new(mut socket: S, mut options: EndpointOptions) -> io::Result<Self> {
        let poll = Poll::new()?;
        poll.registry().register(
            socket.source(),
            Token(0),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        if socket.gso() && options.max_gso_segments == 1 {
            options.max_gso_segments = GSO_SEGMENTS;
        }
        if !socket.gso() {
            options.max_gso_segments = 1;
        }
        Ok(Driver {
            endpoint: Endpoint::new(options),
            socket,
            poll,
            stats: DriverStats::default(),
        })
    }

    /// The endpoint, e.g. to configure roles before running.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The socket (e.g. an [`Impaired`](crate::impair::Impaired) wrapper's counters).
    pub fn socket(&self) -> &S {
        &self.socket
    }

    /// Driver counters.
    pub fn stats(&self) -> &DriverStats {
        &self.stats
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

    /// Send until the endpoint has nothing more or the socket is full;
    /// returns the transmit left pending in `buf`.
    fn flush(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        mut pending: Option<Transmit>,
    ) -> Option<Transmit> {
        loop {
            let t = match pending.take() {
                Some(t) => t,
                None => self.endpoint.poll_transmit(now, buf)?,
            };
            match self
                .socket
                .send(t.destination, &buf[..t.size], t.tos(), t.segment_size)
            {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stats.send_blocked += 1;
                    return Some(t);
                }
                Err(e) => {
                    self.stats.send_errors += 1;
                    tracing::debug!(error = %e, dest = %t.destination, "send failed");
                }
            }
        }
    }

    /// Run `app` until it is done or `stop` is set.
    pub fn run<A: App>(&mut self, app: &mut A, stop: &AtomicBool) -> io::Result<()> {
        let mut events = Events::with_capacity(16);
        let mut rx = vec![0u8; RECV_BUF];
        let mut tx = Vec::with_capacity(RECV_BUF);
        let mut pending: Option<Transmit> = None;
        let mut more_to_read = false;
        app.start(Instant::now(), &mut self.endpoint);
        loop {
            let now = Instant::now();
            self.endpoint.handle_timeout(now);
            self.deliver_events(now, app);
            pending = self.flush(now, &mut tx, pending);
            if app.is_done() && pending.is_none() && !self.endpoint.has_pending_responses() {
                return Ok(());
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let deadline = [self.endpoint.poll_timeout(), app.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let mut sleep = deadline.map_or(MAX_SLEEP, |d| {
                d.saturating_duration_since(now).min(MAX_SLEEP)
            });
            if more_to_read {
                sleep = Duration::ZERO;
            }
            match self.poll.poll(&mut events, Some(sleep)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            more_to_read = false;
            let mut got = 0;
            while got < RECV_BATCH {
                match self.socket.recv(&mut rx) {
                    Ok(meta) => {
                        got += 1;
                        let now = Instant::now();
                        self.endpoint
                            .handle_datagram(now, meta.from, meta.tos, &rx[..meta.len]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.stats.recv_errors += 1;
                        tracing::trace!(error = %e, "recv error");
                    }
                }
            }
            if got == RECV_BATCH {
                more_to_read = true;
            }
        }
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

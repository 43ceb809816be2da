//! The floor under any emulator built on quinn-proto: quinn-proto, rustls
//! and ring alone, moving a given number of datagrams between in-memory
//! endpoints, with nothing else on the path (no Tollgate transport layer,
//! no CCA adapter, no event queue, no router, no links).
//!
//! ```text
//! cargo build --release -p tollgate-transport --example quinn_floor
//! target/release/examples/quinn_floor [--datagrams N] [--conns C] [--queue Q] [--window BYTES]
//! ```
//!
//! `C` connections (default 10), each between its own client and server
//! endpoint as in `tollgate sim`, send one unidirectional stream of zeros
//! each until `N` datagrams (default 1,257,256: what `tollgate sim
//! tools/scenarios/bench-10-flows.toml` puts on its links, both directions)
//! have crossed. Every datagram is delivered on its own and the receiving
//! endpoint is then polled for transmits until it has none, which is how the
//! emulator drives a host after each arrival, so the receivers acknowledge
//! at quinn-proto's default frequency (every second ack-eliciting packet)
//! and the senders refill the window ACK by ACK. Real TLS 1.3 and AES-GCM
//! packet protection, quinn-proto's own NewReno, the default transport
//! settings but for stream and connection windows large enough never to
//! stall the senders (`--window`). The path is one FIFO that delivers a
//! datagram per 12 µs of virtual time (1,500 bytes at 1 Gbit/s) and drops
//! data datagrams while `--queue` of them wait (default 1,000: the
//! scenario's drop-tail buffer), so the windows saw-tooth as in the
//! emulator; when nothing is in flight, time jumps to the earliest timer.
//!
//! `scripts/bench-emulator --floor` runs it beside `tollgate sim` and ns-3
//! in the same invocation: ns-3's wall time over this floor's is the most
//! any quinn-proto-based emulator could reach on that machine.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use clap::Parser;
use quinn_proto::congestion::NewRenoConfig;
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
    Event, ServerConfig, StreamEvent, StreamId, TransportConfig, VarInt,
};
use tollgate_transport::tls::SelfSigned;

/// Bytes handed to a send stream per write.
const CHUNK: usize = 64 * 1024;
static ZEROS: [u8; CHUNK] = [0; CHUNK];
/// Virtual time per delivered datagram.
const STEP: Duration = Duration::from_micros(12);
/// Datagrams at most this long carry no stream data (ACK-only and the like).
const SMALL: usize = 100;

/// One end of a connection: its endpoint and the connection.
struct Host {
    ep: Endpoint,
    addr: SocketAddr,
    conn: Option<(ConnectionHandle, Connection)>,
    /// Client: the stream it writes. Server: the stream it reads.
    stream: Option<StreamId>,
}

/// Hosts `2i` (the client, which sends the data) and `2i + 1` (the
/// server) form connection `i`.
fn is_client(host: usize) -> bool {
    host.is_multiple_of(2)
}

/// The path between the hosts: one FIFO that delivers a datagram per
/// [`STEP`] of virtual time. Datagrams from clients (the data direction)
/// are dropped while `limit` of them wait, as at a drop-tail bottleneck, so
/// the senders' windows saw-tooth as in the emulator instead of growing
/// without bound.
struct Wire {
    /// (destination host, source address, bytes).
    fifo: VecDeque<(usize, SocketAddr, BytesMut)>,
    data_queued: u64,
    limit: u64,
    drops: u64,
}

impl Wire {
    /// Host `from` sends `data`; it goes to the other end of its connection.
    fn send(&mut self, from: usize, addr: SocketAddr, data: BytesMut) {
        if is_client(from) {
            if self.data_queued >= self.limit {
                self.drops += 1;
                return;
            }
            self.data_queued += 1;
        }
        self.fifo.push_back((from ^ 1, addr, data));
    }

    fn next(&mut self) -> Option<(usize, SocketAddr, BytesMut)> {
        let d = self.fifo.pop_front()?;
        if !is_client(d.0) {
            self.data_queued -= 1;
        }
        Some(d)
    }
}

/// The hosts, the path between them, and what crossed it.
struct Floor {
    hosts: Vec<Host>,
    wire: Wire,
    server_config: Arc<ServerConfig>,
    /// Scratch buffer for quinn-proto's transmits and responses.
    buf: Vec<u8>,
    /// Datagrams sent.
    datagrams: u64,
    /// Of which at most [`SMALL`] bytes.
    small: u64,
    /// Stream bytes the servers read.
    bytes_read: u64,
}

#[derive(Parser, Debug)]
#[command(
    about = "quinn-proto alone moving datagrams between in-memory endpoints: the floor under any emulator built on it (see the file's docs)"
)]
struct Args {
    /// Datagrams to send, both directions together (the default is what
    /// `tollgate sim tools/scenarios/bench-10-flows.toml` sends).
    #[arg(long, default_value_t = 1_257_256, value_parser = clap::value_parser!(u64).range(1..))]
    datagrams: u64,
    /// Connections, each between its own client and server endpoint.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    conns: u64,
    /// Data datagrams the path holds before it drops (a drop-tail buffer).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    queue: u64,
    /// Stream and connection flow-control windows, bytes.
    #[arg(long, default_value_t = 64 << 20, value_parser = clap::value_parser!(u64).range(1500..(1 << 62)))]
    window: u64,
}

fn main() {
    let Args {
        datagrams,
        conns,
        queue,
        window,
    } = Args::parse();
    let conns = conns as usize;
    let cert = SelfSigned::generate(&["floor.test"]).expect("certificate");
    let mut transport = TransportConfig::default();
    let w = VarInt::from_u64(window).expect("clap keeps --window below 2^62");
    transport
        .congestion_controller_factory(Arc::new(NewRenoConfig::default()))
        .stream_receive_window(w)
        .receive_window(w)
        .send_window(window)
        .max_idle_timeout(Some(VarInt::from_u32(600_000).into()));
    let transport = Arc::new(transport);
    let mut server_config = ServerConfig::with_crypto(cert.server_crypto().expect("server tls"));
    server_config.transport_config(transport.clone());
    let server_config = Arc::new(server_config);
    let mut client_config = ClientConfig::new(cert.client_crypto().expect("client tls"));
    client_config.transport_config(transport);
    let endpoint_config = Arc::new(EndpointConfig::default());

    let start = Instant::now();
    let mut now = start;
    // In connection order, client first (`is_client`).
    let mut hosts: Vec<Host> = Vec::new();
    for _ in 0..conns {
        for server in [false, true] {
            let n = hosts.len() as u32;
            let mut seed = [0; 32];
            seed[..4].copy_from_slice(&(n + 1).to_le_bytes());
            hosts.push(Host {
                ep: Endpoint::new(
                    endpoint_config.clone(),
                    server.then(|| server_config.clone()),
                    true,
                    Some(seed),
                ),
                addr: SocketAddr::from((Ipv4Addr::from(0x0a00_0001 + n), 4433)),
                conn: None,
                stream: None,
            });
        }
    }
    let mut floor = Floor {
        hosts,
        wire: Wire {
            fifo: VecDeque::new(),
            data_queued: 0,
            limit: queue,
            drops: 0,
        },
        server_config,
        buf: Vec::with_capacity(1500),
        datagrams: 0,
        small: 0,
        bytes_read: 0,
    };
    for i in 0..conns {
        let server = floor.hosts[2 * i + 1].addr;
        let c = &mut floor.hosts[2 * i];
        let conn =
            c.ep.connect(now, client_config.clone(), server, "floor.test")
                .expect("connect");
        c.conn = Some(conn);
        floor.step(2 * i, now);
    }

    let wall = Instant::now();
    while floor.datagrams < datagrams {
        match floor.wire.next() {
            Some((to, from, data)) => {
                now += STEP;
                floor.deliver(to, from, data, now);
                floor.step(to, now);
            }
            None => {
                // Nothing in flight: jump to the earliest timer.
                let next = floor
                    .hosts
                    .iter_mut()
                    .filter_map(|h| h.conn.as_mut().and_then(|(_, c)| c.poll_timeout()))
                    .min();
                let Some(t) = next else {
                    eprintln!(
                        "error: every connection is idle after {} datagrams",
                        floor.datagrams
                    );
                    std::process::exit(1);
                };
                now = now.max(t);
                for h in 0..floor.hosts.len() {
                    floor.step(h, now);
                }
            }
        }
    }
    let elapsed = wall.elapsed();
    println!(
        "quinn_floor: {} datagrams ({} of them at most {SMALL} bytes, {} dropped), {} connections, {:.1} MB of stream data read, {:.2} s wall ({:.0} ns per datagram), {:.1} s virtual",
        floor.datagrams,
        floor.small,
        floor.wire.drops,
        conns,
        floor.bytes_read as f64 / 1e6,
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e9 / floor.datagrams as f64,
        (now - start).as_secs_f64()
    );
}

impl Floor {
    /// Hand a datagram to host `to`'s endpoint and its connection.
    fn deliver(&mut self, to: usize, from: SocketAddr, data: BytesMut, now: Instant) {
        let h = &mut self.hosts[to];
        let buf = &mut self.buf;
        buf.clear();
        match h.ep.handle(now, from, None, None, data, buf) {
            Some(DatagramEvent::ConnectionEvent(_, ev)) => {
                if let Some((_, c)) = h.conn.as_mut() {
                    c.handle_event(ev);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                buf.clear();
                let conn =
                    h.ep.accept(incoming, now, buf, Some(self.server_config.clone()))
                        .expect("accept");
                h.conn = Some(conn);
            }
            Some(DatagramEvent::Response(t)) => {
                self.wire.send(to, h.addr, BytesMut::from(&buf[..t.size]));
            }
            None => {}
        }
    }

    /// Run host `i` at `now`: timers, endpoint events, the application, and
    /// every datagram it has to send.
    fn step(&mut self, i: usize, now: Instant) {
        let h = &mut self.hosts[i];
        let Some((ch, conn)) = h.conn.as_mut() else {
            return;
        };
        if conn.poll_timeout().is_some_and(|t| t <= now) {
            conn.handle_timeout(now);
        }
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(back) = h.ep.handle_event(*ch, ev) {
                conn.handle_event(back);
            }
        }
        while let Some(ev) = conn.poll() {
            if let Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) = ev {
                h.stream = conn.streams().accept(Dir::Uni);
            }
        }
        if is_client(i) {
            if h.stream.is_none() && !conn.is_handshaking() {
                h.stream = conn.streams().open(Dir::Uni);
            }
            if let Some(id) = h.stream {
                let mut s = conn.send_stream(id);
                while matches!(s.write_chunks(&mut [Bytes::from_static(&ZEROS)]), Ok(w) if w.bytes > 0)
                {
                }
            }
        } else if let Some(id) = h.stream {
            let mut r = conn.recv_stream(id);
            if let Ok(mut chunks) = r.read(false) {
                while let Ok(Some(c)) = chunks.next(usize::MAX) {
                    self.bytes_read += c.bytes.len() as u64;
                }
                let _ = chunks.finalize();
            };
        }
        loop {
            self.buf.clear();
            let Some(t) = conn.poll_transmit(now, 1, &mut self.buf) else {
                break;
            };
            self.datagrams += 1;
            if t.size <= SMALL {
                self.small += 1;
            }
            self.wire
                .send(i, h.addr, BytesMut::from(&self.buf[..t.size]));
        }
    }
}

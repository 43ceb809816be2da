//! Datagrams to a server `Endpoint`: a real client's, lost, cut, corrupted
//! or replayed, and garbage from other addresses.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tollgate_transport::tls::SelfSigned;
use tollgate_transport::{Admission, ConnectionOptions, Endpoint, EndpointOptions, Event};

use crate::Input;

/// Most connections the server holds: a handful of handshakes fill it.
const MAX_CONNECTIONS: usize = 3;
/// Datagrams kept for replay.
const HISTORY: usize = 64;

struct Fixture {
    server: Arc<quinn_proto::crypto::rustls::QuicServerConfig>,
    client: Arc<quinn_proto::crypto::rustls::QuicClientConfig>,
    start: Instant,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let cert = SelfSigned::generate(&["localhost"]).expect("certificate");
        Fixture {
            server: cert.server_crypto().expect("server crypto"),
            client: cert.client_crypto().expect("client crypto"),
            start: Instant::now(),
        }
    })
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

const SERVER: u16 = 4433;
const CLIENT: u16 = 5000;

/// Move what `ep` wants to send into `out` (at most 256 datagrams).
fn drain(ep: &mut Endpoint, now: Instant, out: &mut VecDeque<(SocketAddr, Vec<u8>)>) {
    let mut buf = Vec::new();
    for _ in 0..256 {
        let Some(t) = ep.poll_transmit(now, &mut buf) else {
            return;
        };
        assert!(t.size <= buf.len());
        out.push_back((t.destination, buf[..t.size].to_vec()));
    }
}

/// A QUIC server endpoint (limit [`MAX_CONNECTIONS`]) and one client, with
/// the fuzzer as the network between them.
///
/// Each operation takes the client's next datagram to the server intact,
/// drops it, cuts it, flips a byte of it, replays an earlier one from any
/// source port, sends a garbage datagram from another client, delivers the
/// server's datagrams to the client, starts another client connection, or
/// lets time pass (timers fire). The server must not panic, must hold no
/// more than its connection limit, and must not queue unbounded output.
///
/// The input's first byte picks the server's [`Admission`]: no address
/// validation, a Retry for every new client (`retry_threshold` 0) or once
/// one unvalidated handshake is in progress (1), so that the Retry tokens
/// the client echoes are cut, corrupted and replayed like any other
/// datagram; and with or without a two-handshake limit and a handshake
/// timeout.
pub fn quic_endpoint(data: &[u8]) {
    let fx = fixture();
    let mut now = fx.start;
    let mut input = Input::new(data);
    let policy = input.u8();
    let admission = Admission {
        retry_threshold: match policy % 3 {
            0 => None,
            n => Some(usize::from(n - 1)),
        },
        max_handshakes: if policy & 4 != 0 { 2 } else { usize::MAX },
        handshake_timeout: (policy & 8 != 0).then(|| Duration::from_millis(500)),
    };
    let options = |seed: u8| EndpointOptions {
        max_connections: MAX_CONNECTIONS,
        rng_seed: Some([seed; 32]),
        ..EndpointOptions::default()
    };
    let mut server = Endpoint::new(options(1));
    server.set_admission(admission);
    server
        .set_server(fx.server.clone(), ConnectionOptions::default())
        .expect("server config");
    let mut client = Endpoint::new(options(2));
    client.set_client(fx.client.clone());
    client
        .connect(now, addr(SERVER), "localhost", ConnectionOptions::default())
        .expect("connect");
    let mut to_server: VecDeque<(SocketAddr, Vec<u8>)> = VecDeque::new();
    let mut to_client: VecDeque<(SocketAddr, Vec<u8>)> = VecDeque::new();
    let mut history: Vec<Vec<u8>> = Vec::new();
    let mut opened = false;
    while !input.is_empty() {
        drain(&mut client, now, &mut to_server);
        let op = input.u8();
        let deliver = match op % 9 {
            0 => to_server.pop_front().map(|(_, d)| (CLIENT, d)),
            1 => {
                to_server.pop_front();
                None
            }
            2 => to_server.pop_front().map(|(_, mut d)| {
                let cut = usize::from(input.u16()) % (d.len() + 1);
                d.truncate(cut);
                (CLIENT, d)
            }),
            3 => to_server.pop_front().map(|(_, mut d)| {
                let at = usize::from(input.u16());
                let x = input.u8() | 1;
                if !d.is_empty() {
                    let i = at % d.len();
                    d[i] ^= x;
                }
                (CLIENT, d)
            }),
            4 => {
                let i = usize::from(input.u8());
                let port = CLIENT + u16::from(input.u8() & 3);
                (!history.is_empty()).then(|| (port, history[i % history.len()].clone()))
            }
            5 => {
                let len = usize::from(input.u16() % 1500);
                let port = 6000 + u16::from(input.u8());
                Some((port, input.bytes(len).to_vec()))
            }
            6 => {
                drain(&mut server, now, &mut to_client);
                while let Some((_, d)) = to_client.pop_front() {
                    client.handle_datagram(now, addr(SERVER), None, &d);
                }
                None
            }
            7 => {
                let _ =
                    client.connect(now, addr(SERVER), "localhost", ConnectionOptions::default());
                None
            }
            _ => {
                now += Duration::from_micros(u64::from(input.u16()) << (op >> 4));
                client.handle_timeout(now);
                server.handle_timeout(now);
                None
            }
        };
        if let Some((port, d)) = deliver {
            server.handle_datagram(now, addr(port), Some(input.u8() & 3), &d);
            if history.len() < HISTORY {
                history.push(d);
            }
        }
        while let Some(ev) = server.poll_event() {
            if let Event::Readable(ch, id) = ev {
                let _ = server.read(ch, id, 1 << 16, |_, _| {});
            }
        }
        while let Some(ev) = client.poll_event() {
            if let (Event::Connected(ch), false) = (ev, opened) {
                opened = true;
                if let Ok(Some(id)) = client.open(ch, tollgate_transport::Dir::Bi) {
                    let _ = client.write(ch, id, b"TGB1D\0\0\0\0\0\0\x10\0\0\0\0\0\0\0\0\0");
                }
            }
        }
        assert!(
            server.connection_count() <= MAX_CONNECTIONS,
            "{} connections, limit {MAX_CONNECTIONS}",
            server.connection_count()
        );
        drain(&mut server, now, &mut to_client);
        // The client and the fuzzer only ever make a bounded amount of output.
        to_client.truncate(4096);
        to_server.truncate(4096);
    }
}

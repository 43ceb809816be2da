//! How a server admits new connections ([`Admission`]): Retry under load,
//! the handshake cap, the handshake deadline and the idle timeout, each
//! counted by reason in `EndpointStats`. Endpoints wired together in memory
//! with a virtual clock, so every count is exact.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::*;
use tollgate_transport::{
    Admission, CloseReason, ConnectionOptions, Endpoint, EndpointOptions, EndpointStats, Event,
};

const SERVER: &str = "10.0.0.2:2000";

struct Net {
    server: Endpoint,
    clients: Vec<(SocketAddr, Endpoint)>,
    now: Instant,
}

impl Net {
    fn new(max_connections: usize, admission: Admission, idle: Duration) -> Net {
        let certs = certs();
        let mut server = Endpoint::new(EndpointOptions {
            max_connections,
            rng_seed: Some([3; 32]),
            ..Default::default()
        });
        let defaults = ConnectionOptions {
            idle_timeout: idle,
            ..Default::default()
        };
        server
            .set_server(certs.server_crypto().unwrap(), defaults)
            .unwrap();
        server.set_admission(admission);
        let now = Instant::now();
        let clients = (0..8u16)
            .map(|i| {
                let addr: SocketAddr = format!("10.0.0.1:{}", 1000 + i).parse().unwrap();
                let mut c = Endpoint::new(EndpointOptions {
                    rng_seed: Some([10 + i as u8; 32]),
                    ..Default::default()
                });
                c.set_client(certs.client_crypto().unwrap());
                (addr, c)
            })
            .collect();
        Net {
            server,
            clients,
            now,
        }
    }

    /// Client `i` starts a connection.
    fn connect(&mut self, i: usize) {
        let now = self.now;
        self.clients[i]
            .1
            .connect(
                now,
                SERVER.parse().unwrap(),
                "localhost",
                ConnectionOptions::default(),
            )
            .unwrap();
    }

    /// Every client's pending datagrams to the server; returns how many.
    fn up(&mut self) -> usize {
        let (now, mut n, mut buf) = (self.now, 0, Vec::new());
        for (addr, c) in &mut self.clients {
            while let Some(t) = c.poll_transmit(now, &mut buf) {
                for d in buf[..t.size].chunks(t.segment_size.unwrap_or(t.size)) {
                    self.server
                        .handle_datagram_owned(now, *addr, None, BytesMut::from(d));
                    n += 1;
                }
            }
        }
        n
    }

    /// The server's pending datagrams to their clients (`deliver` false:
    /// lost); returns how many.
    fn down(&mut self, deliver: bool) -> usize {
        let (now, mut n, mut buf) = (self.now, 0, Vec::new());
        let sa: SocketAddr = SERVER.parse().unwrap();
        while let Some(t) = self.server.poll_transmit(now, &mut buf) {
            let (_, c) = self
                .clients
                .iter_mut()
                .find(|(a, _)| *a == t.destination)
                .expect("a transmit to a client");
            for d in buf[..t.size].chunks(t.segment_size.unwrap_or(t.size)) {
                if deliver {
                    c.handle_datagram_owned(now, sa, None, BytesMut::from(d));
                }
                n += 1;
            }
        }
        n
    }

    /// Advance the clock by `step` and fire every timer.
    fn tick(&mut self, step: Duration) {
        self.now += step;
        self.server.handle_timeout(self.now);
        for (_, c) in &mut self.clients {
            c.handle_timeout(self.now);
        }
    }

    /// Exchange everything until quiet (at most `rounds` round trips of 1 ms).
    fn settle(&mut self, rounds: usize) {
        for _ in 0..rounds {
            let moved = self.up() + self.down(true);
            self.tick(Duration::from_millis(1));
            if moved == 0 {
                break;
            }
        }
    }

    /// Per client: connected, or told it was refused.
    fn outcomes(&mut self) -> (usize, usize) {
        let (mut connected, mut refused) = (0, 0);
        for (_, c) in &mut self.clients {
            while let Some(ev) = c.poll_event() {
                match ev {
                    Event::Connected(_) => connected += 1,
                    Event::Closed(_, CloseReason::Other(why)) if why.contains("refused") => {
                        refused += 1
                    }
                    _ => {}
                }
            }
        }
        (connected, refused)
    }

    fn stats(&self) -> EndpointStats {
        self.server.endpoint_stats().clone()
    }
}

#[test]
fn retry_threshold_zero_validates_every_client_and_costs_one_round_trip() {
    let admission = Admission {
        retry_threshold: Some(0),
        ..Admission::default()
    };
    let mut net = Net::new(16, admission, Duration::from_secs(30));
    net.connect(0);
    net.up();
    // The first Initial gets a Retry and no state.
    assert_eq!(net.server.connection_count(), 0);
    assert_eq!(net.stats().retry_sent, 1);
    net.settle(50);
    assert_eq!(net.outcomes(), (1, 0));
    let st = net.stats();
    assert_eq!((st.retry_sent, st.accepted, st.refused), (1, 1, 0));
    assert_eq!(net.server.handshakes_in_progress(), (0, 0));
}

#[test]
fn beyond_the_threshold_unvalidated_clients_get_a_retry_and_all_connect() {
    let admission = Admission {
        retry_threshold: Some(3),
        ..Admission::default()
    };
    let mut net = Net::new(16, admission, Duration::from_secs(30));
    for i in 0..8 {
        net.connect(i);
    }
    // All eight first Initials before the server answers any.
    net.up();
    let st = net.stats();
    assert_eq!((st.accepted, st.retry_sent), (3, 5));
    assert_eq!(net.server.handshakes_in_progress(), (3, 3));
    net.settle(50);
    // The five come back with their tokens (validated, not retried again).
    assert_eq!(net.outcomes(), (8, 0));
    let st = net.stats();
    assert_eq!((st.accepted, st.retry_sent, st.refused), (8, 5, 0));
    assert_eq!(net.server.handshakes_in_progress(), (0, 0));
}

#[test]
fn the_handshake_cap_and_the_connection_limit_refuse_by_reason() {
    let admission = Admission {
        max_handshakes: 2,
        ..Admission::default()
    };
    let mut net = Net::new(3, admission, Duration::from_secs(30));
    for i in 0..5 {
        net.connect(i);
    }
    net.up();
    let st = net.stats();
    assert_eq!((st.accepted, st.refused_handshakes, st.refused), (2, 3, 0));
    net.settle(50);
    assert_eq!(net.outcomes(), (2, 3));
    // Two held, one slot left: one more is accepted, the others refused as full.
    for i in 5..8 {
        net.connect(i);
    }
    net.settle(50);
    assert_eq!(net.outcomes(), (1, 2));
    let st = net.stats();
    assert_eq!((st.accepted, st.refused_handshakes, st.refused), (3, 3, 2));
}

#[test]
fn half_open_and_vanished_connections_time_out_and_are_counted() {
    let admission = Admission {
        handshake_timeout: Some(Duration::from_secs(2)),
        ..Admission::default()
    };
    let mut net = Net::new(16, admission, Duration::from_secs(5));
    // Client 0 completes its handshake, then vanishes.
    net.connect(0);
    net.settle(50);
    assert_eq!(net.outcomes(), (1, 0));
    // Clients 1-3 send their first Initial and never hear back.
    for i in 1..4 {
        net.connect(i);
    }
    net.up();
    net.down(false);
    assert_eq!(net.server.handshakes_in_progress(), (3, 3));
    assert_eq!(net.server.connection_count(), 4);
    let mut closed = Vec::new();
    for _ in 0..200 {
        net.tick(Duration::from_millis(50));
        net.down(false);
        while let Some(ev) = net.server.poll_event() {
            if let Event::Closed(_, reason) = ev {
                closed.push((net.now, reason));
            }
        }
        // The clients are gone: nothing of theirs reaches the server.
        for (_, c) in &mut net.clients {
            while c.poll_transmit(net.now, &mut Vec::new()).is_some() {}
        }
    }
    let st = net.stats();
    assert_eq!((st.timed_out_handshake, st.timed_out_idle), (3, 1));
    assert_eq!(net.server.handshakes_in_progress(), (0, 0));
    assert_eq!(net.server.connection_count(), 0, "every connection drained");
    assert_eq!(closed.len(), 4);
    assert!(closed.iter().all(|(_, r)| *r == CloseReason::TimedOut));
}

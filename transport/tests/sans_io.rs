//! Two endpoints wired together in memory, no sockets: the zero-copy entry
//! points (`Endpoint::write_bytes`, `Endpoint::handle_datagram_owned`) move a
//! stream intact.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::*;
use tollgate_transport::bulk::{pattern_slice, Receiver};
use tollgate_transport::{CloseReason, ConnectionOptions, Dir, Endpoint, EndpointOptions, Event};

const SIZE: u64 = 1 << 20;

/// Move every pending datagram from `from` to `to`, split GSO batches, and
/// feed them by value.
fn shuttle(now: Instant, from: &mut Endpoint, from_addr: SocketAddr, to: &mut Endpoint) -> usize {
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let seg = t.segment_size.unwrap_or(t.size);
        for d in buf[..t.size].chunks(seg) {
            to.handle_datagram_owned(now, from_addr, Some(t.tos()), BytesMut::from(d));
            n += 1;
        }
    }
    n
}

#[test]
fn write_bytes_and_owned_datagrams_move_a_stream_intact() {
    let certs = certs();
    let (ca, sa): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.2:2000".parse().unwrap(),
    );
    let options = EndpointOptions {
        max_gso_segments: 10,
        rng_seed: Some([7; 32]),
        ..Default::default()
    };
    let mut client = Endpoint::new(options.clone());
    client.set_client(certs.client_crypto().unwrap());
    let mut server = Endpoint::new(options);
    server
        .set_server(certs.server_crypto().unwrap(), ConnectionOptions::default())
        .unwrap();
    let mut now = Instant::now();
    let ch = client
        .connect(now, sa, "localhost", ConnectionOptions::default())
        .unwrap();
    let mut stream = None;
    let mut sent = 0u64;
    let mut finished = false;
    let mut rx = Receiver::new(0);
    for _ in 0..100_000 {
        now += Duration::from_micros(50);
        client.handle_timeout(now);
        server.handle_timeout(now);
        while let Some(ev) = client.poll_event() {
            if let Event::Connected(c) = ev {
                stream = client.open(c, Dir::Uni).unwrap();
            }
        }
        if let (Some(id), false) = (stream, finished) {
            while sent < SIZE {
                let n = (SIZE - sent).min(20_000) as usize;
                let chunk = Bytes::from_static(pattern_slice(sent, n));
                let w = client.write_bytes(ch, id, chunk).unwrap();
                if w == 0 {
                    break;
                }
                sent += w as u64;
            }
            if sent == SIZE {
                client.finish(ch, id).unwrap();
                finished = true;
            }
        }
        while let Some(ev) = server.poll_event() {
            if let Event::StreamOpened(sc, id) | Event::Readable(sc, id) = ev {
                if !rx.finished {
                    rx.pump(&mut server, sc, id).unwrap();
                }
            }
        }
        let moved =
            shuttle(now, &mut client, ca, &mut server) + shuttle(now, &mut server, sa, &mut client);
        if rx.finished && moved == 0 {
            break;
        }
    }
    assert!(
        rx.finished,
        "stream did not finish: {} of {SIZE}",
        rx.received
    );
    assert_eq!(rx.received, SIZE);
    assert_eq!(rx.mismatches, 0);
    let report = client.stats(now, ch).unwrap();
    assert_eq!(
        report.app_tx_bytes, SIZE,
        "write_bytes counts toward app_tx"
    );
}

/// A full server refuses every further client, and each refused client
/// learns it, also when the server refuses several in one go (before it
/// sends anything): each refusal is its own datagram to its own client.
#[test]
fn every_client_a_full_server_refuses_is_told_so() {
    let certs = certs();
    let sa: SocketAddr = "10.0.0.2:2000".parse().unwrap();
    let mut server = Endpoint::new(EndpointOptions {
        max_connections: 1,
        rng_seed: Some([3; 32]),
        ..Default::default()
    });
    server
        .set_server(certs.server_crypto().unwrap(), ConnectionOptions::default())
        .unwrap();
    let now = Instant::now();
    let mut clients: Vec<(SocketAddr, Endpoint)> = (0..4u16)
        .map(|i| {
            let addr: SocketAddr = format!("10.0.0.1:{}", 1000 + i).parse().unwrap();
            let mut c = Endpoint::new(EndpointOptions {
                rng_seed: Some([10 + i as u8; 32]),
                ..Default::default()
            });
            c.set_client(certs.client_crypto().unwrap());
            c.connect(now, sa, "localhost", ConnectionOptions::default())
                .unwrap();
            (addr, c)
        })
        .collect();
    // Every client's first flight reaches the server before it answers.
    for (addr, c) in &mut clients {
        shuttle(now, c, *addr, &mut server);
    }
    let mut buf = Vec::new();
    while let Some(t) = server.poll_transmit(now, &mut buf) {
        let (_, c) = clients
            .iter_mut()
            .find(|(a, _)| *a == t.destination)
            .expect("a transmit to a client");
        let seg = t.segment_size.unwrap_or(t.size);
        for d in buf[..t.size].chunks(seg) {
            c.handle_datagram_owned(now, sa, Some(t.tos()), BytesMut::from(d));
        }
    }
    let mut refused = 0;
    for (_, c) in &mut clients {
        while let Some(ev) = c.poll_event() {
            if matches!(&ev, Event::Closed(_, CloseReason::Other(why)) if why.contains("refused")) {
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 3, "one accepted, three told they were refused");
}

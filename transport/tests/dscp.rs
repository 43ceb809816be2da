//! DSCP variant marking is on the wire when enabled and absent when not.

mod common;

use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use common::*;
use tollgate_cca::VariantId;
use tollgate_transport::{udp, ConnectionOptions, Endpoint, EndpointOptions};

fn marked(spec: &str) -> ConnectionOptions {
    ConnectionOptions {
        mark_dscp: true,
        ..ConnectionOptions::with_cca(spec)
    }
}

/// The TOS bytes of the first datagrams a client sends to a plain receiving socket.
fn sniff_client(options: ConnectionOptions) -> Vec<u8> {
    let certs = certs();
    let sniffer = udp::bind(loopback()).unwrap();
    let dest = sniffer.local_addr().unwrap();
    let sender = udp::bind(loopback()).unwrap();
    let mut ep = Endpoint::new(EndpointOptions::default());
    ep.set_client(certs.client_crypto().unwrap());
    let now = Instant::now();
    ep.connect(now, dest, "localhost", options).unwrap();
    let mut buf = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        udp::send(
            sender.as_raw_fd(),
            t.destination,
            &buf[..t.size],
            t.tos(),
            t.segment_size,
        )
        .unwrap();
    }
    let mut tos = Vec::new();
    let mut rx = [0u8; 2048];
    let give_up = Instant::now() + Duration::from_secs(2);
    while tos.is_empty() && Instant::now() < give_up {
        loop {
            match udp::recv(sniffer.as_raw_fd(), &mut rx) {
                Ok(m) => tos.push(m.tos.expect("kernel reports TOS")),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    tos
}

#[test]
fn marked_client_packets_carry_the_variant_dscp() {
    let tos = sniff_client(marked("taxed(cubic)"));
    assert!(!tos.is_empty());
    let want = VariantId::CUBIC.taxed().dscp();
    assert_eq!(want, 34);
    assert!(tos.iter().all(|t| t >> 2 == want), "{tos:?}");
}

#[test]
fn unmarked_client_packets_carry_dscp_zero() {
    let tos = sniff_client(ConnectionOptions::with_cca("taxed(cubic)"));
    assert!(!tos.is_empty());
    assert!(tos.iter().all(|t| t >> 2 == 0), "{tos:?}");
}

#[test]
fn marking_is_visible_end_to_end_per_direction() {
    let certs = certs();
    // The server marks (libra = 3), the client does not.
    let server = start_server(&certs, marked("libra"));
    let r = run_client(&certs, server.addr, upload(256 << 10), marked("newreno"));
    assert_intact("marked upload", &r, 256 << 10);
    let client_view = r.report.unwrap();
    assert_eq!(client_view.dscp_marking, Some(VariantId::NEWRENO.dscp()));
    let seen = client_view.peer_dscp_seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, VariantId::LIBRA.dscp());

    let r = run_client(
        &certs,
        server.addr,
        upload(256 << 10),
        ConnectionOptions::default(),
    );
    assert_intact("unmarked upload", &r, 256 << 10);
    let (_, app) = server.stop();
    let by_client: Vec<_> = app
        .summary
        .reports
        .iter()
        .map(|r| r.peer_dscp_seen())
        .collect();
    assert_eq!(by_client.len(), 2);
    // First client marked newreno (1) on every datagram, second marked nothing.
    assert_eq!(by_client[0].len(), 1, "{by_client:?}");
    assert_eq!(by_client[0][0].0, VariantId::NEWRENO.dscp());
    assert!(by_client[0][0].1 > 10);
    assert_eq!(by_client[1].len(), 1, "{by_client:?}");
    assert_eq!(by_client[1][0].0, 0);
}

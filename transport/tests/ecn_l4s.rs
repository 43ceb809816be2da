//! ECN for L4S: a Prague sender marks its datagrams ECT(1), and the CE marks
//! a queue puts on them come back to the algorithm as counts from the
//! peer's ACK frames (`on_ecn_counts`) and as ECN-CE congestion events,
//! without quinn-proto's ECN validation turning ECN off. A CUBIC sender keeps
//! ECT(0). Two endpoints wired in memory; the "queue" marks every
//! `MARK_EVERY`-th ECN-capable datagram from the client CE.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::*;
use tollgate_transport::bulk::{pattern_slice, Receiver};
use tollgate_transport::{
    ConnReport, ConnectionHandle, ConnectionOptions, Dir, Endpoint, EndpointOptions, Event,
};

const SIZE: u64 = 2 << 20;
const MARK_EVERY: u64 = 10;

/// What the client sent, by the ECN bits of its TOS byte.
#[derive(Debug, Default)]
struct Seen {
    not_ect: u64,
    ect0: u64,
    ect1: u64,
    /// ECT(1) datagrams among the last 50 the client sent.
    last_ect1: Vec<bool>,
    /// Datagrams this test marked CE.
    marked: u64,
}

/// Move every datagram from `from` to `to`; with `seen`, count the ECN
/// codepoints and mark every `MARK_EVERY`-th ECN-capable datagram CE.
fn shuttle(
    now: Instant,
    from: &mut Endpoint,
    from_addr: SocketAddr,
    to: &mut Endpoint,
    mut seen: Option<&mut Seen>,
) -> usize {
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let seg = t.segment_size.unwrap_or(t.size);
        for d in buf[..t.size].chunks(seg) {
            let mut tos = t.tos();
            if let Some(seen) = seen.as_deref_mut() {
                match tos & 0b11 {
                    0b00 => seen.not_ect += 1,
                    0b10 => seen.ect0 += 1,
                    0b01 => seen.ect1 += 1,
                    _ => {}
                }
                seen.last_ect1.push(tos & 0b11 == 0b01);
                if seen.last_ect1.len() > 50 {
                    seen.last_ect1.remove(0);
                }
                if tos & 0b11 != 0 && (seen.ect0 + seen.ect1) % MARK_EVERY == 0 {
                    tos |= 0b11;
                    seen.marked += 1;
                }
            }
            to.handle_datagram_owned(now, from_addr, Some(tos), BytesMut::from(d));
            n += 1;
        }
    }
    n
}

/// Upload `SIZE` bytes from a client running `cca`; the final report and what was seen.
fn upload(cca: &str) -> (ConnReport, Seen) {
    let certs = certs();
    let (ca, sa): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.2:2000".parse().unwrap(),
    );
    let options = EndpointOptions {
        rng_seed: Some([5; 32]),
        ..Default::default()
    };
    let mut client = Endpoint::new(options.clone());
    client.set_client(certs.client_crypto().unwrap());
    let mut server = Endpoint::new(options);
    server
        .set_server(certs.server_crypto().unwrap(), ConnectionOptions::default())
        .unwrap();
    let mut now = Instant::now();
    let conn = ConnectionOptions {
        cca: cca.to_string(),
        ..Default::default()
    };
    let ch: ConnectionHandle = client.connect(now, sa, "localhost", conn).unwrap();
    let mut seen = Seen::default();
    let mut stream = None;
    let mut sent = 0u64;
    let mut finished = false;
    let mut rx = Receiver::new(0);
    for _ in 0..200_000 {
        now += Duration::from_millis(5);
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
                let w = client
                    .write_bytes(ch, id, Bytes::from_static(pattern_slice(sent, n)))
                    .unwrap();
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
        // Server to client first, so that what the client sends now is
        // answered one step later: a 5 ms round trip.
        let moved = shuttle(now, &mut server, sa, &mut client, None)
            + shuttle(now, &mut client, ca, &mut server, Some(&mut seen));
        if rx.finished && moved == 0 {
            break;
        }
    }
    assert!(
        rx.finished,
        "upload did not finish: {} of {SIZE}",
        rx.received
    );
    assert_eq!(rx.mismatches, 0);
    (client.stats(now, ch).unwrap(), seen)
}

#[test]
fn prague_sends_ect1_and_receives_the_ce_counts() {
    let (report, seen) = upload("prague");
    let cca = &report.cca;
    eprintln!(
        "{seen:?}; reported {} ECN-capable, {} CE; {} ECN-CE events; {:?}",
        cca.ecn_ect_reported, cca.ecn_ce_reported, cca.ecn_events, cca.stats
    );
    assert_eq!(seen.ect0, 0, "a Prague sender never sends ECT(0): {seen:?}");
    assert!(seen.ect1 > 1000, "{seen:?}");
    // ECN stays on to the end: validation accepted the peer's ECT(1) counts.
    assert!(
        seen.last_ect1.iter().all(|&e| e),
        "ECN was turned off: {seen:?}"
    );
    // The algorithm got the counts: about every datagram, and the CE marks
    // (those reported in ACK frames that quinn examines; the last ones may
    // never be).
    assert!(
        cca.ecn_ect_reported >= seen.ect1 * 9 / 10 && cca.ecn_ect_reported <= seen.ect1,
        "reported {} of {} ECT(1) datagrams",
        cca.ecn_ect_reported,
        seen.ect1
    );
    assert!(
        cca.ecn_ce_reported >= seen.marked * 9 / 10 && cca.ecn_ce_reported <= seen.marked,
        "reported {} CE of {} marked",
        cca.ecn_ce_reported,
        seen.marked
    );
    assert!(cca.ecn_events > 0);
    // alpha follows the marked fraction (1 in MARK_EVERY), down from 1.
    let alpha = cca.stats.number("alpha").unwrap();
    assert!(
        alpha > 0.5 / MARK_EVERY as f64 && alpha < 0.5,
        "alpha {alpha}"
    );
}

#[test]
fn cubic_keeps_ect0() {
    let (report, seen) = upload("cubic");
    assert_eq!(seen.ect1, 0, "{seen:?}");
    assert!(seen.ect0 > 1000, "{seen:?}");
    assert!(seen.last_ect1.iter().all(|&e| !e));
    assert!(report.cca.ecn_ce_reported > 0 && report.cca.ecn_events > 0);
}

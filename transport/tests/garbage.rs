//! A peer spraying garbage datagrams at the server does not disturb the
//! server's real connections; the garbage is counted and dropped.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use tollgate_transport::ConnectionOptions;

fn garbage(seed: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed as u8
        })
        .collect()
}

#[test]
fn garbage_peer_does_not_disturb_other_connections() {
    let certs = certs();
    let server = start_server(&certs, ConnectionOptions::with_cca("cubic"));
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let sprayer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut seed = 0x1234_5678_9abc_def1u64;
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) || sent < 2000 {
                let kind = sent % 4;
                let len = [1, 40, 1200, 1350][kind as usize];
                let mut d = garbage(&mut seed, len);
                match kind {
                    // Looks like a QUIC v1 Initial (long header, version 1).
                    2 => {
                        d[0] = 0xC3;
                        d[1..5].copy_from_slice(&1u32.to_be_bytes());
                        d[5] = 8;
                    }
                    // Looks like a short-header packet.
                    3 => d[0] = 0x40 | (d[0] & 0x3f),
                    _ => {}
                }
                let _ = s.send_to(&d, addr);
                sent += 1;
                if sent.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
            sent
        })
    };
    let results: Vec<_> = (0..2)
        .map(|_| {
            let certs = certs.clone();
            std::thread::spawn(move || {
                run_client(
                    &certs,
                    addr,
                    download(1 << 20),
                    ConnectionOptions::default(),
                )
            })
        })
        .collect();
    for r in results {
        assert_intact("download under garbage", &r.join().unwrap(), 1 << 20);
    }
    stop.store(true, Ordering::Relaxed);
    let sprayed = sprayer.join().unwrap();
    let (mut driver, app) = server.stop();
    let stats = driver.endpoint().endpoint_stats().clone();
    assert!(sprayed >= 2000);
    assert_eq!(app.summary.transfers, 2);
    assert_eq!(
        stats.accepted, 2,
        "garbage created no connections: {stats:?}"
    );
    assert!(
        stats.datagrams_dropped + stats.accept_failed + stats.responses >= sprayed / 2,
        "garbage was dropped or answered statelessly: {stats:?} of {sprayed}"
    );
    assert_eq!(driver.endpoint().connection_count(), 0);
}

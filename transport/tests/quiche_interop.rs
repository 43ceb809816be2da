//! Interoperability with quiche, an independent QUIC implementation
//! (feature `quiche`): `cargo test -p tollgate-transport --features quiche`.
//!
//! For each Tollgate-side congestion controller (newreno, cubic, libra,
//! taxed(cubic)):
//!
//! - **quiche client ← Tollgate server**: quiche downloads [`SIZE`] bytes; the
//!   Tollgate server sends with the CCA under test.
//! - **Tollgate client ↔ quiche server**: the Tollgate client (CCA under test)
//!   downloads [`SIZE`] bytes (quiche sends, with its own CUBIC), then uploads
//!   [`SIZE`] bytes (Tollgate's CCA sends); the quiche server verifies the
//!   upload byte by byte and replies with the count it received (the bulk
//!   protocol's upload reply), and its totals come back when it is finished.
//!
//! Every byte is checked against the bulk pattern on arrival, on both sides.
//! The quiche client does not verify the Tollgate server's self-signed
//! certificate (`verify_peer(false)`); the Tollgate client verifies the quiche
//! server's.
//!
//! ## Libra's capacity source against quiche
//!
//! quiche supports neither the ACK-frequency extension nor its `min_ack_delay`
//! transport parameter, so a Tollgate Libra sender cannot ask it for one ACK per
//! packet: quinn-proto sends no `ACK_FREQUENCY` frame (asserted below), and
//! quiche acknowledges everything that arrived since its previous send in one
//! ACK. Back-to-back probe pairs then mostly share an ACK (zero dispersion,
//! rejected), and Libra takes its capacity from the **delivery-rate** estimate
//! (`capacity_source = "delivery-rate"` in the CCA's stats). CapProbe can still
//! converge when quiche's receive loop happens to acknowledge the two packets of
//! enough pairs separately, so the tests accept `capprobe` too, and print
//! what they saw; `window` (no delivery-rate interval completed) or
//! `configured` (no capacity was configured) would be wrong.
#![cfg(feature = "quiche")]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::*;
use tollgate_cca::StatValue;
use tollgate_transport::bulk::{BulkClient, BulkResult, Request};
use tollgate_transport::driver::spawn;
use tollgate_transport::quiche_peer::{self, PeerOptions, QuicheServer};
use tollgate_transport::tls::SelfSigned;
use tollgate_transport::{ConnReport, ConnectionOptions, Driver, EndpointOptions};

/// Bytes per transfer.
const SIZE: u64 = 2 << 20;
/// Wall-clock bound of one transfer.
const TRANSFER_LIMIT: Duration = Duration::from_secs(10);

/// The transfers are CPU-bound on loopback: run one test at a time so the
/// time bounds hold on a small CI machine.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn peer_options(time_limit: Duration) -> PeerOptions {
    PeerOptions {
        time_limit,
        ..PeerOptions::default()
    }
}

/// A Tollgate client transfer bounded by [`TRANSFER_LIMIT`].
fn tollgate_client(
    certs: &SelfSigned,
    server: SocketAddr,
    request: Request,
    options: ConnectionOptions,
) -> (BulkResult, Duration) {
    let mut driver = Driver::bind(loopback(), EndpointOptions::default()).unwrap();
    driver.endpoint().set_client(certs.client_crypto().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let handle = spawn(
        driver,
        BulkClient::new(server, "localhost", request, options),
        stop.clone(),
    );
    while !handle.is_finished() && t0.elapsed() < TRANSFER_LIMIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let (_, app) = handle.join().unwrap().unwrap();
    (app.result, t0.elapsed())
}

fn capacity_source(report: &ConnReport) -> Option<&'static str> {
    report
        .cca
        .stats
        .details
        .iter()
        .find_map(|(k, v)| match (k, v) {
            (&"capacity_source", StatValue::Text(s)) => Some(*s),
            _ => None,
        })
}

/// Checks on the report of a Tollgate connection that sent `SIZE` bytes to quiche.
fn assert_sender_report(what: &str, spec: &str, report: &ConnReport) {
    assert_eq!(report.cca.spec, spec, "{what}");
    assert!(
        report.cca.acked_bytes >= SIZE,
        "{what}: the CCA saw quiche's ACKs ({} bytes acked)",
        report.cca.acked_bytes
    );
    assert!(report.quic.frame_rx.acks > 0, "{what}: ACK frames received");
    assert!(!report.rtt_us.is_empty(), "{what}: RTT samples recorded");
    assert_eq!(
        report.quic.frame_tx.ack_frequency, 0,
        "{what}: quiche does not support ACK-frequency, so none is sent"
    );
    if spec.contains("libra") {
        let source = capacity_source(report);
        eprintln!("{what}: libra capacity source against quiche: {source:?}");
        assert!(
            matches!(source, Some("delivery-rate" | "capprobe")),
            "{what}: capacity source {source:?}"
        );
    } else {
        assert_eq!(capacity_source(report), None, "{what}");
    }
}

/// quiche client downloads from a Tollgate server sending with `spec`.
fn quiche_client_downloads_from_tollgate(spec: &str) {
    let _one_at_a_time = serial();
    let what = format!("quiche client <- tollgate server ({spec})");
    let certs = certs();
    let server = start_server(&certs, ConnectionOptions::with_cca(spec));
    let t0 = Instant::now();
    let r = quiche_peer::run_client(
        server.addr,
        "localhost",
        download(SIZE),
        &peer_options(TRANSFER_LIMIT),
    );
    let wall = t0.elapsed();
    eprintln!("{what}: {:?}, {:?}", wall, r.stats);
    assert_eq!(r.error, None, "{what}: {r:?}");
    assert!(r.established, "{what}: handshake with ALPN tollgate-bulk");
    assert!(r.complete, "{what}: {r:?}");
    assert_eq!(r.bytes, SIZE, "{what}");
    assert_eq!(r.mismatches, 0, "{what}");
    assert!(r.closed_cleanly(), "{what}: {:?}", r.stats);
    assert!(wall <= TRANSFER_LIMIT, "{what}: took {wall:?}");

    let (_driver, app) = server.stop();
    let s = &app.summary;
    assert_eq!(s.transfers, 1, "{what}");
    assert_eq!(s.bytes_sent, SIZE, "{what}");
    assert_eq!(s.bad_requests, 0, "{what}");
    assert_eq!(s.clean_closes, 1, "{what}: quiche closed with code 0");
    assert_eq!(s.reports.len(), 1, "{what}: the connection drained");
    let report = &s.reports[0];
    assert_eq!(report.app_tx_bytes, SIZE, "{what}");
    assert_sender_report(&what, spec, report);
}

/// A Tollgate client with `spec` downloads from and uploads to a quiche server.
fn tollgate_client_with_quiche_server(spec: &str) {
    let _one_at_a_time = serial();
    let certs = certs();
    // Two transfers plus slack: the server's own bound.
    let server = QuicheServer::start(loopback(), &certs, peer_options(3 * TRANSFER_LIMIT))
        .expect("quiche server");
    let addr = server.local_addr();

    let what = format!("tollgate client ({spec}) <- quiche server (quiche CUBIC sends)");
    let (down, wall) = tollgate_client(
        &certs,
        addr,
        download(SIZE),
        ConnectionOptions::with_cca(spec),
    );
    eprintln!("{what}: {wall:?}");
    assert_intact(&what, &down, SIZE);
    assert!(wall <= TRANSFER_LIMIT, "{what}: took {wall:?}");
    let report = down.report.as_ref().unwrap();
    assert_eq!(report.app_rx_bytes, SIZE, "{what}");

    let what = format!("tollgate client ({spec}) -> quiche server ({spec} sends)");
    let (up, wall) = tollgate_client(
        &certs,
        addr,
        upload(SIZE),
        ConnectionOptions::with_cca(spec),
    );
    eprintln!("{what}: {wall:?}");
    assert_intact(&what, &up, SIZE);
    assert!(wall <= TRANSFER_LIMIT, "{what}: took {wall:?}");
    let report = up.report.as_ref().unwrap();
    // A v2 request without a server CCA: 21 bytes plus its length byte.
    assert_eq!(
        report.app_tx_bytes,
        SIZE + tollgate_transport::bulk::REQUEST_LEN as u64 + 1,
        "{what}: request + data"
    );
    assert_sender_report(&what, spec, report);

    let s = server.finish().expect("quiche server summary");
    eprintln!("quiche server ({spec}): {s:?}");
    assert!(!s.hit_time_limit, "{s:?}");
    assert_eq!(s.accepted, 2, "{s:?}");
    assert_eq!(s.transfers, 2, "{s:?}");
    assert_eq!(s.bytes_sent, SIZE, "quiche sent the download: {s:?}");
    assert_eq!(s.bytes_received, SIZE, "quiche received the upload: {s:?}");
    assert_eq!(s.mismatches, 0, "upload verified by quiche: {s:?}");
    assert_eq!(s.bad_requests, 0, "{s:?}");
    assert_eq!(s.clean_closes, 2, "Tollgate closed both with code 0: {s:?}");
    assert_eq!(s.connections.len(), 2, "{s:?}");
    // In order of closing, which need not be the order of the transfers.
    assert!(
        s.connections.iter().any(|c| c.bytes_sent >= SIZE),
        "quiche's download connection carried the data: {s:?}"
    );
    assert!(
        s.connections.iter().any(|c| c.bytes_received >= SIZE),
        "quiche's upload connection carried the data: {s:?}"
    );
}

#[test]
fn quiche_client_downloads_from_tollgate_newreno() {
    quiche_client_downloads_from_tollgate("newreno");
}

#[test]
fn quiche_client_downloads_from_tollgate_cubic() {
    quiche_client_downloads_from_tollgate("cubic");
}

#[test]
fn quiche_client_downloads_from_tollgate_libra() {
    quiche_client_downloads_from_tollgate("libra");
}

#[test]
fn quiche_client_downloads_from_tollgate_taxed_cubic() {
    quiche_client_downloads_from_tollgate("taxed(cubic)");
}

#[test]
fn tollgate_newreno_client_with_quiche_server() {
    tollgate_client_with_quiche_server("newreno");
}

#[test]
fn tollgate_cubic_client_with_quiche_server() {
    tollgate_client_with_quiche_server("cubic");
}

#[test]
fn tollgate_libra_client_with_quiche_server() {
    tollgate_client_with_quiche_server("libra");
}

#[test]
fn tollgate_taxed_cubic_client_with_quiche_server() {
    tollgate_client_with_quiche_server("taxed(cubic)");
}

/// The two quiche peers against each other: checks the peer module itself,
/// so a failure above can be told apart from a bug in the peer.
#[test]
fn quiche_client_and_quiche_server_agree() {
    let _one_at_a_time = serial();
    let certs = certs();
    let server = QuicheServer::start(loopback(), &certs, peer_options(3 * TRANSFER_LIMIT))
        .expect("quiche server");
    let addr = server.local_addr();
    let opts = peer_options(TRANSFER_LIMIT);
    let size = 256 << 10;
    let down = quiche_peer::run_client(addr, "localhost", download(size), &opts);
    assert!(down.complete && down.closed_cleanly(), "{down:?}");
    assert_eq!((down.bytes, down.mismatches), (size, 0));
    let up = quiche_peer::run_client(addr, "localhost", upload(size), &opts);
    assert!(up.complete && up.closed_cleanly(), "{up:?}");
    assert_eq!((up.bytes, up.bytes_sent, up.mismatches), (size, size, 0));
    let empty = quiche_peer::run_client(addr, "localhost", download(0), &opts);
    assert!(empty.complete && empty.closed_cleanly(), "{empty:?}");
    assert_eq!(empty.bytes, 0);
    let s = server.finish().unwrap();
    assert_eq!(
        (s.accepted, s.transfers, s.clean_closes),
        (3, 3, 3),
        "{s:?}"
    );
    assert_eq!(
        (s.bytes_sent, s.bytes_received, s.mismatches),
        (size, size, 0)
    );
}

/// A quiche client whose server never answers gives up at its time limit.
#[test]
fn quiche_client_is_bounded_in_time() {
    let _one_at_a_time = serial();
    let silent = std::net::UdpSocket::bind(loopback()).unwrap();
    let limit = Duration::from_millis(300);
    let t0 = Instant::now();
    let r = quiche_peer::run_client(
        silent.local_addr().unwrap(),
        "localhost",
        download(SIZE),
        &peer_options(limit),
    );
    let wall = t0.elapsed();
    assert!(!r.complete && !r.established, "{r:?}");
    assert!(
        r.error.as_deref().is_some_and(|e| e.contains("time limit")),
        "{r:?}"
    );
    assert!(
        wall >= limit && wall < limit + Duration::from_secs(2),
        "{wall:?}"
    );
}

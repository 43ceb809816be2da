//! Loopback transfers with every registered congestion controller, both
//! directions, integrity checked byte by byte.

mod common;

use common::*;
use tollgate_transport::bulk::{BulkClient, BulkServer};
use tollgate_transport::driver::UdpIo;
use tollgate_transport::ConnectionOptions;

const SIZE: u64 = 512 << 10;

#[test]
fn every_registered_cca_downloads_and_uploads_intact() {
    let certs = certs();
    let specs = every_spec();
    assert!(specs.len() >= 4, "registry lists {specs:?}");
    for spec in &specs {
        let t0 = std::time::Instant::now();
        // Server sends with `spec`.
        let server = start_server(&certs, ConnectionOptions::with_cca(spec));
        let down = run_client(
            &certs,
            server.addr,
            download(SIZE),
            ConnectionOptions::default(),
        );
        assert_intact(&format!("download {spec}"), &down, SIZE);
        // Client sends with `spec`.
        let up = run_client(
            &certs,
            server.addr,
            upload(SIZE),
            ConnectionOptions::with_cca(spec),
        );
        assert_intact(&format!("upload {spec}"), &up, SIZE);
        let report = up.report.unwrap();
        assert_eq!(report.cca.spec, *spec);
        assert!(
            report.cca.acked_bytes >= SIZE,
            "{spec}: the CCA saw the ACKs"
        );
        assert!(!report.rtt_us.is_empty(), "{spec}: RTT samples recorded");
        let (driver, app) = server.stop();
        assert_eq!(app.summary.transfers, 2, "{spec}");
        assert_eq!(app.summary.bytes_received, SIZE, "{spec}");
        assert_eq!(app.summary.mismatches, 0, "{spec}");
        assert_eq!(
            app.summary.clean_closes, 2,
            "{spec}: clean close with code 0"
        );
        let server_side: Vec<_> = app
            .summary
            .reports
            .iter()
            .map(|r| r.cca.spec.clone())
            .collect();
        assert!(server_side.iter().all(|s| s == spec), "{server_side:?}");
        drop(driver);
        eprintln!("{spec}: {:?}", t0.elapsed());
    }
}

#[test]
fn downloads_use_the_cca_the_client_asks_for_within_the_allow_list() {
    let certs = certs();
    let app = BulkServer::new().with_allowed_ccas(vec!["newreno".into(), "cubic".into()]);
    let server = start_app_on(
        UdpIo::bind(loopback()).unwrap(),
        &certs,
        ConnectionOptions::with_cca("newreno"),
        app,
    );
    let ask = |spec: &str| {
        let client = BulkClient::new(
            server.addr,
            "localhost",
            download(SIZE),
            ConnectionOptions::default(),
        )
        .with_server_cca(spec);
        run_app_on(UdpIo::bind(loopback()).unwrap(), &certs, client).1
    };
    let cubic = ask("cubic(beta=0.8)");
    assert_intact("download with cubic", &cubic, SIZE);
    let libra = ask("libra");
    assert!(!libra.complete);
    let why = libra.error.unwrap_or_default();
    assert!(
        why.contains("server refused the CCA") && why.contains("not allowed"),
        "{why}"
    );
    let invalid = ask("nosuchcca");
    assert!(invalid.error.unwrap_or_default().contains("invalid CCA"));
    let (_, app) = server.stop();
    assert_eq!(app.summary.refused_cca, 2);
    assert_eq!(app.summary.transfers, 1);
    let specs: Vec<&str> = app
        .summary
        .reports
        .iter()
        .map(|r| r.cca.spec.as_str())
        .collect();
    assert!(
        specs.contains(&"cubic(beta=0.8)"),
        "the server sent with the requested CCA: {specs:?}"
    );
}

#[test]
fn a_v2_upload_reports_receiver_progress_while_it_runs() {
    let certs = certs();
    let server = start_server(&certs, ConnectionOptions::default());
    let request = tollgate_transport::bulk::Request {
        mode: tollgate_transport::bulk::Mode::Upload,
        size: None,
        duration: Some(std::time::Duration::from_millis(700)),
    };
    let client = BulkClient::new(
        server.addr,
        "localhost",
        request,
        ConnectionOptions::default(),
    );
    let progress = client.progress();
    let watcher = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..40 {
            std::thread::sleep(std::time::Duration::from_millis(25));
            seen.push(progress.load(std::sync::atomic::Ordering::Relaxed));
        }
        seen
    });
    let (_, r) = run_app_on(UdpIo::bind(loopback()).unwrap(), &certs, client);
    let seen = watcher.join().unwrap();
    assert!(r.complete, "{r:?}");
    let mid_run: Vec<u64> = seen
        .iter()
        .copied()
        .filter(|&b| b > 0 && b < r.bytes)
        .collect();
    assert!(
        mid_run.len() >= 3,
        "server counts arrive during the upload, not only at the end: {seen:?} (final {})",
        r.bytes
    );
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "monotonic: {seen:?}");
    server.stop();
}

#[test]
fn many_connections_share_one_server_endpoint() {
    let certs = certs();
    let server = start_server(&certs, ConnectionOptions::with_cca("cubic"));
    let addr = server.addr;
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let certs = certs.clone();
            std::thread::spawn(move || {
                let spec = if i % 2 == 0 { "newreno" } else { "cubic" };
                run_client(
                    &certs,
                    addr,
                    download(256 << 10),
                    ConnectionOptions::with_cca(spec),
                )
            })
        })
        .collect();
    for c in clients {
        assert_intact("concurrent download", &c.join().unwrap(), 256 << 10);
    }
    let (mut driver, app) = server.stop();
    assert_eq!(app.summary.transfers, 4);
    assert_eq!(driver.endpoint().endpoint_stats().accepted, 4);
}

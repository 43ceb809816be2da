//! Loopback transfers with every registered congestion controller, both
//! directions, integrity checked byte by byte.

mod common;

use common::*;
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

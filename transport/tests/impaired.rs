//! Loss and reordering injected by the test socket wrapper: transfers still
//! complete with every byte correct, and the CCA saw the losses.

mod common;

use common::*;
use tollgate_transport::driver::UdpIo;
use tollgate_transport::impair::Impaired;
use tollgate_transport::ConnectionOptions;

const SIZE: u64 = 1 << 20;

fn impaired(seed: u64) -> Impaired<UdpIo> {
    Impaired::new(UdpIo::bind(loopback()).unwrap(), 0.05, 0.05, seed)
}

#[test]
fn five_percent_loss_and_reordering_both_ways() {
    let certs = certs();
    for (i, spec) in ["newreno", "cubic"].iter().enumerate() {
        let server = start_server_on(
            impaired(11 + i as u64),
            &certs,
            ConnectionOptions::with_cca(spec),
        );
        let (client, result) = run_client_on(
            impaired(7 + i as u64),
            &certs,
            server.addr,
            download(SIZE),
            ConnectionOptions::with_cca(spec),
        );
        assert_intact(&format!("lossy download {spec}"), &result, SIZE);
        let (server_driver, app) = server.stop();
        let s = server_driver.socket();
        assert!(
            s.dropped > 20 && s.reordered > 20,
            "impairment active: {s:?}"
        );
        assert!(client.socket().dropped > 0, "ACK path impaired too");
        let sender = &app.summary.reports[0];
        assert!(
            sender.cca.loss_events > 0,
            "{spec}: CCA saw congestion events"
        );
        assert!(sender.cca.lost_bytes > 0, "{spec}");
        assert!(sender.quic.path.lost_packets > 0, "{spec}");
    }
}

//! Bulk-transfer server: serves downloads and uploads to any number of
//! `bulk_client`s and prints each connection's goodput and RTT percentiles.
//!
//! ```text
//! cargo run --release -p tollgate-transport --example bulk_server -- \
//!     --listen 127.0.0.1:4433 --cca cubic --mark-dscp
//! ```
//!
//! Without `--cert`/`--key` a self-signed certificate for `localhost` is
//! generated and written to `--write-cert` (default
//! `/tmp/tollgate-bulk-cert.pem`, where `bulk_client --ca` looks by default).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use clap::Parser;
use tollgate_transport::bulk::BulkServer;
use tollgate_transport::tls::{self, SelfSigned};
use tollgate_transport::{
    App, ConnReport, ConnectionOptions, Driver, Endpoint, EndpointOptions, Event,
};

#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4433")]
    listen: SocketAddr,
    /// Congestion control for the server's sending side (registry spec).
    #[arg(long, default_value = "newreno")]
    cca: String,
    /// Mark outgoing packets with the CCA's variant id in DSCP.
    #[arg(long)]
    mark_dscp: bool,
    /// Certificate chain (PEM); with --key. Default: self-signed for localhost.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// Private key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Where to write the self-signed certificate for clients.
    #[arg(long, default_value = "/tmp/tollgate-bulk-cert.pem")]
    write_cert: PathBuf,
    /// Statistics sampling interval in milliseconds.
    #[arg(long, default_value_t = 100)]
    stats_interval_ms: u64,
    /// More log output on stderr: -v info, -vv debug, -vvv trace
    /// (RUST_LOG, when set, takes precedence).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// The bulk server plus a line per finished connection.
struct Printing(BulkServer);

impl App for Printing {
    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, event: Event) {
        if let Event::Drained(report) = &event {
            print_report(report);
        }
        self.0.on_event(now, ep, event);
    }
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        self.0.poll(now, ep);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }
    fn is_done(&self) -> bool {
        false
    }
}

fn print_report(r: &ConnReport) {
    let secs = r.age.as_secs_f64().max(1e-9);
    let q = |x| {
        r.rtt_quantile(x).map_or("-".into(), |d: Duration| {
            format!("{:.2}ms", d.as_secs_f64() * 1e3)
        })
    };
    println!(
        "conn {} cca={} sent={}B recv={}B avg_tx={:.1}Mbit/s avg_rx={:.1}Mbit/s rtt p50={} p90={} p99={} lost_pkts={} peer_dscp={:?}",
        r.handle.0,
        r.cca.spec,
        r.app_tx_bytes,
        r.app_rx_bytes,
        r.app_tx_bytes as f64 * 8.0 / secs / 1e6,
        r.app_rx_bytes as f64 * 8.0 / secs / 1e6,
        q(0.5),
        q(0.9),
        q(0.99),
        r.quic.path.lost_packets,
        r.peer_dscp_seen(),
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tollgate_transport::logging::init(args.verbose);
    let crypto = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => tls::server_crypto_from_pem(cert, key)?,
        _ => {
            let ss = SelfSigned::generate(&["localhost"])?;
            std::fs::write(&args.write_cert, ss.cert_pem())?;
            eprintln!(
                "self-signed certificate written to {}",
                args.write_cert.display()
            );
            ss.server_crypto()?
        }
    };
    let options = ConnectionOptions {
        mark_dscp: args.mark_dscp,
        stats_interval: Duration::from_millis(args.stats_interval_ms),
        ..ConnectionOptions::with_cca(&args.cca)
    };
    let mut driver = Driver::bind(args.listen, EndpointOptions::default())?;
    driver.endpoint().set_server(crypto, options)?;
    eprintln!("listening on {} with {}", driver.local_addr()?, args.cca);
    driver.run(&mut Printing(BulkServer::new()), &AtomicBool::new(false))?;
    Ok(())
}

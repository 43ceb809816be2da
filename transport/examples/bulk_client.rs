//! Bulk-transfer client: downloads (or uploads) N bytes or for a duration and
//! prints goodput and RTT percentiles.
//!
//! ```text
//! cargo run --release -p tollgate-transport --example bulk_client -- \
//!     --server 127.0.0.1:4433 --ca /tmp/tollgate-bulk-cert.pem --size 100MB
//! cargo run --release -p tollgate-transport --example bulk_client -- \
//!     --server 127.0.0.1:4433 --ca /tmp/tollgate-bulk-cert.pem --upload \
//!     --duration 10s --cca 'taxed(cubic)' --mark-dscp --series /tmp/series.csv
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Parser;
use tollgate_cca::units::{parse_bytes, parse_duration};
use tollgate_transport::bulk::{BulkClient, Mode, Request};
use tollgate_transport::tls;
use tollgate_transport::{ConnectionOptions, Driver, EndpointOptions};

#[derive(Parser, Debug)]
struct Args {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1:4433")]
    server: SocketAddr,
    /// Name to verify the server certificate against.
    #[arg(long, default_value = "localhost")]
    server_name: String,
    /// CA / server certificate bundle (PEM) to trust.
    #[arg(long, default_value = "/tmp/tollgate-bulk-cert.pem")]
    ca: PathBuf,
    /// Congestion control for the client's sending side (registry spec).
    #[arg(long, default_value = "newreno")]
    cca: String,
    /// Mark outgoing packets with the CCA's variant id in DSCP.
    #[arg(long)]
    mark_dscp: bool,
    /// Bytes to transfer, e.g. 10MB (default: unlimited with --duration, else 10MB).
    #[arg(long, value_parser = parse_bytes)]
    size: Option<u64>,
    /// Transfer for this long, e.g. 10s.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Send to the server instead of downloading from it.
    #[arg(long)]
    upload: bool,
    /// Statistics sampling interval.
    #[arg(long, value_parser = parse_duration, default_value = "100ms")]
    stats_interval: Duration,
    /// Write the time series as CSV here.
    #[arg(long)]
    series: Option<PathBuf>,
    /// More log output on stderr: -v info, -vv debug, -vvv trace
    /// (RUST_LOG, when set, takes precedence).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tollgate_transport::logging::init(args.verbose);
    let size = match (args.size, args.duration) {
        (None, None) => Some(10_000_000),
        (s, _) => s,
    };
    let request = Request {
        mode: if args.upload {
            Mode::Upload
        } else {
            Mode::Download
        },
        size,
        duration: args.duration,
    };
    let options = ConnectionOptions {
        mark_dscp: args.mark_dscp,
        stats_interval: args.stats_interval,
        ..ConnectionOptions::with_cca(&args.cca)
    };
    let bind: SocketAddr = if args.server.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    }
    .parse()?;
    let mut driver = Driver::bind(bind, EndpointOptions::default())?;
    driver
        .endpoint()
        .set_client(tls::client_crypto_with_roots_pem(&args.ca)?);
    let mut app = BulkClient::new(args.server, &args.server_name, request, options);
    driver.run(&mut app, &AtomicBool::new(false))?;
    let r = app.result;
    if let Some(e) = &r.error {
        eprintln!("error: {e}");
    }
    println!(
        "{} {} bytes in {:.3}s: {:.1} Mbit/s, intact={} ({} mismatched bytes)",
        if args.upload {
            "uploaded"
        } else {
            "downloaded"
        },
        r.bytes,
        r.elapsed.as_secs_f64(),
        r.goodput_bps() / 1e6,
        r.complete,
        r.mismatches
    );
    if let Some(rep) = &r.report {
        let q = |x| {
            rep.rtt_quantile(x).map_or("-".into(), |d: Duration| {
                format!("{:.3}ms", d.as_secs_f64() * 1e3)
            })
        };
        println!(
            "rtt p50={} p90={} p99={} max={}  lost_packets={} congestion_events={} final_cwnd={}B peer_dscp={:?}",
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0),
            rep.quic.path.lost_packets,
            rep.cca.loss_events + rep.cca.ecn_events,
            rep.cca.stats.window,
            rep.peer_dscp_seen()
        );
        for (k, v) in &rep.cca.stats.details {
            println!("cca {k} = {v}");
        }
        if let Some(path) = &args.series {
            let mut csv = String::from("t_s,rx_bytes,tx_bytes,rx_bps,tx_bps,cwnd,pacing_rate,srtt_us,bytes_in_flight,lost_packets\n");
            for s in &rep.samples {
                csv.push_str(&format!(
                    "{:.3},{},{},{:.0},{:.0},{},{},{},{},{}\n",
                    s.t.as_secs_f64(),
                    s.rx_bytes,
                    s.tx_bytes,
                    s.rx_bps,
                    s.tx_bps,
                    s.cwnd,
                    s.pacing_rate.map_or(String::new(), |r| r.to_string()),
                    s.srtt.as_micros(),
                    s.bytes_in_flight,
                    s.lost_packets
                ));
            }
            std::fs::write(path, csv)?;
        }
    }
    if r.complete {
        Ok(())
    } else {
        Err("transfer incomplete".into())
    }
}

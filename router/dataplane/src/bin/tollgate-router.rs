//! `tollgate-router --config router.toml [--duration 10s] [--quiet] -- <EAL args>`
//!
//! The DPDK dataplane: forwards between the configured ports through the
//! library's per-egress pipeline (delay line, discipline, shaper), prints
//! stats periodically, serves Prometheus text, and on SIGINT/SIGTERM (or
//! after `--duration`) drains, prints final stats and checks the accounting
//! `rx = tx + dropped + queued`.
//!
//! Exit codes: 0 ok; 2 bad command line or config; 3 EAL / port failure;
//! 4 accounting mismatch.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate_dataplane::config::{parse_duration, RouterConfig};
use tollgate_dataplane::dataplane::{install_signal_handlers, Router, STOP};
use tollgate_dataplane::eal::Eal;
use tollgate_dataplane::stats::Snapshot;

const USAGE: &str = "usage: tollgate-router --config router.toml [--duration 10s] [--quiet] -- <DPDK EAL args>\n\
    example (no NICs): tollgate-router --config router.toml -- -l 0 --no-huge --no-pci -m 512 --vdev net_null0 --vdev net_null1\n\
    config reference: router/DPDK.md";

struct Args {
    config: String,
    duration: Option<Duration>,
    quiet: bool,
    eal: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut config = None;
    let mut duration = None;
    let mut quiet = false;
    let mut eal = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" | "-c" => config = Some(it.next().ok_or("--config needs a file")?),
            "--duration" => {
                let d = it.next().ok_or("--duration needs a value like 10s")?;
                duration = Some(parse_duration(&d).map_err(|e| format!("--duration: {e}"))?);
            }
            "--quiet" | "-q" => quiet = true,
            "--help" | "-h" => return Err(String::new()),
            "--" => {
                eal.extend(it.by_ref());
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (EAL arguments go after `--`)"
                ))
            }
        }
    }
    let config = config.ok_or("--config is required")?;
    Ok(Args {
        config,
        duration,
        quiet,
        eal,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cfg = match RouterConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("config error: {e}");
            return ExitCode::from(2);
        }
    };
    install_signal_handlers();
    let eal = match Eal::init(&args.eal) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(3);
        }
    };
    let code = run(&cfg, &args, &eal);
    drop(eal);
    code
}

fn run(cfg: &RouterConfig, args: &Args, eal: &Eal) -> ExitCode {
    let mut router = match Router::new(cfg, eal) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(3);
        }
    };
    println!(
        "tollgate-router: mode={:?} tsc_hz={} ports={}",
        cfg.mode,
        router.clock.hz(),
        router.devs.len()
    );
    for (d, l) in router.devs.iter().zip(&router.lanes) {
        let m = d.eth.mac;
        println!(
            "  port {} {} mac={:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} link={}Mbit queues={} egress: {} rate={:.3}Mbit",
            d.eth.id,
            d.eth.name,
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            d.eth.speed_mbps,
            d.eth.queues,
            tollgate_router::Qdisc::name(l.port.qdisc()),
            l.rate_bps / 1e6
        );
    }
    let prom = Arc::new(Mutex::new(String::new()));
    let http = match &cfg.prometheus {
        None => None,
        Some(addr) => match tollgate_dataplane::http::serve(addr, prom.clone()) {
            Ok(h) => {
                println!("  prometheus: http://{addr}/metrics");
                Some(h)
            }
            Err(e) => {
                eprintln!("error: cannot serve Prometheus on {addr}: {e} (change `prometheus` in the config)");
                return ExitCode::from(2);
            }
        },
    };
    let duration = args
        .duration
        .or_else(|| cfg.duration.as_deref().and_then(|d| parse_duration(d).ok()));
    let until = duration.map(|d| router.clock.now() + d);
    let interval = parse_duration(&cfg.stats_interval)
        .ok()
        .filter(|d| !d.is_zero());
    // Prometheus needs fresh numbers even when printing is off.
    let tick = interval.or(cfg.prometheus.as_ref().map(|_| Duration::from_secs(1)));
    let mut prev: Option<Snapshot> = None;
    let quiet = args.quiet || interval.is_none();
    router.run(until, tick, |snap| {
        if !quiet {
            print!("{}", snap.render_text(prev.as_ref()));
        }
        if let Ok(mut t) = prom.lock() {
            *t = snap.render_prometheus();
        }
        prev = Some(snap.clone());
    });
    let stopped_by = if STOP.load(Ordering::Relaxed) {
        "signal"
    } else {
        "duration"
    };
    let drain = parse_duration(&cfg.drain_timeout).unwrap_or(Duration::from_secs(2));
    router.drain(drain);
    let now = router.clock.now();
    let snap = router.snapshot(now);
    if let Ok(mut t) = prom.lock() {
        *t = snap.render_prometheus();
    }
    println!("=== final stats (stopped by {stopped_by}) ===");
    print!("{}", snap.render_text(prev.as_ref()));
    for l in &snap.lanes {
        let mut line = format!(
            "lane port={} discipline={} received={} transmitted={} tx_sent={} tx_full={} bypass={} in_flight={} marked={}",
            l.egress, l.discipline, l.counters.received, l.counters.dequeued, l.tx_sent, l.tx_full, l.bypass, l.in_flight, l.counters.marked
        );
        for r in tollgate_router::DropReason::ALL {
            line.push_str(&format!(" drop_{}={}", r.name(), l.counters.dropped_for(r)));
        }
        println!("{line}");
        let mut v = format!("variants port={}", l.egress);
        for (i, &b) in l.variant_tx_bytes.iter().enumerate() {
            if b > 0 {
                let name = tollgate_cca::VariantId::from_dscp(i as u8)
                    .map(|x| x.to_string())
                    .unwrap_or_default();
                v.push_str(&format!(" {name}={b}"));
            }
        }
        println!("{v}");
    }
    if let Some((frames, skipped)) = router.pcap_counts() {
        println!("pcap: frames={frames} skipped={skipped}");
    }
    let t = snap.totals();
    let ok = t.exact() && snap.lanes_exact();
    println!(
        "tollgate-router final: rx={} tx={} dropped={} queued={} accounting={}",
        t.rx,
        t.tx,
        t.dropped,
        t.queued,
        if ok { "ok" } else { "MISMATCH" }
    );
    STOP.store(true, Ordering::Relaxed);
    if let Some(h) = http {
        let _ = h.join();
    }
    // Frees every queued mbuf and closes the ports before EAL cleanup.
    drop(router);
    if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: packet accounting mismatch: rx != tx + dropped + queued");
        ExitCode::from(4)
    }
}

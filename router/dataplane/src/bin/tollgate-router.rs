//! `tollgate-router --config router.toml [--duration 10s] [--quiet] [-v...] -- <EAL args>`
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
use std::time::Duration;

use clap::Parser;

use tollgate_dataplane::cli::Args;
use tollgate_dataplane::config::{parse_duration, RouterConfig};
use tollgate_dataplane::dataplane::{install_signal_handlers, Router, STOP};
use tollgate_dataplane::eal::Eal;
use tollgate_dataplane::stats::{Published, Snapshot};
use tollgate_metrics_http::{MetricsServer, ServerConfig};

fn main() -> ExitCode {
    // clap prints the error with a usage line and exits 2 (0 for --help
    // and --version).
    let args = Args::parse();
    tollgate_dataplane::logging::init(args.verbose);
    let cfg = match RouterConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(config = %args.config, "config rejected");
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
        "tollgate-router: mode={:?} tsc_hz={} ports={} hash_seed={} ({})",
        cfg.mode,
        router.clock.hz(),
        router.devs.len(),
        router.hash_seed,
        if cfg.hash_seed.is_some() {
            "configured"
        } else {
            "random; set `hash_seed` in the config to repeat this run"
        }
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
    if let Some(p) = &router.pipeline {
        for w in &p.workers {
            let q: Vec<String> = w
                .queues
                .iter()
                .map(|(d, _, q)| format!("{}:{q}", router.devs[*d].eth.name))
                .collect();
            println!(
                "  pipeline worker lcore={} rx_queues={}",
                w.lcore,
                q.join(",")
            );
        }
        for (l, s) in router.lanes.iter().zip(&p.scheduler_of) {
            println!("  pipeline scheduler lcore={s} egress={}", l.name);
        }
    }
    // The forwarding loop only publishes numbers; the metrics thread and
    // the printer thread below format them.
    let published = Published::new();
    let metrics = match &cfg.prometheus {
        None => None,
        // The metrics server's own refused and timed-out connections are
        // appended as tollgate_metrics_http_{refused,timed_out}_total.
        Some(addr) => match MetricsServer::start_with_own_counters(
            addr.as_str(),
            ServerConfig::default(),
            "tollgate",
            {
                let published = published.clone();
                move || published.latest().render_prometheus()
            },
        ) {
            Ok(server) => {
                println!("  prometheus: http://{}/metrics", server.local_addr());
                Some(server)
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
    let quiet = args.quiet || interval.is_none();
    // The periodic table, printed off the forwarding core; it returns the
    // last snapshot it printed, the base of the final table's rates.
    let printer = (!quiet).then(|| {
        let published = published.clone();
        std::thread::Builder::new()
            .name("tollgate-stats".into())
            .spawn(move || {
                let (mut seen, mut prev) = (0, None::<Snapshot>);
                while let Some((seq, snap)) = published.wait_newer(seen) {
                    print!("{}", snap.render_text(prev.as_ref()));
                    seen = seq;
                    prev = Some(snap);
                }
                prev
            })
    });
    let printer = match printer.transpose() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot start the stats printer thread: {e}");
            return ExitCode::from(3);
        }
    };
    // One lcore (the default), or the `[pipeline]` workers and schedulers
    // on their lcores.
    if let Err(e) = router.run_pipeline(until, tick, Some(&published)) {
        eprintln!("error: {e}");
        STOP.store(true, Ordering::Relaxed);
        published.close();
        return ExitCode::from(3);
    }
    tracing::info!("forwarding loop stopped; draining");
    published.close();
    let prev = printer.and_then(|p| p.join().ok()).flatten();
    let stopped_by = if STOP.load(Ordering::Relaxed) {
        "signal"
    } else {
        "duration"
    };
    let drain = parse_duration(&cfg.drain_timeout).unwrap_or(Duration::from_secs(2));
    router.drain(drain);
    let now = router.clock.now();
    let snap = router.snapshot(now);
    published.publish(snap.clone());
    println!("=== final stats (stopped by {stopped_by}) ===");
    print!("{}", snap.render_text(prev.as_ref()));
    for l in &snap.lanes {
        let mut line = format!(
            "lane port={} discipline={} received={} transmitted={} tx_sent={} tx_full={} ring_full={} bypass={} in_flight={} marked={}",
            l.egress, l.discipline, l.counters.received, l.counters.dequeued, l.tx_sent, l.tx_full, l.ring_full, l.bypass, l.in_flight, l.counters.marked
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
    if let Some((frames, skipped, ring_full, failed)) = router.pcap_counts() {
        println!(
            "pcap: frames={frames} skipped={skipped} ring_full={ring_full} write_failed={failed}"
        );
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
    if let Some(server) = metrics {
        server.stop();
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

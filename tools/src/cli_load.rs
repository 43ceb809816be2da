//! The command-line glue of `tollgate serve` and `tollgate load`: options,
//! certificates, the live progress line, results and exit codes. The work is
//! in [`tollgate_tools::serve`] and [`tollgate_tools::load`].

use std::io::IsTerminal as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use tollgate_cca::units::parse_duration;
use tollgate_metrics_http::{MetricsServer, ServerConfig};
use tollgate_tools::load::{self, environment, LoadOptions};
use tollgate_tools::scenario::kind::{parse_quick, FlowKind};
use tollgate_tools::{experiment, plot, results, scenario, serve};
use tollgate_transport::tls;

use crate::cli_sim::{install_stop_handler_saying, EXIT_INTERRUPTED, STOP};

/// Name in the self-signed certificate, and `load --server-name`'s default.
pub const SERVER_NAME: &str = "tollgate";

/// Serve bulk transfers to `tollgate load` over QUIC and kernel TCP.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  tollgate serve --self-signed                          # 0.0.0.0:4433, writes tollgate-serve-cert.pem
  tollgate serve --listen [::]:4433 --cert c.pem --key k.pem --allow-cca newreno,cubic,libra,taxed,cubic,reno,bbr
  tollgate serve --self-signed --metrics 127.0.0.1:9464  # Prometheus text at http://127.0.0.1:9464/metrics

Clients choose the congestion control the server sends their downloads with;
--allow-cca limits that choice (QUIC registry names such as `cubic`, `libra`,
`taxed`; kernel names for TCP such as `cubic`, `bbr`). Ctrl-C stops the server
and prints its totals.

Under load (per QUIC worker): a client whose address is not validated gets a
Retry once --retry-threshold such handshakes are in progress, at most
--max-handshakes handshakes run at once and at most --max-connections
connections are held (more are refused with CONNECTION_REFUSED), a handshake
is abandoned after --handshake-timeout and a silent peer after --idle-timeout.
Each is counted by reason in the metrics and the final totals.")]
pub struct ServeArgs {
    /// Address to listen on, UDP (QUIC) and TCP on the same port; repeatable.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:4433")]
    pub listen: Vec<SocketAddr>,
    /// QUIC worker threads per address (default: available cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Certificate chain (PEM), with --key.
    #[arg(
        long,
        value_name = "FILE",
        requires = "key",
        conflicts_with = "self_signed"
    )]
    pub cert: Option<PathBuf>,
    /// Private key (PEM), with --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Generate a certificate for the name `tollgate` (and `localhost`) and
    /// write it to --cert-out for clients (`tollgate load --ca FILE`).
    #[arg(long)]
    pub self_signed: bool,
    /// Where --self-signed writes the certificate.
    #[arg(long, value_name = "FILE", default_value = "tollgate-serve-cert.pem")]
    pub cert_out: PathBuf,
    /// Comma-separated CCAs clients may ask downloads to be sent with (default: any).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub allow_cca: Option<Vec<String>>,
    /// CCA for downloads that ask for none.
    #[arg(long, value_name = "SPEC", default_value = "newreno")]
    pub default_cca: String,
    /// Most QUIC connections per worker, and TCP connections per address;
    /// more are refused (counted in the metrics).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// Most QUIC handshakes in progress per worker; more clients are
    /// refused (counted in the metrics).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_handshakes: usize,
    /// Answer QUIC clients with a Retry (address validation) once this many
    /// handshakes with unvalidated clients are in progress per worker;
    /// 0 = always, `off` = never.
    #[arg(long, value_name = "N|off", default_value = "64", value_parser = retry_threshold)]
    pub retry_threshold: RetryThreshold,
    /// Abandon a QUIC handshake not complete after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub handshake_timeout: String,
    /// Close a connection whose peer sends nothing for this long (QUIC idle
    /// timeout; TCP: no transfer progress).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub idle_timeout: String,
    /// Serve live Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
}

/// Run a scenario's flows against a `tollgate serve`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  tollgate load tools/scenarios/rtt-unfairness.toml --server 10.0.0.2:4433 --ca tollgate-serve-cert.pem
  tollgate load --server 127.0.0.1:4433 --ca tollgate-serve-cert.pem --duration 30s \\
      --flows \"4x cubic, 2x libra(capacity=1Gbit), 1x taxed(newreno), 2x tcp:cubic\"

Flow kinds: a tollgate-cca spec runs Tollgate QUIC; tcp:NAME kernel TCP with
TCP_CONGESTION=NAME; quiche:NAME quiche (feature quiche). A group's rtt and the
topology are not emulated: the path has its own, and rtt_ms in the results is
the measured minimum (quiche: its smoothed RTT). Results: <out>/<name>/results.json, flows.csv and plots
as for `tollgate sim`, plus the run's environment.

Exit codes: 0 every flow completed; 1 a flow failed (its reason is in
results.json) or the run could not start; 130 Ctrl-C (results written, marked
partial).")]
pub struct LoadArgs {
    /// Scenario file whose `[[flows]]` to run (the same file `tollgate sim` runs).
    #[arg(required_unless_present = "flows", conflicts_with = "flows")]
    pub scenario: Option<PathBuf>,
    /// Server address (UDP and TCP port of `tollgate serve`).
    #[arg(long, value_name = "ADDR")]
    pub server: SocketAddr,
    /// Quick flows instead of a file: "4x cubic, 2x tcp:cubic, 1x libra(capacity=1Gbit)".
    #[arg(long, value_name = "LIST")]
    pub flows: Option<String>,
    /// Run length (quick flows; default 10s) or override of the file's duration.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Quick flows: download (the server sends with each flow's CCA).
    #[arg(long)]
    pub reverse: bool,
    /// Certificate (PEM) to trust: the one `tollgate serve --self-signed` wrote, or a CA.
    #[arg(long, value_name = "FILE")]
    pub ca: PathBuf,
    /// Name the server's certificate must carry.
    #[arg(long, value_name = "NAME", default_value = SERVER_NAME)]
    pub server_name: String,
    /// Local address to send from (default: the kernel's choice).
    #[arg(long, value_name = "IP")]
    pub bind: Option<IpAddr>,
    /// Local port of each flow, in flow order, comma-separated (0: the
    /// kernel's choice): fixed 5-tuples for router rules (`tollgate testbed`
    /// uses it). Not for quiche flows.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub bind_ports: Vec<u16>,
    /// Local address of each flow, in flow order, comma-separated (before
    /// --bind): `tollgate testbed` binds each parking-lot flow to its entry
    /// node's address.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub bind_addrs: Vec<IpAddr>,
    /// Server of each flow, in flow order, comma-separated (before --server
    /// and the scenario's `server`): a parking lot's testbed has a server
    /// address per exit node.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub flow_servers: Vec<SocketAddr>,
    /// Seed of the flows' random starts and sizes (default: the file's, or 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Results root; the run writes `<out>/<name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Name of a quick run (its results directory).
    #[arg(long, default_value = "load")]
    pub name: String,
    /// Connection set-up timeout.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub connect_timeout: String,
    /// Worker threads for the QUIC flows, each one event loop over its share
    /// of the flows' sockets (default: available cores). Kernel TCP and
    /// quiche flows run on a thread each.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// The rate of this host's network interface or access link (e.g.
    /// 1Gbit). QUIC senders pass it to their congestion controller: Libra's
    /// CapProbe rejects capacity estimates above it, as no bottleneck beyond
    /// the first link can be faster. Default: unknown (no bound).
    #[arg(long, value_name = "RATE", value_parser = tollgate_cca::units::parse_rate_bps)]
    pub link_rate: Option<f64>,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
}

fn duration_arg(flag: &str, text: &str) -> anyhow::Result<Duration> {
    parse_duration(text).map_err(|e| anyhow::anyhow!("{flag} \"{text}\": {e} (e.g. 30s, 500ms)"))
}

/// `--retry-threshold`: a count, or never.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryThreshold(pub Option<usize>);

fn retry_threshold(text: &str) -> Result<RetryThreshold, String> {
    if text == "off" {
        return Ok(RetryThreshold(None));
    }
    text.parse()
        .map(|n| RetryThreshold(Some(n)))
        .map_err(|_| format!("\"{text}\": want a number of handshakes or `off`"))
}

/// `tollgate serve`.
pub fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let crypto = if args.self_signed {
        let certs = tls::SelfSigned::generate(&[SERVER_NAME, "localhost"])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        std::fs::write(&args.cert_out, certs.cert_pem())
            .with_context(|| format!("write the certificate to {}", args.cert_out.display()))?;
        eprintln!(
            "certificate for \"{SERVER_NAME}\" written to {} (clients: --ca {})",
            args.cert_out.display(),
            args.cert_out.display()
        );
        certs.server_crypto().map_err(|e| anyhow::anyhow!("{e}"))?
    } else {
        match (&args.cert, &args.key) {
            (Some(c), Some(k)) => tls::server_crypto_from_pem(c, k)
                .map_err(|e| anyhow::anyhow!("--cert/--key: {e}"))?,
            _ => anyhow::bail!(
                "no certificate: give --cert FILE --key FILE, or --self-signed to generate one"
            ),
        }
    };
    if let Some(list) = &args.allow_cca {
        for name in list {
            let quic = tollgate_cca::build(name, &tollgate_cca::Env::default()).is_ok();
            let tcp = FlowKind::parse(&format!("tcp:{name}")).is_ok();
            if !quic && !tcp {
                anyhow::bail!(
                    "--allow-cca: \"{name}\" is neither a registry CCA nor a kernel name"
                );
            }
        }
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads == 0 {
        anyhow::bail!("--threads 0: need at least one worker thread");
    }
    let stop_after = args
        .duration
        .as_deref()
        .map(|d| duration_arg("--duration", d))
        .transpose()?;
    let handshake_timeout = duration_arg("--handshake-timeout", &args.handshake_timeout)?;
    let idle_timeout = duration_arg("--idle-timeout", &args.idle_timeout)?;
    if idle_timeout.is_zero() || handshake_timeout.is_zero() {
        anyhow::bail!("--idle-timeout and --handshake-timeout must be above 0");
    }
    let opts = serve::ServeOptions {
        listen: args.listen.clone(),
        threads,
        crypto,
        allow_cca: args.allow_cca.clone(),
        default_cca: args.default_cca.clone(),
        max_connections: args.max_connections,
        admission: tollgate_transport::Admission {
            retry_threshold: args.retry_threshold.0,
            max_handshakes: args.max_handshakes,
            handshake_timeout: Some(handshake_timeout),
        },
        idle_timeout,
    };
    install_stop_handler_saying("stopping the server (Ctrl-C again to abort at once)")?;
    let server = serve::start(&opts)?;
    for a in &server.addrs {
        eprintln!("serving QUIC and TCP on {a} ({threads} QUIC workers)");
    }
    let metrics = match args.metrics {
        Some(addr) => {
            let live = server.live.clone();
            let metrics = MetricsServer::start_with_own_counters(
                addr,
                ServerConfig::default(),
                "tollgate_serve",
                move || live.render_prometheus(),
            )
            .with_context(|| format!("bind --metrics {addr}"))?;
            eprintln!("metrics on http://{}/metrics", metrics.local_addr());
            Some(metrics)
        }
        None => None,
    };
    let started = Instant::now();
    while !STOP.load(Ordering::Relaxed) && stop_after.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let live = server.live.clone();
    let summary = server.stop();
    if let Some(metrics) = metrics {
        metrics.stop();
    }
    let q = &summary.quic;
    println!(
        "quic: {} connections, {} transfers, {} B sent, {} B received, {} mismatched, {} bad requests, {} CCA refusals",
        live.quic_accepted.load(Ordering::Relaxed),
        q.transfers,
        q.bytes_sent,
        q.bytes_received,
        q.mismatches,
        q.bad_requests,
        q.refused_cca
    );
    let t = &live.tcp;
    println!(
        "tcp: {} connections, {} transfers, {} B sent, {} B received, {} mismatched, {} refused (full), {} CCA refusals",
        t.accepted.load(Ordering::Relaxed),
        t.transfers.load(Ordering::Relaxed),
        t.bytes_sent.load(Ordering::Relaxed),
        t.bytes_received.load(Ordering::Relaxed),
        t.mismatches.load(Ordering::Relaxed),
        t.refused_full.load(Ordering::Relaxed),
        t.refused_cca.load(Ordering::Relaxed)
    );
    let by_reason = |list: Vec<(&str, &str, u64)>| {
        list.iter()
            .map(|(stack, reason, n)| format!("{stack} {reason} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "turned away: {}; retries sent: quic {}",
        by_reason(live.refused_by_reason()),
        live.retries()
    );
    println!("timed out: {}", by_reason(live.timed_out_by_reason()));
    for r in q.reports.iter().take(64) {
        println!(
            "  conn {:>4} cca {:<28} sent {:>12} B received {:>12} B",
            r.handle.0, r.cca.spec, r.app_tx_bytes, r.app_rx_bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The scenario of a quick run: `--flows` as `[[flows]]` groups.
fn quick_scenario(args: &LoadArgs, text: &str) -> anyhow::Result<scenario::Scenario> {
    let groups = parse_quick(text).map_err(|e| anyhow::anyhow!(e))?;
    let mut doc = toml::Table::new();
    doc.insert("name".into(), args.name.clone().into());
    doc.insert(
        "duration".into(),
        args.duration.clone().unwrap_or_else(|| "10s".into()).into(),
    );
    doc.insert("seed".into(), (args.seed.unwrap_or(1) as i64).into());
    // Placeholders: a real network has its own path (not emulated).
    let mut topo = toml::Table::new();
    topo.insert("kind".into(), "dumbbell".into());
    let mut link = toml::Table::new();
    link.insert("rate".into(), "100Gbit".into());
    link.insert("delay".into(), "0ms".into());
    topo.insert("bottleneck".into(), link.into());
    doc.insert("topology".into(), topo.into());
    let flows: Vec<toml::Value> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut t = toml::Table::new();
            // Short: the table shows the full spec in its cca column.
            let base = g.cca.split('(').next().unwrap_or(&g.cca);
            t.insert("name".into(), format!("g{i}-{base}").into());
            t.insert("count".into(), i64::from(g.count).into());
            t.insert("cca".into(), g.cca.clone().into());
            t.insert("rtt".into(), "1ms".into());
            t.insert("reverse".into(), args.reverse.into());
            t.into()
        })
        .collect();
    doc.insert("flows".into(), flows.into());
    let plan = scenario::parse_plan(&toml::to_string(&doc)?)?;
    plan.runs
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no run"))
}

fn file_scenario(args: &LoadArgs, path: &std::path::Path) -> anyhow::Result<scenario::Scenario> {
    let plan = scenario::load(path)?;
    if plan.runs.len() != 1 || plan.seeds.is_some() {
        anyhow::bail!(
            "{}: `tollgate load` runs one point: remove [sweep] and seeds (run one load per \
             point or seed, e.g. with --seed)",
            path.display()
        );
    }
    let mut s = plan.runs.into_iter().next().expect("one run");
    if let Some(d) = &args.duration {
        s.duration_s = duration_arg("--duration", d)?.as_secs_f64();
    }
    if let Some(seed) = args.seed {
        s.seed = seed;
    }
    Ok(s)
}

/// `tollgate load`.
pub fn load(args: LoadArgs) -> anyhow::Result<ExitCode> {
    let s = match (&args.scenario, &args.flows) {
        (Some(p), _) => file_scenario(&args, p)?,
        (None, Some(text)) => quick_scenario(&args, text)?,
        (None, None) => anyhow::bail!("give a scenario file or --flows"),
    };
    load::check(&s)?;
    let threads = match args.threads {
        Some(0) => anyhow::bail!("--threads 0: need at least one worker thread"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let crypto = tls::client_crypto_with_roots_pem(&args.ca)
        .map_err(|e| anyhow::anyhow!("--ca {}: {e}", args.ca.display()))?;
    let opts = LoadOptions {
        server: args.server,
        server_name: args.server_name.clone(),
        crypto,
        bind: args.bind,
        connect_timeout: duration_arg("--connect-timeout", &args.connect_timeout)?,
        threads,
        bind_ports: args.bind_ports.clone(),
        bind_addrs: args.bind_addrs.clone(),
        flow_servers: args.flow_servers.clone(),
        link_rate_bps: args.link_rate,
    };
    load::check_options(&s, &opts)?;
    let note = "real network: the scenario's rtt and topology are not emulated (the path has its \
                own); rtt_ms is each flow's measured minimum RTT (quiche flows: smoothed); bottleneck rate and \
                utilization are not known to the load generator";
    let env = environment::collect("load", Some(args.server), note);
    install_stop_handler_saying(
        "interrupted: closing every flow and writing partial results (Ctrl-C again to abort at once)",
    )?;
    if !args.quiet {
        eprintln!(
            "load {}: {} flows against {} for {:.1} s (Ctrl-C stops and keeps the results so far)",
            s.name,
            s.flow_count(),
            args.server,
            s.duration_s
        );
    }
    let labels: Vec<String> = tollgate_tools::sim::topology::flows(&s)
        .iter()
        .map(|f| f.cca.clone())
        .collect();
    let show = !args.quiet && std::io::stderr().is_terminal();
    let mut last: Option<(f64, Vec<u64>)> = None;
    let mut next_line = 1.0;
    let mut on_sample = |t: f64, bytes: &[u64]| {
        if !show || t < next_line {
            return;
        }
        next_line = t.floor() + 1.0;
        let (t0, b0) = last.clone().unwrap_or((0.0, vec![0; bytes.len()]));
        let dt = (t - t0).max(1e-3);
        let mut per: Vec<(String, f64)> = Vec::new();
        for ((l, b), p) in labels.iter().zip(bytes).zip(&b0) {
            let mbps = (b - p.min(b)) as f64 * 8.0 / dt / 1e6;
            match per.iter_mut().find(|(n, _)| n == l) {
                Some(e) => e.1 += mbps,
                None => per.push((l.clone(), mbps)),
            }
        }
        let total: f64 = per.iter().map(|(_, m)| m).sum();
        let parts: Vec<String> = per.iter().map(|(n, m)| format!("{n} {m:.1}")).collect();
        eprint!(
            "\r\x1b[2K{t:6.1} s  total {total:.1} Mbit/s  |  {}",
            parts.join("  ")
        );
        last = Some((t, bytes.to_vec()));
    };
    let run = load::run(&s, &opts, &STOP, &mut on_sample)?;
    if show {
        eprintln!();
    }
    let r = load::into_results(&s, &run, env);
    let dir = experiment::run_dir(&args.out, &s);
    results::write(&dir, &r)?;
    if !args.no_plots {
        plot::render_run(&dir, &r)?;
    }
    if !args.quiet {
        print!("{}", results::table(&r));
        let late = run
            .extra
            .iter()
            .map(|x| x.start_late_ms)
            .fold(0.0, f64::max);
        println!(
            "latest start: {late:.2} ms after schedule; results in {}",
            dir.display()
        );
    }
    let failed: Vec<String> = r
        .flows
        .iter()
        .filter_map(|f| {
            f.error
                .as_ref()
                .map(|e| format!("flow {} ({}): {e}", f.id, f.cca))
        })
        .collect();
    for f in &failed {
        eprintln!("failed: {f}");
    }
    if r.partial {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

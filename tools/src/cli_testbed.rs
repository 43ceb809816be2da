//! The command-line glue of `tollgate testbed`: options, the router binary,
//! Ctrl-C, results and exit codes. The work is in [`tollgate_tools::testbed`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use clap::Args;
use tollgate_tools::testbed::{self, netns, TestbedOptions};
use tollgate_tools::{experiment, plot, results, scenario};

/// Exit code after Ctrl-C (results written, marked partial).
const EXIT_INTERRUPTED: u8 = 130;

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNALS: AtomicU32 = AtomicU32::new(0);

/// Run a scenario on this machine through namespaces, veths and tollgate-router (root).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo tollgate testbed tools/scenarios/testbed-dumbbell.toml
  sudo tollgate testbed tools/scenarios/testbed-parking-lot.toml
  sudo tollgate testbed my.toml --router-bin target/release/tollgate-router --duration 20s
  sudo tollgate testbed --cleanup        # remove what a crashed or killed run left

Builds a client and a server network namespace joined through tollgate-router
(DPDK net_af_packet ports on two veth pairs, L2), with the scenario's
bottleneck rate, discipline and buffer on the router's egresses and each
flow's rtt emulated by router rules on its 5-tuple; runs `tollgate serve` and
`tollgate load` inside; writes <out>/<name>/results.json in the sim format
(router ports in `ports`, each flow's measured minimum RTT in rtt_ms and the
emulated one in emulated_rtt_ms) and the router's config and report in
<out>/<name>/testbed/. Tollgate QUIC, kernel TCP and quiche flows.

A parking lot (topology.kind = \"parking-lot\", `hops` links) is a line of
Linux bridges, one per node, joined by the router: each link is a pair of
router ports with the discipline, rate and buffer on both egresses. Clients
and servers sit on the nodes before and after the links each flow crosses
(its `hops`), one address per node; each flow's rtt is split evenly over the
links it crosses. Ports in results.json: fwd1..fwdN, rev1..revN, as in sim.

With a [testbed] table in the scenario it runs on the hosts and router ports
the table names instead of namespaces (real hosts over ssh, a 10 GbE NIC's
PCI ports; docs/testbed.md, section On real hosts and NICs); --pmd is then unused.

The router binary: --router-bin, else $TOLLGATE_ROUTER_BIN, else
tollgate-router next to this tollgate binary, else on PATH. Build it with
`cargo build --release -p tollgate-dataplane --features dpdk`.

Every packet lost outside the router's discipline (veths, the router's
AF_PACKET rings and devices, host socket buffers) is counted by where it
happened (`outside_losses` in results.json); a run with any is reported
without fairness numbers and exits 1: the machine could not carry it.

Exit codes: 0 every flow completed, the router's accounting is exact and no
packet was lost outside the discipline; 1 a flow failed, the accounting did
not add up, packets were lost outside the discipline, or the run could not
start; 130
Ctrl-C (torn down, results written and marked partial).")]
pub struct TestbedArgs {
    /// Scenario file (the same file `tollgate sim` and `tollgate load` run).
    #[arg(required_unless_present = "cleanup")]
    pub scenario: Option<PathBuf>,
    /// Remove the namespaces, veths, router processes and DPDK files that
    /// crashed or killed runs left, and exit.
    #[arg(long, conflicts_with = "scenario")]
    pub cleanup: bool,
    /// The tollgate-router binary.
    #[arg(long, value_name = "FILE")]
    pub router_bin: Option<PathBuf>,
    /// The router's DPDK lcore (it busy-polls this CPU).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub router_lcore: u32,
    /// The router's poll-mode driver on the veths: af-packet (a TPACKET
    /// ring per port) or af-xdp (an AF_XDP socket, generic XDP on veth).
    #[arg(long, value_enum, default_value_t = netns::Pmd::AfPacket)]
    pub pmd: netns::Pmd,
    /// Override the file's duration.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Override the file's seed (flow starts and sizes).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Results root; the run writes `<out>/<name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
}

/// The router binary: flag/env, next to this executable, or on PATH.
fn router_bin(args: &TestbedArgs) -> PathBuf {
    if let Some(p) = &args.router_bin {
        return p.clone();
    }
    if let Some(p) = std::env::var_os("TOLLGATE_ROUTER_BIN") {
        return PathBuf::from(p);
    }
    if let Some(sibling) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("tollgate-router")))
        .filter(|p| p.is_file())
    {
        return sibling;
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("tollgate-router");
            if p.is_file() {
                return p;
            }
        }
    }
    PathBuf::from("tollgate-router")
}

/// The `[router]` and `[testbed]` tables as written in the file.
fn raw_tables(path: &Path) -> anyhow::Result<(toml::Table, Option<toml::Value>)> {
    let text = std::fs::read_to_string(path)?;
    let doc: toml::Table = toml::from_str(&text)?;
    let router = doc
        .get("router")
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    Ok((router, doc.get("testbed").cloned()))
}

/// `tollgate testbed`.
pub fn testbed(args: TestbedArgs) -> anyhow::Result<ExitCode> {
    if args.cleanup {
        if !testbed::is_root() {
            anyhow::bail!("tollgate testbed --cleanup needs root: run it with sudo");
        }
        let removed = netns::cleanup_leftovers();
        if removed.is_empty() {
            println!("nothing to clean up");
        }
        for r in removed {
            println!("removed {r}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let path = args.scenario.clone().expect("clap requires a scenario");
    let plan = scenario::load(&path)?;
    if plan.runs.len() != 1 || plan.seeds.is_some() {
        anyhow::bail!(
            "{}: `tollgate testbed` runs one point: remove [sweep] and seeds (use --seed)",
            path.display()
        );
    }
    let mut s = plan.runs.into_iter().next().expect("one run");
    let mut load_args = Vec::new();
    if let Some(d) = &args.duration {
        s.duration_s = tollgate_cca::units::parse_duration(d)
            .map_err(|e| anyhow::anyhow!("--duration \"{d}\": {e}"))?
            .as_secs_f64();
        load_args.extend(["--duration".to_string(), d.clone()]);
    }
    if let Some(seed) = args.seed {
        s.seed = seed;
        load_args.extend(["--seed".to_string(), seed.to_string()]);
    }
    testbed::check(&s)?;
    let (raw, site) = raw_tables(&path)?;
    let work_dir = netns::Names::new(std::process::id()).work_dir();
    let opts = TestbedOptions {
        router_bin: router_bin(&args),
        tollgate_bin: std::env::current_exe()?,
        work_dir: work_dir.clone(),
        scenario_path: path.canonicalize()?,
        router_lcore: args.router_lcore,
        pmd: args.pmd,
        site,
        load_args,
    };
    ctrlc::set_handler(|| {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            STOP.store(true, Ordering::SeqCst);
            eprintln!("\ninterrupted: stopping the flows, then tearing the testbed down");
        } else {
            eprintln!("\nstill tearing down (namespaces, veths, router); please wait");
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))?;
    let quiet = args.quiet;
    let mut log = |m: &str| {
        if !quiet {
            eprintln!("testbed: {m}");
        }
    };
    let result = testbed::run(&s, &raw, &opts, &STOP, &mut log);
    let dir = experiment::run_dir(&args.out, &s);
    // Keep the router's config and logs with the results, even on failure.
    let keep = dir.join("testbed");
    let _ = std::fs::create_dir_all(&keep);
    for f in [
        "router.toml",
        "router.out",
        "router.err",
        "serve.out",
        "serve.err",
        "load.out",
        "load.err",
    ] {
        let _ = std::fs::copy(work_dir.join(f), keep.join(f));
    }
    let _ = std::fs::remove_dir_all(&work_dir);
    let run = result?;
    let r = &run.results;
    results::write(&dir, r)?;
    if !args.no_plots {
        plot::render_run(&dir, r)?;
    }
    if !args.quiet {
        print!("{}", results::table(r));
        for p in &r.ports {
            let drops: Vec<String> = p.dropped.iter().map(|(k, n)| format!("{k}={n}")).collect();
            println!(
                "router {} ({}): received {} transmitted {} dropped [{}] in flight {} accounting {}",
                p.name,
                p.discipline,
                p.received,
                p.transmitted,
                drops.join(" "),
                p.in_flight,
                if p.accounting_exact { "exact" } else { "MISMATCH" }
            );
        }
        println!("results in {}", dir.display());
    }
    let mut failed = false;
    for f in &r.flows {
        if let Some(e) = &f.error {
            eprintln!("failed: flow {} ({}): {e}", f.id, f.cca);
            failed = true;
        }
    }
    if !run.router.accounting_ok || r.ports.iter().any(|p| !p.accounting_exact) {
        eprintln!("error: the router's packet accounting does not add up (see testbed/router.out)");
        failed = true;
    }
    if let Some(lost) = r.outside_losses_text() {
        eprintln!(
            "error: {lost} were lost outside the router's discipline: this machine did not \
             carry the scenario exactly, so Jain's index and the fairness ratio are not \
             reported. Lower topology.bottleneck.rate or the number of flows, or give the \
             router a CPU of its own (--router-lcore); docs/testbed.md has the rates \
             measured here"
        );
        failed = true;
    }
    if run.router_exit != Some(0) {
        eprintln!(
            "error: tollgate-router exited with {:?} (see testbed/router.err)",
            run.router_exit
        );
        failed = true;
    }
    if r.partial || STOP.load(Ordering::Relaxed) {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

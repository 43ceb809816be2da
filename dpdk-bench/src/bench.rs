//! The benchmark driver: a parent that runs one child per case and prints
//! the table, and the child that measures one case.
//!
//! Cases: `forward` (RX burst -> stamp synthetic frame -> TX burst, nothing
//! else) and one per discipline through the full dataplane (classify,
//! delay line, discipline, shaper at line rate, TX). Both stamp the same
//! synthetic frames over the `net_null` RX mbufs, in both directions between
//! two ports, so the ratio isolates the pipeline's cost.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use clap::Parser;
use serde::Serialize;

use tollgate_dataplane::config::RouterConfig;
use tollgate_dataplane::dataplane::{Router, MAX_BURST};
use tollgate_dataplane::eal::{Eal, EthPort, Mempool};
use tollgate_dataplane::mbuf::Burst;
use tollgate_dataplane::synth::Synth;
use tollgate_dpdk_bench::cli::{FrameSize, Heavy, Opts};

/// One measured case, as printed and written to JSON.
#[derive(Debug, Serialize)]
struct Row {
    /// The round (1-based; `--repeat`).
    round: u32,
    case: String,
    lcores: u32,
    frame: String,
    flows: u32,
    /// Mean frame length, bytes (without FCS).
    mean_frame_bytes: f64,
    rx_mpps: f64,
    tx_mpps: f64,
    /// Transmitted frame bytes, Gbit/s.
    tx_gbps: f64,
    /// `tx_mpps` over plain forwarding's in the same run and configuration.
    ratio_to_forward: f64,
    /// `rx_mpps` over plain forwarding's: the packets the lcore took in and
    /// handled, forwarded or dropped by the discipline. Without `--rate`
    /// the link is not congested and the two ratios agree; with it, this
    /// one counts the packets the discipline dropped too (the lcore's cost).
    /// (Before the dataplane transmitted each packet as it arrived, RED and
    /// CHOKe dropped 12-14 % of each received burst on the uncongested
    /// link; router/DPDK.md.)
    rx_ratio_to_forward: f64,
    /// `tx_mpps` over the same case on 1 lcore in the same run (absent
    /// for 1-lcore rows, or when 1 lcore was not measured).
    ratio_to_1_lcore: Option<f64>,
    /// With `--interleave`: the forwarded Mpps of the plain forwarding loop
    /// that alternated with this case in its process, the baseline of this
    /// row's two ratios to forward (absent otherwise: the baseline is the
    /// round's `forward` row).
    paired_forward_mpps: Option<f64>,
    /// With `--interleave`, 2-lcore rows: the forwarded Mpps of the same
    /// case on 1 lcore that alternated with this row's router in its
    /// process, the baseline of `ratio_to_1_lcore` (absent otherwise: the
    /// baseline is the round's 1-lcore row of the case).
    paired_1_lcore_mpps: Option<f64>,
}

impl Row {
    /// The row's line of the table `parent` prints.
    fn print(&self) {
        println!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.2} | {:.3} | {:.3} | {} | {} | {} |",
            self.round,
            self.frame,
            self.flows,
            self.case,
            self.lcores,
            self.rx_mpps,
            self.tx_mpps,
            self.tx_gbps,
            self.ratio_to_forward,
            self.rx_ratio_to_forward,
            opt3(self.ratio_to_1_lcore),
            opt3(self.paired_forward_mpps),
            opt3(self.paired_1_lcore_mpps)
        );
    }
}

/// A figure with three decimals, or `-` when absent.
fn opt3(v: Option<f64>) -> String {
    v.map(|r| format!("{r:.3}")).unwrap_or_else(|| "-".into())
}

/// The JSON file.
#[derive(Debug, Serialize)]
struct Report<'a> {
    seconds: f64,
    /// Rounds asked for (`--repeat`); `rows` holds the ones finished.
    repeat: u32,
    rate: Option<&'a str>,
    /// Heavy hitters (`--heavy`), if any.
    heavy: Option<Heavy>,
    /// `--interleave`'s slice in seconds, if given.
    interleave_slice_s: Option<f64>,
    rows: &'a [Row],
    /// One entry per frame, flows, case and lcores, over the rounds in `rows`.
    summary: Vec<Summary>,
}

/// The median and range of one figure over the rounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    /// `None` for no values; the median of an even count is the mean of
    /// the middle two.
    fn of(values: &[f64]) -> Option<Spread> {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3} ({:.3}-{:.3})", self.median, self.min, self.max)
    }
}

/// One case (frame, flows, case, lcores) over the rounds.
#[derive(Debug, Serialize)]
struct Summary {
    case: String,
    lcores: u32,
    frame: String,
    flows: u32,
    rounds: usize,
    tx_mpps: Spread,
    /// Of each round's ratio to that round's forward.
    ratio_to_forward: Spread,
    rx_ratio_to_forward: Spread,
    ratio_to_1_lcore: Option<Spread>,
    /// Of the rows' `paired_forward_mpps` (`--interleave`).
    paired_forward_mpps: Option<Spread>,
    /// Of the rows' `paired_1_lcore_mpps` (`--interleave`, 2 lcores).
    paired_1_lcore_mpps: Option<Spread>,
}

/// The rows grouped by frame, flows, case and lcores, in the order each
/// first appears.
fn summarize(rows: &[Row]) -> Vec<Summary> {
    let key = |r: &Row| (r.frame.clone(), r.flows, r.case.clone(), r.lcores);
    let mut keys = Vec::new();
    for r in rows {
        if !keys.contains(&key(r)) {
            keys.push(key(r));
        }
    }
    keys.into_iter()
        .filter_map(|k| {
            let group: Vec<&Row> = rows.iter().filter(|r| key(r) == k).collect();
            let spread =
                |f: fn(&Row) -> f64| Spread::of(&group.iter().map(|r| f(r)).collect::<Vec<_>>());
            let optional = |f: fn(&Row) -> Option<f64>| {
                Spread::of(&group.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            let (frame, flows, case, lcores) = k;
            // Every group has a row, so every spread but the optional one is `Some`.
            Some(Summary {
                rounds: group.len(),
                tx_mpps: spread(|r| r.tx_mpps)?,
                ratio_to_forward: spread(|r| r.ratio_to_forward)?,
                rx_ratio_to_forward: spread(|r| r.rx_ratio_to_forward)?,
                ratio_to_1_lcore: optional(|r| r.ratio_to_1_lcore),
                paired_forward_mpps: optional(|r| r.paired_forward_mpps),
                paired_1_lcore_mpps: optional(|r| r.paired_1_lcore_mpps),
                case,
                lcores,
                frame,
                flows,
            })
        })
        .collect()
}

/// Entry point.
pub fn main() -> ExitCode {
    // clap prints the error with a usage line and exits 2 (0 for --help).
    let o = Opts::parse();
    if let Some(h) = o.heavy {
        // The router config's own check, for every combination the run makes.
        for &frame in &o.frame_len {
            for &flows in &o.flows {
                if let Err(e) = frame.synthetic(flows, Some(h)).check_heavy() {
                    eprintln!(
                        "error: --heavy {h} with --flows {flows} --frame-len {frame}: {e}; lower N or raise --flows"
                    );
                    return ExitCode::from(2);
                }
            }
        }
    }
    if let Some(slice) = o.interleave {
        if slice.as_secs_f64() > o.seconds {
            eprintln!(
                "error: --interleave {slice:?} is longer than --seconds {}: each side would run one slice; use a slice of at most a tenth of --seconds",
                o.seconds
            );
            return ExitCode::from(2);
        }
    }
    tollgate_dataplane::logging::init(o.verbose);
    match &o.child {
        Some(case) => child(&o, case),
        None => parent(&o),
    }
}

fn parent(o: &Opts) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot find own executable: {e}");
            return ExitCode::from(1);
        }
    };
    let lcores: Vec<String> = o.lcores.iter().map(u32::to_string).collect();
    println!(
        "tollgate-dpdk-bench: {} s per case, {} round(s), lcores {} (2-lcore layout {}), net_null0 <-> net_null1, shaped rate {}, {}",
        o.seconds,
        o.repeat,
        lcores.join(","),
        o.layout,
        o.rate.as_deref().unwrap_or("link speed"),
        o.heavy.map_or("every flow alike".to_string(), |h| format!(
            "the first {} flows send {} of the frames",
            h.flows, h.share
        ))
    );
    if let Some(slice) = o.interleave {
        println!(
            "1-lcore cases alternate with plain forwarding on net_null2 <-> net_null3 in their process, slices of {slice:?}: their ratios are to that paired forward"
        );
        if o.lcores.contains(&2) {
            println!(
                "2-lcore cases alternate with the same case on 1 lcore on net_null2 <-> net_null3: their ratio to 1 lcore is to that paired router"
            );
        }
    }
    println!("| round | frame | flows | case | lcores | rx Mpps | forwarded Mpps | Gbit/s | ratio to forward | rx ratio to forward | ratio to 1 lcore | paired forward Mpps | paired 1-lcore Mpps |");
    println!("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows: Vec<Row> = Vec::new();
    for round in 1..=o.repeat {
        for &frame in &o.frame_len {
            for &flows in &o.flows {
                let mut base = 0.0;
                let runs = std::iter::once(("forward", 1)).chain(
                    o.cases
                        .iter()
                        .flat_map(|c| o.lcores.iter().map(move |&n| (c.as_str(), n))),
                );
                // The 1-lcore rate of the case being run (case, Mpps).
                let mut one_lcore: Option<(&str, f64)> = None;
                for (case, n) in runs {
                    tracing::info!(round, case, lcores = n, %frame, flows, "running case");
                    let r = match run_child(o, &exe, case, n, frame, flows) {
                        Ok(r) => r,
                        Err(code) => return code,
                    };
                    let (rx, tx, mean) = (r.rx_mpps, r.tx_mpps, r.mean_len);
                    if case == "forward" {
                        base = tx;
                    } else if n == 1 {
                        one_lcore = Some((case, tx));
                    }
                    // The ratios' baseline: the forwarding loop interleaved
                    // with this case (--interleave), else this round's forward.
                    let base = r.paired_forward_mpps.unwrap_or(base);
                    let row = Row {
                        round,
                        case: case.to_string(),
                        lcores: n,
                        frame: frame.to_string(),
                        flows,
                        mean_frame_bytes: mean,
                        rx_mpps: rx,
                        tx_mpps: tx,
                        tx_gbps: tx * mean * 8.0 / 1e3,
                        ratio_to_forward: if base > 0.0 { tx / base } else { 0.0 },
                        rx_ratio_to_forward: if base > 0.0 { rx / base } else { 0.0 },
                        // To the 1-lcore router interleaved with this one
                        // (--interleave), else to this round's 1-lcore row.
                        ratio_to_1_lcore: match (r.paired_1_lcore_mpps, one_lcore) {
                            (Some(b), _) if b > 0.0 => Some(tx / b),
                            (None, Some((c, b))) if c == case && n > 1 && b > 0.0 => Some(tx / b),
                            _ => None,
                        },
                        paired_forward_mpps: r.paired_forward_mpps,
                        paired_1_lcore_mpps: r.paired_1_lcore_mpps,
                    };
                    row.print();
                    rows.push(row);
                    if let Some(path) = &o.json {
                        if let Err(e) = write_json(o, path, &rows) {
                            eprintln!("error: cannot write {}: {e}", path.display());
                            return ExitCode::from(1);
                        }
                    }
                }
            }
        }
    }
    if o.repeat > 1 {
        print_summary(o.repeat, o.interleave.is_some(), &summarize(&rows));
    }
    ExitCode::SUCCESS
}

/// Run one case in a child process: what it measured, or the exit code
/// after printing why it failed.
fn run_child(
    o: &Opts,
    exe: &std::path::Path,
    case: &str,
    lcores: u32,
    frame: FrameSize,
    flows: u32,
) -> Result<ChildResult, ExitCode> {
    let mut cmd = Command::new(exe);
    cmd.args(["--child", case, "--seconds", &o.seconds.to_string()])
        .args([
            "--frame-len",
            &frame.to_string(),
            "--flows",
            &flows.to_string(),
            "--lcores",
            &lcores.to_string(),
            "--layout",
            &o.layout,
        ]);
    if let Some(r) = &o.rate {
        cmd.args(["--rate", r]);
    }
    if let Some(h) = o.heavy {
        cmd.args(["--heavy", &h.to_string()]);
    }
    if let Some(slice) = o.interleave {
        cmd.args(["--interleave", &format!("{}us", slice.as_micros())]);
    }
    let out = cmd
        .args((0..o.verbose).map(|_| "-v"))
        .args(["--"])
        .args(&o.eal_extra)
        .output()
        .map_err(|e| {
            eprintln!("error: cannot run case {case}: {e}");
            ExitCode::from(1)
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(line) = text.lines().find(|l| l.starts_with("RESULT ")) else {
        eprintln!(
            "error: case {case} ({lcores} lcores) failed:\n{}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        );
        return Err(ExitCode::from(3));
    };
    Ok(parse_result(line))
}

/// What the parent keeps of a child's `RESULT` line (see [`result_line`]).
#[derive(Clone, Copy, Debug, PartialEq)]
struct ChildResult {
    rx_mpps: f64,
    tx_mpps: f64,
    mean_len: f64,
    /// The interleaved forwarding loop's forwarded Mpps, if it ran.
    paired_forward_mpps: Option<f64>,
    /// The interleaved 1-lcore router's forwarded Mpps, if it ran.
    paired_1_lcore_mpps: Option<f64>,
}

fn parse_result(line: &str) -> ChildResult {
    let get = |k: &str| {
        line.split_whitespace()
            .find_map(|t| t.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse::<f64>().ok())
    };
    ChildResult {
        rx_mpps: get("rx_mpps").unwrap_or(0.0),
        tx_mpps: get("tx_mpps").unwrap_or(0.0),
        mean_len: get("mean_len").unwrap_or(0.0),
        paired_forward_mpps: get("fwd_tx_mpps"),
        paired_1_lcore_mpps: get("one_tx_mpps"),
    }
}

/// The table of medians and ranges over the rounds.
fn print_summary(repeat: u32, interleaved: bool, summary: &[Summary]) {
    println!();
    let baseline = if interleaved {
        "1-lcore rows' to the forwarding loop paired with them; 2-lcore rows' to forward to that round's forward, to 1 lcore to the 1-lcore router paired with them"
    } else {
        "each round's to that round's forward"
    };
    println!("Over {repeat} rounds: median (min-max); ratios are {baseline}");
    println!("| frame | flows | case | lcores | rounds | forwarded Mpps | ratio to forward | rx ratio to forward | ratio to 1 lcore | paired forward Mpps | paired 1-lcore Mpps |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let opt = |s: Option<Spread>| s.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
    for m in summary {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.frame,
            m.flows,
            m.case,
            m.lcores,
            m.rounds,
            m.tx_mpps,
            m.ratio_to_forward,
            m.rx_ratio_to_forward,
            opt(m.ratio_to_1_lcore),
            opt(m.paired_forward_mpps),
            opt(m.paired_1_lcore_mpps)
        );
    }
}

/// Write the rows so far and their summary to `path`, through a temporary
/// file renamed over it: an interrupt never leaves a half-written file.
fn write_json(o: &Opts, path: &std::path::Path, rows: &[Row]) -> std::io::Result<()> {
    let report = Report {
        seconds: o.seconds,
        repeat: o.repeat,
        rate: o.rate.as_deref(),
        heavy: o.heavy,
        interleave_slice_s: o.interleave.map(|d| d.as_secs_f64()),
        rows,
        summary: summarize(rows),
    };
    let text = serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".part");
    std::fs::write(&tmp, text + "\n")?;
    std::fs::rename(&tmp, path)
}

fn eal_args(o: &Opts, case: &str) -> Vec<String> {
    let lcores = if o.lcores[0] > 1 { "0-1" } else { "0" };
    let mut a: Vec<String> = [
        "-l",
        lcores,
        "--no-huge",
        "--no-pci",
        // No shared configuration files and no telemetry socket: each child
        // has its own file prefix, and would leave 13 MB in /var/run/dpdk
        // per case; with neither, `Eal` removes the empty directory.
        "--no-shconf",
        "--no-telemetry",
        "-m",
        "1024",
        "--log-level=lib.eal:warning",
        "--vdev",
        "net_null0",
        "--vdev",
        "net_null1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if interleaves(o, case) {
        // The paired side's two ports (forwarding loop or 1-lcore router).
        for dev in PAIRED {
            a.extend(["--vdev".to_string(), dev.to_string()]);
        }
    }
    a.push(format!(
        "--file-prefix=tgbench-{case}-{}",
        std::process::id()
    ));
    a.extend(o.eal_extra.iter().cloned());
    a
}

/// Whether this child interleaves its case with a paired side: every
/// discipline case (with plain forwarding on 1 lcore, with the same case
/// on 1 lcore on 2 lcores).
fn interleaves(o: &Opts, case: &str) -> bool {
    o.interleave.is_some() && case != "forward"
}

fn child(o: &Opts, case: &str) -> ExitCode {
    let eal = match Eal::init(&eal_args(o, case)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(3);
        }
    };
    let one = |own| Measured {
        own,
        paired: None,
        slices: 1,
    };
    let r = match o.interleave {
        Some(slice) if interleaves(o, case) => interleaved(o, case, &eal, slice),
        _ if case == "forward" => {
            PlainForward::start(o, &eal, MEASURED).map(|mut f| one(f.run_for(o.seconds)))
        }
        _ => router_for(o, case, &eal, MEASURED, o.lcores[0])
            .and_then(|mut r| route_for(&mut r, Duration::from_secs_f64(o.seconds)))
            .map(one),
    };
    match r {
        Ok(m) => {
            let mean = Synth::new(&o.frame_len[0].synthetic(o.flows[0], o.heavy)).mean_len();
            println!("{}", result_line(case, &m, mean));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

/// The child's one line for the parent: `RESULT case=... mean_len=...
/// slices=...` and the case's `rx`, `tx`, `secs`, `rx_mpps` and `tx_mpps`;
/// with a paired side also its five, prefixed with `fwd_` (forwarding
/// loop) or `one_` (1-lcore router).
fn result_line(case: &str, m: &Measured, mean_len: f64) -> String {
    let mut line = format!(
        "RESULT case={case} mean_len={mean_len:.1} slices={} {}",
        m.slices,
        m.own.keys("")
    );
    if let Some((side, counted)) = m.paired {
        line.push(' ');
        line += &counted.keys(side.prefix());
    }
    line
}

/// The baseline: RX burst -> stamp -> TX burst between two net_null ports,
/// in both directions, with its own mempool.
struct PlainForward {
    // Field order is drop order: the ports stop before their pool goes.
    ports: [EthPort; 2],
    _pool: Mempool,
    synth: [Synth; 2],
    rx: Burst<MAX_BURST>,
    tx: Burst<MAX_BURST>,
}

impl PlainForward {
    /// Start `devices` with a pool of its own, stamping `o`'s first frame
    /// length and flow count. One per process: the routers beside it name
    /// their pools `tollgate_pool*`.
    fn start(o: &Opts, eal: &Eal, devices: [&str; 2]) -> Result<Self, String> {
        let pool = Mempool::new("bench_pool", 16_383, eal).map_err(|e| e.to_string())?;
        let port = |dev: &str| {
            let id = eal.find_port(dev).map_err(|e| e.to_string())?;
            EthPort::start(id, 1, 1024, 1024, &pool).map_err(|e| e.to_string())
        };
        let ports = [port(devices[0])?, port(devices[1])?];
        let syn = o.frame_len[0].synthetic(o.flows[0], o.heavy);
        Ok(PlainForward {
            ports,
            _pool: pool,
            synth: [Synth::new(&syn), Synth::new(&syn)],
            rx: Burst::default(),
            tx: Burst::default(),
        })
    }

    /// Forward for `seconds`.
    fn run_for(&mut self, seconds: f64) -> Counted {
        let (a, b) = (self.ports[0].id, self.ports[1].id);
        let (mut nrx, mut ntx) = (0u64, 0u64);
        let start = Instant::now();
        let mut iter = 0u32;
        loop {
            for (i, (from, to)) in [(a, b), (b, a)].into_iter().enumerate() {
                nrx += self.rx.rx_upto(from, 0, 32) as u64;
                for mut m in self.rx.drain() {
                    self.synth[i].stamp(&mut m);
                    let _ = self.tx.push(m);
                }
                ntx += self.tx.tx(to, 0).0 as u64;
            }
            iter = iter.wrapping_add(1);
            // Every 64 iterations, as the router's loop checks its end: a
            // slice of `--interleave` then overshoots by at most 4,096
            // packets (one clock read per 4,096 packets costs nothing here).
            if iter.is_multiple_of(64) && start.elapsed().as_secs_f64() >= seconds {
                break;
            }
        }
        Counted {
            rx: nrx,
            tx: ntx,
            secs: start.elapsed().as_secs_f64(),
        }
    }
}

/// The ports of the measured case.
const MEASURED: [&str; 2] = ["net_null0", "net_null1"];
/// The ports of the paired side (`--interleave`).
const PAIRED: [&str; 2] = ["net_null2", "net_null3"];

/// The full dataplane with `discipline` on both egress ports of `devices`
/// at line rate, or shaped to `--rate`, on `lcores` lcores (2: the
/// `--layout` pipeline on lcores 0 and 1).
fn router_for(
    o: &Opts,
    discipline: &str,
    eal: &Eal,
    devices: [&str; 2],
    lcores: u32,
) -> Result<Router, String> {
    let syn = o.frame_len[0].synthetic(o.flows[0], o.heavy);
    let rate = o
        .rate
        .as_ref()
        .map(|r| format!("rate = \"{r}\"\n"))
        .unwrap_or_default();
    let port = |dev: &str, peer: &str| {
        format!(
            "[[ports]]\ndevice = \"{dev}\"\npeer = \"{peer}\"\nsynthetic = {{ flows = {}, frame_len = {}, imix = {}, heavy_flows = {}, heavy_share = {} }}\n[ports.egress]\ndiscipline = \"{discipline}\"\n{rate}",
            syn.flows, syn.frame_len, syn.imix, syn.heavy_flows, syn.heavy_share
        )
    };
    let [a, b] = devices;
    // 2 lcores: the pipeline, RX/classify worker on lcore 1, the
    // scheduler of both egress ports on lcore 0 (the main lcore).
    let pipeline = match (lcores > 1, o.layout.as_str()) {
        (false, _) => String::new(),
        (true, "two-workers") => {
            // Worker lcore 0 polls the first port, whose frames leave
            // through the second, scheduled on lcore 0 too; likewise lcore 1.
            format!("[pipeline]\nworkers = [0, 1]\nschedulers = {{ {a} = 1, {b} = 0 }}\n")
        }
        (true, _) => format!("[pipeline]\nworkers = [1]\nschedulers = {{ {a} = 0, {b} = 0 }}\n"),
    };
    let text = format!(
        "stats_interval = \"0s\"\nhash_seed = 1\nmbufs = 16383\n{pipeline}{}{}",
        port(a, b),
        port(b, a)
    );
    let cfg = RouterConfig::parse(&text).map_err(|e| e.to_string())?;
    Router::new(&cfg, eal).map_err(|e| e.to_string())
}

/// Run `router` for `dur`.
fn route_for(router: &mut Router, dur: Duration) -> Result<Counted, String> {
    let t0 = router.clock.now();
    let s0 = router.snapshot(t0).totals();
    router
        .run_pipeline(Some(t0 + dur), None, None)
        .map_err(|e| e.to_string())?;
    let t1 = router.clock.now();
    let s1 = router.snapshot(t1).totals();
    Ok(Counted {
        rx: s1.rx - s0.rx,
        tx: s1.tx - s0.tx,
        secs: t1.saturating_since(t0).as_secs_f64(),
    })
}

/// Frames received and forwarded by one side of a child, and the seconds
/// it ran them in.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Counted {
    rx: u64,
    tx: u64,
    secs: f64,
}

impl Counted {
    /// Add another slice.
    fn add(&mut self, part: Counted) {
        self.rx += part.rx;
        self.tx += part.tx;
        self.secs += part.secs;
    }

    /// `rx`, `tx`, `secs`, `rx_mpps` and `tx_mpps` as `key=value`, each key
    /// prefixed with `prefix`.
    fn keys(&self, prefix: &str) -> String {
        let mpps = |n: u64| n as f64 / self.secs / 1e6;
        format!(
            "{prefix}rx={} {prefix}tx={} {prefix}secs={:.3} {prefix}rx_mpps={:.4} {prefix}tx_mpps={:.4}",
            self.rx,
            self.tx,
            self.secs,
            mpps(self.rx),
            mpps(self.tx)
        )
    }
}

/// What one child measured: the case, and with `--interleave` the side
/// that alternated with it in the same process.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Measured {
    /// The case.
    own: Counted,
    /// The interleaved side and what it counted.
    paired: Option<(Side, Counted)>,
    /// Slices each side ran (1 without `--interleave`).
    slices: u32,
}

/// What an interleaved case alternates with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// Plain forwarding (a 1-lcore case): the baseline of its ratios to forward.
    Forward,
    /// The same case on 1 lcore (a 2-lcore case): the baseline of its
    /// ratio to 1 lcore.
    OneLcore,
}

impl Side {
    /// The prefix of its keys in the result line.
    fn prefix(self) -> &'static str {
        match self {
            Side::Forward => "fwd_",
            Side::OneLcore => "one_",
        }
    }
}

/// The paired side of an interleaved child, on net_null2/3.
enum Paired {
    // Boxed: both hold kilobytes of burst buffers and lane state.
    Forward(Box<PlainForward>),
    OneLcore(Box<Router>),
}

impl Paired {
    fn side(&self) -> Side {
        match self {
            Paired::Forward(_) => Side::Forward,
            Paired::OneLcore(_) => Side::OneLcore,
        }
    }

    fn run_for(&mut self, slice: Duration) -> Result<Counted, String> {
        match self {
            Paired::Forward(f) => Ok(f.run_for(slice.as_secs_f64())),
            Paired::OneLcore(r) => route_for(r, slice),
        }
    }
}

/// The case and its paired side in one process, in alternating slices of
/// `slice` until each has run `--seconds`: the router on net_null0/1, the
/// paired side on net_null2/3 with its own pool. On 1 lcore the paired side
/// is plain forwarding; on 2 lcores, the same case on 1 lcore (a second
/// router, no pipeline). Both see the same minutes of a shared machine,
/// so a drift of its speed moves both alike and cancels in their ratio.
fn interleaved(o: &Opts, case: &str, eal: &Eal, slice: Duration) -> Result<Measured, String> {
    let lcores = o.lcores[0];
    let mut paired = if lcores == 1 {
        Paired::Forward(Box::new(PlainForward::start(o, eal, PAIRED)?))
    } else {
        Paired::OneLcore(Box::new(router_for(o, case, eal, PAIRED, 1)?))
    };
    let mut router = router_for(o, case, eal, MEASURED, lcores)?;
    let (mut routed, mut other) = (Counted::default(), Counted::default());
    let mut slices = 0u32;
    while routed.secs < o.seconds || other.secs < o.seconds {
        // Alternate which side goes first (ABBA), so neither always
        // follows the other.
        let paired_first = slices.is_multiple_of(2);
        if paired_first {
            other.add(paired.run_for(slice)?);
        }
        routed.add(route_for(&mut router, slice)?);
        if !paired_first {
            other.add(paired.run_for(slice)?);
        }
        slices += 1;
    }
    Ok(Measured {
        own: routed,
        paired: Some((paired.side(), other)),
        slices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use tollgate_dpdk_bench::cli::{frame_size, heavy, slice};

    #[test]
    fn command_line_is_consistent() {
        Opts::command().debug_assert();
    }

    fn row(round: u32, case: &str, lcores: u32, tx: f64, base: f64, one: Option<f64>) -> Row {
        Row {
            round,
            case: case.into(),
            lcores,
            frame: "64".into(),
            flows: 1024,
            mean_frame_bytes: 64.0,
            rx_mpps: tx,
            tx_mpps: tx,
            tx_gbps: tx * 64.0 * 8.0 / 1e3,
            ratio_to_forward: tx / base,
            rx_ratio_to_forward: tx / base,
            ratio_to_1_lcore: one.map(|b| tx / b),
            paired_forward_mpps: None,
            paired_1_lcore_mpps: None,
        }
    }

    /// The parent reads back what the child prints, the paired forward
    /// included, and finds no paired forward in a plain child's line.
    #[test]
    fn a_result_line_round_trips() {
        let counted = |rx, tx| Counted { rx, tx, secs: 0.5 };
        let m = Measured {
            own: counted(3_000_000, 2_000_000),
            paired: Some((Side::Forward, counted(9_000_000, 8_000_000))),
            slices: 5,
        };
        let line = result_line("red", &m, 64.0);
        assert!(
            line.starts_with("RESULT case=red ") && line.contains(" slices=5"),
            "{line}"
        );
        let r = parse_result(&line);
        assert_eq!((r.rx_mpps, r.tx_mpps, r.mean_len), (6.0, 4.0, 64.0));
        assert_eq!(
            (r.paired_forward_mpps, r.paired_1_lcore_mpps),
            (Some(16.0), None)
        );
        let two = Measured {
            paired: Some((Side::OneLcore, counted(4_000_000, 3_000_000))),
            ..m
        };
        let r = parse_result(&result_line("red", &two, 64.0));
        assert_eq!(
            (r.paired_forward_mpps, r.paired_1_lcore_mpps),
            (None, Some(6.0))
        );
        let plain = result_line("red", &Measured { paired: None, ..m }, 64.0);
        assert!(
            !plain.contains("fwd_") && !plain.contains("one_"),
            "{plain}"
        );
        let r = parse_result(&plain);
        assert_eq!((r.paired_forward_mpps, r.paired_1_lcore_mpps), (None, None));
    }

    #[test]
    fn an_interleave_slice_has_a_unit_and_a_range() {
        assert_eq!(slice("100ms"), Ok(Duration::from_millis(100)));
        assert!(slice("100").unwrap_err().contains("no unit"));
        assert!(slice("500us").unwrap_err().contains("1ms..=10s"));
        assert!(slice("11s").unwrap_err().contains("1ms..=10s"));
    }

    #[test]
    fn the_spread_is_median_and_range() {
        assert_eq!(Spread::of(&[]), None);
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(s.to_string(), "2.500 (1.000-4.000)");
    }

    /// Each case's ratios are taken per round, then summarised: the median
    /// ratio is not the ratio of the medians.
    #[test]
    fn the_summary_groups_rounds_per_case() {
        let rows = [
            row(1, "forward", 1, 20.0, 20.0, None),
            row(1, "red", 1, 10.0, 20.0, None),
            row(1, "red", 2, 18.0, 20.0, Some(10.0)),
            row(2, "forward", 1, 30.0, 30.0, None),
            row(2, "red", 1, 12.0, 30.0, None),
            row(2, "red", 2, 21.0, 30.0, Some(12.0)),
            row(3, "forward", 1, 25.0, 25.0, None),
            row(3, "red", 1, 20.0, 25.0, None),
        ];
        let m = summarize(&rows);
        let keys: Vec<(&str, u32, usize)> = m
            .iter()
            .map(|m| (m.case.as_str(), m.lcores, m.rounds))
            .collect();
        assert_eq!(keys, [("forward", 1, 3), ("red", 1, 3), ("red", 2, 2)]);
        assert_eq!(m[0].tx_mpps.median, 25.0);
        // red: 10/20, 12/30, 20/25 -> 0.4, 0.5, 0.8 (ratio of medians: 12/25).
        let r = m[1].ratio_to_forward;
        assert_eq!((r.median, r.min, r.max), (0.5, 0.4, 0.8));
        assert_eq!(m[1].ratio_to_1_lcore, None);
        let two = m[2].ratio_to_1_lcore.unwrap();
        assert_eq!(
            (two.min, two.max, two.median),
            (1.75, 1.8, (1.75 + 1.8) / 2.0)
        );
        assert_eq!(m[2].paired_1_lcore_mpps, None);
        // Paired figures are summarised over the rows that have them.
        let mut paired = rows;
        paired[2].paired_1_lcore_mpps = Some(9.0);
        paired[5].paired_1_lcore_mpps = Some(11.0);
        let p = summarize(&paired)[2].paired_1_lcore_mpps.unwrap();
        assert_eq!((p.median, p.min, p.max), (10.0, 9.0, 11.0));
    }

    #[test]
    fn options_and_eal_arguments() {
        let o = Opts::try_parse_from([
            "b",
            "--seconds",
            "1.5",
            "--flows",
            "8",
            "-v",
            "--",
            "--log-level=8",
        ])
        .unwrap();
        assert_eq!(
            (o.seconds, o.flows.clone(), o.frame_len.clone(), o.verbose),
            (1.5, vec![8], vec![FrameSize::Fixed(64)], 1)
        );
        assert_eq!(o.eal_extra, ["--log-level=8"]);
        assert_eq!(
            o.cases,
            ["droptail", "red", "choke", "cebinae", "rrmqs", "codel", "fq_codel", "dualpi2"]
        );
        assert_eq!(o.repeat, 1);
        let m = Opts::try_parse_from([
            "b",
            "--frame-len",
            "64,512,1514,IMIX",
            "--flows",
            "1,1024,100000",
            "--cases",
            "red,rrmqs",
            "--rate",
            "1Gbit",
            "--json",
            "x.json",
        ])
        .unwrap();
        assert_eq!(
            m.frame_len,
            [
                FrameSize::Fixed(64),
                FrameSize::Fixed(512),
                FrameSize::Fixed(1514),
                FrameSize::Imix
            ]
        );
        assert_eq!(m.flows, [1, 1024, 100_000]);
        assert_eq!(m.cases, ["red", "rrmqs"]);
        assert_eq!(m.rate.as_deref(), Some("1Gbit"));
        assert_eq!(o.lcores, [1]);
        let l = Opts::try_parse_from(["b", "--lcores", "1,2"]).unwrap();
        assert_eq!(l.lcores, [1, 2]);
        assert_eq!(o.layout, "split");
        assert!(Opts::try_parse_from(["b", "--layout", "two-workers"]).is_ok());
        assert!(Opts::try_parse_from(["b", "--layout", "x"]).is_err());
        // The child gets one frame size back in the form it parses.
        assert_eq!(
            frame_size(&FrameSize::Imix.to_string()),
            Ok(FrameSize::Imix)
        );
        assert!(FrameSize::Imix.synthetic(1, None).imix);
        let h = Opts::try_parse_from(["b", "--heavy", "16:0.75"]).unwrap();
        assert_eq!(
            h.heavy,
            Some(Heavy {
                flows: 16,
                share: 0.75
            })
        );
        // The child gets it back in the form it parses.
        assert_eq!(heavy(&h.heavy.unwrap().to_string()), Ok(h.heavy.unwrap()));
        let syn = FrameSize::Fixed(64).synthetic(1024, h.heavy);
        assert_eq!((syn.heavy_flows, syn.heavy_share), (16, 0.75));
        for bad in [
            &["b", "--seconds", "0"][..],
            &["b", "--frame-len", "59"],
            &["b", "--frame-len", "64,1518"],
            &["b", "--flows", "0"],
            &["b", "--cases", "forward"],
            &["b", "--lcores", "3"],
            &["b", "--lcores", "0"],
            &["b", "--vdev", "x"],
            &["b", "--heavy", "16"],
            &["b", "--heavy", "0:0.5"],
            &["b", "--heavy", "16:1"],
            &["b", "--heavy", "16:0"],
            &["b", "--repeat", "0"],
            &["b", "--repeat", "101"],
        ] {
            let e = Opts::try_parse_from(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }
}

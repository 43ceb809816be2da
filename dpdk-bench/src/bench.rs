//! The benchmark driver: a parent that runs one child per case and prints
//! the table, and the child that measures one case.
//!
//! Cases: `forward` (RX burst -> stamp synthetic frame -> TX burst, nothing
//! else) and one per discipline through the full dataplane (classify,
//! delay line, discipline, shaper at line rate, TX). Both stamp the same
//! synthetic frames over the `net_null` RX mbufs, in both directions between
//! two ports, so the ratio isolates the pipeline's cost.

use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::{ArgAction, Parser};

use tollgate_dataplane::config::{parse_duration, RouterConfig, SyntheticConfig};
use tollgate_dataplane::dataplane::{Router, MAX_BURST};
use tollgate_dataplane::eal::{Eal, EthPort, Mempool};
use tollgate_dataplane::mbuf::Burst;
use tollgate_dataplane::synth::Synth;

const CASES: [&str; 6] = ["forward", "droptail", "red", "choke", "cebinae", "rrmqs"];

/// What `--help` prints after the options.
const AFTER_HELP: &str = "\
Each case runs in a child process of this binary (EAL initialises once per
process) on lcore 0 with two net_null ports, `--no-huge --no-pci`; no NICs
or hugepages are needed, but DPDK needs root.

Example:
  tollgate-dpdk-bench --seconds 2 --frame-len 64 --flows 1024
  tollgate-dpdk-bench --seconds 1 -- --log-level=pmd.net.null:debug

Reference: router/DPDK.md (building with DPDK, the dataplane, the benchmark).

Logging: warnings by default; -v info, -vv debug, -vvv trace; RUST_LOG,
when set, takes precedence.

Exit codes: 0 ok; 1 cannot run a child process; 2 bad command line;
3 EAL or port failure, or a case failed (its output is printed).";

/// Mpps per core of the Tollgate DPDK dataplane for each queue discipline
/// against a plain forwarding loop.
///
/// Sends synthetic UDP traffic through two DPDK net_null ports, once with a
/// bare RX -> TX loop and once per discipline through the full dataplane,
/// and prints a table with each case's ratio to plain forwarding.
#[derive(Parser, Debug)]
#[command(name = "tollgate-dpdk-bench", version, after_help = AFTER_HELP)]
struct Opts {
    /// Seconds per case (0 < s <= 60).
    #[arg(long, default_value_t = 2.0, value_parser = seconds)]
    seconds: f64,
    /// Synthetic frame length in bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(60..=1514))]
    frame_len: u16,
    /// Distinct synthetic UDP flows.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    flows: u32,
    /// Internal: run one case (the parent starts a child per case).
    #[arg(long, hide = true, value_parser = clap::builder::PossibleValuesParser::new(CASES))]
    child: Option<String>,
    /// More log output on stderr: -v info, -vv debug, -vvv trace.
    #[arg(short, long, action = ArgAction::Count)]
    verbose: u8,
    /// Extra DPDK EAL arguments, after `--` (appended to the built-in ones).
    #[arg(last = true, value_name = "EAL_ARGS")]
    eal_extra: Vec<String>,
}

fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v > 0.0 && v <= 60.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not in (0, 60]"))
    }
}

/// Entry point.
pub fn main() -> ExitCode {
    // clap prints the error with a usage line and exits 2 (0 for --help).
    let o = Opts::parse();
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
    println!("tollgate-dpdk-bench: {} B frames, {} flows, {} s per case, 1 lcore, net_null0 <-> net_null1", o.frame_len, o.flows, o.seconds);
    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    for case in CASES {
        tracing::info!(case, "running case");
        let out = Command::new(&exe)
            .args([
                "--child",
                case,
                "--seconds",
                &o.seconds.to_string(),
                "--frame-len",
                &o.frame_len.to_string(),
                "--flows",
                &o.flows.to_string(),
            ])
            .args((0..o.verbose).map(|_| "-v"))
            .args(["--"])
            .args(&o.eal_extra)
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                eprintln!("error: cannot run case {case}: {e}");
                return ExitCode::from(1);
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(line) = text.lines().find(|l| l.starts_with("RESULT ")) else {
            eprintln!(
                "error: case {case} failed:\n{}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            );
            return ExitCode::from(3);
        };
        let get = |k: &str| {
            line.split_whitespace()
                .find_map(|t| t.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        rows.push((case.to_string(), get("rx_mpps"), get("tx_mpps")));
    }
    let base = rows.first().map(|r| r.2).unwrap_or(0.0);
    println!("| case | rx Mpps | forwarded Mpps | ratio to forward |");
    println!("|---|---:|---:|---:|");
    for (case, rx, tx) in &rows {
        let ratio = if base > 0.0 { tx / base } else { 0.0 };
        println!("| {case} | {rx:.3} | {tx:.3} | {ratio:.3} |");
    }
    ExitCode::SUCCESS
}

fn eal_args(o: &Opts, case: &str) -> Vec<String> {
    let mut a: Vec<String> = [
        "-l",
        "0",
        "--no-huge",
        "--no-pci",
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
    a.push(format!(
        "--file-prefix=tgbench-{case}-{}",
        std::process::id()
    ));
    a.extend(o.eal_extra.iter().cloned());
    a
}

fn child(o: &Opts, case: &str) -> ExitCode {
    let eal = match Eal::init(&eal_args(o, case)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(3);
        }
    };
    let r = if case == "forward" {
        plain_forward(o, &eal)
    } else {
        through_router(o, case, &eal)
    };
    match r {
        Ok((rx, tx, secs)) => {
            println!(
                "RESULT case={case} rx={rx} tx={tx} secs={secs:.3} rx_mpps={:.4} tx_mpps={:.4}",
                rx as f64 / secs / 1e6,
                tx as f64 / secs / 1e6
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

/// RX burst -> stamp -> TX burst between net_null0 and net_null1.
fn plain_forward(o: &Opts, eal: &Eal) -> Result<(u64, u64, f64), String> {
    let pool = Mempool::new("bench_pool", 16_383, eal).map_err(|e| e.to_string())?;
    let p0 = EthPort::start(
        eal.find_port("net_null0").map_err(|e| e.to_string())?,
        1,
        1024,
        1024,
        &pool,
    )
    .map_err(|e| e.to_string())?;
    let p1 = EthPort::start(
        eal.find_port("net_null1").map_err(|e| e.to_string())?,
        1,
        1024,
        1024,
        &pool,
    )
    .map_err(|e| e.to_string())?;
    let syn = SyntheticConfig {
        flows: o.flows,
        frame_len: o.frame_len,
        variants: Vec::new(),
    };
    let mut s = [Synth::new(&syn), Synth::new(&syn)];
    let mut rx: Burst<MAX_BURST> = Burst::default();
    let mut tx: Burst<MAX_BURST> = Burst::default();
    let (mut nrx, mut ntx) = (0u64, 0u64);
    let start = Instant::now();
    let mut iter = 0u32;
    loop {
        for (i, (a, b)) in [(p0.id, p1.id), (p1.id, p0.id)].into_iter().enumerate() {
            nrx += rx.rx_upto(a, 0, 32) as u64;
            for mut m in rx.drain() {
                s[i].stamp(&mut m);
                let _ = tx.push(m);
            }
            ntx += tx.tx(b, 0).0 as u64;
        }
        iter = iter.wrapping_add(1);
        if iter.is_multiple_of(1024) && start.elapsed().as_secs_f64() >= o.seconds {
            break;
        }
    }
    Ok((nrx, ntx, start.elapsed().as_secs_f64()))
}

/// The full dataplane with `discipline` on both egress ports at line rate.
fn through_router(o: &Opts, discipline: &str, eal: &Eal) -> Result<(u64, u64, f64), String> {
    let port = |dev: &str, peer: &str| {
        format!(
            "[[ports]]\ndevice = \"{dev}\"\npeer = \"{peer}\"\nsynthetic = {{ flows = {}, frame_len = {} }}\n[ports.egress]\ndiscipline = \"{discipline}\"\n",
            o.flows, o.frame_len
        )
    };
    let text = format!(
        "stats_interval = \"0s\"\nhash_seed = 1\nmbufs = 16383\n{}{}",
        port("net_null0", "net_null1"),
        port("net_null1", "net_null0")
    );
    let cfg = RouterConfig::parse(&text).map_err(|e| e.to_string())?;
    let mut router = Router::new(&cfg, eal).map_err(|e| e.to_string())?;
    let dur = parse_duration(&format!("{}s", o.seconds))?;
    let t0 = router.clock.now();
    let s0 = router.snapshot(t0).totals();
    router.run(Some(t0 + dur), None, |_| {});
    let t1 = router.clock.now();
    let s1 = router.snapshot(t1).totals();
    let secs = t1.saturating_since(t0).as_secs_f64();
    Ok((s1.rx - s0.rx, s1.tx - s0.tx, secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Opts::command().debug_assert();
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
            (o.seconds, o.flows, o.frame_len, o.verbose),
            (1.5, 8, 64, 1)
        );
        assert_eq!(o.eal_extra, ["--log-level=8"]);
        for bad in [
            &["b", "--seconds", "0"][..],
            &["b", "--frame-len", "59"],
            &["b", "--flows", "0"],
            &["b", "--vdev", "x"],
        ] {
            let e = Opts::try_parse_from(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }
}

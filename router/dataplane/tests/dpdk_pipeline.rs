//! The multi-core pipeline (`[pipeline]`: RX/classify workers -> rings ->
//! one scheduler lcore per egress) on in-memory ports:
//!
//! - exact accounting on the 2-lcore path under at least 2x overload, for
//!   every discipline, in both layouts (worker on lcore 1 + scheduler on
//!   lcore 0; "two workers": each lcore a worker and a scheduler);
//! - per-flow order across the worker -> scheduler hand-off, read from a
//!   capture of the forwarded frames (the synthetic frames carry per-flow
//!   sequence numbers), with two workers feeding one scheduler;
//! - the shaped rate within 1 % at 1 and 2 lcores, with the default shaper
//!   bucket (sized from the rate).
//!
//! Each run is a separate `tollgate-router` process. Without root or a
//! working EAL each test prints `SKIP: <reason>` (and fails under CI=true).
#![cfg(feature = "dpdk")]

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use tollgate_tests::router_run::*;
use tollgate_tests::skip;

/// EAL arguments with an explicit lcore list (`-l 0-1`) or map (`--lcores`).
fn eal(prefix: &str, lcores: &[&str]) -> Vec<String> {
    eal_args_on(lcores, prefix, &["net_null0", "net_null1"])
}

/// Two net_null ports with synthetic traffic both ways; `pipeline` is the
/// `[pipeline]` table (or nothing: the single-lcore loop).
fn config(pipeline: &str, egress: &str, frame_len: u16, extra: &str) -> String {
    format!(
        r#"
stats_interval = "0s"
hash_seed = 1
{extra}
{pipeline}
[[ports]]
device = "net_null0"
peer = "net_null1"
synthetic = {{ flows = 32, frame_len = {frame_len} }}
[ports.egress]
{egress}
[[ports]]
device = "net_null1"
peer = "net_null0"
synthetic = {{ flows = 8, frame_len = {f1} }}
[ports.egress]
{egress}
"#,
        f1 = frame_len + 64
    )
}

/// Each lcore is a worker (lcore 0 polls net_null0, lcore 1 net_null1)
/// and the scheduler of the port that worker's frames leave through.
const TWO_WORKERS: &str =
    "[pipeline]\nworkers = [0, 1]\nschedulers = { net_null0 = 1, net_null1 = 0 }\n";

const TWO_LCORES: &str =
    "[pipeline]\nworkers = [1]\nschedulers = { net_null0 = 0, net_null1 = 0 }\n";

#[test]
fn two_lcore_pipeline_keeps_exact_accounting_under_overload_for_every_discipline() {
    const NAME: &str =
        "two_lcore_pipeline_keeps_exact_accounting_under_overload_for_every_discipline";
    if let Err(r) = require_root() {
        return skip(NAME, &r);
    }
    let cases = [
        (
            "droptail",
            "discipline = \"droptail\"\nlimit = 500",
            "drop_overlimit",
        ),
        ("red", r#"discipline = "red""#, "drop_early"),
        ("choke", r#"discipline = "choke""#, "drop_choke_match"),
        ("cebinae", "discipline = \"cebinae\"\ntau = 0.05", ""),
        ("rrmqs", r#"discipline = "rrmqs""#, ""),
    ];
    // Both 2-lcore layouts: worker + scheduler, and "two workers" (each
    // lcore RX of one port and the egress of the other).
    let layouts = [
        ("split", TWO_LCORES, "pipeline worker lcore=1"),
        ("two-workers", TWO_WORKERS, "pipeline worker lcore=0"),
    ];
    for ((name, disc, reason), (layout, pipeline, marker)) in cases
        .iter()
        .flat_map(|c| layouts.iter().map(move |l| (*c, *l)))
    {
        let dir = scratch(&format!("pipe-acct-{name}-{layout}"));
        // 64-byte frames at 200 Mbit/s: net_null offers whatever the worker
        // polls, far above the shaped rate (checked below: at least 2x).
        let egress = format!("rate = \"200Mbit\"\ndelay = \"1ms\"\n{disc}");
        let run = run_router(
            &dir,
            &config(pipeline, &egress, 64, ""),
            "800ms",
            &eal(&format!("tg-pipe-acct-{name}-{layout}"), &["-l", "0-1"]),
        );
        if let Some(r) = run.eal_unavailable() {
            return skip(NAME, &r);
        }
        assert_eq!(
            run.code,
            Some(0),
            "{name} {layout}: router failed:\n{}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(
            run.stdout.contains(marker) && run.stdout.contains("pipeline scheduler lcore=0"),
            "{name} {layout}: not the 2-lcore pipeline:\n{}",
            run.stdout
        );
        let (rx, tx, _, _) = run.exact_totals(&format!("{name} {layout}"));
        assert!(
            tx > 0,
            "{name} {layout}: nothing transmitted: {}",
            run.stdout
        );
        assert!(
            rx >= 2 * tx,
            "{name} {layout}: not overloaded 2x (rx={rx} tx={tx})"
        );
        for port in ["net_null0", "net_null1"] {
            let l = run.lane(port);
            let drops: u64 = l
                .iter()
                .filter(|(k, _)| k.starts_with("drop_"))
                .map(|(_, v)| v.parse::<u64>().unwrap_or(0))
                .sum();
            // Per lane: received = transmitted + dropped + in flight (the
            // ring drops are outside the lane's pipeline).
            assert_eq!(
                num(&l, "received"),
                num(&l, "transmitted") + drops + num(&l, "in_flight"),
                "{name} {layout} {port}: {l:?}"
            );
            assert!(
                drops + num(&l, "ring_full") > 0,
                "{name} {layout} {port}: no drops under overload: {l:?}"
            );
            if !reason.is_empty() {
                assert!(
                    num(&l, reason) > 0,
                    "{name} {layout} {port}: no {reason}: {l:?}"
                );
            }
        }
    }
}

/// Read a pcap file: (original length, captured bytes) per record.
fn pcap_frames(bytes: &[u8]) -> Vec<(usize, &[u8])> {
    let mut out = Vec::new();
    let mut off = 24;
    while off + 16 <= bytes.len() {
        let incl = u32::from_le_bytes([
            bytes[off + 8],
            bytes[off + 9],
            bytes[off + 10],
            bytes[off + 11],
        ]) as usize;
        let start = off + 16;
        if start + incl > bytes.len() {
            break;
        }
        let orig = u32::from_le_bytes([
            bytes[off + 12],
            bytes[off + 13],
            bytes[off + 14],
            bytes[off + 15],
        ]) as usize;
        out.push((orig, &bytes[start..start + incl]));
        off = start + incl;
    }
    out
}

#[test]
fn flows_keep_their_order_across_the_worker_to_scheduler_hand_off() {
    const NAME: &str = "flows_keep_their_order_across_the_worker_to_scheduler_hand_off";
    if let Err(r) = require_root() {
        return skip(NAME, &r);
    }
    let dir = scratch("pipe-order");
    let pcap = dir.join("fwd.pcap");
    // Two workers (one per port's RX queue) feeding one scheduler lcore
    // that runs both egress pipelines; three lcores on however many CPUs
    // there are (`--lcores` maps them; two may share a CPU).
    let pipeline = "[pipeline]\nworkers = [1, 2]\nschedulers = { net_null0 = 0, net_null1 = 0 }\nring_size = 256\n";
    let extra = format!(
        "[pcap]\npath = \"{}\"\ncapture = \"forwarded\"\nmax_bytes = 40_000_000\nsnaplen = 64\n",
        pcap.display()
    );
    // RED under overload: early and forced drops leave gaps, queueing and
    // the delay line hold packets back; none of it may reorder a flow.
    let egress = "rate = \"300Mbit\"\ndelay = \"500us\"\ndiscipline = \"red\"";
    let run = run_router(
        &dir,
        &config(pipeline, egress, 64, &extra),
        "800ms",
        &eal("tg-pipe-order", &["--lcores", "0@0,1@1,2@1"]),
    );
    if let Some(r) = run.eal_unavailable() {
        return skip(NAME, &r);
    }
    assert_eq!(
        run.code,
        Some(0),
        "router failed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout.contains("pipeline worker lcore=2"),
        "{}",
        run.stdout
    );
    assert_eq!(
        run.totals().get("accounting").map(String::as_str),
        Some("ok"),
        "{}",
        run.stdout
    );
    let bytes = std::fs::read(&pcap).expect("pcap written");
    let frames = pcap_frames(&bytes);
    assert!(frames.len() > 1000, "only {} frames captured", frames.len());
    // A flow: (frame length: 64 from net_null0, 128 from net_null1; source
    // address; source port). Its sequence numbers must increase.
    let mut last: HashMap<(usize, [u8; 4], u16), u32> = HashMap::new();
    let (mut checked, mut gaps) = (0u64, 0u64);
    for &(orig, f) in &frames {
        if f.len() < 46 {
            continue;
        }
        let key = (
            orig,
            [f[26], f[27], f[28], f[29]],
            u16::from_be_bytes([f[34], f[35]]),
        );
        let seq = u32::from_be_bytes([f[42], f[43], f[44], f[45]]);
        if let Some(prev) = last.insert(key, seq) {
            assert!(
                seq > prev,
                "flow {key:?}: sequence {seq} after {prev}: reordered across the hand-off"
            );
            checked += 1;
            gaps += u64::from(seq - prev - 1 > 0);
        }
    }
    assert!(last.len() >= 32, "only {} flows seen", last.len());
    assert!(checked > 1000, "only {checked} consecutive pairs checked");
    // The test means something only if drops happened in between.
    assert!(
        gaps > 0,
        "no gaps: the run did not drop, so order was not stressed"
    );
}

/// From the periodic tables: per table, (t seconds, `tx_mbit_s`,
/// `stalled_ms`) of `port`.
fn tx_rates(stdout: &str, port: &str) -> Vec<(f64, f64, f64)> {
    let tag = format!("egress {port} ");
    let field = |l: &str, k: &str| {
        l.split_whitespace()
            .find_map(|t| t.strip_prefix(k))
            .and_then(|v| v.trim_end_matches('s').parse::<f64>().ok())
    };
    let mut t = None;
    let mut out = Vec::new();
    for l in stdout.lines() {
        if l.starts_with("--- t=") {
            t = field(l, "t=");
        } else if l.starts_with(&tag) {
            if let (Some(t), Some(r), Some(st)) =
                (t, field(l, "tx_mbit_s="), field(l, "stalled_ms="))
            {
                out.push((t, r, st));
            }
        }
    }
    out
}

/// Per table: (t, Mbit/s, stalled ms).
type Rates = Vec<(f64, f64, f64)>;

fn shaped_run(
    prefix: &str,
    pipeline: &str,
    lcores: &[&str],
    rate_mbit: f64,
    extra_egress: &str,
) -> Result<(String, [Rates; 2]), String> {
    let dir = scratch(prefix);
    let text = config(
        pipeline,
        &format!("rate = \"{rate_mbit}Mbit\"\ndiscipline = \"droptail\"\n{extra_egress}"),
        1450,
        "",
    )
    .replace("stats_interval = \"0s\"", "stats_interval = \"250ms\"");
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, text).expect("write config");
    // Raised CPU priority (niceness -10, whatever the test's own; the
    // tests run as root), as a dataplane gets dedicated cores in
    // production: on a shared host every time slice another process takes
    // from a busy-polling lcore is a stall of milliseconds, and a shaper
    // loses the tokens of a stall like a link that sat idle. On the 2-core
    // CI VM with one other busy process, the 2-lcore pipeline shaped
    // 200-700 Mbit/s of 1000 at niceness 0 and 976-1026 (per 250 ms
    // interval) at -10.
    let mut cmd = Command::new(router_bin());
    // SAFETY: setpriority is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpriority(libc::PRIO_PROCESS, 0, -10);
            Ok(())
        });
    }
    cmd.arg("--config")
        .arg(&cfg)
        .args(["--duration", "3s", "--"])
        .args(eal(prefix, lcores));
    let out = run_bounded(cmd, Duration::from_secs(60));
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    };
    if let Some(r) = run.eal_unavailable() {
        return Err(r);
    }
    assert_eq!(
        run.code,
        Some(0),
        "{prefix}: router failed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let rates = [
        tx_rates(&run.stdout, "net_null0"),
        tx_rates(&run.stdout, "net_null1"),
    ];
    Ok((run.stdout, rates))
}

#[test]
fn shaped_rate_holds_within_one_percent_at_one_and_two_lcores() {
    const NAME: &str = "shaped_rate_holds_within_one_percent_at_one_and_two_lcores";
    if let Err(r) = require_root() {
        return skip(NAME, &r);
    }
    // 1 Gbit/s with 1450/1514-byte frames (~85 kpps per port) under
    // net_null's unbounded offered load: both layouts keep the discipline
    // backlogged on the 2-core CI VM, so the shaper, not the lcore, sets
    // the rate. (At 10 Gbit/s the 2-lcore scheduler spends its time
    // dropping the ~30 Gbit/s net_null offers per port and does not keep
    // the queue backlogged on that VM; that is a benchmark question, see
    // DPDK.md.) The default bucket (rate x 100 us, 12.5 kB here) must not
    // lose tokens between polls.
    let rate = 1000.0;
    for (label, pipeline, lcores) in [
        ("1-lcore", "", &["-l", "0"][..]),
        ("2-lcore", TWO_LCORES, &["-l", "0-1"][..]),
        ("2-lcore-two-workers", TWO_WORKERS, &["-l", "0-1"][..]),
    ] {
        let (stdout, rates) = match shaped_run(
            &format!("tg-pipe-shaped-{label}"),
            pipeline,
            lcores,
            rate,
            "",
        ) {
            Ok(r) => r,
            Err(r) => return skip(NAME, &r),
        };
        // The periodic table: the first interval includes the start and
        // the final table's interval is the short tail; check the middle
        // ones. On a shared host the kernel can keep an lcore away for
        // milliseconds; a backlogged shaper loses the tokens of a stall
        // beyond what its bucket covers (the default bucket: 100 us), as a
        // link that sat idle. The router reports that time (`stalled_ms`,
        // gaps between two polls of the port beyond 100 us), so the rate
        // to expect in an interval is `rate x (1 - stalled / interval)`.
        // The check is on the median interval; a shaper that is off (e.g.
        // a bucket too small for the loop's period, whose losses are not
        // stalls) is off in every interval and fails.
        for (port, r) in rates.iter().enumerate() {
            assert!(r.len() >= 6, "{label}: too few intervals:\n{stdout}");
            let mut dev: Vec<(f64, f64, f64)> = r
                .windows(2)
                .skip(1)
                .take(r.len() - 3)
                .map(|w| {
                    let (t0, _, s0) = w[0];
                    let (t1, mbit, s1) = w[1];
                    let stalled = ((s1 - s0) / 1e3 / (t1 - t0)).clamp(0.0, 1.0);
                    let want = rate * (1.0 - stalled);
                    ((mbit - want) / rate, mbit, stalled)
                })
                .collect();
            dev.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (d, mbit, stalled) = dev[dev.len() / 2];
            assert!(
                d.abs() <= 0.01,
                "{label} port {port}: median interval shaped {mbit:.1} Mbit/s with the lcore stalled \
                 {:.1} % of it, want {rate} x (1 - stalled) +- 1 % of {rate} (intervals: \
                 (deviation, Mbit/s, stalled) {dev:?})\n{stdout}",
                stalled * 100.0
            );
            println!(
                "{label} port {port}: median deviation {:.3} % ({mbit:.1} Mbit/s, stalled {:.2} %)",
                d * 100.0,
                stalled * 100.0
            );
        }
    }
}

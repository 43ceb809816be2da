//! The command-line glue of `tollgate cca list` and `tollgate cca trace`.

use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use tollgate_cca::model::{Bottleneck, FlowSample, FlowSetup, LossPattern, Model};
use tollgate_cca::registry::ALGORITHMS;
use tollgate_cca::units::{format_duration, parse_bytes, parse_duration, parse_rate_bps};
use tollgate_cca::{build, Env, Time};

/// `tollgate cca ...`
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process; boxing buys nothing
pub enum CcaCommand {
    /// Print every algorithm with its variant id, parameters and defaults.
    List,
    /// Trace congestion windows over a scripted scenario (fixed RTT, scripted
    /// losses, optionally a shared drop-tail bottleneck) and write them as CSV.
    ///
    /// Each SPEC becomes one flow. Without --bottleneck every flow has its own
    /// uncongested path and loses packets only as --loss says; with it, all
    /// flows share one FIFO drop-tail queue.
    ///
    /// Examples:
    ///   tollgate cca trace newreno cubic --rtt 50ms --loss every:2s
    ///   tollgate cca trace newreno libra --rtt 10ms --rtt 100ms --bottleneck 100Mbit --loss none
    ///   tollgate cca trace 'taxed(cubic, tau=0.05, detector=off)' --duration 60s
    #[command(verbatim_doc_comment)]
    Trace(TraceArgs),
}

/// Options of `tollgate cca trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Algorithm spec strings, e.g. `newreno`, `cubic(beta=0.8)`, `taxed(newreno, tau=0.05)`.
    #[arg(required = true, value_name = "SPEC")]
    specs: Vec<String>,
    /// Base RTT: once for all flows, or once per SPEC in order.
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    rtt: Vec<Duration>,
    /// Simulated time.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Scripted losses per flow: `every:2s` (one loss per period), `nth:1000`
    /// (every 1000th packet), `prob:0.001` (random, seeded) or `none`.
    #[arg(long, default_value = "every:2s")]
    loss: String,
    /// Share a FIFO drop-tail bottleneck of this rate, e.g. `100Mbit`.
    #[arg(long, value_parser = parse_rate_bps)]
    bottleneck: Option<f64>,
    /// Bottleneck buffer: bytes (`250KB`) or a multiple of the largest flow's BDP (`1bdp`).
    #[arg(long, default_value = "1bdp")]
    buffer: String,
    /// Receive window: most bytes a flow may have in flight (keeps an
    /// uncongested path from growing without bound).
    #[arg(long, default_value = "2MB")]
    rwnd: String,
    /// Packet size in bytes.
    #[arg(long, default_value_t = 1200)]
    mss: u64,
    /// Sampling interval of the CSV.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    interval: Duration,
    /// Print a table row every this much simulated time.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    print_every: Duration,
    /// Seed for `prob:` losses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// CSV output path.
    #[arg(long, default_value = "results/cca-trace.csv")]
    csv: PathBuf,
}

/// Run a `tollgate cca` command.
pub fn run(command: CcaCommand) -> Result<()> {
    match command {
        CcaCommand::List => list(&mut io::stdout().lock()),
        CcaCommand::Trace(args) => trace(&args, &mut io::stdout().lock()),
    }
}

fn list(out: &mut impl Write) -> Result<()> {
    for algorithm in ALGORITHMS {
        let id = if algorithm.takes_base {
            "base id + 32".to_string()
        } else {
            format!("variant id {}", algorithm.variant.get())
        };
        writeln!(out, "{:<10} {} ({id})", algorithm.name, algorithm.summary)?;
        writeln!(out, "           source: {}", algorithm.source)?;
        if algorithm.takes_base {
            writeln!(
                out,
                "           usage: {}(BASE_SPEC, key=value, ...)",
                algorithm.name
            )?;
        }
        for param in algorithm.params {
            writeln!(
                out,
                "           {:<17} = {:<8} {} [{}]",
                param.name, param.default, param.help, param.kind
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn parse_loss(text: &str, seed: u64) -> Result<LossPattern> {
    let (kind, value) = text.split_once(':').unwrap_or((text, ""));
    let pattern = match kind {
        "none" => LossPattern::None,
        "every" => match parse_duration(value) {
            Ok(period) if !period.is_zero() => LossPattern::Periodic(period),
            _ => bail!(
                "--loss every:PERIOD needs a positive duration such as every:2s, got `{text}`"
            ),
        },
        "nth" => match value.parse::<u64>() {
            Ok(n) if n >= 2 => LossPattern::EveryNth(n),
            _ => bail!("--loss nth:N needs a whole number N >= 2, got `{value}`"),
        },
        "prob" => match value.parse::<f64>() {
            Ok(p) if (0.0..1.0).contains(&p) => LossPattern::Random { p, seed },
            _ => bail!("--loss prob:P needs 0 <= P < 1, got `{value}`"),
        },
        _ => bail!("--loss `{text}` is not understood; use every:2s, nth:1000, prob:0.001 or none"),
    };
    Ok(pattern)
}

fn trace(args: &TraceArgs, out: &mut impl Write) -> Result<()> {
    if args.rtt.len() != 1 && args.rtt.len() != args.specs.len() {
        bail!(
            "--rtt was given {} times for {} specs; give it once (all flows) or once per spec",
            args.rtt.len(),
            args.specs.len()
        );
    }
    if args.mss < 100 || args.mss > 65_000 {
        bail!("--mss {} is outside 100..=65000 bytes", args.mss);
    }
    if args.duration.is_zero() || args.interval.is_zero() {
        bail!("--duration and --interval must be > 0");
    }
    let rtt_of = |i: usize| args.rtt[if args.rtt.len() == 1 { 0 } else { i }];
    let loss = parse_loss(&args.loss, args.seed)?;
    let receive_window = parse_bytes(&args.rwnd).map_err(|e| anyhow::anyhow!("--rwnd: {e}"))?;
    if receive_window < 2 * args.mss {
        bail!(
            "--rwnd {} is smaller than two packets of {} bytes",
            args.rwnd,
            args.mss
        );
    }
    let env = Env::with_mss(args.mss);
    let mut flows = Vec::new();
    for (i, spec) in args.specs.iter().enumerate() {
        flows.push(FlowSetup {
            cca: build(spec, &env)?,
            base_rtt: rtt_of(i),
            start: Time::ZERO,
            mss: args.mss,
            loss: loss.clone(),
            receive_window,
        });
    }
    let bottleneck = match args.bottleneck {
        None => None,
        Some(rate_bps) => {
            let max_rtt = (0..args.specs.len()).map(rtt_of).max().unwrap_or_default();
            let bdp = rate_bps / 8.0 * max_rtt.as_secs_f64();
            let buffer_bytes = match args.buffer.strip_suffix("bdp") {
                Some(factor) => {
                    let f: f64 = factor.trim().parse().with_context(|| {
                        format!(
                            "--buffer `{}`: expected e.g. 1bdp, 0.5bdp or 250KB",
                            args.buffer
                        )
                    })?;
                    (bdp * f) as u64
                }
                None => parse_bytes(&args.buffer).map_err(|e| anyhow::anyhow!("--buffer: {e}"))?,
            };
            if buffer_bytes < args.mss {
                bail!(
                    "--buffer {} is smaller than one packet ({} bytes)",
                    args.buffer,
                    args.mss
                );
            }
            Some(Bottleneck {
                rate_bps,
                buffer_bytes,
            })
        }
    };
    let mut model = Model::new(flows, bottleneck, args.interval);
    model.run_until(Time::ZERO + args.duration);

    write_csv(args, model.samples())?;
    print_table(args, &model, out)?;
    writeln!(out, "\nwrote {}", args.csv.display())?;
    Ok(())
}

fn write_csv(args: &TraceArgs, samples: &[FlowSample]) -> Result<()> {
    if let Some(dir) = args.csv.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut csv = String::from(
        "time_s,flow,spec,cwnd_bytes,cwnd_packets,in_flight_bytes,rtt_ms,goodput_mbps,losses\n",
    );
    for s in samples {
        csv.push_str(&format!(
            "{:.3},{},\"{}\",{},{:.2},{},{:.3},{:.3},{}\n",
            s.time.as_secs_f64(),
            s.flow,
            args.specs[s.flow].replace('"', "\"\""),
            s.window,
            s.window as f64 / args.mss as f64,
            s.in_flight,
            s.rtt.as_secs_f64() * 1e3,
            s.goodput_bps / 1e6,
            s.losses
        ));
    }
    fs::write(&args.csv, csv).with_context(|| format!("writing {}", args.csv.display()))
}

fn print_table(args: &TraceArgs, model: &Model, out: &mut impl Write) -> Result<()> {
    let n = args.specs.len();
    writeln!(
        out,
        "congestion window (packets of {} B) over time",
        args.mss
    )?;
    write!(out, "{:>8}", "time")?;
    for (i, spec) in args.specs.iter().enumerate() {
        let label = format!("{i}:{spec}");
        write!(out, " {:>16}", truncate(&label, 16))?;
    }
    writeln!(out)?;
    let every = (args.print_every.as_nanos() / args.interval.as_nanos()).max(1) as usize;
    for row in model.samples().chunks(n).skip(every - 1).step_by(every) {
        write!(out, "{:>8}", format!("{:.1}s", row[0].time.as_secs_f64()))?;
        for s in row {
            write!(out, " {:>16.1}", s.window as f64 / args.mss as f64)?;
        }
        writeln!(out)?;
    }
    let end = Time::ZERO + args.duration;
    let half = Time::ZERO + args.duration / 2;
    writeln!(
        out,
        "\nsummary (goodput over the second half, {} to {})",
        format_duration(args.duration / 2),
        format_duration(args.duration)
    )?;
    writeln!(
        out,
        "{:<3} {:<32} {:>8} {:>14} {:>8} {:>9}",
        "#", "spec", "rtt", "goodput Mbit/s", "losses", "variant"
    )?;
    for (i, spec) in args.specs.iter().enumerate() {
        let rtt = args.rtt[if args.rtt.len() == 1 { 0 } else { i }];
        writeln!(
            out,
            "{:<3} {:<32} {:>8} {:>14.2} {:>8} {:>9}",
            i,
            truncate(spec, 32),
            format_duration(rtt),
            model.mean_goodput_bps(i, half, end) / 1e6,
            model.totals(i).lost,
            model.cca(i).variant().dscp()
        )?;
    }
    Ok(())
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let cut: String = text.chars().take(width - 1).collect();
        format!("{cut}…")
    }
}

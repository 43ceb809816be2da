//! The command line of `tollgate-dpdk-bench`: its options, their parsers
//! and the values they parse to.
//!
//! Compiled with or without the cargo feature `dpdk`, so the man page
//! (`docs/man/tollgate-dpdk-bench.1`) is generated from this definition on
//! any machine; the benchmark itself is built only with `dpdk`.

use std::time::Duration;

use clap::{ArgAction, Parser};
use serde::Serialize;

use tollgate_dataplane::config::{parse_duration, SyntheticConfig, DEFAULT_HEAVY_SHARE};

/// The cases: plain forwarding (the baseline) and one per discipline.
pub const CASES: [&str; 9] = [
    "forward", "droptail", "red", "choke", "cebinae", "rrmqs", "codel", "fq_codel", "dualpi2",
];

/// What `--help` prints after the options.
const AFTER_HELP: &str = "\
Each case runs in a child process of this binary (EAL initialises once per
process) with two net_null ports, `--no-huge --no-pci`, on lcore 0 or, for
`--lcores 2`, on lcores 0-1 as a pipeline (RX/classify worker on lcore 1,
scheduler on lcore 0); no NICs or hugepages are needed, but DPDK needs root.

Every combination of --frame-len and --flows runs `forward` and then each
case; ratios are to `forward` of the same combination in the same run (the
same round, with --repeat), or with --interleave to the forwarding loop that
alternated with the case inside its own process (two more net_null ports).
With --interleave a 2-lcore case alternates instead with the same case on
1 lcore, and its ratio to 1 lcore is to that paired router.

Examples:
  tollgate-dpdk-bench --seconds 2 --frame-len 64 --flows 1024
  tollgate-dpdk-bench --seconds 3 --frame-len 64,512,1514,imix --flows 1,1024,100000 --json out.json
  tollgate-dpdk-bench --rate 1Gbit --cases droptail,red   # offered load above the shaped rate
  tollgate-dpdk-bench --rate 2Gbit --heavy 16:0.5 --cases cebinae   # 16 heavy hitters send half the frames
  tollgate-dpdk-bench --lcores 1,2 --seconds 3            # pipeline: ratio of 2 to 1 lcore
  tollgate-dpdk-bench --repeat 5 --flows 1024,100000 --json out.json   # median and range of 5 rounds
  tollgate-dpdk-bench --interleave 100ms --repeat 3   # each case alternates with forwarding in one process
  tollgate-dpdk-bench --interleave 100ms --lcores 1,2 --layout two-workers   # 2 lcores paired with 1
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
pub struct Opts {
    /// Seconds per case (0 < s <= 60).
    #[arg(long, default_value_t = 2.0, value_parser = seconds)]
    pub seconds: f64,
    /// Synthetic frame lengths in bytes (60..=1514, without the 4-byte FCS;
    /// 1514 is a 1518-byte frame on the wire) or `imix`, comma-separated.
    #[arg(long, default_value = "64", value_delimiter = ',', value_parser = frame_size)]
    pub frame_len: Vec<FrameSize>,
    /// Distinct synthetic UDP flows, comma-separated.
    #[arg(long, default_value = "1024", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    pub flows: Vec<u32>,
    /// Cases to run, comma-separated (`forward` always runs first: it is the
    /// baseline of the ratios).
    #[arg(long, default_value = "droptail,red,choke,cebinae,rrmqs,codel,fq_codel,dualpi2", value_delimiter = ',',
          value_parser = clap::builder::PossibleValuesParser::new(&CASES[1..]))]
    pub cases: Vec<String>,
    /// Lcore counts to run each discipline case with, comma-separated: 1 is
    /// the single-lcore loop; 2 is the pipeline (RX/classify worker on
    /// lcore 1, the scheduler of both egress ports on lcore 0). Rows with
    /// more than one lcore also show the ratio to 1 lcore of the same case.
    #[arg(long, default_value = "1", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=2))]
    pub lcores: Vec<u32>,
    /// The 2-lcore layout: `split` (RX/classify worker on lcore 1, the
    /// scheduler of both egress ports on lcore 0) or `two-workers` (each
    /// lcore takes one port's RX and runs the egress of the other port, to
    /// completion; the hand-off ring stays on the lcore).
    #[arg(long, default_value = "split", value_parser = ["split", "two-workers"])]
    pub layout: String,
    /// Shaped egress rate (`"1Gbit"`, bit/s); default the link speed. Below
    /// the offered load, the shaper and the drop paths are measured too.
    #[arg(long)]
    pub rate: Option<String>,
    /// Heavy hitters, `N:SHARE`: the first N flows send SHARE of the frames
    /// (e.g. `16:0.5`), the other flows the rest; N must be below every
    /// `--flows` value. Default: every flow sends alike (round robin), so
    /// under overload every flow Cebinae caches is a top flow.
    #[arg(long, value_name = "N:SHARE", value_parser = heavy)]
    pub heavy: Option<Heavy>,
    /// Rounds (1..=100): run every case this many times, the rounds
    /// interleaved (round 1 runs every combination and case, then round 2
    /// ...), each round's ratios to that round's `forward`, and print the
    /// median, minimum and maximum over the rounds. On a shared or noisy
    /// machine 3 to 5 rounds tell a difference from the noise (like
    /// `perf stat --repeat`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Measure each 1-lcore discipline case against plain forwarding run in
    /// the same child process, in alternating slices of this length (e.g.
    /// `100ms`) until each has run `--seconds`: the router on net_null0/1,
    /// the forwarding loop on net_null2/3. A shared machine whose speed
    /// drifts between child processes then moves both sides alike, and the
    /// ratio to forward is taken to that paired loop (column `paired
    /// forward Mpps`). A child takes twice `--seconds`. A 2-lcore case
    /// alternates likewise with the same case on 1 lcore (a second router
    /// on net_null2/3), and its ratio to 1 lcore is to that paired router
    /// (column `paired 1-lcore Mpps`); its ratio to forward stays to the
    /// round's `forward` row.
    #[arg(long, value_name = "SLICE", value_parser = slice)]
    pub interleave: Option<Duration>,
    /// Also write the results as JSON to this file, rewritten after every
    /// case: an interrupted run keeps the cases it finished.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Internal: run one case (the parent starts a child per case).
    #[arg(long, hide = true, value_parser = clap::builder::PossibleValuesParser::new(CASES))]
    pub child: Option<String>,
    /// More log output on stderr: -v info, -vv debug, -vvv trace.
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,
    /// Extra DPDK EAL arguments, after `--` (appended to the built-in ones).
    #[arg(last = true, value_name = "EAL_ARGS")]
    pub eal_extra: Vec<String>,
}

/// Heavy hitters: the number of heavy flows and their share of the frames.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Heavy {
    /// Heavy flows: the first N of the synthetic flows.
    pub flows: u32,
    /// Their share of the frames, in (0, 1).
    pub share: f64,
}

impl std::fmt::Display for Heavy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.flows, self.share)
    }
}

/// `--heavy N:SHARE`.
pub fn heavy(s: &str) -> Result<Heavy, String> {
    let bad = || format!("{s:?} is not N:SHARE with N >= 1 flows and SHARE in (0, 1), e.g. 16:0.5");
    let (n, share) = s.split_once(':').ok_or_else(bad)?;
    let flows = n.trim().parse::<u32>().map_err(|_| bad())?;
    let share = share.trim().parse::<f64>().map_err(|_| bad())?;
    if flows == 0 || !(share > 0.0 && share < 1.0) {
        return Err(bad());
    }
    Ok(Heavy { flows, share })
}

/// A synthetic frame size: fixed, or simple IMIX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSize {
    /// Every frame this long, bytes (without the FCS).
    Fixed(u16),
    /// Simple IMIX: frames of 64, 570 and 1514 bytes in the ratio 7:4:1.
    Imix,
}

impl std::fmt::Display for FrameSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameSize::Fixed(n) => write!(f, "{n}"),
            FrameSize::Imix => f.write_str("imix"),
        }
    }
}

/// One `--frame-len` value: a length in 60..=1514 or `imix`.
pub fn frame_size(s: &str) -> Result<FrameSize, String> {
    if s.eq_ignore_ascii_case("imix") {
        return Ok(FrameSize::Imix);
    }
    match s.parse::<u16>() {
        Ok(n) if (60..=1514).contains(&n) => Ok(FrameSize::Fixed(n)),
        _ => Err(format!(
            "{s:?} is not a frame length in 60..=1514 or `imix`"
        )),
    }
}

impl FrameSize {
    /// The synthetic traffic of `flows` flows of this size (and heavy
    /// hitters, if any) as the router configuration describes it.
    pub fn synthetic(self, flows: u32, heavy: Option<Heavy>) -> SyntheticConfig {
        SyntheticConfig {
            flows,
            frame_len: match self {
                FrameSize::Fixed(n) => n,
                FrameSize::Imix => 64,
            },
            variants: Vec::new(),
            imix: self == FrameSize::Imix,
            heavy_flows: heavy.map_or(0, |h| h.flows),
            heavy_share: heavy.map_or(DEFAULT_HEAVY_SHARE, |h| h.share),
        }
    }
}

/// An `--interleave` slice: a duration with its unit, 1 ms to 10 s.
pub fn slice(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if (Duration::from_millis(1)..=Duration::from_secs(10)).contains(&d) {
        Ok(d)
    } else {
        Err(format!("{s:?} is not in 1ms..=10s"))
    }
}

/// `--seconds`: a number of seconds in (0, 60].
pub fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v > 0.0 && v <= 60.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not in (0, 60]"))
    }
}

//! `tollgate compare`: results files side by side ([`tollgate_tools::compare`]).

use std::path::PathBuf;

use clap::Args;
use tollgate_tools::{compare, plot, results};

/// Compare results files: summary and per-flow metrics side by side.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  tollgate sim tools/scenarios/rtt-unfairness.toml --out sim
  tollgate load tools/scenarios/rtt-unfairness.toml --server 10.0.0.2:4433 --ca cert.pem --out load
  tollgate compare sim/rtt-unfairness/results.json load/rtt-unfairness/results.json --labels sim,load

The first file is the reference: every other run's summary metrics are shown
with their difference from it, each flow's goodput with its difference in
percent, and whether the flows rank in the same order by goodput (pairs
within 5 % of each other in both runs are ties). Flows are matched by id.
Writes <out>/compare.json and the plots compare-throughput and compare-jain
(SVG and PNG).")]
pub struct CompareArgs {
    /// Two or more results.json files (from sim, load, or a campaign run).
    #[arg(required = true, num_args = 2..)]
    pub results: Vec<PathBuf>,
    /// A label per file, comma-separated (default: each file's directory name).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub labels: Option<Vec<String>>,
    /// Directory for compare.json and the plots.
    #[arg(long, default_value = "results/compare")]
    pub out: PathBuf,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `tollgate compare`.
pub fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let runs = args
        .results
        .iter()
        .map(|p| results::read(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let labels = match args.labels {
        Some(l) if l.len() != runs.len() => anyhow::bail!(
            "--labels: {} labels for {} files; give one per file, comma-separated",
            l.len(),
            runs.len()
        ),
        Some(l) => l,
        None => default_labels(&args.results),
    };
    let c = compare::compare(labels, &runs);
    std::fs::create_dir_all(&args.out)
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", args.out.display()))?;
    let json = args.out.join("compare.json");
    std::fs::write(&json, serde_json::to_string_pretty(&c)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", json.display()))?;
    if !args.no_plots {
        plot::render_compare(&args.out, &c.labels, &runs)?;
    }
    if !args.quiet {
        print!("{}", compare::table(&c));
        println!("written: {}", json.display());
    }
    Ok(())
}

/// Each file's parent directory name (`results/<name>/results.json`), made
/// unique with its position where two are alike.
fn default_labels(paths: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            p.parent()
                .and_then(|d| d.file_name())
                .map_or_else(|| format!("run{i}"), |n| n.to_string_lossy().into_owned())
        })
        .collect();
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if names.iter().filter(|m| *m == n).count() > 1 {
                format!("{n}#{i}")
            } else {
                n.clone()
            }
        })
        .collect()
}

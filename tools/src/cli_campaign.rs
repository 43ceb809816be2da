//! `tollgate campaign plan|run|merge|slurm`: a scenario file's sweep points x
//! seeds as numbered runs, run by a local pool of child processes, merged
//! into `campaign.json`, or handed to Slurm as a job array. The numbering,
//! plan file, merge and script are in [`tollgate_tools::campaign`], the
//! process pool in [`crate::cli_pool`]; this file holds the options.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use tollgate_tools::campaign::{self, Campaign, RunStatus, SlurmOptions};
use tollgate_tools::scenario;

use crate::cli_pool::{self, ChildRun, Ended, PoolArgs};
use crate::cli_sim::EXIT_INTERRUPTED;

/// Run many seeds and sweep points: locally in parallel, or on a Slurm cluster.
#[derive(Debug, Subcommand)]
pub enum CampaignCommand {
    /// List the runs of a scenario file (sweep points x seeds): index, point,
    /// seed, directory, and whether each has finished.
    Plan(PlanArgs),
    /// Run every unfinished run on this machine, N at a time, then merge.
    #[command(
        after_help = "Resumable: a run whose results.json is complete is skipped, so after \
Ctrl-C, a crash or a failed run the same command runs only what is missing. Ctrl-C stops the \
runs in progress (written partial, re-run next time) and keeps the finished ones; exit code 130. \
A failed run is reported with its index and error, the others go on, and the exit code is 1."
    )]
    Run(RunArgs),
    /// Collect every run's results into campaign.json: per sweep point the
    /// mean and 95 % confidence interval of each summary metric, and plots.
    Merge(MergeArgs),
    /// Write a Slurm job-array script with one task per run (and submit it
    /// with --submit); `campaign merge` collects the results afterwards.
    #[command(
        after_help = "The tollgate binary, the scenario file and --out must be on a \
filesystem every compute node sees (the script uses their absolute paths). Task logs go to \
<out>/<name>/slurm/<job>_<task>.out and .err."
    )]
    Slurm(SlurmArgs),
}

/// The campaign file and where its results go.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// The campaign file: any scenario file; its sweep points x seeds are the runs.
    pub scenario: PathBuf,
    /// Results root: the campaign directory is `<out>/<name>/`.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub out: PathBuf,
    /// Replicate every sweep point over seeds 1..=N instead of the file's
    /// `seed`/`seeds` (give the same N to every campaign command and to
    /// `tollgate sim --run-index`: it is part of the plan).
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
}

/// `tollgate campaign plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub file: FileArgs,
}

/// `tollgate campaign run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub file: FileArgs,
    #[command(flatten)]
    pub pool: PoolArgs,
}

/// `tollgate campaign merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The campaign directory `<out>/<name>/` (the one holding campaign-plan.json).
    pub dir: PathBuf,
    /// Write campaign.json even if runs are missing or partial (they are
    /// listed in it and left out of the statistics); without it the merge
    /// names them and fails.
    #[arg(long)]
    pub allow_missing: bool,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `tollgate campaign slurm`.
#[derive(Debug, Args)]
pub struct SlurmArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Submit the script with `sbatch --parsable` and print the job id
    /// (SLURM_CONF and the usual Slurm environment apply).
    #[arg(long)]
    pub submit: bool,
    /// Slurm partition (`#SBATCH --partition`); default: the cluster's default partition.
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// At most K array tasks at once (`--array=0-(N-1)%K`); default: no limit
    /// beyond the cluster's.
    #[arg(long, value_name = "K")]
    pub max_parallel: Option<usize>,
    /// Time limit per run (`#SBATCH --time`, e.g. `30` minutes or `02:00:00`);
    /// default: the partition's.
    #[arg(long, value_name = "T")]
    pub time: Option<String>,
    /// Tasks skip the per-run plots.
    #[arg(long)]
    pub no_plots: bool,
}

/// Dispatch a `tollgate campaign` subcommand.
pub fn run(command: CampaignCommand) -> anyhow::Result<ExitCode> {
    match command {
        CampaignCommand::Plan(a) => plan(&a).map(|()| ExitCode::SUCCESS),
        CampaignCommand::Run(a) => run_local(&a),
        CampaignCommand::Merge(a) => merge(&a),
        CampaignCommand::Slurm(a) => slurm(&a).map(|()| ExitCode::SUCCESS),
    }
}

fn load(f: &FileArgs) -> anyhow::Result<Campaign> {
    let mut plan = scenario::load(&f.scenario)?;
    if let Some(n) = f.seeds {
        plan.set_seed_count(n)?;
    }
    Campaign::new(&plan)
}

fn plan(a: &PlanArgs) -> anyhow::Result<()> {
    let c = load(&a.file)?;
    println!(
        "campaign {}: {} point{} x {} seed{} = {} runs (index = point x {} + seed position); plan {}",
        c.name,
        c.points.len(),
        if c.points.len() == 1 { "" } else { "s" },
        c.seeds_per_point,
        if c.seeds_per_point == 1 { "" } else { "s" },
        c.runs.len(),
        c.seeds_per_point,
        c.hash
    );
    let width = c
        .points
        .iter()
        .map(|p| p.point.as_deref().unwrap_or("-").len())
        .max()
        .unwrap_or(5)
        .max(5);
    println!(
        "{:>5}  {:<width$}  {:>6}  {:<8}  directory",
        "index", "point", "seed", "status"
    );
    for r in &c.runs {
        let dir = c.run_dir(&a.file.out, r.index);
        let status = match campaign::run_status(&dir) {
            RunStatus::Finished => "done",
            RunStatus::Partial => "partial",
            RunStatus::Missing => "-",
            RunStatus::Unreadable(_) => "broken",
        };
        println!(
            "{:>5}  {:<width$}  {:>6}  {:<8}  {}",
            r.index,
            c.points[r.point].point.as_deref().unwrap_or("-"),
            r.seed,
            status,
            dir.display()
        );
    }
    Ok(())
}

// ------------------------------------------------------------- local pool

fn run_local(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let c = load(&a.file)?;
    let jobs = cli_pool::jobs(a.pool.jobs)?;
    c.ensure_plan_file(&a.file.out)?;
    let todo: Vec<ChildRun> = c
        .unfinished(&a.file.out)
        .into_iter()
        .map(|index| ChildRun {
            scenario: a.file.scenario.clone(),
            index,
            out: a.file.out.clone(),
            seeds: a.file.seeds,
            no_plots: a.pool.no_plots,
            dir: c.run_dir(&a.file.out, index),
        })
        .collect();
    let done_before = c.runs.len() - todo.len();
    let dir = c.dir(&a.file.out);
    if !a.pool.quiet {
        eprintln!(
            "campaign {}: {} runs, {} already finished, {} to run, {} at a time; results in {}",
            c.name,
            c.runs.len(),
            done_before,
            todo.len(),
            jobs.min(todo.len().max(1)),
            dir.display()
        );
    }
    let started = Instant::now();
    let ended = cli_pool::run_all(
        &todo,
        jobs,
        &c.name,
        c.runs.len(),
        done_before,
        a.pool.quiet,
    )?;
    let wall = started.elapsed().as_secs_f64();
    let mut failed: Vec<usize> = ended
        .iter()
        .filter(|(_, e)| matches!(e, Ended::Failed(_)))
        .map(|(i, _)| todo[*i].index)
        .collect();
    failed.sort_unstable();
    let ran = ended
        .iter()
        .filter(|(_, e)| matches!(e, Ended::Finished))
        .count();
    if cli_pool::stopped() {
        let finished = c.runs.len() - c.unfinished(&a.file.out).len();
        eprintln!(
            "stopped: {finished} of {} runs finished and kept; run the same command to resume",
            c.runs.len()
        );
    }
    if !failed.is_empty() {
        let list: Vec<String> = failed.iter().map(ToString::to_string).collect();
        eprintln!(
            "error: {} of {} runs failed (run {}); the others are kept. Fix the cause and run \
             the same command again: it runs only what is missing",
            failed.len(),
            c.runs.len(),
            list.join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    if cli_pool::stopped() {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if !a.pool.quiet {
        eprintln!(
            "ran {ran} runs in {wall:.2} s wall ({jobs} at a time); {done_before} were already finished"
        );
    }
    let merged = campaign::merge(&dir)?;
    if !merged.missing.is_empty() {
        // Only if someone removed results while we ran.
        anyhow::bail!(
            "{} runs are missing after the campaign ran (removed meanwhile?); run the same command again",
            merged.missing.len()
        );
    }
    merged.write(&dir, !a.pool.no_plots)?;
    if !a.pool.quiet {
        print!("{}", campaign::stats_table(&merged));
        println!("merged into {}", dir.join(campaign::MERGED_FILE).display());
    }
    Ok(ExitCode::SUCCESS)
}

// ------------------------------------------------------------------ merge

fn merge(a: &MergeArgs) -> anyhow::Result<ExitCode> {
    let merged = campaign::merge(&a.dir)?;
    if !merged.missing.is_empty() {
        let head = format!(
            "{} of {} runs of campaign {} are missing or incomplete:",
            merged.missing.len(),
            merged.runs_planned,
            merged.scenario
        );
        if !a.allow_missing || !a.quiet {
            eprintln!(
                "{}{head}",
                if a.allow_missing {
                    "warning: "
                } else {
                    "error: "
                }
            );
            for m in &merged.missing {
                eprintln!(
                    "  run {} ({} seed {}): {}: {}",
                    m.index,
                    m.point.as_deref().unwrap_or("default"),
                    m.seed,
                    a.dir.join(&m.dir).display(),
                    m.reason
                );
            }
        }
        if !a.allow_missing {
            let list: Vec<String> = merged.missing.iter().map(|m| m.index.to_string()).collect();
            eprintln!(
                "run them (`tollgate campaign run FILE` runs only what is missing, or `tollgate sim \
                 FILE --run-index I` for I in {}), or merge what is there with --allow-missing",
                list.join(" ")
            );
            return Ok(ExitCode::FAILURE);
        }
    }
    merged.write(&a.dir, !a.no_plots)?;
    if !a.quiet {
        print!("{}", campaign::stats_table(&merged));
        println!(
            "merged into {}",
            a.dir.join(campaign::MERGED_FILE).display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

// ------------------------------------------------------------------ slurm

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(p).with_context(|| format!("cannot resolve {}", p.display()))
}

fn slurm(a: &SlurmArgs) -> anyhow::Result<()> {
    let c = load(&a.file)?;
    if a.max_parallel == Some(0) {
        anyhow::bail!("--max-parallel 0: give at least 1 (or leave it out for no limit)");
    }
    let exe =
        absolute(&std::env::current_exe().context("cannot find the tollgate binary itself")?)?;
    let file = absolute(&a.file.scenario)?;
    std::fs::create_dir_all(&a.file.out)
        .with_context(|| format!("cannot create {}", a.file.out.display()))?;
    let out = absolute(&a.file.out)?;
    c.ensure_plan_file(&out)?;
    let dir = c.dir(&out);
    // Slurm does not create the directories of --output/--error.
    let logs = dir.join("slurm");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let script = campaign::slurm_script(
        &c,
        &exe,
        &file,
        &out,
        &SlurmOptions {
            partition: a.partition.clone(),
            max_parallel: a.max_parallel,
            time: a.time.clone(),
            seeds: a.file.seeds,
            no_plots: a.no_plots,
        },
    );
    let path = dir.join("campaign.sbatch");
    std::fs::write(&path, script).with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "wrote {}: a job array of {} tasks (runs 0..={}){}",
        path.display(),
        c.runs.len(),
        c.runs.len() - 1,
        a.max_parallel
            .map_or(String::new(), |k| format!(", at most {k} at once"))
    );
    if !a.submit {
        println!("submit it:          sbatch {}", path.display());
        println!(
            "when it is done:    tollgate campaign merge {}",
            dir.display()
        );
        return Ok(());
    }
    let o = Command::new("sbatch")
        .arg("--parsable")
        .arg(&path)
        .output()
        .context("cannot run sbatch (is Slurm installed and sbatch on PATH?)")?;
    if !o.status.success() {
        anyhow::bail!(
            "sbatch --parsable {} failed ({}): {}",
            path.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let id = text.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() {
        anyhow::bail!("sbatch printed no job id: {}", text.trim());
    }
    println!("submitted job array {id}");
    println!("watch it:           squeue -j {id}");
    println!(
        "when it is done:    tollgate campaign merge {}",
        dir.display()
    );
    Ok(())
}

//! A local pool of `tollgate sim FILE --run-index I` child processes, N at a
//! time, with a progress bar and Ctrl-C handling. `tollgate campaign run`
//! runs one campaign's runs through it, `tollgate reproduce` the runs of
//! every experiment at once.
//!
//! The children run in their own process group, so a terminal's Ctrl-C
//! reaches only this process: the first signal is forwarded to every running
//! child as SIGINT (each writes its partial results and exits 130) and no new
//! run starts; the second kills them and exits at once.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli_sim::EXIT_INTERRUPTED;

/// Set by the first SIGINT / SIGTERM: start no more runs.
static STOP: AtomicBool = AtomicBool::new(false);
/// Signals received so far.
static SIGNALS: AtomicU32 = AtomicU32::new(0);
/// Process ids of the running child runs (to forward signals to).
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Whether a Ctrl-C / SIGTERM stopped the pool.
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

fn signal_children(sig: libc::c_int) {
    let children = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
    for &pid in children.iter() {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) has no memory-safety preconditions; the pid is
            // a child of ours that has not been reaped (it is removed from
            // the list before its status is collected).
            unsafe { libc::kill(pid, sig) };
        }
    }
}

fn install_stop_handler() -> anyhow::Result<()> {
    ctrlc::set_handler(|| {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            STOP.store(true, Ordering::SeqCst);
            eprintln!(
                "\ninterrupted: stopping the runs in progress; finished runs are kept and the same \
                 command resumes (Ctrl-C again to abort at once)"
            );
            signal_children(libc::SIGINT);
        } else {
            eprintln!("\naborted");
            signal_children(libc::SIGKILL);
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
}

/// The options of every command that runs a pool: `-j`, `--no-plots`, `-q`.
#[derive(Debug, clap::Args)]
pub struct PoolArgs {
    /// Runs at a time, each a `tollgate sim --run-index` child process
    /// (default: the number of cores available). Each run gets
    /// cores / N threads (at least 1): `-j 1` gives one run every core.
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Skip the per-run and campaign plots (faster).
    #[arg(long)]
    pub no_plots: bool,
    /// Print nothing but errors (no progress bar, no table).
    #[arg(long, short)]
    pub quiet: bool,
}

/// `-j N`: runs at a time (default: the cores available); 0 is refused.
pub fn jobs(given: Option<usize>) -> anyhow::Result<usize> {
    match given {
        Some(0) => anyhow::bail!("-j 0: give at least 1 run at a time"),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// One child run: `tollgate sim SCENARIO --run-index INDEX --out OUT`.
#[derive(Clone, Debug)]
pub struct ChildRun {
    /// The scenario (campaign) file.
    pub scenario: PathBuf,
    /// Run index within its campaign.
    pub index: usize,
    /// Results root.
    pub out: PathBuf,
    /// `--seeds N`, if the campaign was planned with it.
    pub seeds: Option<u64>,
    /// `--no-plots`.
    pub no_plots: bool,
    /// Where its results go (for messages).
    pub dir: PathBuf,
}

/// How one child run ended.
pub enum Ended {
    /// Exit code 0: complete results written.
    Finished,
    /// Stopped by Ctrl-C (partial results written).
    Stopped,
    /// Failed, with the child's error text.
    Failed(String),
}

/// Run `runs` with `jobs` children at a time. The bar (`done_before` of
/// `total` already finished) is drawn on a terminal unless `quiet`. Returns
/// each run's position in `runs` and how it ended, in completion order;
/// failures are also printed as they happen. After a stop, the runs not
/// started are simply absent from the answer.
pub fn run_all(
    runs: &[ChildRun],
    jobs: usize,
    label: &str,
    total: usize,
    done_before: usize,
    quiet: bool,
) -> anyhow::Result<Vec<(usize, Ended)>> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    install_stop_handler()?;
    let exe = self_exe()?;
    let bar = ProgressBar::with_draw_target(
        Some(total as u64),
        if !quiet && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:40}] {pos}/{len} runs, {msg} {elapsed} (eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(label.to_string());
    bar.set_position(done_before as u64);
    let next = AtomicUsize::new(0);
    // The cores are split between the runs at a time and each run's threads.
    let jobs = jobs.clamp(1, runs.len());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (cores / jobs).max(1);
    let (tx, rx) = mpsc::channel::<(usize, Ended)>();
    let mut ended_all = Vec::new();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (next, exe) = (&next, &exe);
            scope.spawn(move || loop {
                if STOP.load(Ordering::SeqCst) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(run) = runs.get(i) else {
                    break;
                };
                let ended = run_child(exe, run, threads);
                if tx.send((i, ended)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut failed = 0;
        for (i, ended) in rx {
            match &ended {
                Ended::Finished => bar.inc(1),
                Ended::Stopped => {}
                Ended::Failed(error) => {
                    failed += 1;
                    bar.suspend(|| {
                        eprintln!(
                            "run {} failed ({}): {error}",
                            runs[i].index,
                            runs[i].dir.display()
                        );
                    });
                }
            }
            if failed > 0 {
                bar.set_message(format!("{failed} failed,"));
            }
            ended_all.push((i, ended));
        }
    });
    bar.finish_and_clear();
    Ok(ended_all)
}

/// This very binary, for the child runs. On Linux `/proc/self/exe`: it names
/// the file this process was started from even after that path has been
/// replaced (a `cargo build` during a long campaign), so every run of a
/// campaign uses the same code; elsewhere the path of the executable.
fn self_exe() -> anyhow::Result<PathBuf> {
    let proc = Path::new("/proc/self/exe");
    if proc.exists() {
        return Ok(proc.to_path_buf());
    }
    std::env::current_exe().context("cannot find the tollgate binary itself")
}

/// Run `tollgate sim FILE --run-index I --threads T` as a child process and
/// wait for it.
fn run_child(exe: &Path, run: &ChildRun, threads: usize) -> Ended {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(exe);
    // `ps` shows `tollgate sim ...` rather than `/proc/self/exe sim ...`.
    cmd.arg0("tollgate")
        .arg("sim")
        .arg(&run.scenario)
        .arg("--run-index")
        .arg(run.index.to_string())
        .arg("--out")
        .arg(&run.out)
        .arg("--threads")
        .arg(threads.to_string())
        .arg("--quiet");
    if let Some(n) = run.seeds {
        cmd.arg("--seeds").arg(n.to_string());
    }
    if run.no_plots {
        cmd.arg("--no-plots");
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = {
        let mut children = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return Ended::Failed(format!("cannot start {}: {e}", exe.display())),
        };
        children.push(child.id());
        // A stop that came before the pid was listed: forward it here.
        if STOP.load(Ordering::SeqCst) {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill(2) on our own, not yet reaped child.
                unsafe { libc::kill(pid, libc::SIGINT) };
            }
        }
        child
    };
    let pid = child.id();
    let output = child.wait_with_output();
    CHILDREN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&p| p != pid);
    let output = match output {
        Ok(o) => o,
        Err(e) => return Ended::Failed(format!("cannot wait for the run: {e}")),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let error = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("; ");
    match output.status.code() {
        Some(0) => Ended::Finished,
        Some(c) if c == i32::from(EXIT_INTERRUPTED) => Ended::Stopped,
        Some(c) => Ended::Failed(if error.is_empty() {
            format!("exit code {c}")
        } else {
            error
        }),
        None => Ended::Failed(format!("killed by a signal ({})", output.status)),
    }
}

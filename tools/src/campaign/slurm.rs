//! The sbatch script of a campaign: one Slurm job array, one task per run,
//! each task `tollgate sim FILE --run-index $SLURM_ARRAY_TASK_ID`.

use std::fmt::Write as _;
use std::path::Path;

use super::Campaign;

/// What goes into the script besides the campaign.
#[derive(Clone, Debug, Default)]
pub struct SlurmOptions {
    /// `#SBATCH --partition`.
    pub partition: Option<String>,
    /// At most this many tasks at once (`--array=0-(N-1)%K`).
    pub max_parallel: Option<usize>,
    /// `#SBATCH --time` (e.g. `00:30:00`).
    pub time: Option<String>,
    /// Replicated seeds given on the command line (`--seeds N`), passed on.
    pub seeds: Option<u64>,
    /// Pass `--no-plots` to every task.
    pub no_plots: bool,
}

/// Single-quote a string for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script. `tollgate`, `file` and `out` must be absolute paths that every
/// compute node sees (a shared filesystem); task logs go to
/// `<out>/<name>/slurm/<job>_<task>.out|.err`.
pub fn slurm_script(
    c: &Campaign,
    tollgate: &Path,
    file: &Path,
    out: &Path,
    o: &SlurmOptions,
) -> String {
    let dir = c.dir(out);
    let logs = dir.join("slurm");
    let mut s = String::from("#!/bin/bash\n");
    let _ = writeln!(
        s,
        "# Campaign {}: {} runs ({} point(s) x {} seed(s)), one Slurm array task per run.",
        c.name,
        c.runs.len(),
        c.points.len(),
        c.seeds_per_point
    );
    let _ = writeln!(
        s,
        "# Written by `tollgate campaign slurm`; submit with sbatch, then"
    );
    let _ = writeln!(s, "#   tollgate campaign merge {}", dir.display());
    let _ = writeln!(s, "#SBATCH --job-name=tollgate-{}", c.name);
    let throttle = o.max_parallel.map_or(String::new(), |k| format!("%{k}"));
    let _ = writeln!(
        s,
        "#SBATCH --array=0-{}{throttle}",
        c.runs.len().saturating_sub(1)
    );
    let _ = writeln!(s, "#SBATCH --ntasks=1");
    let _ = writeln!(s, "#SBATCH --cpus-per-task=1");
    if let Some(p) = &o.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    if let Some(t) = &o.time {
        let _ = writeln!(s, "#SBATCH --time={t}");
    }
    let _ = writeln!(s, "#SBATCH --output={}/%A_%a.out", logs.display());
    let _ = writeln!(s, "#SBATCH --error={}/%A_%a.err", logs.display());
    s.push_str("set -euo pipefail\n");
    let mut cmd = format!(
        "exec {} sim {} --run-index \"$SLURM_ARRAY_TASK_ID\" --out {} --quiet",
        quote(&tollgate.display().to_string()),
        quote(&file.display().to_string()),
        quote(&out.display().to_string())
    );
    if let Some(n) = o.seeds {
        let _ = write!(cmd, " --seeds {n}");
    }
    if o.no_plots {
        cmd.push_str(" --no-plots");
    }
    s.push_str(&cmd);
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_plan;

    #[test]
    fn the_script_is_an_array_over_every_run() {
        let plan = parse_plan(
            r#"
name = "s"
duration = "2s"
seeds = [1, 2, 3]
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms" }
[[flows]]
cca = "newreno"
rtt = "20ms"
[sweep]
param = "duration"
values = ["1s", "2s"]
"#,
        )
        .unwrap();
        let c = Campaign::new(&plan).unwrap();
        let s = slurm_script(
            &c,
            Path::new("/opt/bin/tollgate"),
            Path::new("/home/me/it's.toml"),
            Path::new("/scratch/results"),
            &SlurmOptions {
                partition: Some("short".into()),
                max_parallel: Some(4),
                time: Some("00:10:00".into()),
                seeds: None,
                no_plots: true,
            },
        );
        assert!(s.contains("#SBATCH --array=0-5%4\n"), "{s}");
        assert!(s.contains("#SBATCH --partition=short\n"), "{s}");
        assert!(s.contains("#SBATCH --time=00:10:00\n"), "{s}");
        assert!(
            s.contains("#SBATCH --output=/scratch/results/s/slurm/%A_%a.out"),
            "{s}"
        );
        assert!(
            s.contains(
                "exec '/opt/bin/tollgate' sim '/home/me/it'\\''s.toml' --run-index \
                 \"$SLURM_ARRAY_TASK_ID\" --out '/scratch/results' --quiet --no-plots\n"
            ),
            "{s}"
        );
    }
}

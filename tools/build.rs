//! Records the git revision the `tollgate` binary is built from
//! (`TOLLGATE_GIT_REVISION`, with `-dirty` for local changes), for the
//! `environment` section of load and testbed results. Outside a git checkout
//! the variable is left unset and the results say `null`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    if let Some(rev) = git(&["rev-parse", "--short=12", "HEAD"]) {
        let dirty =
            git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        let suffix = if dirty { "-dirty" } else { "" };
        println!("cargo:rustc-env=TOLLGATE_GIT_REVISION={rev}{suffix}");
    }
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

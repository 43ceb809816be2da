//! Records the git revision the `tollgate` binary is built from:
//!
//! - `TOLLGATE_GIT_REVISION`: the commit (12 hex digits) with `-dirty` when
//!   tracked files differ from it, for the `environment` section of load and
//!   testbed results (left unset outside a git checkout: the results say
//!   `null`);
//! - `TOLLGATE_VERSION`: what `tollgate --version` prints after the name,
//!   e.g. `0.1.0 (git 0123456789ab, modified)`, or
//!   `0.1.0 (unknown revision)` when built outside git (a source tarball, no
//!   `git` installed). The build never fails for want of git.
//!
//! The script runs again when HEAD moves (a checkout, a commit on the current
//! branch) or the index changes (staging, commits). Edits to tracked files
//! that are neither staged nor rebuilt through a HEAD or index change keep the
//! previous `modified` flag until the next such change.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Rerun when `path` changes; only for files that exist (cargo reruns the
/// script on every build for a missing one).
fn watch(path: &str) {
    if Path::new(path).exists() {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let revision = git(&["rev-parse", "--short=12", "HEAD"]).filter(|r| !r.is_empty());
    let line = match &revision {
        Some(rev) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            let suffix = if dirty { "-dirty" } else { "" };
            println!("cargo:rustc-env=TOLLGATE_GIT_REVISION={rev}{suffix}");
            let modified = if dirty { ", modified" } else { "" };
            format!("{version} (git {rev}{modified})")
        }
        None => format!("{version} (unknown revision)"),
    };
    println!("cargo:rustc-env=TOLLGATE_VERSION={line}");
    if revision.is_some() {
        // HEAD itself, the branch it points to (a loose ref; packed refs in
        // packed-refs) and the index.
        for path in ["HEAD", "index", "packed-refs"] {
            if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                watch(&p);
            }
        }
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                watch(&p);
            }
        }
    }
    // GIT_DIR and friends change which repository the commands above read.
    for var in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

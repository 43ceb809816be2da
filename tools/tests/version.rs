//! `tollgate --version` names the git revision the binary was built from,
//! and the build script that records it works without git.

use std::path::Path;
use std::process::Command;

/// The revision part of a version line: `git <hex>[, modified]` or
/// `unknown revision`; returns the hash, if any.
fn parse_revision(inner: &str) -> Result<Option<&str>, String> {
    if inner == "unknown revision" {
        return Ok(None);
    }
    let rest = inner
        .strip_prefix("git ")
        .ok_or_else(|| format!("`{inner}` is neither `git <hash>` nor `unknown revision`"))?;
    let hash = rest.strip_suffix(", modified").unwrap_or(rest);
    let hex = hash
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    if !hex || !(7..=40).contains(&hash.len()) {
        return Err(format!("`{hash}` is not an abbreviated commit hash"));
    }
    Ok(Some(hash))
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_names_the_git_revision() {
    for flag in ["--version", "-V"] {
        let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .arg(flag)
            .output()
            .expect("run tollgate");
        assert!(out.status.success(), "{flag}: {out:?}");
        let line = String::from_utf8(out.stdout).unwrap();
        let line = line.trim_end();
        let prefix = format!("tollgate {} (", env!("CARGO_PKG_VERSION"));
        let inner = line
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{flag}: `{line}` is not `{prefix}...)`"));
        let hash = parse_revision(inner).unwrap_or_else(|e| panic!("{flag}: {e}"));
        // Built from a checkout: the revision is one of its commits.
        if git(&["rev-parse", "HEAD"]).is_some() {
            let hash = hash.unwrap_or_else(|| panic!("built in a git checkout, but `{line}`"));
            assert!(
                git(&["cat-file", "-e", &format!("{hash}^{{commit}}")]).is_some(),
                "{hash} is not a commit of this checkout"
            );
        }
    }
}

#[test]
fn revision_format_is_checked() {
    assert_eq!(parse_revision("git 0123456789ab"), Ok(Some("0123456789ab")));
    assert_eq!(parse_revision("git abc1234, modified"), Ok(Some("abc1234")));
    assert_eq!(parse_revision("unknown revision"), Ok(None));
    assert!(parse_revision("git xyz").is_err());
    assert!(parse_revision("git abc").is_err());
    assert!(parse_revision("abc1234").is_err());
}

/// The build script, compiled on its own and run where no repository can be
/// found (as when building from a source tarball), still sets the version.
#[test]
fn build_script_falls_back_without_git() {
    let dir = std::env::temp_dir().join(format!("tollgate-version-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("build.rs");
    let exe = dir.join("build-script");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let status = Command::new(rustc)
        .args(["--edition", "2021", "-o"])
        .arg(&exe)
        .arg(&script)
        .status()
        .expect("run rustc");
    assert!(status.success(), "rustc build.rs");
    let out = Command::new(&exe)
        .current_dir(&dir)
        .env("CARGO_PKG_VERSION", "1.2.3")
        .env("GIT_DIR", dir.join("no-such-repository"))
        .env("GIT_CEILING_DIRECTORIES", &dir)
        .output()
        .expect("run the build script");
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l == "cargo:rustc-env=TOLLGATE_VERSION=1.2.3 (unknown revision)"),
        "{text}"
    );
    assert!(!text.contains("TOLLGATE_GIT_REVISION"), "{text}");
}

//! `tollgate testbed`'s errors that need no namespace: what it cannot build
//! yet, a missing router binary (or not root), and `--cleanup` without root.
//! The runs themselves are tested in `tests/tests/testbed.rs` (root, DPDK).

use std::path::PathBuf;
use std::process::Command;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn testbed(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("testbed")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn what_the_testbed_cannot_build_is_an_error_that_says_what_to_do() {
    let dir = temp_dir("testbed-cli");
    let scenario = |body: &str| {
        let p = dir.join("s.toml");
        std::fs::write(
            &p,
            format!(
                "name = \"t\"\nduration = \"2s\"\n[topology]\nkind = \"dumbbell\"\n\
                 bottleneck = {{ rate = \"100Mbit\", delay = \"1ms\" }}\n{body}"
            ),
        )
        .unwrap();
        p.to_string_lossy().to_string()
    };
    // A parking lot runs on namespaces only, not on a [testbed] table's hosts.
    let parking = dir.join("p.toml");
    std::fs::write(
        &parking,
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scenarios/testbed-parking-lot.toml"
        ))
        .unwrap()
            + "[testbed]\nclient = { run = [\"sh\", \"-c\"], address = \"10.1.0.1\" }\n\
               server = { run = [\"sh\", \"-c\"], address = \"10.1.0.2\" }\n\
               router = { ports = [\"0000:03:00.0\", \"0000:03:00.1\"] }\n",
    )
    .unwrap();
    let (code, err) = testbed(&[&parking.to_string_lossy(), "--router-bin", "/nonexistent"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("parking lot") && err.contains("remove the [testbed] table"),
        "{err}"
    );

    let s = scenario("[[flows]]\ncca = \"newreno\"\nrtt = \"10ms\"\nserver = \"10.0.0.9:4433\"\n");
    let (code, err) = testbed(&[&s, "--router-bin", "/nonexistent"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("flows[0].server"), "{err}");

    let s = scenario("[[flows]]\ncca = \"newreno\"\nrtt = \"10ms\"\n");
    let (code, err) = testbed(&[&s, "--router-bin", "/nonexistent/tollgate-router"]);
    assert_eq!(code, Some(1));
    if root() {
        assert!(
            err.contains("/nonexistent/tollgate-router does not exist")
                && err.contains("cargo build --release -p tollgate-dataplane --features dpdk")
                && err.contains("--router-bin"),
            "{err}"
        );
    } else {
        assert!(err.contains("needs root"), "{err}");
        let (code, err) = testbed(&["--cleanup"]);
        assert_eq!(code, Some(1));
        assert!(err.contains("needs root"), "{err}");
    }
}

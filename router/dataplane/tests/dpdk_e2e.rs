//! End to end through `tollgate-router` with kernel TCP: two network
//! namespaces joined by veth pairs whose router-side ends are bound to the
//! dataplane with `net_af_packet`. A reno and a cubic flow share an emulated
//! 100 Mbit/s bottleneck (20 ms RTT from the router's delay lines) with an
//! unresponsive UDP flood at 150 Mbit/s. DropTail lets the flood starve
//! TCP; CHOKe drops the flood's packets preferentially, so TCP's share must
//! grow. Cebinae's shares are measured and printed but not asserted: it
//! runs here with the ns-3 tax `tau = 0.05`, which protects TCP poorly
//! (router/README.md, "Choosing Cebinae's dt and tau"; `tests/tests/testbed.rs`
//! asserts the protection at Cebinae's defaults). Needs root, `ip`, `ethtool`
//! and `python3`; otherwise prints `SKIP: <reason>`. Namespaces are removed
//! at the end even on failure.
#![cfg(feature = "dpdk")]

use std::process::{Command, Stdio};
use std::time::Duration;

use tollgate_tests::netns::{have, KillOnDrop, Topology};
use tollgate_tests::router_run::*;
use tollgate_tests::skip;

const FLOW_SECS: f64 = 6.0;

/// Run the flows through the router with `discipline`; returns (reno, cubic, udp) Mbit/s at the receiver.
fn measure(
    t: &Topology,
    dir: &std::path::Path,
    discipline: &str,
) -> Result<(f64, f64, f64, String), String> {
    let cfg = format!(
        r#"
stats_interval = "0s"
hash_seed = 1
drain_timeout = "500ms"
[[ports]]
device = "net_af_packet0"
peer = "net_af_packet1"
[ports.egress]
rate = "1Gbit"
delay = "10ms"
[[ports]]
device = "net_af_packet1"
peer = "net_af_packet0"
[ports.egress]
rate = "100Mbit"
delay = "10ms"
{discipline}
"#
    );
    let path = dir.join(format!("router-{}.toml", discipline.len()));
    std::fs::write(&path, cfg).map_err(|e| e.to_string())?;
    let prefix = format!("tg-e2e-{}", std::process::id());
    let mut eal = eal_args(
        &prefix,
        &[
            &format!("net_af_packet0,iface={}", t.r_a),
            &format!("net_af_packet1,iface={}", t.r_b),
        ],
    );
    eal[1] = "0".into();
    let mut router = Command::new(router_bin());
    router
        .arg("--config")
        .arg(&path)
        .arg("--duration")
        .arg(format!("{}s", FLOW_SECS + 3.0))
        .arg("--quiet")
        .arg("--")
        .args(&eal);
    router.stdout(Stdio::piped()).stderr(Stdio::piped());
    let router = router.spawn().map_err(|e| e.to_string())?;
    let router = KillOnDrop(router);
    std::thread::sleep(Duration::from_millis(1500));
    let py = |a: &[&str]| -> Vec<String> {
        let mut v = vec![
            "python3".to_string(),
            dir.join("flows.py").display().to_string(),
        ];
        v.extend(a.iter().map(|s| s.to_string()));
        v
    };
    let secs = FLOW_SECS.to_string();
    let recv = t
        .exec(&t.ns_b, &py(&["recv", &(FLOW_SECS + 0.5).to_string()]))
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let recv = KillOnDrop(recv);
    std::thread::sleep(Duration::from_millis(300));
    let mut senders = Vec::new();
    for a in [
        py(&["tcp", "10.77.0.2", "reno", &secs]),
        py(&["tcp", "10.77.0.2", "cubic", &secs]),
        py(&["udp", "10.77.0.2", "150", &secs]),
    ] {
        senders.push(KillOnDrop(
            t.exec(&t.ns_a, &a)
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?,
        ));
    }
    let recv_out = {
        let mut r = recv;
        let mut s = String::new();
        if let Some(mut o) = r.0.stdout.take() {
            use std::io::Read;
            let _ = o.read_to_string(&mut s);
        }
        s
    };
    drop(senders);
    let mut router = router;
    let out = {
        let mut s = String::new();
        let _ = router.0.wait();
        if let Some(mut o) = router.0.stdout.take() {
            use std::io::Read;
            let _ = o.read_to_string(&mut s);
        }
        if let Some(mut e) = router.0.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut s);
        }
        s
    };
    let get = |key: &str| -> f64 {
        // Tiny JSON reader for {"tcp": {"reno": N, "cubic": N}, "udp": N, ...}.
        recv_out
            .split(&format!("\"{key}\": "))
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let mbps = |b: f64| b * 8.0 / FLOW_SECS / 1e6;
    if !recv_out.contains("\"udp\"") {
        return Err(format!("receiver printed nothing; router output:\n{out}"));
    }
    Ok((mbps(get("reno")), mbps(get("cubic")), mbps(get("udp")), out))
}

#[test]
fn tcp_vs_udp_flood_shares_change_with_the_discipline() {
    const NAME: &str = "tcp_vs_udp_flood_shares_change_with_the_discipline";
    if let Err(r) = require_root() {
        return skip(NAME, &r);
    }
    for (cmd, arg) in [
        ("ip", "-V"),
        ("ethtool", "--version"),
        ("python3", "--version"),
    ] {
        if !have(cmd, arg) {
            return skip(NAME, &format!("`{cmd}` is not installed"));
        }
    }
    let dir = scratch("e2e");
    std::fs::write(dir.join("flows.py"), include_str!("dpdk_flows.py")).unwrap();
    let topo = match Topology::new("e2") {
        Ok(t) => t,
        Err(e) => return skip(NAME, &format!("cannot build namespaces/veth: {e}")),
    };
    let mut results = Vec::new();
    for (name, disc) in [
        ("droptail", "discipline = \"droptail\"\nlimit = 250"),
        (
            "choke",
            "discipline = \"choke\"\nlimit = 250\nmin_th = 20\nmax_th = 60",
        ),
        (
            "cebinae",
            "discipline = \"cebinae\"\nmax_size = 250\ntau = 0.05",
        ),
    ] {
        let (reno, cubic, udp, out) = match measure(&topo, &dir, disc) {
            Ok(r) => r,
            Err(e) => panic!("{name}: {e}"),
        };
        if out.contains("EAL initialisation failed") {
            return skip(NAME, "DPDK EAL init failed");
        }
        assert!(
            out.contains("accounting=ok"),
            "{name}: router accounting:\n{out}"
        );
        let total = reno + cubic + udp;
        println!("E2E {name}: reno={reno:.1} Mbit/s cubic={cubic:.1} Mbit/s udp={udp:.1} Mbit/s tcp_share={:.3}", (reno + cubic) / total.max(1e-9));
        for l in out.lines().filter(|l| {
            l.starts_with("lane port=net_af_packet1") || l.starts_with("tollgate-router final")
        }) {
            println!("  {l}");
        }
        assert!(
            total < 110.0,
            "{name}: the 100 Mbit/s bottleneck holds ({total:.1})"
        );
        results.push((name, reno + cubic, total));
    }
    let tcp = |n: &str| {
        results
            .iter()
            .find(|r| r.0 == n)
            .map(|r| r.1)
            .unwrap_or(0.0)
    };
    assert!(
        tcp("droptail") < 30.0,
        "DropTail lets the flood take most of the link (TCP {:.1} Mbit/s)",
        tcp("droptail")
    );
    // Cebinae is measured and printed but not asserted: its tax targets
    // responsive top flows (router/README.md, "Choosing Cebinae's dt and tau").
    assert!(
        tcp("choke") >= 2.0 * tcp("droptail") && tcp("choke") >= tcp("droptail") + 2.0,
        "CHOKe protects TCP: {:.1} vs DropTail {:.1}",
        tcp("choke"),
        tcp("droptail")
    );
    drop(topo);
    let _ = std::fs::remove_dir_all(dir);
}

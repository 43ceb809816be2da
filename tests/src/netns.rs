//! Network namespaces joined through the router by veth pairs (router-side
//! ends bound to the dataplane with `net_af_packet`), and per-thread
//! namespace entry for in-process endpoints.

use std::process::{Child, Command, Stdio};

/// Whether `cmd arg` can be run.
pub fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Run a command; `Err` with its stderr when it fails (the testbed's
/// [`tollgate_tools::testbed::netns::sh`], its error as text).
pub fn sh(args: &[&str]) -> Result<(), String> {
    tollgate_tools::testbed::netns::sh(args).map_err(|e| e.to_string())
}

/// Two namespaces (`ns_a` 10.77.0.1, `ns_b` 10.77.0.2) and two veth pairs
/// whose outer ends `r_a`/`r_b` are for the router; removed on drop.
#[derive(Debug)]
pub struct Topology {
    /// Namespace of host A.
    pub ns_a: String,
    /// Namespace of host B.
    pub ns_b: String,
    /// Router-side veth towards A.
    pub r_a: String,
    /// Router-side veth towards B.
    pub r_b: String,
}

impl Topology {
    /// Build it; `tag` (two letters) keeps names apart between test binaries.
    pub fn new(tag: &str) -> Result<Topology, String> {
        let id = std::process::id() % 100_000;
        let t = Topology {
            ns_a: format!("tg{tag}A{id}"),
            ns_b: format!("tg{tag}B{id}"),
            r_a: format!("t{tag}{id}a"),
            r_b: format!("t{tag}{id}b"),
        };
        t.cleanup();
        let built = t.build();
        built.map(|()| t)
    }

    fn build(&self) -> Result<(), String> {
        for (ns, inner, outer, addr, mac) in [
            (
                &self.ns_a,
                "a0",
                &self.r_a,
                "10.77.0.1/24",
                "02:77:00:00:00:01",
            ),
            (
                &self.ns_b,
                "b0",
                &self.r_b,
                "10.77.0.2/24",
                "02:77:00:00:00:02",
            ),
        ] {
            sh(&["ip", "netns", "add", ns])?;
            sh(&[
                "ip", "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns,
            ])?;
            sh(&["ip", "-n", ns, "link", "set", inner, "address", mac])?;
            sh(&["ip", "-n", ns, "addr", "add", addr, "dev", inner])?;
            sh(&["ip", "-n", ns, "link", "set", inner, "up"])?;
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
            sh(&["ip", "link", "set", outer, "up"])?;
            // Real frames on the wire: no segmentation or checksum offload.
            let _ = sh(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", inner, "tx", "off", "rx", "off", "tso",
                "off", "gso", "off", "gro", "off",
            ]);
            let _ = sh(&[
                "ethtool", "-K", outer, "tx", "off", "rx", "off", "tso", "off", "gso", "off",
                "gro", "off",
            ]);
        }
        // Static neighbours: no ARP needed through the bump in the wire.
        for (ns, ip, mac, dev) in [
            (&self.ns_a, "10.77.0.2", "02:77:00:00:00:02", "a0"),
            (&self.ns_b, "10.77.0.1", "02:77:00:00:00:01", "b0"),
        ] {
            sh(&[
                "ip",
                "-n",
                ns,
                "neigh",
                "add",
                ip,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
        }
        Ok(())
    }

    fn cleanup(&self) {
        for l in [&self.r_a, &self.r_b] {
            let _ = Command::new("ip")
                .args(["link", "del", l])
                .stderr(Stdio::null())
                .status();
        }
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.cleanup();
    }
}

impl Topology {
    /// `ip netns exec NS ARGS...` as a command to spawn.
    pub fn exec(&self, ns: &str, args: &[String]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(args);
        c
    }
}

/// Move the calling thread (only) into network namespace `ns`: the
/// testbed's own.
pub use tollgate_tools::testbed::netns::enter_netns;

/// A child process killed (by its pid) and reaped on drop.
#[derive(Debug)]
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

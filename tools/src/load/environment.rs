//! What makes a real run reproducible: the software, the machine and the
//! path, recorded in `results.json` (`environment`) by `tollgate load`.
//!
//! Every field is best effort: a value the system does not expose is `None`,
//! never a guess.

use std::net::SocketAddr;
use std::process::Command;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The run's environment.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    /// `tollgate serve`, `load` or `testbed`.
    pub tool: String,
    /// The command line, as typed.
    pub command_line: Vec<String>,
    /// The git revision the binary was built from (`-dirty` with local changes).
    pub git_revision: Option<String>,
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// CPU model.
    pub cpu_model: Option<String>,
    /// Logical CPUs available to this process (a count).
    pub cpus: usize,
    /// The kernel's clock source (tsc, hpet, kvm-clock, ...).
    pub clock_source: Option<String>,
    /// Host name.
    pub hostname: Option<String>,
    /// The server the flows went to.
    pub server: Option<String>,
    /// The interface towards the server, its driver and speed (Mbit/s).
    pub interface: Option<Interface>,
    /// Unix time at the start of the run, s.
    pub started_unix_s: f64,
    /// What the run does not emulate, and how to read it.
    pub note: String,
}

/// A network interface.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Interface {
    /// Name, e.g. `eth0`, `lo`.
    pub name: String,
    /// Kernel driver (`ixgbe`, `mlx5_core`, ...), `None` for virtual devices.
    pub driver: Option<String>,
    /// Link speed, Mbit/s, when the driver reports one.
    pub speed_mbps: Option<u64>,
    /// MTU, bytes.
    pub mtu: Option<u32>,
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The interface the kernel routes `to` through (`ip route get`).
pub fn interface_towards(to: SocketAddr) -> Option<Interface> {
    let out = Command::new("ip")
        .args(["-o", "route", "get", &to.ip().to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let name = loop {
        match words.next()? {
            "dev" => break words.next()?.to_string(),
            _ => continue,
        }
    };
    let driver = std::fs::read_link(format!("/sys/class/net/{name}/device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
    let speed_mbps = read_trim(&format!("/sys/class/net/{name}/speed"))
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|&v| v > 0)
        .map(|v| v as u64);
    let mtu = read_trim(&format!("/sys/class/net/{name}/mtu")).and_then(|s| s.parse().ok());
    Some(Interface {
        name,
        driver,
        speed_mbps,
        mtu,
    })
}

/// Collect the environment of a run of `tool` towards `server`.
pub fn collect(tool: &str, server: Option<SocketAddr>, note: &str) -> Environment {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    Environment {
        tool: tool.to_string(),
        command_line: std::env::args().collect(),
        git_revision: option_env!("TOLLGATE_GIT_REVISION").map(str::to_string),
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        clock_source: read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        hostname: read_trim("/proc/sys/kernel/hostname"),
        server: server.map(|s| s.to_string()),
        interface: server.and_then(interface_towards),
        started_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        note: note.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_route_names_lo_and_the_machine_is_described() {
        let env = collect("load", Some("127.0.0.1:4433".parse().unwrap()), "n");
        assert!(env.kernel.is_some(), "kernel release readable");
        assert!(env.cpus >= 1);
        assert!(!env.command_line.is_empty());
        if let Some(i) = env.interface {
            assert_eq!(i.name, "lo");
            assert_eq!(i.driver, None, "lo is virtual");
        }
    }
}

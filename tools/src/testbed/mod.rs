//! `tollgate testbed`: a scenario on real kernels, sockets and the DPDK
//! router, on one machine.
//!
//! A dumbbell: a client namespace and a server namespace, each joined by
//! a veth pair to `tollgate-router`, which runs in the root namespace on
//! two `net_af_packet` ports in L2 mode (a bump in the wire):
//!
//! ```text
//! [client ns 10.201.0.1] eth0 ==veth== tgtb<pid>c  (tollgate-router)  tgtb<pid>s ==veth== eth0 [server ns 10.201.0.2]
//! ```
//!
//! Both router egresses get the scenario's bottleneck rate as the shaper
//! and its discipline with its keys, the queue limit set from
//! `topology.bottleneck.buffer` (the emulator's dumbbell has the
//! discipline in both directions too; the data direction of uploads is the
//! egress toward the server, `fwd1`). Each flow gets a fixed client port
//! (from [`FIRST_PORT`], in flow order) and two router rules on its
//! 5-tuple that delay its packets by half its `rtt` in each direction (the
//! router's per-rule delay classes), so every flow sees its own emulated
//! RTT. With `router.classify = "scenario"` the rules also set the flow's
//! variant. `tollgate serve` runs in the server namespace and `tollgate
//! load` in the client namespace (this binary, through `ip netns exec`);
//! their results and the router's final statistics are merged into one
//! results.json in the `sim` format ([`merge`]).
//!
//! A parking lot ([`netns::Chain`]): a Linux bridge per node, the
//! router's port pairs as the links between them, one client and one
//! server namespace with an address per node where flows start or end
//! ([`flow_nodes`]); each flow's rule delay is half its RTT split over the
//! links it crosses ([`rule_delay_ns`]), since the router delays it at
//! every egress.
//!
//! Teardown ([`netns::Topology`]'s and [`netns::Proc`]'s drops) runs on
//! success, on failure and after Ctrl-C; children die with the testbed
//! even on SIGKILL (`PR_SET_PDEATHSIG`), and `tollgate testbed --cleanup`
//! removes the namespaces and veths such a run left ([`netns`]).

pub mod losses;
pub mod netns;
pub mod site;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::results::{self, PortResult, Results};
use crate::scenario::kind::FlowKind;
use crate::scenario::{Scenario, TopologyKind};
use crate::sim::topology::{self, FlowSpec};

/// The client port of flow 0; flow `i` uses `FIRST_PORT + i`.
pub const FIRST_PORT: u16 = 41000;
/// The server's port (UDP for QUIC, TCP for kernel TCP).
pub const SERVER_PORT: u16 = 4433;
/// Most flows per run: one fixed port each, and the router's 31 rule delays
/// (two per distinct RTT).
pub const MAX_FLOWS: usize = 1000;

/// How to run.
#[derive(Clone, Debug)]
pub struct TestbedOptions {
    /// The `tollgate-router` binary.
    pub router_bin: PathBuf,
    /// The `tollgate` binary (serve and load run as its subcommands).
    pub tollgate_bin: PathBuf,
    /// Working directory for configs, certificates and logs.
    pub work_dir: PathBuf,
    /// The scenario file (handed to `tollgate load`).
    pub scenario_path: PathBuf,
    /// The router's EAL lcore.
    pub router_lcore: u32,
    /// The router's poll-mode driver on the veths.
    pub pmd: netns::Pmd,
    /// The scenario's `[testbed]` table: hosts and router ports instead of
    /// namespaces ([`site`]).
    pub site: Option<toml::Value>,
    /// `--seed` / `--duration` overrides, passed on to load.
    pub load_args: Vec<String>,
}

/// Checks of the scenario: what the testbed cannot build yet is an error
/// naming the field.
pub fn check(s: &Scenario) -> anyhow::Result<()> {
    if s.bottleneck_loss > 0.0 {
        anyhow::bail!(
            "topology.bottleneck.loss = {}: the router does not emulate random loss (yet); \
             remove it here, or run the scenario with `tollgate sim`",
            s.bottleneck_loss
        );
    }
    crate::load::check(s)?;
    let specs = topology::flows(s);
    if specs.len() > MAX_FLOWS {
        anyhow::bail!(
            "{} flows: the testbed gives each flow a port of its own, at most {MAX_FLOWS}",
            specs.len()
        );
    }
    for (i, g) in s.flows.iter().enumerate() {
        if g.server.is_some() {
            anyhow::bail!("flows[{i}].server: the testbed runs its own server; remove `server`");
        }
    }
    let delays = distinct_rule_delays(s, &specs);
    if delays.len() > tollgate_router::classify::MAX_RULE_DELAYS {
        anyhow::bail!(
            "{} distinct per-hop flow delays (half a flow's `rtt` divided by the hops it \
             crosses): the router has {} per-rule delay classes; use fewer distinct `rtt` values",
            delays.len(),
            tollgate_router::classify::MAX_RULE_DELAYS
        );
    }
    Ok(())
}

/// Bottleneck links flow `f` crosses.
fn hops_crossed(s: &Scenario, f: &FlowSpec) -> u64 {
    let (a, b) = s.flows[f.group].hops;
    u64::from(b - a + 1)
}

/// The delay of flow `f`'s rules: the router delays a packet at every
/// egress it crosses, so half the flow's RTT, split over its hops, in each
/// direction.
pub fn rule_delay_ns(s: &Scenario, f: &FlowSpec) -> u64 {
    f.rtt_ns / 2 / hops_crossed(s, f)
}

fn distinct_rule_delays(s: &Scenario, specs: &[FlowSpec]) -> Vec<u64> {
    let mut v: Vec<u64> = specs.iter().map(|f| rule_delay_ns(s, f)).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The client's and the server's node of flow `f` in a parking lot: the
/// client at the node before its first hop, the server after its last,
/// swapped for a reverse flow, as in the emulator (sim/topology.rs), so
/// the data of every flow crosses the forward egresses.
pub fn flow_nodes(s: &Scenario, f: &FlowSpec) -> (usize, usize) {
    let (a, b) = s.flows[f.group].hops;
    let (left, right) = (a as usize, b as usize + 1);
    if f.reverse {
        (right, left)
    } else {
        (left, right)
    }
}

/// The parking lot a scenario needs (`None` for a dumbbell).
pub fn chain_of(s: &Scenario) -> Option<netns::Chain> {
    if s.topology != TopologyKind::ParkingLot {
        return None;
    }
    let specs = topology::flows(s);
    let mut client_nodes: Vec<usize> = specs.iter().map(|f| flow_nodes(s, f).0).collect();
    let mut server_nodes: Vec<usize> = specs.iter().map(|f| flow_nodes(s, f).1).collect();
    for v in [&mut client_nodes, &mut server_nodes] {
        v.sort_unstable();
        v.dedup();
    }
    Some(netns::Chain {
        hops: s.hops as usize,
        client_nodes,
        server_nodes,
    })
}

/// Each flow's client and server address on `site`.
pub fn flow_addresses(s: &Scenario, site: &site::Site) -> Vec<(IpAddr, IpAddr)> {
    topology::flows(s)
        .iter()
        .map(|f| match &site.chain {
            Some(_) => {
                let (c, sv) = flow_nodes(s, f);
                (netns::chain_client_ip(c), netns::chain_server_ip(sv))
            }
            None => (site.client.address, site.server.address),
        })
        .collect()
}

/// The queue-limit key of a discipline, to carry the scenario's buffer.
fn limit_key(discipline: &str) -> &'static str {
    match discipline {
        "cebinae" => "max_size",
        "rrmqs" => "main_limit",
        _ => "limit",
    }
}

/// The router's egress table: the scenario's `[router]` keys (without
/// `classify`), the buffer as the discipline's limit, rate and delays.
fn egress_table(s: &Scenario, raw_router: &toml::Table, delay_capacity: u64) -> toml::Table {
    let mut t = raw_router.clone();
    t.remove("classify");
    let name = s.router.discipline.clone();
    t.insert("discipline".into(), name.clone().into());
    t.insert(
        limit_key(&name).into(),
        i64::from(s.router.buffer_packets).into(),
    );
    t.insert("rate".into(), s.bottleneck_rate_bps.into());
    t.insert("delay_capacity".into(), (delay_capacity as i64).into());
    t
}

/// The `router.toml` of a run, and each flow's client port.
pub fn router_config(
    s: &Scenario,
    raw_router: &toml::Table,
    names: &netns::Names,
    site: &site::Site,
) -> anyhow::Result<(String, Vec<u16>)> {
    let specs = topology::flows(s);
    let clients = flow_addresses(s, site);
    let ports: Vec<u16> = (0..specs.len()).map(|i| FIRST_PORT + i as u16).collect();
    let max_half = specs.iter().map(|f| f.rtt_ns / 2).max().unwrap_or(0);
    // A delay class holds what its flows have in flight past the router:
    // at most their windows, which the BDP at the longest RTT plus the
    // buffer bound, twice that for slow start's overshoot. (Sized as the
    // bottleneck rate times the delay alone, the delay line overflowed in
    // slow start at 1 Gbit/s: packets arrive at the veth's rate, not the
    // bottleneck's.) At most 32,768, half the 65,535-mbuf pool; beyond it
    // the pool runs dry first, and that loss is counted too (losses.rs).
    let bdp_packets = s.bottleneck_rate_bps / 8.0 / 1500.0 * (2 * max_half) as f64 / 1e9;
    let in_flight = bdp_packets + f64::from(s.router.buffer_packets);
    let delay_capacity = (2.0 * in_flight).ceil().clamp(1024.0, 32768.0) as u64;
    let scenario_variants = s.router.classify == "scenario";
    let mut rules = Vec::new();
    for ((f, port), (client, _)) in specs.iter().zip(&ports).zip(&clients) {
        let delay = format!("{}ns", rule_delay_ns(s, f));
        let proto = match FlowKind::parse(&f.cca) {
            Ok(FlowKind::Tcp(_)) => "tcp",
            _ => "udp",
        };
        let client = match client {
            IpAddr::V4(a) => format!("{a}/32"),
            IpAddr::V6(a) => format!("{a}/128"),
        };
        for (dir_src, dir_port) in [("src", "src_port"), ("dst", "dst_port")] {
            let mut r = toml::Table::new();
            r.insert(dir_src.into(), client.clone().into());
            r.insert(dir_port.into(), i64::from(*port).into());
            r.insert("proto".into(), proto.into());
            r.insert("delay".into(), delay.clone().into());
            if scenario_variants {
                r.insert("variant".into(), i64::from(f.variant.dscp()).into());
            }
            rules.push(toml::Value::Table(r));
        }
    }
    let egress = egress_table(s, raw_router, delay_capacity);
    let mut doc = toml::Table::new();
    doc.insert("mode".into(), "l2".into());
    doc.insert("drain_timeout".into(), "1s".into());
    doc.insert("mbufs".into(), 65535.into());
    doc.insert("rules".into(), rules.into());
    // Ports in pairs, each the other's peer: the dumbbell's two, or each
    // parking-lot link's left and right side.
    let mut port_tables = Vec::new();
    for (i, p) in site.ports.iter().enumerate() {
        let mut t = toml::Table::new();
        t.insert("device".into(), p.device.clone().into());
        t.insert("peer".into(), site.ports[i ^ 1].device.clone().into());
        t.insert("egress".into(), egress.clone().into());
        port_tables.push(toml::Value::Table(t));
    }
    doc.insert("ports".into(), port_tables.into());
    let layout = match &site.chain {
        Some(c) => format!(
            "a parking lot of {} links: ports 2h-2 and 2h-1 are link h's left and right side",
            c.hops
        ),
        None => format!(
            "port 0 ({}) faces the client ({}), port 1 ({}) the server ({})",
            site.ports[0].device, site.client.address, site.ports[1].device, site.server.address,
        ),
    };
    let text = format!(
        "# tollgate testbed run {} (generated): {layout}.\n{}",
        names.id,
        toml::to_string(&doc)?
    );
    Ok((text, ports))
}

/// The DPDK EAL arguments of a run.
pub fn eal_args(names: &netns::Names, site: &site::Site, lcore: u32) -> Vec<String> {
    let mut a: Vec<String> = vec!["-l".into(), lcore.to_string()];
    a.extend(site.eal.iter().cloned());
    a.push("--log-level=lib.eal:warning".into());
    a.push(format!("--file-prefix={}", names.file_prefix));
    for p in &site.ports {
        a.extend(p.eal.iter().cloned());
    }
    a
}

/// One egress of the router's final report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouterLane {
    /// Device name.
    pub port: String,
    /// Discipline.
    pub discipline: String,
    /// `key=value` counters of the `lane` line.
    pub counters: HashMap<String, u64>,
    /// Transmitted bytes (sum over variants).
    pub tx_bytes: u64,
}

impl RouterLane {
    fn get(&self, k: &str) -> u64 {
        self.counters.get(k).copied().unwrap_or(0)
    }

    /// Drops by reason (non-zero only), plus `tx_full` and `ring_full`.
    pub fn drops(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = tollgate_router::DropReason::ALL
            .iter()
            .map(|r| {
                (
                    r.name().to_string(),
                    self.get(&format!("drop_{}", r.name())),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        for k in ["tx_full", "ring_full"] {
            if self.get(k) > 0 {
                v.push((k.to_string(), self.get(k)));
            }
        }
        v
    }
}

/// One device of the router's final report (its `dev` line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterDev {
    /// Packets the port received.
    pub rx: u64,
    /// `hw[imissed]`: the device had no room.
    pub imissed: u64,
    /// `hw[ierrors]`.
    pub ierrors: u64,
    /// `hw[oerrors]`: the device failed to send.
    pub oerrors: u64,
    /// `hw[rx_nombuf]`: no mbuf for a received packet.
    pub rx_nombuf: u64,
}

/// The router's final report.
#[derive(Clone, Debug, Default)]
pub struct RouterReport {
    /// Per device name (`net_af_packet0`), from the last `dev` lines.
    pub devs: HashMap<String, RouterDev>,
    /// Per egress, in config order.
    pub lanes: Vec<RouterLane>,
    /// `rx tx dropped queued` of the `tollgate-router final:` line.
    pub totals: HashMap<String, u64>,
    /// `accounting=ok` on that line.
    pub accounting_ok: bool,
}

/// Parse `tollgate-router`'s final report (stdout).
pub fn parse_router_report(stdout: &str) -> anyhow::Result<RouterReport> {
    let kv = |line: &str| -> Vec<(String, String)> {
        line.split_whitespace()
            .filter_map(|t| t.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let mut rep = RouterReport::default();
    let mut found = false;
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("dev ") {
            // `dev NAME rx=N rx_mpps=X ingress_drops[..] hw[imissed=N ierrors=N ..]`
            let name = rest.split_whitespace().next().unwrap_or_default();
            let mut d = RouterDev::default();
            for (k, v) in kv(rest) {
                let k = k.rsplit('[').next().unwrap_or_default();
                let Ok(n) = v.trim_end_matches(']').parse() else {
                    continue;
                };
                match k {
                    "rx" => d.rx = n,
                    "imissed" => d.imissed = n,
                    "ierrors" => d.ierrors = n,
                    "oerrors" => d.oerrors = n,
                    "rx_nombuf" => d.rx_nombuf = n,
                    _ => {}
                }
            }
            rep.devs.insert(name.to_string(), d);
        } else if let Some(rest) = line.strip_prefix("lane ") {
            let mut lane = RouterLane::default();
            for (k, v) in kv(rest) {
                match k.as_str() {
                    "port" => lane.port = v,
                    "discipline" => lane.discipline = v,
                    _ => {
                        if let Ok(n) = v.parse() {
                            lane.counters.insert(k, n);
                        }
                    }
                }
            }
            rep.lanes.push(lane);
        } else if let Some(rest) = line.strip_prefix("variants ") {
            let pairs = kv(rest);
            let port = pairs
                .iter()
                .find(|(k, _)| k == "port")
                .map(|(_, v)| v.clone());
            if let Some(lane) = rep
                .lanes
                .iter_mut()
                .find(|l| Some(&l.port) == port.as_ref())
            {
                lane.tx_bytes = pairs
                    .iter()
                    .filter(|(k, _)| k != "port")
                    .filter_map(|(_, v)| v.parse::<u64>().ok())
                    .sum();
            }
        } else if let Some(rest) = line.strip_prefix("tollgate-router final:") {
            found = true;
            for (k, v) in kv(rest) {
                if k == "accounting" {
                    rep.accounting_ok = v == "ok";
                } else if let Ok(n) = v.parse() {
                    rep.totals.insert(k, n);
                }
            }
        }
    }
    if !found {
        anyhow::bail!("the router printed no final report");
    }
    Ok(rep)
}

/// The load generator's results plus the router's report: the bottleneck
/// rate and discipline in the summary, the router's egresses in `ports`
/// (`fwd1`: toward the server, `rev1`: toward the client; `fwd<h>` and
/// `rev<h>` for a parking lot's link `h`, as in `sim`), each flow's
/// emulated RTT next to its measured minimum (`rtt_ms`).
pub fn merge(
    s: &Scenario,
    mut r: Results,
    router: &RouterReport,
    run_s: f64,
    path: &str,
) -> Results {
    r.summary.bottleneck_mbps = s.bottleneck_rate_bps / 1e6;
    r.summary.discipline = s.router.discipline.clone();
    let specs = topology::flows(s);
    for (f, spec) in r.flows.iter_mut().zip(&specs) {
        f.emulated_rtt_ms = Some(spec.rtt_ns as f64 / 1e6);
    }
    r.ports = router
        .lanes
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let dropped = l.drops();
            let total_drops: u64 = tollgate_router::DropReason::ALL
                .iter()
                .map(|d| l.get(&format!("drop_{}", d.name())))
                .sum();
            let received = l.get("received");
            let transmitted = l.get("transmitted");
            let in_flight = l.get("in_flight");
            PortResult {
                // Port 2h-1 (odd) sends toward the server side: forward.
                name: format!("{}{}", if i % 2 == 1 { "fwd" } else { "rev" }, i / 2 + 1),
                discipline: l.discipline.clone(),
                received,
                transmitted,
                dropped,
                marked: l.get("marked"),
                in_flight,
                accounting_exact: received == transmitted + total_drops + in_flight,
                utilization: if run_s > 0.0 {
                    l.tx_bytes as f64 * 8.0 / (s.bottleneck_rate_bps * run_s)
                } else {
                    0.0
                },
                queue_delay_ms: None,
                queue_delay_l4s_ms: None,
                queue_delay_classic_ms: None,
            }
        })
        .collect();
    // Forward egresses first, by hop, as in `sim`.
    r.ports
        .sort_by_key(|p| (!p.name.starts_with("fwd"), p.name.len(), p.name.clone()));
    if let Some(fwd) = r.ports.first() {
        r.summary.utilization = fwd.utilization;
    }
    if let Some(env) = &mut r.environment {
        env.tool = "testbed".into();
        env.note = format!(
            "testbed: {path}; bottleneck {:.0} Mbit/s with {} in both directions; \
             each flow's rtt emulated by router rules (half each way, split over the hops \
             it crosses); rtt_ms is the measured \
             minimum RTT, emulated_rtt_ms the scenario's; port utilization is over the whole \
             run ({run_s:.1} s, frame bytes)",
            s.bottleneck_rate_bps / 1e6,
            s.router.discipline
        );
    }
    r
}

/// What a testbed run produced.
#[derive(Debug)]
pub struct TestbedRun {
    /// The merged results.
    pub results: Results,
    /// The router's report.
    pub router: RouterReport,
    /// load's exit code.
    pub load_exit: Option<i32>,
    /// The router's exit code.
    pub router_exit: Option<i32>,
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Everything that must hold before building anything.
pub fn preflight(o: &TestbedOptions) -> anyhow::Result<()> {
    if !is_root() {
        anyhow::bail!(
            "tollgate testbed needs root (network namespaces, veth pairs and DPDK's af_packet \
             ports): run it with sudo"
        );
    }
    if !o.router_bin.is_file() {
        anyhow::bail!(
            "the router binary {} does not exist: build it with `cargo build --release -p \
             tollgate-dataplane --features dpdk` (target/release/tollgate-router), or give its \
             path with --router-bin or TOLLGATE_ROUTER_BIN",
            o.router_bin.display()
        );
    }
    if o.site.is_some() {
        // Hosts and ports of a [testbed] table: nothing to build here.
        return Ok(());
    }
    if netns::sh(&["ip", "-V"]).is_err() {
        anyhow::bail!("`ip` (iproute2) is not installed: apt-get install iproute2");
    }
    if netns::sh(&["ethtool", "--version"]).is_err() {
        anyhow::bail!("`ethtool` is not installed: apt-get install ethtool");
    }
    let left = netns::leftover_runs();
    if !left.is_empty() {
        anyhow::bail!(
            "a crashed testbed run left namespaces or veths behind (runs {:?}, names starting \
             with `{}`): remove them with `tollgate testbed --cleanup`",
            left,
            netns::PREFIX
        );
    }
    Ok(())
}

/// Run scenario `s` (read from `o.scenario_path`, whose `[router]` table is
/// `raw_router`) on the namespaces it builds, or on the hosts and router
/// ports of `o.site` (the file's `[testbed]` table). `stop` (Ctrl-C) ends
/// the flows early: load writes partial results, and everything is torn
/// down as after a normal run.
pub fn run(
    s: &Scenario,
    raw_router: &toml::Table,
    o: &TestbedOptions,
    stop: &AtomicBool,
    log: &mut dyn FnMut(&str),
) -> anyhow::Result<TestbedRun> {
    check(s)?;
    let chain = chain_of(s);
    if chain.is_some() && o.site.is_some() {
        anyhow::bail!(
            "testbed: a [testbed] table names one client, one server and two router ports; a \
             parking lot (topology.kind = \"parking-lot\") runs on the namespaces the testbed \
             builds: remove the [testbed] table, or run a dumbbell"
        );
    }
    preflight(o)?;
    std::fs::create_dir_all(&o.work_dir)?;
    let names = netns::Names::new(std::process::id());
    let site = match (&o.site, &chain) {
        (Some(t), _) => site::Site::from_table(t, &names)?,
        (None, Some(c)) => site::Site::chain(&names, o.pmd, &o.tollgate_bin, c.clone()),
        (None, None) => site::Site::namespaces(&names, o.pmd, &o.tollgate_bin),
    };
    let addresses = flow_addresses(s, &site);
    let (config, ports) = router_config(s, raw_router, &names, &site)?;
    let cfg_path = o.work_dir.join("router.toml");
    std::fs::write(&cfg_path, &config)?;

    // Declared first, dropped last: the processes go before the namespaces.
    let _topo = if o.site.is_none() {
        let t = match &chain {
            Some(c) => netns::Topology::build_chain(names.clone(), c)?,
            None => netns::Topology::build(names.clone())?,
        };
        log(&format!(
            "namespaces {} / {} built; starting tollgate-router",
            names.client_ns, names.server_ns
        ));
        t
    } else {
        log(&format!("{}; starting tollgate-router", site.describe()));
        netns::Topology::files_only(names.clone())
    };
    let _work_dirs = RemoteDirs::make(&site)?;
    // The hosts' counters before the run (remote hosts' are not new).
    let before = if site.veths.is_none() {
        Some((
            site.client.kernel_counters()?,
            site.server.kernel_counters()?,
        ))
    } else {
        None
    };
    let mut router_cmd = std::process::Command::new(&o.router_bin);
    router_cmd
        .arg("--config")
        .arg(&cfg_path)
        .arg("--quiet")
        .arg("--")
        .args(eal_args(&names, &site, o.router_lcore));
    netns::die_with_parent(&mut router_cmd);
    let mut router = netns::Proc::spawn(
        "tollgate-router",
        router_cmd,
        &o.work_dir.join("router.out"),
        &o.work_dir.join("router.err"),
    )?;
    std::fs::create_dir_all(netns::RUN_DIR)?;
    if let Some(pid) = router.id() {
        std::fs::write(names.router_pid_file(), pid.to_string())?;
    }
    // No packet before the router's AF_PACKET sockets exist (they are
    // bound in its EAL init, before it prints its banner): a packet the
    // router-side veth counted and the router never saw would count as
    // lost outside the discipline (losses.rs).
    let banner_by = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < banner_by
        && router.try_wait().is_none()
        && !std::fs::read_to_string(o.work_dir.join("router.out"))
            .unwrap_or_default()
            .contains("tollgate-router: mode=")
    {
        std::thread::sleep(Duration::from_millis(20));
    }

    let cert = site.server.path("cert.pem");
    let ca = site.client.path("ca.pem");
    let server_addr = SocketAddr::new(site.server.address, SERVER_PORT);
    // Every server address flows use (a parking lot has one per exit node).
    let mut listen: Vec<SocketAddr> = addresses
        .iter()
        .map(|&(_, sv)| SocketAddr::new(sv, SERVER_PORT))
        .collect();
    listen.sort_unstable();
    listen.dedup();
    // Remote servers stop by themselves at the latest this long after the
    // run should have ended, should this process die without stopping them.
    let server_limit = s.duration_s + crate::load::GRACE.as_secs_f64() + 120.0;
    let mut serve_args: Vec<String> = Vec::new();
    let serve_program = if o.site.is_some() {
        serve_args.extend([
            "-s".into(),
            "INT".into(),
            format!("{server_limit:.0}s"),
            site.server.tollgate.clone(),
        ]);
        "timeout".to_string()
    } else {
        site.server.tollgate.clone()
    };
    serve_args.extend(
        ["serve"].into_iter().map(String::from).chain(
            listen
                .iter()
                .flat_map(|a| ["--listen".to_string(), a.to_string()]),
        ),
    );
    serve_args.extend(
        ["--self-signed", "--cert-out", &cert, "--threads", "1"]
            .iter()
            .map(|a| a.to_string()),
    );
    let mut serve = netns::Proc::spawn(
        "tollgate serve",
        site.server.command(&serve_program, &serve_args),
        &o.work_dir.join("serve.out"),
        &o.work_dir.join("serve.err"),
    )?;

    // The path is up when a TCP connection from the client reaches the
    // server: every path the flows take, in a parking lot.
    let mut paths = addresses.clone();
    paths.sort_unstable();
    paths.dedup();
    let reachable = paths.iter().all(|&(c, sv)| {
        let from = site.chain.as_ref().map(|_| c);
        site.client.tcp_reachable(
            from,
            SocketAddr::new(sv, SERVER_PORT),
            Duration::from_secs(15),
        )
    });
    if let Some(st) = router.try_wait() {
        anyhow::bail!(
            "tollgate-router exited at start ({st}): {}",
            tail(&o.work_dir.join("router.err"))
        );
    }
    if let Some(st) = serve.try_wait() {
        anyhow::bail!(
            "tollgate serve exited at start ({st}): {}",
            tail(&o.work_dir.join("serve.err"))
        );
    }
    let cert_pem = site.server.read_file(&cert);
    let (true, Ok(cert_pem)) = (reachable, cert_pem) else {
        anyhow::bail!(
            "the server is not reachable from the client through the router within 15 s; \
             router: {}; serve: {}",
            tail(&o.work_dir.join("router.err")),
            tail(&o.work_dir.join("serve.err"))
        );
    };
    site.client.write_file(&ca, &cert_pem)?;
    let scenario_file = site.client.path("scenario.toml");
    site.client
        .write_file(&scenario_file, &std::fs::read(&o.scenario_path)?)?;

    log(&format!(
        "path up; running {} flows for {:.1} s",
        s.flow_count(),
        s.duration_s
    ));
    let load_out = site.client.path("load");
    let mut load_args: Vec<String> = vec![
        "load".into(),
        scenario_file,
        "--server".into(),
        server_addr.to_string(),
        "--ca".into(),
        ca,
        "--bind".into(),
        site.client.address.to_string(),
        "--bind-addrs".into(),
        join(addresses.iter().map(|a| a.0)),
        "--flow-servers".into(),
        join(addresses.iter().map(|a| SocketAddr::new(a.1, SERVER_PORT))),
        "--bind-ports".into(),
        join(ports.iter()),
        "--threads".into(),
        "1".into(),
        "--out".into(),
        load_out.clone(),
        "--quiet".into(),
        "--no-plots".into(),
    ];
    load_args.extend(o.load_args.iter().cloned());
    let started = std::time::Instant::now();
    let mut load = netns::Proc::spawn(
        "tollgate load",
        site.client.command(&site.client.tollgate, &load_args),
        &o.work_dir.join("load.out"),
        &o.work_dir.join("load.err"),
    )?;
    let limit =
        Duration::from_secs_f64(s.duration_s) + crate::load::GRACE + Duration::from_secs(30);
    let mut interrupted = false;
    let load_status = loop {
        if let Some(st) = load.try_wait() {
            break Some(st);
        }
        if stop.load(Ordering::Relaxed) && !interrupted {
            interrupted = true;
            load.signal(libc::SIGINT);
            site.client.interrupt_matching(&load_out);
        }
        if started.elapsed() > limit {
            site.client.interrupt_matching(&load_out);
            break load.stop(Duration::from_secs(5));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let run_s = started.elapsed().as_secs_f64();
    // The kernel's counters before the router stops (see losses.rs).
    let kernel = (|| -> anyhow::Result<_> {
        Ok((
            site.client.kernel_counters()?,
            site.server.kernel_counters()?,
            if site.veths.is_some() {
                losses::KernelCounters::read_own()?
            } else {
                losses::KernelCounters::default()
            },
        ))
    })();
    let router_status = router.stop(Duration::from_secs(10));
    site.server.interrupt_matching(&cert);
    let _ = serve.stop(Duration::from_secs(5));

    let router_out = std::fs::read_to_string(o.work_dir.join("router.out")).unwrap_or_default();
    let report = parse_router_report(&router_out).map_err(|e| {
        anyhow::anyhow!(
            "{e} ({}): {}",
            router_status.map_or("killed".to_string(), |s| s.to_string()),
            tail(&o.work_dir.join("router.err"))
        )
    })?;
    let load_results = format!(
        "{}/results.json",
        crate::experiment::run_dir(Path::new(&load_out), s).display()
    );
    let local_results = o.work_dir.join("load-results.json");
    let fetched = site
        .client
        .read_file(&load_results)
        .and_then(|b| Ok(std::fs::write(&local_results, b)?));
    let r = fetched
        .and_then(|()| results::read(&local_results))
        .map_err(|e| {
            anyhow::anyhow!(
                "tollgate load wrote no results ({e}; exit {}): {}",
                load_status.map_or("killed".to_string(), |s| s.to_string()),
                tail(&o.work_dir.join("load.err"))
            )
        })?;
    let (mut client, mut server, root) = kernel?;
    if let Some((c0, s0)) = &before {
        client = client.since(c0);
        server = server.since(s0);
    }
    let mut results = merge(s, r, &report, run_s, &site.describe());
    results.outside_losses = losses::outside_losses(&site, &client, &server, &root, &report);
    if !results.outside_losses.is_empty() {
        results.withhold_fairness();
    }
    Ok(TestbedRun {
        results,
        router: report,
        load_exit: load_status.and_then(|s| s.code()),
        router_exit: router_status.and_then(|s| s.code()),
    })
}

/// The run's directories on remote hosts: made at the start, removed on
/// drop.
struct RemoteDirs<'a>(&'a site::Site);

impl<'a> RemoteDirs<'a> {
    fn make(site: &'a site::Site) -> anyhow::Result<RemoteDirs<'a>> {
        let dirs = RemoteDirs(site);
        site.client.make_work_dir()?;
        site.server.make_work_dir()?;
        Ok(dirs)
    }
}

impl Drop for RemoteDirs<'_> {
    fn drop(&mut self) {
        self.0.client.remove_work_dir();
        self.0.server.remove_work_dir();
    }
}

/// `items` comma-separated.
fn join<T: ToString>(items: impl Iterator<Item = T>) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

/// The last lines of a log file, for an error message.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(5);
    if lines.is_empty() {
        format!("({} is empty)", path.display())
    } else {
        lines[from..].join(" | ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(router: &str) -> (Scenario, toml::Table) {
        let text = format!(
            r#"name = "tb"
duration = "5s"
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "100Mbit", delay = "1ms", buffer = "100pkt" }}
[router]
{router}
[[flows]]
count = 2
cca = "newreno"
rtt = "10ms"
[[flows]]
cca = "tcp:cubic"
rtt = "100ms"
"#
        );
        let plan = crate::scenario::parse_plan(&text).unwrap();
        let raw: toml::Table = toml::from_str(&text).unwrap();
        let router = raw
            .get("router")
            .and_then(|v| v.as_table())
            .cloned()
            .unwrap();
        (plan.runs.into_iter().next().unwrap(), router)
    }

    #[test]
    fn the_router_config_has_a_delay_rule_per_flow_and_direction_and_the_discipline() {
        let (s, raw) = scenario("discipline = \"red\"\nclassify = \"scenario\"\nmax_p = 0.2");
        check(&s).unwrap();
        let names = netns::Names::new(77);
        let site = site::Site::namespaces(&names, netns::Pmd::AfPacket, Path::new("tollgate"));
        let (text, ports) = router_config(&s, &raw, &names, &site).unwrap();
        assert_eq!(ports, vec![FIRST_PORT, FIRST_PORT + 1, FIRST_PORT + 2]);
        let doc: toml::Table = toml::from_str(&text).unwrap();
        let rules = doc["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 6);
        let r = |i: usize, k: &str| rules[i].get(k).cloned();
        assert_eq!(r(0, "src_port").unwrap().as_integer(), Some(41000));
        assert_eq!(r(1, "dst_port").unwrap().as_integer(), Some(41000));
        assert_eq!(r(0, "delay").unwrap().as_str(), Some("5000000ns"));
        assert_eq!(r(4, "delay").unwrap().as_str(), Some("50000000ns"));
        assert_eq!(r(4, "proto").unwrap().as_str(), Some("tcp"));
        assert_eq!(r(0, "proto").unwrap().as_str(), Some("udp"));
        // classify = "scenario": the rules carry the flow's variant.
        assert_eq!(
            r(0, "variant").unwrap().as_integer(),
            Some(i64::from(tollgate_cca::VariantId::NEWRENO.dscp()))
        );
        let egress = doc["ports"].as_array().unwrap()[1]["egress"]
            .as_table()
            .unwrap();
        assert_eq!(egress["discipline"].as_str(), Some("red"));
        assert_eq!(egress["limit"].as_integer(), Some(100));
        assert_eq!(egress["max_p"].as_float(), Some(0.2));
        assert!(egress.get("classify").is_none());
    }

    /// Load results without flows, to merge router reports into.
    fn empty_run() -> crate::sim::RunData {
        crate::sim::RunData {
            t: vec![1.0],
            flows: Vec::new(),
            ports: Vec::new(),
            packets_sent: 0,
            events: 0,
            partial: false,
            reached_s: 1.0,
            lps: 1,
        }
    }

    #[test]
    fn a_parking_lot_gets_a_port_pair_per_link_and_each_flow_its_nodes_and_delay() {
        let text = r#"name = "pl"
duration = "5s"
[topology]
kind = "parking-lot"
hops = 3
bottleneck = { rate = "100Mbit", delay = "1ms", buffer = "100pkt" }
[[flows]]
cca = "newreno"
rtt = "60ms"
[[flows]]
cca = "tcp:cubic"
rtt = "20ms"
hops = [2, 2]
[[flows]]
cca = "newreno"
rtt = "40ms"
hops = [2, 3]
reverse = true
"#;
        let plan = crate::scenario::parse_plan(text).unwrap();
        let s = plan.runs.into_iter().next().unwrap();
        check(&s).unwrap();
        let chain = chain_of(&s).unwrap();
        // Long flow: nodes 0 -> 3; cross flow on link 2: 1 -> 2; the
        // reverse flow over links 2-3 has its client after link 3.
        assert_eq!(
            chain,
            netns::Chain {
                hops: 3,
                client_nodes: vec![0, 1, 3],
                server_nodes: vec![1, 2, 3],
            }
        );
        let names = netns::Names::new(77);
        let site = site::Site::chain(&names, netns::Pmd::AfPacket, Path::new("tollgate"), chain);
        assert_eq!(site.ports.len(), 6);
        assert_eq!(site.veths.as_ref().unwrap()[3], "tgtb77b2");
        let addrs = flow_addresses(&s, &site);
        assert_eq!(
            addrs[2],
            (netns::chain_client_ip(3), netns::chain_server_ip(1))
        );
        let (text, _) = router_config(&s, &toml::Table::new(), &names, &site).unwrap();
        let doc: toml::Table = toml::from_str(&text).unwrap();
        let ports = doc["ports"].as_array().unwrap();
        assert_eq!(ports.len(), 6);
        for (i, p) in ports.iter().enumerate() {
            assert_eq!(
                p["device"].as_str(),
                Some(format!("net_af_packet{i}").as_str())
            );
            assert_eq!(
                p["peer"].as_str(),
                Some(format!("net_af_packet{}", i ^ 1).as_str())
            );
        }
        let rules = doc["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 6);
        // Half the RTT over the links crossed: 30 ms / 3, 10 ms / 1, 20 ms / 2.
        let delays: Vec<&str> = rules.iter().map(|r| r["delay"].as_str().unwrap()).collect();
        assert_eq!(
            delays,
            [
                "10000000ns",
                "10000000ns",
                "10000000ns",
                "10000000ns",
                "10000000ns",
                "10000000ns"
            ]
        );
        assert_eq!(rules[2]["src"].as_str(), Some("10.202.1.2/32"));
        assert_eq!(rules[4]["src"].as_str(), Some("10.202.1.4/32"));
        let mut r = results::build(&s, &empty_run());
        let lanes: Vec<RouterLane> = (0..6)
            .map(|i| RouterLane {
                port: format!("net_af_packet{i}"),
                discipline: "droptail".into(),
                ..RouterLane::default()
            })
            .collect();
        r = merge(
            &s,
            r,
            &RouterReport {
                lanes,
                ..RouterReport::default()
            },
            5.0,
            "ns",
        );
        let names: Vec<&str> = r.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["fwd1", "fwd2", "fwd3", "rev1", "rev2", "rev3"]);
    }

    #[test]
    fn the_final_report_is_parsed_and_merged_into_ports() {
        let out = "\
lane port=net_af_packet0 discipline=droptail received=10 transmitted=10 tx_sent=10 tx_full=0 ring_full=0 bypass=0 in_flight=0 marked=0 drop_overlimit=0
variants port=net_af_packet0 unmarked=640
lane port=net_af_packet1 discipline=droptail received=100 transmitted=90 tx_sent=90 tx_full=0 ring_full=0 bypass=0 in_flight=2 marked=1 drop_overlimit=8
variants port=net_af_packet1 newreno=125000000 cubic=125000000
tollgate-router final: rx=110 tx=100 dropped=8 queued=2 accounting=ok
";
        let rep = parse_router_report(out).unwrap();
        assert!(rep.accounting_ok);
        assert_eq!(rep.lanes.len(), 2);
        assert_eq!(rep.lanes[1].tx_bytes, 250_000_000);
        assert_eq!(rep.lanes[1].drops(), vec![("overlimit".to_string(), 8)]);
        assert!(parse_router_report("lane port=x").is_err());
        let (s, _) = scenario("discipline = \"droptail\"");
        let stub = empty_run();
        let base = results::build(&s, &stub);
        let m = merge(&s, base, &rep, 20.0, "namespaces");
        assert_eq!(m.ports[0].name, "fwd1");
        assert_eq!((m.ports[0].received, m.ports[0].transmitted), (100, 90));
        assert!(m.ports[0].accounting_exact);
        // 250 MB in 20 s at 100 Mbit/s.
        assert!((m.ports[0].utilization - 1.0).abs() < 1e-9);
        assert_eq!(m.summary.bottleneck_mbps, 100.0);
        // A lane whose counters do not add up is reported as such.
        let bad = parse_router_report(&out.replace("in_flight=2", "in_flight=5")).unwrap();
        assert!(
            !merge(&s, results::build(&s, &stub), &bad, 20.0, "namespaces").ports[0]
                .accounting_exact
        );
    }
}

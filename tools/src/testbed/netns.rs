//! The namespaces, veth pairs and processes of one testbed run, and the
//! clean-up of what a crashed run left.
//!
//! Every name starts with [`PREFIX`] and carries the testbed's process id:
//! namespaces `tgtb-<pid>-c` (client) and `tgtb-<pid>-s` (server), the
//! router-side veth ends `tgtb<pid>c` / `tgtb<pid>s` (the other ends are
//! `eth0` inside the namespaces), the DPDK runtime directory
//! `/var/run/dpdk/tgtb-<pid>` and the router's pid file
//! `/run/tollgate-testbed/<pid>.router`; a parking lot's bridges and veths
//! ([`Chain`]) are `tgtb<pid>` plus a letter and a number.
//! [`cleanup_leftovers`] finds all of them by the prefix and the run id.
//!
//! Child processes are started with `PR_SET_PDEATHSIG = SIGKILL`: when the
//! testbed dies, even by SIGKILL, the kernel kills the router, the server
//! and the load generator; only the namespaces and veths stay, for
//! `tollgate testbed --cleanup`.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prefix of every name the testbed creates.
pub const PREFIX: &str = "tgtb";
/// Directory of the router pid files.
pub const RUN_DIR: &str = "/run/tollgate-testbed";
/// DPDK's runtime directory (`--file-prefix` subdirectories).
pub const DPDK_RUN_DIR: &str = "/var/run/dpdk";

/// The client's address (and the source of every flow).
pub const CLIENT_IP: &str = "10.201.0.1";
/// The server's address.
pub const SERVER_IP: &str = "10.201.0.2";
const CLIENT_MAC: &str = "02:7b:00:00:00:01";
const SERVER_MAC: &str = "02:7b:00:00:00:02";

/// Run a command; `Err` naming it, with its stderr, when it fails.
pub fn sh(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        anyhow::bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    }
}

fn lines_of(args: &[&str]) -> Vec<String> {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The names of one run.
#[derive(Clone, Debug)]
pub struct Names {
    /// The testbed's process id.
    pub id: u32,
    /// Client namespace.
    pub client_ns: String,
    /// Server namespace.
    pub server_ns: String,
    /// Router-side veth toward the client.
    pub client_veth: String,
    /// Router-side veth toward the server.
    pub server_veth: String,
    /// DPDK `--file-prefix`.
    pub file_prefix: String,
}

/// The DPDK poll-mode driver the router reads the veths with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Pmd {
    /// `net_af_packet`: a TPACKET ring per port (copies every frame).
    #[default]
    AfPacket,
    /// `net_af_xdp`: an AF_XDP socket per port (generic XDP on a veth).
    AfXdp,
}

impl Pmd {
    /// The DPDK driver's name.
    pub fn driver(self) -> &'static str {
        match self {
            Pmd::AfPacket => "net_af_packet",
            Pmd::AfXdp => "net_af_xdp",
        }
    }

    /// The router's device `i` (0 faces the client, 1 the server).
    pub fn device(self, i: usize) -> String {
        format!("{}{i}", self.driver())
    }

    /// The EAL `--vdev` argument of device `i` on interface `iface`.
    pub fn vdev(self, i: usize, iface: &str) -> String {
        match self {
            Pmd::AfPacket => format!("{},iface={iface}", self.device(i)),
            Pmd::AfXdp => format!(
                "{},iface={iface},start_queue=0,queue_count=1",
                self.device(i)
            ),
        }
    }
}

impl Names {
    /// The names of the run of process `id`.
    pub fn new(id: u32) -> Names {
        Names {
            id,
            client_ns: format!("{PREFIX}-{id}-c"),
            server_ns: format!("{PREFIX}-{id}-s"),
            client_veth: format!("{PREFIX}{id}c"),
            server_veth: format!("{PREFIX}{id}s"),
            file_prefix: format!("{PREFIX}-{id}"),
        }
    }

    /// The run's working directory (configs, certificate, logs).
    pub fn work_dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!("tollgate-testbed-{}", self.id))
    }

    /// The router's pid file.
    pub fn router_pid_file(&self) -> PathBuf {
        Path::new(RUN_DIR).join(format!("{}.router", self.id))
    }
}

/// The two namespaces and veth pairs; removed (with the DPDK runtime
/// directory and the pid file) on drop.
#[derive(Debug)]
pub struct Topology {
    /// Its names.
    pub names: Names,
}

impl Topology {
    /// Nothing to build (the hosts and ports of a `[testbed]` table): only
    /// the run's DPDK runtime directory and router pid file to remove on
    /// drop, as after a built topology.
    pub fn files_only(names: Names) -> Topology {
        Topology { names }
    }

    /// Build client ns <-> veth <-> (router) <-> veth <-> server ns, with
    /// offloads off (real frames on the wire) and static neighbours (the
    /// router is an L2 bump in the wire).
    pub fn build(names: Names) -> anyhow::Result<Topology> {
        let t = Topology { names };
        let n = &t.names;
        for (ns, outer, addr, mac) in [
            (&n.client_ns, &n.client_veth, CLIENT_IP, CLIENT_MAC),
            (&n.server_ns, &n.server_veth, SERVER_IP, SERVER_MAC),
        ] {
            add_netns(ns)?;
            sh(&[
                "ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ])?;
            disable_ipv6(outer);
            sh(&["ip", "-n", ns, "link", "set", "eth0", "address", mac])?;
            sh(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            sh(&["ip", "-n", ns, "link", "set", "eth0", "up"])?;
            sh(&["ip", "link", "set", outer, "up"])?;
            offloads_off(Some(ns), "eth0")?;
            offloads_off(None, outer)?;
        }
        for (ns, ip, mac) in [
            (&n.client_ns, SERVER_IP, SERVER_MAC),
            (&n.server_ns, CLIENT_IP, CLIENT_MAC),
        ] {
            static_neighbour(ns, ip, mac, "eth0")?;
        }
        Ok(t)
    }
}

/// Create namespace `ns` with IPv6 off (router solicitations, DAD, MLD:
/// every packet on the testbed's links is then the scenario's, so the loss
/// accounting, losses.rs, sees only them; absent IPv6 support is fine) and
/// its loopback up.
fn add_netns(ns: &str) -> anyhow::Result<()> {
    sh(&["ip", "netns", "add", ns])?;
    let _ = sh(&[
        "ip",
        "netns",
        "exec",
        ns,
        "sh",
        "-c",
        "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; \
         echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6",
    ]);
    sh(&["ip", "-n", ns, "link", "set", "lo", "up"])
}

/// A permanent neighbour entry in namespace `ns`: no ARP through the
/// router, a bump in the wire.
fn static_neighbour(ns: &str, ip: &str, mac: &str, dev: &str) -> anyhow::Result<()> {
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
    ])
}

/// A parking lot of `hops` router links in a line (nodes `0..=hops`, link
/// `h` between nodes `h-1` and `h`), and the nodes where client and server
/// addresses are needed.
///
/// ```text
///  client ns: node0 ..  node<k> ..         server ns: node1 .. node<k> ..
///      |                    |                          |          |
/// [bridge n0]=x1-(a1 router b1)-y1=[bridge n1]=x2-(a2 router b2)-y2=[bridge n2] ...
/// ```
///
/// Each node is a Linux bridge in the root namespace (`tgtb<pid>n<k>`);
/// router link `h` is two veth pairs whose router-side ends `tgtb<pid>a<h>`
/// / `tgtb<pid>b<h>` are the router's ports `2h-2` and `2h-1` (peers in L2
/// mode) and whose other ends `x<h>` / `y<h>` are ports of bridges `h-1`
/// and `h`. The client namespace has an interface `node<k>` on bridge `k`
/// with address [`chain_client_ip`]`(k)` for every client node, the server
/// namespace likewise; a source-address rule per interface makes a socket
/// bound to a node's address send through that node. The bridges neither
/// learn nor flood: static entries send each host's MAC toward its node,
/// so a frame crosses exactly the router links between its two nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// Router links in series (the scenario's `topology.hops`).
    pub hops: usize,
    /// Nodes with a client address, ascending.
    pub client_nodes: Vec<usize>,
    /// Nodes with a server address, ascending.
    pub server_nodes: Vec<usize>,
}

/// The client address at node `k` of a [`Chain`].
pub fn chain_client_ip(k: usize) -> std::net::IpAddr {
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 202, 1, k as u8 + 1))
}

/// The server address at node `k` of a [`Chain`].
pub fn chain_server_ip(k: usize) -> std::net::IpAddr {
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 202, 2, k as u8 + 1))
}

fn chain_mac(server: bool, k: usize) -> String {
    format!("02:7b:01:{:02x}:00:{:02x}", u8::from(server) + 1, k)
}

impl Names {
    /// The router-side veth end of link `h`'s left (`right == false`,
    /// toward node `h-1`) or right side.
    pub fn hop_router_end(&self, h: usize, right: bool) -> String {
        format!("{PREFIX}{}{}{h}", self.id, if right { "b" } else { "a" })
    }

    fn hop_bridge_end(&self, h: usize, right: bool) -> String {
        format!("{PREFIX}{}{}{h}", self.id, if right { "y" } else { "x" })
    }

    fn node_bridge(&self, k: usize) -> String {
        format!("{PREFIX}{}n{k}", self.id)
    }

    fn host_end(&self, server: bool, k: usize) -> String {
        format!("{PREFIX}{}{}{k}", self.id, if server { "s" } else { "c" })
    }
}

/// The name of node `k`'s interface inside the client or server namespace.
pub fn chain_iface(k: usize) -> String {
    format!("node{k}")
}

fn disable_ipv6(iface: &str) {
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{iface}/disable_ipv6"), "1");
}

fn offloads_off(ns: Option<&str>, iface: &str) -> anyhow::Result<()> {
    let mut cmd: Vec<&str> = Vec::new();
    if let Some(ns) = ns {
        cmd.extend(["ip", "netns", "exec", ns]);
    }
    cmd.extend([
        "ethtool", "-K", iface, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off",
    ]);
    sh(&cmd).map_err(|e| anyhow::anyhow!("{e} (is ethtool installed?)"))
}

impl Topology {
    /// Build the parking lot `chain` (see [`Chain`]).
    pub fn build_chain(names: Names, chain: &Chain) -> anyhow::Result<Topology> {
        let t = Topology { names };
        let n = &t.names;
        for ns in [&n.client_ns, &n.server_ns] {
            add_netns(ns)?;
        }
        for k in 0..=chain.hops {
            let br = n.node_bridge(k);
            // No multicast snooping: with it the bridge joins the
            // all-snoopers group and sends an IGMPv3 report into the path
            // as it comes up (counted as a loss: it reached a router-side
            // veth before the router's socket existed).
            sh(&[
                "ip",
                "link",
                "add",
                "name",
                &br,
                "type",
                "bridge",
                "mcast_snooping",
                "0",
            ])?;
            disable_ipv6(&br);
            sh(&["ip", "link", "set", &br, "up"])?;
        }
        // A bridge port that neither learns nor floods: frames go where
        // the static entries say, or nowhere.
        let attach = |port: &str, k: usize| -> anyhow::Result<()> {
            sh(&["ip", "link", "set", port, "master", &n.node_bridge(k)])?;
            sh(&[
                "bridge",
                "link",
                "set",
                "dev",
                port,
                "learning",
                "off",
                "flood",
                "off",
                "mcast_flood",
                "off",
            ])?;
            sh(&["ip", "link", "set", port, "up"])
        };
        for h in 1..=chain.hops {
            for right in [false, true] {
                let (outer, inner) = (n.hop_router_end(h, right), n.hop_bridge_end(h, right));
                sh(&[
                    "ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner,
                ])?;
                for end in [&outer, &inner] {
                    disable_ipv6(end);
                    offloads_off(None, end)?;
                }
                sh(&["ip", "link", "set", &outer, "up"])?;
                attach(&inner, if right { h } else { h - 1 })?;
            }
        }
        let hosts = [
            (
                false,
                &n.client_ns,
                &chain.client_nodes,
                &chain.server_nodes,
            ),
            (true, &n.server_ns, &chain.server_nodes, &chain.client_nodes),
        ];
        for (server, ns, nodes, peers) in hosts {
            for &k in nodes.iter() {
                let (outer, inner) = (n.host_end(server, k), chain_iface(k));
                let addr = if server {
                    chain_server_ip(k)
                } else {
                    chain_client_ip(k)
                };
                sh(&[
                    "ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner, "netns",
                    ns,
                ])?;
                disable_ipv6(&outer);
                offloads_off(None, &outer)?;
                offloads_off(Some(ns), &inner)?;
                attach(&outer, k)?;
                let table = (100 + k).to_string();
                let addr_s = addr.to_string();
                sh(&[
                    "ip",
                    "-n",
                    ns,
                    "link",
                    "set",
                    &inner,
                    "address",
                    &chain_mac(server, k),
                ])?;
                sh(&[
                    "ip",
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{addr}/32"),
                    "dev",
                    &inner,
                ])?;
                sh(&["ip", "-n", ns, "link", "set", &inner, "up"])?;
                sh(&[
                    "ip",
                    "-n",
                    ns,
                    "route",
                    "add",
                    "10.202.0.0/16",
                    "dev",
                    &inner,
                    "src",
                    &addr_s,
                    "table",
                    &table,
                ])?;
                sh(&[
                    "ip", "-n", ns, "rule", "add", "from", &addr_s, "table", &table,
                ])?;
                for &j in peers.iter() {
                    let peer = if server {
                        chain_client_ip(j)
                    } else {
                        chain_server_ip(j)
                    };
                    static_neighbour(ns, &peer.to_string(), &chain_mac(!server, j), &inner)?;
                }
            }
        }
        // Each bridge sends a host's MAC toward the host's node.
        for k in 0..=chain.hops {
            let mut entries = Vec::new();
            for &j in &chain.client_nodes {
                entries.push((false, j));
            }
            for &j in &chain.server_nodes {
                entries.push((true, j));
            }
            for (server, j) in entries {
                let port = match j.cmp(&k) {
                    std::cmp::Ordering::Equal => n.host_end(server, k),
                    std::cmp::Ordering::Less => n.hop_bridge_end(k, true),
                    std::cmp::Ordering::Greater => n.hop_bridge_end(k + 1, false),
                };
                sh(&[
                    "bridge",
                    "fdb",
                    "add",
                    &chain_mac(server, j),
                    "dev",
                    &port,
                    "master",
                    "static",
                ])?;
            }
        }
        Ok(t)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        remove_run(&self.names);
    }
}

/// Remove everything of the run `names` (quietly; what is absent is fine):
/// processes left in its namespaces, the namespaces, the veths, the DPDK
/// runtime directory, the pid file. Returns what was removed.
pub fn remove_run(names: &Names) -> Vec<String> {
    let mut removed = Vec::new();
    if let Some(pid) = read_router_pid(&names.router_pid_file()) {
        if kill_if_router(pid) {
            removed.push(format!("tollgate-router process {pid}"));
        }
    }
    let _ = std::fs::remove_file(names.router_pid_file());
    for ns in [&names.client_ns, &names.server_ns] {
        removed.extend(remove_netns(ns));
    }
    // The dumbbell's two veths and every link a parking lot made (hop
    // veths, host veths, node bridges) carry the run id. Deleting one end
    // of a veth deletes its peer (its later `del` fails quietly).
    let links = link_list()
        .into_iter()
        .filter(|l| run_id(l) == Some(names.id));
    for l in links {
        if sh(&["ip", "link", "del", &l]).is_ok() {
            removed.push(format!("link {l}"));
        }
    }
    let dpdk = Path::new(DPDK_RUN_DIR).join(&names.file_prefix);
    if dpdk.exists() && std::fs::remove_dir_all(&dpdk).is_ok() {
        removed.push(format!("DPDK runtime directory {}", dpdk.display()));
    }
    removed
}

/// [`remove_run`] for a run whose testbed is gone: also its working directory.
fn remove_dead_run(names: &Names) -> Vec<String> {
    let mut removed = remove_run(names);
    let work = names.work_dir();
    if work.exists() && std::fs::remove_dir_all(&work).is_ok() {
        removed.push(format!("working directory {}", work.display()));
    }
    removed
}

/// Kill every process in namespace `ns`, then delete it.
fn remove_netns(ns: &str) -> Vec<String> {
    let mut removed = Vec::new();
    if !netns_list().iter().any(|n| n == ns) {
        return removed;
    }
    for _ in 0..50 {
        let pids: Vec<i32> = lines_of(&["ip", "netns", "pids", ns])
            .iter()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: kill(2) by pid; the pids are those of the namespace.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            removed.push(format!("process {pid} in {ns}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if sh(&["ip", "netns", "del", ns]).is_ok() {
        removed.push(format!("namespace {ns}"));
    }
    removed
}

fn read_router_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// SIGKILL `pid` if it is (still) a tollgate-router; whether it was.
fn kill_if_router(pid: i32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("tollgate-router") {
        return false;
    }
    // SAFETY: kill(2) of a process we checked is a tollgate-router.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    true
}

/// Every network namespace name.
pub fn netns_list() -> Vec<String> {
    lines_of(&["ip", "netns", "list"])
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Every link name in this namespace.
fn link_list() -> Vec<String> {
    lines_of(&["ip", "-o", "link", "show"])
        .iter()
        .filter_map(|l| {
            let name = l.split(':').nth(1)?.trim();
            Some(name.split('@').next().unwrap_or(name).to_string())
        })
        .collect()
}

/// The run id in a testbed name (`tgtb-123-c`, `tgtb123s`, `tgtb-123`).
pub fn run_id(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?.trim_start_matches('-');
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether process `id` is a live `tollgate` (a testbed still running).
fn testbed_alive(id: u32) -> bool {
    std::fs::read(format!("/proc/{id}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("testbed"))
        .unwrap_or(false)
}

/// Runs whose namespaces, veths, DPDK directories or pid files exist but
/// whose testbed process is gone (crashed or killed).
pub fn leftover_runs() -> Vec<u32> {
    let mut ids: Vec<u32> = netns_list()
        .iter()
        .chain(link_list().iter())
        .filter_map(|n| run_id(n))
        .collect();
    for dir in [RUN_DIR, DPDK_RUN_DIR] {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if let Some(id) = name
                    .strip_suffix(".router")
                    .and_then(|n| n.parse().ok())
                    .or_else(|| run_id(&name))
                {
                    ids.push(id);
                }
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids.retain(|&id| !testbed_alive(id));
    ids
}

/// Remove everything every crashed run left; returns what was removed.
pub fn cleanup_leftovers() -> Vec<String> {
    leftover_runs()
        .into_iter()
        .flat_map(|id| remove_dead_run(&Names::new(id)))
        .collect()
}

/// `cmd` set up to be killed with SIGKILL when this process dies.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the prctl.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("the testbed exited"));
            }
            Ok(())
        })
    }
}

/// `ip netns exec NS PROGRAM ARGS...`, dying with this process.
pub fn in_netns(ns: &str, program: &Path, args: &[String]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(program).args(args);
    die_with_parent(&mut c);
    c
}

/// A child process: SIGINT then SIGKILL and reaped on [`Proc::stop`] or drop.
#[derive(Debug)]
pub struct Proc {
    /// What it is, for messages.
    pub what: &'static str,
    child: Option<Child>,
}

impl Proc {
    /// Spawn `cmd` (stdout/stderr to the given files).
    pub fn spawn(
        what: &'static str,
        mut cmd: Command,
        stdout: &Path,
        stderr: &Path,
    ) -> anyhow::Result<Proc> {
        let out = std::fs::File::create(stdout)?;
        let err = std::fs::File::create(stderr)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {what}: {e}"))?;
        Ok(Proc {
            what,
            child: Some(child),
        })
    }

    /// Its pid.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Its exit status if it has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Send `sig` (if still running).
    pub fn signal(&mut self, sig: i32) {
        if let Some(c) = &mut self.child {
            if c.try_wait().ok().flatten().is_none() {
                // SAFETY: kill(2) of our own, not yet reaped, child.
                unsafe {
                    libc::kill(c.id() as i32, sig);
                }
            }
        }
    }

    /// Wait until it exits or `limit` passes.
    pub fn wait_for(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let end = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGINT, up to `grace` to exit, then SIGKILL; the exit status (None if killed).
    pub fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.signal(libc::SIGINT);
        let s = self.wait_for(grace);
        if s.is_none() {
            if let Some(c) = &mut self.child {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        self.child = None;
        s
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Move the calling thread (only) into network namespace `ns`.
pub fn enter_netns(ns: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/var/run/netns/{ns}"))?;
    // SAFETY: `f` is an open namespace file; setns affects only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a TCP connection from namespace `ns` (from local address
/// `from`, if given) to `addr` succeeds within `limit` (retrying): the path
/// through the router is up.
pub fn tcp_reachable(
    ns: &str,
    from: Option<std::net::IpAddr>,
    addr: std::net::SocketAddr,
    limit: Duration,
) -> bool {
    let ns = ns.to_string();
    let connect = move || -> std::io::Result<()> {
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )?;
        if let Some(ip) = from {
            sock.bind(&std::net::SocketAddr::new(ip, 0).into())?;
        }
        sock.connect_timeout(&addr.into(), Duration::from_millis(300))
    };
    std::thread::spawn(move || {
        if enter_netns(&ns).is_err() {
            return false;
        }
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if connect().is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    })
    .join()
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_interfaces_and_carry_the_run_id() {
        let n = Names::new(4_194_304); // the largest pid_max
        assert!(n.client_veth.len() <= 15 && n.server_veth.len() <= 15);
        for name in [
            &n.client_ns,
            &n.server_ns,
            &n.client_veth,
            &n.server_veth,
            &n.file_prefix,
        ] {
            assert_eq!(run_id(name), Some(4_194_304), "{name}");
        }
        assert_eq!(run_id("tgtbx"), None);
        assert_eq!(run_id("eth0"), None);
    }
}

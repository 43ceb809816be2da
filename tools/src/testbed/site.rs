//! Where a testbed run happens: the client and server hosts and the
//! router's two ports.
//!
//! Without a `[testbed]` table the testbed builds its own site on this
//! machine ([`Site::namespaces`]): two network namespaces joined through
//! veth pairs to `tollgate-router` on `net_af_packet` (or `net_af_xdp`)
//! ports. With one, the scenario names real hosts and the router's DPDK
//! ports (PCI addresses of a 10 GbE NIC, or vdevs):
//!
//! ```toml
//! [testbed]
//! client = { run = ["ssh", "root@192.0.2.1"], address = "10.1.0.1", interface = "enp3s0f0" }
//! server = { run = ["ssh", "root@192.0.2.2"], address = "10.1.0.2", interface = "enp3s0f0" }
//! router = { ports = ["0000:03:00.0", "0000:03:00.1"] }
//! ```
//!
//! `run` is a command that runs its last argument as a shell command line
//! on the host (`ssh` does; for a local namespace,
//! `["ip", "netns", "exec", "NS", "sh", "-c"]`). Every file the run needs
//! there (the scenario, the server's certificate, the load generator's
//! results) moves through it with `cat`, so the hosts need nothing but a
//! shell, `cat`, `pkill`, `timeout`, bash and `tollgate` (`tollgate = PATH`
//! if it is not on the host's `PATH`). Router port 0 faces the client, port
//! 1 the server; a port that looks like a PCI address is passed to the EAL
//! as `-a ADDR`, anything else as `--vdev` (its device name is the text
//! before the first comma); `eal` adds EAL arguments (e.g. `--socket-mem`).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::netns::{self, Names, Pmd};

/// The `[testbed]` table as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTestbed {
    /// The host that runs `tollgate load`.
    pub client: RawHost,
    /// The host that runs `tollgate serve`.
    pub server: RawHost,
    /// The router's ports.
    pub router: RawRouterPorts,
}

/// `[testbed].client` / `.server`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    /// A command that runs its last argument as a shell command line there.
    pub run: Vec<String>,
    /// The host's address on the path through the router.
    pub address: String,
    /// Its interface toward the router (for the loss accounting).
    pub interface: Option<String>,
    /// `tollgate` on the host (default: `tollgate` on its `PATH`).
    pub tollgate: Option<String>,
}

/// `[testbed].router`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouterPorts {
    /// Port 0 (toward the client) and port 1 (toward the server).
    pub ports: Vec<String>,
    /// More EAL arguments.
    #[serde(default)]
    pub eal: Vec<String>,
}

/// How to reach a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A namespace of this machine that the testbed built.
    Netns(String),
    /// A host reached through a command that runs a shell command line.
    Remote(Vec<String>),
}

/// One end of the path.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// How to reach it.
    pub host: Host,
    /// Its address on the path.
    pub address: IpAddr,
    /// Its interface toward the router, if known.
    pub interface: Option<String>,
    /// The `tollgate` program there.
    pub tollgate: String,
    /// A directory of the run's files there.
    pub work_dir: String,
}

/// One router port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterPort {
    /// The DPDK device name (`net_af_packet0`, `0000:03:00.0`).
    pub device: String,
    /// Its EAL arguments (`--vdev ...` or `-a ADDR`).
    pub eal: Vec<String>,
}

/// Where a run happens.
#[derive(Clone, Debug)]
pub struct Site {
    /// Runs `tollgate load`.
    pub client: Endpoint,
    /// Runs `tollgate serve`.
    pub server: Endpoint,
    /// Port 0 toward the client, port 1 toward the server; in a parking
    /// lot, ports `2h-2` and `2h-1` are link `h`'s left and right side.
    pub ports: Vec<RouterPort>,
    /// EAL arguments besides the lcore, the file prefix and the ports.
    pub eal: Vec<String>,
    /// The router-side veth end of each port (namespace sites), for the
    /// ring losses.
    pub veths: Option<Vec<String>>,
    /// The run's id (namespace sites): every link in the root namespace
    /// that carries it is the run's (losses.rs reads their drops).
    pub run_id: Option<u32>,
    /// The parking lot's nodes (namespace sites of a parking-lot scenario).
    pub chain: Option<netns::Chain>,
}

impl Site {
    /// The site the testbed builds on this machine: namespaces and veths,
    /// the router on `pmd`.
    pub fn namespaces(names: &Names, pmd: Pmd, tollgate: &Path) -> Site {
        let endpoint = |ns: &str, address: &str| Endpoint {
            host: Host::Netns(ns.to_string()),
            address: address.parse().expect("address"),
            interface: Some("eth0".into()),
            tollgate: tollgate.to_string_lossy().into(),
            work_dir: names.work_dir().to_string_lossy().into(),
        };
        let port = |i: usize, iface: &str| RouterPort {
            device: pmd.device(i),
            eal: vec!["--vdev".into(), pmd.vdev(i, iface)],
        };
        Site {
            client: endpoint(&names.client_ns, netns::CLIENT_IP),
            server: endpoint(&names.server_ns, netns::SERVER_IP),
            ports: vec![port(0, &names.client_veth), port(1, &names.server_veth)],
            eal: ["--no-huge", "--no-pci", "-m", "512"]
                .map(String::from)
                .to_vec(),
            veths: Some(vec![names.client_veth.clone(), names.server_veth.clone()]),
            run_id: Some(names.id),
            chain: None,
        }
    }

    /// The parking lot the testbed builds on this machine
    /// ([`netns::Chain`]): the client and server namespaces' first node
    /// addresses stand for the hosts in messages; each flow's own come from
    /// its hops.
    pub fn chain(names: &Names, pmd: Pmd, tollgate: &Path, chain: netns::Chain) -> Site {
        let mut site = Site::namespaces(names, pmd, tollgate);
        site.client.address = netns::chain_client_ip(chain.client_nodes[0]);
        site.client.interface = None;
        site.server.address = netns::chain_server_ip(chain.server_nodes[0]);
        site.server.interface = None;
        let mut ports = Vec::new();
        let mut veths = Vec::new();
        for h in 1..=chain.hops {
            for right in [false, true] {
                let iface = names.hop_router_end(h, right);
                let i = ports.len();
                ports.push(RouterPort {
                    device: pmd.device(i),
                    eal: vec!["--vdev".into(), pmd.vdev(i, &iface)],
                });
                veths.push(iface);
            }
        }
        site.ports = ports;
        site.veths = Some(veths);
        site.chain = Some(chain);
        site
    }

    /// What the run goes through, for the log and the results'
    /// `environment.note`.
    pub fn describe(&self) -> String {
        if let Some(c) = &self.chain {
            return format!(
                "a parking lot of {} links: client {} and server {} on bridges through \
                 tollgate-router's {} ports (L2)",
                c.hops,
                self.client.describe(),
                self.server.describe(),
                self.ports.len()
            );
        }
        format!(
            "client {} ({}) and server {} ({}) through tollgate-router on {} and {} (L2)",
            self.client.describe(),
            self.client.address,
            self.server.describe(),
            self.server.address,
            self.ports[0].device,
            self.ports[1].device
        )
    }

    /// The site of a `[testbed]` table; errors name the field.
    pub fn from_table(t: &toml::Value, names: &Names) -> anyhow::Result<Site> {
        let raw: RawTestbed = t
            .clone()
            .try_into()
            .map_err(|e| anyhow::anyhow!("[testbed]: {e}"))?;
        let endpoint = |h: &RawHost, which: &str| -> anyhow::Result<Endpoint> {
            if h.run.is_empty() {
                anyhow::bail!(
                    "testbed.{which}.run is empty: give the command that runs a shell command \
                     line there, e.g. [\"ssh\", \"root@192.0.2.1\"]"
                );
            }
            let address = h.address.parse().map_err(|_| {
                anyhow::anyhow!(
                    "testbed.{which}.address = \"{}\": not an IP address (the host's address \
                     on the path through the router)",
                    h.address
                )
            })?;
            Ok(Endpoint {
                host: Host::Remote(h.run.clone()),
                address,
                interface: h.interface.clone(),
                tollgate: h.tollgate.clone().unwrap_or_else(|| "tollgate".into()),
                work_dir: format!("{}-{which}", names.work_dir().display()),
            })
        };
        let [p0, p1] = <[String; 2]>::try_from(raw.router.ports.clone()).map_err(|p| {
            anyhow::anyhow!(
                "testbed.router.ports has {} entries: give two, the port toward the client \
                 first (PCI addresses such as \"0000:03:00.0\", or vdevs)",
                p.len()
            )
        })?;
        let client = endpoint(&raw.client, "client")?;
        let server = endpoint(&raw.server, "server")?;
        if client.address.is_ipv6() != server.address.is_ipv6() {
            anyhow::bail!("testbed.client.address and testbed.server.address: one family, please");
        }
        Ok(Site {
            client,
            server,
            ports: vec![router_port(&p0), router_port(&p1)],
            eal: raw.router.eal,
            veths: None,
            run_id: None,
            chain: None,
        })
    }
}

/// A `[testbed].router.ports` entry: a PCI address (with optional
/// `,devargs`), or a vdev.
fn router_port(spec: &str) -> RouterPort {
    let device = spec.split(',').next().unwrap_or(spec);
    let is_pci = device.contains(':')
        && device.contains('.')
        && device
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
    RouterPort {
        device: device.to_string(),
        eal: vec![
            if is_pci { "-a" } else { "--vdev" }.into(),
            spec.to_string(),
        ],
    }
}

/// `s` quoted for a POSIX shell.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Endpoint {
    /// `program args` on the host (dies with this process).
    pub fn command(&self, program: &str, args: &[String]) -> Command {
        let mut c = match &self.host {
            Host::Netns(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, program]).args(args);
                c
            }
            Host::Remote(_) => {
                let line: Vec<String> = std::iter::once(program)
                    .chain(args.iter().map(String::as_str))
                    .map(quote)
                    .collect();
                self.shell(&line.join(" "))
            }
        };
        netns::die_with_parent(&mut c);
        c
    }

    /// A shell command line on the host.
    fn shell(&self, line: &str) -> Command {
        match &self.host {
            Host::Netns(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "sh", "-c", line]);
                c
            }
            Host::Remote(run) => {
                let mut c = Command::new(&run[0]);
                c.args(&run[1..]).arg(line);
                c
            }
        }
    }

    /// Run a shell command line there; its stdout, or an error with stderr.
    fn output(&self, line: &str, stdin: Option<&[u8]>) -> anyhow::Result<Vec<u8>> {
        use std::io::Write as _;
        let mut c = self.shell(line);
        c.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.describe()))?;
        if let (Some(data), Some(mut w)) = (stdin, child.stdin.take()) {
            w.write_all(data)?;
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            anyhow::bail!(
                "`{line}` on {} failed: {}",
                self.describe(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out.stdout)
    }

    /// What the host is, for messages.
    pub fn describe(&self) -> String {
        match &self.host {
            Host::Netns(ns) => format!("namespace {ns}"),
            Host::Remote(run) => format!("`{}`", run.join(" ")),
        }
    }

    /// Create the run's directory there (remote hosts; a namespace shares
    /// this machine's, which the command creates).
    pub fn make_work_dir(&self) -> anyhow::Result<()> {
        if let Host::Remote(_) = self.host {
            self.output(&format!("mkdir -p {}", quote(&self.work_dir)), None)?;
        }
        Ok(())
    }

    /// Remove the run's directory there (remote hosts; a namespace shares
    /// this machine's, which the command removes after keeping the logs).
    pub fn remove_work_dir(&self) {
        if let Host::Remote(_) = self.host {
            let _ = self.output(&format!("rm -rf {}", quote(&self.work_dir)), None);
        }
    }

    /// A path in the run's directory there.
    pub fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.work_dir)
    }

    /// Write a file there.
    pub fn write_file(&self, path: &str, data: &[u8]) -> anyhow::Result<()> {
        self.output(&format!("cat > {}", quote(path)), Some(data))
            .map(drop)
    }

    /// Read a file there.
    pub fn read_file(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        self.output(&format!("cat {}", quote(path)), None)
    }

    /// Interrupt (SIGINT) the processes there whose command line contains
    /// `marker` (remote hosts: a signal to the local `ssh` does not reach
    /// them).
    pub fn interrupt_matching(&self, marker: &str) {
        if let Host::Remote(_) = self.host {
            let _ = self.output(&format!("pkill -INT -f -- {} || true", quote(marker)), None);
        }
    }

    /// Whether a TCP connection from this host (from local address `from`,
    /// namespaces only) to `addr` succeeds within `limit` (retrying): the
    /// path through the router is up.
    pub fn tcp_reachable(&self, from: Option<IpAddr>, addr: SocketAddr, limit: Duration) -> bool {
        match &self.host {
            Host::Netns(ns) => netns::tcp_reachable(ns, from, addr, limit),
            Host::Remote(_) => {
                let end = Instant::now() + limit;
                let probe = format!(
                    "timeout 1 bash -c {}",
                    quote(&format!("</dev/tcp/{}/{}", addr.ip(), addr.port()))
                );
                while Instant::now() < end {
                    if self.output(&probe, None).is_ok() {
                        return true;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                false
            }
        }
    }

    /// The host's `/proc/net/dev`, `/proc/net/snmp` and `/proc/net/netstat`.
    pub fn kernel_counters(&self) -> anyhow::Result<super::losses::KernelCounters> {
        let text = |files: &str| -> anyhow::Result<String> {
            Ok(String::from_utf8_lossy(&self.output(&format!("cat {files}"), None)?).into_owned())
        };
        Ok(super::losses::KernelCounters::parse(
            &text("/proc/net/dev")?,
            &text("/proc/net/snmp /proc/net/netstat")?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_testbed_table_names_hosts_and_ports() {
        let t: toml::Value = toml::from_str(
            r#"
client = { run = ["ssh", "root@192.0.2.1"], address = "10.1.0.1", interface = "enp3s0f0" }
server = { run = ["ssh", "root@192.0.2.2"], address = "10.1.0.2", tollgate = "/opt/tollgate" }
router = { ports = ["0000:03:00.0", "net_af_packet1,iface=veth9"], eal = ["--socket-mem", "1024"] }
"#,
        )
        .unwrap();
        let site = Site::from_table(&t, &Names::new(42)).unwrap();
        assert_eq!(
            site.client.host,
            Host::Remote(vec!["ssh".into(), "root@192.0.2.1".into()])
        );
        assert_eq!(site.client.tollgate, "tollgate");
        assert_eq!(site.server.tollgate, "/opt/tollgate");
        assert_eq!(site.client.interface.as_deref(), Some("enp3s0f0"));
        assert_ne!(site.client.work_dir, site.server.work_dir);
        assert_eq!(site.ports[0].device, "0000:03:00.0");
        assert_eq!(site.ports[0].eal, vec!["-a", "0000:03:00.0"]);
        assert_eq!(site.ports[1].device, "net_af_packet1");
        assert_eq!(
            site.ports[1].eal,
            vec!["--vdev", "net_af_packet1,iface=veth9"]
        );
        assert_eq!(site.eal, vec!["--socket-mem", "1024"]);
        assert!(site.veths.is_none());
    }

    #[test]
    fn bad_testbed_tables_name_the_field() {
        for (text, want) in [
            (
                r#"client = { run = [], address = "10.1.0.1" }
server = { run = ["ssh", "b"], address = "10.1.0.2" }
router = { ports = ["a", "b"] }"#,
                "testbed.client.run",
            ),
            (
                r#"client = { run = ["ssh", "a"], address = "10.1.0.1" }
server = { run = ["ssh", "b"], address = "server" }
router = { ports = ["a", "b"] }"#,
                "testbed.server.address",
            ),
            (
                r#"client = { run = ["ssh", "a"], address = "10.1.0.1" }
server = { run = ["ssh", "b"], address = "10.1.0.2" }
router = { ports = ["0000:03:00.0"] }"#,
                "testbed.router.ports",
            ),
            (
                r#"client = { run = ["ssh", "a"], address = "10.1.0.1", iface = "x" }
server = { run = ["ssh", "b"], address = "10.1.0.2" }
router = { ports = ["a", "b"] }"#,
                "iface",
            ),
        ] {
            let t: toml::Value = toml::from_str(text).unwrap();
            let e = Site::from_table(&t, &Names::new(1))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn shell_quoting_keeps_arguments_whole() {
        assert_eq!(quote("10.1.0.2:4433"), "10.1.0.2:4433");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        let e = Endpoint {
            host: Host::Remote(vec!["sh".into(), "-c".into()]),
            address: "127.0.0.1".parse().unwrap(),
            interface: None,
            tollgate: "tollgate".into(),
            work_dir: "/tmp".into(),
        };
        let out = e
            .command("printf", &["%s|".into(), "a b".into(), "it's".into()])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|it's|");
    }
}

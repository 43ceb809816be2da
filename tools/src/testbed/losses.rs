//! Packets a testbed run lost outside the router's disciplines.
//!
//! A fairness number from the testbed means something only if every loss
//! happened where the scenario put it: in the router's discipline. The
//! veths, the kernel's `AF_PACKET` ring of the router's ports, the
//! router's own device and ring counters and the hosts' socket buffers can
//! lose packets too when the machine cannot carry the bottleneck rate; such
//! a run is reported with these losses and without fairness numbers
//! (`tollgate testbed` exits 1).
//!
//! Where each count comes from:
//! - **the router's socket ring** (`AF_PACKET` or `AF_XDP`, per port):
//!   what the router-side veth received (`/proc/net/dev` `rx packets` of `tgtb<pid>c` /
//!   `tgtb<pid>s`, a parking lot's `tgtb<pid>a<h>` / `tgtb<pid>b<h>`) minus
//!   what the router's port received. The kernel counts
//!   the ring's overflow only in the socket's `PACKET_STATISTICS`, which
//!   DPDK 22.11's `net_af_packet` does not read, so this difference is the
//!   one way to see it. The kernel counters are read before the router
//!   stops, so a packet still in the ring then counts as received.
//! - **veth and bridge drops and errors** (`rx/tx drop`, `rx/tx errs`) of
//!   every interface in the two namespaces and every link of the run in
//!   the root namespace (a parking lot's bridges and their ports too): the
//!   peer's backlog was full, or a bridge had no entry for the frame.
//! - **host sockets** in the client and server namespaces: UDP `InErrors`
//!   (receive buffer full, checksum) and `SndbufErrors` (`/proc/net/snmp`),
//!   TCP `TCPBacklogDrop`, `TCPRcvQDrop`, `TCPOFODrop`,
//!   `TCPZeroWindowDrop` (`/proc/net/netstat`).
//! - **the router**: its devices' `imissed`, `ierrors`, `oerrors`,
//!   `rx_nombuf` and its egresses' `tx_full`, `ring_full` and
//!   `delay_line_full` drops (the delay emulation, not the discipline).
//!
//! On the hosts of a `[testbed]` table (site.rs) the same host counters are
//! read through the host's `run` command before and after the run (their
//! difference counts; `interface` names the NIC), and the router's ports
//! are NICs whose overflows are the router's `imissed`.
//!
//! The namespaces and veths are created by the run, so their counters start
//! at zero; IPv6 is off on them and the path is probed only after the
//! router's ports exist, so no packet reaches a veth before the router's
//! socket does.

use std::collections::HashMap;

use super::site::Site;
use super::RouterReport;

/// The kernel counters of one network namespace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelCounters {
    /// `/proc/net/dev`: interface -> (`rx packets`, losses by column).
    pub devs: HashMap<String, DevCounters>,
    /// `/proc/net/snmp` `Udp:` and `/proc/net/netstat` `TcpExt:` counters.
    pub proto: HashMap<String, u64>,
}

/// One interface's `/proc/net/dev` counters that matter here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// `rx errs`.
    pub rx_errs: u64,
    /// `rx drop`.
    pub rx_drop: u64,
    /// `tx errs`.
    pub tx_errs: u64,
    /// `tx drop`.
    pub tx_drop: u64,
}

/// The protocol counters that are losses at a host.
const PROTO_LOSSES: [&str; 6] = [
    "Udp.InErrors",
    "Udp.SndbufErrors",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.TCPRcvQDrop",
    "TcpExt.TCPOFODrop",
    "TcpExt.TCPZeroWindowDrop",
];

impl KernelCounters {
    /// Parse the text of `/proc/net/dev` (`dev`) and of `/proc/net/snmp`
    /// and `/proc/net/netstat` concatenated (`proto`).
    pub fn parse(dev: &str, proto: &str) -> KernelCounters {
        let mut k = KernelCounters::default();
        // `  eth0: bytes packets errs drop fifo frame compressed multicast
        // bytes packets errs drop fifo colls carrier compressed`.
        for line in dev.lines() {
            let Some((name, rest)) = line.split_once(':') else {
                continue;
            };
            let nums: Vec<u64> = rest
                .split_whitespace()
                .map_while(|t| t.parse().ok())
                .collect();
            if nums.len() == 16 {
                k.devs.insert(
                    name.trim().to_string(),
                    DevCounters {
                        rx_packets: nums[1],
                        rx_errs: nums[2],
                        rx_drop: nums[3],
                        tx_errs: nums[10],
                        tx_drop: nums[11],
                    },
                );
            }
        }
        // A row of names, then a row of values with the same prefix.
        let mut header: HashMap<&str, Vec<&str>> = HashMap::new();
        for line in proto.lines() {
            let Some((prefix, rest)) = line.split_once(':') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.iter().all(|f| f.parse::<i64>().is_ok()) {
                if let Some(names) = header.remove(prefix) {
                    for (n, v) in names.iter().zip(&fields) {
                        if let Ok(v) = v.parse::<u64>() {
                            k.proto.insert(format!("{prefix}.{n}"), v);
                        }
                    }
                }
            } else {
                header.insert(prefix, fields);
            }
        }
        k
    }

    /// The counts since `before` (a host that existed before the run).
    pub fn since(&self, before: &KernelCounters) -> KernelCounters {
        let devs = self
            .devs
            .iter()
            .map(|(k, c)| {
                let b = before.devs.get(k).copied().unwrap_or_default();
                let d = DevCounters {
                    rx_packets: c.rx_packets.saturating_sub(b.rx_packets),
                    rx_errs: c.rx_errs.saturating_sub(b.rx_errs),
                    rx_drop: c.rx_drop.saturating_sub(b.rx_drop),
                    tx_errs: c.tx_errs.saturating_sub(b.tx_errs),
                    tx_drop: c.tx_drop.saturating_sub(b.tx_drop),
                };
                (k.clone(), d)
            })
            .collect();
        let proto = self
            .proto
            .iter()
            .map(|(k, v)| {
                let b = before.proto.get(k).copied().unwrap_or(0);
                (k.clone(), v.saturating_sub(b))
            })
            .collect();
        KernelCounters { devs, proto }
    }

    /// Read this process's namespace's counters (the router-side veths).
    pub fn read_own() -> anyhow::Result<KernelCounters> {
        let read = |f: &str| {
            std::fs::read_to_string(f)
                .map_err(|e| anyhow::anyhow!("reading the kernel's packet counters in {f}: {e}"))
        };
        let proto = read("/proc/net/snmp")? + &read("/proc/net/netstat")?;
        Ok(KernelCounters::parse(&read("/proc/net/dev")?, &proto))
    }
}

/// Every non-zero loss outside the disciplines, named by where it happened
/// (e.g. `tgtb7c -> router socket ring (net_af_packet0)`,
/// `server eth0 rx drop`, `server Udp.InErrors`).
pub fn outside_losses(
    site: &Site,
    client: &KernelCounters,
    server: &KernelCounters,
    root: &KernelCounters,
    router: &RouterReport,
) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    fn add(v: &mut Vec<(String, u64)>, what: String, n: u64) {
        if n > 0 {
            v.push((what, n));
        }
    }
    fn dev_losses(v: &mut Vec<(String, u64)>, name: &str, c: DevCounters) {
        add(v, format!("{name} rx drop"), c.rx_drop);
        add(v, format!("{name} rx errs"), c.rx_errs);
        add(v, format!("{name} tx drop"), c.tx_drop);
        add(v, format!("{name} tx errs"), c.tx_errs);
    }
    let sorted = |k: &KernelCounters| {
        let mut d: Vec<(String, DevCounters)> =
            k.devs.iter().map(|(n, c)| (n.clone(), *c)).collect();
        d.sort_by(|a, b| a.0.cmp(&b.0));
        d
    };
    for (side, host, end) in [
        ("client", client, &site.client),
        ("server", server, &site.server),
    ] {
        if site.veths.is_some() {
            // A namespace the run built: every interface in it but lo.
            for (iface, c) in sorted(host).into_iter().filter(|(n, _)| n != "lo") {
                dev_losses(&mut v, &format!("{side} {iface}"), c);
            }
        } else if let Some(iface) = &end.interface {
            let c = host.devs.get(iface).copied().unwrap_or_default();
            dev_losses(&mut v, &format!("{side} {iface}"), c);
        }
        for key in PROTO_LOSSES {
            add(
                &mut v,
                format!("{side} {key}"),
                host.proto.get(key).copied().unwrap_or(0),
            );
        }
    }
    if let Some(veths) = &site.veths {
        // The run's links in the root namespace: router-side veth ends,
        // and a parking lot's bridges and their ports.
        for (name, c) in sorted(root)
            .into_iter()
            .filter(|(n, _)| site.run_id.is_some() && super::netns::run_id(n) == site.run_id)
        {
            dev_losses(&mut v, &name, c);
        }
        for (i, veth) in veths.iter().enumerate() {
            let outer = root.devs.get(veth).copied().unwrap_or_default();
            let dev = &site.ports[i].device;
            let router_rx = router.devs.get(dev).map_or(0, |d| d.rx);
            add(
                &mut v,
                format!("{veth} -> router socket ring ({dev})"),
                outer.rx_packets.saturating_sub(router_rx),
            );
        }
    }
    let mut devs: Vec<_> = router.devs.iter().collect();
    devs.sort_by(|a, b| a.0.cmp(b.0));
    for (name, d) in devs {
        for (k, n) in [
            ("imissed", d.imissed),
            ("ierrors", d.ierrors),
            ("oerrors", d.oerrors),
            ("rx_nombuf", d.rx_nombuf),
        ] {
            add(&mut v, format!("router {name} {k}"), n);
        }
    }
    for lane in &router.lanes {
        for k in ["tx_full", "ring_full", "drop_delay_line_full"] {
            add(&mut v, format!("router {} {k}", lane.port), lane.get(k));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  100 2    0    0    0     0          0         0  100 2    0    0    0     0       0          0
  eth0: 5000 40    1    2    0     0          0         0  9000 70    3    4    0     0       0          0
";
    const SNMP: &str = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 100 7 5 90 5 1 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 9 0 0 0 0 0 0
";
    const NETSTAT: &str = "TcpExt: SyncookiesSent TCPBacklogDrop TCPOFODrop TCPRcvQDrop
TcpExt: 0 6 0 0
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
";

    #[test]
    fn proc_net_files_are_parsed() {
        let k = KernelCounters::parse(DEV, &format!("{SNMP}{NETSTAT}"));
        assert_eq!(
            k.devs["eth0"],
            DevCounters {
                rx_packets: 40,
                rx_errs: 1,
                rx_drop: 2,
                tx_errs: 3,
                tx_drop: 4
            }
        );
        assert_eq!(k.devs["lo"].rx_packets, 2);
        assert_eq!(k.proto["Udp.InErrors"], 5);
        assert_eq!(k.proto["Udp.SndbufErrors"], 1);
        assert_eq!(k.proto["UdpLite.InErrors"], 9);
        assert_eq!(k.proto["TcpExt.TCPBacklogDrop"], 6);
        assert_eq!(k.proto["TcpExt.TCPOFODrop"], 0);
    }

    #[test]
    fn losses_name_where_they_happened_and_zero_counts_are_left_out() {
        let names = crate::testbed::netns::Names::new(7);
        let site = Site::namespaces(
            &names,
            crate::testbed::netns::Pmd::AfPacket,
            std::path::Path::new("tollgate"),
        );
        let host = KernelCounters::parse(DEV, &format!("{SNMP}{NETSTAT}"));
        let clean = KernelCounters::parse(
            "  eth0: 5000 40 0 0 0 0 0 0 9000 70 0 0 0 0 0 0\n",
            "Udp: InErrors SndbufErrors\nUdp: 0 0\n",
        );
        let root = KernelCounters::parse(
            &format!(
                "  {}: 1 1000 0 0 0 0 0 0 1 500 0 0 0 0 0 0\n  {}: 1 600 0 0 0 0 0 0 1 990 0 0 0 0 0 0\n",
                names.client_veth, names.server_veth
            ),
            "",
        );
        let report = crate::testbed::parse_router_report(
            "dev net_af_packet0 rx=990 rx_mpps=0.000 ingress_drops[no_route=0] hw[imissed=0 ierrors=0 oerrors=0 rx_nombuf=0]
dev net_af_packet1 rx=600 rx_mpps=0.000 ingress_drops[no_route=0] hw[imissed=3 ierrors=0 oerrors=0 rx_nombuf=0]
lane port=net_af_packet0 discipline=droptail received=600 transmitted=600 tx_full=2 ring_full=0 drop_delay_line_full=0
tollgate-router final: rx=1590 tx=1590 dropped=0 queued=0 accounting=ok
",
        )
        .unwrap();
        let clean_run = outside_losses(&site, &clean, &clean, &root, &report);
        assert_eq!(
            clean_run,
            vec![
                (
                    "tgtb7c -> router socket ring (net_af_packet0)".to_string(),
                    10
                ),
                ("router net_af_packet1 imissed".to_string(), 3),
                ("router net_af_packet0 tx_full".to_string(), 2),
            ]
        );
        let lossy = outside_losses(&site, &clean, &host, &root, &report);
        for want in [
            "server eth0 rx drop",
            "server eth0 tx drop",
            "server Udp.InErrors",
            "server Udp.SndbufErrors",
            "server TcpExt.TCPBacklogDrop",
        ] {
            assert!(lossy.iter().any(|(k, _)| k == want), "{want}: {lossy:?}");
        }
        assert!(!lossy.iter().any(|(k, _)| k.contains("TCPOFODrop")));
    }
}

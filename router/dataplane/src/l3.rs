//! L3 mode: IPv4/IPv6 static routes with MAC rewrite, ARP and IPv6
//! neighbour discovery answered for the ports' own addresses, static and
//! learned neighbours.
//!
//! Bounded: routes and static neighbours come from the configuration;
//! learned neighbours go into a table of fixed capacity ([`MAX_NEIGHBOURS`]).
//! Route lookup is a longest-prefix scan of the configured routes (sized
//! for testbeds: a handful of routes). Frames without a route or a known
//! neighbour, with TTL/hop limit <= 1, or addressed to the router itself
//! are dropped and counted (`no_route`, `ttl`, `local`); non-IP non-ARP
//! frames count as `not_ip`. ARP and NDP replies are built in the request's
//! mbuf and sent back out of the port they came in on, around the
//! discipline (counted as `bypass`).
//!
//! Neighbour learning resists spoofing ([`NeighbourStats`] counts every
//! refusal):
//! - Only ARP requests whose target is the receiving port's IPv4 address,
//!   and neighbour solicitations whose target is its IPv6 address, create
//!   entries (for their sender). ARP and ND traffic between other hosts is
//!   not learned from (`refused_not_for_us`). The router sends no
//!   requests of its own, so ARP replies and neighbour advertisements
//!   addressed to it only refresh entries that exist.
//! - The sender must be a unicast address inside the receiving port's
//!   subnet (or IPv6 link-local), else `refused_off_link`.
//! - Learned entries not refreshed for `neighbour_timeout` (router.toml,
//!   default [`NEIGHBOUR_TIMEOUT_DEFAULT`]) are removed by
//!   a sweep that runs at most every `neighbour_timeout / 8`, when a new
//!   neighbour is about to be learned (until then an old entry stays usable,
//!   like Linux's STALE state). A full table refuses new neighbours
//!   (`refused_table_full`) rather than evicting live ones, so a flood can
//!   not push out neighbours that keep talking to the router; static
//!   neighbours are never removed.
//! - The clock is the caller's `now`; nothing here reads a clock.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use tollgate_cca::Time;
use tollgate_router::packet::{checksum_adjust, internet_checksum};

use crate::config::{parse_duration, parse_mac, parse_prefix, Mode, RouterConfig};
use crate::mbuf::Mbuf;

/// A frame the L3 code reads, rewrites in place, or replaces (NDP answers):
/// an mbuf on the dataplane, a `Vec<u8>` in tests.
pub trait FrameBuf {
    /// The frame's bytes.
    fn data(&self) -> &[u8];
    /// The frame's bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Replace the frame by `frame`; false if it does not fit.
    fn write_frame(&mut self, frame: &[u8]) -> bool;
}

impl FrameBuf for Mbuf {
    #[inline]
    fn data(&self) -> &[u8] {
        Mbuf::data(self)
    }
    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        Mbuf::data_mut(self)
    }
    fn write_frame(&mut self, frame: &[u8]) -> bool {
        Mbuf::write_frame(self, frame)
    }
}

impl FrameBuf for Vec<u8> {
    fn data(&self) -> &[u8] {
        self
    }
    fn data_mut(&mut self) -> &mut [u8] {
        self
    }
    fn write_frame(&mut self, frame: &[u8]) -> bool {
        self.clear();
        self.extend_from_slice(frame);
        true
    }
}

/// Learned-neighbour capacity.
pub const MAX_NEIGHBOURS: usize = 4096;

/// The default of `neighbour_timeout`: learned neighbours not refreshed for
/// this long are removed (5 minutes, the order of Linux's neighbour garbage
/// collection). The `d_neighbour_timeout` default of router.toml says the same.
pub const NEIGHBOUR_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);

/// Neighbour-table counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NeighbourStats {
    /// Learned entries now in the table.
    pub learned: u64,
    /// Static entries.
    pub statics: u64,
    /// Learned entries removed after `neighbour_timeout` without refresh.
    pub expired: u64,
    /// New neighbours refused because the table was full.
    pub refused_table_full: u64,
    /// ARP / ND packets not addressed to the router, and replies or
    /// advertisements for neighbours it does not know (not learned from).
    pub refused_not_for_us: u64,
    /// Senders that are not unicast addresses inside the receiving port's
    /// subnet (IPv6: or link-local), not learned.
    pub refused_off_link: u64,
}

impl NeighbourStats {
    /// One `key=value` line for the stats table and the final report.
    pub fn line(&self) -> String {
        format!(
            "neighbours static={} learned={} expired={} refused_table_full={} refused_not_for_us={} refused_off_link={}",
            self.statics,
            self.learned,
            self.expired,
            self.refused_table_full,
            self.refused_not_for_us,
            self.refused_off_link
        )
    }
}

#[derive(Clone, Copy, Debug)]
struct Neighbour {
    mac: [u8; 6],
    /// When last learned or refreshed; `None` for static neighbours.
    refreshed: Option<Time>,
}

/// What to do with a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Through the egress pipeline of this lane.
    Queue(usize),
    /// Straight to this lane's TX (control frames).
    Bypass(usize),
    /// Drop, counting the ingress reason (index into `INGRESS_REASONS`).
    Drop(usize),
}

const NO_ROUTE: usize = 0;
const NOT_IP: usize = 1;
const TTL: usize = 2;
const LOCAL: usize = 3;

#[derive(Clone, Copy, Debug)]
struct Route {
    addr: u128,
    len: u8,
    lane: usize,
    via: Option<u128>,
}

/// The L3 tables.
#[derive(Debug, Default)]
pub struct L3 {
    enabled: bool,
    routes: Vec<Route>,
    neighbours: HashMap<u128, Neighbour>,
    static_count: usize,
    learned: usize,
    stats: NeighbourStats,
    next_sweep: Time,
    timeout: Duration,
    port_v4: Vec<Option<(Ipv4Addr, u8)>>,
    port_v6: Vec<Option<(Ipv6Addr, u8)>>,
    macs: Vec<[u8; 6]>,
}

fn key(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from_be_bytes(a.to_ipv6_mapped().octets()),
        IpAddr::V6(a) => u128::from_be_bytes(a.octets()),
    }
}

fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

impl L3 {
    /// Tables from the configuration; `macs[i]` is device i's MAC.
    pub fn new(cfg: &RouterConfig, macs: &[[u8; 6]]) -> Result<L3, String> {
        if cfg.mode != Mode::L3 {
            return Ok(L3::default());
        }
        let mut l3 = L3 {
            enabled: true,
            macs: macs.to_vec(),
            // Checked by RouterConfig::parse.
            timeout: parse_duration(&cfg.neighbour_timeout)?,
            ..L3::default()
        };
        l3.neighbours.reserve(MAX_NEIGHBOURS + cfg.neighbours.len());
        for p in &cfg.ports {
            let v4 = p.ipv4.as_deref().map(parse_prefix).transpose()?;
            let v6 = p.ipv6.as_deref().map(parse_prefix).transpose()?;
            l3.port_v4.push(v4.and_then(|(a, len)| match a {
                IpAddr::V4(a) => Some((a, len)),
                IpAddr::V6(_) => None,
            }));
            l3.port_v6.push(v6.and_then(|(a, len)| match a {
                IpAddr::V6(a) => Some((a, len)),
                IpAddr::V4(_) => None,
            }));
            // Connected routes.
            let lane = l3.port_v4.len() - 1;
            for (a, len) in [v4, v6].into_iter().flatten() {
                let len = if a.is_ipv4() { len + 96 } else { len };
                l3.routes.push(Route {
                    addr: key(a) & mask(len),
                    len,
                    lane,
                    via: None,
                });
            }
        }
        for r in &cfg.routes {
            let (a, len) = parse_prefix(&r.prefix)?;
            let len = if a.is_ipv4() { len + 96 } else { len };
            let lane = cfg
                .ports
                .iter()
                .position(|p| p.device == r.port)
                .ok_or(format!("route port {:?}", r.port))?;
            let via = r
                .via
                .as_deref()
                .map(|v| v.parse::<IpAddr>().map(key).map_err(|e| e.to_string()))
                .transpose()?;
            l3.routes.push(Route {
                addr: key(a) & mask(len),
                len,
                lane,
                via,
            });
        }
        l3.routes.sort_by_key(|r| std::cmp::Reverse(r.len));
        for n in &cfg.neighbours {
            let ip: IpAddr = n.ip.parse().map_err(|e| format!("{e}"))?;
            l3.neighbours.insert(
                key(ip),
                Neighbour {
                    mac: parse_mac(&n.mac)?,
                    refreshed: None,
                },
            );
        }
        l3.static_count = l3.neighbours.len();
        Ok(l3)
    }

    /// The neighbour-table counters.
    pub fn neighbour_stats(&self) -> NeighbourStats {
        NeighbourStats {
            learned: self.learned as u64,
            statics: self.static_count as u64,
            ..self.stats
        }
    }

    /// Learn or refresh `ip` -> `mac` at `now`. `create`: whether a new
    /// entry may be made (requests for us), or only an existing one
    /// refreshed (replies, advertisements). Static entries are kept as
    /// configured.
    fn learn(&mut self, ip: u128, mac: [u8; 6], now: Time, create: bool) {
        if let Some(n) = self.neighbours.get_mut(&ip) {
            if n.refreshed.is_some() {
                *n = Neighbour {
                    mac,
                    refreshed: Some(now),
                };
            }
            return;
        }
        if !create {
            self.stats.refused_not_for_us += 1;
            return;
        }
        if now >= self.next_sweep {
            self.sweep(now);
        }
        if self.learned >= MAX_NEIGHBOURS {
            self.stats.refused_table_full += 1;
            return;
        }
        self.neighbours.insert(
            ip,
            Neighbour {
                mac,
                refreshed: Some(now),
            },
        );
        self.learned += 1;
    }

    /// Remove learned entries not refreshed for the timeout.
    fn sweep(&mut self, now: Time) {
        let timeout = self.timeout;
        let before = self.neighbours.len();
        self.neighbours.retain(|_, n| match n.refreshed {
            None => true,
            Some(t) => now.saturating_since(t) < timeout,
        });
        let removed = before - self.neighbours.len();
        self.learned -= removed;
        self.stats.expired += removed as u64;
        self.next_sweep = now + timeout / 8;
    }

    /// The MAC of a neighbour, static or learned.
    #[inline]
    fn neighbour(&self, ip: u128) -> Option<[u8; 6]> {
        self.neighbours.get(&ip).map(|n| n.mac)
    }

    fn is_port_address(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.port_v4.iter().flatten().any(|p| p.0 == a),
            IpAddr::V6(a) => self.port_v6.iter().flatten().any(|p| p.0 == a),
        }
    }

    /// Whether `ip` may be a neighbour on device `dev`: a unicast address
    /// in the port's subnet (IPv6: or link-local), not the router's own.
    fn on_link(&self, dev: usize, ip: IpAddr) -> bool {
        if self.is_port_address(ip) || ip.is_unspecified() || ip.is_multicast() {
            return false;
        }
        let (net, len) = match ip {
            IpAddr::V4(a) => {
                if a.is_broadcast() {
                    return false;
                }
                match self.port_v4.get(dev).copied().flatten() {
                    Some((p, len)) => (IpAddr::V4(p), len + 96),
                    None => return false,
                }
            }
            IpAddr::V6(a) => {
                if a.segments()[0] & 0xffc0 == 0xfe80 {
                    return true;
                }
                match self.port_v6.get(dev).copied().flatten() {
                    Some((p, len)) => (IpAddr::V6(p), len),
                    None => return false,
                }
            }
        };
        key(ip) & mask(len) == key(net) & mask(len)
    }

    fn lookup(&self, dst: u128) -> Option<(usize, u128)> {
        self.routes
            .iter()
            .find(|r| dst & mask(r.len) == r.addr)
            .map(|r| (r.lane, r.via.unwrap_or(dst)))
    }

    /// Decide and rewrite a frame received on device `dev`.
    pub fn forward(&mut self, dev: usize, m: &mut impl FrameBuf, now: Time) -> Action {
        if !self.enabled {
            return Action::Drop(NOT_IP);
        }
        let f = m.data();
        if f.len() < 14 {
            return Action::Drop(NOT_IP);
        }
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0806 => self.arp(dev, m, now),
            0x0800 => self.ipv4(dev, m),
            0x86DD => self.ipv6(dev, m, now),
            _ => Action::Drop(NOT_IP),
        }
    }

    fn arp(&mut self, dev: usize, m: &mut impl FrameBuf, now: Time) -> Action {
        let f = m.data_mut();
        if f.len() < 42 || f[14..20] != [0, 1, 8, 0, 6, 4] {
            return Action::Drop(NOT_IP);
        }
        let op = u16::from_be_bytes([f[20], f[21]]);
        let mut sha = [0u8; 6];
        sha.copy_from_slice(&f[22..28]);
        let spa = Ipv4Addr::new(f[28], f[29], f[30], f[31]);
        let tpa = Ipv4Addr::new(f[38], f[39], f[40], f[41]);
        let ours = self.port_v4.get(dev).copied().flatten().map(|p| p.0);
        if ours != Some(tpa) || !(op == 1 || op == 2) {
            self.stats.refused_not_for_us += 1;
            return Action::Drop(LOCAL);
        }
        // An ARP probe (RFC 5227: sender 0.0.0.0) is answered, not learned.
        if !spa.is_unspecified() {
            if self.on_link(dev, spa.into()) && sha[0] & 1 == 0 {
                self.learn(key(spa.into()), sha, now, op == 1);
            } else {
                self.stats.refused_off_link += 1;
            }
        }
        if op == 1 {
            let f = m.data_mut();
            let mac = self.macs[dev];
            f[20..22].copy_from_slice(&2u16.to_be_bytes());
            f[32..38].copy_from_slice(&sha);
            f[38..42].copy_from_slice(&spa.octets());
            f[22..28].copy_from_slice(&mac);
            f[28..32].copy_from_slice(&tpa.octets());
            f[0..6].copy_from_slice(&sha);
            f[6..12].copy_from_slice(&mac);
            return Action::Bypass(dev);
        }
        Action::Drop(LOCAL)
    }

    fn ipv4(&mut self, dev: usize, m: &mut impl FrameBuf) -> Action {
        let f = m.data();
        if f.len() < 34 || f[14] >> 4 != 4 {
            return Action::Drop(NOT_IP);
        }
        let dst = Ipv4Addr::new(f[30], f[31], f[32], f[33]);
        if self.is_port_address(dst.into()) {
            return Action::Drop(LOCAL);
        }
        if f[22] <= 1 {
            return Action::Drop(TTL);
        }
        let Some((lane, hop)) = self.lookup(key(dst.into())) else {
            return Action::Drop(NO_ROUTE);
        };
        let Some(mac) = self.neighbour(hop) else {
            return Action::Drop(NO_ROUTE);
        };
        let src_mac = self.macs[lane];
        let f = m.data_mut();
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&src_mac);
        // TTL - 1 with the incremental checksum update (RFC 1624) of the
        // TTL/protocol word.
        let old_word = u16::from_be_bytes([f[22], f[23]]);
        f[22] -= 1;
        let new_word = u16::from_be_bytes([f[22], f[23]]);
        let sum = checksum_adjust(u16::from_be_bytes([f[24], f[25]]), old_word, new_word);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        let _ = dev;
        Action::Queue(lane)
    }

    fn ipv6(&mut self, dev: usize, m: &mut impl FrameBuf, now: Time) -> Action {
        let f = m.data();
        if f.len() < 54 || f[14] >> 4 != 6 {
            return Action::Drop(NOT_IP);
        }
        let mut d = [0u8; 16];
        d.copy_from_slice(&f[38..54]);
        let dst = Ipv6Addr::from(d);
        // Neighbour discovery: ICMPv6 (next header 58) NS (135) / NA (136), hop limit 255.
        if f[20] == 58 && f[21] == 255 && f.len() >= 78 && (f[54] == 135 || f[54] == 136) {
            return self.ndp(dev, m, now);
        }
        if self.is_port_address(dst.into()) || dst.is_multicast() {
            return Action::Drop(LOCAL);
        }
        if f[21] <= 1 {
            return Action::Drop(TTL);
        }
        let Some((lane, hop)) = self.lookup(key(dst.into())) else {
            return Action::Drop(NO_ROUTE);
        };
        let Some(mac) = self.neighbour(hop) else {
            return Action::Drop(NO_ROUTE);
        };
        let src_mac = self.macs[lane];
        let f = m.data_mut();
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&src_mac);
        f[21] -= 1;
        Action::Queue(lane)
    }

    fn ndp(&mut self, dev: usize, m: &mut impl FrameBuf, now: Time) -> Action {
        let f = m.data();
        let mut s = [0u8; 16];
        s.copy_from_slice(&f[22..38]);
        let src = Ipv6Addr::from(s);
        let mut d = [0u8; 16];
        d.copy_from_slice(&f[38..54]);
        let dst = Ipv6Addr::from(d);
        let mut t = [0u8; 16];
        t.copy_from_slice(&f[62..78]);
        let target = Ipv6Addr::from(t);
        let ty = f[54];
        // Link-layer address option (type 1 source in NS, type 2 target in NA).
        let lladdr = (f.len() >= 86 && f[78] == ty - 134 && f[79] == 1).then(|| {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&f[80..86]);
            mac
        });
        let ours = self.port_v6.get(dev).copied().flatten().map(|p| p.0);
        if ty == 136 {
            // An advertisement sent to us can only refresh (we solicit none).
            match lladdr {
                Some(mac) if ours == Some(dst) && self.on_link(dev, target.into()) => {
                    self.learn(key(target.into()), mac, now, false)
                }
                _ => self.stats.refused_not_for_us += 1,
            }
            return Action::Drop(LOCAL);
        }
        if ours != Some(target) {
            self.stats.refused_not_for_us += 1;
            return Action::Drop(LOCAL);
        }
        if src.is_unspecified() {
            // Duplicate address detection: neither learned nor answered.
            return Action::Drop(LOCAL);
        }
        if let Some(mac) = lladdr {
            if self.on_link(dev, src.into()) && mac[0] & 1 == 0 {
                self.learn(key(src.into()), mac, now, true);
            } else {
                self.stats.refused_off_link += 1;
            }
        }
        // Neighbour advertisement back to the solicitor (RFC 4861 section 7.2.4).
        let mac = self.macs[dev];
        let mut peer_mac = [0u8; 6];
        peer_mac.copy_from_slice(&f[6..12]);
        let mut na = [0u8; 86];
        na[0..6].copy_from_slice(&peer_mac);
        na[6..12].copy_from_slice(&mac);
        na[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
        na[14] = 0x60;
        na[18..20].copy_from_slice(&32u16.to_be_bytes());
        na[20] = 58;
        na[21] = 255;
        na[22..38].copy_from_slice(&target.octets());
        na[38..54].copy_from_slice(&src.octets());
        na[54] = 136;
        na[58] = 0x60; // Solicited | Override.
        na[62..78].copy_from_slice(&target.octets());
        na[78] = 2;
        na[79] = 1;
        na[80..86].copy_from_slice(&mac);
        let ck = icmpv6_checksum(&na[22..38], &na[38..54], &na[54..86]);
        na[56..58].copy_from_slice(&ck.to_be_bytes());
        if !m.write_frame(&na) {
            return Action::Drop(LOCAL);
        }
        Action::Bypass(dev)
    }
}

/// ICMPv6 checksum over the pseudo-header (RFC 8200 section 8.1) and `body`.
fn icmpv6_checksum(src: &[u8], dst: &[u8], body: &[u8]) -> u16 {
    let len = (body.len() as u32).to_be_bytes();
    internet_checksum([src, dst, &len[..], &[0, 0, 0, 58][..], body])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const ROUTER_MAC0: [u8; 6] = [2, 0, 0, 0, 0, 0xa0];
    const ROUTER_MAC1: [u8; 6] = [2, 0, 0, 0, 0, 0xa1];

    fn l3() -> L3 {
        let cfg = RouterConfig::parse(
            r#"
mode = "l3"
[[ports]]
device = "p0"
ipv4 = "10.0.0.1/8"
ipv6 = "fd00::1/64"
[[ports]]
device = "p1"
ipv4 = "192.168.1.1/24"
[[routes]]
prefix = "172.16.0.0/12"
port = "p1"
via = "192.168.1.2"
[[neighbours]]
ip = "192.168.1.2"
mac = "02:00:00:00:00:02"
"#,
        )
        .unwrap();
        L3::new(&cfg, &[ROUTER_MAC0, ROUTER_MAC1]).unwrap()
    }

    /// An ARP packet: `op` 1 request, 2 reply.
    fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&sha);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4]);
        f.extend_from_slice(&op.to_be_bytes());
        f.extend_from_slice(&sha);
        f.extend_from_slice(&spa);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&tpa);
        f
    }

    /// An ICMPv6 neighbour solicitation for `target` from `src` with a
    /// source link-layer address option.
    fn ns(mac: [u8; 6], src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
        let mut f = vec![0u8; 86];
        f[0..6].copy_from_slice(&[0x33, 0x33, 0xff, 0, 0, 1]);
        f[6..12].copy_from_slice(&mac);
        f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
        f[14] = 0x60;
        f[18..20].copy_from_slice(&32u16.to_be_bytes());
        f[20] = 58;
        f[21] = 255;
        f[22..38].copy_from_slice(&src.octets());
        f[38..54].copy_from_slice(&Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 1).octets());
        f[54] = 135;
        f[62..78].copy_from_slice(&target.octets());
        f[78] = 1;
        f[79] = 1;
        f[80..86].copy_from_slice(&mac);
        f
    }

    fn host(i: u32) -> ([u8; 6], [u8; 4]) {
        let b = i.to_be_bytes();
        ([2, 1, b[0], b[1], b[2], b[3]], [10, 1 + b[1], b[2], b[3]])
    }

    fn udp_to(dst: [u8; 4]) -> Vec<u8> {
        use tollgate_router::packet::FlowKey;
        let key = FlowKey::new(
            "10.9.9.9".parse().unwrap(),
            IpAddr::from(dst),
            17,
            1000,
            2000,
        );
        tollgate_router::packet::build::udp4(&key, 0, 10)
    }

    const T0: Time = Time::ZERO;

    #[test]
    fn spoofed_arp_for_other_hosts_is_not_learned() {
        let mut l3 = l3();
        // 5,000 ARP requests from distinct spoofed senders, each asking for
        // another host's address (not the router's).
        for i in 0..5000u32 {
            let (mac, ip) = host(i);
            let mut f = arp(1, mac, ip, [10, 0, 0, 77]);
            assert_eq!(l3.forward(0, &mut f, T0), Action::Drop(LOCAL));
        }
        // ... and gratuitous replies nobody asked for.
        for i in 0..100u32 {
            let (mac, ip) = host(10_000 + i);
            let mut f = arp(2, mac, ip, ip);
            l3.forward(0, &mut f, T0);
        }
        let s = l3.neighbour_stats();
        assert_eq!(s.learned, 0, "{s:?}");
        assert_eq!(s.refused_not_for_us, 5100, "{s:?}");
        // A legitimate neighbour asking for the router is learned and used.
        let (mac, _) = host(1);
        let mut f = arp(1, mac, [10, 0, 0, 9], [10, 0, 0, 1]);
        assert_eq!(l3.forward(0, &mut f, T0), Action::Bypass(0));
        assert_eq!(&f[0..6], &mac, "answered to the asker");
        assert_eq!(l3.neighbour_stats().learned, 1);
        let mut p = udp_to([10, 0, 0, 9]);
        assert_eq!(l3.forward(1, &mut p, T0), Action::Queue(0));
        assert_eq!(&p[0..6], &mac);
    }

    #[test]
    fn arp_from_off_subnet_senders_is_not_learned() {
        let mut l3 = l3();
        let (mac, _) = host(3);
        let mut f = arp(1, mac, [203, 0, 113, 5], [10, 0, 0, 1]);
        l3.forward(0, &mut f, T0);
        let s = l3.neighbour_stats();
        assert_eq!((s.learned, s.refused_off_link), (0, 1), "{s:?}");
    }

    #[test]
    fn full_table_takes_new_neighbours_once_old_ones_age_out() {
        let mut l3 = l3();
        for i in 0..MAX_NEIGHBOURS as u32 {
            let (mac, ip) = host(i);
            let mut f = arp(1, mac, ip, [10, 0, 0, 1]);
            l3.forward(0, &mut f, T0);
        }
        assert_eq!(l3.neighbour_stats().learned, MAX_NEIGHBOURS as u64);
        let (mac, ip) = host(90_000);
        let newcomer = || arp(1, mac, ip, [10, 0, 0, 1]);
        // Full of fresh entries: refused and counted, nothing evicted.
        let t1 = T0 + Duration::from_secs(10);
        l3.forward(0, &mut newcomer(), t1);
        let s = l3.neighbour_stats();
        assert_eq!(
            (s.learned, s.refused_table_full),
            (MAX_NEIGHBOURS as u64, 1)
        );
        // An existing entry refreshed at t1 survives the aging below.
        let (m7, ip7) = host(7);
        l3.forward(0, &mut arp(1, m7, ip7, [10, 0, 0, 1]), t1);
        // Static neighbours never age out.
        let late = T0 + NEIGHBOUR_TIMEOUT_DEFAULT + Duration::from_secs(5);
        l3.forward(0, &mut newcomer(), late);
        let s = l3.neighbour_stats();
        assert_eq!(s.learned, 2, "{s:?}");
        assert_eq!(s.expired, MAX_NEIGHBOURS as u64 - 1, "{s:?}");
        let mut p = udp_to(ip);
        assert_eq!(l3.forward(1, &mut p, late), Action::Queue(0));
        assert_eq!(&p[0..6], &mac);
        let mut p = udp_to(ip7);
        assert_eq!(l3.forward(1, &mut p, late), Action::Queue(0));
        let mut p = udp_to([172, 16, 0, 1]);
        assert_eq!(l3.forward(0, &mut p, late), Action::Queue(1), "static via");
        assert_eq!(&p[0..6], &[2, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn neighbour_solicitations_are_learned_only_for_our_address() {
        let mut l3 = l3();
        let ours: Ipv6Addr = "fd00::1".parse().unwrap();
        for i in 0..300u16 {
            let src = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 1, i + 2);
            let mut f = ns([2, 2, 0, 0, 0, i as u8], src, "fd00::99".parse().unwrap());
            assert_eq!(l3.forward(0, &mut f, T0), Action::Drop(LOCAL));
        }
        assert_eq!(l3.neighbour_stats().learned, 0);
        let src: Ipv6Addr = "fd00::5".parse().unwrap();
        let mut f = ns([2, 2, 0, 0, 0, 5], src, ours);
        assert_eq!(l3.forward(0, &mut f, T0), Action::Bypass(0));
        assert_eq!(f.len(), 86);
        assert_eq!(f[54], 136, "answered with an advertisement");
        assert_eq!(
            icmpv6_checksum(&f[22..38], &f[38..54], &f[54..86]),
            0,
            "the advertisement's ICMPv6 checksum verifies"
        );
        let s = l3.neighbour_stats();
        assert_eq!((s.learned, s.refused_not_for_us), (1, 300), "{s:?}");
    }

    #[test]
    fn ttl_decrement_keeps_the_ipv4_checksum_valid() {
        let mut l3 = l3();
        for ttl in [2u8, 64, 255] {
            let mut p = udp_to([172, 16, 0, 1]);
            p[14 + 8] = ttl;
            p[24..26].copy_from_slice(&[0, 0]);
            let ck = tollgate_router::packet::ipv4_checksum(&p[14..34]);
            p[24..26].copy_from_slice(&ck.to_be_bytes());
            assert_eq!(l3.forward(0, &mut p, T0), Action::Queue(1));
            assert_eq!(p[14 + 8], ttl - 1);
            assert_eq!(tollgate_router::packet::ipv4_checksum(&p[14..34]), 0);
        }
    }

    #[test]
    fn truncated_control_frames_are_dropped_not_learned() {
        let mut l3 = l3();
        let (mac, ip) = host(4);
        let full = arp(1, mac, ip, [10, 0, 0, 1]);
        for n in 0..full.len() {
            let mut f = full[..n].to_vec();
            assert!(matches!(l3.forward(0, &mut f, T0), Action::Drop(_)));
        }
        let src: Ipv6Addr = "fd00::5".parse().unwrap();
        let full = ns([2, 2, 0, 0, 0, 5], src, "fd00::1".parse().unwrap());
        for n in 0..full.len() {
            let mut f = full[..n].to_vec();
            l3.forward(0, &mut f, T0);
        }
        assert_eq!(l3.neighbour_stats().learned, 0);
    }
}

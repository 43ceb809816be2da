//! L3 mode: IPv4/IPv6 static routes with MAC rewrite, ARP and IPv6
//! neighbour discovery answered for the ports' own addresses, static and
//! learned neighbours.
//!
//! Bounded: routes and static neighbours come from the configuration;
//! learned neighbours go into a table of fixed capacity ([`MAX_NEIGHBOURS`]),
//! further ones are ignored. Route lookup is a longest-prefix scan of the
//! configured routes (sized for testbeds: a handful of routes). Frames
//! without a route or a known neighbour, with TTL/hop limit <= 1, or
//! addressed to the router itself are dropped and counted
//! (`no_route`, `ttl`, `local`); non-IP non-ARP frames count as `not_ip`.
//! ARP and NDP replies are built in the request's mbuf and sent back out of
//! the port they came in on, around the discipline (counted as `bypass`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::{parse_mac, parse_prefix, Mode, RouterConfig};
use crate::mbuf::Mbuf;

/// Learned-neighbour capacity.
pub const MAX_NEIGHBOURS: usize = 4096;

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
    neighbours: HashMap<u128, [u8; 6]>,
    static_count: usize,
    port_v4: Vec<Option<Ipv4Addr>>,
    port_v6: Vec<Option<Ipv6Addr>>,
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
            ..L3::default()
        };
        l3.neighbours.reserve(MAX_NEIGHBOURS + cfg.neighbours.len());
        for p in &cfg.ports {
            let v4 = p.ipv4.as_deref().map(parse_prefix).transpose()?;
            let v6 = p.ipv6.as_deref().map(parse_prefix).transpose()?;
            l3.port_v4.push(v4.and_then(|(a, _)| match a {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            }));
            l3.port_v6.push(v6.and_then(|(a, _)| match a {
                IpAddr::V6(a) => Some(a),
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
            l3.neighbours.insert(key(ip), parse_mac(&n.mac)?);
        }
        l3.static_count = l3.neighbours.len();
        Ok(l3)
    }

    fn learn(&mut self, ip: u128, mac: [u8; 6]) {
        if self.neighbours.len() < self.static_count + MAX_NEIGHBOURS
            || self.neighbours.contains_key(&ip)
        {
            self.neighbours.insert(ip, mac);
        }
    }

    fn lookup(&self, dst: u128) -> Option<(usize, u128)> {
        self.routes
            .iter()
            .find(|r| dst & mask(r.len) == r.addr)
            .map(|r| (r.lane, r.via.unwrap_or(dst)))
    }

    /// Decide and rewrite a frame received on device `dev`.
    pub fn forward(&mut self, dev: usize, m: &mut Mbuf) -> Action {
        if !self.enabled {
            return Action::Drop(NOT_IP);
        }
        let f = m.data();
        if f.len() < 14 {
            return Action::Drop(NOT_IP);
        }
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0806 => self.arp(dev, m),
            0x0800 => self.ipv4(dev, m),
            0x86DD => self.ipv6(dev, m),
            _ => Action::Drop(NOT_IP),
        }
    }

    fn arp(&mut self, dev: usize, m: &mut Mbuf) -> Action {
        let f = m.data_mut();
        if f.len() < 42 || f[14..20] != [0, 1, 8, 0, 6, 4] {
            return Action::Drop(NOT_IP);
        }
        let op = u16::from_be_bytes([f[20], f[21]]);
        let mut sha = [0u8; 6];
        sha.copy_from_slice(&f[22..28]);
        let spa = Ipv4Addr::new(f[28], f[29], f[30], f[31]);
        let tpa = Ipv4Addr::new(f[38], f[39], f[40], f[41]);
        self.learn(key(spa.into()), sha);
        let f = m.data_mut();
        if op == 1 && self.port_v4.get(dev).copied().flatten() == Some(tpa) {
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

    fn ipv4(&mut self, dev: usize, m: &mut Mbuf) -> Action {
        let f = m.data();
        if f.len() < 34 || f[14] >> 4 != 4 {
            return Action::Drop(NOT_IP);
        }
        let dst = Ipv4Addr::new(f[30], f[31], f[32], f[33]);
        if self.port_v4.contains(&Some(dst)) {
            return Action::Drop(LOCAL);
        }
        if f[22] <= 1 {
            return Action::Drop(TTL);
        }
        let Some((lane, hop)) = self.lookup(key(dst.into())) else {
            return Action::Drop(NO_ROUTE);
        };
        let Some(&mac) = self.neighbours.get(&hop) else {
            return Action::Drop(NO_ROUTE);
        };
        let src_mac = self.macs[lane];
        let f = m.data_mut();
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&src_mac);
        // TTL - 1 with the incremental checksum update (RFC 1624): the
        // TTL/protocol word drops by 0x0100, so the checksum rises by it.
        f[22] -= 1;
        let sum = u32::from(u16::from_be_bytes([f[24], f[25]])) + 0x0100;
        let sum = (sum & 0xFFFF) + (sum >> 16);
        f[24..26].copy_from_slice(&(sum as u16).to_be_bytes());
        let _ = dev;
        Action::Queue(lane)
    }

    fn ipv6(&mut self, dev: usize, m: &mut Mbuf) -> Action {
        let f = m.data();
        if f.len() < 54 || f[14] >> 4 != 6 {
            return Action::Drop(NOT_IP);
        }
        let mut d = [0u8; 16];
        d.copy_from_slice(&f[38..54]);
        let dst = Ipv6Addr::from(d);
        // Neighbour discovery: ICMPv6 (next header 58) NS (135) / NA (136), hop limit 255.
        if f[20] == 58 && f[21] == 255 && f.len() >= 78 && (f[54] == 135 || f[54] == 136) {
            return self.ndp(dev, m);
        }
        if self.port_v6.contains(&Some(dst)) || dst.is_multicast() {
            return Action::Drop(LOCAL);
        }
        if f[21] <= 1 {
            return Action::Drop(TTL);
        }
        let Some((lane, hop)) = self.lookup(key(dst.into())) else {
            return Action::Drop(NO_ROUTE);
        };
        let Some(&mac) = self.neighbours.get(&hop) else {
            return Action::Drop(NO_ROUTE);
        };
        let src_mac = self.macs[lane];
        let f = m.data_mut();
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&src_mac);
        f[21] -= 1;
        Action::Queue(lane)
    }

    fn ndp(&mut self, dev: usize, m: &mut Mbuf) -> Action {
        let f = m.data();
        let mut s = [0u8; 16];
        s.copy_from_slice(&f[22..38]);
        let src = Ipv6Addr::from(s);
        let mut t = [0u8; 16];
        t.copy_from_slice(&f[62..78]);
        let target = Ipv6Addr::from(t);
        let ty = f[54];
        // Link-layer address option (type 1 source in NS, type 2 target in NA).
        if f.len() >= 86 && (f[78] == 1 || f[78] == 2) && f[79] == 1 {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&f[80..86]);
            let who = if ty == 135 { src } else { target };
            if !who.is_unspecified() {
                self.learn(key(who.into()), mac);
            }
        }
        let ours = self.port_v6.get(dev).copied().flatten();
        if ty != 135 || ours != Some(target) || src.is_unspecified() {
            return Action::Drop(LOCAL);
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
    let mut sum: u32 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    add(src);
    add(dst);
    add(&(body.len() as u32).to_be_bytes());
    add(&[0, 0, 0, 58]);
    add(body);
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

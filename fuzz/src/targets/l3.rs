//! The dataplane's L3 forwarding: routes, ARP and neighbour discovery.

use std::sync::OnceLock;

use tollgate_cca::Time;
use tollgate_dataplane::config::RouterConfig;
use tollgate_router::packet::ipv4_checksum;

use crate::l3::{Action, L3, MAX_NEIGHBOURS};
use crate::Input;

/// Two ports: a /8 with IPv4 and IPv6 (room for many spoofed senders) and
/// a /24 behind which a route with a static neighbour lies.
pub const CONFIG: &str = r#"
mode = "l3"
neighbour_timeout = "2s"
[[ports]]
device = "p0"
ipv4 = "10.0.0.1/8"
ipv6 = "fd00::1/64"
[[ports]]
device = "p1"
ipv4 = "192.168.1.1/24"
ipv6 = "fd01::1/64"
[[routes]]
prefix = "172.16.0.0/12"
port = "p1"
via = "192.168.1.2"
[[routes]]
prefix = "fd02::/48"
port = "p1"
via = "fd01::2"
[[neighbours]]
ip = "192.168.1.2"
mac = "02:00:00:00:00:02"
[[neighbours]]
ip = "fd01::2"
mac = "02:00:00:00:00:02"
"#;

/// The router's MACs, by device.
pub const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0xa0], [2, 0, 0, 0, 0, 0xa1]];

fn config() -> &'static RouterConfig {
    static CFG: OnceLock<RouterConfig> = OnceLock::new();
    CFG.get_or_init(|| RouterConfig::parse(CONFIG).expect("the L3 fuzz configuration"))
}

/// An ARP packet (`op` 1 request, 2 reply) from `sha`/`spa` for `tpa`.
pub fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&sha);
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa);
    f
}

/// A neighbour solicitation (`ty` 135) or advertisement (136) from `src`
/// to `dst` about `target`, with a link-layer address option for `mac`.
pub fn nd(ty: u8, mac: [u8; 6], src: [u8; 16], dst: [u8; 16], target: [u8; 16]) -> Vec<u8> {
    let mut f = vec![0x33, 0x33, 0xff, 0, 0, 1];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&0x86DDu16.to_be_bytes());
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[ty, 0, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&target);
    f.extend_from_slice(&[ty - 134, 1]);
    f.extend_from_slice(&mac);
    f
}

/// Whether `f` holds an IPv4 header whose checksum is right.
fn ipv4_checksum_ok(f: &[u8]) -> Option<bool> {
    if f.len() < 34 || u16::from_be_bytes([f[12], f[13]]) != 0x0800 {
        return None;
    }
    let ihl = usize::from(f[14] & 0xf) * 4;
    if ihl < 20 || f.len() < 14 + ihl {
        return None;
    }
    Some(ipv4_checksum(&f[14..14 + ihl]) == 0)
}

/// Frames from `data` into the L3 tables of a two-port router.
///
/// Operations: a raw frame on a port, an ARP request or reply or an ND
/// solicitation or advertisement with fuzzed sender, target and MAC, a
/// flood of ARP requests from distinct spoofed senders, time passing. The
/// learned-neighbour table must stay within [`MAX_NEIGHBOURS`], every
/// action must name a configured port, and a forwarded IPv4 frame whose
/// header checksum was right must still have a right one.
pub fn l3_neighbours(data: &[u8]) {
    let mut l3 = L3::new(config(), &MACS).expect("L3 tables");
    let mut input = Input::new(data);
    let mut now = 0u64;
    let mut frame: Vec<u8>;
    while !input.is_empty() {
        let op = input.u8();
        let dev = usize::from(op >> 7);
        match op % 6 {
            0 => {
                let len = usize::from(input.u16() % 1600);
                frame = input.bytes(len).to_vec();
            }
            1 | 2 => {
                let mut sha = [0u8; 6];
                sha.copy_from_slice(&padded(input.bytes(6))[..6]);
                let spa: [u8; 4] = padded(input.bytes(4))[..4].try_into().unwrap();
                let tpa: [u8; 4] = padded(input.bytes(4))[..4].try_into().unwrap();
                frame = arp(u16::from(op % 6), sha, spa, tpa);
            }
            3 => {
                let ty = 135 + (op >> 3 & 1);
                let mut mac = [0u8; 6];
                mac.copy_from_slice(&padded(input.bytes(6))[..6]);
                let host = padded(input.bytes(8));
                let mut src = [0u8; 16];
                src[0] = 0xfd;
                src[1] = dev as u8;
                src[8..].copy_from_slice(&host[..8]);
                let ours = [0xfd, dev as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
                let (dst, target) = if ty == 135 { (ours, ours) } else { (ours, src) };
                frame = nd(ty, mac, src, dst, target);
                let cut = usize::from(input.u8());
                if op & 0x40 != 0 && cut < frame.len() {
                    frame.truncate(cut);
                }
            }
            4 => {
                // A flood of requests from distinct senders of port 0's /8.
                let n = usize::from(input.u16() % 6000);
                let base = input.u32();
                for i in 0..n as u32 {
                    let host = (base.wrapping_add(i) & 0x00ff_ffff).to_be_bytes();
                    let f = arp(
                        1,
                        [2, 0, host[1], host[2], host[3], 7],
                        [10, host[1], host[2], host[3]],
                        [10, 0, 0, 1],
                    );
                    let mut f = f;
                    let a = l3.forward(0, &mut f, Time::from_nanos(now));
                    assert!(matches!(a, Action::Bypass(0) | Action::Drop(_)), "{a:?}");
                }
                check(&l3);
                continue;
            }
            _ => {
                now = now.saturating_add(u64::from(input.u16()) << (op >> 3 & 31));
                continue;
            }
        }
        let before = ipv4_checksum_ok(&frame);
        let action = l3.forward(dev, &mut frame, Time::from_nanos(now));
        match action {
            Action::Queue(lane) => {
                assert!(lane < MACS.len());
                assert_eq!(
                    &frame[6..12],
                    &MACS[lane],
                    "source MAC rewritten to the egress port's"
                );
                if before == Some(true) {
                    assert_eq!(
                        ipv4_checksum_ok(&frame),
                        Some(true),
                        "checksum after TTL decrement"
                    );
                }
            }
            Action::Bypass(lane) => {
                assert_eq!(
                    lane, dev,
                    "answers leave by the port the request came in on"
                );
                assert_eq!(&frame[6..12], &MACS[dev]);
            }
            Action::Drop(reason) => assert!(reason < 4),
        }
        check(&l3);
    }
}

fn check(l3: &L3) {
    let s = l3.neighbour_stats();
    assert!(s.learned as usize <= MAX_NEIGHBOURS, "{}", s.line());
    assert_eq!(s.statics, 2);
}

/// `b` padded with zeros to 16 bytes.
fn padded(b: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..b.len().min(16)].copy_from_slice(&b[..b.len().min(16)]);
    out
}

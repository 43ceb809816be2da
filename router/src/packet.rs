//! Packet view: Ethernet / 802.1Q / IPv4 / IPv6 / UDP / TCP parsing into a
//! flow key, DSCP, ECN and lengths.
//!
//! The parser reads only through bounds-checked slice accessors and returns a
//! [`ParseError`] for anything it cannot classify, so it never panics and never
//! reads outside the frame. Layout per RFC 791 (IPv4), RFC 8200 (IPv6 and its
//! extension headers), RFC 768 (UDP), RFC 9293 (TCP), IEEE 802.1Q (VLAN tags,
//! up to two, TPID 0x8100 or 0x88A8) and RFC 3168 (the ECN field).
//!
//! Classes of frames that are not a parseable IP packet:
//! - [`ParseError::NotIp`]: the EtherType is not IPv4 / IPv6 (ARP, LLDP...);
//! - [`ParseError::Fragment`]: an IPv4 fragment (MF set or offset != 0) or an
//!   IPv6 packet with a Fragment header; its ports are not reliably present;
//! - [`ParseError::Truncated`]: the frame ends before a header or before the
//!   length the IP header announces;
//! - [`ParseError::Malformed`]: a header field is impossible (IHL < 5, TCP
//!   data offset < 5, UDP length < 8, IP version mismatch, too many IPv6
//!   extension headers).
//!
//! [`ParseStats`] counts every outcome. [`set_ce_in_frame`] rewrites the ECN
//! field to CE in place (with the RFC 1624 incremental IPv4 checksum update).
//!
//! Checksums, defined once here for the library and the dataplane:
//! [`internet_checksum`] / [`ipv4_checksum`] compute one from scratch
//! (RFC 1071), [`checksum_adjust`] updates one after a 16-bit word changed
//! (RFC 1624).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The ECN field of the IP header (RFC 3168).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// `00`: the transport is not ECN-capable.
    #[default]
    NotEct,
    /// `10`: ECN-capable transport, codepoint ECT(0).
    Ect0,
    /// `01`: ECN-capable transport, codepoint ECT(1).
    Ect1,
    /// `11`: congestion experienced.
    Ce,
}

impl Ecn {
    /// The codepoint from the two low bits of the traffic-class byte.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b10 => Ecn::Ect0,
            0b01 => Ecn::Ect1,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit codepoint.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect0 => 0b10,
            Ecn::Ect1 => 0b01,
            Ecn::Ce => 0b11,
        }
    }

    /// Whether a router may mark this packet instead of dropping it
    /// (ECT(0), ECT(1), or already CE).
    pub const fn is_capable(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }
}

/// A transport 5-tuple. IPv4 addresses are stored IPv4-mapped
/// (`::ffff:a.b.c.d`) so both families share one representation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address (IPv6, or IPv4-mapped).
    pub src: [u8; 16],
    /// Destination address (IPv6, or IPv4-mapped).
    pub dst: [u8; 16],
    /// Source port (0 for protocols without ports).
    pub src_port: u16,
    /// Destination port (0 for protocols without ports).
    pub dst_port: u16,
    /// IP protocol number (the final IPv6 next-header value).
    pub proto: u8,
}

impl FlowKey {
    /// A key from `std` addresses.
    pub fn new(src: IpAddr, dst: IpAddr, proto: u8, src_port: u16, dst_port: u16) -> FlowKey {
        FlowKey {
            src: to_mapped(src),
            dst: to_mapped(dst),
            src_port,
            dst_port,
            proto,
        }
    }

    /// The source address (IPv4 for mapped addresses).
    pub fn src_ip(&self) -> IpAddr {
        Ipv6Addr::from(self.src).to_canonical()
    }

    /// The destination address (IPv4 for mapped addresses).
    pub fn dst_ip(&self) -> IpAddr {
        Ipv6Addr::from(self.dst).to_canonical()
    }
}

fn to_mapped(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// IP version of a parsed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// What the parser extracted from one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// The 5-tuple.
    pub flow: FlowKey,
    /// IP version.
    pub version: IpVersion,
    /// DSCP (the six high bits of the TOS / traffic-class byte).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// The outer VLAN id, if the frame is tagged.
    pub vlan: Option<u16>,
    /// Offset of the IP header in the frame.
    pub l3_offset: u16,
    /// Offset of the transport header in the frame.
    pub l4_offset: u16,
    /// Whole frame length as received (including Ethernet padding).
    pub frame_len: u32,
    /// IP datagram length (IPv4 total length; IPv6 40 + payload length).
    pub ip_len: u32,
    /// Transport payload length (after the UDP / TCP header), 0 otherwise.
    pub payload_len: u32,
    /// TCP flags byte (FIN = 0x01, SYN = 0x02, RST = 0x04...), 0 for non-TCP.
    pub tcp_flags: u8,
}

impl PacketInfo {
    /// TCP FIN or RST: the flow is ending.
    #[inline]
    pub fn is_flow_end(&self) -> bool {
        self.flow.proto == PROTO_TCP && self.tcp_flags & 0x05 != 0
    }
}

/// Why a frame was not parsed into a [`PacketInfo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// The frame ends before a header (or before the announced IP length).
    Truncated,
    /// Not IPv4 or IPv6: carries the EtherType.
    NotIp(u16),
    /// An IP fragment.
    Fragment,
    /// An impossible header field; the text names it.
    Malformed(&'static str),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Truncated => f.write_str("truncated frame"),
            ParseError::NotIp(t) => write!(f, "not IP (EtherType {t:#06x})"),
            ParseError::Fragment => f.write_str("IP fragment"),
            ParseError::Malformed(what) => write!(f, "malformed: {what}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Counters of parse outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseStats {
    /// Parsed IP packets.
    pub ok: u64,
    /// [`ParseError::Truncated`] frames.
    pub truncated: u64,
    /// [`ParseError::NotIp`] frames.
    pub not_ip: u64,
    /// [`ParseError::Fragment`] frames.
    pub fragment: u64,
    /// [`ParseError::Malformed`] frames.
    pub malformed: u64,
}

impl ParseStats {
    /// Count one outcome.
    pub fn record(&mut self, result: &Result<PacketInfo, ParseError>) {
        match result {
            Ok(_) => self.ok += 1,
            Err(ParseError::Truncated) => self.truncated += 1,
            Err(ParseError::NotIp(_)) => self.not_ip += 1,
            Err(ParseError::Fragment) => self.fragment += 1,
            Err(ParseError::Malformed(_)) => self.malformed += 1,
        }
    }

    /// All frames seen.
    pub fn total(&self) -> u64 {
        self.ok + self.truncated + self.not_ip + self.fragment + self.malformed
    }
}

const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88A8;
/// At most this many IPv6 extension headers are skipped before giving up.
const MAX_IPV6_EXT: usize = 8;

#[inline]
fn u8_at(b: &[u8], i: usize) -> Result<u8, ParseError> {
    b.get(i).copied().ok_or(ParseError::Truncated)
}

#[inline]
fn u16_at(b: &[u8], i: usize) -> Result<u16, ParseError> {
    match b.get(i..i.wrapping_add(2)) {
        Some(s) => Ok(u16::from_be_bytes([s[0], s[1]])),
        None => Err(ParseError::Truncated),
    }
}

#[inline]
fn array_at<const N: usize>(b: &[u8], i: usize) -> Result<[u8; N], ParseError> {
    b.get(i..i.wrapping_add(N))
        .and_then(|s| s.try_into().ok())
        .ok_or(ParseError::Truncated)
}

/// Parse an Ethernet frame (no FCS) into a [`PacketInfo`].
///
/// The common case, an untagged IPv4 (no options) or IPv6 (no extension
/// headers) packet carrying a well-formed UDP or TCP header, takes an inlined
/// fast path ([`parse_fast`]) with one length check up front; everything else
/// (VLAN tags, options, extension headers, fragments, errors) goes through
/// the general parser, which gives the same result for the common case.
#[inline]
pub fn parse_ethernet(frame: &[u8]) -> Result<PacketInfo, ParseError> {
    match parse_fast(frame) {
        Some(info) => Ok(info),
        None => parse_ethernet_general(frame),
    }
}

/// The IPv4-mapped form of an IPv4 address (`::ffff:a.b.c.d`).
#[inline(always)]
fn mapped4(a: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a[0], a[1], a[2], a[3],
    ]
}

/// Fill the transport fields of the fast path; `None` sends the frame to
/// the general parser. `b` ends at the end of the datagram, `off` is the
/// L4 offset.
#[inline(always)]
fn l4_fast(b: &[u8], off: usize, proto: u8, info: &mut PacketInfo) -> Option<()> {
    let remaining = b.len().checked_sub(off)?;
    info.l4_offset = off as u16;
    match proto {
        PROTO_UDP if remaining >= 8 => {
            let h: [u8; 8] = b.get(off..off + 8)?.try_into().ok()?;
            let ulen = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if ulen < 8 || ulen > remaining {
                return None;
            }
            info.flow.src_port = u16::from_be_bytes([h[0], h[1]]);
            info.flow.dst_port = u16::from_be_bytes([h[2], h[3]]);
            info.payload_len = (ulen - 8) as u32;
        }
        PROTO_TCP if remaining >= 20 => {
            let h: [u8; 14] = b.get(off..off + 14)?.try_into().ok()?;
            let doff = usize::from(h[12] >> 4) * 4;
            if doff < 20 || doff > remaining {
                return None;
            }
            info.flow.src_port = u16::from_be_bytes([h[0], h[1]]);
            info.flow.dst_port = u16::from_be_bytes([h[2], h[3]]);
            info.tcp_flags = h[13];
            info.payload_len = (remaining - doff) as u32;
        }
        _ => return None,
    }
    Some(())
}

/// The fast path of [`parse_ethernet`]: untagged IPv4 with a 20-byte header
/// or IPv6 without extension headers, over UDP or TCP, not fragmented and
/// well formed. `None` for anything else (the general parser decides).
#[inline]
pub fn parse_fast(frame: &[u8]) -> Option<PacketInfo> {
    if frame.len() < 14 + 20 + 8 || frame.len() > u32::MAX as usize {
        return None;
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        ETH_P_IPV4 => {
            let h: [u8; 20] = frame.get(14..34)?.try_into().ok()?;
            if h[0] != 0x45 {
                return None;
            }
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            if total < 20 || frame.len() < 14 + total {
                return None;
            }
            if u16::from_be_bytes([h[6], h[7]]) & 0x3FFF != 0 {
                return None;
            }
            let mut info = PacketInfo {
                flow: FlowKey {
                    src: mapped4([h[12], h[13], h[14], h[15]]),
                    dst: mapped4([h[16], h[17], h[18], h[19]]),
                    src_port: 0,
                    dst_port: 0,
                    proto: h[9],
                },
                version: IpVersion::V4,
                dscp: h[1] >> 2,
                ecn: Ecn::from_bits(h[1]),
                vlan: None,
                l3_offset: 14,
                l4_offset: 0,
                frame_len: frame.len() as u32,
                ip_len: total as u32,
                payload_len: 0,
                tcp_flags: 0,
            };
            l4_fast(&frame[..14 + total], 34, h[9], &mut info)?;
            Some(info)
        }
        ETH_P_IPV6 => {
            let h: [u8; 40] = frame.get(14..54)?.try_into().ok()?;
            if h[0] >> 4 != 6 {
                return None;
            }
            let total = 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
            if frame.len() < 14 + total {
                return None;
            }
            let tc = ((u16::from_be_bytes([h[0], h[1]]) >> 4) & 0xFF) as u8;
            let mut src = [0u8; 16];
            src.copy_from_slice(&h[8..24]);
            let mut dst = [0u8; 16];
            dst.copy_from_slice(&h[24..40]);
            let mut info = PacketInfo {
                flow: FlowKey {
                    src,
                    dst,
                    src_port: 0,
                    dst_port: 0,
                    proto: h[6],
                },
                version: IpVersion::V6,
                dscp: tc >> 2,
                ecn: Ecn::from_bits(tc),
                vlan: None,
                l3_offset: 14,
                l4_offset: 0,
                frame_len: frame.len() as u32,
                ip_len: total as u32,
                payload_len: 0,
                tcp_flags: 0,
            };
            l4_fast(&frame[..14 + total], 54, h[6], &mut info)?;
            Some(info)
        }
        _ => None,
    }
}

/// The headers of an untagged IPv4 (20-byte header, not fragmented) UDP or
/// TCP frame, as [`parse_fast_v4`] reads them: the fields a queueing
/// dataplane needs, without building a [`PacketInfo`] (no IPv4-mapped
/// addresses, no lengths it does not use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V4Headers {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// [`PROTO_UDP`] or [`PROTO_TCP`].
    pub proto: u8,
    /// The TOS byte (DSCP and ECN).
    pub tos: u8,
    /// TCP flags (0 for UDP).
    pub tcp_flags: u8,
}

impl V4Headers {
    /// TCP FIN or RST (as [`PacketInfo::is_flow_end`]).
    #[inline]
    pub fn is_flow_end(&self) -> bool {
        self.proto == PROTO_TCP && self.tcp_flags & 0x05 != 0
    }
}

/// The most common frame at line rate, read with one length check and no
/// [`PacketInfo`]: untagged IPv4 with a 20-byte header, not fragmented,
/// carrying a well-formed UDP or TCP header. Accepts exactly the frames of
/// that shape that [`parse_ethernet`] accepts, with the same fields (a test
/// checks it on mutated frames); `None` for everything else.
#[inline(always)]
pub fn parse_fast_v4(frame: &[u8]) -> Option<V4Headers> {
    let h: &[u8; 34] = frame.get(..34)?.try_into().ok()?;
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || h[20] & 0x3F != 0 || h[21] != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
    // The datagram ends at 14 + total; it must hold the IP header.
    let dgram = frame.get(..14 + total)?;
    let remaining = total.checked_sub(20)?;
    let l4 = dgram.get(34..)?;
    let proto = h[23];
    let tcp_flags = match proto {
        PROTO_UDP => {
            let u: &[u8; 8] = l4.get(..8)?.try_into().ok()?;
            let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if ulen < 8 || ulen > remaining {
                return None;
            }
            0
        }
        PROTO_TCP => {
            let t: &[u8; 20] = l4.get(..20)?.try_into().ok()?;
            let doff = usize::from(t[12] >> 4) * 4;
            if doff < 20 || doff > remaining {
                return None;
            }
            t[13]
        }
        _ => return None,
    };
    Some(V4Headers {
        src: [h[26], h[27], h[28], h[29]],
        dst: [h[30], h[31], h[32], h[33]],
        src_port: u16::from_be_bytes([l4[0], l4[1]]),
        dst_port: u16::from_be_bytes([l4[2], l4[3]]),
        proto,
        tos: h[15],
        tcp_flags,
    })
}

/// The general parser behind [`parse_ethernet`] (VLAN tags, IPv4 options,
/// IPv6 extension headers, every error class).
#[inline(never)]
pub fn parse_ethernet_general(frame: &[u8]) -> Result<PacketInfo, ParseError> {
    let mut off = 12;
    let mut ethertype = u16_at(frame, off)?;
    let mut vlan = None;
    for _ in 0..2 {
        if ethertype != ETH_P_8021Q && ethertype != ETH_P_8021AD {
            break;
        }
        let tci = u16_at(frame, off + 2)?;
        vlan.get_or_insert(tci & 0x0FFF);
        off += 4;
        ethertype = u16_at(frame, off)?;
    }
    let l3 = off + 2;
    let mut info = match ethertype {
        ETH_P_IPV4 => parse_ipv4(frame, l3)?,
        ETH_P_IPV6 => parse_ipv6(frame, l3)?,
        other => return Err(ParseError::NotIp(other)),
    };
    info.vlan = vlan;
    Ok(info)
}

/// Parse a frame that starts directly with an IPv4 or IPv6 header.
pub fn parse_ip(packet: &[u8]) -> Result<PacketInfo, ParseError> {
    match u8_at(packet, 0)? >> 4 {
        4 => parse_ipv4(packet, 0),
        6 => parse_ipv6(packet, 0),
        _ => Err(ParseError::Malformed("IP version")),
    }
}

fn empty_info(version: IpVersion, l3: usize, frame_len: usize) -> PacketInfo {
    PacketInfo {
        flow: FlowKey::default(),
        version,
        dscp: 0,
        ecn: Ecn::NotEct,
        vlan: None,
        l3_offset: l3.min(u16::MAX as usize) as u16,
        l4_offset: 0,
        frame_len: frame_len.min(u32::MAX as usize) as u32,
        ip_len: 0,
        payload_len: 0,
        tcp_flags: 0,
    }
}

fn parse_ipv4(b: &[u8], l3: usize) -> Result<PacketInfo, ParseError> {
    let vihl = u8_at(b, l3)?;
    if vihl >> 4 != 4 {
        return Err(ParseError::Malformed("IPv4 version"));
    }
    let ihl = usize::from(vihl & 0x0F) * 4;
    if ihl < 20 {
        return Err(ParseError::Malformed("IPv4 header length < 20"));
    }
    let tos = u8_at(b, l3 + 1)?;
    let total = usize::from(u16_at(b, l3 + 2)?);
    if total < ihl {
        return Err(ParseError::Malformed("IPv4 total length < header length"));
    }
    // The whole header (with options) and the announced datagram must be present.
    if b.len() < l3 + total || b.len() < l3 + ihl {
        return Err(ParseError::Truncated);
    }
    let frag = u16_at(b, l3 + 6)?;
    if frag & 0x3FFF != 0 {
        return Err(ParseError::Fragment);
    }
    let proto = u8_at(b, l3 + 9)?;
    let src = Ipv4Addr::from(array_at::<4>(b, l3 + 12)?);
    let dst = Ipv4Addr::from(array_at::<4>(b, l3 + 16)?);
    let mut info = empty_info(IpVersion::V4, l3, b.len());
    info.dscp = tos >> 2;
    info.ecn = Ecn::from_bits(tos);
    info.ip_len = total as u32;
    info.flow = FlowKey::new(src.into(), dst.into(), proto, 0, 0);
    // The transport header must lie inside the datagram, not in padding.
    parse_l4(&b[..l3 + total], l3 + ihl, proto, &mut info)?;
    Ok(info)
}

fn parse_ipv6(b: &[u8], l3: usize) -> Result<PacketInfo, ParseError> {
    let first = u8_at(b, l3)?;
    if first >> 4 != 6 {
        return Err(ParseError::Malformed("IPv6 version"));
    }
    let tc = ((u16_at(b, l3)? >> 4) & 0xFF) as u8;
    let payload = usize::from(u16_at(b, l3 + 4)?);
    let total = 40 + payload;
    if b.len() < l3 + total {
        return Err(ParseError::Truncated);
    }
    let frame_len = b.len();
    let b = &b[..l3 + total];
    let mut next = u8_at(b, l3 + 6)?;
    let src = Ipv6Addr::from(array_at::<16>(b, l3 + 8)?);
    let dst = Ipv6Addr::from(array_at::<16>(b, l3 + 24)?);
    let mut off = l3 + 40;
    let mut skipped = 0;
    loop {
        let len = match next {
            // Hop-by-hop, Routing, Destination options, Mobility, HIP, Shim6:
            // length in 8-octet units, not counting the first 8.
            0 | 43 | 60 | 135 | 139 | 140 => (usize::from(u8_at(b, off + 1)?) + 1) * 8,
            44 => return Err(ParseError::Fragment),
            // Authentication header: length in 4-octet units, not counting the first 2.
            51 => (usize::from(u8_at(b, off + 1)?) + 2) * 4,
            _ => break,
        };
        skipped += 1;
        if skipped > MAX_IPV6_EXT {
            return Err(ParseError::Malformed("too many IPv6 extension headers"));
        }
        next = u8_at(b, off)?;
        off += len;
        if off > b.len() {
            return Err(ParseError::Truncated);
        }
    }
    let mut info = empty_info(IpVersion::V6, l3, frame_len);
    info.dscp = tc >> 2;
    info.ecn = Ecn::from_bits(tc);
    info.ip_len = total as u32;
    info.flow = FlowKey::new(src.into(), dst.into(), next, 0, 0);
    parse_l4(b, off, next, &mut info)?;
    Ok(info)
}

/// Fill ports, flags and lengths from the transport header at `off`; `b` ends
/// at the end of the IP datagram.
fn parse_l4(b: &[u8], off: usize, proto: u8, info: &mut PacketInfo) -> Result<(), ParseError> {
    info.l4_offset = off.min(u16::MAX as usize) as u16;
    let remaining = b.len().saturating_sub(off);
    match proto {
        PROTO_UDP => {
            info.flow.src_port = u16_at(b, off)?;
            info.flow.dst_port = u16_at(b, off + 2)?;
            let ulen = usize::from(u16_at(b, off + 4)?);
            if ulen < 8 {
                return Err(ParseError::Malformed("UDP length < 8"));
            }
            if ulen > remaining {
                return Err(ParseError::Truncated);
            }
            info.payload_len = (ulen - 8) as u32;
        }
        PROTO_TCP => {
            info.flow.src_port = u16_at(b, off)?;
            info.flow.dst_port = u16_at(b, off + 2)?;
            let doff = usize::from(u8_at(b, off + 12)? >> 4) * 4;
            if doff < 20 {
                return Err(ParseError::Malformed("TCP data offset < 5"));
            }
            if doff > remaining {
                return Err(ParseError::Truncated);
            }
            info.tcp_flags = u8_at(b, off + 13)?;
            info.payload_len = (remaining - doff) as u32;
        }
        _ => info.payload_len = remaining as u32,
    }
    Ok(())
}

/// Set the ECN field of the IP header at `info.l3_offset` to CE in place,
/// updating the IPv4 header checksum incrementally (RFC 1624, eqn. 3).
/// Returns `false` (and changes nothing) if the packet is not ECN-capable or
/// the frame is shorter than the header.
pub fn set_ce_in_frame(frame: &mut [u8], info: &PacketInfo) -> bool {
    if !info.ecn.is_capable() {
        return false;
    }
    set_ce_at(frame, info.version, usize::from(info.l3_offset))
}

/// Set the ECN field of the IP header of `version` at offset `l3` to CE in
/// place (IPv4: with the incremental checksum update), without re-parsing:
/// for handles that kept the header offset from their classification. The
/// caller checks ECN capability. Returns `false` (and changes nothing) if the
/// frame is shorter than the header.
pub fn set_ce_at(frame: &mut [u8], version: IpVersion, l3: usize) -> bool {
    match version {
        IpVersion::V4 => {
            if frame.len() < l3 + 20 {
                return false;
            }
            let old_word = u16::from_be_bytes([frame[l3], frame[l3 + 1]]);
            frame[l3 + 1] |= 0b11;
            let new_word = u16::from_be_bytes([frame[l3], frame[l3 + 1]]);
            let old_sum = u16::from_be_bytes([frame[l3 + 10], frame[l3 + 11]]);
            let new_sum = checksum_adjust(old_sum, old_word, new_word);
            frame[l3 + 10..l3 + 12].copy_from_slice(&new_sum.to_be_bytes());
            true
        }
        IpVersion::V6 => {
            if frame.len() < l3 + 2 {
                return false;
            }
            // Traffic class spans the low nibble of byte 0 and the high nibble of byte 1;
            // the ECN bits are bits 4-5 of byte 1.
            frame[l3 + 1] |= 0b0011_0000;
            true
        }
    }
}

/// Fold a 32-bit one's-complement accumulator to 16 bits (end-around carry).
#[inline]
fn fold(mut sum: u32) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// The Internet checksum (RFC 1071): the one's complement of the one's
/// complement sum of the 16-bit big-endian words of `parts`, read as one
/// byte string. Every part but the last must have an even length (as the
/// pseudo-header pieces of TCP, UDP and ICMPv6 do); an odd last byte is
/// padded with zero. Verifying: the checksum over data that includes a
/// correct checksum field is 0.
pub fn internet_checksum<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        for pair in part.chunks(2) {
            sum += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
            // Fold early: headers are short, but `parts` may not be.
            if sum >= 0x8000_0000 {
                sum = u32::from(fold(sum));
            }
        }
    }
    !fold(sum)
}

/// IPv4 header checksum (RFC 1071) over `header` (its checksum field zero
/// to compute one, as received to verify: 0 means valid).
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    internet_checksum([header])
}

/// The checksum after one 16-bit word of the covered data changed from
/// `old_word` to `new_word`, without reading the rest: RFC 1624 eqn. 3,
/// `HC' = ~(~HC + ~m + m')`. Used for the ECN rewrite ([`set_ce_in_frame`])
/// and the dataplane's TTL decrement; it gives exactly what
/// [`ipv4_checksum`] over the changed header gives.
#[inline]
pub fn checksum_adjust(old_sum: u16, old_word: u16, new_word: u16) -> u16 {
    !fold(u32::from(!old_sum) + u32::from(!old_word) + u32::from(new_word))
}

/// Frame builders used by tests, benches and the emulator's synthetic traffic.
pub mod build {
    use super::*;

    /// The IPv4 header checksum the builders use ([`super::ipv4_checksum`],
    /// re-exported under its old path).
    pub use super::ipv4_checksum;

    /// An Ethernet + IPv4 + UDP frame with `payload` bytes of zeros.
    pub fn udp4(key: &FlowKey, tos: u8, payload: usize) -> Vec<u8> {
        let src = match key.src_ip() {
            IpAddr::V4(a) => a.octets(),
            IpAddr::V6(_) => [0; 4],
        };
        let dst = match key.dst_ip() {
            IpAddr::V4(a) => a.octets(),
            IpAddr::V6(_) => [0; 4],
        };
        let total = 20 + 8 + payload;
        let mut f = Vec::with_capacity(14 + total);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00]);
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = PROTO_UDP;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let ck = ipv4_checksum(&ip);
        ip[10..12].copy_from_slice(&ck.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&key.src_port.to_be_bytes());
        f.extend_from_slice(&key.dst_port.to_be_bytes());
        f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.resize(14 + total, 0);
        f
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    fn key4() -> FlowKey {
        FlowKey::new(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            PROTO_UDP,
            1234,
            443,
        )
    }

    #[test]
    fn ipv4_udp_fields_and_vlan() {
        let f = udp4(&key4(), (2 << 2) | 0b10, 100);
        let info = parse_ethernet(&f).unwrap();
        assert_eq!(info.flow, key4());
        assert_eq!(info.dscp, 2);
        assert_eq!(info.ecn, Ecn::Ect0);
        assert_eq!(info.ip_len, 128);
        assert_eq!(info.payload_len, 100);
        assert_eq!(info.vlan, None);
        // Insert an 802.1Q tag with VLAN 42.
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 42]);
        tagged.extend_from_slice(&f[12..]);
        let t = parse_ethernet(&tagged).unwrap();
        assert_eq!(t.vlan, Some(42));
        assert_eq!(t.flow, key4());
        assert_eq!(t.l3_offset, 18);
    }

    #[test]
    fn ipv4_options_fragments_and_truncation() {
        let f = udp4(&key4(), 0, 10);
        // Rebuild with 8 bytes of options (IHL 7).
        let mut o = f[..14].to_vec();
        let mut ip = f[14..34].to_vec();
        ip[0] = 0x47;
        let total = u16::from_be_bytes([ip[2], ip[3]]) + 8;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&[1, 1, 1, 1, 1, 1, 1, 0]);
        o.extend_from_slice(&ip);
        o.extend_from_slice(&f[34..]);
        let info = parse_ethernet(&o).unwrap();
        assert_eq!(info.flow, key4());
        assert_eq!(info.l4_offset, 14 + 28);
        let mut frag = f.clone();
        frag[14 + 6] = 0x20; // MF
        assert_eq!(parse_ethernet(&frag), Err(ParseError::Fragment));
        assert_eq!(
            parse_ethernet(&f[..f.len() - 1]),
            Err(ParseError::Truncated)
        );
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse_ethernet(&arp), Err(ParseError::NotIp(0x0806)));
        let mut bad = f.clone();
        bad[14] = 0x44;
        assert!(matches!(
            parse_ethernet(&bad),
            Err(ParseError::Malformed(_))
        ));
        // Ethernet padding after the datagram is fine.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 20]);
        assert_eq!(parse_ethernet(&padded).unwrap().flow, key4());
    }

    fn ipv6_tcp(ext: &[u8], first_next: u8) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x86, 0xDD];
        let tcp_len = 20 + 5;
        let payload = ext.len() + tcp_len;
        // version 6, traffic class 0x0A (DSCP 2, ECT(0))
        f.extend_from_slice(&[0x60, 0xA0, 0, 0]);
        f.extend_from_slice(&(payload as u16).to_be_bytes());
        f.extend_from_slice(&[first_next, 64]);
        f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(ext);
        let mut tcp = [0u8; 20];
        tcp[0..2].copy_from_slice(&5000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x11; // FIN|ACK
        f.extend_from_slice(&tcp);
        f.extend_from_slice(&[9; 5]);
        f
    }

    #[test]
    fn ipv6_extension_headers_are_skipped() {
        // Hop-by-hop (8 bytes) -> destination options (16 bytes) -> TCP.
        let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[PROTO_TCP, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let f = ipv6_tcp(&ext, 0);
        let info = parse_ethernet(&f).unwrap();
        assert_eq!(info.flow.proto, PROTO_TCP);
        assert_eq!((info.flow.src_port, info.flow.dst_port), (5000, 80));
        assert_eq!(info.dscp, 2);
        assert_eq!(info.ecn, Ecn::Ect0);
        assert_eq!(info.payload_len, 5);
        assert!(info.is_flow_end());
        assert_eq!(info.flow.src_ip().to_string(), "2001:db8::1");
        // A fragment header is classified as a fragment.
        let frag = ipv6_tcp(&[PROTO_TCP, 0, 0, 0, 0, 0, 0, 1], 44);
        assert_eq!(parse_ethernet(&frag), Err(ParseError::Fragment));
        // An extension header whose length runs past the packet is truncated.
        let bad = ipv6_tcp(&[PROTO_TCP, 200, 0, 0, 0, 0, 0, 0], 0);
        assert_eq!(parse_ethernet(&bad), Err(ParseError::Truncated));
    }

    #[test]
    fn checksum_adjust_matches_a_full_recompute_over_random_headers() {
        // xorshift64*: deterministic, no dependency.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        for case in 0..100_000 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                *b = next() as u8;
            }
            h[0] = 0x45;
            if case % 7 == 0 {
                // Extremes: words of all ones and of zeros.
                h[2..10].copy_from_slice(&[0xFF; 8]);
                h[12..20].copy_from_slice(&[0; 8]);
            }
            h[10..12].copy_from_slice(&[0, 0]);
            let ck = ipv4_checksum(&h);
            h[10..12].copy_from_slice(&ck.to_be_bytes());
            assert_eq!(ipv4_checksum(&h), 0);
            // Change one word other than the checksum: a TTL decrement, or
            // any random new value.
            let w = [0usize, 1, 2, 3, 4, 6, 7, 8, 9][(next() % 9) as usize] * 2;
            let old_word = u16::from_be_bytes([h[w], h[w + 1]]);
            let new_word = if w == 8 && h[8] > 0 && case % 2 == 0 {
                old_word - 0x0100
            } else {
                next() as u16
            };
            h[w..w + 2].copy_from_slice(&new_word.to_be_bytes());
            let incremental = checksum_adjust(ck, old_word, new_word);
            h[10..12].copy_from_slice(&[0, 0]);
            let full = ipv4_checksum(&h);
            assert_eq!(incremental, full, "case {case}: header {h:02x?}, word {w}");
        }
    }

    #[test]
    fn internet_checksum_reads_parts_as_one_string() {
        let data: Vec<u8> = (0u8..=200).collect();
        let whole = internet_checksum([&data[..]]);
        assert_eq!(
            internet_checksum([&data[..64], &data[64..100], &data[100..]]),
            whole
        );
        // RFC 1071 section 3 example words 0001 f203 f4f5 f6f7: sum ddf2.
        assert_eq!(
            internet_checksum([&[0x00u8, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7][..]]),
            !0xddf2
        );
    }

    #[test]
    fn set_ce_keeps_ipv4_checksum_valid() {
        let mut f = udp4(&key4(), 0b01, 30);
        let info = parse_ethernet(&f).unwrap();
        assert!(set_ce_in_frame(&mut f, &info));
        assert_eq!(parse_ethernet(&f).unwrap().ecn, Ecn::Ce);
        assert_eq!(
            ipv4_checksum(&f[14..34]),
            0,
            "checksum over header must verify"
        );
        let mut n = udp4(&key4(), 0, 30);
        let ni = parse_ethernet(&n).unwrap();
        assert!(!set_ce_in_frame(&mut n, &ni));
        let mut v6 = ipv6_tcp(&[], PROTO_TCP);
        let i6 = parse_ethernet(&v6).unwrap();
        assert!(set_ce_in_frame(&mut v6, &i6));
        let after = parse_ethernet(&v6).unwrap();
        assert_eq!((after.ecn, after.dscp), (Ecn::Ce, 2));
    }

    #[test]
    fn fast_path_agrees_with_the_general_parser() {
        // Valid frames of every fast-path shape, then random byte and length
        // mutations of them: whenever the fast path answers, the general
        // parser must give exactly the same PacketInfo.
        let mut bases = vec![
            udp4(&key4(), 0b10, 0),
            udp4(&key4(), (5 << 2) | 0b01, 100),
            ipv6_tcp(&[], PROTO_TCP),
        ];
        bases.push(tcp4(0x12));
        let mut u6 = ipv6_tcp(&[], PROTO_UDP);
        let ulen = (u6.len() - 54) as u16;
        u6[58..60].copy_from_slice(&ulen.to_be_bytes());
        bases.push(u6);
        let (mut fast, mut total) = (0, 0);
        for b in &bases {
            assert!(parse_fast(b).is_some(), "base frame not on the fast path");
            assert_eq!(parse_fast(b).map(Ok), Some(parse_ethernet_general(b)));
        }
        for_each_mutation(&bases, 0x1234_5678_9ABC_DEF1, 70, |f| {
            total += 1;
            if let Some(info) = parse_fast(f) {
                fast += 1;
                assert_eq!(Ok(info), parse_ethernet_general(f), "frame {f:02x?}");
            }
            assert_eq!(parse_ethernet(f), parse_ethernet_general(f));
        });
        assert!(fast > total / 4, "fast path taken {fast} of {total}");
    }

    #[test]
    fn v4_fast_path_agrees_with_the_general_parser() {
        // parse_fast_v4 must accept only frames the general parser accepts,
        // with the same fields, on valid frames and random mutations.
        let bases = vec![
            udp4(&key4(), 0b10, 0),
            udp4(&key4(), (5 << 2) | 0b01, 100),
            tcp4(0x11),
        ];
        let (mut fast, mut total) = (0, 0);
        for_each_mutation(&bases, 0x0DDB_1A5E_5BAD_5EED, 60, |f| {
            total += 1;
            let general = parse_ethernet_general(f);
            if let Some(h) = parse_fast_v4(f) {
                fast += 1;
                let info =
                    general.unwrap_or_else(|e| panic!("fast accepted, general {e:?}: {f:02x?}"));
                assert_eq!(info.version, IpVersion::V4);
                assert_eq!(info.l3_offset, 14);
                assert_eq!(
                    info.flow,
                    FlowKey::new(h.src.into(), h.dst.into(), h.proto, h.src_port, h.dst_port)
                );
                assert_eq!((info.dscp, info.ecn), (h.tos >> 2, Ecn::from_bits(h.tos)));
                assert_eq!(info.is_flow_end(), h.is_flow_end());
            } else if let Ok(info) = general {
                // Rejected by the fast path: not of its shape.
                let shape = info.version == IpVersion::V4
                    && info.vlan.is_none()
                    && info.l4_offset == 34
                    && (info.flow.proto == PROTO_UDP || info.flow.proto == PROTO_TCP);
                assert!(!shape, "fast path refused a frame of its shape: {f:02x?}");
            }
        });
        assert!(fast > total / 4, "fast path taken {fast} of {total}");
    }

    /// A TCP/IPv4 frame (`udp4`'s layout with the protocol and a 20-byte
    /// TCP header patched in) carrying TCP flags `flags`.
    fn tcp4(flags: u8) -> Vec<u8> {
        let mut t = udp4(
            &FlowKey {
                proto: PROTO_TCP,
                ..key4()
            },
            0,
            30,
        );
        t[23] = PROTO_TCP;
        t[46] = 5 << 4;
        t[47] = flags;
        t
    }

    /// Call `check` on 200,000 random mutations of `bases` (xorshift from
    /// `seed`): up to two bytes among the first `reach` replaced, then
    /// sometimes truncated or zero-extended.
    fn for_each_mutation(bases: &[Vec<u8>], seed: u64, reach: u64, mut check: impl FnMut(&[u8])) {
        let mut x = seed;
        let mut next = || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        for _ in 0..200_000 {
            let mut f = bases[(next() % bases.len() as u64) as usize].clone();
            for _ in 0..(next() % 3) {
                let i = (next() % reach) as usize % f.len();
                f[i] = next() as u8;
            }
            if next() % 4 == 0 {
                f.truncate((next() % (f.len() as u64 + 1)) as usize);
            } else if next() % 4 == 0 {
                f.resize(f.len() + (next() % 20) as usize, 0);
            }
            check(&f);
        }
    }

    #[test]
    fn stats_count_every_class() {
        let mut s = ParseStats::default();
        let f = udp4(&key4(), 0, 0);
        for frame in [&f[..], &f[..5], &[0u8; 60][..]] {
            s.record(&parse_ethernet(frame));
        }
        assert_eq!((s.ok, s.truncated, s.not_ip, s.total()), (1, 1, 1, 3));
    }
}

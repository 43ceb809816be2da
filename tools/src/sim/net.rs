//! The network side of the emulator: packets, links and router ports.
//!
//! A [`SimPacket`] carries one QUIC datagram (its real bytes) plus the
//! metadata a queue discipline needs. Every link is one direction of one
//! cable with a rate and a propagation delay. Two kinds exist:
//!
//! - [`LinkQueue::Wire`]: a host's access link, a FIFO serializer whose
//!   backlog is tracked as "busy until" time (O(1), no events); an optional
//!   byte limit drops arrivals that would exceed it (rate-capped senders).
//! - [`LinkQueue::Port`]: a router egress port from `tollgate-router`
//!   (`classify -> delay -> discipline -> shaper -> TX`). The shaper's token
//!   bucket is one byte deep ([`SHAPER_BURST`]), so a packet starts only when
//!   the previous one has finished serializing; each released packet then
//!   takes its serialization time plus the propagation delay to reach the
//!   next hop (store and forward).

use std::net::SocketAddr;

use tollgate_cca::Time;
use tollgate_router::classify::{Classifier, Rule};
use tollgate_router::delay::DelayConfig;
use tollgate_router::flow::FlowHasher;
use tollgate_router::packet::{Ecn, FlowKey, IpVersion, PacketInfo};
use tollgate_router::port::{Port, Sink};
use tollgate_router::shaper::ShaperConfig;
use tollgate_router::{ConfigError, DisciplineConfig, DropReason, PacketMeta, WithMeta};

/// Ethernet (14) + IPv4 (20) + UDP (8) header bytes added to each datagram on the wire.
pub const WIRE_OVERHEAD: u32 = 42;
/// Shaper bucket depth. With a 1-byte bucket a packet may leave only once
/// the previous one has finished serializing (the bucket goes negative by the
/// packet's length and refills at the line rate), so the port behaves exactly
/// as a link transmitter. A deeper bucket would let a packet start early
/// after an idle period, compressing packet-pair dispersion (CapProbe would
/// then over-estimate the capacity).
pub const SHAPER_BURST: u64 = 1;

/// One datagram in the emulated network.
#[derive(Debug)]
pub struct SimPacket {
    /// What the disciplines look at (`len` is the wire length).
    pub meta: PacketMeta,
    /// The QUIC datagram.
    pub data: Vec<u8>,
    /// Source address (host label).
    pub from: SocketAddr,
    /// Flow index.
    pub flow: u32,
    /// Whether the packet travels from the flow's client (data sender) to its server.
    pub to_server: bool,
    /// Index of the current hop in the flow's path.
    pub hop: u16,
    /// DSCP codepoint set by the sender.
    pub dscp: u8,
    /// When the packet entered the current router port (virtual ns).
    pub enq_ns: u64,
    /// Whether it entered the current port as L4S traffic: ECN field ECT(1)
    /// or CE on arrival, RFC 9332's classifier (a Classic packet the port
    /// marks CE on its way out stays Classic).
    pub l4s: bool,
    /// When its host emitted it (virtual ns).
    pub sent_ns: u64,
    /// Whether it has drawn its path noise ([`super::noise::PathNoise`]).
    pub path_noised: bool,
}

impl SimPacket {
    /// The IP TOS byte as the receiving host sees it.
    pub fn tos(&self) -> u8 {
        (self.dscp << 2) | self.meta.ecn.bits()
    }
}

impl WithMeta for SimPacket {
    #[inline]
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    #[inline]
    fn mark_ce(&mut self) -> bool {
        self.meta.mark_ce()
    }
}

/// The library's discipline enum over emulator packets.
pub type AnyQdisc = tollgate_router::AnyQdisc<SimPacket>;

/// What a port handed out during one `poll`: transmitted and dropped packets.
#[derive(Debug, Default)]
pub struct Collector {
    /// Packets that left, with their departure time.
    pub sent: Vec<(SimPacket, Time)>,
    /// Packets dropped, with the reason.
    pub dropped: Vec<(SimPacket, DropReason)>,
}

impl Sink<SimPacket> for Collector {
    fn transmit(&mut self, packet: SimPacket, now: Time) {
        self.sent.push((packet, now));
    }
    fn drop(&mut self, packet: SimPacket, reason: DropReason) {
        self.dropped.push((packet, reason));
    }
}

/// A router egress port in the emulator with its classifier.
#[derive(Debug)]
pub struct RouterPort {
    /// The library port.
    pub port: Port<SimPacket, AnyQdisc>,
    classifier: Classifier,
    hasher: FlowHasher,
    /// A poll event is scheduled for this time.
    pub poll_at: Option<u64>,
    /// Whether this port is a forward-direction bottleneck (metrics are kept for it).
    pub measured: bool,
    /// Per flow and direction (`2 * flow + to_server`): the DSCP and the
    /// metadata [`RouterPort::classify`] last computed for it.
    memo: Vec<Option<(u8, PacketMeta)>>,
}

impl RouterPort {
    /// A port with `config`, line rate `rate_bps`, variant rules (empty: DSCP only).
    pub fn new(
        config: &DisciplineConfig,
        rate_bps: f64,
        rules: Vec<Rule>,
        hash_seed: u64,
        buffer_packets: u32,
        measured: bool,
    ) -> Result<Self, ConfigError> {
        let delay = DelayConfig {
            capacity: (buffer_packets as usize * 4).clamp(1024, 1 << 20),
            ..DelayConfig::default()
        };
        let shaper = ShaperConfig {
            rate_bps,
            burst_bytes: SHAPER_BURST,
        };
        let use_dscp = rules.is_empty();
        let classifier = Classifier::new(rules, use_dscp);
        Ok(RouterPort {
            port: Port::new(
                classifier.clone(),
                hash_seed,
                &delay,
                AnyQdisc::new(config)?,
                &shaper,
            )?,
            classifier,
            hasher: FlowHasher::new(hash_seed),
            poll_at: None,
            measured,
            memo: Vec::new(),
        })
    }

    /// The classify stage: flow hash and variant from the packet's header
    /// fields. The emulator has no Ethernet bytes to parse, so the parse
    /// result is built from the packet's addresses and TOS, then handed to
    /// the library's classifier and hasher exactly as the dataplane does.
    ///
    /// A flow's direction always has the same addresses and ports, so the
    /// hash and variant are remembered per flow and direction and computed
    /// again only when the packet's DSCP differs (building the key, hashing
    /// it and matching the rules cost about 370 instructions a packet, 2 %
    /// of a run).
    pub fn classify(&mut self, p: &mut SimPacket, to: SocketAddr) {
        let i = 2 * p.flow as usize + usize::from(p.to_server);
        if let Some(Some((dscp, meta))) = self.memo.get(i).copied() {
            if dscp == p.dscp {
                // What varies per packet: length, ECN codepoint, tag.
                p.meta = PacketMeta {
                    len: p.meta.len,
                    ecn: p.meta.ecn,
                    tag: p.meta.tag,
                    ..meta
                };
                return;
            }
        }
        let key = FlowKey::new(p.from.ip(), to.ip(), 17, p.from.port(), to.port());
        let info = PacketInfo {
            flow: key,
            version: IpVersion::V4,
            dscp: p.dscp,
            ecn: p.meta.ecn,
            vlan: None,
            l3_offset: 14,
            l4_offset: 34,
            frame_len: p.meta.len,
            ip_len: p.meta.len - 14,
            payload_len: p.meta.len - WIRE_OVERHEAD,
            tcp_flags: 0,
        };
        let variant = self.classifier.classify(&info);
        p.meta = PacketMeta {
            tag: p.meta.tag,
            ..PacketMeta::from_info(&info, self.hasher.hash(&key), variant)
        };
        if self.memo.len() <= i {
            self.memo.resize(i + 1, None);
        }
        self.memo[i] = Some((p.dscp, p.meta));
    }
}

/// A link's queue.
#[derive(Debug)]
pub enum LinkQueue {
    /// A host's access link (FIFO, unbounded unless `limit_bytes`).
    Wire {
        /// When the transmitter becomes free (virtual ns).
        busy_until: u64,
        /// Drop arrivals when the backlog would exceed this.
        limit_bytes: Option<u64>,
        /// Arrivals dropped for the limit.
        drops: u64,
    },
    /// A router port running a discipline.
    Port(Box<RouterPort>),
}

/// What [`Link::cross`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crossing {
    /// It reaches the link's far end at this time (ns).
    Leaves(u64),
    /// The access link's byte limit dropped it.
    Dropped,
    /// The link is a router port: the packet goes into its discipline.
    RouterPort,
}

/// One direction of a cable.
#[derive(Debug)]
pub struct Link {
    /// Rate, bit/s.
    pub rate_bps: f64,
    /// Propagation delay, ns.
    pub delay_ns: u64,
    /// Nanoseconds per byte.
    pub ns_per_byte: f64,
    /// The queue in front of it.
    pub queue: LinkQueue,
}

impl Link {
    /// A plain access link.
    pub fn wire(rate_bps: f64, delay_ns: u64, limit_bytes: Option<u64>) -> Self {
        Link {
            rate_bps,
            delay_ns,
            ns_per_byte: 8e9 / rate_bps,
            queue: LinkQueue::Wire {
                busy_until: 0,
                limit_bytes,
                drops: 0,
            },
        }
    }

    /// A link behind a router port.
    pub fn port(rate_bps: f64, delay_ns: u64, port: RouterPort) -> Self {
        Link {
            rate_bps,
            delay_ns,
            ns_per_byte: 8e9 / rate_bps,
            queue: LinkQueue::Port(Box::new(port)),
        }
    }

    /// A packet of `len` bytes reaches this link at `at`: an access link
    /// ([`LinkQueue::Wire`]) serializes it or drops it for its byte limit
    /// (counted); a router port is left to the caller.
    pub fn cross(&mut self, at: u64, len: u32) -> Crossing {
        let LinkQueue::Wire {
            busy_until,
            limit_bytes,
            drops,
        } = &mut self.queue
        else {
            return Crossing::RouterPort;
        };
        let start = at.max(*busy_until);
        if let Some(limit) = limit_bytes {
            let backlog = ((start - at) as f64 / self.ns_per_byte) as u64;
            if backlog > *limit {
                *drops += 1;
                return Crossing::Dropped;
            }
        }
        let ser = (f64::from(len) * self.ns_per_byte).round() as u64;
        *busy_until = start + ser;
        Crossing::Leaves(*busy_until + self.delay_ns)
    }

    /// Serialization plus propagation time of a packet of `len` bytes.
    #[inline]
    pub fn transit_ns(&self, len: u32) -> u64 {
        (f64::from(len) * self.ns_per_byte).round() as u64 + self.delay_ns
    }
}

/// The ECN codepoint of a TOS byte.
pub fn ecn_of(tos_ecn_bits: u8) -> Ecn {
    Ecn::from_bits(tos_ecn_bits & 0b11)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_cca::VariantId;
    use tollgate_router::classify::Prefix;
    use tollgate_router::droptail::DropTailConfig;

    fn packet(flow: u32, to_server: bool, from: SocketAddr, dscp: u8, ecn: Ecn) -> SimPacket {
        SimPacket {
            meta: PacketMeta {
                len: 1242,
                ecn,
                tag: 77,
                ..PacketMeta::default()
            },
            data: Vec::new(),
            from,
            flow,
            to_server,
            hop: 1,
            dscp,
            enq_ns: 0,
            l4s: false,
            sent_ns: 0,
            path_noised: false,
        }
    }

    /// A port that remembers its classifications gives every packet the
    /// metadata a port classifying it afresh gives it, across flows,
    /// directions, DSCP changes and ECN codepoints, with rules (the variant
    /// from the addresses) and without (from the DSCP).
    #[test]
    fn remembered_classification_equals_a_fresh_one() {
        let client = |i: u8| SocketAddr::from(([10, 1, 0, i], 5000));
        let server = |i: u8| SocketAddr::from(([10, 2, 0, i], 443));
        let dscp_libra = VariantId::LIBRA.dscp();
        let cases = [
            (0, true, 0, Ecn::NotEct),
            (1, true, dscp_libra, Ecn::Ect0),
            (0, false, 0, Ecn::NotEct),
            (1, true, dscp_libra, Ecn::Ce),
            (1, true, 0, Ecn::Ect0), // DSCP changed: computed again
            (1, false, dscp_libra, Ecn::NotEct),
            (0, true, dscp_libra, Ecn::Ect1),
            (1, true, dscp_libra, Ecn::Ect0),
        ];
        let config = DisciplineConfig::DropTail(DropTailConfig::default());
        // Flow 0's client is CUBIC by rule.
        let by_rule = vec![Rule {
            src: Prefix::new(client(1).ip(), 32),
            ..Rule::any(VariantId::CUBIC)
        }];
        for rules in [by_rule, Vec::new()] {
            let new_port = || RouterPort::new(&config, 1e8, rules.clone(), 9, 100, true).unwrap();
            let mut port = new_port();
            let mut variants = Vec::new();
            for round in 0..2 {
                for &(flow, to_server, dscp, ecn) in &cases {
                    let i = flow as u8 + 1;
                    let (from, to) = if to_server {
                        (client(i), server(i))
                    } else {
                        (server(i), client(i))
                    };
                    let mut remembered = packet(flow, to_server, from, dscp, ecn);
                    port.classify(&mut remembered, to);
                    let mut fresh = packet(flow, to_server, from, dscp, ecn);
                    new_port().classify(&mut fresh, to);
                    assert_eq!(remembered.meta, fresh.meta, "round {round}, flow {flow}");
                    variants.push(fresh.meta.variant);
                }
            }
            let (cubic, libra, none) = (VariantId::CUBIC, VariantId::LIBRA, VariantId::UNMARKED);
            let expected = if rules.is_empty() {
                [none, libra, none, libra, none, libra, libra, libra]
            } else {
                [cubic, none, none, none, none, none, cubic, none]
            };
            assert_eq!(variants[..8], expected);
        }
    }
}

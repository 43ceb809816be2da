//! The frame parser, classification and a `Port` per discipline.

use std::collections::HashMap;
use std::time::Duration;

use tollgate_cca::{Time, VariantId};
use tollgate_router::classify::{Classifier, Rule};
use tollgate_router::delay::DelayConfig;
use tollgate_router::packet::{
    build, parse_ethernet, parse_fast, parse_fast_v4, parse_ip, set_ce_in_frame, FlowKey,
};
use tollgate_router::port::{Port, Sink};
use tollgate_router::shaper::ShaperConfig;
use tollgate_router::{
    AnyQdisc, Context, DisciplineConfig, DisciplineKeys, DropReason, PacketMeta, Qdisc,
};

use crate::Input;

/// A discipline with small limits, so that short inputs fill it, and the
/// most packets / bytes it may hold.
struct Case {
    config: DisciplineConfig,
    max_packets: usize,
    max_bytes: Option<u64>,
}

/// The disciplines as `router.toml` sets them (its `[ports.egress]` keys):
/// small queues, short control intervals, ECN on, with the most packets
/// each may hold.
const CASES: &[(&str, usize)] = &[
    (
        r#"discipline = "droptail"
limit_bytes = 4000"#,
        4000,
    ),
    (
        r#"discipline = "red"
limit = 16
min_th = 2
max_th = 6
weight = 0.5
ecn = true
adaptive = true
adapt_interval = "50us""#,
        16,
    ),
    (
        r#"discipline = "red"
limit = 16
byte_mode = true
min_th = 500
max_th = 3000
weight = 0.5"#,
        16,
    ),
    (
        r#"discipline = "choke"
limit = 16
min_th = 2
max_th = 6
weight = 0.5"#,
        16,
    ),
    // Head and tail queues of `max_size` each.
    (
        r#"discipline = "cebinae"
max_size = 8
dt = "20us"
l = "5us"
cache_slots = 4"#,
        16,
    ),
    // The main queue and a measuring queue per variant.
    (
        r#"discipline = "rrmqs"
variants = ["newreno", "cubic"]
packets_per_queue = 3
main_limit = 10
window = "30us"
flow_idle_timeout = "10us"
rrmqs_probability = 0.5"#,
        16,
    ),
    (
        r#"discipline = "fq"
limit = 12
buckets = 4
quantum = 300"#,
        12,
    ),
    (
        r#"discipline = "codel"
limit = 12
target = "5us"
interval = "40us"
ecn = true"#,
        12,
    ),
    (
        r#"discipline = "fq_codel"
limit = 12
memory_limit = 6000
flows = 4
quantum = 300
drop_batch = 3
target = "5us"
interval = "40us""#,
        12,
    ),
    // L4S and Classic queues under one limit.
    (
        r#"discipline = "dualpi2"
limit = 12
target = "5us"
tupdate = "8us"
step_thresh = "2us"
tshift = "10us""#,
        12,
    ),
];

fn case(i: usize) -> Case {
    let (text, max_packets) = CASES[i % CASES.len()];
    let table: toml::Table = toml::from_str(text).expect("discipline table");
    let config = DisciplineKeys::from_table(table)
        .and_then(|k| k.resolve(&Context::port(1e9)).map_err(|e| e.to_string()))
        .expect("valid discipline keys");
    let max_bytes = matches!(config, DisciplineConfig::DropTail(_)).then_some(4000);
    Case {
        config,
        max_packets,
        max_bytes,
    }
}

/// Packets a delay class may hold.
const DELAY_CAPACITY: usize = 8;

/// Keeps every handle the port holds; checks each comes back once.
#[derive(Default)]
struct Tracker {
    inside: HashMap<u64, u32>,
    inside_bytes: u64,
}

impl Tracker {
    fn give(&mut self, p: &PacketMeta) {
        assert!(self.inside.insert(p.tag, p.len).is_none());
        self.inside_bytes += u64::from(p.len);
    }

    fn back(&mut self, p: &PacketMeta) {
        let len = self
            .inside
            .remove(&p.tag)
            .unwrap_or_else(|| panic!("packet {} came back twice", p.tag));
        assert_eq!(len, p.len, "packet {} changed length", p.tag);
        self.inside_bytes -= u64::from(len);
    }
}

impl Sink<PacketMeta> for Tracker {
    fn transmit(&mut self, packet: PacketMeta, _now: Time) {
        self.back(&packet);
    }
    fn drop(&mut self, packet: PacketMeta, _reason: DropReason) {
        self.back(&packet);
    }
}

/// A frame the parser accepts: IPv4 UDP or, with `tcp`, IPv4 TCP with
/// `flags`; a few flows, any TOS.
fn synth_frame(flow: u8, tos: u8, payload: usize, tcp: Option<u8>) -> Vec<u8> {
    let src = std::net::Ipv4Addr::new(10, 0, 0, 1 + flow % 4).into();
    let dst = std::net::Ipv4Addr::new(10, 0, 1, 1).into();
    let key = FlowKey::new(src, dst, 17, 1000 + u16::from(flow % 8), 443);
    let mut f = build::udp4(&key, tos, payload.max(if tcp.is_some() { 20 } else { 0 }));
    if let Some(flags) = tcp {
        // Protocol TCP, data offset 5 words, the flags byte.
        f[23] = 6;
        let l4 = 34;
        f[l4 + 12] = 5 << 4;
        f[l4 + 13] = flags;
        let mut h = [0u8; 20];
        h.copy_from_slice(&f[14..34]);
        h[10] = 0;
        h[11] = 0;
        let ck = build::ipv4_checksum(&h);
        f[24..26].copy_from_slice(&ck.to_be_bytes());
    }
    f
}

/// Check what the parsers promise about any bytes.
fn parse_any(frame: &[u8]) {
    if let Ok(info) = parse_ethernet(frame) {
        assert!(usize::from(info.l4_offset) <= frame.len());
        assert!(info.ip_len as usize + usize::from(info.l3_offset) <= frame.len());
        if let Some(fast) = parse_fast(frame) {
            assert_eq!(fast, info, "parse_fast and parse_ethernet disagree");
        }
        let mut g = frame.to_vec();
        let _ = set_ce_in_frame(&mut g, &info);
    }
    let _ = parse_fast_v4(frame);
    let _ = parse_ip(frame);
}

/// Frames from `data` through the parser, the classifier and a port.
///
/// The first byte picks the discipline, the classifier (DSCP or rules) and
/// whether the port has a delay line; the second the shaper's rate. Then a
/// sequence of operations: a raw frame, a valid UDP/TCP frame, time passing
/// (`poll`). After each, the port's accounting must be exact (received =
/// transmitted + dropped + inside, in packets and bytes, every handle back
/// once) and the discipline must hold no more than its limit.
pub fn router_frames(data: &[u8]) {
    let mut input = Input::new(data);
    let setup = input.u8();
    let case = &case(usize::from(setup));
    let classifier = if setup & 0x10 == 0 {
        Classifier::dscp()
    } else {
        let mut cubic = Rule::any(VariantId::CUBIC);
        cubic.dst_ports = Some((443, 443));
        cubic.proto = Some(17);
        Classifier::new(vec![cubic, Rule::delay(Duration::from_micros(30))], true)
    };
    let delay = if setup & 0x20 == 0 {
        DelayConfig {
            capacity: DELAY_CAPACITY,
            ..DelayConfig::default()
        }
    } else {
        DelayConfig {
            delay: Duration::from_micros(10),
            class_delays: vec![(VariantId::NEWRENO, Duration::from_micros(50))],
            capacity: DELAY_CAPACITY,
        }
    };
    let shaper = ShaperConfig {
        rate_bps: 1e6 * f64::from(1 + u32::from(input.u8())),
        burst_bytes: 3028,
    };
    let qdisc = AnyQdisc::<PacketMeta>::new(&case.config).expect("valid discipline");
    let mut port = Port::new(classifier, 7, &delay, qdisc, &shaper).expect("valid port");
    let mut sink = Tracker::default();
    let mut now = 0u64;
    let mut seq = 0u64;
    while !input.is_empty() {
        let op = input.u8();
        match op % 5 {
            0 | 4 => {
                let len = usize::from(input.u16() % 1600);
                let frame = input.bytes(len);
                parse_any(frame);
                let meta = if op % 5 != 4 {
                    port.classify(frame).ok()
                } else {
                    port.classify_compact(frame).ok().map(|c| PacketMeta {
                        len: c.len,
                        flow_hash: c.flow_hash,
                        variant: c.variant,
                        ecn: c.ecn,
                        flow_end: c.flow_end,
                        delay_class: c.delay_class,
                        tag: 0,
                    })
                };
                if let Some(mut m) = meta {
                    seq += 1;
                    m.tag = seq;
                    sink.give(&m);
                    if op & 0x80 == 0 {
                        port.receive(m, Time::from_nanos(now), &mut sink);
                    } else {
                        port.receive_and_send(m, Time::from_nanos(now), &mut sink);
                    }
                }
            }
            1 => {
                let flow = input.u8();
                let tos = input.u8();
                let payload = usize::from(input.u16() % 1480);
                let kind = input.u8();
                let tcp = (kind & 1 == 1).then_some(kind >> 1);
                let frame = synth_frame(flow, tos, payload, tcp);
                parse_any(&frame);
                let c = port
                    .classify_compact(&frame)
                    .expect("a well-formed frame parses");
                seq += 1;
                let m = PacketMeta {
                    len: c.len,
                    flow_hash: c.flow_hash,
                    variant: c.variant,
                    ecn: c.ecn,
                    flow_end: c.flow_end,
                    delay_class: c.delay_class,
                    tag: seq,
                };
                sink.give(&m);
                port.receive_and_send(m, Time::from_nanos(now), &mut sink);
            }
            2 => {
                now = now.saturating_add(u64::from(input.u16()) << (op >> 4));
                port.poll(Time::from_nanos(now), &mut sink);
            }
            _ => {
                if let Some(t) = port.next_event() {
                    now = now.max(t.as_nanos());
                }
                port.poll(Time::from_nanos(now), &mut sink);
            }
        }
        let c = *port.counters();
        let inside = port.in_flight();
        assert_eq!(sink.inside.len(), inside, "handles inside the port");
        assert_eq!(
            c.received,
            c.dequeued + c.dropped_total() + inside as u64,
            "packets: received = transmitted + dropped + inside"
        );
        assert_eq!(
            c.received_bytes,
            c.dequeued_bytes + c.dropped_bytes_total() + sink.inside_bytes,
            "bytes: received = transmitted + dropped + inside"
        );
        let q = port.qdisc();
        assert!(
            q.len() <= case.max_packets,
            "{}: {} packets queued, limit {}",
            case.config.name(),
            q.len(),
            case.max_packets
        );
        if let Some(b) = case.max_bytes {
            assert!(
                q.bytes() <= b,
                "{}: {} bytes queued",
                case.config.name(),
                q.bytes()
            );
        }
        // Two delay classes at most (the default and one per variant or rule).
        assert!(inside <= case.max_packets + 3 * DELAY_CAPACITY + 1);
    }
}

//! Synthetic traffic: UDP/IPv4 frames stamped over received mbufs.
//!
//! Used on `net_null` ports (whose RX delivers zero-filled frames) by the
//! benchmark and the accounting tests: each received mbuf is overwritten with
//! the next flow's template frame, like a NIC DMA-ing a real packet. The
//! templates are built once at start; stamping is a bounded memcpy.
//!
//! Every frame carries its flow's sequence number (big-endian u32, the
//! first 4 bytes of the UDP payload, offset [`SEQ_OFFSET`]; the UDP
//! checksum is 0, "none", so the frame stays valid), so a capture of the
//! output shows whether a flow's packets kept their order.

use std::net::Ipv4Addr;

use tollgate_router::packet::build::udp4;
use tollgate_router::packet::FlowKey;

use crate::config::{variant_id, SyntheticConfig, IMIX};
use crate::mbuf::Mbuf;

/// Offset of the per-flow sequence number in a synthetic frame (Ethernet
/// 14 + IPv4 20 + UDP 8).
pub const SEQ_OFFSET: usize = 42;

/// Round-robin frame templates.
#[derive(Debug)]
pub struct Synth {
    templates: Vec<Vec<u8>>,
    /// Per template: its flow (index into `seq`).
    flow_of: Vec<u32>,
    /// Per flow: the next sequence number.
    seq: Vec<u32>,
    next: usize,
}

impl Synth {
    /// Templates for `config` (flows 198.18.0.0/15 -> 198.19.0.1, benchmark
    /// range of RFC 2544). With `imix`, template `i` has length
    /// `IMIX[i % 12]` and there are at least 12 templates (flow `i % flows`).
    pub fn new(config: &SyntheticConfig) -> Synth {
        let count = if config.imix {
            config.flows.max(IMIX.len() as u32)
        } else {
            config.flows
        };
        let templates = (0..count)
            .map(|t| {
                let frame_len = if config.imix {
                    IMIX[t as usize % IMIX.len()]
                } else {
                    config.frame_len
                };
                let payload = usize::from(frame_len).saturating_sub(42);
                let i = t % config.flows.max(1);
                let src = Ipv4Addr::from(0xC612_0000u32 | (i & 0xFFFF));
                let key = FlowKey::new(
                    src.into(),
                    Ipv4Addr::new(198, 19, 0, 1).into(),
                    17,
                    10_000 + (i % 50_000) as u16,
                    9,
                );
                let dscp = if config.variants.is_empty() {
                    0
                } else {
                    variant_id(&config.variants[i as usize % config.variants.len()])
                        .map(|v| v.dscp())
                        .unwrap_or(0)
                };
                let mut f = udp4(&key, dscp << 2, payload);
                // UDP checksum 0 ("none"): the sequence number changes the payload.
                if let Some(c) = f.get_mut(40..42) {
                    c.copy_from_slice(&[0, 0]);
                }
                f
            })
            .collect();
        let flows = config.flows.max(1);
        Synth {
            templates,
            flow_of: (0..count).map(|t| t % flows).collect(),
            seq: vec![0; flows as usize],
            next: 0,
        }
    }

    /// Mean frame length of the templates, bytes.
    pub fn mean_len(&self) -> f64 {
        let n = self.templates.len().max(1) as f64;
        self.templates.iter().map(|t| t.len() as f64).sum::<f64>() / n
    }

    /// Overwrite `m` with the next template.
    #[inline]
    pub fn stamp(&mut self, m: &mut Mbuf) {
        if self.templates.is_empty() {
            return;
        }
        let i = self.next;
        self.next = if i + 1 == self.templates.len() {
            0
        } else {
            i + 1
        };
        if m.write_frame(&self.templates[i]) {
            let f = self.flow_of[i] as usize;
            let seq = self.seq[f];
            self.seq[f] = seq.wrapping_add(1);
            if let Some(b) = m.data_mut().get_mut(SEQ_OFFSET..SEQ_OFFSET + 4) {
                b.copy_from_slice(&seq.to_be_bytes());
            }
        }
    }
}

//! Synthetic traffic: UDP/IPv4 frames stamped over received mbufs.
//!
//! Used on `net_null` ports (whose RX delivers zero-filled frames) by the
//! benchmark and the accounting tests: each received mbuf is overwritten with
//! the next flow's template frame, like a NIC DMA-ing a real packet. The
//! templates are built once at start; stamping is a bounded memcpy.

use std::net::Ipv4Addr;

use tollgate_router::packet::build::udp4;
use tollgate_router::packet::FlowKey;

use crate::config::{variant_id, SyntheticConfig, IMIX};
use crate::mbuf::Mbuf;

/// Round-robin frame templates.
#[derive(Debug)]
pub struct Synth {
    templates: Vec<Vec<u8>>,
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
                udp4(&key, dscp << 2, payload)
            })
            .collect();
        Synth { templates, next: 0 }
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
        let t = &self.templates[self.next];
        self.next = if self.next + 1 == self.templates.len() {
            0
        } else {
            self.next + 1
        };
        let _ = m.write_frame(t);
    }
}

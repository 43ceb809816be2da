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
    order: Skew,
}

/// Which template comes next when the first `heavy` templates (the heavy
/// flows' ones) send `share` of the frames: an error accumulator spreads the
/// heavy frames evenly among the light ones (like Bresenham's line), and each
/// group is sent round robin. Without heavy flows (`heavy` and `share` 0)
/// every template is light: plain round robin.
#[derive(Debug)]
struct Skew {
    heavy: usize,
    /// Heavy share in units of 2^-16.
    share: u32,
    acc: u32,
    next_heavy: usize,
    next_light: usize,
}

impl Skew {
    const ONE: u32 = 1 << 16;

    fn next(&mut self, count: usize) -> usize {
        self.acc += self.share;
        if self.acc >= Self::ONE {
            self.acc -= Self::ONE;
            let i = self.next_heavy;
            self.next_heavy = if i + 1 == self.heavy { 0 } else { i + 1 };
            i
        } else {
            let i = self.next_light;
            self.next_light = if i + 1 == count { self.heavy } else { i + 1 };
            i
        }
    }
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
        let templates: Vec<Vec<u8>> = (0..count)
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
        // The config checks heavy_flows < flows (and flows >= 12 with imix,
        // so that template t is flow t); the clamp keeps a light group.
        let heavy = (config.heavy_flows as usize).min(templates.len().saturating_sub(1));
        let share = if heavy > 0 {
            (config.heavy_share.clamp(0.0, 1.0) * f64::from(Skew::ONE)) as u32
        } else {
            0
        };
        Synth {
            templates,
            flow_of: (0..count).map(|t| t % flows).collect(),
            seq: vec![0; flows as usize],
            order: Skew {
                heavy,
                share,
                acc: 0,
                next_heavy: 0,
                next_light: heavy,
            },
        }
    }

    /// Mean frame length sent, bytes (weighted by the heavy share, if any).
    pub fn mean_len(&self) -> f64 {
        let mean =
            |t: &[Vec<u8>]| t.iter().map(|t| t.len() as f64).sum::<f64>() / t.len().max(1) as f64;
        let k = &self.order;
        let share = f64::from(k.share) / f64::from(Skew::ONE);
        share * mean(&self.templates[..k.heavy]) + (1.0 - share) * mean(&self.templates[k.heavy..])
    }

    /// The next template's index.
    #[inline]
    fn pick(&mut self) -> usize {
        self.order.next(self.templates.len())
    }

    /// Overwrite `m` with the next template.
    #[inline]
    pub fn stamp(&mut self, m: &mut Mbuf) {
        if self.templates.is_empty() {
            return;
        }
        let i = self.pick();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config(flows: u32, heavy_flows: u32, heavy_share: f64, imix: bool) -> SyntheticConfig {
        SyntheticConfig {
            flows,
            frame_len: 64,
            variants: Vec::new(),
            imix,
            heavy_flows,
            heavy_share,
        }
    }

    #[test]
    fn without_heavy_hitters_every_flow_sends_in_turn() {
        let mut s = Synth::new(&config(5, 0, 0.5, false));
        let order: Vec<usize> = (0..10).map(|_| s.pick()).collect();
        assert_eq!(order, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
        assert_eq!(s.mean_len(), 64.0);
    }

    #[test]
    fn heavy_hitters_send_their_share_spread_evenly() {
        // 4 heavy flows with 3/4 of 100 flows' frames: 3 heavy frames per light one.
        let mut s = Synth::new(&config(100, 4, 0.75, false));
        let mut per_flow = [0u32; 100];
        let mut longest_heavy_run = (0, 0);
        for _ in 0..96_000 {
            let i = s.pick();
            per_flow[s.flow_of[i] as usize] += 1;
            longest_heavy_run.0 = if i < 4 { longest_heavy_run.0 + 1 } else { 0 };
            longest_heavy_run.1 = longest_heavy_run.1.max(longest_heavy_run.0);
        }
        assert!(per_flow[..4].iter().all(|&n| n == 18_000), "{per_flow:?}");
        assert!(per_flow[4..].iter().all(|&n| n == 250), "{per_flow:?}");
        assert_eq!(longest_heavy_run.1, 3);
    }

    #[test]
    fn the_mean_frame_length_is_weighted_by_the_heavy_share() {
        // imix with 12 flows: flow t has IMIX[t]; flow 0 (64 B) sends half.
        let s = Synth::new(&config(12, 1, 0.5, true));
        let light: f64 = IMIX[1..].iter().map(|&l| f64::from(l)).sum::<f64>() / 11.0;
        assert!((s.mean_len() - (0.5 * 64.0 + 0.5 * light)).abs() < 1e-9);
    }
}

//! Synthetic traffic: UDP/IPv4 frames stamped over received mbufs.
//!
//! Used on `net_null` ports (whose RX delivers zero-filled frames) by the
//! benchmark and the accounting tests: each received mbuf is overwritten with
//! the next flow's frame, like a NIC DMA-ing a real packet. The frames are
//! built once at start; stamping is a bounded memcpy of the flow's class
//! frame and one 16-byte store of the fields that are the flow's own.
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

/// Where two frames of the same class differ (Ethernet offsets): the IPv4
/// header checksum, the low half of the source address and the UDP source
/// port, all inside the 16 bytes from [`PATCH`].
const CKSUM: usize = 24;
const SRC_LO: usize = 28;
const SPORT: usize = 34;
/// Start of the 16 bytes (to the UDP length's end) stamped in one store.
const PATCH: usize = 24;

/// Round-robin synthetic frames.
///
/// Every flow's frame is its class's frame (one per frame length and DSCP:
/// a handful, hot in L1) with three 2-byte fields patched in from an
/// 8-byte record per template (one per flow, as a rule), read in order.
/// The first version kept a heap frame and a sequence counter per flow: at
/// 100,000 flows every stamp then read about 110 bytes spread over 8 MB, a
/// cost no NIC adds, and one that grew with the cache pressure of the case
/// being measured.
#[derive(Debug)]
pub struct Synth {
    /// One frame per (length, DSCP) class.
    classes: Vec<Vec<u8>>,
    /// Per template: its class and the bytes that differ from the class's
    /// frame. A template per flow, except with IMIX and fewer than 12
    /// flows: then 12, template `t` being flow `t % flows`.
    templates: Vec<FlowFields>,
    /// Only when a flow has several templates (IMIX, fewer than 12
    /// flows): per template, its rank among its flow's templates and how
    /// many the flow has, so that the flow's sequence number counts all
    /// of its frames. Empty otherwise.
    shared: Vec<(u32, u32)>,
    order: Skew,
}

/// What makes a flow's frame from its class's frame: the three fields,
/// each as the little-endian `u16` of its two bytes (an SSE word).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
struct FlowFields {
    class: u16,
    cksum: u16,
    src_lo: u16,
    sport: u16,
}

impl FlowFields {
    /// Turn `frame`, a copy of `class` (this flow's class frame), into
    /// this flow's frame with sequence number `seq`; false if the frames
    /// are too short (the config allows 60 bytes and up).
    ///
    /// The 16 bytes from [`PATCH`] are written in one store: the parser
    /// reads the addresses and ports right after, and a load that takes
    /// bytes from two stores still in flight (the copy's and a 2-byte
    /// patch) cannot be forwarded and waits for both to reach the cache.
    #[inline]
    fn patch(&self, class: &[u8], seq: u32, frame: &mut [u8]) -> bool {
        let (Some(f), Some(c)) = (
            frame.get_mut(..SEQ_OFFSET + 4),
            class.get(PATCH..PATCH + 16),
        ) else {
            return false;
        };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE2 is part of x86_64; `c` holds 16 bytes and `f` holds
        // PATCH + 16 (<= SEQ_OFFSET + 4); unaligned loads and stores.
        unsafe {
            use std::arch::x86_64::{__m128i, _mm_insert_epi16, _mm_loadu_si128, _mm_storeu_si128};
            let v = _mm_loadu_si128(c.as_ptr().cast::<__m128i>());
            let v = _mm_insert_epi16::<{ (CKSUM - PATCH) as i32 / 2 }>(v, i32::from(self.cksum));
            let v = _mm_insert_epi16::<{ (SRC_LO - PATCH) as i32 / 2 }>(v, i32::from(self.src_lo));
            let v = _mm_insert_epi16::<{ (SPORT - PATCH) as i32 / 2 }>(v, i32::from(self.sport));
            _mm_storeu_si128(f.as_mut_ptr().add(PATCH).cast::<__m128i>(), v);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = c;
            f[CKSUM..CKSUM + 2].copy_from_slice(&self.cksum.to_le_bytes());
            f[SRC_LO..SRC_LO + 2].copy_from_slice(&self.src_lo.to_le_bytes());
            f[SPORT..SPORT + 2].copy_from_slice(&self.sport.to_le_bytes());
        }
        f[SEQ_OFFSET..SEQ_OFFSET + 4].copy_from_slice(&seq.to_be_bytes());
        true
    }
}

/// Which flow comes next when the first `heavy` flows send `share` of the
/// frames: an error accumulator spreads the heavy frames evenly among the
/// light ones (like Bresenham's line), and each group is sent round robin.
/// Without heavy flows (`heavy` and `share` 0) every flow is light: plain
/// round robin. Each group counts its rounds: a flow is sent once per
/// round of its group, so the round is the flow's sequence number.
#[derive(Debug)]
struct Skew {
    heavy: usize,
    /// Heavy share in units of 2^-16.
    share: u32,
    acc: u32,
    next_heavy: usize,
    next_light: usize,
    heavy_round: u32,
    light_round: u32,
}

impl Skew {
    const ONE: u32 = 1 << 16;

    /// The next flow and its sequence number.
    #[inline]
    fn next(&mut self, count: usize) -> (usize, u32) {
        self.acc += self.share;
        if self.acc >= Self::ONE {
            self.acc -= Self::ONE;
            let (i, round) = (self.next_heavy, self.heavy_round);
            if i + 1 == self.heavy {
                self.next_heavy = 0;
                self.heavy_round = round.wrapping_add(1);
            } else {
                self.next_heavy = i + 1;
            }
            (i, round)
        } else {
            let (i, round) = (self.next_light, self.light_round);
            if i + 1 == count {
                self.next_light = self.heavy;
                self.light_round = round.wrapping_add(1);
            } else {
                self.next_light = i + 1;
            }
            (i, round)
        }
    }
}

impl Synth {
    /// Frames for `config` (flows 198.18.0.0/15 -> 198.19.0.1, benchmark
    /// range of RFC 2544). With `imix`, flow `i` has length `IMIX[i % 12]`
    /// and there are at least 12 flows.
    pub fn new(config: &SyntheticConfig) -> Synth {
        let count = if config.imix {
            config.flows.max(IMIX.len() as u32)
        } else {
            config.flows
        };
        let mut classes: Vec<Vec<u8>> = Vec::new();
        let templates = (0..count)
            .map(|t| {
                let f = Self::full_frame(config, t);
                let same_class = |c: &Vec<u8>| {
                    c.len() == f.len() && c[15] == f[15] // length and TOS
                };
                let class = match classes.iter().position(same_class) {
                    Some(c) => c,
                    None => {
                        classes.push(f.clone());
                        classes.len() - 1
                    }
                };
                let two = |at: usize| u16::from_le_bytes([f[at], f[at + 1]]);
                FlowFields {
                    class: class as u16,
                    cksum: two(CKSUM),
                    src_lo: two(SRC_LO),
                    sport: two(SPORT),
                }
            })
            .collect();
        // The config checks heavy_flows < flows (and flows >= 12 with imix);
        // the clamp keeps a light group.
        let heavy = (config.heavy_flows as usize).min((count as usize).saturating_sub(1));
        let share = if heavy > 0 {
            (config.heavy_share.clamp(0.0, 1.0) * f64::from(Skew::ONE)) as u32
        } else {
            0
        };
        let flows = config.flows.max(1);
        let shared = if count == flows {
            Vec::new()
        } else {
            (0..count)
                .map(|t| {
                    let f = t % flows;
                    (t / flows, (count - f).div_ceil(flows))
                })
                .collect()
        };
        Synth {
            classes,
            templates,
            shared,
            order: Skew {
                heavy,
                share,
                acc: 0,
                next_heavy: 0,
                next_light: heavy,
                heavy_round: 0,
                light_round: 0,
            },
        }
    }

    /// Flow `t`'s frame, sequence number 0, built field by field.
    fn full_frame(config: &SyntheticConfig, t: u32) -> Vec<u8> {
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
    }

    /// Mean frame length sent, bytes (weighted by the heavy share, if any).
    pub fn mean_len(&self) -> f64 {
        let mean = |f: &[FlowFields]| {
            f.iter()
                .map(|f| self.classes[usize::from(f.class)].len() as f64)
                .sum::<f64>()
                / f.len().max(1) as f64
        };
        let k = &self.order;
        let share = f64::from(k.share) / f64::from(Skew::ONE);
        share * mean(&self.templates[..k.heavy]) + (1.0 - share) * mean(&self.templates[k.heavy..])
    }

    /// The next template and its flow's sequence number.
    #[inline]
    fn pick(&mut self) -> (usize, u32) {
        let (t, round) = self.order.next(self.templates.len());
        match self.shared.get(t) {
            None => (t, round),
            Some(&(rank, per_round)) => (t, round.wrapping_mul(per_round).wrapping_add(rank)),
        }
    }

    /// Overwrite `m` with the next flow's frame.
    #[inline]
    pub fn stamp(&mut self, m: &mut Mbuf) {
        if self.templates.is_empty() {
            return;
        }
        let (i, seq) = self.pick();
        let f = self.templates[i];
        let class = &self.classes[usize::from(f.class)];
        if m.write_frame(class) {
            f.patch(class, seq, m.data_mut());
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
        let order: Vec<(usize, u32)> = (0..10).map(|_| s.pick()).collect();
        let flows: Vec<usize> = order.iter().map(|o| o.0).collect();
        assert_eq!(flows, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
        let seqs: Vec<u32> = order.iter().map(|o| o.1).collect();
        assert_eq!(seqs, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
        assert_eq!(s.mean_len(), 64.0);
    }

    #[test]
    fn heavy_hitters_send_their_share_spread_evenly() {
        // 4 heavy flows with 3/4 of 100 flows' frames: 3 heavy frames per light one.
        let mut s = Synth::new(&config(100, 4, 0.75, false));
        let mut per_flow = [0u32; 100];
        let mut longest_heavy_run = (0, 0);
        for _ in 0..96_000 {
            let (i, _) = s.pick();
            per_flow[i] += 1;
            longest_heavy_run.0 = if i < 4 { longest_heavy_run.0 + 1 } else { 0 };
            longest_heavy_run.1 = longest_heavy_run.1.max(longest_heavy_run.0);
        }
        assert!(per_flow[..4].iter().all(|&n| n == 18_000), "{per_flow:?}");
        assert!(per_flow[4..].iter().all(|&n| n == 250), "{per_flow:?}");
        assert_eq!(longest_heavy_run.1, 3);
    }

    #[test]
    fn every_flow_gets_the_frame_built_field_by_field() {
        // Frames differ from their class's only in the patched fields: for
        // each flow, the class frame patched with the flow's record must
        // equal the frame `udp4` builds for it, with its sequence number.
        let mut imix_variants = config(300, 0, 0.0, true);
        imix_variants.variants = [5u8, 12, 33]
            .into_iter()
            .map(crate::config::VariantName::Number)
            .collect();
        for c in [config(70_000, 0, 0.0, false), imix_variants] {
            let s = Synth::new(&c);
            assert_eq!(s.templates.len(), c.flows as usize);
            // A class per (length, TOS): 1 without IMIX; with it, the 3
            // IMIX lengths on 12 flows and 3 DSCPs give 6 pairs.
            assert_eq!(s.classes.len(), if c.imix { 6 } else { 1 });
            for (t, f) in s.templates.iter().enumerate() {
                let seq = 0x0102_0304 + t as u32;
                let mut want = Synth::full_frame(&c, t as u32);
                want[SEQ_OFFSET..SEQ_OFFSET + 4].copy_from_slice(&seq.to_be_bytes());
                let class = &s.classes[usize::from(f.class)];
                let mut got = class.clone();
                assert!(f.patch(class, seq, &mut got));
                assert_eq!(got, want, "flow {t}");
            }
        }
    }

    #[test]
    fn sequence_numbers_count_each_flows_frames() {
        // With heavy hitters each group has its own rounds: a flow's
        // sequence number is how many frames it has sent before.
        let mut s = Synth::new(&config(10, 3, 0.6, false));
        let mut sent = [0u32; 10];
        for _ in 0..10_000 {
            let (i, seq) = s.pick();
            assert_eq!(seq, sent[i], "flow {i}");
            sent[i] += 1;
        }
        assert!(sent[..3].iter().all(|&n| n > 3 * sent[9]), "{sent:?}");
    }

    #[test]
    fn a_flow_with_several_imix_templates_numbers_all_its_frames() {
        // IMIX with 5 flows: 12 templates, flow f sends templates f, f + 5
        // (and f + 10 for f < 2); its sequence numbers count its frames,
        // whatever their length.
        let mut s = Synth::new(&config(5, 0, 0.0, true));
        assert_eq!(s.templates.len(), 12);
        let mut sent = [0u32; 5];
        for _ in 0..1_200 {
            let (t, seq) = s.pick();
            assert_eq!(seq, sent[t % 5], "template {t}");
            sent[t % 5] += 1;
        }
        assert_eq!(sent, [300, 300, 200, 200, 200]);
    }

    #[test]
    fn the_mean_frame_length_is_weighted_by_the_heavy_share() {
        // imix with 12 flows: flow t has IMIX[t]; flow 0 (64 B) sends half.
        let s = Synth::new(&config(12, 1, 0.5, true));
        let light: f64 = IMIX[1..].iter().map(|&l| f64::from(l)).sum::<f64>() / 11.0;
        assert!((s.mean_len() - (0.5 * 64.0 + 0.5 * light)).abs() < 1e-9);
    }
}

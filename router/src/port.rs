//! A router port: classify -> delay -> discipline -> shaper -> TX.
//!
//! [`Port::classify`] parses a frame ([`crate::packet`]), hashes its 5-tuple
//! ([`crate::flow`]) and assigns its variant ([`crate::classify`]), giving the
//! [`PacketMeta`] the caller stores in its packet handle; unparsable frames
//! are counted ([`ParseStats`] and [`DropReason::Unparsable`]) and left to the
//! caller to free. [`Port::receive`] puts a handle in the [`DelayLine`];
//! [`Port::poll`] moves due packets into the discipline and transmits while
//! the [`TokenBucket`] allows. A packet dequeued while the bucket is short
//! waits in a one-packet transmit slot (like a NIC's TX descriptor).
//! [`Port::receive_and_send`] is `receive` followed by that transmit step,
//! for dataplanes that take packets in bursts (the DPDK router); the
//! emulator calls `receive` and `poll`.
//!
//! Accounting: `received == transmitted + dropped + in_flight()` at all times,
//! where `in_flight` counts the delay line, the discipline and the TX slot.
//! Everything is driven by `now`; [`Port::next_event`] tells an event loop or
//! the emulator when to call `poll` again.

use tollgate_cca::{Time, VariantId};

use crate::classify::Classifier;
use crate::delay::{DelayConfig, DelayLine};
use crate::flow::FlowHasher;
use crate::packet::{
    parse_ethernet, parse_fast_v4, Ecn, IpVersion, PacketInfo, ParseError, ParseStats,
};
use crate::qdisc::{ConfigError, Counters, DropReason, PacketHandle, PacketMeta, Qdisc, Verdict};
use crate::shaper::{ShaperConfig, TokenBucket};

/// Where a port sends its packets.
pub trait Sink<P> {
    /// A packet leaves on the wire at `now`.
    fn transmit(&mut self, packet: P, now: Time);
    /// A packet was dropped; the sink frees it.
    fn drop(&mut self, packet: P, reason: DropReason);
}

/// A classified packet, as [`Port::classify_compact`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classified {
    /// Seeded 5-tuple hash; 0 when the port's discipline does not read it
    /// ([`Ingress::with_flow_hash`]).
    pub flow_hash: u64,
    /// Frame length in bytes (the bytes given to the classifier).
    pub len: u32,
    /// Variant of the flow.
    pub variant: VariantId,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// TCP FIN or RST.
    pub flow_end: bool,
    /// Rule delay class (0: none; see [`crate::classify`]).
    pub delay_class: u8,
    /// IP version.
    pub version: IpVersion,
    /// Offset of the IP header in the frame.
    pub l3_offset: u16,
}

/// The classification half of a port: the variant classifier and the
/// seeded flow hasher, without counters or queues.
///
/// A single-core dataplane uses it through [`Port::classify_compact`]; a
/// pipeline dataplane (RX/classify workers on other cores than the
/// scheduler that owns the [`Port`]) gives each worker its own copy, with
/// the same rules and seed, so every core computes the same flow hash and
/// variant for a frame. Parse outcomes go to the caller's [`ParseStats`];
/// counting a failed frame as received and dropped is the caller's job
/// ([`Port`] does it in its own counters).
#[derive(Clone, Debug)]
pub struct Ingress {
    classifier: Classifier,
    hasher: FlowHasher,
    /// Whether [`Ingress::classify_compact`] computes the flow hash.
    hash_flows: bool,
}

impl Ingress {
    /// A classifier with `hash_seed`.
    pub fn new(classifier: Classifier, hash_seed: u64) -> Self {
        Ingress {
            classifier,
            hasher: FlowHasher::new(hash_seed),
            hash_flows: true,
        }
    }

    /// The same classification; with `on = false`,
    /// [`Ingress::classify_compact`] leaves `flow_hash` at 0 instead of
    /// hashing the 5-tuple: for ports whose disciplines never read it
    /// ([`Qdisc::reads_flow_hash`]; the hash was about 15 % of the
    /// single-lcore loop's own samples in a RED profile).
    pub fn with_flow_hash(mut self, on: bool) -> Self {
        self.hash_flows = on;
        self
    }

    /// Parse and classify a frame; the outcome is counted in `parse`.
    #[inline]
    pub fn classify_info(
        &self,
        frame: &[u8],
        parse: &mut ParseStats,
    ) -> Result<(PacketMeta, PacketInfo), ParseError> {
        match parse_ethernet(frame) {
            Ok(info) => {
                parse.ok += 1;
                let (variant, delay_class) = self.classifier.classify_with_delay(&info);
                let mut meta = PacketMeta::from_info(&info, self.hasher.hash(&info.flow), variant);
                meta.delay_class = delay_class;
                Ok((meta, info))
            }
            Err(e) => {
                parse.record(&Err(e));
                Err(e)
            }
        }
    }

    /// The compact classification (see [`Port::classify_compact`]); the
    /// outcome is counted in `parse`.
    #[inline]
    pub fn classify_compact(
        &self,
        frame: &[u8],
        parse: &mut ParseStats,
    ) -> Result<Classified, ParseError> {
        if !self.classifier.has_rules() {
            if let Some(h) = parse_fast_v4(frame) {
                parse.ok += 1;
                let flow_hash = if self.hash_flows {
                    self.hasher
                        .hash_v4(h.src, h.dst, h.proto, h.src_port, h.dst_port)
                } else {
                    0
                };
                return Ok(Classified {
                    flow_hash,
                    len: frame.len() as u32,
                    variant: self.classifier.by_dscp(h.tos >> 2),
                    ecn: Ecn::from_bits(h.tos),
                    flow_end: h.is_flow_end(),
                    delay_class: 0,
                    version: IpVersion::V4,
                    l3_offset: 14,
                });
            }
        }
        let (meta, info) = self.classify_info(frame, parse)?;
        Ok(Classified {
            flow_hash: if self.hash_flows { meta.flow_hash } else { 0 },
            len: meta.len,
            variant: meta.variant,
            ecn: meta.ecn,
            flow_end: meta.flow_end,
            delay_class: meta.delay_class,
            version: info.version,
            l3_offset: info.l3_offset,
        })
    }
}

/// A router egress port.
#[derive(Debug)]
pub struct Port<P, Q> {
    ingress: Ingress,
    delay: DelayLine<P>,
    qdisc: Q,
    shaper: TokenBucket,
    slot: Option<P>,
    /// When the shaper lets the packet in `slot` go (set when it was
    /// refused): [`Port::receive_and_send`] compares against it instead of
    /// asking the bucket, whose answer costs a division.
    slot_ready: Time,
    parse: ParseStats,
    counters: Counters,
    /// The discipline may drop or mark packets outside its verdicts
    /// ([`Qdisc::acts_outside_verdicts`]): drain them after each call.
    late_drops: bool,
    /// The discipline's [`Counters::marked`] when last read (`late_drops`).
    qdisc_marks: u64,
}

impl<P: PacketHandle, Q: Qdisc<P>> Port<P, Q> {
    /// A port around `qdisc`. The delay line gets a class per rule delay
    /// of `classifier` ([`Classifier::rule_delays`]) besides `delay`'s classes.
    pub fn new(
        classifier: Classifier,
        hash_seed: u64,
        delay: &DelayConfig,
        qdisc: Q,
        shaper: &ShaperConfig,
    ) -> Result<Self, ConfigError> {
        let delay = DelayLine::with_rule_delays(delay, classifier.rule_delays())?;
        Ok(Port {
            ingress: Ingress::new(classifier, hash_seed).with_flow_hash(qdisc.reads_flow_hash()),
            late_drops: qdisc.acts_outside_verdicts(),
            qdisc_marks: 0,
            delay,
            qdisc,
            shaper: TokenBucket::new(shaper)?,
            slot: None,
            slot_ready: Time::ZERO,
            parse: ParseStats::default(),
            counters: Counters::default(),
        })
    }

    /// Parse and classify a frame. An error counts the frame as received and
    /// dropped ([`DropReason::Unparsable`]); the caller frees it.
    #[inline]
    pub fn classify(&mut self, frame: &[u8]) -> Result<PacketMeta, ParseError> {
        self.classify_info(frame).map(|(meta, _)| meta)
    }

    /// [`Port::classify`], also handing back the parse result (for the
    /// header offsets a handle may keep, e.g. to set CE without re-parsing).
    #[inline]
    pub fn classify_info(&mut self, frame: &[u8]) -> Result<(PacketMeta, PacketInfo), ParseError> {
        let r = self.ingress.classify_info(frame, &mut self.parse);
        if r.is_err() {
            self.count_unparsable(frame.len());
        }
        r
    }

    /// [`Port::classify`] for a dataplane that keeps a compact handle: the
    /// fields of [`PacketMeta`] plus the IP header's version and offset (to
    /// set CE later without parsing again). Untagged IPv4 UDP/TCP frames,
    /// when no classifier rule is configured, take
    /// [`crate::packet::parse_fast_v4`] and [`FlowHasher::hash_v4`] (same
    /// results, no [`PacketInfo`]); everything else goes through
    /// [`Port::classify_info`]. Errors are counted as there.
    #[inline]
    pub fn classify_compact(&mut self, frame: &[u8]) -> Result<Classified, ParseError> {
        let r = self.ingress.classify_compact(frame, &mut self.parse);
        if r.is_err() {
            self.count_unparsable(frame.len());
        }
        r
    }

    /// Count a frame that could not be parsed as received and dropped.
    fn count_unparsable(&mut self, len: usize) {
        let len = len.min(u32::MAX as usize) as u32;
        self.counters.on_receive(len);
        self.counters.on_drop(DropReason::Unparsable, len);
    }

    /// The classification half of this port, to copy onto other cores.
    pub fn ingress(&self) -> &Ingress {
        &self.ingress
    }

    /// Accept a classified packet at `now` into the delay line.
    #[inline]
    pub fn receive(&mut self, packet: P, now: Time, sink: &mut impl Sink<P>) {
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        if self.delay.can_bypass(&packet) {
            // Zero delay and an empty line: straight to the discipline.
            self.offer(packet, now, sink);
        } else if let Err(p) = self.delay.push(packet, now) {
            self.counters.on_drop(DropReason::DelayLineFull, len);
            sink.drop(p, DropReason::DelayLineFull);
        }
    }

    /// Enqueue into the discipline; account for and hand back what it drops.
    #[inline]
    fn offer(&mut self, packet: P, now: Time, sink: &mut impl Sink<P>) {
        let verdict = self.qdisc.enqueue(packet, now);
        self.settle(verdict, sink);
    }

    /// Account for and hand back what an enqueue dropped; count a mark.
    #[inline]
    fn settle(&mut self, verdict: Verdict<P>, sink: &mut impl Sink<P>) {
        match verdict {
            Verdict::Queued => {}
            Verdict::Marked => self.counters.marked += 1,
            Verdict::Dropped {
                reason,
                packet,
                victim,
            } => {
                self.counters.on_drop(reason, packet.len_bytes());
                sink.drop(packet, reason);
                if let Some(v) = victim {
                    self.counters.on_drop(reason, v.len_bytes());
                    sink.drop(v, reason);
                }
            }
        }
        self.settle_late(sink);
    }

    /// Account for and hand back the drops no verdict carried (CoDel's at
    /// dequeue, FQ-CoDel's overflow batches), and count the marks made at
    /// dequeue.
    #[inline]
    fn settle_late(&mut self, sink: &mut impl Sink<P>) {
        if !self.late_drops {
            return;
        }
        while let Some((p, reason)) = self.qdisc.take_dropped() {
            self.counters.on_drop(reason, p.len_bytes());
            sink.drop(p, reason);
        }
        let marks = self.qdisc.counters().marked;
        self.counters.marked += marks - self.qdisc_marks;
        self.qdisc_marks = marks;
    }

    /// [`Port::receive`], then transmit from the discipline what the shaper
    /// allows at `now`, as a packet-at-a-time stack does (Linux runs the
    /// qdisc after every enqueue).
    ///
    /// A dataplane that takes frames in bursts calls this instead of
    /// `receive` and keeps calling [`Port::poll`] every loop iteration (for
    /// the delay line, the discipline's control loop and the shaper's
    /// refill). Receiving a whole RX burst before the next `poll` would
    /// leave up to a burst in the discipline even when the link is idle:
    /// RED's and CHOKe's average queue then reads the loop's batching as
    /// congestion (with the default `min_th` of 5 packets, a 32-packet burst
    /// made them drop 12-14 % of the bench's uncongested load).
    ///
    /// A packet that finds the delay line bypassable and the transmit slot
    /// free takes [`Qdisc::enqueue_dequeue`], the same enqueue and dequeue
    /// in one call, in which a discipline that finds itself empty skips its
    /// queue.
    #[inline]
    pub fn receive_and_send(&mut self, packet: P, now: Time, sink: &mut impl Sink<P>) {
        if self.slot.is_some() || !self.delay.can_bypass(&packet) {
            self.receive(packet, now, sink);
            self.send_if_link_free(now, sink);
            return;
        }
        self.counters.on_receive(packet.len_bytes());
        let (verdict, next) = self.qdisc.enqueue_dequeue(packet, now);
        self.settle(verdict, sink);
        if let Some(p) = next {
            if self.transmit_or_hold(p, now, sink) {
                self.send_ready(now, sink, true);
            }
        }
    }

    /// Move due packets through the discipline and transmit what the shaper
    /// allows. Each packet leaving the delay line is offered and then sent
    /// if the link is free, as [`Port::receive_and_send`] does: offering
    /// every due packet first would make the discipline hold a burst at
    /// each call on an idle link (a port with a `delay`, polled once per
    /// loop iteration, releases everything that fell due since the last one).
    pub fn poll(&mut self, now: Time, sink: &mut impl Sink<P>) {
        self.qdisc.poll(now);
        while let Some(p) = self.delay.pop_ready(now) {
            self.offer(p, now, sink);
            self.send_if_link_free(now, sink);
        }
        self.send_ready(now, sink, false);
    }

    /// [`Port::send_ready`] unless the packet waiting in the TX slot is not
    /// due yet (then the link is busy and nothing can go).
    #[inline]
    fn send_if_link_free(&mut self, now: Time, sink: &mut impl Sink<P>) {
        if self.slot.is_some() && now < self.slot_ready {
            return;
        }
        self.send_ready(now, sink, true);
    }

    /// Dequeue and transmit while the shaper allows; a refused packet waits
    /// in the TX slot. With `stop_when_empty`, an empty discipline is not
    /// asked to dequeue: [`Port::receive_and_send`] would otherwise pay a
    /// failed dequeue per packet (RRMQS draws a random number in each).
    /// [`Port::poll`] keeps asking, so a discipline whose dequeue has side
    /// effects sees the same calls as before this path existed (the
    /// emulator's results do not move).
    #[inline]
    fn send_ready(&mut self, now: Time, sink: &mut impl Sink<P>, stop_when_empty: bool) {
        // The packet stays in a local until the shaper refuses it: writing
        // every dequeued packet to `self.slot` and reading it back cost a
        // store-forwarding stall per packet in the DPDK profile.
        loop {
            let p = match self.slot.take() {
                Some(p) => p,
                None if stop_when_empty && self.qdisc.is_empty() => break,
                None => match self.qdisc.dequeue(now) {
                    Some(p) => p,
                    None => break,
                },
            };
            if !self.transmit_or_hold(p, now, sink) {
                break;
            }
        }
        self.settle_late(sink);
    }

    /// Transmit `p` if the shaper allows it at `now` (true), else keep it
    /// in the TX slot until the shaper releases it (false). Always inlined:
    /// out of line, its call cost the DPDK loop 4 % of its samples.
    #[inline(always)]
    fn transmit_or_hold(&mut self, p: P, now: Time, sink: &mut impl Sink<P>) -> bool {
        if self.shaper.try_consume(p.len_bytes(), now) {
            self.counters.on_dequeue(p.len_bytes());
            sink.transmit(p, now);
            true
        } else {
            self.slot_ready = self.shaper.ready_at(p.len_bytes());
            self.slot = Some(p);
            false
        }
    }

    /// When `poll` next has work: a packet leaving the delay line, or the
    /// shaper releasing the waiting packet.
    pub fn next_event(&self) -> Option<Time> {
        let tx = self
            .slot
            .as_ref()
            .map(|p| self.shaper.ready_at(p.len_bytes()));
        match (self.delay.next_release(), tx) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Packets inside the port (delay line + discipline + TX slot).
    pub fn in_flight(&self) -> usize {
        self.delay.len() + self.qdisc.len() + usize::from(self.slot.is_some())
    }

    /// Port counters: `dequeued` counts transmitted packets, `marked` the
    /// packets the discipline marked CE.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Parse outcomes.
    pub fn parse_stats(&self) -> &ParseStats {
        &self.parse
    }

    /// The discipline.
    pub fn qdisc(&self) -> &Q {
        &self.qdisc
    }

    /// The discipline, mutably.
    pub fn qdisc_mut(&mut self) -> &mut Q {
        &mut self.qdisc
    }
}

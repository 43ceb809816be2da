//! The queue-discipline interface shared by every discipline.
//!
//! - [`PacketHandle`]: what a discipline needs from a packet (length, flow
//!   hash, variant, ECN capability and a way to set CE). Handles that carry a
//!   [`PacketMeta`] get it through [`WithMeta`]: the DPDK mbuf wrapper, the
//!   emulator's packet, [`PacketMeta`] (metadata only) and [`Frame`]
//!   (metadata plus bytes).
//! - [`Qdisc`]: `enqueue(packet, now) -> Verdict`, `dequeue(now)`, lengths,
//!   [`Counters`] per [`DropReason`], and `poll(now)` for disciplines with a
//!   control loop. A discipline never reads a clock and never allocates per
//!   packet: its queues are rings allocated at construction.
//! - [`ConfigError`]: a bad parameter, naming the field, the value and the
//!   valid range.
//!
//! Accounting is exact: at any moment
//! `received == dequeued + dropped_total() + len()` (and the same in bytes),
//! where a packet dropped from inside the queue (a CHOKe victim, a CoDel
//! head drop) counts as dropped, not dequeued. Every dropped handle is handed
//! back to the caller so it can be freed (an mbuf must go back to its pool):
//! in the [`Verdict`], or for drops no verdict carries (CoDel's at dequeue,
//! FQ-CoDel's batches) through [`Qdisc::take_dropped`].

use std::fmt;

use tollgate_cca::{Time, VariantId};

use crate::packet::{set_ce_in_frame, Ecn, PacketInfo};

/// What a queue discipline needs to know about a packet.
pub trait PacketHandle {
    /// Length in bytes, as counted against byte limits and rates (the frame length).
    fn len_bytes(&self) -> u32;
    /// A seeded hash of the packet's 5-tuple (see [`crate::flow::FlowHasher`]).
    fn flow_hash(&self) -> u64;
    /// The congestion-control variant of the packet's flow.
    fn variant(&self) -> VariantId;
    /// Whether the packet may be ECN-marked instead of dropped.
    fn ecn_capable(&self) -> bool;
    /// Set the ECN field to CE; returns whether the packet was marked.
    fn set_ce(&mut self) -> bool;
    /// Whether the ECN field is ECT(1) or CE, the L4S identifier (RFC 9331)
    /// DualPI2 classifies on. Default: never (a handle that cannot tell
    /// ECT(1) from ECT(0) puts every packet in DualPI2's Classic queue).
    fn l4s(&self) -> bool {
        false
    }
    /// Whether the packet ends its flow (TCP FIN or RST). Default: never.
    fn flow_end(&self) -> bool {
        false
    }
    /// The packet's rule delay class (see [`crate::classify`]): 0 for none,
    /// `k` for the `k`-th distinct rule delay. Default: none.
    fn delay_class(&self) -> u8 {
        0
    }
    /// Whether two packets belong to the same flow. The default compares the
    /// 64-bit flow hashes; a handle holding the full 5-tuple may compare it.
    fn same_flow(&self, other: &Self) -> bool {
        self.flow_hash() == other.flow_hash()
    }
}

/// Packet metadata, usable on its own as a packet handle (the emulator and the
/// tests carry no bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Length in bytes.
    pub len: u32,
    /// Seeded 5-tuple hash.
    pub flow_hash: u64,
    /// Variant of the flow.
    pub variant: VariantId,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// TCP FIN / RST seen.
    pub flow_end: bool,
    /// Rule delay class (0: none; see [`crate::classify`]).
    pub delay_class: u8,
    /// Free for the caller (sequence number, flow index, send time...).
    pub tag: u64,
}

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta {
            len: 0,
            flow_hash: 0,
            variant: VariantId::UNMARKED,
            ecn: Ecn::NotEct,
            flow_end: false,
            delay_class: 0,
            tag: 0,
        }
    }
}

impl PacketMeta {
    /// Metadata for a parsed packet.
    #[inline]
    pub fn from_info(info: &PacketInfo, flow_hash: u64, variant: VariantId) -> Self {
        PacketMeta {
            len: info.frame_len,
            flow_hash,
            variant,
            ecn: info.ecn,
            flow_end: info.is_flow_end(),
            delay_class: 0,
            tag: 0,
        }
    }
}

/// A packet handle that carries a [`PacketMeta`]. It gets [`PacketHandle`]
/// from the metadata through the blanket impl below; a handle only says how
/// CE is set on its real bytes and, if it knows more than the hash, how flows
/// compare. The DPDK mbuf handle, the emulator's packet, [`Frame`] and
/// [`PacketMeta`] itself all take this route.
pub trait WithMeta {
    /// The packet's metadata.
    fn meta(&self) -> &PacketMeta;
    /// Set CE in the packet (and its metadata) if it is ECN-capable; returns
    /// whether it was marked.
    fn mark_ce(&mut self) -> bool;
    /// Whether two packets belong to the same flow; by default the 64-bit
    /// flow hashes are compared.
    fn same_flow_as(&self, other: &Self) -> bool {
        self.meta().flow_hash == other.meta().flow_hash
    }
}

impl<T: WithMeta> PacketHandle for T {
    #[inline]
    fn len_bytes(&self) -> u32 {
        self.meta().len
    }
    #[inline]
    fn flow_hash(&self) -> u64 {
        self.meta().flow_hash
    }
    #[inline]
    fn variant(&self) -> VariantId {
        self.meta().variant
    }
    #[inline]
    fn ecn_capable(&self) -> bool {
        self.meta().ecn.is_capable()
    }
    #[inline]
    fn set_ce(&mut self) -> bool {
        self.mark_ce()
    }
    #[inline]
    fn l4s(&self) -> bool {
        matches!(self.meta().ecn, Ecn::Ect1 | Ecn::Ce)
    }
    #[inline]
    fn flow_end(&self) -> bool {
        self.meta().flow_end
    }
    #[inline]
    fn delay_class(&self) -> u8 {
        self.meta().delay_class
    }
    #[inline]
    fn same_flow(&self, other: &Self) -> bool {
        self.same_flow_as(other)
    }
}

impl WithMeta for PacketMeta {
    #[inline]
    fn meta(&self) -> &PacketMeta {
        self
    }
    #[inline]
    fn mark_ce(&mut self) -> bool {
        if self.ecn.is_capable() {
            self.ecn = Ecn::Ce;
            true
        } else {
            false
        }
    }
}

/// A packet with its bytes: setting CE rewrites the IP header in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Parsed metadata.
    pub meta: PacketMeta,
    /// The parse result the metadata came from (for the header offsets).
    pub info: PacketInfo,
    /// The Ethernet frame.
    pub bytes: Box<[u8]>,
}

impl WithMeta for Frame {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    fn mark_ce(&mut self) -> bool {
        if set_ce_in_frame(&mut self.bytes, &self.info) {
            self.meta.ecn = Ecn::Ce;
            self.info.ecn = Ecn::Ce;
            true
        } else {
            false
        }
    }
    fn same_flow_as(&self, other: &Self) -> bool {
        self.info.flow == other.info.flow
    }
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The queue's hard limit (packets or bytes) was reached: tail drop.
    Overlimit,
    /// RED / CHOKe probabilistic early drop; DualPI2's probabilistic drop
    /// (a Classic packet with probability `p_C`, an L4S packet in overload).
    Early,
    /// RED / CHOKe forced drop (average above `max_th`, or `2 max_th` when gentle).
    Forced,
    /// CHOKe: the arrival matched a random queued packet of its flow (both dropped).
    ChokeMatch,
    /// Cebinae: over the class's leaky-bucket allowance (the tax).
    Tax,
    /// RRMQS feedback: the variant used more than its fair share last window.
    Feedback,
    /// CoDel / FQ-CoDel: dropped at the head by CoDel's control law.
    Codel,
    /// Port: the frame could not be parsed (see [`crate::packet::ParseError`]).
    Unparsable,
    /// Port: the delay line was full.
    DelayLineFull,
}

impl DropReason {
    /// Number of reasons (the size of [`Counters::dropped`]).
    pub const COUNT: usize = 9;
    /// Every reason, in counter order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Overlimit,
        DropReason::Early,
        DropReason::Forced,
        DropReason::ChokeMatch,
        DropReason::Tax,
        DropReason::Feedback,
        DropReason::Codel,
        DropReason::Unparsable,
        DropReason::DelayLineFull,
    ];

    /// Index into [`Counters::dropped`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short lowercase name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Overlimit => "overlimit",
            DropReason::Early => "early",
            DropReason::Forced => "forced",
            DropReason::ChokeMatch => "choke_match",
            DropReason::Tax => "tax",
            DropReason::Feedback => "feedback",
            DropReason::Codel => "codel",
            DropReason::Unparsable => "unparsable",
            DropReason::DelayLineFull => "delay_line_full",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The outcome of an enqueue.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a dropped packet handle must be freed by the caller"]
pub enum Verdict<P> {
    /// The packet was queued unchanged.
    Queued,
    /// The packet was queued and marked CE instead of being dropped.
    Marked,
    /// The packet was dropped; `victim` is a queued packet dropped with it
    /// (CHOKe's matched pair), counted under the same reason.
    Dropped {
        /// Why.
        reason: DropReason,
        /// The dropped packet, handed back: the arrival, except under FQ,
        /// which may queue the arrival and drop the newest packet of its
        /// longest queue instead (see [`crate::fq`]).
        packet: P,
        /// A packet removed from the queue together with the arrival.
        victim: Option<P>,
    },
}

impl<P> Verdict<P> {
    /// Whether the arriving packet was queued (marked or not).
    pub fn is_queued(&self) -> bool {
        !matches!(self, Verdict::Dropped { .. })
    }

    /// The drop reason, if the arrival was dropped.
    pub fn drop_reason(&self) -> Option<DropReason> {
        match self {
            Verdict::Dropped { reason, .. } => Some(*reason),
            _ => None,
        }
    }
}

/// Packet and byte counters of a discipline (or a port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets offered to `enqueue`.
    pub received: u64,
    /// Bytes offered to `enqueue`.
    pub received_bytes: u64,
    /// Packets handed out by `dequeue`.
    pub dequeued: u64,
    /// Bytes handed out by `dequeue`.
    pub dequeued_bytes: u64,
    /// Packets marked CE instead of being dropped: at enqueue (RED), or at
    /// dequeue (CoDel, FQ-CoDel, DualPI2). They are counted as queued and dequeued too.
    pub marked: u64,
    /// Dropped packets per [`DropReason::index`].
    pub dropped: [u64; DropReason::COUNT],
    /// Dropped bytes per [`DropReason::index`].
    pub dropped_bytes: [u64; DropReason::COUNT],
}

impl Counters {
    /// Count an arrival.
    #[inline]
    pub fn on_receive(&mut self, len: u32) {
        self.received += 1;
        self.received_bytes += u64::from(len);
    }

    /// Count a departure.
    #[inline]
    pub fn on_dequeue(&mut self, len: u32) {
        self.dequeued += 1;
        self.dequeued_bytes += u64::from(len);
    }

    /// Count a drop.
    #[inline]
    pub fn on_drop(&mut self, reason: DropReason, len: u32) {
        self.dropped[reason.index()] += 1;
        self.dropped_bytes[reason.index()] += u64::from(len);
    }

    /// The verdict on an arrival that was queued, counting it as marked
    /// if it was marked CE instead of being dropped.
    #[inline]
    pub fn queued<P>(&mut self, marked: bool) -> Verdict<P> {
        if marked {
            self.marked += 1;
            Verdict::Marked
        } else {
            Verdict::Queued
        }
    }

    /// Count `packet` as dropped for `reason` and return the verdict that
    /// hands it back to the caller.
    #[inline]
    pub fn drop<P: PacketHandle>(&mut self, reason: DropReason, packet: P) -> Verdict<P> {
        self.on_drop(reason, packet.len_bytes());
        Verdict::Dropped {
            reason,
            packet,
            victim: None,
        }
    }

    /// Drops for one reason.
    pub fn dropped_for(&self, reason: DropReason) -> u64 {
        self.dropped[reason.index()]
    }

    /// All dropped packets.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// All dropped bytes.
    pub fn dropped_bytes_total(&self) -> u64 {
        self.dropped_bytes.iter().sum()
    }
}

/// The two calls [`Qdisc::enqueue_dequeue`] stands for: what it does unless
/// a discipline overrides it, and an override's way back when its queue is
/// not empty.
#[inline]
pub fn enqueue_then_dequeue<P: PacketHandle, Q: Qdisc<P> + ?Sized>(
    q: &mut Q,
    packet: P,
    now: Time,
) -> (Verdict<P>, Option<P>) {
    let verdict = q.enqueue(packet, now);
    let next = if q.is_empty() { None } else { q.dequeue(now) };
    (verdict, next)
}

/// A queue discipline over packet handles `P`.
///
/// Object safe: a port may hold a `Box<dyn Qdisc<P>>` chosen at run time.
pub trait Qdisc<P: PacketHandle> {
    /// Offer a packet arriving at `now`.
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P>;
    /// Take the next packet to transmit at `now`, if any.
    fn dequeue(&mut self, now: Time) -> Option<P>;
    /// [`Qdisc::enqueue`] and then, unless the discipline is empty after
    /// it, [`Qdisc::dequeue`], at the same `now`, in one call: the verdict
    /// on the arrival and the packet to transmit.
    ///
    /// A port calls it for each packet that finds the link free (nothing
    /// waiting in its transmit slot, no delay to serve). On an uncongested
    /// port the discipline is then almost always empty, and Linux would
    /// skip an empty work-conserving qdisc altogether (`TCQ_F_CAN_BYPASS`). A
    /// discipline overrides it where one call can skip the queue; the
    /// verdict, the packet, and the discipline's state and counters after it
    /// must be exactly those of the two calls (each override is tested
    /// against them, whatever the queue holds).
    #[inline]
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        enqueue_then_dequeue(self, packet, now)
    }
    /// Queued packets.
    fn len(&self) -> usize;
    /// Queued bytes.
    fn bytes(&self) -> u64;
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Counters since construction.
    fn counters(&self) -> &Counters;
    /// Advance timers (control loops, measurement windows) to `now` without
    /// a packet event. Disciplines without timers ignore it.
    fn poll(&mut self, now: Time) {
        let _ = now;
    }
    /// The discipline's name (`droptail`, `red`, ...).
    fn name(&self) -> &'static str;
    /// Whether the discipline reads [`PacketHandle::flow_hash`]. A port
    /// whose discipline does not (DropTail, RED) skips hashing each frame on
    /// the dataplane's fast path ([`crate::port::Ingress::classify_compact`]).
    /// Default: it does.
    fn reads_flow_hash(&self) -> bool {
        true
    }
    /// Take back, oldest first, a packet the discipline dropped without a
    /// verdict to carry it: CoDel drops at the head during `dequeue`, and
    /// FQ-CoDel drops a batch from its fattest queue when an arrival
    /// overflows it. Each is already counted in [`Qdisc::counters`]. A port
    /// drains them after every enqueue and dequeue; the discipline holds at
    /// most its packet limit of them and frees the oldest (drops the Rust
    /// handle) if nobody takes them. Default: none.
    fn take_dropped(&mut self) -> Option<(P, DropReason)> {
        None
    }
    /// Whether the discipline drops or marks packets outside its enqueue
    /// verdicts (CoDel and FQ-CoDel: at dequeue, and in overflow batches;
    /// DualPI2: at dequeue).
    /// A port asks once; if so, it drains [`Qdisc::take_dropped`] and takes
    /// the new marks from [`Counters::marked`] after every call.
    fn acts_outside_verdicts(&self) -> bool {
        false
    }
}

impl<P: PacketHandle, Q: Qdisc<P> + ?Sized> Qdisc<P> for Box<Q> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        (**self).enqueue(packet, now)
    }
    fn dequeue(&mut self, now: Time) -> Option<P> {
        (**self).dequeue(now)
    }
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        (**self).enqueue_dequeue(packet, now)
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn bytes(&self) -> u64 {
        (**self).bytes()
    }
    fn counters(&self) -> &Counters {
        (**self).counters()
    }
    fn poll(&mut self, now: Time) {
        (**self).poll(now)
    }
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn reads_flow_hash(&self) -> bool {
        (**self).reads_flow_hash()
    }
    fn take_dropped(&mut self) -> Option<(P, DropReason)> {
        (**self).take_dropped()
    }
    fn acts_outside_verdicts(&self) -> bool {
        (**self).acts_outside_verdicts()
    }
}

/// A configuration parameter out of its valid range.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    /// The discipline (`red`, `cebinae`...).
    pub discipline: &'static str,
    /// The parameter's name.
    pub field: &'static str,
    /// The offending value, printed.
    pub value: String,
    /// The valid range, in words (`"(0, 1]"`, `"> min_th"`).
    pub valid: String,
}

impl ConfigError {
    /// A new error.
    pub fn new(
        discipline: &'static str,
        field: &'static str,
        value: impl fmt::Display,
        valid: impl Into<String>,
    ) -> Self {
        ConfigError {
            discipline,
            field,
            value: value.to_string(),
            valid: valid.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: `{}` = {} is out of range; valid: {}",
            self.discipline, self.field, self.value, self.valid
        )
    }
}

impl std::error::Error for ConfigError {}

/// Check helpers for `validate()` implementations.
pub(crate) mod check {
    use super::ConfigError;

    /// `lo <= v <= hi` (finite).
    pub fn range(
        d: &'static str,
        field: &'static str,
        v: f64,
        lo: f64,
        hi: f64,
    ) -> Result<(), ConfigError> {
        if v.is_finite() && v >= lo && v <= hi {
            Ok(())
        } else {
            Err(ConfigError::new(d, field, v, format!("[{lo}, {hi}]")))
        }
    }

    /// `lo < v <= hi` (finite).
    pub fn open_closed(
        d: &'static str,
        field: &'static str,
        v: f64,
        lo: f64,
        hi: f64,
    ) -> Result<(), ConfigError> {
        if v.is_finite() && v > lo && v <= hi {
            Ok(())
        } else {
            Err(ConfigError::new(d, field, v, format!("({lo}, {hi}]")))
        }
    }

    /// `lo <= v <= hi` for integers.
    pub fn int(
        d: &'static str,
        field: &'static str,
        v: u64,
        lo: u64,
        hi: u64,
    ) -> Result<(), ConfigError> {
        if (lo..=hi).contains(&v) {
            Ok(())
        } else {
            Err(ConfigError::new(d, field, v, format!("{lo} ..= {hi}")))
        }
    }
}

//! FQ-CoDel, the flow-queue CoDel scheduler and AQM (Hoeiland-Joergensen,
//! McKenney, Taht, Gettys & Dumazet, RFC 8290), Linux's default qdisc.
//!
//! - **Flow queues.** A packet goes to queue `flow_hash % flows` (the seeded
//!   5-tuple hash, mapped as FQ maps it: [`crate::fq::queue_of`]), stamped
//!   with its enqueue time. Default 1024 queues.
//! - **New and old flows.** A queue that is in neither list when a packet
//!   arrives joins the tail of the *new* list with `deficit = quantum`.
//!   Dequeue serves the head of the new list if there is one, else the head
//!   of the old list. A queue at the head whose deficit is not positive gets
//!   `deficit += quantum` and moves to the tail of the old list. Otherwise
//!   CoDel dequeues from it (the queue's own [`CodelState`]); the packet's
//!   length is taken from the deficit. A queue CoDel finds empty moves from
//!   the new list to the tail of the old list, or leaves the old list (it
//!   comes back as a new flow with its next packet). So a flow that sends
//!   less than a quantum per round is served ahead of the backlogged ones,
//!   and backlogged flows get equal bytes per round (DRR, Shreedhar &
//!   Varghese 1995) whatever their packet sizes. These are RFC 8290's
//!   section 4 rules.
//! - **CoDel per queue** with `target` (5 ms) and `interval` (100 ms), ECN
//!   marking of ECN-capable packets instead of dropping when `ecn` is on
//!   (the default, as in Linux). CoDel's "at most one MTU queued" exception
//!   looks at the whole discipline's backlog, as Linux does.
//! - **Overflow.** When an arrival makes the discipline hold more than
//!   `limit` packets (default 10240) or `memory_limit` bytes (default
//!   32 MiB, counting frame lengths), packets are dropped from the *head* of
//!   the queue with the most bytes (RFC 8290 section 4.1), Linux-style in a
//!   batch: until half of that queue's bytes are gone or `drop_batch`
//!   packets (default 64) are dropped, and batch after batch until both
//!   limits hold. A flood thus loses its own oldest packets. The drops are
//!   counted under [`DropReason::Overlimit`] and handed back through
//!   [`Qdisc::take_dropped`]; the arrival's verdict is `Queued`, unless the
//!   batch took the arrival itself (its queue was the fattest and held only
//!   it), which is then the verdict's dropped packet.
//!
//! CoDel's drops ([`DropReason::Codel`]) happen at dequeue and come back
//! through [`Qdisc::take_dropped`] as well; marks count in
//! [`Counters::marked`].

use std::collections::VecDeque;

use tollgate_cca::Time;

use crate::codel::{CodelLaw, CodelParams, CodelQueue, CodelState, DropBox};
use crate::fq::FlowQueues;
use crate::qdisc::{check, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict};

const NAME: &str = "fq_codel";

/// FQ-CoDel's parameters (Linux `fq_codel`'s defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqCodelConfig {
    /// Packets queued in all. Default 10240.
    pub limit: u32,
    /// Bytes queued in all (frame lengths). Default 32 MiB.
    pub memory_limit: u64,
    /// Flow queues, 1 ..= 65536. Default 1024.
    pub flows: u32,
    /// Bytes of deficit a queue gets per round, at least 64. Default 1514.
    pub quantum: u32,
    /// At most this many packets dropped per overflow batch. Default 64.
    pub drop_batch: u32,
    /// CoDel's parameters; `ecn` on by default.
    pub codel: CodelParams,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            limit: 10_240,
            memory_limit: 32 << 20,
            flows: 1024,
            quantum: 1514,
            drop_batch: 64,
            codel: CodelParams {
                ecn: true,
                ..CodelParams::DEFAULT
            },
        }
    }
}

impl FqCodelConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::int(NAME, "limit", u64::from(self.limit), 1, 1 << 24)?;
        check::int(NAME, "memory_limit", self.memory_limit, 1, 1 << 40)?;
        check::int(NAME, "flows", u64::from(self.flows), 1, 65_536)?;
        check::int(NAME, "quantum", u64::from(self.quantum), 64, 1 << 20)?;
        check::int(NAME, "drop_batch", u64::from(self.drop_batch), 1, 1 << 16)?;
        self.codel.validate(NAME)
    }
}

/// Which list a queue is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

/// The FQ-CoDel discipline.
#[derive(Debug)]
pub struct FqCodel<P> {
    queues: FlowQueues<P>,
    codel: Vec<CodelState>,
    deficit: Vec<i64>,
    list: Vec<List>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    law: CodelLaw,
    quantum: i64,
    limit: usize,
    memory_limit: u64,
    drop_batch: u32,
    counters: Counters,
    dropped: DropBox<P>,
    new_flow_count: u64,
}

/// One flow queue as CoDel sees it during a dequeue.
struct FlowQueue<'a, P> {
    queues: &'a mut FlowQueues<P>,
    q: usize,
    counters: &'a mut Counters,
    dropped: &'a mut DropBox<P>,
}

impl<P: PacketHandle> CodelQueue<P> for FlowQueue<'_, P> {
    #[inline]
    fn pop_head(&mut self) -> Option<(P, Time)> {
        self.queues.pop_front(self.q)
    }
    #[inline]
    fn backlog_bytes(&self) -> u64 {
        self.queues.bytes()
    }
    fn dropped(&mut self, packet: P) {
        self.dropped.drop(self.counters, DropReason::Codel, packet);
    }
}

impl<P: PacketHandle> FqCodel<P> {
    /// Build from a validated configuration.
    pub fn new(config: &FqCodelConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let n = config.flows as usize;
        let limit = config.limit as usize;
        Ok(FqCodel {
            // One slot beyond the limit: an arrival is queued, then the
            // overflow is dropped.
            queues: FlowQueues::new(n, limit + 1),
            codel: vec![CodelState::default(); n],
            deficit: vec![0; n],
            list: vec![List::None; n],
            new_flows: VecDeque::with_capacity(n),
            old_flows: VecDeque::with_capacity(n),
            law: CodelLaw::from(&config.codel),
            quantum: i64::from(config.quantum),
            limit,
            memory_limit: config.memory_limit,
            drop_batch: config.drop_batch,
            counters: Counters::default(),
            dropped: DropBox::new(limit + 1),
            new_flow_count: 0,
        })
    }

    /// Times a queue joined the new-flows list.
    pub fn new_flow_count(&self) -> u64 {
        self.new_flow_count
    }

    /// Queues in the new-flows and old-flows lists.
    pub fn list_lengths(&self) -> (usize, usize) {
        (self.new_flows.len(), self.old_flows.len())
    }

    /// CoDel's state of flow queue `q`.
    pub fn codel_state(&self, q: usize) -> &CodelState {
        &self.codel[q]
    }

    /// The queue with the most bytes (then the most packets, for
    /// zero-length ones; the lowest index of equals).
    fn fattest(&self) -> usize {
        let key = |q: usize| (self.queues.queue_bytes(q), self.queues.count(q));
        let mut best = 0;
        for q in 1..self.queues.queues() {
            if key(q) > key(best) {
                best = q;
            }
        }
        best
    }

    fn over_limits(&self) -> bool {
        self.queues.len() > self.limit || self.queues.bytes() > self.memory_limit
    }

    /// Drop batches from the heads of the fattest queues until both limits
    /// hold; returns the arrival (queued last in queue `arrival_q`) if a
    /// batch took it.
    fn drop_overflow(&mut self, arrival_q: usize) -> Option<P> {
        let mut arrival = None;
        while self.over_limits() {
            let fat = self.fattest();
            let threshold = self.queues.queue_bytes(fat) / 2;
            let (mut n, mut bytes) = (0u32, 0u64);
            while let Some((p, _)) = self.queues.pop_front(fat) {
                let len = p.len_bytes();
                if fat == arrival_q && self.queues.count(fat) == 0 {
                    self.counters.on_drop(DropReason::Overlimit, len);
                    arrival = Some(p);
                } else {
                    self.dropped
                        .drop(&mut self.counters, DropReason::Overlimit, p);
                }
                n += 1;
                bytes += u64::from(len);
                if n >= self.drop_batch || bytes >= threshold {
                    break;
                }
            }
        }
        arrival
    }
}

impl<P: PacketHandle> Qdisc<P> for FqCodel<P> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        self.counters.on_receive(packet.len_bytes());
        let q = self.queues.queue_for(&packet);
        self.queues.push_back(q, packet, now);
        if self.list[q] == List::None {
            self.list[q] = List::New;
            self.deficit[q] = self.quantum;
            self.new_flows.push_back(q as u32);
            self.new_flow_count += 1;
        }
        if !self.over_limits() {
            return Verdict::Queued;
        }
        match self.drop_overflow(q) {
            None => Verdict::Queued,
            Some(packet) => Verdict::Dropped {
                reason: DropReason::Overlimit,
                packet,
                victim: None,
            },
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<P> {
        loop {
            let (q, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&q), _) => (q as usize, true),
                (None, Some(&q)) => (q as usize, false),
                (None, None) => return None,
            };
            if self.deficit[q] <= 0 {
                self.deficit[q] += self.quantum;
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                self.old_flows.push_back(q as u32);
                self.list[q] = List::Old;
                continue;
            }
            let out = self.codel[q].dequeue(
                &self.law,
                &mut FlowQueue {
                    queues: &mut self.queues,
                    q,
                    counters: &mut self.counters,
                    dropped: &mut self.dropped,
                },
                now,
            );
            let Some(p) = out.packet else {
                if from_new {
                    self.new_flows.pop_front();
                    self.old_flows.push_back(q as u32);
                    self.list[q] = List::Old;
                } else {
                    self.old_flows.pop_front();
                    self.list[q] = List::None;
                }
                continue;
            };
            let len = p.len_bytes();
            self.deficit[q] -= i64::from(len);
            self.counters.on_dequeue(len);
            self.counters.marked += u64::from(out.marked);
            return Some(p);
        }
    }

    fn len(&self) -> usize {
        self.queues.len()
    }

    fn bytes(&self) -> u64 {
        self.queues.bytes()
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn take_dropped(&mut self) -> Option<(P, DropReason)> {
        self.dropped.take()
    }

    fn acts_outside_verdicts(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::PacketMeta;

    const MS: u64 = 1_000_000;

    fn pkt(flow: u64, len: u32) -> PacketMeta {
        PacketMeta {
            len,
            flow_hash: flow,
            tag: flow,
            ..PacketMeta::default()
        }
    }

    fn fq_codel(f: impl FnOnce(&mut FqCodelConfig)) -> FqCodel<PacketMeta> {
        let mut c = FqCodelConfig {
            flows: 64,
            ..FqCodelConfig::default()
        };
        f(&mut c);
        FqCodel::new(&c).unwrap()
    }

    fn drain_dropped(q: &mut FqCodel<PacketMeta>) -> Vec<(PacketMeta, DropReason)> {
        std::iter::from_fn(|| q.take_dropped()).collect()
    }

    #[test]
    fn a_new_flow_is_served_before_the_backlogged_old_flows() {
        let mut q = fq_codel(|_| {});
        let t = Time::ZERO;
        for _ in 0..50 {
            for f in [1, 2] {
                assert_eq!(q.enqueue(pkt(f, 1500), t), Verdict::Queued);
            }
        }
        // Each sends while its deficit is positive (two 1500-byte packets
        // of a 1514-byte quantum), then moves to the old list.
        let first: Vec<u64> = (0..5).map(|_| q.dequeue(t).unwrap().tag).collect();
        assert_eq!(first, [1, 1, 2, 2, 1]);
        assert_eq!(q.list_lengths(), (0, 2));
        // A sparse flow arrives: it goes out next, ahead of both.
        assert_eq!(q.enqueue(pkt(3, 100), t), Verdict::Queued);
        assert_eq!(q.list_lengths(), (1, 2));
        assert_eq!(q.dequeue(t).unwrap().tag, 3);
        // Its queue is empty: the next dequeue moves it to the old list
        // and serves an old flow.
        let next = q.dequeue(t).unwrap().tag;
        assert!(next == 1 || next == 2);
        assert_eq!(q.list_lengths(), (0, 3));
        assert_eq!(q.new_flow_count(), 3);
    }

    #[test]
    fn a_queue_that_empties_from_the_new_list_does_not_come_back_new_at_once() {
        let mut q = fq_codel(|_| {});
        let t = Time::ZERO;
        for _ in 0..20 {
            let _ = q.enqueue(pkt(1, 500), t);
        }
        // Four packets on the first quantum, then flow 1 is old with a
        // fresh quantum and sends a fifth (deficit 528 left).
        for _ in 0..5 {
            assert_eq!(q.dequeue(t).unwrap().tag, 1);
        }
        // Flow 2 sends one packet and is served at once (new).
        let _ = q.enqueue(pkt(2, 100), t);
        assert_eq!(q.dequeue(t).unwrap().tag, 2);
        // Its empty queue moves to the old list; flow 1 goes on.
        assert_eq!(q.dequeue(t).unwrap().tag, 1);
        assert_eq!(q.list_lengths(), (0, 2));
        // Flow 2's next packet finds its queue in the old list: it waits
        // for its turn there instead of jumping ahead as a new flow.
        let _ = q.enqueue(pkt(2, 100), t);
        assert_eq!(q.list_lengths(), (0, 2));
        assert_eq!(q.new_flow_count(), 2);
        assert_eq!(q.dequeue(t).unwrap().tag, 1);
        assert_eq!(q.dequeue(t).unwrap().tag, 2);
    }

    #[test]
    fn backlogged_flows_get_equal_bytes_whatever_their_packet_sizes() {
        let mut q = fq_codel(|c| c.limit = 100_000);
        let t = Time::ZERO;
        for _ in 0..3000 {
            for p in [pkt(0, 1500), pkt(1, 100), pkt(1, 100), pkt(2, 600)] {
                assert_eq!(q.enqueue(p, t), Verdict::Queued);
            }
        }
        // At t = 0 nobody has waited: CoDel stays out of it.
        let mut sent = [0u64; 3];
        for _ in 0..2000 {
            let p = q.dequeue(t).unwrap();
            sent[p.tag as usize] += u64::from(p.len);
        }
        let mean = sent.iter().sum::<u64>() as f64 / 3.0;
        for s in sent {
            assert!(
                (s as f64 - mean).abs() <= 2.0 * 1514.0,
                "bytes per flow {sent:?} not within two quanta of the mean"
            );
        }
    }

    #[test]
    fn overflow_drops_from_the_head_of_the_flood_queue() {
        let mut q = fq_codel(|c| c.limit = 100);
        let t = Time::ZERO;
        for _ in 0..5 {
            let _ = q.enqueue(pkt(7, 1000), t);
        }
        for i in 0..95 {
            assert_eq!(q.enqueue(pkt(9, 1000 + i), t), Verdict::Queued);
        }
        assert_eq!(q.len(), 100);
        // One more packet of the small flow: the flood's queue (95 packets)
        // loses its oldest half, the arrival stays.
        assert_eq!(q.enqueue(pkt(7, 1000), t), Verdict::Queued);
        let dropped = drain_dropped(&mut q);
        assert!(!dropped.is_empty());
        for (k, (p, reason)) in dropped.iter().enumerate() {
            assert_eq!((p.tag, *reason), (9, DropReason::Overlimit));
            assert_eq!(p.len, 1000 + k as u32, "oldest first");
        }
        // Half of the flood's bytes.
        let flood_bytes: u64 = (0..95).map(|i| 1000 + i).sum();
        let gone: u64 = dropped.iter().map(|(p, _)| u64::from(p.len)).sum();
        assert!(gone >= flood_bytes / 2 && gone - 1094 < flood_bytes / 2);
        assert_eq!(
            q.counters().dropped_for(DropReason::Overlimit),
            dropped.len() as u64
        );
        assert_eq!(q.len(), 101 - dropped.len());
    }

    #[test]
    fn drop_batch_caps_a_batch() {
        let mut q = fq_codel(|c| {
            c.limit = 200;
            c.drop_batch = 4;
        });
        for _ in 0..201 {
            let _ = q.enqueue(pkt(3, 500), Time::ZERO);
        }
        assert_eq!(drain_dropped(&mut q).len(), 4);
        assert_eq!(q.len(), 197);
    }

    #[test]
    fn the_memory_limit_holds() {
        let mut q = fq_codel(|c| c.memory_limit = 30_000);
        let mut t = 0;
        for i in 0..2000u64 {
            let v = q.enqueue(pkt(i % 5, 200 + (i % 7) as u32 * 200), Time::from_nanos(t));
            assert!(q.bytes() <= 30_000, "{} bytes after {i}", q.bytes());
            if let Verdict::Dropped { packet, .. } = v {
                assert_eq!(packet.tag, i % 5);
            }
            if i % 3 == 0 {
                let _ = q.dequeue(Time::from_nanos(t));
            }
            t += 10_000;
        }
        assert!(q.counters().dropped_for(DropReason::Overlimit) > 0);
    }

    #[test]
    fn an_arrival_in_a_lone_fattest_queue_is_the_verdicts_drop() {
        let mut q = fq_codel(|c| c.memory_limit = 3000);
        assert_eq!(q.enqueue(pkt(1, 1000), Time::ZERO), Verdict::Queued);
        match q.enqueue(pkt(2, 5000), Time::ZERO) {
            Verdict::Dropped {
                packet,
                reason,
                victim,
            } => {
                assert_eq!(
                    (packet.tag, reason, victim),
                    (2, DropReason::Overlimit, None)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(drain_dropped(&mut q).is_empty());
        assert_eq!((q.len(), q.bytes()), (1, 1000));
    }

    #[test]
    fn codel_runs_per_queue_and_marks_ect_packets() {
        // Flow 1 keeps a standing queue of 30 packets, flow 2 sends one
        // packet per 10 ms; the link serves one packet per ms.
        let mut q = fq_codel(|_| {});
        let ect = |f, ecn| PacketMeta {
            ecn,
            ..pkt(f, 1500)
        };
        for _ in 0..30 {
            let _ = q.enqueue(ect(1, Ecn::Ect0), Time::ZERO);
        }
        let mut sparse_waits = Vec::new();
        for ms in 1..1000u64 {
            let now = Time::from_nanos(ms * MS);
            let _ = q.enqueue(ect(1, Ecn::Ect0), now);
            if ms % 10 == 0 {
                let _ = q.enqueue(ect(2, Ecn::NotEct), now);
            }
            if let Some(p) = q.dequeue(now) {
                if p.tag == 2 {
                    sparse_waits.push(ms % 10);
                }
            }
        }
        let c = q.counters();
        assert!(c.marked > 0, "{c:?}");
        assert_eq!(c.dropped_total(), 0, "ECT packets are marked, not dropped");
        assert!(q.codel_state(1).dropping() || q.codel_state(1).count() > 0);
        assert_eq!(q.codel_state(2).count(), 0, "the sparse flow is never hit");
        // The sparse flow's packets leave at once (as new flows).
        assert!(sparse_waits.iter().all(|&w| w == 0), "{sparse_waits:?}");
        // The same without ECN: CoDel drops.
        let mut q = fq_codel(|c| c.codel.ecn = false);
        for _ in 0..30 {
            let _ = q.enqueue(ect(1, Ecn::Ect0), Time::ZERO);
        }
        for ms in 1..1000u64 {
            let now = Time::from_nanos(ms * MS);
            let _ = q.enqueue(ect(1, Ecn::Ect0), now);
            let _ = q.dequeue(now);
        }
        assert_eq!(q.counters().marked, 0);
        let codel_drops = q.counters().dropped_for(DropReason::Codel);
        assert!(codel_drops > 0);
        assert!(drain_dropped(&mut q)
            .iter()
            .all(|(p, r)| p.tag == 1 && *r == DropReason::Codel));
    }

    #[test]
    fn counters_add_up() {
        let mut q = fq_codel(|c| {
            c.limit = 64;
            c.memory_limit = 60_000;
        });
        let mut back = 0u64;
        let mut t = 0u64;
        for i in 0..20_000u64 {
            let p = PacketMeta {
                ecn: if i % 3 == 0 { Ecn::Ect0 } else { Ecn::NotEct },
                ..pkt(i % 11, 64 + (i * 37 % 1400) as u32)
            };
            if let Verdict::Dropped { .. } = q.enqueue(p, Time::from_nanos(t)) {
                back += 1;
            }
            if i % 2 == 0 && q.dequeue(Time::from_nanos(t)).is_some() {
                back += 1;
            }
            back += drain_dropped(&mut q).len() as u64;
            t += 300_000;
            let c = q.counters();
            assert_eq!(c.received, c.dequeued + c.dropped_total() + q.len() as u64);
            assert_eq!(
                c.received_bytes,
                c.dequeued_bytes + c.dropped_bytes_total() + q.bytes()
            );
        }
        let c = q.counters();
        assert_eq!(back, c.dequeued + c.dropped_total());
        assert!(c.dropped_for(DropReason::Overlimit) > 0, "{c:?}");
        assert!(
            c.dropped_for(DropReason::Codel) > 0 && c.marked > 0,
            "{c:?}"
        );
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let bad = |f: fn(&mut FqCodelConfig)| {
            let mut c = FqCodelConfig::default();
            f(&mut c);
            c.validate().unwrap_err().field
        };
        assert_eq!(bad(|c| c.limit = 0), "limit");
        assert_eq!(bad(|c| c.memory_limit = 0), "memory_limit");
        assert_eq!(bad(|c| c.flows = 0), "flows");
        assert_eq!(bad(|c| c.quantum = 10), "quantum");
        assert_eq!(bad(|c| c.drop_batch = 0), "drop_batch");
        assert_eq!(bad(|c| c.codel.interval = Duration::ZERO), "interval");
    }
}

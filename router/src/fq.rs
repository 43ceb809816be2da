//! FQ: stochastic fair queuing served by Deficit Round Robin, the fairness
//! reference (a JFI of 1.0 among backlogged flows) the Cebinae paper puts
//! beside FIFO and Cebinae.
//!
//! - Flows are hashed into `buckets` queues by the packet's seeded 5-tuple
//!   hash (McKenney, "Stochastic Fairness Queueing", INFOCOM 1990), so the
//!   state is fixed-size whatever the traffic: two flows share a queue only
//!   when their hashes collide.
//! - Dequeue is Deficit Round Robin (Shreedhar & Varghese, SIGCOMM 1995):
//!   the backlogged queues take turns; a queue at the front of the round
//!   whose deficit `D` is below its head packet's length gets `D += quantum`
//!   and goes to the back; otherwise it sends the packet and `D -= len`. A
//!   queue that empties leaves the round with `D = 0`. Over a round every
//!   backlogged queue sends `quantum` bytes, whatever its packet sizes.
//! - The buffer (`limit` packets) is shared. When it is full, the newest
//!   packet of the longest queue is dropped (as Linux `sfq` and `fq_codel`
//!   drop from the fattest flow): the arrival itself when its queue is the
//!   longest, else the arrival is queued and the victim, another flow's
//!   packet, is the one handed back as dropped ([`Verdict::Dropped`]'s
//!   `packet`). A flood thus loses its own packets, not a small flow's.

use std::collections::VecDeque;

use tollgate_cca::Time;

use crate::qdisc::{check, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict};

const NAME: &str = "fq";

/// FQ parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqConfig {
    /// Packets queued in all, across buckets. Default 1000.
    pub limit: u32,
    /// Flow queues (hash buckets), 1 ..= 65536. Default 1024.
    pub buckets: u32,
    /// Bytes a queue may send per round, at least 64. Default 1514 (one
    /// full Ethernet frame, so one packet per round at most sizes).
    pub quantum: u32,
}

impl Default for FqConfig {
    fn default() -> Self {
        FqConfig {
            limit: 1000,
            buckets: 1024,
            quantum: 1514,
        }
    }
}

impl FqConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::int(NAME, "limit", u64::from(self.limit), 1, 1 << 24)?;
        check::int(NAME, "buckets", u64::from(self.buckets), 1, 65_536)?;
        check::int(NAME, "quantum", u64::from(self.quantum), 64, 1 << 20)?;
        Ok(())
    }
}

/// No slot.
const NIL: u32 = u32::MAX;

/// The queue of a flow among `queues`: its seeded 5-tuple hash modulo the
/// number of queues (a mask when that is a power of two, the same value
/// without a division). FQ and FQ-CoDel map flows to queues with this one
/// rule.
#[inline]
pub fn queue_of(flow_hash: u64, queues: usize) -> usize {
    let n = queues as u64;
    if n.is_power_of_two() {
        (flow_hash & (n - 1)) as usize
    } else {
        (flow_hash % n) as usize
    }
}

/// Many FIFO flow queues over one slab of packet slots allocated at
/// construction: each queue is a doubly linked list through the slab
/// (`next`/`prev`), so the per-packet path never allocates, whatever the
/// number of flows. Each packet keeps the time it was enqueued (FQ-CoDel's
/// sojourn time). Shared by [`Fq`] and [`crate::fq_codel::FqCodel`].
#[derive(Debug)]
pub(crate) struct FlowQueues<P> {
    slots: Vec<Option<P>>,
    stamp: Vec<Time>,
    next: Vec<u32>,
    prev: Vec<u32>,
    free: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    count: Vec<u32>,
    queue_bytes: Vec<u64>,
    len: usize,
    bytes: u64,
}

impl<P: PacketHandle> FlowQueues<P> {
    /// `queues` empty queues sharing `slots` packet slots.
    pub(crate) fn new(queues: usize, slots: usize) -> Self {
        FlowQueues {
            slots: (0..slots).map(|_| None).collect(),
            stamp: vec![Time::ZERO; slots],
            next: vec![NIL; slots],
            prev: vec![NIL; slots],
            free: (0..slots as u32).rev().collect(),
            head: vec![NIL; queues],
            tail: vec![NIL; queues],
            count: vec![0; queues],
            queue_bytes: vec![0; queues],
            len: 0,
            bytes: 0,
        }
    }

    /// The queue of `p` ([`queue_of`]).
    #[inline]
    pub(crate) fn queue_for(&self, p: &P) -> usize {
        queue_of(p.flow_hash(), self.head.len())
    }

    /// Number of queues.
    pub(crate) fn queues(&self) -> usize {
        self.head.len()
    }

    /// Whether every slot holds a packet.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    /// Append `p`, enqueued at `now`, to queue `q`; the caller has checked
    /// that a slot is free.
    #[inline]
    pub(crate) fn push_back(&mut self, q: usize, p: P, now: Time) {
        let s = self.free.pop().expect("a free slot below the limit");
        let len = u64::from(p.len_bytes());
        self.len += 1;
        self.bytes += len;
        self.queue_bytes[q] += len;
        self.slots[s as usize] = Some(p);
        self.stamp[s as usize] = now;
        self.prev[s as usize] = self.tail[q];
        self.next[s as usize] = NIL;
        match self.tail[q] {
            NIL => self.head[q] = s,
            t => self.next[t as usize] = s,
        }
        self.tail[q] = s;
        self.count[q] += 1;
    }

    /// Unlink slot `s` of queue `q`: its packet and enqueue time.
    fn unlink(&mut self, q: usize, s: u32) -> (P, Time) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        match p {
            NIL => self.head[q] = n,
            p => self.next[p as usize] = n,
        }
        match n {
            NIL => self.tail[q] = p,
            n => self.prev[n as usize] = p,
        }
        self.count[q] -= 1;
        self.free.push(s);
        let packet = self.slots[s as usize]
            .take()
            .expect("a linked slot holds a packet");
        let len = u64::from(packet.len_bytes());
        self.len -= 1;
        self.bytes -= len;
        self.queue_bytes[q] -= len;
        (packet, self.stamp[s as usize])
    }

    /// The oldest packet of queue `q` and its enqueue time.
    #[inline]
    pub(crate) fn pop_front(&mut self, q: usize) -> Option<(P, Time)> {
        match self.head[q] {
            NIL => None,
            s => Some(self.unlink(q, s)),
        }
    }

    /// The newest packet of queue `q`.
    pub(crate) fn pop_back(&mut self, q: usize) -> Option<P> {
        match self.tail[q] {
            NIL => None,
            s => Some(self.unlink(q, s).0),
        }
    }

    /// The length of the oldest packet of queue `q`, if any.
    #[inline]
    pub(crate) fn front_len(&self, q: usize) -> Option<u32> {
        match self.head[q] {
            NIL => None,
            s => Some(
                self.slots[s as usize]
                    .as_ref()
                    .expect("a linked slot holds a packet")
                    .len_bytes(),
            ),
        }
    }

    /// Packets in queue `q`.
    #[inline]
    pub(crate) fn count(&self, q: usize) -> u32 {
        self.count[q]
    }

    /// Bytes in queue `q`.
    #[inline]
    pub(crate) fn queue_bytes(&self, q: usize) -> u64 {
        self.queue_bytes[q]
    }

    /// Packets in all queues.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes in all queues.
    #[inline]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// The FQ discipline.
#[derive(Debug)]
pub struct Fq<P> {
    queues: FlowQueues<P>,
    deficit: Vec<i64>,
    /// Whether a bucket is in `round`.
    active: Vec<bool>,
    /// Backlogged buckets in service order (each at most once).
    round: VecDeque<u32>,
    quantum: i64,
    counters: Counters,
}

impl<P: PacketHandle> Fq<P> {
    /// Build from a validated configuration.
    pub fn new(config: &FqConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let n = config.buckets as usize;
        Ok(Fq {
            queues: FlowQueues::new(n, config.limit as usize),
            deficit: vec![0; n],
            active: vec![false; n],
            round: VecDeque::with_capacity(n),
            quantum: i64::from(config.quantum),
            counters: Counters::default(),
        })
    }

    /// The longest backlogged bucket (the lowest index of equals).
    fn longest(&self) -> Option<usize> {
        self.round
            .iter()
            .map(|&b| b as usize)
            .max_by_key(|&b| (self.queues.count(b), std::cmp::Reverse(b)))
    }

    /// Append to bucket `b` and put it in the round if it is not there;
    /// the caller has checked there is a free slot.
    fn push_back(&mut self, b: usize, p: P, now: Time) {
        self.queues.push_back(b, p, now);
        if !self.active[b] {
            self.active[b] = true;
            self.deficit[b] = 0;
            self.round.push_back(b as u32);
        }
    }

    /// Take bucket `b` (at the front of the round) out of the round.
    fn leave_round(&mut self, b: usize) {
        self.round.pop_front();
        self.active[b] = false;
        self.deficit[b] = 0;
    }
}

impl<P: PacketHandle> Qdisc<P> for Fq<P> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        self.counters.on_receive(packet.len_bytes());
        let b = self.queues.queue_for(&packet);
        if self.queues.is_full() {
            let Some(fat) = self.longest() else {
                return self.counters.drop(DropReason::Overlimit, packet);
            };
            if self.queues.count(b) + 1 >= self.queues.count(fat) {
                return self.counters.drop(DropReason::Overlimit, packet);
            }
            let victim = self
                .queues
                .pop_back(fat)
                .expect("the longest bucket holds packets");
            self.push_back(b, packet, now);
            return self.counters.drop(DropReason::Overlimit, victim);
        }
        self.push_back(b, packet, now);
        Verdict::Queued
    }

    fn dequeue(&mut self, _now: Time) -> Option<P> {
        loop {
            let b = *self.round.front()? as usize;
            let Some(len) = self.queues.front_len(b) else {
                // Emptied by drops from its tail.
                self.leave_round(b);
                continue;
            };
            let len = i64::from(len);
            if self.deficit[b] < len {
                self.deficit[b] += self.quantum;
                self.round.rotate_left(1);
                continue;
            }
            let (p, _) = self.queues.pop_front(b).expect("a head packet");
            self.deficit[b] -= len;
            if self.queues.count(b) == 0 {
                self.leave_round(b);
            }
            self.counters.on_dequeue(p.len_bytes());
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::PacketMeta;

    fn pkt(flow: u64, len: u32) -> PacketMeta {
        PacketMeta {
            len,
            flow_hash: flow,
            ..PacketMeta::default()
        }
    }

    fn fq(limit: u32, quantum: u32) -> Fq<PacketMeta> {
        Fq::new(&FqConfig {
            limit,
            buckets: 64,
            quantum,
        })
        .unwrap()
    }

    fn bytes_per_flow(q: &mut Fq<PacketMeta>, n: usize) -> [u64; 3] {
        let mut sent = [0u64; 3];
        for _ in 0..n {
            let p = q.dequeue(Time::ZERO).unwrap();
            sent[p.flow_hash as usize] += u64::from(p.len);
        }
        sent
    }

    #[test]
    fn backlogged_flows_get_equal_bytes_whatever_their_packet_sizes() {
        let mut q = fq(10_000, 1514);
        for _ in 0..2400 {
            for p in [pkt(0, 1500), pkt(1, 100), pkt(1, 100), pkt(2, 600)] {
                assert!(matches!(q.enqueue(p, Time::ZERO), Verdict::Queued));
            }
        }
        // 2000 packets while all three stay backlogged.
        let sent = bytes_per_flow(&mut q, 2000);
        let mean = sent.iter().sum::<u64>() as f64 / 3.0;
        for s in sent {
            assert!(
                (s as f64 - mean).abs() < 1514.0 * 2.0,
                "bytes per flow {sent:?} not within two quanta of the mean"
            );
        }
    }

    #[test]
    fn a_full_buffer_drops_from_the_longest_queue_not_the_small_flow() {
        let mut q = fq(100, 1514);
        for _ in 0..100 {
            assert!(matches!(
                q.enqueue(pkt(0, 1000), Time::ZERO),
                Verdict::Queued
            ));
        }
        // The small flow's arrival is queued; a flood packet goes.
        match q.enqueue(pkt(1, 200), Time::ZERO) {
            Verdict::Dropped {
                packet,
                reason,
                victim,
            } => {
                assert_eq!((packet.flow_hash, reason), (0, DropReason::Overlimit));
                assert!(victim.is_none());
            }
            other => panic!("{other:?}"),
        }
        // The flood's own arrival is dropped.
        match q.enqueue(pkt(0, 1000), Time::ZERO) {
            Verdict::Dropped { packet, .. } => assert_eq!(packet.flow_hash, 0),
            other => panic!("{other:?}"),
        }
        assert_eq!((q.len(), q.bytes()), (100, 99 * 1000 + 200));
        // The small flow's packet leaves within the first round.
        let first: Vec<u64> = (0..2)
            .map(|_| q.dequeue(Time::ZERO).unwrap().flow_hash)
            .collect();
        assert!(first.contains(&1), "{first:?}");
        let c = q.counters();
        assert_eq!(c.received, 102);
        assert_eq!(c.dropped[DropReason::Overlimit.index()], 2);
        let mut out = c.dequeued;
        while q.dequeue(Time::ZERO).is_some() {
            out += 1;
        }
        assert_eq!(out + 2, 102, "received = dequeued + dropped");
        assert_eq!((q.len(), q.bytes()), (0, 0));
    }

    #[test]
    fn bad_parameters_name_the_field() {
        for (c, field) in [
            (
                FqConfig {
                    limit: 0,
                    ..FqConfig::default()
                },
                "limit",
            ),
            (
                FqConfig {
                    buckets: 0,
                    ..FqConfig::default()
                },
                "buckets",
            ),
            (
                FqConfig {
                    quantum: 10,
                    ..FqConfig::default()
                },
                "quantum",
            ),
        ] {
            assert_eq!(c.validate().unwrap_err().field, field);
        }
    }
}

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

/// The FQ discipline.
///
/// Packets live in one slab of `limit` slots, allocated at construction;
/// each bucket is a doubly linked list through it (`next`/`prev`), so the
/// per-packet path never allocates, whatever the number of flows.
#[derive(Debug)]
pub struct Fq<P> {
    slots: Vec<Option<P>>,
    next: Vec<u32>,
    prev: Vec<u32>,
    free: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    count: Vec<u32>,
    deficit: Vec<i64>,
    /// Whether a bucket is in `round`.
    active: Vec<bool>,
    /// Backlogged buckets in service order (each at most once).
    round: VecDeque<u32>,
    quantum: i64,
    len: usize,
    bytes: u64,
    counters: Counters,
}

impl<P: PacketHandle> Fq<P> {
    /// Build from a validated configuration.
    pub fn new(config: &FqConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let n = config.buckets as usize;
        let limit = config.limit as usize;
        Ok(Fq {
            slots: (0..limit).map(|_| None).collect(),
            next: vec![NIL; limit],
            prev: vec![NIL; limit],
            free: (0..config.limit).rev().collect(),
            head: vec![NIL; n],
            tail: vec![NIL; n],
            count: vec![0; n],
            deficit: vec![0; n],
            active: vec![false; n],
            round: VecDeque::with_capacity(n),
            quantum: i64::from(config.quantum),
            len: 0,
            bytes: 0,
            counters: Counters::default(),
        })
    }

    fn bucket(&self, p: &P) -> usize {
        (p.flow_hash() % self.head.len() as u64) as usize
    }

    /// The longest backlogged bucket (the lowest index of equals).
    fn longest(&self) -> Option<usize> {
        self.round
            .iter()
            .map(|&b| b as usize)
            .max_by_key(|&b| (self.count[b], std::cmp::Reverse(b)))
    }

    /// Append to bucket `b`; the caller has checked there is a free slot.
    fn push_back(&mut self, b: usize, p: P) {
        let s = self.free.pop().expect("a free slot below the limit");
        self.len += 1;
        self.bytes += u64::from(p.len_bytes());
        self.slots[s as usize] = Some(p);
        self.prev[s as usize] = self.tail[b];
        self.next[s as usize] = NIL;
        match self.tail[b] {
            NIL => self.head[b] = s,
            t => self.next[t as usize] = s,
        }
        self.tail[b] = s;
        self.count[b] += 1;
        if !self.active[b] {
            self.active[b] = true;
            self.deficit[b] = 0;
            self.round.push_back(b as u32);
        }
    }

    /// Unlink slot `s` of bucket `b` and return its packet.
    fn unlink(&mut self, b: usize, s: u32) -> P {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        match p {
            NIL => self.head[b] = n,
            p => self.next[p as usize] = n,
        }
        match n {
            NIL => self.tail[b] = p,
            n => self.prev[n as usize] = p,
        }
        self.count[b] -= 1;
        self.free.push(s);
        let packet = self.slots[s as usize]
            .take()
            .expect("a linked slot holds a packet");
        self.len -= 1;
        self.bytes -= u64::from(packet.len_bytes());
        packet
    }

    /// Take bucket `b` (at the front of the round) out of the round.
    fn leave_round(&mut self, b: usize) {
        self.round.pop_front();
        self.active[b] = false;
        self.deficit[b] = 0;
    }
}

impl<P: PacketHandle> Qdisc<P> for Fq<P> {
    fn enqueue(&mut self, packet: P, _now: Time) -> Verdict<P> {
        self.counters.on_receive(packet.len_bytes());
        let b = self.bucket(&packet);
        if self.free.is_empty() {
            let Some(fat) = self.longest() else {
                return self.counters.drop(DropReason::Overlimit, packet);
            };
            if self.count[b] + 1 >= self.count[fat] {
                return self.counters.drop(DropReason::Overlimit, packet);
            }
            let victim = self.unlink(fat, self.tail[fat]);
            self.push_back(b, packet);
            return self.counters.drop(DropReason::Overlimit, victim);
        }
        self.push_back(b, packet);
        Verdict::Queued
    }

    fn dequeue(&mut self, _now: Time) -> Option<P> {
        loop {
            let b = *self.round.front()? as usize;
            let h = self.head[b];
            if h == NIL {
                // Emptied by drops from its tail.
                self.leave_round(b);
                continue;
            }
            let len = i64::from(
                self.slots[h as usize]
                    .as_ref()
                    .expect("a linked slot holds a packet")
                    .len_bytes(),
            );
            if self.deficit[b] < len {
                self.deficit[b] += self.quantum;
                self.round.rotate_left(1);
                continue;
            }
            let p = self.unlink(b, h);
            self.deficit[b] -= len;
            if self.head[b] == NIL {
                self.leave_round(b);
            }
            self.counters.on_dequeue(p.len_bytes());
            return Some(p);
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn bytes(&self) -> u64 {
        self.bytes
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

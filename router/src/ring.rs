//! Fixed-capacity packet queues, allocated once at construction.
//!
//! - [`Fifo`]: a bounded FIFO with a byte count. Backed by a `VecDeque`
//!   reserved to its capacity and never pushed past it, so it never
//!   reallocates.
//! - [`HoleRing`]: a ring that also supports O(1) access to, and removal of,
//!   a random queued packet, as CHOKe needs. A removed packet leaves a hole;
//!   holes at either end are trimmed at once, holes in the middle are skipped
//!   on dequeue. The ring has twice the packet limit in slots, and when holes
//!   fill it the live packets are compacted in place (amortised O(1)). This
//!   follows the design of Linux `sch_choke` (ring with holes, random probe
//!   with a few retries, then the head).

use std::collections::VecDeque;
use std::mem::MaybeUninit;

use crate::qdisc::PacketHandle;
use tollgate_cca::rng::{self, SimRng};

/// A bounded FIFO of packets.
#[derive(Debug)]
pub struct Fifo<P> {
    q: VecDeque<P>,
    cap: usize,
    bytes: u64,
}

impl<P: PacketHandle> Fifo<P> {
    /// A FIFO holding at most `cap` packets (storage allocated now).
    pub fn with_capacity(cap: usize) -> Self {
        Fifo {
            q: VecDeque::with_capacity(cap),
            cap,
            bytes: 0,
        }
    }

    /// Append, or hand the packet back if the FIFO is full.
    #[inline]
    pub fn push(&mut self, p: P) -> Result<(), P> {
        if self.q.len() >= self.cap {
            return Err(p);
        }
        self.bytes += u64::from(p.len_bytes());
        self.q.push_back(p);
        Ok(())
    }

    /// Remove the oldest packet.
    #[inline]
    pub fn pop(&mut self) -> Option<P> {
        let p = self.q.pop_front()?;
        self.bytes -= u64::from(p.len_bytes());
        Some(p)
    }

    /// The oldest packet.
    pub fn front(&self) -> Option<&P> {
        self.q.front()
    }

    /// Queued packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Whether at capacity.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.q.len() >= self.cap
    }

    /// Queued bytes.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Capacity in packets.
    pub fn capacity(&self) -> usize {
        self.cap
    }
}

/// A ring with holes: FIFO order plus O(1) random access and removal.
///
/// Slots are `MaybeUninit<P>` with a separate occupancy flag per slot rather
/// than `Option<P>`: emptying an `Option<Pkt>` slot made the compiler build
/// `None` in a temporary with a one-byte store and copy it in with wide
/// loads, a store-forwarding stall on every dequeue (57 % of `pop`'s samples
/// in the CHOKe dataplane profile).
pub struct HoleRing<P> {
    slots: Box<[MaybeUninit<P>]>,
    /// `occupied[i]`: slot `i` holds an initialised packet.
    occupied: Box<[bool]>,
    mask: usize,
    head: usize,
    tail: usize,
    live: usize,
    limit: usize,
    bytes: u64,
}

impl<P> std::fmt::Debug for HoleRing<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoleRing")
            .field("slots", &self.slots.len())
            .field("live", &self.live)
            .field("limit", &self.limit)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl<P> Drop for HoleRing<P> {
    fn drop(&mut self) {
        for (slot, occupied) in self.slots.iter_mut().zip(self.occupied.iter()) {
            if *occupied {
                // SAFETY: an occupied slot holds an initialised packet, and
                // the ring is going away: it is dropped exactly once.
                unsafe { slot.assume_init_drop() };
            }
        }
    }
}

impl<P: PacketHandle> HoleRing<P> {
    /// A ring holding at most `limit` live packets.
    pub fn with_limit(limit: usize) -> Self {
        let n = (limit.max(1) * 2).next_power_of_two();
        HoleRing {
            slots: (0..n).map(|_| MaybeUninit::uninit()).collect(),
            occupied: vec![false; n].into_boxed_slice(),
            mask: n - 1,
            head: 0,
            tail: 0,
            live: 0,
            limit,
            bytes: 0,
        }
    }

    /// Live packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Queued bytes.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether `limit` live packets are queued.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.live >= self.limit
    }

    #[inline]
    fn span(&self) -> usize {
        self.tail.wrapping_sub(self.head)
    }

    /// Move the packet out of slot `i` (masked), leaving it empty.
    #[inline]
    fn take(&mut self, i: usize) -> Option<P> {
        if !self.occupied[i] {
            return None;
        }
        self.occupied[i] = false;
        // SAFETY: the slot was occupied (initialised) and is now marked
        // empty, so this value is read out exactly once.
        Some(unsafe { self.slots[i].assume_init_read() })
    }

    /// Put `p` into the empty slot `i` (masked).
    #[inline]
    fn put(&mut self, i: usize, p: P) {
        debug_assert!(!self.occupied[i]);
        self.slots[i].write(p);
        self.occupied[i] = true;
    }

    /// Append, or hand the packet back if `limit` packets are queued.
    #[inline]
    pub fn push(&mut self, p: P) -> Result<(), P> {
        if self.live >= self.limit {
            return Err(p);
        }
        if self.span() == self.slots.len() {
            self.compact();
        }
        self.bytes += u64::from(p.len_bytes());
        self.put(self.tail & self.mask, p);
        self.tail = self.tail.wrapping_add(1);
        self.live += 1;
        Ok(())
    }

    /// Remove the oldest packet.
    #[inline]
    pub fn pop(&mut self) -> Option<P> {
        if self.live == 0 {
            return None;
        }
        // Invariant: the head slot is occupied whenever live > 0.
        let p = self.take(self.head & self.mask)?;
        self.head = self.head.wrapping_add(1);
        self.live -= 1;
        self.bytes -= u64::from(p.len_bytes());
        self.trim();
        Some(p)
    }

    /// A random occupied position: up to three uniform probes over the span,
    /// then the head (always occupied). `None` when empty.
    pub fn random_index(&self, rng: &mut SimRng) -> Option<usize> {
        if self.live == 0 {
            return None;
        }
        for _ in 0..3 {
            let i = self
                .head
                .wrapping_add(rng::below(rng, self.span() as u64) as usize);
            if self.occupied[i & self.mask] {
                return Some(i);
            }
        }
        Some(self.head)
    }

    /// The packet at a position returned by [`Self::random_index`].
    pub fn get(&self, index: usize) -> Option<&P> {
        let i = index & self.mask;
        // SAFETY: an occupied slot holds an initialised packet.
        self.occupied[i].then(|| unsafe { self.slots[i].assume_init_ref() })
    }

    /// Remove the packet at `index`, leaving a hole.
    pub fn remove(&mut self, index: usize) -> Option<P> {
        let p = self.take(index & self.mask)?;
        self.live -= 1;
        self.bytes -= u64::from(p.len_bytes());
        self.trim();
        Some(p)
    }

    /// Drop holes at both ends so that head and tail - 1 are occupied.
    #[inline]
    fn trim(&mut self) {
        while self.head != self.tail && !self.occupied[self.head & self.mask] {
            self.head = self.head.wrapping_add(1);
        }
        while self.head != self.tail && !self.occupied[self.tail.wrapping_sub(1) & self.mask] {
            self.tail = self.tail.wrapping_sub(1);
        }
    }

    /// Move live packets together, in order, starting at the head.
    fn compact(&mut self) {
        let mut w = self.head;
        let mut r = self.head;
        while r != self.tail {
            if let Some(p) = self.take(r & self.mask) {
                self.put(w & self.mask, p);
                w = w.wrapping_add(1);
            }
            r = r.wrapping_add(1);
        }
        self.tail = w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::PacketMeta;

    fn pkt(tag: u64) -> PacketMeta {
        PacketMeta {
            len: 100,
            tag,
            ..PacketMeta::default()
        }
    }

    #[test]
    fn hole_ring_keeps_order_and_compacts() {
        let mut r = HoleRing::with_limit(4);
        let mut rng = rng::seeded(1);
        let mut next = 0;
        let mut expect = std::collections::VecDeque::new();
        // Many rounds of push / random remove / pop: order of survivors is FIFO.
        for round in 0..2_000u64 {
            while !r.is_full() {
                r.push(pkt(next)).unwrap();
                expect.push_back(next);
                next += 1;
            }
            assert!(r.push(pkt(999_999)).is_err());
            if round.is_multiple_of(2) {
                let i = r.random_index(&mut rng).unwrap();
                let gone = r.remove(i).unwrap().tag;
                expect.retain(|&t| t != gone);
            }
            let p = r.pop().unwrap();
            assert_eq!(Some(p.tag), expect.pop_front());
            assert_eq!(r.len(), expect.len());
            assert_eq!(r.bytes(), 100 * expect.len() as u64);
        }
    }

    /// A packet that counts its drops, to check the ring's manual memory
    /// handling: every packet is dropped exactly once, whether it was popped,
    /// removed, moved by compaction or still queued when the ring went away.
    struct Counted(std::rc::Rc<std::cell::Cell<u32>>, u64);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    impl PacketHandle for Counted {
        fn len_bytes(&self) -> u32 {
            100
        }
        fn flow_hash(&self) -> u64 {
            self.1
        }
        fn variant(&self) -> tollgate_cca::VariantId {
            tollgate_cca::VariantId::UNMARKED
        }
        fn ecn_capable(&self) -> bool {
            false
        }
        fn set_ce(&mut self) -> bool {
            false
        }
    }

    #[test]
    fn hole_ring_drops_every_packet_exactly_once() {
        let drops = std::rc::Rc::new(std::cell::Cell::new(0u32));
        let mut made = 0u32;
        {
            let mut r = HoleRing::with_limit(8);
            let mut rng = rng::seeded(5);
            for round in 0..500u64 {
                while !r.is_full() {
                    made += 1;
                    r.push(Counted(drops.clone(), round)).ok().unwrap();
                }
                let i = r.random_index(&mut rng).unwrap();
                drop(r.remove(i));
                if round % 3 == 0 {
                    drop(r.pop());
                }
            }
            assert_eq!(drops.get() + r.len() as u32, made);
        }
        assert_eq!(drops.get(), made, "queued packets dropped with the ring");
    }

    #[test]
    fn fifo_never_exceeds_capacity() {
        let mut f = Fifo::with_capacity(3);
        for t in 0..3 {
            f.push(pkt(t)).unwrap();
        }
        assert_eq!(f.push(pkt(3)).unwrap_err().tag, 3);
        assert_eq!(f.bytes(), 300);
        assert_eq!(f.pop().unwrap().tag, 0);
    }
}

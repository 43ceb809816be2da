//! The engine's event queue: a binary heap of `(virtual time, sequence
//! number)` entries, so events at the same instant run in the order they were
//! scheduled.
//!
//! Events after the run's end (the horizon) are never run, so they are not
//! stored: most of them are hosts' idle timers (quinn-proto re-arms a
//! connection's 600-s idle timeout on every packet, and the engine schedules
//! a host's earliest timer after every interaction), and keeping them made
//! the heap hundreds of thousands of entries deep for a 100-s run, most of
//! the pop cost. Sequence numbers are still consumed for dropped entries, so
//! the order of the events that do run is exactly what it was with them.
//!
//! Three more ways keep the heap small without changing the order:
//!
//! - **Lanes** ([`EventQueue::push_lane`]): the packets a link delivers
//!   arrive in the order they entered it, so the heap holds only each
//!   lane's earliest event and the rest wait in the lane's FIFO; when the
//!   head runs, the next one enters the heap under the key it was pushed
//!   with. At 10 Gbit/s and 120 ms a run has hundreds of thousands of
//!   packets on its links, which made the heap that deep and every pop walk
//!   it. An event pushed earlier than its lane's last one goes to the heap
//!   directly, so the order never depends on a lane being FIFO.
//! - **Reserved sequence numbers.** A series of events known in advance (the
//!   metric samples) reserves its sequence numbers at the start
//!   ([`EventQueue::reserve`]) and pushes each event only when the previous
//!   one runs ([`EventQueue::push_reserved`]): it pops exactly where it would
//!   have popped had it been pushed at the start.
//! - **Timer slots** ([`TimerSlot`]): a host's timer moves on almost every
//!   packet (mostly later: the loss timer follows each ACK). Scheduling an
//!   event per move and skipping the superseded ones at their time left
//!   hundreds of dead entries in the heap and made one pop in eight a no-op.
//!   A slot schedules an event only when the timer moves earlier than every
//!   event it already has queued; when an earlier event comes up, it
//!   re-schedules the timer under the sequence number reserved when the
//!   timer was set, so the timer still fires at its place in the order. A
//!   timer fires when an event of its slot comes up at exactly the time the
//!   timer is set to, as before. One case can differ from queueing an event
//!   per move: a timer that returns to an instant it had left used to fire
//!   under the sequence number of its first event for that instant (still
//!   queued) and now fires under the latest one; the order changes only if
//!   another event falls on the same nanosecond between the two. In
//!   `bench-10-flows` 29 of 5,860 firings are such returns and every result
//!   is identical (only the count of events processed fell, by the 0.8 M
//!   no-op pops).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// One scheduled event.
#[derive(Debug)]
pub struct Entry<E> {
    /// Virtual time, ns.
    pub t: u64,
    /// Scheduling order (ties at the same `t` run in this order).
    pub seq: u64,
    /// The event.
    pub ev: E,
}

/// What the heap stores: the order as one integer, `t` in the high and
/// `seq` in the low 64 bits, so a comparison is one 128-bit compare (the
/// heap's sift loops compare at every level).
#[derive(Debug)]
struct Keyed<E> {
    key: u128,
    /// The lane this event heads, or [`NO_LANE`].
    lane: u32,
    ev: E,
}

const NO_LANE: u32 = u32::MAX;

fn key(t: u64, seq: u64) -> u128 {
    (u128::from(t) << 64) | u128::from(seq)
}

/// One lane: the events behind its head (which is in the heap), and the key
/// of the last event pushed to it.
#[derive(Debug)]
struct Lane<E> {
    waiting: VecDeque<(u128, E)>,
    head_queued: bool,
    tail: u128,
}

impl<E> Default for Lane<E> {
    fn default() -> Self {
        Lane {
            waiting: VecDeque::new(),
            head_queued: false,
            tail: 0,
        }
    }
}

impl<E> PartialEq for Keyed<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<E> Eq for Keyed<E> {}
impl<E> PartialOrd for Keyed<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Keyed<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key)
    }
}

/// Events up to a horizon, earliest first, ties in scheduling order.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Keyed<E>>>,
    lanes: Vec<Lane<E>>,
    /// Events waiting in lanes (behind their heads).
    waiting: usize,
    seq: u64,
    horizon: u64,
}

impl<E> EventQueue<E> {
    /// An empty queue that keeps events at or before `horizon` (ns).
    pub fn new(horizon: u64) -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            lanes: Vec::new(),
            waiting: 0,
            seq: 0,
            horizon,
        }
    }

    /// Schedule `ev` at `t` in `lane` (any small index the caller chooses,
    /// e.g. a link's): runs exactly where [`push`](Self::push) would have
    /// put it, stored behind the lane's earlier events while they wait.
    pub fn push_lane(&mut self, lane: usize, t: u64, ev: E) {
        let seq = self.reserve(1);
        if t > self.horizon {
            return;
        }
        if lane >= self.lanes.len() {
            self.lanes.resize_with(lane + 1, Lane::default);
        }
        let k = key(t, seq);
        let l = &mut self.lanes[lane];
        if !l.head_queued {
            l.head_queued = true;
            l.tail = k;
            self.heap.push(Reverse(Keyed {
                key: k,
                lane: lane as u32,
                ev,
            }));
        } else if k > l.tail {
            l.tail = k;
            l.waiting.push_back((k, ev));
            self.waiting += 1;
        } else {
            self.heap.push(Reverse(Keyed {
                key: k,
                lane: NO_LANE,
                ev,
            }));
        }
    }

    /// Schedule `ev` at `t`; an event after the horizon is dropped.
    pub fn push(&mut self, t: u64, ev: E) {
        let seq = self.reserve(1);
        self.push_reserved(t, seq, ev);
    }

    /// Reserve `n` consecutive sequence numbers; returns the first.
    pub fn reserve(&mut self, n: u64) -> u64 {
        let first = self.seq + 1;
        self.seq += n;
        first
    }

    /// Schedule `ev` at `t` under a reserved sequence number. The event then
    /// runs where it would have run had it been pushed when `seq` was
    /// reserved, provided `t` is not earlier than the event now running (or,
    /// at the same time, `seq` is not below its sequence number).
    pub fn push_reserved(&mut self, t: u64, seq: u64, ev: E) {
        debug_assert!(seq <= self.seq, "sequence number {seq} was not reserved");
        if t <= self.horizon {
            self.heap.push(Reverse(Keyed {
                key: key(t, seq),
                lane: NO_LANE,
                ev,
            }));
        }
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<Entry<E>> {
        let Reverse(k) = self.heap.pop()?;
        if k.lane != NO_LANE {
            let l = &mut self.lanes[k.lane as usize];
            match l.waiting.pop_front() {
                Some((key, ev)) => {
                    self.waiting -= 1;
                    self.heap.push(Reverse(Keyed {
                        key,
                        lane: k.lane,
                        ev,
                    }));
                }
                None => l.head_queued = false,
            }
        }
        Some(Entry {
            t: (k.key >> 64) as u64,
            seq: k.key as u64,
            ev: k.ev,
        })
    }

    /// The time of the earliest event.
    pub fn peek_t(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(k)| (k.key >> 64) as u64)
    }

    /// Events stored.
    pub fn len(&self) -> usize {
        self.heap.len() + self.waiting
    }

    /// Whether no event is stored.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// One owner's timer (a host's earliest transport timeout) over an
/// [`EventQueue`]; see the module docs.
#[derive(Debug, Default)]
pub struct TimerSlot {
    /// The time the timer is set to.
    at: Option<u64>,
    /// The sequence number reserved when it was set to `at`.
    seq: u64,
    /// This slot's events in the queue, `(t, seq)`: the scheduled timer and
    /// later events left behind when it moved earlier.
    queued: Vec<(u64, u64)>,
}

impl TimerSlot {
    /// The time the timer is set to.
    pub fn at(&self) -> Option<u64> {
        self.at
    }

    /// Set the timer (`None`: cancel); `ev` is the slot's event. Setting it
    /// to the time it already has changes nothing.
    pub fn set<E>(&mut self, q: &mut EventQueue<E>, at: Option<u64>, ev: impl FnOnce() -> E) {
        if at == self.at {
            return;
        }
        self.at = at;
        if at.is_some() {
            self.seq = q.reserve(1);
            self.schedule(q, ev);
        }
    }

    /// An event of this slot came up at `(t, seq)`: whether the timer fires
    /// now. A timer that fires is cleared (set it again afterwards);
    /// otherwise the timer is re-scheduled if no event of the slot precedes it.
    pub fn on_event<E>(
        &mut self,
        q: &mut EventQueue<E>,
        t: u64,
        seq: u64,
        ev: impl FnOnce() -> E,
    ) -> bool {
        if let Some(i) = self.queued.iter().position(|&e| e == (t, seq)) {
            self.queued.swap_remove(i);
        }
        if self.at == Some(t) {
            self.at = None;
            return true;
        }
        self.schedule(q, ev);
        false
    }

    /// Queue the timer's event unless an event of the slot comes no later.
    fn schedule<E>(&mut self, q: &mut EventQueue<E>, ev: impl FnOnce() -> E) {
        let Some(t) = self.at else { return };
        if self.queued.iter().any(|&(qt, _)| qt <= t) {
            return;
        }
        q.push_reserved(t, self.seq, ev());
        if t <= q.horizon {
            self.queued.push((t, self.seq));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_ties_in_order_and_horizon_drops() {
        let mut q = EventQueue::new(100);
        q.push(50, 'a');
        q.push(10, 'b');
        q.push(101, 'x');
        q.push(50, 'c');
        q.push(100, 'd');
        assert_eq!(q.len(), 4);
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|e| e.ev)).collect();
        assert_eq!(order, ['b', 'a', 'c', 'd']);
        assert!(q.is_empty());
    }

    #[test]
    fn lanes_keep_the_order_of_plain_pushes() {
        // The same pseudo-random schedule pushed plainly and through lanes
        // (mostly FIFO per lane, sometimes earlier than the lane's last
        // event, sometimes beyond the horizon) pops in the same order.
        let mut plain = EventQueue::new(900);
        let mut laned = EventQueue::new(900);
        let mut x: u64 = 12345;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut last = [0u64; 4];
        let mut popped = (Vec::new(), Vec::new());
        let mut now = 0;
        for i in 0..2000u32 {
            let lane = (next() % 4) as usize;
            let r = next() % 10;
            let t = if r == 0 {
                now + next() % 50 // may precede the lane's last event
            } else {
                last[lane].max(now) + next() % 5
            };
            last[lane] = last[lane].max(t);
            plain.push(t, i);
            laned.push_lane(lane, t, i);
            assert_eq!(plain.len(), laned.len());
            if next() % 3 == 0 {
                let (a, b) = (plain.pop(), laned.pop());
                if let Some(e) = &a {
                    now = e.t;
                }
                popped.0.push(a.map(|e| (e.t, e.seq, e.ev)));
                popped.1.push(b.map(|e| (e.t, e.seq, e.ev)));
            }
        }
        while let Some(e) = plain.pop() {
            popped.0.push(Some((e.t, e.seq, e.ev)));
        }
        while let Some(e) = laned.pop() {
            popped.1.push(Some((e.t, e.seq, e.ev)));
        }
        assert_eq!(popped.0, popped.1);
        assert!(laned.is_empty());
    }

    #[test]
    fn reserved_events_pop_where_they_were_reserved() {
        let mut q = EventQueue::new(1000);
        let first = q.reserve(2);
        q.push(10, 'x');
        q.push_reserved(10, first + 1, 'b');
        q.push_reserved(10, first, 'a');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|e| e.ev)).collect();
        assert_eq!(order, ['a', 'b', 'x']);
    }

    /// Runs `q` to the end; returns the times at which the slot fired.
    fn run_slot(
        q: &mut EventQueue<()>,
        slot: &mut TimerSlot,
        moves: &[(u64, Option<u64>)],
    ) -> Vec<u64> {
        let mut fired = Vec::new();
        let mut moves = moves.iter().peekable();
        while let Some(e) = q.pop() {
            if slot.on_event(q, e.t, e.seq, || ()) {
                fired.push(e.t);
            }
            while let Some(&&(when, at)) = moves.peek() {
                if when > e.t {
                    break;
                }
                slot.set(q, at, || ());
                moves.next();
            }
        }
        fired
    }

    #[test]
    fn a_timer_fires_at_its_time_and_moving_later_queues_nothing() {
        let mut q = EventQueue::new(1000);
        let mut slot = TimerSlot::default();
        slot.set(&mut q, Some(10), || ());
        // At 10 the timer fires; moves at the time of each event: to 50, then
        // (at 20, the re-scheduled event) nothing more.
        let fired = run_slot(&mut q, &mut slot, &[(10, Some(50))]);
        assert_eq!(fired, [10, 50]);
        let mut slot = TimerSlot::default();
        slot.set(&mut q, Some(10), || ());
        slot.set(&mut q, Some(30), || ());
        slot.set(&mut q, Some(20), || ());
        assert_eq!(q.len(), 1, "moving later queues nothing");
        let fired = run_slot(&mut q, &mut slot, &[]);
        assert_eq!(fired, [20]);
    }

    #[test]
    fn a_timer_that_moves_earlier_or_is_cancelled() {
        let mut q = EventQueue::new(1000);
        let mut slot = TimerSlot::default();
        slot.set(&mut q, Some(30), || ());
        slot.set(&mut q, Some(10), || ());
        assert_eq!(q.len(), 2);
        assert_eq!(run_slot(&mut q, &mut slot, &[]), [10]);
        let mut slot = TimerSlot::default();
        slot.set(&mut q, Some(30), || ());
        slot.set(&mut q, None, || ());
        assert_eq!(run_slot(&mut q, &mut slot, &[]), Vec::<u64>::new());
        // Beyond the horizon: never queued, never fires.
        let mut slot = TimerSlot::default();
        slot.set(&mut q, Some(5000), || ());
        assert!(q.is_empty());
    }
}

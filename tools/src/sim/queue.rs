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

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

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

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

/// Events up to a horizon, earliest first, ties in scheduling order.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    seq: u64,
    horizon: u64,
}

impl<E> EventQueue<E> {
    /// An empty queue that keeps events at or before `horizon` (ns).
    pub fn new(horizon: u64) -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
            horizon,
        }
    }

    /// Schedule `ev` at `t`; an event after the horizon is dropped.
    pub fn push(&mut self, t: u64, ev: E) {
        self.seq += 1;
        if t <= self.horizon {
            self.heap.push(Reverse(Entry {
                t,
                seq: self.seq,
                ev,
            }));
        }
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<Entry<E>> {
        self.heap.pop().map(|Reverse(e)| e)
    }

    /// Events stored.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is stored.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
}

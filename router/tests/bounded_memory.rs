//! Bounded memory: one million distinct flows through every discipline.
//! A counting global allocator shows that, after construction, the fast path
//! (enqueue + dequeue) performs no heap allocation at all, so memory cannot
//! grow with the number of flows, and the accounting stays exact.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tollgate_cca::{Time, VariantId};
use tollgate_router::cebinae::{Cebinae, CebinaeConfig};
use tollgate_router::rrmqs::{Rrmqs, RrmqsConfig};
use tollgate_router::{AnyQdisc, DisciplineConfig, PacketMeta, Qdisc};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const FLOWS: u64 = 1_000_000;

fn packet(i: u64) -> PacketMeta {
    PacketMeta {
        len: 64,
        flow_hash: tollgate_router::flow::mix64(i),
        variant: VariantId::from_dscp((i % 16) as u8).unwrap(),
        tag: i,
        ..PacketMeta::default()
    }
}

/// Feed one packet of each of `FLOWS` distinct flows, two arrivals per
/// departure so the queue stays full; returns allocations during the run.
fn feed<Q: Qdisc<PacketMeta>>(q: &mut Q) -> u64 {
    let before = ALLOCS.load(Ordering::Relaxed);
    let mut out = 0u64;
    for i in 0..FLOWS {
        let now = Time::from_nanos(i * 50);
        let _ = q.enqueue(packet(i), now);
        if i.is_multiple_of(2) {
            out += u64::from(q.dequeue(now).is_some());
        }
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    let c = q.counters();
    assert_eq!(c.received, FLOWS);
    assert_eq!(c.dequeued, out);
    assert_eq!(
        c.received,
        c.dequeued + c.dropped_total() + q.len() as u64,
        "{}",
        q.name()
    );
    allocs
}

#[test]
fn a_million_flows_allocate_nothing_on_the_fast_path() {
    for name in [
        "droptail", "red", "choke", "cebinae", "rrmqs", "fq", "codel", "fq_codel", "dualpi2",
    ] {
        let mut q =
            AnyQdisc::<PacketMeta>::new(&DisciplineConfig::default_for(name).unwrap()).unwrap();
        let allocs = feed(&mut q);
        // The test harness may allocate on its own thread; a per-packet or
        // per-flow allocation would show as hundreds of thousands.
        assert!(
            allocs < 50,
            "{name}: {allocs} allocations for {FLOWS} flows"
        );
    }
    // Per-flow tables stay within their fixed capacities and keep working.
    let mut ceb = Cebinae::new(&CebinaeConfig {
        line_rate_bps: 1e9,
        ..CebinaeConfig::default()
    })
    .unwrap();
    assert!(feed(&mut ceb) < 50);
    assert!(ceb.last_report().top_flows <= 2 * CebinaeConfig::default().cache_slots);
    let cfg = RrmqsConfig {
        window: Duration::from_millis(5),
        ..RrmqsConfig::default()
    };
    let mut rr = Rrmqs::new(&cfg).unwrap();
    assert!(feed(&mut rr) < 50, "window reports reuse their storage");
    for v in &cfg.variants {
        assert!(rr.measuring_flows(*v) <= cfg.flows_per_queue);
    }
    let w = rr.latest_window();
    assert_eq!(w.variants.len(), cfg.variants.len());
    assert!(w.end > w.start);
}

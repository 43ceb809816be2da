//! The multi-core dataplane: RX/classify workers hand packets over
//! lockless rings to one scheduler lcore per egress port.
//!
//! This is the shape of DPDK's `qos_sched` example, chosen because every
//! discipline (RED's average, CHOKe's draw, Cebinae's rounds, RRMQS's
//! windows) needs one consistent view of its egress queue, so the queue
//! cannot be split across cores; what can be split is the per-packet work
//! in front of it (RX, header parse, flow hash, variant):
//!
//! ```text
//!  RX queues (RSS)      worker lcores           rings (SP/SC)      scheduler lcores
//!  port0 q0 ---------> [worker A: classify] --> A->egress0 --\
//!  port1 q0 ---------> [worker B: classify] --> B->egress0 ---+--> [delay, discipline, shaper, TX port0]
//!                                           \-> A/B->egress1 ----> [delay, discipline, shaper, TX port1]
//! ```
//!
//! - A [`Worker`] owns a fixed set of (port, RX queue) pairs, stamps
//!   synthetic frames, takes the L2 decision, classifies with its own copy
//!   of the port's [`Ingress`] (same rules, same hash seed), and enqueues
//!   the 16-byte [`Pkt`] handle, by value, on the ring of the egress port.
//! - Each ring has exactly one producer (its worker) and one consumer (the
//!   egress port's scheduler): `RING_F_SP_ENQ | RING_F_SC_DEQ`, no atomic
//!   read-modify-write on either side.
//! - **Order**: RSS keeps a flow on one RX queue, an RX queue belongs to
//!   one worker, a worker uses one ring per egress, and a ring is FIFO, so
//!   a flow's packets reach the discipline in arrival order.
//! - **Accounting**: workers count RX, ingress drops, unparsable frames
//!   (as received and dropped by the egress, as the single-lcore path
//!   does) and `ring_full` drops; schedulers count everything after the
//!   ring. Each number has one writer, so the sum over lcores is exact
//!   once the lcores have stopped: at shutdown the workers stop first and
//!   each scheduler empties its rings before it returns.
//! - **Statistics**: every lcore publishes its own part through its own
//!   [`Published`] (one producer each); a merger thread adds the parts up
//!   ([`Snapshot::absorb`]) and publishes the sum where the printer and
//!   the Prometheus endpoint read it. Nothing is formatted on an lcore.

use std::ffi::{c_int, c_void, CString};
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tollgate_cca::Time;
use tollgate_router::packet::ParseStats;
use tollgate_router::port::Ingress;
use tollgate_router::{Counters, DropReason};

use crate::config::{PipelineConfig, RouterConfig};
use crate::dataplane::{is_ip, Lane, TxSinkParts, MAX_BURST, PREFETCH_AHEAD, STOP};
use crate::eal::{DpdkError, TscClock};
use crate::ffi;
use crate::mbuf::{Burst, Pkt};
use crate::stats::{LaneSnap, Published, Snapshot};
use crate::synth::Synth;

/// Bytes of one ring element: the packet handle, moved by value.
const ELEM: u32 = std::mem::size_of::<Pkt>() as u32;
// rte_ring's element mode needs a multiple of 4 bytes.
const _: () = assert!(ELEM.is_multiple_of(4));

/// A single-producer / single-consumer `rte_ring` of [`Pkt`] handles.
///
/// The ring owns the handles it holds: `enqueue` moves them in
/// (bitwise, through the C copy), `dequeue` moves them out, and
/// dropping the ring frees whatever is still inside. The pipeline gives
/// each ring exactly one producer lcore and one consumer lcore.
#[derive(Debug)]
pub struct Ring {
    ptr: NonNull<ffi::RteRing>,
}

// SAFETY: the ring is DPDK shared memory designed for one producer thread
// and one consumer thread; the pipeline calls `enqueue` from exactly one
// lcore and `dequeue` from exactly one other, as the SP/SC flags require.
unsafe impl Send for Ring {}
// SAFETY: see Send; `count` is a read of two indices.
unsafe impl Sync for Ring {}

impl Ring {
    /// A ring named `name` of `size` handles (a power of two) on `socket`.
    pub fn new(name: &str, size: u32, socket: c_int) -> Result<Ring, DpdkError> {
        let cname =
            CString::new(name).map_err(|_| DpdkError::new(format!("ring name {name:?}"), None))?;
        // SAFETY: the name is NUL-terminated; the shim returns a ring or NULL.
        let p = unsafe { ffi::tg_ring_create(cname.as_ptr(), ELEM, size, socket) };
        NonNull::new(p).map(|ptr| Ring { ptr }).ok_or_else(|| {
            // SAFETY: rte_errno of this thread, just set by the failed call.
            let e = unsafe { ffi::tg_errno() };
            DpdkError::new(
                format!(
                    "rte_ring_create_elem({name}, {size}) failed: {}",
                    crate::eal::strerror(e)
                ),
                Some("lower `pipeline.ring_size` or raise the EAL memory (-m)".into()),
            )
        })
    }

    /// Move as many of `staged` into the ring as fit; the rest stay in
    /// `staged[taken..]` for the caller. Returns how many were taken.
    #[inline]
    fn enqueue(&self, staged: &[MaybeUninit<Pkt>]) -> usize {
        // SAFETY: `staged` holds initialised handles; the ring copies the
        // first `n` of them bitwise and from then on owns them (the caller
        // must not drop those slots again, see `Staging::flush`).
        unsafe {
            ffi::tg_ring_enqueue_burst(
                self.ptr.as_ptr(),
                staged.as_ptr().cast::<c_void>(),
                ELEM,
                staged.len() as u32,
            ) as usize
        }
    }

    /// Move up to `out.len()` handles out of the ring into `out[..n]`.
    #[inline]
    fn dequeue(&self, out: &mut [MaybeUninit<Pkt>]) -> usize {
        // SAFETY: `out` has room for `out.len()` elements of ELEM bytes;
        // the first `n` returned are handles the producer moved in.
        unsafe {
            ffi::tg_ring_dequeue_burst(
                self.ptr.as_ptr(),
                out.as_mut_ptr().cast::<c_void>(),
                ELEM,
                out.len() as u32,
            ) as usize
        }
    }

    /// Handles in the ring now (the other side may be moving).
    pub fn count(&self) -> usize {
        // SAFETY: the ring is live.
        unsafe { ffi::tg_ring_count(self.ptr.as_ptr()) as usize }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Free the handles still inside (none after a normal shutdown).
        let mut buf: [MaybeUninit<Pkt>; 64] = [const { MaybeUninit::uninit() }; 64];
        loop {
            let n = self.dequeue(&mut buf);
            if n == 0 {
                break;
            }
            for slot in &mut buf[..n] {
                // SAFETY: dequeued slots hold handles now owned here.
                unsafe { slot.assume_init_drop() };
            }
        }
        // SAFETY: nobody uses the ring after this.
        unsafe { ffi::tg_ring_free(self.ptr.as_ptr()) }
    }
}

/// Handles a worker collected for one egress during one RX burst.
struct Staging {
    pkts: [MaybeUninit<Pkt>; MAX_BURST],
    len: usize,
}

impl Staging {
    fn new() -> Box<Staging> {
        Box::new(Staging {
            pkts: [const { MaybeUninit::uninit() }; MAX_BURST],
            len: 0,
        })
    }

    #[inline]
    fn push(&mut self, p: Pkt) {
        // A burst is at most MAX_BURST packets and is flushed after each.
        debug_assert!(self.len < MAX_BURST);
        if self.len < MAX_BURST {
            self.pkts[self.len].write(p);
            self.len += 1;
        }
    }

    /// Hand everything to `ring`; what does not fit is freed. Returns the
    /// number freed (the caller counts them `ring_full`).
    #[inline]
    fn flush(&mut self, ring: &Ring) -> u64 {
        let n = std::mem::take(&mut self.len);
        if n == 0 {
            return 0;
        }
        let taken = ring.enqueue(&self.pkts[..n]);
        for slot in &mut self.pkts[taken..n] {
            // SAFETY: slots taken..n were written by `push` and not moved
            // into the ring; dropping them frees their mbufs.
            unsafe { slot.assume_init_drop() };
        }
        (n - taken) as u64
    }
}

/// What one worker counts per egress lane.
#[derive(Debug, Default, Clone)]
pub struct WorkerLane {
    /// Unparsable frames, as received + dropped (`unparsable`) by the egress.
    pub counters: Counters,
    /// Parse outcomes of the frames classified for this egress.
    pub parse: ParseStats,
    /// Frames dropped because the ring to the egress was full.
    pub ring_full: u64,
}

/// One RX/classify worker lcore.
#[derive(Debug)]
pub struct Worker {
    /// The EAL lcore it runs on.
    pub lcore: u32,
    /// (device index, DPDK port id, RX queue) it polls.
    pub queues: Vec<(usize, u16, u16)>,
    /// Per device: synthetic traffic of the devices it polls (its own copy).
    synth: Vec<Option<Synth>>,
    /// Per device: the lane its frames go to (L2 peer).
    peer_lane: Vec<usize>,
    ingress: Ingress,
    burst: usize,
    /// Frames received per device.
    pub rx: Vec<u64>,
    /// Per egress lane.
    pub lanes: Vec<WorkerLane>,
}

impl Worker {
    /// Fill `out` with this worker's part of a snapshot (no names, no
    /// device counters: the merger adds those).
    fn snapshot_into(&self, now: Time, out: &mut Snapshot) {
        out.at = now;
        out.devs.resize_with(self.rx.len(), Default::default);
        for (o, &rx) in out.devs.iter_mut().zip(&self.rx) {
            o.rx = rx;
        }
        out.lanes.resize_with(self.lanes.len(), LaneSnap::default);
        for (o, l) in out.lanes.iter_mut().zip(&self.lanes) {
            o.counters = l.counters;
            o.parse = l.parse;
            o.ring_full = l.ring_full;
        }
    }

    /// Add this worker's counts into a whole-router snapshot.
    pub fn add_into(&self, out: &mut Snapshot) {
        let mut part = Snapshot::default();
        self.snapshot_into(out.at, &mut part);
        out.absorb(&part);
    }

    /// One worker iteration: for each of its RX queues, RX, stamp, L2
    /// decision, classify, stage per egress, one ring enqueue per egress;
    /// every 64 iterations the stop check and the stats tick. Sets
    /// `st.stopped` when [`STOP`] is set or `until` has passed.
    #[inline]
    fn step(&mut self, rings: &[Ring], ctl: &Control, part: &Published, st: &mut WorkerLoop) {
        for qi in 0..self.queues.len() {
            let (d, port, q) = self.queues[qi];
            let n = st.rx.rx_upto(port, q, self.burst);
            if n == 0 {
                continue;
            }
            self.rx[d] += n as u64;
            let lane = self.peer_lane[d];
            for mut m in st.rx.drain_prefetch(PREFETCH_AHEAD) {
                if let Some(s) = self.synth[d].as_mut() {
                    s.stamp(&mut m);
                }
                if !is_ip(m.data()) {
                    st.staged[lane].push(Pkt::bypass(m));
                    continue;
                }
                let wl = &mut self.lanes[lane];
                match self.ingress.classify_compact(m.data(), &mut wl.parse) {
                    Ok(c) => st.staged[lane].push(Pkt::new(m, &c)),
                    Err(_) => {
                        let len = m.pkt_len();
                        wl.counters.on_receive(len);
                        wl.counters.on_drop(DropReason::Unparsable, len);
                        // Dropping `m` frees the frame.
                    }
                }
            }
            for (l, s) in st.staged.iter_mut().enumerate() {
                self.lanes[l].ring_full += s.flush(&rings[l]);
            }
        }
        st.iter = st.iter.wrapping_add(1);
        if st.iter.is_multiple_of(64) {
            let now = ctl.clock.now();
            if ctl.should_stop(now) {
                st.stopped = true;
                return;
            }
            if let Some(t) = st.next_stats {
                if now >= t {
                    self.snapshot_into(now, &mut st.snap);
                    part.offer(&mut st.snap);
                    st.next_stats = ctl.next_tick(t);
                }
            }
        }
    }
}

/// A worker's loop state (buffers reused across iterations).
struct WorkerLoop {
    rx: Burst<MAX_BURST>,
    staged: Vec<Box<Staging>>,
    snap: Snapshot,
    next_stats: Option<Time>,
    iter: u32,
    stopped: bool,
}

impl WorkerLoop {
    fn new(lanes: usize, ctl: &Control) -> WorkerLoop {
        WorkerLoop {
            rx: Burst::default(),
            staged: (0..lanes).map(|_| Staging::new()).collect(),
            snap: Snapshot::default(),
            next_stats: ctl.first_tick(),
            iter: 0,
            stopped: false,
        }
    }
}

/// Shared by every lcore of a run.
#[derive(Debug)]
struct Control {
    clock: TscClock,
    until: Option<Time>,
    interval_ns: Option<u64>,
    /// Workers still running: a scheduler stops only when this is 0 and
    /// its rings are empty.
    workers_running: AtomicUsize,
    /// Set when not every lcore could be launched: everybody stops.
    abort: AtomicBool,
}

impl Control {
    fn should_stop(&self, now: Time) -> bool {
        STOP.load(Ordering::Relaxed) || self.until.is_some_and(|u| now >= u)
    }
    fn first_tick(&self) -> Option<Time> {
        self.interval_ns
            .map(|n| Time::from_nanos(self.clock.now().as_nanos() + n))
    }
    fn next_tick(&self, t: Time) -> Option<Time> {
        self.interval_ns.map(|n| Time::from_nanos(t.as_nanos() + n))
    }
}

/// The pipeline's lcores and rings, built from `[pipeline]` at start.
#[derive(Debug)]
pub struct Pipeline {
    /// The RX/classify workers.
    pub workers: Vec<Worker>,
    /// `rings[w][lane]`: worker `w`'s ring to egress lane `lane`.
    rings: Vec<Vec<Ring>>,
    /// Per lane: its scheduler lcore.
    pub scheduler_of: Vec<u32>,
}

impl Pipeline {
    /// Deal RX queues to workers (round robin over `ports[].queues` in
    /// config order) and create the rings. `ports[d]` is device `d`'s DPDK
    /// port id, `peer_lane[d]` the lane its frames leave through (L2), and
    /// `ingress` the classification every port uses; `router` is the
    /// router's number in this process, part of the rings' names. Fails,
    /// naming the key, when a configured lcore is not one of the EAL's.
    pub fn new(
        cfg: &RouterConfig,
        pl: &PipelineConfig,
        router: u32,
        ports: &[u16],
        peer_lane: &[usize],
        ingress: &Ingress,
    ) -> Result<Pipeline, DpdkError> {
        // SAFETY: plain queries of the initialised EAL.
        let main = unsafe { ffi::tg_main_lcore() };
        let check = |what: String, l: u32| -> Result<(), DpdkError> {
            // SAFETY: plain query of the initialised EAL.
            if unsafe { ffi::tg_lcore_enabled(l) } == 0 {
                return Err(DpdkError::new(
                    format!("{what} = {l}: lcore {l} is not one of the EAL's lcores"),
                    Some(format!(
                        "add it to the EAL's -l list (e.g. -l {main}-{}), or change {what}",
                        l.max(main)
                    )),
                ));
            }
            Ok(())
        };
        for &w in &pl.workers {
            check("`pipeline.workers`".into(), w)?;
        }
        let mut scheduler_of = Vec::new();
        for p in &cfg.ports {
            let l = pl.schedulers.get(&p.device).copied().unwrap_or(main);
            check(format!("`pipeline.schedulers.{}`", p.device), l)?;
            scheduler_of.push(l);
        }
        let ndev = cfg.ports.len();
        let mut workers: Vec<Worker> = pl
            .workers
            .iter()
            .map(|&lcore| Worker {
                lcore,
                queues: Vec::new(),
                synth: (0..ndev).map(|_| None).collect(),
                peer_lane: peer_lane.to_vec(),
                ingress: ingress.clone(),
                burst: usize::from(cfg.burst).min(MAX_BURST),
                rx: vec![0; ndev],
                lanes: vec![WorkerLane::default(); ndev],
            })
            .collect();
        let mut k = 0;
        for (d, p) in cfg.ports.iter().enumerate() {
            for q in 0..p.queues {
                let w = &mut workers[k % pl.workers.len()];
                w.queues.push((d, ports[d], q));
                if w.synth[d].is_none() {
                    w.synth[d] = p.synthetic.as_ref().map(Synth::new);
                }
                k += 1;
            }
        }
        let mut rings = Vec::new();
        for w in &workers {
            let mut row = Vec::new();
            for (lane, &s) in scheduler_of.iter().enumerate() {
                // SAFETY: plain query of the initialised EAL.
                let socket = unsafe { ffi::tg_lcore_socket(s) };
                row.push(Ring::new(
                    &format!(
                        "tg{router}_w{}_e{lane}_{}",
                        w.lcore,
                        std::process::id() % 100_000
                    ),
                    pl.ring_size,
                    socket,
                )?);
            }
            rings.push(row);
        }
        for w in &workers {
            tracing::info!(lcore = w.lcore, queues = ?w.queues, "pipeline worker");
        }
        tracing::info!(schedulers = ?scheduler_of, ring_size = pl.ring_size, "pipeline schedulers");
        Ok(Pipeline {
            workers,
            rings,
            scheduler_of,
        })
    }

    /// Handles waiting in the rings to `lane`.
    pub fn ring_queued(&self, lane: usize) -> u64 {
        self.rings.iter().map(|r| r[lane].count() as u64).sum()
    }
}

/// One scheduler lcore: the lanes it owns and their rings.
struct Scheduler<'a> {
    lcore: u32,
    /// (lane index, the lane).
    lanes: Vec<(usize, &'a mut Lane)>,
    sink: TxSinkParts<'a>,
}

impl Scheduler<'_> {
    /// One scheduler iteration: dequeue every ring of every owned lane
    /// into its pipeline, poll the pipelines, TX; the stop check and the
    /// stats tick. Sets `st.done` once the workers have stopped and a pass
    /// found every ring empty.
    #[inline]
    fn step(
        &mut self,
        rings: &[Vec<Ring>],
        ctl: &Control,
        part: &Published,
        burst: usize,
        st: &mut SchedLoop,
    ) {
        let mut now = ctl.clock.now();
        // Read before the pass: a worker's last enqueues happen before
        // its decrement (Release), so if this (Acquire) sees 0, the pass
        // below sees everything the workers ever enqueued.
        let workers_done = ctl.workers_running.load(Ordering::Acquire) == 0;
        let burst = burst.clamp(1, MAX_BURST);
        let mut got = 0;
        for (li, lane) in self.lanes.iter_mut() {
            for row in rings {
                let n = row[*li].dequeue(&mut st.buf[..burst]);
                got += n;
                if n > 0 {
                    // Stamp with a clock read after the dequeue (see
                    // `Router::rx_all`): a handle enqueued after the read
                    // at the top would otherwise leave the delay line early.
                    now = now.max(ctl.clock.now());
                }
                for slot in &st.buf[..n] {
                    // SAFETY: the first n slots were just filled by the
                    // ring with handles that are now ours; each is read once.
                    let p = unsafe { slot.assume_init_read() };
                    self.sink.receive(lane, p, now);
                }
            }
            self.sink.poll(lane, now);
        }
        st.iter = st.iter.wrapping_add(1);
        if st.iter.is_multiple_of(64) || got == 0 {
            if ctl.abort.load(Ordering::Relaxed)
                || (got == 0 && workers_done && ctl.should_stop(now))
            {
                // The workers are gone and this pass found every ring
                // empty: nothing more can arrive.
                st.done = true;
                tracing::debug!(lcore = self.lcore, "scheduler stopped");
                return;
            }
            if let Some(t) = st.next_stats {
                if now >= t {
                    self.snapshot_into(now, rings, &mut st.snap);
                    part.offer(&mut st.snap);
                    st.next_stats = ctl.next_tick(t);
                }
            }
        }
    }

    fn snapshot_into(&self, now: Time, rings: &[Vec<Ring>], out: &mut Snapshot) {
        out.at = now;
        let n = self.lanes.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
        out.lanes.resize_with(n, LaneSnap::default);
        for (i, lane) in &self.lanes {
            let o = &mut out.lanes[*i];
            crate::dataplane::fill_lane_snap(o, lane);
            o.ring_queued = rings.iter().map(|r| r[*i].count() as u64).sum();
        }
    }
}

/// A scheduler's loop state.
struct SchedLoop {
    buf: [MaybeUninit<Pkt>; MAX_BURST],
    snap: Snapshot,
    next_stats: Option<Time>,
    iter: u32,
    done: bool,
}

impl SchedLoop {
    fn new(ctl: &Control) -> SchedLoop {
        SchedLoop {
            buf: [const { MaybeUninit::uninit() }; MAX_BURST],
            snap: Snapshot::default(),
            next_stats: ctl.first_tick(),
            iter: 0,
            done: false,
        }
    }
}

/// What one lcore runs: a worker, a scheduler, or both (run to
/// completion on one core: each iteration a worker step, then a
/// scheduler step; the worker's packets for a port scheduled on the same
/// lcore still go through their ring, so order and accounting are the
/// same as across cores).
fn run_lcore(
    mut worker: Option<(&mut Worker, &[Ring], &Published)>,
    mut sched: Option<(&mut Scheduler<'_>, &Published)>,
    rings: &[Vec<Ring>],
    ctl: &Control,
    burst: usize,
) {
    let mut wl = worker
        .as_ref()
        .map(|(_, r, _)| WorkerLoop::new(r.len(), ctl));
    let mut sl = sched.as_ref().map(|_| SchedLoop::new(ctl));
    loop {
        if let (Some((w, r, part)), Some(st)) = (worker.as_mut(), wl.as_mut()) {
            if !st.stopped {
                w.step(r, ctl, part, st);
                if st.stopped {
                    ctl.workers_running.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
        match (sched.as_mut(), sl.as_mut()) {
            (Some((s, part)), Some(st)) => {
                s.step(rings, ctl, part, burst, st);
                if st.done {
                    return;
                }
            }
            _ => {
                if wl.as_ref().is_none_or(|st| st.stopped) {
                    return;
                }
            }
        }
    }
}

/// Run `jobs` (lcore, job) on their lcores, the main lcore's job (if any)
/// on this thread, and return when every job has returned.
///
/// `rte_eal_remote_launch` starts a plain C function with a pointer, so
/// the jobs borrow from the caller's stack like `std::thread::scope`: the
/// guard waits for every launched lcore, even if this thread unwinds,
/// before the borrows end. A job that panics is caught on its lcore and
/// reported as a failure.
fn run_on_lcores(
    jobs: Vec<(u32, Box<dyn FnMut() + Send + '_>)>,
    on_fail: &dyn Fn(),
) -> Result<(), DpdkError> {
    type Job<'a> = Box<dyn FnMut() + Send + 'a>;
    extern "C" fn trampoline(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` points at a boxed job that outlives the launch
        // (`WaitAll` waits for this lcore before the job is dropped).
        let job = unsafe { &mut *arg.cast::<Job<'_>>() };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
            Ok(()) => 0,
            Err(_) => -1,
        }
    }
    /// Waits for every launched lcore, also when unwinding.
    struct WaitAll {
        lcores: Vec<u32>,
        failed: bool,
    }
    impl WaitAll {
        fn wait(&mut self) {
            for l in self.lcores.drain(..) {
                // SAFETY: l was launched by us.
                if unsafe { ffi::tg_wait_lcore(l) } != 0 {
                    self.failed = true;
                }
            }
        }
    }
    impl Drop for WaitAll {
        fn drop(&mut self) {
            self.wait();
        }
    }
    // SAFETY: plain query of the initialised EAL.
    let main = unsafe { ffi::tg_main_lcore() };
    let mut jobs = jobs;
    // Declared after `jobs`, so dropped (and waited for) before them.
    let mut guard = WaitAll {
        lcores: Vec::new(),
        failed: false,
    };
    let mut main_jobs = Vec::new();
    let mut err = None;
    for (lcore, job) in jobs.iter_mut() {
        if *lcore == main {
            main_jobs.push(job);
            continue;
        }
        let arg = (job as *mut Job<'_>).cast::<c_void>();
        // SAFETY: trampoline matches the launch signature; `arg` stays
        // valid until the guard has waited for this lcore.
        let rc = unsafe { ffi::tg_remote_launch(trampoline, arg, *lcore) };
        if rc != 0 {
            err = Some(DpdkError::new(
                format!("rte_eal_remote_launch on lcore {lcore} failed ({rc})"),
                Some("give every pipeline role its own lcore from the EAL's -l list".into()),
            ));
            on_fail();
            break;
        }
        guard.lcores.push(*lcore);
    }
    if err.is_none() {
        for job in main_jobs {
            job();
        }
    }
    guard.wait();
    if let Some(e) = err {
        return Err(e);
    }
    if guard.failed {
        return Err(DpdkError::new(
            "a pipeline lcore panicked".to_string(),
            None,
        ));
    }
    Ok(())
}

/// When and how a pipeline run goes (see [`run`]).
#[derive(Debug)]
pub(crate) struct RunSpec<'a> {
    /// The clock every lcore reads.
    pub(crate) clock: TscClock,
    /// Stop at this time (else at [`STOP`]).
    pub(crate) until: Option<Time>,
    /// Statistics tick.
    pub(crate) interval: Option<Duration>,
    /// Packets per ring dequeue.
    pub(crate) burst: usize,
    /// Where the summed statistics go.
    pub(crate) publish: Option<&'a Arc<Published>>,
}

/// Run the pipeline until [`STOP`] or `until`: workers and schedulers on
/// their lcores, and (with `publish` and an `interval`) a merger thread
/// that adds the lcores' snapshots up and publishes the sum to `publish`
/// every `interval`. Returns when every lcore has stopped and every ring
/// is empty; the pipelines may still hold packets (drain them next).
pub(crate) fn run(
    pipeline: &mut Pipeline,
    lanes: &mut [Lane],
    sink: TxSinkParts<'_>,
    fill_devs: &(dyn Fn(&mut Snapshot) + Sync),
    spec: RunSpec<'_>,
) -> Result<(), DpdkError> {
    let RunSpec {
        clock,
        until,
        interval,
        burst,
        publish,
    } = spec;
    let ctl = Control {
        clock,
        until,
        interval_ns: interval.map(|d| d.as_nanos() as u64).filter(|&n| n > 0),
        workers_running: AtomicUsize::new(pipeline.workers.len()),
        abort: AtomicBool::new(false),
    };
    let Pipeline {
        workers,
        rings,
        scheduler_of,
    } = pipeline;
    let rings: &Vec<Vec<Ring>> = rings;
    // One scheduler per distinct lcore, owning its lanes.
    let mut scheds: Vec<Scheduler<'_>> = Vec::new();
    let mut sink = Some(sink);
    for (i, lane) in lanes.iter_mut().enumerate() {
        let l = scheduler_of[i];
        match scheds.iter_mut().find(|s| s.lcore == l) {
            Some(s) => s.lanes.push((i, lane)),
            None => scheds.push(Scheduler {
                lcore: l,
                lanes: vec![(i, lane)],
                // The first scheduler gets the capture (the config allows
                // a capture only when there is one scheduler lcore).
                sink: sink.take().unwrap_or_default(),
            }),
        }
    }
    let parts: Vec<Arc<Published>> = (0..workers.len() + scheds.len())
        .map(|_| Published::new())
        .collect();
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        if let (Some(target), Some(_)) = (publish, interval) {
            let (parts, done) = (&parts, &done);
            let _ = std::thread::Builder::new()
                .name("tollgate-merge".into())
                .spawn_scoped(scope, move || {
                    // Every lcore ticks on the same schedule; publish the
                    // sum once every part has published a newer tick, so
                    // each printed table adds up parts of the same tick.
                    let mut seen = vec![Time::ZERO; parts.len()];
                    while !done.load(Ordering::Acquire) {
                        std::thread::sleep(Published::POLL);
                        let snaps: Vec<Snapshot> = parts.iter().map(|p| p.latest()).collect();
                        if !snaps.iter().zip(&seen).all(|(s, &t)| s.at > t) {
                            continue;
                        }
                        for (t, s) in seen.iter_mut().zip(&snaps) {
                            *t = s.at;
                        }
                        let mut sum = Snapshot::default();
                        fill_devs(&mut sum);
                        for p in &snaps {
                            sum.absorb(p);
                        }
                        target.publish(sum);
                    }
                });
        }
        let mut jobs: Vec<(u32, Box<dyn FnMut() + Send + '_>)> = Vec::new();
        let (ctl, parts_ref) = (&ctl, &parts);
        let nw = workers.len();
        // One job per lcore: its worker, its scheduler, or both.
        let mut ws: Vec<Option<(&mut Worker, &[Ring], &Published)>> = workers
            .iter_mut()
            .zip(rings.iter())
            .enumerate()
            .map(|(wi, (w, row))| Some((w, row.as_slice(), &*parts_ref[wi])))
            .collect();
        for (si, s) in scheds.iter_mut().enumerate() {
            let lcore = s.lcore;
            let mut mine = ws
                .iter_mut()
                .find(|w| w.as_ref().is_some_and(|(w, _, _)| w.lcore == lcore))
                .and_then(Option::take);
            let mut sched = Some((s, &*parts_ref[nw + si]));
            jobs.push((
                lcore,
                Box::new(move || run_lcore(mine.take(), sched.take(), rings, ctl, burst)),
            ));
        }
        for w in ws.into_iter().flatten() {
            let lcore = w.0.lcore;
            let mut w = Some(w);
            jobs.push((
                lcore,
                Box::new(move || run_lcore(w.take(), None, rings, ctl, burst)),
            ));
        }
        let r = run_on_lcores(jobs, &|| {
            ctl.abort.store(true, Ordering::Relaxed);
            STOP.store(true, Ordering::Relaxed);
        });
        done.store(true, Ordering::Release);
        r
    });
    result
}

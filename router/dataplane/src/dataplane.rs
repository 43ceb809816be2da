//! The forwarding loop: RX -> classify -> delay -> enqueue -> dequeue ->
//! shape -> TX, in bursts, with mbufs as the packet handles.
//!
//! Shaped like DPDK's l3fwd: one loop per lcore polls its RX queues, hands
//! each burst to the egress pipelines ([`Lane`]: the library's
//! [`tollgate_router::port::Port`] around the configured discipline), then
//! polls every pipeline once, which releases due packets from the delay
//! line into the discipline and dequeues what the shaper allows into a TX
//! burst buffer. Nothing on this path allocates: packets live in mbufs,
//! handles move by value through the library's preallocated rings.
//!
//! Without `[pipeline]` one lcore runs every port pair: one [`Router`] owns
//! every RX queue and every egress lane ([`Router::run`]). With it, RX
//! workers and per-port schedulers run on several lcores
//! ([`crate::pipeline`], DPDK.md "Lcore layout").

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tollgate_cca::Time;
use tollgate_router::classify::Classifier;
use tollgate_router::port::{Port, Sink};
use tollgate_router::{DropReason, PacketHandle, Qdisc};

use crate::config::{CaptureWhat, Mode, RouterConfig};
use crate::eal::{DpdkError, Eal, EthPort, Mempool, TscClock};
use crate::l3::{Action, L3};
use crate::mbuf::{Burst, Mbuf, Pkt};
use crate::pcap::PcapWriter;
use crate::pipeline::Pipeline;
use crate::stats::Published;
use crate::stats::{
    DevSnap, DisciplineGauges, LaneSnap, RrmqsVariantGauges, Snapshot, MAX_GAUGE_VARIANTS,
};
use crate::synth::Synth;
use std::sync::Arc;
use tollgate_router::AnyQdisc;

/// Largest RX burst.
pub const MAX_BURST: usize = 256;
/// Packets whose headers are prefetched ahead of the one being classified.
pub const PREFETCH_AHEAD: usize = 4;
/// TX buffer per lane: flushed when full and after every loop iteration.
pub const TX_BURST: usize = 64;

/// Set by SIGINT / SIGTERM.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// Routers built so far in this process: each names its mempool and rings
/// with its number, since DPDK names are process-wide (two routers in one
/// EAL, as `tollgate-dpdk-bench --interleave` runs them, need two pools).
static ROUTERS: AtomicU32 = AtomicU32::new(0);

/// The name of router `instance`'s mempool: `tollgate_pool`, then
/// `tollgate_pool1`, `tollgate_pool2`, ...
fn pool_name(instance: u32) -> String {
    match instance {
        0 => "tollgate_pool".to_string(),
        n => format!("tollgate_pool{n}"),
    }
}

/// One device: its RX side.
#[derive(Debug)]
pub struct Device {
    /// The started port.
    pub eth: EthPort,
    /// Synthetic traffic stamped over RX frames.
    pub synth: Option<Synth>,
    /// Frames received.
    pub rx: u64,
    /// Ingress drops per [`crate::stats::INGRESS_REASONS`].
    pub ingress_drops: [u64; 4],
    /// L2: the lane frames from this device go to.
    pub peer_lane: usize,
}

/// Counters of a lane outside the library's pipeline.
#[derive(Debug, Clone)]
pub struct LaneCounters {
    /// Frames accepted by TX.
    pub tx_sent: u64,
    /// Frames TX refused.
    pub tx_full: u64,
    /// Frames forwarded around the discipline.
    pub bypass: u64,
    /// Transmitted bytes per variant.
    pub variant_tx_bytes: [u64; 64],
    /// Time this lane went unpolled beyond [`crate::config::POLL_GAP`],
    /// summed over the gaps, ns: how long the lcore was kept away (by the
    /// host's scheduler, on a shared machine) for longer than the default
    /// shaper bucket covers. While backlogged, the shaper loses the tokens
    /// of such stalls, as a link that sat idle.
    pub stalled_ns: u64,
    /// When the lane was last polled (ns of the dataplane clock; 0 = never).
    pub last_poll_ns: u64,
}

impl LaneCounters {
    /// Note a poll at `now` (once per loop iteration, not per packet).
    #[inline]
    pub fn note_poll(&mut self, now: Time) {
        let t = now.as_nanos();
        let limit = crate::config::POLL_GAP.as_nanos() as u64;
        let gap = t.saturating_sub(self.last_poll_ns);
        if self.last_poll_ns != 0 && gap > limit {
            self.stalled_ns += gap - limit;
        }
        self.last_poll_ns = t;
    }
}

impl Default for LaneCounters {
    fn default() -> Self {
        LaneCounters {
            tx_sent: 0,
            tx_full: 0,
            bypass: 0,
            variant_tx_bytes: [0; 64],
            stalled_ns: 0,
            last_poll_ns: 0,
        }
    }
}

/// One egress pipeline: packets leaving through one device.
#[derive(Debug)]
pub struct Lane {
    /// DPDK port id of the egress device.
    pub dev_id: u16,
    /// TX queue.
    pub queue: u16,
    /// Device name.
    pub name: String,
    /// Shaper rate.
    pub rate_bps: f64,
    /// The library pipeline.
    pub port: Port<Pkt, AnyQdisc<Pkt>>,
    /// TX buffer.
    pub tx: Burst<TX_BURST>,
    /// Counters.
    pub c: LaneCounters,
}

/// Where transmitted and dropped packets go: the TX buffer (flushed when
/// full) and the optional pcap.
struct TxSink<'a> {
    now: Time,
    dev_id: u16,
    queue: u16,
    tx: &'a mut Burst<TX_BURST>,
    c: &'a mut LaneCounters,
    pcap: Option<&'a mut (PcapWriter, CaptureWhat)>,
}

impl TxSink<'_> {
    #[inline]
    fn send(&mut self, m: Mbuf) {
        if self.tx.is_full() {
            flush(self.tx, self.dev_id, self.queue, self.c);
        }
        // Cannot fail: the buffer was just flushed if it was full.
        let _ = self.tx.push(m);
    }
}

impl Sink<Pkt> for TxSink<'_> {
    #[inline]
    fn transmit(&mut self, packet: Pkt, now: Time) {
        let v = usize::from(packet.variant().dscp() & 63);
        self.c.variant_tx_bytes[v] += u64::from(packet.len_bytes());
        if let Some((w, what)) = self.pcap.as_deref_mut() {
            if *what != CaptureWhat::Dropped {
                w.record(now, packet.mbuf.data(), packet.mbuf.pkt_len());
            }
        }
        self.send(packet.mbuf);
    }

    #[inline]
    fn drop(&mut self, packet: Pkt, _reason: DropReason) {
        if let Some((w, what)) = self.pcap.as_deref_mut() {
            if *what != CaptureWhat::Forwarded {
                w.record(self.now, packet.mbuf.data(), packet.mbuf.pkt_len());
            }
        }
        // Dropping the handle frees the mbuf.
    }
}

/// What a scheduler needs besides its lanes to run them: the capture, if
/// this lcore has it. Used by the pipeline mode ([`crate::pipeline`]).
#[derive(Debug, Default)]
pub(crate) struct TxSinkParts<'a> {
    pub(crate) pcap: Option<&'a mut (PcapWriter, CaptureWhat)>,
}

impl TxSinkParts<'_> {
    /// A handle from a worker's ring enters `lane` at `now`: frames marked
    /// [`Pkt::BYPASS`] go straight to TX, the others into the pipeline.
    #[inline]
    pub(crate) fn receive(&mut self, lane: &mut Lane, p: Pkt, now: Time) {
        let mut sink = TxSink {
            now,
            dev_id: lane.dev_id,
            queue: lane.queue,
            tx: &mut lane.tx,
            c: &mut lane.c,
            pcap: self.pcap.as_deref_mut(),
        };
        if p.flags() & Pkt::BYPASS != 0 {
            sink.c.bypass += 1;
            sink.send(p.mbuf);
        } else {
            lane.port.receive_and_send(p, now, &mut sink);
        }
    }

    /// Poll `lane` at `now` and flush its TX buffer.
    #[inline]
    pub(crate) fn poll(&mut self, lane: &mut Lane, now: Time) {
        let mut sink = TxSink {
            now,
            dev_id: lane.dev_id,
            queue: lane.queue,
            tx: &mut lane.tx,
            c: &mut lane.c,
            pcap: self.pcap.as_deref_mut(),
        };
        sink.c.note_poll(now);
        lane.port.poll(now, &mut sink);
        flush(&mut lane.tx, lane.dev_id, lane.queue, &mut lane.c);
    }
}

/// Transmit what `tx` holds on `dev_id`/`queue`, counting what was sent and
/// what the full TX ring made us free.
#[inline]
fn flush(tx: &mut Burst<TX_BURST>, dev_id: u16, queue: u16, c: &mut LaneCounters) {
    let (sent, freed) = tx.tx(dev_id, queue);
    c.tx_sent += sent as u64;
    c.tx_full += freed as u64;
}

/// Fill `o` with `l`'s numbers (plain copies, no text).
pub(crate) fn fill_lane_snap(o: &mut LaneSnap, l: &Lane) {
    let q = l.port.qdisc();
    o.egress.clone_from(&l.name);
    o.discipline = q.name();
    o.rate_bps = l.rate_bps;
    o.counters = *l.port.counters();
    o.parse = *l.port.parse_stats();
    o.in_flight = l.port.in_flight() as u64;
    o.qlen = q.len() as u64;
    o.qbytes = q.bytes();
    o.tx_sent = l.c.tx_sent;
    o.tx_full = l.c.tx_full;
    o.ring_full = 0;
    o.ring_queued = 0;
    o.bypass = l.c.bypass;
    o.stalled_ns = l.c.stalled_ns;
    o.variant_tx_bytes.clear();
    o.variant_tx_bytes.extend_from_slice(&l.c.variant_tx_bytes);
    o.disc = discipline_gauges(q);
}

/// The mempool, for the statistics merger thread: reading the free count
/// (`rte_mempool_avail_count`) is safe from any thread.
struct PoolRef<'a>(&'a Mempool);
// SAFETY: only `available()` is called through it, a read DPDK allows
// from any thread.
unsafe impl Sync for PoolRef<'_> {}

/// The router: devices, lanes, the pool and the loop state.
#[derive(Debug)]
pub struct Router {
    /// Devices in config order.
    pub devs: Vec<Device>,
    /// One lane per device (index = device index): packets leaving through it.
    pub lanes: Vec<Lane>,
    /// The flow-hash seed in use (configured, or drawn at start).
    pub hash_seed: u64,
    mode: Mode,
    l3: L3,
    burst: usize,
    pcap: Option<(PcapWriter, CaptureWhat)>,
    /// The clock.
    pub clock: TscClock,
    /// Multi-core mode (`[pipeline]`): the workers and the rings; `None`
    /// runs everything on one lcore ([`Router::run`]).
    pub pipeline: Option<Pipeline>,
    // Declared last: dropped after every mbuf owner above.
    pool: Mempool,
}

impl Router {
    /// Start every configured port and build the pipelines.
    pub fn new(cfg: &RouterConfig, eal: &Eal) -> Result<Router, DpdkError> {
        eal.require_ports()?;
        let instance = ROUTERS.fetch_add(1, Ordering::Relaxed);
        let pool = Mempool::new(&pool_name(instance), cfg.mbufs, eal)?;
        let classifier_rules = cfg.rules().map_err(|e| DpdkError {
            message: format!("rules: {e}"),
            hint: None,
        })?;
        let hash_seed = resolve_hash_seed(cfg.hash_seed);
        tracing::info!(
            hash_seed,
            configured = cfg.hash_seed.is_some(),
            "flow hash seed"
        );
        let mut devs = Vec::new();
        let mut lanes = Vec::new();
        for p in &cfg.ports {
            let id = eal.find_port(&p.device)?;
            let eth = EthPort::start(id, p.queues, cfg.rx_descriptors, cfg.tx_descriptors, &pool)?;
            let line = if eth.speed_mbps > 0 {
                f64::from(eth.speed_mbps) * 1e6
            } else {
                10e9
            };
            let plan = p.egress.build(line).map_err(|e| DpdkError {
                message: format!("port {}: egress: {e}", p.device),
                hint: None,
            })?;
            let qdisc = AnyQdisc::new(&plan.discipline).map_err(|e| DpdkError {
                message: format!("port {}: {e}", p.device),
                hint: None,
            })?;
            let port = Port::new(
                Classifier::new(classifier_rules.clone(), cfg.use_dscp),
                hash_seed,
                &plan.delay,
                qdisc,
                &plan.shaper,
            )
            .map_err(|e| DpdkError {
                message: format!("port {}: {e}", p.device),
                hint: None,
            })?;
            tracing::info!(
                egress = %eth.name,
                discipline = tollgate_router::Qdisc::name(port.qdisc()),
                rate_bps = plan.shaper.rate_bps,
                "egress pipeline built"
            );
            lanes.push(Lane {
                dev_id: id,
                queue: 0,
                name: eth.name.clone(),
                rate_bps: plan.shaper.rate_bps,
                port,
                tx: Burst::default(),
                c: LaneCounters::default(),
            });
            devs.push(Device {
                eth,
                synth: p.synthetic.as_ref().map(Synth::new),
                rx: 0,
                ingress_drops: [0; 4],
                peer_lane: 0,
            });
        }
        if cfg.mode == Mode::L2 {
            for (i, p) in cfg.ports.iter().enumerate() {
                let peer = p.peer.as_deref().unwrap_or_default();
                devs[i].peer_lane = cfg.ports.iter().position(|q| q.device == peer).unwrap_or(i);
            }
        }
        let macs: Vec<[u8; 6]> = devs.iter().map(|d| d.eth.mac).collect();
        let l3 = L3::new(cfg, &macs).map_err(|e| DpdkError {
            message: e,
            hint: None,
        })?;
        let pcap = match &cfg.pcap {
            None => None,
            Some(pc) => Some((
                PcapWriter::create(&pc.path, pc.max_bytes, pc.snaplen).map_err(|e| DpdkError {
                    message: format!("pcap {}: {e}", pc.path),
                    hint: None,
                })?,
                pc.capture,
            )),
        };
        let pipeline = match (&cfg.pipeline, lanes.first()) {
            (Some(pl), Some(first)) => {
                let ports: Vec<u16> = devs.iter().map(|d| d.eth.id).collect();
                let peers: Vec<usize> = devs.iter().map(|d| d.peer_lane).collect();
                // Workers classify for every egress: they hash when any
                // egress discipline reads the hash.
                let hash = lanes.iter().any(|l| l.port.qdisc().reads_flow_hash());
                let ingress = first.port.ingress().clone().with_flow_hash(hash);
                Some(Pipeline::new(cfg, pl, instance, &ports, &peers, &ingress)?)
            }
            _ => None,
        };
        Ok(Router {
            pipeline,
            devs,
            lanes,
            mode: cfg.mode,
            hash_seed,
            l3,
            burst: usize::from(cfg.burst).min(MAX_BURST),
            pcap,
            clock: TscClock::new(eal),
            pool,
        })
    }

    /// Receive one burst from every device queue and feed the pipelines.
    ///
    /// Each non-empty burst is stamped with the clock read *after* it was
    /// received, not with `now` (the iteration's start): a frame that
    /// arrived while this lcore was descheduled between the clock read and
    /// the RX call (or while it processed an earlier device's burst) would
    /// otherwise get an arrival time before its real one and leave the
    /// delay line early. Measured on the shared 2-core VM with the
    /// iteration's `now`: a 30 ms emulated RTT gave a TCP minimum RTT of
    /// 28.6 ms. Costs one TSC read per non-empty burst.
    #[inline]
    pub fn rx_all(&mut self, mut now: Time, rx: &mut Burst<MAX_BURST>) -> usize {
        let mut total = 0;
        for d in 0..self.devs.len() {
            let (id, queues) = (self.devs[d].eth.id, self.devs[d].eth.queues);
            for q in 0..queues {
                let n = rx.rx_upto(id, q, self.burst);
                if n == 0 {
                    continue;
                }
                now = now.max(self.clock.now());
                total += n;
                self.devs[d].rx += n as u64;
                for mut m in rx.drain_prefetch(PREFETCH_AHEAD) {
                    let dev = &mut self.devs[d];
                    if let Some(s) = dev.synth.as_mut() {
                        s.stamp(&mut m);
                    }
                    let action = match self.mode {
                        Mode::L2 => {
                            if is_ip(m.data()) {
                                Action::Queue(dev.peer_lane)
                            } else {
                                Action::Bypass(dev.peer_lane)
                            }
                        }
                        Mode::L3 => self.l3.forward(d, &mut m, now),
                    };
                    self.dispatch(d, action, m, now);
                }
            }
        }
        total
    }

    #[inline]
    fn dispatch(&mut self, d: usize, action: Action, m: Mbuf, now: Time) {
        match action {
            Action::Queue(l) => {
                let lane = &mut self.lanes[l];
                match lane.port.classify_compact(m.data()) {
                    Ok(c) => {
                        let mut sink = TxSink {
                            now,
                            dev_id: lane.dev_id,
                            queue: lane.queue,
                            tx: &mut lane.tx,
                            c: &mut lane.c,
                            pcap: self.pcap.as_mut(),
                        };
                        lane.port.receive_and_send(Pkt::new(m, &c), now, &mut sink);
                    }
                    Err(_) => {
                        // Counted by the port as received + dropped (unparsable).
                        if let Some((w, what)) = self.pcap.as_mut() {
                            if *what != CaptureWhat::Forwarded {
                                w.record(now, m.data(), m.pkt_len());
                            }
                        }
                    }
                }
            }
            Action::Bypass(l) => {
                let lane = &mut self.lanes[l];
                lane.c.bypass += 1;
                let mut sink = TxSink {
                    now,
                    dev_id: lane.dev_id,
                    queue: lane.queue,
                    tx: &mut lane.tx,
                    c: &mut lane.c,
                    pcap: self.pcap.as_mut(),
                };
                sink.send(m);
            }
            Action::Drop(reason) => {
                self.devs[d].ingress_drops[reason] += 1;
            }
        }
    }

    /// Poll every pipeline at `now` and flush the TX buffers.
    #[inline]
    pub fn tx_all(&mut self, now: Time) {
        let mut parts = TxSinkParts {
            pcap: self.pcap.as_mut(),
        };
        for lane in &mut self.lanes {
            parts.poll(lane, now);
        }
    }

    /// Packets inside all pipelines.
    pub fn in_flight(&self) -> usize {
        self.lanes.iter().map(|l| l.port.in_flight()).sum()
    }

    /// Run until STOP or `until`. Every `interval` the loop fills a
    /// snapshot ([`Router::snapshot_into`]) and hands it to `report`, which
    /// may swap it for another (e.g. with [`crate::stats::Published::offer`]);
    /// the buffer it leaves is refilled at the next tick. Formatting the
    /// numbers is for other threads.
    pub fn run(
        &mut self,
        until: Option<Time>,
        interval: Option<Duration>,
        mut report: impl FnMut(&mut Snapshot),
    ) {
        let mut rx: Burst<MAX_BURST> = Burst::default();
        let mut snap = Snapshot::default();
        let interval_ns = interval.map(|d| d.as_nanos() as u64).filter(|&n| n > 0);
        let mut next_stats = interval_ns.map(Time::from_nanos);
        let mut iter: u32 = 0;
        loop {
            let now = self.clock.now();
            self.rx_all(now, &mut rx);
            self.tx_all(now);
            iter = iter.wrapping_add(1);
            if iter.is_multiple_of(64) {
                if STOP.load(Ordering::Relaxed) || until.is_some_and(|u| now >= u) {
                    break;
                }
                if let (Some(t), Some(n)) = (next_stats, interval_ns) {
                    if now >= t {
                        self.snapshot_into(now, &mut snap);
                        report(&mut snap);
                        next_stats = Some(Time::from_nanos(t.as_nanos() + n));
                    }
                }
            }
        }
    }

    /// Stop receiving; keep transmitting until the pipelines are empty or `timeout` passes.
    pub fn drain(&mut self, timeout: Duration) {
        let start = self.clock.now();
        let end = start + timeout;
        loop {
            let now = self.clock.now();
            self.tx_all(now);
            if self.in_flight() == 0 || now >= end {
                break;
            }
        }
        if let Some((w, _)) = self.pcap.as_mut() {
            w.flush();
        }
    }

    /// Finish the capture: the writer thread writes what was recorded,
    /// flushes the file and stops (later frames are skipped).
    pub fn flush_pcap(&mut self) {
        if let Some((w, _)) = self.pcap.as_mut() {
            w.flush();
        }
    }

    /// pcap (frames captured, frames skipped at the size bound, frames
    /// dropped because the writer thread's ring was full, write failures).
    pub fn pcap_counts(&self) -> Option<(u64, u64, u64, u64)> {
        self.pcap
            .as_ref()
            .map(|(w, _)| (w.frames, w.skipped, w.ring_full, w.write_failed()))
    }

    /// A statistics snapshot.
    pub fn snapshot(&self, now: Time) -> Snapshot {
        let mut snap = Snapshot::default();
        self.snapshot_into(now, &mut snap);
        snap.render_gauges();
        snap
    }

    /// Fill `out` with the current numbers, reusing its buffers: plain
    /// copies, no text formatting (the discipline gauges are copied as
    /// numbers; readers render their labels). Once `out` has been filled
    /// before (the steady state of the stats tick, which circulates the
    /// same three snapshots through [`crate::stats::Published`]), nothing
    /// is allocated.
    pub fn snapshot_into(&self, now: Time, out: &mut Snapshot) {
        out.at = now;
        out.pool_free = u64::from(self.pool.available());
        out.neighbours = (self.mode == Mode::L3).then(|| self.l3.neighbour_stats());
        out.devs.truncate(self.devs.len());
        out.devs.resize_with(self.devs.len(), DevSnap::default);
        for (o, d) in out.devs.iter_mut().zip(&self.devs) {
            o.name.clone_from(&d.eth.name);
            o.rx = d.rx;
            o.ingress_drops = d.ingress_drops;
            o.hw = d.eth.device_stats();
        }
        out.lanes.truncate(self.lanes.len());
        out.lanes.resize_with(self.lanes.len(), LaneSnap::default);
        for (o, l) in out.lanes.iter_mut().zip(&self.lanes) {
            fill_lane_snap(o, l);
        }
        if let Some(p) = &self.pipeline {
            for (i, o) in out.lanes.iter_mut().enumerate() {
                o.ring_queued = p.ring_queued(i);
            }
            for w in &p.workers {
                w.add_into(out);
            }
        }
    }

    /// Pipeline mode: run the workers and schedulers on their lcores until
    /// [`STOP`] or `until`, publishing the summed statistics to `publish`
    /// every `interval` (see [`crate::pipeline`]). Returns when every lcore
    /// has stopped and the rings are empty; call [`Router::drain`] next.
    /// Without `[pipeline]` this is [`Router::run`] on this lcore.
    pub fn run_pipeline(
        &mut self,
        until: Option<Time>,
        interval: Option<Duration>,
        publish: Option<&Arc<Published>>,
    ) -> Result<(), DpdkError> {
        let Some(pipeline) = self.pipeline.as_mut() else {
            self.run(until, interval, |snap| {
                if let Some(p) = publish {
                    p.offer(snap);
                }
            });
            return Ok(());
        };
        let (devs, pool) = (&self.devs, PoolRef(&self.pool));
        let fill_devs = move |out: &mut Snapshot| {
            let pool = &pool;
            out.pool_free = u64::from(pool.0.available());
            out.devs.resize_with(devs.len(), DevSnap::default);
            for (o, d) in out.devs.iter_mut().zip(devs) {
                o.name.clone_from(&d.eth.name);
                o.hw = d.eth.device_stats();
            }
        };
        crate::pipeline::run(
            pipeline,
            &mut self.lanes,
            TxSinkParts {
                pcap: self.pcap.as_mut(),
            },
            &fill_devs,
            crate::pipeline::RunSpec {
                clock: self.clock,
                until,
                interval,
                burst: self.burst,
                publish,
            },
        )
    }
}

/// Discipline-specific numbers (RED's average, Cebinae's last evaluation,
/// RRMQS's last window): plain copies into a fixed-size value, no text.
fn discipline_gauges(q: &AnyQdisc<Pkt>) -> DisciplineGauges {
    match q {
        AnyQdisc::Rrmqs(r) => {
            let w = r.latest_window();
            let mut variants = [RrmqsVariantGauges::default(); MAX_GAUGE_VARIANTS];
            for (o, v) in variants.iter_mut().zip(&w.variants) {
                *o = RrmqsVariantGauges {
                    variant: v.variant,
                    index: v.index,
                    main_packets: v.main_packets,
                    main_flows: v.main_flows,
                    feedback: v.feedback,
                };
            }
            DisciplineGauges::Rrmqs {
                n: w.variants.len().min(MAX_GAUGE_VARIANTS),
                variants,
                jain: w.jain,
            }
        }
        AnyQdisc::Cebinae(c) => {
            let r = c.last_report();
            DisciplineGauges::Cebinae {
                saturated: r.saturated,
                top_flows: r.top_flows as u64,
                top_bytes: r.top_bytes,
                top_rate_bps: r.top_rate_bps,
                bot_rate_bps: r.bot_rate_bps,
            }
        }
        AnyQdisc::Red(r) => DisciplineGauges::Red {
            average: r.core().average(),
            max_p: r.core().max_p(),
        },
        AnyQdisc::Choke(r) => DisciplineGauges::Choke {
            average: r.core().average(),
        },
        AnyQdisc::DualPi2(d) => DisciplineGauges::DualPi2 {
            p_prime: d.p_prime(),
            l_packets: d.l_len() as u64,
            c_packets: d.c_len() as u64,
        },
        AnyQdisc::DropTail(_) | AnyQdisc::Fq(_) | AnyQdisc::Codel(_) | AnyQdisc::FqCodel(_) => {
            DisciplineGauges::None
        }
    }
}

/// The flow-hash seed to use: `configured` when set, else a fresh random
/// one from the operating system (`getrandom`), so every start gets an
/// unpredictable seed. Should the OS source fail, std's per-process random
/// `RandomState` keys, mixed with the time, are used instead.
pub fn resolve_hash_seed(configured: Option<u64>) -> u64 {
    if let Some(seed) = configured {
        return seed;
    }
    getrandom::u64().unwrap_or_else(|_| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        h.finish()
    })
}

/// Whether a frame carries IPv4 or IPv6 (after up to two VLAN tags).
#[inline]
pub fn is_ip(frame: &[u8]) -> bool {
    let mut off = 12;
    for _ in 0..3 {
        let Some(t) = frame.get(off..off + 2) else {
            return false;
        };
        match u16::from_be_bytes([t[0], t[1]]) {
            0x0800 | 0x86DD => return true,
            0x8100 | 0x88A8 => off += 4,
            _ => return false,
        }
    }
    false
}

/// Install SIGINT / SIGTERM handlers that set [`STOP`].
pub fn install_signal_handlers() {
    extern "C" fn on_signal(_sig: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
    }
    // SAFETY: the handler only stores to an atomic (async-signal-safe);
    // `signal` is called before any other thread exists.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_seed_is_random_unless_configured() {
        let (a, b) = (resolve_hash_seed(None), resolve_hash_seed(None));
        // Two draws of 64 random bits collide with probability 2^-64.
        assert_ne!(a, b, "two starts without a seed got the same seed");
        assert_eq!(resolve_hash_seed(Some(1)), 1);
        assert_eq!(resolve_hash_seed(Some(0xdead_beef)), 0xdead_beef);
        let cfg = |extra: &str| {
            crate::config::RouterConfig::parse(&format!(
                "{extra}\n[[ports]]\ndevice = \"a\"\npeer = \"a\"\n"
            ))
            .unwrap()
        };
        assert_eq!(cfg("").hash_seed, None);
        assert_eq!(cfg("hash_seed = 42").hash_seed, Some(42));
        assert_ne!(
            resolve_hash_seed(cfg("").hash_seed),
            resolve_hash_seed(cfg("").hash_seed)
        );
    }
}

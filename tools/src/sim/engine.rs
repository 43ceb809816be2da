//! The event loop and the raw measurements it records.
//!
//! Events: a packet arriving at a router port's input or at its destination
//! host (access links are crossed without events, see `Lp::send_on`), a
//! router port's poll (its shaper or delay line has work), a host's transport
//! timer or wake-up, and a flow's start.
//! A host's timer is re-armed after every interaction from
//! [`Endpoint::poll_timeout`](tollgate_transport::Endpoint::poll_timeout)
//! through its [`TimerSlot`](super::queue::TimerSlot), which queues an event
//! only when the timer moves earlier than the slot's queued events.
//!
//! **Logical processes and threads.** The network is split into logical
//! processes ([`partition`]), each with its own event
//! queue, hosts, ports and random streams. Virtual time advances in windows
//! no longer than the lookahead (the shortest delay between two LPs) and
//! ending at every metric sample: within a window each LP runs its own
//! events, in any order or on any thread; at the window's end the packets
//! sent from one LP to another are queued at their destinations, LP by LP
//! in a fixed order. The partition, the windows and that order depend only on
//! the scenario, so a run's results are a pure function of the scenario and
//! its seed, whatever `threads` is. Samples are taken between windows.
//!
//! A run can be stopped early: the caller's stop flag is checked between
//! windows. A stop is an explicit request, not a clock read, so the events
//! processed before it are exactly those of a complete run; the run then ends
//! at the window's end with a final sample there ([`RunData::partial`],
//! [`RunData::reached_s`]).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use slab::Slab;
use tollgate_cca::rng::SimRng;
use tollgate_cca::{Time, VariantId};
use tollgate_router::cebinae::ReconfigReport;
use tollgate_router::rrmqs::MeterWindow;
use tollgate_router::{Counters, DropReason, PacketHandle, PacketMeta, Qdisc};
use tollgate_transport::{ConnReport, ConnectionOptions};

use super::host::{self, Host, Role};
use super::net::{AnyQdisc, Collector, Crossing, Link, LinkQueue, SimPacket, WIRE_OVERHEAD};
use super::noise::{PathNoise, Wakeups};
use super::partition::{self, Partition};
use super::pcap::{Captured, Pcap};
use super::queue::EventQueue;
use super::tls::Crypto;
use super::topology::{self, stream_seed, FlowSpec};
use super::trace::{Trace, TraceLines};
use crate::scenario::{NoiseKind, Scenario, PACKET_BYTES};

/// Per-port samples and totals.
#[derive(Debug)]
pub struct PortRecord {
    /// Hop index.
    pub hop: u32,
    /// Forward (true) or reverse.
    pub forward: bool,
    /// Its link.
    link: u32,
    /// Queue length (packets) per sample.
    pub qlen: Vec<u32>,
    /// Queued bytes per sample.
    pub qbytes: Vec<u64>,
    /// Bytes transmitted, cumulative, per sample.
    pub tx_bytes: Vec<u64>,
    /// Mean queueing delay (ns) of packets transmitted during each sample interval.
    pub delay_mean_ns: Vec<f64>,
    /// Queueing delay of every transmitted packet that arrived as L4S
    /// traffic (ECT(1) or CE), µs.
    pub delay_l4s_us: Histogram<u64>,
    /// The same, of the other (Classic) packets; with `delay_l4s_us`, every
    /// transmitted packet ([`PortRecord::delay_us`]).
    pub delay_classic_us: Histogram<u64>,
    delay_sum: f64,
    delay_n: u64,
    /// Final port counters.
    pub counters: Counters,
    /// Packets inside the port at the end.
    pub in_flight: usize,
    /// Cebinae: reports per sample.
    pub cebinae: Vec<ReconfigReport>,
    /// Cebinae: per sample, per flow, whether the flow is a top flow.
    pub cebinae_top: Vec<Vec<bool>>,
    /// RRMQS: closed meter windows with the real per-variant values.
    pub rrmqs: Vec<(MeterWindow, Vec<RealIndex>)>,
    last_window_end: Time,
    /// Per flow: bytes of the flow's packets transmitted by this port, at the last RRMQS window end.
    flow_bytes_at_window: Vec<u64>,
}

/// The "real" per-variant slowdown index over one meter window, from the
/// bytes each flow actually got through the port.
#[derive(Clone, Debug)]
pub struct RealIndex {
    /// Variant.
    pub variant: VariantId,
    /// Flows of the variant that sent through the port in the window.
    pub flows: u32,
    /// Mean per-flow rate of the variant / fair per-flow rate.
    pub index: f64,
}

/// Per-flow raw data.
#[derive(Debug)]
pub struct FlowRecord {
    /// The flow.
    pub spec: FlowSpec,
    /// Application bytes received, cumulative, per sample.
    pub rx: Vec<u64>,
    /// The sender's capacity estimate per sample, Mbit/s (the CCA's
    /// `capacity_mbps` statistic, e.g. Libra's), where it reports one;
    /// empty for algorithms that do not, and for `load` runs.
    pub capacity_mbps: Vec<Option<f64>>,
    /// Drops by reason (index = [`DropReason::index`]) of the flow's packets at router ports.
    pub drops: [u64; DropReason::COUNT],
    /// Drops at a rate-capped access link.
    pub access_drops: u64,
    /// Packets lost at random on entering a forward bottleneck port
    /// (`topology.bottleneck.loss`).
    pub loss_drops: u64,
    /// Bytes of the flow's packets transmitted by each forward port.
    pub port_bytes: Vec<u64>,
    /// Receiver saw the end of the stream (virtual ns).
    pub fin_at: Option<u64>,
    /// Sender saw all data acknowledged.
    pub acked_at: Option<u64>,
    /// The sender connection's final report.
    pub report: Option<ConnReport>,
    /// The receiver connection's final report (`tollgate sim` only).
    pub receiver_report: Option<ConnReport>,
    /// Datagrams of the flow the emulator's fault injection dropped (see
    /// [`host`](super::host#fault-injection)).
    pub injected_drops: u64,
    /// Errors.
    pub error: Option<String>,
}

/// Everything a run recorded.
#[derive(Debug)]
pub struct RunData {
    /// Sample times, seconds.
    pub t: Vec<f64>,
    /// Flows.
    pub flows: Vec<FlowRecord>,
    /// Measured router ports (forward then reverse).
    pub ports: Vec<PortRecord>,
    /// Datagrams the hosts sent.
    pub packets_sent: u64,
    /// Events processed.
    pub events: u64,
    /// The run was stopped before the scenario's duration.
    pub partial: bool,
    /// Virtual time reached, seconds (the duration unless `partial`).
    pub reached_s: f64,
    /// Logical processes the network was split into (1 for `load` runs).
    pub lps: usize,
}

/// Threads used by [`run`] when the caller does not choose (the CLI's
/// `--threads`); 1 until [`set_default_threads`] is called.
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(1);

/// Set the number of threads [`run`] uses (at least 1). It never changes a
/// result, only the wall time.
pub fn set_default_threads(n: usize) {
    DEFAULT_THREADS.store(n.max(1), Ordering::Relaxed);
}

/// The number of threads [`run`] uses.
pub fn default_threads() -> usize {
    DEFAULT_THREADS.load(Ordering::Relaxed)
}

/// Packets wait in [`Lp::packets`]; an event names a packet by its slot, so
/// heap entries stay small (sifting moved whole packets) and a hop allocates
/// nothing (a `Box` per packet per router port was 2 % of a run's
/// instructions in malloc and free).
enum Ev {
    Arrive(u32),
    PortPoll(u32),
    HostTimer(u32),
    HostWake(u32),
    FlowStart(u32),
}

/// Per flow, what one LP counted (summed over LPs at the end).
#[derive(Clone, Debug)]
struct FlowStats {
    drops: [u64; DropReason::COUNT],
    access_drops: u64,
    loss_drops: u64,
    /// Bytes of the flow's packets transmitted by each forward port.
    port_bytes: Vec<u64>,
}

/// A host with its own random streams.
///
/// Every random stream belongs to one host or one port, seeded from the
/// scenario's seed and the host's or link's index, so which LP draws it and
/// in which order the LPs run cannot change a draw.
struct Node {
    host: Host,
    /// `noise = "host"`: draws the host's wake-up latencies.
    wakeups: Option<Wakeups>,
    /// `noise = "host"`: draws the path noise ahead of the host.
    path_noise: Option<PathNoise>,
    /// When the latest packet towards the host leaves the path noise.
    path_noise_last: u64,
    /// `noise = "iid"`: draws the host's emission jitter.
    jitter_rng: SimRng,
}

/// A packet sent to another LP, queued there at the window's end.
struct Msg {
    lp: u32,
    at: u64,
    lane: Option<usize>,
    p: SimPacket,
}

/// What every LP reads and none writes.
struct World<'a> {
    s: &'a Scenario,
    base: Instant,
    /// The run's end, ns.
    end: u64,
    flows: Vec<FlowSpec>,
    forward_ports: Vec<u32>,
    nlinks: usize,
    part: Partition,
    /// Index of each host in its LP's `nodes`.
    host_idx: Vec<u32>,
    /// Index of each link in its LP's `links`.
    link_idx: Vec<u32>,
    /// Link id -> index of its port record (measured ports).
    port_of_link: Vec<Option<usize>>,
    /// Port record -> index in its LP's `records`.
    rec_idx: Vec<u32>,
    /// Per flow: its forward-data flow hash (for Cebinae's top-flow lookup).
    flow_hash: Vec<u64>,
    /// `noise = "iid"`: host emission jitter bound, ns (0: none).
    jitter_ns: f64,
    /// Random loss probability at the forward bottleneck port(s).
    loss: f64,
}

impl World<'_> {
    fn instant(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    fn ns_of(&self, i: Instant) -> u64 {
        i.saturating_duration_since(self.base).as_nanos() as u64
    }

    fn path(&self, p: &SimPacket) -> &[u32] {
        let f = &self.flows[p.flow as usize];
        if p.to_server {
            &f.up_path
        } else {
            &f.down_path
        }
    }
}

/// One logical process: its hosts, ports and access links, and its events.
struct Lp {
    id: u32,
    now: u64,
    /// The end of the window being run (packets to other LPs arrive after it).
    wend: u64,
    queue: EventQueue<Ev>,
    nodes: Vec<Node>,
    links: Vec<Link>,
    /// Per link of `links`: the random-loss stream of a forward bottleneck port.
    loss_rng: Vec<Option<SimRng>>,
    /// Records of the measured ports this LP owns.
    records: Vec<PortRecord>,
    /// Per flow.
    stats: Vec<FlowStats>,
    collector: Collector,
    /// Packets travelling on a link (between an `Arrive` event's scheduling
    /// and its run); the events name their slots.
    packets: Slab<SimPacket>,
    /// Datagram buffers of dropped packets, reused by the hosts.
    pool: Vec<Vec<u8>>,
    packets_sent: u64,
    events: u64,
    /// Packets for other LPs, sent during the window.
    outbox: Vec<Msg>,
    /// Debug trace lines (`TOLLGATE_TRACE`), usually off.
    trace: Option<TraceLines>,
    /// Captured datagrams (`TOLLGATE_PCAP`), usually off.
    pcap: Option<Vec<Captured>>,
}

/// Run a scenario on [`default_threads`] threads; see [`run_threads`].
pub fn run(
    s: &Scenario,
    progress: &mut dyn FnMut(f64),
    stop: &AtomicBool,
) -> anyhow::Result<RunData> {
    run_threads(s, default_threads(), progress, stop)
}

/// Run a scenario on up to `threads` threads (the results are the same for
/// any number); `progress` is called with the fraction of virtual time done
/// after every sample.
///
/// When `stop` becomes true (a Ctrl-C handler, or a test) the run ends at the
/// end of the current window: a last sample is taken there, and the data is
/// returned with `partial` set and `reached_s` the time reached.
pub fn run_threads(
    s: &Scenario,
    threads: usize,
    progress: &mut dyn FnMut(f64),
    stop: &AtomicBool,
) -> anyhow::Result<RunData> {
    if let Some((i, g)) = s
        .flows
        .iter()
        .enumerate()
        .find(|(_, g)| g.cca.starts_with("tcp:") || g.cca.starts_with("quiche:"))
    {
        anyhow::bail!(
            "flows[{i}].cca = \"{}\": kernel TCP and quiche flows run in `tollgate load` and \
             `tollgate testbed`; `tollgate sim` runs Tollgate QUIC flows (a registry spec \
             such as \"cubic\")",
            g.cca
        );
    }
    let net = topology::build(s)?;
    let crypto = Crypto::new(s.packet_protection)?;
    let mut seeder = tollgate_cca::rng::seeded(s.seed ^ 0xe9d9_0000);
    let mut hosts = Vec::new();
    for (i, f) in net.flows.iter().enumerate() {
        for client in [true, false] {
            let mut seed = [0u8; 32];
            for chunk in seed.chunks_mut(8) {
                chunk.copy_from_slice(&tollgate_cca::rng::Rng::next_u64(&mut seeder).to_le_bytes());
            }
            let addr = if client { f.client } else { f.server };
            hosts.push(Host::new(
                addr,
                i as u32,
                seed,
                &crypto,
                client,
                f.window,
                // Every host's own link is its access link.
                s.access_rate_bps,
            )?);
        }
    }
    let nflows = net.flows.len();
    if let Some(i) = host::drop_first_ack_frequency_from_env(nflows)? {
        hosts[2 * i].drop_first_ack_frequency = true;
    }
    let part = partition::build(&net.flows, &net.links);
    if std::env::var_os("TOLLGATE_DEBUG_LP").is_some() {
        eprintln!(
            "lps {} lookahead {} weights {:?}",
            part.lps, part.lookahead_ns, part.weight
        );
    }
    let mut lps: Vec<Lp> = (0..part.lps)
        .map(|id| Lp {
            id: id as u32,
            now: 0,
            wend: 0,
            queue: EventQueue::new((s.duration_s * 1e9).round() as u64),
            nodes: Vec::new(),
            links: Vec::new(),
            loss_rng: Vec::new(),
            records: Vec::new(),
            stats: vec![
                FlowStats {
                    drops: [0; DropReason::COUNT],
                    access_drops: 0,
                    loss_drops: 0,
                    port_bytes: vec![0; net.forward_ports.len()],
                };
                nflows
            ],
            collector: Collector::default(),
            packets: Slab::new(),
            pool: Vec::new(),
            packets_sent: 0,
            events: 0,
            outbox: Vec::new(),
            trace: None,
            pcap: None,
        })
        .collect();
    let host_noise = s.noise == NoiseKind::Host;
    let mut host_idx = Vec::with_capacity(hosts.len());
    for (h, host) in hosts.into_iter().enumerate() {
        let lp = &mut lps[part.host_lp[h] as usize];
        host_idx.push(lp.nodes.len() as u32);
        lp.nodes.push(Node {
            host,
            wakeups: host_noise
                .then(|| Wakeups::new(stream_seed(s.seed ^ 0x3a4e_0b5e, h), s.noise_scale)),
            path_noise: (host_noise && s.path_noise_scale > 0.0)
                .then(|| PathNoise::new(stream_seed(s.seed ^ 0x9a7e_4015, h), s.path_noise_scale)),
            path_noise_last: 0,
            jitter_rng: tollgate_cca::rng::seeded(stream_seed(s.seed ^ 0x6a17_7e20, h)),
        });
    }
    let mut port_of_link = vec![None; net.links.len()];
    let mut rec_idx = Vec::new();
    for (forward, list) in [(true, &net.forward_ports), (false, &net.reverse_ports)] {
        for (hop, &l) in list.iter().enumerate() {
            port_of_link[l as usize] = Some(rec_idx.len());
            let lp = &mut lps[part.link_lp[l as usize] as usize];
            rec_idx.push(lp.records.len() as u32);
            lp.records
                .push(PortRecord::new(l, hop as u32, forward, nflows));
        }
    }
    let mut link_idx = Vec::with_capacity(net.links.len());
    let nlinks = net.links.len();
    for (l, link) in net.links.into_iter().enumerate() {
        let lp = &mut lps[part.link_lp[l] as usize];
        link_idx.push(lp.links.len() as u32);
        lp.links.push(link);
        lp.loss_rng.push(
            (s.bottleneck_loss > 0.0 && net.forward_ports.contains(&(l as u32)))
                .then(|| tollgate_cca::rng::seeded(stream_seed(s.seed ^ 0x1055_d0e5, l))),
        );
    }
    let hasher = tollgate_router::flow::FlowHasher::new(net.hash_seed);
    let flow_hash = net
        .flows
        .iter()
        .map(|f| {
            hasher.hash(&tollgate_router::packet::FlowKey::new(
                f.client.ip(),
                f.server.ip(),
                17,
                f.client.port(),
                f.server.port(),
            ))
        })
        .collect();
    let nfwd = net.forward_ports.len();
    let flows: Vec<FlowRecord> = net.flows.iter().map(|f| FlowRecord::new(f, nfwd)).collect();
    let mut trace = Trace::from_env()?;
    let mut pcap = match std::env::var_os("TOLLGATE_PCAP") {
        Some(dir) => Some(Pcap::create(std::path::Path::new(&dir))?),
        None => None,
    };
    for lp in &mut lps {
        lp.trace = trace.as_ref().map(Trace::lines);
        lp.pcap = pcap.as_ref().map(|_| Vec::new());
    }
    let end = (s.duration_s * 1e9).round() as u64;
    let w = World {
        s,
        base: Instant::now(),
        end,
        flows: net.flows,
        forward_ports: net.forward_ports,
        nlinks,
        part,
        host_idx,
        link_idx,
        port_of_link,
        rec_idx,
        flow_hash,
        jitter_ns: s.host_jitter_s * 1e9,
        loss: s.bottleneck_loss,
    };
    for (i, f) in w.flows.iter().enumerate() {
        lps[w.part.host_lp[2 * i] as usize]
            .queue
            .push(f.start_ns, Ev::FlowStart(i as u32));
    }
    let mut c = Coordinator {
        flows,
        samples: Vec::new(),
        trace: trace.take(),
        pcap: pcap.take(),
        events: 0,
    };
    let lps: Vec<Mutex<Lp>> = lps.into_iter().map(Mutex::new).collect();
    let (partial, reached) = drive(&w, &lps, &mut c, threads, progress, stop)?;
    let mut lps: Vec<Lp> = lps
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();
    let ports = c.finish(&w, &mut lps, reached);
    Ok(RunData {
        t: c.samples,
        flows: c.flows,
        ports,
        packets_sent: lps.iter().map(|lp| lp.packets_sent).sum(),
        events: c.events + lps.iter().map(|lp| lp.events).sum::<u64>(),
        partial,
        reached_s: if partial {
            reached as f64 / 1e9
        } else {
            s.duration_s
        },
        lps: w.part.lps,
    })
}

/// What the driving thread keeps between windows.
struct Coordinator {
    flows: Vec<FlowRecord>,
    samples: Vec<f64>,
    trace: Option<Trace>,
    pcap: Option<Pcap>,
    /// Samples taken (counted as events).
    events: u64,
}

/// Shared by the threads of one run.
struct Pool<'a> {
    lps: &'a [Mutex<Lp>],
    /// LPs in the order threads take them (heaviest first).
    order: Vec<usize>,
    next: AtomicUsize,
    wend: AtomicU64,
    done: AtomicBool,
    barrier: SpinBarrier,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Pool<'_> {
    /// Take LPs until none is left, running each to the window's end.
    fn work(&self, w: &World) {
        let wend = self.wend.load(Ordering::Acquire);
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            let Some(&lp) = self.order.get(i) else {
                return;
            };
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let mut g = self.lps[lp].lock().unwrap_or_else(|e| e.into_inner());
                g.run(w, wend);
            }));
            if let Err(e) = r {
                self.panic
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(e);
                return;
            }
        }
    }
}

/// A barrier for the window loop. Windows are short (a bench-10-flows run
/// has 20,000) and a `std::sync::Barrier` puts waiters to sleep at once, a
/// futex wake-up per thread per window; here a waiter spins about ten
/// microseconds first (on an idle machine the other threads usually arrive
/// by then), then sleeps, so a busy machine loses little to spinning.
struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    lock: Mutex<()>,
    released: std::sync::Condvar,
}

/// Spin iterations before a waiter sleeps (a `pause` takes 40-140 cycles).
const BARRIER_SPINS: u32 = 256;

impl SpinBarrier {
    fn new(n: usize) -> Self {
        SpinBarrier {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            lock: Mutex::new(()),
            released: std::sync::Condvar::new(),
        }
    }

    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            // Reset before releasing: a released waiter that comes back at
            // once counts towards the next generation.
            self.arrived.store(0, Ordering::Relaxed);
            {
                let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                self.generation.fetch_add(1, Ordering::Release);
            }
            self.released.notify_all();
            return;
        }
        for _ in 0..BARRIER_SPINS {
            if self.generation.load(Ordering::Acquire) != generation {
                return;
            }
            std::hint::spin_loop();
        }
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while self.generation.load(Ordering::Acquire) == generation {
            g = self.released.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

fn lock_all<'a>(lps: &'a [Mutex<Lp>]) -> Vec<MutexGuard<'a, Lp>> {
    lps.iter()
        .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

/// Advance virtual time window by window to the end (or a stop); returns
/// whether the run is partial and the time reached.
fn drive(
    w: &World,
    lps: &[Mutex<Lp>],
    c: &mut Coordinator,
    threads: usize,
    progress: &mut dyn FnMut(f64),
    stop: &AtomicBool,
) -> anyhow::Result<(bool, u64)> {
    let threads = threads.clamp(1, lps.len());
    let mut order: Vec<usize> = (0..lps.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(w.part.weight[i]));
    let pool = Pool {
        lps,
        order,
        next: AtomicUsize::new(0),
        wend: AtomicU64::new(0),
        done: AtomicBool::new(false),
        barrier: SpinBarrier::new(threads),
        panic: Mutex::new(None),
    };
    std::thread::scope(|sc| {
        for _ in 1..threads {
            sc.spawn(|| loop {
                pool.barrier.wait();
                if pool.done.load(Ordering::Acquire) {
                    return;
                }
                pool.work(w);
                pool.barrier.wait();
            });
        }
        let run_window = |wend: u64| {
            pool.wend.store(wend, Ordering::Release);
            pool.next.store(0, Ordering::Release);
            if threads > 1 {
                pool.barrier.wait();
            }
            pool.work(w);
            if threads > 1 {
                pool.barrier.wait();
            }
        };
        let r = windows(w, &pool, c, &run_window, progress, stop);
        pool.done.store(true, Ordering::Release);
        if threads > 1 {
            pool.barrier.wait();
        }
        r
    })
}

/// The window loop (see the module docs).
fn windows(
    w: &World,
    pool: &Pool,
    c: &mut Coordinator,
    run_window: &dyn Fn(u64),
    progress: &mut dyn FnMut(f64),
    stop: &AtomicBool,
) -> anyhow::Result<(bool, u64)> {
    let end = w.end;
    let dt = (w.s.sample_interval_s * 1e9).round() as u64;
    let nsamples = end.div_ceil(dt);
    // The next sample, k = 1 ..= nsamples, at min(k * dt, end).
    let mut k = 1u64;
    let mut t = 0u64;
    let lookahead = w.part.lookahead_ns;
    let mut partial = stop.load(Ordering::Relaxed);
    // The earliest event of any LP; it changes only when a window runs.
    let mut earliest = {
        let mut g = lock_all(pool.lps);
        earliest_event(&g.iter_mut().map(|g| &mut **g).collect::<Vec<_>>())
    };
    while !partial {
        let next_sample = if k <= nsamples {
            (k * dt).min(end)
        } else {
            end + 1
        };
        // Skip time in which no LP has an event.
        t = t.max(earliest.min(next_sample));
        let wend = next_sample.min(t.saturating_add(lookahead));
        if wend > t {
            run_window(wend);
            if let Some(e) = pool.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
                std::panic::resume_unwind(e);
            }
            let mut g = lock_all(pool.lps);
            let mut lps: Vec<&mut Lp> = g.iter_mut().map(|g| &mut **g).collect();
            exchange(&mut lps);
            c.flush_logs(&mut lps)?;
            earliest = earliest_event(&lps);
            t = wend;
        }
        if t == next_sample && k <= nsamples {
            let mut g = lock_all(pool.lps);
            let mut lps: Vec<&mut Lp> = g.iter_mut().map(|g| &mut **g).collect();
            c.sample(w, &mut lps, t);
            progress(k as f64 / nsamples as f64);
            k += 1;
        }
        if k > nsamples && t > end {
            break;
        }
        partial = stop.load(Ordering::Relaxed);
    }
    // A stop after the last sample is a complete run.
    partial &= k <= nsamples;
    if partial && c.samples.last().is_none_or(|&s| s < t as f64 / 1e9) {
        // Close the series at the time reached (a shorter last interval).
        let mut g = lock_all(pool.lps);
        let mut lps: Vec<&mut Lp> = g.iter_mut().map(|g| &mut **g).collect();
        c.sample(w, &mut lps, t);
    }
    Ok((partial, t.min(end)))
}

/// The time of the earliest event queued in any LP (`u64::MAX`: none).
fn earliest_event(lps: &[&mut Lp]) -> u64 {
    lps.iter()
        .filter_map(|lp| lp.queue.peek_t())
        .min()
        .unwrap_or(u64::MAX)
}

/// Queue the packets every LP sent to others during the window, LP by LP.
fn exchange(lps: &mut [&mut Lp]) {
    for i in 0..lps.len() {
        let mut out = std::mem::take(&mut lps[i].outbox);
        for m in out.drain(..) {
            lps[m.lp as usize].queue_arrival(m.at, m.p, m.lane);
        }
        lps[i].outbox = out;
    }
}

impl Coordinator {
    /// Write the trace lines and captures of the window.
    fn flush_logs(&mut self, lps: &mut [&mut Lp]) -> anyhow::Result<()> {
        if let Some(tr) = self.trace.as_mut() {
            tr.write(lps.iter_mut().filter_map(|lp| lp.trace.as_mut()));
        }
        if let Some(p) = self.pcap.as_mut() {
            if let Err(e) = p.write(lps.iter_mut().filter_map(|lp| lp.pcap.as_mut())) {
                eprintln!("warning: {e}; capture stopped");
                self.pcap = None;
                for lp in lps.iter_mut() {
                    lp.pcap = None;
                }
            }
        }
        Ok(())
    }

    fn sample(&mut self, w: &World, lps: &mut [&mut Lp], t: u64) {
        self.events += 1;
        self.samples.push(t as f64 / 1e9);
        let ro: Vec<&Lp> = lps.iter().map(|lp| &**lp).collect();
        let node = |h: usize| &ro[w.part.host_lp[h] as usize].nodes[w.host_idx[h] as usize];
        for (i, f) in self.flows.iter_mut().enumerate() {
            let (server, client) = (node(2 * i + 1), node(2 * i));
            let Role::Server(app) = &server.host.role else {
                unreachable!("odd hosts are servers");
            };
            f.rx.push(app.rx_bytes);
            if let Role::Client(app) = &client.host.role {
                let capacity = app
                    .conn
                    .and_then(|ch| client.host.ep.cca_handle(ch))
                    .and_then(|cca| cca.snapshot().stats.number(tollgate_cca::CAPACITY_MBPS));
                if capacity.is_some() || !f.capacity_mbps.is_empty() {
                    f.capacity_mbps.resize(f.rx.len() - 1, None);
                    f.capacity_mbps.push(capacity);
                }
            }
        }
        for lp in lps.iter_mut() {
            let lp = &mut **lp;
            for rec in &mut lp.records {
                let LinkQueue::Port(port) = &lp.links[w.link_idx[rec.link as usize] as usize].queue
                else {
                    continue;
                };
                let q = port.port.qdisc();
                rec.qlen.push(q.len() as u32);
                rec.qbytes.push(q.bytes());
                rec.tx_bytes.push(port.port.counters().dequeued_bytes);
                rec.delay_mean_ns.push(if rec.delay_n > 0 {
                    rec.delay_sum / rec.delay_n as f64
                } else {
                    0.0
                });
                rec.delay_sum = 0.0;
                rec.delay_n = 0;
                if let AnyQdisc::Cebinae(c) = q {
                    rec.cebinae.push(*c.last_report());
                    rec.cebinae_top
                        .push(w.flow_hash.iter().map(|&h| c.is_top(h)).collect());
                }
            }
        }
    }

    /// Final reports and counters; returns the port records in order.
    fn finish(&mut self, w: &World, lps: &mut [Lp], reached: u64) -> Vec<PortRecord> {
        let now = w.instant(reached);
        for (i, f) in self.flows.iter_mut().enumerate() {
            let (lc, ls) = (
                w.part.host_lp[2 * i] as usize,
                w.part.host_lp[2 * i + 1] as usize,
            );
            let client = &mut lps[lc].nodes[w.host_idx[2 * i] as usize].host;
            if let Role::Client(app) = &client.role {
                f.acked_at = app.acked_at;
                f.error = app.error.clone();
                if let Some(ch) = app.conn {
                    f.report = client.ep.stats(now, ch);
                }
            }
            f.injected_drops = client.injected_drops;
            let server = &mut lps[ls].nodes[w.host_idx[2 * i + 1] as usize].host;
            if let Role::Server(app) = &server.role {
                f.fin_at = app.fin_at;
                f.receiver_report = app.conn.and_then(|ch| server.ep.stats(now, ch));
                if let (Some(tr), Some(sender)) = (self.trace.as_mut(), &f.report) {
                    tr.flow_end(i as u32, sender, f.receiver_report.as_ref());
                }
            }
            for lp in lps.iter() {
                let st = &lp.stats[i];
                for (d, x) in f.drops.iter_mut().zip(st.drops) {
                    *d += x;
                }
                f.access_drops += st.access_drops;
                f.loss_drops += st.loss_drops;
                for (b, x) in f.port_bytes.iter_mut().zip(&st.port_bytes) {
                    *b += x;
                }
            }
        }
        if let Some(t) = self.trace.as_mut() {
            t.finish();
        }
        let mut ports: Vec<(usize, PortRecord)> = Vec::new();
        for lp in lps.iter_mut() {
            for mut rec in lp.records.drain(..) {
                if let LinkQueue::Port(port) =
                    &lp.links[w.link_idx[rec.link as usize] as usize].queue
                {
                    rec.counters = *port.port.counters();
                    rec.in_flight = port.port.in_flight();
                }
                let r = w.port_of_link[rec.link as usize].expect("a record's link is measured");
                ports.push((r, rec));
            }
        }
        ports.sort_by_key(|(r, _)| *r);
        ports.into_iter().map(|(_, rec)| rec).collect()
    }
}

impl Lp {
    /// Run this LP's events before `wend`.
    fn run(&mut self, w: &World, wend: u64) {
        self.wend = wend;
        while self.queue.peek_t().is_some_and(|t| t < wend) {
            let Some(e) = self.queue.pop() else {
                break;
            };
            self.now = e.t;
            self.events += 1;
            match e.ev {
                Ev::Arrive(slot) => {
                    let p = self.packets.remove(slot as usize);
                    self.arrive(w, p);
                }
                Ev::PortPoll(l) => self.port_poll(w, l as usize, e.t),
                Ev::HostTimer(h) => self.host_timer(w, h as usize, e.t, e.seq),
                Ev::HostWake(h) => {
                    // Stale when a timer or an earlier wake-up served the batch.
                    if self.node(w, h as usize).host.wake_at == Some(e.t) {
                        self.host_step(w, h as usize);
                    }
                }
                Ev::FlowStart(f) => self.start_flow(w, f as usize),
            }
        }
    }

    fn node(&mut self, w: &World, h: usize) -> &mut Node {
        debug_assert_eq!(w.part.host_lp[h], self.id);
        &mut self.nodes[w.host_idx[h] as usize]
    }

    fn link(&mut self, w: &World, l: usize) -> &mut Link {
        debug_assert_eq!(w.part.link_lp[l], self.id);
        &mut self.links[w.link_idx[l] as usize]
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.queue.push(t, ev);
    }

    fn start_flow(&mut self, w: &World, f: usize) {
        let spec = &w.flows[f];
        let s = w.s;
        let max_rtt = s
            .flows
            .iter()
            .flat_map(|g| g.rtt_s.iter().copied())
            .fold(0.0, f64::max);
        let buffer_bytes = f64::from(s.router.buffer_packets) * PACKET_BYTES as f64;
        let bdp = s.bottleneck_rate_bps * max_rtt / 8.0;
        let auto = (2.0 * (bdp + buffer_bytes)).clamp(1.0 * 1048576.0, 256.0 * 1048576.0) as u64;
        let options = ConnectionOptions {
            cca: spec.cca.clone(),
            mark_dscp: spec.mark_dscp,
            stats_interval: Duration::from_secs(3600),
            prompt_acks: spec.prompt_acks,
            window: spec.window.unwrap_or(auto),
            max_window: spec
                .window
                .unwrap_or(tollgate_transport::window::DEFAULT_MAX),
            idle_timeout: Duration::from_secs(600),
            link_rate_bps: Some(s.access_rate_bps),
            cca_seed: Some(topology::cca_seed(s.seed, f)),
        };
        let (server, size) = (spec.server, spec.size);
        let now = w.instant(self.now);
        let h = 2 * f;
        self.node(w, h).host.connect(now, server, options, size);
        self.host_step(w, h);
    }

    fn host_timer(&mut self, w: &World, h: usize, t: u64, seq: u64) {
        let now = w.instant(self.now);
        let i = w.host_idx[h] as usize;
        let host = &mut self.nodes[i].host;
        if !host
            .timer
            .on_event(&mut self.queue, t, seq, || Ev::HostTimer(h as u32))
        {
            return; // superseded, or re-scheduled for later
        }
        host.ep.handle_timeout(now);
        self.host_step(w, h);
    }

    /// Let the host's app react, send what the endpoint has, re-arm its timer.
    /// Under host noise this is a wake-up: it serves everything that arrived
    /// before it.
    fn host_step(&mut self, w: &World, h: usize) {
        let i = w.host_idx[h] as usize;
        self.nodes[i].host.wake_at = None;
        let now_ns = self.now;
        let now = w.instant(now_ns);
        self.nodes[i].host.run_app(now, now_ns);
        loop {
            // The endpoint writes into a buffer that becomes the packet
            // itself: no copy when the transmit is one datagram (always, as
            // hosts disable GSO).
            let mut buf = self.pool.pop().unwrap_or_default();
            let Some(t) = self.nodes[i].host.poll_transmit(now, &mut buf) else {
                self.pool.push(buf);
                break;
            };
            let ecn = t.ecn.map_or(0, |e| e as u8);
            let seg = t.segment_size.unwrap_or(t.size).max(1);
            if seg >= t.size {
                buf.truncate(t.size);
                self.emit(w, h, buf, t.dscp, ecn);
                continue;
            }
            let mut off = 0;
            while off < t.size {
                let n = seg.min(t.size - off);
                let mut data = self.pool.pop().unwrap_or_default();
                data.clear();
                data.extend_from_slice(&buf[off..off + n]);
                off += n;
                self.emit(w, h, data, t.dscp, ecn);
            }
            self.pool.push(buf);
        }
        // Events raised while sending (e.g. a stream became writable).
        self.nodes[i].host.run_app(now, now_ns);
        let next = self.nodes[i].host.ep.poll_timeout().map(|t| w.ns_of(t));
        let host = &mut self.nodes[i].host;
        if let Some(mut t) = next {
            if t <= now_ns {
                host.same_now_timers += 1;
                if host.same_now_timers > 64 {
                    // A timer that does not advance: step past it rather than spin.
                    t = now_ns + 1_000;
                    host.same_now_timers = 0;
                }
                t = t.max(now_ns);
            } else {
                host.same_now_timers = 0;
            }
            host.timer
                .set(&mut self.queue, Some(t), || Ev::HostTimer(h as u32));
        } else {
            host.timer
                .set(&mut self.queue, None, || Ev::HostTimer(h as u32));
        }
    }

    /// A host puts a datagram on its first link.
    fn emit(&mut self, w: &World, h: usize, data: Vec<u8>, dscp: u8, ecn_bits: u8) {
        self.packets_sent += 1;
        let now = self.now;
        let node = self.node(w, h);
        let flow = node.host.flow;
        let to_server = h.is_multiple_of(2);
        let len = data.len() as u32 + WIRE_OVERHEAD;
        let p = SimPacket {
            meta: PacketMeta {
                len,
                ecn: super::net::ecn_of(ecn_bits),
                ..PacketMeta::default()
            },
            data,
            from: node.host.addr,
            flow,
            to_server,
            hop: 0,
            dscp,
            enq_ns: 0,
            l4s: false,
            sent_ns: now,
            path_noised: false,
        };
        if w.jitter_ns > 0.0 {
            // Host jitter (scheduling, NIC): a random delay, FIFO per host.
            let j = (tollgate_cca::rng::uniform_f64(&mut node.jitter_rng) * w.jitter_ns) as u64;
            let at = (now + j).max(node.host.last_emit_ns);
            node.host.last_emit_ns = at;
            self.capture(w, h, at, &p);
            // FIFO, like the access link after it: both are crossed now.
            self.send_on(w, p, at);
        } else {
            self.capture(w, h, now, &p);
            self.arrive(w, p);
        }
    }

    /// Record `p` on host `h`'s interface at `t` (`--pcap`).
    fn capture(&mut self, w: &World, h: usize, t: u64, p: &SimPacket) {
        let Some(pcap) = self.pcap.as_mut() else {
            return;
        };
        let f = &w.flows[p.flow as usize];
        let to = if p.to_server { f.server } else { f.client };
        pcap.push(Captured::new(h.is_multiple_of(2), t, p.from, to, &p.data));
    }

    /// Schedule `p`'s arrival at the input of hop `p.hop` at `at`, in the
    /// event queue's `lane` when the caller knows arrivals through it come
    /// in order (see `queue.rs`), else `None`. A packet for another LP waits
    /// in the outbox until the window's end (it arrives after it).
    fn push_arrival(&mut self, w: &World, at: u64, p: SimPacket, lane: Option<usize>) {
        let lp = match w.path(&p).get(p.hop as usize) {
            Some(&link) => w.part.link_lp[link as usize],
            None => w.part.host_lp[2 * p.flow as usize + usize::from(p.to_server)],
        };
        if lp == self.id {
            self.queue_arrival(at, p, lane);
        } else if at > w.end {
            self.recycle(p);
        } else {
            debug_assert!(at >= self.wend, "lookahead violated: {at} < {}", self.wend);
            self.outbox.push(Msg { lp, at, lane, p });
        }
    }

    fn queue_arrival(&mut self, at: u64, p: SimPacket, lane: Option<usize>) {
        let slot = self.packets.insert(p) as u32;
        match lane {
            Some(lane) => self.queue.push_lane(lane, at, Ev::Arrive(slot)),
            None => self.push(at, Ev::Arrive(slot)),
        }
    }

    /// `p` reaches the input of hop `p.hop` at `at` (not before now).
    ///
    /// Access links are crossed at once: each is fed by one host (after its
    /// emission jitter, FIFO too) or one router port (topology.rs), in the
    /// order its packets reach it, so the time a packet leaves it can be
    /// computed as soon as the packet is sent towards it. That saves the
    /// event of each access link and of the jitter: 3 of 5 packet events in
    /// `bench-10-flows`. The packet is then scheduled at the next router
    /// port, or at its host after the last link.
    fn send_on(&mut self, w: &World, mut p: SimPacket, mut at: u64) {
        // The last link crossed: it delivers its packets in order, so its
        // arrivals share one lane of the event queue.
        let mut lane = None;
        while let Some(&link) = w.path(&p).get(p.hop as usize) {
            if w.part.link_lp[link as usize] != self.id {
                break; // a router port of another LP
            }
            match self.link(w, link as usize).cross(at, p.meta.len) {
                Crossing::Leaves(end) => {
                    at = end;
                    p.hop += 1;
                    lane = Some(link as usize);
                }
                Crossing::Dropped => {
                    self.stats[p.flow as usize].access_drops += 1;
                    self.recycle(p);
                    return;
                }
                Crossing::RouterPort => break,
            }
        }
        self.push_arrival(w, at, p, lane);
    }

    /// A packet reaches the input of hop `p.hop` (or its host after the last).
    fn arrive(&mut self, w: &World, mut p: SimPacket) {
        let path = w.path(&p);
        let Some(&link) = path.get(p.hop as usize) else {
            let h = 2 * p.flow as usize + usize::from(p.to_server);
            let now = self.now;
            let node = self.node(w, h);
            if let (Some(noise), false) = (node.path_noise.as_mut(), p.path_noised) {
                // The router's transmit polling and the veth ahead of the
                // host: a delay drawn once per packet, FIFO per flow and
                // direction, before the host's interface sees it.
                p.path_noised = true;
                let at = (now + noise.draw_ns()).max(node.path_noise_last);
                node.path_noise_last = at;
                // FIFO per flow and direction: a lane after the links'.
                let queue_lane = w.nlinks + h;
                return self.queue_arrival(at, p, Some(queue_lane));
            }
            return self.deliver(w, p);
        };
        let now = self.now;
        let li = w.link_idx[link as usize] as usize;
        debug_assert_eq!(w.part.link_lp[link as usize], self.id);
        match &mut self.links[li].queue {
            LinkQueue::Wire { .. } => self.send_on(w, p, now),
            LinkQueue::Port(port) => {
                if let Some(rng) = self.loss_rng[li].as_mut() {
                    if tollgate_cca::rng::uniform_f64(rng) < w.loss {
                        self.stats[p.flow as usize].loss_drops += 1;
                        self.recycle(p);
                        return;
                    }
                }
                let f = &w.flows[p.flow as usize];
                let to = if p.to_server { f.server } else { f.client };
                port.classify(&mut p, to);
                p.enq_ns = now;
                p.l4s = PacketHandle::l4s(&p);
                let c = &mut self.collector;
                match self.trace.as_mut() {
                    Some(tr) if p.to_server && Some(&link) == w.forward_ports.first() => {
                        let (flow, sent, qlen, before) =
                            (p.flow, p.sent_ns, port.port.qdisc().len(), c.dropped.len());
                        port.port.receive(p, Time::from_nanos(now), c);
                        tr.arrival(now, flow, qlen, c.dropped.len() > before, sent);
                    }
                    _ => port.port.receive(p, Time::from_nanos(now), c),
                }
                port.port.poll(Time::from_nanos(now), c);
                self.after_port(w, link as usize);
            }
        }
    }

    fn port_poll(&mut self, w: &World, link: usize, t: u64) {
        let now = self.now;
        let li = w.link_idx[link] as usize;
        let LinkQueue::Port(port) = &mut self.links[li].queue else {
            return;
        };
        if port.poll_at == Some(t) {
            port.poll_at = None;
        }
        port.port.poll(Time::from_nanos(now), &mut self.collector);
        self.after_port(w, link);
    }

    /// Forward what a port transmitted, account drops, schedule its next poll.
    fn after_port(&mut self, w: &World, link: usize) {
        let now = self.now;
        let li = w.link_idx[link] as usize;
        let rec = w.port_of_link[link].map(|r| w.rec_idx[r] as usize);
        let mut c = std::mem::take(&mut self.collector);
        for (mut p, t) in c.sent.drain(..) {
            if let Some(tr) = self.trace.as_mut() {
                if p.to_server && w.forward_ports.first() == Some(&(link as u32)) {
                    tr.departure(t.as_nanos().max(now), p.flow);
                }
            }
            let at = t.as_nanos().max(now) + self.links[li].transit_ns(p.meta.len);
            if let Some(r) = rec {
                let r = &mut self.records[r];
                let d = now.saturating_sub(p.enq_ns);
                let class = if p.l4s {
                    &mut r.delay_l4s_us
                } else {
                    &mut r.delay_classic_us
                };
                let _ = class.record((d / 1_000).max(1));
                r.delay_sum += d as f64;
                r.delay_n += 1;
                if r.forward {
                    self.stats[p.flow as usize].port_bytes[r.hop as usize] += u64::from(p.meta.len);
                }
            }
            p.hop += 1;
            self.send_on(w, p, at);
        }
        for (p, reason) in c.dropped.drain(..) {
            self.stats[p.flow as usize].drops[reason.index()] += 1;
            self.recycle(p);
        }
        self.collector = c;
        let LinkQueue::Port(port) = &mut self.links[li].queue else {
            return;
        };
        if let Some(t) = port.port.next_event() {
            let t = t.as_nanos().max(now);
            if port.poll_at.is_none_or(|p| t < p) {
                port.poll_at = Some(t);
                self.queue.push(t, Ev::PortPoll(link as u32));
            }
        }
        if let Some(r) = rec {
            self.check_rrmqs(w, li, r);
        }
    }

    /// Record a newly closed RRMQS meter window with the real indices.
    fn check_rrmqs(&mut self, w: &World, li: usize, r: usize) {
        let LinkQueue::Port(port) = &self.links[li].queue else {
            return;
        };
        let AnyQdisc::Rrmqs(q) = port.port.qdisc() else {
            return;
        };
        let win = q.latest_window();
        let rec = &mut self.records[r];
        if win.end == rec.last_window_end || win.end == Time::ZERO || !rec.forward {
            return;
        }
        rec.last_window_end = win.end;
        let hop = rec.hop as usize;
        // Per-flow bytes through this port since the last window.
        let mut per_variant: Vec<(VariantId, u32, f64)> = Vec::new();
        let mut total = 0.0;
        let mut active = 0u32;
        for (i, st) in self.stats.iter().enumerate() {
            let b = st.port_bytes[hop] - rec.flow_bytes_at_window[i];
            rec.flow_bytes_at_window[i] = st.port_bytes[hop];
            if b == 0 {
                continue;
            }
            total += b as f64;
            active += 1;
            let v = w.flows[i].variant;
            match per_variant.iter_mut().find(|e| e.0 == v) {
                Some(e) => {
                    e.1 += 1;
                    e.2 += b as f64;
                }
                None => per_variant.push((v, 1, b as f64)),
            }
        }
        per_variant.sort_by_key(|e| e.0);
        let fair = if active > 0 {
            total / f64::from(active)
        } else {
            0.0
        };
        let real = per_variant
            .into_iter()
            .filter(|_| fair > 0.0)
            .map(|(variant, flows, bytes)| RealIndex {
                variant,
                flows,
                index: bytes / f64::from(flows) / fair,
            })
            .collect();
        rec.rrmqs.push((win.clone(), real));
    }

    fn deliver(&mut self, w: &World, p: SimPacket) {
        let f = p.flow as usize;
        let h = if p.to_server { 2 * f + 1 } else { 2 * f };
        let now_ns = self.now;
        let now = w.instant(now_ns);
        let tos = p.tos();
        self.capture(w, h, now_ns, &p);
        // The packet's buffer goes to the endpoint as is: Vec -> Bytes ->
        // BytesMut of a unique buffer does not copy the bytes.
        let data = BytesMut::from(Bytes::from(p.data));
        let i = w.host_idx[h] as usize;
        let node = &mut self.nodes[i];
        node.host
            .ep
            .handle_datagram_owned(now, p.from, Some(tos), data);
        match node.wakeups.as_mut() {
            // The datagram is stamped now; the host reacts when it wakes up.
            Some(wk) => {
                if node.host.wake_at.is_none() {
                    let at = now_ns + wk.draw_ns();
                    node.host.wake_at = Some(at);
                    self.queue.push(at, Ev::HostWake(h as u32));
                }
            }
            None => self.host_step(w, h),
        }
        if h % 2 == 0 {
            if let Some(tr) = self.trace.as_mut() {
                let host = &self.nodes[i].host;
                if let Role::Client(app) = &host.role {
                    if let Some(cca) = app.conn.and_then(|ch| host.ep.cca_handle(ch)) {
                        let snap = cca.snapshot();
                        tr.ack(now_ns, f as u32, snap.stats.window, snap.bytes_in_flight);
                    }
                }
            }
        }
    }

    fn recycle(&mut self, p: SimPacket) {
        if self.pool.len() < 4096 {
            self.pool.push(p.data);
        }
    }
}

/// Queueing delays from 1 µs to 60 s, 3 significant digits.
fn delay_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

impl PortRecord {
    /// Queueing delay of every transmitted packet, µs: the two classes'
    /// histograms together (same bounds and precision, so the sum is exact).
    pub fn delay_us(&self) -> Histogram<u64> {
        let mut all = self.delay_classic_us.clone();
        all.add(&self.delay_l4s_us)
            .expect("the class histograms share their bounds");
        all
    }

    fn new(link: u32, hop: u32, forward: bool, nflows: usize) -> Self {
        PortRecord {
            hop,
            forward,
            link,
            qlen: Vec::new(),
            qbytes: Vec::new(),
            tx_bytes: Vec::new(),
            delay_mean_ns: Vec::new(),
            delay_l4s_us: delay_histogram(),
            delay_classic_us: delay_histogram(),
            delay_sum: 0.0,
            delay_n: 0,
            counters: Counters::default(),
            in_flight: 0,
            cebinae: Vec::new(),
            cebinae_top: Vec::new(),
            rrmqs: Vec::new(),
            last_window_end: Time::ZERO,
            flow_bytes_at_window: vec![0; nflows],
        }
    }
}

impl FlowRecord {
    fn new(spec: &FlowSpec, nfwd: usize) -> Self {
        FlowRecord {
            spec: spec.clone(),
            rx: Vec::new(),
            capacity_mbps: Vec::new(),
            drops: [0; DropReason::COUNT],
            access_drops: 0,
            loss_drops: 0,
            port_bytes: vec![0; nfwd],
            fin_at: None,
            acked_at: None,
            report: None,
            receiver_report: None,
            injected_drops: 0,
            error: None,
        }
    }
}

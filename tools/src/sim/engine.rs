//! The event loop and the raw measurements it records.
//!
//! Events: a packet arriving at a router port's input or at its destination
//! host (access links are crossed without events, see `Sim::send_on`), a
//! router port's poll (its shaper or delay line has work), a host's transport
//! timer, a flow's start, and the metrics sampler.
//! A host's timer is re-armed after every interaction from
//! [`Endpoint::poll_timeout`](tollgate_transport::Endpoint::poll_timeout)
//! through its [`TimerSlot`](super::queue::TimerSlot), which queues an event
//! only when the timer moves earlier than the slot's queued events.
//!
//! A run can be stopped early: the caller's stop flag is checked after every
//! sample and every [`STOP_CHECK_EVENTS`] events. A stop is an explicit
//! request, not a clock read, so the events processed before it are exactly
//! those of a complete run; the run then ends at the current virtual time
//! with a final sample there ([`RunData::partial`], [`RunData::reached_s`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use slab::Slab;
use tollgate_cca::rng::SimRng;
use tollgate_cca::{Time, VariantId};
use tollgate_router::cebinae::ReconfigReport;
use tollgate_router::rrmqs::MeterWindow;
use tollgate_router::{Counters, DropReason, PacketMeta, Qdisc};
use tollgate_transport::{ConnReport, ConnectionOptions};

use super::host::{self, Host, Role};
use super::net::{AnyQdisc, Collector, Crossing, LinkQueue, SimPacket, WIRE_OVERHEAD};
use super::noise::{PathNoise, Wakeups};
use super::pcap::Pcap;
use super::queue::EventQueue;
use super::tls::Crypto;
use super::topology::{self, FlowSpec, Network};
use super::trace::Trace;
use crate::scenario::{NoiseKind, Scenario, PACKET_BYTES};

/// Per-port samples and totals.
#[derive(Debug)]
pub struct PortRecord {
    /// Hop index.
    pub hop: u32,
    /// Forward (true) or reverse.
    pub forward: bool,
    /// Queue length (packets) per sample.
    pub qlen: Vec<u32>,
    /// Queued bytes per sample.
    pub qbytes: Vec<u64>,
    /// Bytes transmitted, cumulative, per sample.
    pub tx_bytes: Vec<u64>,
    /// Mean queueing delay (ns) of packets transmitted during each sample interval.
    pub delay_mean_ns: Vec<f64>,
    /// Queueing delay of every transmitted packet, µs.
    pub delay_us: Histogram<u64>,
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
}

/// The stop flag is read after every this many events (and after every sample).
pub const STOP_CHECK_EVENTS: u64 = 1024;

/// Packets wait in [`Sim::packets`]; an event names a packet by its slot, so
/// heap entries stay small (sifting moved whole packets) and a hop allocates
/// nothing (a `Box` per packet per router port was 2 % of a run's
/// instructions in malloc and free).
enum Ev {
    Arrive(u32),
    PortPoll(u32),
    HostTimer(u32),
    HostWake(u32),
    FlowStart(u32),
    Sample(u32),
}

struct Sim<'a> {
    s: &'a Scenario,
    now: u64,
    base: Instant,
    queue: EventQueue<Ev>,
    net: Network,
    hosts: Vec<Host>,
    flows: Vec<FlowRecord>,
    ports: Vec<PortRecord>,
    /// Link id -> index in `ports`.
    port_of_link: Vec<Option<usize>>,
    /// Per flow: its forward-data flow hash (for Cebinae's top-flow lookup).
    flow_hash: Vec<u64>,
    collector: Collector,
    /// Packets travelling on a link (between an `Arrive` event's scheduling
    /// and its run); the events name their slots.
    packets: Slab<SimPacket>,
    /// Datagram buffers of dropped packets, reused by the hosts.
    pool: Vec<Vec<u8>>,
    packets_sent: u64,
    events: u64,
    samples: Vec<f64>,
    /// Debug trace (`TOLLGATE_TRACE`), usually off.
    trace: Option<Trace>,
    /// Capture of the hosts' datagrams (`TOLLGATE_PCAP`), usually off.
    pcap: Option<Pcap>,
    /// `noise = "host"`: draws the hosts' wake-up latencies.
    wakeups: Option<Wakeups>,
    /// `noise = "host"`: draws the path noise ahead of each host.
    path_noise: Option<PathNoise>,
    /// Per flow and direction: when its latest packet leaves the path noise.
    path_noise_last: Vec<u64>,
    /// `noise = "iid"`: host emission jitter bound, ns (0: none).
    jitter_ns: f64,
    /// Draws the jitter.
    jitter_rng: SimRng,
    /// Random loss probability at the forward bottleneck port(s).
    loss: f64,
    /// Draws the random losses.
    loss_rng: SimRng,
}

/// Run a scenario; `progress` is called with the fraction of virtual time
/// done after every sample.
///
/// When `stop` becomes true (a Ctrl-C handler, or a test) the run ends at the
/// current virtual time: a last sample is taken there, and the data is
/// returned with `partial` set and `reached_s` the time reached.
pub fn run(
    s: &Scenario,
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
    let mut ports = Vec::new();
    let mut port_of_link = vec![None; net.links.len()];
    for (forward, list) in [(true, &net.forward_ports), (false, &net.reverse_ports)] {
        for (hop, &l) in list.iter().enumerate() {
            port_of_link[l as usize] = Some(ports.len());
            ports.push(PortRecord {
                hop: hop as u32,
                forward,
                qlen: Vec::new(),
                qbytes: Vec::new(),
                tx_bytes: Vec::new(),
                delay_mean_ns: Vec::new(),
                delay_us: Histogram::new_with_bounds(1, 60_000_000, 3)
                    .expect("valid histogram bounds"),
                delay_sum: 0.0,
                delay_n: 0,
                counters: Counters::default(),
                in_flight: 0,
                cebinae: Vec::new(),
                cebinae_top: Vec::new(),
                rrmqs: Vec::new(),
                last_window_end: Time::ZERO,
                flow_bytes_at_window: vec![0; nflows],
            });
        }
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
    let flows = net
        .flows
        .iter()
        .map(|f| FlowRecord {
            spec: f.clone(),
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
        })
        .collect();
    let end = (s.duration_s * 1e9).round() as u64;
    let mut sim = Sim {
        s,
        now: 0,
        base: Instant::now(),
        queue: EventQueue::new(end),
        net,
        hosts,
        flows,
        ports,
        port_of_link,
        flow_hash,
        collector: Collector::default(),
        packets: Slab::new(),
        pool: Vec::new(),
        packets_sent: 0,
        events: 0,
        samples: Vec::new(),
        trace: Trace::from_env()?,
        pcap: match std::env::var_os("TOLLGATE_PCAP") {
            Some(dir) => Some(Pcap::create(std::path::Path::new(&dir))?),
            None => None,
        },
        wakeups: (s.noise == NoiseKind::Host)
            .then(|| Wakeups::new(s.seed ^ 0x3a4e_0b5e, s.noise_scale)),
        path_noise: (s.noise == NoiseKind::Host && s.path_noise_scale > 0.0)
            .then(|| PathNoise::new(s.seed ^ 0x9a7e_4015, s.path_noise_scale)),
        path_noise_last: vec![0; 2 * nflows],
        jitter_ns: s.host_jitter_s * 1e9,
        jitter_rng: tollgate_cca::rng::seeded(s.seed ^ 0x6a17_7e20),
        loss: s.bottleneck_loss,
        loss_rng: tollgate_cca::rng::seeded(s.seed ^ 0x1055_d0e5),
    };
    for i in 0..nflows {
        let t = sim.net.flows[i].start_ns;
        sim.push(t, Ev::FlowStart(i as u32));
    }
    let dt = (s.sample_interval_s * 1e9).round() as u64;
    let nsamples = end.div_ceil(dt);
    // Sample k runs under sequence number `samples_seq + k - 1`; each is
    // queued when the previous one runs.
    let samples_seq = sim.queue.reserve(nsamples);
    sim.queue
        .push_reserved(dt.min(end), samples_seq, Ev::Sample(1));
    let mut partial = stop.load(Ordering::Relaxed);
    while !partial {
        let Some(e) = sim.queue.pop() else {
            break;
        };
        sim.now = e.t;
        sim.events += 1;
        match e.ev {
            Ev::Arrive(slot) => {
                let p = sim.packets.remove(slot as usize);
                sim.arrive(p);
            }
            Ev::PortPoll(l) => sim.port_poll(l as usize, e.t),
            Ev::HostTimer(h) => sim.host_timer(h as usize, e.t, e.seq),
            Ev::HostWake(h) => {
                // Stale when a timer or an earlier wake-up served the batch.
                if sim.hosts[h as usize].wake_at == Some(e.t) {
                    sim.host_step(h as usize);
                }
            }
            Ev::FlowStart(f) => sim.start_flow(f as usize),
            Ev::Sample(k) => {
                let k = u64::from(k);
                if k < nsamples {
                    let t = ((k + 1) * dt).min(end);
                    sim.queue
                        .push_reserved(t, samples_seq + k, Ev::Sample(k as u32 + 1));
                }
                sim.sample();
                progress(k as f64 / nsamples as f64);
                partial = stop.load(Ordering::Relaxed);
                continue;
            }
        }
        if sim.events.is_multiple_of(STOP_CHECK_EVENTS) {
            partial = stop.load(Ordering::Relaxed);
        }
    }
    // A stop on the last sample is a complete run.
    partial &= sim.now < end;
    if partial && sim.samples.last().is_none_or(|&t| t < sim.now as f64 / 1e9) {
        // Close the series at the time reached (a shorter last interval).
        sim.sample();
    }
    sim.finish();
    if let Some(t) = sim.trace.as_mut() {
        t.finish();
    }
    Ok(RunData {
        t: sim.samples,
        flows: sim.flows,
        ports: sim.ports,
        packets_sent: sim.packets_sent,
        events: sim.events,
        partial,
        reached_s: if partial {
            sim.now as f64 / 1e9
        } else {
            s.duration_s
        },
    })
}

impl Sim<'_> {
    fn push(&mut self, t: u64, ev: Ev) {
        self.queue.push(t, ev);
    }

    fn instant(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    fn ns_of(&self, i: Instant) -> u64 {
        i.saturating_duration_since(self.base).as_nanos() as u64
    }

    fn start_flow(&mut self, f: usize) {
        let spec = &self.net.flows[f];
        let s = self.s;
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
        };
        let (server, size) = (spec.server, spec.size);
        let now = self.instant(self.now);
        let h = 2 * f;
        self.hosts[h].connect(now, server, options, size);
        self.host_step(h);
    }

    fn host_timer(&mut self, h: usize, t: u64, seq: u64) {
        let now = self.instant(self.now);
        let host = &mut self.hosts[h];
        if !host
            .timer
            .on_event(&mut self.queue, t, seq, || Ev::HostTimer(h as u32))
        {
            return; // superseded, or re-scheduled for later
        }
        host.ep.handle_timeout(now);
        self.host_step(h);
    }

    /// Let the host's app react, send what the endpoint has, re-arm its timer.
    /// Under host noise this is a wake-up: it serves everything that arrived
    /// before it.
    fn host_step(&mut self, h: usize) {
        self.hosts[h].wake_at = None;
        let now_ns = self.now;
        let now = self.instant(now_ns);
        self.hosts[h].run_app(now, now_ns);
        loop {
            // The endpoint writes into a buffer that becomes the packet
            // itself: no copy when the transmit is one datagram (always, as
            // hosts disable GSO).
            let mut buf = self.pool.pop().unwrap_or_default();
            let Some(t) = self.hosts[h].poll_transmit(now, &mut buf) else {
                self.pool.push(buf);
                break;
            };
            let ecn = t.ecn.map_or(0, |e| e as u8);
            let seg = t.segment_size.unwrap_or(t.size).max(1);
            if seg >= t.size {
                buf.truncate(t.size);
                self.emit(h, buf, t.dscp, ecn);
                continue;
            }
            let mut off = 0;
            while off < t.size {
                let n = seg.min(t.size - off);
                let mut data = self.pool.pop().unwrap_or_default();
                data.clear();
                data.extend_from_slice(&buf[off..off + n]);
                off += n;
                self.emit(h, data, t.dscp, ecn);
            }
            self.pool.push(buf);
        }
        // Events raised while sending (e.g. a stream became writable).
        self.hosts[h].run_app(now, now_ns);
        let next = self.hosts[h].ep.poll_timeout().map(|i| self.ns_of(i));
        let host = &mut self.hosts[h];
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
    fn emit(&mut self, h: usize, data: Vec<u8>, dscp: u8, ecn_bits: u8) {
        self.packets_sent += 1;
        let flow = self.hosts[h].flow;
        let to_server = h.is_multiple_of(2);
        let len = data.len() as u32 + WIRE_OVERHEAD;
        let p = SimPacket {
            meta: PacketMeta {
                len,
                ecn: super::net::ecn_of(ecn_bits),
                ..PacketMeta::default()
            },
            data,
            from: self.hosts[h].addr,
            flow,
            to_server,
            hop: 0,
            dscp,
            enq_ns: 0,
            sent_ns: self.now,
            path_noised: false,
        };
        if self.jitter_ns > 0.0 {
            // Host jitter (scheduling, NIC): a random delay, FIFO per host.
            let j = (tollgate_cca::rng::uniform_f64(&mut self.jitter_rng) * self.jitter_ns) as u64;
            let host = &mut self.hosts[h];
            let at = (self.now + j).max(host.last_emit_ns);
            host.last_emit_ns = at;
            self.capture(h, at, &p);
            // FIFO, like the access link after it: both are crossed now.
            self.send_on(p, at);
        } else {
            self.capture(h, self.now, &p);
            self.arrive(p);
        }
    }

    /// Record `p` on host `h`'s interface at `t` (`--pcap`).
    fn capture(&mut self, h: usize, t: u64, p: &SimPacket) {
        let Some(pcap) = self.pcap.as_mut() else {
            return;
        };
        let f = &self.net.flows[p.flow as usize];
        let to = if p.to_server { f.server } else { f.client };
        if let Err(e) = pcap.record(h.is_multiple_of(2), t, p.from, to, &p.data) {
            eprintln!("warning: {e}; capture stopped");
            self.pcap = None;
        }
    }

    fn path(&self, p: &SimPacket) -> &[u32] {
        let f = &self.net.flows[p.flow as usize];
        if p.to_server {
            &f.up_path
        } else {
            &f.down_path
        }
    }

    /// Schedule `p`'s arrival at the input of hop `p.hop` at `at`, in the
    /// event queue's `lane` when the caller knows arrivals through it come
    /// in order (see `queue.rs`), else `None`.
    fn push_arrival(&mut self, at: u64, p: SimPacket, lane: Option<usize>) {
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
    fn send_on(&mut self, mut p: SimPacket, mut at: u64) {
        // The last link crossed: it delivers its packets in order, so its
        // arrivals share one lane of the event queue.
        let mut lane = None;
        while let Some(&link) = self.path(&p).get(p.hop as usize) {
            match self.net.links[link as usize].cross(at, p.meta.len) {
                Crossing::Leaves(end) => {
                    at = end;
                    p.hop += 1;
                    lane = Some(link as usize);
                }
                Crossing::Dropped => {
                    self.flows[p.flow as usize].access_drops += 1;
                    self.recycle(p);
                    return;
                }
                Crossing::RouterPort => break,
            }
        }
        self.push_arrival(at, p, lane);
    }

    /// A packet reaches the input of hop `p.hop` (or its host after the last).
    fn arrive(&mut self, mut p: SimPacket) {
        let path = self.path(&p);
        let Some(&link) = path.get(p.hop as usize) else {
            if let (Some(noise), false) = (self.path_noise.as_mut(), p.path_noised) {
                // The router's transmit polling and the veth ahead of the
                // host: a delay drawn once per packet, FIFO per flow and
                // direction, before the host's interface sees it.
                p.path_noised = true;
                let lane = 2 * p.flow as usize + usize::from(p.to_server);
                let at = (self.now + noise.draw_ns()).max(self.path_noise_last[lane]);
                self.path_noise_last[lane] = at;
                // FIFO per flow and direction: a lane after the links'.
                let queue_lane = self.net.links.len() + lane;
                return self.push_arrival(at, p, Some(queue_lane));
            }
            return self.deliver(p);
        };
        let now = self.now;
        let l = &mut self.net.links[link as usize];
        match &mut l.queue {
            LinkQueue::Wire { .. } => self.send_on(p, now),
            LinkQueue::Port(port) => {
                if self.loss > 0.0
                    && self.net.forward_ports.contains(&link)
                    && tollgate_cca::rng::uniform_f64(&mut self.loss_rng) < self.loss
                {
                    self.flows[p.flow as usize].loss_drops += 1;
                    self.recycle(p);
                    return;
                }
                let f = &self.net.flows[p.flow as usize];
                let to = if p.to_server { f.server } else { f.client };
                port.classify(&mut p, to);
                p.enq_ns = now;
                let mut c = std::mem::take(&mut self.collector);
                if let Some(tr) = self.trace.as_mut() {
                    if p.to_server && Some(&link) == self.net.forward_ports.first() {
                        let (flow, sent, qlen, before) =
                            (p.flow, p.sent_ns, port.port.qdisc().len(), c.dropped.len());
                        port.port.receive(p, Time::from_nanos(now), &mut c);
                        tr.arrival(now, flow, qlen, c.dropped.len() > before, sent);
                    } else {
                        port.port.receive(p, Time::from_nanos(now), &mut c);
                    }
                } else {
                    port.port.receive(p, Time::from_nanos(now), &mut c);
                }
                port.port.poll(Time::from_nanos(now), &mut c);
                self.collector = c;
                self.after_port(link as usize);
            }
        }
    }

    fn port_poll(&mut self, link: usize, t: u64) {
        let LinkQueue::Port(port) = &mut self.net.links[link].queue else {
            return;
        };
        if port.poll_at == Some(t) {
            port.poll_at = None;
        }
        let mut c = std::mem::take(&mut self.collector);
        port.port.poll(Time::from_nanos(self.now), &mut c);
        self.collector = c;
        self.after_port(link);
    }

    /// Forward what a port transmitted, account drops, schedule its next poll.
    fn after_port(&mut self, link: usize) {
        let now = self.now;
        let rec = self.port_of_link[link];
        let mut c = std::mem::take(&mut self.collector);
        for (mut p, t) in c.sent.drain(..) {
            if let Some(tr) = self.trace.as_mut() {
                if p.to_server && self.net.forward_ports.first() == Some(&(link as u32)) {
                    tr.departure(t.as_nanos().max(now), p.flow);
                }
            }
            let l = &self.net.links[link];
            let at = t.as_nanos().max(now) + l.transit_ns(p.meta.len);
            if let Some(r) = rec {
                let r = &mut self.ports[r];
                let d = now.saturating_sub(p.enq_ns);
                let _ = r.delay_us.record((d / 1_000).max(1));
                r.delay_sum += d as f64;
                r.delay_n += 1;
                if r.forward {
                    self.flows[p.flow as usize].port_bytes[r.hop as usize] += u64::from(p.meta.len);
                }
            }
            p.hop += 1;
            self.send_on(p, at);
        }
        for (p, reason) in c.dropped.drain(..) {
            self.flows[p.flow as usize].drops[reason.index()] += 1;
            self.recycle(p);
        }
        self.collector = c;
        let LinkQueue::Port(port) = &mut self.net.links[link].queue else {
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
            self.check_rrmqs(link, r);
        }
    }

    /// Record a newly closed RRMQS meter window with the real indices.
    fn check_rrmqs(&mut self, link: usize, r: usize) {
        let LinkQueue::Port(port) = &self.net.links[link].queue else {
            return;
        };
        let AnyQdisc::Rrmqs(q) = port.port.qdisc() else {
            return;
        };
        let w = q.latest_window();
        let rec = &mut self.ports[r];
        if w.end == rec.last_window_end || w.end == Time::ZERO || !rec.forward {
            return;
        }
        rec.last_window_end = w.end;
        let hop = rec.hop as usize;
        // Per-flow bytes through this port since the last window.
        let mut per_variant: Vec<(VariantId, u32, f64)> = Vec::new();
        let mut total = 0.0;
        let mut active = 0u32;
        for (i, f) in self.flows.iter().enumerate() {
            let b = f.port_bytes[hop] - rec.flow_bytes_at_window[i];
            rec.flow_bytes_at_window[i] = f.port_bytes[hop];
            if b == 0 {
                continue;
            }
            total += b as f64;
            active += 1;
            let v = f.spec.variant;
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
        rec.rrmqs.push((w.clone(), real));
    }

    fn deliver(&mut self, p: SimPacket) {
        let f = p.flow as usize;
        let h = if p.to_server { 2 * f + 1 } else { 2 * f };
        let now = self.instant(self.now);
        let tos = p.tos();
        self.capture(h, self.now, &p);
        // The packet's buffer goes to the endpoint as is: Vec -> Bytes ->
        // BytesMut of a unique buffer does not copy the bytes.
        let data = BytesMut::from(Bytes::from(p.data));
        self.hosts[h]
            .ep
            .handle_datagram_owned(now, p.from, Some(tos), data);
        match self.wakeups.as_mut() {
            // The datagram is stamped now; the host reacts when it wakes up.
            Some(w) => {
                if self.hosts[h].wake_at.is_none() {
                    let at = self.now + w.draw_ns();
                    self.hosts[h].wake_at = Some(at);
                    self.push(at, Ev::HostWake(h as u32));
                }
            }
            None => self.host_step(h),
        }
        if h % 2 == 0 {
            if let Some(tr) = self.trace.as_mut() {
                if let Role::Client(app) = &self.hosts[h].role {
                    if let Some(cca) = app.conn.and_then(|ch| self.hosts[h].ep.cca_handle(ch)) {
                        let snap = cca.snapshot();
                        tr.ack(self.now, f as u32, snap.stats.window, snap.bytes_in_flight);
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

    fn sample(&mut self) {
        self.samples.push(self.now as f64 / 1e9);
        for (i, f) in self.flows.iter_mut().enumerate() {
            let Role::Server(app) = &self.hosts[2 * i + 1].role else {
                unreachable!("odd hosts are servers");
            };
            f.rx.push(app.rx_bytes);
            if let Role::Client(client) = &self.hosts[2 * i].role {
                let capacity = client
                    .conn
                    .and_then(|ch| self.hosts[2 * i].ep.cca_handle(ch))
                    .and_then(|cca| cca.snapshot().stats.number(tollgate_cca::CAPACITY_MBPS));
                if capacity.is_some() || !f.capacity_mbps.is_empty() {
                    f.capacity_mbps.resize(f.rx.len() - 1, None);
                    f.capacity_mbps.push(capacity);
                }
            }
        }
        for (link, r) in self.port_of_link.iter().enumerate() {
            let Some(r) = *r else { continue };
            let LinkQueue::Port(port) = &self.net.links[link].queue else {
                continue;
            };
            let rec = &mut self.ports[r];
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
                    .push(self.flow_hash.iter().map(|&h| c.is_top(h)).collect());
            }
        }
    }

    fn finish(&mut self) {
        let now = self.instant(self.now);
        for (i, f) in self.flows.iter_mut().enumerate() {
            if let Role::Client(app) = &self.hosts[2 * i].role {
                f.acked_at = app.acked_at;
                f.error = app.error.clone();
                if let Some(ch) = app.conn {
                    f.report = self.hosts[2 * i].ep.stats(now, ch);
                }
            }
            if let Role::Server(app) = &self.hosts[2 * i + 1].role {
                f.fin_at = app.fin_at;
                f.receiver_report = app
                    .conn
                    .and_then(|ch| self.hosts[2 * i + 1].ep.stats(now, ch));
                if let (Some(tr), Some(sender)) = (self.trace.as_mut(), &f.report) {
                    tr.flow_end(i as u32, sender, f.receiver_report.as_ref());
                }
            }
            f.injected_drops = self.hosts[2 * i].injected_drops;
        }
        for (link, r) in self.port_of_link.iter().enumerate() {
            let Some(r) = *r else { continue };
            if let LinkQueue::Port(port) = &self.net.links[link].queue {
                self.ports[r].counters = *port.port.counters();
                self.ports[r].in_flight = port.port.in_flight();
            }
        }
    }
}

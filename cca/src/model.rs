//! A small deterministic packet-level model for exercising algorithms without
//! a network: senders with their own base RTT share one optional FIFO
//! drop-tail bottleneck, and losses can also be scripted.
//!
//! - Every packet is `mss` bytes. A sender transmits while
//!   `bytes_in_flight + mss <= min(window, receive_window)` (and no faster than
//!   its pacing rate); the receive window keeps an uncongested path finite.
//!   While the window exceeds the receive window the sender is not
//!   window-limited, so its ACKs are flagged `app_limited` (RFC 9002 §7.8) and
//!   the window does not grow on them.
//! - With a bottleneck (`rate`, `buffer`), a packet joins the FIFO queue or is
//!   dropped when the queue would exceed `buffer` bytes; the link serializes
//!   packets at `rate`. Without one, the path has infinite capacity.
//! - A packet's ACK returns `base_rtt` after it leaves the bottleneck (all
//!   propagation delay sits on the return path), one ACK per packet, so RTT
//!   samples are `base_rtt + queueing + serialization`.
//! - A lost packet (dropped by the queue, or by the flow's [`LossPattern`]) is
//!   reported to its sender one RTT later as a congestion event.
//!
//! Events are processed in `(time, sequence)` order, so runs are exactly
//! reproducible. It is not the emulator (`tollgate sim`): no transport, no
//! router disciplines, no reverse traffic. It is the smallest model in which a
//! window rule shows its character.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use crate::rng::{self, SimRng};
use crate::time::duration_nanos;
use crate::{
    Ack, AckBatch, CongestionControl, CongestionEvent, CongestionKind, RttSample, SentPacket, Time,
};

/// Scripted losses for one flow, on top of any bottleneck drops.
#[derive(Clone, Debug, PartialEq)]
pub enum LossPattern {
    /// No scripted losses.
    None,
    /// Every `n`-th packet sent is lost.
    EveryNth(u64),
    /// Each packet is lost with probability `p` (seeded).
    Random {
        /// Loss probability.
        p: f64,
        /// PRNG seed.
        seed: u64,
    },
    /// The first packet sent at or after each period boundary is lost.
    Periodic(Duration),
}

/// One sender.
#[derive(Debug)]
pub struct FlowSetup {
    /// The algorithm under test.
    pub cca: Box<dyn CongestionControl>,
    /// Round-trip propagation delay.
    pub base_rtt: Duration,
    /// When the flow starts sending.
    pub start: Time,
    /// Packet size, bytes.
    pub mss: u64,
    /// Scripted losses.
    pub loss: LossPattern,
    /// Flow-control limit on bytes in flight.
    pub receive_window: u64,
}

/// The shared bottleneck.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bottleneck {
    /// Link rate, bits per second.
    pub rate_bps: f64,
    /// Queue capacity, bytes.
    pub buffer_bytes: u64,
}

/// A sample of one flow at the end of a sampling interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    /// End of the interval.
    pub time: Time,
    /// Flow index.
    pub flow: usize,
    /// Congestion window, bytes.
    pub window: u64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Latest RTT sample.
    pub rtt: Duration,
    /// Goodput over the interval, bits per second.
    pub goodput_bps: f64,
    /// Packets lost so far.
    pub losses: u64,
}

/// Totals for one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowTotals {
    /// Packets sent.
    pub sent: u64,
    /// Bytes acknowledged.
    pub delivered: u64,
    /// Packets lost.
    pub lost: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Start(usize),
    Pace(usize),
    LinkDone,
    Sample,
    Ack { flow: usize, pn: u64, sent: Time },
    Lost { flow: usize, sent: Time },
}

#[derive(Debug)]
struct Flow {
    setup: FlowSetup,
    started: bool,
    next_pn: u64,
    in_flight: u64,
    next_send: Time,
    pace_pending: bool,
    srtt: Option<Duration>,
    min_rtt: Duration,
    latest_rtt: Duration,
    rng: SimRng,
    next_periodic_loss: Time,
    totals: FlowTotals,
    delivered_at_sample: u64,
}

/// The model: flows, an optional bottleneck and the event queue.
#[derive(Debug)]
pub struct Model {
    flows: Vec<Flow>,
    bottleneck: Option<Bottleneck>,
    queue: VecDeque<(usize, u64, Time)>,
    queue_bytes: u64,
    link_busy: bool,
    events: BinaryHeap<Reverse<(Time, u64, Event)>>,
    seq: u64,
    now: Time,
    sample_interval: Duration,
    samples: Vec<FlowSample>,
}

impl Model {
    /// A model of `flows`, optionally sharing `bottleneck`, sampled every `sample_interval`.
    pub fn new(
        flows: Vec<FlowSetup>,
        bottleneck: Option<Bottleneck>,
        sample_interval: Duration,
    ) -> Self {
        let mut model = Model {
            flows: Vec::new(),
            bottleneck,
            queue: VecDeque::new(),
            queue_bytes: 0,
            link_busy: false,
            events: BinaryHeap::new(),
            seq: 0,
            now: Time::ZERO,
            sample_interval: sample_interval.max(Duration::from_micros(1)),
            samples: Vec::new(),
        };
        for (i, setup) in flows.into_iter().enumerate() {
            let seed = match setup.loss {
                LossPattern::Random { seed, .. } => seed,
                _ => i as u64,
            };
            model.schedule(setup.start, Event::Start(i));
            model.flows.push(Flow {
                next_periodic_loss: setup.start,
                started: false,
                next_pn: 0,
                in_flight: 0,
                next_send: Time::ZERO,
                pace_pending: false,
                srtt: None,
                min_rtt: Duration::MAX,
                latest_rtt: Duration::ZERO,
                rng: rng::seeded(seed),
                totals: FlowTotals::default(),
                delivered_at_sample: 0,
                setup,
            });
        }
        let first_sample = Time::ZERO + model.sample_interval;
        model.schedule(first_sample, Event::Sample);
        model
    }

    fn schedule(&mut self, at: Time, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, event)));
    }

    /// Run until `end`; returns the samples taken so far.
    pub fn run_until(&mut self, end: Time) -> &[FlowSample] {
        while let Some(Reverse((at, _, event))) = self.events.peek().copied() {
            if at > end {
                break;
            }
            self.events.pop();
            self.now = at;
            self.handle(event);
        }
        self.now = end;
        &self.samples
    }

    /// All samples, in time order.
    pub fn samples(&self) -> &[FlowSample] {
        &self.samples
    }

    /// Flow `i`'s algorithm.
    pub fn cca(&self, i: usize) -> &dyn CongestionControl {
        self.flows[i].setup.cca.as_ref()
    }

    /// Flow `i`'s totals.
    pub fn totals(&self, i: usize) -> FlowTotals {
        self.flows[i].totals
    }

    /// Flow `i`'s mean goodput in bit/s over samples with `from < time <= to`.
    pub fn mean_goodput_bps(&self, i: usize, from: Time, to: Time) -> f64 {
        let rates: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.flow == i && s.time > from && s.time <= to)
            .map(|s| s.goodput_bps)
            .collect();
        rates.iter().sum::<f64>() / rates.len().max(1) as f64
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Start(i) => {
                self.flows[i].started = true;
                self.try_send(i);
            }
            Event::Pace(i) => {
                self.flows[i].pace_pending = false;
                self.try_send(i);
            }
            Event::LinkDone => self.link_done(),
            Event::Sample => self.sample(),
            Event::Ack { flow, pn, sent } => self.on_ack(flow, pn, sent),
            Event::Lost { flow, sent } => self.on_lost(flow, sent),
        }
    }

    fn try_send(&mut self, i: usize) {
        let now = self.now;
        loop {
            let flow = &mut self.flows[i];
            let mss = flow.setup.mss;
            let window = flow.setup.cca.window().min(flow.setup.receive_window);
            if !flow.started || (flow.in_flight > 0 && flow.in_flight + mss > window) {
                return;
            }
            if now < flow.next_send {
                if !flow.pace_pending {
                    flow.pace_pending = true;
                    let at = flow.next_send;
                    self.schedule(at, Event::Pace(i));
                }
                return;
            }
            if let Some(rate) = flow.setup.cca.pacing_rate().filter(|&r| r > 0) {
                flow.next_send = now + Duration::from_secs_f64(mss as f64 / rate as f64);
            }
            let pn = flow.next_pn;
            flow.next_pn += 1;
            flow.in_flight += mss;
            flow.totals.sent += 1;
            let sent = SentPacket {
                packet_number: pn,
                bytes: mss,
                bytes_in_flight: flow.in_flight,
            };
            flow.setup.cca.on_packet_sent(now, &sent);
            let scripted_loss = match flow.setup.loss {
                LossPattern::None => false,
                LossPattern::EveryNth(n) => n > 0 && (pn + 1).is_multiple_of(n),
                LossPattern::Random { p, .. } => rng::chance(&mut flow.rng, p),
                LossPattern::Periodic(period) => {
                    let due = now >= flow.next_periodic_loss && !period.is_zero();
                    while due && flow.next_periodic_loss <= now {
                        flow.next_periodic_loss = flow.next_periodic_loss + period;
                    }
                    due && pn > 0
                }
            };
            let base_rtt = flow.setup.base_rtt;
            if scripted_loss {
                self.schedule(now + base_rtt, Event::Lost { flow: i, sent: now });
                continue;
            }
            match self.bottleneck {
                None => self.schedule(
                    now + base_rtt,
                    Event::Ack {
                        flow: i,
                        pn,
                        sent: now,
                    },
                ),
                Some(link) => {
                    if self.queue_bytes + mss > link.buffer_bytes {
                        // A user-given rate can be tiny (`1e-300bit`): saturate
                        // instead of panicking on an unrepresentable drain time.
                        let drain = Duration::try_from_secs_f64(
                            self.queue_bytes as f64 * 8.0 / link.rate_bps,
                        )
                        .unwrap_or(Duration::MAX);
                        self.schedule(now + base_rtt + drain, Event::Lost { flow: i, sent: now });
                    } else {
                        self.queue.push_back((i, pn, now));
                        self.queue_bytes += mss;
                        if !self.link_busy {
                            self.start_transmission();
                        }
                    }
                }
            }
        }
    }

    fn start_transmission(&mut self) {
        let (Some(link), Some(&(flow, _, _))) = (self.bottleneck, self.queue.front()) else {
            self.link_busy = false;
            return;
        };
        self.link_busy = true;
        let bits = self.flows[flow].setup.mss as f64 * 8.0;
        let at = self.now + Duration::from_nanos((bits / link.rate_bps * 1e9).round() as u64);
        self.schedule(at, Event::LinkDone);
    }

    fn link_done(&mut self) {
        if let Some((flow, pn, sent)) = self.queue.pop_front() {
            self.queue_bytes -= self.flows[flow].setup.mss;
            let at = self.now + self.flows[flow].setup.base_rtt;
            self.schedule(at, Event::Ack { flow, pn, sent });
        }
        self.start_transmission();
    }

    fn on_ack(&mut self, i: usize, pn: u64, sent: Time) {
        let now = self.now;
        let flow = &mut self.flows[i];
        let mss = flow.setup.mss;
        flow.in_flight = flow.in_flight.saturating_sub(mss);
        let latest = now.saturating_since(sent);
        flow.latest_rtt = latest;
        flow.min_rtt = flow.min_rtt.min(latest);
        let srtt = match flow.srtt {
            None => latest,
            Some(s) => Duration::from_nanos((duration_nanos(s) * 7 + duration_nanos(latest)) / 8),
        };
        flow.srtt = Some(srtt);
        flow.totals.delivered += mss;
        let app_limited = flow.setup.cca.window() > flow.setup.receive_window;
        let ack = Ack {
            packet_number: pn,
            bytes: mss,
            sent_time: sent,
            rtt: RttSample {
                latest,
                smoothed: srtt,
                min: flow.min_rtt,
            },
            app_limited,
        };
        flow.setup.cca.on_ack(now, &ack);
        let batch = AckBatch {
            bytes_in_flight: flow.in_flight,
            app_limited,
            largest_acked: Some(pn),
        };
        flow.setup.cca.on_ack_batch_end(now, &batch);
        self.try_send(i);
    }

    fn on_lost(&mut self, i: usize, sent: Time) {
        let now = self.now;
        let flow = &mut self.flows[i];
        let mss = flow.setup.mss;
        flow.in_flight = flow.in_flight.saturating_sub(mss);
        flow.totals.lost += 1;
        let event = CongestionEvent {
            kind: CongestionKind::Loss,
            sent_time: sent,
            lost_bytes: mss,
            persistent_congestion: false,
        };
        flow.setup.cca.on_congestion_event(now, &event);
        self.try_send(i);
    }

    fn sample(&mut self) {
        let secs = self.sample_interval.as_secs_f64();
        for (i, flow) in self.flows.iter_mut().enumerate() {
            let delivered = flow.totals.delivered - flow.delivered_at_sample;
            flow.delivered_at_sample = flow.totals.delivered;
            self.samples.push(FlowSample {
                time: self.now,
                flow: i,
                window: flow.setup.cca.window(),
                in_flight: flow.in_flight,
                rtt: flow.latest_rtt,
                goodput_bps: delivered as f64 * 8.0 / secs,
                losses: flow.totals.lost,
            });
        }
        let next = self.now + self.sample_interval;
        self.schedule(next, Event::Sample);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{build, Env};

    #[test]
    fn a_vanishingly_slow_bottleneck_saturates_instead_of_panicking() {
        let flow = FlowSetup {
            cca: build("newreno", &Env::default()).unwrap(),
            base_rtt: Duration::from_millis(10),
            start: Time::ZERO,
            mss: 1200,
            loss: LossPattern::None,
            receive_window: 1 << 20,
        };
        let bottleneck = Bottleneck {
            rate_bps: 1e-300,
            buffer_bytes: 2400,
        };
        let mut model = Model::new(vec![flow], Some(bottleneck), Duration::from_millis(100));
        model.run_until(Time::from_millis(500));
        // Two packets fill the buffer; the third is dropped with a drain time
        // too long for a `Duration`.
        assert!(model.totals(0).sent >= 3);
    }
}

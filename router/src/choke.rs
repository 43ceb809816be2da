//! CHOKe: CHOose and Keep for responsive flows, CHOose and Kill for
//! unresponsive flows.
//!
//! Source: Pan, Prabhakar & Psounis, "CHOKe: a stateless active queue
//! management scheme for approximating fair bandwidth allocation", INFOCOM
//! 2000. Structure as in Linux `sch_choke`.
//!
//! For each arrival:
//! 1. update the RED average `avg` ([`RedCore`]);
//! 2. `avg <= min_th`: admit;
//! 3. otherwise draw a random packet already queued (O(1) on a
//!    [`HoleRing`]). If it belongs to the arrival's flow, drop both
//!    ([`DropReason::ChokeMatch`]; the queued one is returned as the verdict's
//!    `victim`). Else apply RED: above `max_th` drop (or ECN-mark) the arrival
//!    ([`DropReason::Forced`]), between the thresholds drop with RED's
//!    probability ([`DropReason::Early`]);
//! 4. admit only below the hard limit ([`DropReason::Overlimit`]).
//!
//! A flow holding a large share of the queue is likely to be matched, so an
//! unresponsive flow loses packets in proportion to its share, without
//! per-flow state.

use tollgate_cca::Time;

use crate::qdisc::{
    enqueue_then_dequeue, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict,
};
use crate::red::{RedConfig, RedCore};
use crate::ring::HoleRing;

const NAME: &str = "choke";

/// CHOKe parameters: the RED ones (`limit`, `min_th`, `max_th`, `max_p`,
/// `weight`, `ecn`, `harddrop`, `seed`...).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChokeConfig {
    /// RED parameters. Default: [`RedConfig::default`] with `gentle = false`
    /// (the CHOKe paper's plain RED).
    pub red: RedConfig,
}

impl Default for ChokeConfig {
    fn default() -> Self {
        ChokeConfig {
            red: RedConfig {
                gentle: false,
                ..RedConfig::default()
            },
        }
    }
}

impl ChokeConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.red.validate_as(NAME)
    }
}

/// The CHOKe discipline.
#[derive(Debug)]
pub struct Choke<P> {
    core: RedCore,
    q: HoleRing<P>,
    counters: Counters,
}

impl<P: PacketHandle> Choke<P> {
    /// Build from a configuration (validated here).
    pub fn new(config: &ChokeConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Choke {
            core: RedCore::new(&config.red),
            q: HoleRing::with_limit(config.red.limit as usize),
            counters: Counters::default(),
        })
    }

    /// The RED state.
    pub fn core(&self) -> &RedCore {
        &self.core
    }
}

impl<P: PacketHandle> Choke<P> {
    /// Steps 1-3 on an arrival (after counting it as received): the packet
    /// to queue and whether it was marked, or the drop verdict.
    #[inline]
    fn admit(&mut self, packet: P, now: Time) -> Result<(P, bool), Verdict<P>> {
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        self.core.update_average(self.q.len(), self.q.bytes(), now);
        if self.core.average() <= self.core.config().min_th {
            // Below min_th: RED's count restarts.
            let _ = self.core.decide(len);
            return Ok((packet, false));
        }
        if let Some(i) = self.q.random_index(self.core.rng()) {
            if self.q.get(i).is_some_and(|v| v.same_flow(&packet)) {
                let victim = self.q.remove(i);
                if let Some(v) = &victim {
                    self.counters.on_drop(DropReason::ChokeMatch, v.len_bytes());
                }
                self.counters.on_drop(DropReason::ChokeMatch, len);
                return Err(Verdict::Dropped {
                    reason: DropReason::ChokeMatch,
                    packet,
                    victim,
                });
            }
        }
        self.core.judge(packet, &mut self.counters)
    }
}

impl<P: PacketHandle> Qdisc<P> for Choke<P> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        let (packet, marked) = match self.admit(packet, now) {
            Ok(admitted) => admitted,
            Err(dropped) => return dropped,
        };
        match self.q.push(packet) {
            Ok(()) => self.counters.queued(marked),
            Err(packet) => self.counters.drop(DropReason::Overlimit, packet),
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<P> {
        let p = self.q.pop()?;
        let empty = self.q.is_empty();
        self.core
            .on_leave(p.len_bytes(), empty, now, &mut self.counters);
        Some(p)
    }

    /// On an empty queue there is no packet to compare with, an admitted
    /// arrival leaves at once and the idle period starts at `now`.
    #[inline]
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        if !self.q.is_empty() {
            return enqueue_then_dequeue(self, packet, now);
        }
        // An empty ring takes the packet (`limit` >= 1).
        match self.admit(packet, now) {
            Ok(admitted) => self.core.pass(admitted, &mut self.counters, now),
            Err(dropped) => (dropped, None),
        }
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn bytes(&self) -> u64 {
        self.q.bytes()
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn name(&self) -> &'static str {
        NAME
    }
}

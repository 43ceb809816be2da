//! CHOKe: CHOose and Keep for responsive flows, CHOose and Kill for
//! unresponsive flows.
//!
//! Source: Pan, Prabhakar & Psounis, "CHOKe: a stateless active queue
//! management scheme for approximating fair bandwidth allocation", INFOCOM
//! 2000; algorithms.md section 5. Structure as in Linux `sch_choke`.
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

use crate::qdisc::{ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict};
use crate::red::{RedConfig, RedCore, RedDecision};
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

impl<P: PacketHandle> Qdisc<P> for Choke<P> {
    fn enqueue(&mut self, mut packet: P, now: Time) -> Verdict<P> {
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        self.core.update_average(self.q.len(), self.q.bytes(), now);
        let mut marked = false;
        if self.core.average() > self.core.config().min_th {
            if let Some(i) = self.q.random_index(self.core.rng()) {
                if self.q.get(i).is_some_and(|v| v.same_flow(&packet)) {
                    let victim = self.q.remove(i);
                    if let Some(v) = &victim {
                        self.counters.on_drop(DropReason::ChokeMatch, v.len_bytes());
                    }
                    self.counters.on_drop(DropReason::ChokeMatch, len);
                    return Verdict::Dropped {
                        reason: DropReason::ChokeMatch,
                        packet,
                        victim,
                    };
                }
            }
            let decision = self.core.decide(len);
            if decision != RedDecision::Pass {
                if self.core.should_mark(decision, &packet) && packet.set_ce() {
                    marked = true;
                } else {
                    let reason = if decision == RedDecision::Early {
                        DropReason::Early
                    } else {
                        DropReason::Forced
                    };
                    return self.counters.drop(reason, packet);
                }
            }
        } else {
            // Below min_th: RED's count restarts.
            let _ = self.core.decide(len);
        }
        match self.q.push(packet) {
            Ok(()) if marked => {
                self.counters.marked += 1;
                Verdict::Marked
            }
            Ok(()) => Verdict::Queued,
            Err(packet) => self.counters.drop(DropReason::Overlimit, packet),
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<P> {
        let p = self.q.pop()?;
        self.counters.on_dequeue(p.len_bytes());
        if self.q.is_empty() {
            self.core.on_empty(now);
        }
        Some(p)
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

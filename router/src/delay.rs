//! Delay line: a fixed propagation delay per port or per flow class.
//!
//! A packet pushed at `now` is released at `now + delay(class)`. Each class
//! has its own FIFO of `(release time, packet)` with a capacity fixed at
//! construction, so with a constant delay per class the release times within
//! a class are non-decreasing and releasing is O(number of classes). If `now`
//! goes backwards, a release time is clamped to the previous one of its class
//! so the FIFO order holds. Classes are assigned by variant: class 0 is the
//! port's default delay, each configured `(variant, delay)` gets its own.
//! A packet with a rule delay class `k > 0` ([`PacketHandle::delay_class`],
//! set by a classifier rule with a `delay`, see [`crate::classify`]) goes to
//! the class of the `k`-th rule delay instead, whatever its variant
//! ([`DelayLine::with_rule_delays`]).

use std::collections::VecDeque;
use std::time::Duration;

use tollgate_cca::{Time, VariantId};

use crate::qdisc::{check, ConfigError, PacketHandle};

const NAME: &str = "delay";

/// Delay-line parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct DelayConfig {
    /// Delay of every packet without a class of its own. Default 0.
    pub delay: Duration,
    /// Per-variant delays (a flow class per variant). Default none.
    pub class_delays: Vec<(VariantId, Duration)>,
    /// Packets in flight per class. Default 100 000.
    pub capacity: usize,
}

impl Default for DelayConfig {
    fn default() -> Self {
        DelayConfig {
            delay: Duration::ZERO,
            class_delays: Vec::new(),
            capacity: 100_000,
        }
    }
}

impl DelayConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::int(NAME, "capacity", self.capacity as u64, 1, 1 << 24)?;
        check::int(
            NAME,
            "class_delays (count)",
            self.class_delays.len() as u64,
            0,
            64,
        )
    }
}

#[derive(Debug)]
struct Class<P> {
    delay: Duration,
    q: VecDeque<(Time, P)>,
}

/// The delay line.
#[derive(Debug)]
pub struct DelayLine<P> {
    classes: Vec<Class<P>>,
    class_of: [u8; 64],
    /// Index of the class of rule delay class 1 (rule classes follow the variant ones).
    rule_base: usize,
    /// Number of rule delay classes.
    rule_classes: usize,
    capacity: usize,
    len: usize,
    /// No class delays (a port without `delay`, `class_delays` or rule
    /// delays): [`DelayLine::can_bypass`] then needs no class lookup.
    no_delay: bool,
}

impl<P: PacketHandle> DelayLine<P> {
    /// Build from a configuration (validated here). Storage for every class is allocated now.
    pub fn new(config: &DelayConfig) -> Result<Self, ConfigError> {
        Self::with_rule_delays(config, &[])
    }

    /// [`DelayLine::new`] plus a class per rule delay: a packet whose
    /// [`PacketHandle::delay_class`] is `k` (1-based) is delayed by
    /// `rule_delays[k - 1]`; at most
    /// [`MAX_RULE_DELAYS`](crate::classify::MAX_RULE_DELAYS) of them. A class
    /// beyond the list falls back to the variant's class.
    pub fn with_rule_delays(
        config: &DelayConfig,
        rule_delays: &[Duration],
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        check::int(
            NAME,
            "rule delays (count)",
            rule_delays.len() as u64,
            0,
            crate::classify::MAX_RULE_DELAYS as u64,
        )?;
        let mut classes = vec![Class {
            delay: config.delay,
            q: VecDeque::with_capacity(config.capacity),
        }];
        let mut class_of = [0u8; 64];
        for &(variant, delay) in &config.class_delays {
            classes.push(Class {
                delay,
                q: VecDeque::with_capacity(config.capacity),
            });
            class_of[usize::from(variant.dscp() & 63)] = (classes.len() - 1) as u8;
        }
        let rule_base = classes.len();
        for &delay in rule_delays {
            classes.push(Class {
                delay,
                q: VecDeque::with_capacity(config.capacity),
            });
        }
        Ok(DelayLine {
            no_delay: classes.iter().all(|c| c.delay.is_zero()),
            classes,
            class_of,
            rule_base,
            rule_classes: rule_delays.len(),
            capacity: config.capacity,
            len: 0,
        })
    }

    /// The class a packet waits in.
    #[inline(always)]
    fn class_index(&self, packet: &P) -> usize {
        let k = usize::from(packet.delay_class());
        if k != 0 && k <= self.rule_classes {
            self.rule_base + k - 1
        } else {
            usize::from(self.class_of[usize::from(packet.variant().dscp() & 63)])
        }
    }

    /// Delay a packet arriving at `now`; hands it back if its class is full.
    pub fn push(&mut self, packet: P, now: Time) -> Result<(), P> {
        let i = self.class_index(&packet);
        let class = &mut self.classes[i];
        if class.q.len() >= self.capacity {
            return Err(packet);
        }
        let mut release = now + class.delay;
        if let Some(&(last, _)) = class.q.back() {
            release = release.max(last);
        }
        class.q.push_back((release, packet));
        self.len += 1;
        Ok(())
    }

    /// Whether `packet` may skip the line: its class has no delay and nothing
    /// at all is waiting, so skipping can neither reorder it nor let it
    /// overtake another class's due packet.
    #[inline]
    pub fn can_bypass(&self, packet: &P) -> bool {
        self.len == 0 && (self.no_delay || self.classes[self.class_index(packet)].delay.is_zero())
    }

    /// The earliest-due packet whose release time is `<= now`.
    #[inline]
    pub fn pop_ready(&mut self, now: Time) -> Option<P> {
        if self.len == 0 {
            return None;
        }
        let mut best: Option<(usize, Time)> = None;
        for (i, c) in self.classes.iter().enumerate() {
            if let Some(&(t, _)) = c.q.front() {
                if t <= now && !matches!(best, Some((_, b)) if b <= t) {
                    best = Some((i, t));
                }
            }
        }
        let (i, _) = best?;
        self.len -= 1;
        self.classes[i].q.pop_front().map(|(_, p)| p)
    }

    /// When the next packet is due.
    pub fn next_release(&self) -> Option<Time> {
        self.classes
            .iter()
            .filter_map(|c| c.q.front().map(|&(t, _)| t))
            .min()
    }

    /// Packets in the line.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

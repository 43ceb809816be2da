//! Every discipline in one enum: built from a [`DisciplineConfig`] at run
//! time, dispatched statically on the per-packet path, and still open to
//! each discipline's own state (Cebinae's top flows, the RRMQS meter) for
//! statistics. The emulator and the DPDK dataplane both use it.

use tollgate_cca::Time;

use crate::cebinae::Cebinae;
use crate::choke::Choke;
use crate::codel::Codel;
use crate::discipline_config::DisciplineConfig;
use crate::droptail::DropTail;
use crate::dualpi2::DualPi2;
use crate::fq::Fq;
use crate::fq_codel::FqCodel;
use crate::qdisc::{ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict};
use crate::red::Red;
use crate::rrmqs::Rrmqs;

/// Any library discipline.
#[derive(Debug)]
pub enum AnyQdisc<P> {
    /// DropTail.
    DropTail(DropTail<P>),
    /// RED.
    Red(Red<P>),
    /// CHOKe.
    Choke(Choke<P>),
    /// Cebinae.
    Cebinae(Cebinae<P>),
    /// RRMQS.
    Rrmqs(Rrmqs<P>),
    /// FQ (DRR over hashed flow queues).
    Fq(Fq<P>),
    /// CoDel (one FIFO).
    Codel(Codel<P>),
    /// FQ-CoDel.
    FqCodel(FqCodel<P>),
    /// DualPI2.
    DualPi2(DualPi2<P>),
}

impl<P: PacketHandle> AnyQdisc<P> {
    /// Build from a configuration (validated by the constructors).
    pub fn new(config: &DisciplineConfig) -> Result<Self, ConfigError> {
        Ok(match config {
            DisciplineConfig::DropTail(c) => AnyQdisc::DropTail(DropTail::new(c)?),
            DisciplineConfig::Red(c) => AnyQdisc::Red(Red::new(c)?),
            DisciplineConfig::Choke(c) => AnyQdisc::Choke(Choke::new(c)?),
            DisciplineConfig::Cebinae(c) => AnyQdisc::Cebinae(Cebinae::new(c)?),
            DisciplineConfig::Rrmqs(c) => AnyQdisc::Rrmqs(Rrmqs::new(c)?),
            DisciplineConfig::Fq(c) => AnyQdisc::Fq(Fq::new(c)?),
            DisciplineConfig::Codel(c) => AnyQdisc::Codel(Codel::new(c)?),
            DisciplineConfig::FqCodel(c) => AnyQdisc::FqCodel(FqCodel::new(c)?),
            DisciplineConfig::DualPi2(c) => AnyQdisc::DualPi2(DualPi2::new(c)?),
        })
    }
}

/// `$e` with `$q` bound to the concrete discipline, whichever it is.
macro_rules! each {
    ($self:expr, $q:ident => $e:expr) => {
        match $self {
            AnyQdisc::DropTail($q) => $e,
            AnyQdisc::Red($q) => $e,
            AnyQdisc::Choke($q) => $e,
            AnyQdisc::Cebinae($q) => $e,
            AnyQdisc::Rrmqs($q) => $e,
            AnyQdisc::Fq($q) => $e,
            AnyQdisc::Codel($q) => $e,
            AnyQdisc::FqCodel($q) => $e,
            AnyQdisc::DualPi2($q) => $e,
        }
    };
}

impl<P: PacketHandle> Qdisc<P> for AnyQdisc<P> {
    #[inline]
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        each!(self, q => q.enqueue(packet, now))
    }
    #[inline]
    fn dequeue(&mut self, now: Time) -> Option<P> {
        each!(self, q => q.dequeue(now))
    }
    #[inline]
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        each!(self, q => q.enqueue_dequeue(packet, now))
    }
    #[inline]
    fn len(&self) -> usize {
        each!(self, q => q.len())
    }
    #[inline]
    fn bytes(&self) -> u64 {
        each!(self, q => q.bytes())
    }
    fn counters(&self) -> &Counters {
        each!(self, q => q.counters())
    }
    #[inline]
    fn poll(&mut self, now: Time) {
        each!(self, q => q.poll(now))
    }
    fn name(&self) -> &'static str {
        each!(self, q => q.name())
    }
    fn reads_flow_hash(&self) -> bool {
        each!(self, q => q.reads_flow_hash())
    }
    #[inline]
    fn take_dropped(&mut self) -> Option<(P, DropReason)> {
        each!(self, q => q.take_dropped())
    }
    fn acts_outside_verdicts(&self) -> bool {
        each!(self, q => q.acts_outside_verdicts())
    }
}

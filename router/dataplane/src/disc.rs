//! The configured discipline as an enum: static dispatch on the fast path,
//! and access to each discipline's own statistics (RRMQS meter windows,
//! Cebinae's top-flow report) for the stats printer.
//!
//! (The library's `DisciplineConfig::build` returns a `Box<dyn Qdisc>`, which
//! hides those accessors; this enum is the dataplane's workaround.)

use tollgate_cca::Time;
use tollgate_router::cebinae::Cebinae;
use tollgate_router::choke::Choke;
use tollgate_router::droptail::DropTail;
use tollgate_router::red::Red;
use tollgate_router::rrmqs::Rrmqs;
use tollgate_router::{ConfigError, Counters, DisciplineConfig, PacketHandle, Qdisc, Verdict};

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
        })
    }
}

macro_rules! each {
    ($self:expr, $q:ident => $e:expr) => {
        match $self {
            AnyQdisc::DropTail($q) => $e,
            AnyQdisc::Red($q) => $e,
            AnyQdisc::Choke($q) => $e,
            AnyQdisc::Cebinae($q) => $e,
            AnyQdisc::Rrmqs($q) => $e,
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
}

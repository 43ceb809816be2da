//! Stable numeric variant ids.
//!
//! A flow's CCA variant can travel in the 6-bit IP DSCP field, so a router
//! can classify flows by variant; ids are small, stable numbers, never reused:
//!
//! - `0` means "unmarked" (DSCP 0 is ordinary best-effort traffic);
//! - base algorithms use `1..=31`;
//! - a sender-side taxed algorithm is its base id with bit 5 set
//!   (`base | 32`), so `taxed(newreno)` is 33 and a router can tell a taxed
//!   flow from an untaxed flow of the same base algorithm.

use core::fmt;

/// The variant id of a congestion-control algorithm (a DSCP codepoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VariantId(u8);

/// Bit set on the id of a taxed variant.
const TAXED_BIT: u8 = 32;

impl VariantId {
    /// Unmarked traffic (DSCP 0).
    pub const UNMARKED: VariantId = VariantId(0);
    /// NewReno (RFC 9002 / RFC 6582).
    pub const NEWRENO: VariantId = VariantId(1);
    /// CUBIC (RFC 9438).
    pub const CUBIC: VariantId = VariantId(2);
    /// TCP Libra.
    pub const LIBRA: VariantId = VariantId(3);
    /// HighSpeed TCP (RFC 3649).
    pub const HIGHSPEED: VariantId = VariantId(4);
    /// Scalable TCP.
    pub const SCALABLE: VariantId = VariantId(5);
    /// BIC TCP.
    pub const BIC: VariantId = VariantId(6);
    /// H-TCP.
    pub const HTCP: VariantId = VariantId(7);
    /// TCP Hybla.
    pub const HYBLA: VariantId = VariantId(8);
    /// TCP Illinois.
    pub const ILLINOIS: VariantId = VariantId(9);
    /// TCP Vegas.
    pub const VEGAS: VariantId = VariantId(10);
    /// TCP Veno.
    pub const VENO: VariantId = VariantId(11);
    /// TCP Westwood+.
    pub const WESTWOOD: VariantId = VariantId(12);
    /// YeAH-TCP.
    pub const YEAH: VariantId = VariantId(13);
    /// LEDBAT (RFC 6817).
    pub const LEDBAT: VariantId = VariantId(14);
    /// BBR v1.
    pub const BBR: VariantId = VariantId(15);
    /// CBR, the constant-rate unresponsive flood.
    pub const CBR: VariantId = VariantId(16);
    /// BBRv3 (draft-ietf-ccwg-bbr).
    pub const BBR3: VariantId = VariantId(17);
    /// Prague (draft-briscoe-iccrg-prague-congestion-control, L4S).
    pub const PRAGUE: VariantId = VariantId(18);

    /// The id for a DSCP codepoint (`None` if it does not fit in 6 bits).
    pub const fn from_dscp(dscp: u8) -> Option<VariantId> {
        if dscp < 64 {
            Some(VariantId(dscp))
        } else {
            None
        }
    }

    /// The DSCP codepoint carrying this id (always < 64).
    pub const fn dscp(self) -> u8 {
        self.0
    }

    /// The id of the taxed form of this variant.
    pub const fn taxed(self) -> VariantId {
        VariantId(self.0 | TAXED_BIT)
    }

    /// Whether this is the id of a taxed variant.
    pub const fn is_taxed(self) -> bool {
        self.0 & TAXED_BIT != 0
    }

    /// The id with the tax bit cleared.
    pub const fn base(self) -> VariantId {
        VariantId(self.0 & !TAXED_BIT)
    }

    /// The raw number.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for VariantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match crate::registry::name_of_variant(self.base()) {
            Some(name) if self.is_taxed() => write!(f, "taxed({name})"),
            Some(name) => f.write_str(name),
            None if *self == VariantId::UNMARKED => f.write_str("unmarked"),
            None => write!(f, "variant#{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taxed_ids_are_distinct_dscp_codepoints() {
        let t = VariantId::NEWRENO.taxed();
        assert_eq!(t.dscp(), 33);
        assert!(t.is_taxed() && !VariantId::NEWRENO.is_taxed());
        assert_eq!(t.base(), VariantId::NEWRENO);
        assert_eq!(VariantId::from_dscp(t.dscp()), Some(t));
        assert_eq!(VariantId::from_dscp(64), None);
    }
}

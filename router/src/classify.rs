//! Variant classification: which congestion-control variant a packet belongs to.
//!
//! DESIGN.md decision 4: a flow's variant travels in the IP DSCP field when
//! the sender opts in (the codepoint is the [`VariantId`] of `tollgate-cca`),
//! or is assigned by router rules on the 5-tuple. The order is:
//!
//! 1. the first configured [`Rule`] that matches the packet, if any;
//! 2. otherwise the DSCP codepoint, if DSCP classification is enabled;
//! 3. otherwise [`VariantId::UNMARKED`], the class of unclassified traffic.
//!
//! Rules are given at construction (operator configuration, not fed by the
//! network), so the table is bounded by the configuration.

use std::net::IpAddr;

use tollgate_cca::VariantId;

use crate::packet::{FlowKey, PacketInfo};

/// An address prefix (`10.0.0.0/8`, `2001:db8::/32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    addr: [u8; 16],
    /// Prefix length over the IPv4-mapped 128-bit form.
    len: u8,
}

impl Prefix {
    /// A prefix; `len` counts bits of the given family (0-32 for IPv4, 0-128 for IPv6).
    /// Returns `None` if `len` is too long for the family.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        match addr {
            IpAddr::V4(a) if len <= 32 => Some(Prefix {
                addr: a.to_ipv6_mapped().octets(),
                len: 96 + len,
            }),
            IpAddr::V6(a) if len <= 128 => Some(Prefix {
                addr: a.octets(),
                len,
            }),
            _ => None,
        }
    }

    /// Whether `addr` (IPv4-mapped form) lies in the prefix.
    pub fn contains(&self, addr: &[u8; 16]) -> bool {
        let a = u128::from_be_bytes(self.addr);
        let b = u128::from_be_bytes(*addr);
        let mask = if self.len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.len))
        };
        (a ^ b) & mask == 0
    }
}

/// `true` for `None`, else `f(value)`: an unset rule field matches everything.
fn unset_or<T>(field: Option<T>, f: impl FnOnce(T) -> bool) -> bool {
    match field {
        Some(v) => f(v),
        None => true,
    }
}

/// One classification rule: every field that is `Some` must match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Source address prefix.
    pub src: Option<Prefix>,
    /// Destination address prefix.
    pub dst: Option<Prefix>,
    /// Inclusive source-port range.
    pub src_ports: Option<(u16, u16)>,
    /// Inclusive destination-port range.
    pub dst_ports: Option<(u16, u16)>,
    /// IP protocol.
    pub proto: Option<u8>,
    /// The variant assigned to matching packets.
    pub variant: VariantId,
}

impl Rule {
    /// A rule matching everything, assigning `variant`; narrow it with the fields.
    pub fn any(variant: VariantId) -> Rule {
        Rule {
            src: None,
            dst: None,
            src_ports: None,
            dst_ports: None,
            proto: None,
            variant,
        }
    }

    /// Whether the rule matches `key`.
    pub fn matches(&self, key: &FlowKey) -> bool {
        let in_range = |r: Option<(u16, u16)>, p: u16| unset_or(r, |(lo, hi)| lo <= p && p <= hi);
        unset_or(self.src, |p| p.contains(&key.src))
            && unset_or(self.dst, |p| p.contains(&key.dst))
            && in_range(self.src_ports, key.src_port)
            && in_range(self.dst_ports, key.dst_port)
            && unset_or(self.proto, |p| p == key.proto)
    }
}

/// Assigns a [`VariantId`] to each packet.
#[derive(Clone, Debug, Default)]
pub struct Classifier {
    rules: Vec<Rule>,
    /// Use the DSCP codepoint when no rule matches.
    pub use_dscp: bool,
}

impl Classifier {
    /// A classifier with `rules` (first match wins), falling back to DSCP if `use_dscp`.
    pub fn new(rules: Vec<Rule>, use_dscp: bool) -> Self {
        Classifier { rules, use_dscp }
    }

    /// DSCP-only classification.
    pub fn dscp() -> Self {
        Classifier::new(Vec::new(), true)
    }

    /// The variant of a parsed packet.
    #[inline]
    pub fn classify(&self, info: &PacketInfo) -> VariantId {
        if let Some(rule) = self.rules.iter().find(|r| r.matches(&info.flow)) {
            return rule.variant;
        }
        self.by_dscp(info.dscp)
    }

    /// Whether any rule is configured (without rules the variant depends on
    /// the DSCP alone, so callers need not build a [`FlowKey`]).
    #[inline]
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The variant when no rule matches a packet marked `dscp`.
    #[inline]
    pub fn by_dscp(&self, dscp: u8) -> VariantId {
        if self.use_dscp {
            VariantId::from_dscp(dscp).unwrap_or(VariantId::UNMARKED)
        } else {
            VariantId::UNMARKED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{build, parse_ethernet};

    #[test]
    fn rules_override_dscp_and_unmatched_is_unmarked() {
        let key = FlowKey::new(
            "10.1.2.3".parse().unwrap(),
            "192.168.0.9".parse().unwrap(),
            17,
            4000,
            443,
        );
        let cubic = parse_ethernet(&build::udp4(&key, VariantId::CUBIC.dscp() << 2, 10)).unwrap();
        let plain = parse_ethernet(&build::udp4(&key, 0, 10)).unwrap();
        assert_eq!(Classifier::dscp().classify(&cubic), VariantId::CUBIC);
        assert_eq!(Classifier::dscp().classify(&plain), VariantId::UNMARKED);
        assert_eq!(
            Classifier::new(vec![], false).classify(&cubic),
            VariantId::UNMARKED
        );
        let rule = Rule {
            src: Prefix::new("10.0.0.0".parse().unwrap(), 8),
            dst_ports: Some((443, 443)),
            ..Rule::any(VariantId::LIBRA)
        };
        let c = Classifier::new(vec![rule], true);
        assert_eq!(c.classify(&cubic), VariantId::LIBRA);
        let other = FlowKey {
            src_port: 4000,
            dst_port: 80,
            ..key
        };
        let o = parse_ethernet(&build::udp4(&other, VariantId::CUBIC.dscp() << 2, 10)).unwrap();
        assert_eq!(
            c.classify(&o),
            VariantId::CUBIC,
            "non-matching rule falls back to DSCP"
        );
        assert!(Prefix::new("10.0.0.0".parse().unwrap(), 33).is_none());
        let v6 = Prefix::new("2001:db8::".parse().unwrap(), 32).unwrap();
        assert!(v6.contains(
            &"2001:db8:1::5"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        ));
        assert!(!v6.contains(&key.src));
    }
}

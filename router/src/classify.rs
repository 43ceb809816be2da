//! Variant classification: which congestion-control variant a packet belongs to.
//!
//! A flow's variant travels in the IP DSCP field when
//! the sender opts in (the codepoint is the [`VariantId`] of `tollgate-cca`),
//! or is assigned by router rules on the 5-tuple. The order is:
//!
//! 1. the first configured [`Rule`] that matches the packet, if any;
//! 2. otherwise the DSCP codepoint, if DSCP classification is enabled;
//! 3. otherwise [`VariantId::UNMARKED`], the class of unclassified traffic.
//!
//! A rule may also give matching packets a propagation delay of their own
//! (a *rule delay*, independent of the variant): the first matching rule
//! that sets a delay decides it, the first matching rule that sets a variant
//! decides the variant. Rule delays are numbered by distinct value
//! ([`Classifier::rule_delays`]); a packet carries the number as its
//! `delay_class` (0: none), and the port's [`crate::delay::DelayLine`] has a
//! class per number. This is how a testbed gives two flows of one variant
//! different emulated RTTs.
//!
//! Rules are given at construction (operator configuration, not fed by the
//! network), so the table is bounded by the configuration.

use std::net::IpAddr;
use std::time::Duration;

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
    /// The variant assigned to matching packets; `None`: the rule leaves
    /// the variant to a later rule or the DSCP.
    pub variant: Option<VariantId>,
    /// The propagation delay of matching packets on every egress, instead of
    /// the port's (or the variant's) delay; `None`: no delay of its own.
    pub delay: Option<Duration>,
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
            variant: Some(variant),
            delay: None,
        }
    }

    /// A rule matching everything that only sets a delay; narrow it with the fields.
    pub fn delay(delay: Duration) -> Rule {
        Rule {
            variant: None,
            delay: Some(delay),
            ..Rule::any(VariantId::UNMARKED)
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

/// At most this many distinct rule delays (delay classes 1..=31: a compact
/// packet handle keeps the class in 5 spare bits).
pub const MAX_RULE_DELAYS: usize = 31;

/// Assigns a [`VariantId`] and a rule delay class to each packet.
#[derive(Clone, Debug, Default)]
pub struct Classifier {
    rules: Vec<Rule>,
    /// Delay class (1-based index into `delays`) of each rule; 0: no delay.
    delay_class: Vec<u8>,
    /// The distinct rule delays, in order of first appearance.
    delays: Vec<Duration>,
    /// Use the DSCP codepoint when no rule matches.
    pub use_dscp: bool,
}

impl Classifier {
    /// A classifier with `rules` (first match wins), falling back to DSCP if
    /// `use_dscp`. Rule delays beyond [`MAX_RULE_DELAYS`] distinct values are
    /// ignored (check with [`Classifier::check_rules`] first).
    pub fn new(rules: Vec<Rule>, use_dscp: bool) -> Self {
        let mut delays: Vec<Duration> = Vec::new();
        let delay_class = rules
            .iter()
            .map(|r| match r.delay {
                None => 0,
                Some(d) => match delays.iter().position(|&x| x == d) {
                    Some(i) => i as u8 + 1,
                    None if delays.len() < MAX_RULE_DELAYS => {
                        delays.push(d);
                        delays.len() as u8
                    }
                    None => 0,
                },
            })
            .collect();
        Classifier {
            rules,
            delay_class,
            delays,
            use_dscp,
        }
    }

    /// Checks a rule set: at most [`MAX_RULE_DELAYS`] distinct delays, and
    /// every rule sets a variant or a delay.
    pub fn check_rules(rules: &[Rule]) -> Result<(), String> {
        let mut delays: Vec<Duration> = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if r.variant.is_none() && r.delay.is_none() {
                return Err(format!("[{i}]: a rule sets `variant`, `delay` or both"));
            }
            if let Some(d) = r.delay {
                if !delays.contains(&d) {
                    delays.push(d);
                }
            }
        }
        if delays.len() > MAX_RULE_DELAYS {
            return Err(format!(
                "{} distinct rule delays, at most {MAX_RULE_DELAYS} (rules with equal delays share a class)",
                delays.len()
            ));
        }
        Ok(())
    }

    /// The distinct rule delays: delay class `k` (1-based) is `rule_delays()[k - 1]`.
    pub fn rule_delays(&self) -> &[Duration] {
        &self.delays
    }

    /// DSCP-only classification.
    pub fn dscp() -> Self {
        Classifier::new(Vec::new(), true)
    }

    /// The variant of a parsed packet.
    #[inline]
    pub fn classify(&self, info: &PacketInfo) -> VariantId {
        self.classify_with_delay(info).0
    }

    /// The variant and the rule delay class (0: none) of a parsed packet.
    #[inline]
    pub fn classify_with_delay(&self, info: &PacketInfo) -> (VariantId, u8) {
        let mut variant = None;
        let mut delay_class = 0;
        for (r, &dc) in self.rules.iter().zip(&self.delay_class) {
            if (variant.is_some() || r.variant.is_none()) && (delay_class != 0 || dc == 0) {
                continue; // nothing this rule could still decide
            }
            if r.matches(&info.flow) {
                if variant.is_none() {
                    variant = r.variant;
                }
                if delay_class == 0 {
                    delay_class = dc;
                }
                if variant.is_some() && (delay_class != 0 || self.delays.is_empty()) {
                    break;
                }
            }
        }
        (
            variant.unwrap_or_else(|| self.by_dscp(info.dscp)),
            delay_class,
        )
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

    #[test]
    fn rule_delays_are_independent_of_the_variant_and_numbered_by_value() {
        let flow = |src_port| {
            FlowKey::new(
                "10.0.0.1".parse().unwrap(),
                "10.0.0.2".parse().unwrap(),
                17,
                src_port,
                443,
            )
        };
        let pkt = |src_port, dscp: u8| {
            parse_ethernet(&build::udp4(&flow(src_port), dscp << 2, 10)).unwrap()
        };
        let ms = Duration::from_millis;
        let rules = vec![
            Rule {
                src_ports: Some((1000, 1000)),
                ..Rule::delay(ms(10))
            },
            Rule {
                src_ports: Some((2000, 2000)),
                ..Rule::delay(ms(100))
            },
            Rule {
                src_ports: Some((3000, 3000)),
                ..Rule::delay(ms(10))
            },
            // A variant rule after the delay rules still decides the variant.
            Rule {
                dst_ports: Some((443, 443)),
                ..Rule::any(VariantId::LIBRA)
            },
        ];
        Classifier::check_rules(&rules).unwrap();
        let c = Classifier::new(rules, true);
        assert_eq!(c.rule_delays(), &[ms(10), ms(100)]);
        let cubic = VariantId::CUBIC.dscp();
        assert_eq!(
            c.classify_with_delay(&pkt(1000, cubic)),
            (VariantId::LIBRA, 1)
        );
        assert_eq!(c.classify_with_delay(&pkt(2000, 0)), (VariantId::LIBRA, 2));
        assert_eq!(c.classify_with_delay(&pkt(3000, 0)), (VariantId::LIBRA, 1));
        assert_eq!(c.classify_with_delay(&pkt(4000, 0)), (VariantId::LIBRA, 0));
        // Without the variant rule the variant comes from the DSCP.
        let d = Classifier::new(
            vec![Rule {
                src_ports: Some((1000, 1000)),
                ..Rule::delay(ms(5))
            }],
            true,
        );
        assert_eq!(
            d.classify_with_delay(&pkt(1000, cubic)),
            (VariantId::CUBIC, 1)
        );
        assert_eq!(
            d.classify_with_delay(&pkt(1001, cubic)),
            (VariantId::CUBIC, 0)
        );
        // A rule setting neither is refused; too many distinct delays too.
        let none = Rule {
            variant: None,
            ..Rule::any(VariantId::UNMARKED)
        };
        assert!(Classifier::check_rules(&[none])
            .unwrap_err()
            .contains("`variant`, `delay`"));
        let many: Vec<Rule> = (0..=MAX_RULE_DELAYS as u64)
            .map(|i| Rule::delay(ms(i + 1)))
            .collect();
        assert!(Classifier::check_rules(&many)
            .unwrap_err()
            .contains("at most 31"));
        assert!(Classifier::check_rules(&many[..MAX_RULE_DELAYS]).is_ok());
    }
}

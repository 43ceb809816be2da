//! Flow kinds (which stack carries a flow) and the quick `--flows` syntax of
//! `tollgate load`. `tollgate sim` runs only Tollgate QUIC flows; `load` and
//! `testbed` run all three.
//!
//! A flow group's `cca` names both the stack and its congestion control:
//!
//! | `cca` | kind | congestion control |
//! |---|---|---|
//! | any `tollgate-cca` registry spec (`cubic`, `libra(capacity=1Gbit)`, `taxed(newreno)`) | Tollgate QUIC | that spec, on the data sender |
//! | `tcp:reno`, `tcp:cubic`, `tcp:bbr` (any name in `/proc/sys/net/ipv4/tcp_available_congestion_control`) | kernel TCP | `TCP_CONGESTION` on the data sender's socket |
//! | `quiche:cubic`, `quiche:reno`, `quiche:bbr2` | quiche QUIC (feature `quiche`) | quiche's own |
//!
//! Quick syntax: `"4x cubic, 2x libra(capacity=1Gbit), 1x taxed(newreno), 2x tcp:cubic"`
//! — comma-separated groups (commas inside parentheses belong to the spec),
//! each `[N x] CCA`, N defaulting to 1.

use std::fmt;

use tollgate_cca::VariantId;

/// Which stack carries a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// Tollgate's QUIC transport with a registry CCA spec.
    Quic(String),
    /// Kernel TCP with a Linux congestion-control name.
    Tcp(String),
    /// quiche with its own congestion control (`cubic`, `reno`, `bbr2`).
    Quiche(String),
}

/// A `cca` field that [`FlowKind::parse`] refused: the value with what is
/// wrong in it, and what is allowed there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindError {
    /// The field's text, quoted, with the faulty part and why.
    pub value: String,
    /// What may stand there.
    pub allowed: String,
}

impl std::fmt::Display for KindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: invalid; allowed: {}", self.value, self.allowed)
    }
}

impl std::error::Error for KindError {}

/// quiche's congestion controls.
pub const QUICHE_CCAS: [&str; 3] = ["reno", "cubic", "bbr2"];

impl FlowKind {
    /// Parse a group's `cca` field. QUIC specs are checked against the
    /// registry; TCP names against the running kernel only when the flow is
    /// opened (the sender may be another host).
    pub fn parse(cca: &str) -> Result<FlowKind, KindError> {
        let cca = cca.trim();
        if let Some(name) = cca.strip_prefix("tcp:") {
            let ok = !name.is_empty()
                && name.len() <= 15
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(KindError {
                    value: format!("\"{cca}\""),
                    allowed: "tcp: and a kernel congestion-control name (reno, cubic, bbr; \
                              at most 15 letters, digits or _)"
                        .into(),
                });
            }
            return Ok(FlowKind::Tcp(name.to_string()));
        }
        if let Some(name) = cca.strip_prefix("quiche:") {
            if !QUICHE_CCAS.contains(&name) {
                return Err(KindError {
                    value: format!("\"{cca}\""),
                    allowed: QUICHE_CCAS.map(|c| format!("quiche:{c}")).join(", "),
                });
            }
            return Ok(FlowKind::Quiche(name.to_string()));
        }
        tollgate_cca::build(cca, &tollgate_cca::Env::default()).map_err(|e| {
            // What is wrong goes with the value; `allowed` lists what may
            // stand at that place (the registry's names or parameters).
            let mut allowed = if e.valid.is_empty() {
                "a spec as `tollgate cca list` shows (e.g. `taxed(newreno, tau=0.025)`)".into()
            } else {
                e.valid.join(", ")
            };
            if e.part == cca && tollgate_cca::registry::find(cca).is_none() {
                // An unknown name in the field's place: the other stacks too.
                allowed.push_str("; or tcp:NAME, quiche:NAME");
            }
            KindError {
                value: format!("\"{cca}\" (`{}`: {})", e.part, e.message),
                allowed,
            }
        })?;
        Ok(FlowKind::Quic(cca.to_string()))
    }

    /// The variant id the flow carries (DSCP marking, per-variant results):
    /// the registry's id for a QUIC spec, the id of the same-named Tollgate
    /// algorithm for TCP and quiche (`reno` is NewReno), else unmarked.
    pub fn variant(&self) -> VariantId {
        let name = match self {
            FlowKind::Quic(spec) => spec.as_str(),
            FlowKind::Tcp(n) | FlowKind::Quiche(n) => match n.as_str() {
                "reno" => "newreno",
                "bbr2" => "bbr",
                other => other,
            },
        };
        tollgate_cca::build(name, &tollgate_cca::Env::default())
            .map_or(VariantId::UNMARKED, |c| c.variant())
    }

    /// `quic`, `tcp` or `quiche`.
    pub fn stack(&self) -> &'static str {
        match self {
            FlowKind::Quic(_) => "quic",
            FlowKind::Tcp(_) => "tcp",
            FlowKind::Quiche(_) => "quiche",
        }
    }
}

impl fmt::Display for FlowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowKind::Quic(s) => f.write_str(s),
            FlowKind::Tcp(s) => write!(f, "tcp:{s}"),
            FlowKind::Quiche(s) => write!(f, "quiche:{s}"),
        }
    }
}

/// One group of the quick syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuickGroup {
    /// Flows.
    pub count: u32,
    /// The `cca` text (validated by [`FlowKind::parse`]).
    pub cca: String,
}

/// Parse `"4x cubic, 2x tcp:cubic"`.
pub fn parse_quick(text: &str) -> Result<Vec<QuickGroup>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(format!("--flows: unbalanced ')' at byte {i} of \"{text}\""));
        }
    }
    if depth != 0 {
        return Err(format!("--flows: unbalanced '(' in \"{text}\""));
    }
    parts.push(&text[start..]);
    let mut groups = Vec::new();
    for part in parts {
        let part = part.trim();
        if part.is_empty() {
            return Err(format!(
                "--flows: empty group in \"{text}\" (write e.g. \"2x cubic, 1x tcp:bbr\")"
            ));
        }
        let (count, cca) = match part.split_once(|c: char| c.is_whitespace()) {
            Some((n, rest))
                if n.ends_with(['x', 'X']) && n[..n.len() - 1].parse::<u32>().is_ok() =>
            {
                (n[..n.len() - 1].parse::<u32>().unwrap_or(1), rest.trim())
            }
            _ => match part.split_once(['x', 'X']) {
                Some((n, rest)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => (
                    n.parse::<u32>()
                        .map_err(|e| format!("--flows: \"{part}\": {e}"))?,
                    rest.trim(),
                ),
                _ => (1, part),
            },
        };
        if !(1..=10_000).contains(&count) {
            return Err(format!(
                "--flows: \"{part}\": the count must be 1 ..= 10000"
            ));
        }
        FlowKind::parse(cca).map_err(|e| format!("--flows: {e}"))?;
        groups.push(QuickGroup {
            count,
            cca: cca.to_string(),
        });
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_kinds_carry_the_variant_of_the_same_algorithm() {
        let v = |t: &str| FlowKind::parse(t).unwrap().variant();
        assert_eq!(v("tcp:reno"), VariantId::NEWRENO);
        assert_eq!(v("tcp:cubic"), VariantId::CUBIC);
        assert_eq!(v("quiche:bbr2"), VariantId::BBR);
        assert_eq!(v("tcp:dctcp"), VariantId::UNMARKED);
        assert_eq!(v("taxed(cubic)"), VariantId::CUBIC.taxed());
    }

    #[test]
    fn kinds_parse_and_print_back() {
        for text in ["cubic", "libra(capacity=1Gbit)", "tcp:bbr", "quiche:bbr2"] {
            assert_eq!(FlowKind::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            FlowKind::parse("tcp:cubic").unwrap(),
            FlowKind::Tcp("cubic".into())
        );
        assert!(FlowKind::parse("tcp:").is_err());
        assert!(FlowKind::parse("tcp:../etc").is_err());
        let e = FlowKind::parse("quiche:vegas").unwrap_err();
        assert!(e.allowed.contains("quiche:bbr2"), "{e}");
        let e = FlowKind::parse("cubik").unwrap_err();
        assert_eq!(
            e.value,
            "\"cubik\" (`cubik`: unknown congestion-control algorithm)"
        );
        assert!(
            e.allowed.starts_with("newreno, cubic") && e.allowed.ends_with("tcp:NAME, quiche:NAME"),
            "{e}"
        );
        let e = FlowKind::parse("taxed").unwrap_err();
        assert!(e.value.contains("wraps exactly one base"), "{e}");
        assert!(!e.allowed.contains("tcp:"), "{e}");
        // A bad parameter: its names, not the other stacks.
        let e = FlowKind::parse("taxed(newreno, tua=0.1)").unwrap_err();
        assert!(e.value.contains("unknown parameter `tua`"), "{e}");
        assert!(
            e.allowed.starts_with("tau,") && !e.allowed.contains("tcp:"),
            "{e}"
        );
    }

    #[test]
    fn quick_syntax_splits_groups_outside_parentheses() {
        let g = parse_quick(
            "4x cubic, 2x libra(capacity=1Gbit), 1x taxed(newreno, tau=0.02), 2x tcp:cubic, quiche:reno, 3xnewreno",
        )
        .unwrap();
        let got: Vec<(u32, &str)> = g.iter().map(|g| (g.count, g.cca.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (4, "cubic"),
                (2, "libra(capacity=1Gbit)"),
                (1, "taxed(newreno, tau=0.02)"),
                (2, "tcp:cubic"),
                (1, "quiche:reno"),
                (3, "newreno"),
            ]
        );
        assert!(parse_quick("2x cubic,")
            .unwrap_err()
            .contains("empty group"));
        assert!(parse_quick("2x taxed(cubic")
            .unwrap_err()
            .contains("unbalanced"));
        assert!(parse_quick("0x cubic").unwrap_err().contains("1 ..= 10000"));
        assert!(parse_quick("2x nosuch").is_err());
    }
}

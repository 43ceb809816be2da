//! Spec strings: `name`, `name(key=value, ...)`, `taxed(cubic(beta=0.7), tau=0.025)`.
//!
//! Grammar (white space ignored):
//!
//! ```text
//! spec  := name [ "(" arg { "," arg } ")" ]
//! arg   := key "=" value     -- a parameter
//!        | spec              -- a positional argument: a nested algorithm
//! value := any text without top-level "," or ")"
//! ```
//!
//! Each algorithm declares its parameters as a table of [`Param`]; an [`Args`]
//! reader hands the builder typed values, filling in the table's defaults, so
//! the defaults printed by `tollgate cca list` are the defaults used.

use std::fmt;
use std::time::Duration;

use crate::units;

/// A spec string that could not be turned into an algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The whole spec string.
    pub spec: String,
    /// The offending part (a name, a `key=value`, a position).
    pub part: String,
    /// What is wrong.
    pub message: String,
    /// What would be valid there.
    pub valid: Vec<String>,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in CCA spec `{}`: `{}`: {}",
            self.spec, self.part, self.message
        )?;
        if !self.valid.is_empty() {
            write!(f, "; valid: {}", self.valid.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecError {}

/// A parsed spec: a name with parameters and nested positional specs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Algorithm name, lower-cased.
    pub name: String,
    /// Nested specs, in order.
    pub positional: Vec<Spec>,
    /// `key=value` pairs, in order (keys lower-cased).
    pub params: Vec<(String, String)>,
    /// This spec's own text, for error messages.
    pub text: String,
}

impl Spec {
    /// Parse a spec string.
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let err = |part: &str, message: &str| SpecError {
            spec: text.to_string(),
            part: part.to_string(),
            message: message.to_string(),
            valid: Vec::new(),
        };
        let trimmed = text.trim();
        let (name, inner) = match trimmed.find('(') {
            None => (trimmed, None),
            Some(open) => {
                if !trimmed.ends_with(')') {
                    return Err(err(trimmed, "missing closing `)`"));
                }
                (
                    &trimmed[..open],
                    Some(&trimmed[open + 1..trimmed.len() - 1]),
                )
            }
        };
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '+')
        {
            return Err(err(
                name,
                "expected an algorithm name such as `newreno` or `cubic`",
            ));
        }
        let mut spec = Spec {
            name: name.to_ascii_lowercase(),
            positional: Vec::new(),
            params: Vec::new(),
            text: trimmed.to_string(),
        };
        if let Some(inner) = inner {
            for arg in split_top_level(inner).map_err(|m| err(inner, &m))? {
                let arg = arg.trim();
                if arg.is_empty() {
                    return Err(err(&spec.text, "empty argument (stray comma?)"));
                }
                let eq = arg.find('=');
                let paren = arg.find('(');
                match eq {
                    Some(eq) if paren.is_none_or(|p| eq < p) => {
                        let key = arg[..eq].trim().to_ascii_lowercase();
                        let value = arg[eq + 1..].trim().to_string();
                        if key.is_empty() || value.is_empty() {
                            return Err(err(arg, "expected `key=value`"));
                        }
                        if spec.params.iter().any(|(k, _)| *k == key) {
                            return Err(err(arg, "parameter given twice"));
                        }
                        spec.params.push((key, value));
                    }
                    _ => spec.positional.push(Spec::parse(arg).map_err(|mut e| {
                        e.spec = text.to_string();
                        e
                    })?),
                }
            }
        }
        Ok(spec)
    }
}

/// Split on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced `)`")?,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced `(`".into());
    }
    if !text.trim().is_empty() {
        parts.push(&text[start..]);
    }
    Ok(parts)
}

/// The type and valid range of a parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// A real number in `min..=max`.
    Float {
        /// Smallest valid value.
        min: f64,
        /// Largest valid value.
        max: f64,
    },
    /// A whole number in `min..=max`.
    Int {
        /// Smallest valid value.
        min: u64,
        /// Largest valid value.
        max: u64,
    },
    /// A duration such as `25ms` (a bare number is seconds).
    Duration,
    /// A rate such as `100Mbit`, or `auto` if `auto_allowed`.
    Rate {
        /// Whether the word `auto` is accepted (meaning "estimate it").
        auto_allowed: bool,
    },
    /// `on`/`off` (also `true`/`false`, `yes`/`no`, `1`/`0`).
    Bool,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Float { min, max } => write!(f, "number {min}..={max}"),
            Kind::Int { min, max } => write!(f, "integer {min}..={max}"),
            Kind::Duration => f.write_str("duration (e.g. 25ms)"),
            Kind::Rate { auto_allowed: true } => f.write_str("rate (e.g. 100Mbit) or auto"),
            Kind::Rate {
                auto_allowed: false,
            } => f.write_str("rate (e.g. 100Mbit)"),
            Kind::Bool => f.write_str("on|off"),
            Kind::Choice(words) => f.write_str(&words.join("|")),
        }
    }
}

/// One declared parameter of an algorithm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Param {
    /// Key in the spec string.
    pub name: &'static str,
    /// Type and range.
    pub kind: Kind,
    /// Default, written as a user would write it.
    pub default: &'static str,
    /// One line of help.
    pub help: &'static str,
}

/// Typed access to a spec's parameters, with the declared defaults filled in.
#[derive(Debug)]
pub struct Args<'a> {
    algorithm: &'static str,
    declared: &'static [Param],
    given: &'a [(String, String)],
    spec_text: String,
}

impl<'a> Args<'a> {
    /// Reader over `spec`'s parameters; fails if a key is not in `declared`.
    pub fn new(
        algorithm: &'static str,
        declared: &'static [Param],
        spec: &'a Spec,
        whole: &str,
    ) -> Result<Self, SpecError> {
        for (key, value) in &spec.params {
            if !declared.iter().any(|p| p.name == key) {
                return Err(SpecError {
                    spec: whole.to_string(),
                    part: format!("{key}={value}"),
                    message: format!("unknown parameter `{key}` for {algorithm}"),
                    valid: declared.iter().map(|p| p.name.to_string()).collect(),
                });
            }
        }
        Ok(Args {
            algorithm,
            declared,
            given: &spec.params,
            spec_text: whole.to_string(),
        })
    }

    /// A reader that yields every declared default.
    pub fn defaults(algorithm: &'static str, declared: &'static [Param]) -> Args<'static> {
        Args {
            algorithm,
            declared,
            given: &[],
            spec_text: algorithm.to_string(),
        }
    }

    fn raw(&self, key: &str) -> (&Param, &str) {
        let param = self
            .declared
            .iter()
            .find(|p| p.name == key)
            .unwrap_or_else(|| panic!("{} reads undeclared parameter `{key}`", self.algorithm));
        let value = self
            .given
            .iter()
            .find(|(k, _)| k == key)
            .map_or(param.default, |(_, v)| v.as_str());
        (param, value)
    }

    fn error(&self, param: &Param, value: &str, message: String) -> SpecError {
        SpecError {
            spec: self.spec_text.clone(),
            part: format!("{}={value}", param.name),
            message,
            valid: vec![format!("{}: {}", param.name, param.kind)],
        }
    }

    /// An error about parameter `key` (its `key=value` as the offending
    /// part), for checks a builder makes beyond the declared kind.
    pub fn invalid(&self, key: &str, message: String) -> SpecError {
        let (param, value) = self.raw(key);
        self.error(param, value, message)
    }

    /// A real-number parameter, range-checked.
    pub fn float(&self, key: &str) -> Result<f64, SpecError> {
        let (param, value) = self.raw(key);
        let Kind::Float { min, max } = param.kind else {
            panic!("{}: `{key}` is not declared as a float", self.algorithm)
        };
        let v: f64 = value
            .parse()
            .map_err(|_| self.error(param, value, format!("`{value}` is not a number")))?;
        if !(min..=max).contains(&v) {
            return Err(self.error(param, value, format!("{v} is outside {min}..={max}")));
        }
        Ok(v)
    }

    /// A whole-number parameter, range-checked.
    pub fn int(&self, key: &str) -> Result<u64, SpecError> {
        let (param, value) = self.raw(key);
        let Kind::Int { min, max } = param.kind else {
            panic!("{}: `{key}` is not declared as an int", self.algorithm)
        };
        let v: u64 = value
            .parse()
            .map_err(|_| self.error(param, value, format!("`{value}` is not a whole number")))?;
        if !(min..=max).contains(&v) {
            return Err(self.error(param, value, format!("{v} is outside {min}..={max}")));
        }
        Ok(v)
    }

    /// A duration parameter.
    pub fn duration(&self, key: &str) -> Result<Duration, SpecError> {
        let (param, value) = self.raw(key);
        units::parse_duration(value).map_err(|m| self.error(param, value, m))
    }

    /// A rate parameter in bits per second; `None` means `auto`.
    pub fn rate_bps(&self, key: &str) -> Result<Option<f64>, SpecError> {
        let (param, value) = self.raw(key);
        let Kind::Rate { auto_allowed } = param.kind else {
            panic!("{}: `{key}` is not declared as a rate", self.algorithm)
        };
        if auto_allowed && value.eq_ignore_ascii_case("auto") {
            return Ok(None);
        }
        units::parse_rate_bps(value)
            .map(Some)
            .map_err(|m| self.error(param, value, m))
    }

    /// An on/off parameter.
    pub fn bool(&self, key: &str) -> Result<bool, SpecError> {
        let (param, value) = self.raw(key);
        match value.to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => Ok(true),
            "off" | "false" | "no" | "0" => Ok(false),
            _ => Err(self.error(param, value, format!("`{value}` is not on/off"))),
        }
    }

    /// A choice parameter: the index of the chosen word in the declared list.
    pub fn choice(&self, key: &str) -> Result<usize, SpecError> {
        let (param, value) = self.raw(key);
        let Kind::Choice(words) = param.kind else {
            panic!("{}: `{key}` is not declared as a choice", self.algorithm)
        };
        let lower = value.to_ascii_lowercase();
        words
            .iter()
            .position(|w| *w == lower)
            .ok_or_else(|| self.error(param, value, format!("`{value}` is not one of the choices")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_specs_and_params() {
        let s = Spec::parse("taxed( cubic(beta=0.7) , tau=0.025, mode=growth )").unwrap();
        assert_eq!(s.name, "taxed");
        assert_eq!(s.positional.len(), 1);
        assert_eq!(s.positional[0].name, "cubic");
        assert_eq!(s.positional[0].params, vec![("beta".into(), "0.7".into())]);
        assert_eq!(
            s.params,
            vec![
                ("tau".into(), "0.025".into()),
                ("mode".into(), "growth".into())
            ]
        );
    }

    #[test]
    fn rejects_malformed_specs_with_the_offending_part() {
        let e = Spec::parse("cubic(beta=0.7").unwrap_err();
        assert!(e.message.contains("closing"), "{e}");
        let e = Spec::parse("cubic(beta=0.7,,c=1)").unwrap_err();
        assert!(e.message.contains("empty argument"), "{e}");
        let e = Spec::parse("cubic(beta=1, beta=2)").unwrap_err();
        assert_eq!(e.part, "beta=2");
        assert!(Spec::parse("").is_err());
        assert!(Spec::parse("a b").is_err());
    }

    const PARAMS: &[Param] = &[
        Param {
            name: "beta",
            kind: Kind::Float { min: 0.0, max: 1.0 },
            default: "0.7",
            help: "",
        },
        Param {
            name: "mode",
            kind: Kind::Choice(&["a", "b"]),
            default: "a",
            help: "",
        },
    ];

    #[test]
    fn args_fill_defaults_and_check_ranges() {
        let spec = Spec::parse("x(mode=b)").unwrap();
        let args = Args::new("x", PARAMS, &spec, "x(mode=b)").unwrap();
        assert_eq!(args.float("beta").unwrap(), 0.7);
        assert_eq!(args.choice("mode").unwrap(), 1);
        let spec = Spec::parse("x(beta=1.5)").unwrap();
        let e = Args::new("x", PARAMS, &spec, "x(beta=1.5)")
            .unwrap()
            .float("beta")
            .unwrap_err();
        assert_eq!(e.part, "beta=1.5");
        assert!(e.to_string().contains("0..=1"), "{e}");
        let spec = Spec::parse("x(gamma=1)").unwrap();
        let e = Args::new("x", PARAMS, &spec, "x(gamma=1)").unwrap_err();
        assert!(e.to_string().contains("valid: beta, mode"), "{e}");
    }
}

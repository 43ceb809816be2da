//! The registry: every algorithm by name, its parameters and defaults, and
//! [`build`], which turns a spec string into a boxed algorithm.
//!
//! To add an algorithm: give its module a `pub const ALGORITHM: Algorithm`
//! (name, variant id, one-line summary, source, parameter table, builder) and
//! list it in [`ALGORITHMS`]. Its defaults then appear in `tollgate cca list`
//! and every spec string can override its parameters.

use crate::spec::{Args, Param, Spec, SpecError};
use crate::{CongestionControl, VariantId};

/// What an algorithm needs to know about its sender.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Env {
    /// Maximum segment (datagram payload) size, bytes.
    pub mss: u64,
    /// Initial congestion window, bytes.
    pub initial_window: u64,
    /// The rate of the sender's own link (interface or access link), bit/s,
    /// if the driver knows it. No narrow link downstream can be faster, so
    /// estimators use it as an upper bound (CapProbe rejects pairs above it).
    pub link_rate_bps: Option<f64>,
}

impl Env {
    /// RFC 9002 §7.2 initial window for `mss`: `min(10 * mss, max(2 * mss, 14720))`.
    pub fn with_mss(mss: u64) -> Self {
        Env {
            mss,
            initial_window: (10 * mss).min((2 * mss).max(14_720)),
            link_rate_bps: None,
        }
    }

    /// This environment with the sender's link rate, bit/s.
    pub fn with_link_rate(self, link_rate_bps: Option<f64>) -> Self {
        Env {
            link_rate_bps,
            ..self
        }
    }
}

impl Default for Env {
    /// QUIC's 1200-byte minimum datagram size.
    fn default() -> Self {
        Env::with_mss(1200)
    }
}

/// Builds an algorithm from its parsed arguments, the already-built base
/// algorithm (for wrappers such as `taxed`) and the sender environment.
pub type Builder = fn(
    &Args,
    Option<Box<dyn CongestionControl>>,
    &Env,
) -> Result<Box<dyn CongestionControl>, SpecError>;

/// A registered algorithm.
#[derive(Debug)]
pub struct Algorithm {
    /// Name used in spec strings.
    pub name: &'static str,
    /// Stable variant id (for a wrapper: the tax bit it adds is applied to its base).
    pub variant: VariantId,
    /// One line for `tollgate cca list`.
    pub summary: &'static str,
    /// Where the algorithm is specified.
    pub source: &'static str,
    /// Whether the spec takes one positional base algorithm, as `taxed(cubic)`.
    pub takes_base: bool,
    /// Declared parameters with their defaults.
    pub params: &'static [Param],
    /// Constructor.
    pub build: Builder,
}

/// Every registered algorithm, in the order `tollgate cca list` shows them.
pub static ALGORITHMS: &[&Algorithm] = &[
    &crate::newreno::ALGORITHM,
    &crate::cubic::ALGORITHM,
    &crate::libra::ALGORITHM,
    &crate::taxed::ALGORITHM,
    &crate::highspeed::ALGORITHM,
    &crate::scalable::ALGORITHM,
    &crate::bic::ALGORITHM,
    &crate::htcp::ALGORITHM,
    &crate::hybla::ALGORITHM,
    &crate::illinois::ALGORITHM,
    &crate::vegas::ALGORITHM,
    &crate::veno::ALGORITHM,
    &crate::westwood::ALGORITHM,
    &crate::yeah::ALGORITHM,
    &crate::ledbat::ALGORITHM,
    &crate::bbr::ALGORITHM,
    &crate::cbr::ALGORITHM,
];

/// The algorithm registered under `name`.
pub fn find(name: &str) -> Option<&'static Algorithm> {
    ALGORITHMS.iter().copied().find(|a| a.name == name)
}

/// The registry name of a (base) variant id.
pub fn name_of_variant(id: VariantId) -> Option<&'static str> {
    ALGORITHMS
        .iter()
        .find(|a| a.variant == id && !a.takes_base)
        .map(|a| a.name)
}

/// Build an algorithm from a spec string such as `taxed(cubic, tau=0.025)`.
pub fn build(spec: &str, env: &Env) -> Result<Box<dyn CongestionControl>, SpecError> {
    let parsed = Spec::parse(spec)?;
    build_parsed(&parsed, spec, env)
}

fn build_parsed(
    spec: &Spec,
    whole: &str,
    env: &Env,
) -> Result<Box<dyn CongestionControl>, SpecError> {
    let algorithm = find(&spec.name).ok_or_else(|| SpecError {
        spec: whole.to_string(),
        part: spec.name.clone(),
        message: "unknown congestion-control algorithm".into(),
        valid: ALGORITHMS.iter().map(|a| a.name.to_string()).collect(),
    })?;
    let args = Args::new(algorithm.name, algorithm.params, spec, whole)?;
    let base = match (algorithm.takes_base, spec.positional.as_slice()) {
        (false, []) => None,
        (true, [base]) => Some(build_parsed(base, whole, env)?),
        (true, _) => {
            return Err(SpecError {
                spec: whole.to_string(),
                part: spec.text.clone(),
                message: format!(
                    "{} wraps exactly one base algorithm, e.g. {}(newreno)",
                    algorithm.name, algorithm.name
                ),
                valid: ALGORITHMS
                    .iter()
                    .filter(|a| !a.takes_base)
                    .map(|a| a.name.to_string())
                    .collect(),
            })
        }
        (false, [extra, ..]) => {
            return Err(SpecError {
                spec: whole.to_string(),
                part: extra.text.clone(),
                message: format!("{} takes only key=value parameters", algorithm.name),
                valid: algorithm
                    .params
                    .iter()
                    .map(|p| p.name.to_string())
                    .collect(),
            })
        }
    };
    (algorithm.build)(&args, base, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_builds_from_its_defaults() {
        let env = Env::default();
        for algorithm in ALGORITHMS {
            let spec = if algorithm.takes_base {
                format!("{}(newreno)", algorithm.name)
            } else {
                algorithm.name.to_string()
            };
            let cca = build(&spec, &env).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(cca.name(), algorithm.name);
            assert!(cca.window() >= 2 * env.mss, "{spec}");
            let expected = if algorithm.takes_base {
                VariantId::NEWRENO.taxed()
            } else {
                algorithm.variant
            };
            assert_eq!(cca.variant(), expected, "{spec}");
        }
    }

    #[test]
    fn a_huge_duration_parameter_is_an_error_naming_the_parameter() {
        let env = Env::default();
        for (spec, part) in [
            ("ledbat(target=1e20s)", "target=1e20s"),
            ("westwood(min_interval=1e20s)", "min_interval=1e20s"),
            ("taxed(newreno, rtt_scale=1e20s)", "rtt_scale=1e20s"),
            ("htcp(delta_l=1e308min)", "delta_l=1e308min"),
        ] {
            let e = build(spec, &env).map(|_| ()).unwrap_err();
            assert_eq!(e.part, part, "{spec}: {e}");
            assert!(e.message.contains("out of range"), "{spec}: {e}");
            assert!(e.to_string().contains(part), "{spec}: {e}");
        }
    }

    #[test]
    fn variant_ids_and_names_are_unique() {
        for (i, a) in ALGORITHMS.iter().enumerate() {
            for b in &ALGORITHMS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert!(
                    a.takes_base || b.takes_base || a.variant != b.variant,
                    "{} and {}",
                    a.name,
                    b.name
                );
            }
        }
    }

    #[test]
    fn errors_name_the_part_and_list_valid_choices() {
        let env = Env::default();
        let e = build("cubc", &env).unwrap_err();
        assert_eq!(e.part, "cubc");
        assert!(e.to_string().contains("newreno, cubic"), "{e}");
        let e = build("taxed(cubic, tua=0.1)", &env).unwrap_err();
        assert_eq!(e.part, "tua=0.1");
        assert!(e.to_string().contains("tau"), "{e}");
        let e = build("taxed(tau=0.1)", &env).unwrap_err();
        assert!(e.message.contains("exactly one base"), "{e}");
        let e = build("cubic(newreno)", &env).unwrap_err();
        assert_eq!(e.part, "newreno");
        let e = build("taxed(cubic(beta=2))", &env).unwrap_err();
        assert_eq!(e.part, "beta=2");
        assert_eq!(e.spec, "taxed(cubic(beta=2))");
    }
}

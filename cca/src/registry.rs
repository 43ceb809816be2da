//! The registry: every algorithm by name, its parameters and defaults, and
//! [`build`], which turns a spec string into a boxed algorithm.
//!
//! An algorithm is an [`Algorithm`] entry: name, variant id, one-line
//! summary, source, parameter table and builder. The built-in ones are listed
//! in [`ALGORITHMS`] (their defaults appear in `tollgate cca list`); a program
//! adds its own at run time with [`register`]. Either way every spec string
//! can name it and override its parameters, and the transport and the
//! emulator build it for a connection like any other.
//!
//! ## Registering your own algorithm
//!
//! A fixed window of `segments` datagrams, never reduced: not a useful
//! congestion controller, but the smallest complete one.
//!
//! ```
//! use tollgate_cca::registry::{self, Algorithm, Env};
//! use tollgate_cca::spec::{Kind, Param};
//! use tollgate_cca::{Ack, CongestionControl, CongestionEvent, Time, VariantId};
//!
//! #[derive(Clone, Debug)]
//! struct FixedWindow {
//!     window: u64,
//! }
//!
//! impl CongestionControl for FixedWindow {
//!     fn name(&self) -> &'static str {
//!         "fixedwindow"
//!     }
//!     fn variant(&self) -> VariantId {
//!         VARIANT
//!     }
//!     fn on_ack(&mut self, _now: Time, _ack: &Ack) {}
//!     fn on_congestion_event(&mut self, _now: Time, _event: &CongestionEvent) {}
//!     fn on_mtu_change(&mut self, _now: Time, _mss: u64) {}
//!     fn impose_window(&mut self, _now: Time, window: u64) {
//!         self.window = self.window.min(window);
//!     }
//!     fn window(&self) -> u64 {
//!         self.window
//!     }
//!     fn clone_box(&self) -> Box<dyn CongestionControl> {
//!         Box::new(self.clone())
//!     }
//! }
//!
//! /// A base id no built-in algorithm uses (they take 1..=17).
//! const VARIANT: VariantId = match VariantId::from_dscp(30) {
//!     Some(id) => id,
//!     None => panic!(),
//! };
//!
//! static FIXED_WINDOW: Algorithm = Algorithm {
//!     name: "fixedwindow",
//!     variant: VARIANT,
//!     summary: "a constant window, losses ignored",
//!     source: "example",
//!     takes_base: false,
//!     params: &[Param {
//!         name: "segments",
//!         kind: Kind::Int { min: 2, max: 100_000 },
//!         default: "40",
//!         help: "window in datagrams",
//!     }],
//!     build: |args, _base, env: &Env| {
//!         let window = args.int("segments")? * env.mss;
//!         Ok(Box::new(FixedWindow { window }))
//!     },
//! };
//!
//! registry::register(&FIXED_WINDOW)?;
//! let cca = tollgate_cca::build("fixedwindow(segments=10)", &Env::with_mss(1200))?;
//! assert_eq!(cca.window(), 12_000);
//! // Registered algorithms wrap like built-in ones.
//! let taxed = tollgate_cca::build("taxed(fixedwindow)", &Env::default())?;
//! assert_eq!(taxed.variant(), VARIANT.taxed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::sync::RwLock;

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
    /// A seed of this flow's own (the emulator and the load generator give
    /// every flow a different one). An algorithm that declares a `seed`
    /// parameter (BBR's randomised probe timing) gets it when the spec does
    /// not set `seed`, so two flows of one run do not draw the same numbers.
    pub seed: Option<u64>,
}

impl Env {
    /// RFC 9002 §7.2 initial window for `mss`: `min(10 * mss, max(2 * mss, 14720))`.
    pub fn with_mss(mss: u64) -> Self {
        Env {
            mss,
            initial_window: (10 * mss).min((2 * mss).max(14_720)),
            link_rate_bps: None,
            seed: None,
        }
    }

    /// This environment with the flow's own seed (see [`Env::seed`]).
    pub fn with_seed(self, seed: Option<u64>) -> Self {
        Env { seed, ..self }
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
    &crate::bbr3::ALGORITHM,
    &crate::prague::ALGORITHM,
    &crate::cbr::ALGORITHM,
];

/// Algorithms added with [`register`], in the order they were added.
static REGISTERED: RwLock<Vec<&'static Algorithm>> = RwLock::new(Vec::new());

fn registered() -> std::sync::RwLockReadGuard<'static, Vec<&'static Algorithm>> {
    // The list is only ever pushed to: a panic elsewhere cannot leave it half-written.
    REGISTERED.read().unwrap_or_else(|e| e.into_inner())
}

/// Why [`register`] refused an algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// The name is not one a spec string can carry (lower-case ASCII letters,
    /// digits, `_`, `-`, `+`), or a parameter name is not lower case.
    InvalidName(String),
    /// Another algorithm already has this name.
    NameTaken(&'static str),
    /// A non-wrapping algorithm's variant id must be a base id in `1..=31`.
    InvalidVariant(VariantId),
    /// Another non-wrapping algorithm already has this variant id.
    VariantTaken {
        /// The id asked for.
        variant: VariantId,
        /// The algorithm that has it.
        by: &'static str,
    },
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::InvalidName(name) => write!(
                f,
                "`{name}` cannot be used in a spec string: use lower-case ASCII letters, digits, `_`, `-` or `+`"
            ),
            RegisterError::NameTaken(name) => {
                write!(f, "an algorithm named `{name}` is already registered")
            }
            RegisterError::InvalidVariant(id) => write!(
                f,
                "variant id {} is not a base id (1..=31)",
                id.get()
            ),
            RegisterError::VariantTaken { variant, by } => {
                write!(f, "variant id {} is already used by `{by}`", variant.get())
            }
        }
    }
}

impl std::error::Error for RegisterError {}

fn spec_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' || c == '+'
        })
}

/// Add an algorithm defined outside this crate, for the rest of the process:
/// from then on [`build`] (and so the transport's connection options, the
/// emulator's scenarios and `taxed(...)` wrappers) accepts its name. See the
/// [module documentation](self) for a complete example.
///
/// The name must be new and fit a spec string; a non-wrapping algorithm's
/// variant id (its DSCP codepoint when flows are marked) must be a base id
/// (`1..=31`) that no other algorithm uses: built-in ids are stable and never
/// reused, and `1..=17` are taken. The instances the builder returns should
/// report the same id from [`CongestionControl::variant`]: that, not the
/// entry, is what marks packets. Registering the same entry again is a
/// no-op, so tests and examples may each register it.
pub fn register(algorithm: &'static Algorithm) -> Result<(), RegisterError> {
    let mut list = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    if list.iter().any(|a| std::ptr::eq(*a, algorithm)) {
        return Ok(());
    }
    if !spec_name(algorithm.name) {
        return Err(RegisterError::InvalidName(algorithm.name.to_string()));
    }
    if let Some(p) = algorithm.params.iter().find(|p| !spec_name(p.name)) {
        return Err(RegisterError::InvalidName(p.name.to_string()));
    }
    let existing = || ALGORITHMS.iter().chain(list.iter());
    if let Some(a) = existing().find(|a| a.name == algorithm.name) {
        return Err(RegisterError::NameTaken(a.name));
    }
    if !algorithm.takes_base {
        let id = algorithm.variant;
        if id == VariantId::UNMARKED || id.is_taxed() {
            return Err(RegisterError::InvalidVariant(id));
        }
        if let Some(a) = existing().find(|a| !a.takes_base && a.variant == id) {
            return Err(RegisterError::VariantTaken {
                variant: id,
                by: a.name,
            });
        }
    }
    list.push(algorithm);
    Ok(())
}

/// Every algorithm: the built-in [`ALGORITHMS`], then those added with
/// [`register`].
pub fn algorithms() -> Vec<&'static Algorithm> {
    ALGORITHMS
        .iter()
        .copied()
        .chain(registered().iter().copied())
        .collect()
}

/// The algorithm registered under `name` (built in or added with [`register`]).
pub fn find(name: &str) -> Option<&'static Algorithm> {
    ALGORITHMS
        .iter()
        .copied()
        .find(|a| a.name == name)
        .or_else(|| registered().iter().copied().find(|a| a.name == name))
}

/// The registry name of a (base) variant id.
pub fn name_of_variant(id: VariantId) -> Option<&'static str> {
    let base = |a: &&Algorithm| a.variant == id && !a.takes_base;
    ALGORITHMS
        .iter()
        .copied()
        .find(base)
        .or_else(|| registered().iter().copied().find(base))
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
        valid: algorithms().iter().map(|a| a.name.to_string()).collect(),
    })?;
    // The flow's own seed for an algorithm with a `seed` parameter the spec
    // leaves at its default.
    let seeded;
    let spec = match env.seed {
        Some(seed)
            if algorithm.params.iter().any(|p| p.name == "seed")
                && !spec.params.iter().any(|(k, _)| k == "seed") =>
        {
            let mut s = spec.clone();
            s.params.push(("seed".into(), seed.to_string()));
            seeded = s;
            &seeded
        }
        _ => spec,
    };
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
                valid: algorithms()
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
    fn the_flow_seed_fills_an_unset_seed_parameter_only() {
        let env = Env::default();
        let dbg = |spec: &str, env: &Env| format!("{:?}", build(spec, env).unwrap());
        for name in ["bbr", "bbr3"] {
            let seeded = env.with_seed(Some(7));
            // The flow's seed is used when the spec leaves `seed` unset...
            assert_eq!(dbg(name, &seeded), dbg(&format!("{name}(seed=7)"), &env));
            assert_ne!(dbg(name, &seeded), dbg(name, &env.with_seed(Some(8))));
            // ...and a seed in the spec wins.
            assert_eq!(
                dbg(&format!("{name}(seed=3)"), &seeded),
                dbg(&format!("{name}(seed=3)"), &env)
            );
            // Inside a wrapper too.
            assert_eq!(
                dbg(&format!("taxed({name})"), &seeded),
                dbg(&format!("taxed({name}(seed=7))"), &env)
            );
        }
        // An algorithm without a `seed` parameter ignores it.
        assert_eq!(dbg("cubic", &env.with_seed(Some(7))), dbg("cubic", &env));
    }

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

    static EXTRA: Algorithm = Algorithm {
        name: "extra-newreno",
        variant: match VariantId::from_dscp(31) {
            Some(id) => id,
            None => panic!(),
        },
        summary: "NewReno under another name",
        source: "test",
        takes_base: false,
        params: crate::newreno::ALGORITHM.params,
        build: crate::newreno::ALGORITHM.build,
    };

    #[test]
    fn registered_algorithms_build_by_name_and_refuse_clashes() {
        register(&EXTRA).unwrap();
        register(&EXTRA).unwrap();
        assert_eq!(find("extra-newreno").map(|a| a.name), Some("extra-newreno"));
        assert_eq!(name_of_variant(EXTRA.variant), Some("extra-newreno"));
        assert!(algorithms().iter().any(|a| a.name == "extra-newreno"));
        let env = Env::default();
        // The builder is NewReno's: the algorithm reports NewReno's id.
        let cca = build("taxed(extra-newreno(beta=0.7))", &env).unwrap();
        assert_eq!(cca.variant(), VariantId::NEWRENO.taxed());
        assert!(build("nosuch", &env)
            .unwrap_err()
            .to_string()
            .contains("extra-newreno"));

        static SAME_NAME: Algorithm = Algorithm {
            variant: VariantId::CBR,
            ..crate::newreno::ALGORITHM
        };
        assert_eq!(
            register(&SAME_NAME),
            Err(RegisterError::NameTaken("newreno"))
        );
        static SAME_ID: Algorithm = Algorithm {
            name: "mine",
            ..crate::cubic::ALGORITHM
        };
        assert_eq!(
            register(&SAME_ID),
            Err(RegisterError::VariantTaken {
                variant: VariantId::CUBIC,
                by: "cubic"
            })
        );
        static TAXED_ID: Algorithm = Algorithm {
            name: "mine",
            variant: VariantId::CUBIC.taxed(),
            ..crate::cubic::ALGORITHM
        };
        assert!(matches!(
            register(&TAXED_ID),
            Err(RegisterError::InvalidVariant(_))
        ));
        static UPPER: Algorithm = Algorithm {
            name: "Mine",
            ..crate::cubic::ALGORITHM
        };
        assert!(matches!(
            register(&UPPER),
            Err(RegisterError::InvalidName(_))
        ));
        assert!(find("mine").is_none());
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

//! Configuration parsers: `router.toml`, scenario TOML, CCA spec strings.

use tollgate_cca::{Env, SpecError};
use tollgate_dataplane::config::RouterConfig;
#[cfg(feature = "tools")]
use tollgate_tools::scenario::{parse_plan, ScenarioError};

use crate::l3::L3;

/// `router.toml` text through [`RouterConfig::parse`]. An error must say
/// something; an accepted configuration must build everything the router
/// builds from it before starting DPDK (classification rules, each port's
/// egress plan, the L3 tables).
pub fn router_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match RouterConfig::parse(text) {
        Err(e) => assert!(!e.to_string().trim().is_empty(), "empty error for {text:?}"),
        Ok(cfg) => {
            cfg.rules().expect("rules checked by parse");
            for p in &cfg.ports {
                p.egress.build(10e9).expect("egress checked by parse");
            }
            let macs = vec![[2, 0, 0, 0, 0, 1]; cfg.ports.len()];
            L3::new(&cfg, &macs).expect("L3 tables from a checked configuration");
        }
    }
}

#[cfg(feature = "tools")]
/// Scenario text through `tollgate`'s scenario parser (every sweep point
/// resolved). An error must say something; a field error must name the
/// field.
pub fn scenario_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = parse_plan(text) {
        let msg = format!("{e:#}");
        assert!(!msg.trim().is_empty(), "empty error for {text:?}");
        if let Some(f) = e.downcast_ref::<ScenarioError>() {
            assert!(
                !f.field.is_empty(),
                "a field error without its field: {msg}"
            );
            assert!(msg.contains(&f.field), "{msg} does not name {}", f.field);
        }
    }
}

/// A CCA spec string through the spec parser and the registry (what every
/// `--cca` flag and scenario `cca` key goes through). An error must name
/// the spec and the part that is wrong, and say what is wrong.
pub fn cca_spec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let check = |e: &SpecError| {
        assert_eq!(e.spec, text, "the error names another spec");
        assert!(!e.message.trim().is_empty(), "no message: {e:?}");
        let shown = e.to_string();
        assert!(shown.contains(&e.part), "{shown}");
    };
    if let Err(e) = tollgate_cca::spec::Spec::parse(text) {
        check(&e);
    }
    match tollgate_cca::build(text, &Env::with_mss(1200)) {
        Err(e) => check(&e),
        Ok(cca) => assert!(!cca.name().is_empty()),
    }
}

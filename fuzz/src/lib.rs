//! Fuzz targets for everything in Tollgate that reads untrusted bytes.
//!
//! Each target is a function taking `&[u8]` that panics when an invariant
//! breaks. The libFuzzer binaries in `fuzz_targets/` call them (feature
//! `libfuzzer`), and `tests/corpus.rs` replays every committed input under
//! `corpus/<target>/` through the same functions as an ordinary test.
//!
//! | target | what it drives |
//! |---|---|
//! | [`router_frames`] | frame parser, classification, one `Port` per discipline |
//! | [`l3_neighbours`] | the dataplane's L3 forwarding, ARP and ND |
//! | [`bulk_request`] | the bulk protocol's request and reply parsing |
//! | [`quic_endpoint`] | datagrams to a server `Endpoint` |
//! | [`router_toml`] | `router.toml` |
//! | [`scenario_toml`] | scenario files |
//! | [`cca_spec`] | CCA spec strings |
//! | [`results_json`] | `results.json` as `report` and `compare` read it |
//! | [`campaign_merge`] | a campaign directory as `campaign merge` reads it |
//! | [`reproduce_json`] | `reproduce.json` as `reproduce --values-from` reads it |

// The dataplane's L3 module is compiled only with its `dpdk` feature, but
// its logic is plain Rust over a `FrameBuf` trait: it is compiled here from
// its source, with the two crate-level modules it names.
#[allow(dead_code, missing_debug_implementations)]
mod mbuf {
    /// Stands in for the DPDK mbuf the L3 module implements `FrameBuf` for.
    pub struct Mbuf(Vec<u8>);

    impl Mbuf {
        pub fn data(&self) -> &[u8] {
            &self.0
        }
        pub fn data_mut(&mut self) -> &mut [u8] {
            &mut self.0
        }
        pub fn write_frame(&mut self, frame: &[u8]) -> bool {
            self.0.clear();
            self.0.extend_from_slice(frame);
            true
        }
    }
}

mod config {
    pub use tollgate_dataplane::config::*;
}

#[allow(clippy::all)]
#[path = "../../router/dataplane/src/l3.rs"]
pub mod l3;

mod input;
mod targets;

pub use input::Input;
#[cfg(feature = "transport")]
pub use targets::bulk::bulk_request;
#[cfg(feature = "tools")]
pub use targets::config::scenario_toml;
pub use targets::config::{cca_spec, router_toml};
#[cfg(feature = "tools")]
pub use targets::json::{campaign_merge, reproduce_json, results_json};
pub use targets::l3::l3_neighbours;
#[cfg(feature = "transport")]
pub use targets::quic::quic_endpoint;
pub use targets::router::router_frames;

/// A target: its name (of `fuzz_targets/<name>.rs` and `corpus/<name>/`)
/// and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target built with the enabled features.
pub fn targets() -> Vec<Target> {
    #[allow(unused_mut)] // Without `transport` and `tools`.
    let mut v: Vec<Target> = vec![
        ("router_frames", router_frames),
        ("l3_neighbours", l3_neighbours),
        ("router_toml", router_toml),
        ("cca_spec", cca_spec),
    ];
    #[cfg(feature = "transport")]
    v.extend([
        ("bulk_request", bulk_request as fn(&[u8])),
        ("quic_endpoint", quic_endpoint),
    ]);
    #[cfg(feature = "tools")]
    v.extend([
        ("scenario_toml", scenario_toml as fn(&[u8])),
        ("results_json", results_json),
        ("campaign_merge", campaign_merge),
        ("reproduce_json", reproduce_json),
    ]);
    v
}

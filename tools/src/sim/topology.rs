//! Building the emulated network from a scenario.
//!
//! **Dumbbell** (`hops = 1`) and **parking lot** (`hops = n`): routers
//! `R0 .. Rn` in a line, bottleneck link `h` from `R(h)` to `R(h+1)` in each
//! direction, each direction behind a router port running the scenario's
//! discipline. A flow crossing hops `a..=b` has its client attached to `Ra`
//! and its server to `R(b+1)` (swapped for reverse traffic) by its own access
//! links, one per direction. The client-side access links carry the flow's
//! own delay, `rtt / 2 - (b - a + 1) * bottleneck_delay`, so the flow's base
//! RTT is exactly the scenario's; the server side has zero delay.
//!
//! Every access link carries one flow in one direction and is fed by one
//! host or one router port, in the order its packets reach it: the engine
//! relies on that to cross access links without events.
//!
//! Addresses are labels: left-side hosts are `10.1.x.y`, right-side hosts
//! `10.2.x.y`; clients use port 5000, servers 443.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use tollgate_cca::rng::{self, Rng as _, SimRng};
use tollgate_cca::VariantId;
use tollgate_router::classify::{Prefix, Rule};
use tollgate_transport::PromptAcks;

use super::net::{Link, RouterPort};
use crate::scenario::{Draw, Scenario, PACKET_BYTES};

/// One flow as instantiated.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Index of its group.
    pub group: usize,
    /// Index within the group.
    pub index: u32,
    /// CCA spec.
    pub cca: String,
    /// Variant id.
    pub variant: VariantId,
    /// Base RTT, ns.
    pub rtt_ns: u64,
    /// Start, ns.
    pub start_ns: u64,
    /// Size in bytes (`None` = unbounded).
    pub size: Option<u64>,
    /// Client (data sender) address.
    pub client: SocketAddr,
    /// Server address.
    pub server: SocketAddr,
    /// Links from client to server.
    pub up_path: Vec<u32>,
    /// Links from server to client.
    pub down_path: Vec<u32>,
    /// DSCP marking.
    pub mark_dscp: bool,
    /// Whether it is a reverse-direction flow.
    pub reverse: bool,
    /// Whether it counts as long-lived (unbounded, fixed start) for fairness.
    pub long_lived: bool,
    /// Receiver ACK policy the sender requests.
    pub prompt_acks: PromptAcks,
    /// Fixed flow-control window, bytes (`None`: auto-tuned).
    pub window: Option<u64>,
}

/// The built network.
#[derive(Debug)]
pub struct Network {
    /// Every link.
    pub links: Vec<Link>,
    /// Every flow.
    pub flows: Vec<FlowSpec>,
    /// Links of the forward bottleneck ports, by hop.
    pub forward_ports: Vec<u32>,
    /// Links of the reverse bottleneck ports, by hop.
    pub reverse_ports: Vec<u32>,
    /// The flow hash seed used by every port.
    pub hash_seed: u64,
}

fn addr(left: bool, i: usize, port: u16) -> SocketAddr {
    let net = if left { 1 } else { 2 };
    let ip = Ipv4Addr::new(10, net, (i / 250) as u8, (i % 250) as u8 + 1);
    SocketAddr::new(IpAddr::V4(ip), port)
}

fn draw(rng: &mut SimRng, d: Draw) -> f64 {
    match d {
        Draw::Fixed(x) => x,
        Draw::Uniform(lo, hi) => lo + (hi - lo) * rng::uniform_f64(rng),
    }
}

/// Instantiate flows and links.
pub fn build(s: &Scenario) -> anyhow::Result<Network> {
    let mut rng = rng::seeded(s.seed ^ 0x5eed_f10e);
    let hash_seed = rng::seeded(s.seed ^ 0x4a54_0001).next_u64();
    let delay_ns = (s.bottleneck_delay_s * 1e9).round() as u64;
    let config = s
        .router
        .discipline_config
        .clone()
        .ok_or_else(|| anyhow::anyhow!("router configuration missing"))?;

    // Flows first (the classifier rules need their addresses).
    let mut flows = instantiate_flows(s, &mut rng);

    // Variant rules when the router is told each flow's variant by the scenario.
    let rules: Vec<Rule> = if s.router.classify == "scenario" {
        flows
            .iter()
            .map(|f| Rule {
                src: Prefix::new(f.client.ip(), 32),
                src_ports: Some((f.client.port(), f.client.port())),
                ..Rule::any(f.variant)
            })
            .collect()
    } else {
        Vec::new()
    };

    let mut links = Vec::new();
    let mut forward_ports = Vec::new();
    let mut reverse_ports = Vec::new();
    for h in 0..s.hops {
        for forward in [true, false] {
            let port = RouterPort::new(
                &config,
                s.bottleneck_rate_bps,
                rules.clone(),
                hash_seed,
                s.router.buffer_packets,
                forward,
            )
            .map_err(|e| anyhow::anyhow!("router: {e}"))?;
            let id = links.len() as u32;
            links.push(Link::port(s.bottleneck_rate_bps, delay_ns, port));
            let _ = h;
            if forward {
                forward_ports.push(id);
            } else {
                reverse_ports.push(id);
            }
        }
    }

    for (i, f) in flows.iter_mut().enumerate() {
        let g = &s.flows[f.group];
        let (a, b) = (g.hops.0 as usize, g.hops.1 as usize);
        let crossed = (b - a + 1) as u64;
        let access_ns = (f.rtt_ns / 2).saturating_sub(crossed * delay_ns);
        let uplink_rate = g.rate_cap_bps.unwrap_or(s.access_rate_bps);
        let uplink_limit = g
            .rate_cap_bps
            .map(|r| ((r * f.rtt_ns as f64 / 1e9 / 8.0) as u64).max(20 * PACKET_BYTES));
        let mut push = |l: Link| {
            links.push(l);
            (links.len() - 1) as u32
        };
        // Client-side links carry the flow's own delay.
        let c_up = push(Link::wire(uplink_rate, access_ns, uplink_limit));
        let c_down = push(Link::wire(s.access_rate_bps, access_ns, None));
        let s_up = push(Link::wire(s.access_rate_bps, 0, None));
        let s_down = push(Link::wire(s.access_rate_bps, 0, None));
        let fwd: Vec<u32> = (a..=b).map(|h| forward_ports[h]).collect();
        let rev: Vec<u32> = (a..=b).rev().map(|h| reverse_ports[h]).collect();
        let (to_server, to_client) = if f.reverse { (rev, fwd) } else { (fwd, rev) };
        f.up_path = std::iter::once(c_up)
            .chain(to_server)
            .chain(std::iter::once(s_down))
            .collect();
        f.down_path = std::iter::once(s_up)
            .chain(to_client)
            .chain(std::iter::once(c_down))
            .collect();
        let _ = i;
    }

    Ok(Network {
        links,
        flows,
        forward_ports,
        reverse_ports,
        hash_seed,
    })
}

/// The seed of flow `flow`'s congestion controller (`Env::seed` of
/// `tollgate-cca`), the same in `sim` and `load`.
pub fn cca_seed(scenario_seed: u64, flow: usize) -> u64 {
    stream_seed(scenario_seed ^ 0xcca5_eed0_0000_0000, flow)
}

/// Mix an index into a seed: a distinct random stream per host, link or
/// flow, whatever the order in which they draw.
pub fn stream_seed(seed: u64, index: usize) -> u64 {
    seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Every flow of the scenario with its start, size and addresses drawn, in
/// group order. `tollgate load` uses the same draws (same seed, same starts
/// and sizes) as the emulator.
pub fn flows(s: &Scenario) -> Vec<FlowSpec> {
    instantiate_flows(s, &mut rng::seeded(s.seed ^ 0x5eed_f10e))
}

fn instantiate_flows(s: &Scenario, rng: &mut SimRng) -> Vec<FlowSpec> {
    let mut flows = Vec::new();
    for (gi, g) in s.flows.iter().enumerate() {
        let mut arrival = 0.0;
        for k in 0..g.count {
            let i = flows.len();
            let start = match g.interarrival_s {
                Some(mean) => {
                    let base = draw(rng, g.start_s[0]);
                    if k > 0 {
                        let u = rng::uniform_f64(rng).max(1e-12);
                        arrival += -mean * u.ln();
                    }
                    base + arrival
                }
                None => draw(rng, g.start_s[k as usize]),
            };
            let size = g.size_bytes.map(|d| draw(rng, d).round().max(1.0) as u64);
            let (client, server) = if g.reverse {
                (addr(false, i, 5000), addr(true, i, 443))
            } else {
                (addr(true, i, 5000), addr(false, i, 443))
            };
            flows.push(FlowSpec {
                group: gi,
                index: k,
                cca: g.cca.clone(),
                variant: VariantId::from_dscp(g.variant).unwrap_or(VariantId::UNMARKED),
                rtt_ns: (g.rtt_s[k as usize] * 1e9).round() as u64,
                start_ns: (start * 1e9).round() as u64,
                size,
                client,
                server,
                up_path: Vec::new(),
                down_path: Vec::new(),
                mark_dscp: g.mark_dscp,
                reverse: g.reverse,
                long_lived: size.is_none() && g.interarrival_s.is_none(),
                prompt_acks: match g.prompt_acks.as_str() {
                    "always" => PromptAcks::Always,
                    "never" => PromptAcks::Never,
                    _ => PromptAcks::Auto,
                },
                window: g.window_bytes,
            });
        }
    }
    flows
}

//! Splitting the emulated network into logical processes that can run on
//! separate threads without changing any result.
//!
//! A **logical process** (LP) owns some hosts and router ports, the access
//! links they feed, and its own event queue. Two LPs interact only through
//! packets, and a packet one LP sends reaches another no sooner than the
//! propagation delay between them. If every such delay is at least `L` (the
//! **lookahead**), the events of every LP in a window `[T, T + L)` depend
//! only on events before `T`: the LPs can run the window in any order, or at
//! once on several threads, and exchange the packets they sent at its end
//! (conservative synchronisation with a fixed lookahead, as in YAWNS or
//! ns-3's distributed simulator).
//!
//! The partition depends on the topology alone, never on the thread count,
//! so a run's results are the same for any number of threads:
//!
//! 1. Nodes are hosts and router ports. Walking each flow's paths gives the
//!    edges between consecutive nodes, weighted by the propagation delay of
//!    the links between them (a port's own link is crossed after it).
//! 2. Nodes joined by an edge shorter than [`MIN_LOOKAHEAD_NS`] share an LP
//!    (union-find): in a dumbbell, each server host joins the reverse port it
//!    sends into over its zero-delay link.
//! 3. With more than [`MAX_LPS`] groups, groups are merged round-robin.
//! 4. The lookahead is the shortest edge between different LPs.
//!
//! A dumbbell of `n` forward flows gives `n` client LPs (their access delay
//! is the lookahead towards the forward port), one LP for the forward port
//! and one for the servers with the reverse port.

use super::net::{Link, LinkQueue};
use super::topology::FlowSpec;

/// Edges shorter than this join their nodes into one LP: a shorter window
/// would cost more in synchronisation than it gains.
pub const MIN_LOOKAHEAD_NS: u64 = 200_000;

/// At most this many LPs (more only add exchange work; the threads are
/// fewer).
pub const MAX_LPS: usize = 32;

/// Which LP owns what.
#[derive(Clone, Debug)]
pub struct Partition {
    /// Number of LPs.
    pub lps: usize,
    /// LP of each host (`2 * flow` is the flow's client, `2 * flow + 1` its server).
    pub host_lp: Vec<u32>,
    /// LP owning each link: a router port's LP, or the LP of the node that
    /// feeds an access link.
    pub link_lp: Vec<u32>,
    /// The shortest delay between two LPs, ns (`u64::MAX` with one LP).
    pub lookahead_ns: u64,
    /// Nodes per LP (hosts and ports), a rough measure of each one's work.
    pub weight: Vec<u32>,
}

struct UnionFind(Vec<usize>);

impl UnionFind {
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        // The smaller root wins, so the result does not depend on the order.
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        self.0[hi] = lo;
    }
}

/// Partition a network of `flows` over `links`.
pub fn build(flows: &[FlowSpec], links: &[Link]) -> Partition {
    let nhosts = 2 * flows.len();
    // Node ids: hosts, then one per link (used for router ports only).
    let port_node = |l: u32| nhosts + l as usize;
    let is_port = |l: u32| matches!(links[l as usize].queue, LinkQueue::Port(_));
    let mut edges: Vec<(usize, usize, u64)> = Vec::new();
    // The node feeding each access link.
    let mut feeder: Vec<Option<usize>> = vec![None; links.len()];
    let mut extra_unions = Vec::new();
    for (f, spec) in flows.iter().enumerate() {
        for (path, src, dst) in [
            (&spec.up_path, 2 * f, 2 * f + 1),
            (&spec.down_path, 2 * f + 1, 2 * f),
        ] {
            let mut from = src;
            let mut acc = 0u64;
            for &l in path {
                if is_port(l) {
                    edges.push((from, port_node(l), acc));
                    from = port_node(l);
                    acc = links[l as usize].delay_ns;
                } else {
                    match feeder[l as usize] {
                        Some(n) if n != from => extra_unions.push((n, from)),
                        _ => feeder[l as usize] = Some(from),
                    }
                    acc += links[l as usize].delay_ns;
                }
            }
            edges.push((from, dst, acc));
        }
    }
    let nnodes = nhosts + links.len();
    let mut uf = UnionFind((0..nnodes).collect());
    for &(a, b) in &extra_unions {
        uf.union(a, b);
    }
    for &(a, b, d) in &edges {
        if d < MIN_LOOKAHEAD_NS {
            uf.union(a, b);
        }
    }
    // Number the groups that contain a node in use, in order of their root.
    let used = |n: usize| n < nhosts || is_port((n - nhosts) as u32);
    let mut group_of_root = vec![usize::MAX; nnodes];
    let mut groups = 0;
    for n in (0..nnodes).filter(|&n| used(n)) {
        let r = uf.find(n);
        if group_of_root[r] == usize::MAX {
            group_of_root[r] = groups;
            groups += 1;
        }
    }
    let lps = groups.clamp(1, MAX_LPS);
    let mut lp_of = |n: usize| (group_of_root[uf.find(n)] % lps) as u32;
    let host_lp: Vec<u32> = (0..nhosts).map(&mut lp_of).collect();
    let mut link_lp = vec![0u32; links.len()];
    for l in 0..links.len() {
        link_lp[l] = if is_port(l as u32) {
            lp_of(port_node(l as u32))
        } else {
            feeder[l].map_or(0, &mut lp_of)
        };
    }
    let mut lookahead_ns = u64::MAX;
    for &(a, b, d) in &edges {
        if lp_of(a) != lp_of(b) {
            lookahead_ns = lookahead_ns.min(d);
        }
    }
    let mut weight = vec![0u32; lps];
    for n in (0..nnodes).filter(|&n| used(n)) {
        weight[lp_of(n) as usize] += 1;
    }
    Partition {
        lps,
        host_lp,
        link_lp,
        lookahead_ns,
        weight,
    }
}

//! # tollgate-router
//!
//! Packet handling and the fairness-enforcing queue disciplines, as a plain
//! Rust library shared by the DPDK dataplane and the virtual-time emulator.
//! No DPDK here, no clock reads, no threads: every call carries `now`
//! ([`tollgate_cca::Time`]), all randomness comes from seeded generators
//! ([`tollgate_cca::rng::SimRng`], one per discipline), and
//! every queue and per-flow table has a capacity fixed at construction.
//!
//! A router port is `classify -> delay -> discipline -> shaper -> TX`
//! ([`port::Port`]). Disciplines implement [`qdisc::Qdisc`] over any packet
//! handle implementing [`qdisc::PacketHandle`] (an mbuf wrapper in the
//! dataplane, [`qdisc::PacketMeta`] or [`qdisc::Frame`] in the emulator).
//!
//! | module | what | source |
//! |---|---|---|
//! | [`packet`] | Ethernet/802.1Q/IPv4/IPv6/UDP/TCP parsing, ECN marking | RFC 791, 8200, 768, 9293, 3168 |
//! | [`flow`] | seeded 5-tuple hash; [`flow::mix64`] hash mixer | SplitMix64 finaliser (Steele, Lea & Flood 2014) |
//! | [`classify`] | variant from rules or DSCP | |
//! | [`qdisc`] | discipline and packet-handle traits, verdicts, counters, config errors | |
//! | [`ring`] | fixed-capacity FIFO and CHOKe's ring with holes | Linux `sch_choke` |
//! | [`droptail`] | DropTail (packets, bytes, fraction of BDP) | |
//! | [`red`] | RED, gentle, Adaptive RED, byte mode, ECN | Floyd & Jacobson 1993; Floyd, Gummadi & Shenker 2001 |
//! | [`choke`] | CHOKe | Pan, Prabhakar & Psounis 2000 |
//! | [`cebinae`] | Cebinae tax with head/tail rotation and top-flow detector | Yu et al., SIGCOMM 2022 |
//! | [`rrmqs`] | RRMQS, flow meter | He, ETH thesis 2020 |
//! | [`codel`] | CoDel: the per-queue control law, and a FIFO with CoDel | RFC 8289 |
//! | [`fq_codel`] | FQ-CoDel: flow queues, DRR over new and old flows, CoDel per queue | RFC 8290 |
//! | [`dualpi2`] | DualPI2: L4S and Classic queues, coupled PI2, step marking, time-shifted FIFO | RFC 9332 |
//! | [`rrmqs_feedback`] | RRMQS's feedback loop: the thesis's drop rule and a converging delay rule | He, ETH thesis 2020 |
//! | [`bloom`] | Bloom filter (distinct-flow counting) | Kirsch & Mitzenmacher 2006 |
//! | [`shaper`] | token-bucket egress shaper | |
//! | [`delay`] | delay line per port / flow class | |
//! | [`port`] | the port pipeline | |
//! | [`discipline_config`] | the discipline configuration: one TOML shape (`discipline = "red"` plus its keys) for every front end | `router/README.md` |
//! | [`any_qdisc`] | every discipline in one enum, static dispatch | |
//!
//! Parameters, defaults and sources of every discipline: `router/README.md`.

pub mod any_qdisc;
pub mod bloom;
pub mod cebinae;
pub mod choke;
pub mod classify;
pub mod codel;
pub mod delay;
pub mod discipline_config;
pub mod droptail;
pub mod dualpi2;
pub mod flow;
pub mod fq;
pub mod fq_codel;
pub mod packet;
pub mod port;
pub mod qdisc;
pub mod red;
pub mod ring;
pub mod rrmqs;
pub mod rrmqs_feedback;
pub mod shaper;

pub use any_qdisc::AnyQdisc;
pub use discipline_config::{Context, DisciplineConfig, DisciplineKeys};
pub use qdisc::{
    ConfigError, Counters, DropReason, PacketHandle, PacketMeta, Qdisc, Verdict, WithMeta,
};

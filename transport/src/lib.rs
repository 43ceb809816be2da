//! # tollgate-transport
//!
//! The QUIC transport applications link: quinn-proto's state machine with
//! Tollgate's congestion controllers, DSCP variant marking, CCA pacing and
//! per-connection statistics, in layers:
//!
//! | module | role |
//! |---|---|
//! | [`adapter`] | any `tollgate-cca` algorithm as quinn-proto's `congestion::Controller` |
//! | [`endpoint`] | **sans-IO core**: datagrams and explicit `now` in, datagrams and timeouts out |
//! | [`pacing`] | token bucket honouring a CCA's own pacing rate |
//! | [`window`] | flow-control windows: receive-window auto-tuning, a send buffer that follows the congestion window |
//! | [`stats`] | goodput/cwnd/RTT time series, RTT histogram, endpoint counters |
//! | [`bulk`] | bulk-transfer protocol and the client/server apps |
//! | [`udp`] | `sendmmsg`/`recvmmsg` with per-datagram TOS (DSCP + ECN), GSO, GRO and kernel receive timestamps |
//! | [`driver`] | the mio event loop ([`Driver`]: one thread, one socket, one endpoint) and the per-endpoint loop logic it shares with [`pool`] |
//! | [`pool`] | [`Pool`]: many endpoints, each on its own socket with its own app and start instant, in one loop per thread (the load generator's workers) |
//! | [`impair`] | loss/reordering socket wrapper for tests |
//! | [`tls`] | rustls (ring) configs, self-signed certificates, PEM loading |
//! | [`logging`] | the binaries' stderr log subscriber (`RUST_LOG` or `-v`) |
//! | `quiche_peer` | feature `quiche`: quiche client and server speaking the bulk protocol, the reference peer |
//!
//! Only [`driver`] (and so [`pool`]) reads the clock. The emulator drives
//! [`Endpoint`] (and any [`driver::App`]) with virtual `Instant`s instead.
//!
//! ## Libra, CapProbe and per-packet ACK timing
//!
//! CapProbe needs the ACK arrival time of each packet of a back-to-back pair.
//! QUIC receivers normally acknowledge every second packet (or after
//! `max_ack_delay`), which merges the pair into one ACK frame: zero dispersion,
//! no estimate. For connections whose CCA spec names `libra`
//! ([`PromptAcks::Auto`]), Tollgate asks the peer through the ACK-frequency
//! extension (draft-ietf-quic-ack-frequency, supported by quinn-proto on both
//! sides) for `ack_eliciting_threshold = 0`: one immediate ACK per
//! ack-eliciting packet. The mio driver stamps every received datagram with the
//! kernel's receive timestamp (`SO_TIMESTAMPNS`, carried over to `Instant`),
//! so the two ACKs of a pair reach the CCA with distinct `now`s even when one
//! `recvmmsg` returns both, and [`adapter`] recovers which datagram each ACK
//! is for from its send time.
//!
//! **Cost.** The receiver sends one ACK per data packet instead of one per
//! two: about twice the ACK packets (≈ 50 bytes each, ~4 % of the data volume
//! instead of ~2 %) and twice the ACK processing on both hosts. Dispersion is
//! measured from ACK arrivals at the sender, so the return path's queueing and
//! the receiver's scheduling add noise; CapProbe's minimum-delay-sum filter
//! rejects most of it.
//!
//! **When it is not available.** A peer without the extension (quiche, most
//! TCP-style stacks) keeps its ACK policy; pairs then mostly share an ACK and
//! are discarded, and Libra falls back to its delivery-rate estimate and
//! reports that as its capacity source in [`adapter::CcaSnapshot::stats`].
//! The per-ACK `now` in the mio driver is the kernel's receive timestamp, but
//! never earlier than the `now` the endpoint was last given (time only moves
//! forward): an ACK that waited in the socket while the sender was busy
//! sending gets that later time, so a busy sender still adds jitter.
//!
//! **Patched quinn-proto.** quinn-proto 0.11.19 as released never sends a lost
//! ACK_FREQUENCY frame again, so a peer that missed it kept ACKing every
//! second packet for the whole connection, silently. The workspace builds a
//! vendored copy with a one-line fix (`[patch.crates-io]` in the root
//! `Cargo.toml`); `vendor/README.md` in this crate says why, what the diff is
//! and when to drop it.
//!
//! ## Pacing
//!
//! quinn-proto paces every connection from window and RTT. When the CCA
//! reports a pacing rate, [`Endpoint::poll_transmit`] additionally holds the
//! connection to that rate ([`pacing::RatePacer`]); GSO batching is disabled
//! for such connections so a batch cannot overrun the bucket.
//!
//! ## Speed
//!
//! The I/O path per loop wake-up: `recvmmsg` of up to 16 messages, each
//! possibly a GRO batch of up to 64 datagrams, copied once and split into
//! datagrams without further copies ([`Endpoint::handle_datagram_owned`]);
//! `sendmmsg` of up to 32 transmits, each a GSO batch of up to 40 datagrams
//! with its own TOS byte (so DSCP marking survives batching); precise
//! `timerfd` wake-ups. [`Endpoint::write_bytes`] queues stream data without
//! copying it. The hand-written [`udp`] layer explains why quinn-udp is not
//! used (its send path would erase per-connection DSCP).
//!
//! Loopback, one 2-core VM shared with other builds (so every figure is a
//! ratio against the baseline measured in the same run; two repetitions show
//! the spread), NewReno, 300 MB per run, median of 3 rounds, "per core" =
//! bits moved per CPU-second of both ends together:
//!
//! ```text
//! cargo bench -p tollgate-transport --bench goodput -- 300000000 3
//! ```
//!
//! | | Tollgate / quinn goodput | Tollgate / quinn per core | Tollgate Gbit/s per core |
//! |---|---|---|---|
//! | before (one `sendmsg` per GSO batch of 10, one `recvmsg` per datagram), 1 connection | 0.69, 0.68 | 0.72, 0.56 | 2.32, 1.85 |
//! | after, 1 connection | 0.93, 1.05 | 0.92, 0.96 | 4.00, 4.76 |
//! | after, 8 connections ([`Pool`] client, one server thread) | 0.57, 0.92 | 0.75, 0.92 | 3.30, 3.81 |
//!
//! Kernel TCP (`iperf3`, same runs) moves 12-21 Gbit/s per core, 4-5× any
//! of the QUIC stacks: QUIC pays for encryption, per-packet ACK processing
//! and stream reassembly in user space, where TCP on loopback does neither
//! of the first two. Kernel time fell from 45 % of Tollgate's CPU to 21 %;
//! what remains is quinn-proto (AES-GCM, frame building, ACK handling) and
//! copies: the bulk sender still copies each byte into the stream
//! (`Endpoint::write`); writing the pattern with `write_bytes` instead adds
//! a further 10-30 % per core in the same measurements. Projection: at 4-5
//! Gbit/s per CPU-second of both ends, 10 Gbit/s costs 2-2.5 cores in all,
//! about 60 % of it on the sender: well within 4 cores per end, provided
//! the flows spread over worker threads (one [`Pool`] or [`Driver`] per
//! thread). One connection stays on one thread per end, so a single flow
//! tops out at what one sending core does (5-7 Gbit/s here).
//!
//! ## DSCP marking
//!
//! With [`ConnectionOptions::mark_dscp`], every datagram of the connection
//! carries the CCA's [`VariantId`](tollgate_cca::VariantId) as DSCP (upper six
//! bits of IPv4 TOS / IPv6 traffic class), set per datagram through an
//! `IP_TOS` / `IPV6_TCLASS` control message next to quinn-proto's ECN bits.
//! Receivers record the DSCP of each peer's datagrams ([`ConnReport::peer_dscp`]).
//!
//! ## Certificates
//!
//! [`tls::SelfSigned`] for tests and examples; [`tls::server_crypto_from_pem`]
//! and [`tls::client_crypto_with_roots_pem`] for real certificates.
//!
//! ## quiche as reference peer (feature `quiche`)
//!
//! With `--features quiche`, the `quiche_peer` module runs Cloudflare's quiche
//! (0.30) as an independent peer speaking Tollgate's bulk protocol: a client
//! (`quiche_peer::run_client`) and a multi-connection server
//! (`quiche_peer::QuicheServer`), each on its own thread with a hard time
//! limit, both verifying every byte against the bulk pattern. quiche's own
//! congestion control (Reno, CUBIC, BBRv2) sends whatever it sends, so the
//! same module serves "legacy" flows in mixed-variant experiments. The quiche
//! client does not verify server certificates (test peer, self-signed
//! certificates on loopback); the server presents a [`tls::SelfSigned`]
//! certificate, written to a private temporary directory only while quiche
//! loads it.
//!
//! ```text
//! apt-get install cmake build-essential libclang-dev   # Debian 12
//! cargo test -p tollgate-transport --features quiche   # includes tests/quiche_interop.rs
//! ```
//!
//! The feature is off by default: quiche vendors BoringSSL, which its build
//! compiles with cmake and binds with bindgen (libclang); without the feature
//! none of that is in the dependency graph. `tests/quiche_interop.rs` runs a
//! quiche client against a Tollgate server and a Tollgate client against a
//! quiche server (both directions) for newreno, cubic, libra and taxed(cubic).
//! quiche lacks the ACK-frequency extension, so Libra against quiche takes its
//! capacity from the delivery rate (see above).

pub mod adapter;
pub mod bulk;
pub mod driver;
pub mod endpoint;
pub mod impair;
pub mod logging;
pub mod pacing;
pub mod pool;
#[cfg(feature = "quiche")]
pub mod quiche_peer;
pub mod stats;
pub mod tls;
pub mod udp;
pub mod window;

pub use driver::{App, Driver};
pub use endpoint::{
    CloseReason, ConnectError, ConnectionOptions, Endpoint, EndpointOptions, Event, PromptAcks,
    ReadStatus, SetCcaError, StreamError, Transmit,
};
pub use pool::Pool;
pub use quinn_proto::{ConnectionHandle, Dir, Side, StreamId};
pub use stats::{ConnReport, EndpointStats, Sample};

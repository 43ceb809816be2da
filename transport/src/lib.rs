//! # tollgate-transport
//!
//! A userspace QUIC library: quinn-proto's protocol state machine driven by
//! any congestion controller of [`tollgate_cca`] (NewReno, CUBIC, BBR, Libra,
//! the taxed wrapper and more, or one of your own), with per-connection DSCP
//! marking, CCA pacing, per-connection statistics and a batched UDP I/O path
//! (`sendmmsg`/`recvmmsg`, GSO, GRO, kernel receive timestamps). Tollgate's
//! load generator and emulator run on it.
//!
//! | module | role |
//! |---|---|
//! | [`endpoint`] | **sans-IO core** ([`Endpoint`]): datagrams and explicit `now` in, datagrams and timeouts out |
//! | [`driver`] | the mio event loop ([`Driver`]: one thread, one socket, one endpoint) and the [`App`] trait it runs |
//! | [`pool`] | [`Pool`]: many endpoints, each on its own socket with its own app and start instant, in one loop per thread |
//! | [`bulk`] | bulk-transfer protocol and its client/server apps ([`bulk::BulkClient`], [`bulk::BulkServer`]) |
//! | [`stats`] | per-connection goodput/cwnd/RTT time series, RTT histogram, endpoint counters |
//! | [`adapter`] | any `tollgate-cca` algorithm as quinn-proto's `congestion::Controller` |
//! | [`pacing`] | token bucket honouring a CCA's own pacing rate |
//! | [`window`] | flow-control windows: receive-window auto-tuning, a send buffer that follows the congestion window |
//! | [`udp`] | `sendmmsg`/`recvmmsg` with per-datagram TOS (DSCP + ECN), GSO, GRO and kernel receive timestamps |
//! | [`tls`] | rustls (ring) configs, self-signed certificates, PEM loading |
//! | [`impair`] | loss/reordering socket wrapper for tests |
//! | [`logging`] | the binaries' stderr log subscriber (`RUST_LOG` or `-v`) |
//! | `quiche_peer` | feature `quiche`: quiche client and server speaking the bulk protocol, the reference peer |
//!
//! Only [`driver`] (and so [`pool`]) reads the clock. Tollgate's emulator
//! drives [`Endpoint`] (and any [`App`]) with virtual `Instant`s instead.
//!
//! ## A client and a server
//!
//! A server on a loopback port sends with CUBIC and marks its datagrams with
//! CUBIC's variant id as DSCP; a client downloads 1 MB from it, then both
//! sides' per-connection statistics are read. [`driver::spawn`] runs the
//! server's loop on its own thread; [`Driver::run`] runs the client's on this
//! one until the transfer is over.
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//!
//! use tollgate_cca::VariantId;
//! use tollgate_transport::bulk::{BulkClient, BulkServer, Mode, Request};
//! use tollgate_transport::tls::SelfSigned;
//! use tollgate_transport::{driver, ConnectionOptions, Driver, EndpointOptions};
//!
//! let certs = SelfSigned::generate(&["localhost"])?;
//!
//! // Server: every connection starts with CUBIC and marks DSCP.
//! let mut server = Driver::bind("127.0.0.1:0".parse()?, EndpointOptions::default())?;
//! let defaults = ConnectionOptions {
//!     mark_dscp: true,
//!     ..ConnectionOptions::with_cca("cubic")
//! };
//! server.endpoint().set_server(certs.server_crypto()?, defaults)?;
//! let addr = server.local_addr()?;
//! let app = BulkServer::new();
//! let shutdown = app.shutdown_flag();
//! let server = driver::spawn(server, app, Arc::new(AtomicBool::new(false)));
//!
//! // Client: download 1 MB; its own datagrams (ACKs) go out with NewReno's DSCP.
//! let mut client = Driver::bind("127.0.0.1:0".parse()?, EndpointOptions::default())?;
//! client.endpoint().set_client(certs.client_crypto()?);
//! let request = Request { mode: Mode::Download, size: Some(1_000_000), duration: None };
//! let options = ConnectionOptions {
//!     mark_dscp: true,
//!     ..ConnectionOptions::with_cca("newreno")
//! };
//! let mut download = BulkClient::new(addr, "localhost", request, options);
//! client.run(&mut download, &AtomicBool::new(false))?;
//!
//! let result = &download.result;
//! assert!(result.complete && result.mismatches == 0);
//! let mbps = result.goodput_bps() / 1e6;
//! println!("{} bytes in {:?}: {mbps:.0} Mbit/s", result.bytes, result.elapsed);
//!
//! // The receiver's view: what the sender's datagrams carried.
//! let client_view = result.report.as_ref().expect("final statistics");
//! assert_eq!(client_view.dscp_marking, Some(VariantId::NEWRENO.dscp()));
//! assert_eq!(client_view.peer_dscp_seen()[0].0, VariantId::CUBIC.dscp());
//!
//! // The sender's view, once the server has drained the connection.
//! shutdown.store(true, Ordering::Relaxed);
//! let (_server, app) = server.join().expect("server thread")?;
//! let sent = &app.summary.reports[0];
//! assert_eq!(sent.cca.spec, "cubic");
//! println!(
//!     "cwnd {} bytes, RTT p50 {:?} p99 {:?}, {} packets lost, {} samples",
//!     sent.cca.stats.window,
//!     sent.rtt_quantile(0.5),
//!     sent.rtt_quantile(0.99),
//!     sent.quic.path.lost_packets,
//!     sent.samples.len(),
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`ConnectionOptions`] chooses per connection: the CCA as a registry spec
//! (`"bbr"`, `"cubic(beta=0.8)"`, `"taxed(cubic, tau=0.02)"`; `tollgate cca
//! list` shows every name and parameter), DSCP marking, the statistics
//! interval, prompt ACKs, the flow-control windows, the idle timeout and the
//! host's link rate. A server's defaults apply to every connection it accepts;
//! [`Endpoint::set_cca`] switches one before it sends data, as
//! [`bulk::BulkServer`] does when a client asks for a CCA
//! ([`bulk::BulkClient::with_server_cca`]).
//!
//! Statistics: [`Endpoint::stats`] returns a live connection's [`ConnReport`]
//! at any time (from an [`App`], or [`Driver::endpoint`] between runs), and
//! [`Event::Drained`] carries the final one. It holds the time series
//! ([`Sample`]: goodput in bit/s, cwnd and bytes in flight in bytes, smoothed
//! RTT, losses), the per-packet RTT histogram in microseconds, the CCA's own
//! statistics ([`adapter::CcaSnapshot`]), quinn-proto's counters and the DSCP
//! codepoints seen from the peer. [`Endpoint::endpoint_stats`] and
//! [`Driver::stats`] count per endpoint and per socket.
//!
//! ## Your own application
//!
//! An [`App`] reacts to the endpoint's [`Event`]s and calls the endpoint's
//! stream API ([`Endpoint::open`], [`write`](Endpoint::write),
//! [`finish`](Endpoint::finish), [`read`](Endpoint::read),
//! [`close`](Endpoint::close)). Here a server answers each question in capital
//! letters, and three clients, each with its own CCA and socket, ask theirs
//! from one [`Pool`] on one thread, starting 5 ms apart:
//!
//! ```
//! use std::collections::HashMap;
//! use std::net::SocketAddr;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//!
//! use tollgate_transport::driver::{self, UdpIo};
//! use tollgate_transport::tls::SelfSigned;
//! use tollgate_transport::{
//!     App, ConnectionHandle, ConnectionOptions, Dir, Driver, Endpoint, EndpointOptions, Event,
//!     Pool, StreamId,
//! };
//!
//! /// Reads each stream a client opens to its end and answers on the same stream.
//! #[derive(Default)]
//! struct Shout {
//!     questions: HashMap<(ConnectionHandle, StreamId), Vec<u8>>,
//!     answered: usize,
//! }
//!
//! impl App for Shout {
//!     fn on_event(&mut self, _now: Instant, ep: &mut Endpoint, event: Event) {
//!         // A peer's new stream comes as `StreamOpened` with its first data,
//!         // more data as `Readable`.
//!         let (Event::StreamOpened(conn, stream) | Event::Readable(conn, stream)) = event else {
//!             return;
//!         };
//!         let question = self.questions.entry((conn, stream)).or_default();
//!         let read = ep.read(conn, stream, usize::MAX, |_offset, data| {
//!             question.extend_from_slice(data)
//!         });
//!         if read.is_ok_and(|r| r.finished) {
//!             let answer = self.questions.remove(&(conn, stream)).unwrap().to_ascii_uppercase();
//!             // A short answer fits the initial windows; a longer one would
//!             // keep what `write` did not take and write it on `Event::Writable`.
//!             assert_eq!(ep.write(conn, stream, &answer), Ok(answer.len()));
//!             ep.finish(conn, stream).ok();
//!             self.answered += 1;
//!         }
//!     }
//!     fn is_done(&self) -> bool {
//!         false // serves until stopped
//!     }
//! }
//!
//! /// Connects, asks one question, waits for the answer, closes.
//! struct Ask {
//!     server: SocketAddr,
//!     cca: &'static str,
//!     question: &'static [u8],
//!     answer: Vec<u8>,
//!     conn: Option<ConnectionHandle>,
//!     closed: bool,
//! }
//!
//! impl App for Ask {
//!     fn start(&mut self, now: Instant, ep: &mut Endpoint) {
//!         let options = ConnectionOptions::with_cca(self.cca);
//!         self.conn = ep.connect(now, self.server, "localhost", options).ok();
//!         self.closed = self.conn.is_none();
//!     }
//!     fn on_event(&mut self, now: Instant, ep: &mut Endpoint, event: Event) {
//!         match event {
//!             Event::Connected(conn) => {
//!                 let stream = ep.open(conn, Dir::Bi).unwrap().expect("a stream is allowed");
//!                 assert_eq!(ep.write(conn, stream, self.question), Ok(self.question.len()));
//!                 ep.finish(conn, stream).unwrap();
//!             }
//!             Event::Readable(conn, stream) => {
//!                 let answer = &mut self.answer;
//!                 let read = ep.read(conn, stream, usize::MAX, |_offset, data| {
//!                     answer.extend_from_slice(data)
//!                 });
//!                 if read.is_ok_and(|r| r.finished) {
//!                     ep.close(now, conn, 0, b"thanks");
//!                 }
//!             }
//!             Event::Closed(..) => self.closed = true,
//!             _ => {}
//!         }
//!     }
//!     fn is_done(&self) -> bool {
//!         self.closed
//!     }
//! }
//!
//! let certs = SelfSigned::generate(&["localhost"])?;
//! let mut server = Driver::bind("127.0.0.1:0".parse()?, EndpointOptions::default())?;
//! server.endpoint().set_server(certs.server_crypto()?, ConnectionOptions::default())?;
//! let server_addr = server.local_addr()?;
//! let stop_server = Arc::new(AtomicBool::new(false));
//! let server = driver::spawn(server, Shout::default(), stop_server.clone());
//!
//! let mut pool = Pool::new()?;
//! let t0 = Instant::now();
//! let questions: [(&str, &[u8]); 3] =
//!     [("newreno", b"hello"), ("cubic", b"fair?"), ("bbr", b"quic")];
//! for (k, (cca, question)) in questions.into_iter().enumerate() {
//!     let app = Ask {
//!         server: server_addr,
//!         cca,
//!         question,
//!         answer: Vec::new(),
//!         conn: None,
//!         closed: false,
//!     };
//!     let crypto = certs.client_crypto()?;
//!     pool.add(
//!         UdpIo::bind("127.0.0.1:0".parse()?)?,
//!         EndpointOptions::default(),
//!         |ep| ep.set_client(crypto),
//!         app,
//!         t0 + Duration::from_millis(5 * k as u64),
//!     )?;
//! }
//! pool.run(&AtomicBool::new(false))?;
//! let answers: Vec<Vec<u8>> = pool.into_apps().into_iter().map(|a| a.answer).collect();
//! assert_eq!(answers, [b"HELLO".to_vec(), b"FAIR?".to_vec(), b"QUIC".to_vec()]);
//!
//! stop_server.store(true, Ordering::Relaxed);
//! let (_, shout) = server.join().expect("server thread")?;
//! assert_eq!(shout.answered, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Driver::run`] and [`Pool::run`] return once every app is done
//! ([`App::is_done`]) and nothing is left to send, or when the stop flag is
//! set. [`App::poll`] runs after every batch of events (to write more data),
//! [`App::poll_timeout`] adds a deadline of the app's own. The same app runs
//! unchanged on one [`Driver`], in a [`Pool`] of many, or in Tollgate's
//! emulator in virtual time.
//!
//! ## Your own congestion controller
//!
//! Implement [`tollgate_cca::CongestionControl`], describe it in a
//! [`tollgate_cca::registry::Algorithm`] entry (name, variant id, parameters,
//! builder) and [`register`](tollgate_cca::registry::register) it: every
//! spec string then accepts its name, with parameters, alone or inside
//! `taxed(...)`. The variant id is what [`ConnectionOptions::mark_dscp`] puts
//! in the DSCP field: take a base id (`1..=31`) that no built-in algorithm
//! uses (`1..=18` are taken).
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//!
//! use tollgate_cca::registry::{self, Algorithm, Env};
//! use tollgate_cca::spec::{Kind, Param};
//! use tollgate_cca::{Ack, CongestionControl, CongestionEvent, Time, VariantId};
//! use tollgate_transport::bulk::{BulkClient, BulkServer, Mode, Request};
//! use tollgate_transport::tls::SelfSigned;
//! use tollgate_transport::{driver, ConnectionOptions, Driver, EndpointOptions};
//!
//! /// A constant window that ignores losses: the smallest complete controller.
//! #[derive(Clone, Debug)]
//! struct FixedWindow {
//!     window: u64,
//! }
//!
//! const FIXED_WINDOW_ID: VariantId = match VariantId::from_dscp(30) {
//!     Some(id) => id,
//!     None => panic!("DSCP has six bits"),
//! };
//!
//! impl CongestionControl for FixedWindow {
//!     fn name(&self) -> &'static str {
//!         "fixedwindow"
//!     }
//!     fn variant(&self) -> VariantId {
//!         FIXED_WINDOW_ID
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
//! static FIXED_WINDOW: Algorithm = Algorithm {
//!     name: "fixedwindow",
//!     variant: FIXED_WINDOW_ID,
//!     summary: "a constant window of `segments` datagrams, losses ignored",
//!     source: "example",
//!     takes_base: false,
//!     params: &[Param {
//!         name: "segments",
//!         kind: Kind::Int { min: 2, max: 100_000 },
//!         default: "40",
//!         help: "window in datagrams",
//!     }],
//!     build: |args, _base, env: &Env| {
//!         Ok(Box::new(FixedWindow { window: args.int("segments")? * env.mss }))
//!     },
//! };
//!
//! registry::register(&FIXED_WINDOW)?;
//!
//! // Upload 500 kB with it, DSCP-marked, to a server on a loopback port.
//! let certs = SelfSigned::generate(&["localhost"])?;
//! let mut server = Driver::bind("127.0.0.1:0".parse()?, EndpointOptions::default())?;
//! server.endpoint().set_server(certs.server_crypto()?, ConnectionOptions::default())?;
//! let addr = server.local_addr()?;
//! let app = BulkServer::new();
//! let shutdown = app.shutdown_flag();
//! let server = driver::spawn(server, app, Arc::new(AtomicBool::new(false)));
//!
//! let mut client = Driver::bind("127.0.0.1:0".parse()?, EndpointOptions::default())?;
//! client.endpoint().set_client(certs.client_crypto()?);
//! let request = Request { mode: Mode::Upload, size: Some(500_000), duration: None };
//! let options = ConnectionOptions {
//!     mark_dscp: true,
//!     ..ConnectionOptions::with_cca("fixedwindow(segments=20)")
//! };
//! let mut upload = BulkClient::new(addr, "localhost", request, options);
//! client.run(&mut upload, &AtomicBool::new(false))?;
//! assert!(upload.result.complete);
//! let report = upload.result.report.as_ref().expect("final statistics");
//! assert_eq!(report.cca.spec, "fixedwindow(segments=20)");
//! assert_eq!(report.dscp_marking, Some(30));
//!
//! shutdown.store(true, Ordering::Relaxed);
//! let (_, app) = server.join().expect("server thread")?;
//! assert_eq!(app.summary.reports[0].peer_dscp_seen()[0].0, 30);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Registration lasts for the process; register before the first
//! connection that names the algorithm (a server checks its default spec in
//! [`Endpoint::set_server`]). The [`tollgate_cca`] crate documents the trait's
//! calls, units and the helpers its built-in algorithms share.
//!
//! ## TLS and the fixed ALPN
//!
//! Connections use TLS 1.3 through rustls with the ring provider.
//! [`tls::SelfSigned`] makes a certificate for tests and examples;
//! [`tls::server_crypto_from_pem`] and [`tls::client_crypto_with_roots_pem`]
//! load real ones. Clients verify the server name given to
//! [`Endpoint::connect`] against the certificate.
//!
//! Every configuration the [`tls`] module builds offers one ALPN protocol id,
//! [`tls::ALPN`] = `tollgate-bulk`, on both sides, whatever the application
//! protocol. A Tollgate client therefore connects to a Tollgate server (or
//! any peer offering `tollgate-bulk`, such as the `quiche_peer` module), and
//! a peer that offers only other ids (`h3`, `hq-interop`, ...) fails the
//! handshake with TLS's `no_application_protocol` alert. To speak another
//! protocol, build your own rustls config with your ALPN ids, wrap it in
//! quinn-proto's `QuicServerConfig` / `QuicClientConfig`, and pass it to
//! [`Endpoint::set_server`] / [`Endpoint::set_client`], which take any
//! quinn-proto crypto config.
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
//! second packet for the whole connection, silently; and it finds the bytes
//! of each STREAM frame by walking the stream's whole send buffer, one
//! segment per packet in flight for a bulk sender, which dominated 10 Gbit/s
//! runs; and it always sends ECT(0) and tells a controller nothing of the
//! peer's ECN counts, which an L4S algorithm (Prague) needs. The workspace
//! builds a vendored copy with both fixed and the ECN hooks added
//! (`[patch.crates-io]` in the root
//! `Cargo.toml`; a project that depends on this crate copies that entry into
//! its own root `Cargo.toml`, see the crate's README); `vendor/README.md` in
//! this crate says why, what the diff is and when to drop it.
//!
//! ## Pacing
//!
//! quinn-proto paces every connection from window and RTT. When the CCA
//! reports a pacing rate, [`Endpoint::poll_transmit`] additionally holds the
//! connection to that rate ([`pacing::RatePacer`]); GSO batching is disabled
//! for such connections so a batch cannot overrun the bucket.
//!
//! ## The I/O path
//!
//! Per loop wake-up: `recvmmsg` of up to 16 messages, each possibly a GRO
//! batch of up to 64 datagrams, copied once and split into datagrams without
//! further copies ([`Endpoint::handle_datagram_owned`]); `sendmmsg` of up to
//! 32 transmits, each a GSO batch of up to 40 datagrams with its own TOS byte
//! (so DSCP marking survives batching); precise `timerfd` wake-ups. The
//! hand-written [`udp`] layer replaces quinn-udp, whose send path would erase
//! per-connection DSCP.
//!
//! One connection stays on one thread per end, so a single flow tops out at
//! what one sending core does; spread many flows over threads, one [`Pool`]
//! or [`Driver`] per thread. [`Endpoint::write_bytes`] queues stream data
//! without copying it, which saves sender CPU over [`Endpoint::write`] for
//! large transfers. Build with `--release` (or optimise this crate and its
//! dependencies in your dev profile): quinn-proto, rustls and ring are slow
//! at opt-level 0.
//!
//! ## DSCP marking
//!
//! With [`ConnectionOptions::mark_dscp`], every datagram of the connection
//! carries the CCA's [`VariantId`](tollgate_cca::VariantId) as DSCP (upper six
//! bits of IPv4 TOS / IPv6 traffic class), set per datagram through an
//! `IP_TOS` / `IPV6_TCLASS` control message next to quinn-proto's ECN bits.
//! Receivers record the DSCP of each peer's datagrams ([`ConnReport::peer_dscp`]).
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
    Admission, CloseReason, ConnectError, ConnectionOptions, Endpoint, EndpointOptions, Event,
    PromptAcks, ReadStatus, SetCcaError, StreamError, Transmit,
};
pub use pool::Pool;
pub use quinn_proto::{ConnectionHandle, Dir, Side, StreamId};
pub use stats::{ConnReport, EndpointStats, Sample};

// The README's Rust code blocks run as doc tests too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
#[derive(Debug)]
pub struct ReadmeDoctests;

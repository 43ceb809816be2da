//! Emulated hosts: one Tollgate transport [`Endpoint`] per host, driven with
//! virtual `Instant`s, and the two tiny applications the emulator needs.
//!
//! Every flow has a client (the data sender, whose connection runs the
//! flow's CCA) and a server (the receiver, which only reads and counts).
//! The client opens one unidirectional stream and writes zeros: unbounded,
//! or exactly `size` bytes and then FIN. The server counts the bytes it
//! reads; that count is the flow's goodput.
//!
//! ## Fault injection
//!
//! `TOLLGATE_DROP_FIRST_ACK_FREQUENCY=<flow index>` (0-based, the order of
//! the run's flows; unset or empty: off) drops the one datagram that carries
//! the first ACK_FREQUENCY frame of that flow's data sender, as if the path
//! lost it: the sender's quinn-proto counter of ACK_FREQUENCY frames sent
//! (`frame_tx.ack_frequency`) is read before and after each transmit is
//! polled, and the transmit during which it first grows is discarded (hosts
//! send one datagram per transmit). The drop is counted in
//! [`Host::injected_drops`] and [`FlowRecord::injected_drops`]. The
//! sender only sends ACK_FREQUENCY frames when it requests prompt ACKs (the
//! flow's `prompt_acks`, by default for Libra). The variable is read once per
//! run; a value that is not the index of one of the run's flows is an error
//! naming it. This checks that quinn-proto sends a lost ACK_FREQUENCY frame
//! again (`tools/tests/ack_frequency.rs`).
//!
//! [`FlowRecord::injected_drops`]: super::engine::FlowRecord::injected_drops

use std::net::SocketAddr;

use bytes::Bytes;
use std::time::{Duration, Instant};

use tollgate_transport::{
    ConnectionHandle, ConnectionOptions, Dir, Endpoint, EndpointOptions, Event, StreamId, Transmit,
};

use super::queue::TimerSlot;
use super::tls::{Crypto, SERVER_NAME};

/// The fault injection's environment variable (see the module doc).
pub const DROP_FIRST_ACK_FREQUENCY_VAR: &str = "TOLLGATE_DROP_FIRST_ACK_FREQUENCY";

/// The flow named by [`DROP_FIRST_ACK_FREQUENCY_VAR`], if set, checked
/// against the run's `flows` flows.
pub fn drop_first_ack_frequency_from_env(flows: usize) -> anyhow::Result<Option<usize>> {
    const VAR: &str = DROP_FIRST_ACK_FREQUENCY_VAR;
    let v = match std::env::var(VAR) {
        Ok(v) if v.trim().is_empty() => return Ok(None),
        Ok(v) => v,
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(e) => anyhow::bail!("{VAR}: {e}"),
    };
    let i: usize = v
        .trim()
        .parse()
        .map_err(|e| anyhow::anyhow!("{VAR}={v:?}: not a flow index ({e})"))?;
    if i >= flows {
        anyhow::bail!("{VAR}={v:?}: no such flow (the run has {flows}, numbered from 0)");
    }
    Ok(Some(i))
}

/// Most bytes handed to the endpoint per write call.
const WRITE_CHUNK: usize = 64 * 1024;
static ZEROS: [u8; WRITE_CHUNK] = [0; WRITE_CHUNK];

/// What a host does.
#[derive(Debug)]
pub enum Role {
    /// Data sender.
    Client(ClientApp),
    /// Data receiver.
    Server(ServerApp),
}

/// The sending application.
#[derive(Debug, Default)]
pub struct ClientApp {
    /// The connection, once started.
    pub conn: Option<ConnectionHandle>,
    stream: Option<StreamId>,
    /// Bytes still to write (`None`: unbounded).
    remaining: Option<u64>,
    fin_sent: bool,
    /// Virtual ns when all data was acknowledged.
    pub acked_at: Option<u64>,
    /// A connection error, if any.
    pub error: Option<String>,
}

/// The receiving application.
#[derive(Debug, Default)]
pub struct ServerApp {
    /// The accepted connection.
    pub conn: Option<ConnectionHandle>,
    /// Application bytes read.
    pub rx_bytes: u64,
    /// Virtual ns when the stream's end was read.
    pub fin_at: Option<u64>,
}

/// One emulated host.
#[derive(Debug)]
pub struct Host {
    /// The transport endpoint.
    pub ep: Endpoint,
    /// This host's address (a label; nothing touches a real network).
    pub addr: SocketAddr,
    /// The flow it belongs to.
    pub flow: u32,
    /// Client or server.
    pub role: Role,
    /// The endpoint's earliest timeout in the event queue.
    pub timer: TimerSlot,
    /// Timer events handled at the current `now` (guards against a timer that never advances).
    pub same_now_timers: u32,
    /// When the host's latest jittered datagram leaves (keeps its datagrams in order).
    pub last_emit_ns: u64,
    /// Fault injection: drop the datagram carrying this (client) host's
    /// first ACK_FREQUENCY frame (see the module doc).
    pub drop_first_ack_frequency: bool,
    /// Datagrams the fault injection dropped.
    pub injected_drops: u64,
    /// `noise = "host"`: when the host wakes up to serve what arrived
    /// (virtual ns), while datagrams wait for it.
    pub wake_at: Option<u64>,
}

impl Host {
    /// A host with a seeded endpoint.
    pub fn new(
        addr: SocketAddr,
        flow: u32,
        seed: [u8; 32],
        crypto: &Crypto,
        client: bool,
        window: Option<u64>,
        link_rate_bps: f64,
    ) -> anyhow::Result<Self> {
        let mut ep = Endpoint::new(EndpointOptions {
            max_connections: 4,
            max_gso_segments: 1,
            allow_mtud: true,
            rng_seed: Some(seed),
        });
        let role = if client {
            ep.set_client(crypto.client.clone());
            Role::Client(ClientApp::default())
        } else {
            let base = ConnectionOptions::default();
            let defaults = ConnectionOptions {
                idle_timeout: Duration::from_secs(600),
                stats_interval: Duration::from_secs(3600),
                window: window.unwrap_or(base.window),
                max_window: window.unwrap_or(base.max_window),
                link_rate_bps: Some(link_rate_bps),
                ..base
            };
            ep.set_server(crypto.server.clone(), defaults)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Role::Server(ServerApp::default())
        };
        Ok(Host {
            ep,
            addr,
            flow,
            role,
            timer: TimerSlot::default(),
            same_now_timers: 0,
            last_emit_ns: 0,
            wake_at: None,
            drop_first_ack_frequency: false,
            injected_drops: 0,
        })
    }

    /// The endpoint's next transmit (into `buf`), less the one the fault
    /// injection drops.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let watched = match &self.role {
            Role::Client(app) if self.drop_first_ack_frequency => app.conn,
            _ => None,
        };
        let Some(ch) = watched else {
            return self.ep.poll_transmit(now, buf);
        };
        let sent = |ep: &Endpoint| ep.quic_stats(ch).map_or(0, |s| s.frame_tx.ack_frequency);
        let before = sent(&self.ep);
        let t = self.ep.poll_transmit(now, buf)?;
        if sent(&self.ep) == before {
            return Some(t);
        }
        self.drop_first_ack_frequency = false;
        self.injected_drops += 1;
        tracing::info!(
            flow = self.flow,
            bytes = t.size,
            "fault injection: dropped the datagram carrying the first ACK_FREQUENCY frame"
        );
        self.ep.poll_transmit(now, buf)
    }

    /// Client: open the connection.
    pub fn connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        options: ConnectionOptions,
        size: Option<u64>,
    ) {
        let Role::Client(app) = &mut self.role else {
            return;
        };
        app.remaining = size;
        match self.ep.connect(now, remote, SERVER_NAME, options) {
            Ok(ch) => app.conn = Some(ch),
            Err(e) => app.error = Some(e.to_string()),
        }
    }

    /// Deliver pending endpoint events to the app and let it write.
    pub fn run_app(&mut self, now: Instant, now_ns: u64) {
        while let Some(ev) = self.ep.poll_event() {
            self.on_event(now, now_ns, ev);
        }
        if let Role::Client(app) = &mut self.role {
            pump(&mut self.ep, app);
        }
        while let Some(ev) = self.ep.poll_event() {
            self.on_event(now, now_ns, ev);
        }
    }

    fn on_event(&mut self, now: Instant, now_ns: u64, ev: Event) {
        match &mut self.role {
            Role::Client(app) => match ev {
                Event::Connected(ch) if Some(ch) == app.conn => {
                    match self.ep.open(ch, Dir::Uni) {
                        Ok(Some(id)) => app.stream = Some(id),
                        _ => app.error = Some("cannot open a stream".into()),
                    }
                    pump(&mut self.ep, app);
                }
                Event::Writable(..) => pump(&mut self.ep, app),
                Event::StreamAcked(ch, _) => {
                    app.acked_at = Some(now_ns);
                    self.ep.close(now, ch, 0, b"done");
                }
                Event::Closed(_, reason) if app.acked_at.is_none() && app.error.is_none() => {
                    app.error = Some(format!("closed early: {reason:?}"));
                }
                _ => {}
            },
            Role::Server(app) => match ev {
                Event::Accepted(ch) => app.conn = Some(ch),
                Event::StreamOpened(ch, id) | Event::Readable(ch, id) => {
                    while let Ok(st) = self.ep.read_unordered(ch, id, 1 << 24, |_, _| {}) {
                        app.rx_bytes += st.bytes as u64;
                        if st.finished {
                            app.fin_at.get_or_insert(now_ns);
                            break;
                        }
                        if st.bytes == 0 {
                            break;
                        }
                    }
                }
                _ => {}
            },
        }
    }
}

/// Write as much as flow and congestion control accept; FIN when a sized flow is done.
fn pump(ep: &mut Endpoint, app: &mut ClientApp) {
    let (Some(ch), Some(id)) = (app.conn, app.stream) else {
        return;
    };
    if app.fin_sent {
        return;
    }
    loop {
        let want = app
            .remaining
            .map_or(WRITE_CHUNK, |r| r.min(WRITE_CHUNK as u64) as usize);
        if want == 0 {
            if ep.finish(ch, id).is_ok() {
                app.fin_sent = true;
            }
            return;
        }
        // A slice of the static buffer: the stream keeps a reference, not a
        // copy (copying cold send-buffer memory was 5 % of a run).
        match ep.write_bytes(ch, id, Bytes::from_static(&ZEROS[..want])) {
            Ok(0) => return,
            Ok(n) => {
                if let Some(r) = app.remaining.as_mut() {
                    *r -= n as u64;
                }
            }
            Err(e) => {
                app.error.get_or_insert(format!("write: {e}"));
                return;
            }
        }
    }
}

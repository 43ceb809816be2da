//! Many endpoints, each on its own UDP socket, in one mio loop: what a load
//! generator's worker thread runs. Every member is an [`Endpoint`] with its
//! own socket (so its own 5-tuple and DSCP), its own [`App`] and its own start
//! instant; `App::start` runs at that instant (never before, typically within
//! tens of microseconds after: the loop sleeps on a `timerfd`) and the
//! instant it actually ran is kept ([`Pool::started_at`]).
//!
//! The per-endpoint logic (timers, events, batched sends with would-block
//! handling, batched receives) is the same code [`Driver`](crate::Driver)
//! runs for its one endpoint; see [`crate::driver`]. One pool per worker
//! thread; the pool itself never spawns threads.
//!
//! ```no_run
//! # use std::sync::atomic::AtomicBool;
//! # use std::time::{Duration, Instant};
//! # use tollgate_transport::{bulk::*, driver::UdpIo, pool::Pool, tls::SelfSigned, *};
//! # let certs = SelfSigned::generate(&["localhost"]).unwrap();
//! # let server: std::net::SocketAddr = "127.0.0.1:4433".parse().unwrap();
//! let mut pool: Pool<BulkClient> = Pool::new()?;
//! let t0 = Instant::now() + Duration::from_millis(10);
//! for k in 0..8 {
//!     let request = Request { mode: Mode::Download, size: Some(1 << 20), duration: None };
//!     let app = BulkClient::new(server, "localhost", request, ConnectionOptions::with_cca("cubic"));
//!     let socket = UdpIo::bind("127.0.0.1:0".parse().unwrap())?;
//!     let crypto = certs.client_crypto().unwrap();
//!     pool.add(socket, EndpointOptions::default(), |ep| ep.set_client(crypto), app,
//!              t0 + Duration::from_millis(5 * k))?;
//! }
//! pool.run(&AtomicBool::new(false))?;
//! for (i, app) in pool.into_apps().iter().enumerate() {
//!     println!("flow {i}: {:.1} Mbit/s", app.result.goodput_bps() / 1e6);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use crate::driver::{App, DatagramSocket, DriverStats, Engine, Members, Slot, UdpIo};
use crate::endpoint::{Endpoint, EndpointOptions};

/// One endpoint, its socket and its app.
struct Member<A, S> {
    slot: Slot<S>,
    app: A,
}

impl<A: App, S: DatagramSocket> Members for Vec<Member<A, S>> {
    type App = A;
    type Socket = S;
    fn count(&self) -> usize {
        self.len()
    }
    fn member(&mut self, i: usize) -> (&mut Slot<S>, &mut A) {
        let m = &mut self[i];
        (&mut m.slot, &mut m.app)
    }
}

/// Many endpoints, each on its own socket with its own app and start
/// instant, in one event loop on the calling thread.
pub struct Pool<A: App, S: DatagramSocket = UdpIo> {
    engine: Engine,
    members: Vec<Member<A, S>>,
}

impl<A: App, S: DatagramSocket> std::fmt::Debug for Pool<A, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("endpoints", &self.members.len())
            .finish_non_exhaustive()
    }
}

impl<A: App, S: DatagramSocket> Pool<A, S> {
    /// An empty pool.
    pub fn new() -> io::Result<Self> {
        Ok(Pool {
            engine: Engine::new()?,
            members: Vec::new(),
        })
    }

    /// Add an endpoint on its own socket; `configure` sets it up (client or
    /// server role), and `app.start(now, ep)` is called at `start_at` (not
    /// before) once [`run`](Self::run) is running. Returns the endpoint's index.
    pub fn add(
        &mut self,
        mut socket: S,
        endpoint_options: EndpointOptions,
        configure: impl FnOnce(&mut Endpoint),
        app: A,
        start_at: Instant,
    ) -> io::Result<usize> {
        let i = self.members.len();
        self.engine.register(&mut socket, i)?;
        let mut slot = Slot::new(socket, endpoint_options, start_at);
        configure(&mut slot.endpoint);
        self.members.push(Member { slot, app });
        Ok(i)
    }

    /// Run until every app is done (started, [`App::is_done`], nothing left
    /// to send) or `stop` is set. Can be called again, e.g. after adding more.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        self.engine.run(&mut self.members, stop)
    }

    /// Number of endpoints.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the pool has no endpoint.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Endpoint `i`'s app.
    pub fn app(&self, i: usize) -> &A {
        &self.members[i].app
    }

    /// Endpoint `i`'s app, mutably.
    pub fn app_mut(&mut self, i: usize) -> &mut A {
        &mut self.members[i].app
    }

    /// Endpoint `i`.
    pub fn endpoint(&self, i: usize) -> &Endpoint {
        &self.members[i].slot.endpoint
    }

    /// Endpoint `i`, mutably (e.g. statistics as of now).
    pub fn endpoint_mut(&mut self, i: usize) -> &mut Endpoint {
        &mut self.members[i].slot.endpoint
    }

    /// The socket of endpoint `i`.
    pub fn socket(&self, i: usize) -> &S {
        &self.members[i].slot.socket
    }

    /// The bound address of endpoint `i`.
    pub fn local_addr(&self, i: usize) -> io::Result<SocketAddr> {
        self.members[i].slot.socket.local_addr()
    }

    /// Socket counters of endpoint `i`.
    pub fn stats(&self, i: usize) -> &DriverStats {
        &self.members[i].slot.stats
    }

    /// When endpoint `i` was scheduled to start.
    pub fn start_at(&self, i: usize) -> Instant {
        self.members[i].slot.start_at
    }

    /// When `App::start` actually ran for endpoint `i` (`None`: not yet).
    pub fn started_at(&self, i: usize) -> Option<Instant> {
        self.members[i].slot.started_at
    }

    /// The apps, in the order they were added.
    pub fn into_apps(self) -> Vec<A> {
        self.members.into_iter().map(|m| m.app).collect()
    }
}

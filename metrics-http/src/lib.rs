//! # tollgate-metrics-http
//!
//! The metrics endpoint of `tollgate-router` (`prometheus = "ADDR"` in
//! `router.toml`) and `tollgate serve --metrics ADDR`: `GET /metrics`
//! answers with the OpenMetrics text that a caller-supplied closure encodes
//! at each scrape, on a thread of its own, so the threads that forward
//! packets or transfer data never format text nor wait on a client.
//!
//! It is built on hyper's HTTP/1 server over a tokio current-thread runtime.
//! hyper is the maintained HTTP implementation under most of Rust's HTTP
//! stack, with a bounded request parser and a header read timeout of its
//! own, and tokio is already in this workspace's dependency tree; one
//! current-thread runtime serves many slow or idle clients at once on a
//! single thread, which two hand-written blocking responders could not.
//!
//! What a client sees:
//!
//! - `GET /metrics` or `HEAD /metrics` (any query string): `200` with
//!   `Content-Type:` [`OPENMETRICS_CONTENT_TYPE`]; any other path: `404`;
//!   another method on `/metrics`: `405` with `Allow: GET, HEAD`.
//! - One request per connection (no keep-alive): every response carries
//!   `Connection: close` and the server closes the connection after it.
//! - The limits of [`ServerConfig`]: at most `max_connections` open at once
//!   (more are accepted and closed at once, so the listen backlog never
//!   fills and a scrape is never queued behind them), the request head within
//!   `header_read_timeout`, the whole exchange, writing included, within
//!   `connection_deadline`; a request head larger than 8 KiB gets `431`.
//! - With [`MetricsServer::start_with_own_counters`] (both binaries), the
//!   endpoint's own refused and timed-out connections are appended to the
//!   text as `PREFIX_metrics_http_refused_total` and
//!   `PREFIX_metrics_http_timed_out_total`.
//!
//! ```no_run
//! use tollgate_metrics_http::{MetricsServer, ServerConfig};
//!
//! let server = MetricsServer::start("127.0.0.1:0", ServerConfig::default(), || {
//!     "# TYPE up gauge\nup 1\n# EOF\n".to_string()
//! })?;
//! println!("metrics on http://{}/metrics", server.local_addr());
//! // ... later: stop the thread (dropping the server does the same).
//! server.stop();
//! # Ok::<(), std::io::Error>(())
//! ```

use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

/// The `Content-Type` of the metrics: the OpenMetrics text format, which
/// Prometheus scrapes natively.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The one path served.
pub const METRICS_PATH: &str = "/metrics";

/// The largest request head read (request line and headers); hyper answers
/// a larger one with `431 Request Header Fields Too Large`. (8 KiB is the
/// smallest buffer hyper accepts, and far more than a scraper sends.)
const MAX_REQUEST_HEAD: usize = 8192;

/// How long the accept loop waits after a failed `accept` (out of file
/// descriptors, say) before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The server's limits. [`Default`] gives the values below.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Most connections open at once; a connection beyond it is accepted
    /// and closed at once, unanswered, and counted in
    /// [`ServerStats::refused`]. Default 256: well above the clients a
    /// scraper and a few curious humans open, so that 100 or so idle clients
    /// do not turn a scrape away (each open connection holds one file
    /// descriptor and a few KiB until its timeout).
    pub max_connections: usize,
    /// How long a client has to send its whole request head after it
    /// connects. Default 2 s.
    pub header_read_timeout: Duration,
    /// How long a connection may stay open in all, reading the request and
    /// writing the response included; a client that stops reading is cut
    /// off here. Default 5 s.
    pub connection_deadline: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(2),
            connection_deadline: Duration::from_secs(5),
        }
    }
}

/// The server's counters since it started (see [`MetricsServer::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted and served (those refused are not counted).
    pub accepted: u64,
    /// Responses produced, any status.
    pub responses: u64,
    /// Connections closed unanswered because `max_connections` were open.
    pub refused: u64,
    /// Connections cut off by `header_read_timeout` or `connection_deadline`.
    pub timed_out: u64,
    /// Failed `accept` calls (the server waits briefly and goes on).
    pub accept_errors: u64,
    /// Connections open now.
    pub open: u64,
}

impl ServerStats {
    /// The counters a scraper wants about the metrics endpoint itself, as
    /// OpenMetrics counter families (`# HELP`, `# TYPE`, no `# EOF`):
    /// `{prefix}_metrics_http_refused_total` ([`refused`](Self::refused):
    /// connections closed unanswered at the connection limit) and
    /// `{prefix}_metrics_http_timed_out_total`
    /// ([`timed_out`](Self::timed_out): connections cut off by a deadline).
    pub fn openmetrics(&self, prefix: &str) -> String {
        let mut out = String::new();
        for (name, help, value) in [
            (
                "metrics_http_refused",
                "Connections to this metrics endpoint closed unanswered because its connection limit was reached.",
                self.refused,
            ),
            (
                "metrics_http_timed_out",
                "Connections to this metrics endpoint cut off by its request-head or connection deadline.",
                self.timed_out,
            ),
        ] {
            out.push_str(&format!(
                "# HELP {prefix}_{name} {help}\n# TYPE {prefix}_{name} counter\n{prefix}_{name}_total {value}\n"
            ));
        }
        out
    }
}

/// `exposition` (OpenMetrics text) with `families` inserted before its
/// final `# EOF` line (appended, with a `# EOF`, if it has none).
pub fn insert_families(exposition: &str, families: &str) -> String {
    let body = exposition
        .strip_suffix("# EOF\n")
        .or_else(|| exposition.strip_suffix("# EOF"))
        .unwrap_or(exposition);
    let mut out = String::with_capacity(body.len() + families.len() + 8);
    out.push_str(body);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(families);
    out.push_str("# EOF\n");
    out
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    responses: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
    accept_errors: AtomicU64,
    open: AtomicU64,
}

impl Counters {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ServerStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerStats {
            accepted: get(&self.accepted),
            responses: get(&self.responses),
            refused: get(&self.refused),
            timed_out: get(&self.timed_out),
            accept_errors: get(&self.accept_errors),
            open: get(&self.open),
        }
    }
}

/// Takes one connection off the open count when its task ends, however
/// it ends.
struct OpenSlot(Arc<Counters>);

impl Drop for OpenSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

type Render = Arc<dyn Fn(ServerStats) -> String + Send + Sync>;

/// A running metrics server: one OS thread named `tollgate-metrics` with a
/// tokio current-thread runtime. [`stop`](Self::stop) or dropping it ends the
/// thread and closes every open connection.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    counters: Arc<Counters>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind `addr` (port 0 picks a free port: see
    /// [`local_addr`](Self::local_addr)) and serve `render()`'s text at
    /// `/metrics`, calling it once per `GET` or `HEAD` on the server's
    /// thread. Errors: the address cannot be bound, `max_connections` is 0,
    /// or the thread or runtime cannot be started.
    pub fn start<R>(addr: impl ToSocketAddrs, config: ServerConfig, render: R) -> io::Result<Self>
    where
        R: Fn() -> String + Send + Sync + 'static,
    {
        Self::start_with_stats(addr, config, move |_| render())
    }

    /// [`start`](Self::start), with the server's own counters appended to
    /// `render()`'s text (before its `# EOF`) as
    /// [`ServerStats::openmetrics`] encodes them under `prefix`: what
    /// `tollgate-router` (prefix `tollgate`) and `tollgate serve` (prefix
    /// `tollgate_serve`) serve.
    pub fn start_with_own_counters<R>(
        addr: impl ToSocketAddrs,
        config: ServerConfig,
        prefix: &str,
        render: R,
    ) -> io::Result<Self>
    where
        R: Fn() -> String + Send + Sync + 'static,
    {
        let prefix = prefix.to_string();
        Self::start_with_stats(addr, config, move |stats| {
            insert_families(&render(), &stats.openmetrics(&prefix))
        })
    }

    /// [`start`](Self::start), with `render` given the server's own
    /// counters as of the request ([`ServerStats`]; the request being
    /// answered is counted in `accepted` and `open`), so that the endpoint
    /// can export them with the rest, e.g. the connections it refused or
    /// timed out:
    ///
    /// ```no_run
    /// use tollgate_metrics_http::{MetricsServer, ServerConfig};
    ///
    /// let server = MetricsServer::start_with_stats("127.0.0.1:0", ServerConfig::default(), |s| {
    ///     format!(
    ///         "# TYPE http_refused counter\nhttp_refused_total {}\n# EOF\n",
    ///         s.refused
    ///     )
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_with_stats<R>(
        addr: impl ToSocketAddrs,
        config: ServerConfig,
        render: R,
    ) -> io::Result<Self>
    where
        R: Fn(ServerStats) -> String + Send + Sync + 'static,
    {
        if config.max_connections == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "metrics server: max_connections must be at least 1",
            ));
        }
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _in_runtime = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let counters = Arc::new(Counters::default());
        let (shutdown, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("tollgate-metrics".into())
            .spawn({
                let counters = counters.clone();
                let render: Render = Arc::new(render);
                move || {
                    runtime.block_on(accept_loop(listener, config, render, counters, stopped));
                    // Dropping the runtime cancels the connections still open.
                    drop(runtime);
                }
            })?;
        Ok(MetricsServer {
            addr,
            counters,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The address bound (with the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters so far.
    pub fn stats(&self) -> ServerStats {
        self.counters.snapshot()
    }

    /// Stop serving: close the listener and every open connection and join
    /// the thread (promptly: nothing on it blocks). Returns the final
    /// counters.
    pub fn stop(mut self) -> ServerStats {
        self.shut_down();
        self.stats()
    }

    fn shut_down(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shut_down();
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    config: ServerConfig,
    render: Render,
    counters: Arc<Counters>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .keep_alive(false)
        .title_case_headers(true)
        .max_buf_size(MAX_REQUEST_HEAD);
    let max_open = config.max_connections as u64;
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            r = listener.accept() => r,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(_) => {
                Counters::bump(&counters.accept_errors);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if counters.open.load(Ordering::Relaxed) >= max_open {
            Counters::bump(&counters.refused);
            drop(stream);
            continue;
        }
        counters.open.fetch_add(1, Ordering::Relaxed);
        Counters::bump(&counters.accepted);
        let slot = OpenSlot(counters.clone());
        let _ = stream.set_nodelay(true);
        let (http, render, counters) = (http.clone(), render.clone(), counters.clone());
        let deadline = config.connection_deadline;
        tokio::spawn(async move {
            let _slot = slot;
            let service = {
                let counters = counters.clone();
                service_fn(move |req: Request<Incoming>| {
                    Counters::bump(&counters.responses);
                    let response = respond(&req, &|| render(counters.snapshot()));
                    async move { Ok::<_, Infallible>(response) }
                })
            };
            let conn = http.serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(deadline, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) if e.is_timeout() => Counters::bump(&counters.timed_out),
                // The client went away or sent something that is not HTTP:
                // hyper has answered what could be answered.
                Ok(Err(_)) => {}
                Err(_) => Counters::bump(&counters.timed_out),
            }
        });
    }
}

/// The response to one request: the metrics, 404 or 405.
fn respond(req: &Request<Incoming>, render: &dyn Fn() -> String) -> Response<Full<Bytes>> {
    if req.uri().path() != METRICS_PATH {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: use GET or HEAD\n",
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    // For HEAD hyper sends the head alone, Content-Length included.
    with_headers(
        StatusCode::OK,
        Bytes::from(render()),
        HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
    )
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    with_headers(
        status,
        Bytes::from_static(text.as_bytes()),
        HeaderValue::from_static("text/plain; charset=utf-8"),
    )
}

fn with_headers(
    status: StatusCode,
    body: Bytes,
    content_type: HeaderValue,
) -> Response<Full<Bytes>> {
    let length = HeaderValue::from(body.len());
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, content_type);
    h.insert(CONTENT_LENGTH, length);
    h.insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

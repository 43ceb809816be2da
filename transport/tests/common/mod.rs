//! Helpers shared by the integration tests: a bulk server on its own thread
//! and a bulk client with a watchdog.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tollgate_transport::bulk::{BulkClient, BulkResult, BulkServer, Mode, Request};
use tollgate_transport::driver::{spawn, DatagramSocket, UdpIo};
use tollgate_transport::tls::SelfSigned;
use tollgate_transport::{ConnectionOptions, Driver, EndpointOptions};

/// Every registered algorithm as a spec string (wrappers over newreno).
pub fn every_spec() -> Vec<String> {
    tollgate_cca::registry::ALGORITHMS
        .iter()
        .map(|a| {
            if a.takes_base {
                format!("{}(newreno)", a.name)
            } else {
                a.name.to_string()
            }
        })
        .collect()
}

pub fn certs() -> Arc<SelfSigned> {
    Arc::new(SelfSigned::generate(&["localhost"]).expect("certificate"))
}

pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// What a server thread returns.
type ServerThread<S> = JoinHandle<std::io::Result<(Driver<S>, BulkServer)>>;

/// A running bulk server.
pub struct Server<S: DatagramSocket + Send + 'static = UdpIo> {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
    thread: Option<ServerThread<S>>,
}

impl<S: DatagramSocket + Send + 'static> Server<S> {
    /// Let the server's connections drain (at most 5 s), stop it and
    /// return its driver and app.
    pub fn stop(mut self) -> (Driver<S>, BulkServer) {
        self.shutdown.store(true, Ordering::Relaxed);
        let thread = self.thread.as_ref().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap().unwrap()
    }
}

pub fn start_server(certs: &SelfSigned, defaults: ConnectionOptions) -> Server {
    start_server_on(UdpIo::bind(loopback()).unwrap(), certs, defaults)
}

pub fn start_server_on<S: DatagramSocket + Send + 'static>(
    socket: S,
    certs: &SelfSigned,
    defaults: ConnectionOptions,
) -> Server<S> {
    start_app_on(socket, certs, defaults, BulkServer::new())
}

pub fn start_app_on<S: DatagramSocket + Send + 'static>(
    socket: S,
    certs: &SelfSigned,
    defaults: ConnectionOptions,
    app: BulkServer,
) -> Server<S> {
    let mut driver = Driver::new(socket, EndpointOptions::default()).unwrap();
    driver
        .endpoint()
        .set_server(certs.server_crypto().unwrap(), defaults)
        .unwrap();
    let addr = driver.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let shutdown = app.shutdown_flag();
    let thread = Some(spawn(driver, app, stop.clone()));
    Server {
        addr,
        stop,
        shutdown,
        thread,
    }
}

/// Run one client transfer to completion (or `limit`), on its own socket.
pub fn run_client(
    certs: &SelfSigned,
    server: SocketAddr,
    request: Request,
    options: ConnectionOptions,
) -> BulkResult {
    run_client_on(
        UdpIo::bind(loopback()).unwrap(),
        certs,
        server,
        request,
        options,
    )
    .1
}

pub fn run_client_on<S: DatagramSocket + Send + 'static>(
    socket: S,
    certs: &SelfSigned,
    server: SocketAddr,
    request: Request,
    options: ConnectionOptions,
) -> (Driver<S>, BulkResult) {
    let app = BulkClient::new(server, "localhost", request, options);
    run_app_on(socket, certs, app)
}

/// Run a prepared client app to completion (or 30 s).
pub fn run_app_on<S: DatagramSocket + Send + 'static>(
    socket: S,
    certs: &SelfSigned,
    app: BulkClient,
) -> (Driver<S>, BulkResult) {
    let mut driver = Driver::new(socket, EndpointOptions::default()).unwrap();
    driver.endpoint().set_client(certs.client_crypto().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let handle = spawn(driver, app, stop.clone());
    // Watchdog: a hung transfer fails the test instead of hanging it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !handle.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let (driver, app) = handle.join().unwrap().unwrap();
    (driver, app.result)
}

pub fn download(size: u64) -> Request {
    Request {
        mode: Mode::Download,
        size: Some(size),
        duration: None,
    }
}

pub fn upload(size: u64) -> Request {
    Request {
        mode: Mode::Upload,
        size: Some(size),
        duration: None,
    }
}

/// Assert a transfer moved exactly `size` intact bytes and closed cleanly.
pub fn assert_intact(what: &str, r: &BulkResult, size: u64) {
    assert_eq!(r.error, None, "{what}: {r:?}");
    assert!(r.complete, "{what}: incomplete {r:?}");
    assert_eq!(r.bytes, size, "{what}");
    assert_eq!(r.mismatches, 0, "{what}");
    assert_eq!(
        r.close,
        Some(tollgate_transport::CloseReason::Local),
        "{what}"
    );
    assert!(r.report.is_some(), "{what}: no final report");
}

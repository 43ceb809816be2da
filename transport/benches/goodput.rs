//! Single-connection goodput on loopback: Tollgate (mio + quinn-proto, NewReno)
//! against the `quinn` crate (tokio, its NewReno), same machine, same run.
//!
//! ```text
//! cargo bench -p tollgate-transport --bench goodput -- [BYTES] [ROUNDS]
//! ```
//!
//! Each round downloads BYTES (default 1 GB) once with each stack, both
//! endpoints in this process. Reported: goodput (Gbit/s), process CPU time,
//! Gbit/s per core (bits moved / CPU-seconds of both endpoints together), and
//! the Tollgate / quinn ratio of the medians.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate_transport::bulk::{BulkClient, BulkServer, Mode, Request};
use tollgate_transport::driver::spawn;
use tollgate_transport::tls::SelfSigned;
use tollgate_transport::{ConnectionOptions, Driver, EndpointOptions};

/// Process CPU time (user + system) so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[derive(Clone, Copy, Debug)]
struct Run {
    gbps: f64,
    gbps_per_core: f64,
}

fn measure(bytes: u64, f: impl FnOnce() -> Duration) -> Run {
    let cpu0 = cpu_time();
    let elapsed = f();
    let cpu = (cpu_time() - cpu0).as_secs_f64();
    let bits = bytes as f64 * 8.0;
    Run {
        gbps: bits / elapsed.as_secs_f64() / 1e9,
        gbps_per_core: bits / cpu / 1e9,
    }
}

fn tollgate(certs: &SelfSigned, bytes: u64) -> Duration {
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut server = Driver::bind(loopback, EndpointOptions::default()).unwrap();
    server
        .endpoint()
        .set_server(
            certs.server_crypto().unwrap(),
            ConnectionOptions::with_cca("newreno"),
        )
        .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let app = BulkServer::new();
    let shutdown = app.shutdown_flag();
    let server = spawn(server, app, stop.clone());
    let mut client = Driver::bind(loopback, EndpointOptions::default()).unwrap();
    client.endpoint().set_client(certs.client_crypto().unwrap());
    let request = Request {
        mode: Mode::Download,
        size: Some(bytes),
        duration: None,
    };
    let mut app = BulkClient::new(
        addr,
        "localhost",
        request,
        ConnectionOptions::with_cca("newreno"),
    );
    client.run(&mut app, &AtomicBool::new(false)).unwrap();
    assert!(app.result.complete, "{:?}", app.result.error);
    shutdown.store(true, std::sync::atomic::Ordering::Relaxed);
    server.join().unwrap().unwrap();
    app.result.elapsed
}

fn quinn_run(certs: &SelfSigned, bytes: u64) -> Duration {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let transport = || {
            let mut t = quinn::TransportConfig::default();
            let w = quinn::VarInt::from_u32(16 << 20);
            t.stream_receive_window(w)
                .receive_window(w)
                .send_window(16 << 20);
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()));
            Arc::new(t)
        };
        let mut scfg = quinn::ServerConfig::with_crypto(certs.server_crypto().unwrap());
        scfg.transport_config(transport());
        let server = quinn::Endpoint::server(scfg, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        let serve = tokio::spawn(async move {
            let conn = server.accept().await.unwrap().await.unwrap();
            let (mut send, mut recv) = conn.accept_bi().await.unwrap();
            let mut req = [0u8; tollgate_transport::bulk::REQUEST_LEN];
            recv.read_exact(&mut req).await.unwrap();
            let req = Request::decode(&req).unwrap();
            let chunk =
                bytes::Bytes::from(tollgate_transport::bulk::pattern_slice(0, 32 * 1024).to_vec());
            let mut left = req.size.unwrap();
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                send.write_chunk(chunk.slice(..n)).await.unwrap();
                left -= n as u64;
            }
            send.finish().unwrap();
            conn.closed().await;
            server.wait_idle().await;
        });
        let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut ccfg = quinn::ClientConfig::new(certs.client_crypto().unwrap());
        ccfg.transport_config(transport());
        client.set_default_client_config(ccfg);
        let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
        let start = Instant::now();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let req = Request {
            mode: Mode::Download,
            size: Some(bytes),
            duration: None,
        };
        send.write_all(&req.encode()).await.unwrap();
        send.finish().unwrap();
        let mut got = 0u64;
        while let Some(c) = recv.read_chunk(1 << 20, true).await.unwrap() {
            got += c.bytes.len() as u64;
        }
        let elapsed = start.elapsed();
        assert_eq!(got, bytes);
        conn.close(0u32.into(), b"done");
        client.wait_idle().await;
        serve.await.unwrap();
        elapsed
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let bytes: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000_000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let certs = SelfSigned::generate(&["localhost"]).unwrap();
    let (mut t, mut q) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let a = measure(bytes, || tollgate(&certs, bytes));
        let b = measure(bytes, || quinn_run(&certs, bytes));
        println!(
            "round {round}: tollgate {:.2} Gbit/s ({:.2} Gbit/s per core)   quinn {:.2} Gbit/s ({:.2} Gbit/s per core)",
            a.gbps, a.gbps_per_core, b.gbps, b.gbps_per_core
        );
        t.push(a);
        q.push(b);
    }
    let tg = median(t.iter().map(|r| r.gbps).collect());
    let qg = median(q.iter().map(|r| r.gbps).collect());
    let tc = median(t.iter().map(|r| r.gbps_per_core).collect());
    let qc = median(q.iter().map(|r| r.gbps_per_core).collect());
    println!(
        "median goodput:  tollgate {tg:.2} Gbit/s, quinn {qg:.2} Gbit/s, ratio {:.2}",
        tg / qg
    );
    println!(
        "median per core: tollgate {tc:.2} Gbit/s, quinn {qc:.2} Gbit/s, ratio {:.2}",
        tc / qc
    );
}

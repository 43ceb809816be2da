//! The metrics server on loopback sockets: scrapes stay fast while idle,
//! slow and non-reading clients hold connections; paths, methods, the
//! connection limit and its counters, stopping.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate_metrics_http::{MetricsServer, ServerConfig, OPENMETRICS_CONTENT_TYPE};

const BODY: &str = "# TYPE tollgate_up gauge\ntollgate_up 1\n# EOF\n";

/// A response as read off the socket: status line, head, body, and how
/// long the exchange took from connect to the server's close.
#[derive(Debug)]
struct Reply {
    status: String,
    head: String,
    body: Vec<u8>,
    took: Duration,
}

/// One HTTP/1.1 request with `method` and `path`, read to the server's close.
fn request(addr: SocketAddr, method: &str, path: &str) -> Reply {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let took = t0.elapsed();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let status = head.lines().next().unwrap_or_default().to_string();
    Reply {
        status,
        head,
        body: raw[split + 4..].to_vec(),
        took,
    }
}

fn scrape(addr: SocketAddr) -> Reply {
    request(addr, "GET", "/metrics")
}

/// Poll `cond` every 5 ms for up to `within`.
fn wait_for(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

fn start(config: ServerConfig) -> MetricsServer {
    MetricsServer::start("127.0.0.1:0", config, || BODY.to_string()).unwrap()
}

#[test]
fn idle_and_one_byte_a_second_clients_do_not_delay_a_scrape() {
    let server = start(ServerConfig::default());
    let addr = server.local_addr();
    // 100 clients that connect and never send.
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // 20 clients that send their request one byte a second.
    let done = Arc::new(AtomicBool::new(false));
    let slow: Vec<_> = (0..20)
        .map(|_| {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" {
                    if done.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                        return;
                    }
                    for _ in 0..20 {
                        if done.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
        })
        .collect();
    // Every one of them holds a connection on the server.
    assert!(
        wait_for(Duration::from_secs(1), || server.stats().open >= 120),
        "{:?}",
        server.stats()
    );
    // Five scrapes within the header timeout (2 s), while all 120 are held.
    let mut took = Vec::new();
    for _ in 0..5 {
        let r = scrape(addr);
        assert_eq!(r.status, "HTTP/1.1 200 OK", "{r:?}");
        assert_eq!(r.body, BODY.as_bytes());
        assert!(r.took < Duration::from_secs(1), "{r:?}");
        took.push(r.took);
        std::thread::sleep(Duration::from_millis(150));
    }
    let open = server.stats().open;
    took.sort();
    let median = took[took.len() / 2];
    eprintln!("scrapes with 100 idle and 20 slow clients open ({open} open after): {took:?}, median {median:?}");
    assert!(
        open >= 120,
        "the clients were cut off before the scrapes ended: {open}"
    );
    assert!(median < Duration::from_millis(100), "{took:?}");
    done.store(true, Ordering::Relaxed);
    for t in slow {
        t.join().unwrap();
    }
    drop(idle);
}

#[test]
fn only_get_and_head_on_metrics_are_served() {
    let server = start(ServerConfig::default());
    let addr = server.local_addr();
    let ok = scrape(addr);
    assert_eq!(ok.status, "HTTP/1.1 200 OK");
    assert!(
        ok.head
            .contains(&format!("Content-Type: {OPENMETRICS_CONTENT_TYPE}")),
        "{ok:?}"
    );
    assert!(ok.head.contains(&format!("Content-Length: {}", BODY.len())));
    assert!(ok.head.contains("Connection: close"), "{ok:?}");
    assert_eq!(
        request(addr, "GET", "/metrics?x=1").status,
        "HTTP/1.1 200 OK"
    );
    let head = request(addr, "HEAD", "/metrics");
    assert_eq!(head.status, "HTTP/1.1 200 OK");
    assert!(head
        .head
        .contains(&format!("Content-Length: {}", BODY.len())));
    assert!(head.body.is_empty(), "{head:?}");
    for path in ["/", "/foo", "/metrics/", "/metricsx"] {
        let r = request(addr, "GET", path);
        assert_eq!(r.status, "HTTP/1.1 404 Not Found", "{path}: {r:?}");
    }
    let post = request(addr, "POST", "/metrics");
    assert_eq!(post.status, "HTTP/1.1 405 Method Not Allowed");
    assert!(post.head.contains("Allow: GET, HEAD"), "{post:?}");
    // A request head over the 8 KiB limit.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let big = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let _ = s.write_all(big.as_bytes());
    let mut raw = Vec::new();
    // hyper answers 431 and closes; the client may see the close as a reset
    // (the rest of its request was never read) before it reads the answer.
    let _ = s.read_to_end(&mut raw);
    let reply = String::from_utf8_lossy(&raw);
    assert!(
        raw.is_empty() || reply.starts_with("HTTP/1.1 431"),
        "{reply}"
    );
    // An HTTP/1.0 client gets an HTTP/1.0 answer.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
    assert!(text.ends_with(BODY), "{text}");
    let stats = server.stop();
    assert_eq!(stats.open, 0);
    assert_eq!(stats.responses, 9, "{stats:?}");
}

#[test]
fn a_client_that_never_reads_does_not_block_the_next_scrape() {
    // Big bodies while `big` is set: far more than the loopback socket
    // buffers hold, so the server's write to a client that does not read
    // stays pending.
    let big = Arc::new(AtomicBool::new(true));
    let config = ServerConfig {
        connection_deadline: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let server = MetricsServer::start("127.0.0.1:0", config, {
        let big = big.clone();
        move || {
            if big.load(Ordering::Relaxed) {
                "x".repeat(32 << 20)
            } else {
                BODY.to_string()
            }
        }
    })
    .unwrap();
    let addr = server.local_addr();
    let stuck: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            s
        })
        .collect();
    assert!(wait_for(Duration::from_secs(2), || server
        .stats()
        .responses
        >= 3));
    big.store(false, Ordering::Relaxed);
    // Let the server fill their socket buffers and block on the rest.
    std::thread::sleep(Duration::from_millis(200));
    let r = scrape(addr);
    eprintln!(
        "scrape with 3 clients not reading 32 MiB each: {:?}",
        r.took
    );
    assert_eq!(r.status, "HTTP/1.1 200 OK");
    assert_eq!(r.body, BODY.as_bytes());
    assert!(r.took < Duration::from_secs(1), "{r:?}");
    // The three are still held (the scrape's own connection closes as it ends).
    assert!(
        wait_for(Duration::from_millis(500), || server.stats().open == 3),
        "{:?}",
        server.stats()
    );
    // The connection deadline (1 s here) cuts the three off.
    assert!(
        wait_for(Duration::from_secs(3), || server.stats().timed_out >= 3),
        "{:?}",
        server.stats()
    );
    assert_eq!(server.stats().open, 0);
    drop(stuck);
}

#[test]
fn connections_beyond_the_limit_are_closed_and_counted() {
    let server = start(ServerConfig {
        max_connections: 8,
        ..ServerConfig::default()
    });
    let addr = server.local_addr();
    let held: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    assert!(wait_for(Duration::from_secs(1), || server.stats().open == 8));
    // Five more: each is closed at once, unanswered.
    for _ in 0..5 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let t0 = Instant::now();
        let mut raw = Vec::new();
        // EOF, or a reset if the request arrived after the close.
        let _ = s.read_to_end(&mut raw);
        assert!(raw.is_empty(), "{}", String::from_utf8_lossy(&raw));
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
    let stats = server.stats();
    assert_eq!(
        (stats.refused, stats.open, stats.accepted),
        (5, 8, 8),
        "{stats:?}"
    );
    // Once the held connections go away, scrapes are served again.
    drop(held);
    assert!(wait_for(Duration::from_secs(2), || server.stats().open == 0));
    let r = scrape(addr);
    assert_eq!(r.status, "HTTP/1.1 200 OK");
    assert_eq!(r.body, BODY.as_bytes());
    assert_eq!(server.stats().refused, 5);
}

#[test]
fn idle_clients_are_cut_off_by_the_header_timeout() {
    let server = start(ServerConfig {
        header_read_timeout: Duration::from_millis(200),
        ..ServerConfig::default()
    });
    let addr = server.local_addr();
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    assert!(
        wait_for(Duration::from_secs(3), || server.stats().timed_out == 4),
        "{:?}",
        server.stats()
    );
    assert_eq!(server.stats().open, 0);
    drop(idle);
}

#[test]
fn stop_is_prompt_with_connections_open_and_frees_the_port() {
    let server = start(ServerConfig::default());
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    let _idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
    assert!(wait_for(Duration::from_secs(1), || server.stats().open == 10));
    let t0 = Instant::now();
    let stats = server.stop();
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(500), "stop took {took:?}");
    assert_eq!(stats.accepted, 10);
    assert!(
        TcpStream::connect(addr).is_err(),
        "still listening on {addr}"
    );
    // The same address can be bound again.
    let again = MetricsServer::start(addr, ServerConfig::default(), || BODY.to_string()).unwrap();
    assert_eq!(scrape(again.local_addr()).body, BODY.as_bytes());
}

#[test]
fn a_zero_connection_limit_or_a_taken_address_is_an_error() {
    let zero = MetricsServer::start(
        "127.0.0.1:0",
        ServerConfig {
            max_connections: 0,
            ..ServerConfig::default()
        },
        String::new,
    );
    assert_eq!(zero.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    let first = start(ServerConfig::default());
    assert!(
        MetricsServer::start(first.local_addr(), ServerConfig::default(), String::new).is_err()
    );
}

#[test]
fn own_counters_are_exported_before_eof() {
    let server = MetricsServer::start_with_own_counters(
        "127.0.0.1:0",
        ServerConfig {
            max_connections: 2,
            header_read_timeout: Duration::from_millis(200),
            ..ServerConfig::default()
        },
        "tollgate_test",
        || BODY.to_string(),
    )
    .unwrap();
    let addr = server.local_addr();
    // Two idle clients fill the limit; a third is refused; the two time out.
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    assert!(wait_for(Duration::from_secs(1), || server.stats().open == 2));
    let third = TcpStream::connect(addr).unwrap();
    assert!(wait_for(Duration::from_secs(3), || {
        let s = server.stats();
        s.refused == 1 && s.timed_out == 2 && s.open == 0
    }));
    let body = String::from_utf8(scrape(addr).body).unwrap();
    let want = "# TYPE tollgate_up gauge\ntollgate_up 1\n\
        # HELP tollgate_test_metrics_http_refused Connections to this metrics endpoint closed unanswered because its connection limit was reached.\n\
        # TYPE tollgate_test_metrics_http_refused counter\n\
        tollgate_test_metrics_http_refused_total 1\n\
        # HELP tollgate_test_metrics_http_timed_out Connections to this metrics endpoint cut off by its request-head or connection deadline.\n\
        # TYPE tollgate_test_metrics_http_timed_out counter\n\
        tollgate_test_metrics_http_timed_out_total 2\n# EOF\n";
    assert_eq!(body, want);
    drop((idle, third));
}

#[test]
fn families_go_before_eof_whatever_the_ending() {
    use tollgate_metrics_http::insert_families;
    let f = "# TYPE b counter\nb_total 1\n";
    let want = "a 1\n# TYPE b counter\nb_total 1\n# EOF\n";
    assert_eq!(insert_families("a 1\n# EOF\n", f), want);
    assert_eq!(insert_families("a 1\n# EOF", f), want);
    assert_eq!(insert_families("a 1", f), want);
    assert_eq!(
        insert_families("", f),
        "# TYPE b counter\nb_total 1\n# EOF\n"
    );
}

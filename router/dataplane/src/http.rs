//! A minimal HTTP endpoint serving the latest Prometheus text on any GET
//! (`/metrics` by convention). Runs on its own non-EAL thread; the
//! dataplane replaces the text at every stats interval.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::dataplane::{SharedText, STOP};

/// Bind `addr` and serve `text` until [`STOP`].
pub fn serve(addr: &str, text: SharedText) -> std::io::Result<JoinHandle<()>> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("tollgate-metrics".into()).spawn(move || {
        while !STOP.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                    let mut req = [0u8; 1024];
                    let _ = s.read(&mut req);
                    let body = text.lock().map(|t| t.clone()).unwrap_or_default();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(body.as_bytes()));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    })
}

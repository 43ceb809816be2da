//! A minimal HTTP endpoint serving the metrics on any GET (`/metrics` by
//! convention). Runs on its own non-EAL thread and encodes the OpenMetrics
//! text at each scrape from the latest [`Published`] snapshot, so the
//! forwarding loop never formats text.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::dataplane::STOP;
use crate::stats::{Published, OPENMETRICS_CONTENT_TYPE};

/// Bind `addr` and serve the latest snapshot in `published` until [`STOP`].
pub fn serve(addr: &str, published: Arc<Published>) -> std::io::Result<JoinHandle<()>> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("tollgate-metrics".into())
        .spawn(move || {
            while !STOP.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, peer)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                        let mut req = [0u8; 1024];
                        let _ = s.read(&mut req);
                        let body = published.latest().render_prometheus();
                        tracing::trace!(%peer, bytes = body.len(), "metrics scrape");
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: {OPENMETRICS_CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = s
                            .write_all(head.as_bytes())
                            .and_then(|_| s.write_all(body.as_bytes()));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        })
}

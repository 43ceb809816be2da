//! A socket wrapper that injects loss and reordering on send, for tests.
//!
//! Each outgoing datagram is dropped with probability `loss`; otherwise, with
//! probability `reorder`, it is held back and sent right after the next
//! datagram (a swap of two neighbours). Deterministic for a given seed.

use std::io;
use std::net::SocketAddr;

use tollgate_cca::rng::{self, SimRng};

use crate::driver::DatagramSocket;
use crate::udp::RecvMeta;

/// Loss and reordering on top of another [`DatagramSocket`].
#[derive(Debug)]
pub struct Impaired<S> {
    inner: S,
    loss: f64,
    reorder: f64,
    rng: SimRng,
    held: Option<(SocketAddr, Vec<u8>, u8)>,
    /// Datagrams dropped.
    pub dropped: u64,
    /// Datagrams sent out of order.
    pub reordered: u64,
    /// Datagrams passed through.
    pub sent: u64,
}

impl<S: DatagramSocket> Impaired<S> {
    /// Wrap `inner`: drop with probability `loss`, swap with the next datagram
    /// with probability `reorder`.
    pub fn new(inner: S, loss: f64, reorder: f64, seed: u64) -> Self {
        Impaired {
            inner,
            loss,
            reorder,
            rng: rng::seeded(seed),
            held: None,
            dropped: 0,
            reordered: 0,
            sent: 0,
        }
    }

    fn send_one(&mut self, dest: SocketAddr, data: &[u8], tos: u8) -> io::Result<()> {
        if rng::chance(&mut self.rng, self.loss) {
            self.dropped += 1;
            return Ok(());
        }
        if self.held.is_none() && rng::chance(&mut self.rng, self.reorder) {
            self.held = Some((dest, data.to_vec(), tos));
            return Ok(());
        }
        self.inner.send(dest, data, tos, None)?;
        self.sent += 1;
        if let Some((d, bytes, t)) = self.held.take() {
            self.reordered += 1;
            self.sent += 1;
            // A held datagram that cannot be sent now is simply lost.
            let _ = self.inner.send(d, &bytes, t, None);
        }
        Ok(())
    }
}

impl<S: DatagramSocket> DatagramSocket for Impaired<S> {
    fn send(
        &mut self,
        dest: SocketAddr,
        data: &[u8],
        tos: u8,
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        match segment_size {
            Some(seg) if seg > 0 => {
                for chunk in data.chunks(seg) {
                    self.send_one(dest, chunk, tos)?;
                }
                Ok(())
            }
            _ => self.send_one(dest, data, tos),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        self.inner.recv(buf)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn source(&mut self) -> &mut mio::net::UdpSocket {
        self.inner.source()
    }

    fn gso(&self) -> bool {
        false
    }
}

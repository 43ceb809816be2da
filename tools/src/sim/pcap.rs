//! Packet captures of the emulated hosts (`tollgate sim --pcap DIR`).
//!
//! Two files, as `tcpdump` would record them on the hosts' interfaces of a
//! testbed run: `sender.pcap` holds every datagram a flow's client (the data
//! sender) puts on its access link and every datagram delivered to it;
//! `receiver.pcap` the same for the servers. Timestamps are virtual time
//! (nanosecond pcap); each record is an IPv4/UDP datagram (link type RAW)
//! with the hosts' emulated addresses and the first [`SNAPLEN`] bytes, so
//! the same analysis runs on a simulated and a captured run
//! (tools/reproduce/noise/pcap_timing.py).

use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

/// Bytes of each datagram kept (IPv4 and UDP headers plus the start of
/// the QUIC packet, enough to tell packets apart).
pub const SNAPLEN: usize = 96;

/// The two capture files.
pub struct Pcap {
    sender: PcapWriter<BufWriter<File>>,
    receiver: PcapWriter<BufWriter<File>>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Pcap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pcap").finish_non_exhaustive()
    }
}

fn writer(path: &Path) -> anyhow::Result<PcapWriter<BufWriter<File>>> {
    let file = File::create(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let header = PcapHeader {
        datalink: DataLink::RAW,
        ts_resolution: TsResolution::NanoSecond,
        snaplen: SNAPLEN as u32,
        ..PcapHeader::default()
    };
    PcapWriter::with_header(BufWriter::with_capacity(1 << 20, file), header)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

impl Pcap {
    /// Create `dir/sender.pcap` and `dir/receiver.pcap` (and `dir`).
    pub fn create(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        Ok(Pcap {
            sender: writer(&dir.join("sender.pcap"))?,
            receiver: writer(&dir.join("receiver.pcap"))?,
            scratch: Vec::with_capacity(SNAPLEN),
        })
    }

    /// Record `payload` (a UDP payload from `from` to `to`) at virtual time
    /// `t_ns` on a client's interface (`at_client`) or a server's.
    pub fn record(
        &mut self,
        at_client: bool,
        t_ns: u64,
        from: SocketAddr,
        to: SocketAddr,
        payload: &[u8],
    ) -> anyhow::Result<()> {
        self.write_one(&Captured::new(at_client, t_ns, from, to, payload))
    }

    /// Write the captured datagrams of every logical process of the engine,
    /// earliest first (ties in the order of `bufs`), and empty the buffers.
    pub fn write<'b>(
        &mut self,
        bufs: impl Iterator<Item = &'b mut Vec<Captured>>,
    ) -> anyhow::Result<()> {
        let mut all: Vec<Captured> = Vec::new();
        for b in bufs {
            all.append(b);
        }
        all.sort_by_key(|c| c.t_ns);
        all.iter().try_for_each(|c| self.write_one(c))
    }

    fn write_one(&mut self, c: &Captured) -> anyhow::Result<()> {
        let (SocketAddr::V4(src), SocketAddr::V4(dst)) = (c.from, c.to) else {
            return Ok(()); // the emulator's hosts are IPv4
        };
        let udp_len = 8 + c.len;
        let ip_len = 20 + udp_len;
        let b = &mut self.scratch;
        b.clear();
        // IPv4 header: version 4, IHL 5, no options, TTL 64, protocol UDP;
        // the checksum is left zero (nothing reads it).
        b.extend_from_slice(&[0x45, 0]);
        b.extend_from_slice(&(ip_len as u16).to_be_bytes());
        b.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
        b.extend_from_slice(&src.ip().octets());
        b.extend_from_slice(&dst.ip().octets());
        b.extend_from_slice(&src.port().to_be_bytes());
        b.extend_from_slice(&dst.port().to_be_bytes());
        b.extend_from_slice(&(udp_len as u16).to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        let keep = SNAPLEN.saturating_sub(b.len()).min(c.head.len());
        b.extend_from_slice(&c.head[..keep]);
        let packet = PcapPacket::new(Duration::from_nanos(c.t_ns), ip_len as u32, b);
        let out = if c.at_client {
            &mut self.sender
        } else {
            &mut self.receiver
        };
        out.write_packet(&packet)
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("pcap: {e}"))
    }
}

/// One datagram seen on a host's interface, waiting to be written.
#[derive(Debug)]
pub struct Captured {
    at_client: bool,
    t_ns: u64,
    from: SocketAddr,
    to: SocketAddr,
    /// The start of the payload (what the snapshot length keeps).
    head: Vec<u8>,
    /// The payload's length.
    len: usize,
}

impl Captured {
    /// `payload` (a UDP payload from `from` to `to`) at virtual time `t_ns`
    /// on a client's interface (`at_client`) or a server's.
    pub fn new(
        at_client: bool,
        t_ns: u64,
        from: SocketAddr,
        to: SocketAddr,
        payload: &[u8],
    ) -> Self {
        Captured {
            at_client,
            t_ns,
            from,
            to,
            head: payload[..payload.len().min(SNAPLEN)].to_vec(),
            len: payload.len(),
        }
    }
}

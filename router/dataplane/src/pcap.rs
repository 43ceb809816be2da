//! A size-bounded pcap writer (libpcap format, LINKTYPE_ETHERNET,
//! microsecond timestamps) for forwarded or dropped frames; readable by
//! Wireshark and tshark. Writes go through a fixed 1 MiB buffer; when the
//! file would exceed `max_bytes`, capture stops (counted in `skipped`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use tollgate_cca::Time;

/// A pcap file being written.
#[derive(Debug)]
pub struct PcapWriter {
    out: Option<BufWriter<File>>,
    written: u64,
    max_bytes: u64,
    snaplen: u32,
    epoch_ns: u64,
    /// Frames written.
    pub frames: u64,
    /// Frames not written (size bound reached or write error).
    pub skipped: u64,
}

impl PcapWriter {
    /// Create `path`; timestamps are wall-clock at start plus the dataplane's `now`.
    pub fn create(path: &str, max_bytes: u64, snaplen: u32) -> std::io::Result<PcapWriter> {
        let file = File::create(path)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let snaplen = snaplen.clamp(64, 65_535);
        // Global header: magic, version 2.4, thiszone 0, sigfigs 0, snaplen, LINKTYPE_ETHERNET.
        out.write_all(&0xA1B2_C3D4u32.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?;
        out.write_all(&snaplen.to_le_bytes())?;
        out.write_all(&1u32.to_le_bytes())?;
        let epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Ok(PcapWriter {
            out: Some(out),
            written: 24,
            max_bytes,
            snaplen,
            epoch_ns,
            frames: 0,
            skipped: 0,
        })
    }

    /// Record one frame of original length `orig_len` whose first bytes are `data`.
    pub fn record(&mut self, now: Time, data: &[u8], orig_len: u32) {
        let incl = data.len().min(self.snaplen as usize);
        let size = 16 + incl as u64;
        let Some(out) = self.out.as_mut() else {
            self.skipped += 1;
            return;
        };
        if self.written + size > self.max_bytes {
            self.skipped += 1;
            return;
        }
        let t = self.epoch_ns + now.as_nanos();
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        hdr[4..8].copy_from_slice(&(((t % 1_000_000_000) / 1000) as u32).to_le_bytes());
        hdr[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        hdr[12..16].copy_from_slice(&orig_len.max(incl as u32).to_le_bytes());
        if out
            .write_all(&hdr)
            .and_then(|_| out.write_all(&data[..incl]))
            .is_err()
        {
            self.out = None;
            self.skipped += 1;
            return;
        }
        self.written += size;
        self.frames += 1;
    }

    /// Flush to disk.
    pub fn flush(&mut self) {
        if let Some(out) = self.out.as_mut() {
            let _ = out.flush();
        }
    }
}

//! A size-bounded pcap writer (libpcap format, LINKTYPE_ETHERNET,
//! microsecond timestamps) for forwarded or dropped frames; readable by
//! Wireshark and tshark.
//!
//! The forwarding core never writes to the file: [`PcapWriter::record`]
//! copies the record (header and the first `snaplen` bytes) into a
//! preallocated single-producer single-consumer ring of fixed-size slots,
//! and a writer thread drains the ring to the file. When the ring is full
//! (the disk is slower than the capture) the record is dropped and counted
//! (`ring_full`), so capture never stalls forwarding. When the file would
//! exceed `max_bytes`, capture stops (counted in `skipped`).

use std::cell::UnsafeCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tollgate_cca::Time;

/// Bytes of ring between the forwarding core and the writer thread.
pub const RING_BYTES: usize = 4 << 20;

/// The ring shared by the forwarding core (producer) and the writer thread.
struct Ring {
    /// `slots * slot_bytes` bytes; slot `i % slots` holds record `i`: a
    /// 16-byte pcap record header followed by the captured bytes.
    buf: Box<[UnsafeCell<u8>]>,
    slot_bytes: usize,
    slots: u64,
    /// Records taken by the writer.
    head: AtomicU64,
    /// Records put by the producer.
    tail: AtomicU64,
    /// The producer is done: drain and stop.
    closed: AtomicBool,
    /// Records the writer could not write (I/O error).
    write_failed: AtomicU64,
}

// SAFETY: the producer writes only the slots of records [tail, head +
// slots), the consumer reads only those of [head, tail); the Release store
// of `tail` (resp. `head`) publishes a slot's bytes to the other side,
// which loads it with Acquire before touching the slot.
unsafe impl Sync for Ring {}

impl Ring {
    fn slot_ptr(&self, record: u64) -> *mut u8 {
        let i = (record % self.slots) as usize * self.slot_bytes;
        self.buf[i].get()
    }
}

/// A pcap file being written by a background thread.
pub struct PcapWriter {
    ring: Arc<Ring>,
    thread: Option<JoinHandle<()>>,
    written: u64,
    max_bytes: u64,
    snaplen: u32,
    epoch_ns: u64,
    /// Frames handed to the writer thread.
    pub frames: u64,
    /// Frames not captured because the file reached `max_bytes`.
    pub skipped: u64,
    /// Frames not captured because the ring was full (the writer thread or
    /// the disk fell behind).
    pub ring_full: u64,
}

impl std::fmt::Debug for PcapWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapWriter")
            .field("written", &self.written)
            .field("frames", &self.frames)
            .field("skipped", &self.skipped)
            .field("ring_full", &self.ring_full)
            .finish()
    }
}

impl PcapWriter {
    /// Create `path` and start the writer thread; timestamps are
    /// wall-clock at start plus the dataplane's `now`.
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
        let slot_bytes = 16 + snaplen as usize;
        let slots = (RING_BYTES / slot_bytes).max(64);
        let ring = Arc::new(Ring {
            buf: (0..slots * slot_bytes)
                .map(|_| UnsafeCell::new(0))
                .collect(),
            slot_bytes,
            slots: slots as u64,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            write_failed: AtomicU64::new(0),
        });
        let r = ring.clone();
        let thread = std::thread::Builder::new()
            .name("tollgate-pcap".into())
            .spawn(move || drain_to_file(&r, out))?;
        Ok(PcapWriter {
            ring,
            thread: Some(thread),
            written: 24,
            max_bytes,
            snaplen,
            epoch_ns,
            frames: 0,
            skipped: 0,
            ring_full: 0,
        })
    }

    /// Record one frame of original length `orig_len` whose first bytes
    /// are `data`: a copy into the ring, never a write or a wait.
    #[inline]
    pub fn record(&mut self, now: Time, data: &[u8], orig_len: u32) {
        let incl = data.len().min(self.snaplen as usize);
        let size = 16 + incl as u64;
        if self.written + size > self.max_bytes || self.thread.is_none() {
            self.skipped += 1;
            return;
        }
        let r = &*self.ring;
        let tail = r.tail.load(Ordering::Relaxed);
        if tail - r.head.load(Ordering::Acquire) >= r.slots {
            self.ring_full += 1;
            return;
        }
        let t = self.epoch_ns + now.as_nanos();
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        hdr[4..8].copy_from_slice(&(((t % 1_000_000_000) / 1000) as u32).to_le_bytes());
        hdr[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        hdr[12..16].copy_from_slice(&orig_len.max(incl as u32).to_le_bytes());
        // SAFETY: slot `tail` is the producer's (the ring is not full); it
        // holds 16 + snaplen >= 16 + incl bytes.
        unsafe {
            let p = r.slot_ptr(tail);
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), p, 16);
            std::ptr::copy_nonoverlapping(data.as_ptr(), p.add(16), incl);
        }
        r.tail.store(tail + 1, Ordering::Release);
        self.written += size;
        self.frames += 1;
    }

    /// Frames the writer thread failed to write (I/O errors).
    pub fn write_failed(&self) -> u64 {
        self.ring.write_failed.load(Ordering::Relaxed)
    }

    /// Let the writer thread write everything recorded so far, flush the
    /// file and stop. Later records are skipped. Not for the forwarding
    /// loop (it waits for the thread).
    pub fn flush(&mut self) {
        self.ring.closed.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PcapWriter {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The writer thread: copy records from the ring to the file until closed
/// and empty.
fn drain_to_file(r: &Ring, mut out: BufWriter<File>) {
    let mut ok = true;
    loop {
        // Read `closed` before `tail`: once closed, the producer has put
        // its last record, so this pass sees it.
        let closed = r.closed.load(Ordering::Acquire);
        let head = r.head.load(Ordering::Relaxed);
        let tail = r.tail.load(Ordering::Acquire);
        for rec in head..tail {
            // SAFETY: records [head, tail) are the consumer's; each slot
            // starts with its 16-byte header, whose `incl` field is at most
            // snaplen, so the record lies inside the slot.
            let bytes = unsafe {
                let p = r.slot_ptr(rec);
                let mut incl = [0u8; 4];
                std::ptr::copy_nonoverlapping(p.add(8), incl.as_mut_ptr(), 4);
                let len = 16 + (u32::from_le_bytes(incl) as usize).min(r.slot_bytes - 16);
                std::slice::from_raw_parts(p.cast_const(), len)
            };
            if ok && out.write_all(bytes).is_err() {
                ok = false;
            }
            if !ok {
                r.write_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        r.head.store(tail, Ordering::Release);
        if closed && head == tail {
            break;
        }
        if head == tail {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_reach_the_file_in_order_and_a_full_ring_counts_drops() {
        let path = std::env::temp_dir().join(format!("tg-pcap-{}.pcap", std::process::id()));
        let path = path.to_str().unwrap().to_string();
        let mut w = PcapWriter::create(&path, 1 << 30, 64).unwrap();
        let n = 200_000u32;
        for i in 0..n {
            let frame = [i.to_le_bytes(), [0xAB; 4]].concat();
            w.record(Time::from_nanos(u64::from(i) * 1000), &frame, 60);
        }
        w.flush();
        let (frames, ring_full) = (w.frames, w.ring_full);
        assert_eq!(frames + ring_full, u64::from(n));
        assert_eq!(w.write_failed(), 0);
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(bytes.len() as u64, 24 + frames * (16 + 8));
        // The frames in the file are a subsequence of 0..n, in order.
        let mut last = None;
        for rec in bytes[24..].chunks(24) {
            assert_eq!(u32::from_le_bytes(rec[8..12].try_into().unwrap()), 8);
            assert_eq!(u32::from_le_bytes(rec[12..16].try_into().unwrap()), 60);
            let i = u32::from_le_bytes(rec[16..20].try_into().unwrap());
            assert!(last.is_none_or(|l| i > l), "{i} after {last:?}");
            assert_eq!(&rec[20..24], &[0xAB; 4]);
            last = Some(i);
        }
        // Records after flush are skipped, not written.
        w.record(Time::ZERO, &[0; 60], 60);
        assert_eq!(w.skipped, 1);
    }
}

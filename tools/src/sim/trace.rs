//! An optional packet trace for debugging the emulator (off by default).
//!
//! Set `TOLLGATE_TRACE=/path/file.csv` (and optionally
//! `TOLLGATE_TRACE_FROM=<seconds>`, default 0) to write one line per event
//! from that virtual time on:
//!
//! | line | meaning |
//! |---|---|
//! | `A,t_ns,flow,qlen,dropped,sent_ns` | a data packet reached the first forward bottleneck port; `qlen` is the discipline's length (packets) just before it arrived; `dropped` 1 if the port dropped it; `sent_ns` when its sender emitted it |
//! | `K,t_ns,flow,cwnd,in_flight` | a datagram (ACKs) reached a flow's data sender; its CCA window and bytes in flight afterwards |
//! | `D,t_ns,flow` | a data packet left the first forward bottleneck port (start of transmission) |
//! | `F,flow,af_tx,af_rx,acks_rx,immediate_acks_tx` | at the end: ACK_FREQUENCY frames the sender sent and the receiver got, ACK frames the sender got, IMMEDIATE_ACK frames it sent |
//!
//! Without the variable nothing is opened and the engine pays one branch per event.

use std::fs::File;
use std::io::{BufWriter, Write};

/// The trace writer. Each logical process of the engine writes into its own
/// [`TraceLines`]; the engine hands them to [`Trace::write`] after every
/// window, which writes them in time order.
#[derive(Debug)]
pub struct Trace {
    out: BufWriter<File>,
    from_ns: u64,
    merged: Vec<(u64, String)>,
}

/// Trace lines of one logical process, waiting to be written.
#[derive(Debug, Default)]
pub struct TraceLines {
    from_ns: u64,
    lines: Vec<(u64, String)>,
}

impl Trace {
    /// A trace if `TOLLGATE_TRACE` names a file.
    pub fn from_env() -> anyhow::Result<Option<Self>> {
        let Some(path) = std::env::var_os("TOLLGATE_TRACE") else {
            return Ok(None);
        };
        let from_s: f64 = match std::env::var("TOLLGATE_TRACE_FROM") {
            Ok(v) => v
                .parse()
                .map_err(|e| anyhow::anyhow!("TOLLGATE_TRACE_FROM={v}: {e}"))?,
            Err(_) => 0.0,
        };
        let f = File::create(&path)
            .map_err(|e| anyhow::anyhow!("TOLLGATE_TRACE={}: {e}", path.to_string_lossy()))?;
        Ok(Some(Trace {
            out: BufWriter::with_capacity(1 << 20, f),
            from_ns: (from_s * 1e9).round() as u64,
            merged: Vec::new(),
        }))
    }

    /// An empty buffer for one logical process.
    pub fn lines(&self) -> TraceLines {
        TraceLines {
            from_ns: self.from_ns,
            lines: Vec::new(),
        }
    }

    /// Write the buffered lines of every logical process, earliest first
    /// (ties in the order of `bufs`), and empty the buffers.
    pub fn write<'b>(&mut self, bufs: impl Iterator<Item = &'b mut TraceLines>) {
        for b in bufs {
            self.merged.append(&mut b.lines);
        }
        self.merged.sort_by_key(|(t, _)| *t);
        for (_, line) in self.merged.drain(..) {
            let _ = writeln!(self.out, "{line}");
        }
    }

    /// End-of-run counters of a flow's connection (sender, receiver).
    pub fn flow_end(
        &mut self,
        flow: u32,
        sender: &tollgate_transport::ConnReport,
        receiver: Option<&tollgate_transport::ConnReport>,
    ) {
        let _ = writeln!(
            self.out,
            "F,{flow},{},{},{},{}",
            sender.quic.frame_tx.ack_frequency,
            receiver.map_or(0, |r| r.quic.frame_rx.ack_frequency),
            sender.quic.frame_rx.acks,
            sender.quic.frame_tx.immediate_ack,
        );
    }

    /// Flush at the end of the run.
    pub fn finish(&mut self) {
        let _ = self.out.flush();
    }
}

impl TraceLines {
    fn on(&self, t: u64) -> bool {
        t >= self.from_ns
    }

    /// A data packet arrived at the first forward port.
    pub fn arrival(&mut self, t: u64, flow: u32, qlen: usize, dropped: bool, sent_ns: u64) {
        if self.on(t) {
            let line = format!("A,{t},{flow},{qlen},{},{sent_ns}", u8::from(dropped));
            self.lines.push((t, line));
        }
    }

    /// A data packet started transmission at the first forward port.
    pub fn departure(&mut self, t: u64, flow: u32) {
        if self.on(t) {
            self.lines.push((t, format!("D,{t},{flow}")));
        }
    }

    /// A datagram reached a data sender.
    pub fn ack(&mut self, t: u64, flow: u32, cwnd: u64, in_flight: u64) {
        if self.on(t) {
            self.lines
                .push((t, format!("K,{t},{flow},{cwnd},{in_flight}")));
        }
    }
}

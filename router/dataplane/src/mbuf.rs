//! Mbufs as packet handles.
//!
//! [`Mbuf`] owns one `rte_mbuf` (chain) and returns it to its pool when
//! dropped, so a packet dropped anywhere in the pipeline (a discipline's
//! verdict, a full delay line, shutdown) is freed exactly once. [`Pkt`] is
//! an mbuf plus the library's [`PacketMeta`] and implements
//! [`PacketHandle`](tollgate_router::PacketHandle): that is what the disciplines queue. Nothing here
//! allocates; `Pkt` moves by value through the library's preallocated rings.

use std::ptr::NonNull;

use tollgate_router::packet::parse_ethernet;
use tollgate_router::packet::set_ce_in_frame;
use tollgate_router::{PacketMeta, WithMeta};

use crate::ffi;

/// An owned mbuf.
#[derive(Debug)]
pub struct Mbuf(NonNull<ffi::RteMbuf>);

// SAFETY: an mbuf is a plain buffer owned by exactly one Mbuf; DPDK mempools
// are multi-thread safe for get/put, so freeing on another thread is sound.
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Take ownership of a raw mbuf.
    ///
    /// # Safety
    /// `ptr` must be a valid mbuf from a DPDK pool that nobody else owns or frees.
    #[inline]
    pub unsafe fn from_raw(ptr: NonNull<ffi::RteMbuf>) -> Mbuf {
        Mbuf(ptr)
    }

    /// Give up ownership (e.g. to a TX burst).
    #[inline]
    pub fn into_raw(self) -> *mut ffi::RteMbuf {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The first segment's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        // SAFETY: the mbuf is valid and owned; its first segment holds
        // `data_len` initialised bytes at `mtod`, borrowed for &self.
        unsafe {
            let p = ffi::tg_mbuf_data(self.0.as_ptr());
            std::slice::from_raw_parts(p, usize::from(ffi::tg_mbuf_data_len(self.0.as_ptr())))
        }
    }

    /// The first segment's bytes, mutably.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `data`, with exclusive access through &mut self.
        unsafe {
            let p = ffi::tg_mbuf_data(self.0.as_ptr());
            std::slice::from_raw_parts_mut(p, usize::from(ffi::tg_mbuf_data_len(self.0.as_ptr())))
        }
    }

    /// Overwrite the packet with `frame` (single segment). Returns false if it does not fit.
    pub fn write_frame(&mut self, frame: &[u8]) -> bool {
        // SAFETY: the mbuf is valid and exclusively ours; the room check keeps
        // the copy inside the first segment's buffer.
        unsafe {
            let m = self.0.as_ptr();
            if frame.len() > usize::from(ffi::tg_mbuf_room(m)) {
                return false;
            }
            ffi::tg_mbuf_set_len(m, frame.len() as u16);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), ffi::tg_mbuf_data(m), frame.len());
        }
        true
    }

    /// Length of the whole chain.
    #[inline]
    pub fn pkt_len(&self) -> u32 {
        // SAFETY: the mbuf is valid.
        unsafe { ffi::tg_mbuf_pkt_len(self.0.as_ptr()) }
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; after this it is never touched again.
        unsafe { ffi::tg_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// A queued packet: the mbuf and its classification.
#[derive(Debug)]
pub struct Pkt {
    /// The buffer.
    pub mbuf: Mbuf,
    /// Length, flow hash, variant, ECN, flow end.
    pub meta: PacketMeta,
}

impl WithMeta for Pkt {
    #[inline]
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    fn mark_ce(&mut self) -> bool {
        // Marking is rare: re-parse for the header offsets instead of
        // carrying the whole PacketInfo in every queued handle.
        let Ok(info) = parse_ethernet(self.mbuf.data()) else {
            return false;
        };
        if set_ce_in_frame(self.mbuf.data_mut(), &info) {
            self.meta.ecn = tollgate_router::packet::Ecn::Ce;
            true
        } else {
            false
        }
    }
}

/// A burst of raw mbuf pointers for `rx_burst` / `tx_burst`.
#[derive(Debug)]
pub struct Burst<const N: usize> {
    /// Pointer slots.
    pub ptrs: [*mut ffi::RteMbuf; N],
    /// Filled slots.
    pub len: usize,
}

impl<const N: usize> Default for Burst<N> {
    fn default() -> Self {
        Burst {
            ptrs: [std::ptr::null_mut(); N],
            len: 0,
        }
    }
}

impl<const N: usize> Burst<N> {
    /// Capacity.
    pub const CAP: usize = N;

    /// Receive up to `max` packets (and at most the free slots) from `port`/`queue`, appending.
    #[inline]
    pub fn rx_upto(&mut self, port: u16, queue: u16, max: usize) -> usize {
        let room = (N - self.len).min(max).min(u16::MAX as usize) as u16;
        // SAFETY: the slice from `len` has `room` writable pointer slots;
        // rx_burst fills at most `room` of them with owned mbufs.
        let n =
            unsafe { ffi::tg_rx_burst(port, queue, self.ptrs.as_mut_ptr().add(self.len), room) };
        self.len += usize::from(n);
        usize::from(n)
    }

    /// Take ownership of the burst's packets, emptying it.
    pub fn drain(&mut self) -> impl Iterator<Item = Mbuf> + '_ {
        let n = std::mem::take(&mut self.len);
        self.ptrs[..n]
            .iter()
            .filter_map(|&p| NonNull::new(p))
            .map(|p| {
                // SAFETY: every filled slot holds an mbuf from rx_burst that nobody else owns.
                unsafe { Mbuf::from_raw(p) }
            })
    }

    /// Append an owned mbuf; hands it back if full.
    #[inline]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.len == N {
            return Err(m);
        }
        self.ptrs[self.len] = m.into_raw();
        self.len += 1;
        Ok(())
    }

    /// Whether full.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// Transmit on `port`/`queue`; unsent packets are freed. Returns (sent, freed).
    #[inline]
    pub fn tx(&mut self, port: u16, queue: u16) -> (usize, usize) {
        if self.len == 0 {
            return (0, 0);
        }
        let n = self.len;
        // SAFETY: the first `n` slots hold owned mbufs; tx_burst takes
        // ownership of the first `sent` of them.
        let sent =
            usize::from(unsafe { ffi::tg_tx_burst(port, queue, self.ptrs.as_mut_ptr(), n as u16) });
        if sent < n {
            // SAFETY: slots sent..n are still ours; free them.
            unsafe {
                ffi::tg_pktmbuf_free_bulk(self.ptrs.as_mut_ptr().add(sent), (n - sent) as u32)
            };
        }
        self.len = 0;
        (sent, n - sent)
    }
}

impl<const N: usize> Drop for Burst<N> {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the first `len` slots hold owned mbufs.
            unsafe { ffi::tg_pktmbuf_free_bulk(self.ptrs.as_mut_ptr(), self.len as u32) };
            self.len = 0;
        }
    }
}

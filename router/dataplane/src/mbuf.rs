//! Mbufs as packet handles.
//!
//! [`Mbuf`] owns one `rte_mbuf` (chain) and returns it to its pool when
//! dropped, so a packet dropped anywhere in the pipeline (a discipline's
//! verdict, a full delay line, shutdown) is freed exactly once. [`Pkt`] is
//! an mbuf plus a compact copy of the library's [`PacketMeta`](tollgate_router::PacketMeta) and implements
//! [`PacketHandle`]: that is what the disciplines queue. Nothing here
//! allocates; `Pkt` moves by value through the library's preallocated rings.

use std::ptr::NonNull;

use tollgate_cca::VariantId;
use tollgate_router::packet::{set_ce_at, Ecn, IpVersion};
use tollgate_router::port::Classified;
use tollgate_router::PacketHandle;

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

    /// Start of the first segment's data (`rte_pktmbuf_mtod`): `buf_addr + data_off`.
    #[inline(always)]
    fn data_ptr(&self) -> *mut u8 {
        let m = self.0.as_ptr().cast::<u8>();
        // SAFETY: the mbuf is valid; buf_addr and data_off are at the offsets
        // checked by `layout::check` (and by the shim at compile time).
        unsafe {
            let buf = m.add(layout::BUF_ADDR).cast::<*mut u8>().read();
            let off = m.add(layout::DATA_OFF).cast::<u16>().read();
            buf.add(usize::from(off))
        }
    }

    /// Bytes in the first segment (`data_len`).
    #[inline(always)]
    pub fn data_len(&self) -> u16 {
        // SAFETY: valid mbuf; data_len is a u16 at the checked offset.
        unsafe {
            self.0
                .as_ptr()
                .cast::<u8>()
                .add(layout::DATA_LEN)
                .cast::<u16>()
                .read()
        }
    }

    /// The first segment's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        // SAFETY: the mbuf is valid and owned; its first segment holds
        // `data_len` initialised bytes at `mtod`, borrowed for &self.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), usize::from(self.data_len())) }
    }

    /// The first segment's bytes, mutably.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `data`, with exclusive access through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), usize::from(self.data_len())) }
    }

    /// Prefetch the first cache line of the frame (the Ethernet / IP / L4
    /// headers of an untagged 64-byte frame) into L1.
    #[inline(always)]
    pub fn prefetch_data(&self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is a hint and never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                self.data_ptr().cast::<i8>(),
            );
        }
    }

    /// Overwrite the packet with `frame` (single segment). Returns false if it does not fit.
    #[inline]
    pub fn write_frame(&mut self, frame: &[u8]) -> bool {
        let m = self.0.as_ptr().cast::<u8>();
        // SAFETY: the mbuf is valid and exclusively ours; the fields are at
        // the checked offsets; the room check (buf_len - data_off) keeps the
        // copy inside the first segment's buffer.
        unsafe {
            let off = m.add(layout::DATA_OFF).cast::<u16>().read();
            let buf_len = m.add(layout::BUF_LEN).cast::<u16>().read();
            if frame.len() > usize::from(buf_len.saturating_sub(off)) {
                return false;
            }
            let len = frame.len() as u16;
            m.add(layout::DATA_LEN).cast::<u16>().write(len);
            m.add(layout::PKT_LEN).cast::<u32>().write(u32::from(len));
            std::ptr::copy_nonoverlapping(frame.as_ptr(), self.data_ptr(), frame.len());
        }
        true
    }

    /// Length of the whole chain.
    #[inline(always)]
    pub fn pkt_len(&self) -> u32 {
        // SAFETY: valid mbuf; pkt_len is a u32 at the checked offset.
        unsafe {
            self.0
                .as_ptr()
                .cast::<u8>()
                .add(layout::PKT_LEN)
                .cast::<u32>()
                .read()
        }
    }
}

/// Offsets of the `rte_mbuf` fields read directly on the fast path (DPDK
/// 22.11, `rte_mbuf_core.h`). The shim asserts them at compile time;
/// [`check`](layout::check) compares them with the shim's `offsetof` values
/// at start-up ([`crate::eal::Eal::init`] calls it).
pub mod layout {
    use crate::ffi;

    /// `void *buf_addr`.
    pub const BUF_ADDR: usize = 0;
    /// `uint16_t data_off`.
    pub const DATA_OFF: usize = 16;
    /// `uint16_t nb_segs`.
    pub const NB_SEGS: usize = 20;
    /// `uint32_t pkt_len`.
    pub const PKT_LEN: usize = 36;
    /// `uint16_t data_len`.
    pub const DATA_LEN: usize = 40;
    /// `uint16_t buf_len`.
    pub const BUF_LEN: usize = 54;

    /// Compare the offsets above with the C compiler's `offsetof` values
    /// from the shim; an error names the first field that differs.
    pub fn check() -> Result<(), String> {
        let mut c = [0u32; 6];
        // SAFETY: tg_mbuf_layout writes exactly six u32 values.
        unsafe { ffi::tg_mbuf_layout(c.as_mut_ptr()) };
        let ours = [
            ("buf_addr", BUF_ADDR),
            ("data_off", DATA_OFF),
            ("nb_segs", NB_SEGS),
            ("pkt_len", PKT_LEN),
            ("data_len", DATA_LEN),
            ("buf_len", BUF_LEN),
        ];
        for ((name, off), got) in ours.iter().zip(c) {
            if *off as u32 != got {
                return Err(format!(
                    "rte_mbuf layout mismatch: {name} is at offset {got} in this DPDK, the dataplane reads it at {off} (built for DPDK 22.11)"
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; after this it is never touched again.
        unsafe { ffi::tg_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// A queued packet: the mbuf and its classification, in 16 bytes: the mbuf
/// pointer and one word (`PktWord`) holding the length, the variant, ECN,
/// flags, the IP header's offset and 30 bits of the flow hash.
///
/// At 16 bytes the handle moves in two registers. At 24 (pointer, 64-bit
/// hash, and the small fields), every move went through the stack, and the
/// copy's wide loads could not be forwarded from the narrower stores that
/// had just built it: 14-19 % of `Router::run_pipeline`'s samples in the
/// DropTail profile (store-forwarding stalls). A ring slot
/// is a quarter of a cache line.
#[derive(Debug)]
pub struct Pkt {
    /// The buffer.
    pub mbuf: Mbuf,
    word: PktWord,
}

/// The classification part of a [`Pkt`], bit-packed:
///
/// | bits | field |
/// |---|---|
/// | 0-15 | frame length (the whole chain) in bytes, at most 65,535 |
/// | 16-21 | the variant's DSCP |
/// | 22-23 | ECN codepoint |
/// | 24-31 | flags ([`Pkt::FLOW_END`], [`Pkt::IPV6`], [`Pkt::BYPASS`]) and the rule delay class |
/// | 32-33 | VLAN tags before the IP header (its offset is 14 + 4 x this) |
/// | 34-63 | the flow hash's low 30 bits |
///
/// 16 bits of length suffice: the router enables no LRO, so a received
/// frame is at most the port's MTU (jumbo frames included); a longer chain
/// would be counted as 65,535 bytes. 30 bits of hash keep CHOKe's false
/// same-flow matches near 1e-9 per comparison and feed the disciplines'
/// own seeded mixing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PktWord(u64);

impl PktWord {
    const ECN_SHIFT: u32 = 22;
    const FLAGS_SHIFT: u32 = 24;
    const HASH_SHIFT: u32 = 34;

    #[inline(always)]
    fn pack(len: u32, variant: VariantId, ecn: Ecn, flags: u8, vlans: u8, hash: u64) -> PktWord {
        PktWord(
            u64::from(len.min(u32::from(u16::MAX)))
                | u64::from(variant.dscp() & 63) << 16
                | u64::from(ecn.bits()) << PktWord::ECN_SHIFT
                | u64::from(flags) << PktWord::FLAGS_SHIFT
                | u64::from(vlans & 3) << 32
                | hash << PktWord::HASH_SHIFT,
        )
    }

    #[inline(always)]
    fn len(self) -> u32 {
        (self.0 & 0xFFFF) as u32
    }

    #[inline(always)]
    fn variant(self) -> VariantId {
        VariantId::from_dscp((self.0 >> 16) as u8 & 63).unwrap_or(VariantId::UNMARKED)
    }

    #[inline(always)]
    fn ecn(self) -> Ecn {
        Ecn::from_bits((self.0 >> PktWord::ECN_SHIFT) as u8)
    }

    #[inline(always)]
    fn set_ecn(&mut self, ecn: Ecn) {
        self.0 =
            (self.0 & !(0b11 << PktWord::ECN_SHIFT)) | u64::from(ecn.bits()) << PktWord::ECN_SHIFT;
    }

    #[inline(always)]
    fn flags(self) -> u8 {
        (self.0 >> PktWord::FLAGS_SHIFT) as u8
    }

    #[inline(always)]
    fn l3_offset(self) -> usize {
        14 + 4 * ((self.0 >> 32) & 3) as usize
    }

    #[inline(always)]
    fn hash(self) -> u64 {
        self.0 >> PktWord::HASH_SHIFT
    }
}

impl Pkt {
    /// Flag: TCP FIN or RST.
    pub const FLOW_END: u8 = 1;
    /// Flag: the IP header is IPv6.
    pub const IPV6: u8 = 2;
    /// Flag: not IP (ARP...): the egress transmits it around the
    /// discipline (pipeline mode carries such frames over the same rings).
    pub const BYPASS: u8 = 4;
    /// The rule delay class lives in the top five bits of the flags;
    /// classes 1..=31 (`classify::MAX_RULE_DELAYS`).
    const DELAY_SHIFT: u8 = 3;

    /// A handle for a frame that goes around the discipline: no flow, no
    /// variant, [`Pkt::BYPASS`] set.
    #[inline]
    pub fn bypass(mbuf: Mbuf) -> Pkt {
        Pkt {
            word: PktWord::pack(
                mbuf.pkt_len(),
                VariantId::UNMARKED,
                Ecn::NotEct,
                Pkt::BYPASS,
                0,
                0,
            ),
            mbuf,
        }
    }

    /// A handle for `mbuf` classified as `c`; the length is the chain's
    /// `pkt_len` (the classifier saw the first segment only).
    #[inline]
    pub fn new(mbuf: Mbuf, c: &Classified) -> Pkt {
        let mut flags = 0;
        if c.flow_end {
            flags |= Pkt::FLOW_END;
        }
        if c.version == IpVersion::V6 {
            flags |= Pkt::IPV6;
        }
        flags |= (c.delay_class & 31) << Pkt::DELAY_SHIFT;
        // The parser puts the IP header after the Ethernet header and at
        // most two VLAN tags: 14 + 4 x tags.
        let vlans = (c.l3_offset.saturating_sub(14) / 4) as u8;
        Pkt {
            word: PktWord::pack(mbuf.pkt_len(), c.variant, c.ecn, flags, vlans, c.flow_hash),
            mbuf,
        }
    }

    /// [`Pkt::FLOW_END`] | [`Pkt::IPV6`] | [`Pkt::BYPASS`] and the delay class.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.word.flags()
    }

    /// The ECN codepoint.
    #[inline]
    pub fn ecn(&self) -> Ecn {
        self.word.ecn()
    }
}

impl PacketHandle for Pkt {
    #[inline]
    fn len_bytes(&self) -> u32 {
        self.word.len()
    }
    #[inline]
    fn flow_hash(&self) -> u64 {
        self.word.hash()
    }
    #[inline]
    fn variant(&self) -> VariantId {
        self.word.variant()
    }
    #[inline]
    fn ecn_capable(&self) -> bool {
        self.ecn().is_capable()
    }
    #[inline]
    fn l4s(&self) -> bool {
        matches!(self.ecn(), Ecn::Ect1 | Ecn::Ce)
    }
    fn set_ce(&mut self) -> bool {
        if !self.ecn().is_capable() {
            return false;
        }
        let version = if self.flags() & Pkt::IPV6 != 0 {
            IpVersion::V6
        } else {
            IpVersion::V4
        };
        if set_ce_at(self.mbuf.data_mut(), version, self.word.l3_offset()) {
            self.word.set_ecn(Ecn::Ce);
            true
        } else {
            false
        }
    }
    #[inline]
    fn flow_end(&self) -> bool {
        self.flags() & Pkt::FLOW_END != 0
    }
    #[inline]
    fn delay_class(&self) -> u8 {
        self.flags() >> Pkt::DELAY_SHIFT
    }
}

/// Prefetch the first cache line of the frame in the mbuf at `p` (null: nothing).
#[inline(always)]
fn prefetch_frame(p: *mut ffi::RteMbuf) {
    if let Some(nn) = NonNull::new(p) {
        // Borrow without taking ownership: the handle is forgotten, never dropped.
        let m = std::mem::ManuallyDrop::new(Mbuf(nn));
        m.prefetch_data();
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

// SAFETY: the filled slots are owned mbufs (as in `Mbuf`, which is Send);
// a burst moves to another lcore only as part of the lane that owns it.
unsafe impl<const N: usize> Send for Burst<N> {}

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

    /// [`Burst::drain`], prefetching the frame headers `ahead` packets in
    /// front of the one handed out (l3fwd's pattern), so classifying packet
    /// `i` overlaps the cache misses of packets `i + 1 ..= i + ahead`.
    #[inline]
    pub fn drain_prefetch(&mut self, ahead: usize) -> impl Iterator<Item = Mbuf> + '_ {
        let n = std::mem::take(&mut self.len);
        let ptrs = &self.ptrs[..n];
        for &p in ptrs.iter().take(ahead) {
            prefetch_frame(p);
        }
        ptrs.iter().enumerate().filter_map(move |(i, &p)| {
            if let Some(&q) = ptrs.get(i + ahead) {
                prefetch_frame(q);
            }
            // SAFETY: every filled slot holds an mbuf from rx_burst that nobody else owns.
            NonNull::new(p).map(|p| unsafe { Mbuf::from_raw(p) })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbuf_layout_matches_the_linked_dpdk() {
        // The shim is compiled against the installed DPDK headers; the
        // offsets the fast path reads must be the compiler's.
        assert_eq!(layout::check(), Ok(()));
    }

    #[test]
    fn handle_is_two_words() {
        // Two words move in registers; a ring slot is a quarter cache line.
        assert_eq!(std::mem::size_of::<Pkt>(), 16);
        assert_eq!(std::mem::size_of::<Option<Pkt>>(), 16);
    }

    #[test]
    fn packed_fields_read_back_as_written() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..10_000u32 {
            x = tollgate_router::flow::mix64(x);
            let len = (x as u32) & 0x1_FFFF; // also above 65,535
            let variant = VariantId::from_dscp((x >> 20) as u8 & 63).unwrap();
            let ecn = Ecn::from_bits((x >> 28) as u8);
            let flags = (x >> 30) as u8;
            let vlans = (i % 3) as u8;
            let hash = tollgate_router::flow::mix64(x ^ 7);
            let mut w = PktWord::pack(len, variant, ecn, flags, vlans, hash);
            assert_eq!(w.len(), len.min(65_535));
            assert_eq!(w.variant(), variant);
            assert_eq!(w.ecn(), ecn);
            assert_eq!(w.flags(), flags);
            assert_eq!(w.l3_offset(), 14 + 4 * usize::from(vlans));
            assert_eq!(w.hash(), hash & ((1 << 30) - 1));
            w.set_ecn(Ecn::Ce);
            assert_eq!(w.ecn(), Ecn::Ce);
            assert_eq!(
                (w.len(), w.variant(), w.flags(), w.hash()),
                (len.min(65_535), variant, flags, hash & ((1 << 30) - 1)),
                "setting CE leaves the other fields"
            );
        }
    }
}

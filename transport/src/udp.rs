//! UDP with per-datagram TOS, written against the Linux socket API directly:
//!
//! - send: `sendmsg` / `sendmmsg` with an `IP_TOS` / `IPV6_TCLASS` control
//!   message per message (the **whole** TOS byte: DSCP variant marking in the
//!   upper six bits, ECN below) and optionally `UDP_SEGMENT` (GSO: the kernel
//!   splits one buffer into equal-sized datagrams);
//! - receive: `recvmsg` / `recvmmsg` reading the received TOS byte
//!   (`IP_RECVTOS` / `IPV6_RECVTCLASS`), the GRO segment size (`UDP_GRO`: the
//!   kernel hands over several datagrams of one flow coalesced into one
//!   buffer, split again by [`RecvMeta::datagrams`]) and the kernel's receive
//!   timestamp (`SO_TIMESTAMPNS`).
//!
//! Linux only (the project's targets).
//!
//! ## Why not quinn-udp
//!
//! quinn-udp (0.5) does GSO, GRO, `recvmmsg` and ECN well, but its send path
//! writes the TOS control message from the transmit's ECN field alone, so
//! every datagram would leave with DSCP 0 and Tollgate's per-connection
//! variant marking (the router's per-variant queues and statistics depend on
//! it) would be lost; it also sends one `sendmsg` per transmit (no
//! `sendmmsg`) and has no receive timestamps. Wrapping it would mean patching
//! the one thing we need most, so this module stays hand-written: a few
//! hundred lines over `libc`, tested against the kernel in this file and in
//! `tests/dscp.rs`.

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Socket buffer size requested for both directions.
const SOCKET_BUFFER: usize = 8 << 20;
/// Most messages per `sendmmsg` / `recvmmsg` call.
pub const MAX_BATCH: usize = 32;
/// Largest UDP payload, and so the largest GRO-coalesced buffer.
pub const MAX_DATAGRAM: usize = 65_535;
/// Most datagrams the kernel coalesces into one GSO send (`UDP_MAX_SEGMENTS`).
pub const MAX_GSO_SEGMENTS: usize = 64;

/// A received message's metadata: one datagram, or with GRO several
/// datagrams of one sender coalesced into one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// Sender.
    pub from: SocketAddr,
    /// The IP TOS / traffic-class byte, when the kernel reported it.
    pub tos: Option<u8>,
    /// With GRO: the size of each coalesced datagram but the last.
    pub segment_size: Option<usize>,
    /// The kernel's receive timestamp (`CLOCK_REALTIME`, since the Unix
    /// epoch), when `SO_TIMESTAMPNS` is on.
    pub timestamp: Option<Duration>,
}

impl RecvMeta {
    /// Metadata of one plain datagram.
    pub fn new(len: usize, from: SocketAddr) -> Self {
        RecvMeta {
            len,
            from,
            tos: None,
            segment_size: None,
            timestamp: None,
        }
    }

    /// The datagrams in `buf[..self.len]`: one, or the GRO segments.
    pub fn datagrams<'a>(&self, buf: &'a [u8]) -> std::slice::Chunks<'a, u8> {
        let data = &buf[..self.len.min(buf.len())];
        let stride = self
            .segment_size
            .filter(|&s| s > 0)
            .unwrap_or(data.len())
            .max(1);
        data.chunks(stride)
    }
}

/// One message to send: a datagram, or with `segment_size` a GSO batch.
#[derive(Clone, Copy, Debug)]
pub struct OutMsg<'a> {
    /// Destination.
    pub dest: SocketAddr,
    /// Payload (several datagrams back to back with GSO).
    pub data: &'a [u8],
    /// The IP TOS / traffic-class byte (DSCP << 2 | ECN).
    pub tos: u8,
    /// With GSO: the size of each datagram but the last.
    pub segment_size: Option<usize>,
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` lives for the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A non-blocking UDP socket bound to `addr`, reporting received TOS and with
/// don't-fragment set (for path-MTU discovery). GRO and timestamps stay off
/// (see [`enable_gro`], [`enable_timestamps`]).
pub fn bind(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    bind_with(addr, false)
}

/// [`bind`] with `SO_REUSEPORT`, so several sockets (one per server thread)
/// share `addr` and the kernel spreads flows over them by their 4-tuple.
pub fn bind_reuse_port(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    bind_with(addr, true)
}

/// [`bind`], optionally with `SO_REUSEPORT`: several sockets (one per worker
/// thread) then share one address and the kernel spreads incoming flows
/// over them by their 4-tuple, so every datagram of a connection reaches the
/// same socket.
pub fn bind_with(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if reuse_port {
        setsockopt_int(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    socket.set_nonblocking(true)?;
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    enable_recv_tos(socket.as_raw_fd(), addr.is_ipv6())?;
    let fd = socket.as_raw_fd();
    if addr.is_ipv6() {
        let _ = setsockopt_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        );
    } else {
        let _ = setsockopt_int(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        );
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Ask the kernel to report the TOS / traffic class of received datagrams.
pub fn enable_recv_tos(fd: RawFd, ipv6: bool) -> io::Result<()> {
    if ipv6 {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
        // Dual-stack sockets receive IPv4 too; ignore failure on v6-only ones.
        let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
        Ok(())
    } else {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)
    }
}

/// Whether the kernel supports UDP GSO on this socket.
pub fn gso_supported(fd: RawFd) -> bool {
    setsockopt_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok()
}

/// Turn on UDP GRO: received datagrams of one flow may arrive coalesced, with
/// their size in [`RecvMeta::segment_size`]. Receive buffers must then hold
/// [`MAX_DATAGRAM`] bytes. Returns whether the kernel accepted it.
pub fn enable_gro(fd: RawFd) -> bool {
    setsockopt_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
}

/// Turn on kernel receive timestamps ([`RecvMeta::timestamp`]). Returns
/// whether the kernel accepted it.
pub fn enable_timestamps(fd: RawFd) -> bool {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).is_ok()
}

/// Control-message buffer, aligned for `cmsghdr`: room for TOS or traffic
/// class, a GRO/GSO segment size and a timestamp.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct CmsgBuf([u8; 128]);

const EMPTY_CMSG: CmsgBuf = CmsgBuf([0; 128]);

/// Fill `msg`'s control buffer (already pointing at a zeroed [`CmsgBuf`])
/// with the TOS byte and the optional GSO segment size.
///
/// # Safety
///
/// `msg.msg_control` must point at a writable [`CmsgBuf`] and
/// `msg.msg_controllen` must be its size.
unsafe fn write_send_cmsgs(msg: &mut libc::msghdr, ipv6: bool, tos: u8, segment_size: Option<u16>) {
    let mut used = 0usize;
    // SAFETY: the caller guarantees the buffer; two messages (TOS int and a
    // u16 segment size) take 2 × CMSG_SPACE(4) = 32 bytes ≤ 128, and
    // CMSG_FIRSTHDR/NXTHDR stay within msg_controllen.
    unsafe {
        let mut hdr = libc::CMSG_FIRSTHDR(msg);
        let (level, kind) = if ipv6 {
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
        } else {
            (libc::IPPROTO_IP, libc::IP_TOS)
        };
        (*hdr).cmsg_level = level;
        (*hdr).cmsg_type = kind;
        (*hdr).cmsg_len = libc::CMSG_LEN(mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(
            libc::CMSG_DATA(hdr).cast::<libc::c_int>(),
            libc::c_int::from(tos),
        );
        used += libc::CMSG_SPACE(mem::size_of::<libc::c_int>() as u32) as usize;
        if let Some(seg) = segment_size {
            hdr = libc::CMSG_NXTHDR(msg, hdr);
            (*hdr).cmsg_level = libc::SOL_UDP;
            (*hdr).cmsg_type = libc::UDP_SEGMENT;
            (*hdr).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(hdr).cast::<u16>(), seg);
            used += libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as usize;
        }
    }
    msg.msg_controllen = used as _;
}

/// The GSO segment size to put on the wire: only when it splits `len` bytes
/// into more than one datagram (drivers dislike a single-segment GSO send).
fn wire_segment(segment_size: Option<usize>, len: usize) -> Option<u16> {
    segment_size
        .filter(|&s| s > 0 && s < len)
        .and_then(|s| u16::try_from(s).ok())
}

/// Send `data` to `dest` with TOS byte `tos`; with `segment_size`, the kernel
/// splits `data` into datagrams of that size (GSO).
pub fn send(
    fd: RawFd,
    dest: SocketAddr,
    data: &[u8],
    tos: u8,
    segment_size: Option<usize>,
) -> io::Result<usize> {
    let addr = SockAddr::from(dest);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut cmsg = EMPTY_CMSG;
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_name = addr.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = addr.len();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = cmsg.0.len() as _;
    // SAFETY: msg_control points at `cmsg`, msg_controllen is its size.
    unsafe {
        write_send_cmsgs(
            &mut msg,
            dest.is_ipv6(),
            tos,
            wire_segment(segment_size, data.len()),
        )
    };
    // SAFETY: msg points at valid buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(fd, &msg, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Send up to [`MAX_BATCH`] messages with one `sendmmsg`, each with its own
/// destination, TOS byte and GSO segment size. Returns how many of the first
/// messages the kernel took; an error means the first one failed.
pub fn send_batch(fd: RawFd, msgs: &[OutMsg<'_>]) -> io::Result<usize> {
    let n = msgs.len().min(MAX_BATCH);
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: zeroed addresses and headers are valid (null pointers, zero lengths).
    let mut addrs: [libc::sockaddr_storage; MAX_BATCH] = unsafe { mem::zeroed() };
    let mut iovs: [libc::iovec; MAX_BATCH] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_BATCH];
    let mut cmsgs = [EMPTY_CMSG; MAX_BATCH];
    let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { mem::zeroed() };
    for (i, m) in msgs[..n].iter().enumerate() {
        let addr = SockAddr::from(m.dest);
        // SAFETY: a SockAddr holds at most a sockaddr_storage (`len` bytes).
        unsafe {
            std::ptr::copy_nonoverlapping(
                addr.as_ptr().cast::<u8>(),
                (&mut addrs[i] as *mut libc::sockaddr_storage).cast::<u8>(),
                addr.len() as usize,
            )
        };
        iovs[i] = libc::iovec {
            iov_base: m.data.as_ptr() as *mut libc::c_void,
            iov_len: m.data.len(),
        };
        let msg = &mut hdrs[i].msg_hdr;
        msg.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = addr.len();
        msg.msg_iov = &mut iovs[i];
        msg.msg_iovlen = 1;
        msg.msg_control = cmsgs[i].0.as_mut_ptr().cast();
        msg.msg_controllen = cmsgs[i].0.len() as _;
        // SAFETY: msg_control points at cmsgs[i], msg_controllen is its size.
        unsafe {
            write_send_cmsgs(
                msg,
                m.dest.is_ipv6(),
                m.tos,
                wire_segment(m.segment_size, m.data.len()),
            )
        };
    }
    // SAFETY: every header points at buffers (addrs, iovs, cmsgs, msgs' data)
    // that live until the call returns.
    let rc = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Parse the control messages of a received message.
///
/// # Safety
///
/// `msg` must be a header the kernel just filled (well-formed control messages
/// within `msg_controllen`).
unsafe fn read_recv_cmsgs(msg: &libc::msghdr, meta: &mut RecvMeta) {
    // SAFETY: per the caller, the control buffer holds well-formed messages
    // and CMSG_FIRSTHDR/NXTHDR stay inside it; reads are unaligned-safe.
    unsafe {
        let mut hdr = libc::CMSG_FIRSTHDR(msg);
        while !hdr.is_null() {
            let data = libc::CMSG_DATA(hdr);
            match ((*hdr).cmsg_level, (*hdr).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_TOS) => meta.tos = Some(*data),
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    meta.tos = Some(std::ptr::read_unaligned(data.cast::<libc::c_int>()) as u8)
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    let seg = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                    meta.segment_size = usize::try_from(seg).ok().filter(|&s| s > 0);
                }
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                    if ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec) {
                        meta.timestamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                    }
                }
                _ => {}
            }
            hdr = libc::CMSG_NXTHDR(msg, hdr);
        }
    }
}

/// The source address of a received message (`None` if not IP).
fn source(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    // SAFETY: the kernel wrote a valid address of `len` bytes into `storage`.
    let addr = unsafe { SockAddr::new(*storage, len) };
    addr.as_socket().map(normalize)
}

/// Receive one message into `buf` (with GRO, possibly several datagrams).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<RecvMeta> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cmsg = EMPTY_CMSG;
    // SAFETY: zeroed sockaddr_storage / msghdr are valid; pointers outlive the call.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_name = (&mut storage as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = cmsg.0.len() as _;
    // SAFETY: as above.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let from = source(&storage, msg.msg_namelen)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "non-IP source address"))?;
    let mut meta = RecvMeta::new(n as usize, from);
    // SAFETY: the kernel just filled `msg`.
    unsafe { read_recv_cmsgs(&msg, &mut meta) };
    Ok(meta)
}

/// Receive buffers for one `recvmmsg` call: `slots` buffers of
/// [`MAX_DATAGRAM`] bytes and the metadata of what arrived.
#[derive(Debug)]
pub struct RecvBatch {
    buf: Box<[u8]>,
    metas: Vec<RecvMeta>,
    slots: usize,
    /// Messages cut short by a too-small buffer or with a non-IP source
    /// (dropped).
    pub malformed: u64,
}

impl RecvBatch {
    /// Room for `slots` messages (at most [`MAX_BATCH`], at least 1).
    pub fn new(slots: usize) -> Self {
        let slots = slots.clamp(1, MAX_BATCH);
        RecvBatch {
            buf: vec![0u8; slots * MAX_DATAGRAM].into_boxed_slice(),
            metas: Vec::with_capacity(slots),
            slots,
            malformed: 0,
        }
    }

    /// Messages received by the last call.
    pub fn len(&self) -> usize {
        self.metas.len()
    }

    /// Whether the last call received nothing.
    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }

    /// Message `i` of the last call: its metadata and bytes.
    pub fn get(&self, i: usize) -> (&RecvMeta, &[u8]) {
        let meta = &self.metas[i];
        let start = i * MAX_DATAGRAM;
        (meta, &self.buf[start..start + meta.len.min(MAX_DATAGRAM)])
    }

    /// Forget the last call's messages.
    pub fn clear(&mut self) {
        self.metas.clear();
    }

    /// The first slot's buffer and metadata list, for sockets that fill one
    /// message at a time (see [`crate::driver::DatagramSocket::recv_batch`]).
    pub fn push_with(
        &mut self,
        f: impl FnOnce(&mut [u8]) -> io::Result<RecvMeta>,
    ) -> io::Result<usize> {
        self.metas.clear();
        let meta = f(&mut self.buf[..MAX_DATAGRAM])?;
        self.metas.push(meta);
        Ok(1)
    }
}

/// Receive up to `batch`'s capacity of messages with one `recvmmsg`
/// (non-blocking). Returns how many arrived; messages that were truncated or
/// have no IP source are dropped and counted in [`RecvBatch::malformed`].
pub fn recv_batch(fd: RawFd, batch: &mut RecvBatch) -> io::Result<usize> {
    batch.metas.clear();
    let n = batch.slots;
    // SAFETY: zeroed headers, addresses and iovecs are valid initial values.
    let mut storages: [libc::sockaddr_storage; MAX_BATCH] = unsafe { mem::zeroed() };
    let mut iovs: [libc::iovec; MAX_BATCH] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_BATCH];
    let mut cmsgs = [EMPTY_CMSG; MAX_BATCH];
    let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { mem::zeroed() };
    for (i, chunk) in batch.buf.chunks_mut(MAX_DATAGRAM).take(n).enumerate() {
        iovs[i] = libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: chunk.len(),
        };
        let msg = &mut hdrs[i].msg_hdr;
        msg.msg_name = (&mut storages[i] as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iovs[i];
        msg.msg_iovlen = 1;
        msg.msg_control = cmsgs[i].0.as_mut_ptr().cast();
        msg.msg_controllen = cmsgs[i].0.len() as _;
    }
    // SAFETY: every header points at buffers that live until the call returns.
    let rc = unsafe {
        libc::recvmmsg(
            fd,
            hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let got = rc as usize;
    let mut slot = 0;
    for (i, h) in hdrs.iter().enumerate().take(got) {
        let msg = &h.msg_hdr;
        let from = source(&storages[i], msg.msg_namelen);
        let (Some(from), false) = (from, msg.msg_flags & libc::MSG_TRUNC != 0) else {
            batch.malformed += 1;
            continue;
        };
        let mut meta = RecvMeta::new(h.msg_len as usize, from);
        // SAFETY: the kernel just filled this header.
        unsafe { read_recv_cmsgs(msg, &mut meta) };
        if slot != i {
            // Keep messages contiguous in slot order after a dropped one.
            let (dst, src) = (slot * MAX_DATAGRAM, i * MAX_DATAGRAM);
            batch.buf.copy_within(src..src + meta.len, dst);
        }
        batch.metas.push(meta);
        slot += 1;
    }
    Ok(got)
}

/// Map IPv4-mapped IPv6 addresses back to IPv4.
fn normalize(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv_retry(fd: RawFd, buf: &mut [u8]) -> RecvMeta {
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match recv(fd, buf) {
                Ok(m) => break m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < give_up, "nothing arrived");
                    std::thread::yield_now()
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn recv_batch_retry(fd: RawFd, batch: &mut RecvBatch, want: usize) -> Vec<(RecvMeta, Vec<u8>)> {
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        let mut out = Vec::new();
        let count = |m: &RecvMeta| m.len.div_ceil(m.segment_size.unwrap_or(m.len).max(1));
        while out.iter().map(|(m, _)| count(m)).sum::<usize>() < want {
            match recv_batch(fd, batch) {
                Ok(_) => {
                    for i in 0..batch.len() {
                        let (m, d) = batch.get(i);
                        out.push((*m, d.to_vec()));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < give_up, "nothing arrived");
                    std::thread::yield_now()
                }
                Err(e) => panic!("{e}"),
            }
        }
        out
    }

    #[test]
    fn tos_byte_survives_loopback() {
        let a = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let dest = b.local_addr().unwrap();
        send(a.as_raw_fd(), dest, b"hello", (33 << 2) | 2, None).unwrap();
        let mut buf = [0u8; 64];
        let meta = recv_retry(b.as_raw_fd(), &mut buf);
        assert_eq!(&buf[..meta.len], b"hello");
        assert_eq!(meta.tos, Some((33 << 2) | 2));
        assert_eq!(meta.from, a.local_addr().unwrap());
        assert_eq!(meta.segment_size, None);
    }

    /// sendmmsg keeps each message's own TOS byte; recvmmsg reports each.
    #[test]
    fn batched_send_and_receive_keep_per_message_tos() {
        let a = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let dest = b.local_addr().unwrap();
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
        let msgs: Vec<OutMsg<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| OutMsg {
                dest,
                data: p,
                tos: ((i as u8 + 1) << 2) | 1,
                segment_size: None,
            })
            .collect();
        assert_eq!(send_batch(a.as_raw_fd(), &msgs).unwrap(), 5);
        let mut batch = RecvBatch::new(8);
        let got = recv_batch_retry(b.as_raw_fd(), &mut batch, 5);
        assert_eq!(got.len(), 5);
        for (i, (meta, data)) in got.iter().enumerate() {
            assert_eq!(data, &payloads[i]);
            assert_eq!(meta.tos, Some(((i as u8 + 1) << 2) | 1));
            assert_eq!(meta.from, a.local_addr().unwrap());
        }
    }

    /// A GSO send to a GRO receiver arrives as one or more coalesced buffers
    /// that split back into the original datagrams, TOS intact; timestamps
    /// are reported when enabled.
    #[test]
    fn gso_to_gro_round_trip() {
        let a = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        if !gso_supported(a.as_raw_fd()) || !enable_gro(b.as_raw_fd()) {
            eprintln!("kernel without UDP GSO/GRO: skipped");
            return;
        }
        assert!(enable_timestamps(b.as_raw_fd()));
        let dest = b.local_addr().unwrap();
        let seg = 1000;
        let data: Vec<u8> = (0..(seg * 7 + 123)).map(|i| (i % 251) as u8).collect();
        send(a.as_raw_fd(), dest, &data, (12 << 2) | 2, Some(seg)).unwrap();
        let mut batch = RecvBatch::new(4);
        let got = recv_batch_retry(b.as_raw_fd(), &mut batch, 8);
        let mut joined = Vec::new();
        let mut sizes = Vec::new();
        for (meta, bytes) in &got {
            assert_eq!(meta.tos, Some((12 << 2) | 2));
            assert!(meta.timestamp.is_some());
            for d in meta.datagrams(bytes) {
                sizes.push(d.len());
                joined.extend_from_slice(d);
            }
        }
        assert_eq!(joined, data);
        assert_eq!(sizes, [1000, 1000, 1000, 1000, 1000, 1000, 1000, 123]);
    }

    #[test]
    fn datagrams_split_at_segment_size() {
        let from = "127.0.0.1:1".parse().unwrap();
        let buf = [7u8; 25];
        let mut meta = RecvMeta::new(25, from);
        assert_eq!(meta.datagrams(&buf).count(), 1);
        meta.segment_size = Some(10);
        let lens: Vec<usize> = meta.datagrams(&buf).map(<[u8]>::len).collect();
        assert_eq!(lens, [10, 10, 5]);
        // A nonsense segment size or length never panics.
        meta.segment_size = Some(0);
        assert_eq!(meta.datagrams(&buf).count(), 1);
        meta.len = 1000;
        assert_eq!(meta.datagrams(&buf).map(<[u8]>::len).sum::<usize>(), 25);
        meta.len = 0;
        assert_eq!(meta.datagrams(&buf).count(), 0);
    }
}

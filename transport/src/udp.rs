//! UDP with per-datagram TOS: `sendmsg` with an `IP_TOS` / `IPV6_TCLASS`
//! control message (DSCP marking and ECN), optional `UDP_SEGMENT` (GSO), and
//! `recvmsg` reading the received TOS byte (`IP_RECVTOS` / `IPV6_RECVTCLASS`).
//! Linux only (the project's targets).

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Socket buffer size requested for both directions.
const SOCKET_BUFFER: usize = 8 << 20;

/// A received datagram's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// Sender.
    pub from: SocketAddr,
    /// The IP TOS / traffic-class byte, when the kernel reported it.
    pub tos: Option<u8>,
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
/// don't-fragment set (for path-MTU discovery).
pub fn bind(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    bind_with(addr, false)
}

/// [`bind`] with `SO_REUSEPORT`, so several sockets (one per server thread)
/// share `addr` and the kernel spreads flows over them by their 4-tuple.
pub fn bind_reuse_port(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    bind_with(addr, true)
}

fn bind_with(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::UdpSocket> {
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

/// Control-message buffer, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; 64]);

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
    let mut cmsg = CmsgBuf([0; 64]);
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_name = addr.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = addr.len();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = cmsg.0.len() as _;
    let mut used = 0usize;
    // SAFETY: the control buffer is large enough for both messages (2 × CMSG_SPACE(4) ≤ 64)
    // and CMSG_FIRSTHDR/NXTHDR stay within msg_controllen.
    unsafe {
        let mut hdr = libc::CMSG_FIRSTHDR(&msg);
        let (level, kind) = if dest.is_ipv6() {
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
        if let Some(seg) = segment_size.filter(|&s| s < data.len()) {
            hdr = libc::CMSG_NXTHDR(&msg, hdr);
            (*hdr).cmsg_level = libc::SOL_UDP;
            (*hdr).cmsg_type = libc::UDP_SEGMENT;
            (*hdr).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(hdr).cast::<u16>(), seg as u16);
            used += libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as usize;
        }
    }
    msg.msg_controllen = used as _;
    // SAFETY: msg points at valid buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(fd, &msg, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Receive one datagram into `buf`.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<RecvMeta> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cmsg = CmsgBuf([0; 64]);
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
    let mut tos = None;
    // SAFETY: the kernel filled msg_controllen bytes of well-formed cmsgs.
    unsafe {
        let mut hdr = libc::CMSG_FIRSTHDR(&msg);
        while !hdr.is_null() {
            let data = libc::CMSG_DATA(hdr);
            match ((*hdr).cmsg_level, (*hdr).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_TOS) => tos = Some(*data),
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    tos = Some(std::ptr::read_unaligned(data.cast::<libc::c_int>()) as u8)
                }
                _ => {}
            }
            hdr = libc::CMSG_NXTHDR(&msg, hdr);
        }
    }
    // SAFETY: the kernel wrote a valid address of msg_namelen bytes.
    let addr = unsafe { SockAddr::new(storage, msg.msg_namelen) };
    let from = addr
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "non-IP source address"))?;
    Ok(RecvMeta {
        len: n as usize,
        from: normalize(from),
        tos,
    })
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

    #[test]
    fn tos_byte_survives_loopback() {
        let a = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let dest = b.local_addr().unwrap();
        send(a.as_raw_fd(), dest, b"hello", (33 << 2) | 2, None).unwrap();
        let mut buf = [0u8; 64];
        let meta = loop {
            match recv(b.as_raw_fd(), &mut buf) {
                Ok(m) => break m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(&buf[..meta.len], b"hello");
        assert_eq!(meta.tos, Some((33 << 2) | 2));
        assert_eq!(meta.from, a.local_addr().unwrap());
    }
}

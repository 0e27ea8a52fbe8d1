//! Batched UDP I/O for packet paths that must not pay one syscall per packet:
//! `recvmmsg`/`sendmmsg` over preallocated buffers, IPv4 only (the Bolt wire format
//! carries IPv4 client addresses). No allocation after construction.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Largest datagram a batch slot holds; every Bolt message is far smaller.
pub const SLOT_BYTES: usize = 2048;

fn to_sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
    let mut s: libc::sockaddr_in = unsafe { zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    s
}

fn from_sockaddr(s: &libc::sockaddr_in) -> Option<SocketAddrV4> {
    (s.sin_family == libc::AF_INET as libc::sa_family_t)
        .then(|| SocketAddrV4::new(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)), u16::from_be(s.sin_port)))
}

/// Binds a UDP socket with large kernel buffers (bursts of SUBMIT and GET_TASK) and a
/// receive timeout, so a blocked receiver still notices shutdown.
pub fn bind_udp(addr: SocketAddr, recv_timeout: Option<Duration>) -> io::Result<UdpSocket> {
    let sock = UdpSocket::bind(addr)?;
    set_buffer_sizes(&sock, 8 << 20);
    sock.set_read_timeout(recv_timeout)?;
    Ok(sock)
}

/// The index of network interface `name` in this thread's namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
    // SAFETY: a NUL-terminated string that outlives the call.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(io::Error::last_os_error()),
        i => Ok(i),
    }
}

/// Turns on a boolean socket option.
fn switch_on(sock: &UdpSocket, level: libc::c_int, option: libc::c_int) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: valid fd; the option value is a c_int of the given size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            option,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to tell [`recv_msg`] which interface each datagram arrived on.
pub fn enable_pktinfo(sock: &UdpSocket) -> io::Result<()> {
    switch_on(sock, libc::IPPROTO_IP, libc::IP_PKTINFO)
}

/// Asks the kernel to stamp each datagram with the time it reached this host's stack
/// (`SO_TIMESTAMPNS`, the wall clock), which [`recv_msg`] then returns: the time between
/// that and the receive returning is how long the receiving thread took to run.
pub fn enable_arrival_stamps(sock: &UdpSocket) -> io::Result<()> {
    switch_on(sock, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)
}

/// One datagram received by [`recv_msg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub len: usize,
    /// The IPv4 source (None for another family).
    pub from: Option<SocketAddrV4>,
    /// The interface it arrived on (None unless [`enable_pktinfo`] was called).
    pub ifindex: Option<u32>,
    /// When it reached the stack, ns since the Unix epoch (None unless
    /// [`enable_arrival_stamps`] was called).
    pub arrived_unix_ns: Option<u64>,
}

/// Receives one datagram with what the kernel tells about it.
pub fn recv_msg(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<Datagram> {
    // SAFETY: plain data; all-zero is valid.
    let mut name: libc::sockaddr_in = unsafe { zeroed() };
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // Room for an in_pktinfo and a timespec message, aligned as cmsghdr needs.
    let mut control = [0u64; 12];
    // SAFETY: plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut name as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: every pointer in msg refers to a live local of the size given.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: msg is the header recvmsg just filled.
    let (ifindex, arrived_unix_ns) = unsafe { control_fields(&msg) };
    let from = (msg.msg_namelen as usize >= size_of::<libc::sockaddr_in>()).then(|| from_sockaddr(&name)).flatten();
    Ok(Datagram { len: n as usize, from, ifindex, arrived_unix_ns })
}

/// The interface and the arrival stamp in the control messages of `msg`, as filled by
/// recvmsg or recvmmsg.
///
/// # Safety
/// `msg.msg_control` points to a live buffer of at least `msg.msg_controllen` bytes
/// (or is null with length 0), as the kernel left it.
unsafe fn control_fields(msg: &libc::msghdr) -> (Option<u32>, Option<u64>) {
    let (mut ifindex, mut arrived_unix_ns) = (None, None);
    // SAFETY: the CMSG macros walk the control buffer within msg_controllen; the
    // payloads are read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let info: libc::in_pktinfo = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    ifindex = Some(info.ipi_ifindex as u32);
                }
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    arrived_unix_ns = u64::try_from(t.tv_sec)
                        .ok()
                        .and_then(|s| s.checked_mul(1_000_000_000)?.checked_add(u64::try_from(t.tv_nsec).ok()?));
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    (ifindex, arrived_unix_ns)
}

/// Asks for `bytes` of send and receive buffer; the kernel caps it at its rmem/wmem
/// maximum, which is fine.
pub fn set_buffer_sizes(sock: &UdpSocket, bytes: i32) {
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: valid fd, option value is a c_int of the given size.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &bytes as *const i32 as *const libc::c_void,
                size_of::<i32>() as libc::socklen_t,
            );
        }
    }
}

/// Preallocated receive and send batches for one socket.
pub struct Batch {
    bufs: Box<[[u8; SLOT_BYTES]]>,
    lens: Box<[usize]>,
    addrs: Box<[libc::sockaddr_in]>,
    iovs: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// Room for a timestamp control message, for the first slot only (empty unless
    /// [`Batch::with_arrival_stamps`]): the kernel copies a stamp out only where there is
    /// room, so one per receive costs one copy, not one per datagram.
    controls: Box<[[u64; STAMP_CONTROL_WORDS]]>,
    /// Slots filled (received, or queued for sending).
    len: usize,
}

/// A timespec control message with its header, in u64s (CMSG_SPACE(16) is 32 bytes).
const STAMP_CONTROL_WORDS: usize = 4;

// SAFETY: the raw pointers in iovs/hdrs point into this struct's own boxed buffers,
// which move with it; nothing is shared.
unsafe impl Send for Batch {}

impl Batch {
    pub fn new(slots: usize) -> Batch {
        Batch::with_controls(slots, 0)
    }

    /// A receive batch that also keeps the arrival stamp of each receive's first
    /// datagram, for a socket [`enable_arrival_stamps`] was called on: see
    /// [`Batch::first_arrived_unix_ns`].
    pub fn with_arrival_stamps(slots: usize) -> Batch {
        Batch::with_controls(slots, 1)
    }

    fn with_controls(slots: usize, controls: usize) -> Batch {
        assert!(slots > 0 && slots <= 1024);
        // SAFETY: plain C structs; zero is valid for all of them.
        let mut b = Batch {
            bufs: vec![[0u8; SLOT_BYTES]; slots].into_boxed_slice(),
            lens: vec![0; slots].into_boxed_slice(),
            addrs: vec![unsafe { zeroed() }; slots].into_boxed_slice(),
            iovs: vec![unsafe { zeroed() }; slots].into_boxed_slice(),
            hdrs: vec![unsafe { zeroed() }; slots].into_boxed_slice(),
            controls: vec![[0u64; STAMP_CONTROL_WORDS]; controls].into_boxed_slice(),
            len: 0,
        };
        b.wire();
        b
    }

    /// Points each header at its slot's buffer and address (the boxes never move).
    fn wire(&mut self) {
        for i in 0..self.bufs.len() {
            self.iovs[i] = libc::iovec { iov_base: self.bufs[i].as_mut_ptr().cast(), iov_len: SLOT_BYTES };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_in).cast();
            h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            if let Some(c) = self.controls.get_mut(i) {
                h.msg_control = c.as_mut_ptr().cast();
            }
        }
        self.reset_controls();
    }

    /// Gives each slot's control buffer its full length again (recvmmsg shrinks it to
    /// what it wrote).
    fn reset_controls(&mut self) {
        for (h, c) in self.hdrs.iter_mut().zip(self.controls.iter()) {
            h.msg_hdr.msg_controllen = std::mem::size_of_val(c) as _;
        }
    }

    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len == self.bufs.len()
    }

    /// Receives up to a batch of datagrams: blocks until at least one arrives (or the
    /// socket's read timeout passes: returns 0), then takes whatever else is queued.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        self.recv_flags(sock, libc::MSG_WAITFORONE)
    }

    /// Non-blocking receive of whatever is queued now.
    pub fn try_recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        self.recv_flags(sock, libc::MSG_DONTWAIT)
    }

    fn recv_flags(&mut self, sock: &UdpSocket, flags: libc::c_int) -> io::Result<usize> {
        for i in 0..self.bufs.len() {
            self.iovs[i].iov_len = SLOT_BYTES;
            self.hdrs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        }
        self.reset_controls();
        // SAFETY: hdrs are wired to live buffers of the stated sizes.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            self.len = 0;
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        self.len = n as usize;
        for i in 0..self.len {
            self.lens[i] = self.hdrs[i].msg_len as usize;
        }
        Ok(self.len)
    }

    /// Received datagram `i`: its bytes and its IPv4 source (None for anything else).
    pub fn received(&self, i: usize) -> (&[u8], Option<SocketAddrV4>) {
        let len = self.lens[i].min(SLOT_BYTES);
        (&self.bufs[i][..len], from_sockaddr(&self.addrs[i]))
    }

    /// When the first datagram of the last receive reached the stack, ns since the Unix
    /// epoch (None if it received nothing, or unless the batch was made
    /// [`Batch::with_arrival_stamps`] and the socket stamps arrivals).
    pub fn first_arrived_unix_ns(&self) -> Option<u64> {
        if self.len == 0 || self.controls.is_empty() {
            return None;
        }
        // SAFETY: the first header's control pointer is the control buffer, its length
        // what recvmmsg wrote into it.
        unsafe { control_fields(&self.hdrs[0].msg_hdr) }.1
    }

    /// Queues a datagram to `to`, written by `fill` into the slot buffer (returns its
    /// length). The caller flushes when `is_full()`.
    pub fn push(&mut self, to: SocketAddrV4, fill: impl FnOnce(&mut [u8]) -> usize) {
        debug_assert!(!self.is_full());
        let i = self.len;
        let n = fill(&mut self.bufs[i]);
        self.iovs[i].iov_len = n;
        self.addrs[i] = to_sockaddr(to);
        self.hdrs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // Whatever a receive left in the control buffer is not sent along.
        self.hdrs[i].msg_hdr.msg_controllen = 0;
        self.len += 1;
    }

    /// Sends every queued datagram. Returns how many the kernel refused (each is
    /// skipped once, so one bad destination cannot block the rest).
    pub fn flush(&mut self, sock: &UdpSocket) -> usize {
        let mut sent = 0;
        let mut failed = 0;
        let mut attempts = 0;
        while sent < self.len && attempts < 4 * self.bufs.len() {
            attempts += 1;
            // SAFETY: hdrs[sent..len] are wired to filled buffers.
            let n = unsafe {
                libc::sendmmsg(sock.as_raw_fd(), self.hdrs[sent..].as_mut_ptr(), (self.len - sent) as u32, 0)
            };
            if n > 0 {
                sent += n as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if e.kind() == io::ErrorKind::WouldBlock {
                // A full send buffer on loopback drains quickly; yield and retry.
                std::thread::yield_now();
                continue;
            }
            // This datagram cannot go (e.g. unreachable): skip it.
            sent += 1;
            failed += 1;
        }
        failed += self.len - sent;
        self.len = 0;
        failed
    }

    /// Forgets the received datagrams (the buffers are reused).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_says_which_interface_it_came_in_on_and_when_it_arrived() {
        let a = bind_udp("127.0.0.1:0".parse().unwrap(), Some(Duration::from_millis(500))).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.send_to(b"one", a.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        let d = recv_msg(&a, &mut buf).unwrap();
        assert_eq!((&buf[..d.len], d.from.map(SocketAddr::V4)), (&b"one"[..], Some(b.local_addr().unwrap())));
        assert_eq!((d.ifindex, d.arrived_unix_ns), (None, None), "nothing asked for, nothing told");
        enable_pktinfo(&a).unwrap();
        enable_arrival_stamps(&a).unwrap();
        let before = crate::executor::unix_now_ns();
        b.send_to(b"two", a.local_addr().unwrap()).unwrap();
        let d = recv_msg(&a, &mut buf).unwrap();
        let after = crate::executor::unix_now_ns();
        assert_eq!((&buf[..d.len], d.ifindex), (&b"two"[..], Some(super::ifindex("lo").unwrap())));
        let arrived = d.arrived_unix_ns.expect("stamped");
        assert!((before..=after).contains(&arrived), "{before} <= {arrived} <= {after}");
    }

    #[test]
    fn batches_cross_loopback() {
        let a = bind_udp("127.0.0.1:0".parse().unwrap(), Some(Duration::from_millis(500))).unwrap();
        let b = bind_udp("127.0.0.1:0".parse().unwrap(), Some(Duration::from_millis(500))).unwrap();
        let SocketAddr::V4(to) = b.local_addr().unwrap() else { unreachable!() };
        let mut tx = Batch::new(8);
        for k in 0..8u8 {
            tx.push(to, |buf| {
                buf[..3].copy_from_slice(&[k, k, k]);
                3
            });
        }
        assert!(tx.is_full());
        assert_eq!(tx.flush(&a), 0);
        let mut rx = Batch::new(16);
        let mut got = Vec::new();
        for _ in 0..10 {
            rx.recv(&b).unwrap();
            for i in 0..rx.len() {
                let (bytes, src) = rx.received(i);
                assert_eq!(SocketAddr::V4(src.unwrap()), a.local_addr().unwrap());
                got.push(bytes.to_vec());
            }
            if got.len() == 8 {
                break;
            }
        }
        assert_eq!(got, (0..8u8).map(|k| vec![k, k, k]).collect::<Vec<_>>());
        // Nothing more: the timeout returns an empty batch rather than an error.
        assert_eq!(rx.try_recv(&b).unwrap(), 0);
        assert_eq!(rx.first_arrived_unix_ns(), None, "a plain batch keeps no stamps");
    }

    #[test]
    fn a_stamping_batch_tells_when_each_receives_first_datagram_arrived() {
        let a = bind_udp("127.0.0.1:0".parse().unwrap(), Some(Duration::from_millis(500))).unwrap();
        let b = bind_udp("127.0.0.1:0".parse().unwrap(), Some(Duration::from_millis(500))).unwrap();
        enable_arrival_stamps(&b).unwrap();
        let SocketAddr::V4(to) = b.local_addr().unwrap() else { unreachable!() };
        let mut rx = Batch::with_arrival_stamps(4);
        for round in 0..3u8 {
            let before = crate::executor::unix_now_ns();
            let mut tx = Batch::new(2);
            for k in 0..2u8 {
                tx.push(to, |buf| {
                    buf[0] = round * 2 + k;
                    1
                });
            }
            assert_eq!(tx.flush(&a), 0);
            let mut got = Vec::new();
            for _ in 0..10 {
                rx.recv(&b).unwrap();
                let first = rx.first_arrived_unix_ns().expect("stamped");
                assert!(first >= before && first <= crate::executor::unix_now_ns(), "round {round}");
                got.extend((0..rx.len()).map(|i| rx.received(i).0[0]));
                if got.len() == 2 {
                    break;
                }
            }
            assert_eq!(got, [round * 2, round * 2 + 1], "every datagram, the others without stamps");
        }
        assert_eq!(rx.try_recv(&b).unwrap(), 0);
        assert_eq!(rx.first_arrived_unix_ns(), None, "nothing received");
    }
}

//! Executors waiting at this host (docs/xdp.md, "Waiting at the host"). The XDP program
//! queues an executor whose GET_TASK found nothing and answers it with the next REFILL
//! frame; what the frames do not answer is answered here: with a task the rings hold
//! (one REFILL frame can carry several tasks while several executors wait), or with NOOP
//! once the executor has waited the host wait, so that it asks again as after tier 2's
//! park. Both carry tier 2's address and port as their source, as tier 2's answers do (the
//! executor takes answers from its switch only), so they leave through a raw IPv4 socket
//! that writes the headers itself (needs CAP_NET_RAW, as loading XDP needs CAP_BPF): a
//! UDP socket bound to the switch's address would collide with the agent's own socket
//! on the Bolt port.

use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use scheduler_common::{
    encode_assign, encode_noop,
    frame::{build_udp, Endpoint},
    maps::HostWaiter,
    Entry, Requester, MAX_MESSAGE_LEN,
};

use super::rings::Rings;
use crate::xdp::XdpMaps;

/// Waiters looked at per call, so that the agent's loop stays responsive.
const MAX_PER_TURN: usize = 256;

/// What the agent did for waiting executors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaiterCounts {
    /// Answered with a task from the rings.
    pub served: u64,
    /// Answered NOOP after the host wait.
    pub expired: u64,
    /// Skipped: their executor had asked again since.
    pub stale: u64,
}

pub struct HostWaiting {
    socket: RawSender,
    wait_ns: u64,
    node: u16,
    pub counts: WaiterCounts,
}

impl HostWaiting {
    /// Opens the socket that answers as the switch does. Executors wait `wait` at most.
    pub fn open(node: u16, wait: Duration) -> anyhow::Result<HostWaiting> {
        Ok(HostWaiting {
            socket: RawSender::open()?,
            wait_ns: wait.as_nanos() as u64,
            node,
            counts: WaiterCounts::default(),
        })
    }

    /// Answers waiting executors with tasks from the rings, oldest waiter first, while
    /// both last; a waiter no queued task fits keeps waiting (at the tail) and ends the
    /// turn. Returns the tasks handed out, per priority (index 0 = priority 1). A task
    /// whose ASSIGN could not be sent goes to `unplaced`, for the caller to RETURN.
    pub fn serve(&mut self, rings: &mut Rings, unplaced: &mut Vec<Entry>, errors: &mut u64) -> Vec<u8> {
        let mut served = Vec::new();
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        for _ in 0..MAX_PER_TURN {
            if rings.total() <= 0 && !rings.has_pinned() {
                break;
            }
            let Rings::Bpf(maps) = rings else { break };
            let Some(waiter) = self.pop_current(maps, errors) else { break };
            let Some(entry) = rings.take_runnable(waiter.rtrv_prio, waiter.rsrc, unplaced, errors) else {
                if let Rings::Bpf(maps) = rings {
                    push_back(maps, &waiter, errors);
                }
                break;
            };
            // The pad holds ring state (the lease stamp, or the MOVABLE mark): zero on the wire.
            let entry = entry.unstamped();
            let sent = encode_assign(&mut buf, &entry, 0)
                .map_err(anyhow::Error::from)
                .and_then(|n| self.socket.answer(&waiter, &buf[..n]));
            match sent {
                Ok(_) => {
                    self.counts.served += 1;
                    served.push(entry.task.prio);
                }
                Err(e) => {
                    *errors += 1;
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "answering a waiting executor failed; its task goes back to tier 2"
                    );
                    unplaced.push(entry);
                    if let Rings::Bpf(maps) = rings {
                        push_back(maps, &waiter, errors);
                    }
                    break;
                }
            }
        }
        served
    }

    /// Answers NOOP, with BEST `best`, to every executor that has waited the host wait by
    /// `now_ns` (CLOCK_MONOTONIC_COARSE, the program's clock). Returns how long until the
    /// next one has, if one waits.
    pub fn expire(&mut self, rings: &mut Rings, now_ns: u64, best: u8, errors: &mut u64) -> Option<Duration> {
        let Rings::Bpf(maps) = rings else { return None };
        for _ in 0..MAX_PER_TURN {
            let head = match maps.peek_waiter() {
                Ok(Some(w)) => w,
                Ok(None) => return None,
                Err(e) => {
                    *errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "reading the waiter queue failed");
                    return None;
                }
            };
            let age = now_ns.saturating_sub(head.parked_ns);
            if age < self.wait_ns {
                return Some(Duration::from_nanos(self.wait_ns - age));
            }
            // The program may have taken the head meanwhile: what is popped is checked
            // again, and one that has not waited long enough goes back.
            let Some(waiter) = self.pop_current(maps, errors) else { continue };
            if now_ns.saturating_sub(waiter.parked_ns) < self.wait_ns {
                push_back(maps, &waiter, errors);
                continue;
            }
            match self.noop(&waiter, best) {
                Ok(_) => self.counts.expired += 1,
                Err(e) => {
                    // The executor's own timeout makes it ask again.
                    *errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "NOOP to a waiting executor failed");
                }
            }
        }
        Some(Duration::ZERO)
    }

    /// Answers NOOP to every executor waiting now, however briefly it has waited. An
    /// agent starting on a pinned program does this first: whoever waits was queued for
    /// the agent before it, and may have waited past its own GET timeout already.
    pub fn answer_all(&mut self, rings: &mut Rings, errors: &mut u64) {
        // Bounded: the program may queue more meanwhile, and they are answered as usual.
        for _ in 0..16 {
            if self.expire(rings, u64::MAX, 0, errors).is_none() {
                return;
            }
        }
    }

    /// Pops waiters until one is its executor's newest request. The others were
    /// superseded by a resend after the executor's GET timeout: each is answered NOOP
    /// echoing its seq, which tells the executor that request's answer is not coming (it
    /// would otherwise take the next ASSIGN for it, and count its newest request
    /// unanswered until that times out too).
    fn pop_current(&mut self, maps: &mut XdpMaps, errors: &mut u64) -> Option<HostWaiter> {
        for _ in 0..MAX_PER_TURN {
            let waiter = match maps.pop_waiter() {
                Ok(Some(w)) => w,
                Ok(None) => return None,
                Err(e) => {
                    *errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "popping the waiter queue failed");
                    return None;
                }
            };
            match maps.waiter_is_current(&waiter) {
                Ok(true) => return Some(waiter),
                Ok(false) => {
                    self.counts.stale += 1;
                    if let Err(e) = self.noop(&waiter, 0) {
                        *errors += 1;
                        tracing::warn!(error = format!("{e:#}"), "NOOP to a superseded waiter failed");
                    }
                }
                Err(e) => {
                    *errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "reading a waiter's newest request failed");
                }
            }
        }
        None
    }

    /// Answers `waiter` NOOP echoing its seq, with BEST `best`.
    fn noop(&mut self, waiter: &HostWaiter, best: u8) -> anyhow::Result<()> {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_noop(&mut buf, Requester::new(self.node, waiter.executor, waiter.seq), best)?;
        self.socket.answer(waiter, &buf[..n])
    }
}

fn push_back(maps: &mut XdpMaps, waiter: &HostWaiter, errors: &mut u64) {
    if let Err(e) = maps.push_waiter(waiter) {
        *errors += 1;
        tracing::warn!(error = format!("{e:#}"), "a waiter could not be queued again; it will ask again");
    }
}

/// A raw IPv4 socket (IPPROTO_RAW: the datagrams carry their own IPv4 header), which
/// may name any source address.
struct RawSender {
    fd: OwnedFd,
    /// IPv4 ids of the datagrams sent.
    ip_id: u16,
}

impl RawSender {
    fn open() -> anyhow::Result<RawSender> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_RAW) };
        anyhow::ensure!(fd >= 0, "raw socket: {} (needs CAP_NET_RAW)", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(RawSender { fd: unsafe { OwnedFd::from_raw_fd(fd) }, ip_id: 0 })
    }

    /// Sends `message` to `waiter`'s executor from the switch's address and port its
    /// GET_TASK went to.
    fn answer(&mut self, waiter: &HostWaiter, message: &[u8]) -> anyhow::Result<()> {
        let mut frame = [0u8; 14 + 20 + 8 + MAX_MESSAGE_LEN];
        let src = Endpoint { mac: waiter.host_mac, ip: waiter.switch_ip, port: u16::from_be_bytes(waiter.switch_port) };
        let dst = Endpoint { mac: waiter.exec_mac, ip: waiter.exec_ip, port: u16::from_be_bytes(waiter.exec_port) };
        self.ip_id = self.ip_id.wrapping_add(1);
        let len = build_udp(&mut frame, src, dst, self.ip_id, message)?;
        // The kernel adds the link layer: the datagram starts at the IPv4 header.
        let datagram = &frame[14..len];
        let to = executor(waiter);
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(to.ip().octets()) },
            sin_zero: [0; 8],
        };
        // SAFETY: a valid descriptor, a buffer of the length passed, a sockaddr_in of its
        // size.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                datagram.as_ptr() as *const libc::c_void,
                datagram.len(),
                libc::MSG_DONTWAIT,
                &sa as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        anyhow::ensure!(rc >= 0, "sending to {to}: {}", std::io::Error::last_os_error());
        Ok(())
    }
}

/// The executor's socket address.
fn executor(w: &HostWaiter) -> SocketAddrV4 {
    SocketAddrV4::new(w.exec_ip.into(), u16::from_be_bytes(w.exec_port))
}

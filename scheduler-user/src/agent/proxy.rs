//! GET_TASK misses forwarded to tier 2 when the agent answers executors itself (the
//! userspace fallback), and their answers relayed back.
//!
//! ASSIGN does not name the executor it is for, so the answer must come back to a socket
//! that knows: each executor gets its own upstream socket, connected to the switch, and
//! whatever the switch sends to that socket goes to that executor, from the agent's
//! address the executor asked. Sockets idle for a while are closed; the switch answers
//! within milliseconds, so none is closed with an answer still on its way.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use scheduler_common::{decode, maps::RING_COUNT, Message, MAX_MESSAGE_LEN};

/// Most executors with an upstream socket at once.
pub const MAX_PROXIES: usize = 1024;
/// An upstream socket unused this long is closed.
const IDLE: Duration = Duration::from_secs(10);

struct Upstream {
    sock: UdpSocket,
    last_used: Instant,
}

/// What relaying did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayTally {
    /// Answers passed to their executor.
    pub relayed: u64,
    /// Datagrams from the switch that were neither ASSIGN nor NOOP, or malformed.
    pub dropped: u64,
    /// BEST stamp of the last answer relayed.
    pub last_best: Option<u8>,
    /// ASSIGNs relayed per task priority (index 0 = priority 1; beyond the last index:
    /// the last): tier 2 serving this host's executors, drain the prefetch sizes by.
    pub assigned: [u64; RING_COUNT],
}

/// The upstream sockets, one per executor.
pub struct Proxies {
    switch: SocketAddrV4,
    by_executor: HashMap<SocketAddrV4, Upstream>,
}

impl Proxies {
    pub fn new(switch: SocketAddrV4) -> Proxies {
        Proxies { switch, by_executor: HashMap::new() }
    }

    pub fn len(&self) -> usize {
        self.by_executor.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_executor.is_empty()
    }

    /// Sends `request` (a GET_TASK) to the switch on behalf of `executor`.
    pub fn forward(&mut self, executor: SocketAddrV4, request: &[u8], now: Instant) -> anyhow::Result<()> {
        if !self.by_executor.contains_key(&executor) {
            if self.by_executor.len() >= MAX_PROXIES {
                self.by_executor.retain(|_, u| now.duration_since(u.last_used) < IDLE);
            }
            anyhow::ensure!(
                self.by_executor.len() < MAX_PROXIES,
                "{MAX_PROXIES} executors are being forwarded already"
            );
            let sock = UdpSocket::bind("0.0.0.0:0")?;
            sock.connect(self.switch)?;
            sock.set_nonblocking(true)?;
            self.by_executor.insert(executor, Upstream { sock, last_used: now });
        }
        let up = self.by_executor.get_mut(&executor).expect("inserted above");
        up.last_used = now;
        up.sock.send(request)?;
        Ok(())
    }

    /// Passes every answer waiting on an upstream socket to its executor through `main`.
    pub fn relay(&mut self, main: &UdpSocket, now: Instant) -> RelayTally {
        let mut tally = RelayTally::default();
        let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
        for (executor, up) in self.by_executor.iter_mut() {
            // Bounded: at most a few answers per executor can be in flight.
            for _ in 0..64 {
                let n = match up.sock.recv(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                    Err(e) => {
                        // E.g. ICMP port unreachable from a switch that is down.
                        tracing::debug!(%executor, error = %e, "upstream socket error");
                        break;
                    }
                };
                up.last_used = now;
                // (BEST, the tasks of an ASSIGN: one, or a bundle)
                let answer = match decode(&buf[..n]) {
                    Ok(Message::Assign { entries, best }) => Some((best, entries)),
                    Ok(Message::Noop { best, .. }) => Some((best, &[][..])),
                    _ => None,
                };
                let Some((best, assigned)) = answer else {
                    tally.dropped += 1;
                    continue;
                };
                tally.last_best = Some(best);
                match main.send_to(&buf[..n], *executor) {
                    Ok(_) => {
                        tally.relayed += 1;
                        for e in assigned {
                            tally.assigned[(e.task.prio.max(1) as usize).min(RING_COUNT) - 1] += 1;
                        }
                    }
                    Err(e) => {
                        tally.dropped += 1;
                        tracing::warn!(%executor, error = %e, "relaying an answer from the switch failed");
                    }
                }
            }
        }
        tally
    }

    /// The sockets to wait on.
    pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.by_executor.values().map(|u| u.sock.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::{encode_assign, encode_get_task, encode_noop, Entry, Requester, Task};
    use std::net::SocketAddr;

    fn v4(a: SocketAddr) -> SocketAddrV4 {
        match a {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!(),
        }
    }

    #[test]
    fn answers_return_to_the_executor_that_asked() {
        let switch = UdpSocket::bind("127.0.0.1:0").unwrap();
        switch.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let main = UdpSocket::bind("127.0.0.1:0").unwrap();
        let execs: Vec<UdpSocket> = (0..2).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        for e in &execs {
            e.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        }
        let mut proxies = Proxies::new(v4(switch.local_addr().unwrap()));
        let mut buf = [0u8; 1024];
        let now = Instant::now();
        for (i, e) in execs.iter().enumerate() {
            let n = encode_get_task(&mut buf, 1, 0, Requester::new(1, i as u16, 7), false).unwrap();
            proxies.forward(v4(e.local_addr().unwrap()), &buf[..n], now).unwrap();
        }
        assert_eq!(proxies.len(), 2);
        // The switch answers each upstream socket: executor 0 gets an ASSIGN, 1 a NOOP,
        // and one stray REFILL is not relayed.
        for _ in 0..2 {
            let (n, from) = switch.recv_from(&mut buf).unwrap();
            let Ok(Message::GetTask { from: who, .. }) = decode(&buf[..n]) else { panic!() };
            let mut out = [0u8; 1024];
            let n = if who.executor() == 0 {
                let mut t = Task { prio: 1, ..Task::default() };
                t.set_tid(42);
                encode_assign(&mut out, &Entry::new(1, 1, t, [127, 0, 0, 1], 9), 0).unwrap()
            } else {
                encode_noop(&mut out, who, 2).unwrap()
            };
            switch.send_to(&out[..n], from).unwrap();
            let n = scheduler_common::encode_refill(&mut out, &[], 0).unwrap();
            switch.send_to(&out[..n], from).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut total = RelayTally::default();
        while total.relayed + total.dropped < 4 && Instant::now() < deadline {
            let t = proxies.relay(&main, Instant::now());
            total.relayed += t.relayed;
            total.dropped += t.dropped;
            total.last_best = t.last_best.or(total.last_best);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!((total.relayed, total.dropped), (2, 2));
        assert!(matches!(total.last_best, Some(0 | 2)), "the BEST stamp of a relayed answer is seen");
        let (n, from) = execs[0].recv_from(&mut buf).unwrap();
        assert_eq!(from, main.local_addr().unwrap());
        assert!(matches!(decode(&buf[..n]), Ok(Message::Assign { entries: [e], .. }) if e.task.tid() == 42));
        let (n, _) = execs[1].recv_from(&mut buf).unwrap();
        assert!(matches!(decode(&buf[..n]), Ok(Message::Noop { to: r, .. }) if r.executor() == 1));
    }
}

//! RETURN: tasks going back from this node to tier 2 (overflow, a drain, a REFILL that
//! found its ring full), in messages of at most 16 entries.

use std::net::{SocketAddrV4, UdpSocket};

use scheduler_common::{encode_return, Entry, MAX_LIST, MAX_MESSAGE_LEN};

/// Collects entries and sends them to the switch as RETURN messages of up to 16.
pub struct Returner {
    switch: SocketAddrV4,
    pending: Vec<Entry>,
    buf: [u8; MAX_MESSAGE_LEN],
    /// Tasks sent back.
    pub tasks: u64,
    /// RETURN messages sent.
    pub messages: u64,
    /// Messages the socket refused (their tasks are lost to this node; tier 2 is soft
    /// state and the clients resubmit them).
    pub send_errors: u64,
}

impl Returner {
    pub fn new(switch: SocketAddrV4) -> Returner {
        Returner {
            switch,
            pending: Vec::with_capacity(MAX_LIST),
            buf: [0; MAX_MESSAGE_LEN],
            tasks: 0,
            messages: 0,
            send_errors: 0,
        }
    }

    /// Queues `entry`; a full message goes out at once. A task taken from a ring carries
    /// its lease stamp; RETURN carries none.
    pub fn add(&mut self, sock: &UdpSocket, entry: Entry) {
        self.pending.push(entry.unstamped());
        if self.pending.len() == MAX_LIST {
            self.flush(sock);
        }
    }

    /// Sends what is queued.
    pub fn flush(&mut self, sock: &UdpSocket) {
        if self.pending.is_empty() {
            return;
        }
        let n = match encode_return(&mut self.buf, &self.pending) {
            Ok(n) => n,
            Err(e) => {
                // Only entries the decoder would refuse can fail (a ring never holds one:
                // REFILL is validated before it is stored). Send them one by one so that a
                // bad entry cannot take good ones with it.
                tracing::error!(error = %e, entries = self.pending.len(), "encoding RETURN failed; retrying entry by entry");
                let pending = std::mem::take(&mut self.pending);
                for entry in pending {
                    match encode_return(&mut self.buf, &[entry]) {
                        Ok(n) => {
                            self.send(sock, n, 1);
                        }
                        Err(e) => {
                            self.send_errors += 1;
                            tracing::error!(error = %e, uid = entry.uid(), jid = entry.jid(), tid = entry.task.tid(), "entry cannot be encoded; dropped");
                        }
                    }
                }
                return;
            }
        };
        let count = self.pending.len() as u64;
        self.pending.clear();
        self.send(sock, n, count);
    }

    /// Sends `entries` (at most 16) now, bypassing the queue. True once they are sent.
    /// Entries read from a ring or the overflow queue carry their lease stamp; RETURN
    /// carries none.
    pub fn send_now(&mut self, sock: &UdpSocket, entries: &[Entry]) -> bool {
        let mut unstamped = [Entry::default(); MAX_LIST];
        let Some(slots) = unstamped.get_mut(..entries.len()) else {
            self.send_errors += 1;
            tracing::error!(entries = entries.len(), "more entries than one RETURN holds");
            return false;
        };
        for (slot, e) in slots.iter_mut().zip(entries) {
            *slot = e.unstamped();
        }
        match encode_return(&mut self.buf, &unstamped[..entries.len()]) {
            Ok(n) => self.send(sock, n, entries.len() as u64),
            Err(e) => {
                self.send_errors += 1;
                tracing::error!(error = %e, entries = entries.len(), "encoding RETURN failed");
                false
            }
        }
    }

    fn send(&mut self, sock: &UdpSocket, n: usize, count: u64) -> bool {
        // A full socket buffer clears quickly: retry a few times before giving up.
        for attempt in 0..100 {
            match sock.send_to(&self.buf[..n], self.switch) {
                Ok(_) => {
                    self.tasks += count;
                    self.messages += 1;
                    return true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {
                    std::thread::sleep(std::time::Duration::from_micros(50 * (attempt + 1)));
                }
                Err(e) => {
                    self.send_errors += 1;
                    tracing::warn!(switch = %self.switch, error = %e, tasks = count, "sending RETURN failed");
                    return false;
                }
            }
        }
        self.send_errors += 1;
        tracing::warn!(switch = %self.switch, tasks = count, "RETURN not sent: the socket stayed full");
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::{decode, Message, Task};
    use std::net::SocketAddr;
    use std::time::Duration;

    #[test]
    fn a_stamped_entry_sent_at_once_goes_out_without_its_stamp() {
        let switch = UdpSocket::bind("127.0.0.1:0").unwrap();
        switch.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let SocketAddr::V4(to) = switch.local_addr().unwrap() else { unreachable!() };
        let agent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut r = Returner::new(to);
        let mut task = Task { prio: 2, ..Task::default() };
        task.set_tid(7);
        // As the XDP program leaves an expired task in the overflow queue: stamped.
        let stamped = Entry { pad: [0x12, 0x34], ..Entry::new(1, 2, task, [127, 0, 0, 1], 5) };
        assert!(r.send_now(&agent, &[stamped]));
        let mut buf = [0u8; 2048];
        let n = switch.recv(&mut buf).unwrap();
        let Ok(Message::Return(entries)) = decode(&buf[..n]) else { panic!("not a RETURN") };
        assert_eq!(entries, [Entry { pad: [0; 2], ..stamped }]);
        assert_eq!((r.tasks, r.send_errors), (1, 0));
    }

    #[test]
    fn returns_go_out_in_messages_of_at_most_sixteen() {
        let switch = UdpSocket::bind("127.0.0.1:0").unwrap();
        switch.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let SocketAddr::V4(to) = switch.local_addr().unwrap() else { unreachable!() };
        let agent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut r = Returner::new(to);
        for tid in 0..20u32 {
            let mut task = Task { prio: 1, ..Task::default() };
            task.set_tid(tid);
            r.add(&agent, Entry::new(1, 2, task, [127, 0, 0, 1], 5));
        }
        r.flush(&agent);
        r.flush(&agent);
        assert_eq!((r.tasks, r.messages, r.send_errors), (20, 2, 0));
        let mut buf = [0u8; 2048];
        let mut tids = Vec::new();
        for expected in [16, 4] {
            let n = switch.recv(&mut buf).unwrap();
            let Ok(Message::Return(entries)) = decode(&buf[..n]) else { panic!("not a RETURN") };
            assert_eq!(entries.len(), expected);
            tids.extend(entries.iter().map(|e| e.task.tid()));
        }
        assert_eq!(tids, (0..20).collect::<Vec<_>>());
    }
}

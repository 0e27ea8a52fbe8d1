//! Keeping a claim's lease while its task runs: a thread beside the handler sends a
//! CLAIM_RENEW to the task's client every `CLAIM_RENEW_INTERVAL_MS` until the task ends.
//! It has its own socket, so the answers never mix with the executor's GET_TASK traffic
//! (the client knows the claim by node and executor, not by address).
//!
//! A DENIED renewal means the lease lapsed and the task may have been handed to another
//! executor. The handler is not interrupted (handlers cannot be stopped safely halfway);
//! the renewer counts the loss, logs it and stops renewing, and the COMPLETE still goes
//! out: the client takes the first OK COMPLETE of a task and counts later ones as
//! duplicates.

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use scheduler_common::{decode, encode_claim, Claim, Message, CLAIM_GRANTED, CLAIM_RENEW_INTERVAL_MS, MAX_MESSAGE_LEN};

use super::counters::{bump, ExecutorCounters};

/// Renews one claim until dropped.
pub(crate) struct LeaseRenewer {
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl LeaseRenewer {
    /// Starts renewing `claim` (granted by `client`) from a new socket on `local_ip`.
    /// Without a socket or a thread nothing renews: counted, and the lease lapses.
    pub fn start(
        claim: &Claim,
        client: SocketAddr,
        local_ip: std::net::IpAddr,
        counters: Arc<ExecutorCounters>,
    ) -> LeaseRenewer {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let socket = match UdpSocket::bind(SocketAddr::new(local_ip, 0)) {
            Ok(s) => s,
            Err(e) => {
                bump(&counters.socket_errors);
                tracing::warn!(error = %e, "no socket to renew a claim's lease from");
                return LeaseRenewer { done, thread: None };
            }
        };
        let renewal = claim.renewal();
        let thread_done = done.clone();
        let thread = std::thread::Builder::new()
            .name("bolt-lease".into())
            .spawn(move || renew_until_done(&socket, client, &renewal, &thread_done, &counters));
        LeaseRenewer { done, thread: thread.ok() }
    }
}

impl Drop for LeaseRenewer {
    fn drop(&mut self) {
        let (lock, wake) = &*self.done;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn renew_until_done(
    socket: &UdpSocket,
    client: SocketAddr,
    renewal: &Claim,
    done: &(Mutex<bool>, Condvar),
    counters: &ExecutorCounters,
) {
    let interval = Duration::from_millis(CLAIM_RENEW_INTERVAL_MS);
    let mut tx = [0u8; MAX_MESSAGE_LEN];
    let mut rx = [0u8; MAX_MESSAGE_LEN + 1];
    let Ok(n) = encode_claim(&mut tx, renewal) else { return };
    let (lock, wake) = done;
    let mut next = Instant::now() + interval;
    loop {
        // Sleep until the next renewal or until the task ends.
        let mut finished = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !*finished {
            let Some(left) = next.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else { break };
            finished = wake.wait_timeout(finished, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        if *finished {
            return;
        }
        drop(finished);
        next += interval;
        if socket.send_to(&tx[..n], client).is_err() {
            bump(&counters.socket_errors);
            continue;
        }
        if !await_answer(socket, client, renewal, &mut rx, next, counters) {
            bump(&counters.leases_lost);
            tracing::warn!(
                uid = renewal.uid(),
                jid = renewal.jid(),
                tid = renewal.tid(),
                "claim lease lost (renewal denied); the task may run elsewhere too"
            );
            return;
        }
    }
}

/// Waits (until `until` at most) for the answer to a renewal: false only for DENIED.
/// No answer is not a loss: the next renewal asks again.
fn await_answer(
    socket: &UdpSocket,
    client: SocketAddr,
    renewal: &Claim,
    rx: &mut [u8],
    until: Instant,
    counters: &ExecutorCounters,
) -> bool {
    while let Some(left) = until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        if socket.set_read_timeout(Some(left)).is_err() {
            bump(&counters.socket_errors);
            return true;
        }
        let Ok((len, from)) = socket.recv_from(rx) else { return true };
        match decode(&rx[..len]) {
            Ok(Message::ClaimReply(c))
                if from == client && (c.uid, c.jid, c.tid) == (renewal.uid, renewal.jid, renewal.tid) =>
            {
                if c.verdict == CLAIM_GRANTED {
                    bump(&counters.leases_renewed);
                    return true;
                }
                return false;
            }
            Ok(_) => bump(&counters.ignored),
            Err(e) => bump(&counters.decode_errors[e.index()]),
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use scheduler_common::{encode_claim_reply, CLAIM_DENIED, CLAIM_RENEW};

    fn read(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    fn claim() -> Claim {
        let mut c = Claim::default();
        c.set_uid(7);
        c.set_jid(1);
        c.set_tid(42);
        c.set_node(3);
        c.set_executor(2);
        c
    }

    /// A fake client that answers renewals GRANTED `grants` times, then DENIED.
    fn fake_client(grants: u32) -> (SocketAddr, JoinHandle<u32>) {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let addr = socket.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            let mut rx = [0u8; MAX_MESSAGE_LEN + 1];
            let mut tx = [0u8; MAX_MESSAGE_LEN];
            let mut renewals = 0;
            while let Ok((n, from)) = socket.recv_from(&mut rx) {
                let Ok(Message::Claim(c)) = decode(&rx[..n]) else { continue };
                assert_eq!(c.verdict, CLAIM_RENEW);
                renewals += 1;
                let verdict = if renewals <= grants { CLAIM_GRANTED } else { CLAIM_DENIED };
                let len = encode_claim_reply(&mut tx, &c.answered(verdict)).unwrap();
                socket.send_to(&tx[..len], from).unwrap();
                if verdict == CLAIM_DENIED {
                    return renewals;
                }
            }
            renewals
        });
        (addr, thread)
    }

    #[test]
    fn renews_while_the_task_runs_and_stops_when_denied() {
        let counters = Arc::new(ExecutorCounters::default());
        let (client, answered) = fake_client(2);
        let renewer = LeaseRenewer::start(&claim(), client, "127.0.0.1".parse().unwrap(), counters.clone());
        // Two renewals granted, the third denied: about three intervals.
        let deadline = Instant::now() + Duration::from_secs(10);
        while read(&counters.leases_lost) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(renewer);
        assert_eq!(answered.join().unwrap(), 3);
        assert_eq!((read(&counters.leases_renewed), read(&counters.leases_lost)), (2, 1));
    }

    #[test]
    fn a_short_task_sends_no_renewal() {
        let counters = Arc::new(ExecutorCounters::default());
        let (client, _answered) = fake_client(100);
        let renewer = LeaseRenewer::start(&claim(), client, "127.0.0.1".parse().unwrap(), counters.clone());
        std::thread::sleep(Duration::from_millis(CLAIM_RENEW_INTERVAL_MS / 5));
        drop(renewer);
        assert_eq!((read(&counters.leases_renewed), read(&counters.leases_lost)), (0, 0));
    }
}

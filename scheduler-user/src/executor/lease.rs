//! Keeping a claim's lease while its task runs: each executor has one renewer thread,
//! started with its first claimed task, that sends CLAIM_RENEW to the task's client every
//! `CLAIM_RENEW_INTERVAL_MS` while the executor holds a claimed task. It has its own
//! socket, so the answers never mix with the executor's GET_TASK traffic (the client
//! knows the claim by node and executor, not by address). A task shorter than the
//! interval costs two lock operations and no packet.
//!
//! A DENIED renewal means the client no longer holds the task for this executor: it was
//! canceled (by its caller, or on its timeout), it is final, or the lease lapsed and the
//! task may have been handed to another executor. The handler is not interrupted
//! (handlers cannot be stopped safely halfway); the renewer counts the loss, logs it,
//! stops renewing that claim and raises the claim's revoked flag, which a handler may
//! poll to stop early (the `bolt` crate's `ctx.cancelled()`). The COMPLETE still goes
//! out: the client takes the first OK COMPLETE of a task and counts later ones as
//! duplicates, and ignores those of canceled tasks.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use scheduler_common::{decode, encode_claim, Claim, Message, CLAIM_GRANTED, CLAIM_RENEW_INTERVAL_MS, MAX_MESSAGE_LEN};

use super::counters::{bump, ExecutorCounters};

/// The claim an executor holds now.
#[derive(Clone, Copy)]
struct Held {
    renewal: Claim,
    client: SocketAddr,
    /// Bumped per claim, so the renewer tells a new claim from the one it renews.
    generation: u64,
    since: Instant,
}

#[derive(Default)]
struct Keep {
    held: Option<Held>,
    generation: u64,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    keep: Mutex<Keep>,
    wake: Condvar,
    /// Raised when a renewal of the claim held now is denied; lowered (under `keep`'s
    /// lock) whenever a claim is taken or released.
    revoked: Arc<AtomicBool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Keep> {
        self.keep.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One executor's lease renewer.
pub(crate) struct LeaseKeeper {
    shared: Arc<Shared>,
    counters: Arc<ExecutorCounters>,
    thread: OnceLock<Option<JoinHandle<()>>>,
}

/// While this lives, the claim it was made for is renewed.
pub(crate) struct LeaseHold<'a> {
    keeper: &'a LeaseKeeper,
}

impl LeaseKeeper {
    pub fn new(counters: Arc<ExecutorCounters>) -> LeaseKeeper {
        LeaseKeeper { shared: Arc::default(), counters, thread: OnceLock::new() }
    }

    /// True while the claim held now has had a renewal denied (see the module's doc);
    /// false between claims and for tasks run without one.
    pub fn revoked(&self) -> Arc<AtomicBool> {
        self.shared.revoked.clone()
    }

    /// Renews `claim` (granted by `client`) until the hold is dropped. The renewer's
    /// socket is bound on `local_ip` the first time. Without a socket or a thread
    /// nothing renews: counted, and the lease lapses.
    pub fn hold(&self, claim: &Claim, client: SocketAddr, local_ip: IpAddr) -> LeaseHold<'_> {
        self.thread.get_or_init(|| self.spawn(local_ip));
        let mut keep = self.shared.lock();
        keep.generation += 1;
        self.shared.revoked.store(false, Ordering::Relaxed);
        keep.held = Some(Held { renewal: claim.renewal(), client, generation: keep.generation, since: Instant::now() });
        drop(keep);
        self.shared.wake.notify_all();
        LeaseHold { keeper: self }
    }

    fn spawn(&self, local_ip: IpAddr) -> Option<JoinHandle<()>> {
        let socket = match UdpSocket::bind(SocketAddr::new(local_ip, 0)) {
            Ok(s) => s,
            Err(e) => {
                bump(&self.counters.socket_errors);
                tracing::warn!(error = %e, "no socket to renew claim leases from");
                return None;
            }
        };
        let (shared, counters) = (self.shared.clone(), self.counters.clone());
        let spawned = std::thread::Builder::new()
            .name("bolt-lease".into())
            .spawn(move || renew_while_held(&socket, &shared, &counters));
        if let Err(e) = &spawned {
            bump(&self.counters.socket_errors);
            tracing::warn!(error = %e, "no thread to renew claim leases");
        }
        spawned.ok()
    }
}

impl Drop for LeaseHold<'_> {
    fn drop(&mut self) {
        let mut keep = self.keeper.shared.lock();
        keep.held = None;
        self.keeper.shared.revoked.store(false, Ordering::Relaxed);
        drop(keep);
        self.keeper.shared.wake.notify_all();
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(Some(t)) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The renewer thread: for the claim held, a renewal every interval from the time it
/// was granted, until the claim is released, lost or the keeper stops.
fn renew_while_held(socket: &UdpSocket, shared: &Shared, counters: &ExecutorCounters) {
    let interval = Duration::from_millis(CLAIM_RENEW_INTERVAL_MS);
    let mut tx = [0u8; MAX_MESSAGE_LEN];
    let mut rx = [0u8; MAX_MESSAGE_LEN + 1];
    // The claim being renewed: its generation and when its next renewal is due.
    let mut current: Option<(u64, Instant)> = None;
    let mut lost_generation = 0;
    loop {
        let mut keep = shared.lock();
        let held = loop {
            if keep.stop {
                return;
            }
            match keep.held {
                Some(h) if h.generation != lost_generation => {
                    let due = match current {
                        Some((generation, due)) if generation == h.generation => due,
                        _ => h.since + interval,
                    };
                    current = Some((h.generation, due));
                    let Some(left) = due.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else {
                        break h;
                    };
                    keep = shared.wake.wait_timeout(keep, left).unwrap_or_else(|e| e.into_inner()).0;
                }
                _ => keep = shared.wake.wait(keep).unwrap_or_else(|e| e.into_inner()),
            }
        };
        drop(keep);
        let next = Instant::now() + interval;
        current = Some((held.generation, next));
        let Ok(n) = encode_claim(&mut tx, &held.renewal) else { return };
        if socket.send_to(&tx[..n], held.client).is_err() {
            bump(&counters.socket_errors);
            continue;
        }
        if !await_answer(socket, held.client, &held.renewal, &mut rx, next, counters) {
            bump(&counters.leases_lost);
            lost_generation = held.generation;
            let keep = shared.lock();
            if keep.held.is_some_and(|h| h.generation == held.generation) {
                shared.revoked.store(true, Ordering::Relaxed);
            }
            drop(keep);
            tracing::warn!(
                uid = held.renewal.uid(),
                jid = held.renewal.jid(),
                tid = held.renewal.tid(),
                "claim lease lost (renewal denied); the task may run elsewhere too"
            );
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
        let keeper = LeaseKeeper::new(counters.clone());
        let hold = keeper.hold(&claim(), client, "127.0.0.1".parse().unwrap());
        // Two renewals granted, the third denied: about three intervals.
        let deadline = Instant::now() + Duration::from_secs(10);
        while read(&counters.leases_lost) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // A lost lease is not renewed again.
        std::thread::sleep(Duration::from_millis(CLAIM_RENEW_INTERVAL_MS * 2));
        drop(hold);
        drop(keeper);
        assert_eq!(answered.join().unwrap(), 3);
        assert_eq!((read(&counters.leases_renewed), read(&counters.leases_lost)), (2, 1));
    }

    #[test]
    fn short_tasks_send_no_renewal() {
        let counters = Arc::new(ExecutorCounters::default());
        let (client, _answered) = fake_client(100);
        let keeper = LeaseKeeper::new(counters.clone());
        for _ in 0..5 {
            let _hold = keeper.hold(&claim(), client, "127.0.0.1".parse().unwrap());
            std::thread::sleep(Duration::from_millis(CLAIM_RENEW_INTERVAL_MS / 5));
        }
        // Five short tasks in a row, longer than an interval together: no renewal.
        std::thread::sleep(Duration::from_millis(CLAIM_RENEW_INTERVAL_MS * 2));
        drop(keeper);
        assert_eq!((read(&counters.leases_renewed), read(&counters.leases_lost)), (0, 0));
    }
}

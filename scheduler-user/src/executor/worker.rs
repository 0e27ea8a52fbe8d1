//! One executor: a thread with its own blocking UDP socket that pulls tasks with
//! GET_TASK (or GET_BUNDLE, for several at a time), runs them and reports COMPLETE to the
//! task's client.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::collections::VecDeque;

use arrayvec::ArrayVec;
use scheduler_common::descriptor::Handler;
use scheduler_common::{
    decode, encode_claim, encode_complete, encode_get_bundle, encode_get_task, Claim, Completion, Entry, Message,
    Requester, CLAIM_GRANTED, MAX_LIST, MAX_MESSAGE_LEN, STATUS_OK, STATUS_REFUSED, TASK_FLAG_EXACTLY_ONCE,
    TASK_FLAG_GANG,
};

use super::counters::{bump, ExecutorCounters};
use super::handlers::{Handlers, Outcome, Refusal};
use super::lease::LeaseKeeper;

/// RTRV_PRIO of every GET_TASK: search from the highest priority level down.
pub const RTRV_PRIO: u8 = 1;

/// Most assignment records one executor keeps; later assignments are not recorded.
pub const MAX_ASSIGNMENT_RECORDS: usize = 1 << 20;

/// One task assigned to an executor: who it belongs to and how long the GET_TASK that
/// brought it took to be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AssignmentRecord {
    pub uid: u32,
    pub jid: u32,
    pub tid: u32,
    pub priority: u8,
    pub node: u16,
    /// The latest GET_TASK sent → this ASSIGN received, ns.
    pub get_rtt_ns: u64,
    /// When the ASSIGN reached this host's stack, ns since the Unix epoch (the kernel's
    /// stamp; 0 if there was none). The task's start less this is how long the
    /// executor's thread took to run once its task had arrived.
    pub arrived_unix_ns: u64,
    /// How long the task asked to sleep, ns, for a sleep task (its run time less this
    /// is the sleep's overshoot).
    pub sleep_ns: Option<u64>,
}

/// GET timeouts in a row after which the executor warns that the scheduler is silent.
const SILENT_WARN_AFTER: u32 = 20;

/// CLAIMs sent for one exactly-once task (each waiting one GET timeout) before the
/// executor gives up and drops it unrun: the client still holds the task and resubmits it.
const CLAIM_ATTEMPTS: u32 = 3;
/// How long an executor holding a gang task waits for its gang to form: longer than
/// any client's formation timeout (`client::gang::MAX_FORMATION`), after which the client
/// has answered (start or give up) unless it is gone.
pub const GANG_WAIT: Duration = Duration::from_secs(12);

/// What the owning client said to a CLAIM.
enum ClaimAnswer {
    Granted,
    Denied,
    Unanswered,
}

/// The GET_TASK this executor has outstanding.
#[derive(Clone, Copy)]
struct Request {
    seq: u32,
    sent: Instant,
    deadline: Instant,
    /// An ASSIGN taken for the late answer of the request before arrived while this one
    /// was outstanding. Should this one time out, that ASSIGN was in fact its answer (the
    /// late one was lost, or dropped unanswered, as a host drops a superseded waiter), so
    /// no late answer is expected for it: expecting one would take the next request's
    /// ASSIGN for it, time that request out, and so on, one task per timeout.
    took_late_answer: bool,
}

/// The GET_TASK that last timed out, whose answer may still arrive (delayed rather than
/// lost) within one more timeout. Older ones are past that; should one still be answered,
/// its ASSIGN is taken for the current request's (run all the same), and the switch's
/// NOOP for the request it then replaces sets the count right again.
#[derive(Default)]
struct LateAnswer {
    until: Option<Instant>,
}

impl LateAnswer {
    fn expect(&mut self, until: Instant) {
        self.until = Some(until);
    }

    fn expire(&mut self, now: Instant) {
        if self.until.is_some_and(|u| now >= u) {
            self.until = None;
        }
    }

    /// Takes the expected late answer, if one is expected.
    fn take(&mut self) -> bool {
        self.until.take().is_some()
    }

    fn pending(&self) -> u32 {
        self.until.is_some() as u32
    }
}

/// What one receive brought. Kept inline (a bundle is at most 16 entries): boxing it
/// would allocate per ASSIGN.
#[allow(clippy::large_enum_variant)]
enum Received {
    /// Tasks to run, in order (copied out of the receive buffer): one, or a bundle; and
    /// when the ASSIGN reached the stack (ns since the Unix epoch; 0 unless assignments
    /// are recorded).
    Assign(ArrayVec<Entry, MAX_LIST>, u64),
    /// A NOOP for this executor, with the sequence number it echoes.
    Noop(u32),
    /// Something this executor does not take; counted already.
    Ignored,
    /// The receive timed out or failed; nothing arrived.
    Nothing,
}

pub(crate) struct Worker {
    pub socket: UdpSocket,
    pub switch: SocketAddr,
    pub node: u16,
    pub index: u16,
    pub resources: u8,
    /// Tasks asked for per request: 1 sends GET_TASK, 2..=16 GET_BUNDLE with this `want`.
    pub bundle: u8,
    pub noop_backoff: Duration,
    pub get_timeout: Duration,
    pub handlers: Arc<Handlers>,
    pub counters: Arc<ExecutorCounters>,
    pub stop: Arc<AtomicBool>,
    /// The receive timeout currently set on the socket (saves a syscall per wait).
    pub read_timeout: Duration,
    /// Tasks of ASSIGNs that arrived while waiting for a CLAIM_REPLY, to run next, in
    /// arrival order.
    pub stash: Vec<Entry>,
    /// Where assignments are recorded, if they are.
    pub assignments: Option<Arc<Mutex<Vec<AssignmentRecord>>>>,
    /// Renews the lease of the claimed task running now.
    pub lease: LeaseKeeper,
    /// This host's store, for SPEC tasks.
    pub data: Option<super::spec::DataPath>,
}

impl Worker {
    /// Pulls and runs tasks until `stop` is set, then runs whatever still arrives in
    /// answer to GET_TASKs already sent: no task assigned to this executor is dropped.
    ///
    /// At most one GET_TASK is outstanding: a new one goes out only once the current one
    /// is answered (ASSIGN, or the NOOP echoing its seq) or has timed out. A timed-out
    /// request may still be answered late; the first ASSIGN arriving within one more
    /// timeout is taken as that late answer (run, and the current request stays
    /// outstanding), so a late answer does not make the executor ask twice.
    pub fn run(mut self) {
        let mut rx = [0u8; MAX_MESSAGE_LEN + 1];
        let mut tx = [0u8; MAX_MESSAGE_LEN];
        let mut seq: u32 = 0;
        let mut current: Option<Request> = None;
        let mut late = LateAnswer::default();
        // GET timeouts in a row, to tell the operator when the scheduler goes silent.
        let mut silent: u32 = 0;
        tracing::debug!(node = self.node, executor = self.index, "executor started");
        while !self.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            late.expire(now);
            let request = match current {
                Some(r) => r,
                None => {
                    seq = seq.wrapping_add(1);
                    if !self.send_get(seq, &mut tx) {
                        // The socket refused to send: wait before trying again rather than spin.
                        std::thread::sleep(self.get_timeout);
                        continue;
                    }
                    let sent = Instant::now();
                    let r = Request { seq, sent, deadline: sent + self.get_timeout, took_late_answer: false };
                    current = Some(r);
                    r
                }
            };
            let now = Instant::now();
            if now >= request.deadline {
                self.timed_out(request, &mut silent);
                if !request.took_late_answer {
                    late.expect(now + self.get_timeout);
                }
                current = None;
                continue;
            }
            // Wait only for what is left of this GET's time.
            self.set_read_timeout(request.deadline - now);
            match self.receive(&mut rx) {
                Received::Assign(entries, arrived_unix_ns) => {
                    self.heard_from_switch(&mut silent);
                    if late.take() {
                        bump(&self.counters.late_assigns);
                        current = current.map(|r| Request { took_late_answer: true, ..r });
                    } else {
                        let rtt = request.sent.elapsed();
                        entries.iter().for_each(|e| self.record_assignment(e, rtt, arrived_unix_ns));
                        current = None;
                    }
                    let answers = self.execute_all(&entries, &mut tx);
                    for _ in 0..answers {
                        if late.take() {
                            current = current.map(|r| Request { took_late_answer: true, ..r });
                        } else {
                            current = None;
                        }
                    }
                }
                Received::Noop(echoed) => {
                    self.heard_from_switch(&mut silent);
                    if echoed == request.seq {
                        bump(&self.counters.noops);
                        current = None;
                        std::thread::sleep(self.noop_backoff);
                    } else {
                        bump(&self.counters.stale_noops);
                        late.take();
                    }
                }
                Received::Ignored | Received::Nothing => {}
            }
        }
        let unanswered = current.is_some() as u32 + late.pending();
        self.drain(unanswered, &mut rx, &mut tx);
        tracing::debug!(node = self.node, executor = self.index, "executor stopped");
    }

    fn timed_out(&self, request: Request, silent: &mut u32) {
        bump(&self.counters.get_timeouts);
        *silent = silent.saturating_add(1);
        if *silent == SILENT_WARN_AFTER {
            tracing::warn!(
                switch = %self.switch,
                node = self.node,
                executor = self.index,
                timeouts = *silent,
                "no answer from the scheduler; still asking"
            );
        }
        tracing::debug!(node = self.node, executor = self.index, seq = request.seq, "GET_TASK timed out; resending");
    }

    /// After stop: answers to GET_TASKs already sent may still carry tasks. Run them;
    /// give up once nothing has arrived for one GET timeout.
    fn drain(&mut self, mut unanswered: u32, rx: &mut [u8], tx: &mut [u8]) {
        let mut quiet_until = Instant::now() + self.get_timeout;
        while unanswered > 0 {
            let now = Instant::now();
            if now >= quiet_until {
                tracing::debug!(
                    node = self.node,
                    executor = self.index,
                    unanswered,
                    "stopping with GET_TASKs unanswered"
                );
                return;
            }
            self.set_read_timeout(quiet_until - now);
            match self.receive(rx) {
                Received::Assign(entries, _) => {
                    unanswered -= 1;
                    let answers = self.execute_all(&entries, tx);
                    unanswered = unanswered.saturating_sub(answers);
                    quiet_until = Instant::now() + self.get_timeout;
                }
                Received::Noop(_) => unanswered -= 1,
                Received::Ignored | Received::Nothing => {}
            }
        }
    }

    fn record_assignment(&self, entry: &Entry, rtt: Duration, arrived_unix_ns: u64) {
        let Some(log) = &self.assignments else { return };
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() < MAX_ASSIGNMENT_RECORDS {
            log.push(AssignmentRecord {
                uid: entry.uid(),
                jid: entry.jid(),
                tid: entry.task.tid(),
                priority: entry.task.prio,
                node: self.node,
                get_rtt_ns: rtt.as_nanos() as u64,
                arrived_unix_ns,
                sleep_ns: match Handler::decode(&entry.task.desc) {
                    Ok(Handler::Sleep { micros }) => Some(u64::from(micros) * 1_000),
                    _ => None,
                },
            });
        }
    }

    fn heard_from_switch(&self, silent: &mut u32) {
        if *silent >= SILENT_WARN_AFTER {
            tracing::info!(switch = %self.switch, node = self.node, executor = self.index, "the scheduler answers again");
        }
        *silent = 0;
    }

    fn send_get(&self, seq: u32, tx: &mut [u8]) -> bool {
        let from = Requester::new(self.node, self.index, seq);
        // WAIT: a scheduler with nothing for this executor holds the request and answers
        // the moment a task arrives, instead of NOOP and a re-poll.
        let encoded = if self.bundle > 1 {
            encode_get_bundle(tx, RTRV_PRIO, self.resources, from, self.bundle, true)
        } else {
            encode_get_task(tx, RTRV_PRIO, self.resources, from, true)
        };
        let n = match encoded {
            Ok(n) => n,
            Err(e) => {
                // Cannot happen with a MAX_MESSAGE_LEN buffer and a bundle size checked at
                // spawn; report rather than assume.
                tracing::error!(error = %e, "encoding GET_TASK failed");
                return false;
            }
        };
        match self.socket.send_to(&tx[..n], self.switch) {
            Ok(_) => {
                bump(&self.counters.gets_sent);
                true
            }
            Err(e) => {
                bump(&self.counters.socket_errors);
                tracing::warn!(switch = %self.switch, error = %e, "sending GET_TASK failed");
                false
            }
        }
    }

    fn set_read_timeout(&mut self, d: Duration) {
        // A zero timeout means "block forever" to the socket API: never pass it.
        let d = d.max(Duration::from_micros(1));
        if d == self.read_timeout {
            return;
        }
        match self.socket.set_read_timeout(Some(d)) {
            Ok(()) => self.read_timeout = d,
            Err(e) => {
                bump(&self.counters.socket_errors);
                tracing::warn!(error = %e, "setting the receive timeout failed");
            }
        }
    }

    fn receive(&self, rx: &mut [u8]) -> Received {
        // Only a recording executor asked for arrival stamps (pool set-up); the others
        // keep the plain receive.
        let received = if self.assignments.is_some() {
            crate::net::recv_msg(&self.socket, rx).map(|d| (d.len, d.from.map(SocketAddr::V4), d.arrived_unix_ns))
        } else {
            self.socket.recv_from(rx).map(|(n, from)| (n, Some(from), None))
        };
        let (n, from, arrived_unix_ns) = match received {
            Ok((n, Some(from), arrived)) => (n, from, arrived.unwrap_or(0)),
            Ok((_, None, _)) => {
                bump(&self.counters.ignored);
                return Received::Ignored;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                return Received::Nothing
            }
            Err(e) => {
                bump(&self.counters.socket_errors);
                tracing::warn!(error = %e, "receive failed");
                // Do not spin on a persistent error.
                std::thread::sleep(Duration::from_millis(1));
                return Received::Nothing;
            }
        };
        if from != self.switch {
            // Tasks come only from the scheduler this executor pulls from.
            bump(&self.counters.ignored);
            tracing::debug!(%from, "message from an address other than the switch ignored");
            return Received::Ignored;
        }
        match decode(&rx[..n]) {
            Ok(Message::Assign { entries, .. }) => Received::Assign(entries.iter().copied().collect(), arrived_unix_ns),
            Ok(Message::Noop { to: r, .. }) if r.node() == self.node && r.executor() == self.index => {
                Received::Noop(r.seq())
            }
            Ok(other) => {
                bump(&self.counters.ignored);
                tracing::debug!(op = other.op().name(), "unexpected message ignored");
                Received::Ignored
            }
            Err(e) => {
                bump(&self.counters.decode_errors[e.index()]);
                tracing::debug!(error = %e, "malformed message dropped");
                Received::Ignored
            }
        }
    }

    /// Runs `assigned` one after another (a bundle in the order it came), then every
    /// ASSIGN that arrived while claims were pending, in arrival order. Returns how many
    /// answers to GET_TASK (ASSIGN or NOOP) arrived during those claims.
    fn execute_all(&mut self, assigned: &[Entry], tx: &mut [u8]) -> u32 {
        let mut answers = 0;
        let mut queue: VecDeque<Entry> = assigned.iter().copied().collect();
        while let Some(entry) = queue.pop_front() {
            answers += self.execute(&entry, tx);
            queue.extend(self.stash.drain(..));
        }
        answers
    }

    /// Runs one task and reports it to its client; an exactly-once task only once its
    /// client granted this executor's claim. Returns the GET_TASK answers that arrived
    /// while a claim was pending.
    fn execute(&mut self, entry: &Entry, tx: &mut [u8]) -> u32 {
        let mut answers = 0;
        if entry.task.flags & (TASK_FLAG_EXACTLY_ONCE | TASK_FLAG_GANG) != 0 {
            let (answer, during) = self.claim(entry, tx);
            answers = during;
            let (counter, why) = match answer {
                ClaimAnswer::Granted => (&self.counters.claims_granted, None),
                ClaimAnswer::Denied => (&self.counters.claims_denied, Some("denied")),
                ClaimAnswer::Unanswered => (&self.counters.claims_unanswered, Some("unanswered")),
            };
            bump(counter);
            if let Some(why) = why {
                tracing::debug!(
                    uid = entry.uid(),
                    jid = entry.jid(),
                    tid = entry.task.tid(),
                    why,
                    "claim not granted; not run"
                );
                return answers;
            }
            // Keep the claim's lease while the task runs (renewals stop when this drops).
            let _lease = self.client_of(entry).map(|client| {
                let ip = self.socket.local_addr().map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |a| a.ip());
                self.lease.hold(&Claim::of(entry, self.node, self.index), client, ip)
            });
            self.run_and_report(entry, tx);
            return answers;
        }
        self.run_and_report(entry, tx);
        answers
    }

    /// Asks the task's client for the right to run it. ASSIGNs arriving meanwhile are
    /// stashed (never dropped: they have left every queue); NOOPs only counted.
    fn claim(&mut self, entry: &Entry, tx: &mut [u8]) -> (ClaimAnswer, u32) {
        let mut answers = 0;
        let Some(client) = self.client_of(entry) else { return (ClaimAnswer::Unanswered, 0) };
        let question = Claim::of(entry, self.node, self.index);
        let n = match encode_claim(tx, &question) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %e, "encoding CLAIM failed");
                return (ClaimAnswer::Unanswered, 0);
            }
        };
        let mut rx = [0u8; MAX_MESSAGE_LEN + 1];
        // A gang member asks again every GET timeout until its client starts the gang or
        // gives up on it (the client holds the answer meanwhile).
        let attempts = if entry.task.flags & TASK_FLAG_GANG != 0 {
            (GANG_WAIT.as_nanos() / self.get_timeout.as_nanos().max(1)).max(CLAIM_ATTEMPTS as u128) as u32
        } else {
            CLAIM_ATTEMPTS
        };
        for _ in 0..attempts {
            if self.socket.send_to(&tx[..n], client).is_err() {
                bump(&self.counters.socket_errors);
                continue;
            }
            let deadline = Instant::now() + self.get_timeout;
            while let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
                self.set_read_timeout(left);
                let Ok((len, from)) = self.socket.recv_from(&mut rx) else { continue };
                match decode(&rx[..len]) {
                    Ok(Message::ClaimReply(c))
                        if from == client && (c.uid, c.jid, c.tid) == (question.uid, question.jid, question.tid) =>
                    {
                        let answer =
                            if c.verdict == CLAIM_GRANTED { ClaimAnswer::Granted } else { ClaimAnswer::Denied };
                        return (answer, answers);
                    }
                    Ok(Message::Assign { entries, .. }) if from == self.switch => {
                        answers += 1;
                        self.stash.extend_from_slice(entries);
                    }
                    Ok(Message::Noop { .. }) if from == self.switch => answers += 1,
                    Ok(_) => bump(&self.counters.ignored),
                    Err(e) => bump(&self.counters.decode_errors[e.index()]),
                }
            }
        }
        (ClaimAnswer::Unanswered, answers)
    }

    /// The client an ENTRY names, if it names one.
    fn client_of(&self, entry: &Entry) -> Option<SocketAddr> {
        let ip = Ipv4Addr::from(entry.client_ip);
        let port = entry.client_port();
        if ip.is_unspecified() || port == 0 {
            bump(&self.counters.complete_errors);
            tracing::warn!(
                uid = entry.uid(),
                jid = entry.jid(),
                tid = entry.task.tid(),
                "ENTRY has no client address; neither CLAIM nor COMPLETE can be sent"
            );
            return None;
        }
        Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
    }

    fn run_and_report(&self, entry: &Entry, tx: &mut [u8]) {
        let start_unix_ns = unix_now_ns();
        let started = Instant::now();
        let mut output_len = 0;
        let outcome = if !entry.task.runs_on(self.resources) {
            // The scheduler should never send this; refusing lets the client resubmit.
            Outcome::Refused(Refusal::MissingResources { needed: entry.task.rsrc, offered: self.resources })
        } else if let (Some(data), Ok(Handler::Spec { port, spec_id })) =
            (&self.data, Handler::decode(&entry.task.desc))
        {
            let spec = data.run(entry, port, spec_id, &self.counters);
            output_len = spec.output_len;
            match spec.status {
                STATUS_OK => Outcome::Ok,
                STATUS_REFUSED => {
                    tracing::debug!(spec_id, reason = %spec.message, "spec task refused");
                    Outcome::Refused(Refusal::Spec)
                }
                _ => {
                    tracing::debug!(spec_id, reason = %spec.message, "spec task failed");
                    Outcome::Failed
                }
            }
        } else {
            self.handlers.run(&entry.task.desc)
        };
        let run_ns = started.elapsed().as_nanos().min(u32::MAX as u128) as u32;
        match outcome {
            Outcome::Ok => {
                bump(&self.counters.tasks_run);
                bump(&self.counters.tasks_ok);
            }
            Outcome::Failed => {
                bump(&self.counters.tasks_run);
                bump(&self.counters.tasks_failed);
            }
            Outcome::Refused(why) => {
                bump(&self.counters.tasks_refused);
                tracing::debug!(uid = entry.uid(), jid = entry.jid(), tid = entry.task.tid(), reason = %why, "task refused");
            }
        }
        let mut c = Completion { status: outcome.status(), ..Completion::default() };
        c.set_uid(entry.uid());
        c.set_jid(entry.jid());
        c.set_tid(entry.task.tid());
        c.set_node(self.node);
        c.set_executor(self.index);
        c.set_run_ns(run_ns);
        c.set_start_unix_ns(start_unix_ns);
        c.set_output_len(output_len);
        self.report(entry, &c, tx);
    }

    fn report(&self, entry: &Entry, c: &Completion, tx: &mut [u8]) {
        let Some(to) = self.client_of(entry) else { return };
        let sent = encode_complete(tx, c)
            .map_err(|e| e.to_string())
            .and_then(|n| self.socket.send_to(&tx[..n], to).map_err(|e| e.to_string()));
        if let Err(e) = sent {
            bump(&self.counters.complete_errors);
            tracing::warn!(client = %to, error = %e, "sending COMPLETE failed");
        }
    }
}

/// Wall-clock time in ns since the Unix epoch (0 if the clock is before 1970).
pub fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

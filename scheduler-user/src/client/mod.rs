//! The Bolt client library: submit jobs of independent tasks to the switch and track
//! them until every task is final.
//!
//! A [`Client`] owns one UDP socket. Its SUBMITs leave from that socket, so the switch
//! records that address in every ENTRY and both QUEUE_FULL (from the switch) and
//! COMPLETE (from executors) come back to it. The bookkeeping lives in [`Tracker`]
//! (no I/O; see its module for the retry and duplicate rules) and task state in
//! [`TaskStates`], one roaring bitmap per [`TaskState`].
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use scheduler_user::client::{Client, ClientConfig, TaskSpec};
//! use scheduler_common::descriptor::Handler;
//! let mut client = Client::bind(ClientConfig::new("127.0.0.1:7171".parse()?)).await?;
//! let task = TaskSpec::new(Handler::Sleep { micros: 100 }, 1, 0)?;
//! client.submit(&vec![task; 1000]).await?;
//! let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
//! let all_final = client.wait_idle(deadline).await?;
//! println!("{all_final} {:?}", client.summary());
//! # Ok(()) }
//! ```

mod cli;
pub mod dag;
pub mod dag_run;
pub mod gang;
pub mod job_queue;
mod jobs_cli;
pub mod learned;
pub mod monitor;
pub mod spec_server;
mod state;
mod stats;
mod tracker;

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::Context;
use scheduler_common::{
    decode, encode_claim_reply, encode_pin, encode_submit, Claim, Message, Task, CLAIM_DENIED, CLAIM_GRANTED,
    CLAIM_RENEW, FLAG_MOVABLE, MAX_LIST, MAX_MESSAGE_LEN, STATUS_OK,
};
use serde::Serialize;
use tokio::net::UdpSocket;

use crate::clock::DeadlineTimer;
use crate::executor::unix_now_ns;
use crate::placement::{InputObject, Placement, PlacementPolicy, TaskLength};

/// `est_task_length` before any task of this client has finished: MATRIX's DAG tasks'
/// mean (50 ms). The paper gives no prior.
pub const DEFAULT_TASK_LENGTH_PRIOR: Duration = Duration::from_millis(50);
use gang::{GangStats, GangVerdict, Gangs, Member};

pub use cli::{run, HandlerKind, SubmitArgs};
pub use jobs_cli::{run_jobs, JobsArgs};
pub use state::{TaskState, TaskStates};
pub use stats::{ClientStats, Latencies};
pub use tracker::{
    CompletionEffect, JobProgress, JobReport, JobsReport, Packet, TaskRecord, TaskSpec, Tracker, TrackerConfig,
};

/// Where a client sends and how it tracks.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The switch's SUBMIT address.
    pub switch: SocketAddr,
    /// Local address of the client socket; `None`: the address the host sends to the
    /// switch from (its route's source), port 0. Not the unspecified address: the switch
    /// puts the SUBMIT's source in every ENTRY, and an executor takes a CLAIM_REPLY only
    /// from that address, which an unbound socket on a host with several addresses may
    /// not answer from.
    pub bind: Option<SocketAddr>,
    pub tracker: TrackerConfig,
    /// Each host's agent, by node id: where tasks placed on that host go (PIN).
    pub agents: BTreeMap<u16, SocketAddr>,
}

impl ClientConfig {
    /// Defaults with a random uid.
    pub fn new(switch: SocketAddr) -> ClientConfig {
        ClientConfig { switch, bind: None, tracker: TrackerConfig::new(rand::random()), agents: BTreeMap::new() }
    }

    fn bind_addr(&self) -> SocketAddr {
        self.bind.unwrap_or_else(|| {
            let ip = match self.switch.ip() {
                IpAddr::V4(ip) if ip.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(ip) if ip.is_loopback() => IpAddr::V6(Ipv6Addr::LOCALHOST),
                _ => route_source(self.switch).unwrap_or(match self.switch {
                    SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                }),
            };
            SocketAddr::new(ip, 0)
        })
    }
}

/// The source address the kernel picks for datagrams to `to` (connecting a UDP socket
/// sends nothing).
fn route_source(to: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = match to {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let probe = std::net::UdpSocket::bind(any).ok()?;
    probe.connect(to).ok()?;
    Some(probe.local_addr().ok()?.ip())
}

/// The numbers `bolt submit` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Distinct tasks submitted.
    pub submitted: u64,
    /// Tasks Done.
    pub completed: u64,
    /// Tasks Failed (attempts exhausted, refused everywhere, lost, or rejected by a full queue).
    pub failed: u64,
    /// Task sends flagged FLAG_RESUBMIT.
    pub resubmitted: u64,
    /// Submit → executor start, median and 99th percentile, in microseconds.
    pub p50_sched_delay_us: f64,
    pub p99_sched_delay_us: f64,
    /// Submit → the task's COMPLETE back at this client, median and 99th percentile, in
    /// microseconds.
    pub p50_result_delay_us: f64,
    pub p99_result_delay_us: f64,
    /// Job added → last task final, in milliseconds.
    pub p50_job_ms: f64,
    pub p99_job_ms: f64,
    /// Tasks done per second between the first send and the last completion.
    pub throughput_tasks_per_s: f64,
    /// Tasks not final yet (Pending or Running) when the summary was taken.
    pub unfinished: u64,
    /// Failed tasks whose attempts all timed out (no executor ever answered).
    pub lost: u64,
    pub canceled: u64,
    /// Completions ignored because the task was already final.
    pub duplicates: u64,
    pub timeouts: u64,
    pub queue_full_bounces: u64,
    pub jobs: u64,
    pub jobs_finished: u64,
    /// Handler run time reported by executors, median, in microseconds.
    pub p50_run_us: f64,
    /// First send → last completion, in seconds.
    pub elapsed_s: f64,
}

/// Most SUBMITs sent in one go before the client looks at its socket again.
const FLUSH_BURST: usize = 256;
/// Most messages handled in one go before the client looks at its timers again.
const RECEIVE_BURST: usize = 512;
/// Receive buffer asked for, so bursts of COMPLETEs are not dropped (the kernel caps
/// it at net.core.rmem_max).
const RECEIVE_BUFFER_BYTES: usize = 4 << 20;

/// A client: one socket, one tracker.
pub struct Client {
    socket: UdpSocket,
    switch: SocketAddr,
    agents: BTreeMap<u16, SocketAddr>,
    tracker: Tracker,
    /// Each job's placement policy (changeable while it runs) and the running mean of
    /// finished tasks' run times, for placing tasks by their inputs.
    placement: BTreeMap<u32, PlacementPolicy>,
    task_length: TaskLength,
    gangs: Gangs,
    rx: Box<[u8; MAX_MESSAGE_LEN + 1]>,
    tx: [u8; MAX_MESSAGE_LEN],
    out: [Task; MAX_LIST],
    /// A learned policy choosing each task's worker type, if the client has one.
    learned: Option<learned::LearnedPlacement>,
    /// Wakes `drive` at its deadline within the timer slack (None: the timerfd could not be
    /// made, and tokio's millisecond timer does).
    timer: Option<DeadlineTimer>,
}

impl Client {
    /// Binds the client's socket.
    pub async fn bind(cfg: ClientConfig) -> anyhow::Result<Client> {
        if cfg.tracker.max_attempts == 0 {
            anyhow::bail!("max attempts must be at least 1");
        }
        if cfg.tracker.window == 0 {
            anyhow::bail!("the window must allow at least one task");
        }
        if cfg.tracker.gang_formation > gang::MAX_FORMATION {
            anyhow::bail!("a gang's formation timeout is at most {:?}", gang::MAX_FORMATION);
        }
        let addr = cfg.bind_addr();
        let std_socket =
            std::net::UdpSocket::bind(addr).with_context(|| format!("binding the client socket to {addr}"))?;
        grow_receive_buffer(&std_socket, RECEIVE_BUFFER_BYTES);
        std_socket.set_nonblocking(true)?;
        let socket = UdpSocket::from_std(std_socket)?;
        tracing::debug!(local = %socket.local_addr()?, switch = %cfg.switch, uid = cfg.tracker.uid, "client bound");
        Ok(Client {
            socket,
            switch: cfg.switch,
            agents: cfg.agents,
            gangs: Gangs::new(cfg.tracker.gang_formation),
            tracker: Tracker::new(cfg.tracker),
            placement: BTreeMap::new(),
            task_length: TaskLength::new(DEFAULT_TASK_LENGTH_PRIOR),
            rx: Box::new([0; MAX_MESSAGE_LEN + 1]),
            tx: [0; MAX_MESSAGE_LEN],
            out: [Task::default(); MAX_LIST],
            learned: None,
            timer: DeadlineTimer::new()
                .inspect_err(|e| tracing::debug!(error = %e, "no timerfd: the client wakes on tokio's timer"))
                .ok(),
        })
    }

    /// The address COMPLETE and QUEUE_FULL come back to.
    pub fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        Ok(self.socket.local_addr()?)
    }

    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// From now on a learned policy picks each task's worker type (its resource bit).
    pub fn set_learned(&mut self, learned: learned::LearnedPlacement) {
        self.learned = Some(learned);
    }

    pub fn learned(&self) -> Option<&learned::LearnedPlacement> {
        self.learned.as_ref()
    }

    pub fn learned_mut(&mut self) -> Option<&mut learned::LearnedPlacement> {
        self.learned.as_mut()
    }

    /// Adds a job without sending yet (the next [`Client::flush`] or drive sends it).
    pub fn add_job(&mut self, tasks: &[TaskSpec]) -> anyhow::Result<u32> {
        let Some(learned) = self.learned.as_mut() else {
            return self.tracker.add_job(tasks, Instant::now());
        };
        let first = self.tracker.next_tid();
        let now_ns = unix_now_ns();
        let mut placed = tasks.to_vec();
        for (tid, spec) in (first..).zip(placed.iter_mut()) {
            learned.place(tid, spec, now_ns)?;
        }
        let added = self.tracker.add_job(&placed, Instant::now());
        if added.is_err() {
            // Those decisions were never sent: they leave the load and teach nothing.
            for tid in (first..).take(placed.len()) {
                learned.failed(tid);
            }
            learned.learn(placed.len());
        }
        added
    }

    /// Adds a gang job: its tasks start together, once an executor has claimed each
    /// (see `client::gang`). Returns the job id.
    pub fn add_gang_job(&mut self, tasks: &[TaskSpec]) -> anyhow::Result<u32> {
        let gang: Vec<TaskSpec> = tasks.iter().map(|t| TaskSpec { gang: true, ..*t }).collect();
        let jid = self.tracker.add_job(&gang, Instant::now())?;
        self.gangs.register(jid, gang.len());
        Ok(jid)
    }

    /// Gangs started, given up, and claims denied while another gang formed.
    pub fn gang_stats(&self) -> &GangStats {
        &self.gangs.stats
    }

    /// Executors waiting in the gang forming now.
    pub fn gang_waiting(&self) -> usize {
        self.gangs.waiting()
    }

    /// Adds a job and sends as much of it as the window allows. Returns the job id.
    pub async fn submit(&mut self, tasks: &[TaskSpec]) -> anyhow::Result<u32> {
        let jid = self.add_job(tasks)?;
        self.flush().await;
        Ok(jid)
    }

    /// Places a job's tasks by their inputs with MATRIX's Algorithm 1 under `policy`
    /// (docs/data.md, "Placement") and adds it: `inputs[i]` lists task i's input objects
    /// as (owning host, size). Pinned tasks go to their host's agent (PIN), the others to
    /// tier 2. Every host a task may be pinned to must have an agent address.
    pub fn add_placed_job(
        &mut self,
        tasks: &[TaskSpec],
        inputs: &[Vec<InputObject>],
        policy: PlacementPolicy,
    ) -> anyhow::Result<u32> {
        anyhow::ensure!(tasks.len() == inputs.len(), "one input list per task");
        let est = self.task_length.estimate();
        let placements: Vec<Placement> = inputs.iter().map(|i| policy.place(i, est)).collect();
        self.check_pinned_hosts(&placements)?;
        let jid = self.tracker.add_placed_job(tasks, &placements, policy.movable(), Instant::now())?;
        self.placement.insert(jid, policy);
        Ok(jid)
    }

    /// Where a task of job `jid` with `inputs` goes under the job's current policy and
    /// the current `est_task_length`: for tasks placed when they become ready (a DAG's
    /// released tasks), added with [`Client::add_placed_tasks`].
    pub fn place(&self, jid: u32, inputs: &[InputObject]) -> Placement {
        let policy = self.placement.get(&jid).copied().unwrap_or(PlacementPolicy::Mlb);
        policy.place(inputs, self.task_length.estimate())
    }

    /// Adds tasks already placed (see [`Client::place`]) as a job under `policy`.
    pub fn add_placed_tasks(
        &mut self,
        tasks: &[TaskSpec],
        placements: &[Placement],
        policy: PlacementPolicy,
    ) -> anyhow::Result<u32> {
        self.check_pinned_hosts(placements)?;
        let jid = self.tracker.add_placed_job(tasks, placements, policy.movable(), Instant::now())?;
        self.placement.insert(jid, policy);
        Ok(jid)
    }

    /// Changes job `jid`'s placement policy: tasks placed from now on follow it.
    pub fn set_placement(&mut self, jid: u32, policy: PlacementPolicy) {
        self.placement.insert(jid, policy);
    }

    /// `est_task_length`: the mean run time of the tasks finished so far.
    pub fn est_task_length(&self) -> Duration {
        self.task_length.estimate()
    }

    fn check_pinned_hosts(&self, placements: &[Placement]) -> anyhow::Result<()> {
        for p in placements {
            if let Placement::Pinned { host } = p {
                anyhow::ensure!(
                    self.agents.contains_key(host),
                    "a task is placed on node {host}, whose agent address is not configured"
                );
            }
        }
        Ok(())
    }

    /// Cancels a job's unfinished tasks (client side only; see [`Tracker::cancel_job`]).
    pub fn cancel_job(&mut self, jid: u32) -> u32 {
        self.tracker.cancel_job(jid, Instant::now())
    }

    /// Cancels every unfinished task that needs any of the resource bits `resources`
    /// (see [`Tracker::cancel_needing`]).
    pub fn cancel_needing(&mut self, resources: u8) -> u32 {
        self.tracker.cancel_needing(resources, Instant::now())
    }

    /// Records of tasks completed since the last call (with `record_tasks` on).
    pub fn take_records(&mut self) -> Vec<TaskRecord> {
        self.tracker.take_records()
    }

    /// Reports of jobs finished since the last call.
    pub fn take_finished(&mut self) -> Vec<JobReport> {
        self.tracker.take_finished()
    }

    /// Sends SUBMITs for Pending tasks, as far as the window allows (at most a burst).
    pub async fn flush(&mut self) {
        for _ in 0..FLUSH_BURST {
            let Some(p) = self.tracker.next_packet(Instant::now(), unix_now_ns(), &mut self.out) else { return };
            // A pinned packet goes to its host's agent; its address was checked when the
            // job was added.
            let (encoded, to) = match p.pin {
                Some(pin) => {
                    let flags = p.flags | if pin.movable { FLAG_MOVABLE } else { 0 };
                    (encode_pin(&mut self.tx, p.job, flags, &self.out[..p.count]), self.agents[&pin.host])
                }
                None => (encode_submit(&mut self.tx, p.job, p.flags, &self.out[..p.count]), self.switch),
            };
            let n = match encoded {
                Ok(n) => n,
                Err(e) => {
                    // Cannot happen (at most 16 tasks, a full-size buffer); the tasks
                    // time out and are resent if it ever does.
                    tracing::error!(error = %e, "encoding SUBMIT failed");
                    continue;
                }
            };
            if let Err(e) = self.socket.send_to(&self.tx[..n], to).await {
                // The tasks stay Running and are resent when they time out.
                let stats = self.tracker.stats_mut();
                stats.send_errors += 1;
                if stats.send_errors == 1 {
                    tracing::warn!(%to, error = %e, "sending SUBMIT or PIN failed; will resend on timeout");
                }
            }
        }
    }

    /// Handles messages, timeouts and back-offs until `until`.
    pub async fn drive_until(&mut self, until: Instant) -> anyhow::Result<()> {
        self.drive(until, false).await.map(|_| ())
    }

    /// Handles messages, timeouts and back-offs until every job added so far is
    /// finished (returns true) or `deadline` passes (returns false).
    pub async fn wait_idle(&mut self, deadline: Instant) -> anyhow::Result<bool> {
        self.drive(deadline, true).await
    }

    async fn drive(&mut self, until: Instant, stop_when_idle: bool) -> anyhow::Result<bool> {
        loop {
            let now = Instant::now();
            for m in self.gangs.expire(now) {
                // Not formed in time: the member drops its task unrun, which goes back.
                self.tracker.release_claim(&m.claim, now);
                self.answer_claim(&m.claim, CLAIM_DENIED, m.from);
            }
            self.tracker.on_tick(now);
            self.flush().await;
            if let Some(learned) = self.learned.as_mut() {
                learned.learn(learned::LEARN_BURST);
            }
            if stop_when_idle && self.tracker.is_idle() {
                return Ok(true);
            }
            if now >= until {
                return Ok(self.tracker.is_idle());
            }
            // Wake for the next timer, or soon if the window is open and tasks wait.
            let next = match (self.tracker.next_deadline(), self.gangs.next_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let mut wake = next.map_or(until, |d| d.min(until));
            if self.tracker.has_ready() || self.learned.as_ref().is_some_and(|l| l.has_queued()) {
                wake = wake.min(now + Duration::from_millis(1));
            }
            let received = tokio::select! {
                r = self.socket.recv_from(&mut self.rx[..]) => Some(r),
                _ = sleep_until(self.timer.as_mut(), wake) => None,
            };
            match received {
                Some(Ok((n, from))) => {
                    self.handle(n, from);
                    self.receive_ready();
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "client receive failed");
                    // Do not spin on a persistent error.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                None => {}
            }
        }
    }

    /// Handles what is already queued on the socket without waiting.
    fn receive_ready(&mut self) {
        for _ in 0..RECEIVE_BURST {
            match self.socket.try_recv_from(&mut self.rx[..]) {
                Ok((n, from)) => self.handle(n, from),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!(error = %e, "client receive failed");
                    return;
                }
            }
        }
    }

    fn handle(&mut self, n: usize, from: SocketAddr) {
        let now = Instant::now();
        match decode(&self.rx[..n]) {
            Ok(Message::Complete(c)) => {
                let c = *c;
                if c.status == STATUS_OK {
                    self.task_length.finished(Duration::from_nanos(c.run_ns() as u64));
                }
                let effect = self.tracker.on_complete(&c, now);
                if let Some(learned) = self.learned.as_mut() {
                    match effect {
                        CompletionEffect::Done => learned.completed(c.tid(), c.run_ns(), c.start_unix_ns()),
                        CompletionEffect::Failed => learned.failed(c.tid()),
                        CompletionEffect::Retry | CompletionEffect::Ignored => {}
                    }
                }
            }
            // From tier 2 (SUBMIT), or from an agent (PIN, or its drain).
            Ok(Message::QueueFull { job, tasks })
                if from == self.switch || self.agents.values().any(|a| *a == from) =>
            {
                self.tracker.on_queue_full(job, tasks, now);
            }
            Ok(Message::Claim(c)) => {
                // A copy: the answers below borrow the client mutably.
                let claim = *c;
                let c = &claim;
                let verdict = if c.verdict == CLAIM_RENEW { GangVerdict::NotGang } else { self.gangs.classify(c) };
                match verdict {
                    GangVerdict::NotGang => {
                        let verdict = if self.tracker.on_claim(c, now) { CLAIM_GRANTED } else { CLAIM_DENIED };
                        self.answer_claim(c, verdict, from);
                    }
                    GangVerdict::Busy => {
                        // Back to the queue at once, behind the gang that is forming,
                        // without spending one of the task's attempts.
                        if self.tracker.on_claim(c, now) {
                            self.tracker.step_aside(c, now);
                        }
                        self.answer_claim(c, CLAIM_DENIED, from);
                    }
                    GangVerdict::StillWaiting => {
                        // Keep the waiting member's claim alive; the answer comes at the start.
                        let renew = Claim { verdict: CLAIM_RENEW, ..*c };
                        self.tracker.on_claim(&renew, now);
                    }
                    GangVerdict::Join => {
                        for stale in self.gangs.take_stale(c) {
                            self.tracker.release_claim(&stale.claim, now);
                        }
                        if !self.tracker.on_claim(c, now) {
                            // Not this task's live attempt (a late ask after the gang gave
                            // up, a duplicate delivery): not a member.
                            self.answer_claim(c, CLAIM_DENIED, from);
                            return;
                        }
                        for m in self.gangs.join(Member { claim: *c, from }, now) {
                            self.answer_claim(&m.claim, CLAIM_GRANTED, m.from);
                        }
                    }
                }
            }
            Ok(Message::QueueFull { .. }) => {
                self.tracker.stats_mut().foreign += 1;
                tracing::debug!(%from, "QUEUE_FULL from an address other than the switch ignored");
            }
            Ok(other) => {
                self.tracker.stats_mut().unexpected += 1;
                tracing::debug!(%from, op = other.op().name(), "unexpected message ignored");
            }
            Err(e) => {
                self.tracker.stats_mut().decode_errors += 1;
                tracing::debug!(%from, error = %e, "malformed message dropped");
            }
        }
    }

    /// Sends the CLAIM_REPLY `verdict` to `c`'s claimant at `to`.
    fn answer_claim(&mut self, c: &Claim, verdict: u8, to: SocketAddr) {
        let reply = c.answered(verdict);
        let sent = encode_claim_reply(&mut self.tx, &reply).map(|len| self.socket.try_send_to(&self.tx[..len], to));
        if !matches!(sent, Ok(Ok(_))) {
            // The executor asks again, then drops the task unrun; its timeout resends it.
            self.tracker.stats_mut().send_errors += 1;
        }
    }

    /// The numbers of this client so far.
    pub fn summary(&self) -> Summary {
        summarize(&self.tracker)
    }
}

/// The summary of a tracker's work.
pub fn summarize(t: &Tracker) -> Summary {
    let s = t.stats();
    let l = t.latencies();
    let states = t.states();
    let q = crate::metrics::quantile;
    Summary {
        submitted: s.tasks_added,
        completed: s.done,
        failed: s.failed,
        resubmitted: s.resubmitted,
        p50_sched_delay_us: q(&l.sched_delay_ns, 0.5) as f64 / 1e3,
        p99_sched_delay_us: q(&l.sched_delay_ns, 0.99) as f64 / 1e3,
        p50_result_delay_us: q(&l.result_delay_ns, 0.5) as f64 / 1e3,
        p99_result_delay_us: q(&l.result_delay_ns, 0.99) as f64 / 1e3,
        p50_job_ms: q(&l.job_us, 0.5) as f64 / 1e3,
        p99_job_ms: q(&l.job_us, 0.99) as f64 / 1e3,
        throughput_tasks_per_s: l.throughput(s.done),
        unfinished: states.count(TaskState::Pending) + states.count(TaskState::Running),
        lost: s.lost,
        canceled: s.canceled,
        duplicates: s.duplicates,
        timeouts: s.timeouts,
        queue_full_bounces: s.queue_full_bounces,
        jobs: s.jobs_added,
        jobs_finished: s.jobs_finished,
        p50_run_us: q(&l.run_ns, 0.5) as f64 / 1e3,
        elapsed_s: l.span().as_secs_f64(),
    }
}

/// Waits until `at`: on the deadline timer, within the kernel's timer slack (a job due at
/// an instant leaves then), or on tokio's millisecond timer without one or should it fail.
async fn sleep_until(timer: Option<&mut DeadlineTimer>, at: Instant) {
    if let Some(timer) = timer {
        match timer.sleep_until(at).await {
            Ok(()) => return,
            Err(e) => tracing::debug!(error = %e, "the deadline timer failed: tokio's timer instead"),
        }
    }
    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await
}

/// Asks for a larger receive buffer; a smaller one only costs resends, so failure is
/// logged, not fatal.
fn grow_receive_buffer(socket: &std::net::UdpSocket, bytes: usize) {
    let v = bytes as libc::c_int;
    // SAFETY: a valid socket fd and a pointer to a c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "could not grow the client receive buffer");
    }
}

#[cfg(test)]
mod tests;

//! The client's bookkeeping, without I/O: which tasks to send next, what a COMPLETE,
//! a QUEUE_FULL or a timeout does to a task, and when a job is finished. Time comes in
//! as arguments, so every rule can be tested without a network or a clock.
//!
//! Rules:
//! - Task ids are unique per client and allocated in job order, so a job is a
//!   contiguous range of ids and the state vectors are indexed by task id directly.
//! - An *attempt* is a send the switch did not bounce. It ends with a COMPLETE or with
//!   the task timeout. A task gets at most `max_attempts` attempts: STATUS_OK makes it
//!   Done; STATUS_FAILED / STATUS_REFUSED (another executor may have the command or the
//!   resources) and timeouts send it again with FLAG_RESUBMIT while attempts remain,
//!   and make it Failed after the last one.
//! - QUEUE_FULL takes back the attempt it bounces (the switch never queued the task)
//!   and retries after an exponential, jittered back-off. After `max_queue_full_bounces`
//!   bounces the task is Failed (the switch is persistently full).
//! - Done, Failed and Canceled are final. A COMPLETE for a final task is a duplicate and
//!   only counted; an OK completion from an earlier attempt makes a task Done whatever
//!   attempt it is on. A job is finished when every task is final.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use scheduler_common::{
    Claim, Completion, JobRef, Task, CLAIM_RENEW, FLAG_RESUBMIT, MAX_LIST, MAX_PRIORITIES, MIN_CLAIM_LEASE_MS,
    STATUS_OK, STATUS_REFUSED, TASK_FLAG_EXACTLY_ONCE, TASK_FLAG_GANG,
};

use super::job_queue::{ResourceIndex, RESOURCE_BITS};
use super::monitor::{MonitorConfig, MonitorReport, StateMonitor};
use super::state::{TaskState, TaskStates};
use super::stats::{ClientStats, Latencies};
use crate::placement::Placement;

/// How a client retries and paces its tasks.
#[derive(Clone, Debug)]
pub struct TrackerConfig {
    /// The client's user id, carried in SUBMIT and echoed in COMPLETE and QUEUE_FULL.
    pub uid: u32,
    /// An attempt with no COMPLETE after this long is resent (or failed, if it was the last).
    pub task_timeout: Duration,
    /// Attempts per task (at least 1).
    pub max_attempts: u8,
    /// At most this many tasks Running at once; the rest wait as Pending.
    pub window: usize,
    /// First QUEUE_FULL back-off; doubles with every bounce of the same task.
    pub queue_full_backoff: Duration,
    /// Longest QUEUE_FULL back-off.
    pub queue_full_backoff_max: Duration,
    /// Bounces after which a task is Failed.
    pub max_queue_full_bounces: u32,
    /// Keep a [`TaskRecord`] of every task that completes, for benchmarks that need
    /// per-task latencies (priority, node, time of completion). Off by default: the
    /// log grows with the number of tasks.
    pub record_tasks: bool,
    /// How long a granted claim holds without a renewal (at least
    /// [`MIN_CLAIM_LEASE_MS`]). While it holds, the attempt does not time out; when it
    /// lapses the task is resent at once (or failed, on its last attempt).
    pub claim_lease: Duration,
    /// Thresholds of the failure alarm and the scale-up signal.
    pub monitor: MonitorConfig,
    /// How long a gang job's members wait for the rest before their tasks go back to
    /// the queue (at most [`super::gang::MAX_FORMATION`]).
    pub gang_formation: Duration,
}

impl TrackerConfig {
    pub fn new(uid: u32) -> TrackerConfig {
        TrackerConfig {
            uid,
            task_timeout: Duration::from_secs(2),
            max_attempts: 3,
            window: 1024,
            queue_full_backoff: Duration::from_micros(200),
            queue_full_backoff_max: Duration::from_millis(20),
            max_queue_full_bounces: 1000,
            record_tasks: false,
            claim_lease: Duration::from_secs(1),
            monitor: MonitorConfig::default(),
            gang_formation: Duration::from_secs(2),
        }
    }
}

/// One task as the caller describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskSpec {
    /// 1 (highest) ..= 8.
    pub priority: u8,
    /// Resources the task needs (8-bit bitmap); it runs only on executors offering all.
    pub resources: u8,
    /// Task class, for per-class accounting and learned allocation.
    pub class: u8,
    /// Ask for at-most-once execution (TASK_FLAG_EXACTLY_ONCE).
    pub exactly_once: bool,
    /// A task of a gang job (TASK_FLAG_GANG, claimed as exactly-once): set by
    /// `Client::add_gang_job` on every task of the job.
    pub gang: bool,
    /// Encoded handler and arguments.
    pub descriptor: [u8; 16],
}

impl TaskSpec {
    pub fn new(handler: Handler<'_>, priority: u8, resources: u8) -> anyhow::Result<TaskSpec> {
        if priority == 0 || priority > MAX_PRIORITIES {
            anyhow::bail!("priority {priority} is outside 1..={MAX_PRIORITIES}");
        }
        let descriptor = handler.encode().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(TaskSpec { priority, resources, class: 0, exactly_once: false, gang: false, descriptor })
    }
}

/// What a finished job came to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct JobReport {
    pub jid: u32,
    pub tasks: u32,
    pub done: u32,
    pub failed: u32,
    pub canceled: u32,
    /// Job added → last task final.
    pub elapsed: Duration,
}

/// The progress of a job not yet finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobProgress {
    pub tasks: u32,
    pub done: u32,
    pub failed: u32,
    pub canceled: u32,
    /// First task id; the job's tasks are `first_tid .. first_tid + tasks`.
    pub first_tid: u32,
}

/// One completed task, as the client saw it (kept when [`TrackerConfig::record_tasks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TaskRecord {
    pub jid: u32,
    pub tid: u32,
    pub priority: u8,
    pub resources: u8,
    /// Client wall clock at the task's first send, ns since the Unix epoch.
    pub first_sent_unix_ns: u64,
    /// The executor's wall clock when it started the task.
    pub start_unix_ns: u64,
    /// How long the handler ran, ns.
    pub run_ns: u32,
    /// Who ran it.
    pub node: u16,
    pub executor: u16,
    /// Client wall clock when the COMPLETE arrived.
    pub completed_unix_ns: u64,
    /// Bytes of the task's output in node's object store (0: none).
    pub output_len: u64,
}

impl TaskRecord {
    /// Submit → start, ns (0 if the clocks disagree).
    pub fn sched_delay_ns(&self) -> u64 {
        self.start_unix_ns.saturating_sub(self.first_sent_unix_ns)
    }
}

/// What a COMPLETE did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionEffect {
    Done,
    /// Failed or refused; the task goes out again.
    Retry,
    /// Failed or refused on the last attempt.
    Failed,
    /// A task already final, a late failure, or not this client's: counted, ignored.
    Ignored,
}

/// The job queue at a glance (`bolt jobs`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct JobsReport {
    pub pending: u64,
    pub running: u64,
    pub done: u64,
    pub failed: u64,
    pub canceled: u64,
    /// Pending tasks that need resource bit i, for i in 0..8.
    pub pending_by_resource: [u64; RESOURCE_BITS],
    /// The lowest Pending task id (the oldest: ids grow in submission order).
    pub oldest_pending: Option<u32>,
    pub monitor: MonitorReport,
    /// Bytes of the state and resource vectors, serialized.
    pub vector_bytes: u64,
}

/// A SUBMIT to send: the job, header flags and the first `count` tasks of the buffer
/// passed to [`Tracker::next_packet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub job: JobRef,
    pub flags: u8,
    pub count: usize,
    /// `Some`: a PIN to this host's agent (its tasks were placed there, docs/data.md);
    /// `None`: a SUBMIT to tier 2.
    pub pin: Option<PinTarget>,
}

/// Where a pinned task's next send goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PinTarget {
    /// The node whose dedicated ring takes the task.
    pub host: u16,
    /// The job's policy lets the host's FLDS monitor move it (PIN's MOVABLE flag).
    pub movable: bool,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    task: Task,
    jid: u32,
    /// Wall-clock time of the first send (0: never sent), for the scheduling delay.
    first_sent_unix_ns: u64,
    /// Attempts begun (sends not bounced).
    attempts: u8,
    bounces: u32,
    /// Bumped on every send, so a timeout entry can tell whether it is still current.
    send_stamp: u32,
    /// The `send_stamp` of the attempt an executor holds the claim of (0: none): one
    /// live claim per attempt, so the table of claims is these fields of the bounded
    /// slot table.
    claimed_stamp: u32,
    /// Who holds that claim (node << 16 | executor) and until when.
    lease_owner: u32,
    lease_until: Instant,
}

#[derive(Clone, Debug)]
struct Job {
    first_tid: u32,
    tasks: u32,
    done: u32,
    failed: u32,
    canceled: u32,
    created: Instant,
}

impl Job {
    fn is_finished(&self) -> bool {
        self.done + self.failed + self.canceled == self.tasks
    }
}

/// Most doublings of the task timeout: attempt k waits `task_timeout << min(k - 1, 4)`.
const MAX_TIMEOUT_DOUBLINGS: u8 = 4;

/// How long attempt `attempt` (1-based) waits for its COMPLETE. Each resubmission waits
/// twice as long as the one before (up to 16 times the task timeout), as TCP backs off
/// its retransmission timer: when the cluster is slower than the timeout, resending at
/// a fixed pace would add copies of the same tasks to the queues faster than the
/// executors drain them, and the backlog would only grow.
fn attempt_timeout(task_timeout: Duration, attempt: u8) -> Duration {
    task_timeout * (1u32 << attempt.saturating_sub(1).min(MAX_TIMEOUT_DOUBLINGS))
}

/// The client state machine.
#[derive(Debug)]
pub struct Tracker {
    cfg: TrackerConfig,
    states: TaskStates,
    /// Which tasks need which resource, beside the state vectors.
    resources: ResourceIndex,
    monitor: StateMonitor,
    /// Per-task data of unfinished jobs, indexed by `tid - base_tid`. Finished jobs at
    /// the front are dropped; their ids stay in the final state vectors.
    slots: VecDeque<Slot>,
    base_tid: u32,
    next_tid: u32,
    next_jid: u32,
    jobs: BTreeMap<u32, Job>,
    unfinished_jobs: usize,
    /// Pending tasks to send as soon as the window allows, in order. May hold ids that
    /// are no longer Pending (completed meanwhile); those are skipped.
    ready: VecDeque<u32>,
    /// Bounced tasks and when they may go out again.
    backoff: BinaryHeap<Reverse<(Instant, u32)>>,
    /// (deadline, tid, send stamp) per attempt and per claim lease, earliest first.
    timeouts: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    running: usize,
    finished: Vec<JobReport>,
    records: Vec<TaskRecord>,
    stats: ClientStats,
    latency: Latencies,
    rng: u64,
    /// Tasks placed on a host (PIN) until they are final, bounced or timed out: a task
    /// the host refused or did not run in time is resent to tier 2 (shared).
    pins: HashMap<u32, PinTarget>,
}

impl Tracker {
    pub fn new(cfg: TrackerConfig) -> Tracker {
        let rng = 0x2545_F491_4F6C_DD1D ^ (cfg.uid as u64) << 17 | 1;
        Tracker {
            monitor: StateMonitor::new(cfg.monitor.clone()),
            cfg,
            states: TaskStates::new(),
            resources: ResourceIndex::new(),
            slots: VecDeque::new(),
            base_tid: 0,
            next_tid: 0,
            next_jid: 1,
            jobs: BTreeMap::new(),
            unfinished_jobs: 0,
            ready: VecDeque::new(),
            backoff: BinaryHeap::new(),
            timeouts: BinaryHeap::new(),
            running: 0,
            finished: Vec::new(),
            records: Vec::new(),
            stats: ClientStats::default(),
            latency: Latencies::default(),
            rng,
            pins: HashMap::new(),
        }
    }

    pub fn config(&self) -> &TrackerConfig {
        &self.cfg
    }

    /// The state bit vectors.
    pub fn states(&self) -> &TaskStates {
        &self.states
    }

    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// For the I/O layer's own counters (malformed input, send errors).
    pub(crate) fn stats_mut(&mut self) -> &mut ClientStats {
        &mut self.stats
    }

    pub fn latencies(&self) -> &Latencies {
        &self.latency
    }

    /// Tasks Running now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// True when every job added so far is finished.
    pub fn is_idle(&self) -> bool {
        self.unfinished_jobs == 0
    }

    /// Progress of an unfinished job (finished jobs are reported by
    /// [`Tracker::take_finished`]).
    pub fn job(&self, jid: u32) -> Option<JobProgress> {
        self.jobs.get(&jid).map(|j| JobProgress {
            tasks: j.tasks,
            done: j.done,
            failed: j.failed,
            canceled: j.canceled,
            first_tid: j.first_tid,
        })
    }

    /// Reports of the jobs finished since the last call.
    pub fn take_finished(&mut self) -> Vec<JobReport> {
        std::mem::take(&mut self.finished)
    }

    /// The records of tasks completed since the last call (empty unless
    /// [`TrackerConfig::record_tasks`]).
    pub fn take_records(&mut self) -> Vec<TaskRecord> {
        std::mem::take(&mut self.records)
    }

    /// Adds a job; its tasks are Pending until [`Tracker::next_packet`] sends them.
    /// Returns the job id.
    /// The id the next task added gets (ids are given in order).
    pub fn next_tid(&self) -> u32 {
        self.next_tid
    }

    pub fn add_job(&mut self, specs: &[TaskSpec], now: Instant) -> anyhow::Result<u32> {
        if self.cfg.claim_lease < Duration::from_millis(MIN_CLAIM_LEASE_MS) {
            anyhow::bail!("a claim lease must be at least {MIN_CLAIM_LEASE_MS} ms");
        }
        if specs.is_empty() {
            anyhow::bail!("a job needs at least one task");
        }
        let n = u32::try_from(specs.len()).map_err(|_| anyhow::anyhow!("too many tasks in one job"))?;
        let first = self.next_tid;
        let end = first.checked_add(n).ok_or_else(|| anyhow::anyhow!("this client has used up its task ids"))?;
        if let Some(bad) = specs.iter().find(|s| s.priority == 0 || s.priority > MAX_PRIORITIES) {
            anyhow::bail!("priority {} is outside 1..={MAX_PRIORITIES}", bad.priority);
        }
        let jid = self.next_jid;
        self.states.add_pending(first..end).map_err(|e| anyhow::anyhow!(e))?;
        self.next_jid = self.next_jid.wrapping_add(1);
        self.next_tid = end;
        for (tid, spec) in (first..end).zip(specs) {
            let mut task = Task {
                prio: spec.priority,
                rsrc: spec.resources,
                class: spec.class,
                flags: match (spec.exactly_once, spec.gang) {
                    (_, true) => TASK_FLAG_EXACTLY_ONCE | TASK_FLAG_GANG,
                    (true, false) => TASK_FLAG_EXACTLY_ONCE,
                    (false, false) => 0,
                },
                desc: spec.descriptor,
                ..Task::default()
            };
            task.set_tid(tid);
            self.resources.register(tid..tid + 1, spec.resources);
            self.slots.push_back(Slot {
                task,
                jid,
                first_sent_unix_ns: 0,
                attempts: 0,
                bounces: 0,
                send_stamp: 0,
                claimed_stamp: 0,
                lease_owner: 0,
                lease_until: now,
            });
            self.ready.push_back(tid);
        }
        self.jobs.insert(jid, Job { first_tid: first, tasks: n, done: 0, failed: 0, canceled: 0, created: now });
        self.unfinished_jobs += 1;
        self.stats.jobs_added += 1;
        self.stats.tasks_added += n as u64;
        Ok(jid)
    }

    /// As [`Tracker::add_job`], each task with its placement (`placements[i]` for
    /// `specs[i]`): pinned tasks are sent to their host in PIN messages, `movable` ones
    /// with MOVABLE (the job's policy is FLDS).
    pub fn add_placed_job(
        &mut self,
        specs: &[TaskSpec],
        placements: &[Placement],
        movable: bool,
        now: Instant,
    ) -> anyhow::Result<u32> {
        anyhow::ensure!(specs.len() == placements.len(), "one placement per task");
        let jid = self.add_job(specs, now)?;
        let first = self.jobs[&jid].first_tid;
        for (tid, p) in (first..).zip(placements) {
            if let Placement::Pinned { host } = *p {
                self.pins.insert(tid, PinTarget { host, movable });
            }
        }
        Ok(jid)
    }

    /// Where task `tid` goes on its next send: `Some` host, or `None` for tier 2.
    pub fn pin_of(&self, tid: u32) -> Option<PinTarget> {
        self.pins.get(&tid).copied()
    }

    /// Fills `out` with the next SUBMIT's (or PIN's) tasks: up to 16 Pending tasks of one
    /// job and one destination, all first sends or all resubmissions, as far as the
    /// window allows. They become Running. `None` when nothing can be sent now.
    pub fn next_packet(&mut self, now: Instant, now_unix_ns: u64, out: &mut [Task; MAX_LIST]) -> Option<Packet> {
        self.promote_backoffs(now);
        let mut count = 0usize;
        let mut group: Option<(u32, bool, Option<PinTarget>)> = None;
        while count < MAX_LIST && self.running < self.cfg.window {
            let Some(&tid) = self.ready.front() else { break };
            if self.states.state_of(tid) != Some(TaskState::Pending) {
                self.ready.pop_front();
                continue;
            }
            let Some(slot) = self.slot(tid) else {
                // Cannot happen: a Pending task belongs to an unfinished job.
                self.ready.pop_front();
                continue;
            };
            let key = (slot.jid, slot.attempts > 0, self.pins.get(&tid).copied());
            if group.is_some_and(|g| g != key) {
                break;
            }
            group = Some(key);
            self.ready.pop_front();
            out[count] = self.begin_attempt(tid, now, now_unix_ns);
            count += 1;
        }
        let (jid, resubmit, pin) = group?;
        self.stats.packets_sent += 1;
        if resubmit {
            self.stats.resubmitted += count as u64;
        }
        let flags = if resubmit { FLAG_RESUBMIT } else { 0 };
        if pin.is_some() {
            self.stats.pinned_sent += count as u64;
        }
        Some(Packet { job: JobRef::new(self.cfg.uid, jid), flags, count, pin })
    }

    fn begin_attempt(&mut self, tid: u32, now: Instant, now_unix_ns: u64) -> Task {
        self.states.transition(tid, TaskState::Pending, TaskState::Running);
        self.running += 1;
        self.stats.tasks_sent += 1;
        let slot = self.slot_mut(tid).expect("caller checked the slot");
        if slot.first_sent_unix_ns == 0 {
            slot.first_sent_unix_ns = now_unix_ns.max(1);
        }
        slot.attempts = slot.attempts.saturating_add(1);
        slot.send_stamp = slot.send_stamp.wrapping_add(1);
        let (stamp, task, attempts) = (slot.send_stamp, slot.task, slot.attempts);
        let deadline = now + attempt_timeout(self.cfg.task_timeout, attempts);
        self.timeouts.push(Reverse((deadline, tid, stamp)));
        self.latency.first_send.get_or_insert(now);
        task
    }

    /// Decides an executor's CLAIM on a task (exactly-once execution with leases).
    ///
    /// A CLAIM_ASK is granted for a task of this client that is Running when nobody
    /// holds a live claim on its current attempt: the first claim, or one made after the
    /// holder's lease lapsed (the holder died or went silent). The grant names the
    /// claimant as owner and leases it for `claim_lease`. A duplicate delivery while the
    /// lease lives, a task Done, Failed, Canceled or waiting to be resent, and an unknown
    /// task are denied, so the executor drops them unrun.
    ///
    /// A CLAIM_RENEW is granted only to the owner of the live claim and extends the lease
    /// by `claim_lease` from now; otherwise it is denied (the lease lapsed: the task was
    /// resent or re-granted, or it is final).
    pub fn on_claim(&mut self, c: &Claim, now: Instant) -> bool {
        let lease = self.cfg.claim_lease;
        let owner = (c.node() as u32) << 16 | c.executor() as u32;
        let renew = c.verdict == CLAIM_RENEW;
        let running = c.uid() == self.cfg.uid && self.states.state_of(c.tid()) == Some(TaskState::Running);
        let mut regranted = false;
        let mut granted_until = None;
        if let Some(slot) = self.slot_mut(c.tid()).filter(|s| running && s.jid == c.jid()) {
            let claimed = slot.claimed_stamp == slot.send_stamp;
            let live = claimed && slot.lease_until > now;
            if renew && live && slot.lease_owner == owner {
                slot.lease_until = now + lease;
            } else if !renew && !live {
                regranted = claimed;
                slot.claimed_stamp = slot.send_stamp;
                slot.lease_owner = owner;
                slot.lease_until = now + lease;
                granted_until = Some((slot.lease_until, slot.send_stamp));
            } else {
                return self.deny_claim(renew);
            }
        } else {
            return self.deny_claim(renew);
        }
        if let Some((until, stamp)) = granted_until {
            // The lease's own expiry, so a claimant that dies is noticed at once.
            self.timeouts.push(Reverse((until, c.tid(), stamp)));
            self.stats.claims_granted += 1;
        } else {
            self.stats.leases_renewed += 1;
        }
        if regranted {
            self.stats.claims_regranted += 1;
        }
        true
    }

    /// Ends a granted claim now, unrun: its task goes back to the queue at the next tick
    /// (as when a lease lapses), and that counts as one of its attempts. For a gang that
    /// could not form. False if `c`'s claimant holds no live claim on the task.
    pub fn release_claim(&mut self, c: &Claim, now: Instant) -> bool {
        self.end_claim_unrun(c, now, true)
    }

    /// Ends a granted claim now, unrun, without spending an attempt: the task steps aside
    /// for a gang that is forming, which says nothing of the task or its executors (a
    /// task of a second gang may be turned away many times before the first has formed
    /// or given up, and must not fail for it). False as [`Tracker::release_claim`].
    pub fn step_aside(&mut self, c: &Claim, now: Instant) -> bool {
        self.end_claim_unrun(c, now, false)
    }

    fn end_claim_unrun(&mut self, c: &Claim, now: Instant, spend_attempt: bool) -> bool {
        let owner = (c.node() as u32) << 16 | c.executor() as u32;
        let Some(slot) = self.slot_mut(c.tid()).filter(|s| s.jid == c.jid()) else { return false };
        if slot.claimed_stamp != slot.send_stamp || slot.lease_owner != owner || slot.lease_until <= now {
            return false;
        }
        slot.lease_until = now;
        if !spend_attempt {
            // The resend adds the attempt back.
            slot.attempts = slot.attempts.saturating_sub(1);
        }
        let stamp = slot.send_stamp;
        self.timeouts.push(Reverse((now, c.tid(), stamp)));
        true
    }

    fn deny_claim(&mut self, renew: bool) -> bool {
        if renew {
            self.stats.renewals_denied += 1;
        } else {
            self.stats.claims_denied += 1;
        }
        false
    }

    /// Applies a COMPLETE.
    pub fn on_complete(&mut self, c: &Completion, now: Instant) -> CompletionEffect {
        if c.uid() != self.cfg.uid {
            self.stats.foreign += 1;
            return CompletionEffect::Ignored;
        }
        let tid = c.tid();
        let state = match self.states.state_of(tid) {
            None => {
                self.stats.unknown += 1;
                return CompletionEffect::Ignored;
            }
            Some(TaskState::Canceled) => {
                self.stats.after_cancel += 1;
                return CompletionEffect::Ignored;
            }
            Some(TaskState::Done | TaskState::Failed) => {
                self.stats.duplicates += 1;
                return CompletionEffect::Ignored;
            }
            Some(s) => s,
        };
        let Some(slot) = self.slot(tid).copied().filter(|s| s.jid == c.jid()) else {
            self.stats.unknown += 1;
            return CompletionEffect::Ignored;
        };
        if c.status == STATUS_OK {
            self.states.transition(tid, state, TaskState::Done);
            if state == TaskState::Running {
                self.running -= 1;
            }
            let completed_unix_ns = crate::executor::unix_now_ns();
            if slot.first_sent_unix_ns != 0 {
                let delay = c.start_unix_ns().saturating_sub(slot.first_sent_unix_ns);
                self.latency.sched_delay_ns.saturating_record(delay);
                let result = completed_unix_ns.saturating_sub(slot.first_sent_unix_ns);
                self.latency.result_delay_ns.saturating_record(result);
            }
            self.latency.run_ns.saturating_record(c.run_ns() as u64);
            self.latency.last_done = Some(now);
            if self.cfg.record_tasks {
                self.records.push(TaskRecord {
                    jid: slot.jid,
                    tid,
                    priority: slot.task.prio,
                    resources: slot.task.rsrc,
                    first_sent_unix_ns: slot.first_sent_unix_ns,
                    start_unix_ns: c.start_unix_ns(),
                    run_ns: c.run_ns(),
                    node: c.node(),
                    executor: c.executor(),
                    completed_unix_ns,
                    output_len: c.output_len(),
                });
            }
            self.finish_task(slot.jid, TaskState::Done, now);
            return CompletionEffect::Done;
        }
        if c.status == STATUS_REFUSED {
            self.stats.attempts_refused += 1;
        } else {
            self.stats.attempts_failed += 1;
        }
        if state == TaskState::Pending {
            // Already waiting to go out again (after a timeout or a bounce).
            self.stats.late_failures += 1;
            return CompletionEffect::Ignored;
        }
        self.running -= 1;
        if slot.attempts >= self.cfg.max_attempts {
            self.states.transition(tid, TaskState::Running, TaskState::Failed);
            self.finish_task(slot.jid, TaskState::Failed, now);
            CompletionEffect::Failed
        } else {
            self.states.transition(tid, TaskState::Running, TaskState::Pending);
            self.ready.push_back(tid);
            CompletionEffect::Retry
        }
    }

    /// Applies a QUEUE_FULL: the listed tasks were not queued.
    pub fn on_queue_full(&mut self, job: JobRef, tasks: &[Task], now: Instant) {
        if job.uid() != self.cfg.uid {
            self.stats.foreign += 1;
            return;
        }
        self.stats.queue_full_messages += 1;
        for t in tasks {
            let tid = t.tid();
            if self.states.state_of(tid) != Some(TaskState::Running) {
                self.stats.stale_queue_full += 1;
                continue;
            }
            let max_bounces = self.cfg.max_queue_full_bounces;
            let Some(slot) = self.slot_mut(tid).filter(|s| s.jid == job.jid()) else {
                self.stats.unknown += 1;
                continue;
            };
            slot.attempts = slot.attempts.saturating_sub(1);
            slot.bounces += 1;
            let bounces = slot.bounces;
            // A host that refused a pinned task does not get it again: tier 2 does.
            if self.pins.remove(&tid).is_some() {
                self.stats.unpinned += 1;
            }
            self.running -= 1;
            self.stats.queue_full_bounces += 1;
            if bounces > max_bounces {
                self.stats.rejected += 1;
                self.states.transition(tid, TaskState::Running, TaskState::Failed);
                self.finish_task(job.jid(), TaskState::Failed, now);
            } else {
                self.states.transition(tid, TaskState::Running, TaskState::Pending);
                let at = now + self.backoff_for(bounces);
                self.backoff.push(Reverse((at, tid)));
            }
        }
    }

    /// Exponential back-off for the n-th bounce, with ±50 % jitter so bounced tasks of
    /// many clients do not return in lockstep.
    fn backoff_for(&mut self, bounces: u32) -> Duration {
        let base = self.cfg.queue_full_backoff.as_nanos() as u64;
        let cap = self.cfg.queue_full_backoff_max.as_nanos() as u64;
        let exp = base.saturating_mul(1u64 << bounces.saturating_sub(1).min(20)).min(cap);
        // xorshift64: cheap, and the jitter needs no quality.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let jitter = if exp == 0 { 0 } else { self.rng % exp.max(1) };
        Duration::from_nanos(exp / 2 + jitter)
    }

    /// Expires attempts past their timeout and releases bounced tasks whose back-off
    /// is over. Call whenever time has passed.
    pub fn on_tick(&mut self, now: Instant) {
        if self.monitor.is_due(now) {
            self.monitor.observe(now, self.states.count(TaskState::Pending), self.states.count(TaskState::Failed));
        }
        while let Some(&Reverse((deadline, tid, stamp))) = self.timeouts.peek() {
            if deadline > now {
                break;
            }
            self.timeouts.pop();
            if self.states.state_of(tid) != Some(TaskState::Running) {
                continue;
            }
            let Some(slot) = self.slot(tid).copied() else { continue };
            if slot.send_stamp != stamp {
                continue;
            }
            let claimed = slot.claimed_stamp == stamp;
            if claimed && slot.lease_until > now {
                // A live lease outlasts the attempt's timeout: wake again at its expiry.
                self.timeouts.push(Reverse((slot.lease_until, tid, stamp)));
                continue;
            }
            self.running -= 1;
            if self.pins.remove(&tid).is_some() {
                self.stats.unpinned += 1;
            }
            if claimed {
                self.stats.leases_expired += 1;
                tracing::debug!(tid, owner = slot.lease_owner, "claim lease lapsed; resending the task");
            } else {
                self.stats.timeouts += 1;
            }
            if slot.attempts >= self.cfg.max_attempts {
                self.stats.lost += 1;
                self.states.transition(tid, TaskState::Running, TaskState::Failed);
                self.finish_task(slot.jid, TaskState::Failed, now);
            } else {
                self.states.transition(tid, TaskState::Running, TaskState::Pending);
                self.ready.push_back(tid);
            }
        }
        self.promote_backoffs(now);
    }

    fn promote_backoffs(&mut self, now: Instant) {
        while let Some(&Reverse((at, tid))) = self.backoff.peek() {
            if at > now {
                break;
            }
            self.backoff.pop();
            self.ready.push_back(tid);
        }
    }

    /// When [`Tracker::on_tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let t = self.timeouts.peek().map(|Reverse(e)| e.0);
        let b = self.backoff.peek().map(|Reverse((at, _))| *at);
        match (t, b) {
            (Some(t), Some(b)) => Some(t.min(b)),
            (t, b) => t.or(b),
        }
    }

    /// True when Pending tasks could be sent right now (window permitting).
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty() && self.running < self.cfg.window
    }

    /// Cancels the job's unfinished tasks (client side: the protocol has no cancel
    /// message, so queued copies may still run; their completions are ignored).
    /// Returns how many tasks were canceled.
    pub fn cancel_job(&mut self, jid: u32, now: Instant) -> u32 {
        let Some(job) = self.jobs.get(&jid) else { return 0 };
        let range = job.first_tid..job.first_tid + job.tasks;
        range.filter(|&tid| self.cancel_task(tid, now)).count() as u32
    }

    /// Cancels every unfinished task that needs any of the resource bits in `resources`
    /// (affinity of the unfinished tasks to those resources), as [`Tracker::cancel_job`]
    /// does. Returns how many tasks were canceled.
    pub fn cancel_needing(&mut self, resources: u8, now: Instant) -> u32 {
        let doomed = self.resources.affinity(&self.unfinished(), resources);
        doomed.iter().filter(|&tid| self.cancel_task(tid, now)).count() as u32
    }

    fn cancel_task(&mut self, tid: u32, now: Instant) -> bool {
        let from = match self.states.state_of(tid) {
            Some(s @ (TaskState::Pending | TaskState::Running)) => s,
            _ => return false,
        };
        let Some(jid) = self.slot(tid).map(|s| s.jid) else { return false };
        self.states.transition(tid, from, TaskState::Canceled);
        if from == TaskState::Running {
            self.running -= 1;
        }
        self.finish_task(jid, TaskState::Canceled, now);
        true
    }

    /// Pending ∨ Running: the tasks not final yet.
    fn unfinished(&self) -> roaring::RoaringBitmap {
        self.states.vector(TaskState::Pending) | self.states.vector(TaskState::Running)
    }

    /// The resource inverted lists.
    pub fn resources(&self) -> &ResourceIndex {
        &self.resources
    }

    /// The backlog an executor offering `offered` could take: unfinished tasks (Pending
    /// at the client, or Running: queued at a switch or executing) that need nothing it
    /// lacks. For a provisioner choosing which resource class of executor to start.
    pub fn backlog_for(&self, offered: u8) -> u64 {
        self.resources.feasible(&self.unfinished(), offered).len()
    }

    /// What `bolt jobs` shows: the state counts, Pending per resource, the oldest
    /// Pending task and the monitor's signals.
    pub fn jobs_report(&self) -> JobsReport {
        let s = &self.states;
        let pending = s.vector(TaskState::Pending);
        JobsReport {
            pending: s.count(TaskState::Pending),
            running: s.count(TaskState::Running),
            done: s.count(TaskState::Done),
            failed: s.count(TaskState::Failed),
            canceled: s.count(TaskState::Canceled),
            pending_by_resource: self.resources.count_per_resource(pending),
            oldest_pending: pending.min(),
            monitor: self.monitor.report(),
            vector_bytes: (s.serialized_bytes() + self.resources.serialized_bytes()) as u64,
        }
    }

    fn finish_task(&mut self, jid: u32, outcome: TaskState, now: Instant) {
        let Some(job) = self.jobs.get_mut(&jid) else { return };
        match outcome {
            TaskState::Done => {
                job.done += 1;
                self.stats.done += 1;
            }
            TaskState::Failed => {
                job.failed += 1;
                self.stats.failed += 1;
            }
            TaskState::Canceled => {
                job.canceled += 1;
                self.stats.canceled += 1;
            }
            TaskState::Pending | TaskState::Running => return,
        }
        if !job.is_finished() {
            return;
        }
        if !self.pins.is_empty() {
            let tids = job.first_tid..job.first_tid + job.tasks;
            self.pins.retain(|tid, _| !tids.contains(tid));
        }
        let elapsed = now.saturating_duration_since(job.created);
        self.finished.push(JobReport {
            jid,
            tasks: job.tasks,
            done: job.done,
            failed: job.failed,
            canceled: job.canceled,
            elapsed,
        });
        self.latency.job_us.saturating_record(elapsed.as_micros() as u64);
        self.unfinished_jobs -= 1;
        self.stats.jobs_finished += 1;
        self.reclaim();
    }

    /// Drops the per-task data of finished jobs at the front (their final states stay
    /// in the vectors, so late duplicates are still recognised).
    fn reclaim(&mut self) {
        while let Some((&jid, job)) = self.jobs.first_key_value() {
            if !job.is_finished() || job.first_tid != self.base_tid {
                break;
            }
            let n = job.tasks;
            self.slots.drain(..n as usize);
            self.base_tid += n;
            self.jobs.remove(&jid);
        }
    }

    fn slot(&self, tid: u32) -> Option<&Slot> {
        self.slots.get(tid.checked_sub(self.base_tid)? as usize)
    }

    fn slot_mut(&mut self, tid: u32) -> Option<&mut Slot> {
        self.slots.get_mut(tid.checked_sub(self.base_tid)? as usize)
    }
}

#[cfg(test)]
mod tests;

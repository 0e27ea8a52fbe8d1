//! Tier 2 around the queue pipeline: what the switch adds to the thesis algorithm so that
//! two levels beat one. Every answer carries BEST (the highest level it holds tasks in,
//! less the levels the requester just found nothing to run in); registered hosts get a
//! HINT when a level turns non-empty; a GET_TASK or GET_BUNDLE with WAIT or a REFILL_REQ that finds
//! every level it searches empty is parked and answered when a task arrives.
//!
//! The pipeline itself is untouched: this runs a message through it, collects what it
//! sends, and then decides (park, stamp, serve parked requests) from the pipeline's
//! pointers. A parked request is served by running it through the pipeline again, so the
//! queue algorithm stays the one implementation of who gets which task.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddrV4;
use std::ops::Bound;
use std::time::{Duration, Instant};

use arrayvec::ArrayVec;
use scheduler_common::{
    encode_assign, encode_assign_list, encode_hint, encode_noop, encode_queue_full, encode_recall, encode_refill,
    EncodeError, Entry, JobRef, Message, RefillRequest, Requester, Task, MAX_LIST,
};

use super::levels::{queued, Levels};
use super::park::{Group, ParkStats, ParkTable, Parked, Ticket, Wanted};
use super::recall::{Recalls, RECALL_WINDOW};
use crate::queue::{NotForSwitch, Scheduler, Sink};

/// One datagram the switch sends. Kept inline (lists up to 16 entries) in a reused Vec:
/// boxing the large variants would allocate per packet.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Assign {
        to: SocketAddrV4,
        entry: Entry,
        best: u8,
    },
    /// The ASSIGN answering a GET_BUNDLE: 1..=`want` entries in the order to run.
    Bundle {
        to: SocketAddrV4,
        entries: ArrayVec<Entry, MAX_LIST>,
        best: u8,
    },
    Noop {
        to: SocketAddrV4,
        who: Requester,
        best: u8,
    },
    QueueFull {
        to: SocketAddrV4,
        job: JobRef,
        tasks: ArrayVec<Task, MAX_LIST>,
    },
    Refill {
        to: SocketAddrV4,
        entries: ArrayVec<Entry, MAX_LIST>,
        best: u8,
    },
    Hint {
        to: SocketAddrV4,
        best: u8,
    },
    /// To a host's agent: give back up to `req.want` prefetched tasks `exec_rsrc` covers
    /// (an executor with those resources waits here; switch/recall.rs).
    Recall {
        to: SocketAddrV4,
        exec_rsrc: u8,
        req: RefillRequest,
        best: u8,
    },
}

impl Answer {
    pub fn to(&self) -> SocketAddrV4 {
        match self {
            Answer::Assign { to, .. }
            | Answer::Bundle { to, .. }
            | Answer::Noop { to, .. }
            | Answer::QueueFull { to, .. }
            | Answer::Refill { to, .. }
            | Answer::Hint { to, .. }
            | Answer::Recall { to, .. } => *to,
        }
    }

    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        match self {
            Answer::Assign { entry, best, .. } => encode_assign(buf, entry, *best),
            Answer::Bundle { entries, best, .. } => encode_assign_list(buf, entries, *best),
            Answer::Noop { who, best, .. } => encode_noop(buf, *who, *best),
            Answer::QueueFull { job, tasks, .. } => encode_queue_full(buf, *job, tasks),
            Answer::Refill { entries, best, .. } => encode_refill(buf, entries, *best),
            Answer::Hint { best, .. } => encode_hint(buf, *best),
            Answer::Recall { exec_rsrc, req, best, .. } => encode_recall(buf, *exec_rsrc, *req, *best),
        }
    }

    fn set_best(&mut self, b: u8) {
        match self {
            Answer::Assign { best, .. }
            | Answer::Bundle { best, .. }
            | Answer::Noop { best, .. }
            | Answer::Refill { best, .. }
            | Answer::Recall { best, .. } => *best = b,
            Answer::QueueFull { .. } | Answer::Hint { .. } => {}
        }
    }

    /// The tasks this answer takes to a host's rings: a REFILL's entries.
    fn refill_tasks(&self) -> usize {
        match self {
            Answer::Refill { entries, .. } => entries.len(),
            _ => 0,
        }
    }

    /// An answer that hands out work (an ASSIGN, or a REFILL listing tasks).
    fn has_tasks(&self) -> bool {
        match self {
            Answer::Assign { .. } => true,
            Answer::Bundle { entries, .. } | Answer::Refill { entries, .. } => !entries.is_empty(),
            _ => false,
        }
    }

    /// The answer a parked request gets when it leaves the table empty-handed.
    fn empty_for(p: &Parked, best: u8) -> Answer {
        match p.wanted {
            Wanted::Task { who, .. } => Answer::Noop { to: p.addr, who, best },
            Wanted::Refill { .. } => Answer::Refill { to: p.addr, entries: ArrayVec::new(), best },
        }
    }
}

/// Collects the pipeline's outputs of one run, unstamped.
struct Collected<'a>(&'a mut Vec<Answer>);

impl Sink for Collected<'_> {
    fn assign(&mut self, to: SocketAddrV4, entry: &Entry) {
        self.0.push(Answer::Assign { to, entry: *entry, best: 0 });
    }
    fn bundle(&mut self, to: SocketAddrV4, entries: &[Entry]) {
        self.0.push(Answer::Bundle { to, entries: entries.iter().copied().collect(), best: 0 });
    }
    fn noop(&mut self, to: SocketAddrV4, who: Requester) {
        self.0.push(Answer::Noop { to, who, best: 0 });
    }
    fn queue_full(&mut self, to: SocketAddrV4, job: JobRef, tasks: &[Task]) {
        self.0.push(Answer::QueueFull { to, job, tasks: tasks.iter().copied().collect() });
    }
    fn refill(&mut self, to: SocketAddrV4, entries: &[Entry]) {
        self.0.push(Answer::Refill { to, entries: entries.iter().copied().collect(), best: 0 });
    }
}

/// How long requests park, how many may, how long a host stays registered for HINT, and
/// how many hosts one level change is told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitConfig {
    pub park_for: Duration,
    pub max_parked: usize,
    pub hint_register: Duration,
    /// HINTs per level turning non-empty, at most; fewer when the enqueue brought fewer
    /// tasks ([`Tier2`]'s HINT fan-out).
    pub hint_fanout: usize,
    /// How long after a REFILL its tasks may be recalled for a parked executor
    /// (switch/recall.rs); zero: never.
    pub recall_window: Duration,
}

/// The default HINT fan-out: one SUBMIT or RETURN carries at most this many tasks.
pub const HINT_FANOUT: usize = MAX_LIST;

impl Default for WaitConfig {
    fn default() -> Self {
        WaitConfig {
            park_for: Duration::from_millis(10),
            max_parked: 4096,
            hint_register: Duration::from_secs(5),
            hint_fanout: HINT_FANOUT,
            recall_window: RECALL_WINDOW,
        }
    }
}

/// Counters of BEST and HINT.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HintStats {
    /// BEST as of the last answer (0: every level believed empty).
    pub best: u8,
    /// HINT datagrams sent.
    pub hints_sent: u64,
    /// Hosts known for HINT: every node that sent a REFILL_REQ, until a HINT finds its
    /// last one older than the registration time.
    pub registered_hosts: u64,
    /// RECALLs sent: a parked executor asked a recently refilled host for a task back.
    pub recalls_sent: u64,
}

/// A GET_TASK with WAIT from a node that tier 2 sent a REFILL with tasks within this time
/// is not parked: it is answered NOOP at once, at most once per task that REFILL carried
/// (each task in the rings can answer one executor that missed them; beyond that the
/// executors are idle and wait here, or at scale, where every host is refilled every
/// few hundred µs, no executor would ever park and all of them would poll). It passed its host's empty rings while
/// that REFILL was on its way there; parked here it would wait for the next task at tier
/// 2 (up to the park time) while the REFILL's tasks wait in the rings for it. After the
/// NOOP the executor asks again and finds them. A few round trips on a loaded host (2 ms
/// left 10-ms tails in `bolt bench sw1`: the GET_TASK arrived later than that).
pub const REFILL_GRACE: Duration = Duration::from_millis(5);

pub struct Tier2 {
    scheduler: Scheduler,
    levels: Levels,
    park: ParkTable,
    /// Node → (agent address, last REFILL_REQ): who may get a HINT, in node order for the
    /// round robin.
    hosts: BTreeMap<u16, (SocketAddrV4, Instant)>,
    hint_register: Duration,
    hint_fanout: usize,
    /// The node the last HINT went to: the next level change tells the nodes after it.
    hint_cursor: u16,
    /// Node → when it was last sent a REFILL with tasks, and how many of its GET_TASKs
    /// may still be answered NOOP instead of parked ([`REFILL_GRACE`]).
    refilled: HashMap<u16, (Instant, u32)>,
    /// The pipeline's outputs of the run in progress (reused: no allocation once warm).
    collected: Vec<Answer>,
    hints: HintStats,
    recalls: Recalls,
    /// Level → its last enqueue (SUBMIT or RETURN), for [`Tier2::host_share`].
    enqueued_at: [Option<Instant>; 8],
    /// What each host's prefetch may take in the serving of parked requests in progress
    /// ([`Tier2::split_prefetch`]); empty otherwise.
    prefetch_split: PrefetchSplit,
}

/// A flush's prefetch split over the parked hosts that ask for it.
#[derive(Default)]
struct PrefetchSplit {
    /// Node → the most its request may take, by node.
    caps: Vec<(u16, u8)>,
    /// What a host not in `caps` may take: `None`, what it asks for (no split, or every
    /// asking host is in `caps`); `Some(0)`, nothing (more hosts asked than tasks were
    /// queued, and the split stopped at as many).
    others: Option<u8>,
}

impl PrefetchSplit {
    fn cap(&self, node: u16) -> Option<u8> {
        match self.caps.binary_search_by_key(&node, |&(n, _)| n) {
            Ok(i) => Some(self.caps[i].1),
            Err(_) => self.others,
        }
    }

    fn clear(&mut self) {
        self.caps.clear();
        self.others = None;
    }
}

impl Tier2 {
    pub fn new(scheduler: Scheduler, wait: WaitConfig) -> Tier2 {
        Tier2 {
            scheduler,
            levels: Levels::default(),
            park: ParkTable::new(wait.max_parked, wait.park_for),
            hosts: BTreeMap::new(),
            hint_register: wait.hint_register,
            hint_fanout: wait.hint_fanout,
            hint_cursor: u16::MAX,
            refilled: HashMap::new(),
            collected: Vec::with_capacity(MAX_LIST + 2),
            hints: HintStats::default(),
            recalls: Recalls::new(wait.recall_window),
            enqueued_at: [None; 8],
            prefetch_split: PrefetchSplit::default(),
        }
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// BEST as the next answer would carry it.
    pub fn best(&self) -> u8 {
        self.levels.best()
    }

    pub fn park_stats(&self) -> &ParkStats {
        &self.park.stats
    }

    pub fn hint_stats(&self) -> HintStats {
        HintStats {
            best: self.best(),
            registered_hosts: self.hosts.len() as u64,
            recalls_sent: self.recalls.sent,
            ..self.hints.clone()
        }
    }

    /// When the earliest parked request expires.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.park.next_deadline()
    }

    /// Handles one message from `src` at `now`; what the switch sends goes to `out`.
    pub fn handle(
        &mut self,
        msg: &Message<'_>,
        src: SocketAddrV4,
        now: Instant,
        out: &mut Vec<Answer>,
    ) -> Result<(), NotForSwitch> {
        self.collected.clear();
        // A REFILL_REQ is served, stamped and parked as its host's share of what it asks
        // for: BEST then says whether it got that share, not the whole `want`.
        let shared;
        let msg = match *msg {
            Message::RefillReq { node_rsrc, req } => {
                // Registered first, so that the host counts itself in its share.
                self.hosts.insert(req.node(), (src, now));
                shared = Message::RefillReq { node_rsrc, req: self.host_share(req, now) };
                &shared
            }
            _ => msg,
        };
        self.scheduler.handle(msg, src, &mut Collected(&mut self.collected))?;
        let priorities = self.scheduler.pipeline().config().priorities;
        match *msg {
            Message::Submit { tasks, .. } => self.after_enqueue(tasks.iter().map(|t| t.prio), tasks.len(), now, out),
            Message::Return(entries) => {
                self.after_enqueue(entries.iter().map(|e| e.task.prio), entries.len(), now, out)
            }
            Message::GetTask { rtrv_prio, exec_rsrc, from, wait }
            | Message::GetBundle { rtrv_prio, exec_rsrc, from, wait, .. } => {
                let want = if let Message::GetBundle { want, .. } = *msg { want } else { 1 };
                let wanted = Wanted::Task { who: from, rtrv_prio, exec_rsrc, want };
                let first = wanted.first_level(priorities);
                self.levels.after_retrieval(first, self.scheduler.pipeline());
                // An executor asking again gives up its older parked request.
                if let Some(old) = self.park.take_same(src, &wanted) {
                    out.push(self.empty_for(&old));
                }
                if wait
                    && self.found_nothing_in_empty_levels(first)
                    && !self.take_grace(from.node(), now)
                    && self.try_park(src, wanted, now, out)
                {
                    tracing::trace!(node = from.node(), "GET_TASK parks");
                    self.recall_for(from.node(), exec_rsrc, now, out);
                }
                self.stamp_into(&wanted, out);
            }
            Message::RefillReq { node_rsrc, req } => {
                self.levels.after_retrieval(0, self.scheduler.pipeline());
                let wanted = Wanted::Refill { req, node_rsrc };
                // A newer REFILL_REQ from the node supersedes its parked one, unanswered:
                // the host waits for one answer only.
                let recalled_already = self.park.take_same(src, &wanted).is_some_and(|p| p.wanted.host_waits());
                if self.found_nothing_in_empty_levels(0) {
                    tracing::trace!(
                        node = req.node(),
                        waiting = req.waiting,
                        recalled_already,
                        "REFILL_REQ found nothing"
                    );
                    // Executors wait at that host: call back tasks another host was just
                    // sent, as for an executor parking here. A request replacing a parked
                    // one that said executors wait (its host counted one more waiter)
                    // recalls nothing more: that one did, and an agent replaces its
                    // request once per executor that starts waiting, a dozen times within
                    // a wave.
                    if self.try_park(src, wanted, now, out) && !recalled_already {
                        for _ in 0..req.waiting.min(RECALLS_PER_WAITING_HOST) {
                            self.recall_for(req.node(), node_rsrc, now, out);
                        }
                    }
                } else {
                    self.note_refill(req, now);
                }
                let got = tasks_in(&self.collected);
                self.stamp_into(&wanted, out);
                if got > 0 {
                    self.park_unserved_waiters(src, wanted, got, now, out);
                }
            }
            _ => out.append(&mut self.collected),
        }
        Ok(())
    }

    /// Whether a GET_TASK of `node` is excused from parking: the node was sent a REFILL
    /// with tasks within [`REFILL_GRACE`] of `now`, and fewer of its GET_TASKs were
    /// excused since than that REFILL carried tasks. Takes one excuse.
    fn take_grace(&mut self, node: u16, now: Instant) -> bool {
        match self.refilled.get_mut(&node) {
            Some((at, left)) if *left > 0 && now.saturating_duration_since(*at) < REFILL_GRACE => {
                *left -= 1;
                true
            }
            _ => false,
        }
    }

    /// Records the tasks the collected answers REFILL `req`'s node with, if any. Those
    /// for the executors waiting there (`req.waiting`, one task per frame) go straight to
    /// them, not into the rings, so only the rest may be recalled.
    fn note_refill(&mut self, req: RefillRequest, now: Instant) {
        let tasks = tasks_in(&self.collected);
        if tasks > 0 {
            self.refilled.insert(req.node(), (now, tasks as u32));
            let into_rings = tasks.saturating_sub(req.waiting as usize);
            self.recalls.refilled(req.node(), into_rings as u32, now);
        }
    }

    /// Answers every parked request whose deadline is at or before `now`, empty.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<Answer>) {
        while let Some(p) = self.park.pop_expired(now) {
            out.push(self.empty_for(&p));
        }
    }

    /// A retrieval that got nothing from levels that hold nothing: it may wait for a
    /// task. One that got nothing from levels still holding tasks (none it can run) is
    /// answered at once: it may have come from a host that bypassed runnable work of its
    /// own on tier 2's word, and its answer's BEST sends it back to that work.
    fn found_nothing_in_empty_levels(&self, first: usize) -> bool {
        !self.collected.iter().any(Answer::has_tasks) && !self.levels.any_from(first)
    }

    /// BEST for the requester of `wanted` after its retrieval: the levels it searched and
    /// found nothing it can run in are left out (all it searched, if it got less than it
    /// asked for; those above the last task it got, otherwise). So a host is never sent
    /// to tier 2 for work its executors cannot run, nor for work below what it holds.
    fn best_for(&self, wanted: &Wanted, got: &[Answer]) -> u8 {
        let priorities = self.scheduler.pipeline().config().priorities;
        let all = priorities as usize;
        let first = wanted.first_level(priorities);
        let level = |e: &Entry| (e.task.prio.clamp(1, priorities) - 1) as usize;
        let mut taken = 0usize;
        let mut last = None;
        for a in got {
            match a {
                Answer::Assign { entry, .. } => {
                    taken += 1;
                    last = Some(level(entry));
                }
                Answer::Refill { entries, .. } => {
                    taken += entries.len();
                    // A batch lists its entries newest first.
                    last = entries.first().map(level).or(last);
                }
                Answer::Bundle { entries, .. } => {
                    taken += entries.len();
                    // A bundle lists its entries in the order found.
                    last = entries.last().map(level).or(last);
                }
                _ => {}
            }
        }
        let wanted_count = match wanted {
            Wanted::Task { want, .. } => *want as usize,
            Wanted::Refill { req, .. } => req.want as usize,
        };
        match last {
            Some(l) if taken >= wanted_count => self.levels.best_excluding(first, l),
            _ => self.levels.best_excluding(first, all),
        }
    }

    /// The answer a parked request gets when it leaves the table empty-handed.
    fn empty_for(&self, p: &Parked) -> Answer {
        Answer::empty_for(p, self.best_for(&p.wanted, &[]))
    }

    /// After a SUBMIT or RETURN of `tasks` tasks of priorities `prios`: marks their levels,
    /// sends what the pipeline answered, serves parked requests, and sends HINTs if a
    /// level was empty before.
    fn after_enqueue(&mut self, prios: impl Iterator<Item = u8>, tasks: usize, now: Instant, out: &mut Vec<Answer>) {
        let priorities = self.scheduler.pipeline().config().priorities;
        let mut rose = false;
        for p in prios {
            let l = (p.clamp(1, priorities) - 1) as usize;
            rose |= self.levels.after_enqueue(l, self.scheduler.pipeline());
            self.enqueued_at[l] = Some(now);
        }
        // QUEUE_FULL answers only: nothing to stamp.
        out.append(&mut self.collected);
        self.serve_parked(now, out);
        if rose {
            self.send_hints(tasks, now, out);
        }
    }

    /// Parks the request whose empty answer is in `collected` (dropping that answer),
    /// unless the table is full: then the empty answer goes out as it is.
    /// True if it parked.
    fn try_park(&mut self, src: SocketAddrV4, wanted: Wanted, now: Instant, out: &mut Vec<Answer>) -> bool {
        let Ok(replaced) = self.park.park(src, wanted, now) else { return false };
        self.collected.retain(|a| !is_empty_answer_to(a, src));
        if let Some(old) = replaced {
            out.push(self.empty_for(&old));
        }
        true
    }

    /// After an answer of `got` tasks to `wanted`, a REFILL_REQ of a host where executors
    /// wait: parks a request for the waiters it did not serve, if any, and RECALLs for
    /// them as a REFILL_REQ parking with executors waiting does.
    ///
    /// The host's program hands each one-task frame to a waiting executor without waking
    /// the agent, so the agent may not know its request was answered until its next
    /// wake-up; the executors left waiting keep a request here meanwhile. An agent's new
    /// REFILL_REQ replaces it. Nothing is parked when the table is full: the agent asks
    /// again at its next refill step.
    fn park_unserved_waiters(
        &mut self,
        src: SocketAddrV4,
        wanted: Wanted,
        got: usize,
        now: Instant,
        out: &mut Vec<Answer>,
    ) {
        let Wanted::Refill { req, node_rsrc } = wanted else { return };
        let rest = (req.waiting as usize).saturating_sub(got) as u8;
        if rest == 0 {
            return;
        }
        let remainder = Wanted::Refill { req: RefillRequest { want: rest, waiting: rest, ..req }, node_rsrc };
        // The host's request was just answered (and taken from the table), so this
        // replaces nothing.
        if self.park.park(src, remainder, now).is_ok() {
            for _ in 0..rest.min(RECALLS_PER_WAITING_HOST) {
                self.recall_for(req.node(), node_rsrc, now, out);
            }
        }
    }

    /// An executor of `node` offering `exec_rsrc` parked: asks a host refilled a moment
    /// ago for one task back (switch/recall.rs), if there is one whose agent is known.
    fn recall_for(&mut self, node: u16, exec_rsrc: u8, now: Instant, out: &mut Vec<Answer>) {
        let hosts = &self.hosts;
        let Some(host) = self.recalls.recall_for(node, now, |n| hosts.contains_key(&n)) else {
            tracing::trace!(node, "no REFILL to RECALL from");
            return;
        };
        let Some(&(to, _)) = self.hosts.get(&host) else { return };
        tracing::trace!(node, from = host, "RECALL sent");
        out.push(Answer::Recall { to, exec_rsrc, req: RefillRequest::new(host, 1), best: self.levels.best() });
    }

    /// Moves the collected answers to `wanted`'s retrieval to `out`, stamped with BEST
    /// for that requester. A REFILL batch that another follows carries 0: a switch sends
    /// a full batch before its search ends (bolt.p4 does), so only the last knows BEST.
    /// A REFILL to a host where executors wait goes one task per frame.
    fn stamp_into(&mut self, wanted: &Wanted, out: &mut Vec<Answer>) {
        let best = self.best_for(wanted, &self.collected);
        let last_refill = self.collected.iter().rposition(|a| matches!(a, Answer::Refill { .. }));
        let first = out.len();
        for (i, mut a) in self.collected.drain(..).enumerate() {
            let batch_before_last = matches!(a, Answer::Refill { .. }) && Some(i) != last_refill;
            a.set_best(if batch_before_last { 0 } else { best });
            out.push(a);
        }
        // A host where executors wait gets one task per frame, answered at once or from
        // the park: each becomes a waiting executor's ASSIGN in its XDP program, with no
        // wake-up of its agent in between, including executors that began waiting after
        // the request; the program stores the frames no one waits for.
        if wanted.host_waits() {
            one_task_per_frame(out, first);
        }
    }

    /// After an enqueue: runs parked requests through the pipeline again while levels
    /// they search hold tasks: first every parked GET_TASK (an idle executor), in arrival
    /// order; then the waiting executors' share of every parked REFILL_REQ of a host where
    /// executors wait; then the REFILL_REQs of hosts that only prefetch; then what the
    /// waiting hosts asked beyond their waiters. A task goes to an idle executor before
    /// any host prefetches it: a task a REFILL moved to a busy host's ring while idle
    /// executors wait elsewhere would sit there until that host's executors are free. One
    /// that gets tasks leaves the table with its answer; one that does not (its resources
    /// match nothing queued) stays. Each parked request is tried at most once per enqueue
    /// (a waiting host's once for its waiters and once beyond them).
    ///
    /// The answers leave in the same order: every frame for a waiting executor, of every
    /// host, before any frame for a ring ([`Tier2::serve_beyond_waiters`]).
    fn serve_parked(&mut self, now: Instant, out: &mut Vec<Answer>) {
        if self.park.is_empty() {
            return;
        }
        self.serve_parked_kind(ParkedKind::Executors, now, out);
        let held = self.serve_waiters(now);
        self.split_prefetch(&held, now);
        let mut prefetch = Vec::new();
        self.serve_parked_kind(ParkedKind::Hosts, now, &mut prefetch);
        self.serve_beyond_waiters(held, now, out, &mut prefetch);
        self.prefetch_split.clear();
        out.append(&mut prefetch);
    }

    /// How much of what is queued each parked host's prefetch may take, once the
    /// executors waiting anywhere have theirs: an even split over the hosts that ask
    /// (water-filling: a host that asks for less than its part leaves the rest to the
    /// others), so that no task stays at tier 2 that some host asked for. Only with one
    /// level in use: otherwise each request takes its host's share of the best level
    /// ([`Tier2::host_share`]), which leaves part of it at tier 2.
    ///
    /// Served in arrival order without it, the first host took all of a job that its
    /// rings lacked, and the tasks waited for that host's executors to free while the
    /// other host's freed first (docs/agent.md, "A flush's prefetch split evenly").
    fn split_prefetch(&mut self, held: &[HeldAnswer], now: Instant) {
        // One vector, kept across enqueues: the wants, then in place the caps.
        let mut split = std::mem::take(&mut self.prefetch_split);
        split.clear();
        let best = self.levels.best() as usize;
        if best == 0 || self.lower_level_in_use(best, now) {
            self.prefetch_split = split;
            return;
        }
        let mut left = queued(self.scheduler.pipeline(), best - 1) as usize;
        let wants = &mut split.caps;
        wants.extend(
            held.iter()
                .filter_map(|h| match h.parked.wanted {
                    Wanted::Refill { req, .. } => {
                        let got = tasks_in(&h.answers).min(req.want as usize) as u8;
                        Some((req.node(), req.want - got))
                    }
                    _ => None,
                })
                .filter(|&(_, want)| want > 0),
        );
        // Once as many hosts ask as tasks are queued, each part is one task at most, and
        // the oldest requests get them as before: no need to look at more (a park table
        // at scale holds a request of every host).
        let mut from = 0;
        while let Some((ticket, p)) = self.next_parked(ParkedKind::Hosts, from, now) {
            if wants.len() >= left {
                // More ask than this split looked at: they get nothing of it.
                split.others = Some(0);
                break;
            }
            from = ticket + 1;
            if let Wanted::Refill { req, .. } = p.wanted {
                wants.push((req.node(), req.want));
            }
        }
        if wants.len() < 2 {
            split.clear();
            self.prefetch_split = split;
            return;
        }
        wants.sort_unstable_by_key(|&(_, want)| want);
        let asking = wants.len();
        for (k, (_, want)) in wants.iter_mut().enumerate() {
            let cap = not_at_a_whole_batch(left.div_ceil(asking - k), *want);
            left = left.saturating_sub(cap as usize);
            *want = cap;
        }
        // Looked up by node for every request the flush serves.
        wants.sort_unstable_by_key(|&(node, _)| node);
        self.prefetch_split = split;
    }

    /// The oldest parked request of `kind`, from ticket `from` on, that searches a level
    /// holding tasks and has not expired (an expired one takes nothing: the expiry sweep
    /// answers it empty).
    fn next_parked(&self, kind: ParkedKind, mut from: Ticket, now: Instant) -> Option<(Ticket, Parked)> {
        let priorities = self.scheduler.pipeline().config().priorities;
        let levels = self.levels;
        loop {
            if levels.best() == 0 {
                return None;
            }
            let eligible = |g: Group| kind.takes(g) && levels.any_from(g.first_level(priorities));
            let (ticket, p) = self.park.oldest_from(from, eligible)?;
            if p.deadline > now {
                return Some((ticket, p));
            }
            from = ticket + 1;
        }
    }

    /// `req` as tier 2 serves it: while a level below tier 2's best level is in use
    /// ([`Tier2::lower_level_in_use`]), `want` is at most this host's share of the best
    /// level, the tasks queued there over the registered hosts, rounded up, and never
    /// less than the executors waiting at the host.
    ///
    /// A REFILL commits its tasks to one host's rings. Taken whole, a new job of a
    /// higher level waits there for that host's executors while the other hosts' free
    /// executors start the lower level (docs/agent.md, "A host's share of a level").
    /// Left at tier 2, the rest goes to whichever executors free first: their bypassing
    /// GET_TASKs and the other hosts' REFILLs. With one level in use there is nothing to
    /// invert, and a host takes what its agent asks for.
    fn host_share(&self, req: RefillRequest, now: Instant) -> RefillRequest {
        let best = self.levels.best() as usize;
        // Hosts count while they are registered for HINT; with registration off (as
        // bolt.p4, which registers none) a host takes what it asks for.
        if self.hint_register.is_zero() || self.hosts.len() < 2 || best == 0 || !self.lower_level_in_use(best, now) {
            return req;
        }
        let queued = queued(self.scheduler.pipeline(), best - 1) as usize;
        let share = queued.div_ceil(self.hosts.len()).max(req.waiting as usize).max(1);
        RefillRequest { want: not_at_a_whole_batch(share, req.want), ..req }
    }

    /// Whether a level below `best` (1-based) took an enqueue within the registration
    /// window: its tasks may be in the hosts' rings, to be started over a higher level
    /// a host took too much of.
    fn lower_level_in_use(&self, best: usize, now: Instant) -> bool {
        self.enqueued_at[best.min(8)..]
            .iter()
            .flatten()
            .any(|&at| now.saturating_duration_since(at) <= self.hint_register)
    }

    /// Runs `wanted`, from `addr`, through the pipeline into `collected`, a REFILL_REQ as
    /// its host's share. If it got tasks, returns what it asked the pipeline for (to
    /// stamp BEST by); otherwise `collected` is left empty.
    fn retrieve(&mut self, wanted: &Wanted, addr: SocketAddrV4, now: Instant) -> Option<Wanted> {
        let first = wanted.first_level(self.scheduler.pipeline().config().priorities);
        self.collected.clear();
        let served = match *wanted {
            Wanted::Refill { req, node_rsrc } => {
                let mut req = self.host_share(req, now);
                if req.waiting == 0 {
                    match self.prefetch_split.cap(req.node()) {
                        // The others' parts took what is queued: nothing for this one now
                        // (a request runs through the pipeline for one task or more).
                        Some(0) => return None,
                        Some(cap) => req.want = req.want.min(cap),
                        None => {}
                    }
                }
                Wanted::Refill { req, node_rsrc }
            }
            task => task,
        };
        if self.scheduler.handle(&served.message(), addr, &mut Collected(&mut self.collected)).is_err() {
            return None;
        }
        self.levels.after_retrieval(first, self.scheduler.pipeline());
        if self.collected.iter().any(Answer::has_tasks) {
            Some(served)
        } else {
            self.collected.clear();
            None
        }
    }

    /// Answers the parked request `ticket` with the collected answers, stamped for
    /// `served`: what was asked of the pipeline for it (a REFILL_REQ's share).
    fn answer_parked(&mut self, ticket: Ticket, served: &Wanted, now: Instant, out: &mut Vec<Answer>) {
        if let Wanted::Refill { req, .. } = served {
            self.note_refill(*req, now);
        }
        self.park.answered(ticket);
        self.stamp_into(served, out);
    }

    fn serve_parked_kind(&mut self, kind: ParkedKind, now: Instant, out: &mut Vec<Answer>) {
        let mut from = 0;
        while let Some((ticket, p)) = self.next_parked(kind, from, now) {
            from = ticket + 1;
            if let Some(served) = self.retrieve(&p.wanted, p.addr, now) {
                self.answer_parked(ticket, &served, now, out);
            }
        }
    }

    /// Parked REFILL_REQs of hosts where executors wait: each one's waiting executors'
    /// share (`waiting` of its `want`), oldest request first, held for
    /// [`Tier2::serve_beyond_waiters`]. So an idle executor of any host gets a task
    /// before a host's rings get one.
    fn serve_waiters(&mut self, now: Instant) -> Vec<HeldAnswer> {
        let mut held = Vec::new();
        let mut from = 0;
        while let Some((ticket, p)) = self.next_parked(ParkedKind::WaitingHosts, from, now) {
            from = ticket + 1;
            let Wanted::Refill { req, node_rsrc } = p.wanted else { continue };
            let share = RefillRequest { want: req.want.min(req.waiting), ..req };
            if self.retrieve(&Wanted::Refill { req: share, node_rsrc }, p.addr, now).is_some() {
                held.push(HeldAnswer { ticket, parked: p, answers: std::mem::take(&mut self.collected) });
            }
        }
        held
    }

    /// Completes the answers [`Tier2::serve_waiters`] held with what each host asked for
    /// beyond its waiters (the prefetch its agent's target wants), in the same order, and
    /// sends them. Runs after the hosts that only prefetch were served: the rest of a new
    /// job's tasks then reaches a waiting host's rings in the same answer, instead of its
    /// busy executors fetching them one round trip each while its agent's next
    /// REFILL_REQ is on its way, but not before a host whose rings ran low.
    ///
    /// Each answer's frames for its waiters go to `out`, the rest after the prefetch
    /// answers already in `prefetch`. A frame to a host passes through the kernel in the order it is sent,
    /// several microseconds each on the testbed, so one host's prefetch sent between
    /// another host's waiters delayed their start; each host still gets its own frames in
    /// order (docs/protocol.md, REFILL).
    fn serve_beyond_waiters(
        &mut self,
        held: Vec<HeldAnswer>,
        now: Instant,
        out: &mut Vec<Answer>,
        prefetch: &mut Vec<Answer>,
    ) {
        for HeldAnswer { ticket, parked: p, mut answers } in held {
            let Wanted::Refill { req, node_rsrc } = p.wanted else { continue };
            let got = tasks_in(&answers);
            let mut served = p.wanted;
            if got < req.want as usize && self.levels.best() != 0 {
                let beyond = RefillRequest { want: req.want - got as u8, waiting: 0, ..req };
                if let Some(Wanted::Refill { req: share, .. }) =
                    self.retrieve(&Wanted::Refill { req: beyond, node_rsrc }, p.addr, now)
                {
                    answers.append(&mut self.collected);
                    served = Wanted::Refill { req: RefillRequest { want: got as u8 + share.want, ..req }, node_rsrc };
                }
            }
            self.collected = answers;
            let first = out.len();
            self.answer_parked(ticket, &served, now, out);
            let beyond = first + frames_holding(&out[first..], got);
            prefetch.extend(out.drain(beyond..));
            self.park_unserved_waiters(p.addr, p.wanted, got, now, prefetch);
        }
    }

    /// HINT to at most as many registered hosts as the enqueue brought `tasks`, and at
    /// most `hint_fanout`, taken round robin in node order after the last one told;
    /// forgets the hosts it meets whose registration lapsed.
    ///
    /// Bounded because a HINT to every host grows with the cluster (65 M HINTs for 48,000
    /// tasks at 62,500 hosts in `bolt sim`) while the tasks that turned the level
    /// non-empty can serve at most that many hosts: a host told beyond them would bypass
    /// its rings for work another host already took. The others learn BEST from the next
    /// answer that crosses them.
    fn send_hints(&mut self, tasks: usize, now: Instant, out: &mut Vec<Answer>) {
        let best = self.levels.best();
        if best == 0 {
            return;
        }
        let want = tasks.min(self.hint_fanout);
        let window = self.hint_register;
        let after = (Bound::Excluded(self.hint_cursor), Bound::Unbounded);
        let mut sent = 0;
        let mut lapsed = Vec::new();
        for (&node, &(addr, seen)) in self.hosts.range(after).chain(self.hosts.range(..=self.hint_cursor)) {
            if sent >= want {
                break;
            }
            if now.saturating_duration_since(seen) > window {
                lapsed.push(node);
                continue;
            }
            out.push(Answer::Hint { to: addr, best });
            sent += 1;
            self.hint_cursor = node;
        }
        self.hints.hints_sent += sent as u64;
        for node in lapsed {
            self.hosts.remove(&node);
        }
    }
}

/// The answer to a parked REFILL_REQ of a host where executors wait, with its waiters'
/// tasks, held until what it asked beyond them is added.
struct HeldAnswer {
    ticket: Ticket,
    parked: Parked,
    answers: Vec<Answer>,
}

/// Parked requests in the order [`Tier2::serve_parked`] serves them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ParkedKind {
    /// GET_TASK with WAIT: idle executors waiting here.
    Executors,
    /// REFILL_REQ from hosts where executors wait.
    WaitingHosts,
    /// REFILL_REQ from hosts that prefetch.
    Hosts,
}

impl ParkedKind {
    fn takes(self, g: Group) -> bool {
        match self {
            ParkedKind::Executors => g.task,
            ParkedKind::WaitingHosts => !g.task && g.waiting,
            ParkedKind::Hosts => !g.task && !g.waiting,
        }
    }
}

/// At most `part` of `want` tasks, and never a cut at a whole batch of 16 short of
/// `want`: an answer ends at its `want`-th task or at a short batch (docs/protocol.md,
/// REFILL), so a cut there would look unfinished to the host; it is one more instead.
fn not_at_a_whole_batch(part: usize, want: u8) -> u8 {
    let mut cap = part.min(want as usize);
    if cap < want as usize && cap > 0 && cap.is_multiple_of(MAX_LIST) {
        cap += 1;
    }
    cap as u8
}

/// RECALLs (of one task each) that a REFILL_REQ parking with executors waiting at its
/// host sends. One: with up to one per waiting executor (4 at most), the SW1 70 % point
/// recalled a quarter of its tasks, three times as many as with executors parked here,
/// and its median delay did not fall.
const RECALLS_PER_WAITING_HOST: u8 = 1;

/// Splits the REFILLs in `out[from..]` into frames of one task each, in the order tier 2
/// dequeued them, each with its batch's BEST: the answer to a REFILL_REQ from a host
/// where executors wait (parked, or answered at once), whose XDP program turns each frame
/// into one waiting executor's ASSIGN while one waits, and stores the rest (docs/xdp.md,
/// "Waiting at the host"). Such a request asks for a task per waiting executor and what
/// its rings lack of their target, and one enqueue brings at most one SUBMIT's or
/// RETURN's tasks (16), so this costs at most 16 frames where one would do from the
/// park, and a request's `want` at most when answered at once, only while that host's
/// executors are idle.
fn one_task_per_frame(out: &mut Vec<Answer>, from: usize) {
    let answers: Vec<Answer> = out.drain(from..).collect();
    for a in answers {
        match a {
            Answer::Refill { to, entries, best } if entries.len() > 1 => {
                // Newest first in a REFILL: the last entry was dequeued first.
                for e in entries.iter().rev() {
                    out.push(Answer::Refill { to, entries: std::iter::once(*e).collect(), best });
                }
            }
            a => out.push(a),
        }
    }
}

/// How many of `answers`, from the first, it takes for their REFILLs to carry `tasks`
/// tasks (all of them if they carry fewer).
fn frames_holding(answers: &[Answer], tasks: usize) -> usize {
    let mut carried = 0;
    for (i, a) in answers.iter().enumerate() {
        if carried >= tasks {
            return i;
        }
        carried += a.refill_tasks();
    }
    answers.len()
}

/// The tasks the REFILLs among `answers` carry.
fn tasks_in(answers: &[Answer]) -> usize {
    answers.iter().map(Answer::refill_tasks).sum()
}

/// The NOOP or empty REFILL the pipeline sent to `src`.
fn is_empty_answer_to(a: &Answer, src: SocketAddrV4) -> bool {
    match a {
        Answer::Noop { to, .. } => *to == src,
        Answer::Refill { to, entries, .. } => *to == src && entries.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::QueueConfig;
    use scheduler_common::{RefillRequest, Task};
    use std::net::Ipv4Addr;

    const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000);
    const MS: Duration = Duration::from_millis(1);

    fn exec(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, 1), port)
    }

    fn tier2(max_parked: usize) -> Tier2 {
        let s = Scheduler::new(QueueConfig { capacity: 64, ..QueueConfig::default() }).unwrap();
        Tier2::new(
            s,
            WaitConfig {
                park_for: 10 * MS,
                max_parked,
                hint_register: 1000 * MS,
                hint_fanout: HINT_FANOUT,
                ..WaitConfig::default()
            },
        )
    }

    fn task(tid: u32, prio: u8, rsrc: u8) -> Task {
        let mut t = Task { prio, rsrc, ..Task::default() };
        t.set_tid(tid);
        t
    }

    fn submit(t2: &mut Tier2, tasks: &[Task], now: Instant) -> Vec<Answer> {
        let mut out = Vec::new();
        t2.handle(&Message::Submit { job: JobRef::new(1, 1), flags: 0, tasks }, CLIENT, now, &mut out).unwrap();
        out
    }

    fn get(t2: &mut Tier2, from: SocketAddrV4, seq: u32, rsrc: u8, wait: bool, now: Instant) -> Vec<Answer> {
        let mut out = Vec::new();
        let who = Requester::new(1, from.port(), seq);
        t2.handle(&Message::GetTask { rtrv_prio: 1, exec_rsrc: rsrc, from: who, wait }, from, now, &mut out).unwrap();
        out
    }

    fn refill_req(t2: &mut Tier2, node: u16, from: SocketAddrV4, now: Instant) -> Vec<Answer> {
        let mut out = Vec::new();
        let msg = Message::RefillReq { node_rsrc: 0xff, req: RefillRequest::new(node, 8) };
        t2.handle(&msg, from, now, &mut out).unwrap();
        out
    }

    fn get_bundle(t2: &mut Tier2, from: SocketAddrV4, want: u8, rsrc: u8, wait: bool, now: Instant) -> Vec<Answer> {
        let mut out = Vec::new();
        let who = Requester::new(1, from.port(), 1);
        let msg = Message::GetBundle { rtrv_prio: 1, exec_rsrc: rsrc, from: who, want, wait };
        t2.handle(&msg, from, now, &mut out).unwrap();
        out
    }

    /// The bundles in `out`: (to, tids in order, BEST).
    fn bundled(out: &[Answer]) -> Vec<(SocketAddrV4, Vec<u32>, u8)> {
        out.iter()
            .filter_map(|a| match a {
                Answer::Bundle { to, entries, best } => {
                    Some((*to, entries.iter().map(|e| e.task.tid()).collect(), *best))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_bundle_of_sixteen_comes_in_priority_then_fifo_order_in_one_assign() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        // 20 tasks: levels 3, 1, 2 and 4 interleaved, in submission order.
        let tasks: Vec<Task> = (0..20).map(|i| task(100 + i, [3, 1, 2, 4][i as usize % 4], 0)).collect();
        submit(&mut t2, &tasks[..16], t0);
        submit(&mut t2, &tasks[16..], t0);
        let out = get_bundle(&mut t2, exec(1), 16, 0, false, t0 + MS);
        let mut expected: Vec<&Task> = tasks.iter().collect();
        expected.sort_by_key(|t| t.prio); // stable: FIFO within a level
        let expected: Vec<u32> = expected[..16].iter().map(|t| t.tid()).collect();
        // Level 4 still holds the 4 tasks left: BEST 4.
        assert_eq!(bundled(&out), vec![(exec(1), expected, 4)]);
        assert_eq!(out.len(), 1, "one ASSIGN, nothing else");
        let stats = t2.scheduler().stats();
        assert_eq!((stats.bundles, stats.bundled_tasks, stats.assigns, stats.decisions), (1, 16, 1, 16));
        let cost = stats.cost_of(scheduler_common::Op::GetBundle);
        assert_eq!(cost.packets, 1);
        assert!(cost.passes >= 16, "a pass per task taken at least: {cost:?}");
        // The encoded answer is one ASSIGN listing the sixteen.
        let mut buf = [0u8; scheduler_common::MAX_MESSAGE_LEN];
        let n = out[0].encode(&mut buf).unwrap();
        assert_eq!(n, scheduler_common::message_len(scheduler_common::Op::Assign, 16));
    }

    #[test]
    fn a_bundle_takes_fewer_tasks_than_want_and_only_those_it_can_run() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        submit(&mut t2, &[task(1, 2, 0), task(2, 2, 0b10), task(3, 3, 0)], t0);
        // The executor lacks resource 2: tasks 1 and 3, task 2 stays queued for another.
        let out = get_bundle(&mut t2, exec(1), 8, 0b01, true, t0 + MS);
        assert_eq!(bundled(&out), vec![(exec(1), vec![1, 3], 0)], "BEST 0 for it: only what it cannot run is left");
        let out = get_bundle(&mut t2, exec(2), 8, 0b11, false, t0 + 2 * MS);
        assert_eq!(bundled(&out), vec![(exec(2), vec![2], 0)]);
        // Nothing left: NOOP echoing the request, not an empty ASSIGN.
        let out = get_bundle(&mut t2, exec(2), 8, 0b11, false, t0 + 3 * MS);
        assert_eq!(out, vec![Answer::Noop { to: exec(2), who: Requester::new(1, 2, 1), best: 0 }]);
        assert_eq!(t2.park_stats().parked, 0, "a WAIT that found tasks is not parked");
    }

    #[test]
    fn a_waiting_get_bundle_is_parked_and_answered_with_a_bundle_when_tasks_arrive() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        assert_eq!(get_bundle(&mut t2, exec(1), 4, 0, true, t0), vec![], "parked, no NOOP");
        let out =
            submit(&mut t2, &[task(1, 2, 0), task(2, 1, 0), task(3, 2, 0), task(4, 2, 0), task(5, 2, 0)], t0 + MS);
        // Up to want = 4, level 1 first; task 5 stays queued, so BEST 2.
        assert_eq!(bundled(&out), vec![(exec(1), vec![2, 1, 3, 4], 2)]);
        assert_eq!(t2.park_stats().answered_from_park, 1);
        // Parked again, it expires with a NOOP and takes nothing.
        let out = get_bundle(&mut t2, exec(1), 4, 0, true, t0 + 2 * MS);
        assert_eq!(bundled(&out), vec![(exec(1), vec![5], 0)], "one task is there: answered at once");
        assert_eq!(get_bundle(&mut t2, exec(1), 4, 0, true, t0 + 3 * MS), vec![]);
        let mut out = Vec::new();
        t2.expire(t0 + 100 * MS, &mut out);
        assert_eq!(out, vec![Answer::Noop { to: exec(1), who: Requester::new(1, 1, 1), best: 0 }]);
    }

    fn assigned(out: &[Answer]) -> Vec<(SocketAddrV4, u32, u8)> {
        out.iter()
            .filter_map(|a| match a {
                Answer::Assign { to, entry, best } => Some((*to, entry.task.tid(), *best)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_waiting_get_task_is_parked_and_answered_once_when_a_task_arrives() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        assert_eq!(get(&mut t2, exec(1), 1, 0, true, t0), vec![], "parked, no NOOP");
        let out = submit(&mut t2, &[task(7, 2, 0)], t0 + MS);
        assert_eq!(assigned(&out), vec![(exec(1), 7, 0)], "BEST 0: the only task left");
        // Nothing more for it: a second task stays queued, the expired sweep sends nothing.
        let out = submit(&mut t2, &[task(8, 2, 0)], t0 + 2 * MS);
        assert!(assigned(&out).is_empty(), "one ASSIGN per wait");
        let mut out = Vec::new();
        t2.expire(t0 + 100 * MS, &mut out);
        assert!(out.is_empty());
        assert_eq!(t2.best(), 2);
        let s = t2.park_stats();
        assert_eq!((s.parked, s.answered_from_park, s.expired, s.waiting), (1, 1, 0, 0));
    }

    #[test]
    fn expired_requests_get_noop_and_take_no_task() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        get(&mut t2, exec(1), 5, 0, true, t0);
        // A task arriving at the deadline does not go to the expired request.
        let out = submit(&mut t2, &[task(1, 1, 0)], t0 + 10 * MS);
        assert!(assigned(&out).is_empty());
        let mut out = Vec::new();
        t2.expire(t0 + 10 * MS, &mut out);
        // BEST 0 for this executor: its wait covered every level it searches (a task
        // arriving exactly at the deadline is the one exception, and stays queued).
        assert_eq!(out, vec![Answer::Noop { to: exec(1), who: Requester::new(1, 1, 5), best: 0 }]);
        assert_eq!(t2.best(), 1);
        assert_eq!(t2.park_stats().expired, 1);
    }

    #[test]
    fn without_wait_or_with_a_full_table_the_answer_is_immediate() {
        let t0 = Instant::now();
        let mut t2 = tier2(1);
        let noop = |port, seq| Answer::Noop { to: exec(port), who: Requester::new(1, port, seq), best: 0 };
        assert_eq!(get(&mut t2, exec(1), 1, 0, false, t0), vec![noop(1, 1)]);
        assert_eq!(get(&mut t2, exec(2), 1, 0, true, t0), vec![]);
        assert_eq!(get(&mut t2, exec(3), 1, 0, true, t0), vec![noop(3, 1)], "table full");
        assert_eq!(t2.park_stats().refused_park, 1);
    }

    #[test]
    fn an_executor_asking_again_gives_up_its_parked_request() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        get(&mut t2, exec(1), 1, 0, true, t0);
        // Its resend: the old request is answered NOOP (its seq), the new one parks.
        let out = get(&mut t2, exec(1), 2, 0, true, t0 + MS);
        assert_eq!(out, vec![Answer::Noop { to: exec(1), who: Requester::new(1, 1, 1), best: 0 }]);
        let out = submit(&mut t2, &[task(3, 1, 0), task(4, 1, 0)], t0 + 2 * MS);
        assert_eq!(assigned(&out), vec![(exec(1), 3, 1)], "one ASSIGN, BEST 1: task 4 is left");
    }

    #[test]
    fn parked_requests_are_served_in_arrival_order_among_those_that_can_run_the_task() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        get(&mut t2, exec(1), 1, 0b00, true, t0);
        get(&mut t2, exec(2), 1, 0b01, true, t0 + MS);
        get(&mut t2, exec(3), 1, 0b01, true, t0 + 2 * MS);
        // Needs resource 1: executor 1 cannot run it; 2 arrived before 3.
        let out = submit(&mut t2, &[task(9, 3, 0b01)], t0 + 3 * MS);
        assert_eq!(assigned(&out), vec![(exec(2), 9, 0)]);
        let out = submit(&mut t2, &[task(10, 4, 0)], t0 + 4 * MS);
        assert_eq!(assigned(&out), vec![(exec(1), 10, 0)]);
        assert_eq!(t2.park_stats().waiting, 1);
    }

    #[test]
    fn a_request_finding_only_tasks_it_cannot_run_is_answered_at_once_with_best_for_it() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        submit(&mut t2, &[task(1, 1, 0b10)], t0);
        assert_eq!(t2.best(), 1);
        // The executor lacks resource 2: not parked (its host may hold work of its own,
        // which it bypassed on the strength of BEST 1), and told BEST 0.
        let out = get(&mut t2, exec(1), 1, 0b01, true, t0 + MS);
        assert_eq!(out, vec![Answer::Noop { to: exec(1), who: Requester::new(1, 1, 1), best: 0 }]);
        // A level-3 task it can run, handed out past the level-1 one it cannot: BEST 0
        // for it, not 1 (it would only be sent back to tier 2 for nothing).
        submit(&mut t2, &[task(2, 3, 0b01)], t0 + 2 * MS);
        let out = get(&mut t2, exec(1), 2, 0b01, true, t0 + 3 * MS);
        assert_eq!(assigned(&out), vec![(exec(1), 2, 0)]);
        // One that can run it gets it, with the level below still counted.
        submit(&mut t2, &[task(3, 4, 0)], t0 + 4 * MS);
        let out = get(&mut t2, exec(2), 1, 0b11, true, t0 + 5 * MS);
        assert_eq!(assigned(&out), vec![(exec(2), 1, 4)]);
        assert_eq!(t2.park_stats().parked, 0);
    }

    /// Tier 2 parking nothing, with hosts 1 and 2 registered (they found nothing).
    fn two_hosts(t0: Instant) -> Tier2 {
        let mut t2 = tier2(0);
        assert_eq!(refilled_to(&refill_req(&mut t2, 1, agent_of(1), t0), 1), Vec::<u32>::new());
        assert_eq!(refilled_to(&refill_req(&mut t2, 2, agent_of(2), t0), 2), Vec::<u32>::new());
        t2
    }

    /// Tasks `tids` at level `prio`.
    fn tasks_at(prio: u8, tids: std::ops::Range<u32>) -> Vec<Task> {
        tids.map(|t| task(t, prio, 0)).collect()
    }

    /// The tids `out` REFILLs `node` with, in ascending order.
    fn refilled_to(out: &[Answer], node: u16) -> Vec<u32> {
        let mut tids: Vec<u32> =
            refilled(out).into_iter().filter(|(to, _)| *to == agent_of(node)).flat_map(|(_, t)| t).collect();
        tids.sort_unstable();
        tids
    }

    #[test]
    fn a_host_takes_at_most_its_share_of_a_level_that_outranks_another() {
        let t0 = Instant::now();
        let mut t2 = two_hosts(t0);
        // A backlog at level 2, then a new job of six tasks at level 1.
        submit(&mut t2, &tasks_at(2, 101..105), t0);
        submit(&mut t2, &tasks_at(1, 1..7), t0);
        // Each host asks for 8 and gets half of what level 1 holds, rounded up: the
        // rest stays at tier 2 for whichever executors free first. It got its share, so
        // BEST names level 1, still held: the host's rings below it stay held back.
        let out = refill_req(&mut t2, 1, agent_of(1), t0);
        assert_eq!(refilled_to(&out, 1), vec![1, 2, 3]);
        assert!(matches!(out.last(), Some(Answer::Refill { best: 1, .. })), "{out:?}");
        assert_eq!(refilled_to(&refill_req(&mut t2, 2, agent_of(2), t0), 2), vec![4, 5]);
        // A host where four executors wait gets a task for each of them, whatever the
        // share: the last level-1 task, then level 2's.
        let out = refill_req_with(&mut t2, RefillRequest::new(1, 8).with_waiting(4), t0);
        assert_eq!(refilled_to(&out, 1), vec![6, 101, 102, 103]);
    }

    #[test]
    fn parked_hosts_get_their_shares_of_a_new_job_stamped_with_the_level_left() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        assert_eq!(refill_req(&mut t2, 1, agent_of(1), t0), vec![]);
        assert_eq!(refill_req(&mut t2, 2, agent_of(2), t0 + MS), vec![]);
        let mut tasks = tasks_at(2, 101..103);
        tasks.extend(tasks_at(1, 1..7));
        let out = submit(&mut t2, &tasks, t0 + 2 * MS);
        assert_eq!(refilled_to(&out, 1), vec![1, 2, 3]);
        assert_eq!(refilled_to(&out, 2), vec![4, 5]);
        let bests: Vec<u8> =
            out.iter().filter_map(|a| if let Answer::Refill { best, .. } = a { Some(*best) } else { None }).collect();
        assert_eq!(bests, vec![1, 1]);
    }

    #[test]
    fn with_host_registration_off_a_refill_takes_what_it_asks_for() {
        let t0 = Instant::now();
        let s = Scheduler::new(QueueConfig { capacity: 64, ..QueueConfig::default() }).unwrap();
        let mut t2 =
            Tier2::new(s, WaitConfig { max_parked: 0, hint_register: Duration::ZERO, ..WaitConfig::default() });
        refill_req(&mut t2, 1, agent_of(1), t0);
        refill_req(&mut t2, 2, agent_of(2), t0);
        submit(&mut t2, &[task(100, 2, 0)], t0);
        submit(&mut t2, &tasks_at(1, 1..7), t0);
        assert_eq!(refilled_to(&refill_req(&mut t2, 1, agent_of(1), t0), 1), vec![1, 2, 3, 4, 5, 6, 100]);
    }

    #[test]
    fn a_lower_level_counts_while_it_took_tasks_within_the_registration_window() {
        let t0 = Instant::now();
        let mut t2 = two_hosts(t0);
        // Level 2's only task goes to host 1's rings: tier 2 holds no level 2, but a host
        // may be running it.
        submit(&mut t2, &[task(100, 2, 0)], t0);
        assert_eq!(refilled_to(&refill_req(&mut t2, 1, agent_of(1), t0), 1), vec![100]);
        submit(&mut t2, &tasks_at(1, 1..7), t0 + MS);
        assert_eq!(refilled_to(&refill_req(&mut t2, 2, agent_of(2), t0 + MS), 2), vec![1, 2, 3]);
        // Past the window (1 s here) since level 2's last task came, level 1 is all there is.
        let later = t0 + 1001 * MS;
        assert_eq!(refilled_to(&refill_req(&mut t2, 1, agent_of(1), later), 1), vec![4, 5, 6]);
        submit(&mut t2, &tasks_at(1, 7..17), later);
        assert_eq!(refilled_to(&refill_req(&mut t2, 2, agent_of(2), later), 2), (7..15).collect::<Vec<_>>());
    }

    #[test]
    fn a_share_of_whole_batches_ends_with_a_short_one() {
        let t0 = Instant::now();
        let mut t2 = two_hosts(t0);
        submit(&mut t2, &[task(100, 2, 0)], t0);
        for first in (1..33).step_by(MAX_LIST) {
            submit(&mut t2, &tasks_at(1, first..first + MAX_LIST as u32), t0);
        }
        // Half of 32 is one whole batch: the host would wait for the rest of its 40.
        let out = refill_req_with(&mut t2, RefillRequest::new(1, 40), t0);
        let sizes: Vec<usize> = refilled(&out).iter().map(|(_, tids)| tids.len()).collect();
        assert_eq!(sizes, vec![MAX_LIST, 1]);
    }

    #[test]
    fn with_one_level_or_one_host_a_refill_takes_what_it_asks_for() {
        let t0 = Instant::now();
        let mut t2 = tier2(0);
        refill_req(&mut t2, 1, agent_of(1), t0);
        submit(&mut t2, &tasks_at(1, 1..7), t0);
        submit(&mut t2, &tasks_at(2, 101..105), t0);
        // The only host registered: its share is everything.
        assert_eq!(refilled_to(&refill_req(&mut t2, 1, agent_of(1), t0), 1), vec![1, 2, 3, 4, 5, 6, 101, 102]);
        // A second host, and level 2 alone at tier 2: nothing outranks, no share.
        submit(&mut t2, &tasks_at(2, 105..110), t0);
        assert_eq!(refilled_to(&refill_req(&mut t2, 2, agent_of(2), t0), 2), vec![103, 104, 105, 106, 107, 108, 109]);
    }

    #[test]
    fn a_refill_req_that_finds_nothing_waits_one_per_node() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        let agent = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 7171);
        assert_eq!(refill_req(&mut t2, 4, agent, t0), vec![], "parked, no empty REFILL");
        assert_eq!(refill_req(&mut t2, 4, agent, t0 + MS), vec![], "replaced, unanswered");
        let out = submit(&mut t2, &[task(1, 2, 0), task(2, 2, 0)], t0 + 2 * MS);
        let refills: Vec<_> = out.iter().filter(|a| matches!(a, Answer::Refill { .. })).collect();
        assert_eq!(refills.len(), 1);
        let Answer::Refill { to, entries, best } = refills[0] else { unreachable!() };
        assert_eq!((*to, entries.len(), *best), (agent, 2, 0));
        // Expiry: the empty REFILL of version 1.
        refill_req(&mut t2, 4, agent, t0 + 3 * MS);
        let mut out = Vec::new();
        t2.expire(t0 + 13 * MS, &mut out);
        assert_eq!(out, vec![Answer::Refill { to: agent, entries: ArrayVec::new(), best: 0 }]);
        assert_eq!(t2.park_stats().replaced, 1);
    }

    #[test]
    fn only_the_last_refill_batch_carries_best_from_the_newest_entrys_level() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        let agent = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 7171);
        // 16 tasks at level 1; at level 2 one the host can run and one it cannot; one it
        // can run at level 3; one it cannot at level 4.
        let mut tasks: Vec<Task> = (0..16).map(|i| task(i, 1, 0)).collect();
        tasks.extend([task(20, 2, 0), task(21, 2, 0b1000), task(22, 3, 0), task(23, 4, 0b1000)]);
        submit(&mut t2, &tasks[..16], t0);
        submit(&mut t2, &tasks[16..], t0);
        let mut out = Vec::new();
        let msg = Message::RefillReq { node_rsrc: 0b0111, req: RefillRequest::new(4, 18) };
        t2.handle(&msg, agent, t0 + MS, &mut out).unwrap();
        let batches: Vec<(usize, u8)> = out
            .iter()
            .filter_map(|a| match a {
                Answer::Refill { entries, best, .. } => Some((entries.len(), *best)),
                _ => None,
            })
            .collect();
        // The first batch leaves before the search ends: 0. The last lists the level-3
        // task first (newest first): levels 1 and 2 are left out, level 4 is BEST.
        assert_eq!(batches, vec![(16, 0), (2, 4)]);
    }

    #[test]
    fn idle_executors_get_tasks_before_a_refill_parked_earlier() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        let agent = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 7171);
        assert_eq!(refill_req(&mut t2, 1, agent, t0), vec![]);
        assert_eq!(get(&mut t2, exec(1), 1, 0, true, t0 + MS), vec![]);
        assert_eq!(get(&mut t2, exec(2), 1, 0, true, t0 + MS), vec![]);
        // Three tasks: one to each waiting executor, the third to the host's rings.
        let out = submit(&mut t2, &[task(1, 2, 0), task(2, 2, 0), task(3, 2, 0)], t0 + 2 * MS);
        assert_eq!(assigned(&out), vec![(exec(1), 1, 2), (exec(2), 2, 2)]);
        let refilled: Vec<_> = out
            .iter()
            .filter_map(|a| match a {
                Answer::Refill { to, entries, .. } => {
                    Some((*to, entries.iter().map(|e| e.task.tid()).collect::<Vec<_>>()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(refilled, vec![(agent, vec![3])]);
        assert_eq!(t2.park_stats().answered_from_park, 3);
    }

    #[test]
    fn a_new_jobs_prefetch_is_split_evenly_over_the_parked_hosts() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        // Two hosts with two executors waiting each, asking for 10; a third host only
        // prefetches, asking for 3.
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(1, 10).with_waiting(2), t0), vec![]);
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(2, 10).with_waiting(2), t0), vec![]);
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(3, 3), t0), vec![]);
        let out = submit(&mut t2, &tasks_at(1, 1..17), t0 + MS);
        let (one, two, three) = (refilled_to(&out, 1), refilled_to(&out, 2), refilled_to(&out, 3));
        // The waiters first (tasks 1 to 4), then the 12 left: host 3 takes the 3 it asked
        // for, and hosts 1 and 2 get 5 and 4 of the 9 beyond that, where the first to
        // ask used to take 8 of them.
        assert_eq!((one.len(), two.len(), three.len()), (2 + 5, 2 + 4, 3), "{one:?} {two:?} {three:?}");
        let mut all: Vec<u32> = [one, two, three].concat();
        all.sort_unstable();
        assert_eq!(all, (1..17).collect::<Vec<_>>());
        // Host 1 got its part, so its answer is stamped as one that got what it asked:
        // BEST 1, host 2's part still at tier 2 then. Host 2's, the last, finds nothing
        // left.
        let last_best = |node: u16| {
            out.iter().rev().find_map(|a| match a {
                Answer::Refill { to, best, .. } if *to == agent_of(node) => Some(*best),
                _ => None,
            })
        };
        assert_eq!((last_best(1), last_best(2)), (Some(1), Some(0)));
        assert_eq!(t2.park_stats().answered_from_park, 3);
    }

    #[test]
    fn a_host_whose_part_of_the_prefetch_is_nothing_takes_nothing_even_when_served_first() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        // Host 1 parks first and asks for 4 beyond its waiter, host 2 for 1 beyond its.
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(1, 5).with_waiting(1), t0), vec![]);
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(2, 2).with_waiting(1), t0), vec![]);
        // Three tasks: one per waiter, and the one left is host 2's part (the smaller
        // want is served first in the split), though host 1 is served first.
        let out = submit(&mut t2, &tasks_at(1, 1..4), t0 + MS);
        assert_eq!((refilled_to(&out, 1), refilled_to(&out, 2)), (vec![1], vec![2, 3]));
    }

    #[test]
    fn when_more_hosts_ask_than_tasks_are_queued_the_oldest_get_one_each() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        for node in 1..=4 {
            assert_eq!(refill_req_with(&mut t2, RefillRequest::new(node, 8), t0), vec![]);
        }
        // Two tasks for four hosts that only prefetch: one each to the two oldest
        // requests, where the oldest used to take both; the other two stay parked.
        let out = submit(&mut t2, &tasks_at(1, 1..3), t0 + MS);
        let got: Vec<Vec<u32>> = (1..=4).map(|n| refilled_to(&out, n)).collect();
        assert_eq!(got, [vec![1], vec![2], vec![], vec![]]);
        // And the next two go to those two.
        let out = submit(&mut t2, &tasks_at(1, 3..5), t0 + 2 * MS);
        let got: Vec<Vec<u32>> = (1..=4).map(|n| refilled_to(&out, n)).collect();
        assert_eq!(got, [vec![], vec![], vec![3], vec![4]]);
    }

    #[test]
    fn a_waiting_get_task_right_after_its_hosts_refill_is_not_parked() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        let agent = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 7171);
        submit(&mut t2, &[task(1, 2, 0)], t0);
        let out = refill_req(&mut t2, 1, agent, t0 + MS);
        assert!(matches!(&out[..], [Answer::Refill { entries, .. }] if entries.len() == 1));
        // Node 1's executor passed its empty rings while that REFILL was on its way: NOOP
        // at once, so it asks its host again.
        let out = get(&mut t2, exec(1), 1, 0, true, t0 + MS + REFILL_GRACE / 2);
        assert_eq!(out, vec![Answer::Noop { to: exec(1), who: Requester::new(1, 1, 1), best: 0 }]);
        // Later, or from another node, it waits as usual.
        assert_eq!(get(&mut t2, exec(1), 2, 0, true, t0 + MS + REFILL_GRACE), vec![]);
        let mut out = Vec::new();
        let other = Requester::new(2, 9, 1);
        t2.handle(
            &Message::GetTask { rtrv_prio: 1, exec_rsrc: 0, from: other, wait: true },
            exec(9),
            t0 + MS,
            &mut out,
        )
        .unwrap();
        // It parks, and node 1, sent that task a moment ago, is asked for it back.
        let recall = Answer::Recall { to: agent, exec_rsrc: 0, req: RefillRequest::new(1, 1), best: 0 };
        assert_eq!(out, vec![recall]);
        assert_eq!(t2.park_stats().parked, 2);
    }

    fn waiting_refill_req(t2: &mut Tier2, node: u16, waiting: u8, now: Instant) -> Vec<Answer> {
        refill_req_with(t2, RefillRequest::new(node, 8).with_waiting(waiting), now)
    }

    fn refill_req_with(t2: &mut Tier2, req: RefillRequest, now: Instant) -> Vec<Answer> {
        let mut out = Vec::new();
        t2.handle(&Message::RefillReq { node_rsrc: 0xff, req }, agent_of(req.node()), now, &mut out).unwrap();
        out
    }

    fn agent_of(node: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, node as u8), 7171)
    }

    fn refilled(out: &[Answer]) -> Vec<(SocketAddrV4, Vec<u32>)> {
        out.iter()
            .filter_map(|a| match a {
                Answer::Refill { to, entries, .. } => Some((*to, entries.iter().map(|e| e.task.tid()).collect())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_host_where_executors_wait_is_refilled_before_hosts_that_prefetch() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        // Host 1 parked first, only to prefetch; host 2 parked later with two executors
        // waiting there.
        assert_eq!(refill_req(&mut t2, 1, agent_of(1), t0), vec![]);
        assert_eq!(waiting_refill_req(&mut t2, 2, 2, t0 + MS), vec![]);
        // Host 2 gets the tasks, one per frame (each becomes a waiting executor's ASSIGN
        // there), in tier 2's dequeue order.
        let out = submit(&mut t2, &[task(1, 1, 0), task(2, 1, 0)], t0 + 2 * MS);
        assert_eq!(refilled(&out), vec![(agent_of(2), vec![1]), (agent_of(2), vec![2])]);
        // Host 2's request left with its answer; the next tasks go to host 1, in one frame.
        let out = submit(&mut t2, &[task(3, 1, 0), task(4, 1, 0)], t0 + 3 * MS);
        assert_eq!(refilled(&out), vec![(agent_of(1), vec![4, 3])]);
    }

    #[test]
    fn waiting_hosts_get_their_waiters_tasks_first_and_what_they_asked_beyond_them_last() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        // Host 1 parks with one executor waiting and asks for four tasks; host 2, later,
        // with two waiting, for four; host 3 only prefetches, one task.
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(1, 4).with_waiting(1), t0), vec![]);
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(2, 4).with_waiting(2), t0), vec![]);
        assert_eq!(refill_req_with(&mut t2, RefillRequest::new(3, 1), t0), vec![]);
        // Seven tasks: the three waiting executors' first (task 1 to host 1, 2 and 3 to
        // host 2), then host 3's prefetch (4), then what hosts 1 and 2 asked beyond
        // their waiters, the four left split evenly over the three asking (host 3's one,
        // then 2 of the 3 left to host 2, and 1 to host 1: 5 to host 1, 6 and 7 to host
        // 2, one task per frame). They are sent in that order too: every waiter's frame
        // before any ring's, so host 2's waiters do not wait for the frames of host 1's
        // rings to pass.
        let tasks: Vec<Task> = (1..=7).map(|t| task(t, 1, 0)).collect();
        let out = submit(&mut t2, &tasks, t0 + MS);
        let one = |n: u16, t: u32| (agent_of(n), vec![t]);
        assert_eq!(refilled(&out), vec![one(1, 1), one(2, 2), one(2, 3), one(3, 4), one(1, 5), one(2, 6), one(2, 7)]);
        let s = t2.park_stats();
        assert_eq!((s.answered_from_park, s.waiting), (3, 0));
    }

    #[test]
    fn executors_an_answer_left_waiting_keep_a_request_parked_until_the_agent_asks_again() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        // Three executors wait at host 1 and tier 2 holds one task: answered at once with
        // it, and the two left waiting keep a request here. (The host's program hands the
        // frame to an executor without waking the agent, which may not ask again soon.)
        submit(&mut t2, &[task(1, 1, 0)], t0);
        let out = refill_req_with(&mut t2, RefillRequest::new(1, 5).with_waiting(3), t0 + MS);
        assert_eq!(refilled(&out), vec![(agent_of(1), vec![1])]);
        assert_eq!(t2.park_stats().waiting, 1);
        // Their tasks come as they arrive, one per frame; nothing more is parked.
        let out = submit(&mut t2, &[task(2, 1, 0), task(3, 1, 0), task(4, 1, 0), task(8, 1, 0)], t0 + 2 * MS);
        assert_eq!(refilled(&out), vec![(agent_of(1), vec![2]), (agent_of(1), vec![3])]);
        assert_eq!(t2.park_stats().waiting, 0);
        // From the park likewise: host 9 takes the other two to its rings, host 2 parks
        // for two waiters (and RECALLs one of host 9's), and one task arrives. The waiter
        // left keeps a request, which RECALLs as a request parking for it would.
        assert_eq!(refilled_to(&refill_req(&mut t2, 9, agent_of(9), t0 + 3 * MS), 9), vec![4, 8]);
        let recall = Answer::Recall { to: agent_of(9), exec_rsrc: 0xff, req: RefillRequest::new(9, 1), best: 0 };
        let out = refill_req_with(&mut t2, RefillRequest::new(2, 2).with_waiting(2), t0 + 3 * MS);
        assert_eq!(out, vec![recall]);
        let out = submit(&mut t2, &[task(5, 1, 0)], t0 + 4 * MS);
        assert_eq!(refilled(&out), vec![(agent_of(2), vec![5])]);
        let recalls_to_9 = out.iter().filter(|a| matches!(a, Answer::Recall { to, .. } if *to == agent_of(9)));
        assert_eq!(recalls_to_9.count(), 1);
        assert_eq!(t2.park_stats().waiting, 1, "the other waiter's request");
        // The agent's next REFILL_REQ replaces it, unanswered.
        let out = refill_req_with(&mut t2, RefillRequest::new(2, 4).with_waiting(1), t0 + 5 * MS);
        assert_eq!(out, vec![]);
        assert_eq!(t2.park_stats().waiting, 1);
        let out = submit(&mut t2, &[task(6, 1, 0), task(7, 1, 0)], t0 + 6 * MS);
        assert_eq!(refilled_to(&out, 2), vec![6, 7]);
    }

    #[test]
    fn a_host_where_executors_wait_gets_one_task_per_frame_when_answered_at_once() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        submit(&mut t2, &[task(1, 1, 0), task(2, 1, 0), task(3, 1, 0)], t0);
        // Two executors wait at host 2, which asks for one task each: two frames of one
        // task each, in dequeue order.
        let mut out = Vec::new();
        let msg = Message::RefillReq { node_rsrc: 0xff, req: RefillRequest::new(2, 2).with_waiting(2) };
        t2.handle(&msg, agent_of(2), t0 + MS, &mut out).unwrap();
        assert_eq!(refilled(&out), vec![(agent_of(2), vec![1]), (agent_of(2), vec![2])]);
        // A host that only prefetches gets one frame.
        submit(&mut t2, &[task(4, 1, 0), task(5, 1, 0)], t0 + 2 * MS);
        let out = refill_req(&mut t2, 1, agent_of(1), t0 + 3 * MS);
        assert_eq!(refilled(&out), vec![(agent_of(1), vec![5, 4, 3])]);
        // One executor waits at host 3, whose agent asks for two more for its rings: all
        // three one per frame (each goes to an executor waiting when it arrives).
        submit(&mut t2, &[task(6, 1, 0), task(7, 1, 0), task(8, 1, 0)], t0 + 4 * MS);
        let out = refill_req_with(&mut t2, RefillRequest::new(3, 3).with_waiting(1), t0 + 5 * MS);
        assert_eq!(refilled(&out), vec![(agent_of(3), vec![6]), (agent_of(3), vec![7]), (agent_of(3), vec![8])]);
    }

    #[test]
    fn a_host_parking_with_executors_waiting_recalls_what_another_host_was_just_sent() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        submit(&mut t2, &[task(1, 2, 0), task(2, 2, 0), task(3, 2, 0)], t0);
        let out = refill_req(&mut t2, 1, agent_of(1), t0 + MS);
        assert_eq!(refilled(&out), vec![(agent_of(1), vec![3, 2, 1])]);
        // Host 2 finds nothing with two executors waiting: host 1 is asked for a task
        // back; a host that only prefetches recalls nothing.
        let out = waiting_refill_req(&mut t2, 2, 2, t0 + 2 * MS);
        let recall = Answer::Recall { to: agent_of(1), exec_rsrc: 0xff, req: RefillRequest::new(1, 1), best: 0 };
        assert_eq!(out, vec![recall]);
        assert_eq!(refill_req(&mut t2, 3, agent_of(3), t0 + 3 * MS), vec![]);
        assert_eq!(t2.hint_stats().recalls_sent, 1);
        // Host 2's agent counts a third waiter and replaces its parked request: no second
        // RECALL for the same wait.
        assert_eq!(waiting_refill_req(&mut t2, 2, 3, t0 + 3 * MS), vec![]);
        assert_eq!(t2.hint_stats().recalls_sent, 1);
        // Host 3's parked request only prefetched; the one replacing it says an executor
        // waits: that is the start of a wait, and it recalls.
        let out = waiting_refill_req(&mut t2, 3, 1, t0 + 4 * MS);
        assert!(matches!(out.as_slice(), [Answer::Recall { to, .. }] if *to == agent_of(1)), "{out:?}");
        assert_eq!(t2.hint_stats().recalls_sent, 2);
    }

    #[test]
    fn tasks_sent_to_a_hosts_waiting_executors_are_not_recalled() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        submit(&mut t2, &[task(1, 1, 0), task(2, 1, 0), task(3, 1, 0)], t0);
        // Two executors wait at host 1, whose agent asks for one more for its rings: two
        // tasks go to those executors, one into the rings.
        let out = refill_req_with(&mut t2, RefillRequest::new(1, 3).with_waiting(2), t0 + MS);
        assert_eq!(refilled_to(&out, 1), vec![1, 2, 3]);
        let recalled_from = |out: &[Answer]| -> Vec<SocketAddrV4> {
            out.iter().filter_map(|a| if let Answer::Recall { to, .. } = a { Some(*to) } else { None }).collect()
        };
        // Executors park at hosts 2 and 3: one RECALL, for the task in host 1's rings;
        // the two its executors took are not in its rings to give back.
        assert_eq!(recalled_from(&waiting_refill_req(&mut t2, 2, 1, t0 + 2 * MS)), vec![agent_of(1)]);
        assert_eq!(recalled_from(&waiting_refill_req(&mut t2, 3, 1, t0 + 2 * MS)), vec![]);
        assert_eq!(t2.hint_stats().recalls_sent, 1);
    }

    #[test]
    fn an_executor_parking_recalls_a_task_another_host_was_just_sent_and_gets_it_back() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        let agent = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 7171);
        submit(&mut t2, &[task(1, 2, 0), task(2, 2, 0)], t0);
        let out = refill_req(&mut t2, 1, agent, t0 + MS);
        let Some(Answer::Refill { entries, .. }) = out.first() else { panic!("no REFILL: {out:?}") };
        assert_eq!(entries.len(), 2);
        // An executor of node 2 finds nothing anywhere and parks: node 1 is asked for one
        // task back, for that executor's resources.
        let idle = Requester::new(2, 9, 1);
        let mut out = Vec::new();
        let msg = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0b1, from: idle, wait: true };
        t2.handle(&msg, exec(9), t0 + 2 * MS, &mut out).unwrap();
        let recall = Answer::Recall { to: agent, exec_rsrc: 0b1, req: RefillRequest::new(1, 1), best: 0 };
        assert_eq!(out, vec![recall]);
        assert_eq!(t2.hint_stats().recalls_sent, 1);
        // Node 1's agent RETURNs it: the parked executor gets it at once.
        let back = [entries[entries.len() - 1]];
        let mut out = Vec::new();
        t2.handle(&Message::Return(&back), agent, t0 + 3 * MS, &mut out).unwrap();
        assert_eq!(assigned(&out), vec![(exec(9), back[0].task.tid(), 0)]);
        // A second idle executor: one more task to recall from that REFILL, then none.
        let mut out = Vec::new();
        let msg = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0, from: Requester::new(2, 10, 1), wait: true };
        t2.handle(&msg, exec(10), t0 + 4 * MS, &mut out).unwrap();
        assert_eq!(out.len(), 1, "{out:?}");
        let mut out = Vec::new();
        let msg = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0, from: Requester::new(2, 11, 1), wait: true };
        t2.handle(&msg, exec(11), t0 + 4 * MS, &mut out).unwrap();
        assert_eq!(out, vec![], "both tasks of that REFILL were recalled once each");
        assert_eq!(t2.hint_stats().recalls_sent, 2);
    }

    #[test]
    fn a_refill_of_k_tasks_excuses_at_most_k_get_tasks_from_parking() {
        let t0 = Instant::now();
        let mut t2 = tier2(8);
        let agent = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 7171);
        submit(&mut t2, &[task(1, 2, 0), task(2, 2, 0)], t0);
        let out = refill_req(&mut t2, 1, agent, t0 + MS);
        assert!(matches!(&out[..], [Answer::Refill { entries, .. }] if entries.len() == 2));
        // Two tasks went to node 1's rings: two of its executors that missed them are
        // sent back there; a third is idle, and waits here.
        let noop = |port, seq| vec![Answer::Noop { to: exec(port), who: Requester::new(1, port, seq), best: 0 }];
        assert_eq!(get(&mut t2, exec(1), 1, 0, true, t0 + 2 * MS), noop(1, 1));
        assert_eq!(get(&mut t2, exec(2), 1, 0, true, t0 + 2 * MS), noop(2, 1));
        assert_eq!(get(&mut t2, exec(1), 2, 0, true, t0 + 3 * MS), vec![], "parked");
        assert_eq!(t2.park_stats().parked, 1);
    }

    #[test]
    fn registered_hosts_get_a_hint_when_a_level_turns_non_empty() {
        let t0 = Instant::now();
        let mut t2 = tier2(0);
        let agent = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 1), 7171);
        let out = refill_req(&mut t2, 4, agent, t0);
        assert_eq!(out, vec![Answer::Refill { to: agent, entries: ArrayVec::new(), best: 0 }], "no parking");
        let hints =
            |out: &[Answer]| out.iter().filter(|a| matches!(a, Answer::Hint { .. })).cloned().collect::<Vec<_>>();
        let out = submit(&mut t2, &[task(1, 3, 0)], t0 + MS);
        assert_eq!(hints(&out), vec![Answer::Hint { to: agent, best: 3 }]);
        assert!(hints(&submit(&mut t2, &[task(2, 3, 0)], t0 + 2 * MS)).is_empty(), "level 3 was set already");
        assert_eq!(hints(&submit(&mut t2, &[task(3, 1, 0)], t0 + 3 * MS)), vec![Answer::Hint { to: agent, best: 1 }]);
        // BEST on answers follows the queues: level 1 drained, level 3 holds two.
        let out = get(&mut t2, exec(1), 1, 0, false, t0 + 4 * MS);
        assert_eq!(assigned(&out), vec![(exec(1), 3, 3)]);
        // Registration lapses.
        assert!(hints(&submit(&mut t2, &[task(4, 1, 0)], t0 + 2000 * MS)).is_empty());
        assert_eq!(t2.hint_stats().hints_sent, 2);
    }

    #[test]
    fn a_level_change_hints_at_most_as_many_hosts_as_it_brought_tasks_in_turn() {
        let t0 = Instant::now();
        let s = Scheduler::new(QueueConfig { capacity: 64, ..QueueConfig::default() }).unwrap();
        let wait = WaitConfig {
            park_for: 10 * MS,
            max_parked: 0,
            hint_register: 1000 * MS,
            hint_fanout: 3,
            ..WaitConfig::default()
        };
        let mut t2 = Tier2::new(s, wait);
        let agent = |node: u16| SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, node as u8), 7171);
        for node in 1..=5 {
            refill_req(&mut t2, node, agent(node), t0);
        }
        let hinted = |out: &[Answer]| {
            out.iter()
                .filter_map(|a| match a {
                    Answer::Hint { to, .. } => Some(to.ip().octets()[3] as u16),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let drain = |t2: &mut Tier2, n: usize, at: Instant| {
            for seq in 0..n as u32 {
                get(t2, exec(1), seq, 0, false, at);
            }
        };
        // One task: one host. Two: two, the next in node order.
        assert_eq!(hinted(&submit(&mut t2, &[task(1, 2, 0)], t0 + MS)), vec![1]);
        drain(&mut t2, 1, t0 + MS);
        assert_eq!(hinted(&submit(&mut t2, &[task(2, 2, 0), task(3, 2, 0)], t0 + 2 * MS)), vec![2, 3]);
        drain(&mut t2, 2, t0 + 2 * MS);
        // Eight tasks: the fan-out (3), wrapping round to node 1.
        let eight: Vec<Task> = (10..18).map(|i| task(i, 2, 0)).collect();
        assert_eq!(hinted(&submit(&mut t2, &eight, t0 + 3 * MS)), vec![4, 5, 1]);
        drain(&mut t2, 8, t0 + 3 * MS);
        // Node 2's registration lapses: it is skipped and forgotten.
        refill_req(&mut t2, 3, agent(3), t0 + 900 * MS);
        refill_req(&mut t2, 4, agent(4), t0 + 900 * MS);
        let out = submit(&mut t2, &[task(20, 2, 0), task(21, 2, 0)], t0 + 1500 * MS);
        assert_eq!(hinted(&out), vec![3, 4]);
        assert_eq!(t2.hint_stats().hints_sent, 8);
        assert_eq!(t2.hint_stats().registered_hosts, 4, "node 2 forgotten; 5 and 1 lapsed too, not met yet");
    }
}

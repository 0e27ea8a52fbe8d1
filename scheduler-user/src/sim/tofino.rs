//! Tier 2 as a switch runs it: the software switch's own tier-2 layer
//! ([`Tier2`](crate::switch::tier2::Tier2): the queue pipeline, unchanged, with BEST
//! stamps, HINT and parked requests around it) behind a model of the hardware.
//!
//! - A pipeline budget: at most `passes_per_sec` passes a second, whatever the pass (a
//!   new packet, a recirculation, a REPAIR, a parked request run again). A message is
//!   handled when the pipeline is free and holds it for as many pass slots as the
//!   pipeline made for it (counted by the pipeline's own `QueueStats`), so
//!   recirculations take bandwidth from new packets.
//! - Its answers leave `pass_ns` per pass after it started (a recirculation returns to
//!   the ingress under a microsecond and goes before new packets).
//! - New packets wait in a bounded ingress buffer; a packet that finds it full is
//!   dropped (its sender's timeout resends it).
//! - A parked request that expires costs one pass for its answer (a Tofino would need a
//!   generated packet to send it).
//! - `max_parked` 0 and `hints` off is the Tofino as bolt.p4 builds it (p4/README.md,
//!   "Protocol version 2 on a Tofino"): no park table, no HINT, BEST on every answer.
//! - With `thread` set, a software switch's thread as measured in a testbed run
//!   (`switch::ThreadStats`) instead of a pipeline: a message holds it for a drawn
//!   handling time rather than its passes, then its answers are sent one after another,
//!   each for a sending time drawn for that datagram, and each leaves when its own send
//!   ends. Messages that queued while it was busy are taken up to `batch` at a
//!   time, as its receive takes them, each batch after a drawn resumption: the thread's
//!   way back to its socket, where it is most often preempted.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use arrayvec::ArrayVec;
use scheduler_common::{Entry, JobRef, Message, Op, RefillRequest, Requester, Task, MAX_LIST};
use serde::Serialize;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::clock::Nanos;
use super::executors::Draw;
use crate::queue::{QueueConfig, QueueStats, Scheduler};
use crate::switch::{Answer, HintStats, ParkStats, Tier2, WaitConfig};

#[derive(Clone, Debug, Serialize)]
pub struct TofinoParams {
    /// Pipeline passes per second (new packets and recirculations together).
    pub passes_per_sec: f64,
    /// Latency of one pass (ingress to egress, or back to ingress when recirculated).
    pub pass_ns: Nanos,
    /// Packets the ingress buffer holds before it drops.
    pub ingress_packets: usize,
    /// Entries per priority level of the queue registers.
    pub queue_capacity: u32,
    pub priorities: u8,
    /// Requests (GET_TASK with WAIT, REFILL_REQ) the park table holds; 0: none parks.
    pub max_parked: usize,
    /// How long a request stays parked (the software switch's `--park-ms`).
    pub park_ns: Nanos,
    /// Whether registered hosts are sent HINT when a level turns non-empty.
    pub hints: bool,
    /// HINTs per level change, at most (`WaitConfig::hint_fanout`).
    pub hint_fanout: usize,
    /// A software switch's measured thread instead of a pipeline's passes (None: a
    /// pipeline).
    pub thread: Option<SwitchThread>,
}

/// What the software switch's thread spends, drawn per message and per answer.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchThread {
    /// Handling one message (decoding and the tier-2 work, without sending), whatever
    /// its op.
    pub handle: Draw,
    /// The handling of the ops measured on their own (by `Op::name`), drawn for their
    /// messages instead.
    pub handle_by_op: Vec<(&'static str, Draw)>,
    /// Sending one datagram.
    pub send: Draw,
    /// From the end of a batch to the receive returning with messages that queued during
    /// it (None: at once, for runs that did not measure it).
    pub resume: Option<Draw>,
    /// Messages one receive takes (`SwitchConfig::batch`).
    pub batch: usize,
    /// The machine's slow spells its costs are drawn through (`SimConfig::spells`).
    #[serde(skip)]
    pub spells: std::sync::Arc<super::spells::Spells>,
}

impl SwitchThread {
    /// A thread with the software switch's receive batch and no resumption time.
    pub fn new(handle: Draw, send: Draw) -> SwitchThread {
        SwitchThread {
            handle,
            handle_by_op: Vec::new(),
            send,
            resume: None,
            batch: crate::switch::SwitchConfig::default().batch,
            spells: Default::default(),
        }
    }

    /// What handling a message of `op` is drawn from.
    pub fn handling(&self, op: Op) -> &Draw {
        self.handle_by_op.iter().find(|(name, _)| *name == op.name()).map_or(&self.handle, |(_, d)| d)
    }
}

impl TofinoParams {
    /// The thesis's measured rate: 23 M scheduling decisions a second on one pipeline
    /// (§5.2), each a single pass; a recirculation under a microsecond (§3.3). Parking
    /// and HINT as the software switch does them, with room for every executor.
    pub fn thesis() -> TofinoParams {
        let wait = WaitConfig::default();
        TofinoParams {
            passes_per_sec: 23e6,
            pass_ns: 500,
            ingress_packets: 100_000,
            queue_capacity: 1 << 17,
            priorities: 4,
            max_parked: 1 << 24,
            park_ns: wait.park_for.as_nanos() as Nanos,
            hints: true,
            hint_fanout: wait.hint_fanout,
            thread: None,
        }
    }

    /// The software switch of the testbed: one thread, 270 K packets a second measured
    /// with a single-threaded load generator (docs/benchmarks.md), its default park table.
    pub fn software_switch() -> TofinoParams {
        let wait = WaitConfig::default();
        TofinoParams { passes_per_sec: 270e3, pass_ns: 1_000, max_parked: wait.max_parked, ..TofinoParams::thesis() }
    }

    /// bolt.p4 as built: no park table, no HINT.
    pub fn as_built(mut self) -> TofinoParams {
        self.max_parked = 0;
        self.hints = false;
        self
    }
}

/// A message on its way into tier 2, owned (the wire form borrows its lists).
/// Lists inline, as the switch's `Answer`: boxing them would allocate per packet.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Request {
    Submit { job: JobRef, tasks: ArrayVec<Task, MAX_LIST> },
    GetTask { from: Requester, wait: bool },
    RefillReq { req: RefillRequest },
    Return { entries: ArrayVec<Entry, MAX_LIST> },
}

impl Request {
    pub fn message(&self) -> Message<'_> {
        match self {
            Request::Submit { job, tasks } => Message::Submit { job: *job, flags: 0, tasks },
            Request::GetTask { from, wait } => {
                Message::GetTask { rtrv_prio: 1, exec_rsrc: 0xff, from: *from, wait: *wait }
            }
            Request::RefillReq { req } => Message::RefillReq { node_rsrc: 0xff, req: *req },
            Request::Return { entries } => Message::Return(entries),
        }
    }
}

/// Counters of the model (the pipeline keeps its own [`QueueStats`], the park table and
/// HINT theirs).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TofinoStats {
    pub arrived: u64,
    pub dropped: u64,
    pub passes: u64,
    pub max_ingress: usize,
    /// Messages arrived, by op: SUBMIT, GET_TASK (with WAIT, without), REFILL_REQ, RETURN.
    pub submits: u64,
    pub get_tasks_wait: u64,
    pub get_tasks_no_wait: u64,
    pub refill_reqs: u64,
    pub returns: u64,
    /// Answers sent, by kind.
    pub assigns: u64,
    pub noops: u64,
    pub refills: u64,
    pub empty_refills: u64,
    pub queue_fulls: u64,
    pub hints: u64,
    /// RECALLs sent (switch/recall.rs).
    #[serde(default)]
    pub recalls: u64,
    /// Messages tier 2 does not take (none: the simulator sends only ones it takes).
    pub not_for_switch: u64,
}

pub struct Tofino {
    tier2: Tier2,
    p: TofinoParams,
    /// `Instant` of simulated time 0 (the switch code takes `Instant`s).
    base: Instant,
    /// Time between pass starts, picoseconds (exact at any rate to 1 ps).
    interval_ps: u64,
    /// When the pipeline can start its next pass, picoseconds.
    free_ps: u64,
    ingress: VecDeque<(Nanos, Request, SocketAddrV4)>,
    answers: Vec<Answer>,
    stats: TofinoStats,
    /// Draws of the thread's costs (`TofinoParams::thread`).
    rng: StdRng,
    /// Messages the thread's current receive batch still holds.
    batch_left: usize,
    /// When the thread is back at its socket for the messages queued behind its last
    /// batch (drawn once, when it became due).
    resumes_at: Option<Nanos>,
}

impl Tofino {
    /// `seed` seeds the draws of a software switch's thread costs.
    pub fn new(p: TofinoParams, base: Instant, seed: u64) -> Result<Tofino, String> {
        let config = QueueConfig { capacity: p.queue_capacity, priorities: p.priorities, ..QueueConfig::default() };
        let wait = WaitConfig {
            park_for: Duration::from_nanos(p.park_ns),
            max_parked: p.max_parked,
            hint_register: if p.hints { WaitConfig::default().hint_register } else { Duration::ZERO },
            hint_fanout: p.hint_fanout,
            ..WaitConfig::default()
        };
        let interval_ps = (1e12 / p.passes_per_sec).round().max(1.0) as u64;
        Ok(Tofino {
            tier2: Tier2::new(Scheduler::new(config)?, wait),
            p,
            base,
            interval_ps,
            free_ps: 0,
            ingress: VecDeque::new(),
            answers: Vec::new(),
            stats: TofinoStats::default(),
            rng: StdRng::seed_from_u64(seed),
            batch_left: 0,
            resumes_at: None,
        })
    }

    pub fn queue_stats(&self) -> &QueueStats {
        self.tier2.scheduler().stats()
    }

    pub fn park_stats(&self) -> &ParkStats {
        self.tier2.park_stats()
    }

    pub fn hint_stats(&self) -> HintStats {
        self.tier2.hint_stats()
    }

    pub fn stats(&self) -> &TofinoStats {
        &self.stats
    }

    pub fn params(&self) -> &TofinoParams {
        &self.p
    }

    fn instant(&self, at: Nanos) -> Instant {
        self.base + Duration::from_nanos(at)
    }

    fn nanos(&self, t: Instant) -> Nanos {
        t.saturating_duration_since(self.base).as_nanos() as Nanos
    }

    fn pipeline_passes(&self) -> u64 {
        self.queue_stats().cost.iter().map(|c| c.passes).sum()
    }

    /// Whether nothing is queued or being processed at `now`.
    pub fn idle(&self, now: Nanos) -> bool {
        self.ingress.is_empty() && self.free_ps.div_ceil(1000) <= now
    }

    /// A message arriving at `now`, queued at the ingress. False when the ingress buffer
    /// is full (dropped).
    pub fn arrive(&mut self, now: Nanos, req: Request, src: SocketAddrV4) -> bool {
        self.stats.arrived += 1;
        match &req {
            Request::Submit { .. } => self.stats.submits += 1,
            Request::GetTask { wait: true, .. } => self.stats.get_tasks_wait += 1,
            Request::GetTask { wait: false, .. } => self.stats.get_tasks_no_wait += 1,
            Request::RefillReq { .. } => self.stats.refill_reqs += 1,
            Request::Return { .. } => self.stats.returns += 1,
        }
        if self.ingress.len() >= self.p.ingress_packets {
            self.stats.dropped += 1;
            return false;
        }
        self.ingress.push_back((now, req, src));
        self.stats.max_ingress = self.stats.max_ingress.max(self.ingress.len());
        true
    }

    /// When the message at the ingress's head, which arrived at `arrived`, can start with
    /// the thread free at `free`. A software switch's thread takes a message that queued
    /// while it was busy only after its way back to its socket, unless the message came
    /// in the same receive batch as the one before.
    fn batch_start(&mut self, arrived: Nanos, free: Nanos) -> Nanos {
        let Some((resume, spells)) = self.p.thread.as_ref().and_then(|t| Some((t.resume.as_ref()?, &t.spells))) else {
            return arrived.max(free);
        };
        if self.batch_left > 0 || arrived >= free {
            return arrived.max(free);
        }
        // An expiry handled meanwhile may have kept the thread busy past the drawn return.
        (*self.resumes_at.get_or_insert_with(|| free + spells.draw(resume, free, &mut self.rng))).max(free)
    }

    /// The head message starts at `start`: the first of a new receive batch takes in
    /// every message that had arrived by then, up to the batch's size.
    fn take_into_batch(&mut self, start: Nanos) {
        let Some(t) = &self.p.thread else { return };
        self.resumes_at = None;
        if self.batch_left > 0 {
            self.batch_left -= 1;
            return;
        }
        let arrived = self.ingress.iter().take_while(|r| r.0 <= start).count();
        self.batch_left = arrived.min(t.batch).saturating_sub(1);
    }

    /// Runs every message and park expiry that starts by `now`, in order; what tier 2
    /// sends goes to `out` with the time it leaves. Returns when the next one could
    /// start, if any is pending.
    pub fn run_until(&mut self, now: Nanos, out: &mut Vec<(Nanos, Answer)>) -> Option<Nanos> {
        loop {
            let free = self.free_ps.div_ceil(1000);
            let head = self.ingress.front().map(|r| r.0);
            let packet_at = head.map(|arrived| self.batch_start(arrived, free));
            let expiry_at = self.tier2.next_deadline().map(|t| self.nanos(t).max(free));
            let (start, expiry) = match (packet_at, expiry_at) {
                (None, None) => return None,
                (Some(p), Some(e)) if e <= p => (e, true),
                (Some(p), _) => (p, false),
                (None, Some(e)) => (e, true),
            };
            if start > now {
                return Some(start);
            }
            self.answers.clear();
            let mut op = None;
            let passes = if expiry {
                self.tier2.expire(self.instant(start), &mut self.answers);
                self.answers.len().max(1) as u64
            } else {
                self.take_into_batch(start);
                let (_, req, src) = self.ingress.pop_front().expect("a packet is waiting");
                op = Some(req.message().op());
                let before = self.pipeline_passes();
                let at = self.instant(start);
                if self.tier2.handle(&req.message(), src, at, &mut self.answers).is_err() {
                    self.stats.not_for_switch += 1;
                }
                (self.pipeline_passes() - before).max(1)
            };
            self.stats.passes += passes;
            // When each answer leaves: all at once after the passes, or one after another
            // from the thread's sends, each datagram's send drawn on its own. The
            // measurement is a flush's time over its datagrams, recorded once per datagram.
            // A preemption inside a flush lengthens it once, by its own length: drawn once
            // and given to every datagram of a message, it lengthened a message of eight
            // answers eight times over (docs/benchmarks.md, "A message's answers, each
            // sent in its own time").
            let mut leaves = match &self.p.thread {
                None => {
                    self.free_ps = self.free_ps.max(start * 1000) + passes * self.interval_ps;
                    start + passes * self.p.pass_ns
                }
                Some(t) => {
                    let handling = op.map_or(&t.handle, |op| t.handling(op));
                    start + t.spells.draw(handling, start, &mut self.rng)
                }
            };
            for a in self.answers.drain(..) {
                match &a {
                    Answer::Assign { .. } | Answer::Bundle { .. } => self.stats.assigns += 1,
                    Answer::Noop { .. } => self.stats.noops += 1,
                    Answer::Refill { entries, .. } if entries.is_empty() => self.stats.empty_refills += 1,
                    Answer::Refill { .. } => self.stats.refills += 1,
                    Answer::QueueFull { .. } => self.stats.queue_fulls += 1,
                    Answer::Hint { .. } if !self.p.hints => continue,
                    Answer::Hint { .. } => self.stats.hints += 1,
                    Answer::Recall { .. } => self.stats.recalls += 1,
                }
                if let Some(t) = &self.p.thread {
                    leaves += t.spells.draw(&t.send, leaves, &mut self.rng);
                }
                out.push((leaves, a));
            }
            if self.p.thread.is_some() {
                self.free_ps = leaves * 1000;
            }
        }
    }
}

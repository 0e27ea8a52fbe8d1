//! The event loop: every system's hosts, executors, clients and tier 2 react to events
//! in simulated time. Per executor there is no state beyond its one pending event.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrayvec::ArrayVec;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scheduler_common::maps::{ring_stamp, Tier2Hint, DEFAULT_HINT_TTL_NS};
use scheduler_common::{Entry, JobRef, Op, RefillRequest, Requester, StealBody, Task, MAX_LIST};

use super::baselines::{CloudKon, Sparrow};
use super::clock::{EventQueue, Nanos};
use super::executors::Endpoint;
use super::host::Host;
use super::network::{frame_bytes, Topology};
use super::report::{peak_rss_bytes, Recorder, Report, SwitchReport, Tier1Report};
use super::tofino::{Request, Tofino};
use super::workload::Jobs;
use super::{SimConfig, System};
use crate::agent::hint::local_best;
use crate::agent::policy::hint::{HintObservation, ReturnBelow};
use crate::agent::policy::prefetch::PrefetchSizer;
use crate::agent::policy::recall::recallable;
use crate::agent::policy::steal::{StealAction, StealConfig, Stealer};
use crate::agent::refill::{Action, Outcome, RefillController};
use crate::client::TrackerConfig;
use crate::switch::Answer;

/// Seeds tier 2's own draws apart from the engine's (the same seed would give both
/// the same sequence).
const TOFINO_SEED_SALT: u64 = 0x746f_6669_6e6f;

#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// The next job of the workload falls due.
    Job,
    /// Its client sends a job.
    Send {
        job: u32,
    },
    /// A message reaches tier 2.
    ToSwitch {
        slot: u32,
    },
    /// The pipeline can start its next pass.
    SwitchTick,
    /// An executor is free and asks for work.
    Get {
        exec: u32,
    },
    /// A task reaches an executor, which starts it.
    Start {
        exec: u32,
        tid: u32,
    },
    Noop {
        exec: u32,
    },
    Done {
        exec: u32,
    },
    /// GET_TASK reaches the executor's host (XDP).
    XdpGet {
        exec: u32,
    },
    Refill {
        host: u32,
        slot: u32,
    },
    HostWake {
        host: u32,
    },
    /// A HINT reaches a host: tier 2's BEST.
    Hint {
        host: u32,
        best: u8,
    },
    /// A RECALL reaches a host: tier 2 asks for up to `want` prefetched tasks back.
    Recall {
        host: u32,
        want: u8,
    },
    /// A host tries its waiting RECALLs again.
    RecallRetry {
        host: u32,
    },
    /// STEAL messages reach their hosts (one, or a round's batch: `SimConfig::batch_steals`).
    Steals {
        slot: u32,
    },
    /// MATRIX: a client's tasks reach a host.
    Tasks {
        host: u32,
        slot: u32,
    },
    SparrowProbe {
        host: u32,
        job: u32,
    },
    SparrowAsk {
        exec: u32,
        job: u32,
    },
    SparrowAnswer {
        exec: u32,
        tid: u32,
    },
    CloudJob {
        job: u32,
    },
    CloudPull {
        exec: u32,
    },
}

/// A message on its way to tier 2.
/// Lists inline, as the switch's `Answer`: boxing them would allocate per packet.
#[allow(clippy::large_enum_variant)]
enum Inbound {
    Submit {
        client: u32,
        job: u32,
        tids: ArrayVec<u32, MAX_LIST>,
    },
    GetTask {
        exec: u32,
        wait: bool,
    },
    /// `waiting`: executors waiting at the host (the REFILL_REQ's WAITING field).
    RefillReq {
        host: u32,
        want: u8,
        waiting: u8,
    },
    Return {
        host: u32,
        entries: ArrayVec<Entry, MAX_LIST>,
    },
}

/// A STEAL message in flight. A GRANT's entries wait in `World::batches` (`grant`), so
/// that the many PROBEs and LOADs stay small.
#[derive(Clone, Copy)]
struct StealMsg {
    to: u32,
    from: u32,
    op: Op,
    body: StealBody,
    grant: u32,
}

/// Values in flight, named by index so that events stay small; slots are reused.
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    fn new() -> Slab<T> {
        Slab { items: Vec::new(), free: Vec::new() }
    }

    fn put(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                self.items.len() as u32 - 1
            }
        }
    }

    fn take(&mut self, i: u32) -> T {
        self.free.push(i);
        self.items[i as usize].take().expect("a slot is taken once")
    }
}

const NONE: u32 = u32::MAX;

pub struct World<'a> {
    cfg: &'a SimConfig,
    q: EventQueue,
    topo: Topology,
    jobs: Jobs,
    next_job: usize,
    per_host: u32,
    hosts: Vec<Host>,
    tofino: Option<Tofino>,
    switch_tick: Nanos,
    answers: Vec<(Nanos, Answer)>,
    inbound: Slab<Inbound>,
    batches: Slab<ArrayVec<Entry, MAX_LIST>>,
    /// STEAL messages that reach their hosts at one instant, in the order sent.
    deliveries: Slab<Vec<StealMsg>>,
    /// Emptied delivery lists, reused.
    spare_deliveries: Vec<Vec<StealMsg>>,
    /// Batched steals: the STEAL messages the current event sent, with their arrival
    /// times, scheduled when it ends (`flush_steals`).
    outbox: Vec<(Nanos, StealMsg)>,
    /// STEAL messages delivered.
    steal_messages: u64,
    sparrow: Option<Sparrow>,
    cloudkon: Option<CloudKon>,
    rng: StdRng,
    rec: Recorder,
    tasks_run: u64,
    /// `Instant` the policies see at simulated time 0 (they only take differences).
    base: Instant,
    scratch: Vec<StealAction<u32>>,
    /// Pipeline passes when the measured window began and ended.
    window_passes: (Option<u64>, Option<u64>),
    /// The client library's retries: after a QUEUE_FULL (its first back-off) and after
    /// a SUBMIT that got no answer (its task timeout).
    queue_full_retry: Nanos,
    lost_submit_retry: Nanos,
    /// Every task's start, when `record_starts`.
    starts: Vec<(u32, u32, Nanos)>,
    /// Jobs sent after they fell due (their client's lateness, a stall), and when.
    sent_late: HashMap<u32, Nanos>,
    /// Each client's latest send: its jobs go in order.
    client_sent: Vec<Nanos>,
}

fn task(tid: u32, prio: u8) -> Task {
    let mut t = Task { prio, ..Task::default() };
    t.set_tid(tid);
    t
}

impl<'a> World<'a> {
    pub fn new(cfg: &'a SimConfig) -> anyhow::Result<World<'a>> {
        let per_host = cfg.executors_per_host.max(1);
        let host_count = cfg.executors.div_ceil(per_host);
        let jobs = Jobs::generate(&cfg.workload, cfg.executors)?;
        let end = (cfg.workload.seconds() * 1e9) as Nanos;
        let from = (cfg.warmup_s * 1e9) as Nanos;
        let mut rec = Recorder::new(from, end);
        for j in &jobs.jobs {
            if rec.in_window(j.at) {
                rec.submitted(j.tasks as u64);
            }
        }
        let levels = cfg.tofino.priorities;
        let base = Instant::now();
        let all: Arc<[u32]> = (0..host_count).collect::<Vec<_>>().into();
        let hosts = (0..host_count)
            .map(|h| {
                let mut host = Host::new(levels);
                match cfg.system {
                    System::TwoLevel => {
                        host.refill = Some(RefillController::new(cfg.refill.clone(), cfg.ring_capacity, levels));
                        // Without a notice delay (`PrefetchSizer::with_notice`): this
                        // agent steps on every GET_TASK at its host, where `bolt agent`
                        // hears of a drain up to one XDP event interval late.
                        host.sizer = Some(PrefetchSizer::new(levels, cfg.ring_capacity, cfg.refill.low_watermark));
                    }
                    System::Matrix => {
                        let steal = StealConfig::new(h as u16);
                        let seed = cfg.seed ^ (h as u64).wrapping_mul(0x9E37_79B9);
                        host.stealer = Some(Stealer::among(steal, all.clone(), Some(h as usize), seed));
                    }
                    _ => {}
                }
                host
            })
            .collect();
        let tofino = match cfg.system {
            System::OneLevel | System::TwoLevel => {
                Some(Tofino::new(cfg.tofino.clone(), base, cfg.seed ^ TOFINO_SEED_SALT).map_err(anyhow::Error::msg)?)
            }
            _ => None,
        };
        let sparrow = (cfg.system == System::Sparrow).then(|| {
            let mut s = Sparrow::new(cfg.sparrow.clone(), &jobs);
            s.ensure_hosts(host_count as usize);
            s
        });
        let client = TrackerConfig::new(0);
        let cloudkon = (cfg.system == System::Cloudkon).then(|| CloudKon::new(cfg.cloudkon.clone()));
        Ok(World {
            cfg,
            q: EventQueue::new(),
            topo: Topology::new(cfg.net.clone(), host_count),
            jobs,
            next_job: 0,
            per_host,
            hosts,
            tofino,
            switch_tick: Nanos::MAX,
            answers: Vec::new(),
            inbound: Slab::new(),
            batches: Slab::new(),
            deliveries: Slab::new(),
            spare_deliveries: Vec::new(),
            outbox: Vec::new(),
            steal_messages: 0,
            sparrow,
            cloudkon,
            rng: StdRng::seed_from_u64(cfg.seed),
            rec,
            tasks_run: 0,
            base,
            scratch: Vec::new(),
            window_passes: (None, None),
            queue_full_retry: client.queue_full_backoff.as_nanos() as Nanos,
            lost_submit_retry: client.task_timeout.as_nanos() as Nanos,
            starts: Vec::new(),
            sent_late: HashMap::new(),
            client_sent: vec![0; cfg.workload.clients() as usize],
        })
    }

    fn passes(&self) -> u64 {
        self.tofino.as_ref().map_or(0, |t| t.stats().passes)
    }

    fn instant(&self) -> Instant {
        self.base + Duration::from_nanos(self.q.now())
    }

    fn host_of(&self, exec: u32) -> u32 {
        exec / self.per_host
    }

    fn client_host(&self, client: u32) -> u32 {
        // Clients sit on hosts spread over the racks.
        (client.wrapping_mul(2_654_435_761) >> 7) % self.topo.hosts
    }

    /// Runs to the end of the workload plus the drain time; returns the report.
    pub fn run(mut self, progress: Option<&indicatif::ProgressBar>) -> Report {
        let wall = Instant::now();
        if let Some(first) = self.jobs.jobs.first() {
            self.q.at(first.at, Event::Job);
        }
        // Every host's agent takes its first step when the run starts.
        for host in 0..self.topo.hosts {
            self.hosts[host as usize].wake = 0;
            self.q.at(0, Event::HostWake { host });
        }
        for exec in 0..self.cfg.executors {
            let at = match self.cfg.exec.start_spread_ns {
                0 => 0,
                spread => self.rng.gen_range(0..spread),
            };
            self.q.at(at, Event::Get { exec });
        }
        let stop = self.rec.until + (self.cfg.drain_s * 1e9) as Nanos;
        let mut stalls = self.cfg.stalls.iter().copied().peekable();
        while let Some(event) = self.q.pop() {
            let now = self.q.now();
            if now > stop {
                break;
            }
            // The machine stopped: what was due happens when it runs again, in order.
            while stalls.next_if(|&(_, to)| to <= now).is_some() {}
            if let Some(&(from, to)) = stalls.peek() {
                if from <= now {
                    self.q.at(to, event);
                    continue;
                }
            }
            if self.window_passes.0.is_none() && now >= self.rec.from {
                self.window_passes.0 = Some(self.passes());
            }
            if self.window_passes.1.is_none() && now >= self.rec.until {
                self.window_passes.1 = Some(self.passes());
            }
            self.handle(event);
            self.flush_steals();
            if self.q.processed() & 0xFFFF == 0 {
                if let Some(pb) = progress {
                    pb.set_position(now / 1_000_000);
                }
                if now >= self.rec.until && self.rec.started == self.rec.expected {
                    break;
                }
            }
        }
        self.report(wall.elapsed().as_secs_f64())
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Job => self.job(),
            Event::Send { job } => self.send(job),
            Event::ToSwitch { slot } => self.arrive_at_switch(slot),
            // A tick superseded by an earlier one (which scheduled its own successor) is
            // stale: running it would start a second chain of ticks.
            Event::SwitchTick if self.switch_tick <= self.q.now() => {
                self.switch_tick = Nanos::MAX;
                self.run_switch();
            }
            Event::SwitchTick => {}
            Event::Get { exec } => self.get(exec),
            Event::Start { exec, tid } => self.start(exec, tid),
            Event::Noop { exec } => self.q.after(self.cfg.exec.noop_backoff_ns, Event::Get { exec }),
            Event::Done { exec } => {
                self.tasks_run += 1;
                self.get(exec)
            }
            Event::XdpGet { exec } => self.xdp_get(exec),
            Event::Refill { host, slot } => self.refill_arrives(host, slot),
            Event::HostWake { host } => {
                if self.hosts[host as usize].wake <= self.q.now() {
                    self.hosts[host as usize].wake = Nanos::MAX;
                    self.host_poll(host);
                }
            }
            Event::Hint { host, best } => {
                let now = self.q.now();
                self.stamp_best(host, now, best);
                // A HINT wakes the agent and runs its refill step at once, as in `bolt agent`.
                if self.cfg.system == System::TwoLevel {
                    self.host_poll(host);
                }
            }
            Event::Recall { host, want } => self.recall_step(host, Some(want)),
            Event::RecallRetry { host } => {
                if self.hosts[host as usize].recall_retry <= self.q.now() {
                    self.hosts[host as usize].recall_retry = Nanos::MAX;
                    self.recall_step(host, None);
                }
            }
            Event::Steals { slot } => {
                let mut msgs = self.deliveries.take(slot);
                for &m in &msgs {
                    self.steal_arrives(m);
                }
                msgs.clear();
                self.spare_deliveries.push(msgs);
            }
            Event::Tasks { host, slot } => {
                let entries = self.batches.take(slot);
                for e in entries {
                    self.hosts[host as usize].push(e);
                }
                self.host_poll(host);
            }
            Event::SparrowProbe { host, job } => self.sparrow_probe(host, job),
            Event::SparrowAsk { exec, job } => self.sparrow_ask(exec, job),
            Event::SparrowAnswer { exec, tid } => {
                if tid == NONE {
                    self.get(exec);
                } else {
                    self.start(exec, tid);
                }
            }
            Event::CloudJob { job } => self.cloud_job(job),
            Event::CloudPull { exec } => {
                let ck = self.cloudkon.as_mut().expect("CloudKon run");
                if let Some(tid) = ck.pull(exec) {
                    let half = ck.half_latency();
                    self.q.after(half, Event::Start { exec, tid });
                }
            }
        }
    }

    // ---- clients ----

    fn job(&mut self) {
        let job = self.next_job as u32;
        self.next_job += 1;
        if let Some(next) = self.jobs.jobs.get(self.next_job) {
            self.q.at(next.at, Event::Job);
        }
        // The client's timer and thread send it a little late, and never before the
        // same client's previous job.
        let now = self.q.now();
        let client = self.jobs.jobs[job as usize].client as usize;
        let late = self.cfg.spells.draw(&self.cfg.client_late, now, &mut self.rng);
        let at = (now + late).max(self.client_sent[client]);
        if at > now {
            self.client_sent[client] = at;
            self.q.at(at, Event::Send { job });
        } else {
            self.send(job);
        }
    }

    fn send(&mut self, job: u32) {
        let j = self.jobs.jobs[job as usize];
        self.client_sent[j.client as usize] = self.client_sent[j.client as usize].max(self.q.now());
        // A job sent late (by its client, or held up by a stall) has its tasks' delays
        // counted from the send, as the testbed's client records its first send.
        if self.q.now() > j.at {
            self.sent_late.insert(job, self.q.now());
        }
        let from = self.client_host(j.client);
        match self.cfg.system {
            System::OneLevel | System::TwoLevel => {
                let mut tid = j.first;
                while tid < j.first + j.tasks {
                    let n = (j.first + j.tasks - tid).min(MAX_LIST as u32);
                    let tids = (tid..tid + n).collect();
                    let slot = self.inbound.put(Inbound::Submit { client: j.client, job, tids });
                    self.q.after(self.topo.host_switch(frame_bytes(n as usize)), Event::ToSwitch { slot });
                    tid += n;
                }
            }
            System::Matrix => {
                // A MATRIX client submits each job to a scheduler (host) of its choice.
                let host = self.rng.gen_range(0..self.topo.hosts);
                let mut tid = j.first;
                while tid < j.first + j.tasks {
                    let n = (j.first + j.tasks - tid).min(MAX_LIST as u32);
                    let entries = (tid..tid + n).map(|t| self.entry(j.client, job, t, j.prio)).collect();
                    let slot = self.batches.put(entries);
                    let delay = self.topo.host_host(from, host, frame_bytes(n as usize));
                    self.q.after(delay, Event::Tasks { host, slot });
                    tid += n;
                }
            }
            System::Sparrow => {
                let sp = self.sparrow.as_ref().expect("Sparrow run");
                let probes = j.tasks as usize * sp.params.probes_per_task as usize;
                for _ in 0..probes {
                    let host = self.rng.gen_range(0..self.topo.hosts);
                    let delay = self.topo.host_host(from, host, frame_bytes(0));
                    self.q.after(delay, Event::SparrowProbe { host, job });
                }
            }
            System::Cloudkon => {
                let half = self.cloudkon.as_ref().expect("CloudKon run").half_latency();
                self.q.after(half, Event::CloudJob { job });
            }
        }
    }

    /// The entry of task `tid` as its client submitted it.
    fn entry_of(&self, tid: u32) -> Entry {
        let job = self.jobs.job_index(tid);
        let j = self.jobs.jobs[job];
        self.entry(j.client, job as u32, tid, j.prio)
    }

    fn entry(&self, client: u32, job: u32, tid: u32, prio: u8) -> Entry {
        let addr = Endpoint::Client(client).addr();
        Entry::new(client, job, task(tid, prio), addr.ip().octets(), addr.port())
    }

    // ---- tier 2 ----

    fn arrive_at_switch(&mut self, slot: u32) {
        let now = self.q.now();
        let inbound = self.inbound.take(slot);
        let (req, src) = match &inbound {
            Inbound::Submit { client, job, tids } => {
                let prio = self.jobs.jobs[*job as usize].prio;
                let tasks = tids.iter().map(|&t| task(t, prio)).collect();
                (Request::Submit { job: JobRef::new(*client, *job), tasks }, Endpoint::Client(*client).addr())
            }
            Inbound::GetTask { exec, wait } => {
                let from = Requester::new(self.node_of(self.host_of(*exec)), *exec as u16, 0);
                (Request::GetTask { from, wait: *wait }, Endpoint::Executor(*exec).addr())
            }
            Inbound::RefillReq { host, want, waiting } => {
                let req = RefillRequest::new(self.node_of(*host), *want).with_waiting(*waiting);
                (Request::RefillReq { req }, Endpoint::Host(*host).addr())
            }
            Inbound::Return { host, entries } => {
                (Request::Return { entries: entries.clone() }, Endpoint::Host(*host).addr())
            }
        };
        let tofino = self.tofino.as_mut().expect("a Bolt run has tier 2");
        // A message that finds tier 2's thread idle waits for it to run; those behind it
        // wait in the ingress.
        let ready = if tofino.idle(now) {
            now + self.cfg.spells.draw(&self.cfg.switch_cpu_wait, now, &mut self.rng)
        } else {
            now
        };
        if !tofino.arrive(ready, req, src) {
            // Dropped at the ingress: the sender's timeout sends it again.
            match inbound {
                Inbound::Submit { .. } | Inbound::Return { .. } => {
                    let slot = self.inbound.put(inbound);
                    self.q.after(self.lost_submit_retry, Event::ToSwitch { slot });
                }
                Inbound::GetTask { exec, .. } => self.q.after(self.cfg.exec.get_timeout_ns, Event::Get { exec }),
                // The refill controller's answer timeout resends it.
                Inbound::RefillReq { .. } => {}
            }
        }
        self.run_switch();
    }

    /// The node id a host's messages carry (16 bits on the wire).
    fn node_of(&self, host: u32) -> u16 {
        host as u16
    }

    fn run_switch(&mut self) {
        let now = self.q.now();
        let tofino = self.tofino.as_mut().expect("a Bolt run has tier 2");
        let mut answers = std::mem::take(&mut self.answers);
        let next = tofino.run_until(now, &mut answers);
        for (at, a) in answers.drain(..) {
            self.depart(at, a);
        }
        self.answers = answers;
        if let Some(t) = next {
            if t < self.switch_tick {
                self.switch_tick = t;
                self.q.at(t, Event::SwitchTick);
            }
        }
    }

    /// Records the BEST stamp of a tier-2 answer crossing host `h`'s XDP program at `at`
    /// (a newer stamp already read stays).
    fn stamp_best(&mut self, h: u32, at: Nanos, best: u8) {
        let host = &mut self.hosts[h as usize];
        if at >= host.hint.read_at_ns() {
            host.hint = Tier2Hint::new(at, best);
        }
    }

    /// The way of a tier-2 answer of `bytes` to a host, after it leaves. A software
    /// switch's measured send already holds it: on the testbed's veths the kernel
    /// delivers a datagram into its receiver's socket inside the switch's `sendmmsg`
    /// (the switch's timeline has ASSIGNs reach executors before their flush returns).
    fn switch_to_host(&self, bytes: u32) -> Nanos {
        if self.cfg.tofino.thread.is_some() {
            0
        } else {
            self.topo.host_switch(bytes)
        }
    }

    fn depart(&mut self, at: Nanos, a: Answer) {
        let Some(endpoint) = Endpoint::of(a.to()) else { return };
        match (a, endpoint) {
            (Answer::Assign { entry, best, .. }, Endpoint::Executor(exec)) => {
                let arrives = at + self.switch_to_host(frame_bytes(1));
                let h = self.host_of(exec);
                if self.cfg.system == System::TwoLevel {
                    self.stamp_best(h, arrives, best);
                    let level = self.hosts[h as usize].level_of(entry.task.prio);
                    self.hosts[h as usize].tier2_served[level] += 1;
                }
                self.q.at(arrives, Event::Start { exec, tid: entry.task.tid() });
            }
            (Answer::Noop { best, .. }, Endpoint::Executor(exec)) => {
                let arrives = at + self.switch_to_host(frame_bytes(0));
                if self.cfg.system == System::TwoLevel {
                    self.stamp_best(self.host_of(exec), arrives, best);
                }
                self.q.at(arrives, Event::Noop { exec });
            }
            (Answer::QueueFull { job, tasks, .. }, Endpoint::Client(client)) => {
                let tids = tasks.iter().map(|t| t.tid()).collect();
                let slot = self.inbound.put(Inbound::Submit { client, job: job.jid(), tids });
                let back = 2 * self.topo.host_switch(frame_bytes(tasks.len()));
                self.q.at(at + back + self.queue_full_retry, Event::ToSwitch { slot });
            }
            (Answer::QueueFull { tasks, .. }, Endpoint::Host(host)) => {
                // A RETURN tier 2 could not queue: the agent keeps the tasks.
                for t in tasks {
                    let entry = self.entry_of(t.tid());
                    self.hosts[host as usize].push(entry);
                }
            }
            (Answer::Refill { entries, best, .. }, Endpoint::Host(host)) => {
                let arrives = at + self.switch_to_host(frame_bytes(entries.len()));
                self.stamp_best(host, arrives, best);
                let slot = self.batches.put(entries);
                self.q.at(arrives, Event::Refill { host, slot });
            }
            (Answer::Hint { best, .. }, Endpoint::Host(host)) => {
                let arrives = at + self.switch_to_host(frame_bytes(0));
                self.q.at(arrives, Event::Hint { host, best });
            }
            (Answer::Recall { req, best, .. }, Endpoint::Host(host)) => {
                let arrives = at + self.switch_to_host(frame_bytes(0));
                self.stamp_best(host, arrives, best);
                self.q.at(arrives, Event::Recall { host, want: req.want });
            }
            _ => {}
        }
    }

    // ---- executors ----

    fn get(&mut self, exec: u32) {
        match self.cfg.system {
            System::OneLevel => {
                let slot = self.inbound.put(Inbound::GetTask { exec, wait: true });
                self.q.after(self.topo.host_switch(frame_bytes(0)), Event::ToSwitch { slot });
            }
            System::TwoLevel => self.q.after(self.topo.p.local_ns, Event::XdpGet { exec }),
            System::Matrix => {
                let h = self.host_of(exec);
                match self.hosts[h as usize].pop() {
                    Some(e) => self.q.after(self.topo.p.local_ns, Event::Start { exec, tid: e.task.tid() }),
                    None => {
                        self.hosts[h as usize].idle.push(exec);
                        self.host_poll(h);
                    }
                }
            }
            System::Sparrow => {
                let h = self.host_of(exec);
                let sp = self.sparrow.as_mut().expect("Sparrow run");
                match sp.hosts[h as usize].pop_front() {
                    Some(job) => self.sparrow_request(exec, job),
                    None => self.hosts[h as usize].idle.push(exec),
                }
            }
            System::Cloudkon => {
                let half = self.cloudkon.as_ref().expect("CloudKon run").half_latency();
                self.q.after(half, Event::CloudPull { exec });
            }
        }
    }

    fn start(&mut self, exec: u32, tid: u32) {
        let arrived = self.q.now();
        let cpu_wait = self.cfg.spells.draw(&self.cfg.exec.cpu_wait, arrived, &mut self.rng);
        let now = arrived + cpu_wait;
        let job = self.jobs.job_index(tid);
        let due = self.jobs.jobs[job].at;
        if self.rec.in_window(due) {
            let sent = self.sent_late.get(&(job as u32)).copied().unwrap_or(due);
            self.rec.start(sent, arrived, now);
        }
        if self.cfg.record_starts {
            self.starts.push((tid, exec, now));
        }
        // The task runs from its start, after the wait for a CPU, for its duration and
        // the executor's overshoot.
        let run =
            self.jobs.duration_us[tid as usize] as Nanos * 1000 + self.cfg.exec.run_overhead.sample(&mut self.rng);
        self.q.after(cpu_wait + run, Event::Done { exec });
    }

    // ---- tier 1 (two-level Bolt) and MATRIX hosts ----

    /// GET_TASK at the executor's host: the XDP program's bypass rule (tier 2's fresh
    /// BEST outranks every non-empty ring: on to tier 2 without WAIT), a hit, or a miss
    /// (waiting at the host, or on to tier 2 with WAIT, as `bolt executor` sends it).
    fn xdp_get(&mut self, exec: u32) {
        let h = self.host_of(exec);
        let now = self.q.now();
        let host = &mut self.hosts[h as usize];
        let local = local_best(&host.occupancy(), 1, host.rings.len() as u8);
        let bypass = host.hint.outranks_local(1, local, DEFAULT_HINT_TTL_NS, || now);
        let hit = if bypass {
            host.bypasses += 1;
            None
        } else {
            host.pop()
        };
        match hit {
            Some(e) => self.q.after(self.topo.p.local_ns, Event::Start { exec, tid: e.task.tid() }),
            // A miss waits at the host for the agent's next REFILL, which its next
            // REFILL_REQ asks for with this executor counted as waiting, when tier 2's
            // fresh stamp says it holds nothing for it (the XDP program's parking rule).
            // Otherwise it asks tier 2.
            None if !bypass && self.cfg.host_wait_ns > 0 && host.hint.known_empty_for(1, DEFAULT_HINT_TTL_NS, now) => {
                host.misses += 1;
                host.waiters.push_back((exec, now + self.cfg.host_wait_ns));
            }
            None => {
                if !bypass {
                    host.misses += 1;
                }
                let slot = self.inbound.put(Inbound::GetTask { exec, wait: !bypass });
                self.q.after(self.topo.host_switch(frame_bytes(0)), Event::ToSwitch { slot });
            }
        }
        self.host_poll(h);
    }

    /// Executors waiting at host `h`: the oldest get the rings' heads (the XDP program
    /// answers a waiter with a REFILL frame's task, the agent the rest), and those whose
    /// host wait is over get NOOP and ask again. Returns when the next wait ends.
    fn answer_waiters(&mut self, h: u32) -> Option<Nanos> {
        let now = self.q.now();
        let local = self.topo.p.local_ns;
        let host = &mut self.hosts[h as usize];
        while let Some(&(exec, _)) = host.waiters.front() {
            let Some(e) = host.pop() else { break };
            host.waiters.pop_front();
            host.waiters_served += 1;
            self.q.after(local, Event::Start { exec, tid: e.task.tid() });
        }
        while let Some(&(exec, until)) = host.waiters.front() {
            if until > now {
                return Some(until);
            }
            host.waiters.pop_front();
            host.waiters_expired += 1;
            self.q.after(local, Event::Noop { exec });
        }
        None
    }

    fn refill_arrives(&mut self, h: u32, slot: u32) {
        let entries = self.batches.take(slot);
        // The program's coarse clock: the time of the kernel's last tick.
        let tick = self.cfg.stamp_tick_ns.max(1);
        let stamp_ms = self.q.now() / tick * tick / 1_000_000;
        let now = self.instant();
        let host = &mut self.hosts[h as usize];
        host.progress.frames += 1;
        host.progress.tasks += entries.len() as u64;
        // A REFILL lists its entries newest first: stored last to first, stamped with the
        // time they entered the ring (their lease).
        let empty = entries.is_empty();
        for e in entries.into_iter().rev() {
            host.push(Entry { pad: ring_stamp(stamp_ms), ..e });
        }
        // As the XDP program: an empty answer, tasks stored while executors wait
        // (EVENT_REFILLED_WAITERS) and the answer to a request that announced none wake
        // the agent; the answer of tasks to one that did is recorded, with its stamp, for
        // the agent's next step.
        if empty || !host.waiters.is_empty() || host.answer_wakes {
            self.host_poll(h);
        } else if let Some(refill) = host.refill.as_mut() {
            refill.first_frame_stamped(now);
        }
    }

    /// The agent's step: the same calls, in the same order, as `bolt agent`'s loop.
    fn host_poll(&mut self, h: u32) {
        let now = self.instant();
        match self.cfg.system {
            System::TwoLevel => {
                let waits_end = self.answer_waiters(h).map(|ns| self.base + Duration::from_nanos(ns));
                self.return_to_tier2(h, now);
                let host = &mut self.hosts[h as usize];
                let occupancy = host.occupancy();
                let served = host.served_all();
                let waiting = host.waiters.len().min(u8::MAX as usize) as u8;
                let tier2_best = host.hint.fresh_best(DEFAULT_HINT_TTL_NS, self.q.now());
                let (Some(refill), Some(sizer)) = (host.refill.as_mut(), host.sizer.as_mut()) else { return };
                sizer.observe_served(now, served);
                host.uptake.observe(now, served.iter().sum());
                refill.set_targets(now, tier2_best, &occupancy, &sizer.targets(), &sizer.rates());
                let action = refill.poll_with_waiters(now, &occupancy, host.progress, waiting as u32);
                if let Some(Outcome::Tasks { round_trip: Some(round_trip), .. }) = refill.take_outcome() {
                    sizer.observe_round_trip(round_trip);
                }
                // Waiters also end a pause after an empty answer early (as in the agent).
                let pause_end = refill.pause_end_with_waiters().filter(|_| waiting > 0);
                let deadline = [refill.next_deadline(now), host.lease.next_deadline(now), waits_end, pause_end]
                    .into_iter()
                    .flatten()
                    .min();
                if let Action::Request { want, .. } = action {
                    host.refill_reqs += 1;
                    host.answer_wakes = waiting == 0;
                    let slot = self.inbound.put(Inbound::RefillReq { host: h, want, waiting });
                    self.q.after(self.topo.host_switch(frame_bytes(0)), Event::ToSwitch { slot });
                }
                self.wake_at(h, deadline);
            }
            System::Matrix => {
                self.dispatch_idle(h);
                let host = &mut self.hosts[h as usize];
                let starved = !host.idle.is_empty() && host.queued() == 0;
                let Some(stealer) = host.stealer.as_mut() else { return };
                let mut out = std::mem::take(&mut self.scratch);
                stealer.poll(now, &mut out);
                if starved {
                    stealer.starved(now, &mut out);
                }
                let deadline = stealer.next_deadline();
                self.steal_actions(h, &mut out);
                self.scratch = out;
                self.wake_at(h, deadline);
            }
            _ => {}
        }
    }

    /// What the agent gives back to tier 2: ring heads whose lease expired (its lease
    /// scan) and, while tier 2's BEST persistently outranks the rings, their
    /// lower-priority tasks (its hint reaction); RETURNed in messages of up to 16.
    fn return_to_tier2(&mut self, h: u32, now: Instant) {
        let now_ns = self.q.now();
        let host = &mut self.hosts[h as usize];
        let mut back: Vec<Entry> = Vec::new();
        if host.lease.scan_due(now) {
            let now_ms = now_ns / 1_000_000;
            for ring in host.rings.iter_mut() {
                while ring.front().is_some_and(|e| host.lease.expired(e.pad, now_ms)) {
                    back.extend(ring.pop_front());
                    host.lease_returned += 1;
                }
            }
        }
        let obs = HintObservation {
            bypasses: host.bypasses,
            hinted_best: host.hint.fresh_best(DEFAULT_HINT_TTL_NS, now_ns),
            occupancy: host.occupancy(),
        };
        if let Some(ReturnBelow { above }) = host.hint_reaction.observe(now, &obs) {
            for ring in host.rings.iter_mut().skip(above as usize) {
                host.hint_returned += ring.len() as u64;
                back.extend(ring.drain(..));
            }
        }
        for chunk in back.chunks(MAX_LIST) {
            let entries = chunk.iter().map(Entry::unstamped).collect();
            let slot = self.inbound.put(Inbound::Return { host: h, entries });
            self.q.after(self.topo.host_switch(frame_bytes(chunk.len())), Event::ToSwitch { slot });
        }
    }

    /// The agent's answer to a RECALL (`want`) or its retry of the RECALLs waiting (None),
    /// through the agent's `PendingRecalls`: ring heads old enough to recall
    /// (`agent::policy::recall::recallable`), highest level first, as
    /// `Rings::take_heads_where` takes them, RETURNed to tier 2 (the simulated tasks need
    /// no resources).
    fn recall_step(&mut self, h: u32, want: Option<u8>) {
        let now = self.q.now();
        let now_ms = now / 1_000_000;
        let instant = self.instant();
        let host = &mut self.hosts[h as usize];
        host.uptake.observe(instant, host.served_all().iter().sum());
        let quiet = host.uptake.quiet(instant);
        let mut pending = std::mem::take(&mut host.pending_recalls);
        let mut back: Vec<Entry> = Vec::new();
        let rings = &mut host.rings;
        let mut take = |n: usize, _exec_rsrc: u8| {
            let before = back.len();
            for ring in rings.iter_mut() {
                while back.len() - before < n && ring.front().is_some_and(|e| recallable(e.pad, now_ms, quiet)) {
                    back.extend(ring.pop_front());
                }
            }
            back.len() - before
        };
        match want {
            Some(want) => pending.recall(0, want, now_ms, &mut take),
            None => pending.retry(now_ms, &mut take),
        };
        // Tried again at the next millisecond of the stamps, or when the host turns quiet.
        let quiet_at = host.uptake.quiet_at().map(|t| t.saturating_duration_since(self.base).as_nanos() as Nanos);
        let quiet_at = quiet_at.filter(|&t| t > now).unwrap_or(Nanos::MAX);
        let retry = pending.next_retry_ms(now_ms).map(|ms| (ms * 1_000_000).min(quiet_at));
        host.pending_recalls = pending;
        host.recalled += back.len() as u64;
        if let Some(at) = retry.filter(|&at| at < host.recall_retry) {
            host.recall_retry = at;
            self.q.at(at, Event::RecallRetry { host: h });
        }
        for chunk in back.chunks(MAX_LIST) {
            let entries = chunk.iter().map(Entry::unstamped).collect();
            let slot = self.inbound.put(Inbound::Return { host: h, entries });
            self.q.after(self.topo.host_switch(frame_bytes(chunk.len())), Event::ToSwitch { slot });
        }
    }

    fn wake_at(&mut self, h: u32, deadline: Option<Instant>) {
        let Some(t) = deadline else { return };
        let at = t.saturating_duration_since(self.base).as_nanos() as Nanos;
        let at = at.max(self.q.now() + 1);
        let host = &mut self.hosts[h as usize];
        if at < host.wake {
            host.wake = at;
            self.q.at(at, Event::HostWake { host: h });
        }
    }

    /// MATRIX: hands queued tasks to the host's idle executors.
    fn dispatch_idle(&mut self, h: u32) {
        let local = self.topo.p.local_ns;
        let host = &mut self.hosts[h as usize];
        let mut appeared = false;
        while !host.idle.is_empty() {
            let Some(e) = host.pop() else { break };
            let exec = host.idle.pop().expect("checked non-empty");
            self.q.after(local, Event::Start { exec, tid: e.task.tid() });
            appeared = true;
        }
        if appeared || host.queued() > 0 {
            if let Some(s) = host.stealer.as_mut() {
                s.work_appeared();
            }
        }
    }

    fn steal_actions(&mut self, h: u32, out: &mut Vec<StealAction<u32>>) {
        for action in out.drain(..) {
            match action {
                StealAction::Send { to, op, body } => self.send_steal(h, to, op, body, ArrayVec::new()),
                StealAction::Grant { to, body, entries } => {
                    self.send_steal(h, to, Op::StealGrant, body, entries.into_iter().collect())
                }
                StealAction::Keep(entries) | StealAction::PutBack(entries) => {
                    let host = &mut self.hosts[h as usize];
                    for e in entries {
                        host.push(e);
                    }
                }
            }
        }
        self.dispatch_idle(h);
    }

    fn send_steal(&mut self, from: u32, to: u32, op: Op, body: StealBody, entries: ArrayVec<Entry, MAX_LIST>) {
        let bytes = frame_bytes(entries.len()) + StealBody::LEN as u32;
        let grant = if entries.is_empty() { NONE } else { self.batches.put(entries) };
        let msg = StealMsg { to, from, op, body, grant };
        let at = self.q.now() + self.topo.host_host(from, to, bytes);
        if self.cfg.batch_steals {
            self.outbox.push((at, msg));
        } else {
            self.deliver_at(at, std::iter::once(msg));
        }
    }

    fn deliver_at(&mut self, at: Nanos, msgs: impl IntoIterator<Item = StealMsg>) {
        let mut list = self.spare_deliveries.pop().unwrap_or_default();
        list.extend(msgs);
        let slot = self.deliveries.put(list);
        self.q.at(at, Event::Steals { slot });
    }

    /// Batched steals: the STEAL messages an event sent that arrive at the same instant
    /// become one event (a thief's probes to the hosts of other racks, their LOADs back
    /// to it), handled in the order they were sent. Each message is handled exactly as
    /// its own event would be, at the same time; only where another event falls on the
    /// same nanosecond may the order between them differ.
    fn flush_steals(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        let mut out = std::mem::take(&mut self.outbox);
        // Stable: messages arriving together keep the order they were sent in.
        out.sort_by_key(|&(at, _)| at);
        let mut rest = &out[..];
        while let Some(&(at, _)) = rest.first() {
            let n = rest.iter().take_while(|m| m.0 == at).count();
            self.deliver_at(at, rest[..n].iter().map(|m| m.1));
            rest = &rest[n..];
        }
        out.clear();
        self.outbox = out;
    }

    fn steal_arrives(&mut self, msg: StealMsg) {
        self.steal_messages += 1;
        let to = msg.to;
        let entries = if msg.grant == NONE { ArrayVec::new() } else { self.batches.take(msg.grant) };
        let now = self.instant();
        let mut out = std::mem::take(&mut self.scratch);
        let host = &mut self.hosts[to as usize];
        let load = host.queued() as u32;
        let Host { rings, stealer, .. } = host;
        if let Some(stealer) = stealer.as_mut() {
            let mut take = |n: usize| Host::take_for_thief(rings, n);
            stealer.on_message(now, msg.from, msg.op, &msg.body, &entries, load, &mut take, &mut out);
        }
        self.steal_actions(to, &mut out);
        self.scratch = out;
        self.host_poll(to);
    }

    // ---- Sparrow ----

    fn sparrow_probe(&mut self, h: u32, job: u32) {
        match self.hosts[h as usize].idle.pop() {
            Some(exec) => self.sparrow_request(exec, job),
            None => self.sparrow.as_mut().expect("Sparrow run").hosts[h as usize].push_back(job),
        }
    }

    /// A reservation reached the front with a free slot: ask the job's scheduler.
    fn sparrow_request(&mut self, exec: u32, job: u32) {
        let sched = self.client_host(self.jobs.jobs[job as usize].client);
        let delay = self.topo.host_host(self.host_of(exec), sched, frame_bytes(0));
        self.q.after(delay, Event::SparrowAsk { exec, job });
    }

    fn sparrow_ask(&mut self, exec: u32, job: u32) {
        let now = self.q.now();
        let j = self.jobs.jobs[job as usize];
        let sp = self.sparrow.as_mut().expect("Sparrow run");
        let (answer_at, tid) = sp.answer(now, j.client, job, &j);
        let sched = self.client_host(j.client);
        let delay = self.topo.host_host(sched, self.host_of(exec), frame_bytes(1));
        self.q.at(answer_at + delay, Event::SparrowAnswer { exec, tid: tid.unwrap_or(NONE) });
    }

    // ---- CloudKon ----

    fn cloud_job(&mut self, job: u32) {
        let j = self.jobs.jobs[job as usize];
        let ck = self.cloudkon.as_mut().expect("CloudKon run");
        let half = ck.half_latency();
        for tid in j.first..j.first + j.tasks {
            if let Some(exec) = ck.push(tid) {
                self.q.after(half, Event::Start { exec, tid });
            }
        }
    }

    // ---- the report ----

    fn report(self, wall_s: f64) -> Report {
        let simulated_s = self.q.now() as f64 / 1e9;
        let run = self.tasks_run.max(1) as f64;
        let switch = self.tofino.as_ref().map(|t| {
            let s = t.stats();
            let qs = t.queue_stats();
            let out = qs.assigns + qs.noops + qs.refill_packets + qs.queue_full_packets;
            let window_s = (self.rec.until - self.rec.from) as f64 / 1e9;
            let until = self.window_passes.1.unwrap_or(s.passes);
            let window = until - self.window_passes.0.unwrap_or(0);
            let budget = t.params().passes_per_sec * window_s;
            SwitchReport {
                packets_in_per_task: s.arrived as f64 / run,
                packets_out_per_task: out as f64 / run,
                passes_per_task: s.passes as f64 / run,
                hints_per_task: s.hints as f64 / run,
                utilisation: if budget > 0.0 { window as f64 / budget } else { 0.0 },
                dropped: s.dropped,
                queue_full_tasks: qs.queue_full_tasks,
                max_ingress: s.max_ingress,
                counters: s.clone(),
                parked: t.park_stats().parked,
                answered_from_park: t.park_stats().answered_from_park,
                park_expired: t.park_stats().expired,
                park_refused: t.park_stats().refused_park,
            }
        });
        let (attempts, stolen) = self
            .hosts
            .iter()
            .filter_map(|h| h.stealer.as_ref())
            .fold((0, 0), |(a, s), st| (a + st.stats().attempts, s + st.stats().stolen));
        let events = self.q.processed();
        let rss = peak_rss_bytes();
        Report {
            system: self.cfg.system.name().into(),
            workload: self.cfg.workload.name(),
            executors: self.cfg.executors,
            hosts: self.topo.hosts,
            seed: self.cfg.seed,
            simulated_s,
            tasks_measured: self.rec.expected,
            tasks_started: self.rec.started,
            tasks_run: self.tasks_run,
            p50_us: self.rec.quantile_us(0.5),
            p99_us: self.rec.quantile_us(0.99),
            mean_us: self.rec.mean_us(),
            p50_before_arrival_us: self.rec.before_arrival_us(0.5),
            p99_before_arrival_us: self.rec.before_arrival_us(0.99),
            switch,
            tier1_hits_per_task: (self.cfg.system == System::TwoLevel)
                .then(|| self.hosts.iter().map(|h| h.served.iter().sum::<u64>()).sum::<u64>() as f64 / run),
            tier1: (self.cfg.system == System::TwoLevel).then(|| {
                self.hosts.iter().fold(Tier1Report::default(), |mut t, h| {
                    t.bypasses += h.bypasses;
                    t.misses += h.misses;
                    t.hint_returned += h.hint_returned;
                    t.recalled += h.recalled;
                    t.lease_returned += h.lease_returned;
                    t.refill_reqs += h.refill_reqs;
                    t.waiters_served += h.waiters_served;
                    t.waiters_expired += h.waiters_expired;
                    t
                })
            }),
            steal_attempts: attempts,
            stolen,
            steal_messages: self.steal_messages,
            events,
            wall_s,
            events_per_s: events as f64 / wall_s.max(1e-9),
            peak_rss_mib: rss as f64 / (1 << 20) as f64,
            rss_bytes_per_executor: rss as f64 / self.cfg.executors.max(1) as f64,
            starts: self.starts,
        }
    }
}

// The heap holds one event per executor and more: keep them small.
const _: () = assert!(std::mem::size_of::<Event>() <= 12);
// A round's PROBEs and LOADs are most of MATRIX's messages in flight.
const _: () = assert!(std::mem::size_of::<StealMsg>() <= 28);

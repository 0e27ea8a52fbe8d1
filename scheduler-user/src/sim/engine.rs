//! The event loop: every system's hosts, executors, clients and tier 2 react to events
//! in simulated time. Per executor there is no state beyond its one pending event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrayvec::ArrayVec;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scheduler_common::{Entry, JobRef, Message, Op, RefillRequest, Requester, StealBody, Task, MAX_LIST};

use super::baselines::{CloudKon, Sparrow};
use super::clock::{EventQueue, Nanos};
use super::executors::Endpoint;
use super::host::Host;
use super::network::{frame_bytes, Topology};
use super::report::{peak_rss_bytes, Recorder, Report, SwitchReport};
use super::tofino::{Departure, Departures, Tofino};
use super::workload::Jobs;
use super::{SimConfig, System};
use crate::agent::policy::prefetch::PrefetchSizer;
use crate::agent::policy::steal::{StealAction, StealConfig, Stealer};
use crate::agent::refill::{Action, Outcome, RefillController};
use crate::client::TrackerConfig;

#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// The next job of the workload is submitted.
    Job,
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
    Steal {
        to: u32,
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
enum Inbound {
    Submit { client: u32, job: u32, tids: ArrayVec<u32, MAX_LIST> },
    GetTask { exec: u32 },
    RefillReq { host: u32, want: u8 },
}

struct StealMsg {
    from: u32,
    op: Op,
    body: StealBody,
    entries: ArrayVec<Entry, MAX_LIST>,
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
    departures: Departures,
    inbound: Slab<Inbound>,
    batches: Slab<ArrayVec<Entry, MAX_LIST>>,
    steals: Slab<StealMsg>,
    sparrow: Option<Sparrow>,
    cloudkon: Option<CloudKon>,
    rng: StdRng,
    rec: Recorder,
    tasks_run: u64,
    /// `Instant` the policies see at simulated time 0 (they only take differences).
    base: Instant,
    scratch: Vec<StealAction<u32>>,
    task_buf: Vec<Task>,
    /// Pipeline passes when the measured window began and ended.
    window_passes: (Option<u64>, Option<u64>),
    /// The client library's retries: after a QUEUE_FULL (its first back-off) and after
    /// a SUBMIT that got no answer (its task timeout).
    queue_full_retry: Nanos,
    lost_submit_retry: Nanos,
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
            System::OneLevel | System::TwoLevel => Some(Tofino::new(cfg.tofino.clone()).map_err(anyhow::Error::msg)?),
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
            departures: Departures::default(),
            inbound: Slab::new(),
            batches: Slab::new(),
            steals: Slab::new(),
            sparrow,
            cloudkon,
            rng: StdRng::seed_from_u64(cfg.seed),
            rec,
            tasks_run: 0,
            base,
            scratch: Vec::new(),
            task_buf: Vec::with_capacity(MAX_LIST),
            window_passes: (None, None),
            queue_full_retry: client.queue_full_backoff.as_nanos() as Nanos,
            lost_submit_retry: client.task_timeout.as_nanos() as Nanos,
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
        while let Some(event) = self.q.pop() {
            let now = self.q.now();
            if now > stop {
                break;
            }
            if self.window_passes.0.is_none() && now >= self.rec.from {
                self.window_passes.0 = Some(self.passes());
            }
            if self.window_passes.1.is_none() && now >= self.rec.until {
                self.window_passes.1 = Some(self.passes());
            }
            self.handle(event);
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
            Event::ToSwitch { slot } => self.arrive_at_switch(slot),
            Event::SwitchTick => {
                self.switch_tick = Nanos::MAX;
                self.run_switch();
            }
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
            Event::Steal { to, slot } => self.steal_arrives(to, slot),
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
        let j = self.jobs.jobs[self.next_job];
        let job = self.next_job as u32;
        self.next_job += 1;
        if let Some(next) = self.jobs.jobs.get(self.next_job) {
            self.q.at(next.at, Event::Job);
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

    fn entry(&self, client: u32, job: u32, tid: u32, prio: u8) -> Entry {
        let addr = Endpoint::Client(client).addr();
        Entry::new(client, job, task(tid, prio), addr.ip().octets(), addr.port())
    }

    // ---- tier 2 ----

    fn arrive_at_switch(&mut self, slot: u32) {
        let now = self.q.now();
        let inbound = self.inbound.take(slot);
        let tofino = self.tofino.as_mut().expect("a Bolt run has tier 2");
        let accepted = match &inbound {
            Inbound::Submit { client, job, tids } => {
                let prio = self.jobs.jobs[*job as usize].prio;
                self.task_buf.clear();
                self.task_buf.extend(tids.iter().map(|&t| task(t, prio)));
                let msg = Message::Submit { job: JobRef::new(*client, *job), flags: 0, tasks: &self.task_buf };
                tofino.arrive(now, &msg, Endpoint::Client(*client).addr())
            }
            Inbound::GetTask { exec } => {
                let from = Requester::new((exec / self.per_host) as u16, *exec as u16, 0);
                let msg = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0xff, from, wait: false };
                tofino.arrive(now, &msg, Endpoint::Executor(*exec).addr())
            }
            Inbound::RefillReq { host, want } => {
                let msg = Message::RefillReq { node_rsrc: 0xff, req: RefillRequest::new(*host as u16, *want) };
                tofino.arrive(now, &msg, Endpoint::Host(*host).addr())
            }
        };
        if !accepted {
            // Dropped at the ingress: the sender's timeout sends it again.
            match inbound {
                Inbound::Submit { .. } => {
                    let slot = self.inbound.put(inbound);
                    self.q.after(self.lost_submit_retry, Event::ToSwitch { slot });
                }
                Inbound::GetTask { exec } => self.q.after(self.cfg.exec.get_timeout_ns, Event::Get { exec }),
                // The refill controller's answer timeout resends it.
                Inbound::RefillReq { .. } => {}
            }
        }
        self.run_switch();
    }

    fn run_switch(&mut self) {
        let now = self.q.now();
        let tofino = self.tofino.as_mut().expect("a Bolt run has tier 2");
        self.departures.clear();
        let next = tofino.run_until(now, &mut self.departures);
        let departures = std::mem::take(&mut self.departures);
        for d in &departures.out {
            self.depart(d, &departures);
        }
        self.departures = departures;
        if let Some(t) = next {
            if t < self.switch_tick {
                self.switch_tick = t;
                self.q.at(t, Event::SwitchTick);
            }
        }
    }

    fn depart(&mut self, d: &Departure, all: &Departures) {
        let (at, to) = match *d {
            Departure::Assign { at, to, .. }
            | Departure::Noop { at, to, .. }
            | Departure::QueueFull { at, to, .. }
            | Departure::Refill { at, to, .. } => (at, to),
        };
        let Some(endpoint) = Endpoint::of(to) else { return };
        match (*d, endpoint) {
            (Departure::Assign { entry, .. }, Endpoint::Executor(exec)) => {
                let delay = self.topo.host_switch(frame_bytes(1));
                self.q.at(at + delay, Event::Start { exec, tid: entry.task.tid() });
            }
            (Departure::Noop { .. }, Endpoint::Executor(exec)) => {
                self.q.at(at + self.topo.host_switch(frame_bytes(0)), Event::Noop { exec });
            }
            (Departure::QueueFull { job, first, count, .. }, Endpoint::Client(client)) => {
                let tids = all.tasks[first..first + count].iter().map(|t| t.tid()).collect();
                let slot = self.inbound.put(Inbound::Submit { client, job: job.jid(), tids });
                let back = 2 * self.topo.host_switch(frame_bytes(count));
                self.q.at(at + back + self.queue_full_retry, Event::ToSwitch { slot });
            }
            (Departure::Refill { first, count, .. }, Endpoint::Host(host)) => {
                let slot = self.batches.put(all.entries[first..first + count].iter().copied().collect());
                self.q.at(at + self.topo.host_switch(frame_bytes(count)), Event::Refill { host, slot });
            }
            _ => {}
        }
    }

    // ---- executors ----

    fn get(&mut self, exec: u32) {
        match self.cfg.system {
            System::OneLevel => {
                let slot = self.inbound.put(Inbound::GetTask { exec });
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
        let now = self.q.now();
        let submitted = self.jobs.job_of(tid).at;
        if self.rec.in_window(submitted) {
            self.rec.start(submitted, now);
        }
        let run = self.jobs.duration_us[tid as usize] as Nanos * 1000 + self.cfg.exec.run_overhead_ns;
        self.q.after(run, Event::Done { exec });
    }

    // ---- tier 1 (two-level Bolt) and MATRIX hosts ----

    fn xdp_get(&mut self, exec: u32) {
        let h = self.host_of(exec);
        match self.hosts[h as usize].pop() {
            Some(e) => {
                self.q.after(self.topo.p.local_ns, Event::Start { exec, tid: e.task.tid() });
                self.host_poll(h);
            }
            None => {
                // A miss: the program passes GET_TASK on to tier 2, which answers the executor.
                let slot = self.inbound.put(Inbound::GetTask { exec });
                self.q.after(self.topo.host_switch(frame_bytes(0)), Event::ToSwitch { slot });
                self.host_poll(h);
            }
        }
    }

    fn refill_arrives(&mut self, h: u32, slot: u32) {
        let entries = self.batches.take(slot);
        let host = &mut self.hosts[h as usize];
        host.progress.frames += 1;
        host.progress.tasks += entries.len() as u64;
        for e in entries {
            host.push(e);
        }
        self.host_poll(h);
    }

    /// The agent's step: the same calls, in the same order, as `bolt agent`'s loop.
    fn host_poll(&mut self, h: u32) {
        let now = self.instant();
        match self.cfg.system {
            System::TwoLevel => {
                let host = &mut self.hosts[h as usize];
                let occupancy = host.occupancy();
                let (Some(refill), Some(sizer)) = (host.refill.as_mut(), host.sizer.as_mut()) else { return };
                sizer.observe_served(now, host.served);
                refill.set_target(sizer.total_target());
                let action = refill.poll(now, &occupancy, host.progress);
                if let Some(Outcome::Tasks { round_trip, .. }) = refill.take_outcome() {
                    sizer.observe_round_trip(round_trip);
                }
                let deadline = refill.next_deadline(now);
                if let Action::Request { want, .. } = action {
                    let slot = self.inbound.put(Inbound::RefillReq { host: h, want });
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
        let slot = self.steals.put(StealMsg { from, op, body, entries });
        self.q.after(self.topo.host_host(from, to, bytes), Event::Steal { to, slot });
    }

    fn steal_arrives(&mut self, to: u32, slot: u32) {
        let msg = self.steals.take(slot);
        let now = self.instant();
        let mut out = std::mem::take(&mut self.scratch);
        let host = &mut self.hosts[to as usize];
        let load = host.queued() as u32;
        let Host { rings, stealer, .. } = host;
        if let Some(stealer) = stealer.as_mut() {
            let mut take = |n: usize| Host::take_for_thief(rings, n);
            stealer.on_message(now, msg.from, msg.op, &msg.body, &msg.entries, load, &mut take, &mut out);
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
                utilisation: if budget > 0.0 { window as f64 / budget } else { 0.0 },
                dropped: s.dropped,
                queue_full_tasks: qs.queue_full_tasks,
                max_ingress: s.max_ingress,
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
            switch,
            tier1_hits_per_task: (self.cfg.system == System::TwoLevel)
                .then(|| self.hosts.iter().map(|h| h.served.iter().sum::<u64>()).sum::<u64>() as f64 / run),
            steal_attempts: attempts,
            stolen,
            events,
            wall_s,
            events_per_s: events as f64 / wall_s.max(1e-9),
            peak_rss_mib: rss as f64 / (1 << 20) as f64,
            rss_bytes_per_executor: rss as f64 / self.cfg.executors.max(1) as f64,
        }
    }
}

// The heap holds one event per executor and more: keep them small.
const _: () = assert!(std::mem::size_of::<Event>() <= 12);

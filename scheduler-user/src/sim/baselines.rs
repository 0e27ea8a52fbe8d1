//! The alternatives, each by its published algorithm (parameters in docs/sim.md).
//! MATRIX runs on the same hosts as two-level Bolt with the project's own [`Stealer`]
//! and no tier 2 (engine.rs); Sparrow and CloudKon keep their state here.
//!
//! [`Stealer`]: crate::agent::policy::steal::Stealer

use std::collections::VecDeque;

use serde::Serialize;

use super::clock::Nanos;
use super::workload::{Jobs, SimJob};

#[derive(Clone, Debug, Serialize)]
pub struct SparrowParams {
    /// Probes per task (batch sampling: d·m probes for a job of m tasks).
    pub probes_per_task: u32,
    /// A scheduler's time per task request it answers (late binding).
    pub service_ns: Nanos,
}

impl Default for SparrowParams {
    /// d = 2 (Sparrow §4); 2 µs per decision = the 500 K decisions/s the thesis measured
    /// for one Sparrow scheduler (§5.2).
    fn default() -> Self {
        SparrowParams { probes_per_task: 2, service_ns: 2_000 }
    }
}

/// Sparrow: every client is a scheduler. A job's scheduler sends d·m probes to random
/// hosts; a probe becomes a reservation in the host's FIFO; when an executor of the host
/// is free the reservation asks the scheduler for a task, which answers with the job's
/// next unlaunched task or, once all are launched, a cancel (late binding).
pub struct Sparrow {
    pub params: SparrowParams,
    /// Reservations (job indices) per host.
    pub hosts: Vec<VecDeque<u32>>,
    /// Tasks launched per job.
    launched: Vec<u32>,
    /// When each scheduler is next free.
    free_at: Vec<Nanos>,
}

impl Sparrow {
    pub fn new(params: SparrowParams, jobs: &Jobs) -> Sparrow {
        let schedulers = jobs.jobs.iter().map(|j| j.client + 1).max().unwrap_or(1) as usize;
        Sparrow { params, hosts: Vec::new(), launched: vec![0; jobs.jobs.len()], free_at: vec![0; schedulers] }
    }

    pub fn ensure_hosts(&mut self, n: usize) {
        self.hosts.resize_with(n, VecDeque::new);
    }

    /// Scheduler `sched` answers a request for `job` arriving at `now`: when the answer
    /// leaves, and the task (None: cancel).
    pub fn answer(&mut self, now: Nanos, sched: u32, job: u32, j: &SimJob) -> (Nanos, Option<u32>) {
        let free = &mut self.free_at[sched as usize];
        let done = (*free).max(now) + self.params.service_ns;
        *free = done;
        let launched = &mut self.launched[job as usize];
        if *launched < j.tasks {
            *launched += 1;
            (done, Some(j.first + *launched - 1))
        } else {
            (done, None)
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CloudKonParams {
    /// Send to, or receive from, the global queue (SQS), one way.
    pub queue_one_way_ns: Nanos,
}

impl Default for CloudKonParams {
    /// CloudKon's worker step takes 16 ms in most cases (8 ms of it the DynamoDB check):
    /// 8 ms each way to SQS.
    fn default() -> Self {
        CloudKonParams { queue_one_way_ns: 8_000_000 }
    }
}

/// CloudKon: one global FIFO (SQS). A free worker thread pulls; a pull that finds the
/// queue empty waits there (long polling) until a task arrives.
pub struct CloudKon {
    params: CloudKonParams,
    queue: VecDeque<u32>,
    waiting: VecDeque<u32>,
}

impl CloudKon {
    pub fn new(params: CloudKonParams) -> CloudKon {
        CloudKon { params, queue: VecDeque::new(), waiting: VecDeque::new() }
    }

    pub fn half_latency(&self) -> Nanos {
        self.params.queue_one_way_ns
    }

    /// A pull from `exec` reaches the queue: a task for it, or it waits.
    pub fn pull(&mut self, exec: u32) -> Option<u32> {
        let t = self.queue.pop_front();
        if t.is_none() {
            self.waiting.push_back(exec);
        }
        t
    }

    /// A task reaches the queue: the waiting executor that gets it, if any.
    pub fn push(&mut self, tid: u32) -> Option<u32> {
        let e = self.waiting.pop_front();
        if e.is_none() {
            self.queue.push_back(tid);
        }
        e
    }
}

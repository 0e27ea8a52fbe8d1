//! Executors: worker threads that pull tasks from the scheduler and run them.
//!
//! Each executor owns one blocking UDP socket and loops:
//! GET_TASK (RTRV_PRIO = 1, EXEC_RSRC = its resources, Requester = node/executor/seq,
//! flag WAIT: tier 2 holds the request until a task arrives or its park time runs out)
//! → ASSIGN: run the task's handler, send COMPLETE straight to the client named in the
//!   ENTRY, ask again (a SPEC task first fetches its spec and inputs, stores its output
//!   in this host's object store and sends RESULT to the client's spec server: `spec`);
//! → NOOP echoing this seq: nothing queued it can run; back off (default 50 µs), ask again;
//! → neither within the GET timeout (a lost packet): ask again with a new seq.
//!
//! With a bundle size N above 1 the request is a GET_BUNDLE (want N): its ASSIGN lists
//! up to N tasks, which the executor runs one after another, each claimed (exactly-once
//! tasks) and reported with COMPLETE as a single task is.
//!
//! At most one GET_TASK is outstanding (see `Worker::run` for how a late answer is told
//! apart). Any ASSIGN that arrives is run, even one answering an earlier GET that had
//! timed out, so a late answer never loses a task. On stop an executor finishes its running
//! task and runs whatever still arrives for GETs already sent before it exits.

mod cli;
mod counters;
pub mod cpu_group;
mod handlers;
mod lease;
pub mod spec;
mod worker;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use cpu_group::CpuGroup;

pub use cli::{parse_addr, parse_resources, run, ExecutorArgs};
pub use counters::{CounterSnapshot, ExecutorCounters};
pub use handlers::{run_data, spin_for, DataFailure, ExecRule, Handlers, Outcome, Refusal, DATA_HANDLERS, MAX_PASSES};
pub use worker::{unix_now_ns, AssignmentRecord, MAX_ASSIGNMENT_RECORDS, RTRV_PRIO};

/// How a set of executors on one node runs.
#[derive(Clone, Debug)]
pub struct ExecutorConfig {
    /// Where GET_TASK goes: the switch (tier 2) or the node's host agent (tier 1).
    pub switch: SocketAddr,
    /// Number of executor threads (each with its own socket).
    pub executors: u16,
    /// Node id carried in GET_TASK and COMPLETE.
    pub node: u16,
    /// EXEC_RSRC: the resource bitmap these executors offer.
    pub resources: u8,
    /// Tasks each executor asks for at a time: 1 sends GET_TASK; 2..=16 send GET_BUNDLE
    /// with this `want` and run the ASSIGN's tasks one after another.
    pub bundle: u8,
    /// Pause after a NOOP before asking again.
    pub noop_backoff: Duration,
    /// How long to wait for ASSIGN or NOOP before resending GET_TASK.
    pub get_timeout: Duration,
    /// Longest a task may take (longer sleep/spin is refused, commands are killed).
    pub task_time_limit: Duration,
    /// Commands `exec` descriptors may name.
    pub allow_exec: Vec<ExecRule>,
    /// Local address to bind the sockets to; `None` picks loopback for a loopback switch
    /// and the unspecified address otherwise.
    pub bind: Option<IpAddr>,
    /// Keep an [`AssignmentRecord`] (the GET_TASK round trip, the arrival stamp) of every task assigned,
    /// for benchmarks; at most [`MAX_ASSIGNMENT_RECORDS`] per executor.
    pub record_assignments: bool,
    /// This host's object store, as other hosts reach it: SPEC tasks run only with one
    /// (without, they are refused).
    pub store: Option<std::net::SocketAddrV4>,
    /// This worker type's speed: sleep tasks last their duration ÷ speed (trace replay
    /// on types of different speed, as RLQ's real-trace setup does).
    pub speed: f64,
    /// A CPU quota (in cores) shared by these executors, through a cgroup; `None`: no cap.
    pub cpu_quota_cores: Option<f64>,
    /// Handlers the program registered for SPEC tasks, beside the data handlers.
    pub spec_handlers: Option<Arc<dyn spec::SpecHandlers>>,
}

impl ExecutorConfig {
    pub const DEFAULT_NOOP_BACKOFF: Duration = Duration::from_micros(50);
    pub const DEFAULT_GET_TIMEOUT: Duration = Duration::from_millis(50);
    pub const DEFAULT_TASK_TIME_LIMIT: Duration = Duration::from_secs(10);

    /// One executor on node 0 with the default timings and no allowed commands.
    pub fn new(switch: SocketAddr, resources: u8) -> ExecutorConfig {
        ExecutorConfig {
            switch,
            executors: 1,
            node: 0,
            resources,
            bundle: 1,
            noop_backoff: Self::DEFAULT_NOOP_BACKOFF,
            get_timeout: Self::DEFAULT_GET_TIMEOUT,
            task_time_limit: Self::DEFAULT_TASK_TIME_LIMIT,
            allow_exec: Vec::new(),
            bind: None,
            record_assignments: false,
            store: None,
            speed: 1.0,
            cpu_quota_cores: None,
            spec_handlers: None,
        }
    }

    fn bind_ip(&self) -> IpAddr {
        if let Some(ip) = self.bind {
            return ip;
        }
        match self.switch.ip() {
            IpAddr::V4(ip) if ip.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(ip) if ip.is_loopback() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        }
    }
}

/// Running executors. Dropping the pool without [`ExecutorPool::shutdown`] also stops
/// and joins them.
pub struct ExecutorPool {
    threads: Vec<JoinHandle<()>>,
    counters: Vec<Arc<ExecutorCounters>>,
    assignments: Vec<Arc<Mutex<Vec<AssignmentRecord>>>>,
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    /// Dropped after the threads are joined, so the group is empty when removed.
    cpu_group: Option<Arc<CpuGroup>>,
}

/// Starts `cfg.executors` executor threads.
pub fn spawn(cfg: ExecutorConfig) -> anyhow::Result<ExecutorPool> {
    if cfg.executors == 0 {
        bail!("at least one executor is needed");
    }
    if cfg.get_timeout.is_zero() {
        bail!("the GET_TASK timeout must be positive");
    }
    if cfg.bundle == 0 || cfg.bundle > scheduler_common::MAX_BUNDLE {
        bail!("a bundle of {} tasks: must be 1 to {}", cfg.bundle, scheduler_common::MAX_BUNDLE);
    }
    if !(cfg.speed.is_finite() && cfg.speed > 0.0) {
        bail!("the speed {} must be positive", cfg.speed);
    }
    let handlers = Arc::new(Handlers::new(cfg.allow_exec.clone(), cfg.task_time_limit).with_speed(cfg.speed));
    let cpu_group = cfg.cpu_quota_cores.map(|cores| CpuGroup::create(cores).map(Arc::new)).transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut pool = ExecutorPool {
        threads: Vec::new(),
        counters: Vec::new(),
        assignments: Vec::new(),
        addrs: Vec::new(),
        stop: stop.clone(),
        cpu_group: cpu_group.clone(),
    };
    let bind = SocketAddr::new(cfg.bind_ip(), 0);
    for index in 0..cfg.executors {
        let socket = UdpSocket::bind(bind).with_context(|| format!("binding an executor socket to {bind}"))?;
        socket.set_read_timeout(Some(cfg.get_timeout)).context("setting the receive timeout")?;
        if cfg.record_assignments {
            // The record says when each ASSIGN reached the host, not only when it was read.
            crate::net::enable_arrival_stamps(&socket).context("asking for arrival stamps")?;
        }
        pool.addrs.push(socket.local_addr()?);
        let counters = Arc::new(ExecutorCounters::default());
        pool.counters.push(counters.clone());
        let assignments = cfg.record_assignments.then(|| Arc::new(Mutex::new(Vec::new())));
        pool.assignments.extend(assignments.clone());
        let lease = lease::LeaseKeeper::new(counters.clone());
        let worker = worker::Worker {
            socket,
            switch: cfg.switch,
            node: cfg.node,
            index,
            resources: cfg.resources,
            bundle: cfg.bundle,
            noop_backoff: cfg.noop_backoff,
            get_timeout: cfg.get_timeout,
            handlers: handlers.clone(),
            data: cfg
                .store
                .map(|store| spec::DataPath::new(store, cfg.node, cfg.spec_handlers.clone(), lease.revoked())),
            lease,
            counters,
            stop: stop.clone(),
            read_timeout: cfg.get_timeout,
            assignments,
            stash: Vec::new(),
        };
        let group = cpu_group.clone();
        let (joined_tx, joined_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(format!("bolt-exec-{index}"))
            .spawn(move || {
                let joined = group.as_ref().map_or(Ok(()), |g| g.join_current_thread());
                let ok = joined.is_ok();
                // The spawner waits for this; it cannot have gone.
                let _ = joined_tx.send(joined);
                if ok {
                    worker.run();
                }
            })
            .context("starting an executor thread")?;
        pool.threads.push(thread);
        joined_rx.recv().context("an executor thread died before starting")??;
    }
    Ok(pool)
}

impl ExecutorPool {
    /// The local address of each executor's socket, by executor index.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The cgroup holding these executors' CPU quota, if they have one.
    pub fn cpu_group(&self) -> Option<&std::path::Path> {
        self.cpu_group.as_deref().map(CpuGroup::path)
    }

    /// All executors' counters, summed.
    pub fn counters(&self) -> CounterSnapshot {
        let mut s = CounterSnapshot::default();
        self.counters.iter().for_each(|c| s.add(c));
        s
    }

    /// Each executor's counters, by executor index.
    pub fn per_executor(&self) -> Vec<CounterSnapshot> {
        self.counters.iter().map(|c| c.snapshot()).collect()
    }

    /// The assignment records of every executor since the last call (empty unless
    /// `record_assignments`).
    pub fn take_assignments(&self) -> Vec<AssignmentRecord> {
        let mut all = Vec::new();
        for log in &self.assignments {
            // A poisoned lock only means an executor panicked; its records are still whole.
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            all.append(&mut log);
        }
        all
    }

    /// Asks every executor to stop after its running task, without waiting.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the executors (each finishes its running task and runs tasks still
    /// arriving for GETs already sent), waits for them, and returns the final counters.
    pub fn shutdown(mut self) -> CounterSnapshot {
        self.join_all();
        self.counters()
    }

    fn join_all(&mut self) {
        self.request_stop();
        for t in self.threads.drain(..) {
            let name = t.thread().name().unwrap_or("executor").to_owned();
            if t.join().is_err() {
                tracing::error!(thread = %name, "executor thread panicked");
            }
        }
    }
}

impl Drop for ExecutorPool {
    fn drop(&mut self) {
        self.join_all();
    }
}

#[cfg(test)]
mod tests;

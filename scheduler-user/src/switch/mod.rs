//! The software switch: tier 2 of Bolt where no Tofino exists. One thread owns the
//! [`Scheduler`](crate::queue::Scheduler) and a UDP socket and runs the packet path with
//! batched syscalls, no allocation and no lock; other threads only read published
//! snapshots of its counters.

mod admission;
mod credit;
mod levels;
mod metrics;
mod park;
mod recall;
mod server;
mod thread;
mod tier2;
mod timeline;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

use crate::queue::{QueueConfig, QueueStats, Scheduler};

pub use admission::{listed, parse_prefix, AccessRules, GetTaskLimit};
pub use credit::{ReturnCredit, CREDIT_SLOTS};
pub use metrics::{run_stats, SwitchCli, SwitchCommand, SwitchStatsArgs};
pub use park::ParkStats;
pub use server::{run_cli, SwitchArgs};
pub use thread::ThreadStats;
pub use tier2::{Answer, HintStats, Tier2, WaitConfig};
pub use timeline::{SubmitTaken, SwitchTimeline, TaskSent};

/// How to run a software switch.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    pub listen: SocketAddr,
    /// Entries per priority queue; a power of two.
    pub queue_capacity: u32,
    /// Priority levels (1 = highest).
    pub priorities: u8,
    /// Passes one GET_TASK or REFILL_REQ may take before it gives up (bounds SWAP searches).
    pub max_passes: u16,
    /// Datagrams per recvmmsg/sendmmsg call.
    pub batch: usize,
    /// Which sources may SUBMIT, which REFILL_REQ and RETURN, and which GET_TASK.
    pub access: AccessRules,
    /// GET_TASKs per second per source socket (0: no limit), and the burst allowed.
    pub get_task_rate: u32,
    pub get_task_burst: u32,
    /// Parking of requests that find nothing, and HINT registration.
    pub wait: WaitConfig,
    /// Keep each task's way through the thread (`SwitchTimeline`), for the benchmarks'
    /// task records.
    pub record_timeline: bool,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        let q = QueueConfig::default();
        SwitchConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], scheduler_common::DEFAULT_PORT)),
            queue_capacity: q.capacity,
            priorities: q.priorities,
            max_passes: q.max_passes,
            batch: 64,
            access: AccessRules::default(),
            get_task_rate: 0,
            get_task_burst: 64,
            wait: WaitConfig::default(),
            record_timeline: false,
        }
    }
}

impl SwitchConfig {
    fn queue(&self) -> QueueConfig {
        QueueConfig {
            capacity: self.queue_capacity,
            priorities: self.priorities,
            max_passes: self.max_passes,
            initial_pointer: 0,
        }
    }
}

/// A snapshot of the switch's counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SwitchStats {
    pub queue: QueueStats,
    /// Tasks queued per priority level (index 0 = priority 1).
    pub queue_depth: Vec<u32>,
    pub capacity: u32,
    /// Tasks queued per resource bit and unconstrained (what `bolt provision` reads).
    #[serde(flatten)]
    pub backlog: crate::queue::ResourceBacklog,
    /// Datagrams received.
    pub received: u64,
    /// Datagrams rejected by the decoder, per DecodeError kind (see `DecodeError::NAMES`).
    pub malformed: [u64; scheduler_common::DecodeError::KINDS],
    /// Valid Bolt messages that do not go to a switch (ASSIGN, NOOP, COMPLETE, ...).
    pub wrong_direction: u64,
    /// Datagrams from a non-IPv4 source.
    pub non_ipv4: u64,
    /// Datagrams the kernel refused to send.
    pub send_failures: u64,
    /// Valid messages refused by the access rules, per origin op like `queue.cost`
    /// (SUBMIT from outside the client prefixes; REFILL_REQ and RETURN from outside the
    /// agents; GET_TASK and GET_BUNDLE from outside the executors).
    pub refused: [u64; crate::queue::ORIGINS.len()],
    /// RETURN entries beyond their sender's credit (tasks tier 2 REFILLed to that address
    /// minus tasks it RETURNed): not queued, each sent back to its client as QUEUE_FULL.
    pub return_over_credit: u64,
    /// REFILLs to an agent whose credit slot another address held (that address's credit
    /// was dropped: see `switch::credit`).
    pub credit_takeovers: u64,
    /// GET_TASKs over their source's rate limit, dropped (a flooding source cannot take
    /// every task).
    pub get_task_limited: u64,
    /// Parked requests (GET_TASK with WAIT, REFILL_REQ that found nothing).
    pub park: ParkStats,
    /// BEST and HINT.
    pub hints: HintStats,
    /// Where the switch thread's time goes: its wake-up wait, handling per message,
    /// sending per datagram.
    pub thread: ThreadStats,
}

impl SwitchStats {
    pub fn malformed_total(&self) -> u64 {
        self.malformed.iter().sum()
    }

    /// Messages of `op` refused by the access rules.
    pub fn refused_of(&self, op: scheduler_common::Op) -> u64 {
        self.refused[crate::queue::origin_index(op)]
    }
}

struct Shared {
    stop: AtomicBool,
    stats: Mutex<SwitchStats>,
    /// Handed over by the packet thread when it stops, if it kept one.
    timeline: Mutex<SwitchTimeline>,
}

/// A running software switch.
pub struct SwitchHandle {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl SwitchHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Counters as last published (every 100 ms, and at shutdown).
    pub fn stats(&self) -> SwitchStats {
        self.shared.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The counters as the metrics endpoint serves them: `{"switch": SwitchStats}`.
    pub fn stats_source(&self) -> crate::metrics::StatsSource {
        let shared = self.shared.clone();
        Arc::new(move || {
            let stats = shared.stats.lock().map(|s| s.clone()).unwrap_or_default();
            serde_json::json!({ "switch": stats })
        })
    }

    /// Stops the packet thread and waits for it.
    pub fn shutdown(self) -> anyhow::Result<SwitchStats> {
        Ok(self.shutdown_with_timeline()?.0)
    }

    /// Stops the packet thread, waits for it, and takes what `record_timeline` kept
    /// (empty without it).
    pub fn shutdown_with_timeline(mut self) -> anyhow::Result<(SwitchStats, SwitchTimeline)> {
        self.stop_and_join()?;
        let timeline = self.shared.timeline.lock().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default();
        Ok((self.stats(), timeline))
    }

    fn stop_and_join(&mut self) -> anyhow::Result<()> {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().map_err(|_| anyhow::anyhow!("switch thread panicked"))??;
        }
        Ok(())
    }
}

impl Drop for SwitchHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// Binds the socket and starts the switch's packet thread.
pub fn spawn(config: SwitchConfig) -> anyhow::Result<SwitchHandle> {
    if !config.listen.is_ipv4() {
        bail!("--listen {}: the Bolt wire format carries IPv4 addresses; listen on IPv4", config.listen);
    }
    if config.batch == 0 || config.batch > 1024 {
        bail!("batch {} must be 1 to 1024", config.batch);
    }
    let scheduler = Scheduler::new(config.queue()).map_err(anyhow::Error::msg)?;
    let sock: UdpSocket = crate::net::bind_udp(config.listen, Some(Duration::from_millis(50)))
        .with_context(|| format!("binding the switch to {}", config.listen))?;
    crate::net::enable_arrival_stamps(&sock).context("asking for arrival stamps on the switch's socket")?;
    let local_addr = sock.local_addr()?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        stats: Mutex::new(SwitchStats { capacity: config.queue_capacity, ..SwitchStats::default() }),
        timeline: Mutex::new(SwitchTimeline::default()),
    });
    let thread_shared = shared.clone();
    let batch = config.batch;
    let access = config.access.clone();
    let limit = GetTaskLimit::new(config.get_task_rate, config.get_task_burst);
    let tier2 = Tier2::new(scheduler, config.wait);
    let timeline = config.record_timeline.then(timeline::Timeline::default);
    let thread = std::thread::Builder::new()
        .name("bolt-switch".into())
        .spawn(move || server::packet_loop(sock, tier2, batch, &access, limit, timeline, &thread_shared))?;
    tracing::info!(
        %local_addr,
        capacity = config.queue_capacity,
        priorities = config.priorities,
        "software switch listening"
    );
    Ok(SwitchHandle { local_addr, shared, thread: Some(thread) })
}

#[cfg(test)]
mod tests;

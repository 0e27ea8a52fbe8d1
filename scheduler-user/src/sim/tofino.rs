//! Tier 2 as a Tofino runs it: the project's queue [`Pipeline`], unchanged, behind a
//! model of the hardware around it.
//!
//! - One pass per packet per pipeline slot: the pipeline starts at most `passes_per_sec`
//!   passes a second, whatever the packet (a new packet, a recirculation, a REPAIR), so
//!   recirculations take bandwidth from new packets.
//! - Recirculated packets come back `pass_ns` after their pass and go before new ones
//!   (the software switch's `Scheduler` serves its recirculation FIFO first as well).
//! - New packets wait in a bounded ingress buffer; a packet that finds it full is
//!   dropped (its sender's timeout resends it).
//! - A packet leaves `pass_ns` after the pass that sent it.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use scheduler_common::{Entry, JobRef, Message, Requester, Task};
use serde::Serialize;

use super::clock::Nanos;
use crate::queue::{Packet, Pipeline, QueueConfig, QueueStats, Sink};

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
}

impl TofinoParams {
    /// The thesis's measured rate: 23 M scheduling decisions a second on one pipeline
    /// (§5.2), each a single pass; a recirculation under a microsecond (§3.3).
    pub fn thesis() -> TofinoParams {
        TofinoParams {
            passes_per_sec: 23e6,
            pass_ns: 500,
            ingress_packets: 100_000,
            queue_capacity: 1 << 17,
            priorities: 4,
        }
    }

    /// The software switch of the testbed: one thread, 270 K packets a second measured
    /// with a single-threaded load generator (docs/benchmarks.md).
    pub fn software_switch() -> TofinoParams {
        TofinoParams { passes_per_sec: 270e3, pass_ns: 1_000, ..TofinoParams::thesis() }
    }
}

/// What a pass sent out, with the time it leaves the switch.
#[derive(Clone, Copy, Debug)]
pub enum Departure {
    Assign { at: Nanos, to: SocketAddrV4, entry: Entry },
    Noop { at: Nanos, to: SocketAddrV4, who: Requester },
    QueueFull { at: Nanos, to: SocketAddrV4, job: JobRef, first: usize, count: usize },
    Refill { at: Nanos, to: SocketAddrV4, first: usize, count: usize },
}

/// Collects a pass's outputs; entries and refused tasks go to shared buffers.
#[derive(Default)]
pub struct Departures {
    pub out: Vec<Departure>,
    pub entries: Vec<Entry>,
    pub tasks: Vec<Task>,
    at: Nanos,
}

impl Departures {
    pub fn clear(&mut self) {
        self.out.clear();
        self.entries.clear();
        self.tasks.clear();
    }
}

impl Sink for Departures {
    fn assign(&mut self, to: SocketAddrV4, entry: &Entry) {
        self.out.push(Departure::Assign { at: self.at, to, entry: *entry });
    }
    fn noop(&mut self, to: SocketAddrV4, who: Requester) {
        self.out.push(Departure::Noop { at: self.at, to, who });
    }
    fn queue_full(&mut self, to: SocketAddrV4, job: JobRef, tasks: &[Task]) {
        let first = self.tasks.len();
        self.tasks.extend_from_slice(tasks);
        self.out.push(Departure::QueueFull { at: self.at, to, job, first, count: tasks.len() });
    }
    fn refill(&mut self, to: SocketAddrV4, entries: &[Entry]) {
        let first = self.entries.len();
        self.entries.extend_from_slice(entries);
        self.out.push(Departure::Refill { at: self.at, to, first, count: entries.len() });
    }
}

/// Counters of the model (the pipeline keeps its own [`QueueStats`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TofinoStats {
    pub arrived: u64,
    pub dropped: u64,
    pub passes: u64,
    pub max_ingress: usize,
}

pub struct Tofino {
    pipeline: Pipeline,
    p: TofinoParams,
    /// Time between pass starts, picoseconds (exact at any rate to 1 ps).
    interval_ps: u64,
    /// When the pipeline can start its next pass, picoseconds.
    free_ps: u64,
    ingress: VecDeque<(Nanos, Packet)>,
    recirculating: VecDeque<(Nanos, Packet)>,
    stats: TofinoStats,
}

impl Tofino {
    pub fn new(p: TofinoParams) -> Result<Tofino, String> {
        let config = QueueConfig { capacity: p.queue_capacity, priorities: p.priorities, ..QueueConfig::default() };
        let interval_ps = (1e12 / p.passes_per_sec).round().max(1.0) as u64;
        Ok(Tofino {
            pipeline: Pipeline::new(config)?,
            p,
            interval_ps,
            free_ps: 0,
            ingress: VecDeque::new(),
            recirculating: VecDeque::new(),
            stats: TofinoStats::default(),
        })
    }

    pub fn queue_stats(&self) -> &QueueStats {
        self.pipeline.stats()
    }

    pub fn stats(&self) -> &TofinoStats {
        &self.stats
    }

    pub fn params(&self) -> &TofinoParams {
        &self.p
    }

    /// A message arriving at `now`: parsed into its packet and queued at the ingress.
    /// False when the ingress buffer is full (dropped) or the message is not for tier 2.
    pub fn arrive(&mut self, now: Nanos, msg: &Message<'_>, src: SocketAddrV4) -> bool {
        self.stats.arrived += 1;
        if self.ingress.len() >= self.p.ingress_packets {
            self.stats.dropped += 1;
            return false;
        }
        let Ok(pkt) = self.pipeline.admit(msg, src) else { return false };
        self.ingress.push_back((now, pkt));
        self.stats.max_ingress = self.stats.max_ingress.max(self.ingress.len());
        true
    }

    /// Runs every pass that starts by `now`, in order; returns when the next pass could
    /// start if packets are still waiting.
    pub fn run_until(&mut self, now: Nanos, out: &mut Departures) -> Option<Nanos> {
        loop {
            let free = self.free_ps.div_ceil(1000);
            let recirc_at = self.recirculating.front().map(|r| r.0);
            let ingress_at = self.ingress.front().map(|r| r.0);
            let ready = match (recirc_at, ingress_at) {
                (None, None) => return None,
                (a, b) => a.unwrap_or(Nanos::MAX).min(b.unwrap_or(Nanos::MAX)),
            };
            let start = free.max(ready);
            if start > now {
                return Some(start);
            }
            // Recirculated packets first, as the switch's FIFO does.
            let pkt = if recirc_at.is_some_and(|t| t <= start) {
                self.recirculating.pop_front().map(|r| r.1)
            } else {
                self.ingress.pop_front().map(|r| r.1)
            };
            let pkt = pkt?;
            self.free_ps = self.free_ps.max(start * 1000) + self.interval_ps;
            self.stats.passes += 1;
            let leaves = start + self.p.pass_ns;
            out.at = leaves;
            let result = self.pipeline.pass(pkt, out);
            for again in result.recirculate.into_iter().chain(result.spawn) {
                self.recirculating.push_back((leaves, again));
            }
        }
    }
}

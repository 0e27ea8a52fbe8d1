//! What a run measured: the scheduling delay of every task submitted inside the measured
//! window (after the warm-up), the tier-2 pipeline's load, and the simulator's own cost.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::clock::Nanos;
use super::tofino::TofinoStats;

/// Scheduling delays (submit → start), nanoseconds, of the tasks in the window, and
/// their part before the executor's thread (submit → the task reaching the executor).
pub struct Recorder {
    pub from: Nanos,
    pub until: Nanos,
    hist: Histogram<u64>,
    before_arrival: Histogram<u64>,
    /// Tasks submitted in the window (started or not).
    pub expected: u64,
    pub started: u64,
}

impl Recorder {
    pub fn new(from: Nanos, until: Nanos) -> Recorder {
        Recorder {
            from,
            until,
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            before_arrival: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            expected: 0,
            started: 0,
        }
    }

    pub fn in_window(&self, submitted: Nanos) -> bool {
        (self.from..self.until).contains(&submitted)
    }

    pub fn submitted(&mut self, tasks: u64) {
        self.expected += tasks;
    }

    /// A task submitted at `submitted` reached its executor at `arrived` and started at
    /// `now`.
    pub fn start(&mut self, submitted: Nanos, arrived: Nanos, now: Nanos) {
        self.started += 1;
        self.hist.saturating_record(now - submitted);
        self.before_arrival.saturating_record(arrived.saturating_sub(submitted));
    }

    /// The q-quantile in µs of the part before the executor's thread, over the tasks
    /// started (what the testbed's `before_arrival_ns` measures); None before any.
    pub fn before_arrival_us(&self, q: f64) -> Option<f64> {
        (!self.before_arrival.is_empty()).then(|| self.before_arrival.value_at_quantile(q) as f64 / 1e3)
    }

    /// The q-quantile in µs over every task of the window, a task not started counting
    /// as the longest: None when the quantile falls among the tasks not started.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        if self.expected == 0 {
            return None;
        }
        let rank = (q * self.expected as f64).ceil().max(1.0) as u64;
        if rank > self.started {
            return None;
        }
        let within = rank as f64 / self.started as f64;
        Some(self.hist.value_at_quantile(within.min(1.0)) as f64 / 1e3)
    }

    pub fn mean_us(&self) -> f64 {
        self.hist.mean() / 1e3
    }
}

/// Tier 2's side of a Bolt run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SwitchReport {
    /// Packets that reached the switch, per task run (SUBMIT, GET_TASK, REFILL_REQ).
    pub packets_in_per_task: f64,
    /// Packets the switch sent (ASSIGN, NOOP, REFILL, QUEUE_FULL), per task run.
    pub packets_out_per_task: f64,
    /// Pipeline passes per task run (first passes and recirculations).
    pub passes_per_task: f64,
    /// HINTs sent per task run.
    #[serde(default)]
    pub hints_per_task: f64,
    /// Passes over the pipeline's budget while the measured tasks were submitted.
    pub utilisation: f64,
    pub dropped: u64,
    pub queue_full_tasks: u64,
    pub max_ingress: usize,
    /// Messages in and answers out, by kind.
    #[serde(default)]
    pub counters: TofinoStats,
    /// The park table: requests parked, answered with tasks, expired, refused (full).
    #[serde(default)]
    pub parked: u64,
    #[serde(default)]
    pub answered_from_park: u64,
    #[serde(default)]
    pub park_expired: u64,
    #[serde(default)]
    pub park_refused: u64,
}

/// Tier 1's side of a two-level run, summed over the hosts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Tier1Report {
    /// GET_TASKs passed on to tier 2 by the bypass rule.
    pub bypasses: u64,
    /// GET_TASKs that found the rings empty and went on to tier 2.
    pub misses: u64,
    /// Tasks RETURNed by the hint reaction and by lease expiry.
    pub hint_returned: u64,
    pub lease_returned: u64,
    /// Tasks RETURNed in answer to tier 2's RECALLs.
    #[serde(default)]
    pub recalled: u64,
    /// REFILL_REQs sent.
    pub refill_reqs: u64,
    /// Executors that waited at their host: answered with a task, and answered NOOP at
    /// the end of the host wait.
    #[serde(default)]
    pub waiters_served: u64,
    #[serde(default)]
    pub waiters_expired: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub system: String,
    pub workload: String,
    pub executors: u32,
    pub hosts: u32,
    pub seed: u64,
    pub simulated_s: f64,
    pub tasks_measured: u64,
    pub tasks_started: u64,
    pub tasks_run: u64,
    /// None: the quantile falls among tasks never started (saturated).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub mean_us: f64,
    /// The delays' part before the executor's thread (submit → the task reaching its
    /// executor), over the tasks started.
    #[serde(default)]
    pub p50_before_arrival_us: Option<f64>,
    #[serde(default)]
    pub p99_before_arrival_us: Option<f64>,
    pub switch: Option<SwitchReport>,
    /// Two-level: tasks the hosts' rings served (XDP hits), per task run.
    #[serde(default)]
    pub tier1_hits_per_task: Option<f64>,
    #[serde(default)]
    pub tier1: Option<Tier1Report>,
    pub steal_attempts: u64,
    pub stolen: u64,
    /// MATRIX: STEAL messages delivered (PROBE, LOAD, REQ, GRANT, ACK, DONE).
    #[serde(default)]
    pub steal_messages: u64,
    pub events: u64,
    pub wall_s: f64,
    pub events_per_s: f64,
    /// Peak resident memory of this process (VmHWM), MiB.
    pub peak_rss_mib: f64,
    pub rss_bytes_per_executor: f64,
    /// (task, executor, start time in ns) of every task, in start order, when the
    /// configuration asks for them (`record_starts`).
    #[serde(skip)]
    pub starts: Vec<(u32, u32, Nanos)>,
}

/// The process's peak resident set, bytes (0 where /proc is not there).
pub fn peak_rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

pub fn fmt_us(v: Option<f64>) -> String {
    match v {
        Some(us) if us >= 1000.0 => format!("{:.2} ms", us / 1000.0),
        Some(us) => format!("{us:.1} µs"),
        None => "saturated".into(),
    }
}

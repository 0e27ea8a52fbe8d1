//! `bolt sim`: a deterministic discrete-event simulator of Bolt and of the schedulers it
//! is compared with, at up to 1,000,000 executors on one machine.
//!
//! It runs the project's own code where the project has it: tier 2 is the software
//! switch's [`Tier2`](crate::switch::Tier2) (the queue pipeline, unchanged, with BEST,
//! HINT and parked requests) behind a Tofino model ([`tofino`]); tier 1 is the agent's
//! own policy state machines (refill, prefetch sizing, hint reaction, leases, stealing)
//! and the XDP bypass rule over the XDP rings' semantics ([`host`]); the jobs come from
//! the benchmarks' generators
//! ([`workload`]). Around them: a leaf-spine network ([`network`]), executors
//! ([`executors`]), and the alternatives ([`baselines`]). docs/sim.md describes the model.

pub mod baselines;
pub mod cli;
pub mod clock;
mod engine;
pub mod executors;
pub mod host;
pub mod network;
pub mod report;
#[cfg(test)]
mod tests;
pub mod tofino;
pub mod workload;

use serde::Serialize;

use crate::agent::refill::RefillPolicy;
use crate::bench::workload::TraceParams;
pub use baselines::{CloudKonParams, SparrowParams};
pub use executors::ExecParams;
pub use network::NetParams;
pub use report::Report;
pub use tofino::TofinoParams;
pub use workload::{ScriptedJob, WorkloadSpec};

/// The systems the simulator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    /// Bolt, executors asking tier 2 directly.
    OneLevel,
    /// Bolt with host agents and XDP rings refilled from tier 2.
    TwoLevel,
    /// Sparrow: batch sampling, d probes per task, late binding.
    Sparrow,
    /// MATRIX: per-host queues and adaptive work stealing, no central queue.
    Matrix,
    /// CloudKon: one global pull queue with a service latency.
    Cloudkon,
}

impl System {
    pub const ALL: [System; 5] =
        [System::OneLevel, System::TwoLevel, System::Sparrow, System::Matrix, System::Cloudkon];

    pub fn name(self) -> &'static str {
        match self {
            System::OneLevel => "one-level",
            System::TwoLevel => "two-level",
            System::Sparrow => "sparrow",
            System::Matrix => "matrix",
            System::Cloudkon => "cloudkon",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    pub system: System,
    pub seed: u64,
    pub executors: u32,
    pub executors_per_host: u32,
    pub workload: WorkloadSpec,
    /// Tasks submitted before this are not measured.
    pub warmup_s: f64,
    /// Simulated time after the last submission for the measured tasks to start.
    pub drain_s: f64,
    pub net: NetParams,
    pub tofino: TofinoParams,
    pub exec: ExecParams,
    /// The agent's refill policy (`bolt agent`'s defaults unless set).
    #[serde(skip)]
    pub refill: RefillPolicy,
    /// Entries one XDP ring holds.
    pub ring_capacity: u32,
    pub sparrow: SparrowParams,
    pub cloudkon: CloudKonParams,
    /// Keep every task's start time in the report (`Report::starts`), for scenarios.
    pub record_starts: bool,
    /// MATRIX: the STEAL messages an event sends that arrive at the same instant travel
    /// as one event (engine.rs, `flush_steals`); off, each message is its own event.
    pub batch_steals: bool,
}

impl WorkloadSpec {
    pub fn name(&self) -> String {
        match self {
            WorkloadSpec::Sw1 { utilization, .. } => format!("sw1@{:.0}%", utilization * 100.0),
            WorkloadSpec::Trace { params, .. } => {
                format!("trace@{:.0}%{}", params.load * 100.0, if params.sigma == 0.0 { " fixed" } else { "" })
            }
            WorkloadSpec::Scripted { jobs, .. } => format!("scripted ({} jobs)", jobs.len()),
        }
    }
}

/// The testbed's wait for a CPU between an ASSIGN's arrival and its task's start, mean
/// of an exponential: calibrated on one point, SW1 at 40 % one-level, where the testbed's
/// median (0.292 ms, docs/benchmarks.md, "Two levels against one after tuning tier 1")
/// exceeds the simulated one without it (0.114 ms) by 0.178 ms = ln 2 × 257 µs.
pub const TESTBED_CPU_WAIT_MEAN_NS: u64 = 257_000;

/// Node ids are 16 bits on the wire (REFILL_REQ, GET_TASK's requester): 10 executors a
/// host, or as many more as keep the hosts within 65,536 (16 at 1,000,000 executors).
pub fn executors_per_host(executors: u32) -> u32 {
    executors.div_ceil(1 << 16).max(10)
}

impl SimConfig {
    /// The scale experiment: a data centre of 10 executors per host and 40 hosts per rack
    /// under a Tofino; the trace's job shape with every task 5 ms and no bursts, at
    /// `load`; one client per 1,000 executors.
    pub fn scale(system: System, executors: u32, load: f64, seconds: f64, seed: u64) -> SimConfig {
        let mut params = TraceParams::new(seed, seconds, executors, load);
        params.sigma = 0.0;
        params.burst_probability = 0.0;
        SimConfig {
            system,
            seed,
            executors,
            executors_per_host: executors_per_host(executors),
            workload: WorkloadSpec::Trace { params, clients: executors.div_ceil(1000).max(2) },
            warmup_s: seconds * 0.3,
            drain_s: seconds,
            net: NetParams::datacenter(),
            tofino: TofinoParams::thesis(),
            exec: ExecParams { start_spread_ns: 1_000_000, ..ExecParams::default() },
            refill: RefillPolicy::default(),
            ring_capacity: 4096,
            sparrow: SparrowParams::default(),
            cloudkon: CloudKonParams::default(),
            record_starts: false,
            batch_steals: true,
        }
    }

    /// The namespace testbed of docs/benchmarks.md: the software switch, veth links,
    /// sleeping executors; `executors` on `hosts` worker hosts.
    pub fn testbed(system: System, workload: WorkloadSpec, executors: u32, hosts: u32, seed: u64) -> SimConfig {
        SimConfig {
            system,
            seed,
            executors,
            executors_per_host: executors.div_ceil(hosts.max(1)),
            workload,
            warmup_s: 0.0,
            drain_s: 30.0,
            net: NetParams::testbed(),
            tofino: TofinoParams::software_switch(),
            // `thread::sleep` runs a 10-ms task for 10.1 to 10.2 ms there.
            exec: ExecParams {
                run_overhead_ns: 150_000,
                cpu_wait_mean_ns: TESTBED_CPU_WAIT_MEAN_NS,
                ..ExecParams::default()
            },
            refill: RefillPolicy {
                low_watermark: executors.div_ceil(hosts.max(1)),
                batch: executors.div_ceil(hosts.max(1)).min(255) as u8,
                ..RefillPolicy::default()
            },
            ring_capacity: 4096,
            sparrow: SparrowParams::default(),
            cloudkon: CloudKonParams::default(),
            record_starts: false,
            batch_steals: true,
        }
    }
}

/// Runs one configuration.
pub fn run(cfg: &SimConfig, progress: Option<&indicatif::ProgressBar>) -> anyhow::Result<Report> {
    anyhow::ensure!(cfg.executors > 0 && cfg.executors < executors::MAX_EXECUTORS, "1 to 16,777,215 executors");
    Ok(engine::World::new(cfg)?.run(progress))
}

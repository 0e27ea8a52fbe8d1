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
pub mod calibrate;
pub mod cli;
pub mod clock;
mod engine;
pub mod executors;
pub mod host;
pub mod network;
pub mod report;
pub mod spells;
#[cfg(test)]
mod tests;
pub mod tofino;
pub mod validate;
pub mod workload;

use serde::Serialize;

use clock::Nanos;

use crate::agent::refill::RefillPolicy;
use crate::bench::workload::TraceParams;
pub use baselines::{CloudKonParams, SparrowParams};
pub use executors::{Draw, ExecParams};
pub use network::NetParams;
pub use report::Report;
use scheduler_common::maps::DEFAULT_HOST_WAIT_NS;
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

/// The testbed kernel's jiffy (CONFIG_HZ=250, Debian's default; `clock_getres` of
/// CLOCK_MONOTONIC_COARSE gives 4 ms on this machine): the tick of the XDP program's
/// ring stamps.
pub const TESTBED_STAMP_TICK_NS: Nanos = 4_000_000;

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
    /// Two-level: how long an executor whose GET_TASK finds the rings empty waits at its
    /// host for the agent's next REFILL before it is answered NOOP (`bolt agent
    /// --host-wait-ms`); 0: it goes on to tier 2 with WAIT and waits there.
    pub host_wait_ns: Nanos,
    /// The tick of the clock the XDP program stamps ring entries with
    /// (`bpf_ktime_get_coarse_ns`, CLOCK_MONOTONIC_COARSE: the time of the kernel's last
    /// jiffy). The agent reads their age, for RECALL and its lease scan, on
    /// CLOCK_MONOTONIC, so a stamp is 0 to one tick older than its entry.
    pub stamp_tick_ns: Nanos,
    /// Windows (from, to) in which the whole machine stops, as the testbed's did
    /// (`ThreadTimes::stalls`): every event due in one happens at its end. None at scale.
    #[serde(skip)]
    pub stalls: Vec<(Nanos, Nanos)>,
    /// When the machine was slow, as the testbed's was (`ThreadTimes::spells`): the
    /// threads' costs drawn in one come from the top of their distributions. None at
    /// scale.
    #[serde(skip)]
    pub spells: std::sync::Arc<spells::Spells>,
    /// The wait of tier 2's thread for a CPU when a message finds it idle (0 at scale: a
    /// Tofino has no thread). On the testbed the software switch is one more thread on
    /// the two cores the executors share.
    pub switch_cpu_wait: Draw,
    /// How late a client sends a job after it falls due (never before its own previous
    /// one). 0 at scale; on the testbed the replaying client's timer
    /// ([`testbed_client_late`], or what `validate`'s run measured).
    pub client_late: Draw,
}

/// The testbed's clients (`bench::workload::replay`) sleep until each job's due time on
/// tokio's timer, whose wheel turns once a millisecond: the sends spread over 0 to 1 ms
/// after the due times (measured, they also sit above a floor of 0 to 1 ms, the timer's
/// phase, which adds the same to every send and moves no delay). `bolt sim validate`
/// draws from what the run it compares with measured (`ThreadTimes::client_late_ns`);
/// this is for runs made before that was recorded.
pub fn testbed_client_late() -> Draw {
    Draw::Quantiles(vec![(0.0, 0), (1.0, 1_000_000)])
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

/// What the testbed's sleeping executor threads add to a task, measured on this machine
/// at one utilisation: quantiles (cumulative probability, ns) of the wait for a CPU
/// between a task reaching the thread and the thread running, and of the overshoot of
/// `std::thread::sleep` past the task's length.
#[derive(Clone, Copy, Debug)]
pub struct MeasuredThreads {
    pub utilisation: f64,
    pub wait_ns: &'static [(f64, Nanos)],
    pub overshoot_ns: &'static [(f64, Nanos)],
}

/// `bolt sim calibrate --seconds 15` (40 threads, 10-ms tasks, 15 s at each of SW1's 40,
/// 70 and 90 %, at a load average of 5.1 to 5.4 from other work on the machine, within
/// the 4 to 7 of the testbed's runs): docs/bench-results/sim-calibrate.jsonl. Taken as
/// measured; nothing is fitted to the testbed's delays.
pub const TESTBED_THREADS: [MeasuredThreads; 3] = [
    MeasuredThreads {
        utilisation: 0.4,
        wait_ns: &[
            (0.0, 3255),
            (0.01, 6840),
            (0.05, 7812),
            (0.1, 8913),
            (0.25, 19789),
            (0.5, 66244),
            (0.75, 190009),
            (0.9, 378359),
            (0.95, 491037),
            (0.98, 667961),
            (0.99, 1269538),
            (0.995, 2982797),
            (0.999, 5748985),
            (1.0, 58002325),
        ],
        overshoot_ns: &[
            (0.0, 16402),
            (0.01, 26106),
            (0.05, 40327),
            (0.1, 51494),
            (0.25, 73807),
            (0.5, 102239),
            (0.75, 167667),
            (0.9, 287806),
            (0.95, 417339),
            (0.98, 1021830),
            (0.99, 2802555),
            (0.995, 4466125),
            (0.999, 17622167),
            (1.0, 73027361),
        ],
    },
    MeasuredThreads {
        utilisation: 0.7,
        wait_ns: &[
            (0.0, 2734),
            (0.01, 3645),
            (0.05, 7151),
            (0.1, 7892),
            (0.25, 15032),
            (0.5, 46950),
            (0.75, 166688),
            (0.9, 391602),
            (0.95, 566786),
            (0.98, 906973),
            (0.99, 1679293),
            (0.995, 3088564),
            (0.999, 5290918),
            (1.0, 13395529),
        ],
        overshoot_ns: &[
            (0.0, 15810),
            (0.01, 28811),
            (0.05, 40898),
            (0.1, 51595),
            (0.25, 76231),
            (0.5, 117543),
            (0.75, 251973),
            (0.9, 466933),
            (0.95, 695484),
            (0.98, 1568095),
            (0.99, 3265305),
            (0.995, 4848455),
            (0.999, 9758324),
            (1.0, 21838812),
        ],
    },
    MeasuredThreads {
        utilisation: 0.9,
        wait_ns: &[
            (0.0, 2854),
            (0.01, 3144),
            (0.05, 5789),
            (0.1, 6549),
            (0.25, 8713),
            (0.5, 25428),
            (0.75, 83364),
            (0.9, 229312),
            (0.95, 359246),
            (0.98, 542419),
            (0.99, 1534718),
            (0.995, 3775949),
            (0.999, 7661050),
            (1.0, 16147222),
        ],
        overshoot_ns: &[
            (0.0, 15180),
            (0.01, 27418),
            (0.05, 39285),
            (0.1, 49451),
            (0.25, 72785),
            (0.5, 110702),
            (0.75, 230711),
            (0.9, 427715),
            (0.95, 584128),
            (0.98, 1181168),
            (0.99, 2284733),
            (0.995, 4097495),
            (0.999, 8374201),
            (1.0, 57043933),
        ],
    },
];

impl MeasuredThreads {
    /// The measurement at the utilisation nearest `load`.
    pub fn nearest(load: f64) -> MeasuredThreads {
        let off = |m: &MeasuredThreads| (m.utilisation - load).abs();
        TESTBED_THREADS.into_iter().min_by(|a, b| off(a).total_cmp(&off(b))).expect("three measurements")
    }
}

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
            host_wait_ns: DEFAULT_HOST_WAIT_NS,
            // A data centre's kernel at HZ=1000: the stamps' own millisecond.
            stamp_tick_ns: 1_000_000,
            stalls: Vec::new(),
            spells: Default::default(),
            switch_cpu_wait: Draw::Fixed(0),
            client_late: Draw::Fixed(0),
        }
    }

    /// The namespace testbed of docs/benchmarks.md: the software switch, veth links,
    /// sleeping executors; `executors` on `hosts` worker hosts.
    pub fn testbed(system: System, workload: WorkloadSpec, executors: u32, hosts: u32, seed: u64) -> SimConfig {
        let load = match &workload {
            WorkloadSpec::Sw1 { utilization, .. } => *utilization,
            WorkloadSpec::Trace { params, .. } => params.load,
            WorkloadSpec::Scripted { .. } => 1.0,
        };
        let threads = MeasuredThreads::nearest(load);
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
            // Sleeping threads sharing two cores, as measured (`TESTBED_THREADS`).
            exec: ExecParams {
                run_overhead: Draw::Quantiles(threads.overshoot_ns.to_vec()),
                cpu_wait: Draw::Quantiles(threads.wait_ns.to_vec()),
                ..ExecParams::default()
            },
            refill: RefillPolicy::default(),
            ring_capacity: 4096,
            sparrow: SparrowParams::default(),
            cloudkon: CloudKonParams::default(),
            record_starts: false,
            batch_steals: true,
            host_wait_ns: DEFAULT_HOST_WAIT_NS,
            stamp_tick_ns: TESTBED_STAMP_TICK_NS,
            stalls: Vec::new(),
            spells: Default::default(),
            switch_cpu_wait: Draw::Fixed(0),
            client_late: testbed_client_late(),
        }
    }
}

/// Runs one configuration.
pub fn run(cfg: &SimConfig, progress: Option<&indicatif::ProgressBar>) -> anyhow::Result<Report> {
    anyhow::ensure!(cfg.executors > 0 && cfg.executors < executors::MAX_EXECUTORS, "1 to 16,777,215 executors");
    Ok(engine::World::new(cfg)?.run(progress))
}

//! `bolt bench`: the measurements behind docs/benchmarks.md. Each experiment runs alone
//! and prints a table or, with --json, one JSON object.

pub mod bitvectors;
pub mod bundle;
pub mod claims;
pub mod cloudkon;
pub mod cluster;
pub mod constraints;
pub mod decisions;
pub mod matrix;
pub mod noop;
pub mod output;
pub mod peers;
pub mod plot;
pub mod priority;
pub mod records;
pub mod rlq;
pub mod steal;
pub mod suite;
pub mod sw1;
pub mod tiers;
pub mod trace;
pub mod workload;

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub experiment: Experiment,
}

#[derive(clap::Subcommand, Debug)]
pub enum Experiment {
    /// Scheduling decisions per second with no-op executors (thesis Figure 11).
    Noop(noop::NoopArgs),
    /// Two-level (XDP tier 1) against one-level scheduling on a network-namespace
    /// testbed: GET_TASK round trip, decisions per second, switch packets per task
    /// (needs root).
    Tiers(tiers::TiersArgs),
    /// What exactly-once execution (claim before run) costs: tasks/s and submit→start
    /// latency with and without it, in alternating rounds of one run.
    Claims(claims::ClaimsArgs),
    /// Task bundling (GET_BUNDLE): switch packets per task, decisions and tasks per
    /// second and scheduling delay of short tasks with executors asking for 1, 4, 10 and
    /// 16 tasks at a time, in one run on loopback.
    Bundle(bundle::BundleArgs),
    /// CloudKon's evaluation: efficiency of 1/16/128-ms sleep tasks as executors grow,
    /// one-level and two-level, the claim's overhead, and elasticity under a load step
    /// and drop with `bolt provision`'s executors (the sweep needs root for the testbed).
    Cloudkon(cloudkon::CloudkonArgs),
    /// The client's job queue at scale: bytes per task and selection latency of the
    /// state and resource bit vectors against a plain per-task array, at 10^6..10^8 ids.
    Bitvectors(bitvectors::BitvectorsArgs),
    /// Bolt against Dask, Ray, Celery with Redis and a plain Redis pull queue, and
    /// against the floor of its own idle-worker path (a relay with no scheduler), in one
    /// run on loopback: throughput and scheduling delay, and their ratios to Bolt.
    Peers(peers::PeersArgs),
    /// MATRIX work stealing under skew: every task lands on one host first; makespan and
    /// efficiency with and without stealing on a network-namespace testbed (needs root).
    Steal(steal::StealArgs),
    /// MATRIX's evaluation on the namespace testbed with capped links: image stacking
    /// across localities under MDL, all-pairs under MLB/MDL/RLDS/FLDS, the four DAG
    /// shapes under FLDS; efficiency, time per task, utilisation (needs root).
    Matrix(matrix::MatrixArgs),
    /// ns per packet of the XDP program (GET_TASK hit and miss, REFILL per task) with
    /// BPF_PROG_TEST_RUN. Needs root.
    Xdp(XdpArgs),
    /// Every experiment of the thesis's evaluation, one-level and two-level side by side:
    /// JSON lines and plots in a results directory, Markdown tables on stdout.
    All(suite::SuiteArgs),
    /// SW1: job completion time and scheduling delay from 40 % to 100 % utilisation
    /// (thesis Figure 12); `all --only sw1`.
    Sw1(suite::SuiteArgs),
    /// Where SW1's tasks waited, from a run's task records (`sw1 --task-records`): per
    /// level and load, tasks for idle and for busy executors, their pick-up, and tasks a
    /// busy node started while another node's executor was idle.
    Records(records::RecordsArgs),
    /// The Google-like trace: scheduling delay CDF and its breakdown (Figures 13, 14).
    Trace(suite::SuiteArgs),
    /// Queueing delay per priority level against FIFO, GET_TASK per level (Figures 15, 16).
    Priority(suite::SuiteArgs),
    /// SW2: throughput per node group under resource constraints (Figure 17).
    Constraints(suite::SuiteArgs),
    /// RLQ's synthetic and real-trace evaluations: the five placement policies of
    /// docs/rlq.md in a queueing model of the worker types, or on real executors
    /// (`--live`), per objective over seeds.
    Rlq(rlq::RlqArgs),
}

#[derive(clap::Args, Debug)]
pub struct XdpArgs {
    /// Runs per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub repeat: u32,
    /// Tasks per REFILL frame (1..=16).
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Measure the rings alone instead: one pop and one push per run on a queue map (the
    /// program's rings), on a queue map with its reservation counter, and on a lock-free
    /// ring in an array map (docs/xdp.md, "A lock-free ring"), alternating over rounds.
    #[arg(long)]
    pub rings: bool,
    /// Rounds of the ring measurement (`--rings`); each figure is their median.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
}

pub fn run_cli(args: BenchArgs) -> anyhow::Result<()> {
    let only = |mut a: suite::SuiteArgs, name: &str| {
        a.only = vec![name.to_string()];
        a
    };
    let suite_args = match args.experiment {
        Experiment::Noop(a) => return noop::print(&noop::run_compared(&a)?, a.json),
        Experiment::Tiers(a) => return tiers::print(&tiers::run(&a)?, a.json),
        Experiment::Xdp(a) => return run_xdp(&a),
        Experiment::Claims(a) => return claims::print(&claims::run(&a)?, a.json),
        Experiment::Bundle(a) => return bundle::print(&bundle::run(&a)?, a.json),
        Experiment::Cloudkon(a) => return cloudkon::print(&cloudkon::run(&a)?, a.json),
        Experiment::Bitvectors(a) => return bitvectors::print(&bitvectors::run(&a)?, a.json),
        Experiment::Peers(a) => return peers::print(&peers::run(&a)?, a.json),
        Experiment::Steal(a) => return steal::print(&steal::run(&a)?, a.json),
        Experiment::Rlq(a) => return rlq::print(&rlq::run(&a)?, a.json),
        Experiment::Matrix(a) => return matrix::print(&matrix::run(&a)?, a.json),
        Experiment::Records(a) => return records::print(&records::run(&a)?, a.json),
        Experiment::All(a) => a,
        Experiment::Sw1(a) => only(a, "sw1"),
        Experiment::Trace(a) => only(a, "trace"),
        Experiment::Priority(a) => only(a, "priority"),
        Experiment::Constraints(a) => only(a, "constraints"),
    };
    suite::print(&suite::run(&suite_args)?);
    Ok(())
}

fn run_xdp(a: &XdpArgs) -> anyhow::Result<()> {
    if a.rings {
        let report = crate::xdp::ring_bench::run(a.repeat, a.rounds)?;
        if a.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            println!("{report}");
        }
        return Ok(());
    }
    let opts = crate::xdp::bench::BenchOptions { repeat: a.repeat, refill_batch: a.batch };
    let report = crate::xdp::bench::run(opts)?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{report}");
    }
    Ok(())
}

/// A progress bar over `total`, drawn only when stderr is a terminal.
pub(crate) fn progress_bar(total: Duration) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total.as_millis() as u64);
    if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed_precise} [{bar:40}] {percent}%") {
        bar.set_style(style);
    }
    bar
}

//! `bolt bench`: the measurements behind docs/benchmarks.md. Each experiment runs alone
//! and prints a table or, with --json, one JSON object.

pub mod claims;
pub mod noop;
pub mod tiers;

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
    /// ns per packet of the XDP program (GET_TASK hit and miss, REFILL per task) with
    /// BPF_PROG_TEST_RUN. Needs root.
    Xdp(XdpArgs),
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
}

pub fn run_cli(args: BenchArgs) -> anyhow::Result<()> {
    match args.experiment {
        Experiment::Noop(a) => noop::print(&noop::run_compared(&a)?, a.json),
        Experiment::Tiers(a) => tiers::print(&tiers::run(&a)?, a.json),
        Experiment::Claims(a) => claims::print(&claims::run(&a)?, a.json),
        Experiment::Xdp(a) => {
            let opts = crate::xdp::bench::BenchOptions { repeat: a.repeat, refill_batch: a.batch };
            let report = crate::xdp::bench::run(opts)?;
            if a.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!("{report}");
            }
            Ok(())
        }
    }
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

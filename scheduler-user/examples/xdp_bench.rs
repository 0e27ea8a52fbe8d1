//! ns per packet of the Bolt XDP program (GET_TASK hit and miss, REFILL per task),
//! measured with BPF_PROG_TEST_RUN. Needs root.
//!
//!     cargo run --release -p scheduler-user --example xdp_bench -- --repeat 1000000

use clap::Parser;
use scheduler_user::xdp::bench::{self, BenchOptions};

#[derive(Parser)]
#[command(about = "Measure the Bolt XDP program's ns per packet with BPF_PROG_TEST_RUN")]
struct Args {
    /// Runs per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    repeat: u32,
    /// Tasks per REFILL frame (1..=16).
    #[arg(long, default_value_t = 16)]
    batch: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let report = bench::run(BenchOptions { repeat: args.repeat, refill_batch: args.batch })?;
    println!("{report}");
    Ok(())
}

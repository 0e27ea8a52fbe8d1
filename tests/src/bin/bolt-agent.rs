//! `bolt agent` as a process of its own, for the tests that kill one with SIGKILL. (The
//! `bolt` binary belongs to scheduler-user, whose binaries these tests cannot name.)

use clap::Parser;

#[derive(Parser)]
#[command(name = "bolt-agent")]
struct Cli {
    #[command(flatten)]
    args: scheduler_user::agent::AgentArgs,
}

fn main() -> anyhow::Result<()> {
    scheduler_user::telemetry::init_logging();
    scheduler_user::agent::run(Cli::parse().args)
}

//! The Bolt roles the tests run as processes of their own, to kill them with SIGKILL and
//! sample their memory. (The `bolt` binary belongs to scheduler-user, whose binaries
//! these tests cannot name.)

use clap::{Parser, Subcommand};
use scheduler_user::{agent, executor, switch, telemetry};

#[derive(Parser)]
#[command(name = "bolt-role")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Agent(agent::AgentArgs),
    Switch(switch::SwitchArgs),
    Executor(executor::ExecutorArgs),
}

fn main() -> anyhow::Result<()> {
    telemetry::init_logging();
    match Cli::parse().command {
        Command::Agent(args) => agent::run(args),
        Command::Switch(args) => switch::run_cli(args),
        Command::Executor(args) => executor::run(args),
    }
}

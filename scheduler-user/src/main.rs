//! `bolt`: run and inspect the Bolt two-level task scheduler.

use clap::{Parser, Subcommand};
use scheduler_user::{agent, bench, client, executor, switch, telemetry, testbed};

#[derive(Parser)]
#[command(name = "bolt", version, about = "Bolt: a two-level in-network task scheduler", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run executors that pull tasks (GET_TASK), run them and report COMPLETE to clients.
    Executor(executor::ExecutorArgs),
    /// Submit jobs of tasks to the switch, track them to completion and report latencies.
    Submit(client::SubmitArgs),
    /// Run the software switch: tier 2's global priority queues over UDP.
    Switch(switch::SwitchArgs),
    /// Run a benchmark (see `bolt bench help`).
    Bench(bench::BenchArgs),
    // Its help (short and long) is on AgentArgs: a doc comment here would replace it.
    Agent(agent::AgentArgs),
    /// A Bolt cluster in network namespaces on this machine: switch, worker hosts with
    /// agents, executor namespaces (needs root).
    Testbed(testbed::TestbedArgs),
}

fn main() -> anyhow::Result<()> {
    telemetry::init_logging();
    let cli = Cli::parse();
    match cli.command {
        Command::Executor(args) => executor::run(args),
        Command::Submit(args) => client::run(args),
        Command::Switch(args) => switch::run_cli(args),
        Command::Bench(args) => bench::run_cli(args),
        Command::Agent(args) => agent::run(args),
        Command::Testbed(args) => testbed::run_cli(args),
    }
}

//! The `bolt` command line, bpftool style: `bolt [OPTIONS] OBJECT COMMAND`, where any
//! unique prefix of an object or command will do (`bolt m s` is `bolt map show`), and
//! `bolt help` / `bolt OBJECT help` explain them.

use clap::{Parser, Subcommand};

use crate::inspect::{self, OutputArgs};
use crate::{agent, bench, client, executor, sim, store, switch, telemetry, testbed, top};

#[derive(Parser, Debug)]
#[command(
    name = "bolt",
    version,
    about = "Bolt: a two-level in-network task scheduler",
    long_about = "Bolt: a two-level in-network task scheduler.\n\n\
        Usage is bpftool's: bolt [OPTIONS] OBJECT COMMAND. Any unique prefix of an object or a \
        command is accepted (`bolt m s` = `bolt map show`). -j/-p/-f apply to the inspection \
        objects (prog, map, ring, stats, switch stats), before or after them.",
    infer_subcommands = true
)]
pub struct Cli {
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run executors that pull tasks (GET_TASK), run them and report COMPLETE to clients.
    Executor(executor::ExecutorArgs),
    /// Submit jobs of tasks to the switch, track them to completion and report latencies.
    Submit(client::SubmitArgs),
    /// The job queue of a running `bolt submit --metrics`: tasks per state, Pending per
    /// resource, the oldest Pending task, the failure alarm and the scale-up signal.
    Jobs(client::JobsArgs),
    /// Run the software switch (tier 2's global priority queues over UDP), or read a
    /// running one's counters (`bolt switch stats`).
    Switch(switch::SwitchCli),
    /// Object stores (task inputs and outputs on the worker hosts): serve this host's,
    /// put, get, and delete a job's objects.
    #[command(infer_subcommands = true)]
    Object {
        #[command(subcommand)]
        command: store::ObjectCommand,
    },
    /// Submit a generated DAG job (bag, fan-in, fan-out, pipeline) of data tasks and
    /// report it: tasks done and failed, makespan, outputs checked against COMPLETE.
    Dag(client::dag_run::DagArgs),
    /// Run a benchmark (see `bolt bench help`).
    Bench(bench::BenchArgs),
    /// Simulate Bolt and the schedulers it is compared with, up to 1,000,000 executors.
    Sim(sim::cli::SimArgs),
    // Its help (short and long) is on AgentArgs: a doc comment here would replace it.
    Agent(agent::AgentArgs),
    /// A Bolt cluster in network namespaces on this machine: switch, worker hosts with
    /// agents, executor namespaces (needs root).
    Testbed(testbed::TestbedArgs),
    /// The Bolt XDP programs loaded on this host.
    #[command(infer_subcommands = true)]
    Prog {
        #[command(subcommand)]
        command: inspect::prog::ProgCommand,
    },
    /// Bolt's pinned maps: list them, dump rings as tasks and counters by name.
    #[command(infer_subcommands = true)]
    Map {
        #[command(subcommand)]
        command: inspect::maps::MapCommand,
    },
    /// The task rings of each node on this host: occupancy, capacity, watermark, refills.
    #[command(infer_subcommands = true)]
    Ring {
        #[command(subcommand)]
        command: inspect::ring::RingCommand,
    },
    /// The XDP program's counters (summed over CPUs), with rates over an interval.
    Stats(inspect::stats::StatsArgs),
    /// A live view of this host's rings and a switch: levels, hit ratio, queue depths,
    /// decisions per second (q quits).
    Top(top::TopArgs),
}

/// Parses the command line and runs it.
pub fn main() -> anyhow::Result<()> {
    telemetry::init_logging();
    let cli = Cli::parse();
    let out = cli.out;
    let inspects = matches!(
        cli.command,
        Command::Prog { .. }
            | Command::Map { .. }
            | Command::Ring { .. }
            | Command::Stats(_)
            | Command::Switch(switch::SwitchCli { command: Some(_), .. })
    );
    anyhow::ensure!(
        inspects || !(out.json || out.pretty || out.bpffs),
        "-j, -p and -f go with prog, map, ring, stats and switch stats (other commands have their own --json)"
    );
    match cli.command {
        Command::Executor(args) => executor::run(args),
        Command::Submit(args) => client::run(args),
        Command::Jobs(args) => client::run_jobs(args),
        Command::Switch(switch::SwitchCli { command: Some(switch::SwitchCommand::Stats(args)), .. }) => {
            switch::run_stats(args, out)
        }
        Command::Switch(switch::SwitchCli { command: None, run }) => switch::run_cli(run),
        Command::Object { command } => store::run_cli(command),
        Command::Dag(args) => client::dag_run::run_cli(args),
        Command::Bench(args) => bench::run_cli(args),
        Command::Sim(args) => sim::cli::run_cli(args),
        Command::Agent(args) => agent::run(args),
        Command::Testbed(args) => testbed::run_cli(args),
        Command::Prog { command } => inspect::prog::run(command, out),
        Command::Map { command } => inspect::maps::run(command, out),
        Command::Ring { command } => inspect::ring::run(command, out),
        Command::Stats(args) => inspect::stats::run(args, out),
        Command::Top(args) => top::run(args),
    }
}

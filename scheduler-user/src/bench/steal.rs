//! `bolt bench steal`: MATRIX's adaptive work stealing between hosts under skew. Every
//! task lands on one host first (its agent prefetches them all before any executor
//! runs); then every host's executors start, and the makespan is measured with and
//! without stealing (the agents' `--peers`), on the namespace testbed. Leases are off in
//! both runs, so that stealing is the only way tasks leave the landing host.
//!
//! Efficiency is MATRIX's (§IV.B): the ideal time (mean task length × tasks per
//! executor) over the measured makespan.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use scheduler_common::{descriptor::Handler, maps::PIN_ROOT};
use serde::Serialize;

use crate::agent::{self, AgentHandle, AgentStats, StopMode};
use crate::client::{Client, ClientConfig, TaskSpec};
use crate::executor::{self, ExecutorConfig, ExecutorPool};
use crate::netns;
use crate::switch::{self, SwitchConfig};
use crate::testbed::{services::agent_args, Layout, Testbed};
use crate::xdp::{PinDir, XdpMaps};

#[derive(clap::Args, Debug)]
pub struct StealArgs {
    /// Worker hosts (the first is where every task lands).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=16))]
    pub hosts: u16,
    /// Executors per host.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub executors: u16,
    /// Tasks (sleep tasks of --task-us each).
    #[arg(long, default_value_t = 800)]
    pub tasks: u32,
    /// How long each task runs, in microseconds.
    #[arg(long, default_value_t = 2_000)]
    pub task_us: u32,
    /// Testbed name (namespaces bolt-<name>-*).
    #[arg(long, default_value = "bst")]
    pub name: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One run: with or without stealing.
#[derive(Clone, Debug, Serialize)]
pub struct StealRun {
    pub stealing: bool,
    /// First executor start → last completion, in milliseconds.
    pub makespan_ms: f64,
    /// MATRIX's efficiency: (task length × tasks per executor) / makespan.
    pub efficiency: f64,
    /// Tasks each host's executors ran (index 0 = the landing host).
    pub ran_per_host: Vec<u64>,
    pub steal_attempts: u64,
    pub steal_successes: u64,
    pub stolen_tasks: u64,
    pub completed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct StealResult {
    pub hosts: u16,
    pub executors_per_host: u16,
    pub tasks: u32,
    pub task_us: u32,
    /// The ideal makespan: task length × tasks per executor, in milliseconds.
    pub ideal_ms: f64,
    pub without: StealRun,
    pub with: StealRun,
    /// Makespan without stealing / with stealing.
    pub speedup: f64,
}

pub fn run(args: &StealArgs) -> anyhow::Result<StealResult> {
    anyhow::ensure!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "bolt bench steal creates network namespaces and attaches XDP: run it as root"
    );
    anyhow::ensure!(args.tasks > 0 && args.task_us > 0, "--tasks and --task-us must be positive");
    let layout = Layout::plan(&args.name, args.hosts, 1)?;
    let testbed =
        Testbed::create(layout).context("creating the testbed (is one of this name up? `bolt testbed down`)")?;
    let layout = testbed.layout().clone();
    let without = one_run(args, &layout, false)?;
    let with = one_run(args, &layout, true)?;
    drop(testbed);
    let executors = args.hosts as f64 * args.executors as f64;
    let ideal_ms = args.task_us as f64 / 1000.0 * args.tasks as f64 / executors;
    Ok(StealResult {
        hosts: args.hosts,
        executors_per_host: args.executors,
        tasks: args.tasks,
        task_us: args.task_us,
        ideal_ms,
        speedup: without.makespan_ms / with.makespan_ms,
        without,
        with,
    })
}

/// How long any phase of a run may take.
const PHASE_LIMIT: Duration = Duration::from_secs(120);

fn one_run(args: &StealArgs, layout: &Layout, stealing: bool) -> anyhow::Result<StealRun> {
    let listen = SocketAddr::V4(layout.switch_socket());
    let queue_capacity = args.tasks.next_power_of_two().max(1024);
    let switch = netns::run_in(&layout.switch_ns, move || {
        switch::spawn(SwitchConfig { listen, queue_capacity, ..SwitchConfig::default() })
    })?;
    let agent_for = |i: usize, extra: &[String]| -> anyhow::Result<AgentHandle> {
        let w = &layout.workers[i];
        let mut a = agent_args(layout, w);
        if !stealing {
            if let Some(at) = a.iter().position(|s| s == "--peers") {
                a.drain(at..at + 2);
            }
        }
        a.extend(["--lease-ms".into(), "0".into()]);
        a.extend(extra.iter().cloned());
        let cfg = agent::config_from_args(a)?;
        netns::run_in(&w.host_ns, move || agent::spawn(cfg))
    };
    // The landing host prefetches every task.
    let all = args.tasks.to_string();
    let landing = agent_for(0, &["--low-watermark".into(), all.clone(), "--min-prefetch".into(), all])?;
    let spec = TaskSpec::new(Handler::Sleep { micros: args.task_us }, 1, 0)?;
    let specs = vec![spec; args.tasks as usize];
    let client_ns = layout.switch_ns.clone();
    let client = std::thread::spawn(move || -> anyhow::Result<(Instant, u64)> {
        netns::enter(&client_ns)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async move {
            let mut cfg = ClientConfig::new(listen);
            cfg.tracker.task_timeout = PHASE_LIMIT * 2;
            cfg.tracker.max_attempts = 1;
            // Every task is submitted at once: the landing host must be able to take them all.
            cfg.tracker.window = cfg.tracker.window.max(specs.len());
            let mut client = Client::bind(cfg).await?;
            client.submit(&specs).await?;
            anyhow::ensure!(client.wait_idle(Instant::now() + PHASE_LIMIT * 2).await?, "tasks unfinished");
            Ok((Instant::now(), client.summary().completed))
        })
    });
    let pins = PinDir::under(Path::new(PIN_ROOT), layout.workers[0].pin_name())?;
    let deadline = Instant::now() + PHASE_LIMIT;
    loop {
        let queued: i64 = XdpMaps::open_pinned(&pins).map(|m| m.occupancy().iter().sum()).unwrap_or(0);
        if queued >= args.tasks as i64 {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the landing host holds {queued} of {} tasks", args.tasks);
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut agents = vec![landing];
    for i in 1..layout.workers.len() {
        agents.push(agent_for(i, &[])?);
    }
    let start = Instant::now();
    let mut pools: Vec<ExecutorPool> = Vec::new();
    for w in &layout.workers {
        let mut cfg = ExecutorConfig::new(listen, 0xff);
        cfg.node = w.node;
        cfg.executors = args.executors;
        pools.push(netns::run_in(&w.exec().ns, move || executor::spawn(cfg))?);
    }
    let (end, completed) = client.join().map_err(|_| anyhow::anyhow!("the client thread panicked"))??;
    let makespan = end.saturating_duration_since(start);
    let ran_per_host: Vec<u64> = pools.into_iter().map(|p| p.shutdown().tasks_run).collect();
    let stats: Vec<AgentStats> = agents.into_iter().map(|a| a.stop(StopMode::Drain)).collect::<Result<_, _>>()?;
    drop(switch);
    let per_executor = args.tasks as f64 / (args.hosts as f64 * args.executors as f64);
    let makespan_ms = makespan.as_secs_f64() * 1000.0;
    Ok(StealRun {
        stealing,
        makespan_ms,
        efficiency: args.task_us as f64 / 1000.0 * per_executor / makespan_ms,
        ran_per_host,
        steal_attempts: stats.iter().map(|s| s.steal_attempts).sum(),
        steal_successes: stats.iter().map(|s| s.steal_successes).sum(),
        stolen_tasks: stats.iter().map(|s| s.stolen_tasks).sum(),
        completed,
    })
}

pub fn print(r: &StealResult, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    println!(
        "{} hosts × {} executors, {} tasks of {} µs, all landing on host 1; ideal makespan {:.1} ms",
        r.hosts, r.executors_per_host, r.tasks, r.task_us, r.ideal_ms
    );
    println!("| stealing | makespan (ms) | efficiency | tasks run per host | steals (ok/attempts) | stolen |");
    println!("|---|---:|---:|---|---:|---:|");
    for run in [&r.without, &r.with] {
        println!(
            "| {} | {:.1} | {:.1} % | {:?} | {}/{} | {} |",
            if run.stealing { "on" } else { "off" },
            run.makespan_ms,
            run.efficiency * 100.0,
            run.ran_per_host,
            run.steal_successes,
            run.steal_attempts,
            run.stolen_tasks
        );
    }
    println!("speed-up from stealing: {:.2}×", r.speedup);
    Ok(())
}

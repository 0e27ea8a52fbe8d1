//! `bolt bench claims`: what exactly-once execution costs. The same no-op tasks through
//! the software switch and executors on loopback, submitted by one client with and
//! without TASK_FLAG_EXACTLY_ONCE, in alternating rounds of one run, so both see the
//! same machine. With the flag each task costs one more round trip on the executor's
//! critical path: CLAIM to the client and its CLAIM_REPLY, before the task starts.

use std::time::{Duration, Instant};

use anyhow::Context;
use scheduler_common::descriptor::Handler;
use serde::Serialize;

use crate::client::{Client, ClientConfig, TaskSpec};
use crate::executor::{self, ExecutorConfig};
use crate::switch::{self, SwitchConfig};

#[derive(clap::Args, Debug)]
pub struct ClaimsArgs {
    /// Tasks per round (no-op tasks, jobs of 16).
    #[arg(long, default_value_t = 20_000)]
    pub tasks: usize,
    /// Executors (one socket and thread each).
    #[arg(long, default_value_t = 16)]
    pub executors: u16,
    /// Rounds of each mode, alternating.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One round of one mode.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimsRound {
    pub exactly_once: bool,
    pub round: u32,
    pub tasks: u64,
    /// Tasks completed per second between the first send and the last completion.
    pub tasks_per_s: f64,
    /// Submit → executor start, in microseconds (includes the claim round trip).
    pub p50_sched_delay_us: f64,
    pub p99_sched_delay_us: f64,
    pub claims_granted: u64,
    pub claims_denied: u64,
}

const JOB: usize = 16;

pub fn run(args: &ClaimsArgs) -> anyhow::Result<Vec<ClaimsRound>> {
    anyhow::ensure!(args.tasks >= JOB && args.executors > 0 && args.rounds > 0, "tasks, executors and rounds");
    let switch = switch::spawn(SwitchConfig {
        listen: "127.0.0.1:0".parse()?,
        queue_capacity: (args.tasks as u32).next_power_of_two().max(1024),
        ..SwitchConfig::default()
    })?;
    let pool = executor::spawn(ExecutorConfig {
        executors: args.executors,
        ..ExecutorConfig::new(switch.local_addr(), 0xff)
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut rounds = Vec::new();
    for round in 1..=args.rounds {
        for exactly_once in [false, true] {
            let r = runtime.block_on(one_round(switch.local_addr(), exactly_once, args.tasks / JOB * JOB, round));
            rounds.push(r.with_context(|| format!("round {round}, exactly-once {exactly_once}"))?);
        }
    }
    pool.shutdown();
    switch.shutdown()?;
    Ok(rounds)
}

async fn one_round(
    switch: std::net::SocketAddr,
    exactly_once: bool,
    tasks: usize,
    round: u32,
) -> anyhow::Result<ClaimsRound> {
    let mut cfg = ClientConfig::new(switch);
    cfg.tracker.task_timeout = Duration::from_secs(10);
    let mut client = Client::bind(cfg).await?;
    let spec = TaskSpec { exactly_once, ..TaskSpec::new(Handler::Noop, 1, 0)? };
    let job = vec![spec; JOB];
    for _ in 0..tasks / JOB {
        client.add_job(&job)?;
    }
    let idle = client.wait_idle(Instant::now() + Duration::from_secs(300)).await?;
    let s = client.summary();
    anyhow::ensure!(idle && s.completed == tasks as u64, "not every task completed: {s:?}");
    let stats = client.tracker().stats();
    Ok(ClaimsRound {
        exactly_once,
        round,
        tasks: s.completed,
        tasks_per_s: s.throughput_tasks_per_s,
        p50_sched_delay_us: s.p50_sched_delay_us,
        p99_sched_delay_us: s.p99_sched_delay_us,
        claims_granted: stats.claims_granted,
        claims_denied: stats.claims_denied,
    })
}

pub fn print(rounds: &[ClaimsRound], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(rounds)?);
        return Ok(());
    }
    println!("| round | exactly-once | tasks | tasks/s | p50 submit→start µs | p99 µs | claims granted |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for r in rounds {
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {} |",
            r.round,
            if r.exactly_once { "yes" } else { "no" },
            r.tasks,
            r.tasks_per_s,
            r.p50_sched_delay_us,
            r.p99_sched_delay_us,
            r.claims_granted
        );
    }
    let mean = |eo: bool| {
        let v: Vec<f64> = rounds.iter().filter(|r| r.exactly_once == eo).map(|r| r.tasks_per_s).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    println!("exactly-once keeps {:.0} % of the task rate", 100.0 * mean(true) / mean(false).max(1.0));
    Ok(())
}

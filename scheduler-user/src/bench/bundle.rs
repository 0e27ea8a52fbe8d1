//! `bolt bench bundle`: what GET_BUNDLE saves for short tasks. The same jobs of short
//! tasks (no-op and 100-µs sleeps) through the software switch on loopback, with
//! executors asking for 1 (GET_TASK), 4, 10 (CloudKon's pull) and 16 tasks at a time, one
//! run, side by side: switch packets per task, decisions per second, tasks completed per
//! second, and each task's scheduling delay (submit → start), which a bundle lengthens by
//! the tasks queued in front of it on its executor.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use scheduler_common::descriptor::Handler;
use scheduler_common::Op;
use serde::Serialize;

use super::output::ResultsDir;
use super::plot::{render, Chart, Scale, Series};
use crate::client::{Client, ClientConfig, TaskSpec};
use crate::executor::{self, ExecutorConfig};
use crate::switch::{self, SwitchConfig, SwitchStats};

#[derive(clap::Args, Debug)]
pub struct BundleArgs {
    /// Tasks per run (jobs of 16).
    #[arg(long, default_value_t = 20_000)]
    pub tasks: usize,
    /// Executors (one socket and thread each).
    #[arg(long, default_value_t = 8)]
    pub executors: u16,
    /// Bundle sizes to compare (1 = GET_TASK).
    #[arg(long, value_delimiter = ',', default_values_t = [1u8, 4, 10, 16],
          value_parser = clap::value_parser!(u8).range(1..=16))]
    pub bundles: Vec<u8>,
    /// Task lengths in µs (0 = a no-op task, otherwise a sleep).
    #[arg(long, value_delimiter = ',', default_values_t = [0u32, 100])]
    pub task_us: Vec<u32>,
    /// Results directory (JSON lines and the plot); default target/bench/<UTC time>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One run: one task length, one bundle size.
#[derive(Clone, Debug, Serialize)]
pub struct BundleRun {
    pub task_us: u32,
    pub bundle: u8,
    pub tasks: u64,
    pub completed: u64,
    /// Datagrams the switch received and sent, per task completed.
    pub switch_packets_per_task: f64,
    /// GET_TASK and GET_BUNDLE the switch took in, per task completed.
    pub requests_per_task: f64,
    /// Tasks per ASSIGN answering a GET_BUNDLE (0 with bundle 1).
    pub mean_bundle: f64,
    /// Scheduling decisions per second of the run (first send to last completion).
    pub decisions_per_s: f64,
    pub tasks_per_s: f64,
    /// Submit → executor start, in microseconds.
    pub p50_sched_delay_us: f64,
    pub p99_sched_delay_us: f64,
    /// Pipeline passes per task, all ops.
    pub passes_per_task: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BundleResult {
    pub executors: u16,
    pub runs: Vec<BundleRun>,
    pub results_dir: PathBuf,
}

const JOB: usize = 16;
/// How long any run may take.
const RUN_LIMIT: Duration = Duration::from_secs(300);

pub fn run(args: &BundleArgs) -> anyhow::Result<BundleResult> {
    anyhow::ensure!(args.tasks >= JOB && args.executors > 0, "at least {JOB} tasks and one executor");
    anyhow::ensure!(!args.bundles.is_empty() && !args.task_us.is_empty(), "bundle sizes and task lengths");
    let dir = ResultsDir::create(args.out.clone())?;
    let mut runs = Vec::new();
    for &task_us in &args.task_us {
        for &bundle in &args.bundles {
            let r = one_run(args, task_us, bundle).with_context(|| format!("{task_us} µs tasks, bundle {bundle}"))?;
            tracing::info!(task_us, bundle, tasks_per_s = r.tasks_per_s, "bundle run done");
            runs.push(r);
        }
    }
    let mut lines = dir.jsonl("bundle")?;
    for r in &runs {
        lines.write(r)?;
    }
    lines.finish()?;
    plot(&runs, &dir)?;
    Ok(BundleResult { executors: args.executors, runs, results_dir: dir.path().to_path_buf() })
}

/// A fresh switch and executors asking for `bundle` tasks, one client, one job set.
fn one_run(args: &BundleArgs, task_us: u32, bundle: u8) -> anyhow::Result<BundleRun> {
    let tasks = args.tasks / JOB * JOB;
    let sw = switch::spawn(SwitchConfig {
        listen: "127.0.0.1:0".parse()?,
        queue_capacity: (tasks as u32).next_power_of_two().max(1024),
        ..SwitchConfig::default()
    })?;
    let pool = executor::spawn(ExecutorConfig {
        executors: args.executors,
        bundle,
        ..ExecutorConfig::new(sw.local_addr(), 0xff)
    })?;
    let handler = if task_us == 0 { Handler::Noop } else { Handler::Sleep { micros: task_us } };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let summary = runtime.block_on(async {
        let mut cfg = ClientConfig::new(sw.local_addr());
        cfg.tracker.task_timeout = Duration::from_secs(10);
        let mut client = Client::bind(cfg).await?;
        let job = vec![TaskSpec::new(handler, 1, 0)?; JOB];
        for _ in 0..tasks / JOB {
            client.add_job(&job)?;
        }
        let idle = client.wait_idle(Instant::now() + RUN_LIMIT).await?;
        let s = client.summary();
        anyhow::ensure!(idle && s.completed == tasks as u64, "not every task completed: {s:?}");
        Ok::<_, anyhow::Error>(s)
    })?;
    pool.shutdown();
    let stats = sw.shutdown()?;
    let done = summary.completed.max(1) as f64;
    let q = &stats.queue;
    let requests = q.cost_of(Op::GetTask).packets + q.cost_of(Op::GetBundle).packets;
    let passes: u64 = q.cost.iter().map(|c| c.passes).sum();
    Ok(BundleRun {
        task_us,
        bundle,
        tasks: tasks as u64,
        completed: summary.completed,
        switch_packets_per_task: switch_packets(&stats) as f64 / done,
        requests_per_task: requests as f64 / done,
        mean_bundle: if q.bundles == 0 { 0.0 } else { q.bundled_tasks as f64 / q.bundles as f64 },
        decisions_per_s: q.decisions as f64 / summary.elapsed_s.max(1e-9),
        tasks_per_s: summary.throughput_tasks_per_s,
        p50_sched_delay_us: summary.p50_sched_delay_us,
        p99_sched_delay_us: summary.p99_sched_delay_us,
        passes_per_task: passes as f64 / done,
    })
}

/// Datagrams through the switch: every one received, and every answer it sent (ASSIGN,
/// NOOP, QUEUE_FULL, REFILL, HINT).
fn switch_packets(s: &SwitchStats) -> u64 {
    let q = &s.queue;
    s.received + q.assigns + q.noops + q.queue_full_packets + q.refill_packets + s.hints.hints_sent
}

fn plot(runs: &[BundleRun], dir: &ResultsDir) -> anyhow::Result<()> {
    let mut lengths: Vec<u32> = runs.iter().map(|r| r.task_us).collect();
    lengths.dedup();
    let series = |label: &str, y: fn(&BundleRun) -> f64| {
        lengths
            .iter()
            .map(|&t| {
                let points = runs.iter().filter(|r| r.task_us == t).map(|r| (r.bundle as f64, y(r))).collect();
                let kind = if t == 0 { "no-op".to_string() } else { format!("{t} µs") };
                Series::new(format!("{kind}: {label}"), points)
            })
            .collect::<Vec<_>>()
    };
    let mut all = series("tasks/s ÷ 1000", |r| r.tasks_per_s / 1000.0);
    // Per 10 tasks, so both kinds of line read on one axis (about 22 down to 2).
    all.extend(series("switch packets per 10 tasks", |r| 10.0 * r.switch_packets_per_task));
    let chart = Chart::new("GET_BUNDLE: tasks per request", "bundle size (tasks)", "", Scale::Linear, all);
    render(&chart, dir.path(), "bundle")?;
    Ok(())
}

pub fn print(r: &BundleResult, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    println!("{} executors on loopback", r.executors);
    println!(
        "| task | bundle | tasks | switch packets/task | requests/task | tasks/ASSIGN | decisions/s | tasks/s | p50 delay µs | p99 delay µs | passes/task |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for x in &r.runs {
        let task = if x.task_us == 0 { "no-op".to_string() } else { format!("{} µs", x.task_us) };
        println!(
            "| {task} | {} | {} | {:.2} | {:.2} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
            x.bundle,
            x.completed,
            x.switch_packets_per_task,
            x.requests_per_task,
            x.mean_bundle,
            x.decisions_per_s,
            x.tasks_per_s,
            x.p50_sched_delay_us,
            x.p99_sched_delay_us,
            x.passes_per_task
        );
    }
    println!("results and plot in {}", r.results_dir.display());
    Ok(())
}

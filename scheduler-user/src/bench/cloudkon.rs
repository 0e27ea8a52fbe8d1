//! `bolt bench cloudkon`: CloudKon's evaluation (§IV) at testbed scale.
//!
//! - **Efficiency**: homogeneous sleep tasks of 1, 16 and 128 ms, the same number per
//!   executor as executors grow (CloudKon's weak scaling), one-level and two-level;
//!   efficiency is the ideal time (task length × tasks per executor) over the makespan
//!   (first SUBMIT to last COMPLETE). The claim's overhead: the same at 16 ms with every
//!   task exactly-once (claimed from the client before it runs), as 1 − efficiency with
//!   claims / efficiency without.
//! - **Elasticity**: `bolt provision`'s rule and real `bolt executor` processes on
//!   loopback under a load step and a load drop: executors over time, the time from the
//!   drop to an empty tier-2 queue, executor-seconds (and lease periods begun) against a
//!   static pool sized for the peak for the whole run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use serde::Serialize;

use super::cluster::{Level, NodeSpec, Site};
use super::output::ResultsDir;
use super::plot::{render, Chart, Scale, Series};
use crate::client::{Client, ClientConfig, TaskSpec};
use crate::metrics::MetricsServer;
use crate::provision::{HostProvisioner, ProvisionArgs, ProvisionEvent};
use crate::switch::{self, SwitchConfig};

#[derive(clap::Args, Debug)]
pub struct CloudkonArgs {
    /// Executor counts of the efficiency sweep (split over --nodes worker hosts).
    #[arg(long, value_delimiter = ',', default_values_t = [2u16, 8, 32])]
    pub executors: Vec<u16>,
    /// Worker hosts of the efficiency sweep.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub nodes: u16,
    /// Task lengths of the efficiency sweep, in milliseconds.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 16, 128])]
    pub task_ms: Vec<u32>,
    /// Ideal makespan of each efficiency run (task length × tasks per executor, at least
    /// 4 tasks per executor), in milliseconds.
    #[arg(long, default_value_t = 1_000)]
    pub ideal_ms: u32,
    /// Skip the efficiency sweep.
    #[arg(long)]
    pub no_efficiency: bool,
    /// Skip the elasticity experiment.
    #[arg(long)]
    pub no_elasticity: bool,
    /// Elasticity: the load before the step and at the peak, in tasks per second of
    /// --elastic-task-ms each.
    #[arg(long, default_value_t = 40)]
    pub base_rate: u32,
    #[arg(long, default_value_t = 300)]
    pub peak_rate: u32,
    #[arg(long, default_value_t = 20)]
    pub elastic_task_ms: u32,
    /// Elasticity: seconds of base load, then of peak load (then nothing).
    #[arg(long, default_value_t = 3.0)]
    pub base_s: f64,
    #[arg(long, default_value_t = 4.0)]
    pub peak_s: f64,
    /// Elasticity: the executors' lease period and the provisioner's limits.
    #[arg(long, default_value_t = 3_000)]
    pub lease_period_ms: u64,
    #[arg(long, default_value_t = 16)]
    pub max_executors: u16,
    /// Testbed name (namespaces bolt-<name>-*).
    #[arg(long, default_value = "bck")]
    pub name: String,
    /// Results directory (JSON lines and plots); default target/bench/<UTC time>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// One efficiency run.
#[derive(Clone, Debug, Serialize)]
pub struct EfficiencyRun {
    pub level: Level,
    /// Why the run is not what was asked for (no root, XDP missing); None on the testbed.
    pub fallback: Option<String>,
    pub executors: u32,
    pub task_ms: u32,
    pub exactly_once: bool,
    pub tasks: u32,
    pub ideal_ms: f64,
    pub makespan_ms: f64,
    pub efficiency: f64,
    pub completed: u64,
}

/// The elasticity experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Elasticity {
    pub base_rate: u32,
    pub peak_rate: u32,
    pub task_ms: u32,
    pub lease_period_ms: u64,
    /// (seconds, executors running, tasks queued at tier 2), one per provisioner read.
    pub timeline: Vec<(f64, usize, u32)>,
    pub started: usize,
    pub retired: usize,
    pub peak_executors: usize,
    /// From the load step to the first read of an empty tier-2 queue after it grew: the
    /// time the started executors took to drain the step's backlog.
    pub drain_after_step_s: f64,
    /// The largest tier-2 queue read.
    pub peak_queued: u32,
    /// From the load drop to the first read of an empty tier-2 queue.
    pub drain_after_drop_s: f64,
    /// From the first read to the last executor's retirement (or the end of the run).
    pub run_s: f64,
    pub executor_seconds: f64,
    /// A static pool of `peak_executors` for `run_s`.
    pub static_executor_seconds: f64,
    /// Lease periods begun (what per-period billing charges), provisioned and static.
    pub lease_periods: u64,
    pub static_lease_periods: u64,
    pub submitted: u64,
    pub completed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CloudkonResult {
    pub efficiency: Vec<EfficiencyRun>,
    pub elasticity: Option<Elasticity>,
    pub results_dir: PathBuf,
}

/// How long any run may take.
const RUN_LIMIT: Duration = Duration::from_secs(180);

pub fn run(args: &CloudkonArgs) -> anyhow::Result<CloudkonResult> {
    anyhow::ensure!(args.ideal_ms > 0 && args.task_ms.iter().all(|&t| t > 0), "task lengths must be positive");
    let dir = ResultsDir::create(args.out.clone())?;
    let mut efficiency = Vec::new();
    if !args.no_efficiency {
        for &e in &args.executors {
            efficiency.extend(efficiency_at(args, e)?);
        }
        let mut lines = dir.jsonl("cloudkon_efficiency")?;
        for r in &efficiency {
            lines.write(r)?;
        }
        lines.finish()?;
        plot_efficiency(&efficiency, &dir)?;
    }
    let elasticity = if args.no_elasticity { None } else { Some(elasticity(args)?) };
    if let Some(el) = &elasticity {
        let mut lines = dir.jsonl("cloudkon_elasticity")?;
        lines.write(el)?;
        lines.finish()?;
        plot_elasticity(el, &dir)?;
    }
    Ok(CloudkonResult { efficiency, elasticity, results_dir: dir.path().to_path_buf() })
}

/// Every (level, task length) at `executors` executors, and the claimed 16-ms runs.
fn efficiency_at(args: &CloudkonArgs, executors: u16) -> anyhow::Result<Vec<EfficiencyRun>> {
    let nodes = args.nodes.min(executors).max(1);
    let specs: Vec<NodeSpec> = (0..nodes)
        .map(|i| NodeSpec { executors: executors / nodes + u16::from(i < executors % nodes), resources: 0xff })
        .collect();
    let site = Site::new(&args.name, &specs)?;
    let mut runs = Vec::new();
    let mut cases: Vec<(u32, bool)> = args.task_ms.iter().map(|&t| (t, false)).collect();
    if args.task_ms.contains(&16) {
        cases.push((16, true));
    }
    for level in Level::BOTH {
        for &(task_ms, exactly_once) in &cases {
            let per_executor = (args.ideal_ms / task_ms).max(4);
            let tasks = per_executor * executors as u32;
            let d = site.deploy(level, &Default::default())?;
            let fallback = d.fallback.clone();
            let (makespan, completed) = d.run_clients(move |switch| async move {
                let mut cfg = ClientConfig::new(switch);
                cfg.tracker.task_timeout = RUN_LIMIT;
                cfg.tracker.max_attempts = 1;
                cfg.tracker.window = cfg.tracker.window.max(tasks as usize);
                let mut client = Client::bind(cfg).await?;
                let mut spec = TaskSpec::new(Handler::Sleep { micros: task_ms * 1000 }, 1, 0)?;
                spec.exactly_once = exactly_once;
                let start = Instant::now();
                client.submit(&vec![spec; tasks as usize]).await?;
                anyhow::ensure!(client.wait_idle(Instant::now() + RUN_LIMIT).await?, "tasks unfinished");
                Ok((start.elapsed(), client.summary().completed))
            })?;
            d.stop()?;
            let ideal_ms = task_ms as f64 * per_executor as f64;
            let makespan_ms = makespan.as_secs_f64() * 1000.0;
            let run = EfficiencyRun {
                level,
                fallback,
                executors: executors as u32,
                task_ms,
                exactly_once,
                tasks,
                ideal_ms,
                makespan_ms,
                efficiency: ideal_ms / makespan_ms,
                completed,
            };
            tracing::info!(?run, "efficiency run");
            runs.push(run);
        }
    }
    Ok(runs)
}

/// A load step and a load drop against the provisioner, with real executor processes.
fn elasticity(args: &CloudkonArgs) -> anyhow::Result<Elasticity> {
    let switch = switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse()?, ..SwitchConfig::default() })?;
    let metrics = MetricsServer::start("127.0.0.1:0".parse()?, "bolt", switch.stats_source())?;
    let period = Duration::from_millis(args.lease_period_ms);
    let prov_args = ProvisionArgs {
        switch_metrics: metrics.local_addr().to_string(),
        switch: switch.local_addr(),
        interval_ms: 200,
        // One executor per growth of what one executor runs (1000 / task_ms tasks/s).
        growth_threshold: 1000.0 / args.elastic_task_ms.max(1) as f64,
        max_executors: args.max_executors,
        netns: None,
        node: 0,
        unconstrained_resources: 0,
        lease_period_ms: args.lease_period_ms,
        retire_idle_ms: (args.lease_period_ms / 6).max(10 * args.elastic_task_ms as u64),
        retire_window_ms: args.lease_period_ms / 4,
        executor_args: vec!["--stats-interval-s=0".into()],
        bolt: None,
        duration_s: None,
        json: false,
    };
    let mut host = HostProvisioner::new(prov_args, metrics.local_addr())?;
    let (base_rate, peak_rate, task_ms) = (args.base_rate, args.peak_rate, args.elastic_task_ms);
    let (base, peak) = (Duration::from_secs_f64(args.base_s), Duration::from_secs_f64(args.peak_s));
    let switch_addr = switch.local_addr();
    let client = std::thread::spawn(move || load_step(switch_addr, base_rate, peak_rate, task_ms, base, peak));
    let t0 = Instant::now();
    let drop_at = (base + peak).as_secs_f64();
    let mut timeline = Vec::new();
    let (mut started, mut lifetimes) = (0usize, Vec::new());
    let mut drained_at = None;
    let limit = t0 + RUN_LIMIT;
    let mut next = Instant::now();
    loop {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += Duration::from_millis(200);
        let t = t0.elapsed().as_secs_f64();
        for e in host.step() {
            match e {
                ProvisionEvent::Read { backlog, running, .. } => {
                    let queued = backlog.queued_unconstrained + backlog.queued_by_resource.iter().sum::<u32>();
                    timeline.push((t, running, queued));
                    if t > drop_at && queued == 0 && drained_at.is_none() {
                        drained_at = Some(t);
                    }
                }
                ProvisionEvent::Started { .. } => started += 1,
                ProvisionEvent::Exited { lived_s, .. } => lifetimes.push(lived_s),
            }
        }
        let done = client.is_finished() && drained_at.is_some() && host.fleet.running() == 0 && started > 0;
        if done || Instant::now() > limit {
            break;
        }
    }
    let run_s = t0.elapsed().as_secs_f64();
    let still = host.fleet.running();
    host.fleet.stop(Duration::from_secs(10));
    let (submitted, completed) = client.join().map_err(|_| anyhow::anyhow!("the client thread panicked"))??;
    lifetimes.extend(std::iter::repeat_n(run_s, still));
    let peak_executors = timeline.iter().map(|&(_, r, _)| r).max().unwrap_or(0).max(1);
    let periods = |s: f64| (s / period.as_secs_f64()).ceil().max(1.0) as u64;
    let step_at = base.as_secs_f64();
    let grown = timeline.iter().position(|&(t, _, q)| t >= step_at && q > 0);
    let drain_after_step_s =
        grown.and_then(|i| timeline[i..].iter().find(|&&(_, _, q)| q == 0)).map_or(f64::NAN, |&(t, _, _)| t - step_at);
    let peak_queued = timeline.iter().map(|&(_, _, q)| q).max().unwrap_or(0);
    Ok(Elasticity {
        base_rate,
        peak_rate,
        task_ms,
        lease_period_ms: args.lease_period_ms,
        started,
        retired: lifetimes.len() - still,
        peak_executors,
        drain_after_step_s,
        peak_queued,
        drain_after_drop_s: drained_at.map_or(f64::NAN, |t| t - drop_at),
        run_s,
        executor_seconds: lifetimes.iter().sum(),
        static_executor_seconds: peak_executors as f64 * run_s,
        lease_periods: lifetimes.iter().map(|&s| periods(s)).sum(),
        static_lease_periods: peak_executors as u64 * periods(run_s),
        timeline,
        submitted,
        completed,
    })
}

/// Submits `base_rate` tasks/s for `base`, then `peak_rate` for `peak`, in jobs every
/// 50 ms, and waits for them; (submitted, completed).
fn load_step(
    switch: SocketAddr,
    base_rate: u32,
    peak_rate: u32,
    task_ms: u32,
    base: Duration,
    peak: Duration,
) -> anyhow::Result<(u64, u64)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let mut cfg = ClientConfig::new(switch);
        cfg.tracker.task_timeout = RUN_LIMIT;
        cfg.tracker.max_attempts = 1;
        cfg.tracker.window = 1 << 16;
        let mut client = Client::bind(cfg).await?;
        let spec = TaskSpec::new(Handler::Sleep { micros: task_ms * 1000 }, 1, 0)?;
        let tick = Duration::from_millis(50);
        let start = Instant::now();
        let mut owed = 0.0f64;
        let mut at = start;
        while at < start + base + peak {
            client.drive_until(at).await?;
            let rate = if at < start + base { base_rate } else { peak_rate };
            owed += rate as f64 * tick.as_secs_f64();
            let n = owed.floor() as usize;
            owed -= n as f64;
            if n > 0 {
                client.add_job(&vec![spec; n])?;
                client.flush().await;
            }
            at += tick;
        }
        client.wait_idle(Instant::now() + RUN_LIMIT).await?;
        let s = client.summary();
        Ok((s.submitted, s.completed))
    })
}

fn plot_efficiency(runs: &[EfficiencyRun], dir: &ResultsDir) -> anyhow::Result<()> {
    let mut keys: Vec<(Level, u32, bool)> = runs.iter().map(|r| (r.level, r.task_ms, r.exactly_once)).collect();
    keys.sort_by_key(|&(l, t, c)| (l.name(), t, c));
    keys.dedup();
    let series = keys
        .into_iter()
        .map(|(level, task_ms, claimed)| {
            let points = runs
                .iter()
                .filter(|r| r.level == level && r.task_ms == task_ms && r.exactly_once == claimed)
                .map(|r| (r.executors as f64, r.efficiency * 100.0))
                .collect();
            let claim = if claimed { ", claimed" } else { "" };
            Series::new(format!("{} {task_ms} ms{claim}", level.name()), points)
        })
        .collect();
    let chart =
        Chart::new("Efficiency as executors grow (CloudKon §IV)", "executors", "efficiency (%)", Scale::Log, series);
    render(&chart, dir.path(), "cloudkon_efficiency")?;
    Ok(())
}

fn plot_elasticity(el: &Elasticity, dir: &ResultsDir) -> anyhow::Result<()> {
    let executors = el.timeline.iter().map(|&(t, r, _)| (t, r as f64)).collect();
    let queued = el.timeline.iter().map(|&(t, _, q)| (t, q as f64 / 10.0)).collect();
    let chart = Chart::new(
        format!("Elasticity: {} → {} tasks/s of {} ms, then none", el.base_rate, el.peak_rate, el.task_ms),
        "time (s)",
        "executors / queued tasks ÷ 10",
        Scale::Linear,
        vec![Series::new("executors running", executors), Series::new("tier-2 queue ÷ 10", queued)],
    );
    render(&chart, dir.path(), "cloudkon_elasticity")?;
    Ok(())
}

pub fn print(r: &CloudkonResult, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    if !r.efficiency.is_empty() {
        println!("| level | executors | task | claims | tasks | ideal (ms) | makespan (ms) | efficiency |");
        println!("|---|---:|---:|---|---:|---:|---:|---:|");
        for e in &r.efficiency {
            println!(
                "| {} | {} | {} ms | {} | {} | {:.0} | {:.0} | {:.1} % |",
                e.level.name(),
                e.executors,
                e.task_ms,
                if e.exactly_once { "yes" } else { "no" },
                e.tasks,
                e.ideal_ms,
                e.makespan_ms,
                e.efficiency * 100.0
            );
        }
        println!("\nclaim overhead at 16 ms (1 − efficiency with claims / without):");
        for level in Level::BOTH {
            for x in r.efficiency.iter().filter(|e| e.level == level && e.task_ms == 16 && !e.exactly_once) {
                if let Some(c) = r
                    .efficiency
                    .iter()
                    .find(|c| c.level == level && c.task_ms == 16 && c.exactly_once && c.executors == x.executors)
                {
                    println!(
                        "  {} {} executors: {:.1} %",
                        level.name(),
                        x.executors,
                        (1.0 - c.efficiency / x.efficiency) * 100.0
                    );
                }
            }
        }
    }
    if let Some(el) = &r.elasticity {
        println!(
            "\nelasticity: {} → {} tasks/s of {} ms, lease period {} ms: {} executors started, {} retired, peak {}; \
             queue peak {} tasks, empty {:.1} s after the step and {:.1} s after the drop; {:.1} executor-s against {:.1} for a static pool of {} \
             ({:.0} %); lease periods {} against {}; {} of {} tasks done",
            el.base_rate,
            el.peak_rate,
            el.task_ms,
            el.lease_period_ms,
            el.started,
            el.retired,
            el.peak_executors,
            el.peak_queued,
            el.drain_after_step_s,
            el.drain_after_drop_s,
            el.executor_seconds,
            el.static_executor_seconds,
            el.peak_executors,
            100.0 * el.executor_seconds / el.static_executor_seconds.max(1e-9),
            el.lease_periods,
            el.static_lease_periods,
            el.completed,
            el.submitted
        );
    }
    println!("results and plots in {}", r.results_dir.display());
    Ok(())
}

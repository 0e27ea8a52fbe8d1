//! `bolt bench rlq`: RLQ's two evaluations (its Table 1 synthetic set and its real-trace
//! set) with the five policies of crate::rlq, in a queueing model of the worker types.
//!
//! Each worker type is `replicas` servers with one FIFO queue, as RLQ's worker types
//! are. A task's execution time on a type is its CPU work ÷ the type's speed (CPU quota
//! in cores, or the trace setup's speed factor) plus its I/O time, which no type speeds
//! up. Arrivals are Poisson (synthetic) or the trace generator's (real). Phases as RLQ:
//! a bootstrap of random placement the policies learn from, drained before training
//! starts; training; an evaluation phase the totals are taken over, during which the
//! policies keep learning. Model time is seconds; nothing sleeps, so a run of 8,000
//! tasks takes well under a second for every policy but Double DQN.
//!
//! `--live` runs the same arrivals on real executors instead (`live_run`): the types
//! are executor pools with the type's `--speed`, every task a sleep, time scaled down to
//! tens of ms per task.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::plot::{self, Chart, Scale, Series};
use super::workload::{Trace, TraceParams};
use crate::rlq::{Agent, DqnConfig, Objective, Outcome, PolicyConfig, PolicyKind, WorkerType};

#[derive(clap::Args, Debug, Clone)]
pub struct RlqArgs {
    /// Seeds per policy and objective.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub seeds: u64,
    /// Tasks of random placement the policies start from.
    #[arg(long, default_value_t = 1_000)]
    pub bootstrap: usize,
    /// Training tasks after the bootstrap.
    #[arg(long, default_value_t = 4_000)]
    pub training: usize,
    /// Evaluation tasks (synthetic: in three thirds at 60, 600 and 30 tasks per minute).
    #[arg(long, default_value_t = 3_000, value_parser = clap::value_parser!(u64).range(3..))]
    pub evaluation: u64,
    /// Which setups to run.
    #[arg(long, value_enum, default_values_t = [SetupKind::Synthetic, SetupKind::Trace])]
    pub setup: Vec<SetupKind>,
    /// Where the plots go.
    #[arg(long, value_name = "DIR", default_value = "bench-results/rlq")]
    pub out: PathBuf,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Instead of the model: real executors on loopback, one pool per worker type with
    /// the type's replicas and `--speed`, every task a sleep scaled to tens of ms; the
    /// five policies of a seed run at once, each on a switch and executors of its own.
    #[arg(long)]
    pub live: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SetupKind {
    /// RLQ's Table 1: 8 classes, 6 types with CPU quotas 0.2–1 core and costs 0.85–5.12.
    Synthetic,
    /// RLQ's real-trace set: 5 types of speed 0.5–2, 50 replicas, classes and durations
    /// from the project's Google-like trace generator.
    Trace,
}

impl SetupKind {
    fn name(self) -> &'static str {
        match self {
            SetupKind::Synthetic => "synthetic",
            SetupKind::Trace => "trace",
        }
    }
}

/// One task: its class, CPU work (s at speed 1) and I/O time (s).
#[derive(Clone, Copy, Debug)]
struct Work {
    class: usize,
    cpu_s: f64,
    io_s: f64,
}

impl Work {
    fn exec_s(&self, ty: &WorkerType) -> f64 {
        self.cpu_s / ty.speed + self.io_s
    }

    /// Its execution time on a type of speed 1.
    fn exec_at_speed_one_s(&self) -> f64 {
        self.cpu_s + self.io_s
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Bootstrap,
    Training,
    Evaluation,
}

/// A task arriving `gap_s` after the previous one of its phase.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    gap_s: f64,
    work: Work,
    phase: Phase,
}

/// RLQ's Table 1 worker types: CPU (cores) as the speed, cost per second, one replica.
fn synthetic_types() -> Vec<WorkerType> {
    [(0.2, 0.85), (0.3, 1.93), (0.5, 3.22), (0.5, 2.94), (0.8, 4.02), (1.0, 5.12)]
        .iter()
        .enumerate()
        .map(|(i, &(speed, cost_per_s))| WorkerType { bit: i as u8, speed, cost_per_s, replicas: 1 })
        .collect()
}

/// RLQ's real-trace worker types: speed factor, replicas, cost per second.
fn trace_types() -> Vec<WorkerType> {
    [(0.5, 20, 1.0), (0.75, 14, 2.0), (1.0, 8, 3.0), (1.5, 5, 4.0), (2.0, 3, 5.0)]
        .iter()
        .enumerate()
        .map(|(i, &(speed, replicas, cost_per_s))| WorkerType { bit: i as u8, speed, cost_per_s, replicas })
        .collect()
}

/// A task of RLQ's Table 1 class `class` (0-based) with its parameters drawn from the
/// table's ranges. CPU work models (M⁻¹Mᵀ)^i for i < n on a d×d matrix: n·(d/60)³ × 0.25 s
/// at one core; CPU-mem keeps its results in memory (+15 %); disk writes and reads back
/// n MB at 50 MB/s; CPU-disk adds writing each result.
fn synthetic_work(class: usize, rng: &mut StdRng) -> Work {
    let matrix = |rng: &mut StdRng, n: (f64, f64), d: (f64, f64)| {
        let n = rng.gen_range(n.0..n.1).floor();
        let d = rng.gen_range(d.0..d.1).floor();
        (n, n * (d / 60.0).powi(3) * 0.25)
    };
    let (cpu_s, io_s) = match class {
        0 => (matrix(rng, (1.0, 5.0), (40.0, 60.0)).1, 0.0),
        1 => (matrix(rng, (3.0, 8.0), (50.0, 80.0)).1, 0.0),
        2 => (matrix(rng, (1.0, 5.0), (40.0, 60.0)).1 * 1.15, 0.0),
        3 => (matrix(rng, (3.0, 8.0), (50.0, 80.0)).1 * 1.15, 0.0),
        4 => (0.02, 2.0 * rng.gen_range(35.0..50.0) / 50.0),
        5 => (0.02, 2.0 * rng.gen_range(40.0..80.0) / 50.0),
        6 => {
            let (n, cpu) = matrix(rng, (2.0, 6.0), (40.0, 60.0));
            (cpu, n * 0.05)
        }
        _ => {
            let (n, cpu) = matrix(rng, (3.0, 10.0), (50.0, 80.0));
            (cpu, n * 0.05)
        }
    };
    Work { class, cpu_s, io_s }
}

fn exponential(rng: &mut StdRng, per_s: f64) -> f64 {
    -(1.0 - rng.gen::<f64>()).ln() / per_s
}

/// The synthetic arrivals: Poisson at 60/min through bootstrap and training, then the
/// evaluation in thirds at 60, 600 and 30 per minute.
fn synthetic_arrivals(args: &RlqArgs, seed: u64) -> Vec<Arrival> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let phase = |n: usize, per_min: f64, phase: Phase, out: &mut Vec<Arrival>, rng: &mut StdRng| {
        for _ in 0..n {
            let class = rng.gen_range(0..8);
            let work = synthetic_work(class, rng);
            out.push(Arrival { gap_s: exponential(rng, per_min / 60.0), work, phase });
        }
    };
    phase(args.bootstrap, 60.0, Phase::Bootstrap, &mut out, &mut rng);
    phase(args.training, 60.0, Phase::Training, &mut out, &mut rng);
    let third = args.evaluation as usize / 3;
    let rest = args.evaluation as usize - 2 * third;
    for (n, per_min) in [(third, 60.0), (third, 600.0), (rest, 30.0)] {
        phase(n, per_min, Phase::Evaluation, &mut out, &mut rng);
    }
    out
}

/// Classes of the trace setup (RLQ groups the Borg trace into 50 by job name; here a
/// job's class is the decile of its median task duration, so a class predicts length).
const TRACE_CLASSES: usize = 10;
/// The generator's tasks are milliseconds long; they are stretched by this (arrivals
/// too), to RLQ's scale of seconds.
const TRACE_STRETCH: f64 = 200.0;
/// Offered load of the trace against the types' capacity (Σ replicas × speed).
const TRACE_LOAD: f64 = 0.8;

/// `n` tasks from the trace generator with seed `seed`, as (gap, work).
fn trace_tasks(seed: u64, n: usize) -> anyhow::Result<Vec<(f64, Work)>> {
    let capacity: f64 = trace_types().iter().map(|t| t.replicas as f64 * t.speed).sum();
    let mut seconds = 1.0;
    let trace = loop {
        let t = Trace::generate(&TraceParams::new(seed, seconds, capacity.round() as u32, TRACE_LOAD))?;
        if t.tasks() >= n || seconds > 1_000.0 {
            break t;
        }
        seconds *= 2.0;
    };
    let median = |d: &[u32]| {
        let mut d = d.to_vec();
        d.sort_unstable();
        d[d.len() / 2]
    };
    let mut medians: Vec<u32> = trace.jobs.iter().map(|j| median(&j.2)).collect();
    medians.sort_unstable();
    let class_of = |m: u32| {
        let rank = medians.partition_point(|&x| x < m);
        (rank * TRACE_CLASSES / medians.len()).min(TRACE_CLASSES - 1)
    };
    let mut out = Vec::with_capacity(n);
    let mut last = 0.0;
    for (at, _, durations) in &trace.jobs {
        let class = class_of(median(durations));
        for &us in durations {
            let at_s = at.as_secs_f64() * TRACE_STRETCH;
            let work = Work { class, cpu_s: us as f64 / 1e6 * TRACE_STRETCH, io_s: 0.0 };
            out.push((at_s - last, work));
            last = at_s;
            if out.len() == n {
                return Ok(out);
            }
        }
    }
    anyhow::bail!("the trace generator gave {} tasks, {n} wanted", out.len())
}

/// The trace arrivals: bootstrap and training from one generated trace, evaluation
/// from another (RLQ trains on a generated workload and evaluates on the trace).
fn trace_arrivals(args: &RlqArgs, seed: u64) -> anyhow::Result<Vec<Arrival>> {
    let train = trace_tasks(seed * 2 + 1, args.bootstrap + args.training)?;
    let eval = trace_tasks(seed * 2 + 2, args.evaluation as usize)?;
    let mut out: Vec<Arrival> = train
        .into_iter()
        .enumerate()
        .map(|(i, (gap_s, work))| Arrival {
            gap_s,
            work,
            phase: if i < args.bootstrap { Phase::Bootstrap } else { Phase::Training },
        })
        .collect();
    out.extend(eval.into_iter().map(|(gap_s, work)| Arrival { gap_s, work, phase: Phase::Evaluation }));
    Ok(out)
}

/// The policy settings RLQ's Table 2 picked per setup and objective.
fn tuned(setup: SetupKind, objective: Objective, epsilon_steps: u64) -> (f64, DqnConfig) {
    let base = DqnConfig { epsilon_steps, ..DqnConfig::default() };
    match (setup, objective) {
        (SetupKind::Synthetic, Objective::ExecTime) => {
            (2.0, DqnConfig { hidden_layers: 2, learning_rate: 0.1, ..base })
        }
        (SetupKind::Synthetic, Objective::ExecCost) => {
            (2.0, DqnConfig { hidden_layers: 3, learning_rate: 0.1, ..base })
        }
        (SetupKind::Synthetic, Objective::WaitTime) => {
            (2.0, DqnConfig { hidden_layers: 2, learning_rate: 0.1, ..base })
        }
        (SetupKind::Trace, o) => (
            if o == Objective::ExecCost { 2.0 } else { 1.0 },
            DqnConfig { hidden_layers: 3, learning_rate: 0.001, replay: 4_000, target_sync: 400, ..base },
        ),
    }
}

/// What one run measured over its evaluation tasks.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunTotals {
    pub exec_s: f64,
    pub cost: f64,
    pub wait_s: f64,
    /// Evaluation tasks sent to each type.
    pub per_type: Vec<u64>,
    pub mean_decide_us: f64,
    pub mean_update_us: f64,
    /// The objective's value of each evaluation task, in arrival order.
    #[serde(skip)]
    pub per_task: Vec<f64>,
}

#[derive(Clone, Copy, PartialEq)]
struct Completion {
    at: f64,
    ty: usize,
    task: usize,
}

impl Eq for Completion {}

impl PartialOrd for Completion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Completion {
    // Earliest first out of a max-heap; ties by task for determinism.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.total_cmp(&self.at).then(other.task.cmp(&self.task))
    }
}

/// One run of one policy on one arrival sequence.
fn simulate(cfg: PolicyConfig, arrivals: &[Arrival], seed: u64) -> anyhow::Result<RunTotals> {
    let types = cfg.types.clone();
    let objective = cfg.objective;
    let mut agent = Agent::new(cfg)?;
    let mut rng = StdRng::seed_from_u64(seed ^ 0xb007);
    let mut queues: Vec<VecDeque<usize>> = types.iter().map(|_| VecDeque::new()).collect();
    let mut busy = vec![0u32; types.len()];
    let mut running = BinaryHeap::new();
    let mut decision = vec![0u64; arrivals.len()];
    let mut started_at = vec![0.0f64; arrivals.len()];
    let mut arrived_at = vec![0.0f64; arrivals.len()];
    let mut totals = RunTotals { per_type: vec![0; types.len()], ..RunTotals::default() };
    let mut per_task = vec![0.0; arrivals.len()];
    let eval_start = arrivals.iter().position(|a| a.phase == Phase::Evaluation).unwrap_or(arrivals.len());
    let mut now;
    let mut next = 0usize;
    let mut next_at = arrivals.first().map_or(f64::INFINITY, |a| a.gap_s);
    let mut outstanding = 0usize;

    let start = |task: usize,
                 ty: usize,
                 at: f64,
                 busy: &mut Vec<u32>,
                 running: &mut BinaryHeap<Completion>,
                 started_at: &mut Vec<f64>| {
        busy[ty] += 1;
        started_at[task] = at;
        running.push(Completion { at: at + arrivals[task].work.exec_s(&types[ty]), ty, task });
    };
    loop {
        let completion_at = running.peek().map_or(f64::INFINITY, |c: &Completion| c.at);
        if next >= arrivals.len() && completion_at.is_infinite() {
            break;
        }
        if next_at <= completion_at {
            now = next_at;
            let a = &arrivals[next];
            let d = match a.phase {
                Phase::Bootstrap => agent.decide_as(a.work.class, rng.gen_range(0..types.len()))?,
                _ => agent.decide(a.work.class)?,
            };
            decision[next] = d.id;
            arrived_at[next] = now;
            if a.phase == Phase::Evaluation {
                totals.per_type[d.ty] += 1;
            }
            outstanding += 1;
            if busy[d.ty] < types[d.ty].replicas {
                start(next, d.ty, now, &mut busy, &mut running, &mut started_at);
            } else {
                queues[d.ty].push_back(next);
            }
            next += 1;
            next_at = match arrivals.get(next) {
                None => f64::INFINITY,
                // RLQ's bootstrap ends only when all its tasks have completed.
                Some(n) if n.phase == Phase::Training && a.phase == Phase::Bootstrap => f64::INFINITY,
                Some(n) => now + n.gap_s,
            };
            continue;
        }
        let Some(c) = running.pop() else { break };
        now = c.at;
        busy[c.ty] -= 1;
        outstanding -= 1;
        let work = arrivals[c.task].work;
        let exec_s = work.exec_s(&types[c.ty]);
        let outcome = Outcome { exec_s, wait_s: started_at[c.task] - arrived_at[c.task] };
        agent.complete(decision[c.task], outcome);
        if c.task >= eval_start {
            totals.exec_s += exec_s;
            totals.cost += exec_s * types[c.ty].cost_per_s;
            totals.wait_s += outcome.wait_s;
            per_task[c.task] = objective.cost(&outcome, types[c.ty].cost_per_s);
        }
        if let Some(task) = queues[c.ty].pop_front() {
            start(task, c.ty, now, &mut busy, &mut running, &mut started_at);
        }
        // The bootstrap drained: training arrivals start now.
        if outstanding == 0 && next_at.is_infinite() && next < arrivals.len() {
            next_at = now + arrivals[next].gap_s;
        }
    }
    let stats = agent.stats();
    totals.mean_decide_us = stats.mean_decide_us();
    totals.mean_update_us = stats.mean_update_us();
    totals.per_task = per_task[eval_start..].to_vec();
    Ok(totals)
}

/// Live seconds per model second. The trace set's tasks become the generator's
/// durations × 5 (median 25 ms, at most 500 ms), the synthetic set's 2 to 40 ms.
fn live_scale(setup: SetupKind) -> f64 {
    match setup {
        SetupKind::Synthetic => 0.01,
        SetupKind::Trace => 5.0 / TRACE_STRETCH,
    }
}

/// Longest a live run may take after its last arrival before it counts as failed.
const LIVE_DRAIN: Duration = Duration::from_secs(240);

/// One run of one policy on real executors: a switch and, per worker type, an executor
/// pool of `replicas` threads on loopback with the type's `--speed`; every task a sleep
/// of its execution time at speed 1 × the setup's live scale, so a type of speed s runs
/// it in 1/s of that (CPU contention barely moves a sleep). The client submits the
/// arrivals at their times, drains the bootstrap before training, and learns from the
/// COMPLETEs; the totals are the COMPLETEs' run times and start stamps.
fn live_run(cfg: PolicyConfig, arrivals: &[Arrival], setup: SetupKind, seed: u64) -> anyhow::Result<RunTotals> {
    use crate::client::learned::LearnedPlacement;
    use crate::client::{Client, TaskSpec};
    use crate::executor::{self, ExecutorConfig};
    use crate::switch::{self, SwitchConfig};
    use scheduler_common::descriptor::Handler;

    let scale = live_scale(setup);
    let types = cfg.types.clone();
    let objective = cfg.objective;
    let switch = switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse()?, ..SwitchConfig::default() })?;
    let addr = switch.local_addr();
    let mut pools = Vec::new();
    for (i, t) in types.iter().enumerate() {
        let mut ecfg = ExecutorConfig::new(addr, t.resources());
        ecfg.node = i as u16 + 1;
        ecfg.executors = t.replicas as u16;
        ecfg.speed = t.speed;
        pools.push(executor::spawn(ecfg)?);
    }
    let mut cfg = cfg;
    // Rewards in model seconds, as the model's policies see them.
    cfg.reward_scale = 1.0 / scale;
    let placement = LearnedPlacement::new(cfg, None)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let eval_start = arrivals.iter().position(|a| a.phase == Phase::Evaluation).unwrap_or(arrivals.len());
    let outcome = runtime.block_on(async {
        let mut ccfg = super::workload::bench_client_config(addr);
        // No resubmission: a task waits as long as the run may take.
        ccfg.tracker.task_timeout = LIVE_DRAIN;
        let mut client = Client::bind(ccfg).await?;
        client.set_learned(placement);
        if let Some(p) = client.learned_mut() {
            p.start_bootstrap(seed ^ 0xb007);
        }
        let mut tids = Vec::with_capacity(arrivals.len());
        let mut start = Instant::now();
        let mut at = 0.0f64;
        for (i, a) in arrivals.iter().enumerate() {
            if a.phase != Phase::Bootstrap && i > 0 && arrivals[i - 1].phase == Phase::Bootstrap {
                // RLQ's bootstrap ends only when all its tasks have completed.
                let drained = client.wait_idle(Instant::now() + LIVE_DRAIN).await?;
                anyhow::ensure!(drained, "the bootstrap did not drain in {LIVE_DRAIN:?}");
                if let Some(p) = client.learned_mut() {
                    p.end_bootstrap();
                }
                (start, at) = (Instant::now(), 0.0);
            }
            at += a.gap_s * scale;
            client.drive_until(start + Duration::from_secs_f64(at)).await?;
            let micros = (a.work.exec_at_speed_one_s() * scale * 1e6).round().clamp(1.0, u32::MAX as f64) as u32;
            let mut spec = TaskSpec::new(Handler::Sleep { micros }, 1, 0)?;
            spec.class = a.work.class as u8;
            tids.push(client.tracker().next_tid());
            client.add_job(&[spec])?;
        }
        let idle = client.wait_idle(Instant::now() + LIVE_DRAIN).await?;
        anyhow::ensure!(idle, "the live run did not finish {LIVE_DRAIN:?} after its last arrival");
        let report = client.learned().map(|p| p.report()).unwrap_or_default();
        anyhow::Ok((tids, client.take_records(), report))
    });
    for p in pools {
        p.shutdown();
    }
    switch.shutdown()?;
    let (tids, records, report) = outcome?;
    let by_tid: std::collections::HashMap<u32, &crate::client::TaskRecord> =
        records.iter().map(|r| (r.tid, r)).collect();
    let mut totals = RunTotals {
        per_type: vec![0; types.len()],
        mean_decide_us: report.mean_decide_us,
        mean_update_us: report.mean_update_us,
        ..RunTotals::default()
    };
    for tid in &tids[eval_start..] {
        let r = by_tid.get(tid).ok_or_else(|| anyhow::anyhow!("evaluation task {tid} has no COMPLETE"))?;
        let ty = (r.node as usize).checked_sub(1).filter(|&t| t < types.len());
        let ty = ty.ok_or_else(|| anyhow::anyhow!("task {tid} ran on node {}, no worker type", r.node))?;
        let outcome = Outcome { exec_s: r.run_ns as f64 / 1e9, wait_s: r.sched_delay_ns() as f64 / 1e9 };
        totals.per_type[ty] += 1;
        totals.exec_s += outcome.exec_s;
        totals.cost += outcome.exec_s * types[ty].cost_per_s;
        totals.wait_s += outcome.wait_s;
        totals.per_task.push(objective.cost(&outcome, types[ty].cost_per_s));
    }
    Ok(totals)
}

/// Mean and (sample) standard deviation.
fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n.max(1.0);
    let var = if values.len() > 1 { values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

/// One policy's results over the seeds, for one setup and objective.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyResult {
    pub policy: &'static str,
    pub exec_s: (f64, f64),
    pub cost: (f64, f64),
    pub wait_s: (f64, f64),
    /// The objective's mean total over Random's and round-robin's.
    pub vs_random: f64,
    pub vs_round_robin: f64,
    pub per_type: Vec<f64>,
    pub mean_decide_us: f64,
    pub mean_update_us: f64,
    pub run_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ObjectiveResult {
    pub setup: &'static str,
    pub objective: &'static str,
    pub policies: Vec<PolicyResult>,
    pub plot: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RlqReport {
    /// Real executors (`--live`), not the model.
    pub live: bool,
    pub seeds: u64,
    pub bootstrap: usize,
    pub training: usize,
    pub evaluation: u64,
    pub results: Vec<ObjectiveResult>,
    pub elapsed_s: f64,
}

fn objective_total(r: &RunTotals, o: Objective) -> f64 {
    match o {
        Objective::ExecTime => r.exec_s,
        Objective::ExecCost => r.cost,
        Objective::WaitTime => r.wait_s,
    }
}

pub fn run(args: &RlqArgs) -> anyhow::Result<RlqReport> {
    anyhow::ensure!(args.bootstrap > 0 && args.training > 0, "bootstrap and training need tasks");
    let started = Instant::now();
    std::fs::create_dir_all(&args.out)?;
    let mut results = Vec::new();
    for &setup in &args.setup {
        let (types, classes) = match setup {
            SetupKind::Synthetic => (synthetic_types(), 8),
            SetupKind::Trace => (trace_types(), TRACE_CLASSES),
        };
        let arrivals: Vec<Vec<Arrival>> = (0..args.seeds)
            .map(|seed| match setup {
                SetupKind::Synthetic => Ok(synthetic_arrivals(args, seed)),
                SetupKind::Trace => trace_arrivals(args, seed),
            })
            .collect::<anyhow::Result<_>>()?;
        for objective in Objective::ALL {
            let (delta, dqn) = tuned(setup, objective, args.training as u64);
            let config = |kind: PolicyKind, seed: usize| {
                let mut cfg = PolicyConfig::new(kind, classes, types.clone(), objective);
                cfg.delta = delta;
                cfg.dqn = dqn.clone();
                cfg.seed = seed as u64;
                cfg
            };
            let mut runs: Vec<(PolicyKind, Vec<RunTotals>, f64)> =
                PolicyKind::ALL.iter().map(|&k| (k, Vec::new(), 0.0)).collect();
            for (seed, arr) in arrivals.iter().enumerate() {
                if args.live {
                    // The five policies at once: the machine's load falls on all alike.
                    let done: Vec<anyhow::Result<(RunTotals, f64)>> = std::thread::scope(|scope| {
                        let handles: Vec<_> = PolicyKind::ALL
                            .iter()
                            .map(|&kind| {
                                let cfg = config(kind, seed);
                                scope.spawn(move || {
                                    let t = Instant::now();
                                    live_run(cfg, arr, setup, seed as u64).map(|r| (r, t.elapsed().as_secs_f64()))
                                })
                            })
                            .collect();
                        handles
                            .into_iter()
                            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a live run panicked"))))
                            .collect()
                    });
                    for (run, result) in runs.iter_mut().zip(done) {
                        let (totals, secs) = result?;
                        run.1.push(totals);
                        run.2 += secs;
                    }
                } else {
                    for run in runs.iter_mut() {
                        let t = Instant::now();
                        run.1.push(simulate(config(run.0, seed), arr, seed as u64)?);
                        run.2 += t.elapsed().as_secs_f64();
                    }
                }
                tracing::info!(setup = setup.name(), objective = objective.name(), seed, "done");
            }
            let total_of = |kind: PolicyKind| {
                let r = &runs.iter().find(|r| r.0 == kind).expect("every policy ran").1;
                mean_sd(&r.iter().map(|r| objective_total(r, objective)).collect::<Vec<_>>()).0
            };
            let (random, rr) = (total_of(PolicyKind::Random), total_of(PolicyKind::RoundRobin));
            let policies = runs
                .iter()
                .map(|(kind, r, secs)| {
                    let col = |f: fn(&RunTotals) -> f64| mean_sd(&r.iter().map(f).collect::<Vec<_>>());
                    let mine = total_of(*kind);
                    PolicyResult {
                        policy: kind.name(),
                        exec_s: col(|r| r.exec_s),
                        cost: col(|r| r.cost),
                        wait_s: col(|r| r.wait_s),
                        vs_random: mine / random,
                        vs_round_robin: mine / rr,
                        per_type: (0..types.len())
                            .map(|t| r.iter().map(|r| r.per_type[t] as f64).sum::<f64>() / r.len() as f64)
                            .collect(),
                        mean_decide_us: col(|r| r.mean_decide_us).0,
                        mean_update_us: col(|r| r.mean_update_us).0,
                        run_s: *secs / r.len() as f64,
                    }
                })
                .collect();
            let plot = plot_cumulative(args, setup, objective, &runs)?;
            results.push(ObjectiveResult { setup: setup.name(), objective: objective.name(), policies, plot });
        }
    }
    Ok(RlqReport {
        live: args.live,
        seeds: args.seeds,
        bootstrap: args.bootstrap,
        training: args.training,
        evaluation: args.evaluation,
        results,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// The objective's cumulative total over the evaluation tasks, mean over seeds, one
/// line per policy (RLQ's cumulative curves).
fn plot_cumulative(
    args: &RlqArgs,
    setup: SetupKind,
    objective: Objective,
    runs: &[(PolicyKind, Vec<RunTotals>, f64)],
) -> anyhow::Result<Option<String>> {
    let series = runs
        .iter()
        .map(|(kind, r, _)| {
            let n = r.iter().map(|r| r.per_task.len()).min().unwrap_or(0);
            let step = (n / 300).max(1);
            let mut acc = 0.0;
            let mut points = Vec::new();
            for i in 0..n {
                acc += r.iter().map(|r| r.per_task[i]).sum::<f64>() / r.len() as f64;
                if i % step == 0 || i + 1 == n {
                    points.push(((i + 1) as f64, acc));
                }
            }
            Series::new(kind.name(), points)
        })
        .collect();
    let how = if args.live { "live" } else { "model" };
    let title = format!("RLQ {} set ({how}), objective {}", setup.name(), objective.name());
    let chart = Chart::new(title, "evaluation task", format!("cumulative {}", objective.name()), Scale::Linear, series);
    let stem = format!("rlq-{}{}-{}", if args.live { "live-" } else { "" }, setup.name(), objective.name());
    let [svg, _] = plot::render(&chart, &args.out, &stem)?;
    Ok(Some(svg.display().to_string()))
}

pub fn print(report: &RlqReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
        return Ok(());
    }
    println!(
        "{}: {} seeds; {} bootstrap + {} training + {} evaluation tasks per run; totals over evaluation ({:.0} s)",
        if report.live { "live, real executors" } else { "queueing model" },
        report.seeds,
        report.bootstrap,
        report.training,
        report.evaluation,
        report.elapsed_s
    );
    // Live totals are tens of seconds, the model's thousands.
    let digits = if report.live { 1 } else { 0 };
    for r in &report.results {
        println!("\n### {} set, objective {}\n", r.setup, r.objective);
        println!(
            "| policy | exec time (s) | cost | waiting (s) | ÷ Random | ÷ RR | evaluation tasks per type | decide µs | update µs |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for p in &r.policies {
            let per_type: Vec<String> = p.per_type.iter().map(|n| format!("{n:.0}")).collect();
            println!(
                "| {} | {:.d$} ± {:.d$} | {:.d$} ± {:.d$} | {:.d$} ± {:.d$} | {:.2} | {:.2} | {} | {:.1} | {:.1} |",
                p.policy,
                p.exec_s.0,
                p.exec_s.1,
                p.cost.0,
                p.cost.1,
                p.wait_s.0,
                p.wait_s.1,
                p.vs_random,
                p.vs_round_robin,
                per_type.join(", "),
                p.mean_decide_us,
                p.mean_update_us,
                d = digits
            );
        }
        if let Some(plot) = &r.plot {
            println!("\nplot: {plot}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> RlqArgs {
        RlqArgs {
            seeds: 1,
            bootstrap: 40,
            training: 60,
            evaluation: 30,
            setup: vec![SetupKind::Synthetic],
            out: PathBuf::from("/nonexistent"),
            json: false,
            live: false,
        }
    }

    #[test]
    fn a_run_completes_every_task_and_counts_only_the_evaluation() {
        let args = small();
        let arrivals = synthetic_arrivals(&args, 1);
        assert_eq!(arrivals.len(), 130);
        let cfg = PolicyConfig::new(PolicyKind::RoundRobin, 8, synthetic_types(), Objective::WaitTime);
        let a = simulate(cfg.clone(), &arrivals, 1).unwrap();
        assert_eq!(a.per_type.iter().sum::<u64>(), 30);
        assert_eq!(a.per_task.len(), 30);
        assert!((a.per_task.iter().sum::<f64>() - a.wait_s).abs() < 1e-6);
        assert!(a.exec_s > 0.0 && a.cost > a.exec_s * 0.85);
        let b = simulate(cfg, &arrivals, 1).unwrap();
        assert_eq!((a.exec_s, a.cost, a.wait_s), (b.exec_s, b.cost, b.wait_s), "a seeded run repeats");
    }

    #[test]
    fn a_task_runs_its_cpu_work_over_the_type_s_speed_plus_its_io() {
        let w = Work { class: 0, cpu_s: 1.0, io_s: 0.5 };
        let types = synthetic_types();
        assert!((w.exec_s(&types[0]) - 5.5).abs() < 1e-12);
        assert!((w.exec_s(&types[5]) - 1.5).abs() < 1e-12);
        assert_eq!(types.iter().map(|t| t.cost_per_s).collect::<Vec<_>>(), vec![0.85, 1.93, 3.22, 2.94, 4.02, 5.12]);
        let trace = trace_types();
        assert_eq!(trace.iter().map(|t| t.replicas).sum::<u32>(), 50);
    }

    #[test]
    fn a_live_task_sleeps_its_duration_over_its_type_s_speed() {
        let args = RlqArgs { bootstrap: 5, training: 10, evaluation: 20, setup: vec![SetupKind::Trace], ..small() };
        let arrivals = trace_arrivals(&args, 4).unwrap();
        let types = trace_types();
        let cfg = PolicyConfig::new(PolicyKind::RoundRobin, TRACE_CLASSES, types.clone(), Objective::ExecTime);
        let run = live_run(cfg, &arrivals, SetupKind::Trace, 4).unwrap();
        assert_eq!(run.per_task.len(), 20);
        assert_eq!(run.per_type, vec![4; 5], "round-robin over the five types");
        let scale = live_scale(SetupKind::Trace);
        for (j, (ran_s, a)) in run.per_task.iter().zip(&arrivals[15..]).enumerate() {
            // Round-robin's turn counts the training tasks before; the bootstrap's are random.
            let ty = &types[(10 + j) % 5];
            let want_s = (a.work.exec_at_speed_one_s() * scale * 1e6).round() / 1e6 / ty.speed;
            assert!(
                *ran_s >= want_s * 0.999 && *ran_s < want_s + 0.02,
                "task {j} on speed {}: {ran_s} s, want {want_s} s",
                ty.speed
            );
        }
    }

    #[test]
    fn trace_tasks_span_the_classes() {
        let tasks = trace_tasks(3, 2_000).unwrap();
        assert_eq!(tasks.len(), 2_000);
        let mut seen = [false; TRACE_CLASSES];
        tasks.iter().for_each(|(gap, w)| {
            assert!(*gap >= 0.0 && w.cpu_s > 0.0);
            seen[w.class] = true;
        });
        assert!(seen.iter().filter(|&&s| s).count() >= TRACE_CLASSES / 2, "{seen:?}");
    }
}

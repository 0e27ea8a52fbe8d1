//! `bolt bench peers`: Bolt against the schedulers people use today, in one run, on
//! loopback: Dask distributed, Ray, Celery with a Redis broker, and a plain Redis pull
//! queue (LPUSH / BRPOP workers); and Bolt's Python front door, the `bolt` package
//! running a registered Python function, beside them, with a floor that schedules
//! nothing (`floor.rs`: the datagrams of Bolt's idle-worker path alone). Every system
//! gets the same workers, the same tasks and the same two measurements per workload:
//!
//! - a burst of `--tasks` tasks submitted as fast as the system takes them: throughput
//!   (tasks / (first submit → last result)), and the submit → start delays under load;
//! - `--waves` waves of one task per worker, each submitted after the previous one
//!   finished: the submit → start delay with idle workers, the scheduling delay;
//! - in both, the submit → result delay: until the task's result is back in the
//!   submitting program (Bolt: its COMPLETE at the client).
//!
//! Start times are wall-clock nanoseconds taken by the worker as the task begins, and
//! submit times the same clock on the submitting side (one host). Bolt is measured in
//! this process (switch, executors and client of this library over loopback UDP), each
//! peer by a small Python driver (`peers/*.py`) in a private venv that the bench
//! creates and fills with pinned packages on first use; `bolt-python` by a driver of the
//! same kind in the venv `cargo xtask setup` installs the package into. A peer that cannot be installed
//! or run is reported with the reason, never left out.

mod driver;
pub(crate) mod env;
mod floor;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use scheduler_common::descriptor::Handler;
use serde::Serialize;

use super::plot::{self, Chart, Scale, Series};
use super::suite::{markdown_table, Context, Outcome};
use crate::client::{Client, ClientConfig, TaskSpec};
use crate::executor::{self, ExecutorConfig};
use crate::switch::{self, SwitchConfig};

#[derive(clap::Args, Debug, Clone)]
pub struct PeersArgs {
    /// Small task counts (1,000 tasks, 25 waves): the whole comparison in about a minute
    /// once the venv exists.
    #[arg(long)]
    pub quick: bool,
    /// Tasks in each burst [default: 10000, 1000 with --quick].
    #[arg(long)]
    pub tasks: Option<u32>,
    /// Waves of one task per worker, for the delay with idle workers [default: 200, 25
    /// with --quick].
    #[arg(long)]
    pub waves: Option<u32>,
    /// Workers (Bolt executors, bolt-python executor threads, Dask worker processes, Ray
    /// CPUs, Celery pool processes, Redis queue worker processes).
    #[arg(long, default_value_t = 4)]
    pub workers: u16,
    /// Duration of the sleep workload's tasks, in microseconds.
    #[arg(long, default_value_t = 1000)]
    pub sleep_us: u32,
    /// Systems to run.
    #[arg(long, value_delimiter = ',', default_values_t = System::ALL)]
    pub systems: Vec<System>,
    /// The Python venv for the peers [default: <cargo target dir>/bench/peers-venv].
    #[arg(long)]
    pub venv: Option<PathBuf>,
    /// Interpreter that creates the venv [default: /usr/bin/python3, else python3].
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The venv with the `bolt` Python package, for `bolt-python` [default: <cargo
    /// target dir>/python-venv, where `cargo xtask setup` installs it; built there with
    /// maturin when missing].
    #[arg(long)]
    pub bolt_venv: Option<PathBuf>,
    /// Print JSON lines (one per measurement, then one per ratio) instead of tables.
    #[arg(long)]
    pub json: bool,
}

impl PeersArgs {
    /// The command's defaults (4 workers, 1 ms sleep tasks), every system, JSON output.
    pub fn every_system(quick: bool) -> PeersArgs {
        PeersArgs {
            quick,
            tasks: None,
            waves: None,
            workers: 4,
            sleep_us: 1000,
            systems: System::ALL.to_vec(),
            venv: None,
            python: None,
            bolt_venv: None,
            json: true,
        }
    }

    fn tasks(&self) -> u32 {
        self.tasks.unwrap_or(if self.quick { 1_000 } else { 10_000 })
    }

    fn waves(&self) -> u32 {
        self.waves.unwrap_or(if self.quick { 25 } else { 200 })
    }

    fn workloads(&self) -> [Workload; 2] {
        [Workload::Noop, Workload::Sleep { micros: self.sleep_us }]
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    Bolt,
    /// The `bolt` Python package: a registered Python function run by its executors.
    BoltPython,
    Dask,
    Ray,
    Celery,
    RedisQueue,
    /// Not a scheduler: a relay thread between the submitter and the worker threads,
    /// which pairs tasks with idle workers over loopback UDP with the system calls of
    /// Bolt's one-level path. The least the idle-worker path can cost here.
    UdpFloor,
}

impl System {
    pub const ALL: [System; 7] = [
        System::Bolt,
        System::BoltPython,
        System::Dask,
        System::Ray,
        System::Celery,
        System::RedisQueue,
        System::UdpFloor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            System::Bolt => "bolt",
            System::BoltPython => "bolt-python",
            System::Dask => "dask",
            System::Ray => "ray",
            System::Celery => "celery",
            System::RedisQueue => "redis-queue",
            System::UdpFloor => "udp-floor",
        }
    }

    /// The driver script and what it runs in (None for what is measured in Rust).
    fn driver(self) -> Option<(&'static str, Interpreter)> {
        match self {
            System::Bolt | System::UdpFloor => None,
            System::BoltPython => Some(("bolt_driver.py", Interpreter::BoltPackage)),
            System::Dask => Some(("dask_driver.py", Interpreter::Peers(&env::CORE))),
            System::Ray => Some(("ray_driver.py", Interpreter::Peers(&env::RAY))),
            System::Celery => Some(("celery_driver.py", Interpreter::Peers(&env::CORE))),
            System::RedisQueue => Some(("redis_queue_driver.py", Interpreter::Peers(&env::CORE))),
        }
    }

    fn needs_redis(self) -> bool {
        matches!(self, System::Celery | System::RedisQueue)
    }
}

/// Where a driver runs: the peers' venv with a package set installed, or the venv of
/// the `bolt` Python package.
#[derive(Clone, Copy)]
enum Interpreter {
    Peers(&'static env::PackageSet),
    BoltPackage,
}

impl std::fmt::Display for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The scripts, committed beside this module and written to the run directory.
const SCRIPTS: [(&str, &str); 6] = [
    ("peers_common.py", include_str!("peers/peers_common.py")),
    ("bolt_driver.py", include_str!("peers/bolt_driver.py")),
    ("dask_driver.py", include_str!("peers/dask_driver.py")),
    ("ray_driver.py", include_str!("peers/ray_driver.py")),
    ("celery_driver.py", include_str!("peers/celery_driver.py")),
    ("redis_queue_driver.py", include_str!("peers/redis_queue_driver.py")),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Noop,
    Sleep { micros: u32 },
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Noop => "noop",
            Workload::Sleep { .. } => "sleep",
        }
    }

    /// Task duration as the drivers take it (0: no-op).
    pub fn sleep_us(self) -> u32 {
        match self {
            Workload::Noop => 0,
            Workload::Sleep { micros } => micros,
        }
    }

    fn handler(self) -> Handler<'static> {
        match self {
            Workload::Noop => Handler::Noop,
            Workload::Sleep { micros } => Handler::Sleep { micros },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Could not be installed or started here.
    Unavailable,
    /// Started, but did not finish the workload.
    Failed,
}

/// One JSON line: one system on one workload.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub experiment: &'static str,
    pub kind: &'static str,
    pub system: System,
    pub workload: &'static str,
    pub sleep_us: u32,
    pub tasks: u32,
    pub workers: u16,
    pub status: Status,
    pub reason: Option<String>,
    /// Burst: tasks / (first submit → last result).
    pub throughput_tasks_per_s: Option<f64>,
    /// Waves of one task per worker: submit → start with idle workers.
    pub delay_p50_us: Option<f64>,
    pub delay_p99_us: Option<f64>,
    pub idle_tasks: Option<u64>,
    /// Burst: submit → start under load (includes waiting behind earlier tasks).
    pub burst_delay_p50_us: Option<f64>,
    pub burst_delay_p99_us: Option<f64>,
    /// Waves: submit → the task's result in the submitting program, idle workers.
    pub result_p50_us: Option<f64>,
    pub result_p99_us: Option<f64>,
    /// Burst: submit → result under load.
    pub burst_result_p50_us: Option<f64>,
    pub burst_result_p99_us: Option<f64>,
}

impl Measurement {
    fn new(system: System, workload: Workload, args: &PeersArgs, status: Status, reason: Option<String>) -> Self {
        Measurement {
            experiment: "peers",
            kind: "measurement",
            system,
            workload: workload.name(),
            sleep_us: workload.sleep_us(),
            tasks: args.tasks(),
            workers: args.workers,
            status,
            reason,
            throughput_tasks_per_s: None,
            delay_p50_us: None,
            delay_p99_us: None,
            idle_tasks: None,
            burst_delay_p50_us: None,
            burst_delay_p99_us: None,
            result_p50_us: None,
            result_p99_us: None,
            burst_result_p50_us: None,
            burst_result_p99_us: None,
        }
    }
}

/// Bolt over a peer, from the same run.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub experiment: &'static str,
    pub kind: &'static str,
    pub system: System,
    pub workload: &'static str,
    /// Bolt's throughput / the peer's: above 1, Bolt finishes the burst sooner.
    pub throughput_bolt_over_peer: f64,
    /// Bolt's median delay with idle workers / the peer's: below 1, Bolt starts tasks sooner.
    pub delay_p50_bolt_over_peer: f64,
    /// Bolt's median submit → result with idle workers / the peer's: below 1, results
    /// come back sooner on Bolt.
    pub result_p50_bolt_over_peer: Option<f64>,
}

/// Where it ran, for docs/benchmarks.md.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub experiment: &'static str,
    pub kind: &'static str,
    pub cpus: usize,
    pub load_avg_1m: Option<f64>,
    pub kernel: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PeersReport {
    pub machine: Machine,
    pub measurements: Vec<Measurement>,
    pub ratios: Vec<Ratio>,
}

pub fn run(args: &PeersArgs) -> anyhow::Result<PeersReport> {
    anyhow::ensure!(args.workers > 0 && args.tasks() > 0, "need at least one worker and one task");
    let machine = machine();
    let systems: Vec<System> = System::ALL.into_iter().filter(|s| args.systems.contains(s)).collect();
    let workloads = args.workloads();
    let progress = steps_bar((systems.len() * workloads.len()) as u64);
    let mut measurements = Vec::new();

    if systems.contains(&System::Bolt) {
        for w in workloads {
            progress.set_message(format!("bolt {}", w.name()));
            measurements.push(measure_bolt(w, args));
            progress.inc(1);
        }
    }
    if systems.contains(&System::UdpFloor) {
        for w in workloads {
            progress.set_message(format!("udp-floor {}", w.name()));
            measurements.push(floor::measure(w, args));
            progress.inc(1);
        }
    }
    let peers: Vec<System> = systems.iter().copied().filter(|s| s.driver().is_some()).collect();
    if !peers.is_empty() {
        measure_peers(&peers, args, &progress, &mut measurements)?;
    }
    progress.finish_and_clear();
    let ratios = ratios(&measurements);
    Ok(PeersReport { machine, measurements, ratios })
}

/// A bar of `steps` (system, workload) pairs, drawn only when stderr is a terminal.
fn steps_bar(steps: u64) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Bolt one-level over loopback: a software switch and `workers` executors of this
/// library, a fresh client per phase.
fn measure_bolt(workload: Workload, args: &PeersArgs) -> Measurement {
    match try_measure_bolt(workload, args) {
        Ok(m) => m,
        Err(e) => Measurement::new(System::Bolt, workload, args, Status::Failed, Some(format!("{e:#}"))),
    }
}

fn try_measure_bolt(workload: Workload, args: &PeersArgs) -> anyhow::Result<Measurement> {
    let switch = switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse()?, ..SwitchConfig::default() })?;
    let mut cfg = ExecutorConfig::new(switch.local_addr(), 0xff);
    cfg.executors = args.workers;
    let pool = executor::spawn(cfg)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let task = TaskSpec::new(workload.handler(), 1, 0)?;
    let limit = phase_limit(args);
    let result = runtime.block_on(async {
        let addr = switch.local_addr();
        // Warm-up, as the drivers do: every executor has run a task.
        bolt_phase(addr, &[vec![task; 2 * args.workers as usize]], limit).await?;
        let burst = bolt_phase(addr, &[vec![task; args.tasks() as usize]], limit).await?;
        let waves: Vec<_> = (0..args.waves()).map(|_| vec![task; args.workers as usize]).collect();
        let idle = bolt_phase(addr, &waves, limit).await?;
        anyhow::Ok((burst, idle))
    });
    pool.shutdown();
    switch.shutdown()?;
    let (burst, idle) = result?;
    let mut m = Measurement::new(System::Bolt, workload, args, Status::Ok, None);
    m.throughput_tasks_per_s = Some(burst.throughput_tasks_per_s);
    m.burst_delay_p50_us = Some(burst.p50_sched_delay_us);
    m.burst_delay_p99_us = Some(burst.p99_sched_delay_us);
    m.delay_p50_us = Some(idle.p50_sched_delay_us);
    m.delay_p99_us = Some(idle.p99_sched_delay_us);
    m.idle_tasks = Some(idle.completed);
    m.burst_result_p50_us = Some(burst.p50_result_delay_us);
    m.burst_result_p99_us = Some(burst.p99_result_delay_us);
    m.result_p50_us = Some(idle.p50_result_delay_us);
    m.result_p99_us = Some(idle.p99_result_delay_us);
    Ok(m)
}

/// Submits each job after the previous one finished, from one new client; fails unless
/// every task completed.
async fn bolt_phase(
    switch: std::net::SocketAddr,
    jobs: &[Vec<TaskSpec>],
    limit: Duration,
) -> anyhow::Result<crate::client::Summary> {
    let mut client = Client::bind(ClientConfig::new(switch)).await?;
    let deadline = Instant::now() + limit;
    for job in jobs {
        client.submit(job).await?;
        if !client.wait_idle(deadline).await? {
            anyhow::bail!("not finished within {} s: {:?}", limit.as_secs(), client.summary());
        }
    }
    let s = client.summary();
    anyhow::ensure!(s.completed == s.submitted && s.failed == 0, "tasks failed: {s:?}");
    Ok(s)
}

/// Each phase (warm-up, burst, all waves) gets this long; generous, since the slowest
/// peers run a few hundred tasks per second on a shared machine.
fn phase_limit(args: &PeersArgs) -> Duration {
    let per_task = Duration::from_micros(30_000 + 2 * args.sleep_us as u64);
    Duration::from_secs(30) + per_task * args.tasks().max(args.waves() * args.workers as u32)
}

fn measure_peers(
    peers: &[System],
    args: &PeersArgs,
    progress: &ProgressBar,
    out: &mut Vec<Measurement>,
) -> anyhow::Result<()> {
    let workloads = args.workloads();
    let unavailable = |out: &mut Vec<Measurement>, system: System, reason: &str| {
        tracing::warn!(%system, reason, "peer unavailable");
        for w in workloads {
            out.push(Measurement::new(system, w, args, Status::Unavailable, Some(reason.to_string())));
        }
        progress.inc(workloads.len() as u64);
    };

    progress.set_message("Python venv");
    let python = args.python.clone().unwrap_or_else(env::default_python);
    let venv_dir = args.venv.clone().unwrap_or_else(env::default_venv);
    let needs_venv = peers.iter().any(|p| matches!(p.driver(), Some((_, Interpreter::Peers(_)))));
    let venv = if needs_venv {
        env::Venv::create(&venv_dir, &python).map_err(|e| format!("no Python venv: {e:#}"))
    } else {
        Err("no peer needs the venv".to_string())
    };
    let run_dir = env::RunDir::create()?;
    for (name, text) in SCRIPTS {
        run_dir.write(name, text)?;
    }
    let redis = if peers.iter().any(|p| p.needs_redis()) {
        progress.set_message("redis-server");
        Some(env::RedisServer::start(&run_dir.path).map_err(|e| format!("{e:#}")))
    } else {
        None
    };

    // Each package set is installed (or fails) once, whichever peers need it.
    let mut installed: Vec<(&str, Result<(), String>)> = Vec::new();
    for &peer in peers {
        let Some((script, interpreter)) = peer.driver() else { continue };
        let interpreter = match (interpreter, &venv) {
            (Interpreter::BoltPackage, _) => {
                progress.set_message(format!("{peer}: the bolt package (maturin on first use)"));
                let bolt_venv = args.bolt_venv.clone().unwrap_or_else(env::default_bolt_venv);
                env::bolt_package(&bolt_venv, &python).map_err(|e| format!("no bolt Python package: {e:#}"))
            }
            (Interpreter::Peers(_), Err(reason)) => Err(reason.clone()),
            (Interpreter::Peers(packages), Ok(venv)) => {
                progress.set_message(format!("{peer}: pip install (first use only)"));
                if !installed.iter().any(|(name, _)| *name == packages.name) {
                    installed.push((packages.name, venv.install(packages).map_err(|e| format!("{e:#}"))));
                }
                match installed.iter().find(|(name, _)| *name == packages.name) {
                    Some((_, Err(reason))) => Err(reason.clone()),
                    _ => Ok(venv.python()),
                }
            }
        };
        let interpreter = match interpreter {
            Ok(python) => python,
            Err(reason) => {
                unavailable(out, peer, &reason);
                continue;
            }
        };
        let port = match (&redis, peer.needs_redis()) {
            (Some(Ok(server)), true) => server.port,
            (Some(Err(reason)), true) => {
                unavailable(out, peer, &format!("no Redis server: {reason}"));
                continue;
            }
            _ => 0,
        };
        progress.set_message(format!("{peer}"));
        tracing::info!(%peer, "measuring");
        let sleeps: Vec<String> = workloads.iter().map(|w| w.sleep_us().to_string()).collect();
        let driver_args: Vec<String> = [
            ("--workers", args.workers.to_string()),
            ("--tasks", args.tasks().to_string()),
            ("--waves", args.waves().to_string()),
            ("--workloads", sleeps.join(",")),
            ("--timeout-s", phase_limit(args).as_secs().to_string()),
            ("--redis-port", port.to_string()),
            ("--tmp", run_dir.path.join(peer.name()).display().to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect();
        std::fs::create_dir_all(run_dir.path.join(peer.name()))?;
        // Start-up, and per workload a warm-up, the burst and the waves.
        let limit = Duration::from_secs(120) + phase_limit(args) * 3 * workloads.len() as u32;
        let run = driver::run(&interpreter, &run_dir.path, script, &driver_args, port, limit, |line| {
            if line.sleep_us.is_some() {
                progress.inc(1);
            }
        })
        .with_context(|| format!("running the {peer} driver"))?;
        out.extend(peer_measurements(peer, args, run));
    }
    Ok(())
}

/// One measurement per workload from a driver's lines; a workload the driver did not
/// report on gets the driver's error (or its silence) as the reason.
fn peer_measurements(peer: System, args: &PeersArgs, run: driver::DriverRun) -> Vec<Measurement> {
    let workloads = args.workloads();
    if let Some(line) = run.lines.iter().find(|l| l.status == "unavailable") {
        let reason = line.reason.clone().unwrap_or_else(|| "the driver gave no reason".into());
        return workloads
            .iter()
            .map(|&w| Measurement::new(peer, w, args, Status::Unavailable, Some(reason.clone())))
            .collect();
    }
    workloads
        .iter()
        .map(|&w| {
            let Some(line) = run.lines.iter().find(|l| l.sleep_us == Some(w.sleep_us() as u64)) else {
                let reason = run.error.clone().unwrap_or_else(|| "the driver exited without a result".into());
                return Measurement::new(peer, w, args, Status::Failed, Some(reason));
            };
            let status = if line.status == "ok" { Status::Ok } else { Status::Failed };
            let mut m = Measurement::new(peer, w, args, status, line.reason.clone());
            if status == Status::Ok {
                m.throughput_tasks_per_s = line.throughput_tasks_per_s;
                m.delay_p50_us = line.delay_p50_us;
                m.delay_p99_us = line.delay_p99_us;
                m.idle_tasks = line.idle_tasks;
                m.burst_delay_p50_us = line.burst_delay_p50_us;
                m.burst_delay_p99_us = line.burst_delay_p99_us;
                m.result_p50_us = line.result_p50_us;
                m.result_p99_us = line.result_p99_us;
                m.burst_result_p50_us = line.burst_result_p50_us;
                m.burst_result_p99_us = line.burst_result_p99_us;
            }
            m
        })
        .collect()
}

/// Bolt over each peer that ran, per workload.
pub fn ratios(measurements: &[Measurement]) -> Vec<Ratio> {
    let ok = |m: &&Measurement| m.status == Status::Ok;
    let mut out = Vec::new();
    for bolt in measurements.iter().filter(ok).filter(|m| m.system == System::Bolt) {
        for peer in measurements.iter().filter(ok).filter(|m| m.system != System::Bolt && m.workload == bolt.workload) {
            let (Some(bt), Some(pt), Some(bd), Some(pd)) =
                (bolt.throughput_tasks_per_s, peer.throughput_tasks_per_s, bolt.delay_p50_us, peer.delay_p50_us)
            else {
                continue;
            };
            out.push(Ratio {
                experiment: "peers",
                kind: "ratio",
                system: peer.system,
                workload: peer.workload,
                throughput_bolt_over_peer: bt / pt.max(f64::MIN_POSITIVE),
                delay_p50_bolt_over_peer: bd / pd.max(f64::MIN_POSITIVE),
                result_p50_bolt_over_peer: bolt
                    .result_p50_us
                    .zip(peer.result_p50_us)
                    .map(|(b, p)| b / p.max(f64::MIN_POSITIVE)),
            });
        }
    }
    out
}

fn machine() -> Machine {
    let load = std::fs::read_to_string("/proc/loadavg").ok();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok();
    Machine {
        experiment: "peers",
        kind: "machine",
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_avg_1m: load.and_then(|l| l.split_whitespace().next()?.parse().ok()),
        kernel: kernel.map(|k| k.trim().to_string()),
    }
}

/// `peers` as an experiment of `bolt bench all`: the default comparison (or --quick's),
/// its JSON lines, a Markdown table of the ratios, and charts of throughput and idle
/// delay by task length. Bolt runs one-level on loopback here, as every peer does.
pub fn run_in_suite(ctx: &Context) -> anyhow::Result<Outcome> {
    let args = PeersArgs::every_system(ctx.quick);
    ctx.progress("peers", format_args!("{} tasks per burst, {} workers", args.tasks(), args.workers));
    let report = run(&args)?;
    let mut out = Outcome::default();
    let mut lines = ctx.results.jsonl("peers")?;
    lines.write(&report.machine)?;
    for m in &report.measurements {
        lines.write(m)?;
        // Bolt's own tasks are the ones this project answers for; a peer that could not
        // run is reported below, with its reason.
        if m.system == System::Bolt && m.status != Status::Unavailable {
            out.submitted += u64::from(m.tasks);
            out.completed += if m.status == Status::Ok { u64::from(m.tasks) } else { 0 };
        }
    }
    for r in &report.ratios {
        lines.write(r)?;
    }
    (out.jsonl, out.lines) = lines.finish()?;
    let title = |metric: &str| format!("Bolt and its peers, {} workers on loopback: {metric}", args.workers);
    let charts = [
        (
            Chart::new(
                title("throughput"),
                "task length (µs)",
                "tasks per second (burst)",
                Scale::Linear,
                by_task_length(&report, |m| m.throughput_tasks_per_s),
            ),
            "peers_throughput",
        ),
        (
            Chart::new(
                title("delay"),
                "task length (µs)",
                "median scheduling delay with idle workers (µs)",
                Scale::Linear,
                by_task_length(&report, |m| m.delay_p50_us),
            ),
            "peers_delay",
        ),
        (
            Chart::new(
                title("submit to result"),
                "task length (µs)",
                "median submit → result with idle workers (µs)",
                Scale::Linear,
                by_task_length(&report, |m| m.result_p50_us),
            ),
            "peers_result",
        ),
    ];
    for (chart, stem) in &charts {
        out.plots.extend(plot::render(chart, ctx.results.path(), stem)?);
    }
    let rows: Vec<Vec<String>> = report
        .ratios
        .iter()
        .map(|r| {
            vec![
                r.system.name().to_string(),
                r.workload.to_string(),
                format!("{:.1}x", r.throughput_bolt_over_peer),
                format!("{:.3}x", r.delay_p50_bolt_over_peer),
                r.result_p50_bolt_over_peer.map_or("-".to_string(), |v| format!("{v:.3}x")),
            ]
        })
        .collect();
    let mut table = markdown_table(
        &[
            "Bolt over",
            "workload",
            "throughput (>1: Bolt)",
            "median delay, idle workers (<1: Bolt)",
            "median submit → result, idle workers (<1: Bolt)",
        ],
        &rows,
    );
    for m in report.measurements.iter().filter(|m| m.status != Status::Ok) {
        let why = format!("{} {}: {}", m.system.name(), m.workload, m.reason.as_deref().unwrap_or("no reason given"));
        table.push_str(&format!("\n{why}\n"));
        out.fallbacks.push(why);
    }
    out.table = table;
    Ok(out)
}

/// One series per system that ran: `value` of each workload against its task length.
fn by_task_length(report: &PeersReport, value: fn(&Measurement) -> Option<f64>) -> Vec<Series> {
    System::ALL
        .iter()
        .map(|&sys| {
            let points = report
                .measurements
                .iter()
                .filter(|m| m.system == sys && m.status == Status::Ok)
                .filter_map(|m| Some((f64::from(m.sleep_us), value(m)?)))
                .collect();
            Series::new(sys.name(), points)
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

pub fn print(report: &PeersReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(&report.machine)?);
        for m in &report.measurements {
            println!("{}", serde_json::to_string(m)?);
        }
        for r in &report.ratios {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    let m = &report.machine;
    let load = m.load_avg_1m.map_or("?".into(), |l| format!("{l:.2}"));
    println!("{} CPUs, Linux {}, load average {load}", m.cpus, m.kernel.as_deref().unwrap_or("?"));
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    // Start: submit → the task begins on a worker; result: submit → its result back in
    // the submitting program. Idle: the waves; burst: under load.
    println!(
        "{:<12} {:<6} {:>6} {:>7} {:>10} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}",
        "system",
        "load",
        "tasks",
        "workers",
        "tasks/s",
        "start p50 us",
        "start p99 us",
        "result p50 us",
        "result p99 us",
        "burst start50",
        "burst start99",
        "burst res. 50",
        "burst res. 99"
    );
    for x in report.measurements.iter().filter(|x| x.status == Status::Ok) {
        println!(
            "{:<12} {:<6} {:>6} {:>7} {:>10} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}",
            x.system.name(),
            x.workload,
            x.tasks,
            x.workers,
            num(x.throughput_tasks_per_s),
            num(x.delay_p50_us),
            num(x.delay_p99_us),
            num(x.result_p50_us),
            num(x.result_p99_us),
            num(x.burst_delay_p50_us),
            num(x.burst_delay_p99_us),
            num(x.burst_result_p50_us),
            num(x.burst_result_p99_us)
        );
    }
    println!();
    println!(
        "{:<12} {:<6} {:>24} {:>26} {:>26}",
        "Bolt over", "load", "throughput (>1: Bolt)", "start p50 (<1: Bolt)", "result p50 (<1: Bolt)"
    );
    for r in &report.ratios {
        let result = r.result_p50_bolt_over_peer.map_or("-".to_string(), |v| format!("{v:.3}x"));
        println!(
            "{:<12} {:<6} {:>23.1}x {:>25.3}x {:>26}",
            r.system.name(),
            r.workload,
            r.throughput_bolt_over_peer,
            r.delay_p50_bolt_over_peer,
            result
        );
    }
    let not_run: Vec<&Measurement> = report.measurements.iter().filter(|x| x.status != Status::Ok).collect();
    if !not_run.is_empty() {
        println!();
        for x in not_run {
            let status = if x.status == Status::Unavailable { "unavailable" } else { "failed" };
            println!("{} {} {status}: {}", x.system.name(), x.workload, x.reason.as_deref().unwrap_or("?"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::driver::{DriverLine, DriverRun};
    use super::*;

    fn args() -> PeersArgs {
        PeersArgs {
            quick: true,
            tasks: None,
            waves: None,
            workers: 2,
            sleep_us: 1000,
            systems: System::ALL.to_vec(),
            venv: None,
            python: None,
            bolt_venv: None,
            json: false,
        }
    }

    fn line(json: &str) -> DriverLine {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn an_unavailable_peer_is_reported_for_every_workload() {
        let run = DriverRun {
            lines: vec![line(r#"{"status":"unavailable","reason":"ray does not import"}"#)],
            malformed_lines: 0,
            error: None,
        };
        let m = peer_measurements(System::Ray, &args(), run);
        assert_eq!(m.len(), 2);
        assert!(m
            .iter()
            .all(|m| m.status == Status::Unavailable && m.reason.as_deref() == Some("ray does not import")));
    }

    #[test]
    fn a_workload_the_driver_never_reached_fails_with_the_drivers_error() {
        let ok = r#"{"status":"ok","sleep_us":0,"throughput_tasks_per_s":500.0,"delay_p50_us":900.0,
                     "delay_p99_us":2000.0,"idle_tasks":50,"burst_delay_p50_us":1.0,"burst_delay_p99_us":2.0,
                     "result_p50_us":1100.0,"result_p99_us":2500.0,"burst_result_p50_us":3.0,
                     "burst_result_p99_us":4.0}"#;
        let run = DriverRun {
            lines: vec![line(ok)],
            malformed_lines: 0,
            error: Some("did not finish within 60 s: worker lost".into()),
        };
        let m = peer_measurements(System::Dask, &args(), run);
        assert_eq!((m[0].workload, m[0].status, m[0].throughput_tasks_per_s), ("noop", Status::Ok, Some(500.0)));
        assert_eq!((m[0].result_p50_us, m[0].result_p99_us), (Some(1100.0), Some(2500.0)));
        assert_eq!((m[0].burst_result_p50_us, m[0].burst_result_p99_us), (Some(3.0), Some(4.0)));
        assert_eq!((m[1].workload, m[1].status), ("sleep", Status::Failed));
        assert_eq!(m[1].reason.as_deref(), Some("did not finish within 60 s: worker lost"));
    }

    #[test]
    fn bolt_python_runs_its_driver_in_the_bolt_package_venv() {
        assert!(matches!(System::BoltPython.driver(), Some(("bolt_driver.py", Interpreter::BoltPackage))));
        assert!(SCRIPTS.iter().any(|(name, _)| *name == "bolt_driver.py"));
        assert_eq!(serde_json::to_value(System::BoltPython).unwrap(), "bolt-python");
        let every = PeersArgs::every_system(true);
        assert!(every.systems.contains(&System::BoltPython) && !System::BoltPython.needs_redis());
    }

    #[test]
    fn ratios_pair_bolt_with_each_peer_that_ran_on_the_same_workload() {
        let a = args();
        let mut bolt = Measurement::new(System::Bolt, Workload::Noop, &a, Status::Ok, None);
        bolt.throughput_tasks_per_s = Some(10_000.0);
        bolt.delay_p50_us = Some(100.0);
        let mut dask = Measurement::new(System::Dask, Workload::Noop, &a, Status::Ok, None);
        dask.throughput_tasks_per_s = Some(500.0);
        dask.delay_p50_us = Some(2_000.0);
        dask.result_p50_us = Some(4_000.0);
        let celery = Measurement::new(System::Celery, Workload::Noop, &a, Status::Failed, Some("timeout".into()));
        let mut ray_sleep = Measurement::new(System::Ray, Workload::Sleep { micros: 1000 }, &a, Status::Ok, None);
        ray_sleep.throughput_tasks_per_s = Some(1.0);
        ray_sleep.delay_p50_us = Some(1.0);
        let r = ratios(&[bolt, dask, celery, ray_sleep]);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].system, r[0].workload), (System::Dask, "noop"));
        assert_eq!((r[0].throughput_bolt_over_peer, r[0].delay_p50_bolt_over_peer), (20.0, 0.05));
        // Bolt's result delay is unknown here: no result ratio, the others still made.
        assert_eq!(r[0].result_p50_bolt_over_peer, None);
    }
}

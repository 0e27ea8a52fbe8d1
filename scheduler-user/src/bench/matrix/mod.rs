//! MATRIX's evaluation on the namespace testbed (`bolt bench matrix`): DAG jobs whose
//! tasks read data on the hosts, placed by MATRIX's Algorithm 1, in one run:
//!
//! - image stacking (one input per task, each file read by `locality` tasks) under MDL
//!   at several localities: time per task per executor against the ideal;
//! - all-pairs (two file sets, one task per pair) under MLB, MDL, RLDS and FLDS;
//! - the four DAG shapes of `mix` tasks under FLDS.
//!
//! Scale. MATRIX ran on 10 Gb/s links; what makes locality matter is the ratio of a
//! remote fetch to the task length. The handlers are calibrated on this machine to
//! `--task-ms` of CPU, the host links are capped (tbf) at `--link-mbit`, and every
//! object is sized so that its fetch over the capped link takes the same fraction of a
//! task as MATRIX's did at 10 Gb/s: bytes = MATRIX's bytes × (cap / 10 Gb/s) ×
//! (task-ms / MATRIX's task length). Metrics are MATRIX's (§IV.B): efficiency = mean
//! task length × tasks per executor / makespan = busy / (executors × makespan); time
//! per task per executor = makespan × executors / tasks; utilisation = busy executors
//! over all, in time bins.

pub mod cluster;
mod dask;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use self::cluster::{DagRun, DataCluster};
use super::output::ResultsDir;
use super::plot::{render, Chart, Series};
use crate::client::dag::{generate, DagTask, Shape};
use crate::client::dag_run::{data_tasks, input_objects, mix_dag, NodeStore};
use crate::executor::{run_data, MAX_PASSES};
use crate::placement::{PlacementPolicy, Threshold};
use crate::store::ObjectLocation;
use crate::testbed::{cap_host_links, Layout, LinkCap, Shaper, Testbed};

/// MATRIX's link, bits per second.
const MATRIX_LINK_BPS: f64 = 10e9;
/// Image stacking in MATRIX: a 2 MB file per task, 158 ms per task.
const MATRIX_STACK_BYTES: f64 = 2e6;
const MATRIX_STACK_MS: f64 = 158.0;
/// All-pairs in MATRIX: two 12 MB files per task, 100 ms per task.
const MATRIX_PAIR_FILE_BYTES: f64 = 12e6;
const MATRIX_PAIR_MS: f64 = 100.0;
/// MATRIX's DAGs: 5 MB outputs on average, 50 ms tasks on average, t = 0.5 × the link.
const MATRIX_DAG_OUTPUT_BYTES: f64 = 5e6;
const MATRIX_DAG_MS: f64 = 50.0;
const MATRIX_DAG_T_FRACTION: f64 = 0.5;
/// Utilisation bins per run.
const UTILISATION_BINS: usize = 20;

#[derive(clap::Args, Debug, Clone)]
pub struct MatrixArgs {
    /// Worker hosts of the testbed.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=16))]
    pub hosts: u16,
    /// Executors per host.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub executors_per_host: u16,
    /// CPU time each task's handler is calibrated to, ms.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub task_ms: u64,
    /// Bandwidth cap of every host link (tbf, both directions), Mbit/s.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub link_mbit: u64,
    /// Tasks per executor in each run.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub tasks_per_executor: u32,
    /// RLDS/FLDS threshold for all-pairs, as a fraction of the capped link.
    #[arg(long, default_value_t = 0.05)]
    pub threshold_fraction: f64,
    /// Short runs (CI smoke test): 2 hosts, 4 tasks per executor, 2 localities.
    #[arg(long)]
    pub quick: bool,
    /// Testbed name (created and removed by the run).
    #[arg(long, default_value = "bmx")]
    pub testbed: String,
    /// Results directory (JSON lines and plots) [default: target/bench/<stamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Skip the Dask runs.
    #[arg(long)]
    pub no_dask: bool,
    /// The Python venv Dask runs in [default: that of `bolt bench peers`].
    #[arg(long, value_name = "DIR")]
    pub venv: Option<PathBuf>,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// The run's scale: what the handlers and objects were sized to.
#[derive(Clone, Debug, Serialize)]
pub struct RunScale {
    pub hosts: u16,
    pub executors: u32,
    pub link_mbit: u64,
    pub task_ms: u64,
    /// ns of handler CPU per input byte and pass, measured here.
    pub stack_ns_per_byte: f64,
    pub compare_ns_per_byte: f64,
    pub mix_ns_per_byte: f64,
    pub stack_file_bytes: u64,
    pub pair_file_bytes: u64,
    pub dag_bytes: u64,
}

/// One DAG job's run.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub experiment: &'static str,
    /// Locality, policy or shape.
    pub variant: String,
    pub policy: &'static str,
    pub tasks: usize,
    pub done: usize,
    pub executors: u32,
    pub makespan_s: f64,
    pub busy_s: f64,
    /// Mean run time of a task as its COMPLETE reports it (inputs, handler, output).
    pub mean_task_ms: f64,
    /// makespan × executors / tasks (MATRIX's "average time per task per CPU").
    pub time_per_task_ms: f64,
    pub efficiency: f64,
    pub pinned: usize,
    pub shared: usize,
    /// Done data tasks that ran on their largest input's host, as a fraction.
    pub on_data_host: f64,
    pub local_reads: u64,
    pub remote_fetches: u64,
    pub remote_fetch_bytes: u64,
    /// Busy executors over all, per time bin of makespan / UTILISATION_BINS.
    pub utilisation: Vec<f64>,
}

/// A job's run on Dask distributed.
#[derive(Debug, Serialize)]
pub struct DaskMeasurement {
    #[serde(flatten)]
    pub result: dask::DaskResult,
    pub mean_task_ms: f64,
    pub time_per_task_ms: f64,
    pub efficiency: f64,
}

/// The Dask runs, or why there are none.
#[derive(Debug, Default, Serialize)]
pub struct DaskOutcome {
    pub runs: Vec<DaskMeasurement>,
    pub unavailable: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct MatrixReport {
    pub scale: RunScale,
    pub measurements: Vec<Measurement>,
    pub dask: DaskOutcome,
    pub results_dir: PathBuf,
    pub wall_s: f64,
}

/// ns per input byte and pass of data handler `name` over `inputs` inputs.
fn calibrate(name: &str, args_tail: &[u8], inputs: usize) -> anyhow::Result<f64> {
    let data: Vec<u8> = (0..1u32 << 20).map(|b| (b.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let views: Vec<&[u8]> = (0..inputs).map(|_| &data[..]).collect();
    let passes = 8u32;
    let args = [&passes.to_be_bytes()[..], args_tail].concat();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        run_data(name, &args, &views).map_err(|e| anyhow::anyhow!("calibrating {name}: {e:?}"))?;
        best = best.min(t.elapsed().as_nanos() as f64);
    }
    Ok(best / (passes as f64 * (data.len() * inputs) as f64))
}

/// Passes that make `bytes` of input take `task_ms` at `ns_per_byte`.
fn passes_for(task_ms: u64, bytes: u64, ns_per_byte: f64) -> u32 {
    let p = task_ms as f64 * 1e6 / (bytes.max(1) as f64 * ns_per_byte);
    (p.round() as u32).clamp(1, MAX_PASSES)
}

/// MATRIX's `bytes` scaled to the capped link and the task length (see the module doc).
fn scaled_bytes(matrix_bytes: f64, matrix_ms: f64, args: &MatrixArgs) -> u64 {
    let link = args.link_mbit as f64 * 1e6 / MATRIX_LINK_BPS;
    (matrix_bytes * link * (args.task_ms as f64 / matrix_ms)).round().max(1.0) as u64
}

fn measure(
    cluster: &DataCluster,
    experiment: &'static str,
    variant: String,
    policy: PlacementPolicy,
    (tasks, objects): (Vec<DagTask>, Vec<(ObjectLocation, Vec<u8>)>),
    uid: u32,
) -> anyhow::Result<Measurement> {
    let n = tasks.len();
    let before = cluster.executor_counters();
    let timeout = Duration::from_secs(120);
    let DagRun { report: r, .. } = cluster
        .run_dag(tasks, &objects, Some(policy), uid, timeout)
        .with_context(|| format!("{experiment} {variant}"))?;
    cluster.collect(uid, &r)?;
    let after = cluster.executor_counters();
    let e = cluster.executors() as f64;
    let m = Measurement {
        experiment,
        variant,
        policy: policy.name(),
        tasks: n,
        done: r.done,
        executors: cluster.executors(),
        makespan_s: r.makespan_s,
        busy_s: r.busy_s,
        mean_task_ms: if r.done == 0 { 0.0 } else { r.busy_s * 1e3 / r.done as f64 },
        time_per_task_ms: r.makespan_s * 1e3 * e / n.max(1) as f64,
        efficiency: if r.makespan_s > 0.0 { r.busy_s / (e * r.makespan_s) } else { 0.0 },
        pinned: r.pinned,
        shared: r.shared,
        on_data_host: if r.data_tasks_done == 0 {
            0.0
        } else {
            r.data_tasks_on_largest_input_host as f64 / r.data_tasks_done as f64
        },
        local_reads: after.local_reads - before.local_reads,
        remote_fetches: after.remote_fetches - before.remote_fetches,
        remote_fetch_bytes: after.remote_fetch_bytes - before.remote_fetch_bytes,
        utilisation: utilisation(&r.records, e),
    };
    anyhow::ensure!(m.done == n, "{experiment} {}: {} of {n} tasks done: {:?}", m.variant, m.done, r.failures);
    tracing::info!(experiment, variant = %m.variant, efficiency = m.efficiency, "measured");
    Ok(m)
}

/// Busy executors over all in UTILISATION_BINS equal bins from the first start to the
/// last end of the records' runs.
fn utilisation(records: &[crate::client::TaskRecord], executors: f64) -> Vec<f64> {
    let spans: Vec<(f64, f64)> =
        records.iter().map(|r| (r.start_unix_ns as f64, r.start_unix_ns as f64 + r.run_ns as f64)).collect();
    let (Some(t0), Some(t1)) =
        (spans.iter().map(|s| s.0).min_by(f64::total_cmp), spans.iter().map(|s| s.1).max_by(f64::total_cmp))
    else {
        return Vec::new();
    };
    let width = ((t1 - t0) / UTILISATION_BINS as f64).max(1.0);
    (0..UTILISATION_BINS)
        .map(|b| {
            let (lo, hi) = (t0 + b as f64 * width, t0 + (b + 1) as f64 * width);
            let busy: f64 = spans.iter().map(|&(s, e)| (e.min(hi) - s.max(lo)).max(0.0)).sum();
            busy / (width * executors)
        })
        .collect()
}

/// Image stacking: `tasks` tasks over tasks / locality files of `bytes`, task k reading
/// file k mod files.
fn stacking(tasks: usize, locality: usize, hosts: &[NodeStore], uid: u32, bytes: u64, passes: u32) -> Job {
    let files = (tasks / locality).max(1);
    let objects = input_objects(files, hosts, uid, bytes);
    (data_tasks(tasks, "stack", passes, &objects, |k| vec![k % files]), objects)
}

/// All-pairs as MATRIX ran it: two sets of `side` files, one task per (a, b) pair.
fn all_pairs(side: usize, hosts: &[NodeStore], uid: u32, bytes: u64, passes: u32) -> Job {
    let objects = input_objects(2 * side, hosts, uid, bytes);
    (data_tasks(side * side, "compare", passes, &objects, |k| vec![k / side, side + k % side]), objects)
}

pub(crate) type Job = (Vec<DagTask>, Vec<(ObjectLocation, Vec<u8>)>);

/// Runs every experiment in one testbed.
pub fn run(args: &MatrixArgs) -> anyhow::Result<MatrixReport> {
    let started = Instant::now();
    let hosts_n = if args.quick { 2 } else { args.hosts };
    let per_exec = if args.quick { 4 } else { args.tasks_per_executor } as usize;
    let stack_ns = calibrate("stack", &[], 1)?;
    let compare_ns = calibrate("compare", &[], 2)?;
    let mix_ns = calibrate("mix", &1024u32.to_be_bytes(), 1)?;
    let layout = Layout::plan(&args.testbed, hosts_n, 1)?;
    let testbed = Testbed::create(layout)
        .with_context(|| format!("creating testbed {} (is one of this name up? `bolt testbed down`)", args.testbed))?;
    cap_host_links(testbed.layout(), LinkCap { bits_per_sec: args.link_mbit * 1_000_000, shaper: Shaper::Tbf })?;
    let cluster = DataCluster::start(testbed.layout(), args.executors_per_host)?;
    let hosts = cluster.hosts();
    let executors = cluster.executors() as usize;
    let tasks = executors * per_exec;
    let scale = RunScale {
        hosts: hosts_n,
        executors: cluster.executors(),
        link_mbit: args.link_mbit,
        task_ms: args.task_ms,
        stack_ns_per_byte: stack_ns,
        compare_ns_per_byte: compare_ns,
        mix_ns_per_byte: mix_ns,
        stack_file_bytes: scaled_bytes(MATRIX_STACK_BYTES, MATRIX_STACK_MS, args),
        pair_file_bytes: scaled_bytes(MATRIX_PAIR_FILE_BYTES, MATRIX_PAIR_MS, args),
        dag_bytes: scaled_bytes(MATRIX_DAG_OUTPUT_BYTES, MATRIX_DAG_MS, args),
    };
    let link_bytes_per_sec = args.link_mbit as f64 * 1e6 / 8.0;
    let results = ResultsDir::create(args.out.clone())?;
    let mut lines = results.jsonl("matrix")?;
    let mut measurements = Vec::new();
    let mut uid = 0x3a7e_0000u32;
    let mut next_uid = || {
        uid += 1;
        uid
    };

    let localities: &[usize] = if args.quick { &[1, 2] } else { &[1, 2, 5, 10, 30] };
    let stack_passes = passes_for(args.task_ms, scale.stack_file_bytes, stack_ns);
    for &l in localities {
        // Enough tasks that the highest locality still has a file per host.
        let n = tasks.max(l * hosts.len());
        let job = stacking(n, l, &hosts, next_uid(), scale.stack_file_bytes, stack_passes);
        measurements.push(measure(&cluster, "stacking", l.to_string(), PlacementPolicy::Mdl, job, next_uid())?);
    }

    let t = Threshold::fraction_of_link(args.threshold_fraction, link_bytes_per_sec)
        .ok_or_else(|| anyhow::anyhow!("--threshold-fraction must be a non-negative rate"))?;
    let side = (tasks as f64).sqrt().ceil() as usize;
    let pair_passes = passes_for(args.task_ms, 2 * scale.pair_file_bytes, compare_ns);
    let mut dask_jobs: Vec<(&'static str, String, Job)> = Vec::new();
    dask_jobs.push(("all-pairs", "dask".into(), all_pairs(side, &hosts, 0, scale.pair_file_bytes, pair_passes)));
    for policy in [PlacementPolicy::Mlb, PlacementPolicy::Mdl, PlacementPolicy::Rlds(t), PlacementPolicy::Flds(t)] {
        let uid = next_uid();
        let job = all_pairs(side, &hosts, uid, scale.pair_file_bytes, pair_passes);
        measurements.push(measure(&cluster, "all-pairs", policy.name().into(), policy, job, uid)?);
    }

    let dag_t = Threshold::fraction_of_link(MATRIX_DAG_T_FRACTION, link_bytes_per_sec).expect("a positive rate");
    let mix_passes = passes_for(args.task_ms, scale.dag_bytes, mix_ns);
    for shape in [Shape::Bag, Shape::FanIn, Shape::FanOut, Shape::Pipeline] {
        let uid = next_uid();
        let parents = generate(shape, tasks, 10, 10);
        let job = mix_dag(parents, &hosts, uid, scale.dag_bytes, mix_passes, scale.dag_bytes as u32);
        let name = serde_json::to_value(shape)?.as_str().unwrap_or("shape").to_string();
        let parents = generate(shape, tasks, 10, 10);
        dask_jobs.push(("dag", name.clone(), mix_dag(parents, &hosts, 0, scale.dag_bytes, 1, scale.dag_bytes as u32)));
        measurements.push(measure(&cluster, "dag", name, PlacementPolicy::Flds(dag_t), job, uid)?);
    }
    cluster.stop()?;
    drop(testbed);
    let mut dask = DaskOutcome::default();
    if !args.no_dask {
        let venv = args.venv.clone().unwrap_or_else(super::peers::env::default_venv);
        match dask::run(&venv, &dask_jobs, scale.executors, args.task_ms, scale.dag_bytes) {
            Ok(results) => {
                for r in results {
                    let e = scale.executors as f64;
                    let efficiency = if r.makespan_s > 0.0 { r.busy_s / (e * r.makespan_s) } else { 0.0 };
                    dask.runs.push(DaskMeasurement {
                        time_per_task_ms: r.makespan_s * 1e3 * e / r.tasks.max(1) as f64,
                        mean_task_ms: r.busy_s * 1e3 / r.tasks.max(1) as f64,
                        efficiency,
                        result: r,
                    });
                }
            }
            Err(e) => dask.unavailable = Some(format!("{e:#}")),
        }
    }
    for m in &measurements {
        lines.write(m)?;
    }
    for d in &dask.runs {
        lines.write(d)?;
    }
    lines.finish()?;
    plots(&measurements, &scale, results.path())?;
    Ok(MatrixReport {
        scale,
        measurements,
        dask,
        results_dir: results.path().to_path_buf(),
        wall_s: started.elapsed().as_secs_f64(),
    })
}

fn plots(ms: &[Measurement], scale: &RunScale, dir: &std::path::Path) -> anyhow::Result<()> {
    let of = |e: &'static str| ms.iter().filter(move |m| m.experiment == e);
    let per_task: Vec<(f64, f64)> =
        of("stacking").filter_map(|m| Some((m.variant.parse::<f64>().ok()?, m.time_per_task_ms))).collect();
    let mean: Vec<(f64, f64)> =
        of("stacking").filter_map(|m| Some((m.variant.parse::<f64>().ok()?, m.mean_task_ms))).collect();
    let ideal: Vec<(f64, f64)> = per_task.iter().map(|&(x, _)| (x, scale.task_ms as f64)).collect();
    let chart = Chart::new(
        "Image stacking under MDL: time per task per executor",
        "locality",
        "ms",
        super::plot::Scale::Log,
        vec![
            Series::new("time per task per executor", per_task),
            Series::new("mean task length", mean),
            Series::new("ideal (handler CPU)", ideal),
        ],
    );
    render(&chart, dir, "matrix_stacking")?;
    for (experiment, stem, title) in [
        ("all-pairs", "matrix_allpairs_utilisation", "All-pairs: utilisation over time by policy"),
        ("dag", "matrix_dag_utilisation", "DAG shapes under FLDS: utilisation over time"),
    ] {
        let series = of(experiment)
            .map(|m| {
                let n = m.utilisation.len().max(1) as f64;
                let points = m.utilisation.iter().enumerate().map(|(i, u)| ((i as f64 + 0.5) / n, *u)).collect();
                Series::new(format!("{} ({:.0} %)", m.variant, m.efficiency * 100.0), points)
            })
            .collect();
        let chart = Chart::new(title, "fraction of the run", "utilisation", super::plot::Scale::Linear, series);
        render(&chart, dir, stem)?;
    }
    Ok(())
}

pub fn print(report: &MatrixReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
        return Ok(());
    }
    let s = &report.scale;
    println!(
        "{} hosts x {} executors, links capped at {} Mbit/s, tasks calibrated to {} ms; files: stacking {} B, \
         all-pairs {} B, DAG outputs {} B",
        s.hosts,
        s.executors / s.hosts as u32,
        s.link_mbit,
        s.task_ms,
        s.stack_file_bytes,
        s.pair_file_bytes,
        s.dag_bytes
    );
    println!(
        "| experiment | variant | policy | tasks | makespan (s) | mean task (ms) | time/task/executor (ms) | efficiency \
         | pinned/shared | on data host | remote fetches |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|");
    for m in &report.measurements {
        println!(
            "| {} | {} | {} | {} | {:.3} | {:.1} | {:.1} | {:.1} % | {}/{} | {:.0} % | {} |",
            m.experiment,
            m.variant,
            m.policy,
            m.tasks,
            m.makespan_s,
            m.mean_task_ms,
            m.time_per_task_ms,
            m.efficiency * 100.0,
            m.pinned,
            m.shared,
            m.on_data_host * 100.0,
            m.remote_fetches
        );
    }
    if let Some(why) = &report.dask.unavailable {
        println!("Dask distributed did not run: {why}");
    }
    if !report.dask.runs.is_empty() {
        println!("\n| Dask distributed | variant | tasks | makespan (s) | mean task (ms) | time/task/executor (ms) | efficiency |");
        println!("|---|---|---:|---:|---:|---:|---:|");
        for d in &report.dask.runs {
            println!(
                "| {} | {} | {} | {:.3} | {:.1} | {:.1} | {:.1} % |",
                d.result.experiment,
                d.result.variant,
                d.result.tasks,
                d.result.makespan_s,
                d.mean_task_ms,
                d.time_per_task_ms,
                d.efficiency * 100.0
            );
        }
    }
    println!("results and plots: {} ({:.0} s)", report.results_dir.display(), report.wall_s);
    Ok(())
}

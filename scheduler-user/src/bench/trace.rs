//! The Google-cluster-like trace (thesis §5.4-5.5, Figures 13 and 14): the seeded trace
//! of [`TraceParams`] replayed through one client, with CPU-spin executors (13.a) and
//! with sleep executors, more of them (13.b). Reported per workload and level: the CDF
//! of the scheduling delay (submit → start), and its breakdown into the GET_TASK round
//! trip (the executor's latest GET_TASK → the ASSIGN it then received, measured by the
//! executor) and the queueing delay (the rest: the task waited in a queue, or travelled
//! from client to switch, while no executor asked for it). An executor whose GET_TASK
//! timed out under overload has two in flight from then on, so an ASSIGN may be
//! waiting already when it asks: those round trips are about a microsecond.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::cluster::{DeployOptions, Deployment, Level, NodeSpec, Site};
use super::plot::{self, Chart, Scale, Series};
use super::suite::{markdown_table, Context, LevelFields, Outcome};
use super::workload::{bench_client_config, replay, Replayed, Trace, TraceParams, Work};
use crate::executor::AssignmentRecord;
use crate::sim::calibrate::ThreadTimes;

/// Points per CDF written to the JSON lines and plots.
const CDF_POINTS: usize = 200;

/// One task's latencies, in ms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskTiming {
    pub priority: u8,
    pub sched_ms: f64,
    pub get_rtt_ms: f64,
    pub queue_ms: f64,
}

/// Joins a client's task records with the executors' assignment records. Tasks whose
/// assignment was not recorded are left out (none are, below the record cap).
pub(crate) fn timings(r: &Replayed, assignments: &[AssignmentRecord]) -> Vec<TaskTiming> {
    let rtt: HashMap<(u32, u32), u64> =
        assignments.iter().filter(|a| a.uid == r.uid).map(|a| ((a.jid, a.tid), a.get_rtt_ns)).collect();
    r.records
        .iter()
        .filter_map(|t| {
            let get = *rtt.get(&(t.jid, t.tid))?;
            let sched = t.sched_delay_ns();
            Some(TaskTiming {
                priority: t.priority,
                sched_ms: sched as f64 / 1e6,
                get_rtt_ms: get as f64 / 1e6,
                queue_ms: sched.saturating_sub(get) as f64 / 1e6,
            })
        })
        .collect()
}

/// One replay's results.
pub(crate) struct Measured {
    pub fields: LevelFields,
    pub replayed: Replayed,
    pub timings: Vec<TaskTiming>,
    pub threads: ThreadTimes,
}

/// Replays `jobs` on a fresh deployment at `level` and returns the client's outcome,
/// per-task timings and what the executors' threads added.
pub(crate) fn measure(site: &Site, level: Level, trace: &Trace, work: Work, drain_s: u64) -> anyhow::Result<Measured> {
    let d: Deployment = site.deploy(level, &DeployOptions { record_assignments: true, ..DeployOptions::default() })?;
    let jobs = trace.timed_jobs(work)?;
    let r = d.run_clients(move |switch| async move {
        replay(bench_client_config(switch), &jobs, std::time::Duration::from_secs(drain_s)).await
    })?;
    let assignments = d.take_assignments();
    let mut fields = LevelFields::of(&d);
    let report = fields.stop(d)?;
    let timings = timings(&r, &assignments);
    let threads =
        ThreadTimes::of_run([(r.uid, &r.records[..])], &assignments, &r.submitted).with_switch(&report.switch_thread);
    Ok(Measured { fields, replayed: r, timings, threads })
}

/// The summary JSON line of one replay (trace.jsonl's lines of kind "summary"; `bolt
/// sim validate` reads them back).
#[derive(Serialize, Deserialize)]
pub struct SummaryLine {
    #[serde(skip_deserializing)]
    pub kind: &'static str,
    #[serde(flatten)]
    pub level: LevelFields,
    pub work: Work,
    pub executors: u32,
    pub trace: TraceParams,
    /// Which of the workload's `--rounds` this run was (1 in lines made before they
    /// existed).
    #[serde(default = "super::suite::first_round")]
    pub round: u32,
    pub submitted: u64,
    pub completed: u64,
    pub measured_tasks: usize,
    pub sched_delay_ms: Quantiles,
    pub get_rtt_ms: Quantiles,
    pub queue_ms: Quantiles,
    /// The executors' wait for a CPU and sleep overshoot in this run (`bolt sim
    /// validate --testbed` draws from them; empty in lines made before they were).
    #[serde(default)]
    pub executor_threads: ThreadTimes,
}

#[derive(Serialize)]
struct CdfLine {
    kind: &'static str,
    #[serde(flatten)]
    level: LevelFields,
    work: Work,
    /// "sched_delay", "get_rtt" or "queue"; (ms, fraction) points.
    of: &'static str,
    /// Rounds whose tasks the CDF pools (its level fields are the first round's).
    rounds: u32,
    points: Vec<(f64, f64)>,
}

/// Median, 90th and 99th percentile.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Quantiles {
    pub fn of(v: &[f64]) -> Quantiles {
        Quantiles { p50: plot::quantile(v, 0.5), p90: plot::quantile(v, 0.9), p99: plot::quantile(v, 0.99) }
    }
}

/// Every task of a workload's rounds at one level, pooled (`trace_pooled.jsonl`, written
/// when `--rounds` is above 1).
#[derive(Serialize, Deserialize)]
pub struct PooledLine {
    pub level: Level,
    pub work: Work,
    pub rounds: u32,
    pub measured_tasks: usize,
    pub sched_delay_ms: Quantiles,
    pub get_rtt_ms: Quantiles,
    pub queue_ms: Quantiles,
}

pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let mut lines = ctx.results.jsonl("trace")?;
    let mut pooled_lines = ctx.pooled_jsonl("trace")?;
    let mut rows = Vec::new();
    let seconds = ctx.pick(20.0, 3.0);
    // (work, executors per node, load): spin executors need a CPU each.
    let setups = [(Work::Spin, 1u16, 0.6), (Work::Sleep, 16u16, 0.7)];
    for (work, per_node, load) in setups {
        let nodes = [NodeSpec { executors: per_node, resources: 0xff }; 2];
        let site = Site::new(&ctx.testbed, &nodes)?;
        let params = TraceParams::new(ctx.seed, seconds, site.executors(), load);
        let trace = Trace::generate(&params)?;
        let mut cdf_series = Vec::new();
        let mut breakdown = Vec::new();
        let mut pooled: HashMap<Level, Vec<TaskTiming>> = HashMap::new();
        let mut summaries: Vec<SummaryLine> = Vec::new();
        // The pair runs in turn, round after round, so that a slow spell of the machine
        // falls on both levels alike.
        for round in 1..=ctx.rounds {
            for level in Level::BOTH {
                let of = ctx.round_of(round);
                ctx.progress(
                    "trace",
                    format_args!(
                        "{work:?} executors, {}: {} jobs, {} tasks{of}",
                        level.name(),
                        trace.jobs.len(),
                        trace.tasks()
                    ),
                );
                let Measured { fields, replayed: r, timings: t, threads } = measure(&site, level, &trace, work, 60)?;
                out.note_fallback(&fields.fallback);
                out.submitted += r.summary.submitted;
                out.completed += r.summary.completed;
                let line = SummaryLine {
                    kind: "summary",
                    level: fields,
                    work,
                    executors: site.executors(),
                    trace: params.clone(),
                    round,
                    submitted: r.summary.submitted,
                    completed: r.summary.completed,
                    measured_tasks: t.len(),
                    sched_delay_ms: Quantiles::of(&column(&t, |t| t.sched_ms)),
                    get_rtt_ms: Quantiles::of(&column(&t, |t| t.get_rtt_ms)),
                    queue_ms: Quantiles::of(&column(&t, |t| t.queue_ms)),
                    executor_threads: threads,
                };
                lines.write(&line)?;
                summaries.push(line);
                pooled.entry(level).or_default().extend(t);
            }
        }
        for level in Level::BOTH {
            let t = &pooled[&level];
            let (sched, get, queue) =
                (column(t, |t| t.sched_ms), column(t, |t| t.get_rtt_ms), column(t, |t| t.queue_ms));
            let (s, g, q) = (Quantiles::of(&sched), Quantiles::of(&get), Quantiles::of(&queue));
            let runs: Vec<&SummaryLine> = summaries.iter().filter(|l| l.level.level == level).collect();
            // Each round's two-level p50 and p99 over the same round's one-level ones.
            let ratios = if level == Level::TwoLevel {
                runs.iter()
                    .filter_map(|two| {
                        let one =
                            summaries.iter().find(|l| l.level.level == Level::OneLevel && l.round == two.round)?;
                        Some(format!(
                            "{:.2} / {:.2}",
                            two.sched_delay_ms.p50 / one.sched_delay_ms.p50,
                            two.sched_delay_ms.p99 / one.sched_delay_ms.p99
                        ))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                "–".to_string()
            };
            rows.push(vec![
                format!("{work:?}, {} executors", site.executors()),
                level.name().to_string(),
                format!("{:.3} / {:.3} / {:.2}", s.p50, s.p90, s.p99),
                format!("{:.3} / {:.3}", q.p50, q.p90),
                format!("{:.3} / {:.3}", g.p50, g.p90),
                ratios,
                runs.iter().map(|l| l.level.share_cell()).collect::<Vec<_>>().join(", "),
                format!(
                    "{} / {}",
                    runs.iter().map(|l| l.completed).sum::<u64>(),
                    runs.iter().map(|l| l.submitted).sum::<u64>()
                ),
            ]);
            if let Some(p) = pooled_lines.as_mut() {
                p.write(&PooledLine {
                    level,
                    work,
                    rounds: ctx.rounds,
                    measured_tasks: t.len(),
                    sched_delay_ms: s,
                    get_rtt_ms: g,
                    queue_ms: q,
                })?;
            }
            let fields = runs[0].level.clone();
            for (of, v) in [("sched_delay", &sched), ("get_rtt", &get), ("queue", &queue)] {
                let points = plot::cdf(v, CDF_POINTS);
                lines.write(&CdfLine {
                    kind: "cdf",
                    level: fields.clone(),
                    work,
                    of,
                    rounds: ctx.rounds,
                    points: points.clone(),
                })?;
                match of {
                    "sched_delay" => cdf_series.push(Series::new(level.name(), points)),
                    "get_rtt" => breakdown.push(Series::new(format!("GET_TASK round trip, {}", level.name()), points)),
                    _ => breakdown.push(Series::new(format!("queueing, {}", level.name()), points)),
                }
            }
        }
        let w = format!("{work:?}").to_lowercase();
        let chart = Chart::new(
            format!("Trace, {w} executors: scheduling delay CDF"),
            "scheduling delay, submit to start (ms, log scale)",
            "fraction of tasks",
            Scale::Log,
            cdf_series,
        );
        out.plots.extend(plot::render(&chart, ctx.results.path(), &format!("trace_cdf_{w}"))?);
        let chart = Chart::new(
            format!("Trace, {w} executors: scheduling delay breakdown"),
            "ms (log scale)",
            "fraction of tasks",
            Scale::Log,
            breakdown,
        );
        out.plots.extend(plot::render(&chart, ctx.results.path(), &format!("trace_breakdown_{w}"))?);
    }
    let pooled_note = ctx.pooled_note("quantiles are of every task of the rounds pooled");
    out.table = format!(
        "Trace: seed {}, {seconds} s, median task 5 ms (log-normal, sigma 1, 0.1..100 ms), 8 tasks per job on \
         average (geometric), 5 % of arrivals bursts of 0.5 to 2 tasks per executor; spin at 60 % load, sleep at \
         70 %.{pooled_note}\n\n{}",
        ctx.seed,
        markdown_table(
            &[
                "workload",
                "level",
                "sched. delay p50 / p90 / p99 (ms)",
                "queueing p50 / p90 (ms)",
                "GET_TASK round trip p50 / p90 (ms)",
                "sched. delay p50 / p99 over one-level's, per round",
                "XDP share",
                "completed / submitted",
            ],
            &rows,
        )
    );
    (out.jsonl, out.lines) = lines.finish()?;
    if let Some(p) = pooled_lines {
        p.finish()?;
    }
    Ok(out)
}

fn column(t: &[TaskTiming], f: fn(&TaskTiming) -> f64) -> Vec<f64> {
    t.iter().map(f).collect()
}

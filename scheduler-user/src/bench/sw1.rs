//! SW1 (thesis §5.3, Figure 12): two independent clients each submit a job every 10 ms,
//! of 10-ms tasks; tasks per job set the cluster's utilisation, 2 × tasks × 10 ms per
//! 10 ms over E executors. Reported per utilisation and level: job completion time and
//! scheduling delay (submit → start), median and 99th percentile.
//!
//! Executors sleep for the task (the thesis's run integer arithmetic on 60 cores; this
//! machine has two, which the switch, agents and clients also need).

use std::collections::HashMap;
use std::time::Duration;

use scheduler_common::descriptor::Handler;
use serde::{Deserialize, Serialize};

use super::cluster::{DeployOptions, Level, NodeSpec, Site};
use super::output::JsonLines;
use super::plot::{self, Chart, Scale, Series};
use super::suite::{markdown_table, Context, LevelFields, Outcome};
use super::workload::{bench_client_config, replay, TimedJob};
use crate::client::TaskSpec;
use crate::sim::calibrate::{with_assignments, ThreadTimes};
use crate::switch::{SubmitTaken, TaskSent};

pub const TASK_MS: u32 = 10;
/// Executors of the experiment, spread evenly over `--sw1-hosts` worker hosts.
pub const EXECUTORS: u32 = 40;
/// Worker hosts when `--sw1-hosts` is not given.
pub const DEFAULT_HOSTS: u32 = 2;
pub const INTERVAL_MS: u64 = 10;
pub const CLIENTS: u32 = 2;

/// Tasks per job for a utilisation: clients × tasks × task time / interval / executors.
pub fn tasks_per_job(utilization: f64, executors: u32) -> u32 {
    ((utilization * executors as f64 * INTERVAL_MS as f64) / (CLIENTS as f64 * TASK_MS as f64)).round() as u32
}

/// One JSON line of sw1.jsonl: one utilisation at one level (`bolt sim validate` reads
/// them back).
#[derive(Serialize, Deserialize)]
pub struct Line {
    #[serde(flatten)]
    pub level: LevelFields,
    pub utilization: f64,
    pub executors: u32,
    pub tasks_per_job: u32,
    pub jobs: u64,
    pub submitted: u64,
    pub completed: u64,
    pub p50_job_ms: f64,
    pub p99_job_ms: f64,
    pub p50_sched_delay_ms: f64,
    pub p99_sched_delay_ms: f64,
    /// How long after the first client's jobs the second's were due (`--client-offset-ms`;
    /// 0 in lines made before it existed).
    #[serde(default)]
    pub client_offset_ms: f64,
    /// Worker hosts the executors were spread over (`--sw1-hosts`; 2 in lines made before
    /// it existed).
    #[serde(default = "default_hosts")]
    pub hosts: u32,
    /// Which of the point's `--rounds` this run was (1 in lines made before they
    /// existed).
    #[serde(default = "super::suite::first_round")]
    pub round: u32,
    /// The executors' wait for a CPU and sleep overshoot in this run (`bolt sim
    /// validate --testbed` draws from them; empty in lines made before they were).
    #[serde(default)]
    pub executor_threads: ThreadTimes,
}

/// One task of one run, as `--task-records` writes it to sw1_tasks.jsonl (`bolt bench
/// records` reads it back).
#[derive(Debug, Serialize, Deserialize)]
pub struct TaskLine {
    pub level: Level,
    pub utilization: f64,
    /// Which of the point's `--rounds` (1 in records made before they existed).
    #[serde(default = "super::suite::first_round")]
    pub round: u32,
    pub uid: u32,
    pub jid: u32,
    pub tid: u32,
    pub node: u16,
    pub executor: u16,
    pub first_sent_unix_ns: u64,
    /// The ASSIGN's arrival at the executor's host (0: no kernel stamp).
    pub arrived_unix_ns: u64,
    pub start_unix_ns: u64,
    /// The task's run on its executor: its 10-ms sleep and what the sleep overshot.
    pub run_ns: u32,
    /// The executor's latest GET_TASK sent → this ASSIGN received (0: no record).
    pub get_rtt_ns: u64,
    /// The software switch's stamps (`switch::SwitchTimeline`; 0: none): its SUBMIT's
    /// arrival at the switch's host (stamped for the first datagram of a receive only),
    /// the switch thread taking it in, and the flush that sent the task on returning
    /// (its ASSIGN at one level, its REFILL at two).
    pub switch_arrived_unix_ns: u64,
    pub switch_taken_unix_ns: u64,
    pub switch_sent_unix_ns: u64,
    /// Tier 2 done with the SUBMIT; the flush that sent the task called; the SUBMIT's
    /// place in its receive batch and the batch's size.
    pub switch_handled_unix_ns: u64,
    pub switch_flush_called_unix_ns: u64,
    /// How many times the switch sent the task on (more than once: a host RETURNed it,
    /// for a RECALL, a thief's give-back, a lease or a hint), and when the last of those
    /// flushes returned (0: none recorded; records made before they existed).
    #[serde(default)]
    pub switch_sends: u16,
    #[serde(default)]
    pub switch_last_sent_unix_ns: u64,
    pub switch_batch_index: u16,
    pub switch_batch_len: u16,
}

fn default_hosts() -> u32 {
    DEFAULT_HOSTS
}

/// Every task of one utilisation's rounds at one level, pooled (`sw1_pooled.jsonl`,
/// written when `--rounds` is above 1).
#[derive(Serialize, Deserialize)]
pub struct PooledLine {
    pub level: Level,
    pub utilization: f64,
    pub rounds: u32,
    /// Tasks started over all rounds.
    pub tasks: u64,
    pub p50_job_ms: f64,
    pub p99_job_ms: f64,
    pub p50_sched_delay_ms: f64,
    pub p99_sched_delay_ms: f64,
}

/// One level's job times and scheduling delays at one utilisation, over its rounds.
#[derive(Default)]
struct Pool {
    job_ms: Vec<f64>,
    sched_ms: Vec<f64>,
}

pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let nodes =
        vec![NodeSpec { executors: (EXECUTORS / ctx.sw1_hosts) as u16, resources: 0xff }; ctx.sw1_hosts as usize];
    let site = Site::new(&ctx.testbed, &nodes)?;
    let executors = site.executors();
    let utilizations: &[f64] = ctx.pick(&[0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0], &[0.4, 0.7, 1.0]);
    let seconds = ctx.pick(4.0, 1.0);
    let rounds = ctx.rounds;
    let mut out = Outcome::default();
    let mut lines = ctx.results.jsonl("sw1")?;
    let mut task_lines = if ctx.task_records { Some(ctx.results.jsonl("sw1_tasks")?) } else { None };
    let mut all = Vec::new();
    let mut pools: HashMap<(Level, u64), Pool> = HashMap::new();
    for &u in utilizations {
        let tasks_per_job = tasks_per_job(u, executors);
        let jobs_per_client = (seconds * 1000.0 / INTERVAL_MS as f64) as u32;
        let task = TaskSpec::new(Handler::Sleep { micros: TASK_MS * 1000 }, 1, 0)?;
        let jobs: Vec<TimedJob> = (0..jobs_per_client)
            .map(|k| TimedJob {
                at: Duration::from_millis(k as u64 * INTERVAL_MS),
                tasks: vec![task; tasks_per_job as usize],
            })
            .collect();
        // The pair runs in turn, round after round, so that a slow spell of the machine
        // falls on both levels alike.
        for round in 1..=rounds {
            for level in Level::BOTH {
                let what = ctx.round_of(round);
                ctx.progress(
                    "sw1",
                    format_args!("{} at {:.0} % ({tasks_per_job} tasks per job{what})", level.name(), u * 100.0),
                );
                let point = Point { utilization: u, tasks_per_job, executors, round, level, jobs: &jobs };
                let (line, pool) = run_point(ctx, &site, &point, task_lines.as_mut())?;
                out.note_fallback(&line.level.fallback);
                out.submitted += line.submitted;
                out.completed += line.completed;
                lines.write(&line)?;
                all.push(line);
                let pooled = pools.entry((level, u.to_bits())).or_default();
                pooled.job_ms.extend(pool.job_ms);
                pooled.sched_ms.extend(pool.sched_ms);
            }
        }
    }
    let pooled_line = |level: Level, u: f64| {
        let p = &pools[&(level, u.to_bits())];
        PooledLine {
            level,
            utilization: u,
            rounds,
            tasks: p.sched_ms.len() as u64,
            p50_job_ms: plot::quantile(&p.job_ms, 0.5),
            p99_job_ms: plot::quantile(&p.job_ms, 0.99),
            p50_sched_delay_ms: plot::quantile(&p.sched_ms, 0.5),
            p99_sched_delay_ms: plot::quantile(&p.sched_ms, 0.99),
        }
    };
    let pooled: Vec<PooledLine> =
        utilizations.iter().flat_map(|&u| Level::BOTH.map(|level| pooled_line(level, u))).collect();
    if let Some(mut file) = ctx.pooled_jsonl("sw1")? {
        for p in &pooled {
            file.write(p)?;
        }
        file.finish()?;
    }
    let mut rows = Vec::new();
    for &u in utilizations {
        let at = |level: Level| pooled.iter().find(|l| l.level == level && l.utilization == u);
        let (Some(a), Some(b)) = (at(Level::OneLevel), at(Level::TwoLevel)) else { continue };
        let line = |level: Level, round: u32| {
            all.iter().find(|l| l.level.level == level && l.utilization == u && l.round == round)
        };
        let mut ratios = (Vec::new(), Vec::new());
        let mut shares = Vec::new();
        let mut completed = 0;
        let mut submitted = 0;
        for round in 1..=rounds {
            if let (Some(one), Some(two)) = (line(Level::OneLevel, round), line(Level::TwoLevel, round)) {
                ratios.0.push(format!("{:.2}", two.p50_sched_delay_ms / one.p50_sched_delay_ms));
                ratios.1.push(format!("{:.2}", two.p99_sched_delay_ms / one.p99_sched_delay_ms));
                shares.push(two.level.share_cell());
                completed += one.completed + two.completed;
                submitted += one.submitted + two.submitted;
            }
        }
        rows.push(vec![
            format!("{:.0} %", u * 100.0),
            tasks_per_job(u, executors).to_string(),
            format!("{:.2} / {:.2}", a.p50_job_ms, a.p99_job_ms),
            format!("{:.2} / {:.2}", b.p50_job_ms, b.p99_job_ms),
            format!("{:.3} / {:.2}", a.p50_sched_delay_ms, a.p99_sched_delay_ms),
            format!("{:.3} / {:.2}", b.p50_sched_delay_ms, b.p99_sched_delay_ms),
            format!(
                "{:.2} / {:.2}",
                b.p50_sched_delay_ms / a.p50_sched_delay_ms,
                b.p99_sched_delay_ms / a.p99_sched_delay_ms
            ),
            ratios.0.join(", "),
            ratios.1.join(", "),
            shares.join(", "),
            format!("{completed} / {submitted}"),
        ]);
    }
    let pooled_note = ctx.pooled_note("delays and job times are every task of the rounds pooled");
    out.table = format!(
        "{executors} sleep executors on {} worker nodes, {CLIENTS} clients, a job every {INTERVAL_MS} ms each \
         (the second's due {:.1} ms after the first's), {TASK_MS}-ms tasks, {seconds} s per point.{pooled_note}\n\n{}",
        nodes.len(),
        ctx.client_offset.as_secs_f64() * 1e3,
        markdown_table(
            &[
                "utilisation",
                "tasks/job",
                "job time p50 / p99 (ms), one-level",
                "two-level",
                "sched. delay p50 / p99 (ms), one-level",
                "two-level",
                "two-level over one-level, p50 / p99",
                "p50 ratio per round",
                "p99 ratio per round",
                "XDP share, two-level",
                "tasks completed / submitted",
            ],
            &rows,
        )
    );
    let by_level: Vec<(Level, Vec<&PooledLine>)> =
        Level::BOTH.iter().map(|&level| (level, pooled.iter().filter(|l| l.level == level).collect())).collect();
    let series = |f: fn(&PooledLine) -> f64, what: &str| {
        by_level
            .iter()
            .map(|(level, ls)| {
                Series::new(format!("{what}, {}", level.name()), ls.iter().map(|l| (l.utilization, f(l))).collect())
            })
            .collect::<Vec<_>>()
    };
    type Pick = fn(&PooledLine) -> f64;
    let charts: [(&str, &str, Pick, Pick, &str); 2] = [
        (
            "SW1: job completion time (10-ms tasks)",
            "job completion time (ms)",
            |l| l.p50_job_ms,
            |l| l.p99_job_ms,
            "sw1_job_completion",
        ),
        (
            "SW1: scheduling delay (submit to start)",
            "scheduling delay (ms)",
            |l| l.p50_sched_delay_ms,
            |l| l.p99_sched_delay_ms,
            "sw1_sched_delay",
        ),
    ];
    for (title, y_label, p50, p99, stem) in charts {
        let mut s = series(p50, "median");
        s.extend(series(p99, "p99"));
        let chart = Chart::new(title, "cluster utilisation", y_label, Scale::Linear, s);
        out.plots.extend(plot::render(&chart, ctx.results.path(), stem)?);
    }
    (out.jsonl, out.lines) = lines.finish()?;
    if let Some(t) = task_lines {
        t.finish()?;
    }
    Ok(out)
}

/// One run: a utilisation, a level, a round.
struct Point<'a> {
    utilization: f64,
    tasks_per_job: u32,
    executors: u32,
    round: u32,
    level: Level,
    jobs: &'a [TimedJob],
}

/// Deploys `point.level` on the site, replays both clients' jobs and returns the run's
/// line and its tasks' delays and jobs' times; with `--task-records`, writes each task's
/// timeline to `task_lines`.
fn run_point(
    ctx: &Context,
    site: &Site,
    point: &Point,
    task_lines: Option<&mut JsonLines>,
) -> anyhow::Result<(Line, Pool)> {
    let level = point.level;
    let options = DeployOptions { record_assignments: true, record_switch_timeline: ctx.task_records };
    let d = site.deploy(level, &options)?;
    let a = point.jobs.to_vec();
    let b: Vec<TimedJob> =
        point.jobs.iter().map(|j| TimedJob { at: j.at + ctx.client_offset, tasks: j.tasks.clone() }).collect();
    let (r1, r2) = d.run_clients(move |switch| async move {
        let drain = Duration::from_secs(30);
        tokio::try_join!(replay(bench_client_config(switch), &a, drain), replay(bench_client_config(switch), &b, drain))
    })?;
    let assignments = d.take_assignments();
    let mut level_fields = LevelFields::of(&d);
    let report = level_fields.stop(d)?;
    let runs = [(r1.uid, &r1.records[..]), (r2.uid, &r2.records[..])];
    let submitted: Vec<(u64, u64)> = r1.submitted.iter().chain(&r2.submitted).copied().collect();
    let executor_threads = ThreadTimes::of_run(runs, &assignments, &submitted).with_switch(&report.switch_thread);
    if let Some(out) = task_lines {
        let timeline = &report.switch_timeline;
        let submits: HashMap<(u32, u32), &SubmitTaken> =
            timeline.submits.iter().rev().map(|s| ((s.uid, s.jid), s)).collect();
        // A task sent on twice (a RETURN, a lease) is stamped with its first send, and
        // counted with its last.
        let mut sent: HashMap<(u32, u32, u32), (&TaskSent, &TaskSent, u16)> = HashMap::new();
        for s in &timeline.sent {
            sent.entry((s.uid, s.jid, s.tid))
                .and_modify(|(_, last, n)| (*last, *n) = (s, n.saturating_add(1)))
                .or_insert((s, s, 1));
        }
        for (uid, t, a) in with_assignments(runs, &assignments) {
            let submit = submits.get(&(uid, t.jid));
            let sent = sent.get(&(uid, t.jid, t.tid));
            out.write(&TaskLine {
                level,
                utilization: point.utilization,
                round: point.round,
                uid,
                jid: t.jid,
                tid: t.tid,
                node: t.node,
                executor: t.executor,
                first_sent_unix_ns: t.first_sent_unix_ns,
                arrived_unix_ns: a.map_or(0, |a| a.arrived_unix_ns),
                start_unix_ns: t.start_unix_ns,
                run_ns: t.run_ns,
                get_rtt_ns: a.map_or(0, |a| a.get_rtt_ns),
                switch_arrived_unix_ns: submit.map_or(0, |s| s.arrived_unix_ns),
                switch_taken_unix_ns: submit.map_or(0, |s| s.taken_unix_ns),
                switch_sent_unix_ns: sent.map_or(0, |(s, _, _)| s.sent_unix_ns),
                switch_handled_unix_ns: submit.map_or(0, |s| s.handled_unix_ns),
                switch_flush_called_unix_ns: sent.map_or(0, |(s, _, _)| s.flush_called_unix_ns),
                switch_sends: sent.map_or(0, |&(_, _, n)| n),
                switch_last_sent_unix_ns: sent.map_or(0, |(_, last, _)| last.sent_unix_ns),
                switch_batch_index: submit.map_or(0, |s| s.batch_index),
                switch_batch_len: submit.map_or(0, |s| s.batch_len),
            })?;
        }
    }
    let pool = Pool {
        job_ms: r1.job_ms.iter().chain(&r2.job_ms).copied().collect(),
        sched_ms: r1.records.iter().chain(&r2.records).map(|r| r.sched_delay_ns() as f64 / 1e6).collect(),
    };
    let line = Line {
        level: level_fields,
        utilization: point.utilization,
        executors: point.executors,
        tasks_per_job: point.tasks_per_job,
        jobs: r1.summary.jobs + r2.summary.jobs,
        submitted: r1.summary.submitted + r2.summary.submitted,
        completed: r1.summary.completed + r2.summary.completed,
        p50_job_ms: plot::quantile(&pool.job_ms, 0.5),
        p99_job_ms: plot::quantile(&pool.job_ms, 0.99),
        p50_sched_delay_ms: plot::quantile(&pool.sched_ms, 0.5),
        p99_sched_delay_ms: plot::quantile(&pool.sched_ms, 0.99),
        client_offset_ms: ctx.client_offset.as_secs_f64() * 1e3,
        hosts: ctx.sw1_hosts,
        round: point.round,
        executor_threads,
    };
    Ok((line, pool))
}

//! SW2, resource constraints (thesis §5.7, Figure 17): three node groups offering {A},
//! {A,B} and {A,B,C}; jobs of 20-ms tasks every 20 ms that need A for the first phase,
//! B for the second and C for the third. Reported: tasks completed per second per node
//! of each group over time, and per phase.

use std::time::Duration;

use scheduler_common::descriptor::Handler;
use serde::Serialize;

use super::cluster::{DeployOptions, Level, NodeSpec, Site};
use super::plot::{self, Chart, Scale, Series};
use super::suite::{markdown_table, Context, LevelFields, Outcome};
use super::workload::{bench_client_config, replay, TimedJob};
use crate::client::TaskSpec;

const A: u8 = 0b001;
const B: u8 = 0b010;
const C: u8 = 0b100;
/// The node groups G1..G3 and what they offer.
const GROUPS: [u8; 3] = [A, A | B, A | B | C];
const TASK_MS: u32 = 20;
const INTERVAL_MS: u64 = 20;

#[derive(Serialize)]
struct BinLine {
    kind: &'static str,
    #[serde(flatten)]
    level: LevelFields,
    group: usize,
    /// Start of the bin, seconds after the first submission.
    t_s: f64,
    tasks_per_s: f64,
}

#[derive(Serialize)]
struct PhaseLine {
    kind: &'static str,
    #[serde(flatten)]
    level: LevelFields,
    /// "A", "B" or "C": what the phase's tasks need.
    phase: &'static str,
    /// Tasks completed per second by the node of each group, G1..G3, while the phase's
    /// tasks were being submitted.
    tasks_per_s: [f64; 3],
    submitted: u64,
    completed: u64,
    /// Last completion, seconds after the first submission.
    finished_s: f64,
    /// Tasks executors refused over the whole run (needing resources they lack).
    tasks_refused: u64,
}

pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let mut lines = ctx.results.jsonl("constraints")?;
    let per_node = 8u16;
    let nodes: Vec<NodeSpec> = GROUPS.iter().map(|&r| NodeSpec { executors: per_node, resources: r }).collect();
    let site = Site::new(&ctx.testbed, &nodes)?;
    let phase_s = ctx.pick(10.0, 2.0);
    let bin_s = ctx.pick(0.5, 0.25);
    // 75 % of the whole cluster: G2+G3 are overloaded in phase B, G3 three times in C.
    let tasks_per_job = (0.75 * site.executors() as f64 * INTERVAL_MS as f64 / TASK_MS as f64).round() as usize;
    let mut jobs = Vec::new();
    let per_phase = (phase_s * 1000.0 / INTERVAL_MS as f64) as u64;
    for (p, need) in [A, B, C].into_iter().enumerate() {
        let task = TaskSpec::new(Handler::Sleep { micros: TASK_MS * 1000 }, 1, need)?;
        for k in 0..per_phase {
            let at = Duration::from_millis((p as u64 * per_phase + k) * INTERVAL_MS);
            jobs.push(TimedJob { at, tasks: vec![task; tasks_per_job] });
        }
    }
    let mut rows = Vec::new();
    for level in Level::BOTH {
        ctx.progress("constraints", format_args!("{}: {} jobs of {tasks_per_job} tasks", level.name(), jobs.len()));
        let d = site.deploy(level, &DeployOptions::default())?;
        let my_jobs = jobs.clone();
        let r = d.run_clients(move |switch| async move {
            replay(bench_client_config(switch), &my_jobs, Duration::from_secs(120)).await
        })?;
        let fields = LevelFields::of(&d);
        let refused = d.stop()?.executors.tasks_refused;
        out.note_fallback(&fields.fallback);
        out.submitted += r.summary.submitted;
        out.completed += r.summary.completed;
        let t0 = r.records.iter().map(|t| t.first_sent_unix_ns).min().unwrap_or(0);
        let secs = |ns: u64| ns.saturating_sub(t0) as f64 / 1e9;
        let end = r.records.iter().map(|t| secs(t.completed_unix_ns)).fold(0.0, f64::max);
        let bins = (end / bin_s).ceil() as usize + 1;
        let mut counts = vec![[0u64; 3]; bins];
        for t in &r.records {
            // Nodes are numbered from 1 in group order.
            let g = (t.node as usize).wrapping_sub(1);
            if g < 3 {
                counts[(secs(t.completed_unix_ns) / bin_s) as usize][g] += 1;
            }
        }
        let mut series = vec![Vec::new(); 3];
        for (i, c) in counts.iter().enumerate() {
            for g in 0..3 {
                let tasks_per_s = c[g] as f64 / bin_s;
                series[g].push((i as f64 * bin_s, tasks_per_s));
                lines.write(&BinLine {
                    kind: "bin",
                    level: fields.clone(),
                    group: g + 1,
                    t_s: i as f64 * bin_s,
                    tasks_per_s,
                })?;
            }
        }
        for (p, name) in ["A", "B", "C"].into_iter().enumerate() {
            let (from, to) = (p as f64 * phase_s, (p + 1) as f64 * phase_s);
            let mut per_group = [0.0; 3];
            for (g, rate) in per_group.iter_mut().enumerate() {
                let n = r
                    .records
                    .iter()
                    .filter(|t| t.node as usize == g + 1 && (from..to).contains(&secs(t.completed_unix_ns)))
                    .count();
                *rate = n as f64 / phase_s;
            }
            let need = [A, B, C][p];
            let phase_records = r.records.iter().filter(|t| t.resources == need);
            let line = PhaseLine {
                kind: "phase",
                level: fields.clone(),
                phase: name,
                tasks_per_s: per_group,
                submitted: per_phase * tasks_per_job as u64,
                completed: phase_records.clone().count() as u64,
                finished_s: phase_records.map(|t| secs(t.completed_unix_ns)).fold(0.0, f64::max),
                tasks_refused: refused,
            };
            rows.push(vec![
                level.name().to_string(),
                name.to_string(),
                format!("{:.0}", per_group[0]),
                format!("{:.0}", per_group[1]),
                format!("{:.0}", per_group[2]),
                format!("{:.1}", line.finished_s),
                format!("{} / {}", line.completed, line.submitted),
            ]);
            lines.write(&line)?;
        }
        let chart = Chart::new(
            format!("SW2: throughput per node group, {}", level.name()),
            "time since the first submission (s)",
            "tasks completed per second, per node",
            Scale::Linear,
            series
                .into_iter()
                .zip(["G1 {A}", "G2 {A,B}", "G3 {A,B,C}"])
                .map(|(pts, name)| Series::new(name, pts))
                .collect(),
        );
        let stem = format!("constraints_{}", level.name().replace('-', "_"));
        out.plots.extend(plot::render(&chart, ctx.results.path(), &stem)?);
    }
    out.table = format!(
        "Three worker nodes of {per_node} sleep executors: G1 {{A}}, G2 {{A,B}}, G3 {{A,B,C}}. A job of \
         {tasks_per_job} {TASK_MS}-ms tasks every {INTERVAL_MS} ms; tasks need A for {phase_s} s, then B, then C. \
         A node's capacity is {} tasks/s.\n\n{}",
        per_node as u32 * 1000 / TASK_MS,
        markdown_table(
            &[
                "level",
                "phase (tasks need)",
                "G1 tasks/s",
                "G2 tasks/s",
                "G3 tasks/s",
                "phase's last task done (s)",
                "completed / submitted",
            ],
            &rows
        )
    );
    (out.jsonl, out.lines) = lines.finish()?;
    Ok(out)
}

//! Priorities (thesis §5.6, Figures 15 and 16): the trace at a higher load, so tasks
//! queue, once with its four priority levels (1.2 / 1.7 / 64.6 / 32.2 % of jobs) and once
//! with every task at one level (FIFO). Reported per level of the scheduler (one-,
//! two-level) and per priority: queueing delay, and the GET_TASK round trip of the
//! tasks of that priority (the recirculations a GET makes past empty levels).

use serde::Serialize;

use super::cluster::{Level, NodeSpec, Site};
use super::plot::{self, Chart, Scale, Series};
use super::suite::{markdown_table, Context, LevelFields, Outcome};
use super::trace::{measure, Measured, Quantiles, TaskTiming};
use super::workload::{Trace, TraceParams, Work};

const CDF_POINTS: usize = 200;

#[derive(Serialize)]
struct Line {
    #[serde(flatten)]
    level: LevelFields,
    /// "priorities" or "fifo".
    mode: &'static str,
    /// 1..=4, or null for every task of the run.
    priority: Option<u8>,
    tasks: usize,
    queue_ms: Quantiles,
    get_rtt_us: Quantiles,
    queue_cdf_ms: Vec<(f64, f64)>,
}

pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let mut lines = ctx.results.jsonl("priority")?;
    let nodes = [NodeSpec { executors: 16, resources: 0xff }; 2];
    let site = Site::new(&ctx.testbed, &nodes)?;
    let seconds = ctx.pick(15.0, 3.0);
    let params = TraceParams::new(ctx.seed, seconds, site.executors(), 0.95);
    let prioritized = Trace::generate(&params)?;
    let fifo = Trace::generate(&TraceParams { fifo: true, ..params.clone() })?;
    let mut rows = Vec::new();
    let mut get_series = Vec::new();
    for level in Level::BOTH {
        let mut queue_series = Vec::new();
        let mut p50 = Vec::new();
        let mut p90 = Vec::new();
        for (mode, trace) in [("priorities", &prioritized), ("fifo", &fifo)] {
            ctx.progress("priority", format_args!("{}, {mode}: {} tasks", level.name(), trace.tasks()));
            let Measured { fields, replayed: r, timings: t, .. } = measure(&site, level, trace, Work::Sleep, 120)?;
            out.note_fallback(&fields.fallback);
            out.submitted += r.summary.submitted;
            out.completed += r.summary.completed;
            let groups: Vec<(Option<u8>, Vec<&TaskTiming>)> = if mode == "fifo" {
                vec![(None, t.iter().collect())]
            } else {
                (1..=4u8).map(|p| (Some(p), t.iter().filter(|x| x.priority == p).collect())).collect()
            };
            for (priority, g) in groups {
                let queue: Vec<f64> = g.iter().map(|x| x.queue_ms).collect();
                let get_us: Vec<f64> = g.iter().map(|x| x.get_rtt_ms * 1e3).collect();
                let line = Line {
                    level: fields.clone(),
                    mode,
                    priority,
                    tasks: g.len(),
                    queue_ms: Quantiles::of(&queue),
                    get_rtt_us: Quantiles::of(&get_us),
                    queue_cdf_ms: plot::cdf(&queue, CDF_POINTS),
                };
                let label = priority.map_or("FIFO".to_string(), |p| format!("priority {p}"));
                queue_series.push(Series::new(label.clone(), line.queue_cdf_ms.clone()));
                if let Some(p) = priority {
                    p50.push((p as f64, line.get_rtt_us.p50));
                    p90.push((p as f64, line.get_rtt_us.p90));
                }
                rows.push(vec![
                    level.name().to_string(),
                    label,
                    line.tasks.to_string(),
                    format!("{:.2} / {:.2}", line.queue_ms.p50, line.queue_ms.p99),
                    format!("{:.0} / {:.0}", line.get_rtt_us.p50, line.get_rtt_us.p90),
                    fields.share_cell(),
                ]);
                lines.write(&line)?;
            }
        }
        get_series.push(Series::new(format!("median, {}", level.name()), p50));
        get_series.push(Series::new(format!("p90, {}", level.name()), p90));
        let chart = Chart::new(
            format!("Queueing delay per priority level, {}", level.name()),
            "queueing delay (ms, log scale)",
            "fraction of tasks",
            Scale::Log,
            queue_series,
        );
        let stem = format!("priority_queueing_{}", level.name().replace('-', "_"));
        out.plots.extend(plot::render(&chart, ctx.results.path(), &stem)?);
    }
    let chart = Chart::new(
        "GET_TASK round trip per priority level",
        "priority level of the task assigned",
        "GET_TASK to ASSIGN (us)",
        Scale::Linear,
        get_series,
    );
    out.plots.extend(plot::render(&chart, ctx.results.path(), "priority_get_task")?);
    out.table = format!(
        "Trace at 95 % load (seed {}, {seconds} s), {} sleep executors; FIFO: the same trace, every task at \
         priority 1.\n\n{}",
        ctx.seed,
        site.executors(),
        markdown_table(
            &[
                "level",
                "priority",
                "tasks",
                "queueing p50 / p99 (ms)",
                "GET_TASK round trip p50 / p90 (us)",
                "XDP share (run)"
            ],
            &rows
        )
    );
    (out.jsonl, out.lines) = lines.finish()?;
    Ok(out)
}

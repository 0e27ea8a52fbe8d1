//! Scheduling decisions per second with no-op tasks as executors grow (thesis §5.2,
//! Figure 11), one-level and two-level: the `bolt bench tiers` measurement (closed-loop
//! executors in executor namespaces, a backlog of no-op tasks at the switch) repeated
//! for each executor count. Without root it runs `bolt bench noop`'s one-level loopback
//! measurement instead, and says so.

use serde::Serialize;

use super::cluster::Level;
use super::noop::{self, NoopArgs};
use super::plot::{self, Chart, Scale, Series};
use super::suite::{markdown_table, Context, Outcome};
use super::tiers::{self, TiersArgs};

const WORKERS: u16 = 2;

#[derive(Serialize)]
struct Line {
    level: Level,
    ran: Level,
    fallback: Option<String>,
    executors: u32,
    decisions_per_s: f64,
    rtt_p50_us: Option<f64>,
    rtt_p99_us: Option<f64>,
    switch_packets_per_task: Option<f64>,
}

pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let mut lines = ctx.results.jsonl("noop")?;
    let per_worker: &[u16] = ctx.pick(&[1, 2, 4, 8, 16, 32], &[2, 8]);
    let seconds = ctx.pick(3.0, 1.0);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut rows = Vec::new();
    let mut series = [Vec::new(), Vec::new()];
    for &e in per_worker {
        let executors = (e * WORKERS) as u32;
        ctx.progress("noop", format_args!("{executors} executors"));
        let measured: Vec<Line> = if root {
            let r = tiers::run(&TiersArgs {
                workers: WORKERS,
                executors: e,
                seconds,
                batch: 64,
                low_watermark: 256,
                task_us: 0,
                agent_nice: -10,
                backlog: 8192,
                name: ctx.testbed.clone(),
                json: true,
            })?;
            [(Level::OneLevel, &r.one_level), (Level::TwoLevel, &r.two_level)]
                .into_iter()
                .map(|(level, l)| Line {
                    level,
                    ran: level,
                    fallback: None,
                    executors,
                    decisions_per_s: l.decisions_per_s,
                    rtt_p50_us: Some(l.rtt_p50_us),
                    rtt_p99_us: Some(l.rtt_p99_us),
                    switch_packets_per_task: Some(l.switch_packets_per_task),
                })
                .collect()
        } else {
            let r = noop::run(&NoopArgs {
                executors,
                seconds,
                switch: None,
                backlog: 8192,
                noop_backoff_us: 50,
                refill_batch: 0,
                json: true,
            })?;
            let why = Some("not root: no network namespaces or XDP: one-level on loopback".to_string());
            Level::BOTH
                .into_iter()
                .map(|level| Line {
                    level,
                    ran: Level::OneLevel,
                    fallback: why.clone(),
                    executors,
                    decisions_per_s: r.decisions_per_s,
                    rtt_p50_us: None,
                    rtt_p99_us: None,
                    switch_packets_per_task: None,
                })
                .collect()
        };
        let fmt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |x| format!("{x:.digits$}"));
        let mut row = vec![executors.to_string()];
        for (i, l) in measured.iter().enumerate() {
            out.note_fallback(&l.fallback);
            series[i].push((executors as f64, l.decisions_per_s / 1e3));
            row.push(format!("{:.0}", l.decisions_per_s));
            row.push(format!("{} / {}", fmt(l.rtt_p50_us, 1), fmt(l.rtt_p99_us, 1)));
            row.push(fmt(l.switch_packets_per_task, 3));
            lines.write(l)?;
        }
        rows.push(row);
    }
    let chart = Chart::new(
        "No-op tasks: scheduling decisions per second",
        "executors",
        "thousand decisions per second",
        Scale::Linear,
        Level::BOTH.iter().zip(series).map(|(l, pts)| Series::new(l.name(), pts)).collect(),
    );
    out.plots.extend(plot::render(&chart, ctx.results.path(), "noop_decisions")?);
    out.table = format!(
        "{WORKERS} worker nodes, closed-loop no-op executors (one GET_TASK in flight each), {seconds} s per point; \
         two-level agents ask in batches of 64 below 256 queued.\n\n{}",
        markdown_table(
            &[
                "executors",
                "decisions/s, one-level",
                "GET_TASK p50 / p99 (us)",
                "switch pkts/task",
                "decisions/s, two-level",
                "GET_TASK p50 / p99 (us)",
                "switch pkts/task",
            ],
            &rows
        )
    );
    (out.jsonl, out.lines) = lines.finish()?;
    Ok(out)
}

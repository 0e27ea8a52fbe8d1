//! `bolt bench records`: where SW1's tasks waited, read from a run's task records
//! (`bolt bench sw1 --task-records` writes them to sw1_tasks.jsonl). A point's
//! `--rounds` are read together: they ran one after another, so an executor's
//! previous task is still the one before it in time.
//!
//! A task's executor was either idle when the task was submitted (its previous task had
//! ended) or busy. A task for an idle executor waits for the scheduler's path to it. A
//! task for a busy executor waits for that executor to free, then for its pick-up (the
//! previous task's end → this task's start): a hit in its host's rings at two levels, a
//! GET_TASK round trip at one.
//!
//! Prefetch binds a task to a host before anyone knows which executors will free first.
//! Two figures measure what that costs:
//! - tasks that started on a busy executor while an executor of another node sat idle
//!   from before the start to after it ([`IDLE_MARGIN_NS`] each side), and how long that
//!   executor had been idle since the task was submitted;
//! - per job, its tasks that waited for busy executors, placed against the order in which
//!   the executors busy at its submission freed: the tasks a node got beyond the number
//!   of its executors among the first to free. Computed for the node each task ran on,
//!   and for two rules tier 2 could split them by instead: evenly over the nodes, and in
//!   proportion to each node's busy executors. A replay keeps the run's placement of the
//!   jobs before, which decides where executors free next, so it says what a rule gains
//!   without changing those dynamics, not what it gains once built.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

use super::cluster::Level;
use super::plot::quantile;
use super::suite::markdown_table;
use super::sw1::TaskLine;

/// An executor of another node counts as idle around a start only if it was idle this
/// long before it and stayed idle this long after: a freed executor's request takes tens
/// of microseconds to be answered, so one idle for less could not have taken the task.
pub const IDLE_MARGIN_NS: u64 = 100_000;

#[derive(clap::Args, Debug)]
pub struct RecordsArgs {
    /// sw1_tasks.jsonl, or the results directory that holds it.
    pub path: PathBuf,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One level at one utilisation. Times in microseconds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PointRecords {
    pub level: Level,
    pub utilization: f64,
    pub tasks: usize,
    pub p50_delay_us: f64,
    pub p90_delay_us: f64,
    /// Tasks whose executor was idle when they were submitted, and their delay.
    pub idle_at_submit: usize,
    pub idle_at_submit_p50_delay_us: f64,
    /// Tasks whose executor was busy when they were submitted, and their pick-up: the
    /// executor's previous task's end → this task's start.
    pub busy_at_submit: usize,
    pub busy_at_submit_p50_pickup_us: f64,
    pub busy_at_submit_p90_pickup_us: f64,
    /// Tasks that started on a busy executor while an executor of another node was idle
    /// around the start, and how long that one had been idle (since the submission at
    /// the earliest) when the task started.
    pub behind_a_busy_node: usize,
    pub behind_a_busy_node_p50_idle_us: f64,
    /// Jobs with tasks that waited for busy executors, and those tasks' placement on
    /// nodes against the executors that freed first: misplaced tasks per job as run,
    /// split evenly over the nodes, and split by each node's busy executors.
    pub jobs_waiting: usize,
    pub misplaced_per_job: f64,
    pub misplaced_per_job_even: f64,
    pub misplaced_per_job_by_busy: f64,
}

/// One executor's tasks in start order, with each one's end.
struct Runs {
    node: u16,
    /// (start, end) of each task, by start.
    spans: Vec<(u64, u64)>,
}

impl Runs {
    /// The span running at `t`, if any.
    fn busy_at(&self, t: u64) -> Option<(u64, u64)> {
        let i = self.spans.partition_point(|&(start, _)| start <= t);
        let span = *self.spans.get(i.checked_sub(1)?)?;
        (t < span.1).then_some(span)
    }

    /// When the executor's idle time that covers `[from, to]` began: between two of its
    /// tasks, or after its last.
    fn idle_across(&self, from: u64, to: u64) -> Option<u64> {
        let i = self.spans.partition_point(|&(start, _)| start <= from);
        let (_, end) = *self.spans.get(i.checked_sub(1)?)?;
        let next = self.spans.get(i).map_or(u64::MAX, |&(start, _)| start);
        (end <= from && next >= to).then_some(end)
    }
}

/// Reads task records from `path` (a file, or a directory holding sw1_tasks.jsonl).
pub fn read(path: &Path) -> anyhow::Result<Vec<TaskLine>> {
    let file = if path.is_dir() { path.join("sw1_tasks.jsonl") } else { path.to_path_buf() };
    let f = std::fs::File::open(&file).with_context(|| format!("opening {}", file.display()))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", file.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let t: TaskLine = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}: not a task record", file.display(), i + 1))?;
        out.push(t);
    }
    anyhow::ensure!(!out.is_empty(), "{} holds no task records (made with `--task-records`?)", file.display());
    Ok(out)
}

/// The figures of every (level, utilisation) in `tasks`, by utilisation then level.
pub fn analyse(tasks: &[TaskLine]) -> Vec<PointRecords> {
    let mut points: BTreeMap<(u64, u8), Vec<&TaskLine>> = BTreeMap::new();
    for t in tasks {
        let level = match t.level {
            Level::OneLevel => 0,
            Level::TwoLevel => 1,
        };
        points.entry((t.utilization.to_bits(), level)).or_default().push(t);
    }
    points.into_values().map(|p| point(&p)).collect()
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn point(tasks: &[&TaskLine]) -> PointRecords {
    let mut by_executor: HashMap<(u16, u16), Vec<&TaskLine>> = HashMap::new();
    for t in tasks {
        by_executor.entry((t.node, t.executor)).or_default().push(t);
    }
    let mut runs = Vec::new();
    // (task, its executor's previous end)
    let mut with_previous: Vec<(&TaskLine, Option<u64>)> = Vec::new();
    for ((node, _), mut mine) in by_executor {
        mine.sort_by_key(|t| t.start_unix_ns);
        let mut previous_end = None;
        for t in &mine {
            with_previous.push((t, previous_end));
            previous_end = Some(t.start_unix_ns + t.run_ns as u64);
        }
        runs.push(Runs {
            node,
            spans: mine.iter().map(|t| (t.start_unix_ns, t.start_unix_ns + t.run_ns as u64)).collect(),
        });
    }
    runs.sort_by_key(|r| (r.node, r.spans.first().copied()));
    let delay = |t: &TaskLine| t.start_unix_ns.saturating_sub(t.first_sent_unix_ns);
    let all: Vec<f64> = tasks.iter().map(|t| us(delay(t))).collect();
    let mut idle = Vec::new();
    let mut pickup = Vec::new();
    let mut behind = Vec::new();
    let mut waiting_by_job: HashMap<(u32, u32), Vec<&TaskLine>> = HashMap::new();
    for &(t, previous_end) in &with_previous {
        match previous_end {
            Some(end) if end > t.first_sent_unix_ns => {
                pickup.push(us(t.start_unix_ns.saturating_sub(end)));
                waiting_by_job.entry((t.uid, t.jid)).or_default().push(t);
                let (from, to) = (t.start_unix_ns.saturating_sub(IDLE_MARGIN_NS), t.start_unix_ns + IDLE_MARGIN_NS);
                let idle_since = runs
                    .iter()
                    .filter(|r| r.node != t.node)
                    .filter_map(|r| r.idle_across(from, to))
                    .map(|since| since.max(t.first_sent_unix_ns))
                    .min();
                if let Some(since) = idle_since {
                    behind.push(us(t.start_unix_ns.saturating_sub(since)));
                }
            }
            _ => idle.push(us(delay(t))),
        }
    }
    let placement = placement(&runs, &waiting_by_job);
    let first = tasks[0];
    PointRecords {
        level: first.level,
        utilization: first.utilization,
        tasks: tasks.len(),
        p50_delay_us: quantile(&all, 0.5),
        p90_delay_us: quantile(&all, 0.9),
        idle_at_submit: idle.len(),
        idle_at_submit_p50_delay_us: quantile(&idle, 0.5),
        busy_at_submit: pickup.len(),
        busy_at_submit_p50_pickup_us: quantile(&pickup, 0.5),
        busy_at_submit_p90_pickup_us: quantile(&pickup, 0.9),
        behind_a_busy_node: behind.len(),
        behind_a_busy_node_p50_idle_us: quantile(&behind, 0.5),
        jobs_waiting: placement.jobs,
        misplaced_per_job: placement.per_job(placement.as_run),
        misplaced_per_job_even: placement.per_job(placement.even),
        misplaced_per_job_by_busy: placement.per_job(placement.by_busy),
    }
}

/// Misplaced tasks summed over jobs, for the placement as run and two split rules.
#[derive(Default)]
struct Placement {
    jobs: usize,
    as_run: f64,
    even: f64,
    by_busy: f64,
}

impl Placement {
    fn per_job(&self, sum: f64) -> f64 {
        if self.jobs == 0 {
            0.0
        } else {
            sum / self.jobs as f64
        }
    }
}

/// For each job, its tasks that waited for busy executors (`waiting`) against the nodes
/// of the executors that, busy at the job's submission, freed first: a node's tasks
/// beyond its count among them waited for a later one.
fn placement(runs: &[Runs], waiting: &HashMap<(u32, u32), Vec<&TaskLine>>) -> Placement {
    let nodes: Vec<u16> = {
        let mut n: Vec<u16> = runs.iter().map(|r| r.node).collect();
        n.dedup();
        n
    };
    let mut out = Placement::default();
    for tasks in waiting.values() {
        let Some(submitted) = tasks.iter().map(|t| t.first_sent_unix_ns).min() else { continue };
        let mut ends: Vec<(u64, u16)> =
            runs.iter().filter_map(|r| r.busy_at(submitted).map(|(_, end)| (end, r.node))).collect();
        if ends.is_empty() {
            continue;
        }
        ends.sort_unstable();
        let busy_total = ends.len() as f64;
        let first_free = &ends[..tasks.len().min(ends.len())];
        let n = tasks.len() as f64;
        for &node in &nodes {
            let freed = first_free.iter().filter(|e| e.1 == node).count() as f64;
            let ran = tasks.iter().filter(|t| t.node == node).count() as f64;
            let busy = ends.iter().filter(|e| e.1 == node).count() as f64;
            out.as_run += (ran - freed).max(0.0);
            out.even += (n / nodes.len() as f64 - freed).max(0.0);
            out.by_busy += (n * busy / busy_total - freed).max(0.0);
        }
        out.jobs += 1;
    }
    out
}

pub fn run(args: &RecordsArgs) -> anyhow::Result<Vec<PointRecords>> {
    Ok(analyse(&read(&args.path)?))
}

pub fn print(points: &[PointRecords], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(points)?);
        return Ok(());
    }
    let header = [
        "load",
        "level",
        "tasks",
        "delay p50 / p90 (µs)",
        "idle at submit: tasks, delay p50 (µs)",
        "busy at submit: tasks, pick-up p50 / p90 (µs)",
        "behind a busy node: tasks, other node idle p50 (µs)",
        "misplaced per job: as run / even / by busy",
    ];
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                format!("{:.0} %", p.utilization * 100.0),
                p.level.name().to_string(),
                p.tasks.to_string(),
                format!("{:.0} / {:.0}", p.p50_delay_us, p.p90_delay_us),
                format!("{}, {:.0}", p.idle_at_submit, p.idle_at_submit_p50_delay_us),
                format!(
                    "{}, {:.0} / {:.0}",
                    p.busy_at_submit, p.busy_at_submit_p50_pickup_us, p.busy_at_submit_p90_pickup_us
                ),
                format!("{}, {:.0}", p.behind_a_busy_node, p.behind_a_busy_node_p50_idle_us),
                format!(
                    "{:.2} / {:.2} / {:.2}",
                    p.misplaced_per_job, p.misplaced_per_job_even, p.misplaced_per_job_by_busy
                ),
            ]
        })
        .collect();
    print!("{}", markdown_table(&header, &rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    fn task(node: u16, executor: u16, jid: u32, submitted: u64, start: u64, run: u64) -> TaskLine {
        TaskLine {
            level: Level::TwoLevel,
            utilization: 0.8,
            round: 1,
            uid: 1,
            jid,
            tid: executor as u32,
            node,
            executor,
            first_sent_unix_ns: submitted,
            arrived_unix_ns: 0,
            start_unix_ns: start,
            run_ns: run as u32,
            get_rtt_ns: 0,
            switch_arrived_unix_ns: 0,
            switch_taken_unix_ns: 0,
            switch_sent_unix_ns: 0,
            switch_handled_unix_ns: 0,
            switch_flush_called_unix_ns: 0,
            switch_sends: 0,
            switch_last_sent_unix_ns: 0,
            switch_batch_index: 0,
            switch_batch_len: 0,
        }
    }

    /// Job 1 occupies executor 0 of node 1 and executors 0 and 1 of node 2 for 10 ms;
    /// executor 1 of node 2 runs 1 ms longer. Job 2, submitted at 9 ms, has two tasks,
    /// and both run on node 2.
    fn two_nodes() -> Vec<TaskLine> {
        vec![
            task(1, 0, 1, 0, 10 * US, 10 * MS),
            task(2, 0, 1, 0, 20 * US, 10 * MS),
            task(2, 1, 1, 0, 30 * US, 11 * MS),
            // waits 0.5 ms for node 2's executor 0 to free, picked up 20 µs after its end
            task(2, 0, 2, 9 * MS, 10 * MS + 40 * US, 10 * MS),
            // waits for executor 1 of node 2, while node 1's executor 0 is idle
            task(2, 1, 2, 9 * MS, 11 * MS + 30 * US + 50 * US, 10 * MS),
        ]
    }

    #[test]
    fn a_task_on_a_busy_node_while_another_nodes_executor_idles_is_counted_with_its_idle_time() {
        let points = analyse(&two_nodes());
        assert_eq!(points.len(), 1);
        let p = &points[0];
        assert_eq!((p.tasks, p.idle_at_submit, p.busy_at_submit), (5, 3, 2));
        // Node 1's executor 0 idles from 10.01 ms: the first task of job 2 starts at
        // 10.04 ms, within the margin of that; the second at 11.08 ms, 1,070 µs after.
        assert_eq!(p.behind_a_busy_node, 1);
        assert_eq!(p.behind_a_busy_node_p50_idle_us, 1070.0);
        assert_eq!(p.busy_at_submit_p50_pickup_us, 20.0);
        assert_eq!(p.busy_at_submit_p90_pickup_us, 50.0);
    }

    #[test]
    fn a_jobs_waiting_tasks_are_placed_against_the_executors_that_freed_first() {
        let p = &analyse(&two_nodes())[0];
        // Busy at 9 ms: node 1's executor 0 (ends 10.01), node 2's 0 (10.02) and 1
        // (11.03). The first two to free are one per node; both tasks ran on node 2.
        assert_eq!(p.jobs_waiting, 1);
        assert_eq!(p.misplaced_per_job, 1.0);
        // Even: one per node, as the executors freed.
        assert_eq!(p.misplaced_per_job_even, 0.0);
        // By busy executors: 2/3 to node 1, 4/3 to node 2, against one each.
        assert!((p.misplaced_per_job_by_busy - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn levels_and_loads_are_reported_apart_and_bad_lines_are_errors() {
        let mut tasks = two_nodes();
        tasks.push(TaskLine { level: Level::OneLevel, ..task(1, 0, 1, 0, 10 * US, 10 * MS) });
        let points = analyse(&tasks);
        assert_eq!(
            points.iter().map(|p| (p.level, p.tasks)).collect::<Vec<_>>(),
            [(Level::OneLevel, 1), (Level::TwoLevel, 5)]
        );

        let dir = std::env::temp_dir().join(format!("bolt-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("sw1_tasks.jsonl");
        let mut text = String::new();
        for t in &tasks {
            text.push_str(&serde_json::to_string(t).unwrap());
            text.push('\n');
        }
        std::fs::write(&file, &text).unwrap();
        assert_eq!(analyse(&read(&dir).unwrap()), points);
        std::fs::write(&file, format!("{text}{{\"level\":\"two-level\"}}\n")).unwrap();
        let err = read(&file).unwrap_err();
        assert!(format!("{err:#}").contains("line 7: not a task record"), "{err:#}");
        std::fs::write(&file, "\n").unwrap();
        let empty = read(&file).map(|t| t.len());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(format!("{:#}", empty.unwrap_err()).contains("holds no task records"));
    }
}

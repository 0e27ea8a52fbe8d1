//! `bolt bench bitvectors`: the client's job queue (state vectors and resource inverted
//! lists, roaring bitmaps) against a plain per-task array (one state byte and one
//! resource byte per task) at 10^6 to 10^8 task ids: bytes per task, and the latency of
//! the selection queries.
//!
//! The population: ids in jobs of `--job-size` consecutive tasks; half the jobs need no
//! resource, the others one resource bit drawn uniformly from the 8. The oldest 90 % of
//! the ids are Done (of those, 0.1 % Failed and 0.1 % Canceled, spread at random), the
//! next 1 % Running and the newest 9 % Pending. The agent offers resource bit 0.
//!
//! The array is given the same head start the bitmaps have for free: it keeps the lowest
//! Pending id, so its scans start there instead of at id 0.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::client::job_queue::{ResourceIndex, Selection, RESOURCE_BITS};
use crate::client::{TaskState, TaskStates};

#[derive(clap::Args, Debug)]
pub struct BitvectorsArgs {
    /// Task ids per population, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000,100000000")]
    pub sizes: Vec<u32>,
    /// Consecutive tasks per job (they share their resource need).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub job_size: u32,
    /// Tasks a selection returns.
    #[arg(long, default_value_t = 16)]
    pub select: usize,
    /// Time spent timing each query.
    #[arg(long, default_value_t = 300)]
    pub millis_per_query: u64,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The numbers of one population size.
#[derive(Clone, Debug, Serialize)]
pub struct BitvectorsRow {
    pub ids: u32,
    /// Serialized bytes of the five state vectors and of the eight resource vectors, per task.
    pub state_bytes_per_task: f64,
    pub resource_bytes_per_task: f64,
    /// The plain array: one state byte and one resource byte per task.
    pub array_bytes_per_task: f64,
    /// Affinity selection of `--select` Pending tasks for the agent (with the
    /// first-Pending fallback), microseconds.
    pub select_us: f64,
    pub array_select_us: f64,
    /// The backlog the agent could take: |Pending ∧ feasible|, microseconds.
    pub backlog_us: f64,
    pub array_backlog_us: f64,
    /// Pending per resource bit, all eight, microseconds.
    pub per_resource_us: f64,
    pub array_per_resource_us: f64,
    /// Tasks the selection and the backlog found (both sides agree; checked).
    pub selected: usize,
    pub backlog: u64,
}

const AGENT: u8 = 0b1;
const PENDING: u8 = TaskState::Pending as u8;

/// The baseline: a byte of state and a byte of resources per task id.
struct PlainQueue {
    state: Vec<u8>,
    resources: Vec<u8>,
    first_pending: usize,
}

impl PlainQueue {
    fn select(&self, agent: u8, k: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(k);
        for tid in self.first_pending..self.state.len() {
            if self.state[tid] == PENDING && self.resources[tid] & agent != 0 {
                out.push(tid as u32);
                if out.len() == k {
                    break;
                }
            }
        }
        if out.is_empty() {
            out.extend(self.state[self.first_pending..].iter().position(|&s| s == PENDING).map(|i| i as u32));
        }
        out
    }

    fn backlog(&self, agent: u8) -> u64 {
        let range = self.first_pending..self.state.len();
        self.state[range.clone()]
            .iter()
            .zip(&self.resources[range])
            .filter(|&(&s, &r)| s == PENDING && r & !agent == 0)
            .count() as u64
    }

    fn per_resource(&self) -> [u64; RESOURCE_BITS] {
        let mut counts = [0u64; RESOURCE_BITS];
        let range = self.first_pending..self.state.len();
        for (&s, &r) in self.state[range.clone()].iter().zip(&self.resources[range]) {
            if s == PENDING {
                for (bit, c) in counts.iter_mut().enumerate() {
                    *c += (r >> bit & 1) as u64;
                }
            }
        }
        counts
    }
}

/// Builds both representations of the population of `ids` tasks.
fn populate(ids: u32, job_size: u32, seed: u64) -> (TaskStates, ResourceIndex, PlainQueue) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut states = TaskStates::new();
    let mut index = ResourceIndex::new();
    let mut plain =
        PlainQueue { state: vec![PENDING; ids as usize], resources: vec![0; ids as usize], first_pending: 0 };
    states.add_pending(0..ids).expect("fresh ids");
    let mut first = 0u32;
    while first < ids {
        let end = first.saturating_add(job_size).min(ids);
        let need = if rng.gen_bool(0.5) { 0 } else { 1u8 << rng.gen_range(0..RESOURCE_BITS) };
        index.register(first..end, need);
        plain.resources[first as usize..end as usize].fill(need);
        first = end;
    }
    let done_end = (ids as u64 * 90 / 100) as u32;
    let running_end = (ids as u64 * 91 / 100) as u32;
    states.transition_range(0..done_end, TaskState::Pending, TaskState::Running);
    // Failed and Canceled first (they leave Running), then the rest of the head is Done.
    for _ in 0..done_end / 1000 {
        let tid = rng.gen_range(0..done_end.max(1));
        states.transition(tid, TaskState::Running, TaskState::Failed);
        let tid = rng.gen_range(0..done_end.max(1));
        states.transition(tid, TaskState::Running, TaskState::Canceled);
    }
    states.transition_range(0..done_end, TaskState::Running, TaskState::Done);
    states.transition_range(done_end..running_end, TaskState::Pending, TaskState::Running);
    for state in TaskState::ALL {
        for tid in states.vector(state) {
            plain.state[tid as usize] = state as u8;
        }
    }
    plain.first_pending = running_end as usize;
    (states, index, plain)
}

/// Mean time of `op` over repetitions filling `budget` (at least 3).
fn time<T>(budget: Duration, mut op: impl FnMut() -> T) -> f64 {
    let start = Instant::now();
    let mut reps = 0u32;
    while reps < 3 || (start.elapsed() < budget && reps < 100_000) {
        black_box(op());
        reps += 1;
    }
    start.elapsed().as_secs_f64() * 1e6 / reps as f64
}

pub fn run(args: &BitvectorsArgs) -> anyhow::Result<Vec<BitvectorsRow>> {
    anyhow::ensure!(args.select > 0, "--select must be at least 1");
    let budget = Duration::from_millis(args.millis_per_query);
    let mut rows = Vec::new();
    for &ids in &args.sizes {
        anyhow::ensure!(ids >= 100, "a population of at least 100 ids");
        let built = Instant::now();
        let (states, index, plain) = populate(ids, args.job_size, 0xB17_3A61C);
        tracing::info!(ids, took = ?built.elapsed(), "population built");
        let pending = states.vector(TaskState::Pending);

        let selection = index.select(pending, AGENT, args.select);
        let selected = match &selection {
            Selection::Affinity(tids) => tids.clone(),
            Selection::FirstPending(tid) => vec![*tid],
            Selection::Empty => vec![],
        };
        anyhow::ensure!(selected == plain.select(AGENT, args.select), "the two selections disagree");
        let backlog = index.feasible(pending, AGENT).len();
        anyhow::ensure!(backlog == plain.backlog(AGENT), "the two backlogs disagree");
        anyhow::ensure!(index.count_per_resource(pending) == plain.per_resource(), "per-resource counts disagree");

        rows.push(BitvectorsRow {
            ids,
            state_bytes_per_task: states.serialized_bytes() as f64 / ids as f64,
            resource_bytes_per_task: index.serialized_bytes() as f64 / ids as f64,
            array_bytes_per_task: (plain.state.len() + plain.resources.len()) as f64 / ids as f64,
            select_us: time(budget, || index.select(pending, AGENT, args.select)),
            array_select_us: time(budget, || plain.select(AGENT, args.select)),
            backlog_us: time(budget, || index.feasible(pending, AGENT).len()),
            array_backlog_us: time(budget, || plain.backlog(AGENT)),
            per_resource_us: time(budget, || index.count_per_resource(pending)),
            array_per_resource_us: time(budget, || plain.per_resource()),
            selected: selected.len(),
            backlog,
        });
    }
    Ok(rows)
}

pub fn print(rows: &[BitvectorsRow], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(rows)?);
        return Ok(());
    }
    println!("| task ids | bytes/task: vectors (states + resources) | array | select µs: vectors | array | backlog µs: vectors | array | per-resource µs: vectors | array |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {:.3} ({:.3} + {:.3}) | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            r.ids,
            r.state_bytes_per_task + r.resource_bytes_per_task,
            r.state_bytes_per_task,
            r.resource_bytes_per_task,
            r.array_bytes_per_task,
            r.select_us,
            r.array_select_us,
            r.backlog_us,
            r.array_backlog_us,
            r.per_resource_us,
            r.array_per_resource_us
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small population: both sides give the same answers (run checks them) and the
    /// vectors are smaller than the array.
    #[test]
    fn a_small_population_agrees_with_the_array() {
        let args =
            BitvectorsArgs { sizes: vec![300_000], job_size: 1000, select: 16, millis_per_query: 1, json: false };
        let rows = run(&args).unwrap();
        let r = &rows[0];
        assert_eq!(r.selected, 16);
        assert!(r.backlog > 0 && r.backlog < 300_000 / 10, "{r:?}");
        assert_eq!(r.array_bytes_per_task, 2.0);
        assert!(r.state_bytes_per_task < 1.0, "{r:?}");
    }
}

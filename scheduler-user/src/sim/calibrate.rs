//! `bolt sim calibrate`: what a sleeping executor thread adds to a task on this machine,
//! measured, for the testbed configurations of `bolt sim validate`.
//!
//! `threads` threads (the testbed's 40 executors) each wait on a channel for a task,
//! sleep its length with `std::thread::sleep` (as `bolt executor` runs a sleep task)
//! and report back. A dispatcher hands tasks to idle threads as SW1's clients submit
//! them: every task length, `threads × utilisation` tasks at one instant. Two things are
//! measured per task: the **wait**, from the dispatcher's send to the thread running
//! (a blocked thread woken while the others share the CPUs: the testbed's wait between
//! an ASSIGN reaching the executor and the task starting), and the **overshoot**, how
//! much longer than the task the sleep took, from the thread running to its end.
//! Queueing is not measured here: a task finding no idle thread is not sent.
//!
//! [`ThreadTimes::of_run`] measures the same two things in place, in a testbed run, from
//! the executors' records: the wait from the kernel's arrival stamp on each ASSIGN to
//! the task starting (with the software switch, the agents and the clients sharing the
//! CPUs, which this stand-alone measurement does not run), and the overshoot of each
//! sleep task's run time past its length. `bolt sim validate --testbed` draws from those.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::clock::Nanos;
use crate::client::TaskRecord;
use crate::executor::AssignmentRecord;

/// The cumulative probabilities the quantile tables are given at.
pub const QUANTILE_POINTS: [f64; 14] =
    [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0];

#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    pub threads: usize,
    pub task_ms: u64,
    pub utilisation: f64,
    pub seconds: f64,
    pub tasks: usize,
    /// (cumulative probability, ns) at `QUANTILE_POINTS`.
    pub wait_ns: Vec<(f64, Nanos)>,
    pub overshoot_ns: Vec<(f64, Nanos)>,
    /// The machine's 1-minute load average when the step ended.
    pub load_average: Option<f64>,
}

/// The value at each of `QUANTILE_POINTS` of `samples` (nearest rank).
pub fn quantiles(samples: &mut [Nanos]) -> Vec<(f64, Nanos)> {
    samples.sort_unstable();
    if samples.is_empty() {
        return Vec::new();
    }
    QUANTILE_POINTS
        .iter()
        .map(|&p| {
            let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            (p, samples[i])
        })
        .collect()
}

/// What the executors' threads added to the tasks of one testbed run, measured there:
/// quantiles (at `QUANTILE_POINTS`, ns) of the wait from an ASSIGN reaching the
/// executor's host to the task starting, and of the sleep tasks' overshoot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadTimes {
    /// Tasks with an arrival stamp (the wait's sample).
    pub waits: usize,
    /// Sleep tasks (the overshoot's sample).
    pub sleeps: usize,
    pub wait_ns: Vec<(f64, Nanos)>,
    pub overshoot_ns: Vec<(f64, Nanos)>,
    /// The client's first send → the ASSIGN's arrival stamp: the scheduler's part of the
    /// delay, before the executor's thread. Reported beside the simulator's, never drawn.
    #[serde(default)]
    pub before_arrival_ns: Vec<(f64, Nanos)>,
}

impl ThreadTimes {
    /// Joins one client's task records (`uid`) with the executors' assignment records.
    /// A task without an arrival stamp, or whose start precedes it (clocks stepped),
    /// adds no wait; a task that is not a sleep adds no overshoot.
    pub fn of_run<'a>(
        runs: impl IntoIterator<Item = (u32, &'a [TaskRecord])>,
        assignments: &'a [AssignmentRecord],
    ) -> ThreadTimes {
        let (mut waits, mut overshoots, mut before) = (Vec::new(), Vec::new(), Vec::new());
        for (_, t, a) in with_assignments(runs, assignments) {
            let Some(a) = a else { continue };
            if a.arrived_unix_ns > 0 && t.start_unix_ns >= a.arrived_unix_ns {
                waits.push(t.start_unix_ns - a.arrived_unix_ns);
                before.push(a.arrived_unix_ns.saturating_sub(t.first_sent_unix_ns));
            }
            if let Some(sleep) = a.sleep_ns {
                overshoots.push(u64::from(t.run_ns).saturating_sub(sleep));
            }
        }
        ThreadTimes {
            waits: waits.len(),
            sleeps: overshoots.len(),
            wait_ns: quantiles(&mut waits),
            overshoot_ns: quantiles(&mut overshoots),
            before_arrival_ns: quantiles(&mut before),
        }
    }
}

/// Each client's task records (`uid`, records) with the executor's assignment record of
/// the same task, if one was kept.
pub fn with_assignments<'a>(
    runs: impl IntoIterator<Item = (u32, &'a [TaskRecord])>,
    assignments: &'a [AssignmentRecord],
) -> impl Iterator<Item = (u32, &'a TaskRecord, Option<&'a AssignmentRecord>)> {
    let by_task: HashMap<(u32, u32, u32), &AssignmentRecord> =
        assignments.iter().map(|a| ((a.uid, a.jid, a.tid), a)).collect();
    runs.into_iter()
        .flat_map(|(uid, records)| records.iter().map(move |t| (uid, t)))
        .map(move |(uid, t)| (uid, t, by_task.get(&(uid, t.jid, t.tid)).copied()))
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Runs the measurement for `seconds` at one utilisation.
pub fn measure(threads: usize, task: Duration, utilisation: f64, seconds: f64) -> anyhow::Result<Calibration> {
    anyhow::ensure!(threads > 0 && threads <= 1024, "1 to 1,024 threads");
    anyhow::ensure!(utilisation > 0.0 && utilisation <= 1.0, "utilisation in (0, 1]");
    anyhow::ensure!(seconds > 0.0 && seconds <= 600.0, "up to 600 s");
    let (done_tx, done_rx) = mpsc::channel::<(usize, Nanos, Nanos)>();
    let mut senders = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let (tx, rx) = mpsc::channel::<Instant>();
        let done = done_tx.clone();
        senders.push(tx);
        handles.push(std::thread::spawn(move || {
            // Ends when the dispatcher drops its sender.
            while let Ok(sent) = rx.recv() {
                let running = Instant::now();
                std::thread::sleep(task);
                let overshoot = running.elapsed().saturating_sub(task);
                let wait = running.saturating_duration_since(sent);
                if done.send((i, wait.as_nanos() as Nanos, overshoot.as_nanos() as Nanos)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(done_tx);
    let per_round = ((threads as f64 * utilisation).round() as usize).max(1);
    let mut idle: VecDeque<usize> = (0..threads).collect();
    let (mut waits, mut overshoots) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut next = start;
    while next < end {
        loop {
            let left = next.saturating_duration_since(Instant::now());
            match done_rx.recv_timeout(left) {
                Ok((i, wait, overshoot)) => {
                    waits.push(wait);
                    overshoots.push(overshoot);
                    idle.push_back(i);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => anyhow::bail!("an executor thread ended"),
            }
        }
        for _ in 0..per_round {
            let Some(i) = idle.pop_front() else { break };
            senders[i].send(Instant::now())?;
        }
        next += task;
    }
    drop(senders);
    for (_, wait, overshoot) in done_rx.iter() {
        waits.push(wait);
        overshoots.push(overshoot);
    }
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("an executor thread panicked"))?;
    }
    Ok(Calibration {
        threads,
        task_ms: task.as_millis() as u64,
        utilisation,
        seconds,
        tasks: waits.len(),
        wait_ns: quantiles(&mut waits),
        overshoot_ns: quantiles(&mut overshoots),
        load_average: load_average(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(jid: u32, tid: u32, first_sent: u64, start: u64, run_ns: u32) -> TaskRecord {
        TaskRecord {
            jid,
            tid,
            priority: 1,
            resources: 0,
            first_sent_unix_ns: first_sent,
            start_unix_ns: start,
            run_ns,
            node: 1,
            executor: 0,
            completed_unix_ns: start + run_ns as u64,
            output_len: 0,
        }
    }

    fn assignment(uid: u32, jid: u32, tid: u32, arrived: u64, sleep_ns: Option<u64>) -> AssignmentRecord {
        AssignmentRecord { uid, jid, tid, priority: 1, node: 1, get_rtt_ns: 0, arrived_unix_ns: arrived, sleep_ns }
    }

    #[test]
    fn thread_times_join_each_clients_tasks_with_their_assignments() {
        // Client 7's task 1: sent at 1,000, arrived at 5,000, started at 8,000, asked to
        // sleep 10 µs and ran 12 µs. Task 2: no arrival stamp, not a sleep. Client 8 has a
        // task of the same job and task ids, arrived at 2,000 and started at 2,500.
        let runs = [record(1, 1, 1_000, 8_000, 12_000), record(1, 2, 1_000, 9_000, 500)];
        let other = [record(1, 1, 1_000, 2_500, 10_100)];
        let assignments = [
            assignment(7, 1, 1, 5_000, Some(10_000)),
            assignment(7, 1, 2, 0, None),
            assignment(8, 1, 1, 2_000, Some(10_000)),
            assignment(9, 1, 1, 1, Some(1)),
        ];
        let t = ThreadTimes::of_run([(7, &runs[..]), (8, &other[..])], &assignments);
        assert_eq!((t.waits, t.sleeps), (2, 2));
        let at = |q: &[(f64, Nanos)], p: f64| q.iter().find(|(x, _)| *x == p).map(|(_, v)| *v);
        assert_eq!((at(&t.wait_ns, 0.0), at(&t.wait_ns, 1.0)), (Some(500), Some(3_000)));
        assert_eq!((at(&t.overshoot_ns, 0.0), at(&t.overshoot_ns, 1.0)), (Some(100), Some(2_000)));
        assert_eq!((at(&t.before_arrival_ns, 0.0), at(&t.before_arrival_ns, 1.0)), (Some(1_000), Some(4_000)));
    }
}

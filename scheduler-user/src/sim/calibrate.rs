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
use crate::metrics::QUANTILE_POINTS;

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
    /// When the whole machine stopped ([`machine_stalls`]), from the run's first send.
    /// The overshoots and waits inside them are left out of the quantiles above: the
    /// simulator replays the stalls instead (every event in one waits for its end).
    #[serde(default)]
    pub stalls: Vec<Stall>,
    /// When the machine was slow ([`slow_spells`]), from the run's first send: windows
    /// in which the executors' waits ran far above their median. Everything the run's
    /// threads spent in one was near the top of its distribution at once (the switch's
    /// timeline, docs/benchmarks.md "Where SW1's tail goes"); the simulator draws every
    /// thread cost in one from the top of its distribution (`sim::spells`).
    #[serde(default)]
    pub spells: Vec<Stall>,
    /// The span the spells were looked for in: the first send to the last arrival.
    #[serde(default)]
    pub spell_span_ns: Nanos,
    /// The software switch thread's times in the same run (`switch::ThreadStats`):
    /// receives woken by a datagram, and quantiles of the wait from its arrival stamp to
    /// the thread running; of its resumption (a batch's end to the next receive
    /// returning with what queued during it); of its handling per message, all and by op;
    /// of its sending per datagram. Empty in lines made before they were recorded.
    #[serde(default)]
    pub switch_wakeups: u64,
    #[serde(default)]
    pub switch_wait_ns: Vec<(f64, Nanos)>,
    #[serde(default)]
    pub switch_resume_ns: Vec<(f64, Nanos)>,
    #[serde(default)]
    pub switch_handle_ns: Vec<(f64, Nanos)>,
    /// The handling's quantiles per op ("SUBMIT", "GET_TASK", ...), where recorded.
    #[serde(default)]
    pub switch_handle_by_op_ns: std::collections::BTreeMap<String, Vec<(f64, Nanos)>>,
    #[serde(default)]
    pub switch_send_ns: Vec<(f64, Nanos)>,
    /// Quantiles of how late the clients sent their jobs: each job's send less the time
    /// it was due. The replaying client sleeps on tokio's timer, whose wheel turns once a
    /// millisecond, and its thread must then run. Jobs due or sent in a stall are left
    /// out (the stall is replayed). Empty in lines made before it was recorded.
    #[serde(default)]
    pub client_late_ns: Vec<(f64, Nanos)>,
}

/// A sleep that overran its length by more than this, while others did too, counts
/// towards a stall of the machine.
pub const STALL_MIN_OVERRUN_NS: Nanos = 1_000_000;
/// Executors whose overruns must overlap for them to be the machine's stall rather than
/// one thread's wait for a CPU: a tenth of SW1's 40.
pub const STALL_MIN_EXECUTORS: usize = 4;

/// A window in which the testbed's machine stopped running its threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    /// From the run's first send, ns.
    pub at_ns: Nanos,
    pub len_ns: Nanos,
}

/// Length of the windows [`slow_spells`] looks at: SW1's interval between jobs.
pub const SPELL_WINDOW_NS: Nanos = 10_000_000;
/// A window is slow when its executors' median wait is this many times the run's.
pub const SPELL_FACTOR: u64 = 4;
/// Waits a window needs for its median to count.
pub const SPELL_MIN_WAITS: usize = 3;
/// A client that submitted a job this long after it was due was held back: past the
/// client's 1-ms timer and its thread's usual wake-up.
pub const SPELL_HELD_BACK_NS: u64 = 2_000_000;

/// The slow spells of the whole machine among `waits` ((arrival, start) of each task,
/// ns): the run cut into [`SPELL_WINDOW_NS`] windows from `first`, a window slow when at
/// least [`SPELL_MIN_WAITS`] tasks arrived in it and their median wait is
/// [`SPELL_FACTOR`] times the run's median or more; adjacent slow windows joined. A
/// spell is kept only if a client was held back in it as well: a job of `submitted`
/// ((due, submitted) per job) submitted [`SPELL_HELD_BACK_NS`] or more late, between its
/// due time and its submission overlapping the spell. Slow executors alone are their
/// waits for a CPU, which the simulator draws as measured; a stall of the machine holds
/// every thread back, the clients' too. Returns (from, to) in order.
pub fn slow_spells(waits: &[(u64, u64)], first: u64, submitted: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut all: Vec<u64> = waits.iter().map(|&(a, s)| s.saturating_sub(a)).collect();
    if all.is_empty() {
        return Vec::new();
    }
    all.sort_unstable();
    let median = all[all.len() / 2];
    let mut by_window: std::collections::BTreeMap<u64, Vec<u64>> = std::collections::BTreeMap::new();
    for &(arrived, start) in waits {
        by_window
            .entry(arrived.saturating_sub(first) / SPELL_WINDOW_NS)
            .or_default()
            .push(start.saturating_sub(arrived));
    }
    let mut spells: Vec<(u64, u64)> = Vec::new();
    for (window, mut w) in by_window {
        if w.len() < SPELL_MIN_WAITS {
            continue;
        }
        w.sort_unstable();
        if w[w.len() / 2] < median.saturating_mul(SPELL_FACTOR).max(1) {
            continue;
        }
        let (from, to) = (first + window * SPELL_WINDOW_NS, first + (window + 1) * SPELL_WINDOW_NS);
        match spells.last_mut() {
            Some(last) if last.1 == from => last.1 = to,
            _ => spells.push((from, to)),
        }
    }
    let held_back: Vec<(u64, u64)> =
        submitted.iter().copied().filter(|&(due, at)| at.saturating_sub(due) >= SPELL_HELD_BACK_NS).collect();
    spells.retain(|&(from, to)| held_back.iter().any(|&(due, at)| due < to && at >= from));
    spells
}

/// The stalls among sleep overruns: `overruns` are (from, to, executor) per sleep task
/// whose run exceeded its length by more than [`STALL_MIN_OVERRUN_NS`] (from = when it
/// should have ended, to = when it did). Overlapping overruns are joined; a join of at
/// least [`STALL_MIN_EXECUTORS`] executors is a stall, from its first overrun's start to
/// its last one's end: every thread that should have woken in it woke at its end. Returns
/// the stalls as (from, to) in order, and for each overrun whether it lies in one.
pub fn machine_stalls(overruns: &[(u64, u64, (u16, u16))]) -> (Vec<(u64, u64)>, Vec<bool>) {
    let mut order: Vec<usize> = (0..overruns.len()).collect();
    order.sort_unstable_by_key(|&i| overruns[i].0);
    let mut stalls = Vec::new();
    let mut member = vec![false; overruns.len()];
    let mut join: Vec<usize> = Vec::new();
    let mut end = 0u64;
    let mut close = |join: &mut Vec<usize>, member: &mut Vec<bool>| {
        let executors: std::collections::HashSet<(u16, u16)> = join.iter().map(|&i| overruns[i].2).collect();
        if executors.len() >= STALL_MIN_EXECUTORS {
            let from = join.iter().map(|&i| overruns[i].0).min().unwrap_or(0);
            let to = join.iter().map(|&i| overruns[i].1).max().unwrap_or(0);
            stalls.push((from, to));
            for &i in join.iter() {
                member[i] = true;
            }
        }
        join.clear();
    };
    for i in order {
        let (from, to, _) = overruns[i];
        if !join.is_empty() && from > end {
            close(&mut join, &mut member);
        }
        end = if join.is_empty() { to } else { end.max(to) };
        join.push(i);
    }
    close(&mut join, &mut member);
    (stalls, member)
}

impl ThreadTimes {
    /// These times with the software switch thread's of the same run.
    pub fn with_switch(self, switch: &crate::switch::ThreadStats) -> ThreadTimes {
        ThreadTimes {
            switch_wakeups: switch.wakeups,
            switch_wait_ns: switch.wakeup_ns.clone(),
            switch_resume_ns: switch.resume_ns.clone(),
            switch_handle_ns: switch.handle_ns.clone(),
            switch_handle_by_op_ns: switch.handle_by_op_ns.iter().map(|(op, q)| (op.to_string(), q.clone())).collect(),
            switch_send_ns: switch.send_ns.clone(),
            ..self
        }
    }

    /// Joins one client's task records (`uid`) with the executors' assignment records.
    /// A task without an arrival stamp, or whose start precedes it (clocks stepped),
    /// adds no wait; a task that is not a sleep adds no overshoot. Overshoots in a stall
    /// of the machine, and waits across one, are reported as the stall instead.
    /// `submitted` holds the clients' (due, submitted) times per job, for the spells.
    pub fn of_run<'a>(
        runs: impl IntoIterator<Item = (u32, &'a [TaskRecord])>,
        assignments: &'a [AssignmentRecord],
        submitted: &[(u64, u64)],
    ) -> ThreadTimes {
        let joined: Vec<_> = with_assignments(runs, assignments).collect();
        let Some(first_send) = joined.iter().map(|(_, t, _)| t.first_sent_unix_ns).min() else {
            return ThreadTimes::default();
        };
        // (start, end) of each wait, and of each sleep's overshoot, with its executor.
        let (mut waits, mut overshoots, mut before) = (Vec::new(), Vec::new(), Vec::new());
        for (_, t, a) in &joined {
            let Some(a) = a else { continue };
            if a.arrived_unix_ns > 0 && t.start_unix_ns >= a.arrived_unix_ns {
                waits.push((a.arrived_unix_ns, t.start_unix_ns));
                before.push(a.arrived_unix_ns.saturating_sub(t.first_sent_unix_ns));
            }
            if let Some(sleep) = a.sleep_ns {
                let due = t.start_unix_ns + sleep;
                overshoots.push((due, due.max(t.start_unix_ns + u64::from(t.run_ns)), (t.node, t.executor)));
            }
        }
        let overruns: Vec<usize> =
            (0..overshoots.len()).filter(|&i| overshoots[i].1 - overshoots[i].0 > STALL_MIN_OVERRUN_NS).collect();
        let (stalls, member) = machine_stalls(&overruns.iter().map(|&i| overshoots[i]).collect::<Vec<_>>());
        let mut in_stall = vec![false; overshoots.len()];
        for (k, &i) in overruns.iter().enumerate() {
            in_stall[i] = member[k];
        }
        let overlaps = |(from, to): (u64, u64)| stalls.iter().any(|&(s, e)| from < e && to > s);
        let mut wait_ns: Vec<Nanos> = waits.iter().filter(|&&w| !overlaps(w)).map(|&(a, b)| b - a).collect();
        let mut overshoot_ns: Vec<Nanos> =
            overshoots.iter().zip(&in_stall).filter(|(_, &m)| !m).map(|(&(a, b, _), _)| b - a).collect();
        let mut client_late_ns: Vec<Nanos> = submitted
            .iter()
            .filter(|&&(due, at)| !overlaps((due, at.max(due + 1))))
            .map(|&(due, at)| at.saturating_sub(due))
            .collect();
        ThreadTimes {
            waits: wait_ns.len(),
            sleeps: overshoot_ns.len(),
            wait_ns: quantiles(&mut wait_ns),
            overshoot_ns: quantiles(&mut overshoot_ns),
            before_arrival_ns: quantiles(&mut before),
            client_late_ns: quantiles(&mut client_late_ns),
            stalls: stalls
                .iter()
                .map(|&(from, to)| Stall { at_ns: from.saturating_sub(first_send), len_ns: to - from })
                .collect(),
            spell_span_ns: waits
                .iter()
                .map(|&(arrived, _)| arrived)
                .max()
                .unwrap_or(first_send)
                .saturating_sub(first_send),
            spells: slow_spells(&waits, first_send, submitted)
                .iter()
                .map(|&(from, to)| Stall { at_ns: from - first_send, len_ns: to - from })
                .collect(),
            ..ThreadTimes::default()
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
        let t = ThreadTimes::of_run([(7, &runs[..]), (8, &other[..])], &assignments, &[]);
        assert_eq!((t.waits, t.sleeps), (2, 2));
        let at = |q: &[(f64, Nanos)], p: f64| q.iter().find(|(x, _)| *x == p).map(|(_, v)| *v);
        assert_eq!((at(&t.wait_ns, 0.0), at(&t.wait_ns, 1.0)), (Some(500), Some(3_000)));
        assert_eq!((at(&t.overshoot_ns, 0.0), at(&t.overshoot_ns, 1.0)), (Some(100), Some(2_000)));
        assert_eq!((at(&t.before_arrival_ns, 0.0), at(&t.before_arrival_ns, 1.0)), (Some(1_000), Some(4_000)));
        assert!(t.stalls.is_empty());
    }

    /// Overruns of 4 executors that overlap are a stall, from the first's start to the
    /// last's end; 3 executors' are not, nor are one executor's twice.
    #[test]
    fn overruns_of_several_executors_at_once_are_a_stall() {
        let ms = 1_000_000u64;
        let e = |i: u16| (1u16, i);
        let four =
            [(10 * ms, 13 * ms, e(0)), (11 * ms, 13 * ms, e(1)), (12 * ms, 14 * ms, e(2)), (13 * ms, 14 * ms, e(3))];
        let (stalls, member) = machine_stalls(&four);
        assert_eq!((stalls, member), (vec![(10 * ms, 14 * ms)], vec![true; 4]));
        let (stalls, member) = machine_stalls(&four[..3]);
        assert_eq!((stalls, member), (vec![], vec![false; 3]));
        let same =
            [(10 * ms, 13 * ms, e(0)), (11 * ms, 13 * ms, e(0)), (12 * ms, 14 * ms, e(1)), (13 * ms, 14 * ms, e(2))];
        assert!(machine_stalls(&same).0.is_empty());
        // Two separate stalls, in time order whatever the input's.
        let mut two: Vec<_> = four.iter().map(|&(a, b, x)| (a + 100 * ms, b + 100 * ms, x)).collect();
        two.extend(four);
        assert_eq!(machine_stalls(&two).0, vec![(10 * ms, 14 * ms), (110 * ms, 114 * ms)]);
    }

    /// A run's stall is reported from its first send; the sleeps in it leave the
    /// overshoot's quantiles, a wait across it the wait's, and a job sent in it the
    /// clients' lateness.
    #[test]
    fn thread_times_replace_a_stalls_overshoots_by_the_stall() {
        let ms = 1_000_000u64;
        // Six 10-ms sleeps sent at 1 ms on executors 0..6. Four started at 2 ms and ran
        // 13 ms: due at 12 ms, they ended at 15 (the stall: 11 ms after the first send, 3
        // ms long). One started at 2 ms and ran 10.1 ms; one arrived at 5 ms and started
        // at 15 ms (a wait across the stall).
        let mut records = Vec::new();
        let mut assignments = Vec::new();
        for tid in 0..6u32 {
            let (start, run) = match tid {
                0..=3 => (2 * ms, 13 * ms),
                4 => (2 * ms, 10 * ms + 100_000),
                _ => (15 * ms, 10 * ms),
            };
            let arrived = if tid == 5 { 5 * ms } else { 2 * ms - 1_000 };
            records.push(TaskRecord { executor: tid as u16, ..record(1, tid, ms, start, run as u32) });
            assignments.push(assignment(7, 1, tid, arrived, Some(10 * ms)));
        }
        // Three jobs: one sent 0.3 ms late, one due at 13 ms and sent at 14 (in the
        // stall, which is replayed instead), one sent 0.7 ms late.
        let submitted = [(ms, ms + 300_000), (13 * ms, 14 * ms), (20 * ms, 20 * ms + 700_000)];
        let t = ThreadTimes::of_run([(7, &records[..])], &assignments, &submitted);
        assert_eq!(t.stalls, vec![Stall { at_ns: 11 * ms, len_ns: 3 * ms }]);
        assert_eq!((t.sleeps, t.waits), (2, 5));
        let at = |q: &[(f64, Nanos)], p: f64| q.iter().find(|(x, _)| *x == p).map(|(_, v)| *v);
        assert_eq!(at(&t.overshoot_ns, 1.0), Some(100_000));
        assert_eq!(at(&t.wait_ns, 1.0), Some(1_000));
        assert_eq!((at(&t.client_late_ns, 0.0), at(&t.client_late_ns, 1.0)), (Some(300_000), Some(700_000)));
    }

    /// Windows whose median wait is four times the run's are spells, adjacent ones
    /// joined, if a client was held back in them; a window with fewer than three waits
    /// is not judged.
    #[test]
    fn windows_of_long_waits_are_slow_spells() {
        let ms = 1_000_000u64;
        let first = 1_000 * ms;
        // 100 µs waits everywhere; 500 µs in windows 2 and 3 (joined) and 5; a single
        // 5 ms wait in window 7 (too few to judge).
        let mut waits = Vec::new();
        for window in 0..9u64 {
            let wait = if matches!(window, 2 | 3 | 5) { 500_000 } else { 100_000 };
            for k in 0..4 {
                let arrived = first + window * SPELL_WINDOW_NS + k * ms;
                waits.push((arrived, arrived + wait));
            }
        }
        let lone = first + 7 * SPELL_WINDOW_NS + 9 * ms;
        waits.retain(|&(a, _)| a < first + 7 * SPELL_WINDOW_NS || a >= first + 8 * SPELL_WINDOW_NS);
        waits.push((lone, lone + 5 * ms));
        let w = SPELL_WINDOW_NS;
        // A client held back 3 ms from 35 ms into the run (in the joined windows 2 and 3),
        // one 1 ms late in window 5 (its timer's slack), one 4 ms late in window 0.
        let held = |due: u64, late: u64| (first + due * ms, first + (due + late) * ms);
        let submitted = [held(3, 4), held(35, 3), held(51, 1)];
        assert_eq!(slow_spells(&waits, first, &submitted), vec![(first + 2 * w, first + 4 * w)]);
        // A job due before a spell and submitted in it counts.
        assert_eq!(
            slow_spells(&waits, first, &[held(48, 3)]),
            vec![(first + 5 * w, first + 6 * w)],
            "due at 48 ms, submitted at 51 ms, in window 5"
        );
        assert!(slow_spells(&waits, first, &[]).is_empty(), "no client held back: no spell");
        assert!(slow_spells(&[], first, &submitted).is_empty());
    }
}

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

use std::collections::VecDeque;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::clock::Nanos;

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

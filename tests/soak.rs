//! The soak: a cluster on a namespace testbed (switch, worker host with the XDP program
//! and its agent, one executor process, each a process of its own) kept at 90 %
//! utilisation for BOLT_SOAK_SECS seconds (default 60, the CI variant; the full run is
//! 600). It must lose no task (every task Done exactly once from the client's view) and
//! keep every process's memory flat: resident set sizes are sampled every second, and
//! the last sample may exceed the one taken after warm-up by at most 10 % plus 4 MiB.
//!
//!     BOLT_SOAK_SECS=600 cargo test --release -p bolt-tests --test soak -- --nocapture
//!
//! Needs root, iproute2 and nftables: skipped without, failed without under CI=true.

use std::time::{Duration, Instant};

use bolt_tests::cluster::{cluster_can_run, Cluster, Workload, DEADLINE};
use scheduler_common::descriptor::Handler;

const EXECUTORS: u16 = 8;
const TASK: Duration = Duration::from_millis(50);
const TASKS_PER_JOB: usize = 16;
const UTILISATION: f64 = 0.9;

fn soak_seconds() -> u64 {
    std::env::var("BOLT_SOAK_SECS").ok().and_then(|s| s.parse().ok()).filter(|s| *s >= 10).unwrap_or(60)
}

/// RSS samples of one process, in KiB.
struct Samples {
    role: &'static str,
    kib: Vec<u64>,
}

impl Samples {
    fn report(&self, warm: usize) -> (u64, u64, u64) {
        let warm = self.kib.get(warm).or(self.kib.first()).copied().unwrap_or(0);
        let end = self.kib.last().copied().unwrap_or(0);
        let max = self.kib.iter().copied().max().unwrap_or(0);
        println!(
            "{}: RSS start {} KiB, after warm-up {warm} KiB, end {end} KiB, max {max} KiB ({} samples)",
            self.role,
            self.kib.first().copied().unwrap_or(0),
            self.kib.len()
        );
        (warm, end, max)
    }
}

#[test]
fn soak_at_90_percent_utilisation_loses_nothing_and_memory_stays_flat() {
    if !cluster_can_run() {
        return;
    }
    let seconds = soak_seconds();
    let mut c = Cluster::new(env!("CARGO_BIN_EXE_bolt-role"), 1);
    c.start_switch(&[]);
    c.start_agent(&["--low-watermark", "64", "--batch", "64"]);
    c.start_executors(0, EXECUTORS, &[]);

    // Jobs of 16 tasks at the pace that keeps the executors 90 % busy.
    let rate = UTILISATION * EXECUTORS as f64 / TASK.as_secs_f64();
    let interval = Duration::from_secs_f64(TASKS_PER_JOB as f64 / rate);
    let jobs = (seconds as f64 / interval.as_secs_f64()) as u32;
    let work = Workload::new(
        jobs,
        TASKS_PER_JOB,
        interval,
        Handler::Sleep { micros: TASK.as_micros() as u32 },
        Duration::from_secs(10),
    );
    println!(
        "soak: {seconds} s, {jobs} jobs of {TASKS_PER_JOB} x {TASK:?} tasks every {interval:?} ({rate:.0} tasks/s)"
    );
    let started = Instant::now();
    let client = c.client(work);

    let mut samples = [
        Samples { role: "switch", kib: Vec::new() },
        Samples { role: "agent", kib: Vec::new() },
        Samples { role: "executor", kib: Vec::new() },
    ];
    let limit = Duration::from_secs(seconds) + DEADLINE;
    while !client.is_finished() && started.elapsed() < limit {
        let processes = [c.switch.as_ref(), c.agent.as_ref(), c.executors.first()];
        for (s, p) in samples.iter_mut().zip(processes) {
            if let Some(kib) = p.and_then(|p| p.rss_kib()) {
                s.kib.push(kib);
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let outcome = client.join().expect("client thread").expect("client");
    let wall = started.elapsed();
    outcome.assert_nothing_lost(&format!("soak of {seconds} s"));
    let s = &outcome.summary;
    println!(
        "soak: {} tasks in {:.1} s, {:.0} tasks/s, utilisation {:.1} %, p50 run {:.0} us, p50 scheduling delay \
         {:.0} us, p99 {:.0} us",
        s.completed,
        wall.as_secs_f64(),
        s.throughput_tasks_per_s,
        100.0 * s.throughput_tasks_per_s * TASK.as_secs_f64() / EXECUTORS as f64,
        s.p50_run_us,
        s.p50_sched_delay_us,
        s.p99_sched_delay_us
    );
    // Warm-up: a tenth of the run, at least 5 samples.
    let warm = (seconds as usize / 10).max(5);
    for s in &samples {
        assert!(s.kib.len() > warm, "{}: only {} RSS samples", s.role, s.kib.len());
        let (warm_kib, end, _) = s.report(warm);
        assert!(end <= warm_kib + warm_kib / 10 + 4096, "{}: RSS grew from {warm_kib} KiB to {end} KiB", s.role);
    }
}

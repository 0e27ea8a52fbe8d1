//! The experiments' workloads: the seeded Google-cluster-like trace generator, and the
//! replay of a list of timed jobs through one client.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scheduler_common::descriptor::Handler;
use serde::{Deserialize, Serialize};

use crate::client::{Client, ClientConfig, Summary, TaskRecord, TaskSpec};
use crate::executor::unix_now_ns;

/// A job and when (after the start of the replay) it is submitted.
#[derive(Clone, Debug)]
pub struct TimedJob {
    pub at: Duration,
    pub tasks: Vec<TaskSpec>,
}

/// What the handler of every task of a trace does for its duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Work {
    /// Integer arithmetic (occupies a CPU), as the thesis's CPU-intensive executors.
    Spin,
    /// Sleep (no CPU), as the thesis's sleep executors.
    Sleep,
}

impl Work {
    pub fn handler(self, micros: u32) -> Handler<'static> {
        match self {
            Work::Spin => Handler::Spin { micros },
            Work::Sleep => Handler::Sleep { micros },
        }
    }
}

/// Parameters of the Google-cluster-like trace (thesis §5.1.3: a sample of the Google
/// trace accelerated to the cluster, median task 5 ms, 12 priorities folded into 4).
///
/// Jobs arrive in a Poisson process; each arrival is, with `burst_probability`, a burst
/// of jobs at the same instant holding `burst_tasks_per_executor` (uniform in the range)
/// tasks per executor on average, at least 2 jobs (the trace's bursts of hundreds of
/// tasks on 176 executors, scaled to the cluster as the thesis scaled its sampling).
/// Tasks per job are geometric with mean `mean_tasks_per_job` (at most
/// `max_tasks_per_job`); task durations are log-normal with median `median_task_ms` and
/// shape `sigma`, clamped to `min_task_ms..=max_task_ms`. A job's priority is drawn
/// from `priority_shares` (percent for levels 1..=4). The arrival rate is set so the
/// offered work is `load` × `executors` over the trace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraceParams {
    pub seed: u64,
    pub seconds: f64,
    pub executors: u32,
    pub load: f64,
    pub median_task_ms: f64,
    pub sigma: f64,
    pub min_task_ms: f64,
    pub max_task_ms: f64,
    pub mean_tasks_per_job: f64,
    pub max_tasks_per_job: u32,
    pub burst_probability: f64,
    pub burst_tasks_per_executor: (f64, f64),
    pub priority_shares: [f64; 4],
    /// All tasks at priority 1 (the FIFO baseline of thesis Figure 15).
    pub fifo: bool,
}

impl TraceParams {
    /// The defaults documented in docs/benchmarks.md.
    pub fn new(seed: u64, seconds: f64, executors: u32, load: f64) -> TraceParams {
        TraceParams {
            seed,
            seconds,
            executors,
            load,
            median_task_ms: 5.0,
            sigma: 1.0,
            min_task_ms: 0.1,
            max_task_ms: 100.0,
            mean_tasks_per_job: 8.0,
            max_tasks_per_job: 200,
            burst_probability: 0.05,
            burst_tasks_per_executor: (0.5, 2.0),
            priority_shares: [1.2, 1.7, 64.6, 32.2],
            fifo: false,
        }
    }
}

/// The generated trace: jobs and their tasks' durations in µs.
#[derive(Clone, Debug)]
pub struct Trace {
    pub jobs: Vec<(Duration, u8, Vec<u32>)>,
}

impl Trace {
    pub fn generate(p: &TraceParams) -> anyhow::Result<Trace> {
        anyhow::ensure!(p.seconds > 0.0 && p.load > 0.0 && p.executors > 0, "trace needs time, load and executors");
        let (lo, hi) = p.burst_tasks_per_executor;
        anyhow::ensure!(p.mean_tasks_per_job >= 1.0 && lo > 0.0 && lo <= hi, "bad trace parameters");
        let burst_jobs = |x: f64| (x * p.executors as f64 / p.mean_tasks_per_job).round().max(2.0);
        let mut rng = StdRng::seed_from_u64(p.seed);
        // The mean of the clamped log-normal, estimated from its own stream of draws.
        let mut est = StdRng::seed_from_u64(p.seed ^ 0x5eed);
        let mean_task_s = (0..20_000).map(|_| duration_us(&mut est, p) as f64).sum::<f64>() / 20_000.0 / 1e6;
        let mean_burst = (burst_jobs(lo) + burst_jobs(hi)) / 2.0;
        let jobs_per_arrival = 1.0 - p.burst_probability + p.burst_probability * mean_burst;
        let work_per_arrival_s = jobs_per_arrival * p.mean_tasks_per_job * mean_task_s;
        let arrivals_per_s = p.load * p.executors as f64 / work_per_arrival_s;
        let mut jobs = Vec::new();
        let mut t = 0.0f64;
        loop {
            t += -(1.0 - rng.gen::<f64>()).ln() / arrivals_per_s;
            if t >= p.seconds {
                break;
            }
            let burst = if rng.gen_bool(p.burst_probability) { burst_jobs(rng.gen_range(lo..=hi)) as u32 } else { 1 };
            for _ in 0..burst {
                let n = geometric(&mut rng, p.mean_tasks_per_job).min(p.max_tasks_per_job);
                let prio = if p.fifo { 1 } else { pick_priority(&mut rng, &p.priority_shares) };
                let durations = (0..n).map(|_| duration_us(&mut rng, p)).collect();
                jobs.push((Duration::from_secs_f64(t), prio, durations));
            }
        }
        Ok(Trace { jobs })
    }

    pub fn tasks(&self) -> usize {
        self.jobs.iter().map(|j| j.2.len()).sum()
    }

    /// The jobs as a client submits them, each task running `work`.
    pub fn timed_jobs(&self, work: Work) -> anyhow::Result<Vec<TimedJob>> {
        self.jobs
            .iter()
            .map(|(at, prio, durations)| {
                let tasks =
                    durations.iter().map(|&us| TaskSpec::new(work.handler(us), *prio, 0)).collect::<Result<_, _>>()?;
                Ok(TimedJob { at: *at, tasks })
            })
            .collect()
    }
}

fn duration_us(rng: &mut StdRng, p: &TraceParams) -> u32 {
    // Box–Muller: one standard normal from two uniforms.
    let (u1, u2) = (1.0 - rng.gen::<f64>(), rng.gen::<f64>());
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let ms = (p.median_task_ms.ln() + p.sigma * z).exp().clamp(p.min_task_ms, p.max_task_ms);
    (ms * 1000.0).round() as u32
}

/// Geometric on 1, 2, ... with the given mean.
fn geometric(rng: &mut StdRng, mean: f64) -> u32 {
    if mean <= 1.0 {
        return 1;
    }
    let p = 1.0 / mean;
    let u = 1.0 - rng.gen::<f64>();
    (u.ln() / (1.0 - p).ln()).ceil().max(1.0) as u32
}

fn pick_priority(rng: &mut StdRng, shares: &[f64; 4]) -> u8 {
    let total: f64 = shares.iter().sum();
    let mut x = rng.gen::<f64>() * total;
    for (i, s) in shares.iter().enumerate() {
        if x < *s {
            return i as u8 + 1;
        }
        x -= s;
    }
    4
}

/// A client configured for benchmarks: per-task records, a window and a task timeout
/// large enough that deep queues cause no resubmission.
pub fn bench_client_config(switch: SocketAddr) -> ClientConfig {
    let mut cfg = ClientConfig::new(switch);
    cfg.tracker.record_tasks = true;
    cfg.tracker.window = 1 << 16;
    cfg.tracker.task_timeout = Duration::from_secs(120);
    cfg
}

/// What a replay came to.
pub struct Replayed {
    pub uid: u32,
    pub summary: Summary,
    pub records: Vec<TaskRecord>,
    /// Each job's completion time (added → last task final), in submission order of finishing.
    pub job_ms: Vec<f64>,
    /// Each job's (due, submitted) wall-clock times, ns: how late the client's own thread
    /// got to it, which a stall of the whole machine makes late (`calibrate::slow_spells`).
    pub submitted: Vec<(u64, u64)>,
}

/// Submits `jobs` at their times through one client and waits (until `deadline` after
/// the last submission) for every task to be final.
pub async fn replay(cfg: ClientConfig, jobs: &[TimedJob], drain: Duration) -> anyhow::Result<Replayed> {
    let uid = cfg.tracker.uid;
    let mut client = Client::bind(cfg).await?;
    let (start, start_unix_ns) = (Instant::now(), unix_now_ns());
    let mut job_ms = Vec::new();
    let mut submitted = Vec::with_capacity(jobs.len());
    for job in jobs {
        client.drive_until(start + job.at).await?;
        submitted.push((start_unix_ns + job.at.as_nanos() as u64, unix_now_ns()));
        client.submit(&job.tasks).await?;
        job_ms.extend(client.take_finished().iter().map(|r| r.elapsed.as_secs_f64() * 1e3));
    }
    let deadline = Instant::now() + drain;
    client.wait_idle(deadline).await?;
    job_ms.extend(client.take_finished().iter().map(|r| r.elapsed.as_secs_f64() * 1e3));
    Ok(Replayed { uid, summary: client.summary(), records: client.take_records(), job_ms, submitted })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_is_seeded_and_has_the_documented_shape() {
        let p = TraceParams::new(7, 60.0, 32, 0.7);
        let a = Trace::generate(&p).unwrap();
        let b = Trace::generate(&p).unwrap();
        assert_eq!(a.jobs, b.jobs, "same seed, same trace");
        let mut d: Vec<u32> = a.jobs.iter().flat_map(|j| j.2.iter().copied()).collect();
        d.sort();
        let median_ms = d[d.len() / 2] as f64 / 1000.0;
        assert!((4.5..5.5).contains(&median_ms), "median task {median_ms} ms");
        // Offered work within 15 % of load × executors × seconds.
        let work_s: f64 = d.iter().map(|&us| us as f64 / 1e6).sum();
        let offered = work_s / (32.0 * 60.0);
        assert!((0.6..0.8).contains(&offered), "offered load {offered}");
        // Priority shares near 1.2 / 1.7 / 64.6 / 32.2 % of jobs.
        let share = |p: u8| a.jobs.iter().filter(|j| j.1 == p).count() as f64 / a.jobs.len() as f64 * 100.0;
        assert!((share(3) - 64.6).abs() < 3.0 && (share(4) - 32.2).abs() < 3.0, "{} {}", share(3), share(4));
        assert!(share(1) > 0.3 && share(1) < 3.0);
        // Bursts: some instants carry several jobs.
        assert!(a.jobs.windows(2).any(|w| w[0].0 == w[1].0));
        let fifo = Trace::generate(&TraceParams { fifo: true, ..p }).unwrap();
        assert!(fifo.jobs.iter().all(|j| j.1 == 1));
    }
}

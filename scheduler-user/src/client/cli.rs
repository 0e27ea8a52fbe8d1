//! `bolt submit`: submit jobs from the command line and report what happened.

use std::io::IsTerminal;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use scheduler_common::descriptor::{valid_exec_name, Handler};

use super::monitor::MonitorConfig;
use super::{Client, ClientConfig, Summary, TaskSpec, TrackerConfig};
use crate::executor::{parse_addr, parse_resources};
use crate::placement::{InputObject, PlacementPolicy, Threshold};

/// Which registered handler the tasks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HandlerKind {
    /// Return at once (measures pure scheduling cost).
    Noop,
    /// Sleep --duration-us microseconds.
    Sleep,
    /// Burn CPU for --duration-us microseconds.
    Spin,
    /// Run the command the executors allow under --command NAME.
    Exec,
}

/// Arguments of `bolt submit`.
#[derive(Args, Debug, Clone)]
pub struct SubmitArgs {
    /// Switch to submit to, as IP:PORT, IP or HOST[:PORT] (port defaults to 7171).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = "127.0.0.1:7171")]
    pub switch: SocketAddr,

    /// Tasks per job.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tasks: u32,

    /// Handler every task runs.
    #[arg(long, value_name = "H", value_enum)]
    pub handler: HandlerKind,

    /// How long each sleep or spin task runs, in microseconds.
    #[arg(long, value_name = "D", default_value_t = 0)]
    pub duration_us: u32,

    /// For --handler exec: the name the executors allow with --allow-exec NAME=...
    #[arg(long, value_name = "NAME")]
    pub command: Option<String>,

    /// Task priority, 1 (highest) to 8 (the switch runs 1..=4 unless configured otherwise).
    #[arg(long, value_name = "P", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub priority: u8,

    /// Resources each task needs, as an 8-bit bitmap; it runs only on executors that
    /// offer every bit. Decimal, 0x hex or 0b binary.
    #[arg(long, value_name = "BITS", default_value = "0", value_parser = parse_resources)]
    pub resources: u8,

    /// Task class (for per-class accounting).
    #[arg(long, value_name = "C", default_value_t = 0)]
    pub class: u8,

    /// Run each task at most once per attempt: executors claim it from this client
    /// before running it, and a duplicate delivery is dropped unrun (one more round trip
    /// per task; `bolt bench claims` measures it).
    #[arg(long)]
    pub exactly_once: bool,

    /// How long a claim on an exactly-once task holds without a renewal, in
    /// milliseconds (at least 750). An executor renews every 250 ms while it runs the
    /// task; when the lease lapses (the executor died) the task is resent at once.
    #[arg(long, value_name = "MS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(scheduler_common::MIN_CLAIM_LEASE_MS..))]
    pub claim_lease_ms: u64,

    /// Failure alarm: Failed tasks added within one monitoring interval that raise it
    /// (a warning log line and the metric `failed_surge_alarms`).
    #[arg(long, value_name = "N", default_value_t = MonitorConfig::default().failed_surge)]
    pub alarm_failed: u64,

    /// Scale-up signal: Pending growth within one monitoring interval that counts as sharp.
    #[arg(long, value_name = "N", default_value_t = MonitorConfig::default().pending_growth)]
    pub scale_up_growth: u64,

    /// Scale-up signal: sharp intervals in a row that raise it.
    #[arg(long, value_name = "N", default_value_t = MonitorConfig::default().sustain)]
    pub scale_up_intervals: u32,

    /// The monitoring interval, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub monitor_interval_ms: u64,

    /// Number of jobs to submit.
    #[arg(long, value_name = "J", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,

    /// Time between the starts of consecutive jobs, in milliseconds (0: all at once).
    #[arg(long, value_name = "I", default_value_t = 0)]
    pub interval_ms: u64,

    /// A task not complete this long after it was sent is resubmitted (or, on its last
    /// attempt, failed), in milliseconds. Cover the queueing time of a deep queue.
    #[arg(long, value_name = "MS", default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,

    /// Attempts per task: a failed, refused or timed-out attempt is resubmitted until
    /// this many have been made; QUEUE_FULL bounces do not count.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..))]
    pub max_attempts: u8,

    /// Most tasks in flight (sent, not complete) at once.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub window: u32,

    /// First back-off after QUEUE_FULL, in microseconds; it doubles per bounce of the
    /// same task, up to 20 ms.
    #[arg(long, value_name = "US", default_value_t = 200)]
    pub queue_full_backoff_us: u64,

    /// QUEUE_FULL bounces after which a task is failed.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_queue_full_bounces: u32,

    /// Give up on tasks not final after this many seconds; they count as unfinished.
    #[arg(long, value_name = "S", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub deadline_s: u64,

    /// User id carried in SUBMIT (default: random).
    #[arg(long, value_name = "UID")]
    pub uid: Option<u32>,

    /// Local IP to send from (COMPLETE, QUEUE_FULL and CLAIM come back to it; default:
    /// the address the route to the switch leaves from).
    #[arg(long, value_name = "IP")]
    pub bind: Option<IpAddr>,

    /// Print one JSON object instead of the readable summary.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub placement: PlacementArgs,

    /// An input object the tasks declare, for placement: NODE:BYTES, the host that holds
    /// it and its size (repeat; task i of a job declares the (i mod n)-th). The handlers
    /// named here do not read it.
    #[arg(long = "input", value_name = "NODE:BYTES", value_parser = parse_input)]
    pub inputs: Vec<InputObject>,

    /// Serve the running summary (scheduling delay percentiles, tasks done) and the job
    /// queue (tasks per state and per resource, failure alarm, scale-up signal) over HTTP
    /// at this address, /stats (JSON) and /metrics (Prometheus), for `bolt top --client`
    /// and `bolt jobs`.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    #[command(flatten)]
    pub learned: crate::rlq::PolicyArgs,
}

/// Data-aware placement options, shared by `bolt submit` and `bolt dag`.
#[derive(Args, Debug, Clone)]
pub struct PlacementArgs {
    /// Place tasks by their inputs with MATRIX's Algorithm 1 (docs/data.md): each job's
    /// tasks under `bolt submit`, each released task under `bolt dag`. mlb shares everything (SUBMIT to tier 2), mdl pins every task with input data to
    /// its largest input's host (PIN to that host's agent), rlds and flds pin when the
    /// data would move faster than the threshold, and flds lets the host move pinned
    /// tasks to its shared rings. Without it, every task is submitted to tier 2.
    #[arg(long, value_name = "POLICY", value_enum)]
    pub placement: Option<PlacementKind>,

    /// RLDS/FLDS threshold t as a fraction of the link bandwidth (MATRIX: 10 %).
    #[arg(long, value_name = "F", default_value_t = crate::placement::DEFAULT_RLDS_FRACTION)]
    pub threshold_fraction: f64,

    /// The link bandwidth the threshold is a fraction of, in Gbit/s (MATRIX: 10).
    #[arg(long, value_name = "G", default_value_t = 10.0)]
    pub link_gbps: f64,

    /// A host's agent, where tasks placed on it go: NODE=ADDR (repeat; port defaults to
    /// 7171).
    #[arg(long = "agent", value_name = "NODE=ADDR", value_parser = parse_agent)]
    pub agents: Vec<(u16, SocketAddr)>,
}

impl PlacementArgs {
    /// The placement policy, if placement is on.
    pub fn policy(&self) -> anyhow::Result<Option<PlacementPolicy>> {
        let Some(kind) = self.placement else { return Ok(None) };
        let t = Threshold::fraction_of_link(self.threshold_fraction, self.link_gbps * 1e9 / 8.0)
            .ok_or_else(|| anyhow::anyhow!("the threshold must be a non-negative rate"))?;
        Ok(Some(match kind {
            PlacementKind::Mlb => PlacementPolicy::Mlb,
            PlacementKind::Mdl => PlacementPolicy::Mdl,
            PlacementKind::Rlds => PlacementPolicy::Rlds(t),
            PlacementKind::Flds => PlacementPolicy::Flds(t),
        }))
    }

    /// The agents as the client's configuration takes them.
    pub fn agent_map(&self) -> std::collections::BTreeMap<u16, SocketAddr> {
        self.agents.iter().copied().collect()
    }
}

/// The placement policies `--placement` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlacementKind {
    Mlb,
    Mdl,
    Rlds,
    Flds,
}

fn parse_input(s: &str) -> Result<InputObject, String> {
    let (node, size) = s.split_once(':').ok_or("expected NODE:BYTES")?;
    let host = node.parse().map_err(|e| format!("node {node:?}: {e}"))?;
    let size = size.parse().map_err(|e| format!("size {size:?}: {e}"))?;
    Ok(InputObject { host, size })
}

fn parse_agent(s: &str) -> Result<(u16, SocketAddr), String> {
    let (node, addr) = s.split_once('=').ok_or("expected NODE=ADDR")?;
    let node = node.parse().map_err(|e| format!("node {node:?}: {e}"))?;
    Ok((node, parse_addr(addr)?))
}

impl SubmitArgs {
    /// The task every job is made of.
    pub fn task(&self) -> anyhow::Result<TaskSpec> {
        let name = self.command.as_deref().unwrap_or("");
        let handler = match self.handler {
            HandlerKind::Noop => Handler::Noop,
            HandlerKind::Sleep => Handler::Sleep { micros: self.duration_us },
            HandlerKind::Spin => Handler::Spin { micros: self.duration_us },
            HandlerKind::Exec => {
                if self.command.is_none() {
                    anyhow::bail!("--handler exec needs --command NAME");
                }
                if !valid_exec_name(name.as_bytes()) {
                    anyhow::bail!("--command {name:?}: 1 to 14 characters of A-Z a-z 0-9 _ . -");
                }
                Handler::Exec { name: name.as_bytes() }
            }
        };
        if self.command.is_some() && self.handler != HandlerKind::Exec {
            anyhow::bail!("--command is only for --handler exec");
        }
        let mut spec = TaskSpec::new(handler, self.priority, self.resources)?;
        spec.class = self.class;
        spec.exactly_once = self.exactly_once;
        Ok(spec)
    }

    pub fn to_config(&self) -> ClientConfig {
        let mut tracker = TrackerConfig::new(self.uid.unwrap_or_else(rand::random));
        tracker.task_timeout = Duration::from_millis(self.timeout_ms);
        tracker.max_attempts = self.max_attempts;
        tracker.window = self.window as usize;
        tracker.queue_full_backoff = Duration::from_micros(self.queue_full_backoff_us);
        tracker.max_queue_full_bounces = self.max_queue_full_bounces;
        tracker.claim_lease = Duration::from_millis(self.claim_lease_ms);
        tracker.monitor = MonitorConfig {
            interval: Duration::from_millis(self.monitor_interval_ms),
            failed_surge: self.alarm_failed,
            pending_growth: self.scale_up_growth,
            sustain: self.scale_up_intervals,
        };
        ClientConfig {
            switch: self.switch,
            bind: self.bind.map(|ip| SocketAddr::new(ip, 0)),
            tracker,
            agents: self.placement.agent_map(),
        }
    }
}

/// Runs `bolt submit`. Fails (non-zero exit) when any task failed or did not finish.
pub fn run(args: SubmitArgs) -> anyhow::Result<()> {
    let spec = args.task()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let summary = runtime.block_on(submit_jobs(&args, spec))?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary);
    }
    if summary.failed > 0 || summary.unfinished > 0 {
        anyhow::bail!("{} tasks failed, {} did not finish", summary.failed, summary.unfinished);
    }
    Ok(())
}

async fn submit_jobs(args: &SubmitArgs, spec: TaskSpec) -> anyhow::Result<Summary> {
    let mut client = Client::bind(args.to_config()).await?;
    if let Some(learned) = args.learned.learned()? {
        client.set_learned(learned);
    }
    let total = args.tasks as u64 * args.jobs as u64;
    tracing::info!(
        switch = %args.switch,
        local = %client.local_addr()?,
        uid = client.tracker().config().uid,
        jobs = args.jobs,
        tasks_per_job = args.tasks,
        "submitting"
    );
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::Relaxed);
        }
    });
    let progress = progress_bar(total);
    let report =
        |client: &Client| (client.summary(), client.tracker().jobs_report(), client.learned().map(|p| p.report()));
    let published = Arc::new(Mutex::new(report(&client)));
    let _metrics = match &args.metrics {
        Some(addr) => {
            let at = crate::metrics::parse_endpoint(addr, crate::metrics::CLIENT_PORT)?
                .ok_or_else(|| anyhow::anyhow!("--metrics off: leave it out instead"))?;
            let source = published.clone();
            let source: crate::metrics::StatsSource = Arc::new(move || {
                let Ok((summary, jobs, placement)) = source.lock().map(|s| s.clone()) else {
                    return serde_json::json!({});
                };
                serde_json::json!({ "client": summary, "jobs": jobs, "learned": placement })
            });
            crate::metrics::serve(Some(at), false, source)?
        }
        None => None,
    };
    let update = |bar: &ProgressBar, client: &Client| {
        update(bar, client);
        if _metrics.is_some() {
            if let Ok(mut p) = published.lock() {
                *p = report(client);
            }
        }
    };
    let specs = vec![spec; args.tasks as usize];
    let placement = args.placement.policy()?;
    anyhow::ensure!(placement.is_some() || args.inputs.is_empty(), "--input is for --placement");
    let inputs: Vec<Vec<InputObject>> = (0..args.tasks as usize)
        .map(|i| if args.inputs.is_empty() { Vec::new() } else { vec![args.inputs[i % args.inputs.len()]] })
        .collect();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.deadline_s);
    // Between jobs and while waiting, drive in short slices to update the progress bar
    // and notice ctrl-c.
    let slice = Duration::from_millis(100);
    'jobs: for j in 0..args.jobs {
        let at = start + Duration::from_millis(args.interval_ms.saturating_mul(j as u64));
        while Instant::now() < at {
            if interrupted.load(Ordering::Relaxed) || Instant::now() >= deadline {
                break 'jobs;
            }
            client.drive_until(at.min(Instant::now() + slice)).await?;
            update(&progress, &client);
        }
        match placement {
            Some(policy) => {
                client.add_placed_job(&specs, &inputs, policy)?;
                client.flush().await;
            }
            None => {
                client.submit(&specs).await?;
            }
        }
    }
    while !interrupted.load(Ordering::Relaxed) && Instant::now() < deadline {
        let idle = client.wait_idle(deadline.min(Instant::now() + slice)).await?;
        update(&progress, &client);
        if idle {
            break;
        }
    }
    progress.finish_and_clear();
    if interrupted.load(Ordering::Relaxed) {
        tracing::warn!("interrupted; unfinished tasks are reported as such");
    }
    if let Some(placement) = client.learned() {
        let r = placement.report();
        tracing::info!(
            policy = %r.policy,
            decisions = ?r.stats.decisions_per_type,
            rewards = r.stats.rewards,
            mean_reward = r.stats.reward_sum / r.stats.rewards.max(1) as f64,
            decide_us = r.mean_decide_us,
            update_us = r.mean_update_us,
            "learned placement"
        );
        placement.save()?;
    }
    let summary = client.summary();
    if summary.submitted < total {
        tracing::warn!(submitted = summary.submitted, planned = total, "not every job was submitted");
    }
    Ok(summary)
}

fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} tasks final ({per_sec}) {msg}")
    {
        bar.set_style(style);
    }
    bar
}

fn update(bar: &ProgressBar, client: &Client) {
    if bar.is_hidden() {
        return;
    }
    let s = client.tracker().stats();
    bar.set_position(s.done + s.failed + s.canceled);
    bar.set_message(format!(
        "{} failed, {} resubmitted, {} in flight",
        s.failed,
        s.resubmitted,
        client.tracker().running()
    ));
}

fn print_summary(s: &Summary) {
    println!(
        "{} tasks in {} jobs: {} completed, {} failed ({} lost), {} unfinished",
        s.submitted, s.jobs, s.completed, s.failed, s.lost, s.unfinished
    );
    println!(
        "resubmitted {}, timeouts {}, QUEUE_FULL bounces {}, duplicate completions {}",
        s.resubmitted, s.timeouts, s.queue_full_bounces, s.duplicates
    );
    println!("scheduling delay: p50 {:.1} us, p99 {:.1} us", s.p50_sched_delay_us, s.p99_sched_delay_us);
    println!("job completion:   p50 {:.2} ms, p99 {:.2} ms", s.p50_job_ms, s.p99_job_ms);
    println!("task run time:    p50 {:.1} us", s.p50_run_us);
    println!("throughput:       {:.0} tasks/s over {:.3} s", s.throughput_tasks_per_s, s.elapsed_s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SubmitArgs,
    }

    fn parse(argv: &[&str]) -> Result<SubmitArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("submit").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn builds_the_task_from_the_flags() {
        let a = parse(&[
            "--tasks",
            "10",
            "--handler",
            "spin",
            "--duration-us",
            "250",
            "--priority",
            "2",
            "--resources",
            "0b11",
        ])
        .unwrap();
        let t = a.task().unwrap();
        assert_eq!((t.priority, t.resources), (2, 3));
        assert_eq!(Handler::decode(&t.descriptor).unwrap(), Handler::Spin { micros: 250 });
        let e = parse(&["--tasks", "1", "--handler", "exec", "--command", "wc"]).unwrap();
        assert_eq!(Handler::decode(&e.task().unwrap().descriptor).unwrap(), Handler::Exec { name: b"wc" });
    }

    #[test]
    fn lease_and_monitor_flags_reach_the_tracker() {
        let a =
            parse(&["--tasks", "1", "--handler", "noop", "--claim-lease-ms", "2000", "--alarm-failed", "7"]).unwrap();
        let t = a.to_config().tracker;
        assert_eq!(t.claim_lease, Duration::from_secs(2));
        assert_eq!((t.monitor.failed_surge, t.monitor.sustain), (7, MonitorConfig::default().sustain));
        assert!(parse(&["--tasks", "1", "--handler", "noop", "--claim-lease-ms", "100"]).is_err(), "below the minimum");
    }

    #[test]
    fn refuses_inconsistent_flags() {
        assert!(parse(&["--tasks", "0", "--handler", "noop"]).is_err());
        assert!(parse(&["--tasks", "1", "--handler", "noop", "--priority", "9"]).is_err());
        assert!(parse(&["--tasks", "1", "--handler", "nothing"]).is_err());
        assert!(parse(&["--tasks", "1", "--handler", "exec"]).unwrap().task().is_err());
        assert!(parse(&["--tasks", "1", "--handler", "exec", "--command", "rm -rf"]).unwrap().task().is_err());
        assert!(parse(&["--tasks", "1", "--handler", "noop", "--command", "x"]).unwrap().task().is_err());
    }
}

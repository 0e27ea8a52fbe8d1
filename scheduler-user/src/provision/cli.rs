//! `bolt provision`: the provisioner of one host, with its I/O: tier 2's backlog read from
//! the switch's metrics endpoint, executors started as `bolt executor` child processes
//! (in a network namespace if asked), and their exits reaped.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Observation, ProvisionConfig, Provisioner, ResourceClass};
use crate::executor::{parse_addr, parse_resources};
use crate::metrics;
use crate::queue::ResourceBacklog;

/// Arguments of `bolt provision`.
#[derive(clap::Args, Debug, Clone)]
pub struct ProvisionArgs {
    /// The switch's metrics endpoint, HOST[:PORT] (port 9171 unless given), where tier 2's
    /// queued tasks per resource bit are read.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub switch_metrics: String,
    /// Where the started executors send GET_TASK (the switch, or this host's agent).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = "127.0.0.1:7171")]
    pub switch: SocketAddr,
    /// Milliseconds between two reads of the backlog.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub interval_ms: u64,
    /// Backlog growth of a resource class above which executors of that class are
    /// started, in tasks per second (one executor per this much growth).
    #[arg(long, value_name = "TASKS_PER_S", default_value_t = 100.0)]
    pub growth_threshold: f64,
    /// Most executors this host runs at once.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub max_executors: u16,
    /// Start executors inside this network namespace (the testbed's executor namespace).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Node id the executors carry.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    pub node: u16,
    /// Resources offered by executors started for tasks that need none.
    #[arg(long, value_name = "BITS", value_parser = parse_resources, default_value = "0")]
    pub unconstrained_resources: u8,
    /// The executors' lease period (CloudKon: an hour of billing), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 3_600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_period_ms: u64,
    /// An executor retires after this long without finishing a task, near the end of a
    /// period; longer than the longest task.
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub retire_idle_ms: u64,
    /// "Near the end": within this many milliseconds of it.
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub retire_window_ms: u64,
    /// More arguments for every executor (repeat; e.g. --executor-arg=--noop-backoff-us=500).
    #[arg(long = "executor-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub executor_args: Vec<String>,
    /// The `bolt` binary to start executors from (default: this one).
    #[arg(long, value_name = "PATH")]
    pub bolt: Option<PathBuf>,
    /// Stop after this many seconds (default: at SIGINT or SIGTERM), stopping the
    /// executors it started.
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// Print one JSON line per executor started or exited, and per backlog read.
    #[arg(long)]
    pub json: bool,
}

/// What the provisioner saw and did, one line each with --json.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ProvisionEvent {
    Read { t_s: f64, backlog: ResourceBacklog, running: usize, growth: Vec<f64> },
    Started { t_s: f64, pid: u32, class: ResourceClass, resources: u8 },
    Exited { t_s: f64, pid: u32, class: ResourceClass, success: bool, lived_s: f64 },
}

/// The executors this host started and has not reaped.
pub struct Fleet {
    args: ProvisionArgs,
    bolt: PathBuf,
    children: Vec<(Child, ResourceClass, Instant)>,
}

impl Fleet {
    pub fn new(args: ProvisionArgs) -> anyhow::Result<Fleet> {
        let bolt = match &args.bolt {
            Some(p) => p.clone(),
            None => std::env::current_exe()?,
        };
        Ok(Fleet { args, bolt, children: Vec::new() })
    }

    /// The `bolt executor` arguments of one executor of `class`.
    pub fn executor_args(&self, class: ResourceClass) -> Vec<String> {
        let a = &self.args;
        let mut v: Vec<String> = vec![
            "executor".into(),
            "--switch".into(),
            a.switch.to_string(),
            "--node".into(),
            a.node.to_string(),
            "--resources".into(),
            class.resources(a.unconstrained_resources).to_string(),
            "--lease-period-ms".into(),
            a.lease_period_ms.to_string(),
            "--retire-idle-ms".into(),
            a.retire_idle_ms.to_string(),
            "--retire-window-ms".into(),
            a.retire_window_ms.to_string(),
        ];
        v.extend(a.executor_args.iter().cloned());
        v
    }

    pub fn start(&mut self, class: ResourceClass, now: Instant) -> anyhow::Result<u32> {
        let mut cmd = match &self.args.netns {
            Some(ns) => crate::netns::command_in(ns, &self.bolt)?,
            None => Command::new(&self.bolt),
        };
        cmd.args(self.executor_args(class)).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
        // An executor outlives no provisioner: a killed one leaves no orphans pulling tasks.
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pid = child.id();
        self.children.push((child, class, now));
        Ok(pid)
    }

    /// Executors that exited since the last call: (pid, class, success, started).
    pub fn reap(&mut self) -> Vec<(u32, ResourceClass, bool, Instant)> {
        let mut gone = Vec::new();
        self.children.retain_mut(|(child, class, started)| match child.try_wait() {
            Ok(Some(status)) => {
                gone.push((child.id(), *class, status.success(), *started));
                false
            }
            Ok(None) => true,
            Err(e) => {
                tracing::warn!(pid = child.id(), error = %e, "cannot wait for an executor");
                true
            }
        });
        gone
    }

    pub fn running(&self) -> usize {
        self.children.len()
    }

    /// SIGTERM to every executor (they finish their running task), then a bounded wait.
    pub fn stop(&mut self, wait: Duration) {
        for (child, _, _) in &self.children {
            // SAFETY: kill(2) on a child we started and have not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + wait;
        while !self.children.is_empty() && Instant::now() < deadline {
            self.reap();
            std::thread::sleep(Duration::from_millis(20));
        }
        for (child, _, _) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

/// Tier 2's queued tasks per resource bit, from its /stats.
pub fn read_backlog(endpoint: SocketAddr) -> anyhow::Result<ResourceBacklog> {
    let v = metrics::get_json(endpoint, "/stats", Duration::from_secs(2))?;
    let s = v.get("switch").ok_or_else(|| anyhow::anyhow!("{endpoint} is not a switch's endpoint"))?;
    Ok(serde_json::from_value(s.clone())?)
}

pub fn run(args: ProvisionArgs) -> anyhow::Result<()> {
    let endpoint = metrics::parse_endpoint(&args.switch_metrics, metrics::SWITCH_PORT)?
        .ok_or_else(|| anyhow::anyhow!("--switch-metrics off: nothing to read"))?;
    let interval = Duration::from_millis(args.interval_ms);
    let duration = args.duration_s.map(Duration::from_secs_f64).unwrap_or(Duration::MAX);
    let json = args.json;
    let mut host = HostProvisioner::new(args, endpoint)?;
    tracing::info!(%endpoint, cfg = ?host.provisioner.cfg, "provisioning executors");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut ticker = tokio::time::interval(interval);
        let end = tokio::time::sleep(duration.min(Duration::from_secs(100 * 365 * 86_400)));
        tokio::pin!(end);
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => return r.map_err(anyhow::Error::from),
                _ = term.recv() => return Ok(()),
                _ = &mut end => return Ok(()),
                _ = ticker.tick() => {
                    for e in host.step() {
                        if json {
                            println!("{}", serde_json::to_string(&e).unwrap_or_default());
                        }
                    }
                }
            }
        }
    });
    tracing::info!(running = host.fleet.running(), "stopping the executors started here");
    host.fleet.stop(Duration::from_secs(15));
    result
}

/// The provisioner of one host and the executors it started: `bolt provision`'s loop
/// body, also driven by `bolt bench cloudkon`.
pub struct HostProvisioner {
    pub fleet: Fleet,
    provisioner: Provisioner,
    endpoint: SocketAddr,
    interval: Duration,
    t0: Instant,
}

impl HostProvisioner {
    pub fn new(args: ProvisionArgs, endpoint: SocketAddr) -> anyhow::Result<HostProvisioner> {
        anyhow::ensure!(args.growth_threshold > 0.0, "--growth-threshold must be above 0");
        let cfg =
            ProvisionConfig { growth_threshold: args.growth_threshold, max_executors: args.max_executors as usize };
        let interval = Duration::from_millis(args.interval_ms);
        Ok(HostProvisioner {
            fleet: Fleet::new(args)?,
            provisioner: Provisioner::new(cfg),
            endpoint,
            interval,
            t0: Instant::now(),
        })
    }

    /// One interval: reap exits, read the backlog, start what the rule says.
    pub fn step(&mut self) -> Vec<ProvisionEvent> {
        let now = Instant::now();
        let t_s = (now - self.t0).as_secs_f64();
        let mut events = Vec::new();
        for (pid, class, success, started) in self.fleet.reap() {
            let lived_s = (now - started).as_secs_f64();
            tracing::info!(pid, ?class, success, lived_s, "executor exited");
            events.push(ProvisionEvent::Exited { t_s, pid, class, success, lived_s });
        }
        let backlog = match read_backlog(self.endpoint) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the backlog");
                return events;
            }
        };
        let obs = Observation { now, backlog: backlog.clone(), running: self.fleet.running() };
        let decision = self.provisioner.step(&obs, self.interval);
        events.push(ProvisionEvent::Read { t_s, backlog, running: obs.running, growth: decision.growth.clone() });
        for class in decision.start {
            let resources = class.resources(self.fleet.args.unconstrained_resources);
            match self.fleet.start(class, now) {
                Ok(pid) => {
                    tracing::info!(pid, ?class, resources, "executor started");
                    events.push(ProvisionEvent::Started { t_s, pid, class, resources });
                }
                Err(e) => tracing::warn!(error = %e, ?class, "cannot start an executor"),
            }
        }
        events
    }
}

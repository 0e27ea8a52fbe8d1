//! A Bolt cluster for one measurement, one-level or two-level, on this machine.
//!
//! A [`Site`] is where the experiments run: the network-namespace testbed (as root), or
//! loopback when namespaces cannot be made. Each measurement deploys on it a fresh
//! software switch, the real executor pools (`executor::spawn`, one pool per worker node,
//! each with its own resources) and, for two-level, an agent with the XDP program on
//! every worker host ([`Deployment`]). Clients run in the switch's namespace, as on the
//! thesis's scheduler host. The set-up is the one `bolt bench tiers` and `bolt testbed`
//! use: `Layout::plan`, `Testbed::create`, `agent_args_offering`.
//!
//! Where two-level cannot run (no root, or XDP does not attach), the deployment is
//! one-level on loopback and says so in [`Deployment::fallback`], which every JSON line
//! of the experiments carries.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::agent::{self, AgentHandle, StopMode};
use crate::executor::{self, AssignmentRecord, CounterSnapshot, ExecutorConfig, ExecutorPool};
use crate::netns;
use crate::switch::{self, SwitchConfig, SwitchHandle};
use crate::testbed::{services::agent_args_offering, Layout, Testbed};

/// The agents' `--nice` in every two-level deployment: behind the executors (nice 0),
/// which sleep through their tasks here. Executors that finish a task then wake and ask
/// for the next one before the agent's loop takes the CPU; the executors' own wake-ups
/// are on every task's path, the agent's work mostly is not (the XDP program hands REFILL
/// frames to waiting executors itself). Put ahead of them (-10) it delayed their wake-ups
/// at every wave; at their value two-level's SW1 median was 1.09x one-level's at 40 to
/// 90 % load, at 10 it was 1.00x (geometric means over three runs each way;
/// docs/benchmarks.md, "The agent behind the executors: nice 10"). `bolt bench tiers`,
/// whose no-op executors never sleep, sets its own.
pub const AGENT_NICE: i32 = 10;

/// One-level: executors ask tier 2 directly. Two-level: the XDP tier answers them on
/// their host from rings its agent refills from tier 2 in batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    #[serde(rename = "one-level")]
    OneLevel,
    #[serde(rename = "two-level")]
    TwoLevel,
}

impl Level {
    pub const BOTH: [Level; 2] = [Level::OneLevel, Level::TwoLevel];

    pub fn name(self) -> &'static str {
        match self {
            Level::OneLevel => "one-level",
            Level::TwoLevel => "two-level",
        }
    }
}

/// One worker node: how many executors it runs and the resources it offers.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct NodeSpec {
    pub executors: u16,
    pub resources: u8,
}

/// Where measurements run: a namespace testbed, or loopback.
pub struct Site {
    nodes: Vec<NodeSpec>,
    /// `None`: loopback.
    testbed: Option<Testbed>,
    /// Why there is no testbed.
    no_testbed: Option<String>,
}

impl Site {
    /// A testbed named `name` with one worker host per node (as root), else loopback.
    pub fn new(name: &str, nodes: &[NodeSpec]) -> anyhow::Result<Site> {
        anyhow::ensure!(!nodes.is_empty(), "a cluster needs at least one worker node");
        anyhow::ensure!(nodes.iter().all(|n| n.executors > 0), "every node needs an executor");
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let (testbed, no_testbed) = if root {
            let layout = Layout::plan(name, nodes.len() as u16, 1)?;
            let tb = Testbed::create(layout)
                .with_context(|| format!("creating testbed {name} (is one of this name up? `bolt testbed down`)"))?;
            (Some(tb), None)
        } else {
            (None, Some("not root: no network namespaces or XDP".to_string()))
        };
        Ok(Site { nodes: nodes.to_vec(), testbed, no_testbed })
    }

    pub fn nodes(&self) -> &[NodeSpec] {
        &self.nodes
    }

    pub fn executors(&self) -> u32 {
        self.nodes.iter().map(|n| n.executors as u32).sum()
    }

    /// Starts a switch, executors and (two-level) agents. Two-level falls back to
    /// one-level on loopback when it cannot run, and says why.
    pub fn deploy(&self, level: Level, opts: &DeployOptions) -> anyhow::Result<Deployment> {
        let Some(tb) = &self.testbed else {
            let why = self.no_testbed.clone().unwrap_or_default();
            return self.deploy_loopback(level, opts, format!("{why}: one-level on loopback"));
        };
        match self.deploy_testbed(tb.layout(), level, opts) {
            Ok(d) => Ok(d),
            Err(e) if level == Level::TwoLevel => {
                tracing::warn!(error = format!("{e:#}"), "two-level cannot run here; one-level on loopback instead");
                self.deploy_loopback(level, opts, format!("two-level failed ({e:#}): one-level on loopback"))
            }
            Err(e) => Err(e),
        }
    }

    fn deploy_loopback(&self, level: Level, opts: &DeployOptions, why: String) -> anyhow::Result<Deployment> {
        let switch = switch::spawn(SwitchConfig {
            listen: "127.0.0.1:0".parse()?,
            record_timeline: opts.record_switch_timeline,
            ..SwitchConfig::default()
        })?;
        let addr = switch.local_addr();
        let mut pools = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            pools.push(executor::spawn(executor_config(addr, i as u16 + 1, n, opts))?);
        }
        Ok(Deployment {
            requested: level,
            ran: Level::OneLevel,
            fallback: Some(why),
            switch_addr: addr,
            host_wait_ms: None,
            agent_nice: None,
            client_ns: None,
            pools,
            agents: Vec::new(),
            switch: Some(switch),
        })
    }

    fn deploy_testbed(&self, layout: &Layout, level: Level, opts: &DeployOptions) -> anyhow::Result<Deployment> {
        let listen = SocketAddr::V4(layout.switch_socket());
        let access = layout.access_rules();
        let record_timeline = opts.record_switch_timeline;
        let switch = netns::run_in(&layout.switch_ns, move || {
            switch::spawn(SwitchConfig { listen, access, record_timeline, ..SwitchConfig::default() })
        })?;
        let mut d = Deployment {
            requested: level,
            ran: level,
            fallback: None,
            switch_addr: listen,
            host_wait_ms: None,
            agent_nice: None,
            client_ns: Some(layout.switch_ns.clone()),
            pools: Vec::new(),
            agents: Vec::new(),
            switch: Some(switch),
        };
        if level == Level::TwoLevel {
            for (w, n) in layout.workers.iter().zip(&self.nodes) {
                // The ring depth is the agent's own measurement (docs/agent.md).
                let mut args = agent_args_offering(layout, w, n.resources);
                args.extend(["--nice".to_string(), AGENT_NICE.to_string()]);
                let cfg = agent::config_from_args(args)?;
                d.host_wait_ms = Some(cfg.tier1.settings.host_wait_ns / 1_000_000);
                d.agent_nice = cfg.nice;
                d.agents.push(netns::run_in(&w.host_ns, move || agent::spawn(cfg))?);
            }
        }
        for (w, n) in layout.workers.iter().zip(&self.nodes) {
            let cfg = executor_config(listen, w.node, n, opts);
            d.pools.push(netns::run_in(&w.exec().ns, move || executor::spawn(cfg))?);
        }
        Ok(d)
    }
}

/// Knobs of a deployment.
#[derive(Clone, Debug, Default)]
pub struct DeployOptions {
    /// Executors keep an [`AssignmentRecord`] per task (GET_TASK round trips).
    pub record_assignments: bool,
    /// The switch keeps each task's way through its thread (`switch::SwitchTimeline`).
    pub record_switch_timeline: bool,
}

fn executor_config(switch: SocketAddr, node: u16, n: &NodeSpec, opts: &DeployOptions) -> ExecutorConfig {
    let mut cfg = ExecutorConfig::new(switch, n.resources);
    cfg.executors = n.executors;
    cfg.node = node;
    cfg.record_assignments = opts.record_assignments;
    cfg
}

/// A running cluster: switch, executor pools and agents.
pub struct Deployment {
    /// The level asked for, and the one that runs.
    pub requested: Level,
    pub ran: Level,
    /// Why `ran` differs from `requested` or the run is on loopback; `None` on the testbed.
    pub fallback: Option<String>,
    /// Where clients submit.
    pub switch_addr: SocketAddr,
    /// How long executors wait at their host for a REFILL, ms (the agents' `--host-wait-ms`;
    /// `None` without agents).
    pub host_wait_ms: Option<u64>,
    /// The agents' `--nice` (`None` without agents, or when they run at the executors' value).
    pub agent_nice: Option<i32>,
    /// The namespace clients run in (`None`: this one).
    client_ns: Option<String>,
    pools: Vec<ExecutorPool>,
    agents: Vec<AgentHandle>,
    switch: Option<SwitchHandle>,
}

/// What a deployment's executors did, summed over every node.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeploymentReport {
    pub executors: CounterSnapshot,
    /// Tasks the agents' hosts' executors got from the XDP tier (or the agent), and
    /// from tier 2 directly; zero without agents.
    pub tier1_served: u64,
    pub tier2_served: u64,
    /// Tasks the agents RETURNed to tier 2 while running (leases, hint reactions, the
    /// overflow queue, stolen tasks passed on to tier 2; not the drain at the end), and
    /// took in by steals.
    pub tier1_returned: u64,
    pub stolen: u64,
    /// Executors waiting at their host that the agents answered with a task from the
    /// rings (the REFILL frame the program stored found no waiter it could hand to).
    pub agent_served_waiters: u64,
    /// The agents' loop turns (wake-ups) and their threads' CPU time, summed.
    pub agent_loop_turns: u64,
    pub agent_cpu_us: u64,
    /// Where the software switch thread's time went over the deployment's life.
    pub switch_thread: switch::ThreadStats,
    /// Each task's way through it, if `DeployOptions::record_switch_timeline`.
    #[serde(skip)]
    pub switch_timeline: switch::SwitchTimeline,
}

impl DeploymentReport {
    /// The share of tasks the XDP tier handed out; None without agents or tasks.
    pub fn xdp_share(&self) -> Option<f64> {
        let all = self.tier1_served + self.tier2_served;
        (all > 0).then(|| self.tier1_served as f64 / all as f64)
    }
}

impl Deployment {
    /// Runs `f` on a thread in the clients' namespace, with a tokio runtime, and returns
    /// its result.
    pub fn run_clients<T: Send + 'static, F>(
        &self,
        f: impl FnOnce(SocketAddr) -> F + Send + 'static,
    ) -> anyhow::Result<T>
    where
        F: std::future::Future<Output = anyhow::Result<T>>,
    {
        let addr = self.switch_addr;
        let body = move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(f(addr))
        };
        match &self.client_ns {
            Some(ns) => netns::run_in(ns, body),
            None => std::thread::Builder::new()
                .name("bench-clients".into())
                .spawn(body)?
                .join()
                .map_err(|_| anyhow::anyhow!("the client thread panicked"))?,
        }
    }

    /// Every executor's assignment records so far.
    pub fn take_assignments(&self) -> Vec<AssignmentRecord> {
        self.pools.iter().flat_map(|p| p.take_assignments()).collect()
    }

    /// Stops executors (each finishes its task), then agents (their rings drain back to
    /// the switch), then the switch.
    pub fn stop(mut self) -> anyhow::Result<DeploymentReport> {
        let mut report = DeploymentReport::default();
        for p in &self.pools {
            p.request_stop();
        }
        for p in self.pools.drain(..) {
            let c = p.shutdown();
            report.executors.gets_sent += c.gets_sent;
            report.executors.tasks_run += c.tasks_run;
            report.executors.tasks_ok += c.tasks_ok;
            report.executors.tasks_failed += c.tasks_failed;
            report.executors.tasks_refused += c.tasks_refused;
            report.executors.noops += c.noops;
            report.executors.get_timeouts += c.get_timeouts;
        }
        for a in self.agents.drain(..) {
            let s = a.stop(StopMode::Drain)?;
            report.tier1_served += s.xdp_served;
            report.tier2_served += s.tier2_served;
            report.tier1_returned += s.returned_tasks.saturating_sub(s.drained);
            report.stolen += s.stolen_tasks;
            report.agent_served_waiters += s.waiters_served;
            report.agent_loop_turns += s.loop_turns;
            report.agent_cpu_us += s.cpu_us;
        }
        // Let the switch take the returned tasks before it goes.
        std::thread::sleep(Duration::from_millis(50));
        if let Some(s) = self.switch.take() {
            let (stats, timeline) = s.shutdown_with_timeline()?;
            report.switch_thread = stats.thread;
            report.switch_timeline = timeline;
        }
        Ok(report)
    }
}

//! A cluster for data-aware DAG jobs on the namespace testbed: a switch, and on every
//! worker host an object store, an agent with the XDP program (dedicated ring and
//! shared rings) and executors that know the host's store. Clients run in the switch's
//! namespace.

use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use scheduler_common::JobRef;

use crate::agent::{self, AgentHandle, AgentStats, StopMode};
use crate::client::dag::{DagState, DagTask};
use crate::client::dag_run::{collect_garbage, run_placed_dag, DagReport, NodeStore, INPUT_OWNER_JID};
use crate::client::{Client, ClientConfig, Summary};
use crate::executor::{self, CounterSnapshot, ExecutorConfig, ExecutorPool};
use crate::netns;
use crate::placement::PlacementPolicy;
use crate::store::{self, client as store_client, ObjectLocation, StoreConfig, StoreHandle};
use crate::switch::{self, SwitchConfig, SwitchHandle};
use crate::testbed::{services::agent_args, Layout};

/// How long a store operation of the set-up may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// A DAG job's run on a [`DataCluster`].
pub struct DagRun {
    pub dag: DagState,
    pub report: DagReport,
    pub summary: Summary,
}

/// The running services; fields in drop order (executors first, switch last).
pub struct DataCluster {
    pools: Vec<ExecutorPool>,
    agents: Vec<AgentHandle>,
    stores: Vec<StoreHandle>,
    _switch: SwitchHandle,
    layout: Layout,
    executors_per_host: u16,
}

impl DataCluster {
    /// Starts the services on a created testbed's `layout`, `executors_per_host` executors
    /// on each worker host.
    pub fn start(layout: &Layout, executors_per_host: u16) -> anyhow::Result<DataCluster> {
        anyhow::ensure!(executors_per_host > 0, "every host needs an executor");
        let listen = SocketAddr::V4(layout.switch_socket());
        let access = layout.access_rules();
        let switch = netns::run_in(&layout.switch_ns, move || {
            switch::spawn(SwitchConfig { listen, access, ..SwitchConfig::default() })
        })?;
        let (mut stores, mut agents, mut pools) = (Vec::new(), Vec::new(), Vec::new());
        for w in &layout.workers {
            let addr = w.store_addr();
            stores.push(netns::run_in(&w.host_ns, move || store::spawn(StoreConfig::new(SocketAddr::V4(addr))))?);
            let cfg = agent::config_from_args(agent_args(layout, w))?;
            let handle = netns::run_in(&w.host_ns, move || agent::spawn(cfg))?;
            anyhow::ensure!(handle.mode().is_xdp(), "agent of node {} not in XDP mode: {:?}", w.node, handle.mode());
            agents.push(handle);
            let mut cfg = ExecutorConfig::new(listen, 0xff);
            cfg.node = w.node;
            cfg.executors = executors_per_host;
            cfg.store = Some(addr);
            pools.push(netns::run_in(&w.exec().ns, move || executor::spawn(cfg))?);
        }
        Ok(DataCluster { pools, agents, stores, _switch: switch, layout: layout.clone(), executors_per_host })
    }

    /// Every worker host's node id and store.
    pub fn hosts(&self) -> Vec<NodeStore> {
        self.layout.workers.iter().map(|w| NodeStore { node: w.node, store: w.store_addr() }).collect()
    }

    /// Where each host's agent takes PIN: its uplink address, the Bolt port.
    pub fn agents(&self) -> BTreeMap<u16, SocketAddr> {
        let port = self.layout.switch_socket().port();
        self.layout.workers.iter().map(|w| (w.node, SocketAddr::V4(SocketAddrV4::new(w.uplink_addr, port)))).collect()
    }

    pub fn executors(&self) -> u32 {
        self.layout.workers.len() as u32 * self.executors_per_host as u32
    }

    /// Every executor's counters, summed.
    pub fn executor_counters(&self) -> CounterSnapshot {
        let mut total = CounterSnapshot::default();
        for p in &self.pools {
            let c = p.counters();
            total.tasks_ok += c.tasks_ok;
            total.tasks_failed += c.tasks_failed;
            total.local_reads += c.local_reads;
            total.local_read_bytes += c.local_read_bytes;
            total.remote_fetches += c.remote_fetches;
            total.remote_fetch_bytes += c.remote_fetch_bytes;
            total.remote_fetch_ns += c.remote_fetch_ns;
        }
        total
    }

    /// Objects held by each host's store.
    pub fn stored_objects(&self) -> Vec<u64> {
        self.stores.iter().map(|s| s.snapshot().objects).collect()
    }

    /// Puts `objects` (owned by job (`uid`, [`INPUT_OWNER_JID`])), then runs `tasks` as
    /// a DAG job under `policy` from a client in the switch's namespace that knows every
    /// host's agent; tasks are recorded, one attempt each, none resubmitted before
    /// `timeout`. The job's objects stay in the stores ([`DataCluster::collect`]).
    pub fn run_dag(
        &self,
        tasks: Vec<DagTask>,
        objects: &[(ObjectLocation, Vec<u8>)],
        policy: Option<PlacementPolicy>,
        uid: u32,
        timeout: Duration,
    ) -> anyhow::Result<DagRun> {
        let dag = DagState::new(tasks)?;
        let mut cfg = ClientConfig::new(SocketAddr::V4(self.layout.switch_socket()));
        cfg.tracker.uid = uid;
        cfg.tracker.record_tasks = true;
        cfg.tracker.max_attempts = 1;
        cfg.tracker.task_timeout = timeout;
        cfg.agents = self.agents();
        let owner = JobRef::new(uid, INPUT_OWNER_JID);
        let objects = objects.to_vec();
        netns::run_in(&self.layout.switch_ns, move || {
            for (loc, data) in &objects {
                store_client::put(SocketAddr::V4(loc.store), owner, &loc.name, data, STORE_TIMEOUT)
                    .map_err(|e| anyhow::anyhow!("putting input {}: {e}", loc.name))?;
            }
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async move {
                let mut client = Client::bind(cfg).await?;
                let (dag, report) = run_placed_dag(&mut client, dag, policy, Instant::now() + timeout).await?;
                Ok(DagRun { dag, report, summary: client.summary() })
            })
        })
    }

    /// Deletes a run's objects (its inputs and its tasks' outputs) from every store:
    /// (objects, bytes) deleted.
    pub fn collect(&self, uid: u32, report: &DagReport) -> anyhow::Result<(u64, u64)> {
        let mut owners: Vec<JobRef> = report.jids.iter().map(|&j| JobRef::new(uid, j)).collect();
        owners.push(JobRef::new(uid, INPUT_OWNER_JID));
        let stores: Vec<SocketAddrV4> = self.hosts().iter().map(|h| h.store).collect();
        let (objects, bytes, errors) =
            netns::run_in(&self.layout.switch_ns, move || Ok(collect_garbage(&owners, &stores)))?;
        anyhow::ensure!(errors.is_empty(), "garbage collection: {errors:?}");
        Ok((objects, bytes))
    }

    /// Runs `f` in the clients' namespace (the switch's), where every store is reachable.
    pub fn in_client_namespace<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        netns::run_in(&self.layout.switch_ns, f)
    }

    /// Stops the executors, then drains the agents: each agent's final statistics.
    pub fn stop(mut self) -> anyhow::Result<Vec<AgentStats>> {
        self.pools.clear();
        self.agents.drain(..).map(|a| a.stop(StopMode::Drain)).collect()
    }
}

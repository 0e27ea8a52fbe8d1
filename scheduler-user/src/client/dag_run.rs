//! Running a DAG job: the client releases tasks as MATRIX's WaitQ says ([`DagState`]),
//! each as a SPEC task whose spec (handler, arguments, inputs = its parents' outputs)
//! the [`SpecServer`] serves, and checks every completion: the COMPLETE's node and
//! output_len must match the RESULT's output location. `bolt dag` generates a job of
//! one of MATRIX's shapes, puts its input objects on the hosts' stores, runs it,
//! reports it, and deletes the job's objects.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use clap::Args;
use scheduler_common::descriptor::Handler;
use scheduler_common::{JobRef, STATUS_OK};
use serde::Serialize;

use super::cli::PlacementArgs;
use super::dag::{generate, DagState, DagTask, NodeState, Shape};
use super::spec_server::{SpecEntry, SpecServer};
use super::{Client, ClientConfig, TaskRecord, TaskSpec, TaskState};
use crate::executor::parse_addr;
use crate::placement::{largest, InputObject, Placement, PlacementPolicy};
use crate::store::{client as store_client, ObjectLocation};

/// How often the runner looks at completions and failures while tasks run.
const POLL: Duration = Duration::from_millis(2);

/// What a DAG job came to.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DagReport {
    pub tasks: usize,
    pub done: usize,
    /// Tasks that failed themselves.
    pub failed: usize,
    /// Tasks failed because an ancestor failed.
    pub failed_by_ancestor: usize,
    /// Tasks not final at the deadline.
    pub unfinished: usize,
    /// Done tasks whose COMPLETE (node, output_len) matched their RESULT's output.
    pub outputs_where_complete_said: usize,
    /// Done tasks whose COMPLETE and RESULT disagree, or with no RESULT.
    pub output_mismatches: usize,
    /// First submission → last task final, seconds.
    pub makespan_s: f64,
    /// Sum of the done tasks' run times as their COMPLETEs report them (spec fetch,
    /// inputs, handler, output write), seconds: efficiency on E executors is
    /// busy_s / (E × makespan_s), MATRIX's mean task length × tasks per executor / makespan.
    pub busy_s: f64,
    /// Released tasks placed by the job's policy: pinned to their largest input's host
    /// (PIN to its agent) and shared (SUBMIT to tier 2). Both 0 without placement.
    pub pinned: usize,
    pub shared: usize,
    /// Done tasks that read input data, and those of them that ran on the host of their
    /// largest input (the COMPLETE's node).
    pub data_tasks_done: usize,
    pub data_tasks_on_largest_input_host: usize,
    /// The client job ids the DAG's tasks were submitted under (one per release batch).
    pub jids: Vec<u32>,
    /// Each failed task and why (ancestor failures name the ancestor).
    pub failures: Vec<DagFailure>,
    /// The done tasks' records (who ran each, when it started, how long it ran), for
    /// utilisation over time.
    #[serde(skip)]
    pub records: Vec<TaskRecord>,
}

/// A failed task of a DAG job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DagFailure {
    pub task: usize,
    pub reason: String,
}

/// Which DAG task a submitted (jid, tid) is, and its spec id.
struct InFlight {
    node: usize,
    spec_id: u64,
    jid: u32,
    /// The host of the task's largest input, if it reads any data.
    data_host: Option<u16>,
}

/// A task's inputs as placement sees them.
fn placement_inputs(inputs: &[ObjectLocation]) -> Vec<InputObject> {
    inputs.iter().map(|o| InputObject { host: o.node, size: o.size }).collect()
}

/// Runs `dag` through `client` (which must record tasks) until every task is final or
/// `deadline`, every task submitted to tier 2. Specs are served from a spec server at
/// the client socket's address.
pub async fn run_dag(client: &mut Client, dag: DagState, deadline: Instant) -> anyhow::Result<(DagState, DagReport)> {
    run_placed_dag(client, dag, None, deadline).await
}

/// As [`run_dag`], placing each task when it is released by its inputs' locations with
/// MATRIX's Algorithm 1 under `policy` (and the client's current `est_task_length`):
/// pinned tasks go to their largest input's host by PIN (the client must know that
/// host's agent), shared ones to tier 2. `None` submits every task to tier 2.
pub async fn run_placed_dag(
    client: &mut Client,
    mut dag: DagState,
    policy: Option<PlacementPolicy>,
    deadline: Instant,
) -> anyhow::Result<(DagState, DagReport)> {
    anyhow::ensure!(
        client.tracker().config().record_tasks,
        "a DAG client must record tasks (TrackerConfig::record_tasks)"
    );
    let local = client.local_addr()?;
    let server = SpecServer::spawn(local.ip())?;
    let port = server.addr().port();
    let uid = client.tracker().config().uid;
    let run: u32 = rand::random();
    let spec_id = |node: usize| ((run as u64) << 32) | node as u64;
    let mut report = DagReport { tasks: dag.len(), ..DagReport::default() };
    let mut in_flight: HashMap<u32, InFlight> = HashMap::new();
    let started = Instant::now();

    let release = |client: &mut Client, dag: &DagState, nodes: Vec<usize>, report: &mut DagReport| {
        if nodes.is_empty() {
            return Ok::<_, anyhow::Error>(Vec::new());
        }
        let mut specs = Vec::with_capacity(nodes.len());
        for &i in &nodes {
            let t = dag.task(i);
            let entry = SpecEntry {
                handler: t.handler.clone(),
                args: t.args.clone(),
                output: format!("{uid:08x}/{run:08x}/t{i}"),
                inputs: dag.inputs_of(i),
            };
            server.insert(spec_id(i), entry);
            specs.push(TaskSpec::new(Handler::Spec { port, spec_id: spec_id(i) }, 1, 0)?);
        }
        let inputs: Vec<Vec<InputObject>> = nodes.iter().map(|&i| placement_inputs(&dag.inputs_of(i))).collect();
        let jid = match policy {
            None => client.add_job(&specs)?,
            Some(policy) => {
                let est = client.est_task_length();
                let placements: Vec<Placement> = inputs.iter().map(|i| policy.place(i, est)).collect();
                let pinned = placements.iter().filter(|p| matches!(p, Placement::Pinned { .. })).count();
                report.pinned += pinned;
                report.shared += placements.len() - pinned;
                client.add_placed_tasks(&specs, &placements, policy)?
            }
        };
        report.jids.push(jid);
        let first = client.tracker().job(jid).map(|p| p.first_tid).unwrap_or_default();
        Ok(nodes
            .into_iter()
            .zip(inputs)
            .enumerate()
            .map(|(k, (node, inputs))| {
                let data_host = largest(&inputs).filter(|o| o.size > 0).map(|o| o.host);
                (first + k as u32, InFlight { node, spec_id: spec_id(node), jid, data_host })
            })
            .collect::<Vec<_>>())
    };

    let roots = dag.start();
    in_flight.extend(release(client, &dag, roots, &mut report)?);
    while !dag.is_final() && Instant::now() < deadline {
        client.drive_until((Instant::now() + POLL).min(deadline)).await?;
        let mut newly = Vec::new();
        for record in client.take_records() {
            let Some(f) = in_flight.remove(&record.tid).filter(|f| f.jid == record.jid) else { continue };
            report.busy_s += record.run_ns as f64 / 1e9;
            let result = server.take_result(f.spec_id);
            server.remove(f.spec_id);
            let output = match result {
                Some(r) if r.status == STATUS_OK => {
                    let matches = match &r.output {
                        Some(o) => o.node == record.node && o.size == record.output_len,
                        None => record.output_len == 0,
                    };
                    if matches {
                        report.outputs_where_complete_said += 1;
                    } else {
                        report.output_mismatches += 1;
                        tracing::warn!(node = f.node, "COMPLETE and RESULT disagree on the output");
                    }
                    if let Some(host) = f.data_host {
                        report.data_tasks_done += 1;
                        report.data_tasks_on_largest_input_host += usize::from(record.node == host);
                    }
                    r.output
                }
                _ => {
                    report.output_mismatches += 1;
                    let failed = dag.on_failed(f.node, "COMPLETE OK without an OK RESULT");
                    report.failed_by_ancestor += failed.len();
                    continue;
                }
            };
            report.records.push(record);
            newly.extend(dag.on_done(f.node, output));
        }
        // Tasks the tracker gave up on (attempts exhausted, refused, lost).
        let failed_now: Vec<u32> = in_flight
            .keys()
            .copied()
            .filter(|&tid| client.tracker().states().state_of(tid) == Some(TaskState::Failed))
            .collect();
        for tid in failed_now {
            let f = in_flight.remove(&tid).expect("listed above");
            let reason = server
                .take_result(f.spec_id)
                .map(|r| r.message)
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "no executor finished it (attempts exhausted or lost)".into());
            server.remove(f.spec_id);
            let descendants = dag.on_failed(f.node, &reason);
            report.failed_by_ancestor += descendants.len();
        }
        in_flight.extend(release(client, &dag, newly, &mut report)?);
    }
    report.makespan_s = started.elapsed().as_secs_f64();
    for (i, s) in dag.states().iter().enumerate() {
        match s {
            NodeState::Done { .. } => report.done += 1,
            NodeState::Failed { reason } => report.failures.push(DagFailure { task: i, reason: reason.clone() }),
            _ => report.unfinished += 1,
        }
    }
    report.failed = report.failures.len() - report.failed_by_ancestor;
    for f in in_flight.values() {
        server.remove(f.spec_id);
    }
    Ok((dag, report))
}

/// Deletes job `owner`'s objects from each of `stores`: (objects, bytes) deleted in all.
pub fn collect_garbage(owners: &[JobRef], stores: &[SocketAddrV4]) -> (u64, u64, Vec<String>) {
    let (mut objects, mut bytes, mut errors) = (0u64, 0u64, Vec::new());
    for &store in stores {
        for &owner in owners {
            match store_client::delete_job(SocketAddr::V4(store), owner, store_client::DEFAULT_TIMEOUT) {
                Ok((o, b)) => {
                    objects += o as u64;
                    bytes += b;
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    (objects, bytes, errors)
}

/// The job id that owns a DAG job's generated input objects (task outputs belong to the
/// job ids the tasks were submitted under).
pub const INPUT_OWNER_JID: u32 = u32::MAX;

/// A store and the node id of the host it runs on: `NODE=IP:PORT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeStore {
    pub node: u16,
    pub store: SocketAddrV4,
}

fn parse_node_store(s: &str) -> Result<NodeStore, String> {
    let (node, addr) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected NODE=IP:PORT"))?;
    Ok(NodeStore {
        node: node.parse().map_err(|e| format!("{node:?}: {e}"))?,
        store: addr.parse().map_err(|e| format!("{addr:?}: {e}"))?,
    })
}

/// Arguments of `bolt dag`.
#[derive(Args, Debug, Clone)]
pub struct DagArgs {
    /// Switch to submit to (port defaults to 7171).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = "127.0.0.1:7171")]
    pub switch: SocketAddr,
    /// A worker host's store and node id, NODE=IP:PORT; repeat for each host. The job's
    /// input objects are spread over them round-robin.
    #[arg(long = "store", value_name = "NODE=IP:PORT", value_parser = parse_node_store, required = true)]
    pub stores: Vec<NodeStore>,
    /// What the tasks do: `mix` tasks in the DAG of --shape; `stack` (image stacking: a
    /// bag of --tasks tasks, each reducing its own input); `all-pairs` (--tasks input
    /// objects, one `compare` task per pair: tasks × (tasks − 1) / 2 tasks).
    #[arg(long, value_enum, default_value_t = Workload::Mix)]
    pub workload: Workload,
    /// DAG shape of the `mix` workload.
    #[arg(long, value_enum, default_value_t = Shape::Bag)]
    pub shape: Shape,
    /// Tasks in the DAG.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tasks: u32,
    /// Fan-in and fan-out degree.
    #[arg(long, value_name = "D", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub degree: u32,
    /// Pipeline length.
    #[arg(long, value_name = "L", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub length: u32,
    /// Bytes of each root task's input object.
    #[arg(long, value_name = "BYTES", default_value_t = 65_536)]
    pub input_bytes: u64,
    /// Bytes of each task's output.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub output_bytes: u32,
    /// Passes the `mix` handler makes over its inputs (CPU cost ∝ passes × input bytes).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub passes: u32,
    /// Give up on the tasks not final after this many seconds.
    #[arg(long, value_name = "S", default_value_t = 60)]
    pub timeout_s: u64,
    /// Attempts per task before it fails (and its descendants with it).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..))]
    pub max_attempts: u8,
    /// Keep the job's objects in the stores (default: deleted once the job is final).
    #[arg(long)]
    pub keep: bool,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// What the tasks of `bolt dag` do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    Mix,
    Stack,
    AllPairs,
}

/// The job of `args`.
pub fn build_dag(args: &DagArgs, uid: u32) -> (Vec<DagTask>, Vec<(ObjectLocation, Vec<u8>)>) {
    let n = args.tasks as usize;
    match args.workload {
        Workload::Mix => {
            let parents = generate(args.shape, n, args.degree as usize, args.length as usize);
            mix_dag(parents, &args.stores, uid, args.input_bytes, args.passes, args.output_bytes)
        }
        Workload::Stack => {
            let objects = input_objects(n, &args.stores, uid, args.input_bytes);
            (data_tasks(n, "stack", args.passes, &objects, |k| vec![k]), objects)
        }
        Workload::AllPairs => {
            let objects = input_objects(n, &args.stores, uid, args.input_bytes);
            let pairs: Vec<(usize, usize)> = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).collect();
            (data_tasks(pairs.len(), "compare", args.passes, &objects, |k| vec![pairs[k].0, pairs[k].1]), objects)
        }
    }
}

/// `count` input objects of `input_bytes` (named `<uid>/in-<k>`), placed on `stores`
/// round-robin, with their bytes.
pub fn input_objects(count: usize, stores: &[NodeStore], uid: u32, input_bytes: u64) -> Vec<(ObjectLocation, Vec<u8>)> {
    if stores.is_empty() {
        return Vec::new();
    }
    (0..count)
        .map(|k| {
            let at = stores[k % stores.len()];
            let loc =
                ObjectLocation { name: format!("{uid:08x}/in-{k}"), size: input_bytes, node: at.node, store: at.store };
            let data: Vec<u8> = (0..input_bytes).map(|b| (b.wrapping_mul(31) ^ k as u64) as u8).collect();
            (loc, data)
        })
        .collect()
}

/// `count` independent tasks running `handler` (`passes` over their inputs); task k
/// reads the objects `reads(k)` (indices into `objects`).
pub fn data_tasks(
    count: usize,
    handler: &str,
    passes: u32,
    objects: &[(ObjectLocation, Vec<u8>)],
    reads: impl Fn(usize) -> Vec<usize>,
) -> Vec<DagTask> {
    (0..count)
        .map(|k| DagTask {
            handler: handler.into(),
            args: passes.to_be_bytes().to_vec(),
            parents: Vec::new(),
            inputs: reads(k).into_iter().map(|o| objects[o].0.clone()).collect(),
        })
        .collect()
}

/// `mix` tasks with these parents; each root reads one input object of `input_bytes`
/// ([`input_objects`], in root order). Returns the tasks and the objects to put before
/// the job runs.
pub fn mix_dag(
    parents: Vec<Vec<usize>>,
    stores: &[NodeStore],
    uid: u32,
    input_bytes: u64,
    passes: u32,
    output_bytes: u32,
) -> (Vec<DagTask>, Vec<(ObjectLocation, Vec<u8>)>) {
    let mix_args = [passes.to_be_bytes(), output_bytes.to_be_bytes()].concat();
    let roots = parents.iter().filter(|p| p.is_empty()).count();
    let objects = input_objects(roots, stores, uid, input_bytes);
    let mut next = objects.iter();
    let tasks = parents
        .into_iter()
        .map(|parents| {
            let inputs = if parents.is_empty() {
                next.next().map(|(loc, _)| loc.clone()).into_iter().collect()
            } else {
                Vec::new()
            };
            DagTask { handler: "mix".into(), args: mix_args.clone(), parents, inputs }
        })
        .collect();
    (tasks, objects)
}

/// Runs `bolt dag`: prints the report as JSON.
pub fn run_cli(args: DagArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut cfg = ClientConfig::new(args.switch);
    cfg.tracker.record_tasks = true;
    cfg.tracker.max_attempts = args.max_attempts;
    cfg.agents = args.placement.agent_map();
    let policy = args.placement.policy()?;
    let uid = cfg.tracker.uid;
    let (tasks, objects) = build_dag(&args, uid);
    let input_owner = JobRef::new(uid, INPUT_OWNER_JID);
    for (loc, data) in &objects {
        store_client::put(SocketAddr::V4(loc.store), input_owner, &loc.name, data, store_client::DEFAULT_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("putting input {}: {e}", loc.name))?;
    }
    let dag = DagState::new(tasks)?;
    let deadline = Instant::now() + Duration::from_secs(args.timeout_s);
    let (_, report) = runtime.block_on(async {
        let mut client = Client::bind(cfg).await?;
        run_placed_dag(&mut client, dag, policy, deadline).await
    })?;
    let mut gc = serde_json::json!({ "kept": true });
    if !args.keep {
        let mut owners: Vec<JobRef> = report.jids.iter().map(|&j| JobRef::new(uid, j)).collect();
        owners.push(input_owner);
        let stores: Vec<SocketAddrV4> = args.stores.iter().map(|s| s.store).collect();
        let (objects, bytes, errors) = collect_garbage(&owners, &stores);
        gc = serde_json::json!({ "objects_deleted": objects, "bytes_deleted": bytes, "errors": errors });
    }
    let placement = policy.map_or("none", |p| p.name());
    let out = serde_json::json!({
        "workload": args.workload, "shape": args.shape, "placement": placement, "report": report, "gc": gc
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    anyhow::ensure!(report.done == report.tasks, "{} of {} tasks not done", report.tasks - report.done, report.tasks);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stores() -> Vec<NodeStore> {
        vec![
            NodeStore { node: 1, store: "10.0.1.2:7180".parse().unwrap() },
            NodeStore { node: 2, store: "10.0.2.2:7180".parse().unwrap() },
        ]
    }

    #[test]
    fn workloads_read_the_objects_they_say() {
        let objects = input_objects(5, &stores(), 7, 10);
        assert_eq!(objects.iter().map(|(o, _)| o.node).collect::<Vec<_>>(), [1, 2, 1, 2, 1]);
        assert!(objects.iter().all(|(o, d)| d.len() as u64 == o.size));
        let stack = data_tasks(5, "stack", 1, &objects, |k| vec![k]);
        assert!(stack.iter().enumerate().all(|(k, t)| t.inputs == [objects[k].0.clone()] && t.parents.is_empty()));
        let pairs: Vec<(usize, usize)> = (0..5).flat_map(|i| (i + 1..5).map(move |j| (i, j))).collect();
        let all_pairs = data_tasks(pairs.len(), "compare", 1, &objects, |k| vec![pairs[k].0, pairs[k].1]);
        assert_eq!(all_pairs.len(), 10);
        assert_eq!(all_pairs[9].inputs, [objects[3].0.clone(), objects[4].0.clone()]);
        // mix: one object per root, in root order; inner tasks read only their parents.
        let (tasks, objs) = mix_dag(generate(Shape::Pipeline, 6, 0, 3), &stores(), 7, 10, 1, 8);
        assert_eq!(objs.len(), 2);
        assert_eq!(tasks[3].inputs, [objs[1].0.clone()]);
        assert!(tasks[4].inputs.is_empty());
    }
}

//! DAG jobs with data on several hosts: each host runs an object store and executors
//! that know it; the client puts the inputs on the hosts' stores, releases tasks as
//! their parents finish, and checks every COMPLETE against its RESULT.
//!
//! - on loopback (three "hosts" as three stores and executor pools in this process): a
//!   fan-in DAG runs with every task done exactly once and every output where COMPLETE
//!   said it is; a DAG whose root input is missing fails that root and its descendants,
//!   visibly, and runs the rest;
//! - on the namespace testbed (root; skipped without, failed without under CI=true): a
//!   pipeline DAG with the stores on three worker hosts, executors in their executor
//!   namespaces, client in the switch namespace.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use bolt_tests::{netns_can_run, unique_name};
use scheduler_user::client::dag::{generate, DagState, DagTask, NodeState, Shape};
use scheduler_user::client::dag_run::{collect_garbage, mix_dag, run_dag, DagReport, NodeStore, INPUT_OWNER_JID};
use scheduler_user::client::{Client, ClientConfig, Summary};
use scheduler_user::executor::{self, CounterSnapshot, ExecutorConfig, ExecutorPool};
use scheduler_user::netns;
use scheduler_user::store::{self, client as store_client, ObjectLocation, StoreConfig, StoreHandle};
use scheduler_user::switch::{self, SwitchConfig};
use scheduler_user::testbed::{Layout, Testbed};

const DEADLINE: Duration = Duration::from_secs(60);
const T: Duration = Duration::from_secs(5);

type Host = NodeStore;

/// `parents` as `mix` tasks (2 passes, 512-byte outputs), root inputs on the hosts.
fn dag_of(
    parents: Vec<Vec<usize>>,
    hosts: &[Host],
    uid: u32,
    input_bytes: usize,
) -> (Vec<DagTask>, Vec<(ObjectLocation, Vec<u8>)>) {
    mix_dag(parents, hosts, uid, input_bytes as u64, 2, 512)
}

fn put_all(objects: &[(ObjectLocation, Vec<u8>)], uid: u32) {
    for (loc, data) in objects {
        let owner = scheduler_common::JobRef::new(uid, INPUT_OWNER_JID);
        store_client::put(SocketAddr::V4(loc.store), owner, &loc.name, data, T).expect("input put");
    }
}

/// Runs the DAG with a fresh client (tasks recorded, one attempt each, no resubmission
/// inside the deadline) and returns its final state, report and summary.
fn run(
    switch: SocketAddr,
    tasks: Vec<DagTask>,
    objects: &[(ObjectLocation, Vec<u8>)],
    uid: u32,
) -> (DagState, DagReport, Summary) {
    put_all(objects, uid);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut cfg = ClientConfig::new(switch);
        cfg.tracker.uid = uid;
        cfg.tracker.record_tasks = true;
        cfg.tracker.max_attempts = 1;
        cfg.tracker.task_timeout = DEADLINE;
        let mut client = Client::bind(cfg).await.expect("client binds");
        let (dag, report) =
            run_dag(&mut client, DagState::new(tasks).unwrap(), Instant::now() + DEADLINE).await.expect("DAG runs");
        (dag, report, client.summary())
    })
}

/// Every done task's output is in the store of the host COMPLETE named (the report
/// counts COMPLETE/RESULT agreement; this reads each object back from that store).
fn assert_outputs_where_complete_said(dag: &DagState, report: &DagReport, hosts: &[Host]) {
    assert_eq!(report.output_mismatches, 0, "{report:?}");
    assert_eq!(report.outputs_where_complete_said, report.done, "{report:?}");
    for s in dag.states() {
        if let NodeState::Done { output: Some(o) } = s {
            let host = hosts.iter().find(|h| h.node == o.node).expect("output on a known host");
            assert_eq!(host.store, o.store, "output {} names its host's store", o.name);
            let data =
                store_client::get(SocketAddr::V4(o.store), &o.name, T).expect("output readable where COMPLETE said");
            assert_eq!(data.len() as u64, o.size);
        }
    }
}

fn exactly_once(summary: &Summary, executors: &CounterSnapshot, tasks: usize) {
    assert_eq!(summary.completed as usize, tasks, "{summary:?}");
    assert_eq!((summary.resubmitted, summary.duplicates, summary.failed), (0, 0, 0), "{summary:?}");
    assert_eq!(executors.tasks_ok as usize, tasks, "each task ran once: {executors:?}");
}

struct Loopback {
    switch: switch::SwitchHandle,
    stores: Vec<StoreHandle>,
    pools: Vec<ExecutorPool>,
}

impl Loopback {
    fn new(hosts: u16) -> Loopback {
        let switch = switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), ..SwitchConfig::default() })
            .expect("switch");
        let mut stores = Vec::new();
        let mut pools = Vec::new();
        for node in 1..=hosts {
            let s = store::spawn(StoreConfig::new("127.0.0.1:0".parse().unwrap())).expect("store");
            let SocketAddr::V4(addr) = s.addr() else { unreachable!("bound to IPv4") };
            let mut cfg = ExecutorConfig::new(switch.local_addr(), 0);
            cfg.node = node;
            cfg.executors = 2;
            cfg.store = Some(addr);
            pools.push(executor::spawn(cfg).expect("executors"));
            stores.push(s);
        }
        Loopback { switch, stores, pools }
    }

    fn hosts(&self) -> Vec<Host> {
        self.stores
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let SocketAddr::V4(store) = s.addr() else { unreachable!() };
                Host { node: i as u16 + 1, store }
            })
            .collect()
    }

    fn executors(&self) -> CounterSnapshot {
        let mut total = CounterSnapshot::default();
        for p in &self.pools {
            let c = p.counters();
            total.tasks_ok += c.tasks_ok;
            total.tasks_failed += c.tasks_failed;
            total.local_reads += c.local_reads;
            total.remote_fetches += c.remote_fetches;
        }
        total
    }
}

#[test]
fn fan_in_dag_on_loopback_runs_each_task_once_with_outputs_where_complete_said() {
    let lb = Loopback::new(3);
    let hosts = lb.hosts();
    let uid = 0x0da7_0001;
    let (tasks, objects) = dag_of(generate(Shape::FanIn, 31, 3, 0), &hosts, uid, 4096);
    let n = tasks.len();
    let (dag, report, summary) = run(lb.switch.local_addr(), tasks, &objects, uid);
    assert!(dag.is_final(), "{report:?}");
    assert_eq!((report.done, report.failed, report.unfinished), (n, 0, 0), "{report:?}");
    assert_outputs_where_complete_said(&dag, &report, &hosts);
    let ex = lb.executors();
    exactly_once(&summary, &ex, n);
    // Inputs spread over three hosts are read locally and fetched remotely.
    assert!(ex.local_reads > 0 && ex.remote_fetches > 0, "{ex:?}");
    // Garbage collection by job empties every store.
    let mut owners: Vec<_> = report.jids.iter().map(|&j| scheduler_common::JobRef::new(uid, j)).collect();
    owners.push(scheduler_common::JobRef::new(uid, INPUT_OWNER_JID));
    let stores: Vec<SocketAddrV4> = hosts.iter().map(|h| h.store).collect();
    let (deleted, _, errors) = collect_garbage(&owners, &stores);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(deleted as usize, n + objects.len());
    assert!(lb.stores.iter().all(|s| s.snapshot().objects == 0));
}

#[test]
fn a_failed_task_fails_its_descendants_visibly_and_the_rest_runs() {
    let lb = Loopback::new(2);
    let hosts = lb.hosts();
    let uid = 0x0da7_0002;
    // Two pipelines of 4: 0→1→2→3 and 4→5→6→7. Task 0's input is never put.
    let (tasks, mut objects) = dag_of(generate(Shape::Pipeline, 8, 0, 4), &hosts, uid, 1000);
    objects.retain(|(loc, _)| !loc.name.ends_with("/in-0"));
    let (dag, report, _) = run(lb.switch.local_addr(), tasks, &objects, uid);
    assert!(dag.is_final(), "{report:?}");
    assert_eq!((report.done, report.failed, report.failed_by_ancestor), (4, 1, 3), "{report:?}");
    let NodeState::Failed { reason } = dag.state(0) else { panic!("task 0 not failed: {:?}", dag.state(0)) };
    assert!(reason.contains("no object named") && reason.contains("in-0"), "the store's error travels: {reason}");
    for i in 1..4 {
        let NodeState::Failed { reason } = dag.state(i) else { panic!("task {i} not failed") };
        assert!(reason.starts_with("ancestor task 0 failed: input"), "{reason}");
    }
    assert!((4..8).all(|i| matches!(dag.state(i), NodeState::Done { .. })));
    assert_outputs_where_complete_said(&dag, &report, &hosts);
}

#[test]
fn pipeline_dag_on_the_namespace_testbed_with_data_on_three_hosts() {
    if !netns_can_run() {
        return;
    }
    let layout = Layout::plan(&unique_name("bd"), 3, 1).expect("layout");
    let testbed = Testbed::create(layout).expect("testbed");
    let layout = testbed.layout().clone();
    let switch_addr = SocketAddr::V4(layout.switch_socket());
    // Field order below is drop order: pools and stores before the switch and namespaces.
    let switch = netns::run_in(&layout.switch_ns, move || {
        switch::spawn(SwitchConfig { listen: switch_addr, ..SwitchConfig::default() })
    })
    .expect("switch");
    let mut stores = Vec::new();
    let mut pools = Vec::new();
    let mut hosts = Vec::new();
    for w in &layout.workers {
        let addr = w.store_addr();
        let s = netns::run_in(&w.host_ns, move || store::spawn(StoreConfig::new(SocketAddr::V4(addr)))).expect("store");
        let mut cfg = ExecutorConfig::new(switch_addr, 0);
        cfg.node = w.node;
        cfg.executors = 2;
        cfg.store = Some(addr);
        pools.push(netns::run_in(&w.exec().ns, move || executor::spawn(cfg)).expect("executors"));
        stores.push(s);
        hosts.push(Host { node: w.node, store: addr });
    }
    let uid = 0x0da7_0003;
    let (tasks, objects) = dag_of(generate(Shape::Pipeline, 30, 0, 10), &hosts, uid, 1 << 16);
    let n = tasks.len();
    let client_ns = layout.switch_ns.clone();
    let (dag, report, summary) = {
        let hosts = hosts.clone();
        std::thread::spawn(move || {
            netns::enter(&client_ns).expect("enter the switch namespace");
            let out = run(switch_addr, tasks, &objects, uid);
            assert_outputs_where_complete_said(&out.0, &out.1, &hosts);
            out
        })
        .join()
        .expect("client thread")
    };
    assert!(dag.is_final(), "{report:?}");
    assert_eq!((report.done, report.failed, report.unfinished), (n, 0, 0), "{report:?}");
    let mut ex = CounterSnapshot::default();
    for p in &pools {
        let c = p.counters();
        ex.tasks_ok += c.tasks_ok;
        ex.remote_fetches += c.remote_fetches;
        ex.local_reads += c.local_reads;
    }
    exactly_once(&summary, &ex, n);
    assert!(ex.remote_fetches > 0, "data crossed hosts: {ex:?}");
    drop(pools);
    drop(stores);
    drop(switch);
    drop(testbed);
}

/// `bolt testbed`'s services start a store on every worker host, and `bolt dag` (run in
/// the switch namespace) puts its inputs there, runs a fan-out DAG on executors that know
/// their host's store, reports every task done with its output where COMPLETE said, and
/// deletes the job's objects: the stores end empty.
#[test]
fn bolt_dag_runs_on_the_testbeds_stores_and_collects_its_garbage() {
    if !netns_can_run() {
        return;
    }
    use scheduler_user::testbed::{services, ServicesConfig};
    let layout = Layout::plan(&unique_name("bg"), 2, 1).expect("layout");
    let testbed = Testbed::create(layout).expect("testbed");
    let layout = testbed.layout().clone();
    let bolt = std::path::PathBuf::from(env!("CARGO_BIN_EXE_bolt-cli"));
    let cfg =
        ServicesConfig { bolt: bolt.clone(), agents: false, stores: true, agent_args: vec![], switch_args: vec![] };
    services::start(&layout, &cfg).expect("switch and stores start");
    struct Stop(String);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = services::stop(&self.0);
        }
    }
    let _stop = Stop(layout.name.clone());
    let switch_addr = SocketAddr::V4(layout.switch_socket());
    let mut pools = Vec::new();
    let mut store_args = Vec::new();
    for w in &layout.workers {
        let mut cfg = ExecutorConfig::new(switch_addr, 0);
        cfg.node = w.node;
        cfg.executors = 2;
        cfg.store = Some(w.store_addr());
        pools.push(netns::run_in(&w.exec().ns, move || executor::spawn(cfg)).expect("executors"));
        store_args.extend(["--store".to_string(), format!("{}={}", w.node, w.store_addr())]);
    }
    let out = netns::command_in(&layout.switch_ns, &bolt)
        .expect("command")
        .args(["dag", "--switch", &switch_addr.to_string(), "--shape", "fan-out", "--tasks", "21", "--degree", "4"])
        .args(&store_args)
        .args(["--input-bytes", "100000", "--timeout-s", "30"])
        .output()
        .expect("bolt dag runs");
    assert!(out.status.success(), "bolt dag: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    if let Err(e) = bolt_tests::schema::check(&bolt_tests::schema::cli_schemas(), "dag", &v) {
        panic!("bolt dag output does not match docs/cli.schema.json: {e}\n{v:#}");
    }
    let r = &v["report"];
    assert_eq!(
        (r["tasks"].as_u64(), r["done"].as_u64(), r["output_mismatches"].as_u64()),
        (Some(21), Some(21), Some(0)),
        "{v:#}"
    );
    assert_eq!(r["outputs_where_complete_said"].as_u64(), Some(21));
    // 21 outputs and 1 input object deleted; the stores are empty again.
    assert_eq!(v["gc"]["objects_deleted"].as_u64(), Some(22), "{v:#}");
    for w in &layout.workers {
        let addr = w.store_addr();
        let probe = netns::run_in(&layout.switch_ns, move || {
            Ok(store_client::get(SocketAddr::V4(addr), "nothing", T).map(|_| ()).map_err(|e| e.to_string()))
        })
        .expect("probe");
        assert!(probe.unwrap_err().contains("no object named nothing"), "store on node {} answers", w.node);
    }
    let ok: u64 = pools.iter().map(|p| p.counters().tasks_ok).sum();
    assert_eq!(ok, 21, "each task ran once");
    drop(pools);
}

/// The RESULT path a front door builds on: a `stack` task's small output comes back
/// inline and equals the stored object; an unknown spec, an unknown handler and a
/// missing input come back as REFUSED or FAILED with their reason as text; an executor
/// without a store refuses SPEC tasks.
#[test]
fn results_and_error_messages_travel_back_to_the_client() {
    use scheduler_common::descriptor::Handler;
    use scheduler_common::{STATUS_FAILED, STATUS_OK, STATUS_REFUSED};
    use scheduler_user::client::spec_server::{SpecEntry, SpecServer};
    use scheduler_user::client::{TaskSpec, TaskState};

    let lb = Loopback::new(1);
    let host = lb.hosts()[0];
    let image = ObjectLocation { name: "img/0".into(), size: 3, node: host.node, store: host.store };
    store_client::put(SocketAddr::V4(host.store), scheduler_common::JobRef::new(7, 0), "img/0", &[1, 2, 250], T)
        .unwrap();
    let server = SpecServer::spawn("127.0.0.1".parse().unwrap()).unwrap();
    let port = server.addr().port();
    let spec = |handler: &str, inputs: Vec<ObjectLocation>| SpecEntry {
        handler: handler.into(),
        args: vec![],
        output: format!("out/{handler}"),
        inputs,
    };
    server.insert(1, spec("stack", vec![image.clone()]));
    server.insert(2, spec("blur", vec![image.clone()]));
    server.insert(3, spec("stack", vec![ObjectLocation { name: "img/none".into(), ..image.clone() }]));
    // Spec 4 is never inserted.
    let tasks: Vec<TaskSpec> =
        (1..=4).map(|id| TaskSpec::new(Handler::Spec { port, spec_id: id }, 1, 0).unwrap()).collect();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let states = runtime.block_on(async {
        let mut cfg = ClientConfig::new(lb.switch.local_addr());
        cfg.tracker.max_attempts = 1;
        cfg.tracker.task_timeout = DEADLINE;
        let mut client = Client::bind(cfg).await.unwrap();
        let jid = client.submit(&tasks).await.unwrap();
        let first = client.tracker().job(jid).map(|j| j.first_tid);
        assert!(client.wait_idle(Instant::now() + DEADLINE).await.unwrap());
        let states = client.tracker().states();
        (0..4).map(|k| first.and_then(|f| states.state_of(f + k))).collect::<Vec<_>>()
    });
    let ok = server.take_result(1).expect("RESULT of spec 1");
    assert_eq!(ok.status, STATUS_OK);
    let out = ok.output.expect("output ref");
    assert_eq!((out.node, out.store, out.size), (host.node, host.store, 88));
    assert_eq!(ok.inline, store_client::get(SocketAddr::V4(host.store), &out.name, T).unwrap());
    let unknown_handler = server.take_result(2).expect("RESULT of spec 2");
    assert_eq!(unknown_handler.status, STATUS_REFUSED);
    assert!(unknown_handler.message.contains("unknown data handler \"blur\""), "{}", unknown_handler.message);
    let missing = server.take_result(3).expect("RESULT of spec 3");
    assert_eq!(missing.status, STATUS_FAILED);
    assert!(missing.message.contains("no object named img/none"), "{}", missing.message);
    let unknown_spec = server.take_result(4).expect("RESULT of spec 4");
    assert_eq!(unknown_spec.status, STATUS_REFUSED);
    assert!(unknown_spec.message.contains("unknown_spec"), "{}", unknown_spec.message);
    let done = Some(TaskState::Done);
    let failed = Some(TaskState::Failed);
    assert_eq!(states, vec![done, failed, failed, failed]);

    // An executor without a store refuses SPEC tasks (nothing fetched, no RESULT).
    let bare =
        switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), ..SwitchConfig::default() }).unwrap();
    let pool = executor::spawn(ExecutorConfig::new(bare.local_addr(), 0)).unwrap();
    server.insert(5, spec("stack", vec![image]));
    let task = TaskSpec::new(Handler::Spec { port, spec_id: 5 }, 1, 0).unwrap();
    runtime.block_on(async {
        let mut cfg = ClientConfig::new(bare.local_addr());
        cfg.tracker.max_attempts = 1;
        let mut client = Client::bind(cfg).await.unwrap();
        client.submit(&[task]).await.unwrap();
        assert!(client.wait_idle(Instant::now() + DEADLINE).await.unwrap());
        assert_eq!(client.summary().failed, 1);
    });
    assert_eq!(pool.counters().tasks_refused, 1);
    assert!(server.take_result(5).is_none());
}

/// MATRIX's two data workloads as jobs: image stacking (each task reduces its own input
/// to 88 bytes) and all-pairs (a `compare` task per pair of inputs, 24 bytes each).
#[test]
fn image_stacking_and_all_pairs_run_with_their_outputs_where_complete_said() {
    use scheduler_user::client::dag_run::{data_tasks, input_objects};
    let lb = Loopback::new(2);
    let hosts = lb.hosts();
    for (uid, handler, output) in [(0x0da7_0005u32, "stack", 88u64), (0x0da7_0006, "compare", 24)] {
        let objects = input_objects(6, &hosts, uid, 50_000);
        let tasks = if handler == "stack" {
            data_tasks(6, "stack", 3, &objects, |k| vec![k])
        } else {
            let pairs: Vec<(usize, usize)> = (0..6).flat_map(|i| (i + 1..6).map(move |j| (i, j))).collect();
            data_tasks(pairs.len(), "compare", 3, &objects, |k| vec![pairs[k].0, pairs[k].1])
        };
        let n = tasks.len();
        let (dag, report, summary) = run(lb.switch.local_addr(), tasks, &objects, uid);
        assert_eq!((report.done, report.failed), (n, 0), "{handler}: {report:?}");
        assert_eq!(summary.completed as usize, n);
        assert_outputs_where_complete_said(&dag, &report, &hosts);
        assert!(dag.states().iter().all(|s| matches!(s, NodeState::Done { output: Some(o) } if o.size == output)));
    }
}

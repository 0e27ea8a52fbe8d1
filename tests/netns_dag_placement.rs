//! DAG jobs placed by their data on the namespace testbed: every worker host runs an
//! object store, an agent with the XDP program and executors; the client releases each
//! task as its parents finish and places it by its inputs' locations (MATRIX's
//! Algorithm 1): under MDL every data task is PINned to the host of its largest input
//! and runs there, once, with its output where its COMPLETE said.
//!
//! Needs root (namespaces, XDP, bpffs): skipped without, failed without under CI=true.

use std::net::SocketAddr;
use std::time::Duration;

use bolt_tests::{netns_can_run, unique_name};
use scheduler_user::bench::matrix::cluster::{DagRun, DataCluster};
use scheduler_user::client::dag::{generate, NodeState, Shape};
use scheduler_user::client::dag_run::{data_tasks, input_objects, mix_dag};
use scheduler_user::placement::PlacementPolicy;
use scheduler_user::store::client as store_client;
use scheduler_user::testbed::{Layout, Testbed};

const DEADLINE: Duration = Duration::from_secs(60);

/// Every task done once, every output readable from the store COMPLETE named, every
/// data task on the host of its largest input.
fn assert_placed_by_data(cluster: &DataCluster, run: &DagRun, tasks: usize) {
    let (r, s) = (&run.report, &run.summary);
    assert_eq!((r.done, r.failed, r.unfinished), (tasks, 0, 0), "{r:?}");
    assert_eq!((r.outputs_where_complete_said, r.output_mismatches), (tasks, 0), "{r:?}");
    assert_eq!((r.pinned, r.shared), (tasks, 0), "every task reads data, so MDL pins it: {r:?}");
    assert_eq!((r.data_tasks_done, r.data_tasks_on_largest_input_host), (tasks, tasks), "{r:?}");
    assert_eq!(s.completed as usize, tasks, "{s:?}");
    assert_eq!((s.resubmitted, s.duplicates, s.failed), (0, 0, 0), "{s:?}");
    let states = run.dag.states().to_vec();
    cluster
        .in_client_namespace(move || {
            for st in states {
                let NodeState::Done { output: Some(o) } = st else { panic!("task without an output: {st:?}") };
                let data = store_client::get(SocketAddr::V4(o.store), &o.name, Duration::from_secs(5))
                    .expect("output readable where COMPLETE said");
                assert_eq!(data.len() as u64, o.size);
            }
            Ok(())
        })
        .expect("outputs checked");
}

#[test]
fn under_mdl_every_data_task_of_a_dag_runs_once_on_its_largest_inputs_host() {
    if !netns_can_run() {
        return;
    }
    let testbed = Testbed::create(Layout::plan(&unique_name("dp"), 3, 1).expect("layout")).expect("testbed");
    let cluster = DataCluster::start(testbed.layout(), 2).expect("cluster");
    let hosts = cluster.hosts();

    // A fan-in DAG: roots read a 64 KiB input each, inner tasks their parents' 4 KiB
    // outputs, which sit on up to three hosts.
    let uid = 0x3a7d_0001;
    let (tasks, objects) = mix_dag(generate(Shape::FanIn, 31, 3, 0), &hosts, uid, 1 << 16, 2, 4096);
    let n = tasks.len();
    let before = cluster.executor_counters();
    let run = cluster.run_dag(tasks, &objects, Some(PlacementPolicy::Mdl), uid, DEADLINE).expect("fan-in runs");
    assert_placed_by_data(&cluster, &run, n);
    let ex = cluster.executor_counters();
    assert_eq!(ex.tasks_ok - before.tasks_ok, n as u64, "each task ran once: {ex:?}");
    assert!(ex.local_reads - before.local_reads >= n as u64, "every task read its largest input locally: {ex:?}");
    cluster.collect(uid, &run.report).expect("garbage collected");

    // Image stacking with locality 3: 8 files over the hosts, each read by 3 tasks.
    let uid = 0x3a7d_0002;
    let objects = input_objects(8, &hosts, uid, 1 << 16);
    let tasks = data_tasks(24, "stack", 2, &objects, |k| vec![k % 8]);
    let run = cluster.run_dag(tasks, &objects, Some(PlacementPolicy::Mdl), uid, DEADLINE).expect("stacking runs");
    assert_placed_by_data(&cluster, &run, 24);
    cluster.collect(uid, &run.report).expect("garbage collected");
    assert!(cluster.stored_objects().iter().all(|&o| o == 0), "{:?}", cluster.stored_objects());

    for stats in cluster.stop().expect("agents stop") {
        assert_eq!((stats.pin_refused, stats.pin_drained), (0, 0), "{stats:?}");
    }
    drop(testbed);
}

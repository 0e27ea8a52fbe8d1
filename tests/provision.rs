//! `bolt provision` on the namespace testbed, with real processes: the switch and the
//! provisioner run as `bolt` processes (the provisioner in the worker host's namespace,
//! reading the switch's metrics endpoint), and the executors it starts are `bolt
//! executor` processes in the executor namespace. A backlog that grows faster than the
//! threshold gets executors; once it is drained they retire by themselves, idle, at the
//! end of a lease period, while the provisioner still runs.
//!
//! Needs root (namespaces): skipped without, failed without under CI=true.

use std::time::{Duration, Instant};

use bolt_tests::cluster::{cluster_can_run, Cluster, Process, Workload, DEADLINE};
use scheduler_common::descriptor::Handler;
use serde_json::Value;

const BOLT: &str = env!("CARGO_BIN_EXE_bolt-cli");
const LEASE_PERIOD_MS: u64 = 4_000;
const RETIRE_IDLE_MS: u64 = 1_000;
const RETIRE_WINDOW_MS: u64 = 800;
const INTERVAL_MS: u64 = 200;
const MAX_EXECUTORS: usize = 4;

/// The provisioner's --json events so far (its log holds them between tracing lines).
fn events(p: &Process) -> Vec<Value> {
    p.log().lines().filter(|l| l.starts_with('{')).filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

#[test]
fn the_provisioner_starts_executors_on_a_growing_backlog_and_they_retire_at_the_lease_boundary() {
    if !cluster_can_run() {
        return;
    }
    let mut cluster = Cluster::new(BOLT, 1);
    let metrics = format!("{}:9171", cluster.layout().switch_socket().ip());
    cluster.start_switch(&["--metrics", &metrics]);
    let args: Vec<String> = [
        "provision",
        "--switch-metrics",
        &metrics,
        "--switch",
        &cluster.layout().switch_socket().to_string(),
        "--netns",
        &cluster.worker().executors[0].ns,
        "--node",
        &cluster.worker().node.to_string(),
        "--interval-ms",
        &INTERVAL_MS.to_string(),
        "--growth-threshold",
        "20",
        "--max-executors",
        &MAX_EXECUTORS.to_string(),
        "--lease-period-ms",
        &LEASE_PERIOD_MS.to_string(),
        "--retire-idle-ms",
        &RETIRE_IDLE_MS.to_string(),
        "--retire-window-ms",
        &RETIRE_WINDOW_MS.to_string(),
        "--executor-arg=--stats-interval-s=0",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let provisioner = Process::start(BOLT.as_ref(), &cluster.worker().host_ns, &args, "provisioning executors");
    // Reads of an empty queue start nothing.
    std::thread::sleep(Duration::from_millis(3 * INTERVAL_MS));
    assert!(of_kind(&events(&provisioner), "started").is_empty(), "started on an empty queue:\n{}", provisioner.log());

    // 120 tasks of 50 ms, 10 every 150 ms: the backlog grows at about 66 tasks/s.
    let workload =
        Workload::new(12, 10, Duration::from_millis(150), Handler::Sleep { micros: 50_000 }, Duration::from_secs(30));
    let outcome = cluster.client(workload).join().expect("client thread").expect("client");
    outcome.assert_nothing_lost("provisioned executors");
    let drained = Instant::now();

    // Every executor started retires by itself (the provisioner keeps running).
    let deadline = Instant::now() + DEADLINE;
    let all = loop {
        let all = events(&provisioner);
        let (started, exited) = (of_kind(&all, "started").len(), of_kind(&all, "exited").len());
        if started > 0 && exited == started {
            break all;
        }
        assert!(Instant::now() < deadline, "executors did not retire:\n{}", provisioner.log());
        std::thread::sleep(Duration::from_millis(100));
    };
    let started = of_kind(&all, "started");
    let exited = of_kind(&all, "exited");
    assert!(
        (2..=MAX_EXECUTORS).contains(&started.len()),
        "{} executors started for a 66 tasks/s backlog growth with a threshold of 20 (max {MAX_EXECUTORS}):\n{}",
        started.len(),
        provisioner.log()
    );
    // Each start followed a read whose backlog growth was over the threshold.
    for s in &started {
        let t = s["t_s"].as_f64().unwrap();
        let read = of_kind(&all, "read").into_iter().find(|r| r["t_s"].as_f64() == Some(t)).expect("its read");
        let growth = read["growth"][0].as_f64().unwrap();
        assert!(growth > 20.0, "started at a growth of {growth} tasks/s: {read}");
        assert_eq!(s["resources"], 0, "tasks needing no resource get unconstrained executors");
    }
    let period = LEASE_PERIOD_MS as f64 / 1000.0;
    let window = RETIRE_WINDOW_MS as f64 / 1000.0;
    // An exit is seen at the next read: up to one interval late, plus process start-up.
    let slack = (2 * INTERVAL_MS) as f64 / 1000.0;
    for e in &exited {
        assert_eq!(e["success"], true, "an executor failed: {e}");
        let lived = e["lived_s"].as_f64().unwrap();
        let into_period = lived % period;
        assert!(
            lived >= period - window && (into_period >= period - window || into_period <= slack),
            "retired {lived:.2} s after its start: not within {window} s of a {period} s period's end"
        );
    }
    println!(
        "{} executors started, all retired; lifetimes {:?} s; drained {:.1} s before the last retirement",
        started.len(),
        exited.iter().map(|e| e["lived_s"].as_f64().unwrap()).collect::<Vec<_>>(),
        drained.elapsed().as_secs_f64()
    );
}

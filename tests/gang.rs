//! Gang jobs on loopback: a software switch, executor pools that join one by one, and a
//! client with gang jobs (`client::gang`). A gang starts all its tasks together however
//! far apart its executors arrive; a gang that cannot form gives up, its tasks go back to
//! the queue unrun, and they run exactly once when enough executors come.

use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use scheduler_user::client::{Client, ClientConfig, TaskSpec};
use scheduler_user::executor::{self, ExecutorConfig, ExecutorPool};
use scheduler_user::switch::{self, SwitchConfig, SwitchHandle};

const DEADLINE: Duration = Duration::from_secs(30);
const TASK: Duration = Duration::from_millis(200);

fn start_switch() -> SwitchHandle {
    switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), ..SwitchConfig::default() })
        .expect("switch starts")
}

/// One executor on its own node, so that starts are told apart by node.
fn executor(switch: &SwitchHandle, node: u16) -> ExecutorPool {
    let mut cfg = ExecutorConfig::new(switch.local_addr(), 0);
    cfg.node = node;
    executor::spawn(cfg).expect("executor starts")
}

fn client(switch: &SwitchHandle, formation: Duration) -> (tokio::runtime::Runtime, Client) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut cfg = ClientConfig::new(switch.local_addr());
    cfg.tracker.record_tasks = true;
    cfg.tracker.max_attempts = 20;
    cfg.tracker.task_timeout = DEADLINE;
    cfg.tracker.gang_formation = formation;
    let client = runtime.block_on(Client::bind(cfg)).expect("client binds");
    (runtime, client)
}

#[test]
fn a_gang_starts_all_its_tasks_together_when_its_last_executor_arrives() {
    let switch = start_switch();
    let (runtime, mut client) = client(&switch, Duration::from_secs(5));
    let spec = TaskSpec::new(Handler::Sleep { micros: TASK.as_micros() as u32 }, 1, 0).unwrap();
    client.add_gang_job(&[spec; 4]).unwrap();
    let mut pools = Vec::new();
    let first = Instant::now();
    // Executors arrive 150 ms apart: without the gang, the first would have started (and
    // finished) its 200-ms task before the last one came.
    for node in 1..=4u16 {
        pools.push(executor(&switch, node));
        runtime.block_on(client.drive_until(Instant::now() + Duration::from_millis(150))).unwrap();
    }
    let arrived = first.elapsed();
    assert!(runtime.block_on(client.wait_idle(Instant::now() + DEADLINE)).unwrap(), "{:?}", client.summary());
    let s = client.summary();
    assert_eq!((s.submitted, s.completed, s.failed, s.lost, s.resubmitted), (4, 4, 0, 0, 0), "{s:?}");
    let records = client.take_records();
    let starts: Vec<u64> = records.iter().map(|r| r.start_unix_ns).collect();
    let spread = Duration::from_nanos(starts.iter().max().unwrap() - starts.iter().min().unwrap());
    let mut nodes: Vec<u16> = records.iter().map(|r| r.node).collect();
    nodes.sort();
    assert_eq!(nodes, vec![1, 2, 3, 4], "one task per executor");
    println!("4 executors arrived over {arrived:?}; the gang's 4 starts within {spread:?}");
    assert!(spread < TASK / 4, "the gang's tasks started {spread:?} apart (executors arrived over {arrived:?})");
    assert_eq!(client.gang_stats().started, 1);
    let ran: u64 = pools.into_iter().map(|p| p.shutdown().tasks_run).sum();
    assert_eq!(ran, 4);
}

#[test]
fn a_gang_that_cannot_form_returns_its_tasks_unrun_and_loses_nothing() {
    let switch = start_switch();
    let (runtime, mut client) = client(&switch, Duration::from_millis(300));
    let spec = TaskSpec::new(Handler::Sleep { micros: 10_000 }, 1, 0).unwrap();
    client.add_gang_job(&[spec; 3]).unwrap();
    // Two executors for a gang of three: it cannot form.
    let mut pools = vec![executor(&switch, 1), executor(&switch, 2)];
    runtime.block_on(client.drive_until(Instant::now() + Duration::from_millis(1_200))).unwrap();
    let gave_up = client.gang_stats().gave_up;
    assert!(gave_up >= 2, "the gang gave up {gave_up} times in 1.2 s with a 300-ms formation timeout");
    assert_eq!(pools.iter().map(|p| p.counters().tasks_run).sum::<u64>(), 0, "a member ran alone");
    let s = client.summary();
    assert_eq!((s.completed, s.failed, s.lost), (0, 0, 0), "{s:?}");
    assert!(s.resubmitted >= 2, "the tasks went back to the queue: {s:?}");
    // A third executor: the gang forms, and each task runs exactly once.
    pools.push(executor(&switch, 3));
    assert!(runtime.block_on(client.wait_idle(Instant::now() + DEADLINE)).unwrap(), "{:?}", client.summary());
    let s = client.summary();
    assert_eq!((s.submitted, s.completed, s.failed, s.lost, s.duplicates), (3, 3, 0, 0, 0), "{s:?}");
    let ran: u64 = pools.into_iter().map(|p| p.shutdown().tasks_run).sum();
    assert_eq!(ran, 3, "each task ran once");
    println!("gave up {gave_up} times, then formed: {:?}", client.gang_stats());
}

#[test]
fn competing_gangs_form_one_after_the_other_without_deadlock() {
    let switch = start_switch();
    let (runtime, mut client) = client(&switch, Duration::from_secs(1));
    let task = |prio| TaskSpec::new(Handler::Sleep { micros: 50_000 }, prio, 0).unwrap();
    // Gang A (priority 2) gets two executors, which wait for a third. Then gang B
    // (priority 1, served first) and two more executors come: they take B's tasks while A
    // forms. Were both to hold executors, each would wait for a third that never comes.
    client.add_gang_job(&[task(2); 3]).unwrap();
    let mut pools: Vec<ExecutorPool> = (1..=2u16).map(|node| executor(&switch, node)).collect();
    let deadline = Instant::now() + DEADLINE;
    while client.gang_waiting() < 2 {
        assert!(Instant::now() < deadline, "gang A's first members never claimed: {:?}", client.summary());
        runtime.block_on(client.drive_until(Instant::now() + Duration::from_millis(10))).unwrap();
    }
    client.add_gang_job(&[task(1); 3]).unwrap();
    runtime.block_on(client.flush());
    // B's tasks are queued ahead of A's third when the next executors ask.
    std::thread::sleep(Duration::from_millis(20));
    pools.extend((3..=4u16).map(|node| executor(&switch, node)));
    assert!(runtime.block_on(client.wait_idle(Instant::now() + DEADLINE)).unwrap(), "{:?}", client.summary());
    let s = client.summary();
    assert_eq!((s.submitted, s.completed, s.failed, s.lost, s.duplicates), (6, 6, 0, 0, 0), "{s:?}");
    let g = client.gang_stats().clone();
    assert_eq!(g.started, 2, "{g:?}");
    assert!(g.busy_denied > 0, "B's claims were turned away while A formed: {g:?}");
    let ran: u64 = pools.into_iter().map(|p| p.shutdown().tasks_run).sum();
    assert_eq!(ran, 6, "each task ran once");
    println!("{g:?}");
}

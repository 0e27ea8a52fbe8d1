//! Learned placement (RLQ) on the namespace testbed: two worker types of different speed
//! on two hosts, a client whose LinUCB policy picks each task's type; the heavy class
//! ends up on the fast type, as the COMPLETEs' node ids show.
//!
//! Needs root and iproute2 (network namespaces): skipped without, failed without under
//! CI=true. The namespaces are named per test and removed by the testbed's guard; every
//! wait is bounded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use bolt_tests::{is_root, require, unique_name};
use scheduler_common::descriptor::Handler;
use scheduler_user::{
    client::{learned::LearnedPlacement, Client, ClientConfig, TaskSpec},
    executor::{self, ExecutorConfig, ExecutorPool},
    netns,
    rlq::{Objective, PolicyConfig, PolicyKind, WorkerType},
    switch::{self, SwitchConfig, SwitchHandle},
    testbed::{Layout, Testbed},
};

const DEADLINE: Duration = Duration::from_secs(60);
/// Sleep of the heavy and the light class at speed 1, µs.
const HEAVY_US: u32 = 200_000;
const LIGHT_US: u32 = 10_000;
const TASKS: usize = 60;
/// The last this many heavy tasks are the ones checked.
const CHECKED: usize = 12;

fn can_run() -> bool {
    require(is_root() && Command::new("ip").arg("-V").output().is_ok(), "root and iproute2 for network namespaces")
}

struct Rig {
    // Field order is drop order: components before the namespaces they live in.
    pools: Vec<ExecutorPool>,
    switch: Option<SwitchHandle>,
    testbed: Testbed,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.pools.clear();
        self.switch.take();
    }
}

#[test]
fn the_learned_policy_sends_the_heavy_class_to_the_fast_type() {
    if !can_run() {
        return;
    }
    let layout = Layout::plan(&unique_name("rq"), 2, 1).expect("layout");
    let testbed = Testbed::create(layout).expect("testbed");
    let switch_addr = SocketAddr::V4(testbed.layout().switch_socket());
    let switch = netns::run_in(&testbed.layout().switch_ns, move || {
        switch::spawn(SwitchConfig { listen: switch_addr, ..SwitchConfig::default() })
    })
    .expect("switch");
    let mut rig = Rig { pools: Vec::new(), switch: Some(switch), testbed };
    // Type 0: bit 0, speed 0.5 on worker 1; type 1: bit 1, speed 2 on worker 2.
    let types = vec![
        WorkerType { bit: 0, speed: 0.5, cost_per_s: 1.0, replicas: 1 },
        WorkerType { bit: 1, speed: 2.0, cost_per_s: 5.0, replicas: 1 },
    ];
    let nodes: Vec<u16> = rig.testbed.layout().workers.iter().map(|w| w.node).collect();
    for (worker, ty) in rig.testbed.layout().workers.iter().zip(&types) {
        let mut cfg = ExecutorConfig::new(switch_addr, ty.resources());
        cfg.node = worker.node;
        cfg.speed = ty.speed;
        let pool = netns::run_in(&worker.exec().ns, move || executor::spawn(cfg)).expect("executors start");
        rig.pools.push(pool);
    }
    let fast_node = nodes[1];

    let mut cfg = PolicyConfig::new(PolicyKind::LinUcb, 2, types, Objective::ExecTime);
    cfg.seed = 3;
    // Tasks of 0.1–0.4 s: rewards in tenths of seconds keep LinUCB's widths in proportion.
    cfg.reward_scale = 10.0;
    let placement = LearnedPlacement::new(cfg, None).expect("placement");
    let ns = rig.testbed.layout().switch_ns.clone();
    let run = std::thread::spawn(move || -> anyhow::Result<_> {
        netns::enter(&ns)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async move {
            let mut cc = ClientConfig::new(switch_addr);
            cc.tracker.task_timeout = DEADLINE;
            cc.tracker.max_attempts = 1;
            cc.tracker.record_tasks = true;
            let mut client = Client::bind(cc).await?;
            client.set_learned(placement);
            let mut class_of = HashMap::new();
            let deadline = Instant::now() + DEADLINE;
            for i in 0..TASKS {
                // Every third task is heavy.
                let (class, micros) = if i % 3 == 0 { (1u8, HEAVY_US) } else { (0u8, LIGHT_US) };
                let mut spec = TaskSpec::new(Handler::Sleep { micros }, 1, 0)?;
                spec.class = class;
                let tid = client.tracker().next_tid();
                class_of.insert(tid, class);
                client.submit(&[spec]).await?;
                client.drive_until(Instant::now() + Duration::from_millis(40)).await?;
            }
            let idle = client.wait_idle(deadline).await?;
            let records = client.take_records();
            let report = client.learned().map(|p| p.report());
            Ok((idle, client.summary(), records, class_of, report))
        })
    });
    let (idle, summary, records, class_of, report) = run.join().expect("client thread").expect("client");
    assert!(idle, "client not done in time: {summary:?}");
    assert_eq!((summary.completed, summary.failed), (TASKS as u64, 0), "{summary:?}");
    let report = report.expect("placement report");
    assert_eq!(report.stats.decisions, TASKS as u64);
    assert_eq!(report.load_per_type, vec![0, 0], "every decision completed");
    let mut heavy: Vec<_> = records.iter().filter(|r| class_of[&r.tid] == 1).collect();
    heavy.sort_by_key(|r| r.tid);
    assert_eq!(heavy.len(), TASKS / 3);
    let late = &heavy[heavy.len() - CHECKED..];
    let on_fast = late.iter().filter(|r| r.node == fast_node).count();
    eprintln!(
        "heavy tasks on the fast type: {on_fast}/{CHECKED} of the last; decisions per type {:?}; \
         decide {:.1} us, update {:.1} us",
        report.stats.decisions_per_type, report.mean_decide_us, report.mean_update_us
    );
    assert!(on_fast >= CHECKED - 2, "only {on_fast} of the last {CHECKED} heavy tasks ran on the fast type");
    // The fast type really is faster: its run times are a quarter of the slow type's.
    let run_ms = |node: u16| {
        let r: Vec<f64> = heavy.iter().filter(|r| r.node == node).map(|r| r.run_ns as f64 / 1e6).collect();
        r.iter().sum::<f64>() / r.len().max(1) as f64
    };
    assert!(run_ms(fast_node) < 130.0, "heavy tasks took {:.1} ms on the fast type", run_ms(fast_node));
}

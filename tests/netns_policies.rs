//! The agent's policies on the namespace testbed, XDP attached (generic mode):
//!
//! - a lease sends a task none of the host's executors can run back to tier 2, and it
//!   still runs exactly once when an executor that can run it appears;
//! - work stealing between two hosts under loss and duplication of the STEAL messages
//!   (nftables in the hosts' namespaces) loses and duplicates no task.
//!
//! Needs root (namespaces, XDP, bpffs) and nft: skipped without, failed without under
//! CI=true. Every namespace, pin and nftables table is named per test and removed by
//! guards; every wait is bounded.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bolt_tests::{client_in, cluster::Impairment, is_root, require, unique_name};
use scheduler_common::{descriptor::Handler, maps::Counter, maps::PIN_ROOT};
use scheduler_user::{
    agent::{self, AgentHandle, StopMode},
    client::{Summary, TaskSpec},
    executor::{self, ExecutorConfig, ExecutorPool},
    netns,
    switch::{self, SwitchConfig, SwitchHandle},
    testbed::{services::agent_args, Layout, Testbed, WorkerHost},
    xdp::{CounterSnapshot, PinDir, XdpMaps},
};

const DEADLINE: Duration = Duration::from_secs(60);

fn can_run() -> bool {
    require(
        is_root()
            && Path::new("/sys/fs/bpf").is_dir()
            && Command::new("ip").arg("-V").output().is_ok()
            && Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success()),
        "root, iproute2, nft and /sys/fs/bpf for network namespaces, XDP and packet loss",
    )
}

/// A testbed of `workers` hosts and the switch running in it.
struct Rig {
    // Field order is drop order: components before the namespaces they live in.
    switch: Option<SwitchHandle>,
    testbed: Testbed,
}

impl Rig {
    fn new(workers: u16) -> Rig {
        let layout = Layout::plan(&unique_name("bp"), workers, 1).expect("layout");
        let testbed = Testbed::create(layout).expect("testbed");
        let listen = SocketAddr::V4(testbed.layout().switch_socket());
        let switch = netns::run_in(&testbed.layout().switch_ns, move || {
            switch::spawn(SwitchConfig { listen, ..SwitchConfig::default() })
        })
        .expect("switch");
        Rig { switch: Some(switch), testbed }
    }

    fn worker(&self, i: usize) -> &WorkerHost {
        &self.testbed.layout().workers[i]
    }

    fn switch_addr(&self) -> SocketAddr {
        SocketAddr::V4(self.testbed.layout().switch_socket())
    }

    /// Worker `i`'s agent on a thread of this process, with the testbed's arguments
    /// (its peers included) plus `extra`.
    fn agent(&self, i: usize, extra: &[&str]) -> AgentHandle {
        let mut args = agent_args(self.testbed.layout(), self.worker(i));
        args.extend(extra.iter().map(|s| s.to_string()));
        let cfg = agent::config_from_args(args).expect("agent arguments");
        let handle = netns::run_in(&self.worker(i).host_ns, move || agent::spawn(cfg)).expect("agent starts");
        assert!(handle.mode().is_xdp(), "agent not in XDP mode: {:?}", handle.mode());
        handle
    }

    fn executors(&self, i: usize, executors: u16, resources: u8) -> ExecutorPool {
        let mut cfg = ExecutorConfig::new(self.switch_addr(), resources);
        cfg.node = self.worker(i).node;
        cfg.executors = executors;
        netns::run_in(&self.worker(i).exec().ns, move || executor::spawn(cfg)).expect("executors start")
    }

    fn client(&self, specs: Vec<TaskSpec>) -> std::thread::JoinHandle<anyhow::Result<(bool, Summary)>> {
        client_in(&self.testbed.layout().switch_ns, self.switch_addr(), specs, DEADLINE)
    }

    fn maps(&self, i: usize) -> XdpMaps {
        let dir = PinDir::under(Path::new(PIN_ROOT), self.worker(i).pin_name()).unwrap();
        XdpMaps::open_pinned(&dir).expect("pinned maps")
    }

    fn counters(&self, i: usize) -> CounterSnapshot {
        self.maps(i).counters().unwrap()
    }

    fn queued(&self, i: usize) -> i64 {
        self.maps(i).occupancy().iter().sum()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.switch.take();
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every task submitted completed once, none failed, none was sent twice.
fn assert_all_completed(result: anyhow::Result<(bool, Summary)>, tasks: u64) {
    let (idle, s) = result.expect("client");
    assert!(idle, "client not done in time: {s:?}");
    assert_eq!((s.submitted, s.completed, s.failed, s.unfinished), (tasks, tasks, 0, 0), "{s:?}");
    assert_eq!((s.resubmitted, s.duplicates, s.lost), (0, 0, 0), "{s:?}");
}

#[test]
fn a_lease_returns_a_task_no_executor_of_the_host_can_run() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let agent = rig.agent(0, &["--lease-ms", "100"]);
    // The node offers every resource (tier 2 refills it with anything); its executors
    // offer bit 0 only.
    let narrow = rig.executors(0, 2, 0b01);
    let runnable = TaskSpec::new(Handler::Noop, 1, 0b01).unwrap();
    let unrunnable = TaskSpec::new(Handler::Noop, 1, 0b10).unwrap();
    let mut specs = vec![runnable; 20];
    specs.insert(5, unrunnable);
    let client = rig.client(specs);
    // The task cycles through put-backs until its lease expires; then it goes back to tier 2.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let expired = rig.counters(0).get(Counter::Expired) + agent.stats().lease_returned;
        let switch = rig.switch.as_ref().unwrap().stats();
        if expired >= 1 && switch.queue.returned_tasks >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the unrunnable task's lease never expired and sent it back to tier 2: agent {:?}; XDP {}; switch {:?}",
            agent.stats(),
            rig.counters(0),
            switch
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = agent.stats();
    assert!(stats.returned_tasks >= 1, "{stats:?}");
    // An executor that can run it appears: it runs exactly once.
    let wide = rig.executors(0, 1, 0b11);
    assert_all_completed(client.join().expect("client thread"), 21);
    let ran = narrow.shutdown().tasks_run + wide.shutdown().tasks_run;
    assert_eq!(ran, 21, "every task ran once");
    agent.stop(StopMode::Drain).expect("agent stops");
}

/// STEAL messages: ops 15..=20, the Bolt header's byte 3 (transport header bit 88).
const STEAL_SELECTOR: &str = "udp dport 7171 @th,88,8 >= 15 @th,88,8 <= 20";

#[test]
fn a_steal_under_loss_loses_and_duplicates_nothing() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(2);
    let tasks = 160u64;
    // Every task lands on host 1 first: it prefetches all of them (no lease, so they
    // stay there until run or stolen).
    let victim = rig.agent(0, &["--low-watermark", "400", "--min-prefetch", "400", "--lease-ms", "0"]);
    let spec = TaskSpec::new(Handler::Sleep { micros: 2_000 }, 1, 0).unwrap();
    let client = rig.client(vec![spec; tasks as usize]);
    wait_until("host 1 holds every task", || rig.queued(0) == tasks as i64);
    let hosts = [rig.worker(0).host_ns.clone(), rig.worker(1).host_ns.clone()];
    let loss = Impairment::install_matching(&hosts, STEAL_SELECTOR, 200, 100).expect("nftables rules");
    // Host 2's agent finds tier 2 empty and steals; host 1 has one executor, host 2 two.
    let thief = rig.agent(1, &["--lease-ms", "0"]);
    let slow = rig.executors(0, 1, 0xff);
    let fast = rig.executors(1, 2, 0xff);
    assert_all_completed(client.join().expect("client thread"), tasks);
    let ran = (slow.shutdown().tasks_run, fast.shutdown().tasks_run);
    assert_eq!(ran.0 + ran.1, tasks, "every task ran exactly once: {ran:?}");
    let (t, v) = (thief.stop(StopMode::Drain).unwrap(), victim.stop(StopMode::Drain).unwrap());
    eprintln!("thief {t:?}\nvictim {v:?}\nSTEAL datagrams dropped/duplicated {:?}", loss.counts());
    assert!(t.stolen_tasks > 0 && t.steal_successes > 0, "host 2 stole nothing: {t:?}");
    assert!(ran.1 > 0, "host 2's executors ran nothing");
    assert!(v.steal_given > 0, "{v:?}");
    let (dropped, _) = loss.counts();
    assert!(dropped > 0, "no STEAL message was dropped: the test exercised no loss");
    assert_eq!((t.drained, v.drained), (0, 0), "tasks left in the rings");
}

//! Tier 1 for real: the XDP program attached (generic mode) to veths between network
//! namespaces, the host agent refilling its rings from a software switch, executors in
//! their own namespaces pulling through it, a client in the switch's namespace.
//!
//! - tasks complete through XDP hits, and every task run came from exactly one tier;
//! - an agent killed with SIGKILL and restarted loses no queued task;
//! - a drain RETURNs every ring entry to tier 2, which then serves them;
//! - executors in two namespaces hammering one node's ring never get a task twice;
//! - a task prefetched to one host is recalled for another host's executor waiting at
//!   tier 2, and nothing is lost or run twice.
//!
//! Needs root (namespaces, XDP, bpffs): skipped without, failed without under CI=true.
//! Every namespace, link and pin is named per test and removed by guards, also when a
//! test fails; every wait is bounded.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bolt_tests::{
    cluster::Process, netns_can_run as can_run, noop_client_in, noop_client_of_priority_in, switch_in, unique_name,
};
use scheduler_common::maps::{Counter, PIN_ROOT};
use scheduler_user::{
    agent::{self, refill::HELD_BACK_AFTER, AgentHandle, AgentStats, StopMode},
    client::Summary,
    executor::{self, ExecutorConfig, ExecutorPool},
    netns,
    switch::{self, SwitchConfig, SwitchHandle, SwitchStats, WaitConfig},
    testbed::{services::agent_args, Layout, Testbed, WorkerHost},
    xdp::{CounterSnapshot, PinDir, XdpMaps},
};

/// No test waits longer than this for anything.
const DEADLINE: Duration = Duration::from_secs(60);

/// A testbed of its own, and the switch running in it.
struct Rig {
    // Field order is drop order: components before the namespaces they live in.
    switch: Option<SwitchHandle>,
    testbed: Testbed,
}

impl Rig {
    fn new(executor_links: u8) -> Rig {
        let layout = Layout::plan(&unique_name("bt"), 1, executor_links).expect("layout");
        let testbed = Testbed::create(layout).expect("testbed");
        Rig { switch: Some(switch_in(testbed.layout())), testbed }
    }

    fn layout(&self) -> &Layout {
        self.testbed.layout()
    }

    fn worker(&self) -> &WorkerHost {
        &self.layout().workers[0]
    }

    fn pins(&self) -> PinDir {
        PinDir::under(Path::new(PIN_ROOT), self.worker().pin_name()).unwrap()
    }

    fn switch_stats(&self) -> SwitchStats {
        self.switch.as_ref().unwrap().stats()
    }

    /// The agent arguments the testbed gives a process, plus `extra`.
    fn agent_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = agent_args(self.layout(), self.worker());
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// An agent on a thread of this process, in the worker host's namespace.
    fn agent_in_process(&self, extra: &[&str]) -> AgentHandle {
        let cfg = agent::config_from_args(self.agent_args(extra)).expect("agent arguments");
        let handle = netns::run_in(&self.worker().host_ns, move || agent::spawn(cfg)).expect("agent starts");
        assert!(handle.mode().is_xdp(), "agent not in XDP mode: {:?}", handle.mode());
        handle
    }

    /// `executors` executors in executor namespace `link` of the worker.
    fn executors(&self, link: usize, executors: u16) -> ExecutorPool {
        let mut cfg = ExecutorConfig::new(SocketAddr::V4(self.layout().switch_socket()), 0xff);
        cfg.node = self.worker().node;
        cfg.executors = executors;
        netns::run_in(&self.worker().executors[link].ns, move || executor::spawn(cfg)).expect("executors start")
    }

    /// A client in the switch's namespace that submits `tasks` noop tasks and waits for
    /// them, each sent once.
    fn client(&self, tasks: usize) -> std::thread::JoinHandle<anyhow::Result<(bool, Summary)>> {
        noop_client_in(&self.layout().switch_ns, SocketAddr::V4(self.layout().switch_socket()), tasks, DEADLINE)
    }

    fn counters(&self) -> CounterSnapshot {
        XdpMaps::open_pinned(&self.pins()).expect("pinned maps").counters().unwrap()
    }

    fn queued(&self) -> i64 {
        XdpMaps::open_pinned(&self.pins()).expect("pinned maps").occupancy().iter().sum()
    }

    /// Waits until the rings hold at least `min` tasks and that number holds still.
    fn wait_for_rings(&self, min: i64) -> i64 {
        let deadline = Instant::now() + DEADLINE;
        let mut last = -1;
        let mut stable_since = Instant::now();
        loop {
            let q = self.queued();
            if q != last {
                last = q;
                stable_since = Instant::now();
            }
            if q >= min && stable_since.elapsed() > Duration::from_millis(300) {
                return q;
            }
            assert!(Instant::now() < deadline, "rings hold {q} tasks, expected at least {min}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.switch.take();
    }
}

/// Every task submitted completed once, none failed, none was sent twice.
fn assert_all_completed(result: anyhow::Result<(bool, Summary)>, tasks: u64) -> Summary {
    let (idle, s) = result.expect("client");
    assert!(idle, "client not done in time: {s:?}");
    assert_eq!((s.submitted, s.completed, s.failed, s.unfinished), (tasks, tasks, 0, 0), "{s:?}");
    assert_eq!((s.resubmitted, s.duplicates, s.lost), (0, 0, 0), "{s:?}");
    s
}

fn join<T>(h: std::thread::JoinHandle<T>) -> T {
    h.join().expect("thread panicked")
}

#[test]
fn tasks_complete_through_xdp_hits() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let agent = rig.agent_in_process(&["--low-watermark", "64", "--batch", "64"]);
    let executors = rig.executors(0, 2);
    let tasks = 3000;
    let client = rig.client(tasks);
    assert_all_completed(join(client), tasks as u64);
    let run = executors.shutdown();
    let c = rig.counters();
    // Switch stats are published every 100 ms.
    std::thread::sleep(Duration::from_millis(250));
    let sw = rig.switch_stats();
    let stats: AgentStats = agent.stop(StopMode::Drain).expect("agent stops");
    eprintln!("XDP hits {}, switch ASSIGNs {}, agent {stats:?}", c.total_hits(), sw.queue.assigns);
    assert!(c.total_hits() > 0, "no GET_TASK was answered by XDP: {c}");
    // Every task run was handed out exactly once: by the XDP program, by the agent to an
    // executor waiting at the host, or by the switch.
    assert_eq!(
        c.total_hits() + stats.waiters_served + sw.queue.assigns,
        run.tasks_run,
        "hits {}, agent {}, switch ASSIGNs {}",
        c.total_hits(),
        stats.waiters_served,
        sw.queue.assigns
    );
    assert_eq!(run.tasks_run, tasks as u64);
    // The hits were tasks the agent had brought in with REFILL.
    assert!(stats.refill_tasks >= c.total_hits(), "{stats:?}");
    assert_eq!(sw.queue.refill_tasks, stats.refill_tasks, "every REFILL task reached the rings");
    assert!(!rig.pins().path().exists(), "the drain left pins behind");
}

/// A client thread: whether it finished in time, and what it saw.
type ClientThread = std::thread::JoinHandle<anyhow::Result<(bool, Summary)>>;

/// A client in the switch's namespace submitting `tasks` no-op tasks of priority `prio`
/// and waiting for them.
fn client_of_priority(rig: &Rig, tasks: usize, prio: u8) -> ClientThread {
    let switch = SocketAddr::V4(rig.layout().switch_socket());
    noop_client_of_priority_in(&rig.layout().switch_ns, switch, tasks, prio, DEADLINE)
}

/// Waits until XDP counter `c` reaches `min`.
fn wait_for_counter(rig: &Rig, c: Counter, min: u64) {
    let deadline = Instant::now() + DEADLINE;
    while rig.counters().get(c) < min {
        assert!(Instant::now() < deadline, "{} stayed below {min}", c.name());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An agent prefetching 8 tasks (`extra` added to its arguments; a long hint lifetime,
/// so that the tests take their steps at leisure), and a client's eight priority-4
/// tasks in its rings.
fn eight_priority_4_tasks_in_the_rings(rig: &Rig, extra: &[&str]) -> (AgentHandle, ClientThread) {
    let mut args = vec![
        "--low-watermark",
        "8",
        "--min-prefetch",
        "8",
        "--batch",
        "8",
        "--lease-ms",
        "0",
        "--hint-ttl-ms",
        "60000",
    ];
    args.extend_from_slice(extra);
    let agent = rig.agent_in_process(&args);
    // The agent asks for 8, then has enough.
    let low = client_of_priority(rig, 8, 4);
    assert_eq!(rig.wait_for_rings(8), 8);
    (agent, low)
}

/// One executor runs every task of the `clients`; returns the priorities in the order
/// it got them, and the program's counters.
fn one_executor_runs(rig: &Rig, agent: AgentHandle, clients: [(ClientThread, u64); 2]) -> (Vec<u8>, CounterSnapshot) {
    let mut cfg = ExecutorConfig::new(SocketAddr::V4(rig.layout().switch_socket()), 0xff);
    cfg.node = rig.worker().node;
    cfg.record_assignments = true;
    let executors = netns::run_in(&rig.worker().executors[0].ns, move || executor::spawn(cfg)).expect("executor");
    for (client, tasks) in clients {
        assert_all_completed(join(client), tasks);
    }
    let records = executors.take_assignments();
    executors.shutdown();
    let c = rig.counters();
    agent.stop(StopMode::Drain).expect("agent stops");
    (records.iter().map(|r| r.priority).collect(), c)
}

#[test]
fn a_host_does_not_serve_low_priority_tasks_while_tier_2_holds_higher_ones() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    // Rings of 8: once the level-4 ring is full, no REFILL fits, so the agent cannot
    // fetch the level-1 task (the next test shows what it does with room).
    let (agent, low) = eight_priority_4_tasks_in_the_rings(&rig, &["--ring-capacity", "8"]);
    // A priority-1 task reaches the switch; its level turns non-empty, and the switch
    // tells the registered host (HINT), whose program records it.
    let stamps = rig.counters().get(Counter::Tier2Stamps);
    let high = client_of_priority(&rig, 1, 1);
    wait_for_counter(&rig, Counter::Tier2Stamps, stamps + 1);
    // Past the agent's HELD_BACK_AFTER, with room it would have asked by now.
    std::thread::sleep(HELD_BACK_AFTER * 20);
    assert_eq!(rig.queued(), 8, "the agent did not fetch the new task");
    // An executor starts: its first task is the priority-1 one, from tier 2, although
    // the rings were full of work.
    let (priorities, c) = one_executor_runs(&rig, agent, [(high, 1), (low, 8)]);
    assert_eq!(priorities, [1, 4, 4, 4, 4, 4, 4, 4, 4], "order in which the tasks were handed out");
    assert!(c.get(Counter::Bypass) >= 1, "{c}");
    assert_eq!(c.hits(4), 8, "{c}");
}

#[test]
fn a_higher_level_that_stays_at_tier_2_is_fetched_into_the_rings() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let (agent, low) = eight_priority_4_tasks_in_the_rings(&rig, &[]);
    // The level-1 task stays at tier 2 past HELD_BACK_AFTER: the level-4 ring no longer
    // counts towards the agent's target, and its REFILL brings the task to the rings.
    let high = client_of_priority(&rig, 1, 1);
    assert_eq!(rig.wait_for_rings(9), 9);
    let (priorities, c) = one_executor_runs(&rig, agent, [(high, 1), (low, 8)]);
    assert_eq!(priorities, [1, 4, 4, 4, 4, 4, 4, 4, 4], "order in which the tasks were handed out");
    assert_eq!((c.hits(1), c.hits(4), c.get(Counter::Bypass)), (1, 8, 0), "every task from the rings: {c}");
}

/// The agent as a process of its own (killed with SIGKILL if still running when dropped).
fn agent_process(rig: &Rig, extra: &[&str]) -> Process {
    Process::start(
        Path::new(env!("CARGO_BIN_EXE_bolt-role")),
        &rig.worker().host_ns,
        &rig.agent_args(extra),
        "tier 1 is up",
    )
}

#[test]
fn an_agent_killed_and_restarted_loses_no_queued_task() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let tuning = ["--low-watermark", "100", "--min-prefetch", "100", "--lease-ms", "0", "--batch", "64"];
    let mut first = agent_process(&rig, &tuning);
    // No executors yet: the agent fills its rings to the watermark and the rest waits in
    // the switch.
    let tasks = 400;
    let client = rig.client(tasks);
    let queued = rig.wait_for_rings(100);
    first.kill();
    // The program and its rings outlive the agent.
    assert!(rig.pins().is_attached(), "the program went with the agent");
    assert_eq!(rig.queued(), queued, "the rings changed after the agent died");
    let hits_before = rig.counters().total_hits();

    let mut second = agent_process(&rig, &tuning);
    second.wait_for_log("reattached to the pinned XDP program");
    assert!(!second.log().contains("loaded and attached"), "the program was reloaded:\n{}", second.log());
    let executors = rig.executors(0, 2);
    assert_all_completed(join(client), tasks as u64);
    let run = executors.shutdown();
    assert_eq!(run.tasks_run, tasks as u64);
    // The tasks queued before the kill were served from the rings they were in.
    let hits = rig.counters().total_hits() - hits_before;
    assert!(hits >= queued as u64, "{hits} XDP hits after the restart, {queued} tasks were queued");

    let status = second.terminate();
    assert!(status.success(), "agent exit {status}:\n{}", second.log());
    assert!(!rig.pins().path().exists(), "pins left after the drain");
}

#[test]
fn a_drain_returns_every_ring_entry_to_tier_two() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let agent =
        rig.agent_in_process(&["--low-watermark", "150", "--min-prefetch", "150", "--lease-ms", "0", "--batch", "64"]);
    let tasks = 300;
    let client = rig.client(tasks);
    let queued = rig.wait_for_rings(150);
    let stats = agent.stop(StopMode::Drain).expect("drain");
    assert_eq!(stats.drained, queued as u64, "{stats:?}");
    assert_eq!(stats.returned_tasks, queued as u64, "{stats:?}");
    assert!(stats.return_messages >= (queued as u64).div_ceil(16), "{stats:?}");
    assert!(!rig.pins().path().exists(), "pins left after the drain");
    // The switch took every one back.
    let deadline = Instant::now() + DEADLINE;
    while rig.switch_stats().queue.returned_tasks < queued as u64 {
        assert!(Instant::now() < deadline, "switch got {:?}", rig.switch_stats().queue);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(rig.switch_stats().queue.returned_tasks, queued as u64);
    assert_eq!(rig.switch_stats().queue.queue_full_tasks, 0);
    // With the program detached, executors reach the switch directly and get them all.
    let executors = rig.executors(0, 2);
    assert_all_completed(join(client), tasks as u64);
    assert_eq!(executors.shutdown().tasks_run, tasks as u64);
}

#[test]
fn two_executor_namespaces_never_get_the_same_task() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(2);
    // Deep rings, so that both namespaces pop the same ring most of the time.
    let agent = rig.agent_in_process(&[
        "--low-watermark",
        "1024",
        "--min-prefetch",
        "1024",
        "--lease-ms",
        "0",
        "--batch",
        "255",
        "--ring-capacity",
        "4096",
    ]);
    let tasks = 4000;
    let client = rig.client(tasks);
    rig.wait_for_rings(1000);
    let a = rig.executors(0, 2);
    let b = rig.executors(1, 2);
    assert_all_completed(join(client), tasks as u64);
    let (run_a, run_b) = (a.shutdown(), b.shutdown());
    let c = rig.counters();
    std::thread::sleep(Duration::from_millis(250));
    let sw = rig.switch_stats();
    let stats: AgentStats = agent.stop(StopMode::Drain).expect("agent stops");
    eprintln!(
        "namespace a ran {}, b ran {}; XDP hits {}, agent {}, switch ASSIGNs {}",
        run_a.tasks_run,
        run_b.tasks_run,
        c.total_hits(),
        stats.waiters_served,
        sw.queue.assigns
    );
    assert!(
        run_a.tasks_run > 0 && run_b.tasks_run > 0,
        "a namespace got nothing: {} / {}",
        run_a.tasks_run,
        run_b.tasks_run
    );
    // No duplicates at the client (checked above) and no task run twice anywhere.
    assert_eq!(run_a.tasks_run + run_b.tasks_run, tasks as u64);
    // Each handed out once: by the program, by the agent to an executor waiting at the
    // host, or by the switch.
    assert_eq!(
        c.total_hits() + stats.waiters_served + sw.queue.assigns,
        tasks as u64,
        "hits {} + agent {} + switch ASSIGNs {}",
        c.total_hits(),
        stats.waiters_served,
        sw.queue.assigns
    );
    assert!(c.total_hits() >= tasks as u64 / 2, "mostly served from the ring: {c}");
}

#[test]
fn without_xdp_the_agent_serves_the_rings_itself() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let cfg = agent::config_from_args(rig.agent_args(&["--xdp", "off", "--low-watermark", "64"])).unwrap();
    let agent = netns::run_in(&rig.worker().host_ns, move || agent::spawn(cfg)).expect("agent starts");
    assert!(!agent.mode().is_xdp());
    // Executors ask the agent, at the host's address on their link.
    let link = &rig.worker().executors[0];
    let mut cfg = ExecutorConfig::new(SocketAddr::new(link.gateway.into(), rig.layout().port), 0xff);
    cfg.node = rig.worker().node;
    cfg.executors = 2;
    let executors = netns::run_in(&link.ns, move || executor::spawn(cfg)).expect("executors");
    let tasks = 2000;
    assert_all_completed(join(rig.client(tasks)), tasks as u64);
    let run = executors.shutdown();
    std::thread::sleep(Duration::from_millis(250));
    let sw = rig.switch_stats();
    let stats = agent.stop(StopMode::Drain).expect("agent stops");
    eprintln!("agent served {}, switch ASSIGNs {}, agent {stats:?}", stats.served, sw.queue.assigns);
    assert!(stats.served > 0, "{stats:?}");
    assert_eq!(stats.served + sw.queue.assigns, run.tasks_run);
    assert_eq!(run.tasks_run, tasks as u64);
    // Misses went to the switch through the agent, and its answers came back.
    assert!(stats.forwarded > 0 && stats.relayed > 0, "{stats:?}");
    assert_eq!(stats.socket_refill_tasks, stats.refill_tasks, "without XDP every REFILL reaches the socket");
}

#[test]
fn an_interface_xdp_cannot_use_means_userspace_or_a_clean_error() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let missing = format!("{}z", rig.worker().pin_name());
    let args = |xdp: &str| {
        let mut a = rig.agent_args(&["--xdp", xdp, "--pin-name", &missing]);
        // The first executor-facing interface does not exist in the host's namespace.
        let at = a.iter().position(|x| x == "--iface").unwrap();
        a[at + 1] = missing.clone();
        a
    };
    let pins = PinDir::under(Path::new(PIN_ROOT), &missing).unwrap();
    let cfg = agent::config_from_args(args("require")).unwrap();
    let err = netns::run_in(&rig.worker().host_ns, move || agent::spawn(cfg)).err().expect("attach must fail");
    assert!(format!("{err:#}").contains(&missing), "{err:#}");
    assert!(!pins.path().exists(), "a failed start left pins behind");
    // Allowed to fall back: the rings are the pinned BPF maps, served from userspace.
    let cfg = agent::config_from_args(args("auto")).unwrap();
    let agent = netns::run_in(&rig.worker().host_ns, move || agent::spawn(cfg)).expect("agent starts");
    assert_eq!(agent.mode().name(), "userspace-bpf-rings");
    assert!(pins.path().exists() && !pins.is_attached());
    agent.stop(StopMode::Drain).unwrap();
    assert!(!pins.path().exists());
}

/// Agent arguments for worker `w` without its peers (no stealing), plus `extra`.
fn agent_without_peers(layout: &Layout, w: &WorkerHost, extra: &[&str]) -> AgentHandle {
    let mut args = agent_args(layout, w);
    if let Some(i) = args.iter().position(|a| a == "--peers") {
        args.drain(i..i + 2);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let cfg = agent::config_from_args(args).expect("agent arguments");
    let handle = netns::run_in(&w.host_ns, move || agent::spawn(cfg)).expect("agent starts");
    assert!(handle.mode().is_xdp(), "agent not in XDP mode: {:?}", handle.mode());
    handle
}

#[test]
fn an_executor_waiting_at_tier_2_gets_tasks_recalled_from_another_hosts_rings_and_loses_nothing() {
    if !can_run() {
        return;
    }
    let testbed = Testbed::create(Layout::plan(&unique_name("br"), 2, 1).expect("layout")).expect("testbed");
    let layout = testbed.layout();
    let (prefetcher, idle) = (&layout.workers[0], &layout.workers[1]);
    // REFILLs stay recallable for the whole test, so its steps need no timing.
    let listen = SocketAddr::V4(layout.switch_socket());
    let access = layout.access_rules();
    let wait = WaitConfig { recall_window: DEADLINE, ..WaitConfig::default() };
    let sw = netns::run_in(&layout.switch_ns, move || {
        switch::spawn(SwitchConfig { listen, access, wait, ..SwitchConfig::default() })
    })
    .expect("switch");
    // No peers: only a RECALL can move a task between the hosts. The first host keeps
    // eight tasks prefetched and has no executor running.
    let a1 = agent_without_peers(layout, prefetcher, &["--min-prefetch", "8", "--batch", "8", "--lease-ms", "0"]);
    let client = noop_client_in(&layout.switch_ns, listen, 8, DEADLINE);
    let pins = PinDir::under(Path::new(PIN_ROOT), prefetcher.pin_name()).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while XdpMaps::open_pinned(&pins).expect("pinned maps").occupancy().iter().sum::<i64>() < 8 {
        assert!(Instant::now() < deadline, "the first host's rings never held the 8 tasks");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The other host's agent starts once the tasks are in the first host's rings.
    let a2 = agent_without_peers(layout, idle, &["--lease-ms", "0"]);
    // An executor of the other host: its rings are empty and so is tier 2, so it waits
    // there, and each time the first host is asked for a task back.
    let mut cfg = ExecutorConfig::new(listen, 0xff);
    cfg.node = idle.node;
    cfg.record_assignments = true;
    let executors = netns::run_in(&idle.executors[0].ns, move || executor::spawn(cfg)).expect("executor");
    assert_all_completed(join(client), 8);
    let records = executors.take_assignments();
    executors.shutdown();
    let stats1 = a1.stop(StopMode::Drain).expect("agent stops");
    a2.stop(StopMode::Drain).expect("agent stops");
    let mut tids: Vec<u32> = records.iter().map(|r| r.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    assert_eq!((records.len(), tids.len()), (8, 8), "each task handed out once: {records:?}");
    assert!(records.iter().all(|r| r.node == idle.node));
    assert_eq!(stats1.recalled, 8, "{stats1:?}");
    assert!(sw.stats().hints.recalls_sent >= 8, "{:?}", sw.stats().hints);
}

#[test]
fn idle_executors_wait_at_their_host_get_tasks_from_tier_1_and_lose_nothing() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(1);
    let agent = rig.agent_in_process(&["--host-wait-ms", "10"]);
    let executors = rig.executors(0, 4);
    // Nothing queued anywhere. Until tier 2 has said so (the empty REFILL ending the
    // agent's first parked REFILL_REQ) they wait there; then at their host.
    wait_for_counter(&rig, Counter::ParkedHere, 4);
    // A request that went on while the host's stamp was stale (a slow machine) waits at
    // tier 2 until its park expires and it asks again, at its host this time.
    let deadline = Instant::now() + DEADLINE;
    let parked_at_tier_2 = loop {
        let waiting = rig.switch_stats().park.waiting;
        if waiting <= 1 || Instant::now() >= deadline {
            break waiting;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(parked_at_tier_2 <= 1, "{parked_at_tier_2} requests wait at tier 2: only the agent's may");
    // Past the host wait the agent answers them NOOP, as tier 2's park would: they ask
    // again at once and never time out.
    std::thread::sleep(Duration::from_millis(35));
    // Four tasks for four idle executors: tier 2 sends the host as many as its parked
    // REFILL_REQ says wait there, and the host's program hands each REFILL frame to a
    // waiting executor (or, should the host's request have been between two parks, the
    // agent hands them out from the rings). The count the host announced can lag (the
    // executors are NOOPed every host wait and ask again): a task beyond it stays at
    // tier 2, which tells the host so (HINT), and an executor asking then gets it from
    // tier 2. So tier 2 assigns directly only after a HINT.
    // Rounds of four, until the program has handed four out (most rounds do it in one).
    let mut first_tasks = 0u64;
    for _ in 0..10 {
        assert_all_completed(join(rig.client(4)), 4);
        first_tasks += 4;
        std::thread::sleep(Duration::from_millis(50));
        if rig.counters().get(Counter::Handoffs) >= 4 {
            break;
        }
    }
    let sw = rig.switch_stats();
    assert!(
        sw.queue.assigns == 0 || sw.hints.hints_sent > 0,
        "tier 2 assigned {} tasks directly without telling the host it held work: {sw:?}",
        sw.queue.assigns
    );
    assert!(rig.counters().get(Counter::Handoffs) >= 4, "{first_tasks} tasks, fewer than 4 handed off: {sw:?}");
    let tasks = 400;
    assert_all_completed(join(rig.client(tasks)), tasks as u64);
    let run = executors.shutdown();
    std::thread::sleep(Duration::from_millis(250));
    let sw = rig.switch_stats();
    let c = rig.counters();
    let stats: AgentStats = agent.stop(StopMode::Drain).expect("agent stops");
    eprintln!("counters {c}, agent {stats:?}, executors {run:?}");
    assert!(c.get(Counter::Handoffs) + stats.waiters_served >= 4, "{c} {stats:?}");
    assert!(stats.waiters_expired >= 4, "{stats:?}");
    assert!(run.noops >= 4 && run.get_timeouts == 0, "{run:?}");
    // Each task was handed out once: by the program (hits count its hand-offs), by the
    // agent to a waiting executor, or by the switch.
    assert_eq!(c.total_hits() + stats.waiters_served + sw.queue.assigns, run.tasks_run);
    assert_eq!(run.tasks_run, tasks as u64 + first_tasks);
}

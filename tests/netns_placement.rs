//! Placement on the namespace testbed, XDP attached (generic mode):
//!
//! - a client placing tasks by their inputs (MDL) PINs each data task to its data's host,
//!   where it runs (COMPLETE's node), served from the dedicated ring; tasks without data
//!   go through tier 2; nothing is resent;
//! - an agent answers every PINned task it cannot store (a resource the host lacks, a
//!   full dedicated ring) with QUEUE_FULL, one per task, and at its drain sends every
//!   pinned task back to its client the same way: every task sent comes back or stays,
//!   none is lost.
//!
//! Needs root (namespaces, XDP, bpffs): skipped without, failed without under CI=true.
//! Every namespace and pin is named per test and removed by guards; every wait is bounded.

use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use bolt_tests::{netns_can_run, switch_in, unique_name};
use scheduler_common::{
    decode, descriptor::Handler, encode_pin, maps::Counter, maps::DEDICATED_CAPACITY, maps::PIN_ROOT, JobRef, Message,
    Task, MAX_LIST, MAX_MESSAGE_LEN,
};
use scheduler_user::{
    agent::{self, AgentHandle, StopMode},
    client::{Client, ClientConfig, TaskSpec},
    executor::{self, ExecutorConfig, ExecutorPool},
    netns,
    placement::{InputObject, PlacementPolicy},
    testbed::{services::agent_args, Layout, Testbed},
    xdp::{PinDir, XdpMaps},
};

const DEADLINE: Duration = Duration::from_secs(60);

fn agent_in(layout: &Layout, i: usize, extra: &[&str]) -> AgentHandle {
    let w = &layout.workers[i];
    let mut args = agent_args(layout, w);
    args.extend(extra.iter().map(|s| s.to_string()));
    let cfg = agent::config_from_args(args).expect("agent arguments");
    let handle = netns::run_in(&w.host_ns, move || agent::spawn(cfg)).expect("agent starts");
    assert!(handle.mode().is_xdp(), "agent not in XDP mode: {:?}", handle.mode());
    handle
}

fn executors_in(layout: &Layout, i: usize, n: u16) -> ExecutorPool {
    let mut cfg = ExecutorConfig::new(SocketAddr::V4(layout.switch_socket()), 0xff);
    cfg.node = layout.workers[i].node;
    cfg.executors = n;
    netns::run_in(&layout.workers[i].exec().ns, move || executor::spawn(cfg)).expect("executors start")
}

/// Where host `i`'s agent takes PIN: its uplink address, the Bolt port.
fn agent_addr(layout: &Layout, i: usize) -> SocketAddrV4 {
    SocketAddrV4::new(layout.workers[i].uplink_addr, layout.switch_socket().port())
}

fn dedicated_hits(layout: &Layout, i: usize) -> u64 {
    let dir = PinDir::under(Path::new(PIN_ROOT), layout.workers[i].pin_name()).unwrap();
    XdpMaps::open_pinned(&dir).expect("pinned maps").counters().unwrap().get(Counter::DedicatedHit)
}

#[test]
fn a_pinned_task_runs_on_the_host_of_its_data() {
    if !netns_can_run() {
        return;
    }
    let testbed = Testbed::create(Layout::plan(&unique_name("pl"), 2, 1).expect("layout")).expect("testbed");
    let layout = testbed.layout().clone();
    let _switch = switch_in(&layout);
    let agents = [agent_in(&layout, 0, &[]), agent_in(&layout, 1, &[])];
    let _pools = [executors_in(&layout, 0, 2), executors_in(&layout, 1, 2)];
    // 12 tasks read 4 MB on node 2, 12 read 4 MB on node 1, 8 read nothing.
    let on = |host| vec![InputObject { host, size: 4_000_000 }];
    let mut inputs: Vec<Vec<InputObject>> = Vec::new();
    inputs.extend((0..12).map(|_| on(2)));
    inputs.extend((0..12).map(|_| on(1)));
    inputs.extend((0..8).map(|_| Vec::new()));
    let expected: Vec<Option<u16>> = inputs.iter().map(|i| i.first().map(|o| o.host)).collect();
    let spec = TaskSpec::new(Handler::Sleep { micros: 500 }, 1, 0).unwrap();
    let switch = SocketAddr::V4(layout.switch_socket());
    let peers: BTreeMap<u16, SocketAddr> =
        (0..2).map(|i| (layout.workers[i].node, SocketAddr::V4(agent_addr(&layout, i)))).collect();
    let ns = layout.switch_ns.clone();
    let (idle, records, stats) = netns::run_in(&ns, move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async move {
            let mut cfg = ClientConfig::new(switch);
            cfg.tracker.task_timeout = DEADLINE;
            cfg.tracker.max_attempts = 1;
            cfg.tracker.record_tasks = true;
            cfg.agents = peers;
            let mut client = Client::bind(cfg).await?;
            client.add_placed_job(&vec![spec; inputs.len()], &inputs, PlacementPolicy::Mdl)?;
            client.flush().await;
            let idle = client.wait_idle(Instant::now() + DEADLINE).await?;
            Ok((idle, client.take_records(), client.tracker().stats().clone()))
        })
    })
    .expect("client");
    assert!(idle, "client not done in time: {stats:?}");
    assert_eq!((stats.done, stats.failed, stats.resubmitted, stats.unpinned), (32, 0, 0, 0), "{stats:?}");
    assert_eq!(stats.pinned_sent, 24);
    assert_eq!(records.len(), 32);
    for r in &records {
        if let Some(host) = expected[r.tid as usize] {
            assert_eq!(r.node, host, "task {} pinned to node {host} ran on node {}", r.tid, r.node);
        }
    }
    for (i, a) in agents.into_iter().enumerate() {
        let hits = dedicated_hits(&layout, i);
        let s = a.stop(StopMode::Drain).expect("agent stops");
        assert_eq!((s.pinned, s.pin_refused, s.pin_drained), (12, 0, 0), "{s:?}");
        // Each pinned task left its host's dedicated ring: to an executor that asked (a
        // hit of the program), or to one waiting at the host (the agent's hand-out).
        assert!(hits <= 12 && hits + s.waiters_served >= 12, "host {i}: {hits} dedicated hits, {s:?}");
    }
}

/// The QUEUE_FULLs that arrive at `sock` until `want` tasks are listed or the deadline.
fn queue_fulls(sock: &UdpSocket, job: JobRef, want: usize) -> Vec<u32> {
    let mut tids = Vec::new();
    let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
    let deadline = Instant::now() + Duration::from_secs(20);
    while tids.len() < want && Instant::now() < deadline {
        let Ok((n, _)) = sock.recv_from(&mut buf) else { continue };
        match decode(&buf[..n]) {
            Ok(Message::QueueFull { job: j, tasks }) if j == job => tids.extend(tasks.iter().map(|t| t.tid())),
            other => panic!("expected QUEUE_FULL, got {other:?}"),
        }
    }
    tids
}

#[test]
fn pin_refused_or_overflowing_comes_back_as_queue_full_and_the_drain_loses_nothing() {
    if !netns_can_run() {
        return;
    }
    let testbed = Testbed::create(Layout::plan(&unique_name("pq"), 1, 1).expect("layout")).expect("testbed");
    let layout = testbed.layout().clone();
    let _switch = switch_in(&layout);
    // No executors: what the ring stores stays there. The host offers resource bit 0 only.
    let agent = agent_in(&layout, 0, &["--resources", "1"]);
    let to = agent_addr(&layout, 0);
    let job = JobRef::new(77, 5);
    let sock = netns::run_in(&layout.switch_ns, || Ok(UdpSocket::bind("0.0.0.0:0")?)).expect("socket");
    sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    // The drain sends 4096 QUEUE_FULLs at once: room for all of them (root may exceed
    // net.core.rmem_max).
    let bytes: libc::c_int = 64 << 20;
    // SAFETY: a valid socket and a c_int option value of the size given.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
    let task = |tid: u32, rsrc: u8| {
        let mut t = Task { prio: 1, rsrc, ..Task::default() };
        t.set_tid(tid);
        t
    };
    let mut out = [0u8; MAX_MESSAGE_LEN];
    // A task needing bit 1, between two the host can run: refused alone.
    let n = encode_pin(&mut out, job, 0, &[task(0, 1), task(1, 2), task(2, 0)]).unwrap();
    sock.send_to(&out[..n], to).unwrap();
    assert_eq!(queue_fulls(&sock, job, 1), [1]);
    // Fill the ring: the tasks beyond its capacity come back, one QUEUE_FULL each.
    let total = DEDICATED_CAPACITY as usize + 2 * MAX_LIST;
    let tids: Vec<u32> = (3..3 + total as u32).collect();
    for chunk in tids.chunks(MAX_LIST) {
        let tasks: Vec<Task> = chunk.iter().map(|&t| task(t, 0)).collect();
        let n = encode_pin(&mut out, job, 0, &tasks).unwrap();
        sock.send_to(&out[..n], to).unwrap();
        // Paced so that the agent's socket buffer never drops a PIN.
        std::thread::sleep(Duration::from_micros(200));
    }
    let stored = DEDICATED_CAPACITY as usize - 2;
    let refused = queue_fulls(&sock, job, total - stored);
    assert_eq!(refused.len(), total - stored, "every task the ring could not take is answered");
    // The drain sends every stored task back to its client: sent = refused + drained.
    let stats = agent.stop(StopMode::Drain).expect("agent stops");
    let drained = queue_fulls(&sock, job, DEDICATED_CAPACITY as usize);
    let mut all: Vec<u32> = [vec![1], refused, drained].concat();
    all.sort_unstable();
    assert_eq!(all, (0..3 + total as u32).collect::<Vec<_>>(), "every PINned task came back exactly once");
    assert_eq!((stats.pinned, stats.pin_refused, stats.pin_drained), (4096, 1 + total as u64 - 4094, 4096));
}

/// A client in `layout`'s switch namespace that adds one job of `specs` placed under
/// `policy` by `inputs`, with every host's agent configured; returns (idle, counters).
fn placed_client(
    layout: &Layout,
    specs: Vec<TaskSpec>,
    inputs: Vec<Vec<InputObject>>,
    policy: PlacementPolicy,
) -> (bool, scheduler_user::client::ClientStats) {
    let switch = SocketAddr::V4(layout.switch_socket());
    let agents: BTreeMap<u16, SocketAddr> =
        (0..layout.workers.len()).map(|i| (layout.workers[i].node, SocketAddr::V4(agent_addr(layout, i)))).collect();
    netns::run_in(&layout.switch_ns, move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async move {
            let mut cfg = ClientConfig::new(switch);
            cfg.tracker.task_timeout = DEADLINE;
            cfg.tracker.max_attempts = 1;
            cfg.agents = agents;
            let mut client = Client::bind(cfg).await?;
            client.add_placed_job(&specs, &inputs, policy)?;
            client.flush().await;
            let idle = client.wait_idle(Instant::now() + DEADLINE).await?;
            Ok((idle, client.tracker().stats().clone()))
        })
    })
    .expect("client")
}

#[test]
fn flds_moves_a_backlog_of_pinned_tasks_to_the_shared_rings_and_loses_nothing() {
    if !netns_can_run() {
        return;
    }
    let testbed = Testbed::create(Layout::plan(&unique_name("pf"), 1, 1).expect("layout")).expect("testbed");
    let layout = testbed.layout().clone();
    let _switch = switch_in(&layout);
    // tt 100 ms against 120 tasks of 10 ms on one executor (about 1.2 s of work): the
    // monitor moves most of them once the host has a rate.
    let agent = agent_in(&layout, 0, &["--flds-tt-ms", "100"]);
    let _pool = executors_in(&layout, 0, 1);
    let spec = TaskSpec::new(Handler::Sleep { micros: 10_000 }, 1, 0).unwrap();
    let inputs = vec![vec![InputObject { host: 1, size: 50_000_000 }]; 120];
    let t = scheduler_user::placement::Threshold::bytes_per_sec(1e6).unwrap();
    let (idle, stats) = placed_client(&layout, vec![spec; 120], inputs, PlacementPolicy::Flds(t));
    assert!(idle, "client not done in time: {stats:?}");
    // Every task done once; none timed out. A moved task whose lease ran out came back
    // from tier 2 as QUEUE_FULL (this host holds no RETURN credit) and went to tier 2.
    assert_eq!((stats.done, stats.failed, stats.duplicates, stats.timeouts), (120, 0, 0, 0), "{stats:?}");
    assert_eq!(stats.pinned_sent, 120);
    let s = agent.stop(StopMode::Drain).expect("agent stops");
    eprintln!("moved {}, unpinned {}, bounces {}", s.flds_moved, stats.unpinned, stats.queue_full_bounces);
    assert_eq!(s.pinned, 120, "{s:?}");
    assert!(s.flds_moved > 0 && s.flds_moved < 120, "{s:?}");
    assert_eq!(s.pin_drained, 0);
}

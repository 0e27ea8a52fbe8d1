//! Attacks by a worker node's own executors, on the namespace testbed with the access
//! rules `bolt testbed` gives the switch (agents: the hosts' uplink addresses; executors:
//! the executor subnets):
//!
//! - an executor sends RETURN entries naming a victim client: refused, nothing queued,
//!   no QUEUE_FULL aimed at the victim;
//! - an executor may send GET_TASK, but its REFILL_REQ and RETURN are refused;
//! - a host RETURNs at most what tier 2 REFILLed to it: the rest goes back to the clients
//!   its entries name as QUEUE_FULL, and is not queued;
//! - an executor namespace with the switch's address configured sends REFILL to its
//!   host: the XDP program (also attached to the executor-facing link) stores nothing,
//!   nor does an agent without XDP, while REFILL from the switch over the uplink still
//!   fills the rings.
//!
//! Needs root (namespaces, XDP, bpffs): skipped without, failed without under CI=true.
//! Every namespace, link and pin is named per test and removed by guards; every wait is
//! bounded.

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use bolt_tests::{netns_can_run as can_run, switch_in, unique_name};
use scheduler_common::{
    decode, encode_get_task, encode_refill, encode_refill_req, encode_return, encode_submit, maps::Counter,
    maps::PIN_ROOT, Entry, JobRef, Message, Op, RefillRequest, Requester, Task, MAX_MESSAGE_LEN,
};
use scheduler_user::{
    agent::{self, StopMode},
    netns,
    switch::{SwitchHandle, SwitchStats},
    testbed::{services::agent_args, Layout, Testbed, WorkerHost},
    xdp::{PinDir, XdpMaps},
};

/// No wait lasts longer than this.
const DEADLINE: Duration = Duration::from_secs(30);
/// How long a datagram that must not arrive is waited for.
const SILENCE: Duration = Duration::from_millis(400);

/// A one-worker testbed and its switch, admitting as `bolt testbed` configures it.
struct Rig {
    // Field order is drop order: the switch before the namespaces it lives in.
    switch: Option<SwitchHandle>,
    testbed: Testbed,
}

impl Rig {
    fn new() -> Rig {
        let layout = Layout::plan(&unique_name("ba"), 1, 1).expect("layout");
        let testbed = Testbed::create(layout).expect("testbed");
        Rig { switch: Some(switch_in(testbed.layout())), testbed }
    }

    fn layout(&self) -> &Layout {
        self.testbed.layout()
    }

    fn switch_addr(&self) -> SocketAddrV4 {
        self.layout().switch_socket()
    }

    /// A UDP socket bound to `addr` in namespace `ns`.
    fn socket(&self, ns: &str, addr: SocketAddrV4) -> UdpSocket {
        let s = netns::run_in(ns, move || Ok(UdpSocket::bind(addr)?)).expect("socket in namespace");
        s.set_read_timeout(Some(SILENCE)).unwrap();
        s
    }

    /// A socket in the executor namespace, at the executor's address.
    fn executor(&self) -> UdpSocket {
        let e = self.layout().workers[0].exec();
        self.socket(&e.ns, SocketAddrV4::new(e.addr, 0))
    }

    /// A socket in the worker host, at its uplink address (where its agent asks from).
    fn host(&self) -> UdpSocket {
        let w = &self.layout().workers[0];
        self.socket(&w.host_ns, SocketAddrV4::new(w.uplink_addr, 0))
    }

    /// A client socket in the switch namespace.
    fn client(&self) -> (UdpSocket, SocketAddrV4) {
        let s = self.socket(&self.layout().switch_ns, SocketAddrV4::new(*self.switch_addr().ip(), 0));
        let SocketAddr::V4(at) = s.local_addr().unwrap() else { unreachable!() };
        (s, at)
    }

    /// The switch's counters once `done` holds for them (they are published every 100 ms).
    fn switch_stats_when(&self, what: &str, done: impl Fn(&SwitchStats) -> bool) -> SwitchStats {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let s = self.switch.as_ref().unwrap().stats();
            if done(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "{what}: {s:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.switch.take();
    }
}

fn task(tid: u32) -> Task {
    let mut t = Task { prio: 1, ..Task::default() };
    t.set_tid(tid);
    t
}

/// Entries naming `victim` as their client, as a forger writes them.
fn forged(victim: SocketAddrV4, tids: std::ops::Range<u32>) -> Vec<Entry> {
    tids.map(|t| Entry::new(66, 6, task(t), victim.ip().octets(), victim.port())).collect()
}

fn send(s: &UdpSocket, to: SocketAddrV4, encode: impl FnOnce(&mut [u8]) -> usize) {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode(&mut buf);
    s.send_to(&buf[..n], to).expect("send");
}

/// The next datagram at `s` within its timeout, decoded to its op and tasks.
fn next(s: &UdpSocket) -> Option<(Op, Vec<u32>)> {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = s.recv(&mut buf).ok()?;
    let msg = decode(&buf[..n]).expect("the switch sends valid messages");
    let tids = match msg {
        Message::QueueFull { tasks, .. } => tasks.iter().map(|t| t.tid()).collect(),
        Message::Refill { entries: es, .. } => es.iter().map(|e| e.task.tid()).collect(),
        Message::Assign { entries, .. } => entries.iter().map(|e| e.task.tid()).collect(),
        _ => Vec::new(),
    };
    Some((msg.op(), tids))
}

#[test]
fn an_executor_forging_returns_in_a_victims_name_queues_nothing() {
    if !can_run() {
        return;
    }
    let rig = Rig::new();
    let (victim, victim_addr) = rig.client();
    let executor = rig.executor();
    let to = rig.switch_addr();
    send(&executor, to, |b| encode_return(b, &forged(victim_addr, 0..16)).unwrap());
    send(&executor, to, |b| encode_return(b, &forged(victim_addr, 16..20)).unwrap());
    let stats = rig.switch_stats_when("both RETURNs refused", |s| s.refused_of(Op::Return) == 2);
    assert_eq!(stats.queue.enqueued, 0, "a forged task was queued");
    assert_eq!(stats.queue_depth.iter().sum::<u32>(), 0);
    assert_eq!(stats.return_over_credit, 0, "refused before the credit");
    assert_eq!(next(&victim), None, "a QUEUE_FULL was aimed at the victim");
    // Nothing forged is handed out either.
    send(&executor, to, |b| encode_get_task(b, 1, 0xff, Requester::new(1, 1, 1), false).unwrap());
    assert_eq!(next(&executor).map(|(op, _)| op), Some(Op::Noop));

    // Nor can it borrow its host's address, an agent's: the host's stack drops a packet
    // arriving with one of its own addresses as source. (Had it reached the switch, the
    // host's empty credit would have bounced it to the victim.)
    let (e, host) = (rig.layout().workers[0].exec().clone(), rig.layout().workers[0].uplink_addr);
    netns::ip(&["-n", &e.ns, "addr", "add", &format!("{host}/32"), "dev", "lo"]).expect("address");
    let as_host = rig.socket(&e.ns, SocketAddrV4::new(host, 0));
    send(&as_host, to, |b| encode_return(b, &forged(victim_addr, 20..21)).unwrap());
    assert_eq!(next(&victim), None, "a RETURN with the host's address left the executor's namespace");
    let stats = rig.switch_stats_when("published", |s| s.received >= 3);
    assert_eq!((stats.received, stats.queue.enqueued, stats.return_over_credit), (3, 0, 0), "{stats:?}");
}

#[test]
fn an_executor_may_get_task_but_not_refill_req_or_return() {
    if !can_run() {
        return;
    }
    let rig = Rig::new();
    let (client, client_addr) = rig.client();
    let (executor, host) = (rig.executor(), rig.host());
    let to = rig.switch_addr();
    send(&client, to, |b| encode_submit(b, JobRef::new(1, 1), 0, &[task(1), task(2)]).unwrap());
    rig.switch_stats_when("the client's tasks queue", |s| s.queue.enqueued == 2);

    // The executor's REFILL_REQ takes nothing; its RETURN (of a real entry) queues nothing.
    send(&executor, to, |b| encode_refill_req(b, 0xff, RefillRequest::new(1, 16)).unwrap());
    assert_eq!(next(&executor), None, "an executor's REFILL_REQ was answered");
    // Its GET_TASK is served.
    send(&executor, to, |b| encode_get_task(b, 1, 0xff, Requester::new(1, 1, 1), false).unwrap());
    let (op, tids) = next(&executor).expect("an executor's GET_TASK is answered");
    assert_eq!((op, tids.len()), (Op::Assign, 1));
    let given = Entry::new(1, 1, task(tids[0]), client_addr.ip().octets(), client_addr.port());
    send(&executor, to, |b| encode_return(b, &[given]).unwrap());
    let stats = rig
        .switch_stats_when("REFILL_REQ and RETURN refused", |s| s.refused_of(Op::Return) == 1 && s.queue.assigns == 1);
    assert_eq!(stats.refused_of(Op::RefillReq), 1);
    assert_eq!((stats.refused_of(Op::GetTask), stats.queue.refill_tasks, stats.queue.returned_tasks), (0, 0, 0));
    assert_eq!(stats.queue_depth.iter().sum::<u32>(), 1, "only the task not handed out is queued");

    // The host's REFILL_REQ is answered with the task left.
    send(&host, to, |b| encode_refill_req(b, 0xff, RefillRequest::new(1, 16)).unwrap());
    let (op, tids) = next(&host).expect("the host's REFILL_REQ is answered");
    assert_eq!((op, tids.len()), (Op::Refill, 1));
}

#[test]
fn a_host_returns_no_more_than_it_was_given() {
    if !can_run() {
        return;
    }
    let rig = Rig::new();
    let (victim, victim_addr) = rig.client();
    let host = rig.host();
    let to = rig.switch_addr();

    // Nothing given yet: a forged RETURN goes back to the client it names, queued nowhere.
    send(&host, to, |b| encode_return(b, &forged(victim_addr, 100..104)).unwrap());
    let (op, tids) = next(&victim).expect("the victim hears of the forged tasks");
    assert_eq!((op, tids), (Op::QueueFull, vec![100]));
    for tid in 101..104 {
        assert_eq!(next(&victim), Some((Op::QueueFull, vec![tid])));
    }

    // Three real tasks REFILLed to the host: it may give back those three, not a fourth.
    send(&victim, to, |b| encode_submit(b, JobRef::new(1, 1), 0, &[task(1), task(2), task(3)]).unwrap());
    rig.switch_stats_when("the tasks queue", |s| s.queue.enqueued == 3);
    send(&host, to, |b| encode_refill_req(b, 0xff, RefillRequest::new(1, 16)).unwrap());
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = host.recv(&mut buf).expect("REFILL");
    let Ok(Message::Refill { entries: given, .. }) = decode(&buf[..n]) else { panic!("not a REFILL") };
    assert_eq!(given.len(), 3);
    let mut back = given.to_vec();
    back.extend(forged(victim_addr, 200..201));
    send(&host, to, |b| encode_return(b, &back).unwrap());
    assert_eq!(next(&victim), Some((Op::QueueFull, vec![200])), "the entry beyond the credit bounces");
    let stats = rig.switch_stats_when("the three queue again", |s| s.queue.returned_tasks == 3);
    assert_eq!(stats.return_over_credit, 5);
    assert_eq!(stats.queue_depth.iter().sum::<u32>(), 3, "the real tasks, not the forged ones");
}

/// The executor namespace of worker `w` takes the switch's address and sends three
/// REFILLs of 16 tasks from it (from the switch's port) to its host's address on their
/// link, where the host's XDP program, or its agent's socket, is.
fn spoof_refills_from_the_executor_namespace(rig: &Rig, w: &WorkerHost) {
    let e = w.exec();
    let switch = rig.switch_addr();
    netns::ip(&["-n", &e.ns, "addr", "add", &format!("{}/32", switch.ip()), "dev", "lo"]).expect("address");
    let spoofer = rig.socket(&e.ns, switch);
    let host_on_link = SocketAddrV4::new(e.gateway, switch.port());
    let entries = forged(SocketAddrV4::new(e.addr, 9), 0..16);
    for _ in 0..3 {
        send(&spoofer, host_on_link, |b| encode_refill(b, &entries, 0).unwrap());
    }
}

#[test]
fn an_executor_spoofing_the_switch_cannot_fill_its_hosts_rings() {
    if !can_run() {
        return;
    }
    let rig = Rig::new();
    let w = rig.layout().workers[0].clone();
    let cfg = agent::config_from_args(agent_args(rig.layout(), &w)).expect("agent arguments");
    let agent = netns::run_in(&w.host_ns, move || agent::spawn(cfg)).expect("agent starts");
    assert!(agent.mode().is_xdp(), "{:?}", agent.mode());
    let pins = PinDir::under(Path::new(PIN_ROOT), w.pin_name()).unwrap();
    let maps = || XdpMaps::open_pinned(&pins).expect("pinned maps");
    let queued = || maps().occupancy().iter().sum::<i64>();

    spoof_refills_from_the_executor_namespace(&rig, &w);
    let switch = rig.switch_addr();
    // Until the program has refused all three, or stored any.
    let deadline = Instant::now() + DEADLINE;
    while maps().counters().unwrap().get(Counter::RefillOffUplink) < 3 && queued() == 0 {
        assert!(Instant::now() < deadline, "the spoofed REFILLs never arrived: {}", maps().counters().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(queued(), 0, "the host stored tasks from a spoofed REFILL");
    assert_eq!(maps().counters().unwrap().get(Counter::RefillOffUplink), 3);
    let stats = agent.stats();
    assert_eq!(stats.socket_refill_tasks, 0, "{stats:?}");

    // REFILL from the switch, over the uplink, still fills the rings.
    let (client, _) = rig.client();
    send(&client, switch, |b| encode_submit(b, JobRef::new(1, 1), 0, &[task(1), task(2)]).unwrap());
    while queued() < 2 {
        assert!(Instant::now() < deadline, "the switch's REFILL was not stored: {}", maps().counters().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = maps().counters().unwrap();
    assert_eq!((c.get(Counter::RefillTasks), c.get(Counter::RefillOffUplink)), (2, 3));
    let stats = agent.stop(StopMode::Drain).expect("drain");
    assert_eq!(stats.returned_tasks, 2, "{stats:?}");
    // The switch takes them back: the host's credit covers what it was given.
    let sw = rig.switch_stats_when("the drain's RETURN queues", |s| s.queue.returned_tasks == 2);
    assert_eq!((sw.return_over_credit, sw.queue.queue_full_tasks), (0, 0));
}

/// Without XDP the spoofed REFILL reaches the agent's socket, with the switch's source
/// address: the agent takes REFILL only when it arrived on the uplink (IP_PKTINFO).
#[test]
fn an_executor_spoofing_the_switch_cannot_fill_a_userspace_agents_rings() {
    if !can_run() {
        return;
    }
    let rig = Rig::new();
    let w = rig.layout().workers[0].clone();
    let mut args = agent_args(rig.layout(), &w);
    args.extend(["--xdp".to_string(), "off".to_string()]);
    let cfg = agent::config_from_args(args).expect("agent arguments");
    let agent = netns::run_in(&w.host_ns, move || agent::spawn(cfg)).expect("agent starts");
    assert!(!agent.mode().is_xdp());
    spoof_refills_from_the_executor_namespace(&rig, &w);
    let deadline = Instant::now() + DEADLINE;
    while agent.stats().foreign_refill < 3 && agent.stats().socket_refill_tasks == 0 {
        assert!(Instant::now() < deadline, "the spoofed REFILLs never arrived: {:?}", agent.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let stats = agent.stats();
    assert_eq!((stats.foreign_refill, stats.socket_refill_tasks), (3, 0), "{stats:?}");
    assert_eq!(stats.queued.iter().sum::<i64>(), 0, "{stats:?}");

    // REFILL from the switch over the uplink is taken.
    let (client, _) = rig.client();
    send(&client, rig.switch_addr(), |b| encode_submit(b, JobRef::new(1, 1), 0, &[task(1), task(2)]).unwrap());
    while agent.stats().socket_refill_tasks < 2 {
        assert!(Instant::now() < deadline, "the switch's REFILL was not taken: {:?}", agent.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = agent.stop(StopMode::Drain).expect("drain");
    assert_eq!((stats.foreign_refill, stats.returned_tasks), (3, 2), "{stats:?}");
}

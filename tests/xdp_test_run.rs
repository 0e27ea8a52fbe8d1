//! The Bolt XDP program run in the kernel on crafted frames (BPF_PROG_TEST_RUN): GET_TASK
//! hits and misses, priority search, resource matching, REFILL ingest, overflow, bounce
//! and rescue, hostile and malformed input, events, pinning, many CPUs ingesting and
//! popping at once; and what the agent and `bolt map dump` do to pinned rings (map
//! errors, unsent RETURNs, reservation recount, reading a ring in place).
//!
//! Needs root (CAP_BPF, CAP_NET_ADMIN): skipped without, failed without under CI=true.

use std::{
    collections::HashSet,
    net::{Ipv4Addr, SocketAddrV4},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    },
    time::{Duration, Instant},
};

use bolt_tests::{is_root, require, unique_name};
use scheduler_common::{
    encode_assign, encode_assign_list, encode_get_bundle, encode_get_task, encode_hint, encode_noop, encode_refill,
    encode_return, encode_submit,
    frame::Endpoint,
    maps::{Counter, EVENT_BYPASS, EVENT_EMPTY, EVENT_LOW_WATERMARK, EVENT_REFILL_ANSWER, EVENT_WAITING},
    Entry, Header, Ipv4Prefix, JobRef, Message, Requester, Task, MAX_LIST, MAX_MESSAGE_LEN,
};
use scheduler_user::agent::StopMode;
use scheduler_user::clock::monotonic_ns;
use scheduler_user::xdp::{
    frames::{fix_ipv4_checksum, sample_endpoints, udp_frame, Endpoints, Ipv4Fields, ETH_LEN, PAYLOAD_OFF},
    is_bpffs, run_frame, AttachMode, BoltXdp, CounterSnapshot, PinDir, Verdict, XdpMaps, XdpSettings, LOOPBACK_IFINDEX,
    TEST_RUN_UPLINK,
};

const PORT: u16 = 7171;
const NODE: u16 = 3;

fn can_run() -> bool {
    require(is_root(), "root (CAP_BPF, CAP_NET_ADMIN) for BPF_PROG_TEST_RUN")
}

/// A loaded program plus the addresses of an executor, this node and the switch.
struct Rig {
    xdp: BoltXdp,
    /// Executor → switch, as GET_TASK travels.
    exec: Endpoints,
    switch: Ipv4Addr,
}

impl Rig {
    fn new(tune: impl FnOnce(&mut XdpSettings)) -> Rig {
        let (exec, switch) = sample_endpoints(PORT);
        let mut settings = XdpSettings {
            port: PORT,
            node: NODE,
            switch_addr: Some(switch),
            uplink_ifindex: TEST_RUN_UPLINK,
            ..Default::default()
        };
        tune(&mut settings);
        let xdp = BoltXdp::load(&settings).expect("load the XDP program");
        Rig { xdp, exec, switch }
    }

    fn maps(&mut self) -> &mut XdpMaps {
        self.xdp.maps_mut()
    }

    fn counters(&self) -> CounterSnapshot {
        self.xdp.maps().counters().unwrap()
    }

    fn run(&self, frame: &[u8]) -> (Verdict, Vec<u8>) {
        let r = self.xdp.run_frame(frame, 1).expect("BPF_PROG_TEST_RUN");
        (r.verdict, r.frame)
    }

    fn get_task_frame(&self, prio: u8, rsrc: u8, seq: u32) -> Vec<u8> {
        get_task_frame(&self.exec, prio, rsrc, NODE, seq)
    }

    /// The switch → node leg (switch port 7171 to the node's Bolt port).
    fn switch_to_node(&self) -> Endpoints {
        switch_to_node(self.switch)
    }

    fn refill_frame(&self, entries: &[Entry]) -> Vec<u8> {
        refill_frame(self.switch, entries)
    }

    /// Sends a GET_TASK and returns the assigned entry, or None on a pass.
    fn take(&self, prio: u8, rsrc: u8) -> Option<Entry> {
        let (verdict, out) = self.run(&self.get_task_frame(prio, rsrc, 1));
        match verdict {
            Verdict::Tx => Some(assigned_entry(&out)),
            Verdict::Pass => None,
            v => panic!("GET_TASK verdict {v:?}"),
        }
    }
}

/// The switch → node leg (switch port 7171 to the node's Bolt port).
fn switch_to_node(switch: Ipv4Addr) -> Endpoints {
    Endpoints {
        src_mac: [0x02, 0, 0, 0, 0, 0x01],
        dst_mac: [0x02, 0, 0, 0, 0, 0x0b],
        src: SocketAddrV4::new(switch, PORT),
        dst: SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 20), PORT),
    }
}

fn refill_frame(switch: Ipv4Addr, entries: &[Entry]) -> Vec<u8> {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode_refill(&mut buf, entries, 0).unwrap();
    udp_frame(&switch_to_node(switch), Ipv4Fields::default(), &buf[..n])
}

fn get_task_frame(exec: &Endpoints, prio: u8, rsrc: u8, node: u16, seq: u32) -> Vec<u8> {
    let mut buf = [0u8; 16];
    let n = encode_get_task(&mut buf, prio, rsrc, Requester::new(node, 7, seq), false).unwrap();
    udp_frame(exec, Ipv4Fields::default(), &buf[..n])
}

fn entry(tid: u32, prio: u8, rsrc: u8) -> Entry {
    let mut task = Task { prio, rsrc, class: 2, ..Task::default() };
    task.set_tid(tid);
    task.desc[0] = 1;
    task.desc[7] = tid as u8;
    Entry::new(0xA0 + tid, 0x5000 + tid, task, [198, 51, 100, 7], 9000 + tid as u16)
}

fn assigned_entry(frame: &[u8]) -> Entry {
    let msg = &frame[PAYLOAD_OFF..];
    match scheduler_common::decode(msg).expect("the reply decodes") {
        scheduler_common::Message::Assign { entries: [entry], .. } => *entry,
        m => panic!("reply is {:?}, not ASSIGN", m.op()),
    }
}

fn tid(e: &Entry) -> u32 {
    e.task.tid()
}

#[test]
fn hit_replies_with_the_byte_exact_assign() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    let e = entry(11, 1, 0b01);
    rig.maps().push(&e).unwrap();
    let request = rig.get_task_frame(1, 0b11, 42);
    let (verdict, out) = rig.run(&request);
    assert_eq!(verdict, Verdict::Tx);

    let mut assign = [0u8; 48];
    let n = encode_assign(&mut assign, &e, 0).unwrap();
    assert_eq!(n, 48);
    let expected = udp_frame(&rig.exec.reversed(), Ipv4Fields::default(), &assign);
    assert_eq!(out.len(), 14 + 20 + 8 + 48);
    assert_eq!(out, expected, "reply differs from the ASSIGN built by scheduler-common");
    // UDP checksum zero, IP checksum valid: checked through the byte equality above,
    // whose expected frame carries a freshly computed header checksum.
    let c = rig.counters();
    assert_eq!((c.hits(1), c.get(Counter::Transmitted), c.get(Counter::Miss)), (1, 1, 0));
    assert_eq!(rig.maps().reserved(1), 0);
}

fn get_bundle_frame(exec: &Endpoints, prio: u8, rsrc: u8, want: u8, wait: bool) -> Vec<u8> {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode_get_bundle(&mut buf, prio, rsrc, Requester::new(NODE, 7, 9), want, wait).unwrap();
    udp_frame(exec, Ipv4Fields::default(), &buf[..n])
}

#[test]
fn a_get_bundle_hit_replies_with_a_byte_exact_single_entry_assign() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    let (first, second) = (entry(21, 1, 0b01), entry(22, 1, 0));
    rig.maps().push(&first).unwrap();
    rig.maps().push(&second).unwrap();
    let request = get_bundle_frame(&rig.exec, 1, 0b11, 8, true);
    let (verdict, out) = rig.run(&request);
    assert_eq!(verdict, Verdict::Tx);
    // One task: `want` is an upper bound, and the rings answer one request with one pop.
    let mut assign = [0u8; MAX_MESSAGE_LEN];
    let n = encode_assign(&mut assign, &first, 0).unwrap();
    let expected = udp_frame(&rig.exec.reversed(), Ipv4Fields::default(), &assign[..n]);
    assert_eq!(out, expected, "reply differs from the ASSIGN built by scheduler-common");
    assert_eq!(rig.maps().reserved(1), 1, "the second task stays in its ring");
    // A miss passes the GET_BUNDLE on to tier 2 unchanged, WAIT and want included.
    let low = get_bundle_frame(&rig.exec, 1, 0b10, 16, true);
    rig.maps().pop(1).unwrap();
    let (verdict, out) = rig.run(&low);
    assert_eq!((verdict, out), (Verdict::Pass, low));
    let c = rig.counters();
    assert_eq!((c.hits(1), c.get(Counter::Transmitted), c.get(Counter::Miss)), (1, 1, 1));
}

#[test]
fn a_get_bundle_with_a_bad_want_is_passed_on_and_counted_malformed() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    rig.maps().push(&entry(1, 1, 0)).unwrap();
    let good = get_bundle_frame(&rig.exec, 1, 0, 2, false);
    // want is the 9th byte of the GET_BUNDLE body: header 8, requester 8.
    let want_at = PAYLOAD_OFF + 16;
    for (at, v) in [(want_at, 1u8), (want_at, 17), (want_at + 1, 1)] {
        let mut bad = good.clone();
        bad[at] = v;
        let (verdict, out) = rig.run(&bad);
        assert_eq!((verdict, out), (Verdict::Pass, bad), "byte {at} = {v}");
    }
    assert_eq!(rig.counters().get(Counter::Malformed), 3);
    assert_eq!(rig.maps().reserved(1), 1, "nothing served to a malformed request");
    assert_eq!(rig.run(&good).0, Verdict::Tx);
}

#[test]
fn a_fresh_hint_passes_a_get_bundle_on_without_wait() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| s.hint_ttl_ns = 2_000_000_000);
    rig.maps().push(&entry(1, 3, 0)).unwrap();
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    let n = encode_hint(&mut msg, 1).unwrap();
    rig.run(&from_switch(&rig, PORT, &msg[..n]));
    let (verdict, out) = rig.run(&get_bundle_frame(&rig.exec, 1, 0, 4, true));
    assert_eq!(verdict, Verdict::Pass);
    let expected =
        Message::GetBundle { rtrv_prio: 1, exec_rsrc: 0, from: Requester::new(NODE, 7, 9), want: 4, wait: false };
    assert_eq!(scheduler_common::decode(&out[PAYLOAD_OFF..]), Ok(expected));
    assert_eq!(rig.maps().reserved(3), 1);
    assert_eq!(rig.counters().get(Counter::Bypass), 1);
}

#[test]
fn ethernet_padding_is_ignored_and_the_reply_has_exact_length() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    let e = entry(5, 2, 0);
    rig.maps().push(&e).unwrap();
    let mut request = rig.get_task_frame(1, 0, 1);
    assert_eq!(request.len(), 58);
    request.extend_from_slice(&[0xEE; 2]); // minimum Ethernet frame: 60 bytes
    let (verdict, out) = rig.run(&request);
    assert_eq!(verdict, Verdict::Tx);
    let mut assign = [0u8; 48];
    encode_assign(&mut assign, &e, 0).unwrap();
    assert_eq!(out, udp_frame(&rig.exec.reversed(), Ipv4Fields::default(), &assign));
}

#[test]
fn miss_passes_the_request_on_unchanged() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(|_| {});
    let request = rig.get_task_frame(1, 0xFF, 9);
    let (verdict, out) = rig.run(&request);
    assert_eq!(verdict, Verdict::Pass);
    assert_eq!(out, request);
    let c = rig.counters();
    assert_eq!((c.get(Counter::Miss), c.get(Counter::Passed), c.total_hits()), (1, 1, 0));
}

#[test]
fn higher_priority_first_and_fifo_within_a_priority() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    for (t, p) in [(1, 3), (2, 1), (3, 2), (4, 1), (5, 4), (6, 3)] {
        rig.maps().push(&entry(t, p, 0)).unwrap();
    }
    let order: Vec<u32> = (0..6).map(|_| tid(&rig.take(1, 0).expect("a task"))).collect();
    assert_eq!(order, [2, 4, 3, 1, 6, 5]);
    assert_eq!(rig.take(1, 0), None);
    let c = rig.counters();
    assert_eq!((c.hits(1), c.hits(2), c.hits(3), c.hits(4), c.get(Counter::Miss)), (2, 1, 2, 1, 1));
}

#[test]
fn rtrv_prio_starts_the_search_at_that_level() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    rig.maps().push(&entry(1, 1, 0)).unwrap();
    rig.maps().push(&entry(3, 3, 0)).unwrap();
    assert_eq!(rig.take(2, 0).map(|e| tid(&e)), Some(3), "priority 1 must not be searched");
    assert_eq!(rig.take(2, 0), None, "only priority 1 is left");
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(1));
    // Beyond the levels in use (4), nothing is searched.
    rig.maps().push(&entry(4, 4, 0)).unwrap();
    assert_eq!(rig.take(5, 0), None);
    assert_eq!(rig.take(4, 0).map(|e| tid(&e)), Some(4));
}

#[test]
fn priorities_below_the_levels_in_use_queue_at_the_lowest_level() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(|s| s.levels = 2);
    let (verdict, _) = rig.run(&rig.refill_frame(&[entry(7, 6, 0)]));
    assert_eq!(verdict, Verdict::Drop);
    assert_eq!(rig.xdp.maps().reserved(2), 1);
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(7));
}

#[test]
fn a_task_needing_more_resources_is_put_back_not_lost() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    rig.maps().push(&entry(1, 1, 0b10)).unwrap(); // needs resource bit 1
    rig.maps().push(&entry(2, 2, 0b01)).unwrap();
    // An executor offering only bit 0 skips task 1 and gets task 2 from the next level.
    assert_eq!(rig.take(1, 0b01).map(|e| tid(&e)), Some(2));
    assert_eq!(rig.take(1, 0b01), None, "task 1 does not fit; passed on to tier 2");
    let c = rig.counters();
    assert_eq!(c.get(Counter::Requeued), 2);
    assert_eq!(rig.maps().reserved(1), 1, "task 1 is still queued");
    assert_eq!(rig.take(1, 0b11).map(|e| tid(&e)), Some(1));
}

#[test]
fn a_task_past_its_lease_goes_to_the_overflow_queue_instead_of_an_executor() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| s.lease_ms = 60);
    // Task 1 needs resource bit 1, which the executor below does not offer.
    let (verdict, _) = rig.run(&rig.refill_frame(&[entry(1, 1, 0b10), entry(2, 2, 0)]));
    assert_eq!(verdict, Verdict::Drop);
    let stamp = rig.maps().peek_ring(1).unwrap().expect("a head").pad;
    assert_ne!(stamp, [0, 0], "REFILL ingest stamps the entry");
    // Task 1 is put back (keeping its stamp), task 2 served from the next level: its
    // ASSIGN decodes, so the stamp left the entry on the way out.
    assert_eq!(rig.take(1, 0b01).map(|e| tid(&e)), Some(2));
    let head = rig.maps().peek_ring(1).unwrap().expect("task 1 is back");
    assert_eq!((tid(&head), head.pad), (1, stamp), "a put-back keeps the stamp");
    // Still young: put back again.
    assert_eq!(rig.take(1, 0b01), None);
    assert_eq!(rig.counters().get(Counter::Expired), 0);
    std::thread::sleep(Duration::from_millis(80));
    // Past the lease: not served, not put back, but moved to the overflow queue, from
    // which the agent RETURNs it to tier 2.
    assert_eq!(rig.take(1, 0b11), None, "an expired task is not served even to an executor that could run it");
    let c = rig.counters();
    assert_eq!((c.get(Counter::Expired), c.get(Counter::Miss)), (1, 2));
    assert_eq!(rig.maps().reserved(1), 0, "its slot is released");
    let returned = rig.maps().pop_overflow().unwrap().expect("in the overflow queue");
    assert_eq!(Entry { pad: [0; 2], ..returned }, entry(1, 1, 0b10));
}

#[test]
fn without_a_lease_nothing_expires() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(|s| s.lease_ms = 0);
    rig.run(&rig.refill_frame(&[entry(1, 1, 0)]));
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(1));
    assert_eq!(rig.counters().get(Counter::Expired), 0);
}

#[test]
fn refill_from_the_switch_fills_the_rings_in_order() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    let batch: Vec<Entry> = (1..=MAX_LIST as u32).map(|t| entry(t, (t % 4 + 1) as u8, 0)).collect();
    let (verdict, _) = rig.run(&rig.refill_frame(&batch));
    assert_eq!(verdict, Verdict::Drop);
    let c = rig.counters();
    assert_eq!((c.get(Counter::RefillFrames), c.get(Counter::RefillTasks)), (1, 16));
    assert_eq!(rig.maps().occupancy()[..4], [4, 4, 4, 4]);
    // The batch lists its entries newest first: each ring serves them last to first.
    for prio in 1..=4u8 {
        let want: Vec<u32> = batch.iter().rev().filter(|e| e.task.prio == prio).map(tid).collect();
        let got: Vec<u32> = std::iter::from_fn(|| rig.maps().pop(prio).unwrap()).map(|e| tid(&e)).collect();
        assert_eq!(got, want, "ring {prio}");
    }
    // Entries go in and out as bytes: the popped entries equal what was sent, but for the
    // lease stamp the program wrote into their pad while they sat in the ring.
    let (_, _) = rig.run(&rig.refill_frame(&batch[..1]));
    let popped = rig.maps().pop(2).unwrap().expect("the entry");
    assert_ne!(popped.pad, [0, 0], "REFILL ingest stamps the entry");
    assert_eq!(Entry { pad: [0; 2], ..popped }, batch[0]);
}

/// Whether an epoll sleeper on the event ring is woken within `limit` by what `run`
/// does. Registered while the ring is empty, so only a wake-up the program sends makes
/// it ready.
fn wakes_a_sleeper(events: &mut scheduler_user::xdp::EventReader, run: impl FnOnce(), limit: Duration) -> bool {
    use std::os::fd::{AsFd, AsRawFd};
    events.drain(64);
    // SAFETY: plain system calls on a descriptor this function owns and one it borrows.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        assert!(ep >= 0, "epoll_create1");
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 1 };
        assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, events.as_fd().as_raw_fd(), &mut ev), 0, "epoll_ctl");
        run();
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 1];
        let n = libc::epoll_wait(ep, out.as_mut_ptr(), 1, limit.as_millis() as i32);
        libc::close(ep);
        n == 1
    }
}

/// The agent sleeps while its REFILL_REQ is parked at tier 2: the answer's first frame
/// stored sends one event, whatever the frames that follow, stamped on CLOCK_MONOTONIC
/// (to which the agent times the round trip). It wakes the agent, unless the agent armed
/// for a request that announced executors waiting here: then it is recorded for the
/// agent's next wake-up, and only an empty answer wakes it. A frame handed to an executor
/// waiting at the host sends nothing
/// (`an_executor_waits_at_its_host_and_a_one_task_refill_becomes_its_assign`).
#[test]
fn the_first_frame_of_an_awaited_answer_sends_one_event_which_wakes_the_agent_as_it_armed() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    let mut events = rig.maps().take_events().expect("event reader");
    let batch: Vec<Entry> = (1..=6).map(|t| entry(t, 1, 0)).collect();
    // Nobody awaits an answer: a frame is stored and wakes no one.
    let woke =
        wakes_a_sleeper(&mut events, || drop(rig.run(&rig.refill_frame(&batch[..1]))), Duration::from_millis(200));
    assert!(!woke, "no event, no wake-up");
    assert!(events.drain(8).iter().all(|e| e.kind != EVENT_REFILL_ANSWER));
    // The agent arms before sending its request; the first frame disarms and wakes it.
    rig.maps().arm_refill_answer(true);
    assert!(rig.maps().refill_armed());
    let before = monotonic_ns();
    let woke = wakes_a_sleeper(&mut events, || drop(rig.run(&rig.refill_frame(&batch[1..2]))), Duration::from_secs(5));
    let after = monotonic_ns();
    assert!(woke, "the first frame wakes the agent");
    assert!(!rig.maps().refill_armed(), "the frame disarmed it");
    let got: Vec<_> = events.drain(8).into_iter().filter(|e| e.kind == EVENT_REFILL_ANSWER).collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].prio, 0);
    assert!((before..=after).contains(&got[0].ktime_ns), "stamped on the fine clock while the frame ran");
    // The answer's further frames are stored without waking it again.
    let woke =
        wakes_a_sleeper(&mut events, || drop(rig.run(&rig.refill_frame(&batch[2..4]))), Duration::from_millis(200));
    assert!(!woke);
    assert!(events.drain(8).iter().all(|e| e.kind != EVENT_REFILL_ANSWER));
    // Armed for a request that announced waiting executors: the first frame stored
    // records the event, stamped, without waking the agent.
    rig.maps().arm_refill_answer(false);
    let before = monotonic_ns();
    let woke =
        wakes_a_sleeper(&mut events, || drop(rig.run(&rig.refill_frame(&batch[4..]))), Duration::from_millis(200));
    let after = monotonic_ns();
    assert!(!woke, "recorded, not woken");
    assert!(!rig.maps().refill_armed(), "the frame disarmed it");
    let got: Vec<_> = events.drain(8).into_iter().filter(|e| e.kind == EVENT_REFILL_ANSWER).collect();
    assert_eq!(got.len(), 1, "the agent reads it at its next wake-up");
    assert!((before..=after).contains(&got[0].ktime_ns));
    let c = rig.counters();
    assert_eq!((c.get(Counter::RefillFrames), c.get(Counter::RefillTasks)), (4, 6), "every frame stored as before");
    assert_eq!(rig.maps().occupancy()[0], 6);
    // An empty answer (tier 2 had nothing, or bolt.p4, which parks no request, answered at
    // once) is a frame too: it wakes the agent however it armed.
    for wake in [true, false] {
        rig.maps().arm_refill_answer(wake);
        let mut verdict = None;
        let woke =
            wakes_a_sleeper(&mut events, || verdict = Some(rig.run(&rig.refill_frame(&[])).0), Duration::from_secs(5));
        assert!(woke, "the empty answer wakes the agent (armed to wake: {wake})");
        assert_eq!(verdict, Some(Verdict::Drop));
        assert!(!rig.maps().refill_armed());
        let got: Vec<_> = events.drain(8).into_iter().filter(|e| e.kind == EVENT_REFILL_ANSWER).collect();
        assert_eq!(got.len(), 1);
    }
    assert_eq!(rig.maps().occupancy()[0], 6);
}

/// The kernel's ring buffer wakes a sleeping reader for a record only if the reader has
/// read every record before it, unless the record forces the wake-up. An answer's event
/// recorded without a wake-up (the agent armed for waiting executors) stays unread until
/// the agent next wakes; an executor that starts waiting behind it must still wake the
/// agent, or it waits for the agent's next timer (SW1 at 95 %: 2 to 4 ms, with the
/// task it was to get sitting in another host's rings).
#[test]
fn an_unread_recorded_event_does_not_keep_a_waiting_executor_from_waking_the_agent() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| {
        s.host_wait_ns = 10_000_000;
        s.hint_ttl_ns = 2_000_000_000;
        // No low-watermark events: only the answer's and the waiting executor's.
        s.low_watermark = 0;
    });
    let mut events = rig.maps().take_events().expect("event reader");
    // Tier 2 said it holds nothing (an empty REFILL, not awaited: no event).
    assert_eq!(rig.run(&rig.refill_frame(&[])).0, Verdict::Drop);
    rig.maps().arm_refill_answer(false);
    let woke = wakes_a_sleeper(
        &mut events,
        || {
            // The answer's one task is stored, its event recorded; an executor takes the
            // task, and asks again, with WAIT: nothing here, so it waits at the host.
            assert_eq!(rig.run(&rig.refill_frame(&[entry(1, 1, 0)])).0, Verdict::Drop);
            assert_eq!(rig.run(&waiting_get_task_frame(&rig.exec, 0b01, 7, 1)).0, Verdict::Tx);
            assert_eq!(rig.run(&waiting_get_task_frame(&rig.exec, 0b01, 7, 2)).0, Verdict::Drop);
        },
        Duration::from_secs(5),
    );
    assert!(woke, "the waiting executor woke the agent");
    let kinds: Vec<u8> = events.drain(8).iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EVENT_REFILL_ANSWER, EVENT_WAITING]);
}

/// Tier 2's queue model answers a REFILL_REQ; the REFILLs it sends, stored by the XDP
/// program, come out of each ring in the order tier 2 dequeued them, which for one level
/// is the order they were submitted in.
#[test]
fn a_refills_entries_are_served_in_tier_2s_dequeue_order() {
    use scheduler_common::{Message, RefillRequest};
    use scheduler_user::queue::{Collect, Output, QueueConfig, Scheduler};
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    let mut tier2 = Scheduler::new(QueueConfig { capacity: 64, priorities: 4, ..QueueConfig::default() }).unwrap();
    let client = SocketAddrV4::new(Ipv4Addr::new(198, 51, 100, 7), 9000);
    let tasks: Vec<Task> = (1..=20u32).map(|t| entry(t, (t % 2 + 1) as u8, 0).task).collect();
    let mut out = Collect::default();
    for chunk in tasks.chunks(MAX_LIST) {
        tier2.handle(&Message::Submit { job: JobRef::new(1, 2), flags: 0, tasks: chunk }, client, &mut out).unwrap();
    }
    assert!(out.0.is_empty(), "nothing refused");
    let node = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 20), PORT);
    tier2.handle(&Message::RefillReq { node_rsrc: 0, req: RefillRequest::new(NODE, 20) }, node, &mut out).unwrap();
    let mut dequeued = Vec::new();
    for o in &out.0 {
        let Output::Refill { entries, .. } = o else { panic!("unexpected {o:?}") };
        assert_eq!(rig.run(&rig.refill_frame(entries)).0, Verdict::Drop);
        dequeued.extend(entries.iter().rev().map(tid));
    }
    assert_eq!(out.0.len(), 2, "a full batch and a short one");
    for prio in 1..=2u8 {
        let want: Vec<u32> = tasks.iter().filter(|t| t.prio == prio).map(|t| t.tid()).collect();
        let served: Vec<u32> = std::iter::from_fn(|| rig.maps().pop(prio).unwrap()).map(|e| tid(&e)).collect();
        assert_eq!(served, want, "ring {prio} serves in submission order");
        let order: Vec<u32> = dequeued.iter().copied().filter(|t| want.contains(t)).collect();
        assert_eq!(served, order, "ring {prio} serves in tier 2's dequeue order");
    }
}

#[test]
fn full_rings_overflow_to_the_agent_then_back_to_the_switch() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| {
        s.ring_capacity = 3;
        s.overflow_capacity = 4;
    });
    let batch: Vec<Entry> = (1..=10).map(|t| entry(t, 1, 0)).collect();
    let request = rig.refill_frame(&batch);
    let (verdict, out) = rig.run(&request);
    // Stored last to first: 10, 9, 8 fit the ring, 7 to 4 the overflow queue; the first
    // 3 of the list go back to the switch.
    assert_eq!(verdict, Verdict::Tx);
    let mut ret = [0u8; MAX_MESSAGE_LEN];
    let n = encode_return(&mut ret, &batch[..3]).unwrap();
    let expected = udp_frame(&rig.switch_to_node().reversed(), Ipv4Fields::default(), &ret[..n]);
    assert_eq!(out, expected, "bounced RETURN differs from scheduler-common's encoding");
    let c = rig.counters();
    assert_eq!((c.get(Counter::RefillTasks), c.get(Counter::Overflow), c.get(Counter::Bounced)), (3, 4, 3));
    // Nothing lost: ring + overflow + bounced = everything sent, each once.
    let mut seen: Vec<u32> = std::iter::from_fn(|| rig.maps().pop(1).unwrap()).map(|e| tid(&e)).collect();
    assert_eq!(seen, [10, 9, 8]);
    seen.extend(std::iter::from_fn(|| rig.maps().pop_overflow().unwrap()).map(|e| tid(&e)));
    seen.extend(batch[..3].iter().map(tid));
    seen.sort_unstable();
    assert_eq!(seen, (1..=10).collect::<Vec<_>>());
}

#[test]
fn overflow_keeps_other_priorities_flowing() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| s.ring_capacity = 1);
    let batch = [entry(1, 1, 0), entry(2, 1, 0), entry(3, 2, 0)];
    assert_eq!(rig.run(&rig.refill_frame(&batch)).0, Verdict::Drop);
    // Stored last to first: 3 to ring 2, 2 to ring 1, and 1, its ring full, to overflow.
    assert_eq!(rig.maps().occupancy()[..2], [1, 1]);
    assert_eq!(rig.maps().pop_overflow().unwrap().map(|e| tid(&e)), Some(1));
    assert!(matches!(rig.maps().push(&entry(4, 1, 0)), Err(scheduler_user::xdp::PushError::Full(1))));
}

#[test]
fn refill_from_anyone_but_the_switch_is_dropped_and_counted() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    let mut frame = rig.refill_frame(&[entry(1, 1, 0)]);
    frame[ETH_LEN + 12..ETH_LEN + 16].copy_from_slice(&[192, 0, 2, 66]);
    fix_ipv4_checksum(&mut frame);
    assert_eq!(rig.run(&frame).0, Verdict::Drop);
    let c = rig.counters();
    assert_eq!((c.get(Counter::ForeignRefill), c.get(Counter::RefillTasks)), (1, 0));
    assert_eq!(rig.maps().occupancy().iter().sum::<i64>(), 0);

    // With no switch configured, no REFILL is accepted at all.
    let rig = Rig::new(|s| s.switch_addr = None);
    assert_eq!(rig.run(&rig.refill_frame(&[entry(1, 1, 0)])).0, Verdict::Drop);
    assert_eq!(rig.counters().get(Counter::ForeignRefill), 1);
}

/// The program runs on the executor-facing interfaces too, where an executor can forge
/// the switch's source address: REFILL is stored only when it arrives on an uplink.
/// (BPF_PROG_TEST_RUN frames arrive on the loopback interface.)
#[test]
fn refill_off_the_uplink_is_dropped_and_counted() {
    if !can_run() {
        return;
    }
    let mut not_lo = TEST_RUN_UPLINK;
    not_lo[0] = LOOPBACK_IFINDEX + 1000;
    for uplinks in [[0; scheduler_common::maps::MAX_UPLINKS], not_lo] {
        let mut rig = Rig::new(|s| s.uplink_ifindex = uplinks);
        assert_eq!(rig.run(&rig.refill_frame(&[entry(1, 1, 0)])).0, Verdict::Drop);
        let c = rig.counters();
        assert_eq!((c.get(Counter::RefillOffUplink), c.get(Counter::RefillTasks)), (1, 0), "uplinks {uplinks:?}");
        assert_eq!(rig.maps().occupancy().iter().sum::<i64>(), 0);
    }
    // In the second slot as well as the first.
    let mut second = [0; scheduler_common::maps::MAX_UPLINKS];
    second[1] = LOOPBACK_IFINDEX;
    let mut rig = Rig::new(|s| s.uplink_ifindex = second);
    assert_eq!(rig.run(&rig.refill_frame(&[entry(1, 1, 0)])).0, Verdict::Drop);
    assert_eq!((rig.counters().get(Counter::RefillOffUplink), rig.counters().get(Counter::RefillTasks)), (0, 1));
    assert_eq!(rig.maps().occupancy().iter().sum::<i64>(), 1);
}

/// A HINT with the switch's source address arriving on an interface that is not an uplink
/// (an executor forging it behind the host) changes nothing: the host would otherwise pass
/// every GET_TASK on to tier 2 while the stamp stays fresh.
#[test]
fn a_hint_off_the_uplink_is_not_recorded() {
    if !can_run() {
        return;
    }
    let mut not_lo = TEST_RUN_UPLINK;
    not_lo[0] = LOOPBACK_IFINDEX + 1000;
    let mut rig = Rig::new(|s| s.uplink_ifindex = not_lo);
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    let n = encode_hint(&mut msg, 1).unwrap();
    let hint = udp_frame(&rig.switch_to_node(), Ipv4Fields::default(), &msg[..n]);
    assert_eq!(rig.run(&hint).0, Verdict::Pass);
    let c = rig.counters();
    assert_eq!((c.get(Counter::StampOffUplink), c.get(Counter::Tier2Stamps)), (1, 0));
    assert_eq!(rig.maps().tier2_hint().best(), 0, "a forged HINT was recorded");
}

/// The program's aya-log lines reach the process's `log` logger (the agent's log) at the
/// level chosen at load time, and nothing above it: a foreign REFILL logs at info.
#[test]
fn log_lines_reach_userspace_at_the_chosen_level_only() {
    if !can_run() {
        return;
    }
    static LINES: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());
    struct Capture;
    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, record: &log::Record) {
            LINES.lock().unwrap().push((record.level(), record.args().to_string()));
        }
        fn flush(&self) {}
    }
    // The logger must be in place before the program's logger is set up (at load).
    static CAPTURE: Capture = Capture;
    log::set_logger(&CAPTURE).expect("no other test of this binary sets a logger");
    log::set_max_level(log::LevelFilter::Trace);
    let foreign_refill = |rig: &Rig| {
        let mut frame = rig.refill_frame(&[entry(1, 1, 0)]);
        frame[ETH_LEN + 12..ETH_LEN + 16].copy_from_slice(&[192, 0, 2, 66]);
        fix_ipv4_checksum(&mut frame);
        frame
    };
    // `bolt agent --xdp-log`'s values: 3 is info, 2 is warn.
    let mut rig = Rig::new(|s| s.log_level = scheduler_user::agent::parse_log_level("info").unwrap());
    let mut logger = rig.xdp.take_logger().expect("a logger at a level above off");
    assert_eq!(rig.run(&foreign_refill(&rig)).0, Verdict::Drop);
    logger.flush();
    let lines = std::mem::take(&mut *LINES.lock().unwrap());
    assert!(
        lines.iter().any(|(level, text)| *level == log::Level::Info
            && text.contains("REFILL from 192.0.2.66 dropped: not the switch")),
        "{lines:?}"
    );

    let mut rig = Rig::new(|s| s.log_level = scheduler_user::agent::parse_log_level("warn").unwrap());
    let mut logger = rig.xdp.take_logger().expect("a logger at a level above off");
    assert_eq!(rig.run(&foreign_refill(&rig)).0, Verdict::Drop);
    logger.flush();
    assert_eq!(rig.counters().get(Counter::ForeignRefill), 1);
    let lines = std::mem::take(&mut *LINES.lock().unwrap());
    assert!(lines.iter().all(|(_, text)| !text.contains("REFILL from")), "info line at warn: {lines:?}");

    // Off (the default): no logger at all, and the program's level check skips the line.
    let mut rig = Rig::new(|_| {});
    assert!(rig.xdp.take_logger().is_none());
}

/// GET_TASK is answered only from the executor prefix: a request from elsewhere is
/// dropped and counted, and the task stays queued for a registered executor.
#[test]
fn get_task_from_outside_the_executor_prefix_is_dropped_and_counted() {
    if !can_run() {
        return;
    }
    // The sample executor is 192.0.2.10: inside 192.0.2.8/29, not inside 192.0.2.0/29.
    let mut rig = Rig::new(|s| s.executors = "192.0.2.0/29".parse_prefix());
    rig.maps().push(&entry(1, 1, 0)).unwrap();
    let (verdict, _) = rig.run(&rig.get_task_frame(1, 0, 1));
    assert_eq!(verdict, Verdict::Drop);
    let c = rig.counters();
    assert_eq!((c.get(Counter::ForeignGetTask), c.hits(1), c.get(Counter::Miss)), (1, 0, 0));
    assert_eq!(rig.maps().occupancy()[0], 1, "the task stays for a registered executor");

    let mut rig = Rig::new(|s| s.executors = "192.0.2.8/29".parse_prefix());
    rig.maps().push(&entry(1, 1, 0)).unwrap();
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(1));
    assert_eq!(rig.counters().get(Counter::ForeignGetTask), 0);
    // The default admits every source, as before any prefix is configured.
    let mut rig = Rig::new(|_| {});
    rig.maps().push(&entry(2, 1, 0)).unwrap();
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(2));
}

trait ParsePrefix {
    fn parse_prefix(&self) -> Ipv4Prefix;
}

impl ParsePrefix for str {
    fn parse_prefix(&self) -> Ipv4Prefix {
        Ipv4Prefix::parse(self).unwrap()
    }
}

/// One hostile or foreign input: what it is, the verdict, and the counter it must bump.
struct Case {
    what: &'static str,
    frame: Vec<u8>,
    verdict: Verdict,
    counter: Counter,
}

fn hostile_cases(rig: &Rig) -> Vec<Case> {
    let get = rig.get_task_frame(1, 0, 1);
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = get.clone();
        f(&mut v);
        v
    };
    let pass = Verdict::Pass;
    let mut cases = vec![
        Case {
            what: "ethernet header only",
            frame: get[..ETH_LEN].to_vec(),
            verdict: pass,
            counter: Counter::Truncated,
        },
        Case {
            what: "cut inside the IPv4 header",
            frame: get[..ETH_LEN + 10].to_vec(),
            verdict: pass,
            counter: Counter::Truncated,
        },
        Case {
            what: "cut inside the UDP header",
            frame: get[..ETH_LEN + 24].to_vec(),
            verdict: pass,
            counter: Counter::Truncated,
        },
        Case {
            what: "cut inside the Bolt message",
            frame: get[..PAYLOAD_OFF + 10].to_vec(),
            verdict: pass,
            counter: Counter::Truncated,
        },
        Case {
            what: "IPv6",
            frame: with(&|f| f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes())),
            verdict: pass,
            counter: Counter::Ipv6,
        },
        Case {
            what: "802.1Q VLAN tag",
            frame: {
                let mut f = get[..12].to_vec();
                f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
                f.extend_from_slice(&get[12..]);
                f
            },
            verdict: pass,
            counter: Counter::Vlan,
        },
        Case {
            what: "ARP",
            frame: with(&|f| f[12..14].copy_from_slice(&0x0806u16.to_be_bytes())),
            verdict: pass,
            counter: Counter::NotIpv4,
        },
        Case {
            what: "IPv4 with options",
            frame: {
                let mut f = get[..ETH_LEN + 20].to_vec();
                f.extend_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
                f.extend_from_slice(&get[ETH_LEN + 20..]);
                f[ETH_LEN] = 0x46;
                let total = u16::from_be_bytes([f[ETH_LEN + 2], f[ETH_LEN + 3]]) + 4;
                f[ETH_LEN + 2..ETH_LEN + 4].copy_from_slice(&total.to_be_bytes());
                fix_ipv4_checksum(&mut f);
                f
            },
            verdict: pass,
            counter: Counter::IpOptions,
        },
        Case {
            what: "first fragment (more fragments set)",
            frame: with(&|f| {
                f[ETH_LEN + 6] = 0x20;
                fix_ipv4_checksum(f)
            }),
            verdict: pass,
            counter: Counter::IpFragment,
        },
        Case {
            what: "later fragment (offset set)",
            frame: with(&|f| {
                f[ETH_LEN + 7] = 0x10;
                fix_ipv4_checksum(f)
            }),
            verdict: pass,
            counter: Counter::IpFragment,
        },
        Case {
            what: "TCP",
            frame: with(&|f| {
                f[ETH_LEN + 9] = 6;
                fix_ipv4_checksum(f)
            }),
            verdict: pass,
            counter: Counter::NotUdp,
        },
        Case {
            what: "another UDP port",
            frame: with(&|f| f[ETH_LEN + 22..ETH_LEN + 24].copy_from_slice(&53u16.to_be_bytes())),
            verdict: pass,
            counter: Counter::OtherPort,
        },
        Case {
            what: "IP total length beyond the frame",
            frame: with(&|f| {
                f[ETH_LEN + 3] += 8;
                fix_ipv4_checksum(f)
            }),
            verdict: pass,
            counter: Counter::Truncated,
        },
        Case {
            what: "UDP length disagreeing with IP",
            frame: with(&|f| f[ETH_LEN + 25] -= 1),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "bad magic",
            frame: with(&|f| f[PAYLOAD_OFF + 1] = 0x18),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "bad version",
            frame: with(&|f| f[PAYLOAD_OFF + 2] = 1),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "unknown op",
            frame: with(&|f| f[PAYLOAD_OFF + 3] = 99),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "unknown header flag",
            frame: with(&|f| f[PAYLOAD_OFF + 7] = 0x80),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "GET_TASK with a header flag",
            frame: with(&|f| f[PAYLOAD_OFF + 7] = 0x01),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "GET_TASK with WAIT and another flag",
            frame: with(&|f| f[PAYLOAD_OFF + 7] = 0x06),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "HINT from the switch naming level 9",
            frame: {
                let mut leg = rig.switch_to_node();
                leg.dst.set_port(PORT);
                let mut f =
                    udp_frame(&leg, Ipv4Fields::default(), &[0xb0, 0x17, scheduler_common::VERSION, 14, 0, 9, 0, 0]);
                fix_ipv4_checksum(&mut f);
                f
            },
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "GET_TASK priority 0",
            frame: with(&|f| f[PAYLOAD_OFF + 5] = 0),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "GET_TASK priority 9",
            frame: with(&|f| f[PAYLOAD_OFF + 5] = 9),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "GET_TASK with a list count",
            frame: with(&|f| f[PAYLOAD_OFF + 4] = 1),
            verdict: pass,
            counter: Counter::Malformed,
        },
        Case {
            what: "GET_TASK of another node",
            frame: get_task_frame(&rig.exec, 1, 0, NODE + 1, 1),
            verdict: pass,
            counter: Counter::OtherNode,
        },
    ];
    // A GET_TASK with 4 extra payload bytes: lengths consistent, message too long.
    let mut long = [0u8; 20];
    encode_get_task(&mut long, 1, 0, Requester::new(NODE, 1, 1), false).unwrap();
    cases.push(Case {
        what: "GET_TASK longer than 16 bytes",
        frame: udp_frame(&rig.exec, Ipv4Fields::default(), &long),
        verdict: pass,
        counter: Counter::Malformed,
    });
    let mut submit = [0u8; 64];
    let n = encode_submit(&mut submit, JobRef::new(1, 1), 0, &[Task { prio: 1, ..Task::default() }]).unwrap();
    cases.push(Case {
        what: "SUBMIT (for tier 2)",
        frame: udp_frame(&rig.exec, Ipv4Fields::default(), &submit[..n]),
        verdict: pass,
        counter: Counter::OtherOp,
    });
    let good_refill = rig.refill_frame(&[entry(1, 1, 0), entry(2, 2, 0)]);
    let refill_with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = good_refill.clone();
        f(&mut v);
        v
    };
    let task_prio = PAYLOAD_OFF + Header::LEN + 40 + 8 + 4; // second entry's task prio
    cases.push(Case {
        what: "REFILL with a task of priority 0",
        frame: refill_with(&|f| f[task_prio] = 0),
        verdict: Verdict::Drop,
        counter: Counter::Malformed,
    });
    cases.push(Case {
        what: "REFILL with an unknown task flag",
        frame: refill_with(&|f| f[task_prio + 3] = 0x80),
        verdict: Verdict::Drop,
        counter: Counter::Malformed,
    });
    cases.push(Case {
        what: "REFILL with a non-zero pad",
        frame: refill_with(&|f| f[PAYLOAD_OFF + Header::LEN + 39] = 1),
        verdict: Verdict::Drop,
        counter: Counter::Malformed,
    });
    cases.push(Case {
        what: "REFILL whose BEST names level 9",
        frame: refill_with(&|f| f[PAYLOAD_OFF + 5] = 9),
        verdict: Verdict::Drop,
        counter: Counter::Malformed,
    });
    cases.push(Case {
        what: "REFILL whose count disagrees with its length",
        frame: refill_with(&|f| f[PAYLOAD_OFF + 4] = 3),
        verdict: Verdict::Drop,
        counter: Counter::Malformed,
    });
    cases.push(Case {
        what: "REFILL listing more than 16 entries",
        frame: refill_with(&|f| f[PAYLOAD_OFF + 4] = 17),
        verdict: Verdict::Drop,
        counter: Counter::Malformed,
    });
    cases
}

#[test]
fn hostile_and_foreign_frames_are_passed_or_dropped_and_counted() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    // A queued task must survive every one of these.
    let keep = entry(99, 1, 0);
    rig.maps().push(&keep).unwrap();
    for case in hostile_cases(&rig) {
        let before = rig.counters();
        let (verdict, out) = rig.run(&case.frame);
        let delta = rig.counters().since(&before);
        assert_eq!(verdict, case.verdict, "{}: verdict", case.what);
        assert_eq!(delta.get(case.counter), 1, "{}: counter {}", case.what, case.counter.name());
        assert_eq!(delta.total_hits() + delta.get(Counter::RefillTasks), 0, "{}: touched the rings", case.what);
        if verdict == Verdict::Pass {
            assert_eq!(out, case.frame, "{}: a passed frame must be untouched", case.what);
        }
    }
    assert_eq!(rig.maps().pop(1).unwrap(), Some(keep));
}

/// xorshift64*: a reproducible stream of random bytes without a dependency.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn fill(&mut self, buf: &mut [u8]) {
        buf.iter_mut().for_each(|b| *b = self.next() as u8);
    }
}

/// Thousands of random, mutated, truncated and oversized frames through the loaded
/// (verifier-checked) program: every run ends in a verdict that is counted, nothing
/// aborts, and the rings hold exactly what the counters say went in and out.
#[test]
fn random_truncated_and_oversized_frames_never_abort_and_are_all_counted() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    for t in 0..64 {
        rig.maps().push(&entry(t, 1 + (t % 4) as u8, 0)).unwrap();
    }
    let before = rig.counters();
    let mut noise = Noise(0x5EED_B017_0000_0007);
    let get = rig.get_task_frame(1, 0xff, 9);
    let refill = rig.refill_frame(&(100..100 + MAX_LIST as u32).map(|t| entry(t, 2, 0)).collect::<Vec<_>>());
    let mut frames: Vec<Vec<u8>> = Vec::new();
    // Random bytes of every length from an Ethernet header to beyond the MTU.
    for _ in 0..1500 {
        let mut f = vec![0u8; 14 + noise.below(3000)];
        noise.fill(&mut f);
        frames.push(f);
    }
    // Random bytes behind a valid Ethernet/IPv4/UDP header to the Bolt port.
    for base in [&get, &refill] {
        for _ in 0..1500 {
            let mut f = base[..PAYLOAD_OFF].to_vec();
            let mut tail = vec![0u8; noise.below(700)];
            noise.fill(&mut tail);
            f.extend_from_slice(&tail);
            frames.push(f);
        }
    }
    // Valid frames with one to three bytes changed anywhere.
    for base in [&get, &refill] {
        for _ in 0..1500 {
            let mut f = base.clone();
            for _ in 0..1 + noise.below(3) {
                let i = noise.below(f.len());
                f[i] = noise.next() as u8;
            }
            frames.push(f);
        }
    }
    // Every truncation of both, and both padded out to oversized frames.
    for base in [&get, &refill] {
        frames.extend((14..base.len()).map(|n| base[..n].to_vec()));
        for pad in [1, 64, 1500, 3000] {
            let mut f = base.clone();
            f.resize(base.len() + pad, 0xAB);
            frames.push(f);
        }
    }
    let mut verdicts = [0u64; 3];
    for f in &frames {
        let (verdict, out) = rig.run(f);
        match verdict {
            Verdict::Pass => verdicts[0] += 1,
            Verdict::Tx => {
                verdicts[1] += 1;
                // What the program sends is a well-formed ASSIGN or RETURN.
                let msg = scheduler_common::decode(&out[PAYLOAD_OFF..]).expect("a transmitted frame decodes");
                assert!(matches!(msg.op(), scheduler_common::Op::Assign | scheduler_common::Op::Return));
            }
            Verdict::Drop => verdicts[2] += 1,
            v => panic!("verdict {v:?} on a {}-byte frame {:02x?}", f.len(), &f[..f.len().min(64)]),
        }
    }
    let c = rig.counters().since(&before);
    println!("{} frames: passed {}, transmitted {}, dropped {}", frames.len(), verdicts[0], verdicts[1], verdicts[2]);
    assert_eq!(
        [c.get(Counter::Passed), c.get(Counter::Transmitted), c.get(Counter::Dropped)],
        verdicts,
        "every verdict is counted"
    );
    let queued: i64 = rig.maps().occupancy().iter().sum();
    assert_eq!(
        queued,
        64 + c.get(Counter::RefillTasks) as i64 - c.total_hits() as i64,
        "the rings hold what came in less what went out"
    );
}

#[test]
fn low_watermark_and_empty_ring_events_are_sent_and_rate_limited() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| {
        s.low_watermark = 2;
        s.event_interval_ns = 10_000_000_000;
    });
    let mut events = rig.maps().take_events().expect("event reader");
    for t in 1..=3 {
        rig.maps().push(&entry(t, 1, 0)).unwrap();
    }
    assert!(rig.take(1, 0).is_some()); // 2 left: not below 2
    assert!(events.drain(8).is_empty());
    assert!(rig.take(1, 0).is_some()); // 1 left
    let got = events.drain(8);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].kind, got[0].prio, got[0].reserved), (EVENT_LOW_WATERMARK, 1, 1));
    assert!(rig.take(1, 0).is_some()); // 0 left, but within the interval
    assert!(rig.take(1, 0).is_none());
    assert!(events.drain(8).is_empty(), "rate limit exceeded");
    assert_eq!(rig.counters().get(Counter::Events), 1);

    // An empty ring asked for raises its own event (on another ring: own rate limit).
    assert!(rig.take(2, 0).is_none());
    let got = events.drain(8);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].kind, got[0].prio, got[0].reserved), (EVENT_EMPTY, 2, 0));
}

/// A frame from the switch's Bolt port to `dst_port` on this node carrying `payload`.
fn from_switch(rig: &Rig, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut leg = rig.switch_to_node();
    leg.dst.set_port(dst_port);
    udp_frame(&leg, Ipv4Fields::default(), payload)
}

#[test]
fn a_fresh_hint_of_better_work_at_tier_2_passes_get_task_on() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| s.hint_ttl_ns = 2_000_000_000);
    let mut events = rig.maps().take_events().expect("event reader");
    rig.maps().push(&entry(1, 3, 0)).unwrap();
    // Tier 2 announces work at level 1 (HINT to the agent's Bolt port): recorded, passed.
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    let n = encode_hint(&mut msg, 1).unwrap();
    let (verdict, _) = rig.run(&from_switch(&rig, PORT, &msg[..n]));
    assert_eq!(verdict, Verdict::Pass);
    assert_eq!(rig.maps().tier2_hint().best(), 1);
    // The rings hold only level 3: a GET_TASK searching from level 1 goes to tier 2
    // unchanged, the task stays, and the agent hears of it.
    let request = rig.get_task_frame(1, 0, 5);
    let (verdict, out) = rig.run(&request);
    assert_eq!((verdict, out), (Verdict::Pass, request));
    assert_eq!(rig.maps().reserved(3), 1);
    let got = events.drain(8);
    assert_eq!(got.iter().map(|e| (e.kind, e.prio)).collect::<Vec<_>>(), vec![(EVENT_BYPASS, 3)]);
    // A bypassed request loses WAIT (tier 2 must not hold it while this host has work),
    // and its UDP checksum still verifies.
    let mut get = [0u8; 16];
    let n = encode_get_task(&mut get, 1, 0, Requester::new(NODE, 7, 6), true).unwrap();
    let end = |mac: [u8; 6], a: SocketAddrV4| Endpoint { mac, ip: a.ip().octets(), port: a.port() };
    let mut frame = [0u8; 64];
    let (src, dst) = (end(rig.exec.src_mac, rig.exec.src), end(rig.exec.dst_mac, rig.exec.dst));
    let len = scheduler_common::frame::build_udp(&mut frame, src, dst, 1, &get[..n]).unwrap();
    let (verdict, out) = rig.run(&frame[..len]);
    assert_eq!(verdict, Verdict::Pass);
    let passed = scheduler_common::frame::parse_udp(&out).expect("checksums verify");
    assert_ne!(passed.udp.checksum(), 0);
    let expected = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0, from: Requester::new(NODE, 7, 6), wait: false };
    assert_eq!(scheduler_common::decode(passed.payload), Ok(expected));
    // A request that does not search level 1 is served from the rings.
    assert_eq!(rig.take(2, 0).map(|e| tid(&e)), Some(1));
    // Tier 2's NOOP to an executor's own port says level 3 is its best now: a local
    // level-2 task no longer loses to it.
    rig.maps().push(&entry(2, 2, 0)).unwrap();
    let n = encode_noop(&mut msg, Requester::new(NODE, 1, 1), 3).unwrap();
    let (verdict, _) = rig.run(&from_switch(&rig, 40_001, &msg[..n]));
    assert_eq!(verdict, Verdict::Pass);
    assert_eq!(rig.maps().tier2_hint().best(), 3);
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(2));
    let c = rig.counters();
    assert_eq!((c.get(Counter::Bypass), c.get(Counter::Tier2Stamps), c.hits(3), c.hits(2)), (2, 2, 1, 1));
}

#[test]
fn a_stale_or_foreign_hint_changes_nothing() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| s.hint_ttl_ns = 1);
    rig.maps().push(&entry(1, 4, 0)).unwrap();
    rig.maps().push(&entry(2, 4, 0)).unwrap();
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    let n = encode_assign(&mut msg, &entry(9, 1, 0), 1).unwrap();
    // An ASSIGN on its way to an executor, stamped BEST 1: read, passed on untouched.
    let assign = from_switch(&rig, 40_002, &msg[..n]);
    let (verdict, out) = rig.run(&assign);
    assert_eq!((verdict, out), (Verdict::Pass, assign));
    assert_eq!(rig.maps().tier2_hint().best(), 1);
    // With a 1 ns time to live the hint is stale at once: served locally.
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(1));
    // A HINT from anyone but the switch is not recorded.
    let mut stranger = rig.switch_to_node();
    stranger.src = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 99), PORT);
    let n = encode_hint(&mut msg, 2).unwrap();
    let (verdict, _) = rig.run(&udp_frame(&stranger, Ipv4Fields::default(), &msg[..n]));
    assert_eq!(verdict, Verdict::Pass);
    assert_eq!(rig.maps().tier2_hint().best(), 1);
    // A GET_TASK with WAIT is served from the rings like any other.
    let mut get = [0u8; 16];
    let n = encode_get_task(&mut get, 1, 0, Requester::new(NODE, 7, 3), true).unwrap();
    let (verdict, out) = rig.run(&udp_frame(&rig.exec, Ipv4Fields::default(), &get[..n]));
    assert_eq!(verdict, Verdict::Tx);
    assert_eq!(tid(&assigned_entry(&out)), 2);
    assert_eq!(rig.counters().get(Counter::Bypass), 0);
}

#[test]
fn tier_2_assigns_to_this_hosts_executors_are_counted_per_task_priority() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(|_| {});
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    // Two priority-2 tasks and one priority-4 task reach executors from the switch.
    for (tid, prio, port) in [(1, 2, 40_001), (2, 2, 40_002), (3, 4, 40_001)] {
        let n = encode_assign(&mut msg, &entry(tid, prio, 0), 0).unwrap();
        let frame = from_switch(&rig, port, &msg[..n]);
        let (verdict, out) = rig.run(&frame);
        assert_eq!((verdict, out), (Verdict::Pass, frame), "passed on untouched");
    }
    // A NOOP, and an ASSIGN from anyone but the switch, count nothing.
    let n = encode_noop(&mut msg, Requester::new(NODE, 1, 1), 0).unwrap();
    rig.run(&from_switch(&rig, 40_001, &msg[..n]));
    let mut stranger = rig.switch_to_node();
    stranger.src = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 99), PORT);
    stranger.dst.set_port(40_003);
    let n = encode_assign(&mut msg, &entry(4, 1, 0), 0).unwrap();
    rig.run(&udp_frame(&stranger, Ipv4Fields::default(), &msg[..n]));
    // A bundle from the switch counts each of its tasks.
    let bundle = [entry(5, 1, 0), entry(6, 2, 0), entry(7, 4, 0)];
    let n = encode_assign_list(&mut msg, &bundle, 0).unwrap();
    let frame = from_switch(&rig, 40_002, &msg[..n]);
    assert_eq!(rig.run(&frame), (Verdict::Pass, frame.clone()), "passed on untouched");
    let c = rig.counters().0;
    let per_prio: Vec<u64> = (1..=4).map(|p| c.tier2_assigns(p)).collect();
    assert_eq!(per_prio, vec![1, 3, 0, 2]);
    assert_eq!(c.get(Counter::Tier2Stamps), 5, "four ASSIGNs and the NOOP");
}

/// Removes a pin directory (and the program's pins in it) however the test ends.
struct PinGuard(PinDir);

impl Drop for PinGuard {
    fn drop(&mut self) {
        if let Err(e) = BoltXdp::unload_pinned(&self.0) {
            eprintln!("cleaning up {}: {e:#}", self.0.path().display());
        }
        let _ = std::fs::remove_dir(self.0.path().parent().unwrap());
    }
}

fn test_pin_dir(name: &str) -> PinGuard {
    let root = std::path::Path::new("/sys/fs/bpf").join(unique_name("bolt-t"));
    PinGuard(PinDir::under(&root, name).unwrap())
}

#[test]
fn pinned_maps_keep_tasks_across_reloads() {
    if !can_run()
        || !require(is_bpffs(std::path::Path::new("/sys/fs/bpf")), "bpffs mounted at /sys/fs/bpf (cargo xtask setup)")
    {
        return;
    }
    let guard = test_pin_dir("node");
    let (_, switch) = sample_endpoints(PORT);
    let settings = XdpSettings {
        port: PORT,
        node: NODE,
        switch_addr: Some(switch),
        uplink_ifindex: TEST_RUN_UPLINK,
        ..Default::default()
    };
    {
        let mut first = BoltXdp::load_pinned(&settings, &guard.0).unwrap();
        first.maps_mut().push(&entry(1, 1, 0)).unwrap();
        first.maps_mut().push(&entry(2, 3, 0)).unwrap();
    }
    // Another process (the agent after a restart) opens the pins directly.
    let mut opened = XdpMaps::open_pinned(&guard.0).unwrap();
    assert_eq!(opened.occupancy()[..3], [1, 0, 1]);
    assert_eq!(opened.config().unwrap(), settings.config());
    // A new program version loaded over the same pins serves the same tasks.
    let second = BoltXdp::load_pinned(&settings, &guard.0).unwrap();
    let request = get_task_frame(&sample_endpoints(PORT).0, 1, 0, NODE, 1);
    let r = second.run_frame(&request, 1).unwrap();
    assert_eq!(r.verdict, Verdict::Tx);
    assert_eq!(tid(&assigned_entry(&r.frame)), 1);
    assert_eq!(opened.pop(3).unwrap().map(|e| tid(&e)), Some(2));
    assert_eq!(opened.drain(16).unwrap(), vec![]);
}

/// A veth pair that is deleted however the test ends.
struct Veth(String);

impl Veth {
    fn create() -> Option<Veth> {
        let name = unique_name("bv");
        let peer = format!("{name}p");
        let ok = std::process::Command::new("ip")
            .args(["link", "add", &name, "type", "veth", "peer", "name", &peer])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        ok.then_some(Veth(name))
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

#[test]
fn attach_pins_program_and_link_and_unload_removes_them() {
    if !can_run()
        || !require(is_bpffs(std::path::Path::new("/sys/fs/bpf")), "bpffs mounted at /sys/fs/bpf (cargo xtask setup)")
    {
        return;
    }
    let Some(veth) = Veth::create() else {
        assert!(!bolt_tests::in_ci(), "CI=true but `ip link add type veth` failed");
        eprintln!("skipped: cannot create a veth pair");
        return;
    };
    let guard = test_pin_dir(&veth.0);
    {
        let mut xdp = BoltXdp::load_pinned(&XdpSettings::default(), &guard.0).unwrap();
        xdp.attach(&veth.0, AttachMode::Skb).unwrap();
    }
    // Dropping the loader leaves the program attached through its pinned link.
    assert!(guard.0.is_attached());
    assert!(guard.0.program().exists());
    let shown = std::process::Command::new("ip").args(["-d", "link", "show", &veth.0]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("xdpgeneric") || shown.contains("prog/xdp"), "not attached: {shown}");
    BoltXdp::unload_pinned(&guard.0).unwrap();
    assert!(!guard.0.path().exists());
    let shown = std::process::Command::new("ip").args(["-d", "link", "show", &veth.0]).output().unwrap();
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("prog/xdp"), "still attached after unload");
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The entries of a bounced RETURN frame.
fn returned_entries(frame: &[u8]) -> Vec<Entry> {
    match scheduler_common::decode(&frame[PAYLOAD_OFF..]).expect("the bounce decodes") {
        scheduler_common::Message::Return(entries) => entries.to_vec(),
        m => panic!("bounce is {:?}, not RETURN", m.op()),
    }
}

/// REFILL ingest (several CPUs), GET_TASK (several CPUs, executors offering different
/// resources, so that tasks are put back), and an agent emptying the overflow queue, all
/// at once, with rings small enough to overflow and an overflow queue small enough to
/// bounce: every task ends up exactly once in an ASSIGN, the overflow queue, a bounced
/// RETURN, a rescue record, or its ring.
#[test]
fn concurrent_pops_and_pushes_never_duplicate_or_lose_a_task() {
    if !can_run() {
        return;
    }
    const PRODUCERS: u32 = 2;
    const FRAMES_EACH: u32 = 400;
    const TASKS: u32 = PRODUCERS * FRAMES_EACH * MAX_LIST as u32;
    let mut rig = Rig::new(|s| {
        s.ring_capacity = 128;
        s.overflow_capacity = 64;
    });
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let consumers = cpus.max(3);
    let producing = std::sync::atomic::AtomicU32::new(PRODUCERS);
    let taken = Mutex::new(Vec::<u32>::new());
    let bounced = Mutex::new(Vec::<u32>::new());
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut events = rig.maps().take_events().expect("event reader");
    let switch_leg = rig.switch_to_node();
    let (program, xdp_maps) = rig.xdp.parts().unwrap();
    let exec = rig.exec;
    // Tasks need one of four resource sets; executors offer 0b01, 0b10 or 0b11.
    let rsrc_of = |t: u32| (t % 4) as u8;
    let mut overflowed = Vec::new();
    std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let (producing, bounced) = (&producing, &bounced);
            s.spawn(move || {
                pin_to_cpu(p as usize % cpus);
                let mut buf = [0u8; MAX_MESSAGE_LEN];
                for f in 0..FRAMES_EACH {
                    let first = 1 + (p * FRAMES_EACH + f) * MAX_LIST as u32;
                    let batch: Vec<Entry> =
                        (first..first + MAX_LIST as u32).map(|t| entry(t, (t % 3 + 1) as u8, rsrc_of(t))).collect();
                    let n = encode_refill(&mut buf, &batch, 0).unwrap();
                    let frame = udp_frame(&switch_leg, Ipv4Fields::default(), &buf[..n]);
                    let r = run_frame(program, &frame, 1).unwrap();
                    match r.verdict {
                        Verdict::Drop => {}
                        Verdict::Tx => bounced.lock().unwrap().extend(returned_entries(&r.frame).iter().map(tid)),
                        v => panic!("REFILL verdict {v:?}"),
                    }
                    if Instant::now() > deadline {
                        break;
                    }
                    // Bursts beyond what the rings hold, then a pause for the consumers, so
                    // that every outcome happens.
                    if f % 16 == 15 {
                        std::thread::sleep(Duration::from_millis(3));
                    }
                }
                producing.fetch_sub(1, Ordering::AcqRel);
            });
        }
        for i in 0..consumers {
            let (taken, producing) = (&taken, &producing);
            s.spawn(move || {
                pin_to_cpu(i % cpus);
                let offer = [0b01, 0b10, 0b11][i % 3];
                let request = get_task_frame(&exec, 1, offer, NODE, i as u32);
                let mut mine = Vec::new();
                let mut misses_after = 0;
                while Instant::now() < deadline && misses_after < 200 {
                    let r = run_frame(program, &request, 1).unwrap();
                    match r.verdict {
                        Verdict::Tx => {
                            let e = assigned_entry(&r.frame);
                            assert_eq!(
                                e.task.rsrc & !offer,
                                0,
                                "task {} needs {:#b}, executor offers {offer:#b}",
                                tid(&e),
                                e.task.rsrc
                            );
                            mine.push(tid(&e));
                        }
                        Verdict::Pass if producing.load(Ordering::Acquire) == 0 => misses_after += 1,
                        Verdict::Pass => {}
                        v => panic!("GET_TASK verdict {v:?}"),
                    }
                }
                taken.lock().unwrap().extend(mine);
            });
        }
        // The agent's part: empty the overflow queue while all this runs.
        let producing = &producing;
        let overflowed = &mut overflowed;
        s.spawn(move || {
            while Instant::now() < deadline {
                let done = producing.load(Ordering::Acquire) == 0;
                while let Some(e) = xdp_maps.pop_overflow().unwrap() {
                    overflowed.push(tid(&e));
                }
                if done {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        });
    });
    events.drain(usize::MAX);
    let rescued: Vec<u32> = events.take_rescued().iter().map(tid).collect();
    let queued: Vec<u32> = (1..=4u8)
        .flat_map(|p| std::iter::from_fn(|| rig.maps().pop(p).unwrap()).collect::<Vec<_>>())
        .map(|e| tid(&e))
        .collect();
    let c = rig.counters();
    let (taken, bounced) = (taken.into_inner().unwrap(), bounced.into_inner().unwrap());
    println!(
        "{TASKS} tasks: {} assigned, {} overflowed, {} bounced, {} rescued, {} left queued; {} put back",
        taken.len(),
        overflowed.len(),
        bounced.len(),
        rescued.len(),
        queued.len(),
        c.get(Counter::Requeued)
    );
    let mut all: Vec<u32> = [taken.clone(), overflowed, bounced, rescued, queued].concat();
    all.sort_unstable();
    let unique: HashSet<u32> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a task was in two places");
    assert_eq!(all, (1..=TASKS).collect::<Vec<_>>(), "tasks lost (or the test ran out of time)");
    assert_eq!(c.get(Counter::RefillFrames), (PRODUCERS * FRAMES_EACH) as u64);
    assert_eq!(c.total_hits(), taken.len() as u64);
    assert!(c.get(Counter::Requeued) > 0, "no task was put back: the test did not cover it");
    assert_eq!(rig.maps().occupancy().iter().sum::<i64>(), 0, "reservations left after every ring emptied");
}

/// Root and a bpf filesystem: for tests that pin.
fn can_pin() -> bool {
    can_run()
        && require(is_bpffs(std::path::Path::new("/sys/fs/bpf")), "bpffs mounted at /sys/fs/bpf (cargo xtask setup)")
}

/// A pinned program (its pins removed at the end, under a unique root), its maps opened
/// from the pins as another process would, and tasks `tids` queued in ring 1.
fn pinned_rig(settings: &XdpSettings, tids: std::ops::RangeInclusive<u32>) -> (BoltXdp, PinGuard, XdpMaps) {
    let guard = test_pin_dir("n1");
    let xdp = BoltXdp::load_pinned(settings, &guard.0).expect("load the XDP program");
    let mut maps = XdpMaps::open_pinned(&guard.0).unwrap();
    for t in tids {
        maps.push(&entry(t, 1, 0)).unwrap();
    }
    (xdp, guard, maps)
}

/// Adds `delta` to the reservation count of ring 1, as a process killed between its count
/// change and its push or pop leaves it.
fn skew_reservation(pins: &PinDir, delta: i64) {
    use aya::maps::{Array, MapData};
    use scheduler_common::maps::{RingStates, RING_STATE_MAP};
    let data = MapData::from_pin(pins.map(RING_STATE_MAP)).unwrap();
    let mut states: Array<MapData, RingStates> = Array::try_from(aya::maps::Map::Array(data)).unwrap();
    let mut v = states.get(&0, 0).unwrap();
    v.rings[0].reserved += delta;
    states.set(0, v, 0).unwrap();
}

#[test]
fn reopening_pinned_rings_recounts_what_a_killed_process_left_wrong() {
    if !can_pin() {
        return;
    }
    let settings = XdpSettings { port: PORT, node: NODE, uplink_ifindex: TEST_RUN_UPLINK, ..Default::default() };
    let (xdp, guard, mut maps) = pinned_rig(&settings, 1..=3);
    maps.push(&entry(4, 2, 0)).unwrap();
    // Two processes killed after reserving and before pushing.
    skew_reservation(&guard.0, 2);
    assert_eq!(maps.occupancy()[..2], [5, 1]);
    // The program keeps serving while the counts are fixed.
    let request = get_task_frame(&sample_endpoints(PORT).0, 2, 0, NODE, 1);
    let mut reopened = XdpMaps::open_pinned(&guard.0).unwrap();
    let corrections = reopened.recount_reservations(settings.levels).unwrap();
    assert_eq!(corrections[..2], [-2, 0]);
    assert_eq!(reopened.occupancy()[..2], [3, 1]);
    let r = xdp.run_frame(&request, 1).unwrap();
    assert_eq!((r.verdict, tid(&assigned_entry(&r.frame))), (Verdict::Tx, 4));
    // Order kept, and the counts agree with the rings again.
    let order: Vec<u32> = std::iter::from_fn(|| reopened.pop(1).unwrap()).map(|e| tid(&e)).collect();
    assert_eq!(order, [1, 2, 3]);
    assert_eq!(reopened.occupancy().iter().sum::<i64>(), 0);
    // A count too low (never left by a kill, but the same repair) is raised.
    reopened.push(&entry(5, 1, 0)).unwrap();
    skew_reservation(&guard.0, -1);
    assert_eq!(reopened.recount_reservations(settings.levels).unwrap()[0], 1);
    assert_eq!(reopened.occupancy()[0], 1);
}

/// The recount runs while REFILL frames arrive and executors take tasks: afterwards the
/// counts match the rings exactly and every task is found once.
#[test]
fn recounting_while_the_program_serves_keeps_every_task_and_an_exact_count() {
    if !can_pin() {
        return;
    }
    let (exec, switch) = sample_endpoints(PORT);
    let settings = XdpSettings {
        port: PORT,
        node: NODE,
        uplink_ifindex: TEST_RUN_UPLINK,
        switch_addr: Some(switch),
        ..Default::default()
    };
    let (mut xdp, guard, mut maps) = pinned_rig(&settings, 1..=50);
    skew_reservation(&guard.0, 3);
    let (program, _) = xdp.parts().unwrap();
    let (mut taken, mut bounced) = (Vec::new(), Vec::new());
    let mut corrections = [0; scheduler_common::maps::RING_COUNT];
    let (started, recounted) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut frames = 0u32;
    std::thread::scope(|s| {
        let serving = s.spawn(|| {
            let request = get_task_frame(&exec, 1, 0b11, NODE, 1);
            for f in 0..20_000u32 {
                started.store(true, Ordering::Release);
                if recounted.load(Ordering::Acquire) {
                    break;
                }
                frames = f + 1;
                let batch: Vec<Entry> = (0..4).map(|i| entry(1000 + 4 * f + i, 1, 0)).collect();
                let r = run_frame(program, &refill_frame(switch, &batch), 1).unwrap();
                if r.verdict == Verdict::Tx {
                    bounced.extend(returned_entries(&r.frame).iter().map(tid));
                }
                let r = run_frame(program, &request, 1).unwrap();
                if r.verdict == Verdict::Tx {
                    taken.push(tid(&assigned_entry(&r.frame)));
                }
            }
        });
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        corrections = maps.recount_reservations(settings.levels).unwrap();
        recounted.store(true, Ordering::Release);
        serving.join().unwrap();
    });
    let c = maps.counters().unwrap();
    println!(
        "{frames} REFILL frames during the recount, {} tasks to overflow while producers paused",
        c.get(Counter::Overflow)
    );
    assert!(c.get(Counter::Overflow) > 0, "no REFILL arrived while the ring was paused");
    assert_eq!(corrections[0], -3, "the skew, and only the skew, was corrected");
    let mut found: Vec<u32> = std::iter::from_fn(|| maps.pop_overflow().unwrap()).map(|e| tid(&e)).collect();
    found.extend(std::iter::from_fn(|| maps.pop(1).unwrap()).map(|e| tid(&e)));
    assert_eq!(maps.peek_ring(1).unwrap(), None, "the count fell below the ring's contents");
    assert_eq!(maps.occupancy()[0], 0, "the count exceeds the ring's contents");
    found.extend(taken);
    found.extend(bounced);
    found.sort_unstable();
    let expected: Vec<u32> = (1..=50).chain(1000..1000 + 4 * frames).collect();
    assert_eq!(found, expected);
}

#[test]
fn the_agent_reopening_pinned_rings_sees_the_tasks_they_hold() {
    if !can_pin() {
        return;
    }
    let settings = XdpSettings {
        port: PORT,
        node: NODE,
        uplink_ifindex: TEST_RUN_UPLINK,
        switch_addr: Some(Ipv4Addr::LOCALHOST),
        ..Default::default()
    };
    let (name, pins) = agent_pins(&settings);
    XdpMaps::open_pinned(&pins.0).unwrap().push(&entry(1, 1, 0)).unwrap();
    skew_reservation(&pins.0, 3);
    let switch = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(to) = switch.local_addr().unwrap() else { unreachable!() };
    let mut agent =
        scheduler_user::agent::Agent::for_pinned(&name, Some(to), Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
            .unwrap();
    assert_eq!(agent.stats().queued[0], 1, "the agent counts the one task ring 1 holds");
}

#[test]
fn a_map_dump_reads_a_ring_without_changing_it() {
    if !can_pin() {
        return;
    }
    let settings = XdpSettings { port: PORT, node: NODE, uplink_ifindex: TEST_RUN_UPLINK, ..Default::default() };
    let (_xdp, guard, mut maps) = pinned_rig(&settings, 1..=3);
    for _ in 0..2 {
        let d = scheduler_user::inspect::maps::dump("n1", &guard.0, "BOLT_RING_1").unwrap();
        let scheduler_user::inspect::maps::MapDump::Ring { reserved, tasks, .. } = d else { panic!("not a ring") };
        assert_eq!(reserved, 3);
        assert_eq!(tasks.iter().map(|t| t.tid).collect::<Vec<_>>(), [1], "the head, in place");
    }
    let order: Vec<u32> = std::iter::from_fn(|| maps.pop(1).unwrap()).map(|e| tid(&e)).collect();
    assert_eq!(order, [1, 2, 3], "the dump changed the ring's order");
}

#[test]
fn a_bounce_returns_exactly_the_tasks_not_stored_from_a_padded_frame() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(|s| {
        s.ring_capacity = 2;
        s.overflow_capacity = 3;
    });
    for k in [0usize, 5] {
        // The first k slots are taken, so the next REFILL stores 5 - k in ring and overflow.
        let batch: Vec<Entry> = (1..=9).map(|t| entry(t + 100 * k as u32, 1, 0)).collect();
        let mut frame = rig.refill_frame(&batch);
        frame.extend_from_slice(&[0xEE; 24]); // link-layer padding past the datagram
        let (verdict, out) = rig.run(&frame);
        assert_eq!(verdict, Verdict::Tx);
        // Stored last to first: the RETURN is the head of the list.
        let stored = if k == 0 { 5 } else { 0 };
        let mut ret = [0u8; MAX_MESSAGE_LEN];
        let n = encode_return(&mut ret, &batch[..batch.len() - stored]).unwrap();
        let expected = udp_frame(&rig.switch_to_node().reversed(), Ipv4Fields::default(), &ret[..n]);
        assert_eq!(out, expected, "the RETURN holds exactly the tasks not stored, trimmed");
    }
    let c = rig.counters();
    assert_eq!((c.get(Counter::RefillTasks), c.get(Counter::Overflow), c.get(Counter::Bounced)), (2, 3, 4 + 9));
    assert_eq!(c.get(Counter::AdjustFailed), 0);
}

/// Fills ring 1's map behind the reservations' back, so that a task popped and put back
/// can find its slot taken: the ring push fails, the overflow queue is full too, and the
/// task must reach the agent through the event ring.
#[test]
fn a_task_no_queue_takes_back_reaches_the_agent() {
    if !can_pin() {
        return;
    }
    use aya::maps::{Map, MapData, Queue};
    let settings = XdpSettings {
        port: PORT,
        node: NODE,
        uplink_ifindex: TEST_RUN_UPLINK,
        ring_capacity: 4,
        overflow_capacity: 1,
        ..Default::default()
    };
    #[allow(clippy::reversed_empty_ranges)]
    let (xdp, guard, mut maps) = pinned_rig(&settings, 1..=0);
    let mut events = maps.take_events().unwrap();
    let raw = |name: &str| -> Queue<MapData, Entry> {
        Queue::try_from(Map::Queue(MapData::from_pin(guard.0.map(name)).unwrap())).unwrap()
    };
    let (mut ring, mut overflow) = (raw("BOLT_RING_1"), raw("BOLT_OVERFLOW"));
    overflow.push(entry(1000, 1, 0b10), 0).unwrap();
    maps.push(&entry(1, 1, 0b10)).unwrap();
    let stop = AtomicBool::new(false);
    let mut raw_pushed = 0u32;
    let deadline = Instant::now() + Duration::from_secs(30);
    let request = get_task_frame(&sample_endpoints(PORT).0, 1, 0b01, NODE, 1);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Executors that cannot run the task: each GET_TASK pops it and puts it back.
            while Instant::now() < deadline && maps.reserved(1) > 0 {
                let r = xdp.run_frame(&request, 1).unwrap();
                assert_eq!(r.verdict, Verdict::Pass);
            }
            stop.store(true, Ordering::Release);
        });
        // Another writer that takes any slot that frees (without reserving it).
        let mut next = 2;
        while !stop.load(Ordering::Acquire) {
            if ring.push(entry(next, 1, 0b10), 0).is_ok() {
                raw_pushed += 1;
                next += 1;
            }
        }
    });
    let c = xdp.maps().counters().unwrap();
    assert!(c.get(Counter::RingErrors) > 0, "no put-back failed in 30 s: the race was never hit");
    events.drain(usize::MAX);
    let rescued = events.take_rescued();
    assert_eq!(rescued.len() as u64, c.get(Counter::Rescued));
    let mut seen: Vec<u32> = rescued.iter().map(tid).collect();
    seen.extend(std::iter::from_fn(|| ring.pop(0).ok()).map(|e| tid(&e)));
    seen.extend(std::iter::from_fn(|| overflow.pop(0).ok()).map(|e| tid(&e)));
    seen.sort_unstable();
    let mut expected: Vec<u32> = (1..=1 + raw_pushed).collect();
    expected.push(1000);
    assert_eq!(seen, expected, "a task vanished (or was duplicated)");
}

/// An agent (on rings pinned under the agents' root, as `--unload` opens them) run for
/// `for_ms`, then stopped as `mode` says.
fn run_agent_on_pins(
    name: &str,
    switch: SocketAddrV4,
    listen: SocketAddrV4,
    for_ms: u64,
    mode: StopMode,
) -> anyhow::Result<scheduler_user::agent::AgentStats> {
    use scheduler_user::agent::Agent;
    let mut agent = Agent::for_pinned(name, Some(switch), Some(listen))?;
    let until = Instant::now() + Duration::from_millis(for_ms);
    let stop = || (Instant::now() >= until).then_some(mode);
    let mode = agent.run(&stop, Duration::from_millis(20), &mut |_| {})?;
    agent.finish(mode)
}

/// Pins a program under the agents' root with the given settings.
fn agent_pins(settings: &XdpSettings) -> (String, PinGuard) {
    let name = unique_name("bt");
    let pins = PinGuard(PinDir::under(std::path::Path::new(scheduler_common::maps::PIN_ROOT), &name).unwrap());
    BoltXdp::load_pinned(settings, &pins.0).unwrap();
    (name, pins)
}

/// A free loopback port for the agent's socket.
fn free_loopback_port() -> SocketAddrV4 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(a) = s.local_addr().unwrap() else { unreachable!() };
    a
}

#[test]
fn a_map_error_in_the_agent_costs_only_its_task_which_goes_back_to_tier_two() {
    if !can_pin() {
        return;
    }
    use aya::maps::{Array, Map, MapData};
    use scheduler_common::maps::{XdpConfig, CONFIG_MAP};
    let settings =
        XdpSettings { port: PORT, node: NODE, uplink_ifindex: TEST_RUN_UPLINK, ring_capacity: 1, ..Default::default() };
    let (name, pins) = agent_pins(&settings);
    // The configuration claims more room than the maps have: the second push into ring 1
    // fails in the kernel (E2BIG), a map error rather than a full ring.
    let mut config: Array<MapData, XdpConfig> =
        Array::try_from(Map::Array(MapData::from_pin(pins.0.map(CONFIG_MAP)).unwrap())).unwrap();
    let mut c = config.get(&0, 0).unwrap();
    c.ring_capacity = 8;
    config.set(0, c, 0).unwrap();
    let switch = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    switch.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let std::net::SocketAddr::V4(switch_addr) = switch.local_addr().unwrap() else { unreachable!() };
    let listen = free_loopback_port();
    let batch: Vec<Entry> = (1..=3).map(|t| entry(t, 1, 0)).collect();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode_refill(&mut buf, &batch, 0).unwrap();
    let sender = std::thread::spawn({
        let switch = switch.try_clone().unwrap();
        move || {
            std::thread::sleep(Duration::from_millis(100));
            switch.send_to(&buf[..n], listen).unwrap();
        }
    });
    let stats =
        run_agent_on_pins(&name, switch_addr, listen, 400, StopMode::KeepAttached).expect("the agent keeps running");
    sender.join().unwrap();
    assert_eq!((stats.ring_errors, stats.queued[0], stats.returned_tasks), (2, 1, 2), "{stats:?}");
    // Stored last to first: task 3 is queued, 2 and 1 came back in a RETURN, in the order
    // the agent met them (REFILL_REQs may come first).
    let mut got = [0u8; 2048];
    let returned = loop {
        let (n, _) = switch.recv_from(&mut got).expect("a RETURN");
        if let Ok(scheduler_common::Message::Return(entries)) = scheduler_common::decode(&got[..n]) {
            break entries.iter().map(tid).collect::<Vec<_>>();
        }
    };
    assert_eq!(returned, [2, 1]);
}

#[test]
fn overflow_tasks_stay_in_the_pinned_queue_until_their_return_is_sent() {
    if !can_pin() {
        return;
    }
    use aya::maps::{Map, MapData, Queue};
    let settings = XdpSettings { port: PORT, node: NODE, uplink_ifindex: TEST_RUN_UPLINK, ..Default::default() };
    let (name, pins) = agent_pins(&settings);
    let mut raw: Queue<MapData, Entry> =
        Queue::try_from(Map::Queue(MapData::from_pin(pins.0.map("BOLT_OVERFLOW")).unwrap())).unwrap();
    raw.push(entry(7, 1, 0), 0).unwrap();
    // Opened before the agents run: it reads the queue even if its pins are removed.
    let maps = XdpMaps::open_pinned(&pins.0).unwrap();
    let head = || maps.peek_overflow().unwrap().map(|e| tid(&e));
    // A switch address the socket refuses to send to (broadcast without SO_BROADCAST):
    // every RETURN fails, as it would for an agent killed before sending.
    let refused = SocketAddrV4::new(Ipv4Addr::BROADCAST, PORT);
    let stats = run_agent_on_pins(&name, refused, free_loopback_port(), 200, StopMode::KeepAttached).expect("runs");
    assert!(stats.return_errors > 0, "{stats:?}");
    assert_eq!(head(), Some(7), "the unsent task left the pinned overflow queue");
    // A drain that cannot send keeps the pins, which still hold the task.
    let stats = run_agent_on_pins(&name, refused, free_loopback_port(), 50, StopMode::Drain).expect("drains");
    assert!(stats.return_errors > 0, "{stats:?}");
    assert!(pins.0.path().exists(), "the drain removed the pins of a task it could not return");
    assert_eq!(head(), Some(7), "the unsent task left the pinned overflow queue");
}

/// A task in the dedicated ring with the MOVABLE mark where a shared entry has its stamp.
fn pinned(tid: u32, prio: u8, rsrc: u8) -> Entry {
    Entry { pad: scheduler_common::maps::DEDICATED_MOVABLE, ..entry(tid, prio, rsrc) }
}

#[test]
fn a_pinned_task_is_served_from_the_dedicated_ring_before_shared_ones() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    rig.maps().push(&entry(1, 1, 0)).unwrap();
    rig.maps().push(&entry(2, 1, 0)).unwrap();
    // Pinned at the lowest priority, after the shared ones: still served first.
    assert!(rig.maps().push_dedicated(&pinned(10, 4, 0)).unwrap());
    assert!(rig.maps().push_dedicated(&entry(11, 4, 0)).unwrap());
    let first = rig.take(1, 0).expect("an ASSIGN");
    // The ASSIGN carries the entry as pinned, the mark zeroed as every ring stamp.
    assert_eq!(first, pinned(10, 4, 0).unstamped());
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(11));
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(1));
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(2));
    assert_eq!(rig.take(1, 0), None);
    let c = rig.counters();
    assert_eq!((c.get(Counter::DedicatedHit), c.hits(1), c.get(Counter::Miss)), (2, 2, 1));
}

#[test]
fn a_pinned_task_the_executor_cannot_run_goes_to_the_dedicated_tail_not_lost() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|_| {});
    assert!(rig.maps().push_dedicated(&entry(10, 1, 0b10)).unwrap());
    assert!(rig.maps().push_dedicated(&entry(11, 1, 0)).unwrap());
    rig.maps().push(&entry(1, 2, 0)).unwrap();
    // One dedicated pop per request: the head does not fit, so the request goes on to the
    // shared rings, and the pinned head waits behind the other pinned task.
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(1));
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(11));
    assert_eq!(rig.take(1, 0), None, "the pinned task needs resource bit 1; passed on");
    assert_eq!(rig.take(1, 0b10).map(|e| tid(&e)), Some(10));
    assert_eq!(rig.maps().pop_dedicated().unwrap(), None);
    let c = rig.counters();
    assert_eq!((c.get(Counter::DedicatedHit), c.get(Counter::DedicatedRequeued)), (2, 2));
}

#[test]
fn a_pinned_task_is_served_even_while_tier_2_hints_better_work() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| s.hint_ttl_ns = 2_000_000_000);
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    let n = encode_hint(&mut msg, 1).unwrap();
    assert_eq!(rig.run(&from_switch(&rig, PORT, &msg[..n])).0, Verdict::Pass);
    rig.maps().push(&entry(1, 3, 0)).unwrap();
    assert!(rig.maps().push_dedicated(&entry(10, 3, 0)).unwrap());
    // The pinned task runs here or nowhere: no bypass for it.
    assert_eq!(rig.take(1, 0).map(|e| tid(&e)), Some(10));
    assert_eq!(rig.take(1, 0), None, "the shared level-3 task loses to tier 2's level 1");
    assert_eq!(rig.counters().get(Counter::Bypass), 1);
}

#[test]
fn pin_passes_to_the_agent_untouched() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(|_| {});
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    let n = scheduler_common::encode_pin(&mut msg, JobRef::new(1, 2), 0, &[entry(5, 1, 0).task]).unwrap();
    let frame = udp_frame(&rig.exec, Ipv4Fields::default(), &msg[..n]);
    assert_eq!(rig.run(&frame), (Verdict::Pass, frame.clone()));
    assert_eq!(rig.counters().get(Counter::OtherOp), 1);
    assert_eq!(rig.counters().get(Counter::DedicatedHit), 0);
}

fn waiting_get_task_frame(exec: &Endpoints, rsrc: u8, executor: u16, seq: u32) -> Vec<u8> {
    let mut buf = [0u8; 16];
    let n = encode_get_task(&mut buf, 1, rsrc, Requester::new(NODE, executor, seq), true).unwrap();
    udp_frame(exec, Ipv4Fields::default(), &buf[..n])
}

#[test]
fn an_executor_waits_at_its_host_and_a_one_task_refill_becomes_its_assign() {
    if !can_run() {
        return;
    }
    let mut rig = Rig::new(|s| {
        s.host_wait_ns = 10_000_000;
        s.hint_ttl_ns = 2_000_000_000;
    });
    let mut events = rig.maps().take_events().expect("event reader");
    // No word from tier 2 yet: the request goes there (tier 2 answers at once if it has
    // work, which waiting here would only delay).
    let (verdict, _) = rig.run(&waiting_get_task_frame(&rig.exec, 0b01, 7, 4));
    assert_eq!(verdict, Verdict::Pass);
    // Tier 2 says it holds nothing (an empty REFILL, as at the end of a park): rings
    // empty, the GET_TASK with WAIT waits here (dropped).
    let (verdict, _) = rig.run(&rig.refill_frame(&[]));
    assert_eq!(verdict, Verdict::Drop);
    let (verdict, _) = rig.run(&waiting_get_task_frame(&rig.exec, 0b01, 7, 5));
    assert_eq!(verdict, Verdict::Drop);
    let w = rig.maps().peek_waiter().unwrap().expect("queued");
    assert_eq!((w.executor, w.seq, w.rtrv_prio, w.rsrc, w.ifindex), (7, 5, 1, 0b01, LOOPBACK_IFINDEX));
    assert_eq!((w.exec_mac, w.host_mac), (rig.exec.src_mac, rig.exec.dst_mac));
    assert_eq!((w.exec_ip, w.switch_ip), (rig.exec.src.ip().octets(), rig.exec.dst.ip().octets()));
    assert_eq!((w.exec_port, w.switch_port), (rig.exec.src.port().to_be_bytes(), rig.exec.dst.port().to_be_bytes()));
    assert!(events.drain(8).iter().any(|e| e.kind == EVENT_WAITING), "the agent hears of it");

    // A one-task REFILL the executor can run leaves as its ASSIGN, byte for byte what
    // tier 2 would have sent it, redirected to the interface the request came from. It
    // is the first frame of the answer the agent awaits, but wakes nobody: the agent
    // stays armed, and the first frame stored wakes it.
    rig.maps().arm_refill_answer(true);
    let e = entry(1, 2, 0b01);
    let (verdict, out) = rig.run(&rig.refill_frame(&[e]));
    assert_eq!(verdict, Verdict::Redirect);
    assert!(rig.maps().refill_armed(), "a frame handed off leaves the agent armed");
    assert!(events.drain(8).iter().all(|e| e.kind != EVENT_REFILL_ANSWER), "and sends no event");
    let mut assign = [0u8; 48];
    encode_assign(&mut assign, &e, 0).unwrap();
    assert_eq!(out, udp_frame(&rig.exec.reversed(), Ipv4Fields::default(), &assign));
    assert_eq!(rig.maps().peek_waiter().unwrap(), None);
    assert_eq!(rig.maps().occupancy().iter().sum::<i64>(), 0, "the task never touched a ring");
    let c = rig.counters();
    assert_eq!(
        (c.get(Counter::ParkedHere), c.get(Counter::Handoffs), c.hits(2), c.get(Counter::RefillFrames)),
        (1, 1, 1, 2)
    );
    assert_eq!(c.get(Counter::Miss), 1);

    // An executor that asked again replaced its record: the older one is skipped, the
    // newer one answered, and the executor is answered once. (The REFILLs above stamped
    // BEST 0: tier 2 still holds nothing.)
    rig.run(&waiting_get_task_frame(&rig.exec, 0b01, 7, 6));
    rig.run(&waiting_get_task_frame(&rig.exec, 0b01, 7, 7));
    let (verdict, _) = rig.run(&rig.refill_frame(&[entry(2, 1, 0)]));
    assert_eq!(verdict, Verdict::Redirect);
    assert_eq!(rig.maps().peek_waiter().unwrap(), None);
    assert_eq!(rig.counters().get(Counter::StaleWaiters), 1);

    // A task the waiter cannot run is stored as any REFILL's, and the waiter keeps
    // waiting for one it can. That frame, the first stored, wakes the agent.
    rig.run(&waiting_get_task_frame(&rig.exec, 0b01, 8, 1));
    events.drain(8);
    let (verdict, _) = rig.run(&rig.refill_frame(&[entry(3, 1, 0b10)]));
    assert_eq!(verdict, Verdict::Drop);
    assert!(!rig.maps().refill_armed());
    assert_eq!(events.drain(8).iter().filter(|e| e.kind == EVENT_REFILL_ANSWER).count(), 1);
    assert_eq!(rig.maps().reserved(1), 1);
    assert_eq!(rig.maps().peek_waiter().unwrap().map(|w| (w.executor, w.seq)), Some((8, 1)));
    // A REFILL of several tasks is stored: the agent answers waiters from the rings.
    let (verdict, _) = rig.run(&rig.refill_frame(&[entry(4, 1, 0), entry(5, 1, 0)]));
    assert_eq!(verdict, Verdict::Drop);
    assert_eq!(rig.maps().reserved(1), 3);
    assert_eq!(rig.counters().get(Counter::Handoffs), 2);
}

#[test]
fn a_get_task_waits_at_tier_2_while_its_fresh_stamp_says_work_is_there() {
    if !can_run() {
        return;
    }
    let rig = Rig::new(|s| {
        s.host_wait_ns = 10_000_000;
        s.hint_ttl_ns = 2_000_000_000;
    });
    // Tier 2 stamped level 2 as its best: a request searching from level 1 goes there.
    let mut msg = [0u8; MAX_MESSAGE_LEN];
    let n = encode_hint(&mut msg, 2).unwrap();
    rig.run(&from_switch(&rig, PORT, &msg[..n]));
    let request = waiting_get_task_frame(&rig.exec, 0, 7, 1);
    let (verdict, out) = rig.run(&request);
    assert_eq!((verdict, out), (Verdict::Pass, request));
    // Tier 2 says it is empty: the request waits here. So it does when tier 2 holds only
    // levels above the request's search.
    let n = encode_hint(&mut msg, 0).unwrap();
    rig.run(&from_switch(&rig, PORT, &msg[..n]));
    let (verdict, _) = rig.run(&waiting_get_task_frame(&rig.exec, 0, 7, 2));
    assert_eq!(verdict, Verdict::Drop);
    let n = encode_hint(&mut msg, 1).unwrap();
    rig.run(&from_switch(&rig, PORT, &msg[..n]));
    let mut get = [0u8; 16];
    let n = encode_get_task(&mut get, 2, 0, Requester::new(NODE, 8, 1), true).unwrap();
    let (verdict, _) = rig.run(&udp_frame(&rig.exec, Ipv4Fields::default(), &get[..n]));
    assert_eq!(verdict, Verdict::Drop, "tier 2's level 1 is not searched from level 2");
    // Without WAIT, or with waiting at the host off, nothing waits here.
    let n = encode_hint(&mut msg, 0).unwrap();
    rig.run(&from_switch(&rig, PORT, &msg[..n]));
    let (verdict, _) = rig.run(&rig.get_task_frame(1, 0, 3));
    assert_eq!(verdict, Verdict::Pass);
    let c = rig.counters();
    assert_eq!((c.get(Counter::ParkedHere), c.get(Counter::Miss)), (2, 2));
    let mut off = Rig::new(|s| s.hint_ttl_ns = 2_000_000_000);
    off.run(&off.refill_frame(&[]));
    let (verdict, _) = off.run(&waiting_get_task_frame(&off.exec, 0, 7, 1));
    assert_eq!(verdict, Verdict::Pass);
    assert_eq!(off.maps().peek_waiter().unwrap(), None);
}

/// The lock-free ring `bolt bench xdp --rings` measures, popped and pushed by the
/// kernel on every CPU at once: afterwards it and its overflow queue hold exactly the
/// entries it started with, each once, and every run either popped or found nothing.
#[test]
fn the_lock_free_ring_under_every_cpu_at_once_loses_and_duplicates_nothing() {
    if !can_run() {
        return;
    }
    use scheduler_user::xdp::ring_bench::{check_lockfree_concurrent, ENTRIES};
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).max(2);
    let runs = 1_000_000;
    let check = check_lockfree_concurrent(threads, runs).expect("run the lock-free ring");
    assert_eq!(
        check.pops + check.empty_pops,
        threads as u64 * u64::from(runs),
        "every run popped once or found nothing"
    );
    assert!(check.pops > 0);
    assert_eq!(check.overflow_tids.len() as u64, check.failed_pushes);
    let mut tids = check.tids.expect("sequence numbers consistent");
    tids.extend(&check.overflow_tids);
    tids.sort_unstable();
    assert_eq!(tids, (0..ENTRIES as u32).collect::<Vec<_>>());
}

//! The software switch over real loopback sockets.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use scheduler_common::*;

use super::*;

fn client_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn recv(s: &UdpSocket, buf: &mut [u8]) -> usize {
    s.recv(buf).expect("the switch answers within 5 s")
}

fn start(capacity: u32) -> SwitchHandle {
    let cfg =
        SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), queue_capacity: capacity, ..SwitchConfig::default() };
    spawn(cfg).unwrap()
}

#[test]
fn submit_then_get_over_udp() {
    let sw = start(8);
    let client = client_socket();
    let exec = client_socket();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let mut t = Task { prio: 2, rsrc: 0, ..Task::default() };
    t.set_tid(42);
    t.desc = descriptor::Handler::Sleep { micros: 5 }.encode().unwrap();
    let n = encode_submit(&mut buf, JobRef::new(3, 4), 0, &[t]).unwrap();
    client.send_to(&buf[..n], sw.local_addr()).unwrap();

    // Retry until the SUBMIT has been processed (UDP gives no ordering across sockets).
    let mut got = None;
    for seq in 0..100 {
        let n = encode_get_task(&mut buf, 1, 0, Requester::new(7, 1, seq), false).unwrap();
        exec.send_to(&buf[..n], sw.local_addr()).unwrap();
        let n = recv(&exec, &mut buf);
        match decode(&buf[..n]).unwrap() {
            Message::Assign { entries: [e], .. } => {
                got = Some(*e);
                break;
            }
            Message::Noop { to: who, .. } => assert_eq!(who.seq(), seq),
            other => panic!("unexpected {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let e = got.expect("the task was assigned");
    let SocketAddr::V4(client_addr) = client.local_addr().unwrap() else { unreachable!() };
    assert_eq!((e.uid(), e.jid(), e.task), (3, 4, t));
    assert_eq!((e.client_ip, e.client_port()), (client_addr.ip().octets(), client_addr.port()));
    let stats = sw.shutdown().unwrap();
    assert_eq!(stats.queue.assigns, 1);
    assert_eq!(stats.queue_depth, vec![0; 4]);
}

/// Requests sent while the switch thread sleeps in its receive are counted as wake-ups,
/// with the wait from their arrival stamp to the thread running; requests that queue
/// while it is busy count as resumptions. Each is handled and its answer sent, and both
/// are timed.
#[test]
fn the_switch_thread_times_its_wake_ups_resumptions_handling_and_sending() {
    let sw = start(8);
    let exec = client_socket();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let mut seq = 0;
    let mut get_task = |exec: &UdpSocket, buf: &mut [u8; MAX_MESSAGE_LEN]| {
        let n = encode_get_task(buf, 1, 0, Requester::new(7, 1, seq), false).unwrap();
        seq += 1;
        exec.send_to(&buf[..n], sw.local_addr()).unwrap();
    };
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(10));
        get_task(&exec, &mut buf);
        let n = recv(&exec, &mut buf);
        assert!(matches!(decode(&buf[..n]).unwrap(), Message::Noop { .. }));
    }
    // Bursts: the thread is still handling the first requests of one when the rest
    // arrive. A burst or two is normally enough; the bound keeps a slow machine finite.
    let mut bursts = 0u64;
    while sw.stats().thread.resumes == 0 && bursts < 20 {
        for _ in 0..100 {
            get_task(&exec, &mut buf);
        }
        for _ in 0..100 {
            let n = recv(&exec, &mut buf);
            assert!(matches!(decode(&buf[..n]).unwrap(), Message::Noop { .. }));
        }
        bursts += 1;
        // The counters are published at most every 100 ms while the thread is busy.
        std::thread::sleep(Duration::from_millis(120));
    }
    let t = sw.shutdown().unwrap().thread;
    assert!(t.wakeups >= 3 && t.resumes > 0, "{t:?}");
    let requests = 3 + 100 * bursts;
    assert_eq!((t.handled, t.sent), (requests, requests), "{t:?}");
    for q in [&t.wakeup_ns, &t.resume_ns, &t.handle_ns, &t.send_ns] {
        assert_eq!(q.len(), crate::metrics::QUANTILE_POINTS.len());
        assert!(q[0].1 > 0, "{t:?}");
    }
    assert!(t.p50_wakeup_ns <= t.p99_wakeup_ns && t.p50_send_ns <= t.p99_send_ns, "{t:?}");
}

#[test]
fn queue_full_goes_back_to_the_submitter() {
    let sw = start(2);
    let client = client_socket();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let tasks: Vec<Task> = (0..5)
        .map(|i| {
            let mut t = Task { prio: 1, ..Task::default() };
            t.set_tid(i);
            t
        })
        .collect();
    let n = encode_submit(&mut buf, JobRef::new(1, 9), 0, &tasks).unwrap();
    client.send_to(&buf[..n], sw.local_addr()).unwrap();
    // One QUEUE_FULL per refused task, in submission order.
    for refused in &tasks[2..] {
        let n = recv(&client, &mut buf);
        match decode(&buf[..n]).unwrap() {
            Message::QueueFull { job, tasks: back } => {
                assert_eq!((job.uid(), job.jid()), (1, 9));
                assert_eq!(back, std::slice::from_ref(refused));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn bad_input_is_counted_not_fatal() {
    let sw = start(8);
    let s = client_socket();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    s.send_to(&[0xB0], sw.local_addr()).unwrap(); // truncated
    s.send_to(&[0u8; 16], sw.local_addr()).unwrap(); // bad magic
    let mut swap = [0u8; 8 + SwapState::LEN];
    swap[..8].copy_from_slice(as_bytes(&Header::new(Op::Swap, 0, 1, 0, 0)));
    s.send_to(&swap, sw.local_addr()).unwrap(); // internal op from outside
    let n = encode_noop(&mut buf, Requester::new(1, 1, 1), 0).unwrap();
    s.send_to(&buf[..n], sw.local_addr()).unwrap(); // wrong direction
    let n = encode_steal(&mut buf, Op::StealProbe, &StealBody::new(1, 1)).unwrap();
    s.send_to(&buf[..n], sw.local_addr()).unwrap(); // between agents, never for a switch
                                                    // The switch still answers afterwards.
    let n = encode_get_task(&mut buf, 1, 0, Requester::new(1, 1, 77), false).unwrap();
    s.send_to(&buf[..n], sw.local_addr()).unwrap();
    let n = recv(&s, &mut buf);
    assert!(matches!(decode(&buf[..n]), Ok(Message::Noop { to: r, .. }) if r.seq() == 77));
    let stats = sw.shutdown().unwrap();
    assert_eq!(stats.malformed[DecodeError::Truncated.index()], 1);
    assert_eq!(stats.malformed[DecodeError::BadMagic.index()], 1);
    assert_eq!(stats.malformed[DecodeError::InternalOp(10).index()], 1);
    assert_eq!(stats.wrong_direction, 2);
    assert_eq!(stats.received, 6);
}

#[test]
fn a_get_bundle_with_a_bad_want_is_counted_and_refused_and_a_good_one_is_answered() {
    let sw = start(32);
    let s = client_socket();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let tasks: Vec<Task> = (1..=3)
        .map(|i| {
            let mut t = Task { prio: 1, ..Task::default() };
            t.set_tid(i);
            t
        })
        .collect();
    let n = encode_submit(&mut buf, JobRef::new(1, 2), 0, &tasks).unwrap();
    s.send_to(&buf[..n], sw.local_addr()).unwrap();
    let n = encode_get_bundle(&mut buf, 1, 0, Requester::new(1, 1, 1), 4, false).unwrap();
    let good = buf[..n].to_vec();
    // want 1 (a GET_TASK's), 17 (more than one ASSIGN lists) and 0: refused unanswered.
    for want in [1u8, 17, 0] {
        let mut bad = good.clone();
        bad[Header::LEN + Requester::LEN] = want;
        s.send_to(&bad, sw.local_addr()).unwrap();
    }
    s.send_to(&good, sw.local_addr()).unwrap();
    let n = recv(&s, &mut buf);
    let tids = match decode(&buf[..n]) {
        Ok(Message::Assign { entries, best: 0 }) => entries.iter().map(|e| e.task.tid()).collect::<Vec<_>>(),
        other => panic!("expected the bundle, got {other:?}"),
    };
    assert_eq!(tids, vec![1, 2, 3], "fewer than want: all three, in FIFO order");
    let stats = sw.shutdown().unwrap();
    assert_eq!(stats.malformed[DecodeError::BadField.index()], 3);
    assert_eq!(stats.malformed_total(), 3);
    assert_eq!((stats.queue.bundles, stats.queue.bundled_tasks, stats.queue.decisions), (1, 3, 3));
    assert_eq!(stats.queue.cost_of(Op::GetBundle).packets, 1, "only the good one entered the pipeline");
}

#[test]
fn refuses_bad_configuration() {
    let bad = |c: SwitchConfig| spawn(c).err().map(|e| e.to_string()).unwrap_or_default();
    let base = SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), ..SwitchConfig::default() };
    assert!(bad(SwitchConfig { queue_capacity: 1000, ..base.clone() }).contains("power of two"));
    assert!(bad(SwitchConfig { priorities: 9, ..base.clone() }).contains("priority levels"));
    assert!(bad(SwitchConfig { listen: "[::1]:0".parse().unwrap(), ..base }).contains("IPv4"));
}

/// A test agent: asks for a REFILL batch, gets the tasks its node can run in batches of
/// at most 16, and RETURNs some of them, which queue again with their client kept.
#[test]
fn refill_and_return_with_a_test_agent() {
    let sw = start(64);
    let client = client_socket();
    let agent = client_socket();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let tasks: Vec<Task> = (0..20)
        .map(|i| {
            // Every fifth task needs resource bit 3, which the agent's node lacks.
            let mut t = Task { prio: 1 + (i % 4) as u8, rsrc: if i % 5 == 0 { 0b1000 } else { 0 }, ..Task::default() };
            t.set_tid(i);
            t
        })
        .collect();
    for (jid, chunk) in tasks.chunks(MAX_LIST).enumerate() {
        let n = encode_submit(&mut buf, JobRef::new(5, jid as u32), 0, chunk).unwrap();
        client.send_to(&buf[..n], sw.local_addr()).unwrap();
    }
    // Wait until both SUBMITs are queued (the queue depth is published every 100 ms).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while sw.stats().queue_depth.iter().sum::<u32>() < 20 {
        assert!(std::time::Instant::now() < deadline, "tasks never queued");
        std::thread::sleep(Duration::from_millis(20));
    }

    let n = encode_refill_req(&mut buf, 0b0111, RefillRequest::new(9, 100)).unwrap();
    agent.send_to(&buf[..n], sw.local_addr()).unwrap();
    let mut got: Vec<Entry> = Vec::new();
    loop {
        let n = recv(&agent, &mut buf);
        match decode(&buf[..n]).unwrap() {
            Message::Refill { entries, .. } => {
                assert!(entries.len() <= MAX_LIST);
                got.extend_from_slice(entries);
                if entries.len() < MAX_LIST {
                    break;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got.len(), 16, "every task the node can run, and none it cannot");
    assert!(got.iter().all(|e| e.task.rsrc == 0));
    // One full batch, newest first: its last entry is the first dequeued.
    assert!(got.windows(2).all(|w| w[0].task.prio >= w[1].task.prio), "highest priority last in the batch");

    // The agent drains: it gives three back. They queue again and keep their client.
    let n = encode_return(&mut buf, &got[..3]).unwrap();
    agent.send_to(&buf[..n], sw.local_addr()).unwrap();
    let n = encode_refill_req(&mut buf, 0xff, RefillRequest::new(9, 100)).unwrap();
    let mut again: Vec<Entry> = Vec::new();
    for _ in 0..100 {
        agent.send_to(&buf[..n], sw.local_addr()).unwrap();
        let mut rb = [0u8; MAX_MESSAGE_LEN];
        let m = recv(&agent, &mut rb);
        if let Ok(Message::Refill { entries, .. }) = decode(&rb[..m]) {
            again.extend_from_slice(entries);
        }
        if again.len() >= 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut tids: Vec<u32> = again.iter().map(|e| e.task.tid()).collect();
    tids.sort();
    let mut expect: Vec<u32> = got[..3].iter().map(|e| e.task.tid()).chain([0, 5, 10, 15]).collect();
    expect.sort();
    assert_eq!(tids, expect, "returned tasks and the constrained ones, each once");
    assert!(again.iter().all(|e| e.client_port() == client.local_addr().unwrap().port()));
    let stats = sw.shutdown().unwrap();
    assert_eq!(stats.queue.returned_tasks, 3);
    assert_eq!(stats.queue.refill_tasks, 23);
}

fn bound_to(ip: &str) -> UdpSocket {
    let s = UdpSocket::bind((ip, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    s
}

/// Whether a datagram arrives on `s` within its read timeout.
fn answered(s: &UdpSocket) -> bool {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    s.recv(&mut buf).is_ok()
}

/// SUBMIT only from the client prefixes, REFILL_REQ and RETURN only from the agents,
/// GET_TASK only from the executors; each refusal counted under its op, and nothing
/// refused is queued or answered. Loopback has all of 127/8, so each role gets its own
/// source address.
#[test]
fn access_rules_refuse_and_count_strangers() {
    let access = AccessRules {
        clients: vec![parse_prefix("127.0.0.2").unwrap()],
        agents: vec![parse_prefix("127.0.0.3/32").unwrap()],
        executors: vec![parse_prefix("127.0.0.4/32").unwrap()],
    };
    let cfg =
        SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), queue_capacity: 64, access, ..SwitchConfig::default() };
    let sw = spawn(cfg).unwrap();
    let (stranger, client, agent, executor) =
        (bound_to("127.0.0.1"), bound_to("127.0.0.2"), bound_to("127.0.0.3"), bound_to("127.0.0.4"));
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let mut task = Task { prio: 1, ..Task::default() };
    task.set_tid(1);
    let submit = encode_submit(&mut buf, JobRef::new(1, 1), 0, &[task]).unwrap();
    let submit = buf[..submit].to_vec();
    let get_task = |seq| {
        let mut b = [0u8; MAX_MESSAGE_LEN];
        let n = encode_get_task(&mut b, 1, 0, Requester::new(1, 1, seq), false).unwrap();
        b[..n].to_vec()
    };
    let n = encode_refill_req(&mut buf, 0xff, RefillRequest::new(1, 16)).unwrap();
    let refill_req = buf[..n].to_vec();
    let n = encode_return(&mut buf, &[Entry::new(7, 7, task, [127, 0, 0, 2], 9)]).unwrap();
    let forged_return = buf[..n].to_vec();

    // A stranger's SUBMIT is not queued and gets no QUEUE_FULL; its GET_TASK no answer.
    stranger.send_to(&submit, sw.local_addr()).unwrap();
    stranger.send_to(&get_task(1), sw.local_addr()).unwrap();
    assert!(!answered(&stranger), "a stranger's GET_TASK is answered");
    // Agents and executors may not SUBMIT either.
    agent.send_to(&submit, sw.local_addr()).unwrap();
    executor.send_to(&submit, sw.local_addr()).unwrap();
    stranger.send_to(&refill_req, sw.local_addr()).unwrap();
    assert!(!answered(&stranger), "a stranger's REFILL_REQ is answered");
    // An executor may ask for work but not hand tasks in, nor ask for a host's batch.
    executor.send_to(&refill_req, sw.local_addr()).unwrap();
    assert!(!answered(&executor), "an executor's REFILL_REQ is answered");
    stranger.send_to(&forged_return, sw.local_addr()).unwrap();
    executor.send_to(&forged_return, sw.local_addr()).unwrap();
    assert!(!answered(&client), "a refused RETURN bounced a QUEUE_FULL to the client it names");
    // An agent does not take tasks one by one.
    agent.send_to(&get_task(2), sw.local_addr()).unwrap();
    assert!(!answered(&agent), "an agent's GET_TASK is answered");
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(sw.stats().queue_depth.iter().sum::<u32>(), 0, "a refused message queued a task");

    // The client's SUBMIT queues; the executor gets it, and the agent's REFILL_REQ is answered.
    client.send_to(&submit, sw.local_addr()).unwrap();
    let mut assigned = false;
    for seq in 0..50 {
        executor.send_to(&get_task(seq), sw.local_addr()).unwrap();
        let n = recv(&executor, &mut buf);
        if let Ok(Message::Assign { entries: [e], .. }) = decode(&buf[..n]) {
            assert_eq!(e.task.tid(), 1);
            assigned = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(assigned, "the registered executor never got the client's task");
    agent.send_to(&refill_req, sw.local_addr()).unwrap();
    let n = recv(&agent, &mut buf);
    assert!(matches!(decode(&buf[..n]), Ok(Message::Refill { .. })));

    let stats = sw.shutdown().unwrap();
    assert_eq!(stats.refused_of(Op::Submit), 3);
    assert_eq!(stats.refused_of(Op::GetTask), 2);
    assert_eq!(stats.refused_of(Op::RefillReq), 2);
    assert_eq!(stats.refused_of(Op::Return), 2);
    assert_eq!(stats.queue.enqueued, 1);
    assert_eq!(stats.return_over_credit, 0, "refused RETURNs never reach the credit");
}

/// An agent RETURNs at most what tier 2 REFILLed to it. Entries beyond its credit (here:
/// a task forged in a victim client's name, then one more than it was given) are not
/// queued: each goes back to the client it names as QUEUE_FULL, and is counted.
#[test]
fn a_return_beyond_the_agents_credit_goes_back_to_its_client() {
    let sw = start(64);
    let (victim, agent, executor) = (client_socket(), client_socket(), client_socket());
    let SocketAddr::V4(victim_addr) = victim.local_addr().unwrap() else { unreachable!() };
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let task = |tid| {
        let mut t = Task { prio: 1, ..Task::default() };
        t.set_tid(tid);
        t
    };
    let forged = Entry::new(66, 6, task(600), victim_addr.ip().octets(), victim_addr.port());

    // With no credit, a forged RETURN queues nothing and the victim hears of it.
    let n = encode_return(&mut buf, &[forged]).unwrap();
    agent.send_to(&buf[..n], sw.local_addr()).unwrap();
    let n = recv(&victim, &mut buf);
    match decode(&buf[..n]).unwrap() {
        Message::QueueFull { job, tasks } => assert_eq!((job.uid(), job.jid(), tasks), (66, 6, &[task(600)][..])),
        other => panic!("unexpected {other:?}"),
    }

    // The victim's two real tasks are REFILLed to the agent: its credit is 2.
    let n = encode_submit(&mut buf, JobRef::new(1, 1), 0, &[task(1), task(2)]).unwrap();
    victim.send_to(&buf[..n], sw.local_addr()).unwrap();
    let mut got: Vec<Entry> = Vec::new();
    for _ in 0..100 {
        let n = encode_refill_req(&mut buf, 0xff, RefillRequest::new(3, 16)).unwrap();
        agent.send_to(&buf[..n], sw.local_addr()).unwrap();
        let n = recv(&agent, &mut buf);
        if let Ok(Message::Refill { entries, .. }) = decode(&buf[..n]) {
            got.extend_from_slice(entries);
        }
        if got.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(got.len(), 2, "the agent got the two tasks");

    // It returns both and the forged one: two queue again, the third bounces.
    let n = encode_return(&mut buf, &[got[0], got[1], forged]).unwrap();
    agent.send_to(&buf[..n], sw.local_addr()).unwrap();
    let n = recv(&victim, &mut buf);
    assert!(matches!(decode(&buf[..n]), Ok(Message::QueueFull { tasks, .. }) if tasks == [task(600)]));
    let mut assigned = Vec::new();
    for seq in 0..100 {
        let n = encode_get_task(&mut buf, 1, 0, Requester::new(3, 1, seq), false).unwrap();
        executor.send_to(&buf[..n], sw.local_addr()).unwrap();
        let n = recv(&executor, &mut buf);
        if let Ok(Message::Assign { entries: [e], .. }) = decode(&buf[..n]) {
            assigned.push(e.task.tid());
        } else if assigned.len() == 2 {
            break;
        }
    }
    assigned.sort();
    assert_eq!(assigned, [1, 2], "the returned tasks run; the forged one does not");
    let stats = sw.shutdown().unwrap();
    assert_eq!(stats.return_over_credit, 2);
    assert_eq!(stats.queue.returned_tasks, 2);
    assert_eq!(stats.queue_depth.iter().sum::<u32>(), 0);
}

/// One source flooding GET_TASK as fast as it can send, while another executor asks one
/// request at a time: with a per-source limit the flood takes at most its rate and burst,
/// so the queue never empties and every polite request is answered with a task. (Without
/// the limit the flood empties the queue in milliseconds and the polite executor gets
/// NOOPs.)
#[test]
fn a_get_task_flood_does_not_starve_other_executors() {
    const TASKS: u32 = 2048;
    const RATE: u32 = 1000;
    const BURST: u32 = 16;
    const FLOOD: Duration = Duration::from_millis(600);
    let cfg = SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        queue_capacity: TASKS,
        get_task_rate: RATE,
        get_task_burst: BURST,
        ..SwitchConfig::default()
    };
    let sw = spawn(cfg).unwrap();
    let client = client_socket();
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let mut tid = 0;
    for jid in 0..TASKS / MAX_LIST as u32 {
        let tasks: Vec<Task> = (0..MAX_LIST)
            .map(|_| {
                let mut t = Task { prio: 1, ..Task::default() };
                t.set_tid(tid);
                tid += 1;
                t
            })
            .collect();
        let n = encode_submit(&mut buf, JobRef::new(1, jid), 0, &tasks).unwrap();
        client.send_to(&buf[..n], sw.local_addr()).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sw.stats().queue_depth.first().copied().unwrap_or(0) < TASKS {
        assert!(std::time::Instant::now() < deadline, "tasks never queued: {:?}", sw.stats().queue_depth);
        std::thread::sleep(Duration::from_millis(20));
    }

    let flooder = {
        let to = sw.local_addr();
        std::thread::spawn(move || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut b = [0u8; MAX_MESSAGE_LEN];
            let n = encode_get_task(&mut b, 1, 0, Requester::new(66, 66, 0), false).unwrap();
            let started = std::time::Instant::now();
            let mut sent = 0u64;
            while started.elapsed() < FLOOD && sent < 50_000_000 {
                let _ = s.send_to(&b[..n], to);
                sent += 1;
            }
            sent
        })
    };
    std::thread::sleep(Duration::from_millis(20)); // the flood is on before the polite executor asks
    let polite = bound_to("127.0.0.1");
    let (mut polite_requests, mut polite_tasks) = (0u32, 0u32);
    let started = std::time::Instant::now();
    while started.elapsed() < FLOOD / 2 {
        let n = encode_get_task(&mut buf, 1, 0, Requester::new(1, 1, polite_requests), false).unwrap();
        polite.send_to(&buf[..n], sw.local_addr()).unwrap();
        polite_requests += 1;
        if let Ok(n) = polite.recv(&mut buf) {
            if let Ok(Message::Assign { .. }) = decode(&buf[..n]) {
                polite_tasks += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(1)); // an executor running a 1 ms task
    }
    let flood_sent = flooder.join().unwrap();
    let stats = sw.shutdown().unwrap();
    let flood_tasks = stats.queue.assigns - polite_tasks as u64;
    println!(
        "flood: {flood_sent} GET_TASK sent, {flood_tasks} served, {} over the limit; polite executor: \
         {polite_tasks} tasks for {polite_requests} requests",
        stats.get_task_limited
    );
    assert!(flood_sent > 10 * (RATE as u64), "the flood was too slow to test anything");
    let allowed = (RATE as f64 * (FLOOD.as_secs_f64() + 0.2)) as u64 + BURST as u64;
    assert!(flood_tasks <= allowed, "the flood took {flood_tasks} tasks, more than its {allowed}");
    assert!(polite_requests >= 20, "the polite executor asked only {polite_requests} times");
    // A request the flood crowds out of the switch's socket buffer is lost as any
    // datagram is (an executor's GET timeout resends it): the limit must leave the polite
    // executor its tasks, not every datagram.
    assert!(
        polite_tasks * 20 >= polite_requests * 19,
        "the polite executor got {polite_tasks} tasks for {polite_requests} requests"
    );
}

#[test]
fn a_waiting_executor_is_answered_when_a_task_arrives_and_noop_when_its_time_runs_out() {
    let park_for = Duration::from_millis(200);
    let cfg = SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        wait: WaitConfig { park_for, ..WaitConfig::default() },
        ..SwitchConfig::default()
    };
    let sw = spawn(cfg).unwrap();
    let (client, exec) = (client_socket(), client_socket());
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    // Nothing queued: the request waits at the switch, no NOOP comes back.
    let n = encode_get_task(&mut buf, 1, 0, Requester::new(7, 1, 1), true).unwrap();
    exec.send_to(&buf[..n], sw.local_addr()).unwrap();
    exec.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    assert!(exec.recv(&mut buf).is_err(), "answered at once instead of parked");
    // A task arrives: the parked request is answered with it, well before its deadline.
    let mut t = Task { prio: 2, ..Task::default() };
    t.set_tid(5);
    let n = encode_submit(&mut buf, JobRef::new(1, 1), 0, &[t]).unwrap();
    let submitted = std::time::Instant::now();
    client.send_to(&buf[..n], sw.local_addr()).unwrap();
    exec.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = recv(&exec, &mut buf);
    assert!(submitted.elapsed() < park_for / 2, "ASSIGN after {:?}", submitted.elapsed());
    assert!(matches!(decode(&buf[..n]), Ok(Message::Assign { entries: [entry], best: 0 }) if entry.task.tid() == 5));
    // Waiting again with nothing queued: NOOP (its own seq) once the park time is over.
    let n = encode_get_task(&mut buf, 1, 0, Requester::new(7, 1, 2), true).unwrap();
    let asked = std::time::Instant::now();
    exec.send_to(&buf[..n], sw.local_addr()).unwrap();
    let n = recv(&exec, &mut buf);
    let waited = asked.elapsed();
    assert!(matches!(decode(&buf[..n]), Ok(Message::Noop { to, .. }) if to.seq() == 2));
    assert!(waited >= park_for && waited < park_for * 2, "NOOP after {waited:?}");
    let stats = sw.shutdown().unwrap();
    assert_eq!((stats.park.parked, stats.park.answered_from_park, stats.park.expired), (2, 1, 1));
}

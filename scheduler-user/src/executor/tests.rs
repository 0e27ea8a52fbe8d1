//! Executor tests against a test that plays the switch (and the client) on loopback.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use scheduler_common::*;

use super::*;

/// Every receive in these tests gives up after this long, so a broken executor fails
/// the test instead of hanging it.
const RECV_LIMIT: Duration = Duration::from_secs(5);

fn socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(RECV_LIMIT)).unwrap();
    s
}

/// Receives the next GET_TASK, skipping nothing else: anything else is a test failure.
fn recv_get(switch: &UdpSocket) -> (Requester, u8, u8, SocketAddr) {
    let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
    let (n, from) = switch.recv_from(&mut buf).expect("no GET_TASK arrived");
    match decode(&buf[..n]).unwrap() {
        Message::GetTask { rtrv_prio, exec_rsrc, from: req, .. } => (req, rtrv_prio, exec_rsrc, from),
        other => panic!("expected GET_TASK, got {other:?}"),
    }
}

fn recv_complete(client: &UdpSocket) -> Completion {
    let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
    let (n, _) = client.recv_from(&mut buf).expect("no COMPLETE arrived");
    match decode(&buf[..n]).unwrap() {
        Message::Complete(c) => *c,
        other => panic!("expected COMPLETE, got {other:?}"),
    }
}

fn send_assign(switch: &UdpSocket, to: SocketAddr, e: &Entry) {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode_assign(&mut buf, e, 0).unwrap();
    switch.send_to(&buf[..n], to).unwrap();
}

fn send_noop(switch: &UdpSocket, to: SocketAddr, r: Requester) {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode_noop(&mut buf, r, 0).unwrap();
    switch.send_to(&buf[..n], to).unwrap();
}

fn entry(client: &UdpSocket, tid: u32, desc: [u8; 16], rsrc: u8) -> Entry {
    let mut t = Task { prio: 1, rsrc, desc, ..Task::default() };
    t.set_tid(tid);
    let SocketAddr::V4(addr) = client.local_addr().unwrap() else { panic!("IPv4 expected") };
    Entry::new(77, 5, t, addr.ip().octets(), addr.port())
}

fn config(switch: &UdpSocket, resources: u8) -> ExecutorConfig {
    let mut cfg = ExecutorConfig::new(switch.local_addr().unwrap(), resources);
    cfg.node = 3;
    // Long enough that no GET is resent while a test is slow, unless it wants that.
    cfg.get_timeout = Duration::from_secs(2);
    cfg
}

#[test]
fn pulls_runs_and_reports_to_the_client() {
    let (switch, client) = (socket(), socket());
    let pool = spawn(config(&switch, 0b0110)).unwrap();

    let (req, prio, rsrc, exec_addr) = recv_get(&switch);
    assert_eq!((prio, rsrc, req.node(), req.executor()), (RTRV_PRIO, 0b0110, 3, 0));
    assert_eq!(pool.local_addrs(), &[exec_addr]);
    // Nothing queued: NOOP echoing the requester. The executor backs off and asks again.
    send_noop(&switch, exec_addr, req);
    let (req2, ..) = recv_get(&switch);
    assert_ne!(req2.seq(), req.seq(), "a new GET_TASK carries a new seq");

    let before = unix_now_ns();
    let spin = Handler::Spin { micros: 300 }.encode().unwrap();
    send_assign(&switch, exec_addr, &entry(&client, 42, spin, 0b0100));
    let c = recv_complete(&client);
    assert_eq!((c.uid(), c.jid(), c.tid(), c.status), (77, 5, 42, STATUS_OK));
    assert_eq!((c.node(), c.executor()), (3, 0));
    assert!(c.run_ns() >= 300_000, "run_ns {} for a 300 us spin", c.run_ns());
    assert!(c.start_unix_ns() >= before && c.start_unix_ns() <= unix_now_ns());

    // After the task it asks again.
    recv_get(&switch);
    let total = pool.shutdown();
    assert_eq!((total.tasks_run, total.tasks_ok, total.noops), (1, 1, 1));
    assert!(total.gets_sent >= 3);
}

#[test]
fn records_the_get_task_round_trip_of_each_assignment_when_asked() {
    let (switch, client) = (socket(), socket());
    let mut cfg = config(&switch, 0);
    cfg.record_assignments = true;
    let pool = spawn(cfg).unwrap();
    let (_, _, _, exec_addr) = recv_get(&switch);
    // Answer late, so the round trip is at least this pause.
    std::thread::sleep(Duration::from_millis(20));
    let mut e = entry(&client, 9, Handler::Noop.encode().unwrap(), 0);
    e.task.prio = 3;
    send_assign(&switch, exec_addr, &e);
    assert_eq!(recv_complete(&client).tid(), 9);
    recv_get(&switch);
    let log = pool.take_assignments();
    assert_eq!(log.len(), 1);
    assert_eq!((log[0].uid, log[0].jid, log[0].tid, log[0].priority, log[0].node), (77, 5, 9, 3, 3));
    assert!(log[0].get_rtt_ns >= 20_000_000 && log[0].get_rtt_ns < 2_000_000_000, "{}", log[0].get_rtt_ns);
    assert!(pool.take_assignments().is_empty(), "taken records are gone");
    pool.shutdown();
}

#[test]
fn resends_get_task_after_a_timeout() {
    let (switch, client) = (socket(), socket());
    let mut cfg = config(&switch, 0);
    cfg.get_timeout = Duration::from_millis(30);
    let pool = spawn(cfg).unwrap();

    // Play a switch that loses the first request.
    let (first, ..) = recv_get(&switch);
    let (second, _, _, exec_addr) = recv_get(&switch);
    assert!(second.seq() > first.seq());
    send_assign(&switch, exec_addr, &entry(&client, 1, Handler::Noop.encode().unwrap(), 0));
    assert_eq!(recv_complete(&client).tid(), 1);
    let total = pool.shutdown();
    assert!(total.get_timeouts >= 1);
    assert_eq!(total.tasks_run, 1);
}

#[test]
fn a_late_assign_for_a_timed_out_get_is_still_run() {
    let (switch, client) = (socket(), socket());
    let mut cfg = config(&switch, 0);
    cfg.get_timeout = Duration::from_millis(30);
    let pool = spawn(cfg).unwrap();

    // Answer the first two GETs only after both were sent (the first timed out), with
    // one task each: both must run.
    let (a, ..) = recv_get(&switch);
    let (b, _, _, exec_addr) = recv_get(&switch);
    assert_ne!(a.seq(), b.seq());
    let noop = Handler::Noop.encode().unwrap();
    send_assign(&switch, exec_addr, &entry(&client, 10, noop, 0));
    send_assign(&switch, exec_addr, &entry(&client, 11, noop, 0));
    let mut tids = [recv_complete(&client).tid(), recv_complete(&client).tid()];
    tids.sort();
    assert_eq!(tids, [10, 11]);
    // A NOOP for a GET that is no longer current is not taken as the answer to the
    // current one.
    send_noop(&switch, exec_addr, a);
    let total_before_stop = {
        let deadline = Instant::now() + RECV_LIMIT;
        loop {
            let c = pool.counters();
            if c.stale_noops >= 1 || Instant::now() > deadline {
                break c;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    assert_eq!(total_before_stop.stale_noops, 1);
    assert_eq!(pool.shutdown().tasks_run, 2);
}

/// GET_TASKs that arrive at `switch` until `until`, with their arrival time.
fn gets_until(switch: &UdpSocket, until: Instant) -> Vec<(Instant, Requester, SocketAddr, u8)> {
    let mut got = Vec::new();
    let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
    while let Some(left) = until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        switch.set_read_timeout(Some(left)).unwrap();
        let Ok((n, from)) = switch.recv_from(&mut buf) else { continue };
        if let Ok(Message::GetTask { from: req, .. }) = decode(&buf[..n]) {
            got.push((Instant::now(), req, from, buf[7]));
        }
    }
    switch.set_read_timeout(Some(RECV_LIMIT)).unwrap();
    got
}

#[test]
fn exactly_one_get_task_outstanding_per_executor_through_lost_and_late_answers() {
    let (switch, client) = (socket(), socket());
    let timeout = Duration::from_millis(60);
    let mut cfg = config(&switch, 0);
    cfg.executors = 2;
    cfg.get_timeout = timeout;
    let pool = spawn(cfg).unwrap();
    let addrs = pool.local_addrs().to_vec();
    // Every answer is lost for a while: each executor resends once per timeout, never
    // more often, and every request asks to wait at the switch.
    let start = Instant::now();
    let mut gets = gets_until(&switch, start + 5 * timeout + timeout / 2);
    // The late answer to executor 0's last timed-out request: run, but its current
    // request is still outstanding, so it does not ask again before that one times out.
    send_assign(&switch, addrs[0], &entry(&client, 1, Handler::Noop.encode().unwrap(), 0));
    assert_eq!(recv_complete(&client).tid(), 1);
    gets.extend(gets_until(&switch, Instant::now() + timeout + timeout / 2));
    for exec in &addrs {
        let mine: Vec<_> = gets.iter().filter(|g| g.2 == *exec).collect();
        assert!(mine.len() >= 5, "{exec}: {} GET_TASKs", mine.len());
        assert!(mine.iter().all(|g| g.3 == FLAG_WAIT), "every GET_TASK carries WAIT");
        for pair in mine.windows(2) {
            let gap = pair[1].0 - pair[0].0;
            assert!(gap >= timeout * 9 / 10, "{exec}: two GET_TASKs {gap:?} apart: two outstanding");
        }
    }
    // Recovery: answers flow again. Each request is answered as it arrives; every task
    // runs, within a timeout or two each (the first answer may be taken for the late
    // one of a request that had just timed out, and then the next timeout resends).
    let resumed = Instant::now();
    for tid in 2..5 {
        let (req, _, _, from) = recv_get(&switch);
        send_assign(
            &switch,
            from,
            &entry(&client, tid + 10 * req.executor() as u32, Handler::Noop.encode().unwrap(), 0),
        );
        recv_complete(&client);
    }
    assert!(resumed.elapsed() < timeout * 7, "recovery took {:?}", resumed.elapsed());
    let total = pool.shutdown();
    assert_eq!(total.tasks_run, 4);
    assert!(total.late_assigns >= 1);
    assert!(total.get_timeouts >= 8);
}

/// A request times out and its late answer never comes (a host dropped the superseded
/// request unanswered). The next ASSIGN is taken for that late answer and the request
/// it answered times out once; after that, every request is answered by its own ASSIGN,
/// not one task per timeout.
#[test]
fn a_late_answer_that_never_comes_costs_one_timeout_not_one_per_task() {
    let (switch, client) = (socket(), socket());
    let timeout = Duration::from_millis(80);
    let mut cfg = config(&switch, 0);
    cfg.get_timeout = timeout;
    let pool = spawn(cfg).unwrap();
    // The first request goes unanswered and times out: a late answer is expected.
    let (first, _, _, _) = recv_get(&switch);
    let (second, _, _, _) = recv_get(&switch);
    assert_eq!(second.seq(), first.seq() + 1, "the timed-out request was resent");
    // From now on every request is answered at once.
    let answering = Instant::now();
    let tasks = 12;
    for tid in 0..tasks {
        if tid > 0 {
            recv_get(&switch);
        }
        let to = pool.local_addrs()[0];
        send_assign(&switch, to, &entry(&client, tid, Handler::Noop.encode().unwrap(), 0));
        assert_eq!(recv_complete(&client).tid(), tid);
    }
    let took = answering.elapsed();
    let total = pool.shutdown();
    assert_eq!(total.tasks_run, tasks as u64);
    assert_eq!(total.late_assigns, 1, "one ASSIGN taken for the late answer");
    assert_eq!(total.get_timeouts, 2, "the first request and the one whose answer was taken for it");
    assert!(took < timeout * 4, "{tasks} answered requests took {took:?}: a timeout per task");
}

#[test]
fn refuses_what_it_must_not_run() {
    let (switch, client) = (socket(), socket());
    let mut cfg = config(&switch, 0b01);
    cfg.allow_exec = vec![ExecRule::parse("ok=true").unwrap()];
    let pool = spawn(cfg).unwrap();

    let mut bad_desc = [0u8; 16];
    bad_desc[0] = 99;
    // exec with a name length past the 14 bytes a descriptor holds.
    let mut oversized = [0u8; 16];
    oversized[..3].copy_from_slice(&[3, 15, b'o']);
    // exec with a path in the name.
    let mut path = [0u8; 16];
    path[..7].copy_from_slice(&[3, 5, b'.', b'.', b'/', b'o', b'k']);
    // sleep with a reserved byte set.
    let mut reserved = Handler::Sleep { micros: 5 }.encode().unwrap();
    reserved[12] = 1;
    let cases = [
        (1, Handler::Exec { name: b"ok" }.encode().unwrap(), 0b01, STATUS_OK),
        (2, Handler::Exec { name: b"rm" }.encode().unwrap(), 0, STATUS_REFUSED),
        (3, bad_desc, 0, STATUS_REFUSED),
        // Needs a resource this executor does not offer: refused, not run.
        (4, Handler::Noop.encode().unwrap(), 0b10, STATUS_REFUSED),
        (5, oversized, 0, STATUS_REFUSED),
        (6, path, 0, STATUS_REFUSED),
        (7, reserved, 0, STATUS_REFUSED),
    ];
    for (tid, desc, rsrc, status) in cases {
        let (_, _, _, exec_addr) = recv_get(&switch);
        send_assign(&switch, exec_addr, &entry(&client, tid, desc, rsrc));
        let c = recv_complete(&client);
        assert_eq!((c.tid(), c.status), (tid, status), "task {tid}");
    }
    let total = pool.shutdown();
    assert_eq!((total.tasks_ok, total.tasks_refused), (1, 6));
}

#[test]
fn malformed_and_foreign_input_is_counted_not_fatal() {
    let (switch, client, stranger) = (socket(), socket(), socket());
    let pool = spawn(config(&switch, 0)).unwrap();

    let (_, _, _, exec_addr) = recv_get(&switch);
    switch.send_to(&[0xB0, 0x17, 1], exec_addr).unwrap();
    switch.send_to(&[0u8; 200], exec_addr).unwrap();
    // An ASSIGN from an address that is not the switch is not taken.
    let noop = Handler::Noop.encode().unwrap();
    send_assign(&stranger, exec_addr, &entry(&client, 5, noop, 0));
    // The executor still works afterwards.
    send_assign(&switch, exec_addr, &entry(&client, 6, noop, 0));
    assert_eq!(recv_complete(&client).tid(), 6);
    let total = pool.shutdown();
    assert_eq!(total.decode_errors, 2);
    assert_eq!(total.ignored, 1);
    assert_eq!(total.tasks_run, 1);
    client.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let mut buf = [0u8; 64];
    assert!(client.recv_from(&mut buf).is_err(), "the stranger's task ran");
}

#[test]
fn stop_finishes_tasks_already_on_their_way() {
    let (switch, client) = (socket(), socket());
    let mut cfg = config(&switch, 0);
    cfg.get_timeout = Duration::from_millis(500);
    let pool = spawn(cfg).unwrap();

    let (_, _, _, exec_addr) = recv_get(&switch);
    pool.request_stop();
    // The answer to the GET sent before the stop carries a task: it must still run.
    std::thread::sleep(Duration::from_millis(20));
    send_assign(&switch, exec_addr, &entry(&client, 9, Handler::Sleep { micros: 1_000 }.encode().unwrap(), 0));
    let started = Instant::now();
    let total = pool.shutdown();
    assert_eq!(recv_complete(&client).tid(), 9);
    assert_eq!(total.tasks_run, 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn many_executors_use_one_socket_each() {
    let switch = socket();
    let mut cfg = config(&switch, 0);
    cfg.executors = 4;
    cfg.node = 8;
    let pool = spawn(cfg).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    while seen.len() < 4 {
        let (req, _, _, from) = recv_get(&switch);
        assert_eq!(req.node(), 8);
        seen.insert(req.executor(), from);
    }
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    let mut addrs: Vec<_> = seen.values().copied().collect();
    addrs.sort();
    let mut expected = pool.local_addrs().to_vec();
    expected.sort();
    assert_eq!(addrs, expected);
    pool.shutdown();
}

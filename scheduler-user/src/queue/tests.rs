//! Tests that pin the Bolt queue algorithm: pointer edges, repair, FIFO and priority
//! order, resource matching, and conservation of tasks under arbitrary interleavings of
//! pipeline passes (as a hardware pipeline would interleave them).

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};

use proptest::prelude::*;
use scheduler_common::{Entry, JobRef, Message, RefillRequest, Requester, Task, MAX_LIST};

use super::*;

const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 40000);
const EXECUTOR: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 40001);

fn task(tid: u32, prio: u8, rsrc: u8) -> Task {
    let mut t = Task { prio, rsrc, ..Task::default() };
    t.set_tid(tid);
    t
}

fn config(capacity: u32, priorities: u8) -> QueueConfig {
    QueueConfig { capacity, priorities, max_passes: u16::MAX, initial_pointer: 0 }
}

fn submit(s: &mut Scheduler, jid: u32, tasks: &[Task]) -> Vec<Output> {
    let mut out = Collect::default();
    let msg = Message::Submit { job: JobRef::new(1, jid), flags: 0, tasks };
    s.handle(&msg, CLIENT, &mut out).unwrap();
    out.0
}

fn get(s: &mut Scheduler, rtrv_prio: u8, exec_rsrc: u8) -> Output {
    let mut out = Collect::default();
    let msg = Message::GetTask { rtrv_prio, exec_rsrc, from: Requester::new(1, 2, 3), wait: false };
    s.handle(&msg, EXECUTOR, &mut out).unwrap();
    assert_eq!(out.0.len(), 1, "GET_TASK must be answered by exactly one packet: {:?}", out.0);
    out.0.pop().unwrap()
}

fn assigned_tid(o: &Output) -> Option<u32> {
    match o {
        Output::Assign { entry, to } => {
            assert_eq!(*to, EXECUTOR);
            Some(entry.task.tid())
        }
        Output::Noop { to, .. } => {
            assert_eq!(*to, EXECUTOR);
            None
        }
        other => panic!("unexpected answer to GET_TASK: {other:?}"),
    }
}

#[test]
fn fifo_within_a_priority() {
    let mut s = Scheduler::new(config(16, 4)).unwrap();
    let tasks: Vec<Task> = (0..10).map(|i| task(i, 2, 0)).collect();
    assert!(submit(&mut s, 1, &tasks).is_empty());
    let got: Vec<u32> = (0..10).map(|_| assigned_tid(&get(&mut s, 1, 0)).unwrap()).collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), None);
}

#[test]
fn higher_priority_first_and_rtrv_prio_honoured() {
    let mut s = Scheduler::new(config(16, 4)).unwrap();
    submit(&mut s, 1, &[task(40, 4, 0), task(30, 3, 0), task(10, 1, 0), task(20, 2, 0)]);
    // RTRV_PRIO 2 skips level 1.
    assert_eq!(assigned_tid(&get(&mut s, 2, 0)), Some(20));
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(10));
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(30));
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(40));
    let stats = s.stats();
    // The third GET recirculated past two empty levels, the fourth past three.
    assert_eq!(stats.cost_of(scheduler_common::Op::GetTask).recirculations, 2 + 3);
}

#[test]
fn empty_queue_answers_noop_after_visiting_every_level() {
    let mut s = Scheduler::new(config(8, 4)).unwrap();
    let o = get(&mut s, 1, 0xff);
    assert_eq!(o, Output::Noop { to: EXECUTOR, who: Requester::new(1, 2, 3) });
    let cost = s.stats().cost_of(scheduler_common::Op::GetTask).clone();
    assert_eq!((cost.packets, cost.passes, cost.recirculations), (1, 4, 3));
}

#[test]
fn full_queue_returns_the_tasks_not_added_and_repairs_add_ptr() {
    let mut s = Scheduler::new(config(4, 1)).unwrap();
    let tasks: Vec<Task> = (0..6).map(|i| task(i, 1, 0)).collect();
    let out = submit(&mut s, 7, &tasks);
    // One QUEUE_FULL per refused task, in the order the passes refused them.
    let refused = |t: Task| Output::QueueFull { to: CLIENT, job: JobRef::new(1, 7), tasks: vec![t] };
    assert_eq!(out, vec![refused(tasks[4]), refused(tasks[5])]);
    // The mistaken increments were undone: add_ptr is 4 past retrieve_ptr, no repair pending.
    assert_eq!(s.pipeline().pointers(0), (4, 0));
    assert!(!s.pipeline().repairing());
    assert_eq!(s.stats().repairs_add, 1);
    // Space frees up one by one, in order.
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(0));
    assert!(submit(&mut s, 8, &[task(9, 1, 0)]).is_empty());
    let rest: Vec<_> = (0..4).map(|_| assigned_tid(&get(&mut s, 1, 0)).unwrap()).collect();
    assert_eq!(rest, vec![1, 2, 3, 9]);
}

#[test]
fn empty_retrievals_are_repaired_by_the_next_submit() {
    let mut s = Scheduler::new(config(8, 1)).unwrap();
    for _ in 0..5 {
        assert_eq!(assigned_tid(&get(&mut s, 1, 0)), None);
    }
    assert_eq!(s.pipeline().pointers(0), (0, 5), "each empty retrieval advanced retrieve_ptr");
    submit(&mut s, 1, &[task(1, 1, 0), task(2, 1, 0)]);
    assert_eq!(s.stats().repairs_retrieve, 1);
    assert_eq!(s.pipeline().pointers(0), (2, 0), "retrieve_ptr pulled back to the first new task");
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(1));
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(2));
}

#[test]
fn pointers_cross_the_round_number_wrap() {
    // Start both pointers 3 below 2^32: the round number wraps to 0 during the test.
    let mut cfg = config(4, 1);
    cfg.initial_pointer = u32::MAX - 2;
    let mut s = Scheduler::new(cfg).unwrap();
    let mut next = 0u32;
    let mut expect = VecDeque::new();
    for round in 0..6 {
        let batch: Vec<Task> = (0..3).map(|k| task(next + k, 1, 0)).collect();
        next += 3;
        assert!(submit(&mut s, round, &batch).is_empty(), "round {round}");
        expect.extend(batch.iter().map(|t| t.tid()));
        // Fill to exactly full, then one more is refused.
        let extra = task(1000 + round, 1, 0);
        assert!(submit(&mut s, 100, &[extra]).is_empty());
        expect.push_back(extra.tid());
        let refused = submit(&mut s, 101, &[task(2000, 1, 0)]);
        assert!(matches!(&refused[..], [Output::QueueFull { .. }]));
        for _ in 0..4 {
            assert_eq!(assigned_tid(&get(&mut s, 1, 0)), expect.pop_front());
        }
        assert_eq!(assigned_tid(&get(&mut s, 1, 0)), None);
    }
    let (add, _) = s.pipeline().pointers(0);
    assert!(add < 100, "add_ptr wrapped around: {add}");
}

#[test]
fn retrieve_ptr_drift_is_bounded() {
    let mut s = Scheduler::new(config(4, 1)).unwrap();
    s.pipeline.set_pointers(0, 0, (DRIFT_LIMIT - 2) as u32);
    for _ in 0..5 {
        get(&mut s, 1, 0);
    }
    assert_eq!(s.pipeline().pointers(0), (0, DRIFT_LIMIT as u32), "retrieve_ptr stops at the limit");
    // The distance is still negative, so the next SUBMIT repairs instead of seeing "full".
    assert!(submit(&mut s, 1, &[task(5, 1, 0)]).is_empty());
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(5));
}

#[test]
fn retrieve_ptr_drift_is_bounded_across_the_u32_wrap() {
    // add_ptr just below 2^32: add_ptr + DRIFT_LIMIT wraps, and so does the ALU's window.
    let mut s = Scheduler::new(config(4, 1)).unwrap();
    let add = u32::MAX - 3;
    let limit = add.wrapping_add(DRIFT_LIMIT as u32);
    s.pipeline.set_pointers(0, add, limit.wrapping_sub(2));
    for _ in 0..5 {
        get(&mut s, 1, 0);
    }
    assert_eq!(s.pipeline().pointers(0), (add, limit), "retrieve_ptr stops at the limit");
    assert!(submit(&mut s, 1, &[task(5, 1, 0)]).is_empty());
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), Some(5));
}

proptest! {
    /// The stateful ALU's two unsigned compares decide exactly what the wrapped signed
    /// distance decides, for pointers anywhere, and near 2^30, 2^31 and 2^32 in particular.
    #[test]
    fn the_alu_drift_test_equals_the_wrapped_distance(
        add in prop_oneof![any::<u32>(), (0u32..64).prop_map(|d| u32::MAX - d), (0u32..64).prop_map(|d| (1u32 << 31) - 32 + d),
                          (0u32..64).prop_map(|d| (3u32 << 30) - 32 + d)],
        offset in prop_oneof![any::<u32>(), (0u32..64).prop_map(|d| (DRIFT_LIMIT as u32) - 32 + d),
                             (0u32..64).prop_map(|d| (1u32 << 31) - 32 + d), (0u32..64).prop_map(|d| u32::MAX - d), 0u32..64],
    ) {
        let r = add.wrapping_add(offset);
        let window = DriftWindow::new(add);
        prop_assert_eq!(window.allows_increment(r), Ring::distance(r, add) < DRIFT_LIMIT);
        prop_assert_eq!(r.wrapping_sub(add) >> 30 == 0b01, Ring::distance(r, add) >= DRIFT_LIMIT);
    }
}

#[test]
fn resource_mismatch_swaps_with_the_next_task() {
    let mut s = Scheduler::new(config(8, 1)).unwrap();
    // Head needs a GPU (bit 1); the executor has only bit 0.
    submit(&mut s, 1, &[task(1, 1, 0b10), task(2, 1, 0b10), task(3, 1, 0b01), task(4, 1, 0)]);
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b01)), Some(3));
    assert!(s.stats().swaps >= 2);
    // The tasks it could not run kept their order ahead of the rest.
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b11)), Some(1));
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b11)), Some(2));
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b11)), Some(4));
}

#[test]
fn no_match_reinserts_and_searches_lower_levels() {
    let mut s = Scheduler::new(config(8, 2)).unwrap();
    submit(&mut s, 1, &[task(1, 1, 0b100), task(2, 1, 0b100), task(3, 2, 0)]);
    // Nothing at level 1 runs here: the level-2 task is found, level 1 is untouched.
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b011)), Some(3));
    assert_eq!(s.pipeline().occupancy(), vec![2, 0]);
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b011)), None);
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b100)), Some(1));
    assert_eq!(assigned_tid(&get(&mut s, 1, 0b100)), Some(2));
    assert!(s.stats().reinserts >= 2);
}

#[test]
fn swap_restarts_at_the_head_when_retrieve_ptr_moved() {
    let mut s = Scheduler::new(config(8, 1)).unwrap();
    submit(&mut s, 1, &[task(1, 1, 0b10), task(2, 1, 0), task(3, 1, 0b10)]);
    // Start a GET by hand and stop after its first pass: it holds task 1 in a SWAP.
    let mut out = Collect::default();
    let msg = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0b01, from: Requester::new(1, 1, 1), wait: false };
    let pkt = s.pipeline.admit(&msg, EXECUTOR).unwrap();
    let swap = s.pipeline.pass(pkt, &mut out).recirculate.unwrap();
    assert!(matches!(swap, Packet::Swap { .. }));
    // Another executor takes the head (task 2) meanwhile: retrieve_ptr moves.
    assert_eq!(assigned_tid(&get(&mut s, 1, 0xff)), Some(2));
    // The SWAP now sees a different retrieve_ptr and restarts from the head.
    s.run(swap, &mut out);
    assert_eq!(out.0, vec![Output::Noop { to: EXECUTOR, who: Requester::new(1, 1, 1) }]);
    // Nothing was lost: both constrained tasks are still queued.
    let mut left: Vec<u32> = (0..2).map(|_| assigned_tid(&get(&mut s, 1, 0xff)).unwrap()).collect();
    left.sort();
    assert_eq!(left, vec![1, 3]);
}

#[test]
fn refill_batches_highest_priority_first_and_matching_only() {
    let mut s = Scheduler::new(config(64, 4)).unwrap();
    let mut tasks = Vec::new();
    for i in 0..40u32 {
        tasks.push(task(i, (i % 4 + 1) as u8, if i % 5 == 0 { 0b1000 } else { 0 }));
    }
    for chunk in tasks.chunks(16) {
        submit(&mut s, 1, chunk);
    }
    let mut out = Collect::default();
    let host = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 7172);
    let msg = Message::RefillReq { node_rsrc: 0b0111, req: RefillRequest::new(9, 20) };
    s.handle(&msg, host, &mut out).unwrap();
    let batches: Vec<&Vec<Entry>> = out
        .0
        .iter()
        .map(|o| match o {
            Output::Refill { to, entries } if *to == host => entries,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(batches.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![16, 4]);
    // Each batch lists its entries newest first: reversed, they are in dequeue order.
    let got: Vec<&Entry> = batches.iter().flat_map(|b| b.iter().rev()).collect();
    assert!(got.iter().all(|e| e.task.rsrc == 0), "only tasks the node can run");
    assert!(got.windows(2).all(|w| w[0].task.prio <= w[1].task.prio), "highest priority first");
    let level1 = tasks.iter().filter(|t| t.prio == 1 && t.rsrc == 0).count();
    assert_eq!(got.iter().filter(|e| e.task.prio == 1).count(), level1);
}

#[test]
fn a_refill_lists_its_entries_newest_first() {
    let mut s = Scheduler::new(config(64, 1)).unwrap();
    let tasks: Vec<Task> = (0..20).map(|i| task(i, 1, 0)).collect();
    submit(&mut s, 1, &tasks[..16]);
    submit(&mut s, 2, &tasks[16..]);
    let mut out = Collect::default();
    let host = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 7172);
    s.handle(&Message::RefillReq { node_rsrc: 0, req: RefillRequest::new(9, 20) }, host, &mut out).unwrap();
    let tids: Vec<Vec<u32>> = out
        .0
        .iter()
        .map(|o| match o {
            Output::Refill { entries, .. } => entries.iter().map(|e| e.task.tid()).collect(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    // Dequeued 0, 1, ... 19; each batch holds the last dequeued first.
    assert_eq!(tids, vec![(0..16).rev().collect::<Vec<u32>>(), (16..20).rev().collect()]);
}

#[test]
fn empty_refill_says_so() {
    let mut s = Scheduler::new(config(8, 4)).unwrap();
    let mut out = Collect::default();
    let host = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 7172);
    s.handle(&Message::RefillReq { node_rsrc: 0, req: RefillRequest::new(9, 8) }, host, &mut out).unwrap();
    assert_eq!(out.0, vec![Output::Refill { to: host, entries: vec![] }]);
}

#[test]
fn returned_entries_are_queued_again_or_bounced_to_their_client() {
    let mut s = Scheduler::new(config(2, 1)).unwrap();
    let other = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 9), 5555);
    let entries: Vec<Entry> =
        (0..3).map(|i| Entry::new(4, 5, task(i, 1, 0), other.ip().octets(), other.port())).collect();
    let mut out = Collect::default();
    s.handle(&Message::Return(&entries), EXECUTOR, &mut out).unwrap();
    assert_eq!(out.0, vec![Output::QueueFull { to: other, job: JobRef::new(4, 5), tasks: vec![entries[2].task] }]);
    assert_eq!(s.stats().returned_tasks, 3);
    match get(&mut s, 1, 0) {
        Output::Assign { entry, .. } => assert_eq!(entry, entries[0]),
        o => panic!("{o:?}"),
    }
}

#[test]
fn messages_for_other_components_are_refused() {
    let mut s = Scheduler::new(config(8, 4)).unwrap();
    let mut out = Collect::default();
    let r = s.handle(&Message::Noop { to: Requester::new(1, 1, 1), best: 0 }, CLIENT, &mut out);
    assert_eq!(r, Err(NotForSwitch::WrongDirection(scheduler_common::Op::Noop)));
    assert!(out.0.is_empty());
}

/// PIN goes from a client to a host's agent; tier 2 neither queues nor answers it.
#[test]
fn pin_is_refused_as_wrong_direction() {
    let mut s = Scheduler::new(config(8, 4)).unwrap();
    let mut out = Collect::default();
    let tasks = [scheduler_common::Task { prio: 1, ..Default::default() }];
    let pin = Message::Pin { job: JobRef::new(4, 5), flags: 0, tasks: &tasks };
    assert_eq!(s.handle(&pin, CLIENT, &mut out), Err(NotForSwitch::WrongDirection(scheduler_common::Op::Pin)));
    assert!(out.0.is_empty());
    assert_eq!(s.stats().enqueued, 0);
}

#[test]
fn the_swap_search_is_bounded_by_the_pass_budget() {
    let mut cfg = config(64, 1);
    cfg.max_passes = 8;
    let mut s = Scheduler::new(cfg).unwrap();
    let blocked: Vec<Task> = (0..16).map(|i| task(i, 1, 0b1)).collect();
    submit(&mut s, 1, &blocked);
    submit(&mut s, 2, &[task(99, 1, 0)]);
    // The only runnable task sits behind 16 others: the budget ends the search first.
    assert_eq!(assigned_tid(&get(&mut s, 1, 0)), None);
    assert_eq!(s.stats().budget_exhausted, 1);
    assert_eq!(s.pipeline().occupancy(), vec![17], "nothing lost when the budget runs out");
}

/// A scheduler with a budget of 16 SWAP passes per level, 64 level-1 tasks needing a
/// resource (0b100) no executor in these tests has, then `last`.
fn behind_64_blocked(priorities: u8, last: Task) -> Scheduler {
    let mut cfg = config(128, priorities);
    cfg.max_passes = 16;
    let mut s = Scheduler::new(cfg).unwrap();
    let blocked: Vec<Task> = (0..64).map(|i| task(i, 1, 0b100)).collect();
    for chunk in blocked.chunks(16) {
        submit(&mut s, 1, chunk);
    }
    submit(&mut s, 2, &[last]);
    s
}

#[test]
fn a_spent_budget_searches_the_lower_levels() {
    // 64 level-1 tasks no executor here can run, one runnable task at level 2.
    let mut s = behind_64_blocked(2, task(99, 2, 0));
    assert_eq!(
        assigned_tid(&get(&mut s, 1, 0b011)),
        Some(99),
        "level 2 must be searched when level 1's budget runs out"
    );
    assert_eq!(s.stats().budget_exhausted, 1);
    assert_eq!(s.pipeline().occupancy(), vec![64, 0], "nothing lost when the budget runs out");
    // The 64 tasks are still there, in one rotation of their order: the one the search
    // held when its budget ran out went to the tail, the 16 before it kept their order.
    let order: Vec<u32> = (0..64).map(|_| assigned_tid(&get(&mut s, 1, 0xff)).unwrap()).collect();
    let expect: Vec<u32> = (0..16).chain(17..64).chain([16]).collect();
    assert_eq!(order, expect);
}

#[test]
fn a_runnable_task_deeper_than_the_budget_is_reached() {
    // Level 1: 64 tasks nobody here can run, then one that runs. Each search that spends
    // its budget moves one task it cannot run from before the runnable one to the tail,
    // so the runnable task comes within reach after 64 - 16 such searches.
    let mut s = behind_64_blocked(1, task(99, 1, 0));
    let mut noops = 0;
    let found = loop {
        match assigned_tid(&get(&mut s, 1, 0b011)) {
            Some(tid) => break tid,
            None => noops += 1,
        }
        assert!(noops <= 64, "the executor starves while level 1 holds a task it can run");
    };
    assert_eq!((found, noops), (99, 64 - 16));
    assert_eq!(s.pipeline().occupancy(), vec![64]);
}

#[test]
fn a_refill_goes_on_below_a_level_whose_budget_ran_out() {
    let mut cfg = config(128, 2);
    cfg.max_passes = 4;
    let mut s = Scheduler::new(cfg).unwrap();
    let mut tasks: Vec<Task> = (0..8).map(|i| task(i, 1, 0b100)).collect();
    tasks.extend((10..13).map(|i| task(i, 2, 0)));
    submit(&mut s, 1, &tasks);
    let mut out = Collect::default();
    let host = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 7172);
    s.handle(&Message::RefillReq { node_rsrc: 0b011, req: RefillRequest::new(9, 20) }, host, &mut out).unwrap();
    let got: Vec<u32> = out
        .0
        .iter()
        .flat_map(|o| match o {
            Output::Refill { entries, .. } => entries.iter().map(|e| e.task.tid()).collect::<Vec<_>>(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(got, vec![12, 11, 10], "one batch, newest first");
    assert_eq!(s.pipeline().occupancy(), vec![8, 0]);
}

// ---------- reference model ----------

/// The queue semantics Bolt must implement, written the obvious way.
struct Reference {
    capacity: usize,
    levels: Vec<VecDeque<Entry>>,
    /// SWAP passes a retrieval may spend at each level (`QueueConfig::max_passes`).
    budget: usize,
}

impl Reference {
    fn level(&self, prio: u8) -> usize {
        (prio.clamp(1, self.levels.len() as u8) - 1) as usize
    }

    fn submit(&mut self, entries: &[Entry]) -> Vec<Task> {
        let mut refused = Vec::new();
        for e in entries {
            let l = self.level(e.task.prio);
            if self.levels[l].len() >= self.capacity {
                refused.push(e.task);
            } else {
                self.levels[l].push_back(*e);
            }
        }
        refused
    }

    /// Up to `want` tasks that run on `rsrc`, in priority then FIFO order, the way a
    /// search with a per-level budget finds them: at each level it looks at the head and
    /// then at one more task per SWAP pass, and the budget counts the SWAP passes. When
    /// it runs out, the task it looked at last moves to the tail and the search goes on
    /// one level down; the tasks it passed over keep their order.
    fn take(&mut self, from_level: usize, rsrc: u8, want: usize) -> Vec<Entry> {
        let mut got = Vec::new();
        for q in &mut self.levels[from_level..] {
            let mut left = self.budget;
            while got.len() < want {
                let window = q.len().min(left + 1);
                match q.iter().take(window).position(|e| e.task.runs_on(rsrc)) {
                    Some(i) => {
                        got.push(q.remove(i).unwrap());
                        left -= i;
                    }
                    None => {
                        if window > 0 && window < q.len() {
                            let held = q.remove(window - 1).unwrap();
                            q.push_back(held);
                        }
                        break;
                    }
                }
            }
        }
        got
    }
}

#[derive(Clone, Debug)]
enum Step {
    Submit(Vec<(u8, u8)>),
    Get { rtrv_prio: u8, rsrc: u8 },
    Refill { rsrc: u8, want: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    let rsrc = prop_oneof![Just(0u8), Just(0b1), Just(0b10), Just(0b11), any::<u8>()];
    prop_oneof![
        3 => prop::collection::vec((1u8..=5, rsrc.clone()), 1..=16).prop_map(Step::Submit),
        4 => (1u8..=4, rsrc.clone()).prop_map(|(rtrv_prio, rsrc)| Step::Get { rtrv_prio, rsrc }),
        1 => (rsrc, 1u8..=40).prop_map(|(rsrc, want)| Step::Refill { rsrc, want }),
    ]
}

proptest! {
    /// Run one packet at a time (recirculations first), Bolt behaves exactly like the
    /// reference: same tasks handed out, in the same order, same tasks refused.
    #[test]
    fn sequential_behaviour_equals_the_reference(
        steps in prop::collection::vec(step(), 1..120),
        capacity in prop_oneof![Just(2u32), Just(4), Just(8), Just(32)],
        start in prop_oneof![Just(0u32), Just(u32::MAX - 20), Just((1u32 << 31) - 20), any::<u32>()],
        max_passes in prop_oneof![Just(QueueConfig::default().max_passes), Just(u16::MAX), 1u16..=6],
    ) {
        let priorities = 4;
        let mut cfg = config(capacity, priorities);
        cfg.initial_pointer = start;
        cfg.max_passes = max_passes;
        let mut bolt = Scheduler::new(cfg).unwrap();
        let mut reference =
            Reference { capacity: capacity as usize, levels: vec![VecDeque::new(); 4], budget: max_passes as usize };
        let mut tid = 0u32;
        let host = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9);
        for st in steps {
            let mut out = Collect::default();
            match st {
                Step::Submit(spec) => {
                    let tasks: Vec<Task> = spec.iter().map(|&(p, r)| { tid += 1; task(tid, p, r) }).collect();
                    let entries: Vec<Entry> = tasks.iter()
                        .map(|t| Entry::new(1, 1, *t, CLIENT.ip().octets(), CLIENT.port())).collect();
                    let refused = reference.submit(&entries);
                    bolt.handle(&Message::Submit { job: JobRef::new(1, 1), flags: 0, tasks: &tasks }, CLIENT, &mut out).unwrap();
                    let expect: Vec<Output> = refused.into_iter()
                        .map(|t| Output::QueueFull { to: CLIENT, job: JobRef::new(1, 1), tasks: vec![t] })
                        .collect();
                    prop_assert_eq!(out.0, expect);
                }
                Step::Get { rtrv_prio, rsrc } => {
                    let who = Requester::new(1, 1, 1);
                    bolt.handle(&Message::GetTask { rtrv_prio, exec_rsrc: rsrc, from: who, wait: false }, EXECUTOR, &mut out).unwrap();
                    let expect = match reference.take((rtrv_prio.min(priorities) - 1) as usize, rsrc, 1).pop() {
                        Some(entry) => Output::Assign { to: EXECUTOR, entry },
                        None => Output::Noop { to: EXECUTOR, who },
                    };
                    prop_assert_eq!(out.0, vec![expect]);
                }
                Step::Refill { rsrc, want } => {
                    bolt.handle(&Message::RefillReq { node_rsrc: rsrc, req: RefillRequest::new(3, want) }, host, &mut out).unwrap();
                    let expect = reference.take(0, rsrc, want as usize);
                    // Each batch newest first: reversed batch by batch, the dequeue order.
                    let got: Vec<Entry> = out.0.iter().flat_map(|o| match o {
                        Output::Refill { entries, .. } => entries.iter().rev().copied().collect::<Vec<_>>(),
                        other => panic!("{other:?}"),
                    }).collect();
                    prop_assert_eq!(&got, &expect);
                    // The answer ends with a short batch unless exactly `want` tasks came.
                    let sizes: Vec<usize> = out.0.iter().map(|o| match o { Output::Refill { entries, .. } => entries.len(), _ => 0 }).collect();
                    prop_assert!(sizes[..sizes.len() - 1].iter().all(|&n| n == MAX_LIST), "only the last batch is short: {:?}", sizes);
                    prop_assert!(sizes[sizes.len() - 1] < MAX_LIST || expect.len() == want as usize, "answer not terminated: {:?}", sizes);
                }
            }
            let occupancy: Vec<u32> = reference.levels.iter().map(|q| q.len() as u32).collect();
            prop_assert_eq!(bolt.pipeline().occupancy(), occupancy);
            let mut backlog = ResourceBacklog::default();
            reference.levels.iter().flatten().for_each(|e| backlog.add(e.task.rsrc));
            prop_assert_eq!(bolt.pipeline().backlog(), &backlog, "queued per resource bit");
            prop_assert!(!bolt.pipeline().repairing());
            prop_assert_eq!(bolt.pipeline().lists_in_use(), 0);
        }
        prop_assert_eq!(bolt.stats().slot_occupied, 0);
    }

    /// Passes of many packets interleaved in any order, as in a real pipeline: every task
    /// ends exactly once, handed out or refused, and none is lost or duplicated.
    #[test]
    fn interleaved_passes_conserve_every_task(
        ops in prop::collection::vec(step(), 1..60),
        schedule in prop::collection::vec(any::<u16>(), 0..600),
        capacity in prop_oneof![Just(2u32), Just(4), Just(8)],
    ) {
        let mut cfg = config(capacity, 3);
        cfg.max_passes = 64;
        let mut pipe = Pipeline::new(cfg).unwrap();
        let mut inflight: Vec<Packet> = Vec::new();
        let mut pending = ops.into_iter();
        let mut out = Collect::default();
        let mut tid = 0u32;
        let mut submitted = 0u32;
        // Interleave: each schedule word either admits a new packet or runs a pass of an
        // in-flight one chosen by the word.
        for w in schedule {
            if inflight.is_empty() || w % 3 == 0 {
                if let Some(st) = pending.next() {
                    inflight.push(admit(&mut pipe, st, &mut tid, &mut submitted));
                    continue;
                }
            }
            if inflight.is_empty() { break; }
            let i = w as usize % inflight.len();
            let pkt = inflight.swap_remove(i);
            let PassOutput { recirculate, spawn } = pipe.pass(pkt, &mut out);
            inflight.extend(recirculate);
            inflight.extend(spawn);
        }
        // Then everything left, to completion (bounded: every chain has a pass budget).
        for st in pending { inflight.push(admit(&mut pipe, st, &mut tid, &mut submitted)); }
        let mut passes = 0;
        while let Some(pkt) = inflight.pop() {
            passes += 1;
            prop_assert!(passes < 1_000_000, "runaway recirculation");
            let PassOutput { recirculate, spawn } = pipe.pass(pkt, &mut out);
            inflight.extend(recirculate);
            inflight.extend(spawn);
        }
        prop_assert!(!pipe.repairing(), "a REPAIR flag stayed set with no packet in flight");
        // Drain: executors that can run anything poll until every level is empty. Entries
        // stranded behind retrieve_ptr by a race are found when it laps the ring.
        let mut polls = 0;
        while pipe.occupancy().iter().any(|&n| n > 0) {
            polls += 1;
            prop_assert!(polls < 64 * capacity, "queued tasks unreachable: {:?}", pipe.occupancy());
            let msg = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0xff, from: Requester::new(9, 9, 9), wait: false };
            let mut pkt = Some(pipe.admit(&msg, EXECUTOR).unwrap());
            let mut chain = VecDeque::new();
            while let Some(p) = pkt.take().or_else(|| chain.pop_front()) {
                let PassOutput { recirculate, spawn } = pipe.pass(p, &mut out);
                chain.extend(recirculate);
                chain.extend(spawn);
            }
        }
        // Account for every task exactly once.
        let mut seen: HashMap<u32, &'static str> = HashMap::new();
        let mut record = |tid: u32, how: &'static str| -> Result<(), TestCaseError> {
            if let Some(before) = seen.insert(tid, how) {
                return Err(TestCaseError::fail(format!("task {tid} {how} after {before}")));
            }
            Ok(())
        };
        for o in &out.0 {
            match o {
                Output::Assign { entry, .. } => record(entry.task.tid(), "assigned")?,
                Output::Bundle { entries, .. } => for e in entries { record(e.task.tid(), "bundled")? },
                Output::Refill { entries, .. } => for e in entries { record(e.task.tid(), "refilled")? },
                Output::QueueFull { tasks, .. } => for t in tasks { record(t.tid(), "refused")? },
                Output::Noop { .. } => {}
            }
        }
        prop_assert_eq!(seen.len() as u32, submitted);
        prop_assert_eq!(pipe.lists_in_use(), 0, "a packet buffer leaked");
        prop_assert_eq!(pipe.backlog(), &ResourceBacklog::default(), "queued per resource bit after the drain");
    }
}

/// Turns a generated step into the packet a client, executor or host would send.
fn admit(pipe: &mut Pipeline, st: Step, tid: &mut u32, submitted: &mut u32) -> Packet {
    let host = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9);
    let tasks: Vec<Task>;
    let (msg, src) = match st {
        Step::Submit(spec) => {
            tasks = spec
                .iter()
                .map(|&(p, r)| {
                    *tid += 1;
                    task(*tid, p, r)
                })
                .collect();
            *submitted += tasks.len() as u32;
            (Message::Submit { job: JobRef::new(1, 1), flags: 0, tasks: &tasks }, CLIENT)
        }
        Step::Get { rtrv_prio, rsrc } => {
            (Message::GetTask { rtrv_prio, exec_rsrc: rsrc, from: Requester::new(1, 1, 1), wait: false }, EXECUTOR)
        }
        Step::Refill { rsrc, want } => (Message::RefillReq { node_rsrc: rsrc, req: RefillRequest::new(1, want) }, host),
    };
    pipe.admit(&msg, src).unwrap()
}

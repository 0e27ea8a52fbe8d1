use std::net::SocketAddrV4;

use std::time::Instant;

use scheduler_common::Requester;

use super::executors::Endpoint;
use super::tofino::{Request, SwitchThread, Tofino, TofinoParams};
use super::*;
use crate::switch::Answer;

fn small(system: System) -> SimConfig {
    let mut cfg = SimConfig::scale(system, 200, 0.9, 0.2, 7);
    cfg.drain_s = 0.05;
    cfg
}

/// The parts of a report that do not depend on the machine.
fn outcome(r: &Report) -> (Option<f64>, Option<f64>, u64, u64, u64, String) {
    let sw = r.switch.as_ref().map_or(String::new(), |s| format!("{:?}", (s.passes_per_task, s.packets_in_per_task)));
    (r.p50_us, r.p99_us, r.tasks_started, r.tasks_run, r.events, sw)
}

#[test]
fn the_same_seed_gives_the_same_result() {
    for system in System::ALL {
        let a = run(&small(system), None).unwrap();
        let b = run(&small(system), None).unwrap();
        assert_eq!(outcome(&a), outcome(&b), "{}", system.name());
        assert!(a.tasks_started > 0, "{} ran nothing", system.name());
        let mut other = small(system);
        other.seed = 8;
        if let WorkloadSpec::Trace { params, .. } = &mut other.workload {
            params.seed = 8;
        }
        assert_ne!(outcome(&run(&other, None).unwrap()), outcome(&a), "{}: the seed matters", system.name());
    }
}

fn get_task(exec: u32) -> (Request, SocketAddrV4) {
    (Request::GetTask { from: Requester::new(0, exec as u16, 0), wait: false }, Endpoint::Executor(exec).addr())
}

fn noop_times(out: &[(u64, Answer)]) -> Vec<u64> {
    out.iter().map(|(at, a)| if matches!(a, Answer::Noop { .. }) { *at } else { 0 }).collect()
}

#[test]
fn the_pipeline_rate_binds_when_offered_more() {
    let params = TofinoParams {
        passes_per_sec: 1e6,
        pass_ns: 300,
        ingress_packets: 100_000,
        queue_capacity: 1024,
        priorities: 1,
        ..TofinoParams::thesis()
    };
    let base = Instant::now();
    let mut t = Tofino::new(params.clone(), base, 1).unwrap();
    // 10,000 GET_TASKs without WAIT at once to an empty queue: one pass each, a NOOP each.
    for e in 0..10_000 {
        let (req, src) = get_task(e);
        assert!(t.arrive(0, req, src));
    }
    let mut out = Vec::new();
    let next = t.run_until(5_000_000, &mut out);
    // Passes start every microsecond: at 0, 1 µs, ..., 5 ms.
    assert_eq!(t.stats().passes, 5_001);
    assert_eq!(out.len(), 5_001);
    assert_eq!(next, Some(5_001_000));
    let times = noop_times(&out);
    assert_eq!(times[0], 300);
    assert!(times.windows(2).all(|w| w[1] - w[0] == 1_000));
    // Offered less than the rate, every packet is served when it arrives.
    let mut t = Tofino::new(params.clone(), base, 1).unwrap();
    let mut out = Vec::new();
    for e in 0..100u32 {
        let (req, src) = get_task(e);
        let at = e as u64 * 2_000;
        t.arrive(at, req, src);
        t.run_until(at, &mut out);
    }
    assert_eq!(t.stats().passes, 100);
    assert!(noop_times(&out).iter().enumerate().all(|(i, at)| *at == i as u64 * 2_000 + 300));
    // A full ingress buffer drops.
    let mut t = Tofino::new(TofinoParams { ingress_packets: 10, ..params }, base, 1).unwrap();
    for e in 0..20 {
        let (req, src) = get_task(e);
        t.arrive(0, req, src);
    }
    assert_eq!(t.stats().dropped, 10);
}

/// A software switch of `thread` at simulated time 0.
fn software_switch(thread: SwitchThread) -> Tofino {
    Tofino::new(TofinoParams { thread: Some(thread), ..TofinoParams::software_switch() }, Instant::now(), 1).unwrap()
}

/// GET_TASKs with WAIT from executors 0 to `n` - 1, arriving at 0.
fn get_tasks_waiting(t: &mut Tofino, n: u32) {
    for e in 0..n {
        let src = Endpoint::Executor(e).addr();
        assert!(t.arrive(0, Request::GetTask { from: Requester::new(0, e as u16, 0), wait: true }, src));
    }
}

/// A SUBMIT of job 1 with `n` priority-1 tasks.
fn submit_of(n: u32) -> Request {
    let tasks = (0..n).map(|k| {
        let mut task = scheduler_common::Task { prio: 1, ..Default::default() };
        task.set_tid(k);
        task
    });
    Request::Submit { job: scheduler_common::JobRef::new(1, 1), tasks: tasks.collect() }
}

/// A software switch's thread (`TofinoParams::thread`): four executors' GET_TASKs with
/// WAIT are parked, then a SUBMIT of four tasks is handled and its four ASSIGNs are sent
/// one after another, each taking a send time drawn for it (from a flush's measured time
/// per datagram), and the thread is busy until the last has gone.
#[test]
fn a_software_switch_sends_a_messages_answers_in_turn_each_in_its_own_drawn_time() {
    let mut t =
        software_switch(SwitchThread::new(Draw::Fixed(1_000), Draw::Quantiles(vec![(0.0, 2_000), (1.0, 50_000)])));
    let mut out = Vec::new();
    get_tasks_waiting(&mut t, 4);
    // Handled one at a time from 0, 1 µs each, all parked.
    assert_eq!(t.run_until(5_000, &mut out), Some(10_000_000), "next: the park's expiry");
    assert!(out.is_empty(), "parked");
    let at = 10_000;
    assert!(t.arrive(at, submit_of(4), Endpoint::Client(0).addr()));
    t.run_until(at, &mut out);
    let times: Vec<u64> = out.iter().filter(|(_, a)| matches!(a, Answer::Assign { .. })).map(|&(at, _)| at).collect();
    assert_eq!(times.len(), 4, "{out:?}");
    let mut sends = vec![times[0] - (at + 1_000)];
    sends.extend(times.windows(2).map(|w| w[1] - w[0]));
    assert!(sends.iter().all(|s| (2_000..=50_000).contains(s)), "{sends:?}");
    assert!(sends.windows(2).any(|w| w[0] != w[1]), "each datagram's own draw: {sends:?}");
    assert!(!t.idle(times[3] - 1) && t.idle(times[3]), "busy until the last ASSIGN has gone");
}

/// Messages that queue while a software switch's thread is busy wait for its way back to
/// its socket (the drawn resumption), once per receive batch: four GET_TASKs at 0, a
/// batch of two, 1 µs each, 7 µs back. The first batch runs 0 to 2 µs, the second from
/// 9 to 11 µs.
#[test]
fn messages_queued_behind_a_batch_wait_for_the_thread_to_come_back_once_per_batch() {
    let mut thread = SwitchThread::new(Draw::Fixed(1_000), Draw::Fixed(500));
    thread.resume = Some(Draw::Fixed(7_000));
    thread.batch = 2;
    let mut t = software_switch(thread);
    let mut out = Vec::new();
    get_tasks_waiting(&mut t, 4);
    assert_eq!(t.run_until(8_999, &mut out), Some(9_000), "the second batch, after the thread is back");
    assert!(!t.idle(8_999));
    assert_eq!(t.run_until(9_000, &mut out), Some(10_000), "its second message, with no wait of its own");
    assert_eq!(t.run_until(10_000, &mut out), Some(10_000_000), "next: the first park's expiry");
    assert!(out.is_empty(), "all four parked");
    assert!(!t.idle(10_999) && t.idle(11_000), "busy until the second batch is done");
    assert_eq!(t.stats().arrived, 4);
}

/// Each op's handling is drawn from its own measurement where there is one: two
/// GET_TASKs park in 1 µs each, then a SUBMIT of two tasks takes 5 µs, and its ASSIGNs
/// leave 0.5 µs apart after it.
#[test]
fn a_software_switch_draws_each_ops_own_handling() {
    let mut thread = SwitchThread::new(Draw::Fixed(1_000), Draw::Fixed(500));
    thread.handle_by_op = vec![("SUBMIT", Draw::Fixed(5_000))];
    let mut t = software_switch(thread);
    let mut out = Vec::new();
    get_tasks_waiting(&mut t, 2);
    t.run_until(1_500, &mut out);
    assert!(t.idle(2_000) && !t.idle(1_999), "two GET_TASKs of 1 µs each");
    assert!(t.arrive(10_000, submit_of(2), Endpoint::Client(0).addr()));
    t.run_until(10_000, &mut out);
    let times: Vec<u64> = out.iter().filter(|(_, a)| matches!(a, Answer::Assign { .. })).map(|&(at, _)| at).collect();
    assert_eq!(times, [15_500, 16_000]);
}

#[test]
fn the_whole_one_level_run_stays_within_the_pipeline_rate() {
    let mut cfg = small(System::OneLevel);
    // 36,000 tasks/s, each at least a SUBMIT pass and a GET_TASK pass: more than 50 K/s.
    cfg.tofino.passes_per_sec = 5e4;
    let r = run(&cfg, None).unwrap();
    let sw = r.switch.unwrap();
    // A message's passes are counted when it starts: the last may end past the window
    // (by at most a few of the window's 7,000 pass slots).
    assert!(sw.utilisation <= 1.002, "{}", sw.utilisation);
    assert!(sw.utilisation > 0.98, "offered more than 50 K passes/s, it is the bound: {}", sw.utilisation);
    assert!(r.p50_us.is_none(), "the pipeline cannot keep up, so most measured tasks never start");
}

/// The scenario below: two executors on one host, one-level, a 1-µs stack, 100-ns passes
/// at 1 G passes/s, no run overhead, a wait for a CPU of the given mean, and tier 2's
/// thread's wait when a message finds it idle.
fn hand_scenario(cpu_wait_mean_ns: super::clock::Nanos, switch_wait_ns: super::clock::Nanos) -> Report {
    hand_scenario_stalled(cpu_wait_mean_ns, switch_wait_ns, &[])
}

/// [`hand_scenario`] on a machine that stops in the `stalls` windows.
fn hand_scenario_stalled(
    cpu_wait_mean_ns: super::clock::Nanos,
    switch_wait_ns: super::clock::Nanos,
    stalls: &[(super::clock::Nanos, super::clock::Nanos)],
) -> Report {
    run(&hand_config(cpu_wait_mean_ns, switch_wait_ns, stalls), None).unwrap()
}

/// The configuration of [`hand_scenario_stalled`].
fn hand_config(
    cpu_wait_mean_ns: super::clock::Nanos,
    switch_wait_ns: super::clock::Nanos,
    stalls: &[(super::clock::Nanos, super::clock::Nanos)],
) -> SimConfig {
    let w = WorkloadSpec::Sw1 { utilization: 1.0, seconds: 0.01, client_offset_ns: 0 };
    let mut cfg = SimConfig::testbed(System::OneLevel, w, 2, 1, 1);
    cfg.net =
        NetParams { stack_ns: 1_000, local_ns: 0, link_ns: 0, leaf_ns: 0, spine_ns: 0, gbps: 1e9, hosts_per_rack: 1 };
    cfg.tofino = TofinoParams { passes_per_sec: 1e9, pass_ns: 100, ..TofinoParams::thesis() };
    cfg.exec.run_overhead = Draw::Fixed(0);
    cfg.exec.cpu_wait = Draw::Exponential(cpu_wait_mean_ns);
    cfg.switch_cpu_wait = Draw::Fixed(switch_wait_ns);
    // The clients send on time.
    cfg.client_late = Draw::Fixed(0);
    cfg.drain_s = 0.001;
    cfg.stalls = stalls.to_vec();
    cfg
}

/// Two executors on one host, two clients each submitting one 10-ms task at t = 0,
/// one-level, four priority levels; every host↔switch trip costs exactly 1 µs, a pass
/// 100 ns, passes 1 ns apart. At t = 0 client 0 sends its SUBMIT, both executors their
/// GET_TASK (with WAIT), then client 1 (its job is scheduled after them) its SUBMIT; all
/// arrive at 1000 in that order. 1000: task A is enqueued (one pass). 1001: executor
/// 0's GET_TASK takes A (one pass): its ASSIGN leaves at 1101 and arrives at 2101,
/// delay 2101 ns. 1002: executor 1's GET_TASK searches levels 1 to 4 (four passes) and
/// is parked; its empty search of level 1 moved that level's retrieve pointer one past
/// the add pointer. 1006: task B is enqueued (one pass), which finds the retrieve
/// pointer ahead and spawns a REPAIR (one pass), then the parked GET_TASK runs again and
/// takes B (one pass): the ASSIGN leaves 3 × 100 ns later, at 1306, and arrives at 2306:
/// delay 2306 ns. 9 passes so far; when the tasks end at about 10 ms both executors ask
/// again, find nothing in four passes each and are parked until the run ends: 17 passes,
/// 3 requests parked, 1 answered from the park table.
#[test]
fn a_small_scenario_has_the_delays_computed_by_hand() {
    let r = hand_scenario(0, 0);
    assert_eq!((r.tasks_measured, r.tasks_started), (2, 2));
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    // The histogram keeps 3 significant digits.
    assert!((p50 - 2.101).abs() < 0.003, "p50 {p50} µs");
    assert!((p99 - 2.306).abs() < 0.003, "p99 {p99} µs");
    let sw = r.switch.unwrap();
    assert_eq!((sw.dropped, sw.parked, sw.answered_from_park, sw.counters.passes), (0, 3, 1, 17));
}

/// The testbed's wait for a CPU moves a task's start, and its end with it (the thread
/// sleeps the task's length once it runs): in the scenario above with a 1-ms mean wait
/// both delays grow by their waits (their part before the executor's thread does not), and the tasks end past the run's end (11 ms), so the
/// executors never ask again: the 9 passes up to the second ASSIGN, not 17.
#[test]
fn a_wait_for_a_cpu_moves_the_start_and_the_end() {
    let r = hand_scenario(1_000_000, 0);
    assert_eq!((r.tasks_measured, r.tasks_started), (2, 2));
    // The two waits drawn with this seed: about 1.18 and 3.66 ms (2.1 and 2.3 µs without).
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    assert!(p50 > 1_000.0 && p99 > 3_000.0 && p99 < 10_000.0, "{p50} {p99}");
    // The part before the executor's thread is the delay computed by hand.
    let (b50, b99) = (r.p50_before_arrival_us.unwrap(), r.p99_before_arrival_us.unwrap());
    assert!((b50 - 2.101).abs() < 0.003 && (b99 - 2.306).abs() < 0.003, "{b50} {b99}");
    assert_eq!(r.switch.unwrap().counters.passes, 9);
}

/// Tier 2's thread waits when a message finds it idle, and the messages behind wait in
/// the ingress: in the scenario above with a 5-µs wait, the four messages arriving at
/// 1000 start from 6000, so both delays grow by exactly 5 µs and the passes stay 17.
#[test]
fn a_wait_of_tier_2s_thread_delays_what_finds_it_idle_and_what_queues_behind() {
    let r = hand_scenario(0, 5_000);
    assert_eq!((r.tasks_measured, r.tasks_started), (2, 2));
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    assert!((p50 - 7.101).abs() < 0.01, "p50 {p50} µs");
    assert!((p99 - 7.306).abs() < 0.01, "p99 {p99} µs");
    assert_eq!(r.switch.unwrap().counters.passes, 17);
}

/// A software switch's thread as measured (`TofinoParams::thread`) instead of a
/// pipeline: in the scenario above with every message handled in 2 µs and every answer
/// sent in 0.5 µs, the four messages arriving at 1,000 are handled one after another.
/// SUBMIT A: 1,000 to 3,000, no answer. Executor 0's GET_TASK: 3,000 to 5,000, its
/// ASSIGN sent by 5,500, when it is in the executor's socket (a measured send holds the
/// delivery): delay 5.5 µs. Executor 1's GET_TASK: 5,500 to 7,500, parked. SUBMIT B:
/// 7,500 to 9,500, the parked GET_TASK takes B, its ASSIGN sent by 10,000: delay 10 µs.
/// (The few ns beyond are the client's frames on the wire.)
#[test]
fn a_software_switch_thread_handles_a_message_at_a_time_and_sends_its_answers_in_turn() {
    let mut cfg = hand_config(0, 0, &[]);
    cfg.tofino.thread = Some(SwitchThread::new(Draw::Fixed(2_000), Draw::Fixed(500)));
    let r = run(&cfg, None).unwrap();
    assert_eq!((r.tasks_measured, r.tasks_started), (2, 2));
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    assert!((p50 - 5.5).abs() < 0.01 && (p99 - 10.0).abs() < 0.01, "{p50} {p99}");
}

/// A stall of the machine (`SimConfig::stalls`, as measured on the testbed). In the
/// scenario above, stopped from 1,500 to 5,000 ns: the ASSIGNs arriving at 2,101 and
/// 2,306 are taken when it runs again, so both tasks start at 5,000, and then all goes
/// as before (17 passes). Stopped from 0 to 500 instead: the clients send their jobs at
/// 500, and delays count from the send, as the testbed's client records it; the
/// executors ask at 500 too, so the delays are those computed by hand.
#[test]
fn a_stall_holds_what_falls_in_it_until_its_end() {
    let r = hand_scenario_stalled(0, 0, &[(1_500, 5_000)]);
    assert_eq!((r.tasks_measured, r.tasks_started), (2, 2));
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    assert!((p50 - 5.0).abs() < 0.01 && (p99 - 5.0).abs() < 0.01, "{p50} {p99}");
    assert_eq!(r.switch.unwrap().counters.passes, 17);
    let r = hand_scenario_stalled(0, 0, &[(0, 500)]);
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    assert!((p50 - 2.101).abs() < 0.003 && (p99 - 2.306).abs() < 0.003, "{p50} {p99}");
}

/// Two-level Bolt on one host of `executors`, the scripted `jobs` (ms, prio, tasks of
/// ms each), a 1-µs stack each way, a fast pipeline, no CPU wait, every start recorded;
/// an executor whose GET_TASK misses goes on to tier 2 and waits there.
fn two_level_scenario(executors: u32, watermark: u32, jobs: &[(u64, u8, u32, u32)], seconds: f64) -> Report {
    two_level_scenario_waiting(executors, watermark, jobs, seconds, 0)
}

/// [`two_level_scenario`], with executors that miss waiting at their host for up to
/// `host_wait_ns` (0: at tier 2).
fn two_level_scenario_waiting(
    executors: u32,
    watermark: u32,
    jobs: &[(u64, u8, u32, u32)],
    seconds: f64,
    host_wait_ns: super::clock::Nanos,
) -> Report {
    let mut cfg = two_level_config(executors, watermark, jobs, seconds);
    cfg.host_wait_ns = host_wait_ns;
    run(&cfg, None).unwrap()
}

/// The configuration of [`two_level_scenario`].
fn two_level_config(executors: u32, watermark: u32, jobs: &[(u64, u8, u32, u32)], seconds: f64) -> SimConfig {
    let jobs = jobs
        .iter()
        .map(|&(at_ms, prio, tasks, ms)| ScriptedJob {
            at: at_ms * 1_000_000,
            client: 0,
            prio,
            durations_us: vec![ms * 1000; tasks as usize],
        })
        .collect();
    let w = WorkloadSpec::Scripted { jobs, seconds };
    let mut cfg = SimConfig::testbed(System::TwoLevel, w, executors, 1, 1);
    cfg.net =
        NetParams { stack_ns: 1_000, local_ns: 0, link_ns: 0, leaf_ns: 0, spine_ns: 0, gbps: 1e9, hosts_per_rack: 1 };
    cfg.tofino = TofinoParams { passes_per_sec: 1e9, pass_ns: 100, ..TofinoParams::thesis() };
    cfg.exec.run_overhead = Draw::Fixed(0);
    cfg.exec.cpu_wait = Draw::Fixed(0);
    cfg.client_late = Draw::Fixed(0);
    cfg.refill.low_watermark = watermark;
    cfg.refill.min_depth = watermark;
    cfg.refill.batch = watermark as u8;
    cfg.drain_s = 2.0;
    cfg.record_starts = true;
    cfg.host_wait_ns = 0;
    cfg
}

/// A client sends each job late by its timer's draw, in order, and its tasks' delays
/// count from the send, as the testbed's client records them. Eight idle executors, one
/// client whose eight one-task jobs fall due 100 µs apart, each drawn 0 to 2 ms late but
/// sent no earlier than the job before: the tasks start in the jobs' order, some well
/// after their due time, and every delay is only the few µs from the send to the
/// ASSIGN's arrival.
#[test]
fn a_late_client_sends_in_order_and_the_delays_count_from_its_sends() {
    let jobs = (0..8u64)
        .map(|k| ScriptedJob { at: 1_000_000 + k * 100_000, client: 0, prio: 1, durations_us: vec![1_000] })
        .collect();
    let w = WorkloadSpec::Scripted { jobs, seconds: 0.01 };
    let mut cfg = SimConfig::testbed(System::OneLevel, w, 8, 1, 1);
    cfg.net =
        NetParams { stack_ns: 1_000, local_ns: 0, link_ns: 0, leaf_ns: 0, spine_ns: 0, gbps: 1e9, hosts_per_rack: 1 };
    cfg.tofino = TofinoParams { passes_per_sec: 1e9, pass_ns: 100, ..TofinoParams::thesis() };
    cfg.exec.run_overhead = Draw::Fixed(0);
    cfg.exec.cpu_wait = Draw::Fixed(0);
    cfg.client_late = Draw::Quantiles(vec![(0.0, 0), (1.0, 2_000_000)]);
    cfg.record_starts = true;
    let r = run(&cfg, None).unwrap();
    assert_eq!((r.tasks_measured, r.tasks_started), (8, 8));
    let starts: Vec<u64> = start_of(&r).into_values().collect();
    // Jobs the order holds back go together: the pipeline's passes may swap their
    // tasks' starts by a few hundred ns, never by a send's lateness.
    assert!(starts.windows(2).all(|w| w[0] <= w[1] + 1_000), "started out of the jobs' order: {starts:?}");
    let latest = starts.iter().enumerate().map(|(k, &s)| s - (1_000_000 + k as u64 * 100_000)).max().unwrap();
    assert!(latest > 500_000, "no job was sent late: {starts:?}");
    let p99 = r.p99_us.unwrap();
    assert!(p99 < 10.0, "a delay counted from the due time: p99 {p99} µs");
}

/// When each task started, by task.
fn start_of(r: &Report) -> std::collections::BTreeMap<u32, u64> {
    let starts: std::collections::BTreeMap<u32, u64> = r.starts.iter().map(|&(tid, _, at)| (tid, at)).collect();
    assert_eq!(starts.len(), r.starts.len(), "a task started twice");
    starts
}

/// The bypass rule. Two executors; at 0 a job of six 10-ms tasks at priority 4: two run
/// at once (the executors wait at tier 2), the host's REFILL takes the other four (tasks
/// 0 to 3) into its level-4 ring. At 10 ms one priority-1 task (6) reaches tier 2: level 1
/// turns non-empty and the host, registered by its REFILL_REQs, gets a HINT with BEST 1
/// (the agent leaves a level named for less than `HELD_BACK_AFTER` to the bypass rule).
/// A few µs later executor 0 frees first; BEST 1 outranks the rings' level 4, so its GET_TASK
/// passes on to tier 2 (without WAIT) and gets task 6 a round trip later. Executor 1,
/// 4 ns behind it, bypasses too (its BEST is still 1) and gets the NOOP with BEST 0,
/// then takes ring task 0 after its 50-µs back-off. Without the rule task 6 would wait
/// behind the four ring tasks, until 30 ms.
#[test]
fn a_get_task_bypasses_the_rings_when_tier_2_holds_higher_priority_work() {
    let r = two_level_scenario(2, 4, &[(0, 4, 6, 10), (10, 1, 1, 10)], 0.1);
    let starts = start_of(&r);
    assert_eq!(starts.len(), 7, "every task ran once: {:?}", r.starts);
    let urgent = starts[&6];
    // 10 ms + the task's own start, + GET_TASK and ASSIGN across two 1-µs stacks each.
    assert!((10_004_000..10_005_000).contains(&urgent), "task 6 started at {urgent} ns");
    assert!((0..4).all(|t| starts[&t] > urgent), "ring tasks before the priority-1 task: {:?}", r.starts);
    let tier1 = r.tier1.unwrap();
    assert_eq!(tier1.bypasses, 2, "executor 0's took task 6, executor 1's got the NOOP");
    assert_eq!(tier1.hint_returned, 0, "one bypass each: no reaction");
    assert_eq!(r.switch.unwrap().counters.hints, 1);
}

/// The hint reaction. Two executors; at 0 ten 10-ms tasks at priority 4: two run, eight
/// (0 to 7) fill the rings to the watermark and the level-4 ring to its capacity, so
/// no REFILL fits. At 5 ms twenty 1-ms tasks at priority 1 reach tier 2 (HINT, BEST 1).
/// From 10 ms every GET_TASK bypasses the level-4 ring and gets a priority-1 task from
/// tier 2, whose ASSIGN carries BEST 1 again. Once bypasses have gone on for
/// `DEFAULT_PERSIST` (5 ms) with the rings holding lower-priority tasks, the agent
/// RETURNs those eight to tier 2 (one RETURN), its rings empty, and its next REFILLs
/// bring the remaining priority-1 tasks: every priority-1 task starts before any of the
/// eight, which run last, from 20 ms.
#[test]
fn persistent_bypasses_return_the_lower_priority_prefetch_to_tier_2() {
    let mut cfg = two_level_config(2, 8, &[(0, 4, 10, 10), (5, 1, 20, 1)], 0.1);
    cfg.ring_capacity = 8;
    let r = run(&cfg, None).unwrap();
    let starts = start_of(&r);
    assert_eq!(starts.len(), 30, "every task ran once");
    let tier1 = r.tier1.unwrap();
    assert_eq!(tier1.hint_returned, 8);
    assert_eq!(tier1.lease_returned, 0);
    assert!(tier1.bypasses >= 10, "bypasses went on: {}", tier1.bypasses);
    assert_eq!(r.switch.unwrap().counters.returns, 1);
    let last_urgent = (10..30).map(|t| starts[&t]).max().unwrap();
    let first_returned = (0..8).map(|t| starts[&t]).min().unwrap();
    assert!(last_urgent < first_returned, "{:?}", r.starts);
    // The reaction came after 5 ms of bypasses from 10 ms, not before.
    assert!(
        (15_000_000..16_000_000).contains(&(10..30).map(|t| starts[&t]).filter(|&at| at > 14_500_000).min().unwrap())
    );
}

/// A backlog at a higher level comes to the rings. As above, with room in the rings: at
/// 5 ms the HINT wakes the agent, and 1 ms later (`HELD_BACK_AFTER`) its level-4 ring no
/// longer counts towards the target, so it asks; tier 2 answers with its best level, and
/// from 10 ms the executors take the priority-1 tasks from the rings: no bypass, nothing
/// returned, and still every priority-1 task before the eight level-4 ones.
#[test]
fn a_higher_level_that_stays_at_tier_2_is_refilled_into_the_rings() {
    let r = two_level_scenario(2, 8, &[(0, 4, 10, 10), (5, 1, 20, 1)], 0.1);
    let starts = start_of(&r);
    assert_eq!(starts.len(), 30, "every task ran once");
    let tier1 = r.tier1.unwrap();
    assert_eq!((tier1.bypasses, tier1.hint_returned), (0, 0), "{tier1:?}");
    let counters = r.switch.unwrap().counters;
    assert_eq!(counters.assigns, 2, "only the first two tasks came from tier 2: {counters:?}");
    let last_urgent = (10..30).map(|t| starts[&t]).max().unwrap();
    let first_prefetched = (0..8).map(|t| starts[&t]).min().unwrap();
    assert!(last_urgent < first_prefetched, "{:?}", r.starts);
}

/// Waiting at the host. Two executors ask at 0 and find the rings empty; the host has
/// heard nothing from tier 2 yet, so their GET_TASKs go on to tier 2 and park there, as
/// does the agent's REFILL_REQ. At 10 ms the parks end empty (NOOP, an empty REFILL), and
/// with them comes tier 2's stamp: nothing. From then on a miss waits at the host (the
/// XDP program's parking rule), and the agent's next REFILL_REQ says two wait; tier 2
/// parks it. At 15 ms a job of three 10-ms tasks reaches tier 2, which answers the parked
/// request with one task per waiting executor: both start a stack crossing later (client
/// → switch → host, 2 µs), handed to them at the host. The third task reaches the rings
/// (the agent asks for their target beyond its waiters) and is a ring hit when an
/// executor frees at 25 ms. With a 1-ms
/// host wait instead, the executors' waits end every millisecond with a NOOP and a
/// 50-µs back-off before they ask again; the job still starts at once, since the agent's
/// request stays parked at tier 2 meanwhile.
#[test]
fn an_executor_that_misses_waits_at_its_host_for_the_next_refill() {
    let mut expired = Vec::new();
    for wait_ms in [10, 1] {
        let r = two_level_scenario_waiting(2, 1, &[(15, 1, 3, 10)], 0.1, wait_ms * 1_000_000);
        let starts = start_of(&r);
        assert_eq!(starts.len(), 3, "every task ran once: {:?}", r.starts);
        let mut at: Vec<u64> = starts.values().copied().collect();
        at.sort_unstable();
        assert!(at[..2].iter().all(|t| (15_000_000..15_010_000).contains(t)), "host wait {wait_ms} ms: {at:?}");
        assert!((25_000_000..25_010_000).contains(&at[2]), "host wait {wait_ms} ms: {at:?}");
        let tier1 = r.tier1.unwrap();
        assert_eq!(tier1.waiters_served, 2, "{tier1:?}");
        let counters = r.switch.unwrap().counters;
        // The two first, unstamped, asked tier 2, and so does a miss whose host's stamp
        // went stale while it waited, but every task reached its executor at the host.
        assert!(counters.get_tasks_wait >= 2, "{counters:?}");
        assert_eq!((counters.assigns, counters.get_tasks_no_wait), (0, 0), "{counters:?}");
        expired.push(tier1.waiters_expired);
    }
    // Idle for the rest of the 2.1-s run, each executor's wait ends every host wait (and
    // back-off): about 420 NOOPs with 10 ms, ten times as many with 1 ms.
    assert!((380..=430).contains(&expired[0]), "{expired:?}");
    assert!(expired[1] > 9 * expired[0], "{expired:?}");
}

/// A lease expiring. One executor, watermark 4; at 0 five 400-ms tasks at priority 1:
/// one runs at once, four wait in the ring. The ring's head waits longer than the lease
/// (500 ms) and the agent's lease scan RETURNs what expired to tier 2, where it is
/// refilled or handed to the executor when it asks: the tasks still start one after the
/// other as the executor frees, every 400 ms, each once.
#[test]
fn an_expired_lease_returns_the_task_to_tier_2_and_loses_nothing() {
    let r = two_level_scenario(1, 4, &[(0, 1, 5, 400)], 0.1);
    assert_eq!(start_of(&r).len(), 5, "every task ran once");
    let mut at: Vec<u64> = r.starts.iter().map(|s| s.2).collect();
    at.sort_unstable();
    assert!(at.windows(2).all(|w| (400_000_000..400_010_000).contains(&(w[1] - w[0]))), "{at:?}");
    let tier1 = r.tier1.unwrap();
    assert!(tier1.lease_returned >= 1, "{tier1:?}");
    assert_eq!(tier1.hint_returned, 0);
    assert!(r.switch.unwrap().counters.returns >= 1);
}

#[test]
fn batched_steals_start_every_task_as_unbatched_ones_do_at_1000_executors() {
    let mut unbatched = SimConfig::scale(System::Matrix, 1000, 0.9, 0.2, 2021);
    unbatched.record_starts = true;
    unbatched.batch_steals = false;
    let batched = SimConfig { batch_steals: true, ..unbatched.clone() };
    let one_by_one = run(&unbatched, None).unwrap();
    let together = run(&batched, None).unwrap();
    assert!(one_by_one.steal_attempts > 1000, "thieves probed: {}", one_by_one.steal_attempts);
    assert!(one_by_one.stolen > 0);
    // Every task starts on the same executor at the same nanosecond; the thieves make
    // the same attempts and steal the same tasks with the same messages.
    assert_eq!(together.starts, one_by_one.starts);
    assert_eq!(
        (together.steal_attempts, together.stolen, together.steal_messages),
        (one_by_one.steal_attempts, one_by_one.stolen, one_by_one.steal_messages)
    );
    assert_eq!((together.p50_us, together.p99_us), (one_by_one.p50_us, one_by_one.p99_us));
    // A round's probes to the other racks travel as one event, and their LOADs back as
    // one more: 2 events per round where there were 2 per neighbour (32 at 100 hosts).
    let saved = one_by_one.events - together.events;
    assert!(saved > one_by_one.steal_messages / 2, "{saved} events saved of {} messages", one_by_one.steal_messages);
}

use std::net::SocketAddrV4;

use scheduler_common::{Message, Requester};

use super::executors::Endpoint;
use super::tofino::{Departure, Departures, Tofino, TofinoParams};
use super::*;

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

fn get_task(exec: u32) -> (Message<'static>, SocketAddrV4) {
    let msg = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0xff, from: Requester::new(0, exec as u16, 0), wait: false };
    (msg, Endpoint::Executor(exec).addr())
}

#[test]
fn the_pipeline_rate_binds_when_offered_more() {
    let params = TofinoParams {
        passes_per_sec: 1e6,
        pass_ns: 300,
        ingress_packets: 100_000,
        queue_capacity: 1024,
        priorities: 1,
    };
    let mut t = Tofino::new(params.clone()).unwrap();
    // 10,000 GET_TASKs at once to an empty queue: one pass each, a NOOP each.
    for e in 0..10_000 {
        let (msg, src) = get_task(e);
        assert!(t.arrive(0, &msg, src));
    }
    let mut out = Departures::default();
    let next = t.run_until(5_000_000, &mut out);
    // Passes start every microsecond: at 0, 1 µs, ..., 5 ms.
    assert_eq!(t.stats().passes, 5_001);
    assert_eq!(out.out.len(), 5_001);
    assert_eq!(next, Some(5_001_000));
    let times: Vec<u64> = out.out.iter().map(|d| if let Departure::Noop { at, .. } = d { *at } else { 0 }).collect();
    assert_eq!(times[0], 300);
    assert!(times.windows(2).all(|w| w[1] - w[0] == 1_000));
    // Offered less than the rate, every packet is served when it arrives.
    let mut t = Tofino::new(params.clone()).unwrap();
    let mut out = Departures::default();
    for e in 0..100u32 {
        let (msg, src) = get_task(e);
        let at = e as u64 * 2_000;
        t.arrive(at, &msg, src);
        t.run_until(at, &mut out);
    }
    assert_eq!(t.stats().passes, 100);
    assert!(out
        .out
        .iter()
        .enumerate()
        .all(|(i, d)| matches!(d, Departure::Noop { at, .. } if *at == i as u64 * 2_000 + 300)));
    // A full ingress buffer drops.
    let mut t = Tofino::new(TofinoParams { ingress_packets: 10, ..params }).unwrap();
    for e in 0..20 {
        let (msg, src) = get_task(e);
        t.arrive(0, &msg, src);
    }
    assert_eq!(t.stats().dropped, 10);
}

#[test]
fn the_whole_one_level_run_stays_within_the_pipeline_rate() {
    let mut cfg = small(System::OneLevel);
    // 36,000 tasks/s, each at least a SUBMIT pass and a GET_TASK pass: more than 50 K/s.
    cfg.tofino.passes_per_sec = 5e4;
    let r = run(&cfg, None).unwrap();
    let sw = r.switch.unwrap();
    assert!(sw.utilisation <= 1.0 + 1e-6, "{}", sw.utilisation);
    assert!(sw.utilisation > 0.98, "offered more than 50 K passes/s, it is the bound: {}", sw.utilisation);
    assert!(r.p50_us.is_none(), "the pipeline cannot keep up, so most measured tasks never start");
}

/// Two executors on one host, two clients each submitting one 10-ms task at t = 0,
/// one-level, four priority levels; every host↔switch trip costs exactly 1 µs, a pass
/// 100 ns, passes 1 ns apart. At t = 0 client 0 sends its SUBMIT, both executors their
/// GET_TASK, then client 1 (its job is scheduled after them) its SUBMIT; all arrive at
/// 1000 in that order. Pass 1000 enqueues task A; pass 1001 gives it to executor 0, whose
/// ASSIGN leaves at 1101 and arrives at 2101: delay 2101 ns. Pass 1002: executor 1's
/// GET_TASK finds level 1 empty and recirculates; pass 1003 enqueues task B at level 1;
/// the GET_TASK comes back at 1102 and searches levels 2, 3, 4 (passes 1102, 1202,
/// 1302): NOOP leaves at 1402, arrives at 2402. After the 50-µs back-off executor 1 asks
/// again at 52,402, its GET_TASK takes B at 53,402 and the ASSIGN arrives at 54,502:
/// delay 54,502 ns.
#[test]
fn a_small_scenario_has_the_delays_computed_by_hand() {
    let w = WorkloadSpec::Sw1 { utilization: 1.0, seconds: 0.01 };
    let mut cfg = SimConfig::testbed(System::OneLevel, w, 2, 1, 1);
    cfg.net =
        NetParams { stack_ns: 1_000, local_ns: 0, link_ns: 0, leaf_ns: 0, spine_ns: 0, gbps: 1e9, hosts_per_rack: 1 };
    cfg.tofino = TofinoParams { passes_per_sec: 1e9, pass_ns: 100, ..TofinoParams::thesis() };
    cfg.exec.run_overhead_ns = 0;
    cfg.drain_s = 0.001;
    let r = run(&cfg, None).unwrap();
    assert_eq!((r.tasks_measured, r.tasks_started), (2, 2));
    let (p50, p99) = (r.p50_us.unwrap(), r.p99_us.unwrap());
    // The histogram keeps 3 significant digits.
    assert!((p50 - 2.101).abs() < 0.003, "p50 {p50} µs");
    assert!((p99 - 54.502).abs() < 0.06, "p99 {p99} µs");
    let sw = r.switch.unwrap();
    assert_eq!(sw.dropped, 0);
}

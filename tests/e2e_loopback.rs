//! End to end on loopback: the software switch, executors with different resources and
//! a client, all in this process. Every task must complete exactly once from the
//! client's view, and every task the switch hands out must be run.

use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use scheduler_user::client::{Client, ClientConfig, JobReport, Summary, TaskSpec, TaskState};
use scheduler_user::executor::{self, CounterSnapshot, ExecutorConfig, ExecutorPool};
use scheduler_user::switch::{self, SwitchConfig, SwitchHandle, SwitchStats};

/// Every test gives up after this long instead of hanging.
const DEADLINE: Duration = Duration::from_secs(90);

fn start_switch(queue_capacity: u32) -> SwitchHandle {
    let cfg = SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), queue_capacity, ..SwitchConfig::default() };
    switch::spawn(cfg).expect("switch starts")
}

fn start_executors(switch: &SwitchHandle, node: u16, resources: u8, executors: u16) -> ExecutorPool {
    let mut cfg = ExecutorConfig::new(switch.local_addr(), resources);
    cfg.node = node;
    cfg.executors = executors;
    executor::spawn(cfg).expect("executors start")
}

/// Resource needs the executors below can satisfy: 0b010 only on nodes 2 and 3,
/// 0b100 only on node 3.
const NEEDS: [u8; 5] = [0b000, 0b001, 0b010, 0b011, 0b100];

/// A job of mixed priorities (1..=4), resources and handlers.
fn mixed_job(job: usize, tasks: usize) -> Vec<TaskSpec> {
    (0..tasks)
        .map(|i| {
            let handler = match (i + job) % 20 {
                0 => Handler::Spin { micros: 20 },
                1 => Handler::Sleep { micros: 50 },
                _ => Handler::Noop,
            };
            let priority = 1 + ((i * 7 + job) % 4) as u8;
            TaskSpec::new(handler, priority, NEEDS[(i * 3 + job) % NEEDS.len()]).unwrap()
        })
        .collect()
}

struct Outcome {
    idle: bool,
    summary: Summary,
    reports: Vec<JobReport>,
    done_len: u64,
    done_min: Option<u32>,
    done_max: Option<u32>,
    stale_queue_full: u64,
}

/// Submits the jobs from one client and waits for them.
fn run_client(switch: &SwitchHandle, jobs: &[Vec<TaskSpec>], configure: impl FnOnce(&mut ClientConfig)) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut cfg = ClientConfig::new(switch.local_addr());
        // Generous: the machine is shared; a timeout would only cost a resubmission.
        cfg.tracker.task_timeout = Duration::from_secs(5);
        configure(&mut cfg);
        let mut client = Client::bind(cfg).await.unwrap();
        for job in jobs {
            client.submit(job).await.unwrap();
        }
        let idle = client.wait_idle(Instant::now() + DEADLINE).await.unwrap();
        let reports = client.take_finished();
        let done = client.tracker().states().vector(TaskState::Done);
        Outcome {
            idle,
            summary: client.summary(),
            reports,
            done_len: done.len(),
            done_min: done.min(),
            done_max: done.max(),
            stale_queue_full: client.tracker().stats().stale_queue_full,
        }
    })
}

fn executions(c: &CounterSnapshot) -> u64 {
    c.tasks_ok + c.tasks_failed + c.tasks_refused
}

/// Stops executors first (they run what is still on its way), then the switch.
fn stop(switch: SwitchHandle, pools: Vec<ExecutorPool>) -> (SwitchStats, Vec<CounterSnapshot>) {
    let counters = pools.into_iter().map(ExecutorPool::shutdown).collect();
    (switch.shutdown().expect("switch stops cleanly"), counters)
}

fn assert_exactly_once(out: &Outcome, total: u64, jobs: usize) {
    assert!(out.idle, "not every job finished: {:?}", out.summary);
    let s = &out.summary;
    assert_eq!((s.submitted, s.completed, s.failed, s.unfinished), (total, total, 0, 0), "{s:?}");
    // The Done vector holds each task id exactly once: ids 0..total.
    assert_eq!((out.done_len, out.done_min, out.done_max), (total, Some(0), Some(total as u32 - 1)));
    assert_eq!(out.reports.len(), jobs);
    assert!(out.reports.iter().all(|r| r.done == r.tasks && r.failed == 0), "{:?}", out.reports);
    assert_eq!(out.reports.iter().map(|r| r.tasks as u64).sum::<u64>(), total);
}

#[test]
fn every_task_of_mixed_priorities_and_resources_completes_exactly_once() {
    let switch = start_switch(1 << 12);
    let pools = vec![
        start_executors(&switch, 1, 0b001, 2),
        start_executors(&switch, 2, 0b011, 1),
        start_executors(&switch, 3, 0b111, 1),
    ];
    let jobs: Vec<_> = (0..8).map(|j| mixed_job(j, 500)).collect();
    let out = run_client(&switch, &jobs, |_| {});
    let (switch_stats, counters) = stop(switch, pools);

    assert_exactly_once(&out, 4000, 8);
    // The switch matched resources: no executor got a task it could not run.
    assert!(counters.iter().all(|c| c.tasks_refused == 0 && c.tasks_failed == 0), "{counters:?}");
    // Every executor pool did some of the work.
    assert!(counters.iter().all(|c| c.tasks_ok > 0), "{counters:?}");
    // Every task the switch handed out was run: nothing was lost on the way.
    let ran: u64 = counters.iter().map(executions).sum();
    assert_eq!(switch_stats.queue.assigns, ran);
    // Each completion the client counted (once, or as a duplicate) came from a run.
    assert!(out.summary.completed + out.summary.duplicates <= ran);
    assert_eq!(switch_stats.malformed_total(), 0);
    assert!(out.summary.p50_sched_delay_us > 0.0 && out.summary.throughput_tasks_per_s > 0.0);
    if out.summary.resubmitted == 0 {
        // Submitted once each and all run: the queues are empty again.
        assert_eq!(switch_stats.queue_depth.iter().sum::<u32>(), 0);
        assert_eq!(ran, 4000);
    }
}

#[test]
fn a_queue_smaller_than_the_job_bounces_and_everything_still_completes_once() {
    // 4 priority queues of 16 slots for a job of 2000 tasks sent in one burst.
    let switch = start_switch(16);
    let pools = vec![start_executors(&switch, 1, 0b111, 2)];
    let jobs = vec![mixed_job(0, 2000)];
    let out = run_client(&switch, &jobs, |cfg| {
        cfg.tracker.window = 4096;
        cfg.tracker.max_queue_full_bounces = 100_000;
    });
    let (switch_stats, counters) = stop(switch, pools);

    assert_exactly_once(&out, 2000, 1);
    assert!(out.summary.queue_full_bounces > 0, "{:?}", out.summary);
    assert!(switch_stats.queue.queue_full_tasks > 0);
    // Every bounce the client acted on was one the switch sent.
    assert!(out.summary.queue_full_bounces + out.stale_queue_full <= switch_stats.queue.queue_full_tasks);
    let ran: u64 = counters.iter().map(executions).sum();
    assert_eq!(switch_stats.queue.assigns, ran);
    assert!(ran >= 2000);
}

/// Every task delivered twice: a host agent takes the queued tasks with REFILL_REQ and
/// RETURNs each of them twice, as a duplicated datagram or a retried RETURN would. With
/// exactly-once the client grants one claim per task and the executors drop the second
/// delivery unrun; without it, every task runs twice and the client ignores the second
/// completion. The switch lets a host RETURN only as many tasks as it REFILLed to it, so
/// another client's filler tasks, taken along and dropped, give the fake agent the
/// credit for the second copies.
fn deliver_each_task_twice(exactly_once: bool) -> (Summary, CounterSnapshot) {
    use scheduler_common::{
        decode, encode_refill_req, encode_return, encode_submit, Entry, JobRef, Message, RefillRequest, Task, MAX_LIST,
    };
    const TASKS: usize = 64;
    let switch = start_switch(1024);
    let addr = switch.local_addr();
    // The client keeps answering (claims, completions) until every copy is handed out.
    let handed_out = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client_may_stop = handed_out.clone();
    let client = std::thread::spawn(move || {
        let spec = TaskSpec { exactly_once, ..TaskSpec::new(Handler::Noop, 1, 0).unwrap() };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let mut cfg = ClientConfig::new(addr);
            cfg.tracker.task_timeout = Duration::from_secs(30);
            let mut client = Client::bind(cfg).await.unwrap();
            client.submit(&vec![spec; TASKS]).await.unwrap();
            let idle = client.wait_idle(Instant::now() + DEADLINE).await.unwrap();
            let until = Instant::now() + DEADLINE;
            while !client_may_stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < until {
                client.drive_until(Instant::now() + Duration::from_millis(20)).await.unwrap();
            }
            (idle, client.summary(), client.tracker().stats().clone())
        })
    });
    let mut buf = [0u8; scheduler_common::MAX_MESSAGE_LEN];
    let filler = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let filler_port = filler.local_addr().unwrap().port();
    for jid in 0..(TASKS / MAX_LIST) as u32 {
        let n =
            encode_submit(&mut buf, JobRef::new(99, jid), 0, &[Task { prio: 1, ..Task::default() }; MAX_LIST]).unwrap();
        filler.send_to(&buf[..n], addr).unwrap();
    }
    let deadline = Instant::now() + DEADLINE;
    while switch.stats().queue_depth.iter().sum::<u32>() < 2 * TASKS as u32 {
        assert!(Instant::now() < deadline, "tasks never queued");
        std::thread::sleep(Duration::from_millis(10));
    }
    let agent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    agent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut taken: Vec<Entry> = Vec::new();
    while taken.len() < 2 * TASKS {
        let n = encode_refill_req(&mut buf, 0xff, RefillRequest::new(1, 255)).unwrap();
        agent.send_to(&buf[..n], addr).unwrap();
        loop {
            let n = agent.recv(&mut buf).expect("REFILL arrives");
            let Ok(Message::Refill { entries: es, .. }) = decode(&buf[..n]) else { panic!("not a REFILL") };
            taken.extend_from_slice(es);
            if es.len() < MAX_LIST {
                break;
            }
        }
    }
    taken.retain(|e| e.client_port() != filler_port);
    assert_eq!(taken.len(), TASKS);
    for _ in 0..2 {
        for chunk in taken.chunks(MAX_LIST) {
            let n = encode_return(&mut buf, chunk).unwrap();
            agent.send_to(&buf[..n], addr).unwrap();
        }
    }
    let pool = start_executors(&switch, 1, 0xff, 4);
    while switch.stats().queue.assigns < 2 * TASKS as u64 {
        assert!(Instant::now() < deadline, "not every copy was handed out: {:?}", switch.stats().queue);
        std::thread::sleep(Duration::from_millis(20));
    }
    // Executors finish what they were handed (claim, run, report) in well under this.
    std::thread::sleep(Duration::from_millis(500));
    handed_out.store(true, std::sync::atomic::Ordering::Relaxed);
    let (idle, summary, stats) = client.join().unwrap();
    let (_, counters) = stop(switch, vec![pool]);
    let run = counters.into_iter().next().unwrap();
    println!(
        "exactly-once {exactly_once}: {} done, executors ran {} (claims granted {}, denied {}, unanswered {}), \
         client ignored {} duplicate completions",
        summary.completed,
        run.tasks_run,
        run.claims_granted,
        run.claims_denied,
        run.claims_unanswered,
        summary.duplicates
    );
    assert!(idle, "{summary:?}");
    assert_eq!((summary.submitted, summary.completed, summary.failed), (TASKS as u64, TASKS as u64, 0));
    assert_eq!((stats.claims_granted, stats.claims_denied), (run.claims_granted, run.claims_denied));
    (summary, run)
}

#[test]
fn exactly_once_drops_a_duplicate_delivery_unrun() {
    let (summary, run) = deliver_each_task_twice(true);
    assert_eq!(run.tasks_run, 64, "each task ran once");
    assert_eq!((run.claims_granted, run.claims_denied, run.claims_unanswered), (64, 64, 0));
    assert_eq!(summary.duplicates, 0);
}

#[test]
fn without_exactly_once_a_duplicate_delivery_runs_twice() {
    let (summary, run) = deliver_each_task_twice(false);
    assert_eq!(run.tasks_run, 128);
    assert_eq!((run.claims_granted, run.claims_denied), (0, 0));
    assert_eq!(summary.duplicates, 64);
}

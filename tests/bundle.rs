//! Executors that ask for bundles (`bolt executor --bundle N`, GET_BUNDLE) against the
//! software switch on loopback: every task runs once, nothing is lost or run twice, and
//! exactly-once tasks in a bundle are each claimed once.

use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use scheduler_user::client::{Client, ClientConfig, Summary, TaskSpec, TaskState};
use scheduler_user::executor::{self, CounterSnapshot, ExecutorConfig};
use scheduler_user::switch::{self, SwitchConfig, SwitchStats};

/// Every test gives up after this long instead of hanging.
const DEADLINE: Duration = Duration::from_secs(90);

struct Run {
    idle: bool,
    summary: Summary,
    done: u64,
    switch: SwitchStats,
    executors: CounterSnapshot,
}

/// One job of `tasks` no-op tasks through a switch and `executors` executors asking for
/// `bundle` tasks at a time.
fn run_job(tasks: usize, executors: u16, bundle: u8, exactly_once: bool) -> Run {
    let cfg =
        SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), queue_capacity: 1 << 12, ..SwitchConfig::default() };
    let sw = switch::spawn(cfg).expect("switch starts");
    let mut ecfg = ExecutorConfig::new(sw.local_addr(), 0);
    ecfg.executors = executors;
    ecfg.bundle = bundle;
    let pool = executor::spawn(ecfg).expect("executors start");
    let job: Vec<TaskSpec> = (0..tasks)
        .map(|_| {
            let mut t = TaskSpec::new(Handler::Noop, 1, 0).unwrap();
            t.exactly_once = exactly_once;
            t
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (idle, summary, done) = runtime.block_on(async {
        let mut cfg = ClientConfig::new(sw.local_addr());
        // Generous: the machine is shared; a timeout would only cost a resubmission.
        cfg.tracker.task_timeout = Duration::from_secs(10);
        let mut client = Client::bind(cfg).await.unwrap();
        client.submit(&job).await.unwrap();
        let idle = client.wait_idle(Instant::now() + DEADLINE).await.unwrap();
        let done = client.tracker().states().vector(TaskState::Done).len();
        (idle, client.summary(), done)
    });
    let executors = pool.shutdown();
    let switch = sw.shutdown().expect("switch stops cleanly");
    Run { idle, summary, done, switch, executors }
}

fn executions(c: &CounterSnapshot) -> u64 {
    c.tasks_ok + c.tasks_failed + c.tasks_refused
}

#[test]
fn executors_asking_for_bundles_of_8_run_every_task_once_and_lose_nothing() {
    let r = run_job(2000, 2, 8, false);
    assert!(r.idle, "the job did not finish: {:?}", r.summary);
    let s = &r.summary;
    assert_eq!((s.submitted, s.completed, s.failed, s.unfinished, r.done), (2000, 2000, 0, 0, 2000), "{s:?}");
    // Nothing lost: no task had to be resent; nothing run twice: one run per task, each
    // handed out once by the switch.
    assert_eq!((s.resubmitted, s.duplicates, s.timeouts), (0, 0, 0), "{s:?}");
    assert_eq!(executions(&r.executors), 2000);
    assert_eq!(r.switch.queue.decisions, 2000);
    assert_eq!(r.switch.queue_depth.iter().sum::<u32>(), 0);
    // The tasks came in bundles: fewer ASSIGNs than tasks, none listing more than 8.
    let q = &r.switch.queue;
    assert!(q.bundles > 0 && q.bundled_tasks > q.bundles, "{q:?}");
    assert!(q.bundled_tasks <= 8 * q.bundles);
    assert_eq!(q.cost_of(scheduler_common::Op::GetTask).packets, 0, "every request was a GET_BUNDLE");
}

#[test]
fn exactly_once_tasks_in_bundles_are_each_claimed_once() {
    let r = run_job(600, 2, 8, true);
    assert!(r.idle, "the job did not finish: {:?}", r.summary);
    let s = &r.summary;
    assert_eq!((s.completed, s.failed, s.resubmitted, s.duplicates), (600, 0, 0, 0), "{s:?}");
    let e = &r.executors;
    assert_eq!((e.claims_granted, e.claims_denied, e.claims_unanswered), (600, 0, 0), "{e:?}");
    assert_eq!(executions(e), 600);
    assert!(r.switch.queue.bundled_tasks > r.switch.queue.bundles, "{:?}", r.switch.queue);
}

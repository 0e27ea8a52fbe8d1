//! The front door end to end on loopback: a software switch, executors with registered
//! handlers, and a client awaiting outputs.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bolt::{Bytes, Client, Executor, TaskError};
use scheduler_user::store::{self, StoreConfig, StoreHandle};
use scheduler_user::switch::{self, SwitchConfig, SwitchHandle};

/// A software switch and this host's object store on loopback.
struct Rig {
    switch: SwitchHandle,
    store: StoreHandle,
}

impl Rig {
    fn start() -> Rig {
        let switch = switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), ..SwitchConfig::default() })
            .expect("software switch starts");
        let store = store::spawn(StoreConfig::new("127.0.0.1:0".parse().unwrap())).expect("object store starts");
        Rig { switch, store }
    }

    fn switch(&self) -> SocketAddr {
        self.switch.local_addr()
    }

    fn store(&self) -> SocketAddr {
        self.store.addr()
    }
}

fn echo_executors(rig: &Rig, n: u16) -> Executor {
    Executor::builder(rig.switch())
        .executors(n)
        .handler("upper", |ctx| Ok::<_, String>(ctx.input.to_ascii_uppercase()))
        .handler("square", |ctx| {
            let x: u64 =
                std::str::from_utf8(&ctx.input).map_err(|e| e.to_string())?.parse().map_err(|e| format!("{e}"))?;
            Ok::<_, String>((x * x).to_string())
        })
        .handler("fails", |ctx| Err::<Bytes, _>(format!("cannot handle {:?}", String::from_utf8_lossy(&ctx.input))))
        .spawn(rig.store())
        .expect("executors start")
}

const WAIT: Duration = Duration::from_secs(20);

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(WAIT, f).await.expect("finished within the test's bound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_returns_the_handlers_output() {
    let rig = Rig::start();
    let ex = echo_executors(&rig, 2);
    let client = Client::connect(rig.switch()).await.unwrap();
    let out = within(client.submit("upper", "hello bolt")).await.unwrap();
    assert_eq!(out, "HELLO BOLT");
    // An empty input and an empty output are outputs too.
    assert_eq!(within(client.submit("upper", "")).await.unwrap(), "");
    assert_eq!(ex.shutdown().tasks_ok, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_over_many_yields_every_output_once() {
    let rig = Rig::start();
    let ex = echo_executors(&rig, 4);
    let client = Client::connect(rig.switch()).await.unwrap();
    let n = 300u64;
    let mut stream = client.map("square", (0..n).map(|i| i.to_string()));
    let mut seen = vec![false; n as usize];
    while let Some((i, r)) = within(stream.next()).await {
        assert!(!seen[i], "index {i} yielded twice");
        seen[i] = true;
        assert_eq!(r.unwrap(), (i as u64 * i as u64).to_string());
    }
    assert!(seen.iter().all(|&s| s));
    let ordered = within(client.map_ordered("square", ["3", "4", "5"])).await.unwrap();
    assert_eq!(ordered, ["9", "16", "25"]);
    assert_eq!(ex.shutdown().tasks_ok, n + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_error_reaches_the_caller_with_its_message() {
    let rig = Rig::start();
    let ex = echo_executors(&rig, 1);
    let client = Client::connect(rig.switch()).await.unwrap();
    let err = within(client.submit("fails", "bad input")).await.unwrap_err();
    assert_eq!(err, TaskError::Failed("cannot handle \"bad input\"".into()));
    // A parse error from a handler, and a handler nobody registered.
    let err = within(client.submit("square", "x")).await.unwrap_err();
    assert!(matches!(&err, TaskError::Failed(m) if m.contains("invalid digit")), "{err:?}");
    let client = Client::builder(rig.switch()).attempt_timeout(Duration::from_millis(300)).connect().await.unwrap();
    let err = within(client.submit("nobody", "x")).await.unwrap_err();
    assert!(matches!(&err, TaskError::Refused(m) if m.contains("no handler of that name is registered")), "{err:?}");
    // Each failing handler ran once: its retries found the spec withdrawn and were
    // refused unrun; "nobody" was refused by every attempt.
    let c = ex.shutdown();
    assert_eq!(c.tasks_failed, 2);
    assert_eq!(c.tasks_ok, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_timeout_fails_with_timeout() {
    let rig = Rig::start();
    let ex = Executor::builder(rig.switch())
        .handler("slow", |_| {
            std::thread::sleep(Duration::from_millis(1500));
            Ok::<_, String>("late")
        })
        .spawn(rig.store())
        .unwrap();
    let client = Client::builder(rig.switch()).timeout(Duration::from_millis(200)).connect().await.unwrap();
    let started = Instant::now();
    assert_eq!(within(client.submit("slow", "")).await, Err(TaskError::Timeout));
    assert!(started.elapsed() < Duration::from_millis(1500), "the timeout fired before the handler ended");
    // A per-task timeout on a client without a default one.
    let client = Client::connect(rig.switch()).await.unwrap();
    assert_eq!(within(client.submit("slow", "").timeout(Duration::from_millis(100))).await, Err(TaskError::Timeout));
    ex.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceled_task_never_runs() {
    let rig = Rig::start();
    let client = Client::connect(rig.switch()).await.unwrap();
    // Queued at the switch with no executor yet; canceled before one asks.
    let task = client.submit("count", "a");
    let job = client.map("count", ["b", "c", "d"]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    task.cancel();
    job.cancel();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let ex = Executor::builder(rig.switch())
        .handler("count", move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>("ran")
        })
        .spawn(rig.store())
        .unwrap();
    assert_eq!(within(task).await, Err(TaskError::Canceled));
    let mut job = job;
    let mut canceled = 0;
    while let Some((_, r)) = within(job.next()).await {
        assert_eq!(r, Err(TaskError::Canceled));
        canceled += 1;
    }
    assert_eq!(canceled, 3);
    // A task submitted after them runs: the executors' claims on the canceled ones were
    // denied by the client, so those were dropped unrun.
    assert_eq!(within(client.submit("count", "e")).await.unwrap(), "ran");
    let c = ex.shutdown();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only the task that was not canceled ran");
    assert_eq!(c.claims_denied, 4, "each canceled task was pulled and its claim denied");
}

/// Set in the child process of the kill test: the switch to pull from.
const CHILD_SWITCH: &str = "BOLT_TEST_CHILD_SWITCH";
/// Set in the child: the object store its outputs go to.
const CHILD_STORE: &str = "BOLT_TEST_CHILD_STORE";
/// Set in the child: a file it creates when its handler has started.
const CHILD_MARK: &str = "BOLT_TEST_CHILD_MARK";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_mid_task_leaves_it_to_another() {
    if let Ok(switch) = std::env::var(CHILD_SWITCH) {
        // The child: an executor whose handler marks that it started, then hangs until
        // the parent kills the process.
        let mark = std::env::var(CHILD_MARK).unwrap();
        let store = std::env::var(CHILD_STORE).unwrap().parse().unwrap();
        let _ex = Executor::builder(switch.parse().unwrap())
            .handler("work", move |_| {
                std::fs::write(&mark, b"started").unwrap();
                std::thread::sleep(WAIT);
                Ok::<_, String>("from the killed executor")
            })
            .spawn(store)
            .unwrap();
        std::thread::sleep(WAIT);
        panic!("the parent should have killed this process");
    }
    let rig = Rig::start();
    let mark = std::env::temp_dir().join(format!("bolt-kill-test-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["an_executor_killed_mid_task_leaves_it_to_another", "--exact", "--nocapture"])
        .env(CHILD_SWITCH, rig.switch().to_string())
        .env(CHILD_MARK, &mark)
        .env(CHILD_STORE, rig.store().to_string())
        .spawn()
        .unwrap();
    let client = Client::builder(rig.switch()).attempt_timeout(Duration::from_millis(500)).connect().await.unwrap();
    let task = client.submit("work", "input");
    let deadline = Instant::now() + WAIT;
    while !mark.exists() {
        assert!(Instant::now() < deadline, "the child executor never started the task");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let _ = std::fs::remove_file(&mark);
    let ex = Executor::builder(rig.switch())
        .handler("work", |ctx| Ok::<_, String>([&b"finished elsewhere: "[..], &ctx.input].concat()))
        .spawn(rig.store())
        .unwrap();
    assert_eq!(within(task).await.unwrap(), "finished elsewhere: input");
    assert_eq!(ex.shutdown().tasks_ok, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_input_and_output_travel_through_the_store() {
    let rig = Rig::start();
    let ex = Executor::builder(rig.switch())
        .handler("reverse", |ctx| {
            let mut v = ctx.input.to_vec();
            v.reverse();
            Ok::<_, String>(v)
        })
        .spawn(rig.store())
        .unwrap();
    let client = Client::builder(rig.switch()).store(rig.store()).connect().await.unwrap();
    let input: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    assert!(input.len() > bolt::INLINE_INPUT_MAX);
    let before = rig.store.snapshot();
    let out = within(client.submit("reverse", input.clone())).await.unwrap();
    let mut expected = input;
    expected.reverse();
    assert_eq!(out.len(), expected.len());
    assert!(out == expected, "the output is the reversed input");
    // The input was put and read through the store, the output put and fetched from it.
    let after = rig.store.snapshot();
    assert_eq!(after.puts - before.puts, 2, "input and output were put");
    assert_eq!(after.gets - before.gets, 2, "input and output were fetched");
    assert!(after.bytes_in - before.bytes_in >= 6_000_000);
    // A small output travels inline only: neither stored nor fetched.
    assert_eq!(within(client.submit("reverse", "abc")).await.unwrap(), "cba");
    assert_eq!((rig.store.snapshot().puts, rig.store.snapshot().gets), (after.puts, after.gets));
    ex.shutdown();
}

/// Waits (bounded) until the store holds no object; returns what it holds then.
async fn store_empties(store: &StoreHandle) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    while store.snapshot().objects > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    store.snapshot().objects
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_finished_task_put_in_the_store_is_deleted() {
    let rig = Rig::start();
    let ex = Executor::builder(rig.switch())
        .executors(2)
        .handler("reverse", |ctx| {
            let mut v = ctx.input.to_vec();
            v.reverse();
            Ok::<_, String>(v)
        })
        .handler("first", |ctx| Ok::<_, String>(ctx.input.slice(..1)))
        .spawn(rig.store())
        .unwrap();
    let client = Client::builder(rig.switch()).store(rig.store()).connect().await.unwrap();
    let large = |seed: u8| -> Vec<u8> { (0..200_000u32).map(|i| (i as u8).wrapping_mul(seed)).collect() };
    // Large input and large output; large input and small output; a job of both.
    assert_eq!(within(client.submit("reverse", large(3))).await.unwrap().len(), 200_000);
    assert_eq!(within(client.submit("first", large(5))).await.unwrap(), [0u8][..]);
    let outs = within(client.map_ordered("reverse", [large(7), large(9), b"ab".to_vec()])).await.unwrap();
    assert_eq!(outs.iter().map(|o| o.len()).collect::<Vec<_>>(), [200_000, 200_000, 2]);
    let s = rig.store.snapshot();
    assert_eq!(s.puts, 4 + 3, "four inputs and three large outputs were put");
    assert_eq!(store_empties(&rig.store).await, 0, "every input and output was deleted");
    assert!(rig.store.snapshot().jobs_deleted >= 4 + 2);
    // A task canceled before it ran: its input goes too.
    let client2 = Client::builder(rig.switch()).store(rig.store()).connect().await.unwrap();
    let stopped = ex.shutdown();
    let task = client2.submit("reverse", large(11));
    let deadline = Instant::now() + Duration::from_secs(5);
    while rig.store.snapshot().objects == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(rig.store.snapshot().objects, 1, "the input was put");
    task.cancel();
    assert_eq!(within(task).await, Err(TaskError::Canceled));
    assert_eq!(store_empties(&rig.store).await, 0, "the canceled task's input was deleted");
    assert_eq!(stopped.tasks_ok, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_handler_sees_its_cancel_and_its_executor_runs_the_next_task() {
    let rig = Rig::start();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let started_tx = std::sync::Mutex::new(started_tx);
    let saw_cancel = Arc::new(AtomicUsize::new(0));
    let saw = saw_cancel.clone();
    // One executor: the next task can only run once the canceled one's handler returned.
    let ex = Executor::builder(rig.switch())
        .executors(1)
        .handler("wait", move |ctx| {
            let _ = started_tx.lock().unwrap().send(());
            let deadline = Instant::now() + Duration::from_secs(10);
            while !ctx.cancelled() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if ctx.cancelled() {
                saw.fetch_add(1, Ordering::SeqCst);
            }
            Ok::<_, String>("stopped")
        })
        .handler("quick", |ctx| {
            assert!(!ctx.cancelled(), "a new task starts with the flag down");
            Ok::<_, String>("quick")
        })
        .spawn(rig.store())
        .unwrap();
    let client = Client::connect(rig.switch()).await.unwrap();
    let task = client.submit("wait", "");
    let canceler = task.canceler();
    tokio::task::spawn_blocking(move || started_rx.recv_timeout(WAIT)).await.unwrap().expect("the handler started");
    let canceled_at = Instant::now();
    canceler.cancel();
    assert_eq!(within(task).await, Err(TaskError::Canceled));
    // The executor learns of it at the claim's next lease renewal (every 250 ms).
    assert_eq!(within(client.submit("quick", "")).await.unwrap(), "quick");
    assert!(canceled_at.elapsed() < Duration::from_secs(5), "the handler stopped long before its own deadline");
    assert_eq!(saw_cancel.load(Ordering::SeqCst), 1, "the handler saw ctx.cancelled()");
    // A timeout cancels too: the handler sees it the same way.
    let timed = client.submit("wait", "").timeout(Duration::from_millis(100));
    assert_eq!(within(timed).await, Err(TaskError::Timeout));
    assert_eq!(within(client.submit("quick", "")).await.unwrap(), "quick");
    assert_eq!(saw_cancel.load(Ordering::SeqCst), 2);
    let c = ex.shutdown();
    // Both late outputs reached the client and were dropped there.
    assert_eq!(c.tasks_ok, 4);
}

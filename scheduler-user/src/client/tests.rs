//! The client's I/O against a test that plays the switch and the executors on loopback.

use std::net::UdpSocket as StdUdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use scheduler_common::descriptor::Handler;
use scheduler_common::*;

use super::*;

/// How the fake answers each SUBMIT (by its index among the SUBMITs received).
#[derive(Clone, Copy)]
enum Answer {
    /// Bounce every task with QUEUE_FULL.
    QueueFull,
    /// Drop it (a lost packet).
    Drop,
    /// COMPLETE every task with STATUS_OK; every `dup`-th one twice.
    Complete { dup: u32 },
}

struct Fake {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<(u8, u32)>>>,
}

impl Fake {
    /// Starts a fake switch answering SUBMIT number i with `plan(i)`. It also sends one
    /// malformed datagram back first. Returns the (flags, tid) of every task received.
    fn start(plan: fn(usize) -> Answer) -> Fake {
        let socket = StdUdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
            let mut out = [0u8; MAX_MESSAGE_LEN];
            let mut submits = 0usize;
            let give_up = Instant::now() + Duration::from_secs(20);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < give_up {
                let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
                let Ok(Message::Submit { job, flags, tasks }) = decode(&buf[..n]) else {
                    panic!("the client sent something other than a valid SUBMIT");
                };
                if submits == 0 {
                    socket.send_to(&[0xB0, 0x17, 9, 9], from).unwrap();
                }
                seen.extend(tasks.iter().map(|t| (flags, t.tid())));
                match plan(submits) {
                    Answer::Drop => {}
                    Answer::QueueFull => {
                        let len = encode_queue_full(&mut out, job, tasks).unwrap();
                        socket.send_to(&out[..len], from).unwrap();
                    }
                    Answer::Complete { dup } => {
                        for t in tasks {
                            let mut c = Completion { status: STATUS_OK, ..Completion::default() };
                            c.set_uid(job.uid());
                            c.set_jid(job.jid());
                            c.set_tid(t.tid());
                            c.set_start_unix_ns(crate::executor::unix_now_ns());
                            let len = encode_complete(&mut out, &c).unwrap();
                            let copies = if t.tid() % dup == 0 { 2 } else { 1 };
                            for _ in 0..copies {
                                socket.send_to(&out[..len], from).unwrap();
                            }
                        }
                    }
                }
                submits += 1;
            }
            seen
        });
        Fake { addr, stop, thread: Some(thread) }
    }

    fn finish(mut self) -> Vec<(u8, u32)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

fn config(switch: SocketAddr) -> ClientConfig {
    let mut cfg = ClientConfig::new(switch);
    cfg.tracker.task_timeout = Duration::from_millis(150);
    cfg.tracker.queue_full_backoff = Duration::from_micros(500);
    cfg
}

fn spec() -> TaskSpec {
    TaskSpec::new(Handler::Noop, 2, 0).unwrap()
}

#[tokio::test]
async fn every_task_completes_once_despite_bounces_and_duplicate_completions() {
    let fake = Fake::start(|i| if i == 0 { Answer::QueueFull } else { Answer::Complete { dup: 5 } });
    let mut client = Client::bind(config(fake.addr)).await.unwrap();
    let a = client.submit(&[spec(); 100]).await.unwrap();
    let b = client.submit(&[spec(); 30]).await.unwrap();
    let idle = client.wait_idle(Instant::now() + Duration::from_secs(10)).await.unwrap();
    let seen = fake.finish();
    assert!(idle, "jobs did not finish: {:?}", client.summary());
    // The fake has sent everything; a duplicate of the last completion can still be in the
    // socket's buffer after the client went idle: take it in before counting.
    client.drive_until(Instant::now() + Duration::from_millis(50)).await.unwrap();

    let mut reports = client.take_finished();
    reports.sort_by_key(|r| r.jid);
    assert_eq!(reports.iter().map(|r| (r.jid, r.tasks, r.done)).collect::<Vec<_>>(), vec![(a, 100, 100), (b, 30, 30)]);
    let s = client.summary();
    assert_eq!((s.submitted, s.completed, s.failed, s.unfinished), (130, 130, 0, 0));
    // The first SUBMIT (16 tasks) bounced and was sent again, unflagged.
    assert_eq!(s.queue_full_bounces, 16);
    assert_eq!(s.resubmitted, 0);
    assert_eq!(seen.len(), 146);
    assert!(seen.iter().all(|&(flags, _)| flags == 0));
    // tids 0, 5, 10, ... 125 were completed twice.
    assert_eq!(s.duplicates, 26);
    let stats = client.tracker().stats();
    assert_eq!(stats.decode_errors, 1);
    assert_eq!(client.tracker().states().vector(TaskState::Done).len(), 130);
    assert!(s.throughput_tasks_per_s > 0.0);
    assert!(s.p50_job_ms > 0.0);
}

#[tokio::test]
async fn a_lost_submit_is_resubmitted_with_the_flag() {
    let fake = Fake::start(|i| if i == 0 { Answer::Drop } else { Answer::Complete { dup: u32::MAX } });
    // Long enough that the answered resubmission is never timed out too on a loaded machine.
    let mut cfg = config(fake.addr);
    cfg.tracker.task_timeout = Duration::from_millis(600);
    let mut client = Client::bind(cfg).await.unwrap();
    client.submit(&[spec(); 3]).await.unwrap();
    let started = Instant::now();
    assert!(client.wait_idle(Instant::now() + Duration::from_secs(10)).await.unwrap());
    assert!(started.elapsed() >= Duration::from_millis(600), "finished before the timeout could fire");
    let seen = fake.finish();
    assert_eq!(seen, vec![(0, 0), (0, 1), (0, 2), (FLAG_RESUBMIT, 0), (FLAG_RESUBMIT, 1), (FLAG_RESUBMIT, 2)]);
    let s = client.summary();
    assert_eq!((s.completed, s.resubmitted, s.timeouts, s.failed), (3, 3, 3, 0));
}

#[tokio::test]
async fn with_no_answer_at_all_tasks_fail_after_their_attempts() {
    let fake = Fake::start(|_| Answer::Drop);
    let mut cfg = config(fake.addr);
    cfg.tracker.task_timeout = Duration::from_millis(40);
    cfg.tracker.max_attempts = 2;
    let mut client = Client::bind(cfg).await.unwrap();
    client.submit(&[spec(); 4]).await.unwrap();
    assert!(client.wait_idle(Instant::now() + Duration::from_secs(10)).await.unwrap());
    fake.finish();
    let s = client.summary();
    assert_eq!((s.completed, s.failed, s.lost, s.resubmitted, s.unfinished), (0, 4, 4, 4, 0));
}

#[tokio::test]
async fn wait_idle_returns_false_at_the_deadline() {
    let fake = Fake::start(|_| Answer::Drop);
    let mut client = Client::bind(config(fake.addr)).await.unwrap();
    client.submit(&[spec(); 2]).await.unwrap();
    let t = Instant::now();
    assert!(!client.wait_idle(t + Duration::from_millis(50)).await.unwrap());
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(client.summary().unfinished, 2);
    fake.finish();
}

#[tokio::test]
async fn a_jobs_placement_changes_at_run_time_and_est_task_length_follows_completions() {
    use crate::placement::{InputObject, Placement, PlacementPolicy};
    let fake = Fake::start(|_| Answer::Complete { dup: u32::MAX });
    let mut cfg = config(fake.addr);
    cfg.agents.insert(2, fake.addr);
    let mut client = Client::bind(cfg).await.unwrap();
    let data = vec![InputObject { host: 2, size: 1_000_000 }];
    assert_eq!(client.est_task_length(), DEFAULT_TASK_LENGTH_PRIOR);
    // MLB: all shared, so all SUBMITs (the fake takes nothing else).
    let jid = client.add_placed_job(&[spec(); 4], &vec![data.clone(); 4], PlacementPolicy::Mlb).unwrap();
    client.flush().await;
    assert!(client.wait_idle(Instant::now() + Duration::from_secs(10)).await.unwrap());
    fake.finish();
    // The fake's COMPLETEs report 0 ns of run time: the running mean follows them.
    assert_eq!(client.est_task_length(), Duration::ZERO);
    assert_eq!(client.place(jid, &data), Placement::Shared);
    client.set_placement(jid, PlacementPolicy::Mdl);
    assert_eq!(client.place(jid, &data), Placement::Pinned { host: 2 });
    // A task cannot be pinned to a host whose agent the client does not know.
    let elsewhere = vec![vec![InputObject { host: 3, size: 1 }]];
    assert!(client.add_placed_job(&[spec()], &elsewhere, PlacementPolicy::Mdl).is_err());
}

//! The client's rules, driven with synthetic messages and a synthetic clock.

use super::*;
use scheduler_common::{STATUS_FAILED, STATUS_REFUSED};

const MS: Duration = Duration::from_millis(1);

fn cfg() -> TrackerConfig {
    let mut c = TrackerConfig::new(7);
    c.task_timeout = 100 * MS;
    c.max_attempts = 3;
    c.window = 1000;
    c.queue_full_backoff = MS;
    c.queue_full_backoff_max = 8 * MS;
    c.max_queue_full_bounces = 5;
    c
}

fn specs(n: usize) -> Vec<TaskSpec> {
    (0..n).map(|i| TaskSpec::new(Handler::Noop, 1 + (i % 4) as u8, (i % 3) as u8).unwrap()).collect()
}

/// Sends everything sendable; returns (job, flags, tids) per packet.
fn drain(t: &mut Tracker, now: Instant) -> Vec<(JobRef, u8, Vec<u32>)> {
    let mut out = [Task::default(); MAX_LIST];
    let mut packets = Vec::new();
    for _ in 0..100_000 {
        let Some(p) = t.next_packet(now, 1_000, &mut out) else { return packets };
        packets.push((p.job, p.flags, out[..p.count].iter().map(|t| t.tid()).collect()));
    }
    panic!("next_packet never ran dry");
}

fn complete(uid: u32, jid: u32, tid: u32, status: u8, start_unix_ns: u64) -> Completion {
    let mut c = Completion { status, ..Completion::default() };
    c.set_uid(uid);
    c.set_jid(jid);
    c.set_tid(tid);
    c.set_run_ns(500);
    c.set_start_unix_ns(start_unix_ns);
    c
}

fn task_with_tid(tid: u32) -> Task {
    let mut t = Task { prio: 1, ..Task::default() };
    t.set_tid(tid);
    t
}

fn check_invariants(t: &Tracker) {
    let s = t.states();
    let total: u64 = TaskState::ALL.iter().map(|&st| s.count(st)).sum();
    assert_eq!(total, t.stats().tasks_added, "every task is in exactly one state vector");
    for tid in 0..t.stats().tasks_added as u32 {
        let n = TaskState::ALL.iter().filter(|&&st| s.vector(st).contains(tid)).count();
        assert_eq!(n, 1, "task {tid} in {n} vectors");
    }
    assert_eq!(s.count(TaskState::Running), t.running() as u64);
    assert_eq!(s.count(TaskState::Done), t.stats().done);
    assert_eq!(s.count(TaskState::Failed), t.stats().failed);
    assert_eq!(s.count(TaskState::Canceled), t.stats().canceled);
}

#[test]
fn jobs_go_out_in_packets_of_at_most_sixteen_tasks_of_one_job() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    let a = t.add_job(&specs(40), now).unwrap();
    let b = t.add_job(&specs(3), now).unwrap();
    let packets = drain(&mut t, now);
    let sizes: Vec<_> = packets.iter().map(|p| (p.0.jid(), p.2.len())).collect();
    assert_eq!(sizes, vec![(a, 16), (a, 16), (a, 8), (b, 3)]);
    assert!(packets.iter().all(|p| p.0.uid() == 7 && p.1 == 0));
    let tids: Vec<u32> = packets.iter().flat_map(|p| p.2.clone()).collect();
    assert_eq!(tids, (0..43).collect::<Vec<_>>());
    assert_eq!(t.states().count(TaskState::Running), 43);
    assert_eq!(t.stats().packets_sent, 4);
    check_invariants(&t);
}

#[test]
fn the_window_caps_tasks_running() {
    let now = Instant::now();
    let mut t = Tracker::new(TrackerConfig { window: 10, ..cfg() });
    let jid = t.add_job(&specs(25), now).unwrap();
    assert_eq!(drain(&mut t, now).iter().map(|p| p.2.len()).sum::<usize>(), 10);
    assert_eq!(t.states().count(TaskState::Pending), 15);
    // Completions open the window again.
    for tid in 0..4 {
        assert_eq!(t.on_complete(&complete(7, jid, tid, STATUS_OK, 2_000), now), CompletionEffect::Done);
    }
    assert_eq!(drain(&mut t, now).iter().map(|p| p.2.len()).sum::<usize>(), 4);
    check_invariants(&t);
}

#[test]
fn a_task_is_done_once_and_duplicates_are_only_counted() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(2), now).unwrap();
    drain(&mut t, now);
    let c = complete(7, jid, 0, STATUS_OK, 5_000);
    assert_eq!(t.on_complete(&c, now), CompletionEffect::Done);
    assert_eq!(t.on_complete(&c, now), CompletionEffect::Ignored);
    assert_eq!(t.on_complete(&complete(7, jid, 0, STATUS_FAILED, 0), now), CompletionEffect::Ignored);
    assert_eq!((t.stats().done, t.stats().duplicates), (1, 2));
    assert!(t.take_finished().is_empty());
    assert_eq!(t.on_complete(&complete(7, jid, 1, STATUS_OK, 5_000), now + 3 * MS), CompletionEffect::Done);
    let reports = t.take_finished();
    assert_eq!(reports, vec![JobReport { jid, tasks: 2, done: 2, failed: 0, canceled: 0, elapsed: 3 * MS }]);
    assert!(t.is_idle());
    // The job's per-task data is gone, but a late duplicate is still recognised.
    assert_eq!(t.job(jid), None);
    assert_eq!(t.on_complete(&c, now), CompletionEffect::Ignored);
    assert_eq!((t.stats().done, t.stats().duplicates), (2, 3));
    check_invariants(&t);
}

#[test]
fn the_scheduling_delay_runs_from_first_send_to_start() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(1), now).unwrap();
    drain(&mut t, now); // sent at unix 1_000 ns
    t.on_complete(&complete(7, jid, 0, STATUS_OK, 251_000), now);
    let h = &t.latencies().sched_delay_ns;
    assert_eq!(h.len(), 1);
    assert!(h.equivalent(h.max(), 250_000), "max {} min {}", h.max(), h.min());
}

#[test]
fn task_records_are_kept_only_when_asked_for_and_once_per_task() {
    let now = Instant::now();
    let mut off = Tracker::new(cfg());
    let jid = off.add_job(&specs(2), now).unwrap();
    drain(&mut off, now);
    off.on_complete(&complete(7, jid, 0, STATUS_OK, 5_000), now);
    assert!(off.take_records().is_empty());

    let mut t = Tracker::new(TrackerConfig { record_tasks: true, ..cfg() });
    let jid = t.add_job(&specs(3), now).unwrap();
    drain(&mut t, now); // sent at unix 1_000 ns
    let mut c = complete(7, jid, 1, STATUS_OK, 41_000);
    c.set_node(3);
    c.set_executor(2);
    t.on_complete(&c, now);
    t.on_complete(&c, now); // a duplicate is not recorded again
    t.on_complete(&complete(7, jid, 2, STATUS_FAILED, 9_000), now); // not done: no record
    let r = t.take_records();
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].jid, r[0].tid, r[0].priority, r[0].resources), (jid, 1, 2, 1));
    assert_eq!((r[0].node, r[0].executor, r[0].run_ns), (3, 2, 500));
    assert_eq!(r[0].sched_delay_ns(), 40_000);
    assert!(r[0].completed_unix_ns > 0);
    assert!(t.take_records().is_empty(), "taken records are gone");
}

#[test]
fn timeouts_resubmit_and_a_late_first_completion_still_counts() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(3), now).unwrap();
    drain(&mut t, now);
    t.on_tick(now + 99 * MS);
    assert_eq!(t.stats().timeouts, 0);
    let later = now + 100 * MS;
    t.on_tick(later);
    assert_eq!(t.stats().timeouts, 3);
    assert_eq!(t.states().count(TaskState::Pending), 3);
    let again = drain(&mut t, later);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1, FLAG_RESUBMIT);
    assert_eq!(t.stats().resubmitted, 3);
    // The first attempt's completion arrives late: the task is done; the second
    // attempt's completion is a duplicate.
    assert_eq!(t.on_complete(&complete(7, jid, 1, STATUS_OK, 9), later), CompletionEffect::Done);
    assert_eq!(t.on_complete(&complete(7, jid, 1, STATUS_OK, 9), later), CompletionEffect::Ignored);
    assert_eq!(t.stats().duplicates, 1);
    // The stale timeout entry of the first attempt does not expire the second one.
    t.on_tick(later + 50 * MS);
    assert_eq!(t.stats().timeouts, 3);
    check_invariants(&t);
}

#[test]
fn a_task_fails_after_max_attempts_of_timeouts() {
    let mut now = Instant::now();
    let mut t = Tracker::new(cfg());
    t.add_job(&specs(1), now).unwrap();
    // Each attempt waits twice as long as the one before: 100, 200, 400 ms.
    for (attempt, timeout) in [(1, 100 * MS), (2, 200 * MS), (3, 400 * MS)] {
        let sent = drain(&mut t, now);
        assert_eq!(sent.len(), 1, "attempt {attempt}");
        assert_eq!(sent[0].1, if attempt == 1 { 0 } else { FLAG_RESUBMIT });
        t.on_tick(now + timeout - MS);
        assert_eq!(t.stats().timeouts, attempt - 1, "attempt {attempt} expired early");
        now += timeout;
        t.on_tick(now);
    }
    assert!(drain(&mut t, now).is_empty());
    assert_eq!(t.states().state_of(0), Some(TaskState::Failed));
    assert_eq!((t.stats().timeouts, t.stats().lost, t.stats().failed), (3, 1, 1));
    let r = t.take_finished();
    assert_eq!((r[0].done, r[0].failed), (0, 1));
    assert!(t.is_idle());
    check_invariants(&t);
}

#[test]
fn failures_and_refusals_retry_until_the_last_attempt() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(2), now).unwrap();
    drain(&mut t, now);
    assert_eq!(t.on_complete(&complete(7, jid, 0, STATUS_FAILED, 1), now), CompletionEffect::Retry);
    assert_eq!(t.on_complete(&complete(7, jid, 1, STATUS_REFUSED, 1), now), CompletionEffect::Retry);
    // A second failure report for a task already waiting to go out again is ignored.
    assert_eq!(t.on_complete(&complete(7, jid, 0, STATUS_FAILED, 1), now), CompletionEffect::Ignored);
    assert_eq!(t.stats().late_failures, 1);
    let p = drain(&mut t, now);
    assert_eq!((p.len(), p[0].1), (1, FLAG_RESUBMIT));
    assert_eq!(t.on_complete(&complete(7, jid, 1, STATUS_OK, 1), now), CompletionEffect::Done);
    assert_eq!(t.on_complete(&complete(7, jid, 0, STATUS_FAILED, 1), now), CompletionEffect::Retry);
    drain(&mut t, now);
    assert_eq!(t.on_complete(&complete(7, jid, 0, STATUS_FAILED, 1), now), CompletionEffect::Failed);
    assert_eq!(t.states().state_of(0), Some(TaskState::Failed));
    assert_eq!((t.stats().attempts_failed, t.stats().attempts_refused), (4, 1));
    let r = t.take_finished();
    assert_eq!((r[0].done, r[0].failed), (1, 1));
    check_invariants(&t);
}

#[test]
fn queue_full_backs_off_without_using_an_attempt() {
    let now = Instant::now();
    let mut t = Tracker::new(TrackerConfig { max_attempts: 1, ..cfg() });
    let jid = t.add_job(&specs(4), now).unwrap();
    drain(&mut t, now);
    let bounced = [task_with_tid(1), task_with_tid(3)];
    t.on_queue_full(JobRef::new(7, jid), &bounced, now);
    assert_eq!(t.states().count(TaskState::Pending), 2);
    assert_eq!(t.running(), 2);
    // Not before the back-off (at least half the 1 ms base).
    assert!(drain(&mut t, now).is_empty());
    assert!(t.next_deadline().unwrap() <= now + MS + MS / 2);
    let later = now + 2 * MS;
    t.on_tick(later);
    let mut p = drain(&mut t, later);
    p[0].2.sort();
    // Not a resubmission: the switch never queued them.
    assert_eq!(p, vec![(JobRef::new(7, jid), 0, vec![1, 3])]);
    // The attempt was given back, so the one allowed attempt is still there.
    for tid in 0..4 {
        assert_eq!(t.on_complete(&complete(7, jid, tid, STATUS_OK, 1), later), CompletionEffect::Done);
    }
    assert_eq!((t.stats().queue_full_bounces, t.stats().queue_full_messages), (2, 1));
    // A QUEUE_FULL for tasks no longer Running changes nothing.
    t.on_queue_full(JobRef::new(7, jid), &bounced, later);
    assert_eq!(t.stats().stale_queue_full, 2);
    check_invariants(&t);
}

#[test]
fn a_task_the_switch_keeps_refusing_fails() {
    let mut now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(1), now).unwrap();
    for _ in 0..=5 {
        let p = drain(&mut t, now);
        assert_eq!(p.len(), 1);
        t.on_queue_full(JobRef::new(7, jid), &[task_with_tid(0)], now);
        now += 20 * MS;
        t.on_tick(now);
    }
    assert_eq!(t.states().state_of(0), Some(TaskState::Failed));
    assert_eq!((t.stats().rejected, t.stats().queue_full_bounces), (1, 6));
    assert!(t.is_idle());
    check_invariants(&t);
}

#[test]
fn backoff_grows_and_is_capped() {
    let mut t = Tracker::new(cfg());
    for bounce in 1..30 {
        let d = t.backoff_for(bounce);
        let full = (MS * (1 << (bounce - 1).min(20))).min(8 * MS);
        assert!(d >= full / 2 && d < full + full / 2, "bounce {bounce}: {d:?}");
    }
}

#[test]
fn cancel_finishes_the_job_and_late_completions_are_ignored() {
    let now = Instant::now();
    let mut t = Tracker::new(TrackerConfig { window: 2, ..cfg() });
    let jid = t.add_job(&specs(5), now).unwrap();
    drain(&mut t, now);
    t.on_complete(&complete(7, jid, 0, STATUS_OK, 1), now);
    assert_eq!(t.cancel_job(jid, now), 4);
    assert_eq!(t.running(), 0);
    assert_eq!(t.on_complete(&complete(7, jid, 1, STATUS_OK, 1), now), CompletionEffect::Ignored);
    assert_eq!(t.stats().after_cancel, 1);
    let r = t.take_finished();
    assert_eq!((r[0].done, r[0].canceled), (1, 4));
    assert!(drain(&mut t, now).is_empty());
    assert_eq!(t.cancel_job(jid, now), 0);
    check_invariants(&t);
}

#[test]
fn messages_for_other_clients_or_unknown_tasks_are_ignored() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(2), now).unwrap();
    drain(&mut t, now);
    assert_eq!(t.on_complete(&complete(8, jid, 0, STATUS_OK, 1), now), CompletionEffect::Ignored);
    assert_eq!(t.on_complete(&complete(7, jid, 99, STATUS_OK, 1), now), CompletionEffect::Ignored);
    assert_eq!(t.on_complete(&complete(7, jid + 1, 0, STATUS_OK, 1), now), CompletionEffect::Ignored);
    t.on_queue_full(JobRef::new(8, jid), &[task_with_tid(0)], now);
    t.on_queue_full(JobRef::new(7, jid + 1), &[task_with_tid(1)], now);
    assert_eq!((t.stats().foreign, t.stats().unknown), (2, 3));
    assert_eq!(t.states().count(TaskState::Running), 2);
    check_invariants(&t);
}

#[test]
fn bad_jobs_are_refused() {
    let mut t = Tracker::new(cfg());
    assert!(t.add_job(&[], Instant::now()).is_err());
    let mut bad = specs(1);
    bad[0].priority = 9;
    assert!(t.add_job(&bad, Instant::now()).is_err());
    assert!(TaskSpec::new(Handler::Noop, 0, 0).is_err());
    assert_eq!(t.stats().tasks_added, 0);
}

/// Random interleavings of every event: the invariants hold throughout, and once the
/// events stop, timeouts bring every task to a final state.
#[test]
fn random_event_orders_keep_the_invariants_and_finish_every_task() {
    for seed in 1..=8u64 {
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut now = Instant::now();
        let mut t = Tracker::new(TrackerConfig { window: 64, ..cfg() });
        let mut jobs = Vec::new();
        for _ in 0..6 {
            let (first, n) = (t.stats().tasks_added as u32, 1 + next(60) as u32);
            jobs.push((t.add_job(&specs(n as usize), now).unwrap(), first, n));
        }
        let total = t.stats().tasks_added as u32;
        let mut out = [Task::default(); MAX_LIST];
        for _ in 0..3_000 {
            let (jid, first, n) = jobs[next(jobs.len() as u64) as usize];
            let tid = first + next(n as u64) as u32;
            match next(8) {
                0 | 1 => {
                    t.next_packet(now, 1, &mut out);
                }
                2 => {
                    t.on_complete(&complete(7, jid, tid, STATUS_OK, 5), now);
                }
                3 => {
                    t.on_complete(&complete(7, jid, tid, [STATUS_FAILED, STATUS_REFUSED][next(2) as usize], 5), now);
                }
                4 => t.on_queue_full(JobRef::new(7, jid), &[task_with_tid(tid)], now),
                5 => now += Duration::from_millis(next(40)),
                6 => t.on_tick(now),
                _ => {
                    if next(50) == 0 {
                        t.cancel_job(jid, now);
                    }
                }
            }
            check_invariants(&t);
        }
        // Let everything run its course: send, time out, resend, fail.
        for _ in 0..10_000 {
            if t.is_idle() {
                break;
            }
            while t.next_packet(now, 1, &mut out).is_some() {}
            now += 50 * MS;
            t.on_tick(now);
        }
        assert!(t.is_idle(), "seed {seed}: jobs left unfinished");
        check_invariants(&t);
        let s = t.states();
        assert_eq!(s.count(TaskState::Done) + s.count(TaskState::Failed) + s.count(TaskState::Canceled), total as u64);
        let reports = t.take_finished();
        assert_eq!(reports.len(), 6);
        assert_eq!(reports.iter().map(|r| r.tasks).sum::<u32>(), total);
    }
}

/// One claim per attempt: the first CLAIM of a Running task is granted, a second one (a
/// duplicate delivery) denied; a resubmission after a timeout can be claimed again; a
/// task Done, a foreign uid and an unknown task are denied.
#[test]
fn claims_are_granted_once_per_attempt() {
    let mut now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(2), now).unwrap();
    drain(&mut t, now);
    let claim = |uid: u32, tid: u32| {
        let mut c = Claim::default();
        c.set_uid(uid);
        c.set_jid(jid);
        c.set_tid(tid);
        c
    };
    assert!(t.on_claim(&claim(7, 0), now));
    assert!(!t.on_claim(&claim(7, 0), now), "a second claim on the same attempt");
    assert!(!t.on_claim(&claim(8, 1), now), "another client's uid");
    assert!(!t.on_claim(&claim(7, 99), now), "an unknown task");
    // Task 0's lease lapses (its claimant died): it is resent, and its next attempt can
    // be claimed.
    now += t.config().claim_lease;
    t.on_tick(now);
    assert!(!t.on_claim(&claim(7, 0), now), "waiting to be resent");
    drain(&mut t, now);
    assert!(t.on_claim(&claim(7, 0), now), "the resubmission is a new attempt");
    assert!(t.on_claim(&claim(7, 1), now));
    assert_eq!(t.on_complete(&complete(7, jid, 1, STATUS_OK, 1), now), CompletionEffect::Done);
    assert!(!t.on_claim(&claim(7, 1), now), "a task Done");
    assert_eq!((t.stats().claims_granted, t.stats().claims_denied), (3, 5));
    check_invariants(&t);
}

fn claim_by(jid: u32, tid: u32, node: u16, executor: u16) -> Claim {
    let mut c = Claim::default();
    c.set_uid(7);
    c.set_jid(jid);
    c.set_tid(tid);
    c.set_node(node);
    c.set_executor(executor);
    c
}

/// A delivery lost on the way (an ASSIGN the XDP program sent and the link dropped) makes
/// the task time out and go out again; should the first copy still turn up late (delayed
/// rather than dropped, or a stale copy queued somewhere), it and the resubmission's
/// copy claim the same current attempt: whichever comes first runs, the other is dropped
/// unrun, so the task runs once. A copy arriving while the task waits to be resent is
/// dropped too.
#[test]
fn a_late_copy_of_an_earlier_attempt_and_the_resubmission_run_once_between_them() {
    let mut now = Instant::now();
    let mut t = Tracker::new(cfg());
    let jid = t.add_job(&specs(2), now).unwrap();
    drain(&mut t, now);
    // The late first copy reached executor (1, 1), the resubmission's copy (2, 2).
    let (late, resent) = (|tid| claim_by(jid, tid, 1, 1), |tid| claim_by(jid, tid, 2, 2));
    // Neither first delivery reached an executor; both tasks time out.
    now += 100 * MS;
    t.on_tick(now);
    assert!(!t.on_claim(&late(0), now), "the late first copy, while the task waits to be resent");
    drain(&mut t, now);
    // Task 0: the late first copy claims before the resubmission's copy.
    assert!(t.on_claim(&late(0), now), "the first copy to claim the current attempt runs");
    assert!(!t.on_claim(&resent(0), now), "the resubmission's copy is dropped unrun");
    // Task 1: the other way round.
    assert!(t.on_claim(&resent(1), now), "the resubmission's copy runs");
    assert!(!t.on_claim(&late(1), now), "the late first copy is dropped unrun");
    assert_eq!(t.on_complete(&complete(7, jid, 0, STATUS_OK, 1), now), CompletionEffect::Done);
    assert!(!t.on_claim(&late(0), now), "a copy arriving after the task is Done");
    assert_eq!((t.stats().claims_granted, t.stats().claims_denied), (2, 4));
}

/// A lease holds past the task timeout while its owner renews it; only the owner may
/// renew; once it lapses another executor's claim on the same attempt is granted, and
/// with nobody claiming the task is resent at the lease's expiry.
#[test]
fn leases_are_renewed_by_their_owner_and_regranted_after_they_lapse() {
    let mut now = Instant::now();
    let mut c = cfg();
    c.claim_lease = Duration::from_millis(MIN_CLAIM_LEASE_MS);
    let lease = c.claim_lease;
    let mut t = Tracker::new(c);
    let jid = t.add_job(&specs(1), now).unwrap();
    drain(&mut t, now);
    let owner = claim_by(jid, 0, 1, 1);
    let other = claim_by(jid, 0, 2, 5);
    assert!(t.on_claim(&owner, now));
    assert!(!t.on_claim(&other, now), "the lease is live");
    // Renewed for ten task timeouts: the attempt neither times out nor is resent.
    for _ in 0..10 {
        now += 100 * MS;
        t.on_tick(now);
        assert!(t.on_claim(&owner.renewal(), now));
        assert!(!t.on_claim(&other.renewal(), now), "not the owner");
    }
    assert_eq!(t.states().state_of(0), Some(TaskState::Running));
    assert_eq!((t.stats().timeouts, t.stats().resubmitted), (0, 0));
    // The owner goes silent: after the lease, another executor's claim is granted
    // (a duplicate copy of the same attempt), and the old owner's renewal is denied.
    now += lease;
    assert!(t.on_claim(&other, now));
    assert!(!t.on_claim(&owner.renewal(), now));
    assert_eq!(t.stats().claims_regranted, 1);
    // The new owner dies too: at its lease's expiry the client resends the task itself.
    now += lease;
    t.on_tick(now);
    assert_eq!(t.states().state_of(0), Some(TaskState::Pending));
    assert_eq!(t.stats().leases_expired, 1);
    let resent = drain(&mut t, now);
    assert_eq!(resent.len(), 1);
    assert_eq!(resent[0].1, FLAG_RESUBMIT);
    assert!(t.on_claim(&owner, now), "the resubmission is a new attempt");
    assert_eq!(t.on_complete(&complete(7, jid, 0, STATUS_OK, 1), now), CompletionEffect::Done);
    assert!(!t.on_claim(&owner.renewal(), now), "a task Done");
    assert_eq!(t.stats().renewals_denied, 12);
    check_invariants(&t);
}

/// The last attempt's lease lapsing fails the task as lost, like a timeout.
#[test]
fn a_lapsed_lease_on_the_last_attempt_fails_the_task() {
    let mut now = Instant::now();
    let mut c = cfg();
    c.max_attempts = 1;
    let lease = c.claim_lease;
    let mut t = Tracker::new(c);
    let jid = t.add_job(&specs(1), now).unwrap();
    drain(&mut t, now);
    assert!(t.on_claim(&claim_by(jid, 0, 1, 1), now));
    now += lease;
    t.on_tick(now);
    assert_eq!(t.states().state_of(0), Some(TaskState::Failed));
    assert_eq!((t.stats().lost, t.stats().leases_expired), (1, 1));
    check_invariants(&t);
}

/// A claim that steps aside for a forming gang sends its task again without spending an
/// attempt, however often; a released claim (a gang that gave up) spends one.
#[test]
fn stepping_aside_spends_no_attempt_and_releasing_does() {
    let mut now = Instant::now();
    let mut c = cfg();
    c.max_attempts = 1;
    let mut t = Tracker::new(c);
    let jid = t.add_job(&specs(2), now).unwrap();
    drain(&mut t, now);
    for turn in 0..10 {
        assert!(t.on_claim(&claim_by(jid, 0, 1, 1), now), "turn {turn}");
        assert!(t.step_aside(&claim_by(jid, 0, 1, 1), now));
        now += MS;
        t.on_tick(now);
        assert_eq!(t.states().state_of(0), Some(TaskState::Pending), "turn {turn}");
        assert_eq!(drain(&mut t, now).len(), 1, "turn {turn}: sent again");
    }
    assert!(t.on_claim(&claim_by(jid, 1, 1, 1), now));
    assert!(t.release_claim(&claim_by(jid, 1, 1, 1), now));
    now += MS;
    t.on_tick(now);
    assert_eq!(t.states().state_of(1), Some(TaskState::Failed), "its one attempt spent");
    assert!(!t.step_aside(&claim_by(jid, 1, 1, 1), now), "no live claim");
    check_invariants(&t);
}

/// Resource lists in the tracker: Pending per resource, cancel by resource, and the
/// backlog an executor class could take.
#[test]
fn resource_lists_count_cancel_and_size_the_backlog() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    // Resources cycle 0, 1, 2 (bit 0, bit 1): tasks 1, 4, 7 need bit 0; 2, 5, 8 bit 1.
    t.add_job(&specs(9), now).unwrap();
    let report = t.jobs_report();
    assert_eq!(report.pending, 9);
    assert_eq!(&report.pending_by_resource[..3], &[3, 3, 0]);
    assert_eq!(report.oldest_pending, Some(0));
    assert_eq!(t.backlog_for(0), 3);
    assert_eq!(t.backlog_for(0b01), 6);
    assert_eq!(t.backlog_for(0b11), 9);
    assert_eq!(t.cancel_needing(0b10, now), 3);
    assert_eq!(t.backlog_for(0b11), 6);
    let report = t.jobs_report();
    assert_eq!((report.pending, report.canceled), (6, 3));
    assert_eq!(&report.pending_by_resource[..2], &[3, 0]);
    for tid in [2, 5, 8] {
        assert_eq!(t.states().state_of(tid), Some(TaskState::Canceled));
    }
    check_invariants(&t);
}

/// The monitor sees the tracker's vectors on every tick: failures in a burst raise the
/// alarm, and a client adding work faster than its window drains raises the scale-up
/// signal.
#[test]
fn ticks_feed_the_failure_alarm_and_the_scale_up_signal() {
    let mut now = Instant::now();
    let mut c = cfg();
    c.max_attempts = 1;
    c.window = 10;
    // Nothing times out here: the only failures are the burst below.
    c.task_timeout = Duration::from_secs(10);
    c.monitor = MonitorConfig { interval: 100 * MS, failed_surge: 5, pending_growth: 20, sustain: 3 };
    let mut t = Tracker::new(c);
    let jid = t.add_job(&specs(10), now).unwrap();
    t.on_tick(now);
    drain(&mut t, now);
    for tid in 0..10 {
        t.on_complete(&complete(7, jid, tid, STATUS_FAILED, 1), now);
    }
    now += 100 * MS;
    t.on_tick(now);
    assert_eq!(t.jobs_report().monitor.failed_surge_alarms, 1);
    // 30 more tasks per interval, the window full: Pending grows for three intervals.
    for _ in 0..3 {
        t.add_job(&specs(30), now).unwrap();
        drain(&mut t, now);
        now += 100 * MS;
        t.on_tick(now);
    }
    let m = t.jobs_report().monitor;
    assert_eq!((m.scale_up, m.scale_up_signals, m.failed_surge_alarms), (1, 1, 1));
    check_invariants(&t);
}

/// A switch answers each refused task with a QUEUE_FULL of its own: the client ends in
/// the same state as with one QUEUE_FULL listing them all.
#[test]
fn one_queue_full_per_task_acts_as_one_listing_them_all() {
    let now = Instant::now();
    let bounced = [task_with_tid(0), task_with_tid(2), task_with_tid(3)];
    let after = |split: bool| {
        let mut t = Tracker::new(TrackerConfig { max_attempts: 1, ..cfg() });
        let jid = t.add_job(&specs(4), now).unwrap();
        drain(&mut t, now);
        if split {
            for task in &bounced {
                t.on_queue_full(JobRef::new(7, jid), std::slice::from_ref(task), now);
            }
        } else {
            t.on_queue_full(JobRef::new(7, jid), &bounced, now);
        }
        check_invariants(&t);
        let later = now + 2 * MS;
        t.on_tick(later);
        let mut p = drain(&mut t, later);
        p.iter_mut().for_each(|(_, _, tids)| tids.sort());
        (t.states().count(TaskState::Running), t.stats().queue_full_bounces, p)
    };
    let (one_list, per_task) = (after(false), after(true));
    assert_eq!(one_list, per_task);
    assert_eq!(per_task.1, 3);
    assert_eq!(per_task.2.iter().flat_map(|(_, _, tids)| tids.clone()).collect::<Vec<u32>>(), vec![0, 2, 3]);
}

/// Sends everything sendable; returns (destination host, movable, tids) per packet.
fn drain_pins(t: &mut Tracker, now: Instant) -> Vec<(Option<u16>, bool, Vec<u32>)> {
    let mut out = [Task::default(); MAX_LIST];
    let mut packets = Vec::new();
    for _ in 0..100_000 {
        let Some(p) = t.next_packet(now, 1_000, &mut out) else { return packets };
        let tids = out[..p.count].iter().map(|t| t.tid()).collect();
        packets.push((p.pin.map(|p| p.host), p.pin.is_some_and(|p| p.movable), tids));
    }
    panic!("next_packet never ran dry");
}

#[test]
fn placed_tasks_go_out_per_destination_and_a_bounced_pinned_task_goes_to_tier_2() {
    let now = Instant::now();
    let mut t = Tracker::new(cfg());
    let pinned = |host| Placement::Pinned { host };
    let placements = [pinned(2), pinned(2), Placement::Shared, pinned(3), pinned(2)];
    let jid = t.add_placed_job(&specs(5), &placements, true, now).unwrap();
    let packets = drain_pins(&mut t, now);
    // A packet ends where the destination changes: one job, one host (or tier 2) each.
    assert_eq!(
        packets,
        vec![(Some(2), true, vec![0, 1]), (None, false, vec![2]), (Some(3), true, vec![3]), (Some(2), true, vec![4])]
    );
    assert_eq!(t.stats().pinned_sent, 4);
    // Host 3 refuses its task: the resend is a SUBMIT to tier 2.
    t.on_queue_full(JobRef::new(7, jid), &[task_with_tid(3)], now);
    assert_eq!(t.pin_of(3), None);
    assert_eq!(drain_pins(&mut t, now + 100 * MS), vec![(None, false, vec![3])]);
    // Task 0 times out on host 2: resent to tier 2 too.
    t.on_tick(now + 150 * MS);
    let resent = drain_pins(&mut t, now + 150 * MS);
    assert!(resent.iter().all(|p| p.0.is_none()), "{resent:?}");
    // Tasks 0, 1 and 4 timed out on host 2; task 3 was refused by host 3.
    assert_eq!(t.stats().unpinned, 4);
    assert_eq!(t.stats().resubmitted, 4);
    check_invariants(&t);
}

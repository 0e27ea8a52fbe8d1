//! What a client counts and measures.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// Event counters of one client. Every message received and every rule applied shows
/// up in exactly one of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClientStats {
    /// Tasks added by [`super::Tracker::add_job`] (each counted once).
    pub tasks_added: u64,
    pub jobs_added: u64,
    pub jobs_finished: u64,
    /// SUBMIT messages sent.
    pub packets_sent: u64,
    /// Task sends, first sends and resubmissions.
    pub tasks_sent: u64,
    /// Task sends flagged FLAG_RESUBMIT (after a timeout, failure or refusal).
    pub resubmitted: u64,
    /// Tasks that reached Done / Failed / Canceled.
    pub done: u64,
    pub failed: u64,
    pub canceled: u64,
    /// COMPLETE messages for tasks already Done or Failed (a resubmitted task that ran
    /// twice, or a duplicated packet): ignored.
    pub duplicates: u64,
    /// COMPLETE messages for tasks the client had canceled: ignored.
    pub after_cancel: u64,
    /// COMPLETE with STATUS_FAILED / STATUS_REFUSED (each ends an attempt).
    pub attempts_failed: u64,
    pub attempts_refused: u64,
    /// A failure reported for a task already waiting to be resent: ignored.
    pub late_failures: u64,
    /// Attempts that got no COMPLETE within the task timeout.
    pub timeouts: u64,
    /// Tasks that failed because their last attempt timed out (none ever answered).
    pub lost: u64,
    /// QUEUE_FULL messages, and tasks they listed that went back to Pending.
    pub queue_full_messages: u64,
    pub queue_full_bounces: u64,
    /// Tasks failed because the switch refused them more than the bounce limit allows.
    pub rejected: u64,
    /// QUEUE_FULL listing a task that was not Running (already resent or complete).
    pub stale_queue_full: u64,
    /// Messages naming a task or job this client does not have.
    pub unknown: u64,
    /// Messages for another client (uid) or QUEUE_FULL not from the switch.
    pub foreign: u64,
    /// Well-formed messages a client does not take (ops other than COMPLETE, QUEUE_FULL).
    pub unexpected: u64,
    /// Malformed messages.
    pub decode_errors: u64,
    /// SUBMIT sends the socket refused (the tasks time out and are resent).
    pub send_errors: u64,
    /// CLAIMs granted (the executor runs the task) and denied (it drops it unrun).
    pub claims_granted: u64,
    pub claims_denied: u64,
    /// Claims granted on an attempt whose earlier claim had lapsed (its holder died or
    /// went silent for longer than the lease).
    pub claims_regranted: u64,
    /// CLAIM_RENEWs granted (lease extended) and denied (the lease had lapsed).
    pub leases_renewed: u64,
    pub renewals_denied: u64,
    /// Leases that lapsed without COMPLETE or renewal; the task was resent at once.
    pub leases_expired: u64,
    /// Task sends in PIN messages (to the host of their data) rather than SUBMIT.
    pub pinned_sent: u64,
    /// Pinned tasks refused by their host or timed out there, resent to tier 2.
    pub unpinned: u64,
}

/// Latency distributions and the time span of the work, for the summary.
#[derive(Clone, Debug)]
pub struct Latencies {
    /// First send of a task → the executor's start_unix_ns, in ns.
    pub sched_delay_ns: Histogram<u64>,
    /// First send of a task → its COMPLETE received here, in ns.
    pub result_delay_ns: Histogram<u64>,
    /// Job added → its last task final, in µs.
    pub job_us: Histogram<u64>,
    /// Handler run time reported by executors, in ns.
    pub run_ns: Histogram<u64>,
    pub first_send: Option<Instant>,
    pub last_done: Option<Instant>,
}

impl Default for Latencies {
    fn default() -> Self {
        // Bounded ranges (larger values saturate): an hour in ns, a day in µs.
        let h = |max: u64| {
            Histogram::<u64>::new_with_bounds(1, max, 3).expect("constant bounds are a valid histogram range")
        };
        const HOUR_NS: u64 = 3_600_000_000_000;
        const DAY_US: u64 = 86_400_000_000;
        Latencies {
            sched_delay_ns: h(HOUR_NS),
            result_delay_ns: h(HOUR_NS),
            job_us: h(DAY_US),
            run_ns: h(HOUR_NS),
            first_send: None,
            last_done: None,
        }
    }
}

impl Latencies {
    /// Tasks done per second between the first send and the last completion.
    pub fn throughput(&self, done: u64) -> f64 {
        match (self.first_send, self.last_done) {
            (Some(a), Some(b)) if b > a => done as f64 / (b - a).as_secs_f64(),
            _ => 0.0,
        }
    }

    pub fn span(&self) -> Duration {
        match (self.first_send, self.last_done) {
            (Some(a), Some(b)) => b.saturating_duration_since(a),
            _ => Duration::ZERO,
        }
    }
}

//! Per-executor counters. Each executor thread owns one cache-line-aligned block and
//! bumps it with relaxed atomics; readers sum the blocks into a [`CounterSnapshot`].

use std::sync::atomic::{AtomicU64, Ordering};

use scheduler_common::DecodeError;
use serde::Serialize;

/// The live counters of one executor.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct ExecutorCounters {
    /// GET_TASK messages sent (first sends and resends).
    pub gets_sent: AtomicU64,
    /// Tasks whose handler ran to the end (ok or failed).
    pub tasks_run: AtomicU64,
    pub tasks_ok: AtomicU64,
    pub tasks_failed: AtomicU64,
    /// Tasks refused without running (bad descriptor, command not allowed, too long).
    pub tasks_refused: AtomicU64,
    /// NOOPs answering the current GET_TASK (the executor backed off).
    pub noops: AtomicU64,
    /// NOOPs answering an earlier GET_TASK that had already timed out.
    pub stale_noops: AtomicU64,
    /// GET_TASKs that got neither ASSIGN nor NOOP in time and were resent.
    pub get_timeouts: AtomicU64,
    /// ASSIGNs taken as the late answer to a GET_TASK that had timed out (run all the same).
    pub late_assigns: AtomicU64,
    /// Well-formed messages this executor does not take (wrong op, another requester,
    /// or from an address other than the switch).
    pub ignored: AtomicU64,
    /// COMPLETEs that could not be sent (no client address in the ENTRY, socket error).
    pub complete_errors: AtomicU64,
    /// Socket errors other than the receive timeout.
    pub socket_errors: AtomicU64,
    /// Exactly-once tasks whose claim the client granted (then run), denied (dropped
    /// unrun: a duplicate delivery), or never answered (dropped unrun; the client's
    /// timeout resubmits).
    pub claims_granted: AtomicU64,
    pub claims_denied: AtomicU64,
    pub claims_unanswered: AtomicU64,
    /// Lease renewals of running claimed tasks the client granted, and leases lost (a
    /// renewal denied: the lease had lapsed).
    pub leases_renewed: AtomicU64,
    pub leases_lost: AtomicU64,
    /// Spec tasks: specs fetched from clients, fetches that failed (server unreachable,
    /// unknown spec), RESULTs not acknowledged.
    pub spec_fetches: AtomicU64,
    pub spec_errors: AtomicU64,
    pub result_errors: AtomicU64,
    /// Inputs read from this host's store, and fetched from another host's, with their
    /// bytes and the time spent (ns), kept apart.
    pub local_reads: AtomicU64,
    pub local_read_bytes: AtomicU64,
    pub local_read_ns: AtomicU64,
    pub remote_fetches: AtomicU64,
    pub remote_fetch_bytes: AtomicU64,
    pub remote_fetch_ns: AtomicU64,
    /// Outputs written to this host's store, and the time spent (ns).
    pub outputs_stored: AtomicU64,
    pub output_write_ns: AtomicU64,
    /// Malformed input, one counter per kind (see [`DecodeError::NAMES`]).
    pub decode_errors: [AtomicU64; DecodeError::KINDS],
}

#[inline(always)]
pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The counters of one or more executors, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterSnapshot {
    pub gets_sent: u64,
    pub tasks_run: u64,
    pub tasks_ok: u64,
    pub tasks_failed: u64,
    pub tasks_refused: u64,
    pub noops: u64,
    pub stale_noops: u64,
    pub get_timeouts: u64,
    pub late_assigns: u64,
    pub ignored: u64,
    pub complete_errors: u64,
    pub socket_errors: u64,
    pub claims_granted: u64,
    pub claims_denied: u64,
    pub claims_unanswered: u64,
    pub leases_renewed: u64,
    pub leases_lost: u64,
    pub spec_fetches: u64,
    pub spec_errors: u64,
    pub result_errors: u64,
    pub local_reads: u64,
    pub local_read_bytes: u64,
    pub local_read_ns: u64,
    pub remote_fetches: u64,
    pub remote_fetch_bytes: u64,
    pub remote_fetch_ns: u64,
    pub outputs_stored: u64,
    pub output_write_ns: u64,
    pub decode_errors: u64,
    /// Malformed input by kind, for the kinds seen.
    pub decode_errors_by_kind: Vec<(&'static str, u64)>,
}

impl ExecutorCounters {
    pub fn snapshot(&self) -> CounterSnapshot {
        let mut s = CounterSnapshot::default();
        s.add(self);
        s
    }
}

impl CounterSnapshot {
    /// Adds one executor's counters to this sum.
    pub fn add(&mut self, c: &ExecutorCounters) {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        self.gets_sent += r(&c.gets_sent);
        self.tasks_run += r(&c.tasks_run);
        self.tasks_ok += r(&c.tasks_ok);
        self.tasks_failed += r(&c.tasks_failed);
        self.tasks_refused += r(&c.tasks_refused);
        self.noops += r(&c.noops);
        self.stale_noops += r(&c.stale_noops);
        self.get_timeouts += r(&c.get_timeouts);
        self.late_assigns += r(&c.late_assigns);
        self.ignored += r(&c.ignored);
        self.complete_errors += r(&c.complete_errors);
        self.socket_errors += r(&c.socket_errors);
        self.claims_granted += r(&c.claims_granted);
        self.claims_denied += r(&c.claims_denied);
        self.claims_unanswered += r(&c.claims_unanswered);
        self.leases_renewed += r(&c.leases_renewed);
        self.leases_lost += r(&c.leases_lost);
        self.spec_fetches += r(&c.spec_fetches);
        self.spec_errors += r(&c.spec_errors);
        self.result_errors += r(&c.result_errors);
        self.local_reads += r(&c.local_reads);
        self.local_read_bytes += r(&c.local_read_bytes);
        self.local_read_ns += r(&c.local_read_ns);
        self.remote_fetches += r(&c.remote_fetches);
        self.remote_fetch_bytes += r(&c.remote_fetch_bytes);
        self.remote_fetch_ns += r(&c.remote_fetch_ns);
        self.outputs_stored += r(&c.outputs_stored);
        self.output_write_ns += r(&c.output_write_ns);
        for (i, a) in c.decode_errors.iter().enumerate() {
            let n = r(a);
            if n == 0 {
                continue;
            }
            self.decode_errors += n;
            let name = DecodeError::NAMES[i];
            match self.decode_errors_by_kind.iter_mut().find(|(k, _)| *k == name) {
                Some((_, v)) => *v += n,
                None => self.decode_errors_by_kind.push((name, n)),
            }
        }
    }
}

//! Where the switch thread's time goes, measured in place. Where the software switch
//! shares its cores (the testbed runs it on the two the executors, agents and clients
//! use), these are what its thread adds to a request, and `bolt sim validate` draws the
//! simulated switch's from them:
//!
//! - the **wake-up wait**: from a datagram reaching this host's stack after the thread
//!   had finished its last batch (asleep in its receive, or on its way there) to the
//!   receive returning with it;
//! - the **resumption**: for a datagram that arrived while the thread was still busy with
//!   the batch before, from that batch's end to the receive returning with it. Its
//!   queueing behind that batch follows from the two costs below, which the simulator
//!   charges itself; what it cannot derive is how long the thread takes to come back to
//!   its socket, and a thread preempted between batches (two cores shared with the
//!   executors) takes longest there;
//! - the **handling** of each message, by its op: its decoding, tier-2 work and
//!   encoding, without sends. A SUBMIT that enqueues a job and answers parked executors
//!   costs ten times a GET_TASK that parks, so the simulator draws each op's own;
//! - the **sending** per datagram: a `sendmmsg` flush over the datagrams it sent (on a
//!   veth or loopback the kernel delivers each into its receiver's socket and wakes the
//!   receiver within that call).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use scheduler_common::Op;
use serde::Serialize;

use crate::queue::{origin_index, ORIGINS};

/// Longest time the histograms tell apart (longer ones count as this).
const MAX_NS: u64 = 10_000_000_000;

/// The switch thread's times so far.
pub(super) struct ThreadCosts {
    wakeup: Histogram<u64>,
    resume: Histogram<u64>,
    /// Per origin op (`queue::ORIGINS`).
    handle: [Histogram<u64>; ORIGINS.len()],
    send: Histogram<u64>,
    /// Time spent sending since the last [`ThreadCosts::begin`], which the handling
    /// leaves out.
    sending: Duration,
}

/// What [`ThreadCosts`] measured, as the switch's counters publish it (`thread`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadStats {
    /// Receives whose first datagram arrived after the thread had finished its last batch.
    pub wakeups: u64,
    pub p50_wakeup_ns: u64,
    pub p99_wakeup_ns: u64,
    /// Receives whose first datagram arrived while the thread was busy with the batch
    /// before, and the time from that batch's end to the receive returning.
    pub resumes: u64,
    pub p50_resume_ns: u64,
    pub p99_resume_ns: u64,
    /// Messages handled, and the handling of each, whatever its op.
    pub handled: u64,
    pub p50_handle_ns: u64,
    pub p99_handle_ns: u64,
    /// Datagrams sent, and the sending per datagram.
    pub sent: u64,
    pub p50_send_ns: u64,
    pub p99_send_ns: u64,
    /// (cumulative probability, ns) at `metrics::QUANTILE_POINTS` of each; empty before
    /// the first sample. In-process readers only (the benchmarks' JSON lines).
    #[serde(skip)]
    pub wakeup_ns: Vec<(f64, u64)>,
    #[serde(skip)]
    pub resume_ns: Vec<(f64, u64)>,
    #[serde(skip)]
    pub handle_ns: Vec<(f64, u64)>,
    /// The handling's table of each op that was handled, by the op's name.
    #[serde(skip)]
    pub handle_by_op_ns: BTreeMap<&'static str, Vec<(f64, u64)>>,
    #[serde(skip)]
    pub send_ns: Vec<(f64, u64)>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 2).expect("constant bounds are a valid range")
}

/// `total` shared evenly by `n` (each at least 1 ns).
fn each(total: Duration, n: usize) -> u64 {
    (total.as_nanos() as u64 / n.max(1) as u64).max(1)
}

impl ThreadCosts {
    pub(super) fn new() -> ThreadCosts {
        ThreadCosts {
            wakeup: histogram(),
            resume: histogram(),
            handle: std::array::from_fn(|_| histogram()),
            send: histogram(),
            sending: Duration::ZERO,
        }
    }

    /// One receive, returned at `returned_unix_ns` with its first datagram stamped
    /// `first_arrived_unix_ns` (None: nothing received, or no stamp); the thread had
    /// finished its batch before at `idle_since_unix_ns`. A datagram that came after that
    /// counts as a wake-up, from its arrival; one that came before, as a resumption, from
    /// the batch's end.
    pub(super) fn received(
        &mut self,
        idle_since_unix_ns: u64,
        first_arrived_unix_ns: Option<u64>,
        returned_unix_ns: u64,
    ) {
        let Some(arrived) = first_arrived_unix_ns else { return };
        let (histogram, from) = if arrived >= idle_since_unix_ns {
            (&mut self.wakeup, arrived)
        } else {
            (&mut self.resume, idle_since_unix_ns)
        };
        histogram.saturating_record(returned_unix_ns.saturating_sub(from).max(1));
    }

    /// A flush sent `datagrams` in `took`.
    pub(super) fn flushed(&mut self, datagrams: usize, took: Duration) {
        if datagrams == 0 {
            return;
        }
        self.sending += took;
        let _ = self.send.record_n(each(took, datagrams).min(MAX_NS), datagrams as u64);
    }

    /// A message's handling begins.
    pub(super) fn begin(&mut self) -> Instant {
        self.sending = Duration::ZERO;
        Instant::now()
    }

    /// A message of `op` whose handling began at `began` is done; the flushes since are
    /// left out.
    pub(super) fn handled(&mut self, op: Op, began: Instant) {
        let handling = began.elapsed().saturating_sub(std::mem::take(&mut self.sending));
        self.handle[origin_index(op)].saturating_record((handling.as_nanos() as u64).clamp(1, MAX_NS));
    }

    pub(super) fn stats(&self) -> ThreadStats {
        use crate::metrics::{quantile as q, quantile_table as table};
        let mut handle = histogram();
        for h in &self.handle {
            let _ = handle.add(h);
        }
        let handle_by_op_ns = ORIGINS
            .iter()
            .zip(&self.handle)
            .filter(|(_, h)| !h.is_empty())
            .map(|(op, h)| (op.name(), table(h)))
            .collect();
        ThreadStats {
            wakeups: self.wakeup.len(),
            p50_wakeup_ns: q(&self.wakeup, 0.5),
            p99_wakeup_ns: q(&self.wakeup, 0.99),
            resumes: self.resume.len(),
            p50_resume_ns: q(&self.resume, 0.5),
            p99_resume_ns: q(&self.resume, 0.99),
            handled: handle.len(),
            p50_handle_ns: q(&handle, 0.5),
            p99_handle_ns: q(&handle, 0.99),
            sent: self.send.len(),
            p50_send_ns: q(&self.send, 0.5),
            p99_send_ns: q(&self.send, 0.99),
            wakeup_ns: table(&self.wakeup),
            resume_ns: table(&self.resume),
            handle_ns: table(&handle),
            handle_by_op_ns,
            send_ns: table(&self.send),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within the histograms' two significant digits.
    fn near(got: u64, want: u64) -> bool {
        got.abs_diff(want) * 100 <= want
    }

    #[test]
    fn a_datagram_that_came_after_the_batch_wakes_one_that_came_before_resumes() {
        let mut c = ThreadCosts::new();
        assert_eq!(c.stats(), ThreadStats::default());
        // Nothing received (the receive timed out).
        c.received(2_000, None, 52_000);
        assert_eq!((c.stats().wakeups, c.stats().resumes), (0, 0));
        // Arrived at 10,000, after the batch before ended at 5,000; it ran at 30,000.
        c.received(5_000, Some(10_000), 30_000);
        c.received(40_000, Some(41_000), 42_000);
        // Queued at 60,000 while the batch before ran until 70,000; taken at 75,000.
        c.received(70_000, Some(60_000), 75_000);
        let s = c.stats();
        assert_eq!((s.wakeups, s.resumes), (2, 1));
        assert_eq!(s.wakeup_ns.len(), crate::metrics::QUANTILE_POINTS.len());
        let (lo, hi) = (s.wakeup_ns[0].1, s.wakeup_ns.last().unwrap().1);
        assert!(near(lo, 1_000) && near(hi, 20_000), "{lo} {hi}");
        assert!(s.p50_wakeup_ns <= s.p99_wakeup_ns && s.p99_wakeup_ns == hi);
        assert!(near(s.p50_resume_ns, 5_000) && s.resume_ns.iter().all(|&(_, ns)| near(ns, 5_000)), "{s:?}");
    }

    /// A message's handling leaves out the flushes during it and is kept by op; a
    /// flush's time is shared by its datagrams.
    #[test]
    fn handling_is_per_message_by_op_without_the_sending() {
        let mut c = ThreadCosts::new();
        c.flushed(3, Duration::from_millis(30));
        let began = c.begin();
        std::thread::sleep(Duration::from_millis(5));
        c.handled(Op::Submit, began);
        let began = c.begin();
        std::thread::sleep(Duration::from_millis(40));
        // 30 ms of it sending four and six datagrams.
        c.flushed(4, Duration::from_millis(20));
        c.flushed(6, Duration::from_millis(10));
        c.flushed(0, Duration::from_millis(1));
        c.handled(Op::GetTask, began);
        let s = c.stats();
        assert_eq!((s.handled, s.sent), (2, 13));
        let submit = s.handle_by_op_ns["SUBMIT"][0].1;
        let get = s.handle_by_op_ns["GET_TASK"][0].1;
        // Sleeps overrun; they never fall short.
        assert!((5_000_000..20_000_000).contains(&submit), "{s:?}");
        assert!((10_000_000..25_000_000).contains(&get), "the 30 ms of sends left out: {s:?}");
        assert_eq!(s.handle_by_op_ns.len(), 2, "only ops that were handled");
        assert_eq!(s.handle_ns.len(), crate::metrics::QUANTILE_POINTS.len());
        assert!(near(s.send_ns[0].1, 1_666_666) && near(s.send_ns.last().unwrap().1, 10_000_000), "{s:?}");
    }
}

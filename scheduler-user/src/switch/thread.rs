//! Where the switch thread's time goes, measured in place. Where the software switch
//! shares its cores (the testbed runs it on the two the executors, agents and clients
//! use), these are what its thread adds to a request, and `bolt sim validate` draws the
//! simulated switch's from them:
//!
//! - the **wake-up wait**: from a datagram reaching this host's stack while the thread
//!   slept in its receive to the receive returning with it. A datagram that arrived while
//!   the thread was busy queued behind others instead and is not counted: that queueing
//!   follows from the two costs below, which the simulator charges itself;
//! - the **handling** per message: a receive batch's decoding and tier-2 work, without
//!   its sends, over its messages;
//! - the **sending** per datagram: a `sendmmsg` flush over the datagrams it sent (on a
//!   veth or loopback the kernel delivers each into its receiver's socket and wakes the
//!   receiver within that call).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Longest time the histograms tell apart (longer ones count as this).
const MAX_NS: u64 = 10_000_000_000;

/// The switch thread's times so far.
pub(super) struct ThreadCosts {
    wakeup: Histogram<u64>,
    handle: Histogram<u64>,
    send: Histogram<u64>,
    /// Time spent sending since the last [`ThreadCosts::handled`], which it leaves out.
    sending: Duration,
}

/// What [`ThreadCosts`] measured, as the switch's counters publish it (`thread`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadStats {
    /// Receives woken by a datagram that arrived while the thread slept.
    pub wakeups: u64,
    pub p50_wakeup_ns: u64,
    pub p99_wakeup_ns: u64,
    /// Messages handled, and the handling per message.
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
    pub handle_ns: Vec<(f64, u64)>,
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
        ThreadCosts { wakeup: histogram(), handle: histogram(), send: histogram(), sending: Duration::ZERO }
    }

    /// One receive: called just before it (`called_unix_ns`), returned at
    /// `returned_unix_ns` with its first datagram stamped `first_arrived_unix_ns` (None:
    /// nothing received, or no stamp). Counts a wake-up only if that datagram arrived
    /// after the call, i.e. found the thread asleep or about to be.
    pub(super) fn received(&mut self, called_unix_ns: u64, first_arrived_unix_ns: Option<u64>, returned_unix_ns: u64) {
        let Some(arrived) = first_arrived_unix_ns else { return };
        if arrived < called_unix_ns {
            return;
        }
        self.wakeup.saturating_record(returned_unix_ns.saturating_sub(arrived).max(1));
    }

    /// A flush sent `datagrams` in `took`.
    pub(super) fn flushed(&mut self, datagrams: usize, took: Duration) {
        if datagrams == 0 {
            return;
        }
        self.sending += took;
        let _ = self.send.record_n(each(took, datagrams).min(MAX_NS), datagrams as u64);
    }

    /// A receive batch of `messages` took `busy` from the receive returning to its last
    /// flush; the flushes in it are left out.
    pub(super) fn handled(&mut self, messages: usize, busy: Duration) {
        let handling = busy.saturating_sub(std::mem::take(&mut self.sending));
        if messages == 0 {
            return;
        }
        let _ = self.handle.record_n(each(handling, messages).min(MAX_NS), messages as u64);
    }

    pub(super) fn stats(&self) -> ThreadStats {
        use crate::metrics::{quantile as q, quantile_table as table};
        ThreadStats {
            wakeups: self.wakeup.len(),
            p50_wakeup_ns: q(&self.wakeup, 0.5),
            p99_wakeup_ns: q(&self.wakeup, 0.99),
            handled: self.handle.len(),
            p50_handle_ns: q(&self.handle, 0.5),
            p99_handle_ns: q(&self.handle, 0.99),
            sent: self.send.len(),
            p50_send_ns: q(&self.send, 0.5),
            p99_send_ns: q(&self.send, 0.99),
            wakeup_ns: table(&self.wakeup),
            handle_ns: table(&self.handle),
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
    fn only_a_datagram_that_found_the_thread_asleep_counts_as_a_wake_up() {
        let mut c = ThreadCosts::new();
        assert_eq!(c.stats(), ThreadStats::default());
        // Queued while the thread was busy: not a wake-up.
        c.received(1_000, Some(900), 1_200);
        // Nothing received (the receive timed out).
        c.received(2_000, None, 52_000);
        assert_eq!(c.stats().wakeups, 0);
        // Arrived at 10,000 while the thread slept since 5,000; it ran at 30,000.
        c.received(5_000, Some(10_000), 30_000);
        c.received(40_000, Some(41_000), 42_000);
        let s = c.stats();
        assert_eq!(s.wakeups, 2);
        assert_eq!(s.wakeup_ns.len(), crate::metrics::QUANTILE_POINTS.len());
        let (lo, hi) = (s.wakeup_ns[0].1, s.wakeup_ns.last().unwrap().1);
        assert!(near(lo, 1_000) && near(hi, 20_000), "{lo} {hi}");
        assert!(s.p50_wakeup_ns <= s.p99_wakeup_ns && s.p99_wakeup_ns == hi);
    }

    /// A batch's handling is its busy time less its flushes, shared by its messages;
    /// a flush's time is shared by its datagrams.
    #[test]
    fn handling_leaves_out_the_sending_and_each_is_per_item() {
        let mut c = ThreadCosts::new();
        // Four messages in 100 µs, of which two flushes of 4 and 6 datagrams took 20 and
        // 40 µs: 10 µs per message handled, 5 and 6.67 µs per datagram sent.
        c.flushed(4, Duration::from_micros(20));
        c.flushed(6, Duration::from_micros(40));
        c.flushed(0, Duration::from_micros(1));
        c.handled(4, Duration::from_micros(100));
        let s = c.stats();
        assert_eq!((s.handled, s.sent), (4, 10));
        assert!(near(s.p50_handle_ns, 10_000) && near(s.p99_handle_ns, 10_000), "{s:?}");
        assert!(near(s.p50_send_ns, 6_666) && near(s.send_ns[0].1, 5_000), "{s:?}");
        // The next batch starts afresh: no flush to leave out.
        c.handled(1, Duration::from_micros(3));
        assert!(near(c.stats().handle_ns[0].1, 3_000));
        // A timed-out receive handles nothing and records nothing.
        c.handled(0, Duration::from_micros(50));
        assert_eq!(c.stats().handled, 5);
    }
}

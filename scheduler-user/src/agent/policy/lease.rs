//! Leases on prefetched tasks: a task that has waited in a ring longer than the lease goes
//! back to tier 2 (RETURN), where every host can get it, instead of waiting on a busy
//! host or cycling through put-backs on a host none of whose executors can run it.
//!
//! The age comes from the lease stamp each entry carries while in a ring
//! (`scheduler_common::maps::ring_stamp`). Two places enforce it: the XDP program, on a
//! GET_TASK pop that finds an expired entry (it moves it to the overflow queue, which the
//! agent RETURNs), and the agent, which looks at every ring's head (a peek) every
//! `lease / SCANS_PER_LEASE`, so that a ring no executor pops expires too. A ring is a
//! FIFO: its head is its oldest entry, so looking at heads until one is young finds every
//! expired entry.

use std::time::{Duration, Instant};

use scheduler_common::maps::{lease_expired, RING_COUNT};

/// Head scans per lease period: an expired task waits at most a quarter lease more.
pub const SCANS_PER_LEASE: u32 = 4;
/// Shortest time between two scans (a very short lease does not spin the agent).
const MIN_SCAN_INTERVAL: Duration = Duration::from_millis(1);

/// When to look at the ring heads, and which heads have expired.
#[derive(Clone, Debug)]
pub struct LeaseKeeper {
    lease_ms: u16,
    next_scan: Option<Instant>,
}

impl LeaseKeeper {
    /// A lease of `lease_ms` milliseconds (0: no lease, nothing ever expires).
    pub fn new(lease_ms: u16) -> LeaseKeeper {
        LeaseKeeper { lease_ms, next_scan: None }
    }

    pub fn lease_ms(&self) -> u16 {
        self.lease_ms
    }

    fn interval(&self) -> Duration {
        (Duration::from_millis(self.lease_ms as u64) / SCANS_PER_LEASE).max(MIN_SCAN_INTERVAL)
    }

    /// When the next scan is due (None without a lease).
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        (self.lease_ms != 0).then(|| self.next_scan.unwrap_or(now))
    }

    /// True when the heads should be looked at now; the next scan is then scheduled.
    pub fn scan_due(&mut self, now: Instant) -> bool {
        if self.lease_ms == 0 || self.next_scan.is_some_and(|t| now < t) {
            return false;
        }
        self.next_scan = Some(now + self.interval());
        true
    }

    /// Of the ring heads' stamps (index 0 = priority 1; None for an empty ring), the
    /// priorities (1-based) whose head has expired at `now_ms` (CLOCK_MONOTONIC ms).
    pub fn expired_heads(&self, now_ms: u64, heads: &[Option<[u8; 2]>; RING_COUNT]) -> Vec<u8> {
        heads
            .iter()
            .enumerate()
            .filter(|(_, h)| h.is_some_and(|stamp| lease_expired(stamp, now_ms, self.lease_ms)))
            .map(|(i, _)| i as u8 + 1)
            .collect()
    }

    /// True when one entry stamped `stamp` has expired (for an entry popped after a peek:
    /// another consumer may have taken the peeked one meanwhile).
    pub fn expired(&self, stamp: [u8; 2], now_ms: u64) -> bool {
        lease_expired(stamp, now_ms, self.lease_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::maps::ring_stamp;

    #[test]
    fn scans_come_four_times_per_lease() {
        let mut k = LeaseKeeper::new(400);
        let t0 = Instant::now();
        assert!(k.scan_due(t0));
        assert!(!k.scan_due(t0 + Duration::from_millis(99)));
        assert_eq!(k.next_deadline(t0), Some(t0 + Duration::from_millis(100)));
        assert!(k.scan_due(t0 + Duration::from_millis(100)));
        let mut off = LeaseKeeper::new(0);
        assert!(!off.scan_due(t0));
        assert_eq!(off.next_deadline(t0), None);
    }

    #[test]
    fn only_heads_older_than_the_lease_expire() {
        let k = LeaseKeeper::new(500);
        let mut heads = [None; RING_COUNT];
        heads[0] = Some(ring_stamp(1_000));
        heads[1] = Some(ring_stamp(1_400));
        heads[3] = Some([0, 0]);
        assert_eq!(k.expired_heads(1_499, &heads), Vec::<u8>::new());
        assert_eq!(k.expired_heads(1_500, &heads), vec![1]);
        assert_eq!(k.expired_heads(1_900, &heads), vec![1, 2], "an unstamped head never expires");
        assert!(k.expired(ring_stamp(65_000), 65_000 + 600), "across the stamp's wrap");
        assert!(!LeaseKeeper::new(0).expired(ring_stamp(0), 1_000_000));
    }
}

//! The FLDS monitor of one host: when the tasks in its dedicated ring (MATRIX's LReadyQ)
//! would take longer than `tt` to run at the host's throughput so far, move the excess to
//! the shared rings (SReadyQ), where this host still runs them after its dedicated ones
//! and other hosts may steal them.
//!
//! MATRIX: `est_run_time = |LReadyQ| / (finished so far / elapsed)`; when it exceeds
//! `tt`, move `|LReadyQ| * (est_run_time - tt) / est_run_time` tasks. `tt` halves on each
//! move and doubles when work stealing fails. The paper's worked example: 1000 tasks in
//! 10 s, 5000 queued, tt = 30 s: 50 s estimated, 2000 tasks move.

use std::time::Duration;

/// `tt` starts at this many mean task lengths: the paper's 10 s for its 50 ms DAG tasks
/// and 20 s for its 100 ms all-pairs tasks are both 200 task lengths.
pub const TT_TASK_LENGTHS: u32 = 200;

/// One decision of the monitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FldsMove {
    /// Tasks to move from the dedicated ring to the shared rings.
    pub count: usize,
    /// The estimated run time of the dedicated ring before the move.
    pub est_run_time: Duration,
}

/// The monitor's state: its current `tt` and its bounds.
#[derive(Clone, Copy, Debug)]
pub struct FldsMonitor {
    tt: Duration,
    min: Duration,
    max: Duration,
}

impl FldsMonitor {
    /// Starts at `tt`, which then stays within `min..=max` as it halves and doubles.
    pub fn new(tt: Duration, min: Duration, max: Duration) -> FldsMonitor {
        let (min, max) = (min.min(max), max.max(min));
        FldsMonitor { tt: tt.clamp(min, max), min, max }
    }

    /// `tt` scaled to the workload: [`TT_TASK_LENGTHS`] mean task lengths, bounded by one
    /// task length below and 64 times the start above.
    pub fn for_task_length(est_task_length: Duration) -> FldsMonitor {
        let tt = est_task_length.saturating_mul(TT_TASK_LENGTHS);
        FldsMonitor::new(tt, est_task_length, tt.saturating_mul(64))
    }

    pub fn tt(&self) -> Duration {
        self.tt
    }

    /// One check: `queued` tasks in the dedicated ring, `finished` tasks run by this host
    /// over `elapsed`. Moves nothing before the host has a throughput. On a move, `tt`
    /// halves.
    pub fn check(&mut self, queued: usize, finished: u64, elapsed: Duration) -> Option<FldsMove> {
        if queued == 0 || finished == 0 || elapsed.is_zero() {
            return None;
        }
        // est_run_time = queued / (finished / elapsed), in nanoseconds without floats.
        let est_ns = queued as u128 * elapsed.as_nanos() / finished as u128;
        let tt_ns = self.tt.as_nanos();
        if est_ns <= tt_ns {
            return None;
        }
        // queued * (est - tt) / est, rounded down: what is left runs within tt.
        let count = (queued as u128 * (est_ns - tt_ns) / est_ns) as usize;
        if count == 0 {
            return None;
        }
        self.tt = (self.tt / 2).max(self.min);
        Some(FldsMove { count, est_run_time: Duration::from_nanos(u64::try_from(est_ns).unwrap_or(u64::MAX)) })
    }

    /// This host's work stealing found nothing: `tt` doubles, so that the host keeps
    /// more of its dedicated work.
    pub fn stealing_failed(&mut self) {
        self.tt = self.tt.saturating_mul(2).min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn the_papers_example_moves_2000_of_5000() {
        let mut m = FldsMonitor::new(secs(30), secs(1), secs(600));
        let mv = m.check(5000, 1000, secs(10)).unwrap();
        assert_eq!(mv, FldsMove { count: 2000, est_run_time: secs(50) });
        assert_eq!(m.tt(), secs(15));
    }

    #[test]
    fn nothing_moves_within_tt_or_before_a_throughput_exists() {
        let mut m = FldsMonitor::new(secs(10), secs(1), secs(600));
        // 100 tasks/s, 1000 queued: exactly 10 s, not above tt.
        assert_eq!(m.check(1000, 1000, secs(10)), None);
        assert_eq!(m.check(1000, 0, secs(10)), None);
        assert_eq!(m.check(0, 1000, secs(10)), None);
        assert_eq!(m.check(1000, 1000, Duration::ZERO), None);
        assert_eq!(m.tt(), secs(10));
    }

    #[test]
    fn the_count_rounds_down_and_each_move_halves_tt() {
        let mut m = FldsMonitor::new(secs(10), secs(1), secs(600));
        // 10 tasks/s, 301 queued: 30.1 s; 301 * (30.1 - 10) / 30.1 = 201.
        assert_eq!(m.check(301, 100, secs(10)).map(|mv| mv.count), Some(201));
        assert_eq!(m.tt(), secs(5));
        // 100 left at 10 tasks/s: 10 s over tt 5 s, half of them move.
        assert_eq!(m.check(100, 100, secs(10)).map(|mv| mv.count), Some(50));
        assert_eq!(m.tt(), Duration::from_millis(2500));
        // 7 queued at 1 task/s against 2.5 s: 7 * 4.5 / 7 = 4.5, rounded down to 4.
        assert_eq!(m.check(7, 10, secs(10)).map(|mv| mv.count), Some(4));
    }

    #[test]
    fn tt_halves_and_doubles_within_its_bounds() {
        let mut m = FldsMonitor::new(secs(8), secs(2), secs(16));
        m.check(1000, 1, secs(1));
        assert_eq!(m.tt(), secs(4));
        m.check(1000, 1, secs(1));
        m.check(1000, 1, secs(1));
        assert_eq!(m.tt(), secs(2), "tt stops at its minimum");
        m.stealing_failed();
        assert_eq!(m.tt(), secs(4));
        for _ in 0..10 {
            m.stealing_failed();
        }
        assert_eq!(m.tt(), secs(16), "tt stops at its maximum");
    }

    #[test]
    fn tt_scales_with_the_task_length() {
        assert_eq!(FldsMonitor::for_task_length(Duration::from_millis(50)).tt(), secs(10));
        assert_eq!(FldsMonitor::for_task_length(Duration::from_millis(100)).tt(), secs(20));
    }
}

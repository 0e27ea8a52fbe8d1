//! In-core monitoring of the state vectors (BitMagic's "DevOps and Monitoring"): the
//! counts of Failed and Pending are sampled once per interval, and
//! - a *failure surge* (Failed grew by at least `failed_surge` tasks in one interval:
//!   an outage under way) raises an alarm: a warning log line and a counter;
//! - *sustained backlog growth* (Pending grew by at least `pending_growth` tasks in each
//!   of `sustain` intervals in a row: production outruns consumption) raises the
//!   scale-up signal: an info log line, a counter, and a level that stays up until an
//!   interval in which Pending does not grow that much.
//!
//! Pending is the client's backlog: once the window of tasks in flight is full, tasks
//! that cannot go out wait there, so it grows exactly when the executors drain slower
//! than the client adds. The design gives no numbers; the defaults below are ours.

use std::time::{Duration, Instant};

/// Thresholds of the two signals.
#[derive(Clone, Debug)]
pub struct MonitorConfig {
    /// How often the counts are sampled.
    pub interval: Duration,
    /// Failed tasks added within one interval that raise the alarm.
    pub failed_surge: u64,
    /// Pending growth within one interval that counts as sharp.
    pub pending_growth: u64,
    /// Sharp intervals in a row that make the growth prolonged.
    pub sustain: u32,
}

impl Default for MonitorConfig {
    fn default() -> MonitorConfig {
        MonitorConfig { interval: Duration::from_secs(1), failed_surge: 100, pending_growth: 1000, sustain: 5 }
    }
}

/// What the monitor has seen, as `bolt jobs` and the metrics endpoint show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MonitorReport {
    /// Failure-surge alarms raised so far.
    pub failed_surge_alarms: u64,
    /// Times the scale-up signal went up.
    pub scale_up_signals: u64,
    /// 1 while the scale-up signal is up.
    pub scale_up: u8,
    /// Intervals in a row in which Pending grew sharply.
    pub pending_growth_streak: u32,
}

/// The sampler; fed the counts on every tick.
#[derive(Clone, Debug)]
pub struct StateMonitor {
    cfg: MonitorConfig,
    last_sample: Option<(Instant, u64, u64)>,
    report: MonitorReport,
}

impl StateMonitor {
    pub fn new(cfg: MonitorConfig) -> StateMonitor {
        StateMonitor { cfg, last_sample: None, report: MonitorReport::default() }
    }

    pub fn report(&self) -> MonitorReport {
        self.report
    }

    /// True when [`StateMonitor::observe`] would take a sample (so the caller counts
    /// the vectors only then).
    pub fn is_due(&self, now: Instant) -> bool {
        self.last_sample.is_none_or(|(at, _, _)| now.saturating_duration_since(at) >= self.cfg.interval)
    }

    /// Takes a sample if an interval has passed since the last one.
    pub fn observe(&mut self, now: Instant, pending: u64, failed: u64) {
        let Some((at, last_pending, last_failed)) = self.last_sample else {
            self.last_sample = Some((now, pending, failed));
            return;
        };
        if now.saturating_duration_since(at) < self.cfg.interval {
            return;
        }
        self.last_sample = Some((now, pending, failed));
        let failed_growth = failed.saturating_sub(last_failed);
        if failed_growth >= self.cfg.failed_surge.max(1) {
            self.report.failed_surge_alarms += 1;
            tracing::warn!(failed_growth, failed, interval = ?self.cfg.interval, "alarm: Failed tasks surging");
        }
        let pending_growth = pending.saturating_sub(last_pending);
        if pending_growth >= self.cfg.pending_growth.max(1) {
            self.report.pending_growth_streak += 1;
        } else {
            self.report.pending_growth_streak = 0;
            self.report.scale_up = 0;
        }
        if self.report.pending_growth_streak >= self.cfg.sustain.max(1) && self.report.scale_up == 0 {
            self.report.scale_up = 1;
            self.report.scale_up_signals += 1;
            tracing::info!(
                pending,
                intervals = self.report.pending_growth_streak,
                "scale up: Pending has grown sharply for long"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monitor() -> StateMonitor {
        StateMonitor::new(MonitorConfig {
            interval: Duration::from_millis(100),
            failed_surge: 10,
            pending_growth: 50,
            sustain: 3,
        })
    }

    #[test]
    fn a_failure_surge_raises_the_alarm_and_a_trickle_does_not() {
        let mut m = monitor();
        let t0 = Instant::now();
        let step = Duration::from_millis(100);
        m.observe(t0, 0, 0);
        m.observe(t0 + step, 0, 5);
        assert_eq!(m.report().failed_surge_alarms, 0);
        // Samples inside an interval are not taken.
        m.observe(t0 + step + Duration::from_millis(10), 0, 100);
        assert_eq!(m.report().failed_surge_alarms, 0);
        m.observe(t0 + step * 2, 0, 100);
        assert_eq!(m.report().failed_surge_alarms, 1);
    }

    #[test]
    fn scale_up_needs_sharp_growth_for_several_intervals() {
        let mut m = monitor();
        let t0 = Instant::now();
        let step = Duration::from_millis(100);
        m.observe(t0, 0, 0);
        for (i, pending) in [60, 120, 130, 200, 260].into_iter().enumerate() {
            m.observe(t0 + step * (i as u32 + 1), pending, 0);
        }
        // 60, 60, then 10 breaks the streak, then 70, 60: two sharp intervals only.
        assert_eq!(m.report().scale_up_signals, 0);
        m.observe(t0 + step * 6, 320, 0);
        assert_eq!(
            m.report(),
            MonitorReport { scale_up_signals: 1, scale_up: 1, pending_growth_streak: 3, ..m.report() }
        );
        // Still growing: the level stays, no new signal.
        m.observe(t0 + step * 7, 400, 0);
        assert_eq!((m.report().scale_up, m.report().scale_up_signals), (1, 1));
        // Drained: the level drops.
        m.observe(t0 + step * 8, 10, 0);
        assert_eq!((m.report().scale_up, m.report().pending_growth_streak), (0, 0));
    }
}

//! How many tasks a node keeps prefetched: Little's law on measured quantities.
//!
//! A ring must hold what the node's executors drain from it until a REFILL lands, or
//! they find it empty and go to tier 2 (the slow path). That lead time is the time the
//! agent takes to notice the drain, N, plus the REFILL round trip, R. With a drain rate
//! of λ tasks per second at a level, that is λ·(N + R) tasks on average (Little's law).
//! The target of a level is
//!
//! ```text
//! target = ceil(λ · (N + R) · SAFETY) + FLOOR
//! ```
//!
//! - N is how late the agent's refill step may see a drain ([`PrefetchSizer::with_notice`]):
//!   the XDP program tells it of a ring running low at most once per ring per event
//!   interval (1 ms by default; timed with the coarse clock, so at least one tick apart
//!   on a kernel whose tick is longer); tasks the agent hands out itself (rings in
//!   userspace) are seen at its next check (`--check-interval-ms`). Leaving N out sized the rings for the
//!   round trip alone (100 to 300 µs on the testbed), and 11 % of the tasks of a run above
//!   capacity went to tier 2 from empty rings.
//! - `SAFETY` = 2: the rate is an average, arrivals of GET_TASK are bursty, and an answer
//!   may come short (tier 2 had fewer tasks than asked), costing a second round trip.
//!   Doubling covers one extra round trip at the measured rate.
//! - `FLOOR` = 1 task per level: a level with no measured drain still keeps one task, so
//!   that work arriving at an idle node is served locally at once and its rate becomes
//!   measurable.
//!
//! λ is an exponentially weighted moving average of the XDP program's hit counters per
//! level (plus what the agent serves itself), with a time constant of `RATE_TAU`, so
//! the estimate follows load changes within a few hundred milliseconds whatever the
//! sampling interval. R is an EWMA of REFILL round trips (request sent → first frame),
//! weight `RTT_WEIGHT`, over the requests sent while tier 2's fresh BEST named a level
//! (it held tasks, so it answered at once): an answer to a request sent while it held
//! nothing may have waited there for work to arrive (`RefillController`'s
//! `Outcome::Tasks` has no round trip then). A sample far above the estimate is still
//! left out, in case tier 2 emptied while the request was on its way.
//!
//! The operator's flags are bounds, not tuning: the sum of the targets never exceeds
//! `max_total` (--low-watermark) and one level's target never exceeds the ring capacity.

use std::time::{Duration, Instant};

use scheduler_common::maps::RING_COUNT;

/// Headroom over the mean number of tasks drained during one REFILL round trip.
pub const SAFETY: f64 = 2.0;
/// Tasks every level keeps even with no measured drain.
pub const FLOOR: u32 = 1;
/// Time constant of the drain-rate average.
pub const RATE_TAU: Duration = Duration::from_millis(200);
/// Weight of a new round-trip sample.
pub const RTT_WEIGHT: f64 = 0.25;
/// The round trip assumed before the first answer (a LAN round trip plus the switch).
pub const INITIAL_RTT: Duration = Duration::from_micros(500);
/// Rate samples closer together than this are merged (the counters are cumulative).
const MIN_SAMPLE: Duration = Duration::from_millis(2);
/// A round-trip sample above `PARKED_FACTOR × estimate + PARKED_SLACK` waited at tier 2.
const PARKED_FACTOR: f64 = 4.0;
const PARKED_SLACK: Duration = Duration::from_millis(2);

/// The prefetch sizing state of one node.
#[derive(Clone, Debug)]
pub struct PrefetchSizer {
    levels: usize,
    ring_capacity: u32,
    max_total: u32,
    /// Drain rate per level, tasks per second.
    rate: [f64; RING_COUNT],
    /// How late the agent may notice a drain, seconds (N above).
    notice: f64,
    /// Round trip estimate, seconds.
    rtt: f64,
    /// Last counter sample (cumulative tasks served per level) and its time.
    last: Option<(Instant, [u64; RING_COUNT])>,
}

impl PrefetchSizer {
    /// `levels` in use, the capacity of one ring, and the most tasks all rings together
    /// should hold prefetched (the --low-watermark bound).
    pub fn new(levels: u8, ring_capacity: u32, max_total: u32) -> PrefetchSizer {
        PrefetchSizer {
            levels: (levels as usize).clamp(1, RING_COUNT),
            ring_capacity,
            max_total,
            rate: [0.0; RING_COUNT],
            notice: 0.0,
            rtt: INITIAL_RTT.as_secs_f64(),
            last: None,
        }
    }

    /// The same, for an agent that may hear of a drain up to `notice` late (the XDP
    /// program's event interval): the rings also cover that.
    pub fn with_notice(self, notice: Duration) -> PrefetchSizer {
        PrefetchSizer { notice: notice.as_secs_f64(), ..self }
    }

    /// Takes the cumulative count of tasks served per level (index 0 = priority 1) at
    /// `now`. Counters that go backwards (a reloaded program) restart the measurement.
    pub fn observe_served(&mut self, now: Instant, served: [u64; RING_COUNT]) {
        let Some((at, before)) = self.last else {
            self.last = Some((now, served));
            return;
        };
        let dt = now.saturating_duration_since(at);
        if dt < MIN_SAMPLE {
            return;
        }
        if served.iter().zip(before.iter()).any(|(s, b)| s < b) {
            self.last = Some((now, served));
            return;
        }
        let secs = dt.as_secs_f64();
        let weight = 1.0 - (-secs / RATE_TAU.as_secs_f64()).exp();
        for level in 0..RING_COUNT {
            let sample = (served[level] - before[level]) as f64 / secs;
            self.rate[level] += weight * (sample - self.rate[level]);
        }
        self.last = Some((now, served));
    }

    /// Takes one REFILL round trip (request sent → first frame of its answer).
    pub fn observe_round_trip(&mut self, rtt: Duration) {
        let sample = rtt.as_secs_f64();
        if sample > PARKED_FACTOR * self.rtt + PARKED_SLACK.as_secs_f64() {
            return;
        }
        self.rtt += RTT_WEIGHT * (sample - self.rtt);
    }

    /// Drain rate of `prio` (1-based), tasks per second.
    pub fn rate(&self, prio: u8) -> f64 {
        self.rate.get((prio as usize).wrapping_sub(1)).copied().unwrap_or(0.0)
    }

    /// Drain rate of every level (index 0 = priority 1), tasks per second.
    pub fn rates(&self) -> [f64; RING_COUNT] {
        self.rate
    }

    pub fn round_trip(&self) -> Duration {
        Duration::from_secs_f64(self.rtt)
    }

    /// Target depth of every level in use (index 0 = priority 1; 0 past the levels).
    pub fn targets(&self) -> [u32; RING_COUNT] {
        let mut out = [0u32; RING_COUNT];
        for (level, t) in out.iter_mut().enumerate().take(self.levels) {
            let little = (self.rate[level] * (self.notice + self.rtt) * SAFETY).ceil();
            let want = (little.min(u32::MAX as f64) as u32).saturating_add(FLOOR);
            *t = want.min(self.ring_capacity);
        }
        out
    }

    /// The sum of the targets, bounded by `max_total`: the node's target while every
    /// level counts (`RefillController::set_targets` sums the levels that count).
    pub fn total_target(&self) -> u32 {
        let sum: u64 = self.targets().iter().map(|&t| t as u64).sum();
        (sum.min(self.max_total as u64) as u32).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(p1: u64, p2: u64) -> [u64; RING_COUNT] {
        let mut s = [0; RING_COUNT];
        s[0] = p1;
        s[1] = p2;
        s
    }

    /// Feeds a constant rate per level for `for_ms` milliseconds in 10 ms steps.
    fn drive(s: &mut PrefetchSizer, t0: Instant, from_ms: u64, for_ms: u64, per_s: (u64, u64), acc: &mut (u64, u64)) {
        for step in 1..=for_ms / 10 {
            acc.0 += per_s.0 / 100;
            acc.1 += per_s.1 / 100;
            s.observe_served(t0 + Duration::from_millis(from_ms + step * 10), served(acc.0, acc.1));
        }
    }

    /// Feeds `rtt` as every round-trip sample until the estimate has settled on it.
    fn settle_round_trip(s: &mut PrefetchSizer, rtt: Duration) {
        for _ in 0..50 {
            s.observe_round_trip(rtt);
        }
    }

    #[test]
    fn an_idle_node_keeps_the_floor_per_level() {
        let s = PrefetchSizer::new(4, 4096, 1000);
        assert_eq!(s.targets()[..5], [FLOOR, FLOOR, FLOOR, FLOOR, 0]);
        assert_eq!(s.total_target(), 4 * FLOOR);
    }

    #[test]
    fn the_target_follows_littles_law_with_the_safety_factor() {
        let mut s = PrefetchSizer::new(2, 4096, 10_000);
        settle_round_trip(&mut s, Duration::from_millis(1));
        assert!((s.round_trip().as_secs_f64() - 0.001).abs() < 1e-5);
        let t0 = Instant::now();
        s.observe_served(t0, served(0, 0));
        let mut acc = (0, 0);
        // 20,000 tasks/s at level 1, 2,000 at level 2, for two seconds (10 time constants).
        drive(&mut s, t0, 0, 2000, (20_000, 2_000), &mut acc);
        assert!((s.rate(1) - 20_000.0).abs() < 100.0, "{}", s.rate(1));
        // 20,000/s × 1 ms × 2 = 40, + floor.
        let t = s.targets();
        assert_eq!(t[0], 40 + FLOOR);
        assert_eq!(t[1], 4 + FLOOR);
        assert_eq!(s.total_target(), 44 + 2 * FLOOR);
        // What the refill controller sums when every level counts.
        assert_eq!(t[..2].iter().sum::<u32>(), s.total_target());
    }

    #[test]
    fn the_target_also_covers_the_time_the_agent_takes_to_notice_the_drain() {
        let mut s = PrefetchSizer::new(1, 4096, 10_000).with_notice(Duration::from_millis(1));
        settle_round_trip(&mut s, Duration::from_micros(250));
        let t0 = Instant::now();
        s.observe_served(t0, served(0, 0));
        let mut acc = (0, 0);
        drive(&mut s, t0, 0, 2000, (2_000, 0), &mut acc);
        // 2,000/s × (1 ms + 250 µs) × 2 = 5, + floor; the round trip alone covers 1.
        assert_eq!(s.targets()[0], 5 + FLOOR);
        let round_trip_only = PrefetchSizer { notice: 0.0, ..s.clone() };
        assert_eq!(round_trip_only.targets()[0], 1 + FLOOR);
    }

    #[test]
    fn the_estimate_follows_a_load_change() {
        let mut s = PrefetchSizer::new(1, 4096, 10_000);
        settle_round_trip(&mut s, Duration::from_millis(1));
        let t0 = Instant::now();
        s.observe_served(t0, served(0, 0));
        let mut acc = (0, 0);
        drive(&mut s, t0, 0, 2000, (10_000, 0), &mut acc);
        let high = s.targets()[0];
        // The load drops to a tenth: within a second the target follows.
        drive(&mut s, t0, 2000, 1000, (1_000, 0), &mut acc);
        let low = s.targets()[0];
        assert!(high > 5 * low, "high {high}, low {low}");
        assert!(s.rate(1) < 1_100.0);
    }

    #[test]
    fn caps_bound_the_targets() {
        let mut s = PrefetchSizer::new(2, 16, 20);
        s.observe_round_trip(Duration::from_millis(10));
        let t0 = Instant::now();
        s.observe_served(t0, served(0, 0));
        let mut acc = (0, 0);
        drive(&mut s, t0, 0, 2000, (100_000, 100_000), &mut acc);
        assert_eq!(s.targets()[..2], [16, 16], "one ring's capacity");
        assert_eq!(s.total_target(), 20, "the --low-watermark bound");
    }

    #[test]
    fn a_parked_answer_is_not_a_round_trip() {
        let mut s = PrefetchSizer::new(1, 4096, 100);
        s.observe_round_trip(Duration::from_micros(400));
        let before = s.round_trip();
        s.observe_round_trip(Duration::from_millis(50));
        assert_eq!(s.round_trip(), before);
        s.observe_round_trip(Duration::from_micros(800));
        assert!(s.round_trip() > before);
    }

    #[test]
    fn counters_going_backwards_restart_the_measurement() {
        let mut s = PrefetchSizer::new(1, 4096, 100);
        let t0 = Instant::now();
        s.observe_served(t0, served(1_000_000, 0));
        s.observe_served(t0 + Duration::from_millis(10), served(5, 0));
        assert_eq!(s.rate(1), 0.0);
        s.observe_served(t0 + Duration::from_millis(20), served(105, 0));
        assert!(s.rate(1) > 0.0 && s.rate(1) <= 10_000.0);
    }
}

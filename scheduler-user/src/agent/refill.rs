//! When to ask tier 2 for tasks, and how many: the REFILL_REQ state machine.
//!
//! The node's buffer is the sum of its rings. Below its target depth (set from
//! measurement by [`super::policy::prefetch`], bounded by the low watermark) the agent
//! asks for `want = min(target, batch, free space of the fullest ring, 255)`
//! tasks, so that however the answer's priorities fall, every task fits its ring. Rings
//! below tier 2's best level, once that level has lasted or is most of this node's
//! work, do not count: the bypass rule holds them back
//! ([`RefillController::set_tier2_best`]), and the request asks only for what the
//! counted rings lack of their target, so that the rest of a new job of that level stays
//! at tier 2 for the other hosts. One
//! request is in flight at a time. The answer is not read from a socket (the XDP program consumes REFILL frames),
//! but from the program's REFILL counters: frames and tasks taken in since the request.
//! An answer is complete when it carried `want` tasks, when one of its frames was short
//! (the switch fills frames of 16 and sends the rest last), or when no further frame came
//! for a short settle time. Then:
//! - tasks arrived: ask again at once if the rings are still low;
//! - an empty REFILL: tier 2 has nothing this node can run. The pause before asking again
//!   doubles up to a maximum, but the time the request waited for its answer counts
//!   towards it: a request parked at tier 2 until its expiry is asked again at once (one
//!   request always waits there), while a switch that answers "nothing" at once is asked
//!   at most once per pause;
//! - nothing within the answer timeout: the request or its answer was lost; resend, with
//!   the timeout doubling on each consecutive loss (a silent switch is not flooded).

use std::time::{Duration, Instant};

use scheduler_common::{maps::RING_COUNT, MAX_LIST};

use super::rings::KernelRefills;

/// REFILL frames and tasks seen so far, from the XDP program and the agent's own socket.
pub type Progress = KernelRefills;

/// Tuning of the refill loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefillPolicy {
    /// The most tasks the rings together keep prefetched: the bound of the measured
    /// target depth.
    pub low_watermark: u32,
    /// The fewest tasks the rings together keep prefetched whatever the measurement
    /// (0: the measured depth alone).
    pub min_depth: u32,
    /// Most tasks one REFILL_REQ asks for (1..=255).
    pub batch: u8,
    /// How long to wait for the first frame of an answer before resending.
    pub answer_timeout: Duration,
    /// After a frame, how long without another before the answer counts as complete.
    pub settle: Duration,
    /// First pause after an empty REFILL.
    pub min_backoff: Duration,
    /// Longest pause after empty REFILLs in a row.
    pub max_backoff: Duration,
}

impl Default for RefillPolicy {
    fn default() -> Self {
        RefillPolicy {
            low_watermark: 32,
            min_depth: 0,
            batch: 64,
            answer_timeout: Duration::from_millis(20),
            settle: Duration::from_millis(2),
            min_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(20),
        }
    }
}

/// How long tier 2 must name a level above the rings' before their lower levels stop
/// counting towards the target ([`RefillController::set_tier2_best`]), unless this
/// node drains that level mostly ([`drains_mostly`]). Until then the bypass rule serves
/// the level: its few tasks go to whichever executors of the cluster ask first, where a
/// REFILL would commit them to this host's executors alone. Acting at once for every
/// level put level 1's median queueing at 1.16x and 1.42x one-level's in two runs of
/// `bolt bench all --only priority` (1.0x to 1.1x before). A level still named a
/// millisecond later is a backlog, which the rings should carry.
pub const HELD_BACK_AFTER: Duration = Duration::from_millis(1);

/// True when this node drains `level` (1-based, at most `levels`) at all, and at least
/// as fast as every level below it together: most of what its executors run from those
/// levels is this one, so its tasks keep coming to this node, and the ones a REFILL
/// brings are the ones its executors would fetch from tier 2 next.
pub fn drains_mostly(level_rates: &[f64; RING_COUNT], level: usize, levels: usize) -> bool {
    let own = level_rates[level - 1];
    own > 0.0 && own >= level_rates[level..levels].iter().sum::<f64>()
}

/// Longest the answer timeout grows to while the switch stays silent.
const MAX_ANSWER_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Waiting {
        sent_at: Instant,
        /// When the first frame of the answer was seen.
        first_frame_at: Option<Instant>,
        want: u8,
        /// Progress when the request was sent.
        base: Progress,
        /// Progress last seen, and when it last changed.
        seen: Progress,
        changed_at: Instant,
        /// Tier 2's fresh BEST named a level when the request was sent: it held tasks,
        /// so it answers at once and the answer's delay is a round trip.
        tier2_held: bool,
    },
    BackingOff {
        until: Instant,
        /// When the pause began (the request's time): with executors waiting at the
        /// host it ends `min_backoff` after this.
        since: Instant,
    },
}

/// What the controller asks the agent to do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// Send a REFILL_REQ for this many tasks (a resend when `retry`).
    Request {
        want: u8,
        retry: bool,
    },
}

/// How the last answer ended, for the agent's counters and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The answer brought tasks; its first frame came `round_trip` after the request
    /// (to the resolution of the counters' polling). None when tier 2 had said it held
    /// nothing as the request left: the request may have waited there for work to
    /// arrive (parked), and its delay is that wait, not a round trip.
    Tasks {
        tasks: u64,
        round_trip: Option<Duration>,
    },
    /// Tier 2 had nothing; the answer came `waited` after the request.
    Empty {
        waited: Duration,
    },
    Lost,
}

/// The refill state machine of one node.
#[derive(Debug)]
pub struct RefillController {
    policy: RefillPolicy,
    /// Ring capacity and levels in use, for `want`.
    capacity: u32,
    levels: usize,
    /// Ask when the rings hold fewer tasks than this (at most `policy.low_watermark`).
    target: u32,
    /// Rings 1..=this count towards `target`: those tier 2's fresh BEST does not hold
    /// back ([`RefillController::set_tier2_best`]).
    counted: usize,
    /// Tier 2's fresh BEST as last set, and since when it has named that level.
    tier2_best: u8,
    best_since: Option<Instant>,
    /// When the rings below `tier2_best` stop counting, if they hold tasks and it has not
    /// happened yet (a deadline: the agent wakes for it).
    held_back_at: Option<Instant>,
    state: State,
    /// Empty answers in a row (sets the back-off).
    empties: u32,
    /// Lost answers in a row (sets the answer timeout).
    losses: u32,
    last_outcome: Option<Outcome>,
    /// Executors waiting at the host when the request in flight was sent (it told tier
    /// 2 so).
    announced_waiters: u32,
}

impl RefillController {
    pub fn new(policy: RefillPolicy, capacity: u32, levels: u8) -> RefillController {
        RefillController {
            target: policy.low_watermark,
            policy,
            capacity,
            levels: (levels as usize).clamp(1, RING_COUNT),
            counted: (levels as usize).clamp(1, RING_COUNT),
            tier2_best: 0,
            best_since: None,
            held_back_at: None,
            state: State::Idle,
            empties: 0,
            losses: 0,
            last_outcome: None,
            announced_waiters: 0,
        }
    }

    pub fn policy(&self) -> &RefillPolicy {
        &self.policy
    }

    /// True while pausing after an empty REFILL: tier 2 had nothing for this node.
    pub fn tier2_empty(&self) -> bool {
        matches!(self.state, State::BackingOff { .. }) && self.empties > 0
    }

    /// True while a request is unanswered.
    pub fn waiting(&self) -> bool {
        matches!(self.state, State::Waiting { .. })
    }

    /// The outcome of the most recent answer, taken (each is reported once).
    pub fn take_outcome(&mut self) -> Option<Outcome> {
        self.last_outcome.take()
    }

    /// Sets the depth to keep (the prefetch policy's estimate), at least the minimum
    /// depth and at most the low watermark.
    pub fn set_target(&mut self, target: u32) {
        self.target = target.max(self.policy.min_depth).clamp(1, self.policy.low_watermark.max(1));
    }

    pub fn target(&self) -> u32 {
        self.target
    }

    /// The levels, from priority 1, that count towards the target now.
    pub fn counted_levels(&self) -> u8 {
        self.counted as u8
    }

    /// A refill step's inputs from outside the controller: tier 2's fresh BEST
    /// ([`RefillController::set_tier2_best`]) and the measured target of every level
    /// ([`PrefetchSizer::targets`]). The target is the sum over the levels that count,
    /// bounded as [`RefillController::set_target`] bounds it.
    ///
    /// [`PrefetchSizer::targets`]: super::policy::prefetch::PrefetchSizer::targets
    pub fn set_targets(
        &mut self,
        now: Instant,
        tier2_best: u8,
        occupancy: &[i64; RING_COUNT],
        level_targets: &[u32; RING_COUNT],
        level_rates: &[f64; RING_COUNT],
    ) {
        self.set_tier2_best(now, tier2_best, occupancy, level_rates);
        let sum: u64 = level_targets[..self.counted].iter().map(|&t| t as u64).sum();
        self.set_target(sum.min(u32::MAX as u64) as u32);
    }

    /// Tier 2's fresh BEST at `now` (0: none, or stale), and what this node drains per
    /// level (`level_rates`, tasks per second, index 0 = priority 1). While rings of
    /// lower priority than that level hold tasks, they serve no one (the bypass rule
    /// passes a GET_TASK that would reach them on to tier 2), so they stop counting
    /// towards the target:
    /// - at once, for a level this node drains at least as fast as every level below it
    ///   together ([`drains_mostly`]): a stream of this node's work, whose tasks would
    ///   come here anyway, so that each round trip saved is a gain;
    /// - for any other level, once tier 2 has named it for [`HELD_BACK_AFTER`]: until
    ///   then its few tasks go to whichever executors of the cluster ask first.
    ///
    /// A node whose rings hold only held-back tasks then asks, and tier 2, which answers
    /// a REFILL_REQ from its highest level down, sends its best level to the rings,
    /// instead of every executor here fetching it with a round trip of its own. The
    /// target is then that of the counted levels ([`RefillController::set_targets`]), so
    /// that the answer brings what this node drains of them in a round trip, not the
    /// held-back levels' share as well.
    ///
    /// `occupancy` is the rings' now: while they hold tasks below a level that waits
    /// out [`HELD_BACK_AFTER`], its end is a deadline ([`RefillController::next_deadline`]).
    pub fn set_tier2_best(
        &mut self,
        now: Instant,
        tier2_best: u8,
        occupancy: &[i64; RING_COUNT],
        level_rates: &[f64; RING_COUNT],
    ) {
        let since = match self.best_since {
            Some(since) if tier2_best == self.tier2_best => since,
            _ => {
                self.tier2_best = tier2_best;
                self.best_since = Some(now);
                now
            }
        };
        let best = (tier2_best as usize).min(self.levels);
        let below = best != 0 && occupancy[best..self.levels].iter().any(|&n| n > 0);
        let lasting = now.saturating_duration_since(since) >= HELD_BACK_AFTER;
        let hold = below && (lasting || drains_mostly(level_rates, best, self.levels));
        self.counted = if hold { best } else { self.levels };
        self.held_back_at = (below && !hold).then_some(since + HELD_BACK_AFTER);
    }

    /// How many tasks to ask for with rings at `occupancy`: 0 when the node holds its
    /// target or has no room.
    pub fn want(&self, occupancy: &[i64; RING_COUNT]) -> u8 {
        self.want_with_waiters(occupancy, 0)
    }

    /// [`RefillController::want`] with `waiters` executors waiting at this host: one task
    /// each, whatever the rings hold (what they hold is nothing those executors can run),
    /// and beyond them what the rings lack of the target, as far as a request and the
    /// rings' room go. Tier 2 serves the waiters' share of a parked request before any
    /// host's prefetch and the rest after, so that the rest does not take tasks idle
    /// executors or low rings of other hosts could have at once; and it comes in the same
    /// answer, so that a new job's tasks reach this host's rings before its busy executors
    /// finish and ask tier 2 for them one round trip each.
    ///
    /// Without waiters, a node below its target asks for a whole target's worth, or,
    /// while rings are held back for a higher level, for only what the counted rings lack.
    pub fn want_with_waiters(&self, occupancy: &[i64; RING_COUNT], waiters: u32) -> u8 {
        let rings = &occupancy[..self.levels];
        let total: i64 = rings[..self.counted].iter().map(|&r| r.max(0)).sum();
        let fullest = rings.iter().copied().max().unwrap_or(0).max(0);
        let room = (self.capacity as i64 - fullest).max(0);
        let lacking = (self.target as i64 - total).max(0);
        let want = if waiters > 0 {
            waiters as i64 + lacking
        } else if lacking == 0 {
            return 0;
        } else if self.counted < self.levels {
            // Rings held back for a higher level, a new job of it most of the time: only
            // what the counted rings lack, so that the rest of the job stays at tier 2 for
            // the other hosts, whose executors may free first, instead of waiting here.
            lacking
        } else {
            // Up to one target's worth: the depth then moves between the target and twice
            // it, one request per drained target rather than one per task.
            self.target as i64
        };
        room.min(want).min(self.policy.batch as i64).min(u8::MAX as i64) as u8
    }

    /// Advances the state machine: `progress` is the REFILL tally now.
    pub fn poll(&mut self, now: Instant, occupancy: &[i64; RING_COUNT], progress: Progress) -> Action {
        self.poll_with_waiters(now, occupancy, progress, 0)
    }

    /// [`RefillController::poll`] with `waiters` executors waiting at this host. While
    /// any wait, a request is always on its way or parked at tier 2: after an empty
    /// answer the pause is the shortest one (`min_backoff`, less the time the answer was
    /// parked), not the doubled one, since tier 2's next task should reach them at once.
    pub fn poll_with_waiters(
        &mut self,
        now: Instant,
        occupancy: &[i64; RING_COUNT],
        progress: Progress,
        waiters: u32,
    ) -> Action {
        match self.state {
            State::BackingOff { since, .. } if waiters > 0 && now >= since + self.policy.min_backoff => {
                self.state = State::Idle
            }
            State::BackingOff { until, .. } if now < until => return Action::Nothing,
            State::BackingOff { .. } => self.state = State::Idle,
            State::Waiting { sent_at, first_frame_at, want, base, seen, changed_at, tier2_held } => {
                let (frames, tasks) =
                    (progress.frames.wrapping_sub(base.frames), progress.tasks.wrapping_sub(base.tasks));
                let changed_at = if progress != seen { now } else { changed_at };
                if frames == 0 {
                    // More executors wait than the request parked at tier 2 says: a new
                    // one replaces it there, so that tier 2 serves this host among those
                    // with waiting executors, and sends it as many tasks.
                    if waiters > self.announced_waiters {
                        let want = self.want_with_waiters(occupancy, waiters);
                        if want > 0 {
                            self.announced_waiters = waiters;
                            return self.ask(now, want, progress, false);
                        }
                    }
                    if now.duration_since(sent_at) < self.answer_timeout() {
                        self.state = State::Waiting {
                            sent_at,
                            first_frame_at,
                            want,
                            base,
                            seen: progress,
                            changed_at,
                            tier2_held,
                        };
                        return Action::Nothing;
                    }
                    // Lost: ask again (for what is needed now) with a longer timeout.
                    self.losses = self.losses.saturating_add(1);
                    self.last_outcome = Some(Outcome::Lost);
                    let want = self.want_with_waiters(occupancy, waiters);
                    if want == 0 {
                        self.state = State::Idle;
                        return Action::Nothing;
                    }
                    self.announced_waiters = waiters;
                    return self.ask(now, want, progress, true);
                }
                let first_frame_at = first_frame_at.unwrap_or(now);
                let short_frame = tasks < frames * MAX_LIST as u64;
                let complete =
                    tasks >= want as u64 || short_frame || now.duration_since(changed_at) >= self.policy.settle;
                if !complete {
                    let first_frame_at = Some(first_frame_at);
                    self.state =
                        State::Waiting { sent_at, first_frame_at, want, base, seen: progress, changed_at, tier2_held };
                    return Action::Nothing;
                }
                self.losses = 0;
                let waited = first_frame_at.saturating_duration_since(sent_at);
                if tasks == 0 {
                    self.empties = self.empties.saturating_add(1);
                    self.last_outcome = Some(Outcome::Empty { waited });
                    // The time parked at tier 2 counts towards the pause.
                    let pause = self.backoff().saturating_sub(waited);
                    if !pause.is_zero() {
                        // Waiters shorten the pause to what is left of `min_backoff`.
                        let since = now.checked_sub(waited).unwrap_or(now);
                        self.state = State::BackingOff { until: now + pause, since };
                        if waiters == 0 || now < since + self.policy.min_backoff {
                            return Action::Nothing;
                        }
                        self.state = State::Idle;
                    } else {
                        self.state = State::Idle;
                    }
                } else {
                    self.empties = 0;
                    self.last_outcome = Some(Outcome::Tasks { tasks, round_trip: tier2_held.then_some(waited) });
                    self.state = State::Idle;
                }
            }
            State::Idle => {}
        }
        let want = self.want_with_waiters(occupancy, waiters);
        if want == 0 {
            return Action::Nothing;
        }
        self.announced_waiters = waiters;
        self.ask(now, want, progress, false)
    }

    /// The program stamped the first frame of an answer at `at` (EVENT_REFILL_ANSWER):
    /// the round trip ends there, when its tasks are in the rings for the executors, not
    /// when the agent, woken by it, gets the CPU and looks (tens of microseconds later
    /// on busy cores). A stamp from before the request in flight was sent belongs to an
    /// earlier one.
    pub fn first_frame_stamped(&mut self, at: Instant) {
        if let State::Waiting { sent_at, first_frame_at: ref mut first @ None, .. } = self.state {
            if at >= sent_at {
                *first = Some(at);
            }
        }
    }

    /// Sends a REFILL_REQ for `want` tasks now (`retry`: again, the last one went
    /// unanswered) and waits for its answer from the counters at `progress`.
    fn ask(&mut self, now: Instant, want: u8, progress: Progress, retry: bool) -> Action {
        self.state = State::Waiting {
            sent_at: now,
            first_frame_at: None,
            want,
            base: progress,
            seen: progress,
            changed_at: now,
            tier2_held: self.tier2_best != 0,
        };
        Action::Request { want, retry }
    }

    /// Stops asking: an answer still on its way is not waited for by the controller (the
    /// agent's drain waits for it separately).
    pub fn halt(&mut self) {
        let forever = Instant::now() + Duration::from_secs(3600);
        self.state = State::BackingOff { until: forever, since: forever };
    }

    /// When [`RefillController::poll`] next needs to run even if nothing happens: the end
    /// of a back-off, the answer timeout, soon while frames of an answer arrive, or when
    /// held-back rings stop counting ([`RefillController::set_tier2_best`]).
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let polled = self.poll_deadline(now);
        match (polled, self.held_back_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn poll_deadline(&self, now: Instant) -> Option<Instant> {
        match self.state {
            State::Idle => None,
            State::BackingOff { until, .. } => Some(until),
            State::Waiting { sent_at, base, seen, changed_at, .. } => {
                if seen.frames == base.frames {
                    // No frame yet: the first one wakes the owner (the program's
                    // EVENT_REFILL_ANSWER), or, for an answer to waiting executors, is
                    // read at its next wake-up; only the answer timeout is a deadline.
                    Some(sent_at + self.answer_timeout())
                } else {
                    Some((now + POLL_WHILE_WAITING).min(changed_at + self.policy.settle))
                }
            }
        }
    }

    /// When a pause ends early because executors wait at the host (see
    /// [`RefillController::poll_with_waiters`]); None when not pausing.
    pub fn pause_end_with_waiters(&self) -> Option<Instant> {
        match self.state {
            State::BackingOff { since, until } => Some(until.min(since + self.policy.min_backoff)),
            _ => None,
        }
    }

    fn answer_timeout(&self) -> Duration {
        let t = self.policy.answer_timeout.saturating_mul(1 << self.losses.min(6));
        t.min(MAX_ANSWER_TIMEOUT.max(self.policy.answer_timeout))
    }

    fn backoff(&self) -> Duration {
        let t = self.policy.min_backoff.saturating_mul(1 << self.empties.saturating_sub(1).min(16));
        t.min(self.policy.max_backoff)
    }
}

/// How often the REFILL counters are read while the frames of an answer arrive, until it
/// is complete or settles. Only its first frame is an event (EVENT_REFILL_ANSWER): one
/// per request rather than one per frame.
pub const POLL_WHILE_WAITING: Duration = Duration::from_micros(200);

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(total_in_ring1: i64) -> [i64; RING_COUNT] {
        let mut o = [0; RING_COUNT];
        o[0] = total_in_ring1;
        o
    }

    fn progress(frames: u64, tasks: u64) -> Progress {
        Progress { frames, tasks }
    }

    /// No level drained yet.
    const NONE: [f64; RING_COUNT] = [0.0; RING_COUNT];

    fn rates(per_level: &[f64]) -> [f64; RING_COUNT] {
        std::array::from_fn(|i| per_level.get(i).copied().unwrap_or(0.0))
    }

    /// A measured target of 64 under a bound of 1000, batch 64.
    fn controller() -> RefillController {
        let mut c =
            RefillController::new(RefillPolicy { low_watermark: 1000, batch: 64, ..RefillPolicy::default() }, 4096, 4);
        c.set_target(64);
        c
    }

    #[test]
    fn want_is_bounded_by_batch_and_by_the_fullest_ring() {
        let c = controller();
        assert_eq!(c.want(&occ(0)), 64);
        assert_eq!(c.want(&occ(63)), 64);
        assert_eq!(c.want(&occ(64)), 0);
        // The target is bounded by the low watermark, and is at least one task.
        let mut b = RefillController::new(RefillPolicy { low_watermark: 8, ..RefillPolicy::default() }, 4096, 4);
        b.set_target(500);
        assert_eq!((b.target(), b.want(&occ(0))), (8, 8));
        b.set_target(0);
        assert_eq!((b.target(), b.want(&occ(0)), b.want(&occ(1))), (1, 1, 0));
        let mut m = RefillController::new(
            RefillPolicy { low_watermark: 100, min_depth: 40, ..RefillPolicy::default() },
            4096,
            4,
        );
        m.set_target(3);
        assert_eq!(m.target(), 40, "the minimum depth holds against a low measurement");
        let small =
            RefillController::new(RefillPolicy { low_watermark: 100, batch: 255, ..RefillPolicy::default() }, 40, 4);
        assert_eq!(small.want(&[10, 20, 0, 0, 0, 0, 0, 0]), 20);
        assert_eq!(small.want(&[40, 0, 0, 0, 0, 0, 0, 0]), 0);
        // Rings past the levels in use do not count.
        assert_eq!(small.want(&[0, 0, 0, 0, 99, 0, 0, 0]), 40);
    }

    #[test]
    fn rings_below_tier_2s_best_level_do_not_count_towards_the_target() {
        let mut c = controller();
        // 64 tasks of level 4 fill the target while tier 2 holds nothing better.
        let level4 = [0, 0, 0, 64, 0, 0, 0, 0];
        assert_eq!(c.want(&level4), 0);
        // Tier 2 holds level 3, which this node has not drained: after HELD_BACK_AFTER,
        // level 4 is held back by the bypass rule, so the node asks.
        let t0 = Instant::now();
        c.set_tier2_best(t0, 3, &level4, &NONE);
        assert_eq!(c.want(&level4), 0, "a level just named is left to the bypass rule");
        assert_eq!(c.next_deadline(t0), Some(t0 + HELD_BACK_AFTER), "the agent wakes when it ends");
        c.set_tier2_best(t0 + HELD_BACK_AFTER / 2, 3, &level4, &NONE);
        assert_eq!(c.want(&level4), 0);
        c.set_tier2_best(t0 + HELD_BACK_AFTER, 3, &level4, &NONE);
        assert_eq!(c.want(&level4), 64);
        assert_eq!(c.counted_levels(), 3, "the target to set is that of levels 1 to 3");
        assert_eq!(c.next_deadline(t0 + HELD_BACK_AFTER), None, "idle, nothing pending");
        // Level 3 tasks in hand count, and the request is for what they lack.
        assert_eq!(c.want(&[0, 0, 60, 64, 0, 0, 0, 0]), 4);
        assert_eq!(c.want(&[0, 0, 64, 64, 0, 0, 0, 0]), 0);
        // The room is still the fullest ring's, held back or not.
        let mut small =
            RefillController::new(RefillPolicy { low_watermark: 100, batch: 255, ..RefillPolicy::default() }, 40, 4);
        small.set_target(30);
        let level4_35 = [0, 0, 0, 35, 0, 0, 0, 0];
        small.set_tier2_best(t0, 1, &level4_35, &NONE);
        small.set_tier2_best(t0 + HELD_BACK_AFTER, 1, &level4_35, &NONE);
        assert_eq!(small.want(&level4_35), 5);
        // Another level named starts the wait again.
        c.set_tier2_best(t0 + HELD_BACK_AFTER * 2, 2, &level4, &NONE);
        assert_eq!(c.want(&level4), 0);
        // Tier 2 empty again (or the hint stale): every level counts.
        c.set_tier2_best(t0 + HELD_BACK_AFTER * 9, 0, &level4, &NONE);
        assert_eq!(c.want(&level4), 0);
        // Nothing below tier 2's level: no deadline (a level-1 workload wakes no one).
        let level1 = occ(10);
        c.set_tier2_best(t0 + HELD_BACK_AFTER * 10, 1, &level1, &NONE);
        assert_eq!(c.next_deadline(t0 + HELD_BACK_AFTER * 10), None);
        c.set_tier2_best(t0 + HELD_BACK_AFTER * 20, 1, &level1, &NONE);
        assert_eq!(c.counted_levels(), 4, "nothing held back: every level counts");
    }

    #[test]
    fn a_level_this_node_drains_mostly_holds_the_rings_below_back_at_once() {
        let level4 = [0, 0, 0, 64, 0, 0, 0, 0];
        let t0 = Instant::now();
        // Level 3 at 1,200 tasks/s against level 4's 600: held back as soon as named.
        let mut c = controller();
        c.set_tier2_best(t0, 3, &level4, &rates(&[20.0, 0.0, 1200.0, 600.0]));
        assert_eq!((c.counted_levels(), c.want(&level4)), (3, 64));
        assert_eq!(c.next_deadline(t0), None, "nothing to wake for");
        // Level 1 at 20 tasks/s against 1,800 below it: the millisecond first.
        let mut c = controller();
        let drained = rates(&[20.0, 0.0, 1200.0, 600.0]);
        c.set_tier2_best(t0, 1, &level4, &drained);
        assert_eq!((c.counted_levels(), c.want(&level4)), (4, 0));
        assert_eq!(c.next_deadline(t0), Some(t0 + HELD_BACK_AFTER));
        c.set_tier2_best(t0 + HELD_BACK_AFTER, 1, &level4, &drained);
        assert_eq!(c.counted_levels(), 1);
        // A level drained exactly as fast as those below it together counts as mostly;
        // one never drained does not, whatever is below it.
        assert!(drains_mostly(&rates(&[0.0, 300.0, 200.0, 100.0]), 2, 4));
        assert!(!drains_mostly(&rates(&[0.0, 299.0, 200.0, 100.0]), 2, 4));
        assert!(!drains_mostly(&NONE, 1, 4));
        // Levels past those in use do not count.
        assert!(drains_mostly(&rates(&[10.0, 5.0, 0.0, 0.0, 999.0]), 1, 4));
    }

    #[test]
    fn while_rings_are_held_back_a_request_asks_only_for_what_the_counted_rings_lack() {
        // `set_targets` below replaces the helper's fixed target.
        let mut c = controller();
        let targets = [1, 1, 6, 4, 0, 0, 0, 0];
        let t0 = Instant::now();
        // Every level counts: below its target of 12, a node asks for a whole target.
        let rings = [0, 0, 2, 0, 0, 0, 0, 0];
        c.set_targets(t0, 0, &rings, &targets, &NONE);
        assert_eq!((c.target(), c.want(&rings)), (12, 12));
        // Tier 2 names level 3, which this node drains mostly, while level 4 holds tasks:
        // held back at once, the target is levels 1 to 3's (8), and the request asks for
        // the 6 the counted rings lack, not for 8.
        let rings = [0, 0, 2, 9, 0, 0, 0, 0];
        c.set_targets(t0, 3, &rings, &targets, &rates(&[0.0, 0.0, 1200.0, 600.0]));
        assert_eq!((c.counted_levels(), c.target(), c.want(&rings)), (3, 8, 6));
        // Executors waiting here still get one each beyond that.
        assert_eq!(c.want_with_waiters(&rings, 2), 8);
    }

    #[test]
    fn the_target_is_that_of_the_counted_levels() {
        let mut c =
            RefillController::new(RefillPolicy { low_watermark: 1000, batch: 64, ..RefillPolicy::default() }, 4096, 4);
        let targets = [41, 5, 1, 1, 0, 0, 0, 0];
        let t0 = Instant::now();
        c.set_targets(t0, 0, &occ(0), &targets, &NONE);
        assert_eq!(c.target(), 48, "every level");
        let level4 = [0, 0, 0, 9, 0, 0, 0, 0];
        c.set_targets(t0, 2, &level4, &targets, &NONE);
        c.set_targets(t0 + HELD_BACK_AFTER, 2, &level4, &targets, &NONE);
        assert_eq!((c.counted_levels(), c.target()), (2, 46), "levels 1 and 2");
        // Still bounded by the low watermark.
        let mut b = RefillController::new(RefillPolicy { low_watermark: 8, ..RefillPolicy::default() }, 4096, 4);
        b.set_targets(t0, 0, &occ(0), &targets, &NONE);
        assert_eq!(b.target(), 8);
    }

    #[test]
    fn executors_waiting_at_the_host_are_asked_for_one_task_each_and_what_the_rings_lack() {
        let mut c = controller();
        c.set_target(8);
        // Rings at the target (tasks the waiters cannot run), three executors waiting:
        // three tasks.
        assert_eq!(c.want_with_waiters(&occ(8), 3), 3);
        // Rings below it: the waiters' three and what the rings lack of the target.
        assert_eq!(c.want_with_waiters(&occ(5), 3), 6);
        assert_eq!(c.want_with_waiters(&occ(0), 3), 11);
        // No one waiting: one target's worth, once below it.
        assert_eq!(c.want_with_waiters(&occ(5), 0), 8);
        assert_eq!(c.want_with_waiters(&occ(8), 0), 0);
        // Bounded by the batch and by the room left.
        assert_eq!(c.want_with_waiters(&occ(0), 300), 64);
        assert_eq!(c.want_with_waiters(&occ(4090), 30), 6);
    }

    #[test]
    fn with_executors_waiting_a_request_is_always_parked_at_tier_2() {
        // Rings at the target: each request asks for the waiters' tasks only.
        let mut c = controller();
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        assert_eq!(c.poll_with_waiters(t0, &occ(64), progress(0, 0), 1), Action::Request { want: 1, retry: false });
        // A second executor starts waiting before the answer: the request tier 2 holds is
        // replaced by one that says so.
        assert_eq!(c.poll_with_waiters(t0, &occ(64), progress(0, 0), 1), Action::Nothing);
        assert_eq!(c.poll_with_waiters(t0, &occ(64), progress(0, 0), 2), Action::Request { want: 2, retry: false });
        // Three immediate empty answers in a row: without waiters the pause would double
        // to 4 ms; with them it is the shortest one, 1 ms after the request.
        let mut sent = t0;
        for i in 1..=3u64 {
            assert_eq!(c.poll_with_waiters(sent, &occ(64), progress(i, 0), 2), Action::Nothing);
            assert!(c.tier2_empty());
            assert_eq!(c.pause_end_with_waiters(), Some(sent + ms));
            sent += ms;
            assert_eq!(
                c.poll_with_waiters(sent, &occ(64), progress(i, 0), 2),
                Action::Request { want: 2, retry: false }
            );
        }
        // An empty answer parked for tier 2's park time is followed by the next at once.
        assert_eq!(
            c.poll_with_waiters(sent + ms * 10, &occ(64), progress(4, 0), 2),
            Action::Request { want: 2, retry: false }
        );
        assert_eq!(c.take_outcome(), Some(Outcome::Empty { waited: ms * 10 }));
    }

    #[test]
    fn a_full_answer_leads_straight_to_the_next_request_while_low() {
        let mut c = controller();
        let t0 = Instant::now();
        assert_eq!(c.poll(t0, &occ(0), progress(0, 0)), Action::Request { want: 64, retry: false });
        assert!(c.waiting());
        assert_eq!(c.poll(t0, &occ(0), progress(0, 0)), Action::Nothing);
        // Two full frames so far: more may come.
        assert_eq!(c.poll(t0, &occ(10), progress(2, 32)), Action::Nothing);
        // All 64: complete, and still below the watermark after executors took most.
        assert_eq!(c.poll(t0, &occ(20), progress(4, 64)), Action::Request { want: 64, retry: false });
        assert!(matches!(c.take_outcome(), Some(Outcome::Tasks { tasks: 64, .. })));
        // At the target: nothing to ask.
        assert_eq!(c.poll(t0, &occ(70), progress(8, 128)), Action::Nothing);
        assert!(!c.waiting());
    }

    #[test]
    fn a_short_frame_ends_the_answer_and_silence_after_full_frames_too() {
        let mut c = controller();
        let t0 = Instant::now();
        c.poll(t0, &occ(0), progress(0, 0));
        assert_eq!(c.poll(t0, &occ(70), progress(2, 20)), Action::Nothing);
        assert!(matches!(c.take_outcome(), Some(Outcome::Tasks { tasks: 20, .. })));
        assert!(!c.waiting());
        // Exactly 32 tasks (two full frames) and then nothing: complete after the settle time.
        c.poll(t0, &occ(0), progress(2, 20));
        assert_eq!(c.poll(t0, &occ(0), progress(4, 52)), Action::Nothing);
        assert!(c.waiting());
        let later = t0 + c.policy().settle;
        assert_eq!(c.poll(later, &occ(70), progress(4, 52)), Action::Nothing);
        assert!(matches!(c.take_outcome(), Some(Outcome::Tasks { tasks: 32, .. })));
    }

    #[test]
    fn empty_answers_back_off_exponentially_up_to_the_maximum() {
        let mut c = controller();
        let mut now = Instant::now();
        let mut p = progress(0, 0);
        let mut pauses = Vec::new();
        for _ in 0..10 {
            assert!(matches!(c.poll(now, &occ(0), p), Action::Request { .. }));
            p.frames += 1;
            assert_eq!(c.poll(now, &occ(0), p), Action::Nothing);
            assert_eq!(c.take_outcome(), Some(Outcome::Empty { waited: Duration::ZERO }));
            let until = c.next_deadline(now).unwrap();
            pauses.push(until - now);
            assert_eq!(c.poll(until - Duration::from_nanos(1), &occ(0), p), Action::Nothing);
            now = until;
        }
        assert_eq!(pauses[0], Duration::from_millis(1));
        assert_eq!(pauses[1], Duration::from_millis(2));
        assert_eq!(pauses[3], Duration::from_millis(8));
        assert_eq!(*pauses.last().unwrap(), Duration::from_millis(20));
        // Tasks again: the back-off resets.
        assert!(matches!(c.poll(now, &occ(0), p), Action::Request { .. }));
        p.frames += 1;
        p.tasks += 5;
        c.poll(now, &occ(5), p);
        assert!(matches!(c.take_outcome(), Some(Outcome::Tasks { tasks: 5, .. })));
        c.poll(now, &occ(5), p);
        p.frames += 1;
        c.poll(now, &occ(5), p);
        assert_eq!(c.take_outcome(), Some(Outcome::Empty { waited: Duration::ZERO }));
        assert_eq!(c.next_deadline(now).unwrap() - now, Duration::from_millis(1));
    }

    #[test]
    fn a_lost_answer_is_retried_with_a_growing_timeout() {
        let mut c = controller();
        let t0 = Instant::now();
        let p = progress(7, 70);
        c.poll(t0, &occ(0), p);
        let timeout = c.policy().answer_timeout;
        assert_eq!(c.poll(t0 + timeout - Duration::from_micros(1), &occ(0), p), Action::Nothing);
        assert_eq!(c.poll(t0 + timeout, &occ(0), p), Action::Request { want: 64, retry: true });
        assert_eq!(c.take_outcome(), Some(Outcome::Lost));
        // The second wait is twice as long.
        let t1 = t0 + timeout;
        assert_eq!(c.poll(t1 + timeout, &occ(0), p), Action::Nothing);
        assert_eq!(c.poll(t1 + 2 * timeout, &occ(0), p), Action::Request { want: 64, retry: true });
        // An answer resets it.
        let t2 = t1 + 2 * timeout;
        assert_eq!(c.poll(t2, &occ(0), progress(8, 73)), Action::Request { want: 64, retry: false });
        assert_eq!(c.poll(t2 + timeout, &occ(0), progress(8, 73)), Action::Request { want: 64, retry: true });
    }

    #[test]
    fn an_answer_parked_until_its_expiry_is_asked_again_at_once() {
        // The answer timeout must outlast the park time, or a parked request counts as lost.
        let policy =
            RefillPolicy { low_watermark: 1000, answer_timeout: Duration::from_millis(200), ..Default::default() };
        let mut c = RefillController::new(policy, 4096, 4);
        c.set_target(64);
        let t0 = Instant::now();
        let mut p = progress(0, 0);
        // Empty answers that come at once back off as before ...
        for _ in 0..5 {
            let now = c.next_deadline(t0).unwrap_or(t0);
            assert!(matches!(c.poll(now, &occ(0), p), Action::Request { .. }));
            p.frames += 1;
            c.poll(now, &occ(0), p);
        }
        let backoff = c.next_deadline(t0).unwrap();
        assert!(backoff > t0 + Duration::from_millis(10), "the pause has grown");
        // ... but an empty answer after a long wait (a request parked at tier 2 until its
        // expiry) is followed at once by the next request.
        let sent = backoff;
        assert!(matches!(c.poll(sent, &occ(0), p), Action::Request { .. }));
        let expiry = sent + Duration::from_millis(50);
        c.poll(expiry - Duration::from_micros(200), &occ(0), p);
        p.frames += 1;
        assert!(matches!(c.poll(expiry, &occ(0), p), Action::Request { .. }));
        assert_eq!(c.take_outcome(), Some(Outcome::Empty { waited: Duration::from_millis(50) }));
    }

    #[test]
    fn an_unanswered_request_is_not_polled_but_the_frames_of_an_answer_are() {
        let mut c = controller();
        let t0 = Instant::now();
        assert!(matches!(c.poll(t0, &occ(0), progress(0, 0)), Action::Request { .. }));
        // Young or parked at tier 2, the request's only deadline is its answer timeout:
        // the answer's first frame wakes the agent.
        let timeout = t0 + c.policy().answer_timeout;
        for after_us in [0, 500, 1_000, 5_000, 19_700] {
            let now = t0 + Duration::from_micros(after_us);
            assert_eq!(c.next_deadline(now), Some(timeout), "{after_us} µs after the request");
        }
        // Once frames arrive, the answer is watched until it is complete or settles.
        let first = t0 + Duration::from_millis(3);
        assert_eq!(c.poll(first, &occ(0), progress(1, 16)), Action::Nothing);
        assert_eq!(c.next_deadline(first), Some(first + POLL_WHILE_WAITING));
        // A lost request is sent again at its timeout.
        let mut lost = controller();
        assert!(matches!(lost.poll(t0, &occ(0), progress(0, 0)), Action::Request { .. }));
        assert!(matches!(lost.poll(timeout, &occ(0), progress(0, 0)), Action::Request { retry: true, .. }));
    }

    #[test]
    fn the_round_trip_is_measured_to_the_first_frame() {
        let mut c = controller();
        let t0 = Instant::now();
        c.set_tier2_best(t0, 1, &occ(0), &NONE);
        c.poll(t0, &occ(0), progress(0, 0));
        c.poll(t0 + Duration::from_micros(200), &occ(0), progress(0, 0));
        // Three full frames seen at 400 µs, the last (short) one later.
        c.poll(t0 + Duration::from_micros(400), &occ(0), progress(3, 48));
        c.poll(t0 + Duration::from_micros(600), &occ(0), progress(4, 50));
        assert_eq!(c.take_outcome(), Some(Outcome::Tasks { tasks: 50, round_trip: Some(Duration::from_micros(400)) }));
    }

    #[test]
    fn an_answer_to_a_request_sent_while_tier_2_held_nothing_is_not_a_round_trip() {
        // SW1's hosts ask between jobs, tier 2 parks the request, and the next job's
        // tasks answer it 4 ms later: counted as a round trip, that wait made the
        // prefetch target 17 tasks where 5 cover the drain.
        let mut c = controller();
        let t0 = Instant::now();
        c.set_tier2_best(t0, 0, &occ(0), &NONE);
        c.poll(t0, &occ(0), progress(0, 0));
        let t1 = t0 + Duration::from_millis(4);
        c.first_frame_stamped(t1);
        // The answer's BEST says tier 2 still holds tasks: the request the rest of the
        // target needs goes out now, and its answer is a round trip.
        c.set_tier2_best(t1, 2, &occ(0), &NONE);
        assert!(matches!(c.poll(t1, &occ(0), progress(1, 5)), Action::Request { .. }));
        assert_eq!(c.take_outcome(), Some(Outcome::Tasks { tasks: 5, round_trip: None }));
        c.first_frame_stamped(t1 + Duration::from_micros(120));
        c.poll(t1 + Duration::from_micros(300), &occ(0), progress(2, 7));
        assert_eq!(c.take_outcome(), Some(Outcome::Tasks { tasks: 2, round_trip: Some(Duration::from_micros(120)) }));
    }

    #[test]
    fn the_program_stamp_of_the_first_frame_ends_the_round_trip_however_late_it_is_read() {
        let mut c = controller();
        let t0 = Instant::now();
        c.set_tier2_best(t0, 1, &occ(0), &NONE);
        c.poll(t0, &occ(0), progress(0, 0));
        // A stamp from before this request is an earlier answer's.
        c.first_frame_stamped(t0 - Duration::from_micros(50));
        c.first_frame_stamped(t0 + Duration::from_micros(150));
        // A later stamp does not move the first one.
        c.first_frame_stamped(t0 + Duration::from_micros(300));
        // The agent looks 3 ms later (it got the CPU late) and finds the answer whole.
        c.poll(t0 + Duration::from_millis(3), &occ(0), progress(1, 5));
        assert_eq!(c.take_outcome(), Some(Outcome::Tasks { tasks: 5, round_trip: Some(Duration::from_micros(150)) }));
        // The rings still lack tasks, so it asked again at 3 ms. Without a stamp the round
        // trip ends when the frames were seen.
        c.poll(t0 + Duration::from_millis(4), &occ(0), progress(1, 5));
        c.poll(t0 + Duration::from_millis(5), &occ(0), progress(2, 7));
        assert_eq!(c.take_outcome(), Some(Outcome::Tasks { tasks: 2, round_trip: Some(Duration::from_millis(2)) }));
    }

    #[test]
    fn halted_controllers_ask_for_nothing() {
        let mut c = controller();
        c.halt();
        assert_eq!(c.poll(Instant::now(), &occ(0), progress(0, 0)), Action::Nothing);
    }
}

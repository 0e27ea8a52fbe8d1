//! Dynamic provisioning of executors (CloudKon §II.C): a provisioner on each host reads
//! tier 2's queued tasks per resource bit at a set interval and, when a class's backlog
//! grows faster than a threshold, starts `bolt executor` processes offering that class, up
//! to a per-host maximum. Executors retire themselves: one that has been idle for a while
//! and is near the end of its lease period (CloudKon's hourly-billing rule: a paid-for
//! hour is used to its end) exits.
//!
//! The backlog is tier 2's view ([`crate::queue::ResourceBacklog`], read from the
//! switch's /stats): every client's queued tasks, which is what executors pull from. The
//! client's BitMagic vectors (`Tracker::backlog_for`) are one client's view of the same
//! thing, Pending and Running included; a per-client provisioner could read them instead.
//!
//! Both rules are plain state machines with time passed in: [`Provisioner`] decides which
//! classes to start from observations, [`Retirement`] decides when an executor leaves;
//! `cli.rs` does the I/O (HTTP reads, child processes).

pub mod cli;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::queue::{ResourceBacklog, RESOURCE_BITS};

pub use cli::{run, HostProvisioner, ProvisionArgs, ProvisionEvent};

/// Which executors to start: ones offering one resource bit, or ones for tasks that need
/// none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ResourceClass {
    Unconstrained,
    Bit(u8),
}

impl ResourceClass {
    /// Every class, in the order the backlog lists them.
    pub fn all() -> impl Iterator<Item = ResourceClass> {
        std::iter::once(ResourceClass::Unconstrained).chain((0..RESOURCE_BITS as u8).map(ResourceClass::Bit))
    }

    /// The EXEC_RSRC bitmap an executor of this class offers; `unconstrained` is what
    /// one started for tasks needing nothing offers.
    pub fn resources(self, unconstrained: u8) -> u8 {
        match self {
            ResourceClass::Unconstrained => unconstrained,
            ResourceClass::Bit(b) => 1 << b,
        }
    }

    /// Tasks of this class queued in `backlog`.
    pub fn queued(self, backlog: &ResourceBacklog) -> u32 {
        match self {
            ResourceClass::Unconstrained => backlog.queued_unconstrained,
            ResourceClass::Bit(b) => backlog.queued_by_resource[b as usize],
        }
    }
}

/// When to start executors.
#[derive(Clone, Copy, Debug)]
pub struct ProvisionConfig {
    /// Backlog growth above which a class gets more executors, in tasks per second.
    pub growth_threshold: f64,
    /// Most executors this host runs at once.
    pub max_executors: usize,
}

/// One reading of tier 2 and of this host.
#[derive(Clone, Debug)]
pub struct Observation {
    pub now: Instant,
    pub backlog: ResourceBacklog,
    /// Executors of this host still running.
    pub running: usize,
}

/// What one step decided.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Decision {
    /// Executors to start, one entry each.
    pub start: Vec<ResourceClass>,
    /// Backlog growth per class over the last interval, tasks per second (same order as
    /// [`ResourceClass::all`]).
    pub growth: Vec<f64>,
}

/// The provisioner's rule. The first observation is compared with an empty backlog, so a
/// backlog already waiting counts as growth.
#[derive(Debug)]
pub struct Provisioner {
    cfg: ProvisionConfig,
    previous: Option<(Instant, ResourceBacklog)>,
}

impl Provisioner {
    pub fn new(cfg: ProvisionConfig) -> Provisioner {
        Provisioner { cfg, previous: None }
    }

    /// Growth per class since the previous observation, and the executors to start:
    /// classes whose backlog grew faster than the threshold, the largest backlog first,
    /// each given one executor per threshold's worth of growth (one each before a second
    /// to any), until the host's maximum.
    pub fn step(&mut self, obs: &Observation, interval: Duration) -> Decision {
        let (then, before) = self.previous.take().unwrap_or_else(|| (obs.now - interval, ResourceBacklog::default()));
        let secs = obs.now.saturating_duration_since(then).as_secs_f64().max(1e-3);
        self.previous = Some((obs.now, obs.backlog.clone()));
        let growth: Vec<f64> =
            ResourceClass::all().map(|c| (c.queued(&obs.backlog) as f64 - c.queued(&before) as f64) / secs).collect();
        let mut growing: Vec<(ResourceClass, f64)> =
            ResourceClass::all().zip(growth.iter().copied()).filter(|&(_, g)| g > self.cfg.growth_threshold).collect();
        growing.sort_by_key(|&(c, _)| std::cmp::Reverse(c.queued(&obs.backlog)));
        let room = self.cfg.max_executors.saturating_sub(obs.running);
        let wanted: Vec<(ResourceClass, usize)> = growing
            .into_iter()
            .map(|(c, g)| (c, (g / self.cfg.growth_threshold.max(f64::MIN_POSITIVE)).ceil().max(1.0) as usize))
            .collect();
        // Round by round, so that every growing class gets one before any gets two.
        let mut start = Vec::new();
        for round in 0..wanted.iter().map(|&(_, n)| n).max().unwrap_or(0) {
            for &(class, n) in &wanted {
                if round < n && start.len() < room {
                    start.push(class);
                }
            }
        }
        Decision { start, growth }
    }
}

/// CloudKon's retirement rule: an executor leaves when it has been idle for at least
/// `idle` and the current lease period (counted from its start) ends within `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetirementRule {
    pub period: Duration,
    pub idle: Duration,
    pub window: Duration,
}

/// One executor's retirement state: its start and its last sign of work.
#[derive(Debug)]
pub struct Retirement {
    rule: RetirementRule,
    started: Instant,
    last_busy: Instant,
    last_tasks: u64,
}

impl Retirement {
    pub fn new(rule: RetirementRule, now: Instant) -> Retirement {
        Retirement { rule, started: now, last_busy: now, last_tasks: 0 }
    }

    /// Called with the tasks the executor has finished so far; true when it should retire
    /// now. Idleness is time since a task last finished, so `idle` must be longer than
    /// the longest task (the executor's task time limit bounds it).
    pub fn poll(&mut self, now: Instant, tasks_done: u64) -> bool {
        if tasks_done != self.last_tasks {
            self.last_tasks = tasks_done;
            self.last_busy = now;
            return false;
        }
        let idle = now.saturating_duration_since(self.last_busy) >= self.rule.idle;
        idle && self.near_period_end(now)
    }

    /// Within `window` of the end of the current lease period.
    pub fn near_period_end(&self, now: Instant) -> bool {
        let period = self.rule.period.as_nanos().max(1);
        let into = now.saturating_duration_since(self.started).as_nanos() % period;
        period - into <= self.rule.window.as_nanos()
    }

    /// Lease periods begun so far (what a per-period bill charges).
    pub fn periods_used(&self, now: Instant) -> u64 {
        let period = self.rule.period.as_nanos().max(1);
        (now.saturating_duration_since(self.started).as_nanos() / period) as u64 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn backlog(unconstrained: u32, bits: &[(usize, u32)]) -> ResourceBacklog {
        let mut b = ResourceBacklog { queued_unconstrained: unconstrained, ..ResourceBacklog::default() };
        for &(bit, n) in bits {
            b.queued_by_resource[bit] = n;
        }
        b
    }

    fn observe(p: &mut Provisioner, t0: Instant, secs: u64, b: ResourceBacklog, running: usize) -> Decision {
        p.step(&Observation { now: t0 + SEC * secs as u32, backlog: b, running }, SEC)
    }

    #[test]
    fn a_growing_class_gets_executors_up_to_the_hosts_maximum() {
        let t0 = Instant::now();
        let mut p = Provisioner::new(ProvisionConfig { growth_threshold: 10.0, max_executors: 4 });
        // 25 tasks/s of bit 2: three executors (one per 10 tasks/s of growth).
        let d = observe(&mut p, t0, 1, backlog(0, &[(2, 25)]), 0);
        assert_eq!(d.start, vec![ResourceClass::Bit(2); 3]);
        assert_eq!(d.growth[3], 25.0);
        // Still growing at 30/s with 3 running: one more fits under the maximum of 4.
        let d = observe(&mut p, t0, 2, backlog(0, &[(2, 55)]), 3);
        assert_eq!(d.start, vec![ResourceClass::Bit(2)]);
        // At the maximum nothing starts, however fast it grows.
        assert!(observe(&mut p, t0, 3, backlog(0, &[(2, 500)]), 4).start.is_empty());
    }

    #[test]
    fn a_steady_or_shrinking_backlog_starts_nothing() {
        let t0 = Instant::now();
        let mut p = Provisioner::new(ProvisionConfig { growth_threshold: 10.0, max_executors: 8 });
        assert_eq!(observe(&mut p, t0, 1, backlog(5, &[]), 0).start, vec![]);
        assert!(observe(&mut p, t0, 2, backlog(14, &[]), 0).start.is_empty(), "9/s is under the threshold");
        assert!(observe(&mut p, t0, 3, backlog(3, &[]), 0).start.is_empty());
    }

    #[test]
    fn the_class_with_the_largest_backlog_is_served_first() {
        let t0 = Instant::now();
        let mut p = Provisioner::new(ProvisionConfig { growth_threshold: 10.0, max_executors: 2 });
        let d = observe(&mut p, t0, 1, backlog(15, &[(0, 40), (5, 20)]), 0);
        assert_eq!(d.start, vec![ResourceClass::Bit(0), ResourceClass::Bit(5)], "bit 0 holds the most, then bit 5");
        let mut p = Provisioner::new(ProvisionConfig { growth_threshold: 10.0, max_executors: 4 });
        let d = observe(&mut p, t0, 1, backlog(15, &[(0, 11), (5, 20)]), 0);
        let (b0, b5, any) = (ResourceClass::Bit(0), ResourceClass::Bit(5), ResourceClass::Unconstrained);
        assert_eq!(d.start, vec![b5, any, b0, b5], "one each, largest backlog first, then a second");
        assert_eq!(ResourceClass::Bit(5).resources(0), 0b10_0000);
        assert_eq!(ResourceClass::Unconstrained.resources(0xff), 0xff);
    }

    #[test]
    fn growth_is_measured_over_the_time_that_passed() {
        let t0 = Instant::now();
        let mut p = Provisioner::new(ProvisionConfig { growth_threshold: 10.0, max_executors: 8 });
        observe(&mut p, t0, 1, backlog(0, &[]), 0);
        // 15 tasks in 2 s is 7.5/s: under the threshold.
        assert!(observe(&mut p, t0, 3, backlog(15, &[]), 0).start.is_empty());
    }

    #[test]
    fn an_idle_executor_retires_only_near_the_end_of_its_lease_period() {
        let rule = RetirementRule { period: SEC * 10, idle: SEC * 2, window: SEC };
        let t0 = Instant::now();
        let mut r = Retirement::new(rule, t0);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(!r.poll(at(3_000), 0), "idle but mid-period");
        assert!(!r.poll(at(8_999), 0), "idle, not yet within the window");
        assert!(r.poll(at(9_000), 0), "idle and in the last second of the period");
        assert_eq!(r.periods_used(at(9_000)), 1);
        // Busy: work in the window keeps it for the next period.
        let mut r = Retirement::new(rule, t0);
        assert!(!r.poll(at(8_500), 3));
        assert!(!r.poll(at(9_500), 3), "idle for 1 s only");
        assert!(!r.poll(at(10_200), 3), "a new period began");
        assert!(r.poll(at(19_100), 3), "idle since 8.5 s, at the end of the second period");
        assert_eq!(r.periods_used(at(19_100)), 2);
    }
}

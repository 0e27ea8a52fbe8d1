//! Counter values summed across CPUs.

use std::fmt;

use scheduler_common::maps::{Counter, Counters, COUNTER_COUNT};

/// The program's counters at one moment, summed over every CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot(pub Counters);

impl CounterSnapshot {
    pub fn sum<'a>(per_cpu: impl Iterator<Item = &'a Counters>) -> CounterSnapshot {
        let mut total = Counters::default();
        for c in per_cpu {
            for (t, v) in total.values.iter_mut().zip(c.values) {
                *t = t.wrapping_add(v);
            }
        }
        CounterSnapshot(total)
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.0.get(c)
    }

    /// Hits of priority `prio` (1-based).
    pub fn hits(&self, prio: u8) -> u64 {
        self.0.hits(prio)
    }

    /// Hits of every priority.
    pub fn total_hits(&self) -> u64 {
        (1..=scheduler_common::maps::RING_COUNT as u8).map(|p| self.hits(p)).sum()
    }

    /// What changed from `earlier` to `self`.
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        let mut d = Counters::default();
        for i in 0..COUNTER_COUNT {
            d.values[i] = self.0.values[i].wrapping_sub(earlier.0.values[i]);
        }
        CounterSnapshot(d)
    }

    /// `(name, value)` of every counter.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Counter::ALL.iter().map(|c| (c.name(), self.get(*c)))
    }
}

impl fmt::Display for CounterSnapshot {
    /// One `name value` line per non-zero counter.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, v) in self.iter().filter(|(_, v)| *v != 0) {
            writeln!(f, "{name:<16} {v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_across_cpus_and_diffs() {
        let mut a = Counters::default();
        a.values[Counter::Miss as usize] = 2;
        a.values[Counter::HitP2 as usize] = 1;
        let mut b = Counters::default();
        b.values[Counter::Miss as usize] = 3;
        let s = CounterSnapshot::sum([a, b].iter());
        assert_eq!(s.get(Counter::Miss), 5);
        assert_eq!(s.hits(2), 1);
        assert_eq!(s.total_hits(), 1);
        let d = s.since(&CounterSnapshot::sum([a].iter()));
        assert_eq!(d.get(Counter::Miss), 3);
        assert_eq!(d.hits(2), 0);
        assert_eq!(s.to_string(), "hit_p2           1\nmiss             5\n");
    }
}

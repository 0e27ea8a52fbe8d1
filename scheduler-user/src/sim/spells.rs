//! The testbed machine's slow spells, replayed. In a spell (`calibrate::slow_spells`:
//! windows in which the executors' waits ran at four times their median or more) every
//! thread on the two shared cores is slow at once: the switch's wake-up, handling and
//! sending, and the executors' waits, each near the top of its distribution
//! (docs/benchmarks.md, "Where SW1's tail goes"). Drawn independently, the costs keep
//! their distributions but lose that, and with it the p99.
//!
//! Here a cost drawn inside a spell reads its measured distribution in the top share f of
//! it, and one drawn outside in the bottom 1 − f, f being the share of the run the spells
//! cover: u is mapped to 1 − f + f·u inside and to (1 − f)·u outside. As draws are spread
//! over the run as the spells are, each cost keeps its distribution, and inside a spell
//! all are slow together.

use rand::Rng;

use super::clock::Nanos;
use super::executors::Draw;

/// Spells (from, to) in order, and the share of the run they cover.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spells {
    windows: Vec<(Nanos, Nanos)>,
    share: f64,
}

impl Spells {
    /// `windows` (from, to) of a run `run_ns` long; the share is their total over it.
    pub fn new(mut windows: Vec<(Nanos, Nanos)>, run_ns: Nanos) -> Spells {
        windows.retain(|&(from, to)| to > from);
        windows.sort_unstable();
        let covered: Nanos = windows.iter().map(|&(from, to)| to - from).sum();
        let share = if run_ns == 0 { 0.0 } else { (covered as f64 / run_ns as f64).min(1.0) };
        Spells { windows, share }
    }

    pub fn share(&self) -> f64 {
        self.share
    }

    /// Whether `t` falls in a spell.
    pub fn contains(&self, t: Nanos) -> bool {
        let i = self.windows.partition_point(|&(from, _)| from <= t);
        i > 0 && t < self.windows[i - 1].1
    }

    /// `d` drawn at `t`: from the top share of its distribution in a spell, from the rest
    /// outside one. Without spells, exactly `d.sample(rng)`.
    pub fn draw(&self, d: &Draw, t: Nanos, rng: &mut impl Rng) -> Nanos {
        if self.share == 0.0 {
            return d.sample(rng);
        }
        let f = self.share;
        d.sample_with(rng, |u| if self.contains(t) { 1.0 - f + f * u } else { (1.0 - f) * u })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn a_draw_in_a_spell_is_from_the_top_and_the_distribution_is_kept() {
        // 10 % of a 1 s run in two spells.
        let spells = Spells::new(vec![(500_000_000, 550_000_000), (100_000_000, 150_000_000)], 1_000_000_000);
        assert!((spells.share() - 0.1).abs() < 1e-12);
        assert!(spells.contains(100_000_000) && spells.contains(549_999_999));
        assert!(!spells.contains(99_999_999) && !spells.contains(150_000_000) && !spells.contains(600_000_000));
        let d = Draw::Quantiles(vec![(0.0, 0), (1.0, 1_000)]);
        let mut rng = StdRng::seed_from_u64(3);
        // Inside a spell every draw is in the top tenth, outside none is.
        assert!((0..1_000).all(|_| spells.draw(&d, 120_000_000, &mut rng) >= 900));
        assert!((0..1_000).all(|_| spells.draw(&d, 300_000_000, &mut rng) <= 900));
        // Drawn at times spread over the run, the distribution is the measured one.
        let n = 100_000u64;
        let draws: Vec<Nanos> = (0..n).map(|k| spells.draw(&d, k * 10_000, &mut rng)).collect();
        let top = draws.iter().filter(|&&v| v > 900).count() as f64 / n as f64;
        let mean = draws.iter().sum::<Nanos>() as f64 / n as f64;
        assert!((top - 0.1).abs() < 0.005 && (mean - 500.0).abs() < 5.0, "{top} {mean}");
    }

    #[test]
    fn without_spells_a_draw_is_the_plain_one() {
        let none = Spells::new(Vec::new(), 1_000_000);
        let d = Draw::Quantiles(vec![(0.0, 0), (1.0, 1_000)]);
        let (mut a, mut b) = (StdRng::seed_from_u64(9), StdRng::seed_from_u64(9));
        assert!((0..100).all(|k| none.draw(&d, k, &mut a) == d.sample(&mut b)));
    }
}

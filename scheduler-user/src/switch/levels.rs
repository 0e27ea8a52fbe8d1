//! Which priority levels tier 2 holds tasks in, as one bitmap: the source of the BEST
//! stamp on every ASSIGN, NOOP and REFILL the switch sends, and of HINT.
//!
//! A bit is set by every enqueue at its level and cleared only when a retrieval finds the
//! level empty (`add_ptr - retrieve_ptr <= 0`, the test the retrieve pass already makes),
//! so BEST never misses a task that is queued. It may name a level that has just emptied
//! by some other path; the next retrieval there corrects it.

use crate::queue::{Pipeline, Ring};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Levels {
    /// Bit l: level l (0-based, priority l + 1) holds tasks.
    bits: u8,
}

impl Levels {
    /// Marks level `l` non-empty after an enqueue there; true if it was clear (a HINT is due).
    pub fn set(&mut self, l: usize) -> bool {
        let bit = 1u8 << l;
        let was_clear = self.bits & bit == 0;
        self.bits |= bit;
        was_clear
    }

    /// After a retrieval that searched levels `from..`: clears the bit of each it left empty.
    pub fn after_retrieval(&mut self, from: usize, pipeline: &Pipeline) {
        for l in from..pipeline.config().priorities as usize {
            if level_is_empty(pipeline, l) {
                self.bits &= !(1u8 << l);
            }
        }
    }

    /// After an enqueue at level `l`: sets its bit if the task is there (a refused task
    /// left the level as it was). True if the bit was clear.
    pub fn after_enqueue(&mut self, l: usize, pipeline: &Pipeline) -> bool {
        !level_is_empty(pipeline, l) && self.set(l)
    }

    /// BEST: the highest-priority non-empty level as a wire priority (1 = highest), 0 if
    /// every level is believed empty.
    pub fn best(&self) -> u8 {
        if self.bits == 0 {
            0
        } else {
            self.bits.trailing_zeros() as u8 + 1
        }
    }

    /// BEST as told to one requester: the levels `from..to` (0-based) are left out, because
    /// its retrieval just searched them and found nothing it can run.
    pub fn best_excluding(&self, from: usize, to: usize) -> u8 {
        let span = to.saturating_sub(from).min(8);
        let mask = (((1u16 << span) - 1) << from.min(8)) as u8;
        let bits = self.bits & !mask;
        if bits == 0 {
            0
        } else {
            bits.trailing_zeros() as u8 + 1
        }
    }

    /// True if some level at or below `from` (0-based) holds tasks.
    pub fn any_from(&self, from: usize) -> bool {
        from < 8 && self.bits >> from != 0
    }
}

fn level_is_empty(pipeline: &Pipeline, l: usize) -> bool {
    queued(pipeline, l) == 0
}

/// The tasks queued at level `l` (0-based): the distance between its pointers, 0 when
/// the retrieve pointer ran ahead.
pub fn queued(pipeline: &Pipeline, l: usize) -> u32 {
    let (add, retrieve) = pipeline.pointers(l);
    Ring::distance(add, retrieve).max(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_is_the_highest_set_level() {
        let mut l = Levels::default();
        assert_eq!(l.best(), 0);
        assert!(l.set(2));
        assert!(!l.set(2), "already set: no second HINT");
        assert_eq!(l.best(), 3);
        assert!(l.set(0));
        assert_eq!(l.best(), 1);
        assert!(l.any_from(1) && l.any_from(2) && !l.any_from(3));
        assert_eq!(l.best_excluding(0, 1), 3);
        assert_eq!(l.best_excluding(0, 4), 0);
        assert_eq!(l.best_excluding(1, 4), 1);
        assert_eq!(l.best_excluding(0, 0), 1);
    }
}

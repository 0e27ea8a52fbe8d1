//! Simulated time and the event queue: a binary heap ordered by (time, insertion order),
//! so that events at the same nanosecond run in the order they were scheduled and a run
//! is a pure function of its seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::engine::Event;

/// Nanoseconds since the start of the simulation.
pub type Nanos = u64;

#[derive(Clone, Copy)]
struct Scheduled {
    at: Nanos,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed: the heap's maximum is the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

pub struct EventQueue {
    heap: BinaryHeap<Scheduled>,
    seq: u64,
    now: Nanos,
    processed: u64,
}

impl Default for EventQueue {
    fn default() -> EventQueue {
        EventQueue::new()
    }
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue { heap: BinaryHeap::with_capacity(1 << 16), seq: 0, now: 0, processed: 0 }
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Events handed out so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    /// Schedules `event` at `at` (never before now).
    pub fn at(&mut self, at: Nanos, event: Event) {
        self.seq += 1;
        self.heap.push(Scheduled { at: at.max(self.now), seq: self.seq, event });
    }

    /// Schedules `event` `delay` from now.
    pub fn after(&mut self, delay: Nanos, event: Event) {
        self.at(self.now + delay, event);
    }

    /// The next event, advancing the clock to it.
    pub fn pop(&mut self) -> Option<Event> {
        let s = self.heap.pop()?;
        self.now = s.at;
        self.processed += 1;
        Some(s.event)
    }
}

//! A lock-free ring of ENTRY in one array-map value, measured against the queue maps the
//! XDP program uses (`bolt bench xdp --rings`, docs/xdp.md, "A lock-free ring"): a
//! bounded multi-producer multi-consumer queue whose slots each carry a sequence number
//! (D. Vyukov's bounded MPMC queue). A producer claims position `tail` by compare-and-swap
//! when that slot's sequence equals `tail`, writes the entry, and publishes it with
//! sequence `tail + 1`; a consumer claims `head` when the sequence equals `head + 1`,
//! copies the entry out, and frees the slot for the next lap with `head + capacity`. No
//! lock is held at any point, and a stalled thread blocks only its own slot.
//!
//! The kernel side is `scheduler-ebpf/src/ring_bench/`; this is the layout both sides
//! share, and the initial state userspace writes.

use crate::Entry;

/// Slots in the ring: a power of two, so a position's slot is `position & (capacity - 1)`.
pub const LOCKFREE_CAPACITY: usize = 256;

/// The array map holding the one [`LockFreeRing`].
pub const LOCKFREE_MAP: &str = "BENCH_LOCKFREE";

/// The queue map of [`Entry`] the same measurement runs on.
pub const BENCH_QUEUE_MAP: &str = "BENCH_QUEUE";

/// The queue map of [`Entry`] a lock-free push that gives up puts its entry in.
pub const BENCH_OVERFLOW_MAP: &str = "BENCH_OVERFLOW";

/// The programs of the ring-bench object: each run pops one entry and pushes it back
/// (`empty` does nothing: the test-run loop's own cost). Their names in
/// `scheduler-ebpf/src/ring_bench/main.rs` must equal these.
pub const RING_BENCH_EMPTY: &str = "ring_bench_empty";
pub const RING_BENCH_QUEUE: &str = "ring_bench_queue";
/// The queue map with the reservation counter a hit and a REFILL keep beside it.
pub const RING_BENCH_QUEUE_RESERVED: &str = "ring_bench_queue_reserved";
pub const RING_BENCH_LOCKFREE: &str = "ring_bench_lockfree";

/// One slot: its sequence number and an ENTRY in wire format.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockFreeSlot {
    pub seq: u64,
    pub entry: Entry,
}

/// The ring. Head, tail and the bench's counters each have a cache line of their own, so
/// producers and consumers do not write the same line.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LockFreeRing {
    /// Next position to pop.
    pub head: u64,
    _head_line: [u64; 7],
    /// Next position to push.
    pub tail: u64,
    _tail_line: [u64; 7],
    /// Pops that found nothing to take: the head's entry not yet published (its producer
    /// is between claiming the position and publishing it), or the compare-and-swap lost
    /// to other CPUs more times than the program tries. Nothing is taken.
    pub empty_pops: u64,
    /// Pushes that gave up: the ring full (a consumer a whole lap behind, between claiming
    /// a slot and freeing it), or the compare-and-swap lost too often. The bench program
    /// then puts the entry in its overflow queue.
    pub failed_pushes: u64,
    _counts_line: [u64; 6],
    pub slots: [LockFreeSlot; LOCKFREE_CAPACITY],
}

impl LockFreeRing {
    /// A ring holding `entries` (at most the capacity) at positions 0.., ready to pop.
    pub fn with_entries(entries: &[Entry]) -> LockFreeRing {
        let n = entries.len().min(LOCKFREE_CAPACITY);
        let mut ring = LockFreeRing {
            head: 0,
            _head_line: [0; 7],
            tail: n as u64,
            _tail_line: [0; 7],
            empty_pops: 0,
            failed_pushes: 0,
            _counts_line: [0; 6],
            slots: [LockFreeSlot { seq: 0, entry: Entry::default() }; LOCKFREE_CAPACITY],
        };
        for (i, slot) in ring.slots.iter_mut().enumerate() {
            // A full slot of lap 0 has sequence position + 1; an empty one, its position.
            slot.seq = if i < n { i as u64 + 1 } else { i as u64 };
            if i < n {
                slot.entry = entries[i];
            }
        }
        ring
    }

    /// The entries between head and tail, in pop order, if every one of them is
    /// published (sequence = position + 1) and every other slot is free for its next
    /// push; `None` when the state is inconsistent.
    pub fn queued(&self) -> Option<impl Iterator<Item = &Entry> + '_> {
        let cap = LOCKFREE_CAPACITY as u64;
        if self.tail < self.head || self.tail - self.head > cap {
            return None;
        }
        let slot = move |pos: u64| &self.slots[(pos % cap) as usize];
        // Published entries from head to tail; free slots wait for tail .. head + capacity.
        let consistent = (self.head..self.tail).all(|p| slot(p).seq == p + 1)
            && (self.tail..self.head + cap).all(|p| slot(p).seq == p);
        consistent.then(|| (self.head..self.tail).map(move |p| &slot(p).entry))
    }
}

const _: () = {
    assert!(LOCKFREE_CAPACITY.is_power_of_two());
    assert!(core::mem::size_of::<LockFreeSlot>() == 48);
    assert!(core::mem::size_of::<LockFreeRing>() == 192 + 48 * LOCKFREE_CAPACITY);
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: repr(C), integer fields only, no padding (sizes asserted above).
    unsafe impl aya::Pod for super::LockFreeRing {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tag: u8) -> Entry {
        Entry::new(u32::from(tag), 0, crate::Task::default(), [0; 4], 0)
    }

    fn tags(ring: &LockFreeRing) -> Option<([u8; 8], usize)> {
        let mut out = [0u8; 8];
        let mut n = 0;
        for e in ring.queued()? {
            out[n] = e.uid() as u8;
            n += 1;
        }
        Some((out, n))
    }

    #[test]
    fn a_new_ring_holds_its_entries_in_order() {
        let ring = LockFreeRing::with_entries(&[entry(1), entry(2), entry(3)]);
        assert_eq!(tags(&ring), Some(([1, 2, 3, 0, 0, 0, 0, 0], 3)));
    }

    #[test]
    fn a_slot_with_the_wrong_sequence_is_inconsistent() {
        let mut ring = LockFreeRing::with_entries(&[entry(1), entry(2)]);
        ring.slots[1].seq = 7;
        assert!(ring.queued().is_none());
        let mut ring = LockFreeRing::with_entries(&[entry(1)]);
        ring.slots[5].seq = 6;
        assert!(ring.queued().is_none());
    }

    #[test]
    fn a_ring_after_whole_laps_reads_back() {
        // Head and tail two laps on: every slot's sequence moved on by the same.
        let mut ring = LockFreeRing::with_entries(&[entry(9)]);
        let lap = 2 * LOCKFREE_CAPACITY as u64;
        ring.head += lap;
        ring.tail += lap;
        for s in ring.slots.iter_mut() {
            s.seq += lap;
        }
        assert_eq!(tags(&ring), Some(([9, 0, 0, 0, 0, 0, 0, 0], 1)));
    }
}

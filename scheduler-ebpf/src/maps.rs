//! The maps. Names must equal those in `scheduler_common::maps` (userspace finds the maps
//! by them; a loader test checks every listed name exists in the object).

use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    macros::map,
    maps::{Array, PerCpuArray, Queue, RingBuf},
};
use scheduler_common::{
    maps::{
        Counters, HostWaiter, RingStates, XdpConfig, DEDICATED_CAPACITY, DEFAULT_OVERFLOW_CAPACITY,
        DEFAULT_RING_CAPACITY, EVENTS_BYTES, MAX_HOST_WAITERS, WAITERS_CAPACITY,
    },
    Entry,
};

// One queue per priority. Queue maps take a spin lock per push/pop, so any number of
// CPUs and the agent may produce and consume concurrently.
#[map]
pub static BOLT_RING_1: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);
#[map]
pub static BOLT_RING_2: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);
#[map]
pub static BOLT_RING_3: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);
#[map]
pub static BOLT_RING_4: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);
#[map]
pub static BOLT_RING_5: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);
#[map]
pub static BOLT_RING_6: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);
#[map]
pub static BOLT_RING_7: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);
#[map]
pub static BOLT_RING_8: Queue<Entry> = Queue::with_max_entries(DEFAULT_RING_CAPACITY, 0);

// The dedicated ring (MATRIX's LReadyQ): tasks PINned to this host, served first.
#[map]
pub static BOLT_DEDICATED: Queue<Entry> = Queue::with_max_entries(DEDICATED_CAPACITY, 0);

#[map]
pub static BOLT_OVERFLOW: Queue<Entry> = Queue::with_max_entries(DEFAULT_OVERFLOW_CAPACITY, 0);

// Executors waiting at this host, oldest first, and each one's newest request.
#[map]
pub static BOLT_WAITERS: Queue<HostWaiter> = Queue::with_max_entries(WAITERS_CAPACITY, 0);
#[map]
pub static BOLT_WAIT_SEQ: Array<u32> = Array::with_max_entries(MAX_HOST_WAITERS, 0);

#[map]
pub static BOLT_RING_STATE: Array<RingStates> = Array::with_max_entries(1, BPF_F_MMAPABLE);

#[map]
pub static BOLT_CONFIG: Array<XdpConfig> = Array::with_max_entries(1, 0);

#[map]
pub static BOLT_COUNTERS: PerCpuArray<Counters> = PerCpuArray::with_max_entries(1, 0);

#[map]
pub static BOLT_EVENTS: RingBuf = RingBuf::with_byte_size(EVENTS_BYTES, 0);

/// The ring of priority `prio` (1-based).
#[inline(always)]
pub fn ring(prio: u32) -> Option<&'static Queue<Entry>> {
    Some(match prio {
        1 => &BOLT_RING_1,
        2 => &BOLT_RING_2,
        3 => &BOLT_RING_3,
        4 => &BOLT_RING_4,
        5 => &BOLT_RING_5,
        6 => &BOLT_RING_6,
        7 => &BOLT_RING_7,
        8 => &BOLT_RING_8,
        _ => return None,
    })
}

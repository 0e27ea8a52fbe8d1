//! The per-priority task rings with their reservation counters and low-watermark events.
//!
//! Protocol (shared with userspace, see `scheduler_common::maps::RingState`):
//! producers reserve a slot (`reserved += 1`, undone when that exceeds the capacity) and
//! then push; consumers pop and release the slot (`reserved -= 1`) only once the task is
//! delivered. A popped task that cannot be delivered is pushed back into its still
//! reserved slot, which therefore always exists.

use core::ffi::c_void;

use aya_ebpf::{
    helpers::{bpf_ktime_get_coarse_ns, bpf_map_pop_elem, bpf_map_push_elem},
    maps::Queue,
};
use scheduler_common::{
    maps::{Counter, RingEvent, RingState, XdpConfig, EVENT_LOW_WATERMARK, RING_COUNT},
    Entry,
};

use crate::{
    atomic,
    counters::Tally,
    maps::{ring, BOLT_EVENTS, BOLT_OVERFLOW, BOLT_RING_STATE},
};

/// A ring entry on the stack, 8-byte aligned so that it is copied in words.
#[repr(C, align(8))]
pub struct Slot(pub [u8; Entry::LEN]);

impl Slot {
    /// Offset of the task's resource bitmap in an ENTRY (uid, jid, tid, prio, rsrc).
    const TASK_RSRC: usize = 13;

    #[inline(always)]
    pub const fn empty() -> Slot {
        Slot([0; Entry::LEN])
    }

    #[inline(always)]
    pub fn task_rsrc(&self) -> u8 {
        self.0[Self::TASK_RSRC]
    }

    #[inline(always)]
    pub fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }
}

/// Pushes the 40 bytes at `entry` (frame or stack) into `q`; the kernel copies them.
#[inline(always)]
fn push_raw(q: &Queue<Entry>, entry: *const u8) -> bool {
    // SAFETY: `q` is a queue map of 40-byte values (its address is the map definition the
    // loader relocates) and `entry` points at 40 readable bytes.
    unsafe { bpf_map_push_elem(core::ptr::from_ref(q).cast_mut().cast(), entry as *const c_void, 0) == 0 }
}

/// What bpf_map_pop_elem returns for an empty queue.
const ENOENT: i64 = -2;

pub enum Pushed {
    Stored,
    /// No slot left (or the queue refused it); nothing was changed.
    Full,
}

/// The ring a task of priority `prio` queues in: priorities beyond the levels in use
/// queue at the lowest level in use.
#[inline(always)]
pub fn ring_for(prio: u8, cfg: &XdpConfig) -> u32 {
    let lowest = levels(cfg);
    if prio as u32 > lowest {
        lowest
    } else {
        prio as u32
    }
}

/// Levels in use, clamped to 1..=RING_COUNT.
#[inline(always)]
pub fn levels(cfg: &XdpConfig) -> u32 {
    match cfg.levels {
        0 => 1,
        l if l as usize > RING_COUNT => RING_COUNT as u32,
        l => l as u32,
    }
}

#[inline(always)]
fn state(prio: u32) -> Option<*mut RingState> {
    BOLT_RING_STATE.get_ptr_mut(prio.wrapping_sub(1))
}

#[inline(always)]
fn reserved_ptr(st: *mut RingState) -> *mut i64 {
    // SAFETY: `st` is a valid map value pointer; this only computes a field address.
    unsafe { core::ptr::addr_of_mut!((*st).reserved) }
}

/// Reserves up to `want` slots in ring `prio` at once; returns how many it got.
#[inline(always)]
pub fn reserve(prio: u32, want: u32, cfg: &XdpConfig) -> u32 {
    let Some(st) = state(prio) else { return 0 };
    let slot = reserved_ptr(st);
    let want = want as i64;
    let before = atomic::fetch_add(slot, want);
    let room = cfg.ring_capacity as i64 - before;
    if room >= want {
        return want as u32;
    }
    let got = if room > 0 { room } else { 0 };
    atomic::add(slot, got - want);
    got as u32
}

/// Gives back `n` reserved slots that were not used.
#[inline(always)]
pub fn unreserve(prio: u32, n: u32) {
    if n != 0 {
        if let Some(st) = state(prio) {
            atomic::add(reserved_ptr(st), -(n as i64));
        }
    }
}

/// Pushes the entry at `entry` into ring `prio`, into a slot reserved beforehand.
#[inline(always)]
pub fn push_reserved(prio: u32, entry: *const u8, tally: &mut Tally) -> Pushed {
    let Some(q) = ring(prio) else { return Pushed::Full };
    if push_raw(q, entry) {
        return Pushed::Stored;
    }
    // The map holds fewer entries than configured, or its lock failed.
    unreserve(prio, 1);
    tally.add(Counter::RingErrors);
    Pushed::Full
}

/// Pushes the entry at `entry` into the overflow queue.
#[inline(always)]
pub fn push_overflow(entry: *const u8) -> bool {
    push_raw(&BOLT_OVERFLOW, entry)
}

/// Pops the head of ring `prio` into `slot` without releasing its reservation. Skips the
/// helper call when nothing is reserved (the ring is then empty).
#[inline(always)]
pub fn pop(prio: u32, slot: &mut Slot, tally: &mut Tally) -> bool {
    let (Some(st), Some(q)) = (state(prio), ring(prio)) else { return false };
    // SAFETY: valid map value; a racy read is fine, reserved >= queued at all times.
    if unsafe { core::ptr::read_volatile(reserved_ptr(st)) } <= 0 {
        return false;
    }
    // SAFETY: as in `push_raw`; `slot` has room for one value.
    let ret = unsafe { bpf_map_pop_elem(core::ptr::from_ref(q).cast_mut().cast(), slot.0.as_mut_ptr().cast()) };
    match ret {
        0 => true,
        ENOENT => false,
        _ => {
            tally.add(Counter::RingErrors);
            false
        }
    }
}

/// Puts a popped, undelivered task back at the tail of its ring (its slot is still
/// reserved). Should the push fail anyway, the task goes to the overflow queue, from
/// which the agent returns it to tier 2.
#[inline(always)]
pub fn put_back(prio: u32, slot: &Slot, tally: &mut Tally) {
    if let Some(q) = ring(prio) {
        if push_raw(q, slot.as_ptr()) {
            return;
        }
    }
    tally.add(Counter::RingErrors);
    unreserve(prio, 1);
    if push_overflow(slot.as_ptr()) {
        tally.add(Counter::Overflow);
    }
}

/// Releases the slot of a delivered task and tells the agent if the ring runs low.
#[inline(always)]
pub fn release(prio: u32, cfg: &XdpConfig, tally: &mut Tally) {
    let Some(st) = state(prio) else { return };
    let left = atomic::fetch_add(reserved_ptr(st), -1) - 1;
    if cfg.low_watermark != 0 && left < cfg.low_watermark as i64 {
        notify(prio, EVENT_LOW_WATERMARK, cfg, tally);
    }
}

/// Sends an event about ring `prio`, at most one per `event_interval_ns` per ring; none
/// when events are off (`low_watermark` 0).
#[inline(always)]
pub fn notify(prio: u32, kind: u8, cfg: &XdpConfig, tally: &mut Tally) {
    if cfg.low_watermark == 0 {
        return;
    }
    let Some(st) = state(prio) else { return };
    // The coarse clock (tick resolution) is enough for a rate limit and costs a fraction
    // of bpf_ktime_get_ns. SAFETY: the helper has no preconditions.
    let now = unsafe { bpf_ktime_get_coarse_ns() };
    // SAFETY: valid map value. Two CPUs may both pass the check and send one event each;
    // the limit is a rate, not an exact count.
    unsafe {
        if now.wrapping_sub((*st).last_event_ns) < cfg.event_interval_ns {
            return;
        }
        (*st).last_event_ns = now;
    }
    let event = RingEvent {
        ktime_ns: now,
        reserved: unsafe { core::ptr::read_volatile(reserved_ptr(st)) },
        kind,
        prio: prio as u8,
        pad: [0; 6],
    };
    if BOLT_EVENTS.output::<RingEvent>(&event, 0).is_ok() {
        tally.add(Counter::Events);
    } else {
        tally.add(Counter::EventsLost);
    }
}

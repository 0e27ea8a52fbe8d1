//! The per-priority task rings with their reservation counters and low-watermark events.
//!
//! Protocol (shared with userspace, see `scheduler_common::maps::RingState`):
//! producers reserve a slot (`reserved += 1`, undone when that exceeds the capacity) and
//! then push; consumers pop and release the slot (`reserved -= 1`) only once the task is
//! delivered. A popped task that cannot be delivered is pushed back into its still
//! reserved slot, which therefore always exists.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use scheduler_common::{
    maps::{Counter, RingEvent, RingState, XdpConfig, EVENT_LOW_WATERMARK, RING_COUNT},
    Entry,
};

use crate::{
    atomic,
    counters::Tally,
    maps::{ring, BOLT_EVENTS, BOLT_OVERFLOW, BOLT_RING_STATE},
};

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

/// Reserves a slot in ring `prio` and pushes `entry` (which may point into the frame).
#[inline(always)]
pub fn push(prio: u32, entry: &Entry, cfg: &XdpConfig, tally: &mut Tally) -> Pushed {
    let (Some(st), Some(q)) = (state(prio), ring(prio)) else {
        return Pushed::Full;
    };
    let slot = reserved_ptr(st);
    if atomic::fetch_add(slot, 1) >= cfg.ring_capacity as i64 {
        atomic::add(slot, -1);
        return Pushed::Full;
    }
    if q.push(entry, 0).is_err() {
        // The map holds fewer slots than configured, or its lock failed.
        atomic::add(slot, -1);
        tally.add(Counter::RingErrors);
        return Pushed::Full;
    }
    Pushed::Stored
}

/// Pops the head of ring `prio` without releasing its slot. Skips the helper call when
/// no slot is reserved (the ring is then empty).
#[inline(always)]
pub fn pop(prio: u32, tally: &mut Tally) -> Option<Entry> {
    let st = state(prio)?;
    let q = ring(prio)?;
    // SAFETY: valid map value; a racy read is fine, reserved >= queued at all times.
    if unsafe { core::ptr::read_volatile(reserved_ptr(st)) } <= 0 {
        return None;
    }
    match q.pop() {
        Ok(e) => e,
        Err(_) => {
            tally.add(Counter::RingErrors);
            None
        }
    }
}

/// Puts a popped, undelivered task back at the tail of its ring (its slot is still
/// reserved). Should the push fail anyway, the task goes to the overflow queue, from
/// which the agent returns it to tier 2.
#[inline(always)]
pub fn put_back(prio: u32, entry: &Entry, tally: &mut Tally) {
    if let Some(q) = ring(prio) {
        if q.push(entry, 0).is_ok() {
            return;
        }
    }
    tally.add(Counter::RingErrors);
    if let Some(st) = state(prio) {
        atomic::add(reserved_ptr(st), -1);
    }
    if BOLT_OVERFLOW.push(entry, 0).is_ok() {
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

/// Sends an event about ring `prio`, at most one per `event_interval_ns` per ring.
#[inline(always)]
pub fn notify(prio: u32, kind: u8, cfg: &XdpConfig, tally: &mut Tally) {
    let Some(st) = state(prio) else { return };
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
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

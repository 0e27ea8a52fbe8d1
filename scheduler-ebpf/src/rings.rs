//! The per-priority task rings with their reservation counters and low-watermark events.
//!
//! Protocol (shared with userspace, see `scheduler_common::maps::RingState`):
//! producers reserve slots (`reserved += n`, the excess over the capacity given back) and
//! then push; consumers pop and release the slot (`reserved -= 1`) only once the task is
//! delivered. A popped task that cannot be delivered is pushed back into its still
//! reserved slot, which therefore always exists.

use core::{ffi::c_void, mem::MaybeUninit};

use aya_ebpf::{
    bindings::{BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{bpf_ktime_get_coarse_ns, bpf_map_pop_elem, bpf_map_push_elem},
    maps::Queue,
};
use scheduler_common::{
    maps::{
        Counter, RescuedTask, RingEvent, RingStates, Tier2Hint, XdpConfig, EVENT_LOW_WATERMARK, EVENT_RESCUED,
        RING_COUNT,
    },
    Entry,
};

use crate::{
    atomic,
    counters::Tally,
    maps::{ring, BOLT_EVENTS, BOLT_OVERFLOW, BOLT_RING_STATE},
    words,
};

/// What bpf_map_pop_elem returns for an empty queue.
const ENOENT: i64 = -2;

/// A ring entry on the stack, 8-byte aligned so that it is copied in words. Left
/// uninitialised until a pop fills it: zeroing it would cost a memset call per packet.
#[repr(C, align(8))]
pub struct Slot(MaybeUninit<[u8; Entry::LEN]>);

impl Slot {
    /// Offset of the task's resource bitmap in an ENTRY (uid, jid, tid, prio, rsrc).
    const TASK_RSRC: usize = 13;
    /// Offset of the lease stamp (`pad`) in an ENTRY.
    pub const STAMP: usize = 38;

    #[inline(always)]
    pub const fn new() -> Slot {
        Slot(MaybeUninit::uninit())
    }

    /// The entry's lease stamp (ENTRY bytes 38..40). Only after a successful pop.
    #[inline(always)]
    pub fn stamp(&self) -> [u8; 2] {
        // SAFETY: callers read only slots a pop filled.
        unsafe { [*self.as_ptr().add(Self::STAMP), *self.as_ptr().add(Self::STAMP + 1)] }
    }

    /// The task's resources. Only after a successful `Rings::pop` into this slot.
    #[inline(always)]
    pub fn task_rsrc(&self) -> u8 {
        // SAFETY: callers read only slots a pop filled.
        unsafe { *self.as_ptr().add(Self::TASK_RSRC) }
    }

    #[inline(always)]
    pub fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr().cast()
    }

    #[inline(always)]
    fn as_mut_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
}

pub enum Pushed {
    Stored,
    /// No slot left (or the queue refused it); nothing was changed.
    Full,
}

/// The state of every ring: one lookup per packet.
#[derive(Clone, Copy)]
pub struct Rings {
    states: *mut RingStates,
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

/// Pops the head of `q` into `slot`; false when `q` is empty (or on a map error, counted).
#[inline(always)]
pub fn pop_raw(q: &Queue<Entry>, slot: &mut Slot, tally: &mut Tally) -> bool {
    // SAFETY: `q` is a queue map of 40-byte values and `slot` has room for one value.
    let ret = unsafe { bpf_map_pop_elem(core::ptr::from_ref(q).cast_mut().cast(), slot.as_mut_ptr()) };
    match ret {
        0 => true,
        ENOENT => false,
        _ => {
            tally.add(Counter::RingErrors);
            false
        }
    }
}

/// Pushes the 40 bytes at `entry` (frame or stack) into `q`; the kernel copies them.
#[inline(always)]
pub fn push_raw(q: &Queue<Entry>, entry: *const u8) -> bool {
    // SAFETY: `q` is a queue map of 40-byte values (its address is the map definition the
    // loader relocates) and `entry` points at 40 readable bytes.
    unsafe { bpf_map_push_elem(core::ptr::from_ref(q).cast_mut().cast(), entry as *const c_void, 0) == 0 }
}

/// Pushes the entry at `entry` into the overflow queue.
#[inline(always)]
pub fn push_overflow(entry: *const u8) -> bool {
    push_raw(&BOLT_OVERFLOW, entry)
}

impl Rings {
    #[inline(always)]
    pub fn get() -> Option<Rings> {
        BOLT_RING_STATE.get_ptr_mut(0).map(|states| Rings { states })
    }

    /// The reservation counter of ring `prio` (1-based; masked into range).
    #[inline(always)]
    fn reserved(&self, prio: u32) -> *mut i64 {
        let i = (prio.wrapping_sub(1) as usize) & (RING_COUNT - 1);
        // SAFETY: the map value holds RING_COUNT states; this only computes an address.
        unsafe { core::ptr::addr_of_mut!((*self.states).rings[i].reserved) }
    }

    #[inline(always)]
    fn last_event(&self, prio: u32) -> *mut u64 {
        let i = (prio.wrapping_sub(1) as usize) & (RING_COUNT - 1);
        // SAFETY: as in `reserved`.
        unsafe { core::ptr::addr_of_mut!((*self.states).rings[i].last_event_ns) }
    }

    /// Tier 2's last BEST stamp with the time it was read (one 64-bit load).
    #[inline(always)]
    pub fn hint(&self) -> Tier2Hint {
        // SAFETY: valid map value; an aligned 8-byte load is single-copy atomic.
        Tier2Hint(unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*self.states).tier2_hint)) })
    }

    /// Stores BEST from a tier-2 packet with the coarse time now (one 64-bit store, so a
    /// reader never pairs a level with another packet's time).
    #[inline(always)]
    pub fn record_hint(&self, best: u8) {
        // SAFETY: the helper has no preconditions.
        let now = unsafe { bpf_ktime_get_coarse_ns() };
        // SAFETY: valid map value, aligned 8-byte store.
        unsafe {
            core::ptr::write_volatile(core::ptr::addr_of_mut!((*self.states).tier2_hint), Tier2Hint::new(now, best).0)
        }
    }

    /// Once per REFILL_REQ of the agent: what it set [`RingStates::refill_armed`] to,
    /// clearing it; 0 when it is not set. Two CPUs with frames at the same instant may
    /// both see it set; the agent then gets two events, which costs it a turn and
    /// nothing else.
    #[inline(always)]
    pub fn take_refill_armed(&self) -> u64 {
        // SAFETY: valid map value, aligned 8-byte loads and stores.
        unsafe {
            let armed = core::ptr::addr_of_mut!((*self.states).refill_armed);
            let how = core::ptr::read_volatile(armed);
            if how != 0 {
                core::ptr::write_volatile(armed, 0);
            }
            how
        }
    }

    /// The highest level in `first..=last` whose ring holds a task (reserved > 0), or 0.
    #[inline(always)]
    pub fn first_nonempty(&self, first: u32, last: u32) -> u32 {
        for prio in 1..=RING_COUNT as u32 {
            if prio < first || prio > last {
                continue;
            }
            // SAFETY: valid map value; a racy read is fine (see `pop`).
            if unsafe { core::ptr::read_volatile(self.reserved(prio)) } > 0 {
                return prio;
            }
        }
        0
    }

    /// Reserves up to `want` slots in ring `prio` at once; returns how many it got.
    #[inline(always)]
    pub fn reserve(&self, prio: u32, want: u32, cfg: &XdpConfig) -> u32 {
        let slot = self.reserved(prio);
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
    pub fn unreserve(&self, prio: u32, n: u32) {
        if n != 0 {
            atomic::add(self.reserved(prio), -(n as i64));
        }
    }

    /// Pushes the entry at `entry` into ring `prio`, into a slot reserved beforehand.
    #[inline(always)]
    pub fn push_reserved(&self, prio: u32, entry: *const u8, tally: &mut Tally) -> Pushed {
        let Some(q) = ring(prio) else { return Pushed::Full };
        if push_raw(q, entry) {
            return Pushed::Stored;
        }
        // The map holds fewer entries than configured, or its lock failed.
        self.unreserve(prio, 1);
        tally.add(Counter::RingErrors);
        Pushed::Full
    }

    /// Pops the head of ring `prio` into `slot` without releasing its reservation. Skips
    /// the helper call when nothing is reserved (the ring is then empty).
    #[inline(always)]
    pub fn pop(&self, prio: u32, slot: &mut Slot, tally: &mut Tally) -> bool {
        // SAFETY: valid map value; a racy read is fine, reserved >= queued at all times.
        if unsafe { core::ptr::read_volatile(self.reserved(prio)) } <= 0 {
            return false;
        }
        let Some(q) = ring(prio) else { return false };
        pop_raw(q, slot, tally)
    }

    /// Puts a popped, undelivered task back at the tail of its ring (its slot is still
    /// reserved). Should the push fail anyway (the queue's lock, or a map smaller than
    /// the configured capacity), the task goes to the overflow queue, from which the agent
    /// returns it to tier 2; should that fail too, to the agent through the event ring
    /// buffer (`rescued`). Only a full event ring on top of both loses it, and that is
    /// counted as `events_lost` besides `ring_errors`.
    #[inline(always)]
    pub fn put_back(&self, prio: u32, slot: &Slot, tally: &mut Tally) {
        if let Some(q) = ring(prio) {
            if push_raw(q, slot.as_ptr()) {
                return;
            }
        }
        tally.add(Counter::RingErrors);
        self.unreserve(prio, 1);
        if push_overflow(slot.as_ptr()) {
            tally.add(Counter::Overflow);
            return;
        }
        rescue(prio, slot, tally);
    }

    /// Moves a popped task whose lease has expired to the overflow queue (the agent
    /// RETURNs it to tier 2) and releases its slot; if the overflow queue is full it goes
    /// back to its ring instead, and the agent's own lease check returns it later.
    #[inline(always)]
    pub fn expire(&self, prio: u32, slot: &Slot, cfg: &XdpConfig, tally: &mut Tally) {
        if push_overflow(slot.as_ptr()) {
            tally.add(Counter::Expired);
            self.release(prio, cfg, tally);
        } else {
            self.put_back(prio, slot, tally);
        }
    }

    /// Releases the slot of a delivered task and tells the agent if the ring runs low.
    #[inline(always)]
    pub fn release(&self, prio: u32, cfg: &XdpConfig, tally: &mut Tally) {
        let left = atomic::fetch_add(self.reserved(prio), -1) - 1;
        if left < cfg.low_watermark as i64 {
            self.notify(prio, EVENT_LOW_WATERMARK, cfg, tally);
        }
    }

    /// Sends an event about ring `prio`, at most one per `event_interval_ns` per ring;
    /// none when events are off (`low_watermark` 0).
    #[inline(always)]
    pub fn notify(&self, prio: u32, kind: u8, cfg: &XdpConfig, tally: &mut Tally) {
        if cfg.low_watermark == 0 {
            return;
        }
        // The coarse clock (tick resolution) is enough for a rate limit and costs a
        // fraction of bpf_ktime_get_ns. SAFETY: the helper has no preconditions.
        let now = unsafe { bpf_ktime_get_coarse_ns() };
        let last = self.last_event(prio);
        // SAFETY: valid map value. Two CPUs may both pass the check and send one event
        // each; the limit is a rate, not an exact count.
        unsafe {
            if now.wrapping_sub(*last) < cfg.event_interval_ns {
                return;
            }
            *last = now;
        }
        self.event(prio, kind, now, tally);
    }

    /// Sends an event about ring `prio` now, whatever the rate limit, and wakes the
    /// agent if it sleeps. Forced: by default the kernel wakes a reader only when it has
    /// read every record before this one, and a record written without a wake-up
    /// ([`Rings::record_event`]) stays unread until the agent next wakes, so an executor
    /// that started waiting behind it would wait for the agent's next timer.
    #[inline(always)]
    pub fn event(&self, prio: u32, kind: u8, now: u64, tally: &mut Tally) {
        self.send_event(prio, kind, now, BPF_RB_FORCE_WAKEUP as u64, tally);
    }

    /// Records an event for the agent to read at its next wake-up, without waking it.
    /// A wake-up costs the frame that raises it, and every frame after it in the same
    /// softirq, the ring buffer's irq_work: a self-IPI, a VM exit on the testbed, several
    /// microseconds there (docs/xdp.md, "Events").
    #[inline(always)]
    pub fn record_event(&self, prio: u32, kind: u8, now: u64, tally: &mut Tally) {
        self.send_event(prio, kind, now, BPF_RB_NO_WAKEUP as u64, tally);
    }

    #[inline(always)]
    fn send_event(&self, prio: u32, kind: u8, now: u64, flags: u64, tally: &mut Tally) {
        let event = RingEvent {
            ktime_ns: now,
            // SAFETY: valid map value.
            reserved: unsafe { core::ptr::read_volatile(self.reserved(prio)) },
            kind,
            prio: prio as u8,
            pad: 0,
            pad2: 0,
        };
        if BOLT_EVENTS.output::<RingEvent>(&event, flags).is_ok() {
            tally.add(Counter::Events);
        } else {
            tally.add(Counter::EventsLost);
        }
    }
}

/// Hands a task that no queue took to the agent, in the event ring buffer.
#[inline(never)]
pub fn rescue(prio: u32, slot: &Slot, tally: &mut Tally) {
    let Some(mut record) = BOLT_EVENTS.reserve::<RescuedTask>(0) else {
        tally.add(Counter::EventsLost);
        return;
    };
    let r = record.as_mut_ptr();
    // SAFETY: `record` is a reserved, writable RescuedTask; `slot` holds a popped entry.
    unsafe {
        words::store_u64(r as *mut u8, u64::from_le_bytes([EVENT_RESCUED, prio as u8, 0, 0, 0, 0, 0, 0]));
        words::copy_words::<{ Entry::LEN / 8 }>(core::ptr::addr_of_mut!((*r).entry) as *mut u8, slot.as_ptr());
    }
    // Forced, as `Rings::event`: the task must not wait behind an unread record.
    record.submit(BPF_RB_FORCE_WAKEUP as u64);
    tally.add(Counter::Rescued);
}

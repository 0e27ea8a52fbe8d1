//! The ring measurement's programs (`bolt bench xdp --rings`, docs/xdp.md, "A lock-free
//! ring"): each run takes one entry from a ring and puts it back, on the queue map the
//! Bolt program uses, on the same with the reservation counter the Bolt program keeps
//! beside it, and on the lock-free ring of `scheduler_common::lockfree`. Loaded only by
//! the measurement and its tests, never attached to an interface.
#![no_std]
#![no_main]
#![feature(asm_experimental_arch)]

// The Bolt program's atomic additions (`fetch_add` is unused here).
#[allow(dead_code)]
#[path = "../atomic.rs"]
mod atomic;
mod lockfree;

use core::{ffi::c_void, ptr::addr_of_mut};

use atomic::add;
use aya_ebpf::{
    bindings::{xdp_action, BPF_F_MMAPABLE},
    helpers::{bpf_map_pop_elem, bpf_map_push_elem},
    macros::{map, xdp},
    maps::{Array, Queue},
    programs::XdpContext,
};
use scheduler_common::{
    lockfree::{LockFreeRing, LOCKFREE_CAPACITY},
    maps::RingStates,
    Entry,
};

#[map]
static BENCH_QUEUE: Queue<Entry> = Queue::with_max_entries(LOCKFREE_CAPACITY as u32, 0);

/// The reservation counters, as the Bolt program's `BOLT_RING_STATE`.
#[map]
static BENCH_RING_STATE: Array<RingStates> = Array::with_max_entries(1, BPF_F_MMAPABLE);

#[map]
static BENCH_LOCKFREE: Array<LockFreeRing> = Array::with_max_entries(1, BPF_F_MMAPABLE);

/// Where a lock-free push that gives up puts its entry, as the Bolt program puts what a
/// ring cannot take into its overflow queue.
#[map]
static BENCH_OVERFLOW: Queue<Entry> = Queue::with_max_entries(LOCKFREE_CAPACITY as u32, 0);

/// The test-run loop alone.
#[xdp]
pub fn ring_bench_empty(_ctx: XdpContext) -> u32 {
    xdp_action::XDP_DROP
}

fn queue_pop_push() -> bool {
    let mut e = [0u64; lockfree::WORDS];
    let q = core::ptr::from_ref(&BENCH_QUEUE).cast_mut().cast::<c_void>();
    let buf = e.as_mut_ptr().cast::<c_void>();
    // SAFETY: a queue map of 40-byte values, and 40 bytes of room.
    unsafe { bpf_map_pop_elem(q, buf) == 0 && bpf_map_push_elem(q, buf, 0) == 0 }
}

/// Pop and push on the queue map.
#[xdp]
pub fn ring_bench_queue(_ctx: XdpContext) -> u32 {
    if queue_pop_push() {
        xdp_action::XDP_DROP
    } else {
        xdp_action::XDP_ABORTED
    }
}

/// Pop and push on the queue map, with the slot released and reserved again in the
/// ring's counter, as a hit and a REFILL do.
#[xdp]
pub fn ring_bench_queue_reserved(_ctx: XdpContext) -> u32 {
    let Some(state) = BENCH_RING_STATE.get_ptr_mut(0) else { return xdp_action::XDP_ABORTED };
    // SAFETY: the map value; ring 0's counter is an 8-aligned i64.
    let reserved = unsafe { addr_of_mut!((*state).rings[0].reserved) };
    if !queue_pop_push() {
        return xdp_action::XDP_ABORTED;
    }
    add(reserved, -1);
    add(reserved, 1);
    xdp_action::XDP_DROP
}

/// Pop and push on the lock-free ring. A pop that finds nothing passes (counted); a push
/// that gives up puts the entry in the overflow queue (counted), or aborts if that is
/// full too.
#[xdp]
pub fn ring_bench_lockfree(_ctx: XdpContext) -> u32 {
    let Some(ring) = BENCH_LOCKFREE.get_ptr_mut(0) else { return xdp_action::XDP_ABORTED };
    let mut e = [0u64; lockfree::WORDS];
    if !lockfree::pop(ring, &mut e) {
        // SAFETY: the map value's counter, 8-aligned.
        add(unsafe { addr_of_mut!((*ring).empty_pops) } as *mut i64, 1);
        return xdp_action::XDP_PASS;
    }
    if lockfree::push(ring, &e) {
        return xdp_action::XDP_DROP;
    }
    // SAFETY: as above.
    add(unsafe { addr_of_mut!((*ring).failed_pushes) } as *mut i64, 1);
    let overflow = core::ptr::from_ref(&BENCH_OVERFLOW).cast_mut().cast::<c_void>();
    // SAFETY: a queue map of 40-byte values, and 40 bytes to push.
    if unsafe { bpf_map_push_elem(overflow, e.as_ptr().cast::<c_void>(), 0) } == 0 {
        xdp_action::XDP_TX
    } else {
        xdp_action::XDP_ABORTED
    }
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any path that could reach this; it only satisfies no_std.
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

//! The dedicated ring (MATRIX's LReadyQ): tasks a client PINned to this host because their
//! data is here. A GET_TASK takes its head before searching the shared per-priority rings,
//! whatever the priorities, as MATRIX's executor threads pop LReadyQ before SReadyQ.
//!
//! Pinned tasks have no lease: they wait for this host (the agent's FLDS monitor is what
//! moves them elsewhere), so bytes 38..40 of a dedicated entry hold the MOVABLE mark
//! instead of a stamp, zeroed in the ASSIGN as every stamp. The ring has no reservation
//! counter: one pop per request tells whether it is empty (BPF queues report ENOENT).

use aya_ebpf::{bindings::xdp_action, programs::XdpContext};
use scheduler_common::{maps::Counter, resources_match};

use crate::{
    counters::Tally,
    get_task,
    maps::BOLT_DEDICATED,
    rings::{self, Slot},
};

/// Answers the GET_TASK in `ctx` from the dedicated ring: `Some(verdict)` when a task was
/// taken (XDP_TX with its ASSIGN, or XDP_PASS with the task put back should the frame
/// not be rewritten), `None` when the ring is empty or its head is not runnable by an
/// executor offering `exec_rsrc` (the head goes back to the tail, as in the shared rings).
#[inline(always)]
pub fn serve(ctx: &XdpContext, exec_rsrc: u8, tally: &mut Tally) -> Option<u32> {
    let mut slot = Slot::new();
    if !rings::pop_raw(&BOLT_DEDICATED, &mut slot, tally) {
        return None;
    }
    if !resources_match(slot.task_rsrc(), exec_rsrc) {
        put_back(&slot, tally);
        tally.add(Counter::DedicatedRequeued);
        return None;
    }
    if get_task::write_assign(ctx, &slot) {
        tally.add(Counter::DedicatedHit);
        return Some(xdp_action::XDP_TX);
    }
    put_back(&slot, tally);
    tally.add(Counter::AdjustFailed);
    Some(xdp_action::XDP_PASS)
}

/// Puts a popped dedicated task back at the tail. The agent may have filled the ring
/// meanwhile: then the overflow queue (the agent RETURNs it to tier 2, from where it runs
/// anywhere or goes back to its client as QUEUE_FULL), then the agent by event.
#[inline(always)]
fn put_back(slot: &Slot, tally: &mut Tally) {
    if rings::push_raw(&BOLT_DEDICATED, slot.as_ptr()) {
        return;
    }
    tally.add(Counter::RingErrors);
    if rings::push_overflow(slot.as_ptr()) {
        tally.add(Counter::Overflow);
        return;
    }
    rings::rescue(0, slot, tally);
}

//! Waiting at the host: an executor whose GET_TASK with WAIT finds nothing here waits in
//! `BOLT_WAITERS` instead of at tier 2, and the next REFILL answers it: the frame that
//! brought the tasks leaves again as that executor's ASSIGN, redirected to its link. So
//! tier 2 sends a host one packet per batch, and the host picks the executor.
//!
//! A record is current while its seq is its executor's newest in `BOLT_WAIT_SEQ`: an
//! executor that asked again (its request timed out) replaced it, and a replaced record is
//! skipped, so an executor never gets two answers for one wait. Records the REFILLs do not
//! take are the agent's: it answers them with a task from the rings, or NOOP once they
//! have waited `host_wait_ns`.

use aya_ebpf::{
    helpers::{bpf_ktime_get_coarse_ns, bpf_redirect, bpf_xdp_adjust_tail},
    programs::XdpContext,
};
use scheduler_common::{
    maps::{Counter, HostWaiter, XdpConfig, EVENT_REFILLED_WAITERS, EVENT_WAITING, MAX_HOST_WAITERS},
    resources_match, Entry, Header, Requester,
};

use crate::{
    counters::Tally,
    frame::{at, EthHdr, Ipv4Hdr, UdpHdr, BOLT_OFF, IPV4_LEN, IP_OFF, UDP_LEN, UDP_OFF},
    get_task::{self, ASSIGN_HEADER, ASSIGN_LEN, REPLY_LEN},
    maps::{BOLT_WAITERS, BOLT_WAIT_SEQ},
    rings::{self, Rings},
    words,
};

/// Waiter records one REFILL frame looks at: replaced ones are skipped.
const TRIES: usize = 2;

/// Queues the GET_TASK in this frame to wait here. False (the request passes on to tier
/// 2) when the executor's index is beyond the table, the seq is 0 (the table's "none"),
/// or the queue is full.
#[inline(always)]
pub fn park(ctx: &XdpContext, rings: &Rings, h: Header, req: Requester, now: u64, tally: &mut Tally) -> bool {
    let executor = req.executor();
    let seq = req.seq();
    if executor as u32 >= MAX_HOST_WAITERS || seq == 0 {
        return false;
    }
    let (Some(eth), Some(ip), Some(udp)) =
        (at::<EthHdr>(ctx, 0), at::<Ipv4Hdr>(ctx, IP_OFF), at::<UdpHdr>(ctx, UDP_OFF))
    else {
        return false;
    };
    // SAFETY: bounds checked by `at`; the kernel hands the program a valid xdp_md.
    let waiter = unsafe {
        HostWaiter {
            exec_mac: (*eth).src,
            host_mac: (*eth).dst,
            exec_ip: (*ip).src,
            switch_ip: (*ip).dst,
            exec_port: (*udp).src_port,
            switch_port: (*udp).dst_port,
            ifindex: (*ctx.ctx).ingress_ifindex,
            seq,
            executor,
            rtrv_prio: h.prio,
            rsrc: h.rsrc,
            pad: 0,
            parked_ns: now,
        }
    };
    let Some(newest) = BOLT_WAIT_SEQ.get_ptr_mut(executor as u32) else {
        return false;
    };
    // The newest seq first: a REFILL popping the record right after the push finds it
    // current.
    // SAFETY: valid map value; an aligned 4-byte store.
    unsafe { core::ptr::write_volatile(newest, seq) };
    if BOLT_WAITERS.push(&waiter, 0).is_err() {
        tally.add(Counter::WaitersFull);
        return false;
    }
    tally.add(Counter::ParkedHere);
    rings.event(h.prio as u32, EVENT_WAITING, now, tally);
    true
}

/// A REFILL of one task (tier 2 answers a parked REFILL_REQ one task per frame): hands
/// it to the oldest current waiter that can run it, turning the frame into that
/// executor's ASSIGN and redirecting it to the executor's link. The entry is already where
/// the ASSIGN has it (a one-task REFILL and an ASSIGN are both 48 bytes), so only the
/// headers change and the task never touches a ring. None (the frame is stored as any
/// REFILL) when nobody waits, or the oldest waiter cannot run the task or would find a
/// higher-priority one in the rings: it keeps waiting, at the tail.
#[inline(never)]
pub fn hand_off(ctx: &XdpContext, cfg: &XdpConfig, rings: &Rings, tally: &mut Tally) -> Option<u32> {
    let entry = at::<Entry>(ctx, BOLT_OFF + Header::LEN)?;
    // SAFETY: bounds checked by `at`; the caller validated the entry.
    let (prio, rsrc) = unsafe { ((*entry).task.prio, (*entry).task.rsrc) };
    let ring = rings::ring_for(prio, cfg);
    for _ in 0..TRIES {
        let Ok(Some(waiter)) = BOLT_WAITERS.pop() else { return None };
        let current = BOLT_WAIT_SEQ.get(waiter.executor as u32).is_some_and(|s| *s == waiter.seq);
        if !current {
            tally.add(Counter::StaleWaiters);
            continue;
        }
        let first = waiter.rtrv_prio as u32;
        let fits = resources_match(rsrc, waiter.rsrc)
            && ring >= first
            && (ring == first || rings.first_nonempty(first, ring - 1) == 0);
        if !fits || !rewrite_into_assign(ctx, &waiter) {
            if BOLT_WAITERS.push(&waiter, 0).is_err() {
                tally.add(Counter::WaitersFull);
            }
            return None;
        }
        tally.hit(ring);
        tally.add(Counter::Handoffs);
        // SAFETY: the helper checks its arguments.
        return Some(unsafe { bpf_redirect(waiter.ifindex, 0) } as u32);
    }
    None
}

/// After a REFILL's tasks were stored: tells the agent if executors wait here, for it
/// to hand them the tasks (a frame answers one executor at most).
#[inline(never)]
pub fn tell_agent_if_waiting(rings: &Rings, tally: &mut Tally) {
    if matches!(BOLT_WAITERS.peek(), Ok(Some(_))) {
        // SAFETY: the helper has no preconditions.
        rings.event(0, EVENT_REFILLED_WAITERS, unsafe { bpf_ktime_get_coarse_ns() }, tally);
    }
}

/// The headers of the ASSIGN, written over the REFILL's own.
#[repr(C)]
struct AssignHeaders {
    eth: EthHdr,
    ip: Ipv4Hdr,
    udp: UdpHdr,
}

/// Rewrites the one-task REFILL frame into the ASSIGN of its task to `waiter`, as tier 2
/// would have addressed it: from the switch's address and port the GET_TASK went to, to
/// the executor's. False when the frame could not be trimmed (nothing was changed).
#[inline(always)]
fn rewrite_into_assign(ctx: &XdpContext, waiter: &HostWaiter) -> bool {
    let frame_len = ctx.data_end() - ctx.data();
    let surplus = frame_len as i32 - REPLY_LEN as i32;
    // Link-layer padding past the datagram. SAFETY: the helper checks its arguments.
    if surplus > 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, -surplus) } != 0 {
        return false;
    }
    let (Some(out), Some(msg)) = (at::<AssignHeaders>(ctx, 0), at::<[u8; ASSIGN_LEN]>(ctx, BOLT_OFF)) else {
        return false;
    };
    // SAFETY: bounds checked by `at`. TOS, ID, flags and TTL are the REFILL's; the
    // entry stays as it came (its pad, the lease stamp's place, is zero on the wire).
    unsafe {
        (*out).eth.dst = waiter.exec_mac;
        (*out).eth.src = waiter.host_mac;
        (*out).ip.total_len = ((IPV4_LEN + UDP_LEN + ASSIGN_LEN) as u16).to_be_bytes();
        (*out).ip.src = waiter.switch_ip;
        (*out).ip.dst = waiter.exec_ip;
        (*out).ip.checksum = [0; 2];
        (*out).ip.checksum = get_task::ipv4_checksum(&(*out).ip);
        (*out).udp = UdpHdr {
            src_port: waiter.switch_port,
            dst_port: waiter.exec_port,
            len: ((UDP_LEN + ASSIGN_LEN) as u16).to_be_bytes(),
            checksum: [0; 2],
        };
        words::store_u64(msg as *mut u8, u64::from_le_bytes(ASSIGN_HEADER));
    }
    true
}

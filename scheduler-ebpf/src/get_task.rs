//! GET_TASK: pop the first runnable task from the rings, searching from the request's
//! RTRV_PRIO down to the lowest level in use, and turn the request into its ASSIGN.
//!
//! Resource rule: tier 2 sends a node only tasks the node's resources can run (REFILL_REQ
//! carries them), but one executor may offer fewer. A popped task whose resource bits are
//! not a subset of the request's EXEC_RSRC goes back to the tail of its ring (counted as
//! `requeued`) and the search goes on at the next level: one pop per level per request,
//! so a request costs at most `levels` pops and the task is never lost.

use aya_ebpf::{bindings::xdp_action, helpers::bpf_xdp_adjust_tail, programs::XdpContext};
use scheduler_common::{
    maps::{Counter, XdpConfig, EVENT_EMPTY, RING_COUNT},
    message_len, resources_match, Entry, Header, Op, Requester, MAX_PRIORITIES,
};

use crate::{
    counters::Tally,
    frame::{at, BoltFrame, EthHdr, Ipv4Hdr, UdpHdr, BOLT_OFF, IPV4_LEN, IP_OFF, UDP_LEN, UDP_OFF},
    rings,
};

const GET_TASK_LEN: usize = message_len(Op::GetTask, 0);
const ASSIGN_LEN: usize = message_len(Op::Assign, 1);

/// The ASSIGN message as it is written into the frame.
#[repr(C)]
struct AssignMsg {
    header: Header,
    entry: Entry,
}

#[inline(always)]
pub fn handle(ctx: &XdpContext, cfg: &XdpConfig, bolt: BoltFrame, tally: &mut Tally) -> u32 {
    let h = bolt.header;
    if h.count != 0 || bolt.message_len != GET_TASK_LEN || h.prio == 0 || h.prio > MAX_PRIORITIES {
        tally.add(Counter::Malformed);
        return xdp_action::XDP_PASS;
    }
    let Some(req) = at::<Requester>(ctx, BOLT_OFF + Header::LEN) else {
        tally.add(Counter::Truncated);
        return xdp_action::XDP_PASS;
    };
    // SAFETY: `at` checked the bounds.
    if unsafe { (*req).node() } != cfg.node {
        tally.add(Counter::OtherNode);
        return xdp_action::XDP_PASS;
    }
    let first = h.prio as u32;
    let last = rings::levels(cfg);
    for prio in 1..=RING_COUNT as u32 {
        if prio < first || prio > last {
            continue;
        }
        let Some(entry) = rings::pop(prio, tally) else { continue };
        if resources_match(entry.task.rsrc, h.rsrc) {
            return assign(ctx, cfg, prio, &entry, tally);
        }
        rings::put_back(prio, &entry, tally);
        tally.add(Counter::Requeued);
    }
    tally.add(Counter::Miss);
    if first <= last {
        rings::notify(first, EVENT_EMPTY, cfg, tally);
    }
    xdp_action::XDP_PASS
}

/// Rewrites the GET_TASK frame into the ASSIGN of `entry`, addressed back to the sender.
#[inline(always)]
fn assign(ctx: &XdpContext, cfg: &XdpConfig, prio: u32, entry: &Entry, tally: &mut Tally) -> u32 {
    let frame_len = ctx.data_end() - ctx.data();
    let delta = (BOLT_OFF + ASSIGN_LEN) as i32 - frame_len as i32;
    // SAFETY: the helper checks its arguments; ctx is the program's context.
    if delta != 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        rings::put_back(prio, entry, tally);
        tally.add(Counter::AdjustFailed);
        return xdp_action::XDP_PASS;
    }
    // The frame moved: every pointer is derived and checked again.
    let (Some(eth), Some(ip), Some(udp), Some(msg)) = (
        at::<EthHdr>(ctx, 0),
        at::<Ipv4Hdr>(ctx, IP_OFF),
        at::<UdpHdr>(ctx, UDP_OFF),
        at::<AssignMsg>(ctx, BOLT_OFF),
    ) else {
        // Cannot happen after a successful grow to exactly this length; keep the task.
        rings::put_back(prio, entry, tally);
        tally.add(Counter::AdjustFailed);
        return xdp_action::XDP_PASS;
    };
    // SAFETY: all four pointers were bounds-checked against the new frame end.
    unsafe {
        core::mem::swap(&mut (*eth).dst, &mut (*eth).src);
        core::mem::swap(&mut (*ip).src, &mut (*ip).dst);
        (*ip).total_len = ((IPV4_LEN + UDP_LEN + ASSIGN_LEN) as u16).to_be_bytes();
        (*ip).checksum = ipv4_checksum(&*ip);
        core::mem::swap(&mut (*udp).src_port, &mut (*udp).dst_port);
        (*udp).len = ((UDP_LEN + ASSIGN_LEN) as u16).to_be_bytes();
        // Zero means "no checksum" in IPv4; the XDP frame cannot carry an offloaded one.
        (*udp).checksum = [0; 2];
        (*msg).header = Header::new(Op::Assign, 1, 0, 0, 0);
        (*msg).entry = *entry;
    }
    rings::release(prio, cfg, tally);
    tally.hit(prio);
    xdp_action::XDP_TX
}

/// The header checksum of `ip`, computed over the header with the checksum field zero.
#[inline(always)]
pub fn ipv4_checksum(ip: &Ipv4Hdr) -> [u8; 2] {
    let words = [
        u16::from_be_bytes([ip.version_ihl, ip.tos]),
        u16::from_be_bytes(ip.total_len),
        u16::from_be_bytes(ip.id),
        u16::from_be_bytes(ip.frag),
        u16::from_be_bytes([ip.ttl, ip.protocol]),
        u16::from_be_bytes([ip.src[0], ip.src[1]]),
        u16::from_be_bytes([ip.src[2], ip.src[3]]),
        u16::from_be_bytes([ip.dst[0], ip.dst[1]]),
        u16::from_be_bytes([ip.dst[2], ip.dst[3]]),
    ];
    let mut sum = 0u32;
    for w in words {
        sum += w as u32;
    }
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    (!(sum as u16)).to_be_bytes()
}

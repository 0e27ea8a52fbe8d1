//! GET_TASK: pop the first runnable task from the rings, searching from the request's
//! RTRV_PRIO down to the lowest level in use, and turn the request into its ASSIGN.
//! GET_BUNDLE goes the same way and gets an ASSIGN of one task: its `want` is an upper
//! bound, and one pop per request keeps the program's cost that of a GET_TASK. A miss
//! passes on to tier 2 unchanged, which fills the bundle.
//!
//! Resource rule: tier 2 sends a node only tasks the node's resources can run (REFILL_REQ
//! carries them), but one executor may offer fewer. A popped task whose resource bits are
//! not a subset of the request's EXEC_RSRC goes back to the tail of its ring (counted as
//! `requeued`) and the search goes on at the next level: one pop per level per request,
//! so a request costs at most `levels` pops and the task is never lost.

use aya_ebpf::{
    bindings::xdp_action,
    helpers::{bpf_ktime_get_coarse_ns, bpf_xdp_adjust_tail},
    programs::XdpContext,
};
use scheduler_common::{
    maps::{lease_expired, Counter, XdpConfig, EVENT_BYPASS, EVENT_EMPTY, RING_COUNT},
    message_len, prefix, resources_match, BundleRequest, Entry, Header, Op, Requester, FLAG_WAIT, GET_TASK_FLAGS,
    MAX_BUNDLE, MAX_PRIORITIES, MIN_BUNDLE,
};

use crate::{
    counters::Tally,
    dedicated,
    frame::{at, BoltFrame, Ipv4Hdr, BOLT_OFF, IPV4_LEN, IP_OFF, UDP_LEN, UDP_OFF},
    rings::{self, Rings, Slot},
    waiters, words,
};

const GET_TASK_LEN: usize = message_len(Op::GetTask, 0);
const GET_BUNDLE_LEN: usize = message_len(Op::GetBundle, 0);
/// Where a GET_BUNDLE's `want` and pad start in the message.
const BUNDLE_WANT_OFF: usize = Header::LEN + core::mem::offset_of!(BundleRequest, want);
pub const ASSIGN_LEN: usize = message_len(Op::Assign, 1);
/// The whole reply frame.
pub const REPLY_LEN: usize = BOLT_OFF + ASSIGN_LEN;
/// The ASSIGN header's bytes (one entry, no priority, resources or flags).
pub const ASSIGN_HEADER: [u8; 8] = {
    let h = Header::new(Op::Assign, 1, 0, 0, 0);
    [h.magic[0], h.magic[1], h.version, h.op, h.count, h.prio, h.rsrc, h.flags]
};

#[inline(always)]
pub fn handle(ctx: &XdpContext, cfg: &XdpConfig, bolt: BoltFrame, op: Op, tally: &mut Tally) -> u32 {
    let h = bolt.header;
    let len = if op == Op::GetBundle { GET_BUNDLE_LEN } else { GET_TASK_LEN };
    // Exactly one encoding per message: bytes the op does not use are zero. WAIT is
    // tier 2's business: a hit is answered here, a miss passes on with the flag.
    if h.count != 0
        || h.flags & !GET_TASK_FLAGS != 0
        || bolt.message_len != len
        || h.prio == 0
        || h.prio > MAX_PRIORITIES
    {
        tally.add(Counter::Malformed);
        return xdp_action::XDP_PASS;
    }
    if op == Op::GetBundle {
        // want 2..=16 and three zero pad bytes, as the decoder requires.
        let Some(tail) = at::<[u8; 4]>(ctx, BOLT_OFF + BUNDLE_WANT_OFF) else {
            tally.add(Counter::Truncated);
            return xdp_action::XDP_PASS;
        };
        // SAFETY: `at` checked the bounds.
        let [want, p0, p1, p2] = unsafe { *tail };
        if !(MIN_BUNDLE..=MAX_BUNDLE).contains(&want) || p0 | p1 | p2 != 0 {
            tally.add(Counter::Malformed);
            return xdp_action::XDP_PASS;
        }
    }
    let Some(req) = at::<Requester>(ctx, BOLT_OFF + Header::LEN) else {
        tally.add(Counter::Truncated);
        return xdp_action::XDP_PASS;
    };
    // Only registered executors get tasks; a stranger's request goes nowhere (tier 2
    // would refuse it too). One mask compare: the frame's header is already in bounds.
    let Some(ip) = at::<Ipv4Hdr>(ctx, IP_OFF) else {
        tally.add(Counter::Truncated);
        return xdp_action::XDP_PASS;
    };
    // SAFETY: `at` checked the bounds.
    if !prefix::contains(cfg.executor_net, cfg.executor_prefix_len, unsafe { (*ip).src }) {
        tally.add(Counter::ForeignGetTask);
        return xdp_action::XDP_DROP;
    }
    // SAFETY: `at` checked the bounds.
    if unsafe { (*req).node() } != cfg.node {
        tally.add(Counter::OtherNode);
        return xdp_action::XDP_PASS;
    }
    // Pinned tasks first, whatever tier 2 holds: they run here or nowhere.
    if let Some(verdict) = dedicated::serve(ctx, h.rsrc, tally) {
        return verdict;
    }
    let Some(rings) = Rings::get() else {
        return xdp_action::XDP_PASS;
    };
    let first = h.prio as u32;
    let last = rings::levels(cfg);
    // Priority across the tiers: while tier 2's fresh hint names a level this request
    // searches above every non-empty ring, the request goes to tier 2. The clock is read
    // only when the levels already say so.
    let hint = rings.hint();
    if hint.best() != 0 {
        let local = rings.first_nonempty(first, last);
        // SAFETY: the helper has no preconditions.
        if hint.outranks_local(h.prio, local as u8, cfg.hint_ttl_ns, || unsafe { bpf_ktime_get_coarse_ns() }) {
            tally.add(Counter::Bypass);
            rings.notify(local, EVENT_BYPASS, cfg, tally);
            if h.flags & FLAG_WAIT != 0 {
                clear_wait(ctx, h);
            }
            return xdp_action::XDP_PASS;
        }
    }
    let mut slot = Slot::new();
    let prio = take(&rings, cfg, first, h.rsrc, &mut slot, tally);
    if prio != 0 {
        return assign(ctx, cfg, &rings, prio, &slot, tally);
    }
    // Nothing here. With WAIT, and when tier 2's fresh stamp says it holds nothing this
    // request searches, the executor waits at this host for the next REFILL rather than
    // at tier 2 (docs/xdp.md, "Waiting at the host").
    if op == Op::GetTask && h.flags & FLAG_WAIT != 0 && cfg.host_wait_ns != 0 {
        // SAFETY: the helper has no preconditions.
        let now = unsafe { bpf_ktime_get_coarse_ns() };
        if hint.known_empty_for(h.prio, cfg.hint_ttl_ns, now) {
            // SAFETY: `at` checked the bounds.
            let req = unsafe { *req };
            if waiters::park(ctx, &rings, h, req, now, tally) {
                return xdp_action::XDP_DROP;
            }
        }
    }
    tally.add(Counter::Miss);
    if first <= last {
        rings.notify(first, EVENT_EMPTY, cfg, tally);
    }
    xdp_action::XDP_PASS
}

/// Pops the first task a request searching from level `first` with resources `rsrc`
/// can run into `slot` and returns its ring (0: none). One pop per level: a task the
/// resources do not cover goes back to its ring's tail; one past its lease goes to the
/// overflow queue for the agent to RETURN.
#[inline(always)]
pub fn take(rings: &Rings, cfg: &XdpConfig, first: u32, rsrc: u8, slot: &mut Slot, tally: &mut Tally) -> u32 {
    let last = rings::levels(cfg);
    // The lease clock, read once per request and only when leases are on.
    let now_ms = if cfg.lease_ms != 0 {
        // SAFETY: the helper has no preconditions.
        (unsafe { bpf_ktime_get_coarse_ns() }) / 1_000_000
    } else {
        0
    };
    for prio in 1..=RING_COUNT as u32 {
        if prio < first || prio > last {
            continue;
        }
        if !rings.pop(prio, slot, tally) {
            continue;
        }
        // A task past its lease is not served here: it goes back to tier 2 (through the
        // overflow queue and the agent), where any host can get it.
        if lease_expired(slot.stamp(), now_ms, cfg.lease_ms) {
            rings.expire(prio, slot, cfg, tally);
            continue;
        }
        if resources_match(slot.task_rsrc(), rsrc) {
            return prio;
        }
        rings.put_back(prio, slot, tally);
        tally.add(Counter::Requeued);
    }
    0
}

/// Clears WAIT on a bypassed GET_TASK: should tier 2 have nothing for it after all (its
/// work went to another executor meanwhile), the executor must hear so at once and come
/// back to the task waiting here, not wait at tier 2. The UDP checksum, if any, is
/// updated for the changed header word (rsrc, flags).
#[inline(always)]
fn clear_wait(ctx: &XdpContext, h: Header) {
    let (Some(word), Some(sum)) = (at::<[u8; 2]>(ctx, BOLT_OFF + 6), at::<[u8; 2]>(ctx, UDP_OFF + 6)) else {
        return;
    };
    let old = u16::from_be_bytes([h.rsrc, h.flags]);
    let new = u16::from_be_bytes([h.rsrc, h.flags & !FLAG_WAIT]);
    // SAFETY: both 2-byte fields were bounds-checked by `at`.
    unsafe {
        *word = new.to_be_bytes();
        let checksum = u16::from_be_bytes(*sum);
        if checksum != 0 {
            // RFC 1624 eqn. 3, folded twice (no loop for the verifier to bound).
            let mut acc = (!checksum as u32) + (!old as u32) + new as u32;
            acc = (acc & 0xffff) + (acc >> 16);
            acc = (acc & 0xffff) + (acc >> 16);
            let updated = match !(acc as u16) {
                0 => 0xffff,
                c => c,
            };
            *sum = updated.to_be_bytes();
        }
    }
}

/// Answers with the task in `slot` from ring `prio`: the ASSIGN, then the slot released;
/// if the frame cannot be rewritten, the task goes back to its ring.
#[inline(always)]
fn assign(ctx: &XdpContext, cfg: &XdpConfig, rings: &Rings, prio: u32, slot: &Slot, tally: &mut Tally) -> u32 {
    if !write_assign(ctx, slot) {
        rings.put_back(prio, slot, tally);
        tally.add(Counter::AdjustFailed);
        return xdp_action::XDP_PASS;
    }
    rings.release(prio, cfg, tally);
    tally.hit(prio);
    xdp_action::XDP_TX
}

/// Rewrites the GET_TASK frame into the ASSIGN of the task in `slot`, addressed back to
/// the sender: addresses and ports swapped, lengths and IPv4 checksum set, UDP checksum 0.
/// False when the frame could not be resized (nothing else was changed).
#[inline(always)]
pub fn write_assign(ctx: &XdpContext, slot: &Slot) -> bool {
    let frame_len = ctx.data_end() - ctx.data();
    let delta = REPLY_LEN as i32 - frame_len as i32;
    // SAFETY: the helper checks its arguments; ctx is the program's context.
    if delta != 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        return false;
    }
    // The frame moved: check the whole reply's bounds again.
    let Some(reply) = at::<[u8; REPLY_LEN]>(ctx, 0) else {
        // Cannot happen after a successful resize to exactly this length.
        return false;
    };
    let f = reply as *mut u8;
    // SAFETY: every access below is inside the REPLY_LEN bytes checked above.
    unsafe {
        // Ethernet: swap the 6-byte addresses (bytes 0..6 and 6..12).
        let (dst_hi, dst_lo) = (words::load_u32(f), words::load_u16(f.add(4)));
        words::store_u32(f, words::load_u32(f.add(6)));
        words::store_u16(f.add(4), words::load_u16(f.add(10)));
        words::store_u32(f.add(6), dst_hi);
        words::store_u16(f.add(10), dst_lo);
        // IPv4: total length, swapped addresses, checksum over the result.
        let ip = f.add(IP_OFF);
        words::store_u16(ip.add(2), ((IPV4_LEN + UDP_LEN + ASSIGN_LEN) as u16).to_be());
        words::store_u16(ip.add(10), 0);
        let src = words::load_u32(ip.add(12));
        words::store_u32(ip.add(12), words::load_u32(ip.add(16)));
        words::store_u32(ip.add(16), src);
        words::store_u16(ip.add(10), words::ipv4_checksum(ip));
        // UDP: swap the ports (one rotation of the 4 bytes), length, no checksum: zero is
        // legal in IPv4, and the XDP frame cannot carry an offloaded one.
        let udp = f.add(UDP_OFF);
        words::store_u32(udp, words::load_u32(udp).rotate_left(16));
        words::store_u32(udp.add(4), (((UDP_LEN + ASSIGN_LEN) as u16).to_be()) as u32);
        // Bolt: the ASSIGN header, then the entry exactly as it was queued.
        let msg = f.add(BOLT_OFF);
        words::store_u64(msg, u64::from_le_bytes(ASSIGN_HEADER));
        words::copy_words::<{ Entry::LEN / 8 }>(msg.add(Header::LEN), slot.as_ptr());
        // The lease stamp is ring state, zero on the wire.
        words::store_u16(msg.add(Header::LEN + Slot::STAMP), 0);
    }
    true
}

/// The header checksum of `ip`, computed over the header with the checksum field zero.
#[inline(always)]
pub fn ipv4_checksum(ip: &Ipv4Hdr) -> [u8; 2] {
    let words = [
        u16::from_be_bytes([ip.version_ihl, ip.tos]),
        u16::from_be_bytes(ip.total_len),
        u16::from_be_bytes(ip.id),
        u16::from_be_bytes(ip.frag),
        u16::from_be_bytes([ip.ttl, ip.proto]),
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

//! REFILL: a batch of tasks from the tier-2 switch for this node's rings.
//!
//! Accepted only on an uplink interface (the program also runs on the executor-facing
//! ones, where an executor could forge the switch's address), only from the configured
//! switch address, and only whole: like the userspace
//! decoder, one invalid entry rejects the frame. A REFILL lists its entries newest first
//! (tier 2 builds it one dequeue per pass, each in front of the last), so they are stored
//! last to first and the rings serve them in tier 2's dequeue order. Each task goes to its
//! priority's ring; a task whose ring is full goes to the overflow queue, which the agent
//! drains and RETURNs to tier 2. Should the overflow queue be full as well (no agent
//! draining it), the frame itself is rewritten in place into a RETURN of exactly the tasks
//! not yet stored (the first ones of the list) and sent back to the switch, so no task is
//! ever dropped or stored twice here.

use aya_ebpf::{
    bindings::xdp_action,
    helpers::{bpf_ktime_get_coarse_ns, bpf_ktime_get_ns, bpf_xdp_adjust_tail},
    programs::XdpContext,
};
use aya_log_ebpf::{error, info, warn};
use scheduler_common::{
    maps::{ring_stamp, Counter, XdpConfig, EVENT_REFILL_ANSWER, REFILL_ARMED_RECORD, RING_COUNT},
    Entry, Header, Op, KNOWN_TASK_FLAGS, MAX_LIST, MAX_PRIORITIES,
};

use crate::{
    counters::Tally,
    frame::{at, BoltFrame, EthHdr, Ipv4Hdr, UdpHdr, BOLT_OFF, IPV4_LEN, IP_OFF, UDP_LEN},
    get_task::ipv4_checksum,
    rings::{self, Pushed, Rings},
    waiters,
};

#[inline(always)]
fn entry_at(ctx: &XdpContext, i: usize) -> Option<*const Entry> {
    at::<Entry>(ctx, BOLT_OFF + Header::LEN + i * Entry::LEN).map(|p| p as *const Entry)
}

#[inline(always)]
pub fn handle(ctx: &XdpContext, cfg: &XdpConfig, bolt: BoltFrame, tally: &mut Tally) -> u32 {
    // SAFETY: the kernel hands the program a valid xdp_md.
    let ifindex = unsafe { (*ctx.ctx).ingress_ifindex };
    if !cfg.is_uplink(ifindex) {
        tally.add(Counter::RefillOffUplink);
        info!(ctx, "REFILL on interface {} dropped: not an uplink", ifindex);
        return xdp_action::XDP_DROP;
    }
    let Some(ip) = at::<Ipv4Hdr>(ctx, IP_OFF) else {
        tally.add(Counter::Truncated);
        return xdp_action::XDP_DROP;
    };
    // SAFETY: bounds checked by `at`.
    let src = unsafe { (*ip).src };
    if cfg.switch_ipv4 == [0; 4] || src != cfg.switch_ipv4 {
        tally.add(Counter::ForeignRefill);
        info!(ctx, "REFILL from {:i} dropped: not the switch", u32::from_be_bytes(src));
        return xdp_action::XDP_DROP;
    }
    let n = bolt.header.count as usize;
    let h = bolt.header;
    // Exactly one encoding per message: header bytes REFILL does not use are zero.
    // Header prio is tier 2's BEST stamp.
    if n > MAX_LIST
        || bolt.message_len != Header::LEN + n * Entry::LEN
        || h.prio > MAX_PRIORITIES
        || h.rsrc | h.flags != 0
    {
        tally.add(Counter::Malformed);
        return xdp_action::XDP_DROP;
    }
    // Validate every entry, and count the tasks of each ring to reserve their slots in
    // one atomic operation per ring rather than one per task. Counts (at most 16) are kept
    // in one byte per ring of a u64: a stack array would cost a memset call per frame.
    let mut wanted = Lanes(0);
    for i in 0..MAX_LIST {
        if i >= n {
            break;
        }
        let Some(e) = entry_at(ctx, i) else {
            tally.add(Counter::Truncated);
            return xdp_action::XDP_DROP;
        };
        // SAFETY: bounds checked by `entry_at`.
        let (prio, flags, pad) = unsafe { ((*e).task.prio, (*e).task.flags, (*e).pad) };
        if prio == 0 || prio > MAX_PRIORITIES || flags & !KNOWN_TASK_FLAGS != 0 || pad != [0; 2] {
            tally.add(Counter::Malformed);
            return xdp_action::XDP_DROP;
        }
        wanted.add(ring_index(prio, cfg), 1);
    }
    let Some(rings) = Rings::get() else {
        return xdp_action::XDP_DROP;
    };
    tally.add(Counter::RefillFrames);
    rings.record_hint(h.prio);
    tally.add(Counter::Tier2Stamps);
    // A one-task frame goes straight to an executor waiting here, if one can run it,
    // and wakes nobody: waking the agent costs the frame, and every frame sent after it,
    // about 12 µs on the testbed. The agent learns of it at its next wake-up; tier 2
    // keeps the request of the waiters it did not serve parked.
    // Otherwise the agent hands the stored tasks to those waiting (told now, before the
    // stores: after the loop below, one more branch costs the verifier too many states;
    // the stores take far less than the agent takes to wake).
    if cfg.host_wait_ns != 0 && n == 1 {
        if let Some(verdict) = waiters::hand_off(ctx, cfg, &rings, tally) {
            return verdict;
        }
    }
    tell_agent_if_answer(&rings, n, tally);
    if cfg.host_wait_ns != 0 {
        waiters::tell_agent_if_waiting(&rings, tally);
    }
    let mut granted = Lanes(0);
    for r in 0..RING_COUNT {
        let want = wanted.get(r);
        if want != 0 {
            granted.add(r, rings.reserve(r as u32 + 1, want, cfg));
        }
    }
    let (mut stored, mut overflowed) = (0u64, 0u64);
    // The lease stamp every task stored in a ring carries (see maps::ring_stamp).
    // SAFETY: the helper has no preconditions.
    let stamp = ring_stamp(unsafe { bpf_ktime_get_coarse_ns() } / 1_000_000);
    // Entries `0..unstored` are not stored yet. Walked from the last entry down, each
    // step with a constant offset for the verifier.
    let mut unstored = n;
    for j in (0..MAX_LIST).rev() {
        if j >= n {
            continue;
        }
        let Some(e) = entry_at(ctx, j) else { break };
        // SAFETY: bounds checked by `entry_at`.
        let r = ring_index(unsafe { (*e).task.prio }, cfg);
        let mut in_ring = false;
        if granted.get(r) > 0 {
            granted.sub(r, 1);
            let e = e as *mut Entry;
            // SAFETY: bounds checked by `entry_at`; the frame is writable. The stamp goes
            // into the ring with the entry and is cleared from the frame again at once:
            // overflow and RETURN carry no stamp, and a frame run again (BPF_PROG_TEST_RUN
            // repeats one buffer) must still read as the REFILL that arrived.
            unsafe { (*e).pad = stamp };
            in_ring = matches!(rings.push_reserved(r as u32 + 1, e as *const u8, tally), Pushed::Stored);
            unsafe { (*e).pad = [0; 2] };
        }
        if in_ring {
            stored += 1;
        } else if rings::push_overflow(e as *const u8) {
            overflowed += 1;
        } else {
            break;
        }
        unstored = j;
    }
    for r in 0..RING_COUNT {
        rings.unreserve(r as u32 + 1, granted.get(r));
    }
    tally.add_n(Counter::RefillTasks, stored);
    tally.add_n(Counter::Overflow, overflowed);
    if unstored == 0 {
        return xdp_action::XDP_DROP;
    }
    bounce(ctx, cfg.port, unstored, tally)
}

/// The first frame of the answer the agent awaits: EVENT_REFILL_ANSWER, stamped for the
/// agent to time the round trip by. It wakes the agent unless the agent asked for it to
/// be recorded only (REFILL_ARMED_RECORD: its request announced executors waiting here,
/// and a wake-up would delay every frame the switch sent after this one, other hosts'
/// waiters' among them; docs/xdp.md, "Events"). An empty answer always wakes it: its
/// next step, a pause and a new request, is its own.
#[inline(never)]
fn tell_agent_if_answer(rings: &Rings, tasks: usize, tally: &mut Tally) {
    let armed = rings.take_refill_armed();
    if armed == 0 {
        return;
    }
    // The fine clock: the agent times the REFILL round trip to this stamp rather than to
    // its own wake-up. SAFETY: the helper has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if armed == REFILL_ARMED_RECORD && tasks != 0 {
        rings.record_event(0, EVENT_REFILL_ANSWER, now, tally);
    } else {
        rings.event(0, EVENT_REFILL_ANSWER, now, tally);
    }
}

/// One small count (0..=255) per ring, packed in a register.
#[derive(Clone, Copy)]
struct Lanes(u64);

impl Lanes {
    #[inline(always)]
    fn get(self, ring: usize) -> u32 {
        ((self.0 >> (8 * ring)) & 0xFF) as u32
    }

    #[inline(always)]
    fn add(&mut self, ring: usize, n: u32) {
        self.0 += (n as u64) << (8 * ring);
    }

    #[inline(always)]
    fn sub(&mut self, ring: usize, n: u32) {
        self.0 -= (n as u64) << (8 * ring);
    }
}

// Ring indices are masked with RING_COUNT - 1 so the verifier sees them bounded.
const _: () = assert!(RING_COUNT.is_power_of_two() && RING_COUNT <= 8 && MAX_LIST <= 255);

/// Index into per-ring arrays of the ring a task of priority `prio` queues in.
#[inline(always)]
fn ring_index(prio: u8, cfg: &XdpConfig) -> usize {
    (rings::ring_for(prio, cfg) as usize - 1) & (RING_COUNT - 1)
}

/// The headers of the bounced RETURN, written over the REFILL's own.
#[repr(C)]
struct ReturnHeaders {
    eth: EthHdr,
    ip: Ipv4Hdr,
    udp: UdpHdr,
    bolt: Header,
}

/// Sends entries `0..left` of this REFILL back to the switch as a RETURN, rewriting the
/// frame in place: the headers are rewritten over the REFILL's and the frame is trimmed
/// to the RETURN, so the entries stay where they are. Nothing here can fail once the
/// other entries are stored (the reason it is done in place rather than by moving the
/// frame's start): the bounds checked below are those the validation already passed on
/// this same frame, and should the trim fail, the bytes past the IPv4 datagram are
/// link-layer padding every receiver discards. Entries `left..` are stored and not resent.
#[inline(never)]
fn bounce(ctx: &XdpContext, port: u16, left: usize, tally: &mut Tally) -> u32 {
    let left = left & 0x1F; // left <= MAX_LIST; the mask lets the verifier see it.
    let Some(out) = at::<ReturnHeaders>(ctx, 0) else {
        return unreachable_bounds(ctx, left, tally);
    };
    let message_len = Header::LEN + left * Entry::LEN;
    let ip_len = IPV4_LEN + UDP_LEN + message_len;
    // SAFETY: bounds checked by `at`; every field is read before it is overwritten.
    unsafe {
        let (mac_src, mac_dst) = ((*out).eth.src, (*out).eth.dst);
        (*out).eth.dst = mac_src;
        (*out).eth.src = mac_dst;
        let (ip_src, ip_dst) = ((*out).ip.src, (*out).ip.dst);
        (*out).ip.src = ip_dst;
        (*out).ip.dst = ip_src;
        (*out).ip.total_len = (ip_len as u16).to_be_bytes();
        (*out).ip.checksum = [0; 2];
        (*out).ip.checksum = ipv4_checksum(&(*out).ip);
        let switch_port = (*out).udp.src_port;
        (*out).udp = UdpHdr {
            src_port: port.to_be_bytes(),
            dst_port: switch_port,
            len: ((UDP_LEN + message_len) as u16).to_be_bytes(),
            checksum: [0; 2],
        };
        (*out).bolt = Header::new(Op::Return, left as u8, 0, 0, 0);
    }
    let frame_len = ctx.data_end() - ctx.data();
    let surplus = frame_len as i32 - (BOLT_OFF + message_len) as i32;
    // SAFETY: the helper checks its arguments.
    if surplus > 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, -surplus) } != 0 {
        // The RETURN is whole; the bytes after it travel as padding.
        tally.add(Counter::AdjustFailed);
    }
    tally.add_n(Counter::Bounced, left as u64);
    warn!(ctx, "rings and overflow full: {} REFILL tasks returned to the switch", left as u32);
    xdp_action::XDP_TX
}

/// A bounds check failed on a frame whose every entry passed the same check during
/// validation: cannot happen. Counted and logged; the frame is dropped rather than passed
/// on, because the agent would store its last entries a second time.
#[inline(always)]
fn unreachable_bounds(ctx: &XdpContext, left: usize, tally: &mut Tally) -> u32 {
    tally.add(Counter::AdjustFailed);
    error!(ctx, "REFILL bounce: frame bounds changed; entries 0..{} not returned", left as u32);
    xdp_action::XDP_DROP
}

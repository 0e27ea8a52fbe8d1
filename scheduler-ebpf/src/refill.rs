//! REFILL: a batch of tasks from the tier-2 switch for this node's rings.
//!
//! Accepted only from the configured switch address, and only whole: like the userspace
//! decoder, one invalid entry rejects the frame. Each task goes to its priority's ring;
//! a task whose ring is full goes to the overflow queue, which the agent drains and
//! RETURNs to tier 2. Should the overflow queue be full as well (no agent draining it),
//! the frame itself is turned into a RETURN of the tasks not yet stored and sent back
//! to the switch, so no task is ever dropped here.

use aya_ebpf::{
    bindings::xdp_action,
    helpers::{bpf_xdp_adjust_head, bpf_xdp_adjust_tail},
    programs::XdpContext,
};
use aya_log_ebpf::{info, warn};
use scheduler_common::{
    maps::{Counter, XdpConfig, RING_COUNT},
    Entry, Header, Op, KNOWN_TASK_FLAGS, MAX_LIST, MAX_PRIORITIES,
};

use crate::{
    counters::Tally,
    frame::{at, BoltFrame, EthHdr, Ipv4Hdr, UdpHdr, BOLT_OFF, IPV4_LEN, IP_OFF, UDP_LEN, UDP_OFF},
    get_task::ipv4_checksum,
    rings::{self, Pushed, Rings},
};

#[inline(always)]
fn entry_at(ctx: &XdpContext, i: usize) -> Option<*const Entry> {
    at::<Entry>(ctx, BOLT_OFF + Header::LEN + i * Entry::LEN).map(|p| p as *const Entry)
}

#[inline(always)]
pub fn handle(ctx: &XdpContext, cfg: &XdpConfig, bolt: BoltFrame, tally: &mut Tally) -> u32 {
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
    if n > MAX_LIST || bolt.message_len != Header::LEN + n * Entry::LEN || h.prio > MAX_PRIORITIES || h.rsrc | h.flags != 0
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
    let mut granted = Lanes(0);
    for r in 0..RING_COUNT {
        let want = wanted.get(r);
        if want != 0 {
            granted.add(r, rings.reserve(r as u32 + 1, want, cfg));
        }
    }
    let (mut stored, mut overflowed) = (0u64, 0u64);
    let mut unstored_from = None;
    for i in 0..MAX_LIST {
        if i >= n {
            break;
        }
        let Some(e) = entry_at(ctx, i) else { break };
        // SAFETY: bounds checked by `entry_at`.
        let r = ring_index(unsafe { (*e).task.prio }, cfg);
        let mut in_ring = false;
        if granted.get(r) > 0 {
            granted.sub(r, 1);
            in_ring = matches!(rings.push_reserved(r as u32 + 1, e as *const u8, tally), Pushed::Stored);
        }
        if in_ring {
            stored += 1;
        } else if rings::push_overflow(e as *const u8) {
            overflowed += 1;
        } else {
            unstored_from = Some(i);
            break;
        }
    }
    for r in 0..RING_COUNT {
        rings.unreserve(r as u32 + 1, granted.get(r));
    }
    tally.add_n(Counter::RefillTasks, stored);
    tally.add_n(Counter::Overflow, overflowed);
    match unstored_from {
        None => xdp_action::XDP_DROP,
        Some(k) => bounce(ctx, cfg.port, k, n, tally),
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

/// The headers written in front of the returned entries.
#[repr(C)]
struct ReturnHeaders {
    eth: EthHdr,
    ip: Ipv4Hdr,
    udp: UdpHdr,
    bolt: Header,
}

/// Sends entries `k..n` of this REFILL back to the switch as a RETURN: the front of the
/// frame is cut so that the new headers end where entry `k` begins.
#[inline(never)]
fn bounce(ctx: &XdpContext, port: u16, k: usize, n: usize, tally: &mut Tally) -> u32 {
    let (Some(eth), Some(ip), Some(udp)) =
        (at::<EthHdr>(ctx, 0), at::<Ipv4Hdr>(ctx, IP_OFF), at::<UdpHdr>(ctx, UDP_OFF))
    else {
        return lost(ctx, k, n, tally);
    };
    // SAFETY: bounds checked by `at`. Copies, because the frame is about to move.
    let (mac_src, mac_dst, ip_src, ip_dst, tos, id, frag, ttl, switch_port) = unsafe {
        ((*eth).src, (*eth).dst, (*ip).src, (*ip).dst, (*ip).tos, (*ip).id, (*ip).frag, (*ip).ttl, (*udp).src_port)
    };
    let k = k & 0x0F; // k < MAX_LIST; the mask lets the verifier see it.
    let left = n - k;
    let message_len = Header::LEN + left * Entry::LEN;
    // Trailing bytes past the datagram go first, so that a failure leaves the frame whole.
    let frame_len = ctx.data_end() - ctx.data();
    let trailing = frame_len as i32 - (BOLT_OFF + Header::LEN + n * Entry::LEN) as i32;
    // SAFETY: the helpers check their arguments.
    if trailing > 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, -trailing) } != 0 {
        return lost(ctx, k, n, tally);
    }
    let cut = (k * Entry::LEN) as i32;
    if cut != 0 && unsafe { bpf_xdp_adjust_head(ctx.ctx, cut) } != 0 {
        return lost(ctx, k, n, tally);
    }
    let Some(out) = at::<ReturnHeaders>(ctx, 0) else {
        return lost(ctx, k, n, tally);
    };
    let ip_len = IPV4_LEN + UDP_LEN + message_len;
    // SAFETY: bounds checked by `at` against the moved frame.
    unsafe {
        (*out).eth = EthHdr { dst: mac_src, src: mac_dst, ethertype: 0x0800u16.to_be_bytes() };
        (*out).ip = Ipv4Hdr {
            version_ihl: 0x45,
            tos,
            total_len: (ip_len as u16).to_be_bytes(),
            id,
            frag,
            ttl,
            proto: 17,
            checksum: [0; 2],
            src: ip_dst,
            dst: ip_src,
        };
        (*out).ip.checksum = ipv4_checksum(&(*out).ip);
        (*out).udp = UdpHdr {
            src_port: port.to_be_bytes(),
            dst_port: switch_port,
            len: ((UDP_LEN + message_len) as u16).to_be_bytes(),
            checksum: [0; 2],
        };
        (*out).bolt = Header::new(Op::Return, left as u8, 0, 0, 0);
    }
    tally.add_n(Counter::Bounced, left as u64);
    warn!(ctx, "rings and overflow full: {} REFILL tasks returned to the switch", left as u32);
    xdp_action::XDP_TX
}

/// The frame could not be rewritten (not expected: it only shrinks). Entries `k..n` are
/// passed up to the host stack in the original frame, where the agent's Bolt socket can
/// take them; entries before `k` were stored and may be seen twice, never lost.
#[inline(always)]
fn lost(ctx: &XdpContext, k: usize, n: usize, tally: &mut Tally) -> u32 {
    tally.add(Counter::AdjustFailed);
    warn!(ctx, "REFILL rewrite failed: entries {}..{} passed to the stack", k as u32, n as u32);
    xdp_action::XDP_PASS
}

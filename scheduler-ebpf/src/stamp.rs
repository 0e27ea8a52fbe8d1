//! BEST stamps on the other packets tier 2 sends towards this host: HINT (to the agent),
//! and ASSIGN (one task, or a bundle of up to 16) and NOOP passing through to an executor. REFILL records its own (see
//! refill.rs). The stamp is stored with the time it was read, for the GET_TASK bypass
//! rule; the packet itself always goes on to the stack untouched.

use aya_ebpf::{bindings::xdp_action, programs::XdpContext};
use scheduler_common::{
    maps::{Counter, XdpConfig},
    message_len, Entry, Header, Op, Task, MAX_LIST, MAX_PRIORITIES,
};

use crate::{
    counters::Tally,
    frame::{at, BoltFrame, Ipv4Hdr, BOLT_OFF, IP_OFF},
    rings::Rings,
};

const HINT_LEN: usize = message_len(Op::Hint, 0);
const NOOP_LEN: usize = message_len(Op::Noop, 0);
/// TPRIO's offset in an ENTRY.
const TASK_PRIO: usize = core::mem::offset_of!(Entry, task) + core::mem::offset_of!(Task, prio);

#[inline(always)]
pub fn handle(ctx: &XdpContext, cfg: &XdpConfig, bolt: BoltFrame, op: Op, tally: &mut Tally) -> u32 {
    let h: Header = bolt.header;
    let count = h.count as usize;
    let (len, count_ok) = match op {
        Op::Hint => (HINT_LEN, count == 0),
        Op::Noop => (NOOP_LEN, count == 0),
        // One entry, or the bundle answering a GET_BUNDLE.
        _ => (Header::LEN + count * Entry::LEN, (1..=MAX_LIST).contains(&count)),
    };
    if !count_ok || bolt.message_len != len || h.prio > MAX_PRIORITIES || h.rsrc | h.flags != 0 {
        tally.add(Counter::Malformed);
        return xdp_action::XDP_PASS;
    }
    let Some(ip) = at::<Ipv4Hdr>(ctx, IP_OFF) else {
        tally.add(Counter::Truncated);
        return xdp_action::XDP_PASS;
    };
    // Only the switch's word counts: anyone else's stamp is ignored (the packet still
    // goes on; its receiver applies its own rules). SAFETY: bounds checked by `at`.
    if cfg.switch_ipv4 == [0; 4] || unsafe { (*ip).src } != cfg.switch_ipv4 {
        tally.add(Counter::OtherOp);
        return xdp_action::XDP_PASS;
    }
    // And only on an uplink, as for REFILL: behind the executor-facing interfaces an
    // executor could forge the switch's address and turn the host's rings off with a
    // HINT. SAFETY: the kernel hands the program a valid xdp_md.
    if !cfg.is_uplink(unsafe { (*ctx.ctx).ingress_ifindex }) {
        tally.add(Counter::StampOffUplink);
        return xdp_action::XDP_PASS;
    }
    if let Some(rings) = Rings::get() {
        rings.record_hint(h.prio);
        tally.add(Counter::Tier2Stamps);
    }
    // Tier 2 serving this host's executors is drain the agent sizes its prefetch by
    // (docs/agent.md): counted per task priority, for the rings to take it over.
    if op == Op::Assign {
        // Every task of a bundle counts; the loop is bounded by MAX_LIST for the verifier.
        for i in 0..MAX_LIST {
            if i >= count {
                break;
            }
            if let Some(prio) = at::<u8>(ctx, BOLT_OFF + Header::LEN + i * Entry::LEN + TASK_PRIO) {
                // SAFETY: bounds checked by `at`.
                tally.tier2_assign(unsafe { *prio });
            }
        }
    }
    xdp_action::XDP_PASS
}

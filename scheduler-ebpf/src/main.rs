//! Bolt tier 1: an XDP program that answers executors' GET_TASK from this node's task
//! rings and ingests REFILL batches from the tier-2 switch.
//!
//! Verdict rules (every case is counted, see `scheduler_common::maps::Counter`):
//! - Not IPv4/UDP to the Bolt port (IPv6, VLAN-tagged, other EtherTypes, IPv4 with
//!   options, fragments, other protocols, other ports): XDP_PASS, untouched.
//! - Frames shorter than their headers claim: XDP_PASS, untouched (the stack drops them).
//! - GET_TASK: XDP_TX with an ASSIGN when the dedicated ring (PINned tasks, first) or a
//!   shared ring holds a task the executor can run (GET_BUNDLE alike: an ASSIGN of one
//!   task, `want` being an upper bound),
//!   otherwise XDP_PASS unchanged so that it reaches tier 2. A malformed GET_TASK, or
//!   one from another node's executor, is passed on unchanged too. A GET_TASK from a
//!   source outside the configured executor prefix: XDP_DROP.
//! - REFILL: always consumed. On an uplink interface, from the configured switch address
//!   and well formed: tasks go to their rings (XDP_DROP), or back to tier 2 as RETURN
//!   when nothing can hold them (XDP_TX). On another interface, from anyone else, or
//!   malformed: XDP_DROP.
//! - HINT, and ASSIGN/NOOP on their way to an executor (from the switch's Bolt port to
//!   any port of this host): tier 2's BEST stamp in the header is recorded with the
//!   time (only from the configured switch address), then XDP_PASS. REFILL records its
//!   stamp too. Any other datagram from the switch's port to another port: XDP_PASS.
//! - GET_TASK also passes on to tier 2 ("bypass") when that stamp is younger than
//!   `hint_ttl_ns` and names a level above every non-empty ring the request searches.
//! - Every other Bolt op (PIN included: the agent stores it): XDP_PASS (the stack
//!   delivers it to its socket).
#![no_std]
#![no_main]
#![feature(asm_experimental_arch)]

mod atomic;
mod config;
mod counters;
mod dedicated;
mod frame;
mod get_task;
mod maps;
mod refill;
mod rings;
mod stamp;
mod waiters;
mod words;

use aya_ebpf::{bindings::xdp_action, macros::xdp, programs::XdpContext};
use scheduler_common::{
    maps::{Counter, XdpConfig},
    Op,
};

use crate::counters::Tally;
use crate::frame::{BoltFrame, Classified};

#[xdp]
pub fn bolt_xdp(ctx: XdpContext) -> u32 {
    let Some(mut tally) = Tally::this_cpu() else {
        // The counters map always has its one slot; without it, stay out of the way.
        return xdp_action::XDP_PASS;
    };
    let Some(cfg) = config::get() else {
        return xdp_action::XDP_PASS;
    };
    let verdict = match frame::classify(&ctx, cfg) {
        Classified::NotBolt(reason) => {
            tally.add(reason);
            xdp_action::XDP_PASS
        }
        Classified::Bolt(bolt) => dispatch(&ctx, cfg, bolt, &mut tally),
    };
    match verdict {
        xdp_action::XDP_TX => tally.add(Counter::Transmitted),
        xdp_action::XDP_DROP => tally.add(Counter::Dropped),
        // A REFILL handed to a waiting executor: counted as `handoffs`.
        xdp_action::XDP_REDIRECT => {}
        _ => tally.add(Counter::Passed),
    }
    verdict
}

#[inline(always)]
fn dispatch(ctx: &XdpContext, cfg: &XdpConfig, bolt: BoltFrame, tally: &mut Tally) -> u32 {
    match Op::from_u8(bolt.op()) {
        Some(op @ (Op::Hint | Op::Assign | Op::Noop)) => stamp::handle(ctx, cfg, bolt, op, tally),
        _ if !bolt.to_bolt_port => {
            tally.add(Counter::OtherPort);
            xdp_action::XDP_PASS
        }
        Some(op @ (Op::GetTask | Op::GetBundle)) => get_task::handle(ctx, cfg, bolt, op, tally),
        Some(Op::Refill) => refill::handle(ctx, cfg, bolt, tally),
        Some(_) => {
            tally.add(Counter::OtherOp);
            xdp_action::XDP_PASS
        }
        None => {
            tally.add(Counter::Malformed);
            xdp_action::XDP_PASS
        }
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any path that could reach this; it only satisfies no_std.
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

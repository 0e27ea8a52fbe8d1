//! The Bolt scheduler of the thesis (§3.2 to §3.4): per-priority circular queues with
//! `<round, index>` pointers, pointer repair, priority search by recirculation and
//! resource constraints by SWAP. This is the project's one implementation of the
//! algorithm: the software switch (`bolt switch`) runs it, `bolt bench noop` drives it
//! in-process, and bolt.p4 mirrors it register for register.
//!
//! [`Pipeline`] holds the registers and runs single passes; [`Scheduler`] feeds it the
//! way a switch does, serving recirculated packets from a FIFO before new ones.

pub mod backlog;
mod packet;
mod pipeline;
mod pointer;
mod registers;
pub mod stats;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::SocketAddrV4;

pub use backlog::{ResourceBacklog, RESOURCE_BITS};
pub use packet::{Asker, Collect, ListId, NotForSwitch, Output, Packet, PointerKind, Refusals, Retrieval, Sink};
pub use pipeline::{DriftWindow, PassOutput, Pipeline, QueueConfig, DRIFT_LIMIT, TOFINO_QUEUE_CAPACITY};
pub use pointer::Ring;
pub use registers::Stage;
pub use stats::{origin_index, OpCost, QueueStats, ORIGINS};

use scheduler_common::Message;

/// The Bolt switch pipeline with its recirculation FIFO.
pub struct Scheduler {
    pipeline: Pipeline,
    recirculation: VecDeque<Packet>,
}

impl Scheduler {
    pub fn new(config: QueueConfig) -> Result<Scheduler, String> {
        Ok(Scheduler { pipeline: Pipeline::new(config)?, recirculation: VecDeque::with_capacity(64) })
    }

    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    pub fn stats(&self) -> &QueueStats {
        self.pipeline.stats()
    }

    /// Processes one message from outside, and every pass it causes, to completion.
    pub fn handle(&mut self, msg: &Message<'_>, src: SocketAddrV4, out: &mut impl Sink) -> Result<(), NotForSwitch> {
        let pkt = self.pipeline.admit(msg, src)?;
        self.run(pkt, out);
        Ok(())
    }

    /// Runs `pkt` and then the recirculation FIFO until it is empty.
    pub fn run(&mut self, pkt: Packet, out: &mut impl Sink) {
        let mut next = Some(pkt);
        while let Some(pkt) = next.take().or_else(|| self.recirculation.pop_front()) {
            let PassOutput { recirculate, spawn } = self.pipeline.pass(pkt, out);
            self.recirculation.extend(recirculate);
            self.recirculation.extend(spawn);
        }
    }
}

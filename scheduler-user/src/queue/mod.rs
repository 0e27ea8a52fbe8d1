//! The Bolt scheduler of the thesis (§3.2 to §3.4): per-priority circular queues with
//! `<round, index>` pointers, pointer repair, priority search by recirculation and
//! resource constraints by SWAP. This is the project's one implementation of the
//! algorithm: the software switch runs it, the simulator runs it, and bolt.p4 mirrors it
//! register for register.
//!
//! [`Pipeline`] holds the registers and runs single passes; [`Scheduler`] feeds it the
//! way a switch does, serving recirculated packets from a FIFO before new ones.

mod packet;
mod pipeline;
mod pointer;
mod registers;
mod stats;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::SocketAddrV4;

pub use packet::{Asker, Collect, Output, Packet, PointerKind, Retrieval, Sink};
pub use pipeline::{PassOutput, Pipeline, QueueConfig, DRIFT_LIMIT};
pub use pointer::Ring;
pub use registers::Stage;
pub use stats::{OpCost, QueueStats, ORIGINS};

use arrayvec::ArrayVec;
use scheduler_common::{Message, Op};

/// Why the switch did not take a message into its pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotForSwitch {
    /// ASSIGN, NOOP, COMPLETE, QUEUE_FULL and REFILL travel away from the switch.
    WrongDirection(Op),
}

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

    /// Turns a validated message from `src` into the packet that enters the pipeline.
    pub fn admit(config: &QueueConfig, msg: &Message<'_>, src: SocketAddrV4) -> Result<Packet, NotForSwitch> {
        let budget = config.max_passes;
        Ok(match *msg {
            Message::Submit { job, tasks, .. } => Packet::Submit {
                client: src,
                job,
                tasks: tasks.iter().copied().collect(),
                next: 0,
                rejected: 0,
            },
            Message::GetTask { rtrv_prio, exec_rsrc, from } => Packet::Retrieve(Retrieval {
                asker: Asker::Executor { addr: src, who: from },
                exec_rsrc,
                // RTRV_PRIO below the configured levels starts at the lowest level.
                level: rtrv_prio.min(config.priorities) - 1,
                want: 1,
                budget,
                found: ArrayVec::new(),
                batches_sent: 0,
            }),
            Message::RefillReq { node_rsrc, req } => Packet::Retrieve(Retrieval {
                asker: Asker::Host { addr: src, node: req.node() },
                exec_rsrc: node_rsrc,
                level: 0,
                want: req.want as u16,
                budget,
                found: ArrayVec::new(),
                batches_sent: 0,
            }),
            Message::Return(entries) => Packet::Return { entries: entries.iter().copied().collect(), next: 0 },
            ref other => return Err(NotForSwitch::WrongDirection(other.op())),
        })
    }

    /// Processes one message from outside, and every pass it causes, to completion.
    pub fn handle(&mut self, msg: &Message<'_>, src: SocketAddrV4, out: &mut impl Sink) -> Result<(), NotForSwitch> {
        let pkt = Self::admit(self.pipeline.config(), msg, src)?;
        self.pipeline.count_packet(msg.op());
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

//! Packets as the switch pipeline sees them: the external operations after parsing, and
//! the packets a pass recirculates (SWAP, REPAIR, the rest of a SUBMIT, a retrieval
//! moving to the next priority level). In bolt.p4 these are the Bolt header plus the
//! bridged SwapState/RepairState bodies of scheduler-common.

use std::net::SocketAddrV4;

use arrayvec::ArrayVec;
use scheduler_common::{Entry, JobRef, Op, Requester, Task, MAX_LIST};

/// Who a retrieval answers, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asker {
    /// An executor's GET_TASK: one task by ASSIGN, or NOOP.
    Executor { addr: SocketAddrV4, who: Requester },
    /// A host's REFILL_REQ: up to `want` tasks in REFILL batches of at most 16.
    Host { addr: SocketAddrV4, node: u16 },
    /// An executor's GET_BUNDLE: up to `want` (at most 16) tasks in one ASSIGN, or NOOP.
    Bundle { addr: SocketAddrV4, who: Requester },
}

/// A list of up to 16 entries held in the pipeline's packet buffers
/// ([`ListPool`]); packets carry only its index, as a switch keeps payload in packet
/// memory and moves descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListId(u32);

/// Packet buffers for lists: reused, so the packet path does not allocate once warm.
#[derive(Default)]
pub struct ListPool {
    lists: Vec<ArrayVec<Entry, MAX_LIST>>,
    free: Vec<u32>,
}

impl ListPool {
    pub fn alloc(&mut self) -> ListId {
        match self.free.pop() {
            Some(i) => ListId(i),
            None => {
                self.lists.push(ArrayVec::new());
                ListId(self.lists.len() as u32 - 1)
            }
        }
    }

    pub fn get(&self, id: ListId) -> &ArrayVec<Entry, MAX_LIST> {
        &self.lists[id.0 as usize]
    }

    pub fn get_mut(&mut self, id: ListId) -> &mut ArrayVec<Entry, MAX_LIST> {
        &mut self.lists[id.0 as usize]
    }

    pub fn release(&mut self, id: ListId) {
        self.lists[id.0 as usize].clear();
        self.free.push(id.0);
    }

    /// Buffers currently held by packets in flight.
    pub fn in_use(&self) -> usize {
        self.lists.len() - self.free.len()
    }
}

/// A retrieval in progress: GET_TASK, GET_BUNDLE or REFILL_REQ, searching one priority level per
/// pass from its RTRV_PRIO down.
#[derive(Clone, Copy, Debug)]
pub struct Retrieval {
    pub asker: Asker,
    /// EXEC_RSRC: the requester's resources; a task runs if its TRSRC is a subset.
    pub exec_rsrc: u8,
    /// The level searched next, 0-based (RTRV_PRIO - 1).
    pub level: u8,
    /// Tasks still wanted.
    pub want: u16,
    /// SWAP passes this retrieval may still spend at `level`: bounds every SWAP search.
    /// Reset to `QueueConfig::max_passes` when the search moves one level down.
    pub budget: u16,
    /// REFILL packets already sent for this request.
    pub batches_sent: u16,
    /// Tasks found and not yet sent (the REFILL batch or the bundle being filled).
    pub batch: Option<ListId>,
}

impl Retrieval {
    pub fn origin(&self) -> Op {
        match self.asker {
            Asker::Executor { .. } => Op::GetTask,
            Asker::Host { .. } => Op::RefillReq,
            Asker::Bundle { .. } => Op::GetBundle,
        }
    }
}

/// Where entries an enqueue could not place are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusals {
    /// SUBMIT: each refused task in a QUEUE_FULL of its own to the submitter.
    ToSubmitter { client: SocketAddrV4, job: JobRef },
    /// RETURN: each refused entry in a QUEUE_FULL to its own client.
    ToOwners,
}

/// Which pointer a REPAIR packet resets (thesis §3.2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointerKind {
    Add,
    Retrieve,
}

#[derive(Clone, Copy, Debug)]
pub enum Packet {
    /// SUBMIT or RETURN: one entry enqueued per pass, the rest recirculated (§3.2.3).
    Enqueue {
        list: ListId,
        /// Index of the entry the next pass enqueues: the first one still in the packet.
        next: u8,
        refusals: Refusals,
    },
    /// GET_TASK or REFILL_REQ at `Retrieval::level`.
    Retrieve(Retrieval),
    /// Resource-constraint search (§3.4.2, §3.4.3): `held` is swapped with the entry at
    /// `swap_idx`; `pkt_retrieve_ptr` is retrieve_ptr as it was when the search started.
    Swap { r: Retrieval, held: Entry, swap_idx: u32, pkt_retrieve_ptr: u32 },
    /// A SWAP search that reached add_ptr: `held` goes back to the tail of its queue,
    /// then the retrieval continues one level lower.
    Reinsert { held: Entry, level: u8, then: Retrieval },
    /// Resets a pointer and clears its is_repairing flag.
    Repair { level: u8, pointer: PointerKind, value: u32, origin: Op },
}

impl Packet {
    /// The external operation this packet (or the packet that spawned it) came from.
    pub fn origin(&self) -> Op {
        match self {
            Packet::Enqueue { refusals: Refusals::ToSubmitter { .. }, .. } => Op::Submit,
            Packet::Enqueue { refusals: Refusals::ToOwners, .. } => Op::Return,
            Packet::Retrieve(r) | Packet::Swap { r, .. } | Packet::Reinsert { then: r, .. } => r.origin(),
            Packet::Repair { origin, .. } => *origin,
        }
    }
}

/// Why the switch did not take a message into its pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotForSwitch {
    /// ASSIGN, NOOP, COMPLETE, QUEUE_FULL and REFILL travel away from the switch.
    WrongDirection(Op),
}

/// Where a pass sends the packets that leave the switch. The software switch encodes
/// them straight into its send buffers; tests collect them.
pub trait Sink {
    fn assign(&mut self, to: SocketAddrV4, entry: &Entry);
    /// One ASSIGN listing 1..=16 entries (a GET_BUNDLE's answer), in the order found.
    fn bundle(&mut self, to: SocketAddrV4, entries: &[Entry]);
    fn noop(&mut self, to: SocketAddrV4, who: Requester);
    fn queue_full(&mut self, to: SocketAddrV4, job: JobRef, tasks: &[Task]);
    fn refill(&mut self, to: SocketAddrV4, entries: &[Entry]);
}

/// A packet that left the switch, as collected by [`Collect`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Assign { to: SocketAddrV4, entry: Entry },
    Bundle { to: SocketAddrV4, entries: Vec<Entry> },
    Noop { to: SocketAddrV4, who: Requester },
    QueueFull { to: SocketAddrV4, job: JobRef, tasks: Vec<Task> },
    Refill { to: SocketAddrV4, entries: Vec<Entry> },
}

/// A sink that keeps every output, for tests.
#[derive(Default, Debug)]
pub struct Collect(pub Vec<Output>);

impl Sink for Collect {
    fn assign(&mut self, to: SocketAddrV4, entry: &Entry) {
        self.0.push(Output::Assign { to, entry: *entry });
    }
    fn bundle(&mut self, to: SocketAddrV4, entries: &[Entry]) {
        self.0.push(Output::Bundle { to, entries: entries.to_vec() });
    }
    fn noop(&mut self, to: SocketAddrV4, who: Requester) {
        self.0.push(Output::Noop { to, who });
    }
    fn queue_full(&mut self, to: SocketAddrV4, job: JobRef, tasks: &[Task]) {
        self.0.push(Output::QueueFull { to, job, tasks: tasks.to_vec() });
    }
    fn refill(&mut self, to: SocketAddrV4, entries: &[Entry]) {
        self.0.push(Output::Refill { to, entries: entries.to_vec() });
    }
}

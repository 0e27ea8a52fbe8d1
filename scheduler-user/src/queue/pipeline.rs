//! The Bolt queue algorithm (thesis §3.2 to §3.4) as the switch runs it: one function per
//! pass, each register array touched at most once and in stage order (see registers.rs),
//! recirculation for everything that needs another look.
//!
//! Two safeguards go beyond the thesis text, both single register accesses a Tofino
//! stateful ALU can do, and both explained in docs/queue.md:
//! - an enqueue sets `is_valid` with read-and-set and writes the slot only if it was
//!   free, so a pointer that drifted can never overwrite a queued task (the task goes
//!   back in QUEUE_FULL instead), and a dequeue clears it with read-and-clear, so no
//!   task is handed out twice;
//! - `retrieve_ptr` is incremented only while it is less than [`DRIFT_LIMIT`] past
//!   `add_ptr`, so hours of empty polling cannot wrap the signed pointer distance (the
//!   thesis leaves it to grow until the next SUBMIT); below the limit it still laps the
//!   ring freely, which is how an entry stranded behind it by a race is found again.

use std::net::SocketAddrV4;

use scheduler_common::{resources_match, Entry, JobRef, Message, Op, Task};

use super::backlog::ResourceBacklog;
use super::packet::{Asker, ListId, ListPool, NotForSwitch, Packet, PointerKind, Refusals, Retrieval, Sink};
use super::pointer::Ring;
use super::registers::{PassTracker, Stage};
use super::stats::{origin_index, QueueStats};

/// How far retrieve_ptr may run past add_ptr: half the signed range, far beyond any
/// queue length, so `add_ptr - retrieve_ptr` never changes sign by wrapping.
pub const DRIFT_LIMIT: i32 = 1 << 30;

/// Entries per level that fit a Tofino's register memory next to the stateful ALUs
/// (4 levels x 16 K, p4/README.md "Resource budget"): bolt.p4's default geometry. The
/// software switch defaults to the thesis prototype's 128 K ([`QueueConfig::default`]).
pub const TOFINO_QUEUE_CAPACITY: u32 = 1 << 14;

/// The drift test as a Tofino stateful ALU can make it. The ALU compares the register
/// with a packet field on 34-bit extended operands, so a wrapped 32-bit difference
/// (`retrieve_ptr - add_ptr < DRIFT_LIMIT` as P4 defines it) is not available. The
/// increment stops when retrieve_ptr lies in the circular interval `[lo, hi)` =
/// `[add_ptr + 2^30, add_ptr + 2^31)`; the match-action stage before the ALU computes
/// `lo`, `hi` (wrapping adds) and whether the interval wraps past 2^32, and picks one of
/// two RegisterActions, each of which only compares the register with `lo` and `hi`
/// unsigned, which the ALU does exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriftWindow {
    pub lo: u32,
    pub hi: u32,
}

impl DriftWindow {
    pub fn new(add: u32) -> DriftWindow {
        DriftWindow { lo: add.wrapping_add(DRIFT_LIMIT as u32), hi: add.wrapping_add(1 << 31) }
    }

    /// `lo`'s two high bits are both set: `hi` wrapped past 2^32 (a gateway reads a slice).
    pub fn wraps(&self) -> bool {
        self.lo >> 30 == 0b11
    }

    /// The stateful ALU's condition: true when retrieve_ptr `r` may be incremented.
    pub fn allows_increment(&self, r: u32) -> bool {
        if self.wraps() {
            r < self.lo && r >= self.hi
        } else {
            r < self.lo || r >= self.hi
        }
    }
}

/// Shape of the queues.
#[derive(Clone, Copy, Debug)]
pub struct QueueConfig {
    /// Entries per priority level; a power of two.
    pub capacity: u32,
    /// Priority levels, 1 (highest) to `priorities`.
    pub priorities: u8,
    /// SWAP passes one GET_TASK or REFILL_REQ may spend at each priority level; when they
    /// run out the search goes on one level down (docs/queue.md, "Every search is bounded").
    pub max_passes: u16,
    /// Where both pointers start (tests start near u32::MAX to cross a round wrap).
    pub initial_pointer: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig { capacity: 1 << 17, priorities: 4, max_passes: 1024, initial_pointer: 0 }
    }
}

/// What one pass leaves behind besides the packets it sent out.
#[derive(Default)]
pub struct PassOutput {
    /// The packet itself, back to the ingress for another pass.
    pub recirculate: Option<Packet>,
    /// A new packet the pass generated (a REPAIR), also recirculated.
    pub spawn: Option<Packet>,
}

/// One priority level's registers.
struct Level {
    add_ptr: u32,
    retrieve_ptr: u32,
    valid: Box<[bool]>,
    rsrc: Box<[u8]>,
    entry: Box<[Entry]>,
    /// Valid slots, kept for monitoring only (no pass reads it).
    occupancy: u32,
}

#[derive(PartialEq, Eq)]
enum Enqueued {
    Added,
    /// add_ptr - retrieve_ptr says the queue is full.
    Full,
    /// The slot at add_ptr still holds a task (pointers drifted): not overwritten.
    Occupied,
}

/// All register state of the Bolt switch.
pub struct Pipeline {
    ring: Ring,
    config: QueueConfig,
    levels: Vec<Level>,
    /// is_repairing: bit 2l = add_ptr of level l, bit 2l+1 = retrieve_ptr (thesis ch. 4:
    /// the flags of all levels packed in one register).
    repairing: u16,
    tracker: PassTracker,
    stats: QueueStats,
    /// Queued tasks per resource bit (monitoring; bolt.p4 keeps the same registers).
    backlog: ResourceBacklog,
    /// Packet buffers for the lists packets carry.
    lists: ListPool,
}

fn add_flag(level: usize) -> u16 {
    1 << (2 * level)
}

fn retrieve_flag(level: usize) -> u16 {
    1 << (2 * level + 1)
}

impl Pipeline {
    pub fn new(config: QueueConfig) -> Result<Pipeline, String> {
        let ring = Ring::new(config.capacity)?;
        if config.priorities == 0 || config.priorities > scheduler_common::MAX_PRIORITIES {
            return Err(format!(
                "{} priority levels: must be 1 to {}",
                config.priorities,
                scheduler_common::MAX_PRIORITIES
            ));
        }
        let n = config.capacity as usize;
        let levels = (0..config.priorities)
            .map(|_| Level {
                add_ptr: config.initial_pointer,
                retrieve_ptr: config.initial_pointer,
                valid: vec![false; n].into_boxed_slice(),
                rsrc: vec![0; n].into_boxed_slice(),
                entry: vec![Entry::default(); n].into_boxed_slice(),
                occupancy: 0,
            })
            .collect();
        Ok(Pipeline {
            ring,
            config,
            levels,
            repairing: 0,
            tracker: PassTracker::default(),
            stats: QueueStats::default(),
            backlog: ResourceBacklog::default(),
            lists: ListPool::default(),
        })
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// Tasks queued per level (monitoring).
    pub fn occupancy(&self) -> Vec<u32> {
        self.levels.iter().map(|l| l.occupancy).collect()
    }

    /// Queued tasks per resource bit.
    pub fn backlog(&self) -> &ResourceBacklog {
        &self.backlog
    }

    /// `(add_ptr, retrieve_ptr)` of a level, for inspection and tests.
    pub fn pointers(&self, level: usize) -> (u32, u32) {
        (self.levels[level].add_ptr, self.levels[level].retrieve_ptr)
    }

    #[cfg(test)]
    pub(super) fn set_pointers(&mut self, level: usize, add: u32, retrieve: u32) {
        self.levels[level].add_ptr = add;
        self.levels[level].retrieve_ptr = retrieve;
    }

    /// True while any REPAIR packet is in flight.
    pub fn repairing(&self) -> bool {
        self.repairing != 0
    }

    /// The 0-based level a task of wire priority `prio` (1..=8) is queued at.
    pub fn level_of(&mut self, prio: u8) -> usize {
        let p = self.config.priorities;
        if prio > p {
            self.stats.priority_clamped += 1;
        }
        (prio.clamp(1, p) - 1) as usize
    }

    /// Packet buffers held by packets in flight (0 when the pipeline is idle).
    pub fn lists_in_use(&self) -> usize {
        self.lists.in_use()
    }

    /// Parses a validated message from `src` into the packet that enters the pipeline,
    /// and counts it.
    pub fn admit(&mut self, msg: &Message<'_>, src: SocketAddrV4) -> Result<Packet, NotForSwitch> {
        let budget = self.config.max_passes;
        let retrieval = |asker, exec_rsrc, level, want| Retrieval {
            asker,
            exec_rsrc,
            level,
            want,
            budget,
            batches_sent: 0,
            batch: None,
        };
        let pkt = match *msg {
            Message::Submit { job, tasks, .. } => {
                let list = self.lists.alloc();
                let (ip, port) = (src.ip().octets(), src.port());
                let entries = self.lists.get_mut(list);
                entries.extend(tasks.iter().map(|t| Entry::new(job.uid(), job.jid(), *t, ip, port)));
                Packet::Enqueue { list, next: 0, refusals: Refusals::ToSubmitter { client: src, job } }
            }
            Message::Return(returned) => {
                let list = self.lists.alloc();
                self.lists.get_mut(list).extend(returned.iter().copied());
                Packet::Enqueue { list, next: 0, refusals: Refusals::ToOwners }
            }
            // RTRV_PRIO below the configured levels starts at the lowest level.
            Message::GetTask { rtrv_prio, exec_rsrc, from, .. } => Packet::Retrieve(retrieval(
                Asker::Executor { addr: src, who: from },
                exec_rsrc,
                rtrv_prio.min(self.config.priorities) - 1,
                1,
            )),
            Message::GetBundle { rtrv_prio, exec_rsrc, from, want, .. } => Packet::Retrieve(retrieval(
                Asker::Bundle { addr: src, who: from },
                exec_rsrc,
                rtrv_prio.min(self.config.priorities) - 1,
                want as u16,
            )),
            Message::RefillReq { node_rsrc, req } => {
                Packet::Retrieve(retrieval(Asker::Host { addr: src, node: req.node() }, node_rsrc, 0, req.want as u16))
            }
            ref other => return Err(NotForSwitch::WrongDirection(other.op())),
        };
        self.stats.cost[origin_index(msg.op())].packets += 1;
        Ok(pkt)
    }

    /// Runs one pipeline pass of `pkt`.
    pub fn pass(&mut self, pkt: Packet, out: &mut impl Sink) -> PassOutput {
        self.tracker.begin();
        let origin = origin_index(pkt.origin());
        let cost = &mut self.stats.cost[origin];
        cost.passes += 1;
        let result = match pkt {
            Packet::Enqueue { list, next, refusals } => self.enqueue_pass(list, next, refusals, out),
            Packet::Retrieve(r) => self.retrieve_pass(r, out),
            Packet::Swap { r, held, swap_idx, pkt_retrieve_ptr } => {
                self.swap_pass(r, held, swap_idx, pkt_retrieve_ptr, out)
            }
            Packet::Reinsert { held, level, then } => self.reinsert_pass(held, level, then, out),
            Packet::Repair { level, pointer, value, .. } => self.repair_pass(level as usize, pointer, value),
        };
        let cost = &mut self.stats.cost[origin];
        cost.recirculations += result.recirculate.is_some() as u64 + result.spawn.is_some() as u64;
        result
    }

    // ---- register actions: one call = one RegisterAction execution ----

    fn add_read_and_increment(&mut self, l: usize) -> u32 {
        self.tracker.touch(Stage::AddPtr, l);
        let v = self.levels[l].add_ptr;
        self.levels[l].add_ptr = v.wrapping_add(1);
        v
    }

    fn add_read(&mut self, l: usize) -> u32 {
        self.tracker.touch(Stage::AddPtr, l);
        self.levels[l].add_ptr
    }

    fn add_write(&mut self, l: usize, v: u32) {
        self.tracker.touch(Stage::AddPtr, l);
        self.levels[l].add_ptr = v;
    }

    /// read_and_increment(retrieve_ptr), holding it below DRIFT_LIMIT past `add` (the
    /// value read from add_ptr earlier in the pass), by the stateful ALU's test
    /// ([`DriftWindow`]). Returns the value read and the value stored; the stored value
    /// is recomputed after the ALU from the read one: `(read - add)` with its two high
    /// bits `01` is the stopped case.
    fn retrieve_read_and_increment(&mut self, l: usize, add: u32) -> (u32, u32) {
        self.tracker.touch(Stage::RetrievePtr, l);
        let v = self.levels[l].retrieve_ptr;
        if DriftWindow::new(add).allows_increment(v) {
            self.levels[l].retrieve_ptr = v.wrapping_add(1);
        }
        let stopped = v.wrapping_sub(add) >> 30 == 0b01;
        (v, if stopped { v } else { v.wrapping_add(1) })
    }

    fn retrieve_read(&mut self, l: usize) -> u32 {
        self.tracker.touch(Stage::RetrievePtr, l);
        self.levels[l].retrieve_ptr
    }

    fn retrieve_write(&mut self, l: usize, v: u32) {
        self.tracker.touch(Stage::RetrievePtr, l);
        self.levels[l].retrieve_ptr = v;
    }

    /// Sets `flag` and returns whether it was already set.
    fn repairing_test_and_set(&mut self, flag: u16) -> bool {
        self.tracker.touch(Stage::RepairFlags, 0);
        let was = self.repairing & flag != 0;
        self.repairing |= flag;
        was
    }

    fn repairing_clear(&mut self, flag: u16) {
        self.tracker.touch(Stage::RepairFlags, 0);
        self.repairing &= !flag;
    }

    fn valid_read_and_set(&mut self, l: usize, i: usize) -> bool {
        self.tracker.touch(Stage::Valid, l);
        let level = &mut self.levels[l];
        let was = std::mem::replace(&mut level.valid[i], true);
        level.occupancy += !was as u32;
        was
    }

    fn valid_read_and_clear(&mut self, l: usize, i: usize) -> bool {
        self.tracker.touch(Stage::Valid, l);
        let level = &mut self.levels[l];
        let was = std::mem::replace(&mut level.valid[i], false);
        level.occupancy -= was as u32;
        was
    }

    fn rsrc_read(&mut self, l: usize, i: usize) -> u8 {
        self.tracker.touch(Stage::Rsrc, l);
        self.levels[l].rsrc[i]
    }

    fn rsrc_exchange(&mut self, l: usize, i: usize, v: u8) -> u8 {
        self.tracker.touch(Stage::Rsrc, l);
        std::mem::replace(&mut self.levels[l].rsrc[i], v)
    }

    fn entry_read(&mut self, l: usize, i: usize) -> Entry {
        self.tracker.touch(Stage::Entry, l);
        self.levels[l].entry[i]
    }

    fn entry_exchange(&mut self, l: usize, i: usize, v: Entry) -> Entry {
        self.tracker.touch(Stage::Entry, l);
        std::mem::replace(&mut self.levels[l].entry[i], v)
    }

    // ---- passes ----

    /// Adds one entry at the tail of level `l` (§3.2.3) in one pass. A full queue means
    /// add_ptr was advanced by mistake: the first such packet spawns an add_ptr REPAIR.
    /// A retrieve_ptr that ran past add_ptr (empty retrievals) is pulled back to the new
    /// task by a retrieve_ptr REPAIR (§3.2.5).
    fn enqueue(&mut self, l: usize, entry: &Entry, origin: Op) -> (Enqueued, Option<Packet>) {
        let add = self.add_read_and_increment(l);
        let retrieve = self.retrieve_read(l);
        let distance = Ring::distance(add, retrieve);
        let full = distance >= self.ring.capacity() as i32;
        let mut spawn = None;
        if full {
            if !self.repairing_test_and_set(add_flag(l)) {
                self.stats.repairs_add += 1;
                spawn = Some(Packet::Repair { level: l as u8, pointer: PointerKind::Add, value: add, origin });
            }
            return (Enqueued::Full, spawn);
        }
        if distance < 0 && !self.repairing_test_and_set(retrieve_flag(l)) {
            self.stats.repairs_retrieve += 1;
            spawn = Some(Packet::Repair { level: l as u8, pointer: PointerKind::Retrieve, value: add, origin });
        }
        let i = self.ring.index(add);
        if self.valid_read_and_set(l, i) {
            self.stats.slot_occupied += 1;
            return (Enqueued::Occupied, spawn);
        }
        self.rsrc_exchange(l, i, entry.task.rsrc);
        self.entry_exchange(l, i, *entry);
        self.stats.enqueued += 1;
        (Enqueued::Added, spawn)
    }

    /// One entry of a SUBMIT or RETURN list per pass: the first one left in the packet,
    /// which the pass removes; the rest recirculates. A task the queue refuses goes back
    /// at once in a QUEUE_FULL of its own (bolt.p4: a mirror of the pass, cut to that one
    /// task), so no pass holds more than one list item.
    fn enqueue_pass(&mut self, list: ListId, next: u8, refusals: Refusals, out: &mut impl Sink) -> PassOutput {
        let i = next as usize;
        let (entry, len) = {
            let entries = self.lists.get(list);
            (entries[i], entries.len())
        };
        let origin = if refusals == Refusals::ToOwners { Op::Return } else { Op::Submit };
        let l = self.level_of(entry.task.prio);
        let (result, spawn) = self.enqueue(l, &entry, origin);
        if origin == Op::Return {
            self.stats.returned_tasks += 1;
        }
        if result == Enqueued::Added {
            self.backlog.add(entry.task.rsrc);
        } else {
            match refusals {
                Refusals::ToSubmitter { client, job } => self.refuse(client, job, &entry.task, out),
                Refusals::ToOwners => self.bounce(&entry, out),
            }
        }
        if i + 1 < len {
            let rest = Packet::Enqueue { list, next: next + 1, refusals };
            return PassOutput { recirculate: Some(rest), spawn };
        }
        self.lists.release(list);
        PassOutput { recirculate: None, spawn }
    }

    /// Sends one task that could not be queued back to `client` in a QUEUE_FULL.
    fn refuse(&mut self, client: SocketAddrV4, job: JobRef, task: &Task, out: &mut impl Sink) {
        self.stats.queue_full_tasks += 1;
        self.stats.queue_full_packets += 1;
        out.queue_full(client, job, std::slice::from_ref(task));
    }

    /// Sends one entry that could not be queued back to its own client.
    fn bounce(&mut self, entry: &Entry, out: &mut impl Sink) {
        let client = SocketAddrV4::new(entry.client_ip.into(), entry.client_port());
        self.refuse(client, JobRef::new(entry.uid(), entry.jid()), &entry.task, out);
    }

    /// One dequeue at `r.level` (§3.2.4, §3.3.2): the head task if this requester can
    /// run it; otherwise the start of a SWAP search (§3.4.2); if the level is empty, the
    /// next level down, until the lowest answers NOOP.
    fn retrieve_pass(&mut self, r: Retrieval, out: &mut impl Sink) -> PassOutput {
        let l = r.level as usize;
        let add = self.add_read(l);
        let (ptr, stored) = self.retrieve_read_and_increment(l, add);
        let i = self.ring.index(ptr);
        if !self.valid_read_and_clear(l, i) {
            return self.next_level(r, out);
        }
        let rsrc = self.rsrc_read(l, i);
        let entry = self.entry_read(l, i);
        if resources_match(rsrc, r.exec_rsrc) {
            return self.deliver(r, entry, out);
        }
        self.stats.swaps += 1;
        let swap = Packet::Swap { r, held: entry, swap_idx: ptr.wrapping_add(1), pkt_retrieve_ptr: stored };
        PassOutput { recirculate: Some(swap), spawn: None }
    }

    /// §3.4.3: swap the held task with the entry at `swap_idx` (or at the head, when
    /// retrieve_ptr moved since the search began). A valid entry this requester can run
    /// is delivered; one it cannot run is carried on to the next slot; past add_ptr the
    /// held task is reinserted and the search moves one level down. So does a search
    /// whose budget at this level is spent: the held task goes to the tail, which is what
    /// moves the next search's window forward (docs/queue.md).
    fn swap_pass(
        &mut self,
        r: Retrieval,
        held: Entry,
        swap_idx: u32,
        pkt_retrieve_ptr: u32,
        out: &mut impl Sink,
    ) -> PassOutput {
        let l = r.level as usize;
        if r.budget == 0 {
            self.stats.budget_exhausted += 1;
            return PassOutput { recirculate: Some(Packet::Reinsert { held, level: l as u8, then: r }), spawn: None };
        }
        let r = Retrieval { budget: r.budget - 1, ..r };
        let add = self.add_read(l);
        let head = self.retrieve_read(l);
        let (at, pkt_retrieve_ptr) = if head != pkt_retrieve_ptr { (head, head) } else { (swap_idx, pkt_retrieve_ptr) };
        if Ring::at_or_past(at, add) {
            return PassOutput { recirculate: Some(Packet::Reinsert { held, level: l as u8, then: r }), spawn: None };
        }
        let i = self.ring.index(at);
        let was_valid = self.valid_read_and_set(l, i);
        let rsrc = self.rsrc_exchange(l, i, held.task.rsrc);
        let found = self.entry_exchange(l, i, held);
        if !was_valid {
            // The held task filled a free slot inside the queue: search again from the head.
            return PassOutput { recirculate: Some(Packet::Retrieve(r)), spawn: None };
        }
        if resources_match(rsrc, r.exec_rsrc) {
            return self.deliver(r, found, out);
        }
        self.stats.swaps += 1;
        let swap = Packet::Swap { r, held: found, swap_idx: at.wrapping_add(1), pkt_retrieve_ptr };
        PassOutput { recirculate: Some(swap), spawn: None }
    }

    fn reinsert_pass(&mut self, held: Entry, level: u8, then: Retrieval, out: &mut impl Sink) -> PassOutput {
        let (result, spawn) = self.enqueue(level as usize, &held, then.origin());
        self.stats.reinserts += 1;
        if result != Enqueued::Added {
            self.backlog.remove(held.task.rsrc);
            self.bounce(&held, out);
        }
        let mut next = self.next_level(then, out);
        next.spawn = spawn;
        next
    }

    fn repair_pass(&mut self, l: usize, pointer: PointerKind, value: u32) -> PassOutput {
        match pointer {
            PointerKind::Add => {
                self.add_write(l, value);
                self.repairing_clear(add_flag(l));
            }
            PointerKind::Retrieve => {
                self.retrieve_write(l, value);
                self.repairing_clear(retrieve_flag(l));
            }
        }
        PassOutput::default()
    }

    /// Recirculates the retrieval to the next level down (RTRV_PRIO + 1) with a fresh
    /// budget, or ends it.
    fn next_level(&mut self, r: Retrieval, out: &mut impl Sink) -> PassOutput {
        let next = r.level + 1;
        if next >= self.config.priorities {
            self.finish(r, out);
            return PassOutput::default();
        }
        let r = Retrieval { level: next, budget: self.config.max_passes, ..r };
        PassOutput { recirculate: Some(Packet::Retrieve(r)), spawn: None }
    }

    /// A task for the requester: ASSIGN it, or add it to the REFILL batch or the bundle
    /// and go on.
    fn deliver(&mut self, mut r: Retrieval, entry: Entry, out: &mut impl Sink) -> PassOutput {
        self.stats.decisions += 1;
        self.backlog.remove(entry.task.rsrc);
        match r.asker {
            Asker::Executor { addr, .. } => {
                self.stats.assigns += 1;
                out.assign(addr, &entry);
                PassOutput::default()
            }
            Asker::Host { .. } | Asker::Bundle { .. } => {
                let batch = *r.batch.get_or_insert_with(|| self.lists.alloc());
                let entries = self.lists.get_mut(batch);
                if let Asker::Host { addr, .. } = r.asker {
                    // Newest first: bolt.p4 emits the entry found in front of the ones
                    // found before, which travel as payload, so a pass holds one entry.
                    entries.insert(0, entry);
                    if entries.is_full() {
                        self.send_refill(addr, &mut r, out);
                    }
                } else {
                    // A bundle runs in the order the tasks were found (priority, then
                    // FIFO); `want` is at most 16, so it never outgrows one list.
                    entries.push(entry);
                }
                r.want -= 1;
                if r.want == 0 {
                    self.finish(r, out);
                    return PassOutput::default();
                }
                // The level's budget carries over: the next search starts at the head again.
                PassOutput { recirculate: Some(Packet::Retrieve(r)), spawn: None }
            }
        }
    }

    /// Sends the batch collected so far (possibly empty) as one REFILL.
    fn send_refill(&mut self, addr: SocketAddrV4, r: &mut Retrieval, out: &mut impl Sink) {
        let entries: &[Entry] = match r.batch {
            Some(b) => self.lists.get(b),
            None => &[],
        };
        self.stats.refill_packets += 1;
        self.stats.refill_tasks += entries.len() as u64;
        out.refill(addr, entries);
        if let Some(b) = r.batch.take() {
            self.lists.release(b);
        }
        r.batches_sent += 1;
    }

    /// Ends a retrieval: NOOP for an executor that got nothing; the bundle found, in one
    /// ASSIGN, for an executor's GET_BUNDLE; the last REFILL batch for a host. A host
    /// knows the answer is complete when `want` tasks came or a REFILL has fewer than 16
    /// entries, so one that got fewer than it wanted always ends with a short batch, if
    /// need be an empty one (which also tells it to back off).
    fn finish(&mut self, mut r: Retrieval, out: &mut impl Sink) {
        match r.asker {
            Asker::Executor { addr, who } => {
                self.stats.noops += 1;
                out.noop(addr, who);
            }
            Asker::Bundle { addr, who } => match r.batch.take() {
                Some(b) => {
                    let entries = self.lists.get(b);
                    self.stats.assigns += 1;
                    self.stats.bundles += 1;
                    self.stats.bundled_tasks += entries.len() as u64;
                    out.bundle(addr, entries);
                    self.lists.release(b);
                }
                None => {
                    self.stats.noops += 1;
                    out.noop(addr, who);
                }
            },
            Asker::Host { addr, .. } => {
                if r.batch.is_some() || r.want > 0 {
                    self.send_refill(addr, &mut r, out);
                }
            }
        }
    }
}

//! Task state as compressed bit vectors, one per state, as in the BitMagic job-queue
//! design: a task id is set in exactly one of the five vectors. Monitoring reads the
//! vectors directly (how many are Pending, which ones Failed) and a state change is a
//! remove from one vector and an insert into another.

use std::ops::Range;

use roaring::RoaringBitmap;

/// The life cycle of one task, from the client's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Known to the client and waiting to be sent: not sent yet, bounced by QUEUE_FULL
    /// and backing off, or waiting to be resubmitted after a timeout or failure.
    Pending,
    /// Accepted by the scheduler and not yet complete: sent in a SUBMIT that was not
    /// bounced with QUEUE_FULL, so it is queued at the switch, on its way to an
    /// executor, or running. (The protocol has no positive acknowledgement, so a SUBMIT
    /// counts as accepted until a QUEUE_FULL says otherwise; a lost SUBMIT shows up as
    /// a timeout.)
    Running,
    /// An executor reported it complete with STATUS_OK.
    Done,
    /// Given up: every attempt failed, was refused or timed out, or the switch kept
    /// refusing it with QUEUE_FULL.
    Failed,
    /// Canceled by the client before it completed.
    Canceled,
}

impl TaskState {
    pub const ALL: [TaskState; 5] =
        [TaskState::Pending, TaskState::Running, TaskState::Done, TaskState::Failed, TaskState::Canceled];

    /// Done, Failed and Canceled are final: nothing moves a task out of them.
    pub const fn is_final(self) -> bool {
        matches!(self, TaskState::Done | TaskState::Failed | TaskState::Canceled)
    }

    pub const fn name(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Done => "done",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Five roaring bitmaps of task ids, one per [`TaskState`].
#[derive(Clone, Debug, Default)]
pub struct TaskStates {
    vectors: [RoaringBitmap; 5],
}

impl TaskStates {
    pub fn new() -> TaskStates {
        TaskStates::default()
    }

    /// The vector of one state.
    pub fn vector(&self, state: TaskState) -> &RoaringBitmap {
        &self.vectors[state.index()]
    }

    /// How many tasks are in `state`.
    pub fn count(&self, state: TaskState) -> u64 {
        self.vectors[state.index()].len()
    }

    /// The state of task `tid`, or `None` for an id this client never created.
    pub fn state_of(&self, tid: u32) -> Option<TaskState> {
        // Most lookups are for tasks in flight; test those vectors first.
        [TaskState::Running, TaskState::Pending, TaskState::Done, TaskState::Failed, TaskState::Canceled]
            .into_iter()
            .find(|s| self.vectors[s.index()].contains(tid))
    }

    /// Registers new tasks as Pending. Ids already known are refused.
    pub(crate) fn add_pending(&mut self, tids: Range<u32>) -> Result<(), &'static str> {
        if self.vectors.iter().any(|v| v.range_cardinality(tids.clone()) != 0) {
            return Err("task id already in use");
        }
        self.vectors[TaskState::Pending.index()].insert_range(tids);
        Ok(())
    }

    /// Moves `tid` from `from` to `to`. Returns false (and changes nothing) if the
    /// task is not in `from`, or if `from` is final.
    pub(crate) fn transition(&mut self, tid: u32, from: TaskState, to: TaskState) -> bool {
        if from.is_final() || !self.vectors[from.index()].remove(tid) {
            return false;
        }
        self.vectors[to.index()].insert(tid);
        true
    }

    /// Moves every task of `tids` that is in `from` to `to` at once (set algebra, not one
    /// id at a time). Returns how many moved; nothing moves out of a final state.
    pub fn transition_range(&mut self, tids: Range<u32>, from: TaskState, to: TaskState) -> u64 {
        if from.is_final() || from == to {
            return 0;
        }
        let mut moving = RoaringBitmap::new();
        moving.insert_range(tids);
        moving &= &self.vectors[from.index()];
        self.vectors[from.index()] -= &moving;
        self.vectors[to.index()] |= &moving;
        moving.len()
    }

    /// Bytes the five vectors take when serialized (a measure of their compressed size).
    pub fn serialized_bytes(&self) -> usize {
        self.vectors.iter().map(|v| v.serialized_size()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_exactly_one(s: &TaskStates, tid: u32) -> bool {
        TaskState::ALL.iter().filter(|&&st| s.vector(st).contains(tid)).count() == 1
    }

    #[test]
    fn a_task_is_in_exactly_one_vector() {
        let mut s = TaskStates::new();
        s.add_pending(0..100).unwrap();
        assert_eq!(s.count(TaskState::Pending), 100);
        assert!(s.transition(7, TaskState::Pending, TaskState::Running));
        assert!(s.transition(7, TaskState::Running, TaskState::Done));
        assert!(s.transition(8, TaskState::Pending, TaskState::Canceled));
        assert!(s.transition(9, TaskState::Pending, TaskState::Running));
        assert!(s.transition(9, TaskState::Running, TaskState::Pending));
        for tid in 0..100 {
            assert!(in_exactly_one(&s, tid), "task {tid}");
        }
        assert_eq!(s.state_of(7), Some(TaskState::Done));
        assert_eq!(s.state_of(8), Some(TaskState::Canceled));
        assert_eq!(s.state_of(9), Some(TaskState::Pending));
        assert_eq!(s.state_of(100), None);
        let total: u64 = TaskState::ALL.iter().map(|&st| s.count(st)).sum();
        assert_eq!(total, 100);
    }

    #[test]
    fn illegal_transitions_change_nothing() {
        let mut s = TaskStates::new();
        s.add_pending(0..3).unwrap();
        // Not in `from`.
        assert!(!s.transition(1, TaskState::Running, TaskState::Done));
        assert_eq!(s.state_of(1), Some(TaskState::Pending));
        // Final states are final.
        assert!(s.transition(2, TaskState::Pending, TaskState::Failed));
        assert!(!s.transition(2, TaskState::Failed, TaskState::Pending));
        assert_eq!(s.state_of(2), Some(TaskState::Failed));
        // Unknown ids.
        assert!(!s.transition(50, TaskState::Pending, TaskState::Running));
        assert_eq!(s.state_of(50), None);
        // Ids cannot be registered twice.
        assert!(s.add_pending(2..5).is_err());
        assert_eq!(s.count(TaskState::Pending), 2);
    }

    #[test]
    fn a_range_moves_only_what_is_in_the_source_state() {
        let mut s = TaskStates::new();
        s.add_pending(0..10).unwrap();
        assert!(s.transition(3, TaskState::Pending, TaskState::Canceled));
        assert_eq!(s.transition_range(0..8, TaskState::Pending, TaskState::Running), 7);
        assert_eq!(s.state_of(3), Some(TaskState::Canceled));
        assert_eq!(s.transition_range(0..10, TaskState::Canceled, TaskState::Pending), 0);
        assert_eq!((s.count(TaskState::Running), s.count(TaskState::Pending)), (7, 2));
        for tid in 0..10 {
            assert!(in_exactly_one(&s, tid), "task {tid}");
        }
    }

    #[test]
    fn contiguous_finished_tasks_compress() {
        let mut s = TaskStates::new();
        s.add_pending(0..200_000).unwrap();
        for tid in 0..200_000 {
            assert!(s.transition(tid, TaskState::Pending, TaskState::Running));
            assert!(s.transition(tid, TaskState::Running, TaskState::Done));
        }
        assert_eq!(s.count(TaskState::Done), 200_000);
        // A plain byte per task would be 200 KB; the bitmaps are a fraction of that.
        assert!(s.serialized_bytes() < 60_000, "{} bytes", s.serialized_bytes());
    }
}

//! Each task's way through the switch thread, kept on request
//! (`SwitchConfig::record_timeline`; the benchmarks' `--task-records`): when its SUBMIT
//! reached this host's stack and when the thread took it in, and when the flush that sent
//! the task on (in an ASSIGN, a bundle or a REFILL) returned. Joined with the client's
//! first send and the executor's arrival stamp (all on one clock on the testbed), it
//! splits a task's delay before its executor into the way to the switch, the thread's
//! wait, its work and the way on.

use scheduler_common::{Entry, JobRef};

use super::tier2::Answer;

/// Records kept of each kind, at most; later ones are counted in `dropped`.
pub const MAX_RECORDS: usize = 1 << 20;

/// A SUBMIT the thread took in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubmitTaken {
    pub uid: u32,
    pub jid: u32,
    /// The kernel's arrival stamp, ns since the Unix epoch; 0 when the SUBMIT was not
    /// the first datagram of its receive (only that one is stamped).
    pub arrived_unix_ns: u64,
    /// When the receive that took it returned.
    pub taken_unix_ns: u64,
    /// When tier 2 had handled it (its answers waiting to be sent).
    pub handled_unix_ns: u64,
    /// Its place in its receive batch, and the batch's size.
    pub batch_index: u16,
    pub batch_len: u16,
}

/// A task sent on from the switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskSent {
    pub uid: u32,
    pub jid: u32,
    pub tid: u32,
    /// When the `sendmmsg` that carried it was called, and when it returned.
    pub flush_called_unix_ns: u64,
    pub sent_unix_ns: u64,
}

/// What the switch recorded over its life.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchTimeline {
    pub submits: Vec<SubmitTaken>,
    pub sent: Vec<TaskSent>,
    /// Records beyond [`MAX_RECORDS`], not kept.
    pub dropped: u64,
}

/// The packet thread's recorder.
#[derive(Default)]
pub(super) struct Timeline {
    kept: SwitchTimeline,
    /// Tasks in the send batch not yet flushed.
    unsent: Vec<(u32, u32, u32)>,
    /// When the flush under way was called.
    flush_called_unix_ns: u64,
}

impl Timeline {
    /// A SUBMIT of `job`, the `index`th of `len` datagrams of a receive that returned at
    /// `taken_unix_ns`, handled by `handled_unix_ns`.
    pub(super) fn submit(
        &mut self,
        job: &JobRef,
        (index, len): (usize, usize),
        arrived_unix_ns: Option<u64>,
        taken_unix_ns: u64,
        handled_unix_ns: u64,
    ) {
        let record = SubmitTaken {
            uid: job.uid(),
            jid: job.jid(),
            arrived_unix_ns: arrived_unix_ns.unwrap_or(0),
            taken_unix_ns,
            handled_unix_ns,
            batch_index: index.min(u16::MAX as usize) as u16,
            batch_len: len.min(u16::MAX as usize) as u16,
        };
        keep(&mut self.kept.submits, &mut self.kept.dropped, record);
    }

    /// `answer` goes into the send batch.
    pub(super) fn queued(&mut self, answer: &Answer) {
        let entries: &[Entry] = match answer {
            Answer::Assign { entry, .. } => std::slice::from_ref(entry),
            Answer::Bundle { entries, .. } | Answer::Refill { entries, .. } => entries,
            _ => &[],
        };
        self.unsent.extend(entries.iter().map(|e| (e.uid(), e.jid(), e.task.tid())));
    }

    /// A flush of the send batch is called at `called_unix_ns`.
    pub(super) fn flushing(&mut self, called_unix_ns: u64) {
        self.flush_called_unix_ns = called_unix_ns;
    }

    /// The send batch went out; the flush returned at `sent_unix_ns`.
    pub(super) fn flushed(&mut self, sent_unix_ns: u64) {
        let flush_called_unix_ns = self.flush_called_unix_ns;
        for (uid, jid, tid) in self.unsent.drain(..) {
            keep(
                &mut self.kept.sent,
                &mut self.kept.dropped,
                TaskSent { uid, jid, tid, flush_called_unix_ns, sent_unix_ns },
            );
        }
    }

    pub(super) fn into_kept(self) -> SwitchTimeline {
        self.kept
    }
}

/// Keeps `record` in `list` while it holds fewer than [`MAX_RECORDS`]; counts it in
/// `dropped` after.
fn keep<T>(list: &mut Vec<T>, dropped: &mut u64, record: T) {
    if list.len() < MAX_RECORDS {
        list.push(record);
    } else {
        *dropped += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::Task;
    use std::net::SocketAddrV4;

    fn entry(uid: u32, jid: u32, tid: u32) -> Entry {
        let mut task = Task::default();
        task.set_tid(tid);
        Entry::new(uid, jid, task, [127, 0, 0, 1], 9)
    }

    #[test]
    fn each_task_is_stamped_with_the_flush_that_carried_it() {
        let mut t = Timeline::default();
        let to = SocketAddrV4::new([127, 0, 0, 1].into(), 9);
        t.submit(&JobRef::new(1, 2), (0, 2), Some(100), 150, 160);
        t.submit(&JobRef::new(1, 3), (1, 2), None, 150, 170);
        t.queued(&Answer::Assign { to, entry: entry(1, 2, 0), best: 0 });
        let refill = [entry(1, 2, 1), entry(1, 3, 0)].into_iter().collect();
        t.queued(&Answer::Refill { to, entries: refill, best: 0 });
        t.flushing(180);
        t.flushed(200);
        t.queued(&Answer::Assign { to, entry: entry(1, 3, 1), best: 0 });
        t.flushing(250);
        t.flushed(300);
        t.flushing(350);
        t.flushed(400);
        let kept = t.into_kept();
        assert_eq!(
            kept.submits,
            [
                SubmitTaken {
                    uid: 1,
                    jid: 2,
                    arrived_unix_ns: 100,
                    taken_unix_ns: 150,
                    handled_unix_ns: 160,
                    batch_index: 0,
                    batch_len: 2
                },
                SubmitTaken {
                    uid: 1,
                    jid: 3,
                    arrived_unix_ns: 0,
                    taken_unix_ns: 150,
                    handled_unix_ns: 170,
                    batch_index: 1,
                    batch_len: 2
                }
            ]
        );
        let sent: Vec<_> = kept.sent.iter().map(|s| (s.jid, s.tid, s.flush_called_unix_ns, s.sent_unix_ns)).collect();
        assert_eq!(sent, [(2, 0, 180, 200), (2, 1, 180, 200), (3, 0, 180, 200), (3, 1, 250, 300)]);
        assert_eq!(kept.dropped, 0);
    }
}

//! Reading the program's ring events (low watermark, empty ring on request), and the
//! tasks it hands over when no queue took them back (`RescuedTask` records).

use std::os::fd::{AsFd, BorrowedFd};

use aya::maps::{MapData, RingBuf};
use scheduler_common::{
    maps::{RescuedTask, RingEvent, EVENT_RESCUED},
    Entry,
};

/// Reader of the event ring buffer. Poll its fd (it is readable when events wait), then
/// call [`EventReader::next`] until it returns None.
pub struct EventReader {
    ring: RingBuf<MapData>,
    /// Records of the wrong size (a mismatched program); never expected.
    pub malformed: u64,
    /// Tasks the program handed over, read and not yet taken with [`EventReader::take_rescued`].
    rescued: Vec<Entry>,
}

impl EventReader {
    pub(crate) fn new(ring: RingBuf<MapData>) -> EventReader {
        EventReader { ring, malformed: 0, rescued: Vec::new() }
    }

    /// The next event, if one is waiting.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<RingEvent> {
        loop {
            let item = self.ring.next()?;
            if item.len() == size_of::<RescuedTask>() {
                // SAFETY: RescuedTask is repr(C) of bytes; the length was checked.
                let r = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const RescuedTask) };
                if r.kind == EVENT_RESCUED {
                    self.rescued.push(r.entry);
                } else {
                    self.malformed += 1;
                }
                continue;
            }
            if item.len() != size_of::<RingEvent>() {
                self.malformed += 1;
                continue;
            }
            // SAFETY: RingEvent is repr(C) of integers; the length was checked; the read
            // is unaligned because ring buffer records are only 8-byte aligned by contract.
            return Some(unsafe { std::ptr::read_unaligned(item.as_ptr() as *const RingEvent) });
        }
    }

    /// The tasks handed over so far (the caller must RETURN them: no queue holds them).
    pub fn take_rescued(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.rescued)
    }

    /// Every event waiting now, at most `max`.
    pub fn drain(&mut self, max: usize) -> Vec<RingEvent> {
        let mut v = Vec::new();
        while v.len() < max {
            match self.next() {
                Some(e) => v.push(e),
                None => break,
            }
        }
        v
    }
}

impl AsFd for EventReader {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.ring.as_fd()
    }
}

//! Reading the program's ring events (low watermark, empty ring on request).

use std::os::fd::{AsFd, BorrowedFd};

use aya::maps::{MapData, RingBuf};
use scheduler_common::maps::RingEvent;

/// Reader of the event ring buffer. Poll its fd (it is readable when events wait), then
/// call [`EventReader::next`] until it returns None.
pub struct EventReader {
    ring: RingBuf<MapData>,
    /// Records of the wrong size (a mismatched program); never expected.
    pub malformed: u64,
}

impl EventReader {
    pub(crate) fn new(ring: RingBuf<MapData>) -> EventReader {
        EventReader { ring, malformed: 0 }
    }

    /// The next event, if one is waiting.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<RingEvent> {
        loop {
            let item = self.ring.next()?;
            if item.len() != size_of::<RingEvent>() {
                self.malformed += 1;
                continue;
            }
            // SAFETY: RingEvent is repr(C) of integers; the length was checked; the read
            // is unaligned because ring buffer records are only 8-byte aligned by contract.
            return Some(unsafe { std::ptr::read_unaligned(item.as_ptr() as *const RingEvent) });
        }
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

//! The ring-state map mapped into this process, so that userspace takes and releases ring
//! slots with the same atomic additions as the XDP program.

use std::{
    os::fd::{AsFd, AsRawFd},
    ptr::NonNull,
    sync::atomic::{AtomicI64, Ordering},
};

use aya::maps::MapData;
use scheduler_common::maps::{RingState, RING_COUNT};

pub struct RingStates {
    base: NonNull<RingState>,
    len: usize,
    // Keeps the map alive as long as the mapping.
    _map: MapData,
}

// SAFETY: the mapping is shared memory accessed only through atomics.
unsafe impl Send for RingStates {}
unsafe impl Sync for RingStates {}

impl RingStates {
    pub fn new(map: MapData) -> anyhow::Result<RingStates> {
        let info = map.info()?;
        anyhow::ensure!(
            info.value_size() as usize == size_of::<RingState>() && info.max_entries() as usize == RING_COUNT,
            "ring state map has value size {} and {} entries, expected {} and {RING_COUNT}",
            info.value_size(),
            info.max_entries(),
            size_of::<RingState>()
        );
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (RING_COUNT * size_of::<RingState>()).div_ceil(page) * page;
        // SAFETY: a shared mapping of an mmapable array map fd; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        anyhow::ensure!(
            p != libc::MAP_FAILED,
            "mmap of the ring state map failed: {}",
            std::io::Error::last_os_error()
        );
        let base = NonNull::new(p as *mut RingState).ok_or_else(|| anyhow::anyhow!("mmap returned null"))?;
        Ok(RingStates { base, len, _map: map })
    }

    /// The reservation counter of ring `prio` (1-based, checked by the caller).
    pub fn reserved(&self, prio: u8) -> &AtomicI64 {
        assert!((1..=RING_COUNT as u8).contains(&prio), "priority {prio} has no ring");
        // SAFETY: within the mapping; i64 at offset 0 of a 16-byte, 8-aligned element;
        // the kernel side only uses atomic instructions on it too.
        unsafe { AtomicI64::from_ptr(&raw mut (*self.base.as_ptr().add(prio as usize - 1)).reserved) }
    }

    pub fn load(&self, prio: u8) -> i64 {
        self.reserved(prio).load(Ordering::Acquire)
    }
}

impl Drop for RingStates {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

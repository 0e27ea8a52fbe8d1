//! The ring-state map mapped into this process, so that userspace takes and releases ring
//! slots with the same atomic additions as the XDP program.

use std::{
    os::fd::{AsFd, AsRawFd},
    ptr::NonNull,
    sync::atomic::{AtomicI64, AtomicU64, Ordering},
};

use aya::maps::MapData;
use scheduler_common::maps::{RingStates as SharedStates, RING_COUNT};

pub struct MappedRingStates {
    base: NonNull<SharedStates>,
    len: usize,
    // Keeps the map alive as long as the mapping.
    _map: MapData,
}

// SAFETY: the mapping is shared memory accessed only through atomics.
unsafe impl Send for MappedRingStates {}
unsafe impl Sync for MappedRingStates {}

impl MappedRingStates {
    pub fn new(map: MapData) -> anyhow::Result<MappedRingStates> {
        let info = map.info()?;
        anyhow::ensure!(
            info.value_size() as usize == size_of::<SharedStates>() && info.max_entries() == 1,
            "ring state map has value size {} and {} entries, expected {} and 1",
            info.value_size(),
            info.max_entries(),
            size_of::<SharedStates>()
        );
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = size_of::<SharedStates>().div_ceil(page) * page;
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
        let base = NonNull::new(p as *mut SharedStates).ok_or_else(|| anyhow::anyhow!("mmap returned null"))?;
        Ok(MappedRingStates { base, len, _map: map })
    }

    /// The reservation counter of ring `prio` (1-based, checked by the caller).
    pub fn reserved(&self, prio: u8) -> &AtomicI64 {
        assert!((1..=RING_COUNT as u8).contains(&prio), "priority {prio} has no ring");
        // SAFETY: within the mapping (one SharedStates at offset 0, page aligned); the i64
        // is 8-aligned and the kernel side only uses atomic instructions on it too.
        unsafe { AtomicI64::from_ptr(&raw mut (*self.base.as_ptr()).rings[prio as usize - 1].reserved) }
    }

    /// Tier 2's last BEST stamp with the time it was read ([`SharedStates::tier2_hint`]),
    /// shared with the program: either side may record one.
    pub fn tier2_hint(&self) -> &AtomicU64 {
        // SAFETY: within the mapping, 8-aligned; the program reads and writes it as one
        // 64-bit word too.
        unsafe { AtomicU64::from_ptr(&raw mut (*self.base.as_ptr()).tier2_hint) }
    }

    /// The agent's "answer awaited" flag ([`SharedStates::refill_armed`]): set here, cleared
    /// by the program.
    pub fn refill_armed(&self) -> &AtomicU64 {
        // SAFETY: within the mapping, 8-aligned; the program reads and writes it as one
        // 64-bit word.
        unsafe { AtomicU64::from_ptr(&raw mut (*self.base.as_ptr()).refill_armed) }
    }

    pub fn load(&self, prio: u8) -> i64 {
        self.reserved(prio).load(Ordering::Acquire)
    }
}

impl Drop for MappedRingStates {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

//! Pop and push on the lock-free ring (`scheduler_common::lockfree`): compare-and-swap on
//! head or tail, a sequence number per slot, no lock.

use core::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

use scheduler_common::{
    lockfree::{LockFreeRing, LockFreeSlot, LOCKFREE_CAPACITY},
    Entry,
};

const MASK: u64 = LOCKFREE_CAPACITY as u64 - 1;
const CAPACITY: u64 = LOCKFREE_CAPACITY as u64;
/// Compare-and-swap attempts before a pop or push gives up: each failed attempt means
/// another CPU moved the position on, so the bound is on contention, not on waiting.
const ATTEMPTS: usize = 8;
/// An entry in 8-byte words.
pub const WORDS: usize = Entry::LEN / 8;

/// If `*p == expected`, stores `new`; returns what `*p` held (BPF_CMPXCHG, a full barrier).
#[inline(always)]
fn compare_exchange(p: *mut u64, expected: u64, new: u64) -> u64 {
    let mut r0 = expected;
    // SAFETY: `p` points into the ring's map value, 8-byte aligned.
    unsafe {
        core::arch::asm!(
            "r0 = cmpxchg_64({p} + 0, r0, {new})",
            p = in(reg) p,
            new = in(reg) new,
            inout("r0") r0,
            options(nostack),
        );
    }
    r0
}

/// Stores `v` into `*p` (BPF_XCHG, a full barrier): publishes a slot after its entry.
#[inline(always)]
fn publish(p: *mut u64, v: u64) {
    // SAFETY: as in `compare_exchange`.
    unsafe {
        core::arch::asm!(
            "{v} = xchg_64({p} + 0, {v})",
            p = in(reg) p,
            v = inout(reg) v => _,
            options(nostack),
        );
    }
}

/// The slot of position `pos`.
#[inline(always)]
fn slot(ring: *mut LockFreeRing, pos: u64) -> *mut LockFreeSlot {
    // SAFETY: the index is masked below the capacity, so the slot lies inside the value.
    unsafe { addr_of_mut!((*ring).slots).cast::<LockFreeSlot>().add((pos & MASK) as usize) }
}

/// Takes the oldest entry into `out`; false if the ring is empty (or contention outlasted
/// the attempts).
#[inline(always)]
pub fn pop(ring: *mut LockFreeRing, out: &mut [u64; WORDS]) -> bool {
    // SAFETY: `ring` is the map value the caller looked up.
    let mut pos = unsafe { read_volatile(addr_of!((*ring).head)) };
    for _ in 0..ATTEMPTS {
        let s = slot(ring, pos);
        // SAFETY: `s` lies inside the value (see `slot`).
        let seq = unsafe { read_volatile(addr_of!((*s).seq)) };
        let full = pos.wrapping_add(1);
        if seq == full {
            let seen = compare_exchange(unsafe { addr_of_mut!((*ring).head) }, pos, full);
            if seen == pos {
                let words = unsafe { addr_of!((*s).entry).cast::<u64>() };
                for (i, w) in out.iter_mut().enumerate() {
                    // SAFETY: the entry is 40 bytes at offset 8 of the slot, 8-aligned.
                    *w = unsafe { read_volatile(words.add(i)) };
                }
                publish(unsafe { addr_of_mut!((*s).seq) }, pos.wrapping_add(CAPACITY));
                return true;
            }
            pos = seen;
        } else if (seq.wrapping_sub(full) as i64) < 0 {
            // The slot has not been filled for this lap: empty.
            return false;
        } else {
            // Another consumer took this position: start from the current head.
            pos = unsafe { read_volatile(addr_of!((*ring).head)) };
        }
    }
    false
}

/// Appends `entry`; false if the ring is full (or contention outlasted the attempts).
#[inline(always)]
pub fn push(ring: *mut LockFreeRing, entry: &[u64; WORDS]) -> bool {
    // SAFETY: `ring` is the map value the caller looked up.
    let mut pos = unsafe { read_volatile(addr_of!((*ring).tail)) };
    for _ in 0..ATTEMPTS {
        let s = slot(ring, pos);
        // SAFETY: `s` lies inside the value (see `slot`).
        let seq = unsafe { read_volatile(addr_of!((*s).seq)) };
        if seq == pos {
            let seen = compare_exchange(unsafe { addr_of_mut!((*ring).tail) }, pos, pos.wrapping_add(1));
            if seen == pos {
                let words = unsafe { addr_of_mut!((*s).entry).cast::<u64>() };
                for (i, w) in entry.iter().enumerate() {
                    // SAFETY: as in `pop`.
                    unsafe { write_volatile(words.add(i), *w) };
                }
                publish(unsafe { addr_of_mut!((*s).seq) }, pos.wrapping_add(1));
                return true;
            }
            pos = seen;
        } else if (seq.wrapping_sub(pos) as i64) < 0 {
            // The slot's entry of the previous lap is not consumed yet: full.
            return false;
        } else {
            pos = unsafe { read_volatile(addr_of!((*ring).tail)) };
        }
    }
    false
}

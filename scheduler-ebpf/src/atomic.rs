//! Atomic adds on map values. The BPF target has no `AtomicI64::fetch_add`, so these use
//! the BPF atomic instructions directly; userspace uses ordinary atomics on the same
//! memory (the ring-state map is mmapped).

/// Adds `delta` to `*p` atomically and returns the previous value.
#[inline(always)]
pub fn fetch_add(p: *mut i64, delta: i64) -> i64 {
    let mut v = delta;
    // SAFETY: `p` points into a map value (checked non-null by the caller's lookup) and
    // is 8-byte aligned (array values are).
    unsafe {
        core::arch::asm!(
            "{v} = atomic_fetch_add((u64 *)({p} + 0), {v})",
            p = in(reg) p,
            v = inout(reg) v,
            options(nostack),
        );
    }
    v
}

/// Adds `delta` to `*p` atomically.
#[inline(always)]
pub fn add(p: *mut i64, delta: i64) {
    // SAFETY: as in `fetch_add`.
    unsafe {
        core::arch::asm!(
            "lock *(u64 *)({p} + 0) += {v}",
            p = in(reg) p,
            v = in(reg) delta,
            options(nostack),
        );
    }
}

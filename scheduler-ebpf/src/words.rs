//! Word-sized loads and stores at any byte offset. The wire types have alignment 1, so
//! plain Rust copies of them compile to one BPF instruction per byte; these emit one
//! 8-, 4- or 2-byte access instead. The x86-64 JIT and the verifier (without strict
//! alignment) accept unaligned packet accesses; stack buffers passed here are aligned.
//!
//! Values are in memory order: a u32 loaded from bytes [a, b, c, d] is the little-endian
//! number of those bytes, and storing it writes the same bytes back.

use core::arch::asm;

#[inline(always)]
pub unsafe fn load_u64(p: *const u8) -> u64 {
    let v: u64;
    unsafe { asm!("{v} = *(u64 *)({p} + 0)", p = in(reg) p, v = out(reg) v, options(nostack, readonly)) };
    v
}

#[inline(always)]
pub unsafe fn store_u64(p: *mut u8, v: u64) {
    unsafe { asm!("*(u64 *)({p} + 0) = {v}", p = in(reg) p, v = in(reg) v, options(nostack)) };
}

#[inline(always)]
pub unsafe fn load_u32(p: *const u8) -> u32 {
    let v: u64;
    unsafe { asm!("{v} = *(u32 *)({p} + 0)", p = in(reg) p, v = out(reg) v, options(nostack, readonly)) };
    v as u32
}

#[inline(always)]
pub unsafe fn store_u32(p: *mut u8, v: u32) {
    unsafe { asm!("*(u32 *)({p} + 0) = {v}", p = in(reg) p, v = in(reg) v as u64, options(nostack)) };
}

#[inline(always)]
pub unsafe fn load_u16(p: *const u8) -> u16 {
    let v: u64;
    unsafe { asm!("{v} = *(u16 *)({p} + 0)", p = in(reg) p, v = out(reg) v, options(nostack, readonly)) };
    v as u16
}

#[inline(always)]
pub unsafe fn store_u16(p: *mut u8, v: u16) {
    unsafe { asm!("*(u16 *)({p} + 0) = {v}", p = in(reg) p, v = in(reg) v as u64, options(nostack)) };
}

/// Copies `WORDS` 8-byte words.
#[inline(always)]
pub unsafe fn copy_words<const WORDS: usize>(dst: *mut u8, src: *const u8) {
    for i in 0..WORDS {
        unsafe { store_u64(dst.add(i * 8), load_u64(src.add(i * 8))) };
    }
}

/// The IPv4 header checksum of the 20 bytes at `ip`, whose checksum field reads zero,
/// in memory order (store it with `store_u16`). The one's-complement sum does not depend
/// on byte order, so it is summed over little-endian words and stored the same way.
#[inline(always)]
pub unsafe fn ipv4_checksum(ip: *const u8) -> u16 {
    let mut sum = 0u64;
    for i in 0..5 {
        sum += unsafe { load_u32(ip.add(i * 4)) } as u64;
    }
    sum = (sum & 0xFFFF_FFFF) + (sum >> 32);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    !(sum as u16)
}

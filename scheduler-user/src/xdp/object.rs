//! The XDP object, built by build.rs from scheduler-ebpf.

/// The ELF object of the Bolt XDP program (program `bolt_xdp`).
pub static XDP_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bolt-xdp.o"));

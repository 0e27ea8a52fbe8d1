//! The XDP object, built by build.rs from scheduler-ebpf.

/// The ELF object of the Bolt XDP program (program `bolt_xdp`).
pub static XDP_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bolt-xdp.o"));

/// The ring measurement's programs (`bolt bench xdp --rings`, `xdp::ring_bench`).
pub static RING_BENCH_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bolt-ring-bench.o"));

#[cfg(test)]
mod tests {
    use scheduler_common::maps::{PROGRAM_NAME, STATE_MAPS};

    use super::XDP_OBJECT;

    fn names_symbol(object: &[u8], name: &str) -> bool {
        // Symbol names sit NUL-terminated in the ELF string table.
        let needle: Vec<u8> = name.bytes().chain([0]).collect();
        object.windows(needle.len()).any(|w| w == needle.as_slice())
    }

    #[test]
    fn the_object_defines_every_shared_name() {
        assert_eq!(&XDP_OBJECT[..4], b"\x7fELF");
        for name in STATE_MAPS.iter().chain([&PROGRAM_NAME]) {
            assert!(names_symbol(XDP_OBJECT, name), "the XDP object has no symbol {name}");
        }
        assert!(!names_symbol(XDP_OBJECT, "BOLT_NO_SUCH_MAP"));
    }

    #[test]
    fn the_ring_bench_object_defines_its_maps_and_programs() {
        use scheduler_common::lockfree::{
            BENCH_OVERFLOW_MAP, BENCH_QUEUE_MAP, LOCKFREE_MAP, RING_BENCH_EMPTY, RING_BENCH_LOCKFREE, RING_BENCH_QUEUE,
            RING_BENCH_QUEUE_RESERVED,
        };
        assert_eq!(&super::RING_BENCH_OBJECT[..4], b"\x7fELF");
        for name in [
            BENCH_QUEUE_MAP,
            BENCH_OVERFLOW_MAP,
            LOCKFREE_MAP,
            RING_BENCH_EMPTY,
            RING_BENCH_QUEUE,
            RING_BENCH_LOCKFREE,
            RING_BENCH_QUEUE_RESERVED,
        ] {
            assert!(names_symbol(super::RING_BENCH_OBJECT, name), "the ring-bench object has no symbol {name}");
        }
    }
}

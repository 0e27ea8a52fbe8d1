//! Arbitrary text as an IPv4 prefix (`--allow-clients`, `--nodes`, `--executors`).
//! Ipv4Prefix::parse must not panic; an accepted prefix has no host bits, contains its
//! own network address, and prints as text that parses back to the same prefix.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler_common::prefix::{mask, Ipv4Prefix};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(p) = Ipv4Prefix::parse(text) {
        assert!(p.prefix_len() <= 32);
        assert_eq!(u32::from_be_bytes(p.network()) & !mask(p.prefix_len()), 0, "{p} has host bits");
        assert!(p.contains(p.network()));
        assert_eq!(Ipv4Prefix::parse(&p.to_string()), Ok(p), "{text:?} prints as {p}");
    }
});

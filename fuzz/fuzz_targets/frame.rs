//! Arbitrary bytes as an Ethernet frame. parse_udp must not panic; what it accepts must
//! be self-consistent, and the reply to it must parse with the ends swapped. The
//! payload then goes to the message decoder, as the XDP program hands it on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler_common::frame::{self, FrameError};
use scheduler_common::*;

fuzz_target!(|data: &[u8]| {
    match frame::parse_udp(data) {
        Ok(f) => {
            let total = f.ip.total_len() as usize;
            assert_eq!(f.payload.len() + frame::IPV4_HLEN + frame::UDP_HLEN, total);
            assert_eq!(f.udp.length() as usize, total - frame::IPV4_HLEN);
            assert_eq!(frame::ipv4_checksum(f.ip), f.ip.checksum());
            let mut out = vec![0u8; frame::HEADERS_LEN + f.payload.len()];
            let n = frame::build_reply(&mut out, &f, f.payload).expect("reply fits");
            let r = frame::parse_udp(&out[..n]).expect("a reply parses");
            assert_eq!((r.src(), r.dst(), r.payload), (f.dst(), f.src(), f.payload));
            let _ = decode(f.payload);
        }
        Err(e) => assert_eq!(FrameError::NAMES[e.index()], e.name()),
    }
});

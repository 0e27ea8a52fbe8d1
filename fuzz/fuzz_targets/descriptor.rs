//! Arbitrary bytes as a 16-byte task descriptor. Handler::decode must not panic, and a
//! descriptor it accepts must encode back to exactly the same 16 bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler_common::descriptor::{valid_exec_name, DescriptorError, Handler};

fuzz_target!(|data: &[u8]| {
    let Some(d) = data.first_chunk::<16>() else { return };
    match Handler::decode(d) {
        Ok(h) => {
            if let Handler::Exec { name } = h {
                assert!(valid_exec_name(name));
            }
            assert_eq!(h.encode(), Ok(*d), "{h:?} re-encodes differently");
        }
        Err(e) => assert_eq!(DescriptorError::NAMES[e.index()], e.name()),
    }
});

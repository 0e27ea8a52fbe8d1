//! Arbitrary bytes as a data frame (TCP: object store and spec server). decode_frame must
//! not panic; it agrees with decode_frame_header on the header; a frame it accepts
//! encodes back to exactly the input, with encoded_len its length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler_common::data::{decode_frame, decode_frame_header, DataError, FRAME_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    match decode_frame(data) {
        Ok(f) => {
            let (kind, len) = decode_frame_header(data).expect("an accepted frame has a valid header");
            assert_eq!((kind, len + FRAME_HEADER_LEN), (f.kind(), data.len()));
            assert_eq!(f.encoded_len(), data.len(), "{f:?}");
            let mut buf = vec![0u8; data.len()];
            assert_eq!(f.encode(&mut buf), Ok(data.len()), "{f:?} does not encode");
            assert_eq!(&buf[..], data, "{f:?} re-encodes differently");
        }
        Err(e) => {
            assert_eq!(DataError::NAMES[e.index()], e.name());
            if let Err(h) = decode_frame_header(data) {
                assert_eq!(h, e, "header error differs");
            }
        }
    }
});

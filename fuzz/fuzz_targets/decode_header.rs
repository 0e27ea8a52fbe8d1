//! Arbitrary bytes as a header. decode_header must not panic, must accept only what it
//! documents, and must give the same verdict as the first step of decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler_common::*;

fuzz_target!(|data: &[u8]| {
    match decode_header(data) {
        Ok((h, op)) => {
            assert_eq!((h.magic_u16(), h.version, h.op), (MAGIC, VERSION, op as u8));
            assert!(!op.is_internal());
            let allowed = match op {
                Op::Submit => SUBMIT_FLAGS,
                Op::Pin => PIN_FLAGS,
                Op::GetTask | Op::GetBundle => GET_TASK_FLAGS,
                _ => 0,
            };
            assert_eq!(h.flags & !allowed, 0);
            // Whatever decode then refuses, it is for a reason past the header. (Not
            // UnknownFlags: a TASK's flags can be refused with that kind too.)
            if let Err(e) = decode(data) {
                let header_kind = matches!(
                    e,
                    DecodeError::BadMagic
                        | DecodeError::BadVersion(_)
                        | DecodeError::UnknownOp(_)
                        | DecodeError::InternalOp(_)
                );
                assert!(!header_kind, "header accepted but decode says {e:?}");
            }
        }
        Err(e) => assert_eq!(decode(data), Err(e), "decode_header and decode disagree on the header"),
    }
});

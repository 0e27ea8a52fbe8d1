//! Arbitrary bytes as a whole Bolt message. Neither decoder may panic; both must agree
//! (a port refuses SWAP and REPAIR before looking further); and whatever decodes must
//! encode back to exactly the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler_common::*;

fuzz_target!(|data: &[u8]| {
    let external = decode(data);
    let internal = decode_packet(data);
    match (&external, &internal) {
        (Ok(m), Ok(p)) => assert_eq!(&Packet::External(*m), p),
        (Err(DecodeError::InternalOp(op)), _) => {
            assert!(Op::from_u8(*op).is_some_and(Op::is_internal));
            assert!(matches!(internal, Err(_) | Ok(Packet::Swap { .. } | Packet::Repair { .. })));
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "decode and decode_packet disagree"),
        (a, b) => panic!("decode gave {a:?} but decode_packet gave {b:?}"),
    }
    if let Ok(p) = internal {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = p.encode(&mut buf).expect("a decoded packet encodes");
        assert_eq!(&buf[..n], data, "decoded {p:?} re-encodes differently");
    }
    if let Err(e) = external {
        assert_eq!(DecodeError::NAMES[e.index()], e.name());
    }
});

//! Property tests of the codecs: valid messages round-trip, arbitrary bytes never make a
//! decoder panic, a decoded message has exactly one encoding (so a corrupted message
//! either fails or is another valid message byte for byte), and the list-count and
//! length edges of every op.

use proptest::prelude::*;
use scheduler_common::descriptor::{Handler, MAX_EXEC_NAME};
use scheduler_common::frame::{self, Endpoint};
use scheduler_common::*;

mod support;
use support::{packet_op, Owned};

// ---------------------------------------------------------------------------------------
// Strategies

fn exec_name() -> impl Strategy<Value = Vec<u8>> {
    proptest::string::string_regex(&format!("[A-Za-z0-9_.-]{{1,{MAX_EXEC_NAME}}}"))
        .expect("valid regex")
        .prop_map(String::into_bytes)
}

/// Descriptors the executors accept.
fn valid_desc() -> impl Strategy<Value = [u8; 16]> {
    prop_oneof![
        Just(Handler::Noop.encode().expect("noop encodes")),
        any::<u32>().prop_map(|micros| Handler::Sleep { micros }.encode().expect("sleep encodes")),
        any::<u32>().prop_map(|micros| Handler::Spin { micros }.encode().expect("spin encodes")),
        exec_name().prop_map(|n| Handler::Exec { name: &n }.encode().expect("exec encodes")),
    ]
}

fn task() -> impl Strategy<Value = Task> {
    // The message decoder does not look inside descriptors (executors do), so arbitrary
    // descriptor bytes are as valid on the wire as registered ones.
    let desc = prop_oneof![valid_desc(), any::<[u8; 16]>()];
    (any::<u32>(), 1..=MAX_PRIORITIES, any::<u8>(), any::<u8>(), 0..=KNOWN_TASK_FLAGS, desc).prop_map(
        |(tid, prio, rsrc, class, flags, desc)| {
            let mut t = Task { prio, rsrc, class, flags, desc, ..Task::default() };
            t.set_tid(tid);
            t
        },
    )
}

fn entry() -> impl Strategy<Value = Entry> {
    (any::<u32>(), any::<u32>(), task(), any::<[u8; 4]>(), any::<u16>())
        .prop_map(|(uid, jid, t, ip, port)| Entry::new(uid, jid, t, ip, port))
}

fn requester() -> impl Strategy<Value = Requester> {
    (any::<u16>(), any::<u16>(), any::<u32>()).prop_map(|(n, e, s)| Requester::new(n, e, s))
}

fn job() -> impl Strategy<Value = JobRef> {
    (any::<u32>(), any::<u32>()).prop_map(|(u, j)| JobRef::new(u, j))
}

fn completion() -> impl Strategy<Value = Completion> {
    (any::<[u32; 3]>(), 0..=STATUS_REFUSED, any::<u16>(), any::<u16>(), any::<u32>(), any::<[u64; 2]>()).prop_map(
        |([uid, jid, tid], status, node, executor, run_ns, [start, output_len])| {
            let mut c = Completion { status, ..Completion::default() };
            c.set_uid(uid);
            c.set_jid(jid);
            c.set_tid(tid);
            c.set_node(node);
            c.set_executor(executor);
            c.set_run_ns(run_ns);
            c.set_start_unix_ns(start);
            c.set_output_len(output_len);
            c
        },
    )
}

/// Any valid message or internal packet.
fn owned() -> impl Strategy<Value = Owned> {
    let prio = 1..=MAX_PRIORITIES;
    prop_oneof![
        (job(), 0..=SUBMIT_FLAGS, prop::collection::vec(task(), 1..=MAX_LIST))
            .prop_map(|(job, flags, tasks)| Owned::Submit { job, flags, tasks }),
        (prio.clone(), any::<u8>(), requester(), any::<bool>())
            .prop_map(|(rtrv_prio, exec_rsrc, from, wait)| { Owned::GetTask { rtrv_prio, exec_rsrc, from, wait } }),
        (prop::collection::vec(entry(), 1..=MAX_LIST), 0..=MAX_PRIORITIES)
            .prop_map(|(entries, best)| Owned::Assign { entries, best }),
        (prio.clone(), any::<u8>(), requester(), MIN_BUNDLE..=MAX_BUNDLE, any::<bool>()).prop_map(
            |(rtrv_prio, exec_rsrc, from, want, wait)| Owned::GetBundle { rtrv_prio, exec_rsrc, from, want, wait }
        ),
        (requester(), 0..=MAX_PRIORITIES).prop_map(|(to, best)| Owned::Noop { to, best }),
        (0..=MAX_PRIORITIES).prop_map(|best| Owned::Hint { best }),
        completion().prop_map(Owned::Complete),
        (job(), prop::collection::vec(task(), 1..=MAX_LIST)).prop_map(|(job, tasks)| Owned::QueueFull { job, tasks }),
        (job(), any::<u8>().prop_map(|f| f & PIN_FLAGS), prop::collection::vec(task(), 1..=MAX_LIST))
            .prop_map(|(job, flags, tasks)| Owned::Pin { job, flags, tasks }),
        (any::<u8>(), any::<u16>(), 1..=u8::MAX).prop_map(|(node_rsrc, node, want)| Owned::RefillReq {
            node_rsrc,
            req: RefillRequest::new(node, want).with_waiting(want / 2),
        }),
        (prop::collection::vec(entry(), 0..=MAX_LIST), 0..=MAX_PRIORITIES)
            .prop_map(|(entries, best)| Owned::Refill { entries, best }),
        prop::collection::vec(entry(), 1..=MAX_LIST).prop_map(Owned::Return),
        (prio.clone(), any::<u8>(), any::<u32>(), any::<u32>(), entry()).prop_map(
            |(queue_prio, exec_rsrc, idx, ptr, held)| {
                let mut state = SwapState { held, ..SwapState::default() };
                state.set_swap_idx(idx);
                state.set_pkt_retrieve_ptr(ptr);
                Owned::Swap { queue_prio, exec_rsrc, state }
            }
        ),
        (prio, REPAIR_ADD_PTR..=REPAIR_RETRIEVE_PTR, any::<u32>()).prop_map(|(queue_prio, target, value)| {
            let mut state = RepairState { target, ..RepairState::default() };
            state.set_value(value);
            Owned::Repair { queue_prio, state }
        }),
    ]
}

/// Bytes shaped like a Bolt message: right magic and version, mostly a defined op with a
/// count it allows, header bytes mostly as the op wants them, and a body of about the
/// length the op and count call for, made mostly of small values (where the valid
/// priorities, flags and statuses are). Random input this close to valid gets past the
/// header checks and exercises every body check.
fn message_shaped() -> impl Strategy<Value = Vec<u8>> {
    let op = prop_oneof![10 => 1u8..=Op::GetBundle as u8, 1 => any::<u8>()];
    op.prop_flat_map(|op| {
        let (min, max) = Op::from_u8(op).map_or((0, 0), count_range);
        let count = prop_oneof![4 => min..=max, 1 => 0u8..=18];
        let prio = prop_oneof![2 => Just(0u8), 2 => 1..=MAX_PRIORITIES, 1 => any::<u8>()];
        let rsrc = prop_oneof![2 => Just(0u8), 1 => any::<u8>()];
        let flags = prop_oneof![4 => Just(0u8), 1 => 0..=KNOWN_HEADER_FLAGS, 1 => any::<u8>()];
        let slack = prop_oneof![4 => Just(0i32), 1 => -2i32..=2];
        (Just(op), count, prio, rsrc, flags, slack)
    })
    .prop_flat_map(|(op, count, prio, rsrc, flags, slack)| {
        let body = Op::from_u8(op).map_or(8, |o| message_len(o, count as usize) - Header::LEN);
        let len = (body as i32 + slack).max(0) as usize;
        let byte = prop_oneof![6 => Just(0u8), 3 => Just(1u8), 1 => 2u8..=9, 1 => any::<u8>()];
        prop::collection::vec(byte, len).prop_map(move |body| {
            let mut b = vec![0xb0, 0x17, VERSION, op, count, prio, rsrc, flags];
            b.extend(body);
            b
        })
    })
}

// ---------------------------------------------------------------------------------------
// Checks every decoder result must pass

/// A decoded packet must encode back to exactly the bytes it came from: one encoding
/// per message, nothing in the input ignored.
fn assert_canonical(bytes: &[u8]) -> Result<(), TestCaseError> {
    let external = decode(bytes);
    let internal = decode_packet(bytes);
    match (&external, &internal) {
        (Ok(m), Ok(p)) => prop_assert_eq!(&Packet::External(*m), p),
        // A port refuses SWAP and REPAIR before looking further; the pipeline checks them.
        (Err(DecodeError::InternalOp(op)), _) => {
            prop_assert!(Op::from_u8(*op).is_some_and(Op::is_internal));
            let internal_or_refused = matches!(internal, Err(_) | Ok(Packet::Swap { .. } | Packet::Repair { .. }));
            prop_assert!(internal_or_refused, "pipeline decoded an internal op as {:?}", internal);
        }
        (Err(a), Err(b)) => prop_assert_eq!(a, b, "decode and decode_packet disagree"),
        (a, b) => prop_assert!(false, "decode gave {:?} but decode_packet gave {:?}", a, b),
    }
    if let Ok(p) = internal {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = p.encode(&mut buf).map_err(|e| TestCaseError::fail(format!("decoded {p:?} does not encode: {e}")))?;
        prop_assert_eq!(&buf[..n], bytes, "decoded {:?} re-encodes differently", p);
        prop_assert!(decode_header(bytes).is_ok() || packet_op(&p).is_internal());
    }
    if let Err(e) = external {
        prop_assert!(e.index() < DecodeError::KINDS && DecodeError::NAMES[e.index()] == e.name());
    }
    Ok(())
}

fn encode_owned(o: &Owned) -> Vec<u8> {
    o.encode()
}

fn count_of(o: &Owned) -> usize {
    match o {
        Owned::Submit { tasks, .. } | Owned::QueueFull { tasks, .. } | Owned::Pin { tasks, .. } => tasks.len(),
        Owned::Assign { entries: es, .. } | Owned::Refill { entries: es, .. } | Owned::Return(es) => es.len(),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn valid_messages_round_trip(o in owned()) {
        let bytes = encode_owned(&o);
        let p = o.packet();
        let op = packet_op(&p);
        prop_assert_eq!(bytes.len(), message_len(op, count_of(&o)));
        prop_assert_eq!(bytes[4] as usize, count_of(&o));
        prop_assert_eq!(decode_packet(&bytes), Ok(p));
        match p {
            Packet::External(m) => prop_assert_eq!(decode(&bytes), Ok(m)),
            _ => prop_assert_eq!(decode(&bytes), Err(DecodeError::InternalOp(op as u8))),
        }
        assert_canonical(&bytes)?;
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..=MAX_MESSAGE_LEN + 8)) {
        assert_canonical(&bytes)?;
        let _ = frame::parse_udp(&bytes);
    }

    #[test]
    fn decoders_never_panic_on_message_shaped_bytes(bytes in message_shaped()) {
        assert_canonical(&bytes)?;
    }

    #[test]
    fn a_corrupted_byte_gives_an_error_or_another_exact_message(o in owned(), at in any::<prop::sample::Index>(), v in any::<u8>()) {
        let mut bytes = encode_owned(&o);
        let i = at.index(bytes.len());
        prop_assume!(bytes[i] != v);
        bytes[i] = v;
        assert_canonical(&bytes)?;
        // Where the corruption is in the header's identity, the kind is known.
        match i {
            0 | 1 => prop_assert_eq!(decode_packet(&bytes), Err(DecodeError::BadMagic)),
            2 => prop_assert_eq!(decode_packet(&bytes), Err(DecodeError::BadVersion(v))),
            _ => {}
        }
        // A count that changed can never match the length any more.
        if i == 4 {
            prop_assert!(decode_packet(&bytes).is_err());
        }
    }

    #[test]
    fn every_cut_and_every_extension_is_refused(o in owned(), tail in prop::collection::vec(any::<u8>(), 1..48)) {
        let bytes = encode_owned(&o);
        for cut in 0..bytes.len() {
            let e = decode_packet(&bytes[..cut]).expect_err("a strict prefix decoded");
            prop_assert!(matches!(e, DecodeError::Truncated | DecodeError::BadLength { .. }), "prefix {}: {:?}", cut, e);
        }
        let mut longer = bytes.clone();
        longer.extend(&tail);
        let e = decode_packet(&longer).expect_err("an extension decoded");
        prop_assert_eq!(e, DecodeError::BadLength { expected: bytes.len() as u16, actual: longer.len() as u16 });
    }

    #[test]
    fn descriptors_round_trip(d in valid_desc()) {
        let h = Handler::decode(&d).expect("valid descriptor decodes");
        prop_assert_eq!(h.encode(), Ok(d));
    }

    #[test]
    fn descriptor_decode_is_canonical(d in any::<[u8; 16]>()) {
        match Handler::decode(&d) {
            Ok(h) => prop_assert_eq!(h.encode(), Ok(d)),
            Err(e) => prop_assert!(e.index() < descriptor::DescriptorError::KINDS),
        }
    }

    #[test]
    fn frames_round_trip_and_replies_swap_ends(
        a in (any::<[u8; 6]>(), any::<[u8; 4]>(), any::<u16>()),
        b in (any::<[u8; 6]>(), any::<[u8; 4]>(), any::<u16>()),
        id in any::<u16>(),
        payload in prop::collection::vec(any::<u8>(), 0..=MAX_MESSAGE_LEN),
        answer in prop::collection::vec(any::<u8>(), 0..=MAX_MESSAGE_LEN),
    ) {
        let (src, dst) = (Endpoint { mac: a.0, ip: a.1, port: a.2 }, Endpoint { mac: b.0, ip: b.1, port: b.2 });
        let mut buf = vec![0u8; frame::HEADERS_LEN + MAX_MESSAGE_LEN];
        let n = frame::build_udp(&mut buf, src, dst, id, &payload).expect("fits");
        let f = frame::parse_udp(&buf[..n]).expect("built frame parses");
        prop_assert_eq!((f.src(), f.dst(), f.ip.id(), f.payload), (src, dst, id, &payload[..]));
        let mut out = vec![0u8; frame::HEADERS_LEN + MAX_MESSAGE_LEN];
        let m = frame::build_reply(&mut out, &f, &answer).expect("fits");
        let r = frame::parse_udp(&out[..m]).expect("reply parses");
        prop_assert_eq!((r.src(), r.dst(), r.ip.id(), r.ip.ttl, r.payload), (dst, src, id, f.ip.ttl, &answer[..]));
        prop_assert_eq!(r.udp.checksum(), 0);
    }

    #[test]
    fn a_corrupted_ipv4_header_byte_is_refused(payload in prop::collection::vec(any::<u8>(), 0..64), at in 0usize..frame::IPV4_HLEN, v in any::<u8>()) {
        let ends = Endpoint { mac: [2, 0, 0, 0, 0, 1], ip: [192, 0, 2, 1], port: DEFAULT_PORT };
        let mut buf = vec![0u8; frame::HEADERS_LEN + 64];
        let n = frame::build_udp(&mut buf, ends, ends, 9, &payload).expect("fits");
        let i = frame::ETH_HLEN + at;
        prop_assume!(buf[i] != v);
        buf[i] = v;
        prop_assert!(frame::parse_udp(&buf[..n]).is_err());
    }
}

/// For every op and every count byte, a message carrying exactly that many well-formed
/// items decodes only when the op allows the count; one item more or less than the
/// count is a length error.
#[test]
fn count_edges_of_every_op() {
    let mut t = Task { prio: 1, ..Task::default() };
    t.set_tid(5);
    let e = Entry::new(1, 2, t, [192, 0, 2, 3], 4000);
    let item = |op: Op| -> Vec<u8> {
        match op {
            Op::Submit | Op::QueueFull | Op::Pin => layout::as_bytes(&t).to_vec(),
            Op::Assign | Op::Refill | Op::Return | Op::StealGrant => layout::as_bytes(&e).to_vec(),
            _ => vec![0xaa; 40],
        }
    };
    // A valid fixed body and header (prio, rsrc) for each op.
    let fixed = |op: Op| -> (Vec<u8>, u8, u8) {
        match op {
            Op::Submit | Op::QueueFull | Op::Pin => (layout::as_bytes(&JobRef::new(1, 2)).to_vec(), 0, 0),
            Op::GetTask => (layout::as_bytes(&Requester::new(1, 2, 3)).to_vec(), 1, 0),
            Op::GetBundle => (layout::as_bytes(&BundleRequest::new(Requester::new(1, 2, 3), 4)).to_vec(), 1, 0),
            Op::Noop => (layout::as_bytes(&Requester::new(1, 2, 3)).to_vec(), 0, 0),
            Op::Complete => (vec![0; Completion::LEN], 0, 0),
            Op::RefillReq => (layout::as_bytes(&RefillRequest::new(1, 1)).to_vec(), 0, 0),
            Op::Swap => (layout::as_bytes(&SwapState { held: e, ..SwapState::default() }).to_vec(), 1, 0),
            Op::Repair => (vec![0; RepairState::LEN], 1, 0),
            Op::Assign | Op::Refill | Op::Return => (vec![], 0, 0),
            Op::Claim => (vec![0; Claim::LEN], 0, 0),
            Op::ClaimReply => (layout::as_bytes(&Claim::default().answered(CLAIM_DENIED)).to_vec(), 0, 0),
            Op::Hint => (vec![], 1, 0),
            Op::Recall => (layout::as_bytes(&RefillRequest::new(1, 1)).to_vec(), 1, 0b11),
            Op::StealProbe | Op::StealLoad | Op::StealAck | Op::StealGrant => (vec![0; StealBody::LEN], 0, 0),
            Op::StealReq => (layout::as_bytes(&StealBody::new(1, 2).with_want(3)).to_vec(), 0, 0),
            Op::StealDone => (layout::as_bytes(&StealBody::new(1, 2).with_verdict(STEAL_ABORT)).to_vec(), 0, 0),
        }
    };
    for op in Op::ALL {
        let (min, max) = count_range(op);
        let (body, prio, rsrc) = fixed(op);
        for count in 0..=u8::MAX {
            let build = |items: usize| {
                let mut b = layout::as_bytes(&Header::new(op, count, prio, rsrc, 0)).to_vec();
                b.extend(&body);
                for _ in 0..items {
                    b.extend(item(op));
                }
                b
            };
            let allowed = (min..=max).contains(&count);
            let n = count as usize;
            let exact = decode_packet(&build(n.min(MAX_LIST + 1))).map(|_| ());
            if allowed {
                assert!(exact.is_ok(), "{} count {count}: {exact:?}", op.name());
                assert_eq!(message_len(op, n), build(n).len());
                if max > 0 {
                    let more = decode_packet(&build(n + 1)).map(|_| ());
                    assert!(
                        matches!(more, Err(DecodeError::BadLength { .. })),
                        "{} count {count}+1: {more:?}",
                        op.name()
                    );
                }
                if n > 0 && max > 1 {
                    let fewer = decode_packet(&build(n - 1)).map(|_| ());
                    assert!(
                        matches!(fewer, Err(DecodeError::BadLength { .. })),
                        "{} count {count}-1: {fewer:?}",
                        op.name()
                    );
                }
            } else {
                assert_eq!(exact, Err(DecodeError::BadCount(count)), "{} count {count}", op.name());
            }
        }
        assert!(max as usize <= MAX_LIST, "{} allows more than MAX_LIST", op.name());
    }
    assert_eq!(MAX_MESSAGE_LEN, Header::LEN + StealBody::LEN + MAX_LIST * Entry::LEN);
}

//! Structure-aware round trip: arbitrary field values (valid or not) for every op go to
//! the encoder. The encoder must accept exactly the values the protocol rules allow
//! (restated below from docs/protocol.md, independently of the decoder); what it
//! accepts must decode to the same packet, and travel inside an Ethernet/IPv4/UDP frame
//! and its reply unchanged.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scheduler_common::frame::{self, Endpoint};
use scheduler_common::*;

#[derive(Arbitrary, Debug, Clone, Copy)]
struct TaskIn {
    tid: u32,
    prio: u8,
    rsrc: u8,
    class: u8,
    flags: u8,
    desc: [u8; 16],
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct EntryIn {
    uid: u32,
    jid: u32,
    task: TaskIn,
    client_ip: [u8; 4],
    client_port: u16,
    pad: [u8; 2],
}

#[derive(Arbitrary, Debug)]
enum Input {
    Submit {
        uid: u32,
        jid: u32,
        flags: u8,
        tasks: Vec<TaskIn>,
    },
    GetTask {
        prio: u8,
        rsrc: u8,
        node: u16,
        executor: u16,
        seq: u32,
        wait: bool,
    },
    Assign {
        entries: Vec<EntryIn>,
        best: u8,
    },
    GetBundle {
        prio: u8,
        rsrc: u8,
        node: u16,
        executor: u16,
        seq: u32,
        want: u8,
        wait: bool,
    },
    Noop {
        node: u16,
        executor: u16,
        seq: u32,
        best: u8,
    },
    Hint {
        best: u8,
    },
    Recall {
        rsrc: u8,
        node: u16,
        want: u8,
        pad: u8,
        best: u8,
    },
    Complete {
        ids: [u32; 3],
        status: u8,
        pad: u8,
        node: u16,
        executor: u16,
        pad2: [u8; 2],
        run_ns: u32,
        start: u64,
        output_len: u64,
    },
    QueueFull {
        uid: u32,
        jid: u32,
        tasks: Vec<TaskIn>,
    },
    Pin {
        uid: u32,
        jid: u32,
        flags: u8,
        tasks: Vec<TaskIn>,
    },
    RefillReq {
        rsrc: u8,
        node: u16,
        want: u8,
        pad: u8,
    },
    Refill {
        entries: Vec<EntryIn>,
        best: u8,
    },
    Return(Vec<EntryIn>),
    Swap {
        prio: u8,
        rsrc: u8,
        swap_idx: u32,
        retrieve_ptr: u32,
        held: EntryIn,
    },
    Repair {
        prio: u8,
        target: u8,
        pad: [u8; 3],
        value: u32,
    },
    Claim(ClaimIn),
    ClaimReply(ClaimIn),
    /// A STEAL_* op without entries: index 0..=4 picks PROBE, LOAD, REQ, ACK or DONE.
    Steal {
        which: u8,
        body: StealIn,
    },
    StealGrant {
        body: StealIn,
        entries: Vec<EntryIn>,
    },
    /// A STEAL_REQ naming the thief's resources (any 8 bits).
    StealReq {
        body: StealIn,
        thief_rsrc: u8,
    },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct StealIn {
    node: u16,
    want: u8,
    verdict: u8,
    seq: u32,
    load: u32,
}

const STEAL_OPS: [Op; 5] = [Op::StealProbe, Op::StealLoad, Op::StealReq, Op::StealAck, Op::StealDone];

fn steal(b: &StealIn) -> StealBody {
    StealBody::new(b.node, b.seq).with_want(b.want).with_verdict(b.verdict).with_load(b.load)
}

fn steal_ok(op: Op, b: &StealIn) -> bool {
    let want = if op == Op::StealReq { (1..=16).contains(&b.want) } else { b.want == 0 };
    let verdict = if op == Op::StealDone { (1..=2).contains(&b.verdict) } else { b.verdict == 0 };
    let load = op == Op::StealLoad || b.load == 0;
    want && verdict && load
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct ClaimIn {
    ids: [u32; 3],
    node: u16,
    executor: u16,
    verdict: u8,
    pad: [u8; 3],
}

fn claim(c: &ClaimIn) -> Claim {
    let mut out = Claim { verdict: c.verdict, pad: c.pad, ..Claim::default() };
    out.set_uid(c.ids[0]);
    out.set_jid(c.ids[1]);
    out.set_tid(c.ids[2]);
    out.set_node(c.node);
    out.set_executor(c.executor);
    out
}

#[derive(Arbitrary, Debug)]
struct Case {
    input: Input,
    a: ([u8; 6], [u8; 4], u16),
    b: ([u8; 6], [u8; 4], u16),
    ip_id: u16,
}

fn task(t: &TaskIn) -> Task {
    let mut task = Task { prio: t.prio, rsrc: t.rsrc, class: t.class, flags: t.flags, desc: t.desc, ..Task::default() };
    task.set_tid(t.tid);
    task
}

fn entry(e: &EntryIn) -> Entry {
    Entry { pad: e.pad, ..Entry::new(e.uid, e.jid, task(&e.task), e.client_ip, e.client_port) }
}

// The rules, as docs/protocol.md states them.
fn prio_ok(p: u8) -> bool {
    (1..=8).contains(&p)
}
/// BEST, stamped by tier 2 on ASSIGN, NOOP, REFILL and HINT: a level, or 0 for none.
fn best_ok(b: u8) -> bool {
    b <= 8
}
fn task_ok(t: &TaskIn) -> bool {
    // Task flags: 0x01 EXACTLY_ONCE, 0x02 GANG; no other bit.
    prio_ok(t.prio) && t.flags & !0x03 == 0
}
fn entry_ok(e: &EntryIn) -> bool {
    task_ok(&e.task) && e.pad == [0, 0]
}
fn list_ok<T>(items: &[T], min: usize, ok: impl Fn(&T) -> bool) -> bool {
    (min..=16).contains(&items.len()) && items.iter().all(ok)
}

fn allowed(input: &Input) -> bool {
    match input {
        Input::Submit { flags, tasks, .. } => flags & !0x03 == 0 && list_ok(tasks, 1, task_ok),
        Input::GetTask { prio, .. } => prio_ok(*prio),
        Input::Assign { entries, best } => list_ok(entries, 1, entry_ok) && best_ok(*best),
        // GET_BUNDLE: GET_TASK's rules and a `want` of 2..=16.
        Input::GetBundle { prio, want, .. } => prio_ok(*prio) && (2..=16).contains(want),
        Input::Noop { best, .. } => best_ok(*best),
        Input::Hint { best } => best_ok(*best),
        Input::Recall { want, pad, best, .. } => *want != 0 && *pad == 0 && best_ok(*best),
        Input::Complete { status, pad, pad2, .. } => *status <= 2 && *pad == 0 && *pad2 == [0, 0],
        Input::QueueFull { tasks, .. } => list_ok(tasks, 1, task_ok),
        Input::Pin { flags, tasks, .. } => flags & !0x0b == 0 && list_ok(tasks, 1, task_ok),
        Input::RefillReq { want, pad, .. } => *want != 0 && *pad == 0,
        Input::Refill { entries, best } => list_ok(entries, 0, entry_ok) && best_ok(*best),
        Input::Return(es) => list_ok(es, 1, entry_ok),
        Input::Swap { prio, held, .. } => prio_ok(*prio) && entry_ok(held),
        Input::Repair { prio, target, pad, .. } => prio_ok(*prio) && *target <= 1 && *pad == [0; 3],
        Input::Claim(c) => (c.verdict == 0 || c.verdict == 3) && c.pad == [0; 3],
        Input::ClaimReply(c) => (1..=2).contains(&c.verdict) && c.pad == [0; 3],
        Input::Steal { which, body } => steal_ok(STEAL_OPS[*which as usize % STEAL_OPS.len()], body),
        Input::StealGrant { body, entries } => steal_ok(Op::StealGrant, body) && list_ok(entries, 0, entry_ok),
        Input::StealReq { body, .. } => steal_ok(Op::StealReq, body),
    }
}

/// Encodes `input` with the encoder of its op; returns the bytes or the refusal.
fn encode_input(input: &Input, buf: &mut [u8]) -> Result<usize, EncodeError> {
    match input {
        Input::Submit { uid, jid, flags, tasks } => {
            let ts: Vec<Task> = tasks.iter().map(task).collect();
            encode_submit(buf, JobRef::new(*uid, *jid), *flags, &ts)
        }
        Input::GetTask { prio, rsrc, node, executor, seq, wait } => {
            encode_get_task(buf, *prio, *rsrc, Requester::new(*node, *executor, *seq), *wait)
        }
        // One entry through encode_assign, as tier 1 sends it; more through the list encoder.
        Input::Assign { entries, best } if entries.len() == 1 => encode_assign(buf, &entry(&entries[0]), *best),
        Input::Assign { entries, best } => {
            encode_assign_list(buf, &entries.iter().map(entry).collect::<Vec<_>>(), *best)
        }
        Input::GetBundle { prio, rsrc, node, executor, seq, want, wait } => {
            encode_get_bundle(buf, *prio, *rsrc, Requester::new(*node, *executor, *seq), *want, *wait)
        }
        Input::Noop { node, executor, seq, best } => encode_noop(buf, Requester::new(*node, *executor, *seq), *best),
        Input::Hint { best } => encode_hint(buf, *best),
        Input::Recall { rsrc, node, want, pad, best } => {
            encode_recall(buf, *rsrc, RefillRequest { waiting: *pad, ..RefillRequest::new(*node, *want) }, *best)
        }
        Input::Complete { ids, status, pad, node, executor, pad2, run_ns, start, output_len } => {
            let mut c = Completion { status: *status, pad: *pad, pad2: *pad2, ..Completion::default() };
            c.set_uid(ids[0]);
            c.set_jid(ids[1]);
            c.set_tid(ids[2]);
            c.set_node(*node);
            c.set_executor(*executor);
            c.set_run_ns(*run_ns);
            c.set_start_unix_ns(*start);
            c.set_output_len(*output_len);
            encode_complete(buf, &c)
        }
        Input::QueueFull { uid, jid, tasks } => {
            let ts: Vec<Task> = tasks.iter().map(task).collect();
            encode_queue_full(buf, JobRef::new(*uid, *jid), &ts)
        }
        Input::Pin { uid, jid, flags, tasks } => {
            let ts: Vec<Task> = tasks.iter().map(task).collect();
            encode_pin(buf, JobRef::new(*uid, *jid), *flags, &ts)
        }
        Input::RefillReq { rsrc, node, want, pad } => {
            encode_refill_req(buf, *rsrc, RefillRequest { waiting: *pad, ..RefillRequest::new(*node, *want) })
        }
        Input::Refill { entries, best } => encode_refill(buf, &entries.iter().map(entry).collect::<Vec<_>>(), *best),
        Input::Return(es) => encode_return(buf, &es.iter().map(entry).collect::<Vec<_>>()),
        Input::Swap { prio, rsrc, swap_idx, retrieve_ptr, held } => {
            let mut s = SwapState { held: entry(held), ..SwapState::default() };
            s.set_swap_idx(*swap_idx);
            s.set_pkt_retrieve_ptr(*retrieve_ptr);
            encode_swap(buf, *prio, *rsrc, &s)
        }
        Input::Repair { prio, target, pad, value } => {
            let mut r = RepairState { target: *target, pad: *pad, ..RepairState::default() };
            r.set_value(*value);
            encode_repair(buf, *prio, &r)
        }
        Input::Claim(c) => encode_claim(buf, &claim(c)),
        Input::ClaimReply(c) => encode_claim_reply(buf, &claim(c)),
        Input::Steal { which, body } => encode_steal(buf, STEAL_OPS[*which as usize % STEAL_OPS.len()], &steal(body)),
        Input::StealGrant { body, entries } => {
            encode_steal_grant(buf, &steal(body), &entries.iter().map(entry).collect::<Vec<_>>())
        }
        Input::StealReq { body, thief_rsrc } => encode_steal_req(buf, &steal(body), *thief_rsrc),
    }
}

fuzz_target!(|case: Case| {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let encoded = encode_input(&case.input, &mut buf);
    assert_eq!(encoded.is_ok(), allowed(&case.input), "encoder verdict {encoded:?} for {:?}", case.input);
    let Ok(n) = encoded else { return };
    let bytes = &buf[..n];

    let packet = decode_packet(bytes).expect("encoded bytes decode");
    let mut again = [0u8; MAX_MESSAGE_LEN];
    let m = packet.encode(&mut again).expect("decoded packet encodes");
    assert_eq!(&again[..m], bytes);
    match packet {
        Packet::External(msg) => assert_eq!(decode(bytes), Ok(msg)),
        _ => assert!(matches!(decode(bytes), Err(DecodeError::InternalOp(_)))),
    }

    let a = Endpoint { mac: case.a.0, ip: case.a.1, port: case.a.2 };
    let b = Endpoint { mac: case.b.0, ip: case.b.1, port: case.b.2 };
    let mut frame_buf = [0u8; frame::HEADERS_LEN + MAX_MESSAGE_LEN];
    let len = frame::build_udp(&mut frame_buf, a, b, case.ip_id, bytes).expect("frame fits");
    let f = frame::parse_udp(&frame_buf[..len]).expect("built frame parses");
    assert_eq!((f.src(), f.dst(), f.ip.id(), f.payload), (a, b, case.ip_id, bytes));
    assert_eq!(decode_packet(f.payload), Ok(packet));
    let mut reply_buf = [0u8; frame::HEADERS_LEN + MAX_MESSAGE_LEN];
    let len = frame::build_reply(&mut reply_buf, &f, bytes).expect("reply fits");
    let r = frame::parse_udp(&reply_buf[..len]).expect("reply parses");
    assert_eq!((r.src(), r.dst(), r.payload), (b, a, bytes));
});

//! Golden vectors: tests/vectors/protocol.json at the repository root holds the exact
//! bytes of Bolt messages, frames and descriptors, with their decoded fields, for every
//! tier to test against (XDP, P4, software switch, executors).
//!
//! The file is generated here from scheduler-common's encoders and committed. This test
//! fails when the file and the encoders drift apart; after a deliberate protocol change,
//! rewrite the file with
//!
//!     BOLT_REGENERATE_VECTORS=1 cargo test -p scheduler-common --test vectors
//!
//! and review the diff. Independently of generation, every vector in the file is
//! checked: valid ones decode to the stated fields and re-encode (from those fields) to
//! the same bytes; invalid ones fail with the stated error kind.

use scheduler_common::data::{self, DataError, DataFrame, ErrorCode, ObjectRef, TaskResult};
use scheduler_common::descriptor::{DescriptorError, Handler};
use scheduler_common::frame::{self, Endpoint, FrameError};
use scheduler_common::*;
use serde_json::{json, Map, Value};

mod support;
use support::{packet_op, Owned};

const REGENERATE_VAR: &str = "BOLT_REGENERATE_VECTORS";

fn vectors_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/protocol.json")
}

// ---------------------------------------------------------------------------------------
// Hex and small field codecs

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length in {s:?}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit")).collect()
}

fn ip_str(ip: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3])
}

fn parse_ip(s: &str) -> [u8; 4] {
    let parts: Vec<u8> = s.split('.').map(|p| p.parse().expect("IPv4 octet")).collect();
    parts.try_into().expect("four octets")
}

fn mac_str(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn parse_mac(s: &str) -> [u8; 6] {
    let parts: Vec<u8> = s.split(':').map(|p| u8::from_str_radix(p, 16).expect("MAC octet")).collect();
    parts.try_into().expect("six octets")
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("field {key} missing or not a number in {v}"))
}

fn u8f(v: &Value, key: &str) -> u8 {
    u8::try_from(num(v, key)).expect("u8 field")
}

fn u16f(v: &Value, key: &str) -> u16 {
    u16::try_from(num(v, key)).expect("u16 field")
}

fn u32f(v: &Value, key: &str) -> u32 {
    u32::try_from(num(v, key)).expect("u32 field")
}

fn strf<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_else(|| panic!("field {key} missing or not a string in {v}"))
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v.get(key).and_then(Value::as_array).unwrap_or_else(|| panic!("field {key} missing or not an array in {v}"))
}

// ---------------------------------------------------------------------------------------
// Fields of messages as JSON, and back

fn handler_json(h: &Handler<'_>) -> Value {
    match *h {
        Handler::Noop => json!({ "kind": "noop" }),
        Handler::Sleep { micros } => json!({ "kind": "sleep", "micros": micros }),
        Handler::Spin { micros } => json!({ "kind": "spin", "micros": micros }),
        Handler::Exec { name } => {
            json!({ "kind": "exec", "name": std::str::from_utf8(name).expect("exec names are ASCII") })
        }
        Handler::Spec { port, spec_id } => json!({ "kind": "spec", "port": port, "spec_id": spec_id }),
    }
}

fn handler_from_json(v: &Value) -> Handler<'_> {
    match strf(v, "kind") {
        "noop" => Handler::Noop,
        "sleep" => Handler::Sleep { micros: u32f(v, "micros") },
        "spin" => Handler::Spin { micros: u32f(v, "micros") },
        "exec" => Handler::Exec { name: strf(v, "name").as_bytes() },
        "spec" => Handler::Spec { port: u16f(v, "port"), spec_id: num(v, "spec_id") },
        other => panic!("unknown handler kind {other}"),
    }
}

fn task_json(t: &Task) -> Value {
    let handler = match Handler::decode(&t.desc) {
        Ok(h) => handler_json(&h),
        Err(e) => json!({ "invalid": e.name() }),
    };
    json!({
        "tid": t.tid(), "prio": t.prio, "rsrc": t.rsrc, "class": t.class, "flags": t.flags,
        "desc": hex(&t.desc), "handler": handler,
    })
}

fn task_from_json(v: &Value) -> Task {
    let desc: [u8; 16] = unhex(strf(v, "desc")).try_into().expect("16-byte descriptor");
    let mut t = Task {
        prio: u8f(v, "prio"),
        rsrc: u8f(v, "rsrc"),
        class: u8f(v, "class"),
        flags: u8f(v, "flags"),
        desc,
        ..Task::default()
    };
    t.set_tid(u32f(v, "tid"));
    t
}

fn entry_json(e: &Entry) -> Value {
    json!({
        "uid": e.uid(), "jid": e.jid(), "task": task_json(&e.task),
        "client_ip": ip_str(e.client_ip), "client_port": e.client_port(),
    })
}

fn entry_from_json(v: &Value) -> Entry {
    Entry::new(
        u32f(v, "uid"),
        u32f(v, "jid"),
        task_from_json(&v["task"]),
        parse_ip(strf(v, "client_ip")),
        u16f(v, "client_port"),
    )
}

fn requester_json(r: &Requester) -> Value {
    json!({ "node": r.node(), "executor": r.executor(), "seq": r.seq() })
}

fn requester_from_json(v: &Value) -> Requester {
    Requester::new(u16f(v, "node"), u16f(v, "executor"), u32f(v, "seq"))
}

fn fields_json(p: &Packet<'_>) -> Value {
    let tasks = |ts: &[Task]| Value::Array(ts.iter().map(task_json).collect());
    let entries = |es: &[Entry]| Value::Array(es.iter().map(entry_json).collect());
    match *p {
        Packet::External(Message::Submit { job, flags, tasks: ts }) => {
            json!({ "uid": job.uid(), "jid": job.jid(), "flags": flags, "tasks": tasks(ts) })
        }
        Packet::External(Message::GetTask { rtrv_prio, exec_rsrc, from, wait }) => {
            let mut v = requester_json(&from);
            v["rtrv_prio"] = json!(rtrv_prio);
            v["exec_rsrc"] = json!(exec_rsrc);
            v["wait"] = json!(wait);
            v
        }
        Packet::External(Message::Assign { entries: es, best }) => json!({ "entries": entries(es), "best": best }),
        Packet::External(Message::GetBundle { rtrv_prio, exec_rsrc, from, want, wait }) => {
            let mut v = requester_json(&from);
            v["rtrv_prio"] = json!(rtrv_prio);
            v["exec_rsrc"] = json!(exec_rsrc);
            v["want"] = json!(want);
            v["wait"] = json!(wait);
            v
        }
        Packet::External(Message::Noop { to, best }) => {
            let mut v = requester_json(&to);
            v["best"] = json!(best);
            v
        }
        Packet::External(Message::Hint { best }) => json!({ "best": best }),
        Packet::External(Message::Recall { exec_rsrc, req, best }) => {
            json!({ "exec_rsrc": exec_rsrc, "node": req.node(), "want": req.want, "best": best })
        }
        Packet::External(Message::Complete(c)) => json!({
            "uid": c.uid(), "jid": c.jid(), "tid": c.tid(), "status": c.status,
            "node": c.node(), "executor": c.executor(), "run_ns": c.run_ns(), "start_unix_ns": c.start_unix_ns(),
            "output_len": c.output_len(),
        }),
        Packet::External(Message::QueueFull { job, tasks: ts }) => {
            json!({ "uid": job.uid(), "jid": job.jid(), "tasks": tasks(ts) })
        }
        Packet::External(Message::Pin { job, flags, tasks: ts }) => {
            json!({ "uid": job.uid(), "jid": job.jid(), "flags": flags, "tasks": tasks(ts) })
        }
        Packet::External(Message::RefillReq { node_rsrc, req }) => {
            json!({ "node_rsrc": node_rsrc, "node": req.node(), "want": req.want, "waiting": req.waiting })
        }
        Packet::External(Message::Refill { entries: es, best }) => json!({ "entries": entries(es), "best": best }),
        Packet::External(Message::Return(es)) => json!({ "entries": entries(es) }),
        Packet::External(Message::Claim(c)) | Packet::External(Message::ClaimReply(c)) => json!({
            "uid": c.uid(), "jid": c.jid(), "tid": c.tid(), "node": c.node(), "executor": c.executor(),
            "verdict": c.verdict,
        }),
        Packet::External(Message::StealGrant { steal, entries: es }) => {
            let mut v = steal_json(&steal);
            v["entries"] = entries(es);
            v
        }
        Packet::External(
            Message::StealProbe(b) | Message::StealLoad(b) | Message::StealAck(b) | Message::StealDone(b),
        ) => steal_json(&b),
        Packet::External(Message::StealReq { steal, thief_rsrc }) => {
            let mut v = steal_json(&steal);
            v["thief_rsrc"] = json!(thief_rsrc);
            v
        }
        Packet::Swap { queue_prio, exec_rsrc, state } => json!({
            "queue_prio": queue_prio, "exec_rsrc": exec_rsrc, "swap_idx": state.swap_idx(),
            "pkt_retrieve_ptr": state.pkt_retrieve_ptr(), "held": entry_json(&state.held),
        }),
        Packet::Repair { queue_prio, state } => {
            json!({ "queue_prio": queue_prio, "target": state.target, "value": state.value() })
        }
    }
}

fn steal_json(b: &StealBody) -> Value {
    json!({ "node": b.node(), "want": b.want, "verdict": b.verdict, "seq": b.seq(), "load": b.load() })
}

fn steal_from_json(v: &Value) -> StealBody {
    StealBody::new(u16f(v, "node"), u32f(v, "seq"))
        .with_want(u8f(v, "want"))
        .with_verdict(u8f(v, "verdict"))
        .with_load(u32f(v, "load"))
}

fn owned_from_json(op: &str, v: &Value) -> Owned {
    let tasks = |v: &Value| arr(v, "tasks").iter().map(task_from_json).collect::<Vec<_>>();
    let entries = |v: &Value| arr(v, "entries").iter().map(entry_from_json).collect::<Vec<_>>();
    let job = |v: &Value| JobRef::new(u32f(v, "uid"), u32f(v, "jid"));
    match op {
        "SUBMIT" => Owned::Submit { job: job(v), flags: u8f(v, "flags"), tasks: tasks(v) },
        "GET_TASK" => Owned::GetTask {
            rtrv_prio: u8f(v, "rtrv_prio"),
            exec_rsrc: u8f(v, "exec_rsrc"),
            from: requester_from_json(v),
            wait: v.get("wait").and_then(Value::as_bool).unwrap_or_else(|| panic!("field wait missing in {v}")),
        },
        "ASSIGN" => Owned::Assign { entries: entries(v), best: u8f(v, "best") },
        "GET_BUNDLE" => Owned::GetBundle {
            rtrv_prio: u8f(v, "rtrv_prio"),
            exec_rsrc: u8f(v, "exec_rsrc"),
            from: requester_from_json(v),
            want: u8f(v, "want"),
            wait: v.get("wait").and_then(Value::as_bool).unwrap_or_else(|| panic!("field wait missing in {v}")),
        },
        "NOOP" => Owned::Noop { to: requester_from_json(v), best: u8f(v, "best") },
        "HINT" => Owned::Hint { best: u8f(v, "best") },
        "RECALL" => Owned::Recall {
            exec_rsrc: u8f(v, "exec_rsrc"),
            req: RefillRequest::new(u16f(v, "node"), u8f(v, "want")),
            best: u8f(v, "best"),
        },
        "COMPLETE" => {
            let mut c = Completion { status: u8f(v, "status"), ..Completion::default() };
            c.set_uid(u32f(v, "uid"));
            c.set_jid(u32f(v, "jid"));
            c.set_tid(u32f(v, "tid"));
            c.set_node(u16f(v, "node"));
            c.set_executor(u16f(v, "executor"));
            c.set_run_ns(u32f(v, "run_ns"));
            c.set_start_unix_ns(num(v, "start_unix_ns"));
            c.set_output_len(num(v, "output_len"));
            Owned::Complete(c)
        }
        "QUEUE_FULL" => Owned::QueueFull { job: job(v), tasks: tasks(v) },
        "PIN" => Owned::Pin { job: job(v), flags: u8f(v, "flags"), tasks: tasks(v) },
        "REFILL_REQ" => Owned::RefillReq {
            node_rsrc: u8f(v, "node_rsrc"),
            req: RefillRequest::new(u16f(v, "node"), u8f(v, "want")).with_waiting(u8f(v, "waiting")),
        },
        "REFILL" => Owned::Refill { entries: entries(v), best: u8f(v, "best") },
        "RETURN" => Owned::Return(entries(v)),
        "CLAIM" | "CLAIM_REPLY" => {
            let mut c = Claim { verdict: u8f(v, "verdict"), ..Claim::default() };
            c.set_uid(u32f(v, "uid"));
            c.set_jid(u32f(v, "jid"));
            c.set_tid(u32f(v, "tid"));
            c.set_node(u16f(v, "node"));
            c.set_executor(u16f(v, "executor"));
            if op == "CLAIM" {
                Owned::Claim(c)
            } else {
                Owned::ClaimReply(c)
            }
        }
        "STEAL_GRANT" => Owned::StealGrant(steal_from_json(v), entries(v)),
        "STEAL_REQ" => Owned::StealReqFrom(steal_from_json(v), u8f(v, "thief_rsrc")),
        name if name.starts_with("STEAL_") => {
            let op = Op::ALL.into_iter().find(|o| o.name() == name).expect("a STEAL op");
            Owned::Steal(op, steal_from_json(v))
        }
        "SWAP" => {
            let mut state = SwapState { held: entry_from_json(&v["held"]), ..SwapState::default() };
            state.set_swap_idx(u32f(v, "swap_idx"));
            state.set_pkt_retrieve_ptr(u32f(v, "pkt_retrieve_ptr"));
            Owned::Swap { queue_prio: u8f(v, "queue_prio"), exec_rsrc: u8f(v, "exec_rsrc"), state }
        }
        "REPAIR" => {
            let mut state = RepairState { target: u8f(v, "target"), ..RepairState::default() };
            state.set_value(u32f(v, "value"));
            Owned::Repair { queue_prio: u8f(v, "queue_prio"), state }
        }
        other => panic!("unknown op name {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// The vectors

fn desc(h: Handler<'_>) -> [u8; 16] {
    h.encode().expect("valid handler")
}

fn task(tid: u32, prio: u8, rsrc: u8, class: u8, flags: u8, handler: Handler<'_>) -> Task {
    let mut t = Task { prio, rsrc, class, flags, desc: desc(handler), ..Task::default() };
    t.set_tid(tid);
    t
}

/// The client that owns the queued tasks in these vectors (TEST-NET-3).
const CLIENT_IP: [u8; 4] = [203, 0, 113, 5];
const CLIENT_PORT: u16 = 9100;

fn entry(uid: u32, jid: u32, t: Task) -> Entry {
    Entry::new(uid, jid, t, CLIENT_IP, CLIENT_PORT)
}

fn ring_entry() -> Entry {
    entry(42, 7, task(1001, 2, 0b0000_0011, 3, 0, Handler::Sleep { micros: 250 }))
}

fn refill_entries(n: u32) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            let h = match i % 4 {
                0 => Handler::Noop,
                1 => Handler::Sleep { micros: 100 + i },
                2 => Handler::Spin { micros: 50 * i },
                _ => Handler::Exec { name: b"wc-l" },
            };
            entry(42, 8 + i / 8, task(2000 + i, 1 + (i % 4) as u8, (i % 3) as u8, i as u8, 0, h))
        })
        .collect()
}

fn get_task_request() -> Owned {
    Owned::GetTask { rtrv_prio: 1, exec_rsrc: 0b0000_0011, from: Requester::new(7, 3, 0x0000_0102), wait: false }
}

fn valid_messages() -> Vec<(&'static str, Owned)> {
    let submit_tasks = vec![
        task(1, 1, 0, 0, 0, Handler::Noop),
        task(2, 4, 0b0000_0101, 1, TASK_FLAG_EXACTLY_ONCE, Handler::Spin { micros: 1_000 }),
    ];
    let mut complete = Completion { status: STATUS_OK, ..Completion::default() };
    complete.set_uid(42);
    complete.set_jid(7);
    complete.set_tid(1001);
    complete.set_node(7);
    complete.set_executor(3);
    complete.set_run_ns(251_337);
    complete.set_start_unix_ns(1_763_769_600_000_000_123);
    complete.set_output_len(4096);
    let mut refused = complete;
    refused.status = STATUS_REFUSED;
    refused.set_run_ns(0);
    refused.set_output_len(0);
    let mut failed = complete;
    failed.status = STATUS_FAILED;
    vec![
        (
            "submit_one_task",
            Owned::Submit {
                job: JobRef::new(42, 7),
                flags: 0,
                tasks: vec![task(1001, 2, 3, 3, 0, Handler::Sleep { micros: 250 })],
            },
        ),
        (
            "submit_two_tasks_resubmit",
            Owned::Submit { job: JobRef::new(42, 7), flags: FLAG_RESUBMIT, tasks: submit_tasks.clone() },
        ),
        (
            "submit_sixteen_tasks_exactly_once",
            Owned::Submit {
                job: JobRef::new(0xffff_fffe, 1),
                flags: FLAG_RESUBMIT | FLAG_EXACTLY_ONCE,
                tasks: refill_entries(16).iter().map(|e| e.task).collect(),
            },
        ),
        (
            "submit_gang_of_two",
            Owned::Submit {
                job: JobRef::new(42, 8),
                flags: 0,
                tasks: vec![
                    task(1101, 1, 0, 0, TASK_FLAG_EXACTLY_ONCE | TASK_FLAG_GANG, Handler::Sleep { micros: 250 }),
                    task(1102, 1, 0, 0, TASK_FLAG_EXACTLY_ONCE | TASK_FLAG_GANG, Handler::Sleep { micros: 250 }),
                ],
            },
        ),
        ("get_task", get_task_request()),
        (
            "get_task_low_priority_all_resources",
            Owned::GetTask {
                rtrv_prio: MAX_PRIORITIES,
                exec_rsrc: 0xff,
                from: Requester::new(65535, 65535, u32::MAX),
                wait: false,
            },
        ),
        (
            "get_task_wait",
            Owned::GetTask { rtrv_prio: 2, exec_rsrc: 0b0000_0001, from: Requester::new(7, 4, 9), wait: true },
        ),
        (
            "get_bundle",
            Owned::GetBundle {
                rtrv_prio: 1,
                exec_rsrc: 0b0000_0011,
                from: Requester::new(7, 3, 0x0000_0103),
                want: 10,
                wait: false,
            },
        ),
        (
            "get_bundle_wait_want_2",
            Owned::GetBundle { rtrv_prio: 2, exec_rsrc: 0, from: Requester::new(7, 4, 10), want: 2, wait: true },
        ),
        (
            "get_bundle_want_16",
            Owned::GetBundle {
                rtrv_prio: MAX_PRIORITIES,
                exec_rsrc: 0xff,
                from: Requester::new(65535, 65535, u32::MAX),
                want: 16,
                wait: false,
            },
        ),
        ("assign", Owned::Assign { entries: vec![ring_entry()], best: 0 }),
        (
            "assign_exec",
            Owned::Assign {
                entries: vec![entry(
                    1,
                    2,
                    task(3, 1, 0x80, 0, TASK_FLAG_EXACTLY_ONCE, Handler::Exec { name: b"resize_img.v2" }),
                )],
                best: 0,
            },
        ),
        ("assign_from_tier2_best_1", Owned::Assign { entries: vec![ring_entry()], best: 1 }),
        // Tier 2's answer to a GET_BUNDLE: the tasks in the order they are to run.
        ("assign_bundle_of_two_best_2", Owned::Assign { entries: refill_entries(2), best: 2 }),
        ("assign_bundle_of_sixteen", Owned::Assign { entries: refill_entries(16), best: 0 }),
        ("noop", Owned::Noop { to: Requester::new(7, 3, 0x0000_0102), best: 0 }),
        ("noop_best_3", Owned::Noop { to: Requester::new(7, 3, 0x0000_0102), best: 3 }),
        ("hint_best_1", Owned::Hint { best: 1 }),
        ("hint_best_8", Owned::Hint { best: MAX_PRIORITIES }),
        ("complete_ok", Owned::Complete(complete)),
        ("complete_failed", Owned::Complete(failed)),
        ("complete_refused", Owned::Complete(refused)),
        // What a switch sends: one QUEUE_FULL per refused task (docs/protocol.md). A
        // receiver accepts any length 1..=16, which the longer vector keeps covered.
        ("queue_full_one_task", Owned::QueueFull { job: JobRef::new(42, 7), tasks: submit_tasks[..1].to_vec() }),
        ("queue_full", Owned::QueueFull { job: JobRef::new(42, 7), tasks: submit_tasks.clone() }),
        (
            "pin_movable_exactly_once",
            Owned::Pin {
                job: JobRef::new(42, 7),
                flags: FLAG_MOVABLE | FLAG_EXACTLY_ONCE,
                tasks: vec![task(1001, 2, 3, 3, 0, Handler::Sleep { micros: 250 })],
            },
        ),
        ("pin_two_tasks", Owned::Pin { job: JobRef::new(42, 7), flags: 0, tasks: submit_tasks }),
        ("refill_req", Owned::RefillReq { node_rsrc: 0b0000_0011, req: RefillRequest::new(7, 16) }),
        ("refill_req_want_max", Owned::RefillReq { node_rsrc: 0, req: RefillRequest::new(7, 255) }),
        (
            "refill_req_waiting",
            Owned::RefillReq { node_rsrc: 0b0000_0001, req: RefillRequest::new(7, 3).with_waiting(3) },
        ),
        ("recall", Owned::Recall { exec_rsrc: 0b0000_0011, req: RefillRequest::new(7, 1), best: 2 }),
        ("recall_want_max_best_0", Owned::Recall { exec_rsrc: 0, req: RefillRequest::new(7, 255), best: 0 }),
        ("refill_empty", Owned::Refill { entries: vec![], best: 0 }),
        ("refill_two", Owned::Refill { entries: refill_entries(2), best: 0 }),
        ("refill_sixteen", Owned::Refill { entries: refill_entries(16), best: 0 }),
        ("refill_two_best_2", Owned::Refill { entries: refill_entries(2), best: 2 }),
        ("return_one", Owned::Return(vec![ring_entry()])),
        ("return_sixteen", Owned::Return(refill_entries(16))),
        ("claim", Owned::Claim(claim(CLAIM_ASK))),
        ("claim_renew", Owned::Claim(claim(CLAIM_RENEW))),
        ("claim_granted", Owned::ClaimReply(claim(CLAIM_GRANTED))),
        ("claim_denied", Owned::ClaimReply(claim(CLAIM_DENIED))),
        ("steal_probe", Owned::Steal(Op::StealProbe, StealBody::new(2, 0x0000_0a01))),
        ("steal_load", Owned::Steal(Op::StealLoad, StealBody::new(7, 0x0000_0a01).with_load(37))),
        ("steal_req", Owned::Steal(Op::StealReq, StealBody::new(2, 0x0000_0a01).with_want(16))),
        ("steal_req_with_resources", Owned::StealReqFrom(StealBody::new(2, 0x0000_0a02).with_want(3), 0b0000_0110)),
        ("steal_grant_empty", Owned::StealGrant(StealBody::new(7, 0x0000_0a01), vec![])),
        ("steal_grant_two", Owned::StealGrant(StealBody::new(7, 0x0000_0a01), refill_entries(2))),
        ("steal_ack", Owned::Steal(Op::StealAck, StealBody::new(2, 0x0000_0a01))),
        ("steal_done_commit", Owned::Steal(Op::StealDone, StealBody::new(7, 0x0000_0a01).with_verdict(STEAL_COMMIT))),
        ("steal_done_abort", Owned::Steal(Op::StealDone, StealBody::new(7, 0x0000_0a01).with_verdict(STEAL_ABORT))),
    ]
}

/// A claim on the exactly-once task of `assign_exec`, by executor 3 of node 7.
fn claim(verdict: u8) -> Claim {
    let e = entry(1, 2, task(3, 1, 0x80, 0, TASK_FLAG_EXACTLY_ONCE, Handler::Exec { name: b"resize_img.v2" }));
    Claim::of(&e, 7, 3).answered(verdict)
}

fn internal_packets() -> Vec<(&'static str, Owned)> {
    let mut swap = SwapState { held: ring_entry(), ..SwapState::default() };
    swap.set_swap_idx(0x0000_0012);
    swap.set_pkt_retrieve_ptr(0x0000_0011);
    let mut repair_add = RepairState { target: REPAIR_ADD_PTR, ..RepairState::default() };
    repair_add.set_value(0x0001_0000);
    let mut repair_retrieve = RepairState { target: REPAIR_RETRIEVE_PTR, ..RepairState::default() };
    repair_retrieve.set_value(0x0002_0003);
    vec![
        ("swap", Owned::Swap { queue_prio: 2, exec_rsrc: 0b0000_0011, state: swap }),
        ("repair_add_ptr", Owned::Repair { queue_prio: 1, state: repair_add }),
        ("repair_retrieve_ptr", Owned::Repair { queue_prio: 4, state: repair_retrieve }),
    ]
}

/// Invalid messages, made by breaking one thing in a valid one, and the error each gives.
/// `internal` vectors are for the switch pipeline's decoder (`decode_packet`).
fn invalid_messages() -> Vec<(&'static str, &'static str, Vec<u8>, DecodeError)> {
    let m: std::collections::HashMap<_, _> =
        valid_messages().into_iter().chain(internal_packets()).map(|(n, o)| (n, o.encode())).collect();
    let with = |name: &str, edits: &[(usize, u8)]| {
        let mut b = m[name].clone();
        for &(at, v) in edits {
            b[at] = v;
        }
        b
    };
    let cut = |name: &str, len: usize| m[name][..len].to_vec();
    let grow = |name: &str, extra: usize| {
        let mut b = m[name].clone();
        b.extend(std::iter::repeat_n(0, extra));
        b
    };
    const H: usize = Header::LEN;
    use DecodeError::*;
    let (ext, int) = ("decode", "decode_packet");
    vec![
        ("empty", ext, vec![], Truncated),
        ("header_cut_short", ext, cut("get_task", 7), Truncated),
        ("get_task_body_cut_short", ext, cut("get_task", 12), Truncated),
        ("complete_body_cut_short", ext, cut("complete_ok", 47), Truncated),
        ("bad_magic", ext, with("get_task", &[(1, 0x18)]), BadMagic),
        ("magic_byte_swapped", ext, with("get_task", &[(0, 0x17), (1, 0xb0)]), BadMagic),
        ("version_0", ext, with("get_task", &[(2, 0)]), BadVersion(0)),
        ("version_1", ext, with("get_task", &[(2, 1)]), BadVersion(1)),
        ("version_2", ext, with("get_task", &[(2, 2)]), BadVersion(2)),
        ("version_3", ext, with("get_task", &[(2, 3)]), BadVersion(3)),
        ("version_4", ext, with("get_task", &[(2, 4)]), BadVersion(4)),
        ("version_6", ext, with("get_task", &[(2, 6)]), BadVersion(6)),
        ("op_0", ext, with("noop", &[(3, 0)]), UnknownOp(0)),
        ("op_99", ext, with("noop", &[(3, 99)]), UnknownOp(99)),
        ("op_255", ext, with("noop", &[(3, 255)]), UnknownOp(255)),
        ("swap_from_outside", ext, m["swap"].clone(), InternalOp(10)),
        ("repair_from_outside", ext, m["repair_add_ptr"].clone(), InternalOp(11)),
        ("submit_with_wait_flag", ext, with("submit_one_task", &[(7, FLAG_WAIT)]), UnknownFlags(FLAG_WAIT)),
        ("submit_unknown_header_flag", ext, with("submit_one_task", &[(7, 0x08)]), UnknownFlags(0x08)),
        ("pin_with_wait_flag", ext, with("pin_two_tasks", &[(7, FLAG_WAIT)]), UnknownFlags(FLAG_WAIT)),
        ("pin_unknown_header_flag", ext, with("pin_two_tasks", &[(7, 0x10)]), UnknownFlags(0x10)),
        ("pin_count_0", ext, cut("pin_two_tasks", H + 8).with_count(0), BadCount(0)),
        ("get_task_unknown_flag", ext, with("get_task_wait", &[(7, FLAG_WAIT | 0x08)]), UnknownFlags(0x0c)),
        ("noop_with_wait_flag", ext, with("noop", &[(7, FLAG_WAIT)]), UnknownFlags(FLAG_WAIT)),
        ("get_task_with_resubmit_flag", ext, with("get_task", &[(7, FLAG_RESUBMIT)]), UnknownFlags(FLAG_RESUBMIT)),
        (
            "refill_with_exactly_once_flag",
            ext,
            with("refill_two", &[(7, FLAG_EXACTLY_ONCE)]),
            UnknownFlags(FLAG_EXACTLY_ONCE),
        ),
        ("submit_unknown_task_flag", ext, with("submit_one_task", &[(H + 8 + 7, 0x04)]), UnknownFlags(0x04)),
        ("submit_count_0", ext, cut("submit_one_task", H + 8).with_count(0), BadCount(0)),
        ("submit_count_17", ext, with("submit_one_task", &[(4, 17)]), BadCount(17)),
        ("queue_full_count_0", ext, with("queue_full", &[(4, 0)]), BadCount(0)),
        ("get_task_count_1", ext, with("get_task", &[(4, 1)]), BadCount(1)),
        ("assign_count_2_one_entry", ext, with("assign", &[(4, 2)]), BadLength { expected: 88, actual: 48 }),
        ("assign_count_17", ext, with("assign_bundle_of_sixteen", &[(4, 17)]), BadCount(17)),
        ("assign_bundle_entry_stamp_left", ext, with("assign_bundle_of_two_best_2", &[(H + 78, 1)]), BadField),
        ("get_bundle_want_0", ext, with("get_bundle", &[(H + 8, 0)]), BadField),
        ("get_bundle_want_1", ext, with("get_bundle", &[(H + 8, 1)]), BadField),
        ("get_bundle_want_17", ext, with("get_bundle", &[(H + 8, 17)]), BadField),
        ("get_bundle_want_255", ext, with("get_bundle", &[(H + 8, 255)]), BadField),
        ("get_bundle_pad_set", ext, with("get_bundle", &[(H + 11, 1)]), BadField),
        ("get_bundle_prio_0", ext, with("get_bundle", &[(5, 0)]), BadPriority(0)),
        ("get_bundle_count_1", ext, with("get_bundle", &[(4, 1)]), BadCount(1)),
        ("get_bundle_unknown_flag", ext, with("get_bundle", &[(7, 0x08)]), UnknownFlags(0x08)),
        ("get_bundle_cut_to_get_task", ext, cut("get_bundle", 16), Truncated),
        ("get_bundle_trailing_byte", ext, grow("get_bundle", 1), BadLength { expected: 20, actual: 21 }),
        ("assign_count_0", ext, with("assign", &[(4, 0)]), BadCount(0)),
        ("return_count_0", ext, cut("return_one", H).with_count(0), BadCount(0)),
        ("refill_count_17", ext, with("refill_sixteen", &[(4, 17)]), BadCount(17)),
        ("submit_count_2_one_task", ext, with("submit_one_task", &[(4, 2)]), BadLength { expected: 64, actual: 40 }),
        ("get_task_trailing_byte", ext, grow("get_task", 1), BadLength { expected: 16, actual: 17 }),
        ("assign_header_only", ext, cut("assign", H), BadLength { expected: 48, actual: 8 }),
        ("refill_empty_with_an_entry", ext, grow("refill_empty", Entry::LEN), BadLength { expected: 8, actual: 48 }),
        (
            "refill_two_cut_mid_entry",
            ext,
            cut("refill_two", H + Entry::LEN + 20),
            BadLength { expected: 88, actual: 68 },
        ),
        ("get_task_prio_0", ext, with("get_task", &[(5, 0)]), BadPriority(0)),
        ("get_task_prio_9", ext, with("get_task", &[(5, 9)]), BadPriority(9)),
        ("submit_task_prio_0", ext, with("submit_one_task", &[(H + 8 + 4, 0)]), BadPriority(0)),
        ("assign_task_prio_9", ext, with("assign", &[(H + 8 + 4, 9)]), BadPriority(9)),
        ("return_task_prio_200", ext, with("return_sixteen", &[(H + 15 * Entry::LEN + 8 + 4, 200)]), BadPriority(200)),
        ("complete_status_3", ext, with("complete_ok", &[(H + 12, 3)]), BadField),
        ("complete_pad_set", ext, with("complete_ok", &[(H + 13, 1)]), BadField),
        ("complete_pad2_set", ext, with("complete_ok", &[(H + 19, 1)]), BadField),
        ("claim_verdict_set", ext, with("claim", &[(H + 16, CLAIM_GRANTED)]), BadField),
        ("claim_reply_verdict_ask", ext, with("claim_granted", &[(H + 16, CLAIM_ASK)]), BadField),
        ("claim_reply_verdict_3", ext, with("claim_denied", &[(H + 16, 3)]), BadField),
        ("claim_renew_verdict_4", ext, with("claim_renew", &[(H + 16, 4)]), BadField),
        ("claim_pad_set", ext, with("claim", &[(H + 19, 1)]), BadField),
        ("claim_reply_cut_short", ext, cut("claim_granted", 27), Truncated),
        ("refill_req_want_0", ext, with("refill_req", &[(H + 2, 0)]), BadField),
        ("refill_req_prio_set", ext, with("refill_req", &[(5, 1)]), BadField),
        ("recall_want_0", ext, with("recall", &[(H + 2, 0)]), BadField),
        ("recall_waiting_set", ext, with("recall", &[(H + 3, 1)]), BadField),
        ("recall_best_9", ext, with("recall", &[(5, 9)]), BadPriority(9)),
        ("recall_flags_set", ext, with("recall", &[(7, 4)]), UnknownFlags(4)),
        ("recall_cut_short", ext, cut("recall", 11), Truncated),
        ("recall_trailing_byte", ext, grow("recall", 1), BadLength { expected: 12, actual: 13 }),
        ("assign_best_9", ext, with("assign", &[(5, 9)]), BadPriority(9)),
        ("noop_best_255", ext, with("noop", &[(5, 255)]), BadPriority(255)),
        ("refill_best_9", ext, with("refill_two", &[(5, 9)]), BadPriority(9)),
        ("hint_best_9", ext, with("hint_best_1", &[(5, 9)]), BadPriority(9)),
        ("hint_with_a_body_byte", ext, grow("hint_best_1", 1), BadLength { expected: 8, actual: 9 }),
        ("hint_count_1", ext, with("hint_best_1", &[(4, 1)]), BadCount(1)),
        ("hint_rsrc_set", ext, with("hint_best_1", &[(6, 1)]), BadField),
        ("complete_header_prio_set", ext, with("complete_ok", &[(5, 1)]), BadField),
        ("noop_header_rsrc_set", ext, with("noop", &[(6, 1)]), BadField),
        ("submit_header_prio_set", ext, with("submit_one_task", &[(5, 1)]), BadField),
        ("return_entry_pad_set", ext, with("return_one", &[(H + 38, 0x80)]), BadField),
        ("steal_probe_load_set", ext, with("steal_probe", &[(H + 11, 1)]), BadField),
        ("steal_req_want_0", ext, with("steal_req", &[(H + 2, 0)]), BadField),
        ("steal_req_want_17", ext, with("steal_req", &[(H + 2, 17)]), BadField),
        ("steal_done_verdict_3", ext, with("steal_done_commit", &[(H + 3, 3)]), BadField),
        ("steal_ack_prio_set", ext, with("steal_ack", &[(5, 1)]), BadField),
        ("steal_grant_entry_stamp_left", ext, with("steal_grant_two", &[(H + 12 + 38, 0x12)]), BadField),
        ("steal_grant_count_17", ext, with("steal_grant_empty", &[]).with_count(17), BadCount(17)),
        ("steal_load_cut_short", ext, cut("steal_load", 12), Truncated),
        ("swap_prio_0", int, with("swap", &[(5, 0)]), BadPriority(0)),
        ("swap_with_flag", int, with("swap", &[(7, FLAG_RESUBMIT)]), UnknownFlags(FLAG_RESUBMIT)),
        ("swap_held_task_prio_0", int, with("swap", &[(H + 8 + 8 + 4, 0)]), BadPriority(0)),
        ("swap_count_1", int, with("swap", &[(4, 1)]), BadCount(1)),
        ("repair_target_2", int, with("repair_add_ptr", &[(H, 2)]), BadField),
        ("repair_rsrc_set", int, with("repair_add_ptr", &[(6, 1)]), BadField),
        ("repair_cut_short", int, cut("repair_add_ptr", 12), Truncated),
    ]
}

/// Sets a message's header count byte, for building vectors whose count is the fault.
trait WithCount {
    fn with_count(self, count: u8) -> Self;
}

impl WithCount for Vec<u8> {
    fn with_count(mut self, count: u8) -> Self {
        self[4] = count;
        self
    }
}

fn valid_descriptors() -> Vec<(&'static str, Handler<'static>)> {
    vec![
        ("noop", Handler::Noop),
        ("sleep_250us", Handler::Sleep { micros: 250 }),
        ("sleep_max", Handler::Sleep { micros: u32::MAX }),
        ("spin_1ms", Handler::Spin { micros: 1_000 }),
        ("exec_short_name", Handler::Exec { name: b"wc-l" }),
        ("exec_longest_name", Handler::Exec { name: b"resize_img.v2x" }),
        ("spec", Handler::Spec { port: 7181, spec_id: 0x0102_0304_0506_0708 }),
    ]
}

fn invalid_descriptors() -> Vec<(&'static str, [u8; 16], DescriptorError)> {
    let base = |h: Handler<'_>, edits: &[(usize, u8)]| {
        let mut d = desc(h);
        for &(at, v) in edits {
            d[at] = v;
        }
        d
    };
    use DescriptorError::*;
    vec![
        ("handler_5", base(Handler::Noop, &[(0, 5)]), UnknownHandler(5)),
        ("handler_255", base(Handler::Noop, &[(0, 255)]), UnknownHandler(255)),
        ("noop_with_argument", base(Handler::Noop, &[(15, 1)]), Malformed),
        ("sleep_reserved_byte_set", base(Handler::Sleep { micros: 1 }, &[(1, 1)]), Malformed),
        ("spin_trailing_byte_set", base(Handler::Spin { micros: 1 }, &[(8, 1)]), Malformed),
        ("exec_empty_name", base(Handler::Exec { name: b"a" }, &[(1, 0), (2, 0)]), Malformed),
        ("exec_name_length_15", base(Handler::Exec { name: b"resize_img.v2x" }, &[(1, 15)]), Malformed),
        ("exec_name_with_space", base(Handler::Exec { name: b"rm-rf" }, &[(4, b' ')]), Malformed),
        ("exec_name_with_slash", base(Handler::Exec { name: b"bin.sh" }, &[(5, b'/')]), Malformed),
        ("exec_byte_after_name", base(Handler::Exec { name: b"wc-l" }, &[(6, b'x')]), Malformed),
        ("spec_port_0", base(Handler::Spec { port: 1, spec_id: 9 }, &[(3, 0)]), Malformed),
        ("spec_byte_1_set", base(Handler::Spec { port: 1, spec_id: 9 }, &[(1, 1)]), Malformed),
        ("spec_reserved_byte_set", base(Handler::Spec { port: 1, spec_id: 9 }, &[(6, 1)]), Malformed),
    ]
}

// Frames. Addresses are documentation ranges (RFC 5737, RFC 7042): these are bytes in a
// file, never sent anywhere.
const EXECUTOR: Endpoint = Endpoint { mac: [0x00, 0x00, 0x5e, 0x00, 0x53, 0x14], ip: [198, 51, 100, 20], port: 40001 };
const AGENT: Endpoint =
    Endpoint { mac: [0x00, 0x00, 0x5e, 0x00, 0x53, 0x14], ip: [198, 51, 100, 20], port: DEFAULT_PORT };
const SCHEDULER: Endpoint =
    Endpoint { mac: [0x00, 0x00, 0x5e, 0x00, 0x53, 0x01], ip: [192, 0, 2, 1], port: DEFAULT_PORT };

/// A frame vector: either built as a host stack sends it, or as the reply to another.
enum FrameSpec {
    Sent { src: Endpoint, dst: Endpoint, ip_id: u16, message: &'static str },
    Reply { to: &'static str, message: &'static str },
}

fn frame_specs() -> Vec<(&'static str, &'static str, FrameSpec)> {
    use FrameSpec::*;
    vec![
        (
            "get_task",
            "executor's GET_TASK as the XDP program receives it",
            Sent { src: EXECUTOR, dst: SCHEDULER, ip_id: 0x1c46, message: "get_task" },
        ),
        (
            "assign_reply",
            "what the XDP program must send back (XDP_TX) for get_task when its ring holds the ASSIGN vector's entry",
            Reply { to: "get_task", message: "assign" },
        ),
        (
            "noop_reply",
            "the switch's answer to get_task when no queue has a task this executor can run",
            Reply { to: "get_task", message: "noop" },
        ),
        (
            "refill_req",
            "agent asks the switch for tasks",
            Sent { src: AGENT, dst: SCHEDULER, ip_id: 0x0001, message: "refill_req" },
        ),
        (
            "refill_two",
            "switch refills a host with two entries",
            Sent { src: SCHEDULER, dst: AGENT, ip_id: 0x0002, message: "refill_two" },
        ),
        (
            "refill_empty",
            "switch answers a REFILL_REQ with nothing to give",
            Sent { src: SCHEDULER, dst: AGENT, ip_id: 0x0003, message: "refill_empty" },
        ),
        (
            "refill_sixteen",
            "a full REFILL (the largest Bolt frame)",
            Sent { src: SCHEDULER, dst: AGENT, ip_id: 0x0004, message: "refill_sixteen" },
        ),
        (
            "get_task_wait",
            "executor's GET_TASK that may be parked at tier 2 (WAIT flag)",
            Sent { src: EXECUTOR, dst: SCHEDULER, ip_id: 0x1c47, message: "get_task_wait" },
        ),
        (
            "hint",
            "switch tells a registered host that priority 1 has work",
            Sent { src: SCHEDULER, dst: AGENT, ip_id: 0x0006, message: "hint_best_1" },
        ),
        (
            "return_one",
            "agent returns a drained entry to the switch",
            Sent { src: AGENT, dst: SCHEDULER, ip_id: 0x0005, message: "return_one" },
        ),
    ]
}

fn endpoint_json(e: &Endpoint) -> Value {
    json!({ "mac": mac_str(e.mac), "ip": ip_str(e.ip), "port": e.port })
}

fn endpoint_from_json(v: &Value) -> Endpoint {
    Endpoint { mac: parse_mac(strf(v, "mac")), ip: parse_ip(strf(v, "ip")), port: u16f(v, "port") }
}

fn frame_json(bytes: &[u8]) -> Value {
    let f = frame::parse_udp(bytes).expect("generated frames parse");
    json!({
        "len": bytes.len(), "src": endpoint_json(&f.src()), "dst": endpoint_json(&f.dst()),
        "ip_id": f.ip.id(), "ip_frag": f.ip.frag(), "ttl": f.ip.ttl, "ip_total_len": f.ip.total_len(),
        "ip_checksum": f.ip.checksum(), "udp_len": f.udp.length(), "udp_checksum": f.udp.checksum(),
        "hex": hex(bytes),
    })
}

fn invalid_frames(get_task: &[u8]) -> Vec<(&'static str, Vec<u8>, FrameError)> {
    let with = |edits: &[(usize, u8)]| {
        let mut b = get_task.to_vec();
        for &(at, v) in edits {
            b[at] = v;
        }
        b
    };
    use frame::offset::*;
    vec![
        ("cut_in_ip_header", get_task[..30].to_vec(), FrameError::Truncated),
        ("cut_in_payload", get_task[..get_task.len() - 1].to_vec(), FrameError::Truncated),
        ("vlan_tagged", with(&[(ETHERTYPE, 0x81), (ETHERTYPE + 1, 0x00)]), FrameError::NotIpv4),
        ("ipv6_ethertype", with(&[(ETHERTYPE, 0x86), (ETHERTYPE + 1, 0xdd)]), FrameError::NotIpv4),
        ("ip_options", with(&[(IP, 0x46)]), FrameError::Ipv4Options),
        ("more_fragments", with(&[(IP + 6, 0x20)]), FrameError::Fragment),
        ("tcp", with(&[(IP + 9, 6)]), FrameError::NotUdp),
        ("ip_checksum_wrong", with(&[(IP_CHECKSUM + 1, get_task[IP_CHECKSUM + 1] ^ 1)]), FrameError::BadChecksum),
        ("udp_checksum_wrong", with(&[(UDP_CHECKSUM + 1, get_task[UDP_CHECKSUM + 1] ^ 1)]), FrameError::BadChecksum),
        ("udp_length_wrong", with(&[(UDP_LEN + 1, get_task[UDP_LEN + 1] + 1)]), FrameError::BadLength),
    ]
}

// Data frames (TCP: object store and spec server).
const INPUT: ObjectRef<'static> =
    ObjectRef { name: "u2a/j7/in-0", size: 1 << 20, node: 3, store_ip: [198, 51, 100, 20], store_port: 7180 };
const OUTPUT: ObjectRef<'static> =
    ObjectRef { name: "u2a/j7/t1001", size: 5, node: 7, store_ip: [198, 51, 100, 21], store_port: 7180 };

fn data_frame_bytes(f: &DataFrame<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; f.encoded_len()];
    let n = f.encode(&mut buf).expect("vector frame encodes");
    buf.truncate(n);
    buf
}

fn valid_data_frames() -> Vec<(&'static str, Vec<u8>)> {
    let owner = JobRef::new(42, 7);
    let mut spec = vec![0u8; 256];
    let n = data::encode_spec(&mut spec, 9, "stack", &[0, 0, 0, 2], "u2a/j7/t1001", [INPUT].into_iter())
        .expect("spec encodes");
    spec.truncate(n);
    let frames = [
        ("put", DataFrame::Put { owner, name: "u2a/j7/in-0", data: b"hello" }),
        ("get", DataFrame::Get { name: "u2a/j7/in-0" }),
        ("delete_job", DataFrame::DeleteJob { owner }),
        ("stored", DataFrame::Stored { size: 5 }),
        ("object", DataFrame::Object { data: b"hello" }),
        ("deleted", DataFrame::Deleted { objects: 2, bytes: 1_048_581 }),
        ("error_missing", DataFrame::Error { code: ErrorCode::Missing, message: "no object u2a/j7/in-9" }),
        ("error_full", DataFrame::Error { code: ErrorCode::Full, message: "store full" }),
        ("spec_get", DataFrame::SpecGet { spec_id: 9 }),
        (
            "result_ok_inline",
            DataFrame::Result(TaskResult {
                spec_id: 9,
                status: STATUS_OK,
                message: "",
                output: Some(OUTPUT),
                inline: b"hello",
            }),
        ),
        (
            "result_failed",
            DataFrame::Result(TaskResult {
                spec_id: 9,
                status: STATUS_FAILED,
                message: "input u2a/j7/in-0: store 198.51.100.20:7180 unreachable",
                output: None,
                inline: b"",
            }),
        ),
        ("result_ack", DataFrame::ResultAck { spec_id: 9 }),
    ];
    let mut out: Vec<(&str, Vec<u8>)> = frames.iter().map(|(n, f)| (*n, data_frame_bytes(f))).collect();
    out.push(("spec_one_input", spec));
    out
}

fn invalid_data_frames() -> Vec<(&'static str, Vec<u8>, DataError)> {
    let valid: std::collections::HashMap<_, _> = valid_data_frames().into_iter().collect();
    let with = |name: &str, edits: &[(usize, u8)]| {
        let mut b = valid[name].clone();
        for &(at, v) in edits {
            b[at] = v;
        }
        b
    };
    let cut = |name: &str, n: usize| valid[name][..n].to_vec();
    let mut trailing = valid["get"].clone();
    trailing.push(0);
    vec![
        ("header_cut_short", cut("get", 7), DataError::Truncated),
        ("body_cut_short", cut("get", 10), DataError::Truncated),
        ("bad_magic", with("get", &[(0, 0)]), DataError::BadMagic),
        ("version_2", with("get", &[(2, 2)]), DataError::BadVersion(2)),
        ("kind_0", with("get", &[(3, 0)]), DataError::UnknownKind(0)),
        ("body_too_long", with("get", &[(4, 0x7f)]), DataError::TooLong(0x7f00_000c)),
        ("byte_after_body", trailing, DataError::BadLength),
        ("name_with_space", with("get", &[(10, b' ')]), DataError::BadName),
        ("empty_name", with("get", &[(8, 0)]), DataError::BadName),
        ("error_code_0", with("error_full", &[(8, 0)]), DataError::BadField),
        ("error_text_not_utf8", with("error_full", &[(11, 0xff)]), DataError::BadText),
        ("result_status_3", with("result_failed", &[(16, 3)]), DataError::BadField),
        ("get_name_longer_than_body", with("get", &[(8, 12)]), DataError::BadLength),
        ("result_flags_2", with("result_failed", &[(17, 2)]), DataError::BadField),
    ]
}

/// Builds the whole document from the encoders.
fn generate() -> Value {
    let message_vec = |(name, o): &(&str, Owned)| {
        let bytes = o.encode();
        let p = o.packet();
        json!({ "name": name, "op": packet_op(&p).name(), "op_code": packet_op(&p) as u8, "len": bytes.len(), "hex": hex(&bytes), "fields": fields_json(&p) })
    };
    let messages: Vec<Value> = valid_messages().iter().map(message_vec).collect();
    let internal: Vec<Value> = internal_packets().iter().map(message_vec).collect();
    let invalid: Vec<Value> = invalid_messages()
        .into_iter()
        .map(|(name, decoder, bytes, e)| json!({ "name": name, "decoder": decoder, "hex": hex(&bytes), "error": e.name() }))
        .collect();
    let descriptors = json!({
        "valid": valid_descriptors().iter().map(|(name, h)| json!({ "name": name, "hex": hex(&desc(*h)), "handler": handler_json(h) })).collect::<Vec<_>>(),
        "invalid": invalid_descriptors().iter().map(|(name, d, e)| json!({ "name": name, "hex": hex(d), "error": e.name() })).collect::<Vec<_>>(),
    });

    let by_name: std::collections::HashMap<_, _> = valid_messages().into_iter().map(|(n, o)| (n, o.encode())).collect();
    let mut built: std::collections::HashMap<&str, Vec<u8>> = Default::default();
    let mut frames = Vec::new();
    for (name, about, spec) in frame_specs() {
        let mut buf = [0u8; frame::HEADERS_LEN + MAX_MESSAGE_LEN];
        let (n, message, reply_to) = match spec {
            FrameSpec::Sent { src, dst, ip_id, message } => {
                (frame::build_udp(&mut buf, src, dst, ip_id, &by_name[message]).expect("frame fits"), message, None)
            }
            FrameSpec::Reply { to, message } => {
                let request = frame::parse_udp(&built[to]).expect("request frame parses");
                (frame::build_reply(&mut buf, &request, &by_name[message]).expect("frame fits"), message, Some(to))
            }
        };
        let mut v = frame_json(&buf[..n]);
        v["name"] = json!(name);
        v["about"] = json!(about);
        v["message"] = json!(message);
        v["reply_to"] = json!(reply_to);
        frames.push(v);
        built.insert(name, buf[..n].to_vec());
    }
    let frames_invalid: Vec<Value> = invalid_frames(&built["get_task"])
        .into_iter()
        .map(|(name, bytes, e)| json!({ "name": name, "hex": hex(&bytes), "error": e.name() }))
        .collect();

    let data_frames = json!({
        "valid": valid_data_frames().iter().map(|(name, b)| json!({ "name": name, "hex": hex(b) })).collect::<Vec<_>>(),
        "invalid": invalid_data_frames().iter().map(|(name, b, e)| json!({ "name": name, "hex": hex(b), "error": e.name() })).collect::<Vec<_>>(),
    });

    json!({
        "about": "Bolt v3 golden vectors: UDP payloads (messages, internal, invalid), task descriptors, and Ethernet/IPv4/UDP frames. Integers big-endian. Generated by scheduler-common/tests/vectors.rs; regenerate with BOLT_REGENERATE_VECTORS=1 cargo test -p scheduler-common --test vectors. Layouts: docs/protocol.md.",
        "version": VERSION,
        "port": DEFAULT_PORT,
        "decode_error_kinds": DecodeError::NAMES,
        "descriptor_error_kinds": DescriptorError::NAMES,
        "frame_error_kinds": FrameError::NAMES,
        "messages": messages,
        "internal": internal,
        "invalid": invalid,
        "descriptors": descriptors,
        "frames": frames,
        "frames_invalid": frames_invalid,
        "data_error_kinds": DataError::NAMES,
        "data_frames": data_frames,
    })
}

fn load() -> Value {
    let text = std::fs::read_to_string(vectors_path())
        .unwrap_or_else(|e| panic!("{}: {e}; generate it with {REGENERATE_VAR}=1", vectors_path().display()));
    serde_json::from_str(&text).expect("vector file is JSON")
}

// ---------------------------------------------------------------------------------------
// The tests

#[test]
fn vector_file_matches_the_encoders() {
    let generated = generate();
    if std::env::var(REGENERATE_VAR).is_ok_and(|v| v == "1") {
        let text = serde_json::to_string_pretty(&generated).expect("serializable") + "\n";
        std::fs::create_dir_all(vectors_path().parent().expect("has a parent")).expect("create tests/vectors");
        // Write then rename, so the other tests running meanwhile never read half a file.
        let tmp = vectors_path().with_extension("json.tmp");
        std::fs::write(&tmp, text).expect("write vector file");
        std::fs::rename(&tmp, vectors_path()).expect("move vector file into place");
        eprintln!("rewrote {}", vectors_path().display());
        return;
    }
    let committed = load();
    let sections = generated.as_object().expect("object").keys().cloned().collect::<Vec<_>>();
    for key in &sections {
        assert_eq!(
            committed.get(key),
            generated.get(key),
            "section {key} of {} drifted from the encoders; if the change is deliberate, rerun with {REGENERATE_VAR}=1 and review the diff",
            vectors_path().display()
        );
    }
    assert_eq!(committed.as_object().map(Map::len), Some(sections.len()), "unexpected sections in the vector file");
}

#[test]
fn valid_vectors_decode_to_their_fields_and_reencode_to_their_bytes() {
    let doc = load();
    let mut ops_seen = std::collections::HashSet::new();
    for (section, internal) in [("messages", false), ("internal", true)] {
        for v in arr(&doc, section) {
            let name = strf(v, "name");
            let bytes = unhex(strf(v, "hex"));
            assert_eq!(bytes.len() as u64, num(v, "len"), "{name}: len");
            let packet = decode_packet(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            let op = packet_op(&packet);
            assert_eq!((op.name(), op as u64), (strf(v, "op"), num(v, "op_code")), "{name}: op");
            assert_eq!(op.is_internal(), internal, "{name}: in the wrong section");
            match (decode(&bytes), packet) {
                (Ok(m), Packet::External(pm)) => assert_eq!(m, pm, "{name}: decode and decode_packet differ"),
                (Err(DecodeError::InternalOp(_)), _) if internal => {}
                (other, _) => panic!("{name}: decode gave {other:?}"),
            }
            assert_eq!(fields_json(&packet), v["fields"], "{name}: decoded fields");
            let rebuilt = owned_from_json(strf(v, "op"), &v["fields"]).encode();
            assert_eq!(hex(&rebuilt), hex(&bytes), "{name}: encoding the stated fields");
            ops_seen.insert(op as u8);
        }
    }
    let all: std::collections::HashSet<u8> = Op::ALL.iter().map(|&op| op as u8).collect();
    assert_eq!(ops_seen, all, "every op has a vector");
}

#[test]
fn invalid_vectors_fail_with_their_kind() {
    let doc = load();
    let mut kinds_seen = std::collections::HashSet::new();
    for v in arr(&doc, "invalid") {
        let name = strf(v, "name");
        let bytes = unhex(strf(v, "hex"));
        let got = match strf(v, "decoder") {
            "decode" => {
                let got = decode(&bytes).map(|m| format!("{m:?}"));
                // What a port refuses, the pipeline may accept only if it is internal.
                if let Ok(p) = decode_packet(&bytes) {
                    assert!(matches!(got, Err(DecodeError::InternalOp(_))), "{name}: decode_packet accepted {p:?}");
                }
                got
            }
            "decode_packet" => decode_packet(&bytes).map(|p| format!("{p:?}")),
            other => panic!("{name}: unknown decoder {other}"),
        };
        let err = got.expect_err(name);
        assert_eq!(err.name(), strf(v, "error"), "{name}: {err}");
        kinds_seen.insert(err.name());
    }
    assert_eq!(kinds_seen.len(), DecodeError::KINDS, "every error kind has a vector: saw {kinds_seen:?}");
    let names: Vec<&str> = arr(&doc, "decode_error_kinds").iter().filter_map(Value::as_str).collect();
    assert_eq!(names, DecodeError::NAMES, "counter names in the file");
}

#[test]
fn descriptor_vectors() {
    let doc = load();
    let d = &doc["descriptors"];
    for v in arr(d, "valid") {
        let name = strf(v, "name");
        let bytes: [u8; 16] = unhex(strf(v, "hex")).try_into().expect("16 bytes");
        let h = Handler::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(handler_json(&h), v["handler"], "{name}");
        assert_eq!(handler_from_json(&v["handler"]).encode(), Ok(bytes), "{name}: re-encoding");
    }
    let mut kinds = std::collections::HashSet::new();
    for v in arr(d, "invalid") {
        let name = strf(v, "name");
        let bytes: [u8; 16] = unhex(strf(v, "hex")).try_into().expect("16 bytes");
        let err = Handler::decode(&bytes).expect_err(name);
        assert_eq!(err.name(), strf(v, "error"), "{name}");
        kinds.insert(err.name());
    }
    assert_eq!(kinds.len(), DescriptorError::KINDS);
}

#[test]
fn frame_vectors() {
    let doc = load();
    let messages: std::collections::HashMap<&str, Vec<u8>> =
        arr(&doc, "messages").iter().map(|v| (strf(v, "name"), unhex(strf(v, "hex")))).collect();
    let mut frames: std::collections::HashMap<&str, Vec<u8>> = Default::default();
    for v in arr(&doc, "frames") {
        let name = strf(v, "name");
        let bytes = unhex(strf(v, "hex"));
        let f = frame::parse_udp(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (src, dst) = (endpoint_from_json(&v["src"]), endpoint_from_json(&v["dst"]));
        assert_eq!((f.src(), f.dst()), (src, dst), "{name}: addresses");
        assert_eq!(
            (f.ip.id(), f.ip.frag(), f.ip.ttl, f.ip.total_len(), f.udp.length()),
            (u16f(v, "ip_id"), u16f(v, "ip_frag"), u8f(v, "ttl"), u16f(v, "ip_total_len"), u16f(v, "udp_len")),
            "{name}: header fields"
        );
        assert_eq!((f.ip.checksum(), f.udp.checksum()), (u16f(v, "ip_checksum"), u16f(v, "udp_checksum")), "{name}");
        assert_eq!(frame::ipv4_checksum(f.ip), f.ip.checksum(), "{name}: IPv4 checksum");
        let payload = &messages[strf(v, "message")];
        assert_eq!(f.payload, &payload[..], "{name}: payload is the {} vector", strf(v, "message"));
        decode(f.payload).unwrap_or_else(|e| panic!("{name}: payload: {e}"));

        let mut buf = [0u8; frame::HEADERS_LEN + MAX_MESSAGE_LEN];
        let n = match v["reply_to"].as_str() {
            None => frame::build_udp(&mut buf, src, dst, f.ip.id(), payload).expect("fits"),
            Some(to) => {
                let request = frame::parse_udp(&frames[to]).expect("request parses");
                assert_eq!((f.src(), f.dst()), (request.dst(), request.src()), "{name}: reply swaps the ends");
                assert_eq!(f.udp.checksum(), 0, "{name}: replies carry no UDP checksum");
                frame::build_reply(&mut buf, &request, payload).expect("fits")
            }
        };
        assert_eq!(hex(&buf[..n]), hex(&bytes), "{name}: rebuilt frame");
        frames.insert(name, bytes);
    }
    let mut kinds = std::collections::HashSet::new();
    for v in arr(&doc, "frames_invalid") {
        let name = strf(v, "name");
        let err = frame::parse_udp(&unhex(strf(v, "hex"))).expect_err(name);
        assert_eq!(err.name(), strf(v, "error"), "{name}");
        kinds.insert(err.name());
    }
    assert_eq!(kinds.len(), FrameError::KINDS, "every frame error kind has a vector");
}

/// Bytes written out by hand from the layout tables in docs/protocol.md, not by the
/// encoders: if an encoder and the decoder agreed on a wrong layout, this catches it.
#[test]
fn data_frame_vectors() {
    let doc = load();
    let d = &doc["data_frames"];
    for v in arr(d, "valid") {
        let bytes = unhex(strf(v, "hex"));
        let f = data::decode_frame(&bytes).unwrap_or_else(|e| panic!("{}: {e}", strf(v, "name")));
        assert_eq!(data_frame_bytes(&f), bytes, "{} re-encodes", strf(v, "name"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for v in arr(d, "invalid") {
        let e = data::decode_frame(&unhex(strf(v, "hex"))).expect_err(strf(v, "name"));
        assert_eq!(e.name(), strf(v, "error"), "{}", strf(v, "name"));
        seen.insert(e.name());
    }
    // Hand-assembled from docs/protocol.md: header magic b017, version 05, kind, body_len.
    let find =
        |name: &str| arr(d, "valid").iter().find(|v| strf(v, "name") == name).map(|v| strf(v, "hex").to_string());
    let get = concat!("b017", "05", "02", "0000000c", "0b", "7532612f6a372f696e2d30");
    assert_eq!(find("get").as_deref(), Some(get));
    let result_ack = concat!("b017", "05", "0b", "00000008", "0000000000000009");
    assert_eq!(find("result_ack").as_deref(), Some(result_ack));
    // RESULT: spec_id, status, flags (01: output ref follows), text len + text, ref (node,
    // store ip, store port, size, name len, name), inline len, inline bytes.
    let result = concat!(
        "b017",
        "05",
        "0a",
        "00000032",
        "0000000000000009",
        "00",
        "01",
        "0000",
        "0007",
        "c6336415",
        "1c0c",
        "0000000000000005",
        "0c",
        "7532612f6a372f7431303031",
        "00000005",
        "68656c6c6f"
    );
    assert_eq!(find("result_ok_inline").as_deref(), Some(result));
    assert!(seen.len() >= 8, "invalid data frames cover most kinds: {seen:?}");
}

#[test]
fn hand_assembled_bytes_match_the_vectors() {
    let doc = load();
    let find = |name: &str| {
        arr(&doc, "messages")
            .iter()
            .chain(arr(&doc, "internal"))
            .find(|v| strf(v, "name") == name)
            .map(|v| strf(v, "hex").to_string())
            .unwrap_or_else(|| panic!("no vector {name}"))
    };
    // Header: magic b017, version 05, op, count, prio, rsrc, flags.
    let get_task = concat!("b017", "05", "02", "00", "01", "03", "00", "0007", "0003", "00000102");
    assert_eq!(find("get_task"), get_task);
    let noop = concat!("b017", "05", "04", "00", "00", "00", "00", "0007", "0003", "00000102");
    assert_eq!(find("noop"), noop);
    // ENTRY: uid, jid, TASK (tid, prio, rsrc, class, flags, desc), client ip, port, pad.
    let sleep_250 = concat!("01", "000000", "000000fa", "0000000000000000");
    let entry =
        ["0000002a", "00000007", "000003e9", "02", "03", "03", "00", sleep_250, "cb007105", "238c", "0000"].concat();
    assert_eq!(find("assign"), ["b017", "05", "03", "01", "00", "00", "00", entry.as_str()].concat());
    assert_eq!(find("return_one"), ["b017", "05", "09", "01", "00", "00", "00", entry.as_str()].concat());
    assert_eq!(find("refill_empty"), "b017050800000000");
    // A gang job's tasks: flags 03 (EXACTLY_ONCE | GANG).
    let gang_task = |tid: &str| ["0000", tid, "01", "00", "00", "03", sleep_250].concat();
    let gang =
        ["b017", "05", "01", "02", "00", "00", "00", "0000002a", "00000008", &gang_task("044d"), &gang_task("044e")];
    assert_eq!(find("submit_gang_of_two"), gang.concat());
    // BEST in header prio of what tier 2 sends; WAIT (04) in GET_TASK's flags.
    assert_eq!(find("hint_best_1"), "b017050e00010000");
    assert_eq!(find("assign_from_tier2_best_1"), ["b017", "05", "03", "01", "01", "00", "00", entry.as_str()].concat());
    assert_eq!(find("get_task_wait"), concat!("b017", "05", "02", "00", "02", "01", "04", "0007", "0004", "00000009"));
    // COMPLETE: uid, jid, tid, status, pad, node, executor, pad2, run_ns, start_unix_ns,
    // output_len.
    let complete = concat!(
        "b017",
        "05",
        "05",
        "00",
        "00",
        "00",
        "00",
        "0000002a",
        "00000007",
        "000003e9",
        "00",
        "00",
        "0007",
        "0003",
        "0000",
        "0003d5c9",
        "187a2b1b39a2007b",
        "0000000000001000"
    );
    assert_eq!(find("complete_ok"), complete);
    let refill_req = concat!("b017", "05", "07", "00", "00", "03", "00", "0007", "10", "00");
    assert_eq!(find("refill_req"), refill_req);
    // RECALL (op 23 = 0x17): BEST in prio, the waiting executor's resources in rsrc, then
    // REFILL_REQ's body (node, want, pad).
    let recall = concat!("b017", "05", "17", "00", "02", "03", "00", "0007", "01", "00");
    assert_eq!(find("recall"), recall);
    let repair = concat!("b017", "05", "0b", "00", "04", "00", "00", "01", "000000", "00020003");
    assert_eq!(find("repair_retrieve_ptr"), repair);
    let swap = ["b017", "05", "0a", "00", "02", "03", "00", "00000012", "00000011", entry.as_str()].concat();
    assert_eq!(find("swap"), swap);
    // PIN (op 21 = 0x15): SUBMIT's body; MOVABLE (08) and EXACTLY_ONCE (02) in its flags.
    let sleep_task = ["000003e9", "02", "03", "03", "00", sleep_250].concat();
    let pin = ["b017", "05", "15", "01", "00", "00", "0a", "0000002a", "00000007", sleep_task.as_str()].concat();
    assert_eq!(find("pin_movable_exactly_once"), pin);
    // GET_BUNDLE (op 22 = 0x16): GET_TASK's header, the Requester, want, three zero bytes.
    let get_bundle = concat!("b017", "05", "16", "00", "01", "03", "00", "0007", "0003", "00000103", "0a", "000000");
    assert_eq!(find("get_bundle"), get_bundle);
    let bundle_wait = concat!("b017", "05", "16", "00", "02", "00", "04", "0007", "0004", "0000000a", "02", "000000");
    assert_eq!(find("get_bundle_wait_want_2"), bundle_wait);
    // A bundle's ASSIGN: count 2, BEST 2, two ENTRYs back to back in the order to run.
    let bundle = find("assign_bundle_of_two_best_2");
    assert_eq!(&bundle[..16], "b017050302020000");
    assert_eq!(bundle.len(), 2 * (8 + 2 * Entry::LEN));
    assert_eq!(find("refill_two")[16..], bundle[16..], "the same two entries as refill_two");
}

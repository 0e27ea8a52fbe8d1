//! Fails when p4/bolt.p4 and scheduler-common disagree: header field names, widths and
//! order for every layout the P4 program parses, the protocol constants, the list and
//! stack sizes, the priority and queue geometry, and the message lengths it checks and
//! writes. bolt.p4 is read as text; Rust has no reflection, so each layout's fields are
//! listed here once, and `offset_of!`/`size_of` check that list against the structs so
//! the list itself cannot drift. The front-panel parser is also run, state by state, on
//! messages built by scheduler-common's encoders with one byte changed, and must refuse
//! exactly what `decode()` refuses, under the same `DecodeError` index.

use std::collections::{BTreeMap, BTreeSet};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;

use scheduler_common::{
    decode, decode_packet, encode_assign, encode_assign_list, encode_claim, encode_claim_reply, encode_complete,
    encode_get_bundle, encode_get_task, encode_hint, encode_noop, encode_pin, encode_queue_full, encode_recall,
    encode_refill, encode_refill_req, encode_repair, encode_return, encode_steal, encode_steal_grant, encode_submit,
    message_len, BundleRequest, Claim, Completion, DecodeError, Entry, Header, JobRef, Op, RefillRequest, RepairState,
    Requester, StealBody, SwapState, Task, CLAIM_DENIED, CLAIM_GRANTED, DEFAULT_PORT, DEFAULT_PRIORITIES, FLAG_MOVABLE,
    FLAG_RESUBMIT, GET_TASK_FLAGS, KNOWN_TASK_FLAGS, MAGIC, MAX_BUNDLE, MAX_LIST, MAX_MESSAGE_LEN, MAX_PRIORITIES,
    MIN_BUNDLE, PIN_FLAGS, REPAIR_ADD_PTR, REPAIR_RETRIEVE_PTR, STATUS_FAILED, STEAL_ABORT, SUBMIT_FLAGS,
    TASK_FLAG_EXACTLY_ONCE, VERSION,
};
use scheduler_user::queue::{DRIFT_LIMIT, TOFINO_QUEUE_CAPACITY};

fn p4_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../p4")
}

fn read(name: &str) -> String {
    let path = p4_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// bolt.p4 with the `.p4` parts it includes (headers, parser, ingress, egress) put in
/// place, as the preprocessor does; the `.p4inc` tables stay includes (one test reads
/// them on their own). Every `.p4` file in p4/ must be one of the parts.
fn program() -> String {
    fn expand(name: &str, seen: &mut Vec<String>) -> String {
        assert!(!seen.contains(&name.to_string()), "{name} included twice");
        seen.push(name.to_string());
        read(name)
            .lines()
            .map(|line| match line.trim().strip_prefix("#include \"").and_then(|r| r.strip_suffix(".p4\"")) {
                Some(part) => expand(&format!("{part}.p4"), seen),
                None => format!("{line}\n"),
            })
            .collect()
    }
    let mut seen = Vec::new();
    let src = expand("bolt.p4", &mut seen);
    let mut files: Vec<String> = std::fs::read_dir(p4_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".p4"))
        .collect();
    files.sort();
    seen.sort();
    assert_eq!(files, seen, "a .p4 file in p4/ that bolt.p4 does not include");
    src
}

/// The source without comments.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b..].find("*/").expect("unterminated comment") + b + 2;
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            _ => unreachable!(),
        }
    }
}

fn parse_int(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("not an integer literal: {s:?} ({e})"))
}

struct P4 {
    src: String,
}

impl P4 {
    fn load() -> P4 {
        P4 { src: strip_comments(&program()) }
    }

    /// Fields of `header NAME { ... }` as (name, width in bits), in order.
    fn header(&self, name: &str) -> Vec<(String, u32)> {
        let open = format!("header {name} {{");
        let start = self.src.find(&open).unwrap_or_else(|| panic!("bolt.p4 declares no header {name}"));
        let body = &self.src[start + open.len()..];
        let body = &body[..body.find('}').expect("unterminated header")];
        body.split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| {
                let (ty, field) = f.rsplit_once(char::is_whitespace).expect("field without a name");
                let width = ty
                    .trim()
                    .strip_prefix("bit<")
                    .and_then(|w| w.strip_suffix('>'))
                    .unwrap_or_else(|| panic!("header {name}: field {field} is not bit<N>: {ty}"));
                (field.to_string(), parse_int(width) as u32)
            })
            .collect()
    }

    /// `const T NAME = VALUE;` declarations.
    fn consts(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for stmt in self.src.split(';') {
            // The declaration starts a line; preprocessor lines may come before it.
            let Some(decl) = stmt.lines().map(str::trim).find(|l| l.starts_with("const ")) else {
                continue;
            };
            let decl = &decl["const ".len()..];
            let Some((lhs, value)) = decl.split_once('=') else { continue };
            let name = lhs.split_whitespace().last().expect("const without a name");
            let value = value.trim();
            // Literals only; expressions over macros (QUEUE_LEVELS) are checked elsewhere.
            let literal = |v: &str| v.trim().chars().all(|c| c.is_ascii_hexdigit() || c == 'x' || c == 'X');
            if literal(value) {
                out.insert(name.to_string(), parse_int(value));
            }
        }
        out
    }

    fn define(&self, name: &str) -> u64 {
        let key = format!("#define {name} ");
        let line = self.src.lines().find(|l| l.trim_start().starts_with(&key)).unwrap_or_else(|| panic!("no {key}"));
        parse_int(line.trim_start()[key.len()..].trim())
    }

    /// The declarations of `struct NAME { ... }` as (type, name).
    fn struct_fields(&self, name: &str) -> Vec<(String, String)> {
        let open = format!("struct {name} {{");
        let start = self.src.find(&open).unwrap_or_else(|| panic!("bolt.p4 declares no struct {name}"));
        let body = &self.src[start + open.len()..];
        let body = &body[..body.find('}').expect("unterminated struct")];
        body.split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| {
                let (ty, field) = f.rsplit_once(char::is_whitespace).expect("field without a name");
                (ty.trim().to_string(), field.to_string())
            })
            .collect()
    }
}

/// One field of a scheduler-common layout and the P4 fields that carry it.
struct Field {
    rust: &'static str,
    offset: usize,
    bytes: usize,
    p4: Vec<(&'static str, u32)>,
}

macro_rules! field {
    ($ty:ty, $f:ident, $bytes:expr, [$(($name:expr, $bits:expr)),* $(,)?]) => {
        Field { rust: stringify!($f), offset: offset_of!($ty, $f), bytes: $bytes, p4: vec![$(($name, $bits)),*] }
    };
}

/// Checks that `fields` tile the Rust struct exactly (so the list is complete and in
/// order), then that the P4 header has the same fields with the same widths.
fn check_layout(p4: &P4, rust: &str, size: usize, len: usize, fields: &[Field], header: &str) {
    assert_eq!(size, len, "{rust}: size_of differs from {rust}::LEN");
    let mut at = 0;
    for f in fields {
        assert_eq!(f.offset, at, "{rust}.{}: the field list here is out of order or incomplete", f.rust);
        let bits: u32 = f.p4.iter().map(|(_, b)| b).sum();
        assert_eq!(bits as usize, f.bytes * 8, "{rust}.{}: P4 fields do not add up to its {} bytes", f.rust, f.bytes);
        at += f.bytes;
    }
    assert_eq!(at, size, "{rust}: the field list here does not cover all {size} bytes");
    let expected: Vec<(String, u32)> =
        fields.iter().flat_map(|f| f.p4.iter().map(|(n, b)| (n.to_string(), *b))).collect();
    assert_eq!(p4.header(header), expected, "bolt.p4 header {header} does not match {rust}");
}

fn header_fields() -> Vec<Field> {
    vec![
        field!(Header, magic, 2, [("magic", 16)]),
        field!(Header, version, 1, [("version", 8)]),
        field!(Header, op, 1, [("op", 8)]),
        field!(Header, count, 1, [("count", 8)]),
        field!(Header, prio, 1, [("prio", 8)]),
        field!(Header, rsrc, 1, [("rsrc", 8)]),
        field!(Header, flags, 1, [("flags", 8)]),
    ]
}

fn task_fields() -> Vec<Field> {
    vec![
        field!(Task, tid, 4, [("tid", 32)]),
        field!(Task, prio, 1, [("prio", 8)]),
        field!(Task, rsrc, 1, [("rsrc", 8)]),
        field!(Task, class, 1, [("class", 8)]),
        field!(Task, flags, 1, [("flags", 8)]),
        field!(Task, desc, 16, [("desc_0", 32), ("desc_1", 32), ("desc_2", 32), ("desc_3", 32)]),
    ]
}

fn entry_fields() -> Vec<Field> {
    // P4 headers cannot nest: the TASK inside an ENTRY is flattened in place.
    let task: Vec<(&'static str, u32)> = task_fields().into_iter().flat_map(|f| f.p4).collect();
    vec![
        field!(Entry, uid, 4, [("uid", 32)]),
        field!(Entry, jid, 4, [("jid", 32)]),
        Field { rust: "task", offset: offset_of!(Entry, task), bytes: Task::LEN, p4: task },
        field!(Entry, client_ip, 4, [("client_ip", 32)]),
        field!(Entry, client_port, 2, [("client_port", 16)]),
        field!(Entry, pad, 2, [("pad", 16)]),
    ]
}

#[test]
fn bolt_header_task_and_entry_match_scheduler_common() {
    let p4 = P4::load();
    check_layout(&p4, "Header", size_of::<Header>(), Header::LEN, &header_fields(), "bolt_h");
    check_layout(&p4, "Task", size_of::<Task>(), Task::LEN, &task_fields(), "task_h");
    check_layout(&p4, "Entry", size_of::<Entry>(), Entry::LEN, &entry_fields(), "entry_h");
}

#[test]
fn message_bodies_match_scheduler_common() {
    let p4 = P4::load();
    check_layout(
        &p4,
        "JobRef",
        size_of::<JobRef>(),
        JobRef::LEN,
        &[field!(JobRef, uid, 4, [("uid", 32)]), field!(JobRef, jid, 4, [("jid", 32)])],
        "job_ref_h",
    );
    check_layout(
        &p4,
        "Requester",
        size_of::<Requester>(),
        Requester::LEN,
        &[
            field!(Requester, node, 2, [("node", 16)]),
            field!(Requester, executor, 2, [("executor", 16)]),
            field!(Requester, seq, 4, [("seq", 32)]),
        ],
        "requester_h",
    );
    // GET_BUNDLE's body: the Requester (requester_h), then want and pad (bundle_h).
    assert_eq!(offset_of!(BundleRequest, from), 0);
    assert_eq!(offset_of!(BundleRequest, want), Requester::LEN);
    assert_eq!(p4.header("bundle_h"), vec![("want".to_string(), 8), ("pad".to_string(), 24)]);
    assert_eq!(Requester::LEN + 4, BundleRequest::LEN);
    check_layout(
        &p4,
        "RefillRequest",
        size_of::<RefillRequest>(),
        RefillRequest::LEN,
        &[
            field!(RefillRequest, node, 2, [("node", 16)]),
            field!(RefillRequest, want, 1, [("want", 8)]),
            field!(RefillRequest, waiting, 1, [("waiting", 8)]),
        ],
        "refill_request_h",
    );
    check_layout(
        &p4,
        "RepairState",
        size_of::<RepairState>(),
        RepairState::LEN,
        &[
            field!(RepairState, target, 1, [("target", 8)]),
            field!(RepairState, pad, 3, [("pad", 24)]),
            field!(RepairState, value, 4, [("value", 32)]),
        ],
        "repair_state_h",
    );
    // COMPLETE goes from executor to client; the switch parses it only to refuse what
    // decode() refuses (status, pads) before counting it as wrong direction.
    check_layout(
        &p4,
        "Completion",
        size_of::<Completion>(),
        Completion::LEN,
        &[
            field!(Completion, uid, 4, [("uid", 32)]),
            field!(Completion, jid, 4, [("jid", 32)]),
            field!(Completion, tid, 4, [("tid", 32)]),
            field!(Completion, status, 1, [("status", 8)]),
            field!(Completion, pad, 1, [("pad", 8)]),
            field!(Completion, node, 2, [("node", 16)]),
            field!(Completion, executor, 2, [("executor", 16)]),
            field!(Completion, pad2, 2, [("pad2", 16)]),
            field!(Completion, run_ns, 4, [("run_ns", 32)]),
            field!(Completion, start_unix_ns, 8, [("start_unix_ns", 64)]),
            field!(Completion, output_len, 8, [("output_len", 64)]),
        ],
        "completion_h",
    );
    // CLAIM and CLAIM_REPLY go between executor and client; validated, then refused.
    check_layout(
        &p4,
        "Claim",
        size_of::<Claim>(),
        Claim::LEN,
        &[
            field!(Claim, uid, 4, [("uid", 32)]),
            field!(Claim, jid, 4, [("jid", 32)]),
            field!(Claim, tid, 4, [("tid", 32)]),
            field!(Claim, node, 2, [("node", 16)]),
            field!(Claim, executor, 2, [("executor", 16)]),
            field!(Claim, verdict, 1, [("verdict", 8)]),
            field!(Claim, pad, 3, [("pad", 24)]),
        ],
        "claim_h",
    );
    // STEAL_* go between agents; validated, then refused.
    check_layout(
        &p4,
        "StealBody",
        size_of::<StealBody>(),
        StealBody::LEN,
        &[
            field!(StealBody, node, 2, [("node", 16)]),
            field!(StealBody, want, 1, [("want", 8)]),
            field!(StealBody, verdict, 1, [("verdict", 8)]),
            field!(StealBody, seq, 4, [("seq", 32)]),
            field!(StealBody, load, 4, [("load", 32)]),
        ],
        "steal_h",
    );
}

#[test]
fn swap_state_is_swap_state_h_followed_by_the_held_entry() {
    let p4 = P4::load();
    // SwapState = swap_idx, pkt_retrieve_ptr, held: the first two in swap_state_h, the
    // held ENTRY in an entry_h right after it.
    let fixed = [
        field!(SwapState, swap_idx, 4, [("swap_idx", 32)]),
        field!(SwapState, pkt_retrieve_ptr, 4, [("pkt_retrieve_ptr", 32)]),
    ];
    let held = offset_of!(SwapState, held);
    assert_eq!(held, 8);
    assert_eq!(held + Entry::LEN, size_of::<SwapState>());
    assert_eq!(size_of::<SwapState>(), SwapState::LEN);
    check_layout(&p4, "SwapState without held", held, held, &fixed, "swap_state_h");

    let fields = p4.struct_fields("headers_t");
    let at = fields.iter().position(|(_, n)| n == "swap_state").expect("headers_t has no swap_state");
    assert_eq!(fields[at], ("swap_state_h".to_string(), "swap_state".to_string()));
    assert_eq!(fields[at + 1], ("entry_h".to_string(), "swap_held".to_string()), "held must follow swap_state");
    // ...and the deparser emits them back to back.
    let emits: Vec<&str> = p4.src.lines().filter_map(|l| l.trim().strip_prefix("pkt.emit(hdr.")).collect();
    let s = emits.iter().position(|e| e.starts_with("swap_state)")).expect("swap_state is never emitted");
    assert!(emits[s + 1].starts_with("swap_held)"), "swap_held must be emitted right after swap_state");
}

#[test]
fn protocol_constants_match() {
    let c = P4::load().consts();
    let get = |n: &str| *c.get(n).unwrap_or_else(|| panic!("bolt.p4 has no const {n}"));
    assert_eq!(get("BOLT_PORT"), DEFAULT_PORT as u64);
    assert_eq!(get("BOLT_MAGIC"), MAGIC as u64);
    assert_eq!(get("BOLT_VERSION"), VERSION as u64);
    assert_eq!(get("MAX_LIST"), MAX_LIST as u64);
    assert_eq!(get("MAX_PRIORITIES"), MAX_PRIORITIES as u64);
    assert_eq!(get("DEFAULT_PRIORITIES"), DEFAULT_PRIORITIES as u64);
    assert_eq!(get("SUBMIT_FLAGS"), SUBMIT_FLAGS as u64);
    assert_eq!(get("GET_TASK_FLAGS"), GET_TASK_FLAGS as u64);
    assert_eq!(get("PIN_FLAGS"), PIN_FLAGS as u64);
    assert_eq!(get("KNOWN_TASK_FLAGS"), KNOWN_TASK_FLAGS as u64);
    assert_eq!(get("REPAIR_ADD_PTR"), REPAIR_ADD_PTR as u64);
    assert_eq!(get("REPAIR_RETRIEVE_PTR"), REPAIR_RETRIEVE_PTR as u64);
    assert_eq!(get("DRIFT_LIMIT"), DRIFT_LIMIT as u64);
    for op in Op::ALL {
        assert_eq!(get(&format!("OP_{}", op.name())), op as u64, "op code of {}", op.name());
    }
    let op_consts = c.keys().filter(|k| k.starts_with("OP_")).count();
    assert_eq!(op_consts, Op::ALL.len(), "bolt.p4 defines op codes the protocol does not have");
    assert_eq!(get("DECODE_ERROR_KINDS"), DecodeError::KINDS as u64);
    for (index, name) in DecodeError::NAMES.iter().enumerate() {
        assert_eq!(get(&format!("DE_{}", name.to_uppercase())), index as u64, "DecodeError {name}");
    }
}

/// One list item in PHV per pass: headers_t holds no header stack, the items a pass can
/// hold are single headers (the task or entry it enqueues, the entry it dequeued, the
/// entry a SWAP holds), and no path through the ingress parser extracts more than one
/// list item (the rest of a list is payload). The graph has no loop, so nothing unrolls.
#[test]
fn a_pass_holds_at_most_one_list_item() {
    let p4 = P4::load();
    let fields = p4.struct_fields("headers_t");
    let stacks: Vec<_> = fields.iter().filter(|(ty, _)| ty.contains('[')).collect();
    assert!(stacks.is_empty(), "header stacks hold whole lists in PHV: {stacks:?}");
    let decl = |name: &str| -> String {
        fields.iter().find(|(_, n)| n == name).unwrap_or_else(|| panic!("headers_t has no {name}")).0.clone()
    };
    assert_eq!(decl("task_cur"), "task_h");
    for e in ["entry_cur", "entry_out", "swap_held"] {
        assert_eq!(decl(e), "entry_h");
    }
    // List items: every TASK or ENTRY header but the one a SWAP holds (SwapState's body).
    let items: BTreeSet<String> = fields
        .iter()
        .filter(|(ty, n)| (ty == "task_h" || ty == "entry_h") && n != "swap_held")
        .map(|(_, n)| n.clone())
        .collect();
    assert_eq!(items.len(), 3, "{items:?}");
    let runner = ParserRunner::load();
    // Every path from start: (state, list items extracted so far, states on the path).
    let mut todo = vec![("start".to_string(), 0usize, vec!["start".to_string()])];
    let mut paths = 0;
    while let Some((state, held, path)) = todo.pop() {
        let s = &runner.states[&state];
        let held = held
            + s.stmts
                .iter()
                .filter_map(|st| st.strip_prefix("pkt.extract(hdr.").and_then(|h| h.strip_suffix(')')))
                .filter(|h| items.contains(*h))
                .count();
        assert!(held <= 1, "parser path {path:?} extracts {held} list items");
        for (_, next) in &s.arms {
            if next == "accept" || next == "reject" {
                paths += 1;
                continue;
            }
            assert!(!path.contains(next), "parser loop through {next}: {path:?}");
            let mut p = path.clone();
            p.push(next.clone());
            todo.push((next.clone(), held, p));
        }
    }
    assert!(paths > 20, "only {paths} parser paths walked");
    // The deparser emits each header once, no stack.
    let dep = &p4.src[p4.src.find("control BoltIngressDeparser").expect("no ingress deparser")..];
    let dep = &dep[..dep.find("\n}\n").unwrap_or(dep.len())];
    for item in &items {
        assert_eq!(dep.matches(&format!("pkt.emit(hdr.{item});")).count(), 1, "{item} emitted once");
    }

    let levels = 1u64 << p4.define("QUEUE_LEVEL_BITS");
    assert_eq!(levels, DEFAULT_PRIORITIES as u64, "compiled levels differ from the default priority count");
    assert!(levels <= MAX_PRIORITIES as u64);
    let capacity = 1u64 << p4.define("QUEUE_INDEX_BITS");
    assert_eq!(capacity, TOFINO_QUEUE_CAPACITY as u64, "compiled capacity differs from the model's Tofino geometry");

    // is_repairing: bit 2l for add_ptr, 2l+1 for retrieve_ptr, every wire priority.
    let table = &p4.src[p4.src.find("table repair_flag_mask").expect("no repair_flag_mask table")..];
    let table = &table[table.find("const entries").expect("repair_flag_mask has no const entries")..];
    let table = &table[table.find('{').unwrap() + 1..table.find('}').unwrap()];
    let mut found = BTreeMap::new();
    for entry in table.split(';').map(str::trim).filter(|e| e.starts_with('(')) {
        let (key, action) = entry.split_once(':').unwrap();
        let key = key.trim().trim_start_matches('(').trim_end_matches(')');
        let (level, kind) = key.split_once(',').unwrap();
        let mask = action.trim().trim_start_matches("set_flag_mask(").trim_end_matches(')');
        found.insert((parse_int(level), parse_int(kind)), parse_int(mask));
    }
    let expected: BTreeMap<(u64, u64), u64> =
        (0..MAX_PRIORITIES as u64).flat_map(|l| [((l, 0), 1 << (2 * l)), ((l, 1), 1 << (2 * l + 1))]).collect();
    assert_eq!(found, expected);
}

/// The counts `decode` accepts for `op`, found by asking it.
fn accepted_counts(op: Op) -> BTreeSet<u8> {
    (0..=MAX_LIST as u8 + 1)
        .filter(|&count| {
            let len = message_len(op, count as usize);
            let mut buf = vec![0u8; len];
            // Only GET_TASK and GET_BUNDLE give the header's prio a meaning; elsewhere it
            // must be zero.
            let prio = if matches!(op, Op::GetTask | Op::GetBundle) { 1 } else { 0 };
            buf[..Header::LEN].copy_from_slice(scheduler_common::as_bytes(&Header::new(op, count, prio, 0, 0)));
            let body = &mut buf[Header::LEN..];
            // Valid content where decode checks it: priorities 1, REFILL_REQ and STEAL_REQ
            // want 1, STEAL_DONE verdict 1.
            match op {
                Op::Submit | Op::QueueFull | Op::Pin => {
                    (0..count as usize).for_each(|i| body[JobRef::LEN + i * Task::LEN + 4] = 1)
                }
                Op::Assign | Op::Refill | Op::Return => (0..count as usize).for_each(|i| body[i * Entry::LEN + 12] = 1),
                Op::StealGrant => (0..count as usize).for_each(|i| body[StealBody::LEN + i * Entry::LEN + 12] = 1),
                Op::RefillReq | Op::StealReq | Op::Recall => body[2] = 1,
                Op::StealDone => body[3] = 1,
                Op::GetBundle => body[Requester::LEN] = MIN_BUNDLE,
                Op::ClaimReply => body[16] = CLAIM_GRANTED,
                _ => {}
            }
            match decode(&buf) {
                Ok(_) => true,
                Err(DecodeError::BadCount(_)) => false,
                Err(e) => panic!("{} count {count}: unexpected {e}", op.name()),
            }
        })
        .collect()
}

#[test]
fn message_length_table_matches_message_len() {
    let text = strip_comments(&read("message_lengths.p4inc"));
    let mut table: BTreeMap<(String, u8), usize> = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, action) = line.split_once(':').unwrap_or_else(|| panic!("bad line {line:?}"));
        let key = key.trim().trim_start_matches('(').trim_end_matches(')');
        let (op, count) = key.split_once(',').unwrap();
        let len = action.trim().trim_start_matches("set_message_length(").trim_end_matches(");");
        let prev = table.insert((op.trim().to_string(), parse_int(count) as u8), parse_int(len) as usize);
        assert!(prev.is_none(), "duplicate entry {line:?}");
    }
    let mut expected = BTreeMap::new();
    for op in Op::ALL.into_iter().filter(|op| !op.is_internal()) {
        for count in accepted_counts(op) {
            expected.insert((format!("OP_{}", op.name()), count), message_len(op, count as usize));
        }
    }
    assert_eq!(table, expected, "message_lengths.p4inc differs from message_len() over the accepted counts");
    // Both tables of bolt.p4 take their entries from that file.
    let src = P4::load().src;
    assert_eq!(src.matches("#include \"message_lengths.p4inc\"").count(), 2);
}

/// The parser is a closed graph: every state a transition names exists, every state is
/// reachable from `start`, and every parse path the ingress writes into bolt_pass_h has
/// its branch in `rc_bolt`. (No P4 compiler runs in CI; this is the part of its job that
/// concerns the layouts the passes hand each other.)
#[test]
fn parser_states_and_parse_paths_are_closed() {
    let p4 = P4::load();
    let src = &p4.src;
    let parser_start = src.find("parser BoltIngressParser").expect("no ingress parser");
    let parser_end = parser_start + src[parser_start..].find("\ncontrol ").expect("parser not followed by a control");
    let parser = &src[parser_start..parser_end];

    // state NAME { ... transition ...; }  (bodies contain no nested braces but selects)
    let mut states: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for chunk in parser.split("state ").skip(1) {
        let name = chunk.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap().to_string();
        let body_start = chunk.find('{').unwrap();
        // up to the next "state " is this state's text
        let body = &chunk[body_start..];
        let mut targets = Vec::new();
        if let Some(t) = body.find("transition") {
            let rest = &body[t + "transition".len()..];
            if rest.trim_start().starts_with("select") {
                let block = &rest[rest.find('{').unwrap() + 1..rest.find('}').unwrap()];
                for arm in block.split(';').map(str::trim).filter(|a| !a.is_empty()) {
                    targets.push(arm.rsplit(':').next().unwrap().trim().to_string());
                }
            } else {
                targets.push(rest.trim_start().split(';').next().unwrap().trim().to_string());
            }
        }
        assert!(!targets.is_empty(), "state {name} has no transition");
        assert!(states.insert(name.clone(), targets).is_none(), "state {name} defined twice");
    }
    let builtin = ["accept", "reject"];
    for (name, targets) in &states {
        for t in targets {
            assert!(builtin.contains(&t.as_str()) || states.contains_key(t), "state {name} goes to undefined {t}");
        }
    }
    let mut seen = BTreeSet::from(["start".to_string()]);
    let mut todo = vec!["start".to_string()];
    while let Some(s) = todo.pop() {
        for t in states.get(&s).into_iter().flatten() {
            if states.contains_key(t) && seen.insert(t.clone()) {
                todo.push(t.clone());
            }
        }
    }
    let unreachable: Vec<_> = states.keys().filter(|s| !seen.contains(*s)).collect();
    assert!(unreachable.is_empty(), "unreachable parser states: {unreachable:?}");

    let paths: Vec<String> = p4.consts().keys().filter(|k| k.starts_with("PP_")).cloned().collect();
    assert!(!paths.is_empty());
    let outcomes = strip_comments(&read("pass_outcomes.p4inc"));
    let rc_bolt = &parser[parser.find("state rc_bolt").unwrap()..];
    let rc_bolt = &rc_bolt[..rc_bolt.find("state rc_submit").unwrap()];
    for path in &paths {
        assert!(rc_bolt.contains(&format!("{path} ")), "parse path {path} has no branch in rc_bolt");
        let written = src.matches(&format!("parse_path = {path};")).count()
            + src.matches(&format!("set_parse_path({path})")).count()
            + outcomes.matches(&format!(", {path})")).count();
        assert!(written > 0, "parse path {path} is never written by a pass");
    }
}

/// One state of bolt.p4's ingress parser: its statements and its transition.
struct ParserState {
    stmts: Vec<String>,
    /// The select expressions; empty for a plain `transition NEXT;`.
    key: Vec<String>,
    /// (keyset elements, target); a plain transition is one arm with no keyset.
    arms: Vec<(Vec<String>, String)>,
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out
}

/// The text of each `state NAME { ... }` of a parser, from its name on (a state's name
/// may end in `state`, as `parse_swap_state` does).
fn state_chunks(parser: &str) -> Vec<&str> {
    let starts: Vec<usize> = parser
        .match_indices("state ")
        .filter(|(i, _)| parser[..*i].ends_with(char::is_whitespace))
        .map(|(i, _)| i + "state ".len())
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &at)| &parser[at..starts.get(k + 1).map_or(parser.len(), |next| next - "state ".len())])
        .collect()
}

/// A runner for the ingress parser's states that read what a client sent: extracts from
/// a byte buffer and select transitions with exact, range (`a .. b`), mask (`v &&& m`)
/// and don't-care keysets. It knows only the statements that part uses and
/// fails on any other, so a construct it does not model cannot pass unnoticed.
struct ParserRunner {
    states: BTreeMap<String, ParserState>,
    consts: BTreeMap<String, u64>,
    /// headers_t member -> header type
    members: BTreeMap<String, String>,
    /// header type -> fields (name, bits)
    layouts: BTreeMap<String, Vec<(String, u32)>>,
}

impl ParserRunner {
    fn load() -> ParserRunner {
        ParserRunner::of("BoltIngressParser", "headers_t")
    }

    /// The states of `parser NAME`, whose headers are the members of `headers`.
    fn of(name: &str, headers: &str) -> ParserRunner {
        let p4 = P4::load();
        let src = &p4.src;
        let start = src.find(&format!("parser {name}")).unwrap_or_else(|| panic!("no parser {name}"));
        let end = start + src[start..].find("\ncontrol ").expect("parser not followed by a control");
        let parser = &src[start..end];
        let mut states = BTreeMap::new();
        for chunk in state_chunks(parser) {
            let name = chunk.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap().to_string();
            let body = &chunk[chunk.find('{').unwrap() + 1..];
            let t = body.find("transition").unwrap_or_else(|| panic!("state {name} has no transition"));
            let stmts = body[..t].split(';').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
            let rest = body[t + "transition".len()..].trim_start();
            let (key, arms) = if let Some(sel) = rest.strip_prefix("select") {
                let open = sel.find('{').unwrap();
                let key = sel[..open].trim();
                let key = &key[key.find('(').unwrap() + 1..key.rfind(')').unwrap()];
                let block = &sel[open + 1..sel.find('}').unwrap()];
                let arms = block
                    .split(';')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(|a| {
                        let (keyset, target) = a.rsplit_once(':').unwrap();
                        let keyset = keyset.trim();
                        let elems = match keyset.strip_prefix('(').and_then(|k| k.strip_suffix(')')) {
                            Some(tuple) => split_top(tuple),
                            None => vec![keyset.to_string()],
                        };
                        (elems, target.trim().to_string())
                    })
                    .collect();
                (split_top(key), arms)
            } else {
                (Vec::new(), vec![(Vec::new(), rest.split(';').next().unwrap().trim().to_string())])
            };
            states.insert(name, ParserState { stmts, key, arms });
        }
        let consts = p4.consts();
        let mut members = BTreeMap::new();
        let mut layouts = BTreeMap::new();
        for (ty, member) in p4.struct_fields(headers) {
            layouts.entry(ty.clone()).or_insert_with(|| p4.header(&ty));
            members.insert(member, ty);
        }
        ParserRunner { states, consts, members, layouts }
    }

    fn value(&self, v: &str) -> u64 {
        let v = v.trim();
        if v.starts_with(|c: char| c.is_ascii_digit()) {
            parse_int(v)
        } else if let Some(name) = v.strip_prefix('~') {
            // The complement of a bit<8> constant, as the keysets use it for masks.
            !self.value(name) & 0xff
        } else {
            *self.consts.get(v).unwrap_or_else(|| panic!("bolt.p4 parser uses {v}, not a literal const"))
        }
    }

    fn matches(&self, keyset: &str, v: u64) -> bool {
        let k = keyset.trim();
        if k == "_" || k == "default" {
            true
        } else if let Some((a, m)) = k.split_once("&&&") {
            v & self.value(m) == self.value(a) & self.value(m)
        } else if let Some((lo, hi)) = k.split_once("..") {
            (self.value(lo)..=self.value(hi)).contains(&v)
        } else {
            v == self.value(k)
        }
    }

    /// Runs the parser from `state` on `buf` (the UDP payload). Ok when it accepts with
    /// no decode error; Err(DecodeError index) when it reaches an error state, or
    /// DE_TRUNCATED (the control's reading of a parser error) when it reads past the end.
    fn run(&self, state: &str, buf: &[u8]) -> Result<(), usize> {
        let truncated = self.consts["DE_TRUNCATED"] as usize;
        let mut fields: BTreeMap<String, u64> = BTreeMap::new();
        let (mut at, mut error) = (0usize, None);
        let mut state = state.to_string();
        for _ in 0..64 {
            let s = self.states.get(&state).unwrap_or_else(|| panic!("no parser state {state}"));
            for stmt in &s.stmts {
                if let Some(member) = stmt.strip_prefix("pkt.extract(hdr.").and_then(|h| h.strip_suffix(')')) {
                    let ty = &self.members[member];
                    for (f, bits) in &self.layouts[ty] {
                        let bytes = (*bits / 8) as usize;
                        assert_eq!(*bits % 8, 0, "{ty}.{f} is not whole bytes");
                        let Some(b) = buf.get(at..at + bytes) else { return Err(truncated) };
                        fields.insert(format!("{member}.{f}"), b.iter().fold(0u64, |acc, &x| acc << 8 | x as u64));
                        at += bytes;
                    }
                } else if let Some(e) = stmt.strip_prefix("ig_md.decode_error =") {
                    error = Some(self.value(e) as usize);
                } else if stmt != "ig_md.malformed = 1" {
                    panic!("state {state}: the test cannot run {stmt:?}");
                }
            }
            let key: Vec<u64> = s
                .key
                .iter()
                .map(|k| {
                    *fields
                        .get(k.strip_prefix("hdr.").unwrap_or_else(|| panic!("select on {k}")))
                        .unwrap_or_else(|| panic!("state {state} selects on {k} before extracting it"))
                })
                .collect();
            let target = s
                .arms
                .iter()
                .find(|(keyset, _)| match keyset.as_slice() {
                    [] => true,
                    [one] if one == "default" => true,
                    ks => {
                        assert_eq!(ks.len(), key.len(), "state {state}: keyset {ks:?} against {} keys", key.len());
                        ks.iter().zip(&key).all(|(k, v)| self.matches(k, *v))
                    }
                })
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| "reject".to_string());
            match target.as_str() {
                "accept" => return error.map_or(Ok(()), Err),
                "reject" => return Err(truncated),
                _ => state = target,
            }
        }
        panic!("the parser did not finish in 64 states");
    }
}

fn test_task(tid: u32, prio: u8, rsrc: u8, flags: u8) -> Task {
    let mut t = Task { prio, rsrc, flags, ..Task::default() };
    t.set_tid(tid);
    t
}

/// One valid message of every op a client, executor, agent or tier 2 sends, from the
/// encoders: with and without WAIT, with a zero and a non-zero BEST.
fn valid_messages() -> Vec<(Op, Vec<u8>)> {
    let tasks = [test_task(1, 1, 0, 0), test_task(2, 3, 0b101, TASK_FLAG_EXACTLY_ONCE)];
    let entries: Vec<Entry> = tasks.iter().map(|t| Entry::new(7, 9, *t, [192, 0, 2, 9], 5000)).collect();
    let mut completion = Completion { status: STATUS_FAILED, ..Completion::default() };
    completion.set_tid(3);
    let job = JobRef::new(7, 9);
    let from = Requester::new(1, 2, 3);
    let mut out = Vec::new();
    let mut put = |op: Op, f: &dyn Fn(&mut [u8]) -> usize| {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = f(&mut buf);
        out.push((op, buf[..n].to_vec()));
    };
    put(Op::Submit, &|b| encode_submit(b, job, FLAG_RESUBMIT, &tasks).unwrap());
    put(Op::GetTask, &|b| encode_get_task(b, 2, 0b11, from, false).unwrap());
    put(Op::GetTask, &|b| encode_get_task(b, 1, 0, from, true).unwrap());
    put(Op::GetBundle, &|b| encode_get_bundle(b, 2, 0b11, from, MIN_BUNDLE, false).unwrap());
    put(Op::GetBundle, &|b| encode_get_bundle(b, 1, 0, from, MAX_BUNDLE, true).unwrap());
    put(Op::Assign, &|b| encode_assign_list(b, &entries, 3).unwrap());
    put(Op::Assign, &|b| encode_assign(b, &entries[1], 0).unwrap());
    put(Op::Assign, &|b| encode_assign(b, &entries[0], 2).unwrap());
    put(Op::Noop, &|b| encode_noop(b, from, 0).unwrap());
    put(Op::Noop, &|b| encode_noop(b, from, MAX_PRIORITIES).unwrap());
    put(Op::Complete, &|b| encode_complete(b, &completion).unwrap());
    put(Op::QueueFull, &|b| encode_queue_full(b, job, &tasks).unwrap());
    put(Op::Pin, &|b| encode_pin(b, job, FLAG_MOVABLE | FLAG_RESUBMIT, &tasks).unwrap());
    put(Op::Pin, &|b| encode_pin(b, job, 0, &tasks[..1]).unwrap());
    put(Op::RefillReq, &|b| encode_refill_req(b, 0b1, RefillRequest::new(4, 3)).unwrap());
    put(Op::Refill, &|b| encode_refill(b, &entries, 0).unwrap());
    put(Op::Refill, &|b| encode_refill(b, &[], 0).unwrap());
    put(Op::Refill, &|b| encode_refill(b, &entries, 1).unwrap());
    put(Op::Hint, &|b| encode_hint(b, 0).unwrap());
    put(Op::Hint, &|b| encode_hint(b, 3).unwrap());
    put(Op::Recall, &|b| encode_recall(b, 0b101, RefillRequest::new(4, 1), 2).unwrap());
    put(Op::Recall, &|b| encode_recall(b, 0, RefillRequest::new(1, 255), 0).unwrap());
    put(Op::Return, &|b| encode_return(b, &entries).unwrap());
    let claim = Claim::of(&entries[1], 4, 2);
    put(Op::Claim, &|b| encode_claim(b, &claim).unwrap());
    put(Op::Claim, &|b| encode_claim(b, &claim.renewal()).unwrap());
    put(Op::ClaimReply, &|b| encode_claim_reply(b, &claim.answered(CLAIM_DENIED)).unwrap());
    let steal = StealBody::new(4, 0x0102_0304);
    put(Op::StealProbe, &|b| encode_steal(b, Op::StealProbe, &steal).unwrap());
    let mut load = steal;
    load.set_load(9);
    put(Op::StealLoad, &|b| encode_steal(b, Op::StealLoad, &load).unwrap());
    put(Op::StealReq, &|b| encode_steal(b, Op::StealReq, &StealBody { want: 3, ..steal }).unwrap());
    put(Op::StealGrant, &|b| encode_steal_grant(b, &steal, &entries).unwrap());
    put(Op::StealGrant, &|b| encode_steal_grant(b, &steal, &[]).unwrap());
    put(Op::StealAck, &|b| encode_steal(b, Op::StealAck, &steal).unwrap());
    put(Op::StealDone, &|b| encode_steal(b, Op::StealDone, &StealBody { verdict: STEAL_ABORT, ..steal }).unwrap());
    out
}

/// How `decode()` treats each op's header prio, rsrc and flags, found by trying every
/// value: whether some non-zero prio and rsrc pass, and the union of flag bits that pass.
fn header_use(runs: impl Fn(&[u8]) -> bool) -> BTreeMap<String, (bool, bool, u8)> {
    let mut out = BTreeMap::new();
    for (op, msg) in valid_messages() {
        let accepts = |at: usize, v: u8| {
            let mut b = msg.clone();
            b[at] = v;
            runs(&b)
        };
        let prio = (1..=255).any(|v| accepts(5, v));
        let rsrc = (1..=255).any(|v| accepts(6, v));
        let flags = (0..=255u8).filter(|&v| accepts(7, v)).fold(0, |a, v| a | v);
        out.insert(op.name().to_string(), (prio, rsrc, flags));
    }
    out
}

/// What bolt.p4's parser decides about a message from a client: the front panel checks
/// it up to its first list item; each later item of a SUBMIT or RETURN is checked by the
/// pass that extracts it (`rc_task_cur`, `rc_entry_cur`), first to last.
fn switch_verdict(runner: &ParserRunner, msg: &[u8]) -> Result<(), usize> {
    runner.run("parse_bolt", msg)?;
    let (first, len, state) = match Op::from_u8(msg[3]) {
        Some(Op::Submit) => (Header::LEN + JobRef::LEN, Task::LEN, "rc_task_cur"),
        Some(Op::Return) => (Header::LEN, Entry::LEN, "rc_entry_cur"),
        _ => return Ok(()),
    };
    for k in 1..msg[4] as usize {
        runner.run(state, &msg[first + k * len..])?;
    }
    Ok(())
}

/// The bytes of `msg` bolt.p4 checks: all of them, but for a list an op the switch
/// refuses as wrong direction carries (QUEUE_FULL, PIN, ASSIGN, REFILL, STEAL_GRANT), only up to the
/// first item.
fn checked_len(op: Op, msg: &[u8]) -> usize {
    match op {
        Op::QueueFull | Op::Pin => Header::LEN + JobRef::LEN + Task::LEN,
        Op::Refill | Op::Assign => msg.len().min(Header::LEN + Entry::LEN),
        Op::StealGrant => msg.len().min(Header::LEN + StealBody::LEN + Entry::LEN),
        _ => msg.len(),
    }
}

/// Every byte of every valid message but op and count (which change the layout), set to
/// every value: bolt.p4's parser, pass by pass ([`switch_verdict`]), accepts it iff
/// `decode()` does, and refuses it under the same DecodeError index. This covers the
/// header bytes an op does not use (prio, rsrc, flags), every pad (ENTRY, COMPLETE,
/// REFILL_REQ), and the rest of the body checks. The control's length check is not
/// involved: no length changes.
#[test]
fn front_panel_parser_refuses_what_decode_refuses() {
    let runner = ParserRunner::load();
    let mut refused: BTreeMap<usize, usize> = BTreeMap::new();
    for (op, msg) in valid_messages() {
        assert_eq!(switch_verdict(&runner, &msg), Ok(()), "{}: a valid message is refused", op.name());
        for at in (0..checked_len(op, &msg)).filter(|&at| at != 3 && at != 4) {
            for v in 0..=255u8 {
                let mut b = msg.clone();
                b[at] = v;
                let want = decode(&b).map(|_| ()).map_err(|e| e.index());
                let got = switch_verdict(&runner, &b);
                assert_eq!(
                    got.map_err(|i| DecodeError::NAMES[i]),
                    want.map_err(|i| DecodeError::NAMES[i]),
                    "{} with byte {at} = {v:#04x}: bolt.p4 and decode() disagree",
                    op.name()
                );
                if let Err(i) = want {
                    *refused.entry(i).or_default() += 1;
                }
            }
        }
    }
    // The zero-byte rules are among what was compared.
    for e in [DecodeError::BadField, DecodeError::UnknownFlags(0), DecodeError::BadPriority(0)] {
        assert!(refused.get(&e.index()).is_some_and(|&n| n > 0), "no message was refused as {}", e.name());
    }
    // The same per-op table of header use, from both sides.
    let from_decode = header_use(|b| decode(b).is_ok());
    let from_p4 = header_use(|b| switch_verdict(&runner, b).is_ok());
    assert_eq!(from_p4, from_decode, "header prio/rsrc/flags use per op: bolt.p4 vs decode()");
    assert_eq!(from_decode["SUBMIT"], (false, false, SUBMIT_FLAGS));
    assert_eq!(from_decode["GET_TASK"], (true, true, GET_TASK_FLAGS));
    assert_eq!(from_decode["GET_BUNDLE"], (true, true, GET_TASK_FLAGS));
    for best in ["ASSIGN", "NOOP", "REFILL", "HINT"] {
        assert_eq!(from_decode[best], (true, false, 0), "{best} carries BEST in its header prio");
    }
    assert_eq!(from_decode.len(), Op::ALL.iter().filter(|op| !op.is_internal()).count(), "an external op is not tried");
}

/// What bolt.p4 writes itself must also be what the decoders accept: the REPAIR packets
/// its egress makes set every byte `decode_packet()` constrains (found by changing each
/// byte of an encoded REPAIR), and ENTRY pads are stored and sent as zero.
#[test]
fn bolt_p4_writes_no_bytes_the_decoder_refuses() {
    let p4 = P4::load();
    let src = &p4.src;

    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let mut state = RepairState { target: REPAIR_RETRIEVE_PTR, ..RepairState::default() };
    state.set_value(77);
    let n = encode_repair(&mut buf, 3, &state).unwrap();
    let msg = &buf[..n];
    // P4 field of every byte of the REPAIR message, from the checked field lists.
    let header_fields = header_fields();
    let repair_fields = vec![
        field!(RepairState, target, 1, [("target", 8)]),
        field!(RepairState, pad, 3, [("pad", 24)]),
        field!(RepairState, value, 4, [("value", 32)]),
    ];
    let byte_field = |at: usize| -> String {
        let (hdr, fields, off) = if at < Header::LEN {
            ("bolt", &header_fields, at)
        } else {
            ("repair_state", &repair_fields, at - Header::LEN)
        };
        let f = fields.iter().find(|f| (f.offset..f.offset + f.bytes).contains(&off)).unwrap();
        format!("hdr.{hdr}.{}", f.p4[0].0)
    };
    // Each constrained byte (some value refused) and whether 0 is the only value accepted.
    let mut constrained: BTreeMap<String, bool> = BTreeMap::new();
    for at in 3..n {
        // magic and version (bytes 0..3) come from the admitted packet
        let accepted: Vec<u8> = (0..=255u8)
            .filter(|&v| {
                let mut b = msg.to_vec();
                b[at] = v;
                decode_packet(&b).is_ok()
            })
            .collect();
        if accepted.len() < 256 {
            *constrained.entry(byte_field(at)).or_insert(true) &= accepted == [0];
        }
    }
    assert_eq!(constrained.get("hdr.repair_state.pad"), Some(&true));
    assert_eq!(constrained.get("hdr.bolt.rsrc"), Some(&true));
    let egress = &src[src.find("control BoltEgress(").expect("no egress control")..];
    let egress = &egress[..egress.find("\ncontrol ").unwrap()];
    let block = &egress[egress.find("hdr.bolt.op = OP_REPAIR;").expect("egress makes no REPAIR")..];
    let block = &block[..block.find('}').unwrap()];
    for (field, zero_only) in &constrained {
        if *zero_only {
            assert!(block.contains(&format!("{field} = 0;")), "the egress REPAIR does not zero {field}");
        } else {
            assert!(block.contains(&format!("{field} =")), "the egress REPAIR leaves {field} as it was");
        }
    }

    // Every pad bolt.p4 assigns is assigned zero, every stored client_port|pad word has a
    // zero pad half, and the entry a pass takes out is sent with a zero pad.
    let assigns: Vec<&str> =
        src.lines().map(str::trim).filter(|l| l.contains(".pad = ") || l.contains(".pad2 = ")).collect();
    assert!(!assigns.is_empty());
    for line in &assigns {
        assert!(line.ends_with("= 0;"), "a pad assigned something other than zero: {line}");
    }
    assert!(assigns.contains(&"hdr.entry_out.pad = 0;"), "entry_out.pad is not set to zero");
    let stored: Vec<&str> =
        src.lines().map(str::trim).filter(|l| l.starts_with("ig_md.entry_in.client_port_pad =")).collect();
    assert_eq!(stored.len(), 3, "an enqueue, RETURN or swap writes client_port_pad some other way");
    for line in stored {
        assert!(line.ends_with("++ 16w0;"), "a stored pad is not zero: {line}");
    }
}

/// The body of `table NAME { ... }` in the source without comments.
fn table_body<'a>(src: &'a str, name: &str) -> &'a str {
    let start = src.find(&format!("table {name} {{")).unwrap_or_else(|| panic!("bolt.p4 has no table {name}"));
    let body = &src[start..];
    let mut depth = 0;
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 1 => return &body[..=i],
            '}' => depth -= 1,
            _ => {}
        }
    }
    panic!("table {name} does not close")
}

/// The access rules of bolt.p4 are those of the software switch (`AccessRules::admits`):
/// SUBMIT checked against the client prefixes, GET_TASK against the executors, REFILL_REQ
/// and RETURN against the agents, each a longest-prefix table on the source address (an
/// address is its /32, so the switch's address lists and the ACL config take the same
/// lists; `--nodes` goes into both worker tables), and a refusal counted per op as
/// `SwitchStats::refused` is. The software half below checks the nodes that are both.
#[test]
fn access_rules_match_the_software_switch() {
    use scheduler_common::Ipv4Prefix;
    use scheduler_user::switch::AccessRules;

    let src = strip_comments(&program());
    for table in ["acl_clients", "acl_executors", "acl_agents"] {
        let key: String = table_body(&src, table).split_whitespace().collect();
        assert!(key.contains("key={hdr.ipv4.src_addr:lpm;}"), "{table} must be an LPM on the source address: {key}");
        assert!(
            key.contains("actions={allow;NoAction;}") && key.contains("default_action=NoAction()"),
            "{table}: {key}"
        );
    }
    let apply: String = src.split_whitespace().collect();
    assert!(
        apply.contains(
            "if(hdr.bolt.op==OP_SUBMIT){acl_clients.apply();}elseif(hdr.bolt.op==OP_GET_TASK)\
             {acl_executors.apply();}else{acl_agents.apply();}"
        ),
        "SUBMIT goes to acl_clients, GET_TASK to acl_executors, REFILL_REQ and RETURN to acl_agents"
    );
    assert!(apply.contains("if(ig_md.allowed==0){acl_denied.count(hdr.bolt.op[3:0]);ig_dprsr_md.drop_ctl=1;}"));
    // The ops that reach the ACL in bolt.p4 (every other op is wrong-direction first).
    assert!(apply.contains(
        "hdr.bolt.op!=OP_SUBMIT&&hdr.bolt.op!=OP_GET_TASK&&hdr.bolt.op!=OP_REFILL_REQ&&hdr.bolt.op!=OP_RETURN"
    ));
    // The same split in the software switch.
    let client = Ipv4Prefix::parse("192.0.2.0/24").unwrap();
    let node = Ipv4Prefix::parse("198.51.100.7").unwrap();
    let rules = AccessRules { clients: vec![client], agents: vec![node], executors: vec![node] };
    let (from_client, from_node) = ("192.0.2.5:1".parse().unwrap(), "198.51.100.7:1".parse().unwrap());
    assert!(rules.admits(Op::Submit, from_client) && !rules.admits(Op::Submit, from_node));
    for op in [Op::GetTask, Op::GetBundle, Op::RefillReq, Op::Return] {
        assert!(rules.admits(op, from_node) && !rules.admits(op, from_client), "{op:?}");
    }
}

/// The conditions of every `if` in `src` (the text between the parentheses).
fn if_conditions(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find("if (") {
        let open = at + 3;
        let mut depth = 0;
        let mut end = open;
        for (i, c) in rest[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push(rest[open + 1..end].split_whitespace().collect::<Vec<_>>().join(" "));
        rest = &rest[end..];
    }
    out
}

/// The bodies of the RegisterActions, by name.
fn register_actions(src: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (at, _) in src.match_indices("RegisterAction<") {
        let head = &src[at..];
        let eq = head.find("= {").expect("RegisterAction without a body");
        let name = head[..eq].split_whitespace().last().unwrap().to_string();
        let body = &head[eq..];
        let end = body.find("};").expect("unterminated RegisterAction");
        out.push((name, body[..end].to_string()));
    }
    out
}

/// A Tofino stateful ALU compares the register with a packet field or a constant on
/// 34-bit extended operands: a condition with arithmetic in it (a wrapped difference, a
/// cast) does not mean on the chip what it means in P4 (the drift test once did).
#[test]
fn register_actions_compare_without_arithmetic() {
    let p4 = P4::load();
    let actions = register_actions(&p4.src);
    assert!(actions.len() >= 10, "found only {} RegisterActions", actions.len());
    for (name, body) in &actions {
        for cond in if_conditions(body) {
            assert!(
                !cond.contains(['+', '-']) && !cond.contains("(int<") && !cond.contains("(bit<"),
                "RegisterAction {name}: condition {cond:?} computes before it compares"
            );
        }
    }
}

/// A match-action gateway compares a field (or a slice of one) with a constant, and
/// tests header validity and table hits; anything else (arithmetic, a field against a
/// field, a mask from another field) must be computed in an action first.
#[test]
fn every_gateway_condition_compares_a_field_with_a_constant() {
    let p4 = P4::load();
    let consts = p4.consts();
    let mut src = p4.src.clone();
    // Parser states and RegisterAction bodies are not gateways.
    for (_, body) in register_actions(&p4.src) {
        src = src.replace(&body, "");
    }
    let constant = |v: &str| {
        let v = v.trim();
        v.starts_with(|c: char| c.is_ascii_digit())
            || consts.contains_key(v)
            || (v.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') && !v.is_empty())
    };
    let field = |v: &str| {
        let v = v.trim().trim_start_matches('!');
        !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || "._[]:".contains(c)) && !v.contains("::")
    };
    let mut checked = 0;
    for cond in if_conditions(&src) {
        for atom in cond.split("&&").flat_map(|a| a.split("||")) {
            let atom = atom.trim().trim_matches(|c| c == '(' || c == ')').trim();
            if atom.ends_with(".isValid") || atom.ends_with(".apply().hit") || atom.ends_with(".apply") {
                continue;
            }
            let op = ["==", "!=", ">=", "<=", ">", "<"].into_iter().find(|op| atom.contains(op));
            let Some(op) = op else { panic!("gateway condition {cond:?}: {atom:?} is not a comparison") };
            let (lhs, rhs) = atom.split_once(op).unwrap();
            let lhs = lhs.trim().trim_matches(|c| c == '(' || c == ')');
            // A constant mask is part of the gateway's match.
            let lhs_ok = match lhs.split_once('&') {
                Some((f, mask)) => field(f) && constant(mask.trim().trim_end_matches(')')),
                None => field(lhs),
            };
            assert!(
                lhs_ok && constant(rhs),
                "gateway condition {cond:?}: {atom:?} does not compare a field with a constant"
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} comparisons found");
}

/// Each counter is counted from one place, driven by a flag or an index, so that the
/// compiler places one counter ALU access per pass.
#[test]
fn every_counter_has_one_count_site() {
    let p4 = P4::load();
    let mut sites: BTreeMap<String, usize> = BTreeMap::new();
    for (at, _) in p4.src.match_indices(".count(") {
        let name: String = p4.src[..at].chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        *sites.entry(name.chars().rev().collect()).or_default() += 1;
    }
    assert!(sites.len() >= 10, "found only {} counters", sites.len());
    let repeated: Vec<_> = sites.iter().filter(|(_, &n)| n > 1).collect();
    assert!(repeated.is_empty(), "counters counted from more than one place: {repeated:?}");
}

/// The ingress parser sets every metadata field before anything reads it: Tofino does
/// not zero metadata, and p4c warns about an out parameter left unset.
#[test]
fn the_ingress_parser_initialises_all_metadata() {
    let p4 = P4::load();
    let parser = &p4.src[p4.src.find("parser BoltIngressParser").expect("no ingress parser")..];
    let start = &parser[parser.find("state start").unwrap()..];
    let start = &start[..start.find("transition").unwrap()];
    let nested: BTreeMap<String, Vec<(String, String)>> =
        [("entry_words_t".to_string(), p4.struct_fields("entry_words_t"))].into_iter().collect();
    for (ty, name) in p4.struct_fields("ingress_md_t") {
        let leaves: Vec<String> = match nested.get(&ty) {
            Some(inner) => inner.iter().map(|(_, f)| format!("{name}.{f}")).collect(),
            None => vec![name],
        };
        for leaf in leaves {
            assert!(
                start.contains(&format!("ig_md.{leaf} = 0;")),
                "the parser's start state leaves ig_md.{leaf} unset"
            );
        }
    }
}

/// Each control of the program uses only the tables, actions, registers, counters and
/// sub-controls it declares itself: the ingress's sub-controls (pass setup, front-panel
/// admission, queue pass, answer) share nothing but the headers and the metadata they
/// are passed.
#[test]
fn each_control_uses_only_what_it_declares() {
    let p4 = P4::load();
    let mut controls: Vec<(String, String)> = Vec::new();
    for (at, _) in p4.src.match_indices("\ncontrol ") {
        let rest = &p4.src[at + "\ncontrol ".len()..];
        let name = rest[..rest.find('(').unwrap()].trim().to_string();
        let end = rest.find("\n}").expect("control does not close");
        controls.push((name, rest[..end].to_string()));
    }
    assert!(controls.len() >= 6, "found {} controls", controls.len());
    let declared_in = |body: &str| -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for line in body.lines().map(str::trim) {
            for kw in ["table ", "action "] {
                if let Some(rest) = line.strip_prefix(kw) {
                    names.insert(
                        rest.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').next().unwrap().to_string(),
                    );
                }
            }
            let decl = ["Counter<", "Register<", "RegisterAction<"].iter().any(|k| line.starts_with(k))
                || line.starts_with("Bolt") && line.ends_with(';');
            if decl {
                let head = line.split(['=', ';']).next().unwrap().trim();
                names.insert(head.rsplit(|c: char| c.is_whitespace() || c == ')').next().unwrap().to_string());
            }
            if let Some(word) = line.strip_prefix("ENTRY_WORD(").and_then(|r| r.strip_suffix(')')) {
                names.extend(["read", "exchange"].map(|op| format!("entry_{word}_{op}")));
            }
        }
        names
    };
    let all_actions: BTreeSet<String> = controls
        .iter()
        .flat_map(|(_, body)| body.lines().filter_map(|l| l.trim().strip_prefix("action ").map(str::to_string)))
        .map(|rest| rest.split('(').next().unwrap().trim().to_string())
        .collect();
    for (name, body) in &controls {
        let declared = declared_in(body);
        let mut used = BTreeSet::new();
        for method in [".apply(", ".count(", ".execute("] {
            for (at, _) in body.match_indices(method) {
                let object: String =
                    body[..at].chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let object: String = object.chars().rev().collect();
                // Header, metadata and packet methods are not declarations.
                if !object.is_empty() && !body[..at].ends_with(&format!(".{object}")) {
                    used.insert(object);
                }
            }
        }
        for line in body.lines().map(str::trim) {
            if let Some(call) = line.strip_suffix(");").and_then(|l| l.split_once('(')).map(|(f, _)| f.trim()) {
                if all_actions.contains(call) {
                    used.insert(call.to_string());
                }
            }
            if let Some(list) = line.strip_prefix("actions = {").and_then(|l| l.strip_suffix('}')) {
                used.extend(
                    list.split(';').map(str::trim).filter(|a| !a.is_empty() && *a != "NoAction").map(str::to_string),
                );
            }
        }
        let missing: Vec<_> = used.difference(&declared).collect();
        assert!(missing.is_empty(), "control {name} uses {missing:?} without declaring them");
    }
    let ingress = controls.iter().find(|(n, _)| n == "BoltIngress").unwrap();
    for sub in [
        "BoltPassSetup() pass_setup;",
        "BoltFrontPanel() front_panel;",
        "BoltQueuePass() queue_pass;",
        "BoltOutcome() outcome;",
    ] {
        assert!(ingress.1.contains(sub), "BoltIngress does not instantiate {sub}");
    }
    let egress = controls.iter().find(|(n, _)| n == "BoltEgress").expect("no BoltEgress");
    assert!(egress.1.contains("BoltAnswer() answer;"), "BoltEgress does not instantiate BoltAnswer");
}

/// pass_plan.p4inc gives, for every step, priority and number of configured levels, the
/// level `Pipeline::level_of` computes (and whether it clamped), and the register
/// operations the model's pass of that step makes on add_ptr, retrieve_ptr and
/// is_repairing.
#[test]
fn the_pass_plan_is_the_models() {
    use scheduler_user::queue::{Pipeline, QueueConfig};
    // (add_ptr, retrieve_ptr, is_repairing, flag kind): 1 read / test-and-set,
    // 2 read-and-increment / clear, 3 write.
    type Ops = (u64, u64, u64, u64);
    let enqueue: Ops = (2, 1, 0, 0); // Pipeline::enqueue: add read-and-increment, retrieve read
    let steps: [(&str, Ops); 7] = [
        ("STEP_SUBMIT", enqueue),
        ("STEP_RETURN", enqueue),
        ("STEP_REINSERT", enqueue),
        ("STEP_RETRIEVE", (1, 2, 0, 0)),   // retrieve_pass: add read, bounded increment
        ("STEP_SWAP", (1, 1, 0, 0)),       // swap_pass with budget left: both read
        ("PLAN_REPAIR_ADD", (3, 0, 2, 0)), // repair_pass: write, clear the flag
        ("PLAN_REPAIR_RETRIEVE", (0, 3, 2, 1)),
    ];
    let mut expected = BTreeMap::new();
    for (step, ops) in steps {
        for levels in 1..=MAX_PRIORITIES {
            let config = QueueConfig { capacity: 2, priorities: levels, max_passes: 1, initial_pointer: 0 };
            let mut pipeline = Pipeline::new(config).unwrap();
            for prio in 1..=MAX_PRIORITIES {
                let level = pipeline.level_of(prio) as u64;
                let task = step == "STEP_SUBMIT" || step == "STEP_RETURN";
                let clamped = (task && prio > levels) as u64;
                expected.insert((step.to_string(), prio as u64, levels as u64), (level, clamped, ops));
            }
        }
    }
    let text = strip_comments(&read("pass_plan.p4inc"));
    let mut table = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, action) = line.split_once(':').unwrap_or_else(|| panic!("bad line {line:?}"));
        let key: Vec<&str> =
            key.trim().trim_start_matches('(').trim_end_matches(')').split(',').map(str::trim).collect();
        let args: Vec<u64> = action
            .trim()
            .strip_prefix("plan(")
            .and_then(|a| a.strip_suffix(");"))
            .unwrap_or_else(|| panic!("bad action {action:?}"))
            .split(',')
            .map(parse_int)
            .collect();
        let prev = table.insert(
            (key[0].to_string(), parse_int(key[1]), parse_int(key[2])),
            (args[0], args[1], (args[2], args[3], args[4], args[5])),
        );
        assert!(prev.is_none(), "duplicate entry {line:?}");
    }
    assert_eq!(table, expected, "pass_plan.p4inc differs from the model");
    let src = P4::load().src;
    let body = table_body(&src, "pass_plan");
    assert!(body.contains("#include \"pass_plan.p4inc\""), "pass_plan does not include its entries");
    let consts = P4::load().consts();
    for step in ["PLAN_REPAIR_ADD", "PLAN_REPAIR_RETRIEVE"] {
        assert!(consts[step] > consts["STEP_DELIVER"], "{step} collides with a STEP_*");
    }
}

/// A bounce and the search after a full REFILL batch leave a pass as ingress mirror
/// copies that the control plane cuts to a fixed length: setup.py's lengths are the sizes
/// of the headers bolt.p4 puts before the cut, so a copy holds one item and nothing after.
#[test]
fn mirror_sessions_cut_each_copy_after_its_one_item() {
    let p4 = P4::load();
    let size = |h: &str| p4.header(h).iter().map(|(_, bits)| *bits as usize).sum::<usize>() / 8;
    let front = ["bolt_mirror_h", "bolt_pass_h", "bolt_bridge_h", "ethernet_h", "ipv4_h", "udp_h", "bolt_h"]
        .map(size)
        .iter()
        .sum::<usize>();
    let layouts = [
        ("MIRROR_SUBMIT_BOUNCE", size("job_ref_h") + size("task_h")),
        ("MIRROR_RETURN_BOUNCE", size("entry_h")),
        ("MIRROR_HELD_GET", size("swap_state_h") + size("entry_h") + size("requester_h")),
        ("MIRROR_HELD_REFILL", size("swap_state_h") + size("entry_h") + size("refill_request_h")),
        ("MIRROR_SEARCH_ON", size("refill_request_h")),
    ];
    assert_eq!(front, 1 + 20 + 22 + 14 + 20 + 8 + Header::LEN);
    let setup = read("control/setup.py");
    let consts = p4.consts();
    for (name, body) in layouts {
        let line = setup
            .lines()
            .find(|l| l.contains(&format!("# {name}:")))
            .unwrap_or_else(|| panic!("setup.py configures no {name}"));
        let (sid, sum) = line.split_once(':').unwrap();
        assert_eq!(parse_int(sid.trim()), consts[name], "{name}: session id");
        let sum = sum.split('#').next().unwrap().trim().trim_end_matches(',');
        let len: usize = sum.split('+').map(|t| parse_int(t.trim()) as usize).sum();
        assert_eq!(len, front + body, "{name}: the copy is cut after its one item");
    }
}

/// The two list answers as docs/protocol.md defines them: every QUEUE_FULL bolt.p4 makes
/// lists one task, and a REFILL's newest entry (`entry_out`) is emitted after the
/// RefillRequest and every other header, so it lands in front of the entries found
/// before, which follow as payload.
#[test]
fn queue_full_lists_one_task_and_a_refill_is_built_newest_first() {
    let p4 = P4::load();
    let sites: Vec<&str> = p4.src.match_indices("answer_header(OP_QUEUE_FULL,").map(|(i, _)| &p4.src[i..]).collect();
    assert_eq!(sites.len(), 1, "QUEUE_FULL answers are written in one place");
    for site in sites {
        let count = site["answer_header(OP_QUEUE_FULL,".len()..].split(')').next().unwrap().trim();
        assert_eq!(count, "1", "a QUEUE_FULL of {count} tasks");
    }
    // Every refused task leaves in a QUEUE_FULL of its own: a mirrored bounce's, the last
    // SUBMIT task's, the last RETURN entry's, a host's held task's.
    let outcomes = strip_comments(&read("pass_outcomes.p4inc"));
    assert_eq!(outcomes.matches("answer(OUT_QUEUE_FULL)").count(), 4);
    for deparser in ["control BoltIngressDeparser", "control BoltEgressDeparser"] {
        let dep = &p4.src[p4.src.find(deparser).expect("no deparser")..];
        let dep = &dep[..dep.find("\n}\n").expect("the deparser ends")];
        let emitted: Vec<&str> = dep
            .match_indices("pkt.emit(hdr.")
            .map(|(i, _)| dep[i + "pkt.emit(hdr.".len()..].split(')').next().unwrap())
            .collect();
        assert_eq!(emitted.last(), Some(&"entry_out"), "{deparser}: the entry found is emitted last: {emitted:?}");
        let at = |h: &str| emitted.iter().position(|e| *e == h).unwrap_or_else(|| panic!("{h} not emitted"));
        assert!(at("refill_request") < at("entry_out"));
    }
}

/// The ternary entries a range `lo..=hi` of a parser keyset takes: its minimal cover by
/// aligned power-of-two blocks.
fn ternary_cover(mut lo: u64, hi: u64) -> u64 {
    let mut rows = 0;
    while lo <= hi {
        let mut size = 1;
        while lo.is_multiple_of(size * 2) && lo + size * 2 - 1 <= hi {
            size *= 2;
        }
        lo += size;
        rows += 1;
    }
    rows
}

/// The counts p4/README.md ("Resource budget") gives, by the method it gives, against
/// the chips' limits: parser TCAM rows (one per select arm, ranges split into their
/// ternary cover, one per state without select, one more per 32 bytes a state extracts
/// or skips beyond the first 32, the intrinsic and port metadata at Tofino 2's sizes)
/// against 256; ingress deparser entries (one per 4-byte
/// container, Tofino) against 192 and chunks (one per 8 bytes, Tofino 2) against 128;
/// and the bytes of every ingress header at once against the 640 B of PHV the smaller
/// chip has.
#[test]
fn parser_rows_and_deparser_entries_fit_both_chips() {
    let p4 = P4::load();
    for (parser, headers, deparser) in [
        ("BoltIngressParser", "headers_t", "control BoltIngressDeparser"),
        ("BoltEgressParser", "egress_headers_t", "control BoltEgressDeparser"),
    ] {
        let runner = ParserRunner::of(parser, headers);
        let bytes_of = |ty: &str| p4.header(ty).iter().map(|(_, bits)| *bits as u64).sum::<u64>() / 8;
        let mut rows = 0;
        for (name, state) in &runner.states {
            let arms: u64 = state
                .arms
                .iter()
                .map(|(keyset, _)| {
                    keyset
                        .iter()
                        .map(|k| match k.split_once("..") {
                            Some((lo, hi)) if !k.contains("&&&") => ternary_cover(runner.value(lo), runner.value(hi)),
                            _ => 1,
                        })
                        .product::<u64>()
                })
                .sum();
            let window: u64 = state
                .stmts
                .iter()
                .map(|st| {
                    if let Some(h) = st.strip_prefix("pkt.extract(hdr.").and_then(|h| h.strip_suffix(')')) {
                        bytes_of(&runner.members[h])
                    } else if st == "pkt.extract(ig_intr_md)" || st == "pkt.extract(eg_intr_md)" {
                        16 // Tofino 2's; 8 on Tofino
                    } else if st == "pkt.advance(PORT_METADATA_SIZE)" {
                        24 // Tofino 2's; 8 on Tofino
                    } else if let Some(bits) = st.strip_prefix("pkt.advance(").and_then(|b| b.strip_suffix(')')) {
                        parse_int(bits) / 8
                    } else {
                        0
                    }
                })
                .sum();
            let state_rows = arms.max(1) + window.div_ceil(32).saturating_sub(1);
            assert!(state_rows <= 32, "{parser} state {name}: {state_rows} rows");
            rows += state_rows;
        }
        let dep = &p4.src[p4.src.find(deparser).expect("no deparser")..];
        let dep = &dep[..dep.find("\n}\n").expect("the deparser ends")];
        let emitted: Vec<u64> = dep
            .match_indices("pkt.emit(hdr.")
            .map(|(i, _)| bytes_of(&runner.members[dep[i + "pkt.emit(hdr.".len()..].split(')').next().unwrap()]))
            .collect();
        let (bytes, entries, chunks): (u64, u64, u64) = (
            emitted.iter().sum(),
            emitted.iter().map(|b| b.div_ceil(4)).sum(),
            emitted.iter().map(|b| b.div_ceil(8)).sum(),
        );
        println!(
            "{parser}: {} states, {rows} TCAM rows; deparser: {} headers, {bytes} B, {entries} entries (Tofino), {chunks} chunks (Tofino 2)",
            runner.states.len(),
            emitted.len()
        );
        assert!(rows <= 256, "{parser}: {rows} parser TCAM rows, 256 on either chip");
        assert!(entries <= 192, "{deparser}: {entries} deparser entries, 192 on Tofino");
        assert!(chunks <= 128, "{deparser}: {chunks} deparser chunks, 128 on Tofino 2");
        assert!(bytes <= 640, "{deparser}: {bytes} B of headers");
    }
}

/// The const entries of `table NAME` (or of the file it includes) as (key, action
/// arguments), both as numbers.
fn const_entries(p4: &P4, name: &str) -> Vec<(Vec<u64>, Vec<u64>)> {
    let body = table_body(&p4.src, name);
    let entries = &body[body.find("const entries").unwrap_or_else(|| panic!("{name} has no const entries"))..];
    let text = match entries.find("#include \"") {
        Some(at) => {
            let file = entries[at + 10..].split('"').next().unwrap();
            strip_comments(&read(file))
        }
        None => entries[entries.find('{').unwrap() + 1..entries.find('}').unwrap()].to_string(),
    };
    let numbers =
        |s: &str| -> Vec<u64> { s.split(',').map(str::trim).filter(|v| !v.is_empty()).map(parse_int).collect() };
    text.split(';')
        .map(str::trim)
        .filter(|e| e.contains(':') && !e.starts_with('#'))
        .map(|e| {
            let (key, action) = e.split_once(':').unwrap();
            let args = &action[action.find('(').unwrap() + 1..action.rfind(')').unwrap()];
            (numbers(key.trim().trim_start_matches('(').trim_end_matches(')')), numbers(args))
        })
        .collect()
}

/// BEST (switch/levels.rs `Levels::best`): the lowest set bit of the bitmap as a wire
/// priority, 0 for none, for all 256 bitmaps, in both tables; the level masks that pick
/// which levels a requester is told about (`Levels::best_excluding`).
#[test]
fn best_tables_give_the_highest_non_empty_level() {
    let p4 = P4::load();
    for table in ["best_of_sat", "best_of_unsat"] {
        let entries = const_entries(&p4, table);
        let found: BTreeMap<u64, u64> = entries.iter().map(|(k, a)| (k[0], a[0])).collect();
        assert_eq!(found.len(), 256, "{table}: one entry per 8-bit bitmap");
        for (bits, best) in found {
            let expected = if bits == 0 { 0 } else { bits.trailing_zeros() as u64 + 1 };
            assert_eq!(best, expected, "{table}: bitmap {bits:#010b}");
        }
    }
    let masks = const_entries(&p4, "level_masks");
    assert_eq!(masks.len(), 8);
    for (key, args) in masks {
        let l = key[0];
        assert_eq!(args, vec![1 << l, !(1u64 << l) & 0xff, (0xffu64 << l) & 0xff], "level_masks level {l}");
    }
    let below = const_entries(&p4, "first_level_mask");
    assert_eq!(below.len(), 8);
    for (key, args) in below {
        assert_eq!(args, vec![(1u64 << key[0]) - 1], "first_level_mask level {}", key[0]);
    }
}

/// The non-empty-level register is touched once per pass: its three RegisterActions sit
/// in one if / else if / else on `nonempty_op`, and nothing else uses the register.
#[test]
fn the_level_bitmap_is_touched_once_per_pass() {
    let p4 = P4::load();
    let flat: String = p4.src.split_whitespace().collect();
    assert!(flat.contains(
        "if(ig_md.nonempty_op==1){ig_md.nonempty=nonempty_set.execute(0);}\
         elseif(ig_md.nonempty_op==2){ig_md.nonempty=nonempty_clear.execute(0);}\
         else{ig_md.nonempty=nonempty_read.execute(0);}"
    ));
    for action in ["nonempty_set", "nonempty_clear", "nonempty_read"] {
        assert_eq!(flat.matches(&format!("{action}.execute(")).count(), 1, "{action}");
    }
    let actions: Vec<String> =
        register_actions(&p4.src).into_iter().map(|(n, _)| n).filter(|n| n.starts_with("nonempty")).collect();
    assert_eq!(actions.len(), 3, "{actions:?}");
    // An enqueue sets, a retrieval that leaves its level empty (and holds nothing for a
    // SWAP) clears.
    assert!(flat.contains("if(ig_md.add_op==2){ig_md.nonempty_op=1;}"));
    assert!(flat.contains("if(ig_md.was_valid==0||ig_md.matches==1){ig_md.nonempty_op=2;}"));
}

/// Every ASSIGN, NOOP and REFILL bolt.p4 writes carries BEST in its header prio: an
/// ASSIGN the requester's BEST having got what it asked for, a NOOP the one having got
/// less, a REFILL the one that fits (`Tier2::best_for`; a batch before the last 0). The
/// ingress computes both candidates; the egress, which writes the answer, gets them in
/// the bridge.
#[test]
fn best_is_written_on_every_answer() {
    let p4 = P4::load();
    let flat_all: String = p4.src.split_whitespace().collect();
    assert!(flat_all.contains("hdr.bridge.best_sat=ig_md.best_sat;hdr.bridge.best_unsat=ig_md.best_unsat;"));
    let src = &p4.src[p4.src.find("control BoltAnswer").expect("no BoltAnswer")..];
    let src = &src[..src.find("\n}\n").expect("BoltAnswer ends")];
    let mut seen = BTreeMap::new();
    for (at, _) in src.match_indices("answer_header(OP_") {
        let call = &src[at..];
        let op = call["answer_header(".len()..].split(',').next().unwrap().to_string();
        if op == "OP_QUEUE_FULL" {
            continue;
        }
        let upto = &call[..call.find('}').expect("an answer's branch ends")];
        let stamp = match op.as_str() {
            "OP_ASSIGN" => upto.contains("hdr.bolt.prio = hdr.bridge.best_sat;"),
            "OP_NOOP" => upto.contains("hdr.bolt.prio = hdr.bridge.best_unsat;"),
            "OP_REFILL" => upto.contains("hdr.bolt.prio = eg_md.answer_best;"),
            other => panic!("answer {other}"),
        };
        assert!(stamp, "an {op} leaves without its BEST stamp: {}", &upto[..upto.len().min(200)]);
        *seen.entry(op).or_insert(0) += 1;
    }
    assert_eq!(seen.get("OP_ASSIGN"), Some(&1));
    assert_eq!(seen.get("OP_NOOP"), Some(&1));
    // Every REFILL leaves from a STEP_DELIVER pass (the one that grants the credit),
    // with best_unsat, or the best_sat its last search pass left in the header prio.
    assert_eq!(seen.get("OP_REFILL"), Some(&1));
    let flat: String = src.split_whitespace().collect();
    assert!(
        flat.contains("eg_md.answer_best=hdr.bridge.best_unsat;if(hdr.pass.want==0){eg_md.answer_best=hdr.bolt.prio;}")
    );
    assert!(flat.contains("}elseif(hdr.bridge.outcome==OUT_DELIVER){if((hdr.pass.flags&PF_HOST)!=0){"));
    assert_eq!(src.matches("hdr.bolt.prio = hdr.bridge.best_sat;").count(), 2, "ASSIGN, a last batch");
    // The answer's header is only ever written by answer_header; nothing else zeroes prio.
    let zeroes = src.matches("hdr.bolt.prio = 0;").count();
    assert_eq!(zeroes, 1, "hdr.bolt.prio = 0 outside answer_header");
}

/// The RETURN credit (switch/credit.rs): 4096 {owner, count} pairs at the CRC-32 of the
/// agent's address; touched once per pass, a take on a RETURN's first pass (STEP_CREDIT,
/// both admission paths) and a grant on the pass that sends a REFILL; the take covers
/// min(n, credit) of an owned slot and nothing of another's, the grant takes a slot
/// over from another address or adds with saturation; an entry beyond what is covered
/// touches no queue register and bounces, counted.
#[test]
fn the_return_credit_is_the_software_switchs() {
    let p4 = P4::load();
    let consts = p4.consts();
    assert_eq!(consts["CREDIT_SLOTS"], scheduler_user::switch::CREDIT_SLOTS as u64);
    let flat: String = p4.src.split_whitespace().collect();
    assert!(flat.contains("Register<credit_pair_t,bit<12>>(CREDIT_SLOTS)credit;"));
    assert_eq!(1u64 << 12, consts["CREDIT_SLOTS"]);
    assert!(flat.contains("Hash<bit<12>>(HashAlgorithm_t.CRC32)credit_hash;"));
    assert!(flat.contains("ig_md.credit_slot=credit_hash.get({hdr.ipv4.src_addr});"));
    assert_eq!(
        p4.struct_fields("credit_pair_t"),
        [("bit<32>", "owner"), ("bit<32>", "count")].map(|(t, n)| (t.into(), n.into()))
    );
    let actions: BTreeMap<String, String> = register_actions(&p4.src)
        .into_iter()
        .filter(|(n, _)| n.starts_with("credit_"))
        .map(|(n, b)| (n, b.split_whitespace().collect()))
        .collect();
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert!(actions["credit_grant"].contains(
        "if(value.owner==ig_md.credit_addr){value.count=value.count|+|ig_md.credit_n;read=0;}\
         else{value.owner=ig_md.credit_addr;value.count=ig_md.credit_n;read=1;}"
    ));
    assert!(actions["credit_take"].contains(
        "if(value.owner==ig_md.credit_addr){read=value.count;value.count=value.count|-|ig_md.credit_n;}else{read=0;}"
    ));
    // Once per pass: the take and the grant in one if / else if.
    assert!(flat.contains(
        "if(ig_md.step==STEP_CREDIT){ig_md.credit_n=(bit<32>)hdr.bolt.count;\
         ig_md.credit_held=credit_take.execute(ig_md.credit_slot);\
         ig_md.credit_short=ig_md.credit_n|-|ig_md.credit_held;\
         if(ig_md.credit_short==0){hdr.pass.covered=hdr.bolt.count;}else{hdr.pass.covered=ig_md.credit_held[7:0];}}\
         elseif(ig_md.step==STEP_DELIVER&&(hdr.pass.flags&PF_HOST)!=0){ig_md.credit_n=(bit<32>)hdr.pass.listed;\
         ig_md.credit_takeover=credit_grant.execute(ig_md.credit_slot);"
    ));
    for action in ["credit_take", "credit_grant"] {
        assert_eq!(flat.matches(&format!("{action}.execute(")).count(), 1, "{action}");
    }
    // A RETURN's first queue step is the credit, from the front panel and when steered.
    assert_eq!(flat.matches("elseif(hdr.bolt.op==OP_RETURN){ig_md.step=STEP_CREDIT;}").count(), 2);
    assert!(!flat.contains("ig_md.step=STEP_RETURN;"));
    assert!(flat.contains(
        "if(ig_md.step==STEP_RETURN){if(hdr.pass.covered==0){ig_md.plan_step=0;ig_md.over_credit=1;\
         return_over_credit.count(0);}else{hdr.pass.covered=hdr.pass.covered-1;}}"
    ));
    // min(n, credit), as the P4 computes it, is ReturnCredit::take.
    for (granted, n) in [(0u32, 3u32), (2, 3), (3, 3), (9, 3), (16, 16), (u32::MAX, 1)] {
        let agent = std::net::Ipv4Addr::new(10, 0, 3, 1);
        let mut credit = scheduler_user::switch::ReturnCredit::default();
        credit.grant(agent, granted);
        let held = granted;
        let covered = if n.saturating_sub(held) == 0 { n } else { held };
        assert_eq!(credit.take(agent, n), covered, "granted {granted}, returned {n}");
    }
}

/// bolt.p4 keeps the software switch's queued tasks per resource bit
/// (`queue::ResourceBacklog`): one register per bit and one for tasks that need none, each
/// added to under the bit's own test, with a count up where the model's `enqueue_pass`
/// queues a task and a count down where `deliver` hands one out and where `reinsert_pass`
/// bounces a held one.
#[test]
fn queued_per_resource_bit_counters_match_the_backlog() {
    use scheduler_user::queue::RESOURCE_BITS;
    let p4 = P4::load();
    let src = p4.src.split_whitespace().collect::<Vec<_>>().join(" ");
    for bit in 0..RESOURCE_BITS {
        let guarded = format!("if (ig_md.backlog_rsrc[{bit}:{bit}] == 1) {{ queued_rsrc_{bit}_add.execute(0); }}");
        assert_eq!(src.matches(&guarded).count(), 1, "bit {bit}: {guarded}");
        assert!(src.contains(&format!("Register<bit<32>, bit<1>>(1, 0) queued_rsrc_{bit};")), "bit {bit}");
    }
    assert!(!src.contains(&format!("queued_rsrc_{RESOURCE_BITS}")), "more registers than resource bits");
    let unconstrained = "if (ig_md.backlog_rsrc == 0) { queued_unconstrained_add.execute(0); }";
    assert_eq!(src.matches(unconstrained).count(), 1);
    assert_eq!(src.matches("value = value + ig_md.backlog_delta;").count(), RESOURCE_BITS + 1);
    assert_eq!(src.matches("ig_md.backlog_delta = 1;").count(), 1, "one count-up site: an enqueue");
    assert_eq!(
        src.matches("ig_md.backlog_delta = 0xffffffff;").count(),
        2,
        "two count-down sites: a delivery and a reinsert's bounce"
    );
    assert!(src.contains("ig_md.backlog_rsrc = hdr.entry_out.rsrc; ig_md.backlog_delta = 0xffffffff;"));
}

/// One row of pass_outcome: (value, mask) per key, the action and its arguments.
struct OutcomeRow {
    keys: Vec<(u64, u64)>,
    action: String,
    args: Vec<u64>,
}

/// The rows of pass_outcomes.p4inc in order, its `#define`s expanded, constants valued.
fn pass_outcome_rows(p4: &P4) -> Vec<OutcomeRow> {
    let consts = p4.consts();
    let text = strip_comments(&read("pass_outcomes.p4inc"));
    let mut macros = BTreeMap::new();
    let mut body = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(def) = line.strip_prefix("#define ") {
            let (name, value) = def.split_once(' ').expect("a #define with a value");
            macros.insert(name.to_string(), value.trim().to_string());
        } else if !line.starts_with('#') {
            body.push_str(line);
            body.push('\n');
        }
    }
    fn eval(e: &str, consts: &BTreeMap<String, u64>) -> u64 {
        let e = e.trim();
        if let Some(inner) = e.strip_prefix('(').and_then(|i| i.strip_suffix(')')) {
            return eval(inner, consts);
        }
        if e.contains('|') {
            return e.split('|').map(|p| eval(p, consts)).fold(0, |a, b| a | b);
        }
        if let Some((a, b)) = e.split_once(" - ") {
            return eval(a, consts) - eval(b, consts);
        }
        match consts.get(e) {
            Some(v) => *v,
            None => parse_int(e),
        }
    }
    let mut rows = Vec::new();
    for stmt in body.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (keyset, action) = stmt.rsplit_once(") :").expect("a row is (keys) : action(args)");
        let keys = split_top(keyset.trim().trim_start_matches('('))
            .iter()
            .map(|k| {
                let k = macros.get(k.trim()).cloned().unwrap_or_else(|| k.trim().to_string());
                match k.split_once("&&&") {
                    _ if k == "_" => (0, 0),
                    Some((v, m)) => (eval(v, &consts), eval(m, &consts)),
                    None => (eval(&k, &consts), u64::MAX),
                }
            })
            .collect();
        let (name, args) = action.trim().split_once('(').expect("an action call");
        let args = args.trim_end_matches(')').split(',').filter(|a| !a.trim().is_empty());
        rows.push(OutcomeRow { keys, action: name.trim().to_string(), args: args.map(|a| eval(a, &consts)).collect() });
    }
    rows
}

/// pass_outcome decides each pass as the model's passes do (queue/pipeline.rs): for every
/// combination of what a pass can find, the first matching row sends the packet where the
/// model's pass sends its packets, under the rule a Tofino pass follows to emit them (one
/// packet goes on, or leaves as the answer; a REPAIR spawned next to it forks; a bounced
/// task leaves in a mirror copy unless nothing else leaves, when the packet is its
/// QUEUE_FULL; a full batch while more is wanted is sent by the packet and searched on by
/// a mirror copy). Every row is the first match of some case, and every case has one.
#[test]
fn pass_outcomes_make_the_models_decisions() {
    let p4 = P4::load();
    let c = p4.consts();
    let rows = pass_outcome_rows(&p4);
    assert!(rows.iter().all(|r| r.keys.len() == 13), "every row has the 13 keys of pass_outcome");
    let table = table_body(&p4.src, "pass_outcome");
    assert_eq!(table.matches(": ternary;").count(), 13);

    // What one pass leaves behind, in the model's terms.
    #[derive(Default)]
    struct Leaves {
        goes_on: Option<u64>,       // the packet recirculates with this outcome
        answer: Option<u64>,        // the packet leaves as this answer
        bounce: Option<(u64, u64)>, // a refused task: mirror session, its copy's layout
        repair: bool,               // enqueue spawned a REPAIR
        search_on: bool,            // a full batch; the search goes on in a copy
    }
    // key: step, copy, flags, more, added, spawn_repair, was_valid, matches, past_tail,
    // budget, last_level, listed, want
    let model = |k: &[u64; 13]| -> Leaves {
        let [step, copy, flags, more, added, spawn, was_valid, matches, past_tail, budget, last, listed, want] = *k;
        let host = flags & c["PF_HOST"] != 0;
        let sent = flags & c["PF_BATCH_SENT"] != 0;
        let mut out = Leaves { repair: spawn == 1, ..Leaves::default() };
        if copy == c["PASS_SPAWN"] {
            if flags & c["PF_MIRROR_BOUNCE"] != 0 {
                out.answer = Some(c["OUT_QUEUE_FULL"]);
            }
            return out;
        }
        // Pipeline::finish, next_level, deliver
        let finish = |out: &mut Leaves| {
            if !host {
                out.answer = Some(c["OUT_NOOP"]);
            } else if listed != 0 || !sent {
                out.goes_on = Some(c["OUT_REFILL_LAST"]);
            }
        };
        let next_level = |out: &mut Leaves| {
            if last == 0 {
                out.goes_on = Some(c["OUT_NEXT_LEVEL"]);
            } else {
                finish(out);
            }
        };
        let deliver = |out: &mut Leaves| {
            if !host {
                out.answer = Some(c["OUT_ASSIGN"]);
            } else if want == 1 {
                out.goes_on = Some(c["OUT_REFILL_DONE"]);
            } else if listed + 1 == c["MAX_LIST"] {
                out.goes_on = Some(c["OUT_REFILL_FULL"]);
                out.search_on = true;
            } else {
                out.goes_on = Some(c["OUT_REFILL_MORE"]);
            }
        };
        match step {
            s if s == c["STEP_SUBMIT"] || s == c["STEP_RETURN"] => {
                if more == 1 {
                    out.goes_on = Some(c["OUT_ITEM_DONE"]);
                }
                if added == 0 {
                    out.bounce = Some(if s == c["STEP_SUBMIT"] {
                        (c["MIRROR_SUBMIT_BOUNCE"], c["PP_QUEUE_FULL"])
                    } else {
                        (c["MIRROR_RETURN_BOUNCE"], c["PP_BOUNCE_ENTRY"])
                    });
                }
            }
            s if s == c["STEP_CREDIT"] => out.goes_on = Some(c["OUT_CREDIT_TAKEN"]),
            s if s == c["STEP_DELIVER"] => out.answer = Some(c["OUT_DELIVER"]),
            s if s == c["STEP_RETRIEVE"] => {
                if was_valid == 0 {
                    next_level(&mut out);
                } else if matches == 1 {
                    deliver(&mut out);
                } else {
                    out.goes_on = Some(c["OUT_SWAP"]);
                }
            }
            s if s == c["STEP_SWAP"] => {
                if budget == 0 {
                    out.goes_on = Some(c["OUT_SWAP_SPENT"]);
                } else if past_tail == 1 {
                    out.goes_on = Some(c["OUT_SWAP_PAST_TAIL"]);
                } else if was_valid == 0 {
                    out.goes_on = Some(c["OUT_SWAP_FILLED"]);
                } else if matches == 1 {
                    deliver(&mut out);
                } else {
                    out.goes_on = Some(c["OUT_SWAP"]);
                }
            }
            s if s == c["STEP_REINSERT"] => {
                if added == 0 {
                    out.bounce = Some(if host {
                        (c["MIRROR_HELD_REFILL"], c["PP_BOUNCE_HELD_REFILL"])
                    } else {
                        (c["MIRROR_HELD_GET"], c["PP_BOUNCE_HELD_GET"])
                    });
                }
                next_level(&mut out);
            }
            other => panic!("step {other}"),
        }
        out
    };
    // How a Tofino pass emits what the model's pass leaves.
    let emit = |step: u64, l: &Leaves| -> (String, Vec<u64>) {
        let with_bounce = |name: &str, mut args: Vec<u64>| match l.bounce {
            Some((session, path)) => {
                args.extend([session, path]);
                (format!("{name}_bounce"), args)
            }
            None => (name.to_string(), args),
        };
        if l.search_on {
            assert!(!l.repair && l.bounce.is_none());
            let name = if step == c["STEP_SWAP"] { "search_on_from_swap" } else { "search_on" };
            return (name.to_string(), vec![l.goes_on.unwrap()]);
        }
        match (l.goes_on, l.answer, l.repair) {
            (Some(o), None, true) | (None, Some(o), true) => with_bounce("fork", vec![o]),
            (Some(o), None, false) => with_bounce("recirculate", vec![o]),
            (None, Some(o), false) => with_bounce("answer", vec![o]),
            (None, None, true) => with_bounce("repair_alone", vec![]),
            (None, None, false) if l.bounce.is_some() => ("answer".to_string(), vec![c["OUT_QUEUE_FULL"]]),
            (None, None, false) => ("drop_pass".to_string(), vec![]),
            (Some(_), Some(_), _) => panic!("a pass both goes on and answers"),
        }
    };

    let enqueue_steps = [c["STEP_SUBMIT"], c["STEP_RETURN"], c["STEP_REINSERT"]];
    let steps = [c["STEP_SUBMIT"], c["STEP_RETURN"], c["STEP_CREDIT"], c["STEP_DELIVER"], c["STEP_RETRIEVE"]]
        .into_iter()
        .chain([c["STEP_SWAP"], c["STEP_REINSERT"]]);
    let mut cases: Vec<[u64; 13]> = Vec::new();
    let flag_sets = [0, c["PF_HOST"], c["PF_BATCH_SENT"], c["PF_HOST"] | c["PF_BATCH_SENT"]];
    for (step, copy) in steps.map(|s| (s, c["PASS_CONTINUE"])).chain([(0, c["PASS_SPAWN"])]) {
        for flags in flag_sets.into_iter().flat_map(|f| [f, f | c["PF_MIRROR_BOUNCE"]]) {
            for bits in 0..1u64 << 9 {
                let b = |i: u32| (bits >> i) & 1;
                let (more, added, spawn, was_valid, matches, past_tail, last) =
                    (b(0), b(1), b(2), b(3), b(4), b(5), b(6));
                // only an enqueue queues a task or spawns a REPAIR
                if !enqueue_steps.contains(&step) && (added == 1 || spawn == 1) {
                    continue;
                }
                // the mirror-bounce flag is kept only on a bounce's own copy (pass setup
                // clears it on every other)
                if flags & c["PF_MIRROR_BOUNCE"] != 0 && copy != c["PASS_SPAWN"] {
                    continue;
                }
                for budget in [0, 3] {
                    for listed in [0, 1, c["MAX_LIST"] - 1] {
                        for want in [1, 2 + b(7) + 2 * b(8)] {
                            cases.push([
                                step, copy, flags, more, added, spawn, was_valid, matches, past_tail, budget, last,
                                listed, want,
                            ]);
                        }
                    }
                }
            }
        }
    }
    let mut used = vec![false; rows.len()];
    for case in &cases {
        let hit = rows
            .iter()
            .position(|r| r.keys.iter().zip(case).all(|((v, m), k)| k & m == v & m))
            .unwrap_or_else(|| panic!("no pass_outcome row for {case:?}"));
        used[hit] = true;
        let row = &rows[hit];
        let want = emit(case[0], &model(case));
        assert_eq!((row.action.clone(), row.args.clone()), want, "pass_outcome row {hit} for {case:?}");
    }
    let dead: Vec<usize> = used.iter().enumerate().filter(|(_, u)| !**u).map(|(i, _)| i).collect();
    assert!(dead.is_empty(), "pass_outcome rows no case reaches: {dead:?}");
}

/// The body of `control NAME` (up to its closing brace at the start of a line).
fn control_body<'a>(src: &'a str, name: &str) -> &'a str {
    let at = src.find(&format!("\ncontrol {name}(")).unwrap_or_else(|| panic!("no control {name}"));
    let body = &src[at + 1..];
    &body[..body.find("\n}").expect("control does not close")]
}

/// The queue pass's chain ends at the decision: the ingress makes one decision per pass
/// and sends the packet, and the egress (BoltAnswer) writes the packet for that outcome,
/// so the answer (next step, layout, answer header, BEST, address) is off the ingress's
/// stages. The forwarding lookup does not wait for the decision: it is keyed on the
/// address an answer would go to, known before the queue pass. The egress parser finds
/// the headers the bridge lists in the ingress deparser's order.
#[test]
fn the_answer_is_written_in_the_egress() {
    let p4 = P4::load();
    let consts = p4.consts();
    let rows = pass_outcome_rows(&p4);
    let answer = control_body(&p4.src, "BoltAnswer");
    let outcomes: Vec<&String> = consts.keys().filter(|k| k.starts_with("OUT_") && *k != "OUT_NONE").collect();
    assert!(outcomes.len() >= 15, "{outcomes:?}");
    for out in outcomes {
        let v = consts[out.as_str()];
        assert!(
            rows.iter().any(|r| r.action != "repair_alone" && r.args.first() == Some(&v)),
            "no pass_outcome row decides {out}"
        );
        assert!(answer.contains(&format!("hdr.bridge.outcome == {out}")), "BoltAnswer does not write {out}");
    }
    // No ingress control writes what the egress writes.
    for control in ["BoltQueuePass", "BoltOutcome"] {
        let body = control_body(&p4.src, control);
        for write in [
            "answer_header(",
            "hdr.pass.step =",
            "hdr.pass.parse_path =",
            "hdr.bolt.count =",
            "hdr.bolt.prio =",
            "hdr.pass.listed =",
        ] {
            assert!(!body.contains(write), "{control} writes {write}");
        }
    }
    let outcome = control_body(&p4.src, "BoltOutcome");
    let flat: String = outcome.split_whitespace().collect();
    assert_eq!(flat.matches("pass_outcome.apply()").count(), 1);
    let lookup = flat.find("if(hdr.ipv4.isValid()){ipv4_route.apply();}else{l2_switch.apply();}").expect("the lookup");
    assert!(lookup < flat.find("pass_outcome.apply()").unwrap(), "the route is looked up before the decision");
    assert!(table_body(&p4.src, "ipv4_route").contains("hdr.bridge.answer_ip : lpm;"));
    // Each counter of the egress counts once per pass: not on the fork's REPAIR copy.
    let counted = &answer[answer.find("if (eg_md.counted == 1) {").expect("the counters' guard")..];
    for counter in ["swaps", "budget_exhausted", "deliveries"] {
        assert!(counted.contains(&format!("{counter}.count(")), "{counter} is counted outside the guard");
    }
    // The bridge lists the headers after the Bolt header; the egress parser takes them in
    // the order the ingress deparser emits them.
    let listed: Vec<String> = p4
        .header("bolt_bridge_h")
        .into_iter()
        .filter_map(|(f, _)| f.strip_prefix("has_").map(str::to_string))
        .collect();
    assert_eq!(listed.len(), 8, "{listed:?}");
    let emit_order = |control: &str| -> Vec<String> {
        let at = p4.src.find(control).unwrap();
        let body = &p4.src[at..];
        let body = &body[..body.find("\n}\n").unwrap()];
        body.match_indices("(hdr.")
            .map(|(i, _)| body[i + 5..].split(')').next().unwrap().to_string())
            .filter(|h| listed.contains(h))
            .collect()
    };
    let emitted = emit_order("control BoltIngressDeparser");
    let parsed = emit_order("parser BoltEgressParser");
    assert_eq!(emitted, listed, "the bridge lists the ingress deparser's headers in its order");
    assert_eq!(parsed, listed, "the egress parser takes them in that order");
    for h in &listed {
        assert!(
            flat.contains(&format!("if(hdr.{h}.isValid()){{hdr.bridge.has_{h}=1;}}")),
            "the bridge's has_{h} is not set from hdr.{h}'s validity"
        );
        assert!(
            p4.src.contains(&format!("transition select(hdr.bridge.has_{h}) {{ 1 : parse_{h};")),
            "the egress parser does not extract {h} by its bit"
        );
    }
}

//! Fails when p4/bolt.p4 and scheduler-common disagree: header field names, widths and
//! order for every layout the P4 program parses, the protocol constants, the list and
//! stack sizes, the priority and queue geometry, and the message lengths it checks and
//! writes. bolt.p4 is read as text; Rust has no reflection, so each layout's fields are
//! listed here once, and `offset_of!`/`size_of` check that list against the structs so
//! the list itself cannot drift.

use std::collections::{BTreeMap, BTreeSet};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;

use scheduler_common::{
    decode, message_len, DecodeError, Entry, Header, JobRef, Op, RefillRequest, RepairState, Requester, SwapState,
    Task, DEFAULT_PORT, DEFAULT_PRIORITIES, KNOWN_HEADER_FLAGS, KNOWN_TASK_FLAGS, MAGIC, MAX_LIST, MAX_PRIORITIES,
    REPAIR_ADD_PTR, REPAIR_RETRIEVE_PTR, VERSION,
};
use scheduler_user::queue::{QueueConfig, DRIFT_LIMIT};

fn p4_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../p4")
}

fn read(name: &str) -> String {
    let path = p4_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
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
        P4 { src: strip_comments(&read("bolt.p4")) }
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
            // Literals only; expressions over macros (QUEUE_CAPACITY) are checked elsewhere.
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
    check_layout(
        &p4,
        "RefillRequest",
        size_of::<RefillRequest>(),
        RefillRequest::LEN,
        &[
            field!(RefillRequest, node, 2, [("node", 16)]),
            field!(RefillRequest, want, 1, [("want", 8)]),
            field!(RefillRequest, pad, 1, [("pad", 8)]),
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
    // Completion is not parsed by the switch: COMPLETE goes from executor to client and
    // is only length-checked (and dropped) if it is addressed to the scheduler.
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
    assert_eq!(get("KNOWN_HEADER_FLAGS"), KNOWN_HEADER_FLAGS as u64);
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

#[test]
fn list_stacks_and_queue_geometry_match() {
    let p4 = P4::load();
    let fields = p4.struct_fields("headers_t");
    let decl = |name: &str| -> String {
        fields.iter().find(|(_, n)| n == name).unwrap_or_else(|| panic!("headers_t has no {name}")).0.clone()
    };
    // A SUBMIT's refused tasks (all 16 when everything is refused), the tasks after the
    // current one on the first pass, and up to 16 ENTRYs (RETURN, REFILL batches).
    assert_eq!(decl("tasks_before"), "task_h[MAX_LIST]");
    assert_eq!(decl("tasks_after"), "task_h[MAX_LIST - 1]");
    assert_eq!(decl("entries"), "entry_h[MAX_LIST]");

    let levels = 1u64 << p4.define("QUEUE_LEVEL_BITS");
    assert_eq!(levels, DEFAULT_PRIORITIES as u64, "compiled levels differ from the default priority count");
    assert!(levels <= MAX_PRIORITIES as u64);
    let capacity = 1u64 << p4.define("QUEUE_INDEX_BITS");
    assert_eq!(capacity, QueueConfig::default().capacity as u64, "compiled capacity differs from the model's");

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
            // Only GET_TASK gives the header's prio a meaning; elsewhere it must be zero.
            let prio = if op == Op::GetTask { 1 } else { 0 };
            buf[..Header::LEN].copy_from_slice(scheduler_common::as_bytes(&Header::new(op, count, prio, 0, 0)));
            let body = &mut buf[Header::LEN..];
            // Valid content where decode checks it: priorities 1, REFILL_REQ want 1.
            match op {
                Op::Submit | Op::QueueFull => {
                    (0..count as usize).for_each(|i| body[JobRef::LEN + i * Task::LEN + 4] = 1)
                }
                Op::Assign | Op::Refill | Op::Return => (0..count as usize).for_each(|i| body[i * Entry::LEN + 12] = 1),
                Op::RefillReq => body[2] = 1,
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
    let rc_bolt = &parser[parser.find("state rc_bolt").unwrap()..];
    let rc_bolt = &rc_bolt[..rc_bolt.find("state rc_submit").unwrap()];
    for path in &paths {
        assert!(rc_bolt.contains(&format!("{path} ")), "parse path {path} has no branch in rc_bolt");
        let written = src.matches(&format!("parse_path = {path};")).count()
            + src.matches(&format!("spawn_path = {path};")).count();
        assert!(written > 0, "parse path {path} is never written by a pass");
    }
}
